//! Writing the replica's state: after each operation, what changed since the last save
//! ([`Saved`] says how far each chain is saved); a local commit's records one by one as the
//! replica takes them when nothing else changed.

use super::{
    chain_prefix, corrupt, log_key, mark_of, prefix_len, row_key, Mark, Saved, ATTEST, K_BLOCK,
    K_CHECKPOINT, K_PENDING, K_PENDING_RUN, LOG, META, PEER, ROWS, TAIL_BYTES, TAIL_RECORD,
    WRITERS,
};
use crate::State;
use cairn_sql::{Result, Storage};
use cairn_sync::protocol::encode_vv;
use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{ChainKey, ChainLog, Record, Replica, RowKey, RowState};
use std::ops::Bound;

impl State {
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
/// shortcut for local commits asks).
pub(crate) fn can_save_written(replica: &Replica, saved: &Saved) -> bool {
    saved.tail_room != 0
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
        for (scope, e) in replica.attestations() {
            assert_eq!(
                saved.attest.get(scope),
                Some(&(e.newest.sig, e.base.as_ref().map(|b| b.sig))),
                "an attestation changed without Replica::edits moving"
            );
        }
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
        // The base alone: the history held rebuilds the rest on open, and a fork may take
        // some of it back (docs/sync.md sec. 6).
        let base = replica.base_rows();
        let mut rows: Vec<(&RowKey, &RowState)> = base.iter().flat_map(|b| b.iter()).collect();
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
        // The attestations changed since the last save, one key a scope.
        for (scope, e) in replica.attestations() {
            let sigs = (e.newest.sig, e.base.as_ref().map(|b| b.sig));
            if saved.attest.get(scope) == Some(&sigs) {
                continue;
            }
            let mut k = Writer::new();
            k.raw(ATTEST);
            scope.encode(&mut k);
            let mut w = Writer::new();
            match &e.base {
                None => w.u8(0),
                Some(b) if b.sig == e.newest.sig => w.u8(1),
                Some(_) => w.u8(2),
            }
            e.newest.encode(&mut w);
            if let Some(b) = e.base.as_ref().filter(|b| b.sig != e.newest.sig) {
                b.encode(&mut w);
            }
            store.put(META, &k.buf, &w.buf)?;
            saved.attest.insert(scope.clone(), sigs);
        }
        // The peers changed since the last save, one key each.
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
