//! The database: transactions over the pager and the trees, the catalog, commit and open.
//!
//! | file | what lives there | what it may call |
//! |---|---|---|
//! | `mod.rs` | [`Db`], [`Options`], [`Durability`], [`CommitInfo`], `State` | everything below |
//! | `open.rs` | [`Db::create`], [`Db::open`] | `superblock`, `shared` |
//! | `superblock.rs` | the two slots' format, the commit list and its check | `pager`, `hash` |
//! | `shared.rs` | `Shared` = `Store` (all that outlives a write) + the open write's state; `At` | `writer`, `btree` (reads) |
//! | `writer.rs` | `WriteState` (exists only while a write is open), `Writer` (the B+tree's `PagesMut`), page allocation and spills | `btree`, `free`, `pager` |
//! | `commit.rs` | `Writer::commit`, `Store::committed`, flush and durability | `writer`, `catalog`, `superblock` |
//! | `catalog.rs` | [`TreeInfo`], [`TreeKind`], catalog reads and changes | `btree` |
//! | `read.rs` | [`ReadTx`], [`Tree`] | `shared`, `catalog`, `cursor` |
//! | `write.rs` | [`WriteTx`] | `shared`, `writer`, `catalog`, `cursor`, `btree` |
//! | `cursor.rs` | [`Cursor`], [`Range`] | `shared`, `btree` (reads) |
//! | `vacuum.rs` | [`Db::vacuum`], [`Db::erase_free_pages`], [`Db::free_pages`] | `writer`, `catalog`, `btree` |
//!
//! **The write transaction owns its state.** `Shared::begin_write` makes a `WriteState` (the
//! state it makes, its changed and owned pages, the free set lent to it, its trees, its root
//! bytes) and the commit or rollback consumes it. Every change borrows it together with the
//! store once, as a `Writer` (`Shared::writer`, which refuses a handle of an ended
//! transaction); nothing else reaches into it but reads of the writer's view (`Pages` for
//! `Shared`, which cursors use).
//!
//! **Commit** (`Writer::commit`): write the changed trees' roots into the catalog, bring the
//! free tree up to date (a small fixed-point loop, since changing the free tree allocates and
//! frees pages itself), write every page this transaction owns, then one superblock that names
//! the new roots and lists every page written since the last flush (in runs of adjacent pages,
//! each with a checksum), then one flush. A crash that keeps the superblock but loses a page is
//! caught at open by that list, and the other slot (the last flushed superblock, never
//! overwritten before the next flush) wins.
//!
//! **Page reuse**: a page freed by commit `T` becomes allocatable only once `T` is durable (so
//! no fallback superblock still needs it) and no open read snapshot is older than `T`.
//!
//! **Life of a write**, from the SQL layer's call to the disk:
//! 1. [`Db::begin_write`] → `Shared::begin_write`: loads the free-page set on first use
//!    (`load_free`), releases pages no snapshot needs (`release_pending`), makes the
//!    `WriteState`.
//! 2. [`WriteTx::insert`] → `Shared::writer` → `btree::insert_keeping`: `owned_leaf` starts
//!    from the leaf the previous write used when the key falls in its range
//!    (`btree::LastLeaf`); otherwise `cow_path` copies each page on the root-to-leaf path that
//!    this transaction does not own (`Writer::alloc_copy` takes the next page of the
//!    transaction's run of free pages, `take_page`,
//!    `Writer::free` queues the old one; over a volatile file nothing is copied to a new page:
//!    `Writer::page_mut` changes a copy kept under the page's own number, which read
//!    transactions do not see, `Shared::changed`). The cell goes in with `page::reserve` (a
//!    value of the same size is rewritten in place), and `fix_up` carries splits (at the
//!    tree's right edge, the new node starts with the new cell alone) or underflows
//!    (`rebalance`) back to the root. `Writer::maybe_spill` writes pages out early when more
//!    than `Options::dirty_pages` are held. Inside the leaf, `search_leaf` tries the slot the
//!    previous write there used first (and the one after it: writes in key order).
//!    [`WriteTx::update_each`] instead walks a range and rewrites each value it changes where
//!    it is (`btree::update_each`), copying only the leaves it changes.
//! 3. [`WriteTx::commit`] → `Shared::commit` → `Writer::commit`: changed roots and counts into
//!    the catalog (`catalog_put`), the free tree brought up to date until it stops changing
//!    itself (`free_delta_in_leaf` while it is one leaf), `write_dirty` (one write call per run
//!    of adjacent pages), then `encode_superblock_into` the slot that is not the last durable
//!    one, then one flush (`Durability::Full`); `Store::committed` then makes the new state
//!    the committed one. Over a volatile file (memory) `write_dirty` only hands the pages to
//!    the cache unwritten and no superblock is written: `Store::write_back` writes both, with
//!    their checksums, when [`Db::into_file`] hands the file back.
//! 4. Open ([`Db::open`]) later reads both superblocks, `verify_list` on the newer one, and the
//!    catalog root.

mod catalog;
mod commit;
mod cursor;
mod open;
mod read;
mod shared;
mod superblock;
mod vacuum;
mod write;
mod writer;

use std::cell::RefCell;
use std::rc::Rc;

pub use catalog::{TreeInfo, TreeKind};
pub use cursor::{Cursor, Range};
pub use read::{ReadTx, Tree};
pub use superblock::FORMAT_VERSION;
pub use write::WriteTx;

pub(crate) use catalog::list as catalog_list;
pub(crate) use shared::Shared;

use crate::error::{Error, Result};
use crate::file::BlockFile;
use superblock::root_meta_room;

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

/// A database over a block file. Single-threaded by design (it lives in one Worker): handles are
/// `Rc`-based and share one pager and cache.
pub struct Db<F: BlockFile> {
    pub(super) shared: Rc<RefCell<Shared<F>>>,
}

impl<F: BlockFile> Db<F> {
    /// The root bytes of the last commit (see [`WriteTx::set_root_meta`]).
    pub fn root_meta(&self) -> Vec<u8> {
        self.shared.borrow().st.root_meta.clone()
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
        let st = &mut sh.st;
        let state = st.state;
        match st.readers.iter_mut().find(|(t, _)| *t == state.txn) {
            Some((_, n)) => *n += 1,
            None => st.readers.push((state.txn, 1)),
        }
        st.serial += 1;
        Ok(ReadTx {
            shared: self.shared.clone(),
            state,
            trees: RefCell::new(Vec::new()),
            serial: st.serial,
            fingers: RefCell::default(),
        })
    }

    /// Makes every relaxed commit so far durable.
    pub fn flush(&self) -> Result<()> {
        self.shared.borrow_mut().st.flush()
    }

    /// The id of the last committed transaction.
    pub fn txn(&self) -> u64 {
        self.shared.borrow().st.state.txn
    }

    /// Number of pages in the file as the last commit sees it.
    pub fn page_count(&self) -> u32 {
        self.shared.borrow().st.state.page_count
    }

    pub fn page_size(&self) -> usize {
        self.shared.borrow().st.pager.page_size
    }

    /// Whether the file is volatile ([`BlockFile::volatile`]: memory, gone with the process).
    pub fn volatile(&self) -> bool {
        self.shared.borrow().st.pager.volatile
    }

    /// Pages currently held by the cache (never more than `Options::cache_pages`).
    pub fn cached_pages(&self) -> usize {
        self.shared.borrow().st.pager.cached_pages()
    }

    /// Page reads that went to the file so far.
    pub fn file_reads(&self) -> u64 {
        self.shared.borrow().st.pager.reads
    }

    pub(crate) fn shared(&self) -> &Rc<RefCell<Shared<F>>> {
        &self.shared
    }

    /// Closes the file (flushing relaxed commits first). Open transactions must be dropped first.
    pub fn close(self) -> Result<()> {
        let mut sh = self.shared.borrow_mut();
        if sh.has_writer() {
            return Err(Error::Busy("a write transaction is still open".into()));
        }
        if sh.st.poisoned.is_none() {
            if sh.st.durable_txn != sh.st.state.txn {
                sh.st.flush()?;
            }
            if sh.st.last_list > 0 {
                // The newest superblock names pages open would read to verify; a final empty
                // commit in the other slot names none, so the next open reads nothing but the
                // superblocks and the catalog root.
                let serial = sh.begin_write()?;
                sh.commit(serial, false)?;
                sh.st.flush()?;
            }
        }
        sh.st.pager.file.close()
    }

    /// Hands the file back without closing it (relaxed commits are not flushed). Fails with
    /// `BUSY` while a transaction or cursor still holds the database.
    pub fn into_file(self) -> Result<F> {
        match Rc::try_unwrap(self.shared) {
            Ok(cell) => {
                let mut st = cell.into_inner().st;
                st.write_back()?;
                Ok(st.pager.file)
            }
            Err(_) => Err(Error::Busy("a transaction or cursor is still open".into())),
        }
    }

    /// Why open did not use the newest superblock, if it did not (a crash in the middle of a
    /// commit, or damage to that superblock).
    pub fn recovery_note(&self) -> Option<String> {
        self.shared.borrow().st.recovered.clone()
    }
}

/// `parts` with "; " between them, as `parts.join("; ")` without std's join, which brings about
/// 1 KB of wasm for separators this never uses.
pub(super) fn joined<S: AsRef<str>>(parts: &[S]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(p.as_ref());
    }
    out
}
