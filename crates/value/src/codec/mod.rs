//! Byte encodings of SQL values. Both are part of the file format (`docs/file-format.md`); change
//! them only with a format version bump.
//!
//! - `key`: the order-preserving key encoding that table and index trees are keyed by
//!   ([`encode_key`], [`decode_key`], ...).
//! - `record`: the record encoding rows are stored in ([`encode_record`], [`Record`],
//!   [`Layout`], [`Fields`], ...), and the varints its header is made of.
//!
//! Everything public in both is re-exported here: callers name `cairn_value::codec::...`.

mod key;
mod record;

pub use key::*;
pub use record::*;

#[cfg(test)]
mod tests;
