//! Running a query's body: compound selects, VALUES, and each core's levels, grouping and sink.

use crate::error::Result;
use crate::exec::aggregate::{
    emit_group, finish_groups, index_aggregate, update_states, AggState, Groups,
};
use crate::exec::eval::{eval, norm_key, push_hash, Cached, Cx, KeySet};
use crate::exec::scan::{pool_frame, pooled_frame, run_levels};
use crate::exec::sort::sort_rows;
use crate::exec::{all_true, eval_row};
use crate::plan::*;
use crate::types::{self};
use cairn_value::Value;

/// Runs a query, handing each output row to `sink` until it returns false.
pub fn run_query(
    q: &QueryPlan,
    cx: &Cx,
    sink: &mut dyn FnMut(&[Value]) -> Result<bool>,
) -> Result<()> {
    run_query_owned(q, cx, &mut |row| sink(&row))
}

/// Runs a query and returns all its rows: each row is the one the query built, moved out, not
/// copied again.
pub fn collect_rows(q: &QueryPlan, cx: &Cx) -> Result<Vec<Vec<Value>>> {
    let mut rows = Vec::new();
    run_query_owned(q, cx, &mut |row| {
        rows.push(row);
        Ok(true)
    })?;
    Ok(rows)
}

/// [`run_query`], handing the sink each row by value.
fn run_query_owned(
    q: &QueryPlan,
    cx: &Cx,
    sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
) -> Result<()> {
    let limit = match &q.limit {
        Some(e) => match types::to_integer(&*eval(e, &[], cx)?) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => None,
        },
        None => None,
    };
    let mut offset = match &q.offset {
        Some(e) => types::to_integer(&*eval(e, &[], cx)?).unwrap_or(0).max(0) as u64,
        None => 0,
    };
    if limit == Some(0) {
        return Ok(());
    }
    let keep = limit
        .map(|l| l.saturating_add(offset))
        .filter(|&k| k <= 100_000)
        .map(|k| k as usize);
    let sorted_by_scan = matches!(&q.body, Body::Core(c) if c.ordered);
    // Rows straight from a table scan, one per entry: the scan skips the offset's entries
    // before decoding them (see `skip_slot`).
    let skip = match &q.body {
        Body::Core(c) if offset > 0 && (q.order.is_empty() || sorted_by_scan) => c
            .levels
            .first()
            .filter(|_| one_row_per_entry(c))
            .map(skip_slot),
        _ => None,
    };
    if let Some(s) = skip {
        let n = Value::Integer(i64::try_from(offset).unwrap_or(i64::MAX));
        cx.cache.borrow_mut().insert(s, Cached::Value(n));
        offset = 0;
    }
    let mut emitted = 0u64;
    let width = q.width;
    let mut emit = |mut row: Vec<Value>| -> Result<bool> {
        if offset > 0 {
            offset -= 1;
            return Ok(true);
        }
        emitted += 1;
        row.truncate(width);
        let go = sink(row)?;
        Ok(go && limit.is_none_or(|l| emitted < l))
    };
    if q.order.is_empty() || sorted_by_scan {
        let r = run_body(&q.body, cx, &mut emit);
        if let Some(s) = skip {
            // Not left for another run when the scan never started (a constant filter).
            cx.cache.borrow_mut().remove(&s);
        }
        r?;
        return Ok(());
    }
    // With a LIMIT only the first offset+limit rows matter: keep at most twice that many,
    // cutting back to the best ones whenever the buffer fills (top-k, O(n log k)).
    // A top-k level (see `Level::topk`) drops rows past the k-th best seen so far, published
    // here each time the buffer is cut back. The bound is per run: a correlated subquery
    // starts afresh for each outer row.
    let bound = match &q.body {
        Body::Core(c) => c
            .levels
            .first()
            .filter(|l| l.topk.is_some() && keep.is_some())
            .map(topk_slot),
        _ => None,
    };
    if let Some(b) = bound {
        cx.cache.borrow_mut().remove(&b);
    }
    let mut rows = Vec::new();
    run_body(&q.body, cx, &mut |row| {
        rows.push(row);
        if let Some(k) = keep {
            if rows.len() >= 2 * k.max(16) {
                // Cut back with the final sort itself, not a selection: one copy of std's sort
                // in the module instead of two (about 1 KB gzip of wasm), and ties keep the
                // order a full sort gives them. The k rows kept from the last cut are one
                // sorted run, which the sort merges rather than sorts again.
                sort_rows(&mut rows, &q.order);
                rows.truncate(k);
                if let (Some(slot), Some(first), Some(worst)) =
                    (bound, q.order.first(), rows.last())
                {
                    let v = worst[first.col].clone();
                    cx.cache.borrow_mut().insert(slot, Cached::Value(v));
                }
            }
        }
        Ok(true)
    })?;
    if let Some(b) = bound {
        cx.cache.borrow_mut().remove(&b);
    }
    sort_rows(&mut rows, &q.order);
    for r in rows {
        if !emit(r)? {
            break;
        }
    }
    Ok(())
}

/// Where a top-k level's bound lives in the execution cache: the level's address, plus 2 so it
/// meets neither a hash join's table (the address) nor a materialized plan (an aligned plan
/// address plus 1).
fn topk_slot(l: &Level) -> usize {
    l as *const Level as usize + 2
}

/// Where a scan level finds how many leading entries to skip unread (an OFFSET): the address
/// plus 4.
pub(super) fn skip_slot(l: &Level) -> usize {
    l as *const Level as usize + 4
}

/// Whether each entry of the core's only level, a scan of a table's primary tree (whole or a
/// key range), gives exactly one output row:
/// nothing filters, groups, dedups or joins them. (A top-k bound is only published when rows
/// are sorted after the scan, which a skip never sees.)
fn one_row_per_entry(c: &Core) -> bool {
    let [l] = &c.levels[..] else {
        return false;
    };
    let primary_range = match (&l.source, &l.access) {
        (Source::Table(_), Access::Scan { .. }) => true,
        (
            Source::Table(_),
            Access::Index {
                index: None,
                probes,
                sub_probe: None,
                ..
            },
        ) => probes.iter().all(Vec::is_empty),
        _ => false,
    };
    c.agg.is_none()
        && !c.distinct
        && c.window.is_none()
        && primary_range
        && l.filters.is_empty()
        && l.after.is_empty()
        && !l.left
        && !l.key_slot
}

/// Where an inner level's row buffers wait for its next scan ([`RowFilter`]): the address plus 3.
pub(super) fn scratch_slot(l: &Level) -> usize {
    l as *const Level as usize + 3
}

/// A top-k level's current bound: the k-th best row's first sort key, once there is one.
pub(super) fn topk_bound(lvl: &Level, cx: &Cx) -> Option<Value> {
    match cx.cache.borrow().get(&topk_slot(lvl)) {
        Some(Cached::Value(b)) => Some(b.clone()),
        _ => None,
    }
}

/// Runs a body, handing each row (with any trailing sort columns) to `sink`.
fn run_body(b: &Body, cx: &Cx, sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>) -> Result<bool> {
    match b {
        Body::Core(c) => run_core(c, cx, sink),
        Body::Values(rows) => {
            for r in rows {
                let row = eval_row(r, &[], cx)?;
                if !sink(row)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Body::Union {
            all: true,
            left,
            right,
        } => {
            if !run_body(left, cx, sink)? {
                return Ok(false);
            }
            run_body(right, cx, sink)
        }
        Body::Union { all: false, .. } => {
            let mut seen = KeySet::default();
            let mut parts = Vec::new();
            flatten_union(b, &mut parts);
            for p in parts {
                let go = run_body(p, cx, &mut |row| {
                    let mut k = Vec::new();
                    norm_key(&row, &mut k);
                    if seen.insert(k) {
                        sink(row)
                    } else {
                        Ok(true)
                    }
                })?;
                if !go {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

/// A chain of UNIONs (distinct) as its terms; UNION ALL nested under UNION dedups as a whole.
fn flatten_union<'b>(b: &'b Body, out: &mut Vec<&'b Body>) {
    match b {
        Body::Union {
            all: false,
            left,
            right,
        } => {
            flatten_union(left, out);
            flatten_union(right, out);
        }
        Body::Union {
            all: true,
            left,
            right,
        } => {
            flatten_union(left, out);
            flatten_union(right, out);
        }
        b => out.push(b),
    }
}

fn run_core(c: &Core, cx: &Cx, sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>) -> Result<bool> {
    if let Some(w) = &c.window {
        // Window calls see every row of the core before the first is projected.
        let mut rows = Vec::new();
        let mut frame = pooled_frame(c.frame_len);
        let r = run_core_in(
            c,
            cx,
            &mut |row| {
                rows.push(row);
                Ok(true)
            },
            &mut frame,
        );
        pool_frame(frame);
        r?;
        return crate::exec::window::run(w, rows, cx, sink);
    }
    let mut frame = pooled_frame(c.frame_len);
    let go = run_core_in(c, cx, sink, &mut frame);
    pool_frame(frame);
    go
}

fn run_core_in(
    c: &Core,
    cx: &Cx,
    sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
    frame: &mut Vec<Value>,
) -> Result<bool> {
    if !all_true(&c.const_filters, frame, cx)? {
        if let Some(agg) = &c.agg {
            if agg.group_by.is_empty() {
                return finish_groups(c, agg, Groups::default(), cx, sink);
            }
        }
        return Ok(true);
    }
    match &c.agg {
        None => {
            let mut seen = KeySet::default();
            let mut key = Vec::new();
            let mut spare = Vec::new();
            // DISTINCT of plain columns: keyed from the frame, so a repeat builds no row.
            let plain = c.distinct && c.project.iter().all(|e| matches!(e, PExpr::Col(_)));
            run_levels(c, 0, frame, cx, &mut |frame| {
                if plain {
                    key.clear();
                    for e in &c.project {
                        if let PExpr::Col(s) = e {
                            push_hash(frame.get(*s).unwrap_or(&Value::Null), &mut key);
                        }
                    }
                    if !seen.insert_new(&key) {
                        return Ok(true);
                    }
                }
                // `eval_row`, with the columns `moves` names moved out of the frame. A row that
                // DISTINCT drops leaves its buffer for the next one: a repeat allocates nothing.
                let mut row = std::mem::take(&mut spare);
                row.clear();
                row.reserve(c.project.len());
                for (i, e) in c.project.iter().enumerate() {
                    row.push(match e {
                        PExpr::Col(s) if c.moves >> i & 1 == 1 => frame
                            .get_mut(*s)
                            .map_or(Value::Null, |v| std::mem::replace(v, Value::Null)),
                        PExpr::Col(s) => frame.get(*s).cloned().unwrap_or(Value::Null),
                        e => eval(e, frame, cx)?.into_owned(),
                    });
                }
                if c.distinct && !plain {
                    key.clear();
                    norm_key(&row, &mut key);
                    if !seen.insert_new(&key) {
                        spare = row;
                        return Ok(true);
                    }
                }
                sink(row)
            })
        }
        Some(agg) if agg.streamed => {
            // Rows arrive ordered by the group columns: finish each group as the next begins.
            let mut cur: Option<(Vec<u8>, Vec<Value>, Vec<AggState>)> = None;
            let mut seen = KeySet::default();
            let mut key = Vec::new();
            let go = run_levels(c, 0, frame, cx, &mut |frame| {
                key.clear();
                for g in &agg.group_by {
                    push_hash(&*eval(g, frame, cx)?, &mut key);
                }
                if cur.as_ref().is_none_or(|(k, _, _)| *k != key) {
                    if let Some((_, gvals, states)) = cur.take() {
                        if !emit_group(c, agg, gvals, states, cx, &mut seen, sink)? {
                            return Ok(false);
                        }
                    }
                    // A loop, not `collect::<Result<Vec<_>>>()`: each such collect is its own
                    // copy of the iterator code in the module (docs/size.md).
                    let mut gvals = Vec::new();
                    for g in &agg.group_by {
                        gvals.push(eval(g, frame, cx)?.into_owned());
                    }
                    cur = Some((
                        key.clone(),
                        gvals,
                        agg.aggs.iter().map(AggState::new).collect(),
                    ));
                }
                let states = &mut cur.as_mut().expect("a current group").2;
                update_states(agg, states, frame, cx)?;
                Ok(true)
            })?;
            if !go {
                return Ok(false);
            }
            match cur {
                Some((_, gvals, states)) => emit_group(c, agg, gvals, states, cx, &mut seen, sink),
                None => Ok(true),
            }
        }
        Some(agg) if agg.group_by.is_empty() => {
            // One group: no key to build and hash for each row.
            let states = match index_aggregate(c, agg, frame, cx)? {
                Some(states) => states,
                None => {
                    let mut states: Vec<AggState> = agg.aggs.iter().map(AggState::new).collect();
                    run_levels(c, 0, frame, cx, &mut |frame| {
                        update_states(agg, &mut states, frame, cx)?;
                        Ok(true)
                    })?;
                    states
                }
            };
            let mut groups = Groups::default();
            groups.groups.push((Vec::new(), states));
            finish_groups(c, agg, groups, cx, sink)
        }
        Some(agg) => {
            let mut groups = Groups::default();
            let mut key = Vec::new();
            let mut gvals = Vec::new();
            run_levels(c, 0, frame, cx, &mut |frame| {
                key.clear();
                gvals.clear();
                // A column's value is copied only for a new group; a computed one is kept
                // from this evaluation (evaluating it again could give another value).
                for g in &agg.group_by {
                    let v = eval(g, frame, cx)?;
                    push_hash(&v, &mut key);
                    if !matches!(g, PExpr::Col(_)) {
                        gvals.push(v.into_owned());
                    }
                }
                let gi = match groups.index.get(&key) {
                    Some(&i) => i,
                    None => {
                        groups.index.insert(key.clone(), groups.groups.len());
                        let mut computed = gvals.drain(..);
                        let mut vals = Vec::with_capacity(agg.group_by.len());
                        for g in &agg.group_by {
                            vals.push(match g {
                                PExpr::Col(s) => frame.get(*s).cloned().unwrap_or(Value::Null),
                                _ => computed.next().unwrap_or(Value::Null),
                            });
                        }
                        drop(computed);
                        groups
                            .groups
                            .push((vals, agg.aggs.iter().map(AggState::new).collect()));
                        groups.groups.len() - 1
                    }
                };
                update_states(agg, &mut groups.groups[gi].1, frame, cx)?;
                Ok(true)
            })?;
            finish_groups(c, agg, groups, cx, sink)
        }
    }
}
