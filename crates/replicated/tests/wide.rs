//! Wide records (docs/sync.md 10b, "Wide records"): a record of 10, 1,000 and 10,000 fields,
//! written whole, read whole, rewritten whole, and updated one field at a time, over a file
//! that counts the bytes written to it. Two layouts: the record as one row with a `MAP`
//! column, and as one row per field (`(node, field)` keyed). Prints the time and the bytes
//! written for each (`cargo test --release -p cairn-replicated --test wide -- --nocapture`);
//! asserts only what each write records and that the two replicas agree, never a time.

use cairn_replicated::{MemoryKeys, Sync};
use cairn_sql::{Database, Output, Paged, Value};
use cairn_store::{BlockFile, MemoryFile, Options};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

fn now() -> u64 {
    1_800_000_000_000
}

/// A file that counts the bytes written to it.
struct Counting {
    file: MemoryFile,
    written: Rc<Cell<u64>>,
}

impl BlockFile for Counting {
    fn len(&self) -> cairn_store::Result<u64> {
        self.file.len()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> cairn_store::Result<()> {
        self.file.read(offset, buf)
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> cairn_store::Result<()> {
        self.written.set(self.written.get() + data.len() as u64);
        self.file.write(offset, data)
    }
    fn set_len(&mut self, len: u64) -> cairn_store::Result<()> {
        self.file.set_len(len)
    }
    fn flush(&mut self) -> cairn_store::Result<()> {
        self.file.flush()
    }
    fn close(&mut self) -> cairn_store::Result<()> {
        self.file.close()
    }
}

struct Node {
    db: Database,
    sync: Sync,
    written: Rc<Cell<u64>>,
}

impl Node {
    fn new() -> Node {
        let written = Rc::new(Cell::new(0));
        let file = Counting {
            file: MemoryFile::new(),
            written: written.clone(),
        };
        let store = Paged::open(file, Options::default()).unwrap();
        let mut db = Database::open(Box::new(store)).unwrap();
        let sync = Sync::attach(&mut db, now, Box::new(MemoryKeys::new())).unwrap();
        Node { db, sync, written }
    }
    fn exec(&mut self, sql: &str) {
        self.db
            .exec_script(sql)
            .unwrap_or_else(|e| panic!("{}: {e}", &sql[..sql.len().min(200)]));
    }
    fn rows(&mut self, sql: &str) -> Vec<Vec<Value>> {
        match self.db.execute(sql, &[]).unwrap() {
            Output::Rows { rows, .. } => rows,
            o => panic!("not rows: {o:?}"),
        }
    }
    /// Runs `f`, and returns its time (ms) and the bytes it wrote to the file.
    fn measure(&mut self, f: impl FnOnce(&mut Node)) -> (f64, u64) {
        let w0 = self.written.get();
        let t0 = Instant::now();
        f(self);
        (t0.elapsed().as_secs_f64() * 1e3, self.written.get() - w0)
    }
}

fn map_json(n: usize, round: usize) -> String {
    let fields: Vec<String> = (0..n)
        .map(|i| format!("\"field{i:05}\":\"value {i} r{round}\""))
        .collect();
    format!("{{{}}}", fields.join(","))
}

#[test]
fn wide_records_update_one_field_with_one_op() {
    println!("| layout | fields | op | ms | bytes written | records |");
    println!("|---|---|---|---|---|---|");
    for n in [10usize, 1_000, 10_000] {
        // One row, a MAP column.
        let mut a = Node::new();
        a.exec("CREATE TABLE node (id TEXT PRIMARY KEY, props TEXT) REPLICATED (MAP props)");
        a.exec("INSERT INTO node (id, props) VALUES ('warm', '{}')");
        let report = |a: &mut Node, op: &str, f: &dyn Fn(&mut Node)| {
            let r0 = a.sync.pending_records();
            let (ms, bytes) = a.measure(|a| f(a));
            let records = a.sync.pending_records() - r0;
            println!("| MAP column | {n} | {op} | {ms:.2} | {bytes} | {records} |");
        };
        let whole = map_json(n, 0);
        report(&mut a, "write whole", &|a| {
            a.exec(&format!(
                "INSERT INTO node (id, props) VALUES ('n', '{whole}')"
            ))
        });
        report(&mut a, "read whole", &|a| {
            let rows = a.rows("SELECT props FROM node WHERE id = 'n'");
            assert_eq!(rows.len(), 1);
        });
        let again = map_json(n, 1);
        report(&mut a, "rewrite whole", &|a| {
            a.exec(&format!("UPDATE node SET props = '{again}' WHERE id = 'n'"))
        });
        report(&mut a, "update one field", &|a| {
            a.exec("UPDATE node SET props = map_set(props, 'field00005', 'new') WHERE id = 'n'")
        });
        let got = a.rows("SELECT props ->> '$.field00005', json_array_length(json_extract(props, '$')) FROM node WHERE id = 'n'");
        assert_eq!(got[0][0], Value::Text("new".into()));

        // One row per field.
        let mut b = Node::new();
        b.exec(
            "CREATE TABLE prop (node TEXT, field TEXT, value TEXT, PRIMARY KEY (node, field)) \
             REPLICATED",
        );
        let rows = |round: usize| -> String {
            (0..n)
                .map(|i| format!("('n', 'field{i:05}', 'value {i} r{round}')"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let report = |b: &mut Node, op: &str, f: &dyn Fn(&mut Node)| {
            let r0 = b.sync.pending_records();
            let (ms, bytes) = b.measure(|b| f(b));
            let records = b.sync.pending_records() - r0;
            println!("| row per field | {n} | {op} | {ms:.2} | {bytes} | {records} |");
        };
        let first = rows(0);
        report(&mut b, "write whole", &|b| {
            b.exec(&format!("INSERT INTO prop VALUES {first}"))
        });
        report(&mut b, "read whole", &|b| {
            let got = b.rows("SELECT field, value FROM prop WHERE node = 'n'");
            assert_eq!(got.len(), n);
        });
        let second = rows(1);
        report(&mut b, "rewrite whole", &|b| {
            b.exec(&format!("INSERT OR REPLACE INTO prop VALUES {second}"))
        });
        report(&mut b, "update one field", &|b| {
            b.exec("UPDATE prop SET value = 'new' WHERE node = 'n' AND field = 'field00005'")
        });
    }
}

/// Two replicas editing different fields of one wide record at once end with both edits.
#[test]
fn concurrent_field_edits_of_a_wide_record_merge() {
    let mut a = Node::new();
    let mut b = Node::new();
    let ddl = "CREATE TABLE node (id TEXT PRIMARY KEY, props TEXT) REPLICATED (MAP props)";
    a.exec(ddl);
    b.exec(ddl);
    let a_id = a.sync.id(&mut a.db).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "node", vec![b_id]).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec(&format!(
        "INSERT INTO node VALUES ('n', '{}')",
        map_json(1_000, 0)
    ));
    sync(&mut a, &mut b);
    a.exec("UPDATE node SET props = map_set(props, 'field00001', 'from a') WHERE id = 'n'");
    b.exec("UPDATE node SET props = map_set(props, 'field00002', 'from b') WHERE id = 'n'");
    b.exec("UPDATE node SET props = map_remove(props, 'field00003') WHERE id = 'n'");
    sync(&mut a, &mut b);
    let q = "SELECT props ->> 'field00001', props ->> 'field00002', props ->> 'field00003', props FROM node";
    let (ra, rb) = (a.rows(q), b.rows(q));
    assert_eq!(ra, rb);
    assert_eq!(ra[0][0], Value::Text("from a".into()));
    assert_eq!(ra[0][1], Value::Text("from b".into()));
    assert_eq!(ra[0][2], Value::Null);
}

fn sync(a: &mut Node, b: &mut Node) {
    let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
    let (lb, hello_b) = b.sync.connect(&mut b.db).unwrap();
    let mut to_b = vec![hello_a];
    let mut to_a = vec![hello_b];
    for _ in 0..10_000 {
        if let Some(m) = to_b.pop() {
            to_a.extend(b.sync.receive(&mut b.db, lb, &m).unwrap());
            continue;
        }
        if let Some(m) = to_a.pop() {
            to_b.extend(a.sync.receive(&mut a.db, la, &m).unwrap());
            continue;
        }
        to_b.extend(a.sync.poll(&mut a.db, la).unwrap());
        to_a.extend(b.sync.poll(&mut b.db, lb).unwrap());
        if to_a.is_empty() && to_b.is_empty() {
            return;
        }
    }
    panic!("sync did not settle");
}
