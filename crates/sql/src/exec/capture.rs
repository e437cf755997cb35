//! The capture of changes to replicated tables, for the sync layer to turn into ops.

use crate::schema::{Key, Table};
use cairn_value::wire::put_value;
use cairn_value::Value;
use std::cmp::Ordering;
use std::rc::Rc;

/// The writes a transaction made to replicated tables, as the sync layer turns them into ops.
///
/// Flat buffers, kept from one transaction to the next: each captured row's values are
/// appended to one byte buffer in the sync wire encoding of a value (docs/sync.md sec. 2),
/// which the commit hook copies into its ops as they are, and each change is a fixed-size
/// entry naming ranges of the buffers; inserts of whole rows into one table, one after the
/// other, share one entry. Once the buffers have grown, capturing a row allocates nothing and
/// the commit frees nothing per row. A `Vec<Value>` per change instead kept every row's
/// allocations alive until commit: the statement's own allocations then grew the heap instead
/// of reusing freed chunks, and the commit freed them all at once. An inserted row takes its
/// values' bytes and a bound per value, no more: a transaction's first large capture grows
/// these buffers, and every byte of them is memory the page faults and copies of that growth
/// touch, which instruction counts do not show.
#[derive(Debug, Default)]
pub struct Changes {
    entries: Vec<Entry>,
    /// How many changes the entries hold.
    len: usize,
    /// The rows' values, one after the other, each in the sync wire encoding.
    bytes: Vec<u8>,
    /// Where each row's first value starts in `bytes`, then where each of its values ends. A
    /// row of a run of inserts starts where the one before it ends, and shares that bound.
    bounds: Vec<usize>,
    /// The columns each SET sets (but an insert's, which sets them all).
    columns: Vec<usize>,
    /// 0, 1, 2...: the columns an insert sets, as long as the widest row.
    all: Vec<usize>,
    /// The counter additions of each SET: (column, delta).
    adds: Vec<(usize, i64)>,
    /// The set and map ops of each SET, and the keys and values they name.
    elems: Vec<ElemOp>,
    elem_bytes: Vec<u8>,
    /// The tables changed in this transaction (and maybe earlier ones), which entries name by
    /// index.
    tables: Vec<Rc<str>>,
    /// Where the changes of the tables it takes go instead (the sync layer's ops), and how
    /// many it took in this transaction.
    #[cfg(feature = "sink")]
    sink: SinkSlot,
    #[cfg(feature = "sink")]
    sunk: usize,
}

/// Takes a transaction's changes to some replicated tables as the statements make them (the
/// sync layer writing its ops at once), instead of [`Changes`] holding them for the commit hook
/// to read at commit. Every change of a table it takes in a transaction must go to it, in order;
/// what it takes counts among the transaction's changes ([`Changes::len`]).
#[cfg(feature = "sink")]
pub trait CaptureSink {
    /// Takes the insert of `row` (every column) into `t`, or returns false (not a table it
    /// takes).
    fn insert(&mut self, t: &Table, row: &[Value]) -> bool;
    /// Takes a SET of `columns` of a row of `t` whose values after the write `value` gives
    /// (the key's among them).
    fn set<'v>(&mut self, t: &Table, value: &dyn Fn(usize) -> &'v Value, columns: &[usize])
        -> bool;
    /// Takes the delete of `row` (the row as it was).
    fn delete(&mut self, t: &Table, row: &[Value]) -> bool;
    /// Drops the changes it took in this transaction past the first `len` (a statement that
    /// failed; 0: the transaction ended). Called only when it took more.
    fn truncate(&mut self, len: usize);
}

#[cfg(feature = "sink")]
#[derive(Default)]
struct SinkSlot(Option<Box<dyn CaptureSink>>);

#[cfg(feature = "sink")]
impl std::fmt::Debug for SinkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Sink" } else { "None" })
    }
}

/// Where a transaction's changes stood (`Changes::mark`), to go back to.
#[derive(Debug, Clone, Copy)]
pub struct ChangesMark {
    held: usize,
    sunk: usize,
}

/// One change, or a run of inserts of whole rows: ranges of [`Changes`]' buffers.
#[derive(Debug, Clone, Copy)]
struct Entry {
    table: usize,
    delete: bool,
    /// A run of `count` inserts setting every column (`columns` unused); else one change.
    insert: bool,
    count: usize,
    /// The first row's first bound in `bounds`, and how many values a row has.
    row: usize,
    values: usize,
    columns: (usize, usize),
    adds: (usize, usize),
    elems: (usize, usize),
}

/// What an op on one element of a SET column or one key of a MAP column does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemKind {
    SetAdd,
    SetRemove,
    MapSet,
    MapRemove,
}

/// A captured op on a SET or MAP column: its column, and where its key (UTF-8) and value (in
/// the sync wire encoding) lie in the captured bytes (empty when it has none).
#[derive(Debug, Clone, Copy)]
pub struct ElemOp {
    pub col: usize,
    pub kind: ElemKind,
    key: (usize, usize),
    value: (usize, usize),
}

/// A captured change, borrowed from [`Changes`].
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub table: &'a str,
    /// The whole row after the write, or as it was for a delete. An UPDATE made where the
    /// row is stored (of a table without counters, its scope column not set) holds only the
    /// key, the scope column and the columns set: its other values are empty.
    pub row: EncodedRow<'a>,
    /// None for a delete.
    pub set: Option<SetPart<'a>>,
}

/// What a captured SET writes.
#[derive(Debug, Clone, Copy)]
pub struct SetPart<'a> {
    /// The columns set (all but the counters, for an insert).
    pub columns: &'a [usize],
    /// The additions to counter columns: (column, delta).
    pub adds: &'a [(usize, i64)],
    /// The ops on SET and MAP columns, in column order.
    pub elems: &'a [ElemOp],
    elem_bytes: &'a [u8],
}

impl<'a> SetPart<'a> {
    /// An op's key (map ops), and its value encoded (all but `MapRemove`).
    pub fn elem(&self, e: &ElemOp) -> (Option<&'a str>, Option<&'a [u8]>) {
        let b = self.elem_bytes;
        let key = matches!(e.kind, ElemKind::MapSet | ElemKind::MapRemove)
            .then(|| std::str::from_utf8(&b[e.key.0..e.key.1]).unwrap_or_default());
        let value = (e.kind != ElemKind::MapRemove).then(|| &b[e.value.0..e.value.1]);
        (key, value)
    }
}

/// A captured row: each value in the sync wire encoding.
#[derive(Debug, Clone, Copy)]
pub struct EncodedRow<'a> {
    bytes: &'a [u8],
    /// Where each value starts, then where the last ends.
    bounds: &'a [usize],
}

impl<'a> EncodedRow<'a> {
    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Column `c`'s value, encoded.
    pub fn value(&self, c: usize) -> &'a [u8] {
        let b = &self.bounds[c..c + 2];
        &self.bytes[b[0]..b[1]]
    }
}

impl Changes {
    /// The changes made, those the sink took among them.
    pub fn len(&self) -> usize {
        self.len + self.sunk()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The changes held here, for [`Changes::iter`] (not those the sink took).
    pub fn held(&self) -> usize {
        self.len
    }
    fn sunk(&self) -> usize {
        #[cfg(feature = "sink")]
        return self.sunk;
        #[cfg(not(feature = "sink"))]
        0
    }
    /// Hands the changes of the tables `sink` takes to it from now on.
    #[cfg(feature = "sink")]
    pub fn set_sink(&mut self, sink: Box<dyn CaptureSink>) {
        self.sink.0 = Some(sink);
    }
    /// Moves the sink to `other` (a `Changes` that takes this one's place, between
    /// transactions).
    pub fn give_sink(&mut self, other: &mut Changes) {
        #[cfg(feature = "sink")]
        {
            other.sink.0 = self.sink.0.take();
            other.sunk = std::mem::take(&mut self.sunk);
        }
        let _ = other;
    }
    pub fn mark(&self) -> ChangesMark {
        ChangesMark {
            held: self.len,
            sunk: self.sunk(),
        }
    }
    /// Drops the changes made since `m` (a statement that failed).
    pub fn back_to(&mut self, m: ChangesMark) {
        self.truncate(m.held);
        self.sink_back_to(m.sunk);
    }
    fn sink_back_to(&mut self, sunk: usize) {
        #[cfg(feature = "sink")]
        if self.sunk > sunk {
            if let Some(s) = self.sink.0.as_mut() {
                s.truncate(sunk);
            }
            self.sunk = sunk;
        }
        let _ = sunk;
    }
    pub fn clear(&mut self) {
        self.truncate(0);
        self.sink_back_to(0);
        // The names stay for the next transaction (most write the same tables), unless many
        // tables have come and gone.
        if self.tables.len() > 16 {
            self.tables.clear();
        }
    }
    /// Drops the changes after the first `len` (a statement that failed): the entries past
    /// them, and the part of a run of inserts past them.
    pub fn truncate(&mut self, len: usize) {
        while self.len > len {
            let Some(e) = self.entries.last_mut() else {
                break;
            };
            let first = self.len - e.count;
            if first < len {
                let cut = e.row + (len - first) * e.values + 1;
                self.bytes.truncate(self.bounds[cut - 1]);
                self.bounds.truncate(cut);
                e.count = len - first;
                self.len = len;
                break;
            }
            self.bytes.truncate(self.bounds[e.row]);
            self.bounds.truncate(e.row);
            self.columns.truncate(e.columns.0);
            self.adds.truncate(e.adds.0);
            if let Some(first) = self.elems.get(e.elems.0) {
                self.elem_bytes.truncate(first.key.0);
            }
            self.elems.truncate(e.elems.0);
            self.entries.pop();
            self.len = first;
        }
    }
    /// The bytes the buffers hold room for (a very large transaction's are not kept).
    pub fn footprint(&self) -> usize {
        self.bytes.capacity()
            + (self.bounds.capacity() + self.columns.capacity() + self.all.capacity())
                * size_of::<usize>()
            + self.adds.capacity() * size_of::<(usize, i64)>()
            + self.elems.capacity() * size_of::<ElemOp>()
            + self.elem_bytes.capacity()
            + self.entries.capacity() * size_of::<Entry>()
    }
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Change<'_>> + '_ {
        Iter {
            changes: self,
            entry: 0,
            row: 0,
            left: self.len,
        }
    }

    /// Table `t`'s index in `tables`: a run of changes is mostly to one table.
    fn table(&mut self, t: &Table) -> usize {
        if let Some(e) = self.entries.last() {
            if *self.tables[e.table] == *t.name {
                return e.table;
            }
        }
        match self.tables.iter().position(|n| **n == *t.name) {
            Some(i) => i,
            None => {
                self.tables.push(Rc::from(t.name.as_str()));
                self.tables.len() - 1
            }
        }
    }

    /// An entry of one row into `table`, whose bounds start at `row`, with the columns and
    /// adds pushed since `from` (their lengths then).
    fn push_entry(
        &mut self,
        table: usize,
        (delete, insert): (bool, bool),
        row: usize,
        values: usize,
        from: (usize, usize),
    ) {
        self.entries.push(Entry {
            table,
            delete,
            insert,
            count: 1,
            row,
            values,
            columns: (from.0, self.columns.len()),
            adds: (from.1, self.adds.len()),
            elems: (self.elems.len(), self.elems.len()),
        });
    }

    /// Appends `row`'s values; returns where its bounds start.
    fn push_row(&mut self, row: &[Value]) -> usize {
        let at = self.bounds.len();
        self.bounds.push(self.bytes.len());
        self.push_values(row);
        at
    }

    /// Appends `row`'s values and where each ends.
    fn push_values(&mut self, row: &[Value]) {
        // Room for the row at once (its numbers' encodings, at least) instead of a check
        // against the capacity at each push that may grow the buffer.
        self.bounds.reserve(row.len());
        self.bytes.reserve(10 * row.len());
        for v in row {
            put_value(&mut self.bytes, v);
            self.bounds.push(self.bytes.len());
        }
    }

    /// An insert of `row` setting every column: added to the last entry when that is a run
    /// of such inserts into `t`.
    pub(super) fn push_insert(&mut self, t: &Table, row: &[Value]) {
        #[cfg(feature = "sink")]
        if let Some(s) = self.sink.0.as_mut() {
            if s.insert(t, row) {
                self.sunk += 1;
                return;
            }
        }
        self.len += 1;
        if let Some(e) = self.entries.last_mut() {
            if e.insert && e.values == row.len() && *self.tables[e.table] == *t.name {
                e.count += 1;
                self.push_values(row);
                return;
            }
        }
        if self.all.len() < row.len() {
            self.all = (0..row.len()).collect();
        }
        let table = self.table(t);
        let at = self.push_row(row);
        let from = (self.columns.len(), self.adds.len());
        self.push_entry(table, (false, true), at, row.len(), from);
    }

    pub(super) fn push_delete(&mut self, t: &Table, row: &[Value]) {
        #[cfg(feature = "sink")]
        if let Some(s) = self.sink.0.as_mut() {
            if s.delete(t, row) {
                self.sunk += 1;
                return;
            }
        }
        let table = self.table(t);
        let at = self.push_row(row);
        self.len += 1;
        let from = (self.columns.len(), self.adds.len());
        self.push_entry(table, (true, false), at, row.len(), from);
    }

    /// An UPDATE made where the row is stored (`update_in_place`), of a table without
    /// counters: a SET of the columns `new` gives a value that differs from `old`'s, unless
    /// none does, with a row of the values set and `old`'s of the key and the scope column,
    /// which the commit hook reads besides the columns set. The other columns are left empty
    /// rather than decoded and encoded for nothing. `old` is the row before the write, in
    /// those columns.
    pub(super) fn push_in_place<'v>(
        &mut self,
        t: &Table,
        old: &[Value],
        new: impl Fn(usize) -> Option<&'v Value>,
    ) {
        let c0 = self.columns.len();
        for (c, o) in old.iter().enumerate() {
            if new(c).is_some_and(|v| !same_value(o, v)) {
                self.columns.push(c);
            }
        }
        if self.columns.len() == c0 {
            return;
        }
        #[cfg(feature = "sink")]
        if let Some(s) = self.sink.0.as_mut() {
            let value = |c: usize| new(c).unwrap_or(&old[c]);
            if s.set(t, &value, &self.columns[c0..]) {
                self.columns.truncate(c0);
                self.sunk += 1;
                return;
            }
        }
        let scope = t.replicated.as_ref().and_then(|r| r.scope);
        let keep = |c: usize| {
            Some(c) == scope
                || match &t.key {
                    Key::Columns(cols) => cols.contains(&c),
                    Key::Rowid(k) => *k == Some(c),
                }
        };
        let table = self.table(t);
        let at = self.bounds.len();
        self.bounds.reserve(old.len() + 1);
        self.bounds.push(self.bytes.len());
        for (c, o) in old.iter().enumerate() {
            match new(c) {
                Some(v) => put_value(&mut self.bytes, v),
                None if keep(c) => put_value(&mut self.bytes, o),
                None => {}
            }
            self.bounds.push(self.bytes.len());
        }
        self.len += 1;
        let from = (c0, self.adds.len());
        self.push_entry(table, (false, false), at, old.len(), from);
    }

    /// Where the ops of a SET's sets and maps start: pushed by [`Changes::push_elem`] before
    /// [`Changes::push_set`] takes them.
    pub(super) fn elems_mark(&self) -> usize {
        self.elems.len()
    }

    /// An op on an element of SET column `col` or a key of MAP column `col`, for the next
    /// [`Changes::push_set`].
    pub(super) fn push_elem(
        &mut self,
        col: usize,
        kind: ElemKind,
        key: Option<&str>,
        value: Option<&Value>,
    ) {
        let k0 = self.elem_bytes.len();
        self.elem_bytes
            .extend_from_slice(key.unwrap_or_default().as_bytes());
        let v0 = self.elem_bytes.len();
        if let Some(v) = value {
            put_value(&mut self.elem_bytes, v);
        }
        self.elems.push(ElemOp {
            col,
            kind,
            key: (k0, v0),
            value: (v0, self.elem_bytes.len()),
        });
    }

    /// A SET of `columns`, `adds` and the set and map ops pushed since `e0` to `row`, unless
    /// all are empty.
    pub(super) fn push_set(
        &mut self,
        t: &Table,
        row: &[Value],
        columns: impl Iterator<Item = usize>,
        adds: impl Iterator<Item = (usize, i64)>,
        e0: usize,
    ) {
        let (c0, a0) = (self.columns.len(), self.adds.len());
        self.columns.extend(columns);
        self.adds.extend(adds);
        if self.columns.len() == c0 && self.adds.len() == a0 && self.elems.len() == e0 {
            return;
        }
        #[cfg(feature = "sink")]
        if let (Some(s), true) = (
            self.sink.0.as_mut(),
            self.adds.len() == a0 && self.elems.len() == e0,
        ) {
            if s.set(t, &|c| &row[c], &self.columns[c0..]) {
                self.columns.truncate(c0);
                self.sunk += 1;
                return;
            }
        }
        let table = self.table(t);
        let at = self.push_row(row);
        self.len += 1;
        self.push_entry(table, (false, false), at, row.len(), (c0, a0));
        if let Some(e) = self.entries.last_mut() {
            e.elems.0 = e0;
        }
    }
}

/// [`Changes::iter`]: each change in order, a run of inserts one row at a time.
struct Iter<'a> {
    changes: &'a Changes,
    entry: usize,
    /// The next row of the entry.
    row: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Change<'a>;
    fn next(&mut self) -> Option<Change<'a>> {
        let c = self.changes;
        let e = c.entries.get(self.entry)?;
        let at = e.row + self.row * e.values;
        let change = Change {
            table: &c.tables[e.table],
            row: EncodedRow {
                bytes: &c.bytes,
                bounds: &c.bounds[at..at + e.values + 1],
            },
            set: (!e.delete).then(|| SetPart {
                columns: if e.insert {
                    &c.all[..e.values]
                } else {
                    &c.columns[e.columns.0..e.columns.1]
                },
                adds: &c.adds[e.adds.0..e.adds.1],
                elems: &c.elems[e.elems.0..e.elems.1],
                elem_bytes: &c.elem_bytes,
            }),
        };
        self.row += 1;
        if self.row == e.count {
            self.entry += 1;
            self.row = 0;
        }
        self.left -= 1;
        Some(change)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// A row a replicated table must hold after a commit, when merging the commit into the
/// replica's state gave something other than what the statements wrote (a counter that kept
/// additions from other devices, a row revived after a delete elsewhere). `None`: no row.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    pub table: String,
    pub pk: Vec<Value>,
    pub row: Option<Vec<Value>>,
}

/// Whether two values are the same stored value: equal and of the same type (1 and 1.0 compare
/// equal but are stored differently).
pub fn same_value(a: &Value, b: &Value) -> bool {
    a.total_cmp(b) == Ordering::Equal && a.type_name() == b.type_name()
}

/// Whether two rows hold the same stored values.
pub fn same_row(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y))
}
