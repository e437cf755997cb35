//! A small in-place sort for the store's lists: dirty page ids at commit, the superblock's list,
//! the two superblock slots, index entries in the integrity check, file names.
//!
//! std's sorts are faster on large inputs but compile to 4-5 KB of wasm for each element type
//! they are used with (driftsort and ipnsort bring their own small-sort networks, merges and
//! partitions); a heapsort is a few hundred bytes per type, and these lists are either short or
//! sorted once per commit or check, next to I/O that costs far more. Not stable.
//!
//! Tried for the SQL engine's row sorts and not kept: a stable merge sort over the elements'
//! positions (one small copy per element type, then the elements put in the order found). It
//! took 0.9 KB gzip off `cairn.wasm` and looked cheap by instruction counts (order-limit +0.9%),
//! but sorting 10,000 and 100,000 rows natively it took 2.4 and 2.3 times std's `sort_by`: the
//! reads through positions and the final reordering miss the cache. A byte-key variant for
//! CREATE INDEX's entries (each key's first eight bytes compared as a number) counted 13.5% fewer
//! instructions than std's unstable sort and ran 19% slower (create-index in a file 0.96 ->
//! 1.15 of SQLite's time, alternating runs).

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
    fn sort_by_descending() {
        let mut v = vec![(1, 'a'), (3, 'b'), (2, 'c')];
        sort_by(&mut v, |a, b| a.0 > b.0);
        assert_eq!(v, [(3, 'b'), (2, 'c'), (1, 'a')]);
    }
}
