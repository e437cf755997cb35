-- UPDATE and DELETE that walk a range of keys test their filters on each row where it is
-- stored: comparisons, BETWEEN, LIKE and IS NULL of a column against fixed values, mixed with
-- conditions evaluated on decoded columns, over NULLs, reals, text under numeric affinities,
-- blobs and columns added after rows.
CREATE TABLE wf (id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, a ANY, b BLOB);
INSERT INTO wf VALUES (1, 5, 5.0, '5', 5, x'05'), (2, -3, 2.5, 'abc', 2.5, x''), (3, NULL, NULL, NULL, NULL, NULL), (4, 9007199254740993, 9007199254740992.0, '10', '10', x'ff00'), (5, 0, -0.0, 'Ärger', 'x5', x'616263'), (6, 1, 1.5, 'ABC fifty', x'05', x'00'), (7, -9223372036854775808, -1e300, '', '', x'41'), (8, 9223372036854775807, 1e300, 'a%b_c', 'a%b_c', x'6125'), (9, 12, 12.0, 'twelve', 12, x'3132'), (10, 2, 0.1, 'Fifty-two', '2.0', x'32');
CREATE TABLE wf2 (id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, a ANY, b BLOB);
INSERT INTO wf2 SELECT * FROM wf;
UPDATE wf SET r = r + 1 WHERE t LIKE '%fifty%';
SELECT * FROM wf ORDER BY id;
UPDATE wf SET t = t || '!' WHERE i BETWEEN -3 AND 5 AND length(t) > 1;
SELECT * FROM wf ORDER BY id;
UPDATE wf SET i = 7 WHERE id BETWEEN 2 AND 8 AND a > '2' AND r IS NOT NULL;
SELECT * FROM wf ORDER BY id;
UPDATE wf SET a = 1 WHERE i > '4' OR r < 0;
SELECT * FROM wf ORDER BY id;
UPDATE wf SET b = x'ee' WHERE a = 5 AND i IS NULL;
SELECT * FROM wf ORDER BY id;
DELETE FROM wf WHERE t LIKE '%!%' ESCAPE '\';
SELECT * FROM wf ORDER BY id;
DELETE FROM wf WHERE r BETWEEN 0 AND 5.5 AND id > 3;
SELECT * FROM wf ORDER BY id;
DELETE FROM wf WHERE i IS NULL OR a LIKE 'a%';
SELECT * FROM wf ORDER BY id;
DELETE FROM wf2 WHERE i BETWEEN -3 AND 12;
SELECT * FROM wf2 ORDER BY id;
DELETE FROM wf2 WHERE id BETWEEN 3 AND 8 AND t > 5;
SELECT * FROM wf2 ORDER BY id;
DELETE FROM wf2 WHERE t LIKE 5;
SELECT * FROM wf2 ORDER BY id;
ALTER TABLE wf2 ADD COLUMN n INTEGER;
INSERT INTO wf2 (id, i, n) VALUES (11, 11, 7), (12, 12, NULL);
UPDATE wf2 SET i = i + 1 WHERE n IS NULL;
SELECT * FROM wf2 ORDER BY id;
DELETE FROM wf2 WHERE n > 3;
SELECT * FROM wf2 ORDER BY id;
DELETE FROM wf2 WHERE n IS NULL AND i > 0;
SELECT * FROM wf2 ORDER BY id;
