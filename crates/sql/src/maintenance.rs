//! What a database does besides statements: integrity check, export, and the schema listing.

use crate::error::Result;
use crate::Database;

/// One entry of [`Database::schema`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaEntry {
    /// `table` or `index`.
    pub kind: &'static str,
    pub name: String,
    /// The table an index belongs to (the table itself for a table).
    pub table: String,
    /// SQL that creates it.
    pub sql: String,
}

impl Database {
    /// The whole check: the storage's structure (pages, checksums, tree shape, free space) where
    /// the storage has one, then every row against its table and every index against its rows
    /// ([`Database::check`]). Returns every problem found, empty when the database is sound.
    pub fn integrity_check(&mut self) -> Result<Vec<String>> {
        let mut problems = match self.store.integrity_check() {
            Ok(p) => p,
            Err(crate::Error::Unsupported(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        // Rows and indexes are only worth reading when the pages under them are sound.
        if problems.is_empty() {
            problems = self.check()?;
        }
        Ok(problems)
    }

    /// The database as one file's bytes, as of the last commit (with what the commit hook held
    /// in memory alone written first: [`Database::flush`]).
    pub fn export(&mut self) -> Result<Vec<u8>> {
        self.flush()?;
        self.store.export()
    }

    /// Every table and index, tables in name order, each followed by its indexes.
    pub fn schema(&self) -> Vec<SchemaEntry> {
        let mut out = Vec::new();
        for t in self.catalog().tables.values() {
            out.push(SchemaEntry {
                kind: "table",
                name: t.name.clone(),
                table: t.name.clone(),
                sql: t.sql(),
            });
            for ix in t.indexes.iter().filter(|ix| !ix.auto) {
                out.push(SchemaEntry {
                    kind: "index",
                    name: ix.name.clone(),
                    table: t.name.clone(),
                    sql: t.index_sql(ix),
                });
            }
        }
        out
    }
}
