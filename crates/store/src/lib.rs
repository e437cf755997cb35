//! cairn's storage engine.
//!
//! Everything below the SQL layer lives here. At the bottom is the block-file trait
//! ([`BlockFile`]): read and write bytes at an offset, length, set length, flush, close. It has an
//! implementation in memory ([`MemoryFile`]), on the native file system ([`StdFile`]), over the
//! browser's Origin Private File System ([`OpfsFile`], wasm only), and one for fault and crash tests
//! ([`fault::FaultFile`]). [`conformance`] holds the cases every implementation must pass.

mod btree;
mod check;
pub mod codec;
pub mod conformance;
mod db;
mod error;
pub mod fault;
mod file;
mod hash;
#[doc(hidden)]
pub mod model;
#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod opfs;
mod page;
mod pager;
pub mod value;

pub use btree::Seek;
pub use check::{IndexHook, Problem, Report};
pub use db::{
    Cursor, Db, Durability, Options, Range, ReadTx, Tree, TreeInfo, TreeKind, WriteTx,
    FORMAT_VERSION,
};
pub use error::{Error, Result};
pub use file::{BlockFile, MemoryFile};
pub use hash::xxh64;
#[cfg(not(target_arch = "wasm32"))]
pub use native::StdFile;
#[cfg(target_arch = "wasm32")]
pub use opfs::OpfsFile;
pub use value::Value;
