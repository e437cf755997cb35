//! The open write transaction: its state ([`WriteState`], which exists from `begin_write` to
//! the commit or rollback and only then) and [`Writer`], the store and that state borrowed
//! together, through which every change goes. `Writer` is the B+tree's [`PagesMut`]: pages are
//! allocated from the free set the transaction holds, copied before they change, freed into
//! the free-tree delta, and written out early (`maybe_spill`) or at commit (`write_dirty`,
//! one write per run of adjacent pages). `commit` and the catalog's changes are `Writer`'s too
//! (`commit.rs`, `catalog.rs`).

use std::collections::hash_map::Entry;
use std::rc::Rc;

use super::shared::Store;
use super::{State, TreeInfo};
use crate::btree::{self, Pages, PagesMut};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::free::FreePages;
use crate::page;
use crate::pager::{IdMap, Page};

/// A tree the transaction opened, created or dropped.
pub(super) struct TreeSlot {
    pub(super) info: TreeInfo,
    pub(super) changed: bool,
    pub(super) dropped: bool,
}

/// The state of the one open write transaction.
pub(super) struct WriteState {
    /// The state it makes: roots, counts and page count as its changes leave them.
    pub(super) state: State,
    /// The page count it began with (pages past it are its own, forgotten by a rollback).
    pub(super) base_page_count: u32,
    /// The free-page set, lent by the store for the transaction and handed back at its end.
    pub(super) free: FreePages,
    pub(super) dirty: IdMap<Page>,
    /// Pages this transaction allocated (the value unused: a map of the layout of the
    /// others, whose code the module then holds once; docs/size.md).
    pub(super) owned: IdMap<bool>,
    /// Pages of the committed state this transaction freed.
    pub(super) freed: Vec<u32>,
    /// Pending changes to the free tree: page -> true (add) / false (remove).
    pub(super) delta: IdMap<bool>,
    /// The trees it opened, created or dropped (found by name in the list: a transaction
    /// opens a few, and a map of names would be code of its own in the wasm module).
    pub(super) trees: Vec<TreeSlot>,
    /// Trees whose catalog entries `WriteTx::set_meta_of` changed (for `CommitInfo`): their
    /// names one after the other, and where each ends (buffers kept from one transaction to
    /// the next: a caller sets the same tree's bytes on every commit).
    pub(super) meta_changed: MetaChanged,
    /// Bumped by every change, so a cursor knows to find its place again.
    pub(super) seq: u64,
    pub(super) serial: u64,
    /// Where the last write landed, for the next one (see `btree::LastLeaf`).
    pub(super) last_leaf: btree::LastLeaf,
    /// The catalog was written (a volatile file's catalog root keeps its number, so the
    /// last commit's tree entries no longer tell what it holds).
    pub(super) catalog_written: bool,
    /// The root bytes this transaction set, if `root_set` (a buffer that trades places with
    /// `Store::root_meta` at commit: a caller setting them every commit allocates nothing, and
    /// a transaction that does not set them pays for nothing).
    pub(super) root_next: Vec<u8>,
    pub(super) root_set: bool,
    /// The page after the last one allocated, taken next if it is free (or the end of the
    /// file), so that a transaction's pages lie in one run: one write call at commit
    /// (`take_page`). 0 before the first allocation (page 0 is a superblock, never free).
    pub(super) run_next: u32,
    /// Take the lowest free page every time, never a run or the end of the file while a page
    /// is free (vacuum, which moves pages below a cutoff).
    pub(super) lowest_first: bool,
}

impl WriteState {
    /// Where the tree named `name` is in `trees`, unless it is not there or was dropped (a
    /// name has at most one slot not dropped: `open_tree` finds it before it adds another).
    /// A transaction opens few trees: comparing their names costs less than hashing one.
    pub(super) fn live_tree(&self, name: &str) -> Option<usize> {
        self.trees
            .iter()
            .rposition(|s| !s.dropped && s.info.name == name)
    }
}

/// [`WriteState`]'s maps and buffers, kept empty between write transactions.
#[derive(Default)]
pub(super) struct Spare {
    pub(super) dirty: IdMap<Page>,
    pub(super) owned: IdMap<bool>,
    pub(super) delta: IdMap<bool>,
    pub(super) trees: Vec<TreeSlot>,
    pub(super) last_leaf: btree::LastLeaf,
    pub(super) meta_changed: MetaChanged,
    pub(super) root_next: Vec<u8>,
}

impl Spare {
    /// Keeps `w`'s maps, emptied, unless a big transaction grew them (they would hold that
    /// memory for as long as the database is open).
    pub(super) fn keep(w: &mut WriteState) -> Option<Spare> {
        if w.dirty.capacity() > 1024
            || w.owned.capacity() > 1024
            || w.delta.capacity() > 1024
            || w.trees.capacity() > 1024
        {
            return None;
        }
        let mut s = Spare {
            dirty: std::mem::take(&mut w.dirty),
            owned: std::mem::take(&mut w.owned),
            delta: std::mem::take(&mut w.delta),
            trees: std::mem::take(&mut w.trees),
            last_leaf: std::mem::take(&mut w.last_leaf),
            meta_changed: std::mem::take(&mut w.meta_changed),
            root_next: std::mem::take(&mut w.root_next),
        };
        s.meta_changed.clear();
        s.dirty.clear();
        s.owned.clear();
        s.delta.clear();
        s.trees.clear();
        s.last_leaf.forget();
        s.root_next.clear();
        Some(s)
    }
}

/// Names of trees, kept in one buffer.
#[derive(Default)]
pub(super) struct MetaChanged {
    names: String,
    ends: Vec<usize>,
}

impl MetaChanged {
    pub(super) fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter())
            .map(|(a, &b)| &self.names[a..b])
    }

    /// Adds `name` unless it is there.
    pub(super) fn add(&mut self, name: &str) {
        if !self.iter().any(|n| n == name) {
            self.names.push_str(name);
            self.ends.push(self.names.len());
        }
    }

    fn clear(&mut self) {
        self.names.clear();
        self.ends.clear();
    }
}

/// The store and the open write transaction's state, borrowed together for a change
/// (`Shared::writer`).
pub(super) struct Writer<'a, F> {
    pub(super) st: &'a mut Store<F>,
    pub(super) w: &'a mut WriteState,
}

/// The pages as the write transaction sees them: its changed copies first.
impl<F: BlockFile> Pages for Writer<'_, F> {
    fn page_size(&self) -> usize {
        self.st.pager.page_size
    }

    fn read(&mut self, id: u32) -> Result<Page> {
        if let Some(p) = self.w.dirty.get(&id) {
            return Ok(p.clone());
        }
        if id < 2 || id >= self.w.state.page_count {
            return Err(page::corrupt(
                id,
                "is not a page of a tree (outside the page range)",
            ));
        }
        self.st.pager.read(id)
    }

    fn with_page<R>(&mut self, id: u32, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        if let Some(p) = self.w.dirty.get(&id) {
            return Ok(f(p));
        }
        if id < 2 || id >= self.w.state.page_count {
            return Err(page::corrupt(
                id,
                "is not a page of a tree (outside the page range)",
            ));
        }
        Ok(f(self.st.pager.read_ref(id)?))
    }
}

impl<F: BlockFile> PagesMut for Writer<'_, F> {
    fn last_leaf(&mut self) -> Option<&mut btree::LastLeaf> {
        Some(&mut self.w.last_leaf)
    }

    /// Owned by the transaction, or any page of a volatile file (`page_mut`).
    fn is_owned(&self, id: u32) -> bool {
        self.st.pager.volatile || self.w.owned.contains_key(&id)
    }

    fn page_mut(&mut self, id: u32) -> Result<&mut Vec<u8>> {
        let (st, w) = (&mut *self.st, &mut *self.w);
        let p = match w.dirty.entry(id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) if w.owned.contains_key(&id) => {
                // A page spilled earlier in this transaction: from the cache if it is still
                // there.
                e.insert(match st.pager.take(id) {
                    Some(p) => p,
                    None => st.pager.read_uncached(id)?,
                })
            }
            Entry::Vacant(e) if st.pager.volatile => {
                // A committed page of a volatile file is changed under its own number, in a
                // copy: the cache (or the file) keeps the committed bytes for read
                // transactions and for a rollback until the commit replaces them
                // (`keep_committed` keeps them for readers of older states after it). Copying
                // it to a new page instead would change its parent, the parent's parent, the
                // catalog entry and the free tree, and bring nothing a volatile file can use:
                // no superblock names the committed state before the file is handed back, and
                // no crash can tear it.
                if id < 2 || id >= w.state.page_count {
                    return Err(page::corrupt(
                        id,
                        "is not a page of a tree (outside the page range)",
                    ));
                }
                let copy = match st.pager.spare_page() {
                    Some(mut p) => {
                        let b = Rc::get_mut(&mut p)
                            .expect("invariant: nothing else holds a spare page");
                        b.copy_from_slice(st.pager.read_ref(id)?);
                        p
                    }
                    None => Rc::new(st.pager.read_ref(id)?.to_vec()),
                };
                e.insert(copy)
            }
            Entry::Vacant(_) => {
                return Err(Error::Corrupt(format!(
                    "page {id} changed without being copied first"
                )));
            }
        };
        w.seq += 1;
        Ok(Rc::make_mut(p))
    }

    fn alloc(&mut self) -> Result<u32> {
        self.alloc_holding(None)
    }

    fn alloc_copy(&mut self, content: &[u8]) -> Result<u32> {
        debug_assert_eq!(
            content.len(),
            self.st.pager.page_size,
            "a page copy is one page"
        );
        self.alloc_holding(Some(content))
    }

    fn free(&mut self, id: u32) -> Result<()> {
        let (st, w) = (&mut *self.st, &mut *self.w);
        w.seq += 1;
        w.last_leaf.forget();
        if w.owned.remove(&id).is_some() {
            if let Some(p) = w.dirty.remove(&id) {
                st.pager.keep_spare(p);
            }
            st.unflushed.remove(&id);
            st.pager.forget(id);
            delta_set(&mut w.delta, id, true);
            w.free.insert(id);
        } else {
            match w.delta.entry(id) {
                Entry::Occupied(_) => return Err(page::corrupt(id, "freed twice")),
                Entry::Vacant(e) => {
                    e.insert(true);
                }
            }
            w.freed.push(id);
        }
        Ok(())
    }
}

impl<F: BlockFile> Writer<'_, F> {
    /// A fresh owned page holding `content` (a copy of the page it replaces: straight in, not
    /// over a zeroed page), or zeroes. In a page the cache let go of when there is one
    /// (`Pager::spare_page`), so a small commit allocates none.
    fn alloc_holding(&mut self, content: Option<&[u8]>) -> Result<u32> {
        let (st, w) = (&mut *self.st, &mut *self.w);
        w.last_leaf.forget();
        let id = take_page(w, st.alloc_hint, st.pager.volatile)?;
        w.owned.insert(id, true);
        let page = match st.pager.spare_page() {
            Some(mut p) => {
                let b = Rc::get_mut(&mut p).expect("invariant: nothing else holds a spare page");
                match content {
                    Some(c) => b.copy_from_slice(c),
                    None => b.fill(0),
                }
                p
            }
            None => Rc::new(match content {
                Some(c) => c.to_vec(),
                None => vec![0u8; st.pager.page_size],
            }),
        };
        w.dirty.insert(id, page);
        Ok(id)
    }

    /// The pages the transaction changed that it allocated (`owned`) or, else, that it
    /// changed under their own numbers, in `bufs.ids`' buffer (taken: the caller gives it back).
    fn changed_ids(&mut self, owned: bool) -> Vec<u32> {
        let w = &*self.w;
        let mut ids = std::mem::take(&mut self.st.bufs.ids);
        ids.clear();
        ids.extend(
            w.dirty
                .keys()
                .copied()
                .filter(|id| w.owned.contains_key(id) == owned),
        );
        ids
    }

    /// Keeps, for the read transactions open at commit `txn` of a volatile file, the committed
    /// bytes of the pages the commit changed under their own numbers (changed, not owned),
    /// which `write_dirty` is about to replace in the cache.
    pub(super) fn keep_committed(&mut self, txn: u64) -> Result<()> {
        let ids = self.changed_ids(false);
        let mut pages = IdMap::default();
        let st = &mut *self.st;
        let r = ids.iter().try_for_each(|&id| -> Result<()> {
            pages.insert(id, st.pager.read(id)?);
            Ok(())
        });
        st.bufs.ids = ids;
        r?;
        if !pages.is_empty() {
            st.kept.push_back((txn, pages));
        }
        Ok(())
    }

    /// Spills the changed pages to the file when there are too many to hold (they go to free
    /// places, so writing them early is harmless; they stay owned and are rewritten if changed).
    pub(super) fn maybe_spill(&mut self) -> Result<()> {
        if self.w.dirty.len() <= self.st.opts.dirty_pages {
            return Ok(());
        }
        if self.st.pager.volatile {
            // Only pages the transaction allocated: a committed page changed in place must
            // stay out of the cache, which holds its committed bytes, until the commit.
            let txn = self.w.state.txn.max(self.st.next_txn);
            let ids = self.changed_ids(true);
            for &id in &ids {
                let mut p = self.w.dirty.remove(&id).expect("invariant: listed");
                page::put_u64(Rc::make_mut(&mut p).as_mut_slice(), 8, txn);
                self.st.pager.cache_put_unwritten(id, p)?;
            }
            self.st.bufs.ids = ids;
            return Ok(());
        }
        self.write_dirty()
    }

    /// Writes the changed pages out when more than `Options::dirty_pages` are held (the
    /// bound a long `update_each` or `bulk_load` keeps to as it goes).
    pub(super) fn spill_over(&mut self) -> Result<()> {
        if self.w.dirty.len() > self.st.opts.dirty_pages {
            self.write_dirty()?;
        }
        Ok(())
    }

    /// Writes every changed page, one `write` call per run of adjacent page numbers (a write
    /// call costs 30-50 us on OPFS whatever its size, so runs matter more than bytes).
    pub(super) fn write_dirty(&mut self) -> Result<()> {
        let (st, w) = (&mut *self.st, &mut *self.w);
        let txn = w.state.txn.max(st.next_txn);
        if st.pager.volatile {
            // Into the cache, unwritten: the file gets them when they are evicted or handed
            // back (`Pager::write_back`). In no particular order, as nothing is written.
            for (id, mut p) in w.dirty.drain() {
                page::put_u64(Rc::make_mut(&mut p).as_mut_slice(), 8, txn);
                st.pager.cache_put_unwritten(id, p)?;
            }
            return Ok(());
        }
        let mut ids = std::mem::take(&mut st.bufs.ids);
        ids.clear();
        ids.extend(w.dirty.keys().copied());
        crate::sort::sort(&mut ids);
        let ps = st.pager.page_size;
        let mut run = std::mem::take(&mut st.bufs.run);
        let r = self.write_runs(&ids, txn, ps, &mut run);
        self.st.bufs.ids = ids;
        self.st.bufs.run = run;
        r
    }

    fn write_runs(&mut self, ids: &[u32], txn: u64, ps: usize, run: &mut Vec<u8>) -> Result<()> {
        let (st, w) = (&mut *self.st, &mut *self.w);
        let mut i = 0;
        while i < ids.len() {
            let start = ids[i];
            let mut j = i;
            while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 && (j + 1 - i) * ps < (1 << 20) {
                j += 1;
            }
            if i == j {
                // A page alone (most pages of a small commit) is written from where it lies.
                let mut p = w.dirty.remove(&start).expect("invariant: listed");
                let buf = Rc::make_mut(&mut p);
                let sum = crate::pager::stamp(start, buf, txn);
                st.pager.file.write(start as u64 * ps as u64, buf)?;
                st.unflushed.insert(start, sum);
                st.pager.cache_put(start, p)?;
                i += 1;
                continue;
            }
            run.clear();
            for &id in &ids[i..=j] {
                let mut p = w.dirty.remove(&id).expect("invariant: listed");
                let buf = Rc::make_mut(&mut p);
                let sum = crate::pager::stamp(id, buf, txn);
                run.extend_from_slice(buf);
                st.unflushed.insert(id, sum);
                st.pager.cache_put(id, p)?;
            }
            st.pager.file.write(start as u64 * ps as u64, run)?;
            i = j + 1;
        }
        Ok(())
    }
}

/// The page a transaction allocates next. A small commit writes few pages, and on OPFS each
/// write call costs more than its bytes, so a transaction takes its pages as one run where it
/// can, which commit writes in one call: the page after the last one it took, if that is free
/// (or the end of the file); else the lowest run of free pages as long as recent commits
/// allocated (`hint`); else, while the free pages are few (`RUN_SLACK` and a sixty-fourth of
/// the file), the end of the file: a one-row commit then alternates between two runs, where
/// scattered free pages would keep it at one call a page for good. With more free pages than
/// that and none in a long enough run, the longest of the lowest runs. So the free pages left
/// in short runs are bounded, and vacuum takes the lowest free page every time
/// (`WriteState::lowest_first`). A volatile file writes nothing at commit: lowest first, for
/// the most compact image.
fn take_page(w: &mut WriteState, hint: u32, volatile: bool) -> Result<u32> {
    let end = w.state.page_count;
    let grow = |w: &mut WriteState| -> Result<u32> {
        w.state.page_count = end
            .checked_add(1)
            .ok_or_else(|| Error::TooLarge("the file would pass 2^32 pages".into()))?;
        w.run_next = end.saturating_add(1);
        Ok(end)
    };
    let take = |w: &mut WriteState, id: u32| -> u32 {
        // Every allocatable page is in the free tree (or about to be added to it).
        w.free.remove(&id);
        delta_set(&mut w.delta, id, false);
        w.run_next = id.saturating_add(1);
        id
    };
    if w.lowest_first || volatile {
        return match w.free.first() {
            Some(id) => Ok(take(w, id)),
            None => grow(w),
        };
    }
    let next = w.run_next;
    if next != 0 {
        if next == end {
            return grow(w);
        }
        if w.free.contains(&next) {
            return Ok(take(w, next));
        }
    }
    if let Some(id) = w.free.first_run(hint.clamp(2, RUN_MAX)) {
        return Ok(take(w, id));
    }
    if w.free.len() as u32 <= RUN_SLACK + end / 64 {
        return grow(w);
    }
    // Many free pages, none in a run as long as wanted: the longest run among the lowest few
    // (the fewest write calls, and the neighbours of the pages this frees are likelier free).
    match w.free.longest_run(RUN_SCAN) {
        Some(id) => Ok(take(w, id)),
        None => grow(w),
    }
}

/// How many runs of free pages a transaction looks through for the longest, when none is as
/// long as it wants.
const RUN_SCAN: usize = 64;

/// The longest run a transaction looks for before taking its first page.
const RUN_MAX: u32 = 16;

/// Free pages the file may hold beside `page_count / 64` and still grow for a run.
const RUN_SLACK: u32 = 16;

/// Records a change to the free tree; an add and a remove of the same page cancel.
pub(super) fn delta_set(delta: &mut IdMap<bool>, id: u32, add: bool) {
    match delta.entry(id) {
        Entry::Occupied(e) if *e.get() != add => {
            e.remove();
        }
        Entry::Occupied(mut e) => {
            e.insert(add);
        }
        Entry::Vacant(e) => {
            e.insert(add);
        }
    }
}
