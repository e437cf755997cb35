//! Random operations against a `BTreeMap` model (`cairn_store::model`), through proptest, and a
//! replay of the fuzz target's saved corpus.

use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("CAIRN_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_match_the_model(ops in proptest::collection::vec(any::<u8>(), 0..3000)) {
        if let Err(m) = cairn_store::model::run(&ops) {
            prop_assert!(false, "{}", m);
        }
    }

    #[test]
    fn random_operations_on_long_keys_match_the_model(ops in proptest::collection::vec(any::<u8>(), 0..3000)) {
        if let Err(m) = cairn_store::model::run_long_keys(&ops) {
            prop_assert!(false, "{}", m);
        }
    }
}

/// Long runs from a fixed seed: deterministic, so a failure reproduces.
#[test]
fn long_seeded_runs_match_the_model() {
    for seed in 1..=4u64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let data: Vec<u8> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        if let Err(m) = cairn_store::model::run(&data) {
            panic!("seed {seed}: {m}");
        }
        if let Err(m) = cairn_store::model::run_long_keys(&data) {
            panic!("seed {seed}, long keys: {m}");
        }
    }
}

/// Every input the fuzz target saved runs as an ordinary test.
#[test]
fn fuzz_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/model");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let data = std::fs::read(e.path()).expect("corpus file readable");
        if let Err(m) = cairn_store::model::run(&data) {
            panic!("{}: {m}", e.path().display());
        }
        if let Err(m) = cairn_store::model::run_long_keys(&data) {
            panic!("{}, long keys: {m}", e.path().display());
        }
    }
}
