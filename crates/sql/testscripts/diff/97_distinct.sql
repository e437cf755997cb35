-- DISTINCT over plain columns (keyed from the frame, repeats dropped before the row is built)
-- and over expressions: equal integers and reals, NULLs, text and blobs, a join, a limit.
CREATE TABLE ds (id INTEGER PRIMARY KEY, a INTEGER, r REAL, t TEXT, b BLOB);
INSERT INTO ds VALUES (1, 1, 1.0, 'x', X'01'), (2, 1, 1.5, 'x', X'01'), (3, NULL, NULL, NULL, NULL), (4, 2, 2.0, 'y', X'02'), (5, NULL, NULL, 'y', NULL), (6, 1, 1.0, 'X', X'01'), (7, 2, 2.0, 'y', X'0201');
SELECT DISTINCT a FROM ds;
SELECT DISTINCT t FROM ds;
SELECT DISTINCT a, r FROM ds;
SELECT DISTINCT r, a FROM ds ORDER BY r, a;
SELECT DISTINCT b FROM ds;
SELECT DISTINCT a, t FROM ds ORDER BY t DESC, a;
SELECT DISTINCT a FROM ds LIMIT 2;
SELECT DISTINCT a FROM ds ORDER BY a LIMIT 2 OFFSET 1;
SELECT DISTINCT a % 2, t FROM ds;
SELECT DISTINCT lower(t) FROM ds;
SELECT DISTINCT r FROM ds WHERE a IS NOT NULL;
SELECT DISTINCT x.a, y.t FROM ds x JOIN ds y ON y.a = x.a ORDER BY 1, 2;
SELECT DISTINCT a FROM (SELECT r AS a FROM ds UNION ALL SELECT a FROM ds) ORDER BY a;
SELECT count(*) FROM (SELECT DISTINCT a, t FROM ds);
SELECT t, (SELECT DISTINCT a FROM ds d WHERE d.t = ds.t ORDER BY a LIMIT 1) FROM ds ORDER BY id;
