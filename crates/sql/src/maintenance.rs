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
    /// Checks the storage's structure and returns every problem found (empty when sound).
    pub fn check(&mut self) -> Result<Vec<String>> {
        self.store.integrity_check()
    }

    /// The database as one file's bytes, as of the last commit.
    pub fn export(&mut self) -> Result<Vec<u8>> {
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
