//! The secret key stays on the device: it is kept in the host's key store, never in the
//! database file (docs/sync.md 10b, "The key pair, kept outside the file"). Tried as a user
//! would: the file exported and searched for the secret, a copy opened elsewhere, the identity
//! moved with exportKey / importKey, a database of layout 5 (key in the file) migrated.

use cairn_replicated::{FileKeys, KeyStore, MemoryKeys, Sync};
use cairn_sql::Paged;
use cairn_sql::{Database, Output, Value};
use cairn_store::{BlockFile, MemoryFile, Options, StdFile};
use cairn_sync::AuthorId;
use std::collections::VecDeque;

fn now() -> u64 {
    1_800_000_000_000
}

const TODO: &str = "CREATE TABLE todo (id TEXT PRIMARY KEY, title TEXT NOT NULL, \
                    likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)";
const ALL: &str = "SELECT id, title, likes FROM todo ORDER BY id";
const META: u64 = cairn_sql::SYSTEM_TREES + 1;

/// A memory file that does not say it is volatile: the store copies pages on write and frees
/// the old ones, as a file on disk or in OPFS.
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

struct Node {
    db: Database,
    sync: Sync,
    keys: MemoryKeys,
}

/// The database in `bytes` on a device whose key store is `keys`.
fn open(bytes: Vec<u8>, keys: &MemoryKeys) -> Node {
    let file = OnDisk(MemoryFile::from_bytes(bytes));
    let store = Paged::open(file, Options::default()).unwrap();
    let mut db = Database::open(Box::new(store)).unwrap();
    let sync = Sync::attach(&mut db, now, Box::new(keys.clone())).unwrap();
    Node {
        db,
        sync,
        keys: keys.clone(),
    }
}

fn new_node() -> Node {
    open(Vec::new(), &MemoryKeys::new())
}

impl Node {
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
    fn id(&mut self) -> AuthorId {
        self.sync.id(&mut self.db).unwrap()
    }
    /// The whole file, free pages too (what an export hands out).
    fn export(&mut self) -> Vec<u8> {
        self.db.export().unwrap()
    }
    /// Closes the database: its file's bytes, and the key store stays on the device.
    fn close(self) -> (Vec<u8>, MemoryKeys) {
        let mut store = self.db.into_storage().unwrap();
        (store.export().unwrap(), self.keys)
    }
}

/// Connects `a` and `b` and delivers messages both ways until neither has anything to say.
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

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Neither the 32 secret bytes nor the key's export (`cairn-key` format) is in `bytes`.
fn assert_no_secret(bytes: &[u8], key: &[u8], what: &str) {
    assert_eq!(key.len(), 46, "an exported key");
    let secret = &key[10..42];
    assert!(
        !holds(bytes, secret),
        "{what}: the secret key is in the file"
    );
    assert!(
        !holds(bytes, key),
        "{what}: the exported key is in the file"
    );
}

/// Every event `n` has is `applied`.
fn all_applied(n: &Node) {
    let events = n.sync.take_events();
    assert!(events.iter().all(|e| e.kind == "applied"), "{events:?}");
}

/// A database with history of its own, sealed and pending, and a peer that took it.
fn writer_and_peer() -> (Node, Node) {
    let mut a = new_node();
    a.exec(TODO);
    for i in 0..20 {
        a.exec(&format!(
            "INSERT INTO todo (id, title) VALUES ('a{i}', 'row {i}')"
        ));
    }
    let mut b = new_node();
    b.exec(TODO);
    let a_id = a.id();
    b.sync.set_owner(&mut b.db, a_id).unwrap();
    sync_pair(&mut a, &mut b);
    all_applied(&b);
    a.exec("UPDATE todo SET likes = likes + 2 WHERE id = 'a3'");
    (a, b)
}

#[test]
fn an_export_carries_no_secret_and_the_key_store_holds_it() {
    let (mut a, _b) = writer_and_peer();
    let key = a.sync.export_key(&mut a.db).unwrap();
    assert_eq!(
        a.keys.get().as_deref(),
        Some(&key[..]),
        "the key store holds the key"
    );
    let bytes = a.export();
    assert_no_secret(&bytes, &key, "a fresh database");
    // Nor any tree: the meta tree names the author, by its public key.
    let st = a.db.storage();
    assert_eq!(st.get(META, b"identity").unwrap(), None);
    assert_eq!(st.get(META, b"author").unwrap(), Some(a.id().0.to_vec()));
    // Reopened on the same device, it signs as before, and its chain goes on.
    let id = a.id();
    let (bytes, keys) = a.close();
    let mut a = open(bytes, &keys);
    assert_eq!(a.id(), id);
    assert_eq!(a.sync.export_key(&mut a.db).unwrap(), key);
}

#[test]
fn a_copy_opened_elsewhere_signs_as_a_new_author_and_asks_the_owner() {
    let (mut a, mut b) = writer_and_peer();
    let owner = a.id();
    let key = a.sync.export_key(&mut a.db).unwrap();
    // The file, exported and opened on another device (an empty key store).
    let bytes = a.export();
    let mut copy = open(bytes, &MemoryKeys::new());
    let me = copy.id();
    assert_ne!(me, owner, "a copy signs as an author of its own");
    assert_eq!(copy.rows(ALL), a.rows(ALL), "with the same rows");
    assert_no_secret(&copy.export(), &key, "the copy");
    let new_key = copy
        .keys
        .get()
        .expect("the copy's key is saved in its key store");
    assert_ne!(new_key, key);
    assert_no_secret(&copy.export(), &new_key, "the copy, its own key");
    // Its writes go to the owner's scopes, which do not list it: refused, with a message that
    // names this key, the owner and the ways on.
    let e = copy
        .db
        .exec_script("INSERT INTO todo (id, title) VALUES ('c1', 'from the copy')")
        .unwrap_err();
    assert_eq!(e.code(), "SYNC_REFUSED", "{e}");
    let msg = e.to_string();
    for part in [
        &me.to_hex(),
        &owner.to_hex(),
        "authorize",
        "setOwner",
        "importKey",
    ] {
        assert!(msg.contains(part), "{part} in: {msg}");
    }
    assert_eq!(
        copy.rows("SELECT count(*) FROM todo WHERE id = 'c1'"),
        [[Value::Integer(0)]]
    );
    // Reopened where it is, it keeps its new key (it does not take another each time).
    let (bytes, keys) = copy.close();
    let mut copy = open(bytes, &keys);
    assert_eq!(copy.id(), me);
    // The owner lists it; once the copy has the list, its writes go through, and reach the
    // owner and the peer without a fork of the owner's chain.
    a.sync.authorize(&mut a.db, "todo", vec![me]).unwrap();
    sync_pair(&mut a, &mut copy);
    copy.exec("INSERT INTO todo (id, title) VALUES ('c1', 'from the copy')");
    a.exec("INSERT INTO todo (id, title) VALUES ('a99', 'from the owner')");
    sync_pair(&mut copy, &mut a);
    sync_pair(&mut a, &mut b);
    all_applied(&a);
    all_applied(&b);
    assert_eq!(copy.rows(ALL), a.rows(ALL));
    assert_eq!(b.rows(ALL), a.rows(ALL));
    assert_eq!(
        b.rows("SELECT title FROM todo WHERE id = 'c1'"),
        [[Value::Text("from the copy".into())]]
    );
    for (who, n) in [("a", &mut a), ("b", &mut b), ("copy", &mut copy)] {
        let f = n.sync.verify(&mut n.db).unwrap();
        assert!(f.is_empty(), "{who}: {f:?}");
    }
}

#[test]
fn each_device_of_a_key_is_named_apart() {
    let (mut a, _b) = writer_and_peer();
    let device = a
        .sync
        .device(&mut a.db)
        .unwrap()
        .expect("named with its key");
    // Reopened on its device: the same device.
    let (bytes, keys) = a.close();
    let mut a = open(bytes, &keys);
    assert_eq!(a.sync.device(&mut a.db).unwrap(), Some(device));
    // Its key imported on another device: the same author, another device.
    let key = a.sync.export_key(&mut a.db).unwrap();
    let mut other = new_node();
    other.sync.import_key(&mut other.db, &key).unwrap();
    assert_eq!(other.id(), a.id());
    let moved = other.sync.device(&mut other.db).unwrap().expect("named");
    assert_ne!(moved, device);
    let (bytes, keys) = other.close();
    let mut other = open(bytes, &keys);
    assert_eq!(other.sync.device(&mut other.db).unwrap(), Some(moved));
    // Its file attached elsewhere: another key, another device.
    let mut copy = open(a.export(), &MemoryKeys::new());
    let own = copy.id();
    copy.sync.set_owner(&mut copy.db, own).unwrap();
    let copied = copy.sync.device(&mut copy.db).unwrap().expect("named");
    assert!(copied != device && copied != moved);
    let (bytes, keys) = copy.close();
    let mut copy = open(bytes, &keys);
    assert_eq!(copy.sync.device(&mut copy.db).unwrap(), Some(copied));
}

/// A database saved before devices were named (no meta `device`) is named when it is next
/// opened for writing, keeps that name across reopens, and two copies of it (its file and its
/// key store copied together, as a restored backup) become two peers to the devices they meet.
#[test]
fn a_database_saved_before_devices_were_named_gets_one() {
    let (a, _b) = writer_and_peer();
    let (bytes, keys) = a.close();
    let store = Paged::open(OnDisk(MemoryFile::from_bytes(bytes)), Options::default()).unwrap();
    let mut db = Database::open(Box::new(store)).unwrap();
    let st = db.storage_mut();
    st.begin().unwrap();
    st.delete(META, b"device").unwrap();
    st.commit().unwrap();
    let old = db.into_storage().unwrap().export().unwrap();
    let saved = |n: &mut Node| n.db.storage().get(META, b"device").unwrap();
    let mut a = open(old.clone(), &keys);
    let device = a.sync.device(&mut a.db).unwrap().expect("named at attach");
    assert_eq!(
        saved(&mut a),
        Some(device.to_vec()),
        "saved with the key's metadata"
    );
    let owner = a.id();
    let (bytes, keys_a) = a.close();
    assert_eq!(keys_a.get(), keys.get(), "the same key");
    let mut a = open(bytes, &keys_a);
    assert_eq!(a.sync.device(&mut a.db).unwrap(), Some(device), "kept");
    assert_eq!(a.id(), owner);
    // A second copy of the old file with a copy of its key store: the same author, another
    // device, and a peer that meets both keeps them apart.
    let keys_c = MemoryKeys::new();
    keys_c.clone().save(&keys.get().unwrap()).unwrap();
    let mut c = open(old, &keys_c);
    assert_eq!(c.id(), owner);
    let other = c.sync.device(&mut c.db).unwrap().expect("named at attach");
    assert_ne!(other, device);
    let mut p = new_node();
    p.exec(TODO);
    p.sync.set_owner(&mut p.db, owner).unwrap();
    sync_pair(&mut a, &mut p);
    sync_pair(&mut c, &mut p);
    for d in [device, other] {
        let mut key = b"peer/".to_vec();
        key.extend_from_slice(&cairn_sync::link::peer_key(owner, Some(d)).0);
        assert!(
            p.db.storage().get(META, &key).unwrap().is_some(),
            "each copy is a peer of its own"
        );
    }
}

#[test]
fn export_key_and_import_key_move_an_identity() {
    let (mut a, _b) = writer_and_peer();
    let owner = a.id();
    let key = a.sync.export_key(&mut a.db).unwrap();
    // The database moves to a new device: its file, then its key, explicitly.
    let bytes = a.export();
    let mut moved = open(bytes, &MemoryKeys::new());
    assert_ne!(moved.id(), owner);
    moved.sync.import_key(&mut moved.db, &key).unwrap();
    assert_eq!(moved.id(), owner);
    assert_eq!(moved.keys.get().as_deref(), Some(&key[..]));
    assert_no_secret(&moved.export(), &key, "after importKey");
    // It writes as the owner, where the old device stopped.
    drop(a);
    moved.exec("INSERT INTO todo (id, title) VALUES ('m1', 'moved')");
    let (bytes, keys) = moved.close();
    let mut moved = open(bytes, &keys);
    assert_eq!(moved.id(), owner);
    assert_eq!(moved.sync.export_key(&mut moved.db).unwrap(), key);
    assert!(moved.sync.verify(&mut moved.db).unwrap().is_empty());
    // Into a new, empty database too; and not into one that wrote under its own key.
    let mut fresh = new_node();
    fresh.sync.import_key(&mut fresh.db, &key).unwrap();
    assert_eq!(fresh.id(), owner);
    let mut other = new_node();
    other.exec(TODO);
    other.exec("INSERT INTO todo (id, title) VALUES ('o1', 'own')");
    let e = other.sync.import_key(&mut other.db, &key).unwrap_err();
    assert_eq!(e.code(), "SYNC_HAS_HISTORY");
    assert_ne!(other.id(), owner);
}

#[test]
fn a_key_store_holding_another_key_or_garbage_is_not_used() {
    let (a, _b) = writer_and_peer();
    let (bytes, keys) = a.close();
    let owner = open(bytes.clone(), &keys).id();
    // Another author's key, then bytes that are not a key: neither signs for this database.
    let mut stranger = new_node();
    let strange = stranger.sync.export_key(&mut stranger.db).unwrap();
    for junk in [strange, b"not a key at all".to_vec()] {
        let mut k = MemoryKeys::new();
        k.save(&junk).unwrap();
        let mut n = open(bytes.clone(), &k);
        let id = n.id();
        assert_ne!(id, owner);
        assert_ne!(id, stranger.id());
        assert_eq!(n.keys.get(), Some(n.sync.export_key(&mut n.db).unwrap()));
    }
}

/// Builds the file of a database as layout 5 kept it: the secret key under meta `identity`,
/// written when the sync state was made and copied with the meta tree's page by every commit
/// that changed it since, so that old copies of that page are left in free pages.
fn layout_5() -> (Vec<u8>, Vec<u8>, AuthorId) {
    let (mut a, _b) = writer_and_peer();
    let key = a.sync.export_key(&mut a.db).unwrap();
    let id = a.id();
    let (bytes, _) = a.close();
    let store = Paged::open(OnDisk(MemoryFile::from_bytes(bytes)), Options::default()).unwrap();
    let mut db = Database::open(Box::new(store)).unwrap();
    let st = db.storage_mut();
    st.begin().unwrap();
    st.put(META, b"layout", &[5]).unwrap();
    st.put(META, b"identity", &key).unwrap();
    st.delete(META, b"author").unwrap();
    st.commit().unwrap();
    for i in 0..5u64 {
        st.begin().unwrap();
        st.put(META, b"clock", &(now() + i).to_le_bytes()).unwrap();
        st.commit().unwrap();
    }
    let mut store = db.into_storage().unwrap();
    (store.export().unwrap(), key, id)
}

#[test]
fn a_layout_5_database_moves_its_key_out_and_keeps_no_byte_of_it() {
    let (bytes, key, id) = layout_5();
    assert!(
        holds(&bytes, &key[10..42]),
        "layout 5 kept the key in the file"
    );
    // Attached on its device (whose key store is empty: the key was in the file).
    let keys = MemoryKeys::new();
    let mut a = open(bytes, &keys);
    assert_eq!(a.id(), id, "the same author");
    assert_eq!(
        keys.get().as_deref(),
        Some(&key[..]),
        "the key is in the key store"
    );
    let st = a.db.storage();
    assert_eq!(st.get(META, b"layout").unwrap(), Some(vec![6]));
    assert_eq!(st.get(META, b"identity").unwrap(), None);
    assert_no_secret(&a.export(), &key, "layout 5 migrated");
    // Its chain goes on: a new peer takes everything, old and new, without a complaint.
    a.exec("INSERT INTO todo (id, title) VALUES ('after', 'the migration')");
    let mut p = new_node();
    p.exec(TODO);
    p.sync.set_owner(&mut p.db, id).unwrap();
    sync_pair(&mut a, &mut p);
    all_applied(&p);
    assert_eq!(p.rows(ALL), a.rows(ALL));
    let (bytes, keys) = a.close();
    assert_no_secret(&bytes, &key, "layout 5 migrated, closed");
    let mut a = open(bytes, &keys);
    assert_eq!(a.id(), id);
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
}

/// The native key store beside a database file (`<path>-key`): the key survives a reopen
/// there, and a copy of the file at another path signs as a new author.
#[test]
fn a_key_file_beside_the_database_stays_there() {
    let dir = std::env::temp_dir().join(format!("cairn-keys-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let at = |name: &str| -> (Database, Sync) {
        let path = dir.join(name);
        let store = Paged::open(StdFile::open(&path, true).unwrap(), Options::default()).unwrap();
        let mut db = Database::open(Box::new(store)).unwrap();
        let keys = FileKeys::beside(&path).unwrap();
        let sync = Sync::attach(&mut db, now, Box::new(keys)).unwrap();
        (db, sync)
    };
    let (mut db, sync) = at("app.cairn");
    db.exec_script(TODO).unwrap();
    db.exec_script("INSERT INTO todo (id, title) VALUES ('x', 'one')")
        .unwrap();
    let id = sync.id(&mut db).unwrap();
    let key = sync.export_key(&mut db).unwrap();
    drop((db, sync));
    assert_eq!(std::fs::read(dir.join("app.cairn-key")).unwrap(), key);
    assert_no_secret(
        &std::fs::read(dir.join("app.cairn")).unwrap(),
        &key,
        "on disk",
    );
    let (mut db, sync) = at("app.cairn");
    assert_eq!(sync.id(&mut db).unwrap(), id);
    drop((db, sync));
    std::fs::copy(dir.join("app.cairn"), dir.join("copy.cairn")).unwrap();
    let (mut db, sync) = at("copy.cairn");
    assert_ne!(sync.id(&mut db).unwrap(), id);
    drop((db, sync));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file the previous version wrote (layout 5: ten inserts sealed, an update pending, the key
/// in the file), as the browser test imports it: migrated, it signs as before, its history
/// verifies, and no byte of it holds the key.
#[test]
fn a_layout_5_file_of_the_previous_version_is_migrated() {
    let bytes = include_bytes!("../../../tests/browser/fixtures/layout5.cairn").to_vec();
    let key = include_bytes!("../../../tests/browser/fixtures/layout5.key").to_vec();
    assert!(holds(&bytes, &key), "the fixture keeps its key in the file");
    let id = cairn_sync::Identity::import(&key).unwrap().id();
    let keys = MemoryKeys::new();
    let mut a = open(bytes, &keys);
    assert_eq!(a.id(), id);
    assert_eq!(keys.get(), Some(key.clone()));
    assert_eq!(a.sync.pending_records(), 1);
    assert_eq!(
        a.rows("SELECT count(*), sum(likes) FROM todo"),
        [[Value::Integer(10), Value::Integer(3)]]
    );
    assert!(a.sync.verify(&mut a.db).unwrap().is_empty());
    assert_no_secret(&a.export(), &key, "the previous version's file, migrated");
    let mut p = new_node();
    p.exec(TODO);
    p.sync.set_owner(&mut p.db, id).unwrap();
    sync_pair(&mut a, &mut p);
    all_applied(&p);
    assert_eq!(p.rows(ALL), a.rows(ALL));
}

/// A key store that refuses to save while `fail` is set (a full disk, a lost OPFS handle).
#[derive(Clone)]
struct Flaky {
    keys: MemoryKeys,
    fail: std::rc::Rc<std::cell::Cell<bool>>,
}

impl KeyStore for Flaky {
    fn load(&mut self) -> cairn_sql::Result<Option<Vec<u8>>> {
        self.keys.load()
    }
    fn save(&mut self, key: &[u8]) -> cairn_sql::Result<()> {
        if self.fail.get() {
            return Err(cairn_sql::Error::Storage(cairn_store::Error::Io(
                "the key store refused the write".into(),
            )));
        }
        self.keys.save(key)
    }
}

/// A key the key store could not save is never used: the commit that would have saved it
/// fails and leaves nothing, a copy's attach fails and leaves the file as it was, and both go
/// through once the key store works.
#[test]
fn a_key_the_key_store_refused_signs_nothing() {
    let flaky = Flaky {
        keys: MemoryKeys::new(),
        fail: Default::default(),
    };
    let attach = |bytes: Vec<u8>, k: &Flaky| {
        let file = OnDisk(MemoryFile::from_bytes(bytes));
        let mut db =
            Database::open(Box::new(Paged::open(file, Options::default()).unwrap())).unwrap();
        let sync = Sync::attach(&mut db, now, Box::new(k.clone()));
        (db, sync)
    };
    let (mut db, sync) = attach(Vec::new(), &flaky);
    let sync = sync.unwrap();
    db.exec_script(TODO).unwrap();
    flaky.fail.set(true);
    let e = db
        .exec_script("INSERT INTO todo (id, title) VALUES ('x', 'one')")
        .unwrap_err();
    assert_eq!(e.code(), "IO", "{e}");
    assert_eq!(flaky.keys.get(), None);
    assert_eq!(sync.pending_records(), 0);
    flaky.fail.set(false);
    db.exec_script("INSERT INTO todo (id, title) VALUES ('x', 'one')")
        .unwrap();
    let id = sync.id(&mut db).unwrap();
    assert_eq!(
        flaky.keys.get(),
        Some(sync.export_key(&mut db).unwrap()),
        "the key that signs is the key saved"
    );
    let bytes = db.export().unwrap();
    drop((db, sync));
    // The file on a device whose key store fails: refused, the file left as it was.
    let elsewhere = Flaky {
        keys: MemoryKeys::new(),
        fail: std::rc::Rc::new(std::cell::Cell::new(true)),
    };
    let (db, sync) = attach(bytes.clone(), &elsewhere);
    assert_eq!(sync.err().map(|e| e.code()), Some("IO"));
    let mut store = db.into_storage().unwrap();
    let left = store.export().unwrap();
    let st = Database::open(Box::new(
        Paged::open(OnDisk(MemoryFile::from_bytes(left)), Options::default()).unwrap(),
    ))
    .unwrap();
    assert_eq!(
        st.storage().get(META, b"author").unwrap(),
        Some(id.0.to_vec())
    );
    elsewhere.fail.set(false);
    let (mut db, sync) = attach(bytes, &elsewhere);
    let sync = sync.unwrap();
    let new = sync.id(&mut db).unwrap();
    assert_ne!(new, id);
    assert_eq!(
        elsewhere.keys.get(),
        Some(sync.export_key(&mut db).unwrap())
    );
    // On its own device the first database still signs as before.
    let _ = flaky;
}
