//! A replica: one database's identity, clock, chains, writer lists and merged rows, and the
//! operations on them — local commits, sealing, verifying and applying what peers send,
//! snapshots, purge, compaction, `verify()`. No I/O: time comes in as `now_ms`, randomness only
//! through the identity the host made.

use crate::chain::{verify_signatures, Block, ChainKey, ChainLog, Checkpoint, Written};
use crate::change::{record_hash, Op, OpBody, OpKind, OpsWriter, Payload, Record};
use crate::error::{Error, Reason, Result};
use crate::hlc::{physical_ms, Clock, Hlc};
use crate::identity::{AuthorId, Identity};
use crate::merge::{
    visible_rows, MemoryRows, RowKey, RowState, RowStore, TableSchema, Version, VisibleRow,
};
use crate::protocol::VersionVector;
use crate::scope::{ScopeId, Subscription, WriterList};
use crate::wire::{Reader, Writer, ZERO_HASH};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Clone)]
pub struct Config {
    /// A record whose HLC is further ahead of `now` than this is refused (`CLOCK_SKEW`).
    pub max_clock_skew_ms: u64,
    /// Records (or snapshot rows) per page.
    pub page_records: usize,
    /// Pages sent ahead of acknowledgements.
    pub window_pages: usize,
    /// A page not acknowledged after this long is sent again.
    pub retransmit_ms: u64,
    /// What this replica asks its peers for.
    pub subscription: Subscription,
    /// An empty replica asks for a snapshot instead of the whole history.
    pub snapshot_when_empty: bool,
    /// A snapshot larger than this (rows, all pages) is refused: a peer cannot make this
    /// replica buffer without bound.
    pub max_snapshot_rows: usize,
    /// List the rows each incoming batch changed in `Event::Applied` (the SQL layer needs it;
    /// a relay does not).
    pub report_rows: bool,
    /// Accept ops on tables that are not registered, without a schema check (`UNKNOWN_TABLE`
    /// and `SCHEMA_MISMATCH` are then never raised for them). A relay stores and forwards the
    /// tables of every application it serves without knowing their schemas; signatures, chains,
    /// writers and clocks are still checked. Rows of such tables merge as usual, so
    /// `state_digest` and snapshots still work; `materialize` and `visible` skip them.
    pub accept_unknown_tables: bool,
    /// Serve a peer only the scopes its HELLO key may write to (the owner, or a key in one of
    /// the scope's signed writer lists: its members), whatever its subscription asks for. A relay
    /// that authenticated the peer's key sets it so that a user reads only its own scopes.
    pub serve_members_only: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_clock_skew_ms: 5 * 60 * 1000,
            page_records: 1000,
            window_pages: 4,
            retransmit_ms: 2000,
            subscription: Subscription::All,
            snapshot_when_empty: false,
            max_snapshot_rows: 10_000_000,
            report_rows: true,
            accept_unknown_tables: false,
            serve_members_only: false,
        }
    }
}

/// What happened while handling input, for the application.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Verified records (or snapshot rows) were applied; `rows` (each once, sorted; empty if
    /// `Config::report_rows` is off) are the rows to re-read (`Replica::materialize`).
    Applied { records: usize, rows: Vec<RowKey> },
    /// A block, writer list or snapshot from a peer was refused whole.
    Rejected {
        reason: Reason,
        author: AuthorId,
        scope: ScopeId,
        first_seq: u64,
        detail: String,
    },
    /// An author signed two different records at the same place of a chain.
    Fork {
        author: AuthorId,
        scope: ScopeId,
        seq: u64,
    },
    /// The peer told us it refused something we sent.
    PeerRejected {
        code: String,
        author: AuthorId,
        scope: ScopeId,
        first_seq: u64,
    },
}

/// A problem `verify()` found in stored history.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub author: AuthorId,
    pub scope: ScopeId,
    pub seq: u64,
    pub reason: Reason,
    pub detail: String,
}

/// What the replica knows of a peer it has met: what the peer acknowledged, and what it asked
/// for. Compaction keeps whatever some known peer still lacks.
#[derive(Debug, Clone, Default)]
pub struct PeerInfo {
    pub acked: VersionVector,
    pub want: Subscription,
}

pub struct Replica<S: RowStore = MemoryRows> {
    pub(crate) identity: Identity,
    pub(crate) clock: Clock,
    pub(crate) config: Config,
    pub(crate) tables: HashMap<String, TableSchema>,
    pub(crate) chains: BTreeMap<ChainKey, ChainLog>,
    /// Every valid list seen, by scope, then by (version, signature): two different lists an
    /// owner signed with the same version are both kept, so what is authorized does not depend
    /// on which arrived first.
    pub(crate) writer_lists: BTreeMap<ScopeId, BTreeMap<(u64, [u8; 64]), WriterList>>,
    pub(crate) writers: BTreeMap<ScopeId, BTreeSet<AuthorId>>,
    /// Lists adopted so far. Chains and lists are never removed, so `(chains.len(),
    /// lists_added)` changes exactly when what a link may be served can change.
    pub(crate) lists_added: usize,
    pub(crate) rows: S,
    pub(crate) peers: BTreeMap<AuthorId, PeerInfo>,
    /// For each peer, `edits` as it stood after the peer's entry last changed: a host saves
    /// the peers changed since its last save ([`Replica::peers_changed_since`]), not all.
    pub(crate) peer_edits: BTreeMap<AuthorId, u64>,
    pub(crate) forks: BTreeSet<AuthorId>,
    /// Bumped whenever held records are redacted (a purge): a host that saved them must save
    /// them again.
    pub(crate) redactions: u64,
    /// Bumped by every change to what a host saves (chains, peers, writer lists, forks,
    /// redactions) other than a local record appended by [`Replica::commit_written_to`]: a host
    /// that saw the same count at its last save, and has saved every local record since,
    /// has only the chains those records went to to save again ([`Replica::edits`]).
    pub(crate) edits: u64,
    /// Local records written by [`Replica::commit_deferred`] and not yet joined into `rows`:
    /// per chain, the first such seq. Every path that reads or changes `rows` joins them first
    /// ([`Replica::merge_deferred`]); readers that cannot (`&self`) refuse to run without it.
    pub(crate) unmerged: BTreeMap<ChainKey, u64>,
    /// Chains with records of `commit_deferred` not hashed yet (their `prev` and `hash` not
    /// computed). They are chained before anything reads a head's hash: sealing, a peer's
    /// blocks, a non-deferred commit ([`Replica::hash_deferred`]).
    pub(crate) unhashed: BTreeSet<ChainKey>,
    // The unhashed records themselves are kept encoded in their chain (`ChainLog::written`,
    // 32 bytes a record beside its encoding), after the chain's hashed `pending` records, and
    // decoded (and so hashed) into `pending` by `hash_deferred`. A local write keeps its ops as
    // the bytes the host saves, not as values.
}

impl Replica<MemoryRows> {
    pub fn in_memory(identity: Identity, config: Config) -> Self {
        Replica::new(identity, config, MemoryRows::default())
    }
}

/// A local record up to this size is copied into its chain's shared buffer of unhashed
/// records (`ChainLog::written_bufs`); a larger one keeps the buffer it was written in.
const SMALL_RECORD: usize = 1 << 10;
/// The room of a shared buffer: one allocation for a hundred single-row commits or so, never
/// grown (a record that does not fit starts another).
const SHARED_BYTES: usize = 8 << 10;

impl<S: RowStore> Replica<S> {
    pub fn new(identity: Identity, config: Config, rows: S) -> Self {
        Replica {
            identity,
            clock: Clock::new(),
            config,
            tables: HashMap::new(),
            chains: BTreeMap::new(),
            writer_lists: BTreeMap::new(),
            writers: BTreeMap::new(),
            lists_added: 0,
            rows,
            peers: BTreeMap::new(),
            peer_edits: BTreeMap::new(),
            forks: BTreeSet::new(),
            redactions: 0,
            edits: 0,
            unmerged: BTreeMap::new(),
            unhashed: BTreeSet::new(),
        }
    }

    pub fn id(&self) -> AuthorId {
        self.identity.id()
    }
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }
    /// The merged rows. Records committed with [`Replica::commit_deferred`] must have been
    /// merged first ([`Replica::merge_deferred`]).
    pub fn rows(&self) -> &S {
        self.merged_rows()
    }
    /// `rows`, refusing (a bug, not an input) to hand out rows that lack deferred records.
    pub(crate) fn merged_rows(&self) -> &S {
        assert!(
            self.unmerged.is_empty(),
            "invariant: deferred records are merged before the rows are read"
        );
        &self.rows
    }
    /// The encoding (`Record::encode`) of a pending record of `commit_written` not yet hashed,
    /// for the host that saves it (such a record's `ops` are empty until it is).
    pub fn written_bytes(&self, key: &ChainKey, seq: u64) -> Option<&[u8]> {
        self.chains.get(key)?.written_bytes(seq)
    }
    /// Whether local records wait to be joined into the rows (see `commit_deferred`).
    pub fn has_unmerged(&self) -> bool {
        !self.unmerged.is_empty()
    }
    /// Everything [`Replica::commit_deferred`] put off: the records' hashes, then their rows.
    pub fn catch_up(&mut self) {
        self.hash_deferred();
        self.merge_deferred();
    }
    /// Computes the `prev` and `hash` of the records [`Replica::commit_deferred`] appended,
    /// in chain order. The hashes do not depend on when they are taken (a redaction keeps
    /// each op's hash), so a record hashed late is the record hashed at once.
    pub fn hash_deferred(&mut self) {
        if self.unhashed.is_empty() {
            return;
        }
        for key in std::mem::take(&mut self.unhashed) {
            let Some(log) = self.chains.get_mut(&key) else {
                continue;
            };
            let written = std::mem::take(&mut log.written);
            let bufs = std::mem::take(&mut log.written_bufs);
            // They follow the hashed records, in seq order.
            let mut prev = log.pending.last().map_or(log.sealed_head().1, |r| r.hash);
            log.pending.reserve(written.len());
            for w in &written {
                // Decoding computes the hashes from the bytes, as for a peer's records.
                let r = Record::decode(
                    &mut Reader::new(w.bytes(&bufs)),
                    &key.0,
                    &key.1,
                    w.seq,
                    prev,
                )
                .expect("invariant: a written record decodes");
                prev = r.hash;
                log.pending.push(r);
            }
        }
    }
    /// Joins into the rows the records [`Replica::commit_deferred`] left out. Merging is a
    /// join, so doing it late, and after records that arrived since, gives the same rows.
    pub fn merge_deferred(&mut self) {
        if self.unmerged.is_empty() {
            return;
        }
        // The records' ops are decoded with their hashes.
        self.hash_deferred();
        let unmerged = std::mem::take(&mut self.unmerged);
        let mut chains = std::mem::take(&mut self.chains);
        for (key, from) in unmerged {
            let Some(log) = chains.get_mut(&key) else {
                continue;
            };
            log.in_unmerged = false;
            let log = &*log;
            let records = log
                .blocks
                .iter()
                .flat_map(|b| b.records.iter())
                .chain(log.pending.iter())
                .filter(|r| r.seq >= from);
            for r in records {
                let touched = self.apply_record_keys(&key.0, &key.1, r, false);
                debug_assert!(
                    touched.is_empty(),
                    "invariant: deferred records purge nothing"
                );
            }
        }
        self.chains = chains;
    }
    pub fn clock(&self) -> Hlc {
        self.clock.last()
    }
    pub fn forks(&self) -> &BTreeSet<AuthorId> {
        &self.forks
    }
    pub fn peers(&self) -> &BTreeMap<AuthorId, PeerInfo> {
        &self.peers
    }
    /// The peers whose entry changed after `edits` stood at that count (see
    /// [`Replica::edits`]): what a host that saved them all then has to save again.
    pub fn peers_changed_since(&self, edits: u64) -> impl Iterator<Item = (&AuthorId, &PeerInfo)> {
        self.peer_edits
            .iter()
            .filter(move |(_, &e)| e > edits)
            .filter_map(|(id, _)| self.peers.get_key_value(id))
    }
    /// Notes that peer `id`'s entry changed (after `edits` moved for the change).
    pub(crate) fn peer_changed(&mut self, id: AuthorId) {
        self.peer_edits.insert(id, self.edits);
    }
    pub fn chain(&self, key: &ChainKey) -> Option<&ChainLog> {
        self.chains.get(key)
    }
    pub fn chains(&self) -> impl Iterator<Item = (&ChainKey, &ChainLog)> {
        self.chains.iter()
    }

    // ---- for a host that saves the replica's state and rebuilds it on open ----

    /// Puts back a chain as it was saved (its checkpoint, sealed blocks and pending records).
    /// Blocks are trusted: they were verified when first received (`verify()` re-checks).
    pub fn restore_chain(&mut self, key: ChainKey, log: ChainLog) {
        self.edits += 1;
        for r in log.pending.iter() {
            self.clock.observe(r.hlc);
        }
        for b in &log.blocks {
            if let Some(r) = b.records.last() {
                self.clock.observe(r.hlc);
            }
        }
        self.chains.insert(key, log);
    }
    /// Moves the clock to at least `hlc` (the last one saved), so that no new write is ever
    /// ordered before one made before a restart.
    pub fn observe_clock(&mut self, hlc: Hlc) {
        self.clock.observe(hlc);
    }
    pub fn restore_peer(&mut self, id: AuthorId, info: PeerInfo) {
        self.edits += 1;
        self.peers.insert(id, info);
        self.peer_changed(id);
    }
    pub fn restore_fork(&mut self, id: AuthorId) {
        self.edits += 1;
        self.forks.insert(id);
    }
    /// How many times held records were redacted (see `restore_chain`: saved copies of them
    /// must be written again when this moves).
    pub fn redactions(&self) -> u64 {
        self.redactions
    }
    /// How many times something a host saves changed other than by a local record appended
    /// with [`Replica::commit_written_to`] (see the field).
    pub fn edits(&self) -> u64 {
        self.edits
    }
    /// Applies every held record (sealed and pending) to the merged rows again. A host that
    /// saves the rows only when history is dropped rebuilds the rest this way on open; merging
    /// is a join, so rows that already contain some of it come out the same.
    pub fn replay_history(&mut self) {
        // Every record held is applied below, deferred ones included.
        self.unmerged.clear();
        for log in self.chains.values_mut() {
            log.in_unmerged = false;
        }
        self.hash_deferred();
        let chains = std::mem::take(&mut self.chains);
        for ((author, scope), log) in &chains {
            for r in log.blocks.iter().flat_map(|b| b.records.iter()) {
                self.apply_record(author, scope, r);
            }
            for r in &log.pending {
                self.apply_record(author, scope, r);
            }
        }
        self.chains = chains;
    }
    /// The merged rows, for loading them from storage.
    pub fn rows_mut(&mut self) -> &mut S {
        self.merge_deferred();
        &mut self.rows
    }

    /// Declares a table replicated. Every replica must register the same schema.
    pub fn register_table(&mut self, schema: TableSchema) -> Result<()> {
        if schema.pk_len == 0 || schema.pk_len > crate::change::MAX_PK as usize {
            return Err(Error::InvalidInput(format!(
                "{}: a replicated table needs a primary key of 1 to 16 columns",
                schema.name
            )));
        }
        self.tables.insert(schema.name.clone(), schema);
        Ok(())
    }
    pub fn table(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(name)
    }

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

    fn schema_of(&self, table: &str) -> Result<&TableSchema> {
        self.tables
            .get(table)
            .ok_or_else(|| Error::InvalidInput(format!("table {table} is not replicated")))
    }

    /// What the SQL table should now hold for each of these rows (from `commit` or
    /// `Event::Applied`): `Some(values)` in schema column order to upsert, `None` to delete.
    /// Unique conflicts are not applied here; see `visible`.
    pub fn materialize(&self, keys: &[RowKey]) -> Vec<(RowKey, Option<Vec<cairn_value::Value>>)> {
        keys.iter()
            .map(|k| {
                let values = self.tables.get(&k.table).and_then(|schema| {
                    self.merged_rows()
                        .get(k)
                        .filter(RowState::is_live)
                        .map(|row| row.values(schema))
                });
                (k.clone(), values)
            })
            .collect()
    }

    /// The chains held and how far (sealed and pending records alike).
    pub fn version_vector(&self) -> VersionVector {
        self.chains
            .iter()
            .map(|(k, log)| (k.clone(), log.head().0))
            .filter(|(_, s)| *s > 0)
            .collect()
    }

    pub fn may_write(&self, author: &AuthorId, scope: &ScopeId) -> bool {
        scope.owner == *author || self.writers.get(scope).is_some_and(|w| w.contains(author))
    }

    /// As the owner of scope `name`, signs and adopts a writer list.
    pub fn sign_writers(
        &mut self,
        name: &[u8],
        version: u64,
        writers: Vec<AuthorId>,
    ) -> WriterList {
        let list = WriterList::sign(&self.identity, name, version, writers);
        self.add_writer_list(list.clone())
            .expect("invariant: a list we signed checks");
        list
    }

    /// Adopts a writer list signed by its scope's owner.
    pub fn add_writer_list(&mut self, list: WriterList) -> Result<bool> {
        self.edits += 1;
        list.check()?;
        let known = self.writer_lists.entry(list.scope.clone()).or_default();
        if known.contains_key(&(list.version, list.sig)) {
            return Ok(false);
        }
        self.writers
            .entry(list.scope.clone())
            .or_default()
            .extend(list.writers.iter().copied());
        known.insert((list.version, list.sig), list);
        self.lists_added += 1;
        Ok(true)
    }

    pub fn writer_lists(&self) -> impl Iterator<Item = &WriterList> {
        self.writer_lists.values().flat_map(|m| m.values())
    }

    fn check_ops(&self, ops: &[Op]) -> Result<()> {
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

    /// Joins a record's ops into the rows; returns each touched row and whether it is purged.
    fn apply_record(
        &mut self,
        author: &AuthorId,
        scope: &ScopeId,
        record: &Record,
    ) -> Vec<(RowKey, bool)> {
        self.apply_record_keys(author, scope, record, true)
    }

    /// [`Replica::apply_record`]; without `want_keys` only the purged rows are returned (the
    /// others' keys move into the row store).
    fn apply_record_keys(
        &mut self,
        author: &AuthorId,
        scope: &ScopeId,
        record: &Record,
        want_keys: bool,
    ) -> Vec<(RowKey, bool)> {
        if !want_keys {
            self.rows.expect_ops(record.ops.len());
        }
        let mut out = Vec::with_capacity(if want_keys { record.ops.len() } else { 0 });
        for (idx, op) in record.ops.iter().enumerate() {
            let key = RowKey::new(&op.table, scope, &op.pk);
            let v = Version {
                hlc: record.hlc,
                author: *author,
                seq: record.seq,
                idx: idx as u32,
            };
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
    fn redact_purged(&mut self, scope: &ScopeId, touched: &[(RowKey, bool)]) {
        self.edits += 1;
        // Every record it may redact is a `Record` in `pending` or a block.
        self.hash_deferred();
        let purged: BTreeSet<&RowKey> =
            touched.iter().filter(|(_, p)| *p).map(|(k, _)| k).collect();
        if purged.is_empty() {
            return;
        }
        self.redactions += 1;
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
                    // Only SET and ADD carry values; the PURGE itself must travel intact.
                    if matches!(op.body, OpBody::Full(Payload::Set(_) | Payload::Add(..)))
                        && purged.contains(&RowKey::new(&op.table, scope, &op.pk))
                    {
                        *op = op.redacted();
                    }
                }
            }
        }
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

    /// Verifies and applies blocks from a peer. The blocks must come from `Block::decode` (or
    /// `Block::seal`), which compute every record hash from the record's content. Signatures of all blocks are checked in one
    /// batch; each block is then checked against what is held and applied, or rejected whole.
    pub fn receive_blocks(&mut self, now_ms: u64, blocks: Vec<Block>) -> Vec<Event> {
        self.edits += 1;
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
            if b.first_seq() > held.saturating_add(1) {
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
        let mut applied_records = 0;
        let mut applied_rows = Vec::new();
        for (block, sig) in blocks.into_iter().zip(sig_results) {
            match self.check_block(now_ms, &block, sig) {
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
                Err((reason, detail)) => {
                    if reason == Reason::Fork {
                        self.forks.insert(block.author);
                        events.push(Event::Fork {
                            author: block.author,
                            scope: block.scope.clone(),
                            seq: block.first_seq(),
                        });
                    }
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

    fn is_replay(&self, block: &Block) -> bool {
        self.chains.get(&block.key()).is_some_and(|log| {
            block.last_seq() <= log.head().0
                && log.hash_at(block.last_seq()) == Some(block.last_hash())
        })
    }

    /// The checks of docs/sync.md sec. 6, in order. Ok(n): the block fits; its first n records
    /// are already held.
    fn check_block(
        &self,
        now_ms: u64,
        block: &Block,
        sig: Result<()>,
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
            return match log.and_then(|l| l.hash_at(last)) {
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
        if !self.may_write(&block.author, &block.scope) {
            return Err((
                Reason::Unauthorized,
                format!("{:?} may not write to this scope", block.author),
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

    /// Drops, per chain, the whole blocks every known peer that follows the scope has
    /// acknowledged, keeping the last dropped block's head and signature as a checkpoint.
    /// Returns the number of records dropped.
    pub fn compact(&mut self) -> usize {
        self.edits += 1;
        // The records dropped must reach the rows first.
        self.catch_up();
        let mut dropped = 0;
        for (key, log) in self.chains.iter_mut() {
            let horizon = self
                .peers
                .values()
                .filter(|p| p.want.covers(&key.1))
                .map(|p| p.acked.get(key).copied().unwrap_or(0))
                .min()
                .unwrap_or(u64::MAX);
            let n = log
                .blocks
                .iter()
                .take_while(|b| b.last_seq() <= horizon)
                .count();
            if n == 0 {
                continue;
            }
            let last = &log.blocks[n - 1];
            log.base = Some(Checkpoint::of_block(last));
            dropped += log
                .blocks
                .drain(..n)
                .map(|b| b.records.len())
                .sum::<usize>();
        }
        dropped
    }

    /// The rows of a table as queries see them (unique conflicts resolved), and the rows hidden
    /// by a unique conflict.
    pub fn visible(&self, table: &str) -> (Vec<VisibleRow>, Vec<VisibleRow>) {
        match self.tables.get(table) {
            Some(schema) => visible_rows(self.merged_rows(), schema),
            None => (Vec::new(), Vec::new()),
        }
    }

    /// A digest of every merged row (their full state, versions included): equal digests mean
    /// identical rows.
    pub fn state_digest(&self) -> [u8; 32] {
        self.state_digest_of(&Subscription::All)
    }

    /// The same digest, over the rows of the scopes a subscription covers.
    pub fn state_digest_of(&self, want: &Subscription) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        let empty = RowState::default();
        self.merged_rows().scan(&mut |k, row| {
            if *row == empty || !want.covers(&k.scope) {
                return;
            }
            let mut w = Writer::new();
            w.bytes(k.table.as_bytes());
            k.scope.encode(&mut w);
            w.bytes(&k.pk);
            row.encode(&mut w);
            h.update(&w.buf);
        });
        *h.finalize().as_bytes()
    }

    /// The sealed heads of the chains a subscription covers, as checkpoints (for a snapshot).
    pub(crate) fn checkpoints_for(&self, covers: impl Fn(&ScopeId) -> bool) -> Vec<Checkpoint> {
        self.chains
            .iter()
            .filter(|((_, s), _)| covers(s))
            .filter_map(|(_, log)| match log.blocks.last() {
                Some(b) => Some(Checkpoint::of_block(b)),
                None => log.base.clone(),
            })
            .collect()
    }

    /// Installs a snapshot: checks every checkpoint, then moves heads forward and joins rows.
    pub fn install_snapshot(
        &mut self,
        checkpoints: Vec<Checkpoint>,
        rows: Vec<(RowKey, RowState)>,
    ) -> Vec<Event> {
        self.edits += 1;
        self.catch_up();
        let mut events = Vec::new();
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
        for cp in checkpoints {
            let key = (cp.author, cp.scope.clone());
            let log = self.chains.entry(key).or_default();
            let (held, _) = log.head();
            if cp.seq > held {
                log.blocks.clear();
                log.pending.clear();
                log.written.clear();
                log.written_bufs.clear();
                log.base = Some(cp);
            } else if log.hash_at(cp.seq).is_some_and(|h| h != cp.hash) {
                self.forks.insert(cp.author);
                events.push(Event::Fork {
                    author: cp.author,
                    scope: cp.scope,
                    seq: cp.seq,
                });
            }
        }
        let n = rows.len();
        let mut keys = Vec::new();
        let mut purged = Vec::new();
        for (k, row) in rows {
            let mut max_hlc = 0;
            let mut is_purged = false;
            self.rows.update(&k, &mut |mine: &mut RowState| {
                mine.join(&row);
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
            if self.config.report_rows {
                keys.push(k);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Payload;
    use cairn_value::Value;

    #[test]
    fn verify_reports_tampered_history() {
        let mut r = Replica::in_memory(Identity::from_secret([1; 32]), Config::default());
        r.register_table(TableSchema::new("t", 1).lww("a"))
            .expect("invariant: valid");
        let scope = ScopeId::new(r.id(), "t");
        for i in 0..3 {
            let op = Op::new(
                "t",
                vec![Value::Integer(i)],
                Payload::Set(vec![(0, Value::Integer(i))]),
            );
            r.commit(1000, &scope, vec![op]).expect("invariant: valid");
        }
        r.seal();
        assert!(r.verify().is_empty());
        let key = (r.id(), scope);
        let log = r.chains.get_mut(&key).expect("invariant: written");
        log.blocks[0].records[1].ops[0] = Op::new(
            "t",
            vec![Value::Integer(1)],
            Payload::Set(vec![(0, Value::Integer(99))]),
        );
        let failures = r.verify();
        assert!(failures
            .iter()
            .any(|f| f.seq == 2 && f.reason == Reason::BadSignature));
        let log = r.chains.get_mut(&key).expect("invariant: written");
        log.blocks[0].records[1].ops[0] = Op::new(
            "t",
            vec![Value::Integer(1)],
            Payload::Set(vec![(0, Value::Integer(1))]),
        );
        assert!(r.verify().is_empty());
        log_sig_flip(&mut r, &key);
        assert_eq!(r.verify().len(), 1);
    }

    #[test]
    fn edits_move_with_everything_a_host_saves_but_local_records() {
        // A host saves only the chains of its local records while `edits` stands still
        // (cairn-replicated's save): sealing, a peer's blocks, a peer met, a writer list and
        // compaction must move it; a local record, hashing and merging must not.
        let schema = TableSchema::new("t", 1).lww("a");
        let mut a = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
        let mut b = Replica::in_memory(Identity::from_secret([6; 32]), Config::default());
        for r in [&mut a, &mut b] {
            r.register_table(schema.clone()).expect("invariant: valid");
        }
        let key = (a.id(), ScopeId::new(a.id(), "t"));
        let write = |r: &mut Replica, i: i64| {
            let mut w = OpsWriter::new();
            w.op(&Op::new(
                "t",
                vec![Value::Integer(i)],
                Payload::Set(vec![(0, Value::Integer(i))]),
            ));
            let key = (r.id(), ScopeId::new(r.id(), "t"));
            r.commit_written_to(1000, &key, w)
                .expect("invariant: valid");
        };
        let e = a.edits();
        write(&mut a, 1);
        write(&mut a, 2);
        a.catch_up();
        assert_eq!(a.edits(), e, "local records, hashing and merging");
        a.seal();
        assert!(a.edits() > e, "sealing");
        let e = a.edits();
        write(&mut b, 3);
        b.seal();
        let bkey = (b.id(), ScopeId::new(b.id(), "t"));
        let blocks = b.chain(&bkey).expect("invariant: written").blocks.clone();
        a.receive_blocks(1000, blocks);
        assert!(a.edits() > e, "a peer's blocks");
        let e = a.edits();
        let (mut la, mut lb) = (crate::Link::new(), crate::Link::new());
        let hello = b.open_link(&mut lb, 1000);
        a.handle(&mut la, 1000, &hello);
        assert!(a.edits() > e, "a peer met");
        let e = a.edits();
        a.sign_writers(b"t", 1, vec![b.id()]);
        assert!(a.edits() > e, "a writer list");
        let e = a.edits();
        a.compact();
        assert!(a.edits() > e, "compaction");
        assert!(a.chain(&key).is_some());
    }

    #[test]
    fn deferred_commits_find_their_chain_again_after_each_catch_up() {
        // A chain's place in the replica's deferred maps is remembered in the chain: commits
        // between partial catch-ups (hashes only, merges only, a replay of history), over two
        // scopes, must leave the same chains and rows as commits made at once.
        let schema = TableSchema::new("t", 1).lww("a");
        let mut now = Replica::in_memory(Identity::from_secret([3; 32]), Config::default());
        let mut late = Replica::in_memory(Identity::from_secret([3; 32]), Config::default());
        for r in [&mut now, &mut late] {
            r.register_table(schema.clone()).expect("invariant: valid");
        }
        let scopes = [ScopeId::new(now.id(), "a"), ScopeId::new(now.id(), "b")];
        let op = |i: i64| {
            vec![Op::new(
                "t",
                vec![Value::Integer(i % 4)],
                Payload::Set(vec![(0, Value::Integer(i))]),
            )]
        };
        for i in 0..24i64 {
            let scope = &scopes[(i % 2) as usize];
            now.commit(1000 + i as u64, scope, op(i))
                .expect("invariant: valid");
            late.commit_deferred(1000 + i as u64, scope, op(i))
                .expect("invariant: valid");
            let key = (late.id(), scope.clone());
            let seq = late.chain(&key).expect("invariant: written").head().0;
            assert!(late.written_bytes(&key, seq).is_some());
            match i % 6 {
                1 => {
                    late.hash_deferred();
                    assert!(late.written_bytes(&key, seq).is_none());
                    assert!(late.has_unmerged());
                }
                3 => late.merge_deferred(),
                5 if i % 12 == 5 => late.replay_history(),
                _ => {}
            }
        }
        late.catch_up();
        assert!(!late.has_unmerged());
        assert_eq!(now.state_digest(), late.state_digest());
        assert_eq!(now.version_vector(), late.version_vector());
        for scope in &scopes {
            let key = (now.id(), scope.clone());
            assert_eq!(
                now.chain(&key).expect("invariant: written").head(),
                late.chain(&key).expect("invariant: written").head()
            );
        }
        assert!(late.verify().is_empty());
        // A local record goes to this replica's own chain only.
        let other = Identity::from_secret([4; 32]).id();
        let mut w = OpsWriter::new();
        w.op(&op(99)[0]);
        assert!(matches!(
            late.commit_written_to(2000, &(other, scopes[0].clone()), w),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn one_writer_serves_many_records() {
        // `commit_written_from` copies a small record's bytes after the chain's others, keeps
        // a large one's buffer, and empties the writer for the next: each record must hold its
        // own ops only, whichever way it was kept, and whatever was hashed between.
        let schema = TableSchema::new("t", 1).lww("a");
        let mut now = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
        let mut late = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
        for r in [&mut now, &mut late] {
            r.register_table(schema.clone()).expect("invariant: valid");
        }
        let scope = ScopeId::new(now.id(), "t");
        let key = (now.id(), scope.clone());
        let ops = |i: i64| -> Vec<Op> {
            (0..=i % 3)
                .map(|k| {
                    Op::new(
                        "t",
                        vec![Value::Integer(i + k)],
                        // Every fifth record is large (past `SMALL_RECORD`); the others,
                        // of up to about 800 bytes, fill a shared buffer every dozen or so.
                        Payload::Set(vec![(
                            0,
                            Value::Text(format!("{i}-{k}").repeat(if i % 5 == 4 {
                                900
                            } else {
                                60
                            })),
                        )]),
                    )
                })
                .collect()
        };
        let mut w = OpsWriter::new();
        for i in 0..60i64 {
            now.commit(1000 + i as u64, &scope, ops(i))
                .expect("invariant: valid");
            for op in &ops(i) {
                w.op(op);
            }
            let (seq, hlc, bytes) = late
                .commit_written_from(1000 + i as u64, &key, &mut w, |seq, hlc, b| {
                    (seq, hlc, b.to_vec())
                })
                .expect("invariant: valid")
                .expect("invariant: ops written");
            assert!(w.is_empty());
            // What the host is handed is the record as held, to be saved as it is.
            let log = late.chain(&key).expect("invariant: written");
            assert_eq!(log.head().0, seq);
            assert_eq!(log.written().last(), Some((seq, hlc, &bytes[..])));
            assert_eq!(log.written_bytes(seq), Some(&bytes[..]));
            assert_eq!(log.unsealed() as u64, seq);
            if i % 7 == 3 {
                late.hash_deferred();
                // Hashed: decoded into `pending`, nothing left waiting.
                let log = late.chain(&key).expect("invariant: written");
                assert_eq!(log.written().count(), 0);
                assert_eq!(log.pending.last().map(|r| (r.seq, r.hlc)), Some((seq, hlc)));
            }
        }
        // A record waiting to be hashed costs its encoding and 32 bytes, not a `Record`.
        assert_eq!(std::mem::size_of::<crate::chain::Written>(), 32);
        late.catch_up();
        let pending = |r: &Replica| r.chain(&key).expect("invariant: written").pending.clone();
        assert_eq!(pending(&now), pending(&late));
        assert_eq!(now.state_digest(), late.state_digest());
        assert!(late.verify().is_empty());
    }

    #[test]
    fn deferred_commits_merge_to_the_same_rows() {
        let schema = TableSchema::new("t", 1).lww("a").counter("n");
        let mut now = Replica::in_memory(Identity::from_secret([2; 32]), Config::default());
        let mut late = Replica::in_memory(Identity::from_secret([2; 32]), Config::default());
        for r in [&mut now, &mut late] {
            r.register_table(schema.clone()).expect("invariant: valid");
        }
        let scope = ScopeId::new(now.id(), "t");
        let ops = |i: i64| {
            vec![
                Op::new(
                    "t",
                    vec![Value::Integer(i % 3)],
                    Payload::Set(vec![(0, Value::Integer(i))]),
                ),
                Op::new("t", vec![Value::Integer(i % 3)], Payload::Add(1, i)),
                Op::new("t", vec![Value::Integer((i + 1) % 3)], Payload::Delete),
            ]
        };
        for i in 0..6 {
            now.commit(1000, &scope, ops(i)).expect("invariant: valid");
            late.commit_deferred(1000, &scope, ops(i))
                .expect("invariant: valid");
            if i == 2 {
                // Sealing moves deferred records into a block; they still merge.
                late.seal();
            }
        }
        assert!(late.has_unmerged());
        late.catch_up();
        assert!(!late.has_unmerged());
        assert_eq!(now.state_digest(), late.state_digest());
        assert_eq!(now.version_vector(), late.version_vector());
        // Hashed late, the chain is the one hashed at each commit.
        let key = (now.id(), scope);
        let head = |r: &Replica| r.chain(&key).expect("invariant: written").head();
        assert_eq!(head(&now), head(&late));
        assert!(late.verify().is_empty());
        now.seal();
        late.seal();
        let records = |r: &Replica| -> Vec<Record> {
            let log = r.chain(&key).expect("invariant: written");
            log.blocks.iter().flat_map(|b| b.records.clone()).collect()
        };
        assert_eq!(records(&now), records(&late));
    }

    fn log_sig_flip(r: &mut Replica, key: &ChainKey) {
        let log = r.chains.get_mut(key).expect("invariant: written");
        log.blocks[0].sig[0] ^= 1;
    }
}
