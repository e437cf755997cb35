//! Byte layout of tree pages (`docs/file-format.md`, "Pages that hold trees"): the common header,
//! slotted leaf and branch nodes, overflow pages. Functions here take page bytes and never do
//! I/O. Pages read from disk pass [`validate`] once when they enter the cache, so the accessors
//! below can index without re-checking bounds on every call (a page that fails is reported as
//! corrupt, never indexed).

use crate::error::Error;
use std::cmp::Ordering;

pub const HDR: usize = 32;
pub const KIND_LEAF: u8 = 1;
pub const KIND_BRANCH: u8 = 2;
pub const KIND_OVERFLOW: u8 = 3;
pub const OVERFLOW_BIT: u32 = 1 << 31;
/// Bytes of a cell before its key: u16 key length, u32 value field or child.
pub const CELL_HDR: usize = 6;

// Read through one fixed-size array: one bounds check per field, not one per byte (these
// run several times for every entry a scan passes).
#[inline]
pub fn get_u16(p: &[u8], at: usize) -> usize {
    let mut a = [0u8; 2];
    a.copy_from_slice(&p[at..at + 2]);
    u16::from_le_bytes(a) as usize
}
#[inline]
pub fn get_u32(p: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&p[at..at + 4]);
    u32::from_le_bytes(a)
}
#[inline]
pub fn get_u64(p: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&p[at..at + 8]);
    u64::from_le_bytes(a)
}
#[inline]
pub fn put_u16(p: &mut [u8], at: usize, v: usize) {
    p[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}
#[inline]
pub fn put_u32(p: &mut [u8], at: usize, v: u32) {
    p[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub fn put_u64(p: &mut [u8], at: usize, v: u64) {
    p[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn kind(p: &[u8]) -> u8 {
    p[16]
}
#[inline]
pub fn count(p: &[u8]) -> usize {
    get_u16(p, 18)
}
#[inline]
fn set_count(p: &mut [u8], n: usize) {
    put_u16(p, 18, n)
}
#[inline]
fn content_start(p: &[u8]) -> usize {
    get_u32(p, 20) as usize
}
#[inline]
fn set_content_start(p: &mut [u8], v: usize) {
    put_u32(p, 20, v as u32)
}
#[inline]
pub fn right(p: &[u8]) -> u32 {
    get_u32(p, 24)
}
#[inline]
pub fn set_right(p: &mut [u8], v: u32) {
    put_u32(p, 24, v)
}
#[inline]
fn dead(p: &[u8]) -> usize {
    get_u32(p, 28) as usize
}
#[inline]
fn set_dead(p: &mut [u8], v: usize) {
    put_u32(p, 28, v as u32)
}
pub fn txn(p: &[u8]) -> u64 {
    get_u64(p, 8)
}

/// Most bytes one cell (with its slot) may take: a node always holds at least four.
pub fn max_cell(page_size: usize) -> usize {
    (page_size - HDR) / 4 - 2
}
/// Longest key accepted.
pub fn max_key(page_size: usize) -> usize {
    max_cell(page_size) - CELL_HDR - 4
}
/// Bytes a node may hold in slots and cells.
pub fn capacity(page_size: usize) -> usize {
    page_size - HDR
}

/// Starts an empty node of `kind` in `p`.
pub fn init(p: &mut [u8], kind: u8) {
    p[..HDR].fill(0);
    p[16] = kind;
    let len = p.len();
    set_content_start(p, len);
}

#[inline]
pub fn slot(p: &[u8], i: usize) -> usize {
    get_u16(p, HDR + 2 * i)
}

/// The size of the cell at offset `off` of a node of `kind`.
#[inline]
pub fn cell_size_at(p: &[u8], off: usize, kind: u8) -> usize {
    let klen = get_u16(p, off);
    if kind == KIND_BRANCH {
        CELL_HDR + klen
    } else {
        let vf = get_u32(p, off + 2);
        CELL_HDR
            + klen
            + if vf & OVERFLOW_BIT != 0 {
                4
            } else {
                vf as usize
            }
    }
}

#[inline]
pub fn key(p: &[u8], i: usize) -> &[u8] {
    let off = slot(p, i);
    let klen = get_u16(p, off);
    &p[off + CELL_HDR..off + CELL_HDR + klen]
}

/// A leaf's value at `i`: inline bytes, or (total length, first overflow page).
pub enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow(usize, u32),
}

#[inline]
pub fn leaf_value(p: &[u8], i: usize) -> LeafValue<'_> {
    leaf_entry(p, i).1
}

/// A leaf's key and value at `i`, from one read of the cell's header.
#[inline]
pub fn leaf_entry(p: &[u8], i: usize) -> (&[u8], LeafValue<'_>) {
    let off = slot(p, i);
    let klen = get_u16(p, off);
    let vf = get_u32(p, off + 2);
    let start = off + CELL_HDR + klen;
    let key = &p[off + CELL_HDR..start];
    if vf & OVERFLOW_BIT != 0 {
        (
            key,
            LeafValue::Overflow((vf & !OVERFLOW_BIT) as usize, get_u32(p, start)),
        )
    } else {
        (key, LeafValue::Inline(&p[start..start + vf as usize]))
    }
}

/// The raw bytes of cell `i`.
pub fn cell(p: &[u8], i: usize) -> &[u8] {
    let off = slot(p, i);
    &p[off..off + cell_size_at(p, off, kind(p))]
}

/// Child `idx` of a branch (`idx == count` is the rightmost).
#[inline]
pub fn child(p: &[u8], idx: usize) -> u32 {
    if idx < count(p) {
        get_u32(p, slot(p, idx) + 2)
    } else {
        right(p)
    }
}

pub fn set_child(p: &mut [u8], idx: usize, id: u32) {
    if idx < count(p) {
        let off = slot(p, idx) + 2;
        put_u32(p, off, id)
    } else {
        set_right(p, id)
    }
}

/// The first eight bytes of `k` as a big-endian number, zero-padded when `k` is shorter. Where
/// two keys' prefixes differ they sort as these numbers do: a shorter key's padding sorts
/// below whatever byte the other key has there.
#[inline]
fn prefix(k: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    match k.get(..8) {
        Some(x) => a.copy_from_slice(x),
        None => a[..k.len()].copy_from_slice(k),
    }
    u64::from_be_bytes(a)
}

/// Bytewise order of the key of the cell at `off` against `k`, whose [`prefix`] is `kx`. Most
/// comparisons are decided by the prefixes: the key's is one load from the page, its bytes past
/// the key's end masked off, so a short key (a branch's separator is a few bytes) costs no
/// more than a long one and neither calls `memcmp`.
#[inline]
fn cmp_cell_key(p: &[u8], off: usize, k: &[u8], kx: u64) -> Ordering {
    let klen = get_u16(p, off);
    let at = off + CELL_HDR;
    let x = match p.get(at..at + 8) {
        Some(w) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            let mask = !u64::MAX.checked_shr(8 * klen.min(8) as u32).unwrap_or(0);
            u64::from_be_bytes(a) & mask
        }
        // A short key in the last bytes of the page.
        None => prefix(&p[at..at + klen]),
    };
    if x != kx {
        return x.cmp(&kx);
    }
    p[at..at + klen].cmp(k)
}

/// Binary search: `Ok(i)` when key `i` equals `k`, else `Err(insertion point)`.
#[inline]
pub fn search(p: &[u8], k: &[u8]) -> std::result::Result<usize, usize> {
    let kx = prefix(k);
    let (mut lo, mut hi) = (0, count(p));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match cmp_cell_key(p, slot(p, mid), k, kx) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// [`search`] for a key that mostly sorts after every key of the node (rows inserted in key
/// order land at the end of the last leaf): one comparison with the last key decides that
/// case, where the binary search makes a comparison per halving.
#[inline]
pub fn search_append(p: &[u8], k: &[u8]) -> std::result::Result<usize, usize> {
    let n = count(p);
    if n > 0 && cmp_cell_key(p, slot(p, n - 1), k, prefix(k)) == Ordering::Less {
        return Err(n);
    }
    search(p, k)
}

/// Which child of a branch may hold `k`.
#[inline]
pub fn child_index(p: &[u8], k: &[u8]) -> usize {
    match search(p, k) {
        Ok(i) => i + 1,
        Err(i) => i,
    }
}

/// Bytes used by slots and cells.
pub fn used(p: &[u8]) -> usize {
    2 * count(p) + (p.len() - content_start(p)) - dead(p)
}

/// Reserves room for a cell of `size` bytes at slot `i`, defragmenting if that makes room.
/// Returns the cell's offset, or `None` when the node is too full.
pub fn reserve(p: &mut [u8], i: usize, size: usize) -> Option<usize> {
    let n = count(p);
    let slots_end = HDR + 2 * n;
    let mut start = content_start(p);
    if start < slots_end + 2 + size {
        if start - slots_end + dead(p) < 2 + size {
            return None;
        }
        defragment(p);
        start = content_start(p);
    }
    let off = start - size;
    set_content_start(p, off);
    p.copy_within(HDR + 2 * i..slots_end, HDR + 2 * i + 2);
    put_u16(p, HDR + 2 * i, off);
    set_count(p, n + 1);
    Some(off)
}

/// Rewrites the inline value of leaf cell `i` where the cell is, with `value` no longer than
/// the old one: the bytes it no longer needs become dead space, zeroed.
pub fn shrink_value(p: &mut [u8], i: usize, value: &[u8]) {
    let off = slot(p, i);
    let klen = get_u16(p, off);
    let old = get_u32(p, off + 2) as usize;
    assert!(
        old & OVERFLOW_BIT as usize == 0 && value.len() <= old,
        "invariant: an inline value shrinks in place"
    );
    put_u32(p, off + 2, value.len() as u32);
    let start = off + CELL_HDR + klen;
    p[start..start + value.len()].copy_from_slice(value);
    p[start + value.len()..start + old].fill(0);
    let d = dead(p);
    set_dead(p, d + old - value.len());
}

/// Replaces the inline value of leaf cell `i` with `value`, also inline, within the page: in
/// place when it is no longer ([`shrink_value`]), else by growing the cell into the free gap
/// when the gap holds the growth, else by removing the cell and reserving room for the longer
/// one at the same slot (gathering the page's free space).
/// False, with the page unchanged, when the longer cell does not fit, or would be more than
/// a cell may hold.
pub fn rewrite_value(p: &mut [u8], i: usize, value: &[u8]) -> bool {
    let off = slot(p, i);
    let klen = get_u16(p, off);
    let old = get_u32(p, off + 2) as usize;
    assert!(
        old & OVERFLOW_BIT as usize == 0,
        "invariant: an inline value is rewritten in its page"
    );
    if value.len() == old {
        // As long as the old value (an UPDATE of numbers of the same width): over its bytes.
        let start = off + CELL_HDR + klen;
        p[start..start + old].copy_from_slice(value);
        return true;
    }
    if value.len() < old {
        shrink_value(p, i, value);
        return true;
    }
    let size = CELL_HDR + klen + value.len();
    if size > max_cell(p.len()) || used(p) + (value.len() - old) > capacity(p.len()) {
        return false;
    }
    let d = value.len() - old;
    let n = count(p);
    let start = content_start(p);
    if start - (HDR + 2 * n) >= d {
        // The free gap holds the growth: the cell's header and key, and every cell between the
        // gap and it, move down by `d` (one move, and their slots adjusted), and the value then
        // ends where it ended. Gathering the page's free space instead copies the whole page,
        // and leaves the old cell as dead space for the next growth to gather again.
        let end = off + CELL_HDR + klen;
        p.copy_within(start..end, start - d);
        for j in 0..n {
            let o = slot(p, j);
            if o <= off {
                put_u16(p, HDR + 2 * j, o - d);
            }
        }
        set_content_start(p, start - d);
        put_u32(p, off - d + 2, value.len() as u32);
        p[end - d..end + old].copy_from_slice(value);
        return true;
    }
    // The key moves with the cell: copied before the cell's bytes are zeroed.
    let mut key = [0u8; 64];
    let mut long = Vec::new();
    let k: &[u8] = if klen <= key.len() {
        key[..klen].copy_from_slice(&p[off + CELL_HDR..off + CELL_HDR + klen]);
        &key[..klen]
    } else {
        long.extend_from_slice(&p[off + CELL_HDR..off + CELL_HDR + klen]);
        &long
    };
    remove(p, i);
    let at = reserve(p, i, size).expect("invariant: the room was counted above");
    put_u16(p, at, klen);
    put_u32(p, at + 2, value.len() as u32);
    p[at + CELL_HDR..at + CELL_HDR + klen].copy_from_slice(k);
    p[at + CELL_HDR + klen..at + size].copy_from_slice(value);
    true
}

/// Removes cell `i` (its bytes become dead space, zeroed: a deleted value does not linger in a
/// live page).
pub fn remove(p: &mut [u8], i: usize) {
    let n = count(p);
    let off = slot(p, i);
    let size = cell_size_at(p, off, kind(p));
    p[off..off + size].fill(0);
    if off == content_start(p) {
        set_content_start(p, off + size);
    } else {
        let d = dead(p);
        set_dead(p, d + size);
    }
    p.copy_within(HDR + 2 * (i + 1)..HDR + 2 * n, HDR + 2 * i);
    set_count(p, n - 1);
}

fn defragment(p: &mut [u8]) {
    // One copy of the page and slices into it, not a copy of every cell.
    let copy = p.to_vec();
    let cells: Vec<&[u8]> = (0..count(&copy)).map(|i| cell(&copy, i)).collect();
    let (k, r) = (kind(p), right(p));
    fill(p, k, &cells, r);
}

/// Rewrites `p` as a node of `kind` holding `cells` in order. The caller has checked they fit.
pub fn fill<C: AsRef<[u8]>>(p: &mut [u8], kind: u8, cells: &[C], right: u32) {
    let (cs, tx) = (get_u64(p, 0), txn(p));
    init(p, kind);
    put_u64(p, 0, cs);
    put_u64(p, 8, tx);
    set_right(p, right);
    let mut off = p.len();
    for (i, c) in cells.iter().enumerate() {
        let c = c.as_ref();
        off -= c.len();
        p[off..off + c.len()].copy_from_slice(c);
        put_u16(p, HDR + 2 * i, off);
    }
    // The gap held whatever the page held before: zero it, so no removed cell survives a rewrite.
    p[HDR + 2 * cells.len()..off].fill(0);
    set_content_start(p, off);
    set_count(p, cells.len());
}

/// Zeroes the free gap between a node's slots and its cells.
pub fn zero_gap(p: &mut [u8]) {
    let (from, to) = (HDR + 2 * count(p), content_start(p));
    p[from..to].fill(0);
}

/// All cells of a node, copied.
pub fn cells(p: &[u8]) -> Vec<Vec<u8>> {
    (0..count(p)).map(|i| cell(p, i).to_vec()).collect()
}

/// Writes a leaf cell into `out`.
pub fn leaf_cell(out: &mut Vec<u8>, k: &[u8], value_field: u32, v: &[u8]) {
    out.clear();
    out.extend_from_slice(&(k.len() as u16).to_le_bytes());
    out.extend_from_slice(&value_field.to_le_bytes());
    out.extend_from_slice(k);
    out.extend_from_slice(v);
}

pub fn branch_cell(k: &[u8], left: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(CELL_HDR + k.len());
    out.extend_from_slice(&(k.len() as u16).to_le_bytes());
    out.extend_from_slice(&left.to_le_bytes());
    out.extend_from_slice(k);
    out
}

/// The key of a raw cell.
pub fn cell_key(c: &[u8]) -> &[u8] {
    let klen = get_u16(c, 0);
    &c[CELL_HDR..CELL_HDR + klen]
}
pub fn cell_child(c: &[u8]) -> u32 {
    get_u32(c, 2)
}

/// Checks that a page read from disk is a well-formed node or overflow page, so the accessors
/// above cannot index out of bounds. Says what is wrong.
pub fn validate(p: &[u8]) -> std::result::Result<(), String> {
    let len = p.len();
    match kind(p) {
        KIND_OVERFLOW => {
            if content_start(p) > len - HDR {
                return Err("overflow page claims more bytes than it holds".into());
            }
            Ok(())
        }
        k @ (KIND_LEAF | KIND_BRANCH) => {
            let n = count(p);
            let cs = content_start(p);
            if HDR + 2 * n > cs || cs > len {
                return Err(format!("cell area start {cs} does not fit {n} slots"));
            }
            for i in 0..n {
                let off = slot(p, i);
                if off < cs || off + CELL_HDR > len {
                    return Err(format!("slot {i} points outside the cell area"));
                }
                let klen = get_u16(p, off);
                let size = if k == KIND_BRANCH {
                    CELL_HDR + klen
                } else {
                    let vf = get_u32(p, off + 2);
                    CELL_HDR
                        + klen
                        + if vf & OVERFLOW_BIT != 0 {
                            4
                        } else {
                            vf as usize
                        }
                };
                if off + size > len {
                    return Err(format!("cell {i} runs past the end of the page"));
                }
            }
            Ok(())
        }
        k => Err(format!("unknown page kind {k}")),
    }
}

pub fn corrupt(page: u32, what: impl std::fmt::Display) -> Error {
    Error::Corrupt(format!("page {page}: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_comparison_is_bytewise() {
        let keys: [&[u8]; 12] = [
            b"",
            b"a",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgha",
            b"abcdefgi",
            b"abcdefh",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            b"\x10\x80\x00\x00\x00\x00\x00\x00\x00\x80\x00\x00",
            b"\x10\x80\x00\x00\x00\x00\x00\x01\x00\x80\x00\x00",
        ];
        // Each key as a cell's key, followed by nothing (the page's last bytes), by zeros and
        // by 0xff bytes, which the comparison must not take for the key's.
        for a in keys {
            for tail in [&[][..], &[0; 8], &[0xff; 8]] {
                let mut p = vec![0u8; 2];
                p.extend_from_slice(&(a.len() as u16).to_le_bytes());
                p.extend_from_slice(&[0; CELL_HDR - 2]);
                p.extend_from_slice(a);
                p.extend_from_slice(tail);
                for b in keys {
                    let got = cmp_cell_key(&p, 2, b, prefix(b));
                    assert_eq!(got, a.cmp(b), "{a:?} {b:?} {tail:?}");
                }
            }
        }
    }

    /// Values rewritten longer and shorter, growing into the gap or gathering the dead space,
    /// read back as a model says, with the page's byte count right and every byte outside
    /// the slots and live cells zero.
    #[test]
    fn rewrite_value_keeps_cells_and_zeroes() {
        let mut p = vec![0u8; 1024];
        init(&mut p, KIND_LEAF);
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut cell = Vec::new();
        for i in 0..12u8 {
            let (k, v) = (vec![b'k', i], vec![i; 20]);
            leaf_cell(&mut cell, &k, v.len() as u32, &v);
            let at = reserve(&mut p, i as usize, cell.len()).expect("room");
            p[at..at + cell.len()].copy_from_slice(&cell);
            model.push((k, v));
        }
        let mut seed = 7u64;
        for round in 0..400 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (seed >> 33) as usize % model.len();
            let len = (seed >> 20) as usize % 90;
            let v = vec![round as u8 | 1; len];
            if rewrite_value(&mut p, i, &v) {
                model[i].1 = v;
            }
            let mut live = vec![false; p.len()];
            live[..HDR + 2 * count(&p)].fill(true);
            for (j, (k, v)) in model.iter().enumerate() {
                assert_eq!(key(&p, j), k.as_slice());
                let LeafValue::Inline(got) = leaf_value(&p, j) else {
                    panic!("inline value");
                };
                assert_eq!(got, v.as_slice(), "round {round} cell {j}");
                let off = slot(&p, j);
                live[off..off + CELL_HDR + k.len() + v.len()].fill(true);
            }
            let cells: usize = model
                .iter()
                .map(|(k, v)| CELL_HDR + k.len() + v.len())
                .sum();
            assert_eq!(used(&p), 2 * model.len() + cells);
            assert!(p.iter().zip(&live).all(|(b, l)| *l || *b == 0));
        }
    }
}
