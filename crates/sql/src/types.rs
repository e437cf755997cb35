//! SQLite's value semantics, on [`Value`]: column types and affinity, text-to-number conversion,
//! arithmetic with overflow to real, comparison, truth, number formatting, LIKE and GLOB.

use crate::error::{Error, Result};
use cairn_value::{num, Value};

/// A column's declared type, reduced as SQLite reduces declared types to affinities. cairn
/// enforces it as SQLite's STRICT tables do (see docs/sql.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    Integer,
    Real,
    Text,
    Blob,
    /// NUMERIC, DECIMAL, BOOLEAN, DATE...: integer or real.
    Numeric,
    /// No declared type, or ANY: anything goes.
    Any,
}

/// The affinity an expression carries into a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    Integer,
    Real,
    Numeric,
    Text,
    /// A BLOB or ANY column's: converts nothing, and (unlike None) does not take TEXT affinity
    /// from the other side of a comparison.
    Blob,
    /// An expression's: no affinity.
    None,
}

impl ColType {
    /// SQLite's rules for deriving an affinity from a declared type name (section 3.1 of
    /// "Datatypes In SQLite"), in its order.
    pub fn from_decl(decl: Option<&str>) -> ColType {
        let Some(d) = decl else { return ColType::Any };
        let d = d.to_ascii_uppercase();
        // A window search: the names are short, and `str::contains` with a `&str` would link
        // std's two-way searcher (about 1.8 KB of wasm) for this alone.
        let has = |w: &str| d.as_bytes().windows(w.len()).any(|x| x == w.as_bytes());
        if d == "ANY" {
            ColType::Any
        } else if has("INT") {
            ColType::Integer
        } else if has("CHAR") || has("CLOB") || has("TEXT") {
            ColType::Text
        } else if has("BLOB") {
            ColType::Blob
        } else if has("REAL") || has("FLOA") || has("DOUB") {
            ColType::Real
        } else {
            ColType::Numeric
        }
    }

    pub fn affinity(self) -> Affinity {
        match self {
            ColType::Integer => Affinity::Integer,
            ColType::Real => Affinity::Real,
            ColType::Text => Affinity::Text,
            ColType::Numeric => Affinity::Numeric,
            ColType::Blob | ColType::Any => Affinity::Blob,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ColType::Integer => "INTEGER",
            ColType::Real => "REAL",
            ColType::Text => "TEXT",
            ColType::Blob => "BLOB",
            ColType::Numeric => "NUMERIC",
            ColType::Any => "ANY",
        }
    }

    /// Converts `v` for storage in a column of this type, or refuses it (strict typing).
    pub fn coerce(self, v: Value, column: &str) -> Result<Value> {
        self.coerce_with(v, || column.to_string())
    }

    /// As [`ColType::coerce`], naming the column only if the value is refused (no allocation
    /// per row on the insert path).
    pub fn coerce_with(self, v: Value, column: impl FnOnce() -> String) -> Result<Value> {
        let v = match apply_affinity(v, self.affinity()) {
            // SQLite stores an integral real as an integer on disk, so -0.0 reads back as 0.0.
            Value::Real(r) => Value::Real(if r == 0.0 { 0.0 } else { r }),
            v => v,
        };
        let ok = matches!(
            (&v, self),
            (Value::Null, _)
                | (_, ColType::Any)
                | (Value::Integer(_), ColType::Integer | ColType::Numeric)
                | (Value::Real(_), ColType::Real | ColType::Numeric)
                | (Value::Text(_), ColType::Text)
                | (Value::Blob(_), ColType::Blob)
        );
        if ok {
            Ok(v)
        } else {
            Err(Error::Type(format!(
                "cannot store {} value in {} column {}",
                v.type_name().to_ascii_uppercase(),
                self.name(),
                column()
            )))
        }
    }
}

/// Applies an affinity as SQLite does when storing into a column or comparing.
pub fn apply_affinity(v: Value, aff: Affinity) -> Value {
    match aff {
        Affinity::None | Affinity::Blob => v,
        Affinity::Text => match v {
            Value::Integer(_) | Value::Real(_) => Value::Text(to_text(&v).unwrap_or_default()),
            v => v,
        },
        Affinity::Integer | Affinity::Numeric => match v {
            Value::Text(ref s) => match parse_number_exact(s) {
                Some(Value::Real(r)) => real_to_int_if_exact(r),
                Some(n) => n,
                None => v,
            },
            Value::Real(r) => real_to_int_if_exact(r),
            v => v,
        },
        Affinity::Real => match v {
            Value::Text(ref s) => match parse_number_exact(s) {
                Some(Value::Integer(i)) => Value::Real(i as f64),
                Some(n) => n,
                None => v,
            },
            Value::Integer(i) => Value::Real(i as f64),
            v => v,
        },
    }
}

fn real_to_int_if_exact(r: f64) -> Value {
    if r.fract() == 0.0 && (-9.223_372_036_854_775e18..=9.223_372_036_854_775e18).contains(&r) {
        Value::Integer(r as i64)
    } else {
        Value::Real(r)
    }
}

/// Parses `s` as a number if all of it (bar surrounding spaces) is one; SQLite's test for whether
/// numeric affinity converts a text.
pub fn parse_number_exact(s: &str) -> Option<Value> {
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    let (v, used) = parse_number_prefix(t);
    if used == 0 || used != t.len() {
        return None;
    }
    v
}

/// The longest numeric prefix of `s` (after leading spaces), as SQLite's text-to-number cast
/// reads it, and how many bytes of the trimmed text it used.
fn parse_number_prefix(s: &str) -> (Option<Value>, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut int_digits = i - digits_start;
    let mut real = false;
    if i < b.len() && b[i] == b'.' {
        let j = i + 1;
        let mut k = j;
        while k < b.len() && b[k].is_ascii_digit() {
            k += 1;
        }
        if int_digits > 0 || k > j {
            real = true;
            int_digits += k - j;
            i = k;
        }
    }
    if int_digits == 0 {
        return (None, 0);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            real = true;
            i = j;
        }
    }
    let text = &s[..i];
    if !real {
        if let Ok(n) = text.parse::<i64>() {
            return (Some(Value::Integer(n)), i);
        }
    }
    (cairn_value::num::parse_f64(text).map(Value::Real), i)
}

/// A value as a number for arithmetic: text and blobs by their numeric prefix (0 if none),
/// NULL stays NULL.
pub fn to_numeric(v: &Value) -> Value {
    match v {
        Value::Integer(_) | Value::Real(_) | Value::Null => v.clone(),
        Value::Text(s) => text_to_numeric(s),
        Value::Blob(b) => text_to_numeric(&blob_text(b)),
    }
}

fn text_to_numeric(s: &str) -> Value {
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    match parse_number_prefix(t).0 {
        Some(Value::Real(r)) => {
            // A text that is an integer written with a fraction or exponent stays real, as in SQLite.
            Value::Real(r)
        }
        Some(v) => v,
        None => Value::Integer(0),
    }
}

pub fn to_f64(v: &Value) -> Option<f64> {
    match to_numeric(v) {
        Value::Integer(i) => Some(i as f64),
        Value::Real(r) => Some(r),
        _ => None,
    }
}

/// `CAST(v AS INTEGER)`.
pub fn to_integer(v: &Value) -> Option<i64> {
    match v {
        Value::Text(s) => return Some(text_int_prefix(s)),
        Value::Blob(b) => return Some(text_int_prefix(&blob_text(b))),
        _ => {}
    }
    match to_numeric(v) {
        Value::Integer(i) => Some(i),
        Value::Real(r) => Some(real_to_i64(r)),
        _ => None,
    }
}

/// The integer at the start of a text (sign and digits only, as SQLite's text-to-integer cast
/// reads it), saturating at the i64 range.
fn text_int_prefix(s: &str) -> i64 {
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let b = t.as_bytes();
    let mut i = 0;
    let neg = match b.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let mut n: i128 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        n = (n * 10 + (b[i] - b'0') as i128).min(1 << 64);
        i += 1;
    }
    let n = if neg { -n } else { n };
    n.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Real to integer as SQLite casts: truncation, saturating at the i64 range.
pub fn real_to_i64(r: f64) -> i64 {
    if r.is_nan() {
        0
    } else if r >= 9.223_372_036_854_776e18 {
        i64::MAX
    } else if r <= -9.223_372_036_854_776e18 {
        i64::MIN
    } else {
        r as i64
    }
}

/// SQLite's text form of a value (`CAST(v AS TEXT)`, `||`); None for NULL.
pub fn to_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::Integer(i) => Some(i.to_string()),
        Value::Real(r) => Some(fmt_real(*r)),
        Value::Text(s) => Some(s.clone()),
        Value::Blob(b) => Some(blob_text(b).into_owned()),
    }
}

/// A blob's bytes as text, invalid UTF-8 replaced by U+FFFD (`String::from_utf8_lossy`). The
/// replacing is out of line: valid text is the common case, and std's lossy decoder then stays
/// out of the code the common statements run.
fn blob_text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => std::borrow::Cow::Owned(lossy(b)),
    }
}

#[cold]
#[inline(never)]
fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Formats a real as SQLite (3.4x) does: 15 significant digits if they read back as the same
/// number, else 17; trailing zeros dropped; exponent form below 1e-4 and from 1e17; and always a
/// decimal point or exponent, so the text reads back as a real. (SQLite's own digit generator
/// may differ from exact decimal in the 17th digit; cairn's is exact.)
pub fn fmt_real(r: f64) -> String {
    if r.is_nan() {
        return "NaN".into();
    }
    if r.is_infinite() {
        return if r > 0.0 { "Inf".into() } else { "-Inf".into() };
    }
    if r == 0.0 {
        // SQLite prints -0.0 as 0.0.
        return "0.0".into();
    }
    // The digits come from `num::exp_digits` (in the browser through JavaScript, without Rust's
    // float formatting), and are placed here.
    let sign = if r < 0.0 { "-" } else { "" };
    let mut p = 15;
    let (mut digits, mut exp) = num::exp_digits(r, p);
    // Built by pushes, not `format!`: the common statements reach this, and without a
    // `format!` on their paths core's formatting machinery stays out of cairn.wasm.
    let sci = |digits: &str, rest: &str, exp: i32, two: bool| {
        let mut s = String::with_capacity(digits.len() + 8);
        s.push_str(sign);
        s.push_str(&digits[..1]);
        s.push('.');
        s.push_str(rest);
        s.push('e');
        if two {
            s.push(if exp < 0 { '-' } else { '+' });
            if exp.abs() < 10 {
                s.push('0');
            }
            s.push_str(&exp.unsigned_abs().to_string());
        } else {
            s.push_str(&exp.to_string());
        }
        s
    };
    if num::parse_f64(&sci(&digits, &digits[1..], exp, false)) != Some(r) {
        p = 17;
        (digits, exp) = num::exp_digits(r, p);
    }
    if !(-4..17).contains(&exp) {
        let rest = digits[1..].trim_end_matches('0');
        let rest = if rest.is_empty() { "0" } else { rest };
        return sci(&digits, rest, exp, true);
    }
    let mut s = String::with_capacity(digits.len() + 8);
    s.push_str(sign);
    if exp >= p as i32 {
        // The digits end before the point, and the rest of the integer part is printed exactly
        // (SQLite shows 1e16 + 2 as 10000000000000002.0). `r` is an integer below 1e17 here:
        // from 1e15, a 15-digit decimal that reads back as `r` is an integer.
        s.push_str(&(r.abs() as u64).to_string());
        s.push_str(".0");
        return s;
    }
    if exp >= 0 {
        let (int, frac) = digits.split_at(exp as usize + 1);
        s.push_str(int);
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    } else {
        s.push_str("0.");
        for _ in 0..-exp - 1 {
            s.push('0');
        }
        s.push_str(digits.trim_end_matches('0'));
    }
    if s.ends_with('.') {
        s.push('0');
    }
    s
}

/// SQL truth: NULL is unknown (None); numbers are true when non-zero; text and blobs by their
/// numeric value.
pub fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Integer(i) => Some(*i != 0),
        Value::Real(r) => Some(*r != 0.0),
        other => match to_numeric(other) {
            Value::Integer(i) => Some(i != 0),
            Value::Real(r) => Some(r != 0.0),
            _ => Some(false),
        },
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// Arithmetic with SQLite's rules: NULL in, NULL out; integer overflow becomes real; division or
/// remainder by zero is NULL.
pub fn arith(op: Arith, a0: &Value, b0: &Value) -> Value {
    if a0.is_null() || b0.is_null() {
        return Value::Null;
    }
    let (a, b) = (to_numeric(a0), to_numeric(b0));
    match (&a, &b) {
        (Value::Integer(x), Value::Integer(y)) => {
            let (x, y) = (*x, *y);
            let r = match op {
                Arith::Add => x.checked_add(y),
                Arith::Sub => x.checked_sub(y),
                Arith::Mul => x.checked_mul(y),
                Arith::Div => {
                    if y == 0 {
                        return Value::Null;
                    }
                    x.checked_div(y)
                }
                Arith::Rem => {
                    if y == 0 {
                        return Value::Null;
                    }
                    Some(x.checked_rem(y).unwrap_or(0))
                }
            };
            match r {
                Some(v) => Value::Integer(v),
                None => real_arith(op, x as f64, y as f64),
            }
        }
        // SQLite computes a remainder on integers, casting the operands as they were (a text
        // by its integer prefix).
        _ if op == Arith::Rem => {
            let (x, y) = (to_integer(a0).unwrap_or(0), to_integer(b0).unwrap_or(0));
            if y == 0 {
                return Value::Null;
            }
            Value::Real(x.checked_rem(y).unwrap_or(0) as f64)
        }
        _ => {
            let x = to_f64(&a).unwrap_or(0.0);
            let y = to_f64(&b).unwrap_or(0.0);
            real_arith(op, x, y)
        }
    }
}

fn real_arith(op: Arith, x: f64, y: f64) -> Value {
    let r = match op {
        Arith::Add => x + y,
        Arith::Sub => x - y,
        Arith::Mul => x * y,
        Arith::Div => {
            if y == 0.0 {
                return Value::Null;
            }
            x / y
        }
        Arith::Rem => {
            let (xi, yi) = (real_to_i64(x), real_to_i64(y));
            if yi == 0 {
                return Value::Null;
            }
            return Value::Real(xi.checked_rem(yi).unwrap_or(0) as f64);
        }
    };
    if r.is_nan() {
        Value::Null
    } else {
        Value::Real(r)
    }
}

/// `LIKE`: `%` any run, `_` one character, ASCII letters compared case-insensitively, optional
/// escape character.
pub fn like(pattern: &str, text: &str, escape: Option<char>) -> bool {
    if escape.is_none() {
        if let Some((start, end)) = like_shape(pattern) {
            return like_literal(literal_of(pattern, start, end), start, end, text.as_bytes());
        }
    }
    like_chars(pattern, text, escape)
}

fn like_chars(pattern: &str, text: &str, escape: Option<char>) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    like_at(&p, &t, escape)
}

/// A LIKE pattern prepared once for many texts (a scan's filter): the common shapes without a
/// wildcard inside are matched on the text's bytes as they lie in the page.
#[derive(Debug, Clone)]
pub struct LikeMatcher {
    pattern: String,
    escape: Option<char>,
    /// `%` at the start and at the end of a pattern with no other wildcard, and no escape.
    shape: Option<(bool, bool)>,
}

impl LikeMatcher {
    pub fn new(pattern: String, escape: Option<char>) -> LikeMatcher {
        let shape = if escape.is_none() {
            like_shape(&pattern)
        } else {
            None
        };
        LikeMatcher {
            pattern,
            escape,
            shape,
        }
    }

    /// Whether text, given as its stored bytes, matches. The literal shapes need no UTF-8
    /// check (a byte comparison answers as the char matcher does); the general matcher does.
    pub fn matches(&self, text: &[u8]) -> Option<bool> {
        match self.shape {
            Some((start, end)) => Some(like_literal(
                literal_of(&self.pattern, start, end),
                start,
                end,
                text,
            )),
            None => Some(like_chars(
                &self.pattern,
                std::str::from_utf8(text).ok()?,
                self.escape,
            )),
        }
    }

    pub fn matches_str(&self, text: &str) -> bool {
        self.matches(text.as_bytes())
            .expect("invariant: a str is UTF-8")
    }
}

/// Whether `pattern` is one of the common shapes `lit`, `lit%`, `%lit` and `%lit%` (no other
/// wildcard), and which ends have the `%`.
fn like_shape(pattern: &str) -> Option<(bool, bool)> {
    let p = pattern.as_bytes();
    let start = p.first() == Some(&b'%');
    let end = p.len() > usize::from(start) && p.last() == Some(&b'%');
    let lit = &p[usize::from(start)..p.len() - usize::from(end)];
    if lit.iter().any(|&b| b == b'%' || b == b'_') {
        return None;
    }
    Some((start, end))
}

fn literal_of(pattern: &str, start: bool, end: bool) -> &[u8] {
    &pattern.as_bytes()[usize::from(start)..pattern.len() - usize::from(end)]
}

/// Matches a pattern of shape [`like_shape`] without collecting chars: a byte comparison that
/// folds only ASCII letters gives the same answer as the char-by-char matcher, since a
/// non-ASCII byte only ever equals itself and UTF-8 text cannot match a whole literal starting
/// mid-character.
fn like_literal(lit: &[u8], start: bool, end: bool, t: &[u8]) -> bool {
    let eq = |a: &[u8]| a.eq_ignore_ascii_case(lit);
    match (start, end) {
        (false, false) => t.len() == lit.len() && eq(t),
        (false, true) => t.len() >= lit.len() && eq(&t[..lit.len()]),
        (true, false) => t.len() >= lit.len() && eq(&t[t.len() - lit.len()..]),
        (true, true) => contains_folded(t, lit),
    }
}

/// Whether `lit` occurs in `t`, ASCII letters compared without case. Only where the first byte
/// matches is the rest compared, and those places are found eight bytes at a time.
fn contains_folded(t: &[u8], lit: &[u8]) -> bool {
    let Some((&first, rest)) = lit.split_first() else {
        return true;
    };
    let Some(last) = t.len().checked_sub(lit.len()) else {
        return false;
    };
    // With bit 0x20 set, both cases of a letter are its lower case, and no other byte is.
    let (fold, want) = if first.is_ascii_alphabetic() {
        (0x20, first | 0x20)
    } else {
        (0, first)
    };
    const ONES: u64 = 0x0101_0101_0101_0101;
    let (fold8, want8) = (ONES * u64::from(fold), ONES * u64::from(want));
    let rest_at = |j: usize| t[j + 1..j + lit.len()].eq_ignore_ascii_case(rest);
    let mut i = 0;
    while i <= last {
        match t.get(i..i + 8) {
            Some(w) => {
                let x = (u64::from_le_bytes(w.try_into().expect("8 bytes")) | fold8) ^ want8;
                // The zero bytes of x, and perhaps bytes after one: each is checked anyway.
                let mut z = x.wrapping_sub(ONES) & !x & (ONES << 7);
                while z != 0 {
                    let j = i + (z.trailing_zeros() / 8) as usize;
                    if j > last {
                        return false;
                    }
                    if rest_at(j) {
                        return true;
                    }
                    z &= z - 1;
                }
                i += 8;
            }
            None => {
                if t[i] | fold == want && rest_at(i) {
                    return true;
                }
                i += 1;
            }
        }
    }
    false
}

fn like_at(p: &[char], t: &[char], esc: Option<char>) -> bool {
    let (mut pi, mut ti) = (0, 0);
    // Backtracking point for the last `%`: pattern index after it, text index to retry from.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            let c = p[pi];
            if Some(c) == esc {
                if pi + 1 < p.len() && ti < t.len() && eq_nocase(p[pi + 1], t[ti]) {
                    pi += 2;
                    ti += 1;
                    continue;
                }
                if pi + 1 >= p.len() {
                    return false;
                }
            } else if c == '%' {
                star = Some((pi + 1, ti));
                pi += 1;
                continue;
            } else if ti < t.len() && (c == '_' || eq_nocase(c, t[ti])) {
                pi += 1;
                ti += 1;
                continue;
            }
        } else if ti == t.len() {
            return true;
        }
        match star {
            Some((sp, st)) if st < t.len() => {
                star = Some((sp, st + 1));
                pi = sp;
                ti = st + 1;
            }
            _ => return false,
        }
    }
}

fn eq_nocase(a: char, b: char) -> bool {
    a == b || (a.is_ascii() && b.is_ascii() && a.eq_ignore_ascii_case(&b))
}

/// `GLOB`: `*`, `?`, `[...]` character classes (with `^` negation and ranges); case-sensitive.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    glob_at(&p, &t)
}

fn glob_at(p: &[char], t: &[char]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi + 1, ti));
                    pi += 1;
                    continue;
                }
                '?' if ti < t.len() => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' if ti < t.len() => {
                    if let Some((matched, next)) = class_match(p, pi, t[ti]) {
                        if matched {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if p[pi] == t[ti] {
                        // An unclosed '[' matches nothing in SQLite.
                        return false;
                    }
                }
                c if c != '?' && c != '[' && ti < t.len() && c == t[ti] => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        } else if ti == t.len() {
            return true;
        }
        match star {
            Some((sp, st)) if st < t.len() => {
                star = Some((sp, st + 1));
                pi = sp;
                ti = st + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the class starting at `p[start] == '['`; returns (matched, index after `]`).
fn class_match(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = p.get(i) == Some(&'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let ch = *p.get(i)?;
        if ch == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            let hi = p[i + 2];
            if ch <= c && c <= hi {
                matched = true;
            }
            i += 3;
        } else {
            if ch == c {
                matched = true;
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formatting as it was written with Rust's float formatting throughout.
    fn fmt_real_std(r: f64) -> String {
        if r.is_nan() || r.is_infinite() || r == 0.0 {
            return fmt_real(r);
        }
        let mut digits = 15;
        let mut sci = format!("{:.*e}", digits - 1, r);
        if sci.parse::<f64>().ok() != Some(r) {
            digits = 17;
            sci = format!("{:.*e}", digits - 1, r);
        }
        let (mant, exp) = sci.split_once('e').unwrap();
        let exp: i32 = exp.parse().unwrap();
        if !(-4..17).contains(&exp) {
            let mant = mant.trim_end_matches('0');
            let mant = if mant.ends_with('.') {
                format!("{mant}0")
            } else {
                mant.to_string()
            };
            let sign = if exp < 0 { '-' } else { '+' };
            return format!("{mant}e{sign}{:02}", exp.abs());
        }
        let decimals = (digits as i32 - 1 - exp).max(0) as usize;
        let s = format!("{:.*}", decimals, r);
        if s.contains('.') {
            let t = s.trim_end_matches('0');
            if t.ends_with('.') {
                format!("{t}0")
            } else {
                t.to_string()
            }
        } else {
            format!("{s}.0")
        }
    }

    /// Values around every boundary of the formatting (digits, exponent form, the exact integer
    /// part, ties), and arbitrary doubles.
    fn real_samples() -> Vec<f64> {
        let mut v = vec![
            1.0,
            0.1,
            1.5,
            2.25,
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
            9.999999999999999e16,
            99999999999999995.0,
            999999999999999.9,
            9999999999999998.0,
            0.00009999999999999999,
            1234567890123.125,
            123_456_789_012_345.0 + 0.125,
            5e-324,
            2.2250738585072014e-308,
            1.7976931348623157e308,
            4503599627370497.5,
            123456789012345678.0,
            0.5,
            2.5,
        ];
        for e in -30..=30 {
            let p = 10f64.powi(e);
            v.extend([
                p,
                p * 1.5,
                p * 9.999999999999999,
                p / 3.0,
                p * 1.2345678901234567,
            ]);
        }
        for k in 1..=25 {
            for n in [1u64, 3, 123, 999_999, 123_456_789, 4_503_599_627_370_497] {
                v.push(n as f64 / (1u64 << k) as f64);
                v.push(n as f64 * 1e15 / (1u64 << k) as f64);
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..3000 {
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

    #[test]
    fn real_formatting_from_digits_matches_rust_formatting() {
        for r in real_samples() {
            assert_eq!(fmt_real(r), fmt_real_std(r), "{r:e}");
        }
    }

    #[test]
    fn real_formatting_matches_sqlite() {
        for (r, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (1e20, "1.0e+20"),
            (1e15, "1000000000000000.0"),
            (1e17, "1.0e+17"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e14, "100000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0e-05"),
            (2.0 / 3.0, "0.66666666666666663"),
            (1e16 + 2.0, "10000000000000002.0"),
            (-0.5, "-0.5"),
        ] {
            assert_eq!(fmt_real(r), s, "{r}");
        }
    }

    #[test]
    fn like_literal_patterns_match_as_the_general_matcher_does() {
        let texts = [
            "",
            "a",
            "A",
            "abc",
            "xAbCx",
            "héllo",
            "HÉLLO",
            "ab\0c",
            "%_",
            "aaa",
            "fifty five thousand one hundred",
            "one hundred twenty-ONE",
            "@`[{ AaBb",
            "aaaaaaaaaaab",
            "xxxxxxxbc",
            "xxxxxxxxbc",
            "xxxxxxxxxbC",
            "é-é-é-é-é-é-é-é-éE",
        ];
        let pats = [
            "", "%", "%%", "a", "abc", "ABC%", "%c", "%bC%", "%é%", "h%", "%LO", "%\0%", "aa",
            "%aa%", "x%", "%one%", "%ONE%", "%@%", "%`%", "%{ a%", "%ab%", "%b%", "%bc%", "%-É%",
            "%-é%", "%e%", "%1%", "%aab%",
        ];
        for p in pats {
            for t in texts {
                let pc: Vec<char> = p.chars().collect();
                let tc: Vec<char> = t.chars().collect();
                let m = LikeMatcher::new(p.to_string(), None);
                assert!(m.shape.is_some(), "{p:?} is a literal shape");
                assert_eq!(
                    m.matches(t.as_bytes()),
                    Some(like_at(&pc, &tc, None)),
                    "{p:?} LIKE {t:?}"
                );
                assert_eq!(
                    like(p, t, None),
                    like_at(&pc, &tc, None),
                    "{p:?} LIKE {t:?}"
                );
            }
        }
        assert_eq!(like_shape("a_c"), None);
        assert_eq!(like_shape("a%c"), None);
        // With an escape the general matcher runs, on the bytes once they are checked UTF-8.
        let m = LikeMatcher::new("%a!%%".into(), Some('!'));
        assert_eq!(m.matches(b"xA%y"), Some(true));
        assert_eq!(m.matches(b"xAy"), Some(false));
        assert_eq!(m.matches(b"\xff"), None);
        assert_eq!(
            LikeMatcher::new("_é%".into(), None).matches("xÉ".as_bytes()),
            Some(false)
        );
    }

    #[test]
    fn like_and_glob() {
        assert!(like("a%c", "ABC", None));
        assert!(like("%b_", "abc", None));
        assert!(!like("a_c", "ac", None));
        assert!(like("10!%", "10%", Some('!')));
        assert!(!like("10!%", "100", Some('!')));
        assert!(glob("a*[0-9]?", "abc5x"));
        assert!(!glob("A*", "abc"));
        assert!(glob("[^x]y", "ay"));
    }

    #[test]
    fn numeric_conversions() {
        assert_eq!(
            to_numeric(&Value::Text(" 12abc".into())),
            Value::Integer(12)
        );
        assert_eq!(to_numeric(&Value::Text("1.5e2".into())), Value::Real(150.0));
        assert_eq!(to_numeric(&Value::Text("x".into())), Value::Integer(0));
        assert_eq!(
            arith(Arith::Add, &Value::Integer(i64::MAX), &Value::Integer(1)),
            Value::Real(9.223372036854776e18)
        );
        assert_eq!(
            arith(Arith::Div, &Value::Integer(1), &Value::Integer(0)),
            Value::Null
        );
        assert_eq!(
            arith(Arith::Div, &Value::Integer(7), &Value::Integer(2)),
            Value::Integer(3)
        );
    }
}
