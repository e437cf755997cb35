-- ORDER BY ... LIMIT over enough rows for the top-k buffer to be cut back many times, so rows
-- past the k-th best are dropped before they are decoded: NULLs, ties (broken by id so the
-- answer is unique), DESC, NULLS LAST, OFFSET, a WHERE filter, text keys, a correlated
-- subquery (whose bound must start afresh for each outer row), and LIKE patterns.
CREATE TABLE big (id INTEGER PRIMARY KEY, g INTEGER, v INTEGER, r REAL, s TEXT, pad TEXT);
WITH d(x) AS (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)) INSERT INTO big SELECT a.x * 100 + b.x * 10 + c.x, (a.x + b.x) % 4, CASE WHEN c.x = 3 THEN NULL ELSE (a.x * 37 + b.x * 11 + c.x * 7) % 50 END, (a.x * 13 + c.x) / 4.0, CASE WHEN b.x = 5 THEN NULL ELSE 'k' || ((a.x * 7 + b.x * 3 + c.x) % 23) END, 'pad-' || a.x || b.x || c.x || '-Fifty-' || c.x FROM d a, d b, d c;
SELECT count(*), count(v), count(s) FROM big;
SELECT id, v FROM big ORDER BY v, id LIMIT 5;
SELECT id, v FROM big ORDER BY v, id LIMIT 7 OFFSET 40;
SELECT id, v, pad FROM big ORDER BY v DESC, id LIMIT 12;
SELECT id, v FROM big ORDER BY v NULLS LAST, id LIMIT 30;
SELECT id, v FROM big ORDER BY v DESC NULLS FIRST, id DESC LIMIT 120;
SELECT id, v, s FROM big WHERE g = 2 ORDER BY v, id LIMIT 9 OFFSET 2;
SELECT id, s FROM big ORDER BY s, id LIMIT 25;
SELECT id, s, pad FROM big ORDER BY s DESC, id LIMIT 25;
SELECT id, r FROM big ORDER BY r DESC, id LIMIT 17;
SELECT v, id FROM big WHERE v >= 20 ORDER BY v, id DESC LIMIT 33;
SELECT id FROM big ORDER BY v, id LIMIT 3 OFFSET 995;
SELECT id, g FROM big ORDER BY g, id DESC LIMIT 10;
SELECT id, g, pad FROM big ORDER BY g DESC, pad DESC LIMIT 20 OFFSET 5;
SELECT g, (SELECT b2.id FROM big b2 WHERE b2.g = big.g ORDER BY b2.v DESC, b2.id LIMIT 1 OFFSET 30) FROM big WHERE id < 8 ORDER BY id;
SELECT count(*) FROM big WHERE pad LIKE '%fifty%';
SELECT count(*) FROM big WHERE pad LIKE 'PAD-1%';
SELECT count(*) FROM big WHERE pad LIKE '%-3';
SELECT count(*) FROM big WHERE pad LIKE 'pad-123-fifty-3';
SELECT count(*) FROM big WHERE pad NOT LIKE '%9%';
