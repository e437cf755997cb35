-- A column the result names once is moved out of the row being built instead of copied: every
-- row of a scan, an index probe with several matches, a join's inner rows under one outer row
-- (whose own columns stay), a column named twice or also inside an expression or a subquery,
-- ORDER BY, DISTINCT, LIMIT and a LEFT JOIN's missing row.
CREATE TABLE mv (id INTEGER PRIMARY KEY, a INTEGER, t TEXT, b BLOB);
CREATE INDEX mv_a ON mv(a);
INSERT INTO mv VALUES (1, 1, 'one', x'01'), (2, 1, 'two', x'02'), (3, 2, 'three', NULL), (4, 2, 'four', x''), (5, 3, NULL, x'05');
CREATE TABLE mw (id INTEGER PRIMARY KEY, m INTEGER, u TEXT);
CREATE INDEX mw_m ON mw(m);
INSERT INTO mw VALUES (10, 1, 'ten'), (11, 1, 'eleven'), (12, 2, 'twelve'), (13, 9, 'thirteen');
SELECT t, b FROM mv;
SELECT * FROM mv WHERE a = 1;
SELECT * FROM mv WHERE id = 3;
SELECT t, t FROM mv;
SELECT t, length(t), t || '!' FROM mv WHERE a = 2;
SELECT t FROM mv ORDER BY t;
SELECT t, id FROM mv ORDER BY id DESC LIMIT 2 OFFSET 1;
SELECT DISTINCT a FROM mv;
SELECT DISTINCT a, t FROM mv;
SELECT t, (SELECT count(*) FROM mw WHERE mw.u > mv.t) FROM mv;
SELECT mv.t, mw.u FROM mv JOIN mw ON mw.m = mv.a;
SELECT mv.t, mw.u, mw.id FROM mv JOIN mw ON mw.m = mv.a ORDER BY mw.id, mv.id;
SELECT mw.u, mv.t FROM mw JOIN mv ON mv.a = mw.m;
SELECT mv.t, mw.u FROM mv LEFT JOIN mw ON mw.m = mv.a;
SELECT mv.t, mw.u FROM mv, mw WHERE mw.id = mv.id + 9;
SELECT mv.t, mw.u FROM mv JOIN mw ON mw.u > mv.t;
SELECT t FROM mv WHERE a = 1 UNION ALL SELECT t FROM mv WHERE a = 1;
SELECT t FROM mv UNION SELECT u FROM mw;
SELECT t FROM mv WHERE t IN (SELECT t FROM mv WHERE a = 2);
SELECT x.t FROM (SELECT t FROM mv WHERE a < 3) AS x;
