//! Shared by the integration tests: a seeded generator, identities from it, and the schema the
//! tests replicate.
#![allow(dead_code)]

use cairn_sync::{Identity, TableSchema, Value};

/// SplitMix64: small, seedable, good enough to drive a simulation.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for c in out.chunks_mut(8) {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        out
    }
}

pub fn identity(rng: &mut Rng) -> Identity {
    Identity::from_secret(rng.bytes32())
}

/// `todo(id) title, done, owner, n COUNTER`, and `user(id) email UNIQUE, name`.
pub fn schemas() -> Vec<TableSchema> {
    vec![
        TableSchema::new("todo", 1)
            .lww("title")
            .lww("done")
            .lww("owner")
            .counter("n"),
        TableSchema::new("user", 1)
            .lww("email")
            .lww("name")
            .unique(vec![0]),
    ]
}

pub fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// How many seeds to run: `default`, or `CAIRN_SYNC_SEEDS` from the environment.
pub fn seed_count(default: u64) -> u64 {
    std::env::var("CAIRN_SYNC_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The first seed: `CAIRN_SYNC_SEED` to replay one failing seed.
pub fn first_seed() -> u64 {
    std::env::var("CAIRN_SYNC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}
