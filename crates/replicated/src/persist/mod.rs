//! The replica's state in the database's own trees (docs/sync.md, "In the database"):
//!
//! | tree | key | value |
//! |---|---|---|
//! | `SYSTEM_TREES + 1` meta | `layout`, `author`, `owner`, `clock`, `subscription` | u8 layout, this database's author (the key pair is in the key store), owner, u64le HLC, what this replica asks for |
//! | `SYSTEM_TREES + 1` meta | `peer/`, `author` | a peer's acknowledged version vector and what it asks for |
//! | the store's root bytes ([`Storage::root_meta`]) | | small pending records, until they reach [`TAIL_BYTES`] |
//! | `SYSTEM_TREES + 2` rows | `bytes table`, `scope`, pk encoding | `RowState` encoding, as of the last time history was dropped |
//! | `SYSTEM_TREES + 3` log | `author`, `scope`, `u8 kind`, `u64be seq` | checkpoint (0), block (1), pending record (2), run of pending records (3) |
//! | `SYSTEM_TREES + 4` writers | `scope`, `u64be version`, `sig` | writer list |
//!
//! Writes are incremental: after each operation only the blocks and records appended since the
//! last save (tracked per chain in [`Saved`]) and the small meta values that changed are
//! written. The merged rows are written whole only when history is dropped (compaction, a
//! snapshot); on open they are rebuilt from those rows and the history held since.
//!
//! The secret key is never written here: the host's key store ([`crate::KeyStore`]) holds it,
//! and a layout-5 database, which held it under meta `identity`, is migrated at attach
//! (`State::settle_key`).
//!
//! Over a volatile store (memory) a local commit writes nothing here: its records wait in the
//! replica until the store is read whole or a sync call begins (`State::defer`), and one save
//! then writes them all (docs/sync.md, "In memory").

mod load;
mod save;
mod tail;

use crate::{KeyStore, State};
use cairn_sql::SYSTEM_TREES;
use cairn_sql::{Error, Result, Storage};
use cairn_sync::wire::Writer;
use cairn_sync::{AuthorId, ChainKey, ChainLog, Identity, RowKey, ScopeId, Subscription};
use std::collections::BTreeMap;
use std::ops::Bound;
use tail::{varint_len, Tail};

pub(crate) use save::{can_save_written, end_written, save, save_written};

const META: u64 = SYSTEM_TREES + 1;
const ROWS: u64 = SYSTEM_TREES + 2;
const LOG: u64 = SYSTEM_TREES + 3;
const WRITERS: u64 = SYSTEM_TREES + 4;

/// The layout of these trees this code writes (meta key `layout`). A database whose sync state
/// has another layout, or none, is refused at attach (`SYNC_LAYOUT`), but for
/// [`KEY_INSIDE`], which attach migrates: the older layouts were pre-release and are not read.
const LAYOUT: u8 = 6;
/// The layout that kept the secret key in the file (meta `identity`); layout 6 less that.
const KEY_INSIDE: u8 = 5;
/// Meta keys of peers: this prefix and the peer's id.
const PEER: &[u8] = b"peer/";
/// Meta keys of attestations: this prefix and the scope's encoding; the value is `u8 kind`
/// (0: the newest only, 1: the newest, which the base rows also stand at, 2: the newest, then
/// the one the base rows stand at) and the attestations (docs/sync.md 10b).
const ATTEST: &[u8] = b"attest/";
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
/// Consecutive pending records moved together from the tail; key:
/// the first one's seq; value: `varint n`, then n x `bytes` record.
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
    /// The attestations saved, by scope: the newest one's signature and that of the one the
    /// base rows stand at.
    attest: BTreeMap<ScopeId, ([u8; 64], Option<[u8; 64]>)>,
    /// `Replica::edits` when the peers were last saved: a save writes those changed since.
    peers_at: u64,
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
    /// Runs of pending records saved together in the log: chain, first and last seq.
    runs: Vec<(ChainKey, u64, u64)>,
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
    matches!(store.get(META, b"layout"), Ok(Some(_)))
        || matches!(store.get(META, b"identity"), Ok(Some(_)))
}

/// What the key store and the database's meta need before the replica may sign: made at load,
/// saved by [`State::settle_key`] in a storage transaction.
pub(crate) enum KeyFix {
    /// A layout-5 database: its key moves from the file to the key store.
    Migrate,
    /// The key store holds no key of the database's author (a copy, an import, a key file
    /// lost): the replica took a new one, to be saved.
    New { previous: AuthorId },
    /// A database saved before devices were named (no meta `device`): the replica took a new
    /// device name, to be saved beside `author`. Named at the first open for writing, so that
    /// two copies of such a database (a file and its key store copied together) are two peers.
    Device,
}

/// A new name for this device of its key (`Replica::set_device`): made whenever a key pair is
/// saved for the database, so that a database attached elsewhere (a copy, an import) or a key
/// imported on another device is another device to its peers.
fn new_device() -> [u8; 16] {
    let mut d = [0; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut d);
    d
}

/// The device saved with the key pair (meta `device`), or None for a database saved before
/// devices were named (`identity_of` then names one, `KeyFix::Device`).
fn device_of(store: &dyn Storage) -> Result<Option<[u8; 16]>> {
    match store.get(META, b"device")? {
        None => Ok(None),
        Some(b) => Ok(Some(
            b.as_slice().try_into().map_err(|e| corrupt("device", e))?,
        )),
    }
}

/// The key pair of a database with sync state, the device it names, and what must be saved
/// before it is used.
type Loaded = (Identity, Option<[u8; 16]>, Option<KeyFix>);

fn identity_of(store: &dyn Storage, keys: &mut dyn KeyStore) -> Result<Loaded> {
    if check_layout(store.get(META, b"layout")?)? == KEY_INSIDE {
        let b = store
            .get(META, b"identity")?
            .ok_or_else(|| corrupt("identity", "missing"))?;
        let identity = Identity::import(&b).map_err(|e| corrupt("identity", e))?;
        return Ok((identity, Some(new_device()), Some(KeyFix::Migrate)));
    }
    let a = store
        .get(META, b"author")?
        .ok_or_else(|| corrupt("author", "missing"))?;
    let author = AuthorId(a.as_slice().try_into().map_err(|e| corrupt("author", e))?);
    // Bytes that are not a key, or another author's key, are not this database's: it signs
    // with a new key, never with one its history does not name.
    if let Some(b) = keys.load()? {
        if let Ok(identity) = Identity::import(&b) {
            if identity.id() == author {
                return Ok(match device_of(store)? {
                    Some(d) => (identity, Some(d), None),
                    None => (identity, Some(new_device()), Some(KeyFix::Device)),
                });
            }
        }
    }
    let fresh = Identity::generate(&mut rand_core::OsRng);
    Ok((
        fresh,
        Some(new_device()),
        Some(KeyFix::New { previous: author }),
    ))
}

/// Saves `identity` as this database's: the secret to the key store, then its author and the
/// device in the meta tree, inside the caller's transaction (a crash before the commit leaves a
/// key the database does not name, which the next attach replaces).
fn save_key(
    store: &mut dyn Storage,
    keys: &mut dyn KeyStore,
    identity: &Identity,
    device: &[u8; 16],
) -> Result<()> {
    keys.save(&identity.export())?;
    store.put(META, b"author", &identity.id().0)?;
    store.put(META, b"device", device)
}

/// Refuses a sync state of any layout but [`LAYOUT`] and [`KEY_INSIDE`] (`SYNC_LAYOUT`): a
/// newer one this build cannot read, or an older one (no `layout` key: layout 1) from before
/// the first release, which it does not read. Returns the layout.
fn check_layout(layout: Option<Vec<u8>>) -> Result<u8> {
    let older = |l: &str| {
        Error::Sync(
            "SYNC_LAYOUT",
            format!(
                "the database's sync state is of an older pre-release layout ({l}) that this version of cairn does not read (it reads layouts {KEY_INSIDE} and {LAYOUT})"
            ),
        )
    };
    match layout.as_deref() {
        Some(&[l]) if l == LAYOUT || l == KEY_INSIDE => Ok(l),
        None => Err(older("1")),
        Some(&[l]) if l < LAYOUT => Err(older(&l.to_string())),
        Some(l) => Err(Error::Sync(
            "SYNC_LAYOUT",
            format!(
                "the sync state was saved in layout {l:?}, newer than this version of cairn reads ({LAYOUT}); open it with a newer cairn"
            ),
        )),
    }
}

/// Creates the trees and saves `identity` (the key pair made at attach, or a new one) with a
/// new device, when the database has no sync state yet. Inside the caller's transaction.
pub(crate) fn create(
    store: &mut dyn Storage,
    keys: &mut dyn KeyStore,
    spare: Option<Identity>,
) -> Result<(Identity, [u8; 16])> {
    for t in [META, ROWS, LOG, WRITERS] {
        store.create_tree(t)?;
    }
    store.put(META, b"layout", &[LAYOUT])?;
    let identity = spare.unwrap_or_else(|| Identity::generate(&mut rand_core::OsRng));
    let device = new_device();
    save_key(store, keys, &identity, &device)?;
    Ok((identity, device))
}

impl State {
    /// Reads the key pair of a database with sync state (from the key store, or for layout 5
    /// from the file) and the device it names, noting in `key_fix` what must be saved before it
    /// is used.
    pub(crate) fn load_identity(
        &mut self,
        store: &dyn Storage,
    ) -> Result<(Identity, Option<[u8; 16]>)> {
        let (identity, device, fix) = identity_of(store, &mut *self.keys)?;
        self.key_fix = fix;
        Ok((identity, device))
    }

    /// Saves what `key_fix` says, inside the caller's transaction: a layout-5 key moved to the
    /// key store (the free pages that held it are then owed a zeroing, `erase_owed`), a device
    /// named for a database saved before devices were, or a new key made for a database whose author's key is not here. A new author of a database its
    /// previous author wrote to keeps writing to that author's scopes (meta `owner`, unless one
    /// is set), as a writer the owner must list.
    pub(crate) fn settle_key(&mut self, store: &mut dyn Storage) -> Result<()> {
        let Some(fix) = self.key_fix.take() else {
            return Ok(());
        };
        let r = (|| {
            let replica = self
                .replica
                .as_ref()
                .expect("invariant: a fix has a replica");
            let device = replica
                .device()
                .expect("invariant: a fix names a new device");
            match &fix {
                // The key store already holds this key: only its device is new.
                KeyFix::Device => store.put(META, b"device", &device)?,
                KeyFix::Migrate => {
                    save_key(store, &mut *self.keys, replica.identity(), &device)?;
                    store.delete(META, b"identity")?;
                    store.put(META, b"layout", &[LAYOUT])?;
                }
                KeyFix::New { previous } => {
                    save_key(store, &mut *self.keys, replica.identity(), &device)?;
                    let wrote = replica
                        .chains()
                        .any(|((a, s), _)| a == previous || s.owner == *previous);
                    if self.owner.is_none() && wrote {
                        put_owner(store, previous)?;
                        self.owner = Some(*previous);
                    }
                    // The previous author's unsealed records were left out at load: every
                    // chain is written again, as after a purge, without them.
                    self.saved.redactions = replica.redactions().wrapping_add(1);
                    save(store, replica, &mut self.saved, None, false)?;
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                if matches!(fix, KeyFix::Migrate) {
                    self.erase_owed = true;
                }
                Ok(())
            }
            Err(e) => {
                self.key_fix = Some(fix);
                Err(e)
            }
        }
    }
}

/// Replaces this database's key pair with `identity`, as a new device of that key (inside the
/// caller's transaction).
pub(crate) fn put_identity(
    store: &mut dyn Storage,
    keys: &mut dyn KeyStore,
    identity: &Identity,
) -> Result<()> {
    save_key(store, keys, identity, &new_device())
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
