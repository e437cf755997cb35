//! A replica: one database's identity, clock, chains, writer lists and merged rows, and the
//! operations on them — local commits, sealing, verifying and applying what peers send,
//! snapshots, purge, compaction, `verify()`. No I/O: time comes in as `now_ms`, randomness only
//! through the identity the host made.
//!
//! This module holds the replica's state and its queries (rows, chains, peers, writer lists,
//! digests); the operations that change it live beside it:
//! - `local`: this replica's own records (commits, purges) and sealing them into blocks;
//! - `receive`: verifying and applying a peer's blocks, and joining any record into the rows;
//! - `history`: `verify()`, compaction, snapshots and their checkpoints.
//!
//! The protocol steps over a link (`open_link`, `handle`, `poll`) are in [`crate::link`].

mod attested;
mod history;
mod local;
mod receive;
mod source;
#[cfg(test)]
mod tests;
pub use attested::Attested;
pub(crate) use attested::SnapshotParts;

pub use source::{BlockSource, NoRows};

use crate::chain::{ChainKey, ChainLog};
use crate::change::Record;
use crate::error::{Error, Reason, Result};
use crate::hlc::{Clock, Hlc};
use crate::identity::{AuthorId, Identity};
use crate::merge::{visible_rows, MemoryRows, RowKey, RowState, RowStore, TableSchema, VisibleRow};
use crate::protocol::{Heads, VersionVector};
use crate::scope::{ScopeId, Subscription, WriterList};
use crate::wire::{Reader, Writer};
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
    /// Join records into merged rows. Off for a host that only verifies, stores and forwards
    /// blocks (a relay): rows are then never built, and such a replica refuses to install or
    /// serve snapshots (a peer behind its checkpoints gets blocks from its `BlockSource`).
    pub merge_rows: bool,
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
            merge_rows: true,
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
    /// Per chain, the furthest seq at which the peer named, as its head, the record this
    /// replica holds there (same hash): it holds this replica's branch that far.
    pub acked: VersionVector,
    pub want: Subscription,
    /// The heads the peer named last that this replica could not check then (it held no
    /// record at that seq yet): counted once it holds the same record there. Not saved.
    pub claims: crate::protocol::Heads,
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
    /// Rows for the host to read again: records a writer list's removals took back, values of
    /// a column registered after peers wrote them.
    pub(crate) revoked_rows: Vec<RowKey>,
    /// Lists adopted so far. Chains and lists are never removed, so `(chains.len(),
    /// lists_added)` changes exactly when what a link may be served can change.
    pub(crate) lists_added: usize,
    pub(crate) rows: S,
    /// Per scope, the newest attestation held and the one its base rows stand at.
    pub(crate) attestations: BTreeMap<ScopeId, attested::Attested>,
    /// Scopes of this replica's whose rows a purge changed since: attested again at the next
    /// `poll` ([`Replica::attest_purged`]).
    pub(crate) attest_due: BTreeSet<ScopeId>,
    /// What the rows hold that the history held does not: the rows as loaded by the host, the
    /// snapshots joined, the records compacted away. `rows` is always `base` joined with every
    /// held record, so the rows can be rebuilt without some of them (a fork's losing branch).
    /// None while nothing but the held history made the rows.
    pub(crate) base: Option<MemoryRows>,
    pub(crate) peers: BTreeMap<AuthorId, PeerInfo>,
    /// For each peer, `edits` as it stood after the peer's entry last changed: a host saves
    /// the peers changed since its last save ([`Replica::peers_changed_since`]), not all.
    pub(crate) peer_edits: BTreeMap<AuthorId, u64>,
    pub(crate) forks: BTreeSet<AuthorId>,
    /// Chains some peer was seen to hold another branch of (its head, its FORK refusal), for
    /// as long as the replica runs: compaction keeps them whole from here (`Replica::horizon`).
    /// Two devices on one key (the case that forks) share a peer id, so an acknowledgement
    /// under that id says nothing of what the other device holds.
    pub(crate) disputed: BTreeSet<ChainKey>,
    /// Which device of its key this replica is, if its host set one (`Replica::set_device`).
    pub(crate) device: Option<[u8; 16]>,
    /// Blocks of a branch this replica held and gave up for a peer's (a fork): sent to that
    /// peer, which then knows of the fork too.
    pub(crate) lost: Vec<crate::chain::Block>,
    /// Per chain, verified blocks kept aside: branches of it that part from the held one at or
    /// below the head the scope's owner attested and do not reach that head yet (any block
    /// that starts on a record held begins one), and blocks that may continue them, arrived
    /// out of order: whether a branch is the attested one is known once it reaches that head
    /// (docs/sync.md sec. 6, "Forks"). Not saved: a peer sends the branch again.
    pub(crate) fork_candidates: BTreeMap<ChainKey, Vec<crate::chain::Block>>,
    /// Chains whose fork this replica decided for its own branch as the owner attested it,
    /// since the link last looked: the peer must get that branch, though it was sent before.
    pub(crate) kept_attested: Vec<(ChainKey, [u8; 64])>,
    /// Bumped when an attestation learned names another record than the one held at its seq:
    /// every link greets its peer again (HELLO), and a peer that holds the attested branch
    /// answers it with its records from the first held, as after a reconnect. The branch it
    /// sent before may have come before the attestation and lost by the lower hash.
    pub(crate) greet_again: u64,
    /// Scopes whose base rows stand at an attestation the newest held contradicts (the owner
    /// signed two branches, docs/sync.md sec. 6): only a snapshot at the newest, named here by
    /// its signature, brings them back onto the branch every replica keeps.
    pub(crate) rebase_due: BTreeMap<ScopeId, [u8; 64]>,
    /// Bumped when a scope is found to need a rebase at a newer attestation: every link that
    /// takes snapshots asks its peer for one again (once per bump, so a peer that cannot serve
    /// it is not asked in a loop).
    pub(crate) rebase_asks: u64,
    /// How many times each chain's records were replaced by another branch: a proof of a fork
    /// sent to a peer before is sent again after (it is another branch now).
    pub(crate) branch_changes: BTreeMap<ChainKey, u64>,
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

impl<S: RowStore> Replica<S> {
    pub fn new(identity: Identity, config: Config, rows: S) -> Self {
        Replica {
            identity,
            clock: Clock::new(),
            config,
            tables: HashMap::new(),
            chains: BTreeMap::new(),
            writer_lists: BTreeMap::new(),
            revoked_rows: Vec::new(),
            lists_added: 0,
            rows,
            attestations: BTreeMap::new(),
            attest_due: BTreeSet::new(),
            base: None,
            peers: BTreeMap::new(),
            peer_edits: BTreeMap::new(),
            forks: BTreeSet::new(),
            disputed: BTreeSet::new(),
            device: None,
            lost: Vec::new(),
            fork_candidates: BTreeMap::new(),
            kept_attested: Vec::new(),
            greet_again: 0,
            rebase_due: BTreeMap::new(),
            rebase_asks: 0,
            branch_changes: BTreeMap::new(),
            redactions: 0,
            edits: 0,
            unmerged: BTreeMap::new(),
            unhashed: BTreeSet::new(),
        }
    }

    pub fn id(&self) -> AuthorId {
        self.identity.id()
    }
    /// Names this device of its key (the host names a new one whenever a key is saved for a
    /// database, so that a copied file or an imported key is another device). Peers count the
    /// acknowledgements of each device of one key apart: two devices on one key may hold two
    /// branches of its chains (a fork), and compaction must wait for both (docs/sync.md
    /// sec. 8).
    pub fn set_device(&mut self, device: [u8; 16]) {
        self.device = Some(device);
    }
    /// Which device of its key this replica is, if its host named one.
    pub fn device(&self) -> Option<[u8; 16]> {
        self.device
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
        // What the host loaded is what history does not give: the base.
        let mut base = MemoryRows::default();
        self.rows.scan(&mut |k, row| {
            base.insert(k.clone(), row.clone());
        });
        self.base = (!base.is_empty()).then_some(base);
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
    /// The rows held history does not give (see the field): what a host saves to rebuild the
    /// rows with the history it holds on open. Empty when the history gives them all.
    pub fn base_rows(&self) -> Option<&MemoryRows> {
        self.base.as_ref()
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
        // Columns it did not know before may hold values peers wrote first: the rows of the
        // table holding some are read again by the host (`take_revoked_rows`).
        let known = self.tables.get(&schema.name).map_or(0, |t| t.columns.len());
        if known > 0 && schema.columns.len() > known {
            self.merge_deferred();
            let new = |c: &u32| *c as usize >= known;
            let mut keys = Vec::new();
            self.rows.scan(&mut |k, row| {
                let has = row.cells.iter().any(|(c, _)| new(c))
                    || row.counters.keys().any(new)
                    || row.sets.keys().any(new)
                    || row.maps.keys().any(new);
                if k.table == schema.name && has {
                    keys.push(k.clone());
                }
            });
            self.revoked_rows.extend(keys);
        }
        self.tables.insert(schema.name.clone(), schema);
        Ok(())
    }
    pub fn table(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(name)
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

    /// The chains held, how far, and the hash of the record each ends at (what HELLO and ACK
    /// carry). Local records are hashed first.
    pub fn heads(&mut self) -> Heads {
        self.hash_deferred();
        self.chains
            .iter()
            .map(|(k, log)| (k.clone(), log.head()))
            .filter(|(_, (s, _))| *s > 0)
            .collect()
    }

    /// Whether `author` may write to `scope` now: its owner, or a writer its lists hold and have
    /// not removed (a scope's members).
    pub fn may_write(&self, author: &AuthorId, scope: &ScopeId) -> bool {
        self.write_limit(author, scope) == u64::MAX
    }

    /// How far `author`'s chain in `scope` may go (docs/sync.md sec. 8, "Revocation"): every
    /// seq for the owner and a listed writer (`u64::MAX`), up to the cut a later list set for
    /// a writer it removed, none (0) for anyone else. It depends on the set of lists held, not
    /// on the order they came in.
    pub fn write_limit(&self, author: &AuthorId, scope: &ScopeId) -> u64 {
        if scope.owner == *author {
            return u64::MAX;
        }
        let Some(lists) = self.writer_lists.get(scope) else {
            return 0;
        };
        let listed = lists
            .values()
            .filter(|l| l.writers.contains(author))
            .map(|l| l.version)
            .max();
        let cut = lists
            .values()
            .filter(|l| listed.is_none_or(|v| l.version >= v))
            .filter_map(|l| l.removed.iter().find(|(a, _)| a == author).map(|(_, c)| *c))
            .min();
        match (listed, cut) {
            (_, Some(cut)) => cut,
            (Some(_), None) => u64::MAX,
            (None, None) => 0,
        }
    }

    /// The version the next writer list of this replica's own scope `name` takes: one past
    /// the highest held.
    pub fn next_writers_version(&self, name: &[u8]) -> u64 {
        let scope = ScopeId::new(self.id(), name);
        self.writer_lists
            .get(&scope)
            .and_then(|m| m.keys().map(|(v, _)| *v).max())
            .unwrap_or(0)
            + 1
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
        let scope = list.scope.clone();
        let removes = !list.removed.is_empty();
        known.insert((list.version, list.sig), list);
        self.lists_added += 1;
        if removes {
            self.take_back_revoked(&scope);
        }
        Ok(true)
    }

    /// As the owner of scope `name`, signs and adopts a list that removes `removed` from its
    /// writers: each may keep its chain in the scope up to what this replica holds of it now
    /// (its cut); its later records are refused, and taken back where they were applied.
    pub fn revoke_writers(
        &mut self,
        name: &[u8],
        version: u64,
        removed: &[AuthorId],
    ) -> WriterList {
        let scope = ScopeId::new(self.id(), name);
        self.catch_up();
        let writers: Vec<AuthorId> = self
            .writer_lists
            .get(&scope)
            .into_iter()
            .flat_map(|m| m.values())
            .flat_map(|l| l.writers.iter().copied())
            .filter(|a| !removed.contains(a) && self.may_write(a, &scope))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let cuts = removed
            .iter()
            .map(|a| {
                let held = self
                    .chains
                    .get(&(*a, scope.clone()))
                    .map_or(0, |l| l.sealed_head().0);
                (*a, held.min(self.write_limit(a, &scope)))
            })
            .collect();
        let list = WriterList::sign_removing(&self.identity, name, version, writers, cuts);
        self.add_writer_list(list.clone())
            .expect("invariant: a list we signed checks");
        list
    }

    /// Rows the host's tables must read again (as after `Event::Applied`) since the last call:
    /// those a writer list's removals took records of back, and those holding values of a
    /// column just registered.
    pub fn take_revoked_rows(&mut self) -> Vec<RowKey> {
        std::mem::take(&mut self.revoked_rows)
    }
    /// Whether [`Replica::take_revoked_rows`] has rows to give.
    pub fn has_rows_to_reread(&self) -> bool {
        !self.revoked_rows.is_empty()
    }

    pub fn writer_lists(&self) -> impl Iterator<Item = &WriterList> {
        self.writer_lists.values().flat_map(|m| m.values())
    }

    /// Which row the table shows for `key`'s table and primary key (docs/sync.md sec. 7, "One
    /// row, one owner"); `None` when no other scope holds a row with that key (the key's own
    /// row, if live, is then the one).
    pub fn key_owner(&self, key: &RowKey) -> Option<crate::owner::KeyOwner> {
        let rows = self.merged_rows();
        if rows.other_scopes(key).is_empty() {
            return None;
        }
        Some(crate::owner::key_owner(rows, key))
    }

    /// The scopes holding a live row of `table` with primary key `pk`, whether the table shows
    /// it or not (sec. 7): where an owner may delete or purge a row its table hides.
    pub fn key_scopes(&mut self, table: &str, pk: &[cairn_value::Value]) -> Vec<ScopeId> {
        self.catch_up();
        let probe = RowKey::new(table, &ScopeId::new(AuthorId([0; 32]), ""), pk);
        let mut scopes = self.rows.other_scopes(&probe);
        scopes.retain(|s| {
            let k = RowKey {
                table: probe.table.clone(),
                scope: s.clone(),
                pk: probe.pk.clone(),
            };
            self.rows.get(&k).is_some_and(|r| r.is_live())
        });
        scopes
    }

    /// Whether a local record in `scope` may write a key the table shows from another scope:
    /// the table named by the scope (sec. 8's convention, `table` or `table/...`) has rows in a
    /// scope other than `scope`. Cheap; when it is false, `shadowed_write` finds nothing.
    pub fn may_shadow(&self, scope: &ScopeId) -> bool {
        let name = scope.name.split(|&b| b == b'/').next().unwrap_or_default();
        let Ok(table) = std::str::from_utf8(name) else {
            return false;
        };
        self.rows.table_elsewhere(table, scope)
    }

    /// The first row the local records appended to each chain after the seq given wrote and
    /// left live, but that its table does not show (another scope's row is the key's, sec. 7):
    /// every replica would hide it. Merges what is deferred first.
    pub fn shadowed_write(
        &mut self,
        since: &[(ChainKey, u64)],
    ) -> Option<(RowKey, crate::owner::KeyOwner)> {
        self.catch_up();
        for (chain, from) in since {
            let Some(log) = self.chains.get(chain) else {
                continue;
            };
            for r in log.pending.iter().filter(|r| r.seq > *from) {
                for op in &r.ops {
                    let k = RowKey::new(&op.table, &chain.1, &op.pk);
                    if !self.rows.get(&k).is_some_and(|row| row.is_live()) {
                        continue;
                    }
                    if let Some(owner) = self.key_owner(&k) {
                        if owner.shown.as_ref() != Some(&k) {
                            return Some((k, owner));
                        }
                    }
                }
            }
        }
        None
    }

    /// The rows of a table as queries see them (one row per key, unique conflicts resolved),
    /// and the rows hidden by a key written in several scopes or by a unique conflict.
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
}
