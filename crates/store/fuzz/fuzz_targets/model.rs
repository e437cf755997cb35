//! Random operations (insert, update, delete, get, range scans both ways, commit, rollback,
//! reopen, check) against a `BTreeMap` model; see `cairn_store::model`. Run with
//! `cargo +nightly fuzz run model` (or `cargo fuzz build -s none` on stable to check it builds).
//! Inputs saved under `corpus/model/` are replayed by `cargo test -p cairn-store --test model`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(m) = cairn_store::model::run(data) {
        panic!("{m}");
    }
    if let Err(m) = cairn_store::model::run_long_keys(data) {
        panic!("long keys: {m}");
    }
});
