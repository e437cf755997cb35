//! History as a whole: `verify()` re-checks every signature and hash held, compaction drops
//! what every peer acknowledged (keeping checkpoints), and snapshots hand a peer the merged
//! rows with the checkpoints they stand on.

use super::{Event, Failure, Replica};
use crate::chain::{verify_signatures, Block, Checkpoint};
use crate::change::record_hash;
use crate::error::Reason;
use crate::merge::{RowKey, RowState, RowStore};
use crate::scope::ScopeId;
use crate::wire::ZERO_HASH;
use std::collections::BTreeSet;

impl<S: RowStore> Replica<S> {
    /// Re-checks every stored signature and every hash of every chain held; lists what fails.
    pub fn verify(&self) -> Vec<Failure> {
        assert!(
            self.unhashed.is_empty(),
            "invariant: deferred records are hashed before history is verified"
        );
        let mut failures = Vec::new();
        let mut to_sign: Vec<&Block> = Vec::new();
        for ((author, scope), log) in &self.chains {
            let fail = |seq: u64, reason: Reason, detail: &str| Failure {
                author: *author,
                scope: scope.clone(),
                seq,
                reason,
                detail: detail.to_string(),
            };
            let (mut seq, mut prev) = (0, ZERO_HASH);
            if let Some(cp) = &log.base {
                if cp.check().is_err() {
                    failures.push(fail(cp.seq, Reason::BadSignature, "checkpoint signature"));
                }
                seq = cp.seq;
                prev = cp.hash;
            }
            let records = log
                .blocks
                .iter()
                .flat_map(|b| b.records.iter())
                .chain(log.pending.iter());
            for rec in records {
                if Some(rec.seq) != seq.checked_add(1) {
                    failures.push(fail(rec.seq, Reason::ChainGap, "records not consecutive"));
                }
                if rec.prev != prev {
                    failures.push(fail(rec.seq, Reason::Fork, "previous hash does not match"));
                }
                let h = record_hash(author, scope, rec.seq, rec.hlc, &rec.prev, &rec.ops);
                if h != rec.hash {
                    failures.push(fail(
                        rec.seq,
                        Reason::BadSignature,
                        "record hash does not match its content",
                    ));
                }
                seq = rec.seq;
                prev = h;
            }
            to_sign.extend(log.blocks.iter());
        }
        for (b, r) in to_sign.iter().zip(verify_signatures(&to_sign)) {
            if r.is_err() {
                failures.push(Failure {
                    author: b.author,
                    scope: b.scope.clone(),
                    seq: b.last_seq(),
                    reason: Reason::BadSignature,
                    detail: "block signature".into(),
                });
            }
        }
        failures
    }

    /// Drops, per chain, the whole blocks every known peer that follows the scope has
    /// acknowledged, keeping the last dropped block's head and signature as a checkpoint.
    /// Returns the number of records dropped.
    pub fn compact(&mut self) -> usize {
        self.edits += 1;
        // The records dropped must reach the rows first.
        self.catch_up();
        let mut dropped = 0;
        for (key, log) in self.chains.iter_mut() {
            let horizon = self
                .peers
                .values()
                .filter(|p| p.want.covers(&key.1))
                .map(|p| p.acked.get(key).copied().unwrap_or(0))
                .min()
                .unwrap_or(u64::MAX);
            let n = log
                .blocks
                .iter()
                .take_while(|b| b.last_seq() <= horizon)
                .count();
            if n == 0 {
                continue;
            }
            let last = &log.blocks[n - 1];
            log.base = Some(Checkpoint::of_block(last));
            dropped += log
                .blocks
                .drain(..n)
                .map(|b| b.records.len())
                .sum::<usize>();
        }
        dropped
    }

    /// The sealed heads of the chains a subscription covers, as checkpoints (for a snapshot).
    pub(crate) fn checkpoints_for(&self, covers: impl Fn(&ScopeId) -> bool) -> Vec<Checkpoint> {
        self.chains
            .iter()
            .filter(|((_, s), _)| covers(s))
            .filter_map(|(_, log)| match log.blocks.last() {
                Some(b) => Some(Checkpoint::of_block(b)),
                None => log.base.clone(),
            })
            .collect()
    }

    /// Installs a snapshot: checks every checkpoint, then moves heads forward and joins rows.
    pub fn install_snapshot(
        &mut self,
        checkpoints: Vec<Checkpoint>,
        rows: Vec<(RowKey, RowState)>,
    ) -> Vec<Event> {
        self.edits += 1;
        self.catch_up();
        let mut events = Vec::new();
        if !self.config.merge_rows {
            if let Some(cp) = checkpoints.first() {
                events.push(Event::Rejected {
                    reason: Reason::Malformed,
                    author: cp.author,
                    scope: cp.scope.clone(),
                    first_seq: cp.seq,
                    detail: "snapshot refused: this replica keeps no rows".into(),
                });
            }
            return events;
        }
        for cp in &checkpoints {
            if let Err(e) = cp.check() {
                events.push(Event::Rejected {
                    reason: e.reason(),
                    author: cp.author,
                    scope: cp.scope.clone(),
                    first_seq: cp.seq,
                    detail: "snapshot refused: checkpoint signature".into(),
                });
                return events;
            }
        }
        for (k, _) in &rows {
            if !self.config.accept_unknown_tables && !self.tables.contains_key(&k.table) {
                events.push(Event::Rejected {
                    reason: Reason::UnknownTable,
                    author: k.scope.owner,
                    scope: k.scope.clone(),
                    first_seq: 0,
                    detail: format!("snapshot refused: table {:?} is not replicated", k.table),
                });
                return events;
            }
        }
        for cp in checkpoints {
            let key = (cp.author, cp.scope.clone());
            let log = self.chains.entry(key).or_default();
            let (held, _) = log.head();
            if cp.seq > held {
                log.blocks.clear();
                log.pending.clear();
                log.written.clear();
                log.written_bufs.clear();
                log.base = Some(cp);
            } else if log.hash_at(cp.seq).is_some_and(|h| h != cp.hash) {
                self.forks.insert(cp.author);
                events.push(Event::Fork {
                    author: cp.author,
                    scope: cp.scope,
                    seq: cp.seq,
                });
            }
        }
        let n = rows.len();
        let mut keys = Vec::new();
        let mut purged = Vec::new();
        for (k, row) in rows {
            let mut max_hlc = 0;
            let mut is_purged = false;
            self.rows.update(&k, &mut |mine: &mut RowState| {
                mine.join(&row);
                is_purged = mine.purged;
                max_hlc = mine
                    .cells
                    .values()
                    .map(|(v, _)| v.hlc)
                    .chain(mine.tombstone.map(|t| t.hlc))
                    .max()
                    .unwrap_or(0);
            });
            self.clock.observe(max_hlc);
            if is_purged {
                purged.push((k.clone(), true));
            }
            if self.config.report_rows {
                keys.push(k);
            }
        }
        // A purge learnt from a snapshot erases the row's values from the history held too.
        let scopes: BTreeSet<ScopeId> = purged.iter().map(|(k, _)| k.scope.clone()).collect();
        for scope in scopes {
            self.redact_purged(&scope, &purged);
        }
        events.insert(
            0,
            Event::Applied {
                records: n,
                rows: keys,
            },
        );
        events
    }
}
