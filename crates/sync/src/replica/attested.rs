//! Attestations held and made (docs/sync.md sec. 8): an owner signs its scopes' rows at their
//! sealed heads; compaction drops history only up to attested heads, so that the base rows of
//! a compacted scope are exactly what an attestation signs, and a snapshot sends them with it.

use super::receive::apply_ops;
use super::{Event, Replica};
use crate::attest::{rows_digest, scope_rows, Attestation, ScopeHeads};
use crate::chain::{ChainKey, Checkpoint};
use crate::error::Reason;
use crate::merge::{MemoryRows, RowKey, RowState, RowStore};
use crate::scope::ScopeId;
use crate::wire::Hash;
use std::collections::BTreeMap;

/// The attestations a replica keeps of one scope.
#[derive(Debug, Clone)]
pub struct Attested {
    /// The newest seen (compaction moves to it once the records it names are all held).
    pub newest: Attestation,
    /// The one the base rows of the scope stand at, once its history was compacted (or came
    /// from a snapshot): what a snapshot of the scope sends.
    pub base: Option<Attestation>,
}

/// What a snapshot holds: the checkpoints, attestations and rows of the scopes it covers.
pub(crate) type SnapshotParts = (Vec<Checkpoint>, Vec<Attestation>, Vec<(RowKey, RowState)>);

impl<S: RowStore> Replica<S> {
    /// The attestations kept, by scope (for a host that saves them).
    pub fn attestations(&self) -> &BTreeMap<ScopeId, Attested> {
        &self.attestations
    }

    /// Keeps a saved attestation (a host loading its state): the newest of its scope, and the
    /// one its base rows stand at if `base`.
    pub fn restore_attestation(&mut self, a: Attestation, base: bool) {
        self.edits += 1;
        self.keep_attestation(a.clone());
        if base {
            if let Some(e) = self.attestations.get_mut(&a.scope) {
                e.base = Some(a);
            }
        }
    }

    /// Keeps `a` if it is newer than what is kept of its scope; whether it was.
    fn keep_attestation(&mut self, a: Attestation) -> bool {
        match self.attestations.get_mut(&a.scope) {
            Some(e) if !a.newer_than(&e.newest) => false,
            Some(e) => {
                e.newest = a;
                true
            }
            None => {
                self.attestations.insert(
                    a.scope.clone(),
                    Attested {
                        newest: a,
                        base: None,
                    },
                );
                true
            }
        }
    }

    /// Takes attestations a peer sent: each checked against its scope owner's key.
    pub fn receive_attestations(&mut self, list: Vec<Attestation>) -> Vec<Event> {
        let mut events = Vec::new();
        for a in list {
            if let Err(e) = a.check() {
                events.push(Event::Rejected {
                    reason: e.reason(),
                    author: a.scope.owner,
                    scope: a.scope,
                    first_seq: 0,
                    detail: e.to_string(),
                });
                continue;
            }
            let heads = a.heads.clone();
            let scope = a.scope.clone();
            let sig = a.sig;
            if self.keep_attestation(a) {
                self.edits += 1;
                self.off_attested(&scope, &heads);
            }
            // Checked again when the newest comes again (a peer met after a restart).
            let newest = self
                .attestations
                .get(&scope)
                .is_some_and(|e| e.newest.sig == sig);
            if newest {
                events.extend(self.check_rebase(&scope));
            }
        }
        events
    }

    /// Whether the newest attestation of `scope` names another record than a checkpoint held
    /// at that seq: the base rows stand on a branch the scope's owner also attested against
    /// (its key is on two devices), and only a snapshot at the newest brings this replica onto
    /// the branch every replica keeps (docs/sync.md sec. 6). The owner's fork, if newly found.
    pub(super) fn check_rebase(&mut self, scope: &ScopeId) -> Option<Event> {
        let e = self.attestations.get(scope)?;
        let seq = e.newest.heads.iter().find_map(|(author, (seq, hash))| {
            let c = self.chains.get(&(*author, scope.clone()))?.base.as_ref()?;
            (c.seq == *seq && c.hash != *hash).then_some(*seq)
        });
        match seq {
            Some(seq) => self.due_rebase(scope, seq),
            None => self.check_rebase_of_forked_owner(scope),
        }
    }

    /// For a scope whose owner is known to have signed two branches: whether the base rows
    /// stand past the newest attestation on some chain (it names the chain lower, or not at
    /// all). Such a base cannot reach the newest, and may hold a branch nobody else can judge
    /// (one that parts below every checkpoint it could be compared at): it is rebased at the
    /// newest (docs/sync.md sec. 6). An owner of one device never attests past another's base
    /// this way for good: only a clone, so the check waits for a fork of the owner.
    pub(super) fn check_rebase_of_forked_owner(&mut self, scope: &ScopeId) -> Option<Event> {
        if !self.forks.contains(&scope.owner) || self.rebase_due.contains_key(scope) {
            return None;
        }
        let e = self.attestations.get(scope)?;
        let base = e.base.as_ref()?;
        if !e.newest.newer_than(base) {
            return None;
        }
        let heads = &e.newest.heads;
        let past = (self.chains.iter())
            .filter(|((_, s), _)| s == scope)
            .find_map(|((author, _), log)| {
                let c = log.base.as_ref()?;
                (heads.get(author).is_none_or(|(seq, _)| *seq < c.seq)).then_some(c.seq)
            })?;
        self.due_rebase(scope, past)
    }

    /// [`Replica::check_rebase_of_forked_owner`] for every scope of an owner known to have
    /// forked (its fork may be learnt after its attestations).
    pub(crate) fn check_rebases(&mut self) {
        if self.forks.is_empty() {
            return;
        }
        let scopes: Vec<ScopeId> = (self.attestations.keys())
            .filter(|s| self.forks.contains(&s.owner) && !self.rebase_due.contains_key(*s))
            .cloned()
            .collect();
        for s in scopes {
            self.check_rebase_of_forked_owner(&s);
        }
    }

    /// Marks `scope` due a rebase at its newest attestation (the branches part at or below
    /// `seq` of a compacted chain) and reports the owner's fork, once per newest attestation.
    pub(super) fn due_rebase(&mut self, scope: &ScopeId, seq: u64) -> Option<Event> {
        if !self.config.merge_rows {
            // A replica keeping no rows installs no snapshot: it keeps its branch.
            return None;
        }
        let sig = self.attestations.get(scope)?.newest.sig;
        if self.rebase_due.insert(scope.clone(), sig) == Some(sig) {
            return None;
        }
        self.rebase_asks += 1;
        self.edits += 1;
        self.forks.insert(scope.owner);
        Some(Event::Fork {
            author: scope.owner,
            scope: scope.clone(),
            seq,
        })
    }

    /// Whether the newest attestation of `scope` names, for some chain, another record than
    /// the one held at that seq: the branch it attests is not here yet, and an owner attests
    /// the scope no further until it is (docs/sync.md sec. 6).
    fn off_newest(&self, scope: &ScopeId) -> bool {
        if self.rebase_due.contains_key(scope) {
            return true;
        }
        let Some(e) = self.attestations.get(scope) else {
            return false;
        };
        e.newest.heads.iter().any(|(author, (seq, hash))| {
            (self.chains.get(&(*author, scope.clone())))
                .and_then(|l| l.hash_at(*seq))
                .is_some_and(|h| h != *hash)
        })
    }

    /// The chains held on another branch than the one `heads` (the scope owner's newest
    /// attestation) names: the branch the fork rule keeps (docs/sync.md sec. 6, "Forks") is
    /// not here yet. They count as changed branches, so that this replica proves its branch to
    /// its peers again, and the peer that holds the attested one answers with it.
    fn off_attested(&mut self, scope: &ScopeId, heads: &crate::attest::ScopeHeads) {
        for (author, (seq, hash)) in heads {
            let key: ChainKey = (*author, scope.clone());
            let held = self.chains.get(&key);
            let other = (held.and_then(|l| l.hash_at(*seq))).is_some_and(|h| h != *hash);
            // A head past ours of a chain known to be forked may be on another branch: greeted
            // again, a peer holding it sends it from where it was last seen to agree with us.
            if !other && self.forks.contains(author) && held.is_some_and(|l| l.head().0 < *seq) {
                self.greet_again += 1;
            }
            if other {
                self.greet_again += 1;
                self.forks.insert(*author);
                self.disputed.insert(key.clone());
                *self.branch_changes.entry(key).or_insert(0) += 1;
            }
        }
    }

    /// How far every known peer that follows `scope` acknowledged chain `key`; for a chain
    /// known to be forked (its author signed two branches, or a peer holds another branch),
    /// no further than its checkpoint: where the branches part must stay held, here and at
    /// every replica the owner's attestations let compact (docs/sync.md sec. 8).
    fn horizon(&self, key: &ChainKey) -> u64 {
        if self.forks.contains(&key.0) || self.disputed.contains(key) {
            return self
                .chains
                .get(key)
                .and_then(|l| l.base.as_ref())
                .map_or(0, |c| c.seq);
        }
        let held = self.chains.get(key);
        self.peers
            .values()
            .filter(|p| p.want.covers(&key.1))
            .map(|p| {
                let acked = p.acked.get(key).copied().unwrap_or(0);
                // A head named before this replica held its seq counts once the same record
                // is held there.
                match p.claims.get(key) {
                    Some(&(s, h)) if held.and_then(|l| l.hash_at(s)) == Some(h) => acked.max(s),
                    _ => acked,
                }
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// For each chain of `scope` held, the last sealed block end every known peer following
    /// the scope acknowledged (none at seq 0): what compaction may drop now.
    fn droppable_heads(&self, scope: &ScopeId) -> ScopeHeads {
        self.chains
            .iter()
            .filter(|((_, s), _)| s == scope)
            .filter_map(|(key, log)| {
                let horizon = self.horizon(key);
                let i = log.blocks.partition_point(|b| b.last_seq() <= horizon);
                let head = match i.checked_sub(1) {
                    Some(i) => (log.blocks[i].last_seq(), log.blocks[i].last_hash()),
                    None => log.base.as_ref().map(|c| (c.seq, c.hash))?,
                };
                Some((key.0, head))
            })
            .collect()
    }

    /// The rows of `scope` the base and the held records up to `heads` make.
    fn rows_at(&self, scope: &ScopeId, heads: &ScopeHeads) -> MemoryRows {
        let mut rows = MemoryRows::default();
        if let Some(base) = &self.base {
            for (k, row) in scope_rows(base, scope) {
                rows.insert(k.clone(), row.clone());
            }
        }
        for ((author, s), log) in &self.chains {
            let Some((upto, _)) = heads.get(author).filter(|_| s == scope) else {
                continue;
            };
            for r in log.blocks.iter().flat_map(|b| b.records.iter()) {
                if r.seq > *upto {
                    break;
                }
                apply_ops(&mut rows, author, s, r);
            }
        }
        rows
    }

    /// Signs, for each scope this replica owns, the digest of the scope's rows at the heads
    /// compaction may drop to now (the sealed blocks every known peer following the scope
    /// acknowledged), where they differ from its newest attestation's. Returns how many it
    /// signed.
    pub fn attest(&mut self, now_ms: u64) -> usize {
        self.catch_up();
        let me = self.identity.id();
        let mut scopes: Vec<ScopeId> = (self.chains.keys())
            .filter(|(_, s)| s.owner == me)
            .map(|(_, s)| s.clone())
            .collect();
        scopes.dedup();
        let mut n = 0;
        for scope in scopes {
            // Another device of this key attested another branch, later: that one wins, and
            // attesting this one again would only undo it (docs/sync.md sec. 6).
            if self.off_newest(&scope) {
                continue;
            }
            let heads = self.droppable_heads(&scope);
            n += usize::from(self.sign_attestation(scope, heads, now_ms));
        }
        // Scopes a purge touched are attested at their sealed heads, which the heads just
        // signed may not reach.
        self.attest_purged(now_ms);
        n
    }

    /// Signs the scopes a purge touched since (their base rows no longer give the attestations
    /// before it) at their sealed heads, so that snapshots of them can be served again; a scope
    /// whose own chain holds records not sealed yet waits for them to be.
    pub(crate) fn attest_purged(&mut self, now_ms: u64) {
        let me = self.identity.id();
        for scope in std::mem::take(&mut self.attest_due) {
            // A purge of this replica's not sealed yet: attested once it is (the next poll).
            let key = (me, scope.clone());
            let unsealed = self.chains.get(&key).is_some_and(|log| log.unsealed() > 0);
            if unsealed || self.off_newest(&scope) {
                self.attest_due.insert(scope);
                continue;
            }
            let heads: ScopeHeads = (self.chains.iter())
                .filter(|((_, s), _)| *s == scope)
                .map(|((a, _), log)| (*a, log.sealed_head()))
                .filter(|(_, (seq, _))| *seq > 0)
                .collect();
            self.sign_attestation(scope, heads, now_ms);
        }
    }

    /// Whether a record held of `scope` past `heads` purges a row: it redacted records up to
    /// them, so the rows at `heads` are gone for good here.
    fn purged_past(&self, scope: &ScopeId, heads: &ScopeHeads) -> bool {
        (self.chains.iter())
            .filter(|((_, s), _)| s == scope)
            .any(|((author, _), log)| {
                let upto = heads.get(author).map_or(0, |h| h.0);
                (log.blocks.iter().flat_map(|b| b.records.iter()))
                    .chain(log.pending.iter())
                    .filter(|r| r.seq > upto)
                    .flat_map(|r| r.ops.iter())
                    .any(|op| matches!(op.payload(), Some(crate::change::Payload::Purge)))
            })
    }

    /// Signs `scope`'s rows at `heads` unless empty, what the newest attestation names, or
    /// past reproducing (a purge after them).
    fn sign_attestation(&mut self, scope: ScopeId, heads: ScopeHeads, now_ms: u64) -> bool {
        let same = (self.attestations.get(&scope)).is_some_and(|e| e.newest.heads == heads);
        if heads.is_empty() || same || self.purged_past(&scope, &heads) {
            return false;
        }
        let rows = self.rows_at(&scope, &heads);
        // Rows holding a version past `heads` (a base a snapshot or a compaction took further
        // on some chain) are not the rows at `heads`, and every receiver would refuse them.
        let past = |v: &crate::merge::Version| v.seq > heads.get(&v.author).map_or(0, |h| h.0);
        let beyond = rows.iter().any(|(_, row)| row.versions().any(past));
        if beyond {
            return false;
        }
        let digest = rows_digest(rows.iter());
        let hlc = self.clock.tick(now_ms);
        let a = Attestation::sign(&self.identity, scope, hlc, heads, digest);
        let kept = self.keep_attestation(a);
        self.edits += u64::from(kept);
        kept
    }

    /// Whether every chain `a` names is held here with the same record at its head, sealed.
    fn holds(&self, a: &Attestation) -> bool {
        a.heads.iter().all(|(author, (seq, hash))| {
            self.chains
                .get(&(*author, a.scope.clone()))
                .is_some_and(|log| log.sealed_head().0 >= *seq && log.hash_at(*seq) == Some(*hash))
        })
    }

    /// Drops, per scope, the whole blocks up to the heads of the newest attestation held whose
    /// records are all held, when every known peer that follows the scope has acknowledged
    /// them; keeps each chain's last dropped block as its checkpoint. The scope's base rows
    /// then stand at those heads. An owner attests its scopes first. Returns the number of
    /// records dropped.
    pub fn compact(&mut self) -> usize {
        self.edits += 1;
        // The records dropped must reach the rows first.
        self.catch_up();
        let now = crate::hlc::physical_ms(self.clock.last());
        self.attest(now);
        let mut dropped = 0;
        let targets: Vec<Attestation> = self
            .attestations
            .values()
            .map(|e| e.newest.clone())
            .filter(|a| self.holds(a))
            .collect();
        for a in targets {
            let acked = (a.heads.iter())
                .all(|(author, (seq, _))| self.horizon(&(*author, a.scope.clone())) >= *seq);
            // The base rows of the scope must stand at `a` after: no chain's base beyond it.
            let below = (self.chains.iter())
                .filter(|((_, s), _)| *s == a.scope)
                .all(|((author, _), log)| {
                    let base = log.base.as_ref().map_or(0, |c| c.seq);
                    base <= a.heads.get(author).map_or(0, |h| h.0)
                });
            if !acked || !below {
                continue;
            }
            for (author, (upto, _)) in &a.heads {
                let key: ChainKey = (*author, a.scope.clone());
                let Some(log) = self.chains.get_mut(&key) else {
                    continue;
                };
                let n = log
                    .blocks
                    .iter()
                    .take_while(|b| b.last_seq() <= *upto)
                    .count();
                if n == 0 {
                    continue;
                }
                log.base = Some(Checkpoint::of_block(&log.blocks[n - 1]));
                // What the dropped records did now lives in the base alone.
                let base = self.base.get_or_insert_with(MemoryRows::default);
                for b in log.blocks.drain(..n) {
                    dropped += b.records.len();
                    for r in &b.records {
                        apply_ops(base, &key.0, &key.1, r);
                    }
                }
            }
            if let Some(e) = self.attestations.get_mut(&a.scope) {
                e.base = Some(a);
            }
        }
        dropped
    }

    /// The checkpoint of `key` at `seq`: its base, or the held block ending there.
    fn checkpoint_at(&self, key: &ChainKey, seq: u64) -> Option<Checkpoint> {
        let log = self.chains.get(key)?;
        if let Some(c) = log.base.as_ref().filter(|c| c.seq == seq) {
            return Some(c.clone());
        }
        let i = log.blocks.partition_point(|b| b.last_seq() < seq);
        let b = log.blocks.get(i).filter(|b| b.last_seq() == seq)?;
        Some(Checkpoint::of_block(b))
    }

    /// What a snapshot for the scopes `covers` holds: for each covered scope whose history was
    /// compacted here, an attestation held whose heads are at or past every chain's
    /// checkpoint, held here, with the rows the base and the records up to them give, when
    /// they give its digest (the newest such, else the one the base rows stand at), and the
    /// checkpoints of its heads. A scope none fits (a purge since its last attestation) is left
    /// out, as is one whose history is whole (it is sent as blocks).
    ///
    /// A scope `disputed` (the peer holds another branch of one of its chains) is served held
    /// whole too, at its newest attestation: the peer may need it to rebase (sec. 6).
    pub(crate) fn snapshot_parts(
        &self,
        covers: &dyn Fn(&ScopeId) -> bool,
        disputed: &dyn Fn(&ScopeId) -> bool,
    ) -> SnapshotParts {
        let mut parts: SnapshotParts = Default::default();
        for (scope, e) in self.attestations.iter().filter(|(s, _)| covers(s)) {
            let compacted =
                (self.chains.iter()).any(|((_, s), log)| s == scope && log.base.is_some());
            if !compacted && !disputed(scope) {
                continue;
            }
            for a in [Some(&e.newest), e.base.as_ref()].into_iter().flatten() {
                let past_base = (self.chains.iter()).filter(|((_, s), _)| s == scope).all(
                    |((author, _), log)| {
                        let base = log.base.as_ref().map_or(0, |c| c.seq);
                        base <= a.heads.get(author).map_or(0, |h| h.0)
                    },
                );
                if !past_base || !self.holds(a) {
                    continue;
                }
                let rows = self.rows_at(scope, &a.heads);
                if rows_digest(rows.iter()) != a.digest {
                    continue;
                }
                let cps: Option<Vec<Checkpoint>> = (a.heads.iter())
                    .map(|(author, (seq, _))| self.checkpoint_at(&(*author, scope.clone()), *seq))
                    .collect();
                let Some(cps) = cps else {
                    continue;
                };
                parts.0.extend(cps);
                parts.1.push(a.clone());
                parts
                    .2
                    .extend(rows.iter().map(|(k, r)| (k.clone(), r.clone())));
                break;
            }
        }
        parts
    }

    /// Checks a snapshot's rows against its attestations: each signed by its scope's owner,
    /// naming exactly the snapshot's checkpoints of the scope, with the digest the scope's rows
    /// give; every row and checkpoint of a scope one attests. The first failure, if any.
    pub(crate) fn check_attested(
        checkpoints: &[Checkpoint],
        attestations: &[Attestation],
        rows: &[(RowKey, RowState)],
    ) -> Option<(Reason, ScopeId, String)> {
        let mut by_scope: BTreeMap<&ScopeId, &Attestation> = BTreeMap::new();
        for a in attestations {
            if let Err(e) = a.check() {
                return Some((e.reason(), a.scope.clone(), e.to_string()));
            }
            if by_scope.insert(&a.scope, a).is_some() {
                return Some((
                    Reason::Malformed,
                    a.scope.clone(),
                    "two attestations of one scope".into(),
                ));
            }
        }
        let mut named: BTreeMap<&ScopeId, ScopeHeads> = BTreeMap::new();
        for c in checkpoints {
            let heads = named.entry(&c.scope).or_default();
            if heads.insert(c.author, (c.seq, c.hash)).is_some() {
                return Some((
                    Reason::Malformed,
                    c.scope.clone(),
                    "two checkpoints of one chain".into(),
                ));
            }
        }
        for (scope, heads) in &named {
            match by_scope.get(scope) {
                Some(a) if a.heads == *heads => {}
                _ => {
                    return Some((
                        Reason::Malformed,
                        (*scope).clone(),
                        "checkpoints no attestation names".into(),
                    ))
                }
            }
        }
        let mut digests: BTreeMap<&ScopeId, Vec<(&RowKey, &RowState)>> = BTreeMap::new();
        for (k, row) in rows {
            if !by_scope.contains_key(&k.scope) {
                return Some((
                    Reason::Malformed,
                    k.scope.clone(),
                    "rows of a scope no attestation covers".into(),
                ));
            }
            digests.entry(&k.scope).or_default().push((k, row));
        }
        for (scope, a) in &by_scope {
            if named
                .get(scope)
                .map_or(!a.heads.is_empty(), |h| *h != a.heads)
            {
                return Some((
                    Reason::Malformed,
                    (*scope).clone(),
                    "an attestation's heads without their checkpoints".into(),
                ));
            }
            let d: Hash = rows_digest(digests.remove(scope).unwrap_or_default());
            if d != a.digest {
                return Some((
                    Reason::Malformed,
                    (*scope).clone(),
                    "rows that do not give the owner's attested digest".into(),
                ));
            }
        }
        None
    }

    /// After a snapshot was installed: its attestations are what the base rows of their
    /// scopes stand at.
    pub(crate) fn installed_attestations(&mut self, attestations: Vec<Attestation>) {
        for a in attestations {
            self.keep_attestation(a.clone());
            if let Some(e) = self.attestations.get_mut(&a.scope) {
                let newer = e.base.as_ref().is_none_or(|b| a.newer_than(b));
                if newer {
                    e.base = Some(a);
                }
            }
        }
    }
}
