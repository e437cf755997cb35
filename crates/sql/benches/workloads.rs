//! The browser benchmark's workloads (`bench-browser/workloads/*.mjs`), run natively on cairn
//! and on SQLite in the same run, in two modes: both on a file with full durability (cairn:
//! `Paged` over `StdFile`, one flush per commit; SQLite: WAL with `synchronous=FULL`) and both in
//! memory. Same SQL, same data, prepared statements on both sides, every result value read.
//!
//! `cargo bench -p cairn-sql --bench workloads`; environment: `BENCH_RUNS` (runs per workload and
//! engine, default 5; the median is reported), `BENCH_ROWS` (rows in t1, default 10,000; the
//! counts scale with it as in the browser benchmark), `BENCH_ONLY` (run only the workloads whose
//! name contains this). An unfiltered run also writes `crates/sql/bench-results/workloads.md`.
//!
//! `BENCH_PROFILE=<name>` instead runs that one workload once, on cairn in memory (in a file
//! with `BENCH_PROFILE_MODE=file`, kept with `BENCH_PROFILE_KEEP=1`), with its timed part inside
//! `profiled_run`, for a profiler to look at only that part. Instruction
//! counts are steady where times on a shared machine are not:
//! `BENCH_PROFILE=update-range valgrind --tool=callgrind --toggle-collect='*profiled_run*'
//! target/release/deps/workloads-<hash>` (the binary `cargo bench --no-run` names).

use cairn_sql::Paged;
use cairn_sql::{Database, Statement, Value};
use cairn_store::hash::FastMap;
use cairn_store::{MemoryFile, Options, StdFile};
use rusqlite::types::{ToSqlOutput, ValueRef};
use std::path::PathBuf;
use std::time::Instant;

#[path = "workloads/app.rs"]
mod app;

// ---------------------------------------------------------------------------------------------
// Data: the same generator as bench-browser/src/data.js, so the rows are the browser's rows.

#[path = "common/mulberry32.rs"]
mod mulberry32;
use mulberry32::Mulberry32;

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// `n` (below 1,000,000) in lower-case English words.
fn words(n: i64) -> String {
    let n = n as usize;
    if n < 20 {
        ONES[n].to_string()
    } else if n < 100 {
        let mut s = TENS[n / 10].to_string();
        if !n.is_multiple_of(10) {
            s.push(' ');
            s.push_str(ONES[n % 10]);
        }
        s
    } else if n < 1000 {
        let mut s = format!("{} hundred", ONES[n / 100]);
        if !n.is_multiple_of(100) {
            s.push(' ');
            s.push_str(&words((n % 100) as i64));
        }
        s
    } else {
        let mut s = format!("{} thousand", words((n / 1000) as i64));
        if !n.is_multiple_of(1000) {
            s.push(' ');
            s.push_str(&words((n % 1000) as i64));
        }
        s
    }
}

/// Rows of t1: `[id, a, b, c, g]` with ids from `start`.
fn t1_rows(count: usize, seed: u32, start: i64) -> Vec<Vec<Value>> {
    let mut rnd = Mulberry32(seed);
    (0..count)
        .map(|i| {
            let b = (rnd.next() * 100_000.0).floor() as i64;
            let g = (rnd.next() * 100.0).floor() as i64;
            let id = start + i as i64;
            vec![
                Value::Integer(id),
                Value::Integer(id),
                Value::Integer(b),
                Value::Text(words(b)),
                Value::Integer(g),
            ]
        })
        .collect()
}

/// `count` integers in `[0, max)` from a fixed seed.
fn ints(count: usize, max: usize, seed: u32) -> Vec<i64> {
    let mut rnd = Mulberry32(seed);
    (0..count)
        .map(|_| (rnd.next() * max as f64).floor() as i64)
        .collect()
}

const T1_SCHEMA: &str =
    "CREATE TABLE t1(id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c TEXT, g INTEGER)";

// ---------------------------------------------------------------------------------------------
// Engines: one small interface over both, so every workload is written once.

/// An error from an engine, with whether it means "cairn does not support this SQL".
#[derive(Debug)]
struct Fail {
    unsupported: bool,
    msg: String,
}

type R<T> = Result<T, Fail>;

trait Engine {
    /// Runs one SQL statement (or a script) without parameters or results: DDL, BEGIN, COMMIT.
    fn exec(&mut self, sql: &str) -> R<()>;
    /// Runs a (cached) prepared statement and returns its rows, every value read.
    fn query(&mut self, sql: &str, params: &[Value]) -> R<Vec<Vec<Value>>>;
    /// Flushes whatever the engine keeps in memory and drops it (untimed).
    fn close(self: Box<Self>);
}

/// The statement cache stands for the Worker's (a JS `Map` from SQL text): one lookup per query,
/// through the engine's own hasher, so the harness's hashing is not counted as the engine's.
struct Cairn {
    db: Database,
    stmts: FastMap<String, Statement>,
}

fn cairn_fail(e: cairn_sql::Error) -> Fail {
    Fail {
        unsupported: matches!(e.code(), "UNSUPPORTED" | "SYNTAX"),
        msg: format!("{}: {e}", e.code()),
    }
}

impl Engine for Cairn {
    fn exec(&mut self, sql: &str) -> R<()> {
        self.db.exec_script(sql).map_err(cairn_fail)?;
        Ok(())
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> R<Vec<Vec<Value>>> {
        let run = |st: &Statement, db: &mut Database| -> R<Vec<Vec<Value>>> {
            match st.execute(db, params).map_err(cairn_fail)? {
                cairn_sql::Output::Rows { rows, .. } => Ok(rows),
                _ => Ok(Vec::new()),
            }
        };
        if let Some(st) = self.stmts.get(sql) {
            return run(st, &mut self.db);
        }
        let st = self.db.prepare(sql).map_err(cairn_fail)?;
        let rows = run(&st, &mut self.db);
        self.stmts.insert(sql.to_string(), st);
        rows
    }

    fn close(self: Box<Self>) {}
}

struct Sqlite {
    conn: rusqlite::Connection,
}

fn sqlite_fail(e: rusqlite::Error) -> Fail {
    Fail {
        unsupported: false,
        msg: format!("sqlite: {e}"),
    }
}

fn to_sql(v: &Value) -> ToSqlOutput<'_> {
    ToSqlOutput::Borrowed(match v {
        Value::Null => ValueRef::Null,
        Value::Integer(i) => ValueRef::Integer(*i),
        Value::Real(r) => ValueRef::Real(*r),
        Value::Text(s) => ValueRef::Text(s.as_bytes()),
        Value::Blob(b) => ValueRef::Blob(b),
    })
}

fn from_sqlite(v: rusqlite::types::Value) -> Value {
    use rusqlite::types::Value as S;
    match v {
        S::Null => Value::Null,
        S::Integer(i) => Value::Integer(i),
        S::Real(r) => Value::Real(r),
        S::Text(s) => Value::Text(s),
        S::Blob(b) => Value::Blob(b),
    }
}

impl Engine for Sqlite {
    fn exec(&mut self, sql: &str) -> R<()> {
        self.conn.execute_batch(sql).map_err(sqlite_fail)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> R<Vec<Vec<Value>>> {
        let mut st = self.conn.prepare_cached(sql).map_err(sqlite_fail)?;
        let ncols = st.column_count();
        let mut rows = st
            .query(rusqlite::params_from_iter(params.iter().map(to_sql)))
            .map_err(sqlite_fail)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(sqlite_fail)? {
            let mut vals = Vec::with_capacity(ncols);
            for i in 0..ncols {
                let v = row
                    .get::<_, rusqlite::types::Value>(i)
                    .map_err(sqlite_fail)?;
                vals.push(from_sqlite(v));
            }
            out.push(vals);
        }
        Ok(out)
    }

    fn close(self: Box<Self>) {
        self.conn.close().expect("SQLite closes");
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    File,
    Memory,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Cairn,
    Sqlite,
}

/// A fresh, empty database, and the files to remove when done with it.
fn open(kind: Kind, mode: Mode, tag: &str) -> (Box<dyn Engine>, Vec<PathBuf>) {
    let base = std::env::temp_dir().join(format!("cairn-workloads-{}-{tag}", std::process::id()));
    match (kind, mode) {
        (Kind::Cairn, Mode::File) => {
            let path = base.with_extension("cairn");
            let _ = std::fs::remove_file(&path);
            let file = StdFile::open(&path, true).expect("create the cairn file");
            let store = Paged::open(file, Options::default()).expect("open the cairn store");
            let db = Database::open(Box::new(store)).expect("open the cairn database");
            let engine = Cairn {
                db,
                stmts: FastMap::default(),
            };
            (Box::new(engine), vec![path])
        }
        (Kind::Cairn, Mode::Memory) => {
            let store =
                Paged::open(MemoryFile::new(), Options::default()).expect("open the cairn store");
            let db = Database::open(Box::new(store)).expect("open the cairn database");
            let engine = Cairn {
                db,
                stmts: FastMap::default(),
            };
            (Box::new(engine), Vec::new())
        }
        (Kind::Sqlite, Mode::File) => {
            let path = base.with_extension("sqlite");
            let files: Vec<PathBuf> = ["", "-wal", "-shm"]
                .iter()
                .map(|s| PathBuf::from(format!("{}{s}", path.display())))
                .collect();
            for f in &files {
                let _ = std::fs::remove_file(f);
            }
            let conn = rusqlite::Connection::open(&path).expect("create the SQLite file");
            conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
                .expect("set SQLite's durability");
            (Box::new(Sqlite { conn }), files)
        }
        (Kind::Sqlite, Mode::Memory) => {
            let conn = rusqlite::Connection::open_in_memory().expect("open SQLite in memory");
            (Box::new(Sqlite { conn }), Vec::new())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads.

/// The run's parameters and its input data, made once before anything is timed (building
/// 10,000 rows of text costs milliseconds, which would blur the engines' differences).
struct Ctx {
    rows: usize,
    /// t1 as the setup loads it (seed 1).
    t1: Vec<Vec<Value>>,
    /// The rows the insert workloads insert (seed 2).
    fresh: Vec<Vec<Value>>,
    /// `fresh` as multi-row INSERTs of 200: (SQL, parameters).
    fresh_multirow: Vec<(String, Vec<Value>)>,
    /// update-text's parameters: (text, key).
    text_updates: Vec<Vec<Value>>,
    /// upsert's rows: existing keys with new b and c, interleaved with new keys.
    upserts: Vec<Vec<Value>>,
}

impl Ctx {
    fn new(rows: usize) -> Ctx {
        let mut ctx = Ctx {
            rows,
            t1: t1_rows(rows, 1, 1),
            fresh: t1_rows(rows, 2, 1),
            fresh_multirow: Vec::new(),
            text_updates: Vec::new(),
            upserts: Vec::new(),
        };
        ctx.fresh_multirow = multirow("t1", &ctx.fresh, 200);
        let keys = ints(ctx.scale(1000), rows, 12);
        let vals = ints(keys.len(), 100_000, 13);
        ctx.text_updates = keys
            .iter()
            .zip(&vals)
            .map(|(k, v)| vec![Value::Text(words(*v)), Value::Integer(k + 1)])
            .collect();
        let k = ctx.scale(1000);
        let old = ints(k.div_ceil(2), rows, 14);
        let fresh = t1_rows(k / 2, 15, rows as i64 + 1);
        let vals = ints(old.len(), 100_000, 16);
        let mut upserts: Vec<Vec<Value>> = old
            .iter()
            .zip(&vals)
            .enumerate()
            .map(|(i, (o, v))| {
                vec![
                    Value::Integer(o + 1),
                    Value::Integer(o + 1),
                    Value::Integer(*v),
                    Value::Text(words(*v)),
                    Value::Integer(i as i64 % 100),
                ]
            })
            .collect();
        for (i, f) in fresh.into_iter().enumerate() {
            upserts.insert(2 * i + 1, f);
        }
        ctx.upserts = upserts;
        ctx
    }

    /// `n` (a count at 10,000 rows) scaled to the row count, at least 1.
    fn scale(&self, n: usize) -> usize {
        ((n as f64 * self.rows as f64 / 10_000.0).round() as usize).max(1)
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => *i,
        Value::Real(r) => *r as i64,
        Value::Null => 0,
        other => panic!("expected a number, got {other:?}"),
    }
}

fn real(v: &Value) -> f64 {
    match v {
        Value::Integer(i) => *i as f64,
        Value::Real(r) => *r,
        Value::Null => 0.0,
        other => panic!("expected a number, got {other:?}"),
    }
}

fn text_len(v: &Value) -> i64 {
    match v {
        Value::Text(s) => s.len() as i64,
        other => panic!("expected text, got {other:?}"),
    }
}

/// `rows` as multi-row INSERTs of `per` rows each: (SQL, parameters).
fn multirow(table: &str, rows: &[Vec<Value>], per: usize) -> Vec<(String, Vec<Value>)> {
    rows.chunks(per)
        .map(|chunk| {
            let one = format!("({})", vec!["?"; chunk[0].len()].join(","));
            let sql = format!(
                "INSERT INTO {table} VALUES {}",
                vec![one.as_str(); chunk.len()].join(",")
            );
            (sql, chunk.iter().flatten().cloned().collect())
        })
        .collect()
}

/// Runs multi-row INSERTs, in the current transaction (or none).
fn insert_rows(db: &mut dyn Engine, inserts: &[(String, Vec<Value>)]) -> R<()> {
    for (sql, params) in inserts {
        db.query(sql, params)?;
    }
    Ok(())
}

fn load_t1(db: &mut dyn Engine, ctx: &Ctx, index_b: bool) -> R<()> {
    db.exec(T1_SCHEMA)?;
    db.exec("BEGIN")?;
    insert_rows(db, &multirow("t1", &ctx.t1, 200))?;
    db.exec("COMMIT")?;
    if index_b {
        db.exec("CREATE INDEX t1_b ON t1(b)")?;
    }
    Ok(())
}

fn load_join(db: &mut dyn Engine, ctx: &Ctx) -> R<()> {
    db.exec("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, city TEXT)")?;
    db.exec(
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount INTEGER, note TEXT)",
    )?;
    let mut rnd = Mulberry32(11);
    let customers: Vec<Vec<Value>> = (1..=100)
        .map(|i| {
            vec![
                Value::Integer(i),
                Value::Text(format!("customer {}", words(i))),
                Value::Text(format!("city {}", i % 17)),
            ]
        })
        .collect();
    let orders: Vec<Vec<Value>> = (1..=ctx.scale(5000) as i64)
        .map(|i| {
            let amount = (rnd.next() * 10_000.0).floor() as i64;
            let customer = 1 + (rnd.next() * 100.0).floor() as i64;
            vec![
                Value::Integer(i),
                Value::Integer(customer),
                Value::Integer(amount),
                Value::Text(words(amount)),
            ]
        })
        .collect();
    db.exec("BEGIN")?;
    insert_rows(db, &multirow("customers", &customers, 200))?;
    insert_rows(db, &multirow("orders", &orders, 200))?;
    db.exec("COMMIT")?;
    db.exec("CREATE INDEX orders_customer ON orders(customer_id)")
}

/// Row count and column sums of a table.
fn table_check(db: &mut dyn Engine, table: &str) -> R<Vec<Value>> {
    let sql = format!(
        "SELECT count(*) AS n, sum(a) AS sa, sum(b) AS sb, sum(g) AS sg, sum(length(c)) AS sc FROM {table}"
    );
    Ok(db.query(&sql, &[])?.remove(0))
}

fn ints_out(v: &[i64]) -> Vec<Value> {
    v.iter().map(|&i| Value::Integer(i)).collect()
}

type Step = fn(&mut dyn Engine, &Ctx) -> R<Vec<Value>>;

struct Workload {
    name: &'static str,
    title: &'static str,
    setup: Step,
    run: Step,
    /// Untimed, after the run: what must agree between the engines (with the run's output).
    check: Step,
}

fn nothing(_: &mut dyn Engine, _: &Ctx) -> R<Vec<Value>> {
    Ok(Vec::new())
}

fn schema_only(db: &mut dyn Engine, _: &Ctx) -> R<Vec<Value>> {
    db.exec(T1_SCHEMA)?;
    Ok(Vec::new())
}

fn loaded(db: &mut dyn Engine, ctx: &Ctx) -> R<Vec<Value>> {
    load_t1(db, ctx, false)?;
    Ok(Vec::new())
}

fn loaded_indexed(db: &mut dyn Engine, ctx: &Ctx) -> R<Vec<Value>> {
    load_t1(db, ctx, true)?;
    Ok(Vec::new())
}

fn check_t1(db: &mut dyn Engine, _: &Ctx) -> R<Vec<Value>> {
    table_check(db, "t1")
}

const INSERT_T1: &str = "INSERT INTO t1 VALUES (?,?,?,?,?)";

fn insert_each_in_txn(db: &mut dyn Engine, ctx: &Ctx) -> R<Vec<Value>> {
    db.exec("BEGIN")?;
    for row in &ctx.fresh {
        db.query(INSERT_T1, row)?;
    }
    db.exec("COMMIT")?;
    Ok(Vec::new())
}

/// Counts and sums of a repeated range aggregate (count, avg over b BETWEEN).
fn range_aggregates(db: &mut dyn Engine, _: &Ctx) -> R<Vec<Value>> {
    let (mut n, mut s) = (0, 0);
    for lo in ints(100, 99_000, 5) {
        let rows = db.query(
            "SELECT count(*) AS n, avg(b) AS m FROM t1 WHERE b BETWEEN ? AND ?",
            &[Value::Integer(lo), Value::Integer(lo + 1000)],
        )?;
        let c = int(&rows[0][0]);
        n += c;
        if c != 0 {
            s += (real(&rows[0][1]) * c as f64).round() as i64;
        }
    }
    Ok(ints_out(&[n, s]))
}

fn workloads() -> Vec<Workload> {
    let mut all = first_workloads();
    all.extend(app::workloads());
    all
}

fn first_workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "insert-autocommit",
            title: "1,000 inserts, each committed alone",
            setup: schema_only,
            run: |db, ctx| {
                for row in &ctx.fresh[..ctx.scale(1000).min(ctx.rows)] {
                    db.query(INSERT_T1, row)?;
                }
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "insert-txn",
            title: "10,000 inserts in one transaction",
            setup: schema_only,
            run: insert_each_in_txn,
            check: check_t1,
        },
        Workload {
            name: "insert-txn-indexed",
            title: "10,000 inserts in one transaction, index on b",
            setup: |db, _| {
                db.exec(T1_SCHEMA)?;
                db.exec("CREATE INDEX t1_b ON t1(b)")?;
                Ok(Vec::new())
            },
            run: insert_each_in_txn,
            check: check_t1,
        },
        Workload {
            name: "insert-multirow",
            title: "10,000 rows as multi-row inserts of 200, one transaction",
            setup: schema_only,
            run: |db, ctx| {
                db.exec("BEGIN")?;
                insert_rows(db, &ctx.fresh_multirow)?;
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "insert-select",
            title: "INSERT INTO t2 SELECT * FROM t1 (10,000 rows)",
            setup: |db, ctx| {
                load_t1(db, ctx, false)?;
                db.exec(&T1_SCHEMA.replace("t1", "t2"))?;
                Ok(Vec::new())
            },
            run: |db, _| {
                db.query("INSERT INTO t2 SELECT * FROM t1", &[])?;
                Ok(Vec::new())
            },
            check: |db, _| table_check(db, "t2"),
        },
        Workload {
            name: "read-all",
            title: "Read all 10,000 rows in order",
            setup: loaded,
            run: |db, _| {
                let rows = db.query("SELECT * FROM t1 ORDER BY id", &[])?;
                let sb: i64 = rows.iter().map(|r| int(&r[2])).sum();
                let last = rows.last().map_or(-1, |r| int(&r[0]));
                Ok(ints_out(&[rows.len() as i64, sb, last]))
            },
            check: nothing,
        },
        Workload {
            name: "read-pk",
            title: "1,000 point reads by key",
            setup: loaded,
            run: |db, ctx| {
                let (mut n, mut s) = (0, 0);
                for k in ints(ctx.scale(1000), ctx.rows, 3) {
                    for r in db.query("SELECT * FROM t1 WHERE id = ?", &[Value::Integer(k + 1)])? {
                        n += 1;
                        s += int(&r[2]) + text_len(&r[3]);
                    }
                }
                Ok(ints_out(&[n, s]))
            },
            check: nothing,
        },
        Workload {
            name: "read-indexed",
            title: "1,000 reads by an indexed column (b)",
            setup: loaded_indexed,
            run: |db, ctx| {
                let (mut n, mut s) = (0, 0);
                for i in ints(ctx.scale(1000), ctx.rows, 4) {
                    let b = ctx.t1[i as usize][2].clone();
                    for r in db.query("SELECT * FROM t1 WHERE b = ?", &[b])? {
                        n += 1;
                        s += int(&r[1]);
                    }
                }
                Ok(ints_out(&[n, s]))
            },
            check: nothing,
        },
        Workload {
            name: "range-indexed",
            title: "100 indexed range aggregates (count, avg over b BETWEEN)",
            setup: loaded_indexed,
            run: range_aggregates,
            check: nothing,
        },
        Workload {
            name: "range-unindexed",
            title: "100 unindexed range aggregates (count, avg over b BETWEEN)",
            setup: loaded,
            run: range_aggregates,
            check: nothing,
        },
        Workload {
            name: "like",
            title: "10 LIKE scans",
            setup: loaded,
            run: |db, _| {
                let mut counts = Vec::new();
                for p in [
                    "%one%", "%two%", "%three%", "%four%", "%five%", "%six%", "%seven%", "%eight%",
                    "%nine%", "%teen%",
                ] {
                    let rows = db.query(
                        "SELECT count(*) AS n FROM t1 WHERE c LIKE ?",
                        &[Value::Text(p.into())],
                    )?;
                    counts.push(int(&rows[0][0]));
                }
                Ok(ints_out(&counts))
            },
            check: nothing,
        },
        Workload {
            name: "group-by",
            title: "GROUP BY g with count, sum, avg",
            setup: loaded,
            run: |db, _| {
                let rows = db.query(
                    "SELECT g, count(*) AS n, sum(b) AS s, avg(b) AS m FROM t1 GROUP BY g ORDER BY g",
                    &[],
                )?;
                let (mut n, mut s, mut m) = (0, 0, 0);
                for r in &rows {
                    n += int(&r[1]);
                    s += int(&r[2]);
                    m += real(&r[3]).round() as i64;
                }
                Ok(ints_out(&[rows.len() as i64, n, s, m]))
            },
            check: nothing,
        },
        Workload {
            name: "order-limit",
            title: "100 ORDER BY b LIMIT 10 queries (no index on b)",
            setup: loaded,
            run: |db, _| {
                let (mut n, mut s) = (0, 0);
                for lo in ints(100, 90_000, 6) {
                    for r in db.query(
                        "SELECT a, b, c FROM t1 WHERE b >= ? ORDER BY b LIMIT 10",
                        &[Value::Integer(lo)],
                    )? {
                        n += 1;
                        s += int(&r[1]);
                    }
                }
                Ok(ints_out(&[n, s]))
            },
            check: nothing,
        },
        Workload {
            name: "join",
            title: "100 customer joins (orders by indexed customer_id)",
            setup: |db, ctx| {
                load_join(db, ctx)?;
                Ok(Vec::new())
            },
            run: |db, _| {
                let (mut n, mut s) = (0, 0);
                for id in 1..=100 {
                    for r in db.query(
                        "SELECT o.id, o.amount, c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.customer_id = ?",
                        &[Value::Integer(id)],
                    )? {
                        n += 1;
                        s += int(&r[1]) + text_len(&r[2]);
                    }
                }
                Ok(ints_out(&[n, s]))
            },
            check: nothing,
        },
        Workload {
            name: "update-pk",
            title: "1,000 updates by key, one transaction",
            setup: loaded,
            run: |db, ctx| {
                let keys = ints(ctx.scale(1000), ctx.rows, 8);
                let vals = ints(keys.len(), 100_000, 9);
                db.exec("BEGIN")?;
                for (k, v) in keys.iter().zip(&vals) {
                    db.query(
                        "UPDATE t1 SET b = ? WHERE id = ?",
                        &[Value::Integer(*v), Value::Integer(k + 1)],
                    )?;
                }
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "update-range",
            title: "100 range updates by key range, one transaction",
            setup: loaded,
            run: |db, ctx| {
                let w = ctx.scale(100) as i64;
                db.exec("BEGIN")?;
                for (i, lo) in ints(100, ctx.rows, 10).into_iter().enumerate() {
                    db.query(
                        "UPDATE t1 SET g = ? WHERE id BETWEEN ? AND ?",
                        &[
                            Value::Integer(i as i64),
                            Value::Integer(lo),
                            Value::Integer(lo + w),
                        ],
                    )?;
                }
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "update-text",
            title: "1,000 text updates by key, one transaction",
            setup: loaded,
            run: |db, ctx| {
                db.exec("BEGIN")?;
                for params in &ctx.text_updates {
                    db.query("UPDATE t1 SET c = ? WHERE id = ?", params)?;
                }
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "update-all",
            title: "UPDATE t1 SET b = b + 1 (every row)",
            setup: loaded,
            run: |db, _| {
                db.query("UPDATE t1 SET b = b + 1", &[])?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "upsert",
            title: "1,000 upserts (half new keys), one transaction",
            setup: loaded,
            run: |db, ctx| {
                let sql = "INSERT INTO t1 VALUES (?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET b = excluded.b, c = excluded.c";
                db.exec("BEGIN")?;
                for r in &ctx.upserts {
                    db.query(sql, r)?;
                }
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "delete-pk",
            title: "1,000 deletes by key, one transaction",
            setup: loaded,
            run: |db, ctx| {
                db.exec("BEGIN")?;
                for k in ints(ctx.scale(1000), ctx.rows, 17) {
                    db.query("DELETE FROM t1 WHERE id = ?", &[Value::Integer(k + 1)])?;
                }
                db.exec("COMMIT")?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "delete-like",
            title: "Delete by pattern (c LIKE '%fifty%')",
            setup: loaded,
            run: |db, _| {
                db.query("DELETE FROM t1 WHERE c LIKE '%fifty%'", &[])?;
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "delete-range",
            title: "10 range deletes (a BETWEEN, unindexed)",
            setup: loaded,
            run: |db, ctx| {
                let w = ctx.scale(300) as i64;
                for lo in ints(10, ctx.rows, 18) {
                    db.query(
                        "DELETE FROM t1 WHERE a BETWEEN ? AND ?",
                        &[Value::Integer(lo), Value::Integer(lo + w)],
                    )?;
                }
                Ok(Vec::new())
            },
            check: check_t1,
        },
        Workload {
            name: "create-index",
            title: "CREATE INDEX on 10,000 rows",
            setup: loaded,
            run: |db, _| {
                db.exec("CREATE INDEX t1_b ON t1(b)")?;
                Ok(Vec::new())
            },
            check: |db, _| {
                let rows = db.query(
                    "SELECT count(*) AS n FROM t1 WHERE b BETWEEN ? AND ?",
                    &[Value::Integer(20_000), Value::Integer(30_000)],
                )?;
                let mut out = rows[0].clone();
                out.extend(table_check(db, "t1")?);
                Ok(out)
            },
        },
        Workload {
            name: "drop-table",
            title: "DROP TABLE of 10,000 rows",
            setup: loaded,
            run: |db, _| {
                db.exec("DROP TABLE t1")?;
                Ok(Vec::new())
            },
            check: |db, _| {
                let state = match db.query("SELECT count(*) AS n FROM t1", &[]) {
                    Ok(_) => "still there",
                    Err(_) => "dropped",
                };
                Ok(vec![Value::Text(state.into())])
            },
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The runner.

/// Values as text for comparing engines: reals to 6 decimals (avg may differ in the last bits).
fn norm(vals: &[Value]) -> String {
    let parts: Vec<String> = vals
        .iter()
        .map(|v| match v {
            Value::Real(r) => format!("{r:.6}"),
            Value::Integer(i) => i.to_string(),
            Value::Text(s) => format!("{s:?}"),
            Value::Null => "NULL".into(),
            Value::Blob(b) => format!("blob {b:?}"),
        })
        .collect();
    parts.join(", ")
}

/// One run of one workload on a fresh database: milliseconds of the timed part, and the
/// run's output and check, as text.
fn run_once(w: &Workload, kind: Kind, mode: Mode, ctx: &Ctx) -> R<(f64, String)> {
    let tag = match kind {
        Kind::Cairn => "cairn",
        Kind::Sqlite => "sqlite",
    };
    let (mut db, files) = open(kind, mode, tag);
    let result = (|| {
        (w.setup)(db.as_mut(), ctx)?;
        let t = Instant::now();
        let out = (w.run)(db.as_mut(), ctx)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let check = (w.check)(db.as_mut(), ctx)?;
        Ok((ms, format!("out [{}] check [{}]", norm(&out), norm(&check))))
    })();
    db.close();
    for f in files {
        let _ = std::fs::remove_file(f);
    }
    result
}

/// A workload's timed part, kept out of line so a profiler can count it alone.
#[inline(never)]
fn profiled_run(w: &Workload, db: &mut dyn Engine, ctx: &Ctx) -> R<Vec<Value>> {
    (w.run)(db, ctx)
}

/// `BENCH_PROFILE`: one run of the workload `name` on cairn in memory, or in a file when
/// `BENCH_PROFILE_MODE=file`.
fn profile(name: &str, ctx: &Ctx) {
    let all = workloads();
    let Some(w) = all.iter().find(|w| w.name == name) else {
        eprintln!("no workload is named {name:?}");
        return;
    };
    let mode = match std::env::var("BENCH_PROFILE_MODE").as_deref() {
        Ok("file") => Mode::File,
        _ => Mode::Memory,
    };
    let (mut db, files) = open(Kind::Cairn, mode, "profile");
    let result = (|| {
        (w.setup)(db.as_mut(), ctx)?;
        let t = Instant::now();
        let out = profiled_run(w, db.as_mut(), ctx)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let check = (w.check)(db.as_mut(), ctx)?;
        Ok::<_, Fail>((ms, out, check))
    })();
    match result {
        Ok((ms, out, check)) => println!(
            "{name}: {ms:.2} ms, out [{}] check [{}]",
            norm(&out),
            norm(&check)
        ),
        Err(e) => eprintln!("{name}: {}", e.msg),
    }
    db.close();
    // `BENCH_PROFILE_KEEP=1` leaves the file for a look at it (`cairn FILE`, `.check`).
    if std::env::var_os("BENCH_PROFILE_KEEP").is_some() {
        for f in &files {
            println!("kept {}", f.display());
        }
        return;
    }
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .replace(['_', ','], "")
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {s:?}")),
        Err(_) => default,
    }
}

fn command_output(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "?".into())
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used (BENCH_ONLY is).
    let runs = env_usize("BENCH_RUNS", 5).max(1);
    let rows = env_usize("BENCH_ROWS", 10_000).max(1);
    let only = std::env::var("BENCH_ONLY").ok().filter(|s| !s.is_empty());
    let ctx = Ctx::new(rows);
    if let Some(name) = std::env::var("BENCH_PROFILE")
        .ok()
        .filter(|s| !s.is_empty())
    {
        profile(&name, &ctx);
        return;
    }
    let all = workloads();
    let chosen: Vec<&Workload> = all
        .iter()
        .filter(|w| only.as_deref().is_none_or(|o| w.name.contains(o)))
        .collect();
    if chosen.is_empty() {
        eprintln!("no workload matches BENCH_ONLY={only:?}");
        return;
    }

    let started = Instant::now();
    let mut report = String::new();
    for (mode, mode_title) in [
        (
            Mode::File,
            "File, full durability (cairn: Paged over StdFile, Durability::Full; SQLite: WAL, synchronous=FULL)",
        ),
        (
            Mode::Memory,
            "Memory (cairn: Paged over MemoryFile; SQLite: open_in_memory)",
        ),
    ] {
        let header = format!(
            "\n## {mode_title}\n\n| workload | cairn ms | SQLite ms | cairn/SQLite | what |\n|---|---:|---:|---:|---|\n"
        );
        print!("{header}");
        report.push_str(&header);
        for w in &chosen {
            let mut times = [Vec::new(), Vec::new()];
            let mut unsupported = None;
            let mut expected: Option<String> = None;
            for _ in 0..runs {
                for (i, kind) in [Kind::Cairn, Kind::Sqlite].into_iter().enumerate() {
                    if kind == Kind::Cairn && unsupported.is_some() {
                        continue;
                    }
                    match run_once(w, kind, mode, &ctx) {
                        Ok((ms, got)) => {
                            times[i].push(ms);
                            match &expected {
                                None => expected = Some(got),
                                Some(e) if *e != got => panic!(
                                    "workload {}: the engines disagree\n  first: {e}\n  {}: {got}",
                                    w.name,
                                    if kind == Kind::Cairn { "cairn" } else { "SQLite" }
                                ),
                                Some(_) => {}
                            }
                        }
                        Err(f) if kind == Kind::Cairn && f.unsupported => {
                            unsupported = Some(f.msg)
                        }
                        Err(f) => panic!(
                            "workload {}: {} failed: {}",
                            w.name,
                            if kind == Kind::Cairn { "cairn" } else { "SQLite" },
                            f.msg
                        ),
                    }
                }
            }
            let sqlite = median(times[1].clone());
            let line = match &unsupported {
                Some(msg) => format!(
                    "| {} | unsupported | {sqlite:.2} | – | {} ({}) |\n",
                    w.name,
                    w.title,
                    msg.replace('|', "\\|")
                ),
                None => {
                    let cairn = median(times[0].clone());
                    format!(
                        "| {} | {cairn:.2} | {sqlite:.2} | {:.2} | {} |\n",
                        w.name,
                        cairn / sqlite,
                        w.title
                    )
                }
            };
            print!("{line}");
            report.push_str(&line);
        }
    }
    let total = started.elapsed().as_secs_f64();
    println!("\n(total {total:.0} s)");

    let mut command = String::new();
    if std::env::var("BENCH_RUNS").is_ok() {
        command.push_str(&format!("BENCH_RUNS={runs} "));
    }
    if std::env::var("BENCH_ROWS").is_ok() {
        command.push_str(&format!("BENCH_ROWS={rows} "));
    }
    command.push_str("cargo bench -p cairn-sql --bench workloads");
    if only.is_some() {
        println!("(BENCH_ONLY is set: crates/sql/bench-results/workloads.md not written)");
        return;
    }
    let doc = format!(
        "# Native workloads: cairn against SQLite\n\n\
         The browser benchmark's workloads (`bench-browser/workloads/*.mjs`: same SQL, same data),\n\
         run natively by `crates/sql/benches/workloads.rs`. Times are the median of {runs} runs of\n\
         the timed part only (setup and checks untimed), in milliseconds; t1 has {rows} rows.\n\
         A ratio above 1 means cairn is slower.\n\n\
         Titles give the counts at 10,000 rows; they scale with the row count.\n\n\
         Syncs: each commit is one `fdatasync` for cairn (`StdFile::flush`) and one `fsync` of the\n\
         WAL for the bundled SQLite (which does not use `fdatasync`), so part of any lead on\n\
         `insert-autocommit` is the cheaper call.\n\n\
         - date: {}\n- command: `{command}`\n- machine: nproc = {}, {}, load average at the end {}\n\
         - total time: {total:.0} s\n{report}",
        command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        command_output("nproc", &[]),
        command_output("uname", &["-sm"]),
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "?".into()),
    );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench-results");
    std::fs::create_dir_all(&dir).expect("create bench-results");
    let path = dir.join("workloads.md");
    std::fs::write(&path, doc).expect("write the results");
    println!("wrote {}", path.display());
}
