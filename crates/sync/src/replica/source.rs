//! History a host keeps in storage instead of memory. A relay stores every block it accepted;
//! holding them all in its replica too would make its memory grow with everything it ever
//! stored. With a [`BlockSource`] (offered by the replica's row store,
//! [`RowStore::block_source`]), a chain may be cut down to its head: a checkpoint
//! ([`Replica::release_stored`] after the host stored the blocks, [`Replica::restore_head`] at
//! start), and the link reads older blocks from the source when a peer needs them.
//!
//! What this does not change: every block a peer sends is verified as before, against the head
//! the chain holds (a head is all the checks of docs/sync.md sec. 6 need). Blocks read from a
//! source are the host's own, verified before it stored them, and are served as stored.

use super::Replica;
use crate::chain::{Block, ChainKey, Checkpoint};
use crate::error::{Error, Result};
use crate::merge::{RowKey, RowState, RowStore};
use crate::wire::Hash;

/// Where a host keeps the blocks its replica released.
pub trait BlockSource {
    /// Blocks of chain `key`, in seq order, from the one holding record `from` on, with about
    /// `max_records` records in all (at least one block if there is any), none past `upto`.
    /// Every block returned was stored by this host after its replica verified it. A read that
    /// fails, or a stored block that does not decode, is an error (the host reports it; the
    /// link sends nothing of that chain meanwhile).
    fn blocks_from(
        &mut self,
        key: &ChainKey,
        from: u64,
        upto: u64,
        max_records: usize,
    ) -> Result<Vec<Block>>;
}

/// A row store that keeps no rows, for a replica with `Config::merge_rows` off, and lends its
/// block source to the link.
pub struct NoRows<B: BlockSource> {
    pub source: B,
}

impl<B: BlockSource> RowStore for NoRows<B> {
    fn update(&mut self, _key: &RowKey, _f: &mut dyn FnMut(&mut RowState)) {}
    fn get(&self, _key: &RowKey) -> Option<RowState> {
        None
    }
    fn scan(&self, _f: &mut dyn FnMut(&RowKey, &RowState)) {}
    fn reset(&mut self, _base: Option<&crate::merge::MemoryRows>) {}
    fn block_source(&mut self) -> Option<&mut dyn BlockSource> {
        Some(&mut self.source)
    }
}

impl<S: RowStore> Replica<S> {
    /// Drops from memory the sealed blocks of chain `key` up to seq `stored` (which the host
    /// has stored and can give back through its [`BlockSource`]), keeping the last one's head
    /// and signature as the chain's checkpoint. Records not sealed yet stay.
    pub fn release_stored(&mut self, key: &ChainKey, stored: u64) -> Result<()> {
        if self.rows.block_source().is_none() {
            return Err(Error::InvalidInput(
                "release_stored needs a row store with a block source".into(),
            ));
        }
        let Some(log) = self.chains.get_mut(key) else {
            return Ok(());
        };
        let n = log.blocks.partition_point(|b| b.last_seq() <= stored);
        if n == 0 {
            return Ok(());
        }
        log.base = Some(Checkpoint::of_block(&log.blocks[n - 1]));
        log.blocks.drain(..n);
        Ok(())
    }

    /// Sets a chain's head from a checkpoint of the host's own storage (the last block it
    /// stored, verified when it was received), without the blocks: they stay in the
    /// [`BlockSource`]. A chain already held at or past that seq is left as it is.
    pub fn restore_head(&mut self, head: Checkpoint) -> Result<()> {
        if self.rows.block_source().is_none() {
            return Err(Error::InvalidInput(
                "restore_head needs a row store with a block source".into(),
            ));
        }
        self.edits += 1;
        let key = (head.author, head.scope.clone());
        let log = self.chains.entry(key).or_default();
        if head.seq > log.head().0 {
            log.blocks.clear();
            log.pending.clear();
            log.base = Some(head);
        }
        Ok(())
    }

    /// The hash of record `seq` of chain `key` when it was released to the block source (below
    /// the chain's checkpoint, no longer in memory): a peer's block ending there is a replay if
    /// it matches, a fork if not. `None` when held in memory, not released, or not readable.
    pub(crate) fn released_hash_at(&mut self, key: &ChainKey, seq: u64) -> Option<Hash> {
        let log = self.chains.get(key)?;
        let base = log.base.as_ref()?.seq;
        if seq == 0 || seq >= base || log.hash_at(seq).is_some() {
            return None;
        }
        let blocks = self
            .rows
            .block_source()?
            .blocks_from(key, seq, base, 1)
            .ok()?;
        let b = blocks.first()?;
        let idx = seq.checked_sub(b.first_seq())? as usize;
        b.records.get(idx).map(|r| r.hash)
    }

    /// Whether older history comes from a [`BlockSource`]: a peer behind the checkpoints is
    /// then sent blocks, never a snapshot.
    pub(crate) fn has_block_source(&mut self) -> bool {
        self.rows.block_source().is_some()
    }

    /// Stored blocks of chain `key` from seq `from` up to its checkpoint, at most about
    /// `max_records` records; empty when there is no source or it failed (the source keeps the
    /// failure for its host).
    pub(crate) fn stored_blocks(&mut self, key: &ChainKey, from: u64, max: usize) -> Vec<Block> {
        let Some(upto) = self
            .chains
            .get(key)
            .and_then(|l| l.base.as_ref())
            .map(|c| c.seq)
        else {
            return Vec::new();
        };
        if from > upto {
            return Vec::new();
        }
        match self.rows.block_source() {
            Some(src) => src.blocks_from(key, from, upto, max).unwrap_or_default(),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Op, Payload};
    use crate::identity::Identity;
    use crate::link::Link;
    use crate::replica::Config;
    use crate::scope::ScopeId;
    use crate::TableSchema;
    use cairn_value::Value;
    use std::collections::BTreeMap;

    /// Blocks "on disk": what a host stored, by chain and first seq.
    #[derive(Default)]
    struct Disk {
        blocks: BTreeMap<(ChainKey, u64), Block>,
        reads: usize,
        fail: bool,
    }

    impl BlockSource for Disk {
        fn blocks_from(
            &mut self,
            key: &ChainKey,
            from: u64,
            upto: u64,
            max: usize,
        ) -> Result<Vec<Block>> {
            if self.fail {
                return Err(Error::Malformed("a stored block does not decode".into()));
            }
            let mut out = Vec::new();
            let mut n = 0;
            for ((k, _), b) in &self.blocks {
                if k != key || b.last_seq() < from || b.last_seq() > upto {
                    continue;
                }
                if n >= max {
                    break;
                }
                n += b.records.len();
                self.reads += 1;
                out.push(b.clone());
            }
            Ok(out)
        }
    }

    fn relay_config() -> Config {
        Config {
            accept_unknown_tables: true,
            report_rows: false,
            merge_rows: false,
            page_records: 7,
            ..Config::default()
        }
    }

    fn writer(secret: u8) -> Replica {
        let mut r = Replica::in_memory(Identity::from_secret([secret; 32]), Config::default());
        r.register_table(TableSchema::new("t", 1).lww("a"))
            .expect("invariant: valid");
        r
    }

    /// Delivers messages both ways until neither side has anything to say.
    fn sync<A: RowStore, B: RowStore>(a: &mut Replica<A>, b: &mut Replica<B>) {
        let (mut la, mut lb) = (Link::new(), Link::new());
        let mut to_b = vec![a.open_link(&mut la, 1000)];
        let mut to_a = vec![b.open_link(&mut lb, 1000)];
        for _ in 0..1000 {
            if to_a.is_empty() && to_b.is_empty() {
                to_a = a.poll(&mut la, 1000);
                to_b = b.poll(&mut lb, 1000);
                if to_a.is_empty() && to_b.is_empty() {
                    return;
                }
            }
            for m in std::mem::take(&mut to_b) {
                to_a.extend(b.handle(&mut lb, 1000, &m).send);
            }
            for m in std::mem::take(&mut to_a) {
                to_b.extend(a.handle(&mut la, 1000, &m).send);
            }
        }
        panic!("sync did not settle");
    }

    #[test]
    fn a_replica_holding_only_heads_serves_history_from_its_source() {
        let mut w = writer(1);
        let scope = ScopeId::new(w.id(), "t");
        let key = (w.id(), scope.clone());
        let mut relay = Replica::new(
            Identity::from_secret([9; 32]),
            relay_config(),
            NoRows {
                source: Disk::default(),
            },
        );
        for round in 0..5 {
            for i in 0..6 {
                let op = Op::new(
                    "t",
                    vec![Value::Integer(round * 10 + i)],
                    Payload::Set(vec![(0, Value::Integer(i))]),
                );
                w.commit(1000, &scope, vec![op]).expect("commit");
            }
            sync(&mut w, &mut relay);
            // The host stores what its replica took in, then lets it go.
            for b in relay.chain(&key).expect("held").blocks.clone() {
                relay
                    .rows
                    .source
                    .blocks
                    .insert((key.clone(), b.first_seq()), b);
            }
            relay.release_stored(&key, u64::MAX).expect("a source");
            let log = relay.chain(&key).expect("held");
            assert!(log.blocks.is_empty(), "only the head is held");
            assert_eq!(log.head().0, (round as u64 + 1) * 6);
        }
        assert!(relay
            .rows
            .get(&RowKey::new("t", &scope, &[Value::Integer(1)]))
            .is_none());

        // A fresh peer gets the whole history, as blocks read from the source and verified
        // as any peer's blocks, never a snapshot.
        let mut fresh = writer(2);
        fresh.config_mut().snapshot_when_empty = true;
        sync(&mut relay, &mut fresh);
        assert!(relay.rows.source.reads > 0);
        assert_eq!(fresh.version_vector(), w.version_vector());
        assert_eq!(fresh.state_digest(), w.state_digest());
        assert!(fresh.verify().is_empty());

        // A new block from the writer is verified against the head alone; one that forks it
        // is refused.
        let op = Op::new(
            "t",
            vec![Value::Integer(99)],
            Payload::Set(vec![(0, Value::Integer(99))]),
        );
        w.commit(1000, &scope, vec![op]).expect("commit");
        sync(&mut w, &mut relay);
        assert_eq!(relay.chain(&key).expect("held").head().0, 31);
        let mut forged = w
            .chain(&key)
            .expect("held")
            .blocks
            .last()
            .expect("a block")
            .clone();
        forged.records[0].hlc += 1;
        let events = relay.receive_blocks(1000, vec![forged]);
        assert!(
            events
                .iter()
                .all(|e| !matches!(e, crate::replica::Event::Applied { .. })),
            "{events:?}"
        );

        // A clone of the writer (same key) signs other records at seqs the relay released: a
        // fork, found by reading the stored record, not taken for a replay.
        let mut clone = writer(1);
        let op = Op::new(
            "t",
            vec![Value::Integer(7)],
            Payload::Set(vec![(0, Value::Integer(-7))]),
        );
        clone.commit(1000, &scope, vec![op]).expect("commit");
        clone.seal();
        let branch = clone.chain(&key).expect("written").blocks.clone();
        let events = relay.receive_blocks(1000, branch.clone());
        assert!(
            events.iter().any(|e| matches!(
                e,
                crate::replica::Event::Rejected {
                    reason: crate::error::Reason::Fork,
                    ..
                }
            )),
            "{events:?}"
        );
        assert!(relay.forks().contains(&w.id()));
        // The genuine stored block is still a replay.
        let stored = relay
            .rows
            .source
            .blocks
            .values()
            .next()
            .expect("stored")
            .clone();
        let events = relay.receive_blocks(1000, vec![stored]);
        assert!(
            events.iter().all(|e| matches!(
                e,
                crate::replica::Event::Rejected {
                    reason: crate::error::Reason::Replay,
                    ..
                }
            )),
            "{events:?}"
        );

        // A failing source sends nothing of the chain (and panics nowhere).
        relay.rows.source.fail = true;
        let mut other = writer(3);
        sync(&mut relay, &mut other);
        assert_eq!(other.version_vector().get(&key).copied().unwrap_or(0), 0);
    }

    #[test]
    fn a_replica_without_rows_neither_serves_nor_installs_snapshots() {
        let mut relay = Replica::new(
            Identity::from_secret([9; 32]),
            relay_config(),
            NoRows {
                source: Disk::default(),
            },
        );
        let w = writer(1);
        let cp = Checkpoint {
            author: w.id(),
            scope: ScopeId::new(w.id(), "t"),
            seq: 1,
            hash: [0; 32],
            sig: [0; 64],
        };
        let events = relay.install_snapshot(1_700_000_000_000, vec![cp], Vec::new(), Vec::new());
        assert!(matches!(
            events.as_slice(),
            [crate::replica::Event::Rejected { .. }]
        ));
        assert!(relay.chains().next().is_none());
    }
}
