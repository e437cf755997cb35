//! The state behind every handle on one database ([`Shared`], in an `Rc<RefCell<..>>` that
//! [`Db`], its transactions and cursors hold): the [`Store`], which outlives write
//! transactions (the pager, the committed state and what makes it durable, the readers, the
//! pages waiting to be reused, buffers kept from call to call), and while a write transaction
//! is open, that transaction's [`WriteState`]. Here: opening and ending a write transaction
//! (`begin_write`, `rollback`), the read view of the pages ([`Pages`] for `Shared`, and [`At`]
//! for a read of an older state), and [`Shared::writer`], which hands the write paths a
//! [`Writer`] over both halves.

use std::cell::RefMut;
use std::collections::VecDeque;

use super::catalog::CommittedTrees;
use super::cursor::CursorBufs;
use super::superblock::Run;
use super::writer::{Spare, WriteState, Writer};
use super::{Options, State};
use crate::btree::{Pages, Stack};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::free::FreePages;
use crate::page;
use crate::pager::{IdMap, Page, Pager};

/// The store and, while one is open, the write transaction's state (see the module doc).
pub(crate) struct Shared<F> {
    pub(crate) st: Store<F>,
    /// `Some` from `begin_write` until the transaction commits or rolls back, and only then.
    w: Option<WriteState>,
}

/// Everything of a database that outlives a write transaction.
pub(crate) struct Store<F> {
    pub(crate) pager: Pager<F>,
    pub(super) opts: Options,
    /// The last committed state.
    pub(crate) state: State,
    /// The slot of the last flushed superblock, and of the last written one.
    pub(super) durable_slot: usize,
    pub(super) last_slot: usize,
    pub(super) durable_txn: u64,
    pub(super) next_txn: u64,
    /// Pages written since the last flush, with their checksums: the superblock's commit list.
    pub(super) unflushed: IdMap<u64>,
    /// Open read transactions: (the transaction they read, how many). Few at a time, so a list
    /// (a map type of its own would be a few KB more of wasm).
    pub(super) readers: Vec<(u64, usize)>,
    /// Pages freed by each commit, waiting until no state that may still be read needs them.
    pub(super) pending: VecDeque<(u64, Vec<u32>)>,
    /// The free-page set: loaded by the first write transaction, lent to each while it is
    /// open (`WriteState::free`), None before the first and while one is open.
    pub(super) free: Option<FreePages>,
    /// Why a commit failed: the next write must reopen the database first.
    pub(super) poisoned: Option<String>,
    /// Numbers every transaction, so a handle of an ended one is told apart.
    pub(super) serial: u64,
    pub(super) recovered: Option<String>,
    /// Entries in the commit list of the newest superblock.
    pub(super) last_list: usize,
    /// The last write transaction's maps, emptied, for the next one: a fresh map grows through
    /// several rehashes, which a one-row commit would pay every time.
    pub(super) spare: Option<Spare>,
    /// Buffers of cursors dropped, for the next ones: a point query opens a cursor (a range
    /// over an index, say) and would otherwise allocate its stack and bounds, and free them,
    /// every time.
    pub(super) cursor_bufs: Vec<CursorBufs>,
    /// The catalog entries of the trees the last commit had open, as it wrote them, and of
    /// those earlier commits had open that none has opened since (their entries unchanged,
    /// while no commit wrote the catalog but for the trees it had open), for the next write
    /// transaction to open them without a catalog look-up (a one-row commit opens its table's
    /// tree every time; one in every few opens another). Valid only while the state is that
    /// commit's and the catalog is untouched: any catalog write copies its root, which is
    /// then another page.
    pub(super) committed_trees: Option<CommittedTrees>,
    /// Pages the last commit allocated: how long a run of free pages the next one looks for
    /// (`take_page` in `writer`).
    pub(super) alloc_hint: u32,
    pub(super) alloc_last: u32,
    /// The other slot names a commit later than this store's state, one reported failed
    /// (`Db::open_upto` skipped it): the next commit, or `Db::into_file`, writes over it.
    pub(super) newer_slot: bool,
    /// A volatile file's superblocks are older than the last commit (see `write_back`).
    pub(super) sb_unwritten: bool,
    /// The root bytes of the last commit (`WriteTx::set_root_meta`; trades places with
    /// `WriteState::root_next` at a commit that set them).
    pub(super) root_meta: Vec<u8>,
    /// The transaction whose committed state a read is of (a read transaction's, a cursor's
    /// over one): it sees no changed page of the open write transaction, and pages changed in
    /// place since as `kept` holds them. None: the writer's view. Set only through `At`.
    pub(super) view: Option<u64>,
    /// For each commit of a volatile file that changed pages in place while read transactions
    /// were open, in commit order: its transaction id and those pages as they were before it.
    pub(super) kept: VecDeque<(u64, IdMap<Page>)>,
    pub(super) bufs: Bufs,
}

/// Buffers kept from one call or commit to the next, each taken out while in use and put back.
#[derive(Default)]
pub(super) struct Bufs {
    /// A write's root-to-leaf path, and a cell being built.
    pub(super) path: Vec<(u32, usize)>,
    pub(super) scratch: Vec<u8>,
    /// `btree::update_each`'s buffers (an UPDATE by key makes one call a row).
    pub(super) each: [Vec<u8>; 3],
    /// Commit's: the changed pages' numbers, a run of adjacent pages, the superblock and its
    /// commit list, a catalog entry, the free-tree delta.
    pub(super) ids: Vec<u32>,
    pub(super) run: Vec<u8>,
    pub(super) sb: Vec<u8>,
    pub(super) list: Vec<(u32, u64)>,
    pub(super) runs: Vec<Run>,
    pub(super) entry: Vec<u8>,
    pub(super) delta: Vec<(u32, bool)>,
    /// The page list of the last commit whose freed pages were released, for the next
    /// transaction's `WriteState::freed`.
    pub(super) freed: Vec<u32>,
}

/// A borrow of the shared state for a read at `view` (see `Store::view`), which it resets
/// when it ends, however it ends.
pub(crate) struct At<'a, F: BlockFile>(RefMut<'a, Shared<F>>);

impl<'a, F: BlockFile> At<'a, F> {
    pub(crate) fn new(mut sh: RefMut<'a, Shared<F>>, view: Option<u64>) -> Self {
        sh.st.view = view;
        At(sh)
    }
}

impl<F: BlockFile> Drop for At<'_, F> {
    fn drop(&mut self) {
        self.0.st.view = None;
    }
}

impl<F: BlockFile> std::ops::Deref for At<'_, F> {
    type Target = Shared<F>;
    fn deref(&self) -> &Shared<F> {
        &self.0
    }
}

impl<F: BlockFile> std::ops::DerefMut for At<'_, F> {
    fn deref_mut(&mut self) -> &mut Shared<F> {
        &mut self.0
    }
}

/// The pages as a read sees them: at `Store::view`, or the open write transaction's (the
/// writes themselves go through [`Writer`]).
impl<F: BlockFile> Pages for Shared<F> {
    fn page_size(&self) -> usize {
        self.st.pager.page_size
    }

    fn read(&mut self, id: u32) -> Result<Page> {
        if let Some(p) = self.changed(id) {
            return Ok(p.clone());
        }
        if id < 2 || id >= self.page_limit() {
            return Err(page::corrupt(
                id,
                "is not a page of a tree (outside the page range)",
            ));
        }
        self.st.pager.read(id)
    }

    fn with_page<R>(&mut self, id: u32, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        if let Some(p) = self.changed(id) {
            return Ok(f(p));
        }
        if id < 2 || id >= self.page_limit() {
            return Err(page::corrupt(
                id,
                "is not a page of a tree (outside the page range)",
            ));
        }
        Ok(f(self.st.pager.read_ref(id)?))
    }
}

impl<F: BlockFile> Shared<F> {
    pub(super) fn new(pager: Pager<F>, opts: Options, state: State, slot: usize) -> Self {
        Shared {
            st: Store {
                pager,
                opts,
                state,
                durable_slot: slot,
                last_slot: slot,
                durable_txn: state.txn,
                next_txn: state.txn + 1,
                unflushed: IdMap::default(),
                readers: Vec::new(),
                pending: VecDeque::new(),
                free: None,
                poisoned: None,
                serial: 0,
                recovered: None,
                last_list: 0,
                spare: None,
                cursor_bufs: Vec::new(),
                committed_trees: None,
                sb_unwritten: false,
                alloc_hint: 0,
                newer_slot: false,
                alloc_last: 0,
                root_meta: Vec::new(),
                view: None,
                kept: VecDeque::new(),
                bufs: Bufs::default(),
            },
            w: None,
        }
    }

    /// Page `id` as the current view has it when that is not the committed page in the
    /// cache: the writer's changed copy, or for a read of an older state, the page as
    /// `kept` holds it from before the first later commit that changed it in place.
    #[inline(always)]
    fn changed(&self, id: u32) -> Option<&Page> {
        match self.st.view {
            None => self.w.as_ref().and_then(|w| w.dirty.get(&id)),
            Some(_) if self.st.kept.is_empty() => None,
            Some(txn) => self
                .st
                .kept
                .iter()
                .filter(|(t, _)| *t > txn)
                .find_map(|(_, pages)| pages.get(&id)),
        }
    }

    fn page_limit(&self) -> u32 {
        match &self.w {
            Some(w) => w.state.page_count,
            None => self.st.state.page_count,
        }
    }

    pub(crate) fn has_writer(&self) -> bool {
        self.w.is_some()
    }

    /// The state of the write transaction numbered `serial` if it is the one open.
    #[inline]
    pub(super) fn open_write(&self, serial: u64) -> Option<&WriteState> {
        self.w.as_ref().filter(|w| w.serial == serial)
    }

    /// The open write transaction numbered `serial`, for a change: its state and the store, as
    /// one [`Writer`]. Fails when that transaction has ended.
    #[inline]
    pub(super) fn writer(&mut self, serial: u64) -> Result<Writer<'_, F>> {
        match &mut self.w {
            Some(w) if w.serial == serial => Ok(Writer {
                st: &mut self.st,
                w,
            }),
            _ => Err(ended()),
        }
    }

    /// The open write transaction numbered `serial`'s state alone (what a cursor over one of
    /// its trees asks of it). Fails when that transaction has ended.
    #[inline]
    pub(super) fn write_state(&self, serial: u64) -> Result<&WriteState> {
        self.open_write(serial).ok_or_else(ended)
    }

    /// The free-page set, from the committed free tree.
    fn load_free(&mut self) -> Result<FreePages> {
        let mut set = FreePages::default();
        let mut st = Stack::default();
        let mut ok = st.first(self, self.st.state.free)?;
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack has a leaf");
            let k = page::key(pg, i);
            if k.len() != 4 {
                return Err(Error::Corrupt("free tree key is not a page number".into()));
            }
            set.insert(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
            ok = st.next(self)?;
        }
        Ok(set)
    }

    /// Opens a write transaction; returns its number.
    pub(super) fn begin_write(&mut self) -> Result<u64> {
        if let Some(m) = &self.st.poisoned {
            return Err(Error::NeedsReopen(m.clone()));
        }
        if self.w.is_some() {
            return Err(Error::Busy("a write transaction is already open".into()));
        }
        let mut free = match self.st.free.take() {
            Some(free) => free,
            None => self.load_free()?,
        };
        let st = &mut self.st;
        st.release_pending(&mut free);
        st.release_kept();
        st.serial += 1;
        let spare = st.spare.take().unwrap_or_default();
        self.w = Some(WriteState {
            state: st.state,
            base_page_count: st.state.page_count,
            free,
            dirty: spare.dirty,
            owned: spare.owned,
            freed: std::mem::take(&mut st.bufs.freed),
            delta: spare.delta,
            trees: spare.trees,
            meta_changed: spare.meta_changed,
            seq: 0,
            serial: st.serial,
            last_leaf: spare.last_leaf,
            catalog_written: false,
            root_next: spare.root_next,
            root_set: false,
            run_next: 0,
            lowest_first: false,
        });
        Ok(st.serial)
    }

    /// Ends the open write transaction, if there is one, with none of its changes kept.
    pub(super) fn rollback(&mut self) {
        if let Some(w) = self.w.take() {
            self.st.roll_back(w);
        }
    }

    /// Ends the open write transaction numbered `serial` by its commit (see `Writer::commit`);
    /// a commit that fails rolls it back and leaves the store to be reopened.
    /// `CommitInfo::changed_trees` is left empty unless `names` (a caller that ignores it saves
    /// a string copy a tree).
    pub(super) fn commit(&mut self, serial: u64, names: bool) -> Result<super::CommitInfo> {
        // The state is committed where it lies: moving it out of `self.w` first would copy
        // the whole struct on every commit.
        let Some(w) = self.w.as_mut().filter(|w| w.serial == serial) else {
            return Err(ended());
        };
        match (Writer {
            st: &mut self.st,
            w,
        })
        .commit(names)
        {
            Ok(done) => {
                let info = self.st.committed(w, done);
                self.w = None;
                Ok(info)
            }
            Err(e) => {
                self.st.poisoned = Some(e.to_string());
                if let Some(w) = self.w.take() {
                    self.st.roll_back(w);
                }
                Err(e)
            }
        }
    }
}

fn ended() -> Error {
    Error::InvalidInput("the write transaction has ended".into())
}

impl<F: BlockFile> Store<F> {
    /// Drops the pages `kept` holds for read transactions no longer open.
    pub(super) fn release_kept(&mut self) {
        let oldest = self.readers.iter().map(|&(t, _)| t).min();
        while let Some((t, _)) = self.kept.front() {
            if oldest.is_some_and(|r| r < *t) {
                break;
            }
            self.kept.pop_front();
        }
    }

    /// Moves into `free` the pages of every commit that is durable and older than every open
    /// read transaction.
    fn release_pending(&mut self, free: &mut FreePages) {
        let oldest_reader = self.readers.iter().map(|&(t, _)| t).min();
        while let Some((t, _)) = self.pending.front() {
            let t = *t;
            if t > self.durable_txn || oldest_reader.is_some_and(|r| t > r) {
                break;
            }
            let (_, mut pages) = self.pending.pop_front().expect("invariant: front exists");
            free.extend(pages.iter().copied());
            if pages.capacity() <= 1024 {
                pages.clear();
                self.bufs.freed = pages;
            }
        }
    }

    /// Undoes what write transaction `w` did to the store: pages it took from the free set go
    /// back, pages past the old end are forgotten.
    fn roll_back(&mut self, w: WriteState) {
        let WriteState {
            mut free,
            delta,
            owned,
            base_page_count,
            ..
        } = w;
        for (&id, &add) in &delta {
            if !add && id < base_page_count {
                free.insert(id);
            }
        }
        free.retain(|&id| id < base_page_count);
        for &id in owned.keys() {
            self.unflushed.remove(&id);
            self.pager.forget(id);
        }
        self.free = Some(free);
    }
}
