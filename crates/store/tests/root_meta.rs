//! The root bytes (format version 3 on): a caller's bytes kept in the superblock with each
//! commit; version 2 files, which have none, and version 3 files, whose commit list names one
//! page an entry, opened and carried on.

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

/// The pages a version 4 superblock's commit list names, one by one, with the checksum each
/// page holds (what a version 2 or 3 list names them with).
fn listed_pages(image: &[u8], slot: usize, ps: usize) -> Vec<(u32, u64)> {
    let b = &image[slot * ps..(slot + 1) * ps];
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let mut out = Vec::new();
    for i in 0..u32_at(60) as usize {
        let (first, count) = (u32_at(68 + 16 * i), u32_at(68 + 16 * i + 4));
        for id in first..first + count {
            let at = id as usize * ps;
            out.push((
                id,
                u64::from_le_bytes(image[at..at + 8].try_into().unwrap()),
            ));
        }
    }
    out
}

/// Rewrites both superblocks of `image` as version 2 wrote them: no root bytes, the commit
/// list at offset 64, one page an entry.
fn as_version_2(image: &mut [u8], ps: usize) {
    as_version(image, ps, 2);
}

/// Rewrites both superblocks of `image` as version 3 wrote them: the root bytes kept, the
/// commit list one page an entry.
fn as_version_3(image: &mut [u8], ps: usize) {
    as_version(image, ps, 3);
}

/// Version 2 or 3's superblocks: the list of one page an entry at `at` (64 in version 2, which
/// has no root bytes; 68 in version 3).
fn as_version(image: &mut [u8], ps: usize, version: u32) {
    for slot in 0..2 {
        let pages = listed_pages(image, slot, ps);
        let b = &mut image[slot * ps..(slot + 1) * ps];
        let r = u32::from_le_bytes(b[64..68].try_into().unwrap()) as usize;
        let at = if version == 2 {
            assert_eq!(r, 0, "no root bytes");
            64
        } else {
            68
        };
        assert!(at + 12 * pages.len() + r <= ps, "the list fits");
        b[60..ps - r].fill(0);
        b[60..64].copy_from_slice(&(pages.len() as u32).to_le_bytes());
        if version == 3 {
            b[64..68].copy_from_slice(&(r as u32).to_le_bytes());
        }
        for (i, (id, sum)) in pages.iter().enumerate() {
            let e = at + 12 * i;
            b[e..e + 4].copy_from_slice(&id.to_le_bytes());
            b[e + 4..e + 12].copy_from_slice(&sum.to_le_bytes());
        }
        b[16..20].copy_from_slice(&version.to_le_bytes());
        let sum = xxh64(&b[16..], slot as u64);
        b[8..16].copy_from_slice(&sum.to_le_bytes());
    }
}

fn versions(image: &[u8], ps: usize) -> Vec<u32> {
    (0..2)
        .map(|s| u32::from_le_bytes(image[s * ps + 16..s * ps + 20].try_into().unwrap()))
        .collect()
}

#[test]
fn a_version_3_file_opens_with_its_root_bytes_and_goes_on_in_version_4() {
    // Durable commits, each slot naming one (with a commit list) and root bytes in both.
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    for i in 0..30u32 {
        put(
            &db,
            format!("k{i:03}").as_bytes(),
            Some(format!("root {i}").as_bytes()),
        );
    }
    let mut image = f.durable_bytes();
    drop(db);
    let listed: Vec<usize> = (0..2).map(|s| listed_pages(&image, s, 512).len()).collect();
    assert!(listed.iter().all(|&n| n > 1), "{listed:?}");
    as_version_3(&mut image, 512);
    assert_eq!(versions(&image, 512), [3, 3]);
    let f = FaultFile::from_bytes(image.clone());
    let db = Db::open(f.clone(), opts()).unwrap();
    assert!(db.recovery_note().is_none(), "{:?}", db.recovery_note());
    assert_eq!(keys(&db), 30);
    assert_eq!(db.root_meta(), b"root 29");
    assert!(db.check().unwrap().is_ok());
    // A version 3 list is checked page by page: a page of the newest commit damaged, open
    // falls back to the commit before, with a note.
    let newest = (0..2)
        .max_by_key(|&s| u64::from_le_bytes(image[s * 512 + 24..s * 512 + 32].try_into().unwrap()))
        .unwrap();
    let b = &image[newest * 512..];
    let id = u32::from_le_bytes(b[68..72].try_into().unwrap()) as usize;
    let mut damaged = image.clone();
    damaged[id * 512 + 100] ^= 1;
    let older = Db::open(MemoryFile::from_bytes(damaged), opts()).unwrap();
    assert!(older
        .recovery_note()
        .is_some_and(|n| n.contains(&format!("page {id}"))));
    assert_eq!(keys(&older), 29);
    assert_eq!(older.root_meta(), b"root 28");
    // Its next commit writes version 4, and the file opens as that.
    put(&db, b"new", None);
    let db = reopened_in_version_4(&f);
    assert_eq!(keys(&db), 31);
    assert_eq!(db.root_meta(), b"root 29");
}

/// The file as `f` holds it durably, which a commit of this build wrote: one slot is version 4,
/// and it opens as that, whole.
fn reopened_in_version_4(f: &FaultFile) -> Db<MemoryFile> {
    let image = f.durable_bytes();
    assert!(
        versions(&image, 512).contains(&4),
        "{:?}",
        versions(&image, 512)
    );
    let db = Db::open(MemoryFile::from_bytes(image), opts()).unwrap();
    assert!(db.recovery_note().is_none(), "{:?}", db.recovery_note());
    assert!(db.check().unwrap().is_ok());
    db
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
    // Its next commits write version 4 superblocks, root bytes and all.
    put(&db, b"new", Some(b"root"));
    let db = reopened_in_version_4(&f);
    assert_eq!(keys(&db), 31);
    assert_eq!(db.root_meta(), b"root");
}
