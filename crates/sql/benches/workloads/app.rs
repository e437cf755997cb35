//! The browser benchmark's app workloads (`bench-browser/workloads/60-71`): the statements apps
//! write that the first workloads lack (a repeated count, DISTINCT, text sorts, semi- and
//! anti-joins, paging, CASE in aggregates, three tables, a correlated subquery).

use super::*;

fn with_join(db: &mut dyn Engine, ctx: &Ctx) -> R<Vec<Value>> {
    load_join(db, ctx)?;
    Ok(Vec::new())
}

/// The first value of the first row of a query.
fn first(db: &mut dyn Engine, sql: &str, params: &[Value]) -> R<Vec<Value>> {
    Ok(db.query(sql, params)?.swap_remove(0))
}

pub(crate) fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "count-repeat",
            title: "50 x SELECT count(*) of the whole table",
            setup: loaded,
            run: |db, _| {
                let mut s = 0;
                for _ in 0..50 {
                    s += int(&first(db, "SELECT count(*) AS n FROM t1", &[])?[0]);
                }
                Ok(ints_out(&[s]))
            },
            check: nothing,
        },
        Workload {
            name: "distinct",
            title: "SELECT DISTINCT of a text column, then of two integer columns",
            setup: loaded,
            run: |db, _| {
                let words = db.query("SELECT DISTINCT c FROM t1", &[])?;
                let pairs = db.query("SELECT DISTINCT g, b % 7 AS m FROM t1", &[])?;
                let len: i64 = words.iter().map(|r| text_len(&r[0])).sum();
                let s: i64 = pairs.iter().map(|r| int(&r[0]) * 7 + int(&r[1])).sum();
                Ok(ints_out(&[words.len() as i64, len, pairs.len() as i64, s]))
            },
            check: nothing,
        },
        Workload {
            name: "order-text",
            title: "ORDER BY a text column, a fifth of the table",
            setup: loaded,
            run: |db, _| {
                let rows = db.query("SELECT id, c FROM t1 WHERE g < 20 ORDER BY c, id", &[])?;
                let mut h = 0i64;
                for (i, r) in rows.iter().enumerate() {
                    h = (h + (i as i64 + 1) * int(&r[0])) % 1_000_000_007;
                }
                let mut out = ints_out(&[rows.len() as i64, h]);
                out.extend(rows.first().map(|r| r[1].clone()));
                out.extend(rows.last().map(|r| r[1].clone()));
                Ok(out)
            },
            check: nothing,
        },
        Workload {
            name: "join-group",
            title: "every order joined to its customer, GROUP BY city",
            setup: with_join,
            run: |db, _| {
                let rows = db.query(
                    "SELECT c.city, count(*) AS n, sum(o.amount) AS s, max(o.amount) AS hi FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city ORDER BY c.city",
                    &[],
                )?;
                Ok(rows.into_iter().flatten().collect())
            },
            check: nothing,
        },
        Workload {
            name: "in-subquery",
            title: "17 x orders WHERE customer_id IN (SELECT ... by city)",
            setup: with_join,
            run: |db, _| {
                let (mut n, mut s) = (0, 0);
                for city in 0..17 {
                    let r = first(
                        db,
                        "SELECT count(*) AS n, sum(amount) AS s FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE city = ?)",
                        &[Value::Text(format!("city {city}"))],
                    )?;
                    n += int(&r[0]);
                    s += int(&r[1]);
                }
                Ok(ints_out(&[n, s]))
            },
            check: nothing,
        },
        Workload {
            name: "exists",
            title: "20 x customers WHERE EXISTS (an order above a threshold)",
            setup: with_join,
            run: |db, _| {
                let mut n = 0;
                for i in 0..20 {
                    let r = first(
                        db,
                        "SELECT count(*) AS n FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > ?)",
                        &[Value::Integer(9000 + i * 50)],
                    )?;
                    n += int(&r[0]);
                }
                Ok(ints_out(&[n]))
            },
            check: nothing,
        },
        Workload {
            name: "anti-join",
            title: "rows of t1 with no row in t2: NOT EXISTS and LEFT JOIN ... IS NULL",
            setup: |db, ctx| {
                load_t1(db, ctx, false)?;
                db.exec("CREATE TABLE t2(id INTEGER PRIMARY KEY, v INTEGER)")?;
                let rows: Vec<Vec<Value>> = (3..=ctx.rows as i64)
                    .step_by(3)
                    .map(|id| vec![Value::Integer(id), Value::Integer(id % 11)])
                    .collect();
                db.exec("BEGIN")?;
                insert_rows(db, &multirow("t2", &rows, 200))?;
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            run: |db, _| {
                let mut out = first(
                    db,
                    "SELECT count(*) AS n, sum(b) AS s FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.id = t1.id)",
                    &[],
                )?;
                out.extend(first(
                    db,
                    "SELECT count(*) AS n, sum(t1.b) AS s FROM t1 LEFT JOIN t2 ON t2.id = t1.id WHERE t2.id IS NULL",
                    &[],
                )?);
                Ok(out)
            },
            check: nothing,
        },
        Workload {
            name: "paging",
            title: "20 pages of 50 rows, LIMIT ... OFFSET across the table",
            setup: loaded,
            run: |db, ctx| {
                let (mut n, mut s) = (0, 0);
                for p in 0..20 {
                    let off = (p * (ctx.rows as i64 - 50)) / 19;
                    for r in db.query(
                        "SELECT id, b, c FROM t1 ORDER BY id LIMIT 50 OFFSET ?",
                        &[Value::Integer(off)],
                    )? {
                        n += 1;
                        s += int(&r[0]) + int(&r[1]) + text_len(&r[2]);
                    }
                }
                Ok(ints_out(&[n, s]))
            },
            check: nothing,
        },
        Workload {
            name: "case-aggregate",
            title: "sum and count of CASE expressions, GROUP BY g % 10",
            setup: loaded,
            run: |db, _| {
                let rows = db.query(
                    "SELECT g % 10 AS k, \
                     sum(CASE WHEN b < 50000 THEN 1 ELSE 0 END) AS lo, \
                     sum(CASE WHEN b >= 50000 THEN b ELSE 0 END) AS hi, \
                     count(CASE WHEN c LIKE 'n%' THEN 1 END) AS n, \
                     sum(CASE g % 3 WHEN 0 THEN a WHEN 1 THEN -a ELSE 0 END) AS m \
                     FROM t1 GROUP BY g % 10 ORDER BY k",
                    &[],
                )?;
                Ok(rows.into_iter().flatten().collect())
            },
            check: nothing,
        },
        Workload {
            name: "update-tenth",
            title: "UPDATE ... SET b = b + 1 over a tenth of the table (g < 10)",
            setup: loaded,
            run: |db, _| {
                db.query("UPDATE t1 SET b = b + 1 WHERE g < 10", &[])?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "join-three",
            title: "three tables: orders, their customers and their t1 rows, GROUP BY city",
            setup: |db, ctx| {
                load_t1(db, ctx, false)?;
                load_join(db, ctx)?;
                Ok(Vec::new())
            },
            run: |db, _| {
                let rows = db.query(
                    "SELECT c.city, count(*) AS n, sum(t1.b) AS s FROM orders o JOIN customers c ON c.id = o.customer_id JOIN t1 ON t1.id = o.id WHERE o.amount < ? GROUP BY c.city ORDER BY c.city",
                    &[Value::Integer(5000)],
                )?;
                Ok(rows.into_iter().flatten().collect())
            },
            check: nothing,
        },
        Workload {
            name: "correlated",
            title: "orders above their customer's average: a correlated subquery",
            setup: with_join,
            run: |db, _| {
                first(
                    db,
                    "SELECT count(*) AS n, sum(o.amount) AS s FROM orders o WHERE o.amount > (SELECT avg(p.amount) FROM orders p WHERE p.customer_id = o.customer_id)",
                    &[],
                )
            },
            check: nothing,
        },
    ]
}
