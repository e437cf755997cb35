//! The dialect's scalar functions, and the clock and UUIDs some of them read.

use crate::error::{Error, Result};
use crate::exec::eval::{compare_op, eval, eval_bool, Cx};
use crate::parse::ast::BinOp;
use crate::plan::{Func, PExpr};
use crate::types::{self, to_numeric, to_text, Affinity, ColType};
use cairn_value::Value;
use std::borrow::Cow;
use std::cmp::Ordering;

static CLOCK: std::sync::OnceLock<fn() -> u64> = std::sync::OnceLock::new();

/// Sets where `uuid7()` reads the time (milliseconds since 1970) from; in wasm the host must,
/// as the standard library has no clock there. The first call wins.
pub fn set_clock(f: fn() -> u64) {
    let _ = CLOCK.set(f);
}

/// The time `'now'` reads: the same for every call in one statement, as in SQLite (kept in
/// the statement's cache, under a key no plan has).
/// The slot of a statement's cache that holds its current time, once read.
const NOW: usize = 0;

/// Whether an evaluation with `cache` read the current time ('now' given to a date function).
pub(crate) fn read_now(cache: &crate::exec::eval::Cache) -> bool {
    cache.borrow().get(&NOW).is_some()
}

fn statement_now(cx: &Cx) -> i64 {
    if let Some(crate::exec::eval::Cached::Value(Value::Integer(ms))) = cx.cache.borrow().get(&NOW)
    {
        return *ms;
    }
    let ms = now_ms() as i64;
    (cx.cache.borrow_mut()).insert(NOW, crate::exec::eval::Cached::Value(Value::Integer(ms)));
    ms
}

fn now_ms() -> u64 {
    if let Some(f) = CLOCK.get() {
        return f();
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
    #[cfg(target_arch = "wasm32")]
    0
}

/// An RFC 9562 version 7 UUID as lower-case text: 48 bits of Unix milliseconds (so ids sort by
/// creation time), the version, 74 random bits, the variant.
pub fn uuid7(ms: u64, r1: u64, r2: u64) -> String {
    let hi: u64 = (ms & 0xFFFF_FFFF_FFFF) << 16 | 0x7000 | (r1 & 0x0FFF);
    let lo: u64 = 0x8000_0000_0000_0000 | (r2 & 0x3FFF_FFFF_FFFF_FFFF);
    let h = format!("{hi:016x}{lo:016x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
pub fn cast(v: Value, ty: ColType) -> Value {
    match (ty, v) {
        (_, Value::Null) => Value::Null,
        (ColType::Integer, v) => Value::Integer(types::to_integer(&v).unwrap_or(0)),
        (ColType::Real, v) => Value::Real(types::to_f64(&v).unwrap_or(0.0)),
        (ColType::Text, v) => Value::Text(to_text(&v).unwrap_or_default()),
        (ColType::Blob, Value::Blob(b)) => Value::Blob(b),
        (ColType::Blob, v) => Value::Blob(to_text(&v).unwrap_or_default().into_bytes()),
        (ColType::Numeric, v @ (Value::Integer(_) | Value::Real(_))) => v,
        (ColType::Numeric, v) => match to_numeric(&v) {
            Value::Real(r) if r.fract() == 0.0 && r.abs() < 9.0e18 => Value::Integer(r as i64),
            n => n,
        },
        (ColType::Any, v) => v,
    }
}

fn arg<'r>(args: &'r [PExpr], i: usize, row: &'r [Value], cx: &Cx<'r>) -> Result<Cow<'r, Value>> {
    match args.get(i) {
        Some(a) => eval(a, row, cx),
        None => Ok(Cow::Owned(Value::Null)),
    }
}

pub(super) fn call(f: Func, args: &[PExpr], row: &[Value], cx: &Cx) -> Result<Value> {
    use Value::*;
    let a0 = || arg(args, 0, row, cx);
    Ok(match f {
        Func::Abs => match a0()?.as_ref() {
            Null => Null,
            Integer(i) => Integer(i.checked_abs().ok_or(Error::IntegerOverflow)?),
            Real(r) => Real(r.abs()),
            v => Real(types::to_f64(v).unwrap_or(0.0).abs()),
        },
        Func::Coalesce | Func::IfNull => {
            for a in args {
                let v = eval(a, row, cx)?;
                if !v.is_null() {
                    return Ok(v.into_owned());
                }
            }
            Null
        }
        Func::Length => match a0()?.as_ref() {
            Null => Null,
            Blob(b) => Integer(b.len() as i64),
            Text(s) => Integer(cairn_value::text::char_count(s) as i64),
            v => Integer(cairn_value::text::char_count(&to_text(v).unwrap_or_default()) as i64),
        },
        Func::Lower | Func::Upper => match to_text(&*a0()?) {
            None => Null,
            Some(s) => Text(if f == Func::Lower {
                s.to_ascii_lowercase()
            } else {
                s.to_ascii_uppercase()
            }),
        },
        Func::Substr => substr(
            &*a0()?,
            &*arg(args, 1, row, cx)?,
            args.get(2)
                .map(|a| eval(a, row, cx))
                .transpose()?
                .as_deref(),
        ),
        Func::Round => {
            let x = a0()?;
            if x.is_null() {
                return Ok(Null);
            }
            let n = match args.get(1) {
                Some(a) => match eval(a, row, cx)?.as_ref() {
                    Null => return Ok(Null),
                    v => types::to_integer(v).unwrap_or(0).clamp(0, 30),
                },
                None => 0,
            };
            let r = types::to_f64(&x).unwrap_or(0.0);
            Real(round(r, n as usize))
        }
        Func::Min | Func::Max => {
            let mut best: Option<Value> = None;
            for a in args {
                let v = eval(a, row, cx)?;
                if v.is_null() {
                    return Ok(Null);
                }
                let better = match &best {
                    None => true,
                    Some(b) => {
                        // On ties min() takes the later argument, max() the earlier, as SQLite.
                        let o = v.total_cmp(b);
                        if f == Func::Min {
                            o != Ordering::Greater
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if better {
                    best = Some(v.into_owned());
                }
            }
            best.unwrap_or(Null)
        }
        Func::Random => Integer(cx.random()),
        Func::Uuid7 => Text(uuid7(now_ms(), cx.random() as u64, cx.random() as u64)),
        _ => return call_rare(f, args, row, cx),
    })
}

/// The functions applications call least, out of line: `call` stays small, and a split build
/// (docs/size.md, "The split module") leaves these out of the module a page fetches first.
#[inline(never)]
fn call_rare(f: Func, args: &[PExpr], row: &[Value], cx: &Cx) -> Result<Value> {
    use Value::*;
    let a0 = || arg(args, 0, row, cx);
    Ok(match f {
        Func::Date(which) => {
            let vals = (args.iter())
                .map(|a| eval(a, row, cx).map(Cow::into_owned))
                .collect::<Result<Vec<_>>>()?;
            super::datetime::call(which, &vals, &mut || statement_now(cx))
        }
        Func::Json(j) => super::json_fn::call(j, args, row, cx)?,
        Func::Sign => match to_numeric(&*a0()?) {
            Integer(i) => Integer(i.signum()),
            Real(r) => Integer(if r > 0.0 {
                1
            } else if r < 0.0 {
                -1
            } else {
                0
            }),
            _ => Null,
        },
        Func::NullIf => {
            let (x, y) = (a0()?, arg(args, 1, row, cx)?);
            if compare_op(BinOp::Eq, &x, &y, Affinity::None, Affinity::None) == Integer(1) {
                Null
            } else {
                x.into_owned()
            }
        }
        Func::Iif => {
            if eval_bool(&args[0], row, cx)? == Some(true) {
                arg(args, 1, row, cx)?.into_owned()
            } else {
                arg(args, 2, row, cx)?.into_owned()
            }
        }
        Func::Trim | Func::LTrim | Func::RTrim => {
            let x = a0()?;
            let Some(s) = to_text(&x) else {
                return Ok(Null);
            };
            let chars: Vec<char> = if args.len() > 1 {
                match to_text(&*arg(args, 1, row, cx)?) {
                    Some(c) => c.chars().collect(),
                    None => return Ok(Null),
                }
            } else {
                vec![' ']
            };
            let pat = |c: char| chars.contains(&c);
            Text(match f {
                Func::Trim => s.trim_matches(pat).to_string(),
                Func::LTrim => s.trim_start_matches(pat).to_string(),
                _ => s.trim_end_matches(pat).to_string(),
            })
        }
        Func::Replace => {
            let (x, y, z) = (a0()?, arg(args, 1, row, cx)?, arg(args, 2, row, cx)?);
            // SQLite's order: an empty pattern returns x before the replacement is looked at.
            match (to_text(&x), to_text(&y)) {
                (Some(x), Some(y)) if y.is_empty() => Text(x),
                (Some(x), Some(y)) => match to_text(&z) {
                    Some(z) => Text(replace_all(&x, &y, &z)),
                    None => Null,
                },
                _ => Null,
            }
        }
        Func::Instr => {
            let (x, y) = (a0()?, arg(args, 1, row, cx)?);
            match (x.as_ref(), y.as_ref()) {
                (Null, _) | (_, Null) => Null,
                (Blob(h), Blob(n)) => Integer(if n.is_empty() {
                    1
                } else {
                    h.windows(n.len())
                        .position(|w| w == n.as_slice())
                        .map_or(0, |p| p as i64 + 1)
                }),
                (x, y) => {
                    let (h, n) = (
                        to_text(x).unwrap_or_default(),
                        to_text(y).unwrap_or_default(),
                    );
                    Integer(match h.find(&n) {
                        Some(p) => cairn_value::text::char_count(&h[..p]) as i64 + 1,
                        None => 0,
                    })
                }
            }
        }
        Func::Typeof => Text(a0()?.type_name().to_string()),
        Func::Hex => {
            let x = a0()?;
            let bytes: Vec<u8> = match x.as_ref() {
                Null => Vec::new(),
                Blob(b) => b.clone(),
                v => to_text(v).unwrap_or_default().into_bytes(),
            };
            let mut s = String::with_capacity(bytes.len() * 2);
            for b in bytes {
                s.push_str(&format!("{b:02X}"));
            }
            Text(s)
        }
        Func::Char => {
            // Each argument as an integer, the character with that code point (SQLite's
            // char(), which schema tools use to build patterns); one that is none is U+FFFD.
            let mut s = String::with_capacity(args.len());
            for a in args {
                let v = eval(a, row, cx)?;
                let c = types::to_integer(&v).unwrap_or(0);
                s.push(
                    u32::try_from(c)
                        .ok()
                        .and_then(char::from_u32)
                        .unwrap_or('\u{FFFD}'),
                );
            }
            Text(s)
        }
        _ => unreachable!("call handles the other functions"),
    })
}

/// Rounds half away from zero to `n` decimals, as SQLite's round().
fn round(r: f64, n: usize) -> f64 {
    if !r.is_finite() {
        return r;
    }
    if n == 0 {
        return r.round();
    }
    // Beyond 2^52 every double is an integer already.
    if r.abs() >= 4_503_599_627_370_496.0 {
        return r;
    }
    let direct = cairn_value::num::parse_f64(&cairn_value::num::fixed(r, n)).unwrap_or(r);
    let m = 10f64.powi(n as i32);
    let scaled = (r * m).round() / m;
    if scaled.is_finite() && (scaled - r).abs() <= (direct - r).abs() + f64::EPSILON * r.abs() {
        scaled
    } else {
        direct
    }
}

fn substr(x: &Value, start: &Value, len: Option<&Value>) -> Value {
    if x.is_null() || start.is_null() || len.is_some_and(|l| l.is_null()) {
        return Value::Null;
    }
    let mut p1 = types::to_integer(start).unwrap_or(0);
    // SQLite reads an empty blob as a NULL pointer and returns NULL.
    if matches!(x, Value::Blob(b) if b.is_empty()) {
        return Value::Null;
    }
    let (is_blob, chars): (bool, Vec<u32>) = match x {
        Value::Blob(b) => (true, b.iter().map(|&c| c as u32).collect()),
        v => (
            false,
            to_text(v)
                .unwrap_or_default()
                .chars()
                .map(|c| c as u32)
                .collect(),
        ),
    };
    let n = chars.len() as i64;
    let mut p2 = match len {
        Some(l) => types::to_integer(l).unwrap_or(0),
        None => 1_000_000_000,
    };
    // SQLite's substr() arithmetic, literally.
    let mut neg = false;
    if p2 < 0 {
        p2 = p2.saturating_neg();
        neg = true;
    }
    if p1 < 0 {
        p1 = p1.saturating_add(n);
        if p1 < 0 {
            p2 = p2.saturating_add(p1).max(0);
            p1 = 0;
        }
    } else if p1 > 0 {
        p1 -= 1;
    } else if p2 > 0 {
        p2 -= 1;
    }
    if neg {
        p1 = p1.saturating_sub(p2);
        if p1 < 0 {
            p2 = p2.saturating_add(p1);
            p1 = 0;
        }
    }
    let from = p1.clamp(0, n) as usize;
    let to = p1.saturating_add(p2).clamp(0, n) as usize;
    let slice = if from < to { &chars[from..to] } else { &[][..] };
    if is_blob {
        Value::Blob(slice.iter().map(|&c| c as u8).collect())
    } else {
        Value::Text(slice.iter().filter_map(|&c| char::from_u32(c)).collect())
    }
}

/// `x` with each `y` (not empty) replaced by `z`, left to right, as `str::replace` does: a
/// search over the bytes (a match of valid UTF-8 in valid UTF-8 begins and ends on character
/// boundaries), so that std's two-way string searcher stays out of the code the common
/// statements run (about 1 KB of wasm).
fn replace_all(x: &str, y: &str, z: &str) -> String {
    let (h, n) = (x.as_bytes(), y.as_bytes());
    let mut out = String::with_capacity(x.len());
    let (mut i, mut from) = (0, 0);
    while i + n.len() <= h.len() {
        if h[i..].starts_with(n) {
            out.push_str(&x[from..i]);
            out.push_str(z);
            i += n.len();
            from = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&x[from..]);
    out
}
