//! History as a whole: `verify()` re-checks every signature and hash held, and a snapshot
//! is checked and installed (compaction, and what a snapshot sends: `attested.rs`).

use super::{Event, Failure, Replica};
use crate::chain::ChainKey;
use crate::chain::{verify_signatures, Block, Checkpoint};
use crate::change::record_hash;
use crate::error::Reason;
use crate::hlc::physical_ms;
use crate::identity::AuthorId;
use crate::merge::{MemoryRows, RowKey, RowState, RowStore};
use crate::scope::ScopeId;
use crate::wire::ZERO_HASH;
use std::collections::{BTreeMap, BTreeSet};

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

    /// What a snapshot's rows may not hold, whoever sent them: a version from the future
    /// (beyond `max_clock_skew_ms`, as for records: it would order every later write before
    /// it and raise this replica's clock), by an author who may not write the row's scope, or
    /// past the head its chain has here or in the snapshot's checkpoints (a write no signed
    /// history stands for). The first such row, if any.
    fn check_snapshot_rows<'a>(
        &self,
        now_ms: u64,
        checkpoints: &[Checkpoint],
        rows: &'a [(RowKey, RowState)],
    ) -> Option<(Reason, &'a RowKey, String)> {
        let limit = now_ms.saturating_add(self.config.max_clock_skew_ms);
        let mut heads: BTreeMap<ChainKey, u64> = BTreeMap::new();
        for c in checkpoints {
            let seq = heads.entry((c.author, c.scope.clone())).or_insert(0);
            *seq = (*seq).max(c.seq);
        }
        let head = |author: &AuthorId, scope: &ScopeId| {
            let key = (*author, scope.clone());
            let held = self.chains.get(&key).map_or(0, |l| l.head().0);
            held.max(heads.get(&key).copied().unwrap_or(0))
        };
        for (k, row) in rows {
            let versions = row.versions();
            for v in versions {
                if physical_ms(v.hlc) > limit {
                    let ahead = physical_ms(v.hlc) - now_ms;
                    return Some((
                        Reason::ClockSkew,
                        k,
                        format!("a value {ahead} ms in the future"),
                    ));
                }
                if v.seq > self.write_limit(&v.author, &k.scope) {
                    return Some((
                        Reason::Unauthorized,
                        k,
                        format!("a value by {:?}, who may not write this scope", v.author),
                    ));
                }
                if v.seq > head(&v.author, &k.scope) {
                    return Some((
                        Reason::Malformed,
                        k,
                        format!("a value of record {} past its chain's head", v.seq),
                    ));
                }
            }
        }
        None
    }

    /// Installs a snapshot: checks every checkpoint and every row, then moves heads forward and
    /// joins rows. Refused whole at the first failure.
    pub fn install_snapshot(
        &mut self,
        now_ms: u64,
        checkpoints: Vec<Checkpoint>,
        attestations: Vec<crate::attest::Attestation>,
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
        if let Some((reason, scope, detail)) =
            Self::check_attested(&checkpoints, &attestations, &rows)
        {
            events.push(Event::Rejected {
                reason,
                author: scope.owner,
                scope,
                first_seq: 0,
                detail: format!("snapshot refused: {detail}"),
            });
            return events;
        }
        if let Some((reason, k, detail)) = self.check_snapshot_rows(now_ms, &checkpoints, &rows) {
            events.push(Event::Rejected {
                reason,
                author: k.scope.owner,
                scope: k.scope.clone(),
                first_seq: 0,
                detail: format!("snapshot refused: {detail}"),
            });
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
        // A scope where this replica holds another branch at a checkpoint's seq is left out
        // whole: its records cannot be set against rows (sec. 6, forks below a compaction point).
        let mut forked: BTreeSet<ScopeId> = BTreeSet::new();
        let mut touched: Vec<RowKey> = Vec::new();
        for cp in &checkpoints {
            let log = self.chains.get(&(cp.author, cp.scope.clone()));
            let other = log
                .and_then(|l| l.hash_at(cp.seq))
                .is_some_and(|h| h != cp.hash);
            if other {
                self.forks.insert(cp.author);
                forked.insert(cp.scope.clone());
                events.push(Event::Fork {
                    author: cp.author,
                    scope: cp.scope.clone(),
                    seq: cp.seq,
                });
            }
        }
        // Of an owner known to have signed two branches, only the newest attestation held
        // stands: an older one's checkpoints may be on the branch that lost, and would move a
        // chain onto it (docs/sync.md sec. 6). Such a scope is left out whole.
        for a in &attestations {
            let stale = self.forks.contains(&a.scope.owner)
                && (self.attestations.get(&a.scope)).is_some_and(|e| e.newest.newer_than(a));
            if stale {
                forked.insert(a.scope.clone());
            }
        }
        // A scope whose attestation here is at least as new as the newest held, where this
        // replica holds another branch at a checkpoint or is due a rebase: the owner signed
        // two branches and this one lost (docs/sync.md sec. 6). The scope is replaced whole:
        // base rows, chains and the records held of them.
        // So too a scope of an owner known to have signed two branches, whose base stands at
        // another attestation: that base may hold a branch given up below the checkpoints,
        // which a join would keep.
        // And a scope where a checkpoint moves a compacted chain past its head, the chain of
        // this replica's own key or of a key known to fork: records this replica's base holds
        // may be of a branch the checkpoint's does not hold.
        let owner_forked = |me: &Self, a: &crate::attest::Attestation| {
            let other_base = (me.attestations.get(&a.scope))
                .and_then(|e| e.base.as_ref())
                .is_some_and(|b| b.sig != a.sig);
            let suspect = |author: &AuthorId| {
                me.forks.contains(&a.scope.owner)
                    || me.forks.contains(author)
                    || *author == me.identity.id()
            };
            let moved_past = checkpoints.iter().any(|cp| {
                cp.scope == a.scope
                    && suspect(&cp.author)
                    && (me.chains.get(&(cp.author, cp.scope.clone())))
                        .is_some_and(|l| l.base.is_some() && cp.seq > l.head().0)
            });
            other_base && (me.forks.contains(&a.scope.owner) || moved_past)
        };
        let rebased: BTreeSet<ScopeId> = attestations
            .iter()
            .filter(|a| {
                forked.contains(&a.scope)
                    || self.rebase_due.contains_key(&a.scope)
                    || owner_forked(self, a)
            })
            .filter(|a| (self.attestations.get(&a.scope)).is_none_or(|e| !e.newest.newer_than(a)))
            .map(|a| a.scope.clone())
            .collect();
        if !rebased.is_empty() {
            // Chains move back (to a checkpoint below what peers saw here, or to nothing):
            // greeted again, peers send from the heads held now.
            self.greet_again += 1;
        }
        for scope in &rebased {
            forked.remove(scope);
            self.rebase_due.remove(scope);
            let by_chain: BTreeMap<AuthorId, &Checkpoint> = (checkpoints.iter())
                .filter(|cp| cp.scope == *scope)
                .map(|cp| (cp.author, cp))
                .collect();
            let keys: Vec<ChainKey> = (self.chains.keys())
                .filter(|(_, s)| s == scope)
                .cloned()
                .collect();
            for key in keys {
                let log = self.chains.get_mut(&key).expect("invariant: listed above");
                // The records held that go on from the checkpoint stay (the loop below drops
                // those up to it); every other record held of the chain is of the losing
                // branch, or stands on base rows given up.
                let keeps = match by_chain.get(&key.0) {
                    Some(cp) => {
                        log.hash_at(cp.seq) == Some(cp.hash)
                            && cp.seq.saturating_add(1) >= log.first_held()
                    }
                    None => log.base.is_none(),
                };
                if keeps {
                    continue;
                }
                let given_up =
                    (log.blocks.drain(..).flat_map(|b| b.records)).chain(log.pending.drain(..));
                for r in given_up {
                    touched.extend(r.ops.iter().map(|op| RowKey::new(&op.table, scope, &op.pk)));
                }
                log.written.clear();
                log.written_bufs.clear();
                log.base = None;
                self.fork_candidates.remove(&key);
                *self.branch_changes.entry(key).or_insert(0) += 1;
            }
            // The owner's fork, unless reported when the rebase was found due.
            if self.forks.insert(scope.owner) {
                let at = (by_chain.values()).map(|cp| cp.seq).min().unwrap_or(0);
                events.push(Event::Fork {
                    author: scope.owner,
                    scope: scope.clone(),
                    seq: at,
                });
            }
        }
        // The attested rows of a scope are its rows at the attested heads: they replace the
        // base's rows of that scope (a join would keep what records given up here wrote, when
        // this replica held another branch below the heads), unless the base already stands at
        // a newer attestation of it. The rows are then rebuilt from the base and the records held.
        let replace: BTreeSet<ScopeId> = attestations
            .iter()
            .filter(|a| !forked.contains(&a.scope))
            .filter(|a| {
                if rebased.contains(&a.scope) {
                    return true;
                }
                let held = self
                    .attestations
                    .get(&a.scope)
                    .and_then(|e| e.base.as_ref());
                held.is_none_or(|b| !b.newer_than(a))
            })
            // Nor where this replica's base holds more of a chain of the scope than the
            // snapshot's checkpoints (records compacted here that the attested rows lack).
            .filter(|a| {
                self.chains.iter().all(|((author, s), log)| {
                    s != &a.scope
                        || log.base.as_ref().is_none_or(|c| {
                            checkpoints.iter().any(|cp| {
                                cp.author == *author && cp.scope == a.scope && cp.seq >= c.seq
                            })
                        })
                })
            })
            .map(|a| a.scope.clone())
            .collect();
        for cp in checkpoints {
            if forked.contains(&cp.scope) {
                continue;
            }
            let key = (cp.author, cp.scope.clone());
            let log = self.chains.entry(key).or_default();
            if cp.seq > log.head().0 {
                let given_up = log
                    .blocks
                    .drain(..)
                    .flat_map(|b| b.records)
                    .chain(log.pending.drain(..));
                for r in given_up {
                    touched.extend(
                        r.ops
                            .iter()
                            .map(|op| RowKey::new(&op.table, &cp.scope, &op.pk)),
                    );
                }
                log.written.clear();
                log.written_bufs.clear();
                log.base = Some(cp);
            } else if cp.seq >= log.first_held() && cp.seq <= log.sealed_head().0 {
                // Records held at or below the checkpoint, of its branch (a scope where the held
                // branch differs is left out above): the base rows now hold what they wrote, so
                // they go as compaction drops them. Kept, a fork that took them back later would
                // leave what they wrote in the base the rows are rebuilt from.
                let n = log.blocks.partition_point(|b| b.last_seq() <= cp.seq);
                log.blocks.drain(..n);
                if let Some(b) = log.blocks.first_mut() {
                    if let Some(rest) = b.suffix(cp.seq + 1).filter(|_| b.first_seq() <= cp.seq) {
                        // A suffix of a block still verifies: its signature is over its end.
                        *b = rest;
                    }
                }
                log.base = Some(cp);
            }
        }
        let rows: Vec<(RowKey, RowState)> = rows
            .into_iter()
            .filter(|(k, _)| !forked.contains(&k.scope))
            .collect();
        let n = rows.len();
        let mut keys = Vec::new();
        let mut purged = Vec::new();
        if !replace.is_empty() {
            let old = self.base.take().unwrap_or_default();
            let mut base = MemoryRows::default();
            for (k, row) in old.iter() {
                if !replace.contains(&k.scope) {
                    base.insert(k.clone(), row.clone());
                } else {
                    touched.push(k.clone());
                    if row.purged {
                        // A purge is never taken back (sec. 6), but its row keeps no version:
                        // the attested rows and the records held give those, and a version
                        // of a branch given up (a later delete on it) must not stay.
                        let marker = RowState {
                            purged: true,
                            ..RowState::default()
                        };
                        base.insert(k.clone(), marker);
                    }
                }
            }
            self.base = Some(base);
        }
        // The other scopes' rows (where this replica's base holds more) are joined.
        let base = self.base.get_or_insert_with(MemoryRows::default);
        for (k, row) in &rows {
            base.update(k, &mut |mine: &mut RowState| mine.join(row));
        }
        if !replace.is_empty() {
            self.took_back();
        }
        for (k, row) in &rows {
            let mut max_hlc = 0;
            let mut is_purged = false;
            self.rows.update(k, &mut |mine: &mut RowState| {
                mine.join(row);
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
        }
        if self.config.report_rows {
            keys.extend(rows.into_iter().map(|(k, _)| k));
            keys.extend(touched);
            keys.sort_unstable();
            keys.dedup();
        }
        let attestations = attestations
            .into_iter()
            .filter(|a| !forked.contains(&a.scope))
            .collect();
        self.installed_attestations(attestations);
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
