//! The record encoding rows are stored in: a varint column count, then one varint serial type per
//! column, then the column bodies in order. The serial types give every body's length, so column
//! N is found by summing the lengths before it, without decoding the columns in between (what
//! lets the executor test a predicate on one column of a row still in its page).
//!
//! Also the unsigned LEB128 varints the header is made of ([`put_varint`], [`get_varint`]).
//! Hands encoded rows (and [`Record`], [`Layout`], [`Fields`] views over them) to the SQL layer.

use crate::Value;
use crate::{Error, Result};

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A record header's varint at `*pos`: a serial type or count below 128 (every number, and
/// text or blobs up to 57 bytes) is one byte, read without the general loop.
#[inline]
fn header_varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    match buf.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Ok(u64::from(b))
        }
        _ => get_varint(buf, pos),
    }
}

/// Reads a varint at `*pos`, advancing it.
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf
            .get(*pos)
            .ok_or_else(|| Error::corrupt("varint runs past the end".into()))?;
        *pos += 1;
        v |= ((b & 0x7F) as u64) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(Error::corrupt("varint longer than 10 bytes".into()))
}

// ---- records ----

/// Serial types: how a column body is stored.
const ST_NULL: u64 = 0;
const ST_I8: u64 = 1;
const ST_I16: u64 = 2;
const ST_I32: u64 = 3;
const ST_I64: u64 = 4;
const ST_F64: u64 = 5;
const ST_ZERO: u64 = 6;
const ST_ONE: u64 = 7;
/// Text of length n is `ST_TEXT + 2n`, a blob of length n is `ST_BLOB + 2n`.
const ST_BLOB: u64 = 12;
pub(super) const ST_TEXT: u64 = 13;

pub(super) fn serial_type(v: &Value) -> u64 {
    match v {
        Value::Null => ST_NULL,
        Value::Integer(0) => ST_ZERO,
        Value::Integer(1) => ST_ONE,
        Value::Integer(i) if i8::try_from(*i).is_ok() => ST_I8,
        Value::Integer(i) if i16::try_from(*i).is_ok() => ST_I16,
        Value::Integer(i) if i32::try_from(*i).is_ok() => ST_I32,
        Value::Integer(_) => ST_I64,
        Value::Real(_) => ST_F64,
        Value::Text(s) => ST_TEXT + 2 * s.len() as u64,
        Value::Blob(b) => ST_BLOB + 2 * b.len() as u64,
    }
}

#[inline]
fn body_len(st: u64) -> Result<usize> {
    let n = match st {
        ST_NULL | ST_ZERO | ST_ONE => 0,
        ST_I8 => 1,
        ST_I16 => 2,
        ST_I32 => 4,
        ST_I64 | ST_F64 => 8,
        12.. => (st - 12) / 2,
        _ => return Err(Error::corrupt(format!("unknown serial type {st}"))),
    };
    usize::try_from(n).map_err(|_| Error::corrupt("column too large".into()))
}

/// Encodes a row.
pub fn encode_record(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + values.len() * 9);
    encode_record_into(&mut out, values);
    out
}

/// Appends a row's encoding to `out`.
pub fn encode_record_into(out: &mut Vec<u8>, values: &[Value]) {
    // One allocation for the whole record instead of regrowing as columns are appended: a
    // bound on the size (varints of up to 3 bytes cover serial types of text up to ~1 MB).
    let bodies: usize = values
        .iter()
        .map(|v| match v {
            Value::Text(s) => s.len(),
            Value::Blob(b) => b.len(),
            _ => 8,
        })
        .sum();
    out.reserve(3 + 3 * values.len() + bodies);
    put_varint(out, values.len() as u64);
    for v in values {
        put_varint(out, serial_type(v));
    }
    for v in values {
        put_body(out, v);
    }
}

/// Appends the body of `v` (what its serial type says follows in the record).
#[inline]
fn put_body(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null | Value::Integer(0) | Value::Integer(1) => {}
        Value::Integer(i) => match serial_type(v) {
            ST_I8 => out.push(*i as i8 as u8),
            ST_I16 => out.extend_from_slice(&(*i as i16).to_le_bytes()),
            ST_I32 => out.extend_from_slice(&(*i as i32).to_le_bytes()),
            _ => out.extend_from_slice(&i.to_le_bytes()),
        },
        Value::Real(r) => out.extend_from_slice(&r.to_le_bytes()),
        Value::Text(s) => out.extend_from_slice(s.as_bytes()),
        Value::Blob(b) => out.extend_from_slice(b),
    }
}

/// A row still in its encoded form: finds a column's bytes without decoding the others.
/// A record's first varint, its column count, checked against the record's length.
fn column_count(buf: &[u8], pos: &mut usize) -> Result<usize> {
    let n = header_varint(buf, pos)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= buf.len())
        .ok_or_else(|| Error::corrupt(format!("record claims {n} columns")))
}

#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    buf: &'a [u8],
    /// Where the serial types start, how many columns there are, and where the bodies start.
    header: usize,
    columns: usize,
    body: usize,
}

impl<'a> Record<'a> {
    pub fn new(buf: &'a [u8]) -> Result<Self> {
        let mut pos = 0;
        let columns = column_count(buf, &mut pos)?;
        let header = pos;
        for _ in 0..columns {
            header_varint(buf, &mut pos)?;
        }
        Ok(Self {
            buf,
            header,
            columns,
            body: pos,
        })
    }

    pub fn len(&self) -> usize {
        self.columns
    }

    pub fn is_empty(&self) -> bool {
        self.columns == 0
    }

    /// Column `i`; a column past the end of the record (one added by `ALTER TABLE ADD COLUMN`
    /// after the row was written) reads as NULL.
    pub fn get(&self, i: usize) -> Result<Value> {
        if i >= self.columns {
            return Ok(Value::Null);
        }
        let mut hpos = self.header;
        let mut off = self.body;
        for _ in 0..i {
            off += body_len(header_varint(self.buf, &mut hpos)?)?;
        }
        let st = header_varint(self.buf, &mut hpos)?;
        decode_body(st, self.buf, off)
    }

    /// Column `i` written into `out`, reusing `out`'s text or blob buffer when it holds one:
    /// a scan that decodes a column of row after row into the same slot then allocates only
    /// when a value outgrows the buffer, not once per row.
    pub fn get_into(&self, i: usize, out: &mut Value) -> Result<()> {
        if i >= self.columns {
            *out = Value::Null;
            return Ok(());
        }
        let mut hpos = self.header;
        let mut off = self.body;
        for _ in 0..i {
            off += body_len(header_varint(self.buf, &mut hpos)?)?;
        }
        let st = header_varint(self.buf, &mut hpos)?;
        self.body_into(st, off, out)
    }

    /// Columns `cols` (in ascending order) written into `out[c]` each, as `get_into` does, in
    /// one walk of the header instead of one walk per column.
    pub fn get_cols_into(&self, cols: &[usize], out: &mut [Value]) -> Result<()> {
        if let [c] = cols {
            return self.get_into(*c, &mut out[*c]);
        }
        if !cols.windows(2).all(|w| w[0] < w[1]) {
            for &c in cols {
                self.get_into(c, &mut out[c])?;
            }
            return Ok(());
        }
        let mut hpos = self.header;
        let mut off = self.body;
        let mut next = 0;
        for &c in cols {
            if c >= self.columns {
                out[c] = Value::Null;
                continue;
            }
            while next < c {
                off += body_len(header_varint(self.buf, &mut hpos)?)?;
                next += 1;
            }
            let st = header_varint(self.buf, &mut hpos)?;
            self.body_into(st, off, &mut out[c])?;
            off += body_len(st)?;
            next += 1;
        }
        Ok(())
    }

    /// The body of serial type `st` at `off`, into `out` (reusing its buffer).
    #[inline(always)]
    fn body_into(&self, st: u64, off: usize, out: &mut Value) -> Result<()> {
        if st < ST_BLOB {
            *out = decode_body(st, self.buf, off)?;
            return Ok(());
        }
        let b = off
            .checked_add(body_len(st)?)
            .and_then(|end| self.buf.get(off..end))
            .ok_or_else(|| Error::corrupt("record column runs past the end".into()))?;
        if st % 2 == 1 {
            text_into(b, out)
        } else {
            blob_into(b, out);
            Ok(())
        }
    }

    /// Every column, in order.
    pub fn values(&self) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(self.columns);
        let mut hpos = self.header;
        let mut off = self.body;
        for _ in 0..self.columns {
            let st = header_varint(self.buf, &mut hpos)?;
            out.push(decode_body(st, self.buf, off)?);
            off += body_len(st)?;
        }
        if off != self.buf.len() {
            return Err(Error::corrupt(format!(
                "record is {} bytes but its columns take {off}",
                self.buf.len()
            )));
        }
        Ok(out)
    }
}

/// A column of a record as it lies in the page: numbers by value, text and blobs as their bytes
/// (text not yet checked to be UTF-8), so a filter can test it without building a [`Value`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

/// Where each column of a record lies (serial type, body offset), found in one walk of the
/// header; kept from row to row of a scan so that locating the columns allocates nothing.
/// A scan reads it once per row, then tests and decodes columns in any order without walking
/// the header again for each (as [`Record`] does).
#[derive(Debug, Default)]
pub struct Layout {
    /// Serial type and offset of the body from the end of the header, per column.
    at: Vec<(u64, usize)>,
}

/// Body lengths of the one-byte serial types (below 128: every number, text and blobs up to 57
/// bytes); the reserved 8 to 11 are refused when the column is read.
const SMALL_LEN: [u8; 128] = {
    let fixed = [0, 1, 2, 4, 8, 8, 0, 0, 0, 0, 0, 0];
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = if i < 12 { fixed[i] } else { (i as u8 - 12) / 2 };
        i += 1;
    }
    t
};

impl Layout {
    /// Locates the columns of `buf`, a record, at least those before `upto` (the others are
    /// found when asked for); the returned view reads them.
    pub fn read<'s, 'a>(&'s mut self, buf: &'a [u8], upto: usize) -> Result<Fields<'s, 'a>> {
        self.locate(buf, upto)
    }

    /// `read` with every column located, what a rewrite of the record needs
    /// ([`Fields::rewrite_into`]).
    pub fn read_all<'s, 'a>(&'s mut self, buf: &'a [u8]) -> Result<Fields<'s, 'a>> {
        self.locate(buf, usize::MAX)
    }

    /// The walk of the header `read` and `read_all` make, inlined into each: a call of `read`
    /// from a second place would stop it being inlined into the scan, which tests every row
    /// it reads.
    #[inline(always)]
    fn locate<'s, 'a>(&'s mut self, buf: &'a [u8], upto: usize) -> Result<Fields<'s, 'a>> {
        // The usual record: under 128 columns, each with a one-byte serial type (every number,
        // text and blobs up to 57 bytes). The bodies start right after the header then, so
        // only the columns wanted need their offsets summed.
        if let Some(&n) = buf.first() {
            let columns = usize::from(n);
            if let Some(types) = buf.get(1..1 + columns).filter(|_| n < 0x80) {
                if one_byte_types(buf, columns) {
                    let want = upto.min(columns);
                    self.at.resize(want, (0, 0));
                    let mut off = 0usize;
                    for (a, &b) in self.at.iter_mut().zip(types) {
                        *a = (u64::from(b), off);
                        off += usize::from(SMALL_LEN[usize::from(b)]);
                    }
                    return Ok(Fields {
                        at: &self.at,
                        types,
                        columns,
                        buf: &buf[1 + columns..],
                    });
                }
            }
        }
        let mut pos = 0;
        let columns = column_count(buf, &mut pos)?;
        self.at.resize(columns, (0, 0));
        let mut off = 0usize;
        for a in &mut self.at {
            let st = get_varint(buf, &mut pos)?;
            *a = (st, off);
            let len = match st {
                0..128 => usize::from(SMALL_LEN[st as usize]),
                _ => usize::try_from((st - ST_BLOB) / 2).unwrap_or(usize::MAX),
            };
            off = off.saturating_add(len);
        }
        if off > buf.len() - pos {
            return Err(Error::corrupt("record columns run past its end".into()));
        }
        Ok(Fields {
            at: &self.at,
            types: &[],
            columns,
            buf: &buf[pos..],
        })
    }
}

/// Whether the `columns` serial types after a record's one-byte column count are each one
/// byte: for up to 8 columns, one load of the header (and the start of the bodies).
#[inline]
fn one_byte_types(buf: &[u8], columns: usize) -> bool {
    match buf.get(1..9) {
        Some(w) if columns <= 8 => {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            let mask = match columns {
                8 => u64::MAX,
                n => (1u64 << (8 * n)) - 1,
            };
            w & mask & 0x8080_8080_8080_8080 == 0
        }
        _ => buf[1..1 + columns].iter().all(|&b| b < 0x80),
    }
}

/// The columns of one record, located by [`Layout::read`].
#[derive(Debug, Clone, Copy)]
pub struct Fields<'s, 'a> {
    /// Serial type and body offset of the columns located.
    at: &'s [(u64, usize)],
    /// The one-byte serial types of every column, when they all are (else every column is
    /// located, and this is empty).
    types: &'a [u8],
    columns: usize,
    /// The bodies: the record after its header.
    buf: &'a [u8],
}

impl<'a> Fields<'_, 'a> {
    /// Column `i` where it lies; a column past the end of the record (added by `ALTER TABLE
    /// ADD COLUMN` after the row was written) is NULL.
    #[inline(always)]
    pub fn field(&self, i: usize) -> Result<Field<'a>> {
        let (st, off) = match self.at.get(i) {
            Some(&at) => at,
            None if i >= self.columns => return Ok(Field::Null),
            None => self.locate(i),
        };
        let b = self.buf.get(off..).unwrap_or(&[]);
        let fixed = |n: usize| {
            b.get(..n)
                .ok_or_else(|| Error::corrupt("record column runs past the end".into()))
        };
        Ok(match st {
            ST_NULL => Field::Null,
            ST_ZERO => Field::Integer(0),
            ST_ONE => Field::Integer(1),
            ST_I8 => Field::Integer(fixed(1)?[0] as i8 as i64),
            ST_I16 => Field::Integer(i16::from_le_bytes(fixed(2)?.try_into().expect("2")) as i64),
            ST_I32 => Field::Integer(i32::from_le_bytes(fixed(4)?.try_into().expect("4")) as i64),
            ST_I64 => Field::Integer(i64::from_le_bytes(fixed(8)?.try_into().expect("8"))),
            ST_F64 => Field::Real(f64::from_le_bytes(fixed(8)?.try_into().expect("8"))),
            ST_BLOB.. => {
                // Within usize: a longer body fails the header walk of `read` (one-byte types
                // are short).
                let v = fixed(((st - ST_BLOB) / 2) as usize)?;
                if st % 2 == 1 {
                    Field::Text(v)
                } else {
                    Field::Blob(v)
                }
            }
            _ => return Err(Error::corrupt(format!("unknown serial type {st}"))),
        })
    }

    /// A column `read` did not locate (past the `upto` it was given): its one-byte serial
    /// type, and its offset summed from the types before it.
    #[cold]
    fn locate(&self, i: usize) -> (u64, usize) {
        let off = self.types[..i]
            .iter()
            .map(|&b| usize::from(SMALL_LEN[usize::from(b)]))
            .sum();
        (u64::from(self.types[i]), off)
    }

    /// The record these fields were read from, `rec`, as `n` columns with some replaced,
    /// into `out` (cleared first): column `i` becomes `new(i)` where that is `Some`, and keeps
    /// its bytes otherwise. Columns past the record's end (added by `ALTER TABLE ADD COLUMN`
    /// after it was written) are NULL and columns past `n` are left out, so the result is the
    /// record that decoding this one, replacing those values and encoding the row again would
    /// give, without decoding the columns that stay. When the new values fit where the old
    /// ones lie (a number of the same width, a real, text or a blob of the same length: most
    /// UPDATEs), `rec` is copied and they are written over the old bytes.
    pub fn rewrite_into<'v>(
        &self,
        rec: &[u8],
        n: usize,
        new: impl Fn(usize) -> Option<&'v Value>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.rewrite_dyn(rec, n, &new, out)
    }

    /// `rewrite_into` with the new values behind one function type: one copy of the code for
    /// every caller's closure (each was its own 1 KB of wasm), for an indirect call a column.
    fn rewrite_dyn<'v>(
        &self,
        rec: &[u8],
        n: usize,
        new: &dyn Fn(usize) -> Option<&'v Value>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if self.patch_into(rec, n, new, out) {
            return Ok(());
        }
        out.clear();
        out.reserve(rec.len() + 16);
        put_varint(out, n as u64);
        let old = |i: usize| match self.types.get(i) {
            Some(&t) => u64::from(t),
            None => self.at.get(i).map_or(ST_NULL, |a| a.0),
        };
        for i in 0..n {
            put_varint(out, new(i).map_or(old(i), serial_type));
        }
        let mut off = 0usize;
        for i in 0..n.min(self.columns) {
            let len = body_len(old(i))?;
            match new(i) {
                Some(v) => put_body(out, v),
                None => {
                    let b = off
                        .checked_add(len)
                        .and_then(|end| self.buf.get(off..end))
                        .ok_or_else(|| Error::corrupt("record column runs past the end".into()))?;
                    out.extend_from_slice(b);
                }
            }
            off += len;
        }
        for i in self.columns..n {
            if let Some(v) = new(i) {
                put_body(out, v);
            }
        }
        Ok(())
    }

    /// `rewrite_into` by writing the new values over the old ones in a copy of `rec`: when
    /// the record has `n` columns and each new value's body is as long as the old one's and
    /// its serial type takes the same byte (every serial type is one byte long) or is the
    /// same. False, with `out` to be cleared, when a value does not fit so, or when the bodies
    /// do not end where the record does (the general rewrite finds it corrupt, or leaves out
    /// what follows them).
    pub(super) fn patch_into<'v>(
        &self,
        rec: &[u8],
        n: usize,
        new: &dyn Fn(usize) -> Option<&'v Value>,
        out: &mut Vec<u8>,
    ) -> bool {
        let at = |c: usize| match self.at.get(c) {
            Some(&at) => at,
            None => self.locate(c),
        };
        if n != self.columns {
            return false;
        }
        // The bodies end where the record does, as the general rewrite would find them.
        let end = match n.checked_sub(1) {
            Some(last) => {
                let (st, off) = at(last);
                body_len(st).map_or(usize::MAX, |len| off.saturating_add(len))
            }
            None => 0,
        };
        if end != self.buf.len() || end > rec.len() {
            return false;
        }
        let body = rec.len() - end;
        out.clear();
        out.extend_from_slice(rec);
        for c in 0..n {
            let Some(v) = new(c) else { continue };
            let (old, off) = at(c);
            let st = serial_type(v);
            let len = match (body_len(old), body_len(st)) {
                (Ok(a), Ok(b)) if a == b => a,
                _ => return false,
            };
            if st != old {
                // One-byte types (all of them are, when `types` is kept): the new one, as long
                // as the old body and so below 128 too, takes the old one's byte.
                if self.types.is_empty() {
                    return false;
                }
                out[1 + c] = st as u8;
            }
            let b = &mut out[body + off..body + off + len];
            match v {
                Value::Null => {}
                Value::Integer(x) => b.copy_from_slice(&x.to_le_bytes()[..len]),
                Value::Real(r) => b.copy_from_slice(&r.to_le_bytes()),
                Value::Text(t) => b.copy_from_slice(t.as_bytes()),
                Value::Blob(x) => b.copy_from_slice(x),
            }
        }
        true
    }

    /// Column `i` written into `out`, reusing `out`'s text or blob buffer as
    /// [`Record::get_into`] does.
    pub fn get_into(&self, i: usize, out: &mut Value) -> Result<()> {
        match self.field(i)? {
            Field::Null => *out = Value::Null,
            Field::Integer(v) => *out = Value::Integer(v),
            Field::Real(v) => *out = Value::Real(v),
            Field::Text(b) => text_into(b, out)?,
            Field::Blob(b) => blob_into(b, out),
        }
        Ok(())
    }
}

/// Text column bytes `b` into `out`, reusing its buffer when it already holds text.
#[inline(always)]
fn text_into(b: &[u8], out: &mut Value) -> Result<()> {
    let s =
        std::str::from_utf8(b).map_err(|_| Error::corrupt("text column is not UTF-8".into()))?;
    match out {
        Value::Text(t) => {
            t.clear();
            t.push_str(s);
        }
        _ => *out = Value::Text(s.to_owned()),
    }
    Ok(())
}

/// Blob column bytes `b` into `out`, reusing its buffer when it already holds a blob.
#[inline(always)]
fn blob_into(b: &[u8], out: &mut Value) {
    match out {
        Value::Blob(v) => {
            v.clear();
            v.extend_from_slice(b);
        }
        _ => *out = Value::Blob(b.to_vec()),
    }
}

fn decode_body(st: u64, buf: &[u8], off: usize) -> Result<Value> {
    let len = body_len(st)?;
    let b = off
        .checked_add(len)
        .and_then(|end| buf.get(off..end))
        .ok_or_else(|| Error::corrupt("record column runs past the end".into()))?;
    Ok(match st {
        ST_NULL => Value::Null,
        ST_ZERO => Value::Integer(0),
        ST_ONE => Value::Integer(1),
        ST_I8 => Value::Integer(b[0] as i8 as i64),
        ST_I16 => Value::Integer(i16::from_le_bytes([b[0], b[1]]) as i64),
        ST_I32 => Value::Integer(i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64),
        ST_I64 => Value::Integer(i64::from_le_bytes(b.try_into().expect("8 bytes"))),
        ST_F64 => Value::Real(f64::from_le_bytes(b.try_into().expect("8 bytes"))),
        st if st % 2 == 1 => Value::Text(
            std::str::from_utf8(b)
                .map_err(|_| Error::corrupt("text column is not UTF-8".into()))?
                .to_owned(),
        ),
        _ => Value::Blob(b.to_vec()),
    })
}

/// Decodes a whole row.
pub fn decode_record(buf: &[u8]) -> Result<Vec<Value>> {
    Record::new(buf)?.values()
}
