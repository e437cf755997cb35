//! Sets and maps as JSON text: `set_add`, `set_remove`, `map_set`, `map_remove`, and what the
//! capture of a replicated table's SET and MAP columns reads of a value (its elements or keys,
//! to record what a write changed as one op each). A set is a JSON array of distinct scalars
//! (null, numbers, strings) in `cairn_value::coll::elem_cmp` order; a map a JSON object of
//! scalars with its keys in UTF-8 byte order (docs/sql.md, "Sets and maps").

use super::json::{self, J};
use crate::error::{Error, Result};
use cairn_value::coll::{elem_cmp, fits, map_text, set_text};
use cairn_value::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A JSON value as a set's element or a map's value: scalars only.
fn scalar(j: &J, what: &str) -> Result<Value> {
    match j {
        J::Arr(_) | J::Obj(_) => Err(Error::Type(format!(
            "{what} holds NULL, numbers and text, not JSON arrays or objects"
        ))),
        j => Ok(json::to_sql(j)),
    }
}

fn element(v: &Value, what: &str) -> Result<Value> {
    if !fits(v) {
        return Err(Error::Type(format!(
            "{what} holds NULL, numbers and text, not BLOBs or NaN"
        )));
    }
    Ok(v.clone())
}

fn parsed(text: &str) -> Result<J> {
    json::parse(text).ok_or_else(json::malformed)
}

/// The elements of a set's value, in order and distinct: NULL is the empty set.
pub fn set_elems(v: &Value) -> Result<Vec<Value>> {
    let text = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Text(t) => t,
        _ => return Err(Error::Type("a set is a JSON array (TEXT)".into())),
    };
    let J::Arr(items) = parsed(text)? else {
        return Err(Error::Type("a set is a JSON array".into()));
    };
    let mut out = Vec::with_capacity(items.len());
    for j in &items {
        out.push(scalar(j, "a set")?);
    }
    out.sort_by(elem_cmp);
    out.dedup_by(|a, b| elem_cmp(a, b) == Ordering::Equal);
    Ok(out)
}

/// The entries of a map's value: NULL is the empty map; of a key written twice, the first.
pub fn map_entries(v: &Value) -> Result<BTreeMap<String, Value>> {
    let text = match v {
        Value::Null => return Ok(BTreeMap::new()),
        Value::Text(t) => t,
        _ => return Err(Error::Type("a map is a JSON object (TEXT)".into())),
    };
    let J::Obj(members) = parsed(text)? else {
        return Err(Error::Type("a map is a JSON object".into()));
    };
    let mut out = BTreeMap::new();
    for (k, j) in &members {
        let x = scalar(j, "a map")?;
        out.entry(json::unescape(k)).or_insert(x);
    }
    Ok(out)
}

fn key(v: &Value) -> Result<String> {
    match v {
        Value::Text(s) => Ok(s.clone()),
        _ => Err(Error::Type("a map's key is TEXT".into())),
    }
}

/// `set_add(s, v)` (`add`) or `set_remove(s, v)`: the set with `v` in it, or without it.
pub fn set_edit(s: &Value, v: &Value, add: bool) -> Result<Value> {
    let mut elems = set_elems(s)?;
    let v = element(v, "a set")?;
    match elems.binary_search_by(|e| elem_cmp(e, &v)) {
        Ok(i) if !add => {
            elems.remove(i);
        }
        Err(i) if add => elems.insert(i, v),
        _ => {}
    }
    Ok(Value::Text(set_text(elems.iter())))
}

/// `map_set(m, k, v)` (`v` Some) or `map_remove(m, k)`.
pub fn map_edit(m: &Value, k: &Value, v: Option<&Value>) -> Result<Value> {
    let mut entries = map_entries(m)?;
    let k = key(k)?;
    match v {
        Some(v) => {
            entries.insert(k, element(v, "a map")?);
        }
        None => {
            entries.remove(&k);
        }
    }
    Ok(Value::Text(map_text(
        entries.iter().map(|(k, v)| (k.as_str(), v)),
    )))
}

/// What a write changed in a SET or MAP column, as the ops that record it.
pub enum Edit<'a> {
    Add(&'a Value),
    Remove(&'a Value),
    Set(&'a str, &'a Value),
    Unset(&'a str),
}

/// Calls `f` with each element `new` has and `old` has not (`Add`), and each `old` has and
/// `new` has not (`Remove`), in order.
pub fn set_diff(old: &[Value], new: &[Value], f: &mut dyn FnMut(Edit)) {
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let o = match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) => elem_cmp(a, b),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match o {
            Ordering::Less => {
                f(Edit::Remove(&old[i]));
                i += 1;
            }
            Ordering::Greater => {
                f(Edit::Add(&new[j]));
                j += 1;
            }
            Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
}

/// Calls `f` with each key `new` sets to another value than `old` holds (`Set`), and each
/// key `old` has and `new` has not (`Unset`), in key order.
pub fn map_diff(
    old: &BTreeMap<String, Value>,
    new: &BTreeMap<String, Value>,
    f: &mut dyn FnMut(Edit),
) {
    for (k, v) in new {
        let same = old
            .get(k)
            .is_some_and(|o| crate::exec::capture::same_value(o, v));
        if !same {
            f(Edit::Set(k, v));
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            f(Edit::Unset(k));
        }
    }
}
