//! The state the capture, the commit hook and the sync calls share ([`State`], behind the
//! `Rc<RefCell<_>>` that `Sync`, `Hook` and `Capture` each hold), its life cycle (made at
//! attach, read again from the store when it went ahead of it), and the replica's view of the
//! catalog: the tables registered with it and the names of the scopes rows go to.

use crate::capture::{Scopes, Shape, Sunk};
use crate::persist::{KeyFix, Saved};
use crate::{sync_err, Clock, KeyStore, SyncEvent};
use cairn_sql::{Catalog, Key, Table};
use cairn_sql::{Error, Result, SchemaStamp, Storage, Value};
use cairn_sync::{AuthorId, ChainKey, ColumnKind, Identity, Link, Replica, TableSchema};
use std::collections::HashMap;
use std::rc::Rc;

/// Everything the sync side of a database keeps between calls: the replica, the links, what
/// the store holds of it (`saved`, `stale`), and the capture's work in the open transaction.
pub(crate) struct State {
    pub(crate) now: Clock,
    /// None until the first replicated commit or sync call creates the identity.
    pub(crate) replica: Option<Replica>,
    /// A key pair made when the database was attached with none saved, for the first
    /// replicated commit or sync call to save (making one costs as much as a few dozen
    /// single commits; a commit should not pay it). Taken by that call whether or not its
    /// transaction commits: a failed one leaves a new key to be made next time, never a key
    /// used but not saved.
    pub(crate) spare: Option<Identity>,
    /// Where the secret key is kept (never in the database file).
    pub(crate) keys: Box<dyn KeyStore>,
    /// What must be saved of the key before the replica writes (a layout-5 key to move, a new
    /// key for a database whose author's key is not in the key store): `settle_key`, which
    /// attach and every write call first.
    pub(crate) key_fix: Option<KeyFix>,
    /// The owner of the scopes local writes go to (this device's key unless set).
    pub(crate) owner: Option<AuthorId>,
    /// Table definitions registered with the replica, by name: the catalog's definition (held,
    /// so an unchanged table is recognized by pointer without rendering its SQL on every
    /// commit) and the SQL text it came from.
    pub(crate) registered: Vec<(Rc<Table>, String)>,
    /// The catalog `registered` was last made to match on a commit (none after it was
    /// cleared): a commit of the same catalog registers nothing.
    pub(crate) registered_for: Option<SchemaStamp>,
    /// What a commit needs of each replicated table it wrote, kept from one commit to the
    /// next (dropped when a definition changes).
    pub(crate) shapes: Vec<Shape>,
    pub(crate) scopes: Scopes,
    pub(crate) saved: Saved,
    pub(crate) links: HashMap<u32, Link>,
    pub(crate) next_link: u32,
    pub(crate) events: Vec<SyncEvent>,
    /// Messages that arrived while the application had a transaction open.
    pub(crate) inbox: Vec<(u32, Vec<u8>)>,
    /// Some when a commit or sync call changed the in-memory state and did not reach the
    /// store: the state is read again from the store before its next use. Holds how many
    /// records the store has pending, which `pending_records` reports until then.
    pub(crate) stale: Option<usize>,
    /// Records the commit being recorded appended to the chains, not yet known to be stored.
    pub(crate) uncommitted: usize,
    /// The store is volatile ([`Storage::volatile`]: memory): a local commit's records are
    /// kept in the replica alone, not written to the store's trees with the commit (nothing
    /// reads them there before the store is read whole:
    /// [`CommitHook::flush`](cairn_sql::CommitHook::flush) writes them then, and every sync
    /// call before it begins).
    pub(crate) defer: bool,
    /// Over a volatile store, local records are committed that the store does not hold yet.
    pub(crate) unwritten: bool,
    /// Where in each scope's chain (its slot in `scopes`) the records of the commit being
    /// recorded begin (the seq of its first), for a failed commit over a volatile store.
    pub(crate) uncommitted_from: Vec<(usize, u64)>,
    /// Set when the state went stale over a volatile store: the head of each of the
    /// replica's own chains that was committed, which a reload keeps (the store may hold less:
    /// `defer`).
    pub(crate) keep: Option<Vec<(ChainKey, u64)>>,
    /// A purge (this replica's or a peer's) committed but zeroing the free pages after it
    /// failed: the next purge or sync call that commits zeroes them again.
    pub(crate) erase_owed: bool,
    /// The capture in the open transaction (see `Capture`): None before its first change;
    /// then whether it writes the ops of the tables it takes as they come (the replica is
    /// known and up to date) or every change waits in `Changes` for the commit.
    pub(crate) sink_on: Option<bool>,
    /// Each change the capture took in this transaction, with where its scope's writers
    /// stood before it: a failed statement's are dropped.
    pub(crate) sunk: Sunk,
    /// The last change's table, as the capture found it: its shape, its scope and the
    /// scopes' epoch then (kept from one transaction to the next).
    pub(crate) sink_last: Option<(usize, usize, u64)>,
    /// An op the capture could not write: the commit fails with it.
    pub(crate) sink_error: Option<Error>,
}

impl State {
    /// The state of a database at attach: what `store` holds of its replica, or a key pair
    /// made for the first replicated commit or sync call to save.
    pub(crate) fn open(
        store: &dyn Storage,
        catalog: &Catalog,
        now: Clock,
        keys: Box<dyn KeyStore>,
    ) -> Result<State> {
        let mut st = State {
            now,
            replica: None,
            spare: None,
            keys,
            key_fix: None,
            owner: None,
            registered: Vec::new(),
            registered_for: None,
            shapes: Vec::new(),
            scopes: Scopes::default(),
            saved: Saved::default(),
            links: HashMap::new(),
            next_link: 1,
            events: Vec::new(),
            inbox: Vec::new(),
            stale: None,
            erase_owed: false,
            uncommitted: 0,
            defer: store.volatile(),
            unwritten: false,
            uncommitted_from: Vec::new(),
            keep: None,
            sink_on: None,
            sunk: Sunk::default(),
            sink_last: None,
            sink_error: None,
        };
        st.load(store, catalog)?;
        if st.replica.is_none() {
            // Nothing saved yet: the key pair is made now, written by the first
            // replicated commit or sync call.
            st.spare = Some(Identity::generate(&mut rand_core::OsRng));
        }
        st.shapes_for(catalog);
        Ok(st)
    }

    /// Runs one protocol step on the replica over open link `link`, at the host's time.
    pub(crate) fn on_link<T>(
        &mut self,
        link: u32,
        f: impl FnOnce(&mut Replica, &mut Link, u64) -> T,
    ) -> Result<T> {
        let now = (self.now)();
        let l = self
            .links
            .get_mut(&link)
            .ok_or_else(|| Error::Sync("SYNC_NO_LINK", format!("no open link {link}")))?;
        let replica = self.replica.as_mut().expect("invariant: ensured");
        // A protocol step reads chain heads and the merged rows.
        replica.catch_up();
        Ok(f(replica, l, now))
    }

    /// Forgets the in-memory state and reads it again from `store` (stale still, should that
    /// fail).
    pub(crate) fn reload(&mut self, store: &dyn Storage, catalog: &Catalog) -> Result<()> {
        let durable = self.stale.unwrap_or_else(|| self.pending());
        self.stale = Some(durable);
        let old = self.replica.take();
        let keep = self.keep.take();
        self.unwritten = false;
        self.registered.clear();
        self.registered_for = None;
        self.shapes.clear();
        self.scopes = Scopes::default();
        self.sink_last = None;
        self.sink_on = None;
        self.saved = Saved::default();
        self.uncommitted = 0;
        self.uncommitted_from.clear();
        let kept = match (&old, &keep) {
            (Some(r), Some(k)) => Some((r, k.as_slice())),
            _ => None,
        };
        if let Err(e) = self.load_keeping(store, catalog, kept) {
            // Still stale, with what the next attempt keeps.
            self.replica = old;
            self.keep = keep;
            return Err(e);
        }
        self.shapes_for(catalog);
        self.stale = None;
        Ok(())
    }

    /// The records pending in memory (the store's too unless the state is stale).
    pub(crate) fn pending(&self) -> usize {
        self.replica.as_ref().map_or(0, |r| r.pending_records())
    }

    /// The in-memory state went ahead of the store (a write failed), whose records pending
    /// were `durable`: it is read again before its next use. The first failure's count stands.
    pub(crate) fn mark_stale(&mut self, durable: usize) {
        self.stale.get_or_insert(durable);
        // The capture decides again, at the next transaction's first change.
        self.sink_on = None;
    }

    pub(crate) fn replica(&self) -> &Replica {
        self.replica.as_ref().expect("invariant: ensured")
    }
    pub(crate) fn replica_mut(&mut self) -> &mut Replica {
        self.replica.as_mut().expect("invariant: ensured")
    }

    /// Creates the trees and the identity if this database has none yet (inside the caller's
    /// transaction), and registers the replicated tables of `catalog`.
    pub(crate) fn ensure(&mut self, store: &mut dyn Storage, catalog: &Catalog) -> Result<()> {
        if self.replica.is_none() {
            let (identity, device) =
                crate::persist::create(store, &mut *self.keys, self.spare.take())?;
            let mut replica = Replica::in_memory(identity, cairn_sync::Config::default());
            replica.set_device(device);
            self.replica = Some(replica);
        }
        self.settle_key(store)?;
        self.register(catalog)
    }

    /// [`State::ensure`] for a commit of the catalog `schema` names: one of the catalog the
    /// last commit registered has nothing new to register. Whether the catalog is another.
    pub(crate) fn ensure_for(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: SchemaStamp,
    ) -> Result<bool> {
        if self.replica.is_some() && self.registered_for == Some(schema) && self.key_fix.is_none() {
            return Ok(false);
        }
        self.registered_for = None;
        self.ensure(store, catalog)?;
        self.registered_for = Some(schema);
        Ok(true)
    }

    /// Registers every replicated table whose definition is new or changed.
    pub(crate) fn register(&mut self, catalog: &Catalog) -> Result<()> {
        let Some(replica) = self.replica.as_mut() else {
            return Ok(());
        };
        // Every commit asks: the definitions registered are kept in the catalog's order, so
        // an unchanged catalog is recognized by pointer, one table after the other.
        let replicated = || catalog.tables.values().filter(|t| t.replicated.is_some());
        if replicated().enumerate().all(|(i, t)| {
            self.registered
                .get(i)
                .is_some_and(|(k, _)| Rc::ptr_eq(k, t))
        }) {
            return Ok(());
        }
        for t in replicated() {
            let known = self.registered.iter().position(|(k, _)| k.name == t.name);
            // Holding the Rc keeps the catalog from changing the definition in place.
            if known.is_some_and(|i| Rc::ptr_eq(&self.registered[i].0, t)) {
                continue;
            }
            let sql = t.sql();
            match known {
                Some(i) if self.registered[i].1 == sql => self.registered[i].0 = t.clone(),
                Some(i) => {
                    replica.register_table(sync_schema(t)).map_err(sync_err)?;
                    self.registered[i] = (t.clone(), sql);
                }
                None => {
                    replica.register_table(sync_schema(t)).map_err(sync_err)?;
                    self.registered.push((t.clone(), sql));
                }
            }
        }
        // The catalog's order, and tables no longer in it (dropped) after.
        let at = |k: &Rc<Table>| replicated().position(|t| Rc::ptr_eq(k, t));
        self.registered
            .sort_by_key(|(k, _)| at(k).unwrap_or(usize::MAX));
        // The shapes of definitions no longer the catalog's go (each is looked for by name).
        self.shapes_for(catalog);
        Ok(())
    }

    pub(crate) fn scope_name(t: &Table, row: &[Value]) -> String {
        match t.replicated.as_ref().and_then(|r| r.scope) {
            None => t.name.clone(),
            Some(c) => Self::scoped_name(t, c, &row[c]),
        }
    }

    pub(crate) fn scoped_name(t: &Table, c: usize, v: &Value) -> String {
        format!("{}/{}={}", t.name, t.columns[c].name, scope_value(v))
    }

    pub(crate) fn owner(&self) -> AuthorId {
        self.owner.unwrap_or_else(|| self.replica().id())
    }
}

/// A scope value as it appears in a scope name.
fn scope_value(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Text(s) => s.clone(),
        other => {
            let b = cairn_sync::wire::value_bytes(other);
            b.iter().map(|x| format!("{x:02x}")).collect()
        }
    }
}

/// The sync schema of a replicated SQL table: key arity, the other columns in table order
/// (counters, sets and maps as such), unique column sets over those columns.
pub fn sync_schema(t: &Table) -> TableSchema {
    let pk_cols = t.key_columns();
    let repl = t.replicated.clone().unwrap_or_default();
    let mut s = TableSchema::new(t.name.clone(), pk_cols.len());
    let non_key: Vec<usize> = (0..t.columns.len())
        .filter(|c| !pk_cols.contains(c))
        .collect();
    for &c in &non_key {
        let kind = match repl.kind(c) {
            cairn_sql::Merged::Lww => ColumnKind::Lww,
            cairn_sql::Merged::Counter => ColumnKind::Counter,
            cairn_sql::Merged::Set => ColumnKind::Set,
            cairn_sql::Merged::Map => ColumnKind::Map,
        };
        s.columns.push((t.columns[c].name.clone(), kind));
    }
    for ix in t.indexes.iter().filter(|i| i.unique) {
        let cols: Option<Vec<u32>> = ix
            .columns
            .iter()
            .map(|c| non_key.iter().position(|x| x == c).map(|i| i as u32))
            .collect();
        if let Some(cols) = cols {
            s.unique.push(cols);
        }
    }
    debug_assert!(matches!(t.key, Key::Columns(_)));
    s
}
