//! Changing a tree, copy-on-write: the owned path to a key (`cow`, `cow_path`), insert with its
//! splits, remove with its underflow fix-ups (`fix_up`, `rebalance`), overflow chains written and
//! freed, whole trees freed. Takes pages from and gives them back to [`PagesMut`]; hands the new
//! root back to the caller, which records it in the catalog at commit.

use super::*;

/// Returns an owned copy of `id` (itself if already owned).
pub(crate) fn cow<P: PagesMut>(p: &mut P, id: u32) -> Result<u32> {
    if p.is_owned(id) {
        return Ok(id);
    }
    let old = p.read(id)?;
    let new = p.alloc_copy(&old)?;
    p.free(id)?;
    Ok(new)
}

pub(super) fn free_overflow<P: PagesMut>(p: &mut P, len: usize, first: u32) -> Result<()> {
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

pub(super) fn write_overflow<P: PagesMut>(p: &mut P, v: &[u8]) -> Result<u32> {
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

pub(super) enum Fix {
    None,
    Split(Vec<u8>, u32),
    Check,
}

/// Owned path from the root to the leaf that holds (or would hold) `key`: (branch, child index)
/// pairs and the leaf. Updates `root` if the root moved.
pub(crate) fn cow_path<P: PagesMut>(
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
pub(super) fn split_point<C: AsRef<[u8]>>(cells: &[C]) -> usize {
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
pub(super) fn separator(lo: &[u8], hi: &[u8]) -> Vec<u8> {
    let common = lo.iter().zip(hi).take_while(|(a, b)| a == b).count();
    hi[..(common + 1).min(hi.len())].to_vec()
}

/// Splits the owned node `id` whose contents are `cells` (too many for one page) into `id` and a
/// new right sibling. Returns the separator and the sibling.
pub(super) fn split<P: PagesMut, C: AsRef<[u8]>>(
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
pub(super) fn rightmost<P: PagesMut>(p: &mut P, path: &[(u32, usize)]) -> Result<bool> {
    for &(b, idx) in path {
        if !p.with_page(b, |pg| idx == page::count(pg))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Inserts a raw cell at `i` of owned node `id`, splitting it if it is full. `path` is the
/// path from the root to `id` when the caller has it.
pub(super) fn insert_cell<P: PagesMut>(
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
pub(crate) fn insert<P: PagesMut>(
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
pub(crate) fn insert_keeping<P: PagesMut>(
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
pub(crate) fn insert_new<P: PagesMut>(
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
pub(super) fn insert_inner<P: PagesMut>(
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
pub(crate) fn insert_or_rewrite<P: PagesMut>(
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
pub(super) fn ask(
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
pub(super) fn check_sizes(ps: usize, key: &[u8], value: &[u8]) -> Result<()> {
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
pub(super) fn put_inline(pg: &mut [u8], ps: usize, i: usize, key: &[u8], value: &[u8]) -> bool {
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
pub(super) fn place_cell<P: PagesMut>(
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
pub(crate) fn remove<P: PagesMut>(
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
pub(crate) fn remove_keeping<P: PagesMut>(
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

/// Removes cell `i` of `leaf` and frees its overflow chain; with `old`, appends the value it
/// held there first (a write's undo log).
pub(super) fn take_cell<P: PagesMut>(
    p: &mut P,
    leaf: u32,
    i: usize,
    old: Option<&mut Vec<u8>>,
) -> Result<()> {
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

pub(super) fn underfull(pg: &[u8]) -> bool {
    page::count(pg) == 0 || page::used(pg) < page::capacity(pg.len()) / 4
}

/// Carries a split or a possible underflow from node `id` up the path to the root.
pub(super) fn fix_up<P: PagesMut>(
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
pub(super) fn rebalance<P: PagesMut>(p: &mut P, parent: u32, idx: usize) -> Result<Fix> {
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
pub(crate) fn free_tree<P: PagesMut>(p: &mut P, root: u32) -> Result<()> {
    free_subtree(p, root, 0)
}

pub(super) fn free_subtree<P: PagesMut>(p: &mut P, root: u32, depth: usize) -> Result<()> {
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
