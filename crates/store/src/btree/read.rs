//! Reading a tree: point look-ups (`get`), values and their overflow chains (`read_value`,
//! `read_overflow`), and [`Stack`], the root-to-leaf position cursors and scans step with. Only
//! reads pages ([`Pages`]); hands keys and values to the database's cursors and ranges.

use super::*;

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

/// Looks `key` up; on a hit copies its value into `out`.
pub(crate) fn get<P: Pages>(p: &mut P, root: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
    get_near(p, root, key, out, &mut None)
}

/// The leaf the last point read of a tree reached, kept by a read transaction (whose pages do
/// not change): [`get_near`] looks there first.
pub(crate) type Finger = Option<(u32, Page)>;

/// [`get`] that looks first in `finger`'s leaf, when it is a leaf of this tree (`root`): a key
/// between that leaf's first and last keys can be in no other leaf, so the descent is skipped.
/// Reads in key order (a join on the key, the rows an index range names) land in the same leaf
/// again and again. `finger` is left on the leaf this read reached. Only for a tree whose pages
/// do not change while `finger` is kept.
pub(crate) fn get_near<P: Pages>(
    p: &mut P,
    root: u32,
    key: &[u8],
    out: &mut Vec<u8>,
    finger: &mut Finger,
) -> Result<bool> {
    if root == 0 {
        return Ok(false);
    }
    let leaf = match finger.take() {
        Some((r, pg))
            if r == root
                && page::count(&pg) > 0
                && page::key(&pg, 0) <= key
                && key <= page::key(&pg, page::count(&pg) - 1) =>
        {
            pg
        }
        _ => {
            let mut id = root;
            let mut depth = 0;
            loop {
                let pg = p.read(id)?;
                match page::kind(&pg) {
                    KIND_BRANCH => id = page::child(&pg, page::child_index(&pg, key)),
                    KIND_LEAF => break pg,
                    k => return Err(page::corrupt(id, format!("page kind {k} inside a tree"))),
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(too_deep(root));
                }
            }
        }
    };
    let found = match page::search(&leaf, key) {
        Ok(i) => {
            read_value(p, &leaf, i, out)?;
            true
        }
        Err(_) => false,
    };
    *finger = Some((root, leaf));
    Ok(found)
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
