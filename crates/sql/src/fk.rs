//! Foreign keys, enforced as SQLite enforces them while `PRAGMA foreign_keys` is on (off by
//! default, as in SQLite; docs/sql.md, "Foreign keys").
//!
//! - A child row's key must name a parent row. Each key of the table becomes one more CHECK
//!   (`child_checks`): `c IS NULL OR EXISTS (SELECT 1 FROM parent WHERE parent.p = c)`, tested
//!   on every row the statement writes, after the table's own CHECKs, by `Writer::check_row`.
//!   A row of a table that refers to itself may name itself.
//! - Deleting a parent row, or changing its key, does to its children what the key's
//!   `ON DELETE` / `ON UPDATE` says (`Database::fk_write`): the statement's own WHERE reads the
//!   old keys (and, for an UPDATE, the new ones from its SET expressions) before the write,
//!   then each action runs as a statement of its own over the children, which may cascade in
//!   turn. `RESTRICT` and `NO ACTION` look for children left naming a key that is gone.
//!   All of it runs inside the statement's savepoint (`Database::atomic`): an error anywhere
//!   undoes the statement and every cascade.
//! - A `DEFERRABLE INITIALLY DEFERRED` key is not checked per row: the query of
//!   `PRAGMA foreign_key_check` runs over the deferred keys at COMMIT (a violation fails the
//!   COMMIT and leaves the transaction open, as in SQLite), or after the statement outside a
//!   transaction.
//!
//! The entry points are out of line (`#[inline(never)]`): with foreign keys off, as in every
//! statement of the build's split profile, their callers keep one test of a flag, and all of
//! this goes to `cairn-rest.wasm` (docs/size.md).

use crate::error::{Error, Result};
use crate::exec::eval::{self, Cache};
use crate::exec::{self, WriteResult};
use crate::parse;
use crate::parse::ast::{self, Expr, FkAction, ForeignKey, SelectBody, SelectItem};
use crate::plan::{PExpr, Planner};
use crate::schema::{quote_ident, Catalog, Key, Table};
use crate::{Database, Output, Prepared, Value};
use cairn_value::text::join;
use std::rc::Rc;

/// Rows a cascade changed in another table: (table, updated, deleted), for `note_rows`.
pub(crate) type Notes = Vec<(String, u64, u64)>;

/// The parent's columns that `fk` of `child` names: as written, or the parent's primary key.
/// None when the parent table does not exist; an error when they are not the parent's
/// primary key or a UNIQUE index's columns, SQLite's "foreign key mismatch".
fn parent_columns(
    catalog: &Catalog,
    child: &Table,
    fk: &ForeignKey,
) -> Result<Option<Vec<String>>> {
    let Ok(p) = catalog.table(&fk.parent) else {
        return Ok(None);
    };
    let mismatch = || {
        Error::Invalid(format!(
            "foreign key mismatch - \"{}\" referencing \"{}\"",
            child.name, fk.parent
        ))
    };
    let cols = if fk.parent_columns.is_empty() {
        p.key_columns()
    } else {
        p.columns_named(&fk.parent_columns)
            .map_err(|_| mismatch())?
    };
    let sorted = |mut v: Vec<usize>| {
        cairn_store::sort::sort(&mut v);
        v
    };
    let want = sorted(cols.clone());
    let keyed = sorted(p.key_columns()) == want
        || (p.indexes.iter())
            .any(|ix| ix.unique && ix.exprs.is_empty() && sorted(ix.columns.clone()) == want);
    if cols.len() != fk.columns.len() || !keyed {
        return Err(mismatch());
    }
    Ok(Some(
        cols.iter().map(|&c| p.columns[c].name.clone()).collect(),
    ))
}

/// `a.x = b.y AND ...` over pairs of names, each side qualified by its prefix (may be empty).
fn pairs(left: &str, l: &[String], right: &str, r: &[String]) -> String {
    let parts: Vec<String> = (l.iter().zip(r))
        .map(|(a, b)| format!("{left}{} = {right}{}", quote_ident(a), quote_ident(b)))
        .collect();
    join(&parts, " AND ")
}

/// `c1 = ?1 AND c2 = ?2 ...`, numbered from `first`.
fn params_eq(cols: &[String], first: usize) -> String {
    let parts: Vec<String> = (cols.iter().enumerate())
        .map(|(i, c)| format!("{} = ?{}", quote_ident(c), first + i))
        .collect();
    join(&parts, " AND ")
}

/// The one expression of `SELECT <text>`.
fn parse_expr(text: &str) -> Result<Expr> {
    let (stmt, _) = parse::parse(&format!("SELECT {text}"))?;
    if let ast::Statement::Select(s) = stmt {
        if let SelectBody::Core(c) = s.body {
            if let Some(SelectItem::Expr { expr, .. }) = c.columns.into_iter().next() {
                return Ok(expr);
            }
        }
    }
    Err(Error::Invalid("foreign key: bad expression".into()))
}

/// The condition that a row of `t` keeps to `fk`: NULL in a key column, or a parent row there.
fn kept_text(catalog: &Catalog, t: &Table, fk: &ForeignKey) -> Result<String> {
    let nulls: Vec<String> = (fk.columns.iter())
        .map(|c| format!("{} IS NULL", quote_ident(c)))
        .collect();
    let nulls = join(&nulls, " OR ");
    let Some(pc) = parent_columns(catalog, t, fk)? else {
        return Err(Error::UnknownTable(fk.parent.clone()));
    };
    let me = format!("{}.", quote_ident(&t.name));
    let mut s = format!(
        "{nulls} OR EXISTS (SELECT 1 FROM {} AS _fk_parent WHERE {})",
        quote_ident(&fk.parent),
        pairs("_fk_parent.", &pc, &me, &fk.columns)
    );
    if fk.parent.eq_ignore_ascii_case(&t.name) {
        // The row may name itself: it is there once the statement is done.
        s.push_str(&format!(" OR ({})", pairs("", &pc, "", &fk.columns)));
    }
    Ok(s)
}

/// The checks `t`'s immediate foreign keys put on each row written (for an UPDATE, `set`
/// names the columns it sets: only the keys among them are checked).
#[inline(never)]
pub(crate) fn child_checks(
    p: &mut Planner,
    catalog: &Catalog,
    t: &Table,
    set: Option<&[String]>,
) -> Result<Vec<PExpr>> {
    let mut out = Vec::new();
    for fk in t.foreign_keys.iter().filter(|fk| !fk.deferred) {
        let touched = |c: &String| set.is_none_or(|s| s.iter().any(|x| x.eq_ignore_ascii_case(c)));
        if fk.columns.iter().any(touched) {
            out.push(p.table_expr(t, &parse_expr(&kept_text(catalog, t, fk)?)?)?);
        }
    }
    Ok(out)
}

/// A foreign key of another table (or of this one) that names `parent`.
struct Reference {
    child: Rc<Table>,
    fk: ForeignKey,
    /// The parent's columns it names.
    cols: Vec<String>,
}

fn references(catalog: &Catalog, parent: &str) -> Result<Vec<Reference>> {
    let mut out = Vec::new();
    for child in catalog.tables.values() {
        for fk in &child.foreign_keys {
            if fk.parent.eq_ignore_ascii_case(parent) {
                let cols = parent_columns(catalog, child, fk)?
                    .expect("invariant: the parent of a reference found by its name exists");
                out.push(Reference {
                    child: child.clone(),
                    fk: fk.clone(),
                    cols,
                });
            }
        }
    }
    Ok(out)
}

impl Database {
    /// `PRAGMA foreign_keys [= on|off]` and `PRAGMA foreign_key_check [(table)]`; None for
    /// the other pragmas.
    #[inline(never)]
    pub(crate) fn fk_pragma(&mut self, name: &str, value: Option<&str>) -> Result<Option<Output>> {
        let rows = |columns: &[&str], rows| Output::Rows {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
        };
        if name.eq_ignore_ascii_case("foreign_keys") {
            let Some(v) = value else {
                return Ok(Some(rows(
                    &["foreign_keys"],
                    vec![vec![Value::Integer(self.foreign_keys as i64)]],
                )));
            };
            // As SQLite: a no-op inside a transaction.
            if !self.in_tx {
                let v = v.to_ascii_lowercase();
                self.foreign_keys = match v.as_str() {
                    "on" | "yes" | "true" | "full" => true,
                    "off" | "no" | "false" => false,
                    n => crate::introspect::atoi32(n) != 0,
                };
            }
            return Ok(Some(Output::Done));
        }
        if name.eq_ignore_ascii_case("foreign_key_check") {
            if let Some(t) = value {
                self.catalog.table(t)?;
            }
            let found = self.fk_violations(value, false, usize::MAX)?;
            return Ok(Some(rows(&["table", "rowid", "parent", "fkid"], found)));
        }
        Ok(None)
    }

    /// Rows that break a foreign key (of `table`, or of every table; deferred keys only if
    /// `deferred`), at most `limit`: `PRAGMA foreign_key_check`'s rows.
    fn fk_violations(
        &self,
        table: Option<&str>,
        deferred: bool,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>> {
        let mut out = Vec::new();
        for t in self.catalog.tables.values() {
            if table.is_some_and(|n| !n.eq_ignore_ascii_case(&t.name)) {
                continue;
            }
            let n = t.foreign_keys.len();
            for (i, fk) in t.foreign_keys.iter().enumerate() {
                if deferred && !fk.deferred {
                    continue;
                }
                let set: Vec<String> = (fk.columns.iter())
                    .map(|c| format!("{} IS NOT NULL", quote_ident(c)))
                    .collect();
                let mut cond = join(&set, " AND ");
                if self.catalog.table(&fk.parent).is_ok() {
                    let kept = kept_text(&self.catalog, t, fk)?;
                    cond = format!("NOT ({kept})");
                }
                // The row id SQLite shows: an INTEGER PRIMARY KEY's value (a table without
                // one has no row id cairn can name).
                let rowid = match t.key {
                    Key::Rowid(Some(c)) => quote_ident(&t.columns[c].name),
                    _ => "NULL".into(),
                };
                let sql = format!(
                    "SELECT {rowid} FROM {} WHERE {cond} LIMIT {}",
                    quote_ident(&t.name),
                    limit.min(i64::MAX as usize)
                );
                for r in self.fk_query(&sql, &[])? {
                    out.push(vec![
                        Value::Text(t.name.clone()),
                        r.into_iter().next().unwrap_or(Value::Null),
                        Value::Text(fk.parent.clone()),
                        Value::Integer((n - 1 - i) as i64),
                    ]);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Runs a query the foreign keys need, over the open transaction.
    fn fk_query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let (stmt, _) = parse::parse(sql)?;
        let ast::Statement::Select(q) = stmt else {
            return Err(Error::Invalid("foreign key: not a query".into()));
        };
        self.fk_select(&q, params)
    }

    fn fk_select(&self, q: &ast::Select, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let plan = Planner::new(&self.catalog).query(q)?;
        let cache = Cache::default();
        let cx = eval::Cx {
            store: self.store.as_ref(),
            params,
            outer: None,
            rng: &self.rng,
            cache: &cache,
            regroup: None,
        };
        exec::collect_rows(&plan, &cx)
    }

    /// Runs a write statement with foreign keys on: the write and its cascades, as one.
    #[inline(never)]
    pub(crate) fn fk_statement(
        &mut self,
        stmt: &ast::Statement,
        prepared: &Prepared,
        params: &[Value],
    ) -> Result<Output> {
        let (table, names) = match prepared {
            Prepared::Insert(p, _) => (&p.table, &p.returning_names),
            Prepared::Update(p, _) | Prepared::Delete(p) => (&p.table, &p.returning_names),
            _ => return Err(Error::Invalid("foreign key: not a write".into())),
        };
        let mut notes = Notes::new();
        let res = self.atomic(false, |db| {
            let res = db.fk_write(stmt, prepared, params, &mut notes)?;
            let mut tables: Vec<&str> = notes.iter().map(|n| n.0.as_str()).collect();
            tables.push(&table.name);
            db.fk_after_write(&tables)?;
            Ok(res)
        })?;
        match prepared {
            Prepared::Insert(..) => {
                if let Some(r) = res.last_rowid {
                    self.last_rowid = r;
                }
                self.note_rows(&table.name, res.changes - res.updated, res.updated, 0);
            }
            Prepared::Update(..) => self.note_rows(&table.name, 0, res.changes, 0),
            _ => self.note_rows(&table.name, 0, 0, res.changes),
        }
        for (t, u, d) in notes {
            self.note_rows(&t, 0, u, d);
        }
        Ok(crate::write_output(res, names, self.last_rowid))
    }

    /// Runs a write with foreign keys on (inside `atomic`): the write, then what it does to
    /// the children of the rows it deleted or whose keys it changed.
    pub(crate) fn fk_write(
        &mut self,
        stmt: &ast::Statement,
        prepared: &Prepared,
        params: &[Value],
        notes: &mut Notes,
    ) -> Result<WriteResult> {
        let (table, where_, with, set, alias) = match stmt {
            ast::Statement::Update(u) => (&u.table, &u.where_, &u.with, Some(&u.set), &u.alias),
            ast::Statement::Delete(d) => (&d.table, &d.where_, &d.with, None, &d.alias),
            _ => (&String::new(), &None, &None, None, &None),
        };
        let refs: Vec<Reference> = if table.is_empty() {
            Vec::new()
        } else {
            let mut r = references(&self.catalog, table)?;
            if let Some(set) = set {
                r.retain(|r| {
                    (r.cols.iter()).any(|c| set.iter().any(|(s, _)| s.eq_ignore_ascii_case(c)))
                });
            }
            r
        };
        // The keys the statement's rows hold before the write (and, for an UPDATE, after it).
        let mut keys = Vec::new();
        if !refs.is_empty() {
            let mut items = Vec::new();
            for r in &refs {
                for c in &r.cols {
                    items.push(parse_expr(&quote_ident(c))?);
                }
                if let Some(set) = set {
                    for c in &r.cols {
                        let new = set.iter().rev().find(|(s, _)| s.eq_ignore_ascii_case(c));
                        items.push(match new {
                            Some((_, e)) => e.clone(),
                            None => parse_expr(&quote_ident(c))?,
                        });
                    }
                }
            }
            let (q, _) = parse::parse(&format!("SELECT 1 FROM {}", quote_ident(table)))?;
            let ast::Statement::Select(mut q) = q else {
                return Err(Error::Invalid("foreign key: not a query".into()));
            };
            q.with = with.clone();
            if let SelectBody::Core(core) = &mut q.body {
                core.columns = (items.into_iter())
                    .map(|expr| SelectItem::Expr {
                        expr,
                        alias: None,
                        text: String::new(),
                    })
                    .collect();
                core.where_ = where_.clone();
                core.from[0].alias = alias.clone();
            }
            keys = self.fk_select(&q, params)?;
        }
        let res = match prepared {
            Prepared::Insert(p, checks) => self.writer(params).insert(p, checks)?,
            Prepared::Update(p, checks) => self.writer(params).update(p, checks)?,
            Prepared::Delete(p) => self.writer(params).delete(p)?,
            _ => return Err(Error::Invalid("foreign key: not a write".into())),
        };
        let mut at = 0;
        let mut checks = Vec::new();
        for r in &refs {
            let n = r.cols.len();
            let width = if set.is_some() { 2 * n } else { n };
            let action = if set.is_some() {
                r.fk.on_update
            } else {
                r.fk.on_delete
            };
            let child = quote_ident(&r.child.name);
            let by_old = params_eq(&r.fk.columns, 1);
            let sql = match action {
                FkAction::Cascade if set.is_some() => {
                    let sets: Vec<String> = (r.fk.columns.iter().enumerate())
                        .map(|(i, c)| format!("{} = ?{}", quote_ident(c), n + 1 + i))
                        .collect();
                    Some(format!(
                        "UPDATE {child} SET {} WHERE {by_old}",
                        join(&sets, ", ")
                    ))
                }
                FkAction::Cascade => Some(format!("DELETE FROM {child} WHERE {by_old}")),
                FkAction::SetNull | FkAction::SetDefault => {
                    let sets: Vec<String> = (r.fk.columns.iter())
                        .map(|c| {
                            let default = (r.child.column(c))
                                .and_then(|i| r.child.columns[i].default.as_ref())
                                .filter(|_| action == FkAction::SetDefault)
                                .map_or("NULL".to_string(), |d| format!("({})", d.text));
                            format!("{} = {default}", quote_ident(c))
                        })
                        .collect();
                    Some(format!(
                        "UPDATE {child} SET {} WHERE {by_old}",
                        join(&sets, ", ")
                    ))
                }
                FkAction::Restrict | FkAction::NoAction => None,
            };
            let prepared_action = match &sql {
                Some(sql) => {
                    let (ast, _) = parse::parse(sql)?;
                    let p = self.plan(&ast)?;
                    Some((ast, p))
                }
                None => None,
            };
            for row in &keys {
                let old = &row[at..at + n];
                if old.iter().any(Value::is_null) {
                    continue;
                }
                let mut args = old.to_vec();
                if set.is_some() {
                    let new = &row[at + n..at + 2 * n];
                    if old == new {
                        continue;
                    }
                    args.extend_from_slice(new);
                }
                match &prepared_action {
                    Some((ast, p)) => {
                        let done = self.fk_write(ast, p, &args, notes)?;
                        let deleted = matches!(ast, ast::Statement::Delete(_));
                        let (u, d) = if deleted {
                            (0, done.changes)
                        } else {
                            (done.changes, 0)
                        };
                        notes.push((r.child.name.clone(), u, d));
                    }
                    // Deferred NO ACTION waits for COMMIT; RESTRICT never waits.
                    None if r.fk.deferred && action == FkAction::NoAction => {}
                    None => checks.push((r, old.to_vec())),
                }
            }
            at += width;
        }
        // RESTRICT and NO ACTION: once every action has run, no child may name a key that is
        // gone (a key an UPDATE gave back to another row is not gone).
        for (r, old) in checks {
            let gone = self
                .fk_query(
                    &format!(
                        "SELECT 1 FROM {} WHERE {} LIMIT 1",
                        quote_ident(table),
                        params_eq(&r.cols, 1)
                    ),
                    &old,
                )?
                .is_empty();
            let named = !self
                .fk_query(
                    &format!(
                        "SELECT 1 FROM {} WHERE {} LIMIT 1",
                        quote_ident(&r.child.name),
                        params_eq(&r.fk.columns, 1)
                    ),
                    &old,
                )?
                .is_empty();
            if gone && named {
                return Err(Error::ConstraintForeignKey);
            }
        }
        Ok(res)
    }

    /// After a write with foreign keys on: a deferred key on any table it touched is checked
    /// now outside a transaction, at COMMIT inside one.
    #[inline(never)]
    pub(crate) fn fk_after_write(&mut self, tables: &[&str]) -> Result<()> {
        let touched = (self.catalog.tables.values()).any(|t| {
            t.foreign_keys.iter().any(|fk| {
                fk.deferred
                    && tables.iter().any(|n| {
                        n.eq_ignore_ascii_case(&t.name) || n.eq_ignore_ascii_case(&fk.parent)
                    })
            })
        });
        if !touched {
            return Ok(());
        }
        if self.in_tx {
            self.fk_pending = true;
            return Ok(());
        }
        self.fk_check_deferred()
    }

    /// The deferred keys, checked before a commit.
    #[inline(never)]
    pub(crate) fn fk_check_deferred(&self) -> Result<()> {
        if self.fk_violations(None, true, 1)?.is_empty() {
            Ok(())
        } else {
            Err(Error::ConstraintForeignKey)
        }
    }
}
