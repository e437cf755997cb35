//! The root bytes (format version 3): a caller's bytes kept in the superblock with each commit,
//! and version 2 files, which have none, opened and carried on.

use cairn_store::fault::{CrashMode, FaultFile};
use cairn_store::{xxh64, Db, MemoryFile, Options, TreeKind};

fn opts() -> Options {
    Options {
        page_size: 512,
        ..Options::default()
    }
}

fn put(db: &Db<FaultFile>, key: &[u8], root: Option<&[u8]>) {
    let mut tx = db.begin_write().unwrap();
    let t = match tx.open_tree("t") {
        Ok(t) => t,
        Err(_) => tx.create_tree("t", TreeKind::Table).unwrap(),
    };
    tx.insert(t, key, b"v").unwrap();
    if let Some(r) = root {
        tx.set_root_meta(r).unwrap();
    }
    tx.commit().unwrap();
}

fn keys<F: cairn_store::BlockFile>(db: &Db<F>) -> usize {
    let r = db.begin_read().unwrap();
    match r.open_tree("t") {
        Ok(t) => r.len(t).unwrap() as usize,
        Err(_) => 0,
    }
}

#[test]
fn root_bytes_are_kept_with_each_commit_and_rolled_back_with_it() {
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    assert_eq!(db.root_meta(), b"", "none until set");
    assert_eq!(db.root_meta_room(), 128, "a quarter of the page");
    put(&db, b"a", Some(b"one"));
    assert_eq!(db.root_meta(), b"one");
    // A commit that does not set them keeps them.
    put(&db, b"b", None);
    assert_eq!(db.root_meta(), b"one");
    // The transaction sees its own; a rollback drops them.
    let mut tx = db.begin_write().unwrap();
    tx.set_root_meta(b"two").unwrap();
    assert_eq!(tx.root_meta().unwrap(), b"two");
    tx.rollback();
    assert_eq!(db.root_meta(), b"one");
    // More than the room is refused, and changes nothing.
    let mut tx = db.begin_write().unwrap();
    let e = tx.set_root_meta(&[1; 129]).err().unwrap();
    assert_eq!(e.code(), "TOO_LARGE");
    assert_eq!(tx.root_meta().unwrap(), b"one");
    tx.set_root_meta(&[9; 128]).unwrap();
    tx.commit().unwrap();
    // A commit of more pages than the list beside a full room holds (26 at 512 bytes) flushes
    // its pages first; the root bytes are in its superblock all the same.
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..400u32 {
        tx.insert(t, format!("k{i:05}").as_bytes(), &[i as u8; 40])
            .unwrap();
    }
    tx.commit().unwrap();
    // Shorter bytes leave no trace of the longer ones.
    put(&db, b"c", Some(b"three"));
    let image = f.durable_bytes();
    db.close().unwrap();
    let db = Db::open(MemoryFile::from_bytes(image), opts()).unwrap();
    assert_eq!(db.root_meta(), b"three");
    assert_eq!(keys(&db), 403);
    assert!(db.check().unwrap().is_ok());
}

/// A crash that tears the newest commit falls back to the commit before, and to its root bytes.
#[test]
fn a_crash_falls_back_to_the_root_bytes_of_the_commit_it_opens() {
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    put(&db, b"a", Some(b"first"));
    put(&db, b"b", Some(b"second"));
    // The third commit's last call (its flush) fails: its writes may or may not survive.
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.insert(t, b"c", b"v").unwrap();
    tx.set_root_meta(b"third").unwrap();
    f.fail_at(u64::MAX, false);
    let before = f.ops();
    tx.commit().unwrap();
    let calls = f.ops() - before;
    drop(db);
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    put(&db, b"a", Some(b"first"));
    put(&db, b"b", Some(b"second"));
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.insert(t, b"c", b"v").unwrap();
    tx.set_root_meta(b"third").unwrap();
    f.fail_at(f.ops() + calls - 1, false);
    assert!(tx.commit().is_err());
    for mode in [
        CrashMode::DropUnflushed,
        CrashMode::KeepUnflushed,
        CrashMode::TearLast,
    ] {
        let db = Db::open(MemoryFile::from_bytes(f.crash_image(mode)), opts()).unwrap();
        let (n, root) = (keys(&db), db.root_meta());
        assert!(
            (n, root.as_slice()) == (2, b"second") || (n, root.as_slice()) == (3, b"third"),
            "{mode:?}: {n} keys with root bytes {root:?}"
        );
    }
}

/// A database in memory keeps its root bytes in memory, and the image it hands back holds
/// them in both superblocks.
#[test]
fn a_memory_database_hands_back_its_root_bytes() {
    let db = Db::create(MemoryFile::new(), opts()).unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.create_tree("t", TreeKind::Table).unwrap();
    tx.set_root_meta(b"kept").unwrap();
    tx.commit().unwrap();
    let image = db.into_file().unwrap().into_bytes();
    let db = Db::open(MemoryFile::from_bytes(image.clone()), opts()).unwrap();
    assert_eq!(db.root_meta(), b"kept");
    // Either slot alone has them.
    let mut b = image;
    b[..8].fill(0);
    let db = Db::open(MemoryFile::from_bytes(b), opts()).unwrap();
    assert_eq!(db.root_meta(), b"kept");
}

/// Rewrites both superblocks of `image` as version 2 wrote them: no root bytes, the commit
/// list at offset 64.
fn as_version_2(image: &mut [u8], ps: usize) {
    for slot in 0..2 {
        let b = &mut image[slot * ps..(slot + 1) * ps];
        assert_eq!(
            u32::from_le_bytes(b[64..68].try_into().unwrap()),
            0,
            "no root bytes"
        );
        let n = u32::from_le_bytes(b[60..64].try_into().unwrap()) as usize;
        b.copy_within(68..68 + 12 * n, 64);
        b[64 + 12 * n..].fill(0);
        b[16..20].copy_from_slice(&2u32.to_le_bytes());
        let sum = xxh64(&b[16..], slot as u64);
        b[8..16].copy_from_slice(&sum.to_le_bytes());
    }
}

#[test]
fn a_version_2_file_opens_and_takes_root_bytes() {
    // Two durable commits, so each slot names a commit (the older with a commit list).
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    for i in 0..30u32 {
        put(&db, format!("k{i:03}").as_bytes(), None);
    }
    let mut image = f.durable_bytes();
    drop(db);
    as_version_2(&mut image, 512);
    let f = FaultFile::from_bytes(image);
    let db = Db::open(f.clone(), opts()).unwrap();
    assert!(db.recovery_note().is_none(), "{:?}", db.recovery_note());
    assert_eq!(keys(&db), 30);
    assert_eq!(db.root_meta(), b"", "a version 2 file has none");
    assert!(db.check().unwrap().is_ok());
    // Its next commits write version 3 superblocks, root bytes and all.
    put(&db, b"new", Some(b"root"));
    let image = f.durable_bytes();
    let versions: Vec<u32> = (0..2)
        .map(|s| u32::from_le_bytes(image[s * 512 + 16..s * 512 + 20].try_into().unwrap()))
        .collect();
    assert!(versions.contains(&3), "{versions:?}");
    let db = Db::open(MemoryFile::from_bytes(image), opts()).unwrap();
    assert_eq!(keys(&db), 31);
    assert_eq!(db.root_meta(), b"root");
    assert!(db.check().unwrap().is_ok());
}
