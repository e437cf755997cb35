//! The executor: runs plans. Queries are pushed, not pulled: each join level calls the next for
//! every row it finds, writing its columns into one shared frame (no per-row allocation for the
//! join itself), and the last level hands the frame to a sink (projection, aggregation). A sink
//! returns `false` to stop early (LIMIT, EXISTS).
//!
//! Writes (INSERT, UPDATE, DELETE) first collect what they will change, then change it, so a
//! statement never sees its own writes (no Halloween problem).

use crate::ast::{BinOp, Conflict};
use crate::error::{Error, Result};
use crate::eval::{
    eval, eval_bool, norm_key, push_norm, Cache, Cached, ColTest, Cx, HashRows, KeySet,
};
use crate::plan::*;
use crate::planner::prefix_successor;
use crate::schema::{Key, Table};
use crate::storage::{Each, Storage, TreeId};
use crate::types::{self, ColType};
use cairn_store::hash::FastMap;
use cairn_value::codec::{
    decode_key_value, encode_key, encode_key_value, encode_record_into, get_varint, key_integer,
    skip_key_value, Layout, Record,
};
use cairn_value::wire::put_value;
use cairn_value::Value;
use std::cmp::Ordering;
use std::ops::Bound;
use std::rc::Rc;

type Sink<'s> = dyn FnMut(&mut Vec<Value>) -> Result<bool> + 's;

/// `v` as the row id of table `t` (its column `c`): an INTEGER column's coercion, except that a
/// REAL equal to -2^63 becomes that integer. SQLite makes a row id of every integral real in
/// i64's range, where an ordinary INTEGER column stops short of both ends.
fn rowid_value(v: Value, t: &Table, c: usize) -> Result<Value> {
    match v {
        Value::Real(r) if r == i64::MIN as f64 => Ok(Value::Integer(i64::MIN)),
        v => ColType::Integer.coerce_with(v, || format!("{}.{}", t.name, t.columns[c].name)),
    }
}

fn all_true(filters: &[PExpr], frame: &[Value], cx: &Cx) -> Result<bool> {
    for f in filters {
        if eval_bool(f, frame, cx)? != Some(true) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Evaluates `exprs` over `frame` into a row of exactly their number of values (collecting
/// through `Result` would grow the vector as it goes).
fn eval_row(exprs: &[PExpr], frame: &[Value], cx: &Cx) -> Result<Vec<Value>> {
    let mut row = Vec::with_capacity(exprs.len());
    for e in exprs {
        // A column (most of what a query returns) is copied from the frame directly: through
        // `eval` it costs a call, a dispatch and a `Cow` for the same clone.
        row.push(match e {
            PExpr::Col(i) => frame.get(*i).cloned().unwrap_or(Value::Null),
            e => eval(e, frame, cx)?.into_owned(),
        });
    }
    Ok(row)
}

/// `eval` as an owned value, with a column or a parameter (what an INSERT's VALUES and an
/// upsert's DO UPDATE mostly name) cloned directly: through `eval` each costs a call, a
/// dispatch and a `Cow` for the same clone. (In an UPDATE's per-row rewrite, which `b + 1`
/// passes through, the extra test cost more than it saved.)
#[inline]
fn eval_owned(e: &PExpr, frame: &[Value], cx: &Cx) -> Result<Value> {
    match e {
        PExpr::Col(i) => Ok(frame.get(*i).cloned().unwrap_or(Value::Null)),
        PExpr::Param(i) if *i < cx.params.len() => Ok(cx.params[*i].clone()),
        e => Ok(eval(e, frame, cx)?.into_owned()),
    }
}

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
    let sorted_by_scan = matches!(&q.body, Body::Core(c) if c.ordered);
    if q.order.is_empty() || sorted_by_scan {
        run_body(&q.body, cx, &mut emit)?;
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
                rows.select_nth_unstable_by(k, |a, b| compare_rows(a, b, &q.order));
                rows.truncate(k);
                if let (Some(slot), Some(first)) = (bound, q.order.first()) {
                    if let Some(worst) = rows.iter().max_by(|a, b| compare_rows(a, b, &q.order)) {
                        let v = worst[first.col].clone();
                        cx.cache.borrow_mut().insert(slot, Cached::Value(v));
                    }
                }
            }
        }
        Ok(true)
    })?;
    if let Some(b) = bound {
        cx.cache.borrow_mut().remove(&b);
    }
    rows.sort_by(|a, b| compare_rows(a, b, &q.order));
    for r in rows {
        if !emit(r)? {
            break;
        }
    }
    Ok(())
}

pub fn compare_rows(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    for k in keys {
        let o = compare_key(&a[k.col], &b[k.col], k);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// One sort key's order between two values.
fn compare_key(x: &Value, y: &Value, k: &SortKey) -> Ordering {
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

/// Where a top-k level's bound lives in the execution cache: the level's address, plus 2 so it
/// meets neither a hash join's table (the address) nor a materialized plan (an aligned plan
/// address plus 1).
fn topk_slot(l: &Level) -> usize {
    l as *const Level as usize + 2
}

/// Where an inner level's row buffers wait for its next scan ([`RowFilter`]): the address plus 3.
fn scratch_slot(l: &Level) -> usize {
    l as *const Level as usize + 3
}

/// Buffers handed from one execution of a query to the next: a query's frame, and its first
/// level's record buffer, header layout and point key ([`RowFilter`]). A point read or an index
/// probe (`WHERE id = ?`, `WHERE b = ?`) otherwise allocated and freed all four every time.
/// (An inner join level keeps its own through the execution cache.) They carry nothing from
/// one use to the next: a frame is refilled with NULLs, a record buffer and a key are emptied
/// before they are filled, a layout is rewritten for every row. Per thread rather than passed
/// in, as nothing about them belongs to a database; a few of each (a subquery's levels and
/// frames are in use while its query's are), none grown past `POOL_MAX_BYTES`.
struct Pool {
    frames: Vec<Vec<Value>>,
    levels: Vec<(Vec<u8>, Layout, Vec<u8>)>,
}

const POOL_LEN: usize = 4;
const POOL_MAX_BYTES: usize = 16 * 1024;

thread_local! {
    static POOL: std::cell::RefCell<Pool> = const {
        std::cell::RefCell::new(Pool {
            frames: Vec::new(),
            levels: Vec::new(),
        })
    };
}

/// A frame of `n` NULLs, in a pooled buffer when there is one.
fn pooled_frame(n: usize) -> Vec<Value> {
    let mut frame = POOL
        .try_with(|p| p.borrow_mut().frames.pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    null_frame(&mut frame, n);
    frame
}

/// Gives a frame back to the pool (its values dropped now).
fn pool_frame(mut frame: Vec<Value>) {
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

/// A top-k level's current bound: the k-th best row's first sort key, once there is one.
fn topk_bound(lvl: &Level, cx: &Cx) -> Option<Value> {
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
            run_levels(c, 0, frame, cx, &mut |frame| {
                // `eval_row`, with the columns `moves` names moved out of the frame.
                let mut row = Vec::with_capacity(c.project.len());
                for (i, e) in c.project.iter().enumerate() {
                    row.push(match e {
                        PExpr::Col(s) if c.moves >> i & 1 == 1 => frame
                            .get_mut(*s)
                            .map_or(Value::Null, |v| std::mem::replace(v, Value::Null)),
                        PExpr::Col(s) => frame.get(*s).cloned().unwrap_or(Value::Null),
                        e => eval(e, frame, cx)?.into_owned(),
                    });
                }
                if c.distinct {
                    key.clear();
                    norm_key(&row, &mut key);
                    if !seen.insert(key.clone()) {
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
                    push_norm(&*eval(g, frame, cx)?, &mut key);
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
                for g in &agg.group_by {
                    let v = eval(g, frame, cx)?;
                    push_norm(&v, &mut key);
                    gvals.push(v.into_owned());
                }
                let gi = match groups.index.get(&key) {
                    Some(&i) => i,
                    None => {
                        groups.index.insert(key.clone(), groups.groups.len());
                        groups
                            .groups
                            .push((gvals.clone(), agg.aggs.iter().map(AggState::new).collect()));
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

/// count(*), and count, sum, total or avg of an index's first column, over key ranges of
/// that index alone (one level, covering, filtered by nothing but its ranges, one group): each
/// entry's number is read from the key bytes where it lies (`key_integer`), with no frame
/// written and no sink called per entry. None when the query is not of that shape.
fn index_aggregate(
    c: &Core,
    agg: &AggPlan,
    frame: &[Value],
    cx: &Cx,
) -> Result<Option<Vec<AggState>>> {
    let [lvl] = &c.levels[..] else {
        return Ok(None);
    };
    let (
        Source::Table(t),
        Access::Index {
            index: Some(ix),
            covering: true,
            sub_probe: None,
            reverse,
            ..
        },
    ) = (&lvl.source, &lvl.access)
    else {
        return Ok(None);
    };
    if lvl.left || lvl.key_slot || !lvl.filters.is_empty() || !lvl.after.is_empty() {
        return Ok(None);
    }
    let Some(&col) = t.indexes[*ix].columns.first() else {
        return Ok(None);
    };
    let simple = |a: &AggSpec| {
        !a.distinct
            && match (a.func, &a.args[..]) {
                (AggFunc::CountStar, _) => true,
                (
                    AggFunc::Count | AggFunc::Sum | AggFunc::Total | AggFunc::Avg,
                    [PExpr::Col(i)],
                ) => *i == lvl.base + col,
                _ => false,
            }
    };
    if !agg.aggs.iter().all(simple) {
        return Ok(None);
    }
    // Keys hold integral reals as integers (see `index_row`).
    let real = t.columns[col].ty == ColType::Real;
    let mut states: Vec<AggState> = agg.aggs.iter().map(AggState::new).collect();
    let (tree, ranges) = level_ranges(t, &lvl.access, frame, cx)?;
    for (lo, hi) in ranges {
        let (lo, hi) = (bound_ref(&lo), bound_ref(&hi));
        cx.store.scan_each(tree, lo, hi, *reverse, &mut |key, _| {
            let v = match key_integer(key) {
                Some(i) if real => Value::Real(i as f64),
                Some(i) => Value::Integer(i),
                None => decode_key_value(key, false)?.0,
            };
            for (a, st) in agg.aggs.iter().zip(states.iter_mut()) {
                match st {
                    AggState::Count(n) if a.func == AggFunc::CountStar || !v.is_null() => *n += 1,
                    AggState::Sum(s) if !v.is_null() => s.add(&v),
                    _ => {}
                }
            }
            Ok(true)
        })?;
    }
    Ok(Some(states))
}

/// Adds a row to a group's aggregates. Bare columns (`Last`) follow the row that gave the
/// query's only min()/max(), if it has one, as in SQLite.
fn update_states(agg: &AggPlan, states: &mut [AggState], frame: &[Value], cx: &Cx) -> Result<()> {
    let mut extreme_changed = true;
    let mut bare = false;
    for (i, (spec, st)) in agg.aggs.iter().zip(states.iter_mut()).enumerate() {
        if spec.func == AggFunc::Last {
            bare = true;
            continue;
        }
        let changed = st.update(spec, frame, cx)?;
        if agg.minmax == Some(i) {
            extreme_changed = changed;
        }
    }
    if bare && extreme_changed {
        for (spec, st) in agg.aggs.iter().zip(states.iter_mut()) {
            if spec.func == AggFunc::Last {
                st.update(spec, frame, cx)?;
            }
        }
    }
    Ok(())
}

/// Finishes one group: HAVING, projection, DISTINCT, then the sink.
fn emit_group(
    c: &Core,
    agg: &AggPlan,
    gvals: Vec<Value>,
    states: Vec<AggState>,
    cx: &Cx,
    seen: &mut KeySet,
    sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
) -> Result<bool> {
    let mut frame = gvals;
    for (spec, st) in agg.aggs.iter().zip(states) {
        frame.push(st.finish(spec)?);
    }
    if let Some(h) = &agg.having {
        if eval_bool(h, &frame, cx)? != Some(true) {
            return Ok(true);
        }
    }
    let row = eval_row(&c.project, &frame, cx)?;
    if c.distinct {
        let mut k = Vec::new();
        norm_key(&row, &mut k);
        if !seen.insert(k) {
            return Ok(true);
        }
    }
    sink(row)
}

#[derive(Default)]
struct Groups {
    index: FastMap<Vec<u8>, usize>,
    groups: Vec<(Vec<Value>, Vec<AggState>)>,
}

fn finish_groups(
    c: &Core,
    agg: &AggPlan,
    mut groups: Groups,
    cx: &Cx,
    sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
) -> Result<bool> {
    if groups.groups.is_empty() && agg.group_by.is_empty() {
        groups
            .groups
            .push((vec![], agg.aggs.iter().map(AggState::new).collect()));
    }
    let mut seen = KeySet::default();
    for (gvals, states) in groups.groups {
        if !emit_group(c, agg, gvals, states, cx, &mut seen, sink)? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[derive(Default)]
struct SumState {
    int: i64,
    sum: f64,
    err: f64,
    approx: bool,
    overflow: bool,
    n: i64,
}

impl SumState {
    fn kbn(&mut self, r: f64) {
        let s = self.sum;
        let t = s + r;
        if s.abs() > r.abs() {
            self.err += (s - t) + r;
        } else {
            self.err += (r - t) + s;
        }
        self.sum = t;
    }

    /// Adds an integer to the compensated sum without losing its low bits.
    fn kbn_int(&mut self, i: i64) {
        if !(-4_503_599_627_370_496..4_503_599_627_370_496).contains(&i) {
            let big = i - (i % 16384);
            self.kbn(big as f64);
            self.kbn((i - big) as f64);
        } else {
            self.kbn(i as f64);
        }
    }

    fn go_approx(&mut self) {
        if !self.approx {
            self.approx = true;
            let i = self.int;
            self.sum = 0.0;
            self.err = 0.0;
            self.kbn_int(i);
        }
    }

    /// Adds a value: an integer to an exact sum that stays exact here, inlined; the rest apart.
    #[inline]
    fn add(&mut self, v: &Value) {
        if let (Value::Integer(i), false) = (v, self.approx) {
            if let Some(s) = self.int.checked_add(*i) {
                self.n += 1;
                self.int = s;
                return;
            }
        }
        self.add_general(v)
    }

    #[inline(never)]
    fn add_general(&mut self, v: &Value) {
        self.n += 1;
        // Text counts as an integer only if all of it is one; otherwise as a real.
        let converted;
        let v = match v {
            Value::Text(_) | Value::Blob(_) => {
                converted = match types::apply_affinity(v.clone(), types::Affinity::Numeric) {
                    i @ Value::Integer(_) => i,
                    other => Value::Real(types::to_f64(&other).unwrap_or(0.0)),
                };
                &converted
            }
            v => v,
        };
        match *v {
            Value::Integer(i) if !self.approx => match self.int.checked_add(i) {
                Some(s) => self.int = s,
                None => {
                    self.overflow = true;
                    self.go_approx();
                    self.kbn_int(i);
                }
            },
            Value::Integer(i) => self.kbn_int(i),
            Value::Real(r) => {
                self.go_approx();
                self.kbn(r);
            }
            _ => {}
        }
    }

    fn value(&self) -> f64 {
        if self.approx {
            if self.err.is_finite() {
                self.sum + self.err
            } else {
                self.sum
            }
        } else {
            self.int as f64
        }
    }

    fn finish(&self, f: AggFunc) -> Result<Value> {
        Ok(match f {
            AggFunc::Total => Value::Real(self.value()),
            AggFunc::Avg if self.n == 0 => Value::Null,
            AggFunc::Avg => Value::Real(self.value() / self.n as f64),
            _ if self.n == 0 => Value::Null,
            _ if self.overflow => return Err(Error::IntegerOverflow),
            _ if self.approx => Value::Real(self.value()),
            _ => Value::Integer(self.int),
        })
    }
}

enum AggState {
    Count(i64),
    /// sum(), total() and avg(): SQLite's accumulator, an exact integer sum until a real or
    /// an overflow, then Kahan-Babuska-Neumaier compensated summation.
    Sum(Box<SumState>),
    Ext(Option<Value>),
    Concat(Option<String>),
    Last(Value),
    Distinct(KeySet, Box<AggState>),
}

impl AggState {
    fn new(spec: &AggSpec) -> AggState {
        let base = match spec.func {
            AggFunc::CountStar | AggFunc::Count => AggState::Count(0),
            AggFunc::Sum | AggFunc::Total | AggFunc::Avg => AggState::Sum(Box::default()),
            AggFunc::Min | AggFunc::Max => AggState::Ext(None),
            AggFunc::GroupConcat => AggState::Concat(None),
            AggFunc::Last => AggState::Last(Value::Null),
        };
        if spec.distinct {
            AggState::Distinct(KeySet::default(), Box::new(base))
        } else {
            base
        }
    }

    /// Adds a row; says whether the state changed (for min/max: a new extreme).
    #[inline]
    fn update(&mut self, spec: &AggSpec, frame: &[Value], cx: &Cx) -> Result<bool> {
        if spec.func == AggFunc::CountStar {
            if let AggState::Count(n) = self {
                *n += 1;
            }
            return Ok(true);
        }
        // count(), sum(), total() or avg() of a column, the usual aggregate, without `eval`
        // (a DISTINCT one is wrapped, and takes the general path).
        if let (AggState::Count(_) | AggState::Sum(_), [PExpr::Col(i)]) = (&*self, &spec.args[..]) {
            let v = frame.get(*i).unwrap_or(&Value::Null);
            if v.is_null() {
                return Ok(false);
            }
            match self {
                AggState::Count(n) => *n += 1,
                AggState::Sum(st) => st.add(v),
                _ => {}
            }
            return Ok(true);
        }
        self.update_general(spec, frame, cx)
    }

    /// [`AggState::update`] for any aggregate: apart, so that the inlined common cases stay small.
    #[inline(never)]
    fn update_general(&mut self, spec: &AggSpec, frame: &[Value], cx: &Cx) -> Result<bool> {
        let v = match spec.args.first() {
            Some(a) => eval(a, frame, cx)?,
            None => return Ok(false),
        };
        if let AggState::Distinct(seen, inner) = self {
            if v.is_null() {
                return Ok(false);
            }
            let mut k = Vec::new();
            push_norm(&v, &mut k);
            if !seen.insert(k) {
                return Ok(false);
            }
            return inner.add(spec, v, frame, cx);
        }
        if spec.func == AggFunc::Last {
            *self = AggState::Last(v.into_owned());
            return Ok(true);
        }
        if v.is_null() {
            return Ok(false);
        }
        self.add(spec, v, frame, cx)
    }

    /// Adds a value, borrowed: only a state that keeps it (min, max, a bare column) copies it.
    fn add(
        &mut self,
        spec: &AggSpec,
        v: std::borrow::Cow<'_, Value>,
        frame: &[Value],
        cx: &Cx,
    ) -> Result<bool> {
        match self {
            AggState::Count(n) => *n += 1,
            AggState::Sum(st) => st.add(&v),
            AggState::Ext(best) => {
                let better = match best {
                    None => true,
                    Some(b) => {
                        let o = v.total_cmp(b);
                        if spec.func == AggFunc::Min {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if better {
                    *best = Some(v.into_owned());
                }
                return Ok(better);
            }
            AggState::Concat(acc) => {
                let s = types::to_text(&v).unwrap_or_default();
                match acc {
                    None => *acc = Some(s),
                    Some(a) => {
                        let sep = match spec.args.get(1) {
                            Some(e) => types::to_text(&*eval(e, frame, cx)?).unwrap_or_default(),
                            None => ",".to_string(),
                        };
                        a.push_str(&sep);
                        a.push_str(&s);
                    }
                }
            }
            AggState::Last(l) => *l = v.into_owned(),
            AggState::Distinct(_, inner) => return inner.add(spec, v, frame, cx),
        }
        Ok(true)
    }

    fn finish(self, spec: &AggSpec) -> Result<Value> {
        Ok(match self {
            AggState::Count(n) => Value::Integer(n),
            AggState::Sum(st) => st.finish(spec.func)?,
            AggState::Ext(b) => b.unwrap_or(Value::Null),
            AggState::Concat(s) => s.map(Value::Text).unwrap_or(Value::Null),
            AggState::Last(v) => v,
            AggState::Distinct(_, inner) => inner.finish(spec)?,
        })
    }
}

/// Runs join levels `li..` for the current frame.
fn run_levels(
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
            cx.store
                .scan_each(t.tree, all.0, all.1, *reverse, &mut |key, value| {
                    primary_row(lvl, &mut rf, key, value, frame, cx, f)
                })
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
            for (lo, hi) in ranges {
                let (lo, hi) = (bound_ref(&lo), bound_ref(&hi));
                let go =
                    cx.store
                        .scan_each(tree, lo, hi, *reverse, &mut |key, value| match index {
                            None => primary_row(lvl, &mut rf, key, value, frame, cx, f),
                            Some(i) => {
                                index_row(lvl, &mut rf, t, (*i, *covering, key), frame, cx, f)
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

/// The whole primary keys an equality on every key column names, for a direct `get` of each
/// instead of a range scan; None when a probe covers only part of the key, or when a value's
/// stored key is not certain (a number beyond +-9e18, where an integer and an equal real have
/// different keys), which the range scan handles. Probes with a NULL name no row.
// Inlined: called for every point read, and from a write's key list too (where a second call
// site would otherwise stop it being inlined into the read path).
#[inline(always)]
fn point_keys(
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
fn point_width(t: &Table) -> Option<usize> {
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
fn point_key_into(
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
fn null_frame(frame: &mut Vec<Value>, n: usize) {
    frame.clear();
    frame.extend(std::iter::repeat_with(|| Value::Null).take(n));
}

/// `n` NULLs (see [`null_frame`]).
fn nulls(n: usize) -> Vec<Value> {
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
fn level_ranges(
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

fn bound_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A level's filters as prepared for one scan of its table: the conditions on one column
/// against fixed values ([`ColTest`]), tested on the row in its page, and the rest, evaluated
/// on decoded columns. With the buffers a row is read through, reused from row to row.
struct RowFilter<'l> {
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
    last: crate::eval::LastGet,
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
    fn new(lvl: &'l Level, frame: &[Value], cx: &Cx<'l>) -> RowFilter<'l> {
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
                    (value, layout, key, crate::eval::LastGet::default())
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
fn row_passes(
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
fn key_columns(t: &Table) -> &[usize] {
    match &t.key {
        Key::Rowid(Some(c)) => std::slice::from_ref(c),
        Key::Rowid(None) => &[],
        Key::Columns(c) => c,
    }
}

/// A row found through an index entry `(index, covering, key)`. Inlined into its two
/// callers in `for_each_row`, once per index entry.
#[inline(always)]
fn index_row(
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
    if covering || !matches!(t.key, Key::Rowid(_)) {
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

type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

// Inlined for the same reason as `point_keys`: every range read evaluates it.
#[inline(always)]
fn index_ranges(
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
        out.sort_by(|a, b| cmp_lower(&a.0, &b.0));
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

// ---- writes ----

/// What a write statement did.
#[derive(Debug, Default)]
pub struct WriteResult {
    pub changes: u64,
    pub last_rowid: Option<i64>,
    pub returned: Vec<Vec<Value>>,
}

pub struct Writer<'a> {
    pub store: &'a mut dyn Storage,
    pub params: &'a [Value],
    pub rng: &'a std::cell::Cell<u64>,
    /// Where writes to replicated tables are recorded (None: not recorded, e.g. while rows
    /// that arrived from a peer are applied).
    pub capture: Option<&'a mut Changes>,
    /// Buffers kept by the database from one statement to the next.
    pub bufs: &'a mut RowBufs,
}

/// An INSERT's buffers for each row's key, record and values, kept from statement to
/// statement: a one-row INSERT (each row committed alone, most of all) otherwise allocated and
/// freed all three every time. Left empty (capacity kept) after each statement, and given up
/// when a statement grew them large.
#[derive(Debug, Default)]
pub struct RowBufs {
    pk: Vec<u8>,
    rec: Vec<u8>,
    row: Vec<Value>,
    /// Upsert's DO UPDATE in place (`Writer::upsert_in_place`): the frame, the columns its
    /// expressions read, the new values. Emptied after each use.
    upsert: (Vec<Value>, Vec<usize>, Vec<Value>, Layout),
    /// An UPDATE or DELETE by key (`Writer::point_targets`, `Writer::update_in_place`): the
    /// row frame, the key named, where each column's new value is, the new values. A
    /// statement that writes one row by its key otherwise allocated and freed all four.
    point: PointBufs,
}

/// `RowBufs::point`.
#[derive(Debug, Default)]
struct PointBufs {
    frame: Vec<Value>,
    key: Vec<u8>,
    value_of: Vec<Option<usize>>,
    vals: Vec<Value>,
    /// Where the columns of the record being rewritten lie.
    layout: Layout,
}

impl PointBufs {
    /// Empties the buffers for the next statement, keeping their room unless a statement grew
    /// them large.
    fn clear(&mut self) {
        const MAX: usize = 16 * 1024;
        for v in [&mut self.frame, &mut self.vals] {
            v.clear();
            if v.capacity() * std::mem::size_of::<Value>() > MAX {
                *v = Vec::new();
            }
        }
        self.key.clear();
        if self.key.capacity() > MAX {
            self.key = Vec::new();
        }
        self.value_of.clear();
        if self.value_of.capacity() * std::mem::size_of::<Option<usize>>() > MAX {
            self.value_of = Vec::new();
        }
    }
}

impl RowBufs {
    /// Takes the buffers for a statement, empty.
    fn take(&mut self) -> (Vec<u8>, Vec<u8>, Vec<Value>) {
        let (mut pk, mut rec, mut row) = (
            std::mem::take(&mut self.pk),
            std::mem::take(&mut self.rec),
            std::mem::take(&mut self.row),
        );
        pk.clear();
        rec.clear();
        row.clear();
        (pk, rec, row)
    }

    /// Gives them back after the statement, emptied, unless they grew past a few pages.
    fn keep(&mut self, pk: Vec<u8>, rec: Vec<u8>, mut row: Vec<Value>) {
        const MAX: usize = 16 * 1024;
        row.clear();
        if pk.capacity() <= MAX {
            self.pk = pk;
        }
        if rec.capacity() <= MAX {
            self.rec = rec;
        }
        if row.capacity() * std::mem::size_of::<Value>() <= MAX {
            self.row = row;
        }
    }
}

/// The writes a transaction made to replicated tables, as the sync layer turns them into ops.
///
/// Flat buffers, kept from one transaction to the next: each captured row's values are
/// appended to one byte buffer in the sync wire encoding of a value (docs/sync.md sec. 2),
/// which the commit hook copies into its ops as they are, and each change is a fixed-size
/// entry naming ranges of the buffers; inserts of whole rows into one table, one after the
/// other, share one entry. Once the buffers have grown, capturing a row allocates nothing and
/// the commit frees nothing per row. A `Vec<Value>` per change instead kept every row's
/// allocations alive until commit: the statement's own allocations then grew the heap instead
/// of reusing freed chunks, and the commit freed them all at once. An inserted row takes its
/// values' bytes and a bound per value, no more: a transaction's first large capture grows
/// these buffers, and every byte of them is memory the page faults and copies of that growth
/// touch, which instruction counts do not show.
#[derive(Debug, Default)]
pub struct Changes {
    entries: Vec<Entry>,
    /// How many changes the entries hold.
    len: usize,
    /// The rows' values, one after the other, each in the sync wire encoding.
    bytes: Vec<u8>,
    /// Where each row's first value starts in `bytes`, then where each of its values ends. A
    /// row of a run of inserts starts where the one before it ends, and shares that bound.
    bounds: Vec<usize>,
    /// The columns each SET sets (but an insert's, which sets them all).
    columns: Vec<usize>,
    /// 0, 1, 2...: the columns an insert sets, as long as the widest row.
    all: Vec<usize>,
    /// The counter additions of each SET: (column, delta).
    adds: Vec<(usize, i64)>,
    /// The tables changed in this transaction (and maybe earlier ones), which entries name by
    /// index.
    tables: Vec<Rc<str>>,
    /// Where the changes of the tables it takes go instead (the sync layer's ops), and how
    /// many it took in this transaction.
    #[cfg(feature = "sink")]
    sink: SinkSlot,
    #[cfg(feature = "sink")]
    sunk: usize,
}

/// Takes a transaction's changes to some replicated tables as the statements make them (the
/// sync layer writing its ops at once), instead of [`Changes`] holding them for the commit hook
/// to read at commit. Every change of a table it takes in a transaction must go to it, in order;
/// what it takes counts among the transaction's changes ([`Changes::len`]).
#[cfg(feature = "sink")]
pub trait CaptureSink {
    /// Takes the insert of `row` (every column) into `t`, or returns false (not a table it
    /// takes).
    fn insert(&mut self, t: &Table, row: &[Value]) -> bool;
    /// Takes a SET of `columns` of a row of `t` whose values after the write `value` gives
    /// (the key's among them).
    fn set<'v>(&mut self, t: &Table, value: &dyn Fn(usize) -> &'v Value, columns: &[usize])
        -> bool;
    /// Takes the delete of `row` (the row as it was).
    fn delete(&mut self, t: &Table, row: &[Value]) -> bool;
    /// Drops the changes it took in this transaction past the first `len` (a statement that
    /// failed; 0: the transaction ended). Called only when it took more.
    fn truncate(&mut self, len: usize);
}

#[cfg(feature = "sink")]
#[derive(Default)]
struct SinkSlot(Option<Box<dyn CaptureSink>>);

#[cfg(feature = "sink")]
impl std::fmt::Debug for SinkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Sink" } else { "None" })
    }
}

/// Where a transaction's changes stood (`Changes::mark`), to go back to.
#[derive(Debug, Clone, Copy)]
pub struct ChangesMark {
    held: usize,
    sunk: usize,
}

/// One change, or a run of inserts of whole rows: ranges of [`Changes`]' buffers.
#[derive(Debug, Clone, Copy)]
struct Entry {
    table: usize,
    delete: bool,
    /// A run of `count` inserts setting every column (`columns` unused); else one change.
    insert: bool,
    count: usize,
    /// The first row's first bound in `bounds`, and how many values a row has.
    row: usize,
    values: usize,
    columns: (usize, usize),
    adds: (usize, usize),
}

/// A captured change, borrowed from [`Changes`].
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub table: &'a str,
    /// The whole row after the write, or as it was for a delete. An UPDATE made where the
    /// row is stored (of a table without counters, its scope column not set) holds only the
    /// key, the scope column and the columns set: its other values are empty.
    pub row: EncodedRow<'a>,
    /// None for a delete.
    pub set: Option<SetPart<'a>>,
}

/// What a captured SET writes.
#[derive(Debug, Clone, Copy)]
pub struct SetPart<'a> {
    /// The columns set (all but the counters, for an insert).
    pub columns: &'a [usize],
    /// The additions to counter columns: (column, delta).
    pub adds: &'a [(usize, i64)],
}

/// A captured row: each value in the sync wire encoding.
#[derive(Debug, Clone, Copy)]
pub struct EncodedRow<'a> {
    bytes: &'a [u8],
    /// Where each value starts, then where the last ends.
    bounds: &'a [usize],
}

impl<'a> EncodedRow<'a> {
    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Column `c`'s value, encoded.
    pub fn value(&self, c: usize) -> &'a [u8] {
        let b = &self.bounds[c..c + 2];
        &self.bytes[b[0]..b[1]]
    }
}

impl Changes {
    /// The changes made, those the sink took among them.
    pub fn len(&self) -> usize {
        self.len + self.sunk()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The changes held here, for [`Changes::iter`] (not those the sink took).
    pub fn held(&self) -> usize {
        self.len
    }
    fn sunk(&self) -> usize {
        #[cfg(feature = "sink")]
        return self.sunk;
        #[cfg(not(feature = "sink"))]
        0
    }
    /// Hands the changes of the tables `sink` takes to it from now on.
    #[cfg(feature = "sink")]
    pub fn set_sink(&mut self, sink: Box<dyn CaptureSink>) {
        self.sink.0 = Some(sink);
    }
    /// Moves the sink to `other` (a `Changes` that takes this one's place, between
    /// transactions).
    pub fn give_sink(&mut self, other: &mut Changes) {
        #[cfg(feature = "sink")]
        {
            other.sink.0 = self.sink.0.take();
            other.sunk = std::mem::take(&mut self.sunk);
        }
        let _ = other;
    }
    pub fn mark(&self) -> ChangesMark {
        ChangesMark {
            held: self.len,
            sunk: self.sunk(),
        }
    }
    /// Drops the changes made since `m` (a statement that failed).
    pub fn back_to(&mut self, m: ChangesMark) {
        self.truncate(m.held);
        self.sink_back_to(m.sunk);
    }
    fn sink_back_to(&mut self, sunk: usize) {
        #[cfg(feature = "sink")]
        if self.sunk > sunk {
            if let Some(s) = self.sink.0.as_mut() {
                s.truncate(sunk);
            }
            self.sunk = sunk;
        }
        let _ = sunk;
    }
    pub fn clear(&mut self) {
        self.truncate(0);
        self.sink_back_to(0);
        // The names stay for the next transaction (most write the same tables), unless many
        // tables have come and gone.
        if self.tables.len() > 16 {
            self.tables.clear();
        }
    }
    /// Drops the changes after the first `len` (a statement that failed): the entries past
    /// them, and the part of a run of inserts past them.
    pub fn truncate(&mut self, len: usize) {
        while self.len > len {
            let Some(e) = self.entries.last_mut() else {
                break;
            };
            let first = self.len - e.count;
            if first < len {
                let cut = e.row + (len - first) * e.values + 1;
                self.bytes.truncate(self.bounds[cut - 1]);
                self.bounds.truncate(cut);
                e.count = len - first;
                self.len = len;
                break;
            }
            self.bytes.truncate(self.bounds[e.row]);
            self.bounds.truncate(e.row);
            self.columns.truncate(e.columns.0);
            self.adds.truncate(e.adds.0);
            self.entries.pop();
            self.len = first;
        }
    }
    /// The bytes the buffers hold room for (a very large transaction's are not kept).
    pub fn footprint(&self) -> usize {
        self.bytes.capacity()
            + (self.bounds.capacity() + self.columns.capacity() + self.all.capacity())
                * size_of::<usize>()
            + self.adds.capacity() * size_of::<(usize, i64)>()
            + self.entries.capacity() * size_of::<Entry>()
    }
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Change<'_>> + '_ {
        Iter {
            changes: self,
            entry: 0,
            row: 0,
            left: self.len,
        }
    }

    /// Table `t`'s index in `tables`: a run of changes is mostly to one table.
    fn table(&mut self, t: &Table) -> usize {
        if let Some(e) = self.entries.last() {
            if *self.tables[e.table] == *t.name {
                return e.table;
            }
        }
        match self.tables.iter().position(|n| **n == *t.name) {
            Some(i) => i,
            None => {
                self.tables.push(Rc::from(t.name.as_str()));
                self.tables.len() - 1
            }
        }
    }

    /// An entry of one row into `table`, whose bounds start at `row`, with the columns and
    /// adds pushed since `from` (their lengths then).
    fn push_entry(
        &mut self,
        table: usize,
        (delete, insert): (bool, bool),
        row: usize,
        values: usize,
        from: (usize, usize),
    ) {
        self.entries.push(Entry {
            table,
            delete,
            insert,
            count: 1,
            row,
            values,
            columns: (from.0, self.columns.len()),
            adds: (from.1, self.adds.len()),
        });
    }

    /// Appends `row`'s values; returns where its bounds start.
    fn push_row(&mut self, row: &[Value]) -> usize {
        let at = self.bounds.len();
        self.bounds.push(self.bytes.len());
        self.push_values(row);
        at
    }

    /// Appends `row`'s values and where each ends.
    fn push_values(&mut self, row: &[Value]) {
        // Room for the row at once (its numbers' encodings, at least) instead of a check
        // against the capacity at each push that may grow the buffer.
        self.bounds.reserve(row.len());
        self.bytes.reserve(10 * row.len());
        for v in row {
            put_value(&mut self.bytes, v);
            self.bounds.push(self.bytes.len());
        }
    }

    /// An insert of `row` setting every column: added to the last entry when that is a run
    /// of such inserts into `t`.
    fn push_insert(&mut self, t: &Table, row: &[Value]) {
        #[cfg(feature = "sink")]
        if let Some(s) = self.sink.0.as_mut() {
            if s.insert(t, row) {
                self.sunk += 1;
                return;
            }
        }
        self.len += 1;
        if let Some(e) = self.entries.last_mut() {
            if e.insert && e.values == row.len() && *self.tables[e.table] == *t.name {
                e.count += 1;
                self.push_values(row);
                return;
            }
        }
        if self.all.len() < row.len() {
            self.all = (0..row.len()).collect();
        }
        let table = self.table(t);
        let at = self.push_row(row);
        let from = (self.columns.len(), self.adds.len());
        self.push_entry(table, (false, true), at, row.len(), from);
    }

    fn push_delete(&mut self, t: &Table, row: &[Value]) {
        #[cfg(feature = "sink")]
        if let Some(s) = self.sink.0.as_mut() {
            if s.delete(t, row) {
                self.sunk += 1;
                return;
            }
        }
        let table = self.table(t);
        let at = self.push_row(row);
        self.len += 1;
        let from = (self.columns.len(), self.adds.len());
        self.push_entry(table, (true, false), at, row.len(), from);
    }

    /// An UPDATE made where the row is stored (`update_in_place`), of a table without
    /// counters: a SET of the columns `new` gives a value that differs from `old`'s, unless
    /// none does, with a row of the values set and `old`'s of the key and the scope column,
    /// which the commit hook reads besides the columns set. The other columns are left empty
    /// rather than decoded and encoded for nothing. `old` is the row before the write, in
    /// those columns.
    fn push_in_place<'v>(
        &mut self,
        t: &Table,
        old: &[Value],
        new: impl Fn(usize) -> Option<&'v Value>,
    ) {
        let c0 = self.columns.len();
        for (c, o) in old.iter().enumerate() {
            if new(c).is_some_and(|v| !same_value(o, v)) {
                self.columns.push(c);
            }
        }
        if self.columns.len() == c0 {
            return;
        }
        #[cfg(feature = "sink")]
        if let Some(s) = self.sink.0.as_mut() {
            let value = |c: usize| new(c).unwrap_or(&old[c]);
            if s.set(t, &value, &self.columns[c0..]) {
                self.columns.truncate(c0);
                self.sunk += 1;
                return;
            }
        }
        let scope = t.replicated.as_ref().and_then(|r| r.scope);
        let keep = |c: usize| {
            Some(c) == scope
                || match &t.key {
                    Key::Columns(cols) => cols.contains(&c),
                    Key::Rowid(k) => *k == Some(c),
                }
        };
        let table = self.table(t);
        let at = self.bounds.len();
        self.bounds.reserve(old.len() + 1);
        self.bounds.push(self.bytes.len());
        for (c, o) in old.iter().enumerate() {
            match new(c) {
                Some(v) => put_value(&mut self.bytes, v),
                None if keep(c) => put_value(&mut self.bytes, o),
                None => {}
            }
            self.bounds.push(self.bytes.len());
        }
        self.len += 1;
        let from = (c0, self.adds.len());
        self.push_entry(table, (false, false), at, old.len(), from);
    }

    /// A SET of `columns` and `adds` to `row`, unless both are empty.
    fn push_set(
        &mut self,
        t: &Table,
        row: &[Value],
        columns: impl Iterator<Item = usize>,
        adds: impl Iterator<Item = (usize, i64)>,
    ) {
        let (c0, a0) = (self.columns.len(), self.adds.len());
        self.columns.extend(columns);
        self.adds.extend(adds);
        if self.columns.len() == c0 && self.adds.len() == a0 {
            return;
        }
        #[cfg(feature = "sink")]
        if let (Some(s), true) = (self.sink.0.as_mut(), self.adds.len() == a0) {
            if s.set(t, &|c| &row[c], &self.columns[c0..]) {
                self.columns.truncate(c0);
                self.sunk += 1;
                return;
            }
        }
        let table = self.table(t);
        let at = self.push_row(row);
        self.len += 1;
        self.push_entry(table, (false, false), at, row.len(), (c0, a0));
    }
}

/// [`Changes::iter`]: each change in order, a run of inserts one row at a time.
struct Iter<'a> {
    changes: &'a Changes,
    entry: usize,
    /// The next row of the entry.
    row: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Change<'a>;
    fn next(&mut self) -> Option<Change<'a>> {
        let c = self.changes;
        let e = c.entries.get(self.entry)?;
        let at = e.row + self.row * e.values;
        let change = Change {
            table: &c.tables[e.table],
            row: EncodedRow {
                bytes: &c.bytes,
                bounds: &c.bounds[at..at + e.values + 1],
            },
            set: (!e.delete).then(|| SetPart {
                columns: if e.insert {
                    &c.all[..e.values]
                } else {
                    &c.columns[e.columns.0..e.columns.1]
                },
                adds: &c.adds[e.adds.0..e.adds.1],
            }),
        };
        self.row += 1;
        if self.row == e.count {
            self.entry += 1;
            self.row = 0;
        }
        self.left -= 1;
        Some(change)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// A row to force into a table: (table, primary key values, the row or None for no row).
pub type ForcedRow = (Rc<Table>, Vec<Value>, Option<Vec<Value>>);
/// A forced row the table's constraints refused: (table, primary key values, the error).
pub type RefusedRow = (Rc<Table>, Vec<Value>, Error);

/// A row a replicated table must hold after a commit, when merging the commit into the
/// replica's state gave something other than what the statements wrote (a counter that kept
/// additions from other devices, a row revived after a delete elsewhere). `None`: no row.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    pub table: String,
    pub pk: Vec<Value>,
    pub row: Option<Vec<Value>>,
}

/// Whether two values are the same stored value: equal and of the same type (1 and 1.0 compare
/// equal but are stored differently).
pub fn same_value(a: &Value, b: &Value) -> bool {
    a.total_cmp(b) == Ordering::Equal && a.type_name() == b.type_name()
}

/// Whether two rows hold the same stored values.
pub fn same_row(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y))
}

fn counter_delta(old: &Value, new: &Value) -> i64 {
    let as_int = |v: &Value| match v {
        Value::Integer(i) => *i,
        _ => 0,
    };
    as_int(new).wrapping_sub(as_int(old))
}

impl Writer<'_> {
    fn cx<'b>(&'b self, cache: &'b Cache) -> Cx<'b> {
        Cx {
            store: &*self.store,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache,
        }
    }

    /// The row's primary key, written into `k` (cleared first), and its row id if it has one.
    fn pk_of(
        &self,
        t: &Table,
        row: &mut [Value],
        next_rowid: &mut Option<i64>,
        k: &mut Vec<u8>,
    ) -> Result<Option<i64>> {
        k.clear();
        match &t.key {
            Key::Rowid(alias) => {
                let given = alias.and_then(|c| match &row[c] {
                    Value::Integer(i) => Some(*i),
                    _ => None,
                });
                let id = match given {
                    Some(i) => i,
                    None => {
                        let next = match next_rowid {
                            Some(n) => *n,
                            None => match self.store.last_key(t.tree)? {
                                Some(k) => match decode_key_value(&k, false)?.0 {
                                    Value::Integer(i) => i.checked_add(1).ok_or_else(|| {
                                        Error::Invalid(
                                            "table is full: row ids are exhausted".into(),
                                        )
                                    })?,
                                    _ => 1,
                                },
                                None => 1,
                            },
                        };
                        next
                    }
                };
                *next_rowid = Some(match next_rowid {
                    Some(n) => (*n).max(id.saturating_add(1)),
                    None => id.saturating_add(1),
                });
                if let Some(c) = alias {
                    row[*c] = Value::Integer(id);
                }
                encode_key_value(k, &Value::Integer(id), false);
                Ok(Some(id))
            }
            Key::Columns(cols) => {
                for &c in cols {
                    push_norm(&row[c], k);
                }
                Ok(None)
            }
        }
    }

    /// Type, NOT NULL and CHECK constraints on a complete row.
    fn check_row(
        &self,
        t: &Table,
        row: &mut [Value],
        checks: &[PExpr],
        cache: &Cache,
    ) -> Result<()> {
        for (i, v) in row.iter_mut().enumerate() {
            Self::check_column(t, i, v)?;
        }
        let cx = self.cx(cache);
        for (k, ch) in checks.iter().enumerate() {
            if eval_bool(ch, row, &cx)? == Some(false) {
                return Err(Error::ConstraintCheck(crate::display::expr(&t.checks[k])));
            }
        }
        Ok(())
    }

    /// Type and NOT NULL constraints on value `v` of column `i`, coerced in place. Inlined:
    /// every inserted row runs it for each column.
    #[inline(always)]
    fn check_column(t: &Table, i: usize, v: &mut Value) -> Result<()> {
        let c = &t.columns[i];
        // A value already of the column's type is stored as it is (what coercing gives).
        let stored = matches!(
            (&*v, c.ty),
            (
                Value::Integer(_),
                ColType::Integer | ColType::Numeric | ColType::Any
            ) | (Value::Text(_), ColType::Text | ColType::Any)
                | (Value::Blob(_), ColType::Blob | ColType::Any)
        );
        if !stored {
            let old = std::mem::replace(v, Value::Null);
            *v = if matches!(t.key, Key::Rowid(Some(k)) if k == i) {
                rowid_value(old, t, i)?
            } else {
                c.ty.coerce_with(old, || format!("{}.{}", t.name, c.name))?
            };
        }
        if c.not_null && v.is_null() && !matches!(t.key, Key::Rowid(Some(k)) if k == i) {
            return Err(Error::ConstraintNotNull(format!("{}.{}", t.name, c.name)));
        }
        Ok(())
    }

    fn index_key(t: &Table, ix: usize, row: &[Value], pk: &[u8]) -> Vec<u8> {
        // As in `put_index_entries`: room for two numbers, not grown from empty.
        let mut k = Vec::with_capacity(pk.len() + 28);
        for &c in &t.indexes[ix].columns {
            push_norm(&row[c], &mut k);
        }
        k.extend_from_slice(pk);
        k
    }

    /// The primary key of another row that holds the same values in unique index `ix`.
    fn unique_conflict(
        &self,
        t: &Table,
        ix: usize,
        row: &[Value],
        own: &[&[u8]],
    ) -> Result<Option<Vec<u8>>> {
        let index = &t.indexes[ix];
        if !index.unique || index.columns.iter().any(|&c| row[c].is_null()) {
            return Ok(None);
        }
        let mut prefix = Vec::new();
        for &c in &index.columns {
            push_norm(&row[c], &mut prefix);
        }
        let hi = prefix_successor(&prefix);
        let mut cur = self.store.scan(
            index.tree,
            Bound::Included(&prefix),
            match &hi {
                Some(h) => Bound::Excluded(h.as_slice()),
                None => Bound::Unbounded,
            },
            false,
        )?;
        while cur.next()? {
            let pk = &cur.key()[prefix.len()..];
            if !own.contains(&pk) {
                return Ok(Some(pk.to_vec()));
            }
        }
        Ok(None)
    }

    fn unique_error(t: &Table, ix: Option<usize>) -> Error {
        let cols: Vec<usize> = match ix {
            Some(i) => t.indexes[i].columns.clone(),
            None => t.key_columns(),
        };
        let names: Vec<String> = cols
            .iter()
            .map(|&c| format!("{}.{}", t.name, t.columns[c].name))
            .collect();
        match ix {
            Some(_) => Error::ConstraintUnique(cairn_value::text::join(&names, ", ")),
            None => Error::ConstraintPrimaryKey(cairn_value::text::join(&names, ", ")),
        }
    }

    fn capture_set(&mut self, t: &Table, old: Option<&[Value]>, new: &[Value]) {
        let (Some(r), Some(cap)) = (&t.replicated, self.capture.as_deref_mut()) else {
            return;
        };
        let mut old = old;
        if let (Some(o), Some(sc)) = (old, r.scope) {
            if !same_value(&o[sc], &new[sc]) {
                // The row moves to another scope: gone from the old one, whole in the new one.
                cap.push_delete(t, o);
                old = None;
            }
        }
        if old.is_none() && r.counters.is_empty() {
            // An insert (or a row moved into its scope) of a table without counters, the
            // common case: every column, appended as one range.
            cap.push_insert(t, new);
            return;
        }
        // In column order, as the counters are declared in any order.
        let adds = (0..new.len()).filter_map(|c| {
            if !r.counters.contains(&c) {
                return None;
            }
            let d = counter_delta(old.map_or(&Value::Null, |o| &o[c]), &new[c]);
            (d != 0).then_some((c, d))
        });
        let columns = (0..new.len()).filter(|&c| {
            !r.counters.contains(&c) && old.is_none_or(|o| !same_value(&o[c], &new[c]))
        });
        cap.push_set(t, new, columns, adds);
    }

    fn put_row(&mut self, t: &Table, pk: &[u8], row: &[Value]) -> Result<()> {
        self.capture_set(t, None, row);
        let mut rec = Vec::with_capacity(16 + row.len() * 8);
        encode_record_into(&mut rec, row);
        self.store.put(t.tree, pk, &rec)?;
        for i in 0..t.indexes.len() {
            self.store
                .put(t.indexes[i].tree, &Self::index_key(t, i, row, pk), &[])?;
        }
        Ok(())
    }

    /// The index entries of a row whose record is stored.
    fn put_index_entries(&mut self, t: &Table, pk: &[u8], row: &[Value]) -> Result<()> {
        if t.indexes.is_empty() {
            return Ok(());
        }
        // Room for the key and two numbers (14 bytes each at most) from the start: grown from
        // empty, the key was reallocated twice for every row.
        let mut k = Vec::with_capacity(pk.len() + 28);
        for ix in &t.indexes {
            k.clear();
            for &c in &ix.columns {
                push_norm(&row[c], &mut k);
            }
            k.extend_from_slice(pk);
            self.store.put(ix.tree, &k, &[])?;
        }
        Ok(())
    }

    /// Whether another row holds `row`'s values in one of the table's UNIQUE indexes.
    fn unique_conflicts(&self, t: &Table, row: &[Value]) -> Result<bool> {
        for i in 0..t.indexes.len() {
            if self.unique_conflict(t, i, row, &[])?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn delete_row(&mut self, t: &Table, pk: &[u8], row: &[Value]) -> Result<()> {
        if let (Some(_), Some(cap)) = (&t.replicated, self.capture.as_deref_mut()) {
            cap.push_delete(t, row);
        }
        self.store.delete(t.tree, pk)?;
        for i in 0..t.indexes.len() {
            self.store
                .delete(t.indexes[i].tree, &Self::index_key(t, i, row, pk))?;
        }
        Ok(())
    }

    /// Makes each table hold `row` (or nothing) at primary key `pk`, unrecorded: corrections
    /// and peers' rows from the sync layer. Two passes, so that rows trading UNIQUE values
    /// do not block each other: every row that differs goes first, then the new ones are put.
    /// A row that breaks NOT NULL, type or UNIQUE constraints is left out (as every replica
    /// would leave it out); returns those, with the constraint's error.
    pub fn force_rows(&mut self, rows: Vec<ForcedRow>) -> Result<Vec<RefusedRow>> {
        let mut puts = Vec::new();
        for (t, pk, row) in rows {
            let key = match &t.key {
                Key::Columns(_) => {
                    let mut k = Vec::new();
                    for v in &pk {
                        push_norm(v, &mut k);
                    }
                    k
                }
                Key::Rowid(_) => encode_key(&pk),
            };
            if self.store.get(t.tree, &key)?.is_some() {
                let old = self.load_row(&t, &key)?;
                if row.as_ref().is_some_and(|r| same_row(r, &old)) {
                    continue;
                }
                self.delete_row(&t, &key, &old)?;
            }
            if let Some(row) = row {
                puts.push((t, pk, key, row));
            }
        }
        let mut refused = Vec::new();
        let cache = Cache::default();
        for (t, pk, key, mut row) in puts {
            if let Err(e) = self.check_row(&t, &mut row, &[], &cache) {
                refused.push((t, pk, e));
                continue;
            }
            if let Some((ix, _)) = self.find_conflict(&t, &key, &row, &[])? {
                let e = Self::unique_error(&t, ix);
                refused.push((t, pk, e));
                continue;
            }
            self.put_row(&t, &key, &row)?;
        }
        Ok(refused)
    }

    fn load_row(&self, t: &Table, pk: &[u8]) -> Result<Vec<Value>> {
        let v = self
            .store
            .get(t.tree, pk)?
            .ok_or_else(|| Error::Storage(cairn_store::Error::Corrupt("row vanished".into())))?;
        let rec = Record::new(&v)?;
        (0..t.columns.len()).map(|c| Ok(rec.get(c)?)).collect()
    }

    /// Finds the first constraint `row` would violate at `pk`: (constraint, conflicting pk).
    fn find_conflict(
        &self,
        t: &Table,
        pk: &[u8],
        row: &[Value],
        own: &[&[u8]],
    ) -> Result<Option<(Option<usize>, Vec<u8>)>> {
        if !own.contains(&pk) && self.store.get(t.tree, pk)?.is_some() {
            return Ok(Some((None, pk.to_vec())));
        }
        for i in 0..t.indexes.len() {
            if let Some(other) = self.unique_conflict(t, i, row, own)? {
                return Ok(Some((Some(i), other)));
            }
        }
        Ok(None)
    }

    pub fn insert(&mut self, p: &InsertPlan, checks: &[PExpr]) -> Result<WriteResult> {
        if checks.is_empty() {
            if let Some(res) = self.insert_copy(p)? {
                return Ok(res);
            }
        }
        let t = &p.table;
        let cache = Cache::default();
        // VALUES rows without a subquery read nothing stored: each is evaluated as it is
        // inserted (as SQLite does), into buffers reused from row to row.
        let streamed = match &p.rows {
            InsertRows::Values(rows)
                if !rows.iter().flatten().any(|e| {
                    // The common values first, without a walk.
                    !matches!(e, PExpr::Param(_) | PExpr::Lit(_)) && crate::planner::has_subquery(e)
                }) =>
            {
                Some(rows)
            }
            _ => None,
        };
        // Other input rows first: a SELECT must not see this statement's own inserts.
        let inputs: Vec<Vec<Value>> = {
            let cx = self.cx(&cache);
            match &p.rows {
                _ if streamed.is_some() => Vec::new(),
                InsertRows::Values(rows) => {
                    let mut out = Vec::with_capacity(rows.len());
                    for r in rows {
                        let mut vals = Vec::with_capacity(r.len());
                        for e in r {
                            vals.push(eval_owned(e, &[], &cx)?);
                        }
                        out.push(vals);
                    }
                    out
                }
                InsertRows::Query(q) => collect_rows(q, &cx)?,
            }
        };
        // The planner gives each input value to one column (a column listed twice is an
        // error), so values move from the input row instead of being copied; checked here
        // rather than assumed, as a copy is only slower.
        let movable = inputs_distinct(&p.columns);
        // Input value i goes to column i, for every column: the input row is the row.
        let identity = p
            .columns
            .iter()
            .enumerate()
            .all(|(c, src)| matches!(src, ColSource::Input(i) if *i == c));
        // The key, the record and the values of each row, in buffers reused from row to row
        // and kept from statement to statement.
        let (mut pk, mut rec, mut row) = self.bufs.take();
        let count = streamed.map_or(inputs.len(), |rows| rows.len());
        let mut inputs = inputs.into_iter();
        row.reserve(t.columns.len());
        let mut input = Vec::new();
        let r = self.insert_rows(
            p,
            checks,
            streamed,
            &mut inputs,
            count,
            identity,
            movable,
            &cache,
            &mut pk,
            &mut rec,
            &mut row,
            &mut input,
        );
        self.bufs.keep(pk, rec, row);
        r
    }

    /// `insert`'s loop over its rows.
    #[allow(clippy::too_many_arguments)]
    fn insert_rows(
        &mut self,
        p: &InsertPlan,
        checks: &[PExpr],
        streamed: Option<&Vec<Vec<PExpr>>>,
        inputs: &mut std::vec::IntoIter<Vec<Value>>,
        count: usize,
        identity: bool,
        movable: bool,
        cache: &Cache,
        pk: &mut Vec<u8>,
        rec: &mut Vec<u8>,
        row: &mut Vec<Value>,
        input: &mut Vec<Value>,
    ) -> Result<WriteResult> {
        let t = &p.table;
        let mut res = WriteResult::default();
        let mut next_rowid = None;
        for n in 0..count {
            row.clear();
            let whole = |len: usize| identity && len == p.columns.len();
            let direct = match streamed {
                Some(rows) => {
                    let direct = whole(rows[n].len());
                    let into = if direct { &mut *row } else { &mut *input };
                    into.clear();
                    let cx = self.cx(cache);
                    for e in &rows[n] {
                        into.push(eval_owned(e, &[], &cx)?);
                    }
                    direct
                }
                None => {
                    *input = inputs.next().expect("invariant: one input per row");
                    let direct = whole(input.len());
                    if direct {
                        std::mem::swap(row, input);
                    }
                    direct
                }
            };
            if !direct {
                let cx = self.cx(cache);
                for src in &p.columns {
                    row.push(match src {
                        ColSource::Input(i) if movable => {
                            std::mem::replace(&mut input[*i], Value::Null)
                        }
                        ColSource::Input(i) => input[*i].clone(),
                        ColSource::Default(Some(e)) => eval(e, &[], &cx)?.into_owned(),
                        ColSource::Default(None) => Value::Null,
                    });
                }
            }
            if let Key::Rowid(Some(c)) = t.key {
                let v = std::mem::replace(&mut row[c], Value::Null);
                row[c] = rowid_value(v, t, c)?;
            }
            // The row id first (a CHECK may read it), the primary key of other tables after
            // coercion (which may change the key columns' values).
            // A row that is not inserted takes no row id: the next one gets the same, as in
            // SQLite, which takes one past the largest in the table.
            let rowid_before = next_rowid;
            let mut pk_rowid = None;
            if let Key::Rowid(_) = t.key {
                pk_rowid = Some(self.pk_of(t, row, &mut next_rowid, pk)?);
            }
            match self.check_row(t, row, checks, cache) {
                Ok(()) => {}
                Err(Error::ConstraintNotNull(_) | Error::ConstraintCheck(_))
                    if p.or == Conflict::Ignore =>
                {
                    next_rowid = rowid_before;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let rowid = match pk_rowid {
                Some(x) => x,
                None => self.pk_of(t, row, &mut next_rowid, pk)?,
            };
            if !self.insert_tail(p, checks, row, pk, rowid, cache, &mut res, rec)? {
                next_rowid = rowid_before;
            }
        }
        Ok(res)
    }

    /// `INSERT INTO t SELECT * FROM s` where s's rows are already t's: the same column types
    /// and key, every NOT NULL of t also one of s, and t empty, without indexes, checks or a
    /// capture to feed. Each stored record is then what decoding and re-encoding it would give,
    /// so it is copied as bytes with its key (as SQLite's transfer optimization does). None
    /// when any of that does not hold, or a record is short of columns (written before an
    /// `ADD COLUMN`), and the general path runs instead.
    fn insert_copy(&mut self, p: &InsertPlan) -> Result<Option<WriteResult>> {
        let t = &p.table;
        let InsertRows::Query(q) = &p.rows else {
            return Ok(None);
        };
        let Body::Core(c) = &q.body else {
            return Ok(None);
        };
        let n = t.columns.len();
        let plain = p.upsert.is_none()
            && p.returning.is_empty()
            && t.indexes.is_empty()
            && (t.replicated.is_none() || self.capture.is_none())
            && !matches!(t.key, Key::Rowid(None))
            && q.order.is_empty()
            && q.limit.is_none()
            && q.offset.is_none()
            && q.width == n
            && c.levels.len() == 1
            && c.const_filters.is_empty()
            && c.agg.is_none()
            && !c.distinct
            && c.project.len() == n
            && c.project
                .iter()
                .enumerate()
                .all(|(i, e)| *e == PExpr::Col(i))
            && p.columns.len() == n
            && p.columns
                .iter()
                .enumerate()
                .all(|(i, s)| *s == ColSource::Input(i));
        if !plain {
            return Ok(None);
        }
        let lvl = &c.levels[0];
        let Source::Table(s) = &lvl.source else {
            return Ok(None);
        };
        let same_rows = lvl.base == 0
            && matches!(lvl.access, Access::Scan { .. })
            && lvl.filters.is_empty()
            && lvl.after.is_empty()
            && s.tree != t.tree
            && s.key == t.key
            && s.columns.len() == n
            && s.columns
                .iter()
                .zip(&t.columns)
                .all(|(a, b)| a.ty == b.ty && (a.not_null || !b.not_null));
        if !same_rows || self.store.last_key(t.tree)?.is_some() {
            return Ok(None);
        }
        // Gathered before the first write: the scan borrows the store. The bytes go into
        // blocks of `GATHER_BLOCK`, each row whole in one: a single buffer doubling as it grew
        // copied the rows gathered so far at every doubling. `rows` holds each row's block,
        // start, key end and end.
        const GATHER_BLOCK: usize = 64 * 1024;
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut rows: Vec<(u32, u32, u32, u32)> = Vec::new();
        let whole = {
            let all = (Bound::Unbounded, Bound::Unbounded);
            // The first varint of a record is its column count; the copy checks no more of
            // it than that, as the bytes stored are the bytes copied.
            self.store
                .scan_each(s.tree, all.0, all.1, false, &mut |k, v| {
                    let mut pos = 0;
                    if get_varint(v, &mut pos)? != n as u64 {
                        return Ok(false);
                    }
                    let len = k.len() + v.len();
                    let block = match blocks.last_mut() {
                        Some(b) if b.capacity() - b.len() >= len => b,
                        _ => {
                            blocks.push(Vec::with_capacity(GATHER_BLOCK.max(len)));
                            blocks.last_mut().expect("invariant: just pushed")
                        }
                    };
                    let start = block.len();
                    block.extend_from_slice(k);
                    block.extend_from_slice(v);
                    // A block is at most one row past 64 KiB, and a row at most a record's length.
                    rows.push((
                        (blocks.len() - 1) as u32,
                        start as u32,
                        (start + k.len()) as u32,
                        (start + len) as u32,
                    ));
                    Ok(true)
                })?
        };
        if !whole {
            return Ok(None);
        }
        let mut res = WriteResult::default();
        // The source's keys come strictly ascending from its scan, and the table is empty:
        // the store can build the tree bottom-up (it refuses keys out of order).
        let mut pairs = rows.iter().map(|&(b, s, m, e)| {
            let block = &blocks[b as usize];
            (
                &block[s as usize..m as usize],
                &block[m as usize..e as usize],
            )
        });
        self.store.load_rows(t.tree, &mut pairs)?;
        res.changes = rows.len() as u64;
        // The keys come in order: the last one copied is the last row id inserted.
        if let (Key::Rowid(_), Some(&(b, s, m, _))) = (&t.key, rows.last()) {
            let key = &blocks[b as usize][s as usize..m as usize];
            if let Value::Integer(id) = decode_key_value(key, false)?.0 {
                res.last_rowid = Some(id);
            }
        }
        Ok(Some(res))
    }

    /// Stores one row an INSERT made (key `pk`, its record encoded into `rec`), settling
    /// conflicts as the statement says. Whether the row went in (false when it was ignored or
    /// an upsert updated the existing row instead).
    #[allow(clippy::too_many_arguments)]
    fn insert_tail(
        &mut self,
        p: &InsertPlan,
        checks: &[PExpr],
        row: &mut Vec<Value>,
        pk: &[u8],
        rowid: Option<i64>,
        cache: &Cache,
        res: &mut WriteResult,
        rec: &mut Vec<u8>,
    ) -> Result<bool> {
        let t = &p.table;
        rec.clear();
        encode_record_into(rec, row);
        // The common case in one descent of the table: the key is free, so the row goes in at
        // once, and only UNIQUE indexes are left to check. A conflict there takes the row out
        // again and leaves it to the loop below, which finds the same conflict a look-up
        // first would have found.
        let fresh = if p.upsert.is_none() {
            self.store.put_new(t.tree, pk, rec)?
        } else {
            match self.put_upserting(p, checks, row, pk, rec, cache, res)? {
                Some(fresh) => fresh,
                None => return Ok(false),
            }
        };
        let mut stored = fresh;
        if stored && self.unique_conflicts(t, row)? {
            self.store.delete(t.tree, pk)?;
            stored = false;
        }
        // A key that was there is the first conflict (`find_conflict` checks the key first),
        // known without looking again.
        let mut known = (!fresh).then(|| (None, pk.to_vec()));
        while let Some((constraint, other)) = if stored {
            None
        } else if let Some(k) = known.take() {
            Some(k)
        } else {
            self.find_conflict(t, pk, row, &[])?
        } {
            if let Some(u) = &p.upsert {
                let applies = match u.target {
                    None => true,
                    Some(c) => c == constraint,
                };
                if applies {
                    let Some((sets, w)) = &u.set else {
                        return Ok(false);
                    };
                    if checks.is_empty() && p.returning.is_empty() {
                        if let Some(changed) = self.upsert_in_place(
                            t,
                            Upsert::At(&other),
                            row,
                            sets,
                            w.as_ref(),
                            cache,
                        )? {
                            res.changes += u64::from(changed.unwrap_or(false));
                            return Ok(false);
                        }
                    }
                    let old = self.load_row(t, &other)?;
                    let mut frame = old.clone();
                    frame.extend(row.iter().cloned());
                    let mut new = old.clone();
                    {
                        let cx = self.cx(cache);
                        if let Some(w) = w {
                            if eval_bool(w, &frame, &cx)? != Some(true) {
                                return Ok(false);
                            }
                        }
                        for (c, e) in sets {
                            new[*c] = eval(e, &frame, &cx)?.into_owned();
                        }
                    }
                    let mut rec = Vec::new();
                    if self.update_row(
                        t,
                        &other,
                        &old,
                        &mut new,
                        Conflict::Abort,
                        checks,
                        cache,
                        &mut rec,
                    )? {
                        res.changes += 1;
                        self.returning(&p.returning, &new, cache, res)?;
                    }
                    return Ok(false);
                }
            }
            match p.or {
                Conflict::Ignore => return Ok(false),
                Conflict::Replace => {
                    let old = self.load_row(t, &other)?;
                    self.delete_row(t, &other, &old)?;
                }
                Conflict::Abort => return Err(Self::unique_error(t, constraint)),
            }
        }
        if !stored {
            self.store.put(t.tree, pk, rec)?;
        }
        self.put_index_entries(t, pk, row)?;
        let returning = !p.returning.is_empty();
        self.capture_set(t, None, row);
        res.changes += 1;
        if rowid.is_some() {
            res.last_rowid = rowid;
        }
        if returning {
            self.returning(&p.returning, row, cache, res)?;
        }
        Ok(true)
    }

    /// `put_new` for an upsert: its DO UPDATE of the row holding the key, when it can be made
    /// where that row is stored, goes into the same descent (the insert that finds the key
    /// rewrites it). Some(whether the row was put); None when the existing row was handled
    /// instead (updated or not, counted in `res`). Kept out of line: a plain INSERT's loop
    /// does not carry it.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn put_upserting(
        &mut self,
        p: &InsertPlan,
        checks: &[PExpr],
        row: &mut Vec<Value>,
        pk: &[u8],
        rec: &[u8],
        cache: &Cache,
        res: &mut WriteResult,
    ) -> Result<Option<bool>> {
        let t = &p.table;
        let mut direct = None;
        if let Some(u) = &p.upsert {
            if let (None | Some(None), Some((sets, w))) = (u.target, &u.set) {
                if checks.is_empty() && p.returning.is_empty() {
                    direct = self.upsert_in_place(
                        t,
                        Upsert::Put(pk, rec),
                        row,
                        sets,
                        w.as_ref(),
                        cache,
                    )?;
                }
            }
        }
        match direct {
            Some(Some(changed)) => {
                res.changes += u64::from(changed);
                Ok(None)
            }
            Some(None) => Ok(Some(true)),
            None => Ok(Some(self.store.put_new(t.tree, pk, rec)?)),
        }
    }

    /// DO UPDATE of the row at `other` where it is stored, as `update_in_place` rewrites a
    /// row, when the same holds: no key or indexed column is set, nothing reads the whole row
    /// (CHECK, RETURNING, replication; the caller checks the first two) and no expression has
    /// a subquery. The frame is the existing row (only the columns the expressions read) and
    /// then the excluded `row`, moved there when the row is updated (the caller is done with
    /// it). With `Upsert::Put` the new row is put if its key is free, and the row holding the
    /// key is updated otherwise, in one descent. Some(None) when the new row was put,
    /// Some(Some(whether the row was updated)) when it was not; None when this does not apply,
    /// with nothing written and `row` untouched.
    fn upsert_in_place(
        &mut self,
        t: &Table,
        other: Upsert,
        row: &mut Vec<Value>,
        sets: &[(usize, PExpr)],
        w: Option<&PExpr>,
        cache: &Cache,
    ) -> Result<Option<Option<bool>>> {
        let key = key_columns(t);
        let settable = t.replicated.is_none()
            && sets.iter().all(|(c, _)| {
                !key.contains(c) && !t.indexes.iter().any(|ix| ix.columns.contains(c))
            });
        if !settable {
            return Ok(None);
        }
        // The frame, the columns read and the new values in buffers kept across statements.
        let mut bufs = std::mem::take(&mut self.bufs.upsert);
        let r = self.upsert_with(t, other, row, sets, w, cache, &mut bufs);
        bufs.0.clear();
        bufs.1.clear();
        bufs.2.clear();
        self.bufs.upsert = bufs;
        r
    }

    /// `upsert_in_place` with its buffers: the frame, the columns read, the new values.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn upsert_with(
        &mut self,
        t: &Table,
        other: Upsert,
        row: &mut Vec<Value>,
        sets: &[(usize, PExpr)],
        w: Option<&PExpr>,
        cache: &Cache,
        (frame, reads, vals, layout): &mut (Vec<Value>, Vec<usize>, Vec<Value>, Layout),
    ) -> Result<Option<Option<bool>>> {
        let width = t.columns.len();
        let mut subquery = false;
        for e in sets.iter().map(|(_, e)| e).chain(w) {
            crate::planner::walk(e, &mut |x| match x {
                PExpr::InSub(..) | PExpr::Exists(..) | PExpr::Scalar(_) => subquery = true,
                PExpr::Col(c) if *c < width => reads.push(*c),
                _ => {}
            });
        }
        if subquery {
            return Ok(None);
        }
        cairn_store::sort::sort(reads);
        reads.dedup();
        let none = crate::storage::NoStore;
        let cx = Cx {
            store: &none,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache,
        };
        // Where each column's new value is in `vals`: the last SET of it wins.
        let value_of = |c: usize| sets.iter().rposition(|(s, _)| *s == c);
        vals.reserve(sets.len());
        let mut updated = false;
        let mut f = |_: &[u8], v: &[u8], out: &mut Vec<u8>| -> Result<Each> {
            // Built here, where the row is known to be updated: an insert keeps `row`.
            frame.reserve(width + row.len());
            null_frame(frame, width);
            frame.append(row);
            let rec = layout.read_all(v)?;
            for &c in &*reads {
                rec.get_into(c, &mut frame[c])?;
            }
            if let Some(w) = w {
                if eval_bool(w, frame, &cx)? != Some(true) {
                    return Ok(Each::Keep);
                }
            }
            for (_, e) in sets {
                vals.push(eval_owned(e, frame, &cx)?);
            }
            // In column order, as a whole row is checked.
            for c in 0..width {
                if let Some(j) = value_of(c) {
                    Self::check_column(t, c, &mut vals[j])?;
                }
            }
            rec.rewrite_into(v, width, |c| value_of(c).map(|j| &vals[j]), out)?;
            updated = true;
            Ok(if out.as_slice() == v {
                Each::Keep
            } else {
                Each::Write
            })
        };
        match other {
            Upsert::At(other) => {
                let k = Bound::Included(other);
                self.store.update_each(t.tree, k, k, &mut f)?;
            }
            Upsert::Put(pk, rec) => {
                if self
                    .store
                    .put_new_or_rewrite(t.tree, pk, rec, &mut f)?
                    .is_none()
                {
                    return Ok(Some(None));
                }
            }
        }
        Ok(Some(Some(updated)))
    }

    fn returning(
        &self,
        exprs: &[PExpr],
        row: &[Value],
        cache: &Cache,
        res: &mut WriteResult,
    ) -> Result<()> {
        if exprs.is_empty() {
            return Ok(());
        }
        let cx = self.cx(cache);
        res.returned.push(eval_row(exprs, row, &cx)?);
        Ok(())
    }

    /// Replaces the row at `old_pk` (`old`, or empty when neither an index nor the capture
    /// reads it) with `new`, checked and coerced in place; false when OR IGNORE skipped it.
    /// `rec` is a buffer for the new record, reused from row to row.
    #[allow(clippy::too_many_arguments)]
    fn update_row(
        &mut self,
        t: &Table,
        old_pk: &[u8],
        old: &[Value],
        new: &mut [Value],
        or: Conflict,
        checks: &[PExpr],
        cache: &Cache,
        rec: &mut Vec<u8>,
    ) -> Result<bool> {
        if let Key::Rowid(Some(c)) = t.key {
            if new[c].is_null() {
                return Err(Error::Type(format!(
                    "{}.{} (the row id) cannot be NULL",
                    t.name, t.columns[c].name
                )));
            }
        }
        match self.check_row(t, new, checks, cache) {
            Ok(()) => {}
            Err(Error::ConstraintNotNull(_) | Error::ConstraintCheck(_))
                if or == Conflict::Ignore =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        }
        let new_pk: std::borrow::Cow<[u8]> = match &t.key {
            Key::Rowid(None) => old_pk.into(),
            Key::Rowid(Some(c)) => encode_key(std::slice::from_ref(&new[*c])).into(),
            Key::Columns(cols) => {
                let mut k = Vec::new();
                for &c in cols {
                    push_norm(&new[c], &mut k);
                }
                k.into()
            }
        };
        while let Some((constraint, other)) = self.find_conflict(t, &new_pk, new, &[old_pk])? {
            match or {
                Conflict::Ignore => return Ok(false),
                Conflict::Replace => {
                    let o = self.load_row(t, &other)?;
                    self.delete_row(t, &other, &o)?;
                }
                Conflict::Abort => return Err(Self::unique_error(t, constraint)),
            }
        }
        if *new_pk != *old_pk {
            self.delete_row(t, old_pk, old)?;
            self.put_row(t, &new_pk, new)?;
        } else {
            self.capture_set(t, Some(old), new);
            rec.clear();
            encode_record_into(rec, new);
            self.store.put(t.tree, &new_pk, rec)?;
            for i in 0..t.indexes.len() {
                let changed = t.indexes[i]
                    .columns
                    .iter()
                    .any(|&c| !same_value(&old[c], &new[c]));
                if changed {
                    self.store
                        .delete(t.indexes[i].tree, &Self::index_key(t, i, old, old_pk))?;
                    self.store
                        .put(t.indexes[i].tree, &Self::index_key(t, i, new, &new_pk), &[])?;
                }
            }
        }
        Ok(true)
    }

    /// The rows a write changes: their primary keys, and the rows themselves when `rows`.
    fn targets(&self, p: &WritePlan, rows: bool, cache: &Cache) -> Result<Targets> {
        let cx = self.cx(cache);
        let width = p.table.columns.len();
        let mut out = Targets {
            keys: Vec::new(),
            ends: Vec::new(),
            rows: Vec::new(),
            width: if rows { width } else { 0 },
        };
        let mut frame = nulls(p.scan.frame_len);
        run_levels(&p.scan, 0, &mut frame, &cx, &mut |frame| {
            let Value::Blob(pk) = &frame[width] else {
                return Err(Error::Invalid("invariant: key slot holds the key".into()));
            };
            out.keys.extend_from_slice(pk);
            out.ends.push(out.keys.len());
            if rows {
                out.rows.extend_from_slice(&frame[..width]);
            }
            Ok(true)
        })?;
        Ok(out)
    }

    pub fn update(&mut self, p: &WritePlan, checks: &[PExpr]) -> Result<WriteResult> {
        if p.keys_only && checks.is_empty() {
            return self.update_in_place(p);
        }
        let cache = Cache::default();
        let mut targets = self.targets(p, true, &cache)?;
        let mut res = WriteResult::default();
        let t = &p.table;
        // The old row is read only to take index entries out and by the capture; without
        // either, the new row is the old one changed in place, not a copy of it.
        let keep_old = !t.indexes.is_empty() || (t.replicated.is_some() && self.capture.is_some());
        let mut vals = Vec::with_capacity(p.set.len());
        let (mut new, mut rec) = (Vec::with_capacity(targets.width), Vec::new());
        for i in 0..targets.len() {
            let (pk, old) = targets.get_mut(i);
            // An earlier row's REPLACE may have deleted this one.
            if p.or == Conflict::Replace && self.store.get(p.table.tree, pk)?.is_none() {
                continue;
            }
            // Every SET expression reads the old row, so all are evaluated before any is stored.
            vals.clear();
            {
                let cx = self.cx(&cache);
                for (_, e) in &p.set {
                    vals.push(eval(e, old, &cx)?.into_owned());
                }
            }
            new.clear();
            let old: &[Value] = if keep_old {
                new.extend_from_slice(old);
                old
            } else {
                new.extend(old.iter_mut().map(|v| std::mem::replace(v, Value::Null)));
                &[]
            };
            for ((c, _), v) in p.set.iter().zip(vals.drain(..)) {
                new[*c] = v;
            }
            if self.update_row(t, pk, old, &mut new, p.or, checks, &cache, &mut rec)? {
                res.changes += 1;
                self.returning(&p.returning, &new, &cache, &mut res)?;
            }
        }
        Ok(res)
    }

    pub fn delete(&mut self, p: &WritePlan) -> Result<WriteResult> {
        let cache = Cache::default();
        let t = &p.table;
        // The deleted row is read for RETURNING, to find its index entries, and by the
        // capture; with none of them, its key is all a delete needs.
        let rows = !p.returning.is_empty()
            || !t.indexes.is_empty()
            || (t.replicated.is_some() && self.capture.is_some());
        if p.keys_only && !rows {
            let mut bufs = std::mem::take(&mut self.bufs.point);
            let keys = self.point_targets(p, &mut bufs.frame, &mut bufs.key, &cache);
            let done = match keys {
                Ok(Some(keys)) => {
                    let mut res = WriteResult::default();
                    let mut r = Ok(());
                    for k in keys.as_slice() {
                        match self.store.delete(t.tree, k) {
                            Ok(gone) => res.changes += u64::from(gone),
                            Err(e) => {
                                r = Err(e);
                                break;
                            }
                        }
                    }
                    bufs.give_back(keys);
                    Some(r.map(|()| res))
                }
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            };
            bufs.clear();
            self.bufs.point = bufs;
            if let Some(r) = done {
                return r;
            }
            if let Some(range) = self.scan_range(p, &cache)? {
                return self.delete_range(p, range, &cache);
            }
        }
        let mut targets = self.targets(p, rows, &cache)?;
        let mut res = WriteResult::default();
        for i in 0..targets.len() {
            let (pk, old) = targets.get_mut(i);
            self.returning(&p.returning, old, &cache, &mut res)?;
            self.delete_row(&p.table, pk, old)?;
            res.changes += 1;
        }
        Ok(res)
    }

    /// The primary keys a write names outright (`WHERE id = ?`, `WHERE id IN (...)`, with no
    /// other condition), for a write that needs only keys: it goes to each key directly, and
    /// a key without a row is skipped there, instead of a look-up first. None for any other
    /// scan.
    /// `frame` is scratch for evaluating the keys (the caller's row frame, reused); a single
    /// key is made in `key`'s buffer (the caller gets it back with `PointBufs::give_back`).
    fn point_targets(
        &self,
        p: &WritePlan,
        frame: &mut Vec<Value>,
        key: &mut Vec<u8>,
        cache: &Cache,
    ) -> Result<Option<PointKeys>> {
        let c = &p.scan;
        let [lvl] = c.levels.as_slice() else {
            return Ok(None);
        };
        let Access::Index {
            index: None,
            probes,
            lower: None,
            upper: None,
            reverse,
            sub_probe: None,
            ..
        } = &lvl.access
        else {
            return Ok(None);
        };
        if !lvl.filters.is_empty() || !lvl.after.is_empty() || !c.const_filters.is_empty() {
            return Ok(None);
        }
        null_frame(frame, c.frame_len);
        if let [probe] = probes.as_slice() {
            if point_width(&p.table) == Some(probe.len()) {
                let mut k = std::mem::take(key);
                k.clear();
                let named = point_key_into(probe, frame, &self.cx(cache), &mut k)?;
                return Ok(named.map(|named| match named {
                    true => PointKeys::One(k),
                    false => PointKeys::Many(Vec::new()),
                }));
            }
        }
        let keys = point_keys(&p.table, probes, frame, &self.cx(cache))?;
        Ok(keys.map(|mut k| {
            if *reverse {
                k.reverse();
            }
            PointKeys::Many(k)
        }))
    }

    /// The one range of primary keys a write's scan walks (the whole table, or a range of
    /// keys: `WHERE id BETWEEN ? AND ?`), when its filters can be tested on each row without
    /// reading the store (no subquery); `Some(None)` when no key can match. None for any
    /// other scan.
    fn scan_range(&self, p: &WritePlan, cache: &Cache) -> Result<Option<Option<Range>>> {
        let c = &p.scan;
        let [lvl] = c.levels.as_slice() else {
            return Ok(None);
        };
        if !lvl.after.is_empty() || !c.const_filters.is_empty() {
            return Ok(None);
        }
        if lvl.filters.iter().any(crate::planner::has_subquery) {
            return Ok(None);
        }
        match &lvl.access {
            Access::Scan { .. } => Ok(Some(Some((Bound::Unbounded, Bound::Unbounded)))),
            Access::Index {
                index: None,
                probes,
                lower,
                upper,
                sub_probe: None,
                ..
            } => {
                let frame = nulls(c.frame_len);
                let mut ranges = index_ranges(probes, lower, upper, &frame, &self.cx(cache))?;
                if ranges.len() > 1 {
                    return Ok(None);
                }
                Ok(Some(ranges.pop()))
            }
            _ => Ok(None),
        }
    }

    /// DELETE of a `keys_only` plan over one range of keys (`scan_range`), in one walk
    /// ([`Storage::update_each`]): each row's filters are tested where it is stored, and the
    /// row removed there, instead of a scan that collects keys and a removal per key. As for
    /// `update_in_place`, the filters have no subquery, so they get an empty store.
    fn delete_range(
        &mut self,
        p: &WritePlan,
        range: Option<Range>,
        cache: &Cache,
    ) -> Result<WriteResult> {
        let mut res = WriteResult::default();
        let Some((lo, hi)) = range else {
            return Ok(res);
        };
        let lvl = &p.scan.levels[0];
        let none = crate::storage::NoStore;
        let cx = Cx {
            store: &none,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache,
        };
        let mut frame = nulls(p.scan.frame_len);
        let mut rf = RowFilter::new(lvl, &frame, &cx);
        let mut f = |k: &[u8], v: &[u8], _: &mut Vec<u8>| -> Result<Each> {
            if !lvl.filters.is_empty() && !row_passes(lvl, &mut rf, (k, v), &mut frame, &cx)? {
                return Ok(Each::Keep);
            }
            Ok(Each::Remove)
        };
        res.changes =
            self.store
                .update_each(p.table.tree, bound_ref(&lo), bound_ref(&hi), &mut f)?;
        Ok(res)
    }

    /// UPDATE of a `keys_only` plan, each row rewritten where it is stored
    /// ([`Storage::update_each`]): its new record is made from the old one in the leaf, only
    /// the columns the SET expressions read are decoded, and `Fields::rewrite_into` copies the
    /// other columns' bytes (the whole record, with the new values written over the old ones,
    /// when they are as long). No index entry changes (no indexed column is set) and no key
    /// changes, so no constraint but a column's type and NOT NULL can fail. The rows are
    /// the keys a `WHERE id = ?` names, or one range of keys walked in one pass (the whole
    /// table, `WHERE id BETWEEN ? AND ?`) with the filters tested on each row there, or else
    /// the keys the scan collects. The expressions cannot read the store while it is being
    /// written, and need not: neither the SET expressions (`keys_only`) nor the filters tested
    /// in the walk (`scan_range`) have a subquery, so they get an empty store.
    fn update_in_place(&mut self, p: &WritePlan) -> Result<WriteResult> {
        let mut bufs = std::mem::take(&mut self.bufs.point);
        let r = self.update_in_place_with(p, &mut bufs);
        bufs.clear();
        self.bufs.point = bufs;
        r
    }

    /// `update_in_place` with its buffers.
    fn update_in_place_with(&mut self, p: &WritePlan, bufs: &mut PointBufs) -> Result<WriteResult> {
        enum Rows {
            /// Keys named outright.
            Points(PointKeys),
            /// Keys a scan collected, end to end, and where each ends.
            Keys(Vec<u8>, Vec<usize>),
            Range(Option<Range>),
        }
        let cache = Cache::default();
        let PointBufs {
            frame,
            key,
            value_of,
            vals,
            layout,
        } = bufs;
        let rows = match self.point_targets(p, frame, key, &cache)? {
            Some(keys) => Rows::Points(keys),
            None => match self.scan_range(p, &cache)? {
                Some(range) => Rows::Range(range),
                None => {
                    let targets = self.targets(p, false, &cache)?;
                    Rows::Keys(targets.keys, targets.ends)
                }
            },
        };
        let t = &p.table;
        let lvl = &p.scan.levels[0];
        let width = t.columns.len();
        // Where each column's new value is in `vals`: the last SET of it wins, as in SQLite.
        value_of.clear();
        value_of.resize(width, None);
        for (j, (c, _)) in p.set.iter().enumerate() {
            value_of[*c] = Some(j);
        }
        // Keys named outright or collected by a scan have passed the filters already.
        let filtered = matches!(rows, Rows::Range(_)) && !lvl.filters.is_empty();
        // A replicated table's capture reads the old values of the columns set, the key and
        // the scope column, which the planner adds to `set_reads`. It keeps a table with
        // counters, or an UPDATE of the scope column, off this path.
        let mut cap = match (&t.replicated, self.capture.as_deref_mut()) {
            (Some(_), Some(cap)) => Some(cap),
            _ => None,
        };
        let none = crate::storage::NoStore;
        let cx = Cx {
            store: &none,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache: &cache,
        };
        // Keys named outright left the frame as this needs it.
        if frame.len() != p.scan.frame_len {
            null_frame(frame, p.scan.frame_len);
        }
        let mut rf = filtered.then(|| RowFilter::new(lvl, frame, &cx));
        let mut changes = 0;
        let mut f = |k: &[u8], v: &[u8], out: &mut Vec<u8>| -> Result<Each> {
            if let Some(rf) = &mut rf {
                if !row_passes(lvl, rf, (k, v), frame, &cx)? {
                    return Ok(Each::Keep);
                }
            }
            let row = layout.read_all(v)?;
            for &c in &p.set_reads {
                row.get_into(c, &mut frame[c])?;
            }
            vals.clear();
            for (_, e) in &p.set {
                vals.push(eval(e, frame, &cx)?.into_owned());
            }
            // In column order, as a whole row is checked.
            for (c, j) in value_of.iter().enumerate() {
                let Some(j) = *j else { continue };
                match Self::check_column(t, c, &mut vals[j]) {
                    Ok(()) => {}
                    Err(Error::ConstraintNotNull(_)) if p.or == Conflict::Ignore => {
                        return Ok(Each::Keep)
                    }
                    Err(e) => return Err(e),
                }
            }
            row.rewrite_into(v, width, |c| value_of[c].map(|j| &vals[j]), out)?;
            if let Some(cap) = &mut cap {
                cap.push_in_place(t, &frame[..width], |c| value_of[c].map(|j| &vals[j]));
            }
            changes += 1;
            // A row set to what it holds counts as changed (as in SQLite) but is not written.
            Ok(if out.as_slice() == v {
                Each::Keep
            } else {
                Each::Write
            })
        };
        match rows {
            Rows::Range(None) => {}
            Rows::Range(Some((lo, hi))) => {
                self.store
                    .update_each(t.tree, bound_ref(&lo), bound_ref(&hi), &mut f)?;
            }
            Rows::Points(keys) => {
                let mut r = Ok(0);
                for k in keys.as_slice() {
                    let k = Bound::Included(k.as_slice());
                    r = self.store.update_each(t.tree, k, k, &mut f);
                    if r.is_err() {
                        break;
                    }
                }
                if let PointKeys::One(k) = keys {
                    *key = k;
                }
                r?;
            }
            Rows::Keys(keys, ends) => {
                let mut start = 0;
                for end in ends {
                    let k = Bound::Included(&keys[start..end]);
                    start = end;
                    self.store.update_each(t.tree, k, k, &mut f)?;
                }
            }
        }
        Ok(WriteResult {
            changes,
            ..WriteResult::default()
        })
    }
}

/// Whether no input value goes to two columns (each input index at most once, and in range),
/// with a bit set for up to 64 columns instead of a vector.
fn inputs_distinct(columns: &[ColSource]) -> bool {
    let inputs = || {
        columns.iter().filter_map(|c| match c {
            ColSource::Input(i) => Some(*i),
            ColSource::Default(_) => None,
        })
    };
    if columns.len() <= 64 {
        let mut seen = 0u64;
        return inputs().all(|i| {
            let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
            let fresh = i < columns.len() && seen & bit == 0;
            seen |= bit;
            fresh
        });
    }
    let mut used = vec![false; columns.len()];
    inputs().all(|i| used.get_mut(i).is_some_and(|u| !std::mem::replace(u, true)))
}

/// Where an upsert's DO UPDATE finds its row (`Writer::upsert_in_place`).
#[derive(Clone, Copy)]
enum Upsert<'a> {
    /// At this key, which the new row's insert found taken.
    At(&'a [u8]),
    /// At the new row's key (`pk`, with its record) if taken; else the new row is put there.
    Put(&'a [u8], &'a [u8]),
}

/// The keys a write names outright (`Writer::point_targets`): one, the common case, without a
/// list to hold it.
enum PointKeys {
    One(Vec<u8>),
    Many(Vec<Vec<u8>>),
}

impl PointBufs {
    /// Takes back the key buffer `point_targets` made a single key in.
    fn give_back(&mut self, keys: PointKeys) {
        if let PointKeys::One(k) = keys {
            self.key = k;
        }
    }
}

impl PointKeys {
    fn as_slice(&self) -> &[Vec<u8>] {
        match self {
            PointKeys::One(k) => std::slice::from_ref(k),
            PointKeys::Many(keys) => keys,
        }
    }
}

/// The rows an UPDATE or DELETE changes, gathered before the first write (a write must not
/// move the scan that finds them): keys end to end in one buffer and rows of `width` values
/// in another, instead of two allocations per row.
struct Targets {
    keys: Vec<u8>,
    /// Where each key ends in `keys`.
    ends: Vec<usize>,
    rows: Vec<Value>,
    /// Values per row (0 when the rows were not kept).
    width: usize,
}

impl Targets {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Row `i`'s key and values.
    fn get_mut(&mut self, i: usize) -> (&[u8], &mut [Value]) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let w = self.width;
        (
            &self.keys[start..self.ends[i]],
            &mut self.rows[i * w..(i + 1) * w],
        )
    }
}

/// Whether a comparison operator is an equality (used by EXPLAIN).
pub fn is_eq(op: BinOp) -> bool {
    op == BinOp::Eq
}
