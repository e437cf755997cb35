//! The replica's state in the database's own trees (docs/sync.md, "In the database"):
//!
//! | tree | key | value |
//! |---|---|---|
//! | `SYSTEM_TREES + 1` meta | `layout`, `identity`, `owner`, `clock`, `subscription` | u8 layout, key export, author, u64le HLC, what this replica asks for |
//! | `SYSTEM_TREES + 1` meta | `peer/`, `author` | a peer's acknowledged version vector and what it asks for (an older version kept every peer in one value, `peers`, read and moved by the first save) |
//! | the store's root bytes ([`Storage::root_meta`]) | | small pending records, until they reach [`TAIL_BYTES`] (layout 5) |
//! | `SYSTEM_TREES + 1` meta, the bytes beside the tree ([`Storage::tree_meta`]) | | the same, in layouts 3 and 4 (moved to the root bytes by the first save) |
//! | `SYSTEM_TREES + 2` rows | `bytes table`, `scope`, pk encoding | `RowState` encoding, as of the last time history was dropped |
//! | `SYSTEM_TREES + 3` log | `author`, `scope`, `u8 kind`, `u64be seq` | checkpoint (0), block (1), pending record (2), run of pending records (3) |
//! | `SYSTEM_TREES + 4` writers | `scope`, `u64be version`, `sig` | writer list |
//!
//! Writes are incremental: after each operation only the blocks and records appended since the
//! last save (tracked per chain in [`Saved`]) and the small meta values that changed are
//! written. The merged rows are written whole only when history is dropped (compaction, a
//! snapshot); on open they are rebuilt from those rows and the history held since.
//!
//! Over a volatile store (memory) a local commit writes nothing here: its records wait in the
//! replica until the store is read whole or a sync call begins (`State::defer`), and one save
//! then writes them all (docs/sync.md, "In memory").

use crate::State;
use cairn_sql::Catalog;
use cairn_sql::SYSTEM_TREES;
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
/// pending record is in the log). A database with a newer layout is refused; an older one is
/// brought to this layout by the first save. Layout 3 kept small pending records beside the meta
/// tree (the tail); layout 4 keeps each peer under its own meta key (`PEER`) instead of every peer
/// in one value; layout 5 keeps the tail in the store's root bytes instead.
const LAYOUT: u8 = 5;
/// Layout 2's meta keys of pending records not moved to the log yet: `TAIL` + author + scope +
/// u64be seq. Read, and moved to the log, when a layout 2 database is opened.
const TAIL: &[u8] = b"pending/";
/// Meta keys of peers: this prefix and the peer's id.
const PEER: &[u8] = b"peer/";
/// The meta key under which an older version kept every peer in one value.
const LEGACY_PEERS: &[u8] = b"peers";
/// How many bytes of pending records the tail (the store's root bytes) holds at most, or the
/// store's room for root bytes if less: the paged store keeps them in the superblock every
/// commit writes anyway, up to a quarter of a page (1024 bytes at 4 KiB). 1000 so that a run
/// moved to the log whole is one cell of a 4 KiB page (its key and value take 11 bytes more
/// than the run in the tail; a cell takes at most 1014, docs/file-format.md), not a cell and
/// a half-empty overflow page: a 2 KiB tail moved half as often saved 1.4% of a single
/// commit's instructions and made the file a quarter larger until the records are sealed.
const TAIL_BYTES: usize = 1000;
/// A record larger than this goes to the log directly.
const TAIL_RECORD: usize = 384;
const K_CHECKPOINT: u8 = 0;
const K_BLOCK: u8 = 1;
const K_PENDING: u8 = 2;
/// Consecutive pending records moved together from the tail (or layout 2's meta keys); key:
/// the first one's seq; value: `varint n`, then n x `bytes` record.
const K_PENDING_RUN: u8 = 3;

/// How far each chain is saved.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Mark {
    base: u64,
    blocks_upto: u64,
    pending_upto: u64,
}

/// Consecutive pending records of one chain in the tail: the chain's key, where the run lies
/// in the tail's bytes (its start, its count's varint, its records), the first seq and how many.
#[derive(Debug)]
struct TailRun {
    key: ChainKey,
    start: usize,
    n_at: usize,
    records: usize,
    first: u64,
    n: u64,
}

impl TailRun {
    fn contains(&self, key: &ChainKey, seq: u64) -> bool {
        (self.first..self.first + self.n).contains(&seq) && self.key == *key
    }
}

/// The tail as the root bytes hold it (runs one after the other: `author`, `scope`, `varint
/// first seq`, `varint n`, n x `bytes` record), kept encoded so that a commit appends its record
/// to the bytes it then hands the store, with no run encoded again; and where each run is.
#[derive(Debug, Default)]
struct Tail {
    buf: Vec<u8>,
    runs: Vec<TailRun>,
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

impl Tail {
    /// Reads the runs of `buf`.
    fn parse(buf: Vec<u8>) -> Result<Tail> {
        let mut runs = Vec::new();
        let mut r = Reader::new(&buf);
        while !r.is_empty() {
            let start = r.pos();
            let author = AuthorId(r.array().map_err(|e| corrupt("pending tail", e))?);
            let scope = ScopeId::decode(&mut r).map_err(|e| corrupt("pending tail", e))?;
            let first = r.varint().map_err(|e| corrupt("pending tail", e))?;
            let n_at = r.pos();
            let n = r
                .count(1, u64::MAX)
                .map_err(|e| corrupt("pending tail", e))?;
            if n == 0 {
                return Err(corrupt("pending tail", "empty run"));
            }
            let records = r.pos();
            for _ in 0..n {
                r.bytes().map_err(|e| corrupt("pending tail", e))?;
            }
            runs.push(TailRun {
                key: (author, scope),
                start,
                n_at,
                records,
                first,
                n: n as u64,
            });
        }
        Ok(Tail { buf, runs })
    }

    fn len(&self) -> usize {
        self.buf.len()
    }

    /// Where run `i` ends.
    fn end(&self, i: usize) -> usize {
        self.runs.get(i + 1).map_or(self.buf.len(), |r| r.start)
    }

    /// Each run: its key, its prefix (author, scope), first seq, count and records' bytes.
    fn each(&self) -> impl Iterator<Item = (&ChainKey, &[u8], u64, u64, &[u8])> {
        self.runs.iter().enumerate().map(|(i, t)| {
            let prefix_end = t.n_at - varint_len(t.first);
            (
                &t.key,
                &self.buf[t.start..prefix_end],
                t.first,
                t.n,
                &self.buf[t.records..self.end(i)],
            )
        })
    }

    /// Appends a run of one record, `seq`, of the chain `key`.
    fn push(&mut self, key: &ChainKey, seq: u64, rec: &[u8]) {
        let mut w = Writer {
            buf: std::mem::take(&mut self.buf),
        };
        let start = w.buf.len();
        // The chain's prefix (`chain_prefix`).
        w.raw(&key.0 .0);
        key.1.encode(&mut w);
        w.varint(seq);
        let n_at = w.buf.len();
        w.varint(1);
        let records = w.buf.len();
        w.bytes(rec);
        self.buf = w.buf;
        self.runs.push(TailRun {
            key: key.clone(),
            start,
            n_at,
            records,
            first: seq,
            n: 1,
        });
    }

    /// Appends a record to the last run (the next seq of its chain).
    fn extend_last(&mut self, rec: &[u8]) {
        let t = self.runs.last_mut().expect("invariant: a run to extend");
        t.n += 1;
        if t.n < 0x80 && t.records == t.n_at + 1 {
            // A one-byte count, as nearly always.
            self.buf[t.n_at] = t.n as u8;
            let mut w = Writer {
                buf: std::mem::take(&mut self.buf),
            };
            w.bytes(rec);
            self.buf = w.buf;
            return;
        }
        // The count's varint, on the stack.
        let (mut n, mut v, mut len) = ([0u8; 10], t.n, 0);
        loop {
            n[len] = (v as u8 & 0x7f) | if v >= 0x80 { 0x80 } else { 0 };
            len += 1;
            v >>= 7;
            if v == 0 {
                break;
            }
        }
        let n = &n[..len];
        if len == t.records - t.n_at {
            self.buf[t.n_at..t.records].copy_from_slice(n);
        } else {
            self.buf.splice(t.n_at..t.records, n.iter().copied());
            t.records = t.n_at + len;
        }
        let mut w = Writer {
            buf: std::mem::take(&mut self.buf),
        };
        w.bytes(rec);
        self.buf = w.buf;
    }

    /// Encodes the runs again, `keep` saying for each (by key and first seq) from which of its
    /// seqs on it stays (a run with none left goes).
    fn rebuild(&mut self, keep: impl Fn(&ChainKey) -> Option<u64>) -> Result<()> {
        let mut out = Tail {
            buf: Vec::with_capacity(self.buf.capacity()),
            runs: Vec::new(),
        };
        for (key, prefix, first, n, records) in self.each() {
            let Some(from) = keep(key) else {
                continue;
            };
            let mut r = Reader::new(records);
            let mut first = first;
            let mut n = n;
            while n > 0 && first < from {
                r.bytes().map_err(|e| corrupt("pending tail", e))?;
                first += 1;
                n -= 1;
            }
            if n == 0 {
                continue;
            }
            let rest = &records[r.pos()..];
            let mut w = Writer {
                buf: std::mem::take(&mut out.buf),
            };
            let start = w.buf.len();
            w.raw(prefix);
            w.varint(first);
            let n_at = w.buf.len();
            w.varint(n);
            let at = w.buf.len();
            w.raw(rest);
            out.buf = w.buf;
            out.runs.push(TailRun {
                key: key.clone(),
                start,
                n_at,
                records: at,
                first,
                n,
            });
        }
        *self = out;
        Ok(())
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.runs.clear();
    }
}

#[derive(Debug, Default)]
pub(crate) struct Saved {
    /// A search tree: a database writes few chains, and comparing a key or two is cheaper than
    /// hashing one (the map's hasher is keyed, for peers' ids).
    marks: BTreeMap<ChainKey, Mark>,
    writers: usize,
    /// `Replica::edits` when the peers were last saved: a save writes those changed since.
    peers_at: u64,
    /// The database holds the older `peers` value (every peer in one), which the next full
    /// save replaces with one key a peer.
    legacy_peers: bool,
    /// The clock as saved, or as the saved log implies it (loading takes the newest of the
    /// saved clock and every HLC of the log).
    clock: u64,
    /// The newest HLC of the records written to the log since history was last dropped: a
    /// clock no newer needs no write of its own (a local commit's clock is its record's).
    log_clock: u64,
    redactions: u64,
    /// Pending records saved in the tail, not yet in the log (at most `tail_room` bytes, the
    /// smaller of `TAIL_BYTES` and the store's room).
    tail: Tail,
    tail_room: usize,
    /// The tail was read from the meta tree's own bytes (layouts 3 and 4), which the first save
    /// empties as it writes the tail to the root bytes.
    meta_tail: bool,
    /// Runs of pending records saved together in the log: chain, first and last seq.
    runs: Vec<(ChainKey, u64, u64)>,
    /// Meta says `layout` 3. A database of an older layout has its layout 2 meta keys of
    /// pending records (`legacy`) moved to the log and is marked by its first save.
    layout: bool,
    legacy: Vec<Vec<u8>>,
    /// `Replica::edits` when everything but local records was last saved (None before the
    /// first full save).
    edits: Option<u64>,
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Storage(cairn_store::Error::Corrupt(format!(
        "sync state: {what}: {e}"
    )))
}

fn has_state(store: &dyn Storage) -> bool {
    matches!(store.get(META, b"identity"), Ok(Some(_)))
}

/// The identity, creating the trees and saving a key pair when the database has none: `spare`
/// if given (made ahead of time), else a new one from the platform's secure randomness.
/// Inside the caller's transaction.
pub(crate) fn create(
    store: &mut dyn Storage,
    saved: &mut Saved,
    spare: Option<Identity>,
) -> Result<Identity> {
    if let Some(b) = store.get(META, b"identity").ok().flatten() {
        return Identity::import(&b).map_err(|e| corrupt("identity", e));
    }
    for t in [META, ROWS, LOG, WRITERS] {
        store.create_tree(t)?;
    }
    store.put(META, b"layout", &[LAYOUT])?;
    saved.layout = true;
    let identity = spare.unwrap_or_else(|| Identity::generate(&mut rand_core::OsRng));
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

/// The length of [`chain_prefix`] for `key`.
fn prefix_len(key: &ChainKey) -> usize {
    let name = key.1.name.len();
    32 + 32 + varint_len(name as u64) + name
}

fn log_key(prefix: &[u8], kind: u8, seq: u64) -> Vec<u8> {
    // Its room at once: a copy of the prefix alone would be grown by the kind's push.
    let mut k = Vec::with_capacity(prefix.len() + 9);
    k.extend_from_slice(prefix);
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
        self.load_keeping(store, catalog, None)
    }

    /// [`State::load`], then, over a volatile store, the local records `kept` names as
    /// committed that the store does not hold yet (`State::keep`), from the replica held
    /// before: each of the replica's own chains from the store's head up to its committed
    /// one, as pending records not written (the next save writes them).
    pub(crate) fn load_keeping(
        &mut self,
        store: &dyn Storage,
        catalog: &Catalog,
        kept: Option<(&Replica, &[(ChainKey, u64)])>,
    ) -> Result<()> {
        if !has_state(store) {
            return Ok(());
        }
        let layout = store.get(META, b"layout")?;
        if let Some(l) = &layout {
            if !matches!(l.as_slice(), [1..=LAYOUT]) {
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
        // those in the tail or, layout 2, in meta keys, by seq).
        let mut chains: BTreeMap<Vec<u8>, (ChainKey, ChainLog)> = BTreeMap::new();
        let mut pending: BTreeMap<Vec<u8>, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
        let mut runs = Vec::new();
        let mut legacy = Vec::new();
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
            legacy.push(k);
            chains
                .entry(prefix.clone())
                .or_insert_with(|| ((author, scope), ChainLog::default()));
            pending.entry(prefix).or_default().insert(seq, v);
        }
        // The tail: runs of pending records in the root bytes (layout 5) or, layouts 3 and 4,
        // beside the meta tree (one after the other is a tail too).
        let meta_area = store.tree_meta(META)?;
        let meta_tail = !meta_area.is_empty();
        let mut area = meta_area;
        if store.root_meta_room() > 0 {
            area.extend_from_slice(&store.root_meta()?);
        }
        let tail = Tail::parse(area)?;
        for (key, prefix, first, n, records) in tail.each() {
            let mut r = Reader::new(records);
            let records = pending.entry(prefix.to_vec()).or_default();
            for i in 0..n {
                let rec = r.bytes().map_err(|e| corrupt("pending tail", e))?;
                records.insert(first + i, rec.to_vec());
            }
            chains
                .entry(prefix.to_vec())
                .or_insert_with(|| (key.clone(), ChainLog::default()));
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
        if let Some((_, heads)) = kept {
            for (key, _) in heads {
                chains
                    .entry(chain_prefix(&key.0, &key.1))
                    .or_insert_with(|| (key.clone(), ChainLog::default()));
            }
        }
        let mut marks = BTreeMap::new();
        let mut unwritten = false;
        for (_, (key, mut log)) in chains {
            marks.insert(key.clone(), mark_of(&log));
            if let Some((old, heads)) = kept {
                if let Some(&(_, head)) = heads.iter().find(|(k, _)| *k == key) {
                    for seq in log.head().0 + 1..=head {
                        let bytes = old
                            .chain(&key)
                            .and_then(|l| record_bytes(l, seq))
                            .ok_or_else(|| corrupt("chain", "a committed record is missing"))?;
                        let prev = log.head().1;
                        let rec =
                            Record::decode(&mut Reader::new(&bytes), &key.0, &key.1, seq, prev)
                                .map_err(|e| corrupt("record", e))?;
                        log.pending.push(rec);
                        unwritten = true;
                    }
                }
            }
            replica.restore_chain(key, log);
        }
        if let Some((old, _)) = kept {
            replica.observe_clock(old.clock());
        }
        self.unwritten = unwritten;
        // The rows saved are as of the last time history was dropped; the history held since
        // brings them up to date.
        replica.replay_history();
        if let Some(c) = store.get(META, b"clock")? {
            let c: [u8; 8] = c.as_slice().try_into().map_err(|e| corrupt("clock", e))?;
            replica.observe_clock(u64::from_le_bytes(c));
        }
        // Peers: the older single value first, then one key a peer (acknowledgements only
        // grow, so where both name a peer the larger of each wins).
        let mut legacy_peers = false;
        let mut peers: BTreeMap<AuthorId, PeerInfo> = BTreeMap::new();
        if let Some(p) = store.get(META, LEGACY_PEERS)? {
            legacy_peers = true;
            let mut r = Reader::new(&p);
            let n = r.varint().map_err(|e| corrupt("peers", e))?;
            for _ in 0..n {
                let id = AuthorId(r.array().map_err(|e| corrupt("peers", e))?);
                let acked = decode_vv(&mut r).map_err(|e| corrupt("peers", e))?;
                let want = Subscription::decode(&mut r).map_err(|e| corrupt("peers", e))?;
                peers.insert(id, PeerInfo { acked, want });
            }
        }
        {
            let mut end = PEER.to_vec();
            *end.last_mut().expect("invariant: not empty") += 1;
            let mut cur = store.scan(META, Bound::Included(PEER), Bound::Excluded(&end), false)?;
            while cur.next()? {
                let id = cur.key()[PEER.len()..]
                    .try_into()
                    .map(AuthorId)
                    .map_err(|_| corrupt("peer", "a key that is not an author id"))?;
                let mut r = Reader::new(cur.value());
                let acked = decode_vv(&mut r).map_err(|e| corrupt("peer", e))?;
                let want = Subscription::decode(&mut r).map_err(|e| corrupt("peer", e))?;
                match peers.get_mut(&id) {
                    Some(p) => {
                        for (k, s) in acked {
                            let a = p.acked.entry(k).or_insert(0);
                            *a = (*a).max(s);
                        }
                        p.want = want;
                    }
                    None => {
                        peers.insert(id, PeerInfo { acked, want });
                    }
                }
            }
        }
        for (id, info) in peers {
            replica.restore_peer(id, info);
        }
        // An older database's peers are all written again by the first save.
        let peers_at = if legacy_peers { 0 } else { replica.edits() };
        self.saved = Saved {
            marks,
            writers,
            peers_at,
            legacy_peers,
            clock: replica.clock(),
            log_clock: 0,
            redactions: 0,
            tail,
            tail_room: 0,
            meta_tail,
            runs,
            layout: layout.as_deref() == Some(&[LAYOUT]),
            legacy,
            edits: None,
        };
        self.replica = Some(replica);
        self.register(catalog)
    }

    /// Writes what changed since the last save.
    pub(crate) fn persist(&mut self, store: &mut dyn Storage) -> Result<()> {
        let State { replica, saved, .. } = self;
        let replica = replica.as_ref().expect("invariant: persist after ensure");
        save(store, replica, saved, None, false)?;
        self.unwritten = false;
        Ok(())
    }
}

/// Whether a local commit's records can be saved one by one as the replica takes them
/// ([`save_written`]): nothing but local records changed since the last save (as `save`'s
/// shortcut for local commits asks), which was of this layout.
pub(crate) fn can_save_written(replica: &Replica, saved: &Saved) -> bool {
    saved.layout
        && saved.tail_room != 0
        && saved.edits == Some(replica.edits())
        && replica.redactions() == saved.redactions
}

/// Saves the record a local commit just appended to chain `key` (`seq`, its HLC and encoding,
/// as [`Replica::commit_written_from`] gives them) when the chain is saved up to the record
/// before it; false, with nothing saved, when it is not so (the chain's first record, say):
/// `save` then saves what is left. After every record of the commit, [`end_written`] (or
/// [`save`], passing it `tail_changed`) ends the save. Only while [`can_save_written`] holds.
pub(crate) fn save_written(
    store: &mut dyn Storage,
    saved: &mut Saved,
    key: &ChainKey,
    (seq, hlc, bytes): (u64, u64, &[u8]),
    tail_changed: &mut bool,
) -> Result<bool> {
    match saved.marks.get_mut(key) {
        Some(m) if m.pending_upto + 1 == seq => m.pending_upto = seq,
        _ => return Ok(false),
    }
    save_record(store, saved, key, seq, hlc, bytes, &mut None, tail_changed)?;
    Ok(true)
}

/// Ends a save made of [`save_written`] records: the root bytes if the tail changed, the
/// clock if the records do not imply it.
pub(crate) fn end_written(
    store: &mut dyn Storage,
    replica: &Replica,
    saved: &mut Saved,
    tail_changed: bool,
) -> Result<()> {
    if tail_changed {
        store.set_root_meta(&saved.tail.buf)?;
    }
    check_unedited(replica, saved);
    save_clock(store, replica, saved)
}

/// Tests run with debug assertions: there, a save that took `Replica::edits` standing
/// still to mean that only local records changed checks that nothing else did.
fn check_unedited(replica: &Replica, saved: &Saved) {
    #[cfg(debug_assertions)]
    {
        for (key, log) in replica.chains() {
            let m = saved.marks.get(key).copied().unwrap_or_default();
            assert_eq!(
                m,
                mark_of(log),
                "a chain changed without Replica::edits moving"
            );
        }
        assert_eq!(replica.writer_lists().count(), saved.writers);
        assert!(
            replica.peers_changed_since(saved.peers_at).next().is_none(),
            "peers changed without Replica::edits moving"
        );
    }
    let _ = (replica, saved);
}

/// The clock, when it is newer than what the saved records imply.
fn save_clock(store: &mut dyn Storage, replica: &Replica, saved: &mut Saved) -> Result<()> {
    if replica.clock() > saved.clock.max(saved.log_clock) {
        store.put(META, b"clock", &replica.clock().to_le_bytes())?;
        saved.clock = replica.clock();
    }
    Ok(())
}

/// Writes what changed since the last save; `local`, right after a local commit, names the
/// chains its records went to; the tail already changed if `tail_changed` (by
/// [`save_written`]).
pub(crate) fn save(
    store: &mut dyn Storage,
    replica: &Replica,
    saved: &mut Saved,
    local: Option<&mut dyn Iterator<Item = &ChainKey>>,
    tail_changed: bool,
) -> Result<()> {
    if saved.tail_room == 0 {
        // The store's room does not change while it is open (a reload starts from zero).
        saved.tail_room = TAIL_BYTES.min(store.root_meta_room());
    }
    let mut tail_changed = tail_changed;
    if !saved.layout {
        tail_changed |= upgrade(store, saved)?;
    }
    // A purge redacted held records: their saved copies are written again.
    let redacted = replica.redactions() != saved.redactions;
    saved.redactions = replica.redactions();
    let mut history_dropped = false;
    // A save right after local commits, with nothing else changed since the last (no
    // peer's blocks, no sealing, compaction, peers or writer lists: `Replica::edits`),
    // has only the chains those commits wrote to save; else every chain is looked at.
    let edits = replica.edits();
    let only_local = local.filter(|_| saved.edits == Some(edits) && !redacted);
    let fast = only_local.is_some();
    match only_local {
        Some(keys) => {
            for key in keys {
                let log = replica
                    .chain(key)
                    .ok_or_else(|| corrupt("chain", "a local commit's chain is missing"))?;
                history_dropped |= save_chain(store, saved, key, log, false, &mut tail_changed)?;
            }
        }
        None => {
            for (key, log) in replica.chains() {
                history_dropped |= save_chain(store, saved, key, log, redacted, &mut tail_changed)?;
            }
        }
    }
    // Rows are saved only when history is dropped (compaction, a snapshot): until then the
    // history held rebuilds them on open. Found in the walk of the chains above, which
    // sees each chain's saved mark once.
    if history_dropped {
        // The records that implied the clock may be gone: it is saved on its own below.
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
    if tail_changed {
        store.set_root_meta(&saved.tail.buf)?;
    }
    if fast {
        // Writer lists and peers change only with edits.
        check_unedited(replica, saved);
    } else {
        let lists = replica.writer_lists().count();
        if lists != saved.writers {
            for l in replica.writer_lists() {
                let mut k = Writer::new();
                l.scope.encode(&mut k);
                k.raw(&l.version.to_be_bytes());
                k.raw(&l.sig);
                let mut w = Writer::new();
                l.encode(&mut w);
                store.put(WRITERS, &k.buf, &w.buf)?;
            }
            saved.writers = lists;
        }
        // The peers changed since the last save, one key each.
        if saved.legacy_peers {
            store.delete(META, LEGACY_PEERS)?;
            saved.legacy_peers = false;
        }
        let mut key = PEER.to_vec();
        let mut w = Writer::new();
        for (id, p) in replica.peers_changed_since(saved.peers_at) {
            key.truncate(PEER.len());
            key.extend_from_slice(&id.0);
            w.buf.clear();
            encode_vv(&mut w, &p.acked);
            p.want.encode(&mut w);
            store.put(META, &key, &w.buf)?;
        }
        saved.peers_at = edits;
    }
    save_clock(store, replica, saved)?;
    saved.edits = Some(edits);
    Ok(())
}

/// Saves what changed in one chain since its saved mark (blocks, the records sealed since,
/// new pending records to the tail or the log). Returns whether the chain's history was
/// dropped (compacted, or replaced by a snapshot) since.
fn save_chain(
    store: &mut dyn Storage,
    saved: &mut Saved,
    key: &ChainKey,
    log: &ChainLog,
    redacted: bool,
    tail_changed: &mut bool,
) -> Result<bool> {
    let base_of = |log: &ChainLog| log.base.as_ref().map_or(0, |c| c.seq);
    let now = mark_of(log);
    // One search of the marks: the new mark goes in at once (a save that fails leaves
    // the state stale, to be read again from the store).
    let old = match saved.marks.get_mut(key) {
        Some(m) if *m == now && !redacted => return Ok(false),
        Some(m) => std::mem::replace(m, now),
        None => {
            saved.marks.insert(key.clone(), now);
            Mark::default()
        }
    };
    let dropped = now.base != old.base;
    let mut pfx = None;
    let prefix = |p: &mut Option<Vec<u8>>| -> Vec<u8> {
        p.get_or_insert_with(|| chain_prefix(&key.0, &key.1))
            .clone()
    };
    let base = base_of(log);
    let mut from = old;
    if base != old.base || redacted {
        // Compacted or bootstrapped from a snapshot: write the chain again.
        let prefix = prefix(&mut pfx);
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
        if saved.tail.runs.iter().any(|r| r.key == *key) {
            saved
                .tail
                .rebuild(|k| if k == key { None } else { Some(0) })?;
            *tail_changed = true;
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
        let k = log_key(&prefix(&mut pfx), K_BLOCK, b.last_seq());
        store.put(LOG, &k, &b.to_bytes())?;
        if let Some(h) = b.records.iter().map(|r| r.hlc).max() {
            saved.log_clock = saved.log_clock.max(h);
        }
    }
    // Records sealed since: their pending copies go.
    let sealed = log.sealed_head().0;
    if sealed > from.blocks_upto {
        for seq in (from.blocks_upto + 1)..=sealed.min(from.pending_upto) {
            // Those in the tail or in a run go below, a run at a time.
            if saved.tail.runs.iter().any(|r| r.contains(key, seq))
                || saved
                    .runs
                    .iter()
                    .any(|(k, a, b)| k == key && (*a..=*b).contains(&seq))
            {
                continue;
            }
            store.delete(LOG, &log_key(&prefix(&mut pfx), K_PENDING, seq))?;
        }
        if saved
            .tail
            .runs
            .iter()
            .any(|r| r.key == *key && r.first <= sealed)
        {
            saved
                .tail
                .rebuild(|k| Some(if k == key { sealed + 1 } else { 0 }))?;
            *tail_changed = true;
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
            let prefix = prefix(&mut pfx);
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
    // A chain's pending seqs are consecutive, so the first new one's place is found by
    // subtraction (checked, with a search should it not hold): a commit appends one record
    // to a chain that may hold thousands.
    let pending = &log.pending;
    let guess = pending.first().map_or(0, |f| {
        (from.pending_upto + 1)
            .saturating_sub(f.seq)
            .min(pending.len() as u64) as usize
    });
    let new_pending = if (guess == 0 || pending[guess - 1].seq <= from.pending_upto)
        && pending.get(guess).is_none_or(|r| r.seq > from.pending_upto)
    {
        guess
    } else {
        pending.partition_point(|r| r.seq <= from.pending_upto)
    };
    for r in &log.pending[new_pending..] {
        save_pending(store, saved, key, r, &mut pfx, tail_changed)?;
    }
    // Then the local records not hashed yet, as they were written.
    for (seq, hlc, bytes) in log.written().filter(|w| w.0 > from.pending_upto) {
        save_record(store, saved, key, seq, hlc, bytes, &mut pfx, tail_changed)?;
    }
    Ok(dropped)
}

/// Saves pending record `r` of chain `key` (`pfx` caches the chain's prefix of log keys).
fn save_pending(
    store: &mut dyn Storage,
    saved: &mut Saved,
    key: &ChainKey,
    r: &Record,
    pfx: &mut Option<Vec<u8>>,
    tail_changed: &mut bool,
) -> Result<()> {
    // Room for a typical op, to spare the regrowth of a large record.
    let mut w = Writer::new();
    w.buf.reserve(16 + 64 * r.ops.len());
    r.encode(&mut w);
    save_record(store, saved, key, r.seq, r.hlc, &w.buf, pfx, tail_changed)
}

/// Saves pending record `seq` of chain `key`, encoded as `bytes`: to the tail when it is
/// small, else to the log.
#[allow(clippy::too_many_arguments)]
fn save_record(
    store: &mut dyn Storage,
    saved: &mut Saved,
    key: &ChainKey,
    seq: u64,
    hlc: u64,
    bytes: &[u8],
    pfx: &mut Option<Vec<u8>>,
    tail_changed: &mut bool,
) -> Result<()> {
    saved.log_clock = saved.log_clock.max(hlc);
    // A small record goes to the tail, which rides in the root bytes the store writes
    // with every commit: a commit then writes no page for it. (Not one that would not
    // fit an empty tail, with its run's header: with small pages the room is small.)
    let own = 10 + bytes.len();
    // The most its run's header takes: the author, the scope (owner, name and its
    // length), the first seq and the count.
    let head_bound = 32 + 32 + 10 + key.1.name.len() + 20;
    if bytes.len() > TAIL_RECORD || own + head_bound > saved.tail_room {
        let prefix = pfx.get_or_insert_with(|| chain_prefix(&key.0, &key.1));
        store.put(LOG, &log_key(prefix, K_PENDING, seq), bytes)?;
        return Ok(());
    }
    let mut extends = saved
        .tail
        .runs
        .last()
        .is_some_and(|t| t.first + t.n == seq && t.key == *key);
    let grows = own + if extends { 0 } else { prefix_len(key) + 20 };
    if saved.tail.len() + grows > saved.tail_room {
        move_tail(store, saved)?;
        extends = false;
    }
    if extends {
        saved.tail.extend_last(bytes);
    } else {
        if saved.tail.buf.capacity() < saved.tail_room {
            saved
                .tail
                .buf
                .reserve(saved.tail_room - saved.tail.buf.len());
        }
        saved.tail.push(key, seq, bytes);
    }
    *tail_changed = true;
    Ok(())
}

/// Moves the tail's records to the log, one value per run (one path of the log copied for
/// all of them).
fn move_tail(store: &mut dyn Storage, saved: &mut Saved) -> Result<()> {
    for (key, prefix, first, n, records) in saved.tail.each() {
        let mut w = Writer {
            buf: Vec::with_capacity(10 + records.len()),
        };
        w.varint(n);
        w.raw(records);
        store.put(LOG, &log_key(prefix, K_PENDING_RUN, first), &w.buf)?;
        saved.runs.push((key.clone(), first, first + n - 1));
    }
    saved.tail.clear();
    Ok(())
}

/// Brings an older layout to this one: layout 2's pending records in meta keys move to the
/// log (one run value per run of consecutive records of a chain), layouts 3 and 4's tail
/// leaves the meta tree's bytes for the root bytes (or the log, should the store's room be
/// smaller than it), and meta says `layout` 5, before anything is saved in the tail, which
/// older versions would not read. True when the tail is to be written to the root bytes.
fn upgrade(store: &mut dyn Storage, saved: &mut Saved) -> Result<bool> {
    let mut tail_changed = false;
    if saved.meta_tail {
        store.set_tree_meta(META, &[])?;
        saved.meta_tail = false;
        if saved.tail.len() > saved.tail_room {
            move_tail(store, saved)?;
        }
        tail_changed = true;
    }
    // Keys sort by chain, then seq.
    let legacy = std::mem::take(&mut saved.legacy);
    let mut i = 0;
    while i < legacy.len() {
        let mut r = Reader::new(&legacy[i][TAIL.len()..]);
        let author = AuthorId(r.array().map_err(|e| corrupt("meta key", e))?);
        let scope = ScopeId::decode(&mut r).map_err(|e| corrupt("meta key", e))?;
        let plen = r.pos();
        let prefix = legacy[i][TAIL.len()..TAIL.len() + plen].to_vec();
        let seq_of = |k: &[u8]| -> Result<u64> {
            let b: [u8; 8] = k[TAIL.len() + plen..]
                .try_into()
                .map_err(|e| corrupt("meta key", e))?;
            Ok(u64::from_be_bytes(b))
        };
        let first = seq_of(&legacy[i])?;
        let mut j = i + 1;
        while j < legacy.len()
            && legacy[j].len() == legacy[i].len()
            && legacy[j][..TAIL.len() + plen] == legacy[i][..TAIL.len() + plen]
            && seq_of(&legacy[j])? == first + (j - i) as u64
        {
            j += 1;
        }
        let mut w = Writer::new();
        w.varint((j - i) as u64);
        for k in &legacy[i..j] {
            let v = store
                .get(META, k)?
                .ok_or_else(|| corrupt("pending record", "missing from meta"))?;
            w.bytes(&v);
            store.delete(META, k)?;
        }
        store.put(LOG, &log_key(&prefix, K_PENDING_RUN, first), &w.buf)?;
        saved
            .runs
            .push(((author, scope), first, first + (j - i) as u64 - 1));
        i = j;
    }
    store.put(META, b"layout", &[LAYOUT])?;
    saved.layout = true;
    Ok(tail_changed)
}

fn create_readonly(store: &dyn Storage) -> Result<Identity> {
    let b = store
        .get(META, b"identity")?
        .ok_or_else(|| corrupt("identity", "missing"))?;
    Identity::import(&b).map_err(|e| corrupt("identity", e))
}

/// The encoding of record `seq` of `log` as a pending record's (where it is held: written,
/// pending or sealed).
fn record_bytes(log: &ChainLog, seq: u64) -> Option<Vec<u8>> {
    if let Some(b) = log.written_bytes(seq) {
        return Some(b.to_vec());
    }
    let rec = match log.pending.iter().find(|r| r.seq == seq) {
        Some(r) => r,
        None => {
            let i = log.blocks.partition_point(|b| b.last_seq() < seq);
            let b = log.blocks.get(i)?;
            b.records.get(seq.checked_sub(b.first_seq())? as usize)?
        }
    };
    let mut w = Writer::new();
    rec.encode(&mut w);
    Some(w.buf)
}

fn mark_of(log: &ChainLog) -> Mark {
    Mark {
        base: log.base.as_ref().map_or(0, |c| c.seq),
        blocks_upto: log.blocks.last().map_or(0, |b| b.last_seq()),
        pending_upto: log.head().0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ChainKey {
        let a = AuthorId([7; 32]);
        (a, ScopeId::new(a, name.as_bytes()))
    }

    /// The tail kept encoded reads back as it was written: runs appended and extended (past a
    /// one-byte count), dropped up to a seq and by chain, and parsed again from its bytes.
    #[test]
    fn the_encoded_tail_reads_back_after_every_change() {
        let (a, b) = (key("a"), key("b"));
        let rec = |seq: u64| vec![seq as u8; 1 + (seq % 5) as usize];
        let mut t = Tail::default();
        t.push(&a, 1, &rec(1));
        for seq in 2..=130 {
            t.extend_last(&rec(seq));
        }
        t.push(&b, 5, &rec(5));
        t.extend_last(&rec(6));
        let records = |t: &Tail| -> Vec<(String, u64, Vec<u8>)> {
            let mut out = Vec::new();
            for (k, prefix, first, n, recs) in t.each() {
                assert_eq!(prefix, chain_prefix(&k.0, &k.1));
                assert_eq!(prefix.len(), prefix_len(k));
                let mut r = Reader::new(recs);
                for i in 0..n {
                    let name = String::from_utf8(k.1.name.clone()).unwrap();
                    out.push((name, first + i, r.bytes().unwrap().to_vec()));
                }
                assert!(r.is_empty());
            }
            out
        };
        let want = |from_a: u64, b_too: bool| {
            let mut w: Vec<_> = (from_a..=130)
                .map(|s| ("a".to_string(), s, rec(s)))
                .collect();
            if b_too {
                w.extend((5..=6).map(|s| ("b".to_string(), s, rec(s))));
            }
            w
        };
        assert_eq!(records(&t), want(1, true));
        assert_eq!(records(&Tail::parse(t.buf.clone()).unwrap()), want(1, true));
        t.rebuild(|k| Some(if *k == a { 100 } else { 0 })).unwrap();
        assert_eq!(records(&t), want(100, true));
        assert_eq!(
            records(&Tail::parse(t.buf.clone()).unwrap()),
            want(100, true)
        );
        t.rebuild(|k| if *k == b { None } else { Some(0) }).unwrap();
        assert_eq!(records(&t), want(100, false));
        t.extend_last(&rec(131));
        let mut w = want(100, false);
        w.push(("a".to_string(), 131, rec(131)));
        assert_eq!(records(&Tail::parse(t.buf.clone()).unwrap()), w);
        t.rebuild(|_| Some(200)).unwrap();
        assert!(t.buf.is_empty() && t.runs.is_empty());
    }
}
