//! cairn-sync: makes a cairn database a replica (docs/sync.md has every byte).
//!
//! The life of a change:
//! 1. A SQL commit that touched replicated tables calls [`Replica::commit`] with the ops
//!    ([`change::Op`]: set columns, delete, add to a counter, purge) for one scope. The replica
//!    ticks its hybrid logical clock ([`hlc`]), appends a [`change::Record`] to its chain for
//!    that scope (BLAKE3 over the record and its predecessor's hash; no signature), and joins the
//!    ops into the merged rows ([`merge`]), which the SQL layer keeps behind [`merge::RowStore`].
//! 2. Before anything leaves the replica, [`Replica::seal`] turns pending records into one
//!    [`chain::Block`] per chain, signed once (Ed25519) over the head it ends at.
//! 3. [`Replica::open_link`], [`Replica::handle`] and [`Replica::poll`] run the protocol over a
//!    [`link::Link`]: HELLO with version vectors, WRITERS, BLOCKS in bounded pages, ACKs,
//!    SNAPSHOTs ([`protocol::Message`]). Bytes in, bytes and [`replica::Event`]s out, time passed in.
//! 4. On the other side [`Replica::receive_blocks`] batch-verifies the signatures, checks chain
//!    continuity, the author's right to the scope ([`scope::WriterList`]), the clock and the
//!    schema, and applies a block whole or rejects it whole with a [`error::Reason`].
//! 5. [`Replica::compact`] drops history every known peer acknowledged, up to the heads its
//!    scope's owner signed the rows at ([`attest::Attestation`]); [`Replica::verify`]
//!    re-checks everything held.

#![forbid(unsafe_code)]

pub mod attest;
pub mod chain;
pub mod change;
pub mod error;
pub mod hlc;
pub mod identity;
pub mod link;
pub mod merge;
pub mod owner;
pub mod protocol;
pub mod replica;
pub mod scope;
pub mod wire;

pub use attest::Attestation;
pub use cairn_value::Value;
pub use chain::{Block, ChainKey, ChainLog, Checkpoint};
pub use change::{Op, OpsWriter, Payload, Record, WholeRow};
pub use error::{Error, Reason, Result};
pub use identity::{AuthorId, Identity};
pub use link::{Link, Output};
pub use merge::{ColumnKind, MemoryRows, RowKey, RowState, RowStore, TableSchema, Version};
pub use owner::{key_owner, KeyOwner};
pub use protocol::{Heads, Message, VersionVector};
pub use replica::{Attested, BlockSource, Config, Event, Failure, NoRows, PeerInfo, Replica};
pub use scope::{ScopeFilter, ScopeId, Subscription, WriterList};
