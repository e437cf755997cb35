//! Merge rules (docs/sync.md sec. 7). A row's merged state is a join-semilattice: applying an op
//! joins a one-op state into it, so replicas holding the same ops hold the same rows whatever the
//! order they arrived in. The rows live behind `RowStore`; `MemoryRows` is the in-memory model.

use crate::change::{Op, Payload};
use crate::error::{Error, Reason, Result};
use crate::hlc::Hlc;
use crate::identity::AuthorId;
use crate::owner::{resolve, Added, KeyIndex};
use crate::scope::ScopeId;
use crate::wire::{value_bytes, Reader, Writer};
use cairn_value::Value;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

/// An op's place in the last-writer-wins order: HLC, then author id, then the author's seq and
/// the op's index in its record, so two distinct ops never tie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub hlc: Hlc,
    pub author: AuthorId,
    pub seq: u64,
    pub idx: u32,
}

impl Version {
    pub fn encode(&self, w: &mut Writer) {
        w.u64le(self.hlc);
        w.raw(&self.author.0);
        w.varint(self.seq);
        w.varint(u64::from(self.idx));
    }
    pub fn decode(r: &mut Reader) -> Result<Version> {
        Ok(Version {
            hlc: r.u64le()?,
            author: AuthorId(r.array()?),
            seq: r.varint()?,
            idx: u32::try_from(r.varint()?)
                .map_err(|_| Error::Malformed("op index out of range".into()))?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Last writer wins.
    Lww,
    /// An i64 that sums every author's additions.
    Counter,
    /// An observed-remove set of values, read as a JSON array.
    Set,
    /// A JSON object whose keys merge one by one, last writer wins.
    Map,
}

/// A table registered as replicated. Columns are the non-key columns, addressed by index.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub name: String,
    pub pk_len: usize,
    pub columns: Vec<(String, ColumnKind)>,
    /// Column sets whose non-NULL values must be unique among visible rows.
    pub unique: Vec<Vec<u32>>,
}

impl TableSchema {
    pub fn new(name: impl Into<String>, pk_len: usize) -> TableSchema {
        TableSchema {
            name: name.into(),
            pk_len,
            columns: Vec::new(),
            unique: Vec::new(),
        }
    }
    pub fn lww(mut self, col: impl Into<String>) -> Self {
        self.columns.push((col.into(), ColumnKind::Lww));
        self
    }
    pub fn counter(mut self, col: impl Into<String>) -> Self {
        self.columns.push((col.into(), ColumnKind::Counter));
        self
    }
    pub fn set(mut self, col: impl Into<String>) -> Self {
        self.columns.push((col.into(), ColumnKind::Set));
        self
    }
    pub fn map(mut self, col: impl Into<String>) -> Self {
        self.columns.push((col.into(), ColumnKind::Map));
        self
    }
    pub fn unique(mut self, cols: Vec<u32>) -> Self {
        self.unique.push(cols);
        self
    }
    pub fn column(&self, name: &str) -> Option<u32> {
        self.columns
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| i as u32)
    }

    /// Checks an op against the schema (pk arity, the kinds of the columns it knows).
    pub fn check_op(&self, op: &Op) -> Result<()> {
        let bad = |m: &str| {
            Err(Error::reject(
                Reason::SchemaMismatch,
                format!("{}: {m}", self.name),
            ))
        };
        if op.pk.len() != self.pk_len {
            return bad("primary key arity");
        }
        // A column past those this replica knows is one a peer added first: its values are
        // kept in the merged rows, and the table shows them once it has the column too.
        let kind = |c: &u32| self.columns.get(*c as usize).map(|x| x.1);
        match op.payload() {
            Some(Payload::Set(cols)) => {
                for (c, _) in cols {
                    if kind(c).is_some_and(|k| k != ColumnKind::Lww) {
                        return bad("SET on a column that is not last-writer-wins");
                    }
                }
            }
            Some(Payload::Add(c, _)) if kind(c).is_some_and(|k| k != ColumnKind::Counter) => {
                return bad("ADD on a column that is not a counter");
            }
            Some(
                Payload::SetAdd(_, v) | Payload::SetRemove(_, v, _) | Payload::MapSet(_, _, v),
            ) if !cairn_value::coll::fits(v) => {
                return Err(Error::Malformed(
                    "a set element or map value is a BLOB or NaN".into(),
                ));
            }
            Some(Payload::SetRemove(_, _, seen))
                if !seen.windows(2).all(|w| w[0].0 .0 < w[1].0 .0) =>
            {
                return Err(Error::Malformed(
                    "a set removal's chains are not in increasing order".into(),
                ));
            }
            Some(p @ (Payload::SetAdd(..) | Payload::SetRemove(..)))
                if p.column()
                    .and_then(|c| kind(&c))
                    .is_some_and(|k| k != ColumnKind::Set) =>
            {
                return bad("a set op on a column that is not a SET");
            }
            Some(p @ (Payload::MapSet(..) | Payload::MapRemove(..)))
                if p.column()
                    .and_then(|c| kind(&c))
                    .is_some_and(|k| k != ColumnKind::Map) =>
            {
                return bad("a map op on a column that is not a MAP");
            }
            _ => {}
        }
        Ok(())
    }
}

/// A row's identity: table, scope, and the canonical encoding of its primary key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowKey {
    pub table: String,
    pub scope: ScopeId,
    pub pk: Vec<u8>,
}

impl RowKey {
    pub fn new(table: &str, scope: &ScopeId, pk: &[Value]) -> RowKey {
        let mut w = Writer {
            buf: Vec::with_capacity(48),
        };
        w.values(pk);
        RowKey {
            table: table.to_string(),
            scope: scope.clone(),
            pk: w.buf,
        }
    }
    pub fn pk_values(&self) -> Vec<Value> {
        Reader::new(&self.pk)
            .values(u64::MAX)
            .expect("invariant: a row key's pk is our own encoding")
    }
}

/// Every field, as the derived hash would, in fewer and larger writes (the hasher is the map's
/// keyed one: peers choose these bytes).
impl std::hash::Hash for RowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.table.as_bytes());
        state.write_u8(0xff);
        state.write(&self.scope.owner.0);
        state.write_usize(self.scope.name.len());
        state.write(&self.scope.name);
        state.write(&self.pk);
    }
}

/// A row's LWW cells by column: a vector sorted by column, for the few columns a row has (a
/// search tree would allocate a node of eleven slots for each row).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cells(Vec<(u32, (Version, Value))>);

impl Cells {
    fn at(&self, col: u32) -> std::result::Result<usize, usize> {
        self.0.binary_search_by_key(&col, |(c, _)| *c)
    }
    pub fn get(&self, col: &u32) -> Option<&(Version, Value)> {
        self.at(*col).ok().map(|i| &self.0[i].1)
    }
    pub fn insert(&mut self, col: u32, cell: (Version, Value)) {
        match self.at(col) {
            Ok(i) => self.0[i].1 = cell,
            Err(i) => self.0.insert(i, (col, cell)),
        }
    }
    pub fn retain(&mut self, mut keep: impl FnMut(&u32, &mut (Version, Value)) -> bool) {
        self.0.retain_mut(|(c, cell)| keep(c, cell));
    }
    pub fn clear(&mut self) {
        self.0.clear();
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// In column order.
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &(Version, Value))> {
        self.0.iter().map(|(c, cell)| (c, cell))
    }
    pub fn values(&self) -> impl Iterator<Item = &(Version, Value)> {
        self.0.iter().map(|(_, cell)| cell)
    }
    /// In column order; the columns stay as they are.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut (Version, Value))> {
        self.0.iter_mut().map(|(c, cell)| (&*c, cell))
    }
}

impl<'a> IntoIterator for &'a Cells {
    type Item = (&'a u32, &'a (Version, Value));
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (u32, (Version, Value))>,
        fn(&'a (u32, (Version, Value))) -> (&'a u32, &'a (Version, Value)),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(c, cell)| (c, cell))
    }
}

impl std::ops::Index<&u32> for Cells {
    type Output = (Version, Value);
    fn index(&self, col: &u32) -> &(Version, Value) {
        self.get(col)
            .expect("invariant: indexed by a column it holds")
    }
}

/// One element of a SET column (docs/sync.md sec. 7, "Sets"): the adds of it no removal
/// observed, and what the removals of it observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Elem {
    pub value: Value,
    /// Adds newer than the row's tombstone that no removal observed: the element is in the set
    /// while there is one.
    pub adds: std::collections::BTreeSet<Version>,
    /// Per author, the last (seq, op index) of its chain a removal of the element observed.
    pub seen: BTreeMap<AuthorId, (u64, u32)>,
}

impl Elem {
    fn observed(&self, v: &Version) -> bool {
        self.seen
            .get(&v.author)
            .is_some_and(|s| (v.seq, v.idx) <= *s)
    }

    /// Joins what a removal observed (per author, the last `(seq, idx)`), and drops the adds
    /// it observed.
    fn observe(&mut self, seen: impl Iterator<Item = (AuthorId, (u64, u32))>) {
        for (a, s) in seen {
            let at = self.seen.entry(a).or_insert(s);
            *at = (*at).max(s);
        }
        let Elem { adds, seen, .. } = self;
        adds.retain(|a| seen.get(&a.author).is_none_or(|s| (a.seq, a.idx) > *s));
    }
}

/// The merged state of one row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RowState {
    /// Purged rows absorb every op (purge is final).
    pub purged: bool,
    pub tombstone: Option<Version>,
    /// LWW cells newer than the tombstone.
    pub cells: Cells,
    /// Counter additions newer than the tombstone, by column then by op version.
    pub counters: BTreeMap<u32, BTreeMap<Version, i64>>,
    /// SET columns' elements, by column then by the element's wire encoding.
    pub sets: BTreeMap<u32, BTreeMap<Vec<u8>, Elem>>,
    /// MAP columns' keys newer than the tombstone: the last write of each (None: removed).
    pub maps: BTreeMap<u32, BTreeMap<String, (Version, Option<Value>)>>,
}

impl RowState {
    fn dead(&self, v: &Version) -> bool {
        self.tombstone.is_some_and(|t| *v <= t)
    }

    fn set_cell(&mut self, col: u32, v: Version, value: Value) {
        if self.purged || self.dead(&v) {
            return;
        }
        match self.cells.get(&col) {
            // `>=`: within one SET op listing a column twice, the later entry wins; an equal
            // version from elsewhere is the same op, so this stays idempotent.
            Some((cur, _)) if v < *cur => {}
            _ => {
                self.cells.insert(col, (v, value));
            }
        }
    }

    fn add(&mut self, col: u32, v: Version, delta: i64) {
        if self.purged || self.dead(&v) {
            return;
        }
        self.counters.entry(col).or_default().insert(v, delta);
    }

    fn elem(&mut self, col: u32, value: &Value) -> &mut Elem {
        let key = value_bytes(value);
        (self.sets.entry(col).or_default().entry(key)).or_insert_with(|| Elem {
            value: value.clone(),
            adds: Default::default(),
            seen: BTreeMap::new(),
        })
    }

    fn set_add(&mut self, col: u32, v: Version, value: &Value) {
        if self.purged || self.dead(&v) {
            return;
        }
        let key = value_bytes(value);
        let observed =
            (self.sets.get(&col).and_then(|m| m.get(&key))).is_some_and(|e| e.observed(&v));
        if !observed {
            self.elem(col, value).adds.insert(v);
        }
    }

    /// A removal at `v` that observed `seen` (and its own chain up to itself).
    fn set_remove(&mut self, col: u32, v: Version, value: &Value, seen: &[(AuthorId, u64)]) {
        if self.purged {
            return;
        }
        let own = [(v.author, (v.seq, v.idx))];
        let all = seen.iter().map(|(a, s)| (*a, (*s, u32::MAX))).chain(own);
        self.elem(col, value).observe(all);
    }

    fn map_write(&mut self, col: u32, v: Version, key: &str, value: Option<&Value>) {
        if self.purged || self.dead(&v) {
            return;
        }
        let m = self.maps.entry(col).or_default();
        match m.get_mut(key) {
            Some((cur, _)) if v < *cur => {}
            Some(slot) => *slot = (v, value.cloned()),
            None => {
                m.insert(key.to_string(), (v, value.cloned()));
            }
        }
    }

    fn delete(&mut self, v: Version) {
        if self.purged {
            // The tombstone of a purged row is still the greatest delete or purge seen, so
            // it does not depend on whether a delete arrived before or after the purge.
            self.tombstone = Some(self.tombstone.map_or(v, |t| t.max(v)));
            return;
        }
        if self.dead(&v) {
            return;
        }
        self.tombstone = Some(v);
        self.cells.retain(|_, (cv, _)| *cv > v);
        for entries in self.counters.values_mut() {
            entries.retain(|ev, _| *ev > v);
        }
        self.counters.retain(|_, e| !e.is_empty());
        for elems in self.sets.values_mut() {
            for e in elems.values_mut() {
                e.adds.retain(|a| *a > v);
            }
            // What removals observed stays: it decides adds still to arrive.
            elems.retain(|_, e| !e.adds.is_empty() || !e.seen.is_empty());
        }
        self.sets.retain(|_, m| !m.is_empty());
        for keys in self.maps.values_mut() {
            keys.retain(|_, (kv, _)| *kv > v);
        }
        self.maps.retain(|_, m| !m.is_empty());
    }

    fn purge(&mut self, v: Version) {
        self.tombstone = Some(self.tombstone.map_or(v, |t| t.max(v)));
        self.forget_values();
    }

    /// Marks the row purged and drops its values, its versions left as they are.
    pub(crate) fn forget_values(&mut self) {
        self.purged = true;
        self.cells.clear();
        self.counters.clear();
        self.sets.clear();
        self.maps.clear();
    }

    /// Joins one op into the row. Redacted ops carry nothing to join.
    pub fn apply(&mut self, op: &Op, v: Version) {
        match op.payload() {
            Some(Payload::Set(cols)) => {
                for (c, value) in cols {
                    self.set_cell(*c, v, value.clone());
                }
            }
            Some(Payload::Delete) => self.delete(v),
            Some(Payload::Add(c, d)) => self.add(*c, v, *d),
            Some(Payload::Purge) => self.purge(v),
            Some(Payload::SetAdd(c, x)) => self.set_add(*c, v, x),
            Some(Payload::SetRemove(c, x, seen)) => self.set_remove(*c, v, x, seen),
            Some(Payload::MapSet(c, k, x)) => self.map_write(*c, v, k, Some(x)),
            Some(Payload::MapRemove(c, k)) => self.map_write(*c, v, k, None),
            None => {}
        }
    }

    /// Joins another state of the same row into this one (snapshots).
    pub fn join(&mut self, other: &RowState) {
        if other.purged {
            self.purge(other.tombstone.unwrap_or(Version {
                hlc: 0,
                author: AuthorId([0; 32]),
                seq: 0,
                idx: 0,
            }));
            return;
        }
        if let Some(t) = other.tombstone {
            self.delete(t);
        }
        for (c, (v, value)) in &other.cells {
            self.set_cell(*c, *v, value.clone());
        }
        for (c, entries) in &other.counters {
            for (v, d) in entries {
                self.add(*c, *v, *d);
            }
        }
        self.join_collections(other);
    }

    fn join_collections(&mut self, other: &RowState) {
        for (c, elems) in &other.sets {
            for e in elems.values() {
                for a in &e.adds {
                    self.set_add(*c, *a, &e.value);
                }
                if !e.seen.is_empty() {
                    self.join_seen(*c, e);
                }
            }
        }
        for (c, keys) in &other.maps {
            for (k, (v, x)) in keys {
                self.map_write(*c, *v, k, x.as_ref());
            }
        }
    }

    /// Joins what removals of `e` observed into this row's element.
    fn join_seen(&mut self, col: u32, e: &Elem) {
        if self.purged {
            return;
        }
        let seen = e.seen.iter().map(|(a, s)| (*a, *s));
        self.elem(col, &e.value).observe(seen);
    }

    /// Every version of a write the row holds: cells, counter entries, set adds, map keys, the
    /// tombstone.
    pub fn versions(&self) -> impl Iterator<Item = &Version> {
        (self.cells.values().map(|(v, _)| v))
            .chain(self.tombstone.as_ref())
            .chain(self.counters.values().flat_map(|e| e.keys()))
            .chain(
                self.sets
                    .values()
                    .flat_map(|m| m.values().flat_map(|e| &e.adds)),
            )
            .chain(self.maps.values().flat_map(|m| m.values().map(|(v, _)| v)))
    }

    /// Whether a SET or MAP column holds something live.
    fn collections_live(&self) -> bool {
        (self.sets.values()).any(|m| m.values().any(|e| !e.adds.is_empty()))
            || (self.maps.values()).any(|m| m.values().any(|(_, x)| x.is_some()))
    }

    /// A row exists if it is not purged and has a write newer than its tombstone; additions to
    /// a counter alone do not revive a deleted row.
    pub fn is_live(&self) -> bool {
        !self.purged
            && (!self.cells.is_empty()
                || self.collections_live()
                || (self.tombstone.is_none() && !self.counters.is_empty()))
    }

    /// Column values in schema order (NULL for unset LWW columns, the sum for counters).
    pub fn values(&self, schema: &TableSchema) -> Vec<Value> {
        schema
            .columns
            .iter()
            .enumerate()
            .map(|(i, (_, kind))| match kind {
                ColumnKind::Lww => self
                    .cells
                    .get(&(i as u32))
                    .map_or(Value::Null, |(_, v)| v.clone()),
                ColumnKind::Counter => Value::Integer(
                    self.counters
                        .get(&(i as u32))
                        .map_or(0, |e| e.values().fold(0i64, |a, d| a.wrapping_add(*d))),
                ),
                ColumnKind::Set => Value::Text(self.set_text(i as u32)),
                ColumnKind::Map => Value::Text(self.map_text(i as u32)),
            })
            .collect()
    }

    /// A SET column's JSON array text: its elements in `cairn_value::coll::elem_cmp` order.
    pub fn set_text(&self, col: u32) -> String {
        let mut live: Vec<&Value> = (self.sets.get(&col).into_iter())
            .flat_map(|m| m.values().filter(|e| !e.adds.is_empty()).map(|e| &e.value))
            .collect();
        live.sort_by(|a, b| cairn_value::coll::elem_cmp(a, b));
        cairn_value::coll::set_text(live.into_iter())
    }

    /// A MAP column's JSON object text: its keys in UTF-8 byte order.
    pub fn map_text(&self, col: u32) -> String {
        let keys = self.maps.get(&col).into_iter().flat_map(|m| m.iter());
        cairn_value::coll::map_text(keys.filter_map(|(k, (_, x))| Some((k.as_str(), x.as_ref()?))))
    }

    /// The version of the earliest live write: the row's age for unique-constraint resolution.
    pub fn created(&self) -> Option<Version> {
        let c = self.cells.values().map(|(v, _)| *v).min();
        let a = self.counters.values().flat_map(|e| e.keys().copied()).min();
        let s = (self.sets.values().flat_map(|m| m.values()))
            .filter_map(|e| e.adds.first().copied())
            .min();
        let m = (self.maps.values().flat_map(|m| m.values()))
            .filter(|(_, x)| x.is_some())
            .map(|(v, _)| *v)
            .min();
        [c, a, s, m].into_iter().flatten().min()
    }

    pub fn encode(&self, w: &mut Writer) {
        let coll = !self.sets.is_empty() || !self.maps.is_empty();
        let flags = u8::from(self.purged)
            | (u8::from(self.tombstone.is_some()) << 1)
            | (u8::from(coll) << 2);
        w.u8(flags);
        if let Some(t) = &self.tombstone {
            t.encode(w);
        }
        w.varint(self.cells.len() as u64);
        for (c, (v, value)) in &self.cells {
            w.varint(u64::from(*c));
            v.encode(w);
            w.value(value);
        }
        w.varint(self.counters.len() as u64);
        for (c, entries) in &self.counters {
            w.varint(u64::from(*c));
            w.varint(entries.len() as u64);
            for (v, d) in entries {
                v.encode(w);
                w.zigzag(*d);
            }
        }
        if coll {
            self.encode_collections(w);
        }
    }

    /// The SET and MAP columns (row flag bit2): `varint nsets`, nsets x (`varint col`, `varint
    /// n`, n x (`value`, `varint nadds`, nadds x `version`, `varint nseen`, nseen x (`author`,
    /// `varint seq`, `varint idx`))), `varint nmaps`, nmaps x (`varint col`, `varint n`, n x
    /// (`text key`, `version`, `u8 present`, `value` if present)).
    fn encode_collections(&self, w: &mut Writer) {
        w.varint(self.sets.len() as u64);
        for (c, elems) in &self.sets {
            w.varint(u64::from(*c));
            w.varint(elems.len() as u64);
            for e in elems.values() {
                w.value(&e.value);
                w.varint(e.adds.len() as u64);
                for v in &e.adds {
                    v.encode(w);
                }
                w.varint(e.seen.len() as u64);
                for (a, (seq, idx)) in &e.seen {
                    w.raw(&a.0);
                    w.varint(*seq);
                    w.varint(u64::from(*idx));
                }
            }
        }
        w.varint(self.maps.len() as u64);
        for (c, keys) in &self.maps {
            w.varint(u64::from(*c));
            w.varint(keys.len() as u64);
            for (k, (v, x)) in keys {
                w.bytes(k.as_bytes());
                v.encode(w);
                w.u8(u8::from(x.is_some()));
                if let Some(x) = x {
                    w.value(x);
                }
            }
        }
    }

    fn decode_collections(&mut self, r: &mut Reader) -> Result<()> {
        let n = r.count(2, 1 << 20)?;
        for _ in 0..n {
            let c = col(r.varint()?)?;
            let m = r.count(3, 1 << 24)?;
            for _ in 0..m {
                let value = r.value()?;
                if !cairn_value::coll::fits(&value) {
                    return Err(Error::Malformed("a set element is a BLOB or NaN".into()));
                }
                // A version is at least 42 bytes; an observed chain 34.
                let k = r.count(42, 1 << 24)?;
                for _ in 0..k {
                    let v = Version::decode(r)?;
                    self.set_add(c, v, &value);
                }
                let k = r.count(34, 1 << 20)?;
                let mut e = Elem {
                    value,
                    adds: Default::default(),
                    seen: BTreeMap::new(),
                };
                for _ in 0..k {
                    let a = AuthorId(r.array()?);
                    let seq = r.varint()?;
                    let idx = u32::try_from(r.varint()?)
                        .map_err(|_| Error::Malformed("op index out of range".into()))?;
                    e.seen.insert(a, (seq, idx));
                }
                if !e.seen.is_empty() {
                    self.join_seen(c, &e);
                }
            }
        }
        let n = r.count(2, 1 << 20)?;
        for _ in 0..n {
            let c = col(r.varint()?)?;
            let m = r.count(43, 1 << 24)?;
            for _ in 0..m {
                let k = r.text()?;
                let v = Version::decode(r)?;
                let x = match r.u8()? {
                    0 => None,
                    1 => Some(r.value()?),
                    _ => return Err(Error::Malformed("bad map entry flag".into())),
                };
                if x.as_ref().is_some_and(|x| !cairn_value::coll::fits(x)) {
                    return Err(Error::Malformed("a map value is a BLOB or NaN".into()));
                }
                self.map_write(c, v, &k, x.as_ref());
            }
        }
        Ok(())
    }

    /// Decodes a row and rebuilds it by joining, so a hostile encoding cannot produce a state
    /// the rules could not (cells under the tombstone are dropped, and so on).
    pub fn decode(r: &mut Reader) -> Result<RowState> {
        let flags = r.u8()?;
        if flags > 7 {
            return Err(Error::Malformed("bad row flags".into()));
        }
        let tombstone = if flags & 2 != 0 {
            Some(Version::decode(r)?)
        } else {
            None
        };
        let mut row = RowState::default();
        if let Some(t) = tombstone {
            if flags & 1 != 0 {
                row.purge(t);
            } else {
                row.delete(t);
            }
        } else if flags & 1 != 0 {
            return Err(Error::Malformed("purged row without tombstone".into()));
        }
        let n = r.count(43, 1 << 20)?;
        for _ in 0..n {
            let c = col(r.varint()?)?;
            let v = Version::decode(r)?;
            let value = r.value()?;
            row.set_cell(c, v, value);
        }
        let n = r.count(2, 1 << 20)?;
        for _ in 0..n {
            let c = col(r.varint()?)?;
            let m = r.count(43, 1 << 24)?;
            for _ in 0..m {
                let v = Version::decode(r)?;
                let d = r.zigzag()?;
                row.add(c, v, d);
            }
        }
        if flags & 4 != 0 {
            row.decode_collections(r)?;
        }
        Ok(row)
    }
}

fn col(v: u64) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Malformed("column index out of range".into()))
}

/// Where merged rows live. The in-memory `MemoryRows` is the model; the SQL layer implements it
/// over its tables (the state's versions in hidden columns or a side table).
pub trait RowStore {
    /// Runs `f` on the row's state (a default one if the row is new) and keeps the result.
    fn update(&mut self, key: &RowKey, f: &mut dyn FnMut(&mut RowState));
    /// A record of `ops` ops is about to be applied (a store may make room at once).
    fn expect_ops(&mut self, _ops: usize) {}
    /// [`RowStore::update`] given the key to keep (a store may save a copy).
    fn update_owned(&mut self, key: RowKey, f: &mut dyn FnMut(&mut RowState)) {
        self.update(&key, f)
    }
    fn get(&self, key: &RowKey) -> Option<RowState>;
    /// Every row, in key order.
    fn scan(&self, f: &mut dyn FnMut(&RowKey, &RowState));
    /// Replaces every row with those of `base` (none if None): the rows are rebuilt from it when
    /// records are taken back (a fork, a revocation).
    fn reset(&mut self, base: Option<&MemoryRows>);
    /// Where the host keeps released history (a relay's store), if it does (`replica::source`).
    fn block_source(&mut self) -> Option<&mut dyn crate::replica::BlockSource> {
        None
    }
    /// The scopes other than `key.scope` holding a row of its table with its primary key (sec.
    /// 7, "One row, one owner"). A store may name a scope that turns out to hold none.
    fn other_scopes(&self, key: &RowKey) -> Vec<ScopeId> {
        let mut out = Vec::new();
        self.scan(&mut |k, _| {
            if k.table == key.table && k.pk == key.pk && k.scope != key.scope {
                out.push(k.scope.clone());
            }
        });
        out
    }
    /// Whether a scope other than `scope` holds rows of `table` (asked at every local commit).
    fn table_elsewhere(&self, table: &str, scope: &ScopeId) -> bool {
        self.table_scopes(table).iter().any(|s| s != scope)
    }
    /// The scopes holding rows of `table`.
    fn table_scopes(&self, table: &str) -> Vec<ScopeId> {
        let mut out: Vec<ScopeId> = Vec::new();
        self.scan(&mut |k, _| {
            if k.table == table && !out.contains(&k.scope) {
                out.push(k.scope.clone());
            }
        });
        out
    }
}

/// The in-memory model. A hash map: replication applies an op per record, and with keys that
/// share long prefixes (a table, a scope, uuid7 ids) a search tree spends its time comparing
/// them; scans, rare, sort.
#[derive(Debug, Clone, Default)]
pub struct MemoryRows {
    rows: HashMap<RowKey, RowState>,
    /// Where each key's rows are (`RowStore::other_scopes`): every key of `rows` is in it.
    index: KeyIndex,
}

impl MemoryRows {
    /// Keeps `row` under `key` (a host loading saved rows).
    pub fn insert(&mut self, key: RowKey, row: RowState) {
        let added = (!self.rows.contains_key(&key)).then(|| self.index.add(&key));
        self.rows.insert(key.clone(), row);
        if added == Some(Added::KeyTable) {
            self.key_table(&key.table);
        }
    }
    /// Indexes the keys of `table`, which has rows in a second scope from now on.
    #[cold]
    fn key_table(&mut self, table: &str) {
        for k in self.rows.keys().filter(|k| k.table == table) {
            self.index.add_key(k);
        }
    }
    /// Every row, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&RowKey, &RowState)> {
        self.rows.iter()
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    /// The row under `key`, not copied.
    pub fn row(&self, key: &RowKey) -> Option<&RowState> {
        self.rows.get(key)
    }
}

impl RowStore for MemoryRows {
    fn reset(&mut self, base: Option<&MemoryRows>) {
        *self = base.cloned().unwrap_or_default();
    }
    fn update(&mut self, key: &RowKey, f: &mut dyn FnMut(&mut RowState)) {
        if let Some(row) = self.rows.get_mut(key) {
            f(row);
        } else {
            let mut row = RowState::default();
            f(&mut row);
            // A redacted op on a row never seen leaves nothing; keep no empty entry for it.
            if row != RowState::default() {
                self.rows.insert(key.clone(), row);
                if self.index.add(key) == Added::KeyTable {
                    self.key_table(&key.table);
                }
            }
        }
    }
    fn other_scopes(&self, key: &RowKey) -> Vec<ScopeId> {
        self.index.others(key)
    }
    fn table_scopes(&self, table: &str) -> Vec<ScopeId> {
        self.index.table_scopes(table)
    }
    fn table_elsewhere(&self, table: &str, scope: &ScopeId) -> bool {
        self.index.table_elsewhere(table, scope)
    }
    fn expect_ops(&mut self, ops: usize) {
        // Room at once for a large record into a smaller map (a first bulk load, say) instead
        // of rehashing every key at each doubling; at most the record's size, and not for a
        // record into a map already as large (mostly updates then).
        if self.rows.len() < ops {
            self.rows.reserve(ops);
        }
    }
    fn update_owned(&mut self, key: RowKey, f: &mut dyn FnMut(&mut RowState)) {
        // One hash and no copy of the key, for a row new or not.
        match self.rows.entry(key) {
            Entry::Occupied(mut e) => f(e.get_mut()),
            Entry::Vacant(e) => {
                let mut row = RowState::default();
                f(&mut row);
                // As in `update`: no empty entry for a row never seen.
                if row != RowState::default() {
                    if self.index.add(e.key()) == Added::KeyTable {
                        let table = e.key().table.clone();
                        e.insert(row);
                        self.key_table(&table);
                    } else {
                        e.insert(row);
                    }
                }
            }
        }
    }
    fn get(&self, key: &RowKey) -> Option<RowState> {
        self.rows.get(key).cloned()
    }
    fn scan(&self, f: &mut dyn FnMut(&RowKey, &RowState)) {
        let mut keys: Vec<&RowKey> = self.rows.keys().collect();
        keys.sort();
        for k in keys {
            f(k, &self.rows[k]);
        }
    }
}

/// A row as a query would see it.
#[derive(Debug, Clone, PartialEq)]
pub struct VisibleRow {
    pub key: RowKey,
    pub pk: Vec<Value>,
    pub values: Vec<Value>,
}

/// The rows of `table` a query sees, in key order, with unique constraints resolved: live rows
/// sorted by (age, pk) each stay visible unless an earlier visible row holds the same non-NULL
/// values in one of the unique column sets. Also returns the rows hidden that way.
pub fn visible_rows<S: RowStore>(
    store: &S,
    schema: &TableSchema,
) -> (Vec<VisibleRow>, Vec<VisibleRow>) {
    let mut live: Vec<(crate::owner::Age, VisibleRow)> = Vec::new();
    store.scan(&mut |k, row| {
        if k.table == schema.name && row.is_live() {
            live.push((
                crate::owner::age(row),
                VisibleRow {
                    key: k.clone(),
                    pk: k.pk_values(),
                    values: row.values(schema),
                },
            ));
        }
    });
    let (mut shown, mut hidden) = (Vec::new(), Vec::new());
    // One row per key, when the table has rows in several scopes (sec. 7, "One row, one
    // owner"); unique constraints then hold among the rows shown.
    if store.table_scopes(&schema.name).len() > 1 {
        live.sort_by(|a, b| (&a.1.key.pk, &a.1.key.scope).cmp(&(&b.1.key.pk, &b.1.key.scope)));
        let mut rest = Vec::with_capacity(live.len());
        let mut rows = live.into_iter().peekable();
        while let Some(first) = rows.next() {
            let mut same = vec![first];
            while let Some(next) = rows.next_if(|r| r.1.key.pk == same[0].1.key.pk) {
                same.push(next);
            }
            if same.len() == 1 {
                rest.extend(same);
                continue;
            }
            let owner = resolve(same.iter().map(|(c, r)| (*c, r.key.clone())).collect());
            for row in same {
                if owner.shown.as_ref() == Some(&row.1.key) {
                    rest.push(row);
                } else {
                    hidden.push(row.1);
                }
            }
        }
        live = rest;
    }
    if schema.unique.is_empty() {
        shown.extend(live.into_iter().map(|(_, r)| r));
        shown.sort_by(|a, b| a.key.cmp(&b.key));
        return (shown, hidden);
    }
    // Unique conflicts rank rows by their first write alone.
    live.sort_by(|a, b| {
        (a.0 .1, &a.1.key.pk, &a.1.key.scope).cmp(&(b.0 .1, &b.1.key.pk, &b.1.key.scope))
    });
    let mut taken: HashMap<(usize, Vec<Vec<u8>>), ()> = HashMap::new();
    for (_, row) in live {
        let keys: Vec<(usize, Vec<Vec<u8>>)> = schema
            .unique
            .iter()
            .enumerate()
            .filter_map(|(i, cols)| {
                let vals: Vec<&Value> = cols
                    .iter()
                    .map(|c| row.values.get(*c as usize).unwrap_or(&Value::Null))
                    .collect();
                if vals.iter().any(|v| v.is_null()) {
                    None
                } else {
                    Some((i, vals.into_iter().map(value_bytes).collect()))
                }
            })
            .collect();
        if keys.iter().any(|k| taken.contains_key(k)) {
            hidden.push(row);
        } else {
            for k in keys {
                taken.insert(k, ());
            }
            shown.push(row);
        }
    }
    shown.sort_by(|a, b| a.key.cmp(&b.key));
    (shown, hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(hlc: u64, a: u8) -> Version {
        Version {
            hlc,
            author: AuthorId([a; 32]),
            seq: hlc,
            idx: 0,
        }
    }
    fn set(c: u32, x: i64) -> Op {
        Op::new(
            "t",
            vec![Value::Integer(1)],
            Payload::Set(vec![(c, Value::Integer(x))]),
        )
    }
    fn op(p: Payload) -> Op {
        Op::new("t", vec![Value::Integer(1)], p)
    }

    #[test]
    fn lww_tie_breaks_on_author_and_delete_revival() {
        let mut a = RowState::default();
        a.apply(&set(0, 1), v(5, 2));
        a.apply(&set(0, 2), v(5, 1));
        assert_eq!(a.cells[&0].1, Value::Integer(1));
        a.apply(&op(Payload::Add(1, 10)), v(4, 1));
        a.apply(&op(Payload::Delete), v(6, 1));
        assert!(!a.is_live());
        a.apply(&op(Payload::Add(1, 3)), v(7, 1));
        assert!(!a.is_live(), "an addition alone does not revive");
        a.apply(&set(2, 9), v(8, 1));
        assert!(a.is_live());
        let schema = TableSchema::new("t", 1).lww("a").counter("n").lww("b");
        assert_eq!(
            a.values(&schema),
            vec![Value::Null, Value::Integer(3), Value::Integer(9)]
        );
    }

    #[test]
    fn row_encoding_round_trips() {
        let mut a = RowState::default();
        a.apply(&set(0, 1), v(5, 2));
        a.apply(&op(Payload::Delete), v(6, 1));
        a.apply(&set(1, 1), v(7, 2));
        a.apply(&op(Payload::Add(2, -4)), v(9, 3));
        let mut w = Writer::new();
        a.encode(&mut w);
        let b = RowState::decode(&mut Reader::new(&w.buf)).expect("invariant: decodes");
        assert_eq!(a, b);
    }

    fn elem_op(p: Payload) -> Op {
        op(p)
    }

    #[test]
    fn a_set_keeps_an_add_its_removal_did_not_observe() {
        let schema = TableSchema::new("t", 1).set("s").map("m");
        let x = || Value::Text("x".into());
        // Author 1 adds x at seq 1; author 2, having seen author 1's chain up to seq 1, removes
        // it at seq 3; author 1 concurrently adds x again at seq 2.
        let add1 = (elem_op(Payload::SetAdd(0, x())), v(1, 1));
        let mut rm_v = v(9, 2);
        rm_v.seq = 3;
        let rm = (
            elem_op(Payload::SetRemove(0, x(), vec![(AuthorId([1; 32]), 1)])),
            rm_v,
        );
        let mut add2_v = v(5, 1);
        add2_v.seq = 2;
        let add2 = (elem_op(Payload::SetAdd(0, x())), add2_v);
        let orders = [
            [&add1, &rm, &add2],
            [&rm, &add2, &add1],
            [&add2, &rm, &add1],
        ];
        let mut texts = Vec::new();
        for order in orders {
            let mut r = RowState::default();
            for (o, ver) in order {
                r.apply(o, *ver);
            }
            texts.push(r.values(&schema)[0].clone());
        }
        assert!(
            texts.iter().all(|t| *t == Value::Text(r#"["x"]"#.into())),
            "{texts:?}"
        );
        // Without the concurrent add, the removal wins whatever the order.
        for order in [[&add1, &rm], [&rm, &add1]] {
            let mut r = RowState::default();
            for (o, ver) in order {
                r.apply(o, *ver);
            }
            assert_eq!(r.values(&schema)[0], Value::Text("[]".into()));
        }
    }

    #[test]
    fn map_keys_merge_one_by_one_and_collections_round_trip() {
        let schema = TableSchema::new("t", 1).set("s").map("m");
        let mut a = RowState::default();
        let k = |s: &str| s.to_string();
        a.apply(&op(Payload::MapSet(1, k("b"), Value::Integer(1))), v(5, 1));
        a.apply(&op(Payload::MapSet(1, k("a"), Value::Real(0.5))), v(6, 2));
        a.apply(&op(Payload::MapSet(1, k("b"), Value::Integer(2))), v(4, 3));
        a.apply(&op(Payload::MapRemove(1, k("c"))), v(7, 1));
        a.apply(&op(Payload::MapSet(1, k("c"), Value::Null)), v(6, 1));
        a.apply(&op(Payload::SetAdd(0, Value::Integer(2))), v(3, 1));
        a.apply(&op(Payload::SetAdd(0, Value::Null)), v(3, 2));
        a.apply(
            &op(Payload::SetRemove(
                0,
                Value::Integer(9),
                vec![(AuthorId([3; 32]), 4)],
            )),
            v(3, 1),
        );
        assert_eq!(
            a.values(&schema),
            vec![
                Value::Text("[null,2]".into()),
                Value::Text(r#"{"a":0.5,"b":1}"#.into())
            ]
        );
        let mut w = Writer::new();
        a.encode(&mut w);
        let b = RowState::decode(&mut Reader::new(&w.buf)).expect("invariant: decodes");
        assert_eq!(a, b);
        // A delete clears what it is newer than; a later key revives the row.
        a.apply(&op(Payload::Delete), v(8, 1));
        assert!(!a.is_live());
        a.apply(&op(Payload::MapSet(1, k("z"), Value::Integer(1))), v(9, 1));
        assert!(a.is_live());
        assert_eq!(a.values(&schema)[1], Value::Text(r#"{"z":1}"#.into()));
    }
}
