//! What the executor reads, counted at the storage boundary: a storage that wraps `Memory` and
//! counts, per tree, the point gets, the scans opened and the entries stepped over. The
//! golden scripts show the plans the planner makes; these tests show the executor keeps
//! their promises (a key equality is one get, a covering index never touches the table, an
//! ordered LIMIT stops early, a hash join reads its inner table once).

use cairn_sql::{Cursor, Rewrite, Storage, StorageCore, TreeId};
use cairn_sql::{Database, Memory, Result, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound;
use std::rc::Rc;

#[derive(Default, Debug, Clone, PartialEq)]
struct Reads {
    gets: usize,
    scans: usize,
    steps: usize,
    /// Entries a scan passed unread (`scan_each_past`).
    passed: u64,
}

type Counts = Rc<RefCell<HashMap<TreeId, Reads>>>;

struct Counting {
    inner: Memory,
    counts: Counts,
}

struct CountingCursor<'a> {
    inner: Box<dyn Cursor + 'a>,
    counts: Counts,
    tree: TreeId,
}

impl Cursor for CountingCursor<'_> {
    fn next(&mut self) -> Result<bool> {
        let more = self.inner.next()?;
        if more {
            self.counts.borrow_mut().entry(self.tree).or_default().steps += 1;
        }
        Ok(more)
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

impl StorageCore for Counting {
    fn begin(&mut self) -> Result<()> {
        self.inner.begin()
    }
    fn commit(&mut self) -> Result<()> {
        self.inner.commit()
    }
    fn rollback(&mut self) -> Result<()> {
        self.inner.rollback()
    }
    fn savepoint(&mut self) -> Result<u64> {
        self.inner.savepoint()
    }
    fn rollback_to(&mut self, sp: u64) -> Result<()> {
        self.inner.rollback_to(sp)
    }
    fn create_tree(&mut self, tree: TreeId) -> Result<()> {
        self.inner.create_tree(tree)
    }
    fn drop_tree(&mut self, tree: TreeId) -> Result<()> {
        self.inner.drop_tree(tree)
    }
    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.counts.borrow_mut().entry(tree).or_default().gets += 1;
        self.inner.get(tree, key)
    }
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        self.inner.put(tree, key, value)
    }
    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool> {
        self.inner.delete(tree, key)
    }
    fn scan<'a>(
        &'a self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        self.counts.borrow_mut().entry(tree).or_default().scans += 1;
        Ok(Box::new(CountingCursor {
            inner: self.inner.scan(tree, lower, upper, reverse)?,
            counts: self.counts.clone(),
            tree,
        }))
    }
    fn last_key(&self, tree: TreeId) -> Result<Option<Vec<u8>>> {
        self.inner.last_key(tree)
    }
}

impl Storage for Counting {
    fn scan_each_past(
        &self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        skip: &mut u64,
        f: &mut (dyn FnMut(&[u8], &[u8]) -> Result<bool> + '_),
    ) -> Result<bool> {
        let before = *skip;
        let counts = self.counts.clone();
        counts.borrow_mut().entry(tree).or_default().scans += 1;
        let go = self
            .inner
            .scan_each_past(tree, lower, upper, reverse, skip, &mut |k, v| {
                counts.borrow_mut().entry(tree).or_default().steps += 1;
                f(k, v)
            })?;
        counts.borrow_mut().entry(tree).or_default().passed += before - *skip;
        Ok(go)
    }
    fn release(&mut self, sp: u64) -> Result<()> {
        self.inner.release(sp)
    }
    fn update_each(
        &mut self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: &mut Rewrite<'_>,
    ) -> Result<u64> {
        // A walk over one key is a look-up of that key; any other, a scan.
        let one = matches!((lower, upper), (Bound::Included(a), Bound::Included(b)) if a == b);
        let mut counts = self.counts.borrow_mut();
        let e = counts.entry(tree).or_default();
        if one {
            e.gets += 1;
        } else {
            e.scans += 1;
        }
        drop(counts);
        self.inner.update_each(tree, lower, upper, f)
    }
}

struct Fixture {
    db: Database,
    counts: Counts,
}

impl Fixture {
    /// `t` has 1,000 rows (id 1..=1000, a = id % 50, b = id % 7, c text); `u` has 20 rows
    /// pointing into `t` by `t_id`, and an unindexed `k` (id % 5); `w` has a composite key.
    fn new() -> Fixture {
        let counts = Counts::default();
        let mut db = Database::open(Box::new(Counting {
            inner: Memory::new(),
            counts: counts.clone(),
        }))
        .expect("open");
        db.exec_script(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c TEXT);
             CREATE INDEX t_a ON t (a);
             CREATE TABLE u (id INTEGER PRIMARY KEY, t_id INTEGER, k INTEGER);
             CREATE TABLE w (x TEXT, y INTEGER, v TEXT, PRIMARY KEY (x, y));",
        )
        .expect("schema");
        db.execute("BEGIN", &[]).expect("begin");
        for i in 1..=1000i64 {
            db.execute(
                "INSERT INTO t VALUES (?, ?, ?, ?)",
                &[
                    Value::Integer(i),
                    Value::Integer(i % 50),
                    Value::Integer(i % 7),
                    Value::Text(format!("row {i}")),
                ],
            )
            .expect("insert t");
        }
        for i in 1..=20i64 {
            db.execute(
                "INSERT INTO u VALUES (?, ?, ?)",
                &[
                    Value::Integer(i),
                    Value::Integer(i * 10),
                    Value::Integer(i % 5),
                ],
            )
            .expect("insert u");
            db.execute(
                "INSERT INTO w VALUES (?, ?, 'v')",
                &[Value::Text(format!("x{}", i % 4)), Value::Integer(i)],
            )
            .expect("insert w");
        }
        db.execute("COMMIT", &[]).expect("commit");
        Fixture { db, counts }
    }

    fn tree(&self, table: &str) -> TreeId {
        self.db.catalog().tables[table].tree
    }

    fn index_tree(&self, table: &str, index: &str) -> TreeId {
        let t = &self.db.catalog().tables[table];
        t.indexes
            .iter()
            .find(|i| i.name == index)
            .expect("index")
            .tree
    }

    /// Runs a query and returns its rows and what it read from each tree.
    fn run(&mut self, sql: &str, params: &[Value]) -> (Vec<Vec<Value>>, HashMap<TreeId, Reads>) {
        self.counts.borrow_mut().clear();
        let rows = self.db.execute(sql, params).expect(sql).rows().to_vec();
        (rows, self.counts.borrow().clone())
    }
}

fn reads(m: &HashMap<TreeId, Reads>, t: TreeId) -> Reads {
    m.get(&t).cloned().unwrap_or_default()
}

#[test]
fn a_primary_key_equality_is_one_get_and_no_scan() {
    let mut f = Fixture::new();
    let t = f.tree("t");
    let (rows, r) = f.run("SELECT c FROM t WHERE id = ?", &[Value::Integer(500)]);
    assert_eq!(rows, vec![vec![Value::Text("row 500".into())]]);
    assert_eq!(
        reads(&r, t),
        Reads {
            gets: 1,
            scans: 0,
            steps: 0,
            passed: 0
        }
    );
    // IN: one get per distinct value, NULL and duplicates skipped, misses cost a get only.
    let (rows, r) = f.run("SELECT id FROM t WHERE id IN (7, 3, 7, NULL, 5000)", &[]);
    assert_eq!(rows.len(), 2);
    assert_eq!((reads(&r, t).gets, reads(&r, t).scans), (2 + 1, 0));
    // A composite key, every column given.
    let w = f.tree("w");
    let (rows, r) = f.run("SELECT v FROM w WHERE x = 'x1' AND y = 5", &[]);
    assert_eq!(rows.len(), 1);
    assert_eq!((reads(&r, w).gets, reads(&r, w).scans), (1, 0));
    // Only part of it: a range over the prefix.
    let (rows, r) = f.run("SELECT v FROM w WHERE x = 'x1'", &[]);
    assert_eq!(rows.len(), 5);
    assert_eq!((reads(&r, w).gets, reads(&r, w).scans), (0, 1));
    // UPDATE finds its row the same way.
    f.counts.borrow_mut().clear();
    f.db.execute("UPDATE t SET b = 99 WHERE id = 42", &[])
        .expect("update");
    assert_eq!(
        (
            reads(&f.counts.borrow(), t).gets,
            reads(&f.counts.borrow(), t).scans
        ),
        (1, 0)
    );
}

#[test]
fn a_covering_index_never_reads_the_table() {
    let mut f = Fixture::new();
    let (t, ix) = (f.tree("t"), f.index_tree("t", "t_a"));
    let (rows, r) = f.run("SELECT id, a FROM t WHERE a = 7", &[]);
    assert_eq!(rows.len(), 20);
    assert_eq!(reads(&r, t), Reads::default(), "{r:?}");
    assert_eq!(reads(&r, ix).steps, 20);
    // Needing c, each match is fetched from the table by its key.
    let (rows, r) = f.run("SELECT c FROM t WHERE a = 7", &[]);
    assert_eq!(rows.len(), 20);
    assert_eq!((reads(&r, t).gets, reads(&r, t).scans), (20, 0));
}

#[test]
fn an_order_served_by_an_index_stops_at_the_limit() {
    let mut f = Fixture::new();
    let (t, ix) = (f.tree("t"), f.index_tree("t", "t_a"));
    let (rows, r) = f.run("SELECT id, a FROM t ORDER BY a DESC LIMIT 3", &[]);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r[1] == Value::Integer(49)));
    assert!(reads(&r, ix).steps <= 4, "{r:?}");
    assert_eq!(reads(&r, t), Reads::default());
    // Ordered by an unindexed column, every row is read and sorted.
    let (rows, r) = f.run("SELECT id FROM t ORDER BY b, id LIMIT 3", &[]);
    assert_eq!(rows.len(), 3);
    assert_eq!(reads(&r, t).steps, 1000);
}

#[test]
fn joins_look_up_by_index_or_hash_the_inner_table_once() {
    let mut f = Fixture::new();
    let (t, u) = (f.tree("t"), f.tree("u"));
    // u drives; t is looked up by its key for each of the 20 rows.
    let (rows, r) = f.run("SELECT u.id, t.c FROM u JOIN t ON t.id = u.t_id", &[]);
    assert_eq!(rows.len(), 20);
    assert_eq!((reads(&r, t).gets, reads(&r, t).steps), (20, 0));
    // No index fits t.b = u.k: t is hashed, read once, not once per row of u.
    let (rows, r) = f.run("SELECT u.id, t.id FROM u JOIN t ON t.b = u.k", &[]);
    let expected: usize = (1..=20i64)
        .map(|i| (1..=1000i64).filter(|j| j % 7 == i % 5).count())
        .sum();
    assert_eq!(rows.len(), expected);
    assert_eq!((reads(&r, t).scans, reads(&r, t).steps), (1, 1000));
    assert_eq!(reads(&r, u).scans, 1);
}

#[test]
fn count_of_a_key_range_hands_no_entry_over() {
    let mut f = Fixture::new();
    let (t, t_a) = (f.tree("t"), f.index_tree("t", "t_a"));
    let (rows, r) = f.run("SELECT count(*) FROM t WHERE id > 100", &[]);
    assert_eq!(rows, vec![vec![Value::Integer(900)]]);
    let rt = reads(&r, t);
    assert_eq!((rt.steps, rt.passed, rt.gets), (0, 900, 0), "{rt:?}");
    let (rows, r) = f.run("SELECT count(*) FROM t WHERE a BETWEEN 10 AND 19", &[]);
    assert_eq!(rows, vec![vec![Value::Integer(200)]]);
    let ri = reads(&r, t_a);
    assert_eq!((ri.steps, ri.passed), (0, 200), "{ri:?}");
    assert_eq!(reads(&r, t), Reads::default(), "the table is not read");
    // Rows an OFFSET skips are passed too, the rest handed over.
    let (rows, r) = f.run("SELECT id FROM t ORDER BY id LIMIT 2 OFFSET 500", &[]);
    assert_eq!(
        rows,
        vec![vec![Value::Integer(501)], vec![Value::Integer(502)]]
    );
    let rt = reads(&r, t);
    assert_eq!((rt.passed, rt.steps), (500, 2), "{rt:?}");
}
