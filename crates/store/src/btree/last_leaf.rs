//! The open write transaction's memory of where its last write landed ([`LastLeaf`]), and the
//! fast paths that start from it: a write or get whose key falls in that leaf skips the descent
//! from the root. Hands the leaf and its owned path to `write` and `read`; forgotten by the
//! [`Pages`] implementation whenever a page is allocated or freed.

use super::*;

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
    pub(super) root: u32,
    pub(super) leaf: u32,
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
pub(super) fn reuse_leaf<P: PagesMut>(
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
pub(super) fn remembering<P: PagesMut>(p: &mut P) -> bool {
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
pub(super) fn remember_leaf<P: PagesMut>(
    p: &mut P,
    root: u32,
    leaf: u32,
    path: &[(u32, usize)],
) -> Result<()> {
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
pub(super) fn search_leaf<P: PagesMut>(
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
pub(super) fn owned_leaf<P: PagesMut>(
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

/// The leaf the last write used, if the tree is the same and `key` falls in the leaf's range
/// (`reuse_leaf` without the path).
pub(super) fn last_leaf_for<P: PagesMut>(p: &mut P, root: u32, key: &[u8]) -> Option<u32> {
    let h = p.last_leaf()?;
    let inside = h.root != 0
        && h.root == root
        && !(h.has_lo && key < h.lo.as_slice())
        && !(h.has_hi && key >= h.hi.as_slice());
    inside.then_some(h.leaf)
}

/// `get` in a write transaction, in the leaf the last write used when `key` is within it
/// (a statement reading the row it has just written, or is about to): `None` when it is not,
/// and the caller descends with `get`. Kept apart from `get` so that reads outside a write
/// transaction pay nothing for it; the descent is left to the caller so that it can go
/// through the pages a read sees (the transaction's own, `Shared`), whose `get` the module
/// then holds once rather than once more for the writer.
pub(crate) fn get_in_last_leaf<P: PagesMut>(
    p: &mut P,
    root: u32,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Result<Option<bool>> {
    if root != 0 {
        if let Some(leaf) = last_leaf_for(p, root, key) {
            return get_in_leaf(p, leaf, key, out).map(Some);
        }
    }
    Ok(None)
}

/// Looks `key` up in `leaf`; on a hit copies its value into `out`.
fn get_in_leaf<P: PagesMut>(p: &mut P, leaf: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
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
