//! `reorder`: the defined functions of a module in an order that gzip compresses better.
//!
//! Deflate finds repeats only within the last 32 KiB it has written. rustc and wasm-opt leave
//! functions in the order of the crates and modules they came from, so the many near copies
//! that generic code makes (a `Vec` method for each element type, a drop for each struct, the
//! same error path in fifty places) are often further apart than that and are compressed as
//! new text. This places each function, one after another, where most of its byte strings
//! already occur in the 32 KiB before it: greedily, the function whose five-byte strings are
//! the largest share in that window goes next.
//!
//! Only the order of the code (and function) section changes; every function index in the
//! module (calls, `ref.func`, exports, element segments, the start function) is mapped to the
//! new order, so the module computes what it did. Imports keep their places.

use std::collections::HashMap;

/// Deflate's window.
const WINDOW: usize = 32 * 1024;
/// The length of the byte strings compared: deflate's shortest match is 3 bytes, but strings
/// of 3 and 4 match by chance too often to say two functions are alike (measured on
/// `cairn.wasm`: 3 bytes gained 1.0%, 4 1.6%, 5 1.8%, 6 1.5%).
const GRAM: usize = 5;

/// The byte strings of `GRAM` bytes in `b`, each once, as numbers.
fn grams(b: &[u8]) -> Vec<u64> {
    let mut g: Vec<u64> = b
        .windows(GRAM)
        .map(|w| w.iter().fold(0u64, |k, &x| k << 8 | u64::from(x)))
        .collect();
    g.sort_unstable();
    g.dedup();
    g
}

/// An order of `bodies` (positions into it, each once) that starts with `lead` (positions,
/// each once), or with the first body when `lead` is empty.
pub fn order(bodies: &[&[u8]], lead: &[usize]) -> Vec<usize> {
    let n = bodies.len();
    if n == 0 {
        return Vec::new();
    }
    let gs: Vec<Vec<u64>> = bodies.iter().map(|b| grams(b)).collect();
    // Which bodies hold each string, so that a string entering or leaving the window updates
    // only the bodies it is in.
    let mut holders: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, g) in gs.iter().enumerate() {
        for &k in g {
            holders.entry(k).or_default().push(i as u32);
        }
    }
    // How many times each string occurs in the window (counted once a body), and for each body
    // not placed yet, how many of its strings are in the window.
    let mut in_window: HashMap<u64, u32> = HashMap::new();
    let mut found = vec![0u32; n];
    let mut placed = vec![false; n];
    let mut out = Vec::with_capacity(n);
    let (mut window_bytes, mut oldest) = (0usize, 0usize);
    let mut lead = lead.iter().copied();
    let mut next = lead.next().unwrap_or(0);
    loop {
        placed[next] = true;
        out.push(next);
        window_bytes += bodies[next].len();
        for &k in &gs[next] {
            let c = in_window.entry(k).or_insert(0);
            *c += 1;
            if *c == 1 {
                for &h in &holders[&k] {
                    found[h as usize] += 1;
                }
            }
        }
        while window_bytes > WINDOW && oldest + 1 < out.len() {
            let gone = out[oldest];
            oldest += 1;
            window_bytes -= bodies[gone].len();
            for &k in &gs[gone] {
                let c = in_window.get_mut(&k).expect("invariant: counted on entry");
                *c -= 1;
                if *c == 0 {
                    in_window.remove(&k);
                    for &h in &holders[&k] {
                        found[h as usize] -= 1;
                    }
                }
            }
        }
        if out.len() == n {
            return out;
        }
        if let Some(l) = lead.next() {
            next = l;
            continue;
        }
        // The share of the body's strings the window holds; a body too short to have any
        // counts as matched (it costs a few bytes wherever it goes). Ties go to the lower
        // position, so the order depends on the input alone.
        let mut best = (f64::MIN, usize::MAX);
        for i in (0..n).filter(|&i| !placed[i]) {
            let share = (f64::from(found[i]) + 1.0) / (gs[i].len() as f64 + 1.0);
            if share > best.0 {
                best = (share, i);
            }
        }
        next = best.1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_is_every_position_once_and_alike_bodies_come_together() {
        // Two families of bodies, interleaved: a body is placed after one of its own family.
        let a: Vec<Vec<u8>> = (0..6u8)
            .map(|i| {
                let mut b: Vec<u8> = (0..200u8).map(|x| x.wrapping_mul(7)).collect();
                b[0] = i;
                b
            })
            .collect();
        let b: Vec<Vec<u8>> = (0..6u8)
            .map(|i| {
                let mut b: Vec<u8> = (0..200u8).map(|x| x.wrapping_mul(13) ^ 0x5a).collect();
                b[0] = i;
                b
            })
            .collect();
        let bodies: Vec<&[u8]> = (0..12)
            .map(|i| if i % 2 == 0 { &a[i / 2] } else { &b[i / 2] }.as_slice())
            .collect();
        let o = order(&bodies, &[]);
        let mut seen = o.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..12).collect::<Vec<_>>());
        assert_eq!(o[0], 0);
        // Each family in one run: the order changes family once.
        let changes = o.windows(2).filter(|w| w[0] % 2 != w[1] % 2).count();
        assert_eq!(changes, 1, "{o:?}");
        assert_eq!(
            order(&bodies, &[]),
            o,
            "the same input gives the same order"
        );
        assert!(order(&[], &[]).is_empty());
        // Bodies asked to lead come first, in the order asked, then every other once.
        let led = order(&bodies, &[5, 2]);
        assert_eq!(&led[..2], &[5, 2]);
        let mut seen = led.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..12).collect::<Vec<_>>());
    }
}
