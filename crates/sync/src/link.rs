//! The sync protocol as a state machine (docs/sync.md sec. 9): one `Link` per connected peer;
//! `Replica::open_link`, `handle` and `poll` take bytes and time in and give bytes and events
//! out. A transport only carries the bytes.

use crate::chain::{Block, ChainKey};
use crate::error::Reason;
use crate::identity::AuthorId;
use crate::merge::RowStore;
use crate::protocol::{encode_blocks_page, seqs, Heads, Message, VersionVector};
use crate::replica::{Event, PeerInfo, Replica};
use crate::scope::{ScopeId, Subscription};
use crate::wire::Hash;
use std::collections::{BTreeMap, BTreeSet};

/// The code of the REJECT that tells a peer its head for a chain is below what this replica
/// still holds of it (compacted away): docs/sync.md sec. 8.
pub const COMPACTED: &str = "COMPACTED";

/// The state of one connection to a peer. Dropping it and making a new one is how a cut
/// connection resumes: the new HELLO says where to restart.
#[derive(Debug, Default)]
pub struct Link {
    pub peer: Option<AuthorId>,
    /// Whose acknowledgements these are: the peer's key, or its key and device
    /// ([`peer_key`]).
    peer_key: Option<AuthorId>,
    their_want: Option<Subscription>,
    their_wants_snapshot: bool,
    /// What the peer holds, from its HELLO and ACKs.
    their_have: VersionVector,
    /// What we have sent (at least `their_have`).
    sent: VersionVector,
    /// Writer lists sent, by signature.
    sent_lists: BTreeSet<[u8; 64]>,
    /// The attestation sent last of each scope, by signature.
    sent_attest: BTreeMap<ScopeId, [u8; 64]>,
    last_progress_ms: u64,
    snapshot_rx: Option<SnapshotRx>,
    snapshot_sent: bool,
    snapshots_made: u64,
    served: Option<Served>,
    /// Whether this replica takes snapshots from the peer ([`Link::snapshot_source`]).
    snapshot_source: bool,
    /// Whether it asked the peer for one (a HELLO with the flag) and has not installed it yet.
    asked_snapshot: bool,
    /// Whether a snapshot from the peer was installed since its HELLO: pages that come after
    /// it (duplicates, a retransmission) are dropped, answered with an ACK.
    snapshot_installed: bool,
    /// The chain, and where our history of it starts, that the peer was last told it is
    /// behind of (a REJECT `COMPACTED`): told once per connection and place.
    told_compacted: Option<(ChainKey, u64)>,
    /// For chains the peer was seen to hold alike: the highest seq where its head had our
    /// record's hash, and how many times our branch of the chain had changed then.
    agreed: BTreeMap<ChainKey, (u64, u64)>,
    /// Chains the peer holds another branch of, as far as this replica knows (its heads, its
    /// FORK refusals): not counted as acknowledged by it.
    disputed: BTreeSet<ChainKey>,
    /// The proofs of forks sent to the peer since its HELLO: the chain, the seq they start at,
    /// the hash of the peer's record they answer (its head, or the end of its blocks), and how
    /// many times this replica's branch of the chain changed then. Each is sent once: a peer
    /// that moved to another branch, or a replica that did, makes a new one.
    proofs_sent: BTreeSet<(ChainKey, u64, Hash, u64)>,
    /// For each chain whose branch changed here (`Replica::branch_changes`), the count the
    /// peer was last told of (by HELLO or ACK): when it moves, the peer is told where the chain
    /// ends now, for it may believe this replica holds records it took back.
    announced: BTreeMap<ChainKey, u64>,
    /// The chains whose proofs were sent again because a fork was decided here for the branch
    /// an attestation (by its signature) names: once per attestation, so that two replicas
    /// that hold different attestations do not send each other their branches for ever.
    proved_again: BTreeSet<(ChainKey, [u8; 64])>,
    /// `Replica::greet_again` when this replica last greeted the peer (HELLO).
    greeted: u64,
    /// `Replica::rebase_asks` when this replica last asked the peer for a snapshot to rebase a
    /// scope on (docs/sync.md sec. 6).
    rebase_asked: u64,
}

/// The chains and writer-list scopes a link's peer is served, in key order, kept while the
/// replica's `(chains, lists)` counts are unchanged: `pump` then walks these instead of every
/// chain the replica holds (a relay holds many; each peer is served few).
#[derive(Debug)]
struct Served {
    key: (usize, usize, usize),
    chains: Vec<ChainKey>,
    list_scopes: Vec<ScopeId>,
    attest_scopes: Vec<ScopeId>,
}

type SnapshotPage = crate::replica::SnapshotParts;

/// Pages of one snapshot as they arrive, in any order.
#[derive(Debug, Default)]
struct SnapshotRx {
    id: u64,
    pages: BTreeMap<u64, SnapshotPage>,
    rows: usize,
    last: Option<u64>,
}

/// What `handle` and `poll` give back: messages for the peer, events for the application.
#[derive(Debug, Default)]
pub struct Output {
    pub send: Vec<Vec<u8>>,
    pub events: Vec<Event>,
}

impl Link {
    /// A link to a peer this replica takes no snapshot from: it syncs by blocks alone.
    pub fn new() -> Link {
        Link::default()
    }
    /// A link to a peer the host chose to bootstrap from (its relay, say): the replica asks it
    /// for a snapshot when it holds nothing it subscribes to (`Config::snapshot_when_empty`) or
    /// when the peer says it compacted what the replica lacks, and installs the snapshot it
    /// asked for. A snapshot's rows are the one thing a replica takes on trust (docs/sync.md
    /// sec. 8): from no other link is one installed.
    pub fn snapshot_source() -> Link {
        Link {
            snapshot_source: true,
            ..Link::default()
        }
    }
    /// Records sent and not acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.sent
            .iter()
            .map(|(k, s)| s.saturating_sub(self.their_have.get(k).copied().unwrap_or(0)))
            .sum()
    }

    /// What the send window counts: the records in flight on chains the peer is not known to
    /// hold another branch of. A peer's ACKs name its own branch of a disputed chain, so they
    /// never acknowledge the proof sent to it: counted, it would fill the window and stop the
    /// proof's rest (the records that would decide the fork) for good.
    fn window_in_flight(&self) -> u64 {
        self.sent
            .iter()
            .filter(|(k, _)| !self.disputed.contains(*k))
            .map(|(k, s)| s.saturating_sub(self.their_have.get(k).copied().unwrap_or(0)))
            .sum()
    }

    /// Forgets what was sent beyond what the peer acknowledged, so that the next `poll` sends
    /// it again: what a retransmission timeout does, and what a host does at once when a reply
    /// it was given never went out (the call that made it failed).
    pub fn rewind(&mut self) {
        // Where a proof of a fork lowered `sent` below what the peer holds (of its branch),
        // the proof stays to be sent.
        self.sent = (self.their_have.iter())
            .map(|(k, &have)| (k.clone(), self.sent.get(k).map_or(have, |&s| s.min(have))))
            .collect();
        self.snapshot_sent = false;
        self.sent_lists.clear();
        self.sent_attest.clear();
    }

    pub fn their_have(&self) -> &VersionVector {
        &self.their_have
    }
}

/// The id a peer's acknowledgements are kept under (`Replica::peers`): its key, or, for a
/// peer that names its device, a hash of the key and the device, so that two devices on one
/// key are two peers.
pub fn peer_key(replica: AuthorId, device: Option<[u8; 16]>) -> AuthorId {
    match device {
        None => replica,
        Some(d) => {
            let mut h = blake3::Hasher::new();
            h.update(b"cairn-sync device v1");
            h.update(&replica.0);
            h.update(&d);
            AuthorId(*h.finalize().as_bytes())
        }
    }
}

impl<S: RowStore> Replica<S> {
    /// Starts a connection: the HELLO to send.
    pub fn open_link(&mut self, link: &mut Link, _now_ms: u64) -> Vec<u8> {
        self.edits += 1;
        self.seal();
        let empty = !self
            .chains
            .keys()
            .any(|(_, s)| self.config.subscription.covers(s));
        // A scope to rebase (its owner attested two branches) needs a snapshot too.
        let rebase = !self.rebase_due.is_empty();
        link.asked_snapshot =
            link.snapshot_source && (self.config.snapshot_when_empty && empty || rebase);
        link.rebase_asked = self.rebase_asks;
        let wants = link.asked_snapshot;
        self.hello(link, wants)
    }

    fn hello(&mut self, link: &mut Link, wants_snapshot: bool) -> Vec<u8> {
        link.announced.clone_from(&self.branch_changes);
        link.greeted = self.greet_again;
        Message::Hello {
            replica: self.id(),
            device: self.device,
            wants_snapshot,
            want: self.config.subscription.clone(),
            have: self.heads(),
        }
        .encode()
    }

    /// Handles one message from the peer.
    pub fn handle(&mut self, link: &mut Link, now_ms: u64, bytes: &[u8]) -> Output {
        self.edits += 1;
        let mut out = Output::default();
        let msg = match Message::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                out.events.push(Event::Rejected {
                    reason: Reason::Malformed,
                    author: link.peer.unwrap_or(AuthorId([0; 32])),
                    scope: ScopeId::new(AuthorId([0; 32]), b""),
                    first_seq: 0,
                    detail: e.to_string(),
                });
                return out;
            }
        };
        match msg {
            Message::Hello {
                replica,
                device,
                wants_snapshot,
                want,
                have,
            } => {
                link.peer = Some(replica);
                link.peer_key = Some(peer_key(replica, device));
                let heads = have;
                let have = seqs(&heads);
                link.their_have = have.clone();
                link.sent = have.clone();
                link.proofs_sent.clear();
                link.disputed.clear();
                link.agreed.clear();
                self.send_fork_proofs(link, &heads);
                link.their_want = Some(want.clone());
                link.their_wants_snapshot = wants_snapshot;
                link.sent_lists.clear();
                link.sent_attest.clear();
                link.snapshot_sent = false;
                link.served = None;
                link.last_progress_ms = now_ms;
                // A chain the peer holds another branch of is not acknowledged: compaction
                // must keep the records where the branches part, or no one could decide.
                let key = peer_key(replica, device);
                let mut info = PeerInfo {
                    want,
                    ..PeerInfo::default()
                };
                self.acknowledged(link, &mut info, &heads);
                self.peers.insert(key, info);
                self.peer_changed(key);
            }
            Message::Attest(list) => {
                let events = self.receive_attestations(list);
                out.events.extend(events);
            }
            Message::Writers(lists) => {
                for l in lists {
                    let (scope, v) = (l.scope.clone(), l.version);
                    if let Err(e) = self.add_writer_list(l) {
                        out.events.push(Event::Rejected {
                            reason: e.reason(),
                            author: scope.owner,
                            scope,
                            first_seq: v,
                            detail: e.to_string(),
                        });
                    }
                }
                let rows = self.take_revoked_rows();
                if !rows.is_empty() {
                    out.events.push(Event::Applied {
                        records: 0,
                        rows: if self.config.report_rows {
                            rows
                        } else {
                            Vec::new()
                        },
                    });
                }
            }
            Message::Blocks(blocks) => {
                let chains: BTreeSet<_> = blocks.iter().map(|b| b.key()).collect();
                let heads: Vec<_> = blocks
                    .iter()
                    .map(|b| (b.key(), b.last_seq(), b.last_hash()))
                    .collect();
                let events = self.receive_blocks(now_ms, blocks);
                // The peer holds what it sent: where that is what we hold too (not a fork),
                // never send it back.
                for (k, seq, hash) in &heads {
                    if self.chains.get(k).and_then(|l| l.hash_at(*seq)) == Some(*hash) {
                        let sent = link.sent.entry(k.clone()).or_insert(0);
                        *sent = (*sent).max(*seq);
                    }
                }
                if let Some(p) = link.peer_key {
                    self.confirm_claims(p, &chains);
                }
                for e in &events {
                    if let Event::Rejected {
                        reason,
                        author,
                        scope,
                        first_seq,
                        ..
                    } = e
                    {
                        if !matches!(reason, Reason::Replay | Reason::ChainGap) {
                            out.send.push(
                                Message::Reject {
                                    code: reason.code().to_string(),
                                    author: *author,
                                    scope: scope.clone(),
                                    first_seq: *first_seq,
                                }
                                .encode(),
                            );
                        }
                    }
                }
                // A fork found in the peer's blocks that left this replica on its own branch:
                // its records go to the peer, from the first held (the peer may not see from
                // its block where the branches part), and the peer decides in turn.
                // A fork decided for the branch the owner attested: the peer gets it again,
                // though sent before (it may have decided before it knew the attestation).
                for (key, sig) in std::mem::take(&mut self.kept_attested) {
                    if link.proved_again.insert((key.clone(), sig)) {
                        link.proofs_sent.retain(|(k, ..)| *k != key);
                    }
                }
                for e in &events {
                    if let Event::Fork { author, scope, .. } = e {
                        let key = (*author, scope.clone());
                        // Adopted: this replica now holds the peer's furthest record of it.
                        let furthest = heads
                            .iter()
                            .filter(|(k, _, _)| *k == key)
                            .max_by_key(|(_, seq, _)| *seq);
                        let adopted = furthest.is_some_and(|(k, seq, hash)| {
                            self.chains.get(k).and_then(|l| l.hash_at(*seq)) == Some(*hash)
                        });
                        let answers = furthest.map_or([0; 32], |(_, _, hash)| *hash);
                        if !adopted {
                            let from = self.chains.get(&key).map_or(1, |l| l.first_held());
                            self.send_proof(link, &key, from, answers);
                        }
                    }
                }
                out.events.extend(events);
                let lost = std::mem::take(&mut self.lost);
                if !lost.is_empty() {
                    out.send.push(Message::Blocks(lost).encode());
                }
                let ack: Heads = chains
                    .into_iter()
                    .filter_map(|k| {
                        let head = self.chains.get(&k).map_or((0, [0; 32]), |l| l.head());
                        (head.0 > 0).then_some((k, head))
                    })
                    .collect();
                out.send.push(Message::Ack(ack).encode());
            }
            Message::Ack(heads) => {
                let mut progress = false;
                for (k, &(s, h)) in &heads {
                    let held = self.chains.get(k).and_then(|l| l.hash_at(s));
                    let ours = held == Some(h);
                    if !ours && (held.is_some() || self.forks.contains(&k.0)) {
                        // A head on another branch (another record where we hold one, fork
                        // known here or not), or past ours of a chain known to be forked, says
                        // nothing of what the peer holds of ours (an ACK overtaken by one sent
                        // after the peer moved to our branch is such a one):
                        // `send_fork_proofs` below answers it.
                        continue;
                    }
                    let cur = link.their_have.entry(k.clone()).or_insert(0);
                    if s > *cur {
                        *cur = s;
                        progress = true;
                    } else if s < *cur && self.forks.contains(&k.0) {
                        // A forked chain's peer that gave up its branch for a shorter one holds
                        // less than it acknowledged before: it is sent the rest again.
                        *cur = s;
                        link.sent.insert(k.clone(), s);
                        continue;
                    }
                    let sent = link.sent.entry(k.clone()).or_insert(0);
                    *sent = (*sent).max(s);
                }
                self.send_fork_proofs(link, &heads);
                if progress {
                    link.last_progress_ms = now_ms;
                }
                if let Some(p) = link.peer_key {
                    let info = self.peers.remove(&p);
                    let new = info.is_none();
                    let mut info = info.unwrap_or_default();
                    let moved = self.acknowledged(link, &mut info, &heads) || new;
                    self.peers.insert(p, info);
                    if moved {
                        self.peer_changed(p);
                    }
                }
            }
            Message::Snapshot {
                id,
                page,
                last,
                checkpoints,
                attestations,
                rows,
            } => {
                if !link.asked_snapshot && link.snapshot_installed {
                    // What we hold now, so that a peer whose first ACK was lost stops resending.
                    out.send.push(Message::Ack(self.heads()).encode());
                    return out;
                }
                if !link.asked_snapshot {
                    out.events.push(Event::Rejected {
                        reason: Reason::Unsolicited,
                        author: link.peer.unwrap_or(AuthorId([0; 32])),
                        scope: ScopeId::new(AuthorId([0; 32]), b""),
                        first_seq: 0,
                        detail: if link.snapshot_source {
                            "snapshot refused: this replica did not ask for one".into()
                        } else {
                            "snapshot refused: this link is not one snapshots are taken from".into()
                        },
                    });
                    return out;
                }
                // Pages of another snapshot are forgotten: a resent snapshot may hold newer rows
                // cut into pages differently, and checkpoints only match their own rows.
                if link.snapshot_rx.as_ref().map(|rx| rx.id) != Some(id) {
                    link.snapshot_rx = Some(SnapshotRx {
                        id,
                        ..SnapshotRx::default()
                    });
                }
                let rx = link.snapshot_rx.as_mut().expect("invariant: set above");
                rx.rows += rows.len();
                if rx.rows > self.config.max_snapshot_rows {
                    link.snapshot_rx = None;
                    out.events.push(Event::Rejected {
                        reason: Reason::Malformed,
                        author: link.peer.unwrap_or(AuthorId([0; 32])),
                        scope: ScopeId::new(AuthorId([0; 32]), b""),
                        first_seq: 0,
                        detail: "snapshot larger than max_snapshot_rows".into(),
                    });
                    return out;
                }
                rx.pages.insert(page, (checkpoints, attestations, rows));
                if last {
                    rx.last = Some(page);
                }
                if rx
                    .last
                    .is_some_and(|l| l.checked_add(1) == Some(rx.pages.len() as u64))
                {
                    let rx = link.snapshot_rx.take().expect("invariant: set above");
                    let (mut cps, mut atts, mut all_rows) = (Vec::new(), Vec::new(), Vec::new());
                    for (_, (c, a, r)) in rx.pages {
                        cps.extend(c);
                        atts.extend(a);
                        all_rows.extend(r);
                    }
                    let events = self.install_snapshot(now_ms, cps, atts, all_rows);
                    // Refused, it is still wanted: the peer may send a sound one (after a
                    // retransmission or a new HELLO).
                    link.asked_snapshot =
                        events.iter().any(|e| matches!(e, Event::Rejected { .. }));
                    link.snapshot_installed = !link.asked_snapshot;
                    out.events.extend(events);
                    out.send.push(Message::Ack(self.heads()).encode());
                }
            }
            Message::Reject {
                code,
                author,
                scope,
                first_seq,
            } => {
                // The peer dropped history this replica lacks: only a snapshot can help, and
                // only one asked of a peer the host chose.
                if code == COMPACTED && link.snapshot_source && !link.asked_snapshot {
                    link.asked_snapshot = true;
                    out.send.push(self.hello(link, true));
                }
                // The peer keeps another branch of the chain: its acknowledgements of it do not
                // count for compaction until the branches agree again.
                if code == Reason::Fork.code() {
                    link.disputed.insert((author, scope.clone()));
                    self.disputed.insert((author, scope.clone()));
                }
                out.events.push(Event::PeerRejected {
                    code,
                    author,
                    scope,
                    first_seq,
                });
            }
        }
        out.send.extend(self.pump(link, now_ms));
        out
    }

    /// Seals local writes and sends what the peer lacks; resends what went unacknowledged for
    /// `retransmit_ms`. Call after local commits and on a timer.
    pub fn poll(&mut self, link: &mut Link, now_ms: u64) -> Vec<Vec<u8>> {
        self.edits += 1;
        if link.in_flight() > 0
            && now_ms.saturating_sub(link.last_progress_ms) >= self.config.retransmit_ms
        {
            link.rewind();
            link.last_progress_ms = now_ms;
        }
        self.pump(link, now_ms)
    }

    /// Counts the heads a peer named (HELLO, ACK) in what it acknowledged: a head where this
    /// replica holds the same record says the peer holds its branch that far; one at a seq not
    /// held here yet is kept as a claim, counted once the same record is held
    /// (`Replica::horizon`); one on another branch (or of a chain in dispute with the peer)
    /// counts for nothing. Whether `acked` moved.
    fn acknowledged(&self, link: &Link, info: &mut PeerInfo, heads: &Heads) -> bool {
        let mut moved = false;
        for (k, &(s, h)) in heads {
            if link.disputed.contains(k) {
                info.claims.remove(k);
                continue;
            }
            match self.chains.get(k).and_then(|l| l.hash_at(s)) {
                Some(ours) if ours == h => {
                    info.claims.remove(k);
                    let a = info.acked.entry(k.clone()).or_insert(0);
                    moved |= s > *a;
                    *a = (*a).max(s);
                }
                Some(_) => {
                    info.claims.remove(k);
                }
                None => {
                    info.claims.insert(k.clone(), (s, h));
                }
            }
        }
        moved
    }

    /// The heads `peer` named past what this replica held (`PeerInfo::claims`) on `chains`
    /// that the records held now confirm (the same record at that seq) become acknowledged,
    /// and so are saved with the peer.
    fn confirm_claims(&mut self, peer: AuthorId, chains: &BTreeSet<ChainKey>) {
        let Some(info) = self.peers.get_mut(&peer) else {
            return;
        };
        let mut moved = false;
        for k in chains {
            let Some(&(s, h)) = info.claims.get(k) else {
                continue;
            };
            if self.chains.get(k).and_then(|l| l.hash_at(s)) == Some(h) {
                info.claims.remove(k);
                let a = info.acked.entry(k.clone()).or_insert(0);
                *a = (*a).max(s);
                moved = true;
            }
        }
        if moved {
            self.peer_changed(peer);
        }
    }

    /// Where the peer ended a chain at a record this replica holds with another hash, the chain's
    /// author signed two records at one place (a fork), or the peer lies. A head is not signed,
    /// so nothing is concluded from it: the records held from that place are sent to the peer
    /// (once per place), whose verification finds the fork, and the peer's records in turn,
    /// sent the same way, let this replica find it. Either side may hold the longer branch.
    fn send_fork_proofs(&mut self, link: &mut Link, heads: &Heads) {
        let mut disputed = Vec::new();
        for (key, &(seq, hash)) in heads {
            let Some(log) = self.chains.get(key) else {
                continue;
            };
            let branch = self.branch_changes.get(key).copied().unwrap_or(0);
            match log.hash_at(seq) {
                Some(h) if h == hash => {
                    link.disputed.remove(key);
                    // Every ACK names its chains: the key is copied only the first time.
                    match link.agreed.get_mut(key) {
                        Some(a) if a.1 != branch || a.0 < seq => *a = (seq, branch),
                        Some(_) => {}
                        None => {
                            link.agreed.insert(key.clone(), (seq, branch));
                        }
                    }
                }
                // Another record where the peer ends, or, for a chain known to be forked, a
                // head past ours that may be on another branch: our records from the last
                // place the peer was seen to agree with us go to it.
                Some(_) => {
                    link.disputed.insert(key.clone());
                    disputed.push(key.clone());
                    // The peer agreed with us below `seq` at most: it left the branch it held.
                    if let Some(a) = link.agreed.get_mut(key) {
                        a.0 = a.0.min(seq.saturating_sub(1));
                    }
                    self.send_proof(link, key, self.agreed_from(link, key), hash);
                }
                None if self.forks.contains(&key.0) && seq > log.head().0 => {
                    link.disputed.insert(key.clone());
                    self.send_proof(link, key, self.agreed_from(link, key), hash);
                }
                None => {}
            }
        }
        self.disputed.extend(disputed);
    }

    /// Where a proof for chain `key` starts: after the last place the peer was seen to hold the
    /// same record as this replica's branch now, or at the first record held.
    fn agreed_from(&self, link: &Link, key: &ChainKey) -> u64 {
        let branch = self.branch_changes.get(key).copied().unwrap_or(0);
        let first = self.chains.get(key).map_or(1, |l| l.first_held());
        let agreed = link
            .agreed
            .get(key)
            .filter(|(_, b)| *b == branch)
            .map_or(0, |(seq, _)| *seq);
        (agreed + 1).max(first)
    }

    /// Sends the peer this replica's records of chain `key` from `seq` on (once per place and
    /// HELLO): they prove a fork there to it.
    fn send_proof(&self, link: &mut Link, key: &ChainKey, seq: u64, answers: Hash) {
        let held = self
            .chains
            .get(key)
            .is_some_and(|log| seq >= log.first_held() && seq > 0 && log.sealed_head().0 >= seq);
        // Sent again once the scope's owner attests anew: a peer that kept its branch by an
        // older attestation may keep pieces of the newly attested one aside, waiting for the
        // records where the branches part, which it refused before.
        let attested = (self.attestations.get(&key.1)).map_or(0, |e| {
            u64::from_le_bytes(e.newest.sig[..8].try_into().unwrap_or([0; 8]))
        });
        let branch = self.branch_changes.get(key).copied().unwrap_or(0) ^ attested;
        if held && link.proofs_sent.insert((key.clone(), seq, answers, branch)) {
            let sent = link.sent.entry(key.clone()).or_insert(0);
            *sent = (*sent).min(seq - 1);
        }
    }

    fn pump(&mut self, link: &mut Link, now_ms: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let Some(want) = link.their_want.clone() else {
            return out;
        };
        // An attestation learned here contradicts a branch held: greeted again, the peer sends
        // its records of every chain whose head differs from ours from the first it holds.
        self.check_rebases();
        // A scope found to need a rebase since the peer was last asked: a snapshot of the peer
        // may bring it onto the attested branch (docs/sync.md sec. 6).
        let rebase = link.snapshot_source
            && !self.rebase_due.is_empty()
            && link.rebase_asked != self.rebase_asks;
        if rebase {
            link.rebase_asked = self.rebase_asks;
            link.asked_snapshot = true;
        }
        if link.greeted != self.greet_again || rebase {
            out.push(self.hello(link, link.asked_snapshot));
        }
        // With `serve_members_only`, the peer's subscription is cut to the scopes its key may
        // write to; checked per scope at each send, so a new writer list takes effect at once.
        let member = self
            .config
            .serve_members_only
            .then(|| link.peer.unwrap_or(AuthorId([0; 32])));
        let serves = |me: &Self, s: &ScopeId| {
            want.covers(s) && member.as_ref().is_none_or(|p| me.may_write(p, s))
        };
        self.seal();
        if !self.attest_due.is_empty() {
            self.attest_purged(now_ms);
        }
        if link.in_flight() == 0 {
            link.last_progress_ms = now_ms;
        }
        let key = (self.chains.len(), self.lists_added, self.attestations.len());
        let served = match link.served.take() {
            Some(s) if s.key == key => s,
            _ => Served {
                key,
                chains: self
                    .chains
                    .keys()
                    .filter(|k| serves(self, &k.1))
                    .cloned()
                    .collect(),
                list_scopes: self
                    .writer_lists
                    .keys()
                    .filter(|s| serves(self, s))
                    .cloned()
                    .collect(),
                attest_scopes: self
                    .attestations
                    .keys()
                    .filter(|s| serves(self, s))
                    .cloned()
                    .collect(),
            },
        };
        // Chains this replica took records of back since the peer last heard where they end
        // (a fork decided against its branch): the peer may count on records no longer here,
        // and sends them again once it knows (see `Message::Ack` above).
        if link.announced != self.branch_changes {
            let moved: Heads = (self.branch_changes.iter())
                .filter(|&(k, b)| link.announced.get(k) != Some(b) && serves(self, &k.1))
                .filter_map(|(k, _)| {
                    let head = self.chains.get(k).map(|l| l.head())?;
                    (head.0 > 0).then(|| (k.clone(), head))
                })
                .collect();
            link.announced.clone_from(&self.branch_changes);
            if !moved.is_empty() {
                out.push(Message::Ack(moved).encode());
            }
        }
        // Writer lists first: blocks by listed writers are refused without them.
        let lists: Vec<_> = served
            .list_scopes
            .iter()
            .filter_map(|s| self.writer_lists.get(s))
            .flat_map(|m| m.values())
            .filter(|l| !link.sent_lists.contains(&l.sig))
            .cloned()
            .collect();
        if !lists.is_empty() {
            for l in &lists {
                link.sent_lists.insert(l.sig);
            }
            out.push(Message::Writers(lists).encode());
        }
        // The owners' attestations, so that the peer may compact (the newest of each scope).
        let attest: Vec<_> = served
            .attest_scopes
            .iter()
            .filter_map(|s| self.attestations.get(s))
            .map(|e| &e.newest)
            .filter(|a| link.sent_attest.get(&a.scope) != Some(&a.sig))
            .cloned()
            .collect();
        if !attest.is_empty() {
            for a in &attest {
                link.sent_attest.insert(a.scope.clone(), a.sig);
            }
            out.push(Message::Attest(attest).encode());
        }
        // A snapshot goes only to a peer that asked for one. A peer behind our compaction point
        // that did not is told so (a REJECT `COMPACTED`, once per HELLO): it asks if it takes
        // snapshots from us, and otherwise syncs those chains with a peer that holds them.
        // History in a block source is never behind: it is served as blocks (below).
        let stored = self.has_block_source();
        let behind = served.chains.iter().find(|k| {
            let first = self.chains.get(*k).map_or(1, |log| log.first_held());
            !stored && first > 1 && link.sent.get(*k).copied().unwrap_or(0) < first - 1
        });
        // Told again, though it asked for a snapshot and was sent one, when the history dropped
        // here moved past the peer since (a snapshot installed, a compaction): the snapshot it
        // took may not reach what it lacks now. Once per connection and place, so that a peer
        // that no snapshot of ours helps does not ask for ever.
        let behind_at = behind.map(|k| {
            let first = self.chains.get(k).map_or(1, |log| log.first_held());
            (k.clone(), first)
        });
        let sent_one = !link.their_wants_snapshot || link.snapshot_sent;
        if let Some((k, first)) = behind_at
            .clone()
            .filter(|b| sent_one && link.told_compacted.as_ref() != Some(b))
        {
            link.told_compacted = Some((k.clone(), first));
            out.push(
                Message::Reject {
                    code: COMPACTED.into(),
                    author: k.0,
                    scope: k.1.clone(),
                    first_seq: first,
                }
                .encode(),
            );
        }
        let asked = link.their_wants_snapshot && !served.chains.is_empty();
        if asked && !link.snapshot_sent && self.config.merge_rows {
            link.snapshots_made += 1;
            self.merge_deferred();
            let covers = |s: &ScopeId| serves(self, s);
            // A scope one of whose chains the peer holds another branch of is served even if
            // held whole: the peer may have compacted that branch, and needs to rebase.
            let disputed = |s: &ScopeId| link.disputed.iter().any(|(_, d)| d == s);
            // What the peer holds moves by its ACKs alone: a snapshot it had installed already
            // is dropped, and the blocks after the peer's heads must still follow.
            let parts = self.snapshot_parts(&covers, &disputed);
            out.extend(self.snapshot_pages(parts, link.snapshots_made));
            link.snapshot_sent = true;
            // The snapshot reaches where our history starts now: the peer is told again only
            // once it starts further.
            if behind_at.is_some() {
                link.told_compacted = behind_at;
            }
        }
        // Then blocks, in pages, within the window.
        let page = self.config.page_records.max(1);
        let window = (self.config.window_pages.max(1) * page) as u64;
        loop {
            if link.window_in_flight() >= window {
                break;
            }
            let mut blocks = Vec::new();
            let mut n = 0;
            // Blocks read back from the block source for this page, per chain, before the
            // chain's blocks in memory (read first: the page borrows the chains after).
            let mut from_store: Vec<(usize, Vec<Block>)> = Vec::new();
            if stored {
                for (i, k) in served.chains.iter().enumerate() {
                    if n >= page {
                        break;
                    }
                    let from = link.sent.get(k).copied().unwrap_or(0).saturating_add(1);
                    let read = self.stored_blocks(k, from, page - n);
                    for b in &read {
                        n += (b.last_seq() - from.max(b.first_seq())) as usize + 1;
                    }
                    if !read.is_empty() {
                        from_store.push((i, read));
                    }
                }
                n = 0;
            }
            let mut from_store = from_store.iter().peekable();
            for (i, k) in served.chains.iter().enumerate() {
                if n >= page {
                    break;
                }
                let Some(log) = self.chains.get(k) else {
                    continue;
                };
                let mut from = link.sent.get(k).copied().unwrap_or(0).saturating_add(1);
                if let Some((_, read)) = from_store.next_if(|(j, _)| *j == i) {
                    for b in read {
                        let part_from = from.max(b.first_seq());
                        n += (b.last_seq() - part_from) as usize + 1;
                        link.sent.insert(k.clone(), b.last_seq());
                        blocks.push((b, part_from));
                        from = b.last_seq() + 1;
                    }
                }
                if from < log.first_held() {
                    continue; // only a snapshot can help; sent above
                }
                let start = log.blocks.partition_point(|b| b.last_seq() < from);
                for b in &log.blocks[start..] {
                    if n >= page {
                        break;
                    }
                    let part_from = from.max(b.first_seq());
                    n += (b.last_seq() - part_from) as usize + 1;
                    link.sent.insert(k.clone(), b.last_seq());
                    blocks.push((b, part_from));
                }
            }
            if blocks.is_empty() {
                break;
            }
            out.push(encode_blocks_page(&blocks));
        }
        link.served = Some(served);
        out
    }

    fn snapshot_pages(&self, parts: crate::replica::SnapshotParts, id: u64) -> Vec<Vec<u8>> {
        let page = self.config.page_records.max(1);
        let (checkpoints, attestations, rows) = parts;
        let mut first = Some((checkpoints, attestations));
        let mut out = Vec::new();
        let chunks: Vec<_> = if rows.is_empty() {
            vec![Vec::new()]
        } else {
            rows.chunks(page).map(<[_]>::to_vec).collect()
        };
        let last_i = chunks.len() - 1;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let (checkpoints, attestations) = first.take().unwrap_or_default();
            out.push(
                Message::Snapshot {
                    id,
                    page: i as u64,
                    last: i == last_i,
                    checkpoints,
                    attestations,
                    rows: chunk,
                }
                .encode(),
            );
        }
        out
    }
}
