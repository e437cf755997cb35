//! What commits changed, for a host that runs queries again when the tables they read change
//! (live queries): per table, the rows inserted, updated and deleted, by statements and by rows
//! applied from a peer ([`Database::force_rows`]); and the tables a query reads.

use crate::parse;
use crate::plan::Planner;
use crate::{Database, Error, Result};

/// The rows of one table that committed changes touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableChange {
    pub table: String,
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
}

/// What the commits since the host last asked changed ([`Database::take_changed`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// In the order the tables were first changed.
    pub tables: Vec<TableChange>,
    /// Whether a table or an index was made, altered or dropped.
    pub schema: bool,
    /// How many commits changed something.
    pub commits: u64,
}

impl Changed {
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty() && !self.schema
    }

    /// Counts rows of `table` (a commit writes few tables: found by a search).
    pub(crate) fn add(&mut self, table: &str, inserted: u64, updated: u64, deleted: u64) {
        if inserted + updated + deleted == 0 {
            return;
        }
        let t = match self.tables.iter().position(|t| t.table == table) {
            Some(i) => &mut self.tables[i],
            None => {
                self.tables.push(TableChange {
                    table: table.to_string(),
                    ..TableChange::default()
                });
                self.tables.last_mut().expect("invariant: just pushed")
            }
        };
        t.inserted += inserted;
        t.updated += updated;
        t.deleted += deleted;
    }

    /// Adds what one commit changed (`other`, then emptied).
    pub(crate) fn commit(&mut self, other: &mut Changed) {
        if other.is_empty() {
            return;
        }
        for t in other.tables.drain(..) {
            self.add(&t.table, t.inserted, t.updated, t.deleted);
        }
        self.schema |= std::mem::take(&mut other.schema);
        self.commits += 1;
    }
}

impl Database {
    /// What the commits since the last call changed (statements, rows applied from a peer,
    /// schema changes); a transaction rolled back, or a statement that failed, changed nothing.
    pub fn take_changed(&mut self) -> Changed {
        std::mem::take(&mut self.changed)
    }

    /// The tables (and views' tables) the query `sql` reads, in the order it names them, each
    /// once: a live query runs again after a commit that changed one of them.
    pub fn tables_read(&self, sql: &str) -> Result<Vec<String>> {
        let mut stmts = parse::parse_statements(sql)?;
        if stmts.len() != 1 {
            return Err(Error::Invalid(format!(
                "a query to watch is one statement; {} were given",
                stmts.len()
            )));
        }
        let (ast, _, _) = stmts.pop().expect("invariant: one statement");
        let crate::parse::ast::Statement::Select(q) = &ast else {
            return Err(Error::Invalid(
                "only a SELECT can be watched (a statement that writes changes what it reads)"
                    .into(),
            ));
        };
        let mut p = Planner::new(&self.catalog);
        p.query(q)?;
        Ok(p.read)
    }

    /// Counts a statement's rows in this transaction, or as a commit of its own (with the rows
    /// its commit corrected). An autocommit statement's table is counted where it stays, so
    /// the common single-row commit copies no name.
    pub(crate) fn note_rows(&mut self, table: &str, inserted: u64, updated: u64, deleted: u64) {
        if self.in_tx {
            self.tx_changed.add(table, inserted, updated, deleted);
            return;
        }
        let rows = inserted + updated + deleted > 0;
        self.changed.add(table, inserted, updated, deleted);
        let corrected = !self.tx_changed.is_empty();
        self.changed.commit(&mut self.tx_changed);
        if rows && !corrected {
            self.changed.commits += 1;
        }
    }
}
