//! The planner: turns a SELECT into a plan. `Planner::core_query_in_scope` runs the stages in
//! order, each in its own module: binding ([`super::bind`]), join order ([`super::join`]),
//! access paths ([`super::access`]); writes are planned in [`super::write`].

use crate::error::{Error, Result};
use crate::introspect;
use crate::parse::ast::{self, Expr, SelectItem};
use crate::plan::access::{choose_accesses, group_slots, order_slots, top_k};
use crate::plan::bind::{affinity_of, has_agg, split_and};
use crate::plan::join::{place_conjuncts, reorder_joins};
use crate::plan::walk::{movable, rewrite};
use crate::plan::*;
use crate::schema::Catalog;
use crate::types::Affinity;
use cairn_value::Value;
use std::rc::Rc;

pub(super) struct ScopeTable {
    pub(super) name: String,
    /// Names and comparison affinities.
    pub(super) columns: Vec<(String, Affinity)>,
    pub(super) base: usize,
    pub(super) needed: Vec<bool>,
    /// Found only by a qualified name (`excluded.x` in an upsert).
    pub(super) qualified_only: bool,
    /// How many of the last columns `*` leaves out (a pragma function's `arg` and `schema`).
    pub(super) hidden: usize,
}

#[derive(Default)]
pub(super) struct Scope {
    pub(super) tables: Vec<ScopeTable>,
    pub(super) correlated: bool,
    /// The enclosing queries' columns read inside this scope, as (levels up from it, slot).
    pub(super) outer_refs: Vec<(usize, usize)>,
    /// This scope's slots read from inside it (by its subqueries).
    pub(super) inner_refs: Vec<usize>,
    /// Collecting aggregate calls (the scope is an aggregate query's output).
    pub(super) aggs: Option<Vec<AggSpec>>,
    /// Output aliases usable in WHERE/GROUP BY/ORDER BY: (alias, AST expr).
    pub(super) aliases: Vec<(String, Expr)>,
    /// Collecting window calls (binding the output and ORDER BY of a core).
    pub(super) windows: Option<Vec<WinCall>>,
}

impl Scope {
    /// The first column of this scope's tables that `[table.]name` names, as (table, column)
    /// indices, and whether another table has one too (an ambiguous name).
    pub(super) fn column_named(
        &self,
        table: Option<&str>,
        name: &str,
    ) -> (Option<(usize, usize)>, bool) {
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
    pub(super) catalog: &'c Catalog,
    pub(super) scopes: Vec<Scope>,
    pub(super) ctes: Vec<Vec<(String, Vec<String>, ast::Select)>>,
    /// Guards alias expansion against `SELECT a AS b, b AS a ... WHERE a`.
    pub(super) alias_depth: usize,
    /// The tables the statement reads, each once, in the order it names them (live queries).
    pub(crate) read: Vec<String>,
    /// `PRAGMA foreign_keys`: an UPDATE that sets a foreign key's column checks whole rows.
    pub(crate) foreign_keys: bool,
    /// Counts what keeps a correlated subquery that contains it from being memoized
    /// ([`QueryPlan::memo`]): a call whose result varies (`random()`, the clock), a compound
    /// body, a LIMIT or OFFSET that names a column.
    pub(super) unmemoizable: u32,
    /// The next core planned is a hash semi-join's build side: its conditions on an enclosing
    /// query's row serve no key or index (see `join::probes_outer`).
    pub(super) semi_build: bool,
}

/// A FROM source as `Planner::plan_from_source` plans it: the source, its name in the query,
/// its columns and how many of them are hidden.
type SourceInfo = (Source, String, Vec<(String, Affinity)>, usize);

impl<'c> Planner<'c> {
    pub fn new(catalog: &'c Catalog) -> Self {
        Planner {
            catalog,
            scopes: Vec::new(),
            ctes: Vec::new(),
            alias_depth: 0,
            read: Vec::new(),
            foreign_keys: false,
            unmemoizable: 0,
            semi_build: false,
        }
    }

    // ---- expressions ----

    /// The column types of the innermost scope's frame, by slot.
    pub(super) fn frame_types(&self) -> Vec<Affinity> {
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

    fn scope(&self) -> &Scope {
        self.scopes
            .last()
            .expect("invariant: a query is planned inside a scope")
    }

    pub(super) fn scope_mut(&mut self) -> &mut Scope {
        self.scopes
            .last_mut()
            .expect("invariant: a query is planned inside a scope")
    }

    pub(super) fn subquery(&mut self, q: &ast::Select) -> Result<QueryPlan> {
        self.query(q)
    }

    // ---- queries ----

    pub fn query(&mut self, q: &ast::Select) -> Result<QueryPlan> {
        if !self.catalog.fts.is_empty() {
            if let Some(q) = crate::fts::rewrite::rewrite(self.catalog, q)? {
                return self.query_rewritten(&q);
            }
        }
        self.query_rewritten(q)
    }

    fn query_rewritten(&mut self, q: &ast::Select) -> Result<QueryPlan> {
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
            // Only a LEFT JOIN with a WHERE can be an anti-join: the test is all other queries
            // pay (the rewrite's code is reached from here alone).
            if let (
                Some(ast::FromItem {
                    join: Some(ast::JoinKind::Left),
                    ..
                }),
                Some(_),
            ) = (core.from.last(), &core.where_)
            {
                let is_table = |name: &str| {
                    if self.catalog.fts(name).is_some() || self.find_cte(name).is_some() {
                        None
                    } else {
                        self.catalog.table(name).ok().cloned()
                    }
                };
                if let Some(anti) = super::join::left_anti_join(core, &q.order_by, &is_table) {
                    return self.core_query(&anti, q);
                }
            }
            return self.core_query(core, q);
        }
        // Compound or VALUES: ORDER BY refers to output columns by name or position.
        self.unmemoizable += 1;
        // No scope of its own: each core arm has one, and runs for the same enclosing row as
        // the compound (a scope here would put that row one level further than it is).
        let (body, columns, correlated) = self.body(&q.body)?;
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
            memo: None,
        })
    }

    fn limits(&mut self, q: &ast::Select) -> Result<(Option<PExpr>, Option<PExpr>)> {
        self.scopes.push(Scope::default());
        let l = q.limit.as_ref().map(|e| self.expr(e)).transpose();
        let o = q.offset.as_ref().map(|e| self.expr(e)).transpose();
        if self.scopes.pop().is_some_and(|s| s.correlated) {
            self.unmemoizable += 1;
        }
        Ok((l?, o?))
    }

    /// A compound's or VALUES' body, its column names and whether it reads an enclosing row.
    fn body(&mut self, b: &ast::SelectBody) -> Result<(Body, Vec<String>, bool)> {
        match b {
            ast::SelectBody::Values(rows) => {
                // VALUES rows have no frame: a column they name is an enclosing query's.
                self.scopes.push(Scope::default());
                let mut out = Vec::new();
                let mut r = Ok(());
                for row in rows {
                    match self.exprs(row) {
                        Ok(v) => out.push(v),
                        Err(e) => {
                            r = Err(e);
                            break;
                        }
                    }
                }
                let correlated = self.scopes.pop().is_some_and(|s| s.correlated);
                r?;
                let n = rows.first().map_or(0, |r| r.len());
                Ok((
                    Body::Values(out),
                    (1..=n)
                        .map(|i| ["column", &i.to_string()].concat())
                        .collect(),
                    correlated,
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
                let Body::Core(core) = p.body else {
                    return Err(Error::Invalid("invariant: core plan".into()));
                };
                Ok((Body::Core(core), p.columns.to_vec(), p.correlated))
            }
            ast::SelectBody::Union { all, left, right } => {
                let (l, lc, lcorr) = self.body(left)?;
                let (r, rc, rcorr) = self.body(right)?;
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
                    lcorr || rcorr,
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
            ast::TableSource::Table(name) if self.catalog.fts(name).is_some() => {
                self.fts_source(name, &[], &item.alias)
            }
            ast::TableSource::Function { name, args } if self.catalog.fts(name).is_some() => {
                self.fts_source(name, args, &item.alias)
            }
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
                    return Ok((Source::Query(Rc::new(plan)), alias, columns, 0));
                }
                let t = match self.catalog.table(name) {
                    Ok(t) => t.clone(),
                    Err(e) => {
                        // The schema's own tables: what a query of them reads is the schema.
                        let read = self.introspection(name, &item.alias).ok_or(e)?;
                        let name = name.to_ascii_lowercase();
                        if !self.read.contains(&name) {
                            self.read.push(name);
                        }
                        return Ok(read);
                    }
                };
                if !self.read.contains(&t.name) {
                    self.read.push(t.name.clone());
                }
                let alias = item.alias.clone().unwrap_or_else(|| t.name.clone());
                let columns = t
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.ty.affinity()))
                    .collect();
                Ok((Source::Table(t), alias, columns, 0))
            }
            ast::TableSource::Function { name, args } if is_json_each(name) => {
                self.json_each_source(name, args, &item.alias)
            }
            ast::TableSource::Function { name, .. } => self
                .introspection(name, &item.alias)
                .ok_or_else(|| Error::UnknownTable(name.clone())),
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
                Ok((Source::Query(Rc::new(plan)), alias, columns, 0))
            }
        }
    }

    /// One of the tables that describe the schema (`sqlite_schema`, `pragma_table_info`, ...:
    /// `crate::introspect`), as a subquery of constant rows; None if `name` names none.
    fn introspection(&self, name: &str, alias: &Option<String>) -> Option<SourceInfo> {
        let v = introspect::table(self.catalog, name)?;
        let mut rows = Vec::with_capacity(v.rows.len());
        for r in v.rows {
            rows.push(r.into_iter().map(PExpr::Lit).collect());
        }
        let names: Vec<String> = v.columns.iter().map(|c| c.0.clone()).collect();
        let plan = QueryPlan {
            width: names.len(),
            columns: names.into(),
            body: Body::Values(rows),
            order: Vec::new(),
            affinities: v.columns.iter().map(|c| c.1).collect(),
            limit: None,
            offset: None,
            correlated: false,
            memo: None,
        };
        let alias = alias.clone().unwrap_or_else(|| name.to_string());
        Some((Source::Query(Rc::new(plan)), alias, v.columns, v.hidden))
    }

    /// A result column's name: its alias, a column's name as its table declares it (without
    /// the table's), or the expression as written (`a+1`, `?`, `count(*)`), as SQLite names
    /// them.
    pub(super) fn item_name(&self, e: &Expr, alias: &Option<String>, text: &str) -> String {
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
        let before = self.unmemoizable;
        let r = self.core_query_in_scope(c, q);
        let scope = self.scopes.pop().expect("scope");
        let mut plan = r?;
        plan.correlated = scope.correlated;
        if scope.correlated && self.unmemoizable == before {
            plan.memo = Some(scope.outer_refs.into());
        }
        Ok(plan)
    }

    fn core_query_in_scope(&mut self, c: &ast::SelectCore, q: &ast::Select) -> Result<QueryPlan> {
        // Taken first: the cores of subqueries planned on the way are not the build side.
        let semi_build = std::mem::take(&mut self.semi_build);
        let (mut levels, frame_len, on_conds) = self.bind_from(c)?;
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
            mut project,
            order,
            mut agg,
            affinities,
            windows,
        } = self.output(c, q, items, is_agg)?;
        // The window step takes the rows as the core would project them, and projects itself.
        let window = (!windows.is_empty()).then(|| {
            let w = agg
                .as_ref()
                .map_or(frame_len, |a| a.group_by.len() + a.aggs.len());
            Box::new(super::window::window_step(
                windows,
                w,
                &mut project,
                c.distinct,
            ))
        });

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
        let order_slots = if is_agg || window.is_some() {
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
        let order_served = choose_accesses(&mut levels, &needed, first_order, !semi_build);

        let (limit, offset) = self.limits(q)?;
        // A statement's own query, with no LIMIT, reads all its first level's rows.
        if limit.is_none() && self.scopes.len() == 1 {
            super::join::hint_semi_joins(&mut levels);
        }
        let mut ordered = order_served && !c.distinct && !is_agg && window.is_none();
        if let Some(a) = agg.as_mut() {
            a.streamed = order_served && group_slots.is_some();
            // Streamed groups come out in GROUP BY order: an ORDER BY on a prefix of the
            // GROUP BY columns, ascending, needs no sort.
            ordered = a.streamed
                && window.is_none()
                && !c.distinct
                && order.iter().enumerate().all(|(i, k)| {
                    matches!(project.get(k.col), Some(PExpr::Col(s)) if *s == i)
                        && !k.desc
                        && k.nulls_first
                });
        }
        if !ordered && limit.is_some() && agg.is_none() && !c.distinct && window.is_none() {
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
                distinct: c.distinct && window.is_none(),
                ordered,
                window,
            })),
            order,
            width,
            limit,
            offset,
            correlated: false,
            memo: None,
        })
    }

    /// FROM: a join level per item, its columns added to the scope; with where each level's
    /// columns start in the frame, the frame's length, and each item's ON condition.
    #[allow(clippy::type_complexity)]
    fn bind_from(
        &mut self,
        c: &ast::SelectCore,
    ) -> Result<(Vec<Level>, usize, Vec<(usize, Expr)>)> {
        let mut levels = Vec::new();
        let mut base = 0;
        let mut on_conds: Vec<(usize, Expr)> = Vec::new();
        for (i, item) in c.from.iter().enumerate() {
            let (source, name, columns, hidden) = self.plan_from_source(item)?;
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
                hidden,
            });
            if let Some(on) = &item.on {
                on_conds.push((i, on.clone()));
            }
            if let ast::TableSource::Function { name: f, args } = &item.source {
                // The arguments select the rows, as a condition on the hidden columns.
                let cond = if is_json_each(f) || self.catalog.fts(f).is_some() {
                    None
                } else {
                    introspect::argument_condition(f, &name, hidden, args)?
                };
                if let Some(cond) = cond {
                    on_conds.push((i, cond));
                }
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
                        for (cn, _) in &t.columns[..t.columns.len() - t.hidden] {
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
                    for (cn, _) in &t.columns[..t.columns.len() - t.hidden] {
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
        self.scope_mut().windows = Some(Vec::new());
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
        let mut windows = self.scope_mut().windows.take().unwrap_or_default();
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
            for e in super::window::call_exprs(&mut windows) {
                fix(e, &mut aggs);
            }
            let mut having = having;
            if let Some(h) = having.as_mut() {
                fix(h, &mut aggs);
            }
            let mut regroup = Vec::new();
            // Only a subquery evaluated on the aggregate frame needs its input row rebuilt
            // (and a value of a row of the group kept for it); one in WHERE (a semi-join)
            // runs on the input row itself.
            let after = project.iter().any(has_subquery)
                || having.as_ref().is_some_and(has_subquery)
                || super::window::call_exprs(&mut windows).any(|e| has_subquery(e));
            for &s in self.scope().inner_refs.iter().filter(|_| after) {
                let mut e = PExpr::Col(s);
                fix(&mut e, &mut aggs);
                if let PExpr::Col(pos) = e {
                    regroup.push((s, pos));
                }
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
                regroup,
            });
        }
        Ok(Output {
            names,
            width,
            project,
            order,
            agg,
            affinities,
            windows,
        })
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
    windows: Vec<WinCall>,
}

fn is_json_each(name: &str) -> bool {
    name.eq_ignore_ascii_case("json_each") || name.eq_ignore_ascii_case("json_tree")
}

impl Planner<'_> {
    /// An fts5 table in FROM, as `fts::rewrite` left it: `t(query, aux calls...)`. Its columns
    /// are the table's, then hidden `rank`, `rowid` and one per auxiliary call.
    fn fts_source(
        &mut self,
        name: &str,
        args: &[Expr],
        alias: &Option<String>,
    ) -> Result<SourceInfo> {
        let fts = self
            .catalog
            .fts(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTable(name.to_string()))?;
        let mut query = Vec::new();
        if let Some(a) = args.first() {
            for (op, e) in crate::fts::rewrite::branches(a) {
                query.push((op.map(str::to_string), self.expr(e)?));
            }
        }
        let mut aux = Vec::new();
        for a in args.iter().skip(1) {
            if let Expr::Function { name, args, .. } = a {
                aux.push((name.clone(), self.exprs(args)?));
            }
        }
        let mut columns: Vec<(String, Affinity)> = fts
            .columns
            .iter()
            .map(|c| (c.clone(), Affinity::None))
            .collect();
        columns.push(("rank".into(), Affinity::None));
        columns.push(("rowid".into(), Affinity::None));
        for i in 0..aux.len() {
            columns.push((crate::fts::rewrite::aux_column(i), Affinity::None));
        }
        let hidden = 2 + aux.len();
        let alias = alias.clone().unwrap_or_else(|| fts.name.clone());
        Ok((Source::Fts { fts, query, aux }, alias, columns, hidden))
    }

    /// `json_each(...)` or `json_tree(...)` in FROM: its arguments are planned over the levels
    /// before it (which it may read), and evaluated for each of their rows.
    fn json_each_source(
        &mut self,
        name: &str,
        args: &[Expr],
        alias: &Option<String>,
    ) -> Result<SourceInfo> {
        // No argument is no rows, as in SQLite.
        if args.len() > 2 {
            return Err(Error::Invalid(format!(
                "too many arguments on {}() - max 2",
                name.to_ascii_lowercase()
            )));
        }
        let args = self.exprs(args)?;
        let tree = name.eq_ignore_ascii_case("json_tree");
        let alias = alias.clone().unwrap_or_else(|| name.to_ascii_lowercase());
        Ok((
            Source::Json { tree, args },
            alias,
            crate::exec::eval::json_each::columns(),
            crate::exec::eval::json_each::HIDDEN,
        ))
    }
}
