//! `SAVEPOINT`, `RELEASE` and `ROLLBACK TO`, with SQLite's rules: a savepoint outside a
//! transaction begins one, and releasing that outermost savepoint commits it; `ROLLBACK TO`
//! undoes what followed the savepoint (rows, schema, the changes recorded for replicated
//! tables) and keeps it, and the transaction, open; `RELEASE` forgets it and those after it.
//! Names are matched without case, the most recent first.

use crate::exec::ChangesMark;
use crate::schema::Catalog;
use crate::watch::Changed;
use crate::{Database, Error, Output, Result};

/// One open savepoint.
pub(crate) struct Savepoint {
    name: String,
    /// The storage's savepoint.
    sp: u64,
    /// What a rollback to it restores besides the rows.
    catalog: Catalog,
    /// The schema's epoch then: it moved if the schema changed since.
    epoch: u64,
    changes: ChangesMark,
    tx_changed: Changed,
    /// This savepoint began the transaction: releasing it commits.
    began: bool,
}

impl Database {
    pub(crate) fn savepoint(&mut self, name: &str) -> Result<Output> {
        let began = !self.in_tx;
        if began {
            self.store.begin()?;
            self.in_tx = true;
            self.tx_catalog = Some(self.catalog.clone());
        }
        let sp = match self.store.savepoint() {
            Ok(sp) => sp,
            Err(e) => {
                if began {
                    self.store.rollback()?;
                    self.in_tx = false;
                    self.tx_catalog = None;
                }
                return Err(e);
            }
        };
        self.savepoints.push(Savepoint {
            name: name.to_string(),
            sp,
            catalog: self.catalog.clone(),
            epoch: self.epoch,
            changes: self.changes.mark(),
            tx_changed: self.tx_changed.clone(),
            began,
        });
        Ok(Output::Done)
    }

    /// Where the most recent savepoint named `name` is on the stack.
    fn find_savepoint(&self, name: &str) -> Result<usize> {
        (self.savepoints.iter())
            .rposition(|s| s.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::Transaction(format!("no such savepoint: {name}")))
    }

    pub(crate) fn release(&mut self, name: &str) -> Result<Output> {
        let at = self.find_savepoint(name)?;
        let released: Vec<Savepoint> = self.savepoints.drain(at..).collect();
        for s in released.iter().rev() {
            self.store.release(s.sp)?;
        }
        if released[0].began {
            // The transaction began with it: releasing it is COMMIT.
            return self.commit_tx();
        }
        Ok(Output::Done)
    }

    pub(crate) fn rollback_to(&mut self, name: &str) -> Result<Output> {
        let at = self.find_savepoint(name)?;
        let sp = self.savepoints[at].sp;
        self.store.rollback_to(sp)?;
        for s in self.savepoints.drain(at + 1..).rev() {
            self.store.release(s.sp)?;
        }
        let s = &self.savepoints[at];
        self.changes.back_to(s.changes);
        self.tx_changed = s.tx_changed.clone();
        if self.epoch != s.epoch {
            self.catalog = s.catalog.clone();
            self.schema_moved();
            // The savepoint's epoch is the schema it holds now.
            let epoch = self.epoch;
            self.savepoints[at].epoch = epoch;
        }
        Ok(Output::Done)
    }
}
