-- MATCH inside OR: SQLite answers an OR of MATCHes and row id comparisons of one fts5
-- table as a union of index scans, each branch's rows after the branches before it, a
-- MATCH's ranked by its own query, a row id's with a NULL rank.
CREATE VIRTUAL TABLE f USING fts5(a, b);
INSERT INTO f(rowid, a, b) VALUES (1, 'hello world', 'x'), (2, 'foo bar', 'y'), (3, 'hello hello foo', 'z'), (4, 'bar baz', 'hello'), (5, 'quiet', 'bar none');
SELECT rowid FROM f WHERE f MATCH 'hello' OR rowid = 2;
SELECT rowid, rank FROM f WHERE f MATCH 'hello' OR rowid = 2;
SELECT rowid, rank FROM f WHERE rowid = 2 OR f MATCH 'hello';
SELECT rowid, rank FROM f WHERE f MATCH 'hello' OR rowid = 3;
SELECT rowid, rank FROM f WHERE f MATCH 'hello' OR f MATCH 'bar';
SELECT rowid, rank FROM f WHERE f MATCH 'bar' OR f MATCH 'hello' ORDER BY rank, rowid;
SELECT rowid, rank FROM f WHERE f MATCH 'hello' OR f MATCH 'bar' OR rowid = 5;
SELECT rowid, bm25(f) FROM f WHERE f MATCH 'hello' OR f MATCH 'foo';
SELECT rowid, highlight(f, 0, '[', ']') FROM f WHERE f MATCH 'hello' OR f MATCH 'bar';
SELECT rowid, highlight(f, 0, '[', ']') FROM f WHERE f MATCH 'hello' OR rowid = 2;
SELECT rowid, a FROM f WHERE (f MATCH 'hello' OR rowid = 2) AND a LIKE '%foo%';
SELECT rowid FROM f WHERE f MATCH 'hello' OR rowid > 3;
SELECT rowid FROM f WHERE f MATCH 'hello' OR rowid < 3;
SELECT rowid FROM f WHERE f MATCH 'hello' OR 4 <= rowid;
SELECT rowid FROM f WHERE f MATCH 'hello' OR rowid >= 5 OR rowid = 2;
SELECT rowid FROM f WHERE f MATCH 'hello' OR rowid = 99;
SELECT rowid FROM f WHERE f MATCH 'a: hello' OR f MATCH 'b: hello';
SELECT count(*) FROM f WHERE f MATCH 'hello' OR f MATCH 'bar';
SELECT rowid, rank FROM f WHERE f MATCH 'hello OR bar' ORDER BY rank, rowid;
-- SQLite refuses MATCH where it cannot use the index: NOT, OR with another column.
SELECT rowid FROM f WHERE NOT (f MATCH 'hello');
SELECT rowid FROM f WHERE f MATCH 'hello' OR b = 'y';
-- An external content table: the row id branch reads the content row.
CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT, body TEXT);
INSERT INTO notes VALUES (1, 'apple pie', 'bake it'), (2, 'pear', 'raw'), (7, 'apple juice', 'press it');
CREATE VIRTUAL TABLE nf USING fts5(title, body, content='notes', content_rowid='id');
-- sqlite: INSERT INTO nf(nf) VALUES ('rebuild')
SELECT rowid, title FROM nf WHERE nf MATCH 'apple' OR rowid = 2;
SELECT rowid, title FROM nf WHERE nf MATCH 'pear' OR nf MATCH 'press';
SELECT rowid, title, rank FROM nf WHERE nf MATCH 'apple' OR rowid = 2 ORDER BY rowid;
