//! What a peer's blocks do: verified (signatures in one batch, then chain continuity, the
//! author's right to the scope, the clock, the schema), and applied whole or rejected whole;
//! and how any record, local or a peer's, joins the merged rows (a purge redacting the history
//! it touches).

use super::{Event, Replica};
use crate::chain::{verify_signatures, Block, ChainKey, MAX_BLOCK_RECORDS};
use crate::change::{Payload, Record};
use crate::error::{Error, Reason, Result};
use crate::hlc::physical_ms;
use crate::identity::AuthorId;
use crate::merge::{RowKey, RowState, RowStore, Version};
use crate::scope::ScopeId;
use crate::wire::ZERO_HASH;
use std::collections::{BTreeMap, BTreeSet};

/// What became of a verified block that forks a chain held.
enum Fork {
    /// The branches part before the block, or where history was compacted: undecided here.
    Unknown,
    /// The held branch wins at `at`: the block is refused.
    Ours { at: u64 },
    /// The owner attested a head past `at` that neither the held branch nor the block
    /// reaches: the block is kept aside as the chain's candidate, the held branch stays.
    Waiting { at: u64 },
    /// The block's branch wins at `at`: it replaced the held records from there.
    Theirs {
        at: u64,
        records: usize,
        rows: Vec<RowKey>,
    },
}

/// Whether `next` goes on from the end of `held`: it holds `held`'s last record (or follows
/// it) and a record after it.
fn joins(held: &Block, next: &Block) -> bool {
    let end = held.last_seq();
    if next.last_seq() <= end || next.first_seq() > end + 1 {
        return false;
    }
    match end.checked_sub(next.first_seq()) {
        None => next.prev_hash() == held.last_hash(),
        Some(i) => next.records[i as usize].hash == held.last_hash(),
    }
}

/// `held` and what `next` (which [`joins`] it) adds after it, as one block under `next`'s
/// signature, whose head chains back through `held`'s records.
fn join(held: Block, next: Block) -> Block {
    let from = held.last_seq() + 1;
    let mut records = held.records;
    records.extend(next.suffix(from).map_or(Vec::new(), |b| b.records));
    Block {
        author: next.author,
        scope: next.scope,
        records,
        sig: next.sig,
    }
}

/// How a branch of a held chain was judged against it (docs/sync.md sec. 6, "Forks").
enum Judged {
    /// It holds the same records as far as both go.
    Same,
    Ours {
        at: u64,
    },
    Theirs {
        at: u64,
    },
    /// It parts at or below the attested head and does not reach it yet.
    Waiting {
        at: u64,
    },
}

/// At most this many blocks are kept aside per chain: branches that may be the attested one
/// and pieces that may continue them.
const MAX_PIECES: usize = 128;

/// The version of op `idx` of `record` by `author`: its place in the LWW order.
fn version_of(record: &Record, author: &AuthorId, idx: usize) -> Version {
    Version {
        hlc: record.hlc,
        author: *author,
        seq: record.seq,
        idx: idx as u32,
    }
}

/// Joins a record's ops into `rows` (the base, say), nothing else.
pub(super) fn apply_ops<S: RowStore>(
    rows: &mut S,
    author: &AuthorId,
    scope: &ScopeId,
    record: &Record,
) {
    for (idx, op) in record.ops.iter().enumerate() {
        let v = version_of(record, author, idx);
        rows.update(&RowKey::new(&op.table, scope, &op.pk), &mut |row| {
            row.apply(op, v)
        });
    }
}

impl<S: RowStore> Replica<S> {
    /// Joins a record's ops into the rows; returns each touched row and whether it is purged.
    pub(super) fn apply_record(
        &mut self,
        author: &AuthorId,
        scope: &ScopeId,
        record: &Record,
    ) -> Vec<(RowKey, bool)> {
        self.apply_record_keys(author, scope, record, true)
    }

    /// [`Replica::apply_record`]; without `want_keys` only the purged rows are returned (the
    /// others' keys move into the row store).
    pub(super) fn apply_record_keys(
        &mut self,
        author: &AuthorId,
        scope: &ScopeId,
        record: &Record,
        want_keys: bool,
    ) -> Vec<(RowKey, bool)> {
        if !self.config.merge_rows {
            self.clock.observe(record.hlc);
            return Vec::new();
        }
        if !want_keys {
            self.rows.expect_ops(record.ops.len());
        }
        let mut out = Vec::with_capacity(if want_keys { record.ops.len() } else { 0 });
        for (idx, op) in record.ops.iter().enumerate() {
            let key = RowKey::new(&op.table, scope, &op.pk);
            let v = version_of(record, author, idx);
            let mut purged = false;
            let mut apply = |row: &mut RowState| {
                row.apply(op, v);
                purged = row.purged;
            };
            if want_keys {
                self.rows.update(&key, &mut apply);
                out.push((key, purged));
            } else {
                self.rows.update_owned(key, &mut apply);
                if purged {
                    out.push((RowKey::new(&op.table, scope, &op.pk), true));
                }
            }
        }
        self.clock.observe(record.hlc);
        out
    }

    /// Replaces, in every record held for `scope`, the ops on purged rows with their redacted form.
    pub(super) fn redact_purged(&mut self, scope: &ScopeId, touched: &[(RowKey, bool)]) {
        self.edits += 1;
        // Every record it may redact is a `Record` in `pending` or a block.
        self.hash_deferred();
        let purged: BTreeSet<&RowKey> =
            touched.iter().filter(|(_, p)| *p).map(|(k, _)| k).collect();
        if purged.is_empty() {
            return;
        }
        self.redactions += 1;
        if scope.owner == self.identity.id() {
            self.attest_due.insert(scope.clone());
        }
        // The base forgets the values too (a purge is never taken back, fork or not). It
        // takes no version from the rows: those of records held come back from them when the
        // rows are rebuilt, and those of records a fork later takes back must not stay.
        if let Some(base) = self.base.as_mut() {
            for k in &purged {
                if base.get(k).is_some() {
                    base.update(k, &mut RowState::forget_values);
                }
            }
        }
        for ((_, s), log) in self.chains.iter_mut() {
            if s != scope {
                continue;
            }
            let records = log
                .blocks
                .iter_mut()
                .flat_map(|b| b.records.iter_mut())
                .chain(log.pending.iter_mut());
            for rec in records {
                for op in rec.ops.iter_mut() {
                    // Only DELETE and PURGE carry no values; the PURGE itself must travel intact.
                    if op.payload().is_some_and(Payload::carries_values)
                        && purged.contains(&RowKey::new(&op.table, scope, &op.pk))
                    {
                        *op = op.redacted();
                    }
                }
            }
        }
    }

    /// Verifies and applies blocks from a peer. The blocks must come from `Block::decode` (or
    /// `Block::seal`), which compute every record hash from the record's content. Signatures of all blocks are checked in one
    /// batch; each block is then checked against what is held and applied, or rejected whole.
    pub fn receive_blocks(&mut self, now_ms: u64, blocks: Vec<Block>) -> Vec<Event> {
        self.edits += 1;
        self.lost.clear();
        self.kept_attested.clear();
        self.catch_up();
        let mut events = Vec::new();
        // A block whose every record is already held with the same hashes is a replay: its
        // content is exactly what was verified before, so its signature is not checked again
        // (duplicates are common on a mesh; a signature check is the dearest thing here).
        let (replays, fresh): (Vec<Block>, Vec<Block>) =
            blocks.into_iter().partition(|b| self.is_replay(b));
        for b in replays {
            events.push(Event::Rejected {
                reason: Reason::Replay,
                author: b.author,
                first_seq: b.first_seq(),
                detail: format!("records {}..={} already held", b.first_seq(), b.last_seq()),
                scope: b.scope,
            });
        }
        // A block that cannot follow what is held (nor what earlier blocks of this message
        // bring) is a gap whatever its signature says: refuse it before paying for a check.
        let mut heads: BTreeMap<ChainKey, u64> = BTreeMap::new();
        let mut blocks = Vec::with_capacity(fresh.len());
        for b in fresh {
            let held = *heads
                .entry(b.key())
                .or_insert_with(|| self.chains.get(&b.key()).map_or(0, |l| l.head().0));
            // A block of a chain with a branch held aside may be a piece of that branch.
            let aside = self.fork_candidates.contains_key(&b.key());
            if b.first_seq() > held.saturating_add(1) && !aside {
                events.push(Event::Rejected {
                    reason: Reason::ChainGap,
                    author: b.author,
                    first_seq: b.first_seq(),
                    detail: format!("block starts at {}, held up to {held}", b.first_seq()),
                    scope: b.scope,
                });
                continue;
            }
            heads.insert(b.key(), held.max(b.last_seq()));
            blocks.push(b);
        }
        let sig_results = {
            let refs: Vec<&Block> = blocks.iter().collect();
            verify_signatures(&refs)
        };
        // Hashes of records released to a block source, where a block ends inside them.
        let released: Vec<_> = blocks
            .iter()
            .map(|b| self.released_hash_at(&b.key(), b.last_seq()))
            .collect();
        let mut applied_records = 0;
        let mut applied_rows = Vec::new();
        for ((block, sig), released) in blocks.into_iter().zip(sig_results).zip(released) {
            let aside = sig.is_ok() && self.fork_candidates.contains_key(&block.key());
            let checked = match self.check_block(now_ms, &block, sig, released) {
                Err((Reason::ChainGap | Reason::Fork, _)) if aside => {
                    Err((Reason::Fork, "a piece of a branch held aside".to_string()))
                }
                checked => checked,
            };
            match checked {
                Ok(skip) => {
                    let mut block = block;
                    if skip > 0 {
                        block.records.drain(..skip);
                    }
                    applied_records += block.records.len();
                    let mut touched = Vec::new();
                    for rec in &block.records {
                        touched.extend(self.apply_record(&block.author, &block.scope, rec));
                    }
                    let any_purged = touched.iter().any(|(_, p)| *p);
                    let key = block.key();
                    self.chains.entry(key).or_default().blocks.push(block);
                    if any_purged {
                        let scope = touched[0].0.scope.clone();
                        self.redact_purged(&scope, &touched);
                    }
                    if self.config.report_rows {
                        applied_rows.extend(touched.into_iter().map(|(k, _)| k));
                    }
                }
                Err((Reason::Fork, detail)) => {
                    self.forks.insert(block.author);
                    let (author, scope, first) =
                        (block.author, block.scope.clone(), block.first_seq());
                    if let Some(seq) = self.parts_below_base(&block) {
                        events.extend(self.due_rebase(&scope, seq));
                    }
                    match self.resolve_fork(block) {
                        Fork::Theirs { at, records, rows } => {
                            events.push(Event::Fork {
                                author,
                                scope,
                                seq: at,
                            });
                            applied_records += records;
                            if self.config.report_rows {
                                applied_rows.extend(rows);
                            }
                        }
                        outcome => {
                            let seq = match outcome {
                                Fork::Ours { at } | Fork::Waiting { at } => at,
                                _ => first,
                            };
                            events.push(Event::Fork {
                                author,
                                scope: scope.clone(),
                                seq,
                            });
                            events.push(Event::Rejected {
                                reason: Reason::Fork,
                                author,
                                first_seq: first,
                                scope,
                                detail,
                            });
                        }
                    }
                }
                Err((reason, detail)) => {
                    events.push(Event::Rejected {
                        reason,
                        author: block.author,
                        first_seq: block.first_seq(),
                        scope: block.scope,
                        detail,
                    });
                }
            }
        }
        if applied_records > 0 {
            applied_rows.sort_unstable();
            applied_rows.dedup();
            events.insert(
                0,
                Event::Applied {
                    records: applied_records,
                    rows: applied_rows,
                },
            );
        }
        events
    }

    /// A verified block of another branch of a chain held (docs/sync.md sec. 6, "Forks"):
    /// of the two records at the first place where the branches part, the one with the lower
    /// hash wins, on every replica alike. If it is the block's, the held records from there are
    /// taken back (out of the chain and out of the rows, rebuilt from the base and the history
    /// left) and the block's put in their place.
    fn resolve_fork(&mut self, block: Block) -> Fork {
        let key = block.key();
        if !self.chains.contains_key(&key) {
            self.fork_candidates.remove(&key);
            return Fork::Unknown;
        }
        // The blocks of this chain kept aside, with this one, each once, by place. Any of them
        // that starts on the held chain may begin a branch, the others continue one: a branch
        // is judged joined with the pieces that continue it, as one block under the last
        // piece's signature (its head chains back through the others' records), whatever
        // order they came in.
        let mut pool = self.fork_candidates.remove(&key).unwrap_or_default();
        let new_id = (block.first_seq(), block.last_seq(), block.last_hash());
        pool.push(block);
        pool.sort_by_key(|b| (b.first_seq(), b.last_seq(), b.last_hash()));
        pool.dedup_by_key(|b| (b.first_seq(), b.last_seq(), b.last_hash()));
        let id = |b: &Block| (b.first_seq(), b.last_seq(), b.last_hash());
        // The attested branch, if its pieces are all here: found from the attested record
        // back, by hashes, so that pieces of other branches never stand in its way.
        if let Some(main) = self.attested_branch(&key, &pool) {
            if let Judged::Theirs { at } = self.judge(&key, &main) {
                return self.take_branch(main, at);
            }
        }
        let mut outcome = None;
        let mut waiting = None;
        let mut i = 0;
        while i < pool.len() {
            let Some(mut main) = self.branch_start(&key, &pool[i]) else {
                i += 1;
                continue;
            };
            let mut used = vec![i];
            while let Some(j) =
                (0..pool.len()).find(|j| !used.contains(j) && joins(&main, &pool[*j]))
            {
                main = join(main, pool[j].clone());
                used.push(j);
            }
            let has_new = used.iter().any(|&u| id(&pool[u]) == new_id);
            match self.judge(&key, &main) {
                Judged::Same => i += 1,
                Judged::Theirs { at } => {
                    // The pieces left belong to branches the fork leaves behind, or are
                    // sent again by peers: the branch taken is this replica's chain now.
                    return self.take_branch(main, at);
                }
                Judged::Waiting { at } => {
                    // Its pieces stay as they came: another branch may share them.
                    if has_new {
                        outcome = Some(Fork::Waiting { at });
                    }
                    waiting.get_or_insert(at);
                    i += 1;
                }
                Judged::Ours { at } => {
                    if has_new {
                        outcome = Some(Fork::Ours { at });
                    }
                    used.sort_unstable();
                    for &u in used.iter().rev() {
                        pool.remove(u);
                    }
                    i = 0;
                }
            }
        }
        let Some(at) = waiting else {
            // Nothing left to wait for: the pieces are of branches decided (or of none held),
            // and peers send them again where they matter.
            return outcome.unwrap_or(Fork::Unknown);
        };
        // Bounded, the lowest places first (where branches begin; a peer resends the rest,
        // past what this replica acknowledged): what an author signed, once per place.
        pool.truncate(MAX_PIECES);
        self.fork_candidates.insert(key, pool);
        outcome.unwrap_or(Fork::Waiting { at })
    }

    /// Where `block` holds the record the scope owner's newest attestation names of its chain
    /// and parts from the held chain at or below its checkpoint: the checkpoint's seq. The base
    /// rows hold the other branch's writes, so no block can bring this replica onto the
    /// attested branch; a snapshot at the attestation can (docs/sync.md sec. 6).
    fn parts_below_base(&self, block: &Block) -> Option<u64> {
        let key = block.key();
        let c = self.chains.get(&key)?.base.as_ref()?;
        let &(seq, hash) = self.attestations.get(&key.1)?.newest.heads.get(&key.0)?;
        let at = |q: u64| {
            let i = q.checked_sub(block.first_seq())?;
            block.records.get(i as usize).map(|r| r.hash)
        };
        if at(seq) != Some(hash) || seq < c.seq {
            return None;
        }
        let other = match block.first_seq() {
            f if f <= c.seq => at(c.seq) != Some(c.hash),
            f if f == c.seq + 1 => block.prev_hash() != c.hash,
            _ => false,
        };
        other.then_some(c.seq)
    }

    /// The branch of chain `key` that holds the record the scope owner's newest attestation
    /// names, where the held chain does not, assembled from `pool`: the block that holds that
    /// record, then, back, the block that holds the record each one follows, until one starts
    /// on a record held alike; None while a piece is missing.
    fn attested_branch(&self, key: &ChainKey, pool: &[Block]) -> Option<Block> {
        let log = self.chains.get(key)?;
        let &(seq, hash) = self.attestations.get(&key.1)?.newest.heads.get(&key.0)?;
        if log.hash_at(seq) == Some(hash) {
            return None;
        }
        let holds = |b: &Block, q: u64, h: crate::wire::Hash| {
            q >= b.first_seq()
                && q <= b.last_seq()
                && b.records[(q - b.first_seq()) as usize].hash == h
        };
        let mut path = vec![pool.iter().find(|b| holds(b, seq, hash))?];
        for _ in 0..pool.len() {
            let cur = path[path.len() - 1];
            if let Some(start) = self.branch_start(key, cur) {
                let mut main = start;
                for next in path.iter().rev().skip(1) {
                    if !joins(&main, next) {
                        return None;
                    }
                    main = join(main, (*next).clone());
                }
                return Some(main);
            }
            let (want, prev) = (cur.first_seq().checked_sub(1)?, cur.prev_hash());
            let p =
                (pool.iter()).find(|b| b.last_seq() < cur.last_seq() && holds(b, want, prev))?;
            path.push(p);
        }
        None
    }

    /// `block` from where it can be judged against chain `key` held: from the record after
    /// the checkpoint when it reaches below what is held (compacted here) and holds the
    /// checkpoint's record there; None if it does not start on a record held alike (the
    /// branches part before it, or where history was compacted away, and it cannot say where).
    fn branch_start(&self, key: &ChainKey, block: &Block) -> Option<Block> {
        let log = self.chains.get(key)?;
        let held_from = log.first_held();
        let block = match block.first_seq() {
            f if f < held_from => {
                let at_base = block.records.get((held_from - 1 - f) as usize)?;
                if Some(at_base.hash) != log.hash_at(held_from - 1) {
                    return None;
                }
                block.suffix(held_from)?
            }
            _ => block.clone(),
        };
        (log.hash_at(block.first_seq() - 1) == Some(block.prev_hash())).then_some(block)
    }

    /// Which branch of chain `key` wins against `block` (starting on a record held alike), and
    /// where they part: the branch the scope owner attested, where it parts at or below the
    /// attested head, on every replica alike (a replica that compacted holds only that branch
    /// there); else the record with the lower hash.
    fn judge(&mut self, key: &ChainKey, block: &Block) -> Judged {
        let log = self
            .chains
            .get(key)
            .expect("invariant: checked by the caller");
        let first = block.first_seq();
        let end = log.head().0.min(block.last_seq());
        let Some(at) = (first..=end)
            .find(|&q| log.hash_at(q) != Some(block.records[(q - first) as usize].hash))
        else {
            return Judged::Same;
        };
        let lower_hash = || {
            let ours = log.hash_at(at).expect("invariant: held up to end");
            if ours < block.records[(at - first) as usize].hash {
                Judged::Ours { at }
            } else {
                Judged::Theirs { at }
            }
        };
        let newest = self.attestations.get(&block.scope).map(|e| &e.newest);
        let attested =
            (newest.and_then(|a| a.heads.get(&block.author))).filter(|(seq, _)| *seq >= at);
        match attested {
            Some(&(seq, hash)) if log.hash_at(seq) == Some(hash) => {
                let sig = newest.map(|a| a.sig).expect("invariant: attested");
                self.kept_attested.push((key.clone(), sig));
                Judged::Ours { at }
            }
            Some(&(seq, hash)) if block.last_seq() >= seq => {
                if block.records[(seq - first) as usize].hash == hash {
                    Judged::Theirs { at }
                } else {
                    // Neither is the attested branch: the attested one, when it comes,
                    // decides; meanwhile the rule below, and a block that loses by it is
                    // kept aside (the attested branch may share its first pieces).
                    match lower_hash() {
                        Judged::Ours { at } => Judged::Waiting { at },
                        judged => judged,
                    }
                }
            }
            // The block may be the start of the attested branch: kept aside until the blocks
            // that continue it reach the attested head.
            Some(_) if block.records.len() < MAX_BLOCK_RECORDS as usize => Judged::Waiting { at },
            _ => lower_hash(),
        }
    }

    /// Takes `block`'s branch of its chain from `at`, where it parts from the held one and
    /// wins: the held records from there are taken back and the block's put in their place.
    fn take_branch(&mut self, block: Block, at: u64) -> Fork {
        let key = block.key();
        let log = self.chains.get(&key).expect("invariant: judged against it");
        let first = block.first_seq();
        debug_assert!(first <= at);
        // The held records before `at` in the same block (or pending) are signed by the
        // block's signature too: its head chains back through them.
        let i = log.blocks.partition_point(|b| b.last_seq() < at);
        let start = match log.blocks.get(i) {
            Some(b) => b.first_seq(),
            None => log.pending.first().map_or(at, |r| r.seq),
        };
        let kept = (at - start) as usize;
        let suffix = block.suffix(at).expect("invariant: at is in the block");
        if (kept + suffix.records.len()) as u64 > MAX_BLOCK_RECORDS {
            // Too long to seal under one signature: this replica keeps its branch.
            return Fork::Ours { at };
        }
        let log = self.chains.get_mut(&key).expect("invariant: held");
        // The losing blocks, cut to where the branches part, go back to the peer that sent the
        // winner: they prove the fork to it (records not sealed yet prove nothing).
        self.lost.extend(
            log.blocks[i..]
                .iter()
                .filter_map(|b| b.suffix(at.max(b.first_seq()))),
        );
        let mut held: Vec<Record> = log.blocks.drain(i..).flat_map(|b| b.records).collect();
        held.append(&mut log.pending);
        let dropped = held.split_off(kept);
        let mut records = held;
        let added = suffix.records.len();
        records.extend(suffix.records);
        log.blocks.push(Block {
            author: block.author,
            scope: block.scope.clone(),
            records,
            sig: block.sig,
        });
        let mut rows: Vec<RowKey> = dropped
            .iter()
            .chain(log.blocks.last().expect("invariant: pushed").records[kept..].iter())
            .flat_map(|r| {
                r.ops
                    .iter()
                    .map(|op| RowKey::new(&op.table, &block.scope, &op.pk))
            })
            .collect();
        rows.sort_unstable();
        rows.dedup();
        self.took_back();
        *self.branch_changes.entry(key).or_insert(0) += 1;
        Fork::Theirs {
            at,
            records: added,
            rows,
        }
    }

    /// Takes back the records of every chain in `scope` past what the scope's lists now allow
    /// its author (a removed writer's records past its cut): whole held blocks, so that every
    /// replica keeps the same records (blocks end where their author sealed). The rows are
    /// rebuilt; the rows touched wait in `revoked_rows`.
    pub(super) fn take_back_revoked(&mut self, scope: &ScopeId) {
        self.catch_up();
        let keys: Vec<ChainKey> = self
            .chains
            .keys()
            .filter(|(_, s)| s == scope)
            .cloned()
            .collect();
        let mut touched = Vec::new();
        for key in keys {
            let limit = self.write_limit(&key.0, scope);
            let log = self.chains.get_mut(&key).expect("invariant: listed above");
            if log.head().0 <= limit {
                continue;
            }
            let keep = log.blocks.partition_point(|b| b.last_seq() <= limit);
            let dropped = log
                .blocks
                .drain(keep..)
                .flat_map(|b| b.records)
                .chain(log.pending.drain(..));
            for r in dropped {
                touched.extend(r.ops.iter().map(|op| RowKey::new(&op.table, scope, &op.pk)));
            }
            *self.branch_changes.entry(key).or_insert(0) += 1;
        }
        if touched.is_empty() {
            return;
        }
        touched.sort_unstable();
        touched.dedup();
        self.took_back();
        self.revoked_rows.extend(touched);
    }

    /// After records were taken out of chains: the rows again from the base and every record
    /// held, and the saved copies of the chains written again (as after a purge).
    pub(super) fn took_back(&mut self) {
        self.redactions += 1;
        self.rows.reset(self.base.as_ref());
        let chains = std::mem::take(&mut self.chains);
        for ((author, scope), log) in &chains {
            for r in log
                .blocks
                .iter()
                .flat_map(|b| b.records.iter())
                .chain(log.pending.iter())
            {
                self.apply_record_keys(author, scope, r, false);
            }
        }
        self.chains = chains;
    }

    fn is_replay(&self, block: &Block) -> bool {
        self.chains.get(&block.key()).is_some_and(|log| {
            block.last_seq() <= log.head().0
                && log.hash_at(block.last_seq()) == Some(block.last_hash())
        })
    }

    /// The checks of docs/sync.md sec. 6, in order. Ok(n): the block fits; its first n records
    /// are already held. `released`: the hash held at the block's last seq when that record
    /// was released to a block source.
    fn check_block(
        &self,
        now_ms: u64,
        block: &Block,
        sig: Result<()>,
        released: Option<crate::wire::Hash>,
    ) -> std::result::Result<usize, (Reason, String)> {
        let fail = |e: Error| (e.reason(), e.to_string());
        if !block.is_well_formed() {
            return Err((Reason::Malformed, "records not consecutive".into()));
        }
        for rec in &block.records {
            self.check_ops(&rec.ops).map_err(fail)?;
        }
        sig.map_err(fail)?;
        let (held, held_hash) = self
            .chains
            .get(&block.key())
            .map_or((0, ZERO_HASH), |l| l.head());
        let (first, last) = (block.first_seq(), block.last_seq());
        if last <= held {
            let log = self.chains.get(&block.key());
            return match log.and_then(|l| l.hash_at(last)).or(released) {
                Some(h) if h != block.last_hash() => {
                    Err((Reason::Fork, format!("two records signed at seq {last}")))
                }
                _ => Err((
                    Reason::Replay,
                    format!("records {first}..={last} already held"),
                )),
            };
        }
        if first > held.saturating_add(1) {
            return Err((
                Reason::ChainGap,
                format!("block starts at {first}, held up to {held}"),
            ));
        }
        let skip = (held - (first - 1)) as usize;
        let link = if skip == 0 {
            block.prev_hash()
        } else {
            block.records[skip - 1].hash
        };
        if link != held_hash {
            return Err((
                Reason::Fork,
                format!(
                    "record {} does not follow the held chain",
                    held.saturating_add(1)
                ),
            ));
        }
        let limit = self.write_limit(&block.author, &block.scope);
        if block.last_seq() > limit {
            return Err((
                Reason::Unauthorized,
                if limit == 0 {
                    format!("{:?} may not write to this scope", block.author)
                } else {
                    format!(
                        "{:?} was removed from this scope's writers after record {limit}",
                        block.author
                    )
                },
            ));
        }
        let limit = now_ms.saturating_add(self.config.max_clock_skew_ms);
        if let Some(r) = block.records[skip..]
            .iter()
            .find(|r| physical_ms(r.hlc) > limit)
        {
            return Err((
                Reason::ClockSkew,
                format!(
                    "record {} is {} ms in the future",
                    r.seq,
                    physical_ms(r.hlc) - now_ms
                ),
            ));
        }
        Ok(skip)
    }
}
