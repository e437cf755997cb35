//! Direct tests of the public API: sizes, shapes and limits the scripts do not reach.

use std::ops::Bound;

use cairn_store::{Db, Durability, Each, Error, MemoryFile, Options, Seek, TreeKind};

fn small() -> Options {
    Options {
        page_size: 512,
        cache_pages: 16,
        ..Options::default()
    }
}

fn k(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

#[test]
fn many_inserts_deletes_and_reopen_keep_the_tree_whole() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..5000 {
        // A scattered order, so splits happen everywhere.
        let i = (i * 7919) % 5000;
        assert!(!tx.insert(t, &k(i), &i.to_le_bytes()).unwrap());
    }
    assert_eq!(tx.len(t).unwrap(), 5000);
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    assert!(rep.used_pages > 100, "{rep}");

    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in (0..5000).filter(|i| i % 3 != 0) {
        assert!(tx.remove(t, &k(i)).unwrap());
    }
    assert!(!tx.remove(t, &k(1)).unwrap());
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    assert!(rep.free_pages > 50, "deleting frees pages: {rep}");

    let f = db.into_file().unwrap();
    let db = Db::open(f, small()).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    assert_eq!(r.len(t).unwrap(), 1667);
    let all = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .collect_all()
        .unwrap();
    let want: Vec<_> = (0..5000)
        .filter(|i| i % 3 == 0)
        .map(|i: u32| (k(i), i.to_le_bytes().to_vec()))
        .collect();
    assert_eq!(all, want);
    let mut c = r.cursor(t).unwrap();
    assert!(c.seek(&k(10), Seek::Ge).unwrap());
    assert_eq!(c.key().unwrap(), k(12).as_slice());
    assert!(c.seek(&k(10), Seek::Le).unwrap());
    assert_eq!(c.key().unwrap(), k(9).as_slice());
    assert!(c.seek(&k(9), Seek::Lt).unwrap());
    assert_eq!(c.key().unwrap(), k(6).as_slice());
    assert!(c.seek(&k(9), Seek::Gt).unwrap());
    assert_eq!(c.key().unwrap(), k(12).as_slice());
    assert!(!c.seek(&k(0), Seek::Lt).unwrap());
    assert!(!c.seek(&k(4999), Seek::Gt).unwrap());
}

#[test]
fn overflow_values_round_trip_and_free_their_pages() {
    let db = Db::create(MemoryFile::new(), Options::default()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    tx.insert(t, b"big", &big).unwrap();
    tx.commit().unwrap();
    let pages = db.page_count();
    assert!(pages > 25);
    let r = db.begin_read().unwrap();
    let rt = r.open_tree("t").unwrap();
    assert_eq!(r.get(rt, b"big").unwrap().unwrap(), big);
    drop(r);
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.remove(t, b"big").unwrap();
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    assert!(rep.free_pages >= 25, "{rep}");
}

#[test]
fn readers_keep_their_snapshot_while_a_writer_commits() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..500 {
        tx.insert(t, &k(i), b"old").unwrap();
    }
    tx.commit().unwrap();
    let r = db.begin_read().unwrap();
    let rt = r.open_tree("t").unwrap();
    for round in 0..5 {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..500 {
            if (i + round) % 2 == 0 {
                tx.remove(t, &k(i)).unwrap();
            } else {
                tx.insert(t, &k(i), format!("new{round}").as_bytes())
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let all = r
        .range(rt, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .collect_all()
        .unwrap();
    assert_eq!(all.len(), 500);
    assert!(all.iter().all(|(_, v)| v == b"old"));
    drop(r);
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

#[test]
fn limits_and_misuse_give_errors_not_panics() {
    let db = Db::create(MemoryFile::new(), Options::default()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let e = tx.insert(t, &[7u8; 2000], b"v").unwrap_err();
    assert_eq!(e.code(), "TOO_LARGE");
    assert!(matches!(
        tx.create_tree("t", TreeKind::Table),
        Err(Error::AlreadyExists(_))
    ));
    assert_eq!(tx.open_tree("nope").unwrap_err().code(), "NOT_FOUND");
    assert_eq!(db.begin_write().err().unwrap().code(), "BUSY");
    tx.commit().unwrap();
    assert_eq!(
        Db::create(
            MemoryFile::new(),
            Options {
                page_size: 1000,
                ..Options::default()
            }
        )
        .err()
        .unwrap()
        .code(),
        "INVALID_INPUT"
    );
}

#[test]
fn memory_stays_bounded_scanning_a_file_ten_times_the_cache() {
    let opts = Options {
        cache_pages: 64,
        ..Options::default()
    };
    let db = Db::create(MemoryFile::new(), opts.clone()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    tx.bulk_load(t, (0..20_000u32).map(|i| (k(i), vec![i as u8; 100])))
        .unwrap();
    tx.commit().unwrap();
    let f = db.into_file().unwrap();
    let db = Db::open(f, opts).unwrap();
    assert!(db.page_count() > 640, "file is {} pages", db.page_count());
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let mut range = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap();
    let mut n = 0;
    let mut most = 0;
    while range.next().unwrap() {
        n += 1;
        most = most.max(db.cached_pages());
    }
    assert_eq!(n, 20_000);
    assert!(most <= 64, "cache grew to {most} pages");
    assert!(
        db.file_reads() as u32 > db.page_count() / 2,
        "the scan really went to the file"
    );
}

#[test]
fn relaxed_commits_become_durable_on_flush() {
    let opts = Options {
        durability: Durability::Relaxed,
        ..Options::default()
    };
    let f = cairn_store::fault::FaultFile::new();
    let db = Db::create(f.clone(), opts.clone()).unwrap();
    for i in 0..10 {
        let mut tx = db.begin_write().unwrap();
        let t = match tx.open_tree("t") {
            Ok(t) => t,
            Err(_) => tx.create_tree("t", TreeKind::Table).unwrap(),
        };
        tx.insert(t, &k(i), b"v").unwrap();
        tx.commit().unwrap();
    }
    // Nothing flushed since create: a crash now loses every relaxed commit, cleanly.
    let lost = Db::open(
        MemoryFile::from_bytes(f.crash_image(cairn_store::fault::CrashMode::DropUnflushed)),
        opts.clone(),
    )
    .unwrap();
    assert_eq!(lost.txn(), 1);
    db.flush().unwrap();
    let kept = Db::open(
        MemoryFile::from_bytes(f.crash_image(cairn_store::fault::CrashMode::DropUnflushed)),
        opts,
    )
    .unwrap();
    assert_eq!(kept.txn(), db.txn());
    assert!(kept.check().unwrap().is_ok());
}

#[test]
fn vacuum_shrinks_a_file_that_lost_most_of_its_rows() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let u = tx.create_tree("u", TreeKind::Table).unwrap();
    for i in 0..4000 {
        tx.insert(t, &k(i), &[i as u8; 40]).unwrap();
    }
    tx.insert(u, b"big", &vec![9u8; 20_000]).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..4000 {
        if i % 10 != 0 {
            tx.remove(t, &k(i)).unwrap();
        }
    }
    tx.commit().unwrap();
    let (before, after) = db.vacuum().unwrap();
    assert!(
        after * 3 < before,
        "vacuum went from {before} to {after} pages"
    );
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    let f = db.into_file().unwrap();
    assert_eq!(f.bytes().len(), after as usize * 512);
    let db = Db::open(f, small()).unwrap();
    assert!(db.check().unwrap().is_ok());
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let all = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .collect_all()
        .unwrap();
    let want: Vec<_> = (0..4000)
        .filter(|i| i % 10 == 0)
        .map(|i: u32| (k(i), vec![i as u8; 40]))
        .collect();
    assert_eq!(all, want);
    let u = r.open_tree("u").unwrap();
    assert_eq!(r.get(u, b"big").unwrap().unwrap(), vec![9u8; 20_000]);
}

#[test]
fn open_reads_the_superblocks_and_the_catalog_not_the_rows() {
    let f = cairn_store::fault::FaultFile::new();
    let db = Db::create(f.clone(), Options::default()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..3000 {
        tx.insert(t, &k(i), &[1u8; 100]).unwrap();
    }
    tx.commit().unwrap();
    // Without a clean close, open verifies the pages the last commit wrote (if it listed them).
    let crashed = Db::open(
        MemoryFile::from_bytes(f.durable_bytes()),
        Options::default(),
    )
    .unwrap();
    assert!(crashed.file_reads() > 50, "{}", crashed.file_reads());
    db.close().unwrap();
    let db = Db::open(
        MemoryFile::from_bytes(f.durable_bytes()),
        Options::default(),
    )
    .unwrap();
    assert_eq!(db.file_reads(), 1, "only the catalog root");
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    assert_eq!(r.len(t).unwrap(), 3000);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn close_flushes_relaxed_commits() {
    let f = cairn_store::fault::FaultFile::new();
    let o = Options {
        durability: Durability::Relaxed,
        ..Options::default()
    };
    let db = Db::create(f.clone(), o.clone()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    tx.insert(t, b"a", b"1").unwrap();
    tx.commit().unwrap();
    let txn = db.txn();
    db.close().unwrap();
    let db = Db::open(MemoryFile::from_bytes(f.durable_bytes()), o).unwrap();
    assert!(db.txn() >= txn);
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    assert_eq!(r.get(t, b"a").unwrap().unwrap(), b"1");
}

#[test]
fn a_write_cursor_survives_deletes_under_it() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..1000 {
        tx.insert(t, &k(i), b"v").unwrap();
    }
    // DELETE ... WHERE i % 2 = 0, driven by a cursor over the same tree.
    let mut c = tx.cursor(t).unwrap();
    let mut seen = Vec::new();
    let mut ok = c.first().unwrap();
    while ok {
        let key = c.key().unwrap().to_vec();
        seen.push(key.clone());
        if seen.len() % 2 == 1 {
            assert!(tx.remove(t, &key).unwrap());
        }
        ok = c.next().unwrap();
    }
    assert_eq!(
        seen,
        (0..1000).map(k).collect::<Vec<_>>(),
        "each key once, in order"
    );
    assert_eq!(tx.len(t).unwrap(), 500);
    // And backwards, with updates that rewrite pages under the cursor.
    let mut ok = c.last().unwrap();
    let mut n = 0;
    while ok {
        let key = c.key().unwrap().to_vec();
        tx.insert(t, &key, &[7u8; 60]).unwrap();
        n += 1;
        ok = c.prev().unwrap();
    }
    assert_eq!(n, 500);
    drop(c);
    tx.commit().unwrap();
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn pages_are_reused_once_no_reader_can_see_them() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..300 {
        tx.insert(t, &k(i), &[0u8; 30]).unwrap();
    }
    tx.commit().unwrap();
    let update = |round: u8| {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..300 {
            tx.insert(t, &k(i), &[round; 30]).unwrap();
        }
        tx.commit().unwrap();
    };
    // Three snapshots, each pinned by a reader while later commits rewrite every page.
    let mut readers = Vec::new();
    for round in 1..=3u8 {
        readers.push((round - 1, db.begin_read().unwrap()));
        update(round);
    }
    for (want, r) in &readers {
        let t = r.open_tree("t").unwrap();
        let all = r
            .range(t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .collect_all()
            .unwrap();
        assert_eq!(all.len(), 300);
        assert!(
            all.iter().all(|(_, v)| v == &vec![*want; 30]),
            "snapshot {want} changed"
        );
    }
    let pinned = db.page_count();
    drop(readers);
    // With no reader left, rewriting everything again reuses freed pages instead of growing.
    for round in 4..=8u8 {
        update(round);
    }
    assert!(
        db.page_count() <= pinned + 2,
        "{} pages, {pinned} before",
        db.page_count()
    );
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn dropping_a_tree_frees_its_pages() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..2000 {
        tx.insert(t, &k(i), &[1u8; 40]).unwrap();
    }
    tx.insert(t, b"big", &[2u8; 5000]).unwrap();
    tx.commit().unwrap();
    let used = db.check().unwrap().used_pages;
    let mut tx = db.begin_write().unwrap();
    tx.drop_tree("t").unwrap();
    assert!(tx.list_trees().unwrap().is_empty());
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    assert!(rep.free_pages + 5 >= used, "{rep}, {used} used before");
}

#[test]
fn a_commit_says_which_trees_it_changed() {
    let db = Db::create(MemoryFile::new(), Options::default()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let a = tx.create_tree("a", TreeKind::Table).unwrap();
    tx.create_tree("b", TreeKind::Table).unwrap();
    tx.insert(a, b"k", b"v").unwrap();
    let info = tx.commit().unwrap();
    let mut names = info.changed_trees.clone();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(info.txn, db.txn());
    let mut tx = db.begin_write().unwrap();
    let a = tx.open_tree("a").unwrap();
    tx.open_tree("b").unwrap();
    assert!(!tx.remove(a, b"missing").unwrap());
    tx.insert(a, b"k2", b"v").unwrap();
    assert_eq!(tx.commit().unwrap().changed_trees, ["a"]);
    let mut tx = db.begin_write().unwrap();
    tx.drop_tree("b").unwrap();
    assert_eq!(tx.commit().unwrap().changed_trees, ["b"]);
}

/// `set_meta_of` changes a tree's bytes by name, as `set_meta` through a handle would: the
/// handle opened after sees them, one opened before takes them, an index keeps its table, a
/// rollback undoes them, the commit names the tree, a missing tree is an error.
#[test]
fn set_meta_of_changes_a_tree_it_does_not_open() {
    let db = Db::create(MemoryFile::new(), Options::default()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let a = tx.create_tree("a", TreeKind::Table).unwrap();
    tx.create_tree("ix", TreeKind::Index { table: "a".into() })
        .unwrap();
    tx.insert(a, b"k", b"v").unwrap();
    tx.commit().unwrap();

    let mut tx = db.begin_write().unwrap();
    tx.set_meta_of("a", &[3; 900]).unwrap();
    tx.set_meta_of("ix", b"index bytes").unwrap();
    tx.set_meta_of("a", b"short").unwrap();
    assert!(matches!(
        tx.set_meta_of("missing", b"x"),
        Err(Error::NotFound(_))
    ));
    let a = tx.open_tree("a").unwrap();
    assert_eq!(tx.tree_info(a).unwrap().meta, b"short");
    let mut names = tx.commit().unwrap().changed_trees;
    names.sort();
    assert_eq!(names, ["a", "ix"]);

    let mut tx = db.begin_write().unwrap();
    let a = tx.open_tree("a").unwrap();
    tx.set_meta_of("a", b"through the handle").unwrap();
    assert_eq!(tx.tree_info(a).unwrap().meta, b"through the handle");
    tx.insert(a, b"k2", b"v").unwrap();
    assert_eq!(tx.commit().unwrap().changed_trees, ["a"]);

    let mut tx = db.begin_write().unwrap();
    tx.set_meta_of("a", b"rolled back").unwrap();
    tx.rollback();

    let rtx = db.begin_read().unwrap();
    let a = rtx.open_tree("a").unwrap();
    let info = rtx.tree_info(a).unwrap();
    assert_eq!(info.meta, b"through the handle");
    assert_eq!(info.len, 2);
    assert_eq!(rtx.get(a, b"k").unwrap().as_deref(), Some(&b"v"[..]));
    let ix = rtx.tree_info(rtx.open_tree("ix").unwrap()).unwrap();
    assert_eq!(ix.kind, TreeKind::Index { table: "a".into() });
    assert_eq!(ix.meta, b"index bytes");
    drop(rtx);
    db.check().unwrap();
}

/// `set_meta_of` rewrites an entry within its catalog leaf when it can (the leaf copied first
/// when the transaction does not own it, or already owned from an earlier write) and goes the
/// general way when it cannot (bytes too long to stay in the leaf, or so much shorter that the
/// leaf would be underfull): over a catalog of small pages with branches, every tree keeps the
/// bytes last set, through commits, a rollback and a reopen, and the store stays whole. A
/// catalog of one page (its root a leaf, which may hold any amount) is rewritten in place
/// however much shorter the bytes get.
#[test]
fn set_meta_of_in_and_out_of_the_catalog_leaf_keeps_every_tree_s_bytes() {
    set_meta_of_over_a_catalog_of(40);
    set_meta_of_over_a_catalog_of(3);
}

fn set_meta_of_over_a_catalog_of(trees: usize) {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let names: Vec<String> = (0..trees).map(|i| format!("tree{i:03}")).collect();
    let mut tx = db.begin_write().unwrap();
    for n in &names {
        tx.create_tree(n, TreeKind::Table).unwrap();
    }
    tx.commit().unwrap();
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); names.len()];
    let lens = [0usize, 7, 30, 90, 31, 2, 120, 400, 3, 60, 0, 200, 9];
    for round in 0..24usize {
        let mut tx = db.begin_write().unwrap();
        let mut next = model.clone();
        // Several trees a transaction, one of them twice (its leaf is then owned).
        for j in 0..5 {
            let t = (round * 7 + j * 11) % names.len();
            for again in 0..1 + (j == 0) as usize {
                let len = lens[(round + j * 3 + again) % lens.len()];
                let bytes: Vec<u8> = (0..len).map(|b| (b + round + t) as u8).collect();
                tx.set_meta_of(&names[t], &bytes).unwrap();
                next[t] = bytes;
            }
        }
        for (t, n) in names.iter().enumerate() {
            let h = tx.open_tree(n).unwrap();
            assert_eq!(
                tx.tree_info(h).unwrap().meta,
                next[t],
                "{n} in round {round}"
            );
        }
        if round % 5 == 4 {
            tx.rollback();
        } else {
            tx.commit().unwrap();
            model = next;
        }
        let rep = db.check().unwrap();
        assert!(rep.is_ok(), "round {round}: {rep}");
    }
    let db = Db::open(db.into_file().unwrap(), small()).unwrap();
    let rtx = db.begin_read().unwrap();
    for (t, n) in names.iter().enumerate() {
        let info = rtx.tree_info(rtx.open_tree(n).unwrap()).unwrap();
        assert_eq!(info.meta, model[t], "{n} after reopening");
    }
    drop(rtx);
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

/// A value rewritten longer grows where it is when its page has the room, and otherwise the
/// page splits; either way the undo log (`replace_appending`, appending to what it holds)
/// gets the old value once, and the tree reads as written.
#[test]
fn a_value_rewritten_longer_keeps_one_copy_of_the_old_in_the_undo_log() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    // Ten keys of 30-byte values: a 512-byte leaf then has room for a few bytes more, not for
    // a value five times as long.
    for i in 0..10u32 {
        tx.insert(t, &k(i), &[i as u8; 30]).unwrap();
    }
    let mut log = b"before".to_vec();
    let mut replaced = None;
    tx.replace_appending(t, &k(3), &[33; 36], &mut log, &mut replaced)
        .unwrap();
    assert_eq!(replaced, Some(true));
    assert_eq!(log, [&b"before"[..], &[3; 30]].concat(), "grown in place");
    let mut replaced = None;
    tx.replace_appending(t, &k(5), &[55; 150], &mut log, &mut replaced)
        .unwrap();
    assert_eq!(replaced, Some(true));
    assert_eq!(
        log,
        [&b"before"[..], &[3; 30], &[5; 30]].concat(),
        "after a split"
    );
    for i in 0..10u32 {
        let want = match i {
            3 => vec![33; 36],
            5 => vec![55; 150],
            _ => vec![i as u8; 30],
        };
        assert_eq!(tx.get(t, &k(i)).unwrap(), Some(want), "key {i}");
    }
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

/// `replace` hands back what it replaced (inline and overflow values), says "nothing" for a
/// new key, and leaves the tree as `insert` would.
#[test]
fn replace_returns_the_value_it_replaced() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let mut old = None;
    tx.replace(t, b"a", b"one", &mut old).unwrap();
    assert_eq!(old, Some(None), "a new key replaced nothing");
    let mut old = None;
    tx.replace(t, b"a", b"two", &mut old).unwrap();
    assert_eq!(old, Some(Some(b"one".to_vec())));
    // A value bigger than a 512-byte page lives in overflow pages, before and after.
    let big: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let mut old = None;
    tx.replace(t, b"a", &big, &mut old).unwrap();
    assert_eq!(old, Some(Some(b"two".to_vec())));
    let mut old = None;
    tx.replace(t, b"a", b"small", &mut old).unwrap();
    assert_eq!(old, Some(Some(big)));
    assert_eq!(tx.get(t, b"a").unwrap(), Some(b"small".to_vec()));
    assert_eq!(tx.len(t).unwrap(), 1);
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

fn holds(bytes: &[u8], needle: &[u8]) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn erasing_free_pages_leaves_no_deleted_bytes_in_the_file() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..300 {
        tx.insert(t, &k(i), format!("kept value {i}").as_bytes())
            .unwrap();
    }
    tx.insert(t, b"inline", b"SECRET-INLINE-VALUE").unwrap();
    tx.insert(t, b"overflow", &b"SECRET-OVERFLOW-".repeat(200))
        .unwrap();
    tx.insert(t, &k(150), b"kept-SECRET-TAIL-OF-A-VALUE")
        .unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    assert!(tx.remove(t, b"inline").unwrap());
    assert!(tx.remove(t, b"overflow").unwrap());
    tx.insert(t, &k(0), b"rewritten").unwrap();
    tx.commit().unwrap();
    // Rewritten in place, shorter, in a full leaf: the tail it gave up must not stay there.
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    let mut old = None;
    tx.replace(t, &k(150), b"kept", &mut old).unwrap();
    tx.commit().unwrap();
    db.flush().unwrap();

    // Copy-on-write left the old page versions behind, free.
    let file = db.into_file().unwrap();
    assert!(holds(file.bytes(), b"SECRET-"));
    let db = Db::open(file, small()).unwrap();
    let free = db.free_pages().unwrap().len() as u32;
    assert!(free > 0);
    // A transaction open: refused, nothing touched.
    let r = db.begin_read().unwrap();
    assert!(matches!(db.erase_free_pages(), Err(Error::Busy(_))));
    drop(r);
    assert!(db.erase_free_pages().unwrap() >= free);
    assert!(db.check().unwrap().is_ok());
    let file = db.into_file().unwrap();
    assert!(
        !holds(file.bytes(), b"SECRET-"),
        "deleted bytes stay in the file"
    );

    // The live data is whole, after a reopen too, and zeroed pages are reused as usual.
    let db = Db::open(file, small()).unwrap();
    assert!(db.check().unwrap().is_ok());
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    assert_eq!(r.get(t, &k(0)).unwrap().unwrap(), b"rewritten");
    assert_eq!(r.get(t, &k(299)).unwrap().unwrap(), b"kept value 299");
    assert_eq!(r.get(t, b"inline").unwrap(), None);
    assert_eq!(r.get(t, &k(150)).unwrap().unwrap(), b"kept");
    drop(r);
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.insert(t, b"again", &[7u8; 3000]).unwrap();
    tx.commit().unwrap();
    assert!(db.check().unwrap().is_ok());
}

/// `insert_new` inserts only a key that is absent and leaves one that is there as it was;
/// replacements rewritten in place (same size, smaller) keep the tree sound.
#[test]
fn insert_new_keeps_an_existing_value() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let mut inserted = false;
    tx.insert_new(t, b"a", b"one", &mut inserted).unwrap();
    assert!(inserted);
    tx.insert_new(t, b"a", b"two", &mut inserted).unwrap();
    assert!(!inserted, "the key was there");
    assert_eq!(tx.get(t, b"a").unwrap(), Some(b"one".to_vec()));
    let mut old = None;
    tx.replace(t, b"a", b"uno", &mut old).unwrap();
    assert_eq!(old, Some(Some(b"one".to_vec())));
    assert_eq!(tx.get(t, b"a").unwrap(), Some(b"uno".to_vec()));
    // A smaller value is rewritten in place too; a larger one moves.
    let mut old = None;
    tx.replace(t, b"a", b"u", &mut old).unwrap();
    assert_eq!(old, Some(Some(b"uno".to_vec())));
    tx.insert(t, b"a", b"a longer value").unwrap();
    assert_eq!(tx.get(t, b"a").unwrap(), Some(b"a longer value".to_vec()));
    assert_eq!(tx.len(t).unwrap(), 1);
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

/// Writes in key order start from the leaf the previous write used: runs of inserts,
/// replacements of other sizes and removes, in order and against it, alternating between two
/// trees, leave the trees equal to a model and sound.
#[test]
fn writes_in_key_order_match_a_model() {
    use std::collections::BTreeMap;
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let a = tx.create_tree("a", TreeKind::Table).unwrap();
    let b = tx.create_tree("b", TreeKind::Table).unwrap();
    let mut model: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
    let val = |i: u32, round: u32| vec![(i % 251) as u8; ((i * 7 + round * 13) % 60) as usize];
    for round in 0..6u32 {
        let keys: Vec<u32> = if round % 2 == 0 {
            (0..400).collect()
        } else {
            (0..400).rev().collect()
        };
        for &i in &keys {
            let (t, m) = if i % 5 == 0 { (b, 1) } else { (a, 0) };
            match (round + i) % 4 {
                0 if round > 1 => {
                    assert_eq!(
                        tx.remove(t, &k(i)).unwrap(),
                        model[m].remove(&k(i)).is_some()
                    );
                }
                _ => {
                    let v = val(i, round);
                    assert_eq!(
                        tx.insert(t, &k(i), &v).unwrap(),
                        model[m].insert(k(i), v).is_some()
                    );
                }
            }
        }
        for (t, m) in [(a, 0), (b, 1)] {
            let mut r = tx
                .range(t, Bound::Unbounded, Bound::Unbounded, false)
                .unwrap();
            let got = r.collect_all().unwrap();
            let want: Vec<_> = model[m]
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(got, want, "round {round}");
        }
    }
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

/// A run of writes by random key makes the store stop remembering the leaf each write used
/// (it would never be used again) and a run in key order makes it start again: writes that
/// switch between the two, with reads between them, in a file (pages copied on write) and in
/// memory (pages changed where they are), across commits, leave the trees equal to a model
/// and sound.
#[test]
fn writes_in_and_out_of_order_match_a_model() {
    use std::collections::BTreeMap;
    fn run<F: cairn_store::BlockFile>(db: Db<F>) {
        let mut model: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
        let mut x = 0x9e37_79b9u32;
        let mut rand = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        };
        for round in 0..8u32 {
            let mut tx = db.begin_write().unwrap();
            let (a, b) = if round == 0 {
                (
                    tx.create_tree("a", TreeKind::Table).unwrap(),
                    tx.create_tree("b", TreeKind::Index { table: "a".into() })
                        .unwrap(),
                )
            } else {
                (tx.open_tree("a").unwrap(), tx.open_tree("b").unwrap())
            };
            for step in 0..600u32 {
                // Runs of 40 in key order (one tree, or both in turn) between runs of 40 by
                // random key.
                let ordered = (step / 40) % 2 == 1;
                let i = if ordered {
                    round * 97 + step
                } else {
                    rand(1200)
                };
                let (t, m) = if ordered && round % 2 == 0 || rand(3) == 0 {
                    (b, 1)
                } else {
                    (a, 0)
                };
                match rand(6) {
                    0 => assert_eq!(
                        tx.remove(t, &k(i)).unwrap(),
                        model[m].remove(&k(i)).is_some()
                    ),
                    1 => assert_eq!(tx.get(t, &k(i)).unwrap(), model[m].get(&k(i)).cloned()),
                    _ => {
                        let v = vec![(i % 251) as u8; (rand(90) + 1) as usize];
                        assert_eq!(
                            tx.insert(t, &k(i), &v).unwrap(),
                            model[m].insert(k(i), v).is_some()
                        );
                    }
                }
            }
            tx.commit().unwrap();
            let r = db.begin_read().unwrap();
            for (name, m) in [("a", 0), ("b", 1)] {
                let t = r.open_tree(name).unwrap();
                let got = r
                    .range(t, Bound::Unbounded, Bound::Unbounded, false)
                    .unwrap()
                    .collect_all()
                    .unwrap();
                let want: Vec<_> = model[m]
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "round {round}, tree {name}");
            }
            drop(r);
            let rep = db.check().unwrap();
            assert!(rep.is_ok(), "round {round}: {rep}");
        }
    }
    run(Db::create(MemoryFile::new(), small()).unwrap());
    run(Db::create(cairn_store::fault::FaultFile::new(), small()).unwrap());
}

/// Keys inserted in order fill their pages (a split at the right edge leaves the full node
/// as it is): the tree takes far fewer pages than the same keys inserted shuffled.
#[test]
fn an_ordered_load_fills_its_pages() {
    let pages = |order: &[u32]| {
        let db = Db::create(MemoryFile::new(), small()).unwrap();
        let mut tx = db.begin_write().unwrap();
        let t = tx.create_tree("t", TreeKind::Table).unwrap();
        for &i in order {
            tx.insert(t, &k(i), &[i as u8; 20]).unwrap();
        }
        tx.commit().unwrap();
        let rep = db.check().unwrap();
        assert!(rep.is_ok(), "{rep}");
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        let mut range = r
            .range(t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap();
        assert_eq!(range.collect_all().unwrap().len(), order.len());
        db.page_count() - db.free_pages().unwrap().len() as u32
    };
    let ordered: Vec<u32> = (0..3000).collect();
    let mut shuffled = ordered.clone();
    let mut x = 12345u64;
    for i in (1..shuffled.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        shuffled.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let (o, s) = (pages(&ordered), pages(&shuffled));
    assert!(o * 4 < s * 3, "ordered load took {o} pages, shuffled {s}");
}

/// Small commits change the free tree in its one leaf directly; it must stay whole as it grows
/// past one leaf (a big delete), shrinks back to one and empties again.
#[test]
fn the_free_tree_stays_whole_through_small_and_large_commits() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.create_tree("t", TreeKind::Table).unwrap();
    tx.commit().unwrap();
    let check = |db: &Db<MemoryFile>, what: &str| {
        let rep = db.check().unwrap();
        assert!(rep.is_ok(), "{what}: {rep}");
        let listed = db.free_pages().unwrap().len() as u64;
        assert_eq!(listed, rep.free_pages, "{what}: {rep}");
    };
    for round in 0..3u32 {
        for i in 0..300 {
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("t").unwrap();
            tx.insert(t, &k(round * 1000 + i), &[7u8; 40]).unwrap();
            tx.commit().unwrap();
        }
        check(&db, "after single inserts");
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..300 {
            assert!(tx.remove(t, &k(round * 1000 + i)).unwrap());
        }
        tx.commit().unwrap();
        check(&db, "after a large delete");
        for i in 0..50 {
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("t").unwrap();
            tx.insert(t, &k(i), &[1u8; 8]).unwrap();
            tx.remove(t, &k(i)).unwrap();
            tx.commit().unwrap();
        }
        check(&db, "after small commits over a large free tree");
    }
}

/// `update_each` over ranges with every kind of bound, changing some values (shorter, longer,
/// into overflow pages), removing some entries (runs of them too) and leaving others, against
/// a model; the tree must pass `check` and hold
/// the model after commit and reopen. A range whose rows change nothing copies no page.
#[test]
fn update_each_rewrites_exactly_the_changed_entries_of_a_range() {
    use std::collections::BTreeMap;
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut model = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..3000u32 {
        let v = format!("value {i}").into_bytes();
        tx.insert(t, &k(i), &v).unwrap();
        model.insert(k(i), v);
    }
    tx.commit().unwrap();
    let bounds = |lo: u32, hi: u32, kind: u32| -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        match kind {
            0 => (Bound::Included(k(lo)), Bound::Included(k(hi))),
            1 => (Bound::Excluded(k(lo)), Bound::Excluded(k(hi))),
            2 => (Bound::Unbounded, Bound::Included(k(hi))),
            3 => (Bound::Included(k(lo)), Bound::Unbounded),
            // Between keys: the bounds themselves are not in the tree.
            _ => (
                Bound::Included(format!("key{lo:08}x").into_bytes()),
                Bound::Excluded(format!("key{hi:08}x").into_bytes()),
            ),
        }
    };
    for round in 0..10u32 {
        let (lo, hi) = (round * 277 % 2500, round * 277 % 2500 + 400);
        let (lb, ub) = bounds(lo, hi, round % 5);
        // None: keep; Some(None): remove; Some(Some(v)): write v.
        let new = |key: &[u8], v: &[u8]| -> Option<Option<Vec<u8>>> {
            let h = key.iter().map(|&b| b as u32).sum::<u32>() + round;
            match h % 5 {
                _ if round % 3 == 2 && h % 7 < 5 => Some(None),
                0 => Some(Some(v[..v.len().min(3)].to_vec())),
                1 => Some(Some(v.repeat(3))),
                2 if round % 4 == 0 => Some(Some(vec![round as u8; 300])),
                3 => Some(None),
                _ => None,
            }
        };
        let mut want = 0;
        for (key, v) in model.range::<Vec<u8>, _>((lb.clone(), ub.clone())) {
            if new(key, v).is_some() {
                want += 1;
            }
        }
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        let mut seen = Vec::new();
        let mut f = |key: &[u8], v: &[u8], out: &mut Vec<u8>| {
            seen.push(key.to_vec());
            assert_eq!(Some(&v.to_vec()), model.get(key), "the value f is given");
            Ok(match new(key, v) {
                Some(Some(n)) => {
                    out.extend_from_slice(&n);
                    Each::Write
                }
                Some(None) => Each::Remove,
                None => Each::Keep,
            })
        };
        let n = tx
            .update_each(t, as_ref(&lb), as_ref(&ub), &mut f, None)
            .unwrap();
        let expect_seen: Vec<Vec<u8>> = model
            .range::<Vec<u8>, _>((lb.clone(), ub.clone()))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(
            seen, expect_seen,
            "round {round}: entries visited, in order"
        );
        assert_eq!(n, want, "round {round}");
        let mut gone = Vec::new();
        for (key, v) in model.range_mut::<Vec<u8>, _>((lb, ub)) {
            match new(key, v) {
                Some(Some(x)) => *v = x,
                Some(None) => gone.push(key.clone()),
                None => {}
            }
        }
        for key in gone {
            model.remove(&key);
        }
        assert_eq!(tx.len(t).unwrap(), model.len() as u64, "round {round}");
        tx.commit().unwrap();
        let rep = db.check().unwrap();
        assert!(rep.is_ok(), "round {round}: {rep}");
    }
    // Nothing changes: no page is written.
    let pages = db.page_count();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    let mut none = |_: &[u8], _: &[u8], _: &mut Vec<u8>| Ok(Each::Keep);
    let n = tx
        .update_each(t, Bound::Unbounded, Bound::Unbounded, &mut none, None)
        .unwrap();
    assert_eq!(n, 0);
    let info = tx.commit().unwrap();
    assert!(info.changed_trees.is_empty(), "{:?}", info.changed_trees);
    assert_eq!(db.page_count(), pages);
    let file = db.into_file().unwrap();
    let db = Db::open(file, small()).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let all: BTreeMap<Vec<u8>, Vec<u8>> = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(all, model);
}

/// `insert_or_rewrite` against a model, over small pages: keys absent (inserted) and present
/// (kept, removed, or rewritten shorter, longer, into overflow pages and back), in a scattered
/// order so that splits and merges happen everywhere; `undo` hears of exactly the entries
/// that were there and changed, with their old values. The tree must pass `check` and hold the
/// model after each commit and after reopening. Over a memory file (pages changed where they
/// are) and a file that is not volatile (pages copied).
#[test]
fn insert_or_rewrite_inserts_or_rewrites_in_one_call() {
    insert_or_rewrite_against_a_model(MemoryFile::new());
    insert_or_rewrite_against_a_model(cairn_store::fault::FaultFile::new());
}

fn insert_or_rewrite_against_a_model<F: cairn_store::BlockFile>(file: F) {
    use std::collections::BTreeMap;
    let db = Db::create(file, small()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    tx.create_tree("t", TreeKind::Table).unwrap();
    tx.commit().unwrap();
    for round in 0..6u32 {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for n in 0..1500u32 {
            let i = (n * 7919 + round * 131) % 2000;
            let key = k(i);
            let fresh = format!("new {i} {round}").into_bytes();
            // What becomes of a present entry, from its key and the round.
            let pick = (i + round) % 6;
            let mut heard = Vec::new();
            let mut undo = |key: &[u8], old: &[u8]| heard.push((key.to_vec(), old.to_vec()));
            let mut f = |key: &[u8], v: &[u8], out: &mut Vec<u8>| {
                assert_eq!(Some(&v.to_vec()), model.get(key), "the value f is given");
                Ok(match pick {
                    0 => Each::Keep,
                    1 => Each::Remove,
                    2 => {
                        out.extend_from_slice(&v[..v.len().min(2)]);
                        Each::Write
                    }
                    3 => {
                        out.extend_from_slice(&[round as u8; 700]);
                        Each::Write
                    }
                    _ => {
                        out.extend_from_slice(v);
                        out.extend_from_slice(b"+grown");
                        Each::Write
                    }
                })
            };
            let got = tx
                .insert_or_rewrite(t, &key, &fresh, &mut f, Some(&mut undo))
                .unwrap();
            let old = model.get(&key).cloned();
            let want = match &old {
                None => {
                    model.insert(key.clone(), fresh);
                    None
                }
                Some(v) => Some(match pick {
                    0 => Each::Keep,
                    1 => {
                        model.remove(&key);
                        Each::Remove
                    }
                    2 => {
                        model.insert(key.clone(), v[..v.len().min(2)].to_vec());
                        Each::Write
                    }
                    3 => {
                        model.insert(key.clone(), vec![round as u8; 700]);
                        Each::Write
                    }
                    _ => {
                        let mut g = v.clone();
                        g.extend_from_slice(b"+grown");
                        model.insert(key.clone(), g);
                        Each::Write
                    }
                }),
            };
            assert_eq!(got, want, "round {round}, key {i}");
            let expect_heard = match (&old, want) {
                (Some(v), Some(Each::Write | Each::Remove)) => vec![(key.clone(), v.clone())],
                _ => Vec::new(),
            };
            assert_eq!(heard, expect_heard, "round {round}, key {i}");
        }
        assert_eq!(tx.len(t).unwrap(), model.len() as u64, "round {round}");
        tx.commit().unwrap();
        let rep = db.check().unwrap();
        assert!(rep.is_ok(), "round {round}: {rep}");
    }
    let file = db.into_file().unwrap();
    let db = Db::open(file, small()).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let all: BTreeMap<Vec<u8>, Vec<u8>> = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(all, model);
}

/// Ranges opened one after another, some kept open while others start, with every kind of
/// bound: a dropped cursor's buffers (its stack, its range's bounds) serve the next one, which
/// must see its own bounds only. Checked against a model, in a read and in a write transaction.
#[test]
fn ranges_one_after_another_see_only_their_own_bounds() {
    use std::collections::BTreeMap;
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut model = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in (0..2000u32).step_by(3) {
        tx.insert(t, &k(i), &i.to_le_bytes()).unwrap();
        model.insert(k(i), i.to_le_bytes().to_vec());
    }
    tx.commit().unwrap();
    // A long key, then short ones: a reused buffer must not keep the long key's tail.
    let bound = |n: u32| -> Bound<Vec<u8>> {
        let key = match n % 4 {
            0 => format!("key{:08}{}", n * 7 % 2000, "z".repeat(40)).into_bytes(),
            1 => k(n * 7 % 2000),
            _ => format!("key{:04}", n * 7 % 2000 / 10).into_bytes(),
        };
        match n % 3 {
            0 => Bound::Included(key),
            1 => Bound::Excluded(key),
            _ => Bound::Unbounded,
        }
    };
    let want = |lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, reverse: bool| -> Vec<Vec<u8>> {
        let ok = |key: &Vec<u8>| {
            let above = match lo {
                Bound::Included(b) => key >= b,
                Bound::Excluded(b) => key > b,
                Bound::Unbounded => true,
            };
            let below = match hi {
                Bound::Included(b) => key <= b,
                Bound::Excluded(b) => key < b,
                Bound::Unbounded => true,
            };
            above && below
        };
        let mut v: Vec<Vec<u8>> = model.keys().filter(|x| ok(x)).cloned().collect();
        if reverse {
            v.reverse();
        }
        v
    };
    let keys = |mut r: cairn_store::Range<MemoryFile>| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while r.next().unwrap() {
            out.push(r.key().to_vec());
        }
        out
    };
    let r = db.begin_read().unwrap();
    let rt = r.open_tree("t").unwrap();
    let mut w = db.begin_write().unwrap();
    let wt = w.open_tree("t").unwrap();
    for n in 0..300u32 {
        let (lo, hi, reverse) = (bound(n), bound(n * 13 + 5), n % 5 == 0);
        let (lo2, hi2) = (bound(n + 1), bound(n * 11 + 2));
        let (a, b) = if n % 2 == 0 {
            let outer = r.range(rt, as_ref(&lo), as_ref(&hi), reverse).unwrap();
            let inner = r.range(rt, as_ref(&lo2), as_ref(&hi2), false).unwrap();
            (keys(outer), keys(inner))
        } else {
            let outer = w.range(wt, as_ref(&lo), as_ref(&hi), reverse).unwrap();
            let inner = w.range(wt, as_ref(&lo2), as_ref(&hi2), false).unwrap();
            (keys(outer), keys(inner))
        };
        assert_eq!(a, want(&lo, &hi, reverse), "range {n}: {lo:?}..{hi:?}");
        assert_eq!(b, want(&lo2, &hi2, false), "range {n}: {lo2:?}..{hi2:?}");
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(x) => Bound::Included(x.as_slice()),
        Bound::Excluded(x) => Bound::Excluded(x.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// `Range::for_each` hands out what stepping with `next` does: every bound and direction, long
/// values in overflow pages, stopping early, and a tree written to between entries.
#[test]
fn for_each_matches_stepping_through_a_range() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..600u32 {
        let v = if i % 50 == 7 {
            vec![i as u8; 2000]
        } else {
            i.to_le_bytes().to_vec()
        };
        tx.insert(t, &k(i), &v).unwrap();
    }
    tx.commit().unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let (a, b) = (k(37), k(411));
    let bounds = [
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(&a[..]), Bound::Excluded(&b[..])),
        (Bound::Excluded(&a[..]), Bound::Included(&b[..])),
        (Bound::Unbounded, Bound::Included(&a[..])),
        (Bound::Included(&b[..]), Bound::Excluded(&a[..])),
    ];
    for (lo, hi) in bounds {
        for reverse in [false, true] {
            let want = r.range(t, lo, hi, reverse).unwrap().collect_all().unwrap();
            let mut got = Vec::new();
            let mut range = r.range(t, lo, hi, reverse).unwrap();
            let done = range
                .for_each(|k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    Ok::<_, Error>(true)
                })
                .unwrap();
            assert!(done);
            assert_eq!(got, want, "{lo:?} {hi:?} reverse {reverse}");
            // Stopped after 100 entries, the range goes on from the next one.
            let mut range = r.range(t, lo, hi, reverse).unwrap();
            let mut n = 0;
            let done = range
                .for_each(|_, _| {
                    n += 1;
                    Ok::<_, Error>(n < 100)
                })
                .unwrap();
            assert_eq!(done, want.len() < 100);
            if !done {
                assert!(range.next().unwrap() == (want.len() > 100));
                if want.len() > 100 {
                    assert_eq!(range.key(), want[100].0);
                }
            }
        }
    }
    // A write between entries: the range goes on after the last key it handed out.
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    let mut range = tx
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap();
    let mut seen = Vec::new();
    range
        .for_each(|key, _| {
            seen.push(key.to_vec());
            if seen.len() == 10 {
                return Ok::<_, Error>(false);
            }
            Ok(true)
        })
        .unwrap();
    tx.remove(t, &k(10)).unwrap();
    // And one made by `f` itself, mid-leaf.
    range
        .for_each(|key, _| {
            seen.push(key.to_vec());
            if seen.len() == 20 {
                tx.remove(t, &k(20)).unwrap();
                tx.insert(t, &k(1000), b"x").unwrap();
            }
            Ok::<_, Error>(true)
        })
        .unwrap();
    let want: Vec<Vec<u8>> = (0..600).filter(|&i| i != 10).chain([1000]).map(k).collect();
    // k(20) was handed out before it was removed.
    assert_eq!(seen, want);
}

/// A write transaction opens a tree the last commit had open without reading the catalog;
/// whatever changed the catalog since (a rollback, metadata set on a tree not open, a drop
/// and re-create) is seen as if the catalog had been read.
#[test]
fn a_tree_opened_after_a_commit_is_the_catalog_s() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let u = tx.create_tree("u", TreeKind::Table).unwrap();
    tx.insert(t, b"a", b"1").unwrap();
    tx.insert(u, b"a", b"1").unwrap();
    tx.commit().unwrap();

    // Opened, written, rolled back: the next transaction sees the committed tree.
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.insert(t, b"b", b"2").unwrap();
    drop(tx);
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    assert_eq!(tx.len(t).unwrap(), 1);
    // Metadata set before the tree is opened.
    tx.set_meta_of("u", b"m").unwrap();
    let u = tx.open_tree("u").unwrap();
    assert_eq!(tx.tree_info(u).unwrap().meta, b"m");
    tx.insert(t, b"b", b"2").unwrap();
    tx.commit().unwrap();

    // Dropped and created again in one transaction.
    let mut tx = db.begin_write().unwrap();
    tx.drop_tree("t").unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    tx.insert(t, b"z", b"9").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    assert_eq!(tx.len(t).unwrap(), 1);
    assert_eq!(tx.get(t, b"z").unwrap().as_deref(), Some(&b"9"[..]));
    let u = tx.open_tree("u").unwrap();
    assert_eq!(tx.tree_info(u).unwrap().meta, b"m");
    assert_eq!(tx.len(u).unwrap(), 1);
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

/// A memory file keeps committed pages in the cache unwritten: what it hands back must still be
/// a whole database, every page with its checksum and both superblocks naming the last commit.
/// A 16-page cache, so most pages are written back on eviction and read back again.
#[test]
fn a_memory_database_handed_back_opens_whole() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for round in 0..60u32 {
        let snapshot = db.begin_read().unwrap();
        let mut tx = db.begin_write().unwrap();
        let t = match tx.open_tree("t") {
            Ok(t) => t,
            Err(_) => tx.create_tree("t", TreeKind::Table).unwrap(),
        };
        for i in 0..40 {
            let key = (round * 37 + i * 101) % 900;
            if (round + i) % 4 == 0 {
                tx.remove(t, &k(key)).unwrap();
                model.remove(&key);
            } else {
                tx.insert(t, &k(key), &[round as u8; 60]).unwrap();
                model.insert(key, round as u8);
            }
        }
        tx.commit().unwrap();
        // A transaction that changes pages and rolls back leaves the commit as it was.
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..30 {
            tx.insert(t, &k(1000 + i), &[9u8; 60]).unwrap();
        }
        tx.rollback();
        drop(snapshot);
    }
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    let txn = db.txn();
    let bytes = db.into_file().unwrap().into_bytes();
    // Both slots name the last commit.
    for slot in 0..2 {
        let at = slot * 512 + 24;
        assert_eq!(
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()),
            txn
        );
    }
    let db = Db::open(MemoryFile::from_bytes(bytes.clone()), small()).unwrap();
    assert_eq!(db.recovery_note(), None);
    assert_eq!(db.txn(), txn);
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    assert_eq!(r.len(t).unwrap(), model.len() as u64);
    for (key, v) in &model {
        assert_eq!(r.get(t, &k(*key)).unwrap(), Some(vec![*v; 60]));
    }
    drop(r);
    // Damage to one slot leaves the other, which names the same commit.
    let mut b = bytes;
    b[40] ^= 1;
    let db = Db::open(MemoryFile::from_bytes(b), small()).unwrap();
    assert_eq!(db.txn(), txn);
    assert!(db.check().unwrap().is_ok());
}

/// Several `update_each` walks in one transaction over a deep tree (small pages), so that
/// after the first the leaves are owned and most changes are made where the entries are: the
/// walk then goes from leaf to leaf through the branches it descended by. Each walk must
/// visit exactly the model's entries in its range, in order, whatever the writes before it
/// (values shrunk in place, grown until leaves split, a leaf's last entry removed, runs of
/// entries removed until leaves merge).
#[test]
fn update_each_walks_owned_leaves_in_order() {
    use std::collections::BTreeMap;
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut model = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..4000u32 {
        let v = format!("value {i} ----").into_bytes();
        tx.insert(t, &k(i), &v).unwrap();
        model.insert(k(i), v);
    }
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for pass in 0..12u32 {
        let (lb, ub) = match pass % 3 {
            0 => (Bound::Unbounded, Bound::Unbounded),
            1 => (
                Bound::Included(k(pass * 211 % 3000)),
                Bound::Excluded(k(pass * 211 % 3000 + 900)),
            ),
            _ => (Bound::Excluded(k(pass * 97 % 2000)), Bound::Unbounded),
        };
        let new = |key: &[u8], v: &[u8]| -> Option<Option<Vec<u8>>> {
            let h = key.iter().map(|&b| b as u32).sum::<u32>() * 7 + pass;
            match (pass, h % 11) {
                // Every entry rewritten, the same length: each leaf becomes owned.
                (0, _) => Some(Some(v.iter().map(|b| b ^ 1).collect())),
                (_, 0) => Some(None),
                (_, 1) if pass % 4 == 1 => Some(Some(v.repeat(2))),
                (_, 2) => Some(Some(v[..v.len() - 1].to_vec())),
                // Runs of removals: leaves go underfull and merge.
                (p, _) if p % 5 == 3 && h % 3 != 0 => Some(None),
                _ => None,
            }
        };
        let expect: Vec<Vec<u8>> = model
            .range::<Vec<u8>, _>((lb.clone(), ub.clone()))
            .map(|(k, _)| k.clone())
            .collect();
        let mut seen = Vec::new();
        let mut f = |key: &[u8], v: &[u8], out: &mut Vec<u8>| {
            seen.push(key.to_vec());
            assert_eq!(
                Some(&v.to_vec()),
                model.get(key),
                "pass {pass}: the value f is given"
            );
            Ok(match new(key, v) {
                Some(Some(n)) => {
                    out.extend_from_slice(&n);
                    Each::Write
                }
                Some(None) => Each::Remove,
                None => Each::Keep,
            })
        };
        tx.update_each(t, as_ref(&lb), as_ref(&ub), &mut f, None)
            .unwrap();
        assert_eq!(seen, expect, "pass {pass}: entries visited, in order");
        for key in expect {
            let v = model.get(&key).unwrap().clone();
            match new(&key, &v) {
                Some(Some(x)) => {
                    model.insert(key, x);
                }
                Some(None) => {
                    model.remove(&key);
                }
                None => {}
            }
        }
        assert_eq!(tx.len(t).unwrap(), model.len() as u64, "pass {pass}");
    }
    tx.commit().unwrap();
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let all: BTreeMap<Vec<u8>, Vec<u8>> = r
        .range(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(all, model);
}

/// In memory a commit changes the table's pages, the catalog's and the free tree's under
/// their own page numbers. One-row commits (the free tree a leaf of a few pages,
/// emptied when a commit takes every free page and refilled when the next frees them),
/// rollbacks between them, snapshots held across some stretches of commits and readers begun
/// inside a write transaction: after each commit the database checks whole (every page used
/// or free, the free tree's count the superblock's, `free_pages` naming no page a tree uses),
/// every reader reads what it began with, and the image handed back opens to the model.
#[test]
fn a_memory_database_keeps_its_free_tree_and_catalog_whole_through_small_commits() {
    use std::collections::BTreeMap;
    fn reads(r: &cairn_store::ReadTx<MemoryFile>, m: &BTreeMap<u32, u8>) {
        let t = r.open_tree("t").unwrap();
        assert_eq!(r.len(t).unwrap(), m.len() as u64);
        for (key, v) in m {
            assert_eq!(r.get(t, &k(*key)).unwrap(), Some(vec![*v; 40]));
        }
    }
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.create_tree("t", TreeKind::Table).unwrap();
    tx.commit().unwrap();
    let mut model = BTreeMap::new();
    let mut held: Option<(cairn_store::ReadTx<MemoryFile>, BTreeMap<u32, u8>)> = None;
    for round in 0..300u32 {
        let before = model.clone();
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        let key = (round * 53) % 400;
        if round % 5 == 4 {
            tx.remove(t, &k(key)).unwrap();
            model.remove(&key);
        } else {
            tx.insert(t, &k(key), &[round as u8; 40]).unwrap();
            model.insert(key, round as u8);
        }
        let during = (round % 11 == 0).then(|| db.begin_read().unwrap());
        tx.commit().unwrap();
        if let Some(r) = during {
            reads(&r, &before);
        }
        if round % 7 == 0 {
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("t").unwrap();
            tx.insert(t, &k(5000 + round), &[1u8; 40]).unwrap();
            tx.rollback();
        }
        let rep = db.check().unwrap();
        assert!(rep.is_ok(), "round {round}: {rep}");
        assert_eq!(
            rep.used_pages as usize + db.free_pages().unwrap().len() + 2,
            db.page_count() as usize,
            "round {round}: {rep}"
        );
        if round % 30 == 0 {
            if let Some((r, m)) = held.take() {
                reads(&r, &m);
            }
            if round % 60 == 0 {
                held = Some((db.begin_read().unwrap(), model.clone()));
            }
        }
    }
    drop(held);
    let bytes = db.into_file().unwrap().into_bytes();
    let db = Db::open(MemoryFile::from_bytes(bytes), small()).unwrap();
    assert!(db.check().unwrap().is_ok());
    reads(&db.begin_read().unwrap(), &model);
}

/// In memory a write changes committed pages under their own numbers. Big transactions over
/// a small cache and a small limit of changed pages (so pages spill and are evicted), with a
/// snapshot taken before each one and a cursor walked over it while the transaction writes,
/// after it commits, and after later commits: the snapshot reads exactly what it began with
/// throughout, a rolled-back transaction leaves the last commit, and the database checks
/// whole and reopens to the model.
#[test]
fn a_memory_database_changes_pages_in_place_unseen_by_readers() {
    use std::collections::BTreeMap;
    fn walk(r: &cairn_store::ReadTx<MemoryFile>, m: &BTreeMap<u32, u32>) {
        let t = r.open_tree("t").unwrap();
        assert_eq!(r.len(t).unwrap(), m.len() as u64);
        let mut c = r.cursor(t).unwrap();
        let mut ok = c.first().unwrap();
        let mut want = m.iter();
        while ok {
            let (key, v) = want.next().expect("no more entries in the model");
            assert_eq!(c.key().unwrap(), k(*key).as_slice());
            assert_eq!(c.value().unwrap(), v.to_le_bytes().repeat(10).as_slice());
            ok = c.next().unwrap();
        }
        assert!(want.next().is_none(), "entries missing from the snapshot");
    }
    let opts = Options {
        page_size: 512,
        cache_pages: 16,
        dirty_pages: 8,
        ..Options::default()
    };
    let db = Db::create(MemoryFile::new(), opts.clone()).unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.create_tree("t", TreeKind::Table).unwrap();
    tx.commit().unwrap();
    let mut model: BTreeMap<u32, u32> = BTreeMap::new();
    let mut snapshots = Vec::new();
    for round in 0..12u32 {
        snapshots.push((db.begin_read().unwrap(), model.clone()));
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        let mut next = model.clone();
        for i in 0..300u32 {
            let key = (i * 31 + round * 7) % 700;
            if (i + round) % 3 == 0 {
                tx.remove(t, &k(key)).unwrap();
                next.remove(&key);
            } else {
                let v = round * 1000 + i;
                tx.insert(t, &k(key), &v.to_le_bytes().repeat(10)).unwrap();
                next.insert(key, v);
            }
            if i == 150 {
                // Begun inside the write: the last commit, not the writes so far.
                let (r, m) = (db.begin_read().unwrap(), model.clone());
                walk(&r, &m);
                snapshots.push((r, m));
            }
        }
        for (r, m) in &snapshots {
            walk(r, m);
        }
        if round % 4 == 3 {
            tx.rollback();
        } else {
            tx.commit().unwrap();
            model = next;
        }
        for (r, m) in &snapshots {
            walk(r, m);
        }
        if round % 5 == 4 {
            snapshots.clear();
        }
        let r = db.begin_read().unwrap();
        walk(&r, &model);
    }
    drop(snapshots);
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
    let bytes = db.into_file().unwrap().into_bytes();
    let db = Db::open(MemoryFile::from_bytes(bytes), opts).unwrap();
    assert!(db.check().unwrap().is_ok());
    walk(&db.begin_read().unwrap(), &model);
}

/// Trees filled in key order (each leaf left full, a new one started at the right edge), in
/// bulk and in scattered order, some values in overflow pages; dropped into an empty free tree,
/// both when their pages fit in one free-tree leaf and when they do not; the pages taken again.
#[test]
fn dropped_trees_fill_an_empty_free_tree_and_their_pages_are_taken_again() {
    fn run<F: cairn_store::BlockFile>(file: F, rows: u32) -> F {
        use std::collections::BTreeMap;
        let db = Db::create(file, small()).unwrap();
        let whole = |db: &Db<F>, what: &str| {
            let rep = db.check().unwrap();
            assert!(rep.is_ok(), "{what}: {rep}");
            assert_eq!(
                rep.used_pages as usize + db.free_pages().unwrap().len() + 2,
                db.page_count() as usize,
                "{what}: {rep}"
            );
        };
        let value = |i: u32| vec![i as u8; if i % 50 == 7 { 700 } else { 30 }];
        let mut model = BTreeMap::new();
        let mut tx = db.begin_write().unwrap();
        let a = tx.create_tree("a", TreeKind::Table).unwrap();
        for i in 0..rows {
            tx.insert(a, &k(i), &value(i)).unwrap();
        }
        let b = tx.create_tree("b", TreeKind::Table).unwrap();
        tx.bulk_load(b, (0..rows).map(|i| (k(i), value(i))))
            .unwrap();
        let c = tx.create_tree("c", TreeKind::Table).unwrap();
        for i in 0..rows {
            let j = (i * 7919) % rows;
            tx.insert(c, &k(j), &value(j)).unwrap();
            model.insert(k(j), value(j));
        }
        tx.commit().unwrap();
        whole(&db, "filled");
        assert!(db.free_pages().unwrap().is_empty());
        let r = db.begin_read().unwrap();
        for name in ["a", "b"] {
            let t = r.open_tree(name).unwrap();
            assert_eq!(r.len(t).unwrap(), rows as u64);
            for i in 0..rows {
                assert_eq!(r.get(t, &k(i)).unwrap(), Some(value(i)), "{name} {i}");
            }
        }
        drop(r);
        for name in ["a", "b"] {
            let mut tx = db.begin_write().unwrap();
            tx.drop_tree(name).unwrap();
            tx.commit().unwrap();
            whole(&db, &format!("{name} dropped"));
            assert!(!db.free_pages().unwrap().is_empty());
        }
        let pages = db.page_count();
        let mut tx = db.begin_write().unwrap();
        let d = tx.create_tree("d", TreeKind::Table).unwrap();
        for i in 0..rows {
            tx.insert(d, &k(i), &value(i)).unwrap();
        }
        tx.commit().unwrap();
        whole(&db, "refilled");
        assert!(
            db.page_count() <= pages + 2,
            "the freed pages are taken again"
        );
        let r = db.begin_read().unwrap();
        let t = r.open_tree("c").unwrap();
        for (key, v) in &model {
            assert_eq!(r.get(t, key).unwrap().as_ref(), Some(v));
        }
        drop(r);
        db.into_file().unwrap()
    }
    // 60 rows: a tree's pages fit in one free-tree leaf of a 512-byte page; 600: they do not.
    for rows in [60, 600] {
        let bytes = run(MemoryFile::new(), rows).into_bytes();
        let db = Db::open(MemoryFile::from_bytes(bytes), small()).unwrap();
        assert!(db.check().unwrap().is_ok());
        run(cairn_store::fault::FaultFile::new(), rows);
    }
}

/// A tree opened again a few commits after it was last written (its entry kept from that
/// commit, not read from the catalog) is as that commit left it, in a write and in a read;
/// a commit that wrote the catalog otherwise (`set_meta_of`, a tree dropped or made) leaves
/// no entry older than itself to be taken.
#[test]
fn a_tree_opened_some_commits_after_its_last_write_is_as_it_was_left() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.create_tree("a", TreeKind::Table).unwrap();
    tx.create_tree("b", TreeKind::Table).unwrap();
    tx.commit().unwrap();
    let mut n_a = 0u32;
    for round in 0..40u32 {
        // `a` every fifth commit, `b` in the others: `a`'s entry is four commits old.
        let mut tx = db.begin_write().unwrap();
        let name = if round % 5 == 0 { "a" } else { "b" };
        let t = tx.open_tree(name).unwrap();
        let len = tx.tree_info(t).unwrap().len;
        if name == "a" {
            assert_eq!(len, u64::from(n_a), "round {round}");
            // Enough rows to split leaves of 512 bytes: the root moves.
            for i in 0..20 {
                tx.insert(t, &k(n_a * 100 + i), &[round as u8; 40]).unwrap();
            }
            n_a += 20;
        } else {
            tx.insert(t, &k(round), b"b").unwrap();
        }
        if round == 17 {
            tx.set_meta_of("a", b"set by name").unwrap();
        }
        if round == 23 {
            tx.create_tree("c", TreeKind::Table).unwrap();
        }
        if round == 31 {
            tx.drop_tree("c").unwrap();
        }
        if round == 36 {
            // A transaction that opens `a` and rolls back gives its entry up.
            let a = tx.open_tree("a").unwrap();
            tx.insert(a, b"gone", b"x").unwrap();
            tx.rollback();
            continue;
        }
        tx.commit().unwrap();
    }
    let mut tx = db.begin_write().unwrap();
    let a = tx.open_tree("a").unwrap();
    let info = tx.tree_info(a).unwrap();
    assert_eq!(info.len, u64::from(n_a));
    assert_eq!(info.meta, b"set by name");
    assert_eq!(tx.get(a, b"gone").unwrap(), None);
    assert_eq!(tx.get(a, &k(0)).unwrap().as_deref(), Some(&[0u8; 40][..]));
    tx.rollback();
    let rtx = db.begin_read().unwrap();
    let a = rtx.open_tree("a").unwrap();
    assert_eq!(rtx.len(a).unwrap(), u64::from(n_a));
    let mut count = 0;
    let mut cur = rtx.cursor(a).unwrap();
    let mut more = cur.first().unwrap();
    while more {
        count += 1;
        more = cur.next().unwrap();
    }
    assert_eq!(count, n_a);
    drop(cur);
    drop(rtx);
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{rep}");
}

#[test]
fn a_range_skips_whole_leaves_and_stops_at_its_bounds() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    for i in 0..2000u32 {
        tx.insert(t, &k(i * 2), &i.to_le_bytes()).unwrap();
    }
    tx.commit().unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    let (lo, hi) = (k(301), k(3500));
    type Bounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
    let bounds: [Bounds; 4] = [
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(&lo), Bound::Excluded(&hi)),
        (Bound::Excluded(&lo), Bound::Included(&hi)),
        (Bound::Unbounded, Bound::Included(&hi)),
    ];
    for (lower, upper) in bounds {
        for reverse in [false, true] {
            let all = r
                .range(t, lower, upper, reverse)
                .unwrap()
                .collect_all()
                .unwrap();
            for n in [0u64, 1, 7, 50, 333, 1599, 1600, 1601, 1999, 2000, 5000] {
                let mut range = r.range(t, lower, upper, reverse).unwrap();
                let passed = range.skip(n).unwrap();
                assert_eq!(
                    passed,
                    n.min(all.len() as u64),
                    "{lower:?} {upper:?} {reverse} {n}"
                );
                let rest = range.collect_all().unwrap();
                assert_eq!(
                    rest,
                    all[passed as usize..],
                    "{lower:?} {upper:?} {reverse} {n}"
                );
            }
        }
    }
}

#[test]
fn point_reads_in_and_out_of_order_find_what_a_model_holds() {
    let db = Db::create(MemoryFile::new(), small()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let names = ["a", "b", "c", "d", "e"];
    let trees: Vec<_> = names
        .iter()
        .map(|n| tx.create_tree(n, TreeKind::Table).unwrap())
        .collect();
    for (j, &t) in trees.iter().enumerate() {
        for i in 0..1500u32 {
            if i % 3 != j as u32 % 3 {
                // Some values run to overflow pages.
                let v = vec![i as u8; if i % 97 == 0 { 900 } else { 4 + j }];
                tx.insert(t, &k(i), &v).unwrap();
            }
        }
    }
    tx.commit().unwrap();
    let r = db.begin_read().unwrap();
    let trees: Vec<_> = names.iter().map(|n| r.open_tree(n).unwrap()).collect();
    let mut out = Vec::new();
    // In key order, interleaving the trees (which share the read's few remembered leaves),
    // then scattered, then keys below, between and above every leaf.
    let order = (0..1600u32).chain((0..1600).map(|i| (i * 7919) % 1600));
    for i in order {
        for (j, &t) in trees.iter().enumerate() {
            let found = r.get_into(t, &k(i), &mut out).unwrap();
            let want = i < 1500 && i % 3 != j as u32 % 3;
            assert_eq!(found, want, "tree {j} key {i}");
            if want {
                let len = if i % 97 == 0 { 900 } else { 4 + j };
                assert_eq!(out, vec![i as u8; len], "tree {j} key {i}");
            }
        }
    }
    for probe in [
        b"a".to_vec(),
        b"key".to_vec(),
        b"zzz".to_vec(),
        k(700)[..9].to_vec(),
    ] {
        assert!(!r.get_into(trees[0], &probe, &mut out).unwrap());
    }
}
