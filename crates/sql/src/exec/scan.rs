//! Scans and joins: each join level's rows, read by point keys, key ranges or a full scan,
//! filtered on the record where it lies, and hash joins over materialized inner rows.

use crate::error::{Error, Result};
use crate::exec::eval::{eval, eval_bool, push_norm, Cache, Cached, ColTest, Cx, HashRows};
use crate::exec::query::{collect_rows, scratch_slot, skip_slot, topk_bound};
use crate::exec::sort::compare_key;
use crate::exec::{all_true, Sink};
use crate::plan::prefix_successor;
use crate::plan::*;
use crate::schema::{Key, Table};
use crate::storage::TreeId;
use crate::types::ColType;
use cairn_store::hash::FastMap;
use cairn_value::codec::{decode_key_value, encode_key_value, skip_key_value, Layout, Record};
use cairn_value::Value;
use std::cmp::Ordering;
use std::ops::Bound;
use std::rc::Rc;

/// Runs join levels `li..` for the current frame.
pub(super) fn run_levels(
    c: &Core,
    li: usize,
    frame: &mut Vec<Value>,
    cx: &Cx,
    sink: &mut Sink,
) -> Result<bool> {
    if li == c.levels.len() {
        return sink(frame);
    }
    if li == 0 && c.levels.len() > 1 {
        // A new execution: the inner levels' last point gets are from before it, and the
        // store may have changed since (`LastGet`).
        let mut cache = cx.cache.borrow_mut();
        for l in &c.levels[1..] {
            if let Some(Cached::Scratch(.., last)) = cache.get_mut(&scratch_slot(l)) {
                last.valid = false;
            }
        }
    }
    let lvl = &c.levels[li];
    // The last level hands its rows straight to the sink when there is nothing to do between.
    if li + 1 == c.levels.len() && !lvl.left && lvl.after.is_empty() {
        return for_each_row(lvl, frame, cx, sink);
    }
    let mut matched = false;
    let go = for_each_row(lvl, frame, cx, &mut |frame: &mut Vec<Value>| {
        matched = true;
        if !all_true(&lvl.after, frame, cx)? {
            return Ok(true);
        }
        run_levels(c, li + 1, frame, cx, sink)
    })?;
    if !go {
        return Ok(false);
    }
    if lvl.left && !matched {
        for s in &mut frame[lvl.base..lvl.base + lvl.width] {
            *s = Value::Null;
        }
        if all_true(&lvl.after, frame, cx)? {
            return run_levels(c, li + 1, frame, cx, sink);
        }
    }
    Ok(true)
}

/// Decodes columns into the frame, reusing the slots' text and blob buffers from the previous
/// row (no allocation per row for a scanned text column).
fn decode_cols(rec: &Record, cols: &[usize], base: usize, frame: &mut [Value]) -> Result<()> {
    Ok(rec.get_cols_into(cols, &mut frame[base..])?)
}

/// Finds the candidate rows of a level, writes each into the frame, checks the level's filters
/// and calls `f` for those that pass.
fn for_each_row(lvl: &Level, frame: &mut Vec<Value>, cx: &Cx, f: &mut Sink) -> Result<bool> {
    match (&lvl.source, &lvl.access) {
        (_, Access::Hash { build, probe }) => {
            let table = hash_table(lvl, build, frame, cx)?;
            let pv = eval(probe, frame, cx)?;
            if pv.is_null() {
                return Ok(true);
            }
            let mut k = Vec::new();
            push_norm(&pv, &mut k);
            if let Some(rows) = table.get(&k) {
                for r in rows {
                    frame[lvl.base..lvl.base + lvl.width].clone_from_slice(r);
                    if all_true(&lvl.filters, frame, cx)? && !f(frame)? {
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        }
        (Source::Json { tree, args }, _) => {
            let json = match args.first() {
                Some(a) => eval(a, frame, cx)?.into_owned(),
                None => Value::Null,
            };
            let root = args.get(1).map(|a| eval(a, frame, cx)).transpose()?;
            // The columns the query reads: the level's filters' and the others it needs.
            let mut wanted = 0u16;
            for &c in lvl.pre_cols.iter().chain(&lvl.post_cols) {
                wanted |= 1 << c;
            }
            let rows = crate::exec::eval::json_each::rows(*tree, &json, root.as_deref(), wanted)?;
            for r in rows {
                frame[lvl.base..lvl.base + lvl.width].clone_from_slice(&r[..lvl.width]);
                if all_true(&lvl.filters, frame, cx)? && !f(frame)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Source::Fts { fts, query, aux }, _) => {
            let mut q = Vec::with_capacity(query.len());
            for (op, e) in query {
                q.push((op.as_deref(), eval(e, frame, cx)?.into_owned()));
            }
            let mut calls = Vec::with_capacity(aux.len());
            for (kind, args) in aux {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(eval(a, frame, cx)?.into_owned());
                }
                calls.push(crate::fts::AuxCall { kind, args: vals });
            }
            // The content rows are read only when the query needs one of their columns.
            let n = fts.columns.len();
            let content = calls.iter().any(|c| c.kind != "bm25")
                || lvl.pre_cols.iter().chain(&lvl.post_cols).any(|&c| c < n);
            let rows = crate::fts::rows(cx.store, fts, &q, &calls, content)?;
            for r in rows {
                frame[lvl.base..lvl.base + lvl.width].clone_from_slice(&r[..lvl.width]);
                if all_true(&lvl.filters, frame, cx)? && !f(frame)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Source::Query(q), _) => {
            let rows = materialize(q, cx)?;
            for r in rows.iter() {
                frame[lvl.base..lvl.base + lvl.width].clone_from_slice(&r[..lvl.width]);
                if all_true(&lvl.filters, frame, cx)? && !f(frame)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Source::Table(t), Access::Scan { reverse }) => {
            let mut rf = RowFilter::new(lvl, frame, cx);
            let all = (Bound::Unbounded, Bound::Unbounded);
            let mut skip = take_skip(lvl, cx);
            cx.store.scan_each_past(
                t.tree,
                all.0,
                all.1,
                *reverse,
                &mut skip,
                &mut |key, value| primary_row(lvl, &mut rf, key, value, frame, cx, f),
            )
        }
        (
            Source::Table(t),
            Access::Index {
                index,
                probes,
                lower,
                upper,
                reverse,
                covering,
                sub_probe,
            },
        ) => {
            let mut rf = RowFilter::new(lvl, frame, cx);
            if index.is_none() && sub_probe.is_none() && lower.is_none() && upper.is_none() {
                // One key (`WHERE id = ?`, a join on the key) is built in the filter's buffer,
                // which an inner join level keeps from one outer row to the next.
                let single = match probes.as_slice() {
                    [p] if point_width(t) == Some(p.len()) => Some(p),
                    _ => None,
                };
                if let Some(probe) = single {
                    let mut k = std::mem::take(&mut rf.key);
                    k.clear();
                    // As in `point_keys`: an integer key in one allocation, on the first use.
                    k.reserve(12 * probe.len());
                    let named = point_key_into(probe, frame, cx, &mut k)?;
                    let go = match named {
                        // The key the last outer row looked up: its row again, unread.
                        Some(true) if rf.last.valid && rf.last.key == k => {
                            if rf.last.found {
                                let value = std::mem::take(&mut rf.value);
                                let go = primary_row(lvl, &mut rf, &k, &value, frame, cx, f);
                                rf.value = value;
                                go
                            } else {
                                Ok(true)
                            }
                        }
                        Some(true) if rf.keep.is_some() => {
                            let mut value = std::mem::take(&mut rf.value);
                            let go = cx.store.get_into(t.tree, &k, &mut value).and_then(|found| {
                                rf.last.valid = true;
                                rf.last.found = found;
                                rf.last.key.clear();
                                rf.last.key.extend_from_slice(&k);
                                if found {
                                    primary_row(lvl, &mut rf, &k, &value, frame, cx, f)
                                } else {
                                    Ok(true)
                                }
                            });
                            rf.value = value;
                            go
                        }
                        Some(true) => point_row(lvl, &mut rf, t, &k, frame, cx, f),
                        _ => Ok(true),
                    };
                    rf.key = k;
                    if named.is_some() {
                        return go;
                    }
                    rf.last.valid = false;
                } else if let Some(keys) = point_keys(t, probes, frame, cx)? {
                    return point_rows(lvl, &mut rf, t, keys, *reverse, frame, cx, f);
                }
            }
            if let (Some(i), [probe], None, None, None) =
                (index, probes.as_slice(), lower, upper, sub_probe)
            {
                // One equality on an index's leading columns (`WHERE b = ?`, a join on an
                // indexed column): both bounds of its range in one buffer, instead of
                // `level_ranges`' list of owned bounds (three allocations). The buffer is the
                // filter's point key, which an index level does not otherwise use (a buffer
                // of its own, kept through the execution cache across an inner level's outer
                // rows, made a join's other levels dearer than it saved).
                let mut b = std::mem::take(&mut rf.key);
                b.clear();
                let go = index_probe_range(probe, frame, cx, &mut b).and_then(|split| {
                    let Some(split) = split else {
                        return Ok(true);
                    };
                    let (lo, hi) = b.split_at(split);
                    let hi = if hi.is_empty() {
                        Bound::Unbounded
                    } else {
                        Bound::Excluded(hi)
                    };
                    let tree = t.indexes[*i].tree;
                    cx.store
                        .scan_each(tree, Bound::Included(lo), hi, *reverse, &mut |key, _| {
                            index_row(lvl, &mut rf, t, (*i, *covering, key), frame, cx, f)
                        })
                });
                rf.key = b;
                return go;
            }
            let (tree, ranges) = level_ranges(t, &lvl.access, frame, cx)?;
            // The shape `one_row_per_entry` lets skip: no probe names a key prefix.
            let mut skip = if index.is_none() && probes.iter().all(Vec::is_empty) {
                take_skip(lvl, cx)
            } else {
                0
            };
            for (lo, hi) in ranges {
                let (lo, hi) = (bound_ref(&lo), bound_ref(&hi));
                let go = cx.store.scan_each_past(
                    tree,
                    lo,
                    hi,
                    *reverse,
                    &mut skip,
                    &mut |key, value| match index {
                        None => primary_row(lvl, &mut rf, key, value, frame, cx, f),
                        Some(i) => index_row(lvl, &mut rf, t, (*i, *covering, key), frame, cx, f),
                    },
                )?;
                if !go {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

/// How many leading entries the level's scan skips unread (an OFFSET the query handed it,
/// see `skip_slot`); taken, so a later scan of the level skips none.
fn take_skip(lvl: &Level, cx: &Cx) -> u64 {
    match cx.cache.borrow_mut().remove(&skip_slot(lvl)) {
        Some(Cached::Value(Value::Integer(n))) => n.max(0) as u64,
        _ => 0,
    }
}

/// The whole primary keys an equality on every key column names, for a direct `get` of each
/// instead of a range scan; None when a probe covers only part of the key, or when a value's
/// stored key is not certain (a number beyond +-9e18, where an integer and an equal real have
/// different keys), which the range scan handles. Probes with a NULL name no row.
// Inlined: called for every point read, and from a write's key list too (where a second call
// site would otherwise stop it being inlined into the read path).
#[inline(always)]
pub(super) fn point_keys(
    t: &Table,
    probes: &[Vec<PExpr>],
    frame: &[Value],
    cx: &Cx,
) -> Result<Option<Vec<Vec<u8>>>> {
    let Some(width) = point_width(t) else {
        return Ok(None);
    };
    if probes.is_empty() || probes.iter().any(|p| p.len() != width) {
        return Ok(None);
    }
    let mut keys = Vec::with_capacity(probes.len());
    for p in probes {
        // 12 bytes: room for a number's key (14 at most, a row id 4 to 7), so an integer key
        // is one allocation.
        let mut k = Vec::with_capacity(12 * p.len());
        match point_key_into(p, frame, cx, &mut k)? {
            None => return Ok(None),
            Some(false) => {}
            Some(true) => keys.push(k),
        }
    }
    if keys.len() > 1 {
        cairn_store::sort::sort(&mut keys);
        keys.dedup();
    }
    Ok(Some(keys))
}

/// How many values a whole primary key of `t` takes; None for a table keyed by a hidden row
/// id, which no probe names.
pub(super) fn point_width(t: &Table) -> Option<usize> {
    match &t.key {
        Key::Rowid(Some(_)) => Some(1),
        Key::Rowid(None) => None,
        Key::Columns(c) => Some(c.len()),
    }
}

/// One probe's whole primary key (of the width `point_keys` checked), appended to `k`:
/// Some(true) when it names a row, Some(false) when a NULL in it names none, None when a
/// value's stored key is not certain (see `point_keys`).
#[inline(always)]
pub(super) fn point_key_into(
    probe: &[PExpr],
    frame: &[Value],
    cx: &Cx,
    k: &mut Vec<u8>,
) -> Result<Option<bool>> {
    for e in probe {
        let v = eval(e, frame, cx)?;
        let exact = match v.as_ref() {
            Value::Null => return Ok(Some(false)),
            Value::Integer(i) => (*i as f64).abs() < 9.0e18,
            Value::Real(r) => r.is_finite() && (r.fract() != 0.0 || r.abs() < 9.0e18),
            Value::Text(_) | Value::Blob(_) => true,
        };
        if !exact {
            return Ok(None);
        }
        push_norm(&v, k);
    }
    Ok(Some(true))
}

/// Sets `frame` to `n` NULLs. `Vec::resize` (and `vec![Value::Null; n]`) would clone the
/// NULL for each slot, a call through `Value::clone` apiece, on every execution of a statement.
pub(super) fn null_frame(frame: &mut Vec<Value>, n: usize) {
    frame.clear();
    frame.extend(std::iter::repeat_with(|| Value::Null).take(n));
}

/// `n` NULLs (see [`null_frame`]).
pub(super) fn nulls(n: usize) -> Vec<Value> {
    std::iter::repeat_with(|| Value::Null).take(n).collect()
}

#[allow(clippy::too_many_arguments)]
fn point_rows(
    lvl: &Level,
    rf: &mut RowFilter,
    t: &Table,
    mut keys: Vec<Vec<u8>>,
    reverse: bool,
    frame: &mut Vec<Value>,
    cx: &Cx,
    f: &mut Sink,
) -> Result<bool> {
    if reverse {
        keys.reverse();
    }
    for k in keys {
        if !point_row(lvl, rf, t, &k, frame, cx, f)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The row at key `k`, if there is one, through `primary_row`; false when the sink stops.
fn point_row(
    lvl: &Level,
    rf: &mut RowFilter,
    t: &Table,
    k: &[u8],
    frame: &mut Vec<Value>,
    cx: &Cx,
    f: &mut Sink,
) -> Result<bool> {
    let mut value = std::mem::take(&mut rf.value);
    let found = cx.store.get_into(t.tree, k, &mut value)?;
    let go = !found || primary_row(lvl, rf, k, &value, frame, cx, f)?;
    rf.value = value;
    Ok(go)
}

/// The key ranges an `Access::Index` level reads, and the tree (index or table) they are in.
pub(super) fn level_ranges(
    t: &Table,
    access: &Access,
    frame: &[Value],
    cx: &Cx,
) -> Result<(TreeId, Vec<Range>)> {
    let Access::Index {
        index,
        probes,
        lower,
        upper,
        sub_probe,
        ..
    } = access
    else {
        unreachable!("invariant: only an index access has key ranges");
    };
    let ranges = match sub_probe {
        Some((q, aff)) => subquery_ranges(q, *aff, cx)?,
        None => index_ranges(probes, lower, upper, frame, cx)?,
    };
    let tree = match index {
        Some(i) => t.indexes[*i].tree,
        None => t.tree,
    };
    Ok((tree, ranges))
}

pub(super) fn bound_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A level's filters as prepared for one scan of its table: the conditions on one column
/// against fixed values ([`ColTest`]), tested on the row in its page, and the rest, evaluated
/// on decoded columns. With the buffers a row is read through, reused from row to row.
pub(super) struct RowFilter<'l> {
    tests: Vec<ColTest>,
    rest: Vec<&'l PExpr>,
    layout: Layout,
    /// One past the last column anything reads: the header walk stops there.
    upto: usize,
    scratch: Value,
    /// A top-k level's bound ([`topk_bound`]), read again only after a row reaches the sink,
    /// which is the only place it changes.
    bound: Option<Value>,
    /// The record of a row looked up by key (through an index or a point get), reused.
    value: Vec<u8>,
    /// The key of a single point get, reused.
    key: Vec<u8>,
    /// This level's last point get (an inner level's, kept across outer rows).
    last: crate::exec::eval::LastGet,
    /// Some primary key column is read: a covering index entry's key part is decoded.
    key_wanted: bool,
    /// An inner join level (scanned once per outer row) hands `value` and `layout` on to its
    /// next scan through the execution cache, at this slot, instead of allocating them again.
    /// The first level is scanned once per execution: its buffers are just dropped.
    keep: Option<(&'l Cache, usize)>,
    /// A first level: `value`, `layout` and `key` came from the [`Pool`] and go back to it.
    pooled: bool,
}

impl Drop for RowFilter<'_> {
    fn drop(&mut self) {
        if let Some((cache, slot)) = self.keep {
            if let Ok(mut c) = cache.try_borrow_mut() {
                let value = std::mem::take(&mut self.value);
                let layout = std::mem::take(&mut self.layout);
                let key = std::mem::take(&mut self.key);
                let last = std::mem::take(&mut self.last);
                c.insert(slot, Cached::Scratch(value, layout, key, last));
            }
        } else if self.pooled
            && self.value.capacity() <= POOL_MAX_BYTES
            && self.key.capacity() <= POOL_MAX_BYTES
        {
            let value = std::mem::take(&mut self.value);
            let layout = std::mem::take(&mut self.layout);
            let key = std::mem::take(&mut self.key);
            let _ = POOL.try_with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    if p.levels.len() < POOL_LEN {
                        p.levels.push((value, layout, key));
                    }
                }
            });
        }
    }
}

impl<'l> RowFilter<'l> {
    pub(super) fn new(lvl: &'l Level, frame: &[Value], cx: &Cx<'l>) -> RowFilter<'l> {
        let mut tests = Vec::new();
        let mut rest = Vec::new();
        for f in &lvl.filters {
            if !ColTest::prepare(f, lvl.base, lvl.width, frame, cx, &mut tests) {
                rest.push(f);
            }
        }
        // `pre_cols` and `post_cols` are in ascending order: their last columns are their
        // largest.
        let upto = (tests.iter().map(ColTest::column))
            .chain(lvl.pre_cols.last().copied())
            .chain(lvl.post_cols.last().copied())
            .max()
            .map_or(0, |c| c + 1);
        let keep = (lvl.base > 0).then(|| (cx.cache, scratch_slot(lvl)));
        let pooled = keep.is_none();
        let (value, layout, key, last) = if pooled {
            match POOL.try_with(|p| p.try_borrow_mut().ok()?.levels.pop()) {
                Ok(Some((mut value, layout, mut key))) => {
                    value.clear();
                    key.clear();
                    (value, layout, key, crate::exec::eval::LastGet::default())
                }
                _ => Default::default(),
            }
        } else {
            match keep.and_then(|(c, slot)| c.borrow_mut().remove(&slot)) {
                Some(Cached::Scratch(value, layout, key, last)) => (value, layout, key, last),
                _ => Default::default(),
            }
        };
        RowFilter {
            tests,
            rest,
            layout,
            upto,
            scratch: Value::Null,
            bound: lvl.topk.as_ref().and_then(|_| topk_bound(lvl, cx)),
            value,
            key,
            last,
            // Only a covering index's entries are decoded for the key.
            key_wanted: match &lvl.source {
                Source::Table(t) if matches!(lvl.access, Access::Index { covering: true, .. }) => {
                    key_columns(t)
                        .iter()
                        .any(|c| lvl.pre_cols.contains(c) || lvl.post_cols.contains(c))
                }
                _ => false,
            },
            keep,
            pooled,
        }
    }
}

fn primary_row(
    lvl: &Level,
    rf: &mut RowFilter,
    key: &[u8],
    value: &[u8],
    frame: &mut Vec<Value>,
    cx: &Cx,
    f: &mut Sink,
) -> Result<bool> {
    let row = rf.layout.read(value, rf.upto)?;
    for t in &rf.tests {
        if !t.passes(&row, &mut rf.scratch)? {
            return Ok(true);
        }
    }
    let cols = &mut frame[lvl.base..];
    for &c in &lvl.pre_cols {
        row.get_into(c, &mut cols[c])?;
    }
    for e in &rf.rest {
        if eval_bool(e, frame, cx)? != Some(true) {
            return Ok(true);
        }
    }
    // Sorting strictly after the k-th best row so far on the first sort key, the row cannot
    // be in the result.
    if let (Some(k), Some(b)) = (&lvl.topk, &rf.bound) {
        if compare_key(&frame[lvl.base + k.col], b, k) == Ordering::Greater {
            return Ok(true);
        }
    }
    let cols = &mut frame[lvl.base..];
    for &c in &lvl.post_cols {
        row.get_into(c, &mut cols[c])?;
    }
    // The key slot is past the table's columns, so no filter reads it: only a row that
    // passed them has its key copied out.
    if lvl.key_slot {
        // Into the previous row's key buffer: the writers copy the key out of the slot.
        match &mut frame[lvl.base + lvl.width] {
            Value::Blob(b) => {
                b.clear();
                b.extend_from_slice(key);
            }
            slot => *slot = Value::Blob(key.to_vec()),
        }
    }
    let go = f(frame)?;
    if lvl.topk.is_some() {
        rf.bound = topk_bound(lvl, cx);
    }
    Ok(go)
}

/// Whether a stored row passes a level's filters as `rf` prepared them, for the writes'
/// walks: through [`primary_row`], the scan's own test, with a sink that notes the pass (a
/// second caller of the record layout's read would stop it being inlined into the scan).
pub(super) fn row_passes(
    lvl: &Level,
    rf: &mut RowFilter,
    (key, value): (&[u8], &[u8]),
    frame: &mut Vec<Value>,
    cx: &Cx,
) -> Result<bool> {
    let mut passed = false;
    primary_row(lvl, rf, key, value, frame, cx, &mut |_| {
        passed = true;
        Ok(true)
    })?;
    Ok(passed)
}

/// The table columns its primary key holds.
pub(super) fn key_columns(t: &Table) -> &[usize] {
    match &t.key {
        Key::Rowid(Some(c)) => std::slice::from_ref(c),
        Key::Rowid(None) => &[],
        Key::Columns(c) => c,
    }
}

/// A row found through an index entry `(index, covering, key)`. Inlined into its two
/// callers in `for_each_row`, once per index entry.
#[inline(always)]
pub(super) fn index_row(
    lvl: &Level,
    rf: &mut RowFilter,
    t: &Table,
    (ix, covering, key): (usize, bool, &[u8]),
    frame: &mut Vec<Value>,
    cx: &Cx,
    f: &mut Sink,
) -> Result<bool> {
    let cols = &t.indexes[ix].columns;
    let mut rest = key;
    // Keys hold integral reals as integers: a REAL column gets its type back here (the planner
    // never covers ANY or NUMERIC columns, whose type the key cannot tell).
    let typed = |v: Value, c: usize| match (v, t.columns[c].ty) {
        (Value::Integer(i), ColType::Real) => Value::Real(i as f64),
        (v, _) => v,
    };
    if !t.indexes[ix].exprs.is_empty() {
        // An index on expressions is never covering: its values are not columns.
        for _ in &t.indexes[ix].exprs {
            rest = skip_key_value(rest)?;
        }
    } else if covering || !matches!(t.key, Key::Rowid(_)) {
        for &c in cols {
            let (v, r) = decode_key_value(rest, false)?;
            frame[lvl.base + c] = typed(v, c);
            rest = r;
        }
    } else {
        // The entry ends with the row id: the index columns before it are skipped, not
        // decoded, as the row is read for them.
        for _ in cols {
            rest = skip_key_value(rest)?;
        }
    }
    if covering {
        if rf.key_wanted {
            for &c in key_columns(t) {
                let (v, r) = decode_key_value(rest, false)?;
                frame[lvl.base + c] = typed(v, c);
                rest = r;
            }
        }
        if !all_true(&lvl.filters, frame, cx)? {
            return Ok(true);
        }
        return f(frame);
    }
    let pk = rest;
    let mut value = std::mem::take(&mut rf.value);
    if !cx.store.get_into(t.tree, pk, &mut value)? {
        return Err(Error::Storage(cairn_store::Error::Corrupt(format!(
            "index {} points at a missing row",
            t.indexes[ix].name
        ))));
    }
    let go = primary_row(lvl, rf, pk, &value, frame, cx, f);
    rf.value = value;
    go
}

fn materialize(q: &Rc<QueryPlan>, cx: &Cx) -> Result<Rc<Vec<Vec<Value>>>> {
    // +1: the same plan may also be cached as an IN set under its own address (plans are
    // aligned, so the odd key is free).
    let k = Rc::as_ptr(q) as usize + 1;
    if !q.correlated {
        if let Some(Cached::Rows(r)) = cx.cache.borrow().get(&k) {
            return Ok(r.clone());
        }
    }
    let rows = Rc::new(collect_rows(q, cx)?);
    if !q.correlated {
        cx.cache.borrow_mut().insert(k, Cached::Rows(rows.clone()));
    }
    Ok(rows)
}

fn hash_table(lvl: &Level, build: &PExpr, frame: &mut Vec<Value>, cx: &Cx) -> Result<Rc<HashRows>> {
    let k = lvl as *const Level as usize;
    if let Some(Cached::Hash(h)) = cx.cache.borrow().get(&k) {
        return Ok(h.clone());
    }
    let saved: Vec<Value> = frame[lvl.base..lvl.base + lvl.width].to_vec();
    let mut map: HashRows = FastMap::default();
    let mut add = |frame: &mut Vec<Value>| -> Result<bool> {
        let v = eval(build, frame, cx)?;
        if !v.is_null() {
            let mut key = Vec::new();
            push_norm(&v, &mut key);
            map.entry(key)
                .or_default()
                .push(frame[lvl.base..lvl.base + lvl.width].to_vec());
        }
        Ok(true)
    };
    match &lvl.source {
        Source::Json { .. } | Source::Fts { .. } => {
            return Err(Error::Invalid(
                "invariant: json_each and fts5 are never hashed".into(),
            ))
        }
        Source::Query(q) => {
            for r in materialize(q, cx)?.iter() {
                frame[lvl.base..lvl.base + lvl.width].clone_from_slice(&r[..lvl.width]);
                add(frame)?;
            }
        }
        Source::Table(t) => {
            let mut cur = cx
                .store
                .scan(t.tree, Bound::Unbounded, Bound::Unbounded, false)?;
            while cur.next()? {
                let rec = Record::new(cur.value())?;
                decode_cols(&rec, &lvl.pre_cols, lvl.base, frame)?;
                decode_cols(&rec, &lvl.post_cols, lvl.base, frame)?;
                add(frame)?;
            }
        }
    }
    frame[lvl.base..lvl.base + lvl.width].clone_from_slice(&saved);
    let map = Rc::new(map);
    cx.cache.borrow_mut().insert(k, Cached::Hash(map.clone()));
    Ok(map)
}

// A value's key is a prefix (and a bound) for every key that holds the same value: keys hold
// values normalized (an integral real is keyed as the equal integer, see `eval::push_norm`), and
// a number's key ends where no other number's continues (`docs/file-format.md`, "Keys"), so
// `push_norm` encodes equality prefixes and range bounds alike.

pub(super) type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

// Inlined for the same reason as `point_keys`: every range read evaluates it.
#[inline(always)]
pub(super) fn index_ranges(
    probes: &[Vec<PExpr>],
    lower: &Option<(PExpr, bool)>,
    upper: &Option<(PExpr, bool)>,
    frame: &[Value],
    cx: &Cx,
) -> Result<Vec<Range>> {
    let ranged = lower.is_some() || upper.is_some();
    let lo_v = match lower {
        Some((e, incl)) => match eval(e, frame, cx)?.into_owned() {
            Value::Null => return Ok(vec![]),
            v => Some((v, *incl)),
        },
        None => None,
    };
    let hi_v = match upper {
        Some((e, incl)) => match eval(e, frame, cx)?.into_owned() {
            Value::Null => return Ok(vec![]),
            v => Some((v, *incl)),
        },
        None => None,
    };
    let mut out: Vec<Range> = Vec::new();
    'probe: for p in probes {
        // As in `point_keys`: room for a number's key (and 1 more for a bound).
        let mut prefix = Vec::with_capacity(12 * p.len() + 13);
        for e in p {
            let v = eval(e, frame, cx)?;
            if v.is_null() {
                continue 'probe;
            }
            push_norm(&v, &mut prefix);
        }
        // `hi` first: `lo` may then take the prefix itself.
        let hi = match &hi_v {
            Some((v, incl)) => {
                let mut b = prefix.clone();
                push_norm(v, &mut b);
                if *incl {
                    match prefix_successor(&b) {
                        Some(s) => Bound::Excluded(s),
                        None => Bound::Unbounded,
                    }
                } else {
                    Bound::Excluded(b)
                }
            }
            None => match prefix_successor(&prefix) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            },
        };
        let lo = match &lo_v {
            Some((v, incl)) => {
                let mut b = prefix;
                push_norm(v, &mut b);
                if *incl {
                    Bound::Included(b)
                } else {
                    match prefix_successor(&b) {
                        Some(s) => Bound::Included(s),
                        None => continue 'probe,
                    }
                }
            }
            None if ranged => {
                // Past the NULLs, which no range comparison matches.
                let mut b = prefix;
                encode_key_value(&mut b, &Value::Null, false);
                match prefix_successor(&b) {
                    Some(s) => Bound::Included(s),
                    None => continue 'probe,
                }
            }
            None if prefix.is_empty() => Bound::Unbounded,
            None => Bound::Included(prefix),
        };
        out.push((lo, hi));
    }
    if out.len() > 1 {
        // In order of lower bound, ties in the order made: the store's small sort over the
        // ranges' positions, with the position as the last key, sorts as std's stable `sort_by`
        // does without another copy of it in the module (about 1 KB gzip). The lists are an IN
        // list's or an OR's ranges, sorted once a scan.
        let mut order: Vec<usize> = (0..out.len()).collect();
        cairn_store::sort::sort_by(&mut order, |&a, &b| {
            cmp_lower(&out[a].0, &out[b].0).then(a.cmp(&b)) == Ordering::Less
        });
        let mut taken: Vec<Range> = Vec::with_capacity(out.len());
        for i in order {
            taken.push(std::mem::replace(
                &mut out[i],
                (Bound::Unbounded, Bound::Unbounded),
            ));
        }
        out = taken;
        out.dedup();
    }
    Ok(out)
}

/// The range of one equality probe (no range bounds) over an index, as `index_ranges` makes
/// it, into `buf`: the prefix the probe's values encode, then its successor (the exclusive
/// upper bound; absent when the prefix is all 0xFF bytes, and the range then unbounded
/// above). Some(where the prefix ends), or None when a value is NULL (no row matches).
fn index_probe_range(
    probe: &[PExpr],
    frame: &[Value],
    cx: &Cx,
    buf: &mut Vec<u8>,
) -> Result<Option<usize>> {
    buf.clear();
    // As in `index_ranges`: room for a number's key, and the successor as long.
    buf.reserve(2 * 12 * probe.len());
    for e in probe {
        let v = eval(e, frame, cx)?;
        if v.is_null() {
            return Ok(None);
        }
        push_norm(&v, buf);
    }
    let split = buf.len();
    let mut end = split;
    while end > 0 && buf[end - 1] == 0xFF {
        end -= 1;
    }
    if end > 0 {
        buf.extend_from_within(..end);
        *buf.last_mut().expect("invariant: just extended") += 1;
    }
    Ok(Some(split))
}

/// Key ranges for `col IN (SELECT ...)`: one per distinct non-NULL value of the subquery.
fn subquery_ranges(q: &Rc<QueryPlan>, aff: crate::types::Affinity, cx: &Cx) -> Result<Vec<Range>> {
    let rows = materialize(q, cx)?;
    let mut prefixes: Vec<Vec<u8>> = Vec::with_capacity(rows.len());
    for r in rows.iter() {
        let v = crate::types::apply_affinity(r.first().cloned().unwrap_or(Value::Null), aff);
        if v.is_null() {
            continue;
        }
        let mut p = Vec::new();
        push_norm(&v, &mut p);
        prefixes.push(p);
    }
    cairn_store::sort::sort(&mut prefixes);
    prefixes.dedup();
    Ok(prefixes
        .into_iter()
        .map(|p| {
            let hi = match prefix_successor(&p) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            };
            (Bound::Included(p), hi)
        })
        .collect())
}

fn cmp_lower(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y)
        }
    }
}

/// Buffers handed from one execution of a query to the next: a query's frame, and its first
/// level's record buffer, header layout and point key ([`RowFilter`]). A point read or an index
/// probe (`WHERE id = ?`, `WHERE b = ?`) otherwise allocated and freed all four every time.
/// (An inner join level keeps its own through the execution cache.) They carry nothing from
/// one use to the next: a frame is refilled with NULLs, a record buffer and a key are emptied
/// before they are filled, a layout is rewritten for every row. Per thread rather than passed
/// in, as nothing about them belongs to a database; a few of each (a subquery's levels and
/// frames are in use while its query's are), none grown past `POOL_MAX_BYTES`.
pub(super) struct Pool {
    frames: Vec<Vec<Value>>,
    levels: Vec<(Vec<u8>, Layout, Vec<u8>)>,
}

pub(super) const POOL_LEN: usize = 4;
pub(super) const POOL_MAX_BYTES: usize = 16 * 1024;

thread_local! {
    pub(super) static POOL: std::cell::RefCell<Pool> = const {
        std::cell::RefCell::new(Pool {
            frames: Vec::new(),
            levels: Vec::new(),
        })
    };
}

/// A frame of `n` NULLs, in a pooled buffer when there is one.
pub(super) fn pooled_frame(n: usize) -> Vec<Value> {
    let mut frame = POOL
        .try_with(|p| p.borrow_mut().frames.pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    null_frame(&mut frame, n);
    frame
}

/// Gives a frame back to the pool (its values dropped now).
pub(super) fn pool_frame(mut frame: Vec<Value>) {
    frame.clear();
    if frame.capacity() * std::mem::size_of::<Value>() > POOL_MAX_BYTES {
        return;
    }
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.frames.len() < POOL_LEN {
            p.frames.push(frame);
        }
    });
}
