//! Commit, and the durability of what commits wrote.
//!
//! `Writer::commit` writes the changed trees' roots and counts into the catalog, brings the free
//! tree up to date (a small fixed-point loop, since changing the free tree allocates and frees
//! pages itself), writes every page the transaction owns, then one superblock that names the
//! new roots and lists every page written since the last flush (`list_runs`: in runs of
//! adjacent pages, each with a checksum), then one flush. It hands `Store::committed` what the
//! commit made, which becomes the committed state; the pages the commit freed wait in
//! `Store::pending` until no state that may still be read needs them. `flush`, `mark_durable`
//! and `write_back` (a volatile file's pages and superblocks, when the file is handed back) are
//! here too.

use super::catalog::CommittedTrees;
use super::shared::Store;
use super::superblock::{encode_superblock_into, list_capacity, run_sum};
use super::writer::{Spare, WriteState, Writer};
use super::{CommitInfo, Durability, State};
use crate::btree::{self, Pages, PagesMut};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page;

/// What a commit made, from its last write on: the new state and where its superblock went.
pub(super) struct Done {
    info: CommitInfo,
    state: State,
    slot: usize,
    flushed: bool,
    /// The trees the last commit left cached stay valid (see `Store::committed_trees`).
    keep_cached: bool,
}

impl<F: BlockFile> Writer<'_, F> {
    /// Writes the transaction out and its superblock (see the module doc), flushing with
    /// `Durability::Full`. On success the commit is done and only bookkeeping is left
    /// (`Store::committed`); on error nothing of it is committed. `CommitInfo::changed_trees`
    /// is left empty unless `names`.
    pub(super) fn commit(mut self, names: bool) -> Result<Done> {
        let txn = self.st.next_txn;
        // Whether the entries of the trees the last commit left cached and this transaction
        // did not open stay as they are: the cache is of the state this transaction began
        // from and nothing but this commit's own entries (step 1) writes the catalog.
        let keep_cached = !self.w.catalog_written
            && (self.st.committed_trees.as_ref())
                .is_some_and(|c| c.txn == self.w.state.txn && c.catalog == self.w.state.catalog);
        let mut info = CommitInfo {
            txn,
            changed_trees: Vec::new(),
        };
        // 1. Changed trees into the catalog, each entry encoded into one buffer kept from
        // commit to commit. The name is lent out of its slot for the catalog write (which
        // does not look at the slots).
        let mut entry = std::mem::take(&mut self.st.bufs.entry);
        for i in 0..self.w.trees.len() {
            let t = &mut self.w.trees[i];
            if !t.changed || t.dropped {
                continue;
            }
            t.changed = false;
            t.info.encode_into(&mut entry);
            let name = std::mem::take(&mut t.info.name);
            let r = match self.catalog_entry_in_place(name.as_bytes(), &entry) {
                Ok(true) => Ok(()),
                Ok(false) => self.catalog_put(name.as_bytes(), &entry),
                Err(e) => Err(e),
            };
            if names {
                info.changed_trees.push(name.clone());
            }
            self.w.trees[i].info.name = name;
            r?;
        }
        self.st.bufs.entry = entry;
        if names {
            let w = &*self.w;
            info.changed_trees.extend(
                w.trees
                    .iter()
                    .filter(|t| t.dropped)
                    .map(|t| t.info.name.clone()),
            );
            for name in w.meta_changed.iter() {
                if !info.changed_trees.iter().any(|n| n == name) {
                    info.changed_trees.push(name.to_string());
                }
            }
        }
        // 2. The free tree, until it no longer changes itself.
        let mut rounds = 0;
        let mut delta = std::mem::take(&mut self.st.bufs.delta);
        loop {
            delta.clear();
            delta.extend(self.w.delta.drain());
            if delta.is_empty() {
                break;
            }
            // In page order, so the free tree (and so the file) comes out the same every time.
            sort_delta(&mut delta);
            rounds += 1;
            if rounds > 64 {
                return Err(Error::Corrupt("free tree update does not settle".into()));
            }
            if self.free_delta_in_leaf(&delta)? {
                continue;
            }
            let mut root = self.w.state.free;
            let mut len = self.w.state.free_len;
            let mut path = std::mem::take(&mut self.st.bufs.path);
            let mut scratch = std::mem::take(&mut self.st.bufs.scratch);
            for &(id, add) in &delta {
                let k = id.to_be_bytes();
                let changed = if add {
                    !btree::insert(&mut self, &mut root, &k, &[], &mut path, &mut scratch)?
                } else {
                    btree::remove(&mut self, &mut root, &k, &mut path)?
                };
                if !changed {
                    return Err(page::corrupt(
                        id,
                        "free tree out of step with the allocator",
                    ));
                }
                if add {
                    len += 1;
                } else {
                    len -= 1;
                }
            }
            self.st.bufs.path = path;
            self.st.bufs.scratch = scratch;
            self.w.state.free = root;
            self.w.state.free_len = len;
        }
        self.st.bufs.delta = delta;
        if self.st.pager.volatile && !self.st.readers.is_empty() {
            self.keep_committed(txn)?;
        }
        // 3. Pages, then the superblock, then one flush. Pages this commit freed leave the list:
        // the new state does not need them, and once durable they may be overwritten.
        self.write_dirty()?;
        let (st, w) = (self.st, self.w);
        for id in &w.freed {
            st.unflushed.remove(id);
        }
        let mut state = w.state;
        state.txn = txn;
        if w.root_set {
            // A commit that fails from here on leaves the store to be opened again (poisoned),
            // which reads the root bytes from the file.
            std::mem::swap(&mut st.root_meta, &mut w.root_next);
            w.root_set = false;
        }
        let ps = st.pager.page_size;
        if !st.pager.volatile {
            // (A volatile file's pages are not written, so none waits for a flush.)
            st.list_runs();
            if st.bufs.runs.len() > list_capacity(ps, st.root_meta.len())
                || st.bufs.list.len() * ps > st.opts.list_bytes
            {
                // Too much to name in the superblock: make it (and every earlier commit)
                // durable first; the superblock then names nothing. Two flushes, for big
                // commits only.
                st.pager.file.flush()?;
                st.mark_durable();
                st.list_runs();
            }
        }
        let slot = 1 - st.durable_slot;
        if st.pager.volatile {
            // Nothing reads a volatile file's superblock before it is handed back, which writes
            // the last one (`Store::write_back`).
            st.sb_unwritten = true;
        } else {
            st.write_superblock(slot, &state)?;
        }
        let flushed = st.opts.durability == Durability::Full;
        if flushed {
            st.pager.file.flush()?;
        }
        Ok(Done {
            info,
            state,
            slot,
            flushed,
            keep_cached,
        })
    }

    /// Applies `delta` to a free tree that is one leaf and stays one (or is empty and only
    /// gains pages, as many as one leaf holds): each page's cell is
    /// removed or added in the leaf directly, with no per-page path copy, search from the root
    /// or underflow check (a small commit changes a handful of pages and each shows up twice in
    /// the delta, allocated and freed). False, with nothing changed: the tree is not one leaf,
    /// or might not stay one; the caller takes the general path.
    fn free_delta_in_leaf(&mut self, delta: &[(u32, bool)]) -> Result<bool> {
        // A free page's cell: its 4-byte number as the key, an empty value.
        const CELL: usize = 6;
        debug_assert_eq!(page::leaf_cell_size(4, 0), CELL);
        let (mut root, mut len) = (self.w.state.free, self.w.state.free_len);
        let ps = self.st.pager.page_size;
        let adds = delta.iter().filter(|&&(_, a)| a).count();
        if root == 0 {
            // An empty free tree taking pages that fit in one leaf (a dropped table's, say):
            // that leaf, as the general insert's first page would be, filled here instead of
            // by one insert from the root per page.
            if adds < delta.len() || adds * (CELL + 2) > page::capacity(ps) {
                return Ok(false);
            }
            root = self.alloc()?;
            page::init(self.page_mut(root)?, page::KIND_LEAF);
        }
        let fits = self.with_page(root, |pg| {
            page::kind(pg) == page::KIND_LEAF
                && page::used(pg) + adds * (CELL + 2) <= page::capacity(ps)
        })?;
        if !fits {
            return Ok(false);
        }
        // The leaf is copied first when this transaction does not own it yet; the copy changes
        // the delta, which the caller's next round applies (a volatile file's leaf is changed
        // under its own number instead: `page_mut`).
        let leaf = btree::cow(self, root)?;
        let pg = self.page_mut(leaf)?;
        let mut cell = [0u8; CELL];
        for &(id, add) in delta {
            let k = id.to_be_bytes();
            match (search_id(pg, id), add) {
                (Ok(i), false) => {
                    page::remove(pg, i);
                    len -= 1;
                }
                (Err(i), true) => {
                    page::write_leaf_cell(&mut cell, &k, 0, &[]);
                    let off = page::reserve(pg, i, CELL)
                        .expect("invariant: room checked before the first change");
                    pg[off..off + CELL].copy_from_slice(&cell);
                    len += 1;
                }
                _ => {
                    return Err(page::corrupt(
                        id,
                        "free tree out of step with the allocator",
                    ))
                }
            }
        }
        // A volatile file keeps an emptied leaf as the root (changed in place, it can be the
        // page the last round allocated to hold the free tree): freed, it can be the one free
        // page, which the next round would list in a new leaf taken from the free pages, that
        // is, in itself, and the round after remove again, without end.
        let new_root = if page::count(pg) == 0 && !self.st.pager.volatile {
            self.free(leaf)?;
            0
        } else {
            leaf
        };
        self.w.last_leaf.forget();
        self.w.state.free = new_root;
        self.w.state.free_len = len;
        Ok(true)
    }
}

impl<F: BlockFile> Store<F> {
    /// Makes what `Writer::commit` did the committed state, and keeps the transaction's maps
    /// and buffers for the next one. Cannot fail: the commit is done.
    pub(super) fn committed(&mut self, w: &mut WriteState, done: Done) -> CommitInfo {
        let Done {
            info,
            state,
            slot,
            flushed,
            keep_cached,
        } = done;
        let mut infos = match self.committed_trees.take() {
            Some(c) => c.infos,
            None => Vec::new(),
        };
        if !keep_cached {
            infos.clear();
        }
        // This commit's trees last: the next transaction most likely opens them again, and
        // looks from the end.
        infos.extend((w.trees.drain(..)).filter(|t| !t.dropped).map(|t| t.info));
        self.committed_trees = Some(CommittedTrees {
            txn: state.txn,
            catalog: state.catalog,
            infos,
        });
        self.state = state;
        self.next_txn = state.txn + 1;
        self.last_slot = slot;
        if flushed {
            self.mark_durable();
        }
        // Its superblock went over a failed commit's, if one was left.
        self.newer_slot = false;
        // The fewer of the last two commits' page counts: one that split a node and took a
        // page or two more does not make the next look for a run it will not fill.
        let n = w.owned.len() as u32;
        self.alloc_hint = n.min(self.alloc_last);
        self.alloc_last = n;
        self.spare = Spare::keep(w);
        self.free = Some(std::mem::take(&mut w.free));
        let freed = std::mem::take(&mut w.freed);
        if !freed.is_empty() {
            self.pending.push_back((state.txn, freed));
        }
        info
    }

    /// Sorts the pages written since the last flush into `list` and names them in `runs` of
    /// adjacent pages: the commit list.
    fn list_runs(&mut self) {
        let (list, runs) = (&mut self.bufs.list, &mut self.bufs.runs);
        list.clear();
        list.extend(self.unflushed.iter().map(|(&k, &v)| (k, v)));
        crate::sort::sort(list);
        runs.clear();
        for &(id, sum) in list.iter() {
            match runs.last_mut() {
                Some(run) if run.0.checked_add(run.1) == Some(id) => {
                    run.1 += 1;
                    run.2 = run_sum(run.2, sum);
                }
                _ => runs.push((id, 1, sum)),
            }
        }
    }

    /// Writes `state`'s superblock into `slot`, naming the runs [`Store::list_runs`] made.
    fn write_superblock(&mut self, slot: usize, state: &State) -> Result<()> {
        let ps = self.pager.page_size;
        let mut sb = std::mem::take(&mut self.bufs.sb);
        encode_superblock_into(&mut sb, ps, slot, state, &self.bufs.runs, &self.root_meta);
        let r = self.pager.file.write((slot * ps) as u64, &sb);
        self.bufs.sb = sb;
        self.last_list = self.bufs.runs.len();
        r
    }

    /// Brings a volatile file up to the last commit: its unwritten pages, then its superblock in
    /// both slots (nothing to fall back to in memory, and neither slot then names a state whose
    /// pages later commits reused). A durable file whose other slot still names a commit
    /// reported failed (`newer_slot`) gets the last commit's superblock there too, flushed: a
    /// file handed back holds the last commit that succeeded and nothing newer.
    pub(super) fn write_back(&mut self) -> Result<()> {
        if !self.pager.volatile {
            if self.newer_slot && self.poisoned.is_none() {
                self.unflushed.clear();
                self.list_runs();
                let state = self.state;
                self.write_superblock(1 - self.durable_slot, &state)?;
                self.pager.file.flush()?;
                self.newer_slot = false;
            }
            return Ok(());
        }
        self.pager.write_back()?;
        if self.sb_unwritten {
            self.unflushed.clear();
            self.list_runs();
            let state = self.state;
            self.write_superblock(0, &state)?;
            self.write_superblock(1, &state)?;
            self.sb_unwritten = false;
        }
        Ok(())
    }

    fn mark_durable(&mut self) {
        self.unflushed.clear();
        self.durable_slot = self.last_slot;
        self.durable_txn = self.state.txn;
    }

    /// Makes every commit so far durable; a flush that fails leaves the store to be reopened.
    pub(super) fn flush(&mut self) -> Result<()> {
        if let Err(e) = self.pager.file.flush() {
            self.poisoned = Some(e.to_string());
            return Err(e);
        }
        self.mark_durable();
        Ok(())
    }
}

/// [`page::search`] for page number `id` in a free-tree node, whose keys are page numbers in
/// big-endian order: a byte-string comparison is a number comparison, done as one.
fn search_id(pg: &[u8], id: u32) -> std::result::Result<usize, usize> {
    let (mut lo, mut hi) = (0, page::count(pg));
    while lo < hi {
        let mid = (lo + hi) / 2;
        let Ok(k) = <[u8; 4]>::try_from(page::key(pg, mid)) else {
            // Not a page number (a damaged tree): the byte-string search says where it goes.
            return page::search(pg, &id.to_be_bytes());
        };
        match u32::from_be_bytes(k).cmp(&id) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// Sorts a free-tree delta by page (each page is in it once). A small commit's delta is a
/// handful of pages, which an insertion sort orders in fewer comparisons than the heapsort of
/// `crate::sort`; a long one takes that.
fn sort_delta(delta: &mut [(u32, bool)]) {
    if delta.len() > 16 {
        return crate::sort::sort_by(delta, |a, b| a.0 < b.0);
    }
    for i in 1..delta.len() {
        let mut j = i;
        while j > 0 && delta[j].0 < delta[j - 1].0 {
            delta.swap(j, j - 1);
            j -= 1;
        }
    }
}
