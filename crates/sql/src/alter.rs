//! ALTER TABLE: RENAME TO, ADD COLUMN, RENAME COLUMN and DROP COLUMN, with SQLite's rules.
//! Like the rest of the DDL (`ddl.rs`) they run from the AST inside `Database::atomic`.
//!
//! SQLite edits the CREATE statement's text and checks the whole schema against it again;
//! cairn changes the catalog's table instead (indexes name columns by position, CHECKs by
//! name) and refuses what SQLite's check would refuse: dropping a column that a key, a UNIQUE
//! constraint, an index or another column's or the table's CHECK uses. A dropped column's
//! values leave every row (rows are records of values by position); a rename rewrites no row.
//! A replicated table refuses both: its columns' names and positions are part of every change
//! its replicas exchange (docs/sync.md, 10b).

use crate::ddl::reserved;
use crate::error::{Error, Result};
use crate::exec::eval::{self, Cache};
use crate::parse::ast::{AlterAction, ColumnDef, Expr, ForeignKey};
use crate::plan::Planner;
use crate::schema::{self, Catalog, Check, Key, Table};
use crate::storage::Each;
use crate::{Database, Value};
use cairn_value::codec::{decode_record, encode_record};
use std::ops::Bound::Unbounded;
use std::rc::Rc;

impl Database {
    /// Out of line: `ddl` stays small, and a split build (docs/size.md, "The split module")
    /// leaves it out of the module a page fetches first.
    #[inline(never)]
    pub(crate) fn alter_table(&mut self, table: &str, action: &AlterAction) -> Result<()> {
        let t = self.catalog.table(table)?.clone();
        match action {
            AlterAction::RenameTo(to) => self.rename_table(&t, to),
            AlterAction::AddColumn(def) => self.add_column(&t, def),
            AlterAction::RenameColumn { from, to } => self.rename_column(&t, from, to),
            AlterAction::DropColumn(name) => self.drop_column(&t, name),
        }
    }

    fn replace_table(&mut self, t: Table) -> Result<()> {
        Catalog::save_table(self.store.as_mut(), &t)?;
        self.catalog
            .tables
            .insert(t.name.to_ascii_lowercase(), Rc::new(t));
        Ok(())
    }

    fn rename_table(&mut self, t: &Table, to: &str) -> Result<()> {
        if t.replicated.is_some() {
            return Err(Error::NotReplicable(format!(
                "table {} is replicated: its name is part of every row's identity on every \
                 replica, so it cannot be renamed",
                t.name
            )));
        }
        if self.name_taken(to) {
            return Err(Error::AlreadyExists(format!("table or index {to}")));
        }
        reserved(to)?;
        Catalog::delete_table_rows(self.store.as_mut(), t)?;
        let mut t2 = t.clone();
        t2.name = to.to_string();
        // The constraints' indexes are named after the table, and follow it (as in SQLite).
        let first = schema::auto_index_name(&t.name, 1);
        let prefix = &first[..first.len() - 1];
        for ix in t2.indexes.iter_mut().filter(|i| i.auto) {
            let number = match ix.name.get(..prefix.len()) {
                Some(p) if p.eq_ignore_ascii_case(prefix) => ix.name[prefix.len()..].parse().ok(),
                _ => None,
            };
            if let Some(n) = number {
                ix.name = schema::auto_index_name(to, n);
            }
        }
        // Foreign keys that name the table follow it, as in SQLite.
        let rename = |fk: &mut ForeignKey| fk.parent = to.to_string();
        for fk in t2.foreign_keys.iter_mut() {
            if fk.parent.eq_ignore_ascii_case(&t.name) {
                rename(fk);
            }
        }
        self.in_references(&t.name, rename)?;
        self.catalog.tables.remove(&t.name.to_ascii_lowercase());
        self.replace_table(t2)
    }

    /// Applies `f` to the foreign keys of other tables that name `parent`.
    fn in_references(&mut self, parent: &str, f: impl Fn(&mut ForeignKey)) -> Result<()> {
        let children: Vec<Rc<Table>> = (self.catalog.tables.values())
            .filter(|c| !c.name.eq_ignore_ascii_case(parent))
            .filter(|c| (c.foreign_keys.iter()).any(|fk| fk.parent.eq_ignore_ascii_case(parent)))
            .cloned()
            .collect();
        for c in children {
            let mut c2 = (*c).clone();
            for fk in c2.foreign_keys.iter_mut() {
                if fk.parent.eq_ignore_ascii_case(parent) {
                    f(fk);
                }
            }
            self.replace_table(c2)?;
        }
        Ok(())
    }

    fn add_column(&mut self, t: &Table, def: &ColumnDef) -> Result<()> {
        if t.column(&def.name).is_some() {
            return Err(Error::AlreadyExists(format!("column {}", def.name)));
        }
        if def.primary_key || def.unique {
            return Err(Error::Invalid(
                "cannot add a PRIMARY KEY or UNIQUE column".into(),
            ));
        }
        if def.generated.as_ref().is_some_and(|g| g.stored) {
            return Err(Error::Invalid("cannot add a STORED column".into()));
        }
        if def.generated.is_some() && t.replicated.is_some() {
            return Err(Error::NotReplicable(format!(
                "table {} is replicated, and a replicated table cannot have a generated column \
                 (docs/sync.md, 10b): compute it in the query instead",
                t.name
            )));
        }
        let col = schema::column_from_def(def);
        let default = match &def.default {
            Some(d) => {
                let mut p = Planner::new(&self.catalog);
                let empty = Table {
                    columns: vec![],
                    indexes: vec![],
                    checks: vec![],
                    ..t.clone()
                };
                let pe = p.table_expr(&empty, &d.expr)?;
                let cache = Cache::default();
                let cx = eval::Cx {
                    store: self.store.as_ref(),
                    params: &[],
                    outer: None,
                    rng: &self.rng,
                    cache: &cache,
                    regroup: None,
                };
                let v = eval::eval(&pe, &[], &cx)?.into_owned();
                col.ty.coerce(v, &def.name)?
            }
            None => Value::Null,
        };
        if col.not_null && default.is_null() && col.generated.is_none() {
            return Err(Error::Invalid(
                "cannot add a NOT NULL column with default value NULL".into(),
            ));
        }
        let mut t2 = t.clone();
        t2.columns.push(col);
        if let Some(fk) = &def.references {
            if !default.is_null() && self.foreign_keys {
                return Err(Error::Invalid(
                    "Cannot add a REFERENCES column with non-NULL default value".into(),
                ));
            }
            t2.foreign_keys.push(ForeignKey {
                columns: vec![def.name.clone()],
                ..(**fk).clone()
            });
        }
        if let Some(c) = &def.check {
            // A column's CHECKs come before the table's, as a definition lists them.
            let at = t2
                .checks
                .iter()
                .position(|c| c.column.is_none())
                .unwrap_or(t2.checks.len());
            t2.checks.insert(
                at,
                Check {
                    expr: c.clone(),
                    column: Some(t2.columns.len() - 1),
                },
            );
            Planner::new(&self.catalog).table_expr(&t2, c)?;
        }
        crate::generated::plan(&mut t2)?;
        if t2.columns[t.columns.len()].generated.is_some() {
            self.compute_added(t, &t2)?;
        } else if !default.is_null() {
            // Rows written before the column existed read as NULL: give them the default now.
            let n = t.columns.len();
            self.store
                .update_each(t.tree, Unbounded, Unbounded, &mut |_, v, out| {
                    let mut vals = decode_record(v)?;
                    vals.resize(n, Value::Null);
                    vals.push(default.clone());
                    out.extend_from_slice(&encode_record(&vals));
                    Ok(Each::Write)
                })?;
        }
        self.replace_table(t2)
    }

    /// Computes the generated column ADD COLUMN appended to `t` (making `t2`) into every row,
    /// which must then pass the column's own CHECKs, as in SQLite.
    fn compute_added(&mut self, t: &Table, t2: &Table) -> Result<()> {
        let n = t.columns.len();
        let mut checks = Vec::new();
        for c in t2.checks.iter().filter(|c| c.column == Some(n)) {
            checks.push((
                Planner::new(&self.catalog).table_expr(t2, &c.expr)?,
                &c.expr,
            ));
        }
        let cache = Cache::default();
        let mut rows = Vec::new();
        self.store
            .update_each(t.tree, Unbounded, Unbounded, &mut |k, v, _| {
                rows.push((k.to_vec(), decode_record(v)?));
                Ok(Each::Keep)
            })?;
        for (k, mut vals) in rows {
            vals.resize(n + 1, Value::Null);
            let cx = eval::Cx {
                store: self.store.as_ref(),
                params: &[],
                outer: None,
                rng: &self.rng,
                cache: &cache,
                regroup: None,
            };
            crate::generated::compute(t2, &mut vals, &cx, crate::exec::Writer::check_column)?;
            for (plan, expr) in &checks {
                if eval::eval_bool(plan, &vals, &cx)? == Some(false) {
                    return Err(Error::ConstraintCheck(crate::parse::display::expr(expr)));
                }
            }
            self.store.put(t.tree, &k, &encode_record(&vals))?;
        }
        Ok(())
    }

    fn rename_column(&mut self, t: &Table, from: &str, to: &str) -> Result<()> {
        if t.replicated.is_some() {
            return Err(Error::NotReplicable(format!(
                "table {} is replicated: its columns' names are part of the changes its \
                 replicas exchange, so a column cannot be renamed",
                t.name
            )));
        }
        let c = t
            .column(from)
            .ok_or_else(|| Error::UnknownColumn(format!("\"{from}\"")))?;
        if t.columns
            .iter()
            .enumerate()
            .any(|(i, col)| i != c && col.name.eq_ignore_ascii_case(to))
        {
            return Err(Error::AlreadyExists(format!("column {to}")));
        }
        let mut t2 = t.clone();
        t2.columns[c].name = to.to_string();
        for ch in &mut t2.checks {
            each_column(&mut ch.expr, &mut |table, name| {
                if names_column(t, table, name, from) {
                    *name = to.to_string();
                }
            });
        }
        for ix in &mut t2.indexes {
            for e in &mut ix.exprs {
                each_column(&mut e.ast, &mut |table, name| {
                    if names_column(t, table, name, from) {
                        *name = to.to_string();
                    }
                });
            }
        }
        // Foreign keys name columns: of this table as a child, and as a parent.
        let rename = |v: &mut Vec<String>| {
            for n in v.iter_mut().filter(|n| n.eq_ignore_ascii_case(from)) {
                *n = to.to_string();
            }
        };
        for fk in t2.foreign_keys.iter_mut() {
            rename(&mut fk.columns);
            if fk.parent.eq_ignore_ascii_case(&t.name) {
                rename(&mut fk.parent_columns);
            }
        }
        self.in_references(&t.name, |fk| rename(&mut fk.parent_columns))?;
        crate::generated::rename_column(&mut t2, from, to);
        crate::generated::plan(&mut t2)?;
        // Indexes name their columns by position: their CREATE INDEX is written anew.
        self.replace_table(t2)
    }

    fn drop_column(&mut self, t: &Table, name: &str) -> Result<()> {
        if t.replicated.is_some() {
            return Err(Error::NotReplicable(format!(
                "table {} is replicated: its columns are part of the changes its replicas \
                 exchange, so a column cannot be dropped",
                t.name
            )));
        }
        let c = t
            .column(name)
            .ok_or_else(|| Error::UnknownColumn(format!("\"{name}\"")))?;
        let col = &t.columns[c].name;
        if t.columns.len() == 1 {
            return Err(Error::Invalid(format!(
                "cannot drop column \"{col}\": no other columns exist"
            )));
        }
        if t.key_columns().contains(&c) {
            return Err(Error::Invalid(format!(
                "cannot drop PRIMARY KEY column: \"{col}\""
            )));
        }
        if let Some(ix) = t.indexes.iter().find(|i| i.columns.contains(&c)) {
            return Err(Error::Invalid(if ix.auto {
                format!("cannot drop UNIQUE column: \"{col}\"")
            } else {
                format!(
                    "error in index {} after drop column: no such column: {col}",
                    ix.name
                )
            }));
        }
        let in_key = |v: &[String]| v.iter().any(|n| n.eq_ignore_ascii_case(col));
        let named = (self.catalog.tables.values()).any(|o| {
            (o.foreign_keys.iter())
                .any(|fk| fk.parent.eq_ignore_ascii_case(&t.name) && in_key(&fk.parent_columns))
        });
        if named || t.foreign_keys.iter().any(|fk| in_key(&fk.columns)) {
            return Err(Error::Invalid(format!(
                "error in table {} after drop column: column \"{col}\" is in a foreign key",
                t.name
            )));
        }
        if crate::generated::reads_column(t, col, c) {
            return Err(Error::Invalid(format!(
                "error in table {} after drop column: no such column: {col}",
                t.name
            )));
        }
        for ch in t.checks.iter().filter(|ch| ch.column != Some(c)) {
            let mut uses = false;
            each_column(&mut ch.expr.clone(), &mut |table, n| {
                uses |= names_column(t, table, n, col);
            });
            if uses {
                return Err(Error::Invalid(format!(
                    "error in table {} after drop column: no such column: {col}",
                    t.name
                )));
            }
        }
        self.store
            .update_each(t.tree, Unbounded, Unbounded, &mut |_, v, out| {
                let mut vals = decode_record(v)?;
                if vals.len() <= c {
                    // Written before the column was added, with no value for it.
                    return Ok(Each::Keep);
                }
                vals.remove(c);
                out.extend_from_slice(&encode_record(&vals));
                Ok(Each::Write)
            })?;
        let shift = |i: usize| if i > c { i - 1 } else { i };
        let mut t2 = t.clone();
        t2.columns.remove(c);
        t2.key = match &t.key {
            Key::Rowid(k) => Key::Rowid(k.map(shift)),
            Key::Columns(k) => Key::Columns(k.iter().map(|&i| shift(i)).collect()),
        };
        for ix in &mut t2.indexes {
            for i in &mut ix.columns {
                *i = shift(*i);
            }
        }
        // An index's expressions read columns by position: planned again over the new row.
        for i in 0..t2.indexes.len() {
            if !t2.indexes[i].exprs.is_empty() {
                let asts: Vec<_> = t2.indexes[i].exprs.iter().map(|e| e.ast.clone()).collect();
                let (exprs, _) = crate::schema::index_exprs(&t2, &asts)?;
                t2.indexes[i].exprs = exprs;
            }
        }
        t2.checks.retain(|ch| ch.column != Some(c));
        for ch in &mut t2.checks {
            ch.column = ch.column.map(shift);
        }
        crate::generated::plan(&mut t2)?;
        self.replace_table(t2)
    }
}

/// Whether the reference `[table.]name` in one of `t`'s CHECKs names its column `column`.
fn names_column(t: &Table, table: &Option<String>, name: &str, column: &str) -> bool {
    name.eq_ignore_ascii_case(column)
        && table
            .as_deref()
            .is_none_or(|q| q.eq_ignore_ascii_case(&t.name))
}

/// Calls `f` on every column reference in `e` (not in subqueries, which a CHECK cannot hold).
pub(crate) fn each_column(e: &mut Expr, f: &mut dyn FnMut(&Option<String>, &mut String)) {
    match e {
        Expr::Column { table, name } => f(table, name),
        // A CHECK cannot hold a window call (`misuse of window function`).
        Expr::Window { .. } => {}
        _ => e.each_child_mut(&mut |c| each_column(c, f)),
    }
}
