//! JSON text as SQLite's JSON1 reads and writes it: a parsed tree ([`J`]), its minified text,
//! paths (`$.a[2]`, `$."b c"`, `$[#-1]`), and the edits of `json_set`, `json_insert`,
//! `json_replace`, `json_remove` and `json_patch`. The SQL functions over it are in
//! [`super::json_fn`].
//!
//! Numbers and strings keep the text they were written with (SQLite's JSONB does too), so
//! `json(' [1.50, "\u0041"] ')` is `[1.50,"\u0041"]`. Input is RFC 8259 JSON; SQLite's JSON5
//! extensions are refused as malformed (docs/sql.md).

use crate::error::{Error, Result};
use cairn_value::Value;
use std::borrow::Cow;

/// Arrays and objects nest at most this deep; deeper is malformed. SQLite allows 1000, but
/// parsing, writing and walking a document recurse, and the Worker's stack is 1 MiB: the bound
/// is the one on SQL expressions (docs/sql.md, "Where cairn deliberately differs").
pub const MAX_DEPTH: usize = 100;

#[derive(Debug, Clone, PartialEq)]
pub enum J {
    Null,
    True,
    False,
    /// A number, as written.
    Num(String),
    /// A string's text between its quotes, escapes as written.
    Str(String),
    Arr(Vec<J>),
    /// Members in their order; duplicate labels are kept, the first is the one found.
    Obj(Vec<(String, J)>),
}

pub fn malformed() -> Error {
    Error::Json("malformed JSON".into())
}

pub fn bad_path(p: &str) -> Error {
    Error::Json(format!("bad JSON path: '{}'", p.replace('\'', "''")))
}

/// Parses JSON text; None when it is not RFC 8259 JSON.
pub fn parse(text: &str) -> Option<J> {
    let mut p = Parser::new(text, true);
    let v = p.value(0)?;
    p.ws();
    (p.i == p.b.len()).then_some(v)
}

/// Whether `text` is JSON, read as [`parse`] reads it but building nothing.
pub fn valid(text: &str) -> bool {
    let mut p = Parser::new(text, false);
    p.skip(0).is_some() && {
        p.ws();
        p.i == p.b.len()
    }
}

/// What [`locate`] finds.
#[derive(Debug, PartialEq)]
pub enum Located {
    /// The document is not JSON (checked before the path, as SQLite does).
    Malformed,
    /// A step of the path that was read is not a step.
    BadPath,
    /// The byte range of the value found, or None when the path finds nothing.
    Found(Option<(usize, usize)>),
}

/// Checks `text` whole as [`valid`] does and finds where `path` (after its `$`) leads, with
/// [`lookup`]'s rules, in one reading that builds nothing: what `json_extract`, `->>` and
/// `json_each` read is most often one small value of a larger document.
pub fn locate(text: &str, path: &str) -> Located {
    let mut p = Parser::new(text, false);
    let mut out = Found::default();
    let whole = p.find(0, Some(path), &mut out).is_some() && {
        p.ws();
        p.i == p.b.len()
    };
    match (whole, out.bad_path) {
        (false, _) => Located::Malformed,
        (true, true) => Located::BadPath,
        (true, false) => Located::Found(out.range),
    }
}

/// What a path led to while a document was read.
#[derive(Default)]
struct Found {
    range: Option<(usize, usize)>,
    bad_path: bool,
}

struct Parser<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
    /// Build the tree (else only read the text through, and return placeholders).
    build: bool,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str, build: bool) -> Self {
        Parser {
            b: s.as_bytes(),
            s,
            i: 0,
            build,
        }
    }

    /// In the valid array at `at`, where element `n` starts.
    fn element(&mut self, at: usize, n: u64) -> Option<usize> {
        self.i = at + 1;
        self.ws();
        if self.b[self.i] == b']' {
            return None;
        }
        let mut k = 0;
        loop {
            self.ws();
            if k == n {
                return Some(self.i);
            }
            self.skip(0)?;
            self.ws();
            if self.b[self.i] != b',' {
                return None;
            }
            self.i += 1;
            k += 1;
        }
    }

    fn element_count(&mut self, at: usize) -> u64 {
        self.i = at + 1;
        self.ws();
        if self.b[self.i] == b']' {
            return 0;
        }
        let mut n = 0;
        loop {
            if self.skip(0).is_none() {
                return n;
            }
            n += 1;
            self.ws();
            if self.b[self.i] != b',' {
                return n;
            }
            self.i += 1;
        }
    }

    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A value inside `depth` arrays and objects.
    fn value(&mut self, depth: usize) -> Option<J> {
        self.ws();
        let c = *self.b.get(self.i)?;
        if matches!(c, b'{' | b'[') && depth >= MAX_DEPTH {
            return None;
        }
        match c {
            b'{' => {
                self.i += 1;
                let mut m = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Some(J::Obj(m));
                }
                loop {
                    self.ws();
                    if self.b.get(self.i) != Some(&b'"') {
                        return None;
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return None;
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    if self.build {
                        m.push((k, v));
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Some(J::Obj(m));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Some(J::Arr(a));
                }
                loop {
                    let v = self.value(depth + 1)?;
                    if self.build {
                        a.push(v);
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Some(J::Arr(a));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(J::Str),
            b'-' | b'0'..=b'9' => self.number(),
            _ => {
                for (w, v) in [("null", J::Null), ("true", J::True), ("false", J::False)] {
                    if self.b[self.i..].starts_with(w.as_bytes()) {
                        self.i += w.len();
                        // `nullx` is not `null` followed by something else.
                        if self
                            .b
                            .get(self.i)
                            .is_some_and(|c| c.is_ascii_alphanumeric())
                        {
                            return None;
                        }
                        return Some(v);
                    }
                }
                None
            }
        }
    }

    /// Reads a value inside `depth` arrays and objects as [`Self::value`] does, building
    /// nothing: what checking a document and finding a path in it read most.
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.ws();
        match *self.b.get(self.i)? {
            b'{' | b'[' => self.container(depth, None, &mut Found::default()),
            b'"' => self.string_end().map(|i| self.i = i),
            b'-' | b'0'..=b'9' => self.number_end().map(|i| self.i = i),
            _ => self.value(depth).map(drop),
        }
    }

    /// [`Self::skip`], and where `path` (None: no path) leads from the value read, into `out`.
    fn find(&mut self, depth: usize, path: Option<&str>, out: &mut Found) -> Option<()> {
        let Some(path) = path else {
            return self.skip(depth);
        };
        self.ws();
        let at = self.i;
        let c = *self.b.get(at)?;
        let (step, tail) = match next_step(path) {
            Ok(None) => {
                self.skip(depth)?;
                out.range = Some((at, self.i));
                return Some(());
            }
            Ok(Some(s)) => s,
            // SQLite reads `[...]` only on an array: on anything else it finds nothing.
            Err(()) => {
                out.bad_path |= !(path.starts_with('[') && c != b'[');
                return self.skip(depth);
            }
        };
        match (&step, c) {
            (Step::Key(..), b'{') | (Step::Index(_), b'[') => {
                self.container(depth, Some((&step, tail)), out)
            }
            (Step::FromEnd(n), b'[') => {
                // Counted from the end: the array is read whole, then the element again.
                self.skip(depth)?;
                let end = self.i;
                let len = self.element_count(at);
                if let Some(e) = len.checked_sub(*n).and_then(|i| self.element(at, i)) {
                    self.i = e;
                    self.find(depth + 1, Some(tail), out)?;
                }
                self.i = end;
                Some(())
            }
            _ => self.skip(depth),
        }
    }

    /// The object or array at `self.i` inside `depth` others, read through; `want` is the step
    /// into it of a path and the path after that step (the first member it names is followed).
    fn container(
        &mut self,
        depth: usize,
        mut want: Option<(&Step, &str)>,
        out: &mut Found,
    ) -> Option<()> {
        let close = if self.b[self.i] == b'{' { b'}' } else { b']' };
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&close) {
            self.i += 1;
            return Some(());
        }
        let mut k = 0;
        loop {
            let hit = if close == b'}' {
                self.ws();
                if self.b.get(self.i) != Some(&b'"') {
                    return None;
                }
                let start = self.i + 1;
                self.i = self.string_end()?;
                let label = &self.s[start..self.i - 1];
                self.ws();
                if self.b.get(self.i) != Some(&b':') {
                    return None;
                }
                self.i += 1;
                matches!(want, Some((Step::Key(key, ..), _)) if label_is(label, key))
            } else {
                matches!(want, Some((Step::Index(n), _)) if *n == k)
            };
            if hit {
                let tail = want.take().map(|w| w.1);
                self.find(depth + 1, tail, out)?;
            } else {
                self.skip(depth + 1)?;
            }
            k += 1;
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(&c) if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string at `"`: its text between the quotes, escapes checked and kept.
    fn string(&mut self) -> Option<String> {
        let start = self.i + 1;
        let end = self.string_end()?;
        self.i = end;
        Some(if self.build {
            self.s[start..end - 1].to_string()
        } else {
            String::new()
        })
    }

    /// Where the string at `"` ends (after its closing quote), escapes checked.
    fn string_end(&self) -> Option<usize> {
        let mut i = self.i + 1;
        loop {
            match *self.b.get(i)? {
                b'"' => break,
                b'\\' => {
                    match *self.b.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let h = self.b.get(i + 2..i + 6)?;
                            if !h.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            i += 6;
                        }
                        _ => return None,
                    }
                    continue;
                }
                c if c < 0x20 => return None,
                _ => i += 1,
            }
        }
        Some(i + 1)
    }

    fn number(&mut self) -> Option<J> {
        let start = self.i;
        self.i = self.number_end()?;
        Some(J::Num(if self.build {
            self.s[start..self.i].to_string()
        } else {
            String::new()
        }))
    }

    /// Where the number at `self.i` ends.
    fn number_end(&self) -> Option<usize> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        if b[i] == b'-' {
            i += 1;
        }
        let digits = |i: &mut usize| {
            let s = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - s
        };
        let int_start = i;
        let n = digits(&mut i);
        if n == 0 || (n > 1 && b[int_start] == b'0') {
            return None;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return None;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return None;
            }
        }
        Some(i)
    }
}

/// Appends the minified text of `j`.
pub fn render(j: &J, out: &mut String) {
    match j {
        J::Null => out.push_str("null"),
        J::True => out.push_str("true"),
        J::False => out.push_str("false"),
        J::Num(n) => out.push_str(n),
        J::Str(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        J::Arr(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(v, out);
            }
            out.push(']');
        }
        J::Obj(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('"');
                out.push_str(k);
                out.push_str("\":");
                render(v, out);
            }
            out.push('}');
        }
    }
}

pub fn text(j: &J) -> String {
    let mut s = String::new();
    render(j, &mut s);
    s
}

/// `s` escaped for the inside of a JSON string, as SQLite escapes SQL text.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    cairn_value::coll::escape_into(s, &mut out);
    out
}

/// The text of a JSON string's inside, escapes resolved (a lone surrogate becomes U+FFFD).
pub fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    let hex4 = |it: &mut std::str::Chars| -> u32 {
        let h: String = it.by_ref().take(4).collect();
        u32::from_str_radix(&h, 16).unwrap_or(0xFFFD)
    };
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let mut u = hex4(&mut it);
                if (0xD800..0xDC00).contains(&u) {
                    let rest = it.as_str();
                    if rest.starts_with("\\u") {
                        let lo = u32::from_str_radix(rest.get(2..6).unwrap_or(""), 16).ok();
                        if let Some(lo @ 0xDC00..=0xDFFF) = lo {
                            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                            it.nth(5);
                        }
                    }
                }
                out.push(char::from_u32(u).unwrap_or('\u{FFFD}'));
            }
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}

/// A SQL value as a JSON value (not as JSON text): text becomes a string.
pub fn from_sql(v: &Value) -> Result<J> {
    Ok(match v {
        Value::Null => J::Null,
        Value::Integer(i) => J::Num(i.to_string()),
        Value::Real(r) => real(*r),
        Value::Text(s) => J::Str(escape(s)),
        Value::Blob(_) => return Err(Error::Json("JSON cannot hold BLOB values".into())),
    })
}

/// A REAL as SQLite writes it into JSON (`%!0.17g`: up to 17 significant digits, fewer when
/// they read back as the same number; NaN is null, infinities 9.0e+999).
pub fn real(r: f64) -> J {
    cairn_value::coll::json_real(r).map_or(J::Null, J::Num)
}

/// A JSON value as the SQL value `json_extract` returns: null NULL, true 1, false 0, numbers
/// INTEGER or REAL (an integer past i64 is REAL), strings their text, arrays and objects their
/// JSON text.
pub fn to_sql(j: &J) -> Value {
    match j {
        J::Null => Value::Null,
        J::True => Value::Integer(1),
        J::False => Value::Integer(0),
        J::Num(n) => num_value(n),
        J::Str(s) => Value::Text(unescape(s)),
        j => Value::Text(text(j)),
    }
}

/// [`to_sql`] of a value no longer needed: a string without escapes is moved, not copied.
pub fn into_sql(j: J) -> Value {
    match j {
        J::Str(s) if !s.contains('\\') => Value::Text(s),
        j => to_sql(&j),
    }
}

fn num_value(n: &str) -> Value {
    if !n.contains(['.', 'e', 'E']) {
        if let Ok(i) = n.parse::<i64>() {
            return Value::Integer(i);
        }
    }
    Value::Real(cairn_value::num::parse_f64(n).unwrap_or(0.0))
}

pub fn type_name(j: &J) -> &'static str {
    match j {
        J::Null => "null",
        J::True => "true",
        J::False => "false",
        // Written as an integer is an integer, even past i64 (whose value is then REAL).
        J::Num(n) if !n.contains(['.', 'e', 'E']) => "integer",
        J::Num(_) => "real",
        J::Str(_) => "text",
        J::Arr(_) => "array",
        J::Obj(_) => "object",
    }
}

/// One step of a path, borrowed from the path's text: a path is read again for every row, so a
/// step allocates only for a quoted label with escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<'p> {
    /// An object label, escapes resolved, and as the path wrote it (`quoted`: between quotes,
    /// escapes kept, so it is written as it is when created).
    Key(Cow<'p, str>, &'p str, bool),
    /// `[N]`.
    Index(u64),
    /// `[#-N]` (`[#]` is N = 0): N from the end.
    FromEnd(u64),
}

/// The next step of the path text after `$` (SQLite reads a path step by step, so a bad step
/// after one that finds nothing is never seen): None at the end, Err on a bad step.
fn next_step(p: &str) -> std::result::Result<Option<(Step<'_>, &str)>, ()> {
    let b = p.as_bytes();
    match b.first() {
        None => Ok(None),
        Some(b'.') => {
            if b.get(1) == Some(&b'"') {
                let mut i = 2;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err(());
                }
                let raw = &p[2..i];
                let step = if raw.contains('\\') {
                    Step::Key(Cow::Owned(unescape(raw)), raw, true)
                } else {
                    Step::Key(Cow::Borrowed(raw), raw, false)
                };
                Ok(Some((step, &p[i + 1..])))
            } else {
                let n = b[1..]
                    .iter()
                    .position(|&c| c == b'.' || c == b'[')
                    .unwrap_or(b.len() - 1);
                if n == 0 {
                    return Err(());
                }
                let k = &p[1..1 + n];
                Ok(Some((Step::Key(Cow::Borrowed(k), k, false), &p[1 + n..])))
            }
        }
        Some(b'[') => {
            let mut i = 1;
            let mut k: u64 = 0;
            while i < b.len() && b[i].is_ascii_digit() {
                k = k.saturating_mul(10).saturating_add((b[i] - b'0') as u64);
                i += 1;
            }
            if i >= 2 && b.get(i) == Some(&b']') {
                return Ok(Some((Step::Index(k), &p[i + 1..])));
            }
            if b.get(1) != Some(&b'#') {
                return Err(());
            }
            let mut n: u64 = 0;
            i = 2;
            if b.get(2) == Some(&b'-') && b.get(3).is_some_and(u8::is_ascii_digit) {
                i = 3;
                while i < b.len() && b[i].is_ascii_digit() {
                    n = n.saturating_mul(10).saturating_add((b[i] - b'0') as u64);
                    i += 1;
                }
            }
            if b.get(i) != Some(&b']') {
                return Err(());
            }
            Ok(Some((Step::FromEnd(n), &p[i + 1..])))
        }
        Some(_) => Err(()),
    }
}

/// The next step at `at`. SQLite reads `[...]` only on an array: on anything else it finds
/// nothing, so a malformed index there is no error.
fn step_at<'p>(at: &J, p: &'p str) -> std::result::Result<Option<(Step<'p>, &'p str)>, ()> {
    match next_step(p) {
        Err(()) if p.starts_with('[') && !matches!(at, J::Arr(_)) => {
            Ok(Some((Step::Index(u64::MAX), "")))
        }
        r => r,
    }
}

/// Where a path leads in `root`: Ok(None) when it finds nothing, Err for a bad path. `path`
/// starts after its `$`.
pub fn lookup<'a>(root: &'a J, path: &str) -> std::result::Result<Option<&'a J>, ()> {
    let mut at = root;
    let mut rest = path;
    while let Some((step, tail)) = step_at(at, rest)? {
        let found = match (&step, at) {
            (Step::Key(k, ..), J::Obj(m)) => m.iter().find(|(l, _)| label_is(l, k)).map(|e| &e.1),
            (Step::Index(i), J::Arr(a)) => a.get(*i as usize),
            (Step::FromEnd(n), J::Arr(a)) => {
                a.len().checked_sub(*n as usize).and_then(|i| a.get(i))
            }
            _ => None,
        };
        match found {
            Some(j) => at = j,
            None => return Ok(None),
        }
        rest = tail;
    }
    Ok(Some(at))
}

fn label_is(label: &str, key: &str) -> bool {
    if label.contains('\\') {
        unescape(label) == key
    } else {
        label == key
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    Set,
    Insert,
    Replace,
    Remove,
}

/// Applies one edit at `path` (after its `$`, not empty). Ok(false) when the path finds no
/// place for it (a no-op), Err for a bad path.
pub fn edit(root: &mut J, path: &str, how: Edit, v: &J) -> std::result::Result<bool, ()> {
    let Some((step, tail)) = step_at(root, path)? else {
        return Ok(false);
    };
    // The place the step names in this container, if there is one, and whether it is last.
    let here = match (&step, &*root) {
        (Step::Key(k, ..), J::Obj(m)) => m.iter().position(|(l, _)| label_is(l, k)),
        (Step::Index(i), J::Arr(a)) => (*i < a.len() as u64).then_some(*i as usize),
        (Step::FromEnd(n), J::Arr(a)) => a.len().checked_sub(*n as usize).filter(|&i| i < a.len()),
        _ => return Ok(false),
    };
    let last = next_step(tail)?.is_none();
    match here {
        Some(i) => {
            let slot = match root {
                J::Obj(m) => &mut m[i].1,
                J::Arr(a) => &mut a[i],
                _ => unreachable!("invariant: only containers have places"),
            };
            if !last {
                return edit(slot, tail, how, v);
            }
            match how {
                Edit::Set | Edit::Replace => *slot = v.clone(),
                Edit::Insert => {}
                Edit::Remove => match root {
                    J::Obj(m) => {
                        m.remove(i);
                    }
                    J::Arr(a) => {
                        a.remove(i);
                    }
                    _ => {}
                },
            }
            Ok(true)
        }
        None if matches!(how, Edit::Set | Edit::Insert) => {
            // Only the end of an array can grow: `[len]` or `[#]`.
            if let (J::Arr(a), Step::Index(i)) = (&*root, &step) {
                if *i != a.len() as u64 {
                    return Ok(false);
                }
            }
            if let (J::Arr(_), Step::FromEnd(n)) = (&*root, &step) {
                if *n != 0 {
                    return Ok(false);
                }
            }
            let Some(new) = build(tail, v)? else {
                return Ok(false);
            };
            match (root, step) {
                (J::Obj(m), Step::Key(_, raw, quoted)) => m.push((written(raw, quoted), new)),
                (J::Arr(a), _) => a.push(new),
                _ => return Ok(false),
            }
            Ok(true)
        }
        None => Ok(false),
    }
}

/// A label as an edit writes it: a quoted one as the path has it, escapes kept; another escaped.
fn written(raw: &str, quoted: bool) -> String {
    if quoted {
        raw.to_string()
    } else {
        escape(raw)
    }
}

/// The structure the rest of a path creates around `v` (`.b[0]` makes `{"b":[v]}`), None when
/// it cannot (`[1]` in a new array).
fn build(path: &str, v: &J) -> std::result::Result<Option<J>, ()> {
    let Some((step, tail)) = next_step(path)? else {
        return Ok(Some(v.clone()));
    };
    let Some(inner) = build(tail, v)? else {
        return Ok(None);
    };
    Ok(match step {
        Step::Key(_, raw, quoted) => Some(J::Obj(vec![(written(raw, quoted), inner)])),
        Step::Index(0) | Step::FromEnd(0) => Some(J::Arr(vec![inner])),
        _ => None,
    })
}

/// RFC 7396 merge patch, as `json_patch`.
pub fn patch(target: J, p: &J) -> J {
    let J::Obj(pm) = p else {
        return p.clone();
    };
    let mut tm = match target {
        J::Obj(m) => m,
        _ => Vec::new(),
    };
    for (k, v) in pm {
        let key = unescape(k);
        let at = tm.iter().position(|(l, _)| label_is(l, &key));
        match (at, v) {
            (Some(i), J::Null) => {
                tm.remove(i);
            }
            (None, J::Null) => {}
            (Some(i), v) => {
                let old = std::mem::replace(&mut tm[i].1, J::Null);
                tm[i].1 = patch(old, v);
            }
            (None, v) => tm.push((k.clone(), patch(J::Null, v))),
        }
    }
    J::Obj(tm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_as_sqlite_writes_them() {
        let t = |r: f64| match real(r) {
            J::Num(s) => s,
            _ => "null".into(),
        };
        assert_eq!(t(1.5), "1.5");
        assert_eq!(t(0.1), "0.1");
        assert_eq!(t(49.47), "49.47");
        assert_eq!(t(100.0), "100.0");
        assert_eq!(t(-2.25), "-2.25");
        assert_eq!(t(1e20), "1.0e+20");
        assert_eq!(t(1.5e-7), "1.5e-07");
        assert_eq!(t(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(t(f64::INFINITY), "9.0e+999");
    }

    #[test]
    fn parse_and_render_keep_the_written_text() {
        let j = parse(" { \"a\" : [1.50, \"\\u0041\", true, null] } ").expect("valid");
        assert_eq!(text(&j), "{\"a\":[1.50,\"\\u0041\",true,null]}");
        for bad in [
            "", "{", "[1,]", "01", "1.", "'a'", "{a:1}", "nul", "[1] x", "\"\t\"",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
