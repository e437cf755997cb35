//! Replicated SQL tables: declaration, recording, persistence in the database file, sync
//! between databases over an in-process transport, and convergence.

use cairn_replicated::{MemoryKeys, Sync};
use cairn_sql::Paged;
use cairn_sql::{Database, Output, Value};
use cairn_store::{BlockFile, MemoryFile, Options};
use std::collections::VecDeque;

fn now() -> u64 {
    1_800_000_000_000
}

struct Node {
    db: Database,
    sync: Sync,
    /// The key store of the device the database is on.
    keys: MemoryKeys,
}

/// Compaction drops history only up to what the scope's owner attested (docs/sync.md sec. 8),
/// and the attestations are kept in the file: after a reopen, a replica that is not the owner
/// compacts up to them and serves a late replica a snapshot it checks against them.
#[test]
fn attestations_are_kept_and_let_a_non_owner_serve_a_snapshot() {
    let mut a = Node::memory();
    let mut b = paged(MemoryFile::new());
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one'), ('t2', 'two')");
    a.exec("UPDATE todo SET likes = likes + 4 WHERE id = 't1'");
    sync_pair(&mut a, &mut b);
    // B holds the history but no attestation yet: it compacts nothing.
    assert_eq!(b.sync.compact(&mut b.db).unwrap(), 0);
    // The owner attests when it compacts, and B learns of it at the next exchange.
    assert!(a.sync.compact(&mut a.db).unwrap() > 0);
    a.exec("INSERT INTO todo (id, title) VALUES ('t3', 'three')");
    sync_pair(&mut a, &mut b);
    let mut b = paged(close(b));
    assert!(b.sync.compact(&mut b.db).unwrap() > 0);
    let mut b = paged(close(b));
    let mut late = paged(MemoryFile::new());
    late.exec(TODO);
    late.sync.set_owner(&mut late.db, a_id).unwrap();
    sync_pair(&mut b, &mut late);
    // Told that B compacted what it lacks, it asks for a snapshot, and installs it.
    let events = late.sync.take_events();
    assert!(
        events
            .iter()
            .all(|e| e.kind == "applied" || e.code == "COMPACTED"),
        "{events:?}"
    );
    let all = "SELECT id, title, likes FROM todo ORDER BY id";
    assert_eq!(late.rows(all), a.rows(all));
    assert_eq!(
        late.sync.state_digest(&mut late.db).unwrap(),
        a.sync.state_digest(&mut a.db).unwrap()
    );
    assert!(late.sync.verify(&mut late.db).unwrap().is_empty());
}

/// Attaches the sync layer to `db`, whose key store is `keys`.
fn node(mut db: Database, keys: MemoryKeys) -> Node {
    let sync = Sync::attach(&mut db, now, Box::new(keys.clone())).unwrap();
    Node { db, sync, keys }
}

impl Node {
    fn memory() -> Node {
        node(Database::memory(), MemoryKeys::new())
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

/// Syncs `a` and `b`, which `b` takes without a complaint, and checks each query reads the same
/// on both.
fn synced_alike(a: &mut Node, b: &mut Node, queries: &[&str]) {
    sync_pair(a, b);
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    for q in queries {
        assert_eq!(a.rows(q), b.rows(q), "{q}");
    }
}

/// Connects `a` and `b` and delivers messages both ways until neither has anything to say.
/// Returns the number of messages carried.
/// Syncs until both are quiet; `b` bootstraps from `a` (takes a snapshot from it if it must).
fn sync_pair(a: &mut Node, b: &mut Node) -> usize {
    let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
    let (lb, hello_b) = b.sync.connect_bootstrap(&mut b.db).unwrap();
    let mut to_b: VecDeque<Vec<u8>> = VecDeque::from([hello_a]);
    let mut to_a: VecDeque<Vec<u8>> = VecDeque::from([hello_b]);
    let mut carried = 0;
    for _ in 0..10_000 {
        if let Some(m) = to_b.pop_front() {
            carried += 1;
            to_a.extend(b.sync.receive(&mut b.db, lb, &m).unwrap());
            continue;
        }
        if let Some(m) = to_a.pop_front() {
            carried += 1;
            to_b.extend(a.sync.receive(&mut a.db, la, &m).unwrap());
            continue;
        }
        to_b.extend(a.sync.poll(&mut a.db, la).unwrap());
        to_a.extend(b.sync.poll(&mut b.db, lb).unwrap());
        if to_a.is_empty() && to_b.is_empty() {
            a.sync.disconnect(la);
            b.sync.disconnect(lb);
            return carried;
        }
    }
    panic!("sync did not settle");
}

/// How many seeds the simulation tests run: `CAIRN_REPLICATED_SEEDS`, or 20.
fn seeds() -> u64 {
    std::env::var("CAIRN_REPLICATED_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// The numbers of seed `seed` (xorshift): each call, one below its argument.
fn numbers(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    }
}

/// Two databases with one key pair, `run` on each: the first with `false`, the second `true`.
fn one_key_pair(run: impl Fn(&mut Node, bool)) -> (Node, Node) {
    let mut a = Node::memory();
    let mut b = Node::memory();
    let key = a.sync.export_key(&mut a.db).unwrap();
    b.sync.import_key(&mut b.db, &key).unwrap();
    run(&mut a, false);
    run(&mut b, true);
    (a, b)
}

/// The messages `n` sends a new peer with `schema` until neither has more to say (the records,
/// sealed into signed blocks), and the peer's state digest then; the peer's rows by `all` must
/// be `n`'s.
fn sent_to_new_peer(n: &mut Node, schema: &str, all: &str) -> (Vec<Vec<u8>>, [u8; 32]) {
    let mut peer = Node::memory();
    peer.exec(schema);
    let (ln, hello) = n.sync.connect(&mut n.db).unwrap();
    let (lp, hello_p) = peer.sync.connect(&mut peer.db).unwrap();
    let mut out = vec![];
    let mut to_n = peer.sync.receive(&mut peer.db, lp, &hello).unwrap();
    to_n.insert(0, hello_p);
    for _ in 0..100 {
        let mut to_p = Vec::new();
        for m in to_n.drain(..) {
            to_p.extend(n.sync.receive(&mut n.db, ln, &m).unwrap());
        }
        to_p.extend(n.sync.poll(&mut n.db, ln).unwrap());
        if to_p.is_empty() {
            break;
        }
        for m in to_p {
            to_n.extend(peer.sync.receive(&mut peer.db, lp, &m).unwrap());
            out.push(m);
        }
    }
    assert_eq!(peer.rows(all), n.rows(all));
    (out, peer.sync.state_digest(&mut peer.db).unwrap())
}

const TODO: &str =
    "CREATE TABLE todo (id TEXT PRIMARY KEY DEFAULT (uuid7()), title TEXT NOT NULL, \
                    done INTEGER DEFAULT 0, likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)";

#[test]
fn row_id_tables_cannot_be_replicated() {
    let mut n = Node::memory();
    for sql in [
        "CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT) REPLICATED",
        "CREATE TABLE t (x TEXT) REPLICATED",
    ] {
        let e = n.db.execute(sql, &[]).unwrap_err();
        assert_eq!(e.code(), "NOT_REPLICABLE", "{sql}: {e}");
        assert!(e.to_string().contains("uuid7"), "{e}");
    }
    let e =
        n.db.execute(
            "CREATE TABLE t (id TEXT PRIMARY KEY, n TEXT) REPLICATED (COUNTER n)",
            &[],
        )
        .unwrap_err();
    assert_eq!(e.code(), "NOT_REPLICABLE");
    n.exec(TODO);
    let e =
        n.db.execute("ALTER TABLE todo RENAME TO tasks", &[])
            .unwrap_err();
    assert_eq!(e.code(), "NOT_REPLICABLE");
    // Nothing was left behind by the refusals.
    assert_eq!(
        n.rows("SELECT count(*) FROM todo"),
        vec![vec![Value::Integer(0)]]
    );
}

#[test]
fn the_declaration_survives_in_the_schema() {
    let mut n = Node::memory();
    n.exec("CREATE TABLE note (id TEXT PRIMARY KEY, list TEXT, body TEXT, n INTEGER) REPLICATED (SCOPE list, COUNTER n)");
    let t = n.db.catalog().table("note").unwrap().clone();
    assert!(
        t.sql().ends_with(") REPLICATED (SCOPE list, COUNTER n)"),
        "{}",
        t.sql()
    );
    // The catalog keeps the SQL and parses it again on open: the same table comes back.
    let store = n.db.into_storage().unwrap();
    let db = Database::open(store).unwrap();
    assert_eq!(**db.catalog().table("note").unwrap(), *t);
}

#[test]
fn uuid7_ids_are_well_formed_and_distinct() {
    let mut n = Node::memory();
    n.db.set_random_seed(42);
    let rows = n.rows("SELECT uuid7(), uuid7(), uuid7()");
    let ids: Vec<String> = rows[0]
        .iter()
        .map(|v| match v {
            Value::Text(s) => s.clone(),
            o => panic!("{o:?}"),
        })
        .collect();
    for id in &ids {
        assert_eq!(id.len(), 36, "{id}");
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            vec![8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('7'), "version 7: {id}");
        assert!(
            matches!(&parts[3][..1], "8" | "9" | "a" | "b"),
            "variant: {id}"
        );
    }
    assert_ne!(ids[0], ids[1]);
    assert_ne!(ids[1], ids[2]);
    // The timestamp leads: ids made later sort later.
    assert_eq!(&ids[0][..8], &ids[2][..8]);
}

/// `todo` on both, written under one owner: B writes to A's scopes, as A's second device would.
fn one_owner(a: &mut Node, b: &mut Node) {
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "todo", vec![b_id]).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
}

#[test]
fn two_databases_converge() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    one_owner(&mut a, &mut b);
    sync_pair(&mut a, &mut b);

    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'milk'), ('t2', 'bread')");
    b.exec("INSERT INTO todo (id, title) VALUES ('t3', 'eggs')");
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, title, done, likes FROM todo ORDER BY id";
    assert_eq!(a.rows(all).len(), 3);
    assert_eq!(a.rows(all), b.rows(all));

    // Concurrent edits: different columns of one row merge; the same column: later wins;
    // counters add up.
    a.exec("UPDATE todo SET done = 1, likes = likes + 2 WHERE id = 't1'");
    b.exec("UPDATE todo SET title = 'oat milk', likes = likes + 3 WHERE id = 't1'");
    b.exec("DELETE FROM todo WHERE id = 't2'");
    sync_pair(&mut a, &mut b);
    assert_eq!(a.rows(all), b.rows(all));
    assert_eq!(
        a.rows("SELECT title, done, likes FROM todo WHERE id = 't1'"),
        vec![vec![
            Value::Text("oat milk".into()),
            Value::Integer(1),
            Value::Integer(5)
        ]]
    );
    assert_eq!(
        a.rows("SELECT count(*) FROM todo WHERE id = 't2'"),
        vec![vec![Value::Integer(0)]]
    );
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    assert!(b.sync.verify(&mut b.db).unwrap().is_empty());
    assert!(a.db.check().unwrap().is_empty());
    assert!(b.db.check().unwrap().is_empty());
}

#[test]
fn a_writer_not_listed_is_refused_and_its_transaction_has_no_effect() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    let e =
        b.db.execute("INSERT INTO todo (id, title) VALUES ('x', 'not mine')", &[])
            .unwrap_err();
    assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
    assert!(e.to_string().contains("UNAUTHORIZED"), "{e}");
    assert_eq!(
        b.rows("SELECT count(*) FROM todo"),
        vec![vec![Value::Integer(0)]]
    );
    // Authorized, the same write goes through and reaches the owner.
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "todo", vec![b_id]).unwrap();
    sync_pair(&mut a, &mut b);
    b.exec("INSERT INTO todo (id, title) VALUES ('x', 'now mine')");
    sync_pair(&mut a, &mut b);
    assert_eq!(
        a.rows("SELECT title FROM todo"),
        vec![vec![Value::Text("now mine".into())]]
    );
}

#[test]
fn rolled_back_work_is_not_recorded() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    a.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('gone', 'x'); ROLLBACK");
    // A failed statement inside a transaction takes its changes with it; the rest commits.
    a.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('kept', 'y')");
    let e =
        a.db.execute("INSERT INTO todo (id, title) VALUES ('bad', NULL)", &[])
            .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_NOT_NULL");
    a.exec("COMMIT");
    assert!(a.sync.has_pending());
    // B follows A's scopes.
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    sync_pair(&mut a, &mut b);
    assert_eq!(
        b.rows("SELECT id FROM todo"),
        vec![vec![Value::Text("kept".into())]]
    );
}

/// The capture writes the ops of a table with no counter, scope column or UNIQUE index as the
/// statements run: a statement that fails part-way through a run of them (rows one statement
/// at a time into one scope, with others to another scope between) takes back exactly its own
/// ops, however many ran before it in the transaction.
#[test]
fn failed_statements_in_a_run_take_back_exactly_their_ops() {
    let ddl = [
        "CREATE TABLE a (id TEXT PRIMARY KEY, v INTEGER NOT NULL) REPLICATED",
        "CREATE TABLE b (id TEXT PRIMARY KEY, w TEXT NOT NULL) REPLICATED",
    ];
    let mut x = Node::memory();
    let mut y = Node::memory();
    for n in [&mut x, &mut y] {
        for d in ddl {
            n.exec(d);
        }
    }
    let x_id = x.sync.id(&mut x.db).unwrap();
    y.sync.set_owner(&mut y.db, x_id).unwrap();
    x.exec("BEGIN");
    for i in 0..60 {
        x.exec(&format!("INSERT INTO a VALUES ('r{i:02}', {i})"));
        if i % 7 == 3 {
            // Two rows captured, the third refused: the statement goes whole.
            let sql = format!("INSERT INTO a VALUES ('f{i}a', 1), ('f{i}b', 2), ('f{i}c', NULL)");
            let e = x.db.execute(&sql, &[]).unwrap_err();
            assert_eq!(e.code(), "CONSTRAINT_NOT_NULL");
        }
        if i % 10 == 5 {
            x.exec(&format!("INSERT INTO b VALUES ('s{i}', 'kept')"));
            let sql = format!("INSERT INTO b VALUES ('t{i}', 'x'), ('u{i}', NULL)");
            assert!(x.db.execute(&sql, &[]).is_err());
            x.exec(&format!("UPDATE a SET v = v + 1000 WHERE id = 'r{i:02}'"));
        }
    }
    x.exec("COMMIT");
    assert_eq!(x.sync.pending_records(), 2, "one record a scope");
    let (qa, qb) = (
        "SELECT id, v FROM a ORDER BY id",
        "SELECT id, w FROM b ORDER BY id",
    );
    synced_alike(&mut x, &mut y, &[qa, qb]);
    assert_eq!((x.rows(qa).len(), x.rows(qb).len()), (60, 6));
    let digests = [&mut x, &mut y].map(|n| n.sync.state_digest(&mut n.db).unwrap());
    assert_eq!(digests[0], digests[1]);
}

#[test]
fn scopes_follow_the_scope_column() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    let ddl = "CREATE TABLE item (id TEXT PRIMARY KEY, list TEXT NOT NULL, name TEXT) REPLICATED (SCOPE list)";
    a.exec(ddl);
    b.exec(ddl);
    a.exec("INSERT INTO item VALUES ('1', 'home', 'lamp'), ('2', 'work', 'desk')");
    // Moving a row to another scope is a delete in the old one and a write in the new one.
    a.exec("UPDATE item SET list = 'work' WHERE id = '1'");
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, list, name FROM item ORDER BY id";
    assert_eq!(a.rows(all), b.rows(all));
    assert_eq!(b.rows(all).len(), 2);
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
}

/// One transaction writing many scopes (past the few the commit hook finds by name), then
/// commits that write a few of them again, and one under another owner: each change lands in
/// its scope's chain, and a peer ends up with the same rows and state.
#[test]
fn many_scopes_in_one_transaction_and_across_commits() {
    let ddl = "CREATE TABLE item (id TEXT PRIMARY KEY, list TEXT NOT NULL, n INTEGER) REPLICATED (SCOPE list)";
    let mut a = paged(MemoryFile::new());
    a.exec(ddl);
    let mut b = Node::memory();
    b.exec(ddl);
    a.exec("BEGIN");
    for i in 0..40 {
        a.exec(&format!(
            "INSERT INTO item VALUES ('{i}', 'list{}', {i})",
            i % 20
        ));
    }
    a.exec("COMMIT");
    for round in 0..3 {
        for i in 0..5 {
            a.exec(&format!(
                "UPDATE item SET n = n + {round} WHERE id = '{}'",
                i * 7
            ));
        }
    }
    // After the owner changed, a commit goes to the new owner's scopes, and is refused here
    // (this device is not one of its writers); under the old owner again, it goes on.
    let mut c = Node::memory();
    let c_id = c.sync.id(&mut c.db).unwrap();
    let a_id = a.sync.id(&mut a.db).unwrap();
    a.sync.set_owner(&mut a.db, c_id).unwrap();
    assert!(a
        .db
        .execute("INSERT INTO item VALUES ('x', 'list0', 1)", &[])
        .is_err());
    a.sync.set_owner(&mut a.db, a_id).unwrap();
    a.exec("INSERT INTO item VALUES ('x', 'list0', 1)");
    let mut a = paged(close(a));
    b.sync
        .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
        .unwrap();
    let all = "SELECT id, list, n FROM item ORDER BY id";
    synced_alike(&mut a, &mut b, &[all]);
    assert_eq!(b.rows(all).len(), 41);
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
}

/// A table without a scope column writes one scope, which the commit hook finds again after it
/// forgets its scopes (past many scopes, or another owner): every record lands in its chain.
#[test]
fn a_table_s_one_scope_is_found_again_after_the_scopes_are_forgotten() {
    let item =
        "CREATE TABLE item (id TEXT PRIMARY KEY, list TEXT NOT NULL) REPLICATED (SCOPE list)";
    let mut a = paged(MemoryFile::new());
    a.exec(TODO);
    a.exec(item);
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one')");
    // More scopes than the hook keeps: the next commit starts a new list.
    a.exec("BEGIN");
    for i in 0..70 {
        a.exec(&format!("INSERT INTO item VALUES ('{i}', 'list{i}')"));
    }
    a.exec("INSERT INTO todo (id, title) VALUES ('t2', 'two')");
    a.exec("COMMIT");
    a.exec("INSERT INTO todo (id, title) VALUES ('t3', 'three')");
    a.exec("INSERT INTO item VALUES ('x', 'list5')");
    a.exec("INSERT INTO todo (id, title) VALUES ('t4', 'four')");
    // Another owner, whose scope this device may not write; then this one again.
    let mut c = Node::memory();
    let c_id = c.sync.id(&mut c.db).unwrap();
    let a_id = a.sync.id(&mut a.db).unwrap();
    a.sync.set_owner(&mut a.db, c_id).unwrap();
    assert!(a
        .db
        .execute("INSERT INTO todo (id, title) VALUES ('no', 'refused')", &[])
        .is_err());
    a.sync.set_owner(&mut a.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t5', 'five')");
    let mut a = paged(close(a));
    let mut b = Node::memory();
    b.exec(TODO);
    b.exec(item);
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    synced_alike(
        &mut a,
        &mut b,
        &[
            "SELECT id, title FROM todo ORDER BY id",
            "SELECT id, list FROM item ORDER BY id",
        ],
    );
    assert_eq!(b.rows("SELECT id FROM todo").len(), 5);
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
}

/// A memory file that does not say it is volatile, as a file on disk or in OPFS: the sync
/// layer writes its records to the store with every commit (over a volatile one it keeps
/// them in memory until the store is read whole), which the tests of what the store holds
/// look at.
struct OnDisk(MemoryFile);

impl BlockFile for OnDisk {
    fn len(&self) -> cairn_store::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> cairn_store::Result<()> {
        self.0.read(offset, buf)
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> cairn_store::Result<()> {
        self.0.write(offset, data)
    }
    fn set_len(&mut self, len: u64) -> cairn_store::Result<()> {
        self.0.set_len(len)
    }
    fn flush(&mut self) -> cairn_store::Result<()> {
        self.0.flush()
    }
    fn close(&mut self) -> cairn_store::Result<()> {
        self.0.close()
    }
}

/// A database's file and the key store of the device it was on: what reopening it there
/// takes. A file alone (`MemoryFile`) arrives on another device, whose key store is empty.
#[derive(Clone)]
struct Closed {
    file: MemoryFile,
    keys: MemoryKeys,
}

impl From<MemoryFile> for Closed {
    fn from(file: MemoryFile) -> Closed {
        Closed {
            file,
            keys: MemoryKeys::new(),
        }
    }
}

impl Closed {
    fn bytes(&self) -> &[u8] {
        self.file.bytes()
    }
}

/// A database in `file`, as in a file on disk (see `OnDisk`).
fn paged(file: impl Into<Closed>) -> Node {
    let Closed { file, keys } = file.into();
    let store = Paged::open(OnDisk(file), Options::default()).unwrap();
    node(Database::open(Box::new(store)).unwrap(), keys)
}

/// A database in `file`, in memory (volatile).
fn volatile(file: impl Into<Closed>) -> Node {
    let Closed { file, keys } = file.into();
    let store = Paged::open(file, Options::default()).unwrap();
    node(Database::open(Box::new(store)).unwrap(), keys)
}

fn close(n: Node) -> Closed {
    Closed {
        file: file_of(n.db),
        keys: n.keys,
    }
}

fn file_of(db: Database) -> MemoryFile {
    let store = db.into_storage().unwrap();
    // The storage is a Paged<MemoryFile>; reach the file through an export of its bytes.
    let mut store = store;
    let bytes = store.export().unwrap();
    MemoryFile::from_bytes(bytes)
}

#[test]
fn the_replica_is_kept_in_the_database_file() {
    let mut a = paged(MemoryFile::new());
    a.exec(TODO);
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one')");
    let id_before = a.sync.id(&mut a.db).unwrap();
    let key = a.sync.export_key(&mut a.db).unwrap();
    // Some history sealed (a link was opened), some still pending.
    let mut b = Node::memory();
    b.exec(TODO);
    b.sync.set_owner(&mut b.db, id_before).unwrap();
    sync_pair(&mut a, &mut b);
    a.exec("INSERT INTO todo (id, title) VALUES ('t2', 'two')");
    let digest = a.sync.state_digest(&mut a.db).unwrap();

    let mut a = paged(close(a));
    assert_eq!(a.sync.id(&mut a.db).unwrap(), id_before);
    assert_eq!(a.sync.export_key(&mut a.db).unwrap(), key);
    assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    // The chain goes on where it stopped: B takes the new records without a gap or a fork.
    a.exec("INSERT INTO todo (id, title) VALUES ('t3', 'three')");
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, title FROM todo ORDER BY id";
    assert_eq!(b.rows(all).len(), 3);
    assert_eq!(a.rows(all), b.rows(all));
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    // What a replica received is kept too: B (on a file this time) takes edits from A,
    // reopens, and still holds the same merged state.
    let mut b2 = paged(MemoryFile::new());
    b2.exec(TODO);
    b2.sync.set_owner(&mut b2.db, id_before).unwrap();
    a.exec("UPDATE todo SET likes = likes + 4 WHERE id = 't1'");
    sync_pair(&mut a, &mut b2);
    let digest = a.sync.state_digest(&mut a.db).unwrap();
    assert_eq!(b2.sync.state_digest(&mut b2.db).unwrap(), digest);
    let mut b2 = paged(close(b2));
    assert_eq!(b2.sync.state_digest(&mut b2.db).unwrap(), digest);
    assert!(b2.sync.verify(&mut b2.db).unwrap().is_empty());
    assert_eq!(b2.rows(all), a.rows(all));
}

#[test]
fn a_new_database_saves_the_key_pair_it_made_when_attached() {
    // The key pair is made at attach (no identity saved yet) and written by the first
    // replicated commit: the key that signs is the key saved, across a rollback and reopens.
    let mut a = paged(MemoryFile::new());
    a.exec(TODO);
    a.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('gone', 'x'); ROLLBACK");
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one')");
    let mut a = paged(close(a));
    let id = a.sync.id(&mut a.db).unwrap();
    let key = a.sync.export_key(&mut a.db).unwrap();
    let mut a = paged(close(a));
    assert_eq!(a.sync.id(&mut a.db).unwrap(), id);
    assert_eq!(a.sync.export_key(&mut a.db).unwrap(), key);
    let mut b = Node::memory();
    b.exec(TODO);
    b.sync.set_owner(&mut b.db, id).unwrap();
    sync_pair(&mut a, &mut b);
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    assert_eq!(
        b.rows("SELECT id FROM todo"),
        vec![vec![Value::Text("t1".into())]]
    );
    // Attached and closed without a write, a database saves no key: the next attach makes
    // another, which its first write saves.
    let mut c = paged(MemoryFile::new());
    c.exec(TODO);
    let mut c = paged(close(c));
    c.exec("INSERT INTO todo (id, title) VALUES ('c1', 'one')");
    let c_id = c.sync.id(&mut c.db).unwrap();
    let mut c = paged(close(c));
    assert_eq!(c.sync.id(&mut c.db).unwrap(), c_id);
    assert!(c.sync.verify(&mut c.db).unwrap().is_empty());
}

#[test]
fn a_tampered_message_is_rejected_whole() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one'), ('t2', 'two')");
    let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
    let (lb, hello_b) = b.sync.connect(&mut b.db).unwrap();
    b.sync.receive(&mut b.db, lb, &hello_a).unwrap();
    let out = a.sync.receive(&mut a.db, la, &hello_b).unwrap();
    // A answers B's HELLO with the writer lists (none) and a page of blocks; corrupt the
    // blocks: flip a byte near the end (inside the signature).
    let mut got_blocks = false;
    for mut m in out {
        if m[3] == 3 {
            got_blocks = true;
            let n = m.len();
            m[n - 5] ^= 0x40;
        }
        b.sync.receive(&mut b.db, lb, &m).unwrap();
    }
    assert!(got_blocks);
    let events = b.sync.take_events();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "rejected" && e.code == "BAD_SIGNATURE"),
        "{events:?}"
    );
    assert_eq!(
        b.rows("SELECT count(*) FROM todo"),
        vec![vec![Value::Integer(0)]]
    );
}

#[test]
fn sync_waits_for_an_open_transaction() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one')");
    let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
    let (lb, hello_b) = b.sync.connect(&mut b.db).unwrap();
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('mine', 'local')");
    // Calls that write the replica's state refuse while a transaction is open ...
    let e = b.sync.connect(&mut b.db).unwrap_err();
    assert_eq!(e.code(), "TRANSACTION");
    // ... and what a peer sends waits for it to end.
    assert!(b.sync.receive(&mut b.db, lb, &hello_a).unwrap().is_empty());
    let mut to_b = a.sync.receive(&mut a.db, la, &hello_b).unwrap();
    for m in to_b.drain(..) {
        assert!(b.sync.receive(&mut b.db, lb, &m).unwrap().is_empty());
    }
    assert_eq!(
        b.rows("SELECT count(*) FROM todo"),
        vec![vec![Value::Integer(1)]]
    );
    b.exec("ROLLBACK");
    let replies = b.sync.poll(&mut b.db, lb).unwrap();
    assert!(
        !replies.is_empty(),
        "the queued messages were handled and answered"
    );
    assert_eq!(
        b.rows("SELECT id FROM todo"),
        vec![vec![Value::Text("t1".into())]]
    );
}

/// Seeded runs: three databases write at random (inserts, updates, counter adds, deletes) and
/// sync in random pairs; after a last round of syncs every table and digest is identical.
#[test]
fn random_writes_on_three_replicas_converge() {
    let seeds = seeds();
    // The second table makes titles UNIQUE: replicas writing the same title clash, and every
    // replica must show the same one of the clashing rows.
    let unique = TODO.replace("title TEXT NOT NULL", "title TEXT NOT NULL UNIQUE");
    // The third has no counter: its changes are written into their records as the statements
    // make them (the capture's sink), where the others' wait for the commit.
    let plain = TODO.replace(" (COUNTER likes)", "");
    let tables = [TODO.to_string(), unique, plain];
    for (seed, ddl) in (0..seeds).flat_map(|s| tables.iter().map(move |t| (s, t.clone()))) {
        let mut next = numbers(seed);
        let mut nodes: Vec<Node> = (0..3).map(|_| Node::memory()).collect();
        let owner = {
            let n = &mut nodes[0];
            n.sync.id(&mut n.db).unwrap()
        };
        let ids: Vec<_> = nodes
            .iter_mut()
            .map(|n| n.sync.id(&mut n.db).unwrap())
            .collect();
        {
            let n = &mut nodes[0];
            n.sync.authorize(&mut n.db, "todo", ids).unwrap();
        }
        for n in nodes.iter_mut() {
            n.exec(&ddl);
            n.sync.set_owner(&mut n.db, owner).unwrap();
        }
        let (x, rest) = nodes.split_at_mut(1);
        for other in rest.iter_mut() {
            sync_pair(&mut x[0], other);
        }
        for _ in 0..40 {
            let i = next(3) as usize;
            let id = format!("r{}", next(8));
            let n = &mut nodes[i];
            let sql = match next(5) {
                0 | 1 => format!(
                    "INSERT INTO todo (id, title) VALUES ('{id}', 'n{i}') ON CONFLICT (id) DO UPDATE SET title = excluded.title"
                ),
                2 => format!("UPDATE todo SET done = {} WHERE id = '{id}'", next(2)),
                3 => format!("UPDATE todo SET likes = likes + {} WHERE id = '{id}'", next(5) + 1),
                _ => format!("DELETE FROM todo WHERE id = '{id}'"),
            };
            match n.db.exec_script(&sql) {
                Ok(_) => {}
                // A local clash with a title this replica already shows is refused, as SQL does.
                Err(e) if e.code() == "CONSTRAINT_UNIQUE" => {}
                Err(e) => panic!("seed {seed}: {sql}: {e}"),
            }
            if next(4) == 0 {
                let a = next(3) as usize;
                let b = (a + 1 + next(2) as usize) % 3;
                let (lo, hi) = (a.min(b), a.max(b));
                let (l, r) = nodes.split_at_mut(hi);
                sync_pair(&mut l[lo], &mut r[0]);
            }
        }
        for _ in 0..2 {
            for (a, b) in [(0, 1), (1, 2), (0, 2)] {
                let (l, r) = nodes.split_at_mut(b);
                sync_pair(&mut l[a], &mut r[0]);
            }
        }
        let all = "SELECT id, title, done, likes FROM todo ORDER BY id";
        let want = nodes[0].rows(all);
        let digest = {
            let n = &mut nodes[0];
            n.sync.state_digest(&mut n.db).unwrap()
        };
        for n in nodes.iter_mut() {
            assert_eq!(n.rows(all), want, "seed {seed}");
            assert_eq!(
                n.sync.state_digest(&mut n.db).unwrap(),
                digest,
                "seed {seed}"
            );
            assert!(n.sync.verify(&mut n.db).unwrap().is_empty(), "seed {seed}");
            assert!(n.db.check().unwrap().is_empty(), "seed {seed}");
        }
    }
}

/// Compaction and purge change history that was already saved: a reopened file must hold the
/// same rows and the redacted history, and verify.
#[test]
fn compaction_and_purge_are_kept_across_a_reopen() {
    let mut a = paged(MemoryFile::new());
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'secret'), ('t2', 'kept')");
    a.exec("UPDATE todo SET likes = likes + 3 WHERE id = 't2'");
    sync_pair(&mut a, &mut b);
    // Everything is acknowledged by B: compaction drops the history and keeps the rows.
    assert!(a.sync.compact(&mut a.db).unwrap() > 0);
    a.exec("INSERT INTO todo (id, title) VALUES ('t3', 'after')");
    let digest = a.sync.state_digest(&mut a.db).unwrap();
    let all = "SELECT id, title, likes FROM todo ORDER BY id";
    let rows = a.rows(all);
    let mut a = paged(close(a));
    assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
    assert_eq!(a.rows(all), rows);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());

    // Purge: the row goes here and on B, and its values leave the saved history.
    let mut c = paged(MemoryFile::new());
    c.exec(TODO);
    c.sync.set_owner(&mut c.db, a_id).unwrap();
    c.exec("SELECT 1");
    let c_id = c.sync.id(&mut c.db).unwrap();
    a.sync.authorize(&mut a.db, "todo", vec![c_id]).unwrap();
    sync_pair(&mut a, &mut c);
    c.exec("INSERT INTO todo (id, title) VALUES ('p1', 'erase me please')");
    sync_pair(&mut a, &mut c);
    assert!(c
        .sync
        .purge(&mut c.db, "todo", &[Value::Text("p1".into())])
        .unwrap());
    assert!(!c
        .sync
        .purge(&mut c.db, "todo", &[Value::Text("nope".into())])
        .unwrap());
    sync_pair(&mut a, &mut c);
    sync_pair(&mut a, &mut b);
    for n in [&mut a, &mut b, &mut c] {
        assert_eq!(
            n.rows("SELECT count(*) FROM todo WHERE id = 'p1'"),
            vec![vec![Value::Integer(0)]]
        );
    }
    // The value is in no tree of the database any more: not the table, not the saved history,
    // and no byte of either file holds it (the purge zeroes the pages copy-on-write freed), on
    // the replica that purged and on the one that learnt of it.
    let needle = b"erase me please";
    let c_file = close(c);
    let a_file = close(a);
    for (who, f) in [("c", &c_file), ("a", &a_file)] {
        assert!(
            !f.bytes().windows(needle.len()).any(|w| w == needle),
            "{who}'s file still holds the purged value"
        );
    }
    let mut a = paged(a_file);
    {
        let db = Database::open(Box::new(
            Paged::open(c_file.file.clone(), Options::default()).unwrap(),
        ))
        .unwrap();
        let st = db.storage();
        let sys = cairn_sql::SYSTEM_TREES;
        let mut scanned = 0;
        for tree in (0..8).chain(sys..sys + 8) {
            let Ok(mut cur) = st.scan(
                tree,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            ) else {
                continue;
            };
            while cur.next().unwrap() {
                scanned += 1;
                assert!(
                    !cur.value().windows(needle.len()).any(|w| w == needle),
                    "tree {tree} still holds the purged value"
                );
            }
        }
        assert!(scanned > 5, "the scan saw the trees ({scanned} entries)");
    }
    let mut c = paged(c_file);
    assert!(c.sync.verify(&mut c.db).unwrap().is_empty());
    assert_eq!(
        c.sync.state_digest(&mut c.db).unwrap(),
        a.sync.state_digest(&mut a.db).unwrap()
    );
}

/// A replica that subscribes to one scope of a scoped table receives only that scope.
#[test]
fn a_subscription_to_one_scope_receives_only_it() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    let ddl = "CREATE TABLE item (id TEXT PRIMARY KEY, list TEXT NOT NULL, name TEXT) REPLICATED (SCOPE list)";
    a.exec(ddl);
    b.exec(ddl);
    b.sync
        .subscribe(&mut b.db, vec!["item/list=home".into()])
        .unwrap();
    a.exec("INSERT INTO item VALUES ('1', 'home', 'lamp'), ('2', 'work', 'desk'), ('3', 'home', 'rug')");
    sync_pair(&mut a, &mut b);
    assert_eq!(
        b.rows("SELECT id FROM item ORDER BY id"),
        vec![vec![Value::Text("1".into())], vec![Value::Text("3".into())]]
    );
    assert_eq!(
        a.rows("SELECT count(*) FROM item"),
        vec![vec![Value::Integer(3)]]
    );
}

/// Two replicas insert different rows with the same UNIQUE value concurrently: after syncing,
/// both tables show the same one (the earlier write), and the other comes back if it goes.
#[test]
fn unique_conflicts_resolve_the_same_way_everywhere() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    let ddl = "CREATE TABLE member (id TEXT PRIMARY KEY, email TEXT UNIQUE, name TEXT) REPLICATED";
    a.exec(ddl);
    b.exec(ddl);
    let a_id = a.sync.id(&mut a.db).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "member", vec![b_id]).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    sync_pair(&mut a, &mut b);
    a.exec("INSERT INTO member VALUES ('m-a', 'x@example.com', 'from a')");
    b.exec("INSERT INTO member VALUES ('m-b', 'x@example.com', 'from b')");
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, email, name FROM member ORDER BY id";
    assert_eq!(a.rows(all).len(), 1, "{:?}", a.rows(all));
    assert_eq!(a.rows(all), b.rows(all));
    let winner = a.rows(all)[0][0].clone();
    // The visible row goes: the hidden one takes its place on both.
    let del = format!(
        "DELETE FROM member WHERE id = '{}'",
        match &winner {
            Value::Text(s) => s.clone(),
            _ => unreachable!(),
        }
    );
    a.exec(&del);
    sync_pair(&mut a, &mut b);
    assert_eq!(a.rows(all).len(), 1, "{:?}", a.rows(all));
    assert_ne!(a.rows(all)[0][0], winner);
    assert_eq!(a.rows(all), b.rows(all));
    assert!(a.db.check().unwrap().is_empty());
    assert!(b.db.check().unwrap().is_empty());
}

/// A replica that joins after the others compacted their history bootstraps from a snapshot.
#[test]
fn a_late_replica_bootstraps_from_a_snapshot() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one'), ('t2', 'two')");
    a.exec("UPDATE todo SET likes = likes + 4 WHERE id = 't1'");
    sync_pair(&mut a, &mut b);
    assert!(a.sync.compact(&mut a.db).unwrap() > 0);
    let mut late = paged(MemoryFile::new());
    late.exec(TODO);
    late.sync.set_owner(&mut late.db, a_id).unwrap();
    sync_pair(&mut a, &mut late);
    let all = "SELECT id, title, likes FROM todo ORDER BY id";
    assert_eq!(late.rows(all), a.rows(all));
    assert_eq!(
        late.sync.state_digest(&mut late.db).unwrap(),
        a.sync.state_digest(&mut a.db).unwrap()
    );
    // And keeps it across a reopen.
    let mut late = paged(close(late));
    assert_eq!(late.rows(all), a.rows(all));
    assert_eq!(
        late.sync.state_digest(&mut late.db).unwrap(),
        a.sync.state_digest(&mut a.db).unwrap()
    );
}

/// A local commit leaves the saved clock alone (its record's HLC is in the log): after a
/// reopen, with or without history dropped, a new write must still be newer than the old one,
/// here and on a peer. The wall clock stands still, so only the saved state orders them.
#[test]
fn the_clock_survives_a_reopen() {
    let mut a = paged(MemoryFile::new());
    let mut b = Node::memory();
    a.exec(TODO);
    b.exec(TODO);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    let title = "SELECT title FROM todo WHERE id = 't1'";
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one')");
    a.exec("UPDATE todo SET title = 'two' WHERE id = 't1'");
    let mut a = paged(close(a));
    a.exec("UPDATE todo SET title = 'three' WHERE id = 't1'");
    sync_pair(&mut a, &mut b);
    assert_eq!(b.rows(title), vec![vec![Value::Text("three".into())]]);
    // History dropped: the clock is saved on its own again.
    assert!(a.sync.compact(&mut a.db).unwrap() > 0);
    let mut a = paged(close(a));
    a.exec("UPDATE todo SET title = 'four' WHERE id = 't1'");
    sync_pair(&mut a, &mut b);
    assert_eq!(a.rows(title), vec![vec![Value::Text("four".into())]]);
    assert_eq!(b.rows(title), vec![vec![Value::Text("four".into())]]);
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
}

/// Marks a database's saved sync state with `layout` (1: no `layout` key), shaped as the
/// layouts 1 to 5 kept it as far as it takes to tell them apart: the secret key in the file
/// (meta `identity`, from the key store of the device it was on) in place of `author`; and for
/// the pre-release layouts 1 to 4 the tail beside the meta tree (in its catalog entry), not in
/// the store's root bytes.
fn set_layout(file: Closed, layout: u8) -> MemoryFile {
    let meta = cairn_sql::SYSTEM_TREES + 1;
    let store = Paged::open(OnDisk(file.file), Options::default()).unwrap();
    let mut db = Database::open(Box::new(store)).unwrap();
    let st = db.storage_mut();
    st.begin().unwrap();
    if layout <= 5 {
        let key = file.keys.get().expect("a key saved");
        st.put(meta, b"identity", &key).unwrap();
        st.delete(meta, b"author").unwrap();
    }
    if layout <= 4 {
        let tail = st.root_meta().unwrap();
        assert!(!tail.is_empty(), "some records wait in the tail");
        st.set_tree_meta(meta, &tail).unwrap();
        st.set_root_meta(&[]).unwrap();
    }
    if layout == 1 {
        st.delete(meta, b"layout").unwrap();
    } else {
        st.put(meta, b"layout", &[layout]).unwrap();
    }
    st.commit().unwrap();
    file_of(db)
}

#[test]
fn pending_records_survive_a_reopen() {
    let mut a = paged(MemoryFile::new());
    a.exec(TODO);
    let mut b = Node::memory();
    b.exec(TODO);
    // Enough single commits that some pending records have moved from the tail to the log
    // and some have not; then some sealed, and more pending.
    for i in 0..40 {
        a.exec(&format!(
            "INSERT INTO todo (id, title) VALUES ('a{i}', 'one {i}')"
        ));
    }
    b.sync
        .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
        .unwrap();
    sync_pair(&mut a, &mut b);
    let b_id = b.sync.id(&mut b.db).unwrap();
    for i in 0..200 {
        a.exec(&format!(
            "UPDATE todo SET likes = likes + 1 WHERE id = 'a{}'",
            i % 40
        ));
    }
    let digest = a.sync.state_digest(&mut a.db).unwrap();
    let mut a = paged(close(a));
    assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    // The chain goes on: B takes every record without a gap or a fork.
    a.exec("INSERT INTO todo (id, title) VALUES ('z', 'last')");
    // Layout 6: the peer B met under its key and device, the new record in the tail in the
    // root bytes.
    let meta = cairn_sql::SYSTEM_TREES + 1;
    let b_device = b.sync.device(&mut b.db).unwrap();
    assert!(b_device.is_some());
    let st = a.db.storage();
    assert_eq!(st.get(meta, b"layout").unwrap(), Some(vec![6]));
    let mut peer_key = b"peer/".to_vec();
    peer_key.extend_from_slice(&cairn_sync::link::peer_key(b_id, b_device).0);
    assert!(st.get(meta, &peer_key).unwrap().is_some());
    assert!(!st.root_meta().unwrap().is_empty(), "the new record");
    assert!(st.tree_meta(meta).unwrap().is_empty());
    let mut b = Node::memory();
    b.exec(TODO);
    b.sync
        .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
        .unwrap();
    sync_pair(&mut a, &mut b);
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    let all = "SELECT id, title, likes FROM todo ORDER BY id";
    assert_eq!(b.rows(all).len(), 41);
    assert_eq!(a.rows(all), b.rows(all));
    // Reopened once more after the sealing, still whole.
    let digest = a.sync.state_digest(&mut a.db).unwrap();
    let mut a = paged(close(a));
    assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
}

/// A sync state of another layout than 5 or 6 is refused at attach with `SYNC_LAYOUT`, not
/// misread: the pre-release layouts 1 to 4 (1 has no `layout` key) and a newer one. The file
/// is left as it was.
#[test]
fn other_sync_layouts_are_refused_and_left_as_they_are() {
    let mut a = paged(MemoryFile::new());
    a.exec(TODO);
    for i in 0..5 {
        a.exec(&format!(
            "INSERT INTO todo (id, title) VALUES ('a{i}', 'one {i}')"
        ));
    }
    let file = close(a);
    for layout in [1, 2, 3, 4, 9] {
        let keys = file.keys.clone();
        let file = set_layout(file.clone(), layout);
        let before = file.bytes().to_vec();
        let store = Paged::open(OnDisk(file), Options::default()).unwrap();
        let mut db = Database::open(Box::new(store)).unwrap();
        let e = Sync::attach(&mut db, now, Box::new(keys))
            .err()
            .unwrap_or_else(|| panic!("layout {layout} is refused"));
        assert_eq!(e.code(), "SYNC_LAYOUT", "layout {layout}: {e}");
        let older = if layout < 5 {
            "older pre-release"
        } else {
            "newer"
        };
        assert!(e.to_string().contains(older), "layout {layout}: {e}");
        assert_eq!(file_of(db).bytes(), &before[..], "layout {layout}");
    }
}

/// A row of a table whose only columns besides the key are counters is recorded by its
/// additions (a SET names at least one column): the history stays readable, here and on a
/// peer.
#[test]
fn a_table_of_counters_alone_is_recorded_and_reopens() {
    let table = "CREATE TABLE c (id TEXT PRIMARY KEY, n INTEGER) REPLICATED (COUNTER n)";
    let mut a = paged(MemoryFile::new());
    a.exec(table);
    a.exec("INSERT INTO c VALUES ('x', 5)");
    a.exec("UPDATE c SET n = n + 2 WHERE id = 'x'");
    let mut a = paged(close(a));
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    let mut b = Node::memory();
    b.exec(table);
    b.sync
        .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
        .unwrap();
    sync_pair(&mut a, &mut b);
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    let all = "SELECT id, n FROM c";
    assert_eq!(
        b.rows(all),
        vec![vec![Value::Text("x".into()), Value::Integer(7)]]
    );
    assert_eq!(a.rows(all), b.rows(all));
}

#[test]
fn an_idle_seal_signs_pending_records_and_keeps_the_blocks() {
    let mut a = paged(MemoryFile::new());
    a.exec(TODO);
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one')");
    a.exec("INSERT INTO todo (id, title) VALUES ('t2', 'two'), ('t3', 'three')");
    assert_eq!(a.sync.pending_records(), 2, "one record per commit");
    // Inside a transaction nothing is sealed (the commit hook owns the storage transaction).
    a.exec("BEGIN");
    a.exec("INSERT INTO todo (id, title) VALUES ('t4', 'four')");
    assert_eq!(a.sync.seal(&mut a.db).unwrap(), 0);
    a.exec("COMMIT");
    assert_eq!(a.sync.pending_records(), 3);
    assert_eq!(
        a.sync.seal(&mut a.db).unwrap(),
        1,
        "one block for the one chain"
    );
    assert_eq!(a.sync.pending_records(), 0);
    assert_eq!(a.sync.seal(&mut a.db).unwrap(), 0, "nothing left to seal");
    a.exec("UPDATE todo SET done = 1 WHERE id = 't1'");
    assert_eq!(a.sync.pending_records(), 1);

    // The sealed block is in the file: after a reopen only the later record is pending, the
    // history verifies, and a peer gets every row.
    let digest = a.sync.state_digest(&mut a.db).unwrap();
    let mut a = paged(close(a));
    assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
    assert_eq!(a.sync.pending_records(), 1);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    let mut b = Node::memory();
    b.exec(TODO);
    b.sync
        .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
        .unwrap();
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, title, done FROM todo ORDER BY id";
    assert_eq!(b.rows(all).len(), 4);
    assert_eq!(a.rows(all), b.rows(all));
}

fn crash_title(i: usize) -> String {
    format!("crash test row {i}, with a title long enough to fill the tail")
}

/// The writes of [`pending_records_survive_a_crash_at_every_write`], until the first error:
/// single commits enough to move the tail of pending records to the log more than once, a
/// seal, counter updates (corrected from the merged state), another seal, more inserts.
fn crash_workload(db: &mut Database, sync: &Sync) -> cairn_sql::Result<()> {
    // 60 records of about 90 bytes: the 2 KiB tail fills twice.
    for i in 0..60 {
        db.execute(
            &format!(
                "INSERT INTO todo (id, title) VALUES ('c{i:02}', '{}')",
                crash_title(i)
            ),
            &[],
        )?;
    }
    sync.seal(db)?;
    for i in 0..10 {
        db.execute(
            &format!("UPDATE todo SET likes = likes + 1 WHERE id = 'c{i:02}'"),
            &[],
        )?;
    }
    sync.seal(db)?;
    for i in 60..70 {
        db.execute(
            &format!(
                "INSERT INTO todo (id, title) VALUES ('c{i:02}', '{}')",
                crash_title(i)
            ),
            &[],
        )?;
    }
    Ok(())
}

/// A crash at any write of the file leaves a replica whose pending records and blocks agree
/// with its table: the rows of some prefix of the commits, every record of theirs either
/// pending or sealed, none both (a record sealed twice would reach a peer as a fork), and the
/// history verifies. After sealing and a reopen, nothing is pending and a peer still takes
/// everything without a complaint.
#[test]
fn pending_records_survive_a_crash_at_every_write() {
    use cairn_store::fault::{CrashMode, FaultFile};
    let (base, keys) = {
        let mut a = paged(MemoryFile::new());
        a.exec(TODO);
        a.exec("INSERT INTO todo (id, title) VALUES ('base', 'before the crash')");
        let c = close(a);
        (c.file.into_bytes(), c.keys)
    };
    let open = |file: FaultFile| {
        let store = Paged::open(file, Options::default()).unwrap();
        let mut db = Database::open(Box::new(store)).unwrap();
        let sync = Sync::attach(&mut db, now, Box::new(keys.clone())).unwrap();
        (db, sync)
    };
    // The writes the whole workload makes.
    let total = {
        let file = FaultFile::from_bytes(base.clone());
        let (mut db, sync) = open(file.clone());
        let start = file.ops();
        crash_workload(&mut db, &sync).unwrap();
        file.ops() - start
    };
    assert!(total > 100, "{total} writes");
    let all = "SELECT id, title, done, likes FROM todo ORDER BY id";
    for k in 0..total {
        let file = FaultFile::from_bytes(base.clone());
        let (mut db, sync) = open(file.clone());
        file.fail_at(file.ops() + k, true);
        assert!(crash_workload(&mut db, &sync).is_err(), "write {k} fails");
        let mode = if k % 2 == 0 {
            CrashMode::DropUnflushed
        } else {
            CrashMode::TearLast
        };
        let image = file.crash_image(mode);
        drop((db, sync));
        let mut a = paged(Closed {
            file: MemoryFile::from_bytes(image),
            keys: keys.clone(),
        });
        assert!(a.sync.verify(&mut a.db).unwrap().is_empty(), "write {k}");
        let rows = a.rows(all);
        // The inserts that committed are a prefix of the workload's.
        let ids: Vec<String> = rows
            .iter()
            .filter_map(|r| match &r[0] {
                Value::Text(t) if t.starts_with('c') => Some(t.clone()),
                _ => None,
            })
            .collect();
        let expect: Vec<String> = (0..ids.len()).map(|i| format!("c{i:02}")).collect();
        assert_eq!(ids, expect, "write {k}");
        let mut b = Node::memory();
        b.exec(TODO);
        b.sync
            .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
            .unwrap();
        sync_pair(&mut a, &mut b);
        let events = b.sync.take_events();
        assert!(
            events.iter().all(|e| e.kind == "applied"),
            "write {k}: {events:?}"
        );
        assert_eq!(b.rows(all), rows, "write {k}: the peer holds the table");
        assert_eq!(a.sync.pending_records(), 0, "write {k}");
        // Sealed once: after a reopen nothing is pending, and the peer hears nothing new.
        let mut a = paged(close(a));
        assert_eq!(a.sync.pending_records(), 0, "write {k}");
        assert!(a.sync.verify(&mut a.db).unwrap().is_empty(), "write {k}");
        a.exec("INSERT INTO todo (id, title) VALUES ('after', 'the reopen')");
        sync_pair(&mut a, &mut b);
        let events = b.sync.take_events();
        assert!(
            events.iter().all(|e| e.kind == "applied"),
            "write {k}: {events:?}"
        );
        assert_eq!(a.rows(all), b.rows(all), "write {k}");
    }
}

/// With small pages the tail of pending records does not fit in a catalog cell and the store
/// keeps it in overflow pages: slower, and still whole across reopens.
#[test]
fn the_tail_of_pending_records_works_with_small_pages() {
    let opts = Options {
        page_size: 512,
        ..Options::default()
    };
    let open = |file: Closed| {
        let store = Paged::open(OnDisk(file.file), opts.clone()).unwrap();
        node(Database::open(Box::new(store)).unwrap(), file.keys)
    };
    let mut a = open(MemoryFile::new().into());
    a.exec(TODO);
    for i in 0..30 {
        a.exec(&format!(
            "INSERT INTO todo (id, title) VALUES ('s{i:02}', 'a row long enough to fill a small page quickly {i}')"
        ));
        if i % 10 == 9 {
            a = open(close(a));
        }
    }
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    assert_eq!(
        a.db.storage_mut().integrity_check().unwrap(),
        Vec::<String>::new()
    );
    let mut b = Node::memory();
    b.exec(TODO);
    b.sync
        .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
        .unwrap();
    sync_pair(&mut a, &mut b);
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    let all = "SELECT id, title FROM todo ORDER BY id";
    assert_eq!(b.rows(all).len(), 30);
    assert_eq!(a.rows(all), b.rows(all));
}

/// The SQL layer captures rows in the sync wire encoding of a value, which the hook copies
/// into its ops unchanged: it must be byte for byte what the sync crate's writer writes, for
/// every kind of value, and a failed statement's capture must be dropped whole.
#[test]
fn captured_values_are_in_the_wire_encoding() {
    use cairn_sql::Catalog;
    use cairn_sql::{Changes, CommitHook, Correction, Storage};
    use std::cell::RefCell;
    use std::rc::Rc;

    type Seen = Vec<(
        String,
        Vec<Vec<u8>>,
        Option<(Vec<usize>, Vec<(usize, i64)>)>,
    )>;
    struct Recorder(Rc<RefCell<Seen>>);
    impl CommitHook for Recorder {
        fn before_commit(
            &mut self,
            _: &mut dyn Storage,
            _: &Catalog,
            _: cairn_sql::SchemaStamp,
            changes: &Changes,
        ) -> cairn_sql::Result<Vec<Correction>> {
            let mut seen = self.0.borrow_mut();
            for ch in changes.iter() {
                let row = (0..ch.row.len())
                    .map(|c| ch.row.value(c).to_vec())
                    .collect();
                let set = ch.set.map(|s| (s.columns.to_vec(), s.adds.to_vec()));
                seen.push((ch.table.to_string(), row, set));
            }
            Ok(Vec::new())
        }
        fn after_commit(&mut self, _: bool) {}
    }

    let seen = Rc::new(RefCell::new(Seen::new()));
    let mut db = Database::memory();
    db.set_commit_hook(Box::new(Recorder(seen.clone())));
    db.execute(
        "CREATE TABLE t (id TEXT PRIMARY KEY, s TEXT, n INTEGER, c INTEGER, r REAL, b BLOB) \
         REPLICATED (SCOPE s, COUNTER c)",
        &[],
    )
    .expect("create");
    let rows = [
        vec![
            Value::Text("a".into()),
            Value::Text("x".into()),
            Value::Integer(-1),
            Value::Integer(5),
            Value::Real(1.5),
            Value::Blob(vec![0, 255]),
        ],
        vec![
            Value::Text("é".repeat(100)),
            Value::Text("y".into()),
            Value::Integer(i64::MIN),
            Value::Integer(0),
            Value::Null,
            Value::Blob(vec![7; 300]),
        ],
    ];
    db.execute("BEGIN", &[]).expect("begin");
    for r in &rows {
        db.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", r)
            .expect("insert");
    }
    // A failed statement leaves no capture behind.
    assert!(db
        .execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", &rows[0])
        .is_err());
    // Moves the first row to another scope: a delete from the old one, then the whole row.
    db.execute("UPDATE t SET s = 'z', c = c + 2 WHERE id = 'a'", &[])
        .expect("update");
    db.execute("DELETE FROM t WHERE id = 'a'", &[])
        .expect("delete");
    db.execute("COMMIT", &[]).expect("commit");

    let enc =
        |r: &[Value]| -> Vec<Vec<u8>> { r.iter().map(cairn_sync::wire::value_bytes).collect() };
    let mut moved = rows[0].clone();
    moved[1] = Value::Text("z".into());
    moved[3] = Value::Integer(7);
    let t = || "t".to_string();
    let expected: Seen = vec![
        (
            t(),
            enc(&rows[0]),
            Some((vec![0, 1, 2, 4, 5], vec![(3, 5)])),
        ),
        (t(), enc(&rows[1]), Some((vec![0, 1, 2, 4, 5], vec![]))),
        (t(), enc(&rows[0]), None),
        (t(), enc(&moved), Some((vec![0, 1, 2, 4, 5], vec![(3, 7)]))),
        (t(), enc(&moved), None),
    ];
    assert_eq!(*seen.borrow(), expected);
}

/// An UPDATE of a replicated table that sets no key, indexed or scope column, of a table
/// without counters, is made where the row is stored and captures only the key, the scope
/// column and the columns set. Its records must be byte for byte those of the general path,
/// which captures the whole row: the same statements run on two databases with one key pair,
/// on one as written and on the other with `id = id` added to each SET (a key column set,
/// which takes the general path and changes nothing), must send a peer the same messages.
#[test]
fn updates_made_in_place_record_what_the_general_path_records() {
    const SCHEMA: &str = "CREATE TABLE t (id TEXT PRIMARY KEY, s TEXT NOT NULL, n INTEGER, \
                          x TEXT, r REAL, m TEXT NOT NULL, u INTEGER UNIQUE) REPLICATED (SCOPE s); \
                          CREATE TABLE p (k TEXT PRIMARY KEY, v BLOB) REPLICATED; \
                          CREATE INDEX t_n ON t (u)";
    // Statements, each with `{}` where the general path's `, id = id` (or `, k = k`) goes.
    let updates = [
        "UPDATE t SET n = n + 1{} WHERE id = 'a'",
        "UPDATE t SET x = 'same'{} WHERE id IN ('c', 'a', 'b', 'zz')",
        "UPDATE t SET x = 'same'{} WHERE id IN ('a', 'b')",
        "UPDATE t SET n = 5, n = 6, x = x || '!'{} WHERE id BETWEEN 'b' AND 'd'",
        "UPDATE t SET r = n{} WHERE n > 2",
        "UPDATE t SET r = 1.5, n = '7'{} WHERE s = 'two'",
        "UPDATE t SET x = NULL{} WHERE x LIKE 's%'",
        "UPDATE OR IGNORE t SET m = NULL{} WHERE id = 'a'",
        "BEGIN",
        "UPDATE t SET n = 0{}",
        "INSERT INTO t VALUES ('e', 'two', 1, 'new', NULL, 'm', 9)",
        "UPDATE t SET x = 'é'{} WHERE id = 'e'",
        "UPDATE p SET v = x'00ff'{} WHERE k = 'k1'",
        "UPDATE p SET v = NULL{} WHERE k = 'k1'",
        "COMMIT",
    ];
    // A value long enough for a two-byte length.
    let long = format!("UPDATE p SET v = x'{}'{{}}", "ab".repeat(300));
    let run = |node: &mut Node, general: bool| {
        node.exec(SCHEMA);
        node.exec(
            "INSERT INTO t VALUES ('a', 'one', 1, 'p', 0.5, 'm', 1), \
             ('b', 'one', 2, 'same', NULL, 'm', 2), ('c', 'two', 3, 'q', NULL, 'm', NULL), \
             ('d', 'two', NULL, NULL, 2.0, 'm', 4); \
             INSERT INTO p VALUES ('k1', NULL), ('k2', x'01')",
        );
        for u in updates.into_iter().chain([long.as_str()]) {
            let key = if u.starts_with("UPDATE p") { "k" } else { "id" };
            let extra = if general {
                format!(", {key} = {key}")
            } else {
                String::new()
            };
            node.exec(&u.replace("{}", &extra));
        }
        // A failed statement's capture is dropped, in a transaction that commits.
        node.exec("BEGIN");
        assert!(node
            .db
            .execute("UPDATE t SET m = NULL WHERE n = 0", &[])
            .is_err());
        node.exec("UPDATE t SET x = 'after' WHERE id = 'd'; COMMIT");
    };
    let (mut a, mut b) = one_key_pair(run);
    let all = "SELECT * FROM t ORDER BY id";
    assert_eq!(a.rows(all), b.rows(all));
    assert_eq!(
        a.rows("SELECT * FROM p ORDER BY k"),
        b.rows("SELECT * FROM p ORDER BY k")
    );

    // What each sends a new peer: the records, sealed into signed blocks.
    let (from_a, digest_a) = sent_to_new_peer(&mut a, SCHEMA, all);
    let (from_b, digest_b) = sent_to_new_peer(&mut b, SCHEMA, all);
    assert!(from_a.iter().map(Vec::len).sum::<usize>() > 1000);
    assert!(
        from_a == from_b,
        "the two paths sent a peer different messages"
    );
    assert_eq!(digest_a, digest_b);
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );

    // The two forms take different paths: the in-place capture leaves the columns it does
    // not need empty, the general one holds the whole row.
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Seen::new()));
    let mut db = Database::memory();
    db.set_commit_hook(Box::new(Recorder(seen.clone())));
    db.exec_script(SCHEMA).unwrap();
    db.exec_script("INSERT INTO t VALUES ('a', 'one', 1, 'p', 0.5, 'm', 1)")
        .unwrap();
    seen.borrow_mut().clear();
    db.exec_script("UPDATE t SET n = 2 WHERE id = 'a'; UPDATE t SET n = 3, id = id WHERE id = 'a'")
        .unwrap();
    let enc = |v: Value| cairn_sync::wire::value_bytes(&v);
    let (id, s) = (enc(Value::Text("a".into())), enc(Value::Text("one".into())));
    let empty = Vec::new();
    let rows: Vec<_> = seen.borrow().iter().map(|c| c.1.clone()).collect();
    assert_eq!(
        rows,
        vec![
            vec![
                id.clone(),
                s.clone(),
                enc(Value::Integer(2)),
                empty.clone(),
                empty.clone(),
                empty.clone(),
                empty
            ],
            vec![
                id,
                s,
                enc(Value::Integer(3)),
                enc(Value::Text("p".into())),
                enc(Value::Real(0.5)),
                enc(Value::Text("m".into())),
                enc(Value::Integer(1))
            ],
        ]
    );
}

/// What the SQL layer captured, per change: its table, its row's values (encoded) and the
/// columns its SET sets (None for a delete).
type Seen = Vec<(String, Vec<Vec<u8>>, Option<Vec<usize>>)>;

/// A commit hook that keeps what the SQL layer captured.
struct Recorder(std::rc::Rc<std::cell::RefCell<Seen>>);

impl cairn_sql::CommitHook for Recorder {
    fn before_commit(
        &mut self,
        _: &mut dyn cairn_sql::Storage,
        _: &cairn_sql::Catalog,
        _: cairn_sql::SchemaStamp,
        changes: &cairn_sql::Changes,
    ) -> cairn_sql::Result<Vec<cairn_sql::Correction>> {
        assert_eq!(changes.iter().len(), changes.len());
        for ch in changes.iter() {
            let row = (0..ch.row.len()).map(|c| ch.row.value(c).to_vec());
            let set = ch.set.map(|s| s.columns.to_vec());
            self.0
                .borrow_mut()
                .push((ch.table.to_string(), row.collect(), set));
        }
        Ok(Vec::new())
    }
    fn after_commit(&mut self, _: bool) {}
}

/// Inserts of whole rows into one table, one after the other, share one entry of the
/// capture: a failed statement's rows are cut from it, and other changes between them end it.
#[test]
fn a_run_of_inserts_is_captured_row_by_row_and_cut_by_a_failed_statement() {
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Seen::new()));
    let mut db = Database::memory();
    db.set_commit_hook(Box::new(Recorder(seen.clone())));
    db.exec_script(
        "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, x TEXT) REPLICATED; \
         CREATE TABLE p (k TEXT PRIMARY KEY, v BLOB) REPLICATED",
    )
    .unwrap();
    seen.borrow_mut().clear();
    db.exec_script(
        "BEGIN; \
         INSERT INTO t VALUES ('a', 1, 'one'), ('b', 2, NULL); \
         INSERT INTO t VALUES ('c', 300, 'three')",
    )
    .unwrap();
    // The first row is captured, then the second fails: the statement's capture goes whole.
    assert!(db
        .exec_script("INSERT INTO t VALUES ('d', 4, 'four'), ('a', 5, 'five')")
        .is_err());
    db.exec_script(
        "INSERT INTO t VALUES ('e', 5, 'five'); \
         INSERT INTO p VALUES ('k', x'00'); \
         INSERT INTO t VALUES ('f', 6, 'six'); \
         UPDATE t SET n = 7 WHERE id = 'a'; \
         INSERT INTO t VALUES ('g', 8, 'eight'); \
         DELETE FROM t WHERE id = 'b'; \
         COMMIT",
    )
    .unwrap();
    let enc = |v: Value| cairn_sync::wire::value_bytes(&v);
    let text = |s: &str| enc(Value::Text(s.into()));
    let row = |id: &str, n: i64, x: Option<&str>| {
        vec![
            text(id),
            enc(Value::Integer(n)),
            x.map_or(enc(Value::Null), text),
        ]
    };
    let all = Some(vec![0, 1, 2]);
    let t = |r: Vec<Vec<u8>>, set: Option<Vec<usize>>| ("t".to_string(), r, set);
    assert_eq!(
        *seen.borrow(),
        vec![
            t(row("a", 1, Some("one")), all.clone()),
            t(row("b", 2, None), all.clone()),
            t(row("c", 300, Some("three")), all.clone()),
            t(row("e", 5, Some("five")), all.clone()),
            (
                "p".to_string(),
                vec![text("k"), enc(Value::Blob(vec![0]))],
                Some(vec![0, 1])
            ),
            t(row("f", 6, Some("six")), all.clone()),
            t(
                vec![text("a"), enc(Value::Integer(7)), vec![]],
                Some(vec![1])
            ),
            t(row("g", 8, Some("eight")), all.clone()),
            t(row("b", 2, None), None),
        ]
    );
}

/// The hook recognizes an unchanged catalog by its tables' definitions in order: tables
/// created out of name order, one added, one altered, one dropped and created again, each
/// followed by writes, must all be recorded, and a peer that syncs gets every row.
#[test]
fn every_schema_change_between_writes_is_registered() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    let tables = [
        "CREATE TABLE zeta (id TEXT PRIMARY KEY, v INTEGER) REPLICATED",
        "CREATE TABLE alpha (id TEXT PRIMARY KEY, v INTEGER) REPLICATED",
        "CREATE TABLE plain (id INTEGER PRIMARY KEY, v INTEGER)",
    ];
    for n in [&mut a, &mut b] {
        for t in tables {
            n.exec(t);
        }
    }
    a.exec("INSERT INTO zeta VALUES ('z1', 1); INSERT INTO alpha VALUES ('a1', 1)");
    for n in [&mut a, &mut b] {
        n.exec("CREATE TABLE mid (id TEXT PRIMARY KEY, v INTEGER) REPLICATED");
    }
    a.exec("INSERT INTO mid VALUES ('m1', 1); INSERT INTO alpha VALUES ('a2', 2)");
    for n in [&mut a, &mut b] {
        n.exec("ALTER TABLE alpha ADD COLUMN w TEXT");
    }
    a.exec("INSERT INTO alpha VALUES ('a3', 3, 'three'); UPDATE zeta SET v = 10 WHERE id = 'z1'");
    a.exec("DROP TABLE zeta");
    a.exec("CREATE TABLE zeta (id TEXT PRIMARY KEY, v INTEGER) REPLICATED");
    a.exec("INSERT INTO zeta VALUES ('z2', 2); INSERT INTO mid VALUES ('m2', 2)");
    sync_pair(&mut a, &mut b);
    for (table, want) in [
        ("alpha", vec!["a1", "a2", "a3"]),
        ("mid", vec!["m1", "m2"]),
        ("zeta", vec!["z1", "z2"]),
    ] {
        let got: Vec<Value> = b
            .rows(&format!("SELECT id FROM {table} ORDER BY id"))
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        let want: Vec<Value> = want.into_iter().map(|s| Value::Text(s.into())).collect();
        assert_eq!(got, want, "{table} on the peer");
    }
    assert_eq!(
        b.rows("SELECT w FROM alpha WHERE id = 'a3'"),
        vec![vec![Value::Text("three".into())]]
    );
    assert_eq!(
        b.rows("SELECT v FROM zeta WHERE id = 'z1'"),
        vec![vec![Value::Integer(10)]]
    );
}

/// A column one replica added first: its changes reach a replica that has not added it yet,
/// which keeps them (no SCHEMA_MISMATCH) and shows the rows without it; once that replica adds
/// the column, the values come into its table at its next sync step, and writes of either go
/// on converging.
#[test]
fn values_of_a_column_a_peer_added_first_are_kept_until_it_is_added() {
    let mut a = Node::memory();
    let mut b = paged(MemoryFile::new());
    for n in [&mut a, &mut b] {
        n.exec("CREATE TABLE t (id TEXT PRIMARY KEY, v INTEGER) REPLICATED");
    }
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "t", vec![b_id]).unwrap();
    a.exec("ALTER TABLE t ADD COLUMN w TEXT");
    a.exec("INSERT INTO t VALUES ('x', 1, 'one'), ('y', 2, NULL)");
    a.exec("UPDATE t SET w = 'two' WHERE id = 'y'");
    sync_pair(&mut a, &mut b);
    let events = b.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    assert_eq!(
        b.rows("SELECT id, v FROM t ORDER BY id"),
        vec![
            vec![Value::Text("x".into()), Value::Integer(1)],
            vec![Value::Text("y".into()), Value::Integer(2)],
        ]
    );
    // Kept across a reopen, then shown once the column is there.
    let mut b = paged(close(b));
    b.exec("ALTER TABLE t ADD COLUMN w TEXT");
    b.exec("UPDATE t SET v = 3 WHERE id = 'x'");
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, v, w FROM t ORDER BY id";
    let want = vec![
        vec![
            Value::Text("x".into()),
            Value::Integer(3),
            Value::Text("one".into()),
        ],
        vec![
            Value::Text("y".into()),
            Value::Integer(2),
            Value::Text("two".into()),
        ],
    ];
    assert_eq!(b.rows(all), want);
    assert_eq!(a.rows(all), want);
    assert_eq!(
        a.sync.state_digest(&mut a.db).unwrap(),
        b.sync.state_digest(&mut b.db).unwrap()
    );
}

/// A column added inside a transaction, after rows were written and before more: the rows
/// written before it are recorded with the columns they had (the new one NULL there, as in
/// the table), those after with all of them, and a peer that added the column gets both.
#[test]
fn a_column_added_inside_a_transaction_between_writes_is_recorded() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    for n in [&mut a, &mut b] {
        n.exec("CREATE TABLE t (id TEXT PRIMARY KEY, v INTEGER) REPLICATED");
    }
    a.exec(
        "BEGIN; INSERT INTO t VALUES ('before', 1); ALTER TABLE t ADD COLUMN w TEXT; \
         INSERT INTO t VALUES ('after', 2, 'two'); COMMIT",
    );
    b.exec("ALTER TABLE t ADD COLUMN w TEXT");
    sync_pair(&mut a, &mut b);
    let want = vec![
        vec![
            Value::Text("after".into()),
            Value::Integer(2),
            Value::Text("two".into()),
        ],
        vec![Value::Text("before".into()), Value::Integer(1), Value::Null],
    ];
    assert_eq!(a.rows("SELECT id, v, w FROM t ORDER BY id"), want);
    assert_eq!(b.rows("SELECT id, v, w FROM t ORDER BY id"), want);
}

/// Peers are saved one key each and only when they change: after a reopen A still knows what
/// each peer acknowledged, so compaction keeps what the peer that fell behind lacks, and that
/// peer then catches up from the history rather than a snapshot.
#[test]
fn known_peers_survive_a_reopen_and_hold_back_compaction() {
    let mut a = paged(MemoryFile::new());
    let mut b = Node::memory();
    let mut c = Node::memory();
    for n in [&mut a, &mut b, &mut c] {
        n.exec(TODO);
    }
    let a_id = a.sync.id(&mut a.db).unwrap();
    for n in [&mut b, &mut c] {
        n.sync.set_owner(&mut n.db, a_id).unwrap();
    }
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'seen by both')");
    sync_pair(&mut a, &mut b);
    sync_pair(&mut a, &mut c);
    a.exec("INSERT INTO todo (id, title) VALUES ('t2', 'seen by b only')");
    sync_pair(&mut a, &mut b);
    // Many saves since the peers last changed: they are not written again.
    for i in 0..20 {
        a.exec(&format!(
            "UPDATE todo SET likes = likes + 1 WHERE id = 't{}'",
            1 + i % 2
        ));
    }
    sync_pair(&mut a, &mut b);
    let mut a = paged(close(a));
    // B has everything, C only the first block: only what C has is dropped.
    let dropped = a.sync.compact(&mut a.db).unwrap();
    assert_eq!(dropped, 1, "compaction kept what c lacks");
    sync_pair(&mut a, &mut c);
    let events = c.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    let all = "SELECT id, title, likes FROM todo ORDER BY id";
    assert_eq!(c.rows(all), a.rows(all));
    assert_eq!(c.rows(all).len(), 2);
}

/// What a fresh load of `n`'s file (on the same device) reports as pending: records, and
/// whether any.
fn pending_as_stored(n: &mut Node) -> (usize, bool) {
    let bytes = n.db.export().unwrap();
    let n = paged(Closed {
        file: MemoryFile::from_bytes(bytes),
        keys: n.keys.clone(),
    });
    (n.sync.pending_records(), n.sync.has_pending())
}

/// The pending count `n` reports is the one its file holds.
fn assert_pending_as_stored(n: &mut Node, after: &str) {
    let reported = (n.sync.pending_records(), n.sync.has_pending());
    assert_eq!(
        reported,
        pending_as_stored(n),
        "after {after}: pending as reported, as stored"
    );
}

/// `from`'s history verifies, and a new peer takes all of it without a complaint and holds
/// `from`'s table.
fn a_peer_takes_everything(from: &mut Node, tables: &[&str], owner: cairn_sync::AuthorId) {
    assert_eq!(from.sync.verify(&mut from.db).unwrap(), Vec::new());
    let mut p = Node::memory();
    for t in tables {
        p.exec(t);
    }
    p.sync.set_owner(&mut p.db, owner).unwrap();
    sync_pair(from, &mut p);
    let events = p.sync.take_events();
    assert!(
        !events.is_empty() && events.iter().all(|e| e.kind == "applied"),
        "{events:?}"
    );
    let all = "SELECT id, title, done, likes FROM todo ORDER BY id";
    assert_eq!(p.rows(all), from.rows(all));
    assert_eq!(p.sync.verify(&mut p.db).unwrap(), Vec::new());
}

const NOTE: &str = "CREATE TABLE note (id TEXT PRIMARY KEY, body TEXT) REPLICATED";

/// B writes to A's scopes, authorized for `todo` only. Returns A's id.
fn b_writes_for_a(a: &mut Node, b: &mut Node) -> cairn_sync::AuthorId {
    for n in [&mut *a, &mut *b] {
        n.exec(TODO);
        n.exec(NOTE);
    }
    let a_id = a.sync.id(&mut a.db).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    a.sync.authorize(&mut a.db, "todo", vec![b_id]).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    sync_pair(a, b);
    a_id
}

/// A commit that fails leaves the pending count as the file has it, whichever way it fails;
/// the records of a transaction refused half-way (one scope recorded, the next refused) are
/// not counted, and the next commit's record follows the last one kept.
#[test]
fn a_failed_commit_is_not_counted_as_pending() {
    // In a file, and in memory (where the records wait in the replica).
    a_failed_commit_is_not_counted_as_pending_over(paged(MemoryFile::new()));
    a_failed_commit_is_not_counted_as_pending_over(volatile(MemoryFile::new()));
}

fn a_failed_commit_is_not_counted_as_pending_over(mut b: Node) {
    let mut a = Node::memory();
    let a_id = b_writes_for_a(&mut a, &mut b);
    b.exec("INSERT INTO todo (id, title) VALUES ('t1', 'kept')");
    assert_eq!(b.sync.pending_records(), 1);
    assert_pending_as_stored(&mut b, "a commit");

    // Failures the SQL layer catches before the commit records anything.
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('t2', 'kept too')");
    let e =
        b.db.execute("INSERT INTO todo (id, title) VALUES ('bad', NULL)", &[])
            .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_NOT_NULL");
    b.exec("COMMIT");
    assert_eq!(b.sync.pending_records(), 2);
    assert_pending_as_stored(&mut b, "a failed statement, then COMMIT");
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('gone', 'x')");
    let e =
        b.db.execute("INSERT INTO todo (id, title) VALUES ('t1', 'again')", &[])
            .unwrap_err();
    assert!(e.code().starts_with("CONSTRAINT"), "{e}");
    b.exec("ROLLBACK");
    assert_eq!(b.sync.pending_records(), 2);
    assert_pending_as_stored(&mut b, "a failed statement, then ROLLBACK");
    let e =
        b.db.execute("UPDATE todo SET title = NULL WHERE id = 't1'", &[])
            .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_NOT_NULL");
    assert_pending_as_stored(&mut b, "a constraint error in autocommit");

    // Refused by the sync layer, the one scope unauthorized.
    let e =
        b.db.execute("INSERT INTO note (id, body) VALUES ('n1', 'not mine')", &[])
            .unwrap_err();
    assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
    assert_pending_as_stored(&mut b, "a refused autocommit statement");
    // ... and half-way: the `todo` record is made, the `note` one refused.
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('t3', 'refused with the note')");
    b.exec("INSERT INTO note (id, body) VALUES ('n2', 'not mine')");
    let e = b.db.execute("COMMIT", &[]).unwrap_err();
    assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
    assert_eq!(
        b.rows("SELECT count(*) FROM todo WHERE id = 't3'"),
        vec![vec![Value::Integer(0)]]
    );
    assert_eq!(
        b.sync.pending_records(),
        2,
        "the refused record is not pending"
    );
    assert_pending_as_stored(&mut b, "a transaction refused half-way");

    // The next commit's record follows the last one kept: B's history verifies and A takes it.
    b.exec("INSERT INTO todo (id, title) VALUES ('t4', 'after the refusal')");
    assert_eq!(b.sync.pending_records(), 3);
    assert_pending_as_stored(&mut b, "the next commit");
    assert_eq!(b.sync.verify(&mut b.db).unwrap(), Vec::new());
    sync_pair(&mut a, &mut b);
    let events = a.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    let all = "SELECT id, title, done, likes FROM todo ORDER BY id";
    assert_eq!(a.rows(all).len(), 3);
    assert_eq!(a.rows(all), b.rows(all));
    a_peer_takes_everything(&mut b, &[TODO, NOTE], a_id);
}

/// Over a volatile store (memory) a commit's record is kept in the replica alone, not written
/// to the store's trees, where nothing reads it: the records are written when the store is
/// read whole (an export, the storage handed back), by every sync call before it begins, and
/// before another `Sync` is attached. A commit refused among them loses none of those before.
#[test]
fn a_volatile_store_writes_its_records_when_read_whole() {
    let mut a = Node::memory();
    let mut b = volatile(MemoryFile::new());
    let a_id = b_writes_for_a(&mut a, &mut b);
    let insert = |b: &mut Node, from: usize, to: usize| {
        for i in from..to {
            b.exec(&format!(
                "INSERT INTO todo (id, title) VALUES ('v{i:02}', 'in memory')"
            ));
        }
    };
    let log_before = log_kinds(&b);
    let root_before = b.db.storage().root_meta().unwrap();
    insert(&mut b, 0, 20);
    // (A read hashes the records written so far: those kept below are of both kinds.)
    b.sync.state_digest(&mut b.db).unwrap();
    insert(&mut b, 20, 30);
    assert_eq!(b.sync.pending_records(), 30);
    assert_eq!(log_kinds(&b), log_before, "no record in the log yet");
    assert_eq!(b.db.storage().root_meta().unwrap(), root_before);
    // Refused half-way (its `todo` record made, the `note` one refused): the 30 stay.
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('gone', 'refused with the note')");
    b.exec("INSERT INTO note (id, body) VALUES ('n1', 'not mine')");
    let e = b.db.execute("COMMIT", &[]).unwrap_err();
    assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
    assert_eq!(b.sync.pending_records(), 30);
    insert(&mut b, 30, 31);
    assert_eq!(b.sync.pending_records(), 31);
    // Not while a transaction is open...
    b.exec("BEGIN");
    let e = b.db.export().unwrap_err();
    assert_eq!(e.code(), "TRANSACTION", "{e}");
    b.exec("ROLLBACK");
    // ... but between them: a fresh load of the bytes holds every record committed.
    let digest = b.sync.state_digest(&mut b.db).unwrap();
    let mut copy = paged(Closed {
        file: MemoryFile::from_bytes(b.db.export().unwrap()),
        keys: b.keys.clone(),
    });
    assert_eq!(copy.sync.pending_records(), 31);
    assert_eq!(copy.sync.state_digest(&mut copy.db).unwrap(), digest);
    assert_eq!(copy.sync.verify(&mut copy.db).unwrap(), Vec::new());
    assert_eq!(
        copy.rows("SELECT count(*) FROM todo"),
        b.rows("SELECT count(*) FROM todo")
    );
    // Another `Sync` attached to the database sees those held by the one before.
    insert(&mut b, 31, 36);
    b.sync = Sync::attach(&mut b.db, now, Box::new(b.keys.clone())).unwrap();
    assert_eq!(b.sync.pending_records(), 36);
    assert_eq!(b.sync.verify(&mut b.db).unwrap(), Vec::new());
    // A sync call: A takes every record, none missing from B's chain.
    insert(&mut b, 36, 40);
    let all = "SELECT id, title FROM todo ORDER BY id";
    synced_alike(&mut b, &mut a, &[all]);
    assert_eq!(a.rows(all).len(), 40);
    // Handed back (`into_storage`) with a transaction open, which is rolled back, and opened
    // again.
    insert(&mut b, 40, 45);
    let digest = b.sync.state_digest(&mut b.db).unwrap();
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('open', 'rolled back by the close')");
    let mut b = volatile(close(b));
    assert_eq!(b.sync.pending_records(), 5);
    assert_eq!(b.sync.state_digest(&mut b.db).unwrap(), digest);
    assert_eq!(
        b.rows("SELECT count(*) FROM todo"),
        vec![vec![Value::Integer(45)]]
    );
    a_peer_takes_everything(&mut b, &[TODO, NOTE], a_id);
}

/// A purge right after a refused commit (nothing in between reads the sync state again) makes
/// a record that follows the last one kept, not the refused one.
#[test]
fn a_purge_after_a_refused_commit_follows_the_last_record_kept() {
    // In a file, and in memory (where the records wait in the replica).
    a_purge_after_a_refused_commit_follows_the_last_record_kept_over(paged(MemoryFile::new()));
    a_purge_after_a_refused_commit_follows_the_last_record_kept_over(volatile(MemoryFile::new()));
}

fn a_purge_after_a_refused_commit_follows_the_last_record_kept_over(mut b: Node) {
    let mut a = Node::memory();
    let a_id = b_writes_for_a(&mut a, &mut b);
    b.exec("INSERT INTO todo (id, title) VALUES ('t1', 'kept'), ('t2', 'purged')");
    b.exec("BEGIN; INSERT INTO todo (id, title) VALUES ('t3', 'refused with the note')");
    b.exec("INSERT INTO note (id, body) VALUES ('n1', 'not mine')");
    assert_eq!(
        b.db.execute("COMMIT", &[]).unwrap_err().code(),
        "SYNC_REFUSED"
    );
    assert!(b
        .sync
        .purge(&mut b.db, "todo", &[Value::Text("t2".into())])
        .unwrap());
    assert_eq!(b.sync.pending_records(), 2);
    assert_pending_as_stored(&mut b, "the purge");
    let mut b = paged(close(b));
    assert_eq!(b.sync.verify(&mut b.db).unwrap(), Vec::new());
    sync_pair(&mut a, &mut b);
    let events = a.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
    let all = "SELECT id, title, done, likes FROM todo ORDER BY id";
    assert_eq!(a.rows(all), vec![b.rows(all)[0].clone()]);
    assert_eq!(a.rows(all), b.rows(all));
    a_peer_takes_everything(&mut b, &[TODO, NOTE], a_id);
}

/// A node over a file whose writes can be made to fail.
fn faulty(file: cairn_store::fault::FaultFile) -> Node {
    let store = Paged::open(file, Options::default()).unwrap();
    node(Database::open(Box::new(store)).unwrap(), MemoryKeys::new())
}

/// A commit, a seal or a purge whose write to the file fails leaves the pending count as the
/// file has it, and the history the file holds goes on from its last record.
#[test]
fn a_write_the_file_refuses_leaves_the_pending_count_as_stored() {
    use cairn_store::fault::FaultFile;
    let file = FaultFile::new();
    let mut a = faulty(file.clone());
    a.exec(TODO);
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'one'), ('t2', 'two')");
    let a_id = a.sync.id(&mut a.db).unwrap();
    assert_eq!(a.sync.pending_records(), 1);

    // Each failure, at each of the first writes it makes.
    for k in 0..3 {
        file.fail_at(file.ops() + k, false);
        let e =
            a.db.execute("INSERT INTO todo (id, title) VALUES ('lost', 'x')", &[])
                .unwrap_err();
        file.heal();
        assert!(!e.code().starts_with("CONSTRAINT"), "{e}");
        assert_pending_as_stored(&mut a, &format!("a commit failing at write {k}"));
    }
    a.exec("INSERT INTO todo (id, title) VALUES ('t3', 'three')");
    assert_eq!(a.sync.pending_records(), 2);
    assert_pending_as_stored(&mut a, "the next commit");

    for k in 0..3 {
        file.fail_at(file.ops() + k, false);
        a.sync.seal(&mut a.db).unwrap_err();
        file.heal();
        assert_pending_as_stored(&mut a, &format!("a seal failing at write {k}"));
    }
    a.exec("INSERT INTO todo (id, title) VALUES ('t4', 'four')");
    assert_pending_as_stored(&mut a, "a commit after the failed seals");

    for k in 0..3 {
        file.fail_at(file.ops() + k, false);
        a.sync
            .purge(&mut a.db, "todo", &[Value::Text("t2".into())])
            .unwrap_err();
        file.heal();
        assert_pending_as_stored(&mut a, &format!("a purge failing at write {k}"));
    }
    a.exec("INSERT INTO todo (id, title) VALUES ('t5', 'five')");
    assert_pending_as_stored(&mut a, "a commit after the failed purges");
    assert_eq!(a.sync.pending_records(), 4);
    a_peer_takes_everything(&mut a, &[TODO], a_id);
    assert_eq!(a.sync.pending_records(), 0, "sealed to reach the peer");
    assert_pending_as_stored(&mut a, "the sync");
}

/// A purge whose commit succeeds but whose zeroing of the free pages fails stands: the row is
/// gone, the error says the purge is committed and the erase owed (`ERASE_PENDING`), and the
/// next sync call that commits zeroes them, so the file then holds no copy of the value.
#[test]
fn a_purge_whose_erase_fails_stands_and_the_erase_is_made_later() {
    use cairn_store::fault::FaultFile;
    let setup = |file: &FaultFile| {
        let mut n = faulty(file.clone());
        n.exec(TODO);
        n.exec("INSERT INTO todo (id, title) VALUES ('p1', 'first secret value'), ('p2', 'second secret value'), ('t3', 'kept')");
        n
    };
    let purged = |n: &mut Node, id: &str| {
        n.rows(&format!("SELECT count(*) FROM todo WHERE id = '{id}'"))
            == vec![vec![Value::Integer(0)]]
    };
    // How many calls a purge makes of its file, on a twin: the last is the erase's.
    let twin = FaultFile::new();
    let mut b = setup(&twin);
    let before = twin.ops();
    assert!(b
        .sync
        .purge(&mut b.db, "todo", &[Value::Text("p1".into())])
        .unwrap());
    let calls = twin.ops() - before;

    // From the last call back, every call failing from there on: the earliest start that still
    // fails after the commit is the erase's first call, and nothing of the erase is made.
    let mut first = None;
    for k in (0..calls).rev() {
        let file = FaultFile::new();
        let mut a = setup(&file);
        file.fail_at(file.ops() + k, true);
        let r = a.sync.purge(&mut a.db, "todo", &[Value::Text("p1".into())]);
        file.heal();
        match r {
            Err(e) if e.code() == "ERASE_PENDING" => {
                assert!(e.to_string().contains("committed"), "{e}");
                first = Some((file, a));
            }
            _ => break,
        }
    }
    let (file, mut a) = first.expect("a failure after the purge's commit");
    assert!(purged(&mut a, "p1"), "the purge stands");
    assert_pending_as_stored(&mut a, "a purge whose erase failed");

    let holds = |bytes: &[u8], needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(
        holds(&file.durable_bytes(), b"first secret value"),
        "the failed erase left the value in the file, as this test needs"
    );

    // The next sync call that commits (a peer taking everything) zeroes them: it makes more
    // calls of the file than the same call on the twin, whose erase was made.
    let a_id = a.sync.id(&mut a.db).unwrap();
    let b_id = b.sync.id(&mut b.db).unwrap();
    let (a0, b0) = (file.ops(), twin.ops());
    a_peer_takes_everything(&mut a, &[TODO], a_id);
    a_peer_takes_everything(&mut b, &[TODO], b_id);
    let (a_calls, b_calls) = (file.ops() - a0, twin.ops() - b0);
    assert!(
        a_calls > b_calls,
        "the owed erase was made after the sync call's commit ({a_calls} calls against {b_calls})"
    );
    assert!(!holds(&file.durable_bytes(), b"first secret value"));
    // And a purge after it erases as ever.
    assert!(a
        .sync
        .purge(&mut a.db, "todo", &[Value::Text("p2".into())])
        .unwrap());
    assert!(!holds(&file.durable_bytes(), b"second secret value"));
    assert!(purged(&mut a, "p1") && purged(&mut a, "p2"));
    assert_eq!(
        a.rows("SELECT title FROM todo"),
        vec![vec![Value::Text("kept".into())]]
    );
}

/// A sync call whose commit fails keeps nothing of itself: not the events it reported, and not
/// the link's idea that its reply went out (the next poll sends it again at once, with no
/// retransmission timeout); after the file heals the two replicas converge.
#[test]
fn a_sync_call_that_fails_takes_back_its_events_and_its_reply() {
    use cairn_store::fault::FaultFile;
    // A (over `file`) and B each write a row and connect; B answers A's hello with its record.
    // Then A takes B's hello (its reply carries A's record), failing at the call `hello_at` of
    // its file if given, and B's messages, the last failing at its call `fail` if given.
    // Returns the nodes and links, how A took the hello and what that cost its file, what each
    // of B's messages cost it, A's replies, and the failure of the last message if any.
    let run = |file: &FaultFile, hello_at: Option<u64>, fail: Option<u64>| {
        let mut a = faulty(file.clone());
        let mut b = Node::memory();
        one_owner(&mut a, &mut b);
        sync_pair(&mut a, &mut b);
        let _ = (a.sync.take_events(), b.sync.take_events());
        a.exec("INSERT INTO todo (id, title) VALUES ('a1', 'from a')");
        b.exec("INSERT INTO todo (id, title) VALUES ('b1', 'from b')");
        let (la, hello_a) = a.sync.connect(&mut a.db).unwrap();
        let (lb, hello_b) = b.sync.connect(&mut b.db).unwrap();
        let to_a = b.sync.receive(&mut b.db, lb, &hello_a).unwrap();
        let before = file.ops();
        if let Some(k) = hello_at {
            file.fail_at(before + k, false);
        }
        let hello = a.sync.receive(&mut a.db, la, &hello_b);
        file.heal();
        let hello_cost = file.ops() - before;
        let mut costs = Vec::new();
        let mut to_b = hello.as_ref().cloned().unwrap_or_default();
        let mut failed = None;
        for (i, m) in to_a.iter().enumerate() {
            let before = file.ops();
            if let Some(k) = fail.filter(|_| i + 1 == to_a.len()) {
                file.fail_at(before + k, false);
            }
            let r = a.sync.receive(&mut a.db, la, m);
            file.heal();
            costs.push(file.ops() - before);
            match r {
                Ok(out) => to_b.extend(out),
                Err(e) => failed = Some(e),
            }
        }
        (a, b, la, lb, hello, hello_cost, costs, to_b, failed)
    };
    // On a twin, what A's file is asked for: taking B's hello, and each of B's messages (the
    // last applies B's record; the call before its last writes the commit's superblock).
    let twin = FaultFile::new();
    let (_, _, _, _, hello, hello_cost, _, _, _) = run(&twin, None, None);
    assert!(
        hello.is_ok() && hello_cost >= 2,
        "taking a hello writes ({hello_cost} calls)"
    );
    let (_, _, _, _, hello, _, costs, _, _) = run(&FaultFile::new(), Some(hello_cost - 2), None);
    assert!(hello.is_err(), "the hello's commit failed");
    let last = *costs.last().expect("B's messages");
    assert!(last >= 2, "applying B's record writes ({last} calls)");

    let file = FaultFile::new();
    let (mut a, mut b, la, lb, hello, _, _, to_b, failed) =
        run(&file, Some(hello_cost - 2), Some(last - 2));
    assert!(
        hello.is_err() && failed.is_some(),
        "both of A's calls failed"
    );
    assert!(
        a.sync.take_events().iter().all(|e| e.kind != "applied"),
        "no event of the failed call is left"
    );
    assert_eq!(
        a.rows("SELECT count(*) FROM todo WHERE id = 'b1'"),
        vec![vec![Value::Integer(0)]]
    );
    // A's reply to the hello never went out: its next poll sends A's record at once.
    let resent = a.sync.poll(&mut a.db, la).unwrap();
    for m in to_b.iter().chain(&resent) {
        b.sync.receive(&mut b.db, lb, m).unwrap();
    }
    assert_eq!(
        b.rows("SELECT title FROM todo WHERE id = 'a1'"),
        vec![vec![Value::Text("from a".into())]]
    );
    a.sync.disconnect(la);
    b.sync.disconnect(lb);
    // A fresh exchange brings B's record to A (B resends what A never acknowledged).
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, title FROM todo ORDER BY id";
    assert_eq!(a.rows(all).len(), 2);
    assert_eq!(a.rows(all), b.rows(all));
    assert_pending_as_stored(&mut a, "the exchange after the failed calls");
}

/// With small pages the store's root bytes are few (a quarter of the page: 128 bytes at 512,
/// 256 at 1024): a record that does not fit the tail with its run's header goes to the log (at
/// 512 bytes every one of these), a tail of a few records moves often, and every record
/// survives a reopen and reaches a peer.
#[test]
fn small_pages_keep_every_pending_record() {
    for page_size in [512, 1024] {
        let opts = Options {
            page_size,
            ..Options::default()
        };
        let store = Paged::open(OnDisk(MemoryFile::new()), opts).unwrap();
        let mut a = node(Database::open(Box::new(store)).unwrap(), MemoryKeys::new());
        a.exec(TODO);
        for i in 0..25 {
            // Every third title too long for a 1024-byte page's tail.
            let title = if i % 3 == 1 {
                "long ".repeat(50)
            } else {
                format!("row {i}")
            };
            a.exec(&format!(
                "INSERT INTO todo (id, title) VALUES ('s{i:02}', '{title}')"
            ));
        }
        let meta = cairn_sql::SYSTEM_TREES + 1;
        let root = a.db.storage().root_meta().unwrap();
        assert!(root.len() <= page_size / 4, "{page_size}: {}", root.len());
        assert_eq!(root.is_empty(), page_size == 512, "{page_size}");
        let (alone, runs) = log_kinds(&a);
        assert!(alone > 0, "{page_size}: records too long for the tail");
        assert_eq!(runs > 0, page_size == 1024, "{page_size}: tails moved");
        let digest = a.sync.state_digest(&mut a.db).unwrap();
        let mut a = paged(close(a));
        assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
        a.exec("INSERT INTO todo (id, title) VALUES ('z', 'last')");
        assert_eq!(a.db.storage().get(meta, b"layout").unwrap(), Some(vec![6]));
        let digest = a.sync.state_digest(&mut a.db).unwrap();
        let mut a = paged(close(a));
        assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
        assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
        let mut b = Node::memory();
        b.exec(TODO);
        b.sync
            .set_owner(&mut b.db, a.sync.id(&mut a.db).unwrap())
            .unwrap();
        sync_pair(&mut a, &mut b);
        let events = b.sync.take_events();
        assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
        let all = "SELECT id, title FROM todo ORDER BY id";
        assert_eq!(b.rows(all).len(), 26);
        assert_eq!(a.rows(all), b.rows(all));
    }
}

/// How many pending records the log holds one a key (kind 2), and how many runs (kind 3).
fn log_kinds(n: &Node) -> (usize, usize) {
    let log = cairn_sql::SYSTEM_TREES + 3;
    let st = n.db.storage();
    let mut cur = st
        .scan(
            log,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
        )
        .unwrap();
    let (mut alone, mut runs) = (0, 0);
    while cur.next().unwrap() {
        let k = cur.key();
        match k[k.len() - 9] {
            2 => alone += 1,
            3 => runs += 1,
            _ => {}
        }
    }
    (alone, runs)
}

/// The changes of a table the capture writes into its records as the statements make them
/// (no counter, scope column or UNIQUE index) keep their order and their transaction's fate:
/// a row inserted, deleted and inserted again in one transaction, a failed statement's rows,
/// a rolled back transaction, another table's changes in between (one with a counter, whose
/// changes wait for the commit), a column added and a UNIQUE index made inside a transaction.
/// A peer ends with the same rows and state, both verify, and the writer reopened from its
/// file holds what it held.
#[test]
fn changes_written_as_they_come_keep_their_order_and_their_transaction() {
    let file = MemoryFile::new();
    let mut a = paged(file);
    let mut b = Node::memory();
    let schema = "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, x TEXT) REPLICATED; \
                  CREATE TABLE c (id TEXT PRIMARY KEY, hits INTEGER DEFAULT 0) REPLICATED (COUNTER hits)";
    for n in [&mut a, &mut b] {
        n.exec(schema);
    }
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec(
        "BEGIN; \
         INSERT INTO t VALUES ('k', 1, 'first'); \
         INSERT INTO c (id) VALUES ('k'); \
         DELETE FROM t WHERE id = 'k'; \
         UPDATE c SET hits = hits + 2 WHERE id = 'k'; \
         INSERT INTO t VALUES ('k', 2, 'again'), ('j', 3, 'j'); \
         UPDATE t SET x = 'set' WHERE id = 'k'",
    );
    // Its first row written, its second refused: the statement goes whole.
    let e = (a
        .db
        .exec_script("INSERT INTO t VALUES ('m', 4, 'm'), ('j', 5, 'dup')"))
    .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_PRIMARY_KEY");
    a.exec("UPDATE t SET n = n + 10; DELETE FROM t WHERE id = 'j'; COMMIT");
    a.exec("BEGIN; INSERT INTO t VALUES ('gone', 0, 'rolled back'); UPDATE t SET n = 0; ROLLBACK");
    a.exec("INSERT INTO t VALUES ('solo', 7, NULL)");
    b.exec("ALTER TABLE t ADD COLUMN w TEXT");
    a.exec(
        "BEGIN; INSERT INTO t VALUES ('p', 8, 'before'); ALTER TABLE t ADD COLUMN w TEXT; \
         INSERT INTO t VALUES ('q', 9, 'after', 'w'); UPDATE t SET w = 'all'; \
         CREATE UNIQUE INDEX t_x ON t (x); UPDATE t SET n = n + 1 WHERE id = 'p'; COMMIT",
    );
    b.exec("CREATE UNIQUE INDEX t_x ON t (x)");
    sync_pair(&mut a, &mut b);
    let all_t = "SELECT id, n, x, w FROM t ORDER BY id";
    let all_c = "SELECT id, hits FROM c ORDER BY id";
    let text = |s: &str| Value::Text(s.into());
    let want_t = vec![
        vec![text("k"), Value::Integer(12), text("set"), text("all")],
        vec![text("p"), Value::Integer(9), text("before"), text("all")],
        vec![text("q"), Value::Integer(9), text("after"), text("all")],
        vec![text("solo"), Value::Integer(7), Value::Null, text("all")],
    ];
    assert_eq!(a.rows(all_t), want_t);
    assert_eq!(b.rows(all_t), want_t);
    assert_eq!(a.rows(all_c), vec![vec![text("k"), Value::Integer(2)]]);
    assert_eq!(b.rows(all_c), a.rows(all_c));
    let digest = a.sync.state_digest(&mut a.db).unwrap();
    assert_eq!(b.sync.state_digest(&mut b.db).unwrap(), digest);
    for n in [&mut a, &mut b] {
        assert!(n.sync.verify(&mut n.db).unwrap().is_empty());
    }
    let mut a = paged(close(a));
    assert_eq!(a.rows(all_t), want_t);
    assert_eq!(a.sync.state_digest(&mut a.db).unwrap(), digest);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
}

/// A new database's first transaction is written as it comes too, under the key pair made
/// when the sync layer was attached, which its commit saves: a peer takes it, and the
/// database reopened has that identity.
#[test]
fn a_new_database_s_first_transaction_is_recorded_under_the_key_it_saves() {
    let mut a = paged(MemoryFile::new());
    let mut b = Node::memory();
    for n in [&mut a, &mut b] {
        n.exec(NOTE);
    }
    a.exec("BEGIN; INSERT INTO note VALUES ('n1', 'one'), ('n2', 'two'); DELETE FROM note WHERE id = 'n1'; COMMIT");
    let id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, id).unwrap();
    sync_pair(&mut a, &mut b);
    let want = vec![vec![Value::Text("n2".into()), Value::Text("two".into())]];
    assert_eq!(b.rows("SELECT id, body FROM note"), want);
    let mut a = paged(close(a));
    assert_eq!(a.sync.id(&mut a.db).unwrap(), id);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
}

/// What the capture's sink writes as the statements run is what the commit writes from the
/// captured rows: the same random statements (inserts of one row and of several, upserts,
/// updates made in place and by the general path, a key changed, deletes, failed statements,
/// transactions committed and rolled back) on two databases with one key pair, one whose
/// table the sink takes and one whose table it does not (a UNIQUE index on a column left
/// NULL), send a new peer the same messages.
#[test]
fn the_sink_records_what_the_commit_records_from_the_captured_rows() {
    const TABLE: &str =
        "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, x TEXT, u INTEGER) REPLICATED";
    let seeds = seeds();
    for seed in 0..seeds {
        let mut next = numbers(seed);
        let mut script = Vec::new();
        let mut open = false;
        for _ in 0..40 {
            let (k, v) = (next(6), next(1000));
            script.push(match next(11) {
                0 | 1 => format!("INSERT INTO t (id, n, x) VALUES ('k{k}', {v}, 'x{v}')"),
                2 => format!(
                    "INSERT INTO t (id, n) VALUES ('k{k}', {v}), ('k{}', NULL)",
                    (k + 1) % 6
                ),
                3 => format!(
                    "INSERT INTO t (id, n, x) VALUES ('k{k}', {v}, NULL) \
                     ON CONFLICT (id) DO UPDATE SET n = excluded.n, x = 'up'"
                ),
                4 => format!("UPDATE t SET n = n + {v} WHERE id = 'k{k}'"),
                5 => format!("UPDATE t SET x = 'long{}' WHERE n > {v}", "é".repeat(150)),
                6 => format!("UPDATE t SET id = 'moved{v}' WHERE id = 'k{k}'"),
                7 => format!("DELETE FROM t WHERE id = 'k{k}' OR n < {}", v / 10),
                8 if !open => {
                    open = true;
                    "BEGIN".to_string()
                }
                8 | 9 if open => {
                    open = false;
                    if next(3) == 0 { "ROLLBACK" } else { "COMMIT" }.to_string()
                }
                _ => format!("INSERT INTO t (id, n) VALUES ('k{k}', {v})"),
            });
        }
        if open {
            script.push("COMMIT".into());
        }
        let run = |node: &mut Node, unique: bool| {
            node.exec(TABLE);
            if unique {
                node.exec("CREATE UNIQUE INDEX t_u ON t (u)");
            }
            for s in &script {
                // Inserts of a key already there fail, with their statement's changes.
                if let Err(e) = node.db.exec_script(s) {
                    assert_eq!(e.code(), "CONSTRAINT_PRIMARY_KEY", "seed {seed}: {s}");
                }
            }
        };
        let (mut a, mut b) = one_key_pair(run);
        let all = "SELECT id, n, x FROM t ORDER BY id";
        assert_eq!(a.rows(all), b.rows(all), "seed {seed}");
        let (from_a, _) = sent_to_new_peer(&mut a, TABLE, all);
        let (from_b, _) = sent_to_new_peer(&mut b, TABLE, all);
        assert!(
            from_a.iter().map(Vec::len).sum::<usize>() > 500,
            "seed {seed}"
        );
        assert!(
            from_a == from_b,
            "seed {seed}: the two paths sent different messages"
        );
    }
}

/// A device cloned with its key (a restored backup) writes on both copies: the chain forks.
/// Every replica, the two copies included, ends on the same branch (docs/sync.md sec. 6), with
/// the same SQL rows, the other branch's rows taken back, and keeps it across a reopen.
#[test]
fn a_cloned_device_forks_and_every_replica_ends_alike() {
    let mut a = paged(MemoryFile::new());
    let mut twin = paged(MemoryFile::new());
    let mut c = paged(MemoryFile::new());
    for n in [&mut a, &mut twin, &mut c] {
        n.exec(TODO);
    }
    let key = a.sync.export_key(&mut a.db).unwrap();
    twin.sync.import_key(&mut twin.db, &key).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'from a')");
    twin.exec("INSERT INTO todo (id, title) VALUES ('t1', 'from the twin'), ('t2', 'twin only')");
    let all = "SELECT id, title FROM todo ORDER BY id";
    let (a_rows, twin_rows) = (a.rows(all), twin.rows(all));
    // c takes a's branch, then meets the twin; then everyone meets everyone.
    sync_pair(&mut a, &mut c);
    sync_pair(&mut twin, &mut c);
    sync_pair(&mut a, &mut twin);
    sync_pair(&mut a, &mut c);
    sync_pair(&mut twin, &mut c);
    let rows = c.rows(all);
    assert!(
        rows == a_rows || rows == twin_rows,
        "one branch's rows, whole: {rows:?}"
    );
    let digest = c.sync.state_digest(&mut c.db).unwrap();
    for n in [&mut a, &mut twin] {
        assert_eq!(n.rows(all), rows);
        assert_eq!(n.sync.state_digest(&mut n.db).unwrap(), digest);
    }
    // Across a reopen: the saved chain is the kept branch, and the rows follow from it.
    let mut a = paged(close(a));
    let mut twin = paged(close(twin));
    for n in [&mut a, &mut twin] {
        assert_eq!(n.rows(all), rows);
        assert_eq!(n.sync.state_digest(&mut n.db).unwrap(), digest);
        assert!(n.sync.verify(&mut n.db).unwrap().is_empty());
        assert!(n.db.check().unwrap().is_empty());
    }
}

/// An owner revokes a writer (docs/sync.md sec. 8, "Revocation"): what the owner held of its
/// writes stays; what it wrote beyond leaves every SQL table it reached, its own included, and
/// its next write is refused.
#[test]
fn a_revoked_writer_s_later_rows_leave_every_table() {
    let mut owner = paged(MemoryFile::new());
    let mut writer = Node::memory();
    let mut other = Node::memory();
    for n in [&mut owner, &mut writer, &mut other] {
        n.exec(TODO);
    }
    let owner_id = owner.sync.id(&mut owner.db).unwrap();
    let writer_id = writer.sync.id(&mut writer.db).unwrap();
    owner
        .sync
        .authorize(&mut owner.db, "todo", vec![writer_id])
        .unwrap();
    writer.sync.set_owner(&mut writer.db, owner_id).unwrap();
    other.sync.set_owner(&mut other.db, owner_id).unwrap();
    sync_pair(&mut owner, &mut writer);
    writer.exec("INSERT INTO todo (id, title) VALUES ('w1', 'kept')");
    sync_pair(&mut owner, &mut writer);
    // Written after the owner last heard from the writer: reaches `other` only.
    writer.exec("INSERT INTO todo (id, title) VALUES ('w2', 'too late')");
    writer.exec("UPDATE todo SET title = 'changed late' WHERE id = 'w1'");
    sync_pair(&mut writer, &mut other);
    let all = "SELECT id, title FROM todo ORDER BY id";
    assert_eq!(other.rows(all).len(), 2);
    owner
        .sync
        .revoke(&mut owner.db, "todo", vec![writer_id])
        .unwrap();
    sync_pair(&mut owner, &mut other);
    sync_pair(&mut owner, &mut writer);
    let kept = vec![vec![Value::Text("w1".into()), Value::Text("kept".into())]];
    for n in [&mut owner, &mut other, &mut writer] {
        assert_eq!(n.rows(all), kept);
        assert!(n.sync.verify(&mut n.db).unwrap().is_empty());
    }
    let e = writer
        .db
        .exec_script("INSERT INTO todo (id, title) VALUES ('w3', 'after')")
        .unwrap_err();
    assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
    // Across a reopen the owner keeps the revocation.
    let mut owner = paged(close(owner));
    assert_eq!(owner.rows(all), kept);
    assert!(owner.sync.verify(&mut owner.db).unwrap().is_empty());
}

/// The table's rows, as text.
fn todo_rows(n: &mut Node) -> Vec<Vec<Value>> {
    n.rows("SELECT id, title FROM todo ORDER BY id")
}

/// A key writing, in a scope of its own, a row whose key the owner's scope holds neither
/// replaces the owner's row nor, deleting it, deletes it: on the owner, on a third replica and
/// on the writer alike (docs/sync.md sec. 7, "One row, one owner").
#[test]
fn a_foreign_scope_cannot_replace_or_delete_a_row_it_does_not_own() {
    let (mut a, mut b, mut m) = (Node::memory(), Node::memory(), Node::memory());
    for n in [&mut a, &mut b, &mut m] {
        n.exec(TODO);
    }
    a.exec("INSERT INTO todo (id, title) VALUES ('x', 'mine'), ('y', 'also mine')");
    // Written and deleted in the writer's own scope before it ever saw the owner's row.
    m.exec("INSERT INTO todo (id, title) VALUES ('x', 'forged')");
    m.exec("DELETE FROM todo WHERE id = 'x'");
    sync_pair(&mut m, &mut b);
    sync_pair(&mut a, &mut b);
    sync_pair(&mut a, &mut m);
    let want = vec![
        vec![Value::Text("x".into()), Value::Text("mine".into())],
        vec![Value::Text("y".into()), Value::Text("also mine".into())],
    ];
    for n in [&mut a, &mut b, &mut m] {
        assert_eq!(todo_rows(n), want);
    }
    // Written again and kept: the key is held by scopes of two owners, and no replica shows
    // either row; each receiver says why.
    let mut m2 = Node::memory();
    m2.exec(TODO);
    m2.exec("INSERT INTO todo (id, title) VALUES ('y', 'forged')");
    sync_pair(&mut m2, &mut b);
    sync_pair(&mut a, &mut b);
    sync_pair(&mut a, &mut m2);
    let want = vec![vec![Value::Text("x".into()), Value::Text("mine".into())]];
    for n in [&mut a, &mut b, &mut m2] {
        assert_eq!(todo_rows(n), want);
    }
    for n in [&mut a, &mut b] {
        let events = n.sync.take_events();
        let refused: Vec<_> = events.iter().filter(|e| e.kind == "row_refused").collect();
        assert!(!refused.is_empty(), "{events:?}");
        assert!(
            refused.iter().all(|e| e.code == "UNAUTHORIZED"),
            "{refused:?}"
        );
    }
    // Neither may write the key while both hold it: every replica would hide the write.
    for n in [&mut a, &mut m2] {
        let e = (n.db)
            .execute("INSERT INTO todo (id, title) VALUES ('y', 'again')", &[])
            .unwrap_err();
        assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
        assert!(e.to_string().contains("UNAUTHORIZED"), "{e}");
        assert_eq!(todo_rows(n), want);
    }
    // Once the other owner's row goes, the owner's shows again, everywhere.
    m2.sync
        .purge(&mut m2.db, "todo", &[Value::Text("y".into())])
        .unwrap();
    sync_pair(&mut m2, &mut b);
    sync_pair(&mut a, &mut b);
    let want = vec![
        vec![Value::Text("x".into()), Value::Text("mine".into())],
        vec![Value::Text("y".into()), Value::Text("also mine".into())],
    ];
    assert_eq!(todo_rows(&mut a), want);
    assert_eq!(todo_rows(&mut b), want);
}

/// A database that holds another owner's row may not write it: its write would go to a scope
/// of its own owner, which every replica would hide. Refused at commit, nothing kept.
#[test]
fn a_write_to_another_owner_s_row_is_refused_at_commit() {
    let (mut a, mut m) = (Node::memory(), Node::memory());
    a.exec(TODO);
    m.exec(TODO);
    a.exec("INSERT INTO todo (id, title) VALUES ('x', 'mine')");
    sync_pair(&mut a, &mut m);
    let before = todo_rows(&mut m);
    assert_eq!(before.len(), 1);
    let pending = m.sync.pending_records();
    for sql in [
        "UPDATE todo SET title = 'taken' WHERE id = 'x'",
        "UPDATE todo SET likes = likes + 1 WHERE id = 'x'",
    ] {
        let e = m.db.execute(sql, &[]).unwrap_err();
        assert_eq!(e.code(), "SYNC_REFUSED", "{sql}: {e}");
        assert!(e.to_string().contains("\"todo\" of owner"), "{e}");
        assert_eq!(todo_rows(&mut m), before);
        assert_eq!(m.sync.pending_records(), pending);
    }
    // Its own rows it writes as before.
    m.exec("INSERT INTO todo (id, title) VALUES ('z', 'of my own')");
    m.exec("UPDATE todo SET title = 'still mine' WHERE id = 'z'");
    sync_pair(&mut a, &mut m);
    assert_eq!(todo_rows(&mut a), todo_rows(&mut m));
    assert_eq!(todo_rows(&mut a).len(), 2);
}

/// Within one owner's scopes a key's row is the first written: a row moved to another list on
/// one device while another device edits it in the old one shows once, the same everywhere.
#[test]
fn a_row_moved_while_edited_elsewhere_shows_once_and_alike() {
    let ddl = "CREATE TABLE item (id TEXT PRIMARY KEY, list TEXT NOT NULL, name TEXT) \
               REPLICATED (SCOPE list)";
    for edit_first in [false, true] {
        let mut a = Node::memory();
        let mut b = Node::memory();
        a.exec(ddl);
        b.exec(ddl);
        let a_id = a.sync.id(&mut a.db).unwrap();
        let b_id = b.sync.id(&mut b.db).unwrap();
        a.sync
            .authorize(&mut a.db, "item/list=home", vec![b_id])
            .unwrap();
        a.sync
            .authorize(&mut a.db, "item/list=work", vec![b_id])
            .unwrap();
        b.sync.set_owner(&mut b.db, a_id).unwrap();
        a.exec("INSERT INTO item VALUES ('1', 'home', 'lamp')");
        sync_pair(&mut a, &mut b);
        let (mover, editor) = if edit_first {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        editor.exec("UPDATE item SET name = 'red lamp' WHERE id = '1'");
        mover.exec("UPDATE item SET list = 'work' WHERE id = '1'");
        sync_pair(&mut a, &mut b);
        let all = "SELECT id, list, name FROM item ORDER BY id";
        for n in [&mut a, &mut b] {
            let events = n.sync.take_events();
            assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
        }
        assert_eq!(a.rows(all), b.rows(all), "edit first: {edit_first}");
        assert_eq!(a.rows(all).len(), 1, "{:?}", a.rows(all));
        // And the row is writable where it shows.
        a.exec("UPDATE item SET name = 'lamp again' WHERE id = '1'");
        sync_pair(&mut a, &mut b);
        assert_eq!(a.rows(all), b.rows(all));
    }
}

/// Rows a peer's changes brought into the tables count as what a commit changed
/// (`Database::take_changed`), as the application's own statements do: a live query over the
/// table runs again.
#[test]
fn rows_applied_from_a_peer_are_reported_as_changed() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    one_owner(&mut a, &mut b);
    a.exec("INSERT INTO todo (id, title) VALUES ('x', 'one'), ('y', 'two')");
    sync_pair(&mut a, &mut b);
    b.db.take_changed();
    a.exec("UPDATE todo SET title = 'ONE' WHERE id = 'x'");
    a.exec("DELETE FROM todo WHERE id = 'y'");
    a.exec("INSERT INTO todo (id, title) VALUES ('z', 'three')");
    sync_pair(&mut a, &mut b);
    let c = b.db.take_changed();
    assert_eq!(
        c.tables,
        vec![cairn_sql::TableChange {
            table: "todo".into(),
            inserted: 1,
            updated: 1,
            deleted: 1
        }],
        "{c:?}"
    );
    assert!(c.commits >= 1);
}

/// What a savepoint rolled back to is not recorded: a peer gets the rest of the transaction.
#[test]
fn a_rollback_to_a_savepoint_takes_back_what_it_recorded() {
    let mut a = Node::memory();
    let mut b = Node::memory();
    one_owner(&mut a, &mut b);
    a.exec(
        "BEGIN;
         INSERT INTO todo (id, title) VALUES ('kept', 'one');
         SAVEPOINT s;
         INSERT INTO todo (id, title) VALUES ('gone', 'two');
         UPDATE todo SET title = 'changed' WHERE id = 'kept';
         ROLLBACK TO s;
         UPDATE todo SET done = 1 WHERE id = 'kept';
         RELEASE s;
         COMMIT;",
    );
    // A savepoint that began the transaction: releasing it commits.
    a.exec(
        "SAVEPOINT outer_one;
         INSERT INTO todo (id, title) VALUES ('later', 'three');
         RELEASE outer_one;",
    );
    sync_pair(&mut a, &mut b);
    let all = "SELECT id, title, done FROM todo ORDER BY id";
    assert_eq!(a.rows(all), b.rows(all));
    assert_eq!(
        b.rows(all),
        vec![
            vec![
                Value::Text("kept".into()),
                Value::Text("one".into()),
                Value::Integer(1)
            ],
            vec![
                Value::Text("later".into()),
                Value::Text("three".into()),
                Value::Integer(0)
            ],
        ]
    );
    assert!(!a.db.in_transaction());
}

/// A full-text index over a replicated table: rows applied from a peer are indexed like local
/// ones, a purge takes its row out of the index, `check()` finds the index in step with its
/// content, and the index is there again after a reopen.
#[test]
fn full_text_index_follows_replicated_rows() {
    const FTS: &str =
        "CREATE VIRTUAL TABLE todo_fts USING fts5(title, content='todo', content_rowid='id')";
    let mut a = paged(MemoryFile::new());
    let mut b = paged(MemoryFile::new());
    a.exec(TODO);
    b.exec(TODO);
    a.exec(FTS);
    b.exec(FTS);
    let a_id = a.sync.id(&mut a.db).unwrap();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    a.exec("INSERT INTO todo (id, title) VALUES ('t1', 'buy fresh bread'), ('t2', 'bake bread')");
    sync_pair(&mut a, &mut b);
    let q = "SELECT rowid FROM todo_fts WHERE todo_fts MATCH 'bread' ORDER BY rowid";
    let both = vec![
        vec![Value::Text("t1".into())],
        vec![Value::Text("t2".into())],
    ];
    assert_eq!(b.rows(q), both);
    a.exec("UPDATE todo SET title = 'buy milk' WHERE id = 't1'");
    sync_pair(&mut a, &mut b);
    assert_eq!(b.rows(q), vec![vec![Value::Text("t2".into())]]);
    assert!(a
        .sync
        .purge(&mut a.db, "todo", &[Value::Text("t2".into())])
        .unwrap());
    sync_pair(&mut a, &mut b);
    for n in [&mut a, &mut b] {
        assert!(n.rows(q).is_empty());
        assert_eq!(
            n.rows("SELECT rowid FROM todo_fts('milk')"),
            vec![vec![Value::Text("t1".into())]]
        );
        assert!(n.db.check().unwrap().is_empty());
    }
    let mut b = paged(close(b));
    assert_eq!(
        b.rows("SELECT rowid, highlight(todo_fts, 0, '[', ']') FROM todo_fts('milk')"),
        vec![vec![
            Value::Text("t1".into()),
            Value::Text("buy [milk]".into())
        ]]
    );
    assert!(b.db.check().unwrap().is_empty());
}
