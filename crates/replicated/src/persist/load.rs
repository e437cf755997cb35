//! Reading the replica's state back from the database's trees (at attach, and when the
//! in-memory state went ahead of the store). Only layouts 5 and 6 are read (`check_layout`): a
//! database whose sync state has another layout is refused before anything is read or written.

use super::tail::Tail;
use super::{
    chain_prefix, corrupt, has_state, mark_of, record_bytes, scan_all, KeyFix, Saved, ATTEST,
    K_BLOCK, K_CHECKPOINT, K_PENDING, K_PENDING_RUN, LOG, META, PEER, ROWS, WRITERS,
};
use crate::State;
use cairn_sql::Catalog;
use cairn_sql::{Result, Storage};
use cairn_sync::protocol::decode_vv;
use cairn_sync::wire::Reader;
use cairn_sync::{
    Attestation, AuthorId, Block, ChainKey, ChainLog, Checkpoint, PeerInfo, Record, Replica,
    RowKey, RowState, ScopeId, Subscription, WriterList,
};
use std::collections::BTreeMap;
use std::ops::Bound;

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
        let (identity, device) = self.load_identity(store)?;
        // A database taking a new key (a copy, an import) drops the records its previous
        // author committed and did not seal: no key here can sign them. The database they were
        // written on seals and shares them; this one takes them back from it. `settle_key`
        // then rewrites the chains without them.
        let unsignable = matches!(self.key_fix, Some(KeyFix::New { .. }));
        let mut config = cairn_sync::Config::default();
        if let Some(b) = store.get(META, b"subscription")? {
            config.subscription = Subscription::decode(&mut Reader::new(&b))
                .map_err(|e| corrupt("subscription", e))?;
        }
        let mut replica = Replica::in_memory(identity, config);
        if let Some(d) = device {
            replica.set_device(d);
        }
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
        // those in the tail, by seq).
        let mut chains: BTreeMap<Vec<u8>, (ChainKey, ChainLog)> = BTreeMap::new();
        let mut pending: BTreeMap<Vec<u8>, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
        let mut runs = Vec::new();
        // The tail: runs of pending records in the root bytes.
        let area = if store.root_meta_room() > 0 {
            store.root_meta()?
        } else {
            Vec::new()
        };
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
            if unsignable {
                continue;
            }
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
        // Peers, one key each.
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
                replica.restore_peer(
                    id,
                    PeerInfo {
                        acked,
                        want,
                        ..PeerInfo::default()
                    },
                );
            }
        }
        // Attestations, one key a scope.
        let mut attest = BTreeMap::new();
        {
            let mut end = ATTEST.to_vec();
            *end.last_mut().expect("invariant: not empty") += 1;
            let mut cur =
                store.scan(META, Bound::Included(ATTEST), Bound::Excluded(&end), false)?;
            while cur.next()? {
                let mut r = Reader::new(cur.value());
                let bad = |e: cairn_sync::Error| corrupt("attestation", e);
                let kind = r.u8().map_err(bad)?;
                let newest = Attestation::decode(&mut r).map_err(bad)?;
                let base = match kind {
                    0 => None,
                    1 => Some(newest.clone()),
                    2 => Some(Attestation::decode(&mut r).map_err(bad)?),
                    _ => return Err(corrupt("attestation", "unknown kind")),
                };
                r.finish().map_err(bad)?;
                attest.insert(
                    newest.scope.clone(),
                    (newest.sig, base.as_ref().map(|b| b.sig)),
                );
                replica.restore_attestation(newest, kind == 1);
                if let Some(b) = base.filter(|_| kind == 2) {
                    replica.restore_attestation(b, true);
                }
            }
        }
        self.saved = Saved {
            marks,
            writers,
            attest,
            peers_at: replica.edits(),
            clock: replica.clock(),
            log_clock: 0,
            redactions: 0,
            tail,
            tail_room: 0,
            runs,
            edits: None,
        };
        self.replica = Some(replica);
        self.register(catalog)
    }
}
