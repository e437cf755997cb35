//! What a peer's records do: a sync call's protocol step runs in one transaction with the
//! SQL writes it implies ([`Sync::write_sql`]), and the rows the step merged are brought into
//! the SQL tables without being recorded as local changes ([`Sync::apply_rows`]). The events
//! the application hears of (`SyncEvent`) are made here.

use crate::state::State;
use crate::{Sync, SyncEvent};
use cairn_sql::ForcedRow;
use cairn_sql::{Catalog, Table};
use cairn_sql::{Database, Result, Value};
use cairn_sync::{Event, RowKey};
use std::collections::{BTreeMap, BTreeSet};

impl Sync {
    /// Like `write`, for protocol input: `f` returns messages to send and events; rows the
    /// events name are applied to the SQL tables before the transaction commits.
    ///
    /// When the call fails nothing of it is kept: the store rolls back and the state is read
    /// again, the events it reported are taken back, and `link` forgets what it sent in the
    /// reply that is not going out (the next `poll` sends it again, as after a retransmission
    /// timeout). What the peer sent is sent again by the peer, which saw no acknowledgement.
    pub(crate) fn write_sql(
        &self,
        db: &mut Database,
        link: u32,
        f: impl FnOnce(&mut State) -> Result<(Vec<Vec<u8>>, Vec<Event>)>,
    ) -> Result<Vec<Vec<u8>>> {
        // As in `write`.
        db.flush()?;
        if self.st.borrow().stale.is_some() {
            self.reload(db)?;
        }
        let durable = self.st.borrow().pending();
        let events_before = self.st.borrow().events.len();
        let failed = |st: &mut State| {
            st.mark_stale(durable);
            st.events.truncate(events_before);
            if let Some(l) = st.links.get_mut(&link) {
                l.rewind();
            }
        };
        db.execute("BEGIN", &[])?;
        let redactions = self.st.borrow().replica.as_ref().map(|r| r.redactions());
        let r = (|| {
            let catalog = db.catalog().clone();
            let (send, events) = {
                let mut st = self.st.borrow_mut();
                st.ensure(db.storage_mut(), &catalog)?;
                st.replica_mut().catch_up();
                f(&mut st)?
            };
            let mut rows: BTreeSet<RowKey> = BTreeSet::new();
            {
                let mut st = self.st.borrow_mut();
                // Rows holding values of a column this database added since (peers wrote them
                // first), or whose records a removal took back.
                rows.extend(st.replica_mut().take_revoked_rows());
                for e in events {
                    if let Event::Applied { rows: r, .. } = &e {
                        rows.extend(r.iter().cloned());
                    }
                    st.events.push(event(e));
                }
            }
            self.apply_rows(db, &catalog, rows)?;
            let mut st = self.st.borrow_mut();
            st.persist(db.storage_mut())?;
            Ok(send)
        })();
        match r {
            Ok(send) => match db.execute("COMMIT", &[]) {
                Ok(_) => {
                    // A peer's purge redacted history here: as after a local purge, leave no
                    // copy of the values in freed pages. The call's commit stands whatever
                    // happens to that: its messages go out, and a failed erase is owed.
                    let now = self.st.borrow().replica.as_ref().map(|r| r.redactions());
                    if now != redactions || self.st.borrow().erase_owed {
                        let _ = self.erase_free(db);
                    }
                    Ok(send)
                }
                Err(e) => {
                    failed(&mut self.st.borrow_mut());
                    Err(e)
                }
            },
            Err(e) => {
                let _ = db.execute("ROLLBACK", &[]);
                failed(&mut self.st.borrow_mut());
                Err(e)
            }
        }
    }

    /// Brings the SQL tables in line with the merged rows for `rows` (which arrived from a
    /// peer). Tables with UNIQUE constraints are reconciled whole: which of two conflicting
    /// rows is visible depends on rows this batch did not touch.
    fn apply_rows(
        &self,
        db: &mut Database,
        catalog: &Catalog,
        rows: BTreeSet<RowKey>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut by_table: BTreeMap<String, Vec<RowKey>> = BTreeMap::new();
        for k in rows {
            by_table.entry(k.table.clone()).or_default().push(k);
        }
        let mut all: Vec<ForcedRow> = Vec::new();
        let mut contested: Vec<Vec<RowKey>> = Vec::new();
        for (name, keys) in by_table {
            let Ok(t) = catalog.table(&name) else {
                continue;
            };
            let t = t.clone();
            let unique = t.indexes.iter().any(|i| i.unique);
            let st = self.st.borrow();
            let replica = st.replica.as_ref().expect("invariant: ensured");
            if unique {
                // Rows hidden by a clash go, every visible row is (re)put: which of two
                // clashing rows shows depends on rows this batch did not touch.
                let (visible, hidden) = replica.visible(&t.name);
                for r in hidden {
                    all.push((t.clone(), r.pk, None));
                }
                for (k, v) in replica.materialize(&keys) {
                    if v.is_none() {
                        all.push((t.clone(), k.pk_values(), None));
                    }
                }
                for r in visible {
                    let row = full_row(&t, &r.pk, r.values);
                    all.push((t.clone(), r.pk, Some(row)));
                }
                contested.extend(keys.iter().filter_map(|k| two_owners(replica, k)));
                continue;
            }
            // One entry a key: rows of several scopes with one key are one row of the table.
            let mut done: BTreeSet<&[u8]> = BTreeSet::new();
            for (i, (k, v)) in replica.materialize(&keys).into_iter().enumerate() {
                // `materialize` answers in the order asked.
                if !done.insert(&keys[i].pk) {
                    continue;
                }
                // A key other scopes hold too (a row moved by its scope column, or written
                // in another owner's scope): the table shows the row the rule of docs/sync.md
                // sec. 7 picks, alike on every replica, or none.
                let (key, vals) = match replica.key_owner(&k) {
                    None => (k, v),
                    Some(owner) => {
                        if owner.shown.is_none() && owner.hidden.len() > 1 {
                            contested.push(owner.hidden);
                        }
                        match owner.shown {
                            Some(shown) if shown == k => (k, v),
                            Some(shown) => {
                                let vals = replica.materialize(std::slice::from_ref(&shown));
                                (shown, vals.into_iter().next().and_then(|(_, v)| v))
                            }
                            None => (k, None),
                        }
                    }
                };
                let pk = key.pk_values();
                let row = vals.map(|vals| full_row(&t, &pk, vals));
                all.push((t.clone(), pk, row));
            }
        }
        // Deletes first, so a put never clashes with a row this batch removes.
        all.sort_by_key(|(_, _, row)| row.is_some());
        // A merged row the table's constraints refuse (a NOT NULL column left NULL by a
        // revival after a delete, a CHECK, a type, a UNIQUE index the peer lacks) stays in the
        // merged state and out of the table, on every replica alike.
        let refused = db.force_rows(all)?;
        let mut st = self.st.borrow_mut();
        contested.sort();
        contested.dedup();
        for rows in contested {
            st.events.push(SyncEvent {
                kind: "row_refused",
                code: "UNAUTHORIZED".into(),
                detail: two_owners_detail(&rows),
            });
        }
        for (t, _, e) in refused {
            st.events.push(SyncEvent {
                kind: "row_refused",
                code: e.code().to_string(),
                detail: format!("{}: {e}", t.name),
            });
        }
        Ok(())
    }
}

/// The live rows of `k`'s key when scopes of different owners hold it (none is shown).
fn two_owners(replica: &cairn_sync::Replica, k: &RowKey) -> Option<Vec<RowKey>> {
    let owner = replica.key_owner(k)?;
    (owner.shown.is_none() && owner.hidden.len() > 1).then_some(owner.hidden)
}

/// A row key's values as SQL literals (no float formatting of Rust's: `sql_literal`).
pub(crate) fn pk_text(k: &RowKey) -> String {
    let vals: Vec<String> = k.pk_values().iter().map(cairn_sql::sql_literal).collect();
    vals.join(", ")
}

fn two_owners_detail(rows: &[RowKey]) -> String {
    let scopes: Vec<String> = (rows.iter())
        .map(|k| {
            let name = String::from_utf8_lossy(&k.scope.name);
            format!("{name} of {}", &k.scope.owner.to_hex()[..12])
        })
        .collect();
    format!(
        "{}: a row with key ({}) is written in scopes of different owners ({}): the table shows none of them",
        rows[0].table,
        pk_text(&rows[0]),
        scopes.join(", ")
    )
}

fn event(e: Event) -> SyncEvent {
    match e {
        Event::Applied { records, rows } => SyncEvent {
            kind: "applied",
            code: "APPLIED".into(),
            detail: format!("{records} records, {} rows", rows.len()),
        },
        Event::Rejected {
            reason,
            author,
            first_seq,
            detail,
            ..
        } => SyncEvent {
            kind: "rejected",
            code: reason.code().to_string(),
            detail: format!(
                "author {} from seq {first_seq}: {detail}",
                &author.to_hex()[..12]
            ),
        },
        Event::Fork { author, seq, .. } => SyncEvent {
            kind: "fork",
            code: "FORK".into(),
            detail: format!(
                "author {} signed two records at seq {seq}",
                &author.to_hex()[..12]
            ),
        },
        Event::PeerRejected {
            code, first_seq, ..
        } => SyncEvent {
            kind: "peer_rejected",
            code,
            detail: format!("the peer refused our records from seq {first_seq}"),
        },
    }
}

/// A table row from its key values and its other columns' values (in sync column order).
pub(crate) fn full_row(t: &Table, pk: &[Value], vals: Vec<Value>) -> Vec<Value> {
    let pk_cols = t.key_columns();
    let mut row = vec![Value::Null; t.columns.len()];
    for (i, &c) in pk_cols.iter().enumerate() {
        row[c] = pk.get(i).cloned().unwrap_or(Value::Null);
    }
    let non_key = (0..t.columns.len()).filter(|c| !pk_cols.contains(c));
    for (v, c) in vals.into_iter().zip(non_key) {
        row[c] = v;
    }
    row
}
