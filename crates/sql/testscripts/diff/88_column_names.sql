-- A result column without an alias is named as SQLite names it: the expression as written
-- (spacing, case and comments kept), a column by its own name without its table's, an alias
-- as given; the names of a subquery's, a view-like WITH's and a compound query's columns.
CREATE TABLE cn (id INTEGER PRIMARY KEY, a INTEGER, T TEXT);
INSERT INTO cn VALUES (1, 10, 'x'), (2, 20, 'y');
SELECT a+1, a + 1, a   *   2, -a, NOT a, a IS NULL FROM cn;
SELECT cn.a, cn.T, t, A FROM cn;
SELECT count(*), COUNT( * ), sum(a), max(a) - min(a), group_concat(T, '-') FROM cn;
SELECT CAST(a AS TEXT), a BETWEEN 1 AND 15, T LIKE 'x%', coalesce(NULL, a), CASE WHEN a > 10 THEN 'big' ELSE 'small' END FROM cn;
SELECT 1 /* one */ + 2, 'it''s', x'ff', 1.5e3, NULL;
SELECT a AS "The A", T b, (a) FROM cn;
SELECT (SELECT max(a) FROM cn), EXISTS (SELECT 1 FROM cn WHERE a > 15), a IN (10, 30) FROM cn;
SELECT * FROM (SELECT a+1, T || '!' FROM cn);
SELECT s.x FROM (SELECT a * 2 AS x FROM cn) AS s;
WITH w AS (SELECT a - 1, upper(T) FROM cn) SELECT * FROM w;
SELECT a + 0 FROM cn UNION ALL SELECT id FROM cn;
INSERT INTO cn VALUES (3, 30, 'z') RETURNING id*2, T, a + id;
UPDATE cn SET a = a + 1 WHERE id = 3 RETURNING a, a - 1;
DELETE FROM cn WHERE id = 3 RETURNING T || T;
