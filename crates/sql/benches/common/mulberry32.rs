//! The browser benchmark's generator (bench-browser/src/data.js), shared by the native benches
//! so that their rows are the browser's rows.

pub struct Mulberry32(pub u32);

impl Mulberry32 {
    // Named as data.js names it; not an iterator (it never ends).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x6d2b_79f5);
        let mut t = self.0;
        t = (t ^ (t >> 15)).wrapping_mul(t | 1);
        t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
        f64::from(t ^ (t >> 14)) / 4_294_967_296.0
    }
}
