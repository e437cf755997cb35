-- Upserts whose DO UPDATE rewrites the row where the insert found its key: rolled back,
-- failing part way inside a transaction, WHERE false, values grown into overflow pages and
-- shrunk back. (A DELETE of nothing before BEGIN and COMMIT: SQLite reports the last
-- statement's change count there.)
CREATE TABLE us (id INTEGER PRIMARY KEY, b INTEGER NOT NULL, c TEXT);
INSERT INTO us VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, NULL);
DELETE FROM us WHERE id < 0;
BEGIN;
INSERT INTO us VALUES (1, 10, 'x') ON CONFLICT(id) DO UPDATE SET c = excluded.c || c;
INSERT INTO us VALUES (4, 40, 'new') ON CONFLICT(id) DO UPDATE SET c = 'never';
SELECT * FROM us ORDER BY id;
DELETE FROM us WHERE id < 0;
ROLLBACK;
SELECT * FROM us ORDER BY id;
DELETE FROM us WHERE id < 0;
BEGIN;
INSERT INTO us VALUES (2, 20, 'y') ON CONFLICT(id) DO UPDATE SET c = excluded.c, b = NULL;
INSERT INTO us VALUES (2, 'many', 'y') ON CONFLICT(id) DO UPDATE SET b = excluded.b;
INSERT INTO us VALUES (1, 7, 'p'), (6, 6, 'six'), (2, 8, 'q') ON CONFLICT(id) DO UPDATE SET c = excluded.c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c || c, b = CASE WHEN excluded.id = 2 THEN NULL ELSE excluded.b END;
SELECT * FROM us ORDER BY id;
INSERT INTO us VALUES (2, 20, 'y') ON CONFLICT(id) DO UPDATE SET c = excluded.c, b = excluded.b;
INSERT INTO us VALUES (3, 30, 'z') ON CONFLICT(id) DO UPDATE SET b = excluded.b WHERE us.b > 100;
DELETE FROM us WHERE id < 0;
COMMIT;
SELECT * FROM us ORDER BY id;
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = coalesce(us.c, excluded.c) || coalesce(us.c, excluded.c) || coalesce(us.c, excluded.c) || coalesce(us.c, excluded.c);
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = c || c || c || c;
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = c || c || c || c;
SELECT id, b, length(c), substr(c, 1, 10) FROM us ORDER BY id;
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = c || c || c || c;
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = c || c;
SELECT id, b, length(c), substr(c, 1, 10) FROM us ORDER BY id;
DELETE FROM us WHERE id < 0;
BEGIN;
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = 'short', b = b + 1;
INSERT INTO us VALUES (1, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = c || c || c || c || c || c || c || c || c || c;
SELECT id, b, length(c), substr(c, 1, 10) FROM us ORDER BY id;
DELETE FROM us WHERE id < 0;
ROLLBACK;
SELECT id, b, length(c), substr(c, 1, 10) FROM us ORDER BY id;
INSERT INTO us VALUES (3, 0, 'seed') ON CONFLICT(id) DO UPDATE SET c = substr(c, 1, 3), b = b + 1;
INSERT INTO us VALUES (5, 5, 'five') ON CONFLICT DO UPDATE SET c = 'never';
INSERT INTO us VALUES (5, 6, 'six') ON CONFLICT DO UPDATE SET c = excluded.c || '!';
SELECT * FROM us ORDER BY id;
