//! REAL to text and round() as the native build computes them, written to a fixture that the
//! browser tests run through the wasm build (`tests/browser/database.test.mjs`), where the
//! digits come from JavaScript's `toExponential` and `toFixed` instead of Rust's float
//! formatting (`cairn_value::num`). `CAIRN_BLESS=1` rewrites the fixture.

use cairn_sql::{Database, Value};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/browser/fixtures/reals.txt"
);

/// Values at the formatting's boundaries (15 or 17 digits, exponent form, the exact integer
/// part from 1e15, ties at 15 and 17 digits and at round()'s decimals) and arbitrary doubles.
fn samples() -> Vec<f64> {
    let mut v = vec![
        1.0,
        0.1,
        1.5,
        2.5,
        0.5,
        1e20,
        1e15,
        1e16,
        1e17,
        1e14,
        0.0001,
        0.00001,
        2.0 / 3.0,
        0.1 + 0.2,
        1e16 + 2.0,
        7.00000000000001e16,
        99999999999999995.0,
        999999999999999.9,
        0.00009999999999999999,
        1234567890123.125,
        123_456_789_012_345.0 + 0.125,
        4503599627370497.5,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        123456789012345678.0,
    ];
    for e in -25..=25 {
        let p = 10f64.powi(e);
        v.extend([p, p * 1.5, p * 9.999999999999999, p / 3.0]);
    }
    for k in 1..=25 {
        for n in [1u64, 3, 123_456_789, 4_503_599_627_370_497] {
            v.push(n as f64 / (1u64 << k) as f64);
            v.push(n as f64 * 1e15 / (1u64 << k) as f64);
        }
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..150 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = f64::from_bits(x);
        if r.is_finite() {
            v.push(r);
        }
        v.push((x % 1_000_000_000_000) as f64 / 10f64.powi((x >> 59) as i32));
        v.push((x >> 11) as f64 * 2f64.powi((x % 64) as i32 - 32));
    }
    let neg: Vec<f64> = v.iter().map(|r| -r).collect();
    v.extend(neg);
    v
}

/// The statement the browser test runs too. JavaScript binds an integral number as an INTEGER,
/// hence the CAST.
const SQL: &str = "WITH x(v) AS (SELECT CAST(?1 AS REAL)) \
                   SELECT CAST(v AS TEXT) AS t, round(v, 1) AS r1, round(v, 2) AS r2, round(v, 7) AS r7 FROM x";

/// One line a value: its bits in hex, `CAST(v AS TEXT)`, and the bits of `round(v, n)` for
/// n = 1, 2 and 7.
fn fixture() -> String {
    let mut db = Database::memory();
    let stmt = db.prepare(SQL).unwrap();
    let mut out = String::new();
    for r in samples() {
        let o = stmt.execute(&mut db, &[Value::Real(r)]).unwrap();
        let row = &o.rows()[0];
        let Value::Text(text) = &row[0] else {
            panic!("{row:?}")
        };
        out.push_str(&format!("{:016x} {text}", r.to_bits()));
        for v in &row[1..] {
            let Value::Real(x) = v else { panic!("{row:?}") };
            out.push_str(&format!(" {:016x}", x.to_bits()));
        }
        out.push('\n');
    }
    out
}

#[test]
fn browser_fixture_of_reals_is_current() {
    let want = fixture();
    if std::env::var("CAIRN_BLESS").is_ok() {
        std::fs::write(FIXTURE, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(FIXTURE).unwrap_or_default();
    assert!(
        have == want,
        "{FIXTURE} is out of date: run with CAIRN_BLESS=1"
    );
}
