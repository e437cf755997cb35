//! Native benchmark: cairn-store against SQLite (rusqlite, bundled) on the same operations, both
//! on files in a temporary directory. Reports the median of several runs and cairn's time as a
//! fraction of SQLite's (below 1.00 means cairn is faster).
//!
//! Run: `cargo bench -p cairn-store --bench store` (add `-- --quick` for fewer repetitions).
//! SQLite runs in WAL mode; `synchronous=FULL` stands beside `Durability::Full` (one fsync per
//! commit each) and `synchronous=NORMAL` beside `Durability::Relaxed` (no fsync at commit).
//! SQLite's figures include its SQL layer (prepared statements, the VDBE); cairn's here are the
//! raw key-value engine, which the SQL layer will add to.

use std::hint::black_box;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_store::{Db, Durability, Options, StdFile, TreeKind};
use cairn_value::codec::encode_key;
use cairn_value::Value;
use rusqlite::{params, Connection};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn key(i: u64) -> Vec<u8> {
    encode_key(&[Value::Integer(i as i64)])
}

fn value(i: u64) -> Vec<u8> {
    (0..100)
        .map(|j| (i as u8).wrapping_mul(31).wrapping_add(j))
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn tmp(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    for ext in ["-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{ext}", p.display()));
    }
    p
}

fn cairn_open(path: &Path, page_size: usize, durability: Durability, create: bool) -> Db<StdFile> {
    let o = Options {
        page_size,
        durability,
        ..Options::default()
    };
    let f = StdFile::open(path, create).expect("open file");
    if create {
        Db::create(f, o).expect("create")
    } else {
        Db::open(f, o).expect("open")
    }
}

fn sqlite_open(path: &Path, sync: &str) -> Connection {
    let c = Connection::open(path).expect("sqlite open");
    c.pragma_update(None, "journal_mode", "WAL").expect("wal");
    c.pragma_update(None, "synchronous", sync).expect("sync");
    c
}

/// A permutation of 0..n (every key once, in a scattered order).
fn order(n: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut r = Rng(42);
    for i in (1..v.len()).rev() {
        let j = (r.next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

fn cairn_fill(db: &Db<StdFile>, n: u64) {
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in order(n) {
        tx.insert(t, &key(i), &value(i)).unwrap();
    }
    tx.commit().unwrap();
}

fn sqlite_fill(c: &Connection, n: u64) {
    c.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
        .unwrap();
    c.execute_batch("BEGIN").unwrap();
    {
        let mut st = c.prepare("INSERT INTO t(k, v) VALUES (?1, ?2)").unwrap();
        for i in order(n) {
            st.execute(params![i as i64, value(i)]).unwrap();
        }
    }
    c.execute_batch("COMMIT").unwrap();
}

struct Row {
    name: String,
    unit: &'static str,
    cairn: Duration,
    sqlite: Option<Duration>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // CAIRN_BENCH=insert,read,scan,index,commit,reopen runs only those (for profiling).
    let only = std::env::var("CAIRN_BENCH").ok();
    let want = |s: &str| only.as_ref().is_none_or(|o| o.split(',').any(|x| x == s));
    let reps = if quick { 3 } else { 7 };
    let dir = std::env::temp_dir().join(format!("cairn-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n: u64 = 100_000;
    let mut rows: Vec<Row> = Vec::new();

    for ps in [4096usize, 16384] {
        let tag = format!("{} KiB pages", ps / 1024);
        // Point insert: n rows in random key order, one transaction.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..if want("insert") { reps } else { 0 } {
            let p = tmp(&dir, "ins.cairn");
            let t0 = Instant::now();
            let db = cairn_open(&p, ps, Durability::Full, true);
            cairn_fill(&db, n);
            a.push(t0.elapsed() / n as u32);
            if ps == 4096 {
                let p = tmp(&dir, "ins.sqlite");
                let t0 = Instant::now();
                let c = sqlite_open(&p, "FULL");
                sqlite_fill(&c, n);
                b.push(t0.elapsed() / n as u32);
            }
        }
        if !a.is_empty() {
            rows.push(Row {
                name: format!("point insert, 100k random keys in one txn ({tag})"),
                unit: "per row",
                cairn: median(a),
                sqlite: (!b.is_empty()).then(|| median(b)),
            });
        }

        // Row-id append: ascending keys, the common case for tables.
        if ps == 4096 && want("insert") {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let p = tmp(&dir, "app.cairn");
                let t0 = Instant::now();
                let db = cairn_open(&p, ps, Durability::Full, true);
                let mut tx = db.begin_write().unwrap();
                let t = tx.create_tree("t", TreeKind::Table).unwrap();
                for i in 0..n {
                    tx.insert(t, &key(i), &value(i)).unwrap();
                }
                tx.commit().unwrap();
                a.push(t0.elapsed() / n as u32);
                let p = tmp(&dir, "app.sqlite");
                let t0 = Instant::now();
                let c = sqlite_open(&p, "FULL");
                c.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB); BEGIN")
                    .unwrap();
                {
                    let mut st = c.prepare("INSERT INTO t(k, v) VALUES (?1, ?2)").unwrap();
                    for i in 0..n {
                        st.execute(params![i as i64, value(i)]).unwrap();
                    }
                }
                c.execute_batch("COMMIT").unwrap();
                b.push(t0.elapsed() / n as u32);
            }
            rows.push(Row {
                name: format!("point insert, 100k ascending keys (row-id append) ({tag})"),
                unit: "per row",
                cairn: median(a),
                sqlite: Some(median(b)),
            });
        }

        // Build the read fixtures once.
        let pc = tmp(&dir, "read.cairn");
        let db = cairn_open(&pc, ps, Durability::Full, true);
        cairn_fill(&db, n);
        let psq = tmp(&dir, "read.sqlite");
        let c = sqlite_open(&psq, "FULL");
        sqlite_fill(&c, n);

        // Point read, warm cache.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let probes: Vec<u64> = {
            let mut r = Rng(7);
            (0..n).map(|_| r.next() % n).collect()
        };
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        let mut buf = Vec::new();
        let mut st = c.prepare("SELECT v FROM t WHERE k = ?1").unwrap();
        for _ in 0..if want("read") { reps } else { 1 } {
            let t0 = Instant::now();
            for &i in &probes {
                assert!(r.get_into(t, &key(i), &mut buf).unwrap());
                black_box(&buf);
            }
            a.push(t0.elapsed() / n as u32);
            let t0 = Instant::now();
            for &i in &probes {
                let v: Vec<u8> = st.query_row(params![i as i64], |row| row.get(0)).unwrap();
                black_box(v);
            }
            b.push(t0.elapsed() / n as u32);
        }
        rows.push(Row {
            name: format!("point read, warm, 100k rows ({tag})"),
            unit: "per read",
            cairn: median(a),
            sqlite: Some(median(b)),
        });

        // Range scan, both directions for cairn; forward for SQLite.
        let (mut a, mut a2, mut b) = (Vec::new(), Vec::new(), Vec::new());
        let mut scan = c.prepare("SELECT k, v FROM t ORDER BY k").unwrap();
        for _ in 0..if want("scan") { reps } else { 1 } {
            let t0 = Instant::now();
            let mut rg = r
                .range(t, Bound::Unbounded, Bound::Unbounded, false)
                .unwrap();
            let mut total = 0usize;
            while rg.next().unwrap() {
                total += rg.key().len() + rg.value().unwrap().len();
            }
            black_box(total);
            a.push(t0.elapsed() / n as u32);
            let t0 = Instant::now();
            let mut rg = r
                .range(t, Bound::Unbounded, Bound::Unbounded, true)
                .unwrap();
            while rg.next().unwrap() {
                total += rg.key().len() + rg.value().unwrap().len();
            }
            black_box(total);
            a2.push(t0.elapsed() / n as u32);
            let t0 = Instant::now();
            let mut q = scan.query([]).unwrap();
            let mut total = 0usize;
            while let Some(row) = q.next().unwrap() {
                let v = row.get_ref(1).unwrap().as_blob().unwrap();
                let k: i64 = row.get(0).unwrap();
                total += v.len() + k as usize;
            }
            black_box(total);
            b.push(t0.elapsed() / n as u32);
        }
        rows.push(Row {
            name: format!("range scan, 100k rows ascending ({tag})"),
            unit: "per row",
            cairn: median(a),
            sqlite: Some(median(b.clone())),
        });
        rows.push(Row {
            name: format!("range scan, 100k rows descending ({tag})"),
            unit: "per row",
            cairn: median(a2),
            sqlite: Some(median(b)),
        });
        drop(st);
        drop(scan);
        drop(r);

        if ps == 4096 && want("index") {
            // Index build: derive a key from every row, sort, build bottom-up, commit.
            let (mut a, mut b) = (Vec::new(), Vec::new());
            c.execute_batch(
                "ALTER TABLE t ADD COLUMN w INTEGER; UPDATE t SET w = (k * 7919) % 100003;",
            )
            .unwrap();
            for rep in 0..reps {
                let t0 = Instant::now();
                let mut tx = db.begin_write().unwrap();
                let t = tx.open_tree("t").unwrap();
                // Keys go into one arena (no allocation per row), then sort as slices.
                let mut arena: Vec<u8> = Vec::with_capacity(n as usize * 32);
                let mut spans: Vec<(u32, u32)> = Vec::with_capacity(n as usize);
                let mut buf = Vec::with_capacity(64);
                let mut rg = tx
                    .range(t, Bound::Unbounded, Bound::Unbounded, false)
                    .unwrap();
                while rg.next().unwrap() {
                    let (k, v) = rg.entry().unwrap();
                    let w = (v[0] as i64 * 7919) % 100_003;
                    buf.clear();
                    cairn_value::codec::encode_key_value(&mut buf, &Value::Integer(w), false);
                    buf.extend_from_slice(k);
                    spans.push((arena.len() as u32, buf.len() as u32));
                    arena.extend_from_slice(&buf);
                }
                drop(rg);
                let at = |s: &(u32, u32)| &arena[s.0 as usize..(s.0 + s.1) as usize];
                spans.sort_unstable_by(|a, b| at(a).cmp(at(b)));
                let name = format!("ix{rep}");
                let ix = tx
                    .create_tree(&name, TreeKind::Index { table: "t".into() })
                    .unwrap();
                tx.bulk_load(ix, spans.iter().map(|s| (at(s), &[][..])))
                    .unwrap();
                tx.commit().unwrap();
                a.push(t0.elapsed());
                let mut tx = db.begin_write().unwrap();
                tx.drop_tree(&name).unwrap();
                tx.commit().unwrap();

                let t0 = Instant::now();
                c.execute_batch("CREATE INDEX ix ON t(w)").unwrap();
                b.push(t0.elapsed());
                c.execute_batch("DROP INDEX ix").unwrap();
            }
            rows.push(Row {
                name: "index build over 100k rows (whole build + commit)".into(),
                unit: "total",
                cairn: median(a),
                sqlite: Some(median(b)),
            });
        }
        drop(db);
        drop(c);

        // Small commits.
        for (dur, sync, label) in [
            (Durability::Full, "FULL", "full"),
            (Durability::Relaxed, "NORMAL", "relaxed"),
        ] {
            let commits = if dur == Durability::Full { 200 } else { 2000 };
            let p = tmp(&dir, "commit.cairn");
            let db = cairn_open(&p, ps, dur, true);
            let p2 = tmp(&dir, "commit.sqlite");
            let c = sqlite_open(&p2, sync);
            c.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
                .unwrap();
            {
                let mut tx = db.begin_write().unwrap();
                tx.create_tree("t", TreeKind::Table).unwrap();
                tx.commit().unwrap();
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut st = c.prepare("INSERT INTO t(k, v) VALUES (?1, ?2)").unwrap();
            for i in 0..commits {
                let t0 = Instant::now();
                let mut tx = db.begin_write().unwrap();
                let t = tx.open_tree("t").unwrap();
                tx.insert(t, &key(i), &value(i)).unwrap();
                tx.commit().unwrap();
                a.push(t0.elapsed());
                let t0 = Instant::now();
                st.execute(params![i as i64, value(i)]).unwrap();
                b.push(t0.elapsed());
            }
            rows.push(Row {
                name: format!("commit of one row, {label} durability ({tag})"),
                unit: "per commit",
                cairn: median(a),
                sqlite: Some(median(b)),
            });
        }
    }

    // Reopen: a small and a large file; open, find the table, read one row.
    for (rows_n, label) in [(5_000u64, "small"), (1_000_000, "large")] {
        if !want("reopen") {
            continue;
        }
        let pc = tmp(&dir, &format!("reopen-{label}.cairn"));
        let db = cairn_open(&pc, 4096, Durability::Full, true);
        {
            let mut tx = db.begin_write().unwrap();
            let t = tx.create_tree("t", TreeKind::Table).unwrap();
            tx.bulk_load(t, (0..rows_n).map(|i| (key(i), value(i))))
                .unwrap();
            tx.commit().unwrap();
        }
        db.close().unwrap();
        let psq = tmp(&dir, &format!("reopen-{label}.sqlite"));
        {
            let c = sqlite_open(&psq, "FULL");
            c.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
                .unwrap();
            c.execute_batch("BEGIN").unwrap();
            let mut st = c.prepare("INSERT INTO t(k, v) VALUES (?1, ?2)").unwrap();
            for i in 0..rows_n {
                st.execute(params![i as i64, value(i)]).unwrap();
            }
            drop(st);
            c.execute_batch("COMMIT").unwrap();
        }
        let size_c = std::fs::metadata(&pc).unwrap().len();
        let size_s = std::fs::metadata(&psq).unwrap().len();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..reps * 3 {
            let t0 = Instant::now();
            let db = cairn_open(&pc, 4096, Durability::Full, false);
            let r = db.begin_read().unwrap();
            let t = r.open_tree("t").unwrap();
            black_box(r.get(t, &key(rows_n / 2)).unwrap().unwrap());
            a.push(t0.elapsed());
            drop(r);
            drop(db);
            let t0 = Instant::now();
            let c = Connection::open(&psq).unwrap();
            let v: Vec<u8> = c
                .query_row(
                    "SELECT v FROM t WHERE k = ?1",
                    params![(rows_n / 2) as i64],
                    |row| row.get(0),
                )
                .unwrap();
            black_box(v);
            b.push(t0.elapsed());
        }
        rows.push(Row {
            name: format!(
                "reopen {label} file + read one row (cairn {:.1} MB, SQLite {:.1} MB)",
                size_c as f64 / 1e6,
                size_s as f64 / 1e6
            ),
            unit: "total",
            cairn: median(a),
            sqlite: Some(median(b)),
        });
    }

    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "cairn-store vs SQLite {} (rusqlite bundled), medians of {reps} runs",
        rusqlite::version()
    );
    println!(
        "{:<78} {:>11} {:>11} {:>7}  unit",
        "operation", "cairn", "sqlite", "ratio"
    );
    for r in rows {
        let s = r
            .sqlite
            .map(|d| format!("{d:.2?}"))
            .unwrap_or_else(|| "-".into());
        let ratio = r
            .sqlite
            .map(|d| format!("{:.2}", r.cairn.as_secs_f64() / d.as_secs_f64()))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<78} {:>11} {:>11} {:>7}  {}",
            r.name,
            format!("{:.2?}", r.cairn),
            s,
            ratio,
            r.unit
        );
    }
}
