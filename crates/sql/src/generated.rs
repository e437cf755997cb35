//! Generated columns (`c AS (expr)`, `c GENERATED ALWAYS AS (expr) VIRTUAL|STORED`): what
//! SQLite refuses in their definitions, their expressions planned over the table's row, and
//! their values computed into every row a write stores (`Writer::check_row` calls `compute`).
//!
//! cairn stores the value of a VIRTUAL column in the row as it does a STORED one, instead of
//! computing it on every read, because then nothing that reads rows needs to know of them: a
//! scan, an index, a point read and the capture for replication see a row as it is stored.
//! The two kinds differ only in what `PRAGMA table_xinfo` shows and in ADD COLUMN, which takes
//! a VIRTUAL column (computing it into the rows there) and refuses a STORED one, as SQLite does.

use crate::error::{Error, Result};
use crate::exec::eval::{eval, Cache, Cx};
use crate::parse::ast::Expr;
use crate::plan::{Func, PExpr};
use crate::schema::{Catalog, Table};
use cairn_value::Value;

/// Checks `t`'s generated columns and plans them into `t.generated`, in an order where each
/// comes after every generated column it reads. Every table made or opened passes here:
/// inlined, the common case (none) is a loop, and the rest stays out of the module a page
/// fetches first (docs/size.md).
#[inline(always)]
pub(crate) fn plan(t: &mut Table) -> Result<()> {
    t.generated.clear();
    if t.columns.iter().all(|c| c.generated.is_none()) {
        return Ok(());
    }
    plan_generated(t)
}

#[inline(never)]
fn plan_generated(t: &mut Table) -> Result<()> {
    let gen: Vec<usize> = (0..t.columns.len())
        .filter(|&c| t.columns[c].generated.is_some())
        .collect();
    if gen.len() == t.columns.len() {
        return Err(Error::Invalid(
            "must have at least one non-generated column".into(),
        ));
    }
    let key = t.key_columns();
    let catalog = Catalog::default();
    let mut planner = crate::plan::Planner::new(&catalog);
    // Each generated column's plan and the generated columns it reads.
    let mut plans: Vec<(usize, PExpr, Vec<usize>)> = Vec::with_capacity(gen.len());
    for &c in &gen {
        let col = &t.columns[c];
        if key.contains(&c) {
            return Err(Error::Invalid(
                "generated columns cannot be part of the PRIMARY KEY".into(),
            ));
        }
        if col.default.is_some() {
            return Err(Error::Invalid(
                "cannot use DEFAULT on a generated column".into(),
            ));
        }
        let ast = &col
            .generated
            .as_ref()
            .expect("invariant: filtered above")
            .expr;
        let mut qualified = false;
        crate::alter::each_column(&mut ast.clone(), &mut |table, _| {
            qualified |= table.is_some()
        });
        if qualified {
            return Err(Error::Invalid(
                "the \".\" operator prohibited in generated columns".into(),
            ));
        }
        let plan = planner.table_expr(t, ast)?;
        let mut bad = crate::plan::has_subquery(&plan).then_some("subqueries");
        let mut reads = Vec::new();
        let mut beyond = false;
        crate::plan::walk(&plan, &mut |x| match x {
            PExpr::Func(Func::Random | Func::Uuid7, _) => bad = Some("non-deterministic functions"),
            PExpr::Param(_) => bad = Some("parameters"),
            PExpr::Col(r) if *r >= t.columns.len() => beyond = true,
            PExpr::Col(r) if t.columns[*r].generated.is_some() => reads.push(*r),
            _ => {}
        });
        if beyond {
            return Err(Error::UnknownColumn("rowid".into()));
        }
        if let Some(what) = bad {
            return Err(Error::Invalid(format!(
                "{what} prohibited in generated columns"
            )));
        }
        plans.push((c, plan, reads));
    }
    // Depth-first, each column after what it reads; one met again on its own path is a loop.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; plans.len()];
    let mut order = Vec::with_capacity(plans.len());
    fn visit(
        i: usize,
        plans: &[(usize, PExpr, Vec<usize>)],
        mark: &mut [Mark],
        order: &mut Vec<usize>,
        t: &Table,
    ) -> Result<()> {
        match mark[i] {
            Mark::Done => return Ok(()),
            Mark::Open => {
                return Err(Error::Invalid(format!(
                    "generated column loop on \"{}\"",
                    t.columns[plans[i].0].name
                )))
            }
            Mark::New => {}
        }
        mark[i] = Mark::Open;
        for &r in &plans[i].2 {
            let j = plans
                .iter()
                .position(|p| p.0 == r)
                .expect("invariant: a generated column read is planned");
            visit(j, plans, mark, order, t)?;
        }
        mark[i] = Mark::Done;
        order.push(i);
        Ok(())
    }
    for i in 0..plans.len() {
        visit(i, &plans, &mut mark, &mut order, t)?;
    }
    let mut slots: Vec<Option<(usize, PExpr)>> =
        plans.into_iter().map(|(c, p, _)| Some((c, p))).collect();
    for i in order {
        t.generated.push(
            slots[i]
                .take()
                .expect("invariant: each column ordered once"),
        );
    }
    Ok(())
}

/// Checks the other columns of `row` with `check` (coerced to their types, NOT NULL), then
/// computes `t`'s generated columns from them, each coerced and checked the same way.
#[inline(never)]
pub(crate) fn compute(
    t: &Table,
    row: &mut [Value],
    cx: &Cx,
    check: fn(&Table, usize, &mut Value) -> Result<()>,
) -> Result<()> {
    // A cache of its own, to see whether an expression read the current time: 'now' is the
    // one input of a date function that is not the row's, and SQLite refuses it here.
    for (i, v) in row.iter_mut().enumerate() {
        if t.columns[i].generated.is_none() {
            check(t, i, v)?;
        }
    }
    let cache = Cache::default();
    let cx = Cx {
        cache: &cache,
        ..*cx
    };
    for (c, e) in &t.generated {
        let mut v = eval(e, row, &cx)?.into_owned();
        if crate::exec::eval::read_now(&cache) {
            let name = date_function(e);
            return Err(Error::Invalid(format!(
                "non-deterministic use of {name}() in a generated column"
            )));
        }
        check(t, *c, &mut v)?;
        row[*c] = v;
    }
    Ok(())
}

/// The name of the first date function in `e`, for the message of a read of 'now'.
fn date_function(e: &PExpr) -> &'static str {
    use crate::exec::eval::DateFn;
    let mut name = None;
    crate::plan::walk(e, &mut |x| {
        if let (None, PExpr::Func(Func::Date(f), _)) = (name, x) {
            name = Some(match f {
                DateFn::Date => "date",
                DateFn::Time => "time",
                DateFn::DateTime => "datetime",
                DateFn::JulianDay => "julianday",
                DateFn::UnixEpoch => "unixepoch",
                DateFn::Strftime => "strftime",
            })
        }
    });
    name.unwrap_or("date")
}

/// Whether the expression of a generated column of `t` other than column `except` reads
/// the column named `column`.
pub(crate) fn reads_column(t: &Table, column: &str, except: usize) -> bool {
    let mut uses = false;
    let others = (t.columns.iter().enumerate()).filter(|(i, _)| *i != except);
    for g in others.filter_map(|(_, c)| c.generated.as_ref()) {
        crate::alter::each_column(&mut g.expr.clone(), &mut |_, n| {
            uses |= n.eq_ignore_ascii_case(column)
        });
    }
    uses
}

/// Renames column `from` to `to` in the expressions of `t`'s generated columns.
pub(crate) fn rename_column(t: &mut Table, from: &str, to: &str) {
    for g in t.columns.iter_mut().filter_map(|c| c.generated.as_mut()) {
        crate::alter::each_column(&mut g.expr, &mut |_, n| {
            if n.eq_ignore_ascii_case(from) {
                *n = to.to_string();
            }
        });
    }
}

/// The text a generated column adds to its definition in the table's SQL.
pub(crate) fn sql(e: &Expr, stored: bool) -> String {
    format!(
        " GENERATED ALWAYS AS ({}) {}",
        crate::parse::display::expr(e),
        if stored { "STORED" } else { "VIRTUAL" }
    )
}
