//! cairn's storage engine.
//!
//! Everything below the SQL layer lives here. At the bottom is the block-file trait
//! ([`BlockFile`]): read and write bytes at an offset, length, set length, flush, close. It has an
//! implementation in memory ([`MemoryFile`]), on the native file system ([`StdFile`]), over the
//! browser's Origin Private File System ([`OpfsFile`], wasm only), and one for fault and crash tests
//! ([`fault::FaultFile`]). [`conformance`] holds the cases every implementation must pass.
//!
//! Above it, one database file of fixed-size pages (`docs/file-format.md` has every byte), each
//! layer calling only the ones listed before it:
//! - `pager`: whole-page reads and writes, XXH64 page checksums (`hash`), a bounded CLOCK cache;
//!   `free`: the free-page set the allocator takes pages from.
//! - `page`: the slotted layout of leaf, branch and overflow pages.
//! - `btree`: copy-on-write B+tree algorithms over byte keys and values, seeing pages only
//!   through its `Pages`/`PagesMut` traits: `read` (look-ups, the cursor stack), `write`
//!   (insert and remove with their splits and fix-ups), `update` (`update_each`), `build`
//!   (bulk build, relocation for vacuum), `last_leaf` (the fast path from the last write).
//! - `db`: the database over them: `superblock` (the two slots, the commit list), `open`
//!   ([`Db::open`], [`Db::create`]), `shared` (the store behind every handle), `writer` (the
//!   open write transaction's own state and the page allocator), `commit` (commit, flush,
//!   durability), `catalog` (a tree of trees: [`TreeInfo`]), `read` ([`ReadTx`]), `write`
//!   ([`WriteTx`]), `cursor` ([`Cursor`], [`Range`]), `vacuum`.
//! - `check`: [`Db::check`], the integrity walk, and [`IndexHook`] for index-vs-table checks.
//!
//! The store knows nothing of SQL: keys and values are bytes. The SQL values and their
//! encodings are `cairn-value`'s.
//!
//! # Using it
//! ```
//! use cairn_store::{Db, MemoryFile, Options, TreeKind};
//! use std::ops::Bound;
//! let db = Db::create(MemoryFile::new(), Options::default())?;
//! let mut tx = db.begin_write()?;
//! let t = tx.create_tree("users", TreeKind::Table)?;
//! tx.insert(t, b"k1", b"v1")?;
//! tx.commit()?; // durable on return with Durability::Full (the default)
//! let r = db.begin_read()?; // a snapshot of the last commit
//! let t = r.open_tree("users")?;
//! assert_eq!(r.get(t, b"k1")?, Some(b"v1".to_vec()));
//! let mut range = r.range(t, Bound::Included(b"k0"), Bound::Unbounded, false)?;
//! while range.next()? {
//!     let (key, value) = range.entry()?;
//!     assert_eq!((key, value), (&b"k1"[..], &b"v1"[..]));
//! }
//! # Ok::<(), cairn_store::Error>(())
//! ```
//!
//! # What the SQL layer must know
//! - **One writer, many readers, one thread.** Handles are `Rc`-based (the engine lives in one
//!   Worker). `begin_write` fails with `BUSY` while another write transaction is open. A
//!   [`ReadTx`] sees the last commit as of `begin_read`; while it is open, pages freed after it
//!   are not reused, so long-lived readers make a busy file grow.
//! - **Tree handles** ([`Tree`]) come from `open_tree`/`create_tree` and are valid only in the
//!   transaction that returned them (cheap to keep for its duration; no name lookup per call).
//! - **Keys** are compared bytewise; the SQL layer builds them with
//!   `cairn_value::codec::encode_key`. Row-id tables use the integer key encoding (4 to 6 bytes
//!   up to 8192). A key may be at most `(page_size - 32) / 4 -
//!   13` bytes (1003 at 4 KiB; `TOO_LARGE` beyond); values of any size up to 2 GiB (large ones go
//!   to overflow pages).
//! - `insert` returns whether the key existed (not the old value: fetch it first if needed);
//!   `remove` likewise. `len` is an exact entry count kept in the catalog.
//! - **Cursors in a write transaction** may outlive changes to their tree: the next step finds
//!   its place again by key (the entry after, or before, the last one returned).
//! - **Hot paths**: `get_into` reuses the caller's buffer; `Range::entry` borrows key and value
//!   from the page (no allocation per row); `bulk_load` builds a tree from sorted pairs.
//! - **Metadata**: [`WriteTx::set_meta`] stores the caller's schema bytes in the catalog
//!   ([`WriteTx::set_meta_of`] by name, for a tree not opened otherwise);
//!   [`TreeKind::Index`] names an index's table so [`Db::check_with`] can compare them.
//! - **Change tracking**: `commit` returns a [`CommitInfo`] naming the trees it changed (for live
//!   queries); keys are not tracked.
//! - **Errors**: one [`Error`] enum with stable codes. A failed commit leaves the last committed
//!   state in place and the database needing a reopen before the next write (`NEEDS_REOPEN`).
//! - **Durability**: `Full` flushes once per commit; `Relaxed` flushes on [`Db::flush`]/`close`
//!   and loses at most the commits since the last flush, in order. In memory (a volatile file)
//!   a commit writes nothing: pages wait in the cache and reach the file, with their checksums,
//!   on eviction or when [`Db::into_file`] hands it back.
//! - **Open** reads the two superblocks, the pages the last commit wrote (to detect a torn
//!   commit; at most 4 MiB of them, `Options::list_bytes`) and the catalog root, never the
//!   rows. The free-page set is loaded by the first write transaction (one scan of the free
//!   tree). A file of another format version than [`FORMAT_VERSION`] is refused
//!   (`UNSUPPORTED_VERSION`), never read.

#![forbid(unsafe_code)]

mod btree;
mod check;
pub mod conformance;
mod db;
mod error;
pub mod fault;
mod file;
mod free;
pub mod hash;
#[doc(hidden)]
pub mod model;
#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod opfs;
#[cfg(all(target_arch = "wasm32", feature = "async-opfs"))]
mod opfs_open;
mod page;
mod pager;
pub mod sort;

pub use btree::{Each, Replaced, Rewrite, Seek};
pub use check::{IndexHook, Problem, Report};
pub use db::{
    CommitInfo, Cursor, Db, Durability, Options, Range, ReadTx, Tree, TreeInfo, TreeKind, WriteTx,
    FORMAT_VERSION,
};
pub use error::{Error, Result};
pub use file::{BlockFile, MemoryFile};
pub use hash::xxh64;
#[cfg(not(target_arch = "wasm32"))]
pub use native::StdFile;
#[cfg(target_arch = "wasm32")]
pub use opfs::OpfsFile;
