//! Blocks: consecutive records of one chain sealed by one signature over the chain head they end
//! at (docs/sync.md sec. 5), checkpoints (a head and its signature, what compaction keeps), and
//! the per-chain log a replica stores.

use crate::change::Record;
use crate::error::{Error, Reason, Result};
use crate::identity::{AuthorId, Identity};
use crate::scope::ScopeId;
use crate::wire::{Hash, Reader, Writer, ZERO_HASH};
use ed25519_dalek::{Signature, VerifyingKey};

pub const BLOCK_FORMAT: u8 = 1;
pub const MAX_BLOCK_RECORDS: u64 = 65_535;
const HEAD_TAG: &[u8] = b"cairn-sync head v1";

/// The bytes an author signs to vouch for its chain up to `seq`.
pub fn head_message(author: &AuthorId, scope: &ScopeId, seq: u64, hash: &Hash) -> Vec<u8> {
    let mut w = Writer::new();
    w.raw(HEAD_TAG);
    w.raw(&author.0);
    scope.encode(&mut w);
    w.u64le(seq);
    w.raw(hash);
    w.buf
}

/// `(author, scope)`: one chain.
pub type ChainKey = (AuthorId, ScopeId);

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub author: AuthorId,
    pub scope: ScopeId,
    /// Records in seq order, consecutive, each `prev` the hash of the one before.
    pub records: Vec<Record>,
    pub sig: [u8; 64],
}

impl Block {
    /// Seals records (non-empty, consecutive) with the author's key.
    pub fn seal(identity: &Identity, scope: ScopeId, records: Vec<Record>) -> Block {
        assert!(!records.is_empty(), "invariant: a block holds a record");
        let last = records.last().expect("invariant: non-empty");
        let sig = identity.sign(&head_message(&identity.id(), &scope, last.seq, &last.hash));
        Block {
            author: identity.id(),
            scope,
            records,
            sig,
        }
    }

    pub fn first_seq(&self) -> u64 {
        self.records.first().map_or(0, |r| r.seq)
    }
    pub fn last_seq(&self) -> u64 {
        self.records.last().map_or(0, |r| r.seq)
    }
    pub fn prev_hash(&self) -> Hash {
        self.records.first().map_or(ZERO_HASH, |r| r.prev)
    }
    pub fn last_hash(&self) -> Hash {
        self.records.last().map_or(ZERO_HASH, |r| r.hash)
    }
    pub fn head_message(&self) -> Vec<u8> {
        head_message(
            &self.author,
            &self.scope,
            self.last_seq(),
            &self.last_hash(),
        )
    }
    pub fn key(&self) -> ChainKey {
        (self.author, self.scope.clone())
    }
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// Non-empty, starting at seq 1 or later, seqs consecutive and each record linked to the
    /// one before. (Hashes are computed by `decode`; this checks what a caller could build.)
    pub fn is_well_formed(&self) -> bool {
        let Some(first) = self.records.first() else {
            return false;
        };
        first.seq >= 1
            && (first.seq > 1 || first.prev == ZERO_HASH)
            && self
                .records
                .windows(2)
                .all(|w| w[1].seq == w[0].seq.wrapping_add(1) && w[1].prev == w[0].hash)
    }

    pub fn check_signature(&self) -> Result<()> {
        if self.author.verify(&self.head_message(), &self.sig) {
            Ok(())
        } else {
            Err(Error::reject(Reason::BadSignature, "block signature"))
        }
    }

    /// The same signature still covers the records from `from_seq` on (the head does not
    /// change), so a block can be cut to what a peer lacks.
    pub fn suffix(&self, from_seq: u64) -> Option<Block> {
        let skip = from_seq.checked_sub(self.first_seq())? as usize;
        if skip >= self.records.len() {
            return None;
        }
        Some(Block {
            author: self.author,
            scope: self.scope.clone(),
            records: self.records[skip..].to_vec(),
            sig: self.sig,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        self.encode_from(self.first_seq(), w);
    }

    /// Encodes the block cut to the records from `from_seq` on (see `suffix`), without
    /// copying them. `from_seq` must be within the block.
    pub fn encode_from(&self, from_seq: u64, w: &mut Writer) {
        let skip = from_seq.saturating_sub(self.first_seq()) as usize;
        let records = &self.records[skip.min(self.records.len().saturating_sub(1))..];
        w.u8(BLOCK_FORMAT);
        w.raw(&self.author.0);
        self.scope.encode(w);
        w.varint(records.first().map_or(0, |r| r.seq));
        w.raw(&records.first().map_or(ZERO_HASH, |r| r.prev));
        w.varint(records.len() as u64);
        for r in records {
            r.encode(w);
        }
        w.raw(&self.sig);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.buf
    }

    /// Decodes a block and recomputes every record hash (the chain inside the block is then
    /// consistent by construction; the signature and the link to what the receiver holds are
    /// checked by the receiver).
    pub fn decode(r: &mut Reader) -> Result<Block> {
        if r.u8()? != BLOCK_FORMAT {
            return Err(Error::Malformed("unsupported block format".into()));
        }
        let author = AuthorId(r.array()?);
        let scope = ScopeId::decode(r)?;
        let first_seq = r.varint()?;
        if first_seq == 0 {
            return Err(Error::Malformed("block starts at seq 0".into()));
        }
        let mut prev: Hash = r.array()?;
        if first_seq == 1 && prev != ZERO_HASH {
            return Err(Error::Malformed("first record with a predecessor".into()));
        }
        let n = r.count(9, MAX_BLOCK_RECORDS)? as u64;
        if n == 0 {
            return Err(Error::Malformed("empty block".into()));
        }
        if first_seq.checked_add(n).is_none() {
            return Err(Error::Malformed("seq overflows".into()));
        }
        let mut records = Vec::with_capacity(n as usize);
        for i in 0..n {
            let rec = Record::decode(r, &author, &scope, first_seq + i, prev)?;
            prev = rec.hash;
            records.push(rec);
        }
        let sig = r.array()?;
        Ok(Block {
            author,
            scope,
            records,
            sig,
        })
    }

    pub fn from_bytes(b: &[u8]) -> Result<Block> {
        let mut r = Reader::new(b);
        let block = Block::decode(&mut r)?;
        r.finish()?;
        Ok(block)
    }
}

/// Checks several blocks' signatures with one batch verification; on failure, finds which fail
/// one by one. Returns one result per block.
pub fn verify_signatures(blocks: &[&Block]) -> Vec<Result<()>> {
    if blocks.len() < 2 {
        return blocks.iter().map(|b| b.check_signature()).collect();
    }
    let messages: Vec<Vec<u8>> = blocks.iter().map(|b| b.head_message()).collect();
    let mut keys = Vec::with_capacity(blocks.len());
    for b in blocks {
        match VerifyingKey::from_bytes(&b.author.0) {
            Ok(k) => keys.push(k),
            // A bad key fails the batch anyway; sort it out one by one.
            Err(_) => return blocks.iter().map(|b| b.check_signature()).collect(),
        }
    }
    let sigs: Vec<Signature> = blocks
        .iter()
        .map(|b| Signature::from_bytes(&b.sig))
        .collect();
    let msgs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    if ed25519_dalek::verify_batch(&msgs, &sigs, &keys).is_ok() {
        blocks.iter().map(|_| Ok(())).collect()
    } else {
        blocks.iter().map(|b| b.check_signature()).collect()
    }
}

/// A verified chain head with the signature that vouches for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub author: AuthorId,
    pub scope: ScopeId,
    pub seq: u64,
    pub hash: Hash,
    pub sig: [u8; 64],
}

impl Checkpoint {
    pub fn check(&self) -> Result<()> {
        if self.author.verify(
            &head_message(&self.author, &self.scope, self.seq, &self.hash),
            &self.sig,
        ) {
            Ok(())
        } else {
            Err(Error::reject(Reason::BadSignature, "checkpoint signature"))
        }
    }
    pub fn of_block(b: &Block) -> Checkpoint {
        Checkpoint {
            author: b.author,
            scope: b.scope.clone(),
            seq: b.last_seq(),
            hash: b.last_hash(),
            sig: b.sig,
        }
    }
    pub fn encode(&self, w: &mut Writer) {
        w.raw(&self.author.0);
        self.scope.encode(w);
        w.varint(self.seq);
        w.raw(&self.hash);
        w.raw(&self.sig);
    }
    pub fn decode(r: &mut Reader) -> Result<Checkpoint> {
        Ok(Checkpoint {
            author: AuthorId(r.array()?),
            scope: ScopeId::decode(r)?,
            seq: r.varint()?,
            hash: r.array()?,
            sig: r.array()?,
        })
    }
}

/// What a replica keeps of one chain: a checkpoint below which history was compacted (or came
/// from a snapshot), the verified blocks after it, and, for its own chains, records not sealed
/// yet: hashed ones in `pending`, then the local commits' records not hashed yet, kept only as
/// their encodings (`written`) until `Replica::hash_deferred` decodes them into `pending`.
#[derive(Debug, Clone, Default)]
pub struct ChainLog {
    pub base: Option<Checkpoint>,
    pub blocks: Vec<Block>,
    pub pending: Vec<Record>,
    /// The records `Replica::commit_written` wrote that are not hashed yet, after every one of
    /// `pending`, by seq, ascending: each one's seq, HLC and encoding (which of `written_bufs`
    /// holds it, where it starts and where it ends). 32 bytes a record, where a `Record` would
    /// take 104 (a chain holds thousands between syncs). Kept with the chain so that a local
    /// commit finds its chain once.
    pub(crate) written: Vec<Written>,
    /// Those encodings: small ones one after the other in shared buffers (one allocation for
    /// many single-row commits rather than one each), a large one in the buffer its writer
    /// filled (not copied).
    pub(crate) written_bufs: Vec<Vec<u8>>,
    /// Whether the chain's key is in the replica's `unmerged` map (and so needs no search
    /// there when a local commit appends to it). (It is in `unhashed` while `written` holds a
    /// record.)
    pub(crate) in_unmerged: bool,
}

/// A local record not hashed yet: see [`ChainLog`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written {
    pub seq: u64,
    pub hlc: u64,
    pub buf: u32,
    pub from: u32,
    pub to: u32,
}

impl Written {
    /// Its encoding, in its chain's `written_bufs`.
    pub(crate) fn bytes<'a>(&self, bufs: &'a [Vec<u8>]) -> &'a [u8] {
        &bufs[self.buf as usize][self.from as usize..self.to as usize]
    }
}

impl ChainLog {
    /// The last verified (sealed) seq and hash.
    pub fn sealed_head(&self) -> (u64, Hash) {
        if let Some(b) = self.blocks.last() {
            (b.last_seq(), b.last_hash())
        } else if let Some(c) = &self.base {
            (c.seq, c.hash)
        } else {
            (0, ZERO_HASH)
        }
    }
    /// The encoding of pending record `seq` as `Replica::commit_written` wrote it, while it is
    /// not hashed yet (such a record's `ops` are empty until it is).
    pub fn written_bytes(&self, seq: u64) -> Option<&[u8]> {
        let w = &self.written;
        // Appended in seq order: the newest is the one asked for most.
        let i = match w.last() {
            Some(x) if x.seq == seq => w.len() - 1,
            _ => w.binary_search_by_key(&seq, |x| x.seq).ok()?,
        };
        Some(self.bytes_of(&w[i]))
    }
    pub(crate) fn bytes_of(&self, w: &Written) -> &[u8] {
        w.bytes(&self.written_bufs)
    }
    /// The local records not hashed yet: their seqs, HLCs and encodings, by seq.
    pub fn written(&self) -> impl Iterator<Item = (u64, u64, &[u8])> {
        self.written
            .iter()
            .map(move |w| (w.seq, w.hlc, self.bytes_of(w)))
    }
    /// How many records are not sealed yet (hashed or not).
    pub fn unsealed(&self) -> usize {
        self.pending.len() + self.written.len()
    }
    /// The last record held, sealed or not (a record not hashed yet with a zero hash).
    pub fn head(&self) -> (u64, Hash) {
        if let Some(w) = self.written.last() {
            return (w.seq, ZERO_HASH);
        }
        match self.pending.last() {
            Some(r) => (r.seq, r.hash),
            None => self.sealed_head(),
        }
    }
    /// The lowest seq whose record is still held (records below it were compacted).
    pub fn first_held(&self) -> u64 {
        self.base.as_ref().map_or(1, |c| c.seq.saturating_add(1))
    }
    /// The hash of the held record at `seq`, if held (or the base's).
    pub fn hash_at(&self, seq: u64) -> Option<Hash> {
        if let Some(c) = &self.base {
            if c.seq == seq {
                return Some(c.hash);
            }
        }
        if seq == 0 {
            return Some(ZERO_HASH);
        }
        let i = self.blocks.partition_point(|b| b.last_seq() < seq);
        if let Some(b) = self.blocks.get(i) {
            let idx = seq.checked_sub(b.first_seq())? as usize;
            return b.records.get(idx).map(|r| r.hash);
        }
        // A local record not sealed yet (hashed: `Replica::hash_deferred` runs before any
        // peer's heads are compared).
        let first = self.pending.first()?.seq;
        let idx = seq.checked_sub(first)? as usize;
        self.pending.get(idx).map(|r| r.hash)
    }
}
