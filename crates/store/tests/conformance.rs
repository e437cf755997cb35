//! The block-file conformance suite over every native implementation.

use cairn_store::conformance::CASES;
use cairn_store::fault::FaultFile;
use cairn_store::{BlockFile, MemoryFile, StdFile};

fn run_all(kind: &str, mut fresh: impl FnMut(&str) -> Box<dyn BlockFile>) {
    let mut failures = Vec::new();
    for (name, case) in CASES {
        let mut f = fresh(name);
        if let Err(why) = case(f.as_mut()) {
            failures.push(format!("{kind}/{name}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "conformance failures:\n{}",
        failures.join("\n")
    );
}

#[test]
fn memory_file_conforms() {
    run_all("memory", |_| Box::new(MemoryFile::new()));
}

#[test]
fn fault_file_conforms() {
    run_all("fault", |_| Box::new(FaultFile::new()));
}

#[test]
fn std_file_conforms() {
    let dir = tempdir();
    run_all("std", |name| {
        Box::new(StdFile::open(dir.join(format!("{name}.db")), true).expect("create temp file"))
    });
}

#[test]
fn std_file_reopen_reads_flushed_bytes() {
    let dir = tempdir();
    let path = dir.join("reopen.db");
    let data = cairn_store::conformance::pattern(5, 3 * 4096);
    {
        let mut f = StdFile::open(&path, true).expect("create");
        f.write(0, &data).expect("write");
        f.flush().expect("flush");
        f.close().expect("close");
    }
    let f = StdFile::open(&path, false).expect("reopen");
    let mut buf = vec![0; data.len()];
    f.read(0, &mut buf).expect("read");
    assert_eq!(buf, data);
}

#[test]
fn std_file_missing_without_create_is_not_found() {
    let dir = tempdir();
    let err = StdFile::open(dir.join("missing.db"), false).expect_err("must not exist");
    assert_eq!(err.code(), "NOT_FOUND", "{err}");
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "cairn-store-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("make temp dir");
    dir
}
