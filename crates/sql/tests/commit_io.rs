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

#[test]
fn a_single_row_commit_writes_its_pages_in_one_call_and_flushes_once() {
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
        insert.execute(&mut db, &row(i)).expect("insert");
    }
    const N: usize = 2000;
    let (mut two, mut total) = (0, Calls::default());
    for i in 50..50 + N as i64 {
        *calls.borrow_mut() = Calls::default();
        insert.execute(&mut db, &row(i)).expect("insert");
        let c = calls.borrow();
        assert_eq!(c.flushes, 1, "commit {i} flushed {} times", c.flushes);
        // The leaf, its parent, the catalog's and the free tree's leaves, and the superblock:
        // never more calls than pages.
        assert!(c.writes <= 6, "commit {i} made {} write calls", c.writes);
        if c.writes == 2 {
            two += 1;
        }
        total.writes += c.writes;
        total.grows += c.grows;
    }
    // One call for the pages and one for the superblock, but for commits whose pages do not
    // fit one run (a split, or free pages in short runs only): 4.2 calls a commit before.
    assert!(
        two * 10 >= N * 8,
        "{two} of {N} commits made two write calls ({} calls in all)",
        total.writes
    );
    assert!(total.writes * 10 <= N * 25, "{} write calls", total.writes);
    // The file grows where a node splits, as it did before.
    assert!(
        total.grows * 20 <= N,
        "{} writes grew the file",
        total.grows
    );
    let n = (50 + N) as i64;
    match db.execute("SELECT count(*), sum(id) FROM t1", &[]) {
        Ok(Output::Rows { rows, .. }) => assert_eq!(
            rows,
            vec![vec![Value::Integer(n), Value::Integer(n * (n - 1) / 2)]]
        ),
        other => panic!("count: {other:?}"),
    }
}
