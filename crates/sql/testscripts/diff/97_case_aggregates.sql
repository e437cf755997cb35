-- CASE, LIKE and arithmetic as aggregates' arguments and as group keys (each evaluated outside
-- eval's big match): NULLs, integers against reals and text, a CASE operand of every type,
-- LIKE's case folding, wildcards and escapes, overflow and division by zero.
CREATE TABLE ca (id INTEGER PRIMARY KEY, g INTEGER, b INTEGER, r REAL, c TEXT, u ANY);
INSERT INTO ca VALUES (1, 0, 10, 1.5, 'nine', 1), (2, 1, 60000, 2.0, 'Ninety', '1'), (3, 2, NULL, NULL, NULL, NULL), (4, 3, 49999, 0.5, 'one', 1.0), (5, 4, 50000, -1.0, 'n_x', 'abc'), (6, 5, -7, 3.0, 'N%', X'01'), (7, 6, 9223372036854775807, 1e300, 'ten', 2), (8, 7, 0, 0.0, '', '2');
SELECT g % 3 AS k, sum(CASE WHEN b < 50000 THEN 1 ELSE 0 END), sum(CASE WHEN b >= 50000 THEN b ELSE 0 END), count(CASE WHEN c LIKE 'n%' THEN 1 END), sum(CASE g % 3 WHEN 0 THEN b WHEN 1 THEN -b ELSE 0 END) FROM ca WHERE id < 7 GROUP BY g % 3 ORDER BY k;
SELECT id, CASE u WHEN 1 THEN 'int' WHEN '1' THEN 'text' WHEN 2.0 THEN 'two' ELSE 'other' END FROM ca ORDER BY id;
SELECT id, CASE WHEN b THEN 'true' WHEN r THEN 'r' END, CASE b WHEN NULL THEN 'null' ELSE 'else' END FROM ca ORDER BY id;
SELECT id, CASE WHEN c LIKE 'N%' THEN c END, c LIKE '%n', c NOT LIKE 'n_n%', c LIKE NULL, NULL LIKE c FROM ca ORDER BY id;
SELECT id, c LIKE 'n\_x' ESCAPE '\', c LIKE 'N\%' ESCAPE '\', u LIKE '1', b LIKE '6%' FROM ca ORDER BY id;
SELECT id, b + 1, b - g, b * 2, b / g, b % g, r % 2, u + 1, c * 1, -b FROM ca ORDER BY id;
SELECT g / 2 AS k, total(b * 1.5), count(CASE r WHEN 0.5 THEN 1 WHEN 0 THEN 1 END), max(CASE WHEN c LIKE '%e%' THEN c END) FROM ca GROUP BY g / 2 ORDER BY k;
SELECT sum(CASE WHEN b > 0 THEN b END) FROM ca WHERE id <> 7;
SELECT count(*) FROM ca WHERE CASE WHEN b IS NULL THEN 0 ELSE b % 2 = 0 END;
SELECT DISTINCT g % 2, CASE WHEN b < 100 THEN 'small' ELSE 'big' END FROM ca ORDER BY 1, 2;
