//! Write plans: INSERT, UPDATE and DELETE, their table scope, targets and RETURNING.

use crate::error::{Error, Result};
use crate::parse::ast::{self, Expr, SelectItem};
use crate::plan::access::{choose_access, remove_consumed};
use crate::plan::bind::{has_agg, split_and};
use crate::plan::planner::{Planner, Scope, ScopeTable};
use crate::plan::walk::{has_subquery, slots};
use crate::plan::*;
use crate::schema::Table;
use std::rc::Rc;

impl<'c> Planner<'c> {
    /// Plans expressions over one table's row (CHECK, RETURNING, DEFAULT with no table).
    pub fn with_table_scope<T>(
        &mut self,
        tables: &[(&str, &Table)],
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        self.scopes.push(table_scope(tables));
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
            // An fts5 table's own content has the row id last, which VALUES leave out.
            let own_fts = table.fts.iter().any(|f| f.content.is_none());
            (0..table.columns.len() - usize::from(own_fts))
                .filter(|&c| table.columns[c].generated.is_none())
                .collect()
        } else {
            let mut v = Vec::new();
            for c in &ins.columns {
                let i = table
                    .column(c)
                    .ok_or_else(|| Error::UnknownColumn(format!("{}.{c}", table.name)))?;
                writable(&table, i, "INSERT into")?;
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
                    Some(d) => match self.expr(&d.expr) {
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
                        .position(|ix| ix.unique && ix.exprs.is_empty() && same(&ix.columns))
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
                                    writable(&table, i, "UPDATE")?;
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
        let (access, _, consumed) =
            choose_access(std::slice::from_ref(&lvl), 0, &needed, None, true);
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
            window: None,
        })
    }

    // Not inlined into `Database::plan`, the one caller of this and `delete`: inlined, the
    // two cost cairn.wasm 500 bytes gzip (docs/size.md).
    #[inline(never)]
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
                writable(&t, i, "UPDATE")?;
                if has_agg(e) {
                    return Err(Error::Invalid("misuse of aggregate function in SET".into()));
                }
                if t.replicated.is_some() {
                    merged_kind_fits(&t, i, e)?;
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
        let sets_fk = self.foreign_keys
            && (table.foreign_keys.iter()).any(|fk| {
                !fk.deferred
                    && fk
                        .columns
                        .iter()
                        .any(|c| set.iter().any(|(s, _)| table.column(c) == Some(*s)))
            });
        let keys_only = returning.is_empty()
            && table.checks.is_empty()
            && table.generated.is_empty()
            && !sets_fk
            && table.fts.is_empty()
            && table
                .replicated
                .as_ref()
                .is_none_or(|r| !r.has_merged() && set.iter().all(|(c, _)| Some(*c) != r.scope))
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

    #[inline(never)]
    pub fn delete(&mut self, d: &ast::Delete) -> Result<WritePlan> {
        let table = self.catalog.table(&d.table)?.clone();
        let alias = d.alias.clone().unwrap_or_else(|| table.name.clone());
        let mut scan = self.write_scan(&table, &alias, d.where_.as_ref())?;
        let (returning, returning_names) = self.returning(&d.returning, &table, &alias)?;
        let keys_only = returning.is_empty()
            && table.indexes.is_empty()
            && table.fts.is_empty()
            && table.replicated.is_none();
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

/// The scope of `tables`' columns, one table after the other. Not generic, so the module holds
/// it once: `with_table_scope`, generic over its callers' closures, is inlined into each.
fn table_scope(tables: &[(&str, &Table)]) -> Scope {
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
            hidden: 0,
        });
        base += t.columns.len();
    }
    scope
}

/// Refuses a write that names a generated column, with SQLite's message.
fn writable(t: &Table, c: usize, what: &str) -> Result<()> {
    if t.columns[c].generated.is_none() {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "cannot {what} generated column \"{}\"",
        t.columns[c].name
    )))
}

/// Refuses `set_add`/`set_remove` assigned to a column of a replicated table that is not a SET,
/// and `map_set`/`map_remove` to one that is not a MAP: the write would record a whole value
/// where the caller meant one element (`COLUMN_KIND`).
#[inline(never)]
fn merged_kind_fits(t: &crate::schema::Table, c: usize, e: &ast::Expr) -> Result<()> {
    use crate::schema::Merged;
    let (Some(r), ast::Expr::Function { name, .. }) = (&t.replicated, e) else {
        return Ok(());
    };
    let want = match name.to_ascii_lowercase().as_str() {
        "set_add" | "set_remove" => Merged::Set,
        "map_set" | "map_remove" => Merged::Map,
        _ => return Ok(()),
    };
    if r.kind(c) == want && !t.key_columns().contains(&c) {
        return Ok(());
    }
    let kind = if want == Merged::Set { "SET" } else { "MAP" };
    Err(Error::ColumnKind(format!(
        "{}() on {}.{}, which is not a {kind} column of the replicated table (declare it with \
         REPLICATED ({kind} {}))",
        name.to_ascii_lowercase(),
        t.name,
        t.columns[c].name,
        t.columns[c].name
    )))
}
