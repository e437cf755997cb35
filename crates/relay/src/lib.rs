//! cairn-relay: a native server that speaks cairn's sync protocol over WebSocket, stores every
//! block it accepts, and forwards blocks to the clients entitled to them (docs/relay.md).
//!
//! The life of a block through the relay:
//! 1. [`server::Relay::start`] opens the store ([`store::Store::open`]) on the core thread,
//!    rebuilds the replica from it ([`store::Durable::load_into`]: every list goes back through
//!    `Replica::add_writer_list`, each chain's head is set from its last stored block) and
//!    accepts connections.
//! 2. [`http::route`] peeks each request: `/health` and `/metrics` are answered there; a
//!    WebSocket goes to [`conn::serve`], which sends a CHALLENGE ([`frame::Frame`]), checks the
//!    app's TOKEN when the relay requires one ([`auth::AuthConfig::check`]) and the AUTH
//!    signature, then checks every frame's size, the write rate and the HELLO's key. The core
//!    binds the key to the token's user ([`store::Durable::bind_key`]) before its WELCOME.
//! 3. The sync message goes to the [`core::Core`] thread, which runs `Replica::handle` over the
//!    connection's `Link` (signatures, chains, writer lists and clocks checked as any replica
//!    does), stores what was applied ([`store::Durable::persist`]) in one commit per batch, lets
//!    the stored blocks leave memory ([`source::release_stored`]), and only then sends the ACK
//!    and polls every other link, which forwards the new blocks to each client that may read
//!    their scope. A client that lacks older history gets it read back from the store through a
//!    bounded cache ([`source::Source`]).
//!
//! [`client`] is the Rust side: the handshake, and a replica kept in sync through a relay.

#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
pub mod conn;
pub mod core;
pub mod error;
pub mod frame;
pub mod http;
pub mod metrics;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod server;
pub mod source;
pub mod store;

pub use auth::AuthConfig;
pub use error::{Error, Result};
pub use frame::{Code, Frame, Refusal};
pub use server::{Limits, Relay, RelayConfig};
