//! Decimal text to `f64` and back, for the SQL engine (number literals, text to REAL, rounding,
//! REAL to text).
//!
//! Text to `f64`: natively this is `str::parse`. In the browser the same text goes to JavaScript's
//! `parseFloat`, which rounds correctly too: Rust's correctly rounded parser carries a 10 KB
//! table of powers of five and its own big-number fallback, about 15 KB of a module that is
//! downloaded, against one import here. `parseFloat` accepts more than Rust does (leading space,
//! a valid prefix of anything, `Infinity`), so the text is first checked against Rust's grammar
//! ([`is_decimal`]), and `inf`/`infinity`/`nan` are handled here.
//!
//! `f64` to decimal digits ([`exp_digits`]): natively `format!("{:.*e}")`. In the browser it is
//! JavaScript's `toExponential`, which rounds exactly too, but breaks a tie (a value exactly
//! halfway between two roundings) upwards where Rust breaks it to the even digit; such values are
//! short in decimal, so they are found with integer arithmetic and rounded here
//! (`round_tie_to_even`); [`fixed`] does the same with `toFixed`. Rust's float formatting
//! (`flt2dec`: Grisu with a Dragon4 fallback, for both the shortest and the exact digits) was
//! about 20 KB of the downloaded module.

/// `s` as an `f64`, exactly when `s.parse::<f64>()` succeeds, with the same value.
pub fn parse_f64(s: &str) -> Option<f64> {
    #[cfg(target_arch = "wasm32")]
    {
        let (neg, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let special = if rest.eq_ignore_ascii_case("inf") || rest.eq_ignore_ascii_case("infinity") {
            Some(f64::INFINITY)
        } else if rest.eq_ignore_ascii_case("nan") {
            Some(f64::NAN)
        } else {
            None
        };
        if let Some(v) = special {
            return Some(if neg { -v } else { v });
        }
        if !is_decimal(s) {
            return None;
        }
        Some(js_sys::parse_float(s))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        s.parse().ok()
    }
}

/// Whether `s` is a decimal number as `f64::from_str` reads it: an optional sign, digits with at
/// most one `.` (at least one digit in all), and an optional exponent (`e` or `E`, an optional
/// sign, at least one digit).
pub fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut n = digits(&mut i);
    if i < b.len() && b[i] == b'.' {
        i += 1;
        n += digits(&mut i);
    }
    if n == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// The first `p` (1 to 17) significant decimal digits of `r` (finite, non-zero; its sign is
/// ignored), rounded to nearest with ties to even, and the decimal exponent of the first digit:
/// what `format!("{:.*e}", p - 1, r.abs())` prints, without the point. `p` digits always (a
/// rounding up to the next power of ten raises the exponent).
pub fn exp_digits(r: f64, p: usize) -> (String, i32) {
    debug_assert!(r.is_finite() && r != 0.0 && (1..=17).contains(&p));
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(tie) = round_tie_to_even(r, p) {
            return tie;
        }
        // (Not `expect`: formatting the `JsValue` error would link float formatting back in.)
        match js_sys::Number::from(r.abs()).to_exponential((p - 1) as u8) {
            Ok(text) => split_exp(&String::from(text)),
            Err(_) => unreachable!("invariant: toExponential takes 0 to 100 digits"),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        split_exp(&format!("{:.*e}", p - 1, r.abs()))
    }
}

/// `d.ddde±x` (Rust's or JavaScript's exponent form) as the digits and the exponent.
fn split_exp(text: &str) -> (String, i32) {
    let (mant, exp) = text
        .split_once(['e', 'E'])
        .expect("invariant: exponent form has an exponent");
    let digits = mant
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(char::from)
        .collect();
    let exp = exp.parse().expect("invariant: the exponent is an integer");
    (digits, exp)
}

/// `r` with `n` decimals (at most 30), rounded to nearest with ties to even: what
/// `format!("{:.*}", n, r)` prints, for `|r|` below 1e21 (beyond that JavaScript switches to
/// exponent form).
pub fn fixed(r: f64, n: usize) -> String {
    debug_assert!(r.abs() < 1e21 && n <= 30);
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(tie) = fixed_tie_to_even(r, n) {
            return tie;
        }
        match js_sys::Number::from(r.abs()).to_fixed(n as u8) {
            // Not `format!`: core's formatting stays out of the common statements' code.
            Ok(text) => {
                let mut s = String::from(text);
                if r.is_sign_negative() {
                    s.insert(0, '-');
                }
                s
            }
            Err(_) => unreachable!("invariant: toFixed takes 0 to 100 digits"),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        format!("{:.*}", n, r)
    }
}

/// When `|r|` is exactly halfway between two decimals of `n` places, `r` with `n` decimals
/// rounded to even; otherwise None.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn fixed_tie_to_even(r: f64, n: usize) -> Option<String> {
    let (v, e) = exact_decimal(r)?;
    if v % 10 != 5 || e != -(n as i32) - 1 {
        return None;
    }
    let mut digits = decimal(to_even(v / 10));
    if digits.len() <= n {
        digits.insert_str(0, &"0".repeat(n + 1 - digits.len()));
    }
    if n > 0 {
        digits.insert(digits.len() - n, '.');
    }
    if r.is_sign_negative() {
        digits.insert(0, '-');
    }
    Some(digits)
}

/// When `|r|` is exactly halfway between two `p`-digit decimals (its exact decimal value has
/// `p + 1` significant digits, the last a 5), the `p` digits rounded to even, and the exponent
/// of the first; otherwise None, and nearest rounding has one answer.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn round_tie_to_even(r: f64, p: usize) -> Option<(String, i32)> {
    let (v, e10) = exact_decimal(r)?;
    let low = 10u128.pow(p as u32);
    if v % 10 != 5 || v < low || v >= low * 10 {
        return None;
    }
    // |r| = v * 10^e10 with v of p + 1 digits: the first digit's exponent is p + e10.
    let n = to_even(v / 10);
    if n == low {
        Some((decimal(n / 10), p as i32 + e10 + 1))
    } else {
        Some((decimal(n), p as i32 + e10))
    }
}

/// `n`, or `n + 1` if `n` is odd: the kept digits of a tie rounded to even.
fn to_even(n: u128) -> u128 {
    n + n % 2
}

/// `|r|` exactly as `v * 10^e` with `v` not a multiple of 10, when `v` fits in a `u128`.
///
/// `|r| = m * 2^q` with `m` odd. For `q < 0` that is `m * 5^-q * 10^q`. For `q >= 0` it is an
/// integer. A value that is a tie at up to 30 decimals or up to 17 digits always fits: `v` ends
/// in 5 then, so for `q < 0`, `-q` is the number of decimals, and for `q >= 0`, `m = v * 5^q`
/// with `m < 2^53`.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn exact_decimal(r: f64) -> Option<(u128, i32)> {
    let bits = r.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (mut m, mut q) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    };
    if m == 0 || biased == 0x7ff {
        return None;
    }
    let tz = m.trailing_zeros();
    m >>= tz;
    q += tz as i32;
    if q >= 0 {
        let mut v = u128::from(m)
            .checked_shl(q as u32)
            .filter(|v| v >> q == u128::from(m))?;
        let mut z = 0;
        while v % 10 == 0 {
            v /= 10;
            z += 1;
        }
        Some((v, z))
    } else {
        let v = 5u128
            .checked_pow(q.unsigned_abs())?
            .checked_mul(u128::from(m))?;
        Some((v, q))
    }
}

/// `n` in decimal (without linking `u128`'s formatting).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn decimal(mut n: u128) -> String {
    let mut d = Vec::new();
    loop {
        d.push(b'0' + (n % 10) as u8);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Digits to chars directly: `String::from_utf8` would link its error's formatting.
    d.iter().rev().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds one to the last of decimal digits `d`, carrying; true when the carry ran off the
    /// front (a `1` is then put there, one digit more).
    fn round_up(d: &mut Vec<u8>) -> bool {
        for i in (0..d.len()).rev() {
            if d[i] == b'9' {
                d[i] = b'0';
            } else {
                d[i] += 1;
                return false;
            }
        }
        d.insert(0, b'1');
        true
    }

    /// What JavaScript's `toExponential(p - 1)` gives (nearest, ties away from zero), from the
    /// exact decimal value (a double's has at most 767 significant digits).
    fn js_exp_digits(r: f64, p: usize) -> (String, i32) {
        let (exact, exp) = split_exp(&format!("{:.800e}", r.abs()));
        let mut d: Vec<u8> = exact.bytes().take(p).collect();
        let mut exp = exp;
        if exact.as_bytes()[p] >= b'5' && round_up(&mut d) {
            d.pop();
            exp += 1;
        }
        (String::from_utf8(d).unwrap(), exp)
    }

    /// What JavaScript's `toFixed(n)` gives (nearest, ties away from zero), for `|r| < 1e21`.
    fn js_fixed(r: f64, n: usize) -> String {
        let exact = format!("{:.1100}", r.abs());
        let point = exact.find('.').unwrap();
        let mut d: Vec<u8> = exact[..point]
            .bytes()
            .chain(exact[point + 1..].bytes())
            .take(point + n)
            .collect();
        if exact.as_bytes()[point + 1 + n] >= b'5' {
            round_up(&mut d);
        }
        let mut s = String::from_utf8(d).unwrap();
        if n > 0 {
            s.insert(s.len() - n, '.');
        }
        if r.is_sign_negative() {
            s.insert(0, '-');
        }
        s
    }

    /// The browser's `fixed` (ties found here, the rest rounded as JavaScript does) prints what
    /// Rust prints.
    #[test]
    fn js_fixed_with_ties_to_even_matches_rust() {
        let mut values = vec![
            0.5,
            1.5,
            2.5,
            0.125,
            0.375,
            1.0 / 1024.0,
            2f64.powi(-30),
            0.1,
            -0.0,
        ];
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..3_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push((x % 1_000_000_000) as f64 / 2f64.powi((x >> 59) as i32));
            values.push((x >> 12) as f64 / 2f64.powi((x % 40) as i32 + 13));
            values.push(f64::from_bits(x) % 1e15);
        }
        for r in values {
            for r in [r, -r] {
                if !r.is_finite() {
                    continue;
                }
                for n in [0, 1, 2, 3, 7, 15, 20, 29, 30] {
                    let want = format!("{:.*}", n, r);
                    let got = fixed_tie_to_even(r, n).unwrap_or_else(|| js_fixed(r, n));
                    assert_eq!(got, want, "{r:e} to {n} decimals");
                }
            }
        }
    }

    /// The browser's path (ties found here, the rest rounded as JavaScript does) gives Rust's
    /// digits, on ties, near-ties and arbitrary doubles.
    #[test]
    fn js_digits_with_ties_to_even_match_rust() {
        let mut values = vec![
            0.5,
            2.5,
            1.25,
            1.375,
            9.5,
            99.5,
            1e-300,
            5e-324,
            1.7976931348623157e308,
            0.1,
            1.0,
            1234567890123.125,
            123_456_789_012_345.0 + 0.125,
            999999999999999.5,
            9999999999999999.0,
            99999999999999995.0,
            4503599627370497.5,
            1e22,
            3e22,
            0.30000000000000004,
        ];
        // Ties at 15 and 17 digits: n * 2^-k with n odd, and integers m * 5^q * 2^q.
        for k in 1..=25 {
            for n in [
                1u64,
                3,
                5,
                7,
                123,
                999_999,
                123_456_789,
                4_503_599_627_370_497,
            ] {
                values.push(n as f64 / (1u64 << k.min(60)) as f64);
                values.push((n as f64 * 1e15) / (1u64 << k) as f64);
            }
        }
        for q in 0..=22u32 {
            let m = 5u64.pow(q) * 3;
            if m < 1 << 53 {
                values.push(m as f64 * 2f64.powi(q as i32));
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = f64::from_bits(x);
            if r.is_finite() && r != 0.0 {
                values.push(r);
            }
            // Short decimals, where ties live.
            values.push((x % 100_000_000) as f64 / 2f64.powi((x >> 58) as i32));
        }
        for r in values {
            for r in [r, -r] {
                if r == 0.0 || !r.is_finite() {
                    continue;
                }
                for p in [1, 2, 15, 16, 17] {
                    let want = exp_digits(r, p);
                    let got = round_tie_to_even(r, p).unwrap_or_else(|| js_exp_digits(r, p));
                    assert_eq!(got, want, "{r:e} to {p} digits");
                }
            }
        }
    }

    /// Every string over a small alphabet, up to a length, is a decimal exactly when std parses
    /// it as a finite-looking number (not one of the words).
    #[test]
    fn is_decimal_agrees_with_std() {
        let alphabet = ['0', '1', '.', 'e', 'E', '+', '-', ' ', 'x'];
        let mut strings = vec![String::new()];
        let mut all = Vec::new();
        for _ in 0..5 {
            let mut next = Vec::new();
            for s in &strings {
                for c in alphabet {
                    next.push(format!("{s}{c}"));
                }
            }
            all.extend(next.iter().cloned());
            strings = next;
        }
        all.push(String::new());
        for s in &all {
            assert_eq!(is_decimal(s), s.parse::<f64>().is_ok(), "{s:?}");
        }
    }

    #[test]
    fn parses_like_std() {
        for s in [
            "1",
            "-0",
            "1.",
            ".5",
            "+2.5e-3",
            "1e400",
            "-1e-400",
            "inf",
            "-Infinity",
            "NaN",
            "0x10",
            " 1",
            "1 ",
            "",
        ] {
            let want = s.parse::<f64>().ok();
            let got = parse_f64(s);
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{s:?}");
        }
    }
}
