//! Crash tests: a sequence of commits runs over a `FaultFile` that fails at the Nth mutating call
//! (every write, set_len and flush, one after another), and the file a crash would leave there is
//! rebuilt three ways (unflushed writes dropped, kept, or the last one torn). Each must open,
//! pass `check()`, and hold exactly the state after the last commit that returned or after the
//! one in flight (with relaxed durability: any state since the last flush, in order).

use std::collections::BTreeMap;
use std::ops::Bound;

use cairn_store::fault::{CrashMode, FaultFile};
use cairn_store::{Db, Durability, Each, MemoryFile, Options, TreeKind};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts(durability: Durability, dirty_pages: usize) -> Options {
    Options {
        page_size: 512,
        cache_pages: 16,
        durability,
        dirty_pages,
        ..Options::default()
    }
}

/// How the workload writes.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    /// After its changes, each commit rewrites a third of all values and removes some
    /// entries (`rewrite`) with one `update_each` over the whole tree.
    Rewrite,
}

/// What `update_each` does with entry `k` in commit `i` (Mode::Rewrite): a new value
/// (shorter, longer, into or out of overflow pages), removal (`Some(None)`), or nothing.
fn rewrite(i: u32, k: &[u8], v: &[u8]) -> Option<Option<Vec<u8>>> {
    let h = k.iter().map(|&b| b as u32).sum::<u32>() + i;
    match h % 6 {
        0 => Some(Some(v[..v.len() / 2].to_vec())),
        1 => Some(Some(v.repeat(2 + (i % 3) as usize))),
        2 => Some(Some(format!("r{i}").into_bytes())),
        3 if i.is_multiple_of(2) => Some(None),
        _ => None,
    }
}

/// The change commit `i` makes to the model (and to the database).
fn change(i: u32, m: &mut Map, per: u32, mode: Mode) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let ops = change_ops(i, m, per);
    if mode == Mode::Rewrite {
        let mut gone = Vec::new();
        for (k, v) in m.iter_mut() {
            match rewrite(i, k, v) {
                Some(Some(n)) => *v = n,
                Some(None) => gone.push(k.clone()),
                None => {}
            }
        }
        for k in gone {
            m.remove(&k);
        }
    }
    ops
}

fn change_ops(i: u32, m: &mut Map, per: u32) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut ops = Vec::new();
    for j in 0..per {
        let k = format!("key{:04}", (i * 37 + j * 11) % (8 * per + 1)).into_bytes();
        let op = if (i + j).is_multiple_of(5) {
            None
        } else if j == 3 {
            Some(vec![i as u8; 700 + 50 * i as usize]) // overflow chain
        } else {
            Some(
                format!("v{i}.{j}")
                    .repeat(1 + (j as usize % 4))
                    .into_bytes(),
            )
        };
        match &op {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(&k),
        };
        ops.push((k, op));
    }
    ops
}

const COMMITS: u32 = 16;

/// Where the model keeps the root bytes (no key of the workload's sorts there).
const ROOT: &[u8] = b"\xff\xffroot bytes";

/// The root bytes commit `i` sets (None: it leaves the last ones): empty, short and up to the
/// whole room of a 512-byte superblock (128 bytes), which shrinks its commit list.
fn root_of(i: u32) -> Option<Vec<u8>> {
    match i % 4 {
        3 => None,
        _ => Some(vec![i as u8; (i as usize * 37) % 129]),
    }
}

/// Runs the workload until the first error. Returns (commits that returned, flushed commits).
fn workload(db: &Db<FaultFile>, relaxed: bool, per: u32, mode: Mode) -> (u32, u32) {
    let mut model = Map::new();
    let mut flushed = 0;
    for i in 1..=COMMITS {
        let ops = change(i, &mut model, per, mode);
        let r = (|| -> cairn_store::Result<()> {
            let mut tx = db.begin_write()?;
            let t = match tx.open_tree("t") {
                Ok(t) => t,
                Err(_) => tx.create_tree("t", TreeKind::Table)?,
            };
            for (k, v) in &ops {
                match v {
                    Some(v) => {
                        tx.insert(t, k, v)?;
                    }
                    None => {
                        tx.remove(t, k)?;
                    }
                }
            }
            if mode == Mode::Rewrite {
                let mut f = |k: &[u8], v: &[u8], out: &mut Vec<u8>| {
                    Ok(match rewrite(i, k, v) {
                        Some(Some(n)) => {
                            out.extend_from_slice(&n);
                            Each::Write
                        }
                        Some(None) => Each::Remove,
                        None => Each::Keep,
                    })
                };
                tx.update_each(t, Bound::Unbounded, Bound::Unbounded, &mut f, None)?;
            }
            if let Some(r) = root_of(i) {
                tx.set_root_meta(&r)?;
            }
            tx.commit()?;
            Ok(())
        })();
        if r.is_err() {
            return (i - 1, flushed);
        }
        if !relaxed {
            flushed = i;
        } else if i % 3 == 0 {
            if db.flush().is_err() {
                return (i, flushed);
            }
            flushed = i;
        }
    }
    (COMMITS, flushed)
}

/// The state after each commit, its root bytes under [`ROOT`] (when not empty).
fn states(per: u32, mode: Mode) -> Vec<Map> {
    let mut m = Map::new();
    let mut root = Vec::new();
    let mut out = vec![m.clone()];
    for i in 1..=COMMITS {
        change(i, &mut m, per, mode);
        if let Some(r) = root_of(i) {
            root = r;
        }
        let mut s = m.clone();
        if !root.is_empty() {
            s.insert(ROOT.to_vec(), root.clone());
        }
        out.push(s);
    }
    out
}

fn contents(bytes: Vec<u8>, o: &Options) -> Result<Map, String> {
    let db =
        Db::open(MemoryFile::from_bytes(bytes), o.clone()).map_err(|e| format!("open: {e}"))?;
    let rep = db.check().map_err(|e| format!("check: {e}"))?;
    if !rep.is_ok() {
        return Err(format!("check found:\n{rep}"));
    }
    let mut out = Map::new();
    let root = db.root_meta();
    if !root.is_empty() {
        out.insert(ROOT.to_vec(), root);
    }
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let Ok(t) = r.open_tree("t") else {
        return Ok(out);
    };
    let all = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .and_then(|mut x| x.collect_all())
        .map_err(|e| format!("scan: {e}"))?;
    out.extend(all);
    Ok(out)
}

fn crash_everywhere(durability: Durability, dirty_pages: usize, per: u32) -> usize {
    crash_everywhere_with(durability, dirty_pages, per, Mode::Plain)
}

fn crash_everywhere_with(
    durability: Durability,
    dirty_pages: usize,
    per: u32,
    mode: Mode,
) -> usize {
    crash_everywhere_in(opts(durability, dirty_pages), per, mode)
}

fn crash_everywhere_in(o: Options, per: u32, mode: Mode) -> usize {
    let durability = o.durability;
    let relaxed = durability == Durability::Relaxed;
    let states = states(per, mode);
    // A dry run counts the calls the workload makes.
    let f = FaultFile::new();
    let db = Db::create(f.clone(), o.clone()).unwrap();
    let base = f.ops();
    assert_eq!(workload(&db, relaxed, per, mode).0, COMMITS);
    let total = f.ops() - base;
    // At least a write of pages and one of the superblock a commit (a commit's pages lie in
    // one run where they can, written in one call).
    assert!(
        total as u32 > 2 * COMMITS,
        "the workload makes only {total} calls"
    );
    let mut checked = 0;
    for n in 0..total {
        let f = FaultFile::new();
        let db = Db::create(f.clone(), o.clone()).unwrap();
        f.fail_at(f.ops() + n, true);
        let (returned, flushed) = workload(&db, relaxed, per, mode);
        assert!(returned < COMMITS || relaxed, "call {n} never failed");
        let in_flight = (returned + 1).min(COMMITS);
        let lowest = if relaxed { flushed } else { returned };
        for mode in [
            CrashMode::DropUnflushed,
            CrashMode::KeepUnflushed,
            CrashMode::TearLast,
        ] {
            let got = contents(f.crash_image(mode), &o)
                .unwrap_or_else(|m| panic!("crash at call {n} ({mode:?}): {m}"));
            let ok = (lowest..=in_flight).any(|j| states[j as usize] == got);
            assert!(
                ok,
                "crash at call {n} ({mode:?}): contents match no state in {lowest}..={in_flight} (they match {:?})",
                states.iter().position(|s| *s == got)
            );
            checked += 1;
        }
    }
    eprintln!(
        "{durability:?}, {per} changes a commit: {total} calls, {checked} crash images checked"
    );
    checked
}

#[test]
fn values_rewritten_where_they_are_survive_a_crash_at_every_call() {
    // update_each over the whole tree: values shrink in place, grow (splitting leaves), move
    // into and out of overflow pages, entries go, and leaves go underfull; with pages spilled
    // mid-walk too.
    assert!(crash_everywhere_with(Durability::Full, 8192, 10, Mode::Rewrite) > 0);
    assert!(crash_everywhere_with(Durability::Full, 4, 10, Mode::Rewrite) > 0);
}

#[test]
fn full_durability_survives_a_crash_at_every_call() {
    assert!(crash_everywhere(Durability::Full, 4096, 12) > 150);
}

#[test]
fn full_durability_with_spilled_pages_survives_a_crash_at_every_call() {
    // Few dirty pages allowed: write transactions spill pages before commit.
    assert!(crash_everywhere(Durability::Full, 4, 12) > 150);
}

#[test]
fn relaxed_durability_loses_only_a_suffix_of_commits() {
    assert!(crash_everywhere(Durability::Relaxed, 4096, 12) > 100);
}

#[test]
fn commits_too_big_for_the_page_list_survive_a_crash_at_every_call() {
    // 80 changes a commit write 20 to 50 pages, more than a list of 8 KiB of pages names, so
    // these commits flush their pages first and then the superblock; and with 12 changes a
    // commit, some write more and some fewer (one flush).
    for (per, images) in [(80, 200), (12, 100)] {
        for durability in [Durability::Full, Durability::Relaxed] {
            let o = Options {
                list_bytes: 16 * 512,
                ..opts(durability, 4096)
            };
            assert!(crash_everywhere_in(o, per, Mode::Plain) > images);
        }
    }
}

#[test]
fn one_flush_per_small_commit() {
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts(Durability::Full, 4096)).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    tx.insert(t, b"a", b"1").unwrap();
    tx.commit().unwrap();
    // Count flushes: each one moves every written byte into the durable image.
    let before = f.ops();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.insert(t, b"b", b"2").unwrap();
    f.fail_at(u64::MAX, false);
    tx.commit().unwrap();
    let calls = f.ops() - before;
    // Pages (leaf, catalog leaf, free-tree leaf and friends), one superblock, one flush.
    assert_eq!(f.crash_image(CrashMode::DropUnflushed), f.written_bytes());
    assert!(calls <= 8, "a one-row commit made {calls} calls");
    // Exactly one of them was a flush: failing the last call (the flush) leaves it undurable.
    let f2 = FaultFile::new();
    let db2 = Db::create(f2.clone(), opts(Durability::Full, 4096)).unwrap();
    let mut tx = db2.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    tx.insert(t, b"a", b"1").unwrap();
    tx.commit().unwrap();
    let start = f2.ops();
    let mut tx = db2.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.insert(t, b"b", b"2").unwrap();
    f2.fail_at(start + calls - 1, false);
    assert!(tx.commit().is_err());
    assert_ne!(
        f2.durable_bytes(),
        f2.written_bytes(),
        "only the last call flushes"
    );
    // After a failed commit, writing needs a reopen; reading goes on.
    assert_eq!(db2.begin_write().err().unwrap().code(), "NEEDS_REOPEN");
    assert!(db2.begin_read().is_ok());
}

#[test]
fn erasing_free_pages_survives_a_crash_at_every_call() {
    let o = opts(Durability::Full, 4096);
    let last = states(12, Mode::Plain)
        .pop()
        .expect("invariant: states has every commit");
    let prepared = || {
        let f = FaultFile::new();
        let db = Db::create(f.clone(), o.clone()).unwrap();
        assert_eq!(workload(&db, false, 12, Mode::Plain).0, COMMITS);
        assert!(!db.free_pages().unwrap().is_empty());
        (f, db)
    };
    let (f, db) = prepared();
    let base = f.ops();
    db.erase_free_pages().unwrap();
    let total = f.ops() - base;
    assert!(total > 3, "erasing made only {total} calls");
    for n in 0..total {
        let (f, db) = prepared();
        f.fail_at(f.ops() + n, true);
        assert!(db.erase_free_pages().is_err(), "call {n} never failed");
        for mode in [
            CrashMode::DropUnflushed,
            CrashMode::KeepUnflushed,
            CrashMode::TearLast,
        ] {
            let got = contents(f.crash_image(mode), &o)
                .unwrap_or_else(|m| panic!("crash at call {n} ({mode:?}): {m}"));
            assert!(
                got == last,
                "crash at call {n} ({mode:?}): contents changed"
            );
        }
    }
}

/// A commit whose flush fails has its superblock in the file; the store opened again at the
/// last commit that succeeded (`Db::open_upto`) hands back a file (`Db::into_file`, which
/// export uses) that opens at that commit, not at the failed one. Cut at every call of the
/// second commit, so the flush is among the cuts however few writes come before it.
#[test]
fn a_file_handed_back_after_a_failed_commit_holds_the_last_that_succeeded() {
    let o = opts(Durability::Full, 4096);
    let dry = FaultFile::new();
    let db = Db::create(dry.clone(), o.clone()).unwrap();
    let put = |db: &Db<FaultFile>, v: &[u8]| -> cairn_store::Result<()> {
        let mut tx = db.begin_write()?;
        let t = match tx.open_tree("t") {
            Ok(t) => t,
            Err(_) => tx.create_tree("t", TreeKind::Table)?,
        };
        tx.insert(t, b"k", v)?;
        tx.commit()?;
        Ok(())
    };
    put(&db, b"first").unwrap();
    let before = dry.ops();
    put(&db, b"second").unwrap();
    let calls = dry.ops() - before;
    assert!(calls >= 2, "the commit writes and flushes ({calls} calls)");
    for k in 0..calls {
        let f = FaultFile::new();
        let db = Db::create(f.clone(), o.clone()).unwrap();
        put(&db, b"first").unwrap();
        f.fail_at(f.ops() + k, false);
        assert!(put(&db, b"second").is_err(), "call {k} of {calls} failed");
        f.heal();
        let txn = db.txn();
        let db = Db::open_upto(db.into_file().unwrap(), o.clone(), txn).unwrap();
        let file = db.into_file().unwrap();
        let db = Db::open(MemoryFile::from_bytes(file.written_bytes()), o.clone()).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        assert_eq!(
            r.get(t, b"k").unwrap().as_deref(),
            Some(&b"first"[..]),
            "cut at call {k} of {calls}"
        );
    }
}
