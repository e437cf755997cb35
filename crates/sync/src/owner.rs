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
use std::hash::BuildHasher;

/// Which scopes hold rows of each `(table, pk)` and of each table. Keys are kept as a keyed
/// 64-bit hash of `(table, pk)` (peers choose those bytes): a hash two keys share only makes a
/// caller look for a row that is not there.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyIndex {
    hasher: RandomState,
    /// Scopes by number, and each one's number: a key's entry holds numbers, not scopes.
    scopes: Vec<ScopeId>,
    numbers: HashMap<ScopeId, u32>,
    /// The number of the scope of the last row added (rows come in runs of one scope).
    last: Option<u32>,
    keys: HashMap<u64, Slot>,
    tables: HashMap<String, Vec<u32>>,
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
        if let Some(n) = self.last.filter(|&n| self.scopes[n as usize] == *scope) {
            return n;
        }
        let n = match self.numbers.get(scope) {
            Some(&n) => n,
            None => {
                let n = self.scopes.len() as u32;
                self.scopes.push(scope.clone());
                self.numbers.insert(scope.clone(), n);
                n
            }
        };
        self.last = Some(n);
        n
    }

    fn hash(&self, table: &str, pk: &[u8]) -> u64 {
        self.hasher.hash_one((table.as_bytes(), pk))
    }

    /// Notes a row the store holds from now on.
    pub(crate) fn add(&mut self, key: &RowKey) {
        let n = self.number(&key.scope);
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
        match self.tables.get_mut(key.table.as_str()) {
            Some(v) => {
                if !v.contains(&n) {
                    v.push(n);
                }
            }
            None => {
                self.tables.insert(key.table.clone(), vec![n]);
            }
        }
    }

    /// Scopes other than `key.scope` that may hold a row with its table and key.
    pub(crate) fn others(&self, key: &RowKey) -> Vec<ScopeId> {
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
        (self.tables.get(table).into_iter().flatten()).any(|&n| self.scopes[n as usize] != *scope)
    }

    pub(crate) fn table_scopes(&self, table: &str) -> Vec<ScopeId> {
        (self.tables.get(table).into_iter().flatten())
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
