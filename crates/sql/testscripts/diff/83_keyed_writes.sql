-- UPDATEs and DELETEs by key, one after the other over tables of different widths (their
-- buffers are kept from statement to statement), some failing part way, some naming keys
-- that are not there, between writes of ranges and of whole tables.
CREATE TABLE kw (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b TEXT);
CREATE TABLE kw2 (k INTEGER PRIMARY KEY, x INTEGER, y TEXT, z REAL, w INTEGER NOT NULL);
INSERT INTO kw VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 30, NULL), (4, 40, 'four');
INSERT INTO kw2 VALUES (1, 1, 'a', 1.5, 1), (2, 2, 'b', NULL, 2), (5, 5, 'e', 5.5, 5);
UPDATE kw2 SET y = y || '!', z = 2 WHERE k = 5;
UPDATE kw SET a = a + 1 WHERE id = 2;
UPDATE kw SET b = 'gone' WHERE id = 9;
UPDATE kw2 SET w = NULL WHERE k = 1;
UPDATE kw SET a = NULL WHERE id = 3;
UPDATE kw SET b = b || b WHERE id IN (1, 3, 4, 7);
DELETE FROM kw2 WHERE k = 2;
DELETE FROM kw WHERE id = 8;
UPDATE kw2 SET x = x * 10 WHERE k = 1;
SELECT * FROM kw ORDER BY id;
SELECT * FROM kw2 ORDER BY k;
UPDATE kw SET a = a + 100 WHERE id BETWEEN 2 AND 3;
DELETE FROM kw WHERE id = 1;
UPDATE kw2 SET z = k WHERE k = 5;
UPDATE kw SET b = 'x' || a WHERE id = 4;
DELETE FROM kw2 WHERE k IN (1, 3);
UPDATE kw SET a = 'text' WHERE id = 2;
UPDATE kw SET a = '7' WHERE id = 2;
SELECT * FROM kw ORDER BY id;
SELECT * FROM kw2 ORDER BY k;
