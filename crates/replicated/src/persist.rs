//! The replica's state in the database's own trees (docs/sync.md, "In the database"):
//!
//! | tree | key | value |
//! |---|---|---|
//! | `SYSTEM_TREES + 1` meta | `layout`, `identity`, `owner`, `clock`, `peers`, `subscription` | u8 layout, key export, author, u64le HLC, peers, what this replica asks for |
//! | `SYSTEM_TREES + 1` meta | `pending/`, `author`, `scope`, `u64be seq` | a small pending record, until meta holds [`TAIL_BYTES`] of them |
//! | `SYSTEM_TREES + 2` rows | `bytes table`, `scope`, pk encoding | `RowState` encoding, as of the last time history was dropped |
//! | `SYSTEM_TREES + 3` log | `author`, `scope`, `u8 kind`, `u64be seq` | checkpoint (0), block (1), pending record (2), run of pending records from meta (3) |
//! | `SYSTEM_TREES + 4` writers | `scope`, `u64be version`, `sig` | writer list |
//!
//! Writes are incremental: after each operation only the blocks and records appended since the
//! last save (tracked per chain in [`Saved`]) and the small meta values that changed are
//! written. The merged rows are written whole only when history is dropped (compaction, a
//! snapshot); on open they are rebuilt from those rows and the history held since.

use crate::State;
use cairn_sql::schema::Catalog;
use cairn_sql::storage::SYSTEM_TREES;
use cairn_sql::{Error, Result, Storage};
use cairn_sync::protocol::{decode_vv, encode_vv};
use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{
    AuthorId, Block, ChainKey, ChainLog, Checkpoint, Identity, PeerInfo, Record, Replica, RowKey,
    RowState, ScopeId, Subscription, WriterList,
};
use std::collections::BTreeMap;
use std::ops::Bound;

const META: u64 = SYSTEM_TREES + 1;
const ROWS: u64 = SYSTEM_TREES + 2;
const LOG: u64 = SYSTEM_TREES + 3;
const WRITERS: u64 = SYSTEM_TREES + 4;

/// The layout of these trees this code writes (meta key `layout`; none means 1, where every
/// pending record is in the log). A database with a newer layout is refused.
const LAYOUT: u8 = 2;
/// Meta keys of pending records not moved to the log yet: `TAIL` + author + scope + u64be seq.
const TAIL: &[u8] = b"pending/";
/// How many bytes of pending records (keys and values) meta holds before they move to the log
/// in one go: well inside one page, so that meta stays a one-page tree.
const TAIL_BYTES: usize = 2048;
/// A record larger than this goes to the log directly.
const TAIL_RECORD: usize = 512;

const K_CHECKPOINT: u8 = 0;
const K_BLOCK: u8 = 1;
const K_PENDING: u8 = 2;
/// Consecutive pending records moved from meta together (key: the first one's seq): `varint n`,
/// then n x `bytes` record.
const K_PENDING_RUN: u8 = 3;

/// How far each chain is saved.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Mark {
    base: u64,
    blocks_upto: u64,
    pending_upto: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Saved {
    /// A search tree: a database writes few chains, and comparing a key or two is cheaper than
    /// hashing one (the map's hasher is keyed, for peers' ids).
    marks: BTreeMap<ChainKey, Mark>,
    writers: usize,
    peers: Vec<u8>,
    /// The clock as saved, or as the saved log implies it (loading takes the newest of the
    /// saved clock and every HLC of the log).
    clock: u64,
    /// The newest HLC of the records written to the log since history was last dropped: a
    /// clock no newer needs no write of its own (a local commit's clock is its record's HLC).
    log_clock: u64,
    redactions: u64,
    /// Pending records saved in meta, not yet in the log (their chain and seq), and the bytes
    /// they take there.
    tail: Vec<(ChainKey, u64)>,
    tail_bytes: usize,
    /// Runs of pending records saved together in the log: chain, first and last seq.
    runs: Vec<(ChainKey, u64, u64)>,
    /// Meta says `layout` 2 (a database of layout 1 is marked before it holds anything that
    /// layout 1 would not read).
    layout: bool,
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Storage(cairn_store::Error::Corrupt(format!(
        "sync state: {what}: {e}"
    )))
}

fn has_state(store: &dyn Storage) -> bool {
    matches!(store.get(META, b"identity"), Ok(Some(_)))
}

/// The identity, creating the trees and a new key pair (from the platform's secure
/// randomness) when the database has none. Inside the caller's transaction.
pub(crate) fn create(store: &mut dyn Storage) -> Result<Identity> {
    if let Some(b) = store.get(META, b"identity").ok().flatten() {
        return Identity::import(&b).map_err(|e| corrupt("identity", e));
    }
    for t in [META, ROWS, LOG, WRITERS] {
        store.create_tree(t)?;
    }
    store.put(META, b"layout", &[LAYOUT])?;
    let identity = Identity::generate(&mut rand_core::OsRng);
    put_identity(store, &identity)?;
    Ok(identity)
}

pub(crate) fn put_identity(store: &mut dyn Storage, id: &Identity) -> Result<()> {
    store.put(META, b"identity", &id.export())
}

pub(crate) fn put_subscription(store: &mut dyn Storage, sub: &Subscription) -> Result<()> {
    let mut w = Writer::new();
    sub.encode(&mut w);
    store.put(META, b"subscription", &w.buf)
}

pub(crate) fn put_owner(store: &mut dyn Storage, owner: &AuthorId) -> Result<()> {
    store.put(META, b"owner", &owner.0)
}

fn chain_prefix(author: &AuthorId, scope: &ScopeId) -> Vec<u8> {
    let mut w = Writer {
        buf: Vec::with_capacity(32 + 32 + 10 + scope.name.len()),
    };
    w.raw(&author.0);
    scope.encode(&mut w);
    w.buf
}

fn tail_key(prefix: &[u8], seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(TAIL.len() + prefix.len() + 8);
    k.extend_from_slice(TAIL);
    k.extend_from_slice(prefix);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn log_key(prefix: &[u8], kind: u8, seq: u64) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.push(kind);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn row_key(k: &RowKey) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(k.table.as_bytes());
    k.scope.encode(&mut w);
    w.raw(&k.pk);
    w.buf
}

fn scan_all(store: &dyn Storage, tree: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut cur = store.scan(tree, Bound::Unbounded, Bound::Unbounded, false)?;
    while cur.next()? {
        out.push((cur.key().to_vec(), cur.value().to_vec()));
    }
    Ok(out)
}

impl State {
    /// Rebuilds the replica from the database (nothing to do when it has no sync state yet).
    pub(crate) fn load(&mut self, store: &dyn Storage, catalog: &Catalog) -> Result<()> {
        if !has_state(store) {
            return Ok(());
        }
        let layout = store.get(META, b"layout")?;
        if let Some(l) = &layout {
            if l.as_slice() != [1] && l.as_slice() != [LAYOUT] {
                return Err(Error::Sync(
                    "SYNC_LAYOUT",
                    format!(
                        "the sync state was saved in layout {l:?}, newer than this version of cairn reads ({LAYOUT}); open it with a newer cairn"
                    ),
                ));
            }
        }
        let identity = create_readonly(store)?;
        let mut config = cairn_sync::Config::default();
        if let Some(b) = store.get(META, b"subscription")? {
            config.subscription = Subscription::decode(&mut Reader::new(&b))
                .map_err(|e| corrupt("subscription", e))?;
        }
        let mut replica = Replica::in_memory(identity, config);
        if let Some(o) = store.get(META, b"owner")? {
            let a: [u8; 32] = o.as_slice().try_into().map_err(|e| corrupt("owner", e))?;
            self.owner = Some(AuthorId(a));
        }
        for (k, v) in scan_all(store, ROWS)? {
            let mut r = Reader::new(&k);
            let table = String::from_utf8(r.bytes().map_err(|e| corrupt("row key", e))?.to_vec())
                .map_err(|e| corrupt("row key", e))?;
            let scope = ScopeId::decode(&mut r).map_err(|e| corrupt("row key", e))?;
            let pk = k[r.pos()..].to_vec();
            let state = RowState::decode(&mut Reader::new(&v)).map_err(|e| corrupt("row", e))?;
            replica
                .rows_mut()
                .rows
                .insert(RowKey { table, scope, pk }, state);
        }
        let mut writers = 0;
        for (_, v) in scan_all(store, WRITERS)? {
            let list =
                WriterList::decode(&mut Reader::new(&v)).map_err(|e| corrupt("writers", e))?;
            replica
                .add_writer_list(list)
                .map_err(|e| corrupt("writers", e))?;
            writers += 1;
        }
        // The log, in key order: per chain its checkpoint, blocks, then pending records (with
        // those still in meta, by seq).
        let mut chains: BTreeMap<Vec<u8>, (ChainKey, ChainLog)> = BTreeMap::new();
        let mut pending: BTreeMap<Vec<u8>, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
        let mut tail = Vec::new();
        let mut tail_bytes = 0;
        let mut runs = Vec::new();
        let mut meta_tail = Vec::new();
        {
            let mut end = TAIL.to_vec();
            *end.last_mut().expect("invariant: a prefix") += 1;
            let mut cur = store.scan(
                META,
                Bound::Included(TAIL),
                Bound::Excluded(end.as_slice()),
                false,
            )?;
            while cur.next()? {
                meta_tail.push((cur.key().to_vec(), cur.value().to_vec()));
            }
        }
        for (k, v) in meta_tail {
            let mut r = Reader::new(&k[TAIL.len()..]);
            let author = AuthorId(r.array().map_err(|e| corrupt("meta key", e))?);
            let scope = ScopeId::decode(&mut r).map_err(|e| corrupt("meta key", e))?;
            let prefix = k[TAIL.len()..TAIL.len() + r.pos()].to_vec();
            let seq = u64::from_be_bytes(r.array().map_err(|e| corrupt("meta key", e))?);
            tail_bytes += k.len() + v.len();
            tail.push(((author, scope.clone()), seq));
            chains
                .entry(prefix.clone())
                .or_insert_with(|| ((author, scope), ChainLog::default()));
            pending.entry(prefix).or_default().insert(seq, v);
        }
        for (k, v) in scan_all(store, LOG)? {
            let mut r = Reader::new(&k);
            let author = AuthorId(r.array().map_err(|e| corrupt("log key", e))?);
            let scope = ScopeId::decode(&mut r).map_err(|e| corrupt("log key", e))?;
            let prefix = k[..r.pos()].to_vec();
            let kind = r.u8().map_err(|e| corrupt("log key", e))?;
            let seq = u64::from_be_bytes(r.array().map_err(|e| corrupt("log key", e))?);
            let (_, log) = chains
                .entry(prefix.clone())
                .or_insert_with(|| ((author, scope.clone()), ChainLog::default()));
            match kind {
                K_CHECKPOINT => {
                    log.base = Some(
                        Checkpoint::decode(&mut Reader::new(&v))
                            .map_err(|e| corrupt("checkpoint", e))?,
                    )
                }
                K_BLOCK => log
                    .blocks
                    .push(Block::from_bytes(&v).map_err(|e| corrupt("block", e))?),
                K_PENDING => {
                    pending.entry(prefix).or_default().insert(seq, v);
                }
                K_PENDING_RUN => {
                    let mut r = Reader::new(&v);
                    let n = r
                        .count(1, u64::MAX)
                        .map_err(|e| corrupt("pending run", e))?;
                    let records = pending.entry(prefix).or_default();
                    for i in 0..n as u64 {
                        let rec = r.bytes().map_err(|e| corrupt("pending run", e))?;
                        records.insert(seq + i, rec.to_vec());
                    }
                    if n == 0 {
                        return Err(corrupt("pending run", "empty"));
                    }
                    runs.push(((author, scope.clone()), seq, seq + n as u64 - 1));
                }
                _ => return Err(corrupt("log key", "unknown kind")),
            }
        }
        for (prefix, records) in pending {
            let ((author, scope), log) = chains
                .get_mut(&prefix)
                .expect("invariant: every pending record's chain is listed");
            for (seq, v) in records {
                let prev = log.head().1;
                let rec = Record::decode(&mut Reader::new(&v), author, scope, seq, prev)
                    .map_err(|e| corrupt("record", e))?;
                log.pending.push(rec);
            }
        }
        let mut marks = BTreeMap::new();
        for (_, (key, log)) in chains {
            marks.insert(key.clone(), mark_of(&log));
            replica.restore_chain(key, log);
        }
        // The rows saved are as of the last time history was dropped; the history held since
        // brings them up to date.
        replica.replay_history();
        if let Some(c) = store.get(META, b"clock")? {
            let c: [u8; 8] = c.as_slice().try_into().map_err(|e| corrupt("clock", e))?;
            replica.observe_clock(u64::from_le_bytes(c));
        }
        let mut peers = Vec::new();
        if let Some(p) = store.get(META, b"peers")? {
            let mut r = Reader::new(&p);
            let n = r.varint().map_err(|e| corrupt("peers", e))?;
            for _ in 0..n {
                let id = AuthorId(r.array().map_err(|e| corrupt("peers", e))?);
                let acked = decode_vv(&mut r).map_err(|e| corrupt("peers", e))?;
                let want = Subscription::decode(&mut r).map_err(|e| corrupt("peers", e))?;
                replica.restore_peer(id, PeerInfo { acked, want });
            }
            peers = p;
        }
        self.saved = Saved {
            marks,
            writers,
            peers,
            clock: replica.clock(),
            log_clock: 0,
            redactions: 0,
            tail,
            tail_bytes,
            runs,
            layout: layout.as_deref() == Some(&[LAYOUT]),
        };
        self.replica = Some(replica);
        self.register(catalog)
    }

    /// Writes what changed since the last save.
    pub(crate) fn persist(&mut self, store: &mut dyn Storage) -> Result<()> {
        let State { replica, saved, .. } = self;
        let replica = replica.as_ref().expect("invariant: persist after ensure");
        let base_of = |log: &ChainLog| log.base.as_ref().map_or(0, |c| c.seq);
        // Rows are saved only when history is dropped (compaction, a snapshot): until then the
        // history held rebuilds them on open.
        let history_dropped = replica
            .chains()
            .any(|(k, log)| base_of(log) != saved.marks.get(k).map_or(0, |m| m.base));
        if history_dropped {
            // The records that implied the clock may be gone.
            saved.log_clock = 0;
            saved.clock = 0;
            let mut keys = Vec::new();
            {
                let mut cur = store.scan(ROWS, Bound::Unbounded, Bound::Unbounded, false)?;
                while cur.next()? {
                    keys.push(cur.key().to_vec());
                }
            }
            for k in keys {
                store.delete(ROWS, &k)?;
            }
            let mut rows: Vec<(&RowKey, &RowState)> = replica.rows().rows.iter().collect();
            rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, state) in rows {
                let mut w = Writer::new();
                state.encode(&mut w);
                store.put(ROWS, &row_key(k), &w.buf)?;
            }
        }
        // A purge redacted held records: their saved copies are written again.
        let redacted = replica.redactions() != saved.redactions;
        saved.redactions = replica.redactions();
        for (key, log) in replica.chains() {
            let old = saved.marks.get(key).copied().unwrap_or_default();
            let now = mark_of(log);
            if now == old && !redacted {
                continue;
            }
            let prefix = chain_prefix(&key.0, &key.1);
            let base = base_of(log);
            let mut from = old;
            if base != old.base || redacted {
                // Compacted or bootstrapped from a snapshot: write the chain again.
                let mut end = prefix.clone();
                end.push(0xFF);
                let mut keys = Vec::new();
                {
                    let mut cur =
                        store.scan(LOG, Bound::Included(&prefix), Bound::Excluded(&end), false)?;
                    while cur.next()? {
                        keys.push(cur.key().to_vec());
                    }
                }
                for k in keys {
                    store.delete(LOG, &k)?;
                }
                saved.runs.retain(|(k, _, _)| k != key);
                let mut i = 0;
                while i < saved.tail.len() {
                    if saved.tail[i].0 == *key {
                        let (_, seq) = saved.tail.swap_remove(i);
                        let k = tail_key(&prefix, seq);
                        saved.tail_bytes -= tail_size(store, &k)?;
                        store.delete(META, &k)?;
                    } else {
                        i += 1;
                    }
                }
                if let Some(c) = &log.base {
                    let mut w = Writer::new();
                    c.encode(&mut w);
                    store.put(LOG, &log_key(&prefix, K_CHECKPOINT, c.seq), &w.buf)?;
                }
                from = Mark::default();
            }
            // Blocks and records are in seq order: skip what is saved without walking it.
            let new_blocks = log
                .blocks
                .partition_point(|b| b.last_seq() <= from.blocks_upto);
            for b in &log.blocks[new_blocks..] {
                store.put(LOG, &log_key(&prefix, K_BLOCK, b.last_seq()), &b.to_bytes())?;
                if let Some(h) = b.records.iter().map(|r| r.hlc).max() {
                    saved.log_clock = saved.log_clock.max(h);
                }
            }
            // Records sealed since: their pending copies go.
            let sealed = log.sealed_head().0;
            if sealed > from.blocks_upto {
                for seq in (from.blocks_upto + 1)..=sealed.min(from.pending_upto) {
                    match saved.tail.iter().position(|(k, s)| *s == seq && k == key) {
                        Some(i) => {
                            saved.tail.swap_remove(i);
                            let k = tail_key(&prefix, seq);
                            saved.tail_bytes -= tail_size(store, &k)?;
                            store.delete(META, &k)?;
                        }
                        // Runs go whole, below.
                        None if saved
                            .runs
                            .iter()
                            .any(|(k, a, b)| k == key && (*a..=*b).contains(&seq)) => {}
                        None => {
                            store.delete(LOG, &log_key(&prefix, K_PENDING, seq))?;
                        }
                    }
                }
                let mut i = 0;
                while i < saved.runs.len() {
                    let (k, first, last) = &saved.runs[i];
                    if k != key || *first > sealed {
                        i += 1;
                        continue;
                    }
                    let (first, last) = (*first, *last);
                    saved.runs.swap_remove(i);
                    let run_key = log_key(&prefix, K_PENDING_RUN, first);
                    if last > sealed {
                        // Partly sealed: what is not goes back one record a key.
                        let v = store
                            .get(LOG, &run_key)?
                            .ok_or_else(|| corrupt("pending run", "missing"))?;
                        let mut r = Reader::new(&v);
                        r.varint().map_err(|e| corrupt("pending run", e))?;
                        for seq in first..=last {
                            let rec = r.bytes().map_err(|e| corrupt("pending run", e))?;
                            if seq > sealed {
                                store.put(LOG, &log_key(&prefix, K_PENDING, seq), rec)?;
                            }
                        }
                    }
                    store.delete(LOG, &run_key)?;
                }
            }
            let new_pending = log.pending.partition_point(|r| r.seq <= from.pending_upto);
            for r in &log.pending[new_pending..] {
                // A local commit's record is saved as it was written.
                let mut w = Writer::new();
                let bytes = match replica.written_bytes(key, r.seq) {
                    Some(b) => b,
                    None => {
                        // Room for a typical op, to spare the regrowth of a large record.
                        w.buf.reserve(16 + 64 * r.ops.len());
                        r.encode(&mut w);
                        &w.buf
                    }
                };
                // A small record goes to meta, a one-page tree, instead of down the log's
                // path: a commit then copies and writes one page for it, not two or more.
                let k = tail_key(&prefix, r.seq);
                if k.len() + bytes.len() <= TAIL_RECORD {
                    if !saved.layout {
                        store.put(META, b"layout", &[LAYOUT])?;
                        saved.layout = true;
                    }
                    store.put(META, &k, bytes)?;
                    saved.tail.push((key.clone(), r.seq));
                    saved.tail_bytes += k.len() + bytes.len();
                } else {
                    store.put(LOG, &log_key(&prefix, K_PENDING, r.seq), bytes)?;
                }
                saved.log_clock = saved.log_clock.max(r.hlc);
            }
            match saved.marks.get_mut(key) {
                Some(m) => *m = now,
                None => {
                    saved.marks.insert(key.clone(), now);
                }
            }
        }
        if saved.tail_bytes > TAIL_BYTES {
            // Meta is full: its pending records move to the log together, one value per run
            // of consecutive records of a chain (one path of the log copied for all of them).
            let mut tail = std::mem::take(&mut saved.tail);
            tail.sort_unstable();
            let mut i = 0;
            while i < tail.len() {
                let key = &tail[i].0;
                let mut j = i + 1;
                while j < tail.len() && tail[j].0 == *key && tail[j].1 == tail[j - 1].1 + 1 {
                    j += 1;
                }
                let prefix = chain_prefix(&key.0, &key.1);
                let mut w = Writer {
                    buf: Vec::with_capacity(TAIL_BYTES),
                };
                w.varint((j - i) as u64);
                for (_, seq) in &tail[i..j] {
                    let k = tail_key(&prefix, *seq);
                    let v = store
                        .get(META, &k)?
                        .ok_or_else(|| corrupt("pending record", "missing from meta"))?;
                    w.bytes(&v);
                    store.delete(META, &k)?;
                }
                let (first, last) = (tail[i].1, tail[j - 1].1);
                store.put(LOG, &log_key(&prefix, K_PENDING_RUN, first), &w.buf)?;
                saved.runs.push((key.clone(), first, last));
                i = j;
            }
            saved.tail_bytes = 0;
        }
        let lists: Vec<&WriterList> = replica.writer_lists().collect();
        if lists.len() != saved.writers {
            for l in &lists {
                let mut k = Writer::new();
                l.scope.encode(&mut k);
                k.raw(&l.version.to_be_bytes());
                k.raw(&l.sig);
                let mut w = Writer::new();
                l.encode(&mut w);
                store.put(WRITERS, &k.buf, &w.buf)?;
            }
            saved.writers = lists.len();
        }
        let mut w = Writer::new();
        w.varint(replica.peers().len() as u64);
        for (id, p) in replica.peers() {
            w.raw(&id.0);
            encode_vv(&mut w, &p.acked);
            p.want.encode(&mut w);
        }
        if w.buf != saved.peers {
            store.put(META, b"peers", &w.buf)?;
            saved.peers = w.buf;
        }
        if replica.clock() > saved.clock.max(saved.log_clock) {
            store.put(META, b"clock", &replica.clock().to_le_bytes())?;
            saved.clock = replica.clock();
        }
        Ok(())
    }
}

/// The bytes a pending record in meta takes (key and value).
fn tail_size(store: &dyn Storage, k: &[u8]) -> Result<usize> {
    let v = store
        .get(META, k)?
        .ok_or_else(|| corrupt("pending record", "missing from meta"))?;
    Ok(k.len() + v.len())
}

fn create_readonly(store: &dyn Storage) -> Result<Identity> {
    let b = store
        .get(META, b"identity")?
        .ok_or_else(|| corrupt("identity", "missing"))?;
    Identity::import(&b).map_err(|e| corrupt("identity", e))
}

fn mark_of(log: &ChainLog) -> Mark {
    Mark {
        base: log.base.as_ref().map_or(0, |c| c.seq),
        blocks_upto: log.blocks.last().map_or(0, |b| b.last_seq()),
        pending_upto: log.pending.last().map_or(log.sealed_head().0, |r| r.seq),
    }
}
