//! SET and MAP columns of replicated tables (docs/sync.md sec. 7, "Sets" and "Maps"): what a
//! write records, two databases converging after concurrent adds, removes and per-key writes,
//! the errors, the functions over plain tables, and a peer's malformed set op refused.

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
    fn err(&mut self, sql: &str) -> String {
        match self.db.execute(sql, &[]) {
            Ok(o) => panic!("{sql}: expected an error, got {o:?}"),
            Err(e) => e.code().to_string(),
        }
    }
    fn rows(&mut self, sql: &str) -> Vec<Vec<Value>> {
        match self.db.execute(sql, &[]).unwrap() {
            Output::Rows { rows, .. } => rows,
            o => panic!("not rows: {o:?}"),
        }
    }
    fn one(&mut self, sql: &str) -> Value {
        self.rows(sql).remove(0).remove(0)
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

/// Delivers messages both ways until neither has anything to say.
fn sync_pair(a: &mut Node, b: &mut Node) {
    let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
    let (lb, hello_b) = b.sync.connect(&mut b.db).unwrap();
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
            return;
        }
    }
    panic!("sync did not settle");
}

const DOC: &str = "CREATE TABLE doc (id TEXT PRIMARY KEY, title TEXT, tags TEXT DEFAULT '[]', \
                   props TEXT DEFAULT '{}') REPLICATED (SET tags, MAP props)";

/// `doc` on both, written under A's key: B writes to A's scopes, as A's second device would.
fn pair() -> (Node, Node) {
    let (mut a, mut b) = (Node::memory(), Node::memory());
    a.exec(DOC);
    b.exec(DOC);
    let a_id = a.sync.id(&mut a.db).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "doc", vec![b_id]).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    sync_pair(&mut a, &mut b);
    (a, b)
}

const ALL: &str = "SELECT id, title, tags, props FROM doc ORDER BY id";

#[test]
fn sets_and_maps_converge_after_concurrent_edits() {
    let (mut a, mut b) = pair();
    a.exec(r#"INSERT INTO doc (id, title, tags, props) VALUES ('d1', 'one', '["b", 2, "a", 2]', '{"x": 1, "y": "z"}')"#);
    // The table holds the canonical text: sorted, each element once.
    assert_eq!(
        a.rows(ALL),
        vec![vec![
            text("d1"),
            text("one"),
            text(r#"[2,"a","b"]"#),
            text(r#"{"x":1,"y":"z"}"#)
        ]]
    );
    sync_pair(&mut a, &mut b);
    assert_eq!(a.rows(ALL), b.rows(ALL));

    // Concurrent: A removes "a" and adds "c"; B adds "a" again (its own add, which A's removal
    // did not observe) and removes 2; per-key map writes, one key on both sides.
    a.exec("UPDATE doc SET tags = set_remove(tags, 'a') WHERE id = 'd1'");
    a.exec(
        "UPDATE doc SET tags = set_add(tags, 'c'), props = map_set(props, 'x', 10) WHERE id = 'd1'",
    );
    b.exec("UPDATE doc SET tags = set_remove(tags, 'a') WHERE id = 'd1'");
    b.exec("UPDATE doc SET tags = set_add(tags, 'a') WHERE id = 'd1'");
    b.exec(
        "UPDATE doc SET tags = set_remove(tags, 2), props = map_remove(props, 'y') WHERE id = 'd1'",
    );
    b.exec("UPDATE doc SET props = map_set(props, 'w', 1.5) WHERE id = 'd1'");
    sync_pair(&mut a, &mut b);
    assert_eq!(a.rows(ALL), b.rows(ALL));
    let row = a.rows(ALL).remove(0);
    // B removed "a" and added it anew: its add wins over A's concurrent removal, which did not
    // observe it. (In one statement, `set_add(set_remove(tags, 'a'), 'a')` changes nothing and
    // records nothing.)
    assert_eq!(row[2], text(r#"["a","b","c"]"#));
    assert_eq!(row[3], text(r#"{"w":1.5,"x":10}"#));
    // A removal of an element everyone saw removes it everywhere.
    b.exec("UPDATE doc SET tags = set_remove(tags, 'b') WHERE id = 'd1'");
    sync_pair(&mut a, &mut b);
    assert_eq!(a.one("SELECT tags FROM doc"), text(r#"["a","c"]"#));
    assert_eq!(a.rows(ALL), b.rows(ALL));
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    assert!(b.sync.verify(&mut b.db).unwrap().is_empty());
}

/// One `set_add` records one op, however large the set; an insert one op per element.
#[test]
fn one_element_records_one_small_op() {
    let mut a = Node::memory();
    a.exec(DOC);
    let elems: Vec<String> = (0..500).map(|i| format!("\"e{i}\"")).collect();
    a.exec(&format!(
        "INSERT INTO doc (id, tags) VALUES ('d', '[{}]')",
        elems.join(",")
    ));
    let before = a.sync.pending_records();
    let size = |a: &mut Node| a.one("SELECT length(tags) FROM doc");
    let _ = size(&mut a);
    a.exec("UPDATE doc SET tags = set_add(tags, 'new') WHERE id = 'd'");
    assert_eq!(a.sync.pending_records(), before + 1);
    a.exec("UPDATE doc SET tags = set_add(tags, 'new') WHERE id = 'd'");
    // Nothing changed: nothing recorded.
    assert_eq!(a.sync.pending_records(), before + 1);
    assert_eq!(
        a.one("SELECT json_array_length(tags) FROM doc"),
        Value::Integer(501)
    );
}

#[test]
fn bad_input_is_refused_with_stable_codes() {
    let mut a = Node::memory();
    a.exec(DOC);
    a.exec("CREATE TABLE c (id TEXT PRIMARY KEY, n INTEGER, s TEXT) REPLICATED (COUNTER n, SET s)");
    a.exec("INSERT INTO doc (id) VALUES ('d')");
    // A set function on a column that is not a SET, a map function on one that is not a MAP.
    assert_eq!(
        a.err("UPDATE doc SET title = set_add(title, 'x')"),
        "COLUMN_KIND"
    );
    assert_eq!(
        a.err("UPDATE doc SET props = set_add(props, 'x')"),
        "COLUMN_KIND"
    );
    assert_eq!(
        a.err("UPDATE doc SET tags = map_set(tags, 'k', 1)"),
        "COLUMN_KIND"
    );
    assert_eq!(a.err("UPDATE doc SET id = set_add(id, 'x')"), "COLUMN_KIND");
    // Wrong types: a BLOB element, a non-text key, a value that is no set or map.
    assert_eq!(a.err("UPDATE doc SET tags = set_add(tags, x'00')"), "TYPE");
    assert_eq!(
        a.err("UPDATE doc SET props = map_set(props, 1, 'v')"),
        "TYPE"
    );
    assert_eq!(a.err("UPDATE doc SET tags = '{}'"), "TYPE");
    assert_eq!(a.err(r#"UPDATE doc SET tags = '[[1]]'"#), "TYPE");
    assert_eq!(a.err("UPDATE doc SET props = '[1]'"), "TYPE");
    assert_eq!(a.err("UPDATE doc SET tags = 'not json'"), "TYPE");
    // Nothing was written.
    assert_eq!(a.one("SELECT tags || props FROM doc"), text("[]{}"));
    // Declarations: a SET must be TEXT and outside the key; not also a MAP.
    for sql in [
        "CREATE TABLE x (id TEXT PRIMARY KEY, s INTEGER) REPLICATED (SET s)",
        "CREATE TABLE x (id TEXT PRIMARY KEY, s TEXT) REPLICATED (SET id)",
        "CREATE TABLE x (id TEXT PRIMARY KEY, s TEXT) REPLICATED (SET s, MAP s)",
        "CREATE TABLE x (id TEXT PRIMARY KEY, s TEXT) REPLICATED (SET s, SET s)",
    ] {
        assert_eq!(a.err(sql), "NOT_REPLICABLE", "{sql}");
    }
}

/// Over a plain table the functions edit JSON text: add if absent, remove if present.
#[test]
fn the_functions_work_on_plain_json_text() {
    let mut a = Node::memory();
    for (sql, want) in [
        ("SELECT set_add('[3,1]', 2)", Value::Text("[1,2,3]".into())),
        ("SELECT set_add('[1]', 1)", Value::Text("[1]".into())),
        ("SELECT set_add(NULL, 'x')", Value::Text(r#"["x"]"#.into())),
        (
            "SELECT set_remove('[1,\"a\",null]', 'a')",
            Value::Text("[null,1]".into()),
        ),
        ("SELECT set_add('[]', 1.0) ", Value::Text("[1.0]".into())),
        (
            "SELECT map_set('{\"b\":1}', 'a', 'x')",
            Value::Text(r#"{"a":"x","b":1}"#.into()),
        ),
        (
            "SELECT map_remove('{\"b\":1,\"a\":2}', 'b')",
            Value::Text(r#"{"a":2}"#.into()),
        ),
        (
            "SELECT json_extract(map_set('{}', 'k', 5), '$.k')",
            Value::Integer(5),
        ),
    ] {
        assert_eq!(a.one(sql), want, "{sql}");
    }
}

/// A peer whose records hold a set op on a column that is not a SET is refused
/// (`SCHEMA_MISMATCH`), and nothing of its block applied.
#[test]
fn a_peer_set_op_on_another_kind_of_column_is_refused() {
    let (mut a, mut b) = pair();
    // On B, `title` is a SET; on A, last-writer-wins: the tables are not declared alike.
    let mut c = Node::memory();
    c.exec(
        "CREATE TABLE doc (id TEXT PRIMARY KEY, title TEXT, tags TEXT DEFAULT '[]', \
         props TEXT DEFAULT '{}') REPLICATED (SET title, SET tags, MAP props)",
    );
    let a_id = a.sync.id(&mut a.db).unwrap();
    let c_id = c.sync.id(&mut c.db).unwrap();
    a.sync.authorize(&mut a.db, "doc", vec![c_id]).unwrap();
    c.sync.set_owner(&mut c.db, a_id).unwrap();
    sync_pair(&mut a, &mut c);
    c.exec("INSERT INTO doc (id, title) VALUES ('d9', '[\"x\"]')");
    sync_pair(&mut c, &mut a);
    let events = a.sync.take_events();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "rejected" && e.code == "SCHEMA_MISMATCH"),
        "{events:?}"
    );
    assert!(a.rows("SELECT id FROM doc WHERE id = 'd9'").is_empty());
    let _ = &mut b;
}
