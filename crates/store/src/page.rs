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
/// Most bytes a leaf cell's header takes: a key length of two bytes and a value field of five.
const MAX_LEAF_HDR: usize = 7;

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
/// Longest key accepted: its cell holds the longest header and an overflow page number.
pub fn max_key(page_size: usize) -> usize {
    max_cell(page_size) - MAX_LEAF_HDR - 4
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

// A cell starts with its key's length: one byte below 0x80, else two (0x80 | the high bits, then
// the low eight), and the key follows, in leaves and branches alike (a search reads nothing
// else). Then a leaf's value field, a varint (LEB128) of `length << 1 | overflow`, and its value
// or first overflow page; a branch's left child, a u32. In memory the value field is `length`,
// with `OVERFLOW_BIT` set when the value is in overflow pages.
//
// The helpers that read and write these are inlined everywhere natively; on wasm, where every
// inlined copy is download, where the compiler sees fit (`cfg_attr` below).

/// The key length at `off` and the bytes it takes.
#[inline(always)]
fn klen_at(p: &[u8], off: usize) -> (usize, usize) {
    let b = p[off] as usize;
    if b < 0x80 {
        (b, 1)
    } else {
        (((b & 0x7f) << 8) | p[off + 1] as usize, 2)
    }
}

/// The leaf value field at `at` and the bytes it takes.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
fn vfield_at(p: &[u8], at: usize) -> (u32, usize) {
    let b = p[at] as u32;
    if b < 0x80 {
        return (b >> 1 | (b & 1) << 31, 1);
    }
    let c = p[at + 1] as u32;
    if c < 0x80 {
        // Two bytes: inline values of 64 to 8191 bytes.
        let v = (b & 0x7f) | c << 7;
        return (v >> 1 | (v & 1) << 31, 2);
    }
    vfield_long(p, at)
}

// A loop of its own, not `codec::get_varint`: with that call's `Result` here, cold as this is,
// every leaf entry read took two instructions more (order-limit's `leaf_entry`, 53 -> 55).
#[cold]
fn vfield_long(p: &[u8], at: usize) -> (u32, usize) {
    let mut v = 0u64;
    let mut i = 0;
    loop {
        let b = p[at + i];
        v |= ((b & 0x7f) as u64) << (7 * i);
        i += 1;
        if b < 0x80 || i == 5 {
            break;
        }
    }
    ((v >> 1) as u32 & !OVERFLOW_BIT | ((v as u32 & 1) << 31), i)
}

fn klen_len(klen: usize) -> usize {
    if klen < 0x80 {
        1
    } else {
        2
    }
}

/// The varint a value field is written as: `length << 1 | overflow`.
#[inline(always)]
fn vfield_varint(vf: u32) -> u64 {
    ((vf & !OVERFLOW_BIT) as u64) << 1 | (vf >> 31) as u64
}

fn vfield_len(vf: u32) -> usize {
    (64 - (vfield_varint(vf) | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes a key length at `at`; returns the bytes written.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
fn put_klen(p: &mut [u8], at: usize, klen: usize) -> usize {
    if klen < 0x80 {
        p[at] = klen as u8;
        1
    } else {
        p[at] = 0x80 | (klen >> 8) as u8;
        p[at + 1] = klen as u8;
        2
    }
}

/// Writes a leaf value field at `at`; returns the bytes written.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
fn put_vfield(p: &mut [u8], at: usize, vf: u32) -> usize {
    let mut v = vfield_varint(vf);
    if v < 0x80 {
        p[at] = v as u8;
        return 1;
    }
    let mut i = 0;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            p[at + i] = b;
            return i + 1;
        }
        p[at + i] = b | 0x80;
        i += 1;
    }
}

/// Bytes of a leaf cell's key length and value field for a key of `klen` bytes and value
/// field `vf`.
#[inline]
pub fn leaf_hdr_len(klen: usize, vf: u32) -> usize {
    klen_len(klen) + vfield_len(vf)
}

/// Bytes of a leaf cell with a key of `klen` bytes and an inline value of `vlen`.
#[inline]
pub fn leaf_cell_size(klen: usize, vlen: usize) -> usize {
    leaf_hdr_len(klen, vlen as u32) + klen + vlen
}

/// Bytes of a leaf cell whose value of `vlen` bytes is in overflow pages.
#[inline]
pub fn overflow_cell_size(klen: usize, vlen: usize) -> usize {
    leaf_hdr_len(klen, vlen as u32 | OVERFLOW_BIT) + klen + 4
}

/// Bytes of a branch cell with a key of `klen` bytes.
#[inline]
pub fn branch_cell_size(klen: usize) -> usize {
    klen_len(klen) + 4 + klen
}

/// Where the key of the cell at `off` starts, and its length.
#[inline(always)]
fn key_at(p: &[u8], off: usize) -> (usize, usize) {
    let (klen, n) = klen_at(p, off);
    (off + n, klen)
}

/// The size of the cell at offset `off` of a node of `kind`.
#[inline]
pub fn cell_size_at(p: &[u8], off: usize, kind: u8) -> usize {
    let (klen, n) = klen_at(p, off);
    if kind == KIND_BRANCH {
        n + klen + 4
    } else {
        let (vf, m) = vfield_at(p, off + n + klen);
        n + klen
            + m
            + if vf & OVERFLOW_BIT != 0 {
                4
            } else {
                vf as usize
            }
    }
}

#[inline]
pub fn key(p: &[u8], i: usize) -> &[u8] {
    let (at, klen) = key_at(p, slot(p, i));
    &p[at..at + klen]
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
    let (at, klen) = key_at(p, off);
    let (vf, m) = vfield_at(p, at + klen);
    let start = at + klen + m;
    let key = &p[at..at + klen];
    if vf & OVERFLOW_BIT != 0 {
        (
            key,
            LeafValue::Overflow((vf & !OVERFLOW_BIT) as usize, get_u32(p, start)),
        )
    } else {
        (key, LeafValue::Inline(&p[start..start + vf as usize]))
    }
}

/// Of leaf cell `i`, whose value is inline: its offset, where its value field starts (after
/// the key), the value's offset and length.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
fn inline_value_at(p: &[u8], i: usize) -> (usize, usize, usize, usize) {
    let off = slot(p, i);
    let (at, klen) = key_at(p, off);
    let (vf, m) = vfield_at(p, at + klen);
    assert!(
        vf & OVERFLOW_BIT == 0,
        "invariant: an inline value is rewritten in its page"
    );
    (off, at + klen, at + klen + m, vf as usize)
}

/// Whether leaf cell `i`'s value is in overflow pages: the value field's lowest bit, in its
/// first byte, says so.
#[inline]
pub fn leaf_overflows(p: &[u8], i: usize) -> bool {
    let (at, klen) = key_at(p, slot(p, i));
    p[at + klen] & 1 != 0
}

/// Points overflow leaf cell `i` at a new first overflow page.
pub fn set_overflow_first(p: &mut [u8], i: usize, first: u32) {
    let (at, klen) = key_at(p, slot(p, i));
    let m = vfield_at(p, at + klen).1;
    put_u32(p, at + klen + m, first);
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
        let (at, klen) = key_at(p, slot(p, idx));
        get_u32(p, at + klen)
    } else {
        right(p)
    }
}

pub fn set_child(p: &mut [u8], idx: usize, id: u32) {
    if idx < count(p) {
        let (at, klen) = key_at(p, slot(p, idx));
        put_u32(p, at + klen, id)
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

/// `PREFIX_MASK[n]` keeps the first `n` bytes of a big-endian eight-byte word.
const PREFIX_MASK: [u64; 9] = [
    0,
    0xff00_0000_0000_0000,
    0xffff_0000_0000_0000,
    0xffff_ff00_0000_0000,
    0xffff_ffff_0000_0000,
    0xffff_ffff_ff00_0000,
    0xffff_ffff_ffff_0000,
    0xffff_ffff_ffff_ff00,
    u64::MAX,
];

/// The [`prefix`] of the key at `at`, `klen` bytes long: one load from the page with the bytes
/// past the key's end masked off, so a short key (a branch's separator is a few bytes) costs
/// no more than a long one.
#[inline(always)]
fn key_prefix(p: &[u8], at: usize, klen: usize) -> u64 {
    match p.get(at..at + 8) {
        Some(w) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            u64::from_be_bytes(a) & PREFIX_MASK[klen.min(8)]
        }
        // A short key in the last bytes of the page.
        None => prefix(&p[at..at + klen]),
    }
}

/// The order of two keys whose [`prefix`]es are equal: the key of `klen` bytes at `at`, and `k`.
#[inline(always)]
fn cmp_past_prefix(p: &[u8], at: usize, klen: usize, k: &[u8]) -> Ordering {
    // Two keys of at most eight bytes: the shorter is the longer's prefix (what the longer has
    // past it is zeros), so their lengths decide, without `memcmp` (the last comparison of
    // nearly every search for a row id's key).
    if klen <= 8 && k.len() <= 8 {
        return klen.cmp(&k.len());
    }
    p[at..at + klen].cmp(k)
}

/// Bytewise order of the key of the cell at `off` against `k`, whose [`prefix`] is `kx`. Most
/// comparisons are decided by the prefixes, with no `memcmp`.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
fn cmp_cell_key(p: &[u8], off: usize, k: &[u8], kx: u64) -> Ordering {
    let (at, klen) = key_at(p, off);
    let x = key_prefix(p, at, klen);
    if x != kx {
        return x.cmp(&kx);
    }
    cmp_past_prefix(p, at, klen, k)
}

/// Binary search: `Ok(i)` when key `i` equals `k`, else `Err(insertion point)`.
#[inline]
pub fn search(p: &[u8], k: &[u8]) -> std::result::Result<usize, usize> {
    let kx = prefix(k);
    let (mut lo, mut hi) = (0, count(p));
    // The prefixes compared as numbers in the loop itself: a comparison made an `Ordering`
    // and matched cost a probe a third more instructions.
    while lo < hi {
        let mid = (lo + hi) / 2;
        let (at, klen) = key_at(p, slot(p, mid));
        let x = key_prefix(p, at, klen);
        if x < kx {
            lo = mid + 1;
        } else if x > kx {
            hi = mid;
        } else {
            match cmp_past_prefix(p, at, klen, k) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
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
    let (_, vat, start, old) = inline_value_at(p, i);
    assert!(
        value.len() <= old,
        "invariant: an inline value shrinks in place"
    );
    // The value field may get shorter; the value follows it.
    let at = vat + put_vfield(p, vat, value.len() as u32);
    p[at..at + value.len()].copy_from_slice(value);
    let (end, old_end) = (at + value.len(), start + old);
    p[end..old_end].fill(0);
    let d = dead(p);
    set_dead(p, d + old_end - end);
}

/// Replaces the inline value of leaf cell `i` with `value`, also inline, within the page: in
/// place when it is no longer ([`shrink_value`]), else by growing the cell into the free gap
/// when the gap holds the growth, else by removing the cell and reserving room for the longer
/// one at the same slot (gathering the page's free space).
/// False, with the page unchanged, when the longer cell does not fit, or would be more than
/// a cell may hold.
pub fn rewrite_value(p: &mut [u8], i: usize, value: &[u8]) -> bool {
    let (off, vat, start, old) = inline_value_at(p, i);
    if value.len() == old {
        // As long as the old value (an UPDATE of numbers of the same width): over its bytes.
        p[start..start + old].copy_from_slice(value);
        return true;
    }
    if value.len() < old {
        shrink_value(p, i, value);
        return true;
    }
    let head = vat - off; // the key's length and the key
    let size = start + old - off;
    let new_size = head + vfield_len(value.len() as u32) + value.len();
    if new_size > max_cell(p.len()) || used(p) + (new_size - size) > capacity(p.len()) {
        return false;
    }
    let d = new_size - size;
    let count = count(p);
    let content = content_start(p);
    if content - (HDR + 2 * count) >= d {
        // The free gap holds the growth: the cells between the gap and this one, and this
        // one's key, move down by `d` (one move, and their slots adjusted), and the value field
        // and value are written after the key, ending where the cell ended. Gathering the
        // page's free space instead copies the whole page, and leaves the old cell as dead
        // space for the next growth to gather again.
        p.copy_within(content..vat, content - d);
        for j in 0..count {
            let o = slot(p, j);
            if o <= off {
                put_u16(p, HDR + 2 * j, o - d);
            }
        }
        set_content_start(p, content - d);
        let at = vat - d;
        let at = at + put_vfield(p, at, value.len() as u32);
        p[at..at + value.len()].copy_from_slice(value);
        return true;
    }
    // The key moves with the cell: copied before the cell's bytes are zeroed.
    let klen = klen_at(p, off).0;
    let mut key = [0u8; 64];
    let mut long = Vec::new();
    let k: &[u8] = if klen <= key.len() {
        key[..klen].copy_from_slice(&p[vat - klen..vat]);
        &key[..klen]
    } else {
        long.extend_from_slice(&p[vat - klen..vat]);
        &long
    };
    remove(p, i);
    let at = reserve(p, i, new_size).expect("invariant: the room was counted above");
    write_leaf_cell(&mut p[at..at + new_size], k, value.len() as u32, value);
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

/// Writes a leaf cell into `c`, which is exactly its size: the key's length, `k`, the value
/// field, then `v` (the value, or the first overflow page's number when `value_field` has
/// `OVERFLOW_BIT`).
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
pub fn write_leaf_cell(c: &mut [u8], k: &[u8], value_field: u32, v: &[u8]) {
    let n = put_klen(c, 0, k.len());
    c[n..n + k.len()].copy_from_slice(k);
    let at = n + k.len();
    let at = at + put_vfield(c, at, value_field);
    c[at..].copy_from_slice(v);
}

/// Writes a leaf cell into `out`.
pub fn leaf_cell(out: &mut Vec<u8>, k: &[u8], value_field: u32, v: &[u8]) {
    out.clear();
    out.resize(leaf_hdr_len(k.len(), value_field) + k.len() + v.len(), 0);
    write_leaf_cell(out, k, value_field, v);
}

pub fn branch_cell(k: &[u8], left: u32) -> Vec<u8> {
    let mut out = vec![0u8; branch_cell_size(k.len())];
    let n = put_klen(&mut out, 0, k.len());
    out[n..n + k.len()].copy_from_slice(k);
    put_u32(&mut out, n + k.len(), left);
    out
}

/// The key of a raw cell.
pub fn cell_key(c: &[u8]) -> &[u8] {
    let (at, klen) = key_at(c, 0);
    &c[at..at + klen]
}
/// The left child of a raw branch cell.
pub fn cell_child(c: &[u8]) -> u32 {
    let (at, klen) = key_at(c, 0);
    get_u32(c, at + klen)
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
                // The longest header fits before the end of the page: the accessors may read it.
                if off < cs || off + 2 > len {
                    return Err(format!("slot {i} points outside the cell area"));
                }
                let (at, klen) = key_at(p, off);
                let fixed = match k {
                    KIND_BRANCH => at + klen + 4,
                    // The value field ends within five bytes, before the page does.
                    _ => match p.get(at + klen..len.min(at + klen + 5)) {
                        Some(f) => match f.iter().position(|b| *b < 0x80) {
                            Some(m) => at + klen + m + 1,
                            None => return Err(format!("cell {i}'s value field is malformed")),
                        },
                        None => len + 1,
                    },
                };
                if fixed > len {
                    return Err(format!("cell {i} runs past the end of the page"));
                }
                let size = cell_size_at(p, off, k);
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
                let mut c = Vec::new();
                leaf_cell(&mut c, a, 0, &[]);
                p.extend_from_slice(&c);
                p.extend_from_slice(tail);
                for b in keys {
                    let got = cmp_cell_key(&p, 2, b, prefix(b));
                    assert_eq!(got, a.cmp(b), "{a:?} {b:?} {tail:?}");
                }
            }
        }
    }

    /// `search` over nodes holding some of the keys above (sorted, the first cell written at
    /// the page's last bytes, where a key's eight-byte load would run past the end) finds each
    /// key it holds and the insertion point of each it does not, as a search of the sorted
    /// list does.
    #[test]
    fn search_agrees_with_a_sorted_list() {
        let mut keys: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"abcdefg".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefgha".to_vec(),
            b"abcdefgi".to_vec(),
            b"abcdefh".to_vec(),
            vec![0xff; 8],
            [vec![0xff; 8], vec![1]].concat(),
            vec![0x10, 0xe0, 0xb0, 0xf1, 0x02],
            vec![0x10, 0xe0, 0xb0, 0xf1, 0x02, 0xff],
            vec![0x10, 0xe0, 0xb0, 0xf2],
        ];
        keys.sort();
        for mask in 0u32..(1 << keys.len()) {
            if mask % 7 != 0 && mask.count_ones() > 2 {
                continue;
            }
            let held: Vec<&Vec<u8>> = keys
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, k)| k)
                .collect();
            for kind in [KIND_LEAF, KIND_BRANCH] {
                let mut p = vec![0u8; 512];
                init(&mut p, kind);
                for (i, k) in held.iter().enumerate() {
                    let c = if kind == KIND_LEAF {
                        let mut c = Vec::new();
                        leaf_cell(&mut c, k, 0, &[]);
                        c
                    } else {
                        branch_cell(k, 7)
                    };
                    let off = reserve(&mut p, i, c.len()).unwrap();
                    p[off..off + c.len()].copy_from_slice(&c);
                }
                for k in &keys {
                    let want = held.binary_search(&k);
                    assert_eq!(search(&p, k), want, "{k:?} in {held:?}");
                }
            }
        }
    }

    /// Cells whose header lengths change at the boundaries (a key of 127 and 128 bytes, a
    /// value of 63 and 64, an overflow value of 2 GiB) read back as written, and their sizes are
    /// what the size functions say.
    #[test]
    fn cell_headers_round_trip_at_their_boundaries() {
        let mut p = vec![0u8; 4096];
        init(&mut p, KIND_LEAF);
        let mut c = Vec::new();
        let mut want = Vec::new();
        for (i, klen) in [0usize, 1, 127, 128, 300].into_iter().enumerate() {
            for vlen in [0usize, 63, 64, 200] {
                let k = vec![(i * 7 + vlen) as u8; klen];
                let v = vec![7u8; vlen];
                leaf_cell(&mut c, &k, vlen as u32, &v);
                assert_eq!(c.len(), leaf_cell_size(k.len(), vlen));
                want.push((k, Some(v)));
                let n = want.len() - 1;
                let at = reserve(&mut p, n, c.len()).expect("room");
                p[at..at + c.len()].copy_from_slice(&c);
            }
            let k = vec![0xEE, i as u8];
            leaf_cell(&mut c, &k, 0x7fff_ffff | OVERFLOW_BIT, &9u32.to_le_bytes());
            assert_eq!(c.len(), overflow_cell_size(2, 0x7fff_ffff));
            assert_eq!(c.len(), 1 + 5 + 2 + 4);
            want.push((k, None));
            let n = want.len() - 1;
            let at = reserve(&mut p, n, c.len()).expect("room");
            p[at..at + c.len()].copy_from_slice(&c);
        }
        validate(&p).unwrap();
        for (i, (k, v)) in want.iter().enumerate() {
            assert_eq!(key(&p, i), k.as_slice());
            match (leaf_value(&p, i), v) {
                (LeafValue::Inline(got), Some(v)) => assert_eq!(got, v.as_slice()),
                (LeafValue::Overflow(len, first), None) => {
                    assert_eq!((len, first), (0x7fff_ffff, 9))
                }
                _ => panic!("cell {i}: wrong kind of value"),
            }
            assert_eq!(cell_size_at(&p, slot(&p, i), KIND_LEAF), cell(&p, i).len());
        }
        // A value field that never ends is refused, not read past.
        let off = slot(&p, want.len() - 1);
        p[off + 1..off + 6].fill(0x80);
        assert!(validate(&p).is_err());
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
                live[off..off + leaf_cell_size(k.len(), v.len())].fill(true);
            }
            let cells: usize = model
                .iter()
                .map(|(k, v)| leaf_cell_size(k.len(), v.len()))
                .sum();
            assert_eq!(used(&p), 2 * model.len() + cells);
            assert!(p.iter().zip(&live).all(|(b, l)| *l || *b == 0));
        }
    }
}
