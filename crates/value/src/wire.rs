//! The sync wire encoding of a value (docs/sync.md sec. 2): a tag byte, then an integer's zigzag
//! varint, a real's bits little-endian, or a text's or blob's varint length and bytes. The sync
//! layer's records hold values so, and the SQL engine's capture of a replicated table's changes
//! writes them straight into that form; both append through here. The reader, which must refuse
//! hostile input with the sync layer's own errors, is `cairn_sync`'s.

use crate::Value;

/// Appends `v` as a LEB128 varint: seven bits a byte, low bits first, the high bit set on every
/// byte but the last.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded (0, -1, 1, -2, ... as 0, 1, 2, 3, ...) as a varint.
#[inline]
pub fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends `v` in the wire encoding of a value.
#[inline(always)]
pub fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0),
        Value::Integer(i) => {
            out.push(1);
            put_zigzag(out, *i);
        }
        Value::Real(r) => {
            out.push(2);
            out.extend_from_slice(&r.to_bits().to_le_bytes());
        }
        Value::Text(s) => {
            out.push(3);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Blob(b) => {
            out.push(4);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_encode_as_documented() {
        let enc = |v: Value| {
            let mut out = Vec::new();
            put_value(&mut out, &v);
            out
        };
        assert_eq!(enc(Value::Null), [0]);
        assert_eq!(enc(Value::Integer(0)), [1, 0]);
        assert_eq!(enc(Value::Integer(-1)), [1, 1]);
        assert_eq!(enc(Value::Integer(64)), [1, 0x80, 0x01]);
        assert_eq!(enc(Value::Integer(i64::MIN)).len(), 11);
        assert_eq!(
            enc(Value::Real(1.5)),
            [&[2][..], &1.5f64.to_bits().to_le_bytes()].concat()
        );
        assert_eq!(enc(Value::Text("hé".into())), [3, 3, b'h', 0xC3, 0xA9]);
        assert_eq!(enc(Value::Blob(vec![0; 200]))[..3], [4, 0xC8, 0x01]);
    }
}
