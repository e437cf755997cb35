//! Cursors and ranges over one tree, in a read transaction (at its snapshot, through `At`) or
//! in the write transaction (its view, as it changes: a cursor that outlives a change finds
//! its place again by key). [`Cursor`] holds its root-to-leaf path ([`Stack`]) and steps
//! within a leaf without borrowing the shared state; [`Range`] adds the bounds and direction,
//! and `Range::for_each` hands a leaf's entries one after another. Both hand out keys and values
//! borrowed from the page, and give their buffers back to the store when dropped.

use std::cell::RefCell;
use std::ops::Bound;
use std::rc::Rc;

use super::shared::{At, Shared};
use crate::btree::{self, Seek, Stack};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page::{self, LeafValue};
use crate::pager::Page;

pub(super) enum Source {
    /// A read transaction's tree: its root, and the transaction it reads.
    Fixed(u32, u64),
    Write {
        serial: u64,
        idx: usize,
    },
}

/// A position in a tree. Steps are cheap: the cursor holds its root-to-leaf path. In a write
/// transaction, a cursor that outlives a change to the tree finds its place again by key
/// (the next step goes to the key after, or before, the one it was on).
pub struct Cursor<F: BlockFile> {
    shared: Rc<RefCell<Shared<F>>>,
    source: Source,
    stack: Stack,
    seq: u64,
    /// Scratch for the key a stale cursor seeks by.
    key: Vec<u8>,
    val: Vec<u8>,
    /// Buffers for a [`Range`]'s bounds, lent to it while it lives.
    bounds: (Vec<u8>, Vec<u8>),
}

/// A dropped [`Cursor`]'s buffers (and its [`Range`]'s bounds), empty, kept in the store for
/// the next cursor.
#[derive(Default)]
pub(super) struct CursorBufs {
    levels: Vec<(Page, usize)>,
    key: Vec<u8>,
    val: Vec<u8>,
    lower: Vec<u8>,
    upper: Vec<u8>,
}

impl CursorBufs {
    /// How many are kept: one each for the scans a statement has open at once, as a rule.
    const KEPT: usize = 8;
    /// Larger buffers are not kept.
    const MAX: usize = 16 * 1024;

    fn small(&self) -> bool {
        [&self.key, &self.val, &self.lower, &self.upper]
            .iter()
            .all(|b| b.capacity() <= Self::MAX)
    }
}

impl<F: BlockFile> Drop for Cursor<F> {
    fn drop(&mut self) {
        // The pages the stack holds are let go here either way (a held page would be copied
        // by a write); the emptied buffers go back to the store for the next cursor, unless it
        // is borrowed (a cursor dropped inside a store call) or has enough.
        let mut levels = std::mem::take(&mut self.stack.levels);
        levels.clear();
        let mut bufs = CursorBufs {
            levels,
            key: std::mem::take(&mut self.key),
            val: std::mem::take(&mut self.val),
            lower: std::mem::take(&mut self.bounds.0),
            upper: std::mem::take(&mut self.bounds.1),
        };
        if !bufs.small() {
            return;
        }
        if let Ok(mut sh) = self.shared.try_borrow_mut() {
            if sh.st.cursor_bufs.len() < CursorBufs::KEPT {
                bufs.key.clear();
                bufs.val.clear();
                bufs.lower.clear();
                bufs.upper.clear();
                sh.st.cursor_bufs.push(bufs);
            }
        }
    }
}

impl<F: BlockFile> Cursor<F> {
    /// The caller must not hold `shared` borrowed: the cursor takes kept buffers from it.
    pub(super) fn new(shared: Rc<RefCell<Shared<F>>>, source: Source) -> Self {
        let bufs = shared
            .try_borrow_mut()
            .ok()
            .and_then(|mut sh| sh.st.cursor_bufs.pop())
            .unwrap_or_default();
        Cursor {
            shared,
            source,
            stack: Stack {
                levels: bufs.levels,
            },
            seq: 0,
            key: bufs.key,
            val: bufs.val,
            bounds: (bufs.lower, bufs.upper),
        }
    }

    /// The shared state, borrowed for a read at this cursor's view.
    fn lock<'a>(shared: &'a RefCell<Shared<F>>, source: &Source) -> At<'a, F> {
        let view = match source {
            Source::Fixed(_, txn) => Some(*txn),
            Source::Write { .. } => None,
        };
        At::new(shared.borrow_mut(), view)
    }

    fn root(&self, sh: &mut Shared<F>) -> Result<u32> {
        match self.source {
            Source::Fixed(r, _) => Ok(r),
            Source::Write { serial, idx } => {
                let w = sh.write_state(serial)?;
                match w.trees.get(idx) {
                    Some(s) if !s.dropped => Ok(s.info.root),
                    _ => Err(Error::NotFound("the cursor's tree was dropped".into())),
                }
            }
        }
    }

    fn after(&mut self, sh: &mut Shared<F>, ok: bool) -> Result<bool> {
        // The key to find the place again by is not copied here: the stack holds its pages,
        // and a held page is never written in place (`Rc::make_mut` copies a shared one), so
        // the current key can still be read from it after the tree changed.
        if let Source::Write { serial, .. } = self.source {
            self.seq = sh.write_state(serial)?.seq;
        }
        Ok(ok)
    }

    /// In a write transaction, whether the tree changed since the last step.
    fn stale(&self, sh: &mut Shared<F>) -> Result<bool> {
        match self.source {
            Source::Fixed(..) => Ok(false),
            Source::Write { serial, .. } => Ok(sh.write_state(serial)?.seq != self.seq),
        }
    }

    pub fn first(&mut self) -> Result<bool> {
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let root = self.root(&mut sh)?;
        let ok = self.stack.first(&mut *sh, root)?;
        self.after(&mut sh, ok)
    }

    pub fn last(&mut self) -> Result<bool> {
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let root = self.root(&mut sh)?;
        let ok = self.stack.last(&mut *sh, root)?;
        self.after(&mut sh, ok)
    }

    /// Moves to the entry `op` picks relative to `key`; returns whether there is one.
    pub fn seek(&mut self, key: &[u8], op: Seek) -> Result<bool> {
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let root = self.root(&mut sh)?;
        let ok = self.stack.seek(&mut *sh, root, key, op)?;
        self.after(&mut sh, ok)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<bool> {
        self.step(true)
    }

    pub fn prev(&mut self) -> Result<bool> {
        self.step(false)
    }

    /// Whether the tree is as it was at the last step: always in a read transaction, and in a
    /// write transaction's tree until it is written.
    fn unchanged(&self) -> bool {
        match self.source {
            Source::Fixed(..) => true,
            Source::Write { serial, .. } => {
                let sh = self.shared.borrow();
                sh.open_write(serial).is_some_and(|w| w.seq == self.seq)
            }
        }
    }

    /// One entry forward or back. When the tree changed under the cursor, it finds its place
    /// again by key: the entry after (or before) the last one it returned.
    fn step(&mut self, forward: bool) -> Result<bool> {
        // A read transaction's tree cannot change, so a step that stays in the leaf is the
        // next slot: no need to borrow the shared state mutably (most steps of a scan).
        // So is one in a write transaction's tree that has not changed since the last step.
        if let (true, Some((pg, i))) = (self.unchanged(), self.stack.levels.last_mut()) {
            if forward && *i + 1 < page::count(pg) {
                *i += 1;
                return Ok(true);
            }
            if !forward && *i > 0 {
                *i -= 1;
                return Ok(true);
            }
        }
        let sh_rc = self.shared.clone();
        let mut sh = Self::lock(&sh_rc, &self.source);
        let ok = if self.stale(&mut sh)? {
            let mut k = std::mem::take(&mut self.key);
            k.clear();
            if let Some((pg, i)) = self.stack.leaf() {
                k.extend_from_slice(page::key(pg, i));
            }
            if k.is_empty() && !self.stack.valid() {
                self.key = k;
                false
            } else {
                let root = self.root(&mut sh)?;
                let op = if forward { Seek::Gt } else { Seek::Lt };
                let ok = self.stack.seek(&mut *sh, root, &k, op)?;
                self.key = k;
                ok
            }
        } else if forward {
            self.stack.next(&mut *sh)?
        } else {
            self.stack.prev(&mut *sh)?
        };
        self.after(&mut sh, ok)
    }

    pub fn valid(&self) -> bool {
        self.stack.valid()
    }

    /// The current key (`None` when the cursor is off either end).
    pub fn key(&self) -> Option<&[u8]> {
        self.stack.leaf().map(|(pg, i)| page::key(pg, i))
    }

    /// The current key and value together (see [`Cursor::value`]).
    pub fn entry(&mut self) -> Result<(&[u8], &[u8])> {
        let Some((pg, i)) = self.stack.leaf() else {
            return Err(Error::InvalidInput("the cursor is not on an entry".into()));
        };
        let overflow = match page::leaf_value(pg, i) {
            LeafValue::Inline(_) => false,
            LeafValue::Overflow(len, first) => {
                let mut sh = Self::lock(&self.shared, &self.source);
                self.val.clear();
                btree::read_overflow(&mut *sh, len, first, &mut self.val)?;
                true
            }
        };
        let (pg, i) = self.stack.leaf().expect("invariant: checked above");
        let k = page::key(pg, i);
        match page::leaf_value(pg, i) {
            LeafValue::Inline(v) => Ok((k, v)),
            LeafValue::Overflow(..) if overflow => Ok((k, &self.val)),
            LeafValue::Overflow(..) => unreachable!("invariant: checked above"),
        }
    }

    /// The current value if it is stored inline (borrowed from the page, nothing read or
    /// copied); None for an overflow value (use [`Cursor::value`]) or off an entry.
    pub fn inline_value(&self) -> Option<&[u8]> {
        let (pg, i) = self.stack.leaf()?;
        match page::leaf_value(pg, i) {
            LeafValue::Inline(v) => Some(v),
            LeafValue::Overflow(..) => None,
        }
    }

    /// The current value. Inline values are borrowed from the page; overflow values are read
    /// into a buffer the cursor reuses.
    pub fn value(&mut self) -> Result<&[u8]> {
        let Some((pg, i)) = self.stack.leaf() else {
            return Err(Error::InvalidInput("the cursor is not on an entry".into()));
        };
        match page::leaf_value(pg, i) {
            LeafValue::Inline(_) => {}
            LeafValue::Overflow(len, first) => {
                let mut sh = Self::lock(&self.shared, &self.source);
                self.val.clear();
                btree::read_overflow(&mut *sh, len, first, &mut self.val)?;
                return Ok(&self.val);
            }
        }
        let (pg, i) = self.stack.leaf().expect("invariant: checked above");
        match page::leaf_value(pg, i) {
            LeafValue::Inline(v) => Ok(v),
            LeafValue::Overflow(..) => unreachable!("invariant: checked above"),
        }
    }
}

/// Entries between two bounds, in either direction: `while range.next()? { range.key() ... }`.
pub struct Range<F: BlockFile> {
    cursor: Cursor<F>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
}

/// `b` as an owned bound, made in `buf`'s room (taken from it; an unbounded end leaves it).
fn own_into(b: Bound<&[u8]>, buf: &mut Vec<u8>) -> Bound<Vec<u8>> {
    let mut fill = |k: &[u8]| {
        let mut v = std::mem::take(buf);
        v.clear();
        v.extend_from_slice(k);
        v
    };
    match b {
        Bound::Included(k) => Bound::Included(fill(k)),
        Bound::Excluded(k) => Bound::Excluded(fill(k)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl<F: BlockFile> Drop for Range<F> {
    fn drop(&mut self) {
        // The bounds' buffers go back to the cursor, which keeps them for the next one.
        for (b, slot) in [
            (&mut self.lower, &mut self.cursor.bounds.0),
            (&mut self.upper, &mut self.cursor.bounds.1),
        ] {
            if let Bound::Included(k) | Bound::Excluded(k) = std::mem::replace(b, Bound::Unbounded)
            {
                *slot = k;
            }
        }
    }
}

impl<F: BlockFile> Range<F> {
    pub(super) fn new(
        mut cursor: Cursor<F>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Self {
        let lower = own_into(lower, &mut cursor.bounds.0);
        let upper = own_into(upper, &mut cursor.bounds.1);
        Range {
            cursor,
            lower,
            upper,
            reverse,
            started: false,
        }
    }

    /// Steps to the next entry in range; returns false at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<bool> {
        let ok = if !self.started {
            self.started = true;
            if !self.reverse {
                match &self.lower {
                    Bound::Unbounded => self.cursor.first()?,
                    Bound::Included(k) => self.cursor.seek(k, Seek::Ge)?,
                    Bound::Excluded(k) => self.cursor.seek(k, Seek::Gt)?,
                }
            } else {
                match &self.upper {
                    Bound::Unbounded => self.cursor.last()?,
                    Bound::Included(k) => self.cursor.seek(k, Seek::Le)?,
                    Bound::Excluded(k) => self.cursor.seek(k, Seek::Lt)?,
                }
            }
        } else if self.reverse {
            self.cursor.prev()?
        } else {
            self.cursor.next()?
        };
        if !ok {
            return Ok(false);
        }
        // An unbounded end needs no key: a whole-tree scan does not look at one per entry.
        let far = if self.reverse {
            &self.lower
        } else {
            &self.upper
        };
        if matches!(far, Bound::Unbounded) {
            return Ok(true);
        }
        let k = self.cursor.key().expect("invariant: cursor on an entry");
        let inside = btree::within(k, as_ref(far), !self.reverse);
        if !inside {
            self.cursor.stack.levels.clear();
        }
        Ok(inside)
    }

    pub fn key(&self) -> &[u8] {
        self.cursor.key().unwrap_or(&[])
    }

    pub fn value(&mut self) -> Result<&[u8]> {
        self.cursor.value()
    }

    /// Hands the rest of the range to `f`, entry by entry (key, value), until `f` returns false;
    /// returns whether the range ran out (true) or `f` stopped it (false). The entries of a leaf
    /// are read one after another from the page the cursor holds, instead of through a step of
    /// the cursor each (what a scan spends most of its time on otherwise); only moving to the
    /// next leaf is a step. If `f` changes the tree (in a write transaction), the cursor finds
    /// its place again by key, as a step would.
    pub fn for_each<E, G>(&mut self, mut f: G) -> std::result::Result<bool, E>
    where
        E: From<Error>,
        G: FnMut(&[u8], &[u8]) -> std::result::Result<bool, E>,
    {
        while self.next()? {
            let Some((pg, first)) = self.cursor.stack.leaf().map(|(p, i)| (p.clone(), i)) else {
                return Ok(true);
            };
            let far = if self.reverse {
                as_ref(&self.lower)
            } else {
                as_ref(&self.upper)
            };
            let bounded = !matches!(far, Bound::Unbounded);
            let n = page::count(&pg);
            let mut i = first;
            loop {
                let (key, value) = page::leaf_entry(&pg, i);
                // `next` checked the first entry.
                if bounded && i != first && !btree::within(key, far, !self.reverse) {
                    self.cursor.stack.levels.clear();
                    return Ok(true);
                }
                let go = match value {
                    LeafValue::Inline(v) => f(key, v)?,
                    LeafValue::Overflow(len, page_id) => {
                        let mut val = std::mem::take(&mut self.cursor.val);
                        val.clear();
                        let read = {
                            let mut sh = Cursor::lock(&self.cursor.shared, &self.cursor.source);
                            btree::read_overflow(&mut *sh, len, page_id, &mut val)
                        };
                        let go = read.map_err(E::from).and_then(|()| f(key, &val));
                        self.cursor.val = val;
                        go?
                    }
                };
                let last = if self.reverse { i == 0 } else { i + 1 >= n };
                if !go || last || !self.cursor.unchanged() {
                    // The cursor stays on the entry just handled: the next step leaves it.
                    if let Some(top) = self.cursor.stack.levels.last_mut() {
                        top.1 = i;
                    }
                    if !go {
                        return Ok(false);
                    }
                    break;
                }
                i = if self.reverse { i - 1 } else { i + 1 };
            }
        }
        Ok(true)
    }

    /// Steps past up to `n` entries of the range unread (an OFFSET); returns how many it
    /// passed, fewer than `n` only where the range ran out. A leaf whose entries up to the
    /// `n`th all lie in range is passed by its entry count alone, not entry by entry; only the
    /// leaf where the far bound falls is walked one entry at a time.
    pub fn skip(&mut self, n: u64) -> Result<u64> {
        let mut passed = 0;
        while passed < n {
            if !self.next()? {
                break;
            }
            let Some((pg, i)) = self.cursor.stack.leaf() else {
                break;
            };
            // Entries from the current one to the leaf's end, the current one included.
            let left = if self.reverse {
                i + 1
            } else {
                page::count(pg) - i
            };
            let take = usize::try_from(n - passed).map_or(left, |m| m.min(left));
            let j = if self.reverse {
                i + 1 - take
            } else {
                i + take - 1
            };
            let far = if self.reverse {
                as_ref(&self.lower)
            } else {
                as_ref(&self.upper)
            };
            // `next` checked entry i; entry j is the last one passed, so it must be in range.
            let to = if matches!(far, Bound::Unbounded)
                || btree::within(page::leaf_entry(pg, j).0, far, !self.reverse)
            {
                j
            } else {
                i
            };
            passed += to.abs_diff(i) as u64 + 1;
            // The cursor stays on the last entry passed: the next step leaves it.
            if let Some(top) = self.cursor.stack.levels.last_mut() {
                top.1 = to;
            }
        }
        Ok(passed)
    }

    /// The current value if it is inline; see [`Cursor::inline_value`].
    pub fn inline_value(&self) -> Option<&[u8]> {
        self.cursor.inline_value()
    }

    /// The current key and value together.
    pub fn entry(&mut self) -> Result<(&[u8], &[u8])> {
        self.cursor.entry()
    }

    /// Collects the rest of the range (for tests and small scans; allocates per entry).
    pub fn collect_all(&mut self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        while self.next()? {
            let k = self.key().to_vec();
            out.push((k, self.value()?.to_vec()));
        }
        Ok(out)
    }
}
