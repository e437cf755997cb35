//! The superblock's commit list names runs of adjacent pages (format version 4): a large
//! commit is named by a few runs and flushes once, a run with one stale page in it is caught at
//! open, and a commit with more to name than the list holds still flushes twice.

use cairn_store::fault::FaultFile;
use cairn_store::{xxh64, Db, Durability, MemoryFile, Options, TreeKind};

const PS: usize = 4096;

fn opts() -> Options {
    Options {
        page_size: PS,
        durability: Durability::Full,
        ..Options::default()
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// The newest superblock's slot and its commit list: (first page, count, checksum) runs.
fn newest_list(image: &[u8]) -> (usize, Vec<(u32, u32, u64)>) {
    let slot = (0..2).max_by_key(|&s| u64_at(image, s * PS + 24)).unwrap();
    let b = &image[slot * PS..(slot + 1) * PS];
    assert_eq!(u32_at(b, 16), 4, "format version");
    let runs = (0..u32_at(b, 60) as usize)
        .map(|i| {
            let e = 68 + 16 * i;
            (u32_at(b, e), u32_at(b, e + 4), u64_at(b, e + 8))
        })
        .collect();
    (slot, runs)
}

fn rows<F: cairn_store::BlockFile>(db: &Db<F>) -> u64 {
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    r.len(t).unwrap()
}

/// A database with one committed row, then one commit of `n` rows of 200 bytes.
fn big_commit(n: u32) -> (FaultFile, Vec<u8>, u64) {
    let f = FaultFile::new();
    let db = Db::create(f.clone(), opts()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.create_tree("t", TreeKind::Table).unwrap();
    tx.insert(t, b"first", b"1").unwrap();
    tx.commit().unwrap();
    let before = f.flushes();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..n {
        tx.insert(t, format!("key{i:08}").as_bytes(), &[i as u8; 200])
            .unwrap();
    }
    tx.commit().unwrap();
    let flushes = f.flushes() - before;
    let image = f.durable_bytes();
    (f, image, flushes)
}

#[test]
fn a_large_commit_of_adjacent_pages_is_named_in_a_few_runs_and_flushes_once() {
    // About 2 MB of rows: more pages than a list of one page an entry held (335).
    let (_f, image, flushes) = big_commit(9_000);
    assert_eq!(flushes, 1, "one flush for the commit");
    let (_, runs) = newest_list(&image);
    let pages: u32 = runs.iter().map(|r| r.1).sum();
    assert!(pages > 335, "{pages} pages named");
    assert!(runs.len() < 20, "{} runs", runs.len());
    // Each run's checksum is folded from its pages' own as docs/file-format.md says.
    for &(first, count, sum) in &runs {
        let folded = (first + 1..first + count)
            .fold(u64_at(&image, first as usize * PS), |h, id| {
                (h ^ u64_at(&image, id as usize * PS)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            });
        assert_eq!(sum, folded, "run {first}+{count}");
    }
    let db = Db::open(MemoryFile::from_bytes(image), opts()).unwrap();
    assert!(db.recovery_note().is_none(), "{:?}", db.recovery_note());
    assert_eq!(rows(&db), 9_001);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn a_run_with_one_page_of_an_older_write_falls_back_to_the_commit_before() {
    let (_f, image, _) = big_commit(9_000);
    let (_, runs) = newest_list(&image);
    let &(first, count, _) = runs.iter().max_by_key(|r| r.1).unwrap();
    assert!(count > 2);
    // A page in the middle of the run holding other bytes under a checksum of its own that
    // is right for them: what an older write of that page that reached the disk looks like.
    let id = first + count / 2;
    let at = id as usize * PS;
    let mut stale = image.clone();
    stale[at + 200] ^= 0x55;
    let sum = xxh64(&stale[at + 8..at + PS], u64::from(id));
    stale[at..at + 8].copy_from_slice(&sum.to_le_bytes());
    let db = Db::open(MemoryFile::from_bytes(stale), opts()).unwrap();
    let note = db.recovery_note().expect("fell back");
    assert!(
        note.contains(&format!("pages {first}..{}", first + count)),
        "{note}"
    );
    assert_eq!(rows(&db), 1, "the commit before");
    assert!(db.check().unwrap().is_ok());
    // A page of the run that is not whole (its own checksum wrong) is named itself.
    let mut torn = image.clone();
    torn[at + 200] ^= 0x55;
    let db = Db::open(MemoryFile::from_bytes(torn), opts()).unwrap();
    let note = db.recovery_note().expect("fell back");
    assert!(note.contains(&format!("page {id} ")), "{note}");
    assert_eq!(rows(&db), 1);
}

#[test]
fn a_commit_of_more_than_the_list_may_name_flushes_its_pages_first() {
    // About 5 MB: more than the 4 MiB of pages a list names, however few runs they make.
    let (f, image, flushes) = big_commit(24_000);
    assert_eq!(flushes, 2, "pages, then the superblock naming none");
    let (_, runs) = newest_list(&image);
    assert!(runs.is_empty(), "{} runs", runs.len());
    let db = Db::open(MemoryFile::from_bytes(f.durable_bytes()), opts()).unwrap();
    assert!(db.recovery_note().is_none(), "{:?}", db.recovery_note());
    assert_eq!(rows(&db), 24_001);
}
