//! Damaged and foreign files: open refuses them with a reason, or `check()` reports the damage
//! naming the page. Never a panic, never a silent repair.

use cairn_store::fault::FaultFile;
use cairn_store::{Db, MemoryFile, Options, TreeKind};

fn opts() -> Options {
    Options {
        page_size: 512,
        ..Options::default()
    }
}

/// A small database with two trees, an overflow value and some free pages, committed twice. On
/// a durable file, so the older slot holds the first commit to fall back to (a memory file's
/// image holds the last state in both slots).
fn sample() -> Vec<u8> {
    let db = Db::create(FaultFile::new(), opts()).unwrap();
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
    db.into_file().unwrap().durable_bytes()
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
        b[slot * 512 + 16] = 5;
    }
    let e = Db::open(MemoryFile::from_bytes(b), opts()).err().unwrap();
    assert_eq!(e.code(), "UNSUPPORTED_VERSION");
    assert!(e.to_string().contains("version 5, newer"), "{e}");
}

/// Version 1 keyed numbers in 12 bytes and had 6-byte leaf cell headers: the file is refused
/// whole, not misread.
#[test]
fn an_older_format_version_is_refused() {
    let mut b = sample();
    for slot in 0..2 {
        b[slot * 512 + 16] = 1;
    }
    let e = Db::open(MemoryFile::from_bytes(b), opts()).err().unwrap();
    assert_eq!(e.code(), "UNSUPPORTED_VERSION");
    assert!(
        e.to_string()
            .contains("version 1, written by an earlier cairn: an older, pre-release format"),
        "{e}"
    );
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

/// Rewrites page `p` of `b` with `edit` applied and a fresh, valid checksum, so only `check`'s
/// structural rules can catch the change.
fn edit_page(b: &mut [u8], p: u32, edit: impl FnOnce(&mut [u8])) {
    let ps = 512;
    let page = &mut b[p as usize * ps..(p as usize + 1) * ps];
    edit(page);
    let sum = cairn_store::xxh64(&page[8..], p as u64);
    page[..8].copy_from_slice(&sum.to_le_bytes());
}

fn used_pages_of_kind(b: &[u8], kind: u8) -> Vec<u32> {
    let db = Db::open(MemoryFile::from_bytes(b.to_vec()), opts()).unwrap();
    let free = db.free_pages().unwrap();
    (2..db.page_count())
        .filter(|p| !free.contains(p) && b[*p as usize * 512 + 16] == kind)
        .collect()
}

#[test]
fn check_finds_structural_damage_behind_valid_checksums() {
    let good = sample();
    // Keys out of order in a leaf: swap the first two slot offsets.
    let leaf = used_pages_of_kind(&good, 1)[3];
    let mut b = good.clone();
    edit_page(&mut b, leaf, |pg| {
        let (a, c) = ([pg[32], pg[33]], [pg[34], pg[35]]);
        pg[32..34].copy_from_slice(&c);
        pg[34..36].copy_from_slice(&a);
    });
    let rep = Db::open(MemoryFile::from_bytes(b), opts())
        .unwrap()
        .check()
        .unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.page == Some(leaf) && p.message.contains("out of order")),
        "{rep}"
    );

    // A branch pointing at a free page: that page is both used and free, and the page it used to
    // point at is lost.
    let db = Db::open(MemoryFile::from_bytes(good.clone()), opts()).unwrap();
    let free = db.free_pages().unwrap()[0];
    drop(db);
    let branch = used_pages_of_kind(&good, 2)[0];
    let mut b = good.clone();
    let mut old = 0;
    edit_page(&mut b, branch, |pg| {
        old = u32::from_le_bytes(pg[24..28].try_into().unwrap());
        pg[24..28].copy_from_slice(&free.to_le_bytes());
    });
    let rep = Db::open(MemoryFile::from_bytes(b), opts())
        .unwrap()
        .check()
        .unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.page == Some(free) && p.message.contains("both used")),
        "{rep}"
    );
    assert!(
        rep.problems
            .iter()
            .any(|p| p.page == Some(old) && p.message.contains("lost")),
        "{rep}"
    );
}

#[test]
fn check_finds_a_page_count_that_names_pages_nothing_uses() {
    let mut b = sample();
    let db = Db::open(MemoryFile::from_bytes(b.clone()), opts()).unwrap();
    let (txn, count) = (db.txn(), db.page_count());
    drop(db);
    let slot = (0..2)
        .find(|s| u64::from_le_bytes(b[s * 512 + 24..s * 512 + 32].try_into().unwrap()) == txn)
        .unwrap();
    let sb = &mut b[slot * 512..(slot + 1) * 512];
    sb[32..36].copy_from_slice(&(count + 1).to_le_bytes());
    let sum = cairn_store::xxh64(&sb[16..], slot as u64);
    sb[8..16].copy_from_slice(&sum.to_le_bytes());
    let rep = Db::open(MemoryFile::from_bytes(b), opts())
        .unwrap()
        .check()
        .unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.page == Some(count) && p.message.contains("lost")),
        "{rep}"
    );
}

#[test]
fn a_branch_that_points_at_itself_is_an_error_not_a_hang() {
    let good = sample();
    let branch = used_pages_of_kind(&good, 2)[0];
    let mut b = good.clone();
    edit_page(&mut b, branch, |pg| {
        // Every child pointer (the slots' cells and the rightmost) back to the branch itself.
        let n = u16::from_le_bytes([pg[18], pg[19]]) as usize;
        for i in 0..n {
            let off = u16::from_le_bytes([pg[32 + 2 * i], pg[33 + 2 * i]]) as usize;
            pg[off + 2..off + 6].copy_from_slice(&branch.to_le_bytes());
        }
        pg[24..28].copy_from_slice(&branch.to_le_bytes());
    });
    let db = Db::open(MemoryFile::from_bytes(b), opts()).unwrap();
    let rep = db.check().unwrap();
    assert!(rep.problems.iter().any(|p| p.page == Some(branch)), "{rep}");
    let r = db.begin_read().unwrap();
    for name in ["t", "u"] {
        let t = r.open_tree(name).unwrap();
        let scan = r
            .range(
                t,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )
            .and_then(|mut x| x.collect_all());
        let get = r.get(t, b"row00100");
        // The damaged tree errs; the other one reads normally.
        if let Err(e) = scan {
            assert_eq!(e.code(), "CORRUPT");
            assert!(get.is_err() || get.unwrap().is_none());
        }
    }
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    let u = tx.open_tree("u").unwrap();
    let r1 = tx.insert(t, b"row00100", b"x");
    let r2 = tx.insert(u, b"idx00100", b"x");
    assert!(
        r1.is_err() || r2.is_err(),
        "a write through the cycle must fail"
    );
}
