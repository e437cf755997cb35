//! Direct tests of the public API: sizes, shapes and limits the scripts do not reach.

use std::ops::Bound;

use cairn_store::{Db, Durability, Error, MemoryFile, Options, Seek, TreeKind};

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
