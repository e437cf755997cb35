#![no_main]
//! Whole statements against a small schema never panic and leave the database usable.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cairn_sql::fuzzing::statements_bytes(data));
