//! Copy-on-write B+tree algorithms over byte keys and byte values. They see pages only through
//! the [`Pages`] trait (implemented by the database's shared state), so they know nothing of
//! transactions or files: a write copies every page on its path that this transaction does not
//! own yet into a fresh page (`cow`) and frees the old one, so the committed tree is never touched.
//!
//! Node layout lives in [`crate::page`]; the invariants (`docs/file-format.md`): keys strictly
//! increase, all leaves are at one depth, and no non-root node is empty.

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

pub(crate) trait Pages {
    fn page_size(&self) -> usize;
    fn read(&mut self, id: u32) -> Result<Page>;
    /// Runs `f` over page `id` without taking a reference to it (the point-read path).
    fn with_page<R>(&mut self, id: u32, f: impl FnOnce(&[u8]) -> R) -> Result<R>;
    /// Whether page `id` may be changed where it is (`page_mut`), its number kept: a page the
    /// transaction owns, or in a volatile file any page (see `Shared::page_mut`).
    fn is_owned(&self, id: u32) -> bool;
    /// An owned page's bytes, for changing.
    fn page_mut(&mut self, id: u32) -> Result<&mut Vec<u8>>;
    /// A fresh owned page, zeroed.
    fn alloc(&mut self) -> Result<u32>;
    /// A fresh owned page holding a copy of `content` (one page).
    fn alloc_copy(&mut self, content: &[u8]) -> Result<u32>;
    /// Gives `id` up: reusable at once if this transaction allocated it, else after commit.
    fn free(&mut self, id: u32) -> Result<()>;
    /// Where the last write of the open write transaction landed (None outside one). An
    /// implementation must forget it (`LastLeaf::forget`) whenever it allocates or frees a page.
    fn last_leaf(&mut self) -> Option<&mut LastLeaf>;
}

/// Where the last write landed: its owned root-to-leaf path and the range of keys the leaf
/// covers (from the separators above it). Writes in key order (a range UPDATE, an append, an
/// INSERT ... SELECT) mostly land in the leaf the previous one did, and then start there
/// instead of descending again (and asking for every page on the way whether it is owned).
///
/// Sound only while the pages on the path keep their place and the separators above the leaf
/// stay as they are: every page allocated or freed (a split, a merge, a copy, a new root) and
/// every rebalance forgets it. Changing cells inside the leaf does not: its range is set by
/// the branches above.
#[derive(Default)]
pub(crate) struct LastLeaf {
    /// The tree's root (0: nothing remembered).
    root: u32,
    leaf: u32,
    path: Vec<(u32, usize)>,
    /// The leaf holds keys `lo <= k < hi`; without a bound on a side, that side is open.
    lo: Vec<u8>,
    hi: Vec<u8>,
    has_lo: bool,
    has_hi: bool,
    /// The slot the last removal or get found in the leaf (`search_leaf`): where the next one
    /// there tries first (a get then a write of one row, or the next row of a range, is at it
    /// or just after it). Only a guess, checked against the key, so no change to the leaf
    /// needs to keep it right.
    slot: usize,
    /// Descents in a row (writes whose key was not in the remembered leaf), and how many more
    /// go by before a leaf is remembered again. Under keys in no order (rows written by random
    /// key) remembering costs each write two page look-ups and two key copies and is almost
    /// never used, so after three misses in a row it backs off for 2, 4, ... up to 32 descents
    /// and then tries once more; a write that finds its leaf starts over.
    misses: u32,
    skip: u32,
}

impl LastLeaf {
    pub(crate) fn forget(&mut self) {
        self.root = 0;
    }
}

/// The leaf the last write used, if the tree is the same and `key` falls in the leaf's range;
/// `path` gets its path (every page of it owned).
fn reuse_leaf<P: Pages>(
    p: &mut P,
    root: u32,
    key: &[u8],
    path: &mut Vec<(u32, usize)>,
) -> Option<u32> {
    let h = p.last_leaf()?;
    if h.root == 0
        || h.root != root
        || (h.has_lo && key < h.lo.as_slice())
        || (h.has_hi && key >= h.hi.as_slice())
    {
        return None;
    }
    path.clear();
    path.extend_from_slice(&h.path);
    h.misses = 0;
    Some(h.leaf)
}

/// Whether the leaf a descent found is to be remembered (see `LastLeaf::misses`).
fn remembering<P: Pages>(p: &mut P) -> bool {
    let Some(h) = p.last_leaf() else {
        return false;
    };
    if h.skip > 0 {
        h.skip -= 1;
        return false;
    }
    h.misses = h.misses.saturating_add(1);
    if h.misses > 2 {
        h.skip = 1 << (h.misses - 2).min(5);
    }
    true
}

/// Remembers the path `cow_path` just made, for the next write.
fn remember_leaf<P: Pages>(p: &mut P, root: u32, leaf: u32, path: &[(u32, usize)]) -> Result<()> {
    let Some(h) = p.last_leaf() else {
        return Ok(());
    };
    h.forget();
    let (mut lo, mut hi) = (std::mem::take(&mut h.lo), std::mem::take(&mut h.hi));
    let mut kept = std::mem::take(&mut h.path);
    lo.clear();
    hi.clear();
    kept.clear();
    kept.extend_from_slice(path);
    // The deepest separator on each side bounds the leaf most tightly (child i of a branch
    // holds the keys from separator i-1, included, to separator i, excluded).
    let (mut has_lo, mut has_hi) = (false, false);
    for &(b, i) in path.iter().rev() {
        if has_lo && has_hi {
            break;
        }
        p.with_page(b, |pg| {
            if !has_lo && i > 0 {
                lo.extend_from_slice(page::key(pg, i - 1));
                has_lo = true;
            }
            if !has_hi && i < page::count(pg) {
                hi.extend_from_slice(page::key(pg, i));
                has_hi = true;
            }
        })?;
    }
    if let Some(h) = p.last_leaf() {
        let (misses, skip) = (h.misses, h.skip);
        *h = LastLeaf {
            root,
            leaf,
            path: kept,
            lo,
            hi,
            has_lo,
            has_hi,
            slot: 0,
            misses,
            skip,
        };
    }
    Ok(())
}

/// `page::search` in the owned leaf the last write landed in, for a removal or a get, trying
/// the slot the previous one found there (and the one after it: removals in key order) before
/// a binary search; remembers the slot found. (An insert searches directly: its key is most
/// often new, where the guess only costs.)
fn search_leaf<P: Pages>(
    p: &mut P,
    leaf: u32,
    key: &[u8],
) -> Result<std::result::Result<usize, usize>> {
    // The guess is for the leaf remembered, while keys come in order (not after a run of
    // descents: under random keys it is two comparisons that miss).
    let hint = p
        .last_leaf()
        .and_then(|h| (h.root != 0 && h.leaf == leaf && h.misses < 2).then_some(h.slot));
    let r = p.with_page(leaf, |pg| {
        let n = page::count(pg);
        match hint {
            Some(h) if h < n && page::key(pg, h) == key => Ok(h),
            Some(h) if h + 1 < n && page::key(pg, h + 1) == key => Ok(h + 1),
            _ => page::search(pg, key),
        }
    })?;
    if let (Ok(i), Some(h)) = (r, p.last_leaf()) {
        h.slot = i;
    }
    Ok(r)
}

/// The owned leaf for `key` and the path to it: the last write's, when `key` falls in it,
/// else a fresh `cow_path`, remembered for the next write.
fn owned_leaf<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    path: &mut Vec<(u32, usize)>,
) -> Result<u32> {
    if let Some(leaf) = reuse_leaf(p, *root, key, path) {
        return Ok(leaf);
    }
    let leaf = cow_path(p, root, key, path)?;
    if remembering(p) {
        remember_leaf(p, *root, leaf, path)?;
    }
    Ok(leaf)
}

fn expect_kind(id: u32, p: &[u8], kind: u8) -> Result<()> {
    if page::kind(p) != kind {
        return Err(page::corrupt(
            id,
            format!("expected page kind {kind}, found {}", page::kind(p)),
        ));
    }
    Ok(())
}

/// Returns an owned copy of `id` (itself if already owned).
pub(crate) fn cow<P: Pages>(p: &mut P, id: u32) -> Result<u32> {
    if p.is_owned(id) {
        return Ok(id);
    }
    let old = p.read(id)?;
    let new = p.alloc_copy(&old)?;
    p.free(id)?;
    Ok(new)
}

/// Reads a value (inline or overflow) into `out`.
pub(crate) fn read_value<P: Pages>(
    p: &mut P,
    leaf: &[u8],
    i: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    match page::leaf_value(leaf, i) {
        LeafValue::Inline(v) => out.extend_from_slice(v),
        LeafValue::Overflow(len, first) => read_overflow(p, len, first, out)?,
    }
    Ok(())
}

pub(crate) fn read_overflow<P: Pages>(
    p: &mut P,
    len: usize,
    first: u32,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.reserve(len);
    let mut next = first;
    while out.len() < len {
        if next == 0 {
            return Err(page::corrupt(first, "overflow chain ends early"));
        }
        let pg = p.read(next)?;
        expect_kind(next, &pg, KIND_OVERFLOW)?;
        let used = page::get_u32(&pg, 20) as usize;
        if used == 0 {
            return Err(page::corrupt(next, "empty overflow page"));
        }
        let take = used.min(len - out.len());
        out.extend_from_slice(&pg[HDR..HDR + take]);
        next = page::right(&pg);
    }
    Ok(())
}

fn free_overflow<P: Pages>(p: &mut P, len: usize, first: u32) -> Result<()> {
    let pages = len.div_ceil(p.page_size() - HDR);
    let mut next = first;
    let mut n = 0;
    while next != 0 {
        n += 1;
        if n > pages {
            return Err(page::corrupt(first, "overflow chain longer than its value"));
        }
        let pg = p.read(next)?;
        expect_kind(next, &pg, KIND_OVERFLOW)?;
        let following = page::right(&pg);
        p.free(next)?;
        next = following;
    }
    Ok(())
}

fn write_overflow<P: Pages>(p: &mut P, v: &[u8]) -> Result<u32> {
    let per = p.page_size() - HDR;
    let n = v.len().div_ceil(per);
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(p.alloc()?);
    }
    for (i, chunk) in v.chunks(per).enumerate() {
        let next = ids.get(i + 1).copied().unwrap_or(0);
        let pg = p.page_mut(ids[i])?;
        page::init(pg, KIND_OVERFLOW);
        page::put_u32(pg, 20, chunk.len() as u32);
        page::set_right(pg, next);
        pg[HDR..HDR + chunk.len()].copy_from_slice(chunk);
    }
    Ok(ids[0])
}

/// The leaf the last write used, if the tree is the same and `key` falls in the leaf's range
/// (`reuse_leaf` without the path).
fn last_leaf_for<P: Pages>(p: &mut P, root: u32, key: &[u8]) -> Option<u32> {
    let h = p.last_leaf()?;
    let inside = h.root != 0
        && h.root == root
        && !(h.has_lo && key < h.lo.as_slice())
        && !(h.has_hi && key >= h.hi.as_slice());
    inside.then_some(h.leaf)
}

/// `get` in a write transaction: a key in the leaf the last write used is looked for there,
/// without a descent (a statement reading the row it has just written, or is about to). Kept
/// apart from `get` so that reads outside a write transaction pay nothing for it.
pub(crate) fn get_writing<P: Pages>(
    p: &mut P,
    root: u32,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Result<bool> {
    if root != 0 {
        if let Some(leaf) = last_leaf_for(p, root, key) {
            return get_in_leaf(p, leaf, key, out);
        }
    }
    get(p, root, key, out)
}

/// Looks `key` up in `leaf`; on a hit copies its value into `out`.
fn get_in_leaf<P: Pages>(p: &mut P, leaf: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
    let Ok(i) = search_leaf(p, leaf, key)? else {
        return Ok(false);
    };
    let overflow = p.with_page(leaf, |pg| match page::leaf_value(pg, i) {
        LeafValue::Inline(v) => {
            out.clear();
            out.extend_from_slice(v);
            None
        }
        LeafValue::Overflow(len, first) => Some((len, first)),
    })?;
    if let Some((len, first)) = overflow {
        out.clear();
        read_overflow(p, len, first, out)?;
    }
    Ok(true)
}

/// Looks `key` up; on a hit copies its value into `out`.
pub(crate) fn get<P: Pages>(p: &mut P, root: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
    if root == 0 {
        return Ok(false);
    }
    enum Step {
        Child(u32),
        Found,
        Overflow(usize, u32),
        Missing,
        Bad(u8),
    }
    let mut id = root;
    for _ in 0..MAX_DEPTH {
        let step = p.with_page(id, |pg| match page::kind(pg) {
            KIND_BRANCH => Step::Child(page::child(pg, page::child_index(pg, key))),
            KIND_LEAF => match page::search(pg, key) {
                Ok(i) => match page::leaf_value(pg, i) {
                    LeafValue::Inline(v) => {
                        out.clear();
                        out.extend_from_slice(v);
                        Step::Found
                    }
                    LeafValue::Overflow(len, first) => Step::Overflow(len, first),
                },
                Err(_) => Step::Missing,
            },
            k => Step::Bad(k),
        })?;
        match step {
            Step::Child(c) => id = c,
            Step::Found => return Ok(true),
            Step::Missing => return Ok(false),
            Step::Overflow(len, first) => {
                out.clear();
                read_overflow(p, len, first, out)?;
                return Ok(true);
            }
            Step::Bad(k) => return Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
        }
    }
    Err(too_deep(root))
}

enum Fix {
    None,
    Split(Vec<u8>, u32),
    Check,
}

/// Owned path from the root to the leaf that holds (or would hold) `key`: (branch, child index)
/// pairs and the leaf. Updates `root` if the root moved.
pub(crate) fn cow_path<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    path: &mut Vec<(u32, usize)>,
) -> Result<u32> {
    path.clear();
    let mut id = cow(p, *root)?;
    *root = id;
    loop {
        if path.len() > MAX_DEPTH {
            return Err(too_deep(*root));
        }
        // Read, not changed: a page that keeps its number (a volatile file's) is copied only
        // when something in it changes.
        let step = p.with_page(id, |pg| match page::kind(pg) {
            KIND_LEAF => Ok(None),
            KIND_BRANCH => {
                let idx = page::child_index(pg, key);
                Ok(Some((idx, page::child(pg, idx))))
            }
            k => Err(k),
        })?;
        match step {
            Ok(None) => return Ok(id),
            Ok(Some((idx, c))) => {
                let c2 = cow(p, c)?;
                if c2 != c {
                    page::set_child(p.page_mut(id)?, idx, c2);
                }
                path.push((id, idx));
                id = c2;
            }
            Err(k) => return Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
        }
    }
}

/// Index where a full node of `cells` splits so both halves are about equally full.
fn split_point<C: AsRef<[u8]>>(cells: &[C]) -> usize {
    let total: usize = cells.iter().map(|c| c.as_ref().len() + 2).sum();
    let mut acc = 0;
    for (i, c) in cells.iter().enumerate() {
        acc += c.as_ref().len() + 2;
        if acc * 2 >= total {
            return (i + 1).clamp(1, cells.len() - 1);
        }
    }
    cells.len() / 2
}

/// The shortest prefix of `hi` that still sorts after `lo` (both leaf keys, `lo < hi`): a smaller
/// separator means more of them per branch page.
fn separator(lo: &[u8], hi: &[u8]) -> Vec<u8> {
    let common = lo.iter().zip(hi).take_while(|(a, b)| a == b).count();
    hi[..(common + 1).min(hi.len())].to_vec()
}

/// Splits the owned node `id` whose contents are `cells` (too many for one page) into `id` and a
/// new right sibling. Returns the separator and the sibling.
fn split<P: Pages, C: AsRef<[u8]>>(
    p: &mut P,
    id: u32,
    kind: u8,
    cells: &[C],
    right: u32,
    m: usize,
) -> Result<Fix> {
    let new = p.alloc()?;
    if kind == KIND_LEAF {
        let sep = separator(
            page::cell_key(cells[m - 1].as_ref()),
            page::cell_key(cells[m].as_ref()),
        );
        page::fill(p.page_mut(new)?, KIND_LEAF, &cells[m..], 0);
        page::fill(p.page_mut(id)?, KIND_LEAF, &cells[..m], 0);
        Ok(Fix::Split(sep, new))
    } else {
        let sep = page::cell_key(cells[m].as_ref()).to_vec();
        let mid_child = page::cell_child(cells[m].as_ref());
        page::fill(p.page_mut(new)?, KIND_BRANCH, &cells[m + 1..], right);
        page::fill(p.page_mut(id)?, KIND_BRANCH, &cells[..m], mid_child);
        Ok(Fix::Split(sep, new))
    }
}

/// Whether every node on `path` leads to its last child: the path ends at the tree's right edge.
fn rightmost<P: Pages>(p: &mut P, path: &[(u32, usize)]) -> Result<bool> {
    for &(b, idx) in path {
        if !p.with_page(b, |pg| idx == page::count(pg))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Inserts a raw cell at `i` of owned node `id`, splitting it if it is full. `path` is the
/// path from the root to `id` when the caller has it.
fn insert_cell<P: Pages>(
    p: &mut P,
    id: u32,
    i: usize,
    cell: &[u8],
    path: Option<&[(u32, usize)]>,
) -> Result<Fix> {
    let pg = p.page_mut(id)?;
    if let Some(off) = page::reserve(pg, i, cell.len()) {
        pg[off..off + cell.len()].copy_from_slice(cell);
        return Ok(Fix::None);
    }
    let kind = page::kind(pg);
    let right = page::right(pg);
    let n = page::count(pg);
    // A leaf appended to at the tree's right edge (rows inserted in key order) stays as full
    // as it is and a new leaf starts with the new cell, as SQLite's quick balance does.
    // Halving would leave every leaf of an ordered load half empty, and split twice as often;
    // and the full leaf keeps its bytes: nothing is copied out of it or written back.
    if kind == KIND_LEAF && i == n && n + 1 >= 4 {
        if let Some(path) = path {
            if rightmost(p, path)? {
                let sep = p.with_page(id, |pg| {
                    separator(page::key(pg, n - 1), page::cell_key(cell))
                })?;
                let new = p.alloc()?;
                let pg = p.page_mut(new)?;
                page::init(pg, KIND_LEAF);
                let off = page::reserve(pg, 0, cell.len())
                    .expect("invariant: one cell fits an empty node");
                pg[off..off + cell.len()].copy_from_slice(cell);
                return Ok(Fix::Split(sep, new));
            }
        }
    }
    // One copy of the page and a list of slices into it: no allocation per cell.
    let copy = p.page_mut(id)?.clone();
    let mut cells: Vec<&[u8]> = (0..page::count(&copy))
        .map(|j| page::cell(&copy, j))
        .collect();
    let appended = i == cells.len();
    cells.insert(i, cell);
    // A branch appended to at the right edge stays as full as it is too, as a leaf does
    // above, but keeps its last cell for the new node, which must not be empty.
    let at_edge = kind == KIND_BRANCH
        && appended
        && cells.len() >= 4
        && match path {
            Some(path) => rightmost(p, path)?,
            None => false,
        };
    let m = if at_edge {
        cells.len() - 2
    } else {
        split_point(&cells)
    };
    split(p, id, kind, &cells, right, m)
}

/// Inserts or replaces `key`. Returns whether it was there before.
pub(crate) fn insert<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    value: &[u8],
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
) -> Result<bool> {
    insert_keeping(p, root, key, value, path, scratch, None)
}

/// `insert`, and when the key was there, its old value appended to `old` (one descent where a
/// caller that keeps an undo log would otherwise make two).
pub(crate) fn insert_keeping<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    value: &[u8],
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
    old: Option<&mut Vec<u8>>,
) -> Result<bool> {
    insert_inner(p, root, key, value, path, scratch, old, false)
}

/// Inserts `key` only if it is absent (one descent where a look-up then an insert make two).
/// Returns whether it was there; if it was, its value is left as it was. The path to its leaf
/// is copied either way (a conflict costs the pages it would have written, not a second
/// descent for every insert that succeeds).
pub(crate) fn insert_new<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    value: &[u8],
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
) -> Result<bool> {
    insert_inner(p, root, key, value, path, scratch, None, true)
}

#[allow(clippy::too_many_arguments)]
fn insert_inner<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    value: &[u8],
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
    old: Option<&mut Vec<u8>>,
    skip_existing: bool,
) -> Result<bool> {
    let ps = p.page_size();
    check_sizes(ps, key, value)?;
    if *root == 0 {
        let id = p.alloc()?;
        page::init(p.page_mut(id)?, KIND_LEAF);
        *root = id;
    }
    let leaf = owned_leaf(p, root, key, path)?;
    let pg = p.page_mut(leaf)?;
    let (existed, at) = match page::search_append(pg, key) {
        Err(i) => {
            if put_inline(pg, ps, i, key, value) {
                return Ok(false);
            }
            (false, i)
        }
        Ok(_) if skip_existing => return Ok(true),
        Ok(i) => {
            let mut old = old;
            if let LeafValue::Inline(v) = page::leaf_value(pg, i) {
                // Rewritten where it is when its page holds it: over the old bytes when no
                // longer (an update that changes a number, say), else grown into the page's
                // free gap (as `insert_or_rewrite` does). Removing the cell and inserting the
                // new one would, on a full page, rewrite the whole page to gather the room.
                let n = v.len();
                if let Some(out) = old.as_deref_mut() {
                    out.extend_from_slice(v);
                }
                if page::rewrite_value(pg, i, value) {
                    if value.len() < n && underfull(pg) {
                        fix_up(p, root, path, leaf, Fix::Check)?;
                    }
                    return Ok(true);
                }
                if let Some(out) = old.as_deref_mut() {
                    // Not rewritten (too long for its page): `take_cell` appends the old
                    // value itself.
                    out.truncate(out.len() - n);
                }
            }
            take_cell(p, leaf, i, old)?;
            (true, i)
        }
    };
    place_cell(p, root, path, scratch, leaf, at, key, value, existed)?;
    Ok(existed)
}

/// Inserts `key` if it is absent; if it is there, `f(key, old value, out)` says what becomes
/// of the entry (as for `update_each`), in the same descent: an upsert whose insert finds its
/// key rewrites the row there instead of descending again. `undo(key, old value)` is called
/// before an entry that was there changes. `bufs` hold an overflow value and the new value,
/// kept by the caller from call to call. None when the key was inserted, else what `f` asked.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert_or_rewrite<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    value: &[u8],
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
    bufs: &mut [Vec<u8>; 2],
    f: &mut Rewrite<'_>,
    undo: Option<&mut Replaced<'_>>,
) -> Result<Option<Each>> {
    let ps = p.page_size();
    check_sizes(ps, key, value)?;
    if *root == 0 {
        let id = p.alloc()?;
        page::init(p.page_mut(id)?, KIND_LEAF);
        *root = id;
    }
    let leaf = owned_leaf(p, root, key, path)?;
    let pg = p.page_mut(leaf)?;
    let i = match page::search(pg, key) {
        Ok(i) => i,
        Err(at) => {
            if put_inline(pg, ps, at, key, value) {
                return Ok(None);
            }
            place_cell(p, root, path, scratch, leaf, at, key, value, false)?;
            return Ok(None);
        }
    };
    let [old, out] = bufs;
    out.clear();
    // What `f` asks for, and the old value's length when it is inline. The new value's size
    // is checked before `undo` hears of a change, so a refused value leaves no trace.
    let (action, inline) = match page::leaf_value(p.page_mut(leaf)?, i) {
        LeafValue::Inline(v) => (ask(f, undo, ps, key, v, out)?, Some(v.len())),
        LeafValue::Overflow(len, first) => {
            old.clear();
            read_overflow(p, len, first, old)?;
            (ask(f, undo, ps, key, old, out)?, None)
        }
    };
    match action {
        Each::Keep => {}
        Each::Remove => {
            take_cell(p, leaf, i, None)?;
            fix_up(p, root, path, leaf, Fix::Check)?;
        }
        Each::Write => {
            // As in `update_each`: an inline value is rewritten within its page when the page
            // has the room (a longer one grows into the free gap), instead of a removal and an
            // insert that gathers the page's free space.
            let pg = p.page_mut(leaf)?;
            match inline {
                Some(n) if page::rewrite_value(pg, i, out) => {
                    if out.len() < n && underfull(pg) {
                        fix_up(p, root, path, leaf, Fix::Check)?;
                    }
                }
                _ => {
                    take_cell(p, leaf, i, None)?;
                    place_cell(p, root, path, scratch, leaf, i, key, out, true)?;
                }
            }
        }
    }
    Ok(Some(action))
}

/// What `f` asks of `key`'s value `v` (for `insert_or_rewrite`): the new value's size is checked
/// before `undo` hears of a change, so a refused value leaves no trace.
#[inline(always)]
fn ask(
    f: &mut Rewrite<'_>,
    undo: Option<&mut Replaced<'_>>,
    ps: usize,
    key: &[u8],
    v: &[u8],
    out: &mut Vec<u8>,
) -> Result<Each> {
    let action = f(key, v, out)?;
    if action == Each::Write {
        check_sizes(ps, key, out)?;
    }
    if action != Each::Keep {
        if let Some(u) = undo {
            u(key, v);
        }
    }
    Ok(action)
}

/// Refuses a key or value too long for a page of `ps` bytes.
#[inline(always)]
fn check_sizes(ps: usize, key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > page::max_key(ps) {
        return Err(Error::TooLarge(format!(
            "a key of {} bytes is longer than the {} bytes a {}-byte page allows",
            key.len(),
            page::max_key(ps),
            ps
        )));
    }
    if value.len() > (OVERFLOW_BIT - 1) as usize {
        return Err(Error::TooLarge(format!("a value of {} bytes", value.len())));
    }
    Ok(())
}

/// Puts the cell for `key` and `value` at slot `at` of `leaf` (an owned leaf reached by
/// `path`), with the value in overflow pages when it does not fit, and carries any split up.
/// `existed`: the cell replaces one just taken out, which may leave the leaf smaller.
/// Writes a new inline entry at slot `i` of leaf `pg` when it has the room; false when the
/// entry is too long to be inline or the leaf is full (`place_cell` then). Nearly every insert
/// takes this way: no cell built aside first, no second look-up of the page, and with the leaf
/// not split nothing above it changes.
#[inline(always)]
fn put_inline(pg: &mut [u8], ps: usize, i: usize, key: &[u8], value: &[u8]) -> bool {
    let size = page::leaf_cell_size(key.len(), value.len());
    if size > page::max_cell(ps) {
        return false;
    }
    let Some(off) = page::reserve(pg, i, size) else {
        return false;
    };
    page::write_leaf_cell(&mut pg[off..off + size], key, value.len() as u32, value);
    true
}

/// Inlined: a part of every insert, which as a call cost it a tenth of its own work.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn place_cell<P: Pages>(
    p: &mut P,
    root: &mut u32,
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
    leaf: u32,
    at: usize,
    key: &[u8],
    value: &[u8],
    existed: bool,
) -> Result<()> {
    let ps = p.page_size();
    if page::leaf_cell_size(key.len(), value.len()) <= page::max_cell(ps) {
        page::leaf_cell(scratch, key, value.len() as u32, value);
    } else {
        let first = write_overflow(p, value)?;
        page::leaf_cell(
            scratch,
            key,
            value.len() as u32 | OVERFLOW_BIT,
            &first.to_le_bytes(),
        );
    }
    let fix = insert_cell(p, leaf, at, scratch, Some(path))?;
    // A replacement may leave the leaf smaller than before.
    let fix = match fix {
        Fix::None if existed => Fix::Check,
        f => f,
    };
    fix_up(p, root, path, leaf, fix)
}

/// Removes `key`. Returns whether it was there.
pub(crate) fn remove<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    path: &mut Vec<(u32, usize)>,
) -> Result<bool> {
    let mut removed = false;
    remove_keeping(p, root, key, path, None, &mut removed)?;
    Ok(removed)
}

/// `remove`, appending the removed value to `old` (for a caller's undo log). `removed` is set
/// as soon as the entry is gone, even when an error follows.
pub(crate) fn remove_keeping<P: Pages>(
    p: &mut P,
    root: &mut u32,
    key: &[u8],
    path: &mut Vec<(u32, usize)>,
    old: Option<&mut Vec<u8>>,
    removed: &mut bool,
) -> Result<()> {
    *removed = false;
    if *root == 0 {
        return Ok(());
    }
    // No look-up first: a miss copies the path to the leaf the key would be in (as
    // `insert_new` does on a hit), but a removal nearly always finds its key (a row a
    // statement has just read, that row's index entries), and then the look-up is a second
    // descent.
    let leaf = owned_leaf(p, root, key, path)?;
    let Ok(i) = search_leaf(p, leaf, key)? else {
        return Ok(());
    };
    // An inline value (nearly every one) is taken out with one look-up of the page, and the
    // path is not walked when the leaf is not left underfull (`fix_up` would stop there).
    let pg = p.page_mut(leaf)?;
    if let LeafValue::Inline(v) = page::leaf_value(pg, i) {
        if let Some(out) = old {
            out.extend_from_slice(v);
        }
        page::remove(pg, i);
        *removed = true;
        if !underfull(pg) {
            return Ok(());
        }
        return fix_up(p, root, path, leaf, Fix::Check);
    }
    take_cell(p, leaf, i, old)?;
    *removed = true;
    fix_up(p, root, path, leaf, Fix::Check)
}

/// The first entry at or after `from` (`Included`), after it (`Excluded`) or of the tree
/// (`Unbounded`): its leaf and slot, found without copying or holding any page (the leaf may
/// be written while the caller walks it). None past the last entry.
fn seek_slot<P: Pages>(p: &mut P, root: u32, from: Bound<&[u8]>) -> Result<Option<(u32, usize)>> {
    // A key in the range of the leaf the last write used is looked for there first (an upsert
    // rewriting the row its insert just found, the next row of a range).
    if let Bound::Included(k) | Bound::Excluded(k) = from {
        if let Some(leaf) = last_leaf_for(p, root, k) {
            let excluded = matches!(from, Bound::Excluded(_));
            let at = p.with_page(leaf, |pg| {
                let i = match page::search(pg, k) {
                    Ok(i) if excluded => i + 1,
                    Ok(i) | Err(i) => i,
                };
                (i < page::count(pg)).then_some(i)
            })?;
            if let Some(i) = at {
                return Ok(Some((leaf, i)));
            }
        }
    }
    match seek_in_leaf(p, root, from)? {
        Seen::At(leaf, i) => Ok(Some((leaf, i))),
        Seen::End => Ok(None),
        // Past the leaf's last key: the next leaf starts at the separator after it, and holds
        // a key at or after it (no leaf is empty).
        Seen::Past(branch, idx) => {
            let sep = p.with_page(branch, |pg| page::key(pg, idx).to_vec())?;
            match seek_in_leaf(p, root, Bound::Included(&sep))? {
                Seen::At(leaf, i) => Ok(Some((leaf, i))),
                _ => Err(page::corrupt(branch, "an empty leaf inside a tree")),
            }
        }
    }
}

/// Key `i` of `leaf`, into `out`.
fn copy_key<P: Pages>(p: &mut P, leaf: u32, i: usize, out: &mut Vec<u8>) -> Result<()> {
    p.with_page(leaf, |pg| {
        out.clear();
        out.extend_from_slice(page::key(pg, i));
    })
}

/// Where a descent for `seek_slot` ended.
enum Seen {
    At(u32, usize),
    /// Past the last key of the tree.
    End,
    /// Past the last key of its leaf: the branch and index of the separator after the leaf.
    Past(u32, usize),
}

/// One page of a descent to the first entry at or after `from`: in a branch, `Err` with the
/// child to follow, its index and whether a separator follows it; in a leaf, `Ok` with the
/// entry's index, or None past the leaf's last key.
fn seek_step(
    pg: &[u8],
    id: u32,
    from: Bound<&[u8]>,
) -> Result<std::result::Result<Option<usize>, (u32, usize, bool)>> {
    match page::kind(pg) {
        KIND_BRANCH => {
            let idx = match from {
                Bound::Included(k) | Bound::Excluded(k) => page::child_index(pg, k),
                Bound::Unbounded => 0,
            };
            Ok(Err((page::child(pg, idx), idx, idx < page::count(pg))))
        }
        KIND_LEAF => {
            let i = match from {
                Bound::Included(k) => page::search(pg, k).unwrap_or_else(|i| i),
                Bound::Excluded(k) => match page::search(pg, k) {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
                Bound::Unbounded => 0,
            };
            Ok(Ok((i < page::count(pg)).then_some(i)))
        }
        k => Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
    }
}

fn seek_in_leaf<P: Pages>(p: &mut P, root: u32, from: Bound<&[u8]>) -> Result<Seen> {
    if root == 0 {
        return Ok(Seen::End);
    }
    let mut next_sep = None;
    let mut id = root;
    for _ in 0..MAX_DEPTH {
        let step = p.with_page(id, |pg| seek_step(pg, id, from))??;
        match step {
            Err((child, idx, has_sep)) => {
                // The deepest separator to the right of the path bounds the leaf most tightly.
                if has_sep {
                    next_sep = Some((id, idx));
                }
                id = child;
            }
            Ok(Some(i)) => return Ok(Seen::At(id, i)),
            Ok(None) => {
                return Ok(match next_sep {
                    Some((b, idx)) => Seen::Past(b, idx),
                    None => Seen::End,
                })
            }
        }
    }
    Err(too_deep(root))
}

/// The branches a walk descended through and the child it took in each, root first: the
/// next leaf is found from them (up to the first branch with a child to the right, then down
/// its leftmost children) instead of by a descent from the root for the leaf's last key.
/// Valid only while no branch on it changes: a write that goes through the tree's path (a
/// copy, a split, a merge) leaves it stale.
struct Walk {
    at: [(u32, u32); MAX_DEPTH],
    len: usize,
}

impl Walk {
    fn new() -> Self {
        Walk {
            at: [(0, 0); MAX_DEPTH],
            len: 0,
        }
    }

    fn push(&mut self, root: u32, branch: u32, idx: usize) -> Result<()> {
        if self.len == MAX_DEPTH {
            return Err(too_deep(root));
        }
        self.at[self.len] = (branch, idx as u32);
        self.len += 1;
        Ok(())
    }

    /// Descends from `root` to the first entry at or after `from`, recording the branches.
    fn seek<P: Pages>(
        &mut self,
        p: &mut P,
        root: u32,
        from: Bound<&[u8]>,
    ) -> Result<Option<(u32, usize)>> {
        self.len = 0;
        if root == 0 {
            return Ok(None);
        }
        let mut id = root;
        loop {
            let step = p.with_page(id, |pg| seek_step(pg, id, from))??;
            match step {
                Err((child, idx, _)) => {
                    self.push(root, id, idx)?;
                    id = child;
                }
                Ok(Some(i)) => return Ok(Some((id, i))),
                // Past the leaf's last key: the next leaf's first entry is the one.
                Ok(None) => return self.next_leaf(p, root),
            }
        }
    }

    /// The first entry of the leaf after the one the walk leads to; None past the tree's end.
    fn next_leaf<P: Pages>(&mut self, p: &mut P, root: u32) -> Result<Option<(u32, usize)>> {
        while self.len > 0 {
            self.len -= 1;
            let (b, idx) = self.at[self.len];
            let idx = idx as usize;
            let right = p.with_page(b, |pg| {
                (idx < page::count(pg)).then(|| page::child(pg, idx + 1))
            })?;
            let Some(mut id) = right else { continue };
            self.push(root, b, idx + 1)?;
            loop {
                let step = p.with_page(id, |pg| match page::kind(pg) {
                    KIND_BRANCH => Ok(Some(page::child(pg, 0))),
                    KIND_LEAF if page::count(pg) > 0 => Ok(None),
                    KIND_LEAF => Err(page::corrupt(id, "an empty leaf inside a tree")),
                    k => Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
                })??;
                match step {
                    Some(child) => {
                        self.push(root, id, 0)?;
                        id = child;
                    }
                    None => return Ok(Some((id, 0))),
                }
            }
        }
        Ok(None)
    }
}

/// Rewrites or removes, in key order, the entries within `lower..upper` that `f` picks:
/// `f(key, value, out)` returns `Each::Write` with the new value in `out`, `Each::Remove`, or
/// `Each::Keep` to leave the entry as it is. A leaf is copied only when an entry in it
/// changes (an UPDATE that matches few rows copies few pages), and each change is made where
/// the entry is: within its page when the leaf is owned and has the room, through the general
/// replacement or removal otherwise.
/// `undo(key, old value)` is called before each change, and `after_write` after it (where
/// the caller may write out pages to keep memory bounded). `bufs` are buffers for the key,
/// an overflow value and the new value, kept by the caller from call to call. Returns how
/// many entries changed or went; `removed` counts those that went, as they go.
#[allow(clippy::too_many_arguments)]
pub(crate) fn update_each<P: Pages>(
    p: &mut P,
    root: &mut u32,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    path: &mut Vec<(u32, usize)>,
    scratch: &mut Vec<u8>,
    bufs: &mut [Vec<u8>; 3],
    f: &mut Rewrite<'_>,
    mut undo: Option<&mut Replaced<'_>>,
    after_write: &mut dyn FnMut(&mut P) -> Result<()>,
    removed: &mut u64,
) -> Result<u64> {
    let [key, value, out] = bufs;
    let mut have_value = false;
    let mut changed = 0;
    let quarter = page::capacity(p.page_size()) / 4;
    let mut at = seek_slot(p, *root, lower)?;
    // Set once a descent has recorded the path to the walked leaf, and unset by a write that
    // goes through the path.
    let mut walk = Walk::new();
    let mut walk_ok = false;
    // The leaf last changed where it is, known to be owned: its next entries skip the
    // ownership look-up. Forgotten at a write through the path, which may free pages.
    let mut owned = None;
    // The leaf being walked, held from entry to entry while nothing writes it (one look-up a
    // leaf, not one an entry), and let go before any write (a held page would be copied).
    let mut held: Option<(u32, Page)> = None;
    while let Some((leaf, i)) = at {
        if held.as_ref().is_none_or(|(id, _)| *id != leaf) {
            held = Some((leaf, p.read(leaf)?));
        }
        // What `f` asks for, the leaf's entry count, and for an inline value its old length,
        // the leaf's bytes in use and the key's length.
        let (action, n, room, last) = {
            let pg: &[u8] = &held.as_ref().expect("invariant: just set").1;
            let (k, lv) = page::leaf_entry(pg, i);
            if !within(k, upper, true) {
                break;
            }
            // The entry at an included upper bound is the last: keys are unique. (A write
            // by key, `lower == upper`, then stops without reading its leaf again.)
            let last = matches!(upper, Bound::Included(u) if u == k);
            let (v, inline) = match lv {
                LeafValue::Inline(v) => (v, true),
                LeafValue::Overflow(len, first) if !have_value => {
                    value.clear();
                    read_overflow(p, len, first, value)?;
                    have_value = true;
                    continue;
                }
                LeafValue::Overflow(..) => (value.as_slice(), false),
            };
            out.clear();
            let action = f(k, v, out)?;
            if action != Each::Keep {
                if let Some(u) = undo.as_mut() {
                    u(k, v);
                }
            }
            let room = (inline && action != Each::Keep).then(|| (v.len(), page::used(pg), k.len()));
            (action, page::count(pg), room, last)
        };
        have_value = false;
        if action != Each::Keep {
            held = None;
        }
        let mut next = (i + 1 < n).then_some((leaf, i + 1));
        // The key is copied only when the walk needs it past a write or a leaf's end.
        let mut have_key = false;
        if action == Each::Remove {
            changed += 1;
            // As for a write: in an owned leaf that keeps another entry and is not left
            // underfull, the cell goes where it is and the next entry moves into its slot.
            let direct = n > 1
                && room.is_some_and(|(old, used, klen)| {
                    used - (page::leaf_cell_size(klen, old) + 2) >= quarter
                })
                && (owned == Some(leaf) || p.is_owned(leaf));
            if direct {
                owned = Some(leaf);
                if i + 1 == n && !walk_ok {
                    copy_key(p, leaf, i, key)?;
                    have_key = true;
                }
                page::remove(p.page_mut(leaf)?, i);
                next = (i + 1 < n).then_some((leaf, i));
            } else {
                copy_key(p, leaf, i, key)?;
                have_key = true;
                walk_ok = false;
                owned = None;
                let mut gone = false;
                remove_keeping(p, root, key, path, None, &mut gone)?;
                if !gone {
                    return Err(page::corrupt(
                        leaf,
                        "an entry vanished while it was removed",
                    ));
                }
                next = None;
            }
            *removed += 1;
            after_write(p)?;
        } else if action == Each::Write {
            changed += 1;
            // A leaf this transaction owns (its path is owned too: the parent was changed to
            // point at it) takes the new value within its page when it has the room, unless
            // a shorter value leaves it underfull (a rebalance needs the path).
            let direct = match room {
                Some((old, used, _)) => {
                    (out.len() >= old || used - (old - out.len()) >= quarter)
                        && (owned == Some(leaf) || p.is_owned(leaf))
                        && page::rewrite_value(p.page_mut(leaf)?, i, out)
                }
                None => false,
            };
            if direct {
                owned = Some(leaf);
            } else {
                copy_key(p, leaf, i, key)?;
                have_key = true;
                walk_ok = false;
                owned = None;
                insert_keeping(p, root, key, out, path, scratch, None)?;
                // Pages moved, or the leaf was copied: go on from the leaf that now holds the
                // key (the copy, when nothing else moved; found again otherwise).
                next = None;
                if let Some(h) = p.last_leaf() {
                    if h.root != 0 && h.root == *root {
                        let w = h.leaf;
                        let (n, same) = p.with_page(w, |pg| {
                            (
                                page::count(pg),
                                i < page::count(pg) && page::key(pg, i) == key.as_slice(),
                            )
                        })?;
                        if same && i + 1 < n {
                            next = Some((w, i + 1));
                        }
                    }
                }
            }
            after_write(p)?;
        }
        if last {
            break;
        }
        at = match next {
            Some(x) => Some(x),
            None if walk_ok => walk.next_leaf(p, *root)?,
            None => {
                if !have_key {
                    copy_key(p, leaf, i, key)?;
                }
                walk_ok = true;
                walk.seek(p, *root, Bound::Excluded(key))?
            }
        };
    }
    Ok(changed)
}

/// Removes cell `i` of `leaf` and frees its overflow chain; with `old`, appends the value it
/// held there first (a write's undo log).
fn take_cell<P: Pages>(p: &mut P, leaf: u32, i: usize, old: Option<&mut Vec<u8>>) -> Result<()> {
    match page::leaf_value(p.page_mut(leaf)?, i) {
        LeafValue::Overflow(len, first) => {
            if let Some(out) = old {
                // read_overflow reads until its buffer holds `len` bytes: start it empty.
                let mut v = Vec::new();
                read_overflow(p, len, first, &mut v)?;
                out.extend_from_slice(&v);
            }
            free_overflow(p, len, first)?;
        }
        LeafValue::Inline(v) => {
            if let Some(out) = old {
                out.extend_from_slice(v);
            }
        }
    }
    page::remove(p.page_mut(leaf)?, i);
    Ok(())
}

fn underfull(pg: &[u8]) -> bool {
    page::count(pg) == 0 || page::used(pg) < page::capacity(pg.len()) / 4
}

/// Carries a split or a possible underflow from node `id` up the path to the root.
fn fix_up<P: Pages>(
    p: &mut P,
    root: &mut u32,
    path: &mut Vec<(u32, usize)>,
    mut id: u32,
    mut fix: Fix,
) -> Result<()> {
    while let Some((parent, idx)) = path.pop() {
        fix = match fix {
            Fix::None => return Ok(()),
            Fix::Split(sep, right) => {
                page::set_child(p.page_mut(parent)?, idx, right);
                insert_cell(p, parent, idx, &page::branch_cell(&sep, id), Some(path))?
            }
            Fix::Check => {
                if underfull(p.page_mut(id)?) {
                    rebalance(p, parent, idx)?
                } else {
                    return Ok(());
                }
            }
        };
        id = parent;
    }
    match fix {
        Fix::None => {}
        Fix::Split(sep, right) => {
            let new = p.alloc()?;
            let pg = p.page_mut(new)?;
            page::init(pg, KIND_BRANCH);
            page::fill(pg, KIND_BRANCH, &[page::branch_cell(&sep, id)], right);
            *root = new;
        }
        Fix::Check => loop {
            let pg = p.page_mut(*root)?;
            if page::count(pg) > 0 {
                break;
            }
            if page::kind(pg) == KIND_BRANCH {
                let only = page::right(pg);
                p.free(*root)?;
                *root = only;
            } else {
                p.free(*root)?;
                *root = 0;
                break;
            }
        },
    }
    Ok(())
}

/// Merges child `idx` of `parent` with a neighbour, or shares their cells evenly when both do
/// not fit in one page.
fn rebalance<P: Pages>(p: &mut P, parent: u32, idx: usize) -> Result<Fix> {
    // Cells move between leaves and the separator above them changes.
    if let Some(h) = p.last_leaf() {
        h.forget();
    }
    let ppg = p.page_mut(parent)?;
    if page::count(ppg) == 0 {
        return Ok(Fix::Check);
    }
    let li = if idx > 0 { idx - 1 } else { idx };
    let sep = page::key(ppg, li).to_vec();
    let (lc, rc) = (page::child(ppg, li), page::child(ppg, li + 1));
    let l = cow(p, lc)?;
    let r = cow(p, rc)?;
    let ppg = p.page_mut(parent)?;
    page::set_child(ppg, li, l);
    page::set_child(ppg, li + 1, r);
    let lpg = p.read(l)?;
    let rpg = p.read(r)?;
    let kind = page::kind(&lpg);
    if page::kind(&rpg) != kind {
        return Err(page::corrupt(r, "sibling nodes of different kinds"));
    }
    let mut cells = page::cells(&lpg);
    if kind == KIND_BRANCH {
        cells.push(page::branch_cell(&sep, page::right(&lpg)));
    }
    cells.extend(page::cells(&rpg));
    let right = page::right(&rpg);
    drop((lpg, rpg));
    let total: usize = cells.iter().map(|c| c.len() + 2).sum();
    if total <= page::capacity(p.page_size()) {
        page::fill(p.page_mut(l)?, kind, &cells, right);
        p.free(r)?;
        let ppg = p.page_mut(parent)?;
        page::remove(ppg, li);
        page::set_child(ppg, li, l);
        return Ok(Fix::Check);
    }
    let m = split_point(&cells);
    let new_sep = if kind == KIND_LEAF {
        let s = separator(page::cell_key(&cells[m - 1]), page::cell_key(&cells[m]));
        page::fill(p.page_mut(l)?, kind, &cells[..m], 0);
        page::fill(p.page_mut(r)?, kind, &cells[m..], 0);
        s
    } else {
        let s = page::cell_key(&cells[m]).to_vec();
        page::fill(
            p.page_mut(l)?,
            kind,
            &cells[..m],
            page::cell_child(&cells[m]),
        );
        page::fill(p.page_mut(r)?, kind, &cells[m + 1..], right);
        s
    };
    page::remove(p.page_mut(parent)?, li);
    match insert_cell(p, parent, li, &page::branch_cell(&new_sep, l), None)? {
        Fix::None => Ok(Fix::Check),
        f => Ok(f),
    }
}

/// Frees every page of the tree at `root`.
pub(crate) fn free_tree<P: Pages>(p: &mut P, root: u32) -> Result<()> {
    free_subtree(p, root, 0)
}

fn free_subtree<P: Pages>(p: &mut P, root: u32, depth: usize) -> Result<()> {
    if root == 0 {
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(too_deep(root));
    }
    let pg = p.read(root)?;
    match page::kind(&pg) {
        KIND_BRANCH => {
            for i in 0..=page::count(&pg) {
                free_subtree(p, page::child(&pg, i), depth + 1)?;
            }
        }
        KIND_LEAF => {
            // Only a value in overflow pages has pages of its own: the value field's low bit
            // says so without slicing out its key and value (a table's leaves hold inline rows
            // nearly always, and a dropped table passes every one of them).
            for i in 0..page::count(&pg) {
                if !page::leaf_overflows(&pg, i) {
                    continue;
                }
                if let LeafValue::Overflow(len, first) = page::leaf_value(&pg, i) {
                    free_overflow(p, len, first)?;
                }
            }
        }
        k => return Err(page::corrupt(root, format!("page kind {k} inside a tree"))),
    }
    p.free(root)
}

/// Copies the leaf `bulk_build` filled in `leaf` into a fresh page, names that page in the
/// level's last entry and hands it to `done`.
fn finish_leaf<P: Pages>(
    p: &mut P,
    leaf: &mut [u8],
    level: &mut [(Vec<u8>, u32)],
    done: &mut dyn FnMut(&mut P, u32) -> Result<()>,
) -> Result<()> {
    // The buffer held the previous leaf: no byte of it may survive between slots and cells.
    page::zero_gap(leaf);
    let id = p.alloc_copy(leaf)?;
    level
        .last_mut()
        .expect("invariant: a leaf being filled has its entry")
        .1 = id;
    done(p, id)
}

/// Builds a tree bottom-up from `(key, value)` pairs in strictly increasing key order, filling
/// each leaf to about 90% (room for a few later inserts before it splits). `done` is called with
/// every finished page so the caller can write it out and keep memory bounded.
pub(crate) fn bulk_build<P: Pages, I, K, V>(
    p: &mut P,
    items: I,
    done: &mut dyn FnMut(&mut P, u32) -> Result<()>,
) -> Result<(u32, u64)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let ps = p.page_size();
    let target = page::capacity(ps) * 9 / 10;
    // Finished nodes of the level being built: (separator before it, page).
    let mut level: Vec<(Vec<u8>, u32)> = Vec::new();
    // The leaf being filled, built in this buffer and copied into a fresh page once full: a
    // page asked for by number (`page_mut`) for every entry cost a hash look-up each, and a
    // fresh page is zeroed first.
    let mut leaf = vec![0u8; ps];
    let mut open = false;
    let mut prev: Vec<u8> = Vec::new();
    let mut n = 0u64;
    let mut scratch = Vec::new();
    for (k, v) in items {
        let (k, v) = (k.as_ref(), v.as_ref());
        if k.len() > page::max_key(ps) {
            return Err(Error::TooLarge(format!("a key of {} bytes", k.len())));
        }
        if n > 0 && prev.as_slice() >= k {
            return Err(Error::InvalidInput(
                "bulk build needs keys in strictly increasing order".into(),
            ));
        }
        let size = page::leaf_cell_size(k.len(), v.len());
        let inline = size <= page::max_cell(ps);
        let size = if inline {
            size
        } else {
            page::overflow_cell_size(k.len(), v.len())
        };
        if open && page::used(&leaf) + size + 2 > target {
            finish_leaf(p, &mut leaf, &mut level, done)?;
            open = false;
        }
        if !open {
            page::init(&mut leaf, KIND_LEAF);
            let sep = if n == 0 {
                k.to_vec()
            } else {
                separator(&prev, k)
            };
            level.push((sep, 0));
            open = true;
        }
        if inline {
            let at = page::count(&leaf);
            let off = page::reserve(&mut leaf, at, size).expect("invariant: room checked above");
            page::write_leaf_cell(&mut leaf[off..off + size], k, v.len() as u32, v);
        } else {
            let first = write_overflow(p, v)?;
            page::leaf_cell(
                &mut scratch,
                k,
                v.len() as u32 | OVERFLOW_BIT,
                &first.to_le_bytes(),
            );
            let at = page::count(&leaf);
            let off = page::reserve(&mut leaf, at, size).expect("invariant: room checked above");
            leaf[off..off + size].copy_from_slice(&scratch);
        }
        prev.clear();
        prev.extend_from_slice(k);
        n += 1;
    }
    if n == 0 {
        return Ok((0, 0));
    }
    finish_leaf(p, &mut leaf, &mut level, done)?;
    // Branch levels: each branch takes children while their separators fit the fill target.
    while level.len() > 1 {
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < level.len() {
            let start = i;
            let mut used = 0;
            i += 1;
            while i < level.len() {
                let c = page::branch_cell_size(level[i].0.len()) + 2;
                if used + c > target {
                    break;
                }
                used += c;
                i += 1;
            }
            groups.push((start, i));
        }
        // A branch needs two children: let a lone last child borrow one from its neighbour
        // (which has at least four, since a cell takes at most a quarter of a page).
        if groups.len() > 1 {
            let g = groups.len();
            if groups[g - 1].1 - groups[g - 1].0 == 1 {
                groups[g - 2].1 -= 1;
                groups[g - 1].0 -= 1;
            }
        }
        let mut next: Vec<(Vec<u8>, u32)> = Vec::with_capacity(groups.len());
        for (a, b) in groups {
            let bcells: Vec<Vec<u8>> = (a + 1..b)
                .map(|j| page::branch_cell(&level[j].0, level[j - 1].1))
                .collect();
            let id = p.alloc()?;
            page::fill(p.page_mut(id)?, KIND_BRANCH, &bcells, level[b - 1].1);
            done(p, id)?;
            next.push((level[a].0.clone(), id));
        }
        level = next;
    }
    Ok((level[0].1, n))
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

/// A position in a tree: the pages from the root to a leaf, and the index taken in each.
#[derive(Default)]
pub(crate) struct Stack {
    pub levels: Vec<(Page, usize)>,
}

impl Stack {
    pub fn valid(&self) -> bool {
        match self.levels.last() {
            Some((pg, i)) => page::kind(pg) == KIND_LEAF && *i < page::count(pg),
            None => false,
        }
    }

    pub fn leaf(&self) -> Option<(&Page, usize)> {
        if !self.valid() {
            return None;
        }
        self.levels.last().map(|(p, i)| (p, *i))
    }

    fn descend<P: Pages>(
        &mut self,
        p: &mut P,
        mut id: u32,
        key: Option<&[u8]>,
        leftmost: bool,
    ) -> Result<()> {
        loop {
            if self.levels.len() > MAX_DEPTH {
                return Err(too_deep(id));
            }
            let pg = p.read(id)?;
            match page::kind(&pg) {
                KIND_BRANCH => {
                    let idx = match key {
                        Some(k) => page::child_index(&pg, k),
                        None if leftmost => 0,
                        None => page::count(&pg),
                    };
                    id = page::child(&pg, idx);
                    self.levels.push((pg, idx));
                }
                KIND_LEAF => {
                    let idx = match key {
                        Some(_) => 0,
                        None if leftmost => 0,
                        None => page::count(&pg).wrapping_sub(1),
                    };
                    self.levels.push((pg, idx));
                    return Ok(());
                }
                k => return Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
            }
        }
    }

    pub fn first<P: Pages>(&mut self, p: &mut P, root: u32) -> Result<bool> {
        self.levels.clear();
        if root == 0 {
            return Ok(false);
        }
        self.descend(p, root, None, true)?;
        if !self.valid() {
            self.levels.clear();
        }
        Ok(self.valid())
    }

    pub fn last<P: Pages>(&mut self, p: &mut P, root: u32) -> Result<bool> {
        self.levels.clear();
        if root == 0 {
            return Ok(false);
        }
        self.descend(p, root, None, false)?;
        if !self.valid() {
            self.levels.clear();
        }
        Ok(self.valid())
    }

    pub fn seek<P: Pages>(&mut self, p: &mut P, root: u32, key: &[u8], op: Seek) -> Result<bool> {
        self.levels.clear();
        if root == 0 {
            return Ok(false);
        }
        self.descend(p, root, Some(key), true)?;
        let Some((pg, slot)) = self.levels.last_mut() else {
            return Ok(false);
        };
        let r = page::search(pg, key);
        let n = page::count(pg);
        match op {
            Seek::Ge | Seek::Gt => {
                let i = match r {
                    Ok(i) if op == Seek::Ge => i,
                    Ok(i) => i + 1,
                    Err(i) => i,
                };
                *slot = i;
                if i >= n {
                    *slot = n.saturating_sub(1);
                    if n == 0 {
                        self.levels.clear();
                        return Ok(false);
                    }
                    return self.next(p);
                }
                Ok(true)
            }
            Seek::Le | Seek::Lt => {
                let i = match r {
                    Ok(i) if op == Seek::Le => Some(i),
                    Ok(i) | Err(i) => i.checked_sub(1),
                };
                match i {
                    Some(i) => {
                        *slot = i;
                        Ok(true)
                    }
                    None => {
                        *slot = 0;
                        if n == 0 {
                            self.levels.clear();
                            return Ok(false);
                        }
                        self.prev(p)
                    }
                }
            }
        }
    }

    pub fn next<P: Pages>(&mut self, p: &mut P) -> Result<bool> {
        let Some((pg, i)) = self.levels.last_mut() else {
            return Ok(false);
        };
        if *i + 1 < page::count(pg) {
            *i += 1;
            return Ok(true);
        }
        // Climb to the lowest branch with a child to the right, then take its leftmost leaf.
        let mut depth = self.levels.len() - 1;
        loop {
            if depth == 0 {
                self.levels.clear();
                return Ok(false);
            }
            depth -= 1;
            let (pg, i) = &mut self.levels[depth];
            if *i < page::count(pg) {
                *i += 1;
                let id = page::child(pg, *i);
                self.levels.truncate(depth + 1);
                self.descend(p, id, None, true)?;
                if self.valid() {
                    return Ok(true);
                }
                return Err(page::corrupt(id, "empty node inside a tree"));
            }
        }
    }

    pub fn prev<P: Pages>(&mut self, p: &mut P) -> Result<bool> {
        let Some((_, i)) = self.levels.last_mut() else {
            return Ok(false);
        };
        if *i > 0 {
            *i -= 1;
            return Ok(true);
        }
        let mut depth = self.levels.len() - 1;
        loop {
            if depth == 0 {
                self.levels.clear();
                return Ok(false);
            }
            depth -= 1;
            let (pg, i) = &mut self.levels[depth];
            if *i > 0 {
                *i -= 1;
                let id = page::child(pg, *i);
                self.levels.truncate(depth + 1);
                self.descend(p, id, None, false)?;
                if self.valid() {
                    return Ok(true);
                }
                return Err(page::corrupt(id, "empty node inside a tree"));
            }
        }
    }
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

/// Moves every page of the tree at `id` that lies at or past `cutoff` to a fresh page (the
/// allocator hands out the lowest free page first), rewriting the parents that point at moved
/// pages. Returns the root's new page. Used by vacuum.
pub(crate) fn relocate<P: Pages>(p: &mut P, id: u32, cutoff: u32) -> Result<u32> {
    relocate_at(p, id, cutoff, 0)
}

fn relocate_at<P: Pages>(p: &mut P, id: u32, cutoff: u32, depth: usize) -> Result<u32> {
    if id == 0 {
        return Ok(0);
    }
    if depth > MAX_DEPTH {
        return Err(too_deep(id));
    }
    let pg = p.read(id)?;
    let mut cur = id;
    match page::kind(&pg) {
        KIND_BRANCH => {
            for i in 0..=page::count(&pg) {
                let c = page::child(&pg, i);
                let nc = relocate_at(p, c, cutoff, depth + 1)?;
                if nc != c {
                    cur = cow(p, cur)?;
                    page::set_child(p.page_mut(cur)?, i, nc);
                }
            }
        }
        KIND_LEAF => {
            let mut v = Vec::new();
            for i in 0..page::count(&pg) {
                let LeafValue::Overflow(len, first) = page::leaf_value(&pg, i) else {
                    continue;
                };
                let mut far = false;
                let mut next = first;
                let mut n = 0;
                while next != 0 {
                    n += 1;
                    if n > len.div_ceil(p.page_size() - HDR) {
                        return Err(page::corrupt(first, "overflow chain longer than its value"));
                    }
                    far |= next >= cutoff;
                    next = page::right(&p.read(next)?);
                }
                if !far {
                    continue;
                }
                read_overflow(p, len, first, &mut v)?;
                free_overflow(p, len, first)?;
                let nf = write_overflow(p, &v)?;
                cur = cow(p, cur)?;
                let lp = p.page_mut(cur)?;
                page::set_overflow_first(lp, i, nf);
            }
        }
        k => return Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
    }
    if cur == id && id >= cutoff {
        // Moved whatever `cow` does (a volatile file's pages keep their numbers there).
        let old = p.read(cur)?;
        let new = p.alloc_copy(&old)?;
        p.free(cur)?;
        cur = new;
    }
    Ok(cur)
}
