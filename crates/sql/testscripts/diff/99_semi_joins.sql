-- Semi- and anti-joins: EXISTS and NOT EXISTS on an equality no index serves (run as a hash
-- set of the inner side), next to the same on an indexed column, IN and NOT IN with NULLs on
-- either side, LEFT JOIN ... IS NULL, and the affinities of the compared columns.
CREATE TABLE sa (id INTEGER PRIMARY KEY, k INTEGER, t TEXT, r REAL, u ANY);
CREATE TABLE sb (id INTEGER PRIMARY KEY, k INTEGER, t TEXT, r REAL, u ANY, w INTEGER);
INSERT INTO sa VALUES (1, 1, '1', 1.0, 1), (2, 2, 'two', 2.5, '2'), (3, NULL, NULL, NULL, NULL), (4, 4, '04', 4.0, 4.0), (5, 5, 'x', 5.5, X'05'), (6, 1, 'one', 1.0, 'one'), (7, 7, '7', 7.0, 7), (8, -0, '0', 0.0, 0);
INSERT INTO sb VALUES (1, 1, 'one', 1.0, '1', 10), (2, 2, '2', 2.5, 2, 20), (3, NULL, NULL, NULL, NULL, 30), (4, 4, '4', 4, '04', 40), (5, 9, 'x', 5.5, X'05', 50), (6, 1, '1', 1.5, 'one', 60), (7, 0, '7', 0.0, 7.0, NULL);
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) ORDER BY id;
SELECT id FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sa.k = sb.k AND sb.w > 15) ORDER BY id;
SELECT id FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sa.k = sb.k AND sb.w > 15) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.t = sa.t) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.t = sa.k) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.t) ORDER BY id;
SELECT id FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.t) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.r = sa.k) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.u = sa.u) ORDER BY id;
SELECT id FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sb.u = sa.u) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.u = sa.t) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.t = sa.u) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.r = sa.t) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k + 1 = sa.k) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.w / 10 = sa.k LIMIT 1) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k LIMIT 0) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k ORDER BY sb.w DESC LIMIT 1) ORDER BY id;
SELECT id, EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k), NOT EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) FROM sa ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) AND EXISTS (SELECT 1 FROM sb WHERE sb.t = sa.t) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) OR sa.id > 6 ORDER BY id;
SELECT count(*), sum(k) FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k);
SELECT k, count(*) FROM sa GROUP BY k HAVING EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) ORDER BY k;
SELECT k, EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) FROM sa GROUP BY k ORDER BY k;
SELECT a.id, b.id FROM sa a JOIN sa b ON b.k = a.k WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = b.k AND sb.w < 50) ORDER BY 1, 2;
SELECT id, (SELECT count(*) FROM sb WHERE sb.id < sa.id AND EXISTS (SELECT 1 FROM sa x WHERE x.k = sb.k)) FROM sa ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k AND sb.w > sa.id) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k OR sb.t = sa.t) ORDER BY id;
-- IN and NOT IN: a NULL on the left, or in the set when nothing matches, gives NULL.
SELECT id, k IN (SELECT k FROM sb), k NOT IN (SELECT k FROM sb), k NOT IN (SELECT k FROM sb WHERE k IS NOT NULL) FROM sa ORDER BY id;
SELECT id FROM sa WHERE k NOT IN (SELECT k FROM sb) ORDER BY id;
SELECT id FROM sa WHERE k NOT IN (SELECT k FROM sb WHERE k IS NOT NULL) ORDER BY id;
SELECT id FROM sa WHERE k NOT IN (SELECT k FROM sb WHERE w > 100) ORDER BY id;
SELECT id FROM sa WHERE NOT (k IN (SELECT k FROM sb WHERE w < 35)) ORDER BY id;
SELECT id FROM sa WHERE t NOT IN (SELECT k FROM sb WHERE k IS NOT NULL) ORDER BY id;
SELECT id FROM sa WHERE u IN (SELECT u FROM sb) ORDER BY id;
SELECT count(*) FROM sa WHERE NULL NOT IN (SELECT k FROM sb WHERE w > 100);
SELECT count(*) FROM sa WHERE NULL IN (SELECT k FROM sb);
-- LEFT JOIN ... IS NULL, on an unindexed column and on the key.
SELECT sa.id FROM sa LEFT JOIN sb ON sb.k = sa.k WHERE sb.id IS NULL ORDER BY sa.id;
SELECT sa.id FROM sa LEFT JOIN sb ON sb.id = sa.k WHERE sb.id IS NULL ORDER BY sa.id;
SELECT sa.id, count(sb.id) FROM sa LEFT JOIN sb ON sb.t = sa.t GROUP BY sa.id ORDER BY sa.id;
-- The same with an index on the inner column (the index serves the equality instead).
CREATE INDEX sb_k ON sb(k);
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.k) ORDER BY id;
SELECT id FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sb.k = sa.t) ORDER BY id;
SELECT id FROM sa WHERE EXISTS (SELECT 1 FROM sb WHERE sb.t = sa.t AND sb.k > 1) ORDER BY id;
-- Writes that read a semi-join.
DELETE FROM sa WHERE NOT EXISTS (SELECT 1 FROM sb WHERE sb.t = sa.t);
SELECT id, k, t FROM sa ORDER BY id;
UPDATE sa SET k = k + 100 WHERE EXISTS (SELECT 1 FROM sb WHERE sb.w = sa.id * 10);
SELECT id, k, t FROM sa ORDER BY id;
-- Keys of long texts (past one length byte) in sets and groups.
CREATE TABLE sl (id INTEGER PRIMARY KEY, t TEXT);
INSERT INTO sl VALUES (1, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'), (2, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'), (3, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'), (4, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab'), (5, 'a');
SELECT DISTINCT length(t), t = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' FROM sl ORDER BY 1, 2;
SELECT count(DISTINCT t), count(*) FROM sl;
SELECT length(t), count(*) FROM sl GROUP BY t ORDER BY 1, 2;
SELECT id FROM sl WHERE t IN (SELECT t FROM sl WHERE id > 2) ORDER BY id;
SELECT id FROM sl WHERE NOT EXISTS (SELECT 1 FROM sl x WHERE x.t = sl.t AND x.id <> sl.id) ORDER BY id;
