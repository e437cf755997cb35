-- count, sum, total and avg of an index's first column over a range of that index alone, read
-- from the index keys: integers (large ones, an overflowing sum), reals kept as integers in the
-- key, NULLs, text, empty ranges, a second index column, and shapes that take the general path.
CREATE TABLE ia (id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, j INTEGER);
CREATE INDEX ia_i ON ia (i);
CREATE INDEX ia_r ON ia (r);
CREATE INDEX ia_t ON ia (t);
CREATE INDEX ia_ij ON ia (i, j);
INSERT INTO ia VALUES (1, 5, 5.0, '5', 1), (2, -3, 2.5, 'abc', 2), (3, NULL, NULL, NULL, 3), (4, 9007199254740993, 9007199254740992.0, '10', 4), (5, 0, -0.0, 'x', NULL), (6, 1, 1.5, 'ABC', 6), (7, 12, 12.0, 'twelve', 7), (8, 2, 0.1, 'two', 8), (9, 5, 5.0, '5', 9), (10, 9223372036854775807, 1e300, 'big', 10);
SELECT count(*), sum(i), total(i), avg(i) FROM ia WHERE i BETWEEN 0 AND 12;
SELECT count(*), count(i), sum(i), avg(i) FROM ia WHERE i > -5;
SELECT count(*), sum(i) FROM ia WHERE i >= 1 AND i < 9223372036854775807;
SELECT sum(i) FROM ia WHERE i >= 9007199254740993;
SELECT count(*), sum(i), avg(i) FROM ia WHERE i BETWEEN 100 AND 200;
SELECT count(*), sum(r), total(r), avg(r) FROM ia WHERE r BETWEEN 0 AND 13;
SELECT sum(r), avg(r) FROM ia WHERE r > 1;
SELECT count(*), count(t) FROM ia WHERE t >= 'a';
SELECT count(*), sum(i), avg(i) FROM ia WHERE i = 5;
SELECT count(*), sum(i) FROM ia WHERE i = 5 AND j > 1;
SELECT count(*), sum(j) FROM ia WHERE i = 5;
SELECT count(*), avg(i) FROM ia WHERE i BETWEEN 0 AND 12 HAVING count(*) > 3;
SELECT count(DISTINCT i), sum(i) FROM ia WHERE i BETWEEN 0 AND 12;
SELECT min(i), count(*) FROM ia WHERE i BETWEEN 0 AND 12;
SELECT count(*) + 1, avg(i) * 2 FROM ia WHERE i < 3;
