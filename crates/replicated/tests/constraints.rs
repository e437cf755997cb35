//! Constraints on replicated tables when two replicas' changes merge (docs/sync.md, 10b,
//! "Constraints"): a foreign key is checked on local writes only, and a local delete's
//! cascades are local writes, recorded and sent; a merged row is never refused, nor a merged
//! delete cascaded, for a foreign key, so both replicas end with the same rows.

use cairn_replicated::{MemoryKeys, Sync};
use cairn_sql::{Database, Output, Value};
use std::collections::VecDeque;

fn now() -> u64 {
    1_800_000_000_000
}

struct Node {
    db: Database,
    sync: Sync,
}

impl Node {
    fn memory() -> Node {
        let mut db = Database::memory();
        let sync = Sync::attach(&mut db, now, Box::new(MemoryKeys::new())).unwrap();
        Node { db, sync }
    }
    fn exec(&mut self, sql: &str) {
        self.db
            .exec_script(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    fn rows(&mut self, sql: &str) -> Vec<Vec<Value>> {
        match self.db.execute(sql, &[]).unwrap() {
            Output::Rows { rows, .. } => rows,
            o => panic!("not rows: {o:?}"),
        }
    }
}

/// Delivers messages both ways until neither has anything to say; returns `b`'s events.
fn sync_pair(a: &mut Node, b: &mut Node) -> Vec<String> {
    let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
    let (lb, hello_b) = b.sync.connect_bootstrap(&mut b.db).unwrap();
    let mut to_b: VecDeque<Vec<u8>> = VecDeque::from([hello_a]);
    let mut to_a: VecDeque<Vec<u8>> = VecDeque::from([hello_b]);
    for _ in 0..10_000 {
        if let Some(m) = to_b.pop_front() {
            to_a.extend(b.sync.receive(&mut b.db, lb, &m).unwrap());
            continue;
        }
        if let Some(m) = to_a.pop_front() {
            to_b.extend(a.sync.receive(&mut a.db, la, &m).unwrap());
            continue;
        }
        to_b.extend(a.sync.poll(&mut a.db, la).unwrap());
        to_a.extend(b.sync.poll(&mut b.db, lb).unwrap());
        if to_a.is_empty() && to_b.is_empty() {
            a.sync.disconnect(la);
            b.sync.disconnect(lb);
            let mut kinds: Vec<String> = (a.sync.take_events().into_iter())
                .map(|e| e.kind.to_string())
                .collect();
            kinds.extend(b.sync.take_events().into_iter().map(|e| e.kind.to_string()));
            return kinds;
        }
    }
    panic!("sync did not settle");
}

const SCHEMA: &str = "PRAGMA foreign_keys = ON;
    CREATE TABLE list (id TEXT PRIMARY KEY, name TEXT NOT NULL CHECK (length(name) > 0)) REPLICATED;
    CREATE TABLE item (id TEXT PRIMARY KEY, list_id TEXT REFERENCES list (id) ON DELETE CASCADE,
        title TEXT) REPLICATED;";

fn pair() -> (Node, Node) {
    let mut a = Node::memory();
    let mut b = Node::memory();
    a.exec(SCHEMA);
    b.exec(SCHEMA);
    let b_id = b.sync.id(&mut b.db).unwrap();
    let a_id = a.sync.id(&mut a.db).unwrap();
    for scope in ["list", "item"] {
        a.sync.authorize(&mut a.db, scope, vec![b_id]).unwrap();
    }
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    sync_pair(&mut a, &mut b);
    (a, b)
}

#[test]
fn a_foreign_key_is_checked_on_local_writes_and_merges_never_refuse_or_cascade() {
    let (mut a, mut b) = pair();
    a.exec(
        "INSERT INTO list VALUES ('l1', 'groceries');
         INSERT INTO item VALUES ('i1', 'l1', 'milk'), ('i2', 'l1', 'bread');",
    );
    sync_pair(&mut a, &mut b);
    let items = "SELECT id, list_id FROM item ORDER BY id";
    assert_eq!(b.rows(items).len(), 2);

    // Local writes keep to the key and to the CHECK; nothing of a refused one is recorded.
    for (sql, code) in [
        (
            "INSERT INTO item VALUES ('i9', 'nope', 'x')",
            "CONSTRAINT_FOREIGN_KEY",
        ),
        ("INSERT INTO list VALUES ('l9', '')", "CONSTRAINT_CHECK"),
    ] {
        let e = b.db.execute(sql, &[]).unwrap_err();
        assert_eq!(e.code(), code, "{sql}");
    }

    // Concurrently: a adds an item to the list, b deletes the list (its cascade deletes the
    // two items b knows of, as local writes that are recorded and sent).
    a.exec("INSERT INTO item VALUES ('i3', 'l1', 'eggs')");
    b.exec("DELETE FROM list WHERE id = 'l1'");
    assert_eq!(b.rows(items), Vec::<Vec<Value>>::new());
    let events = sync_pair(&mut a, &mut b);
    assert!(
        events.iter().all(|k| k != "row_refused"),
        "a merged row refused: {events:?}"
    );

    // Both hold the same rows: the list and the items b deleted are gone, the item a added
    // while the list was deleted elsewhere stays, naming no list, on both alike.
    let i3 = vec![vec![Value::Text("i3".into()), Value::Text("l1".into())]];
    for n in [&mut a, &mut b] {
        assert_eq!(
            n.rows("SELECT count(*) FROM list"),
            vec![vec![Value::Integer(0)]]
        );
        assert_eq!(n.rows(items), i3);
        assert_eq!(
            n.rows("PRAGMA foreign_key_check(item)"),
            vec![vec![
                Value::Text("item".into()),
                Value::Null,
                Value::Text("list".into()),
                Value::Integer(0)
            ]]
        );
    }
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );

    // The application mends it with a local write, which replicates like any other.
    a.exec("DELETE FROM item WHERE list_id NOT IN (SELECT id FROM list)");
    sync_pair(&mut a, &mut b);
    assert_eq!(b.rows(items), Vec::<Vec<Value>>::new());
}

/// A generated column is refused on a replicated table, declared or added: a peer's row is
/// applied as merged column by column, and a value computed from the writer's own row could
/// then disagree with the merged columns it was computed from (docs/sync.md, 10b).
#[test]
fn a_replicated_table_refuses_generated_columns() {
    let mut a = Node::memory();
    for sql in [
        "CREATE TABLE g (id TEXT PRIMARY KEY, n INTEGER, twice INTEGER AS (n * 2)) REPLICATED",
        "CREATE TABLE g (id TEXT PRIMARY KEY, n INTEGER, \
         twice INTEGER GENERATED ALWAYS AS (n * 2) STORED) REPLICATED",
    ] {
        let e = a.db.execute(sql, &[]).unwrap_err();
        assert_eq!(e.code(), "NOT_REPLICABLE", "{sql}: {e}");
        assert!(
            e.to_string().contains("g.twice is a generated column"),
            "{e}"
        );
    }
    a.exec("CREATE TABLE g (id TEXT PRIMARY KEY, n INTEGER) REPLICATED");
    let e = (a.db)
        .execute("ALTER TABLE g ADD COLUMN twice INTEGER AS (n * 2)", &[])
        .unwrap_err();
    assert_eq!(e.code(), "NOT_REPLICABLE", "{e}");
    assert_eq!(
        a.rows("SELECT name FROM pragma_table_xinfo('g') ORDER BY cid"),
        vec![
            vec![Value::Text("id".into())],
            vec![Value::Text("n".into())]
        ]
    );
    // The same columns on a table that is not replicated are taken.
    a.exec("CREATE TABLE h (id TEXT PRIMARY KEY, n INTEGER, twice INTEGER AS (n * 2))");
    a.exec("INSERT INTO h (id, n) VALUES ('x', 21)");
    assert_eq!(
        a.rows("SELECT twice FROM h"),
        vec![vec![Value::Integer(42)]]
    );
}
