-- Adaptive semi- and anti-joins: EXISTS / NOT EXISTS whose equality a key or an index serves
-- run per outer row until those runs cost about a sixteenth of the inner table's entries,
-- then probe a set built once; LEFT JOIN ... WHERE t.c IS NULL runs as NOT EXISTS. Tables of
-- a few hundred rows so that both phases run in one statement, with NULLs and duplicates in
-- the join columns, an empty inner side, other conditions on either side, and parameters.
CREATE TABLE d10 (i INTEGER PRIMARY KEY);
INSERT INTO d10 VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
CREATE TABLE ao (id INTEGER PRIMARY KEY, k INTEGER, t TEXT, b INTEGER);
INSERT INTO ao SELECT a.i * 100 + b.i * 10 + c.i + 1, CASE WHEN c.i = 7 THEN NULL ELSE (a.i * 37 + b.i * 11 + c.i) % 250 END, CASE WHEN b.i = 4 THEN NULL ELSE 'v' || ((a.i * 7 + c.i) % 40) END, a.i * 10 + c.i FROM d10 a, d10 b, d10 c;
CREATE TABLE ai (id INTEGER PRIMARY KEY, k INTEGER, t TEXT, w INTEGER NOT NULL);
INSERT INTO ai SELECT (a.i * 100 + b.i * 10 + c.i) * 3, CASE WHEN b.i = 9 THEN NULL ELSE (a.i * 13 + c.i * 5) % 300 END, CASE WHEN c.i = 2 THEN NULL ELSE 'v' || ((a.i + b.i * 3) % 55) END, (a.i + b.i + c.i) % 10 FROM d10 a, d10 b, d10 c WHERE a.i < 4;
CREATE TABLE ae (id INTEGER PRIMARY KEY, k INTEGER);
CREATE INDEX ai_k ON ai(k);
CREATE INDEX ai_t ON ai(t);
-- On the integer key of the inner table.
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id);
SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id);
SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.k);
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.k);
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id AND ai.w > 4);
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id + 1) AND ao.b > 40;
SELECT count(*) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.t);
SELECT count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id * 1.0);
SELECT id FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id AND ai.w = 3) ORDER BY id DESC LIMIT 7;
-- On a non-unique index, with duplicates and NULLs on both sides.
SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k);
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k);
SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k AND ai.w > 6);
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k AND ai.w > 6);
SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.t = ao.t);
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.t = ao.t AND ai.k < 100);
SELECT count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.t = ao.k);
SELECT count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.t);
SELECT ao.k, count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k) GROUP BY ao.k ORDER BY ao.k LIMIT 12;
SELECT id, EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k), NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id) FROM ao WHERE id % 97 = 0 ORDER BY id;
-- The correlated column on both sides: the subquery also reads the outer row elsewhere.
SELECT count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k AND ai.w < ao.b % 10);
SELECT count(*) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id AND ai.k = ao.k);
-- A whole outer table scanned: its row count decides at the first row (a small one keeps
-- the lookups to the end, a large one builds the set at once); with another condition on the
-- outer rows, or a LIMIT, the runs decide as they go.
SELECT count(*) FROM d10 WHERE EXISTS (SELECT 1 FROM ai WHERE ai.id = d10.i * 3);
SELECT count(*) FROM d10 WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.k = d10.i);
SELECT count(*), sum(b) FROM ao WHERE ao.b >= 0 AND NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id);
SELECT id FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id) ORDER BY id LIMIT 40;
SELECT count(*) FROM (SELECT id FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k));
SELECT count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ao x WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = x.id) AND x.id = ao.id);
-- An empty inner side.
SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ae WHERE ae.id = ao.id);
SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ae WHERE ae.id = ao.id);
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ae ON ae.id = ao.id WHERE ae.id IS NULL;
-- LEFT JOIN ... IS NULL, as NOT EXISTS where it can be: on the key, on an indexed column,
-- on a NOT NULL column, with other conditions in ON and in WHERE.
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.id IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.k = ao.k WHERE ai.k IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.k = ao.k WHERE ai.id IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.k = ao.k AND ai.w > 5 WHERE ai.w IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai x ON x.id = ao.id WHERE x.id IS NULL AND ao.k > 100;
SELECT ao.id, ao.t FROM ao LEFT JOIN ai ON ai.t = ao.t WHERE ai.id IS NULL ORDER BY ao.id LIMIT 20;
SELECT ao.k, count(*) FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.id IS NULL GROUP BY ao.k HAVING count(*) > 2 ORDER BY 1;
-- Shapes left as joins: the inner table read elsewhere, a column that may be NULL when
-- matched, a NULL test of a nullable column, an OR.
SELECT count(*), sum(ao.b), count(ai.w) FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.id IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.k IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.t IS NULL;
SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.id IS NULL OR ao.b < 3;
SELECT ao.id, ai.id FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.id IS NULL ORDER BY ao.id LIMIT 5;
SELECT * FROM ao LEFT JOIN ai ON ai.id = ao.id WHERE ai.id IS NULL ORDER BY ao.id LIMIT 5;
SELECT count(*) FROM ao a LEFT JOIN ao b ON b.id = a.k WHERE b.id IS NULL;
SELECT count(*) FROM ao JOIN d10 ON d10.i = ao.b % 10 LEFT JOIN ai ON ai.id = ao.id AND ai.w = d10.i WHERE ai.id IS NULL;
-- Writes that read an adaptive semi-join.
CREATE TABLE aw (id INTEGER PRIMARY KEY, k INTEGER);
INSERT INTO aw SELECT id, k FROM ao;
DELETE FROM aw WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = aw.id);
SELECT count(*), sum(k) FROM aw;
UPDATE aw SET k = -1 WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = aw.k AND ai.w > 6);
SELECT count(*), sum(k) FROM aw;
DELETE FROM aw WHERE EXISTS (SELECT 1 FROM aw x WHERE x.id = aw.id + 3);
SELECT count(*), sum(k) FROM aw;
