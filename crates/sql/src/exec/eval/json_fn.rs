//! The JSON functions (SQLite's JSON1) over [`super::json`]'s tree: what each takes, in which
//! cases it returns NULL, and which of its results are JSON (SQLite's JSON subtype: a JSON
//! result passed to another JSON function goes in as JSON, not as a string).

use super::json::{self, Edit, J};
use super::{eval, Cx};
use crate::error::{Error, Result};
use crate::plan::{Func, PExpr};
use crate::types::to_text;
use cairn_value::Value;
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonFn {
    Json,
    Valid,
    Extract,
    /// `->`: the JSON text of what the path finds.
    Arrow,
    /// `->>`: its SQL value, as `json_extract`.
    ArrowText,
    Type,
    ArrayLength,
    Object,
    Array,
    Set,
    Insert,
    Replace,
    Remove,
    Patch,
    Quote,
    /// `set_add(s, v)`, `set_remove(s, v)`, `map_set(m, k, v)`, `map_remove(m, k)`.
    SetAdd,
    SetRemove,
    MapSet,
    MapRemove,
}

/// The function a name and argument count call, and whether the count is right; None for a
/// name that is no JSON function.
pub fn lookup(name: &str, n: usize) -> Option<(JsonFn, bool)> {
    use JsonFn::*;
    Some(match name {
        "json" => (Json, n == 1),
        "json_valid" => (Valid, n == 1 || n == 2),
        "json_extract" => (Extract, n >= 1),
        "->" => (Arrow, n == 2),
        "->>" => (ArrowText, n == 2),
        "json_type" => (Type, n == 1 || n == 2),
        "json_array_length" => (ArrayLength, n == 1 || n == 2),
        "json_object" => (Object, true),
        "json_array" => (Array, true),
        "json_set" => (Set, n >= 1),
        "json_insert" => (Insert, n >= 1),
        "json_replace" => (Replace, n >= 1),
        "json_remove" => (Remove, n >= 1),
        "json_patch" => (Patch, n == 2),
        "json_quote" => (Quote, n == 1),
        "set_add" => (SetAdd, n == 2),
        "set_remove" => (SetRemove, n == 2),
        "map_set" => (MapSet, n == 3),
        "map_remove" => (MapRemove, n == 2),
        _ => return None,
    })
}

/// Whether `e`'s value is JSON text that a JSON function takes as JSON (SQLite's subtype).
fn is_json(e: &PExpr) -> bool {
    use JsonFn::*;
    match e {
        PExpr::Func(Func::Json(f), args) => match f {
            Json | Arrow | Object | Array | Set | Insert | Replace | Remove | Patch | Quote
            | SetAdd | SetRemove | MapSet | MapRemove => true,
            Extract => args.len() > 2,
            _ => false,
        },
        _ => false,
    }
}

/// A JSON argument (the document a function reads): NULL is None, anything else must be JSON
/// text.
fn doc(e: &PExpr, row: &[Value], cx: &Cx) -> Result<Option<J>> {
    let v = eval(e, row, cx)?;
    match doc_text(&v)? {
        None => Ok(None),
        Some(t) => json::parse(&t).map(Some).ok_or_else(json::malformed),
    }
}

/// A value argument (an element of `json_array`, a value `json_set` writes): SQL text is a
/// string unless it comes from a JSON function.
fn value(e: &PExpr, row: &[Value], cx: &Cx) -> Result<J> {
    if let PExpr::Func(Func::Json(JsonFn::Extract), args) = e {
        if args.len() == 2 {
            // Only an array or object found is JSON; a string found is text.
            if let Some(j) = extract_one(args, row, cx, false)? {
                return Ok(match j {
                    j @ (J::Arr(_) | J::Obj(_)) => j,
                    j => json::from_sql(&json::to_sql(&j))?,
                });
            }
            return Ok(J::Null);
        }
    }
    let v = eval(e, row, cx)?;
    if is_json(e) {
        if let Value::Text(s) = v.as_ref() {
            return json::parse(s).ok_or_else(json::malformed);
        }
    }
    json::from_sql(&v)
}

/// A path argument's text; None for NULL.
fn path_text(e: &PExpr, row: &[Value], cx: &Cx) -> Result<Option<String>> {
    Ok(to_text(&*eval(e, row, cx)?))
}

/// A document argument's text, without parsing it: None for NULL.
fn doc_text<'v>(v: &'v Value) -> Result<Option<Cow<'v, str>>> {
    Ok(match v {
        Value::Null => None,
        Value::Blob(_) => return Err(json::malformed()),
        Value::Text(s) => Some(Cow::Borrowed(s.as_str())),
        // SQLite reads an infinite REAL's text (`Inf`) as JSON5's Infinity, written 9e999.
        Value::Real(r) if r.is_infinite() => {
            Some(Cow::Borrowed(if *r > 0.0 { "9e999" } else { "-9e999" }))
        }
        v => to_text(v).map(Cow::Owned),
    })
}

/// What `path` finds in the document `text`: checked whole, as SQLite does, but only the
/// value found is built.
fn find_text(text: &str, path: &str) -> Result<Option<J>> {
    let Some(rest) = path.strip_prefix('$') else {
        if !json::valid(text) {
            return Err(json::malformed());
        }
        return Err(json::bad_path(path));
    };
    match json::locate(text, rest) {
        json::Located::Malformed => Err(json::malformed()),
        json::Located::BadPath => Err(json::bad_path(path)),
        json::Located::Found(None) => Ok(None),
        json::Located::Found(Some((a, b))) => json::parse(&text[a..b])
            .map(Some)
            .ok_or_else(json::malformed),
    }
}

/// What `args[1]` (a path, or for the arrows a label or index too) finds in the document
/// `args[0]`. Ok(None): NULL document or path, or nothing there.
fn extract_one(args: &[PExpr], row: &[Value], cx: &Cx, arrow: bool) -> Result<Option<J>> {
    let dv = eval(&args[0], row, cx)?;
    let Some(d) = doc_text(&dv)? else {
        return Ok(None);
    };
    let pv = eval(&args[1], row, cx)?;
    let path = match pv.as_ref() {
        // The document is read (and refused if malformed) before the path.
        Value::Null if !json::valid(&d) => return Err(json::malformed()),
        Value::Null => return Ok(None),
        Value::Integer(i) if arrow => {
            if *i < 0 {
                format!("$[#{i}]")
            } else {
                format!("$[{i}]")
            }
        }
        v => {
            let p = to_text(v).unwrap_or_default();
            if p.starts_with('$') {
                p
            } else if !arrow {
                return Err(json::bad_path(&p));
            } else if !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                format!("$.{p}")
            } else if p.starts_with('[') && p.len() >= 3 && p.ends_with(']') {
                format!("${p}")
            } else {
                format!("$.\"{p}\"")
            }
        }
    };
    find_text(&d, &path)
}

fn find(d: &J, path: &str) -> Result<Option<J>> {
    match path.strip_prefix('$') {
        Some(rest) => json::lookup(d, rest)
            .map(|j| j.cloned())
            .map_err(|()| json::bad_path(path)),
        None => Err(json::bad_path(path)),
    }
}

/// The document after an optional path argument (`json_type(x, p)`): Ok(None) for NULL or
/// nothing found.
fn at_path(args: &[PExpr], row: &[Value], cx: &Cx) -> Result<Option<J>> {
    if args.len() < 2 {
        return doc(&args[0], row, cx);
    }
    let dv = eval(&args[0], row, cx)?;
    let Some(d) = doc_text(&dv)? else {
        return Ok(None);
    };
    match path_text(&args[1], row, cx)? {
        None => {
            // The document is read (and refused if malformed) before the path.
            if !json::valid(&d) {
                return Err(json::malformed());
            }
            Ok(None)
        }
        Some(p) => find_text(&d, &p),
    }
}

/// Adds a member to a JSON aggregate's text: `args[0]` to an array's, or the label `args[0]`
/// and the value `args[1]` to an object's (a NULL label adds nothing, as SQLite).
pub fn member(
    acc: &mut String,
    object: bool,
    args: &[PExpr],
    row: &[Value],
    cx: &Cx,
) -> Result<()> {
    let mut item = String::new();
    if object {
        match to_text(&*eval(&args[0], row, cx)?) {
            Some(k) => {
                item.push('"');
                item.push_str(&json::escape(&k));
                item.push_str("\":");
            }
            None => return Ok(()),
        }
    }
    json::render(&value(&args[usize::from(object)], row, cx)?, &mut item);
    if !acc.is_empty() {
        acc.push(',');
    }
    acc.push_str(&item);
    Ok(())
}

fn json_text(j: &J) -> Value {
    Value::Text(json::text(j))
}

pub fn call(f: JsonFn, args: &[PExpr], row: &[Value], cx: &Cx) -> Result<Value> {
    Ok(match f {
        JsonFn::Json => match doc(&args[0], row, cx)? {
            Some(j) => json_text(&j),
            None => Value::Null,
        },
        JsonFn::Valid => {
            if let Some(a) = args.get(1) {
                let flags = crate::types::to_integer(&*eval(a, row, cx)?).unwrap_or(0);
                if !(1..=15).contains(&flags) {
                    return Err(Error::Json(
                        "FLAGS parameter to json_valid() must be between 1 and 15".into(),
                    ));
                }
            }
            match eval(&args[0], row, cx)?.as_ref() {
                Value::Null => Value::Null,
                Value::Blob(_) => Value::Integer(0),
                v => Value::Integer(json::parse(&to_text(v).unwrap_or_default()).is_some() as i64),
            }
        }
        JsonFn::Extract if args.len() < 2 => Value::Null,
        JsonFn::Extract if args.len() == 2 => match extract_one(args, row, cx, false)? {
            Some(j) => json::into_sql(j),
            None => Value::Null,
        },
        JsonFn::Extract => {
            let Some(d) = doc(&args[0], row, cx)? else {
                return Ok(Value::Null);
            };
            let mut out = Vec::with_capacity(args.len() - 1);
            for a in &args[1..] {
                let Some(p) = path_text(a, row, cx)? else {
                    return Ok(Value::Null);
                };
                out.push(find(&d, &p)?.unwrap_or(J::Null));
            }
            json_text(&J::Arr(out))
        }
        JsonFn::Arrow => match extract_one(args, row, cx, true)? {
            Some(j) => json_text(&j),
            None => Value::Null,
        },
        JsonFn::ArrowText => match extract_one(args, row, cx, true)? {
            Some(j) => json::into_sql(j),
            None => Value::Null,
        },
        JsonFn::Type => match at_path(args, row, cx)? {
            Some(j) => Value::Text(json::type_name(&j).into()),
            None => Value::Null,
        },
        JsonFn::ArrayLength => match at_path(args, row, cx)? {
            Some(J::Arr(a)) => Value::Integer(a.len() as i64),
            Some(_) => Value::Integer(0),
            None => Value::Null,
        },
        JsonFn::Array => {
            let mut out = Vec::with_capacity(args.len());
            for a in args {
                out.push(value(a, row, cx)?);
            }
            json_text(&J::Arr(out))
        }
        JsonFn::Object => {
            if args.len() % 2 == 1 {
                return Err(Error::Json(
                    "json_object() requires an even number of arguments".into(),
                ));
            }
            let mut m = Vec::with_capacity(args.len() / 2);
            for kv in args.chunks(2) {
                let k = match eval(&kv[0], row, cx)?.into_owned() {
                    Value::Text(s) => s,
                    _ => return Err(Error::Json("json_object() labels must be TEXT".into())),
                };
                m.push((json::escape(&k), value(&kv[1], row, cx)?));
            }
            json_text(&J::Obj(m))
        }
        JsonFn::Set | JsonFn::Insert | JsonFn::Replace => {
            if args.len().is_multiple_of(2) {
                let name = match f {
                    JsonFn::Set => "set",
                    JsonFn::Insert => "insert",
                    _ => "replace",
                };
                return Err(Error::Json(format!(
                    "json_{name}() needs an odd number of arguments"
                )));
            }
            let how = match f {
                JsonFn::Set => Edit::Set,
                JsonFn::Insert => Edit::Insert,
                _ => Edit::Replace,
            };
            let Some(mut d) = doc(&args[0], row, cx)? else {
                return Ok(Value::Null);
            };
            for pv in args[1..].chunks(2) {
                let Some(p) = path_text(&pv[0], row, cx)? else {
                    continue;
                };
                let Some(rest) = p.strip_prefix('$') else {
                    return Err(json::bad_path(&p));
                };
                let v = value(&pv[1], row, cx)?;
                if rest.is_empty() {
                    if how != Edit::Insert {
                        d = v;
                    }
                    continue;
                }
                json::edit(&mut d, rest, how, &v).map_err(|()| json::bad_path(&p))?;
            }
            json_text(&d)
        }
        JsonFn::Remove => {
            let Some(mut d) = doc(&args[0], row, cx)? else {
                return Ok(Value::Null);
            };
            for a in &args[1..] {
                let Some(p) = path_text(a, row, cx)? else {
                    return Ok(Value::Null);
                };
                let Some(rest) = p.strip_prefix('$') else {
                    return Err(json::bad_path(&p));
                };
                if rest.is_empty() {
                    return Ok(Value::Null);
                }
                json::edit(&mut d, rest, Edit::Remove, &J::Null)
                    .map_err(|()| json::bad_path(&p))?;
            }
            json_text(&d)
        }
        JsonFn::Patch => {
            let (Some(t), Some(p)) = (doc(&args[0], row, cx)?, doc(&args[1], row, cx)?) else {
                return Ok(Value::Null);
            };
            json_text(&json::patch(t, &p))
        }
        // A JSON function's result is already JSON, and stays as it is.
        JsonFn::Quote => json_text(&value(&args[0], row, cx)?),
        JsonFn::SetAdd | JsonFn::SetRemove => {
            let s = eval(&args[0], row, cx)?;
            let v = eval(&args[1], row, cx)?;
            super::coll_fn::set_edit(&s, &v, f == JsonFn::SetAdd)?
        }
        JsonFn::MapSet | JsonFn::MapRemove => {
            let m = eval(&args[0], row, cx)?;
            let k = eval(&args[1], row, cx)?;
            match args.get(2) {
                Some(a) => super::coll_fn::map_edit(&m, &k, Some(&*eval(a, row, cx)?))?,
                None => super::coll_fn::map_edit(&m, &k, None)?,
            }
        }
    })
}
