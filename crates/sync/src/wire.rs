//! Byte-level primitives shared by every format (docs/sync.md sec. 2): a writer that appends and a
//! reader that never panics and never allocates more than the input could hold.

use crate::error::{Error, Result};
use cairn_value::wire::{put_value, put_varint, put_zigzag};
use cairn_value::Value;

pub type Hash = [u8; 32];
pub const ZERO_HASH: Hash = [0; 32];

#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer { buf: Vec::new() }
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u64le(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn varint(&mut self, v: u64) {
        put_varint(&mut self.buf, v);
    }
    pub fn zigzag(&mut self, v: i64) {
        put_zigzag(&mut self.buf, v);
    }
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.raw(b);
    }
    #[inline(always)]
    pub fn value(&mut self, v: &Value) {
        put_value(&mut self.buf, v);
    }
    pub fn values(&mut self, vs: &[Value]) {
        self.varint(vs.len() as u64);
        for v in vs {
            self.value(v);
        }
    }
}

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn malformed(what: &str) -> Error {
    Error::Malformed(what.to_string())
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// The bytes read since `start` (a position from `pos()`).
    pub fn slice_from(&self, start: usize) -> &'a [u8] {
        &self.buf[start.min(self.pos)..self.pos]
    }
    pub fn finish(&self) -> Result<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(malformed("trailing bytes"))
        }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(malformed("truncated"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u64le(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn varint(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return Err(malformed("varint overflows u64"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(malformed("non-minimal varint"));
                }
                return Ok(v);
            }
        }
        Err(malformed("varint too long"))
    }
    pub fn zigzag(&mut self) -> Result<i64> {
        let u = self.varint()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
    /// A count of items each at least `min_item` bytes long: refused if the input cannot hold
    /// them, so a hostile count never drives a huge allocation.
    pub fn count(&mut self, min_item: usize, max: u64) -> Result<usize> {
        let n = self.varint()?;
        if n > max {
            return Err(malformed("count out of range"));
        }
        let n = n as usize;
        if n.saturating_mul(min_item.max(1)) > self.remaining() {
            return Err(malformed("count exceeds input"));
        }
        Ok(n)
    }
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        if n > self.remaining() as u64 {
            return Err(malformed("truncated bytes"));
        }
        self.take(n as usize)
    }
    pub fn text(&mut self) -> Result<String> {
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| malformed("text is not UTF-8"))
    }
    pub fn value(&mut self) -> Result<Value> {
        Ok(match self.u8()? {
            0 => Value::Null,
            1 => Value::Integer(self.zigzag()?),
            2 => Value::Real(f64::from_bits(self.u64le()?)),
            3 => Value::Text(self.text()?),
            4 => Value::Blob(self.bytes()?.to_vec()),
            _ => return Err(malformed("unknown value tag")),
        })
    }
    pub fn values(&mut self, max: u64) -> Result<Vec<Value>> {
        let n = self.count(1, max)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.value()?);
        }
        Ok(out)
    }
}

/// Canonical bytes of a value (used to compare values exactly: `Value`'s own equality treats
/// 1 and 1.0 as equal, which merged state must not).
pub fn value_bytes(v: &Value) -> Vec<u8> {
    let mut w = Writer::new();
    w.value(v);
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_refusals() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut w = Writer::new();
            w.varint(v);
            let mut r = Reader::new(&w.buf);
            assert_eq!(r.varint(), Ok(v));
            assert!(r.is_empty());
        }
        assert!(Reader::new(&[0x80, 0x00]).varint().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        assert!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02])
                .varint()
                .is_err()
        );
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            let mut w = Writer::new();
            w.zigzag(v);
            assert_eq!(Reader::new(&w.buf).zigzag(), Ok(v));
        }
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        let mut w = Writer::new();
        w.varint(u64::MAX / 2);
        assert!(Reader::new(&w.buf).count(1, u64::MAX).is_err());
        assert!(Reader::new(&w.buf).values(u64::MAX).is_err());
    }
}
