//! Turns a query of an fts5 table into a query of its table-valued source before planning:
//! `FROM t WHERE t MATCH q` (a top-level AND conjunct) and `FROM t(q)` become the FROM item
//! `t(q, aux...)`, which the planner reads as `Source::Fts`; each `bm25(t, ...)`,
//! `highlight(t, ...)` and `snippet(t, ...)` in the select list or ORDER BY becomes a hidden
//! column of that source (`__aux0`, ...), its call (without the table) appended to the
//! arguments. A `FROM t` without MATCH reads every row.
//!
//! A top-level conjunct that ORs MATCHes of `t` with each other or with row id comparisons
//! (`t MATCH 'a' OR rowid = 2`), which SQLite answers as a union of index scans, becomes the
//! query argument `__fts_or('match', q, '=', 2, ...)`: `branches` reads it back, and
//! `fts::rows` gives each branch's rows after those of the branches before it.

use crate::error::{Error, Result};
use crate::parse::ast::{Expr, SelectBody, SelectItem, TableSource};
use crate::schema::Catalog;
use crate::{ast, Value};

const AUX: [&str; 3] = ["bm25", "highlight", "snippet"];

/// The hidden column that holds auxiliary call `i`.
pub fn aux_column(i: usize) -> String {
    format!("__aux{i}")
}

fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(ast::BinOp::And, a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        e => out.push(e),
    }
}

fn names(e: &Expr, alias: &str) -> bool {
    matches!(e, Expr::Column { table: None, name } if name.eq_ignore_ascii_case(alias))
}

/// The name of the query argument that holds the branches of an OR.
const OR: &str = "__fts_or";

/// Whether `e` names the fts5 table itself, its hidden column of its own name (`t`,
/// `alias.t`; cairn also takes the alias alone).
fn is_table(e: Option<&Expr>, name: &str, alias: &str) -> bool {
    match e {
        Some(Expr::Column {
            table: None,
            name: n,
        }) => n.eq_ignore_ascii_case(alias) || n.eq_ignore_ascii_case(name),
        Some(Expr::Column {
            table: Some(t),
            name: n,
        }) => t.eq_ignore_ascii_case(alias) && n.eq_ignore_ascii_case(name),
        _ => false,
    }
}

/// The query of `e` when it is `t MATCH query`.
fn match_of<'e>(e: &'e Expr, name: &str, alias: &str) -> Option<&'e Expr> {
    match e {
        Expr::Function { name: f, args, .. }
            if f.eq_ignore_ascii_case("match")
                && args.len() == 2
                && is_table(args.first(), name, alias) =>
        {
            args.get(1)
        }
        _ => None,
    }
}

/// Whether `e` reads a column of the fts5 table (or a column it cannot place).
fn reads_table(e: &Expr, alias: &str) -> bool {
    let mut hit = matches!(e, Expr::Column { table, .. }
        if table.as_ref().is_none_or(|t| t.eq_ignore_ascii_case(alias)));
    e.each_child(&mut |c| hit |= reads_table(c, alias));
    hit
}

/// Whether `e` holds a MATCH of the fts5 table anywhere.
fn holds_match(e: &Expr, name: &str, alias: &str) -> bool {
    let mut hit = match_of(e, name, alias).is_some();
    e.each_child(&mut |c| hit |= holds_match(c, name, alias));
    hit
}

/// The leaves of an OR of MATCHes and row id comparisons of the fts5 table, as
/// `(operator, value)` pairs (`'match'` or the comparison), or None when `e` is not one
/// or holds no MATCH.
fn or_leaves(e: &Expr, name: &str, alias: &str) -> Option<Vec<Expr>> {
    fn walk(e: &Expr, name: &str, alias: &str, out: &mut Vec<Expr>) -> bool {
        if let Expr::Binary(ast::BinOp::Or, a, b) = e {
            return walk(a, name, alias, out) && walk(b, name, alias, out);
        }
        if let Some(q) = match_of(e, name, alias) {
            out.push(Expr::Literal(Value::Text("match".into())));
            out.push(q.clone());
            return true;
        }
        let Expr::Binary(op, a, b) = e else {
            return false;
        };
        let rowid = |e: &Expr| {
            matches!(e, Expr::Column { table, name: n } if n.eq_ignore_ascii_case("rowid")
                && table.as_ref().is_none_or(|t| t.eq_ignore_ascii_case(alias)))
        };
        use ast::BinOp::*;
        let (op, v) = match (op, rowid(a), rowid(b)) {
            (Eq | Lt | Le | Gt | Ge, true, false) => (*op, b),
            (Eq | Lt | Le | Gt | Ge, false, true) => (
                match op {
                    Lt => Gt,
                    Le => Ge,
                    Gt => Lt,
                    Ge => Le,
                    o => *o,
                },
                a,
            ),
            _ => return false,
        };
        if reads_table(v, alias) {
            return false;
        }
        let op = ["=", "<", "<=", ">", ">="][[Eq, Lt, Le, Gt, Ge]
            .iter()
            .position(|o| *o == op)
            .unwrap_or(0)];
        out.push(Expr::Literal(Value::Text(op.into())));
        out.push((**v).clone());
        true
    }
    let mut out = Vec::new();
    let ok = matches!(e, Expr::Binary(ast::BinOp::Or, ..)) && walk(e, name, alias, &mut out);
    let any_match = out
        .iter()
        .step_by(2)
        .any(|k| *k == Expr::Literal(Value::Text("match".into())));
    (ok && any_match).then_some(out)
}

/// The branches of an fts5 source's query argument: `(None, query)` for one MATCH (NULL:
/// every row), else one per leaf of the OR, `Some(operator)` for a row id comparison.
pub fn branches(e: &Expr) -> Vec<(Option<&str>, &Expr)> {
    match e {
        Expr::Function { name, args, .. } if name == OR => args
            .chunks(2)
            .filter_map(|p| match p {
                [Expr::Literal(Value::Text(k)), v] => {
                    Some(((k != "match").then_some(k.as_str()), v))
                }
                _ => None,
            })
            .collect(),
        e => vec![(None, e)],
    }
}

/// `q` with its fts5 tables as sources, or None when it reads none.
pub fn rewrite(catalog: &Catalog, q: &ast::Select) -> Result<Option<ast::Select>> {
    let SelectBody::Core(c) = &q.body else {
        return Ok(None);
    };
    let is_fts = |s: &TableSource| match s {
        TableSource::Table(n) | TableSource::Function { name: n, .. } => catalog.fts(n).is_some(),
        TableSource::Subquery(_) => false,
    };
    if !c.from.iter().any(|i| is_fts(&i.source)) {
        return Ok(None);
    }
    let mut q = q.clone();
    let SelectBody::Core(c) = &mut q.body else {
        return Ok(None);
    };
    let mut conj = Vec::new();
    if let Some(w) = c.where_.take() {
        conjuncts(w, &mut conj);
    }
    let mut order: Vec<&mut Expr> = q.order_by.iter_mut().map(|o| &mut o.expr).collect();
    for item in &mut c.from {
        let (name, mut args) = match &item.source {
            TableSource::Table(n) if catalog.fts(n).is_some() => (n.clone(), vec![]),
            TableSource::Function { name, args } if catalog.fts(name).is_some() => {
                (name.clone(), args.clone())
            }
            _ => continue,
        };
        if args.len() > 1 {
            return Err(Error::Invalid(format!(
                "too many arguments to {name}(): it takes the query"
            )));
        }
        let alias = item.alias.clone().unwrap_or_else(|| name.clone());
        for e in &mut conj {
            let q = match match_of(e, &name, &alias) {
                Some(q) => q.clone(),
                None => match or_leaves(e, &name, &alias) {
                    Some(leaves) => Expr::Function {
                        name: OR.into(),
                        args: leaves,
                        distinct: false,
                        star: false,
                    },
                    None => continue,
                },
            };
            if !args.is_empty() {
                return Err(Error::Unsupported(format!(
                    "more than one MATCH on {alias}: join the queries with AND"
                )));
            }
            args.push(q);
            *e = Expr::Literal(Value::Integer(1));
        }
        if conj.iter().any(|e| holds_match(e, &name, &alias)) {
            return Err(Error::Unsupported(format!(
                "MATCH on {alias} here: it must be a term of WHERE, alone or ORed with other \
                 MATCHes of {alias} and row id comparisons"
            )));
        }
        if args.is_empty() {
            args.push(Expr::Literal(Value::Null));
        }
        let mut aux = Vec::new();
        for it in &mut c.columns {
            if let SelectItem::Expr {
                expr,
                alias: name,
                text,
            } = it
            {
                let before = aux.len();
                replace_aux(expr, &alias, &mut aux);
                // The column keeps the name of the call as written.
                if aux.len() > before && name.is_none() && matches!(expr, Expr::Column { .. }) {
                    *name = Some(text.clone());
                }
            }
        }
        for e in order.iter_mut() {
            replace_aux(e, &alias, &mut aux);
        }
        args.extend(aux);
        item.source = TableSource::Function { name, args };
    }
    conj.retain(|e| *e != Expr::Literal(Value::Integer(1)));
    c.where_ = conj
        .into_iter()
        .reduce(|a, b| Expr::Binary(ast::BinOp::And, Box::new(a), Box::new(b)));
    Ok(Some(q))
}

fn replace_aux(e: &mut Expr, alias: &str, aux: &mut Vec<Expr>) {
    if let Expr::Function { name, args, .. } = e {
        let kind = AUX.iter().find(|k| name.eq_ignore_ascii_case(k));
        if let (Some(kind), Some(first)) = (kind, args.first()) {
            if names(first, alias) {
                let call = Expr::Function {
                    name: kind.to_string(),
                    args: args[1..].to_vec(),
                    distinct: false,
                    star: false,
                };
                let col = aux_column(aux.len());
                aux.push(call);
                *e = Expr::Column {
                    table: Some(alias.to_string()),
                    name: col,
                };
                return;
            }
        }
    }
    e.each_child_mut(&mut |c| replace_aux(c, alias, aux));
}
