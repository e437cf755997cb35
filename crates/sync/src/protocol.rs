//! The wire protocol's messages (docs/sync.md sec. 9) and their encoding. The decoder takes any
//! bytes and returns a message or `MALFORMED`, never panics; the state machine that exchanges
//! these messages is `Replica::{open_link, handle, poll}` over a `Link`.

use crate::attest::Attestation;
use crate::chain::{Block, ChainKey, Checkpoint};
use crate::error::{Error, Result};
use crate::identity::AuthorId;
use crate::merge::{RowKey, RowState};
use crate::scope::{ScopeId, Subscription, WriterList};
use crate::wire::{Hash, Reader, Writer};

pub const PROTOCOL_VERSION: u8 = 2;
const MAGIC: [u8; 2] = *b"CS";
const MAX_ITEMS: u64 = 1 << 24;

/// A version vector: the seq each chain is held up to.
pub type VersionVector = std::collections::BTreeMap<ChainKey, u64>;

/// The heads a replica holds: each chain's last seq and the hash of its record there. HELLO and
/// ACK carry them, so that two replicas holding different records at one place of a chain (a
/// fork) find out at their next exchange, whichever is longer.
pub type Heads = std::collections::BTreeMap<ChainKey, (u64, Hash)>;

/// The seqs of `heads`, without their hashes.
pub fn seqs(heads: &Heads) -> VersionVector {
    heads.iter().map(|(k, (s, _))| (k.clone(), *s)).collect()
}

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Hello {
        replica: AuthorId,
        /// Which device of the key, where one key may run on several
        /// ([`crate::Replica::set_device`]): peers then count its acknowledgements apart.
        device: Option<[u8; 16]>,
        wants_snapshot: bool,
        want: Subscription,
        have: Heads,
    },
    Writers(Vec<WriterList>),
    Blocks(Vec<Block>),
    Ack(Heads),
    Snapshot {
        /// Tells pages of different snapshots apart (a resent snapshot may hold newer rows).
        id: u64,
        page: u64,
        last: bool,
        checkpoints: Vec<Checkpoint>,
        /// What the rows of each scope are checked against (page 0).
        attestations: Vec<Attestation>,
        rows: Vec<(RowKey, RowState)>,
    },
    Reject {
        code: String,
        author: AuthorId,
        scope: ScopeId,
        first_seq: u64,
    },
    Attest(Vec<Attestation>),
}

pub fn encode_vv(w: &mut Writer, vv: &VersionVector) {
    w.varint(vv.len() as u64);
    for ((a, s), seq) in vv {
        w.raw(&a.0);
        s.encode(w);
        w.varint(*seq);
    }
}

pub fn decode_vv(r: &mut Reader) -> Result<VersionVector> {
    let n = r.count(66, MAX_ITEMS)?;
    let mut vv = VersionVector::new();
    for _ in 0..n {
        let a = AuthorId(r.array()?);
        let s = ScopeId::decode(r)?;
        let seq = r.varint()?;
        vv.insert((a, s), seq);
    }
    Ok(vv)
}

pub fn encode_heads(w: &mut Writer, heads: &Heads) {
    w.varint(heads.len() as u64);
    for ((a, s), (seq, hash)) in heads {
        w.raw(&a.0);
        s.encode(w);
        w.varint(*seq);
        w.raw(hash);
    }
}

pub fn decode_heads(r: &mut Reader) -> Result<Heads> {
    let n = r.count(98, MAX_ITEMS)?;
    let mut heads = Heads::new();
    for _ in 0..n {
        let a = AuthorId(r.array()?);
        let s = ScopeId::decode(r)?;
        let seq = r.varint()?;
        let hash = r.array()?;
        heads.insert((a, s), (seq, hash));
    }
    Ok(heads)
}

/// A BLOCKS message made of block parts `(block, from_seq)`, encoded without copying records.
pub(crate) fn encode_blocks_page(parts: &[(&Block, u64)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.raw(&MAGIC);
    w.u8(PROTOCOL_VERSION);
    w.u8(3);
    w.varint(parts.len() as u64);
    for (b, from) in parts {
        b.encode_from(*from, &mut w);
    }
    w.buf
}

impl Message {
    pub fn type_code(&self) -> u8 {
        match self {
            Message::Hello { .. } => 1,
            Message::Writers(_) => 2,
            Message::Blocks(_) => 3,
            Message::Ack(_) => 4,
            Message::Snapshot { .. } => 5,
            Message::Reject { .. } => 6,
            Message::Attest(_) => 7,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(&MAGIC);
        w.u8(PROTOCOL_VERSION);
        w.u8(self.type_code());
        match self {
            Message::Hello {
                replica,
                device,
                wants_snapshot,
                want,
                have,
            } => {
                w.raw(&replica.0);
                // Flags: bit0 wants a snapshot, bit1 a device id follows.
                w.u8(u8::from(*wants_snapshot) | u8::from(device.is_some()) << 1);
                if let Some(d) = device {
                    w.raw(d);
                }
                want.encode(&mut w);
                encode_heads(&mut w, have);
            }
            Message::Writers(lists) => {
                w.varint(lists.len() as u64);
                for l in lists {
                    l.encode(&mut w);
                }
            }
            Message::Blocks(blocks) => {
                w.varint(blocks.len() as u64);
                for b in blocks {
                    b.encode(&mut w);
                }
            }
            Message::Ack(heads) => encode_heads(&mut w, heads),
            Message::Snapshot {
                id,
                page,
                last,
                checkpoints,
                attestations,
                rows,
            } => {
                w.varint(*id);
                w.varint(*page);
                w.u8(u8::from(*last));
                w.varint(checkpoints.len() as u64);
                for c in checkpoints {
                    c.encode(&mut w);
                }
                w.varint(attestations.len() as u64);
                for a in attestations {
                    a.encode(&mut w);
                }
                w.varint(rows.len() as u64);
                for (k, row) in rows {
                    w.bytes(k.table.as_bytes());
                    k.scope.encode(&mut w);
                    w.raw(&k.pk);
                    row.encode(&mut w);
                }
            }
            Message::Reject {
                code,
                author,
                scope,
                first_seq,
            } => {
                w.bytes(code.as_bytes());
                w.raw(&author.0);
                scope.encode(&mut w);
                w.varint(*first_seq);
            }
            Message::Attest(list) => {
                w.varint(list.len() as u64);
                for a in list {
                    a.encode(&mut w);
                }
            }
        }
        w.buf
    }

    pub fn decode(bytes: &[u8]) -> Result<Message> {
        let mut r = Reader::new(bytes);
        if r.take(2)? != MAGIC {
            return Err(Error::Malformed("not a cairn sync message".into()));
        }
        let version = r.u8()?;
        if version != PROTOCOL_VERSION {
            return Err(Error::Malformed(format!(
                "UNSUPPORTED_VERSION: protocol {version}, this replica speaks {PROTOCOL_VERSION}"
            )));
        }
        let msg = match r.u8()? {
            1 => {
                let replica = AuthorId(r.array()?);
                let flags = r.u8()?;
                if flags > 3 {
                    return Err(Error::Malformed("bad hello flags".into()));
                }
                let device = if flags & 2 != 0 {
                    Some(r.array()?)
                } else {
                    None
                };
                let want = Subscription::decode(&mut r)?;
                let have = decode_heads(&mut r)?;
                Message::Hello {
                    replica,
                    device,
                    wants_snapshot: flags & 1 != 0,
                    want,
                    have,
                }
            }
            2 => {
                let n = r.count(100, MAX_ITEMS)?;
                let mut lists = Vec::with_capacity(n);
                for _ in 0..n {
                    lists.push(WriterList::decode(&mut r)?);
                }
                Message::Writers(lists)
            }
            3 => {
                let n = r.count(140, MAX_ITEMS)?;
                let mut blocks = Vec::with_capacity(n);
                for _ in 0..n {
                    blocks.push(Block::decode(&mut r)?);
                }
                Message::Blocks(blocks)
            }
            4 => Message::Ack(decode_heads(&mut r)?),
            5 => {
                let id = r.varint()?;
                let page = r.varint()?;
                let last = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(Error::Malformed("bad snapshot flag".into())),
                };
                let n = r.count(130, MAX_ITEMS)?;
                let mut checkpoints = Vec::with_capacity(n);
                for _ in 0..n {
                    checkpoints.push(Checkpoint::decode(&mut r)?);
                }
                let n = r.count(140, MAX_ITEMS)?;
                let mut attestations = Vec::with_capacity(n);
                for _ in 0..n {
                    attestations.push(Attestation::decode(&mut r)?);
                }
                let n = r.count(38, MAX_ITEMS)?;
                let mut rows = Vec::with_capacity(n);
                for _ in 0..n {
                    let table = r.text()?;
                    let scope = ScopeId::decode(&mut r)?;
                    let pk = r.values(crate::change::MAX_PK)?;
                    let row = RowState::decode(&mut r)?;
                    rows.push((RowKey::new(&table, &scope, &pk), row));
                }
                Message::Snapshot {
                    id,
                    page,
                    last,
                    checkpoints,
                    attestations,
                    rows,
                }
            }
            7 => {
                let n = r.count(140, MAX_ITEMS)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    list.push(Attestation::decode(&mut r)?);
                }
                Message::Attest(list)
            }
            6 => {
                let code = r.text()?;
                let author = AuthorId(r.array()?);
                let scope = ScopeId::decode(&mut r)?;
                let first_seq = r.varint()?;
                Message::Reject {
                    code,
                    author,
                    scope,
                    first_seq,
                }
            }
            _ => return Err(Error::Malformed("unknown message type".into())),
        };
        r.finish()?;
        Ok(msg)
    }
}

/// The fuzz target's body (also replayed over the saved corpus by an ordinary test): decoding any
/// bytes returns, never panics, and whatever decodes re-encodes to something that decodes to
/// the same message.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    if let Ok(msg) = Message::decode(data) {
        let again = Message::decode(&msg.encode()).expect("invariant: own encoding decodes");
        assert_eq!(again, msg, "invariant: decode(encode(m)) == m");
    }
    let _ = crate::chain::Block::from_bytes(data);
}
