//! A native benchmark: the same workloads on cairn (memory storage) and SQLite (in memory),
//! medians of several runs and the ratio. `cargo run --release -p cairn-sql --example bench`.
//! (Memory against memory: the file-backed comparison waits for the real store.)

use cairn_sql::{Database, Value};
use std::time::Instant;

const N: i64 = 20_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut v = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        f();
        v.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    median(v)
}

const SCHEMA: &str = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, city TEXT, score REAL);
CREATE INDEX users_age ON users (age);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, total REAL);
CREATE INDEX orders_user ON orders (user_id)";

fn cairn_db() -> Database {
    let mut db = Database::memory();
    db.exec_script(SCHEMA).unwrap();
    db
}

fn sqlite_db() -> rusqlite::Connection {
    let c = rusqlite::Connection::open_in_memory().unwrap();
    c.execute_batch(SCHEMA).unwrap();
    c
}

fn fill_cairn(db: &mut Database) {
    db.execute("BEGIN", &[]).unwrap();
    let ins = db
        .prepare("INSERT INTO users (name, age, city, score) VALUES (?, ?, ?, ?)")
        .unwrap();
    for i in 0..N {
        ins.execute(
            db,
            &[
                Value::Text(format!("user{i}")),
                Value::Integer(18 + i % 60),
                Value::Text(["oslo", "rome", "lima", "kyiv"][(i % 4) as usize].into()),
                Value::Real((i % 1000) as f64 / 10.0),
            ],
        )
        .unwrap();
    }
    let ins = db
        .prepare("INSERT INTO orders (user_id, total) VALUES (?, ?)")
        .unwrap();
    for i in 0..N {
        ins.execute(
            db,
            &[Value::Integer(1 + (i * 7) % N), Value::Real(i as f64)],
        )
        .unwrap();
    }
    db.execute("COMMIT", &[]).unwrap();
}

fn fill_sqlite(c: &mut rusqlite::Connection) {
    let tx = c.transaction().unwrap();
    {
        let mut st = tx
            .prepare("INSERT INTO users (name, age, city, score) VALUES (?, ?, ?, ?)")
            .unwrap();
        for i in 0..N {
            st.execute(rusqlite::params![
                format!("user{i}"),
                18 + i % 60,
                ["oslo", "rome", "lima", "kyiv"][(i % 4) as usize],
                (i % 1000) as f64 / 10.0
            ])
            .unwrap();
        }
        let mut st = tx
            .prepare("INSERT INTO orders (user_id, total) VALUES (?, ?)")
            .unwrap();
        for i in 0..N {
            st.execute(rusqlite::params![1 + (i * 7) % N, i as f64])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

fn main() {
    let runs = 5;
    let mut rows: Vec<(&str, f64, f64)> = Vec::new();

    let c = time(runs, || fill_cairn(&mut cairn_db()));
    let s = time(runs, || fill_sqlite(&mut sqlite_db()));
    rows.push(("insert 2x20k rows, one transaction", c, s));

    let mut db = cairn_db();
    fill_cairn(&mut db);
    let mut sq = sqlite_db();
    fill_sqlite(&mut sq);

    let queries: &[(&str, &str, bool)] = &[
        ("point select by primary key x20k", "SELECT name, age FROM users WHERE id = ?", true),
        ("indexed equality (age = ?) x2k", "SELECT id, name FROM users WHERE age = ?", true),
        ("full scan with filter", "SELECT count(*) FROM users WHERE score > 50 AND city = 'oslo'", false),
        ("group by + aggregates", "SELECT city, count(*), avg(score), max(age) FROM users GROUP BY city", false),
        ("join via index", "SELECT count(*), sum(o.total) FROM users u JOIN orders o ON o.user_id = u.id WHERE u.age = 30", false),
        ("order by + limit", "SELECT name FROM users ORDER BY score DESC, id LIMIT 10", false),
        ("range on index, covering", "SELECT count(age) FROM users WHERE age BETWEEN 20 AND 30", false),
    ];
    for (name, sql, param) in queries {
        let reps = if *param {
            if name.contains("x20k") {
                N
            } else {
                2000
            }
        } else {
            20
        };
        let stmt = db.prepare(sql).unwrap();
        let c = time(runs, || {
            for i in 0..reps {
                let p = if *param {
                    vec![Value::Integer(
                        1 + i % if name.contains("age") { 60 } else { N },
                    )]
                } else {
                    vec![]
                };
                let p = if name.contains("age") && *param {
                    vec![Value::Integer(18 + i % 60)]
                } else {
                    p
                };
                std::hint::black_box(stmt.execute(&mut db, &p).unwrap());
            }
        });
        let mut st = sq.prepare(sql).unwrap();
        let n = st.column_count();
        let s = time(runs, || {
            for i in 0..reps {
                let mut q = if *param {
                    let v = if name.contains("age") {
                        18 + i % 60
                    } else {
                        1 + i % N
                    };
                    st.query([v]).unwrap()
                } else {
                    st.query([]).unwrap()
                };
                let mut out = Vec::new();
                while let Some(r) = q.next().unwrap() {
                    for k in 0..n {
                        out.push(r.get::<_, rusqlite::types::Value>(k).unwrap());
                    }
                }
                std::hint::black_box(out);
            }
        });
        rows.push((name, c, s));
    }
    println!(
        "{:<40} {:>12} {:>12} {:>8}",
        "workload (memory)", "cairn ms", "sqlite ms", "ratio"
    );
    for (n, c, s) in rows {
        println!("{n:<40} {c:>12.2} {s:>12.2} {:>8.2}", c / s);
    }
}
