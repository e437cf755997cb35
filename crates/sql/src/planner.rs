//! The planner: resolves names in an AST statement against the catalog and turns it into a plan
//! ([`crate::plan`]) for the executor. Choices it makes:
//!
//! - WHERE and ON are split into conjuncts; each is checked at the first join level where every
//!   table it names is bound (LEFT JOIN: WHERE conjuncts on the right side wait until the NULL row
//!   is decided).
//! - For each level, an access path: the primary key or a secondary index when equality, IN or
//!   range conjuncts fit a prefix of its columns; a covering index when the index holds every
//!   column the query needs; a hash join when an equality join condition has no index; otherwise
//!   a scan. An index whose order matches ORDER BY is used to skip the sort.
//! - Only the columns a query needs are decoded, and the columns the level's filters need are
//!   decoded first, so rows that fail are never fully decoded.

use crate::ast::{self, BinOp, Expr, SelectItem, UnOp};
use crate::error::{Error, Result};
use crate::plan::*;
use crate::schema::{Catalog, Table};
use crate::types::{Affinity, Arith, ColType};
use cairn_value::Value;
use std::rc::Rc;

struct ScopeTable {
    name: String,
    /// Names and comparison affinities.
    columns: Vec<(String, Affinity)>,
    base: usize,
    needed: Vec<bool>,
    /// Found only by a qualified name (`excluded.x` in an upsert).
    qualified_only: bool,
}

#[derive(Default)]
struct Scope {
    tables: Vec<ScopeTable>,
    correlated: bool,
    /// Collecting aggregate calls (the scope is an aggregate query's output).
    aggs: Option<Vec<AggSpec>>,
    /// Output aliases usable in WHERE/GROUP BY/ORDER BY: (alias, AST expr).
    aliases: Vec<(String, Expr)>,
}

impl Scope {
    /// The first column of this scope's tables that `[table.]name` names, as (table, column)
    /// indices, and whether another table has one too (an ambiguous name).
    fn column_named(&self, table: Option<&str>, name: &str) -> (Option<(usize, usize)>, bool) {
        let mut found = None;
        for (ti, t) in self.tables.iter().enumerate() {
            match table {
                Some(tn) if !t.name.eq_ignore_ascii_case(tn) => continue,
                None if t.qualified_only => continue,
                _ => {}
            }
            if let Some(ci) = t
                .columns
                .iter()
                .position(|(c, _)| c.eq_ignore_ascii_case(name))
            {
                if found.is_some() {
                    return (found, true);
                }
                found = Some((ti, ci));
            }
        }
        (found, false)
    }
}

pub struct Planner<'c> {
    catalog: &'c Catalog,
    scopes: Vec<Scope>,
    ctes: Vec<Vec<(String, Vec<String>, ast::Select)>>,
    /// Guards alias expansion against `SELECT a AS b, b AS a ... WHERE a`.
    alias_depth: usize,
}

type SourceInfo = (Source, String, Vec<(String, Affinity)>);

pub fn is_aggregate(name: &str, nargs: usize, star: bool) -> Option<AggFunc> {
    Some(match (name, nargs) {
        ("count", 0) if star => AggFunc::CountStar,
        ("count", 1) => AggFunc::Count,
        ("sum", 1) => AggFunc::Sum,
        ("total", 1) => AggFunc::Total,
        ("avg", 1) => AggFunc::Avg,
        ("min", 1) => AggFunc::Min,
        ("max", 1) => AggFunc::Max,
        ("group_concat", 1 | 2) => AggFunc::GroupConcat,
        _ => return None,
    })
}

fn has_agg(e: &Expr) -> bool {
    let mut found = false;
    walk_ast(e, &mut |x| {
        if let Expr::Function {
            name, args, star, ..
        } = x
        {
            if is_aggregate(name, args.len(), *star).is_some() {
                found = true;
            }
        }
    });
    found
}

/// Visits every expression node, not descending into subqueries.
fn walk_ast(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match e {
        Expr::Unary(_, a) | Expr::IsNull { expr: a, .. } | Expr::Cast { expr: a, .. } => {
            walk_ast(a, f)
        }
        Expr::InSelect { expr: a, .. } => walk_ast(a, f),
        Expr::Binary(_, a, b)
        | Expr::Glob {
            expr: a,
            pattern: b,
            ..
        } => {
            walk_ast(a, f);
            walk_ast(b, f);
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            walk_ast(expr, f);
            walk_ast(pattern, f);
            if let Some(e) = escape {
                walk_ast(e, f);
            }
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            walk_ast(expr, f);
            walk_ast(low, f);
            walk_ast(high, f);
        }
        Expr::InList { expr, list, .. } => {
            walk_ast(expr, f);
            list.iter().for_each(|x| walk_ast(x, f));
        }
        Expr::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                walk_ast(o, f);
            }
            for (a, b) in whens {
                walk_ast(a, f);
                walk_ast(b, f);
            }
            if let Some(e) = else_ {
                walk_ast(e, f);
            }
        }
        Expr::Function { args, .. } => args.iter().for_each(|x| walk_ast(x, f)),
        Expr::Literal(_)
        | Expr::Param(_)
        | Expr::Column { .. }
        | Expr::Exists { .. }
        | Expr::Subquery(_) => {}
    }
}

/// Visits every planned expression node, not descending into subquery plans.
pub fn walk(e: &PExpr, f: &mut dyn FnMut(&PExpr)) {
    f(e);
    match e {
        PExpr::Neg(a)
        | PExpr::Pos(a)
        | PExpr::Not(a)
        | PExpr::BitNot(a)
        | PExpr::IsNull(a, _)
        | PExpr::Cast(a, _)
        | PExpr::Affine(a, _) => walk(a, f),
        PExpr::InSub(a, ..) => walk(a, f),
        PExpr::Arith(_, a, b)
        | PExpr::Concat(a, b)
        | PExpr::Bit(_, a, b)
        | PExpr::Cmp(_, a, b, _, _)
        | PExpr::And(a, b)
        | PExpr::Or(a, b) => {
            walk(a, f);
            walk(b, f);
        }
        PExpr::InList(a, l, _, _) => {
            walk(a, f);
            l.iter().for_each(|x| walk(x, f));
        }
        PExpr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            walk(expr, f);
            walk(pattern, f);
            if let Some(e) = escape {
                walk(e, f);
            }
        }
        PExpr::Glob { expr, pattern, .. } => {
            walk(expr, f);
            walk(pattern, f);
        }
        PExpr::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                walk(o, f);
            }
            for (a, b) in whens {
                walk(a, f);
                walk(b, f);
            }
            if let Some(e) = else_ {
                walk(e, f);
            }
        }
        PExpr::Func(_, args) => args.iter().for_each(|x| walk(x, f)),
        PExpr::Lit(_)
        | PExpr::Param(_)
        | PExpr::Col(_)
        | PExpr::Outer(..)
        | PExpr::Exists(..)
        | PExpr::Scalar(_)
        | PExpr::AggRef(_) => {}
    }
}

pub(crate) fn has_subquery(e: &PExpr) -> bool {
    let mut found = false;
    walk(e, &mut |x| {
        if matches!(x, PExpr::InSub(..) | PExpr::Exists(..) | PExpr::Scalar(_)) {
            found = true;
        }
    });
    found
}

/// [`Core::moves`] for a query without aggregates. A subquery in `project` may read the frame
/// as its outer row, so none is moved then.
fn movable(levels: &[Level], project: &[PExpr], agg: bool) -> u64 {
    let Some(last) = levels.last() else {
        return 0;
    };
    // How often each of the last level's slots is named, and whether a subquery is.
    let mut named = vec![0u8; last.width];
    let mut sub = agg;
    for e in project {
        walk(e, &mut |x| match x {
            PExpr::Col(s) => {
                if let Some(n) = s.checked_sub(last.base).and_then(|i| named.get_mut(i)) {
                    *n = n.saturating_add(1);
                }
            }
            PExpr::InSub(..) | PExpr::Exists(..) | PExpr::Scalar(_) => sub = true,
            _ => {}
        });
    }
    let mut moves = 0;
    for (i, e) in project.iter().enumerate().take(64) {
        if let PExpr::Col(s) = e {
            if !sub && s.checked_sub(last.base).and_then(|i| named.get(i)) == Some(&1) {
                moves |= 1 << i;
            }
        }
    }
    moves
}

fn slots(e: &PExpr) -> Vec<usize> {
    let mut v = Vec::new();
    walk(e, &mut |x| {
        if let PExpr::Col(s) = x {
            v.push(*s);
        }
    });
    v
}

/// Replaces sub-expressions in place (post-order), for aggregate rewriting.
fn rewrite(e: &mut PExpr, f: &mut dyn FnMut(&mut PExpr) -> bool) {
    if f(e) {
        return;
    }
    match e {
        PExpr::Neg(a)
        | PExpr::Pos(a)
        | PExpr::Not(a)
        | PExpr::BitNot(a)
        | PExpr::IsNull(a, _)
        | PExpr::Cast(a, _)
        | PExpr::Affine(a, _)
        | PExpr::InSub(a, ..) => rewrite(a, f),
        PExpr::Arith(_, a, b)
        | PExpr::Concat(a, b)
        | PExpr::Bit(_, a, b)
        | PExpr::Cmp(_, a, b, _, _)
        | PExpr::And(a, b)
        | PExpr::Or(a, b) => {
            rewrite(a, f);
            rewrite(b, f);
        }
        PExpr::InList(a, l, _, _) => {
            rewrite(a, f);
            l.iter_mut().for_each(|x| rewrite(x, f));
        }
        PExpr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            rewrite(expr, f);
            rewrite(pattern, f);
            if let Some(e) = escape {
                rewrite(e, f);
            }
        }
        PExpr::Glob { expr, pattern, .. } => {
            rewrite(expr, f);
            rewrite(pattern, f);
        }
        PExpr::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                rewrite(o, f);
            }
            for (a, b) in whens {
                rewrite(a, f);
                rewrite(b, f);
            }
            if let Some(e) = else_ {
                rewrite(e, f);
            }
        }
        PExpr::Func(_, args) => args.iter_mut().for_each(|x| rewrite(x, f)),
        _ => {}
    }
}

/// Splits a condition into conjuncts; `x BETWEEN a AND b` becomes `x >= a` and `x <= b`, so
/// each bound can narrow an index range.
fn split_and(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            split_and(a, out);
            split_and(b, out);
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } => {
            out.push(Expr::Binary(BinOp::Ge, expr.clone(), low.clone()));
            out.push(Expr::Binary(BinOp::Le, expr.clone(), high.clone()));
        }
        e => out.push(e.clone()),
    }
}

fn scalar_func(name: &str, n: usize) -> Result<Func> {
    let (f, ok) = match name {
        "abs" => (Func::Abs, n == 1),
        "sign" => (Func::Sign, n == 1),
        "coalesce" => (Func::Coalesce, n >= 2),
        "ifnull" => (Func::IfNull, n == 2),
        "nullif" => (Func::NullIf, n == 2),
        "iif" => (Func::Iif, n == 3),
        "length" => (Func::Length, n == 1),
        "lower" => (Func::Lower, n == 1),
        "upper" => (Func::Upper, n == 1),
        "substr" | "substring" => (Func::Substr, n == 2 || n == 3),
        "trim" => (Func::Trim, n == 1 || n == 2),
        "ltrim" => (Func::LTrim, n == 1 || n == 2),
        "rtrim" => (Func::RTrim, n == 1 || n == 2),
        "replace" => (Func::Replace, n == 3),
        "instr" => (Func::Instr, n == 2),
        "round" => (Func::Round, n == 1 || n == 2),
        "min" => (Func::Min, n >= 2),
        "max" => (Func::Max, n >= 2),
        "typeof" => (Func::Typeof, n == 1),
        "hex" => (Func::Hex, n == 1),
        "random" => (Func::Random, n == 0),
        "uuid7" => (Func::Uuid7, n == 0),
        _ => return Err(Error::UnknownFunction(name.to_string())),
    };
    if !ok {
        return Err(Error::Invalid(format!(
            "wrong number of arguments to function {name}()"
        )));
    }
    Ok(f)
}

/// The affinity an expression brings to a comparison: a column's, or a CAST's; none otherwise.
fn affinity_of(e: &PExpr, types: &[Affinity]) -> Affinity {
    match e {
        PExpr::Col(s) => types.get(*s).copied().unwrap_or(Affinity::None),
        PExpr::Cast(_, t) => t.affinity(),
        _ => Affinity::None,
    }
}

/// The affinities SQLite applies to each side of a comparison.
fn cmp_affinities(a: Affinity, b: Affinity) -> (Affinity, Affinity) {
    let numeric = |x: Affinity| matches!(x, Affinity::Integer | Affinity::Real | Affinity::Numeric);
    if numeric(a) && !numeric(b) {
        (Affinity::None, Affinity::Numeric)
    } else if numeric(b) && !numeric(a) {
        (Affinity::Numeric, Affinity::None)
    } else if a == Affinity::Text && b == Affinity::None {
        (Affinity::None, Affinity::Text)
    } else if b == Affinity::Text && a == Affinity::None {
        (Affinity::Text, Affinity::None)
    } else {
        (Affinity::None, Affinity::None)
    }
}

fn succ(mut p: Vec<u8>) -> Option<Vec<u8>> {
    while let Some(&last) = p.last() {
        if last == 0xFF {
            p.pop();
        } else {
            *p.last_mut().expect("non-empty") += 1;
            return Some(p);
        }
    }
    None
}
pub(crate) fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    succ(p.to_vec())
}

impl<'c> Planner<'c> {
    pub fn new(catalog: &'c Catalog) -> Self {
        Planner {
            catalog,
            scopes: Vec::new(),
            ctes: Vec::new(),
            alias_depth: 0,
        }
    }

    // ---- expressions ----

    /// The column types of the innermost scope's frame, by slot.
    fn frame_types(&self) -> Vec<Affinity> {
        let mut v = Vec::new();
        if let Some(s) = self.scopes.last() {
            for t in &s.tables {
                if v.len() < t.base + t.columns.len() {
                    v.resize(t.base + t.columns.len(), Affinity::None);
                }
                for (i, (_, ty)) in t.columns.iter().enumerate() {
                    v[t.base + i] = *ty;
                }
            }
        }
        v
    }

    fn resolve(&mut self, table: Option<&str>, name: &str) -> Result<PExpr> {
        let n = self.scopes.len();
        for depth in 0..n {
            let (found, ambiguous) = self.scopes[n - 1 - depth].column_named(table, name);
            if ambiguous {
                return Err(Error::AmbiguousColumn(name.to_string()));
            }
            if let Some((ti, ci)) = found {
                let scope = &mut self.scopes[n - 1 - depth];
                scope.tables[ti].needed[ci] = true;
                let slot = scope.tables[ti].base + ci;
                if depth == 0 {
                    return Ok(PExpr::Col(slot));
                }
                for k in 0..depth {
                    self.scopes[n - 1 - k].correlated = true;
                }
                return Ok(PExpr::Outer(depth, slot));
            }
            // An output alias of this query (SQLite lets WHERE and GROUP BY use them).
            if depth == 0 && table.is_none() && self.alias_depth < 8 {
                if let Some((_, e)) = self.scopes[n - 1]
                    .aliases
                    .iter()
                    .find(|(a, _)| a.eq_ignore_ascii_case(name))
                {
                    let e = e.clone();
                    self.alias_depth += 1;
                    let r = self.expr(&e);
                    self.alias_depth -= 1;
                    return r;
                }
            }
        }
        Err(Error::UnknownColumn(match table {
            Some(t) => format!("{t}.{name}"),
            None => name.to_string(),
        }))
    }

    fn scope(&self) -> &Scope {
        self.scopes
            .last()
            .expect("invariant: a query is planned inside a scope")
    }

    fn scope_mut(&mut self) -> &mut Scope {
        self.scopes
            .last_mut()
            .expect("invariant: a query is planned inside a scope")
    }

    /// Plans each expression of a list. A loop rather than `collect::<Result<Vec<_>>>()` at each
    /// call site: every such `collect` is its own copy of the same iterator code in the module.
    /// The list grows as `collect` grows it (nothing for no items, then room for four, doubled
    /// when full): another first capacity changes the heap's layout for everything allocated
    /// after it, which showed in the native instruction counts.
    fn exprs(&mut self, es: &[Expr]) -> Result<Vec<PExpr>> {
        let mut out = if es.is_empty() {
            Vec::new()
        } else {
            Vec::with_capacity(4)
        };
        for e in es {
            out.push(self.expr(e)?);
        }
        Ok(out)
    }

    pub fn expr(&mut self, e: &Expr) -> Result<PExpr> {
        Ok(match e {
            Expr::Literal(v) => PExpr::Lit(v.clone()),
            // Numbered by the parser.
            Expr::Param(ast::Param::Index(n) | ast::Param::Named(_, n)) => {
                PExpr::Param(*n as usize - 1)
            }
            Expr::Column { table, name } => self.resolve(table.as_deref(), name)?,
            Expr::Unary(op, a) => {
                let a = Box::new(self.expr(a)?);
                match op {
                    UnOp::Neg => PExpr::Neg(a),
                    UnOp::Pos => PExpr::Pos(a),
                    UnOp::Not => PExpr::Not(a),
                    UnOp::BitNot => PExpr::BitNot(a),
                }
            }
            Expr::Binary(op, a, b) => {
                let (pa, pb) = (self.expr(a)?, self.expr(b)?);
                self.binary(*op, pa, pb)
            }
            Expr::IsNull { expr, negated } => PExpr::IsNull(Box::new(self.expr(expr)?), *negated),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let x = self.expr(expr)?;
                let lo = self.expr(low)?;
                let hi = self.expr(high)?;
                let both = PExpr::And(
                    Box::new(self.binary(BinOp::Ge, x.clone(), lo)),
                    Box::new(self.binary(BinOp::Le, x, hi)),
                );
                if *negated {
                    PExpr::Not(Box::new(both))
                } else {
                    both
                }
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let x = self.expr(expr)?;
                let types = self.frame_types();
                let aff = affinity_of(&x, &types);
                let list = self.exprs(list)?;
                PExpr::InList(Box::new(x), list, *negated, aff)
            }
            Expr::InSelect {
                expr,
                query,
                negated,
            } => {
                let x = self.expr(expr)?;
                let q = self.subquery(query)?;
                if q.width != 1 {
                    return Err(Error::Invalid(format!(
                        "sub-select returns {} columns - expected 1",
                        q.width
                    )));
                }
                let types = self.frame_types();
                let (la, lb) = cmp_affinities(
                    affinity_of(&x, &types),
                    q.affinities.first().copied().unwrap_or(Affinity::None),
                );
                PExpr::InSub(Box::new(x), Rc::new(q), *negated, la, lb)
            }
            Expr::Exists { query, negated } => {
                PExpr::Exists(Rc::new(self.subquery(query)?), *negated)
            }
            Expr::Subquery(q) => {
                let mut q = self.subquery(q)?;
                if q.width != 1 {
                    return Err(Error::Invalid(format!(
                        "sub-select returns {} columns - expected 1",
                        q.width
                    )));
                }
                // A scalar subquery needs one row at most.
                if q.limit.is_none() {
                    q.limit = Some(PExpr::Lit(Value::Integer(1)));
                }
                PExpr::Scalar(Rc::new(q))
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                negated,
            } => PExpr::Like {
                expr: Box::new(self.expr(expr)?),
                pattern: Box::new(self.expr(pattern)?),
                escape: match escape {
                    Some(e) => Some(Box::new(self.expr(e)?)),
                    None => None,
                },
                negated: *negated,
            },
            Expr::Glob {
                expr,
                pattern,
                negated,
            } => PExpr::Glob {
                expr: Box::new(self.expr(expr)?),
                pattern: Box::new(self.expr(pattern)?),
                negated: *negated,
            },
            Expr::Case {
                operand,
                whens,
                else_,
            } => PExpr::Case {
                // `CASE x WHEN v` compares as `x = v` does, affinities included.
                operand: None,
                whens: match operand {
                    Some(o) => {
                        let x = self.expr(o)?;
                        let mut out = Vec::new();
                        for (a, b) in whens {
                            let v = self.expr(a)?;
                            out.push((self.binary(BinOp::Eq, x.clone(), v), self.expr(b)?));
                        }
                        out
                    }
                    None => {
                        let mut out = Vec::new();
                        for (a, b) in whens {
                            out.push((self.expr(a)?, self.expr(b)?));
                        }
                        out
                    }
                },
                else_: match else_ {
                    Some(e) => Some(Box::new(self.expr(e)?)),
                    None => None,
                },
            },
            Expr::Cast { expr, type_name } => PExpr::Cast(
                Box::new(self.expr(expr)?),
                ColType::from_decl(Some(type_name)),
            ),
            Expr::Function {
                name,
                args,
                distinct,
                star,
            } => {
                if let Some(agg) = is_aggregate(name, args.len(), *star) {
                    let collecting = self.scopes.last().is_some_and(|s| s.aggs.is_some());
                    if !collecting {
                        return Err(Error::Invalid(format!(
                            "misuse of aggregate function {name}()"
                        )));
                    }
                    // Arguments are planned over the rows being aggregated, not over groups.
                    let saved = self.scopes.last_mut().and_then(|s| s.aggs.take());
                    let pargs = self.exprs(args);
                    let scope = self.scope_mut();
                    scope.aggs = saved;
                    let pargs = pargs?;
                    let aggs = scope.aggs.as_mut().expect("collecting");
                    let spec = AggSpec {
                        func: agg,
                        args: pargs,
                        distinct: *distinct,
                    };
                    let idx = match aggs.iter().position(|a| *a == spec) {
                        Some(i) => i,
                        None => {
                            aggs.push(spec);
                            aggs.len() - 1
                        }
                    };
                    return Ok(PExpr::AggRef(idx));
                }
                if *distinct || *star {
                    return Err(Error::Invalid(format!("{name}() is not an aggregate")));
                }
                let f = scalar_func(name, args.len())?;
                let args = self.exprs(args)?;
                PExpr::Func(f, args)
            }
        })
    }

    fn binary(&mut self, op: BinOp, a: PExpr, b: PExpr) -> PExpr {
        let (a, b) = (Box::new(a), Box::new(b));
        match op {
            BinOp::And => PExpr::And(a, b),
            BinOp::Or => PExpr::Or(a, b),
            BinOp::Add => PExpr::Arith(Arith::Add, a, b),
            BinOp::Sub => PExpr::Arith(Arith::Sub, a, b),
            BinOp::Mul => PExpr::Arith(Arith::Mul, a, b),
            BinOp::Div => PExpr::Arith(Arith::Div, a, b),
            BinOp::Rem => PExpr::Arith(Arith::Rem, a, b),
            BinOp::Concat => PExpr::Concat(a, b),
            BinOp::BitAnd | BinOp::BitOr | BinOp::Shl | BinOp::Shr => PExpr::Bit(op, a, b),
            _ => {
                let types = self.frame_types();
                let (la, lb) = cmp_affinities(affinity_of(&a, &types), affinity_of(&b, &types));
                PExpr::Cmp(op, a, b, la, lb)
            }
        }
    }

    fn subquery(&mut self, q: &ast::Select) -> Result<QueryPlan> {
        self.query(q)
    }

    // ---- queries ----

    pub fn query(&mut self, q: &ast::Select) -> Result<QueryPlan> {
        let pushed = if let Some(w) = &q.with {
            let mut defs = Vec::new();
            for c in &w.ctes {
                defs.push((c.name.clone(), c.columns.clone(), c.query.clone()));
            }
            self.ctes.push(defs);
            true
        } else {
            false
        };
        let r = self.query_inner(q);
        if pushed {
            self.ctes.pop();
        }
        r
    }

    fn query_inner(&mut self, q: &ast::Select) -> Result<QueryPlan> {
        let single_core = matches!(q.body, ast::SelectBody::Core(_));
        if let (true, ast::SelectBody::Core(core)) = (single_core, &q.body) {
            return self.core_query(core, q);
        }
        // Compound or VALUES: ORDER BY refers to output columns by name or position.
        self.scopes.push(Scope::default());
        let r = self.body(&q.body);
        let correlated = self.scopes.pop().is_some_and(|s| s.correlated);
        let (body, columns) = r?;
        let width = columns.len();
        let mut order = Vec::new();
        for o in &q.order_by {
            let col = match &o.expr {
                Expr::Literal(Value::Integer(n)) if *n >= 1 && (*n as usize) <= width => {
                    *n as usize - 1
                }
                Expr::Column { name, .. } => columns
                    .iter()
                    .position(|c| c.eq_ignore_ascii_case(name))
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "ORDER BY term {name} does not match any column of the compound query"
                        ))
                    })?,
                _ => {
                    return Err(Error::Invalid(
                        "ORDER BY of a compound query must name an output column".into(),
                    ))
                }
            };
            order.push(SortKey {
                col,
                desc: o.desc,
                nulls_first: o.nulls_first.unwrap_or(!o.desc),
            });
        }
        let (limit, offset) = self.limits(q)?;
        Ok(QueryPlan {
            columns: columns.into(),
            body,
            order,
            affinities: vec![Affinity::None; width],
            width,
            limit,
            offset,
            correlated,
        })
    }

    fn limits(&mut self, q: &ast::Select) -> Result<(Option<PExpr>, Option<PExpr>)> {
        self.scopes.push(Scope::default());
        let l = q.limit.as_ref().map(|e| self.expr(e)).transpose();
        let o = q.offset.as_ref().map(|e| self.expr(e)).transpose();
        self.scopes.pop();
        Ok((l?, o?))
    }

    fn body(&mut self, b: &ast::SelectBody) -> Result<(Body, Vec<String>)> {
        match b {
            ast::SelectBody::Values(rows) => {
                let mut out = Vec::new();
                for r in rows {
                    out.push(self.exprs(r)?);
                }
                let n = rows.first().map_or(0, |r| r.len());
                Ok((
                    Body::Values(out),
                    (1..=n).map(|i| format!("column{i}")).collect(),
                ))
            }
            ast::SelectBody::Core(c) => {
                let empty = ast::Select {
                    with: None,
                    body: ast::SelectBody::Core(c.clone()),
                    order_by: vec![],
                    limit: None,
                    offset: None,
                };
                let p = self.core_query(c, &empty)?;
                if p.correlated {
                    if let Some(s) = self.scopes.last_mut() {
                        s.correlated = true;
                    }
                }
                let Body::Core(core) = p.body else {
                    return Err(Error::Invalid("invariant: core plan".into()));
                };
                Ok((Body::Core(core), p.columns.to_vec()))
            }
            ast::SelectBody::Union { all, left, right } => {
                let (l, lc) = self.body(left)?;
                let (r, rc) = self.body(right)?;
                if lc.len() != rc.len() {
                    return Err(Error::Invalid(
                        "SELECTs to the left and right of UNION do not have the same number of result columns".into(),
                    ));
                }
                Ok((
                    Body::Union {
                        all: *all,
                        left: Box::new(l),
                        right: Box::new(r),
                    },
                    lc,
                ))
            }
        }
    }

    fn find_cte(&self, name: &str) -> Option<(Vec<String>, ast::Select, usize)> {
        for (depth, defs) in self.ctes.iter().enumerate().rev() {
            if let Some((_, cols, q)) = defs.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(name)) {
                return Some((cols.clone(), q.clone(), depth));
            }
        }
        None
    }

    /// Plans a FROM source; returns the level's source, name and columns.
    fn plan_from_source(&mut self, item: &ast::FromItem) -> Result<SourceInfo> {
        match &item.source {
            ast::TableSource::Table(name) => {
                if let Some((cols, q, depth)) = self.find_cte(name) {
                    // A CTE sees only the CTEs defined before it.
                    let saved: Vec<_> = self.ctes.drain(depth..).collect();
                    let mut defs = saved[0].clone();
                    if let Some(p) = defs
                        .iter()
                        .position(|(n, _, _)| n.eq_ignore_ascii_case(name))
                    {
                        defs.truncate(p);
                    }
                    self.ctes.push(defs);
                    let saved_scopes = std::mem::take(&mut self.scopes);
                    let plan = self.query(&q);
                    self.scopes = saved_scopes;
                    self.ctes.pop();
                    self.ctes.extend(saved);
                    let plan = plan?;
                    let mut names = plan.columns.to_vec();
                    if !cols.is_empty() {
                        if cols.len() != plan.width {
                            return Err(Error::Invalid(format!(
                                "table {name} has {} values for {} columns",
                                plan.width,
                                cols.len()
                            )));
                        }
                        names = cols;
                    }
                    let alias = item.alias.clone().unwrap_or_else(|| name.clone());
                    let columns = names
                        .into_iter()
                        .zip(plan.affinities.iter().copied())
                        .collect();
                    return Ok((Source::Query(Rc::new(plan)), alias, columns));
                }
                let t = self.catalog.table(name)?.clone();
                let alias = item.alias.clone().unwrap_or_else(|| t.name.clone());
                let columns = t
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.ty.affinity()))
                    .collect();
                Ok((Source::Table(t), alias, columns))
            }
            ast::TableSource::Subquery(q) => {
                let saved_scopes = std::mem::take(&mut self.scopes);
                let plan = self.query(q);
                self.scopes = saved_scopes;
                let plan = plan?;
                let alias = item.alias.clone().unwrap_or_else(|| "subquery".into());
                let columns = plan
                    .columns
                    .iter()
                    .cloned()
                    .zip(plan.affinities.iter().copied())
                    .collect();
                Ok((Source::Query(Rc::new(plan)), alias, columns))
            }
        }
    }

    /// A result column's name: its alias, a column's name as its table declares it (without
    /// the table's), or the expression as written (`a+1`, `?`, `count(*)`), as SQLite names
    /// them.
    fn item_name(&self, e: &Expr, alias: &Option<String>, text: &str) -> String {
        if let Some(a) = alias {
            return a.clone();
        }
        let Expr::Column { table, name } = e else {
            return text.to_string();
        };
        // The innermost table that has it, as `resolve` finds it (an output alias keeps the
        // name as written).
        for scope in self.scopes.iter().rev() {
            if let (Some((ti, ci)), _) = scope.column_named(table.as_deref(), name) {
                return scope.tables[ti].columns[ci].0.clone();
            }
        }
        name.clone()
    }

    /// One SELECT core with the query's ORDER BY and LIMIT.
    fn core_query(&mut self, c: &ast::SelectCore, q: &ast::Select) -> Result<QueryPlan> {
        self.scopes.push(Scope::default());
        let r = self.core_query_in_scope(c, q);
        let scope = self.scopes.pop().expect("scope");
        let mut plan = r?;
        plan.correlated = scope.correlated;
        Ok(plan)
    }

    fn core_query_in_scope(&mut self, c: &ast::SelectCore, q: &ast::Select) -> Result<QueryPlan> {
        let (mut levels, frame_len, on_conds) = self.from_levels(c)?;
        let items = self.output_items(c)?;
        let mut conjuncts = self.conjuncts(c.where_.as_ref(), &on_conds)?;
        let is_agg = !c.group_by.is_empty()
            || items.iter().any(|(e, _)| has_agg(e))
            || c.having.as_ref().is_some_and(has_agg)
            || q.order_by.iter().any(|o| has_agg(&o.expr));
        if c.having.is_some() && !is_agg {
            return Err(Error::Invalid(
                "a GROUP BY clause is required before HAVING".into(),
            ));
        }
        let Output {
            names,
            width,
            project,
            order,
            mut agg,
            affinities,
        } = self.output(c, q, items, is_agg)?;

        reorder_joins(&mut levels, &mut conjuncts);
        let const_filters = place_conjuncts(&mut levels, conjuncts);

        // Needed columns, from the scope's record of every resolved reference.
        let scope_tables = &self.scope().tables;
        let needed: Vec<Vec<bool>> = levels
            .iter()
            .map(|l| {
                scope_tables
                    .iter()
                    .find(|t| t.base == l.base)
                    .map(|t| t.needed.clone())
                    .unwrap_or_else(|| vec![true; l.width])
            })
            .collect();
        let order_slots = if is_agg {
            None
        } else {
            order_slots(&order, &project, &levels)
        };
        let group_slots = group_slots(agg.as_ref(), &levels);
        let first_order = if is_agg {
            group_slots.as_deref()
        } else {
            order_slots.as_deref()
        };
        let order_served = choose_accesses(&mut levels, &needed, first_order);

        let (limit, offset) = self.limits(q)?;
        let mut ordered = order_served && !c.distinct && !is_agg;
        if let Some(a) = agg.as_mut() {
            a.streamed = order_served && group_slots.is_some();
            // Streamed groups come out in GROUP BY order: an ORDER BY on a prefix of the
            // GROUP BY columns, ascending, needs no sort.
            ordered = a.streamed
                && !c.distinct
                && order.iter().enumerate().all(|(i, k)| {
                    matches!(project.get(k.col), Some(PExpr::Col(s)) if *s == i)
                        && !k.desc
                        && k.nulls_first
                });
        }
        if !ordered && limit.is_some() && agg.is_none() && !c.distinct {
            top_k(&mut levels, &order, &project);
        }
        Ok(QueryPlan {
            affinities,
            columns: names.into(),
            body: Body::Core(Box::new(Core {
                moves: movable(&levels, &project, agg.is_some()),
                levels,
                frame_len,
                const_filters,
                agg,
                project,
                distinct: c.distinct,
                ordered,
            })),
            order,
            width,
            limit,
            offset,
            correlated: false,
        })
    }

    /// FROM: a join level per item, its columns added to the scope; with where each level's
    /// columns start in the frame, the frame's length, and each item's ON condition.
    #[allow(clippy::type_complexity)]
    fn from_levels(
        &mut self,
        c: &ast::SelectCore,
    ) -> Result<(Vec<Level>, usize, Vec<(usize, Expr)>)> {
        let mut levels = Vec::new();
        let mut base = 0;
        let mut on_conds: Vec<(usize, Expr)> = Vec::new();
        for (i, item) in c.from.iter().enumerate() {
            let (source, name, columns) = self.plan_from_source(item)?;
            let lname = name.clone();
            if self
                .scope()
                .tables
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(&lname))
            {
                return Err(Error::Invalid(format!(
                    "ambiguous table name {lname} in FROM: give one an alias"
                )));
            }
            let width = columns.len();
            self.scope_mut().tables.push(ScopeTable {
                name: name.clone(),
                needed: vec![false; width],
                columns,
                base,
                qualified_only: false,
            });
            if let Some(on) = &item.on {
                on_conds.push((i, on.clone()));
            }
            levels.push(Level {
                name,
                source,
                base,
                width,
                access: Access::Scan { reverse: false },
                left: item.join == Some(ast::JoinKind::Left),
                filters: vec![],
                after: vec![],
                pre_cols: vec![],
                post_cols: vec![],
                key_slot: false,
                topk: None,
            });
            base += width;
        }
        Ok((levels, base, on_conds))
    }

    /// The output columns (stars expanded) as AST, with their names; an aliased item's alias
    /// enters the scope.
    fn output_items(&mut self, c: &ast::SelectCore) -> Result<Vec<(Expr, String)>> {
        let mut items: Vec<(Expr, String)> = Vec::new();
        for it in &c.columns {
            match it {
                SelectItem::All => {
                    if c.from.is_empty() {
                        return Err(Error::Invalid("no tables specified for *".into()));
                    }
                    for t in &self.scope().tables {
                        for (cn, _) in &t.columns {
                            items.push((
                                Expr::Column {
                                    table: Some(t.name.clone()),
                                    name: cn.clone(),
                                },
                                cn.clone(),
                            ));
                        }
                    }
                }
                SelectItem::TableAll(tn) => {
                    let scope = self.scope();
                    let t = scope
                        .tables
                        .iter()
                        .find(|t| t.name.eq_ignore_ascii_case(tn))
                        .ok_or_else(|| Error::UnknownTable(tn.clone()))?;
                    for (cn, _) in &t.columns {
                        items.push((
                            Expr::Column {
                                table: Some(t.name.clone()),
                                name: cn.clone(),
                            },
                            cn.clone(),
                        ));
                    }
                }
                SelectItem::Expr { expr, alias, text } => {
                    items.push((expr.clone(), self.item_name(expr, alias, text)));
                    if let Some(a) = alias {
                        self.scope_mut().aliases.push((a.clone(), expr.clone()));
                    }
                }
            }
        }
        Ok(items)
    }

    /// WHERE and ON split into conjuncts, each bound; an ON conjunct names its level.
    fn conjuncts(
        &mut self,
        where_: Option<&Expr>,
        on_conds: &[(usize, Expr)],
    ) -> Result<Vec<(PExpr, Option<usize>)>> {
        let mut conjuncts: Vec<(PExpr, Option<usize>)> = Vec::new();
        if let Some(w) = where_ {
            if has_agg(w) {
                return Err(Error::Invalid(
                    "misuse of aggregate function in WHERE".into(),
                ));
            }
            let mut parts = Vec::new();
            split_and(w, &mut parts);
            for p in parts {
                conjuncts.push((self.expr(&p)?, None));
            }
        }
        for (lvl, on) in on_conds {
            let mut parts = Vec::new();
            split_and(on, &mut parts);
            for p in parts {
                conjuncts.push((self.expr(&p)?, Some(*lvl)));
            }
        }
        Ok(conjuncts)
    }

    /// The output: each item bound (within the aggregate scope when the query aggregates),
    /// ORDER BY resolved to output positions (an expression not among the items becomes a
    /// hidden column), and the aggregate plan with group columns and aggregates rewritten
    /// to the slots of its rows.
    fn output(
        &mut self,
        c: &ast::SelectCore,
        q: &ast::Select,
        items: Vec<(Expr, String)>,
        is_agg: bool,
    ) -> Result<Output> {
        let width = items.len();
        let names: Vec<String> = items.iter().map(|(_, n)| n.clone()).collect();
        let mut project = Vec::new();
        let mut agg = None;
        let mut group_exprs = Vec::new();
        if is_agg {
            for g in &c.group_by {
                let g = match g {
                    Expr::Literal(Value::Integer(n)) if *n >= 1 && (*n as usize) <= width => {
                        items[*n as usize - 1].0.clone()
                    }
                    g => g.clone(),
                };
                if has_agg(&g) {
                    return Err(Error::Invalid(
                        "aggregate functions are not allowed in the GROUP BY clause".into(),
                    ));
                }
                group_exprs.push(self.expr(&g)?);
            }
            self.scope_mut().aggs = Some(Vec::new());
        }
        for (e, _) in &items {
            project.push(self.expr(e)?);
        }
        let frame_aff = self.frame_types();
        let affinities: Vec<Affinity> =
            project.iter().map(|e| affinity_of(e, &frame_aff)).collect();
        // ORDER BY: output position, output alias, or an expression (appended as a hidden column).
        let mut order = Vec::new();
        for o in &q.order_by {
            let col = match &o.expr {
                Expr::Literal(Value::Integer(n)) => {
                    if *n < 1 || *n as usize > width {
                        return Err(Error::Invalid(format!(
                            "ORDER BY term out of range - should be between 1 and {width}"
                        )));
                    }
                    *n as usize - 1
                }
                Expr::Column { table: None, name }
                    if c.columns.iter().any(|it| matches!(it, SelectItem::Expr { alias: Some(a), .. } if a.eq_ignore_ascii_case(name))) =>
                {
                    names.iter().position(|n| n.eq_ignore_ascii_case(name)).expect("alias is an output name")
                }
                e => {
                    let p = self.expr(e)?;
                    match project.iter().position(|x| *x == p) {
                        Some(i) if i < width => i,
                        _ => {
                            project.push(p);
                            project.len() - 1
                        }
                    }
                }
            };
            order.push(SortKey {
                col,
                desc: o.desc,
                nulls_first: o.nulls_first.unwrap_or(!o.desc),
            });
        }
        let having = match &c.having {
            Some(h) => Some(self.expr(h)?),
            None => None,
        };
        if is_agg {
            let mut aggs = self.scope_mut().aggs.take().unwrap_or_default();
            let ng = group_exprs.len();
            let fix = |e: &mut PExpr, aggs: &mut Vec<AggSpec>| {
                rewrite(e, &mut |x| {
                    if let Some(i) = group_exprs.iter().position(|g| g == x) {
                        *x = PExpr::Col(i);
                        return true;
                    }
                    match x {
                        PExpr::AggRef(j) => {
                            *x = PExpr::Col(ng + *j);
                            true
                        }
                        PExpr::Col(_) => {
                            let spec = AggSpec {
                                func: AggFunc::Last,
                                args: vec![x.clone()],
                                distinct: false,
                            };
                            let j = match aggs.iter().position(|a| *a == spec) {
                                Some(j) => j,
                                None => {
                                    aggs.push(spec);
                                    aggs.len() - 1
                                }
                            };
                            *x = PExpr::Col(ng + j);
                            true
                        }
                        _ => false,
                    }
                });
            };
            for p in project.iter_mut() {
                fix(p, &mut aggs);
            }
            let mut having = having;
            if let Some(h) = having.as_mut() {
                fix(h, &mut aggs);
            }
            let mm: Vec<usize> = (0..aggs.len())
                .filter(|&i| matches!(aggs[i].func, AggFunc::Min | AggFunc::Max))
                .collect();
            agg = Some(AggPlan {
                group_by: group_exprs,
                minmax: if mm.len() == 1 { Some(mm[0]) } else { None },
                streamed: false,
                aggs,
                having,
            });
        }
        Ok(Output {
            names,
            width,
            project,
            order,
            agg,
            affinities,
        })
    }
}

/// Join order: inner joins only, greedily (see `join_order`). Without LEFT joins, ON is just
/// more WHERE, so every conjunct is freed from its level.
fn reorder_joins(levels: &mut Vec<Level>, conjuncts: &mut [(PExpr, Option<usize>)]) {
    if levels.len() > 1 && levels.len() <= 8 && levels.iter().all(|l| !l.left) {
        let order = join_order(levels, conjuncts);
        if order.iter().enumerate().any(|(i, &o)| i != o) {
            let mut old: Vec<Option<Level>> =
                std::mem::take(levels).into_iter().map(Some).collect();
            *levels = order
                .iter()
                .map(|&o| old[o].take().expect("a permutation"))
                .collect();
        }
        // Without LEFT joins, ON is just more WHERE.
        for c in conjuncts.iter_mut() {
            c.1 = None;
        }
    }
}

/// Places each conjunct on the first level where every column it reads is bound (an ON
/// conjunct no earlier than its own level, a LEFT level's after the join); returns those
/// that read no level.
fn place_conjuncts(levels: &mut [Level], conjuncts: Vec<(PExpr, Option<usize>)>) -> Vec<PExpr> {
    let mut const_filters = Vec::new();
    let level_of = |slot: usize, levels: &[Level]| {
        levels
            .iter()
            .position(|l| slot >= l.base && slot < l.base + l.width)
            .unwrap_or(0)
    };
    for (e, on_level) in conjuncts {
        let refs: Vec<usize> = slots(&e).into_iter().map(|s| level_of(s, levels)).collect();
        let correlated_sub = has_subquery(&e);
        let max = if correlated_sub && !levels.is_empty() {
            levels.len() - 1
        } else {
            refs.iter().copied().max().unwrap_or(0)
        };
        match on_level {
            Some(l) => {
                let l = l.max(max);
                levels[l].filters.push(e);
            }
            None if levels.is_empty() || (refs.is_empty() && !correlated_sub) => {
                const_filters.push(e)
            }
            None => {
                if levels[max].left {
                    levels[max].after.push(e);
                } else {
                    levels[max].filters.push(e);
                }
            }
        }
    }
    const_filters
}

/// The first level's columns (with direction and NULLs order) that ORDER BY sorts by, when
/// every sort key is a plain column of that level.
// Loops rather than `collect::<Option<Vec<_>>>()`: each such collect is its own copy of
// the iterator code in the module.
fn order_slots(
    order: &[SortKey],
    project: &[PExpr],
    levels: &[Level],
) -> Option<Vec<(usize, bool, bool)>> {
    if order.is_empty() || levels.is_empty() {
        None
    } else {
        let mut slots = Some(Vec::new());
        for k in order {
            match (level_slot(project.get(k.col), &levels[0]), &mut slots) {
                (Some(s), Some(v)) => v.push((s, k.desc, k.nulls_first)),
                _ => {
                    slots = None;
                    break;
                }
            }
        }
        slots
    }
}

/// GROUP BY over one table whose columns an index orders: the columns, for the groups to be
/// streamed.
fn group_slots(agg: Option<&AggPlan>, levels: &[Level]) -> Option<Vec<(usize, bool, bool)>> {
    match agg {
        Some(a) if !a.group_by.is_empty() && levels.len() == 1 => {
            let mut slots = Some(Vec::new());
            for g in &a.group_by {
                match (level_slot(Some(g), &levels[0]), &mut slots) {
                    (Some(s), Some(v)) => v.push((s, false, true)),
                    _ => {
                        slots = None;
                        break;
                    }
                }
            }
            slots
        }
        _ => None,
    }
}

/// Chooses each level's access path and splits its needed columns into those its filters
/// read first and the rest; returns whether the first level's access yields `first_order`.
fn choose_accesses(
    levels: &mut [Level],
    needed: &[Vec<bool>],
    first_order: Option<&[(usize, bool, bool)]>,
) -> bool {
    let mut order_served = false;
    for li in 0..levels.len() {
        let (access, served, consumed) = choose_access(
            levels,
            li,
            &needed[li],
            if li == 0 { first_order } else { None },
        );
        if li == 0 {
            order_served = served;
        }
        let lvl = &mut levels[li];
        lvl.access = access;
        remove_consumed(&mut lvl.filters, consumed);
        let mut pre = vec![false; lvl.width];
        let mut all = false;
        for f in &lvl.filters {
            if has_subquery(f) {
                all = true;
            }
            for s in slots(f) {
                if s >= lvl.base && s < lvl.base + lvl.width {
                    pre[s - lvl.base] = true;
                }
            }
        }
        if let Access::Hash { .. } = lvl.access {
            all = true;
        }
        for c in 0..lvl.width {
            if all && needed[li][c] {
                pre[c] = true;
            }
        }
        lvl.pre_cols = (0..lvl.width).filter(|&c| pre[c]).collect();
        lvl.post_cols = (0..lvl.width)
            .filter(|&c| needed[li][c] && !pre[c])
            .collect();
    }
    order_served
}

/// Top-k, for an unordered ORDER BY ... LIMIT without aggregates or DISTINCT: marks the
/// level's first sort key for the executor to keep only the best rows.
fn top_k(levels: &mut [Level], order: &[SortKey], project: &[PExpr]) {
    // Top-k: ORDER BY ... LIMIT over one table, sorted in the executor, whose first sort
    // key is a plain column of that table.
    if levels.len() == 1 {
        let lvl = &mut levels[0];
        let first = order
            .first()
            .and_then(|k| Some((k, level_slot(project.get(k.col), lvl)?)));
        if let (Some((k, col)), Source::Table(_), Access::Scan { .. } | Access::Index { .. }) =
            (first, &lvl.source, &lvl.access)
        {
            if let Some(i) = lvl.post_cols.iter().position(|&p| p == col) {
                lvl.post_cols.remove(i);
                lvl.pre_cols.push(col);
                cairn_store::sort::sort(&mut lvl.pre_cols);
            }
            if lvl.pre_cols.contains(&col) {
                lvl.topk = Some(SortKey { col, ..k.clone() });
            }
        }
    }
}

/// A core query's bound output (`Planner::output`).
struct Output {
    names: Vec<String>,
    width: usize,
    project: Vec<PExpr>,
    order: Vec<SortKey>,
    agg: Option<AggPlan>,
    affinities: Vec<Affinity>,
}

/// Orders inner-joined levels greedily: first the table a constant condition narrows best
/// (primary key or unique equality, then index equality, then a range), then at each step the
/// table the placed ones reach best (an equality on its key or an index, then any equality,
/// which can be hashed), ties kept in the written order. No statistics exist yet, so this
/// only looks at the shape of the conditions.
fn join_order(levels: &[Level], conjuncts: &[(PExpr, Option<usize>)]) -> Vec<usize> {
    let level_of = |slot: usize| {
        levels
            .iter()
            .position(|l| slot >= l.base && slot < l.base + l.width)
    };
    // How well a column can be looked up: 3 primary key/unique, 2 leading index column, 0 not.
    let lookup = |li: usize, col: usize| -> i32 {
        let Source::Table(t) = &levels[li].source else {
            return 0;
        };
        let pk = t.key_columns();
        if pk.len() == 1 && pk[0] == col {
            return 3;
        }
        let mut best = 0;
        for ix in &t.indexes {
            if ix.columns.first() == Some(&col) {
                best = best.max(if ix.unique && ix.columns.len() == 1 {
                    3
                } else {
                    2
                });
            }
        }
        if pk.first() == Some(&col) {
            best = best.max(2);
        }
        best
    };
    // (level, column, other side's levels, op) for each comparison of a column.
    let mut facts: Vec<(usize, usize, Vec<usize>, BinOp)> = Vec::new();
    for (e, _) in conjuncts {
        if let PExpr::Cmp(op, a, b, _, _) = e {
            for (x, y) in [(a, b), (b, a)] {
                if let PExpr::Col(s) = **x {
                    let Some(li) = level_of(s) else { continue };
                    if has_subquery(y) {
                        continue;
                    }
                    let mut other: Vec<usize> = slots(y).into_iter().filter_map(level_of).collect();
                    cairn_store::sort::sort(&mut other);
                    other.dedup();
                    if other.contains(&li) {
                        continue;
                    }
                    facts.push((li, s - levels[li].base, other, *op));
                }
            }
        }
    }
    let mut placed: Vec<usize> = Vec::new();
    while placed.len() < levels.len() {
        let mut best: Option<(i32, usize)> = None;
        for li in 0..levels.len() {
            if placed.contains(&li) {
                continue;
            }
            let mut score = 0;
            for (l, col, other, op) in &facts {
                if *l != li || !other.iter().all(|o| placed.contains(o)) {
                    continue;
                }
                let joined = !other.is_empty();
                let s = match op {
                    BinOp::Eq => {
                        let k = lookup(li, *col);
                        if k > 0 {
                            k * 10 + joined as i32
                        } else if joined {
                            5
                        } else {
                            1
                        }
                    }
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge if lookup(li, *col) > 0 => 8,
                    _ => 1,
                };
                score = score.max(s);
            }
            // Once something is placed, a table no condition reaches would be a cross product.
            if !placed.is_empty() && score < 5 {
                score -= 100;
            }
            if best.is_none_or(|b| score > b.0) {
                best = Some((score, li));
            }
        }
        placed.push(best.expect("an unplaced level").1);
    }
    placed
}

/// A conjunct's usable shape for an index: column (table-relative) compared with an expression
/// that does not depend on this level or later ones.
enum Usable {
    Eq(usize, PExpr, Affinity),
    In(usize, Vec<PExpr>, Affinity),
    Range(usize, BinOp, PExpr),
    InSub(usize, Rc<QueryPlan>, Affinity),
}

/// Whether frame slot `s` belongs to a level joined before level `li` (bound when `li` runs).
fn bound_before(levels: &[Level], li: usize, s: usize) -> bool {
    levels[..li]
        .iter()
        .any(|l| s >= l.base && s < l.base + l.width)
}

fn independent(e: &PExpr, levels: &[Level], li: usize) -> bool {
    !has_subquery(e) && slots(e).iter().all(|&s| bound_before(levels, li, s))
}

fn usable(f: &PExpr, levels: &[Level], li: usize) -> Option<Usable> {
    let lvl = &levels[li];
    let local = |e: &PExpr| level_slot(Some(e), lvl);
    match f {
        PExpr::Cmp(op, a, b, la, lb) => {
            let flip = |op: BinOp| match op {
                BinOp::Lt => BinOp::Gt,
                BinOp::Le => BinOp::Ge,
                BinOp::Gt => BinOp::Lt,
                BinOp::Ge => BinOp::Le,
                o => o,
            };
            let (col, other, op, col_aff, other_aff) = if let Some(c) = local(a) {
                (c, b, *op, *la, *lb)
            } else if let Some(c) = local(b) {
                (c, a, flip(*op), *lb, *la)
            } else {
                return None;
            };
            if col_aff != Affinity::None || !independent(other, levels, li) {
                return None;
            }
            match op {
                BinOp::Eq => Some(Usable::Eq(col, (**other).clone(), other_aff)),
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    Some(Usable::Range(col, op, affine((**other).clone(), other_aff)))
                }
                _ => None,
            }
        }
        PExpr::InList(a, list, false, aff) => {
            let c = local(a)?;
            if list.is_empty()
                || list.len() > 1000
                || !list.iter().all(|e| independent(e, levels, li))
            {
                return None;
            }
            Some(Usable::In(c, list.clone(), *aff))
        }
        // `col IN (SELECT ...)` with no conversion of the column: probe with the subquery's
        // values. Correlated subqueries change per outer row and are not used this way.
        PExpr::InSub(a, q, false, Affinity::None, lb) if !q.correlated => {
            let c = local(a)?;
            Some(Usable::InSub(c, q.clone(), *lb))
        }
        _ => None,
    }
}

/// The column of `lvl` that `e` reads, counted from the level's first column, if `e` is a plain
/// column of that level.
fn level_slot(e: Option<&PExpr>, lvl: &Level) -> Option<usize> {
    match e {
        Some(PExpr::Col(s)) if *s >= lvl.base && *s < lvl.base + lvl.width => Some(*s - lvl.base),
        _ => None,
    }
}

/// Chooses the access path of level `li`; also says whether it yields rows in `order` (only
/// asked for the first level).
fn choose_access(
    levels: &[Level],
    li: usize,
    needed: &[bool],
    order: Option<&[(usize, bool, bool)]>,
) -> (Access, bool, Vec<usize>) {
    let lvl = &levels[li];
    // Each usable conjunct with its position in the level's filters.
    let uses: Vec<(usize, Usable)> = lvl
        .filters
        .iter()
        .enumerate()
        .filter_map(|(i, f)| usable(f, levels, li).map(|u| (i, u)))
        .collect();
    let table = match &lvl.source {
        Source::Table(t) => t.clone(),
        Source::Query(_) => {
            return (hash_or_scan(levels, li), false, vec![]);
        }
    };
    // Candidate key orders: the primary tree (None) and each index.
    let mut cands: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
    let pk = table.key_columns();
    if !pk.is_empty() {
        cands.push((None, pk.clone()));
    }
    for (i, ix) in table.indexes.iter().enumerate() {
        let mut cols = ix.columns.clone();
        cols.extend(pk.iter().copied());
        cands.push((Some(i), cols));
    }
    let mut best: Option<(i64, Access, bool, Vec<usize>)> = None;
    for (index, cols) in &cands {
        let mut sub_probe: Option<(Rc<QueryPlan>, Affinity)> = None;
        // Filters the key range implements exactly (so they need no check per row).
        let mut consumed: Vec<usize> = Vec::new();
        let mut probes: Vec<Vec<PExpr>> = vec![vec![]];
        let mut eq_cols = Vec::new();
        let mut lower = None;
        let mut upper = None;
        let key_len = match index {
            Some(i) => table.indexes[*i].columns.len(),
            None => pk.len(),
        };
        for (pos, &c) in cols.iter().enumerate().take(key_len) {
            let eq = uses.iter().find_map(|(i, u)| match u {
                Usable::Eq(col, e, aff) if *col == c => Some((*i, vec![affine(e.clone(), *aff)])),
                _ => None,
            });
            let inl = uses.iter().find_map(|(i, u)| match u {
                Usable::In(col, l, aff) if *col == c => Some((
                    *i,
                    l.iter()
                        .map(|e| affine(e.clone(), *aff))
                        .collect::<Vec<_>>(),
                )),
                _ => None,
            });
            let insub = uses.iter().find_map(|(i, u)| match u {
                Usable::InSub(col, q, aff) if *col == c && pos == 0 => {
                    Some((*i, (q.clone(), *aff)))
                }
                _ => None,
            });
            let alts = match (eq, inl) {
                (Some((i, e)), _) => {
                    consumed.push(i);
                    e
                }
                (None, Some((i, l))) if probes.len() * l.len() <= 1000 => {
                    consumed.push(i);
                    l
                }
                (None, None) if insub.is_some() => {
                    let (i, sp) = insub.expect("checked");
                    consumed.push(i);
                    sub_probe = Some(sp);
                    eq_cols.push(c);
                    break;
                }
                _ => {
                    for (i, u) in &uses {
                        if let Usable::Range(col, op, e) = u {
                            if *col == c {
                                match op {
                                    BinOp::Gt | BinOp::Ge if lower.is_none() => {
                                        consumed.push(*i);
                                        lower = Some((e.clone(), *op == BinOp::Ge))
                                    }
                                    BinOp::Lt | BinOp::Le if upper.is_none() => {
                                        consumed.push(*i);
                                        upper = Some((e.clone(), *op == BinOp::Le))
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                    break;
                }
            };
            probes = probes
                .iter()
                .flat_map(|p| {
                    alts.iter().map(move |a| {
                        let mut p = p.clone();
                        p.push(a.clone());
                        p
                    })
                })
                .collect();
            eq_cols.push(c);
            let _ = pos;
        }
        // Keys normalize integral reals to integers, so an ANY or NUMERIC column's type can only
        // be read from the row.
        let covering = index.is_none()
            || needed.iter().enumerate().all(|(c, &n)| {
                !n || (cols.contains(&c)
                    && !matches!(table.columns[c].ty, ColType::Any | ColType::Numeric))
            });
        // Does this order serve ORDER BY?
        let mut serves = false;
        let mut reverse = false;
        if let Some(ord) = order {
            if probes.len() == 1 && sub_probe.is_none() {
                let rest: Vec<usize> = cols
                    .iter()
                    .copied()
                    .filter(|c| !eq_cols.contains(c))
                    .collect();
                let terms: Vec<&(usize, bool, bool)> = ord
                    .iter()
                    .filter(|(s, _, _)| !eq_cols.contains(s))
                    .collect();
                let dir = terms.first().is_some_and(|t| t.1);
                serves = terms.len() <= rest.len()
                    && terms
                        .iter()
                        .zip(&rest)
                        .all(|((s, d, nf), c)| s == c && *d == dir && *nf != dir);
                reverse = dir;
            }
        }
        let eqn = eq_cols.len() as i64;
        if eqn == 0 && lower.is_none() && upper.is_none() && !serves {
            continue;
        }
        let unique_hit = match index {
            None => eqn as usize == key_len,
            Some(i) => table.indexes[*i].unique && eqn as usize == key_len,
        };
        let mut score = eqn * 100 + (lower.is_some() as i64 + upper.is_some() as i64) * 30;
        if unique_hit {
            score += 1000;
        }
        if covering {
            score += 5;
        }
        if index.is_none() {
            score += 3;
        }
        if serves {
            score += 10;
        }
        if probes.len() > 1 {
            score -= 1;
        }
        if best.as_ref().is_none_or(|b| score > b.0) {
            best = Some((
                score,
                Access::Index {
                    index: *index,
                    probes,
                    lower,
                    upper,
                    reverse,
                    covering: covering && index.is_some(),
                    sub_probe,
                },
                serves,
                consumed,
            ));
        }
    }
    if let Some((_, a, serves, consumed)) = best {
        return (a, serves, consumed);
    }
    let scan_serves = false;
    (hash_or_scan(levels, li), scan_serves, vec![])
}

/// Drops the filters an index range implements exactly. Sound because the range is built
/// from the same expressions with the comparison's affinity applied, keys order values as SQL
/// compares them (equal numbers have equal keys), and NULLs fall outside every range: so a row
/// is in the range exactly when those conjuncts are true.
fn remove_consumed(filters: &mut Vec<PExpr>, mut consumed: Vec<usize>) {
    cairn_store::sort::sort(&mut consumed);
    consumed.dedup();
    for i in consumed.into_iter().rev() {
        filters.remove(i);
    }
}

/// Wraps a probe expression so the executor applies the comparison's affinity to it.
fn affine(e: PExpr, aff: Affinity) -> PExpr {
    match aff {
        Affinity::None | Affinity::Blob => e,
        a => PExpr::Affine(Box::new(e), a),
    }
}

fn hash_or_scan(levels: &[Level], li: usize) -> Access {
    let lvl = &levels[li];
    if li > 0 {
        for f in &lvl.filters {
            if let PExpr::Cmp(BinOp::Eq, a, b, la, lb) = f {
                let local = |e: &PExpr| {
                    let s = slots(e);
                    !s.is_empty()
                        && !has_subquery(e)
                        && s.iter().all(|&s| s >= lvl.base && s < lvl.base + lvl.width)
                };
                let outer = |e: &PExpr| {
                    let s = slots(e);
                    !s.is_empty()
                        && !has_subquery(e)
                        && s.iter().all(|&s| bound_before(levels, li, s))
                };
                // Both sides are hashed after the comparison's affinities are applied, so
                // equal keys mean the comparison holds.
                if local(a) && outer(b) {
                    return Access::Hash {
                        build: affine((**a).clone(), *la),
                        probe: affine((**b).clone(), *lb),
                    };
                }
                if local(b) && outer(a) {
                    return Access::Hash {
                        build: affine((**b).clone(), *lb),
                        probe: affine((**a).clone(), *la),
                    };
                }
            }
        }
    }
    Access::Scan { reverse: false }
}

// ---- DML and table-level scopes ----

impl<'c> Planner<'c> {
    /// Plans expressions over one table's row (CHECK, RETURNING, DEFAULT with no table).
    pub fn with_table_scope<T>(
        &mut self,
        tables: &[(&str, &Table)],
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let mut scope = Scope::default();
        let mut base = 0;
        for (name, t) in tables {
            scope.tables.push(ScopeTable {
                name: name.to_string(),
                columns: t
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.ty.affinity()))
                    .collect(),
                base,
                needed: vec![false; t.columns.len()],
                qualified_only: *name == "excluded",
            });
            base += t.columns.len();
        }
        self.scopes.push(scope);
        let r = f(self);
        self.scopes.pop();
        r
    }

    pub fn returning(
        &mut self,
        items: &[SelectItem],
        t: &Table,
        name: &str,
    ) -> Result<(Vec<PExpr>, Vec<String>)> {
        let mut exprs = Vec::new();
        let mut names = Vec::new();
        self.with_table_scope(&[(name, t)], |p| {
            for it in items {
                match it {
                    SelectItem::All | SelectItem::TableAll(_) => {
                        for (i, c) in t.columns.iter().enumerate() {
                            exprs.push(PExpr::Col(i));
                            names.push(c.name.clone());
                        }
                    }
                    SelectItem::Expr { expr, alias, text } => {
                        if has_agg(expr) {
                            return Err(Error::Invalid(
                                "aggregate functions are not allowed in RETURNING".into(),
                            ));
                        }
                        exprs.push(p.expr(expr)?);
                        names.push(p.item_name(expr, alias, text));
                    }
                }
            }
            Ok(())
        })?;
        Ok((exprs, names))
    }

    pub fn insert(&mut self, ins: &ast::Insert) -> Result<InsertPlan> {
        if let Some(w) = &ins.with {
            self.ctes.push(
                w.ctes
                    .iter()
                    .map(|c| (c.name.clone(), c.columns.clone(), c.query.clone()))
                    .collect(),
            );
        }
        let r = self.insert_inner(ins);
        if ins.with.is_some() {
            self.ctes.pop();
        }
        r
    }

    fn insert_inner(&mut self, ins: &ast::Insert) -> Result<InsertPlan> {
        let table = self.catalog.table(&ins.table)?.clone();
        let targets: Vec<usize> = if ins.columns.is_empty() {
            (0..table.columns.len()).collect()
        } else {
            let mut v = Vec::new();
            for c in &ins.columns {
                let i = table
                    .column(c)
                    .ok_or_else(|| Error::UnknownColumn(format!("{}.{c}", table.name)))?;
                if v.contains(&i) {
                    return Err(Error::Invalid(format!("column {c} is listed twice")));
                }
                v.push(i);
            }
            v
        };
        let rows = match &ins.source {
            ast::InsertSource::Values(rows) => {
                let mut out = Vec::new();
                self.scopes.push(Scope::default());
                for r in rows {
                    if r.len() != targets.len() {
                        self.scopes.pop();
                        return Err(Error::Invalid(format!(
                            "table {} has {} columns but {} values were supplied",
                            table.name,
                            targets.len(),
                            r.len()
                        )));
                    }
                    let row = self.exprs(r);
                    match row {
                        Ok(row) => out.push(row),
                        Err(e) => {
                            self.scopes.pop();
                            return Err(e);
                        }
                    }
                }
                self.scopes.pop();
                InsertRows::Values(out)
            }
            ast::InsertSource::Select(q) => {
                let plan = self.query(q)?;
                if plan.width != targets.len() {
                    return Err(Error::Invalid(format!(
                        "table {} has {} columns but the SELECT gives {} values",
                        table.name,
                        targets.len(),
                        plan.width
                    )));
                }
                InsertRows::Query(Rc::new(plan))
            }
            ast::InsertSource::DefaultValues => InsertRows::Values(vec![vec![]]),
        };
        let default_values = matches!(ins.source, ast::InsertSource::DefaultValues);
        let mut columns = Vec::new();
        self.scopes.push(Scope::default());
        for (i, c) in table.columns.iter().enumerate() {
            let src = match targets.iter().position(|&t| t == i) {
                Some(p) if !default_values => ColSource::Input(p),
                _ => ColSource::Default(match &c.default {
                    Some(d) => match self.expr(d) {
                        Ok(e) => Some(e),
                        Err(e) => {
                            self.scopes.pop();
                            return Err(e);
                        }
                    },
                    None => None,
                }),
            };
            columns.push(src);
        }
        self.scopes.pop();
        let upsert = match &ins.upsert {
            None => None,
            Some(u) => {
                let target = if u.target.is_empty() {
                    None
                } else {
                    let cols = table.columns_named(&u.target)?;
                    let mut sorted = cols.clone();
                    cairn_store::sort::sort(&mut sorted);
                    let same = |v: &[usize]| {
                        let mut s = v.to_vec();
                        cairn_store::sort::sort(&mut s);
                        s == sorted
                    };
                    if !table.key_columns().is_empty() && same(&table.key_columns()) {
                        Some(None)
                    } else if let Some(i) = table
                        .indexes
                        .iter()
                        .position(|ix| ix.unique && same(&ix.columns))
                    {
                        Some(Some(i))
                    } else {
                        return Err(Error::Invalid(
                            "ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint".into(),
                        ));
                    }
                };
                let set = match &u.update {
                    None => None,
                    Some((sets, w)) => {
                        let tname = table.name.clone();
                        let r = self.with_table_scope(
                            &[(&tname, &table), ("excluded", &table)],
                            |p| {
                                let mut out = Vec::new();
                                for (c, e) in sets {
                                    let i = table.column(c).ok_or_else(|| {
                                        Error::UnknownColumn(format!("{}.{c}", table.name))
                                    })?;
                                    out.push((i, p.expr(e)?));
                                }
                                let w = w.as_ref().map(|w| p.expr(w)).transpose()?;
                                Ok((out, w))
                            },
                        )?;
                        Some(r)
                    }
                };
                Some(UpsertPlan { target, set })
            }
        };
        let (returning, returning_names) =
            self.returning(&ins.returning, &table, &table.name.clone())?;
        Ok(InsertPlan {
            table,
            columns,
            rows,
            or: ins.or,
            upsert,
            returning,
            returning_names: returning_names.into(),
        })
    }

    /// A single-table scan of `table` filtered by `where_`, all columns decoded, as UPDATE and
    /// DELETE need.
    fn write_scan(
        &mut self,
        table: &Rc<Table>,
        alias: &str,
        where_: Option<&Expr>,
    ) -> Result<Core> {
        let t = table.clone();
        let filters = self.with_table_scope(&[(alias, &t)], |p| {
            let mut parts = Vec::new();
            if let Some(w) = where_ {
                if has_agg(w) {
                    return Err(Error::Invalid(
                        "misuse of aggregate function in WHERE".into(),
                    ));
                }
                split_and(w, &mut parts);
            }
            p.exprs(&parts)
        })?;
        let width = t.columns.len();
        let mut lvl = Level {
            name: alias.to_string(),
            source: Source::Table(t.clone()),
            base: 0,
            width,
            access: Access::Scan { reverse: false },
            left: false,
            filters,
            after: vec![],
            pre_cols: vec![],
            post_cols: vec![],
            key_slot: true,
            topk: None,
        };
        let needed = vec![true; width];
        let (access, _, consumed) = choose_access(std::slice::from_ref(&lvl), 0, &needed, None);
        lvl.access = access;
        remove_consumed(&mut lvl.filters, consumed);
        if let Access::Index { covering, .. } = &mut lvl.access {
            *covering = false;
        }
        let mut pre = vec![false; width];
        let mut all = false;
        for f in &lvl.filters {
            all |= has_subquery(f);
            for s in slots(f) {
                pre[s] = true;
            }
        }
        lvl.pre_cols = (0..width).filter(|&c| pre[c] || all).collect();
        lvl.post_cols = (0..width).filter(|&c| !(pre[c] || all)).collect();
        Ok(Core {
            levels: vec![lvl],
            // One extra slot after the row holds the row's primary key bytes.
            frame_len: width + 1,
            const_filters: vec![],
            agg: None,
            project: vec![],
            moves: 0,
            distinct: false,
            ordered: false,
        })
    }

    pub fn update(&mut self, u: &ast::Update) -> Result<WritePlan> {
        let table = self.catalog.table(&u.table)?.clone();
        let alias = u.alias.clone().unwrap_or_else(|| table.name.clone());
        let scan = self.write_scan(&table, &alias, u.where_.as_ref())?;
        let t = table.clone();
        let set = self.with_table_scope(&[(&alias, &t)], |p| {
            let mut out = Vec::new();
            for (c, e) in &u.set {
                let i = t
                    .column(c)
                    .ok_or_else(|| Error::UnknownColumn(format!("{}.{c}", t.name)))?;
                if has_agg(e) {
                    return Err(Error::Invalid("misuse of aggregate function in SET".into()));
                }
                out.push((i, p.expr(e)?));
            }
            Ok(out)
        })?;
        let (returning, returning_names) = self.returning(&u.returning, &table, &alias)?;
        let key = table.key_columns();
        // A replicated table's capture reads the key, the scope column and the columns set
        // (`Changes::push_in_place`), unless the row moves scope or has counters, whose
        // capture and merge read the whole row.
        let keys_only = returning.is_empty()
            && table.checks.is_empty()
            && table.replicated.as_ref().is_none_or(|r| {
                r.counters.is_empty() && set.iter().all(|(c, _)| Some(*c) != r.scope)
            })
            && set.iter().all(|(c, e)| {
                !key.contains(c)
                    && !table.indexes.iter().any(|ix| ix.columns.contains(c))
                    && !has_subquery(e)
            });
        let mut set_reads = Vec::new();
        let mut scan = scan;
        if keys_only {
            for (_, e) in &set {
                set_reads.extend(slots(e));
            }
            if let Some(r) = &table.replicated {
                set_reads.extend(key.iter().chain(&r.scope).chain(set.iter().map(|(c, _)| c)));
            }
            cairn_store::sort::sort(&mut set_reads);
            set_reads.dedup();
            scan.levels[0].post_cols.clear();
        }
        Ok(WritePlan {
            table,
            scan,
            set,
            or: u.or,
            returning,
            returning_names: returning_names.into(),
            keys_only,
            set_reads,
        })
    }

    pub fn delete(&mut self, d: &ast::Delete) -> Result<WritePlan> {
        let table = self.catalog.table(&d.table)?.clone();
        let alias = d.alias.clone().unwrap_or_else(|| table.name.clone());
        let mut scan = self.write_scan(&table, &alias, d.where_.as_ref())?;
        let (returning, returning_names) = self.returning(&d.returning, &table, &alias)?;
        let keys_only =
            returning.is_empty() && table.indexes.is_empty() && table.replicated.is_none();
        if keys_only {
            scan.levels[0].post_cols.clear();
        }
        Ok(WritePlan {
            table,
            scan,
            set: vec![],
            or: ast::Conflict::Abort,
            returning,
            returning_names: returning_names.into(),
            keys_only,
            set_reads: vec![],
        })
    }

    /// Plans a CHECK constraint or DEFAULT over a table row.
    pub fn table_expr(&mut self, t: &Table, e: &Expr) -> Result<PExpr> {
        self.with_table_scope(&[(&t.name.clone(), t)], |p| p.expr(e))
    }
}

/// The key columns of `t` in tree order for an access path.
pub fn access_columns(t: &Table, index: Option<usize>) -> Vec<usize> {
    let pk = t.key_columns();
    match index {
        None => pk,
        Some(i) => {
            let mut c = t.indexes[i].columns.clone();
            c.extend(pk);
            c
        }
    }
}
