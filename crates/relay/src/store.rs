//! The relay's disk: one cairn store database holding its identity, every writer list and every
//! block its replica accepted, in their sync byte encodings, and the device keys bound to app
//! users (docs/relay.md sec. 6). On start the stored lists go back through
//! `Replica::add_writer_list`, and each chain's head is set from its last stored block
//! (`Replica::restore_head`); the blocks themselves are read when a client needs them
//! (`Durable::read_blocks`, through [`crate::source::Source`]).

use crate::error::{Error, Result};
use crate::source::{decode_row, encode_row, purges, RelayReplica};
use cairn_store::{Db, Durability, Options, Seek, StdFile, TreeKind};
use cairn_sync::chain::ChainKey;
use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{AuthorId, Block, Checkpoint, Event, Identity, Reason, RowKey, WriterList};
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::path::Path;

pub const FILE_NAME: &str = "relay.cairn";
const STORE_FORMAT: u8 = 1;
const META: &str = "meta";
const WRITERS: &str = "writers";
const BLOCKS: &str = "blocks";
/// Device key -> the app user it is bound to (docs/relay.md sec. 4).
const USERS: &str = "users";
/// Rows purged by stored records: their values are redacted from the blocks served.
const PURGED: &str = "purged";
/// Blocks fed to `receive_blocks` at once (another relay's, on PostgreSQL): one signature
/// batch each.
const LOAD_BATCH: usize = 256;

/// Where the relay keeps what it accepted: the cairn file here, or PostgreSQL (`pg`, feature
/// `postgres`). The core calls it on its own thread, between batches; the replica's block
/// source ([`crate::source::Source`]) reads through it while a link is served.
pub trait Durable {
    /// Loads what the replica needs at start: every writer list (verified again: they are few)
    /// and each chain's head (the last stored block's seq, hash and signature: trusted as
    /// stored, since it was verified before it was stored). The blocks stay in the store.
    fn load_into(&mut self, replica: &mut RelayReplica, now_ms: u64) -> Result<LoadReport>;
    /// Stores, in one transaction, what the replica holds and the store does not, with the rows
    /// its records purge. Returns those rows.
    fn persist(&mut self, replica: &RelayReplica) -> Result<Vec<RowKey>>;
    /// Takes in what other relays sharing the store added (ids `from..=to` of their commit);
    /// nothing for a store only this relay writes.
    fn refresh(
        &mut self,
        _replica: &mut RelayReplica,
        _now_ms: u64,
        _from: i64,
        _to: i64,
    ) -> Result<LoadReport> {
        Ok(LoadReport::default())
    }
    /// The last seq of chain `key` in the store (0 if none).
    fn stored_head(&self, key: &ChainKey) -> u64;
    /// Stored blocks of chain `key`, in seq order, from the one holding record `from` on, none
    /// past `upto`, with about `max_records` records (at least one block if there is one), each
    /// with the length of its encoding. A stored block that does not decode is `CORRUPT`.
    fn read_blocks(
        &mut self,
        key: &ChainKey,
        from: u64,
        upto: u64,
        max_records: usize,
    ) -> Result<Vec<(Block, usize)>>;
    /// Binds device `key` to the app's `user` unless it is bound already; returns the user it
    /// is bound to now (another user's name: the key is not this user's).
    fn bind_key(&mut self, key: &AuthorId, user: &str) -> Result<String>;
    /// Whether a failure may pass (a database server that restarts): the core then closes its
    /// connections, refuses new ones and retries, instead of stopping. False for the file.
    fn recoverable(&self) -> bool {
        false
    }
    fn close(self: Box<Self>) -> Result<()>;
}

pub struct Store {
    db: Db<StdFile>,
    /// Per chain, the last seq on disk: blocks past it are new.
    heads: HashMap<ChainKey, u64>,
    /// Signatures of the writer lists on disk.
    lists: HashSet<[u8; 64]>,
}

/// What loading found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadReport {
    pub lists: usize,
    /// Blocks read: at start one per chain (its head); on a refresh, those fed to the replica.
    pub blocks: usize,
    /// Records held: at start, the sum of the chains' heads; on a refresh, records applied.
    pub records: usize,
    /// Stored items the replica refused on the way back in (a damaged or tampered list, a block
    /// of another relay that does not follow what this one holds).
    pub refused: usize,
    /// Rows purged by stored records (at start all of them; on a refresh, all again).
    pub purged: Vec<RowKey>,
}

/// The blocks tree key: the chain's hash (author and scope, which may be 1 KiB, do not fit in
/// a key) then the first seq, big-endian so a chain's blocks sort in seq order.
fn block_key(author_scope: &ChainKey, first_seq: u64) -> [u8; 40] {
    block_key_of(&chain_hash(author_scope), first_seq)
}

fn block_key_of(chain: &[u8; 32], first_seq: u64) -> [u8; 40] {
    let mut key = [0u8; 40];
    key[..32].copy_from_slice(chain);
    key[32..].copy_from_slice(&first_seq.to_be_bytes());
    key
}

/// A stored block, decoded; one that does not decode is `CORRUPT` (the relay wrote it).
pub fn stored_block(bytes: &[u8]) -> Result<Block> {
    Block::from_bytes(bytes)
        .map_err(|e| Error::Corrupt(format!("a stored block does not decode: {e}")))
}

/// BLAKE3 of `author || scope encoding`: a chain's fixed-size name in a store.
pub fn chain_hash(key: &ChainKey) -> [u8; 32] {
    let mut w = Writer::new();
    w.raw(&key.0 .0);
    key.1.encode(&mut w);
    *blake3::hash(&w.buf).as_bytes()
}

/// Feeds decoded blocks to the replica in batches, counting what it applied and refused.
pub fn feed(replica: &mut RelayReplica, now_ms: u64, blocks: Vec<Block>, report: &mut LoadReport) {
    let mut it = blocks.into_iter().peekable();
    while it.peek().is_some() {
        let batch: Vec<Block> = it.by_ref().take(LOAD_BATCH).collect();
        report.blocks += batch.len();
        for e in replica.receive_blocks(now_ms, batch) {
            match e {
                Event::Applied { records, .. } => report.records += records,
                Event::Rejected { reason, .. } if reason != Reason::Replay => report.refused += 1,
                _ => {}
            }
        }
    }
}

/// The blocks and lists a replica holds past what a store has (`heads`, `lists`).
pub fn unsaved<'a>(
    replica: &'a RelayReplica,
    heads: &HashMap<ChainKey, u64>,
    lists: &HashSet<[u8; 64]>,
) -> (Vec<&'a WriterList>, Vec<(ChainKey, &'a Block)>) {
    let new_lists = replica
        .writer_lists()
        .filter(|l| !lists.contains(&l.sig))
        .collect();
    let mut new_blocks = Vec::new();
    for (key, log) in replica.chains() {
        let on_disk = heads.get(key).copied().unwrap_or(0);
        if log.head().0 <= on_disk {
            continue;
        }
        new_blocks.extend(
            log.blocks
                .iter()
                .filter(|b| b.last_seq() > on_disk)
                .map(|b| (key.clone(), b)),
        );
    }
    (new_lists, new_blocks)
}

impl Store {
    /// Opens `dir/relay.cairn`, creating the directory, the file and a new relay identity when
    /// absent. Returns the store and the relay's identity.
    pub fn open(dir: &Path) -> Result<(Store, Identity)> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
        let path = dir.join(FILE_NAME);
        let opts = Options {
            durability: Durability::Full,
            ..Options::default()
        };
        let db = if path.exists() {
            Db::open(StdFile::open(&path, false)?, opts)?
        } else {
            let db = Db::create(StdFile::open(&path, true)?, opts)?;
            let identity = Identity::generate(&mut rand_core::OsRng);
            let mut tx = db.begin_write()?;
            let meta = tx.create_tree(META, TreeKind::Table)?;
            tx.insert(meta, b"format", &[STORE_FORMAT])?;
            tx.insert(meta, b"identity", &identity.export())?;
            tx.create_tree(WRITERS, TreeKind::Table)?;
            tx.create_tree(BLOCKS, TreeKind::Table)?;
            tx.create_tree(USERS, TreeKind::Table)?;
            tx.create_tree(PURGED, TreeKind::Table)?;
            tx.commit()?;
            db
        };
        // A file made before users were bound, or purges kept, lacks their trees: trees that
        // older relays ignore, added here, so the format stays 1.
        for tree in [USERS, PURGED] {
            if db.begin_read()?.open_tree(tree).is_err() {
                let mut tx = db.begin_write()?;
                tx.create_tree(tree, TreeKind::Table)?;
                tx.commit()?;
            }
        }
        let r = db.begin_read()?;
        let meta = r.open_tree(META)?;
        match r.get(meta, b"format")?.as_deref() {
            Some([STORE_FORMAT]) => {}
            other => {
                return Err(Error::Corrupt(format!(
                    "relay store format {other:?} is not supported (expected [{STORE_FORMAT}])"
                )))
            }
        }
        let key = r
            .get(meta, b"identity")?
            .ok_or_else(|| Error::Corrupt("relay store without an identity".into()))?;
        let identity =
            Identity::import(&key).map_err(|e| Error::Corrupt(format!("relay identity: {e}")))?;
        drop(r);
        Ok((
            Store {
                db,
                heads: HashMap::new(),
                lists: HashSet::new(),
            },
            identity,
        ))
    }
}

impl Durable for Store {
    /// Feeds every stored list to the replica's verification path, then sets each chain's
    /// head from its last stored block: found by seeking from the end of the blocks tree,
    /// chain by chain, so a start reads one block per chain whatever the history's length.
    fn load_into(&mut self, replica: &mut RelayReplica, _now_ms: u64) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        let r = self.db.begin_read()?;
        let t = r.open_tree(WRITERS)?;
        let mut range = r.range(t, Bound::Unbounded, Bound::Unbounded, false)?;
        while range.next()? {
            let (_, value) = range.entry()?;
            let mut rd = Reader::new(value);
            let list = WriterList::decode(&mut rd).and_then(|l| rd.finish().map(|_| l));
            match list.map(|l| (l.sig, replica.add_writer_list(l))) {
                Ok((sig, Ok(_))) => {
                    self.lists.insert(sig);
                    report.lists += 1;
                }
                _ => report.refused += 1,
            }
        }
        let t = r.open_tree(PURGED)?;
        let mut range = r.range(t, Bound::Unbounded, Bound::Unbounded, false)?;
        while range.next()? {
            report.purged.push(decode_row(range.entry()?.1)?);
        }
        let t = r.open_tree(BLOCKS)?;
        let mut c = r.cursor(t)?;
        let mut at = c.last()?;
        while at {
            let (key, value) = c.entry()?;
            let mut chain = [0u8; 32];
            chain.copy_from_slice(
                key.get(..32).ok_or_else(|| {
                    Error::Corrupt("a blocks key shorter than a chain hash".into())
                })?,
            );
            let head = stored_block(value)?;
            let cp = Checkpoint::of_block(&head);
            report.blocks += 1;
            report.records += cp.seq as usize;
            self.heads.insert(head.key(), cp.seq);
            replica
                .restore_head(cp)
                .expect("invariant: the relay's replica has a block source");
            at = c.seek(&block_key_of(&chain, 0), Seek::Lt)?;
        }
        Ok(report)
    }

    fn stored_head(&self, key: &ChainKey) -> u64 {
        self.heads.get(key).copied().unwrap_or(0)
    }

    fn read_blocks(
        &mut self,
        key: &ChainKey,
        from: u64,
        upto: u64,
        max_records: usize,
    ) -> Result<Vec<(Block, usize)>> {
        let chain = chain_hash(key);
        let r = self.db.begin_read()?;
        let t = r.open_tree(BLOCKS)?;
        // The block holding `from`: the last one of the chain starting at or before it.
        let mut c = r.cursor(t)?;
        let start = match c.seek(&block_key_of(&chain, from), Seek::Le)? {
            true => match c.key() {
                Some(k) if k.len() == 40 && k[..32] == chain => {
                    u64::from_be_bytes(k[32..].try_into().expect("invariant: 8 bytes"))
                }
                _ => 0,
            },
            false => 0,
        };
        let lo = block_key_of(&chain, start);
        let hi = block_key_of(&chain, upto);
        let mut range = r.range(t, Bound::Included(&lo[..]), Bound::Included(&hi[..]), false)?;
        let mut out = Vec::new();
        let mut n = 0;
        while n < max_records.max(1) && range.next()? {
            let (_, value) = range.entry()?;
            let b = stored_block(value)?;
            if b.last_seq() > upto {
                break;
            }
            n += b.records.len();
            out.push((b, value.len()));
        }
        Ok(out)
    }

    /// Writes, in one commit, every writer list and block the replica holds that is not on disk
    /// yet, and the rows they purge.
    fn persist(&mut self, replica: &RelayReplica) -> Result<Vec<RowKey>> {
        let (new_lists, new_blocks) = unsaved(replica, &self.heads, &self.lists);
        if new_lists.is_empty() && new_blocks.is_empty() {
            return Ok(Vec::new());
        }
        let purged = purges(new_blocks.iter().map(|(_, b)| *b));
        let mut tx = self.db.begin_write()?;
        let wt = tx.open_tree(WRITERS)?;
        for l in &new_lists {
            let mut w = Writer::new();
            l.encode(&mut w);
            tx.insert(wt, blake3::hash(&w.buf).as_bytes(), &w.buf)?;
        }
        let bt = tx.open_tree(BLOCKS)?;
        for (key, b) in &new_blocks {
            tx.insert(bt, &block_key(key, b.first_seq()), &b.to_bytes())?;
        }
        let pt = tx.open_tree(PURGED)?;
        for k in &purged {
            let row = encode_row(k);
            tx.insert(pt, blake3::hash(&row).as_bytes(), &row)?;
        }
        tx.commit()?;
        for l in new_lists {
            self.lists.insert(l.sig);
        }
        for (key, b) in new_blocks {
            let h = self.heads.entry(key).or_insert(0);
            *h = (*h).max(b.last_seq());
        }
        Ok(purged)
    }

    fn bind_key(&mut self, key: &AuthorId, user: &str) -> Result<String> {
        let r = self.db.begin_read()?;
        let t = r.open_tree(USERS)?;
        if let Some(v) = r.get(t, &key.0)? {
            return String::from_utf8(v)
                .map_err(|_| Error::Corrupt("a bound user that is not UTF-8".into()));
        }
        drop(r);
        let mut tx = self.db.begin_write()?;
        let t = tx.open_tree(USERS)?;
        tx.insert(t, &key.0, user.as_bytes())?;
        tx.commit()?;
        Ok(user.to_string())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}
