//! Decimal text to `f64`, for the SQL engine (number literals, text to REAL, rounding).
//!
//! Natively this is `str::parse`. In the browser the same text goes to JavaScript's
//! `parseFloat`, which rounds correctly too: Rust's correctly rounded parser carries a 10 KB
//! table of powers of five and its own big-number fallback, about 15 KB of a module that is
//! downloaded, against one import here. `parseFloat` accepts more than Rust does (leading space,
//! a valid prefix of anything, `Infinity`), so the text is first checked against Rust's grammar
//! ([`is_decimal`]), and `inf`/`infinity`/`nan` are handled here.

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

#[cfg(test)]
mod tests {
    use super::*;

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
