//! The window step ([`WindowPlan`]): the core's rows are sorted by each call's PARTITION BY and
//! ORDER BY (calls with the same ones share the sort), each call's value is computed partition
//! by partition and appended to its rows, then the step projects.
//!
//! Frames, as SQLite computes them: both ends of the frame only move forward from one row to
//! the next, so an aggregate whose frame starts at UNBOUNDED PRECEDING only adds rows (the
//! default frame: a running total is O(n)); one whose start moves on takes rows back out
//! (count, sum, total, avg, as SQLite's inverse functions do) or keeps a monotonic queue
//! (min, max), O(n) per partition too. An EXCLUDE clause, or group_concat over a frame whose
//! start moves, recomputes the frame for each row, as SQLite does for EXCLUDE.

use crate::error::{Error, Result};
use crate::exec::aggregate::{AggState, SumState};
use crate::exec::eval::{eval, eval_bool, norm_key, Cx, KeySet};
use crate::exec::eval_row;
use crate::exec::sort::{compare_key, compare_rows, sort_rows};
use crate::parse::window::{Exclude, FrameUnit};
use crate::plan::*;
use crate::types::{self, Affinity, Arith};
use cairn_value::Value;
use std::cmp::Ordering;

/// Computes the calls over `rows` (each `w.width` values), then projects them into `sink`, in
/// the order of the first call's window.
pub(super) fn run(
    w: &WindowPlan,
    mut rows: Vec<Vec<Value>>,
    cx: &Cx,
    sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
) -> Result<bool> {
    // One sort per distinct (PARTITION BY, ORDER BY): the rows' order and where each
    // partition ends.
    let mut sorts: Vec<(usize, Sorted)> = Vec::new();
    let mut results: Vec<Vec<Value>> = Vec::with_capacity(w.calls.len());
    for (k, call) in w.calls.iter().enumerate() {
        let same = sorts.iter().position(|(j, _)| {
            let o = &w.calls[*j];
            o.partition == call.partition && o.order == call.order
        });
        let si = match same {
            Some(si) => si,
            None => {
                sorts.push((k, sort(call, &rows, cx)?));
                sorts.len() - 1
            }
        };
        let (_, Sorted { perm, ends, keys }) = &sorts[si];
        let mut out = vec![Value::Null; rows.len()];
        let mut a = 0;
        for &b in ends {
            Partition::new(call, &rows, &perm[a..b], &keys[a..b], cx).compute(&mut out)?;
            a = b;
        }
        results.push(out);
    }
    for (i, r) in rows.iter_mut().enumerate() {
        r.truncate(w.width);
        r.resize(w.width, Value::Null);
        for res in &mut results {
            r.push(std::mem::replace(&mut res[i], Value::Null));
        }
    }
    let order: Vec<usize> = match sorts.into_iter().next() {
        Some((_, s)) => s.perm,
        None => (0..rows.len()).collect(),
    };
    let mut seen = KeySet::default();
    for i in order {
        let row = eval_row(&w.project, &rows[i], cx)?;
        if w.distinct {
            let mut k = Vec::new();
            norm_key(&row, &mut k);
            if !seen.insert(k) {
                continue;
            }
        }
        if !sink(row)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Rows in a window's order: each position's row index, where each partition ends, and each
/// position's PARTITION BY then ORDER BY values (then the row index).
struct Sorted {
    perm: Vec<usize>,
    ends: Vec<usize>,
    keys: Vec<Vec<Value>>,
}

/// Sorts the rows' keys with ORDER BY's own row sort (`sort_rows`, one copy of the sort in the
/// module); the row index as the last key keeps tied rows in the order the core gave them.
fn sort(call: &WinCall, rows: &[Vec<Value>], cx: &Cx) -> Result<Sorted> {
    let np = call.partition.len();
    let width = np + call.order.len();
    let mut keys = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let mut k = Vec::with_capacity(width + 1);
        for e in call.partition.iter().chain(call.order.iter().map(|o| &o.0)) {
            k.push(eval(e, r, cx)?.into_owned());
        }
        k.push(Value::Integer(i as i64));
        keys.push(k);
    }
    let mut sk: Vec<SortKey> = (0..=width)
        .map(|col| SortKey {
            col,
            desc: false,
            nulls_first: true,
        })
        .collect();
    for (o, (_, desc, nulls_first)) in call.order.iter().enumerate() {
        sk[np + o].desc = *desc;
        sk[np + o].nulls_first = *nulls_first;
    }
    sort_rows(&mut keys, &sk);
    let perm = keys
        .iter()
        .map(|k| match k[width] {
            Value::Integer(i) => i as usize,
            _ => 0,
        })
        .collect();
    let mut ends = Vec::new();
    for j in 1..keys.len() {
        if compare_rows(&keys[j - 1], &keys[j], &sk[..np]) != Ordering::Equal {
            ends.push(j);
        }
    }
    if !keys.is_empty() {
        ends.push(keys.len());
    }
    Ok(Sorted { perm, ends, keys })
}

/// One partition of one call: its rows in window order and their peer groups.
struct Partition<'a> {
    call: &'a WinCall,
    rows: &'a [Vec<Value>],
    /// Row indices, in window order.
    p: &'a [usize],
    cx: &'a Cx<'a>,
    /// Each position's peer group, and each group's first position (plus the end).
    group: Vec<usize>,
    starts: Vec<usize>,
    /// The single ORDER BY key's value per position (RANGE with an offset).
    key: Vec<Value>,
}

impl<'a> Partition<'a> {
    fn new(
        call: &'a WinCall,
        rows: &'a [Vec<Value>],
        p: &'a [usize],
        keys: &[Vec<Value>],
        cx: &'a Cx<'a>,
    ) -> Self {
        let (np, no) = (call.partition.len(), call.order.len());
        let okeys = |j: usize| &keys[j][np..np + no];
        let mut group = Vec::with_capacity(p.len());
        let mut starts = Vec::new();
        for j in 0..p.len() {
            let peer = j > 0
                && okeys(j - 1)
                    .iter()
                    .zip(okeys(j))
                    .all(|(a, b)| a.total_cmp(b) == Ordering::Equal);
            if !peer {
                starts.push(j);
            }
            group.push(starts.len() - 1);
        }
        starts.push(p.len());
        let key = if call.order.len() == 1 && call.unit == FrameUnit::Range {
            (0..p.len()).map(|j| okeys(j)[0].clone()).collect()
        } else {
            Vec::new()
        };
        Partition {
            call,
            rows,
            p,
            cx,
            group,
            starts,
            key,
        }
    }

    fn row(&self, j: usize) -> &'a [Value] {
        &self.rows[self.p[j]]
    }

    fn arg(&self, a: usize, j: usize) -> Result<Value> {
        match self.call.args.get(a) {
            Some(e) => Ok(eval(e, self.row(j), self.cx)?.into_owned()),
            None => Ok(Value::Null),
        }
    }

    /// Writes the call's value for each of the partition's rows into `out` (by row index).
    fn compute(&self, out: &mut [Value]) -> Result<()> {
        let m = self.p.len();
        let mf = m as f64;
        let set = |out: &mut [Value], j: usize, v: Value| out[self.p[j]] = v;
        match self.call.func {
            WinFunc::RowNumber => (0..m).for_each(|j| set(out, j, Value::Integer(j as i64 + 1))),
            WinFunc::Rank => (0..m).for_each(|j| {
                set(
                    out,
                    j,
                    Value::Integer(self.starts[self.group[j]] as i64 + 1),
                )
            }),
            WinFunc::DenseRank => {
                (0..m).for_each(|j| set(out, j, Value::Integer(self.group[j] as i64 + 1)))
            }
            WinFunc::PercentRank => (0..m).for_each(|j| {
                let r = self.starts[self.group[j]] as f64;
                set(
                    out,
                    j,
                    Value::Real(if m > 1 { r / (mf - 1.0) } else { 0.0 }),
                )
            }),
            WinFunc::CumeDist => (0..m).for_each(|j| {
                set(
                    out,
                    j,
                    Value::Real(self.starts[self.group[j] + 1] as f64 / mf),
                )
            }),
            WinFunc::Ntile => {
                let n = types::to_integer(&self.arg(0, 0)?).unwrap_or(0);
                if n <= 0 {
                    return Err(Error::Invalid(
                        "argument of ntile must be a positive integer".into(),
                    ));
                }
                let (total, n) = (m as i64, n);
                let size = total / n;
                for j in 0..m {
                    let i = j as i64;
                    let v = if size == 0 {
                        i + 1
                    } else {
                        let large = total - n * size;
                        let small = large * (size + 1);
                        if i < small {
                            1 + i / (size + 1)
                        } else {
                            1 + large + (i - small) / size
                        }
                    };
                    set(out, j, Value::Integer(v));
                }
            }
            WinFunc::Lag | WinFunc::Lead => {
                for j in 0..m {
                    let off = match self.call.args.get(1) {
                        Some(_) => offset_of(&self.arg(1, j)?),
                        None => Some(1),
                    };
                    let at = off.and_then(|o| {
                        let t = if self.call.func == WinFunc::Lag {
                            (j as i64).checked_sub(o)
                        } else {
                            (j as i64).checked_add(o)
                        };
                        t.filter(|&t| t >= 0 && t < m as i64)
                    });
                    let v = match at {
                        Some(t) => self.arg(0, t as usize)?,
                        None => self.arg(2, j)?,
                    };
                    set(out, j, v);
                }
            }
            _ => self.framed(out)?,
        }
        Ok(())
    }

    /// first_value, last_value, nth_value and the aggregates: over each row's frame.
    fn framed(&self, out: &mut [Value]) -> Result<()> {
        let m = self.p.len();
        let start = self.offset(&self.call.start, "starting")?;
        let end = self.offset(&self.call.end, "ending")?;
        let mut frames = Vec::with_capacity(m);
        for j in 0..m {
            let s = self.bound(&self.call.start, start.as_ref(), j, true)?;
            let e = self.bound(&self.call.end, end.as_ref(), j, false)?.max(s);
            frames.push((s, e));
        }
        let spec = match self.call.func {
            WinFunc::Agg(f) => AggSpec {
                func: f,
                args: self.call.args.clone(),
                distinct: false,
            },
            _ => {
                for (j, &(s, e)) in frames.iter().enumerate() {
                    let segs = self.segments(j, s, e);
                    let pos = match self.call.func {
                        WinFunc::FirstValue => segs.first().map(|r| r.0),
                        WinFunc::LastValue => segs.last().map(|r| r.1 - 1),
                        _ => {
                            let n = nth(&self.arg(1, j)?)?;
                            let mut left = n - 1;
                            let mut at = None;
                            for &(a, b) in &segs {
                                if left < (b - a) as u64 {
                                    at = Some(a + left as usize);
                                    break;
                                }
                                left -= (b - a) as u64;
                            }
                            at
                        }
                    };
                    let v = match pos {
                        Some(t) => self.arg(0, t)?,
                        None => Value::Null,
                    };
                    out[self.p[j]] = v;
                }
                return Ok(());
            }
        };
        let mut counted = Vec::with_capacity(m);
        for j in 0..m {
            counted.push(match &self.call.filter {
                Some(f) => eval_bool(f, self.row(j), self.cx)? == Some(true),
                None => true,
            });
        }
        let fixed_start = matches!(self.call.start, Bound::UnboundedPreceding);
        let inverse = matches!(
            spec.func,
            AggFunc::CountStar
                | AggFunc::Count
                | AggFunc::Sum
                | AggFunc::Total
                | AggFunc::Avg
                | AggFunc::Min
                | AggFunc::Max
        );
        if self.call.exclude != Exclude::NoOthers || !(fixed_start || inverse) {
            for (j, &(s, e)) in frames.iter().enumerate() {
                let mut st = AggState::new(&spec);
                for (a, b) in self.segments(j, s, e) {
                    for (t, _) in counted.iter().enumerate().take(b).skip(a).filter(|c| *c.1) {
                        st.update(&spec, self.row(t), self.cx)?;
                    }
                }
                out[self.p[j]] = st.finish(&spec)?;
            }
            return Ok(());
        }
        // Rows leave the frame before new ones enter, in SQLite's order: a real sum's
        // rounding depends on it.
        let mut acc = Sliding::new(&spec, fixed_start);
        let (mut lo, mut hi) = (0, 0);
        for (j, &(s, e)) in frames.iter().enumerate() {
            while lo < s {
                if counted[lo] && lo < hi {
                    acc.remove(&spec, lo, self.row(lo), self.cx)?;
                }
                lo += 1;
            }
            hi = hi.max(lo);
            while hi < e {
                if counted[hi] {
                    acc.add(&spec, hi, self.row(hi), self.cx)?;
                }
                hi += 1;
            }
            out[self.p[j]] = acc.value(&spec)?;
        }
        Ok(())
    }

    /// A frame offset's value, checked as SQLite checks it.
    fn offset(&self, b: &Bound, which: &str) -> Result<Option<Value>> {
        let (Bound::Preceding(e) | Bound::Following(e)) = b else {
            return Ok(None);
        };
        let v = types::apply_affinity(eval(e, &[], self.cx)?.into_owned(), Affinity::Numeric);
        let ok = match (&v, self.call.unit) {
            (Value::Integer(i), _) => *i >= 0,
            (Value::Real(r), FrameUnit::Range) => *r >= 0.0,
            (Value::Real(r), _) => *r >= 0.0 && r.fract() == 0.0,
            _ => false,
        };
        if !ok {
            let what = if self.call.unit == FrameUnit::Range {
                "number"
            } else {
                "integer"
            };
            return Err(Error::Invalid(format!(
                "frame {which} offset must be a non-negative {what}"
            )));
        }
        Ok(Some(match v {
            Value::Real(r) if self.call.unit != FrameUnit::Range => Value::Integer(r as i64),
            v => v,
        }))
    }

    /// Where row `j`'s frame starts (`start`) or ends (exclusive).
    fn bound(&self, b: &Bound, off: Option<&Value>, j: usize, start: bool) -> Result<usize> {
        let m = self.p.len();
        let g = self.group[j];
        let (gs, ge) = (self.starts[g], self.starts[g + 1]);
        let n = |v: Option<&Value>| match v {
            Some(Value::Integer(i)) => *i as u64,
            _ => 0,
        };
        let clamp = |x: i128| x.clamp(0, m as i128) as usize;
        let preceding = matches!(b, Bound::Preceding(_));
        Ok(match b {
            Bound::UnboundedPreceding => 0,
            Bound::UnboundedFollowing => m,
            Bound::CurrentRow => match (self.call.unit, start) {
                (FrameUnit::Rows, true) => j,
                (FrameUnit::Rows, false) => j + 1,
                (_, true) => gs,
                (_, false) => ge,
            },
            Bound::Preceding(_) | Bound::Following(_) => {
                let k = n(off) as i128;
                let d = if preceding { -k } else { k };
                match self.call.unit {
                    FrameUnit::Rows => clamp(j as i128 + d + if start { 0 } else { 1 }),
                    FrameUnit::Groups => {
                        let t = g as i128 + d;
                        let ng = self.starts.len() as i128 - 1;
                        if start {
                            self.starts[t.clamp(0, ng) as usize]
                        } else {
                            self.starts[(t + 1).clamp(0, ng) as usize]
                        }
                    }
                    FrameUnit::Range => self.range_bound(j, off, preceding, start)?,
                }
            }
        })
    }

    /// A RANGE frame's end at `offset` before or after row `j`'s ORDER BY value: the rows whose
    /// value lies within it. A NULL value's frame is its peers; a text or blob value is not
    /// shifted (SQLite's `windowCodeRangeTest`).
    fn range_bound(
        &self,
        j: usize,
        off: Option<&Value>,
        preceding: bool,
        start: bool,
    ) -> Result<usize> {
        let g = self.group[j];
        let v = &self.key[j];
        if v.is_null() {
            return Ok(self.starts[g + usize::from(!start)]);
        }
        let (_, desc, nulls_first) = self.call.order[0];
        let target = match (v, off) {
            (Value::Integer(_) | Value::Real(_), Some(o)) => {
                let op = if preceding != desc {
                    Arith::Sub
                } else {
                    Arith::Add
                };
                types::arith(op, v, o)
            }
            _ => v.clone(),
        };
        let k = SortKey {
            col: 0,
            desc,
            nulls_first,
        };
        Ok(self.key.partition_point(|x| {
            let o = compare_key(x, &target, &k);
            if start {
                o == Ordering::Less
            } else {
                o != Ordering::Greater
            }
        }))
    }

    /// Row `j`'s frame `s..e` without the rows its EXCLUDE clause leaves out, as ranges.
    fn segments(&self, j: usize, s: usize, e: usize) -> Vec<(usize, usize)> {
        let g = self.group[j];
        let (gs, ge) = (self.starts[g], self.starts[g + 1]);
        let out: Vec<(usize, usize)> = match self.call.exclude {
            Exclude::NoOthers => vec![(s, e)],
            Exclude::CurrentRow => vec![(s, e.min(j)), (s.max(j + 1), e)],
            Exclude::Group => vec![(s, e.min(gs)), (s.max(ge), e)],
            Exclude::Ties => vec![(s, e.min(gs)), (s.max(j), e.min(j + 1)), (s.max(ge), e)],
        };
        out.into_iter().filter(|(a, b)| a < b).collect()
    }
}

/// lag()'s and lead()'s offset as SQLite takes it: an integral number (text by its numeric
/// value); None (the default value) for NULL or a fraction.
fn offset_of(v: &Value) -> Option<i64> {
    match types::to_numeric(v) {
        Value::Integer(i) => Some(i),
        Value::Real(r) if r.fract() == 0.0 => Some(types::real_to_i64(r)),
        _ => None,
    }
}

/// nth_value()'s N: a positive integer (an integral real counts).
fn nth(v: &Value) -> Result<u64> {
    let n = match types::apply_affinity(v.clone(), Affinity::Numeric) {
        Value::Integer(i) => i,
        Value::Real(r) if r.fract() == 0.0 => types::real_to_i64(r),
        _ => 0,
    };
    if n <= 0 {
        return Err(Error::Invalid(
            "second argument to nth_value must be a positive integer".into(),
        ));
    }
    Ok(n as u64)
}

/// An aggregate over a frame that moves forward: rows are added at its end and, unless it
/// starts at UNBOUNDED PRECEDING, taken back out at its start.
enum Sliding {
    /// Add-only: any aggregate.
    Grow(AggState),
    Count(i64),
    Sum(Box<SumState>),
    /// min() or max(): the rows that may still become the extreme, as (position, value), the
    /// extreme first: a queue, `.1..` of the vector.
    Extreme(Vec<(usize, Value)>, usize),
}

impl Sliding {
    fn new(spec: &AggSpec, fixed_start: bool) -> Sliding {
        match spec.func {
            _ if fixed_start => Sliding::Grow(AggState::new(spec)),
            AggFunc::CountStar | AggFunc::Count => Sliding::Count(0),
            AggFunc::Min | AggFunc::Max => Sliding::Extreme(Vec::new(), 0),
            _ => Sliding::Sum(Box::default()),
        }
    }

    fn arg(spec: &AggSpec, row: &[Value], cx: &Cx) -> Result<Value> {
        match spec.args.first() {
            Some(e) => Ok(eval(e, row, cx)?.into_owned()),
            None => Ok(Value::Integer(1)),
        }
    }

    fn add(&mut self, spec: &AggSpec, j: usize, row: &[Value], cx: &Cx) -> Result<()> {
        if let Sliding::Grow(st) = self {
            st.update(spec, row, cx)?;
            return Ok(());
        }
        let v = Self::arg(spec, row, cx)?;
        if v.is_null() {
            return Ok(());
        }
        match self {
            Sliding::Count(n) => *n += 1,
            Sliding::Sum(st) => st.add(&v),
            Sliding::Extreme(q, head) => {
                let keep = if spec.func == AggFunc::Min {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                while q.len() > *head && q.last().is_some_and(|(_, b)| b.total_cmp(&v) != keep) {
                    q.pop();
                }
                q.push((j, v));
            }
            Sliding::Grow(_) => {}
        }
        Ok(())
    }

    fn remove(&mut self, spec: &AggSpec, j: usize, row: &[Value], cx: &Cx) -> Result<()> {
        match self {
            Sliding::Grow(_) => {}
            Sliding::Extreme(q, head) => {
                if q.get(*head).is_some_and(|(i, _)| *i == j) {
                    *head += 1;
                }
            }
            _ => {
                let v = Self::arg(spec, row, cx)?;
                if v.is_null() {
                    return Ok(());
                }
                match self {
                    Sliding::Count(n) => *n -= 1,
                    Sliding::Sum(st) => st.remove(&v),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn value(&self, spec: &AggSpec) -> Result<Value> {
        Ok(match self {
            Sliding::Grow(st) => st.peek(spec)?,
            Sliding::Count(n) => Value::Integer(*n),
            Sliding::Sum(s) => s.finish(spec.func)?,
            Sliding::Extreme(q, head) => q.get(*head).map_or(Value::Null, |(_, v)| v.clone()),
        })
    }
}
