//! Byte encodings of SQL values: the order-preserving key encoding that table and index trees are
//! keyed by, and the record encoding rows are stored in. Both are part of the file format
//! (`docs/file-format.md`); change them only with a format version bump.
//!
//! **Keys.** Each value is a tag byte and a payload; a composite key is the concatenation. Comparing
//! two encoded keys bytewise gives the same answer as comparing the values in SQL order
//! ([`Value::total_cmp`]), column by column. Integers and reals share one numeric tag and interleave
//! by value; a trailing byte tells an integer from an equal real, so a key decodes to exactly the
//! value that was encoded (an integer sorts just before an equal real). Text and blobs escape 0x00
//! as 0x00 0xFF and end with 0x00 0x01, so a prefix sorts before its extensions.
//! A descending column has every byte of its component inverted.
//!
//! **Records.** A varint column count, then one varint serial type per column, then the column
//! bodies in order. The serial types give every body's length, so column N is found by summing
//! the lengths before it, without decoding the columns in between (what lets the executor test a
//! predicate on one column of a row still in its page).

use crate::Value;
use crate::{Error, Result};

const TAG_NULL: u8 = 0x05;
const TAG_NUM: u8 = 0x10;
const TAG_TEXT: u8 = 0x30;
const TAG_BLOB: u8 = 0x40;

// What ends a number's digit bytes (each below 0x80, so below every digit byte), in order: an
// integer below the f64 (two bytes of the difference follow), the f64 exactly (an integer; a real
// has REAL_MARK after it), an integer above it (the difference follows). A real sorts after the
// equal integer with anything after it, as REAL_MARK is above every tag.
const END_INT_BELOW: u8 = 0x01;
const END_EXACT: u8 = 0x02;
const END_INT_ABOVE: u8 = 0x03;
const REAL_MARK: u8 = 0xFF;

/// Appends `v`'s key encoding to `out`. `desc` inverts the component so it sorts descending.
pub fn encode_key_value(out: &mut Vec<u8>, v: &Value, desc: bool) {
    let start = out.len();
    match v {
        Value::Null => out.push(TAG_NULL),
        // Exactly an f64 (every row id): no difference to work out.
        Value::Integer(i) if (-(1 << 53)..=1 << 53).contains(i) => encode_number(out, *i as f64, 0),
        Value::Integer(i) => {
            let approx = *i as f64;
            // The exact difference between the integer and its nearest f64: zero below 2^53,
            // at most 1024 in magnitude above. In i64 where `approx` fits one (converting a
            // float to i128 is a library call).
            let diff = if approx.abs() < 9.0e18 {
                i.wrapping_sub(approx as i64) as i16
            } else {
                (*i as i128 - approx as i128) as i16
            };
            encode_number(out, approx, diff);
        }
        Value::Real(r) => {
            // -0.0 and 0.0 are equal in SQL; NaN never reaches storage (SQL turns it into NULL),
            // and is kept below every number if it does.
            let r = if *r == 0.0 { 0.0 } else { *r };
            encode_number(out, r, 0);
            out.push(REAL_MARK);
        }
        Value::Text(s) => {
            out.push(TAG_TEXT);
            escape(out, s.as_bytes());
        }
        Value::Blob(b) => {
            out.push(TAG_BLOB);
            escape(out, b);
        }
    }
    if desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

/// Encodes a whole key, every column ascending.
pub fn encode_key(values: &[Value]) -> Vec<u8> {
    // 12 bytes: room for most numbers' keys, so an integer key is one allocation.
    let mut out = Vec::with_capacity(values.len() * 12);
    for v in values {
        encode_key_value(&mut out, v, false);
    }
    out
}

/// Appends a number's key: the tag, the order-preserving bits of `x` ([`ordered_f64`]) as
/// groups of seven bits from the top, each in a byte with its high bit set, up to the last group
/// that is not zero, then the end byte, then for an integer that is not exactly `x` its
/// difference `diff` from it (zero otherwise; a real's [`REAL_MARK`] is its caller's). An
/// integer of up to 2^13 takes 6 bytes, any up to 2^53 at most 12; the groups dropped are zeros,
/// and the end byte sorts below any digit byte, so a shorter number's key sorts below a longer
/// one's that continues it.
#[inline]
fn encode_number(out: &mut Vec<u8>, x: f64, diff: i16) {
    // Groups from the top until what is left is zero; a shift by seven each time, so the tenth
    // takes bit 0 into its highest place. The bits are never zero (a NaN's pattern, which
    // `ordered_f64` maps elsewhere): 1 to 10 groups.
    let mut x = ordered_f64(x);
    // Built whole and appended at once: one capacity check.
    let mut k = [0u8; 14];
    k[0] = TAG_NUM;
    let mut n = 0;
    loop {
        n += 1;
        k[n] = 0x80 | (x >> 57) as u8;
        x <<= 7;
        if x == 0 || n == 10 {
            break;
        }
    }
    let mut len = n + 2;
    k[n + 1] = match diff {
        0 => END_EXACT,
        d => {
            k[len..len + 2].copy_from_slice(&((d as u16) ^ 0x8000).to_be_bytes());
            len += 2;
            if d < 0 {
                END_INT_BELOW
            } else {
                END_INT_ABOVE
            }
        }
    };
    // All 14 bytes and then cut: a copy of a constant size is a few moves, where one of `len`
    // bytes is a call.
    let at = out.len();
    out.extend_from_slice(&k);
    out.truncate(at + len);
}

/// The parts of a number's key at the front of `key` (its tag included), every byte XORed with
/// `inv` (0xFF for a descending component): the f64's bits as [`ordered_f64`] wrote them, the
/// end byte ([`REAL_MARK`] for a real), the integer's difference from the f64, and the bytes the
/// number takes. None when the bytes are not a number's.
#[inline]
fn number_parts(key: &[u8], inv: u8) -> Option<(u64, u8, i16, usize)> {
    let mut b = 0u64;
    let mut i = 1;
    let end = loop {
        let d = *key.get(i)? ^ inv;
        if d < 0x80 {
            break d;
        }
        if i > 10 {
            return None;
        }
        // Group `i - 1` of the value's bits from the top (the tenth holds bit 0 in its highest
        // place, which the right shift by 63 brings down).
        b |= ((d & 0x7f) as u64) << 57 >> (7 * (i - 1));
        i += 1;
    };
    if i == 1 {
        return None;
    }
    i += 1;
    let mut diff = 0;
    match end {
        END_INT_BELOW | END_INT_ABOVE => {
            let raw = key.get(i..i + 2)?;
            diff = ((u16::from_be_bytes([raw[0] ^ inv, raw[1] ^ inv])) ^ 0x8000) as i16;
            i += 2;
        }
        END_EXACT if key.get(i).map(|b| b ^ inv) == Some(REAL_MARK) => {
            return Some((b, REAL_MARK, 0, i + 1));
        }
        END_EXACT => {}
        _ => return None,
    }
    Some((b, end, diff, i))
}

/// The integer a number's parts stand for.
#[inline]
fn integer_of(bits: u64, diff: i16) -> i64 {
    let approx = unordered_f64(bits);
    // The sum in i64 where it cannot overflow (no f64-to-i128 conversion).
    if approx.abs() < 9.0e18 {
        approx as i64 + diff as i64
    } else {
        (approx as i128 + diff as i128) as i64
    }
}

fn ordered_f64(x: f64) -> u64 {
    let bits = if x.is_nan() {
        f64::NAN.to_bits() | (1 << 63)
    } else {
        x.to_bits()
    };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    }
}

fn unordered_f64(bits: u64) -> f64 {
    f64::from_bits(if bits >> 63 == 1 {
        bits ^ (1 << 63)
    } else {
        !bits
    })
}

fn escape(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// The integer an ascending key starts with, read where it lies; None when its first
/// component is anything else (then [`decode_key_value`] decodes it).
#[inline]
pub fn key_integer(key: &[u8]) -> Option<i64> {
    if *key.first()? != TAG_NUM {
        return None;
    }
    match number_parts(key, 0)? {
        (_, REAL_MARK, _, _) => None,
        (bits, _, diff, _) => Some(integer_of(bits, diff)),
    }
}

/// The bytes after the first component of an ascending key, found without decoding it.
pub fn skip_key_value(key: &[u8]) -> Result<&[u8]> {
    let len = match key.first() {
        Some(&TAG_NULL) => Some(1),
        Some(&TAG_NUM) => number_parts(key, 0).map(|p| p.3),
        Some(&(TAG_TEXT | TAG_BLOB)) => {
            let mut i = 1;
            loop {
                match key.get(i..i + 2) {
                    Some([0, 0x01]) => break Some(i + 2),
                    Some([0, _]) => i += 2,
                    Some(_) => i += 1,
                    None => break None,
                }
            }
        }
        _ => None,
    };
    len.and_then(|n| key.get(n..))
        .ok_or_else(|| Error::corrupt("key ends inside a value".into()))
}

/// Decodes one key component from the front of `key`, returning the value and the rest.
/// `desc` must match how it was encoded.
pub fn decode_key_value(key: &[u8], desc: bool) -> Result<(Value, &[u8])> {
    let byte = |i: usize| -> Result<u8> {
        key.get(i)
            .map(|b| if desc { !*b } else { *b })
            .ok_or_else(|| Error::corrupt("key ends inside a value".into()))
    };
    match byte(0)? {
        TAG_NULL => Ok((Value::Null, &key[1..])),
        TAG_NUM => {
            let (bits, end, diff, len) = number_parts(key, if desc { 0xFF } else { 0 })
                .ok_or_else(|| Error::corrupt("malformed number in key".into()))?;
            let v = match end {
                REAL_MARK => Value::Real(unordered_f64(bits)),
                _ => Value::Integer(integer_of(bits, diff)),
            };
            Ok((v, &key[len..]))
        }
        tag @ (TAG_TEXT | TAG_BLOB) => {
            let mut bytes = Vec::new();
            let mut i = 1;
            loop {
                let b = byte(i)?;
                if b == 0 {
                    match byte(i + 1)? {
                        0xFF => bytes.push(0),
                        0x01 => break,
                        x => return Err(Error::corrupt(format!("bad escape {x:#x} in key"))),
                    }
                    i += 2;
                } else {
                    bytes.push(b);
                    i += 1;
                }
            }
            let rest = &key[i + 2..];
            if tag == TAG_TEXT {
                let s = String::from_utf8(bytes)
                    .map_err(|_| Error::corrupt("text in key is not UTF-8".into()))?;
                Ok((Value::Text(s), rest))
            } else {
                Ok((Value::Blob(bytes), rest))
            }
        }
        t => Err(Error::corrupt(format!("unknown key tag {t:#x}"))),
    }
}

/// Decodes a key of ascending components.
pub fn decode_key(mut key: &[u8]) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    while !key.is_empty() {
        let (v, rest) = decode_key_value(key, false)?;
        out.push(v);
        key = rest;
    }
    Ok(out)
}

// ---- varints (LEB128, unsigned) ----

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
const ST_TEXT: u64 = 13;

fn serial_type(v: &Value) -> u64 {
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
        if self.patch_into(rec, n, &new, out) {
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
    fn patch_into<'v>(
        &self,
        rec: &[u8],
        n: usize,
        new: &impl Fn(usize) -> Option<&'v Value>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use Value::*;

    fn samples() -> Vec<Value> {
        vec![
            Null,
            Integer(i64::MIN),
            Integer(-9_000_000_000_000_000_001),
            Integer(-8_999_999_999_999_999_999),
            Integer(-(1 << 53) - 1),
            Real(-1e300),
            Integer(-2),
            Real(-1.5),
            Integer(-1),
            Integer(0),
            Real(0.0),
            Real(0.25),
            Integer(1),
            Integer(2),
            Real(2.5),
            Integer(1 << 53),
            Integer((1 << 53) + 1),
            Real(1e18),
            Integer(8_999_999_999_999_999_999),
            Integer(9_000_000_000_000_000_001),
            Integer(i64::MAX - 1),
            Integer(i64::MAX),
            Real(1e300),
            Text(String::new()),
            Text("a".into()),
            Text("a\0".into()),
            Text("a\0b".into()),
            Text("ab".into()),
            Text("é".into()),
            Blob(vec![]),
            Blob(vec![0]),
            Blob(vec![0, 0]),
            Blob(vec![1]),
            Blob(vec![0xFF, 0xFF]),
        ]
    }

    #[test]
    fn key_integer_reads_what_decode_key_value_decodes() {
        for v in samples() {
            let mut k = Vec::new();
            encode_key_value(&mut k, &v, false);
            k.push(7);
            let want = match decode_key_value(&k, false).unwrap().0 {
                Integer(i) => Some(i),
                _ => None,
            };
            assert_eq!(key_integer(&k), want, "{v:?}");
        }
        assert_eq!(key_integer(&[TAG_NUM]), None);
    }

    #[test]
    fn get_into_reuses_buffers_and_matches_get() {
        let rows = [
            vec![
                Integer(1),
                Text("hello".into()),
                Blob(vec![1, 2]),
                Null,
                Real(1.5),
            ],
            vec![
                Text("x".into()),
                Null,
                Blob(vec![]),
                Text("".into()),
                Integer(-7),
            ],
            vec![Null, Text("a longer text than before".into()), Integer(300)],
        ];
        let mut slots = [Text("old".into()), Blob(vec![9; 4]), Integer(0), Null, Null];
        for r in &rows {
            let buf = encode_record(r);
            let rec = Record::new(&buf).unwrap();
            for (i, slot) in slots.iter_mut().enumerate() {
                rec.get_into(i, slot).unwrap();
                assert_eq!(*slot, rec.get(i).unwrap(), "column {i} of {r:?}");
            }
        }
        let mut t = Text(String::with_capacity(64));
        let buf = encode_record(&[Text("abc".into())]);
        Record::new(&buf).unwrap().get_into(0, &mut t).unwrap();
        assert!(matches!(&t, Text(s) if s == "abc" && s.capacity() >= 64));
    }

    #[test]
    fn layout_reads_every_column_as_record_get_does() {
        let long = "x".repeat(300);
        let rows = [
            samples(),
            vec![
                Text(long.clone()),
                Integer(5),
                Blob(vec![7; 70]),
                Null,
                Real(2.5),
            ],
            vec![Integer(1), Text(long), Integer(-300)],
            vec![],
        ];
        let mut layout = Layout::default();
        let mut slot = Null;
        for r in &rows {
            let buf = encode_record(r);
            let rec = Record::new(&buf).unwrap();
            // Columns past `upto` are located when asked for.
            for upto in [0, 2, usize::MAX] {
                let fields = layout.read(&buf, upto).unwrap();
                // One past the end: a column added after the row was written reads as NULL.
                for i in (0..=r.len()).rev() {
                    let want = rec.get(i).unwrap();
                    fields.get_into(i, &mut slot).unwrap();
                    assert_eq!(slot, want, "column {i} of {r:?}");
                    let f = fields.field(i).unwrap();
                    let same = match (f, &want) {
                        (Field::Null, Null) => true,
                        (Field::Integer(a), Integer(b)) => a == *b,
                        (Field::Real(a), Real(b)) => a == *b,
                        (Field::Text(a), Text(b)) => a == b.as_bytes(),
                        (Field::Blob(a), Blob(b)) => a == b.as_slice(),
                        _ => false,
                    };
                    assert!(same, "column {i} of {r:?}: {f:?}");
                }
            }
        }
    }

    #[test]
    fn layout_refuses_records_whose_columns_run_past_the_end() {
        let mut layout = Layout::default();
        let buf = encode_record(&[Integer(1000), Text("abc".into())]);
        // Found when the header is walked, or when the column is read.
        let short = &buf[..buf.len() - 1];
        assert!(layout.read(short, 2).and_then(|f| f.field(1)).is_err());
        assert!(layout.read(&buf[..2], 2).is_err());
        // A text claiming 2^62 bytes.
        let mut big = vec![1];
        put_varint(&mut big, ST_TEXT + (1 << 63));
        assert!(layout.read(&big, 1).is_err());
        assert!(layout.read_all(&big).is_err());
        assert!(layout.read_all(&buf[..2]).is_err());
        // A reserved serial type is refused when read.
        assert!(layout.read(&[1, 10], 1).unwrap().field(0).is_err());
    }

    #[test]
    fn key_order_matches_value_order() {
        let s = samples();
        for a in &s {
            for b in &s {
                let ka = encode_key(std::slice::from_ref(a));
                let kb = encode_key(std::slice::from_ref(b));
                let want = a.total_cmp(b);
                // Equal numbers of different kinds sort integer first, deterministically.
                if want != std::cmp::Ordering::Equal || a.type_name() == b.type_name() {
                    assert_eq!(ka.cmp(&kb), want, "{a:?} vs {b:?}");
                }
                let da = encode_key_desc(a);
                let db = encode_key_desc(b);
                if want != std::cmp::Ordering::Equal {
                    assert_eq!(da.cmp(&db), want.reverse(), "desc {a:?} vs {b:?}");
                }
            }
        }
    }

    /// Numbers of every magnitude, the integers beside the reals nearest them, each followed
    /// by a second column: the keys sort as the values do, column by column, both directions,
    /// and decode to what was encoded.
    #[test]
    fn number_keys_order_and_round_trip_at_every_magnitude() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut vals = vec![];
        for shift in 0..64 {
            let r = next() >> shift;
            for i in [
                r as i64,
                -(r as i64),
                (r as i64).wrapping_add(1),
                (r as i64) - 1,
            ] {
                vals.push(Integer(i));
                vals.push(Real(i as f64));
                vals.push(Real(i as f64 + 0.5));
            }
            vals.push(Real(f64::from_bits(next() >> 2)));
            vals.push(Real(-f64::from_bits(next() >> 2)));
        }
        for i in [0, 1, -1, 8191, 8192, 1 << 53, i64::MIN, i64::MAX] {
            vals.push(Integer(i));
        }
        vals.extend([
            Real(f64::MIN_POSITIVE),
            Real(-f64::MIN_POSITIVE),
            Real(f64::MAX),
        ]);
        vals.extend([Real(f64::INFINITY), Real(f64::NEG_INFINITY), Real(5e-324)]);
        for a in &vals {
            for desc in [false, true] {
                let mut k = Vec::new();
                encode_key_value(&mut k, a, desc);
                let (back, rest) = decode_key_value(&k, desc).unwrap();
                assert!(rest.is_empty() && back == *a && back.type_name() == a.type_name());
            }
            let ka = encode_key(&[a.clone(), Integer(0)]);
            assert_eq!(
                key_integer(&ka),
                if let Integer(i) = a { Some(*i) } else { None }
            );
            for b in vals.iter().step_by(7) {
                let kb = encode_key(&[b.clone(), Integer(-1)]);
                let mut want = a.total_cmp(b);
                if want == std::cmp::Ordering::Equal {
                    want = a.type_name().cmp(b.type_name()); // "integer" first
                    if want == std::cmp::Ordering::Equal {
                        want = std::cmp::Ordering::Greater; // 0 after -1
                    }
                }
                assert_eq!(ka.cmp(&kb), want, "{a:?} vs {b:?}");
                let (da, db) = (encode_key_desc(a), encode_key_desc(b));
                if a.total_cmp(b) != std::cmp::Ordering::Equal {
                    assert_eq!(da.cmp(&db), want.reverse(), "desc {a:?} vs {b:?}");
                }
            }
        }
    }

    #[test]
    fn skip_key_value_skips_what_decode_key_value_decodes() {
        let s = samples();
        let mut k = encode_key(&s);
        k.push(9);
        let mut rest = &k[..];
        for _ in &s {
            let skipped = skip_key_value(rest).unwrap();
            assert_eq!(skipped, decode_key_value(rest, false).unwrap().1);
            rest = skipped;
        }
        assert_eq!(rest, &[9]);
        for bad in [&[0x10u8, 0x81][..], &[0x30, b'a', 0], &[0x99], &[]] {
            assert!(skip_key_value(bad).is_err(), "{bad:?}");
        }
    }

    /// The examples `docs/file-format.md` gives.
    #[test]
    fn number_keys_are_as_documented() {
        let hex = |v: Value| {
            let k = encode_key(&[v]);
            k.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(hex(Integer(0)), "10 c0 02");
        assert_eq!(hex(Integer(1)), "10 df fc 02");
        assert_eq!(hex(Integer(10000)), "10 e0 b0 f1 02");
        assert_eq!(hex(Real(2.5)), "10 e0 81 02 ff");
        assert_eq!(hex(Real(-0.0)), hex(Real(0.0)));
    }

    /// What the encoding is for: small integer keys (row ids) take a few bytes, not twelve.
    #[test]
    fn small_integers_take_few_bytes() {
        let len = |i: i64| encode_key(&[Integer(i)]).len();
        assert_eq!(len(0), 3);
        assert_eq!(len(1), 4);
        assert!((2..=8192).all(|i| len(i) <= 6));
        assert!((8193..=1 << 20).step_by(997).all(|i| len(i) <= 7));
        assert!(len(1 << 53) <= 12 && len(i64::MAX) <= 14);
    }

    fn encode_key_desc(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key_value(&mut out, v, true);
        out
    }

    #[test]
    fn composite_keys_order_column_by_column() {
        let a = encode_key(&[Text("a".into()), Integer(9)]);
        let b = encode_key(&[Text("a".into()), Integer(10)]);
        let c = encode_key(&[Text("ab".into()), Integer(0)]);
        assert!(a < b && b < c);
    }

    #[test]
    fn keys_and_records_round_trip() {
        let s = samples();
        for v in &s {
            let k = encode_key(std::slice::from_ref(v));
            let back = decode_key(&k).unwrap();
            assert_eq!(back.len(), 1);
            assert_eq!(back[0].type_name(), v.type_name(), "{v:?}");
            assert_eq!(&back[0], v);
            let kd = encode_key_desc(v);
            let (d, rest) = decode_key_value(&kd, true).unwrap();
            assert!(rest.is_empty());
            assert_eq!(&d, v);
        }
        let rec = encode_record(&s);
        let back = decode_record(&rec).unwrap();
        assert_eq!(back, s);
        let r = Record::new(&rec).unwrap();
        assert_eq!(r.get(21).unwrap(), s[21]);
        assert_eq!(r.get(s.len() + 3).unwrap(), Null);
    }

    /// Several columns in one walk read what `get` reads one by one, into slots that held
    /// other values (buffers reused), past the record's end as NULL, and in any order.
    #[test]
    fn get_cols_into_reads_what_get_reads() {
        let s = samples();
        let rec = encode_record(&s);
        let r = Record::new(&rec).unwrap();
        let n = s.len() + 2;
        for cols in [
            (0..n).collect::<Vec<_>>(),
            (0..n).step_by(3).collect(),
            vec![1, s.len() + 1],
            vec![5, 2, 9],
            vec![],
        ] {
            let mut out = vec![Text("stale".into()); n];
            r.get_cols_into(&cols, &mut out).unwrap();
            for &c in &cols {
                let want = r.get(c).unwrap();
                assert_eq!(out[c].type_name(), want.type_name(), "column {c}");
                assert_eq!(out[c], want, "column {c}");
            }
        }
    }

    #[test]
    fn a_rewritten_record_is_the_encoding_of_the_changed_row() {
        let vals = samples();
        let mut layout = Layout::default();
        // Rows of every sample value, rewritten with others in place of some columns, as
        // fewer columns (added later, so read as NULL) and as more, with the columns located
        // up front or not.
        for (i, w) in vals.windows(4).enumerate() {
            let row = w.to_vec();
            let rec = encode_record(&row);
            let repl = &vals[(i * 7 + 3) % vals.len()];
            for n in [2, 4, 6] {
                for changed in [vec![], vec![0], vec![1, 3], vec![0, 1, 2, 3], vec![5]] {
                    let new = |c: usize| changed.contains(&c).then_some(repl);
                    let mut want: Vec<Value> = (0..n)
                        .map(|c| row.get(c).cloned().unwrap_or(Null))
                        .collect();
                    for (c, v) in want.iter_mut().enumerate() {
                        if let Some(x) = new(c) {
                            *v = x.clone();
                        }
                    }
                    // `read_all` as well (`None`), as the writers call it.
                    for upto in [Some(0), Some(2), Some(usize::MAX), None] {
                        let f = match upto {
                            Some(upto) => layout.read(&rec, upto),
                            None => layout.read_all(&rec),
                        };
                        let f = f.unwrap();
                        let mut out = vec![9];
                        f.rewrite_into(&rec, n, new, &mut out).unwrap();
                        assert_eq!(out, encode_record(&want), "{row:?} n={n} {changed:?}");
                    }
                }
            }
        }
        // A record whose bodies are shorter than its header says is corrupt, not a panic.
        let rec = encode_record(&[Text("abc".into()), Integer(1000)]);
        let short = &rec[..rec.len() - 1];
        let f = layout.read(short, 2).unwrap();
        assert!(f.rewrite_into(short, 2, |_| None, &mut Vec::new()).is_err());
        let f = layout.read_all(short).unwrap();
        assert!(f.rewrite_into(short, 2, |_| None, &mut Vec::new()).is_err());
    }

    /// New values as long as the old ones are written over them (`patch_into`), the others
    /// make the record again; either way the record is the changed row's encoding.
    #[test]
    fn new_values_as_long_as_the_old_ones_are_written_over_them() {
        let long = "é".repeat(40);
        let row = vec![
            Integer(-2),
            Text("abc".into()),
            Integer(300),
            Real(1.5),
            Integer(1),
            Null,
            Blob(vec![1, 2, 3]),
            Integer(127),
            Integer(i64::MAX),
            Integer(0),
        ];
        // (column, new value, whether it is written over the old one)
        let cases = [
            (0, Integer(5), true),
            (0, Integer(-128), true),
            (0, Integer(-129), false),
            (0, Integer(0), false),
            (1, Text("xyz".into()), true),
            (1, Text("xy".into()), false),
            (1, Blob(b"xyz".to_vec()), true),
            (1, Null, false),
            (2, Integer(-301), true),
            (2, Integer(32767), true),
            (2, Integer(32768), false),
            (2, Integer(100), false),
            (3, Real(-2.25), true),
            (3, Integer(1 << 40), true),
            (3, Integer(7), false),
            (4, Integer(1), true),
            (4, Integer(0), true),
            (4, Null, true),
            (4, Integer(2), false),
            (5, Integer(0), true),
            (5, Integer(1), true),
            (5, Integer(-1), false),
            (5, Text(String::new()), true),
            (6, Blob(vec![9, 9, 9]), true),
            (6, Text("abc".into()), true),
            (6, Blob(vec![]), false),
            (7, Integer(-128), true),
            (7, Integer(128), false),
            (8, Integer(i64::MIN), true),
            (8, Real(0.5), true),
            (8, Integer(i32::MAX as i64), false),
            (9, Integer(1), true),
            (9, Null, true),
            (9, Real(0.0), false),
        ];
        let mut layout = Layout::default();
        for wide in [false, true] {
            // `wide`: a column of text long enough for a two-byte serial type, so that the
            // serial types are found by the header's general walk, and a new type must be
            // the same type to take the old one's place.
            let mut row = row.clone();
            if wide {
                row.push(Text(long.clone()));
            }
            let rec = encode_record(&row);
            for (c, v, fits) in &cases {
                let mut want = row.clone();
                want[*c] = v.clone();
                let same = serial_type(v) == serial_type(&row[*c]);
                for upto in [Some(0), Some(c + 1), Some(usize::MAX), None] {
                    let f = match upto {
                        Some(upto) => layout.read(&rec, upto),
                        None => layout.read_all(&rec),
                    };
                    let f = f.unwrap();
                    let new = |i: usize| (i == *c).then_some(v);
                    let mut out = Vec::new();
                    let patched = f.patch_into(&rec, row.len(), &new, &mut out);
                    assert_eq!(patched, *fits && (!wide || same), "{c}: {v:?} wide={wide}");
                    if patched {
                        assert_eq!(out, encode_record(&want), "{c}: {v:?} wide={wide}");
                    }
                    f.rewrite_into(&rec, row.len(), new, &mut out).unwrap();
                    assert_eq!(out, encode_record(&want), "{c}: {v:?} wide={wide}");
                    // Not as many columns as the record: made again.
                    let n = row.len() + 1;
                    assert!(!f.patch_into(&rec, n, &new, &mut out));
                }
            }
            // Several columns at once, one of them set to the text of the long column.
            let set = [(0, Integer(7)), (3, Real(9.75)), (9, Integer(1))];
            let new = |i: usize| set.iter().find(|(c, _)| *c == i).map(|(_, v)| v);
            let mut want = row.clone();
            for (c, v) in &set {
                want[*c] = v.clone();
            }
            let f = layout.read_all(&rec).unwrap();
            let mut out = Vec::new();
            assert_eq!(f.patch_into(&rec, row.len(), &new, &mut out), !wide);
            f.rewrite_into(&rec, row.len(), new, &mut out).unwrap();
            assert_eq!(out, encode_record(&want));
            if wide {
                let last = row.len() - 1;
                let t = Text("ê".repeat(40));
                want[last] = t.clone();
                let new = |i: usize| (i == last).then_some(&t);
                let f = layout.read(&rec, 0).unwrap();
                assert!(f.patch_into(&rec, row.len(), &new, &mut out));
                assert_eq!(
                    out,
                    encode_record(&{
                        let mut w = row.clone();
                        w[last] = t.clone();
                        w
                    })
                );
            }
        }
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        for bad in [
            &[0x10u8, 1, 2][..],
            &[0x30, b'a'],
            &[0x30, 0, 7],
            &[0x99],
            &[0x10; 12],
        ] {
            assert!(decode_key(bad).is_err(), "{bad:?}");
        }
        for bad in [
            &[0xFFu8][..],
            &[3, 1, 1],
            &[1, 40, b'x'],
            &[200, 1],
            &[1, 11],
        ] {
            assert!(decode_record(bad).is_err(), "{bad:?}");
        }
    }
}
