//! The executor: runs plans. Queries are pushed, not pulled: each join level calls the next for
//! every row it finds, writing its columns into one shared frame (no per-row allocation for the
//! join itself), and the last level hands the frame to a sink (projection, aggregation). A sink
//! returns `false` to stop early (LIMIT, EXISTS).
//!
//! Writes (INSERT, UPDATE, DELETE) first collect what they will change, then change it, so a
//! statement never sees its own writes (no Halloween problem).
//!
//! `query.rs` runs a query's body (compound selects, VALUES, each core); `scan.rs` its join
//! levels (point reads, key ranges, scans, hash joins, filters on the record in the page);
//! `aggregate.rs` grouping and aggregates; `window.rs` window functions; `sort.rs` ORDER BY's
//! comparison; `write/` the
//! [`Writer`] (`insert.rs`, `update.rs` for UPDATE and DELETE); `capture.rs` the record of
//! changes to replicated tables that the sync layer turns into ops; `eval/` expressions. It
//! reads and writes through [`crate::Storage`] alone.

mod aggregate;
mod capture;
pub(crate) mod eval;
mod query;
mod scan;
mod sort;
mod window;
mod write;

#[cfg(feature = "sink")]
pub use capture::CaptureSink;
pub use capture::{
    same_row, Change, Changes, ChangesMark, Correction, ElemKind, ElemOp, EncodedRow, SetPart,
};
pub use query::{collect_rows, run_query};
pub(crate) use write::index_parts;
pub use write::{ForcedRow, RefusedRow, RowBufs, WriteResult, Writer};

use crate::error::Result;
use crate::exec::eval::{eval, eval_bool, Cx};
use crate::plan::*;
use crate::schema::Table;
use crate::types::ColType;
use cairn_value::Value;

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
