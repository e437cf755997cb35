//! [`Expected`]: the index `verify` builds beside the database to compare with the stored one.

use crate::error::{Error, Result};
use crate::storage::{Cursor, StorageCore, TreeId};
use cairn_store::hash::FastMap;
use std::ops::Bound;

/// Entries by tree and key, written by `index_row` through the few calls it makes (`get`,
/// `put`, `delete`). Not the in-memory store (`storage::Memory`): that would link its
/// `BTreeMap`s, their B-tree code and its undo log into every module for this one check. The map
/// is of the engine's most common layout (bytes to `usize`, as `KeySet`), whose code is there
/// already.
#[derive(Default)]
pub(super) struct Expected {
    at: FastMap<Vec<u8>, usize>,
    /// Each entry's tree, key and value (None once deleted), where `at` points.
    entries: Vec<(TreeId, Vec<u8>, Option<Vec<u8>>)>,
}

fn slot(tree: TreeId, key: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(8 + key.len());
    s.extend_from_slice(&tree.to_be_bytes());
    s.extend_from_slice(key);
    s
}

impl Expected {
    /// Whether `tree` holds exactly `stored` (its entries, each key once).
    pub(super) fn same(&self, tree: TreeId, stored: &[(Vec<u8>, Vec<u8>)]) -> bool {
        let live = self
            .entries
            .iter()
            .filter(|(t, _, v)| *t == tree && v.is_some())
            .count();
        live == stored.len()
            && stored.iter().all(|(k, v)| {
                self.at.get(&slot(tree, k)).is_some_and(|&i| {
                    self.entries
                        .get(i)
                        .and_then(|e| e.2.as_deref())
                        .is_some_and(|x| x == v.as_slice())
                })
            })
    }
}

#[cold]
#[inline(never)]
fn unsupported() -> Error {
    Error::Invalid("not in the full-text check's expected index".into())
}

impl StorageCore for Expected {
    fn begin(&mut self) -> Result<()> {
        Err(unsupported())
    }
    fn commit(&mut self) -> Result<()> {
        Err(unsupported())
    }
    fn rollback(&mut self) -> Result<()> {
        Err(unsupported())
    }
    fn savepoint(&mut self) -> Result<u64> {
        Err(unsupported())
    }
    fn rollback_to(&mut self, _sp: u64) -> Result<()> {
        Err(unsupported())
    }
    fn create_tree(&mut self, _tree: TreeId) -> Result<()> {
        Err(unsupported())
    }
    fn drop_tree(&mut self, _tree: TreeId) -> Result<()> {
        Err(unsupported())
    }
    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .at
            .get(&slot(tree, key))
            .and_then(|&i| self.entries.get(i))
            .and_then(|e| e.2.clone()))
    }
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        let s = slot(tree, key);
        match self.at.get(&s) {
            Some(&i) => {
                if let Some(e) = self.entries.get_mut(i) {
                    e.2 = Some(value.to_vec());
                }
            }
            None => {
                self.at.insert(s, self.entries.len());
                self.entries
                    .push((tree, key.to_vec(), Some(value.to_vec())));
            }
        }
        Ok(())
    }
    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool> {
        let e = self
            .at
            .get(&slot(tree, key))
            .and_then(|&i| self.entries.get_mut(i));
        Ok(e.is_some_and(|e| e.2.take().is_some()))
    }
    fn scan<'a>(
        &'a self,
        _tree: TreeId,
        _lower: Bound<&[u8]>,
        _upper: Bound<&[u8]>,
        _reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        Err(unsupported())
    }
    fn last_key(&self, _tree: TreeId) -> Result<Option<Vec<u8>>> {
        Err(unsupported())
    }
}

crate::storage::refuse_bulk_storage!(Expected, unsupported);

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&[u8], &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
        entries
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    }

    #[test]
    fn holds_what_was_put_and_not_deleted_by_tree() {
        let mut e = Expected::default();
        e.put(1, b"a", b"1").unwrap();
        e.put(1, b"b", b"2").unwrap();
        e.put(2, b"a", b"9").unwrap();
        e.put(1, b"a", b"3").unwrap();
        assert_eq!(e.get(1, b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(e.get(3, b"a").unwrap(), None);
        assert!(e.same(1, &list(&[(b"a", b"3"), (b"b", b"2")])));
        assert!(e.same(2, &list(&[(b"a", b"9")])));
        assert!(e.delete(1, b"b").unwrap());
        assert!(!e.delete(1, b"b").unwrap());
        assert!(e.same(1, &list(&[(b"a", b"3")])));
        e.put(1, b"b", b"4").unwrap();
        assert!(e.same(1, &list(&[(b"a", b"3"), (b"b", b"4")])));
    }

    #[test]
    fn differs_by_a_value_a_missing_entry_or_an_extra_one() {
        let mut e = Expected::default();
        e.put(1, b"a", b"1").unwrap();
        e.put(1, b"b", b"2").unwrap();
        e.delete(1, b"b").unwrap();
        assert!(!e.same(1, &list(&[(b"a", b"2")])));
        assert!(!e.same(1, &list(&[])));
        assert!(!e.same(1, &list(&[(b"a", b"1"), (b"b", b"2")])));
        // The same key in another tree is not this tree's.
        assert!(!e.same(2, &list(&[(b"a", b"1")])));
        assert!(e.same(2, &list(&[])));
        // A key that runs into the tree id of another does not alias it.
        e.put(1, b"", b"x").unwrap();
        assert!(e.same(1, &list(&[(b"", b"x"), (b"a", b"1")])));
    }
}
