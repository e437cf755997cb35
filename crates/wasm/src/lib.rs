//! The wasm-bindgen entry that runs inside cairn's dedicated Worker.
//!
//! The Worker script (`worker/worker.js`) decodes each message from the page and calls one of the
//! functions exported here; they answer with plain values and `Uint8Array`s, and a statement with
//! its result encoded in wasm memory for the Worker to read (`database::Encoder`). Every error thrown to JavaScript is an `Error`
//! whose `code` property is the stable code of the Rust error (`cairn_store::Error::code`).
//!
//! The block-file surface (`file_*`) exposes OPFS files opened from Rust, for the storage round
//! trip in the playground and for the browser conformance tests.

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod database;

#[cfg(target_arch = "wasm32")]
pub use bindings::*;
#[cfg(target_arch = "wasm32")]
pub use database::Database;
