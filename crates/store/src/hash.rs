//! The two hashes of the store and the SQL engine.
//!
//! - XXH64, the page checksum (`docs/file-format.md`, "Checksums"): no dependency, fast on wasm's
//!   native 64-bit integers, and a published algorithm anyone can re-implement to read the format.
//! - [`FastHasher`], the hasher of every in-memory hash map ([`FastMap`], [`FastSet`]): page ids,
//!   tree names, plan addresses, and the normalized keys of DISTINCT, GROUP BY, IN-subquery sets
//!   and hash joins. It never reaches a file, so it may change freely.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline(always)]
fn read64(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(a)
}

#[inline(always)]
fn read32(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[i..i + 4]);
    u32::from_le_bytes(a) as u64
}

#[inline(always)]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline(always)]
fn merge(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

/// XXH64 of `data` with `seed`.
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    let len = data.len();
    let mut h;
    // Every page written and read passes through this loop (4 KiB each): whole 32-byte stripes
    // taken as arrays, so the loop carries no bounds checks; two stripes a turn, as with one
    // the compiler spends a register move per lane and stripe carrying the lanes to the next.
    let mut pairs = data.chunks_exact(64);
    let mut rest: &[u8];
    if len >= 32 {
        let mut v1 = seed.wrapping_add(P1).wrapping_add(P2);
        let mut v2 = seed.wrapping_add(P2);
        let mut v3 = seed;
        let mut v4 = seed.wrapping_sub(P1);
        for s in &mut pairs {
            let s: &[u8; 64] = s.try_into().expect("invariant: chunks_exact(64)");
            v1 = round(round(v1, lane(s, 0)), lane(s, 32));
            v2 = round(round(v2, lane(s, 8)), lane(s, 40));
            v3 = round(round(v3, lane(s, 16)), lane(s, 48));
            v4 = round(round(v4, lane(s, 24)), lane(s, 56));
        }
        rest = pairs.remainder();
        if let Some((s, r)) = rest.split_first_chunk::<32>() {
            v1 = round(v1, lane(s, 0));
            v2 = round(v2, lane(s, 8));
            v3 = round(v3, lane(s, 16));
            v4 = round(v4, lane(s, 24));
            rest = r;
        }
        h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
        h = merge(h, v1);
        h = merge(h, v2);
        h = merge(h, v3);
        h = merge(h, v4);
    } else {
        h = seed.wrapping_add(P5);
        rest = data;
    }
    h = h.wrapping_add(len as u64);
    let len = rest.len();
    let mut i = 0;
    while i + 8 <= len {
        h ^= round(0, read64(rest, i));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        i += 8;
    }
    if i + 4 <= len {
        h ^= read32(rest, i).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        i += 4;
    }
    while i < len {
        h ^= (rest[i] as u64).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
        i += 1;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

#[inline(always)]
fn lane<const N: usize>(s: &[u8; N], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(a)
}

/// FxHash's scheme, word by word: rotate, xor in 8 bytes, multiply by an odd constant. Two
/// instructions and a multiply per 8 bytes of key, where SipHash-1-3 (std's default) spends about
/// ten times that and brings its code into every build.
///
/// Not keyed, by choice. DISTINCT and GROUP BY keys come from table data, so someone who can put
/// rows in a database could choose keys whose hashes collide; the worst that does is make a query
/// over those rows slow (the map probes longer; it never answers wrongly). A per-process random
/// seed would not close that: a multiplicative hash stays attackable with the seed unknown, and
/// only a keyed hash such as SipHash does, at the cost this type exists to avoid. The engine runs
/// on its owner's own data (one tab, one database), and by the project's rules sees no randomness
/// but what is injected; the relay, which hashes what remote peers send, keeps std's SipHash.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

/// rustc-hash's multiplier: odd, with its bits spread so every input bit reaches the high half.
const FX: u64 = 0xF135_7AEA_2E62_A9C5;

impl FastHasher {
    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(FX);
    }
}

impl Hasher for FastHasher {
    /// hashbrown takes the bucket from the low bits and a 7-bit tag from the top ones; a product's
    /// low bits depend only on the operands' low bits, so the well-mixed middle is rotated down.
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }

    // One copy in the wasm module, not one per map type: the module is built for size.
    #[cfg_attr(target_arch = "wasm32", inline(never))]
    #[cfg_attr(not(target_arch = "wasm32"), inline)]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(
                w.try_into().expect("invariant: chunks_exact(8)"),
            ));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            // The tail's length goes in its free top byte: `str` hashes as its bytes and then
            // 0xFF, so "ab" and "ab\0" would otherwise hash alike.
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            a[7] = rest.len() as u8;
            self.add(u64::from_le_bytes(a));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// Builds [`FastHasher`]s: a zero-sized type, so a map costs no more than with std's hasher.
pub type FastBuild = BuildHasherDefault<FastHasher>;
/// A `HashMap` keyed through [`FastHasher`]. Make one with `FastMap::default()`.
pub type FastMap<K, V> = HashMap<K, V, FastBuild>;
/// A `HashSet` keyed through [`FastHasher`]. Make one with `FastSet::default()`.
pub type FastSet<K> = HashSet<K, FastBuild>;

#[cfg(test)]
mod tests {
    use super::xxh64;

    #[test]
    fn reference_vectors() {
        // From the xxHash reference implementation's test suite.
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition", 0),
            0xFBCE_A83C_8A37_8BF1
        );
    }

    /// The algorithm as the specification states it, one index at a time.
    fn plain(data: &[u8], seed: u64) -> u64 {
        use super::{P1, P2, P3, P4, P5};
        let r64 = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().unwrap_or([0; 8]));
        let round = |acc: u64, x: u64| {
            acc.wrapping_add(x.wrapping_mul(P2))
                .rotate_left(31)
                .wrapping_mul(P1)
        };
        let (len, mut i) = (data.len(), 0);
        let mut h = if len >= 32 {
            let mut v = [
                seed.wrapping_add(P1).wrapping_add(P2),
                seed.wrapping_add(P2),
                seed,
                seed.wrapping_sub(P1),
            ];
            while i + 32 <= len {
                for (k, vk) in v.iter_mut().enumerate() {
                    *vk = round(*vk, r64(i + 8 * k));
                }
                i += 32;
            }
            let mut h = v[0]
                .rotate_left(1)
                .wrapping_add(v[1].rotate_left(7))
                .wrapping_add(v[2].rotate_left(12))
                .wrapping_add(v[3].rotate_left(18));
            for vk in v {
                h = (h ^ round(0, vk)).wrapping_mul(P1).wrapping_add(P4);
            }
            h
        } else {
            seed.wrapping_add(P5)
        };
        h = h.wrapping_add(len as u64);
        while i + 8 <= len {
            h ^= round(0, r64(i));
            h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
            i += 8;
        }
        if i + 4 <= len {
            let x = u32::from_le_bytes(data[i..i + 4].try_into().unwrap_or([0; 4])) as u64;
            h ^= x.wrapping_mul(P1);
            h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
            i += 4;
        }
        while i < len {
            h ^= (data[i] as u64).wrapping_mul(P5);
            h = h.rotate_left(11).wrapping_mul(P1);
            i += 1;
        }
        h ^= h >> 33;
        h = h.wrapping_mul(P2);
        h ^= h >> 29;
        h = h.wrapping_mul(P3);
        h ^ (h >> 32)
    }

    #[test]
    fn every_length_matches_the_plain_algorithm() {
        let data: Vec<u8> = (0..4200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for len in (0..200).chain([4080, 4088, 4096, 4199]) {
            for seed in [0, 7, u64::MAX] {
                assert_eq!(
                    xxh64(&data[..len], seed),
                    plain(&data[..len], seed),
                    "len {len}"
                );
            }
        }
    }

    fn fast(bytes: &[u8]) -> u64 {
        use std::hash::Hasher;
        let mut h = super::FastHasher::default();
        h.write(bytes);
        h.finish()
    }

    #[test]
    fn fast_hasher_tells_tails_apart() {
        // Keys that differ only past a word boundary, or only in trailing zero bytes.
        let keys: [&[u8]; 7] = [
            b"",
            b"\0",
            b"ab",
            b"ab\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(fast(a), fast(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn fast_hasher_spreads_page_ids_over_buckets() {
        // Sequential page ids, the commonest key: the low bits (hashbrown's bucket) of 4096 of
        // them fill 4096 buckets nearly evenly.
        let mut counts = vec![0u32; 4096];
        for id in 0u32..4096 {
            let mut h = super::FastHasher::default();
            std::hash::Hasher::write_u32(&mut h, id);
            counts[(std::hash::Hasher::finish(&h) & 4095) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| c <= 8),
            "max {:?}",
            counts.iter().max()
        );
    }
}
