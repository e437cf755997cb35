-- Tokenizer options and UNINDEXED columns.
CREATE VIRTUAL TABLE k USING fts5(body, tokenize='unicode61 remove_diacritics 0');
INSERT INTO k(rowid, body) VALUES (1, 'Crème brûlée'), (2, 'creme brulee'), (3, 'CRÈME');
SELECT rowid FROM k WHERE k MATCH 'crème';
SELECT rowid FROM k WHERE k MATCH 'creme';
CREATE VIRTUAL TABLE c USING fts5(body, tokenize="unicode61 tokenchars '-_'");
INSERT INTO c(rowid, body) VALUES (1, 'e-mail and x_y'), (2, 'e mail');
SELECT rowid FROM c WHERE c MATCH '"e-mail"';
SELECT rowid FROM c WHERE c MATCH 'mail';
CREATE VIRTUAL TABLE s USING fts5(body, tokenize="unicode61 separators 'x'");
INSERT INTO s(rowid, body) VALUES (1, 'fooxbar'), (2, 'foo bar');
SELECT rowid FROM s WHERE s MATCH 'bar';
SELECT rowid FROM s WHERE s MATCH 'foo bar';
CREATE VIRTUAL TABLE u USING fts5(title, tag UNINDEXED);
INSERT INTO u(rowid, title, tag) VALUES (1, 'red apple', 'fruit'), (2, 'green fruit', 'veg');
SELECT rowid, tag FROM u WHERE u MATCH 'fruit';
SELECT rowid, tag FROM u ORDER BY rowid;
