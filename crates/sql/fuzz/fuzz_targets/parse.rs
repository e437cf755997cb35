#![no_main]
//! The parser never panics, whatever the input. `cargo fuzz run parse` (or, on stable,
//! `cargo fuzz build -s none parse`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cairn_sql::fuzzing::parse_bytes(data));
