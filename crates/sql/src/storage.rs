//! The storage the executor runs on: ordered, byte-keyed trees named by number, with
//! transactions. Narrow on purpose (like toydb's `storage::Engine`), so that the real
//! copy-on-write B+tree store can implement it without knowing anything about SQL.
//!
//! Tree 0 ([`SCHEMA_TREE`]) always exists and holds the catalog; the SQL layer allocates every
//! other tree id itself. Keys and values are opaque bytes; keys sort bytewise.
//!
//! Transactions: [`Storage::begin`] starts one, [`Storage::commit`] makes it durable,
//! [`Storage::rollback`] restores the state at `begin`. The SQL layer makes each statement atomic
//! inside a transaction with [`Storage::savepoint`] / [`Storage::rollback_to`]. Writes happen
//! only inside a transaction; reads may happen outside one.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
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

pub trait Storage {
    fn begin(&mut self) -> Result<()>;
    fn commit(&mut self) -> Result<()>;
    fn rollback(&mut self) -> Result<()>;
    /// Marks the current state of the open transaction; returns a handle for `rollback_to`.
    fn savepoint(&mut self) -> Result<u64>;
    /// Undoes every write since `savepoint` returned `sp`; the transaction stays open.
    fn rollback_to(&mut self, sp: u64) -> Result<()>;
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

    fn create_tree(&mut self, tree: TreeId) -> Result<()>;
    fn drop_tree(&mut self, tree: TreeId) -> Result<()>;

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

    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// [`Storage::get`] into a buffer the caller reuses from lookup to lookup; false when the
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
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()>;
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
    /// Hands the entries [`Storage::scan`] would return to `f` (key, value) until it returns
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
    /// The largest key in the tree (for allocating the next row id).
    fn last_key(&self, tree: TreeId) -> Result<Option<Vec<u8>>>;
}

/// A store with nothing in it, for evaluating expressions that cannot reach one (an UPDATE's or
/// DELETE's filters and new values, without subqueries, run inside the store's own write). Every
/// call is an error. Not `Memory::default()`: that would build the whole in-memory store, and
/// the `BTreeMap` code under it, into every module that uses the paged one (12.6 KiB of the wasm
/// module, gzipped).
pub(crate) struct NoStore;

#[cold]
#[inline(never)]
fn no_store() -> Error {
    Error::Invalid("no storage in this context".into())
}

impl Storage for NoStore {
    fn begin(&mut self) -> Result<()> {
        Err(no_store())
    }
    fn commit(&mut self) -> Result<()> {
        Err(no_store())
    }
    fn rollback(&mut self) -> Result<()> {
        Err(no_store())
    }
    fn savepoint(&mut self) -> Result<u64> {
        Err(no_store())
    }
    fn rollback_to(&mut self, _sp: u64) -> Result<()> {
        Err(no_store())
    }
    fn create_tree(&mut self, _tree: TreeId) -> Result<()> {
        Err(no_store())
    }
    fn drop_tree(&mut self, _tree: TreeId) -> Result<()> {
        Err(no_store())
    }
    fn get(&self, _tree: TreeId, _key: &[u8]) -> Result<Option<Vec<u8>>> {
        Err(no_store())
    }
    fn put(&mut self, _tree: TreeId, _key: &[u8], _value: &[u8]) -> Result<()> {
        Err(no_store())
    }
    fn delete(&mut self, _tree: TreeId, _key: &[u8]) -> Result<bool> {
        Err(no_store())
    }
    fn scan<'a>(
        &'a self,
        _tree: TreeId,
        _lower: Bound<&[u8]>,
        _upper: Bound<&[u8]>,
        _reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        Err(no_store())
    }
    fn last_key(&self, _tree: TreeId) -> Result<Option<Vec<u8>>> {
        Err(no_store())
    }
    // The defaults below would each be compiled for this type too.
    fn scan_each(
        &self,
        _tree: TreeId,
        _lower: Bound<&[u8]>,
        _upper: Bound<&[u8]>,
        _reverse: bool,
        _f: &mut EntryFn,
    ) -> Result<bool> {
        Err(no_store())
    }
    fn update_each(
        &mut self,
        _tree: TreeId,
        _lower: Bound<&[u8]>,
        _upper: Bound<&[u8]>,
        _f: &mut Rewrite<'_>,
    ) -> Result<u64> {
        Err(no_store())
    }
    fn put_new(&mut self, _tree: TreeId, _key: &[u8], _value: &[u8]) -> Result<bool> {
        Err(no_store())
    }
    fn put_new_or_rewrite(
        &mut self,
        _tree: TreeId,
        _key: &[u8],
        _value: &[u8],
        _f: &mut Rewrite<'_>,
    ) -> Result<Option<Each>> {
        Err(no_store())
    }
}

type Tree = BTreeMap<Vec<u8>, Vec<u8>>;

/// The root bytes [`Memory`] keeps at most: as many as the paged store's superblock holds with
/// 4 KiB pages.
const MEMORY_ROOT_ROOM: usize = 1024;

enum Undo {
    Put(TreeId, Vec<u8>, Option<Vec<u8>>),
    CreateTree(TreeId),
    /// A dropped tree and its bytes beside it.
    DropTree(TreeId, Tree, Option<Vec<u8>>),
    /// The bytes beside a tree before a `set_tree_meta` (None: none).
    Meta(TreeId, Option<Vec<u8>>),
    /// The root bytes before a `set_root_meta`.
    Root(Vec<u8>),
}

/// Trees in memory, with an undo log for rollback: a write in a transaction logs what it
/// overwrote, and rollback replays the log backwards, so rollback really restores the old state
/// at the cost of the writes made, not of the database size.
#[derive(Default)]
pub struct Memory {
    trees: BTreeMap<TreeId, Tree>,
    /// `Storage::tree_meta`, for the trees that have any.
    metas: BTreeMap<TreeId, Vec<u8>>,
    /// `Storage::root_meta`.
    root: Vec<u8>,
    undo: Option<Vec<Undo>>,
}

impl Memory {
    pub fn new() -> Self {
        let mut trees = BTreeMap::new();
        trees.insert(SCHEMA_TREE, Tree::new());
        Memory {
            trees,
            metas: BTreeMap::new(),
            root: Vec::new(),
            undo: None,
        }
    }

    fn tree(&self, t: TreeId) -> Result<&Tree> {
        self.trees
            .get(&t)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {t} does not exist")))
    }

    fn log(&mut self) -> Result<&mut Vec<Undo>> {
        self.undo
            .as_mut()
            .ok_or_else(|| Error::Transaction("write outside a transaction".into()))
    }

    fn undo_to(&mut self, len: usize) {
        let Some(log) = self.undo.as_mut() else {
            return;
        };
        let tail: Vec<Undo> = log.drain(len..).collect();
        for u in tail.into_iter().rev() {
            match u {
                Undo::Put(t, k, old) => {
                    if let Some(tree) = self.trees.get_mut(&t) {
                        match old {
                            Some(v) => {
                                tree.insert(k, v);
                            }
                            None => {
                                tree.remove(&k);
                            }
                        }
                    }
                }
                Undo::CreateTree(t) => {
                    self.trees.remove(&t);
                    self.metas.remove(&t);
                }
                Undo::DropTree(t, tree, meta) => {
                    self.trees.insert(t, tree);
                    if let Some(m) = meta {
                        self.metas.insert(t, m);
                    }
                }
                Undo::Meta(t, old) => match old {
                    Some(m) => {
                        self.metas.insert(t, m);
                    }
                    None => {
                        self.metas.remove(&t);
                    }
                },
                Undo::Root(old) => self.root = old,
            }
        }
    }
}

struct MemCursor<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>> {
    iter: I,
    cur: Option<(&'a [u8], &'a [u8])>,
}

impl<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>> Cursor for MemCursor<'a, I> {
    fn next(&mut self) -> Result<bool> {
        self.cur = self.iter.next().map(|(k, v)| (k.as_slice(), v.as_slice()));
        Ok(self.cur.is_some())
    }
    fn key(&self) -> &[u8] {
        self.cur.map(|c| c.0).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.cur.map(|c| c.1).unwrap_or(&[])
    }
}

impl Storage for Memory {
    fn volatile(&self) -> bool {
        true
    }

    fn begin(&mut self) -> Result<()> {
        if self.undo.is_some() {
            return Err(Error::Transaction("a transaction is already open".into()));
        }
        self.undo = Some(Vec::new());
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        self.undo
            .take()
            .map(|_| ())
            .ok_or_else(|| Error::Transaction("no transaction is open".into()))
    }

    fn rollback(&mut self) -> Result<()> {
        if self.undo.is_none() {
            return Err(Error::Transaction("no transaction is open".into()));
        }
        self.undo_to(0);
        self.undo = None;
        Ok(())
    }

    fn savepoint(&mut self) -> Result<u64> {
        Ok(self.log()?.len() as u64)
    }

    fn rollback_to(&mut self, sp: u64) -> Result<()> {
        let len = self.log()?.len();
        self.undo_to((sp as usize).min(len));
        Ok(())
    }

    fn create_tree(&mut self, tree: TreeId) -> Result<()> {
        if self.trees.contains_key(&tree) {
            return Err(Error::Invalid(format!(
                "storage: tree {tree} already exists"
            )));
        }
        self.log()?.push(Undo::CreateTree(tree));
        self.trees.insert(tree, Tree::new());
        Ok(())
    }

    fn drop_tree(&mut self, tree: TreeId) -> Result<()> {
        self.log()?;
        let t = self
            .trees
            .remove(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        let meta = self.metas.remove(&tree);
        self.log()?.push(Undo::DropTree(tree, t, meta));
        Ok(())
    }

    fn tree_meta(&self, tree: TreeId) -> Result<Vec<u8>> {
        self.tree(tree)?;
        Ok(self.metas.get(&tree).cloned().unwrap_or_default())
    }

    fn set_tree_meta(&mut self, tree: TreeId, meta: &[u8]) -> Result<()> {
        self.log()?;
        self.tree(tree)?;
        let old = self.metas.insert(tree, meta.to_vec());
        self.log()?.push(Undo::Meta(tree, old));
        Ok(())
    }

    fn root_meta(&self) -> Result<Vec<u8>> {
        Ok(self.root.clone())
    }

    fn set_root_meta(&mut self, meta: &[u8]) -> Result<()> {
        if meta.len() > MEMORY_ROOT_ROOM {
            return Err(Error::Invalid(format!(
                "{} root bytes, more than {MEMORY_ROOT_ROOM}",
                meta.len()
            )));
        }
        self.log()?;
        let old = std::mem::replace(&mut self.root, meta.to_vec());
        self.log()?.push(Undo::Root(old));
        Ok(())
    }

    fn root_meta_room(&self) -> usize {
        MEMORY_ROOT_ROOM
    }

    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tree(tree)?.get(key).cloned())
    }

    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        self.log()?;
        let t = self
            .trees
            .get_mut(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        let old = t.insert(key.to_vec(), value.to_vec());
        self.log()?.push(Undo::Put(tree, key.to_vec(), old));
        Ok(())
    }

    fn put_new(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<bool> {
        self.log()?;
        let t = self
            .trees
            .get_mut(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        match t.entry(key.to_vec()) {
            std::collections::btree_map::Entry::Occupied(_) => Ok(false),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(value.to_vec());
                self.log()?.push(Undo::Put(tree, key.to_vec(), None));
                Ok(true)
            }
        }
    }

    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool> {
        self.log()?;
        let t = self
            .trees
            .get_mut(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        match t.remove(key) {
            Some(old) => {
                self.log()?.push(Undo::Put(tree, key.to_vec(), Some(old)));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan<'a>(
        &'a self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        let t = self.tree(tree)?;
        // BTreeMap::range panics on inverted or doubly-excluded equal bounds; such a range is empty.
        let empty = match (lower, upper) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a > b
                    || (a == b
                        && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        };
        if empty {
            return Ok(Box::new(MemCursor {
                iter: std::iter::empty(),
                cur: None,
            }));
        }
        let range = t.range::<[u8], _>((lower, upper));
        if reverse {
            Ok(Box::new(MemCursor {
                iter: range.rev(),
                cur: None,
            }))
        } else {
            Ok(Box::new(MemCursor {
                iter: range,
                cur: None,
            }))
        }
    }

    fn last_key(&self, tree: TreeId) -> Result<Option<Vec<u8>>> {
        Ok(self.tree(tree)?.keys().next_back().cloned())
    }
}

/// Cases every [`Storage`] implementation must pass (as cairn-store's block files have their
/// conformance suite): call [`conformance::run`] from a test with a constructor for a fresh,
/// empty storage. They panic on the first failure, naming it.
pub mod conformance {
    use super::*;

    fn keys(
        s: &dyn Storage,
        t: TreeId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        rev: bool,
    ) -> Vec<Vec<u8>> {
        let mut c = s.scan(t, lo, hi, rev).expect("scan");
        let mut v = Vec::new();
        while c.next().expect("next") {
            v.push(c.key().to_vec());
        }
        v
    }

    pub fn run(make: &dyn Fn() -> Box<dyn Storage>) {
        writes_need_a_transaction(make());
        commit_keeps_and_rollback_restores(make());
        savepoints_undo_only_what_followed(make());
        scans_honour_bounds_and_direction(make());
        scans_return_each_entry_whole(make());
        bytes_beside_a_tree_commit_and_roll_back_like_a_put(make());
        root_bytes_commit_and_roll_back_like_a_put(make());
    }

    /// `set_root_meta`: empty until set, kept by a commit (and by commits that do not set
    /// them), undone by a rollback and by a rollback to a savepoint; more than the room refused.
    fn root_bytes_commit_and_roll_back_like_a_put(mut s: Box<dyn Storage>) {
        let room = s.root_meta_room();
        assert!(room >= 128, "room for a few records: {room}");
        assert_eq!(s.root_meta().expect("root"), b"");
        assert!(s.set_root_meta(b"x").is_err(), "outside a transaction");
        s.begin().expect("begin");
        s.set_root_meta(b"one").expect("set");
        assert_eq!(s.root_meta().expect("root"), b"one");
        s.commit().expect("commit");
        assert_eq!(s.root_meta().expect("root"), b"one", "read outside");
        s.begin().expect("begin");
        s.create_tree(5).expect("create");
        s.put(5, b"k", b"v").expect("put");
        s.commit().expect("commit");
        assert_eq!(s.root_meta().expect("root"), b"one", "kept");
        s.begin().expect("begin");
        s.set_root_meta(&vec![7; room]).expect("set the whole room");
        s.rollback().expect("rollback");
        assert_eq!(s.root_meta().expect("root"), b"one");
        s.begin().expect("begin");
        assert!(
            s.set_root_meta(&vec![7; room + 1]).is_err(),
            "past the room"
        );
        s.set_root_meta(b"two").expect("set");
        let sp = s.savepoint().expect("savepoint");
        s.set_root_meta(b"three").expect("set");
        s.put(5, b"k2", b"v").expect("put");
        s.set_root_meta(b"four").expect("set");
        s.rollback_to(sp).expect("rollback to");
        assert_eq!(s.root_meta().expect("root"), b"two");
        s.release(sp).expect("release");
        s.commit().expect("commit");
        assert_eq!(s.root_meta().expect("root"), b"two");
    }

    /// `set_tree_meta`: empty until set, kept by a commit, undone by a rollback and by a
    /// rollback to a savepoint, and gone with its tree.
    fn bytes_beside_a_tree_commit_and_roll_back_like_a_put(mut s: Box<dyn Storage>) {
        s.begin().expect("begin");
        s.create_tree(5).expect("create");
        assert_eq!(s.tree_meta(5).expect("meta"), b"");
        s.set_tree_meta(5, b"one").expect("set");
        assert_eq!(s.tree_meta(5).expect("meta"), b"one");
        s.commit().expect("commit");
        assert_eq!(
            s.tree_meta(5).expect("meta"),
            b"one",
            "read outside a transaction"
        );
        s.begin().expect("begin");
        s.set_tree_meta(5, &[7; 900]).expect("set");
        s.rollback().expect("rollback");
        assert_eq!(s.tree_meta(5).expect("meta"), b"one");
        s.begin().expect("begin");
        s.set_tree_meta(5, b"two").expect("set");
        let sp = s.savepoint().expect("savepoint");
        s.set_tree_meta(5, b"three").expect("set");
        s.put(5, b"k", b"v").expect("put");
        s.set_tree_meta(5, b"four").expect("set");
        s.rollback_to(sp).expect("rollback to");
        assert_eq!(s.tree_meta(5).expect("meta"), b"two");
        assert_eq!(s.get(5, b"k").expect("get"), None);
        s.release(sp).expect("release");
        s.commit().expect("commit");
        assert_eq!(s.tree_meta(5).expect("meta"), b"two");
        // Set first thing in a transaction (the paged store then leaves the tree unopened),
        // read back, dropped with the tree.
        s.begin().expect("begin");
        s.set_tree_meta(5, b"five").expect("set");
        s.set_tree_meta(5, b"six").expect("set");
        assert_eq!(s.tree_meta(5).expect("meta"), b"six");
        s.drop_tree(5).expect("drop");
        assert!(s.set_tree_meta(5, b"x").is_err(), "the tree is dropped");
        s.commit().expect("commit");
        s.begin().expect("begin");
        s.create_tree(5).expect("create again");
        assert_eq!(s.tree_meta(5).expect("meta"), b"", "a new tree has none");
        s.commit().expect("commit");
    }

    /// Values small and too big for a page, interleaved: a cursor's key and value are the
    /// entry's, whichever is asked first, in both directions.
    fn scans_return_each_entry_whole(mut s: Box<dyn Storage>) {
        s.begin().expect("begin");
        s.create_tree(4).expect("create");
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..40u8)
            .map(|i| {
                let len = if i % 3 == 0 {
                    20_000 + i as usize
                } else {
                    i as usize
                };
                (vec![b'k', i], vec![i.wrapping_mul(7); len])
            })
            .collect();
        for (k, v) in &entries {
            s.put(4, k, v).expect("put");
        }
        s.commit().expect("commit");
        for rev in [false, true] {
            let mut c = s
                .scan(4, Bound::Unbounded, Bound::Unbounded, rev)
                .expect("scan");
            let mut got = Vec::new();
            let mut i = 0;
            while c.next().expect("next") {
                let e = if i % 2 == 0 {
                    let v = c.value().to_vec();
                    (c.key().to_vec(), v)
                } else {
                    (c.key().to_vec(), c.value().to_vec())
                };
                got.push(e);
                i += 1;
            }
            if rev {
                got.reverse();
            }
            assert!(
                got == entries,
                "scan (reverse: {rev}) returns every entry whole"
            );
        }
    }

    fn writes_need_a_transaction(mut s: Box<dyn Storage>) {
        assert!(
            s.put(SCHEMA_TREE, b"k", b"v").is_err(),
            "put outside a transaction must fail"
        );
        assert!(s.commit().is_err(), "commit without begin must fail");
        s.begin().expect("begin");
        assert!(s.begin().is_err(), "nested begin must fail");
        s.put(SCHEMA_TREE, b"k", b"v")
            .expect("put in the schema tree");
        s.commit().expect("commit");
        assert_eq!(s.get(SCHEMA_TREE, b"k").expect("get"), Some(b"v".to_vec()));
    }

    fn commit_keeps_and_rollback_restores(mut s: Box<dyn Storage>) {
        s.begin().expect("begin");
        s.create_tree(7).expect("create");
        s.put(7, b"a", b"1").expect("put");
        s.put(7, b"b", b"2").expect("put");
        s.commit().expect("commit");
        s.begin().expect("begin");
        s.put(7, b"a", b"changed").expect("put");
        assert!(
            s.delete(7, b"b").expect("delete"),
            "delete of a present key says so"
        );
        assert!(
            !s.delete(7, b"zz").expect("delete"),
            "delete of an absent key says so"
        );
        s.create_tree(8).expect("create");
        s.put(8, b"x", b"").expect("put");
        s.drop_tree(7).expect("drop");
        s.rollback().expect("rollback");
        assert_eq!(
            s.get(7, b"a").expect("get"),
            Some(b"1".to_vec()),
            "rollback restores values"
        );
        assert_eq!(
            s.get(7, b"b").expect("get"),
            Some(b"2".to_vec()),
            "rollback restores deletes"
        );
        assert!(s.get(8, b"x").is_err(), "rollback removes created trees");
        assert_eq!(s.last_key(7).expect("last"), Some(b"b".to_vec()));
    }

    fn savepoints_undo_only_what_followed(mut s: Box<dyn Storage>) {
        s.begin().expect("begin");
        s.create_tree(1).expect("create");
        s.put(1, b"a", b"1").expect("put");
        let sp = s.savepoint().expect("savepoint");
        s.put(1, b"a", b"2").expect("put");
        s.put(1, b"b", b"3").expect("put");
        s.rollback_to(sp).expect("rollback_to");
        assert_eq!(s.get(1, b"a").expect("get"), Some(b"1".to_vec()));
        assert_eq!(s.get(1, b"b").expect("get"), None);
        s.put(1, b"c", b"4").expect("the transaction goes on");
        s.commit().expect("commit");
        assert_eq!(
            keys(s.as_ref(), 1, Bound::Unbounded, Bound::Unbounded, false),
            vec![b"a".to_vec(), b"c".to_vec()]
        );
    }

    fn scans_honour_bounds_and_direction(mut s: Box<dyn Storage>) {
        s.begin().expect("begin");
        s.create_tree(3).expect("create");
        for k in [&b"a"[..], b"ab", b"b", b"b\x00", b"c", b"\xff"] {
            s.put(3, k, k).expect("put");
        }
        s.commit().expect("commit");
        let all = keys(s.as_ref(), 3, Bound::Unbounded, Bound::Unbounded, false);
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(all, sorted, "keys sort bytewise");
        let mut rev = keys(s.as_ref(), 3, Bound::Unbounded, Bound::Unbounded, true);
        rev.reverse();
        assert_eq!(rev, all, "reverse scans see the same keys backwards");
        assert_eq!(
            keys(
                s.as_ref(),
                3,
                Bound::Included(b"ab"),
                Bound::Excluded(b"c"),
                false
            ),
            vec![b"ab".to_vec(), b"b".to_vec(), b"b\x00".to_vec()]
        );
        assert_eq!(
            keys(
                s.as_ref(),
                3,
                Bound::Excluded(b"ab"),
                Bound::Included(b"c"),
                true
            ),
            vec![b"c".to_vec(), b"b\x00".to_vec(), b"b".to_vec()]
        );
        assert!(
            keys(
                s.as_ref(),
                3,
                Bound::Included(b"c"),
                Bound::Excluded(b"b"),
                false
            )
            .is_empty(),
            "an inverted range is empty"
        );
        assert!(keys(
            s.as_ref(),
            3,
            Bound::Excluded(b"b"),
            Bound::Excluded(b"b"),
            false
        )
        .is_empty());
        let mut c = s
            .scan(3, Bound::Included(b"b"), Bound::Included(b"b"), false)
            .expect("scan");
        assert!(c.next().expect("next"));
        assert_eq!((c.key(), c.value()), (&b"b"[..], &b"b"[..]));
        assert!(!c.next().expect("next"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(m: &Memory, t: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut c = m
            .scan(t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap();
        let mut v = Vec::new();
        while c.next().unwrap() {
            v.push((c.key().to_vec(), c.value().to_vec()));
        }
        v
    }

    #[test]
    fn memory_passes_the_conformance_suite() {
        conformance::run(&|| Box::new(Memory::new()));
    }

    #[test]
    fn rollback_restores_everything() {
        let mut m = Memory::new();
        m.begin().unwrap();
        m.create_tree(1).unwrap();
        m.put(1, b"a", b"1").unwrap();
        m.commit().unwrap();
        let before = dump(&m, 1);
        m.begin().unwrap();
        m.put(1, b"a", b"2").unwrap();
        m.put(1, b"b", b"3").unwrap();
        m.delete(1, b"a").unwrap();
        m.create_tree(2).unwrap();
        m.drop_tree(1).unwrap();
        m.rollback().unwrap();
        assert_eq!(dump(&m, 1), before);
        assert!(m.get(2, b"x").is_err());
    }

    #[test]
    fn savepoints_and_ranges() {
        let mut m = Memory::new();
        m.begin().unwrap();
        m.create_tree(1).unwrap();
        for k in [b"a", b"b", b"c", b"d"] {
            m.put(1, k, b"").unwrap();
        }
        let sp = m.savepoint().unwrap();
        m.delete(1, b"b").unwrap();
        m.put(1, b"e", b"").unwrap();
        m.rollback_to(sp).unwrap();
        let keys: Vec<_> = dump(&m, 1).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        let mut c = m
            .scan(1, Bound::Excluded(b"a"), Bound::Included(b"c"), true)
            .unwrap();
        let mut got = Vec::new();
        while c.next().unwrap() {
            got.push(c.key().to_vec());
        }
        assert_eq!(got, vec![b"c".to_vec(), b"b".to_vec()]);
        drop(c);
        let empty = !m
            .scan(1, Bound::Excluded(b"c"), Bound::Excluded(b"c"), false)
            .unwrap()
            .next()
            .unwrap();
        assert!(empty);
        m.commit().unwrap();
        assert!(m.put(1, b"z", b"").is_err(), "writes need a transaction");
    }
}
