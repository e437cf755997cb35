//! DDL: CREATE and DROP of tables and indexes (ALTER TABLE is in `alter.rs`), run against the
//! catalog and the storage from the AST (they have no plan). Each runs inside
//! `Database::atomic`, so a failure leaves the schema as it was.

use crate::error::{Error, Result};
use crate::exec::eval;
use crate::parse::ast;
use crate::plan::Planner;
use crate::schema::{self, Catalog, Table};
use crate::{Database, Value};
use std::rc::Rc;

/// Refuses a name SQLite keeps for its own objects (`sqlite_schema`, the constraints' indexes
/// `sqlite_autoindex_...`), as SQLite does.
pub(crate) fn reserved(name: &str) -> Result<()> {
    if name
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("sqlite_"))
    {
        return Err(Error::Invalid(format!(
            "object name reserved for internal use: {name}"
        )));
    }
    Ok(())
}

impl Database {
    pub(crate) fn name_taken(&self, name: &str) -> bool {
        self.catalog.tables.contains_key(&name.to_ascii_lowercase())
            || self.catalog.index_owner(name).is_some()
            || self.catalog.fts(name).is_some()
    }

    pub(crate) fn ddl(&mut self, stmt: &ast::Statement) -> Result<()> {
        match stmt {
            ast::Statement::CreateTable(ct) => {
                if self
                    .catalog
                    .tables
                    .contains_key(&ct.name.to_ascii_lowercase())
                {
                    if ct.if_not_exists {
                        return Ok(());
                    }
                    return Err(Error::AlreadyExists(format!("table {}", ct.name)));
                }
                if self.name_taken(&ct.name) {
                    return Err(Error::AlreadyExists(format!("an index named {}", ct.name)));
                }
                reserved(&ct.name)?;
                let tree = self.catalog.next_tree;
                let mut next = tree + 1;
                let t = schema::table_from_ast(ct, tree, &mut next)?;
                // Plan CHECK and DEFAULT now, so a bad one fails at CREATE, not at INSERT.
                {
                    let mut p = Planner::new(&self.catalog);
                    for c in &t.checks {
                        p.table_expr(&t, &c.expr)?;
                    }
                    let empty = Table {
                        columns: vec![],
                        indexes: vec![],
                        checks: vec![],
                        ..t.clone()
                    };
                    for c in &t.columns {
                        if let Some(d) = &c.default {
                            p.table_expr(&empty, &d.expr)?;
                        }
                    }
                }
                self.catalog.next_tree = next;
                self.store.create_tree(t.tree)?;
                for ix in &t.indexes {
                    self.store.create_tree(ix.tree)?;
                }
                Catalog::save_table(self.store.as_mut(), &t)?;
                self.catalog
                    .tables
                    .insert(t.name.to_ascii_lowercase(), Rc::new(t));
                Ok(())
            }
            ast::Statement::CreateVirtual(cv) => self.create_fts(cv),
            ast::Statement::DropTable { name, if_exists } => {
                if self.drop_fts(name)? {
                    return Ok(());
                }
                let Some(t) = self.catalog.tables.get(&name.to_ascii_lowercase()).cloned() else {
                    if *if_exists {
                        return Ok(());
                    }
                    return Err(Error::UnknownTable(name.clone()));
                };
                self.store.drop_tree(t.tree)?;
                for ix in &t.indexes {
                    self.store.drop_tree(ix.tree)?;
                }
                Catalog::delete_table_rows(self.store.as_mut(), &t)?;
                self.catalog.tables.remove(&name.to_ascii_lowercase());
                Ok(())
            }
            ast::Statement::CreateIndex(ci) => {
                let t = self.catalog.table(&ci.table)?.clone();
                if self.name_taken(&ci.name) {
                    if ci.if_not_exists && self.catalog.index_owner(&ci.name).is_some() {
                        return Ok(());
                    }
                    return Err(Error::AlreadyExists(format!("index {}", ci.name)));
                }
                // The constraints' own indexes have these names.
                reserved(&ci.name)?;
                let mut columns = Vec::new();
                for c in &ci.columns {
                    columns.push(
                        t.column(c)
                            .ok_or_else(|| Error::UnknownColumn(format!("{}.{c}", t.name)))?,
                    );
                }
                let mut exprs = Vec::new();
                if !ci.exprs.is_empty() {
                    (exprs, columns) = schema::index_exprs(&t, &ci.exprs)?;
                }
                let tree = self.catalog.next_tree;
                self.catalog.next_tree += 1;
                self.store.create_tree(tree)?;
                let mut t2 = (*t).clone();
                t2.indexes.push(schema::Index {
                    name: ci.name.clone(),
                    columns: columns.clone(),
                    exprs,
                    unique: ci.unique,
                    tree,
                    auto: false,
                });
                let ix = t2.indexes.len() - 1;
                // Fill the index from the table's rows.
                let mut entries = Vec::new();
                {
                    let mut cur = self.store.scan(
                        t.tree,
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Unbounded,
                        false,
                    )?;
                    let index = &t2.indexes[ix];
                    while cur.next()? {
                        let rec = cairn_value::codec::Record::new(cur.value())?;
                        let mut key = Vec::with_capacity(12 * columns.len() + cur.key().len());
                        let mut has_null = false;
                        if index.exprs.is_empty() {
                            for &c in &columns {
                                let v = rec.get(c)?;
                                has_null |= v.is_null();
                                eval::push_norm(&v, &mut key);
                            }
                        } else {
                            let mut row = cairn_value::codec::decode_record(cur.value())?;
                            row.resize(t.columns.len(), Value::Null);
                            has_null = crate::exec::index_parts(index, &row, &mut key)?;
                        }
                        let plen = key.len();
                        key.extend_from_slice(cur.key());
                        entries.push((key, plen, has_null));
                    }
                }
                // Every key ends with the row's key, so no two are equal: the key alone orders
                // them, and an unstable sort is as good as a stable one.
                entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                for w in entries.windows(2) {
                    if ci.unique
                        && !w[0].2
                        && w[0].1 == w[1].1
                        && w[0].0[..w[0].1] == w[1].0[..w[1].1]
                    {
                        let names = t2.index_part_names(&t2.indexes[ix]);
                        return Err(Error::ConstraintUnique(names));
                    }
                }
                self.store
                    .load_keys(tree, &mut entries.iter().map(|e| e.0.as_slice()))?;
                Catalog::save_table(self.store.as_mut(), &t2)?;
                self.catalog
                    .tables
                    .insert(t2.name.to_ascii_lowercase(), Rc::new(t2));
                Ok(())
            }
            ast::Statement::DropIndex { name, if_exists } => {
                let Some((t, i)) = self.catalog.index_owner(name).map(|(t, i)| (t.clone(), i))
                else {
                    if *if_exists {
                        return Ok(());
                    }
                    return Err(Error::UnknownIndex(name.clone()));
                };
                if t.indexes[i].auto {
                    return Err(Error::Invalid(format!(
                        "index {name} belongs to a UNIQUE constraint and cannot be dropped"
                    )));
                }
                self.store.drop_tree(t.indexes[i].tree)?;
                Catalog::delete_index_row(self.store.as_mut(), name)?;
                let mut t2 = (*t).clone();
                t2.indexes.remove(i);
                self.catalog
                    .tables
                    .insert(t2.name.to_ascii_lowercase(), Rc::new(t2));
                Ok(())
            }
            ast::Statement::AlterTable { table, action } => self.alter_table(table, action),
            _ => Err(Error::Invalid("invariant: not a direct statement".into())),
        }
    }
}
