use super::key::TAG_NUM;
use super::record::{serial_type, ST_TEXT};
use super::*;
use crate::Value;
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
