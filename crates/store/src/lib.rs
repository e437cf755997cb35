//! cairn's storage engine.
//!
//! Everything below the SQL layer lives here. At the bottom is the block-file trait
//! ([`BlockFile`]): read and write bytes at an offset, length, set length, flush, close. It has an
//! implementation in memory ([`MemoryFile`]), on the native file system ([`StdFile`]), over the
//! browser's Origin Private File System ([`OpfsFile`], wasm only), and one for fault and crash tests
//! ([`fault::FaultFile`]). [`conformance`] holds the cases every implementation must pass.

pub mod codec;
pub mod conformance;
mod error;
pub mod fault;
mod file;
#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod opfs;
pub mod value;

pub use error::{Error, Result};
pub use file::{BlockFile, MemoryFile};
#[cfg(not(target_arch = "wasm32"))]
pub use native::StdFile;
#[cfg(target_arch = "wasm32")]
pub use opfs::OpfsFile;
pub use value::Value;
