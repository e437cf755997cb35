//! `cargo fuzz run decode` (from crates/sync; `-s none` on stable): any bytes into the message
//! and block decoders. The saved corpus is replayed by `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cairn_sync::protocol::fuzz_decode(data);
});
