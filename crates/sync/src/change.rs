//! Change records and their canonical encoding and hashes (docs/sync.md sec. 4). A record is one
//! commit's ops on one scope by one author; its hash covers its predecessor's, which makes the
//! chain that one block signature seals.

use crate::error::{Error, Result};
use crate::hlc::Hlc;
use crate::identity::AuthorId;
use crate::scope::ScopeId;
use crate::wire::{Hash, Reader, Writer};
use cairn_value::Value;

const OP_TAG: &[u8] = b"cairn-sync op v1";
const RECORD_TAG: &[u8] = b"cairn-sync record v1";
pub const MAX_OPS: u64 = 65_535;
pub const MAX_PK: u64 = 16;
pub const MAX_SET_COLUMNS: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Set = 1,
    Delete = 2,
    Add = 3,
    Purge = 4,
    SetAdd = 5,
    SetRemove = 6,
    MapSet = 7,
    MapRemove = 8,
}

impl OpKind {
    fn from_u8(b: u8) -> Result<OpKind> {
        Ok(match b {
            1 => OpKind::Set,
            2 => OpKind::Delete,
            3 => OpKind::Add,
            4 => OpKind::Purge,
            5 => OpKind::SetAdd,
            6 => OpKind::SetRemove,
            7 => OpKind::MapSet,
            8 => OpKind::MapRemove,
            _ => return Err(Error::Malformed("unknown op kind".into())),
        })
    }
}

/// What an op does to its row.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// Set LWW columns (column index in the table's non-key columns, value).
    Set(Vec<(u32, Value)>),
    Delete,
    /// Add to a counter column.
    Add(u32, i64),
    Purge,
    /// Add an element to a SET column (docs/sync.md sec. 7, "Sets").
    SetAdd(u32, Value),
    /// Remove an element from a SET column: the adds it observed are those of the chains of
    /// its scope up to the seqs listed (authors strictly increasing), and those of its own
    /// chain before it.
    SetRemove(u32, Value, Vec<(AuthorId, u64)>),
    /// Set one key of a MAP column.
    MapSet(u32, String, Value),
    /// Remove one key of a MAP column.
    MapRemove(u32, String),
}

impl Payload {
    pub fn kind(&self) -> OpKind {
        match self {
            Payload::Set(_) => OpKind::Set,
            Payload::Delete => OpKind::Delete,
            Payload::Add(..) => OpKind::Add,
            Payload::Purge => OpKind::Purge,
            Payload::SetAdd(..) => OpKind::SetAdd,
            Payload::SetRemove(..) => OpKind::SetRemove,
            Payload::MapSet(..) => OpKind::MapSet,
            Payload::MapRemove(..) => OpKind::MapRemove,
        }
    }
    /// Whether the op holds values a purge erases (every kind but DELETE and PURGE).
    pub fn carries_values(&self) -> bool {
        !matches!(self, Payload::Delete | Payload::Purge)
    }
    /// The column a one-column op names.
    pub fn column(&self) -> Option<u32> {
        match self {
            Payload::Add(c, _)
            | Payload::SetAdd(c, _)
            | Payload::SetRemove(c, ..)
            | Payload::MapSet(c, ..)
            | Payload::MapRemove(c, _) => Some(*c),
            _ => None,
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            Payload::Set(cols) => {
                w.varint(cols.len() as u64);
                for (c, v) in cols {
                    w.varint(u64::from(*c));
                    w.value(v);
                }
            }
            Payload::Delete | Payload::Purge => {}
            Payload::Add(c, d) => {
                w.varint(u64::from(*c));
                w.zigzag(*d);
            }
            Payload::SetAdd(c, v) => {
                w.varint(u64::from(*c));
                w.value(v);
            }
            Payload::SetRemove(c, v, seen) => {
                w.varint(u64::from(*c));
                w.value(v);
                put_seen(w, seen);
            }
            Payload::MapSet(c, k, v) => {
                w.varint(u64::from(*c));
                w.bytes(k.as_bytes());
                w.value(v);
            }
            Payload::MapRemove(c, k) => {
                w.varint(u64::from(*c));
                w.bytes(k.as_bytes());
            }
        }
    }
    fn decode(kind: OpKind, r: &mut Reader) -> Result<Payload> {
        Ok(match kind {
            OpKind::Set => {
                let n = r.count(2, MAX_SET_COLUMNS)?;
                if n == 0 {
                    return Err(Error::Malformed("SET with no column".into()));
                }
                let mut cols = Vec::with_capacity(n);
                for _ in 0..n {
                    let c = col(r.varint()?)?;
                    cols.push((c, r.value()?));
                }
                Payload::Set(cols)
            }
            OpKind::Delete => Payload::Delete,
            OpKind::Add => {
                let c = col(r.varint()?)?;
                Payload::Add(c, r.zigzag()?)
            }
            OpKind::Purge => Payload::Purge,
            OpKind::SetAdd => Payload::SetAdd(col(r.varint()?)?, element(r)?),
            OpKind::SetRemove => {
                let c = col(r.varint()?)?;
                let v = element(r)?;
                Payload::SetRemove(c, v, seen(r)?)
            }
            OpKind::MapSet => {
                let c = col(r.varint()?)?;
                let k = r.text()?;
                Payload::MapSet(c, k, element(r)?)
            }
            OpKind::MapRemove => {
                let c = col(r.varint()?)?;
                Payload::MapRemove(c, r.text()?)
            }
        })
    }
}

/// A set's element or a map's value: no BLOB, no NaN (`cairn_value::coll::fits`).
fn element(r: &mut Reader) -> Result<Value> {
    let v = r.value()?;
    if !cairn_value::coll::fits(&v) {
        return Err(Error::Malformed(
            "a set element or map value is a BLOB or NaN".into(),
        ));
    }
    Ok(v)
}

/// A SET_REMOVE's observed chains: `varint n`, n x (`author`, `varint seq`), authors strictly
/// increasing (one encoding per context, as hashes need).
pub(crate) fn put_seen(w: &mut Writer, seen: &[(AuthorId, u64)]) {
    w.varint(seen.len() as u64);
    for (a, s) in seen {
        w.raw(&a.0);
        w.varint(*s);
    }
}

fn seen(r: &mut Reader) -> Result<Vec<(AuthorId, u64)>> {
    let n = r.count(33, MAX_SEEN)?;
    let mut out: Vec<(AuthorId, u64)> = Vec::with_capacity(n);
    for _ in 0..n {
        let a = AuthorId(r.array()?);
        let s = r.varint()?;
        if out.last().is_some_and(|(p, _)| p.0 >= a.0) {
            return Err(Error::Malformed(
                "a set removal's chains are not in increasing order".into(),
            ));
        }
        out.push((a, s));
    }
    Ok(out)
}

/// What a SET_REMOVE by `me` in `scope` observed, from the version vector of the replica
/// making it: every other author's chain of the scope, up to the seq held (its own chain up to
/// the op itself is implied).
pub fn observed(
    vv: &crate::protocol::VersionVector,
    scope: &ScopeId,
    me: &AuthorId,
) -> Vec<(AuthorId, u64)> {
    vv.iter()
        .filter(|((a, s), seq)| s == scope && a != me && **seq > 0)
        .map(|((a, _), seq)| (*a, *seq))
        .collect()
}

/// The most chains a set removal names (the writers of one scope).
pub const MAX_SEEN: u64 = 4096;

fn col(v: u64) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Malformed("column index out of range".into()))
}

#[derive(Debug, Clone, PartialEq)]
pub enum OpBody {
    Full(Payload),
    /// The payload was erased by a purge; its hash keeps the chain verifiable.
    Redacted {
        kind: OpKind,
        payload_hash: Hash,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub table: String,
    pub pk: Vec<Value>,
    pub body: OpBody,
}

impl Op {
    pub fn new(table: impl Into<String>, pk: Vec<Value>, payload: Payload) -> Op {
        Op {
            table: table.into(),
            pk,
            body: OpBody::Full(payload),
        }
    }
    pub fn kind(&self) -> OpKind {
        match &self.body {
            OpBody::Full(p) => p.kind(),
            OpBody::Redacted { kind, .. } => *kind,
        }
    }
    pub fn payload(&self) -> Option<&Payload> {
        match &self.body {
            OpBody::Full(p) => Some(p),
            OpBody::Redacted { .. } => None,
        }
    }

    fn payload_hash(&self) -> Hash {
        match &self.body {
            OpBody::Full(p) => {
                let mut w = Writer::new();
                p.encode(&mut w);
                *blake3::hash(&w.buf).as_bytes()
            }
            OpBody::Redacted { payload_hash, .. } => *payload_hash,
        }
    }

    pub fn hash(&self) -> Hash {
        self.hash_in(&mut Vec::with_capacity(128))
    }

    /// [`Op::hash`] using `buf` (cleared first) for the bytes: one buffer for a record's ops.
    fn hash_in(&self, buf: &mut Vec<u8>) -> Hash {
        // One buffer, laid out as the op hash's input: tag, row part, kind, payload hash. The
        // payload is first encoded after the row part and hashed from there.
        buf.clear();
        let mut w = Writer {
            buf: std::mem::take(buf),
        };
        w.raw(OP_TAG);
        w.bytes(self.table.as_bytes());
        w.values(&self.pk);
        let row_end = w.buf.len();
        let payload_hash = match &self.body {
            OpBody::Full(p) => {
                p.encode(&mut w);
                let h = *blake3::hash(&w.buf[row_end..]).as_bytes();
                w.buf.truncate(row_end);
                h
            }
            OpBody::Redacted { payload_hash, .. } => *payload_hash,
        };
        w.u8(self.kind() as u8);
        w.raw(&payload_hash);
        let h = *blake3::hash(&w.buf).as_bytes();
        *buf = w.buf;
        h
    }

    /// The same op with its values erased.
    pub fn redacted(&self) -> Op {
        Op {
            table: self.table.clone(),
            pk: self.pk.clone(),
            body: OpBody::Redacted {
                kind: self.kind(),
                payload_hash: self.payload_hash(),
            },
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        match &self.body {
            OpBody::Full(p) => {
                w.u8(p.kind() as u8);
                w.bytes(self.table.as_bytes());
                w.values(&self.pk);
                p.encode(w);
            }
            OpBody::Redacted { kind, payload_hash } => {
                w.u8(0x80 | *kind as u8);
                w.bytes(self.table.as_bytes());
                w.values(&self.pk);
                w.raw(payload_hash);
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Op> {
        Ok(Op::decode_hashed(r)?.0)
    }

    /// Decodes an op and computes its hash from the input bytes themselves: the decoder only
    /// accepts canonical encodings, so those bytes are exactly what `hash()` would re-encode.
    pub fn decode_hashed(r: &mut Reader) -> Result<(Op, Hash)> {
        Op::decode_hashed_in(r, &mut Vec::with_capacity(128))
    }

    /// [`Op::decode_hashed`] using `scratch` to lay out the op hash's input (one buffer for a
    /// record's ops, one hash call each instead of a hasher fed piece by piece).
    fn decode_hashed_in(r: &mut Reader, scratch: &mut Vec<u8>) -> Result<(Op, Hash)> {
        let form = r.u8()?;
        let kind = OpKind::from_u8(form & 0x7f)?;
        let start = r.pos();
        let table = r.text()?;
        let pk = r.values(MAX_PK)?;
        if pk.is_empty() {
            return Err(Error::Malformed("op with an empty primary key".into()));
        }
        let row_bytes = r.slice_from(start);
        let (body, payload_hash) = if form & 0x80 != 0 {
            let payload_hash = r.array()?;
            (OpBody::Redacted { kind, payload_hash }, payload_hash)
        } else {
            let start = r.pos();
            let payload = Payload::decode(kind, r)?;
            let h = *blake3::hash(r.slice_from(start)).as_bytes();
            (OpBody::Full(payload), h)
        };
        scratch.clear();
        scratch.extend_from_slice(OP_TAG);
        scratch.extend_from_slice(row_bytes);
        scratch.push(kind as u8);
        scratch.extend_from_slice(&payload_hash);
        let hash = *blake3::hash(scratch).as_bytes();
        Ok((Op { table, pk, body }, hash))
    }
}

/// A value an [`OpsWriter`] op holds: a [`Value`], or one already in the wire encoding.
pub trait OpValue {
    fn write(self, w: &mut Writer);
}

impl OpValue for &Value {
    #[inline(always)]
    fn write(self, w: &mut Writer) {
        w.value(self);
    }
}

/// A value already in the wire encoding of a value (docs/sync.md sec. 2), as the SQL layer
/// captures a transaction's rows: copied into the op as it is, not decoded and encoded again.
/// The bytes must be one whole value; a malformed record would be refused by every peer.
#[derive(Debug, Clone, Copy)]
pub struct Encoded<'a>(pub &'a [u8]);

impl OpValue for Encoded<'_> {
    fn write(self, w: &mut Writer) {
        debug_assert!(
            {
                let mut r = Reader::new(self.0);
                r.value().is_ok() && r.remaining() == 0
            },
            "invariant: one encoded value"
        );
        w.raw(self.0);
    }
}

/// A table's SET of a whole row (every last-writer-wins column), prepared once from its schema
/// so that [`OpsWriter::set_whole`] writes each such op without the checks [`OpsWriter::set`]
/// makes of every op: the op's fixed start (its kind, the table's name and key arity) encoded
/// once, where each key value and each column's value lies in the caller's row, and the
/// column count. What it writes is byte for byte what `set` writes.
#[derive(Debug, Clone)]
pub struct WholeRow {
    head: Vec<u8>,
    pk: Vec<usize>,
    /// (column index among the non-key columns, below 128; the value's place in the row).
    cols: Vec<(u8, usize)>,
}

impl WholeRow {
    /// For rows of `schema`'s table whose key values lie at `pk` and whose column `i` (among
    /// the non-key ones) lies at `cols[i]`; every non-key column must be last-writer-wins.
    /// None when the table does not fit (a counter, no column, 128 columns or more: `set`
    /// serves those).
    pub fn new(schema: &crate::merge::TableSchema, pk: Vec<usize>, cols: &[usize]) -> Option<Self> {
        let fits = pk.len() == schema.pk_len
            && !pk.is_empty()
            && !cols.is_empty()
            && cols.len() == schema.columns.len()
            && cols.len() < 0x80
            && (schema.columns.iter()).all(|c| c.1 == crate::merge::ColumnKind::Lww);
        if !fits {
            return None;
        }
        let mut w = Writer::new();
        w.u8(OpKind::Set as u8);
        w.bytes(schema.name.as_bytes());
        w.varint(pk.len() as u64);
        Some(WholeRow {
            head: w.buf,
            pk,
            cols: cols
                .iter()
                .enumerate()
                .map(|(i, &at)| (i as u8, at))
                .collect(),
        })
    }
}

/// A local commit's ops written straight into a record's encoding (`Record::encode`), each
/// checked against its table's schema as it comes: for a host that has the values at hand and
/// no use for `Op` values. [`crate::Replica::commit_written`] takes it.
pub struct OpsWriter {
    /// Room for the record's head (`u64le hlc`, `varint op_count`), then the ops.
    pub(crate) w: Writer,
    pub(crate) n: u64,
}

/// `u64le hlc` and a varint of at most `MAX_OPS` (three bytes).
pub(crate) const RECORD_HEAD_ROOM: usize = 8 + 3;

impl Default for OpsWriter {
    fn default() -> Self {
        OpsWriter::new()
    }
}

impl OpsWriter {
    pub fn new() -> OpsWriter {
        OpsWriter::with_capacity(64)
    }
    /// Room for `bytes` bytes of ops.
    pub fn with_capacity(bytes: usize) -> OpsWriter {
        let mut buf = Vec::with_capacity(RECORD_HEAD_ROOM + bytes);
        buf.resize(RECORD_HEAD_ROOM, 0);
        OpsWriter {
            w: Writer { buf },
            n: 0,
        }
    }
    /// Ops written so far (a record holds at most `MAX_OPS`).
    pub fn len(&self) -> u64 {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn row(
        &mut self,
        kind: OpKind,
        schema: &crate::merge::TableSchema,
        pk: impl Iterator<Item = impl OpValue> + Clone,
    ) -> Result<()> {
        // Counted without a pass over the values when the iterator knows its length.
        let n = match pk.size_hint() {
            (lo, Some(hi)) if lo == hi => lo,
            _ => pk.clone().count(),
        };
        if n != schema.pk_len || n == 0 {
            return Err(Error::reject(
                crate::error::Reason::SchemaMismatch,
                format!("{}: primary key arity", schema.name),
            ));
        }
        self.room_for_op()?;
        self.w.u8(kind as u8);
        self.w.bytes(schema.name.as_bytes());
        self.w.varint(n as u64);
        for v in pk {
            v.write(&mut self.w);
        }
        self.n += 1;
        Ok(())
    }

    /// A record holds at most `MAX_OPS` ops.
    fn room_for_op(&self) -> Result<()> {
        if self.n >= MAX_OPS {
            return Err(Error::InvalidInput(
                "too many ops in one record; split the commit".into(),
            ));
        }
        Ok(())
    }

    fn column(
        schema: &crate::merge::TableSchema,
        c: u32,
        kind: crate::merge::ColumnKind,
    ) -> Result<()> {
        if schema.columns.get(c as usize).map(|x| x.1) != Some(kind) {
            return Err(Error::reject(
                crate::error::Reason::SchemaMismatch,
                format!("{}: column {c} is not of the op's kind", schema.name),
            ));
        }
        Ok(())
    }

    /// Where the writer stands (its bytes and ops), for [`OpsWriter::back_to`].
    pub fn mark(&self) -> (usize, u64) {
        (self.w.buf.len(), self.n)
    }

    /// Drops the ops written since `mark` was taken.
    pub fn back_to(&mut self, mark: (usize, u64)) {
        debug_assert!(mark.0 >= RECORD_HEAD_ROOM && mark.0 <= self.w.buf.len());
        self.w.buf.truncate(mark.0.max(RECORD_HEAD_ROOM));
        self.n = mark.1.min(self.n);
    }

    /// The SET of every column of a row whose values `value` gives by their place in the row
    /// (`&Value`s, or values already encoded), for a table `row` was made for.
    pub fn set_whole<V: OpValue>(
        &mut self,
        row: &WholeRow,
        value: impl Fn(usize) -> V,
    ) -> Result<()> {
        self.room_for_op()?;
        self.w.raw(&row.head);
        for &at in &row.pk {
            value(at).write(&mut self.w);
        }
        self.w.u8(row.cols.len() as u8);
        for &(i, at) in &row.cols {
            self.w.u8(i);
            value(at).write(&mut self.w);
        }
        self.n += 1;
        Ok(())
    }

    /// A SET of last-writer-wins columns (at least one: `(column index, value)`).
    pub fn set<V: OpValue>(
        &mut self,
        schema: &crate::merge::TableSchema,
        pk: impl Iterator<Item = V> + Clone,
        cols: impl Iterator<Item = (u32, V)>,
    ) -> Result<()> {
        let start = self.w.buf.len();
        self.row(OpKind::Set, schema, pk)?;
        // One pass over the columns: the count goes in front once known (one byte but for
        // sets of 128 columns or more).
        let count_at = self.w.buf.len();
        self.w.u8(0);
        let mut n = 0u64;
        let mut bad = None;
        for (c, v) in cols {
            if let Err(e) = Self::column(schema, c, crate::merge::ColumnKind::Lww) {
                bad = Some(e);
                break;
            }
            self.w.varint(u64::from(c));
            v.write(&mut self.w);
            n += 1;
        }
        if bad.is_none() && (n == 0 || n > MAX_SET_COLUMNS) {
            bad = Some(Error::InvalidInput(format!(
                "{}: a SET op sets 1 to {MAX_SET_COLUMNS} columns",
                schema.name
            )));
        }
        if let Some(e) = bad {
            self.w.buf.truncate(start);
            self.n -= 1;
            return Err(e);
        }
        if n < 0x80 {
            self.w.buf[count_at] = n as u8;
        } else {
            let mut count = Writer::new();
            count.varint(n);
            self.w.buf.splice(count_at..count_at + 1, count.buf);
        }
        Ok(())
    }

    pub fn delete(
        &mut self,
        schema: &crate::merge::TableSchema,
        pk: impl Iterator<Item = impl OpValue> + Clone,
    ) -> Result<()> {
        self.row(OpKind::Delete, schema, pk)
    }

    /// An ADD of `delta` to counter column `c`.
    pub fn add(
        &mut self,
        schema: &crate::merge::TableSchema,
        pk: impl Iterator<Item = impl OpValue> + Clone,
        c: u32,
        delta: i64,
    ) -> Result<()> {
        Self::column(schema, c, crate::merge::ColumnKind::Counter)?;
        self.row(OpKind::Add, schema, pk)?;
        self.w.varint(u64::from(c));
        self.w.zigzag(delta);
        Ok(())
    }

    /// An op on one element of a SET or one key of a MAP column `c`: `kind` is `SetAdd`,
    /// `SetRemove` (`seen`: the chains observed, authors increasing), `MapSet` or `MapRemove`
    /// (`key` for the map ones; `value` for all but `MapRemove`).
    pub fn elem<V: OpValue>(
        &mut self,
        schema: &crate::merge::TableSchema,
        pk: impl Iterator<Item = V> + Clone,
        kind: OpKind,
        c: u32,
        (key, value): (Option<&str>, Option<V>),
        seen: &[(AuthorId, u64)],
    ) -> Result<()> {
        let want = match kind {
            OpKind::SetAdd | OpKind::SetRemove => crate::merge::ColumnKind::Set,
            _ => crate::merge::ColumnKind::Map,
        };
        Self::column(schema, c, want)?;
        self.row(kind, schema, pk)?;
        self.w.varint(u64::from(c));
        if let Some(k) = key {
            self.w.bytes(k.as_bytes());
        }
        if let Some(v) = value {
            v.write(&mut self.w);
        }
        if kind == OpKind::SetRemove {
            put_seen(&mut self.w, seen);
        }
        Ok(())
    }

    /// An op as built elsewhere, unchecked (the replica checks `Op`s it is given).
    pub(crate) fn op(&mut self, op: &Op) {
        op.encode(&mut self.w);
        self.n += 1;
    }

    /// The record's encoding, at `hlc`: the head goes into the room kept before the ops.
    /// Returns the buffer and where the encoding starts in it.
    #[cfg(test)]
    pub(crate) fn finish(mut self, hlc: Hlc) -> (Vec<u8>, usize) {
        let start = self.head(hlc);
        (self.w.buf, start)
    }

    /// Writes the record's head (`u64le` HLC, varint op count) backwards from the room's end;
    /// the record is then the bytes from the place returned.
    pub(crate) fn head(&mut self, hlc: Hlc) -> usize {
        let mut count = [0u8; 3];
        let mut len = 0;
        let mut n = self.n;
        loop {
            count[len] = n as u8 & 0x7f;
            n >>= 7;
            if n == 0 {
                len += 1;
                break;
            }
            count[len] |= 0x80;
            len += 1;
        }
        let start = RECORD_HEAD_ROOM - 8 - len;
        let buf = &mut self.w.buf;
        buf[start..start + 8].copy_from_slice(&hlc.to_le_bytes());
        buf[start + 8..RECORD_HEAD_ROOM].copy_from_slice(&count[..len]);
        start
    }

    /// The buffer (head room, then the ops).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.w.buf
    }

    /// The buffer itself (the writer is then empty, with no room).
    pub(crate) fn take_bytes(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.w.buf)
    }

    /// Empties the writer for another record, keeping its buffer unless it grew large (a
    /// large transaction's record is not held on to for the next small one).
    pub fn reset(&mut self) {
        if self.w.buf.capacity() > KEEP_BYTES {
            self.w.buf = Vec::new();
        }
        self.w.buf.clear();
        self.w.buf.resize(RECORD_HEAD_ROOM, 0);
        self.n = 0;
    }

    /// Makes room for `bytes` more bytes of ops.
    pub fn reserve(&mut self, bytes: usize) {
        self.w.buf.reserve(bytes);
    }
}

/// The most a writer's buffer keeps from one record to the next ([`OpsWriter::reset`]).
const KEEP_BYTES: usize = 64 << 10;

/// One record of a chain. `seq`, `prev` and `hash` are implied by its place in a block on the
/// wire; they are kept here because everything downstream needs them.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub seq: u64,
    pub hlc: Hlc,
    pub prev: Hash,
    pub ops: Vec<Op>,
    pub hash: Hash,
}

impl Record {
    /// Builds a record and computes its hash.
    pub fn new(
        author: &AuthorId,
        scope: &ScopeId,
        seq: u64,
        hlc: Hlc,
        prev: Hash,
        ops: Vec<Op>,
    ) -> Record {
        let hash = record_hash(author, scope, seq, hlc, &prev, &ops);
        Record {
            seq,
            hlc,
            prev,
            ops,
            hash,
        }
    }

    /// Wire form inside a block: `u64le hlc`, `varint op_count`, ops.
    pub fn encode(&self, w: &mut Writer) {
        w.u64le(self.hlc);
        w.varint(self.ops.len() as u64);
        for op in &self.ops {
            op.encode(w);
        }
    }

    pub fn decode(
        r: &mut Reader,
        author: &AuthorId,
        scope: &ScopeId,
        seq: u64,
        prev: Hash,
    ) -> Result<Record> {
        let hlc = r.u64le()?;
        let n = r.count(4, MAX_OPS)?;
        if n == 0 {
            return Err(Error::Malformed("record with no op".into()));
        }
        let mut ops = Vec::with_capacity(n);
        let mut hashes = Vec::with_capacity(n);
        let mut scratch = Vec::with_capacity(128);
        for _ in 0..n {
            let (op, h) = Op::decode_hashed_in(r, &mut scratch)?;
            ops.push(op);
            hashes.push(h);
        }
        let hash = record_hash_of(author, scope, seq, hlc, &prev, &hashes);
        Ok(Record {
            seq,
            hlc,
            prev,
            ops,
            hash,
        })
    }
}

pub fn record_hash(
    author: &AuthorId,
    scope: &ScopeId,
    seq: u64,
    hlc: Hlc,
    prev: &Hash,
    ops: &[Op],
) -> Hash {
    let mut buf = Vec::with_capacity(128);
    let hashes: Vec<Hash> = ops.iter().map(|op| op.hash_in(&mut buf)).collect();
    record_hash_of(author, scope, seq, hlc, prev, &hashes)
}

fn record_hash_of(
    author: &AuthorId,
    scope: &ScopeId,
    seq: u64,
    hlc: Hlc,
    prev: &Hash,
    op_hashes: &[Hash],
) -> Hash {
    // One buffer and one call: the hasher then takes the op hashes a chunk group at a time
    // (SIMD where the platform has it) instead of one 32-byte update each.
    let mut w = Writer {
        buf: Vec::with_capacity(
            RECORD_TAG.len()
                + 32
                + 32
                + 10
                + scope.name.len()
                + 8
                + 8
                + 32
                + 8
                + 32 * op_hashes.len(),
        ),
    };
    w.raw(RECORD_TAG);
    w.raw(&author.0);
    w.raw(&scope.owner.0);
    w.bytes(&scope.name);
    w.raw(&seq.to_le_bytes());
    w.raw(&hlc.to_le_bytes());
    w.raw(prev);
    w.raw(&(op_hashes.len() as u64).to_le_bytes());
    for oh in op_hashes {
        w.raw(oh);
    }
    *blake3::hash(&w.buf).as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_from_the_wire_match_hashes_from_the_values() {
        let author = AuthorId([3; 32]);
        let scope = ScopeId::new(author, "s");
        let ops = vec![
            Op::new(
                "t",
                vec![Value::Integer(-5), Value::Blob(vec![0, 255])],
                Payload::Set(vec![
                    (0, Value::Null),
                    (1, Value::Real(f64::NAN)),
                    (7, Value::Text("é".into())),
                    (1, Value::Integer(i64::MIN)),
                ]),
            ),
            Op::new(
                "t",
                vec![Value::Text("k".into())],
                Payload::Add(2, i64::MAX),
            ),
            Op::new("t", vec![Value::Text("k".into())], Payload::Delete),
            Op::new("t", vec![Value::Text("k".into())], Payload::Purge).redacted(),
        ];
        let rec = Record::new(&author, &scope, 9, 1 << 20, [4; 32], ops);
        let mut w = Writer::new();
        rec.encode(&mut w);
        let back = Record::decode(&mut Reader::new(&w.buf), &author, &scope, 9, [4; 32])
            .expect("invariant: own encoding decodes");
        assert_eq!(back.hash, rec.hash);
    }

    #[test]
    fn written_ops_are_encoded_ops_and_checked() {
        let schema = crate::merge::TableSchema::new("t", 1).lww("a").counter("n");
        let k = Value::Text("k".into());
        let a = Value::Real(1.5);
        let mut w = OpsWriter::new();
        w.set(&schema, [&k].into_iter(), [(0, &a)].into_iter())
            .expect("invariant: fits the schema");
        w.add(&schema, [&k].into_iter(), 1, -3)
            .expect("invariant: fits the schema");
        w.delete(&schema, [&k].into_iter())
            .expect("invariant: fits the schema");
        assert!(w
            .set(&schema, [&k].into_iter(), [(1, &a)].into_iter())
            .is_err());
        assert!(w.add(&schema, [&k].into_iter(), 0, 1).is_err());
        assert!(w.delete(&schema, [&k, &k].into_iter()).is_err());
        assert!(w.set(&schema, [&k].into_iter(), [].into_iter()).is_err());
        assert_eq!(w.len(), 3);
        let ops = vec![
            Op::new("t", vec![k.clone()], Payload::Set(vec![(0, a.clone())])),
            Op::new("t", vec![k.clone()], Payload::Add(1, -3)),
            Op::new("t", vec![k.clone()], Payload::Delete),
        ];
        let rec = Record::new(
            &AuthorId([1; 32]),
            &ScopeId::new(AuthorId([1; 32]), "t"),
            1,
            9,
            [0; 32],
            ops,
        );
        let mut enc = Writer::new();
        rec.encode(&mut enc);
        let (buf, start) = w.finish(9);
        assert_eq!(&buf[start..], &enc.buf[..]);
    }

    /// `set_whole` writes what `set` writes for the same row, whatever its values and wherever
    /// its key lies; tables it cannot serve get no `WholeRow`.
    #[test]
    fn a_whole_row_is_written_as_set_writes_it() {
        let values = [
            Value::Null,
            Value::Integer(-1),
            Value::Integer(i64::MAX),
            Value::Real(-0.0),
            Value::Text("0190a1b2-c3d4-7e5f-8a6b-000000000042".into()),
            Value::Text("é".repeat(100)),
            Value::Blob(vec![0; 300]),
        ];
        let encoded = |v: &Value| {
            let mut w = Writer::new();
            w.value(v);
            w.buf
        };
        for (name, pk, n_cols) in [("t", vec![0], 3), ("a long table name", vec![2, 0], 4)] {
            let mut schema = crate::merge::TableSchema::new(name, pk.len());
            for i in 0..n_cols - pk.len() {
                schema = schema.lww(format!("c{i}"));
            }
            let non_key: Vec<usize> = (0..n_cols).filter(|c| !pk.contains(c)).collect();
            let whole = WholeRow::new(&schema, pk.clone(), &non_key)
                .expect("invariant: every non-key column is last-writer-wins");
            let (mut a, mut b) = (OpsWriter::new(), OpsWriter::new());
            for seed in 0..20usize {
                let row: Vec<Vec<u8>> = (0..n_cols)
                    .map(|c| encoded(&values[(seed * 3 + c * 5) % values.len()]))
                    .collect();
                let keys = pk.iter().map(|&c| Encoded(&row[c]));
                let cols = non_key.iter().enumerate();
                a.set(
                    &schema,
                    keys,
                    cols.map(|(i, &c)| (i as u32, Encoded(&row[c]))),
                )
                .expect("invariant: fits the schema");
                b.set_whole(&whole, |c| Encoded(&row[c]))
                    .expect("invariant: fits the schema");
            }
            assert_eq!(a.len(), b.len());
            assert_eq!(a.finish(7), b.finish(7), "{name}");
        }
        let counted = crate::merge::TableSchema::new("t", 1).lww("a").counter("n");
        assert!(WholeRow::new(&counted, vec![0], &[1, 2]).is_none());
        let keyed = crate::merge::TableSchema::new("t", 2).lww("a");
        assert!(WholeRow::new(&keyed, vec![0], &[1]).is_none());
        let bare = crate::merge::TableSchema::new("t", 1);
        assert!(WholeRow::new(&bare, vec![0], &[]).is_none());
    }

    #[test]
    fn redaction_keeps_the_op_hash() {
        let op = Op::new(
            "t",
            vec![Value::Text("k".into())],
            Payload::Set(vec![(0, Value::Text("secret".into()))]),
        );
        let red = op.redacted();
        assert_eq!(op.hash(), red.hash());
        let mut w = Writer::new();
        red.encode(&mut w);
        assert!(!w.buf.windows(6).any(|x| x == b"secret"));
        let back = Op::decode(&mut Reader::new(&w.buf)).expect("invariant: own encoding decodes");
        assert_eq!(back, red);
    }
}
