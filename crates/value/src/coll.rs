//! The values of the merged collection kinds of replicated tables (docs/sync.md sec. 7, "Sets"
//! and "Maps"): the order their elements are read in and the JSON text they read as. One home
//! for both, so the SQL functions that write a set or a map and the sync layer that merges it
//! give the same text, byte for byte, on every replica.

use crate::wire::put_value;
use crate::Value;
use std::cmp::Ordering;

/// The order of a set's elements: NULL, then numbers by value (an INTEGER before a REAL equal
/// to it), then TEXT by its UTF-8 bytes; elements that compare equal are the same element.
pub fn elem_cmp(a: &Value, b: &Value) -> Ordering {
    a.total_cmp(b)
        .then_with(|| rank(a).cmp(&rank(b)))
        .then_with(|| {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            put_value(&mut x, a);
            put_value(&mut y, b);
            x.cmp(&y)
        })
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Integer(_) => 1,
        Value::Real(_) => 2,
        Value::Text(_) => 3,
        Value::Blob(_) => 4,
    }
}

/// Whether `v` may be a set's element or a map's value: JSON holds no BLOB, and a NaN would read
/// as `null`, another element.
pub fn fits(v: &Value) -> bool {
    match v {
        Value::Blob(_) => false,
        Value::Real(r) => !r.is_nan(),
        _ => true,
    }
}

/// The JSON array text of a set whose elements `elems` gives in [`elem_cmp`] order.
pub fn set_text<'a>(elems: impl Iterator<Item = &'a Value>) -> String {
    let mut out = String::from("[");
    for (i, v) in elems.enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_scalar(v, &mut out);
    }
    out.push(']');
    out
}

/// The JSON object text of a map whose entries `entries` gives in key order (UTF-8 bytes).
pub fn map_text<'a>(entries: impl Iterator<Item = (&'a str, &'a Value)>) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        escape_into(k, &mut out);
        out.push_str("\":");
        push_scalar(v, &mut out);
    }
    out.push('}');
    out
}

/// A SQL value as a JSON scalar, as SQLite's `json_quote` writes it (a BLOB, which [`fits`]
/// keeps out, as null).
pub fn push_scalar(v: &Value, out: &mut String) {
    match v {
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::Real(r) => match json_real(*r) {
            Some(t) => out.push_str(&t),
            None => out.push_str("null"),
        },
        Value::Text(s) => {
            out.push('"');
            escape_into(s, out);
            out.push('"');
        }
        Value::Null | Value::Blob(_) => out.push_str("null"),
    }
}

/// `s` escaped for the inside of a JSON string, as SQLite escapes SQL text.
pub fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 15] as char);
            }
            c => out.push(c),
        }
    }
}

/// A REAL as SQLite writes it into JSON (`%!0.17g`: up to 17 significant digits, fewer when
/// they read back as the same number; infinities 9.0e+999); None for NaN (JSON null).
pub fn json_real(r: f64) -> Option<String> {
    if r.is_nan() {
        return None;
    }
    if r.is_infinite() {
        return Some(if r < 0.0 { "-9.0e+999" } else { "9.0e+999" }.into());
    }
    if r == 0.0 {
        return Some("0.0".into());
    }
    let (mut d, mut exp) = crate::num::exp_digits(r, 17);
    let reads_as = |digits: &str, e: i32| {
        crate::num::parse_f64(&format!("{digits}e{}", e - digits.len() as i32 + 1)) == Some(r.abs())
    };
    // SQLite's shortening of 17 digits (sqlite3FpDecode): a run of 9s rounded up, or a run of
    // 0s cut, when what is left reads back as the same number.
    let b = d.as_bytes();
    if b[15] == b'9' && b[14] == b'9' {
        let mut jj = 14;
        while jj > 0 && b[jj - 1] == b'9' {
            jj -= 1;
        }
        let (cand, e) = if jj == 0 {
            ("1".to_string(), exp + 1)
        } else {
            (up_one(&d[..jj]), exp)
        };
        if reads_as(&cand, e) {
            d = cand;
            exp = e;
        }
    } else if &d[13..16] == "000" {
        let mut jj = 13;
        while d.as_bytes()[jj - 1] == b'0' {
            jj -= 1;
        }
        if reads_as(&d[..jj], exp) {
            d.truncate(jj);
        }
    }
    let d = d.trim_end_matches('0');
    let d = if d.is_empty() { "0" } else { d };
    let sign = if r < 0.0 { "-" } else { "" };
    Some(if !(-4..=16).contains(&exp) {
        let rest = if d.len() > 1 { &d[1..] } else { "0" };
        let (es, ea) = if exp < 0 { ('-', -exp) } else { ('+', exp) };
        let pad = if ea < 10 { "0" } else { "" };
        format!("{sign}{}.{rest}e{es}{pad}{ea}", &d[..1])
    } else if exp >= 0 {
        let e = exp as usize;
        let (int, frac) = if d.len() > e + 1 {
            (d[..e + 1].to_string(), &d[e + 1..])
        } else {
            (format!("{d}{}", "0".repeat(e + 1 - d.len())), "0")
        };
        format!("{sign}{int}.{frac}")
    } else {
        format!("{sign}0.{}{d}", "0".repeat((-exp - 1) as usize))
    })
}

/// Decimal digits plus one (`"129"` to `"130"`, `"99"` to `"100"`).
fn up_one(d: &str) -> String {
    let mut v: Vec<u8> = d.bytes().collect();
    let mut i = v.len();
    loop {
        if i == 0 {
            v.insert(0, b'1');
            break;
        }
        i -= 1;
        if v[i] == b'9' {
            v[i] = b'0';
        } else {
            v[i] += 1;
            break;
        }
    }
    String::from_utf8(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_read_in_one_order() {
        let mut v = [
            Value::Text("b".into()),
            Value::Real(1.0),
            Value::Integer(1),
            Value::Null,
            Value::Text("a".into()),
            Value::Integer(-3),
        ];
        v.sort_by(elem_cmp);
        assert_eq!(set_text(v.iter()), r#"[null,-3,1,1.0,"a","b"]"#);
        assert_eq!(
            map_text([("k\"", &Value::Real(0.5)), ("z", &Value::Null)].into_iter()),
            r#"{"k\"":0.5,"z":null}"#
        );
    }
}
