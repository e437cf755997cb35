//! The cost of recording a change: the same inserts and updates into a plain table and into a
//! replicated one (same columns, TEXT keys), side by side, on the paged store over a memory
//! file (volatile: the replicated side's records wait in the replica, written to the store
//! when it is read whole; `--in file` for a store that writes them with every commit). Prints medians and the ratio; writes the table of bench-results/replicated.md (the notes
//! below it, from its first `## ` heading, are kept).
//!
//!   cargo bench -p cairn-replicated --bench replicated [-- --samples N]
//!
//! `--only insert|alone|update` runs one workload and `--side plain|replicated` one side, once
//! each unless `--samples` says otherwise, without writing the results file: for counting
//! instructions of the timed part alone (`timed` runs exactly what the clock measures), e.g.
//!
//!   valgrind --tool=callgrind --toggle-collect='replicated::timed' \
//!     target/release/deps/replicated-* --only alone --side replicated
//!
//! `--file-room MIB` opens each sample's memory file with room for that many MiB: its growth
//! (a `Vec` reallocated, copied and faulted in anew as the commit writes past its end, on
//! every sample, as each opens a new database) is then left out of the time, which a file on
//! disk or in OPFS does not pay. A diagnostic: the results table is made without it.
//!
//! `--in file` runs the partial runs above on a file on disk (`StdFile`, one flush per commit:
//! where a browser's database lives, in OPFS) instead of a memory file; the full run measures
//! both, one table each.
//!
//! With `--in file`, a partial run also prints the size of each side's file after the
//! workload (the bytes its commits left on disk).
//!
//! `--peers N` first syncs each sample's replicated database with N other databases that
//! wrote one row each (outside the timed part): its replica then holds N other authors'
//! chains and knows N peers, as one that has synced with others does. A partial run.
//!
//! The allocator: each sample opens a new database and drops it, and whether glibc then gives
//! the heap's top back to the system (to fault it in again on the next sample) depends on where
//! its last allocations happened to land: a change that only moved one (sync's 104-byte
//! placeholder records gone) made one side of the update workload fault 20,000 more pages over
//! a run and read 1.29x instead of 1.20x. A database in a running app reuses its heap. So the
//! full run runs itself again with glibc told to keep what it has (`MALLOC_TRIM_THRESHOLD_`,
//! `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TOP_PAD_`; the same for both sides); `--malloc-default`
//! measures with glibc's defaults instead. A partial run takes the allocator as it is started
//! (a profiler then sees one process); set the variables to match the full run. Other
//! allocators ignore them.
//!
//! `--reuse` keeps one database a side (in memory) for all the samples of a partial run, each
//! sample writing rows of its own: the tables grow and the replicated side's unsealed records
//! accumulate from sample to sample, as between syncs, instead of each sample starting empty.
//!
//! `--then-connect` also opens a sync link after each sample (`Sync::connect`: what a local
//! write leaves for sharing, its records hashed, merged, sealed into a signed block and saved)
//! and reports its time; count it with `--toggle-collect='replicated::connect'`.

use cairn_replicated::Sync;
use cairn_sql::Paged;
use cairn_sql::{Database, Value};
use cairn_store::{Durability, MemoryFile, Options, StdFile};
use std::time::Instant;

fn now() -> u64 {
    1_800_000_000_000
}

/// Where a sample's database lives: `None` in a memory file, else in a new file at that path.
fn open(replicated: bool, file_room: usize, path: Option<&std::path::Path>) -> (Database, Sync) {
    let options = Options {
        durability: Durability::Full,
        ..Options::default()
    };
    let mut db = match path {
        None => Database::open(Box::new(
            Paged::open(
                MemoryFile::from_bytes(Vec::with_capacity(file_room)),
                options,
            )
            .unwrap(),
        )),
        Some(path) => {
            let _ = std::fs::remove_file(path);
            let file = StdFile::open(path, true).unwrap();
            Database::open(Box::new(Paged::open(file, options).unwrap()))
        }
    }
    .unwrap();
    let sync = Sync::attach(&mut db, now, Box::new(cairn_replicated::MemoryKeys::new())).unwrap();
    let tail = if replicated { " REPLICATED" } else { "" };
    db.exec_script(&format!(
        "CREATE TABLE t (id TEXT PRIMARY KEY, a INTEGER, b INTEGER, c TEXT){tail}"
    ))
    .unwrap();
    (db, sync)
}

/// Syncs `db` with `peers` new databases that each wrote one row to `t` (for `--peers`).
fn meet_peers(db: &mut Database, sync: &Sync, peers: usize) {
    for p in 0..peers {
        let (mut other, other_sync) = open(true, 0, None);
        other
            .execute(
                "INSERT INTO t VALUES (?, 1, 1, 'peer')",
                &[Value::Text(format!("peer-{p}"))],
            )
            .unwrap();
        let (la, hello_a) = sync.connect(db).unwrap();
        let (lb, hello_b) = other_sync.connect(&mut other).unwrap();
        let mut to_b = vec![hello_a];
        let mut to_a = vec![hello_b];
        for _ in 0..1000 {
            let (ma, mb) = (std::mem::take(&mut to_a), std::mem::take(&mut to_b));
            for m in mb {
                to_a.extend(other_sync.receive(&mut other, lb, &m).unwrap());
            }
            for m in ma {
                to_b.extend(sync.receive(db, la, &m).unwrap());
            }
            to_b.extend(sync.poll(db, la).unwrap());
            to_a.extend(other_sync.poll(&mut other, lb).unwrap());
            if to_a.is_empty() && to_b.is_empty() {
                break;
            }
        }
        sync.disconnect(la);
    }
}

/// Added to every row's number (`--reuse`: each sample writes rows of its own).
static FIRST_ROW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn id(i: usize) -> Value {
    let i = i + FIRST_ROW.load(std::sync::atomic::Ordering::Relaxed);
    Value::Text(format!("0190a1b2-c3d4-7e5f-8a6b-{i:012}"))
}

type Work = fn(&mut Database, usize);

fn insert_tx(db: &mut Database, n: usize) {
    db.execute("BEGIN", &[]).unwrap();
    let st = db.prepare("INSERT INTO t VALUES (?, ?, ?, ?)").unwrap();
    for i in 0..n {
        st.execute(
            db,
            &[
                id(i),
                Value::Integer(i as i64),
                Value::Integer((i * 7919 % 100_000) as i64),
                Value::Text(format!("row number {i}")),
            ],
        )
        .unwrap();
    }
    db.execute("COMMIT", &[]).unwrap();
}

fn insert_each(db: &mut Database, n: usize) {
    let st = db.prepare("INSERT INTO t VALUES (?, ?, ?, ?)").unwrap();
    for i in 0..n / 10 {
        st.execute(
            db,
            &[
                id(i),
                Value::Integer(i as i64),
                Value::Integer(i as i64),
                Value::Text("x".into()),
            ],
        )
        .unwrap();
    }
}

fn update_tx(db: &mut Database, n: usize) {
    insert_tx(db, n);
    db.execute("BEGIN", &[]).unwrap();
    let st = db.prepare("UPDATE t SET b = b + 1 WHERE id = ?").unwrap();
    for i in 0..n {
        st.execute(db, &[id(i)]).unwrap();
    }
    db.execute("COMMIT", &[]).unwrap();
}

/// The measured part of a sample, kept out of line so a profiler can count it alone.
#[inline(never)]
fn timed(f: Work, db: &mut Database, n: usize) {
    f(db, n)
}

/// A sync link opened after the writes (`--then-connect`), out of line for a profiler.
#[inline(never)]
fn connect(sync: &Sync, db: &mut Database) {
    sync.connect(db).unwrap();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// glibc's settings for a bench run (see the module's comment).
const MALLOC_ENV: [(&str, &str); 3] = [
    ("MALLOC_TRIM_THRESHOLD_", "1000000000"),
    ("MALLOC_MMAP_THRESHOLD_", "100000000"),
    ("MALLOC_TOP_PAD_", "67108864"),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let malloc_default = args.iter().any(|a| a == "--malloc-default");
    let samples = args
        .iter()
        .position(|a| a == "--samples")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let then_connect = args.iter().any(|a| a == "--then-connect");
    let reuse = args.iter().any(|a| a == "--reuse");
    let peers = flag("--peers")
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    let file_room = flag("--file-room")
        .and_then(|s| s.parse::<usize>().ok())
        .map_or(0, |mib| mib << 20);
    let in_file = flag("--in").is_some_and(|w| w == "file");
    let only = flag("--only");
    let side = flag("--side");
    let partial = only.is_some()
        || side.is_some()
        || then_connect
        || file_room > 0
        || in_file
        || peers > 0
        || reuse;
    if !partial && !malloc_default && std::env::var_os(MALLOC_ENV[0].0).is_none() {
        // Run again with the allocator's settings, which glibc reads only at start.
        let exe = std::env::current_exe().expect("the bench's own path");
        let status = std::process::Command::new(exe)
            .args(&args[1..])
            .envs(MALLOC_ENV)
            .status()
            .expect("the bench runs again");
        std::process::exit(status.code().unwrap_or(1));
    }
    let samples = if partial && flag("--samples").is_none() {
        1
    } else {
        samples
    };
    let n = 10_000;
    let works: [(&str, Work, &str); 3] = [
        ("10,000 inserts in one transaction", insert_tx, "insert"),
        ("1,000 inserts, each committed alone", insert_each, "alone"),
        (
            "10,000 inserts, then 10,000 updates by key, in a transaction each",
            update_tx,
            "update",
        ),
    ];
    let mut out = String::from(
        "# Replicated vs plain writes (native)\n\n`cargo bench -p cairn-replicated --bench replicated`: \
         the same statements on a plain table and on a `REPLICATED` one (TEXT keys, 4 columns), \
         paged store with durability full, over a memory file (where the replicated side's \
         records wait in the replica until the store is read whole: docs/sync.md, \"In memory\") \
         and over a file on disk (one flush per commit, as in OPFS; each commit writes its \
         records); median of ",
    );
    out.push_str(&format!("{samples} samples, the two sides alternating; "));
    out.push_str(if malloc_default {
        "glibc's allocator as it comes.\n"
    } else {
        "glibc told to keep its heap between samples (the bench's comment says why; \
         `--malloc-default` does not).\n"
    });
    let path = std::env::temp_dir().join(format!("cairn-replicated-bench-{}", std::process::id()));
    let places: &[(&str, bool)] = if partial {
        &[("", in_file)]
    } else {
        &[("In memory", false), ("In a file", true)]
    };
    for &(place, on_disk) in places {
        if !partial {
            out.push_str(&format!(
            "\n{place}:\n\n| workload | plain ms | replicated ms | ratio |\n|---|---:|---:|---:|\n"
        ));
            println!("{place}");
        }
        println!(
            "{:<66} {:>9} {:>12} {:>7}",
            "workload", "plain ms", "replicated", "ratio"
        );
        for (name, f, key) in works {
            if only.as_ref().is_some_and(|w| w != key) {
                continue;
            }
            let mut plain = Vec::new();
            let mut repl = Vec::new();
            let mut shared = Vec::new();
            let mut sizes: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            // `--reuse`: one database a side for every sample (in memory), each sample's rows
            // new ones, the replicated side's records accumulating as between syncs.
            let mut kept: [Option<(Database, Sync)>; 2] = if reuse {
                [Some(open(false, 0, None)), Some(open(true, 0, None))]
            } else {
                [None, None]
            };
            for s in 0..samples {
                FIRST_ROW.store(
                    if reuse { s * n } else { 0 },
                    std::sync::atomic::Ordering::Relaxed,
                );
                // Alternate which goes first.
                for r in if s % 2 == 0 {
                    [false, true]
                } else {
                    [true, false]
                } {
                    if side.as_ref().is_some_and(|w| (w == "replicated") != r) {
                        continue;
                    }
                    let mut fresh = None;
                    let (db, sync) = match &mut kept[usize::from(r)] {
                        Some((db, sync)) => (db, &*sync),
                        None => {
                            let (db, sync) =
                                fresh.insert(open(r, file_room, on_disk.then_some(path.as_path())));
                            (db, &*sync)
                        }
                    };
                    if r && peers > 0 {
                        meet_peers(db, sync, peers);
                    }
                    let t = Instant::now();
                    timed(f, db, n);
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    if on_disk && partial {
                        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
                        sizes[usize::from(r)].push(len as f64);
                    }
                    if then_connect && r {
                        let t = Instant::now();
                        connect(sync, db);
                        shared.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    if r {
                        repl.push(ms);
                    } else {
                        plain.push(ms);
                    }
                }
            }
            if partial {
                for (what, v) in [
                    ("plain", plain),
                    ("replicated", repl),
                    ("then connect", shared),
                ] {
                    if !v.is_empty() {
                        println!("{name:<66} {what} {:.3} ms", median(v));
                    }
                }
                for (what, v) in [("plain", &sizes[0]), ("replicated", &sizes[1])] {
                    if !v.is_empty() {
                        println!(
                            "{name:<66} {what} file {:.0} KiB",
                            median(v.clone()) / 1024.0
                        );
                    }
                }
                continue;
            }
            let (p, r) = (median(plain), median(repl));
            println!("{name:<66} {p:>9.2} {r:>12.2} {:>6.2}x", r / p);
            out.push_str(&format!("| {name} | {p:.2} | {r:.2} | {:.2}x |\n", r / p));
        }
    }
    let _ = std::fs::remove_file(&path);
    if partial {
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/bench-results");
    std::fs::create_dir_all(dir).unwrap();
    let path = format!("{dir}/replicated.md");
    // Notes kept by hand below the table (from the first `## ` heading on) stay.
    if let Ok(old) = std::fs::read_to_string(&path) {
        if let Some(i) = old.find("\n## ") {
            out.push_str(&old[i..]);
        }
    }
    std::fs::write(path, out).unwrap();
}
