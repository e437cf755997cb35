//! The wasm-bindgen entry that runs inside cairn's dedicated Worker.
//!
//! The Worker's engine host (`worker/engine.js`) calls the functions exported here for the
//! requests from the page; they answer with plain values and `Uint8Array`s, and a statement with
//! its result encoded in wasm memory for the Worker to read (`database::Encoder`). Every error
//! thrown to JavaScript is an `Error` whose `code` property is the stable code of the Rust error
//! (`cairn_store::Error::code`).
//!
//! The block-file surface (`file_*`, `conformance_*`) exposes OPFS files opened from Rust for the
//! browser tests of the storage layer; it is built only with the `testing` feature.

#![forbid(unsafe_code)]

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod database;
#[cfg(all(target_arch = "wasm32", feature = "testing"))]
mod files;

#[cfg(target_arch = "wasm32")]
pub use bindings::*;
#[cfg(target_arch = "wasm32")]
pub use database::Database;
#[cfg(all(target_arch = "wasm32", feature = "testing"))]
pub use files::*;

// The allocator: talc instead of std's dlmalloc, smaller in the module and faster
// (docs/size.md, "The build"). The Worker runs the module on one thread.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
