#![no_main]
//! Full-text queries never panic, whatever the input: `cargo fuzz run match_query` (or, on
//! stable, `cargo fuzz build -s none match_query`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cairn_sql::fuzzing::match_bytes(data));
