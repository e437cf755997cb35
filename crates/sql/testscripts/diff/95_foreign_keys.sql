-- Foreign keys enforced (PRAGMA foreign_keys = ON): child rows checked on INSERT and UPDATE,
-- ON DELETE / ON UPDATE actions, RESTRICT and NO ACTION, deferred keys checked at COMMIT,
-- PRAGMA foreign_key_check and pragma_foreign_key_list.
PRAGMA foreign_keys = ON;
PRAGMA foreign_keys;
CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE book (id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES author(id) ON DELETE CASCADE ON UPDATE CASCADE, title TEXT);
CREATE TABLE review (id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL, stars INTEGER, FOREIGN KEY (book_id) REFERENCES book (id) ON DELETE CASCADE);
CREATE TABLE loan (id INTEGER PRIMARY KEY, book_id INTEGER REFERENCES book ON DELETE RESTRICT, who TEXT);
CREATE TABLE tag (book_id INTEGER REFERENCES book ON DELETE SET NULL ON UPDATE SET NULL, label TEXT);
CREATE TABLE pen (author_name TEXT DEFAULT 'anon' REFERENCES author (name) ON DELETE SET DEFAULT ON UPDATE CASCADE, pen TEXT);
INSERT INTO author VALUES (1, 'ann'), (2, 'bob'), (3, 'cy'), (4, 'anon');
INSERT INTO book VALUES (10, 1, 'a1'), (11, 1, 'a2'), (12, 2, 'b1'), (13, NULL, 'orphan');
INSERT INTO review VALUES (100, 10, 5), (101, 10, 3), (102, 12, 4);
INSERT INTO loan VALUES (1, 12, 'x');
INSERT INTO tag VALUES (10, 'red'), (11, 'blue'), (NULL, 'none');
INSERT INTO pen VALUES ('ann', 'A'), ('bob', 'B');
-- A child row that names no parent is refused; NULL names none and is kept.
INSERT INTO book VALUES (14, 9, 'missing');
INSERT INTO book VALUES (14, NULL, 'kept');
INSERT INTO review VALUES (103, 99, 1);
UPDATE book SET author_id = 7 WHERE id = 10;
UPDATE book SET author_id = 3 WHERE id = 10;
SELECT id, author_id FROM book ORDER BY id;
-- Statements that fail leave nothing behind.
INSERT INTO review VALUES (104, 11, 2), (105, 42, 2);
SELECT count(*) FROM review;
-- ON UPDATE CASCADE, SET NULL, and a cascade through two levels.
UPDATE author SET id = 30 WHERE id = 3;
SELECT id, author_id FROM book ORDER BY id;
UPDATE book SET id = 20 WHERE id = 10;
SELECT id, author_id FROM book ORDER BY id;
SELECT book_id, label FROM tag ORDER BY label;
SELECT * FROM review ORDER BY id;
UPDATE review SET book_id = 20 WHERE id IN (100, 101);
DELETE FROM author WHERE id = 30;
SELECT id, author_id FROM book ORDER BY id;
SELECT * FROM review ORDER BY id;
-- RESTRICT: book 12 is on loan, so deleting bob (cascading to it) fails as a whole.
DELETE FROM author WHERE id = 2;
SELECT id FROM author ORDER BY id;
SELECT id FROM book ORDER BY id;
DELETE FROM loan;
DELETE FROM author WHERE id = 2;
SELECT id FROM book ORDER BY id;
SELECT * FROM review ORDER BY id;
-- SET DEFAULT, ON UPDATE CASCADE by a UNIQUE column.
UPDATE author SET name = 'annie' WHERE name = 'ann';
SELECT * FROM pen ORDER BY pen;
DELETE FROM author WHERE name = 'annie';
SELECT * FROM pen ORDER BY pen;
SELECT * FROM book ORDER BY id;
-- NO ACTION: a parent key still named cannot go.
CREATE TABLE shelf (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE slot (n INTEGER PRIMARY KEY, shelf_id INTEGER REFERENCES shelf);
INSERT INTO shelf VALUES (1, 's1'), (2, 's2');
INSERT INTO slot VALUES (1, 1), (2, 1), (3, NULL);
DELETE FROM shelf WHERE id = 1;
UPDATE shelf SET id = 5 WHERE id = 1;
UPDATE shelf SET id = 6 WHERE id = 2;
DELETE FROM shelf WHERE id = 6;
SELECT * FROM shelf ORDER BY id;
-- A table that names itself: a row may name itself, and deletes cascade down the tree.
CREATE TABLE node (id INTEGER PRIMARY KEY, up INTEGER REFERENCES node (id) ON DELETE CASCADE);
INSERT INTO node VALUES (1, 1), (2, 1), (3, 2), (4, 3), (5, NULL), (6, 5);
INSERT INTO node VALUES (7, 8);
DELETE FROM node WHERE id = 2;
SELECT * FROM node ORDER BY id;
-- Composite keys on a UNIQUE pair of the parent.
CREATE TABLE place (city TEXT NOT NULL, street TEXT NOT NULL, n INTEGER, UNIQUE (city, street));
CREATE TABLE visit (city TEXT, street TEXT, at INTEGER, FOREIGN KEY (city, street) REFERENCES place (city, street) ON UPDATE CASCADE ON DELETE SET NULL);
INSERT INTO place VALUES ('rome', 'via a', 1), ('oslo', 'gate b', 2);
INSERT INTO visit VALUES ('rome', 'via a', 1), ('oslo', 'gate b', 2), ('rome', NULL, 3);
INSERT INTO visit VALUES ('rome', 'gate b', 4);
UPDATE place SET street = 'via z' WHERE city = 'rome';
SELECT * FROM visit ORDER BY at;
DELETE FROM place WHERE city = 'oslo';
SELECT * FROM visit ORDER BY at;
-- Deferred keys: checked at COMMIT; a failed COMMIT leaves the transaction open.
CREATE TABLE owner (id INTEGER PRIMARY KEY);
CREATE TABLE pet (id INTEGER PRIMARY KEY, owner_id INTEGER REFERENCES owner DEFERRABLE INITIALLY DEFERRED);
INSERT INTO pet VALUES (1, 1);
BEGIN;
INSERT INTO pet VALUES (1, 1);
INSERT INTO pet VALUES (2, 2);
COMMIT;
INSERT INTO owner VALUES (1), (2);
COMMIT;
SELECT * FROM pet ORDER BY id;
BEGIN;
DELETE FROM owner WHERE id = 1;
INSERT INTO owner VALUES (1);
COMMIT;
SELECT * FROM owner ORDER BY id;
-- Savepoints: a rolled-back cascade comes back.
SAVEPOINT s1;
DELETE FROM author;
SELECT count(*) FROM book;
ROLLBACK TO s1;
RELEASE s1;
SELECT count(*) FROM book;
-- What the pragmas report.
SELECT * FROM pragma_foreign_key_list('book');
SELECT * FROM pragma_foreign_key_list('visit') ORDER BY seq;
PRAGMA foreign_key_list(pen);
PRAGMA foreign_key_check;
PRAGMA foreign_keys = OFF;
INSERT INTO slot VALUES (9, 77);
INSERT INTO pet VALUES (9, 99);
PRAGMA foreign_key_check;
PRAGMA foreign_key_check(slot);
DELETE FROM shelf;
SELECT * FROM slot ORDER BY n;
PRAGMA foreign_keys = 1;
PRAGMA foreign_keys;
INSERT INTO slot VALUES (10, 78);
-- ALTER TABLE: renames follow into the keys that name them.
CREATE TABLE ap (id INTEGER PRIMARY KEY, k TEXT UNIQUE);
CREATE TABLE ac (x TEXT REFERENCES ap (k) ON UPDATE CASCADE, z INTEGER);
INSERT INTO ap VALUES (1, 'a');
INSERT INTO ac VALUES ('a', 0);
ALTER TABLE ap RENAME COLUMN k TO key2;
ALTER TABLE ap RENAME TO ap2;
UPDATE ap2 SET key2 = 'b';
SELECT * FROM ac;
SELECT "table", "from", "to" FROM pragma_foreign_key_list('ac');
ALTER TABLE ac ADD COLUMN y INTEGER REFERENCES ap2;
INSERT INTO ac VALUES ('b', 1, 5);
INSERT INTO ac VALUES ('b', 2, 1);
SELECT * FROM ac ORDER BY z;
ALTER TABLE ac RENAME COLUMN x TO x2;
SELECT "from", "to" FROM pragma_foreign_key_list('ac') ORDER BY id;
ALTER TABLE ac DROP COLUMN z;
SELECT * FROM ac ORDER BY y;
