//! Sorting: the order of rows under ORDER BY keys.

use crate::plan::*;
use cairn_value::Value;
use std::cmp::Ordering;

pub fn compare_rows(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    for k in keys {
        let o = compare_key(&a[k.col], &b[k.col], k);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Sorts rows by `keys` (stable). ORDER BY and the window step share this one instance of
/// std's sort: each element type and comparison it is used with is its own few KB of wasm.
pub(super) fn sort_rows(rows: &mut [Vec<Value>], keys: &[SortKey]) {
    rows.sort_by(|a, b| compare_rows(a, b, keys));
}

/// One sort key's order between two values.
pub(super) fn compare_key(x: &Value, y: &Value, k: &SortKey) -> Ordering {
    match (x.is_null(), y.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => {
            if k.nulls_first {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (false, true) => {
            if k.nulls_first {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        _ => {
            let o = x.total_cmp(y);
            if k.desc {
                o.reverse()
            } else {
                o
            }
        }
    }
}
