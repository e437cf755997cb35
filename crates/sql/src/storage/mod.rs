//! The storage the executor runs on: ordered, byte-keyed trees named by number, with
//! transactions, behind two traits: [`StorageCore`], the twelve methods every store implements
//! (like toydb's `storage::Engine`), and [`Storage`], the fast paths and optional capabilities
//! with defaults in terms of the core. The real copy-on-write B+tree store ([`Paged`]) and the
//! in-memory one ([`Memory`]) implement both without knowing anything about SQL;
//! [`conformance`] holds the cases every store must pass.
//!
//! Tree 0 ([`SCHEMA_TREE`]) always exists and holds the catalog; the SQL layer allocates every
//! other tree id itself. Keys and values are opaque bytes; keys sort bytewise.
//!
//! Transactions: [`StorageCore::begin`] starts one, [`StorageCore::commit`] makes it durable,
//! [`StorageCore::rollback`] restores the state at `begin`. The SQL layer makes each statement
//! atomic inside a transaction with [`StorageCore::savepoint`] / [`StorageCore::rollback_to`].
//! Writes happen only inside a transaction; reads may happen outside one.

pub mod conformance;
mod memory;
mod nostore;
mod paged;

pub use memory::Memory;
pub(crate) use nostore::{refuse_bulk_storage, NoStore};
pub use paged::Paged;

use crate::error::{Error, Result};
use std::ops::Bound;

pub type TreeId = u64;

/// The tree that holds the catalog.
pub const SCHEMA_TREE: TreeId = 0;

/// Tree ids from here on are never handed to tables or indexes: layers above SQL (the sync
/// layer) keep their own trees there.
pub const SYSTEM_TREES: TreeId = 1 << 40;

/// What [`Storage::scan_each`] hands each entry to: its key and value; false stops the scan.
pub type EntryFn<'f> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'f;

/// A position in a range scan. `next` moves to the next entry (the first, on the first call) and
/// says whether there is one; `key` and `value` borrow the current entry without copying it.
pub trait Cursor {
    fn next(&mut self) -> Result<bool>;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
}

pub use cairn_store::Each;

/// How [`Storage::update_each`] changes an entry: given its key and value, says what to do
/// with it (for `Each::Write`, with the new value written into the buffer, empty on the call).
pub type Rewrite<'a> = dyn FnMut(&[u8], &[u8], &mut Vec<u8>) -> Result<Each> + 'a;

/// The core of a store: ordered, byte-keyed trees named by number, with transactions and
/// savepoints. These twelve methods are all a store must implement; [`Storage`] adds the fast
/// paths and the optional capabilities, each with a default written in terms of these.
pub trait StorageCore {
    fn begin(&mut self) -> Result<()>;
    fn commit(&mut self) -> Result<()>;
    fn rollback(&mut self) -> Result<()>;
    /// Marks the current state of the open transaction; returns a handle for `rollback_to`.
    fn savepoint(&mut self) -> Result<u64>;
    /// Undoes every write since `savepoint` returned `sp`; the transaction stays open.
    fn rollback_to(&mut self, sp: u64) -> Result<()>;
    fn create_tree(&mut self, tree: TreeId) -> Result<()>;
    fn drop_tree(&mut self, tree: TreeId) -> Result<()>;
    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()>;
    /// Deletes `key`; returns whether it was there.
    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool>;
    /// Entries with keys within the bounds, ascending, or descending when `reverse`.
    fn scan<'a>(
        &'a self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>>;
    /// The largest key in the tree (for allocating the next row id).
    fn last_key(&self, tree: TreeId) -> Result<Option<Vec<u8>>>;
}

/// A store as the SQL engine uses it: the [`StorageCore`] plus fast paths (a put that finds a
/// taken key in the same descent, a rewrite in place of a range, a scan without a cursor, a
/// bulk load) and optional capabilities (bytes kept beside a tree or the root, an integrity
/// check, an export). Every method has a default in terms of the core, so a new store
/// implements `StorageCore` and writes `impl Storage for MyStore {}`; [`Memory`] and
/// [`Paged`] override what they can do faster.
///
/// A supertrait rather than a separate extension trait with a blanket implementation, because
/// the engine holds its store as `dyn Storage` (and so do the commit hook and the sync layer):
/// one object type whose vtable carries the core and the overrides alike, so a call through
/// `dyn Storage` reaches the store's own fast path. A blanket `impl<T: StorageCore> Ext for T`
/// would fix the defaults for every store and leave no way to override them.
pub trait Storage: StorageCore {
    /// Walks the storage's structures and returns every problem found (empty when sound).
    fn integrity_check(&mut self) -> Result<Vec<String>> {
        Err(Error::Unsupported(
            "this storage has no integrity check".into(),
        ))
    }
    /// The storage as one file's bytes, as of the last commit.
    fn export(&mut self) -> Result<Vec<u8>> {
        Err(Error::Unsupported(
            "this storage cannot be exported as a file".into(),
        ))
    }
    /// Overwrites the storage's free space so that nothing deleted can be read back from it
    /// (a purge's last step); the number of pages erased. Needs no open transaction. A store
    /// that keeps no old versions has nothing to erase.
    fn erase_free(&mut self) -> Result<u32> {
        Ok(0)
    }
    /// Ends savepoint `sp` (and any after it) without undoing its writes. A store that keeps an
    /// undo log while a savepoint is open can stop logging once none is.
    fn release(&mut self, _sp: u64) -> Result<()> {
        Ok(())
    }
    /// A few bytes kept with `tree` itself rather than under a key of it (empty until set).
    /// A store may keep them where a commit writes anyway (the paged store: the tree's catalog
    /// entry), so that setting them costs no page of the tree's own: for a layer above SQL
    /// that saves a little state with every commit. Keep them well under a page.
    fn tree_meta(&self, tree: TreeId) -> Result<Vec<u8>> {
        let _ = tree;
        Err(Error::Unsupported(
            "this storage keeps no bytes beside a tree".into(),
        ))
    }
    /// Replaces `tree`'s bytes (see [`Storage::tree_meta`]); undone by a rollback like a put.
    fn set_tree_meta(&mut self, tree: TreeId, meta: &[u8]) -> Result<()> {
        let _ = (tree, meta);
        Err(Error::Unsupported(
            "this storage keeps no bytes beside a tree".into(),
        ))
    }
    /// A few bytes kept with the whole store's state rather than with a tree (empty until
    /// set), written where every commit writes anyway (the paged store: the superblock,
    /// docs/file-format.md), so that setting them on every commit writes nothing else: for a
    /// layer above SQL that saves a little state with every commit. A rollback, whole or to a
    /// savepoint, undoes a change. At most [`Storage::root_meta_room`] bytes.
    fn root_meta(&self) -> Result<Vec<u8>> {
        Err(Error::Unsupported(
            "this storage keeps no root bytes".into(),
        ))
    }
    /// Replaces the root bytes (see [`Storage::root_meta`]), inside a transaction.
    fn set_root_meta(&mut self, meta: &[u8]) -> Result<()> {
        let _ = meta;
        Err(Error::Unsupported(
            "this storage keeps no root bytes".into(),
        ))
    }
    /// How many root bytes the store keeps at most (0: none).
    fn root_meta_room(&self) -> usize {
        0
    }
    /// Whether the storage lives in memory only: nothing of it outlives the process but what
    /// is exported or handed back ([`crate::Database::into_storage`]). A layer above SQL may
    /// then keep in memory alone what it would write with every commit, and write it when
    /// the storage is read whole ([`crate::CommitHook::flush`]).
    fn volatile(&self) -> bool {
        false
    }
    /// [`StorageCore::get`] into a buffer the caller reuses from lookup to lookup; false when the
    /// key is absent (`out` is then unspecified).
    fn get_into(&self, tree: TreeId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.get(tree, key)? {
            Some(v) => {
                *out = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// Rewrites or removes, in key order, the entries of `tree` within the bounds that `f`
    /// picks ([`Each`]). `f` must not use the storage: a store may run it in the middle of its
    /// write. Returns how many entries changed or went. A store that can should make each
    /// change where it finds the entry, instead of a look-up per entry (an UPDATE or DELETE
    /// of a range of rows); this default scans, then writes.
    fn update_each(
        &mut self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: &mut Rewrite<'_>,
    ) -> Result<u64> {
        let mut changes = Vec::new();
        {
            let mut cur = self.scan(tree, lower, upper, false)?;
            let mut out = Vec::new();
            while cur.next()? {
                out.clear();
                match f(cur.key(), cur.value(), &mut out)? {
                    Each::Keep => {}
                    Each::Write => changes.push((cur.key().to_vec(), Some(out.clone()))),
                    Each::Remove => changes.push((cur.key().to_vec(), None)),
                }
            }
        }
        for (k, v) in &changes {
            match v {
                Some(v) => self.put(tree, k, v)?,
                None => {
                    self.delete(tree, k)?;
                }
            }
        }
        Ok(changes.len() as u64)
    }
    /// Puts `key` only if it is absent; returns whether it did (false: the key was there, and
    /// nothing was written). A store that can should do it in one descent, not a `get` and a
    /// `put`: every INSERT checks its primary key this way.
    fn put_new(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.get(tree, key)?.is_some() {
            return Ok(false);
        }
        self.put(tree, key, value)?;
        Ok(true)
    }
    /// Puts `key` if it is absent; if it is there, `f(key, old value, out)` says what becomes
    /// of that entry, as for [`Storage::update_each`] (and as there, `f` must not use the
    /// storage). None when the key was put, else what `f` asked for. A store that can should
    /// do it in one descent: an upsert whose key is taken rewrites the row it finds.
    fn put_new_or_rewrite(
        &mut self,
        tree: TreeId,
        key: &[u8],
        value: &[u8],
        f: &mut Rewrite<'_>,
    ) -> Result<Option<Each>> {
        let Some(old) = self.get(tree, key)? else {
            self.put(tree, key, value)?;
            return Ok(None);
        };
        let mut out = Vec::new();
        let action = f(key, &old, &mut out)?;
        match action {
            Each::Keep => {}
            Each::Write => self.put(tree, key, &out)?,
            Each::Remove => {
                self.delete(tree, key)?;
            }
        }
        Ok(Some(action))
    }
    /// Fills the empty `tree` with `keys` (strictly ascending), each with an empty value: a
    /// new index's entries. A store may build the tree bottom-up, each page written once,
    /// instead of inserting key by key.
    fn load_keys(&mut self, tree: TreeId, keys: &mut dyn Iterator<Item = &[u8]>) -> Result<()> {
        for k in keys {
            self.put(tree, k, &[])?;
        }
        Ok(())
    }
    /// Fills the empty `tree` with `rows`, keys strictly ascending: a copy of a table into an
    /// empty one. A store may build the tree bottom-up, as for `load_keys`.
    fn load_rows(
        &mut self,
        tree: TreeId,
        rows: &mut dyn Iterator<Item = (&[u8], &[u8])>,
    ) -> Result<()> {
        for (k, v) in rows {
            self.put(tree, k, v)?;
        }
        Ok(())
    }
    /// How many entries `tree` holds. A store that keeps the count answers without reading
    /// them (`count(*)` of a table).
    fn count_entries(&self, tree: TreeId) -> Result<u64> {
        let mut n = 0u64;
        self.scan_each(
            tree,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            &mut |_, _| {
                n += 1;
                Ok(true)
            },
        )?;
        Ok(n)
    }
    /// Hands the entries [`StorageCore::scan`] would return to `f` (key, value) until it returns
    /// false; returns whether they ran out (true) or `f` stopped (false). A store can do this
    /// without a `next` per entry (a scan's main cost), and without a cursor on the heap (an
    /// index probe's, made and freed on every execution).
    fn scan_each(
        &self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        f: &mut EntryFn,
    ) -> Result<bool> {
        let mut cur = self.scan(tree, lower, upper, reverse)?;
        while cur.next()? {
            if !f(cur.key(), cur.value())? {
                return Ok(false);
            }
        }
        Ok(true)
    }
    /// [`Storage::scan_each`] after passing up to `*skip` entries unread (an OFFSET), counting
    /// `*skip` down by those it passed. A store can pass a page's entries by their count.
    fn scan_each_past(
        &self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        skip: &mut u64,
        f: &mut EntryFn,
    ) -> Result<bool> {
        self.scan_each(tree, lower, upper, reverse, &mut |k, v| {
            if *skip > 0 {
                *skip -= 1;
                return Ok(true);
            }
            f(k, v)
        })
    }
}
