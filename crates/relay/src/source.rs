//! The relay's replica holds each chain's head only (docs/relay.md sec. 6): once a batch is
//! stored, its blocks leave memory ([`release_stored`]), and a client that needs older history
//! gets it from the store, read through a bounded cache ([`Source`], the replica's
//! `BlockSource`). What the relay holds in memory grows with its chains and connections, not
//! with the blocks it stored.

use crate::error::Error;
use crate::store::{chain_hash, Durable};
use cairn_sync::chain::ChainKey;
use cairn_sync::change::{OpBody, Payload};
use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{Block, BlockSource, NoRows, Replica, RowKey, ScopeId};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

/// The relay's replica: no merged rows, history in the store.
pub type RelayReplica = Replica<NoRows<Source>>;
/// The store, shared by the core (writes) and the replica's source (reads). Both run on the
/// core thread, one at a time.
pub type SharedStore = Rc<RefCell<Box<dyn Durable>>>;

/// Reads released blocks back from the store for the replica's links, through a cache of at
/// most `capacity` bytes of decoded blocks (as estimated by [`held_size`]; first in, first out:
/// clients catching up on one chain read the same blocks one after the other).
pub struct Source {
    store: SharedStore,
    cache: BTreeMap<([u8; 32], u64), (Block, usize)>,
    order: VecDeque<([u8; 32], u64)>,
    bytes: usize,
    capacity: usize,
    /// The first read that failed since the core last looked ([`Source::take_failure`]).
    failure: Option<Error>,
    /// Blocks read from the store (cache misses), for the metrics.
    pub reads: u64,
    /// Rows purged by a stored record: their values are erased from every block served
    /// (docs/sync.md sec. 8), though the stored bytes keep them.
    purged: BTreeSet<RowKey>,
}

impl Source {
    pub fn new(store: SharedStore, capacity: usize) -> Source {
        Source {
            store,
            cache: BTreeMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            capacity,
            failure: None,
            reads: 0,
            purged: BTreeSet::new(),
        }
    }

    /// Rows purged by records now stored.
    pub fn add_purged(&mut self, rows: impl IntoIterator<Item = RowKey>) {
        self.purged.extend(rows);
    }

    /// Replaces the ops on purged rows with their redacted form, as a replica that applied the
    /// purge does with its history (the hashes, and so the signatures, still verify).
    fn redact(&self, b: &mut Block) {
        if !self.purged.iter().any(|k| k.scope == b.scope) {
            return;
        }
        for rec in &mut b.records {
            for op in &mut rec.ops {
                // Only DELETE and PURGE carry no values; the PURGE itself must travel intact.
                if op.payload().is_some_and(Payload::carries_values)
                    && self
                        .purged
                        .contains(&RowKey::new(&op.table, &b.scope, &op.pk))
                {
                    *op = op.redacted();
                }
            }
        }
    }

    /// A read that failed (the store, or a stored block that does not decode: `CORRUPT`).
    pub fn take_failure(&mut self) -> Option<Error> {
        self.failure.take()
    }

    /// Bytes of blocks held in the cache.
    pub fn cached_bytes(&self) -> usize {
        self.bytes
    }

    fn remember(&mut self, chain: [u8; 32], block: &Block, size: usize) {
        if size > self.capacity {
            return;
        }
        let key = (chain, block.last_seq());
        if self.cache.contains_key(&key) {
            return;
        }
        while self.bytes + size > self.capacity {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some((_, s)) = self.cache.remove(&old) {
                self.bytes -= s;
            }
        }
        self.cache.insert(key, (block.clone(), size));
        self.order.push_back(key);
        self.bytes += size;
    }

    /// Cached blocks of `chain` from the one holding `from` on, while they follow each other.
    fn cached(&self, chain: [u8; 32], from: u64, upto: u64, max: usize) -> Vec<Block> {
        let mut out: Vec<Block> = Vec::new();
        let mut n = 0;
        let mut next = from;
        while n < max && next <= upto {
            let Some((_, (b, _))) = self.cache.range((chain, next)..=(chain, u64::MAX)).next()
            else {
                break;
            };
            if b.first_seq() > next || b.last_seq() > upto {
                break;
            }
            n += b.records.len();
            next = b.last_seq() + 1;
            out.push(b.clone());
        }
        out
    }
}

impl BlockSource for Source {
    fn blocks_from(
        &mut self,
        key: &ChainKey,
        from: u64,
        upto: u64,
        max: usize,
    ) -> cairn_sync::Result<Vec<Block>> {
        let chain = chain_hash(key);
        let mut out = self.cached(chain, from, upto, max);
        let n: usize = out.iter().map(|b| b.records.len()).sum();
        let next = out.last().map_or(from, |b| b.last_seq() + 1);
        if n >= max || next > upto {
            out.iter_mut().for_each(|b| self.redact(b));
            return Ok(out);
        }
        // The store is busy while it feeds another relay's rows (PostgreSQL) to the replica:
        // those are blocks of the shared store, verified when stored, and a block of them that
        // ends in released history is then taken as the replay it is.
        let Ok(mut store) = self.store.try_borrow_mut() else {
            return Err(cairn_sync::Error::InvalidInput(
                "the store is feeding the replica".into(),
            ));
        };
        let read = store.read_blocks(key, next, upto, max - n);
        drop(store);
        match read {
            Ok(blocks) => {
                for (b, encoded) in blocks {
                    self.reads += 1;
                    let size = held_size(&b, encoded);
                    self.remember(chain, &b, size);
                    out.push(b);
                }
                out.iter_mut().for_each(|b| self.redact(b));
                Ok(out)
            }
            Err(e) => {
                let message = e.to_string();
                self.failure.get_or_insert(e);
                Err(cairn_sync::Error::Malformed(message))
            }
        }
    }
}

/// Lets go of every block the store holds (the chain's head stays, as a checkpoint).
pub fn release_stored(replica: &mut RelayReplica, store: &SharedStore) {
    let store = store.borrow();
    let stored: Vec<(ChainKey, u64)> = replica
        .chains()
        .filter(|(_, log)| !log.blocks.is_empty())
        .map(|(k, _)| (k.clone(), store.stored_head(k)))
        .filter(|(_, h)| *h > 0)
        .collect();
    drop(store);
    for (key, head) in stored {
        replica
            .release_stored(&key, head)
            .expect("invariant: the relay's replica has a block source");
    }
}

/// The rows that PURGE ops of `blocks` purge.
pub fn purges<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> Vec<RowKey> {
    let mut out = Vec::new();
    for b in blocks {
        for rec in &b.records {
            for op in &rec.ops {
                if matches!(op.body, OpBody::Full(Payload::Purge)) {
                    out.push(RowKey::new(&op.table, &b.scope, &op.pk));
                }
            }
        }
    }
    out
}

/// A purged row as stored: `bytes table`, `scope`, `bytes pk` (docs/relay.md sec. 6).
pub fn encode_row(k: &RowKey) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(k.table.as_bytes());
    k.scope.encode(&mut w);
    w.bytes(&k.pk);
    w.buf
}

pub fn decode_row(bytes: &[u8]) -> crate::Result<RowKey> {
    let corrupt = |e: cairn_sync::Error| Error::Corrupt(format!("a stored purged row: {e}"));
    let mut r = Reader::new(bytes);
    let table = r.text().map_err(corrupt)?;
    let scope = ScopeId::decode(&mut r).map_err(corrupt)?;
    let pk = r.bytes().map_err(corrupt)?.to_vec();
    r.finish().map_err(corrupt)?;
    Ok(RowKey { table, scope, pk })
}

/// What a decoded block takes in memory, about: its encoding (the values, keys and hashes it
/// holds) plus the structures around each record and op.
pub fn held_size(b: &Block, encoded: usize) -> usize {
    let ops: usize = b.records.iter().map(|r| r.ops.len()).sum();
    encoded + 160 + 128 * b.records.len() + 128 * ops
}
