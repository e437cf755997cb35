-- Window functions: the ranking functions, ntile, lag and lead, first/last/nth_value, every
-- aggregate over ROWS, RANGE and GROUPS frames with EXCLUDE, FILTER, named windows and windows
-- refining them, windows in ORDER BY and over GROUP BY, and the errors SQLite gives. Where the
-- row order inside a partition decides a value (row_number, lag, a ROWS frame), the ORDER BY
-- ends with the key.
CREATE TABLE emp (id INTEGER PRIMARY KEY, dept TEXT, name TEXT, salary INTEGER, bonus REAL, hired INTEGER);
INSERT INTO emp VALUES (1, 'eng', 'ann', 120, 1.5, 2019), (2, 'eng', 'bob', 100, NULL, 2020), (3, 'eng', 'cat', 100, 2.25, 2021), (4, 'ops', 'dan', 80, 0.5, 2018), (5, 'ops', 'eve', 95, NULL, 2020), (6, 'ops', 'fay', 80, 3.0, 2022), (7, 'hr', 'gus', 70, 1.0, 2019), (8, NULL, 'hal', 60, NULL, 2023), (9, 'eng', 'ivy', NULL, 0.75, 2024), (10, 'hr', 'jon', 70, -1.5, 2021);
SELECT id, row_number() OVER (ORDER BY id) FROM emp ORDER BY id;
SELECT id, row_number() OVER (PARTITION BY dept ORDER BY salary DESC, id) AS rn FROM emp ORDER BY dept, rn;
SELECT id, rank() OVER (ORDER BY salary), dense_rank() OVER (ORDER BY salary), percent_rank() OVER (ORDER BY salary), cume_dist() OVER (ORDER BY salary) FROM emp ORDER BY id;
SELECT id, rank() OVER (PARTITION BY dept ORDER BY salary DESC), dense_rank() OVER (PARTITION BY dept ORDER BY salary DESC NULLS FIRST) FROM emp ORDER BY id;
SELECT id, rank() OVER (), dense_rank() OVER (), percent_rank() OVER (), cume_dist() OVER (PARTITION BY dept) FROM emp ORDER BY id;
SELECT id, ntile(3) OVER (ORDER BY id), ntile(4) OVER (PARTITION BY dept ORDER BY id), ntile(20) OVER (ORDER BY id), ntile(1) OVER () FROM emp ORDER BY id;
SELECT id, ntile('2') OVER (ORDER BY id), ntile(2.7) OVER (ORDER BY id) FROM emp ORDER BY id;
SELECT id, lag(salary) OVER (ORDER BY id), lead(salary) OVER (ORDER BY id), lag(salary, 2) OVER (ORDER BY id), lead(salary, 3, -1) OVER (ORDER BY id) FROM emp ORDER BY id;
SELECT id, lag(name, 1, 'none') OVER (PARTITION BY dept ORDER BY id), lead(name, 1, dept) OVER (PARTITION BY dept ORDER BY id) FROM emp ORDER BY id;
SELECT id, lag(id, 0) OVER (ORDER BY id), lag(id, -1) OVER (ORDER BY id), lead(id, NULL, 'd') OVER (ORDER BY id), lag(id, 1.5, 'd') OVER (ORDER BY id), lag(id, '2') OVER (ORDER BY id), lag(id, 2.0) OVER (ORDER BY id) FROM emp ORDER BY id;
SELECT id, first_value(name) OVER (PARTITION BY dept ORDER BY id), last_value(name) OVER (PARTITION BY dept ORDER BY id), nth_value(name, 2) OVER (PARTITION BY dept ORDER BY id) FROM emp ORDER BY id;
SELECT id, first_value(name) OVER w, last_value(name) OVER w, nth_value(name, 3) OVER w FROM emp WINDOW w AS (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING) ORDER BY id;
SELECT id, last_value(id) OVER (ORDER BY salary), first_value(id) OVER (ORDER BY salary RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM emp ORDER BY id;
SELECT id, nth_value(id, 2) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW), first_value(id) OVER (ORDER BY salary GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING EXCLUDE GROUP) FROM emp ORDER BY id;
-- Aggregates: the default frame (a running total, peers included), the whole partition.
SELECT id, sum(salary) OVER (ORDER BY id), count(*) OVER (ORDER BY id), count(salary) OVER (ORDER BY id), avg(salary) OVER (ORDER BY id), total(bonus) OVER (ORDER BY id) FROM emp ORDER BY id;
SELECT id, sum(salary) OVER (ORDER BY salary), count(*) OVER (ORDER BY salary), min(name) OVER (ORDER BY salary), max(bonus) OVER (ORDER BY salary) FROM emp ORDER BY id;
SELECT id, sum(salary) OVER (PARTITION BY dept), avg(bonus) OVER (PARTITION BY dept), min(salary) OVER (PARTITION BY dept), max(salary) OVER (PARTITION BY dept), count(*) OVER () FROM emp ORDER BY id;
SELECT id, group_concat(name) OVER (ORDER BY id), group_concat(name, '-') OVER (PARTITION BY dept ORDER BY id), string_agg(name, '+') OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM emp ORDER BY id;
SELECT id, sum(bonus) OVER (ORDER BY id), sum(bonus) OVER (ORDER BY id ROWS 2 PRECEDING), typeof(sum(bonus) OVER (ORDER BY id ROWS 1 PRECEDING)) FROM emp ORDER BY id;
-- ROWS frames.
SELECT id, sum(salary) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), sum(salary) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), sum(salary) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM emp ORDER BY id;
SELECT id, count(*) OVER (ORDER BY id ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING), sum(id) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING), sum(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 4 PRECEDING) FROM emp ORDER BY id;
SELECT id, min(salary) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING), max(salary) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING), min(name) OVER (ORDER BY id ROWS 3 PRECEDING) FROM emp ORDER BY id;
SELECT id, avg(salary) OVER (PARTITION BY dept ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), total(salary) OVER (PARTITION BY dept ORDER BY id ROWS UNBOUNDED PRECEDING) FROM emp ORDER BY id;
SELECT id, sum(salary) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), sum(salary) OVER (ORDER BY id ROWS BETWEEN 0 PRECEDING AND 0 FOLLOWING) FROM emp ORDER BY id;
-- RANGE frames with offsets: numbers, NULLs as peers, DESC.
SELECT id, sum(salary) OVER (ORDER BY salary RANGE BETWEEN 10 PRECEDING AND 10 FOLLOWING), count(*) OVER (ORDER BY salary RANGE BETWEEN 20 PRECEDING AND CURRENT ROW), max(id) OVER (ORDER BY salary RANGE BETWEEN CURRENT ROW AND 15 FOLLOWING) FROM emp ORDER BY id;
SELECT id, sum(salary) OVER (ORDER BY salary DESC RANGE BETWEEN 10 PRECEDING AND 5 FOLLOWING), count(*) OVER (ORDER BY salary DESC NULLS FIRST RANGE 20 PRECEDING) FROM emp ORDER BY id;
SELECT id, sum(id) OVER (ORDER BY bonus RANGE BETWEEN 0.5 PRECEDING AND 0.75 FOLLOWING), count(*) OVER (ORDER BY bonus NULLS LAST RANGE BETWEEN 1 PRECEDING AND 1 PRECEDING) FROM emp ORDER BY id;
SELECT id, count(*) OVER (ORDER BY name RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING), count(*) OVER (ORDER BY hired RANGE BETWEEN 1 FOLLOWING AND 2 FOLLOWING) FROM emp ORDER BY id;
-- GROUPS frames.
SELECT id, sum(id) OVER (ORDER BY salary GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING), count(*) OVER (ORDER BY salary GROUPS CURRENT ROW), sum(id) OVER (ORDER BY salary GROUPS BETWEEN 2 PRECEDING AND 1 PRECEDING) FROM emp ORDER BY id;
SELECT id, sum(id) OVER (PARTITION BY dept ORDER BY hired GROUPS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), count(*) OVER (GROUPS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM emp ORDER BY id;
-- EXCLUDE.
SELECT id, sum(id) OVER (ORDER BY salary ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW), sum(id) OVER (ORDER BY salary RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP), sum(id) OVER (ORDER BY salary RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE TIES) FROM emp ORDER BY id;
SELECT id, count(*) OVER (ORDER BY salary GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE TIES), group_concat(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE CURRENT ROW), max(id) OVER (ORDER BY salary RANGE CURRENT ROW EXCLUDE NO OTHERS) FROM emp ORDER BY id;
-- FILTER.
SELECT id, count(*) FILTER (WHERE salary > 80) OVER (ORDER BY id), sum(salary) FILTER (WHERE dept = 'eng') OVER (ORDER BY id ROWS 2 PRECEDING), max(id) FILTER (WHERE bonus IS NOT NULL) OVER (PARTITION BY dept) FROM emp ORDER BY id;
SELECT dept, count(*) FILTER (WHERE salary > 80), sum(salary) FILTER (WHERE bonus IS NOT NULL), group_concat(name, '-') FILTER (WHERE id % 2 = 0), count(DISTINCT salary) FILTER (WHERE salary < 100), max(bonus) FILTER (WHERE dept <> 'x') FROM emp GROUP BY dept ORDER BY dept;
SELECT count(*) FILTER (WHERE 0), avg(salary) FILTER (WHERE id > 5), string_agg(name, ',') FILTER (WHERE id > 8) FROM emp;
SELECT abs(id) FILTER (WHERE id > 1) FROM emp;
-- Named windows, and windows that refine them.
SELECT id, sum(salary) OVER w, rank() OVER w FROM emp WINDOW w AS (PARTITION BY dept ORDER BY salary) ORDER BY id;
SELECT id, sum(salary) OVER (w ORDER BY id), count(*) OVER (w ORDER BY id ROWS 1 PRECEDING), count(*) OVER w FROM emp WINDOW w AS (PARTITION BY dept) ORDER BY id;
SELECT id, sum(id) OVER b FROM emp WINDOW a AS (PARTITION BY dept), b AS (a ORDER BY id) ORDER BY id;
-- Window calls in expressions, in ORDER BY, with DISTINCT, LIMIT, subqueries and joins.
SELECT id, salary - avg(salary) OVER (PARTITION BY dept), 100.0 * salary / sum(salary) OVER () FROM emp ORDER BY id;
SELECT id, name FROM emp ORDER BY row_number() OVER (ORDER BY name DESC);
SELECT id FROM emp ORDER BY rank() OVER (PARTITION BY dept ORDER BY salary), id LIMIT 4;
SELECT DISTINCT dept, count(*) OVER (PARTITION BY dept) FROM emp ORDER BY 1;
SELECT id, rn FROM (SELECT id, row_number() OVER (ORDER BY salary DESC, id) AS rn FROM emp) WHERE rn <= 3 ORDER BY rn;
SELECT dept, name FROM (SELECT dept, name, rank() OVER (PARTITION BY dept ORDER BY salary DESC) AS r FROM emp) WHERE r = 1 ORDER BY dept, name;
SELECT e.id, count(*) OVER (PARTITION BY f.dept) FROM emp e JOIN emp f ON f.id = e.id + 1 ORDER BY e.id;
SELECT id, (SELECT count(*) FROM emp f WHERE f.dept = e.dept), sum(id) OVER (ORDER BY id) FROM emp e ORDER BY id;
SELECT id, row_number() OVER (ORDER BY id) FROM emp WHERE salary > 80 ORDER BY id LIMIT 3 OFFSET 1;
SELECT x, sum(x) OVER (ORDER BY x) FROM (SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT 2 UNION ALL SELECT 3) ORDER BY x;
SELECT count(*) OVER () FROM emp WHERE 0;
-- Over GROUP BY: windows see the groups, and may read the aggregates.
SELECT dept, sum(salary), rank() OVER (ORDER BY sum(salary) DESC), sum(sum(salary)) OVER (ORDER BY dept) FROM emp GROUP BY dept ORDER BY dept;
SELECT dept, count(*) AS n, row_number() OVER (ORDER BY count(*), dept) FROM emp GROUP BY dept HAVING count(*) > 1 ORDER BY dept;
SELECT sum(salary), count(*) OVER () FROM emp;
SELECT hired, avg(salary), lag(avg(salary)) OVER (ORDER BY hired) FROM emp GROUP BY hired ORDER BY hired;
-- Values of every type as ORDER BY and partition keys.
CREATE TABLE mix (id INTEGER PRIMARY KEY, v ANY, g INTEGER);
INSERT INTO mix VALUES (1, 1, 1), (2, 1.0, 1), (3, 'a', 1), (4, NULL, 2), (5, X'01', 2), (6, 2.5, 2), (7, 'b', 1), (8, NULL, 1), (9, -3, 2), (10, 9223372036854775807, 1);
SELECT id, rank() OVER (ORDER BY v), dense_rank() OVER (PARTITION BY g ORDER BY v DESC), count(*) OVER (PARTITION BY v) FROM mix ORDER BY id;
SELECT id, sum(v) OVER (ORDER BY v RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING), count(*) OVER (ORDER BY v RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM mix ORDER BY id;
SELECT id, sum(v) OVER (ORDER BY id ROWS 1 PRECEDING), total(v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), avg(v) OVER (PARTITION BY g ORDER BY id ROWS 2 PRECEDING) FROM mix ORDER BY id;
SELECT id, sum(v) OVER (ORDER BY id) FROM mix WHERE id < 10 ORDER BY id;
SELECT id, sum(v) OVER (ORDER BY id) FROM mix ORDER BY id;
SELECT id, lag(id, -9223372036854775808, 'd') OVER (ORDER BY id), lead(id, 9223372036854775807) OVER (ORDER BY id), ntile(9223372036854775807) OVER (ORDER BY id) FROM emp ORDER BY id;
SELECT id, sum(id) OVER (ORDER BY id ROWS BETWEEN 9223372036854775807 PRECEDING AND 9223372036854775807 FOLLOWING), count(*) OVER (ORDER BY salary RANGE BETWEEN 9223372036854775807 PRECEDING AND 1e300 FOLLOWING) FROM emp ORDER BY id;
-- sum() past the integer range: a real added after the overflow clears it (SQLite 3.54), and
-- taking the overflowing value back out of a moving frame goes on approximately.
SELECT sum(x), total(x), avg(x) FROM (SELECT 9223372036854775807 AS x UNION ALL SELECT 1 UNION ALL SELECT 0.5);
SELECT i, sum(x) OVER (ORDER BY i ROWS 1 PRECEDING), total(x) OVER (ORDER BY i ROWS 1 PRECEDING), avg(x) OVER (ORDER BY i ROWS 2 PRECEDING) FROM (SELECT 1 AS i, 9223372036854775807 AS x UNION ALL SELECT 2, 0.5 UNION ALL SELECT 3, -9223372036854775807 UNION ALL SELECT 4, 7 UNION ALL SELECT 5, 1) ORDER BY i;
SELECT i, total(x) OVER (ORDER BY i ROWS 1 PRECEDING), avg(x) OVER (ORDER BY i ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM (SELECT 1 AS i, -9223372036854775807 AS x UNION ALL SELECT 2, -9 UNION ALL SELECT 3, 9223372036854775807 UNION ALL SELECT 4, 5) ORDER BY i;
-- Infinities of both signs: a NaN sum is NULL, in a frame and out of one.
SELECT sum(x), total(x), avg(x) FROM (SELECT 1e308 * 10 AS x UNION ALL SELECT -1e308 * 10);
SELECT i, sum(x) OVER (ORDER BY i ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), total(x) OVER (ORDER BY i ROWS 1 PRECEDING), avg(x) OVER (ORDER BY i ROWS 1 PRECEDING) FROM (SELECT 1 AS i, 1e308 * 10 AS x UNION ALL SELECT 2, 1.5 UNION ALL SELECT 3, -1e308 * 10 UNION ALL SELECT 4, '' UNION ALL SELECT 5, 2) ORDER BY i;
-- Errors, as SQLite gives them.
SELECT id FROM emp WHERE row_number() OVER () > 1;
SELECT dept FROM emp GROUP BY row_number() OVER ();
SELECT dept FROM emp GROUP BY dept HAVING rank() OVER () > 0;
SELECT row_number() FROM emp;
SELECT abs(salary) OVER () FROM emp;
SELECT count(DISTINCT salary) OVER () FROM emp;
SELECT row_number() FILTER (WHERE id > 1) OVER () FROM emp;
SELECT sum(row_number() OVER ()) OVER () FROM emp;
SELECT row_number(1) OVER () FROM emp;
SELECT lag() OVER () FROM emp;
SELECT nosuch(id) OVER () FROM emp;
SELECT sum(id) OVER v FROM emp WINDOW w AS (ORDER BY id);
SELECT sum(id) OVER (w PARTITION BY dept) FROM emp WINDOW w AS (ORDER BY id);
SELECT sum(id) OVER (w ORDER BY id) FROM emp WINDOW w AS (ORDER BY salary);
SELECT sum(id) OVER (w ORDER BY id) FROM emp WINDOW w AS (ROWS 1 PRECEDING);
SELECT sum(id) OVER (w) FROM emp WINDOW w AS (ORDER BY id ROWS 1 PRECEDING);
SELECT sum(id) OVER w FROM emp WINDOW v AS (ORDER BY id ROWS 1 PRECEDING), w AS (v);
SELECT sum(id) OVER (ROWS 1 FOLLOWING) FROM emp;
SELECT sum(id) OVER (ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM emp;
SELECT sum(id) OVER (ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW) FROM emp;
SELECT sum(id) OVER (RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM emp;
SELECT sum(id) OVER (ORDER BY id, name RANGE 1 PRECEDING) FROM emp;
SELECT sum(id) OVER (ORDER BY id ROWS -1 PRECEDING) FROM emp;
SELECT sum(id) OVER (ORDER BY id ROWS 1.5 PRECEDING) FROM emp;
SELECT sum(id) OVER (ORDER BY id RANGE 'a' PRECEDING) FROM emp;
SELECT sum(id) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND NULL FOLLOWING) FROM emp;
SELECT ntile(0) OVER () FROM emp;
SELECT ntile(-2) OVER (ORDER BY id) FROM emp;
SELECT nth_value(id, 0) OVER () FROM emp;
SELECT nth_value(id, 1.5) OVER () FROM emp;
-- The JSON aggregates over windows: growing frames, moving frames, and per partition.
SELECT id, json_group_array(name) OVER (ORDER BY id), json_group_object(name, salary) OVER (PARTITION BY dept ORDER BY id) FROM emp ORDER BY id;
SELECT id, json_group_array(salary) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM emp ORDER BY id;
SELECT dept, json_group_array(id) OVER (PARTITION BY dept) FROM emp ORDER BY id;
