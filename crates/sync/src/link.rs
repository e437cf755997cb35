//! The sync protocol as a state machine (docs/sync.md sec. 9): one `Link` per connected peer;
//! `Replica::open_link`, `handle` and `poll` take bytes and time in and give bytes and events
//! out. A transport only carries the bytes.

use crate::chain::{Block, ChainKey, Checkpoint};
use crate::error::Reason;
use crate::identity::AuthorId;
use crate::merge::{RowKey, RowState, RowStore};
use crate::protocol::{encode_blocks_page, Message, VersionVector};
use crate::replica::{Event, PeerInfo, Replica};
use crate::scope::{ScopeId, Subscription};
use std::collections::{BTreeMap, BTreeSet};

/// The state of one connection to a peer. Dropping it and making a new one is how a cut
/// connection resumes: the new HELLO says where to restart.
#[derive(Debug, Default)]
pub struct Link {
    pub peer: Option<AuthorId>,
    their_want: Option<Subscription>,
    their_wants_snapshot: bool,
    /// What the peer holds, from its HELLO and ACKs.
    their_have: VersionVector,
    /// What we have sent (at least `their_have`).
    sent: VersionVector,
    /// Writer lists sent, by signature.
    sent_lists: BTreeSet<[u8; 64]>,
    last_progress_ms: u64,
    snapshot_rx: Option<SnapshotRx>,
    snapshot_sent: bool,
    snapshots_made: u64,
    served: Option<Served>,
}

/// The chains and writer-list scopes a link's peer is served, in key order, kept while the
/// replica's `(chains, lists)` counts are unchanged: `pump` then walks these instead of every
/// chain the replica holds (a relay holds many; each peer is served few).
#[derive(Debug)]
struct Served {
    key: (usize, usize),
    chains: Vec<ChainKey>,
    list_scopes: Vec<ScopeId>,
}

type SnapshotPage = (Vec<Checkpoint>, Vec<(RowKey, RowState)>);

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
    pub fn new() -> Link {
        Link::default()
    }
    /// Records sent and not acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.sent
            .iter()
            .map(|(k, s)| s.saturating_sub(self.their_have.get(k).copied().unwrap_or(0)))
            .sum()
    }

    /// Forgets what was sent beyond what the peer acknowledged, so that the next `poll` sends
    /// it again: what a retransmission timeout does, and what a host does at once when a reply
    /// it was given never went out (the call that made it failed).
    pub fn rewind(&mut self) {
        self.sent = self.their_have.clone();
        self.snapshot_sent = false;
        self.sent_lists.clear();
    }

    pub fn their_have(&self) -> &VersionVector {
        &self.their_have
    }
}

impl<S: RowStore> Replica<S> {
    /// Starts a connection: the HELLO to send.
    pub fn open_link(&mut self, _link: &mut Link, _now_ms: u64) -> Vec<u8> {
        self.edits += 1;
        self.seal();
        let empty = !self
            .chains
            .keys()
            .any(|(_, s)| self.config.subscription.covers(s));
        Message::Hello {
            replica: self.id(),
            wants_snapshot: self.config.snapshot_when_empty && empty,
            want: self.config.subscription.clone(),
            have: self.version_vector(),
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
                wants_snapshot,
                want,
                have,
            } => {
                link.peer = Some(replica);
                link.their_have = have.clone();
                link.sent = have.clone();
                link.their_want = Some(want.clone());
                link.their_wants_snapshot = wants_snapshot;
                link.sent_lists.clear();
                link.snapshot_sent = false;
                link.served = None;
                link.last_progress_ms = now_ms;
                self.peers.insert(replica, PeerInfo { acked: have, want });
                self.peer_changed(replica);
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
                for (k, seq, hash) in heads {
                    if self.chains.get(&k).and_then(|l| l.hash_at(seq)) == Some(hash) {
                        let sent = link.sent.entry(k).or_insert(0);
                        *sent = (*sent).max(seq);
                    }
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
                out.events.extend(events);
                let ack: VersionVector = chains
                    .into_iter()
                    .filter_map(|k| {
                        let s = self.chains.get(&k).map_or(0, |l| l.head().0);
                        (s > 0).then_some((k, s))
                    })
                    .collect();
                out.send.push(Message::Ack(ack).encode());
            }
            Message::Ack(vv) => {
                let mut progress = false;
                for (k, s) in vv {
                    let cur = link.their_have.entry(k.clone()).or_insert(0);
                    if s > *cur {
                        *cur = s;
                        progress = true;
                    }
                    let sent = link.sent.entry(k).or_insert(0);
                    *sent = (*sent).max(s);
                }
                if progress {
                    link.last_progress_ms = now_ms;
                }
                if let Some(p) = link.peer {
                    let mut moved = !self.peers.contains_key(&p);
                    let info = self.peers.entry(p).or_default();
                    for (k, s) in &link.their_have {
                        let a = info.acked.entry(k.clone()).or_insert(0);
                        moved |= *s > *a;
                        *a = (*a).max(*s);
                    }
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
                rows,
            } => {
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
                rx.pages.insert(page, (checkpoints, rows));
                if last {
                    rx.last = Some(page);
                }
                if rx
                    .last
                    .is_some_and(|l| l.checked_add(1) == Some(rx.pages.len() as u64))
                {
                    let rx = link.snapshot_rx.take().expect("invariant: set above");
                    let (mut cps, mut all_rows) = (Vec::new(), Vec::new());
                    for (_, (c, r)) in rx.pages {
                        cps.extend(c);
                        all_rows.extend(r);
                    }
                    out.events.extend(self.install_snapshot(cps, all_rows));
                    out.send.push(Message::Ack(self.version_vector()).encode());
                }
            }
            Message::Reject {
                code,
                author,
                scope,
                first_seq,
            } => out.events.push(Event::PeerRejected {
                code,
                author,
                scope,
                first_seq,
            }),
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

    fn pump(&mut self, link: &mut Link, now_ms: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let Some(want) = link.their_want.clone() else {
            return out;
        };
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
        if link.in_flight() == 0 {
            link.last_progress_ms = now_ms;
        }
        let key = (self.chains.len(), self.lists_added);
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
            },
        };
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
        // Snapshot if the peer is behind our compaction point, or asked for one while empty.
        // History in a block source is never behind: it is served as blocks (below).
        let stored = self.has_block_source();
        let behind = !stored
            && served.chains.iter().any(|k| {
                let first = self.chains.get(k).map_or(1, |log| log.first_held());
                first > 1 && link.sent.get(k).copied().unwrap_or(0) < first - 1
            });
        let asked = link.their_wants_snapshot
            && !link.snapshot_sent
            && link.their_have.is_empty()
            && !served.chains.is_empty();
        if (behind || asked) && !link.snapshot_sent && self.config.merge_rows {
            link.snapshots_made += 1;
            self.merge_deferred();
            let covers = |s: &ScopeId| serves(self, s);
            out.extend(self.snapshot_pages(&covers, link.snapshots_made));
            link.snapshot_sent = true;
            for cp in self.checkpoints_for(covers) {
                let k = (cp.author, cp.scope.clone());
                let s = link.sent.entry(k).or_insert(0);
                *s = (*s).max(cp.seq);
            }
        }
        // Then blocks, in pages, within the window.
        let page = self.config.page_records.max(1);
        let window = (self.config.window_pages.max(1) * page) as u64;
        loop {
            if link.in_flight() >= window {
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

    fn snapshot_pages(&self, covers: &dyn Fn(&ScopeId) -> bool, id: u64) -> Vec<Vec<u8>> {
        let page = self.config.page_records.max(1);
        let mut rows = Vec::new();
        self.merged_rows().scan(&mut |k, row| {
            if covers(&k.scope) {
                rows.push((k.clone(), row.clone()));
            }
        });
        let mut checkpoints = Some(self.checkpoints_for(covers));
        let mut out = Vec::new();
        let chunks: Vec<_> = if rows.is_empty() {
            vec![Vec::new()]
        } else {
            rows.chunks(page).map(<[_]>::to_vec).collect()
        };
        let last_i = chunks.len() - 1;
        for (i, chunk) in chunks.into_iter().enumerate() {
            out.push(
                Message::Snapshot {
                    id,
                    page: i as u64,
                    last: i == last_i,
                    checkpoints: checkpoints.take().unwrap_or_default(),
                    rows: chunk,
                }
                .encode(),
            );
        }
        out
    }
}
