//! Read transactions: [`ReadTx`], a snapshot of the last commit as of `begin_read`, and
//! [`Tree`], the handle on a tree that a transaction (read or write) hands out. A read opens
//! trees through the catalog at its snapshot and hands out point reads, [`Cursor`]s and
//! [`Range`]s over them, all reading at that snapshot (`At`).

use std::cell::RefCell;
use std::ops::Bound;
use std::rc::Rc;

use super::cursor::Source;
use super::shared::{At, Shared};
use super::{catalog, Cursor, Range, State, TreeInfo};
use crate::btree;
use crate::error::{Error, Result};
use crate::file::BlockFile;

/// A handle on a tree, valid in the transaction that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    pub(super) serial: u64,
    pub(super) idx: usize,
    /// The root, for read transactions (whose trees do not change).
    pub(super) root: u32,
}

/// A read transaction: a snapshot of the last commit as of `begin_read`. Pages it can see are
/// not reused while it is open, so keep it short when writes are heavy.
pub struct ReadTx<F: BlockFile> {
    pub(super) shared: Rc<RefCell<Shared<F>>>,
    pub(super) state: State,
    pub(super) trees: RefCell<Vec<TreeInfo>>,
    pub(super) serial: u64,
    /// A few trees' last leaves reached by a point read (`btree::get_near`), by root.
    pub(super) fingers: RefCell<[btree::Finger; 4]>,
}

impl<F: BlockFile> Drop for ReadTx<F> {
    fn drop(&mut self) {
        let mut sh = self.shared.borrow_mut();
        let st = &mut sh.st;
        let txn = self.state.txn;
        if let Some(i) = st.readers.iter().position(|&(t, _)| t == txn) {
            st.readers[i].1 -= 1;
            if st.readers[i].1 == 0 {
                st.readers.swap_remove(i);
                st.release_kept();
            }
        }
    }
}

impl<F: BlockFile> ReadTx<F> {
    pub fn txn(&self) -> u64 {
        self.state.txn
    }

    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        let info = catalog::get(&mut *self.at(), self.state.catalog, name)?
            .ok_or_else(|| Error::NotFound(format!("tree {name:?}")))?;
        let root = info.root;
        let mut trees = self.trees.borrow_mut();
        trees.push(info);
        Ok(Tree {
            serial: self.serial,
            idx: trees.len() - 1,
            root,
        })
    }

    pub fn list_trees(&self) -> Result<Vec<TreeInfo>> {
        catalog::list(&mut *self.at(), self.state.catalog)
    }

    /// The shared state, borrowed for a read of this transaction's state.
    fn at(&self) -> At<'_, F> {
        At::new(self.shared.borrow_mut(), Some(self.state.txn))
    }

    fn root(&self, t: Tree) -> Result<u32> {
        if t.serial != self.serial {
            return Err(Error::InvalidInput(
                "tree handle from another transaction".into(),
            ));
        }
        Ok(t.root)
    }

    pub fn tree_info(&self, t: Tree) -> Result<TreeInfo> {
        self.root(t)?;
        self.trees
            .borrow()
            .get(t.idx)
            .cloned()
            .ok_or_else(|| Error::InvalidInput("bad tree handle".into()))
    }

    pub fn len(&self, t: Tree) -> Result<u64> {
        Ok(self.tree_info(t)?.len)
    }

    /// Copies the value of `key` into `out`; returns whether it exists.
    pub fn get_into(&self, t: Tree, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let root = self.root(t)?;
        let mut fingers = self.fingers.borrow_mut();
        let finger = &mut fingers[root as usize % 4];
        btree::get_near(&mut *self.at(), root, key, out, finger)
    }

    pub fn get(&self, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(t, key, &mut v)?.then_some(v))
    }

    pub fn cursor(&self, t: Tree) -> Result<Cursor<F>> {
        let root = self.root(t)?;
        Ok(Cursor::new(
            self.shared.clone(),
            Source::Fixed(root, self.state.txn),
        ))
    }

    pub fn range(
        &self,
        t: Tree,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Range<F>> {
        Ok(Range::new(self.cursor(t)?, lower, upper, reverse))
    }
}
