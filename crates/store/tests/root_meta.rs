//! The root bytes: a caller's bytes kept in the superblock with each commit. And files of the
//! pre-release formats 2 (no root bytes) and 3 (a commit list of one page an entry), refused
//! whole at open and left as they are.

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

/// Rewrites the superblocks in `slots` of `image` as version 2 or 3 wrote them: the commit list
/// one page an entry, at 64 in version 2 (which has no root bytes) and at 68 in version 3.
fn as_version(image: &mut [u8], ps: usize, version: u32, slots: &[usize]) {
    for &slot in slots {
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

/// A file of 30 durable commits, each slot naming one (with a commit list of several pages),
/// with root bytes in both when `root`.
fn sample(root: bool) -> Vec<u8> {
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    for i in 0..30u32 {
        let r = format!("root {i}");
        put(
            &db,
            format!("k{i:03}").as_bytes(),
            root.then_some(r.as_bytes()),
        );
    }
    let image = f.durable_bytes();
    drop(db);
    let listed: Vec<usize> = (0..2).map(|s| listed_pages(&image, s, 512).len()).collect();
    assert!(listed.iter().all(|&n| n > 1), "{listed:?}");
    image
}

/// Formats 2 and 3 were never released: a file in either (both slots, or one beside a version
/// 4 slot) is refused at open with `UNSUPPORTED_VERSION`, not read, and not written to.
#[test]
fn version_2_and_3_files_are_refused_and_left_as_they_are() {
    for version in [2u32, 3] {
        for slots in [&[0, 1][..], &[0], &[1]] {
            let mut image = sample(version == 3);
            as_version(&mut image, 512, version, slots);
            let mut expect = vec![4, 4];
            for &s in slots {
                expect[s] = version;
            }
            assert_eq!(versions(&image, 512), expect);
            let f = FaultFile::from_bytes(image.clone());
            let e = Db::open(f.clone(), opts()).err().unwrap();
            assert_eq!(e.code(), "UNSUPPORTED_VERSION", "{e}");
            let m = e.to_string();
            assert!(
                m.contains(&format!(
                    "version {version}, written by an earlier cairn: an older, pre-release \
                     format this build does not read"
                )),
                "{m}"
            );
            assert_eq!(f.ops(), 0, "nothing written or flushed");
            assert_eq!(f.written_bytes(), image, "the file is as it was");
            assert_eq!(f.durable_bytes(), image);
        }
    }
}
