//! Writes: INSERT, UPDATE and DELETE. Each first collects what it will change, then changes
//! it, so a statement never sees its own writes (no Halloween problem).

mod insert;
mod update;

use crate::error::{Error, Result};
use crate::exec::capture::{same_row, same_value, Changes};
use crate::exec::eval::{eval_bool, push_norm, Cache, Cx};
use crate::exec::rowid_value;
use crate::plan::prefix_successor;
use crate::plan::*;
use crate::schema::{Key, Merged, Replication, Table};
use crate::storage::Storage;
use crate::types::ColType;
use cairn_value::codec::{
    decode_key_value, encode_key, encode_key_value, encode_record_into, Layout, Record,
};
use cairn_value::Value;
use std::ops::Bound;
use std::rc::Rc;

// ---- writes ----

/// What a write statement did.
#[derive(Debug, Default)]
pub struct WriteResult {
    pub changes: u64,
    /// Of `changes`, the rows an upsert's DO UPDATE rewrote (the others were inserted).
    pub updated: u64,
    pub last_rowid: Option<i64>,
    pub returned: Vec<Vec<Value>>,
}

pub struct Writer<'a> {
    pub store: &'a mut dyn Storage,
    pub params: &'a [Value],
    pub rng: &'a std::cell::Cell<u64>,
    /// Where writes to replicated tables are recorded (None: not recorded, e.g. while rows
    /// that arrived from a peer are applied).
    pub capture: Option<&'a mut Changes>,
    /// Buffers kept by the database from one statement to the next.
    pub bufs: &'a mut RowBufs,
}

/// An INSERT's buffers for each row's key, record and values, kept from statement to
/// statement: a one-row INSERT (each row committed alone, most of all) otherwise allocated and
/// freed all three every time. Left empty (capacity kept) after each statement, and given up
/// when a statement grew them large.
#[derive(Debug, Default)]
pub struct RowBufs {
    pk: Vec<u8>,
    rec: Vec<u8>,
    row: Vec<Value>,
    /// Upsert's DO UPDATE in place (`Writer::upsert_in_place`): the frame, the columns its
    /// expressions read, the new values. Emptied after each use.
    upsert: (Vec<Value>, Vec<usize>, Vec<Value>, Layout),
    /// An UPDATE or DELETE by key (`Writer::point_targets`, `Writer::update_in_place`): the
    /// row frame, the key named, where each column's new value is, the new values. A
    /// statement that writes one row by its key otherwise allocated and freed all four.
    point: PointBufs,
}

/// `RowBufs::point`.
#[derive(Debug, Default)]
struct PointBufs {
    frame: Vec<Value>,
    key: Vec<u8>,
    value_of: Vec<Option<usize>>,
    vals: Vec<Value>,
    /// Where the columns of the record being rewritten lie.
    layout: Layout,
}

impl PointBufs {
    /// Empties the buffers for the next statement, keeping their room unless a statement grew
    /// them large.
    fn clear(&mut self) {
        const MAX: usize = 16 * 1024;
        for v in [&mut self.frame, &mut self.vals] {
            v.clear();
            if v.capacity() * std::mem::size_of::<Value>() > MAX {
                *v = Vec::new();
            }
        }
        self.key.clear();
        if self.key.capacity() > MAX {
            self.key = Vec::new();
        }
        self.value_of.clear();
        if self.value_of.capacity() * std::mem::size_of::<Option<usize>>() > MAX {
            self.value_of = Vec::new();
        }
    }
}

impl RowBufs {
    /// Takes the buffers for a statement, empty.
    fn take(&mut self) -> (Vec<u8>, Vec<u8>, Vec<Value>) {
        let (mut pk, mut rec, mut row) = (
            std::mem::take(&mut self.pk),
            std::mem::take(&mut self.rec),
            std::mem::take(&mut self.row),
        );
        pk.clear();
        rec.clear();
        row.clear();
        (pk, rec, row)
    }

    /// Gives them back after the statement, emptied, unless they grew past a few pages.
    fn keep(&mut self, pk: Vec<u8>, rec: Vec<u8>, mut row: Vec<Value>) {
        const MAX: usize = 16 * 1024;
        row.clear();
        if pk.capacity() <= MAX {
            self.pk = pk;
        }
        if rec.capacity() <= MAX {
            self.rec = rec;
        }
        if row.capacity() * std::mem::size_of::<Value>() <= MAX {
            self.row = row;
        }
    }
}

/// A row to force into a table: (table, primary key values, the row or None for no row).
pub type ForcedRow = (Rc<Table>, Vec<Value>, Option<Vec<Value>>);
/// A forced row the table's constraints refused: (table, primary key values, the error).
pub type RefusedRow = (Rc<Table>, Vec<Value>, Error);

/// The ops that record what a write changed in `t`'s SET and MAP columns: one per element
/// added or removed, one per key set or removed. A value that is no set or map is refused.
#[inline(never)]
fn capture_elems(
    cap: &mut Changes,
    t: &Table,
    r: &Replication,
    old: Option<&[Value]>,
    new: &[Value],
) -> Result<()> {
    use crate::exec::capture::ElemKind;
    use crate::exec::eval::coll_fn::{map_diff, map_entries, set_diff, set_elems, Edit};
    let named = |c: usize, e: Error| match e {
        Error::Type(m) | Error::Json(m) => {
            Error::Type(format!("{}.{}: {m}", t.name, t.columns[c].name))
        }
        e => e,
    };
    // A column the write left as it was records nothing (and is not parsed).
    let changed =
        |c: &&usize| **c < new.len() && old.is_none_or(|o| !same_value(&o[**c], &new[**c]));
    for &c in r.sets.iter().filter(changed) {
        let before = match old {
            Some(o) => set_elems(&o[c]).map_err(|e| named(c, e))?,
            None => Vec::new(),
        };
        let after = set_elems(&new[c]).map_err(|e| named(c, e))?;
        set_diff(&before, &after, &mut |e| match e {
            Edit::Add(v) => cap.push_elem(c, ElemKind::SetAdd, None, Some(v)),
            Edit::Remove(v) => cap.push_elem(c, ElemKind::SetRemove, None, Some(v)),
            _ => {}
        });
    }
    for &c in r.maps.iter().filter(changed) {
        let before = match old {
            Some(o) => map_entries(&o[c]).map_err(|e| named(c, e))?,
            None => Default::default(),
        };
        let after = map_entries(&new[c]).map_err(|e| named(c, e))?;
        map_diff(&before, &after, &mut |e| match e {
            Edit::Set(k, v) => cap.push_elem(c, ElemKind::MapSet, Some(k), Some(v)),
            Edit::Unset(k) => cap.push_elem(c, ElemKind::MapRemove, Some(k), None),
            _ => {}
        });
    }
    Ok(())
}

fn counter_delta(old: &Value, new: &Value) -> i64 {
    let as_int = |v: &Value| match v {
        Value::Integer(i) => *i,
        _ => 0,
    };
    as_int(new).wrapping_sub(as_int(old))
}

impl Writer<'_> {
    fn cx<'b>(&'b self, cache: &'b Cache) -> Cx<'b> {
        Cx {
            store: &*self.store,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache,
            regroup: None,
        }
    }

    /// The row's primary key, written into `k` (cleared first), and its row id if it has one.
    fn pk_of(
        &self,
        t: &Table,
        row: &mut [Value],
        next_rowid: &mut Option<i64>,
        k: &mut Vec<u8>,
    ) -> Result<Option<i64>> {
        k.clear();
        match &t.key {
            Key::Rowid(alias) => {
                let given = alias.and_then(|c| match &row[c] {
                    Value::Integer(i) => Some(*i),
                    _ => None,
                });
                let id = match given {
                    Some(i) => i,
                    None => {
                        let next = match next_rowid {
                            Some(n) => *n,
                            None => match self.store.last_key(t.tree)? {
                                Some(k) => match decode_key_value(&k, false)?.0 {
                                    Value::Integer(i) => i.checked_add(1).ok_or_else(|| {
                                        Error::Invalid(
                                            "table is full: row ids are exhausted".into(),
                                        )
                                    })?,
                                    _ => 1,
                                },
                                None => 1,
                            },
                        };
                        next
                    }
                };
                *next_rowid = Some(match next_rowid {
                    Some(n) => (*n).max(id.saturating_add(1)),
                    None => id.saturating_add(1),
                });
                if let Some(c) = alias {
                    row[*c] = Value::Integer(id);
                }
                encode_key_value(k, &Value::Integer(id), false);
                Ok(Some(id))
            }
            Key::Columns(cols) => {
                for &c in cols {
                    push_norm(&row[c], k);
                }
                Ok(None)
            }
        }
    }

    /// Type, NOT NULL and CHECK constraints on a complete row, then its foreign keys.
    fn check_row(
        &self,
        t: &Table,
        row: &mut [Value],
        checks: &[PExpr],
        cache: &Cache,
    ) -> Result<()> {
        let cx = self.cx(cache);
        if t.generated.is_empty() {
            for (i, v) in row.iter_mut().enumerate() {
                Self::check_column(t, i, v)?;
            }
        } else {
            crate::generated::compute(t, row, &cx, Self::check_column)?;
        }
        for (k, ch) in checks.iter().enumerate() {
            if eval_bool(ch, row, &cx)? == Some(false) {
                // Past the table's own CHECKs come its foreign keys' (`fk::child_checks`).
                return Err(match t.checks.get(k) {
                    Some(c) => Error::ConstraintCheck(crate::parse::display::expr(&c.expr)),
                    None => Error::ConstraintForeignKey,
                });
            }
        }
        Ok(())
    }

    /// Type and NOT NULL constraints on value `v` of column `i`, coerced in place. Inlined:
    /// every inserted row runs it for each column.
    #[inline(always)]
    pub(crate) fn check_column(t: &Table, i: usize, v: &mut Value) -> Result<()> {
        let c = &t.columns[i];
        // A value already of the column's type is stored as it is (what coercing gives).
        let stored = matches!(
            (&*v, c.ty),
            (
                Value::Integer(_),
                ColType::Integer | ColType::Numeric | ColType::Any
            ) | (Value::Text(_), ColType::Text | ColType::Any)
                | (Value::Blob(_), ColType::Blob | ColType::Any)
        );
        if !stored {
            let old = std::mem::replace(v, Value::Null);
            *v = if matches!(t.key, Key::Rowid(Some(k)) if k == i) {
                rowid_value(old, t, i)?
            } else {
                c.ty.coerce_with(old, || column_name(t, i))?
            };
        }
        if c.not_null && v.is_null() && !matches!(t.key, Key::Rowid(Some(k)) if k == i) {
            return Err(Error::ConstraintNotNull(column_name(t, i)));
        }
        Ok(())
    }

    fn index_key(t: &Table, ix: usize, row: &[Value], pk: &[u8]) -> Result<Vec<u8>> {
        // As in `put_index_entries`: room for two numbers, not grown from empty.
        let mut k = Vec::with_capacity(pk.len() + 28);
        index_parts(&t.indexes[ix], row, &mut k)?;
        k.extend_from_slice(pk);
        Ok(k)
    }

    /// The primary key of another row that holds the same values in unique index `ix`.
    fn unique_conflict(
        &self,
        t: &Table,
        ix: usize,
        row: &[Value],
        own: &[&[u8]],
    ) -> Result<Option<Vec<u8>>> {
        let index = &t.indexes[ix];
        if !index.unique {
            return Ok(None);
        }
        let mut prefix = Vec::new();
        // NULLs are distinct from each other in a UNIQUE index.
        if index_parts(index, row, &mut prefix)? {
            return Ok(None);
        }
        let hi = prefix_successor(&prefix);
        let mut cur = self.store.scan(
            index.tree,
            Bound::Included(&prefix),
            match &hi {
                Some(h) => Bound::Excluded(h.as_slice()),
                None => Bound::Unbounded,
            },
            false,
        )?;
        while cur.next()? {
            let pk = &cur.key()[prefix.len()..];
            if !own.contains(&pk) {
                return Ok(Some(pk.to_vec()));
            }
        }
        Ok(None)
    }

    fn unique_error(t: &Table, ix: Option<usize>) -> Error {
        let cols: Vec<usize> = match ix {
            Some(i) if !t.indexes[i].exprs.is_empty() => {
                return Error::ConstraintUnique(t.index_part_names(&t.indexes[i]))
            }
            Some(i) => t.indexes[i].columns.clone(),
            None => t.key_columns(),
        };
        let names: Vec<String> = cols
            .iter()
            .map(|&c| format!("{}.{}", t.name, t.columns[c].name))
            .collect();
        match ix {
            Some(_) => Error::ConstraintUnique(cairn_value::text::join(&names, ", ")),
            None => Error::ConstraintPrimaryKey(cairn_value::text::join(&names, ", ")),
        }
    }

    fn capture_set(&mut self, t: &Table, old: Option<&[Value]>, new: &[Value]) -> Result<()> {
        let (Some(r), Some(cap)) = (&t.replicated, self.capture.as_deref_mut()) else {
            return Ok(());
        };
        let mut old = old;
        if let (Some(o), Some(sc)) = (old, r.scope) {
            if !same_value(&o[sc], &new[sc]) {
                // The row moves to another scope: gone from the old one, whole in the new one.
                cap.push_delete(t, o);
                old = None;
            }
        }
        if old.is_none() && !r.has_merged() {
            // An insert (or a row moved into its scope) of a table without counters, sets or
            // maps, the common case: every column, appended as one range.
            cap.push_insert(t, new);
            return Ok(());
        }
        let e0 = cap.elems_mark();
        if !r.sets.is_empty() || !r.maps.is_empty() {
            capture_elems(cap, t, r, old, new)?;
        }
        // In column order, as the counters are declared in any order.
        let adds = (0..new.len()).filter_map(|c| {
            if !r.counters.contains(&c) {
                return None;
            }
            let d = counter_delta(old.map_or(&Value::Null, |o| &o[c]), &new[c]);
            (d != 0).then_some((c, d))
        });
        let columns = (0..new.len()).filter(|&c| {
            r.kind(c) == Merged::Lww && old.is_none_or(|o| !same_value(&o[c], &new[c]))
        });
        cap.push_set(t, new, columns, adds, e0);
        Ok(())
    }

    fn put_row(&mut self, t: &Table, pk: &[u8], row: &[Value]) -> Result<()> {
        self.capture_set(t, None, row)?;
        let mut rec = Vec::with_capacity(16 + row.len() * 8);
        encode_record_into(&mut rec, row);
        self.store.put(t.tree, pk, &rec)?;
        for i in 0..t.indexes.len() {
            self.store
                .put(t.indexes[i].tree, &Self::index_key(t, i, row, pk)?, &[])?;
        }
        self.index_text(t, pk, row, true)
    }

    /// Adds `row` to (`add`) or takes it out of the table's full-text indexes.
    fn index_text(&mut self, t: &Table, pk: &[u8], row: &[Value], add: bool) -> Result<()> {
        for f in &t.fts {
            crate::fts::index_row(self.store, f, pk, row, add)?;
        }
        Ok(())
    }

    /// The index entries of a row whose record is stored.
    fn put_index_entries(&mut self, t: &Table, pk: &[u8], row: &[Value]) -> Result<()> {
        self.index_text(t, pk, row, true)?;
        if t.indexes.is_empty() {
            return Ok(());
        }
        // Room for the key and two numbers (14 bytes each at most) from the start: grown from
        // empty, the key was reallocated twice for every row.
        let mut k = Vec::with_capacity(pk.len() + 28);
        for ix in &t.indexes {
            k.clear();
            index_parts(ix, row, &mut k)?;
            k.extend_from_slice(pk);
            self.store.put(ix.tree, &k, &[])?;
        }
        Ok(())
    }

    /// Whether another row holds `row`'s values in one of the table's UNIQUE indexes.
    fn unique_conflicts(&self, t: &Table, row: &[Value]) -> Result<bool> {
        for i in 0..t.indexes.len() {
            if self.unique_conflict(t, i, row, &[])?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn delete_row(&mut self, t: &Table, pk: &[u8], row: &[Value]) -> Result<()> {
        if let (Some(_), Some(cap)) = (&t.replicated, self.capture.as_deref_mut()) {
            cap.push_delete(t, row);
        }
        self.store.delete(t.tree, pk)?;
        for i in 0..t.indexes.len() {
            self.store
                .delete(t.indexes[i].tree, &Self::index_key(t, i, row, pk)?)?;
        }
        self.index_text(t, pk, row, false)
    }

    /// Makes each table hold `row` (or nothing) at primary key `pk`, unrecorded: corrections
    /// and peers' rows from the sync layer. Two passes, so that rows trading UNIQUE values
    /// do not block each other: every row that differs goes first, then the new ones are put.
    /// A row that breaks NOT NULL, type or UNIQUE constraints is left out (as every replica
    /// would leave it out); returns those, with the constraint's error.
    /// Counts what it changed in `changed`.
    pub fn force_rows(
        &mut self,
        rows: Vec<ForcedRow>,
        changed: &mut crate::watch::Changed,
    ) -> Result<Vec<RefusedRow>> {
        let mut puts = Vec::new();
        for (t, pk, row) in rows {
            let key = match &t.key {
                Key::Columns(_) => {
                    let mut k = Vec::new();
                    for v in &pk {
                        push_norm(v, &mut k);
                    }
                    k
                }
                Key::Rowid(_) => encode_key(&pk),
            };
            let existed = self.store.get(t.tree, &key)?.is_some();
            if existed {
                let old = self.load_row(&t, &key)?;
                if row.as_ref().is_some_and(|r| same_row(r, &old)) {
                    continue;
                }
                self.delete_row(&t, &key, &old)?;
            }
            if let Some(row) = row {
                puts.push((t, pk, key, row, existed));
            } else if existed {
                changed.add(&t.name, 0, 0, 1);
            }
        }
        let mut refused = Vec::new();
        let cache = Cache::default();
        for (t, pk, key, mut row, existed) in puts {
            // A row refused leaves the table without the row it had.
            let gone = u64::from(existed);
            if let Err(e) = self.check_row(&t, &mut row, &[], &cache) {
                changed.add(&t.name, 0, 0, gone);
                refused.push((t, pk, e));
                continue;
            }
            if let Some((ix, _)) = self.find_conflict(&t, &key, &row, &[])? {
                let e = Self::unique_error(&t, ix);
                changed.add(&t.name, 0, 0, gone);
                refused.push((t, pk, e));
                continue;
            }
            self.put_row(&t, &key, &row)?;
            changed.add(&t.name, 1 - gone, gone, 0);
        }
        Ok(refused)
    }

    fn load_row(&self, t: &Table, pk: &[u8]) -> Result<Vec<Value>> {
        let v = self
            .store
            .get(t.tree, pk)?
            .ok_or_else(|| Error::Storage(cairn_store::Error::Corrupt("row vanished".into())))?;
        let rec = Record::new(&v)?;
        (0..t.columns.len()).map(|c| Ok(rec.get(c)?)).collect()
    }

    /// Finds the first constraint `row` would violate at `pk`: (constraint, conflicting pk).
    fn find_conflict(
        &self,
        t: &Table,
        pk: &[u8],
        row: &[Value],
        own: &[&[u8]],
    ) -> Result<Option<(Option<usize>, Vec<u8>)>> {
        if !own.contains(&pk) && self.store.get(t.tree, pk)?.is_some() {
            return Ok(Some((None, pk.to_vec())));
        }
        for i in 0..t.indexes.len() {
            if let Some(other) = self.unique_conflict(t, i, row, own)? {
                return Ok(Some((Some(i), other)));
            }
        }
        Ok(None)
    }
}

/// Whether no input value goes to two columns (each input index at most once, and in range),
/// with a bit set for up to 64 columns instead of a vector.
fn inputs_distinct(columns: &[ColSource]) -> bool {
    let inputs = || {
        columns.iter().filter_map(|c| match c {
            ColSource::Input(i) => Some(*i),
            ColSource::Default(_) => None,
        })
    };
    if columns.len() <= 64 {
        let mut seen = 0u64;
        return inputs().all(|i| {
            let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
            let fresh = i < columns.len() && seen & bit == 0;
            seen |= bit;
            fresh
        });
    }
    let mut used = vec![false; columns.len()];
    inputs().all(|i| used.get_mut(i).is_some_and(|u| !std::mem::replace(u, true)))
}

/// Where an upsert's DO UPDATE finds its row (`Writer::upsert_in_place`).
#[derive(Clone, Copy)]
enum Upsert<'a> {
    /// At this key, which the new row's insert found taken.
    At(&'a [u8]),
    /// At the new row's key (`pk`, with its record) if taken; else the new row is put there.
    Put(&'a [u8], &'a [u8]),
}

/// The keys a write names outright (`Writer::point_targets`): one, the common case, without a
/// list to hold it.
enum PointKeys {
    One(Vec<u8>),
    Many(Vec<Vec<u8>>),
}

impl PointBufs {
    /// Takes back the key buffer `point_targets` made a single key in.
    fn give_back(&mut self, keys: PointKeys) {
        if let PointKeys::One(k) = keys {
            self.key = k;
        }
    }
}

impl PointKeys {
    fn as_slice(&self) -> &[Vec<u8>] {
        match self {
            PointKeys::One(k) => std::slice::from_ref(k),
            PointKeys::Many(keys) => keys,
        }
    }
}

/// The rows an UPDATE or DELETE changes, gathered before the first write (a write must not
/// move the scan that finds them): keys end to end in one buffer and rows of `width` values
/// in another, instead of two allocations per row.
struct Targets {
    keys: Vec<u8>,
    /// Where each key ends in `keys`.
    ends: Vec<usize>,
    rows: Vec<Value>,
    /// Values per row (0 when the rows were not kept).
    width: usize,
}

impl Targets {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Row `i`'s key and values.
    fn get_mut(&mut self, i: usize) -> (&[u8], &mut [Value]) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let w = self.width;
        (
            &self.keys[start..self.ends[i]],
            &mut self.rows[i * w..(i + 1) * w],
        )
    }
}

/// Appends index `ix`'s key parts for `row` (a whole row of its table): its columns' values,
/// or its expressions' evaluated over the row; says whether one is NULL.
pub(crate) fn index_parts(
    ix: &crate::schema::Index,
    row: &[Value],
    out: &mut Vec<u8>,
) -> Result<bool> {
    let mut null = false;
    if ix.exprs.is_empty() {
        for &c in &ix.columns {
            null |= row[c].is_null();
            push_norm(&row[c], out);
        }
        return Ok(null);
    }
    // Index expressions read nothing but the row (`schema::index_exprs`).
    let none = crate::storage::NoStore;
    let rng = std::cell::Cell::new(0);
    let cache = Cache::default();
    let cx = Cx {
        store: &none,
        params: &[],
        outer: None,
        rng: &rng,
        cache: &cache,
        regroup: None,
    };
    for e in &ix.exprs {
        let v = crate::exec::eval::eval(&e.plan, row, &cx)?;
        null |= v.is_null();
        push_norm(&v, out);
    }
    Ok(null)
}

/// `table.column`, as constraint errors name a column: out of line and cold, so that the
/// inlined `check_column` leaves only a call in every writer.
#[cold]
#[inline(never)]
fn column_name(t: &Table, i: usize) -> String {
    [t.name.as_str(), ".", t.columns[i].name.as_str()].concat()
}
