//! The capture: what turns the SQL layer's row changes into sync ops.
//!
//! Each replicated table a commit writes has a [`Shape`] (what recording its changes needs,
//! kept from one commit to the next) and each scope a [`ScopeSlot`] in [`Scopes`], whose
//! writers hold the commit's ops already in the records' encoding. A change reaches them one
//! of two ways:
//! - as the statement makes it, through [`Capture`] (the SQL layer's
//!   [`CaptureSink`]), for a table whose shape allows it (`Shape::sinkable`); [`Sunk`] logs
//!   where each change left its scope's writers, so a failed statement's ops are dropped;
//! - at commit, from the changes the SQL layer held for it (`Changes`), by
//!   [`State::write_held`], which the commit hook calls.
//!
//! The hook (`hook`) then appends the writers' records to the chains.

use crate::state::State;
use crate::{refused, sync_schema};
use cairn_sql::{CaptureSink, Changes, ElemKind, EncodedRow, Result, SetPart, Value};
use cairn_sql::{Catalog, Table};
use cairn_sync::change::{Encoded, OpKind};
use cairn_sync::{AuthorId, ChainKey, OpsWriter, RowKey, ScopeId, TableSchema, WholeRow};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The capture's sink: the changes of a replicated table whose shape allows it (`sinkable`)
/// are written into its scope's record as the statements make them, rather than held in
/// `Changes` and read again at commit. A table's changes in a transaction all come here or all
/// go to `Changes`, but for one whose definition stops qualifying during the transaction (a
/// UNIQUE index made): its changes made before came here, those after go to `Changes`, and the
/// commit writes those after these, in order. (A new definition gets its shape at once, from
/// `CommitHook::schema_changed`.)
pub(crate) struct Capture(pub(crate) Rc<RefCell<State>>);

impl Capture {
    /// The state, the shape of `t` and its scope's writer, with where the writers stood
    /// logged, when the sink takes a change of `t`.
    fn take(
        &self,
        t: &Table,
        f: impl FnOnce(&Shape, &mut OpsWriter) -> cairn_sync::Result<()>,
    ) -> bool {
        // Borrowed only while a sync call runs, which makes no captured change.
        let Ok(mut st) = self.0.try_borrow_mut() else {
            return false;
        };
        let Some((i, scope)) = st.sink_target(t) else {
            return false;
        };
        let st = &mut *st;
        let slot = &mut st.scopes.list[scope];
        st.sunk.push(scope, slot);
        if let Err(e) = f(&st.shapes[i], writer(slot, SINK_ROOM)) {
            st.sink_error.get_or_insert(refused(e));
        }
        true
    }
}

impl CaptureSink for Capture {
    fn insert(&mut self, t: &Table, row: &[Value]) -> bool {
        self.take(t, |shape, w| {
            let whole = (shape.whole.as_ref()).expect("invariant: a sinkable shape has one");
            w.set_whole(whole, |c| &row[c])
        })
    }

    fn set<'v>(
        &mut self,
        t: &Table,
        value: &dyn Fn(usize) -> &'v Value,
        columns: &[usize],
    ) -> bool {
        self.take(t, |shape, w| {
            // As the commit records a SET: its last-writer-wins columns, none if it set only
            // key columns.
            if !columns.iter().any(|&c| shape.lww_cols[c].is_some()) {
                return Ok(());
            }
            let pk = shape.pk_cols.iter().map(|&c| value(c));
            let set = (columns.iter()).filter_map(|&c| shape.lww_cols[c].map(|i| (i, value(c))));
            w.set(&shape.schema, pk, set)
        })
    }

    fn delete(&mut self, t: &Table, row: &[Value]) -> bool {
        self.take(t, |shape, w| {
            w.delete(&shape.schema, shape.pk_cols.iter().map(|&c| &row[c]))
        })
    }

    fn truncate(&mut self, len: usize) {
        if let Ok(mut st) = self.0.try_borrow_mut() {
            st.sink_truncate(len);
        }
    }
}

/// The room a record the capture starts has for its ops: for a few rows (it grows past that).
const SINK_ROOM: usize = 16;

impl State {
    /// Keeps a shape for each replicated table of `catalog` (and for none it no longer has),
    /// so that the capture can take a table's changes from its first transaction on, and
    /// those made after its definition changed inside a transaction.
    pub(crate) fn shapes_for(&mut self, catalog: &Catalog) {
        let held = |s: &Shape| catalog.tables.values().any(|t| Rc::ptr_eq(t, &s.table));
        self.shapes.retain(held);
        for t in catalog.tables.values() {
            if t.replicated.is_some() && !self.shapes.iter().any(|s| Rc::ptr_eq(&s.table, t)) {
                self.shapes.push(Shape::new(t.clone()));
            }
        }
        // Places in `shapes` moved.
        self.sink_last = None;
    }

    /// The shape and the scope of a change of `t` the capture takes, or None when it does
    /// not take it (see `Capture`).
    #[inline]
    pub(crate) fn sink_target(&mut self, t: &Table) -> Option<(usize, usize)> {
        if self.sink_on == Some(true) {
            if let Some((i, scope, epoch)) = self.sink_last {
                // (The shapes may have been made again since: looked at by their table.)
                let same =
                    (self.shapes.get(i)).is_some_and(|s| std::ptr::eq(Rc::as_ptr(&s.table), t));
                if epoch == self.scopes.epoch && same {
                    self.scopes.mark_used(scope);
                    return Some((i, scope));
                }
            }
        }
        self.sink_find(t)
    }

    #[cold]
    pub(crate) fn sink_find(&mut self, t: &Table) -> Option<(usize, usize)> {
        match self.sink_on {
            Some(true) => {}
            Some(false) => return None,
            None => {
                // Decided at the transaction's first change, for all of it: on when the
                // state is current and this device's id known (the replica's, or the key
                // pair made at attach that the commit will save).
                let me = match (&self.replica, &self.spare) {
                    (Some(r), _) => Some(r.id()),
                    (None, Some(spare)) => Some(spare.id()),
                    (None, None) => None,
                };
                let me = me.filter(|_| self.stale.is_none());
                self.sink_on = Some(me.is_some());
                let me = me?;
                let owner = self.owner.unwrap_or(me);
                self.scopes.begin(owner, me);
                return self.sink_target(t);
            }
        }
        // Only a definition a shape holds (the catalog's, as the last commit saw it).
        let i = (self.shapes.iter()).position(|s| std::ptr::eq(Rc::as_ptr(&s.table), t))?;
        if !self.shapes[i].sinkable {
            return None;
        }
        let scope = self.scopes.find(&self.shapes[i].table.name);
        self.sink_last = Some((i, scope, self.scopes.epoch));
        Some((i, scope))
    }

    /// Drops the changes the capture took past the first `len`; with `len` 0, ends its
    /// transaction (after its commit, or its rollback).
    pub(crate) fn sink_truncate(&mut self, len: usize) {
        if len == 0 {
            // The writers emptied for the next transaction (one kept, its buffer with it),
            // the scopes no longer used. The decision to take changes stands: what could
            // change it (a sync call, a failed commit, the owner set) decides again.
            for &i in &self.scopes.used {
                let slot = &mut self.scopes.list[i];
                slot.writers.truncate(1);
                // (After a commit it is empty already.)
                if let Some(w) = slot.writers.first_mut().filter(|w| !w.is_empty()) {
                    w.reset();
                }
                slot.used = false;
            }
            self.scopes.used.clear();
            self.sunk.clear();
            self.sink_error = None;
            return;
        }
        if len >= self.sunk.len() {
            return;
        }
        // Each scope goes back to where it stood at its first change dropped.
        let mut done: Vec<usize> = Vec::new();
        for (scope, writers, mark) in self.sunk.from(len) {
            if done.contains(&scope) {
                continue;
            }
            done.push(scope);
            let slot = &mut self.scopes.list[scope];
            slot.writers.truncate(writers);
            if let Some(w) = slot.writers.last_mut() {
                w.back_to(mark);
            }
        }
        self.sunk.truncate(len);
    }

    /// [`State::scope_name`] of a captured row.
    pub(crate) fn captured_scope_name(t: &Table, row: &EncodedRow) -> Result<String> {
        Ok(match t.replicated.as_ref().and_then(|r| r.scope) {
            None => t.name.clone(),
            Some(c) => Self::scoped_name(t, c, &decoded(row.value(c))?),
        })
    }

    /// Writes the changes `changes` holds (those the capture did not take as the statements
    /// made them) into their scopes' records, after any the capture took. Returns what the
    /// commit checks against the merged rows: the rows of tables with counters as the
    /// transaction left them, and the tables with a UNIQUE index it wrote.
    pub(crate) fn write_held(
        &mut self,
        catalog: &Catalog,
        changes: &Changes,
    ) -> Result<(Option<Finals>, Vec<String>)> {
        let owner = self.owner();
        // What the table holds for each row at the end of the transaction.
        // (A list, sorted and cut to each key's last entry when used: most commits have none,
        // and an empty list costs nothing to drop.)
        let mut finals: Option<Finals> = None;
        // Per scope, its records' ops, written straight into the records' encodings (a new
        // record every `MAX_OPS` ops). Most transactions write a scope or two: a list searched
        // by name beats hashing every row's; past a few, a map finds them.
        let State {
            replica,
            shapes,
            scopes,
            ..
        } = self;
        let replica = replica.as_ref().expect("invariant: ensured");
        if self.sink_on != Some(true) {
            // (Else the capture began with the transaction, and its ops are in the writers.)
            scopes.begin(owner, replica.id());
        }
        if let Some(e) = self.sink_error.take() {
            return Err(e);
        }
        let total = changes.held();
        // The last table's shape, sync schema and (without a scope column) scope: a run of
        // changes is mostly to one table.
        let mut last: Option<(usize, Option<usize>)> = None;
        let mut unique_tables: Vec<String> = Vec::new();
        // What a set removal observed: the chains held, read once per commit that has one.
        let mut held = None;
        for (n, ch) in changes.iter().enumerate() {
            let (name, row, set_part) = (ch.table, ch.row, ch.set);
            let (at, fixed_scope) = match last {
                Some((i, scope)) if *shapes[i].table.name == *name => (i, scope),
                _ => {
                    let i = match shapes.iter().position(|s| *s.table.name == *name) {
                        Some(i) => i,
                        None => {
                            if replica.table(name).is_none() {
                                return Err(refused(cairn_sync::Error::InvalidInput(format!(
                                    "table {name} is not registered"
                                ))));
                            }
                            shapes.push(Shape::new(catalog.table(name)?.clone()));
                            shapes.len() - 1
                        }
                    };
                    if shapes[i].unique && !unique_tables.iter().any(|u| u == name) {
                        unique_tables.push(name.to_string());
                    }
                    let scope = (!shapes[i].scoped).then(|| scopes.find(&shapes[i].table.name));
                    last = Some((i, scope));
                    (i, scope)
                }
            };
            let shape = &shapes[at];
            let schema = &shape.schema;
            let t: &Table = &shape.table;
            let scope = match fixed_scope {
                Some(i) => i,
                None => scopes.find(&State::captured_scope_name(t, &row)?),
            };
            if shape.has_merged {
                let pk = shape
                    .pk_cols
                    .iter()
                    .map(|&c| decoded(row.value(c)))
                    .collect::<Result<Vec<_>>>()?;
                let key = RowKey::new(&t.name, &scopes.list[scope].chain.1, &pk);
                let after = match set_part {
                    Some(_) => Some(
                        (0..row.len())
                            .map(|c| decoded(row.value(c)))
                            .collect::<Result<Vec<_>>>()?,
                    ),
                    None => None,
                };
                (finals.get_or_insert_with(Vec::new)).push((key, (t.name.clone(), after)));
            }
            let pk = shape.pk_cols.iter().map(|&c| Encoded(row.value(c)));
            // The first scope's first record makes room for all the changes left; with more
            // scopes, each grows as it needs.
            let room = if scopes.used.len() == 1 { total - n } else { 1 };
            let Some(part) = set_part else {
                writer(&mut scopes.list[scope], room)
                    .delete(schema, pk)
                    .map_err(refused)?;
                continue;
            };
            let SetPart {
                columns,
                adds,
                elems,
                ..
            } = part;
            // Every column set (an insert, or an update that changed them all), in column
            // order. (A row captured before an `ADD COLUMN` in the same transaction is shorter
            // than the table: `set` records the columns it has.)
            let every = columns.len() == row.len() && row.len() == t.columns.len();
            if let (Some(whole), true) = (&shape.whole, every) {
                debug_assert!(columns.iter().enumerate().all(|(i, &c)| i == c));
                writer(&mut scopes.list[scope], room)
                    .set_whole(whole, |c| Encoded(row.value(c)))
                    .map_err(refused)?;
                continue;
            }
            // An insert sets every column but the counters; one with no other column records
            // its additions alone (a SET names at least one column).
            if columns.iter().any(|&c| shape.lww_cols[c].is_some()) {
                let set = columns
                    .iter()
                    .filter_map(|&c| shape.lww_cols[c].map(|i| (i, Encoded(row.value(c)))));
                writer(&mut scopes.list[scope], room)
                    .set(schema, pk.clone(), set)
                    .map_err(refused)?;
            }
            for &(c, d) in adds {
                if let Some(i) = shape.sync_cols[c] {
                    writer(&mut scopes.list[scope], room)
                        .add(schema, pk.clone(), i, d)
                        .map_err(refused)?;
                }
            }
            for e in elems {
                let Some(i) = shape.sync_cols[e.col] else {
                    continue;
                };
                let (key, value) = part.elem(e);
                let kind = match e.kind {
                    ElemKind::SetAdd => OpKind::SetAdd,
                    ElemKind::SetRemove => OpKind::SetRemove,
                    ElemKind::MapSet => OpKind::MapSet,
                    ElemKind::MapRemove => OpKind::MapRemove,
                };
                let chain = &scopes.list[scope].chain;
                let seen = match kind {
                    OpKind::SetRemove => {
                        let vv = held.get_or_insert_with(|| replica.version_vector());
                        cairn_sync::change::observed(vv, &chain.1, &chain.0)
                    }
                    _ => Vec::new(),
                };
                writer(&mut scopes.list[scope], room)
                    .elem(
                        schema,
                        pk.clone(),
                        kind,
                        i,
                        (key, value.map(Encoded)),
                        &seen,
                    )
                    .map_err(refused)?;
            }
        }
        Ok((finals, unique_tables))
    }
}

/// A row's state at the end of a transaction, for a table with counters: its table and its
/// values (None: no row).
pub(crate) type FinalRow = (String, Option<Vec<Value>>);

/// Each row a commit wrote to a table with counters, and its state at the end of the transaction.
pub(crate) type Finals = Vec<(RowKey, FinalRow)>;

/// The scopes local commits write to, kept from one commit to the next (their names and ids
/// are built once, not for every commit), each with the records of the commit being recorded.
#[derive(Default)]
pub(crate) struct Scopes {
    /// The scopes' owner and the author writing to them (this replica).
    owner: Option<(AuthorId, AuthorId)>,
    pub(crate) list: Vec<ScopeSlot>,
    /// Past a few scopes, where each is in `list` (a transaction that writes many scopes
    /// finds them by hashing; most write one or two, found by comparing names).
    at: HashMap<String, usize>,
    /// The scopes this commit wrote, in order of first use.
    pub(crate) used: Vec<usize>,
    /// Moves each time `list` is emptied (a place in it is then another scope's).
    epoch: u64,
}

pub(crate) struct ScopeSlot {
    pub(crate) name: String,
    /// The chain the scope's records go to: (this replica's id, the scope).
    pub(crate) chain: ChainKey,
    /// This commit's ops for the scope, written straight into the records' encodings (a new
    /// record every `MAX_OPS` ops).
    pub(crate) writers: Vec<OpsWriter>,
    used: bool,
}

impl Scopes {
    const FEW: usize = 8;
    /// Many scope names kept are dropped rather than searched on every commit.
    const KEEP: usize = 64;

    /// Starts recording a commit by `me` whose scopes belong to `owner`.
    fn begin(&mut self, owner: AuthorId, me: AuthorId) {
        for &i in &self.used {
            // Left by a commit that failed half-way.
            self.list[i].writers.clear();
            self.list[i].used = false;
        }
        self.used.clear();
        if self.owner != Some((owner, me)) || self.list.len() > Self::KEEP {
            self.owner = Some((owner, me));
            self.list.clear();
            self.at.clear();
            self.epoch += 1;
        }
    }

    /// Marks scope `i` used by this commit.
    #[inline]
    fn mark_used(&mut self, i: usize) {
        if !self.list[i].used {
            self.list[i].used = true;
            self.used.push(i);
        }
    }

    /// The scope named `name`, marked used by this commit.
    fn find(&mut self, name: &str) -> usize {
        let found = if self.list.len() <= Self::FEW {
            self.list.iter().position(|s| s.name == name)
        } else {
            if self.at.len() != self.list.len() {
                let names = self.list.iter().enumerate();
                self.at.extend(names.map(|(i, s)| (s.name.clone(), i)));
            }
            self.at.get(name).copied()
        };
        let i = found.unwrap_or_else(|| {
            let (owner, me) = self.owner.expect("invariant: set by begin");
            self.list.push(ScopeSlot {
                name: name.to_string(),
                chain: (me, ScopeId::new(owner, name.as_bytes())),
                writers: Vec::new(),
                used: false,
            });
            let i = self.list.len() - 1;
            if i > Self::FEW {
                self.at.insert(name.to_string(), i);
            }
            i
        });
        self.mark_used(i);
        i
    }
}

/// What recording a change needs of a replicated table: its key columns, each column's index
/// among the others, and whether it has a scope column, counters, unique indexes.
pub(crate) struct Shape {
    table: Rc<Table>,
    /// The table as the replica has it registered (`sync_schema`).
    schema: TableSchema,
    pk_cols: Vec<usize>,
    /// Each column's index among the non-key ones.
    sync_cols: Vec<Option<u32>>,
    /// The same for last-writer-wins columns only (not the key, not a counter).
    lww_cols: Vec<Option<u32>>,
    scoped: bool,
    /// Only a table with counters, sets or maps can merge to other values than a local write
    /// left (a row inserted after a delete elsewhere counts the additions made since, a set
    /// keeps elements added elsewhere); elsewhere the newest write wins whole, and the table
    /// holds it.
    has_merged: bool,
    unique: bool,
    /// How a write of every column is recorded without `OpsWriter::set`'s checks (None for a
    /// table with counters).
    whole: Option<WholeRow>,
    /// The capture writes this table's ops as they come (`Capture`): no counters, no scope
    /// column, no UNIQUE index, nothing that needs the rows at commit.
    sinkable: bool,
}

impl Shape {
    fn new(table: Rc<Table>) -> Shape {
        let pk_cols = table.key_columns();
        let mut next = 0u32;
        let sync_cols: Vec<Option<u32>> = (0..table.columns.len())
            .map(|c| {
                (!pk_cols.contains(&c)).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let repl = table.replicated.clone().unwrap_or_default();
        let lww_cols = sync_cols
            .iter()
            .enumerate()
            .map(|(c, i)| i.filter(|_| repl.kind(c) == cairn_sql::Merged::Lww))
            .collect();
        let schema = sync_schema(&table);
        let non_key: Vec<usize> = (0..table.columns.len())
            .filter(|c| sync_cols[*c].is_some())
            .collect();
        let whole = WholeRow::new(&schema, pk_cols.clone(), &non_key);
        let scoped = table.replicated.as_ref().and_then(|r| r.scope).is_some();
        let unique = table.indexes.iter().any(|i| i.unique);
        Shape {
            sinkable: whole.is_some() && !scoped && !unique && !repl.has_merged(),
            whole,
            schema,
            pk_cols,
            sync_cols,
            lww_cols,
            scoped,
            has_merged: repl.has_merged(),
            unique,
            table,
        }
    }
}

/// Where the capture's changes of a transaction left their scopes' writers (`State::sunk`):
/// for each change, its scope, how many writers the scope had and the last one's mark before
/// it. Kept as runs of changes to the same writer of a scope, each change then 8 bytes (where
/// its writer stood past its run's start) rather than 32: a transaction of many rows makes
/// one run, and its log is a quarter of the memory it went through.
#[derive(Debug, Default)]
pub(crate) struct Sunk {
    /// The change each run begins with, its scope, its writer count and mark then.
    runs: Vec<(usize, usize, usize, (usize, u64))>,
    /// Per change, the bytes and ops its writer held past its run's mark before it.
    at: Vec<(u32, u32)>,
}

impl Sunk {
    fn len(&self) -> usize {
        self.at.len()
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.at.clear();
    }

    /// Logs a change of scope `scope` (`slot`), before its ops are written.
    #[inline]
    fn push(&mut self, scope: usize, slot: &ScopeSlot) {
        let writers = slot.writers.len();
        let mark = slot.writers.last().map_or((0, 0), |w| w.mark());
        if let Some(&(_, s, n, start)) = self.runs.last() {
            if s == scope && n == writers && mark.0 >= start.0 && mark.1 >= start.1 {
                let past = (
                    u32::try_from(mark.0 - start.0),
                    u32::try_from(mark.1 - start.1),
                );
                if let (Ok(bytes), Ok(ops)) = past {
                    self.at.push((bytes, ops));
                    return;
                }
            }
        }
        self.runs.push((self.at.len(), scope, writers, mark));
        self.at.push((0, 0));
    }

    /// The changes from `i` on, in order: scope, writer count, mark (those within a run after
    /// the first change of it dropped, whose scope is the same, are left out).
    fn from(&self, i: usize) -> impl Iterator<Item = (usize, usize, (usize, u64))> + '_ {
        let k = self.runs.partition_point(|r| r.0 <= i) - 1;
        let (_, scope, writers, start) = self.runs[k];
        let (bytes, ops) = self.at[i];
        let first = (
            scope,
            writers,
            (start.0 + bytes as usize, start.1 + u64::from(ops)),
        );
        std::iter::once(first).chain(self.runs[k + 1..].iter().map(|r| (r.1, r.2, r.3)))
    }

    /// Drops the changes from `len` on.
    fn truncate(&mut self, len: usize) {
        let keep = self.runs.partition_point(|r| r.0 < len);
        self.runs.truncate(keep);
        self.at.truncate(len);
    }
}

/// The writer the scope's next op goes to.
#[inline(always)]
fn writer(slot: &mut ScopeSlot, room: usize) -> &mut OpsWriter {
    match slot.writers.last_mut() {
        // The one the last commit emptied: room for what comes, as a new one gets.
        Some(w) if w.is_empty() => w.reserve(80 * room.min(cairn_sync::change::MAX_OPS as usize)),
        Some(w) if w.len() < cairn_sync::change::MAX_OPS => {}
        _ => new_writer(slot, room),
    }
    slot.writers.last_mut().expect("invariant: pushed above")
}

/// Starts the scope's next record (once a record: out of the per-op path).
#[cold]
fn new_writer(slot: &mut ScopeSlot, room: usize) {
    // Room for a typical op of the changes left, to spare regrowth.
    let room = 80 * room.min(cairn_sync::change::MAX_OPS as usize);
    slot.writers.push(OpsWriter::with_capacity(room));
}

/// A value the SQL layer captured, in the wire encoding.
fn decoded(b: &[u8]) -> Result<Value> {
    cairn_sync::wire::Reader::new(b).value().map_err(refused)
}
