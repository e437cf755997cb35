//! Building and moving whole trees: `bulk_build` fills an empty tree bottom-up from sorted pairs
//! (each page written once), and `relocate` moves a tree's pages below a cutoff for vacuum.

use super::*;

/// Copies the leaf `bulk_build` filled in `leaf` into a fresh page, names that page in the
/// level's last entry and hands it to `done`.
pub(super) fn finish_leaf<P: PagesMut>(
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
pub(crate) fn bulk_build<P: PagesMut, I, K, V>(
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

/// Moves every page of the tree at `id` that lies at or past `cutoff` to a fresh page (the
/// allocator hands out the lowest free page first), rewriting the parents that point at moved
/// pages. Returns the root's new page. Used by vacuum.
pub(crate) fn relocate<P: PagesMut>(p: &mut P, id: u32, cutoff: u32) -> Result<u32> {
    relocate_at(p, id, cutoff, 0)
}

pub(super) fn relocate_at<P: PagesMut>(
    p: &mut P,
    id: u32,
    cutoff: u32,
    depth: usize,
) -> Result<u32> {
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
