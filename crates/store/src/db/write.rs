//! The write transaction: [`WriteTx`], the one open at a time. Each call borrows the shared
//! state once, as a [`Writer`] (`Shared::writer`, which also tells a handle of an ended
//! transaction apart), and hands the change to the B+tree (`btree::insert_keeping`,
//! `remove_keeping`, `update_each`, ...) with the tree's root from the transaction's slot for
//! it; the new root goes back into the slot, and into the catalog at commit
//! (`Writer::commit`). Pages past `Options::dirty_pages` are written out early
//! (`Writer::maybe_spill`).

use std::cell::RefCell;
use std::ops::Bound;
use std::rc::Rc;

use super::catalog::{self, MetaRewrite};
use super::cursor::Source;
use super::shared::Shared;
use super::superblock::root_meta_room;
use super::writer::{TreeSlot, Writer};
use super::{CommitInfo, Cursor, Range, Tree, TreeInfo, TreeKind};
use crate::btree::{self, Each, Replaced, Rewrite};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page;

/// The one write transaction. Dropping it without `commit` rolls it back.
pub struct WriteTx<F: BlockFile> {
    pub(super) shared: Rc<RefCell<Shared<F>>>,
    pub(super) serial: u64,
}

impl<F: BlockFile> Drop for WriteTx<F> {
    fn drop(&mut self) {
        let mut sh = self.shared.borrow_mut();
        if sh.open_write(self.serial).is_some() {
            sh.rollback();
        }
    }
}

impl<F: BlockFile> WriteTx<F> {
    /// Creates an empty tree named `name`.
    pub fn create_tree(&mut self, name: &str, kind: TreeKind) -> Result<Tree> {
        let mut guard = self.shared.borrow_mut();
        let catalog = guard.write_state(self.serial)?.state.catalog;
        if name.len() > page::max_key(guard.st.pager.page_size) {
            return Err(Error::TooLarge(format!(
                "tree name of {} bytes",
                name.len()
            )));
        }
        // Reads go through `Shared` (the transaction's pages; `get_into`).
        if catalog::get(&mut *guard, catalog, name)?.is_some() {
            return Err(Error::AlreadyExists(format!("tree {name:?}")));
        }
        let sh = &mut guard.writer(self.serial)?;
        let info = TreeInfo {
            name: name.to_string(),
            kind,
            len: 0,
            meta: Vec::new(),
            root: 0,
        };
        sh.catalog_put(name.as_bytes(), &info.encode())?;
        Ok(sh.handle(info, true))
    }

    pub fn open_tree(&mut self, name: &str) -> Result<Tree> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        if let Some(idx) = sh.w.live_tree(name) {
            return Ok(Tree {
                serial: self.serial,
                idx,
                root: 0,
            });
        }
        let w = &sh.w;
        let (catalog, txn, written) = (w.state.catalog, w.state.txn, w.catalog_written);
        let cached = match &mut sh.st.committed_trees {
            Some(c) if c.txn == txn && c.catalog == catalog && !written => (c.infos.iter())
                .rposition(|i| i.name == name)
                .map(|i| c.infos.swap_remove(i)),
            _ => None,
        };
        let info = match cached {
            Some(info) => info,
            None => catalog::get(&mut *guard, catalog, name)?
                .ok_or_else(|| Error::NotFound(format!("tree {name:?}")))?,
        };
        Ok(guard.writer(self.serial)?.handle(info, false))
    }

    /// Deletes a tree and frees all its pages.
    pub fn drop_tree(&mut self, name: &str) -> Result<()> {
        let t = self.open_tree(name)?;
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let root = sh.slot(t)?.info.root;
        btree::free_tree(sh, root)?;
        sh.catalog_remove(name.as_bytes())?;
        sh.w.trees[t.idx].dropped = true;
        Ok(())
    }

    /// Every tree, as this transaction sees it.
    pub fn list_trees(&self) -> Result<Vec<TreeInfo>> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let catalog = sh.w.state.catalog;
        let mut list = catalog::list(sh, catalog)?;
        for info in &mut list {
            if let Some(i) = sh.w.live_tree(&info.name) {
                *info = sh.w.trees[i].info.clone();
            }
        }
        Ok(list)
    }

    pub fn tree_info(&self, t: Tree) -> Result<TreeInfo> {
        let mut guard = self.shared.borrow_mut();
        Ok(guard.writer(self.serial)?.slot(t)?.info.clone())
    }

    pub fn len(&self, t: Tree) -> Result<u64> {
        let mut guard = self.shared.borrow_mut();
        Ok(guard.writer(self.serial)?.slot(t)?.info.len)
    }

    /// Replaces the caller's metadata bytes for tree `t` (kept in the catalog). The catalog
    /// entry is written at commit, with every changed tree's: a caller that sets them on every
    /// commit pays for one entry put into a catalog page the commit writes anyway.
    pub fn set_meta(&mut self, t: Tree, meta: &[u8]) -> Result<()> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let s = sh.slot(t)?;
        // A fresh copy: growing the old one would reallocate and copy it first.
        s.info.meta = meta.to_vec();
        s.changed = true;
        Ok(())
    }

    /// The root bytes as this transaction sees them (see [`WriteTx::set_root_meta`]).
    pub fn root_meta(&self) -> Result<Vec<u8>> {
        let mut guard = self.shared.borrow_mut();
        let sh = guard.writer(self.serial)?;
        Ok(if sh.w.root_set {
            sh.w.root_next.clone()
        } else {
            sh.st.root_meta.clone()
        })
    }

    /// Replaces the root bytes: a few bytes of the caller's kept with the state, written with
    /// the superblock that every commit writes anyway (docs/file-format.md), so setting them on
    /// every commit writes no page, cell or catalog entry. They stay until replaced; a rollback
    /// drops the change. At most [`crate::Db::root_meta_room`] bytes (`TOO_LARGE` else).
    pub fn set_root_meta(&mut self, meta: &[u8]) -> Result<()> {
        let mut guard = self.shared.borrow_mut();
        let room = root_meta_room(guard.st.pager.page_size);
        if meta.len() > room {
            return Err(Error::TooLarge(format!(
                "{} root bytes, more than the {room} a superblock holds",
                meta.len()
            )));
        }
        let w = guard.writer(self.serial)?.w;
        w.root_next.clear();
        w.root_next.extend_from_slice(meta);
        w.root_set = true;
        Ok(())
    }

    /// [`WriteTx::set_meta`] for the tree named `name`, without opening it: the catalog entry's
    /// caller bytes are replaced at once, within its leaf when they fit there (else the entry is
    /// read and put back), with no handle registered and no [`TreeInfo`] decoded (its name, its
    /// bytes copied). For a caller that replaces a
    /// tree's bytes on every commit and seldom touches the tree otherwise. A tree opened in
    /// this transaction takes the `set_meta` path; one opened after sees the new bytes.
    pub fn set_meta_of(&mut self, name: &str, meta: &[u8]) -> Result<()> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        if let Some(i) = sh.w.live_tree(name) {
            let s = &mut sh.w.trees[i];
            s.info.meta = meta.to_vec();
            s.changed = true;
            return Ok(());
        }
        match sh.catalog_rewrite_meta(name.as_bytes(), meta)? {
            MetaRewrite::Done => {
                sh.w.meta_changed.add(name);
                return Ok(());
            }
            MetaRewrite::Missing => return Err(Error::NotFound(format!("tree {name:?}"))),
            MetaRewrite::Fallback => {}
        }
        let catalog = sh.w.state.catalog;
        // Room for the entry's fields too, so that replacing the bytes does not reallocate.
        let mut v = Vec::with_capacity(64 + meta.len());
        if !btree::get(&mut *guard, catalog, name.as_bytes(), &mut v)? {
            return Err(Error::NotFound(format!("tree {name:?}")));
        }
        let sh = &mut guard.writer(self.serial)?;
        // The entry's fields before the caller's bytes (`TreeInfo::encode`).
        if v.len() < 15 || v.len() < 15 + page::get_u16(&v, 13) {
            return Err(Error::Corrupt(format!(
                "catalog entry {name:?} is malformed"
            )));
        }
        v.truncate(15 + page::get_u16(&v, 13));
        v.extend_from_slice(meta);
        sh.catalog_put(name.as_bytes(), &v)?;
        sh.w.meta_changed.add(name);
        Ok(())
    }

    pub fn get_into(&self, t: Tree, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let root = sh.slot(t)?.info.root;
        if let Some(found) = btree::get_in_last_leaf(sh, root, key, out)? {
            return Ok(found);
        }
        // `Shared` reads the transaction's pages as `Writer` does (no read view is set while
        // this borrow is held), and its `get` is the one reads use: the module holds it once.
        btree::get(&mut *guard, root, key, out)
    }

    pub fn get(&self, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(t, key, &mut v)?.then_some(v))
    }

    /// Rewrites or removes, in key order, the entries of `t` within the bounds that `f` picks
    /// (see [`Each`]). Leaves are copied only where an entry changes, and each change is made
    /// where its entry is, without a descent per entry. `undo(key, old value)` is called before
    /// each change, for a caller's undo log (so it has every change even when an error
    /// follows). Returns how many entries changed or went.
    pub fn update_each(
        &mut self,
        t: Tree,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: &mut Rewrite<'_>,
        undo: Option<&mut Replaced<'_>>,
    ) -> Result<u64> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let mut root = sh.slot(t)?.info.root;
        let mut path = std::mem::take(&mut sh.st.bufs.path);
        let mut scratch = std::mem::take(&mut sh.st.bufs.scratch);
        let mut spill = |sh: &mut Writer<'_, F>| sh.spill_over();
        let mut bufs = std::mem::take(&mut sh.st.bufs.each);
        let mut removed = 0;
        let r = btree::update_each(
            sh,
            &mut root,
            lower,
            upper,
            &mut path,
            &mut scratch,
            &mut bufs,
            f,
            undo,
            &mut spill,
            &mut removed,
        );
        sh.st.bufs.path = path;
        sh.st.bufs.scratch = scratch;
        sh.st.bufs.each = bufs;
        // Even on error the root must be kept, and the tree counted as changed: entries may
        // have changed and pages moved before the failure.
        let s = sh.slot(t)?;
        if root != s.info.root || !matches!(r, Ok(0)) {
            s.info.root = root;
            s.changed = true;
        }
        s.info.len -= removed;
        r
    }

    /// Inserts or replaces; returns whether the key was there before.
    pub fn insert(&mut self, t: Tree, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut replaced = None;
        self.insert_keeping(t, key, value, None, &mut replaced)?;
        Ok(replaced.is_some_and(|r| r.is_some()))
    }

    /// Inserts or replaces, for a caller that keeps an undo log: `replaced` is set as soon as
    /// the tree has changed, to the value the key had (None if it had none), even when an error
    /// follows (a cache spill that fails after the change). Left unset when nothing changed.
    pub fn replace(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &[u8],
        replaced: &mut Option<Option<Vec<u8>>>,
    ) -> Result<()> {
        let mut old = Vec::new();
        let r = self.insert_keeping(t, key, value, Some(&mut old), replaced);
        if let Some(Some(v)) = replaced.as_mut() {
            *v = old;
        }
        r
    }

    /// [`WriteTx::replace`] for an undo log kept in one buffer: the old value, if the key had
    /// one, is appended to `old` (nothing is allocated per write). `replaced` is set as in
    /// `replace`: as soon as the tree has changed, to whether the key had a value.
    pub fn replace_appending(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &[u8],
        old: &mut Vec<u8>,
        replaced: &mut Option<bool>,
    ) -> Result<()> {
        let mut r = None;
        let out = self.insert_keeping(t, key, value, Some(old), &mut r);
        *replaced = r.map(|v| v.is_some());
        out
    }

    fn insert_keeping(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &[u8],
        old: Option<&mut Vec<u8>>,
        replaced: &mut Option<Option<Vec<u8>>>,
    ) -> Result<()> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let mut root = sh.slot(t)?.info.root;
        let mut path = std::mem::take(&mut sh.st.bufs.path);
        let mut scratch = std::mem::take(&mut sh.st.bufs.scratch);
        let r = btree::insert_keeping(sh, &mut root, key, value, &mut path, &mut scratch, old);
        sh.st.bufs.path = path;
        sh.st.bufs.scratch = scratch;
        // Even on error the root must be kept: pages may have moved before the failure.
        let s = sh.slot(t)?;
        s.info.root = root;
        s.changed = true;
        let existed = r?;
        // The old value itself is filled in by `replace`, which owns the buffer.
        *replaced = Some(existed.then(Vec::new));
        if !existed {
            s.info.len += 1;
        }
        sh.maybe_spill()?;
        Ok(())
    }

    /// Inserts `key` only if it is absent, in one descent. `inserted` says whether it was
    /// (false: the key was there, and keeps its value); like `replace`'s `replaced`, it is set
    /// as soon as the tree has changed, even when an error follows, for a caller's undo log.
    pub fn insert_new(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &[u8],
        inserted: &mut bool,
    ) -> Result<()> {
        *inserted = false;
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let mut root = sh.slot(t)?.info.root;
        let mut path = std::mem::take(&mut sh.st.bufs.path);
        let mut scratch = std::mem::take(&mut sh.st.bufs.scratch);
        let r = btree::insert_new(sh, &mut root, key, value, &mut path, &mut scratch);
        sh.st.bufs.path = path;
        sh.st.bufs.scratch = scratch;
        // Even on error (or a key that was there) the root must be kept: pages may have moved.
        let s = sh.slot(t)?;
        s.info.root = root;
        s.changed = true;
        let existed = r?;
        if !existed {
            s.info.len += 1;
            *inserted = true;
        }
        sh.maybe_spill()
    }

    /// Inserts `key` with `value` if it is absent; if it is there, `f(key, old value, out)`
    /// says what becomes of the entry (see [`Each`]), in the same descent (an upsert: the
    /// insert that finds its key rewrites that entry instead of a second look-up). `undo(key,
    /// old value)` is called before an entry that was there changes, for a caller's undo log.
    /// None when the key was inserted, else what `f` asked for.
    pub fn insert_or_rewrite(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &[u8],
        f: &mut Rewrite<'_>,
        undo: Option<&mut Replaced<'_>>,
    ) -> Result<Option<Each>> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let mut root = sh.slot(t)?.info.root;
        let mut path = std::mem::take(&mut sh.st.bufs.path);
        let mut scratch = std::mem::take(&mut sh.st.bufs.scratch);
        let [_, old, out] = &mut sh.st.bufs.each;
        let mut bufs = [std::mem::take(old), std::mem::take(out)];
        let r = btree::insert_or_rewrite(
            sh,
            &mut root,
            key,
            value,
            &mut path,
            &mut scratch,
            &mut bufs,
            f,
            undo,
        );
        sh.st.bufs.path = path;
        sh.st.bufs.scratch = scratch;
        let [old, out] = bufs;
        sh.st.bufs.each[1] = old;
        sh.st.bufs.each[2] = out;
        // Even on error (or a key that was there and kept) the root must be kept: pages may
        // have moved.
        let s = sh.slot(t)?;
        s.info.root = root;
        s.changed = true;
        let r = r?;
        match r {
            None => s.info.len += 1,
            Some(Each::Remove) => s.info.len -= 1,
            Some(_) => {}
        }
        sh.maybe_spill()?;
        Ok(r)
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&mut self, t: Tree, key: &[u8]) -> Result<bool> {
        let mut removed = false;
        self.remove_keeping(t, key, None, &mut removed)?;
        Ok(removed)
    }

    /// [`WriteTx::remove`] for an undo log kept in one buffer: the removed value is appended to
    /// `old`, and `removed` is set as soon as the entry is gone, even when an error follows.
    pub fn remove_appending(
        &mut self,
        t: Tree,
        key: &[u8],
        old: &mut Vec<u8>,
        removed: &mut bool,
    ) -> Result<()> {
        self.remove_keeping(t, key, Some(old), removed)
    }

    fn remove_keeping(
        &mut self,
        t: Tree,
        key: &[u8],
        old: Option<&mut Vec<u8>>,
        removed: &mut bool,
    ) -> Result<()> {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        let mut root = sh.slot(t)?.info.root;
        let mut path = std::mem::take(&mut sh.st.bufs.path);
        let r = btree::remove_keeping(sh, &mut root, key, &mut path, old, removed);
        sh.st.bufs.path = path;
        // Even on error (or a miss) the root must be kept: pages may have moved.
        let s = sh.slot(t)?;
        if root != s.info.root {
            s.info.root = root;
            s.changed = true;
        }
        if *removed {
            s.info.len -= 1;
            s.changed = true;
        }
        r?;
        sh.maybe_spill()
    }

    /// Fills the empty tree `t` from pairs in strictly increasing key order, building it bottom-up
    /// (each page written once). Returns the number of entries.
    pub fn bulk_load<I, K, V>(&mut self, t: Tree, items: I) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut guard = self.shared.borrow_mut();
        let sh = &mut guard.writer(self.serial)?;
        if sh.slot(t)?.info.root != 0 {
            return Err(Error::InvalidInput("bulk load needs an empty tree".into()));
        }
        let mut done = |sh: &mut Writer<'_, F>, _id: u32| sh.spill_over();
        let (root, n) = btree::bulk_build(sh, items, &mut done)?;
        let s = sh.slot(t)?;
        s.info.root = root;
        s.info.len = n;
        s.changed = true;
        Ok(n)
    }

    pub fn cursor(&self, t: Tree) -> Result<Cursor<F>> {
        self.shared.borrow_mut().writer(self.serial)?.slot(t)?;
        Ok(Cursor::new(
            self.shared.clone(),
            Source::Write {
                serial: self.serial,
                idx: t.idx,
            },
        ))
    }

    pub fn range(
        &self,
        t: Tree,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Range<F>> {
        Ok(Range::new(self.cursor(t)?, lower, upper, reverse))
    }

    /// Makes the transaction's changes the committed state (durable on return with
    /// `Durability::Full`). On error nothing of it is committed and the database must be reopened
    /// before the next write (`NEEDS_REOPEN`); reads go on.
    pub fn commit(self) -> Result<CommitInfo> {
        self.shared.borrow_mut().commit(self.serial, true)
    }

    /// Commits like [`WriteTx::commit`], for a caller that has no use for the changed trees'
    /// names: returns the transaction id only.
    pub fn commit_txn(self) -> Result<u64> {
        Ok(self.shared.borrow_mut().commit(self.serial, false)?.txn)
    }

    pub fn rollback(self) {
        // Drop does it.
    }
}

impl<F: BlockFile> Writer<'_, F> {
    /// Tree `t`'s slot in this transaction.
    fn slot(&mut self, t: Tree) -> Result<&mut TreeSlot> {
        if t.serial != self.w.serial {
            return Err(Error::InvalidInput(
                "tree handle from another transaction".into(),
            ));
        }
        match self.w.trees.get_mut(t.idx) {
            Some(s) if !s.dropped => Ok(s),
            Some(s) => Err(Error::NotFound(format!(
                "tree {:?} was dropped",
                s.info.name
            ))),
            None => Err(Error::InvalidInput("bad tree handle".into())),
        }
    }

    /// A handle on a tree newly in this transaction.
    fn handle(&mut self, info: TreeInfo, changed: bool) -> Tree {
        let idx = self.w.trees.len();
        self.w.trees.push(TreeSlot {
            info,
            changed,
            dropped: false,
        });
        Tree {
            serial: self.w.serial,
            idx,
            root: 0,
        }
    }
}
