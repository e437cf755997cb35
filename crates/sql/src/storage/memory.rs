//! [`Memory`]: the in-memory store, `BTreeMap`s with an undo log for transactions and
//! savepoints.

use super::{Cursor, Storage, StorageCore, TreeId, SCHEMA_TREE};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::ops::Bound;

type Tree = BTreeMap<Vec<u8>, Vec<u8>>;

/// The root bytes [`Memory`] keeps at most: as many as the paged store's superblock holds with
/// 4 KiB pages.
const MEMORY_ROOT_ROOM: usize = 1024;

enum Undo {
    Put(TreeId, Vec<u8>, Option<Vec<u8>>),
    CreateTree(TreeId),
    /// A dropped tree and its bytes beside it.
    DropTree(TreeId, Tree, Option<Vec<u8>>),
    /// The bytes beside a tree before a `set_tree_meta` (None: none).
    Meta(TreeId, Option<Vec<u8>>),
    /// The root bytes before a `set_root_meta`.
    Root(Vec<u8>),
}

/// Trees in memory, with an undo log for rollback: a write in a transaction logs what it
/// overwrote, and rollback replays the log backwards, so rollback really restores the old state
/// at the cost of the writes made, not of the database size.
#[derive(Default)]
pub struct Memory {
    trees: BTreeMap<TreeId, Tree>,
    /// `Storage::tree_meta`, for the trees that have any.
    metas: BTreeMap<TreeId, Vec<u8>>,
    /// `Storage::root_meta`.
    root: Vec<u8>,
    undo: Option<Vec<Undo>>,
}

impl Memory {
    pub fn new() -> Self {
        let mut trees = BTreeMap::new();
        trees.insert(SCHEMA_TREE, Tree::new());
        Memory {
            trees,
            metas: BTreeMap::new(),
            root: Vec::new(),
            undo: None,
        }
    }

    fn tree(&self, t: TreeId) -> Result<&Tree> {
        self.trees
            .get(&t)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {t} does not exist")))
    }

    fn log(&mut self) -> Result<&mut Vec<Undo>> {
        self.undo
            .as_mut()
            .ok_or_else(|| Error::Transaction("write outside a transaction".into()))
    }

    fn undo_to(&mut self, len: usize) {
        let Some(log) = self.undo.as_mut() else {
            return;
        };
        let tail: Vec<Undo> = log.drain(len..).collect();
        for u in tail.into_iter().rev() {
            match u {
                Undo::Put(t, k, old) => {
                    if let Some(tree) = self.trees.get_mut(&t) {
                        match old {
                            Some(v) => {
                                tree.insert(k, v);
                            }
                            None => {
                                tree.remove(&k);
                            }
                        }
                    }
                }
                Undo::CreateTree(t) => {
                    self.trees.remove(&t);
                    self.metas.remove(&t);
                }
                Undo::DropTree(t, tree, meta) => {
                    self.trees.insert(t, tree);
                    if let Some(m) = meta {
                        self.metas.insert(t, m);
                    }
                }
                Undo::Meta(t, old) => match old {
                    Some(m) => {
                        self.metas.insert(t, m);
                    }
                    None => {
                        self.metas.remove(&t);
                    }
                },
                Undo::Root(old) => self.root = old,
            }
        }
    }
}

struct MemCursor<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>> {
    iter: I,
    cur: Option<(&'a [u8], &'a [u8])>,
}

impl<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>> Cursor for MemCursor<'a, I> {
    fn next(&mut self) -> Result<bool> {
        self.cur = self.iter.next().map(|(k, v)| (k.as_slice(), v.as_slice()));
        Ok(self.cur.is_some())
    }
    fn key(&self) -> &[u8] {
        self.cur.map(|c| c.0).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.cur.map(|c| c.1).unwrap_or(&[])
    }
}

impl StorageCore for Memory {
    fn begin(&mut self) -> Result<()> {
        if self.undo.is_some() {
            return Err(Error::Transaction("a transaction is already open".into()));
        }
        self.undo = Some(Vec::new());
        Ok(())
    }
    fn commit(&mut self) -> Result<()> {
        self.undo
            .take()
            .map(|_| ())
            .ok_or_else(|| Error::Transaction("no transaction is open".into()))
    }
    fn rollback(&mut self) -> Result<()> {
        if self.undo.is_none() {
            return Err(Error::Transaction("no transaction is open".into()));
        }
        self.undo_to(0);
        self.undo = None;
        Ok(())
    }
    fn savepoint(&mut self) -> Result<u64> {
        Ok(self.log()?.len() as u64)
    }
    fn rollback_to(&mut self, sp: u64) -> Result<()> {
        let len = self.log()?.len();
        self.undo_to((sp as usize).min(len));
        Ok(())
    }
    fn create_tree(&mut self, tree: TreeId) -> Result<()> {
        if self.trees.contains_key(&tree) {
            return Err(Error::Invalid(format!(
                "storage: tree {tree} already exists"
            )));
        }
        self.log()?.push(Undo::CreateTree(tree));
        self.trees.insert(tree, Tree::new());
        Ok(())
    }
    fn drop_tree(&mut self, tree: TreeId) -> Result<()> {
        self.log()?;
        let t = self
            .trees
            .remove(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        let meta = self.metas.remove(&tree);
        self.log()?.push(Undo::DropTree(tree, t, meta));
        Ok(())
    }
    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tree(tree)?.get(key).cloned())
    }
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        self.log()?;
        let t = self
            .trees
            .get_mut(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        let old = t.insert(key.to_vec(), value.to_vec());
        self.log()?.push(Undo::Put(tree, key.to_vec(), old));
        Ok(())
    }
    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool> {
        self.log()?;
        let t = self
            .trees
            .get_mut(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        match t.remove(key) {
            Some(old) => {
                self.log()?.push(Undo::Put(tree, key.to_vec(), Some(old)));
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn scan<'a>(
        &'a self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Box<dyn Cursor + 'a>> {
        let t = self.tree(tree)?;
        // BTreeMap::range panics on inverted or doubly-excluded equal bounds; such a range is empty.
        let empty = match (lower, upper) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a > b
                    || (a == b
                        && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        };
        if empty {
            return Ok(Box::new(MemCursor {
                iter: std::iter::empty(),
                cur: None,
            }));
        }
        let range = t.range::<[u8], _>((lower, upper));
        if reverse {
            Ok(Box::new(MemCursor {
                iter: range.rev(),
                cur: None,
            }))
        } else {
            Ok(Box::new(MemCursor {
                iter: range,
                cur: None,
            }))
        }
    }
    fn last_key(&self, tree: TreeId) -> Result<Option<Vec<u8>>> {
        Ok(self.tree(tree)?.keys().next_back().cloned())
    }
}

impl Storage for Memory {
    fn volatile(&self) -> bool {
        true
    }
    fn tree_meta(&self, tree: TreeId) -> Result<Vec<u8>> {
        self.tree(tree)?;
        Ok(self.metas.get(&tree).cloned().unwrap_or_default())
    }
    fn set_tree_meta(&mut self, tree: TreeId, meta: &[u8]) -> Result<()> {
        self.log()?;
        self.tree(tree)?;
        let old = self.metas.insert(tree, meta.to_vec());
        self.log()?.push(Undo::Meta(tree, old));
        Ok(())
    }
    fn root_meta(&self) -> Result<Vec<u8>> {
        Ok(self.root.clone())
    }
    fn set_root_meta(&mut self, meta: &[u8]) -> Result<()> {
        if meta.len() > MEMORY_ROOT_ROOM {
            return Err(Error::Invalid(format!(
                "{} root bytes, more than {MEMORY_ROOT_ROOM}",
                meta.len()
            )));
        }
        self.log()?;
        let old = std::mem::replace(&mut self.root, meta.to_vec());
        self.log()?.push(Undo::Root(old));
        Ok(())
    }
    fn root_meta_room(&self) -> usize {
        MEMORY_ROOT_ROOM
    }
    fn put_new(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<bool> {
        self.log()?;
        let t = self
            .trees
            .get_mut(&tree)
            .ok_or_else(|| Error::Invalid(format!("storage: tree {tree} does not exist")))?;
        match t.entry(key.to_vec()) {
            std::collections::btree_map::Entry::Occupied(_) => Ok(false),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(value.to_vec());
                self.log()?.push(Undo::Put(tree, key.to_vec(), None));
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(m: &Memory, t: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut c = m
            .scan(t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap();
        let mut v = Vec::new();
        while c.next().unwrap() {
            v.push((c.key().to_vec(), c.value().to_vec()));
        }
        v
    }

    #[test]
    fn memory_passes_the_conformance_suite() {
        crate::storage::conformance::run(&|| Box::new(Memory::new()));
    }

    #[test]
    fn rollback_restores_everything() {
        let mut m = Memory::new();
        m.begin().unwrap();
        m.create_tree(1).unwrap();
        m.put(1, b"a", b"1").unwrap();
        m.commit().unwrap();
        let before = dump(&m, 1);
        m.begin().unwrap();
        m.put(1, b"a", b"2").unwrap();
        m.put(1, b"b", b"3").unwrap();
        m.delete(1, b"a").unwrap();
        m.create_tree(2).unwrap();
        m.drop_tree(1).unwrap();
        m.rollback().unwrap();
        assert_eq!(dump(&m, 1), before);
        assert!(m.get(2, b"x").is_err());
    }

    #[test]
    fn savepoints_and_ranges() {
        let mut m = Memory::new();
        m.begin().unwrap();
        m.create_tree(1).unwrap();
        for k in [b"a", b"b", b"c", b"d"] {
            m.put(1, k, b"").unwrap();
        }
        let sp = m.savepoint().unwrap();
        m.delete(1, b"b").unwrap();
        m.put(1, b"e", b"").unwrap();
        m.rollback_to(sp).unwrap();
        let keys: Vec<_> = dump(&m, 1).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        let mut c = m
            .scan(1, Bound::Excluded(b"a"), Bound::Included(b"c"), true)
            .unwrap();
        let mut got = Vec::new();
        while c.next().unwrap() {
            got.push(c.key().to_vec());
        }
        assert_eq!(got, vec![b"c".to_vec(), b"b".to_vec()]);
        drop(c);
        let empty = !m
            .scan(1, Bound::Excluded(b"c"), Bound::Excluded(b"c"), false)
            .unwrap()
            .next()
            .unwrap();
        assert!(empty);
        m.commit().unwrap();
        assert!(m.put(1, b"z", b"").is_err(), "writes need a transaction");
    }
}
