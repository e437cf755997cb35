//! One row, one owner (docs/sync.md sec. 7). Merged rows are kept per `(table, scope, pk)`, but
//! a replicated SQL table has one row per primary key: when rows of one table with one key live
//! in several scopes, [`key_owner`] decides, alike on every replica, which of them the table
//! shows. Among live rows in the scopes of one owner, the first written; among rows in the
//! scopes of different owners, none: no key can write another owner's row, nor replace it by
//! writing the same key in a scope of its own. [`KeyIndex`] finds, for a row, the other scopes
//! holding its key without a scan.

use crate::merge::{RowKey, RowState, RowStore, Version};
use crate::scope::ScopeId;
use std::collections::hash_map::{Entry, RandomState};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// Which scopes hold rows of each table and, for a table with rows in more than one scope, of
/// each of its keys (a table of one scope, the common case, pays for no key index). Keys are
/// kept as a keyed 64-bit hash of `(table, pk)` (peers choose those bytes): a hash two keys
/// share only makes a caller look for a row that is not there.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyIndex {
    hasher: RandomState,
    /// Scopes by number, and each one's number: a key's entry holds numbers, not scopes.
    scopes: Vec<ScopeId>,
    numbers: HashMap<ScopeId, u32>,
    tables: HashMap<String, TableScopes>,
    /// The table and scope of the last row added, and whether its table is keyed (rows come
    /// in runs of one table and scope).
    last: Option<(String, u32, bool)>,
    keys: HashMap<u64, Slot, BuildHasherDefault<Prehashed>>,
}

#[derive(Debug, Clone, Default)]
struct TableScopes {
    scopes: Vec<u32>,
    /// Whether the table's keys are in `KeyIndex::keys` (from its second scope on).
    keyed: bool,
}

/// What [`KeyIndex::add`] asks of the store.
#[derive(Debug, PartialEq)]
pub(crate) enum Added {
    Done,
    /// The table has rows in a second scope from now on: the store gives every row of the
    /// table it holds to [`KeyIndex::add_key`] (once).
    KeyTable,
}

/// The hasher of `KeyIndex::keys`, whose keys are hashes already (keyed ones).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The scopes holding a key: almost always one.
#[derive(Debug, Clone)]
enum Slot {
    One(u32),
    /// Boxed, so that the common entry stays two words.
    Many(Box<[u32]>),
}

impl KeyIndex {
    fn number(&mut self, scope: &ScopeId) -> u32 {
        match self.numbers.get(scope) {
            Some(&n) => n,
            None => {
                let n = self.scopes.len() as u32;
                self.scopes.push(scope.clone());
                self.numbers.insert(scope.clone(), n);
                n
            }
        }
    }

    fn hash(&self, table: &str, pk: &[u8]) -> u64 {
        self.hasher.hash_one((table.as_bytes(), pk))
    }

    /// Notes a row the store holds from now on.
    pub(crate) fn add(&mut self, key: &RowKey) -> Added {
        if let Some((table, n, keyed)) = &self.last {
            if *table == key.table && self.scopes[*n as usize] == key.scope {
                if *keyed {
                    let n = *n;
                    self.add_hash(key, n);
                }
                return Added::Done;
            }
        }
        let n = self.number(&key.scope);
        let t = match self.tables.get_mut(key.table.as_str()) {
            Some(t) => t,
            None => self.tables.entry(key.table.clone()).or_default(),
        };
        if !t.scopes.contains(&n) {
            t.scopes.push(n);
        }
        let added = if t.scopes.len() > 1 && !t.keyed {
            t.keyed = true;
            Added::KeyTable
        } else {
            if t.keyed {
                self.add_hash(key, n);
            }
            Added::Done
        };
        let keyed = self.tables[key.table.as_str()].keyed;
        match &mut self.last {
            Some(last) => {
                last.0.clone_from(&key.table);
                (last.1, last.2) = (n, keyed);
            }
            None => self.last = Some((key.table.clone(), n, keyed)),
        }
        added
    }

    /// Notes a row of a keyed table held before it was keyed (see [`Added::KeyTable`]).
    pub(crate) fn add_key(&mut self, key: &RowKey) {
        let n = self.number(&key.scope);
        self.add_hash(key, n);
    }

    fn add_hash(&mut self, key: &RowKey, n: u32) {
        let h = self.hash(&key.table, &key.pk);
        match self.keys.entry(h) {
            Entry::Vacant(e) => {
                e.insert(Slot::One(n));
            }
            Entry::Occupied(mut e) => match e.get_mut() {
                Slot::One(m) if *m == n => {}
                Slot::One(m) => {
                    let m = *m;
                    e.insert(Slot::Many(Box::new([m, n])));
                }
                Slot::Many(v) => {
                    if !v.contains(&n) {
                        *v = v.iter().copied().chain([n]).collect();
                    }
                }
            },
        }
    }

    /// Scopes other than `key.scope` that may hold a row with its table and key.
    pub(crate) fn others(&self, key: &RowKey) -> Vec<ScopeId> {
        if !self.tables.get(key.table.as_str()).is_some_and(|t| t.keyed) {
            return Vec::new();
        }
        match self.keys.get(&self.hash(&key.table, &key.pk)) {
            None | Some(Slot::One(_)) => Vec::new(),
            Some(Slot::Many(v)) => (v.iter())
                .map(|&n| &self.scopes[n as usize])
                .filter(|s| **s != key.scope)
                .cloned()
                .collect(),
        }
    }

    pub(crate) fn table_elsewhere(&self, table: &str, scope: &ScopeId) -> bool {
        (self.tables.get(table).into_iter().flat_map(|t| &t.scopes))
            .any(|&n| self.scopes[n as usize] != *scope)
    }

    pub(crate) fn table_scopes(&self, table: &str) -> Vec<ScopeId> {
        (self.tables.get(table).into_iter().flat_map(|t| &t.scopes))
            .map(|&n| self.scopes[n as usize].clone())
            .collect()
    }
}

/// Which row a table shows for one primary key: `shown` (none when no scope holds it live, or
/// scopes of different owners do), and the live rows of other scopes it hides.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KeyOwner {
    pub shown: Option<RowKey>,
    pub hidden: Vec<RowKey>,
}

/// The rule of sec. 7 for `key`'s table and primary key, over the rows of `store`.
pub fn key_owner<S: RowStore + ?Sized>(store: &S, key: &RowKey) -> KeyOwner {
    let mut live: Vec<(Age, RowKey)> = Vec::new();
    let scopes = std::iter::once(key.scope.clone()).chain(store.other_scopes(key));
    for scope in scopes {
        let k = RowKey {
            table: key.table.clone(),
            scope,
            pk: key.pk.clone(),
        };
        if let Some(row) = store.get(&k).filter(RowState::is_live) {
            live.push((age(&row), k));
        }
    }
    resolve(live)
}

/// How a live row ranks among rows of one owner's scopes with its key, first first: a row
/// never deleted before one deleted and written again (a row moved to another scope while a
/// device that had not seen the move wrote to it where it was: the moved row, whole, shows
/// rather than the few columns written since), then the earliest written.
pub(crate) type Age = (bool, Option<Version>);

pub(crate) fn age(row: &RowState) -> Age {
    (row.tombstone.is_some(), row.created())
}

/// Decides among the live rows of one key, each with its [`Age`].
pub(crate) fn resolve(mut live: Vec<(Age, RowKey)>) -> KeyOwner {
    if live.len() <= 1 {
        return KeyOwner {
            shown: live.pop().map(|(_, k)| k),
            hidden: Vec::new(),
        };
    }
    let owner = live[0].1.scope.owner;
    if live.iter().any(|(_, k)| k.scope.owner != owner) {
        live.sort_by(|a, b| a.1.scope.cmp(&b.1.scope));
        return KeyOwner {
            shown: None,
            hidden: live.into_iter().map(|(_, k)| k).collect(),
        };
    }
    live.sort_by(|a, b| (a.0, &a.1.scope).cmp(&(b.0, &b.1.scope)));
    let mut keys = live.into_iter().map(|(_, k)| k);
    KeyOwner {
        shown: keys.next(),
        hidden: keys.collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Op, Payload};
    use crate::identity::AuthorId;
    use crate::merge::MemoryRows;
    use cairn_value::Value;

    fn v(hlc: u64, a: u8) -> Version {
        Version {
            hlc,
            author: AuthorId([a; 32]),
            seq: hlc,
            idx: 0,
        }
    }
    fn key(owner: u8, name: &str, pk: i64) -> RowKey {
        RowKey::new(
            "t",
            &ScopeId::new(AuthorId([owner; 32]), name),
            &[Value::Integer(pk)],
        )
    }
    fn set(rows: &mut MemoryRows, k: &RowKey, version: Version) {
        let op = Op::new(
            "t",
            k.pk_values(),
            Payload::Set(vec![(0, Value::Integer(1))]),
        );
        rows.update(k, &mut |r| r.apply(&op, version));
    }
    fn delete(rows: &mut MemoryRows, k: &RowKey, version: Version) {
        let op = Op::new("t", k.pk_values(), Payload::Delete);
        rows.update(k, &mut |r| r.apply(&op, version));
    }

    #[test]
    fn one_owner_s_scopes_show_the_first_written_row() {
        let mut rows = MemoryRows::default();
        let (a, b) = (key(1, "t/l=a", 7), key(1, "t/l=b", 7));
        set(&mut rows, &b, v(20, 2));
        set(&mut rows, &a, v(10, 3));
        assert_eq!(rows.other_scopes(&a), vec![b.scope.clone()]);
        let o = key_owner(&rows, &b);
        assert_eq!((o.shown, o.hidden), (Some(a.clone()), vec![b.clone()]));
        // The first one deleted, the other shows.
        delete(&mut rows, &a, v(30, 3));
        assert_eq!(key_owner(&rows, &a).shown, Some(b.clone()));
        // Another key of the table shares nothing.
        let c = key(1, "t/l=a", 8);
        set(&mut rows, &c, v(5, 1));
        assert_eq!(key_owner(&rows, &c).shown, Some(c));
        assert_eq!(rows.table_scopes("t").len(), 2);
    }

    #[test]
    fn scopes_of_two_owners_hide_the_key_whatever_the_clock_says() {
        let (mine, theirs) = (key(1, "t", 7), key(9, "t", 7));
        // Written later, or claiming to be older: neither replaces the owner's row.
        for claimed in [200, 1] {
            let mut rows = MemoryRows::default();
            set(&mut rows, &mine, v(100, 1));
            set(&mut rows, &theirs, v(claimed, 9));
            let o = key_owner(&rows, &mine);
            assert_eq!(o.shown, None);
            assert_eq!(o.hidden, vec![mine.clone(), theirs.clone()]);
            // A delete in the other owner's scope leaves the owner's row alone.
            delete(&mut rows, &theirs, v(300, 9));
            assert_eq!(key_owner(&rows, &theirs).shown, Some(mine.clone()));
        }
    }
}
