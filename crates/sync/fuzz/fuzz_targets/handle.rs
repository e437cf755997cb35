//! `cargo fuzz run handle` (from crates/sync; `-s none` on stable): any bytes into a replica's
//! protocol state machine, then a poll far in the future. Nothing may panic.
#![no_main]

use cairn_sync::{Config, Identity, Link, Replica, TableSchema};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut r = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
    r.register_table(TableSchema::new("todo", 1).lww("title").lww("done").lww("owner").counter("n"))
        .expect("valid schema");
    let mut link = Link::new();
    // Several messages in one input, split on a separator that rarely occurs in real ones.
    for part in data.split(|b| *b == 0xFE) {
        r.handle(&mut link, 1_700_000_000_000, part);
    }
    r.poll(&mut link, u64::MAX);
    let _ = r.verify();
});
