-- REFERENCES and FOREIGN KEY clauses, as ORMs write them, with foreign keys off (cairn's
-- default, and SQLite's): parsed and kept, not enforced. The oracle here enforces them, so
-- every row below keeps to them. 95_foreign_keys.sql turns them on.
CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT NOT NULL, UNIQUE (id, name));
CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id) ON DELETE CASCADE ON UPDATE NO ACTION, note TEXT);
CREATE TABLE pet (id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, owner_id INTEGER NOT NULL, kind TEXT DEFAULT 'cat', FOREIGN KEY (owner_id) REFERENCES parent(id) ON UPDATE no action ON DELETE no action);
CREATE TABLE loose (a INT REFERENCES parent, b TEXT CONSTRAINT fk_b REFERENCES parent (id) MATCH SIMPLE DEFERRABLE INITIALLY DEFERRED, c INT REFERENCES parent(id) NOT DEFERRABLE NOT NULL DEFAULT 1, CONSTRAINT fk_ab FOREIGN KEY (a, b) REFERENCES parent (id, name) ON DELETE SET NULL ON UPDATE SET DEFAULT);
CREATE TABLE chained (x INT REFERENCES parent(id) ON DELETE RESTRICT UNIQUE, y INT);
INSERT INTO parent VALUES (1, 'one'), (2, 'two');
INSERT INTO child VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 2, 'c');
INSERT INTO pet (owner_id) VALUES (1), (2);
INSERT INTO loose (a, b) VALUES (1, NULL);
INSERT INTO chained VALUES (1, 1);
INSERT INTO chained VALUES (1, 2);
SELECT * FROM child ORDER BY id;
SELECT * FROM pet ORDER BY id;
SELECT * FROM loose;
SELECT * FROM chained;
SELECT c.note, p.name FROM child c JOIN parent p ON p.id = c.parent_id ORDER BY c.id;
PRAGMA table_info(child);
PRAGMA table_info(pet);
PRAGMA table_info(loose);
PRAGMA index_list(chained);
SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name;
