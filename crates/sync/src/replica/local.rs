//! This replica's own records: ops from the SQL layer's column names, local commits (ops
//! checked, a record appended to the scope's chain, joined into the merged rows at once or
//! when next needed), purges, and sealing pending records into signed blocks.

use super::Replica;
use crate::chain::{Block, ChainKey, ChainLog, Written};
use crate::change::{Op, OpBody, OpKind, OpsWriter, Payload, Record};
use crate::error::{Error, Reason, Result};
use crate::hlc::Hlc;
use crate::identity::AuthorId;
use crate::merge::{RowKey, RowStore, TableSchema};
use crate::scope::ScopeId;
use crate::wire::ZERO_HASH;

/// A local record up to this size is copied into its chain's shared buffer of unhashed
/// records (`ChainLog::written_bufs`); a larger one keeps the buffer it was written in.
const SMALL_RECORD: usize = 1 << 10;
/// The room of a shared buffer: one allocation for a hundred single-row commits or so, never
/// grown (a record that does not fit starts another).
const SHARED_BYTES: usize = 8 << 10;

impl<S: RowStore> Replica<S> {
    /// An op from column names, as the SQL layer has them: SET for last-writer-wins columns.
    /// (Counter columns take `add_op`.)
    pub fn set_op(
        &self,
        table: &str,
        pk: Vec<cairn_value::Value>,
        cols: Vec<(&str, cairn_value::Value)>,
    ) -> Result<Op> {
        let schema = self.schema_of(table)?;
        let mut out = Vec::with_capacity(cols.len());
        for (name, v) in cols {
            match schema.column(name) {
                Some(c) if schema.columns[c as usize].1 == crate::merge::ColumnKind::Lww => {
                    out.push((c, v))
                }
                Some(_) => {
                    return Err(Error::InvalidInput(format!(
                        "{table}.{name} is a counter: use add_op"
                    )))
                }
                None => {
                    return Err(Error::InvalidInput(format!(
                        "{table} has no replicated column {name}"
                    )))
                }
            }
        }
        let op = Op::new(table, pk, Payload::Set(out));
        schema
            .check_op(&op)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        Ok(op)
    }

    /// An ADD op on a counter column, by name.
    pub fn add_op(
        &self,
        table: &str,
        pk: Vec<cairn_value::Value>,
        col: &str,
        delta: i64,
    ) -> Result<Op> {
        let schema = self.schema_of(table)?;
        let c = schema.column(col).ok_or_else(|| {
            Error::InvalidInput(format!("{table} has no replicated column {col}"))
        })?;
        let op = Op::new(table, pk, Payload::Add(c, delta));
        schema
            .check_op(&op)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        Ok(op)
    }

    pub(super) fn check_ops(&self, ops: &[Op]) -> Result<()> {
        // A record's ops mostly share a table: look it up again only when it changes.
        let mut last: Option<(&str, &TableSchema)> = None;
        for op in ops {
            let schema = match last {
                Some((name, schema)) if name == op.table => Some(schema),
                _ => self.tables.get(&op.table),
            };
            if let Some(schema) = schema {
                last = Some((&op.table, schema));
            }
            match schema {
                Some(schema) => schema.check_op(op)?,
                None if self.config.accept_unknown_tables => {}
                None => {
                    return Err(Error::reject(
                        Reason::UnknownTable,
                        format!("table {:?} is not replicated", op.table),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Records a local commit's changes to one scope: one record appended to this author's chain
    /// for the scope (hashed, not signed) and applied to the merged rows. Returns the rows it
    /// changed. This is what the SQL layer calls when a transaction on replicated tables commits.
    pub fn commit(&mut self, now_ms: u64, scope: &ScopeId, ops: Vec<Op>) -> Result<Vec<RowKey>> {
        self.commit_ops(now_ms, scope, ops, true)
    }

    /// [`Replica::commit`] without the list of rows changed: no key kept, sorted and
    /// deduplicated per op, for a caller that does not need them.
    pub fn commit_quiet(&mut self, now_ms: u64, scope: &ScopeId, ops: Vec<Op>) -> Result<()> {
        self.commit_ops(now_ms, scope, ops, false).map(|_| ())
    }

    /// [`Replica::commit_quiet`] without hashing the record or joining its ops into the merged
    /// rows yet: see [`Replica::commit_written`], which this is given `Op` values.
    pub fn commit_deferred(&mut self, now_ms: u64, scope: &ScopeId, ops: Vec<Op>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        if ops.len() as u64 > crate::change::MAX_OPS {
            return Err(Error::InvalidInput(
                "too many ops in one record; split the commit".into(),
            ));
        }
        self.check_ops(&ops)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        if ops
            .iter()
            .any(|o| !matches!(o.body, OpBody::Full(_)) || o.kind() == OpKind::Purge)
        {
            return Err(Error::InvalidInput(
                "a deferred op cannot be redacted or a purge (purge() redacts at once)".into(),
            ));
        }
        // What is written must decode (`hash_deferred`), as it must for a peer.
        if ops
            .iter()
            .any(|o| matches!(o.payload(), Some(Payload::Set(c)) if c.is_empty()))
        {
            return Err(Error::InvalidInput(
                "a SET op names at least one column".into(),
            ));
        }
        let mut w = OpsWriter::new();
        for op in &ops {
            w.op(op);
        }
        self.commit_written(now_ms, scope, w)
    }

    /// This replica's id, if it may write to `scope` (else `UNAUTHORIZED`).
    fn writer_for(&self, scope: &ScopeId) -> Result<AuthorId> {
        let me = self.id();
        if !self.may_write(&me, scope) {
            return Err(Error::InvalidInput(format!(
                "UNAUTHORIZED: this replica may not write to scope {:?}",
                String::from_utf8_lossy(&scope.name)
            )));
        }
        Ok(me)
    }

    /// Records a local commit's ops, written (and checked) by an [`OpsWriter`], as one record
    /// of this author's chain for `scope`, putting off what only sharing needs: the record is
    /// hashed when a head's hash is next needed (sealing, a peer's blocks, a non-deferred
    /// commit) and its ops joined into the merged rows when they are next read or changed (a
    /// peer's records, a snapshot, compaction), or both at once by [`Replica::catch_up`]. As
    /// with signing, which sealing does, a local write pays for neither until it is shared,
    /// and keeps its ops only as the bytes the host saves ([`Replica::written_bytes`]).
    pub fn commit_written(&mut self, now_ms: u64, scope: &ScopeId, ops: OpsWriter) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        self.commit_written_to(now_ms, &(self.id(), scope.clone()), ops)
    }

    /// [`Replica::commit_written`] for a caller that keeps the chain's key, `(this replica's
    /// id, scope)`, from one commit to the next: the chain is found by it with no key built.
    pub fn commit_written_to(&mut self, now_ms: u64, key: &ChainKey, ops: OpsWriter) -> Result<()> {
        let mut ops = ops;
        self.commit_written_from(now_ms, key, &mut ops, |_, _, _| ())?;
        Ok(())
    }

    /// [`Replica::commit_written_to`] that leaves `ops` empty, for its buffer to serve the
    /// caller's next record: a small record's bytes are copied after the chain's other
    /// unhashed ones, into a shared buffer; a large one keeps the writer's buffer, and the
    /// writer starts another. `written` is handed the record (its seq, HLC and encoding, as
    /// [`ChainLog::written_bytes`] gives them), for a host to save at once; its answer is
    /// returned (None for no ops, when no record is written).
    pub fn commit_written_from<R>(
        &mut self,
        now_ms: u64,
        key: &ChainKey,
        ops: &mut OpsWriter,
        written: impl FnOnce(u64, Hlc, &[u8]) -> R,
    ) -> Result<Option<R>> {
        if ops.is_empty() {
            return Ok(None);
        }
        if key.0 != self.id() {
            return Err(Error::InvalidInput(
                "a local record goes to this replica's own chain".into(),
            ));
        }
        self.writer_for(&key.1)?;
        let hlc = self.clock.tick(now_ms);
        let start = ops.head(hlc);
        let Replica {
            chains,
            unmerged,
            unhashed,
            ..
        } = self;
        // One search of the chains for the seq and the append; the key is cloned only into a
        // map or set it is new to.
        let mut append = |log: &mut ChainLog| {
            let seq = log.head().0 + 1;
            let len = ops.bytes().len() - start;
            let bufs = &mut log.written_bufs;
            let (b, from, to) = match bufs.last_mut() {
                // Small records share a buffer, while it has room: no regrowth copies them.
                Some(shared) if len <= SMALL_RECORD && shared.capacity() - shared.len() >= len => {
                    let at = shared.len();
                    shared.extend_from_slice(&ops.bytes()[start..]);
                    (bufs.len() - 1, at, at + len)
                }
                _ if len <= SMALL_RECORD => {
                    let mut shared = Vec::with_capacity(SHARED_BYTES);
                    shared.extend_from_slice(&ops.bytes()[start..]);
                    bufs.push(shared);
                    (bufs.len() - 1, 0, len)
                }
                _ => {
                    let buf = ops.take_bytes();
                    let end = buf.len();
                    bufs.push(buf);
                    (bufs.len() - 1, start, end)
                }
            };
            ops.reset();
            if log.written.is_empty() {
                unhashed.insert(key.clone());
            }
            let w = Written {
                seq,
                hlc,
                buf: b as u32,
                from: from as u32,
                to: to as u32,
            };
            log.written.push(w);
            if !log.in_unmerged {
                unmerged.entry(key.clone()).or_insert(seq);
                log.in_unmerged = true;
            }
            w
        };
        Ok(Some(match chains.get_mut(key) {
            Some(log) => {
                let w = append(log);
                written(w.seq, hlc, log.bytes_of(&w))
            }
            None => {
                let mut log = ChainLog::default();
                let w = append(&mut log);
                let r = written(w.seq, hlc, log.bytes_of(&w));
                chains.insert(key.clone(), log);
                r
            }
        }))
    }

    /// Checks a local commit's ops and builds its record (next seq of this author's chain for
    /// `scope`, a fresh HLC).
    fn make_record(&mut self, now_ms: u64, scope: &ScopeId, ops: Vec<Op>) -> Result<Record> {
        if ops.len() as u64 > crate::change::MAX_OPS {
            return Err(Error::InvalidInput(
                "too many ops in one record; split the commit".into(),
            ));
        }
        self.check_ops(&ops)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        if ops.iter().any(|o| !matches!(o.body, OpBody::Full(_))) {
            return Err(Error::InvalidInput("a local op cannot be redacted".into()));
        }
        let me = self.writer_for(scope)?;
        let hlc = self.clock.tick(now_ms);
        let (seq, prev) = match self.chains.get(&(me, scope.clone())) {
            Some(l) => l.head(),
            None => (0, ZERO_HASH),
        };
        Ok(Record::new(&me, scope, seq + 1, hlc, prev, ops))
    }

    fn commit_ops(
        &mut self,
        now_ms: u64,
        scope: &ScopeId,
        ops: Vec<Op>,
        want_keys: bool,
    ) -> Result<Vec<RowKey>> {
        self.edits += 1;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        // The new record links to the hashed head; rows a purge redacts must already hold
        // what it erases; and keys are reported of merged rows.
        self.catch_up();
        let record = self.make_record(now_ms, scope, ops)?;
        let me = self.id();
        let key = (me, scope.clone());
        let touched = self.apply_record_keys(&me, scope, &record, want_keys);
        self.chains.entry(key).or_default().pending.push(record);
        if touched.iter().any(|(_, purge)| *purge) {
            self.redact_purged(scope, &touched);
        }
        if !want_keys {
            return Ok(Vec::new());
        }
        let mut keys: Vec<RowKey> = touched.into_iter().map(|(k, _)| k).collect();
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    /// `purge`: deletes a row and erases its values from every record held, leaving a signed
    /// tombstone (once sealed) that makes every other replica do the same.
    pub fn purge(
        &mut self,
        now_ms: u64,
        scope: &ScopeId,
        table: &str,
        pk: Vec<cairn_value::Value>,
    ) -> Result<()> {
        self.edits += 1;
        self.commit(now_ms, scope, vec![Op::new(table, pk, Payload::Purge)])
            .map(|_| ())
    }

    /// Seals every chain's pending records into one block each (one signature per chain).
    /// Returns the number of blocks made.
    pub fn seal(&mut self) -> usize {
        self.edits += 1;
        self.hash_deferred();
        let mut n = 0;
        for ((author, scope), log) in self.chains.iter_mut() {
            if log.pending.is_empty() || *author != self.identity.id() {
                continue;
            }
            let records = std::mem::take(&mut log.pending);
            log.blocks
                .push(Block::seal(&self.identity, scope.clone(), records));
            n += 1;
        }
        n
    }

    /// Records of this replica's own chains committed and not yet sealed.
    pub fn pending_records(&self) -> usize {
        self.chains.values().map(|l| l.unsealed()).sum()
    }

    pub fn has_pending(&self) -> bool {
        self.chains.values().any(|l| l.unsealed() > 0)
    }
}
