//! Small sorts, for the download's sake. std's sorts compile to 4-5 KB of wasm for each element
//! type they are used with (driftsort and ipnsort bring their own small-sort networks, merges and
//! partitions).
//!
//! `sort_by`: an in-place heapsort, a few hundred bytes per type, for the store's lists (dirty
//! page ids at commit, the superblock's list, the two superblock slots, index entries in the
//! integrity check, file names), which are either short or sorted once per commit or check, next
//! to I/O that costs far more. Not stable.
//!
//! `stable_sort_by`: a merge sort over the elements' positions, about 0.5 KB per element type,
//! for the SQL engine's sorts of rows (ORDER BY, its top k) and of an index probe's ranges, which
//! must keep equal elements in order. Against std's stable sort it took 0.9 KB gzip off
//! `cairn.wasm` and cost order-limit 0.9% more instructions (native, callgrind). CREATE INDEX
//! keeps std's unstable sort: this one made it 5.6% slower in instructions (the indirection
//! through positions, over 10,000 entries), for 1.1 KB more.

use std::cmp::Ordering;

/// Sorts `v` so that `less(b, a)` is false for every `a` before `b`.
pub fn sort_by<T>(v: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    // Sift `root` down within `v[..end]`: the max-heap property, children at 2i+1 and 2i+2.
    let mut sift = |v: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[root], &v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    };
    let n = v.len();
    for i in (0..n / 2).rev() {
        sift(v, i, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

/// Sorts `v` in ascending order.
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, |a, b| a < b);
}

/// Sorts `v` by `cmp`, keeping equal elements in their order, as `slice::sort_by` does: the
/// merge sort runs over the elements' positions, then `v` is put in the order found.
pub fn stable_sort_by<T>(v: &mut Vec<T>, mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = {
        let v = &*v;
        sorted_positions(v.len(), |a, b| cmp(&v[a as usize], &v[b as usize]))
    };
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend((order.iter()).map(|&i| {
        slots[i as usize]
            .take()
            .expect("invariant: each position once")
    }));
}

/// `0..n` in the order `cmp` gives them, equal ones in ascending order: runs of `RUN` sorted by
/// insertion, then merged bottom-up (a merge whose halves are already in order is a copy).
fn sorted_positions(n: usize, mut cmp: impl FnMut(u32, u32) -> Ordering) -> Vec<u32> {
    const RUN: usize = 8;
    let mut a: Vec<u32> = (0..n as u32).collect();
    for start in (0..n).step_by(RUN) {
        for i in start + 1..(start + RUN).min(n) {
            let mut j = i;
            while j > start && cmp(a[j - 1], a[j]) == Ordering::Greater {
                a.swap(j - 1, j);
                j -= 1;
            }
        }
    }
    let mut b = vec![0u32; n];
    let mut width = RUN;
    while width < n {
        for lo in (0..n).step_by(2 * width) {
            let (mid, hi) = ((lo + width).min(n), (lo + 2 * width).min(n));
            if mid == hi || cmp(a[mid - 1], a[mid]) != Ordering::Greater {
                b[lo..hi].copy_from_slice(&a[lo..hi]);
                continue;
            }
            let (mut i, mut j) = (lo, mid);
            for slot in &mut b[lo..hi] {
                // The left run first on a tie: that keeps the sort stable.
                if j == hi || i < mid && cmp(a[i], a[j]) != Ordering::Greater {
                    *slot = a[i];
                    i += 1;
                } else {
                    *slot = a[j];
                    j += 1;
                }
            }
        }
        std::mem::swap(&mut a, &mut b);
        width *= 2;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_std() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for n in [0, 1, 2, 3, 7, 16, 100, 1000] {
            let mut v: Vec<u32> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 50) as u32
                })
                .collect();
            let mut want = v.clone();
            want.sort();
            sort(&mut v);
            assert_eq!(v, want, "n = {n}");
        }
    }

    #[test]
    fn stable_sort_keeps_ties_in_order_as_std_does() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for n in [0, 1, 2, 7, 8, 9, 16, 17, 100, 1000, 4099] {
            // Few distinct keys, many ties; the second field tells the ties apart.
            let mut v: Vec<(u32, usize)> = (0..n)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed % 13) as u32, i)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|a| a.0);
            stable_sort_by(&mut v, |a, b| a.0.cmp(&b.0));
            assert_eq!(v, want, "n = {n}");
            // Already in order, and in reverse order, as a merge that is a copy meets them.
            stable_sort_by(&mut v, |a, b| a.0.cmp(&b.0));
            assert_eq!(v, want, "sorted again, n = {n}");
            stable_sort_by(&mut v, |a, b| b.0.cmp(&a.0));
            want.sort_by_key(|a| std::cmp::Reverse(a.0));
            assert_eq!(v, want, "descending, n = {n}");
        }
        // Elements that own memory move, none is copied or lost.
        let mut words: Vec<String> = ["pear", "fig", "apple", "fig", "kiwi"]
            .map(String::from)
            .to_vec();
        stable_sort_by(&mut words, |a, b| a.len().cmp(&b.len()));
        assert_eq!(words, ["fig", "fig", "pear", "kiwi", "apple"]);
    }

    #[test]
    fn sort_by_descending() {
        let mut v = vec![(1, 'a'), (3, 'b'), (2, 'c')];
        sort_by(&mut v, |a, b| a.0 > b.0);
        assert_eq!(v, [(3, 'b'), (2, 'c'), (1, 'a')]);
    }
}
