//! [`Storage`] over the real storage engine: copy-on-write B+trees in one paged file
//! ([`cairn_store::Db`]), on any block file (OPFS in the browser, a native file in the shell,
//! memory in tests).
//!
//! - The SQL layer names trees by number; the store by name. Tree `n` is the store tree `"n"`.
//! - Reads outside a transaction use a read snapshot of the last commit, taken when first needed
//!   and dropped when a write transaction begins (so it never pins pages a later commit frees).
//! - Savepoints (statement atomicity inside an explicit transaction) keep an undo log of what each
//!   write replaced, only while a savepoint is open. A dropped tree is hidden until commit and
//!   dropped then, so rolling back to before a `DROP TABLE` is cheap.
//! - A failed commit leaves the file at its last commit, but the store then needs to be reopened
//!   before the next write: this adapter does it, so the SQL layer sees an error and goes on.

use std::cell::{RefCell, RefMut};
use std::ops::Bound;

use cairn_store::{BlockFile, Db, Options, Range, ReadTx, Tree, TreeKind, WriteTx};

use crate::error::{Error, Result};
use crate::storage::{Cursor, Each, EntryFn, Storage, StorageCore, TreeId, SCHEMA_TREE};

enum Undo {
    /// A write to `tree`: its key, then the value it replaced (if `had_old`), are the bytes of
    /// `Paged::undo_bytes` from `start` to where the next write's begin. One buffer for the
    /// whole log, not two allocations per write.
    Put {
        tree: TreeId,
        start: usize,
        key_len: usize,
        had_old: bool,
    },
    CreateTree(TreeId),
    DropTree(TreeId),
    /// A `set_tree_meta`: the bytes it replaced are `Paged::undo_bytes` from `start` on.
    Meta {
        tree: TreeId,
        start: usize,
    },
    /// A `set_root_meta`: the bytes it replaced are `Paged::undo_bytes` from `start` on.
    Root {
        start: usize,
    },
}

/// Logs a write to `tree` of `key`, which replaced `old` (None: the key was new).
fn push_put(
    undo: &mut Vec<Undo>,
    bytes: &mut Vec<u8>,
    tree: TreeId,
    key: &[u8],
    old: Option<&[u8]>,
) {
    let start = bytes.len();
    bytes.extend_from_slice(key);
    if let Some(v) = old {
        bytes.extend_from_slice(v);
    }
    undo.push(Undo::Put {
        tree,
        start,
        key_len: key.len(),
        had_old: old.is_some(),
    });
}

/// A read transaction and the tree handles opened in it.
type Snapshot<F> = (ReadTx<F>, Handles);

/// Tree handles by SQL tree id, in a vector sorted by id. They are looked up on every read
/// and write: a binary search over a transaction's few trees costs less than hashing the id,
/// and less code than a map.
#[derive(Default)]
struct Handles(Vec<(TreeId, Tree)>);

impl Handles {
    fn get(&self, tree: &TreeId) -> Option<&Tree> {
        let i = self.0.binary_search_by_key(tree, |e| e.0).ok()?;
        Some(&self.0[i].1)
    }
    fn insert(&mut self, tree: TreeId, t: Tree) {
        match self.0.binary_search_by_key(&tree, |e| e.0) {
            Ok(i) => self.0[i].1 = t,
            Err(i) => self.0.insert(i, (tree, t)),
        }
    }
    fn remove(&mut self, tree: &TreeId) {
        if let Ok(i) = self.0.binary_search_by_key(tree, |e| e.0) {
            self.0.remove(i);
        }
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

pub struct Paged<F: BlockFile + 'static> {
    db: Option<Db<F>>,
    opts: Options,
    tx: RefCell<Option<WriteTx<F>>>,
    /// Tree handles of the open write transaction, by SQL tree id.
    trees: RefCell<Handles>,
    /// The snapshot reads outside a transaction go to, and its tree handles.
    snapshot: RefCell<Option<Snapshot<F>>>,
    /// Trees dropped in the open transaction. A list: it is empty but for a `DROP`, and checked
    /// before every write.
    dropped: Vec<TreeId>,
    /// Open savepoints (their positions in `undo`); writes are logged only while there is one.
    savepoints: Vec<usize>,
    undo: Vec<Undo>,
    undo_bytes: Vec<u8>,
    /// The store's name of the last tree `set_tree_meta` named (a caller sets one tree's
    /// bytes on every commit).
    meta_name: Option<(TreeId, String)>,
}

fn name(tree: TreeId) -> String {
    tree.to_string()
}

/// A tree's store name in decimal, on the stack: a write transaction opens its trees by name
/// every time, and a one-row commit would otherwise allocate the string for that alone.
struct Name {
    buf: [u8; 20],
    start: usize,
}

impl Name {
    fn of(mut tree: TreeId) -> Name {
        let mut n = Name {
            buf: [0; 20],
            start: 20,
        };
        loop {
            n.start -= 1;
            n.buf[n.start] = b'0' + (tree % 10) as u8;
            tree /= 10;
            if tree == 0 {
                return n;
            }
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[self.start..]).expect("invariant: ASCII digits")
    }
}

impl<F: BlockFile + 'static> Paged<F> {
    /// Opens the database in `file`, creating it when the file is empty.
    pub fn open(file: F, opts: Options) -> Result<Self> {
        let db = if file.is_empty()? {
            let db = Db::create(file, opts.clone())?;
            let mut tx = db.begin_write()?;
            tx.create_tree(&name(SCHEMA_TREE), TreeKind::Table)?;
            tx.commit()?;
            db
        } else {
            Db::open(file, opts.clone())?
        };
        Ok(Paged {
            db: Some(db),
            opts,
            tx: RefCell::new(None),
            trees: RefCell::default(),
            snapshot: RefCell::default(),
            dropped: Vec::new(),
            savepoints: Vec::new(),
            undo: Vec::new(),
            undo_bytes: Vec::new(),
            meta_name: None,
        })
    }

    /// Opens the database in `file`, refusing an empty file (`NOT_A_DATABASE`) instead of creating one.
    pub fn open_existing(file: F, opts: Options) -> Result<Self> {
        if file.is_empty()? {
            return Err(cairn_store::Error::NotADatabase("the file is empty".into()).into());
        }
        Self::open(file, opts)
    }

    /// The store, unless opening it again after a failed commit (or an export) failed too:
    /// then every call fails with `NEEDS_REOPEN` until the database is opened anew.
    pub fn db(&self) -> Result<&Db<F>> {
        self.db.as_ref().ok_or_else(closed)
    }

    /// Closes the store and hands back the file.
    pub fn into_file(mut self) -> Result<F> {
        self.tx.replace(None);
        self.snapshot.replace(None);
        Ok(self.db.take().ok_or_else(closed)?.into_file()?)
    }

    fn write_tree(&self, tree: TreeId) -> Result<Tree> {
        if !self.dropped.is_empty() && self.dropped.contains(&tree) {
            return Err(Error::Invalid(format!("tree {tree} was dropped")));
        }
        if let Some(t) = self.trees.borrow().get(&tree) {
            return Ok(*t);
        }
        let t = self
            .tx
            .borrow_mut()
            .as_mut()
            .ok_or_else(|| Error::Transaction("no transaction is open".into()))?
            .open_tree(Name::of(tree).as_str())?;
        self.trees.borrow_mut().insert(tree, t);
        Ok(t)
    }

    fn tx_mut(&self) -> Result<RefMut<'_, WriteTx<F>>> {
        RefMut::filter_map(self.tx.borrow_mut(), Option::as_mut)
            .map_err(|_| Error::Transaction("a write outside a transaction".into()))
    }

    fn in_tx(&self) -> bool {
        self.tx.borrow().is_some()
    }

    /// Runs `f` against the current state: the write transaction if one is open, else the snapshot.
    fn read<T>(
        &self,
        tree: TreeId,
        f: impl FnOnce(Reader<'_, F>, Tree) -> cairn_store::Result<T>,
    ) -> Result<T> {
        let (mut f, mut out) = (Some(f), None);
        self.read_dyn(tree, &mut |r, t| {
            if let Some(f) = f.take() {
                out = Some(f(r, t)?);
            }
            Ok(())
        })?;
        Ok(out.expect("invariant: read_dyn ran f"))
    }

    /// `read` behind one function type: one copy of the code for every caller's closure (six
    /// callers kept 3 KB of wasm), for an indirect call a read.
    fn read_dyn(
        &self,
        tree: TreeId,
        f: &mut dyn FnMut(Reader<'_, F>, Tree) -> cairn_store::Result<()>,
    ) -> Result<()> {
        if self.in_tx() {
            let t = self.write_tree(tree)?;
            let tx = self.tx_mut()?;
            return Ok(f(Reader::Write(&tx), t)?);
        }
        let mut snap = self.snapshot.borrow_mut();
        if snap.is_none() {
            *snap = Some((self.db()?.begin_read()?, Handles::default()));
        }
        let (rtx, trees) = snap.as_mut().expect("invariant: just set");
        let t = match trees.get(&tree) {
            Some(t) => *t,
            None => {
                let t = rtx.open_tree(Name::of(tree).as_str())?;
                trees.insert(tree, t);
                t
            }
        };
        Ok(f(Reader::Read(rtx), t)?)
    }

    fn end_tx(&mut self) {
        self.trees.borrow_mut().clear();
        self.dropped.clear();
        self.savepoints.clear();
        self.undo.clear();
        self.undo_bytes.clear();
    }

    fn logging(&self) -> bool {
        !self.savepoints.is_empty()
    }

    /// Logs a write to `key` of `tree` that replaced `old` (None: the key had no value).
    fn log_put(&mut self, tree: TreeId, key: &[u8], old: Option<&[u8]>) {
        push_put(&mut self.undo, &mut self.undo_bytes, tree, key, old);
    }

    /// After a failed commit the store must be reopened before it takes another write.
    fn reopen(&mut self) -> Result<()> {
        self.snapshot.replace(None);
        let db = self.db.take().ok_or_else(closed)?;
        // At the last commit that succeeded: the failed one's superblock may be in the file.
        let txn = db.txn();
        let file = db.into_file()?;
        self.db = Some(Db::open_upto(file, self.opts.clone(), txn)?);
        Ok(())
    }
}

/// The error of a store that could not be opened again (see `Paged::db`).
fn closed() -> Error {
    cairn_store::Error::NeedsReopen(
        "the database file could not be opened again after a failed write; open the database again"
            .into(),
    )
    .into()
}

enum Reader<'a, F: BlockFile> {
    Write(&'a WriteTx<F>),
    Read(&'a ReadTx<F>),
}

impl<F: BlockFile> Reader<'_, F> {
    fn get(&self, t: Tree, key: &[u8]) -> cairn_store::Result<Option<Vec<u8>>> {
        match self {
            Reader::Write(tx) => tx.get(t, key),
            Reader::Read(tx) => tx.get(t, key),
        }
    }
    fn len(&self, t: Tree) -> cairn_store::Result<u64> {
        match self {
            Reader::Write(tx) => tx.len(t),
            Reader::Read(tx) => tx.len(t),
        }
    }
    fn tree_meta(&self, t: Tree) -> cairn_store::Result<Vec<u8>> {
        Ok(match self {
            Reader::Write(tx) => tx.tree_info(t)?.meta,
            Reader::Read(tx) => tx.tree_info(t)?.meta,
        })
    }
    fn get_into(&self, t: Tree, key: &[u8], out: &mut Vec<u8>) -> cairn_store::Result<bool> {
        match self {
            Reader::Write(tx) => tx.get_into(t, key, out),
            Reader::Read(tx) => tx.get_into(t, key, out),
        }
    }
    fn range(
        &self,
        t: Tree,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> cairn_store::Result<Range<F>> {
        match self {
            Reader::Write(tx) => tx.range(t, lower, upper, reverse),
            Reader::Read(tx) => tx.range(t, lower, upper, reverse),
        }
    }
}

/// A range over the store, copying out each entry (the store's cursor borrows from its page).
/// Key and inline value are borrowed from the page the range stands on; only a value kept
/// in overflow pages is read into `value` (a buffer reused from entry to entry).
struct PagedCursor<F: BlockFile> {
    range: Range<F>,
    value: Vec<u8>,
    overflow: bool,
}

impl<F: BlockFile> Cursor for PagedCursor<F> {
    fn next(&mut self) -> Result<bool> {
        if !self.range.next()? {
            return Ok(false);
        }
        self.overflow = self.range.inline_value().is_none();
        if self.overflow {
            self.value.clear();
            self.value.extend_from_slice(self.range.value()?);
        }
        Ok(true)
    }
    fn key(&self) -> &[u8] {
        self.range.key()
    }
    fn value(&self) -> &[u8] {
        if self.overflow {
            &self.value
        } else {
            self.range.inline_value().unwrap_or(&[])
        }
    }
}

/// `range`'s entries to `f`, in a function of its own: inlined into `scan_each`, the loop over
/// a leaf's entries came out a few instructions longer per entry.
#[inline(never)]
fn each<F: BlockFile>(range: &mut Range<F>, f: &mut EntryFn) -> Result<bool> {
    range.for_each(f)
}

impl<F: BlockFile + 'static> StorageCore for Paged<F> {
    fn begin(&mut self) -> Result<()> {
        if self.in_tx() {
            return Err(Error::Transaction("a transaction is already open".into()));
        }
        self.snapshot.replace(None);
        let tx = self.db()?.begin_write()?;
        self.tx.replace(Some(tx));
        Ok(())
    }
    fn commit(&mut self) -> Result<()> {
        let mut tx = self
            .tx
            .get_mut()
            .take()
            .ok_or_else(|| Error::Transaction("no transaction is open".into()))?;
        for tree in std::mem::take(&mut self.dropped) {
            tx.drop_tree(&name(tree))?;
        }
        self.end_tx();
        if let Err(e) = tx.commit_txn() {
            self.reopen()?;
            return Err(e.into());
        }
        Ok(())
    }
    fn rollback(&mut self) -> Result<()> {
        if let Some(tx) = self.tx.get_mut().take() {
            tx.rollback();
        }
        self.end_tx();
        Ok(())
    }
    fn savepoint(&mut self) -> Result<u64> {
        self.tx_mut()?;
        self.savepoints.push(self.undo.len());
        Ok(self.savepoints.len() as u64 - 1)
    }
    fn rollback_to(&mut self, sp: u64) -> Result<()> {
        let sp = usize::try_from(sp).unwrap_or(usize::MAX);
        let Some(&mark) = self.savepoints.get(sp) else {
            return Err(Error::Transaction(format!("no savepoint {sp}")));
        };
        while self.undo.len() > mark {
            match self.undo.pop().expect("invariant: longer than mark") {
                Undo::Put {
                    tree,
                    start,
                    key_len,
                    had_old,
                } => {
                    let t = self.write_tree(tree)?;
                    let bytes = std::mem::take(&mut self.undo_bytes);
                    let (key, old) = bytes[start..].split_at(key_len);
                    let r = match self.tx_mut() {
                        Ok(mut tx) if had_old => tx.insert(t, key, old).map_err(Error::from),
                        Ok(mut tx) => tx.remove(t, key).map_err(Error::from),
                        Err(e) => Err(e),
                    };
                    self.undo_bytes = bytes;
                    self.undo_bytes.truncate(start);
                    r?;
                }
                Undo::CreateTree(tree) => {
                    self.trees.borrow_mut().remove(&tree);
                    self.tx_mut()?.drop_tree(&name(tree))?;
                }
                Undo::DropTree(tree) => {
                    self.dropped.retain(|&t| t != tree);
                }
                Undo::Root { start } => {
                    let bytes = std::mem::take(&mut self.undo_bytes);
                    let r = match self.tx_mut() {
                        Ok(mut tx) => tx.set_root_meta(&bytes[start..]).map_err(Error::from),
                        Err(e) => Err(e),
                    };
                    self.undo_bytes = bytes;
                    self.undo_bytes.truncate(start);
                    r?;
                }
                Undo::Meta { tree, start } => {
                    let t = self.write_tree(tree)?;
                    let bytes = std::mem::take(&mut self.undo_bytes);
                    let r = match self.tx_mut() {
                        Ok(mut tx) => tx.set_meta(t, &bytes[start..]).map_err(Error::from),
                        Err(e) => Err(e),
                    };
                    self.undo_bytes = bytes;
                    self.undo_bytes.truncate(start);
                    r?;
                }
            }
        }
        // The savepoint stays open (the SQL layer may roll back to it again); later ones end.
        self.savepoints.truncate(sp + 1);
        Ok(())
    }
    fn create_tree(&mut self, tree: TreeId) -> Result<()> {
        let t = self.tx_mut()?.create_tree(&name(tree), TreeKind::Table)?;
        self.trees.borrow_mut().insert(tree, t);
        if self.logging() {
            self.undo.push(Undo::CreateTree(tree));
        }
        Ok(())
    }
    fn drop_tree(&mut self, tree: TreeId) -> Result<()> {
        self.write_tree(tree)?;
        self.trees.borrow_mut().remove(&tree);
        if !self.dropped.contains(&tree) {
            self.dropped.push(tree);
        }
        if self.logging() {
            self.undo.push(Undo::DropTree(tree));
        }
        Ok(())
    }
    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(tree, |r, t| r.get(t, key))
    }
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        let t = self.write_tree(tree)?;
        if self.logging() {
            // One descent: the insert hands back the value it replaced, and says so even when
            // an error follows the change, so the undo log never misses a write.
            let mut bytes = std::mem::take(&mut self.undo_bytes);
            let start = bytes.len();
            bytes.extend_from_slice(key);
            let mut replaced = None;
            let r = match self.tx_mut() {
                Ok(mut tx) => tx
                    .replace_appending(t, key, value, &mut bytes, &mut replaced)
                    .map_err(Error::from),
                Err(e) => Err(e),
            };
            match replaced {
                Some(had_old) => self.undo.push(Undo::Put {
                    tree,
                    start,
                    key_len: key.len(),
                    had_old,
                }),
                None => bytes.truncate(start),
            }
            self.undo_bytes = bytes;
            return r;
        }
        self.tx_mut()?.insert(t, key, value)?;
        Ok(())
    }
    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool> {
        let t = self.write_tree(tree)?;
        if self.logging() {
            // One descent, as for `put`: the removal appends the value it removed to the log.
            let mut bytes = std::mem::take(&mut self.undo_bytes);
            let start = bytes.len();
            bytes.extend_from_slice(key);
            let mut removed = false;
            let r = match self.tx_mut() {
                Ok(mut tx) => tx
                    .remove_appending(t, key, &mut bytes, &mut removed)
                    .map_err(Error::from),
                Err(e) => Err(e),
            };
            if removed {
                self.undo.push(Undo::Put {
                    tree,
                    start,
                    key_len: key.len(),
                    had_old: true,
                });
            } else {
                bytes.truncate(start);
            }
            self.undo_bytes = bytes;
            r?;
            return Ok(removed);
        }
        Ok(self.tx_mut()?.remove(t, key)?)
    }
    fn scan<'a>(
        &'a self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        let range = self.read(tree, |r, t| r.range(t, lower, upper, reverse))?;
        Ok(Box::new(PagedCursor {
            range,
            value: Vec::new(),
            overflow: false,
        }))
    }
    fn last_key(&self, tree: TreeId) -> Result<Option<Vec<u8>>> {
        self.read(tree, |r, t| {
            let mut range = r.range(t, Bound::Unbounded, Bound::Unbounded, true)?;
            if range.next()? {
                Ok(Some(range.key().to_vec()))
            } else {
                Ok(None)
            }
        })
    }
}

impl<F: BlockFile + 'static> Storage for Paged<F> {
    fn integrity_check(&mut self) -> Result<Vec<String>> {
        if self.in_tx() {
            return Err(Error::Transaction("check needs no open transaction".into()));
        }
        self.snapshot.replace(None);
        let report = self.db()?.check()?;
        Ok(report.problems.iter().map(|p| p.to_string()).collect())
    }
    fn erase_free(&mut self) -> Result<u32> {
        if self.in_tx() {
            return Err(Error::Transaction(
                "erasing free pages needs no open transaction".into(),
            ));
        }
        self.snapshot.replace(None);
        Ok(self.db()?.erase_free_pages()?)
    }
    fn export(&mut self) -> Result<Vec<u8>> {
        if self.in_tx() {
            return Err(Error::Transaction(
                "export needs no open transaction".into(),
            ));
        }
        // With no transaction open, the file is exactly the last commit (and free pages).
        self.snapshot.replace(None);
        let file = self.db.take().ok_or_else(closed)?.into_file()?;
        let bytes = (|| {
            let len = usize::try_from(file.len()?)
                .map_err(|_| cairn_store::Error::InvalidInput("file too large to export".into()))?;
            let mut bytes = vec![0; len];
            file.read(0, &mut bytes)?;
            Ok::<_, cairn_store::Error>(bytes)
        })();
        self.db = Some(Db::open(file, self.opts.clone())?);
        Ok(bytes?)
    }
    fn release(&mut self, sp: u64) -> Result<()> {
        let sp = usize::try_from(sp).unwrap_or(usize::MAX);
        if sp < self.savepoints.len() {
            self.savepoints.truncate(sp);
            if self.savepoints.is_empty() {
                self.undo.clear();
                self.undo_bytes.clear();
            }
        }
        Ok(())
    }
    fn get_into(&self, tree: TreeId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(tree, |r, t| r.get_into(t, key, out))
    }
    fn tree_meta(&self, tree: TreeId) -> Result<Vec<u8>> {
        self.read(tree, |r, t| r.tree_meta(t))
    }
    fn set_tree_meta(&mut self, tree: TreeId, meta: &[u8]) -> Result<()> {
        if !self.logging() && self.trees.borrow().get(&tree).is_none() {
            // A tree not open in this transaction is not opened for this: the store changes
            // its catalog entry by name (a caller setting the bytes on every commit is spared
            // decoding the entry and registering the tree).
            if self.dropped.contains(&tree) {
                return Err(Error::Invalid(format!("tree {tree} was dropped")));
            }
            if self.meta_name.as_ref().is_none_or(|(t, _)| *t != tree) {
                self.meta_name = Some((tree, name(tree)));
            }
            let (_, n) = self.meta_name.as_ref().expect("invariant: just set");
            self.tx
                .borrow_mut()
                .as_mut()
                .ok_or_else(|| Error::Transaction("a write outside a transaction".into()))?
                .set_meta_of(n, meta)?;
            return Ok(());
        }
        let t = self.write_tree(tree)?;
        if self.logging() {
            let old = self.tx_mut()?.tree_info(t)?.meta;
            let start = self.undo_bytes.len();
            self.undo_bytes.extend_from_slice(&old);
            self.undo.push(Undo::Meta { tree, start });
        }
        // Kept in the tree's catalog entry: the catalog's page is copied and written by any
        // commit that changes a tree, so these bytes ride in a page written anyway.
        self.tx_mut()?.set_meta(t, meta)?;
        Ok(())
    }
    fn root_meta(&self) -> Result<Vec<u8>> {
        if let Some(tx) = self.tx.borrow().as_ref() {
            return Ok(tx.root_meta()?);
        }
        // Outside a transaction the last commit's, which any snapshot this adapter holds is
        // of (it is the store's only writer, and drops its snapshot when it begins one).
        Ok(self.db()?.root_meta())
    }
    fn set_root_meta(&mut self, meta: &[u8]) -> Result<()> {
        if self.logging() {
            let old = self.tx_mut()?.root_meta()?;
            let start = self.undo_bytes.len();
            self.undo_bytes.extend_from_slice(&old);
            self.undo.push(Undo::Root { start });
        }
        self.tx_mut()?.set_root_meta(meta)?;
        Ok(())
    }
    fn root_meta_room(&self) -> usize {
        self.db.as_ref().map_or(0, |d| d.root_meta_room())
    }
    fn volatile(&self) -> bool {
        self.db.as_ref().is_some_and(|d| d.volatile())
    }
    fn update_each(
        &mut self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: &mut crate::storage::Rewrite<'_>,
    ) -> Result<u64> {
        let t = self.write_tree(tree)?;
        // The store's call wants its own error type: an error of `f` is kept here, and the
        // store is stopped with a stand-in.
        let mut failed = None;
        let mut g = |k: &[u8], v: &[u8], out: &mut Vec<u8>| {
            f(k, v, out).map_err(|e| {
                failed = Some(e);
                cairn_store::Error::InvalidInput("stopped by the caller".into())
            })
        };
        let r = if self.logging() {
            let (mut undo, mut bytes) = (
                std::mem::take(&mut self.undo),
                std::mem::take(&mut self.undo_bytes),
            );
            let mut log =
                |k: &[u8], old: &[u8]| push_put(&mut undo, &mut bytes, tree, k, Some(old));
            let r = match self.tx_mut() {
                Ok(mut tx) => tx
                    .update_each(t, lower, upper, &mut g, Some(&mut log))
                    .map_err(Error::from),
                Err(e) => Err(e),
            };
            self.undo = undo;
            self.undo_bytes = bytes;
            r
        } else {
            self.tx_mut()?
                .update_each(t, lower, upper, &mut g, None)
                .map_err(Error::from)
        };
        match failed {
            Some(e) => Err(e),
            None => r,
        }
    }
    fn put_new(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<bool> {
        let t = self.write_tree(tree)?;
        let mut inserted = false;
        let r = self.tx_mut()?.insert_new(t, key, value, &mut inserted);
        if inserted && self.logging() {
            self.log_put(tree, key, None);
        }
        r?;
        Ok(inserted)
    }
    fn put_new_or_rewrite(
        &mut self,
        tree: TreeId,
        key: &[u8],
        value: &[u8],
        f: &mut crate::storage::Rewrite<'_>,
    ) -> Result<Option<Each>> {
        let t = self.write_tree(tree)?;
        // As in `update_each`: an error of `f` is kept here, the store stopped with a stand-in.
        let mut failed = None;
        let mut g = |k: &[u8], v: &[u8], out: &mut Vec<u8>| {
            f(k, v, out).map_err(|e| {
                failed = Some(e);
                cairn_store::Error::InvalidInput("stopped by the caller".into())
            })
        };
        let logging = self.logging();
        let (mut undo, mut bytes) = (
            std::mem::take(&mut self.undo),
            std::mem::take(&mut self.undo_bytes),
        );
        let mut record = |k: &[u8], old: &[u8]| push_put(&mut undo, &mut bytes, tree, k, Some(old));
        let log: Option<&mut cairn_store::Replaced<'_>> = logging.then_some(&mut record);
        let r = match self.tx_mut() {
            Ok(mut tx) => tx
                .insert_or_rewrite(t, key, value, &mut g, log)
                .map_err(Error::from),
            Err(e) => Err(e),
        };
        self.undo = undo;
        self.undo_bytes = bytes;
        if let Some(e) = failed {
            return Err(e);
        }
        if logging && matches!(r, Ok(None)) {
            self.log_put(tree, key, None);
        }
        r
    }
    fn load_keys(&mut self, tree: TreeId, keys: &mut dyn Iterator<Item = &[u8]>) -> Result<()> {
        // Through `load_rows`: one instance of the store's bulk build for both.
        self.load_rows(tree, &mut keys.map(|k| (k, &[][..])))
    }
    fn load_rows(
        &mut self,
        tree: TreeId,
        rows: &mut dyn Iterator<Item = (&[u8], &[u8])>,
    ) -> Result<()> {
        let t = self.write_tree(tree)?;
        // Under a savepoint each row needs its undo entry: insert them one by one there.
        if self.logging() || self.tx_mut()?.len(t)? != 0 {
            for (k, v) in rows {
                self.put(tree, k, v)?;
            }
            return Ok(());
        }
        self.tx_mut()?.bulk_load(t, rows)?;
        Ok(())
    }
    fn count_entries(&self, tree: TreeId) -> Result<u64> {
        // The store keeps each tree's entry count (checked by `integrity_check`).
        self.read(tree, |r, t| r.len(t))
    }
    fn scan_each(
        &self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        f: &mut EntryFn,
    ) -> Result<bool> {
        let mut range = self.read(tree, |r, t| r.range(t, lower, upper, reverse))?;
        each(&mut range, f)
    }
    fn scan_each_past(
        &self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        skip: &mut u64,
        f: &mut EntryFn,
    ) -> Result<bool> {
        let mut range = self.read(tree, |r, t| r.range(t, lower, upper, reverse))?;
        *skip -= range.skip(*skip)?;
        each(&mut range, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_name_is_the_decimal_name() {
        for t in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            u64::from(u32::MAX) + 1,
            u64::MAX,
        ] {
            assert_eq!(Name::of(t).as_str(), name(t));
        }
    }
}
