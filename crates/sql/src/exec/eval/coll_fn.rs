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

/// A map's entries in key order (UTF-8 byte order), each key once. A sorted list rather than a
/// `BTreeMap<String, Value>`: each map type is its own copy of std's B-tree code, and no other
/// map of the engine has this one's.
pub type Entries = Vec<(String, Value)>;

/// The entries of a map's value: NULL is the empty map; of a key written twice, the first.
pub fn map_entries(v: &Value) -> Result<Entries> {
    let text = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Text(t) => t,
        _ => return Err(Error::Type("a map is a JSON object (TEXT)".into())),
    };
    let J::Obj(members) = parsed(text)? else {
        return Err(Error::Type("a map is a JSON object".into()));
    };
    let mut all = Vec::with_capacity(members.len());
    for (i, (k, j)) in members.iter().enumerate() {
        all.push((json::unescape(k), i, scalar(j, "a map")?));
    }
    // The store's heapsort is not stable: the position breaks ties, so the first of a key
    // written twice comes first and is the one kept.
    cairn_store::sort::sort_by(&mut all, |a, b| (&a.0, a.1) < (&b.0, b.1));
    let mut out: Entries = Vec::with_capacity(all.len());
    for (k, _, x) in all {
        if out.last().is_none_or(|l| l.0 != k) {
            out.push((k, x));
        }
    }
    Ok(out)
}

/// Where `k` is in `entries`, or where it would go.
fn find(entries: &[(String, Value)], k: &str) -> std::result::Result<usize, usize> {
    entries.binary_search_by(|e| e.0.as_str().cmp(k))
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
    match (find(&entries, &k), v) {
        (Ok(i), Some(v)) => entries[i].1 = element(v, "a map")?,
        (Err(i), Some(v)) => entries.insert(i, (k, element(v, "a map")?)),
        (Ok(i), None) => {
            entries.remove(i);
        }
        (Err(_), None) => {}
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
pub fn map_diff(old: &[(String, Value)], new: &[(String, Value)], f: &mut dyn FnMut(Edit)) {
    for (k, v) in new {
        let same = find(old, k).is_ok_and(|i| crate::exec::capture::same_value(&old[i].1, v));
        if !same {
            f(Edit::Set(k, v));
        }
    }
    for (k, _) in old {
        if find(new, k).is_err() {
            f(Edit::Unset(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn map_entries_sort_keys_and_keep_the_first_of_a_key_written_twice() {
        let e = map_entries(&text(r#"{"b":1,"a":2,"b":3,"\u0061":4,"c":null}"#)).unwrap();
        let keys: Vec<&str> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(e[0].1, Value::Integer(2));
        assert_eq!(e[1].1, Value::Integer(1));
        assert!(map_entries(&Value::Null).unwrap().is_empty());
        assert!(map_entries(&text("[1]")).is_err());
    }

    #[test]
    fn map_edit_sets_replaces_and_removes_in_key_order() {
        let m = text(r#"{"b":1,"d":2}"#);
        let set =
            |m: &Value, k: &str, v: i64| map_edit(m, &text(k), Some(&Value::Integer(v))).unwrap();
        assert_eq!(set(&m, "c", 3), text(r#"{"b":1,"c":3,"d":2}"#));
        assert_eq!(set(&m, "a", 3), text(r#"{"a":3,"b":1,"d":2}"#));
        assert_eq!(set(&m, "e", 3), text(r#"{"b":1,"d":2,"e":3}"#));
        assert_eq!(set(&m, "d", 5), text(r#"{"b":1,"d":5}"#));
        assert_eq!(map_edit(&m, &text("b"), None).unwrap(), text(r#"{"d":2}"#));
        assert_eq!(map_edit(&m, &text("x"), None).unwrap(), m);
    }

    #[test]
    fn map_diff_sets_changed_keys_and_unsets_gone_ones() {
        let old = map_entries(&text(r#"{"a":1,"b":2,"c":3}"#)).unwrap();
        let new = map_entries(&text(r#"{"b":2,"c":4,"d":5}"#)).unwrap();
        let mut seen = Vec::new();
        map_diff(&old, &new, &mut |e| match e {
            Edit::Set(k, v) => seen.push(format!("set {k} {v:?}")),
            Edit::Unset(k) => seen.push(format!("unset {k}")),
            _ => {}
        });
        assert_eq!(seen, ["set c Integer(4)", "set d Integer(5)", "unset a"]);
    }
}
