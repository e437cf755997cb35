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
//! records join them when next needed (a peer's records, any sync call), not on the write
//! path. docs/sync.md, section "In the database", describes the saved layout and the SQL rules.
//!
//! The modules, in the order a local write meets them:
//! - `capture`: the SQL layer's changes as the statements make them (`Capture`, a
//!   [`cairn_sql::CaptureSink`]) or as held for the commit, written as sync ops into one
//!   record per scope;
//! - `hook`: the commit hook (`Hook`): appends the commit's records to the chains, saves them
//!   with the commit, and hands the SQL layer the rows merging changed;
//! - `apply`: a sync call's protocol step, and what a peer's records do to the SQL tables;
//! - `state`: the state the capture, the hook and the sync calls share (`State`), and the
//!   replica's view of the catalog (the tables registered, scope names);
//! - `persist`: that state in the database's own trees;
//! - `keys`: where the secret key is kept ([`KeyStore`]): outside the database file, which
//!   names only its author.

#![forbid(unsafe_code)]

mod apply;
mod capture;
mod hook;
mod keys;
mod persist;
mod state;

use cairn_sql::quote_ident;
use cairn_sql::{Database, Error, Output, Result, Storage, Value};
use cairn_sync::{AuthorId, Identity, Link, ScopeId};
use state::State;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

pub use cairn_sync::Failure;
pub use keys::{FileKeys, KeyStore, MemoryKeys};
pub use state::sync_schema;

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

/// The sync side of a database. Cheap to clone (it is shared with the commit hook).
#[derive(Clone)]
pub struct Sync {
    st: Rc<RefCell<State>>,
}

/// A sync error the replica reported (`SYNC`).
fn sync_err(e: cairn_sync::Error) -> Error {
    Error::Sync("SYNC", e.to_string())
}

/// A local write or sync step the replica refused (`SYNC_REFUSED`).
fn refused(e: cairn_sync::Error) -> Error {
    Error::Sync("SYNC_REFUSED", e.to_string())
}

/// A local commit the replica refused. One to a scope this database's key may not write to
/// (`UNAUTHORIZED`) says whose scope it is and the ways on: a database copied or imported from
/// another device has a key of its own and writes to its original owner's scopes
/// (docs/sync.md 10b, "Which key a database signs with").
fn refused_write(
    e: cairn_sync::Error,
    replica: &cairn_sync::Replica,
    chain: &cairn_sync::ChainKey,
) -> Error {
    match &e {
        cairn_sync::Error::InvalidInput(_) if !replica.may_write(&chain.0, &chain.1) => {
            let (me, scope) = (chain.0.to_hex(), &chain.1);
            let name = String::from_utf8_lossy(&scope.name);
            Error::Sync(
                "SYNC_REFUSED",
                format!(
                    "UNAUTHORIZED: this database's key {me} may not write to scope {name:?} of \
                     owner {owner}. A database imported or copied from another device has a key \
                     of its own: let the owner list it (sync.authorize({name:?}, [{me:?}]) on \
                     the owner's database, then sync), or write to scopes of this key's own \
                     (sync.setOwner(this key's id)), or sign as the owner \
                     (sync.importKey(the owner's exported key))",
                    owner = scope.owner.to_hex()
                ),
            )
        }
        _ => refused(e),
    }
}

impl Sync {
    /// Installs the hook on `db` and loads what the database holds of its replica, with its
    /// secret key from `keys` (the host's key store: never the database file). Nothing is
    /// written until the first replicated commit or sync call, but for the key: a layout-5
    /// database's key moves from the file to `keys` (and the file's free pages are zeroed),
    /// a database whose author's key `keys` does not hold (a copy, an import) takes and
    /// saves a new one, and a database saved before devices were named saves a new device
    /// (docs/sync.md 10b).
    pub fn attach(db: &mut Database, now: Clock, keys: Box<dyn KeyStore>) -> Result<Sync> {
        // A hook attached before may hold records the store does not (`State::defer`).
        db.flush()?;
        let st = State::open(db.storage(), db.catalog(), now, keys)?;
        let fix = st.key_fix.is_some();
        let sync = Sync {
            st: Rc::new(RefCell::new(st)),
        };
        if fix {
            sync.write(db, |_, _| Ok(()))?;
            if sync.st.borrow().erase_owed {
                // The pages that held the key, left by copy-on-write; owed again should this
                // fail (the next purge or sync call that commits).
                let r = db.storage_mut().erase_free();
                sync.st.borrow_mut().erase_owed = r.is_err();
            }
        }
        db.set_commit_hook(Box::new(hook::Hook(sync.st.clone())));
        db.set_capture_sink(Box::new(capture::Capture(sync.st.clone())));
        Ok(sync)
    }

    /// This device's author id (creating the key pair on first use).
    pub fn id(&self, db: &mut Database) -> Result<AuthorId> {
        self.read(db, |st| Ok(st.replica().id()))
    }

    /// Which device of its key this database is to its peers (docs/sync.md 10b): named anew
    /// whenever a key is saved for it (a new database, a copy attached elsewhere, `import_key`),
    /// and kept in its file beside `author`; a database saved before devices were named is
    /// named at attach (so this is always Some; the Option is the engine's `Replica::device`).
    pub fn device(&self, db: &mut Database) -> Result<Option<[u8; 16]>> {
        self.read(db, |st| Ok(st.replica().device()))
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
            persist::put_identity(store, &mut *st.keys, &identity)?;
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
            let version = st.replica().next_writers_version(name.as_bytes());
            // Keep everyone who may write now (not those revoked since they were listed).
            let scope = cairn_sync::ScopeId::new(st.replica().id(), name);
            let mut all: BTreeSet<AuthorId> = st
                .replica()
                .writer_lists()
                .filter(|l| l.scope == scope)
                .flat_map(|l| l.writers.iter().copied())
                .filter(|a| st.replica().may_write(a, &scope))
                .collect();
            all.extend(writers);
            st.replica_mut()
                .sign_writers(name.as_bytes(), version, all.into_iter().collect());
            st.persist(store)
        })
    }

    /// As the owner of scope `name`, removes `writers` from the authors allowed to write to it
    /// (docs/sync.md sec. 8, "Revocation"): each keeps what this database holds of its writes
    /// there; its later records are refused on every replica, and taken back where they were
    /// applied (the SQL rows they touched are read again from the rest).
    pub fn revoke(&self, db: &mut Database, name: &str, writers: Vec<AuthorId>) -> Result<()> {
        self.write_sql(db, u32::MAX, |st| {
            let version = st.replica().next_writers_version(name.as_bytes());
            st.replica_mut()
                .revoke_writers(name.as_bytes(), version, &writers);
            let rows = st.replica_mut().take_revoked_rows();
            let events = if rows.is_empty() {
                Vec::new()
            } else {
                vec![cairn_sync::Event::Applied { records: 0, rows }]
            };
            Ok((Vec::new(), events))
        })?;
        Ok(())
    }

    /// Opens a link to a peer: its id and the HELLO to send. No snapshot is taken from the
    /// peer (docs/sync.md sec. 8): see [`Sync::connect_bootstrap`].
    pub fn connect(&self, db: &mut Database) -> Result<(u32, Vec<u8>)> {
        self.open_link(db, Link::new())
    }

    /// Opens a link to a peer this database bootstraps from: one it asks for a snapshot when
    /// the peer compacted history this database lacks, and takes it from. Rows in a snapshot
    /// are taken on trust within the bounds docs/sync.md sec. 8 sets: choose a peer that is
    /// trusted (the application's own relay or server).
    pub fn connect_bootstrap(&self, db: &mut Database) -> Result<(u32, Vec<u8>)> {
        self.open_link(db, Link::snapshot_source())
    }

    fn open_link(&self, db: &mut Database, mut link: Link) -> Result<(u32, Vec<u8>)> {
        self.write(db, |st, store| {
            let id = st.next_link;
            st.next_link += 1;
            let now = (st.now)();
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
        let reread = {
            let st = self.st.borrow();
            st.replica.is_some() && st.stale.is_none() && st.replica().has_rows_to_reread()
        };
        if reread {
            // A column added here holds values peers wrote before: the tables read them now.
            out.extend(self.write_sql(db, link, |st| {
                let send = st.on_link(link, |r, l, now| r.poll(l, now))?;
                Ok((send, Vec::new()))
            })?);
            return Ok(out);
        }
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
            .map(|&c| format!("{} = ?", quote_ident(&t.columns[c].name)))
            .collect();
        let sel = format!(
            "SELECT * FROM {} WHERE {}",
            quote_ident(&t.name),
            where_pk.join(" AND ")
        );
        let row = match db.execute(&sel, pk)? {
            Output::Rows { mut rows, .. } if !rows.is_empty() => Some(rows.swap_remove(0)),
            _ => None,
        };
        let del = format!(
            "DELETE FROM {} WHERE {}",
            quote_ident(&t.name),
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
            let owner = st.owner();
            let scope = match &row {
                Some(row) => ScopeId::new(owner, State::scope_name(&t, row).as_bytes()),
                // A row the table hides (its key is held by another owner's scope too, docs/
                // sync.md sec. 7): the one in this database's owner's scopes.
                None => match (st.replica_mut().key_scopes(&t.name, pk).into_iter())
                    .find(|s| s.owner == owner)
                {
                    Some(scope) => scope,
                    None => return Ok(None),
                },
            };
            let now = (st.now)();
            st.replica_mut()
                .purge(now, &scope, &t.name, pk.to_vec())
                .map_err(refused)?;
            st.persist(db.storage_mut())?;
            // Another scope's row with this key the table hid may show now.
            let key = cairn_sync::RowKey::new(&t.name, &scope, pk);
            let shown = (st.replica().key_owner(&key))
                .and_then(|o| o.shown)
                .and_then(|k| st.replica().materialize(&[k]).pop())
                .and_then(|(_, v)| v);
            Ok(Some(shown.map(|vals| apply::full_row(&t, pk, vals))))
        })();
        let r = match r {
            Ok(Some(Some(row))) => db
                .force_rows(vec![(t.clone(), pk.to_vec(), Some(row))])
                .map(|_| Some(())),
            Ok(Some(None)) => Ok(Some(())),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        match r {
            Ok(None) => {
                db.execute("ROLLBACK", &[])?;
                Ok(false)
            }
            Ok(Some(())) => {
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
            if st.replica.is_some() && st.stale.is_none() && st.key_fix.is_none() {
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
