//! The free-page set the allocator takes pages from (`WriteState::free` in `db`, kept by the
//! store between write transactions): loaded from the free tree by the first write transaction,
//! then kept in step with it in memory.

/// The free pages, as a bitmap over page numbers, with a second bitmap that marks which words of
/// the first are not zero.
///
/// Instead of a `BTreeSet<u32>`: what the allocator does on every page it frees or takes (insert
/// one, remove one, take the lowest) is a few word operations here, where a B-tree walks nodes and
/// allocates; finding the lowest scans the summary, one bit per 4096 pages (one word up to 16 MiB
/// of file). It costs one bit per page up to the highest free one (32 KiB for a 1 GiB file), and
/// the wasm module no B-tree code of its own.
#[derive(Default)]
pub struct FreePages {
    bits: Vec<u64>,
    /// Bit `i` set exactly when `bits[i] != 0`.
    nonzero: Vec<u64>,
    len: usize,
    /// No run of `no_run.1` or more free pages starts below page `no_run.0` (what the last
    /// [`FreePages::first_run`] learned; inserts lower it, removes cannot make it false), so a
    /// set of many short runs is not scanned again by every transaction.
    no_run: (u32, u32),
}

fn split(id: u32) -> (usize, u32) {
    (id as usize / 64, id % 64)
}

fn join(word: usize, bits: u64) -> u32 {
    (word * 64) as u32 + bits.trailing_zeros()
}

impl FreePages {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn contains(&self, id: &u32) -> bool {
        let (w, b) = split(*id);
        self.bits.get(w).is_some_and(|x| x >> b & 1 == 1)
    }

    /// Adds `id`; says whether it was not there.
    pub fn insert(&mut self, id: u32) -> bool {
        let (w, b) = split(id);
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
            self.nonzero.resize(w / 64 + 1, 0);
        }
        if self.bits[w] >> b & 1 == 1 {
            return false;
        }
        self.bits[w] |= 1 << b;
        self.nonzero[w / 64] |= 1 << (w % 64);
        self.len += 1;
        // A run through `id` starts no lower than `id + 1 - n`.
        let low = (id + 1).saturating_sub(self.no_run.1);
        self.no_run.0 = self.no_run.0.min(low);
        true
    }

    /// Removes `id`; says whether it was there.
    pub fn remove(&mut self, id: &u32) -> bool {
        let (w, b) = split(*id);
        match self.bits.get_mut(w) {
            Some(x) if *x >> b & 1 == 1 => {
                *x &= !(1 << b);
                if *x == 0 {
                    self.nonzero[w / 64] &= !(1 << (w % 64));
                }
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// The lowest free page at or past `from`.
    fn next(&self, from: u32) -> Option<u32> {
        let (w, b) = split(from);
        let x = *self.bits.get(w)? & (u64::MAX << b);
        if x != 0 {
            return Some(join(w, x));
        }
        let w = w + 1;
        let mut s = w / 64;
        let mut m = *self.nonzero.get(s)? & (u64::MAX << (w % 64));
        loop {
            if m != 0 {
                let w = s * 64 + m.trailing_zeros() as usize;
                return Some(join(w, self.bits[w]));
            }
            s += 1;
            m = *self.nonzero.get(s)?;
        }
    }

    /// The first page at or past `from` that is not free.
    fn run_end(&self, from: u32) -> u32 {
        let (mut w, b) = split(from);
        // Ones below `b` count as taken, so the first zero is at or past `b`.
        let mut x = !(self.bits.get(w).copied().unwrap_or(0) | !(u64::MAX << b));
        loop {
            if x != 0 {
                return join(w, x);
            }
            w += 1;
            x = !self.bits.get(w).copied().unwrap_or(0);
        }
    }

    /// The lowest page that starts a run of at least `n` free pages, if any.
    pub fn first_run(&mut self, n: u32) -> Option<u32> {
        let n = n.max(1);
        let (below, of) = self.no_run;
        let mut at = if n >= of { below } else { 0 };
        let found = loop {
            let Some(start) = self.next(at) else {
                break None;
            };
            let end = self.run_end(start);
            if end <= start {
                // Past the last page number (the word's number wrapped): no page there.
                break None;
            }
            if end - start >= n {
                break Some(start);
            }
            at = end;
        };
        self.no_run = (found.unwrap_or(u32::MAX), n);
        found
    }

    /// The start of the longest run among the lowest `runs` runs of free pages (the lowest of
    /// equal ones), if any page is free.
    pub fn longest_run(&self, runs: usize) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        let mut at = 0;
        for _ in 0..runs {
            let Some(start) = self.next(at) else {
                break;
            };
            let end = self.run_end(start);
            if end <= start {
                break;
            }
            if best.is_none_or(|(_, n)| end - start > n) {
                best = Some((start, end - start));
            }
            at = end;
        }
        best.map(|(start, _)| start)
    }

    /// The lowest free page.
    pub fn first(&self) -> Option<u32> {
        self.next(0)
    }

    /// Takes the lowest free page.
    #[cfg(test)]
    pub fn pop_first(&mut self) -> Option<u32> {
        let id = self.next(0)?;
        self.remove(&id);
        Some(id)
    }

    /// The free pages at or past `from`, in order.
    pub fn iter_from(&self, from: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(self.next(from), |&id| self.next(id.checked_add(1)?))
    }

    /// Keeps only the pages `keep` says to.
    pub fn retain(&mut self, mut keep: impl FnMut(&u32) -> bool) {
        let mut at = self.next(0);
        while let Some(id) = at {
            if !keep(&id) {
                self.remove(&id);
            }
            at = id.checked_add(1).and_then(|n| self.next(n));
        }
    }
}

impl Extend<u32> for FreePages {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, ids: I) {
        for id in ids {
            self.insert(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FreePages;
    use std::collections::BTreeSet;

    /// Random operations against a `BTreeSet` model, with page numbers spread so words, summary
    /// words and the ends of both are all crossed.
    #[test]
    fn matches_a_btreeset() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..40 {
            let span = [64u64, 200, 4096, 5000, 70_000][round % 5];
            let (mut set, mut model) = (FreePages::default(), BTreeSet::new());
            for _ in 0..3000 {
                let id = (rand() % span) as u32;
                match rand() % 8 {
                    0..=2 => assert_eq!(set.insert(id), model.insert(id)),
                    3 => assert_eq!(set.remove(&id), model.remove(&id)),
                    4 => assert_eq!(set.pop_first(), model.pop_first()),
                    7 if rand() % 4 == 0 => {
                        let n = (rand() % 6 + 1) as u32;
                        let want = model
                            .iter()
                            .copied()
                            .find(|&p| (p..p.saturating_add(n)).all(|q| model.contains(&q)));
                        assert_eq!(set.first_run(n), want, "first run of {n}");
                        let (mut best, mut best_len, mut runs) = (None, 0, 0);
                        let mut it = model.iter().copied().peekable();
                        while let Some(start) = it.next() {
                            runs += 1;
                            if runs > 5 {
                                break;
                            }
                            let mut end = start + 1;
                            while it.peek() == Some(&end) {
                                it.next();
                                end += 1;
                            }
                            if end - start > best_len {
                                (best, best_len) = (Some(start), end - start);
                            }
                        }
                        assert_eq!(set.longest_run(5), best, "longest of five runs");
                    }
                    5 => assert_eq!(set.contains(&id), model.contains(&id)),
                    6 => assert!(set.iter_from(id).eq(model.range(id..).copied())),
                    _ if rand() % 50 == 0 => {
                        set.retain(|&p| p < id);
                        model.retain(|&p| p < id);
                    }
                    _ => {
                        set.extend([id, id / 2]);
                        model.extend([id, id / 2]);
                    }
                }
                assert_eq!(set.len(), model.len());
            }
            assert!(set.iter_from(0).eq(model.iter().copied()));
            assert_eq!(set.iter_from(u32::MAX).next(), None);
        }
    }

    #[test]
    fn pages_far_apart() {
        let mut set = FreePages::default();
        assert!(set.insert(1 << 22));
        assert!(set.insert(3));
        assert!(set.iter_from(0).eq([3, 1 << 22]));
        assert_eq!(set.iter_from(4).next(), Some(1 << 22));
        assert_eq!(set.pop_first(), Some(3));
        assert_eq!(set.pop_first(), Some(1 << 22));
        assert_eq!(set.pop_first(), None);
        assert_eq!(set.iter_from(u32::MAX).next(), None);
    }
}
