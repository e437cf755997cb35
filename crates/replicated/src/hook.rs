//! The commit hook ([`Hook`], the SQL layer's [`CommitHook`]): before a commit that wrote
//! replicated tables, the capture's ops become records appended to this device's chains
//! ([`State::commit_records`]) and saved in the same storage transaction; the rows merging
//! changed (a counter, a UNIQUE clash) go back to the SQL layer as corrections. After it, the
//! records count as pending, or, when the commit did not reach the store, the state is read
//! again from the store.

use crate::apply::full_row;
use crate::capture::ScopeSlot;
use crate::persist;
use crate::refused_write;
use crate::state::State;
use cairn_sql::same_row;
use cairn_sql::Catalog;
use cairn_sql::{Changes, CommitHook, Correction, Result, SchemaStamp, Storage};
use cairn_sync::ChainKey;
use std::cell::RefCell;
use std::rc::Rc;

/// The hook `Sync::attach` installs, sharing the state with `Sync` and the capture.
pub(crate) struct Hook(pub(crate) Rc<RefCell<State>>);

impl CommitHook for Hook {
    fn before_commit(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>> {
        let mut st = self.0.borrow_mut();
        if st.stale.is_some() {
            // Marking the state stale makes the capture decide again, and it takes nothing
            // from a stale state: reading it again drops no op of this transaction.
            debug_assert!(st.sink_on != Some(true));
            // The in-memory state is ahead of the store after a failed commit: rebuild it
            // from what is on disk (this transaction has not touched the sync trees yet).
            st.reload(&*store, catalog)?;
        }
        st.uncommitted = 0;
        st.uncommitted_from.clear();
        let r = st.record(store, catalog, schema, changes);
        if r.is_err() {
            st.abandon_commit();
        }
        r
    }

    fn schema_changed(&mut self, catalog: &Catalog) {
        if let Ok(mut st) = self.0.try_borrow_mut() {
            st.shapes_for(catalog);
        }
    }

    fn after_commit(&mut self, committed: bool) {
        let mut st = self.0.borrow_mut();
        if committed {
            st.uncommitted = 0;
        } else {
            st.abandon_commit();
        }
    }

    fn unwritten(&self) -> bool {
        let st = self.0.borrow();
        st.unwritten || st.keep.is_some()
    }

    fn flush(&mut self, store: &mut dyn Storage, catalog: &Catalog) -> Result<()> {
        let mut st = self.0.borrow_mut();
        st.uncommitted = 0;
        st.uncommitted_from.clear();
        if st.stale.is_some() {
            st.reload(&*store, catalog)?;
        }
        if st.replica.is_some() {
            st.persist(store)?;
        }
        Ok(())
    }
}

/// `SYNC_REFUSED` for a write to a key another scope's row holds.
fn shadowed(key: &cairn_sync::RowKey, owner: &cairn_sync::KeyOwner) -> cairn_sql::Error {
    let scope = |s: &cairn_sync::ScopeId| {
        format!(
            "{:?} of owner {}",
            String::from_utf8_lossy(&s.name),
            &s.owner.to_hex()[..12]
        )
    };
    let why = match &owner.shown {
        Some(k) => format!(
            "the table's row with this key is the one in scope {}",
            scope(&k.scope)
        ),
        None => {
            let others: Vec<String> = (owner.hidden.iter())
                .filter(|k| **k != *key)
                .map(|k| scope(&k.scope))
                .collect();
            format!(
                "scope {} of another owner holds this key, so no replica shows either row",
                others.join(", ")
            )
        }
    };
    cairn_sql::Error::Sync(
        "SYNC_REFUSED",
        format!(
            "UNAUTHORIZED: {}: a write of key ({}) in scope {}: {why} (docs/sync.md sec. 7, \
             \"One row, one owner\"); give the row a key of its own",
            key.table,
            crate::apply::pk_text(key),
            scope(&key.scope)
        ),
    )
}

impl State {
    /// Turns a transaction's row changes into one record per scope.
    fn record(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>> {
        // The common commit: every change taken by the capture as the statements ran (no
        // counter, scope column or UNIQUE index, so nothing to correct), the catalog as at the
        // last commit. Its few steps kept together, the rest out of their way.
        if changes.held() == 0
            && self.sink_on == Some(true)
            && self.sink_error.is_none()
            && self.replica.is_some()
            && self.registered_for == Some(schema)
        {
            let since = self.shadow_risk();
            self.commit_records(store)?;
            self.check_owners(since)?;
            return Ok(Vec::new());
        }
        self.record_held(store, catalog, schema, changes)
    }

    /// Where this commit's records start in each chain it writes, when one of them may write
    /// a key its table shows from another scope (`Replica::may_shadow`); else none to check.
    fn shadow_risk(&self) -> Option<Vec<(ChainKey, u64)>> {
        let replica = self.replica.as_ref()?;
        let used = self.scopes.used.iter().map(|&i| &self.scopes.list[i].chain);
        if !used.clone().any(|k| replica.may_shadow(&k.1)) {
            return None;
        }
        Some(
            used.map(|k| (k.clone(), replica.chain(k).map_or(0, |l| l.head().0)))
                .collect(),
        )
    }

    /// Refuses a commit that wrote a row its table would not show, on this replica as on every
    /// other: a key another scope's row holds (docs/sync.md sec. 7, "One row, one owner").
    fn check_owners(&mut self, since: Option<Vec<(ChainKey, u64)>>) -> Result<()> {
        let Some(since) = since else {
            return Ok(());
        };
        match self.replica_mut().shadowed_write(&since) {
            None => Ok(()),
            Some((key, owner)) => Err(shadowed(&key, &owner)),
        }
    }

    /// [`State::record`] for any other commit.
    #[inline(never)]
    fn record_held(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>> {
        let schema_changed = self.ensure_for(store, catalog, schema)?;
        let sink_was_on = self.sink_on == Some(true);
        let (finals, mut unique_tables) = self.write_held(catalog, changes)?;
        let since = self.shadow_risk();
        self.commit_records(store)?;
        self.check_owners(since)?;
        // A table the capture took that has a UNIQUE index now (made inside the transaction:
        // the capture took its changes as one with none). Its scope is named after it.
        if schema_changed && sink_was_on {
            for &i in &self.scopes.used {
                let name = &self.scopes.list[i].name;
                let unique = (catalog.tables.get(&name.to_ascii_lowercase()))
                    .is_some_and(|t| t.indexes.iter().any(|i| i.unique));
                if unique && !unique_tables.contains(name) {
                    unique_tables.push(name.clone());
                }
            }
        }
        if unique_tables.is_empty() && finals.is_none() {
            // Nothing to correct (the common case), so nothing to merge now.
            return Ok(Vec::new());
        }
        // In name order, and each row's last change in key order.
        unique_tables.sort_unstable();
        let mut finals = finals.unwrap_or_default();
        finals.reverse();
        finals.sort_by(|a, b| a.0.cmp(&b.0));
        finals.dedup_by(|later, kept| later.0 == kept.0);
        let mut fixes = Vec::new();
        self.replica_mut().merge_deferred();
        for name in unique_tables {
            let t = catalog.table(&name)?;
            let (visible, hidden) = self.replica().visible(&t.name);
            for r in hidden {
                fixes.push(Correction {
                    table: t.name.clone(),
                    pk: r.pk,
                    row: None,
                });
            }
            for r in visible {
                let row = full_row(t, &r.pk, r.values);
                fixes.push(Correction {
                    table: t.name.clone(),
                    pk: r.pk,
                    row: Some(row),
                });
            }
        }
        // Where merging gave other values than the statements wrote, the table takes the
        // merged ones (every replica computes the same).
        for (key, (table, after)) in finals {
            let t = catalog.table(&table)?;
            let pk = key.pk_values();
            let merged_row = self
                .replica()
                .materialize(std::slice::from_ref(&key))
                .pop()
                .and_then(|(_, v)| v)
                .map(|vals| full_row(t, &pk, vals));
            let same = match (&merged_row, &after) {
                (None, None) => true,
                (Some(a), Some(b)) => same_row(a, b),
                _ => false,
            };
            if !same {
                fixes.push(Correction {
                    table,
                    pk,
                    row: merged_row,
                });
            }
        }
        Ok(fixes)
    }

    /// Appends the records the commit's scopes wrote to their chains, and saves them (over a
    /// store that is not volatile: `defer`).
    fn commit_records(&mut self, store: &mut dyn Storage) -> Result<()> {
        let now = (self.now)();
        let State {
            replica,
            scopes,
            uncommitted,
            saved,
            defer,
            unwritten,
            uncommitted_from,
            ..
        } = self;
        let replica = replica.as_mut().expect("invariant: ensured");
        let defer = *defer;
        // Each record saved as the replica takes it, when nothing else changed since the
        // last save (the common case); else, or from the first record that cannot, by
        // `save` after. None over a volatile store: the replica holds the records, and
        // they are written when the store is read whole (`defer`).
        let mut one_by_one = !defer && persist::can_save_written(replica, saved);
        let mut tail_changed = false;
        for &i in &scopes.used {
            let ScopeSlot { chain, writers, .. } = &mut scopes.list[i];
            let mut first = None;
            for w in writers.iter_mut() {
                // The record is hashed and merged into the rows when next needed (sealing,
                // a peer's records, a sync call): a local write keeps no per-row state.
                // Its bytes are copied out, and the writer, emptied, serves the next commit.
                let chain = &*chain;
                let saved_now = replica
                    .commit_written_from(now, chain, w, |seq, hlc, bytes| {
                        if defer {
                            first.get_or_insert(seq);
                        }
                        if !one_by_one {
                            return Ok(false);
                        }
                        let record = (seq, hlc, bytes);
                        persist::save_written(store, saved, chain, record, &mut tail_changed)
                    })
                    .map_err(|e| refused_write(e, replica, chain))?;
                if let Some(r) = saved_now {
                    // Not pending until the commit is stored (`after_commit`).
                    *uncommitted += 1;
                    // Noted at once, before a later writer of the scope may fail.
                    if let Some(f) = first.filter(|&f| uncommitted_from.last() != Some(&(i, f))) {
                        uncommitted_from.push((i, f));
                    }
                    one_by_one = r?;
                }
            }
            // One emptied writer (and its buffer) serves the scope's next commit.
            writers.truncate(1);
        }
        if defer {
            *unwritten |= *uncommitted > 0;
        } else if one_by_one {
            persist::end_written(store, replica, saved, tail_changed)?;
        } else {
            // A scope the commit wrote no record to may have no chain yet (an insert of a key
            // alone into a table of SET and MAP columns records nothing): nothing to save.
            let replica: &cairn_sync::Replica = replica;
            let mut chains = scopes
                .used
                .iter()
                .map(|&i| &scopes.list[i].chain)
                .filter(|c| replica.chain(c).is_some());
            persist::save(store, replica, saved, Some(&mut chains), tail_changed)?;
        }
        Ok(())
    }

    /// The commit the hook recorded did not reach the store: its records are not pending.
    fn abandon_commit(&mut self) {
        let durable = self.pending().saturating_sub(self.uncommitted);
        if self.defer && self.keep.is_none() {
            // The store may not hold every committed record: the reload keeps them.
            self.keep = Some(self.committed_heads());
        }
        self.mark_stale(durable);
        self.uncommitted = 0;
        self.uncommitted_from.clear();
    }

    /// The head of each of the replica's own chains before the commit being recorded.
    fn committed_heads(&self) -> Vec<(ChainKey, u64)> {
        let Some(replica) = &self.replica else {
            return Vec::new();
        };
        let me = replica.id();
        (replica.chains())
            .filter(|(k, _)| k.0 == me)
            .map(|(k, log)| {
                let head = (self.uncommitted_from.iter())
                    .find(|&&(i, _)| self.scopes.list[i].chain == *k)
                    .map_or(log.head().0, |&(_, first)| first - 1);
                (k.clone(), head)
            })
            .collect()
    }
}
