//! cairn-replicated: a SQL database whose `REPLICATED` tables are sync replicas.
//!
//! [`Sync::attach`] installs a commit hook on a [`cairn_sql::Database`]. From then on:
//! - a commit that wrote to replicated tables hands its row changes to the hook, which turns
//!   them into sync ops (one record per scope, appended to this device's chain by
//!   [`cairn_sync::Replica::commit`]) and saves the replica's new state in the database's own
//!   trees, inside the same storage transaction: the rows and their history commit together;
//! - [`Sync::connect`], [`Sync::receive`] and [`Sync::poll`] run the sync protocol over a
//!   transport that carries bytes; what a peer sends is verified, merged, applied to the SQL
//!   tables (without being recorded as a local change) and saved, again in one transaction.
//!
//! The replica's merged rows are also kept in memory (loaded at attach); a local commit's
//! records join them when next needed (a peer's records, any sync call), not on the write path. docs/sync.md, section
//! "In the database", describes the saved layout and the SQL rules.

mod persist;

use cairn_sql::same_row;
use cairn_sql::{
    CaptureSink, Changes, CommitHook, Correction, Database, EncodedRow, Error, Result, Storage,
    Value,
};
use cairn_sql::{Catalog, Key, Table};
use cairn_sync::change::Encoded;
use cairn_sync::{
    AuthorId, ChainKey, ColumnKind, Event, Identity, Link, OpsWriter, Replica, RowKey, RowStore,
    ScopeId, TableSchema, WholeRow,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

pub use cairn_sync::Failure;

/// Where the time comes from (milliseconds since 1970): the host's clock.
pub type Clock = fn() -> u64;

/// Something the application should hear about: a peer's block refused, a row that could not
/// be applied, a fork.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncEvent {
    /// `applied`, `rejected`, `fork`, `peer_rejected`, `row_refused`.
    pub kind: &'static str,
    /// A stable code (the sync reason, or the SQL error code for `row_refused`).
    pub code: String,
    pub detail: String,
}

fn sync_err(e: cairn_sync::Error) -> Error {
    Error::Sync("SYNC", e.to_string())
}

/// The sync side of a database. Cheap to clone (it is shared with the commit hook).
#[derive(Clone)]
pub struct Sync {
    st: Rc<RefCell<State>>,
}

pub(crate) struct State {
    pub(crate) now: Clock,
    /// None until the first replicated commit or sync call creates the identity.
    pub(crate) replica: Option<Replica>,
    /// A key pair made when the database was attached with none saved, for the first
    /// replicated commit or sync call to save (making one costs as much as a few dozen
    /// single commits; a commit should not pay it). Taken by that call whether or not its
    /// transaction commits: a failed one leaves a new key to be made next time, never a key
    /// used but not saved.
    spare: Option<Identity>,
    /// The owner of the scopes local writes go to (this device's key unless set).
    pub(crate) owner: Option<AuthorId>,
    /// Table definitions registered with the replica, by name: the catalog's definition (held,
    /// so an unchanged table is recognized by pointer without rendering its SQL on every
    /// commit) and the SQL text it came from.
    registered: Vec<(Rc<Table>, String)>,
    /// The catalog `registered` was last made to match on a commit (none after it was
    /// cleared): a commit of the same catalog registers nothing.
    registered_for: Option<cairn_sql::SchemaStamp>,
    /// What a commit needs of each replicated table it wrote, kept from one commit to the
    /// next (dropped when a definition changes).
    shapes: Vec<Shape>,
    scopes: Scopes,
    pub(crate) saved: persist::Saved,
    links: HashMap<u32, Link>,
    next_link: u32,
    events: Vec<SyncEvent>,
    /// Messages that arrived while the application had a transaction open.
    inbox: Vec<(u32, Vec<u8>)>,
    /// Some when a commit or sync call changed the in-memory state and did not reach the
    /// store: the state is read again from the store before its next use. Holds how many
    /// records the store has pending, which `pending_records` reports until then.
    stale: Option<usize>,
    /// Records the commit being recorded appended to the chains, not yet known to be stored.
    uncommitted: usize,
    /// The store is volatile ([`Storage::volatile`]: memory): a local commit's records are
    /// kept in the replica alone, not written to the store's trees with the commit (nothing
    /// reads them there before the store is read whole: [`CommitHook::flush`] writes them
    /// then, and every sync call before it begins).
    defer: bool,
    /// Over a volatile store, local records are committed that the store does not hold yet.
    unwritten: bool,
    /// Where in each scope's chain (its slot in `scopes`) the records of the commit being
    /// recorded begin (the seq of its first), for a failed commit over a volatile store.
    uncommitted_from: Vec<(usize, u64)>,
    /// Set when the state went stale over a volatile store: the head of each of the
    /// replica's own chains that was committed, which a reload keeps (the store may hold less:
    /// `defer`).
    keep: Option<Vec<(ChainKey, u64)>>,
    /// A purge (this replica's or a peer's) committed but zeroing the free pages after it
    /// failed: the next purge or sync call that commits zeroes them again.
    erase_owed: bool,
    /// The capture in the open transaction (see `Capture`): None before its first change;
    /// then whether it writes the ops of the tables it takes as they come (the replica is
    /// known and up to date) or every change waits in `Changes` for the commit.
    sink_on: Option<bool>,
    /// Each change the capture took in this transaction, with where its scope's writers
    /// stood before it: a failed statement's are dropped.
    sunk: Sunk,
    /// The last change's table, as the capture found it: its shape, its scope and the
    /// scopes' epoch then (kept from one transaction to the next).
    sink_last: Option<(usize, usize, u64)>,
    /// An op the capture could not write: the commit fails with it.
    sink_error: Option<Error>,
}

impl Sync {
    /// Installs the hook on `db` and loads what the database holds of its replica (nothing is
    /// written until the first replicated commit or sync call).
    pub fn attach(db: &mut Database, now: Clock) -> Result<Sync> {
        // A hook attached before may hold records the store does not (`State::defer`).
        db.flush()?;
        let st = Rc::new(RefCell::new(State {
            now,
            replica: None,
            spare: None,
            owner: None,
            registered: Vec::new(),
            registered_for: None,
            shapes: Vec::new(),
            scopes: Scopes::default(),
            saved: persist::Saved::default(),
            links: HashMap::new(),
            next_link: 1,
            events: Vec::new(),
            inbox: Vec::new(),
            stale: None,
            erase_owed: false,
            uncommitted: 0,
            defer: db.storage().volatile(),
            unwritten: false,
            uncommitted_from: Vec::new(),
            keep: None,
            sink_on: None,
            sunk: Sunk::default(),
            sink_last: None,
            sink_error: None,
        }));
        {
            let mut st = st.borrow_mut();
            st.load(db.storage(), db.catalog())?;
            if st.replica.is_none() {
                // Nothing saved yet: the key pair is made now, written by the first
                // replicated commit or sync call.
                st.spare = Some(Identity::generate(&mut rand_core::OsRng));
            }
            st.shapes_for(db.catalog());
        }
        db.set_commit_hook(Box::new(Hook(st.clone())));
        db.set_capture_sink(Box::new(Capture(st.clone())));
        Ok(Sync { st })
    }

    /// This device's author id (creating the key pair on first use).
    pub fn id(&self, db: &mut Database) -> Result<AuthorId> {
        self.read(db, |st| Ok(st.replica().id()))
    }

    /// Signs `message` with this device's key (for a relay's challenge, docs/relay.md).
    pub fn sign(&self, db: &mut Database, message: &[u8]) -> Result<[u8; 64]> {
        self.read(db, |st| Ok(st.replica().identity().sign(message)))
    }

    /// The key pair, to move this identity to another device (`cairn-key` format).
    pub fn export_key(&self, db: &mut Database) -> Result<Vec<u8>> {
        self.read(db, |st| Ok(st.replica().identity().export()))
    }

    /// Replaces this device's key pair with an exported one. Refused once this device has
    /// written history under its own key (that history would lose its author).
    pub fn import_key(&self, db: &mut Database, bytes: &[u8]) -> Result<()> {
        let identity =
            Identity::import(bytes).map_err(|e| Error::Sync("SYNC_BAD_KEY", e.to_string()))?;
        self.write(db, |st, store| {
            let me = st.replica().id();
            if st.replica().chains().any(|((a, _), _)| *a == me) {
                return Err(Error::Sync(
                    "SYNC_HAS_HISTORY",
                    "this database already wrote changes under its own key; import the key into a new database".into(),
                ));
            }
            persist::put_identity(store, &identity)?;
            // Read again below (and, should that fail, at the next use).
            let pending = st.pending();
            st.mark_stale(pending);
            Ok(())
        })?;
        self.reload(db)
    }

    /// Sets whose scopes this device's writes go to: its own (the default) or another author's
    /// that listed it as a writer (`authorize`). Saved in the database.
    pub fn set_owner(&self, db: &mut Database, owner: AuthorId) -> Result<()> {
        self.write(db, |st, store| {
            persist::put_owner(store, &owner)?;
            st.owner = Some(owner);
            // The capture's scopes are the owner's: it starts them again.
            st.sink_on = None;
            Ok(())
        })
    }

    /// Asks peers only for the scopes whose names start with one of `prefixes` (a table name,
    /// or `table/column=value` for one scope of a scoped table); empty asks for everything.
    /// Saved in the database; takes effect on the next connection.
    pub fn subscribe(&self, db: &mut Database, prefixes: Vec<String>) -> Result<()> {
        let sub = subscription(&prefixes);
        self.write(db, |st, store| {
            persist::put_subscription(store, &sub)?;
            st.replica_mut().config_mut().subscription = sub;
            Ok(())
        })
    }

    /// As the owner of scope `name`, signs the list of other authors allowed to write to it.
    pub fn authorize(&self, db: &mut Database, name: &str, writers: Vec<AuthorId>) -> Result<()> {
        self.write(db, |st, store| {
            let version = st
                .replica()
                .writer_lists()
                .filter(|l| l.scope.name == name.as_bytes() && l.scope.owner == st.replica().id())
                .map(|l| l.version)
                .max()
                .unwrap_or(0)
                + 1;
            // Lists only grow: keep everyone listed before.
            let mut all: BTreeSet<AuthorId> = st
                .replica()
                .writer_lists()
                .filter(|l| l.scope.name == name.as_bytes() && l.scope.owner == st.replica().id())
                .flat_map(|l| l.writers.iter().copied())
                .collect();
            all.extend(writers);
            st.replica_mut()
                .sign_writers(name.as_bytes(), version, all.into_iter().collect());
            st.persist(store)
        })
    }

    /// Opens a link to a peer: its id and the HELLO to send.
    pub fn connect(&self, db: &mut Database) -> Result<(u32, Vec<u8>)> {
        self.write(db, |st, store| {
            let id = st.next_link;
            st.next_link += 1;
            let now = (st.now)();
            let mut link = Link::new();
            let hello = st.replica_mut().open_link(&mut link, now);
            st.links.insert(id, link);
            // open_link seals pending records: save the blocks.
            st.persist(store)?;
            Ok((id, hello))
        })
    }

    pub fn disconnect(&self, link: u32) {
        self.st.borrow_mut().links.remove(&link);
    }

    /// Handles bytes a peer sent over `link`; returns what to send back. While the application
    /// has a transaction open the message waits (handled by the next call after it ends).
    pub fn receive(&self, db: &mut Database, link: u32, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
        if db.in_transaction() {
            self.st.borrow_mut().inbox.push((link, bytes.to_vec()));
            return Ok(Vec::new());
        }
        let mut out = self.drain_inbox(db)?;
        out.extend(self.handle(db, link, bytes)?);
        Ok(out)
    }

    fn drain_inbox(&self, db: &mut Database) -> Result<Vec<Vec<u8>>> {
        let queued = std::mem::take(&mut self.st.borrow_mut().inbox);
        let mut out = Vec::new();
        for (link, bytes) in queued {
            out.extend(self.handle(db, link, &bytes)?);
        }
        Ok(out)
    }

    fn handle(&self, db: &mut Database, link: u32, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.write_sql(db, link, |st| {
            let out = st.on_link(link, |r, l, now| r.handle(l, now, bytes))?;
            Ok((out.send, out.events))
        })
    }

    /// What to send on `link` now: new local blocks, retransmissions. Call it after local
    /// commits and on a timer.
    pub fn poll(&self, db: &mut Database, link: u32) -> Result<Vec<Vec<u8>>> {
        if db.in_transaction() {
            return Ok(Vec::new());
        }
        let mut out = self.drain_inbox(db)?;
        let quiet = {
            let mut st = self.st.borrow_mut();
            let ready = st.replica.is_some() && st.stale.is_none();
            if ready && !st.replica().has_pending() {
                // Nothing to seal, nothing to save: retransmissions only, no disk write.
                Some(st.on_link(link, |r, l, now| r.poll(l, now))?)
            } else {
                None
            }
        };
        if let Some(send) = quiet {
            out.extend(send);
            return Ok(out);
        }
        out.extend(self.write(db, |st, store| {
            let send = st.on_link(link, |r, l, now| r.poll(l, now))?;
            st.persist(store)?;
            Ok(send)
        })?);
        Ok(out)
    }

    /// Seals this replica's pending records into signed blocks and saves them: what a host
    /// calls on an idle timer, so that changes are signed soon after they are written even with
    /// no peer connected (`poll` also seals before anything leaves). Returns the blocks made;
    /// nothing is written when nothing is pending, and nothing is done inside a transaction.
    pub fn seal(&self, db: &mut Database) -> Result<usize> {
        if db.in_transaction() || !self.has_pending() {
            return Ok(0);
        }
        self.write(db, |st, store| {
            let n = st.replica_mut().seal();
            st.persist(store)?;
            Ok(n)
        })
    }

    /// Records committed and not yet sealed into a signed block: those the database holds (a
    /// commit or seal that failed leaves the count as it was).
    pub fn pending_records(&self) -> usize {
        let st = self.st.borrow();
        st.stale.unwrap_or_else(|| st.pending())
    }

    /// Events since the last call.
    pub fn take_events(&self) -> Vec<SyncEvent> {
        std::mem::take(&mut self.st.borrow_mut().events)
    }

    /// Re-checks every stored signature and chain link.
    pub fn verify(&self, db: &mut Database) -> Result<Vec<Failure>> {
        self.read(db, |st| Ok(st.replica().verify()))
    }

    /// Deletes a row of a replicated table and erases its values from the history this
    /// replica holds, leaving a signed tombstone that makes every replica do the same. The
    /// free pages of the file are then zeroed, so no old version of a page keeps the values.
    /// Returns whether the row existed.
    pub fn purge(&self, db: &mut Database, table: &str, pk: &[Value]) -> Result<bool> {
        let t = db.catalog().table(table)?.clone();
        if t.replicated.is_none() {
            return Err(Error::NotReplicable(format!(
                "table {} is not replicated",
                t.name
            )));
        }
        let pk_cols = t.key_columns();
        if pk.len() != pk_cols.len() {
            return Err(Error::ParamCount(format!(
                "{} has a key of {} columns, {} values were given",
                t.name,
                pk_cols.len(),
                pk.len()
            )));
        }
        let where_pk: Vec<String> = pk_cols
            .iter()
            .map(|&c| format!("{} = ?", cairn_sql::quote_ident(&t.columns[c].name)))
            .collect();
        let sel = format!(
            "SELECT * FROM {} WHERE {}",
            cairn_sql::quote_ident(&t.name),
            where_pk.join(" AND ")
        );
        let row = match db.execute(&sel, pk)? {
            cairn_sql::Output::Rows { mut rows, .. } if !rows.is_empty() => rows.swap_remove(0),
            _ => return Ok(false),
        };
        let del = format!(
            "DELETE FROM {} WHERE {}",
            cairn_sql::quote_ident(&t.name),
            where_pk.join(" AND ")
        );
        // A failed commit left the state ahead of the store: the purge's record must follow
        // what the store holds.
        if self.st.borrow().stale.is_some() {
            self.reload(db)?;
        }
        let durable = self.st.borrow().pending();
        db.execute("BEGIN", &[])?;
        let r = (|| {
            db.without_capture(|db| db.execute(&del, pk).map(|_| ()))?;
            let catalog = db.catalog().clone();
            let mut st = self.st.borrow_mut();
            st.ensure(db.storage_mut(), &catalog)?;
            let scope = ScopeId::new(st.owner(), State::scope_name(&t, &row).as_bytes());
            let now = (st.now)();
            st.replica_mut()
                .purge(now, &scope, &t.name, pk.to_vec())
                .map_err(refused)?;
            st.persist(db.storage_mut())
        })();
        match r {
            Ok(()) => {
                if let Err(e) = db.execute("COMMIT", &[]) {
                    // The tombstone's record is in memory only.
                    self.st.borrow_mut().mark_stale(durable);
                    return Err(e);
                }
                // Copy-on-write left the purged values in the pages this commit freed (and
                // in older free pages): overwrite them, so the file keeps no copy.
                self.erase_free(db)?;
                Ok(true)
            }
            Err(e) => {
                let _ = db.execute("ROLLBACK", &[]);
                self.st.borrow_mut().mark_stale(durable);
                Err(e)
            }
        }
    }

    /// Zeroes the file's free pages after a purge's commit (`Db::erase_free_pages`). When that
    /// fails the purge stands, committed; the erase is owed, made again after the next purge
    /// or sync call commits, and the error says so (`ERASE_PENDING`).
    fn erase_free(&self, db: &mut Database) -> Result<()> {
        let r = db.storage_mut().erase_free();
        self.st.borrow_mut().erase_owed = r.is_err();
        r.map(|_| ()).map_err(|e| {
            Error::Sync(
                "ERASE_PENDING",
                format!(
                    "the purge is committed, but zeroing the free pages that may still hold the \
                     old values failed ({e}); it is tried again after the next purge or sync call"
                ),
            )
        })
    }

    /// Drops history every known peer has acknowledged; returns the records dropped.
    pub fn compact(&self, db: &mut Database) -> Result<usize> {
        self.write(db, |st, store| {
            let n = st.replica_mut().compact();
            st.persist(store)?;
            Ok(n)
        })
    }

    /// A digest of every merged row: equal on replicas that hold the same changes.
    pub fn state_digest(&self, db: &mut Database) -> Result<[u8; 32]> {
        self.read(db, |st| Ok(st.replica().state_digest()))
    }

    /// Changes recorded and not yet sealed into a signed block (as `pending_records`, those
    /// the database holds).
    pub fn has_pending(&self) -> bool {
        let st = self.st.borrow();
        match st.stale {
            Some(n) => n > 0,
            None => st.replica.as_ref().is_some_and(|r| r.has_pending()),
        }
    }

    fn reload(&self, db: &mut Database) -> Result<()> {
        self.st.borrow_mut().reload(db.storage(), db.catalog())
    }

    /// Runs `f` on the state without writing; falls back to `write` until the replica exists.
    fn read<T>(&self, db: &mut Database, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        {
            let mut st = self.st.borrow_mut();
            if st.replica.is_some() && st.stale.is_none() {
                st.replica_mut().catch_up();
                return f(&mut st);
            }
        }
        self.write(db, |st, _| f(st))
    }

    /// Runs `f` on the state inside a storage transaction of its own, creating the replica
    /// first when needed; commits what `f` wrote.
    fn write<T>(
        &self,
        db: &mut Database,
        f: impl FnOnce(&mut State, &mut dyn Storage) -> Result<T>,
    ) -> Result<T> {
        if db.in_transaction() {
            return Err(Error::Transaction(
                "sync calls run between transactions; commit or roll back first".into(),
            ));
        }
        // Over a volatile store, the local records held in memory alone are written (and
        // committed) first: a call that fails then reads the state again from the store.
        db.flush()?;
        if self.st.borrow().stale.is_some() {
            self.reload(db)?;
        }
        let durable = self.st.borrow().pending();
        let catalog = db.catalog().clone();
        let store = db.storage_mut();
        store.begin()?;
        let r = (|| {
            let mut st = self.st.borrow_mut();
            st.ensure(store, &catalog)?;
            st.replica_mut().catch_up();
            f(&mut st, store)
        })();
        match r {
            Ok(v) => match store.commit() {
                Ok(()) => Ok(v),
                Err(e) => {
                    self.st.borrow_mut().mark_stale(durable);
                    Err(e)
                }
            },
            Err(e) => {
                self.st.borrow_mut().mark_stale(durable);
                store.rollback()?;
                Err(e)
            }
        }
    }

    /// Like `write`, for protocol input: `f` returns messages to send and events; rows the
    /// events name are applied to the SQL tables before the transaction commits.
    ///
    /// When the call fails nothing of it is kept: the store rolls back and the state is read
    /// again, the events it reported are taken back, and `link` forgets what it sent in the
    /// reply that is not going out (the next `poll` sends it again, as after a retransmission
    /// timeout). What the peer sent is sent again by the peer, which saw no acknowledgement.
    fn write_sql(
        &self,
        db: &mut Database,
        link: u32,
        f: impl FnOnce(&mut State) -> Result<(Vec<Vec<u8>>, Vec<Event>)>,
    ) -> Result<Vec<Vec<u8>>> {
        // As in `write`.
        db.flush()?;
        if self.st.borrow().stale.is_some() {
            self.reload(db)?;
        }
        let durable = self.st.borrow().pending();
        let events_before = self.st.borrow().events.len();
        let failed = |st: &mut State| {
            st.mark_stale(durable);
            st.events.truncate(events_before);
            if let Some(l) = st.links.get_mut(&link) {
                l.rewind();
            }
        };
        db.execute("BEGIN", &[])?;
        let redactions = self.st.borrow().replica.as_ref().map(|r| r.redactions());
        let r = (|| {
            let catalog = db.catalog().clone();
            let (send, events) = {
                let mut st = self.st.borrow_mut();
                st.ensure(db.storage_mut(), &catalog)?;
                st.replica_mut().catch_up();
                f(&mut st)?
            };
            let mut rows: BTreeSet<RowKey> = BTreeSet::new();
            {
                let mut st = self.st.borrow_mut();
                for e in events {
                    if let Event::Applied { rows: r, .. } = &e {
                        rows.extend(r.iter().cloned());
                    }
                    st.events.push(event(e));
                }
            }
            self.apply_rows(db, &catalog, rows)?;
            let mut st = self.st.borrow_mut();
            st.persist(db.storage_mut())?;
            Ok(send)
        })();
        match r {
            Ok(send) => match db.execute("COMMIT", &[]) {
                Ok(_) => {
                    // A peer's purge redacted history here: as after a local purge, leave no
                    // copy of the values in freed pages. The call's commit stands whatever
                    // happens to that: its messages go out, and a failed erase is owed.
                    let now = self.st.borrow().replica.as_ref().map(|r| r.redactions());
                    if now != redactions || self.st.borrow().erase_owed {
                        let _ = self.erase_free(db);
                    }
                    Ok(send)
                }
                Err(e) => {
                    failed(&mut self.st.borrow_mut());
                    Err(e)
                }
            },
            Err(e) => {
                let _ = db.execute("ROLLBACK", &[]);
                failed(&mut self.st.borrow_mut());
                Err(e)
            }
        }
    }

    /// Brings the SQL tables in line with the merged rows for `rows` (which arrived from a
    /// peer). Tables with UNIQUE constraints are reconciled whole: which of two conflicting
    /// rows is visible depends on rows this batch did not touch.
    fn apply_rows(
        &self,
        db: &mut Database,
        catalog: &Catalog,
        rows: BTreeSet<RowKey>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut by_table: BTreeMap<String, Vec<RowKey>> = BTreeMap::new();
        for k in rows {
            by_table.entry(k.table.clone()).or_default().push(k);
        }
        let mut all: Vec<cairn_sql::ForcedRow> = Vec::new();
        for (name, keys) in by_table {
            let Ok(t) = catalog.table(&name) else {
                continue;
            };
            let t = t.clone();
            let unique = t.indexes.iter().any(|i| i.unique);
            let st = self.st.borrow();
            let replica = st.replica.as_ref().expect("invariant: ensured");
            let mut gone = Vec::new();
            if unique {
                // Rows hidden by a clash go, every visible row is (re)put: which of two
                // clashing rows shows depends on rows this batch did not touch.
                let (visible, hidden) = replica.visible(&t.name);
                for r in hidden {
                    all.push((t.clone(), r.pk, None));
                }
                for (k, v) in replica.materialize(&keys) {
                    if v.is_none() {
                        gone.push(k);
                    }
                }
                for r in visible {
                    let row = full_row(&t, &r.pk, r.values);
                    all.push((t.clone(), r.pk, Some(row)));
                }
            } else {
                for (k, v) in replica.materialize(&keys) {
                    match v {
                        Some(vals) => {
                            let pk = k.pk_values();
                            let row = full_row(&t, &pk, vals);
                            all.push((t.clone(), pk, Some(row)));
                        }
                        None => gone.push(k),
                    }
                }
            }
            // With a scope column, one key may live in another scope (the row moved): a
            // tombstone in the old scope must not delete it.
            let scoped = t.replicated.as_ref().is_some_and(|r| r.scope.is_some());
            let mut live: HashMap<Vec<u8>, RowKey> = HashMap::new();
            if scoped && !gone.is_empty() {
                replica.rows().scan(&mut |k, row| {
                    if k.table == t.name && row.is_live() {
                        live.insert(k.pk.clone(), k.clone());
                    }
                });
            }
            for k in gone {
                match live.get(&k.pk) {
                    Some(other) => {
                        if let Some((_, Some(vals))) =
                            replica.materialize(std::slice::from_ref(other)).pop()
                        {
                            let pk = other.pk_values();
                            let row = full_row(&t, &pk, vals);
                            all.push((t.clone(), pk, Some(row)));
                        }
                    }
                    None => all.push((t.clone(), k.pk_values(), None)),
                }
            }
        }
        // Deletes first, so a put never clashes with a row this batch removes.
        all.sort_by_key(|(_, _, row)| row.is_some());
        // A merged row the table's constraints refuse (a NOT NULL column left NULL by a
        // revival after a delete, a CHECK, a type, a UNIQUE index the peer lacks) stays in the
        // merged state and out of the table, on every replica alike.
        let refused = db.force_rows(all)?;
        let mut st = self.st.borrow_mut();
        for (t, _, e) in refused {
            st.events.push(SyncEvent {
                kind: "row_refused",
                code: e.code().to_string(),
                detail: format!("{}: {e}", t.name),
            });
        }
        Ok(())
    }
}

fn event(e: Event) -> SyncEvent {
    match e {
        Event::Applied { records, rows } => SyncEvent {
            kind: "applied",
            code: "APPLIED".into(),
            detail: format!("{records} records, {} rows", rows.len()),
        },
        Event::Rejected {
            reason,
            author,
            first_seq,
            detail,
            ..
        } => SyncEvent {
            kind: "rejected",
            code: reason.code().to_string(),
            detail: format!(
                "author {} from seq {first_seq}: {detail}",
                &author.to_hex()[..12]
            ),
        },
        Event::Fork { author, seq, .. } => SyncEvent {
            kind: "fork",
            code: "FORK".into(),
            detail: format!(
                "author {} signed two records at seq {seq}",
                &author.to_hex()[..12]
            ),
        },
        Event::PeerRejected {
            code, first_seq, ..
        } => SyncEvent {
            kind: "peer_rejected",
            code,
            detail: format!("the peer refused our records from seq {first_seq}"),
        },
    }
}

impl State {
    /// Runs one protocol step on the replica over open link `link`, at the host's time.
    fn on_link<T>(
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
    fn reload(&mut self, store: &dyn Storage, catalog: &Catalog) -> Result<()> {
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
        self.saved = persist::Saved::default();
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
    fn pending(&self) -> usize {
        self.replica.as_ref().map_or(0, |r| r.pending_records())
    }

    /// The in-memory state went ahead of the store (a write failed), whose records pending
    /// were `durable`: it is read again before its next use. The first failure's count stands.
    fn mark_stale(&mut self, durable: usize) {
        self.stale.get_or_insert(durable);
        // The capture decides again, at the next transaction's first change.
        self.sink_on = None;
    }

    /// Keeps a shape for each replicated table of `catalog` (and for none it no longer has),
    /// so that the capture can take a table's changes from its first transaction on, and
    /// those made after its definition changed inside a transaction.
    fn shapes_for(&mut self, catalog: &Catalog) {
        let held = |s: &Shape| catalog.tables.values().any(|t| Rc::ptr_eq(t, &s.table));
        self.shapes.retain(held);
        for t in catalog.tables.values() {
            if t.replicated.is_some() && !self.shapes.iter().any(|s| Rc::ptr_eq(&s.table, t)) {
                self.shapes.push(Shape::new(t.clone()));
            }
        }
        // Places in `shapes` moved.
        self.sink_last = None;
    }

    /// The shape and the scope of a change of `t` the capture takes, or None when it does
    /// not take it (see `Capture`).
    #[inline]
    fn sink_target(&mut self, t: &Table) -> Option<(usize, usize)> {
        if self.sink_on == Some(true) {
            if let Some((i, scope, epoch)) = self.sink_last {
                // (The shapes may have been made again since: looked at by their table.)
                let same =
                    (self.shapes.get(i)).is_some_and(|s| std::ptr::eq(Rc::as_ptr(&s.table), t));
                if epoch == self.scopes.epoch && same {
                    self.scopes.mark_used(scope);
                    return Some((i, scope));
                }
            }
        }
        self.sink_find(t)
    }

    #[cold]
    fn sink_find(&mut self, t: &Table) -> Option<(usize, usize)> {
        match self.sink_on {
            Some(true) => {}
            Some(false) => return None,
            None => {
                // Decided at the transaction's first change, for all of it: on when the
                // state is current and this device's id known (the replica's, or the key
                // pair made at attach that the commit will save).
                let me = match (&self.replica, &self.spare) {
                    (Some(r), _) => Some(r.id()),
                    (None, Some(spare)) => Some(spare.id()),
                    (None, None) => None,
                };
                let me = me.filter(|_| self.stale.is_none());
                self.sink_on = Some(me.is_some());
                let me = me?;
                let owner = self.owner.unwrap_or(me);
                self.scopes.begin(owner, me);
                return self.sink_target(t);
            }
        }
        // Only a definition a shape holds (the catalog's, as the last commit saw it).
        let i = (self.shapes.iter()).position(|s| std::ptr::eq(Rc::as_ptr(&s.table), t))?;
        if !self.shapes[i].sinkable {
            return None;
        }
        let scope = self.scopes.find(&self.shapes[i].table.name);
        self.sink_last = Some((i, scope, self.scopes.epoch));
        Some((i, scope))
    }

    /// Drops the changes the capture took past the first `len`; with `len` 0, ends its
    /// transaction (after its commit, or its rollback).
    fn sink_truncate(&mut self, len: usize) {
        if len == 0 {
            // The writers emptied for the next transaction (one kept, its buffer with it),
            // the scopes no longer used. The decision to take changes stands: what could
            // change it (a sync call, a failed commit, the owner set) decides again.
            for &i in &self.scopes.used {
                let slot = &mut self.scopes.list[i];
                slot.writers.truncate(1);
                // (After a commit it is empty already.)
                if let Some(w) = slot.writers.first_mut().filter(|w| !w.is_empty()) {
                    w.reset();
                }
                slot.used = false;
            }
            self.scopes.used.clear();
            self.sunk.clear();
            self.sink_error = None;
            return;
        }
        if len >= self.sunk.len() {
            return;
        }
        // Each scope goes back to where it stood at its first change dropped.
        let mut done: Vec<usize> = Vec::new();
        for (scope, writers, mark) in self.sunk.from(len) {
            if done.contains(&scope) {
                continue;
            }
            done.push(scope);
            let slot = &mut self.scopes.list[scope];
            slot.writers.truncate(writers);
            if let Some(w) = slot.writers.last_mut() {
                w.back_to(mark);
            }
        }
        self.sunk.truncate(len);
    }

    /// The commit the hook recorded did not reach the store: its records are not pending.
    fn abandon_commit(&mut self) {
        let durable = self.pending().saturating_sub(self.uncommitted);
        if self.defer && self.keep.is_none() {
            // The store may not hold every committed record: the reload keeps them.
            self.keep = Some(self.committed_heads());
        }
        self.mark_stale(durable);
        self.uncommitted = 0;
        self.uncommitted_from.clear();
    }

    /// The head of each of the replica's own chains before the commit being recorded.
    fn committed_heads(&self) -> Vec<(ChainKey, u64)> {
        let Some(replica) = &self.replica else {
            return Vec::new();
        };
        let me = replica.id();
        (replica.chains())
            .filter(|(k, _)| k.0 == me)
            .map(|(k, log)| {
                let head = (self.uncommitted_from.iter())
                    .find(|&&(i, _)| self.scopes.list[i].chain == *k)
                    .map_or(log.head().0, |&(_, first)| first - 1);
                (k.clone(), head)
            })
            .collect()
    }

    pub(crate) fn replica(&self) -> &Replica {
        self.replica.as_ref().expect("invariant: ensured")
    }
    pub(crate) fn replica_mut(&mut self) -> &mut Replica {
        self.replica.as_mut().expect("invariant: ensured")
    }

    /// Creates the trees and the identity if this database has none yet (inside the caller's
    /// transaction), and registers the replicated tables of `catalog`.
    fn ensure(&mut self, store: &mut dyn Storage, catalog: &Catalog) -> Result<()> {
        if self.replica.is_none() {
            let identity = persist::create(store, &mut self.saved, self.spare.take())?;
            self.replica = Some(Replica::in_memory(identity, cairn_sync::Config::default()));
        }
        self.register(catalog)
    }

    /// [`State::ensure`] for a commit of the catalog `schema` names: one of the catalog the
    /// last commit registered has nothing new to register. Whether the catalog is another.
    fn ensure_for(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: cairn_sql::SchemaStamp,
    ) -> Result<bool> {
        if self.replica.is_some() && self.registered_for == Some(schema) {
            return Ok(false);
        }
        self.registered_for = None;
        self.ensure(store, catalog)?;
        self.registered_for = Some(schema);
        Ok(true)
    }

    /// Registers every replicated table whose definition is new or changed.
    fn register(&mut self, catalog: &Catalog) -> Result<()> {
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

    fn scope_name(t: &Table, row: &[Value]) -> String {
        match t.replicated.as_ref().and_then(|r| r.scope) {
            None => t.name.clone(),
            Some(c) => Self::scoped_name(t, c, &row[c]),
        }
    }

    /// [`State::scope_name`] of a captured row.
    fn captured_scope_name(t: &Table, row: &EncodedRow) -> Result<String> {
        Ok(match t.replicated.as_ref().and_then(|r| r.scope) {
            None => t.name.clone(),
            Some(c) => Self::scoped_name(t, c, &decoded(row.value(c))?),
        })
    }

    fn scoped_name(t: &Table, c: usize, v: &Value) -> String {
        format!("{}/{}={}", t.name, t.columns[c].name, scope_value(v))
    }

    fn owner(&self) -> AuthorId {
        self.owner.unwrap_or_else(|| self.replica().id())
    }

    /// Turns a transaction's row changes into one record per scope.
    fn record(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: cairn_sql::SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>> {
        // The common commit: every change taken by the capture as the statements ran (no
        // counter, scope column or UNIQUE index, so nothing to correct), the catalog as at the
        // last commit. Its few steps kept together, the rest out of their way.
        if changes.held() == 0
            && self.sink_on == Some(true)
            && self.sink_error.is_none()
            && self.replica.is_some()
            && self.registered_for == Some(schema)
        {
            self.commit_records(store)?;
            return Ok(Vec::new());
        }
        self.record_held(store, catalog, schema, changes)
    }

    /// [`State::record`] for any other commit.
    #[inline(never)]
    fn record_held(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: cairn_sql::SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>> {
        let schema_changed = self.ensure_for(store, catalog, schema)?;
        let sink_was_on = self.sink_on == Some(true);
        let owner = self.owner();
        // What the table holds for each row at the end of the transaction.
        // (A list, sorted and cut to each key's last entry when used: most commits have none,
        // and an empty list costs nothing to drop.)
        let mut finals: Option<Vec<(RowKey, FinalRow)>> = None;
        // Per scope, its records' ops, written straight into the records' encodings (a new
        // record every `MAX_OPS` ops). Most transactions write a scope or two: a list searched
        // by name beats hashing every row's; past a few, a map finds them.
        let State {
            replica,
            shapes,
            scopes,
            ..
        } = self;
        let replica = replica.as_ref().expect("invariant: ensured");
        if self.sink_on != Some(true) {
            // (Else the capture began with the transaction, and its ops are in the writers.)
            scopes.begin(owner, replica.id());
        }
        if let Some(e) = self.sink_error.take() {
            return Err(e);
        }
        let total = changes.held();
        // The last table's shape, sync schema and (without a scope column) scope: a run of
        // changes is mostly to one table.
        let mut last: Option<(usize, Option<usize>)> = None;
        let mut unique_tables: Vec<String> = Vec::new();
        for (n, ch) in changes.iter().enumerate() {
            let (name, row, set_part) = (ch.table, ch.row, ch.set);
            let (at, fixed_scope) = match last {
                Some((i, scope)) if *shapes[i].table.name == *name => (i, scope),
                _ => {
                    let i = match shapes.iter().position(|s| *s.table.name == *name) {
                        Some(i) => i,
                        None => {
                            if replica.table(name).is_none() {
                                return Err(refused(cairn_sync::Error::InvalidInput(format!(
                                    "table {name} is not registered"
                                ))));
                            }
                            shapes.push(Shape::new(catalog.table(name)?.clone()));
                            shapes.len() - 1
                        }
                    };
                    if shapes[i].unique && !unique_tables.iter().any(|u| u == name) {
                        unique_tables.push(name.to_string());
                    }
                    let scope = (!shapes[i].scoped).then(|| scopes.find(&shapes[i].table.name));
                    last = Some((i, scope));
                    (i, scope)
                }
            };
            let shape = &shapes[at];
            let schema = &shape.schema;
            let t: &Table = &shape.table;
            let scope = match fixed_scope {
                Some(i) => i,
                None => scopes.find(&Self::captured_scope_name(t, &row)?),
            };
            if shape.has_counters {
                let pk = shape
                    .pk_cols
                    .iter()
                    .map(|&c| decoded(row.value(c)))
                    .collect::<Result<Vec<_>>>()?;
                let key = RowKey::new(&t.name, &scopes.list[scope].chain.1, &pk);
                let after = match set_part {
                    Some(_) => Some(
                        (0..row.len())
                            .map(|c| decoded(row.value(c)))
                            .collect::<Result<Vec<_>>>()?,
                    ),
                    None => None,
                };
                (finals.get_or_insert_with(Vec::new)).push((key, (t.name.clone(), after)));
            }
            let pk = shape.pk_cols.iter().map(|&c| Encoded(row.value(c)));
            // The first scope's first record makes room for all the changes left; with more
            // scopes, each grows as it needs.
            let room = if scopes.used.len() == 1 { total - n } else { 1 };
            let Some(cairn_sql::SetPart { columns, adds }) = set_part else {
                writer(&mut scopes.list[scope], room)
                    .delete(schema, pk)
                    .map_err(refused)?;
                continue;
            };
            // Every column set (an insert, or an update that changed them all), in column
            // order. (A row captured before an `ADD COLUMN` in the same transaction is shorter
            // than the table: `set` records the columns it has.)
            let every = columns.len() == row.len() && row.len() == t.columns.len();
            if let (Some(whole), true) = (&shape.whole, every) {
                debug_assert!(columns.iter().enumerate().all(|(i, &c)| i == c));
                writer(&mut scopes.list[scope], room)
                    .set_whole(whole, |c| Encoded(row.value(c)))
                    .map_err(refused)?;
                continue;
            }
            // An insert sets every column but the counters; one with no other column records
            // its additions alone (a SET names at least one column).
            if columns.iter().any(|&c| shape.lww_cols[c].is_some()) {
                let set = columns
                    .iter()
                    .filter_map(|&c| shape.lww_cols[c].map(|i| (i, Encoded(row.value(c)))));
                writer(&mut scopes.list[scope], room)
                    .set(schema, pk.clone(), set)
                    .map_err(refused)?;
            }
            for &(c, d) in adds {
                if let Some(i) = shape.sync_cols[c] {
                    writer(&mut scopes.list[scope], room)
                        .add(schema, pk.clone(), i, d)
                        .map_err(refused)?;
                }
            }
        }
        self.commit_records(store)?;
        // A table the capture took that has a UNIQUE index now (made inside the transaction:
        // the capture took its changes as one with none). Its scope is named after it.
        if schema_changed && sink_was_on {
            for &i in &self.scopes.used {
                let name = &self.scopes.list[i].name;
                let unique = (catalog.tables.get(&name.to_ascii_lowercase()))
                    .is_some_and(|t| t.indexes.iter().any(|i| i.unique));
                if unique && !unique_tables.contains(name) {
                    unique_tables.push(name.clone());
                }
            }
        }
        if unique_tables.is_empty() && finals.is_none() {
            // Nothing to correct (the common case), so nothing to merge now.
            return Ok(Vec::new());
        }
        // In name order, and each row's last change in key order.
        unique_tables.sort_unstable();
        let mut finals = finals.unwrap_or_default();
        finals.reverse();
        finals.sort_by(|a, b| a.0.cmp(&b.0));
        finals.dedup_by(|later, kept| later.0 == kept.0);
        let mut fixes = Vec::new();
        self.replica_mut().merge_deferred();
        for name in unique_tables {
            let t = catalog.table(&name)?;
            let (visible, hidden) = self.replica().visible(&t.name);
            for r in hidden {
                fixes.push(Correction {
                    table: t.name.clone(),
                    pk: r.pk,
                    row: None,
                });
            }
            for r in visible {
                let row = full_row(t, &r.pk, r.values);
                fixes.push(Correction {
                    table: t.name.clone(),
                    pk: r.pk,
                    row: Some(row),
                });
            }
        }
        // Where merging gave other values than the statements wrote, the table takes the
        // merged ones (every replica computes the same).
        for (key, (table, after)) in finals {
            let t = catalog.table(&table)?;
            let pk = key.pk_values();
            let merged_row = self
                .replica()
                .materialize(std::slice::from_ref(&key))
                .pop()
                .and_then(|(_, v)| v)
                .map(|vals| full_row(t, &pk, vals));
            let same = match (&merged_row, &after) {
                (None, None) => true,
                (Some(a), Some(b)) => same_row(a, b),
                _ => false,
            };
            if !same {
                fixes.push(Correction {
                    table,
                    pk,
                    row: merged_row,
                });
            }
        }
        Ok(fixes)
    }

    /// Appends the records the commit's scopes wrote to their chains, and saves them (over a
    /// store that is not volatile: `defer`).
    fn commit_records(&mut self, store: &mut dyn Storage) -> Result<()> {
        let now = (self.now)();
        let State {
            replica,
            scopes,
            uncommitted,
            saved,
            defer,
            unwritten,
            uncommitted_from,
            ..
        } = self;
        let replica = replica.as_mut().expect("invariant: ensured");
        let defer = *defer;
        // Each record saved as the replica takes it, when nothing else changed since the
        // last save (the common case); else, or from the first record that cannot, by
        // `save` after. None over a volatile store: the replica holds the records, and
        // they are written when the store is read whole (`defer`).
        let mut one_by_one = !defer && persist::can_save_written(replica, saved);
        let mut tail_changed = false;
        for &i in &scopes.used {
            let ScopeSlot { chain, writers, .. } = &mut scopes.list[i];
            let mut first = None;
            for w in writers.iter_mut() {
                // The record is hashed and merged into the rows when next needed (sealing,
                // a peer's records, a sync call): a local write keeps no per-row state.
                // Its bytes are copied out, and the writer, emptied, serves the next commit.
                let chain = &*chain;
                let saved_now = replica
                    .commit_written_from(now, chain, w, |seq, hlc, bytes| {
                        if defer {
                            first.get_or_insert(seq);
                        }
                        if !one_by_one {
                            return Ok(false);
                        }
                        let record = (seq, hlc, bytes);
                        persist::save_written(store, saved, chain, record, &mut tail_changed)
                    })
                    .map_err(refused)?;
                if let Some(r) = saved_now {
                    // Not pending until the commit is stored (`after_commit`).
                    *uncommitted += 1;
                    // Noted at once, before a later writer of the scope may fail.
                    if let Some(f) = first.filter(|&f| uncommitted_from.last() != Some(&(i, f))) {
                        uncommitted_from.push((i, f));
                    }
                    one_by_one = r?;
                }
            }
            // One emptied writer (and its buffer) serves the scope's next commit.
            writers.truncate(1);
        }
        if defer {
            *unwritten |= *uncommitted > 0;
        } else if one_by_one {
            persist::end_written(store, replica, saved, tail_changed)?;
        } else {
            let mut chains = scopes.used.iter().map(|&i| &scopes.list[i].chain);
            persist::save(store, replica, saved, Some(&mut chains), tail_changed)?;
        }
        Ok(())
    }
}

/// The writer the scope's next op goes to.
#[inline(always)]
fn writer(slot: &mut ScopeSlot, room: usize) -> &mut OpsWriter {
    match slot.writers.last_mut() {
        // The one the last commit emptied: room for what comes, as a new one gets.
        Some(w) if w.is_empty() => w.reserve(80 * room.min(cairn_sync::change::MAX_OPS as usize)),
        Some(w) if w.len() < cairn_sync::change::MAX_OPS => {}
        _ => new_writer(slot, room),
    }
    slot.writers.last_mut().expect("invariant: pushed above")
}

/// Starts the scope's next record (once a record: out of the per-op path).
#[cold]
fn new_writer(slot: &mut ScopeSlot, room: usize) {
    // Room for a typical op of the changes left, to spare regrowth.
    let room = 80 * room.min(cairn_sync::change::MAX_OPS as usize);
    slot.writers.push(OpsWriter::with_capacity(room));
}

fn subscription(prefixes: &[String]) -> cairn_sync::Subscription {
    if prefixes.is_empty() {
        return cairn_sync::Subscription::All;
    }
    cairn_sync::Subscription::Filters(
        prefixes
            .iter()
            .map(|p| cairn_sync::ScopeFilter {
                owner: None,
                prefix: p.as_bytes().to_vec(),
            })
            .collect(),
    )
}

/// A table row from its key values and its other columns' values (in sync column order).
fn full_row(t: &Table, pk: &[Value], vals: Vec<Value>) -> Vec<Value> {
    let pk_cols = t.key_columns();
    let mut row = vec![Value::Null; t.columns.len()];
    for (i, &c) in pk_cols.iter().enumerate() {
        row[c] = pk.get(i).cloned().unwrap_or(Value::Null);
    }
    let non_key = (0..t.columns.len()).filter(|c| !pk_cols.contains(c));
    for (v, c) in vals.into_iter().zip(non_key) {
        row[c] = v;
    }
    row
}

/// A scope value as it appears in a scope name.
/// A value the SQL layer captured, in the wire encoding.
fn decoded(b: &[u8]) -> Result<Value> {
    cairn_sync::wire::Reader::new(b).value().map_err(refused)
}

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
/// (counters as counters), unique column sets over those columns.
pub fn sync_schema(t: &Table) -> TableSchema {
    let pk_cols = t.key_columns();
    let counters = t
        .replicated
        .as_ref()
        .map(|r| r.counters.clone())
        .unwrap_or_default();
    let mut s = TableSchema::new(t.name.clone(), pk_cols.len());
    let non_key: Vec<usize> = (0..t.columns.len())
        .filter(|c| !pk_cols.contains(c))
        .collect();
    for &c in &non_key {
        let kind = if counters.contains(&c) {
            ColumnKind::Counter
        } else {
            ColumnKind::Lww
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

/// A row's state at the end of a transaction, for a table with counters: its table and its
/// values (None: no row).
type FinalRow = (String, Option<Vec<Value>>);

/// The scopes local commits write to, kept from one commit to the next (their names and ids
/// are built once, not for every commit), each with the records of the commit being recorded.
#[derive(Default)]
struct Scopes {
    /// The scopes' owner and the author writing to them (this replica).
    owner: Option<(AuthorId, AuthorId)>,
    list: Vec<ScopeSlot>,
    /// Past a few scopes, where each is in `list` (a transaction that writes many scopes
    /// finds them by hashing; most write one or two, found by comparing names).
    at: HashMap<String, usize>,
    /// The scopes this commit wrote, in order of first use.
    used: Vec<usize>,
    /// Moves each time `list` is emptied (a place in it is then another scope's).
    epoch: u64,
}

struct ScopeSlot {
    name: String,
    /// The chain the scope's records go to: (this replica's id, the scope).
    chain: ChainKey,
    /// This commit's ops for the scope, written straight into the records' encodings (a new
    /// record every `MAX_OPS` ops).
    writers: Vec<OpsWriter>,
    used: bool,
}

impl Scopes {
    const FEW: usize = 8;
    /// Many scope names kept are dropped rather than searched on every commit.
    const KEEP: usize = 64;

    /// Starts recording a commit by `me` whose scopes belong to `owner`.
    fn begin(&mut self, owner: AuthorId, me: AuthorId) {
        for &i in &self.used {
            // Left by a commit that failed half-way.
            self.list[i].writers.clear();
            self.list[i].used = false;
        }
        self.used.clear();
        if self.owner != Some((owner, me)) || self.list.len() > Self::KEEP {
            self.owner = Some((owner, me));
            self.list.clear();
            self.at.clear();
            self.epoch += 1;
        }
    }

    /// Marks scope `i` used by this commit.
    #[inline]
    fn mark_used(&mut self, i: usize) {
        if !self.list[i].used {
            self.list[i].used = true;
            self.used.push(i);
        }
    }

    /// The scope named `name`, marked used by this commit.
    fn find(&mut self, name: &str) -> usize {
        let found = if self.list.len() <= Self::FEW {
            self.list.iter().position(|s| s.name == name)
        } else {
            if self.at.len() != self.list.len() {
                let names = self.list.iter().enumerate();
                self.at.extend(names.map(|(i, s)| (s.name.clone(), i)));
            }
            self.at.get(name).copied()
        };
        let i = found.unwrap_or_else(|| {
            let (owner, me) = self.owner.expect("invariant: set by begin");
            self.list.push(ScopeSlot {
                name: name.to_string(),
                chain: (me, ScopeId::new(owner, name.as_bytes())),
                writers: Vec::new(),
                used: false,
            });
            let i = self.list.len() - 1;
            if i > Self::FEW {
                self.at.insert(name.to_string(), i);
            }
            i
        });
        self.mark_used(i);
        i
    }
}

/// What recording a change needs of a replicated table: its key columns, each column's index
/// among the others, and whether it has a scope column, counters, unique indexes.
struct Shape {
    table: Rc<Table>,
    /// The table as the replica has it registered (`sync_schema`).
    schema: TableSchema,
    pk_cols: Vec<usize>,
    /// Each column's index among the non-key ones.
    sync_cols: Vec<Option<u32>>,
    /// The same for last-writer-wins columns only (not the key, not a counter).
    lww_cols: Vec<Option<u32>>,
    scoped: bool,
    /// Only a table with counters can merge to other values than a local write left (a row
    /// inserted after a delete elsewhere counts the additions made since); elsewhere the
    /// newest write wins whole, and the table holds it.
    has_counters: bool,
    unique: bool,
    /// How a write of every column is recorded without `OpsWriter::set`'s checks (None for a
    /// table with counters).
    whole: Option<WholeRow>,
    /// The capture writes this table's ops as they come (`Capture`): no counters, no scope
    /// column, no UNIQUE index, nothing that needs the rows at commit.
    sinkable: bool,
}

impl Shape {
    fn new(table: Rc<Table>) -> Shape {
        let pk_cols = table.key_columns();
        let mut next = 0u32;
        let sync_cols: Vec<Option<u32>> = (0..table.columns.len())
            .map(|c| {
                (!pk_cols.contains(&c)).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let counters = table
            .replicated
            .as_ref()
            .map(|r| r.counters.as_slice())
            .unwrap_or_default();
        let lww_cols = sync_cols
            .iter()
            .enumerate()
            .map(|(c, i)| i.filter(|_| !counters.contains(&c)))
            .collect();
        let schema = sync_schema(&table);
        let non_key: Vec<usize> = (0..table.columns.len())
            .filter(|c| sync_cols[*c].is_some())
            .collect();
        let whole = WholeRow::new(&schema, pk_cols.clone(), &non_key);
        let scoped = table.replicated.as_ref().and_then(|r| r.scope).is_some();
        let unique = table.indexes.iter().any(|i| i.unique);
        Shape {
            sinkable: whole.is_some() && !scoped && !unique && counters.is_empty(),
            whole,
            schema,
            pk_cols,
            sync_cols,
            lww_cols,
            scoped,
            has_counters: !counters.is_empty(),
            unique,
            table,
        }
    }
}

/// The capture's sink: the changes of a replicated table whose shape allows it (`sinkable`)
/// are written into its scope's record as the statements make them, rather than held in
/// `Changes` and read again at commit. A table's changes in a transaction all come here or all
/// go to `Changes`, but for one whose definition stops qualifying during the transaction (a
/// UNIQUE index made): its changes made before came here, those after go to `Changes`, and the
/// commit writes those after these, in order. (A new definition gets its shape at once, from
/// `CommitHook::schema_changed`.)
struct Capture(Rc<RefCell<State>>);

impl Capture {
    /// The state, the shape of `t` and its scope's writer, with where the writers stood
    /// logged, when the sink takes a change of `t`.
    fn take(
        &self,
        t: &Table,
        f: impl FnOnce(&Shape, &mut OpsWriter) -> cairn_sync::Result<()>,
    ) -> bool {
        // Borrowed only while a sync call runs, which makes no captured change.
        let Ok(mut st) = self.0.try_borrow_mut() else {
            return false;
        };
        let Some((i, scope)) = st.sink_target(t) else {
            return false;
        };
        let st = &mut *st;
        let slot = &mut st.scopes.list[scope];
        st.sunk.push(scope, slot);
        if let Err(e) = f(&st.shapes[i], writer(slot, SINK_ROOM)) {
            st.sink_error.get_or_insert(refused(e));
        }
        true
    }
}

impl CaptureSink for Capture {
    fn insert(&mut self, t: &Table, row: &[Value]) -> bool {
        self.take(t, |shape, w| {
            let whole = (shape.whole.as_ref()).expect("invariant: a sinkable shape has one");
            w.set_whole(whole, |c| &row[c])
        })
    }

    fn set<'v>(
        &mut self,
        t: &Table,
        value: &dyn Fn(usize) -> &'v Value,
        columns: &[usize],
    ) -> bool {
        self.take(t, |shape, w| {
            // As the commit records a SET: its last-writer-wins columns, none if it set only
            // key columns.
            if !columns.iter().any(|&c| shape.lww_cols[c].is_some()) {
                return Ok(());
            }
            let pk = shape.pk_cols.iter().map(|&c| value(c));
            let set = (columns.iter()).filter_map(|&c| shape.lww_cols[c].map(|i| (i, value(c))));
            w.set(&shape.schema, pk, set)
        })
    }

    fn delete(&mut self, t: &Table, row: &[Value]) -> bool {
        self.take(t, |shape, w| {
            w.delete(&shape.schema, shape.pk_cols.iter().map(|&c| &row[c]))
        })
    }

    fn truncate(&mut self, len: usize) {
        if let Ok(mut st) = self.0.try_borrow_mut() {
            st.sink_truncate(len);
        }
    }
}

/// The room a record the capture starts has for its ops: for a few rows (it grows past that).
const SINK_ROOM: usize = 16;

/// A local write or sync step the replica refused (`SYNC_REFUSED`).
fn refused(e: cairn_sync::Error) -> Error {
    Error::Sync("SYNC_REFUSED", e.to_string())
}

/// Where the capture's changes of a transaction left their scopes' writers (`State::sunk`):
/// for each change, its scope, how many writers the scope had and the last one's mark before
/// it. Kept as runs of changes to the same writer of a scope, each change then 8 bytes (where
/// its writer stood past its run's start) rather than 32: a transaction of many rows makes
/// one run, and its log is a quarter of the memory it went through.
#[derive(Debug, Default)]
struct Sunk {
    /// The change each run begins with, its scope, its writer count and mark then.
    runs: Vec<(usize, usize, usize, (usize, u64))>,
    /// Per change, the bytes and ops its writer held past its run's mark before it.
    at: Vec<(u32, u32)>,
}

impl Sunk {
    fn len(&self) -> usize {
        self.at.len()
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.at.clear();
    }

    /// Logs a change of scope `scope` (`slot`), before its ops are written.
    #[inline]
    fn push(&mut self, scope: usize, slot: &ScopeSlot) {
        let writers = slot.writers.len();
        let mark = slot.writers.last().map_or((0, 0), |w| w.mark());
        if let Some(&(_, s, n, start)) = self.runs.last() {
            if s == scope && n == writers && mark.0 >= start.0 && mark.1 >= start.1 {
                let past = (
                    u32::try_from(mark.0 - start.0),
                    u32::try_from(mark.1 - start.1),
                );
                if let (Ok(bytes), Ok(ops)) = past {
                    self.at.push((bytes, ops));
                    return;
                }
            }
        }
        self.runs.push((self.at.len(), scope, writers, mark));
        self.at.push((0, 0));
    }

    /// The changes from `i` on, in order: scope, writer count, mark (those within a run after
    /// the first change of it dropped, whose scope is the same, are left out).
    fn from(&self, i: usize) -> impl Iterator<Item = (usize, usize, (usize, u64))> + '_ {
        let k = self.runs.partition_point(|r| r.0 <= i) - 1;
        let (_, scope, writers, start) = self.runs[k];
        let (bytes, ops) = self.at[i];
        let first = (
            scope,
            writers,
            (start.0 + bytes as usize, start.1 + u64::from(ops)),
        );
        std::iter::once(first).chain(self.runs[k + 1..].iter().map(|r| (r.1, r.2, r.3)))
    }

    /// Drops the changes from `len` on.
    fn truncate(&mut self, len: usize) {
        let keep = self.runs.partition_point(|r| r.0 < len);
        self.runs.truncate(keep);
        self.at.truncate(len);
    }
}

struct Hook(Rc<RefCell<State>>);

impl CommitHook for Hook {
    fn before_commit(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: cairn_sql::SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>> {
        let mut st = self.0.borrow_mut();
        if st.stale.is_some() {
            // Marking the state stale makes the capture decide again, and it takes nothing
            // from a stale state: reading it again drops no op of this transaction.
            debug_assert!(st.sink_on != Some(true));
            // The in-memory state is ahead of the store after a failed commit: rebuild it
            // from what is on disk (this transaction has not touched the sync trees yet).
            st.reload(&*store, catalog)?;
        }
        st.uncommitted = 0;
        st.uncommitted_from.clear();
        let r = st.record(store, catalog, schema, changes);
        if r.is_err() {
            st.abandon_commit();
        }
        r
    }

    fn schema_changed(&mut self, catalog: &Catalog) {
        if let Ok(mut st) = self.0.try_borrow_mut() {
            st.shapes_for(catalog);
        }
    }

    fn after_commit(&mut self, committed: bool) {
        let mut st = self.0.borrow_mut();
        if committed {
            st.uncommitted = 0;
        } else {
            st.abandon_commit();
        }
    }

    fn unwritten(&self) -> bool {
        let st = self.0.borrow();
        st.unwritten || st.keep.is_some()
    }

    fn flush(&mut self, store: &mut dyn Storage, catalog: &Catalog) -> Result<()> {
        let mut st = self.0.borrow_mut();
        st.uncommitted = 0;
        st.uncommitted_from.clear();
        if st.stale.is_some() {
            st.reload(&*store, catalog)?;
        }
        if st.replica.is_some() {
            st.persist(store)?;
        }
        Ok(())
    }
}
