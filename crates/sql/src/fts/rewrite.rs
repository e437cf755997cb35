//! Turns a query of an fts5 table into a query of its table-valued source before planning:
//! `FROM t WHERE t MATCH q` (a top-level AND conjunct) and `FROM t(q)` become the FROM item
//! `t(q, aux...)`, which the planner reads as `Source::Fts`; each `bm25(t, ...)`,
//! `highlight(t, ...)` and `snippet(t, ...)` in the select list or ORDER BY becomes a hidden
//! column of that source (`__aux0`, ...), its call (without the table) appended to the
//! arguments. A `FROM t` without MATCH reads every row.

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
            let Expr::Function {
                name: f, args: a, ..
            } = e
            else {
                continue;
            };
            // The table's hidden column of its own name, as SQLite has it: `t MATCH q`,
            // `alias.t MATCH q`; cairn also takes the alias alone.
            let target = match &a.first() {
                Some(Expr::Column {
                    table: None,
                    name: n,
                }) => n.eq_ignore_ascii_case(&alias) || n.eq_ignore_ascii_case(&name),
                Some(Expr::Column {
                    table: Some(t),
                    name: n,
                }) => t.eq_ignore_ascii_case(&alias) && n.eq_ignore_ascii_case(&name),
                _ => false,
            };
            if !f.eq_ignore_ascii_case("match") || a.len() != 2 || !target {
                continue;
            }
            if !args.is_empty() {
                return Err(Error::Unsupported(format!(
                    "more than one MATCH on {alias}: join the queries with AND"
                )));
            }
            args.push(a[1].clone());
            *e = Expr::Literal(Value::Integer(1));
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
