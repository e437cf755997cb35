//! The database: transactions over the pager and the trees, the catalog, commit and open.
//!
//! **Commit** (`Shared::commit`): write the changed trees' roots into the catalog, bring the free
//! tree up to date (a small fixed-point loop, since changing the free tree allocates and frees
//! pages itself), write every page this transaction owns, then one superblock that names the new
//! roots and lists every page written since the last flush (in runs of adjacent pages, each with
//! a checksum), then one flush.
//! A crash that keeps the superblock but loses a page is caught at open by that list, and the
//! other slot (the last flushed superblock, never overwritten before the next flush) wins.
//!
//! **Page reuse**: a page freed by commit `T` becomes allocatable only once `T` is durable (so
//! no fallback superblock still needs it) and no open read snapshot is older than `T`.
//!
//! **Life of a write**, from the SQL layer's call to the disk:
//! 1. [`Db::begin_write`] → `Shared::begin_write`: loads the free-page set on first use
//!    (`load_free`), releases pages no snapshot needs (`release_pending`), opens the `W` state.
//! 2. [`WriteTx::insert`] → `btree::insert`: `owned_leaf` starts from the leaf the previous
//!    write used when the key falls in its range (`btree::LastLeaf`); otherwise `cow_path`
//!    copies each page on the root-to-leaf path that this transaction does not own
//!    (`Pages::alloc_copy` takes the lowest free page, `Pages::free` queues the old one; over a
//!    volatile file nothing is copied to a new page: `Shared::page_mut` changes a copy kept
//!    under the page's own number, which read transactions do not see, `Shared::changed`). The
//!    cell goes in with `page::reserve` (a value of the same size is rewritten in place), and
//!    `fix_up` carries splits (at the tree's right edge, the new node starts with the new cell
//!    alone) or underflows (`rebalance`) back to the root. `maybe_spill` writes pages out early
//!    when more than `Options::dirty_pages` are held. Inside the leaf, `search_leaf` tries the
//!    slot the previous write there used first (and the one after it: writes in key order).
//!    [`WriteTx::update_each`] instead walks a range and rewrites each value it changes where
//!    it is (`btree::update_each`), copying only the leaves it changes.
//! 3. [`WriteTx::commit`] → `Shared::commit_inner`: changed roots and counts into the catalog
//!    (`catalog_put`), the free tree brought up to date until it stops changing itself
//!    (`free_delta_in_leaf` while it is one leaf), `write_dirty` (one write call per run of
//!    adjacent pages), then `encode_superblock_into` the slot that is not the last durable one,
//!    then one flush (`Durability::Full`). Over a volatile file (memory) `write_dirty` only
//!    hands the pages to the cache unwritten and no superblock is written: `Shared::write_back`
//!    writes both, with their checksums, when [`Db::into_file`] hands the file back.
//! 4. Open ([`Db::open`]) later reads both superblocks, `verify_list` on the newer one, and the
//!    catalog root.

use std::cell::{RefCell, RefMut};
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::ops::Bound;
use std::rc::Rc;

use crate::btree::{self, Each, Pages, Replaced, Rewrite, Seek, Stack};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::free::FreePages;
use crate::hash::xxh64;
use crate::page::{self, LeafValue};
use crate::pager::{IdMap, Page, Pager};

pub const MAGIC: [u8; 8] = *b"cairnDB\0";
pub const FORMAT_VERSION: u32 = 4;
/// Where the commit list starts: after the root bytes' length.
const SB_LIST: usize = 68;
/// A commit list entry: a run of adjacent pages (first, count, checksum).
const ENTRY: usize = 16;

/// A commit list entry: a run of `count` adjacent pages from `first`, and its checksum
/// ([`run_sum`] of the pages' own).
type Run = (u32, u32, u64);

/// A run's checksum, folded page by page from the pages' own checksums in page order: the
/// first page's, then `(sum ^ next).wrapping_mul(RUN_MIX)` for each page after it. A run of
/// one page has that page's checksum; any page of another write changes the result (each
/// step is a bijection of the sum so far).
fn run_sum(sum: u64, next: u64) -> u64 {
    (sum ^ next).wrapping_mul(RUN_MIX)
}
const RUN_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// When a commit is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `commit` returns after the pages and the superblock are flushed (one flush).
    Full,
    /// `commit` writes but does not flush; [`Db::flush`] (or a commit too large for the
    /// superblock's page list) makes everything so far durable. A crash loses a suffix of the
    /// relaxed commits, never a middle one.
    Relaxed,
}

/// Settings. The defaults: 4 KiB pages, a 2048-page cache (8 MiB of page bytes, plus ~40 bytes
/// of bookkeeping a page), full durability, and at most 8192 changed pages (32 MiB) held in memory
/// by a write transaction before they are written out early (to free places, so early writes are
/// harmless; a spilled page changed again is read back; over a volatile file, only pages the
/// transaction allocated spill: a committed page it changes under its own number stays
/// held until the commit). Memory is therefore bounded by
/// `(cache_pages + dirty_pages) * page_size` plus one root-to-leaf path per open cursor, whatever
/// the file size. A commit's superblock names at most `list_bytes` (4 MiB) of the pages written
/// since the last flush, which is what an open after a crash reads to check them; a commit with
/// more flushes its pages first (two flushes instead of one).
#[derive(Debug, Clone)]
pub struct Options {
    pub page_size: usize,
    pub cache_pages: usize,
    pub durability: Durability,
    pub dirty_pages: usize,
    pub list_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 4096,
            cache_pages: 2048,
            durability: Durability::Full,
            dirty_pages: 8192,
            list_bytes: 4 << 20,
        }
    }
}

/// What a tree is for. An index names the table tree its entries are derived from, which is what
/// lets [`Db::check_with`] compare the two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeKind {
    Table,
    Index { table: String },
}

/// A tree as the catalog records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeInfo {
    pub name: String,
    pub kind: TreeKind,
    /// Number of entries.
    pub len: u64,
    /// Bytes owned by the caller (the SQL layer's schema for this tree).
    pub meta: Vec<u8>,
    pub(crate) root: u32,
}

impl TreeInfo {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v);
        v
    }

    /// [`TreeInfo::encode`] into `v` (emptied first).
    pub(crate) fn encode_into(&self, v: &mut Vec<u8>) {
        let (k, t) = match &self.kind {
            TreeKind::Table => (0u8, &[][..]),
            TreeKind::Index { table } => (1u8, table.as_bytes()),
        };
        v.clear();
        v.extend_from_slice(&self.root.to_le_bytes());
        v.extend_from_slice(&self.len.to_le_bytes());
        v.push(k);
        v.extend_from_slice(&(t.len() as u16).to_le_bytes());
        v.extend_from_slice(t);
        v.extend_from_slice(&self.meta);
    }

    pub(crate) fn decode(name: &[u8], v: &[u8]) -> Result<TreeInfo> {
        let bad = || {
            Error::Corrupt(format!(
                "catalog entry {:?} is malformed",
                String::from_utf8_lossy(name)
            ))
        };
        if v.len() < 15 {
            return Err(bad());
        }
        let root = page::get_u32(v, 0);
        let len = page::get_u64(v, 4);
        let tlen = page::get_u16(v, 13);
        if v.len() < 15 + tlen {
            return Err(bad());
        }
        let table = String::from_utf8(v[15..15 + tlen].to_vec()).map_err(|_| bad())?;
        let kind = match v[12] {
            0 => TreeKind::Table,
            1 => TreeKind::Index { table },
            _ => return Err(bad()),
        };
        Ok(TreeInfo {
            name: String::from_utf8(name.to_vec()).map_err(|_| bad())?,
            kind,
            len,
            meta: v[15 + tlen..].to_vec(),
            root,
        })
    }
}

/// What a commit changed: for live queries, which re-run what read the trees named here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The transaction id the commit got.
    pub txn: u64,
    /// Names of the trees it changed (written, created or dropped), in no particular order.
    pub changed_trees: Vec<String>,
}

/// The roots and counts a superblock names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub txn: u64,
    pub page_count: u32,
    pub catalog: u32,
    pub free: u32,
    pub catalog_len: u64,
    pub free_len: u64,
}

struct TreeSlot {
    info: TreeInfo,
    changed: bool,
    dropped: bool,
}

/// The state of the one open write transaction.
struct W {
    state: State,
    base_page_count: u32,
    dirty: IdMap<Page>,
    /// Pages this transaction allocated (the value unused: a map of the layout of the
    /// others, whose code the module then holds once; docs/size.md).
    owned: IdMap<bool>,
    /// Pages of the committed state this transaction freed.
    freed: Vec<u32>,
    /// Pending changes to the free tree: page -> true (add) / false (remove).
    delta: IdMap<bool>,
    /// The trees it opened, created or dropped (found by name in the list: a transaction
    /// opens a few, and a map of names would be code of its own in the wasm module).
    trees: Vec<TreeSlot>,
    /// Trees whose catalog entries `WriteTx::set_meta_of` changed (for `CommitInfo`): their
    /// names one after the other, and where each ends (buffers kept from one transaction to
    /// the next: a caller sets the same tree's bytes on every commit).
    meta_changed: MetaChanged,
    /// Bumped by every change, so a cursor knows to find its place again.
    seq: u64,
    serial: u64,
    /// Where the last write landed, for the next one (see `btree::LastLeaf`).
    last_leaf: btree::LastLeaf,
    /// The catalog was written (a volatile file's catalog root keeps its number, so the
    /// last commit's tree entries no longer tell what it holds).
    catalog_written: bool,
}

impl W {
    /// Where the tree named `name` is in `trees`, unless it is not there or was dropped (a
    /// name has at most one slot not dropped: `open_tree` finds it before it adds another).
    /// A transaction opens few trees: comparing their names costs less than hashing one.
    fn live_tree(&self, name: &str) -> Option<usize> {
        self.trees
            .iter()
            .rposition(|s| !s.dropped && s.info.name == name)
    }
}

pub(crate) struct Shared<F> {
    pub(crate) pager: Pager<F>,
    opts: Options,
    pub(crate) state: State,
    durable_slot: usize,
    last_slot: usize,
    durable_txn: u64,
    next_txn: u64,
    /// Pages written since the last flush, with their checksums: the superblock's commit list.
    unflushed: IdMap<u64>,
    /// Open read transactions: (the transaction they read, how many). Few at a time, so a list
    /// (a map type of its own would be a few KB more of wasm).
    readers: Vec<(u64, usize)>,
    pending: VecDeque<(u64, Vec<u32>)>,
    free: Option<FreePages>,
    w: Option<W>,
    poisoned: Option<String>,
    path: Vec<(u32, usize)>,
    scratch: Vec<u8>,
    /// `btree::update_each`'s buffers, kept from call to call (an UPDATE by key makes one call
    /// a row).
    each: [Vec<u8>; 3],
    serial: u64,
    recovered: Option<String>,
    /// Entries in the commit list of the newest superblock.
    last_list: usize,
    /// Buffers kept from one commit to the next: the changed pages' numbers, a run of
    /// adjacent pages, the superblock and its commit list.
    ids: Vec<u32>,
    run: Vec<u8>,
    sb: Vec<u8>,
    list: Vec<(u32, u64)>,
    runs: Vec<Run>,
    /// The last write transaction's maps, emptied, for the next one: a fresh map grows through
    /// several rehashes, which a one-row commit would pay every time.
    spare: Option<Spare>,
    /// Buffers of cursors dropped, for the next ones: a point query opens a cursor (a range
    /// over an index, say) and would otherwise allocate its stack and bounds, and free them,
    /// every time.
    cursor_bufs: Vec<CursorBufs>,
    /// The catalog entries of the trees the last commit had open, as it wrote them, and of
    /// those earlier commits had open that none has opened since (their entries unchanged,
    /// while no commit wrote the catalog but for the trees it had open), for the next write
    /// transaction to open them without a catalog look-up (a one-row commit opens its table's
    /// tree every time; one in every few opens another). Valid only while the state is that
    /// commit's and the catalog is untouched: any catalog write copies its root, which is
    /// then another page.
    committed_trees: Option<CommittedTrees>,
    /// A volatile file's superblocks are older than the last commit (see `write_back`).
    sb_unwritten: bool,
    /// The root bytes of the last commit (`WriteTx::set_root_meta`), and those the open write
    /// transaction set if `root_set` (two buffers that trade places at commit: a caller setting
    /// them every commit allocates nothing, and a transaction that does not set them pays for
    /// nothing).
    root_meta: Vec<u8>,
    root_next: Vec<u8>,
    root_set: bool,
    /// Commit's buffers kept from one commit to the next: a catalog entry, the free-tree delta.
    entry: Vec<u8>,
    delta: Vec<(u32, bool)>,
    /// The page list of the last commit whose freed pages were released, for the next
    /// commit's `W::freed`.
    freed: Vec<u32>,
    /// The transaction whose committed state a read is of (a read transaction's, a cursor's
    /// over one): it sees no changed page of the open write transaction, and pages changed in
    /// place since as `kept` holds them. None: the writer's view. Set only through `At`.
    view: Option<u64>,
    /// For each commit of a volatile file that changed pages in place while read transactions
    /// were open, in commit order: its transaction id and those pages as they were before it.
    kept: VecDeque<(u64, IdMap<Page>)>,
}

/// A borrow of the shared state for a read at `view` (see `Shared::view`), which it resets
/// when it ends, however it ends.
pub(crate) struct At<'a, F: BlockFile>(RefMut<'a, Shared<F>>);

impl<'a, F: BlockFile> At<'a, F> {
    pub(crate) fn new(mut sh: RefMut<'a, Shared<F>>, view: Option<u64>) -> Self {
        sh.view = view;
        At(sh)
    }
}

impl<F: BlockFile> Drop for At<'_, F> {
    fn drop(&mut self) {
        self.0.view = None;
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

struct CommittedTrees {
    txn: u64,
    catalog: u32,
    infos: Vec<TreeInfo>,
}

/// A dropped [`Cursor`]'s buffers (and its [`Range`]'s bounds), empty, kept in [`Shared`] for
/// the next cursor.
#[derive(Default)]
struct CursorBufs {
    levels: Vec<(Page, usize)>,
    key: Vec<u8>,
    val: Vec<u8>,
    lower: Vec<u8>,
    upper: Vec<u8>,
}

impl CursorBufs {
    /// How many are kept: one each for the scans a statement has open at once, as a rule.
    const KEPT: usize = 8;
    /// Larger buffers are not kept.
    const MAX: usize = 16 * 1024;

    fn small(&self) -> bool {
        [&self.key, &self.val, &self.lower, &self.upper]
            .iter()
            .all(|b| b.capacity() <= Self::MAX)
    }
}

/// [`W`]'s maps, kept empty between write transactions.
#[derive(Default)]
struct Spare {
    dirty: IdMap<Page>,
    owned: IdMap<bool>,
    delta: IdMap<bool>,
    trees: Vec<TreeSlot>,
    last_leaf: btree::LastLeaf,
    meta_changed: MetaChanged,
}

/// Names of trees, kept in one buffer.
#[derive(Default)]
struct MetaChanged {
    names: String,
    ends: Vec<usize>,
}

impl MetaChanged {
    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter())
            .map(|(a, &b)| &self.names[a..b])
    }

    /// Adds `name` unless it is there.
    fn add(&mut self, name: &str) {
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

impl Spare {
    /// Keeps `w`'s maps, emptied, unless a big transaction grew them (they would hold that
    /// memory for as long as the database is open).
    fn keep(w: &mut W) -> Option<Spare> {
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
        };
        s.meta_changed.clear();
        s.dirty.clear();
        s.owned.clear();
        s.delta.clear();
        s.trees.clear();
        s.last_leaf.forget();
        Some(s)
    }
}

/// What [`Shared::catalog_rewrite_meta`] did.
enum MetaRewrite {
    Done,
    Missing,
    /// Nothing: the general path (a get and a put of the entry) is to be taken.
    Fallback,
}

impl<F: BlockFile> Pages for Shared<F> {
    fn page_size(&self) -> usize {
        self.pager.page_size
    }

    fn last_leaf(&mut self) -> Option<&mut btree::LastLeaf> {
        self.w.as_mut().map(|w| &mut w.last_leaf)
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
        self.pager.read(id)
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
        Ok(f(self.pager.read_ref(id)?))
    }

    /// Owned by the transaction, or any page of a volatile file (`page_mut`).
    fn is_owned(&self, id: u32) -> bool {
        self.w
            .as_ref()
            .is_some_and(|w| self.pager.volatile || w.owned.contains_key(&id))
    }

    fn page_mut(&mut self, id: u32) -> Result<&mut Vec<u8>> {
        let w = self
            .w
            .as_mut()
            .expect("invariant: page_mut only inside a write transaction");
        let p = match w.dirty.entry(id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) if w.owned.contains_key(&id) => {
                // A page spilled earlier in this transaction: from the cache if it is still
                // there.
                e.insert(match self.pager.take(id) {
                    Some(p) => p,
                    None => self.pager.read_uncached(id)?,
                })
            }
            Entry::Vacant(e) if self.pager.volatile => {
                // A committed page of a volatile file is changed under its own number, in a
                // copy: the cache (or the file) keeps the committed bytes for read
                // transactions and for a rollback until the commit replaces them
                // (`keep_committed` keeps them for readers of older states after it). Copying it to a new page instead would change
                // its parent, the parent's parent, the catalog entry and the free tree, and
                // bring nothing a volatile file can use: no superblock names the committed
                // state before the file is handed back, and no crash can tear it.
                if id < 2 || id >= w.state.page_count {
                    return Err(page::corrupt(
                        id,
                        "is not a page of a tree (outside the page range)",
                    ));
                }
                let copy = match self.pager.spare_page() {
                    Some(mut p) => {
                        let b = Rc::get_mut(&mut p)
                            .expect("invariant: nothing else holds a spare page");
                        b.copy_from_slice(self.pager.read_ref(id)?);
                        p
                    }
                    None => Rc::new(self.pager.read_ref(id)?.to_vec()),
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
            self.pager.page_size,
            "a page copy is one page"
        );
        self.alloc_holding(Some(content))
    }

    fn free(&mut self, id: u32) -> Result<()> {
        let w = self
            .w
            .as_mut()
            .expect("invariant: free only inside a write transaction");
        w.seq += 1;
        w.last_leaf.forget();
        if w.owned.remove(&id).is_some() {
            if let Some(p) = w.dirty.remove(&id) {
                self.pager.keep_spare(p);
            }
            self.unflushed.remove(&id);
            self.pager.forget(id);
            delta_set(&mut w.delta, id, true);
            self.free
                .as_mut()
                .expect("invariant: free set loaded")
                .insert(id);
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

impl<F: BlockFile> Shared<F> {
    /// A fresh owned page holding `content` (a copy of the page it replaces: straight in, not
    /// over a zeroed page), or zeroes. In a page the cache let go of when there is one
    /// (`Pager::spare_page`), so a small commit allocates none.
    fn alloc_holding(&mut self, content: Option<&[u8]>) -> Result<u32> {
        let w = self
            .w
            .as_mut()
            .expect("invariant: alloc only inside a write transaction");
        w.last_leaf.forget();
        let free = self
            .free
            .as_mut()
            .expect("invariant: free set loaded by begin_write");
        let id = match free.pop_first() {
            Some(id) => {
                // Every allocatable page is in the free tree (or about to be added to it).
                delta_set(&mut w.delta, id, false);
                id
            }
            None => {
                let id = w.state.page_count;
                w.state.page_count = id
                    .checked_add(1)
                    .ok_or_else(|| Error::TooLarge("the file would pass 2^32 pages".into()))?;
                id
            }
        };
        w.owned.insert(id, true);
        let page = match self.pager.spare_page() {
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
                None => vec![0u8; self.pager.page_size],
            }),
        };
        w.dirty.insert(id, page);
        Ok(id)
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

/// Records a change to the free tree; an add and a remove of the same page cancel.
fn delta_set(delta: &mut IdMap<bool>, id: u32, add: bool) {
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

fn encode_superblock(ps: usize, slot: usize, s: &State, list: &[Run]) -> Vec<u8> {
    let mut b = Vec::new();
    encode_superblock_into(&mut b, ps, slot, s, list, &[]);
    b
}

/// [`encode_superblock`] into a buffer kept between commits, with the root bytes `root` (at
/// most [`root_meta_room`], and the list no longer than [`list_capacity`] leaves room for).
fn encode_superblock_into(
    b: &mut Vec<u8>,
    ps: usize,
    slot: usize,
    s: &State,
    list: &[Run],
    root: &[u8],
) {
    assert!(
        root.len() <= root_meta_room(ps) && SB_LIST + ENTRY * list.len() + root.len() <= ps,
        "invariant: the root bytes and the commit list fit the superblock"
    );
    if b.len() == ps {
        // The buffer holds the last superblock (written here, so it fits): zeroes past its
        // list and before its root bytes, which stay zeroes.
        let old_root = page::get_u32(b, 64) as usize;
        let used = SB_LIST + ENTRY * page::get_u32(b, 60) as usize;
        b[..used].fill(0);
        if old_root > 0 {
            b[ps - old_root..].fill(0);
        }
    } else {
        b.clear();
        b.resize(ps, 0);
    }
    b[..8].copy_from_slice(&MAGIC);
    page::put_u32(b, 16, FORMAT_VERSION);
    page::put_u32(b, 20, ps as u32);
    page::put_u64(b, 24, s.txn);
    page::put_u32(b, 32, s.page_count);
    page::put_u32(b, 36, s.catalog);
    page::put_u32(b, 40, s.free);
    page::put_u64(b, 44, s.catalog_len);
    page::put_u64(b, 52, s.free_len);
    page::put_u32(b, 60, list.len() as u32);
    page::put_u32(b, 64, root.len() as u32);
    for (i, &(first, count, sum)) in list.iter().enumerate() {
        let at = SB_LIST + ENTRY * i;
        page::put_u32(b, at, first);
        page::put_u32(b, at + 4, count);
        page::put_u64(b, at + 8, sum);
    }
    if !root.is_empty() {
        b[ps - root.len()..].copy_from_slice(root);
    }
    let sum = xxh64(&b[16..], slot as u64);
    page::put_u64(b, 8, sum);
}

/// How many runs a superblock's commit list can name beside `root` root bytes.
fn list_capacity(ps: usize, root: usize) -> usize {
    (ps - SB_LIST - root) / ENTRY
}

/// The most root bytes a superblock holds: a quarter of the page, so that the commit list keeps
/// most of its room (187 runs at 4 KiB beside a full room of root bytes).
pub(crate) fn root_meta_room(ps: usize) -> usize {
    ps / 4
}

struct Slot {
    state: State,
    list: Vec<Run>,
    root: Vec<u8>,
}

/// Parses one superblock slot, or says what is wrong with it.
fn decode_superblock(b: &[u8], slot: usize, ps: usize) -> std::result::Result<Slot, SlotError> {
    if b[..8] != MAGIC {
        return Err(SlotError::NoMagic);
    }
    let version = page::get_u32(b, 16);
    // Any other version is refused whole, before anything else in the slot is read: a newer one
    // this build cannot know, an older (pre-release) one it no longer reads.
    if version != FORMAT_VERSION && version != 0 {
        return Err(SlotError::Version(version));
    }
    if xxh64(&b[16..ps], slot as u64) != page::get_u64(b, 8) {
        return Err(SlotError::Bad("checksum mismatch".into()));
    }
    if version == 0 {
        return Err(SlotError::Bad("format version 0".into()));
    }
    if page::get_u32(b, 20) as usize != ps {
        return Err(SlotError::Bad(
            "page size differs from the other slot".into(),
        ));
    }
    let state = State {
        txn: page::get_u64(b, 24),
        page_count: page::get_u32(b, 32),
        catalog: page::get_u32(b, 36),
        free: page::get_u32(b, 40),
        catalog_len: page::get_u64(b, 44),
        free_len: page::get_u64(b, 52),
    };
    let n = page::get_u32(b, 60) as usize;
    let root = page::get_u32(b, 64) as usize;
    if root > root_meta_room(ps) {
        return Err(SlotError::Bad(format!(
            "{root} root bytes, more than a quarter of the page"
        )));
    }
    if n > list_capacity(ps, root) {
        return Err(SlotError::Bad(format!(
            "commit list of {n} entries is too long"
        )));
    }
    let mut list = Vec::with_capacity(n);
    for i in 0..n {
        let e = SB_LIST + ENTRY * i;
        let run = (
            page::get_u32(b, e),
            page::get_u32(b, e + 4),
            page::get_u64(b, e + 8),
        );
        if run.1 == 0 {
            return Err(SlotError::Bad("a commit list entry names no page".into()));
        }
        list.push(run);
    }
    Ok(Slot {
        state,
        list,
        root: b[ps - root..ps].to_vec(),
    })
}

enum SlotError {
    NoMagic,
    Version(u32),
    Bad(String),
}

fn valid_page_size(ps: usize) -> bool {
    ps.is_power_of_two() && (512..=65536).contains(&ps)
}

impl<F: BlockFile> Shared<F> {
    /// Page `id` as the current view has it when that is not the committed page in the
    /// cache: the writer's changed copy, or for a read of an older state, the page as
    /// `kept` holds it from before the first later commit that changed it in place.
    #[inline(always)]
    fn changed(&self, id: u32) -> Option<&Page> {
        match self.view {
            None => self.w.as_ref().and_then(|w| w.dirty.get(&id)),
            Some(_) if self.kept.is_empty() => None,
            Some(txn) => self
                .kept
                .iter()
                .filter(|(t, _)| *t > txn)
                .find_map(|(_, pages)| pages.get(&id)),
        }
    }

    /// The pages the open transaction changed that it allocated (`owned`) or, else, that it
    /// changed under their own numbers, in `self.ids`' buffer (taken: the caller gives it back).
    fn changed_ids(&mut self, owned: bool) -> Vec<u32> {
        let w = self.w.as_ref().expect("invariant: write transaction open");
        let mut ids = std::mem::take(&mut self.ids);
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
    fn keep_committed(&mut self, txn: u64) -> Result<()> {
        let ids = self.changed_ids(false);
        let mut pages = IdMap::default();
        let r = ids.iter().try_for_each(|&id| -> Result<()> {
            pages.insert(id, self.pager.read(id)?);
            Ok(())
        });
        self.ids = ids;
        r?;
        if !pages.is_empty() {
            self.kept.push_back((txn, pages));
        }
        Ok(())
    }

    /// Drops the pages `kept` holds for read transactions no longer open.
    fn release_kept(&mut self) {
        let oldest = self.readers.iter().map(|&(t, _)| t).min();
        while let Some((t, _)) = self.kept.front() {
            if oldest.is_some_and(|r| r < *t) {
                break;
            }
            self.kept.pop_front();
        }
    }

    pub(crate) fn has_writer(&self) -> bool {
        self.w.is_some()
    }

    fn page_limit(&self) -> u32 {
        match &self.w {
            Some(w) => w.state.page_count,
            None => self.state.page_count,
        }
    }

    fn new(pager: Pager<F>, opts: Options, state: State, slot: usize) -> Self {
        Shared {
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
            w: None,
            poisoned: None,
            path: Vec::new(),
            scratch: Vec::new(),
            each: Default::default(),
            serial: 0,
            recovered: None,
            last_list: 0,
            ids: Vec::new(),
            run: Vec::new(),
            sb: Vec::new(),
            list: Vec::new(),
            runs: Vec::new(),
            spare: None,
            cursor_bufs: Vec::new(),
            committed_trees: None,
            sb_unwritten: false,
            root_meta: Vec::new(),
            root_next: Vec::new(),
            root_set: false,
            entry: Vec::new(),
            delta: Vec::new(),
            freed: Vec::new(),
            view: None,
            kept: VecDeque::new(),
        }
    }

    fn load_free(&mut self) -> Result<()> {
        if self.free.is_some() {
            return Ok(());
        }
        let mut set = FreePages::default();
        let mut st = Stack::default();
        let mut ok = st.first(self, self.state.free)?;
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack has a leaf");
            let k = page::key(pg, i);
            if k.len() != 4 {
                return Err(Error::Corrupt("free tree key is not a page number".into()));
            }
            set.insert(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
            ok = st.next(self)?;
        }
        self.free = Some(set);
        Ok(())
    }

    fn begin_write(&mut self) -> Result<u64> {
        if let Some(m) = &self.poisoned {
            return Err(Error::NeedsReopen(m.clone()));
        }
        if self.w.is_some() {
            return Err(Error::Busy("a write transaction is already open".into()));
        }
        self.load_free()?;
        self.release_pending();
        self.release_kept();
        self.serial += 1;
        let spare = self.spare.take().unwrap_or_default();
        self.w = Some(W {
            state: self.state,
            base_page_count: self.state.page_count,
            dirty: spare.dirty,
            owned: spare.owned,
            freed: std::mem::take(&mut self.freed),
            delta: spare.delta,
            trees: spare.trees,
            meta_changed: spare.meta_changed,
            seq: 0,
            serial: self.serial,
            last_leaf: spare.last_leaf,
            catalog_written: false,
        });
        self.root_set = false;
        Ok(self.serial)
    }

    fn release_pending(&mut self) {
        let oldest_reader = self.readers.iter().map(|&(t, _)| t).min();
        let free = self.free.as_mut().expect("invariant: free set loaded");
        while let Some((t, _)) = self.pending.front() {
            let t = *t;
            if t > self.durable_txn || oldest_reader.is_some_and(|r| t > r) {
                break;
            }
            let (_, mut pages) = self.pending.pop_front().expect("invariant: front exists");
            free.extend(pages.iter().copied());
            if pages.capacity() <= 1024 {
                pages.clear();
                self.freed = pages;
            }
        }
    }

    fn rollback(&mut self) {
        let Some(w) = self.w.take() else { return };
        self.root_set = false;
        let free = self.free.as_mut().expect("invariant: free set loaded");
        for (&id, &add) in &w.delta {
            // Pages taken from the free tree go back; pages past the old end are forgotten.
            if !add && id < w.base_page_count {
                free.insert(id);
            }
        }
        free.retain(|&id| id < w.base_page_count);
        for &id in w.owned.keys() {
            self.unflushed.remove(&id);
            self.pager.forget(id);
        }
    }

    /// Spills the changed pages to the file when there are too many to hold (they go to free
    /// places, so writing them early is harmless; they stay owned and are rewritten if changed).
    fn maybe_spill(&mut self) -> Result<()> {
        let w = self.w.as_mut().expect("invariant: write transaction open");
        if w.dirty.len() <= self.opts.dirty_pages {
            return Ok(());
        }
        if self.pager.volatile {
            // Only pages the transaction allocated: a committed page changed in place must
            // stay out of the cache, which holds its committed bytes, until the commit.
            let txn = w.state.txn.max(self.next_txn);
            let ids = self.changed_ids(true);
            for &id in &ids {
                let w = self.w.as_mut().expect("invariant: write transaction open");
                let mut p = w.dirty.remove(&id).expect("invariant: listed");
                page::put_u64(Rc::make_mut(&mut p).as_mut_slice(), 8, txn);
                self.pager.cache_put_unwritten(id, p)?;
            }
            self.ids = ids;
            return Ok(());
        }
        self.write_dirty()
    }

    /// Writes every changed page, one `write` call per run of adjacent page numbers (a write
    /// call costs 30-50 us on OPFS whatever its size, so runs matter more than bytes).
    fn write_dirty(&mut self) -> Result<()> {
        let w = self.w.as_mut().expect("invariant: write transaction open");
        if self.pager.volatile {
            // Into the cache, unwritten: the file gets them when they are evicted or handed
            // back (`Pager::write_back`). In no particular order, as nothing is written.
            let txn = w.state.txn.max(self.next_txn);
            for (id, mut p) in w.dirty.drain() {
                page::put_u64(Rc::make_mut(&mut p).as_mut_slice(), 8, txn);
                self.pager.cache_put_unwritten(id, p)?;
            }
            return Ok(());
        }
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        ids.extend(w.dirty.keys().copied());
        crate::sort::sort(&mut ids);
        let txn = w.state.txn.max(self.next_txn);
        let ps = self.pager.page_size;
        let mut run = std::mem::take(&mut self.run);
        let r = self.write_runs(&ids, txn, ps, &mut run);
        self.ids = ids;
        self.run = run;
        r
    }

    fn write_runs(&mut self, ids: &[u32], txn: u64, ps: usize, run: &mut Vec<u8>) -> Result<()> {
        let mut i = 0;
        while i < ids.len() {
            let start = ids[i];
            let mut j = i;
            while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 && (j + 1 - i) * ps < (1 << 20) {
                j += 1;
            }
            let w = self.w.as_mut().expect("invariant: write transaction open");
            if i == j {
                // A page alone (most pages of a small commit) is written from where it lies.
                let mut p = w.dirty.remove(&start).expect("invariant: listed");
                let buf = Rc::make_mut(&mut p);
                let sum = crate::pager::stamp(start, buf, txn);
                self.pager.file.write(start as u64 * ps as u64, buf)?;
                self.unflushed.insert(start, sum);
                self.pager.cache_put(start, p)?;
                i += 1;
                continue;
            }
            run.clear();
            for &id in &ids[i..=j] {
                let w = self.w.as_mut().expect("invariant: write transaction open");
                let mut p = w.dirty.remove(&id).expect("invariant: listed");
                let buf = Rc::make_mut(&mut p);
                let sum = crate::pager::stamp(id, buf, txn);
                run.extend_from_slice(buf);
                self.unflushed.insert(id, sum);
                self.pager.cache_put(id, p)?;
            }
            self.pager.file.write(start as u64 * ps as u64, run)?;
            i = j + 1;
        }
        Ok(())
    }

    /// Commits the open transaction; `CommitInfo::changed_trees` is left empty unless
    /// `names` (a caller that ignores it saves a string copy a tree).
    fn commit(&mut self, names: bool) -> Result<CommitInfo> {
        let r = self.commit_inner(names);
        if let Err(e) = &r {
            self.poisoned = Some(e.to_string());
            self.rollback();
        }
        r
    }

    fn commit_inner(&mut self, names: bool) -> Result<CommitInfo> {
        let txn = self.next_txn;
        // Whether the entries of the trees the last commit left cached and this transaction
        // did not open stay as they are: the cache is of the state this transaction began
        // from and nothing but this commit's own entries (step 1) writes the catalog.
        let keep_cached = {
            let w = self.w.as_ref().expect("invariant: write transaction open");
            !w.catalog_written
                && self
                    .committed_trees
                    .as_ref()
                    .is_some_and(|c| c.txn == w.state.txn && c.catalog == w.state.catalog)
        };
        let mut info = CommitInfo {
            txn,
            changed_trees: Vec::new(),
        };
        // 1. Changed trees into the catalog, each entry encoded into one buffer kept from
        // commit to commit. The name is lent out of its slot for the catalog write (which
        // does not look at the slots).
        let mut entry = std::mem::take(&mut self.entry);
        let w = self.w.as_mut().expect("invariant: write transaction open");
        for i in 0..w.trees.len() {
            let w = self.w.as_mut().expect("invariant: write transaction open");
            let t = &mut w.trees[i];
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
            let w = self.w.as_mut().expect("invariant: write transaction open");
            w.trees[i].info.name = name;
            r?;
        }
        self.entry = entry;
        if names {
            let w = self.w.as_ref().expect("invariant: write transaction open");
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
        let mut delta = std::mem::take(&mut self.delta);
        loop {
            let w = self.w.as_mut().expect("invariant: write transaction open");
            delta.clear();
            delta.extend(w.delta.drain());
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
            let w = self.w.as_mut().expect("invariant: write transaction open");
            let mut root = w.state.free;
            let mut len = w.state.free_len;
            let mut path = std::mem::take(&mut self.path);
            let mut scratch = std::mem::take(&mut self.scratch);
            for &(id, add) in &delta {
                let k = id.to_be_bytes();
                let changed = if add {
                    !btree::insert(self, &mut root, &k, &[], &mut path, &mut scratch)?
                } else {
                    btree::remove(self, &mut root, &k, &mut path)?
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
            self.path = path;
            self.scratch = scratch;
            let w = self.w.as_mut().expect("invariant: write transaction open");
            w.state.free = root;
            w.state.free_len = len;
        }
        self.delta = delta;
        if self.pager.volatile && !self.readers.is_empty() {
            self.keep_committed(txn)?;
        }
        // 3. Pages, then the superblock, then one flush. Pages this commit freed leave the list:
        // the new state does not need them, and once durable they may be overwritten.
        self.write_dirty()?;
        let w = self.w.as_ref().expect("invariant: write transaction open");
        for id in &w.freed {
            self.unflushed.remove(id);
        }
        let w = self.w.as_mut().expect("invariant: write transaction open");
        let mut state = w.state;
        state.txn = txn;
        if self.root_set {
            // A commit that fails from here on leaves the store to be opened again (poisoned),
            // which reads the root bytes from the file.
            std::mem::swap(&mut self.root_meta, &mut self.root_next);
            self.root_set = false;
        }
        let ps = self.pager.page_size;
        if !self.pager.volatile {
            // (A volatile file's pages are not written, so none waits for a flush.)
            self.list_runs();
            if self.runs.len() > list_capacity(ps, self.root_meta.len())
                || self.list.len() * ps > self.opts.list_bytes
            {
                // Too much to name in the superblock: make it (and every earlier commit)
                // durable first; the superblock then names nothing. Two flushes, for big
                // commits only.
                self.pager.file.flush()?;
                self.mark_durable();
                self.list_runs();
            }
        }
        let slot = 1 - self.durable_slot;
        if self.pager.volatile {
            // Nothing reads a volatile file's superblock before it is handed back, which writes
            // the last one (`Shared::write_back`).
            self.sb_unwritten = true;
        } else {
            self.write_superblock(slot, &state)?;
        }
        let flushed = self.opts.durability == Durability::Full;
        if flushed {
            self.pager.file.flush()?;
        }
        // The commit is now done (or, relaxed, ordered); only bookkeeping follows.
        let mut w = self.w.take().expect("invariant: write transaction open");
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
        self.next_txn = txn + 1;
        self.last_slot = slot;
        if flushed {
            self.mark_durable();
        }
        self.spare = Spare::keep(&mut w);
        if !w.freed.is_empty() {
            self.pending.push_back((txn, w.freed));
        }
        Ok(info)
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
        let w = self.w.as_ref().expect("invariant: write transaction open");
        let (mut root, mut len) = (w.state.free, w.state.free_len);
        let ps = self.pager.page_size;
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
        let new_root = if page::count(pg) == 0 && !self.pager.volatile {
            self.free(leaf)?;
            0
        } else {
            leaf
        };
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.last_leaf.forget();
        w.state.free = new_root;
        w.state.free_len = len;
        Ok(true)
    }

    /// Sorts the pages written since the last flush into `list` and names them in `runs` of
    /// adjacent pages: the commit list.
    fn list_runs(&mut self) {
        let list = &mut self.list;
        list.clear();
        list.extend(self.unflushed.iter().map(|(&k, &v)| (k, v)));
        crate::sort::sort(list);
        self.runs.clear();
        for &(id, sum) in list.iter() {
            match self.runs.last_mut() {
                Some(run) if run.0.checked_add(run.1) == Some(id) => {
                    run.1 += 1;
                    run.2 = run_sum(run.2, sum);
                }
                _ => self.runs.push((id, 1, sum)),
            }
        }
    }

    /// Writes `state`'s superblock into `slot`, naming the runs [`Shared::list_runs`] made.
    fn write_superblock(&mut self, slot: usize, state: &State) -> Result<()> {
        let ps = self.pager.page_size;
        let mut sb = std::mem::take(&mut self.sb);
        encode_superblock_into(&mut sb, ps, slot, state, &self.runs, &self.root_meta);
        let r = self.pager.file.write((slot * ps) as u64, &sb);
        self.sb = sb;
        self.last_list = self.runs.len();
        r
    }

    /// Brings a volatile file up to the last commit: its unwritten pages, then its superblock in
    /// both slots (nothing to fall back to in memory, and neither slot then names a state whose
    /// pages later commits reused).
    fn write_back(&mut self) -> Result<()> {
        if !self.pager.volatile {
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

    fn flush(&mut self) -> Result<()> {
        if let Err(e) = self.pager.file.flush() {
            self.poisoned = Some(e.to_string());
            return Err(e);
        }
        self.mark_durable();
        Ok(())
    }

    /// The commit's rewrite of an existing catalog entry in a volatile file: the new value,
    /// of the old one's length, written over it in the leaf (changed under its own number,
    /// `page_mut`), without `catalog_put`'s general insert. False, with nothing changed, for
    /// any other case (a file, an entry that is new, not inline or of another length): the
    /// caller takes `catalog_put`.
    fn catalog_entry_in_place(&mut self, name: &[u8], v: &[u8]) -> Result<bool> {
        let w = self.w.as_ref().expect("invariant: write transaction open");
        let mut id = w.state.catalog;
        if !self.pager.volatile || id == 0 {
            return Ok(false);
        }
        let mut depth = 0;
        let found = loop {
            // A tree's depth bound (`btree`'s), against a cycle of pages.
            depth += 1;
            if depth > 40 {
                return Err(Error::Corrupt("the catalog is deeper than 40 pages".into()));
            }
            // Ok: the entry's slot in leaf `id`, or None to fall back; Err: the child to go to.
            let step = self.with_page(id, |pg| match page::kind(pg) {
                page::KIND_BRANCH => Err(page::child(pg, page::child_index(pg, name))),
                page::KIND_LEAF => Ok(match page::search(pg, name) {
                    Ok(i) => match page::leaf_value(pg, i) {
                        page::LeafValue::Inline(old) if old.len() == v.len() => Some(i),
                        _ => None,
                    },
                    Err(_) => None,
                }),
                // Not a catalog page: `catalog_put` reports it.
                _ => Ok(None),
            })?;
            match step {
                Ok(found) => break found,
                Err(child) => id = child,
            }
        };
        let Some(i) = found else { return Ok(false) };
        let pg = self.page_mut(id)?;
        let done = page::rewrite_value(pg, i, v);
        debug_assert!(done, "a value of the same length fits where it is");
        Ok(done)
    }

    fn catalog_put(&mut self, name: &[u8], v: &[u8]) -> Result<()> {
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.catalog_written = true;
        let mut root = w.state.catalog;
        let mut path = std::mem::take(&mut self.path);
        let mut scratch = std::mem::take(&mut self.scratch);
        let r = btree::insert(self, &mut root, name, v, &mut path, &mut scratch);
        self.path = path;
        self.scratch = scratch;
        let existed = r?;
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.state.catalog = root;
        if !existed {
            w.state.catalog_len += 1;
        }
        Ok(())
    }

    /// Replaces the caller bytes of catalog entry `name` with `meta` within the leaf that holds
    /// the entry, first making the leaf and the branches above it the transaction's if they
    /// are not: what [`Shared::catalog_put`] does with the entry's other fields kept, without
    /// reading the entry out, building its new value apart and inserting it as a new cell.
    /// A caller that sets the bytes on every commit pays for a copy of its bytes into the page.
    /// [`MetaRewrite::Fallback`] when the entry is not inline in its leaf, or its new value does
    /// not fit there, or would leave the leaf underfull (a rebalance needs the general path);
    /// the pages made the transaction's are then as the general path would make them.
    fn catalog_rewrite_meta(&mut self, name: &[u8], meta: &[u8]) -> Result<MetaRewrite> {
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.catalog_written = true;
        let mut root = w.state.catalog;
        if root == 0 {
            return Ok(MetaRewrite::Missing);
        }
        let quarter = page::capacity(self.page_size()) / 4;
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let r = self.catalog_rewrite_in(&mut root, &mut path, name, meta, quarter);
        self.path = path;
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.state.catalog = root;
        r
    }

    fn catalog_rewrite_in(
        &mut self,
        root: &mut u32,
        path: &mut Vec<(u32, usize)>,
        name: &[u8],
        meta: &[u8],
        quarter: usize,
    ) -> Result<MetaRewrite> {
        enum Step {
            Child(usize, u32),
            /// The entry's slot and the length of its fields before the caller's bytes.
            Found(usize, usize),
            Missing,
            Fallback,
            Bad(String),
        }
        let mut id = *root;
        let (i, fields) = loop {
            // A tree's depth bound (`btree`'s), against a cycle of pages.
            if path.len() > 40 {
                return Err(Error::Corrupt("the catalog is deeper than 40 pages".into()));
            }
            let step = self.with_page(id, |pg| match page::kind(pg) {
                page::KIND_BRANCH => {
                    let idx = page::child_index(pg, name);
                    Step::Child(idx, page::child(pg, idx))
                }
                page::KIND_LEAF => match page::search(pg, name) {
                    Ok(i) => match page::leaf_value(pg, i) {
                        page::LeafValue::Inline(v) => {
                            // The entry's fields before the caller's bytes (`TreeInfo::encode`).
                            if v.len() < 15 || v.len() < 15 + page::get_u16(v, 13) {
                                return Step::Bad(format!(
                                    "catalog entry {:?} is malformed",
                                    String::from_utf8_lossy(name)
                                ));
                            }
                            let fields = 15 + page::get_u16(v, 13);
                            let new = fields + meta.len();
                            // A root leaf may hold any amount; another needs a rebalance.
                            if new < v.len()
                                && !path.is_empty()
                                && page::used(pg) - (v.len() - new) < quarter
                            {
                                Step::Fallback
                            } else {
                                Step::Found(i, fields)
                            }
                        }
                        page::LeafValue::Overflow(..) => Step::Fallback,
                    },
                    Err(_) => Step::Missing,
                },
                k => Step::Bad(format!("page {id}: page kind {k} inside the catalog")),
            })?;
            match step {
                Step::Child(idx, c) => {
                    path.push((id, idx));
                    id = c;
                }
                Step::Found(i, fields) => break (i, fields),
                Step::Missing => return Ok(MetaRewrite::Missing),
                Step::Fallback => return Ok(MetaRewrite::Fallback),
                Step::Bad(e) => return Err(Error::Corrupt(e)),
            }
        };
        // An owned leaf's path is owned (its parent was changed to point at it); else the
        // pages are copied from the root down, each parent pointed at its child's copy.
        let leaf = if self.is_owned(id) {
            id
        } else {
            btree::cow_path(self, root, name, path)?
        };
        let mut v = std::mem::take(&mut self.scratch);
        v.clear();
        let pg = self.page_mut(leaf)?;
        match page::leaf_value(pg, i) {
            page::LeafValue::Inline(old) => v.extend_from_slice(&old[..fields]),
            page::LeafValue::Overflow(..) => {
                unreachable!("invariant: the copy holds what was read")
            }
        }
        v.extend_from_slice(meta);
        let done = page::rewrite_value(pg, i, &v);
        self.scratch = v;
        Ok(if done {
            MetaRewrite::Done
        } else {
            MetaRewrite::Fallback
        })
    }

    fn catalog_remove(&mut self, name: &[u8]) -> Result<bool> {
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.catalog_written = true;
        let mut root = w.state.catalog;
        let mut path = std::mem::take(&mut self.path);
        let r = btree::remove(self, &mut root, name, &mut path);
        self.path = path;
        let existed = r?;
        let w = self.w.as_mut().expect("invariant: write transaction open");
        w.state.catalog = root;
        if existed {
            w.state.catalog_len -= 1;
        }
        Ok(existed)
    }

    pub(crate) fn catalog_get(&mut self, catalog: u32, name: &str) -> Result<Option<TreeInfo>> {
        let mut v = Vec::new();
        if btree::get(self, catalog, name.as_bytes(), &mut v)? {
            Ok(Some(TreeInfo::decode(name.as_bytes(), &v)?))
        } else {
            Ok(None)
        }
    }

    pub(crate) fn catalog_list(&mut self, catalog: u32) -> Result<Vec<TreeInfo>> {
        let mut out = Vec::new();
        let mut st = Stack::default();
        let mut ok = st.first(self, catalog)?;
        let mut v = Vec::new();
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack has a leaf");
            let pg = pg.clone();
            btree::read_value(self, &pg, i, &mut v)?;
            out.push(TreeInfo::decode(page::key(&pg, i), &v)?);
            ok = st.next(self)?;
        }
        Ok(out)
    }

    fn w(&mut self, serial: u64) -> Result<&mut W> {
        match self.w.as_mut() {
            Some(w) if w.serial == serial => Ok(w),
            _ => Err(Error::InvalidInput(
                "the write transaction has ended".into(),
            )),
        }
    }
}

/// A database over a block file. Single-threaded by design (it lives in one Worker): handles are
/// `Rc`-based and share one pager and cache.
pub struct Db<F: BlockFile> {
    shared: Rc<RefCell<Shared<F>>>,
}

impl<F: BlockFile> Db<F> {
    /// Creates a database in an empty file.
    pub fn create(mut file: F, opts: Options) -> Result<Self> {
        if !valid_page_size(opts.page_size) {
            return Err(Error::InvalidInput(format!(
                "page size {} is not a power of two from 512 to 65536",
                opts.page_size
            )));
        }
        if file.len()? != 0 {
            return Err(Error::InvalidInput("create needs an empty file".into()));
        }
        let ps = opts.page_size;
        let state = State {
            txn: 1,
            page_count: 2,
            catalog: 0,
            free: 0,
            catalog_len: 0,
            free_len: 0,
        };
        file.write(0, &encode_superblock(ps, 0, &state, &[]))?;
        file.write(ps as u64, &vec![0u8; ps])?;
        file.flush()?;
        let pager = Pager::new(file, ps, opts.cache_pages);
        Ok(Db {
            shared: Rc::new(RefCell::new(Shared::new(pager, opts, state, 0))),
        })
    }

    /// Opens an existing database: reads the two superblock slots and the pages the newer one's
    /// commit list names, and the catalog's root. Refuses anything that is not a cairn file, is
    /// newer than this build, or is damaged, saying what and where.
    pub fn open(file: F, opts: Options) -> Result<Self> {
        Self::open_upto(file, opts, u64::MAX)
    }

    /// [`Db::open`] at the newest commit no later than transaction `txn`: for a file opened again
    /// after a commit failed (`txn` the last that succeeded), whose superblock may have reached
    /// the file before the failure did. That commit was reported failed: it stays invisible,
    /// and the next commit takes its slot.
    pub fn open_upto(file: F, opts: Options, txn: u64) -> Result<Self> {
        let len = file.len()?;
        if len < 64 {
            return Err(Error::NotADatabase(format!(
                "the file is {len} bytes, too short to hold a superblock"
            )));
        }
        let mut head = [0u8; 24];
        file.read(0, &mut head)?;
        let mut ps = page::get_u32(&head, 20) as usize;
        if head[..8] != MAGIC || !valid_page_size(ps) {
            // Slot A is damaged: look for slot B at every possible page size.
            ps = 0;
            let mut size = 512;
            while size <= 65536 {
                let mut h = [0u8; 24];
                if file.read(size as u64, &mut h).is_ok()
                    && h[..8] == MAGIC
                    && page::get_u32(&h, 20) as usize == size
                {
                    ps = size;
                    break;
                }
                size *= 2;
            }
            if ps == 0 {
                if head[..8] == MAGIC {
                    return Err(Error::Corrupt(
                        "page 0 (superblock A): bad page size and no valid superblock B".into(),
                    ));
                }
                return Err(Error::NotADatabase(
                    "no cairn magic number in either superblock".into(),
                ));
            }
        }
        let mut pager = Pager::new(file, ps, opts.cache_pages);
        let mut slots = Vec::new();
        let mut problems = Vec::new();
        let mut magic = false;
        for s in 0..2 {
            let mut b = vec![0u8; ps];
            if pager.file.read((s * ps) as u64, &mut b).is_err() {
                problems.push(format!("page {s} (superblock {}): missing", ["A", "B"][s]));
                continue;
            }
            match decode_superblock(&b, s, ps) {
                Ok(sl) => {
                    magic = true;
                    slots.push((s, sl))
                }
                Err(SlotError::NoMagic) => problems.push(format!(
                    "page {s} (superblock {}): no magic number",
                    ["A", "B"][s]
                )),
                Err(SlotError::Version(v)) => {
                    return Err(Error::UnsupportedVersion {
                        found: v,
                        supported: FORMAT_VERSION,
                    })
                }
                Err(SlotError::Bad(m)) => {
                    magic = true;
                    problems.push(format!("page {s} (superblock {}): {m}", ["A", "B"][s]))
                }
            }
        }
        if !magic {
            return Err(Error::NotADatabase(
                "no cairn magic number in either superblock".into(),
            ));
        }
        // Newest transaction first; on a tie, slot A first.
        crate::sort::sort_by(&mut slots, |(sa, a), (sb, b)| {
            (b.state.txn, sa) < (a.state.txn, sb)
        });
        let mut chosen = None;
        for (s, sl) in slots {
            if sl.state.txn > txn {
                continue;
            }
            match verify_list(&mut pager, &sl.list) {
                Ok(()) => {
                    chosen = Some((s, sl.state, sl.list.len(), sl.root));
                    break;
                }
                Err(m) => problems.push(format!(
                    "superblock {} (transaction {}): {m}",
                    ["A", "B"][s],
                    sl.state.txn
                )),
            }
        }
        let Some((slot, state, list_len, root)) = chosen else {
            return Err(Error::Corrupt(joined(&problems)));
        };
        let mut sh = Shared::new(
            pager,
            Options {
                page_size: ps,
                ..opts
            },
            state,
            slot,
        );
        sh.last_list = list_len;
        sh.root_meta = root;
        let notes: Vec<&String> = problems
            .iter()
            .filter(|p| !p.ends_with("no magic number"))
            .collect();
        if !notes.is_empty() {
            sh.recovered = Some(joined(&notes));
        }
        if state.catalog != 0 {
            sh.read(state.catalog)?;
        }
        Ok(Db {
            shared: Rc::new(RefCell::new(sh)),
        })
    }

    /// The root bytes of the last commit (see [`WriteTx::set_root_meta`]).
    pub fn root_meta(&self) -> Vec<u8> {
        self.shared.borrow().root_meta.clone()
    }

    /// How many root bytes the superblock holds (a quarter of the page).
    pub fn root_meta_room(&self) -> usize {
        root_meta_room(self.page_size())
    }

    pub fn begin_write(&self) -> Result<WriteTx<F>> {
        let serial = self.shared.borrow_mut().begin_write()?;
        Ok(WriteTx {
            shared: self.shared.clone(),
            serial,
        })
    }

    pub fn begin_read(&self) -> Result<ReadTx<F>> {
        let mut sh = self.shared.borrow_mut();
        let state = sh.state;
        match sh.readers.iter_mut().find(|(t, _)| *t == state.txn) {
            Some((_, n)) => *n += 1,
            None => sh.readers.push((state.txn, 1)),
        }
        sh.serial += 1;
        Ok(ReadTx {
            shared: self.shared.clone(),
            state,
            trees: RefCell::new(Vec::new()),
            serial: sh.serial,
        })
    }

    /// Makes every relaxed commit so far durable.
    pub fn flush(&self) -> Result<()> {
        self.shared.borrow_mut().flush()
    }

    /// The id of the last committed transaction.
    pub fn txn(&self) -> u64 {
        self.shared.borrow().state.txn
    }

    /// Number of pages in the file as the last commit sees it.
    pub fn page_count(&self) -> u32 {
        self.shared.borrow().state.page_count
    }

    pub fn page_size(&self) -> usize {
        self.shared.borrow().pager.page_size
    }

    /// Whether the file is volatile ([`BlockFile::volatile`]: memory, gone with the process).
    pub fn volatile(&self) -> bool {
        self.shared.borrow().pager.volatile
    }

    /// Pages currently held by the cache (never more than `Options::cache_pages`).
    pub fn cached_pages(&self) -> usize {
        self.shared.borrow().pager.cached_pages()
    }

    /// Page reads that went to the file so far.
    pub fn file_reads(&self) -> u64 {
        self.shared.borrow().pager.reads
    }

    pub(crate) fn shared(&self) -> &Rc<RefCell<Shared<F>>> {
        &self.shared
    }

    /// Closes the file (flushing relaxed commits first). Open transactions must be dropped first.
    pub fn close(self) -> Result<()> {
        let mut sh = self.shared.borrow_mut();
        if sh.w.is_some() {
            return Err(Error::Busy("a write transaction is still open".into()));
        }
        if sh.poisoned.is_none() {
            if sh.durable_txn != sh.state.txn {
                sh.flush()?;
            }
            if sh.last_list > 0 {
                // The newest superblock names pages open would read to verify; a final empty
                // commit in the other slot names none, so the next open reads nothing but the
                // superblocks and the catalog root.
                sh.begin_write()?;
                sh.commit(false)?;
                sh.flush()?;
            }
        }
        sh.pager.file.close()
    }

    /// Hands the file back without closing it (relaxed commits are not flushed). Fails with
    /// `BUSY` while a transaction or cursor still holds the database.
    pub fn into_file(self) -> Result<F> {
        match Rc::try_unwrap(self.shared) {
            Ok(cell) => {
                let mut sh = cell.into_inner();
                sh.write_back()?;
                Ok(sh.pager.file)
            }
            Err(_) => Err(Error::Busy("a transaction or cursor is still open".into())),
        }
    }

    /// Every free page of the last committed state, in order (from the free tree).
    pub fn free_pages(&self) -> Result<Vec<u32>> {
        let mut sh = self.shared.borrow_mut();
        let root = sh.state.free;
        let mut out = Vec::new();
        let mut st = Stack::default();
        let mut ok = st.first(&mut *sh, root)?;
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack has a leaf");
            let k = page::key(pg, i);
            if k.len() == 4 {
                out.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
            }
            ok = st.next(&mut *sh)?;
        }
        Ok(out)
    }

    /// Compacts the file: moves pages from its end into free pages nearer the start, then cuts
    /// the free tail off. Needs no open transaction. Costs a walk of every tree and four commits;
    /// returns the page counts before and after.
    pub fn vacuum(&self) -> Result<(u32, u32)> {
        let before = self.page_count();
        {
            let mut sh = self.shared.borrow_mut();
            if sh.w.is_some() || !sh.readers.is_empty() {
                return Err(Error::Busy("vacuum needs no open transaction".into()));
            }
            sh.flush()?;
        }
        // 1. Move pages past the cutoff down.
        let tx = self.begin_write()?;
        let held: Vec<u32> = {
            let mut guard = self.shared.borrow_mut();
            let sh = &mut *guard;
            let free = sh.free.as_mut().expect("invariant: loaded by begin_write");
            let count = sh.state.page_count;
            let live = count - free.len() as u32;
            let cutoff = (live + live / 8 + 16).min(count);
            let held: Vec<u32> = free.iter_from(cutoff).collect();
            for id in &held {
                free.remove(id);
            }
            let catalog = sh.w.as_ref().expect("invariant: open").state.catalog;
            for mut info in sh.catalog_list(catalog)? {
                let root = btree::relocate(sh, info.root, cutoff)?;
                if root != info.root {
                    info.root = root;
                    sh.catalog_put(info.name.as_bytes(), &info.encode())?;
                }
            }
            let w = sh.w.as_ref().expect("invariant: open");
            let (cat, fr) = (w.state.catalog, w.state.free);
            let cat = btree::relocate(sh, cat, cutoff)?;
            let fr = btree::relocate(sh, fr, cutoff)?;
            let w = sh.w.as_mut().expect("invariant: open");
            w.state.catalog = cat;
            w.state.free = fr;
            held
        };
        let r = tx.commit();
        {
            let mut sh = self.shared.borrow_mut();
            if let Some(free) = sh.free.as_mut() {
                free.extend(held);
            }
        }
        r?;
        self.flush()?;
        // 2. Drop the free tail from the free tree and the page count.
        let tx = self.begin_write()?;
        let new_count = {
            let mut guard = self.shared.borrow_mut();
            let sh = &mut *guard;
            let free = sh.free.as_mut().expect("invariant: loaded by begin_write");
            let w = sh.w.as_mut().expect("invariant: open");
            let mut n = w.state.page_count;
            while n > 2 && free.contains(&(n - 1)) {
                n -= 1;
                free.remove(&n);
                delta_set(&mut w.delta, n, false);
            }
            w.state.page_count = n;
            n
        };
        tx.commit()?;
        self.flush()?;
        // 3. One more commit, so the other superblock slot no longer names the tail either.
        self.begin_write()?.commit()?;
        self.flush()?;
        let mut sh = self.shared.borrow_mut();
        let count = sh.state.page_count.max(new_count);
        let ps = sh.pager.page_size as u64;
        sh.pager.truncate(count);
        sh.pager.file.set_len(count as u64 * ps)?;
        sh.flush()?;
        Ok((before, count))
    }

    /// Overwrites every free page with zeros and flushes, so that nothing a transaction deleted
    /// stays readable in the file (what a purge of replicated history needs: copy-on-write
    /// leaves the old versions of rewritten pages behind until they are reused). Needs no open
    /// transaction. One empty commit comes first, so that neither superblock slot names a state
    /// that uses a page about to be zeroed and a crash at any point opens a sound state. Returns
    /// the number of pages zeroed.
    pub fn erase_free_pages(&self) -> Result<u32> {
        {
            let mut sh = self.shared.borrow_mut();
            if sh.w.is_some() || !sh.readers.is_empty() {
                return Err(Error::Busy(
                    "erasing free pages needs no open transaction".into(),
                ));
            }
            sh.flush()?;
        }
        self.begin_write()?.commit()?;
        self.flush()?;
        let free = self.free_pages()?;
        let mut sh = self.shared.borrow_mut();
        let ps = sh.pager.page_size;
        let zeros = vec![0u8; ps];
        for &id in &free {
            sh.pager.forget(id);
            sh.pager.file.write(id as u64 * ps as u64, &zeros)?;
        }
        sh.flush()?;
        Ok(free.len() as u32)
    }

    /// Why open did not use the newest superblock, if it did not (a crash in the middle of a
    /// commit, or damage to that superblock).
    pub fn recovery_note(&self) -> Option<String> {
        self.shared.borrow().recovered.clone()
    }
}

/// Reads every page a commit list names: each must hold its own checksum, and each run the
/// checksum the list gives it.
fn verify_list<F: BlockFile>(
    pager: &mut Pager<F>,
    list: &[Run],
) -> std::result::Result<(), String> {
    let ps = pager.page_size;
    let mut buf = vec![0u8; ps];
    for &(first, count, sum) in list {
        let mut got = 0;
        for id in first..first.saturating_add(count) {
            pager.reads += 1;
            if pager.file.read(id as u64 * ps as u64, &mut buf).is_err()
                || crate::pager::page_checksum(id, &buf) != page::get_u64(&buf, 0)
            {
                return Err(format!(
                    "page {id} of the last commit did not reach the disk intact"
                ));
            }
            let own = page::get_u64(&buf, 0);
            got = if id == first { own } else { run_sum(got, own) };
        }
        if got != sum {
            return Err(format!(
                "pages {first}..{} of the last commit did not all reach the disk",
                first + count
            ));
        }
    }
    Ok(())
}

/// A handle on a tree, valid in the transaction that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    serial: u64,
    idx: usize,
    /// The root, for read transactions (whose trees do not change).
    root: u32,
}

/// A read transaction: a snapshot of the last commit as of `begin_read`. Pages it can see are
/// not reused while it is open, so keep it short when writes are heavy.
pub struct ReadTx<F: BlockFile> {
    shared: Rc<RefCell<Shared<F>>>,
    state: State,
    trees: RefCell<Vec<TreeInfo>>,
    serial: u64,
}

impl<F: BlockFile> Drop for ReadTx<F> {
    fn drop(&mut self) {
        let mut sh = self.shared.borrow_mut();
        let txn = self.state.txn;
        if let Some(i) = sh.readers.iter().position(|&(t, _)| t == txn) {
            sh.readers[i].1 -= 1;
            if sh.readers[i].1 == 0 {
                sh.readers.swap_remove(i);
                sh.release_kept();
            }
        }
    }
}

impl<F: BlockFile> ReadTx<F> {
    pub fn txn(&self) -> u64 {
        self.state.txn
    }

    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        let info = self
            .at()
            .catalog_get(self.state.catalog, name)?
            .ok_or_else(|| Error::NotFound(format!("tree {name:?}")))?;
        let root = info.root;
        let mut trees = self.trees.borrow_mut();
        trees.push(info);
        Ok(Tree {
            serial: self.serial,
            idx: trees.len() - 1,
            root,
        })
    }

    pub fn list_trees(&self) -> Result<Vec<TreeInfo>> {
        self.at().catalog_list(self.state.catalog)
    }

    /// The shared state, borrowed for a read of this transaction's state.
    fn at(&self) -> At<'_, F> {
        At::new(self.shared.borrow_mut(), Some(self.state.txn))
    }

    fn root(&self, t: Tree) -> Result<u32> {
        if t.serial != self.serial {
            return Err(Error::InvalidInput(
                "tree handle from another transaction".into(),
            ));
        }
        Ok(t.root)
    }

    pub fn tree_info(&self, t: Tree) -> Result<TreeInfo> {
        self.root(t)?;
        self.trees
            .borrow()
            .get(t.idx)
            .cloned()
            .ok_or_else(|| Error::InvalidInput("bad tree handle".into()))
    }

    pub fn len(&self, t: Tree) -> Result<u64> {
        Ok(self.tree_info(t)?.len)
    }

    /// Copies the value of `key` into `out`; returns whether it exists.
    pub fn get_into(&self, t: Tree, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let root = self.root(t)?;
        btree::get(&mut *self.at(), root, key, out)
    }

    pub fn get(&self, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(t, key, &mut v)?.then_some(v))
    }

    pub fn cursor(&self, t: Tree) -> Result<Cursor<F>> {
        let root = self.root(t)?;
        Ok(Cursor::new(
            self.shared.clone(),
            Source::Fixed(root, self.state.txn),
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
}

/// The one write transaction. Dropping it without `commit` rolls it back.
pub struct WriteTx<F: BlockFile> {
    shared: Rc<RefCell<Shared<F>>>,
    serial: u64,
}

impl<F: BlockFile> Drop for WriteTx<F> {
    fn drop(&mut self) {
        let mut sh = self.shared.borrow_mut();
        if sh.w.as_ref().is_some_and(|w| w.serial == self.serial) {
            sh.rollback();
        }
    }
}

impl<F: BlockFile> WriteTx<F> {
    fn slot<'a>(&self, sh: &'a mut Shared<F>, t: Tree) -> Result<&'a mut TreeSlot> {
        let w = sh.w(self.serial)?;
        if t.serial != self.serial {
            return Err(Error::InvalidInput(
                "tree handle from another transaction".into(),
            ));
        }
        match w.trees.get_mut(t.idx) {
            Some(s) if !s.dropped => Ok(s),
            Some(s) => Err(Error::NotFound(format!(
                "tree {:?} was dropped",
                s.info.name
            ))),
            None => Err(Error::InvalidInput("bad tree handle".into())),
        }
    }

    fn handle(&self, sh: &mut Shared<F>, info: TreeInfo, changed: bool) -> Result<Tree> {
        let w = sh.w(self.serial)?;
        let idx = w.trees.len();
        w.trees.push(TreeSlot {
            info,
            changed,
            dropped: false,
        });
        Ok(Tree {
            serial: self.serial,
            idx,
            root: 0,
        })
    }

    /// Creates an empty tree named `name`.
    pub fn create_tree(&mut self, name: &str, kind: TreeKind) -> Result<Tree> {
        let mut sh = self.shared.borrow_mut();
        let catalog = sh.w(self.serial)?.state.catalog;
        if name.len() > page::max_key(sh.pager.page_size) {
            return Err(Error::TooLarge(format!(
                "tree name of {} bytes",
                name.len()
            )));
        }
        if sh.catalog_get(catalog, name)?.is_some() {
            return Err(Error::AlreadyExists(format!("tree {name:?}")));
        }
        let info = TreeInfo {
            name: name.to_string(),
            kind,
            len: 0,
            meta: Vec::new(),
            root: 0,
        };
        sh.catalog_put(name.as_bytes(), &info.encode())?;
        self.handle(&mut sh, info, true)
    }

    pub fn open_tree(&mut self, name: &str) -> Result<Tree> {
        let mut sh = self.shared.borrow_mut();
        let w = sh.w(self.serial)?;
        if let Some(idx) = w.live_tree(name) {
            return Ok(Tree {
                serial: self.serial,
                idx,
                root: 0,
            });
        }
        let (catalog, txn, written) = (w.state.catalog, w.state.txn, w.catalog_written);
        let cached = match &mut sh.committed_trees {
            Some(c) if c.txn == txn && c.catalog == catalog && !written => (c.infos.iter())
                .rposition(|i| i.name == name)
                .map(|i| c.infos.swap_remove(i)),
            _ => None,
        };
        let info = match cached {
            Some(info) => info,
            None => sh
                .catalog_get(catalog, name)?
                .ok_or_else(|| Error::NotFound(format!("tree {name:?}")))?,
        };
        self.handle(&mut sh, info, false)
    }

    /// Deletes a tree and frees all its pages.
    pub fn drop_tree(&mut self, name: &str) -> Result<()> {
        let t = self.open_tree(name)?;
        let mut sh = self.shared.borrow_mut();
        let root = self.slot(&mut sh, t)?.info.root;
        btree::free_tree(&mut *sh, root)?;
        sh.catalog_remove(name.as_bytes())?;
        let w = sh.w(self.serial)?;
        w.trees[t.idx].dropped = true;
        Ok(())
    }

    /// Every tree, as this transaction sees it.
    pub fn list_trees(&self) -> Result<Vec<TreeInfo>> {
        let mut sh = self.shared.borrow_mut();
        let catalog = sh.w(self.serial)?.state.catalog;
        let mut list = sh.catalog_list(catalog)?;
        let w = sh.w(self.serial)?;
        for info in &mut list {
            if let Some(i) = w.live_tree(&info.name) {
                *info = w.trees[i].info.clone();
            }
        }
        Ok(list)
    }

    pub fn tree_info(&self, t: Tree) -> Result<TreeInfo> {
        let mut sh = self.shared.borrow_mut();
        Ok(self.slot(&mut sh, t)?.info.clone())
    }

    pub fn len(&self, t: Tree) -> Result<u64> {
        let mut sh = self.shared.borrow_mut();
        Ok(self.slot(&mut sh, t)?.info.len)
    }

    /// Replaces the caller's metadata bytes for tree `t` (kept in the catalog). The catalog
    /// entry is written at commit, with every changed tree's: a caller that sets them on every
    /// commit pays for one entry put into a catalog page the commit writes anyway.
    pub fn set_meta(&mut self, t: Tree, meta: &[u8]) -> Result<()> {
        let mut sh = self.shared.borrow_mut();
        let s = self.slot(&mut sh, t)?;
        // A fresh copy: growing the old one would reallocate and copy it first.
        s.info.meta = meta.to_vec();
        s.changed = true;
        Ok(())
    }

    /// The root bytes as this transaction sees them (see [`WriteTx::set_root_meta`]).
    pub fn root_meta(&self) -> Result<Vec<u8>> {
        let mut sh = self.shared.borrow_mut();
        sh.w(self.serial)?;
        Ok(if sh.root_set {
            sh.root_next.clone()
        } else {
            sh.root_meta.clone()
        })
    }

    /// Replaces the root bytes: a few bytes of the caller's kept with the state, written with
    /// the superblock that every commit writes anyway (docs/file-format.md), so setting them on
    /// every commit writes no page, cell or catalog entry. They stay until replaced; a rollback
    /// drops the change. At most [`Db::root_meta_room`] bytes (`TOO_LARGE` else).
    pub fn set_root_meta(&mut self, meta: &[u8]) -> Result<()> {
        let mut sh = self.shared.borrow_mut();
        let room = root_meta_room(sh.pager.page_size);
        if meta.len() > room {
            return Err(Error::TooLarge(format!(
                "{} root bytes, more than the {room} a superblock holds",
                meta.len()
            )));
        }
        sh.w(self.serial)?;
        sh.root_next.clear();
        sh.root_next.extend_from_slice(meta);
        sh.root_set = true;
        Ok(())
    }

    /// [`WriteTx::set_meta`] for the tree named `name`, without opening it: the catalog entry's
    /// caller bytes are replaced at once, within its leaf when they fit there (else the entry is
    /// read and put back), with no handle registered and no [`TreeInfo`] decoded (its name, its
    /// bytes copied). For a caller that replaces a
    /// tree's bytes on every commit and seldom touches the tree otherwise. A tree opened in
    /// this transaction takes the `set_meta` path; one opened after sees the new bytes.
    pub fn set_meta_of(&mut self, name: &str, meta: &[u8]) -> Result<()> {
        let mut sh = self.shared.borrow_mut();
        let w = sh.w(self.serial)?;
        if let Some(i) = w.live_tree(name) {
            let s = &mut w.trees[i];
            s.info.meta = meta.to_vec();
            s.changed = true;
            return Ok(());
        }
        match sh.catalog_rewrite_meta(name.as_bytes(), meta)? {
            MetaRewrite::Done => {
                let w = sh.w(self.serial)?;
                w.meta_changed.add(name);
                return Ok(());
            }
            MetaRewrite::Missing => return Err(Error::NotFound(format!("tree {name:?}"))),
            MetaRewrite::Fallback => {}
        }
        let w = sh.w(self.serial)?;
        let catalog = w.state.catalog;
        // Room for the entry's fields too, so that replacing the bytes does not reallocate.
        let mut v = Vec::with_capacity(64 + meta.len());
        if !btree::get(&mut *sh, catalog, name.as_bytes(), &mut v)? {
            return Err(Error::NotFound(format!("tree {name:?}")));
        }
        // The entry's fields before the caller's bytes (`TreeInfo::encode`).
        if v.len() < 15 || v.len() < 15 + page::get_u16(&v, 13) {
            return Err(Error::Corrupt(format!(
                "catalog entry {name:?} is malformed"
            )));
        }
        v.truncate(15 + page::get_u16(&v, 13));
        v.extend_from_slice(meta);
        sh.catalog_put(name.as_bytes(), &v)?;
        let w = sh.w(self.serial)?;
        w.meta_changed.add(name);
        Ok(())
    }

    pub fn get_into(&self, t: Tree, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let mut sh = self.shared.borrow_mut();
        let root = self.slot(&mut sh, t)?.info.root;
        btree::get_writing(&mut *sh, root, key, out)
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
        let sh = &mut *guard;
        let mut root = self.slot(sh, t)?.info.root;
        let mut path = std::mem::take(&mut sh.path);
        let mut scratch = std::mem::take(&mut sh.scratch);
        let limit = sh.opts.dirty_pages;
        let mut spill = |sh: &mut Shared<F>| -> Result<()> {
            let w = sh.w.as_ref().expect("invariant: write transaction open");
            if w.dirty.len() > limit {
                sh.write_dirty()?;
            }
            Ok(())
        };
        let mut bufs = std::mem::take(&mut sh.each);
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
        sh.path = path;
        sh.scratch = scratch;
        sh.each = bufs;
        // Even on error the root must be kept, and the tree counted as changed: entries may
        // have changed and pages moved before the failure.
        let s = self.slot(sh, t)?;
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
        let sh = &mut *guard;
        let mut root = self.slot(sh, t)?.info.root;
        let mut path = std::mem::take(&mut sh.path);
        let mut scratch = std::mem::take(&mut sh.scratch);
        let r = btree::insert_keeping(sh, &mut root, key, value, &mut path, &mut scratch, old);
        sh.path = path;
        sh.scratch = scratch;
        // Even on error the root must be kept: pages may have moved before the failure.
        let s = self.slot(sh, t)?;
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
        let sh = &mut *guard;
        let mut root = self.slot(sh, t)?.info.root;
        let mut path = std::mem::take(&mut sh.path);
        let mut scratch = std::mem::take(&mut sh.scratch);
        let r = btree::insert_new(sh, &mut root, key, value, &mut path, &mut scratch);
        sh.path = path;
        sh.scratch = scratch;
        // Even on error (or a key that was there) the root must be kept: pages may have moved.
        let s = self.slot(sh, t)?;
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
        let sh = &mut *guard;
        let mut root = self.slot(sh, t)?.info.root;
        let mut path = std::mem::take(&mut sh.path);
        let mut scratch = std::mem::take(&mut sh.scratch);
        let [_, old, out] = &mut sh.each;
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
        sh.path = path;
        sh.scratch = scratch;
        let [old, out] = bufs;
        sh.each[1] = old;
        sh.each[2] = out;
        // Even on error (or a key that was there and kept) the root must be kept: pages may
        // have moved.
        let s = self.slot(sh, t)?;
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
        let sh = &mut *guard;
        let mut root = self.slot(sh, t)?.info.root;
        let mut path = std::mem::take(&mut sh.path);
        let r = btree::remove_keeping(sh, &mut root, key, &mut path, old, removed);
        sh.path = path;
        // Even on error (or a miss) the root must be kept: pages may have moved.
        let s = self.slot(sh, t)?;
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
        let sh = &mut *guard;
        if self.slot(sh, t)?.info.root != 0 {
            return Err(Error::InvalidInput("bulk load needs an empty tree".into()));
        }
        let limit = sh.opts.dirty_pages;
        let mut done = |sh: &mut Shared<F>, _id: u32| -> Result<()> {
            let w = sh.w.as_ref().expect("invariant: write transaction open");
            if w.dirty.len() > limit {
                sh.write_dirty()?;
            }
            Ok(())
        };
        let (root, n) = btree::bulk_build(sh, items, &mut done)?;
        let s = self.slot(sh, t)?;
        s.info.root = root;
        s.info.len = n;
        s.changed = true;
        Ok(n)
    }

    pub fn cursor(&self, t: Tree) -> Result<Cursor<F>> {
        {
            let mut sh = self.shared.borrow_mut();
            self.slot(&mut sh, t)?;
        }
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
        let mut sh = self.shared.borrow_mut();
        sh.w(self.serial)?;
        sh.commit(true)
    }

    /// Commits like [`WriteTx::commit`], for a caller that has no use for the changed trees'
    /// names: returns the transaction id only.
    pub fn commit_txn(self) -> Result<u64> {
        let mut sh = self.shared.borrow_mut();
        sh.w(self.serial)?;
        Ok(sh.commit(false)?.txn)
    }

    pub fn rollback(self) {
        // Drop does it.
    }
}

enum Source {
    /// A read transaction's tree: its root, and the transaction it reads.
    Fixed(u32, u64),
    Write {
        serial: u64,
        idx: usize,
    },
}

/// A position in a tree. Steps are cheap: the cursor holds its root-to-leaf path. In a write
/// transaction, a cursor that outlives a change to the tree finds its place again by key
/// (the next step goes to the key after, or before, the one it was on).
pub struct Cursor<F: BlockFile> {
    shared: Rc<RefCell<Shared<F>>>,
    source: Source,
    stack: Stack,
    seq: u64,
    /// Scratch for the key a stale cursor seeks by.
    key: Vec<u8>,
    val: Vec<u8>,
    /// Buffers for a [`Range`]'s bounds, lent to it while it lives.
    bounds: (Vec<u8>, Vec<u8>),
}

impl<F: BlockFile> Drop for Cursor<F> {
    fn drop(&mut self) {
        // The pages the stack holds are let go here either way (a held page would be copied
        // by a write); the emptied buffers go back to `Shared` for the next cursor, unless it
        // is borrowed (a cursor dropped inside a store call) or has enough.
        let mut levels = std::mem::take(&mut self.stack.levels);
        levels.clear();
        let mut bufs = CursorBufs {
            levels,
            key: std::mem::take(&mut self.key),
            val: std::mem::take(&mut self.val),
            lower: std::mem::take(&mut self.bounds.0),
            upper: std::mem::take(&mut self.bounds.1),
        };
        if !bufs.small() {
            return;
        }
        if let Ok(mut sh) = self.shared.try_borrow_mut() {
            if sh.cursor_bufs.len() < CursorBufs::KEPT {
                bufs.key.clear();
                bufs.val.clear();
                bufs.lower.clear();
                bufs.upper.clear();
                sh.cursor_bufs.push(bufs);
            }
        }
    }
}

impl<F: BlockFile> Cursor<F> {
    /// The caller must not hold `shared` borrowed: the cursor takes kept buffers from it.
    fn new(shared: Rc<RefCell<Shared<F>>>, source: Source) -> Self {
        let bufs = shared
            .try_borrow_mut()
            .ok()
            .and_then(|mut sh| sh.cursor_bufs.pop())
            .unwrap_or_default();
        Cursor {
            shared,
            source,
            stack: Stack {
                levels: bufs.levels,
            },
            seq: 0,
            key: bufs.key,
            val: bufs.val,
            bounds: (bufs.lower, bufs.upper),
        }
    }

    /// The shared state, borrowed for a read at this cursor's view.
    fn lock<'a>(shared: &'a RefCell<Shared<F>>, source: &Source) -> At<'a, F> {
        let view = match source {
            Source::Fixed(_, txn) => Some(*txn),
            Source::Write { .. } => None,
        };
        At::new(shared.borrow_mut(), view)
    }

    fn root(&self, sh: &mut Shared<F>) -> Result<u32> {
        match self.source {
            Source::Fixed(r, _) => Ok(r),
            Source::Write { serial, idx } => {
                let w = sh.w(serial)?;
                match w.trees.get(idx) {
                    Some(s) if !s.dropped => Ok(s.info.root),
                    _ => Err(Error::NotFound("the cursor's tree was dropped".into())),
                }
            }
        }
    }

    fn after(&mut self, sh: &mut Shared<F>, ok: bool) -> Result<bool> {
        // The key to find the place again by is not copied here: the stack holds its pages,
        // and a held page is never written in place (`Rc::make_mut` copies a shared one), so
        // the current key can still be read from it after the tree changed.
        if let Source::Write { serial, .. } = self.source {
            self.seq = sh.w(serial)?.seq;
        }
        Ok(ok)
    }

    /// In a write transaction, whether the tree changed since the last step.
    fn stale(&self, sh: &mut Shared<F>) -> Result<bool> {
        match self.source {
            Source::Fixed(..) => Ok(false),
            Source::Write { serial, .. } => Ok(sh.w(serial)?.seq != self.seq),
        }
    }

    pub fn first(&mut self) -> Result<bool> {
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let root = self.root(&mut sh)?;
        let ok = self.stack.first(&mut *sh, root)?;
        self.after(&mut sh, ok)
    }

    pub fn last(&mut self) -> Result<bool> {
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let root = self.root(&mut sh)?;
        let ok = self.stack.last(&mut *sh, root)?;
        self.after(&mut sh, ok)
    }

    /// Moves to the entry `op` picks relative to `key`; returns whether there is one.
    pub fn seek(&mut self, key: &[u8], op: Seek) -> Result<bool> {
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let root = self.root(&mut sh)?;
        let ok = self.stack.seek(&mut *sh, root, key, op)?;
        self.after(&mut sh, ok)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<bool> {
        self.step(true)
    }

    pub fn prev(&mut self) -> Result<bool> {
        self.step(false)
    }

    /// Whether the tree is as it was at the last step: always in a read transaction, and in a
    /// write transaction's tree until it is written.
    fn unchanged(&self) -> bool {
        match self.source {
            Source::Fixed(..) => true,
            Source::Write { serial, .. } => {
                let sh = self.shared.borrow();
                matches!(&sh.w, Some(w) if w.serial == serial && w.seq == self.seq)
            }
        }
    }

    /// One entry forward or back. When the tree changed under the cursor, it finds its place
    /// again by key: the entry after (or before) the last one it returned.
    fn step(&mut self, forward: bool) -> Result<bool> {
        // A read transaction's tree cannot change, so a step that stays in the leaf is the
        // next slot: no need to borrow the shared state mutably (most steps of a scan).
        // So is one in a write transaction's tree that has not changed since the last step.
        if let (true, Some((pg, i))) = (self.unchanged(), self.stack.levels.last_mut()) {
            if forward && *i + 1 < page::count(pg) {
                *i += 1;
                return Ok(true);
            }
            if !forward && *i > 0 {
                *i -= 1;
                return Ok(true);
            }
        }
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let ok = if self.stale(&mut sh)? {
            let mut k = std::mem::take(&mut self.key);
            k.clear();
            if let Some((pg, i)) = self.stack.leaf() {
                k.extend_from_slice(page::key(pg, i));
            }
            if k.is_empty() && !self.stack.valid() {
                self.key = k;
                false
            } else {
                let root = self.root(&mut sh)?;
                let op = if forward { Seek::Gt } else { Seek::Lt };
                let ok = self.stack.seek(&mut *sh, root, &k, op)?;
                self.key = k;
                ok
            }
        } else if forward {
            self.stack.next(&mut *sh)?
        } else {
            self.stack.prev(&mut *sh)?
        };
        self.after(&mut sh, ok)
    }

    pub fn valid(&self) -> bool {
        self.stack.valid()
    }

    /// The current key (`None` when the cursor is off either end).
    pub fn key(&self) -> Option<&[u8]> {
        self.stack.leaf().map(|(pg, i)| page::key(pg, i))
    }

    /// The current key and value together (see [`Cursor::value`]).
    pub fn entry(&mut self) -> Result<(&[u8], &[u8])> {
        let Some((pg, i)) = self.stack.leaf() else {
            return Err(Error::InvalidInput("the cursor is not on an entry".into()));
        };
        let overflow = match page::leaf_value(pg, i) {
            LeafValue::Inline(_) => false,
            LeafValue::Overflow(len, first) => {
                let mut sh = Self::lock(&self.shared, &self.source);
                self.val.clear();
                btree::read_overflow(&mut *sh, len, first, &mut self.val)?;
                true
            }
        };
        let (pg, i) = self.stack.leaf().expect("invariant: checked above");
        let k = page::key(pg, i);
        match page::leaf_value(pg, i) {
            LeafValue::Inline(v) => Ok((k, v)),
            LeafValue::Overflow(..) if overflow => Ok((k, &self.val)),
            LeafValue::Overflow(..) => unreachable!("invariant: checked above"),
        }
    }

    /// The current value if it is stored inline (borrowed from the page, nothing read or
    /// copied); None for an overflow value (use [`Cursor::value`]) or off an entry.
    pub fn inline_value(&self) -> Option<&[u8]> {
        let (pg, i) = self.stack.leaf()?;
        match page::leaf_value(pg, i) {
            LeafValue::Inline(v) => Some(v),
            LeafValue::Overflow(..) => None,
        }
    }

    /// The current value. Inline values are borrowed from the page; overflow values are read
    /// into a buffer the cursor reuses.
    pub fn value(&mut self) -> Result<&[u8]> {
        let Some((pg, i)) = self.stack.leaf() else {
            return Err(Error::InvalidInput("the cursor is not on an entry".into()));
        };
        match page::leaf_value(pg, i) {
            LeafValue::Inline(_) => {}
            LeafValue::Overflow(len, first) => {
                let mut sh = Self::lock(&self.shared, &self.source);
                self.val.clear();
                btree::read_overflow(&mut *sh, len, first, &mut self.val)?;
                return Ok(&self.val);
            }
        }
        let (pg, i) = self.stack.leaf().expect("invariant: checked above");
        match page::leaf_value(pg, i) {
            LeafValue::Inline(v) => Ok(v),
            LeafValue::Overflow(..) => unreachable!("invariant: checked above"),
        }
    }
}

/// Entries between two bounds, in either direction: `while range.next()? { range.key() ... }`.
pub struct Range<F: BlockFile> {
    cursor: Cursor<F>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
}

/// `b` as an owned bound, made in `buf`'s room (taken from it; an unbounded end leaves it).
fn own_into(b: Bound<&[u8]>, buf: &mut Vec<u8>) -> Bound<Vec<u8>> {
    let mut fill = |k: &[u8]| {
        let mut v = std::mem::take(buf);
        v.clear();
        v.extend_from_slice(k);
        v
    };
    match b {
        Bound::Included(k) => Bound::Included(fill(k)),
        Bound::Excluded(k) => Bound::Excluded(fill(k)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl<F: BlockFile> Drop for Range<F> {
    fn drop(&mut self) {
        // The bounds' buffers go back to the cursor, which keeps them for the next one.
        for (b, slot) in [
            (&mut self.lower, &mut self.cursor.bounds.0),
            (&mut self.upper, &mut self.cursor.bounds.1),
        ] {
            if let Bound::Included(k) | Bound::Excluded(k) = std::mem::replace(b, Bound::Unbounded)
            {
                *slot = k;
            }
        }
    }
}

impl<F: BlockFile> Range<F> {
    fn new(mut cursor: Cursor<F>, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> Self {
        let lower = own_into(lower, &mut cursor.bounds.0);
        let upper = own_into(upper, &mut cursor.bounds.1);
        Range {
            cursor,
            lower,
            upper,
            reverse,
            started: false,
        }
    }

    /// Steps to the next entry in range; returns false at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<bool> {
        let ok = if !self.started {
            self.started = true;
            if !self.reverse {
                match &self.lower {
                    Bound::Unbounded => self.cursor.first()?,
                    Bound::Included(k) => self.cursor.seek(k, Seek::Ge)?,
                    Bound::Excluded(k) => self.cursor.seek(k, Seek::Gt)?,
                }
            } else {
                match &self.upper {
                    Bound::Unbounded => self.cursor.last()?,
                    Bound::Included(k) => self.cursor.seek(k, Seek::Le)?,
                    Bound::Excluded(k) => self.cursor.seek(k, Seek::Lt)?,
                }
            }
        } else if self.reverse {
            self.cursor.prev()?
        } else {
            self.cursor.next()?
        };
        if !ok {
            return Ok(false);
        }
        // An unbounded end needs no key: a whole-tree scan does not look at one per entry.
        let far = if self.reverse {
            &self.lower
        } else {
            &self.upper
        };
        if matches!(far, Bound::Unbounded) {
            return Ok(true);
        }
        let k = self.cursor.key().expect("invariant: cursor on an entry");
        let inside = btree::within(k, as_ref(far), !self.reverse);
        if !inside {
            self.cursor.stack.levels.clear();
        }
        Ok(inside)
    }

    pub fn key(&self) -> &[u8] {
        self.cursor.key().unwrap_or(&[])
    }

    pub fn value(&mut self) -> Result<&[u8]> {
        self.cursor.value()
    }

    /// Hands the rest of the range to `f`, entry by entry (key, value), until `f` returns false;
    /// returns whether the range ran out (true) or `f` stopped it (false). The entries of a leaf
    /// are read one after another from the page the cursor holds, instead of through a step of
    /// the cursor each (what a scan spends most of its time on otherwise); only moving to the
    /// next leaf is a step. If `f` changes the tree (in a write transaction), the cursor finds
    /// its place again by key, as a step would.
    pub fn for_each<E, G>(&mut self, mut f: G) -> std::result::Result<bool, E>
    where
        E: From<Error>,
        G: FnMut(&[u8], &[u8]) -> std::result::Result<bool, E>,
    {
        while self.next()? {
            let Some((pg, first)) = self.cursor.stack.leaf().map(|(p, i)| (p.clone(), i)) else {
                return Ok(true);
            };
            let far = if self.reverse {
                as_ref(&self.lower)
            } else {
                as_ref(&self.upper)
            };
            let bounded = !matches!(far, Bound::Unbounded);
            let n = page::count(&pg);
            let mut i = first;
            loop {
                let (key, value) = page::leaf_entry(&pg, i);
                // `next` checked the first entry.
                if bounded && i != first && !btree::within(key, far, !self.reverse) {
                    self.cursor.stack.levels.clear();
                    return Ok(true);
                }
                let go = match value {
                    LeafValue::Inline(v) => f(key, v)?,
                    LeafValue::Overflow(len, page_id) => {
                        let mut val = std::mem::take(&mut self.cursor.val);
                        val.clear();
                        let read = {
                            let mut sh = Cursor::lock(&self.cursor.shared, &self.cursor.source);
                            btree::read_overflow(&mut *sh, len, page_id, &mut val)
                        };
                        let go = read.map_err(E::from).and_then(|()| f(key, &val));
                        self.cursor.val = val;
                        go?
                    }
                };
                let last = if self.reverse { i == 0 } else { i + 1 >= n };
                if !go || last || !self.cursor.unchanged() {
                    // The cursor stays on the entry just handled: the next step leaves it.
                    if let Some(top) = self.cursor.stack.levels.last_mut() {
                        top.1 = i;
                    }
                    if !go {
                        return Ok(false);
                    }
                    break;
                }
                i = if self.reverse { i - 1 } else { i + 1 };
            }
        }
        Ok(true)
    }

    /// The current value if it is inline; see [`Cursor::inline_value`].
    pub fn inline_value(&self) -> Option<&[u8]> {
        self.cursor.inline_value()
    }

    /// The current key and value together.
    pub fn entry(&mut self) -> Result<(&[u8], &[u8])> {
        self.cursor.entry()
    }

    /// Collects the rest of the range (for tests and small scans; allocates per entry).
    pub fn collect_all(&mut self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        while self.next()? {
            let k = self.key().to_vec();
            out.push((k, self.value()?.to_vec()));
        }
        Ok(out)
    }
}

/// `parts` with "; " between them, as `parts.join("; ")` without std's join, which brings about
/// 1 KB of wasm for separators this never uses.
fn joined<S: AsRef<str>>(parts: &[S]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(p.as_ref());
    }
    out
}
