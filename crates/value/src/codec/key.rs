//! The order-preserving key encoding that table and index trees are keyed by. Each value is a tag
//! byte and a payload; a composite key is the concatenation. Comparing two encoded keys bytewise
//! gives the same answer as comparing the values in SQL order ([`Value::total_cmp`]), column by
//! column. Integers and reals share one numeric tag and interleave by value; a trailing byte tells
//! an integer from an equal real, so a key decodes to exactly the value that was encoded (an
//! integer sorts just before an equal real). Text and blobs escape 0x00 as 0x00 0xFF and end with
//! 0x00 0x01, so a prefix sorts before its extensions. A descending column has every byte of its
//! component inverted.
//!
//! Hands encoded keys to the SQL layer, which stores them as the store's tree keys; nothing here
//! depends on the record encoding.

use crate::Value;
use crate::{Error, Result};

const TAG_NULL: u8 = 0x05;
pub(super) const TAG_NUM: u8 = 0x10;
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
