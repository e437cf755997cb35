-- Equality probes on an index's leading columns (one range over the index, its bounds built in
-- one buffer): integers, reals, texts, blobs ending in 0xFF bytes, NULL, values of other types
-- than the column's, a composite index probed on its first column and on both, in a join.
CREATE TABLE ip (id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c BLOB, d REAL);
CREATE INDEX ip_a ON ip(a);
CREATE INDEX ip_bd ON ip(b, d);
CREATE INDEX ip_c ON ip(c);
INSERT INTO ip VALUES (1, 1, 'x', x'FF', 1.5), (2, 1, 'x', x'FFFF', 2.5), (3, 2, 'y', x'FF00', NULL), (4, NULL, NULL, NULL, 4), (5, -1, 'x', x'', 1.5), (6, 9223372036854775807, 'z', x'00FF', -0.0), (7, 2, 'y', x'FEFF', 7);
SELECT id FROM ip WHERE a = 1;
SELECT id FROM ip WHERE a = 1.0;
SELECT id FROM ip WHERE a = '2';
SELECT id FROM ip WHERE a = NULL;
SELECT id FROM ip WHERE a = 9223372036854775807;
SELECT id FROM ip WHERE a = -1;
SELECT id FROM ip WHERE c = x'FF';
SELECT id FROM ip WHERE c = x'FFFF';
SELECT id FROM ip WHERE c = x'FF00';
SELECT id FROM ip WHERE c = x'';
SELECT id FROM ip WHERE c = x'FEFF';
SELECT id FROM ip WHERE b = 'x';
SELECT id FROM ip WHERE b = 'x' AND d = 1.5;
SELECT id FROM ip WHERE b = 'y' AND d = 7;
SELECT id FROM ip WHERE b = 'z' AND d = 0;
SELECT id FROM ip WHERE b = 'x' ORDER BY id DESC;
SELECT p.id, q.id FROM ip p JOIN ip q ON q.a = p.a WHERE p.id < 4 ORDER BY p.id, q.id;
SELECT p.id, q.id FROM ip p JOIN ip q ON q.c = p.c ORDER BY p.id, q.id;
SELECT p.id, count(q.id) FROM ip p LEFT JOIN ip q ON q.b = p.b AND q.id <> p.id GROUP BY p.id ORDER BY p.id;
