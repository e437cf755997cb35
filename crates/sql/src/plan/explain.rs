//! `EXPLAIN`: a plan ([`crate::plan`]) as lines of text, one per step, indented under the step
//! that runs it. What each line means is in `docs/sql.md`; the golden scripts under
//! `testscripts/sql/` show the plans before and after each optimization applies.
//!
//! The words follow SQLite's `EXPLAIN QUERY PLAN` where there is one (`SCAN`, `SEARCH ... USING
//! [COVERING] INDEX`, `USING INTEGER PRIMARY KEY`, `USE TEMP B-TREE FOR ORDER BY`), so that a
//! reader who knows one knows the other; the join method of every inner level is spelled out,
//! because cairn has three and SQLite's output leaves it implicit.

use crate::plan::{access_columns, walk, Access, Body, Core, Level, PExpr, QueryPlan, Source};

use crate::schema::Key;
use cairn_value::text;
use std::rc::Rc;

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

fn collect_subqueries(e: &PExpr, out: &mut Vec<(&'static str, Rc<QueryPlan>)>) {
    walk(e, &mut |x| match x {
        PExpr::InSub(_, q, ..) => out.push(("IN", q.clone())),
        PExpr::Exists(q, _) => out.push(("EXISTS", q.clone())),
        PExpr::SemiHash(_, q, .., None) => out.push(("HASH SEMI-JOIN: EXISTS", q.clone())),
        PExpr::SemiHash(_, q, .., Some((exact, _))) => {
            out.push(("ADAPTIVE SEMI-JOIN: EXISTS", exact.clone()));
            out.push((
                "THEN, ONCE THOSE RUNS COST ABOUT ITS BUILD: HASH SEMI-JOIN",
                q.clone(),
            ));
        }
        PExpr::Scalar(q) => out.push(("SCALAR", q.clone())),
        _ => {}
    });
}

/// A query: its body, then how ORDER BY and LIMIT are done.
pub fn query(q: &QueryPlan, depth: usize, out: &mut Vec<String>) {
    let pad = "  ".repeat(depth);
    body(&q.body, depth, out);
    let ordered = matches!(&q.body, Body::Core(c) if c.ordered);
    let limited = q.limit.is_some();
    if !q.order.is_empty() {
        if ordered {
            out.push(format!("{pad}ORDER BY served by the scan order (no sort)"));
        } else {
            out.push(format!(
                "{pad}USE TEMP B-TREE FOR ORDER BY ({}{})",
                plural(q.order.len(), "key"),
                match &q.body {
                    Body::Core(c) if limited && c.levels.first().is_some_and(|l| l.topk.is_some()) =>
                        ", top-k: keeps only the best OFFSET+LIMIT rows; a row past the k-th best is dropped before its other columns are decoded",
                    _ if limited => ", top-k: keeps only the best OFFSET+LIMIT rows",
                    _ => "",
                }
            ));
        }
    }
    if limited || q.offset.is_some() {
        out.push(format!("{pad}LIMIT"));
    }
}

fn body(b: &Body, depth: usize, out: &mut Vec<String>) {
    let pad = "  ".repeat(depth);
    match b {
        Body::Core(c) => core(c, depth, out),
        Body::Values(rows) => out.push(format!("{pad}VALUES ({})", plural(rows.len(), "row"))),
        Body::Union { all, left, right } => {
            out.push(format!("{pad}UNION{}", if *all { " ALL" } else { "" }));
            body(left, depth + 1, out);
            body(right, depth + 1, out);
        }
    }
}

/// Whether a level's index probes or range bounds read an earlier level's columns: then it is
/// an index lookup per outer row; otherwise the same search repeats for every outer row.
fn probes_outer(l: &Level) -> bool {
    let Access::Index {
        probes,
        lower,
        upper,
        ..
    } = &l.access
    else {
        return false;
    };
    let mut outer = false;
    let exprs = probes
        .iter()
        .flatten()
        .chain(lower.iter().map(|b| &b.0))
        .chain(upper.iter().map(|b| &b.0));
    for e in exprs {
        walk(e, &mut |x| {
            if matches!(x, PExpr::Col(_)) {
                outer = true;
            }
        });
    }
    outer
}

/// The access path of a table level: `SCAN t`, `SEARCH t USING ... (conditions)`.
fn access(l: &Level, t: &crate::schema::Table) -> String {
    let alias = if l.name != t.name {
        format!(" ({})", t.name)
    } else {
        String::new()
    };
    match &l.access {
        Access::Scan { reverse } => {
            format!(
                "SCAN {}{alias}{}",
                l.name,
                if *reverse { " DESC" } else { "" }
            )
        }
        Access::Hash { .. } => format!("SCAN {}{alias}", l.name),
        Access::Index {
            index,
            probes,
            lower,
            upper,
            reverse,
            covering,
            sub_probe,
        } => {
            let cols = access_columns(t, *index);
            // A key part on an expression is named by the expression.
            let exprs: Vec<&crate::schema::IndexExpr> =
                t.indexes.iter().flat_map(|ix| &ix.exprs).collect();
            let name_of = |c: usize| match c.checked_sub(t.columns.len()) {
                Some(k) => crate::parse::display::expr(&exprs[k].ast),
                None => t.columns[c].name.clone(),
            };
            let mut conds = Vec::new();
            if sub_probe.is_some() {
                if let Some(&c) = cols.first() {
                    conds.push(format!("{} IN (subquery)", name_of(c)));
                }
            }
            let neq = probes.first().map_or(0, |p| p.len());
            for &col in cols.iter().take(neq) {
                let name = name_of(col);
                if probes.len() > 1 {
                    conds.push(format!("{name} IN (...)"));
                } else {
                    conds.push(format!("{name}=?"));
                }
            }
            if let Some(&col) = cols.get(neq) {
                let name = name_of(col);
                if let Some((_, incl)) = lower {
                    conds.push(format!("{name}{}?", if *incl { ">=" } else { ">" }));
                }
                if let Some((_, incl)) = upper {
                    conds.push(format!("{name}{}?", if *incl { "<=" } else { "<" }));
                }
            }
            let how = match index {
                None => match t.key {
                    Key::Rowid(_) => "INTEGER PRIMARY KEY".to_string(),
                    Key::Columns(_) => "PRIMARY KEY".to_string(),
                },
                Some(i) => format!(
                    "{}INDEX {}",
                    if *covering { "COVERING " } else { "" },
                    t.indexes[*i].name
                ),
            };
            let point = index.is_none()
                && sub_probe.is_none()
                && lower.is_none()
                && upper.is_none()
                && !probes.is_empty()
                && probes.iter().all(|p| p.len() == cols.len());
            let verb = if conds.is_empty() { "SCAN" } else { "SEARCH" };
            format!(
                "{verb} {}{alias} USING {how}{}{}{}",
                l.name,
                if conds.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", text::join(&conds, " AND "))
                },
                if *reverse { " DESC" } else { "" },
                if point {
                    if probes.len() > 1 {
                        " [point get per value]"
                    } else {
                        " [point get]"
                    }
                } else {
                    ""
                }
            )
        }
    }
}

/// A SELECT core: the join order (one line per level, outermost first), each level's access
/// path and, for inner levels, the join method; then filters, subqueries, grouping, DISTINCT.
pub fn core(c: &Core, depth: usize, out: &mut Vec<String>) {
    let pad = "  ".repeat(depth);
    if c.levels.is_empty() {
        out.push(format!("{pad}ONE ROW (no FROM)"));
    }
    if c.levels.len() > 1 {
        let names: Vec<&str> = c.levels.iter().map(|l| l.name.as_str()).collect();
        out.push(format!("{pad}JOIN ORDER {}", text::join(&names, ", ")));
    }
    for (i, l) in c.levels.iter().enumerate() {
        let join = if i == 0 {
            ""
        } else if l.left {
            "LEFT JOIN "
        } else {
            "JOIN "
        };
        let mut filter = Vec::new();
        if !l.filters.is_empty() {
            filter.push(match (&l.source, &l.access) {
                (Source::Table(_), Access::Scan { .. } | Access::Index { .. }) => format!(
                    "{} tested on {} read from the row in its page, {} more decoded only for rows that pass",
                    plural(l.filters.len(), "condition"),
                    plural(l.pre_cols.len(), "column"),
                    l.post_cols.len()
                ),
                _ => format!("{} per row", plural(l.filters.len(), "condition")),
            });
        }
        if !l.after.is_empty() {
            filter.push(format!(
                "{} after the LEFT JOIN's NULL row",
                plural(l.after.len(), "condition")
            ));
        }
        let filter =
            (!filter.is_empty()).then(|| format!("{pad}  FILTER {}", text::join(&filter, "; ")));
        match (&l.source, &l.access) {
            (Source::Query(q), a) => {
                let how = match (i, a) {
                    (0, _) => "",
                    (_, Access::Hash { .. }) => {
                        " [hash join: materialized once, hashed on the join key]"
                    }
                    _ => " [nested loop over its rows]",
                };
                out.push(format!("{pad}{join}SCAN {} (subquery){how}", l.name));
                out.extend(filter);
                query(q, depth + 1, out);
            }
            (Source::Fts { fts, query, .. }, _) => {
                let how = match &query[..] {
                    [] | [(None, crate::plan::PExpr::Lit(crate::Value::Null))] => "every row",
                    [_] => "full-text match",
                    _ => "union of full-text matches and row ids",
                };
                out.push(format!(
                    "{pad}{join}SCAN {} (fts5 {}: {how})",
                    l.name, fts.name
                ));
                out.extend(filter);
            }
            (Source::Json { tree, .. }, _) => {
                let f = if *tree { "json_tree" } else { "json_each" };
                let how = if i == 0 {
                    ""
                } else {
                    " [made again per outer row]"
                };
                out.push(format!("{pad}{join}SCAN {} ({f}){how}", l.name));
                out.extend(filter);
            }
            (Source::Table(t), a) => {
                let how = match (i, a) {
                    (0, _) => String::new(),
                    (_, Access::Hash { .. }) => format!(
                        " [hash join: no index fits the join, so {} is scanned once into a hash table]",
                        l.name
                    ),
                    (_, Access::Index { .. }) if probes_outer(l) => {
                        " [index lookup per outer row]".into()
                    }
                    (_, Access::Index { .. }) => {
                        " [nested loop: the same search per outer row]".into()
                    }
                    _ => " [nested loop: a full scan per outer row]".into(),
                };
                out.push(format!("{pad}{join}{}{how}", access(l, t)));
                out.extend(filter);
            }
        }
        if let Access::Index {
            sub_probe: Some((q, _)),
            ..
        } = &l.access
        {
            out.push(format!(
                "{pad}IN SUBQUERY (runs once, its values probe {})",
                l.name
            ));
            query(q, depth + 1, out);
        }
    }
    let mut subs = Vec::new();
    for l in &c.levels {
        for f in l.filters.iter().chain(&l.after) {
            collect_subqueries(f, &mut subs);
        }
    }
    for e in c.const_filters.iter().chain(&c.project) {
        collect_subqueries(e, &mut subs);
    }
    for (kind, q) in subs {
        out.push(format!(
            "{pad}{kind} SUBQUERY{}",
            if q.correlated {
                " (correlated: runs per row)"
            } else {
                " (runs once)"
            }
        ));
        query(&q, depth + 1, out);
    }
    if let Some(a) = &c.agg {
        if a.group_by.is_empty() {
            out.push(format!(
                "{pad}AGGREGATE ({})",
                plural(a.aggs.len(), "aggregate")
            ));
        } else if a.streamed {
            out.push(format!(
                "{pad}GROUP BY ({}, streamed: rows arrive in group order, no hash table)",
                plural(a.group_by.len(), "key")
            ));
        } else {
            out.push(format!(
                "{pad}GROUP BY ({}, USE TEMP HASH TABLE FOR GROUP BY)",
                plural(a.group_by.len(), "key")
            ));
        }
    }
    if let Some(w) = &c.window {
        for call in &w.calls {
            out.push(format!(
                "{pad}WINDOW {}",
                crate::plan::window::describe(call, plural)
            ));
        }
    }
    if c.distinct || c.window.as_ref().is_some_and(|w| w.distinct) {
        out.push(format!("{pad}DISTINCT"));
    }
}
