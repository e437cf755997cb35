-- Generated columns, VIRTUAL and STORED: computed on INSERT, UPDATE and upserts, never
-- written, read by WHERE, ORDER BY, indexes, CHECK and UNIQUE, listed by pragma_table_xinfo.
-- Each table with generated columns has one over a JSON or date function, as apps write them:
-- the build's split profile (scripts/corpus.mjs) leaves such tables, and so every statement
-- on them, to cairn-rest.wasm.
CREATE TABLE item (id INTEGER PRIMARY KEY, price REAL NOT NULL, qty INTEGER NOT NULL DEFAULT 1, name TEXT, total REAL AS (price * qty), label TEXT GENERATED ALWAYS AS (upper(name) || ':' || qty) STORED, half REAL AS (total / 2) VIRTUAL, meta TEXT AS (json_object('n', name, 'q', qty)));
INSERT INTO item (id, price, qty, name) VALUES (1, 2.5, 4, 'pen'), (2, 10, 1, 'ink'), (3, 0.5, 20, 'clip');
INSERT INTO item (price, name) VALUES (7, 'pad');
INSERT INTO item VALUES (5, 1, 3, 'cup');
SELECT * FROM item ORDER BY id;
SELECT id, total, label, half FROM item WHERE total > 9 ORDER BY total DESC, id;
SELECT label FROM item ORDER BY half, id;
SELECT sum(total), max(label), count(half) FROM item;
-- Writes that name a generated column are refused; the other columns' writes recompute them.
INSERT INTO item (id, price, total) VALUES (9, 1, 1);
INSERT INTO item VALUES (9, 1, 1, 'x', 1, 'y', 2);
UPDATE item SET total = 0;
UPDATE item SET label = 'z' WHERE id = 1;
UPDATE item SET qty = qty + 1 WHERE id IN (1, 3);
UPDATE item SET name = 'biro' WHERE id = 1;
SELECT id, qty, total, label, half FROM item ORDER BY id;
UPDATE item SET price = price * 2 RETURNING id, total, label;
INSERT INTO item (id, price, qty, name) VALUES (10, 3, 3, 'mug') RETURNING total, label, half;
-- Upserts: DO UPDATE recomputes; SET of a generated column is refused.
INSERT INTO item (id, price, qty, name) VALUES (10, 4, 4, 'cup') ON CONFLICT (id) DO UPDATE SET qty = excluded.qty + item.qty;
SELECT id, qty, total, label FROM item WHERE id = 10;
INSERT INTO item (id, price, name) VALUES (10, 4, 'cup') ON CONFLICT (id) DO UPDATE SET total = 1;
INSERT OR REPLACE INTO item (id, price, qty, name) VALUES (2, 8, 2, 'ink');
SELECT * FROM item WHERE id = 2;
-- An index on a generated column, and one on an expression over it.
CREATE INDEX item_total ON item (total);
CREATE INDEX item_label ON item (lower(label));
SELECT id FROM item WHERE total = 24;
SELECT id FROM item WHERE total BETWEEN 5 AND 30 ORDER BY total, id;
SELECT id FROM item WHERE lower(label) = 'cup:3';
UPDATE item SET qty = 6 WHERE id = 5;
SELECT id, total FROM item WHERE total >= 12 ORDER BY total, id;
DELETE FROM item WHERE total < 10;
SELECT id, total FROM item ORDER BY id;
-- pragma_table_info leaves generated columns out; pragma_table_xinfo marks them 2 (VIRTUAL) and 3 (STORED).
SELECT * FROM pragma_table_info('item');
SELECT * FROM pragma_table_xinfo('item');
SELECT name, hidden FROM pragma_table_xinfo('item') WHERE hidden > 0 ORDER BY cid;
-- A generated column may read one declared after it; constraints apply to computed values.
CREATE TABLE chain (a INTEGER PRIMARY KEY, b INTEGER AS (c + 1), c INTEGER AS (a * 10) STORED, d TEXT AS (b || '/' || c) NOT NULL, e INTEGER AS (a - 3) CHECK (e <> 0), f INTEGER AS (a % 3) UNIQUE, j TEXT AS (json_array(a, b)));
INSERT INTO chain (a) VALUES (1), (2);
SELECT * FROM chain ORDER BY a;
INSERT INTO chain (a) VALUES (3);
INSERT INTO chain (a) VALUES (4);
INSERT INTO chain (a) VALUES (7);
INSERT OR IGNORE INTO chain (a) VALUES (3), (5), (8);
SELECT a, b, c, d, e, f FROM chain ORDER BY a;
UPDATE chain SET a = a + 100 WHERE a = 1;
SELECT * FROM chain ORDER BY a;
-- Types: a computed value takes the column's type, or is refused by it (STRICT).
CREATE TABLE typed (a TEXT, n INTEGER AS (a + 0), t TEXT AS (a || 'x'), r REAL AS (length(a)), q TEXT AS (json_quote(a)));
INSERT INTO typed (a) VALUES ('7'), ('12');
SELECT a, n, typeof(n), t, r, typeof(r) FROM typed ORDER BY a;
INSERT INTO typed (a) VALUES ('x');
SELECT count(*) FROM typed;
-- JSON and dates in generated columns.
CREATE TABLE doc (id INTEGER PRIMARY KEY, body TEXT, kind TEXT AS (body ->> '$.kind'), n INTEGER AS (json_array_length(body, '$.tags')) STORED, day TEXT AS (date(body ->> '$.at')));
INSERT INTO doc (body) VALUES ('{"kind":"a","tags":[1,2],"at":"2024-03-05 10:00:00"}'), ('{"kind":"b","tags":[],"at":"2024-12-31"}'), ('{"tags":[3]}');
SELECT id, kind, n, day FROM doc ORDER BY id;
CREATE INDEX doc_kind ON doc (kind);
SELECT id FROM doc WHERE kind = 'b';
INSERT INTO doc (body) VALUES ('{"at":"now"}');
SELECT count(*) FROM doc;
-- Definitions SQLite refuses.
CREATE TABLE bad1 (a INTEGER AS (1) PRIMARY KEY, b INTEGER);
CREATE TABLE bad2 (a INTEGER PRIMARY KEY, b INTEGER AS (a) DEFAULT 3);
CREATE TABLE bad3 (a INTEGER AS (b), b INTEGER AS (a));
CREATE TABLE bad4 (a INTEGER, b INTEGER AS (random()));
CREATE TABLE bad5 (a INTEGER, b INTEGER AS ((SELECT 1)));
CREATE TABLE bad6 (a INTEGER, b INTEGER AS (c));
CREATE TABLE bad7 (a INTEGER, b INTEGER AS (count(a)));
CREATE TABLE bad8 (a INTEGER, b INTEGER AS (bad8.a));
CREATE TABLE bad9 (a INTEGER AS (1));
CREATE TABLE bad10 (a INTEGER, b INTEGER AS (a), PRIMARY KEY (b));
CREATE TABLE bad11 (a INTEGER, b INTEGER AS (b + 1));
CREATE TABLE bad12 (a INTEGER, b INTEGER AS (sum(a) OVER ()));
CREATE TABLE bad13 (a INTEGER, b TEXT AS (date('now')));
INSERT INTO bad13 (a) VALUES (1);
SELECT count(*) FROM sqlite_schema WHERE name LIKE 'bad%';
-- ALTER TABLE: ADD COLUMN takes a VIRTUAL column (computed for the rows there), not a STORED one.
ALTER TABLE chain ADD COLUMN g INTEGER AS (a * 2) STORED;
ALTER TABLE chain ADD COLUMN g INTEGER AS (a * 2);
ALTER TABLE chain ADD COLUMN h TEXT GENERATED ALWAYS AS (d || g) VIRTUAL;
SELECT a, g, h FROM chain ORDER BY a;
INSERT INTO chain (a) VALUES (9);
SELECT a, g, h FROM chain ORDER BY a;
SELECT name, hidden FROM pragma_table_xinfo('chain') ORDER BY cid;
ALTER TABLE chain DROP COLUMN c;
ALTER TABLE chain DROP COLUMN h;
SELECT * FROM chain ORDER BY a;
ALTER TABLE chain RENAME COLUMN a TO k;
INSERT INTO chain (k) VALUES (11);
SELECT * FROM chain ORDER BY k;
SELECT name, hidden FROM pragma_table_xinfo('chain') ORDER BY cid;
-- ADD COLUMN checks the computed values of the rows there against the column's constraints.
CREATE TABLE added (a INTEGER);
INSERT INTO added VALUES (1), (NULL);
ALTER TABLE added ADD COLUMN g INTEGER AS (a * 2) CHECK (g > 5);
ALTER TABLE added ADD COLUMN g INTEGER AS (a * 2) NOT NULL;
ALTER TABLE added ADD COLUMN g INTEGER AS (a * 2) CHECK (g > 1);
SELECT * FROM added ORDER BY a;
SELECT name, hidden FROM pragma_table_xinfo('added') ORDER BY cid;
-- Row ids given by the table, DEFAULT VALUES, INSERT ... SELECT, excluded's generated values,
-- OR IGNORE and OR REPLACE.
CREATE TABLE more (id INTEGER PRIMARY KEY, v INTEGER DEFAULT 7, twice INTEGER AS (id * 2) STORED, sq INTEGER AS (v * v) NOT NULL, js TEXT AS (json_array(id, v)));
INSERT INTO more DEFAULT VALUES;
INSERT INTO more (v) VALUES (3), (4);
INSERT INTO more (v) SELECT v + 10 FROM more WHERE id < 3;
SELECT * FROM more ORDER BY id;
INSERT INTO more (id, v) VALUES (2, 9) ON CONFLICT (id) DO UPDATE SET v = excluded.sq + excluded.twice;
SELECT * FROM more WHERE id = 2;
INSERT OR IGNORE INTO more (id, v) VALUES (20, NULL), (21, 1);
UPDATE OR IGNORE more SET v = NULL WHERE id = 1;
INSERT OR REPLACE INTO more (id, v) VALUES (3, 5);
SELECT * FROM more ORDER BY id;
-- Foreign key actions recompute the child's generated columns.
PRAGMA foreign_keys = ON;
CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE child (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES parent (id) ON DELETE SET NULL ON UPDATE CASCADE, orphan INTEGER AS (pid IS NULL), js TEXT AS (json_object('p', pid)));
INSERT INTO parent VALUES (1, 'a'), (2, 'b');
INSERT INTO child (id, pid) VALUES (1, 1), (2, 2), (3, 1);
UPDATE parent SET id = 10 WHERE id = 1;
DELETE FROM parent WHERE id = 2;
SELECT * FROM child ORDER BY id;
