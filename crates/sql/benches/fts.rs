//! The full-text search workloads' queries (`bench-browser/workloads/82-87`), natively on cairn
//! and on SQLite's FTS5 over the same documents (`bench-browser/src/fts.js`'s generator), both
//! in memory: time per query, for finding where cairn's search spends it.
//!
//! `cargo bench -p cairn-sql --bench fts`; environment: `BENCH_ROWS` (documents, default
//! 10,000), `BENCH_RUNS` (rounds of the queries, default 3; the median is reported).
//! `BENCH_SIZE=1` also reports the bytes each engine's index adds to the file.
//! `BENCH_PROFILE=1` runs only cairn's one-word queries, once more inside `profiled_run`:
//! `BENCH_PROFILE=1 valgrind --tool=callgrind --toggle-collect='*profiled_run*' <binary>`.

use cairn_sql::{Database, Output, Paged, Value};
use cairn_store::{MemoryFile, Options};
use std::time::Instant;

#[path = "common/mulberry32.rs"]
mod mulberry32;
use mulberry32::Mulberry32;

/// fts.js's `docs`: documents of 40 words over 2,000 made-up words, drawn with a skew.
fn docs(count: usize) -> (Vec<String>, Vec<String>) {
    let syl = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "da", "fe", "gu", "ha", "jo", "pi",
        "wu",
    ];
    let vocab: Vec<String> = (0..2000usize)
        .map(|i| {
            let mut w = format!("{}{}", syl[i % 16], syl[(i >> 4) % 16]);
            if i >= 256 {
                w.push_str(syl[(i >> 8) % 16]);
            }
            if i >= 1024 {
                w.push('n');
            }
            w
        })
        .collect();
    let mut rnd = Mulberry32(5);
    let rows = (0..count)
        .map(|_| {
            (0..40)
                .map(|_| vocab[(rnd.next().powf(2.5) * 2000.0) as usize].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (vocab, rows)
}

const ONE: &str = "SELECT rowid AS id FROM docs_fts WHERE docs_fts MATCH ?1 ORDER BY rank LIMIT 20";
const FILTER: &str = "SELECT f.rowid AS id FROM docs_fts f JOIN docs d ON d.id = f.rowid \
     WHERE docs_fts MATCH ?1 AND d.cat = 3 ORDER BY rank LIMIT 20";

fn queries(vocab: &[String]) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let pick =
        |n: usize| -> Vec<String> { (0..n).map(|i| vocab[(i * 37) % 400].clone()).collect() };
    let w = pick(51);
    vec![
        ("one-word", ONE, pick(50)),
        (
            "two-words",
            ONE,
            (0..50).map(|i| format!("{} {}", w[i], w[i + 1])).collect(),
        ),
        (
            "prefix",
            ONE,
            pick(50).iter().map(|w| format!("{}*", &w[..3])).collect(),
        ),
        ("filter", FILTER, pick(50)),
    ]
}

fn cairn(rows: &[String]) -> Database {
    let store = Paged::open(MemoryFile::new(), Options::default()).expect("store");
    let mut db = Database::open(Box::new(store)).expect("open");
    db.exec_script(
        "CREATE TABLE docs(id INTEGER PRIMARY KEY, cat INTEGER, body TEXT);
         CREATE VIRTUAL TABLE docs_fts USING fts5(body); BEGIN;",
    )
    .expect("schema");
    for (i, b) in rows.iter().enumerate() {
        let (id, cat, b) = (
            Value::Integer(i as i64 + 1),
            Value::Integer(i as i64 % 10),
            Value::Text(b.clone()),
        );
        db.execute(
            "INSERT INTO docs(id, cat, body) VALUES (?, ?, ?)",
            &[id.clone(), cat, b.clone()],
        )
        .expect("insert");
        db.execute("INSERT INTO docs_fts(rowid, body) VALUES (?, ?)", &[id, b])
            .expect("insert");
    }
    db.execute("COMMIT", &[]).expect("commit");
    db
}

fn sqlite(rows: &[String]) -> rusqlite::Connection {
    let c = rusqlite::Connection::open_in_memory().expect("sqlite");
    c.execute_batch(
        "CREATE TABLE docs(id INTEGER PRIMARY KEY, cat INTEGER, body TEXT);
         CREATE VIRTUAL TABLE docs_fts USING fts5(body); BEGIN;",
    )
    .expect("schema");
    for (i, b) in rows.iter().enumerate() {
        let id = i as i64 + 1;
        c.execute(
            "INSERT INTO docs(id, cat, body) VALUES (?, ?, ?)",
            rusqlite::params![id, (id - 1) % 10, b],
        )
        .expect("insert");
        c.execute(
            "INSERT INTO docs_fts(rowid, body) VALUES (?, ?)",
            rusqlite::params![id, b],
        )
        .expect("insert");
    }
    c.execute_batch("COMMIT").expect("commit");
    c
}

/// Bytes the index of `rows` adds to a database file, on each engine: the documents in a
/// table with an external content index over them, against the table alone (SQLite's file
/// after VACUUM).
fn index_sizes(rows: &[String]) -> (usize, usize) {
    let index =
        "CREATE VIRTUAL TABLE docs_fts USING fts5(body, content='docs', content_rowid='id')";
    let mut sizes = [[0usize; 2]; 2];
    for (i, with) in [false, true].into_iter().enumerate() {
        let store = Paged::open(MemoryFile::new(), Options::default()).expect("store");
        let mut db = Database::open(Box::new(store)).expect("open");
        db.exec_script("CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT); BEGIN;")
            .expect("schema");
        if with {
            db.execute(index, &[]).expect("index");
        }
        for (k, b) in rows.iter().enumerate() {
            db.execute(
                "INSERT INTO docs(id, body) VALUES (?, ?)",
                &[Value::Integer(k as i64 + 1), Value::Text(b.clone())],
            )
            .expect("insert");
        }
        db.execute("COMMIT", &[]).expect("commit");
        sizes[0][i] = db.export().expect("export").len();
        let c = rusqlite::Connection::open_in_memory().expect("sqlite");
        c.execute_batch("CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT)")
            .expect("schema");
        if with {
            c.execute_batch(&format!(
                "{index}; CREATE TRIGGER docs_ai AFTER INSERT ON docs BEGIN \
                 INSERT INTO docs_fts(rowid, body) VALUES (new.id, new.body); END;"
            ))
            .expect("index");
        }
        c.execute_batch("BEGIN").expect("begin");
        for (k, b) in rows.iter().enumerate() {
            c.execute(
                "INSERT INTO docs(id, body) VALUES (?, ?)",
                rusqlite::params![k as i64 + 1, b],
            )
            .expect("insert");
        }
        c.execute_batch("COMMIT; VACUUM").expect("commit");
        let pages: i64 = c
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .expect("pages");
        let size: i64 = c
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("size");
        sizes[1][i] = (pages * size) as usize;
    }
    (sizes[0][1] - sizes[0][0], sizes[1][1] - sizes[1][0])
}

fn cairn_ids(db: &mut Database, sql: &str, q: &str) -> Vec<i64> {
    match db.execute(sql, &[Value::Text(q.into())]).expect("query") {
        Output::Rows { rows, .. } => rows
            .iter()
            .map(|r| match r[0] {
                Value::Integer(i) => i,
                _ => 0,
            })
            .collect(),
        _ => vec![],
    }
}

#[inline(never)]
fn profiled_run(db: &mut Database, qs: &[String]) -> usize {
    qs.iter().map(|q| cairn_ids(db, ONE, q).len()).sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, runs) = (env("BENCH_ROWS", 10_000), env("BENCH_RUNS", 3).max(1));
    let (vocab, rows) = docs(n);
    let t = Instant::now();
    let mut db = cairn(&rows);
    let build_cairn = t.elapsed().as_secs_f64() * 1e3;
    let qs = queries(&vocab);
    if std::env::var("BENCH_PROFILE").is_ok_and(|v| !v.is_empty()) {
        let rounds = env("BENCH_PROFILE_ROUNDS", 20);
        let found: usize = (0..rounds).map(|_| profiled_run(&mut db, &qs[0].2)).sum();
        println!("{found} rows");
        return;
    }
    let t = Instant::now();
    let sq = sqlite(&rows);
    let build_sqlite = t.elapsed().as_secs_f64() * 1e3;
    if std::env::var("BENCH_SIZE").is_ok_and(|v| !v.is_empty()) {
        let (a, b) = index_sizes(&rows);
        println!("index size, {n} documents: cairn {a} bytes, SQLite {b} bytes");
    }
    println!("{n} documents; ms per query, median of {runs} rounds of 50");
    println!("| workload | cairn | SQLite FTS5 | cairn/SQLite |\n|---|---:|---:|---:|");
    println!(
        "| build (one transaction, ms) | {build_cairn:.0} | {build_sqlite:.0} | {:.2} |",
        build_cairn / build_sqlite
    );
    for (name, sql, words) in &qs {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = Instant::now();
            let mut got = Vec::new();
            for q in words {
                got.push(cairn_ids(&mut db, sql, q));
            }
            a.push(t.elapsed().as_secs_f64() * 1e3 / words.len() as f64);
            let t = Instant::now();
            let mut want = Vec::new();
            let mut st = sq.prepare_cached(sql).expect("prepare");
            for q in words {
                let ids: Vec<i64> = st
                    .query_map([q], |r| r.get(0))
                    .expect("query")
                    .map(|r| r.expect("row"))
                    .collect();
                want.push(ids);
            }
            b.push(t.elapsed().as_secs_f64() * 1e3 / words.len() as f64);
            // Ties in rank may order differently; the counts must agree.
            let lens = |v: &Vec<Vec<i64>>| v.iter().map(Vec::len).collect::<Vec<_>>();
            assert_eq!(lens(&got), lens(&want), "{name}: the engines disagree");
        }
        let (a, b) = (median(a), median(b));
        println!("| {name} | {a:.3} | {b:.3} | {:.2} |", a / b);
    }
}
