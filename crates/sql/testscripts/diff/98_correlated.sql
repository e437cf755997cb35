-- Correlated subqueries, run once per distinct value of the outer columns they read within a
-- SELECT: scalar and EXISTS, repeated and NULL outer values, two outer columns, a reference
-- two levels up, and the shapes that run for every row (random(), a compound body).
CREATE TABLE cu (id INTEGER PRIMARY KEY, city TEXT, tier INTEGER);
CREATE TABLE od (id INTEGER PRIMARY KEY, cu INTEGER, amount INTEGER, tier INTEGER);
INSERT INTO cu VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', NULL), (4, NULL, 1), (5, 'c', 2);
INSERT INTO od VALUES (1, 1, 10, 1), (2, 1, 30, 2), (3, 2, 5, 1), (4, 2, 25, 2), (5, 2, 40, NULL), (6, 3, 7, 1), (7, NULL, 9, 2), (8, 4, 100, 1), (9, 1, 20, 1), (10, 6, 1, 1);
SELECT count(*), sum(o.amount) FROM od o WHERE o.amount > (SELECT avg(p.amount) FROM od p WHERE p.cu = o.cu);
SELECT o.id, (SELECT max(p.amount) FROM od p WHERE p.cu = o.cu) FROM od o ORDER BY o.id;
SELECT o.id, (SELECT count(*) FROM od p WHERE p.cu = o.cu AND p.tier = o.tier) FROM od o ORDER BY o.id;
SELECT o.id, (SELECT count(*) FROM od p WHERE p.cu IS o.cu) FROM od o ORDER BY o.id;
SELECT c.id FROM cu c WHERE EXISTS (SELECT 1 FROM od o WHERE o.cu = c.id AND o.amount > 15) ORDER BY c.id;
SELECT c.id FROM cu c WHERE NOT EXISTS (SELECT 1 FROM od o WHERE o.cu = c.id) ORDER BY c.id;
SELECT c.city, count(*) FROM cu c WHERE EXISTS (SELECT 1 FROM cu d WHERE d.city = c.city AND d.id <> c.id) GROUP BY c.city ORDER BY 1;
SELECT c.id, (SELECT sum(o.amount) FROM od o WHERE o.cu IN (SELECT d.id FROM cu d WHERE d.city = c.city)) FROM cu c ORDER BY c.id;
SELECT c.id, (SELECT count(*) FROM od o WHERE o.cu = c.id AND EXISTS (SELECT 1 FROM cu d WHERE d.tier = o.tier AND d.city = c.city)) FROM cu c ORDER BY c.id;
SELECT c.id, (SELECT count(*) FROM od o WHERE o.tier = c.tier AND o.amount > (SELECT min(p.amount) FROM od p WHERE p.cu = c.id)) FROM cu c ORDER BY c.id;
SELECT o.id, (SELECT count(*) FROM (SELECT 1 FROM od p WHERE p.cu = 1) WHERE o.cu = 1) FROM od o ORDER BY o.id;
SELECT o.id FROM od o ORDER BY (SELECT c.city FROM cu c WHERE c.id = o.cu), o.id;
SELECT c.id, (SELECT count(*) FROM od o WHERE o.cu = c.id AND random() IS NOT NULL) FROM cu c ORDER BY c.id;
UPDATE od SET amount = (SELECT max(p.amount) FROM od p WHERE p.cu = od.cu) + 1 WHERE cu IS NOT NULL;
SELECT id, amount FROM od ORDER BY id;
DELETE FROM od WHERE amount < (SELECT max(p.amount) FROM od p WHERE p.cu = od.cu);
SELECT id, cu, amount FROM od ORDER BY id;
CREATE TABLE mk (i INTEGER PRIMARY KEY);
INSERT INTO mk VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13), (14), (15), (16), (17), (18), (19);
CREATE TABLE mx (id INTEGER PRIMARY KEY, v INTEGER);
INSERT INTO mx SELECT a.i * 20 + b.i, (a.i * 7 + b.i) % 13 FROM mk a, mk b;
CREATE TABLE my (id INTEGER PRIMARY KEY, w INTEGER);
INSERT INTO my SELECT id, v FROM mx WHERE id % 3 = 0;
SELECT count(*), sum(v) FROM mx WHERE NOT EXISTS (SELECT 1 FROM my WHERE my.id = mx.id);
SELECT count(*), sum(v) FROM mx WHERE EXISTS (SELECT 1 FROM my WHERE my.id = mx.id AND my.w > 4);
SELECT count(*), sum((SELECT w FROM my WHERE my.id = mx.id)) FROM mx;
SELECT count(*), sum((SELECT count(*) FROM my WHERE my.w = mx.v)) FROM mx;
SELECT count(*) FROM mx WHERE v > (SELECT avg(w) FROM my WHERE my.w <= mx.v AND my.id < mx.id);

-- A correlated subquery in an aggregate query's output, HAVING and ORDER BY reads the group's
-- values of the outer columns.
CREATE TABLE go (id INTEGER PRIMARY KEY, cu INTEGER, v INTEGER);
CREATE TABLE gp (id INTEGER PRIMARY KEY, cu INTEGER);
INSERT INTO go VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30), (4, 3, 40), (5, NULL, 50);
INSERT INTO gp VALUES (1, 1), (2, 2), (3, 2), (4, 1), (5, 1), (6, NULL);
SELECT go.cu, (SELECT count(*) FROM gp WHERE gp.cu = go.cu) AS n FROM go GROUP BY go.cu ORDER BY go.cu;
SELECT go.cu, count(*) FROM go GROUP BY go.cu HAVING (SELECT count(*) FROM gp WHERE gp.cu = go.cu) > 1 ORDER BY go.cu;
SELECT go.cu, sum(v) + (SELECT count(*) FROM gp WHERE gp.cu = go.cu) FROM go GROUP BY go.cu ORDER BY 2, 1;
SELECT count(*), (SELECT count(*) FROM gp WHERE gp.cu > 1) FROM go;
SELECT go.cu, EXISTS (SELECT 1 FROM gp WHERE gp.cu = go.cu) FROM go GROUP BY go.cu ORDER BY go.cu;
SELECT go.cu, max(v) FROM go GROUP BY go.cu ORDER BY (SELECT count(*) FROM gp WHERE gp.cu = go.cu), go.cu;
SELECT go.cu, count(*) FROM go WHERE go.cu IN (SELECT gp.cu FROM gp WHERE gp.id > 1) GROUP BY go.cu HAVING go.cu IN (SELECT cu FROM gp WHERE gp.cu = go.cu) ORDER BY 1;

-- A correlated subquery whose body is compound: every arm reads the same enclosing row.
SELECT go.id, EXISTS (SELECT id FROM gp WHERE gp.cu = go.cu UNION SELECT id FROM gp WHERE gp.id = go.id) FROM go ORDER BY go.id;
SELECT go.id FROM go WHERE go.cu IN (SELECT cu FROM gp WHERE gp.id = go.id UNION SELECT 3) ORDER BY 1;
SELECT go.id, (SELECT max(id) FROM gp WHERE gp.cu = go.cu UNION ALL SELECT 0 ORDER BY 1 LIMIT 1) FROM go ORDER BY 1;
SELECT go.id, (SELECT count(*) FROM gp WHERE gp.cu = go.cu) + (SELECT id FROM gp WHERE gp.id = go.id UNION ALL SELECT 4 ORDER BY 1 DESC LIMIT 1) FROM go ORDER BY 1;
