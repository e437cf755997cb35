//! Binding: names resolved to frame slots against the scopes, and AST expressions turned into
//! plan expressions ([`super::PExpr`]) with functions, affinities and aggregates resolved.

use crate::error::{Error, Result};
use crate::parse::ast::{self, BinOp, Expr, UnOp};
use crate::plan::planner::Planner;
use crate::plan::*;
use crate::types::{Affinity, Arith, ColType};
use cairn_value::Value;
use std::rc::Rc;

pub fn is_aggregate(name: &str, nargs: usize, star: bool) -> Option<AggFunc> {
    Some(match (name, nargs) {
        ("count", 0) if star => AggFunc::CountStar,
        ("count", 1) => AggFunc::Count,
        ("sum", 1) => AggFunc::Sum,
        ("total", 1) => AggFunc::Total,
        ("avg", 1) => AggFunc::Avg,
        ("min", 1) => AggFunc::Min,
        ("max", 1) => AggFunc::Max,
        ("group_concat", 1 | 2) | ("string_agg", 2) => AggFunc::GroupConcat,
        ("json_group_array", 1) => AggFunc::JsonArray,
        ("json_group_object", 2) => AggFunc::JsonObject,
        _ => return None,
    })
}

pub(super) fn has_agg(e: &Expr) -> bool {
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
        // The call itself is not an aggregate; what it reads may be.
        Expr::Window { func, .. } => e.each_child(&mut |c| {
            if std::ptr::eq(c, &**func) {
                c.each_child(&mut |x| walk_ast(x, f));
            } else {
                walk_ast(c, f);
            }
        }),
        _ => e.each_child(&mut |c| walk_ast(c, f)),
    }
}

/// Splits a condition into conjuncts; `x BETWEEN a AND b` becomes `x >= a` and `x <= b`, so
/// each bound can narrow an index range.
pub(super) fn split_and(e: &Expr, out: &mut Vec<Expr>) {
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

/// Whether `name` is a scalar function (with any number of arguments).
pub(super) fn scalar_exists(name: &str) -> bool {
    !matches!(scalar_func(name, 0), Err(Error::UnknownFunction(_)))
}

fn scalar_func(name: &str, n: usize) -> Result<Func> {
    use crate::exec::eval::DateFn;
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
        "char" => (Func::Char, true),
        "random" => (Func::Random, n == 0),
        "uuid7" => (Func::Uuid7, n == 0),
        "date" => (Func::Date(DateFn::Date), true),
        "time" => (Func::Date(DateFn::Time), true),
        "datetime" => (Func::Date(DateFn::DateTime), true),
        "julianday" => (Func::Date(DateFn::JulianDay), true),
        "unixepoch" => (Func::Date(DateFn::UnixEpoch), true),
        "strftime" => (Func::Date(DateFn::Strftime), n >= 1),
        _ => match crate::exec::eval::json_fn_lookup(name, n) {
            Some((j, ok)) => (Func::Json(j), ok),
            None => return Err(Error::UnknownFunction(name.to_string())),
        },
    };
    if !ok {
        return Err(Error::Invalid(format!(
            "wrong number of arguments to function {name}()"
        )));
    }
    Ok(f)
}

/// The affinity an expression brings to a comparison: a column's, or a CAST's; none otherwise.
pub(super) fn affinity_of(e: &PExpr, types: &[Affinity]) -> Affinity {
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

impl Planner<'_> {
    /// An expression's affinity for a comparison; an enclosing query's column has its
    /// table's, as in SQLite.
    fn affinity(&self, e: &PExpr, types: &[Affinity]) -> Affinity {
        let PExpr::Outer(d, slot) = *e else {
            return affinity_of(e, types);
        };
        let n = self.scopes.len();
        let scope = n.checked_sub(1 + d).and_then(|i| self.scopes.get(i));
        for t in scope.iter().flat_map(|s| &s.tables) {
            if let Some((_, ty)) = slot.checked_sub(t.base).and_then(|i| t.columns.get(i)) {
                return *ty;
            }
        }
        Affinity::None
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
                if !scope.inner_refs.contains(&slot) {
                    scope.inner_refs.push(slot);
                }
                for k in 0..depth {
                    let s = &mut self.scopes[n - 1 - k];
                    s.correlated = true;
                    if !s.outer_refs.contains(&(depth - k, slot)) {
                        s.outer_refs.push((depth - k, slot));
                    }
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

    /// Plans each expression of a list. A loop rather than `collect::<Result<Vec<_>>>()` at each
    /// call site: every such `collect` is its own copy of the same iterator code in the module.
    /// The list grows as `collect` grows it (nothing for no items, then room for four, doubled
    /// when full): another first capacity changes the heap's layout for everything allocated
    /// after it, which showed in the native instruction counts.
    pub(super) fn exprs(&mut self, es: &[Expr]) -> Result<Vec<PExpr>> {
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
                let aff = self.affinity(&x, &types);
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
                    self.affinity(&x, &types),
                    q.affinities.first().copied().unwrap_or(Affinity::None),
                );
                PExpr::InSub(Box::new(x), Rc::new(q), *negated, la, lb)
            }
            Expr::Exists { query, negated } => {
                let mut q = self.subquery(query)?;
                if let Some((slot, la, lb)) = super::join::semi_join(&mut q) {
                    PExpr::SemiHash(slot, Rc::new(q), *negated, la, lb, None)
                } else if super::join::probes_outer(&q) {
                    // A key or index serves the equality: planned again without it, as the
                    // build side of a hash semi-join the execution may switch to.
                    self.semi_build = true;
                    let b = self.subquery(query);
                    self.semi_build = false;
                    let mut b = b?;
                    match super::join::semi_join(&mut b) {
                        Some((slot, la, lb)) => PExpr::SemiHash(
                            slot,
                            Rc::new(b),
                            *negated,
                            la,
                            lb,
                            Some((Rc::new(q), None)),
                        ),
                        None => PExpr::Exists(Rc::new(q), *negated),
                    }
                } else {
                    PExpr::Exists(Rc::new(q), *negated)
                }
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
                let f = match scalar_func(name, args.len()) {
                    // A window function without OVER: SQLite's error, looked up only here, off
                    // the path every scalar call takes.
                    Err(Error::UnknownFunction(n)) => {
                        return Err(super::window::misuse(name).unwrap_or(Error::UnknownFunction(n)))
                    }
                    r => r?,
                };
                if matches!(f, Func::Random | Func::Uuid7 | Func::Date(_)) {
                    self.unmemoizable += 1;
                }
                let mut args = self.exprs(args)?;
                if let Func::Json(_) = f {
                    self.mark_json_aggregates(&mut args);
                }
                PExpr::Func(f, args)
            }
            Expr::Window { func, filter, over } => {
                self.window_call(func, filter.as_deref(), over)?
            }
        })
    }

    /// A JSON aggregate's result passed to a JSON function is JSON (SQLite's subtype), not a
    /// string: it goes in through `json()`, which the functions take as JSON.
    fn mark_json_aggregates(&self, args: &mut [PExpr]) {
        let Some(aggs) = self.scopes.last().and_then(|s| s.aggs.as_ref()) else {
            return;
        };
        for a in args {
            if let PExpr::AggRef(i) = a {
                if matches!(
                    aggs.get(*i).map(|s| s.func),
                    Some(AggFunc::JsonArray | AggFunc::JsonObject)
                ) {
                    let json = Func::Json(crate::exec::eval::JsonFn::Json);
                    *a = PExpr::Func(json, vec![PExpr::AggRef(*i)]);
                }
            }
        }
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
                let (la, lb) = cmp_affinities(self.affinity(&a, &types), self.affinity(&b, &types));
                PExpr::Cmp(op, a, b, la, lb)
            }
        }
    }
}
