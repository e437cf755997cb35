-- LIMIT ... OFFSET: entries a scan skips unread (no filter, no sort, one row per entry), and
-- the shapes that must still count rows as they come (a filter, DISTINCT, a sort, a join,
-- a compound, a grouped query), offsets past the end, negative and without a limit.
CREATE TABLE pg (id INTEGER PRIMARY KEY, v INTEGER, t TEXT);
INSERT INTO pg VALUES (1, 5, 'e'), (2, 3, 'c'), (3, 5, 'a'), (4, 1, 'd'), (5, 2, 'b'), (6, NULL, 'f'), (7, 3, NULL), (8, 4, 'h');
SELECT id, v FROM pg ORDER BY id LIMIT 3 OFFSET 2;
SELECT id, t FROM pg ORDER BY id DESC LIMIT 3 OFFSET 2;
SELECT * FROM pg ORDER BY id LIMIT 2 OFFSET 7;
SELECT * FROM pg ORDER BY id LIMIT 2 OFFSET 8;
SELECT * FROM pg ORDER BY id LIMIT 2 OFFSET 100;
SELECT id FROM pg ORDER BY id LIMIT -1 OFFSET 5;
SELECT id FROM pg ORDER BY id LIMIT 3 OFFSET -2;
SELECT id FROM pg ORDER BY id LIMIT 3, 2;
SELECT id, v + 1 FROM pg ORDER BY id LIMIT 2 OFFSET 1 + 2;
SELECT id FROM pg WHERE v > 2 ORDER BY id LIMIT 2 OFFSET 1;
SELECT id FROM pg WHERE 1 = 0 ORDER BY id LIMIT 2 OFFSET 1;
SELECT id FROM pg WHERE 1 = 1 ORDER BY id LIMIT 2 OFFSET 1;
SELECT DISTINCT v FROM pg ORDER BY v LIMIT 2 OFFSET 1;
SELECT id, t FROM pg ORDER BY t LIMIT 3 OFFSET 2;
SELECT a.id, b.id FROM pg a JOIN pg b ON b.v = a.v ORDER BY a.id, b.id LIMIT 3 OFFSET 2;
SELECT v, count(*) FROM pg GROUP BY v ORDER BY v LIMIT 2 OFFSET 1;
SELECT id FROM pg UNION ALL SELECT id FROM pg ORDER BY 1 LIMIT 3 OFFSET 6;
SELECT id, (SELECT p.id FROM pg p ORDER BY p.id LIMIT 1 OFFSET pg.id % 3) FROM pg ORDER BY id;
SELECT * FROM (SELECT id FROM pg ORDER BY id LIMIT 3 OFFSET 4) ORDER BY id;
CREATE TABLE pt (k TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID;
INSERT INTO pt VALUES ('b', 2), ('a', 1), ('d', 4), ('c', 3);
SELECT k, n FROM pt ORDER BY k LIMIT 2 OFFSET 1;
SELECT k FROM pt ORDER BY k DESC LIMIT 10 OFFSET 3;
SELECT id FROM pg WHERE id > 2 ORDER BY id LIMIT 2 OFFSET 1;
SELECT id, t FROM pg WHERE id BETWEEN 2 AND 7 ORDER BY id DESC LIMIT 2 OFFSET 3;
SELECT id FROM pg WHERE id > 2.5 LIMIT 10 OFFSET 2;
SELECT id FROM pg WHERE id >= '3' ORDER BY id LIMIT 10 OFFSET 1;
SELECT id FROM pg WHERE id < 100 AND v IS NOT NULL ORDER BY id LIMIT 3 OFFSET 2;
SELECT id FROM pg WHERE id IN (2, 4, 6, 8) ORDER BY id LIMIT 2 OFFSET 1;
SELECT k FROM pt WHERE k > 'a' ORDER BY k LIMIT 2 OFFSET 1;
-- Offsets across many leaves: whole leaves passed by their entry count, a range's bound
-- falling inside the leaves passed, both directions.
CREATE TABLE pb (id INTEGER PRIMARY KEY, t TEXT);
INSERT INTO pb VALUES (1, 'a row of the table that spans many leaves');
INSERT INTO pb SELECT id + 1, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 2, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 4, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 8, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 16, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 32, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 64, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 128, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 256, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 512, t || ' ' || id FROM pb;
INSERT INTO pb SELECT id + 1024, t || ' ' || id FROM pb;
SELECT id, t FROM pb ORDER BY id LIMIT 3 OFFSET 1000;
SELECT id, t FROM pb ORDER BY id DESC LIMIT 3 OFFSET 1500;
SELECT id FROM pb ORDER BY id LIMIT 5 OFFSET 2045;
SELECT id FROM pb ORDER BY id LIMIT 5 OFFSET 2048;
SELECT id FROM pb WHERE id > 100 AND id <= 1700 ORDER BY id LIMIT 4 OFFSET 1597;
SELECT id FROM pb WHERE id > 100 AND id <= 1700 ORDER BY id LIMIT 4 OFFSET 1601;
SELECT id FROM pb WHERE id >= 300 ORDER BY id DESC LIMIT 4 OFFSET 1700;
SELECT id FROM pb WHERE id < 900 ORDER BY id DESC LIMIT 4 OFFSET 897;
SELECT count(*) FROM (SELECT id FROM pb ORDER BY id LIMIT -1 OFFSET 777);
