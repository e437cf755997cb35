//! Expression evaluation over a frame of values, with SQLite's semantics (three-valued logic,
//! comparison affinity, overflow to real) and the scalar functions of the dialect.
//!
//! The JSON functions are in `json.rs` (the parsed tree, paths, edits), `json_fn.rs` (the SQL
//! functions over it) and `json_each.rs` (the rows of `json_each` and `json_tree`); the set and
//! map functions over JSON text in `coll_fn.rs`.
//!
//! [`eval`] returns a `Cow`: a column or a literal is borrowed, not cloned, so testing
//! `name = 'x'` on a row allocates nothing.

pub(crate) mod coll_fn;
mod coltest;
mod datetime;
mod func;
mod json;
pub(crate) mod json_each;
mod json_fn;

pub use coltest::ColTest;
pub use datetime::DateFn;
pub(crate) use func::read_now;
pub use func::{cast, set_clock};
pub use json_fn::{lookup as json_fn_lookup, member as json_member, JsonFn};

use crate::error::{Error, Result};
use crate::exec;
use crate::exec::eval::func::call;
use crate::parse::ast::BinOp;
use crate::plan::{Access, Body, PExpr, QueryPlan, Source};
use crate::storage::{Storage, TreeId};
use crate::types::{self, apply_affinity, arith, to_text, truth, Affinity};
use cairn_store::hash::FastMap;
use cairn_value::codec::encode_key_value;
use cairn_value::Value;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::rc::Rc;

/// Results of uncorrelated subqueries, computed once per statement execution, keyed by the
/// plan's address (plans live as long as the execution).
pub type HashRows = FastMap<Vec<u8>, Vec<Vec<Value>>>;

/// A set of normalized keys (DISTINCT, UNION, IN): a map to an unused value, of the layout of
/// GROUP BY's map from keys to groups, so that the wasm module holds the hash table's code once
/// for both (docs/size.md).
#[derive(Default)]
pub struct KeySet(FastMap<Vec<u8>, usize>);

impl KeySet {
    /// Adds `k`; whether it was not there.
    pub fn insert(&mut self, k: Vec<u8>) -> bool {
        self.0.insert(k, 0).is_none()
    }
    /// Adds a copy of `k` if it is not there (a repeat, the usual case, copies nothing);
    /// whether it was not there.
    pub fn insert_new(&mut self, k: &[u8]) -> bool {
        !self.0.contains_key(k) && self.insert(k.to_vec())
    }
    pub fn contains(&self, k: &[u8]) -> bool {
        self.0.contains_key(k)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

pub enum Cached {
    Set {
        keys: KeySet,
        has_null: bool,
    },
    Value(Value),
    Rows(Rc<Vec<Vec<Value>>>),
    /// A hash join's build side: key to the rows (level-relative values) with that key.
    Hash(Rc<HashRows>),
    /// A memoized correlated subquery's results, by the normalized values of the outer
    /// columns it reads ([`QueryPlan::memo`]).
    Memo(Box<Memo>),
    /// An inner join level's row buffers (record, header layout, key looked up), kept from
    /// one outer row's scan to the next, and what its last point get found.
    Scratch(Vec<u8>, cairn_value::codec::Layout, Vec<u8>, LastGet),
}

/// A memoized subquery's results, and how often they were found again: a memo whose outer
/// values hardly repeat (a subquery on each row's own key) is turned off. Keys map to places
/// in `values`: a map of the layout of [`KeySet`]'s, whose code the wasm module holds once.
#[derive(Default)]
pub struct Memo {
    index: FastMap<Vec<u8>, usize>,
    values: Vec<Value>,
    lookups: u32,
    hits: u32,
    off: bool,
}

/// An inner join level's last point get, for the next outer row that names the same key
/// (the orders of one customer each look the customer up): the key, and whether it found a
/// row (whose record is still the level's record buffer). Valid only within one execution of
/// the levels (`exec::run_levels` from the first level clears it), during which nothing
/// writes to the store: a write runs between executions (an UPDATE's correlated subquery is
/// one execution per row), never inside one.
#[derive(Default)]
pub struct LastGet {
    pub valid: bool,
    pub found: bool,
    pub key: Vec<u8>,
}

/// The per-statement cache of subquery results and top-k bounds, keyed by plan address.
/// Looked up once per row by a top-k scan.
pub type Cache = RefCell<Slots>;

/// The cache's entries: a list searched by key, as a statement holds a few (one per subquery,
/// top-k level and inner join level); a hash map of its own was code of its own in the wasm
/// module (docs/size.md).
#[derive(Default)]
pub struct Slots {
    entries: Vec<(usize, Cached)>,
    /// Correlated subqueries may be memoized ([`QueryPlan::memo`]): the statement is a SELECT,
    /// so nothing writes to the store while it runs.
    pub memo: bool,
}

impl Slots {
    fn at(&self, k: usize) -> Option<usize> {
        self.entries.iter().position(|e| e.0 == k)
    }
    pub fn get(&self, k: &usize) -> Option<&Cached> {
        self.at(*k).map(|i| &self.entries[i].1)
    }
    pub fn get_mut(&mut self, k: &usize) -> Option<&mut Cached> {
        self.at(*k).map(|i| &mut self.entries[i].1)
    }
    pub fn contains_key(&self, k: &usize) -> bool {
        self.at(*k).is_some()
    }
    /// Sets `k`'s entry to `v`, replacing what was there.
    pub fn insert(&mut self, k: usize, v: Cached) {
        match self.at(k) {
            Some(i) => self.entries[i].1 = v,
            None => self.entries.push((k, v)),
        }
    }
    pub fn remove(&mut self, k: &usize) -> Option<Cached> {
        self.at(*k).map(|i| self.entries.swap_remove(i).1)
    }
}

/// What evaluation needs besides the row: storage for subqueries, parameters, the enclosing
/// query's row for correlated references, injected randomness and the subquery cache.
pub struct Cx<'a> {
    pub store: &'a dyn Storage,
    pub params: &'a [Value],
    pub outer: Option<(&'a [Value], &'a Cx<'a>)>,
    pub rng: &'a Cell<u64>,
    pub cache: &'a Cache,
    /// The row a subquery sees as its enclosing query's, when it is not the row evaluated: an
    /// aggregate query's output is evaluated on its aggregate frame, its subqueries on the input
    /// row rebuilt from the group (`AggPlan::regroup`).
    pub regroup: Option<&'a [Value]>,
}

impl<'a> Cx<'a> {
    /// A context for a subquery evaluated for `row` of this one.
    pub fn nested<'b>(&'b self, row: &'b [Value]) -> Cx<'b> {
        Cx {
            store: self.store,
            params: self.params,
            outer: Some((self.regroup.unwrap_or(row), self)),
            rng: self.rng,
            cache: self.cache,
            regroup: None,
        }
    }

    fn outer_row(&self, depth: usize) -> Result<&[Value]> {
        let mut cx = self;
        let mut d = depth;
        loop {
            let (row, parent) = cx.outer.ok_or_else(|| {
                Error::Invalid("invariant: outer reference without outer row".into())
            })?;
            d -= 1;
            if d == 0 {
                return Ok(row);
            }
            cx = parent;
        }
    }

    /// The next pseudo-random 64-bit value (xorshift64*; seeded by the database owner).
    pub fn random(&self) -> i64 {
        let mut x = self.rng.get();
        if x == 0 {
            x = 0x9E37_79B9_7F4A_7C15;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) as i64
    }
}

/// A key for grouping and set membership: equal SQL values give equal keys (an integral real
/// groups with the equal integer).
pub fn norm_key(vals: &[Value], out: &mut Vec<u8>) {
    for v in vals {
        push_hash(v, out);
    }
}

/// A value's part of a key of an in-memory set or map (DISTINCT, GROUP BY, UNION, IN): equal
/// SQL values give equal keys, as [`push_norm`]'s, but these are cheaper to build (a tag, then
/// the value's bytes as they are) and only ever hashed and compared for equality, never stored
/// or ordered. A text or blob carries its length, so keys of several values stay apart (tags:
/// 0 NULL, 1 integer, 2 real, 3 text, 4 blob, 5 and 6 a long text or blob).
pub fn push_hash(v: &Value, out: &mut Vec<u8>) {
    let (tag, bytes): (u8, &[u8]) = match v {
        Value::Null => return out.push(0),
        Value::Integer(i) => return int_key(*i, out),
        // An integral REAL in i64's range is the equal INTEGER's key (see `push_norm`).
        Value::Real(r) if r.fract() == 0.0 && *r >= i64::MIN as f64 && *r < -(i64::MIN as f64) => {
            return int_key(*r as i64, out)
        }
        Value::Real(r) => {
            out.push(2);
            return out.extend_from_slice(&r.to_bits().to_le_bytes());
        }
        Value::Text(s) => (3, s.as_bytes()),
        Value::Blob(b) => (4, b),
    };
    // The length in one byte when it fits (short keys hash and compare faster), else in eight
    // under another tag.
    match u8::try_from(bytes.len()) {
        Ok(n) => out.extend_from_slice(&[tag, n]),
        Err(_) => {
            out.push(tag + 2);
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(bytes);
}

fn int_key(i: i64, out: &mut Vec<u8>) {
    out.push(1);
    out.extend_from_slice(&i.to_le_bytes());
}

pub fn push_norm(v: &Value, out: &mut Vec<u8>) {
    match v {
        // An integral REAL in i64's range is the same key as that INTEGER (SQLite compares them
        // as numbers: DISTINCT, GROUP BY and UNION keep one of 1 and 1.0, and of -2^63 as
        // either). -2^63 is exact as an f64; 2^63 is past i64::MAX and equals no INTEGER.
        Value::Real(r) if r.fract() == 0.0 && *r >= i64::MIN as f64 && *r < -(i64::MIN as f64) => {
            encode_key_value(out, &Value::Integer(*r as i64), false)
        }
        v => encode_key_value(out, v, false),
    }
}

/// A value as text for LIKE and GLOB, borrowed when it already is text (the common case, so
/// matching a row allocates nothing).
fn text_of(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::Text(s) => Some(Cow::Borrowed(s.as_str())),
        v => to_text(v).map(Cow::Owned),
    }
}

/// A condition's truth. Comparisons, the usual filter, are answered without building the
/// 0/1 value `eval` would return.
pub fn eval_bool(e: &PExpr, row: &[Value], cx: &Cx) -> Result<Option<bool>> {
    if let PExpr::Cmp(op, a, b, la, lb) = e {
        if !matches!(op, BinOp::Is | BinOp::IsNot) {
            // A column, literal or parameter on both sides (`b >= ?`, the usual filter) is
            // compared where it lies, without going through `eval` and its `Cow`.
            if let (Some(x), Some(y)) = (operand(a, row, cx), operand(b, row, cx)) {
                return Ok(compare_truth(*op, x, y, *la, *lb));
            }
        }
    }
    eval_bool_slow(e, row, cx)
}

/// `eval_bool` for everything but a comparison of two operands: apart, so that the common
/// case does not pay for this one's stack frame.
#[inline(never)]
fn eval_bool_slow(e: &PExpr, row: &[Value], cx: &Cx) -> Result<Option<bool>> {
    if let PExpr::Cmp(op, a, b, la, lb) = e {
        if !matches!(op, BinOp::Is | BinOp::IsNot) {
            let (x, y) = (eval(a, row, cx)?, eval(b, row, cx)?);
            return Ok(compare_truth(*op, &x, &y, *la, *lb));
        }
    }
    Ok(truth(&*eval(e, row, cx)?))
}

static NULL: Value = Value::Null;

/// The value of a column, literal or bound parameter, borrowed; None for anything that must be
/// computed (or an unbound parameter, which `eval` reports).
#[inline]
fn operand<'r>(e: &'r PExpr, row: &'r [Value], cx: &Cx<'r>) -> Option<&'r Value> {
    match e {
        PExpr::Col(i) => Some(row.get(*i).unwrap_or(&NULL)),
        PExpr::Lit(v) => Some(v),
        PExpr::Param(i) => cx.params.get(*i),
        _ => None,
    }
}

/// The truth of `x op y` for an ordering operator (not IS / IS NOT): unknown when either is NULL.
#[inline]
fn compare_truth(op: BinOp, x: &Value, y: &Value, la: Affinity, lb: Affinity) -> Option<bool> {
    let o = match (x, y) {
        (Value::Null, _) | (_, Value::Null) => return None,
        // Two integers compare as integers unless a TEXT affinity turns one into text.
        (Value::Integer(i), Value::Integer(j)) if la != Affinity::Text && lb != Affinity::Text => {
            i.cmp(j)
        }
        _ => cmp_aff(x, y, la, lb),
    };
    Some(cmp_truth(op, o))
}

/// Whether ordering `o` of the two sides satisfies comparison `op` (`Ge` for any other).
fn cmp_truth(op: BinOp, o: Ordering) -> bool {
    match op {
        BinOp::Eq => o == Ordering::Equal,
        BinOp::Ne => o != Ordering::Equal,
        BinOp::Lt => o == Ordering::Less,
        BinOp::Le => o != Ordering::Greater,
        BinOp::Gt => o == Ordering::Greater,
        _ => o != Ordering::Less,
    }
}

/// Evaluates `e` over `row`. A column, literal or parameter is borrowed (`cx` lives at least
/// as long as the row), so only computed values are allocated.
pub fn eval<'r>(e: &'r PExpr, row: &'r [Value], cx: &Cx<'r>) -> Result<Cow<'r, Value>> {
    Ok(match e {
        PExpr::Lit(v) => Cow::Borrowed(v),
        PExpr::Col(i) => Cow::Borrowed(row.get(*i).unwrap_or(&Value::Null)),
        PExpr::Param(i) => Cow::Borrowed(
            cx.params
                .get(*i)
                .ok_or_else(|| Error::ParamCount(format!("parameter {} is not bound", i + 1)))?,
        ),
        PExpr::Outer(d, i) => Cow::Owned(cx.outer_row(*d)?.get(*i).cloned().unwrap_or(Value::Null)),
        // SQLite computes -x as 0 - x (so -0.0 is 0.0).
        PExpr::Neg(a) => {
            let x = eval(a, row, cx)?;
            Cow::Owned(match x.as_ref() {
                Value::Integer(i) if *i != i64::MIN => Value::Integer(-i),
                x => arith(types::Arith::Sub, &Value::Integer(0), x),
            })
        }
        PExpr::Pos(a) => eval(a, row, cx)?,
        PExpr::Not(a) => Cow::Owned(match eval_bool(a, row, cx)? {
            None => Value::Null,
            Some(b) => Value::Integer(!b as i64),
        }),
        PExpr::BitNot(a) => Cow::Owned(match eval(a, row, cx)?.as_ref() {
            Value::Null => Value::Null,
            v => Value::Integer(!types::to_integer(v).unwrap_or(0)),
        }),
        PExpr::Arith(op, a, b) => {
            // A column, literal or parameter operand (`g % 10`) is read where it lies, without
            // a call to `eval` for it, and with no `Cow` to build and drop.
            if let (Some(x), Some(y)) = (operand(a, row, cx), operand(b, row, cx)) {
                return Ok(Cow::Owned(arith_of(*op, x, y)));
            }
            let (x, y) = (eval(a, row, cx)?, eval(b, row, cx)?);
            Cow::Owned(arith_of(*op, &x, &y))
        }
        PExpr::Concat(a, b) => {
            let (x, y) = (eval(a, row, cx)?, eval(b, row, cx)?);
            Cow::Owned(match (to_text(&x), to_text(&y)) {
                (Some(mut s), Some(t)) => {
                    s.push_str(&t);
                    Value::Text(s)
                }
                _ => Value::Null,
            })
        }
        PExpr::Bit(op, a, b) => {
            let (x, y) = (eval(a, row, cx)?, eval(b, row, cx)?);
            if x.is_null() || y.is_null() {
                return Ok(Cow::Owned(Value::Null));
            }
            let (x, y) = (
                types::to_integer(&x).unwrap_or(0),
                types::to_integer(&y).unwrap_or(0),
            );
            Cow::Owned(Value::Integer(match op {
                BinOp::BitAnd => x & y,
                BinOp::BitOr => x | y,
                BinOp::Shl => shift(x, y),
                _ => shift(x, y.checked_neg().unwrap_or(i64::MAX)),
            }))
        }
        PExpr::Cmp(op, a, b, la, lb) => {
            let (x, y) = (eval(a, row, cx)?, eval(b, row, cx)?);
            Cow::Owned(compare_op(*op, &x, &y, *la, *lb))
        }
        PExpr::And(a, b) => {
            let x = eval_bool(a, row, cx)?;
            if x == Some(false) {
                return Ok(Cow::Owned(Value::Integer(0)));
            }
            let y = eval_bool(b, row, cx)?;
            Cow::Owned(match (x, y) {
                (_, Some(false)) => Value::Integer(0),
                (Some(true), Some(true)) => Value::Integer(1),
                _ => Value::Null,
            })
        }
        PExpr::Or(a, b) => {
            let x = eval_bool(a, row, cx)?;
            if x == Some(true) {
                return Ok(Cow::Owned(Value::Integer(1)));
            }
            let y = eval_bool(b, row, cx)?;
            Cow::Owned(match (x, y) {
                (_, Some(true)) => Value::Integer(1),
                (Some(false), Some(false)) => Value::Integer(0),
                _ => Value::Null,
            })
        }
        PExpr::IsNull(a, neg) => {
            let n = eval(a, row, cx)?.is_null();
            Cow::Owned(Value::Integer((n != *neg) as i64))
        }
        PExpr::InList(a, list, neg, aff) => {
            let x = eval(a, row, cx)?;
            if x.is_null() {
                return Ok(Cow::Owned(if list.is_empty() {
                    Value::Integer(*neg as i64)
                } else {
                    Value::Null
                }));
            }
            let mut saw_null = false;
            for item in list {
                let y = eval(item, row, cx)?;
                if y.is_null() {
                    saw_null = true;
                    continue;
                }
                if compare_op(BinOp::Eq, &x, &y, Affinity::None, *aff) == Value::Integer(1) {
                    return Ok(Cow::Owned(Value::Integer(!*neg as i64)));
                }
            }
            Cow::Owned(if saw_null {
                Value::Null
            } else {
                Value::Integer(*neg as i64)
            })
        }
        PExpr::InSub(a, q, neg, la, lb) => {
            let x = apply_affinity(eval(a, row, cx)?.into_owned(), *la);
            Cow::Owned(in_subquery(&x, q, *neg, *lb, row, cx)?)
        }
        PExpr::Exists(q, neg) => Cow::Owned(Value::Integer((exists(q, row, cx)? != *neg) as i64)),
        PExpr::SemiHash(slot, q, neg, la, lb, exact) => {
            if let Some((e, outer)) = exact {
                if !hashed(q, e, *outer, cx)? {
                    return Ok(Cow::Owned(Value::Integer(
                        (exists(e, row, cx)? != *neg) as i64,
                    )));
                }
            }
            // The outer column as the subquery's `Outer(1, slot)` reads it (see `memo_key`).
            let v = cx.regroup.unwrap_or(row).get(*slot).unwrap_or(&Value::Null);
            // x IN set is 1, 0 or NULL; EXISTS is true only for 1 (a NULL matches nothing).
            let found = !v.is_null()
                && in_subquery(&apply_affinity(v.clone(), *la), q, false, *lb, row, cx)?
                    == Value::Integer(1);
            Cow::Owned(Value::Integer((found != *neg) as i64))
        }
        PExpr::Scalar(q) => match cached(q, cx)? {
            Some(Cached::Value(v)) => Cow::Owned(v),
            _ => {
                let memo = memo_key(q, row, cx)?;
                if let Some(v) = memo.as_ref().and_then(|k| memo_get(q, k, cx)) {
                    return Ok(Cow::Owned(v));
                }
                let mut out = Value::Null;
                exec::run_query(q, &cx.nested(row), &mut |r| {
                    out = r.first().cloned().unwrap_or(Value::Null);
                    Ok(false)
                })?;
                if !q.correlated {
                    cx.cache
                        .borrow_mut()
                        .insert(key_of(q), Cached::Value(out.clone()));
                } else if let Some(k) = memo {
                    memo_put(q, k, out.clone(), cx);
                }
                Cow::Owned(out)
            }
        },
        PExpr::Like {
            expr,
            pattern,
            escape,
            negated,
        } => {
            let (x, p) = (eval(expr, row, cx)?, eval(pattern, row, cx)?);
            let esc = match escape {
                Some(e) => match eval(e, row, cx)?.as_ref() {
                    Value::Null => return Ok(Cow::Owned(Value::Null)),
                    v => {
                        let s = to_text(v).unwrap_or_default();
                        let mut it = s.chars();
                        match (it.next(), it.next()) {
                            (Some(c), None) => Some(c),
                            _ => {
                                return Err(Error::Invalid(
                                    "ESCAPE expression must be a single character".into(),
                                ))
                            }
                        }
                    }
                },
                None => None,
            };
            match (text_of(&x), text_of(&p)) {
                (Some(x), Some(p)) => Cow::Owned(Value::Integer(
                    (types::like(&p, &x, esc) != *negated) as i64,
                )),
                _ => Cow::Owned(Value::Null),
            }
        }
        PExpr::Glob {
            expr,
            pattern,
            negated,
        } => {
            let (x, p) = (eval(expr, row, cx)?, eval(pattern, row, cx)?);
            match (text_of(&x), text_of(&p)) {
                (Some(x), Some(p)) => {
                    Cow::Owned(Value::Integer((types::glob(&p, &x) != *negated) as i64))
                }
                _ => Cow::Owned(Value::Null),
            }
        }
        PExpr::Case {
            operand,
            whens,
            else_,
        } => {
            match operand {
                Some(op) => {
                    let x = eval(op, row, cx)?;
                    for (w, t) in whens {
                        let y = eval(w, row, cx)?;
                        if compare_truth(BinOp::Eq, &x, &y, Affinity::None, Affinity::None)
                            == Some(true)
                        {
                            return eval(t, row, cx);
                        }
                    }
                }
                None => {
                    for (w, t) in whens {
                        if eval_bool(w, row, cx)? == Some(true) {
                            return eval(t, row, cx);
                        }
                    }
                }
            }
            match else_ {
                Some(e) => eval(e, row, cx)?,
                None => Cow::Owned(Value::Null),
            }
        }
        PExpr::Cast(a, ty) => Cow::Owned(cast(eval(a, row, cx)?.into_owned(), *ty)),
        PExpr::Affine(a, aff) => Cow::Owned(apply_affinity(eval(a, row, cx)?.into_owned(), *aff)),
        PExpr::Func(f, args) => Cow::Owned(call(*f, args, row, cx)?),
        PExpr::AggRef(_) => {
            return Err(Error::Invalid(
                "misuse of aggregate function outside an aggregate query".into(),
            ))
        }
        PExpr::WinRef(_) => {
            return Err(Error::Invalid(
                "invariant: a window call is evaluated by the window step".into(),
            ))
        }
    })
}

/// `x op y`: two integers that do not overflow, the common case, without `arith`'s
/// conversions (which give the same for them).
fn arith_of(op: types::Arith, x: &Value, y: &Value) -> Value {
    if let (Value::Integer(i), Value::Integer(j)) = (x, y) {
        let r = match op {
            types::Arith::Add => i.checked_add(*j),
            types::Arith::Sub => i.checked_sub(*j),
            types::Arith::Mul => i.checked_mul(*j),
            // By zero is NULL, and MIN / -1 a real: `arith` does those.
            types::Arith::Div if *j != 0 => i.checked_div(*j),
            types::Arith::Rem if *j != 0 => i.checked_rem(*j),
            types::Arith::Div | types::Arith::Rem => None,
        };
        if let Some(r) = r {
            return Value::Integer(r);
        }
    }
    arith(op, x, y)
}

fn key_of(q: &QueryPlan) -> usize {
    q as *const QueryPlan as usize
}

/// Where a memoized subquery's results live in the cache: the plan's address plus 5 (see
/// `exec::query::topk_slot` for the other offsets).
fn memo_slot(q: &QueryPlan) -> usize {
    key_of(q) + 5
}

/// A memoized subquery's results are kept for at most this many distinct outer values: past
/// it, the outer values hardly repeat and the memo only costs memory.
const MEMO_MAX: usize = 10_000;

/// The memo key of a correlated subquery evaluated for `row` (the values of the outer
/// columns it reads), or None when its results are not memoized.
fn memo_key(q: &QueryPlan, row: &[Value], cx: &Cx) -> Result<Option<Vec<u8>>> {
    let Some(refs) = &q.memo else {
        return Ok(None);
    };
    {
        let c = cx.cache.borrow();
        if !c.memo || matches!(c.get(&memo_slot(q)), Some(Cached::Memo(m)) if m.off) {
            return Ok(None);
        }
    }
    let mut k = Vec::new();
    for &(d, slot) in refs.iter() {
        // The subquery's `Outer(d, slot)`, seen from the query that evaluates it.
        let r = if d <= 1 {
            cx.regroup.unwrap_or(row)
        } else {
            cx.outer_row(d - 1)?
        };
        push_norm(r.get(slot).unwrap_or(&Value::Null), &mut k);
    }
    Ok(Some(k))
}

/// A memoized result for `k`; counts the lookup, and turns the memo off when, after enough
/// of them, fewer than one in four found a result.
fn memo_get(q: &QueryPlan, k: &[u8], cx: &Cx) -> Option<Value> {
    let mut c = cx.cache.borrow_mut();
    let Some(Cached::Memo(m)) = c.get_mut(&memo_slot(q)) else {
        return None;
    };
    m.lookups += 1;
    if let Some(&i) = m.index.get(k) {
        m.hits += 1;
        return m.values.get(i).cloned();
    }
    if m.lookups >= 256 && m.hits < m.lookups / 4 {
        m.off = true;
        m.index = FastMap::default();
        m.values = Vec::new();
    }
    None
}

fn memo_put(q: &QueryPlan, k: Vec<u8>, v: Value, cx: &Cx) {
    let mut c = cx.cache.borrow_mut();
    match c.get_mut(&memo_slot(q)) {
        Some(Cached::Memo(m)) => {
            if !m.off && m.values.len() < MEMO_MAX {
                m.index.insert(k, m.values.len());
                m.values.push(v);
            }
        }
        Some(_) => {}
        None => {
            let mut m = Box::<Memo>::default();
            m.index.insert(k, 0);
            m.values.push(v);
            c.insert(memo_slot(q), Cached::Memo(m));
        }
    }
}

fn cached(q: &QueryPlan, cx: &Cx) -> Result<Option<Cached>> {
    if q.correlated {
        return Ok(None);
    }
    let c = cx.cache.borrow();
    Ok(match c.get(&key_of(q)) {
        Some(Cached::Value(v)) => Some(Cached::Value(v.clone())),
        _ => None,
    })
}

/// Whether a subquery yields a row (`EXISTS`), through its memo or its cached result when it
/// has one.
fn exists(q: &Rc<QueryPlan>, row: &[Value], cx: &Cx) -> Result<bool> {
    let memo = memo_key(q, row, cx)?;
    if let Some(Cached::Value(v)) = cached(q, cx)? {
        return Ok(!v.is_null());
    }
    if let Some(v) = memo.as_ref().and_then(|k| memo_get(q, k, cx)) {
        return Ok(!v.is_null());
    }
    let mut found = false;
    exec::run_query(q, &cx.nested(row), &mut |_| {
        found = true;
        Ok(false)
    })?;
    let v = if found {
        Value::Integer(1)
    } else {
        Value::Null
    };
    if let Some(k) = memo {
        memo_put(q, k, v, cx);
    } else if !q.correlated {
        cx.cache.borrow_mut().insert(key_of(q), Cached::Value(v));
    }
    Ok(found)
}

/// An adaptive hash semi-join's switch ([`PExpr::SemiHash`] with its exact plan `e`): whether
/// to probe the set of `q`'s values now rather than run `e` for this row. The runs of `e` are
/// charged against a budget of a sixteenth of the entries of `q`'s table (what a scan of them
/// into a set costs against a lookup per row: a lookup by key reads one row, and costs about
/// as much as scanning 16 entries; one by a non-unique index reads several, counted as 8).
/// Once spent, the set is built and every later row probes it. When every row of table
/// `outer` is an outer row, the outer rows' count is known and the choice is made at the first
/// row instead. In a write, the store changes while the statement runs: each row runs `e`,
/// which sees every change.
fn hashed(q: &QueryPlan, e: &QueryPlan, outer: Option<TreeId>, cx: &Cx) -> Result<bool> {
    let slot = key_of(e) + 6;
    let mut c = cx.cache.borrow_mut();
    if !c.memo {
        return Ok(false);
    }
    if c.contains_key(&key_of(q)) {
        return Ok(true);
    }
    let (Body::Core(b), Body::Core(x)) = (&q.body, &e.body) else {
        return Ok(false);
    };
    let (Some(Source::Table(t)), Some(l)) = (b.levels.first().map(|l| &l.source), x.levels.first())
    else {
        return Ok(false);
    };
    let unique = match (&l.source, &l.access) {
        (Source::Table(t), Access::Index { index, probes, .. }) => {
            let n = probes.first().map_or(0, Vec::len);
            match index {
                None => n == t.key_columns().len(),
                Some(i) => t.indexes[*i].unique && n == t.indexes[*i].columns.len(),
            }
        }
        _ => false,
    };
    let cost = if unique { 1 } else { 8 };
    let left = match c.get(&slot) {
        Some(Cached::Value(Value::Integer(n))) => *n,
        _ => {
            let build = cx.store.count_entries(t.tree)? / 16;
            match outer {
                // All the runs the statement would make against the build: whichever is less.
                Some(o) if cx.store.count_entries(o)?.saturating_mul(cost) > build => 0,
                Some(_) => i64::MAX,
                None => i64::try_from(build).unwrap_or(i64::MAX),
            }
        }
    };
    if left <= 0 {
        c.remove(&slot);
        return Ok(true);
    }
    c.insert(
        slot,
        Cached::Value(Value::Integer(left.saturating_sub(cost as i64))),
    );
    Ok(false)
}

fn in_subquery(
    x: &Value,
    q: &Rc<QueryPlan>,
    neg: bool,
    aff: Affinity,
    row: &[Value],
    cx: &Cx,
) -> Result<Value> {
    let k = key_of(q);
    if q.correlated || !cx.cache.borrow().contains_key(&k) {
        let mut keys = KeySet::default();
        let mut has_null = false;
        let mut kb = Vec::new();
        exec::run_query(q, &cx.nested(row), &mut |r| {
            match r.first() {
                Some(Value::Null) | None => has_null = true,
                Some(v) => {
                    kb.clear();
                    match aff {
                        Affinity::None => push_hash(v, &mut kb),
                        _ => push_hash(&apply_affinity(v.clone(), aff), &mut kb),
                    }
                    keys.insert_new(&kb);
                }
            }
            Ok(true)
        })?;
        let set = Cached::Set { keys, has_null };
        if q.correlated {
            return Ok(in_result(x, &set, neg));
        }
        cx.cache.borrow_mut().insert(k, set);
    }
    let c = cx.cache.borrow();
    let set = c
        .get(&k)
        .ok_or_else(|| Error::Invalid("invariant: subquery result cached".into()))?;
    Ok(in_result(x, set, neg))
}

fn in_result(x: &Value, set: &Cached, neg: bool) -> Value {
    let Cached::Set { keys, has_null } = set else {
        return Value::Null;
    };
    if keys.is_empty() && !has_null {
        return Value::Integer(neg as i64);
    }
    if x.is_null() {
        return Value::Null;
    }
    let found = match x {
        // An integer's key (`int_key`) on the stack: a probe per outer row allocates nothing.
        Value::Integer(i) => {
            let mut kb = [1u8; 9];
            kb[1..].copy_from_slice(&i.to_le_bytes());
            keys.contains(&kb)
        }
        _ => {
            let mut kb = Vec::new();
            push_hash(x, &mut kb);
            keys.contains(&kb)
        }
    };
    if found {
        Value::Integer(!neg as i64)
    } else if *has_null {
        Value::Null
    } else {
        Value::Integer(neg as i64)
    }
}

fn shift(x: i64, by: i64) -> i64 {
    if by >= 64 {
        0
    } else if by >= 0 {
        ((x as u64) << by) as i64
    } else if by <= -64 {
        if x < 0 {
            -1
        } else {
            0
        }
    } else {
        x >> (-by)
    }
}

/// A comparison operator on two values, after applying each side's comparison affinity.
pub fn compare_op(op: BinOp, x: &Value, y: &Value, la: Affinity, lb: Affinity) -> Value {
    match op {
        BinOp::Is | BinOp::IsNot => {
            let eq = match (x.is_null(), y.is_null()) {
                (true, true) => true,
                (true, false) | (false, true) => false,
                _ => cmp_aff(x, y, la, lb) == Ordering::Equal,
            };
            Value::Integer((eq == (op == BinOp::Is)) as i64)
        }
        _ => {
            if x.is_null() || y.is_null() {
                return Value::Null;
            }
            let o = cmp_aff(x, y, la, lb);
            Value::Integer(cmp_truth(op, o) as i64)
        }
    }
}

/// A comparison operand with its affinity applied, when that changes it (None when it does not).
fn conv(v: &Value, a: Affinity) -> Option<Value> {
    match (a, v) {
        (Affinity::None | Affinity::Blob, _) => None,
        (Affinity::Text, Value::Integer(_) | Value::Real(_)) => Some(apply_affinity(v.clone(), a)),
        (Affinity::Integer | Affinity::Real | Affinity::Numeric, Value::Text(_)) => {
            Some(apply_affinity(v.clone(), a))
        }
        _ => None,
    }
}

fn cmp_aff(x: &Value, y: &Value, la: Affinity, lb: Affinity) -> Ordering {
    match (conv(x, la), conv(y, lb)) {
        (None, None) => x.total_cmp(y),
        (Some(a), None) => a.total_cmp(y),
        (None, Some(b)) => x.total_cmp(&b),
        (Some(a), Some(b)) => a.total_cmp(&b),
    }
}
