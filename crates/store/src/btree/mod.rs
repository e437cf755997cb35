//! Copy-on-write B+tree algorithms over byte keys and byte values. They see pages only through
//! the [`Pages`] trait (reads; implemented by the database's shared state and its writer) and
//! [`PagesMut`] (changes; the writer only), so they know nothing of transactions or files: a
//! write copies every page on its path that this transaction does not own yet into a fresh page
//! (`cow`) and frees the old one, so the committed tree is never touched.
//!
//! Node layout lives in [`crate::page`]; the invariants (`docs/file-format.md`): keys strictly
//! increase, all leaves are at one depth, and no non-root node is empty.
//!
//! - `read`: look-ups, values and overflow chains, [`Stack`] (a cursor's position).
//! - `write`: copy-on-write paths, insert with its splits, remove with its fix-ups.
//! - `update`: `update_each`, rewriting a range's entries where they are.
//! - `build`: `bulk_build` (a tree from sorted pairs) and `relocate` (vacuum).
//! - `last_leaf`: [`LastLeaf`], where the last write landed, and the fast paths from it.
//!
//! Each hands the caller (`db`) the tree's new root; none of them knows about the catalog.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::error::{Error, Result};
use crate::page::{self, LeafValue, HDR, KIND_BRANCH, KIND_LEAF, KIND_OVERFLOW, OVERFLOW_BIT};
use crate::pager::Page;

/// No tree of 2^32 pages with at least two children a branch is deeper than 32; a deeper
/// descent means a crafted or damaged file with a cycle.
const MAX_DEPTH: usize = 40;

fn too_deep(id: u32) -> Error {
    page::corrupt(id, "tree deeper than any valid tree (a cycle?)")
}

mod build;
mod last_leaf;
mod read;
mod update;
mod write;

pub(crate) use build::*;
pub(crate) use last_leaf::*;
pub(crate) use read::*;
pub(crate) use update::*;
pub(crate) use write::*;

pub(crate) trait Pages {
    fn page_size(&self) -> usize;
    fn read(&mut self, id: u32) -> Result<Page>;
    /// Runs `f` over page `id` without taking a reference to it (the point-read path).
    fn with_page<R>(&mut self, id: u32, f: impl FnOnce(&[u8]) -> R) -> Result<R>;
}

/// The pages of the open write transaction: [`Pages`] as it sees them, and the changes it makes.
pub(crate) trait PagesMut: Pages {
    /// Whether page `id` may be changed where it is (`page_mut`), its number kept: a page the
    /// transaction owns, or in a volatile file any page (see `Writer::page_mut`).
    fn is_owned(&self, id: u32) -> bool;
    /// An owned page's bytes, for changing.
    fn page_mut(&mut self, id: u32) -> Result<&mut Vec<u8>>;
    /// A fresh owned page, zeroed.
    fn alloc(&mut self) -> Result<u32>;
    /// A fresh owned page holding a copy of `content` (one page).
    fn alloc_copy(&mut self, content: &[u8]) -> Result<u32>;
    /// Gives `id` up: reusable at once if this transaction allocated it, else after commit.
    fn free(&mut self, id: u32) -> Result<()>;
    /// Where the last write of the transaction landed (None: the implementation keeps no such
    /// memory). An implementation must forget it (`LastLeaf::forget`) whenever it allocates or
    /// frees a page.
    fn last_leaf(&mut self) -> Option<&mut LastLeaf>;
}

pub(super) fn expect_kind(id: u32, p: &[u8], kind: u8) -> Result<()> {
    if page::kind(p) != kind {
        return Err(page::corrupt(
            id,
            format!("expected page kind {kind}, found {}", page::kind(p)),
        ));
    }
    Ok(())
}

/// What [`crate::WriteTx::update_each`] does with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Each {
    /// Leave it.
    Keep,
    /// Give it the value written into the buffer.
    Write,
    /// Remove it.
    Remove,
}

/// How [`crate::WriteTx::update_each`] changes an entry: given its key and value, says what to do
/// with it (for `Each::Write`, with the new value written into the buffer, empty on the call).
pub type Rewrite<'a> = dyn FnMut(&[u8], &[u8], &mut Vec<u8>) -> Result<Each> + 'a;

/// Told the key and old value of each entry [`crate::WriteTx::update_each`] is about to change.
pub type Replaced<'a> = dyn FnMut(&[u8], &[u8]) + 'a;

/// Which way a seek lands when the key itself is absent (or present and excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seek {
    /// The first key `>=` the given one.
    Ge,
    /// The first key `>`.
    Gt,
    /// The last key `<=`.
    Le,
    /// The last key `<`.
    Lt,
}

/// Whether `k` is inside the bound `b` taken as an upper (`upper`) or lower limit.
pub(crate) fn within(k: &[u8], b: Bound<&[u8]>, upper: bool) -> bool {
    match b {
        Bound::Unbounded => true,
        Bound::Included(x) => {
            let o = k.cmp(x);
            if upper {
                o != Ordering::Greater
            } else {
                o != Ordering::Less
            }
        }
        Bound::Excluded(x) => {
            let o = k.cmp(x);
            if upper {
                o == Ordering::Less
            } else {
                o == Ordering::Greater
            }
        }
    }
}
