//! Window functions in the plan. A call (`f(...) OVER (...)`) in a core's output or ORDER BY
//! is bound to [`PExpr::WinRef`]; once the core is bound, [`window_step`] makes the
//! core hand its rows (the join frame, or an aggregate query's group row) to a window step
//! ([`WindowPlan`], run by `crate::exec::window`) that appends each call's value to each row
//! and then projects. Calls are only allowed where SQLite allows them: the result columns and
//! the ORDER BY of a SELECT, never inside another window call's arguments.

use crate::error::{Error, Result};
use crate::parse::ast::Expr;
use crate::parse::window::{Exclude, FrameBound, FrameUnit, WindowDef};
use crate::plan::bind::is_aggregate;
use crate::plan::planner::{Planner, Scope};
use crate::plan::walk::rewrite;
use crate::plan::{AggFunc, PExpr};

/// The window step of a core.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPlan {
    /// How many values each row the core produces has; call `i`'s value goes to slot
    /// `width + i`.
    pub width: usize,
    pub calls: Vec<WinCall>,
    /// The output (and trailing sort columns), over the rows with the calls' values.
    pub project: Vec<PExpr>,
    pub distinct: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WinCall {
    pub func: WinFunc,
    /// As written, for EXPLAIN.
    pub name: String,
    pub args: Vec<PExpr>,
    /// `FILTER (WHERE ...)`: the rows an aggregate counts.
    pub filter: Option<PExpr>,
    pub partition: Vec<PExpr>,
    /// (key, descending, NULLs first).
    pub order: Vec<(PExpr, bool, bool)>,
    pub unit: FrameUnit,
    pub start: Bound,
    pub end: Bound,
    pub exclude: Exclude,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WinFunc {
    RowNumber,
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    Ntile,
    Lag,
    Lead,
    FirstValue,
    LastValue,
    NthValue,
    Agg(AggFunc),
}

/// A frame bound; offsets are constant expressions, checked when the query runs (as SQLite).
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    UnboundedPreceding,
    Preceding(PExpr),
    CurrentRow,
    Following(PExpr),
    UnboundedFollowing,
}

/// The window-only functions with the argument counts they take.
fn window_func(name: &str) -> Option<(WinFunc, usize, usize)> {
    Some(match name {
        "row_number" => (WinFunc::RowNumber, 0, 0),
        "rank" => (WinFunc::Rank, 0, 0),
        "dense_rank" => (WinFunc::DenseRank, 0, 0),
        "percent_rank" => (WinFunc::PercentRank, 0, 0),
        "cume_dist" => (WinFunc::CumeDist, 0, 0),
        "ntile" => (WinFunc::Ntile, 1, 1),
        "lag" => (WinFunc::Lag, 1, 3),
        "lead" => (WinFunc::Lead, 1, 3),
        "first_value" => (WinFunc::FirstValue, 1, 1),
        "last_value" => (WinFunc::LastValue, 1, 1),
        "nth_value" => (WinFunc::NthValue, 2, 2),
        _ => return None,
    })
}

/// A window-only function called without OVER.
pub(super) fn misuse(name: &str) -> Option<Error> {
    window_func(name).map(|_| Error::Invalid(format!("misuse of window function {name}()")))
}

impl Planner<'_> {
    /// Binds a window call into the current scope's list; its value is [`PExpr::WinRef`].
    pub(super) fn window_call(
        &mut self,
        func: &Expr,
        filter: Option<&Expr>,
        over: &WindowDef,
    ) -> Result<PExpr> {
        let Expr::Function {
            name,
            args,
            distinct,
            star,
        } = func
        else {
            return Err(Error::Invalid(
                "invariant: a window call is a function".into(),
            ));
        };
        // Not allowed here (WHERE, GROUP BY, HAVING), or inside another call's arguments.
        let Some(list) = self.scope_mut().windows.take() else {
            return Err(Error::Invalid(format!(
                "misuse of window function {name}()"
            )));
        };
        let call = self.bind_call(name, args, *distinct, *star, filter, over);
        let list = self.scope_mut().windows.insert(list);
        list.push(call?);
        Ok(PExpr::WinRef(list.len() - 1))
    }

    fn bind_call(
        &mut self,
        name: &str,
        args: &[Expr],
        distinct: bool,
        star: bool,
        filter: Option<&Expr>,
        over: &WindowDef,
    ) -> Result<WinCall> {
        if let Some(base) = &over.base {
            return Err(Error::Invalid(format!("no such window: {base}")));
        }
        let func = match window_func(name) {
            Some((f, lo, hi)) => {
                if star || args.len() < lo || args.len() > hi {
                    return Err(Error::Invalid(format!(
                        "wrong number of arguments to function {name}()"
                    )));
                }
                if filter.is_some() {
                    return Err(Error::Invalid(
                        "FILTER clause may only be used with aggregate window functions".into(),
                    ));
                }
                f
            }
            None => match is_aggregate(name, args.len(), star) {
                Some(a) => WinFunc::Agg(a),
                None if crate::plan::bind::scalar_exists(name) => {
                    return Err(Error::Invalid(format!(
                        "{name}() may not be used as a window function"
                    )))
                }
                None => return Err(Error::UnknownFunction(name.to_string())),
            },
        };
        if distinct {
            return Err(Error::Invalid(
                "DISTINCT is not supported for window functions".into(),
            ));
        }
        let args = self.exprs(args)?;
        let filter = filter.map(|f| self.expr(f)).transpose()?;
        let partition = self.exprs(&over.partition)?;
        let mut order = Vec::new();
        for o in &over.order {
            order.push((
                self.expr(&o.expr)?,
                o.desc,
                o.nulls_first.unwrap_or(!o.desc),
            ));
        }
        let (unit, start, end, exclude) = match &over.frame {
            None => (
                FrameUnit::Range,
                Bound::UnboundedPreceding,
                Bound::CurrentRow,
                Exclude::NoOthers,
            ),
            Some(f) => (
                f.unit,
                self.bound(&f.start)?,
                self.bound(&f.end)?,
                f.exclude,
            ),
        };
        let offset = |b: &Bound| matches!(b, Bound::Preceding(_) | Bound::Following(_));
        if unit == FrameUnit::Range && (offset(&start) || offset(&end)) && order.len() != 1 {
            return Err(Error::Invalid(
                "RANGE with offset PRECEDING/FOLLOWING requires one ORDER BY expression".into(),
            ));
        }
        Ok(WinCall {
            func,
            name: name.to_string(),
            args,
            filter,
            partition,
            order,
            unit,
            start,
            end,
            exclude,
        })
    }

    /// A frame offset, bound with no table in scope: it must be constant.
    fn bound(&mut self, b: &FrameBound) -> Result<Bound> {
        let mut offset = |e: &Expr| -> Result<PExpr> {
            self.scopes.push(Scope::default());
            let r = self.expr(e);
            self.scopes.pop();
            r
        };
        Ok(match b {
            FrameBound::UnboundedPreceding => Bound::UnboundedPreceding,
            FrameBound::Preceding(e) => Bound::Preceding(offset(e)?),
            FrameBound::CurrentRow => Bound::CurrentRow,
            FrameBound::Following(e) => Bound::Following(offset(e)?),
            FrameBound::UnboundedFollowing => Bound::UnboundedFollowing,
        })
    }
}

/// Every expression of the calls, for rewriting them as the core's other expressions are (an
/// aggregate query's group columns and aggregates).
pub(super) fn call_exprs(calls: &mut [WinCall]) -> impl Iterator<Item = &mut PExpr> {
    calls.iter_mut().flat_map(|c| {
        c.args
            .iter_mut()
            .chain(c.filter.iter_mut())
            .chain(c.partition.iter_mut())
            .chain(c.order.iter_mut().map(|o| &mut o.0))
    })
}

/// Turns a core's output into the window step's: the core then yields its rows of `width`
/// values as they are, and `project` reads the calls' values after them.
pub(super) fn window_step(
    calls: Vec<WinCall>,
    width: usize,
    project: &mut Vec<PExpr>,
    distinct: bool,
) -> WindowPlan {
    let mut out = std::mem::replace(project, (0..width).map(PExpr::Col).collect());
    for e in &mut out {
        rewrite(e, &mut |x| match x {
            PExpr::WinRef(i) => {
                *x = PExpr::Col(width + *i);
                true
            }
            _ => false,
        });
    }
    WindowPlan {
        width,
        calls,
        project: out,
        distinct,
    }
}

/// Whether a call reads its frame: the ranking functions, ntile, lag and lead ignore the one
/// written and see the whole partition in order, as in SQLite.
fn uses_frame(f: WinFunc) -> bool {
    matches!(
        f,
        WinFunc::FirstValue | WinFunc::LastValue | WinFunc::NthValue | WinFunc::Agg(_)
    )
}

/// EXPLAIN's description of a call: `sum() OVER (PARTITION BY 1 key, ORDER BY 2 keys, ROWS
/// frame)`.
pub(crate) fn describe(c: &WinCall, plural: fn(usize, &str) -> String) -> String {
    let mut parts = Vec::new();
    if !c.partition.is_empty() {
        parts.push(format!("PARTITION BY {}", plural(c.partition.len(), "key")));
    }
    if !c.order.is_empty() {
        parts.push(format!("ORDER BY {}", plural(c.order.len(), "key")));
    }
    if uses_frame(c.func) {
        parts.push(
            match c.unit {
                FrameUnit::Rows => "ROWS frame",
                FrameUnit::Range => "RANGE frame",
                FrameUnit::Groups => "GROUPS frame",
            }
            .to_string(),
        );
    }
    format!(
        "{}() OVER ({})",
        c.name,
        cairn_value::text::join(&parts, ", ")
    )
}
