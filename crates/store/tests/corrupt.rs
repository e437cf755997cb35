//! Damaged and foreign files: open refuses them with a reason, or `check()` reports the damage
//! naming the page. Never a panic, never a silent repair.

use cairn_store::{Db, MemoryFile, Options, TreeKind};

fn opts() -> Options {
    Options {
        page_size: 512,
        ..Options::default()
    }
}

/// A small database with two trees, an overflow value and some free pages, committed twice.
fn sample() -> Vec<u8> {
    let db = Db::create(MemoryFile::new(), opts()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    let u = tx
        .create_tree("u", TreeKind::Index { table: "t".into() })
        .unwrap();
    for i in 0..200u32 {
        tx.insert(t, format!("row{i:05}").as_bytes(), &[i as u8; 30])
            .unwrap();
        tx.insert(u, format!("idx{i:05}").as_bytes(), b"").unwrap();
    }
    tx.insert(t, b"big", &[7u8; 3000]).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..50u32 {
        tx.remove(t, format!("row{i:05}").as_bytes()).unwrap();
    }
    tx.commit().unwrap();
    assert!(db.check().unwrap().is_ok());
    db.into_file().unwrap().into_bytes()
}

#[test]
fn foreign_files_are_refused() {
    let e = Db::open(MemoryFile::new(), opts()).err().unwrap();
    assert_eq!(e.code(), "NOT_A_DATABASE");
    let e = Db::open(
        MemoryFile::from_bytes(b"SQLite format 3\0".repeat(100)),
        opts(),
    )
    .err()
    .unwrap();
    assert_eq!(e.code(), "NOT_A_DATABASE", "{e}");
    let e = Db::open(MemoryFile::from_bytes(vec![0u8; 8192]), opts())
        .err()
        .unwrap();
    assert_eq!(e.code(), "NOT_A_DATABASE", "{e}");
}

#[test]
fn a_newer_format_version_is_refused() {
    let mut b = sample();
    for slot in 0..2 {
        b[slot * 512 + 16] = 2;
    }
    let e = Db::open(MemoryFile::from_bytes(b), opts()).err().unwrap();
    assert_eq!(e.code(), "UNSUPPORTED_VERSION");
    assert!(e.to_string().contains("version 2"), "{e}");
}

#[test]
fn every_flipped_byte_in_a_used_page_is_reported_with_its_page() {
    let good = sample();
    let db = Db::open(MemoryFile::from_bytes(good.clone()), opts()).unwrap();
    let free = db.free_pages().unwrap();
    let pages = db.page_count();
    drop(db);
    let mut tested = 0;
    let mut fell_back = 0;
    for p in 2..pages {
        if free.contains(&p) {
            continue;
        }
        for off in [0usize, 9, 16, 18, 20, 24, 33, 200, 511] {
            let mut b = good.clone();
            b[p as usize * 512 + off] ^= 0x40;
            let needle = format!("page {p}");
            match Db::open(MemoryFile::from_bytes(b), opts()) {
                Err(e) => {
                    assert_eq!(e.code(), "CORRUPT");
                    assert!(e.to_string().contains(&needle), "page {p} +{off}: {e}");
                }
                // A page the newest commit wrote cannot be told from one a crash tore: open
                // falls back to the previous commit, and says why.
                Ok(db) if db.recovery_note().is_some() => {
                    let note = db.recovery_note().unwrap();
                    assert!(note.contains(&needle), "page {p} +{off}: {note}");
                    assert!(db.check().unwrap().is_ok());
                    fell_back += 1;
                }
                Ok(db) => {
                    let rep = db.check().unwrap();
                    assert!(
                        rep.problems.iter().any(|x| x.page == Some(p)),
                        "page {p} +{off}: check found {rep}"
                    );
                }
            }
            tested += 1;
        }
    }
    assert!(tested > 100, "only {tested} flips");
    assert!(
        fell_back < tested / 2,
        "{fell_back} of {tested} flips fell back"
    );
}

#[test]
fn a_damaged_newest_superblock_falls_back_and_says_so() {
    let good = sample();
    let db = Db::open(MemoryFile::from_bytes(good.clone()), opts()).unwrap();
    let newest = db.txn();
    drop(db);
    // Find the slot holding the newest superblock.
    let slot = (0..2)
        .find(|s| {
            u64::from_le_bytes(good[s * 512 + 24..s * 512 + 32].try_into().unwrap()) == newest
        })
        .unwrap();
    let mut b = good.clone();
    b[slot * 512 + 40] ^= 1;
    let db = Db::open(MemoryFile::from_bytes(b.clone()), opts()).unwrap();
    assert_eq!(db.txn(), newest - 1);
    let note = db.recovery_note().unwrap();
    assert!(note.contains(&format!("page {slot}")), "{note}");
    assert!(db.check().unwrap().is_ok());
    // Both damaged: refused, naming both.
    b[(1 - slot) * 512 + 40] ^= 1;
    let e = Db::open(MemoryFile::from_bytes(b), opts()).err().unwrap();
    assert_eq!(e.code(), "CORRUPT");
    assert!(
        e.to_string().contains("page 0") && e.to_string().contains("page 1"),
        "{e}"
    );
}

#[test]
fn a_truncated_file_is_reported_not_panicked_on() {
    let good = sample();
    for cut in [600usize, 1024, 2048, good.len() / 2, good.len() - 512] {
        let b = good[..cut].to_vec();
        match Db::open(MemoryFile::from_bytes(b), opts()) {
            Err(e) => assert!(["CORRUPT", "NOT_A_DATABASE"].contains(&e.code()), "{e}"),
            Ok(db) => assert!(
                db.recovery_note().is_some() || !db.check().unwrap().is_ok(),
                "cut at {cut}"
            ),
        }
    }
}
