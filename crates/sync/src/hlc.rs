//! Hybrid logical clock (docs/sync.md sec. 3): 48 bits of milliseconds, 16 bits of counter.
//! Wall time is passed in; the clock never reads one.

/// An HLC timestamp. Ordered as a u64.
pub type Hlc = u64;

pub const LOGICAL_BITS: u32 = 16;

/// The physical part of a timestamp, in milliseconds since the Unix epoch.
pub fn physical_ms(h: Hlc) -> u64 {
    h >> LOGICAL_BITS
}

pub fn from_ms(ms: u64) -> Hlc {
    ms.saturating_mul(1 << LOGICAL_BITS)
}

#[derive(Debug, Clone, Default)]
pub struct Clock {
    last: Hlc,
}

impl Clock {
    pub fn new() -> Clock {
        Clock::default()
    }

    /// A timestamp for a local event, strictly greater than every one issued or observed.
    pub fn tick(&mut self, now_ms: u64) -> Hlc {
        self.last = self.last.saturating_add(1).max(from_ms(now_ms));
        self.last
    }

    /// Moves the clock past a verified remote timestamp.
    pub fn observe(&mut self, remote: Hlc) {
        self.last = self.last.max(remote);
    }

    pub fn last(&self) -> Hlc {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_across_wall_clock_regressions() {
        let mut c = Clock::new();
        let a = c.tick(1000);
        let b = c.tick(999);
        assert!(b > a);
        c.observe(from_ms(5000) + 3);
        let d = c.tick(1001);
        assert!(d > from_ms(5000) + 3);
        assert_eq!(physical_ms(d), 5000);
    }
}
