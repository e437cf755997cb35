//! Aggregation: per-group states, and aggregates read from an index's keys alone.

use crate::error::{Error, Result};
use crate::exec::eval::{eval, eval_bool, norm_key, push_hash, Cx, KeySet};
use crate::exec::eval_row;
use crate::exec::scan::{bound_ref, level_ranges};
use crate::plan::*;
use crate::types::{self, ColType};
use cairn_store::hash::FastMap;
use cairn_value::codec::{decode_key_value, key_integer};
use cairn_value::Value;
use std::cmp::Ordering;

/// count(*), and count, sum, total or avg of an index's first column, over key ranges of
/// that index alone (one level, covering, filtered by nothing but its ranges, one group): each
/// entry's number is read from the key bytes where it lies (`key_integer`), with no frame
/// written and no sink called per entry. None when the query is not of that shape.
pub(super) fn index_aggregate(
    c: &Core,
    agg: &AggPlan,
    frame: &[Value],
    cx: &Cx,
) -> Result<Option<Vec<AggState>>> {
    let [lvl] = &c.levels[..] else {
        return Ok(None);
    };
    if let (Source::Table(t), Access::Scan { .. }) = (&lvl.source, &lvl.access) {
        // count(*) of a whole table: the store's entry count, no row read.
        let plain = !lvl.left && !lvl.key_slot && lvl.filters.is_empty() && lvl.after.is_empty();
        let counts = |a: &AggSpec| a.func == AggFunc::CountStar && !a.distinct;
        if !plain || !agg.aggs.iter().all(counts) {
            return Ok(None);
        }
        let n = i64::try_from(cx.store.count_entries(t.tree)?)
            .map_err(|_| Error::Invalid("row count out of range".into()))?;
        return Ok(Some(agg.aggs.iter().map(|_| AggState::Count(n)).collect()));
    }
    // count(*) over one key range of the table or of an index (an entry per row): the
    // entries are passed uncounted one by one, whole leaves at a time (`scan_each_past`).
    // Several probes' ranges may overlap (`IN (1, 1)`); they take the general path.
    if let (
        Source::Table(t),
        Access::Index {
            probes,
            sub_probe: None,
            ..
        },
    ) = (&lvl.source, &lvl.access)
    {
        let plain = !lvl.left && !lvl.key_slot && lvl.filters.is_empty() && lvl.after.is_empty();
        let counts = |a: &AggSpec| a.func == AggFunc::CountStar && !a.distinct;
        if plain && probes.len() <= 1 && agg.aggs.iter().all(counts) {
            let (tree, ranges) = level_ranges(t, &lvl.access, frame, cx)?;
            let mut n = 0u64;
            for (lo, hi) in ranges {
                let mut left = u64::MAX;
                let (lo, hi) = (bound_ref(&lo), bound_ref(&hi));
                cx.store
                    .scan_each_past(tree, lo, hi, false, &mut left, &mut |_, _| Ok(true))?;
                n += u64::MAX - left;
            }
            let n =
                i64::try_from(n).map_err(|_| Error::Invalid("row count out of range".into()))?;
            return Ok(Some(agg.aggs.iter().map(|_| AggState::Count(n)).collect()));
        }
    }
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
    if lvl.left
        || lvl.key_slot
        || !lvl.filters.is_empty()
        || !lvl.after.is_empty()
        || !t.indexes[*ix].exprs.is_empty()
    {
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
pub(super) fn update_states(
    agg: &AggPlan,
    states: &mut [AggState],
    frame: &[Value],
    cx: &Cx,
) -> Result<()> {
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
pub(super) fn emit_group(
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
    // Subqueries read the input row, rebuilt from the group.
    let input: Vec<Value>;
    let regrouped;
    let cx = if agg.regroup.is_empty() {
        cx
    } else {
        let width = agg.regroup.iter().map(|&(s, _)| s + 1).max().unwrap_or(0);
        let mut row = vec![Value::Null; width];
        for &(s, pos) in &agg.regroup {
            row[s] = frame[pos].clone();
        }
        input = row;
        regrouped = Cx {
            store: cx.store,
            params: cx.params,
            outer: cx.outer,
            rng: cx.rng,
            cache: cx.cache,
            regroup: Some(&input),
        };
        &regrouped
    };
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
pub(super) struct Groups {
    pub(super) index: FastMap<Vec<u8>, usize>,
    pub(super) groups: Vec<(Vec<Value>, Vec<AggState>)>,
}

pub(super) fn finish_groups(
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
pub(super) struct SumState {
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

    /// The exact sum so far becomes the compensated one, split between sum and error as
    /// SQLite's `kahanBabuskaNeumaierInit` splits it (later roundings depend on the split).
    fn go_approx(&mut self) {
        if !self.approx {
            self.approx = true;
            let i = self.int;
            if (-4_503_599_627_370_496..4_503_599_627_370_496).contains(&i) {
                self.sum = i as f64;
                self.err = 0.0;
            } else {
                self.sum = (i - i % 16384) as f64;
                self.err = (i % 16384) as f64;
            }
        }
    }

    /// Adds a value: an integer to an exact sum that stays exact here, inlined; the rest apart.
    #[inline]
    pub(super) fn add(&mut self, v: &Value) {
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
        let converted;
        let v = match v {
            Value::Text(_) | Value::Blob(_) => {
                converted = summand(v);
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
                // SQLite forgets an overflow once a real is added.
                self.overflow = false;
                self.go_approx();
                self.kbn(r);
            }
            _ => {}
        }
    }

    /// Takes back a value added before, as SQLite's `sumInverse` does for a window frame
    /// whose start moves on: once the sum is approximate it stays so.
    pub(super) fn remove(&mut self, v: &Value) {
        self.n -= 1;
        let v = summand(v);
        if let (Value::Integer(i), false) = (&v, self.approx) {
            match self.int.checked_sub(*i) {
                Some(s) => {
                    self.int = s;
                    return;
                }
                None => {
                    self.overflow = true;
                    self.go_approx();
                }
            }
        }
        match v {
            Value::Integer(i64::MIN) => {
                self.kbn_int(i64::MAX);
                self.kbn_int(1);
            }
            Value::Integer(i) => self.kbn_int(-i),
            Value::Real(r) => self.kbn(-r),
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

    pub(super) fn finish(&self, f: AggFunc) -> Result<Value> {
        // A real that is NaN (infinities of both signs met) is NULL, as SQLite stores it.
        let real = |r: f64| {
            if r.is_nan() {
                Value::Null
            } else {
                Value::Real(r)
            }
        };
        Ok(match f {
            AggFunc::Total => real(self.value()),
            AggFunc::Avg if self.n == 0 => Value::Null,
            AggFunc::Avg => real(self.value() / self.n as f64),
            _ if self.n == 0 => Value::Null,
            _ if self.overflow => return Err(Error::IntegerOverflow),
            _ if self.approx => real(self.value()),
            _ => Value::Integer(self.int),
        })
    }
}

/// A value as sum() adds it: text counts as an integer only if all of it is one; otherwise as
/// a real.
fn summand(v: &Value) -> Value {
    match v {
        Value::Text(_) | Value::Blob(_) => {
            match types::apply_affinity(v.clone(), types::Affinity::Numeric) {
                i @ Value::Integer(_) => i,
                other => Value::Real(types::to_f64(&other).unwrap_or(0.0)),
            }
        }
        v => v.clone(),
    }
}

/// json_group_array's or json_group_object's value: its members, bracketed.
fn json_text(spec: &AggSpec, members: &str) -> Value {
    let (open, close) = if spec.func == AggFunc::JsonObject {
        ('{', '}')
    } else {
        ('[', ']')
    };
    Value::Text(format!("{open}{members}{close}"))
}

pub(super) enum AggState {
    Count(i64),
    /// sum(), total() and avg(): SQLite's accumulator, an exact integer sum until a real or
    /// an overflow, then Kahan-Babuska-Neumaier compensated summation.
    Sum(Box<SumState>),
    Ext(Option<Value>),
    Concat(Option<String>),
    Last(Value),
    /// json_group_array and json_group_object: the members so far, as JSON text.
    Json(String),
    Distinct(KeySet, Box<AggState>),
}

impl AggState {
    pub(super) fn new(spec: &AggSpec) -> AggState {
        let base = match spec.func {
            AggFunc::CountStar | AggFunc::Count => AggState::Count(0),
            AggFunc::Sum | AggFunc::Total | AggFunc::Avg => AggState::Sum(Box::default()),
            AggFunc::Min | AggFunc::Max => AggState::Ext(None),
            AggFunc::GroupConcat => AggState::Concat(None),
            AggFunc::Last => AggState::Last(Value::Null),
            AggFunc::JsonArray | AggFunc::JsonObject => AggState::Json(String::new()),
        };
        if spec.distinct {
            AggState::Distinct(KeySet::default(), Box::new(base))
        } else {
            base
        }
    }

    /// Adds a row; says whether the state changed (for min/max: a new extreme).
    #[inline]
    pub(super) fn update(&mut self, spec: &AggSpec, frame: &[Value], cx: &Cx) -> Result<bool> {
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
        if let AggState::Json(acc) = self {
            // NULLs are members too, and a JSON function's result goes in as JSON.
            crate::exec::eval::json_member(
                acc,
                spec.func == AggFunc::JsonObject,
                &spec.args,
                frame,
                cx,
            )?;
            return Ok(true);
        }
        let v = match spec.args.first() {
            Some(a) => eval(a, frame, cx)?,
            None => return Ok(false),
        };
        if let AggState::Distinct(seen, inner) = self {
            if v.is_null() {
                return Ok(false);
            }
            let mut k = Vec::new();
            push_hash(&v, &mut k);
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
            AggState::Json(acc) => {
                let one = [PExpr::Lit(v.into_owned())];
                crate::exec::eval::json_member(acc, false, &one, frame, cx)?;
            }
            AggState::Distinct(_, inner) => return inner.add(spec, v, frame, cx),
        }
        Ok(true)
    }

    /// The value so far, for a window frame that goes on growing.
    pub(super) fn peek(&self, spec: &AggSpec) -> Result<Value> {
        Ok(match self {
            AggState::Count(n) => Value::Integer(*n),
            AggState::Sum(st) => st.finish(spec.func)?,
            AggState::Ext(b) => b.clone().unwrap_or(Value::Null),
            AggState::Concat(s) => s.clone().map_or(Value::Null, Value::Text),
            AggState::Last(v) => v.clone(),
            AggState::Json(s) => json_text(spec, s),
            AggState::Distinct(_, inner) => inner.peek(spec)?,
        })
    }

    pub(super) fn finish(self, spec: &AggSpec) -> Result<Value> {
        Ok(match self {
            AggState::Count(n) => Value::Integer(n),
            AggState::Sum(st) => st.finish(spec.func)?,
            AggState::Ext(b) => b.unwrap_or(Value::Null),
            AggState::Concat(s) => s.map(Value::Text).unwrap_or(Value::Null),
            AggState::Last(v) => v,
            AggState::Json(s) => json_text(spec, &s),
            AggState::Distinct(_, inner) => inner.finish(spec)?,
        })
    }
}
