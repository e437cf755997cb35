//! Rewriting entries where they are: `update_each` walks a range and rewrites or removes each
//! entry its callback picks, copying only the leaves it changes and never descending again per
//! entry. Uses `write` for what changes a leaf's shape (a value that no longer fits, an
//! underfull leaf).

use super::*;

/// The first entry at or after `from` (`Included`), after it (`Excluded`) or of the tree
/// (`Unbounded`): its leaf and slot, found without copying or holding any page (the leaf may
/// be written while the caller walks it). None past the last entry.
pub(super) fn seek_slot<P: PagesMut>(
    p: &mut P,
    root: u32,
    from: Bound<&[u8]>,
) -> Result<Option<(u32, usize)>> {
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
pub(super) fn copy_key<P: PagesMut>(
    p: &mut P,
    leaf: u32,
    i: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    p.with_page(leaf, |pg| {
        out.clear();
        out.extend_from_slice(page::key(pg, i));
    })
}

/// Where a descent for `seek_slot` ended.
pub(super) enum Seen {
    At(u32, usize),
    /// Past the last key of the tree.
    End,
    /// Past the last key of its leaf: the branch and index of the separator after the leaf.
    Past(u32, usize),
}

/// One page of a descent to the first entry at or after `from`: in a branch, `Err` with the
/// child to follow, its index and whether a separator follows it; in a leaf, `Ok` with the
/// entry's index, or None past the leaf's last key.
pub(super) fn seek_step(
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

pub(super) fn seek_in_leaf<P: PagesMut>(p: &mut P, root: u32, from: Bound<&[u8]>) -> Result<Seen> {
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
pub(super) struct Walk {
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
    fn seek<P: PagesMut>(
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
    fn next_leaf<P: PagesMut>(&mut self, p: &mut P, root: u32) -> Result<Option<(u32, usize)>> {
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
pub(crate) fn update_each<P: PagesMut>(
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
