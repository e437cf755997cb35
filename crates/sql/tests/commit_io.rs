//! The file calls a durable single-row commit makes: on OPFS each `write` call costs more than
//! its bytes, so a commit's pages are taken as one run of adjacent pages and written in one
//! call, beside the superblock's, then flushed once (`take_page` in `cairn-store`'s writer).
//! Counted over a file that logs its calls, not timed.

use std::cell::RefCell;
use std::rc::Rc;

use cairn_sql::Paged;
use cairn_sql::{Database, Output, Value};
use cairn_store::{BlockFile, MemoryFile, Options, Result};

/// Calls since the last `take`: writes, flushes, writes past the end of the file.
#[derive(Default)]
struct Calls {
    writes: usize,
    flushes: usize,
    grows: usize,
}

/// A durable file (unlike `MemoryFile`, which the store treats as volatile) that counts calls.
struct Counting {
    inner: MemoryFile,
    calls: Rc<RefCell<Calls>>,
}

impl BlockFile for Counting {
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read(offset, buf)
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let mut c = self.calls.borrow_mut();
        c.writes += 1;
        if offset + data.len() as u64 > self.inner.len()? {
            c.grows += 1;
        }
        self.inner.write(offset, data)
    }
    fn set_len(&mut self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn flush(&mut self) -> Result<()> {
        self.calls.borrow_mut().flushes += 1;
        self.inner.flush()
    }
    fn close(&mut self) -> Result<()> {
        self.inner.close()
    }
}

/// The rows of the browser benchmark's `insert-autocommit`, in its shape.
fn row(i: i64) -> Vec<Value> {
    vec![
        Value::Integer(i),
        Value::Integer(i * 7919 % 100_000),
        Value::Integer(i * 31 % 1000),
        Value::Text(format!("row {i} of the autocommit inserts, some words")),
        Value::Integer(i % 100),
    ]
}

/// Runs `N` single-row autocommits after 50 (keys from `first`, then from 0 when the 50 were
/// put far above them, so that the inserts land inside the tree and split nodes in half);
/// returns the write calls of each commit, checking each flushed once, and the file's growth.
fn autocommits(first: i64) -> (Vec<usize>, usize) {
    let calls = Rc::new(RefCell::new(Calls::default()));
    let file = Counting {
        inner: MemoryFile::new(),
        calls: calls.clone(),
    };
    let store = Paged::open(file, Options::default()).expect("open store");
    let mut db = Database::open(Box::new(store)).expect("open database");
    db.exec_script(
        "CREATE TABLE t1(id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c TEXT, g INTEGER)",
    )
    .expect("create");
    let insert = db
        .prepare("INSERT INTO t1 VALUES (?,?,?,?,?)")
        .expect("prepare");
    for i in 0..50 {
        insert.execute(&mut db, &row(first + i)).expect("insert");
    }
    let start = if first == 0 { 50 } else { 0 };
    let (mut writes, mut grows) = (Vec::new(), 0);
    for i in start..start + N as i64 {
        *calls.borrow_mut() = Calls::default();
        insert.execute(&mut db, &row(i)).expect("insert");
        let c = calls.borrow();
        assert_eq!(c.flushes, 1, "commit {i} flushed {} times", c.flushes);
        // The leaf, its parents, the catalog's and the free tree's leaves, and the superblock:
        // never more calls than pages.
        assert!(c.writes <= 6, "commit {i} made {} write calls", c.writes);
        writes.push(c.writes);
        grows += c.grows;
    }
    let n = (50 + N) as i64;
    match db.execute("SELECT count(*) FROM t1", &[]) {
        Ok(Output::Rows { rows, .. }) => assert_eq!(rows, vec![vec![Value::Integer(n)]]),
        other => panic!("count: {other:?}"),
    }
    (writes, grows)
}

const N: usize = 2000;

#[test]
fn a_single_row_commit_writes_its_pages_in_one_call_and_flushes_once() {
    // Keys in order, at the tree's right edge (what an autocommitted insert of a new row
    // does): one call for the pages and one for the superblock, but for commits whose pages
    // do not fit one run (a split, or free pages in short runs only). Before the pages were
    // taken as a run: 8,746 calls (4.4 a commit), no commit in two.
    let (writes, grows) = autocommits(0);
    let two = writes.iter().filter(|&&w| w == 2).count();
    let all: usize = writes.iter().sum();
    assert!(two * 10 >= N * 9, "{two} of {N} commits made two calls");
    assert!(all * 10 <= N * 22, "{all} write calls");
    // The file grows where a node splits (35 writes grew it before).
    assert!(grows * 20 <= N, "{grows} writes grew the file");
}

#[test]
fn inserts_that_split_nodes_inside_the_tree_still_write_fewer_calls() {
    // Keys below the first 50, so that each split leaves a half-full node behind and the
    // pages a commit rewrites change: 8,263 calls before (4.1 a commit); runs still save a
    // quarter of them.
    let (writes, _) = autocommits(100_000);
    let all: usize = writes.iter().sum();
    assert!(all * 10 <= N * 33, "{all} write calls");
}
