//! cairn's SQL values and their encodings, shared by the SQL engine, the sync layer and the
//! storage engine's callers. The store itself sees only bytes.
//!
//! - [`Value`]: NULL, INTEGER, REAL, TEXT or BLOB, and SQLite's order over them.
//! - [`codec`]: the order-preserving key encoding table and index trees are keyed by, and the
//!   record encoding rows are stored in (both part of the file format, `docs/file-format.md`).
//! - [`wire`]: the value encoding of the sync wire (`docs/sync.md`).
//! - [`coll`]: the order and JSON text of replicated sets and maps.
//! - [`num`]: decimal text to `f64` and back; [`text`]: short joins and SQL quoting.

#![forbid(unsafe_code)]

pub mod codec;
pub mod coll;
mod error;
pub mod num;
pub mod text;
mod value;
pub mod wire;

pub use error::{Error, Result};
pub use value::Value;
