//! The conformance suite every [`BlockFile`] must pass. Each case gets a fresh, empty, open file
//! and returns `Err(reason)` on the first broken promise. Natively it runs over [`MemoryFile`],
//! [`crate::StdFile`] and [`crate::fault::FaultFile`] (`tests/conformance.rs`); in Chromium the wasm
//! crate runs the same cases over OPFS (`tests/browser/storage.test.mjs`).
//!
//! [`MemoryFile`]: crate::MemoryFile

use crate::error::Error;
use crate::file::BlockFile;

pub type CaseResult = std::result::Result<(), String>;
pub type Case = fn(&mut dyn BlockFile) -> CaseResult;

/// Every case, by name.
pub const CASES: &[(&str, Case)] = &[
    ("new_file_is_empty", new_file_is_empty),
    ("write_then_read_pages", write_then_read_pages),
    ("write_past_end_zero_fills", write_past_end_zero_fills),
    ("write_across_end", write_across_end),
    (
        "read_past_end_is_out_of_bounds",
        read_past_end_is_out_of_bounds,
    ),
    ("overwrite_in_place", overwrite_in_place),
    (
        "set_len_truncates_and_extends",
        set_len_truncates_and_extends,
    ),
    ("flush_keeps_contents", flush_keeps_contents),
    ("empty_read_and_write", empty_read_and_write),
    ("unaligned_writes", unaligned_writes),
    ("large_write", large_write),
    ("closed_file_refuses_io", closed_file_refuses_io),
];

/// Runs the case called `name`, or says there is none.
pub fn run_case(name: &str, f: &mut dyn BlockFile) -> CaseResult {
    match CASES.iter().find(|(n, _)| *n == name) {
        Some((_, case)) => case(f),
        None => Err(format!("no conformance case named {name:?}")),
    }
}

/// A page of recognisable bytes: every byte depends on the page number and its position.
pub fn pattern(page: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (page.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> CaseResult {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn io<T>(r: crate::Result<T>, what: &str) -> std::result::Result<T, String> {
    r.map_err(|e| format!("{what}: {e} ({})", e.code()))
}

fn read(f: &dyn BlockFile, offset: u64, len: usize) -> std::result::Result<Vec<u8>, String> {
    let mut buf = vec![0xAA; len];
    io(f.read(offset, &mut buf), &format!("read {len} at {offset}"))?;
    Ok(buf)
}

fn new_file_is_empty(f: &mut dyn BlockFile) -> CaseResult {
    let len = io(f.len(), "len")?;
    ensure(len == 0, || format!("a new file has length {len}"))
}

fn write_then_read_pages(f: &mut dyn BlockFile) -> CaseResult {
    const PAGE: usize = 4096;
    // Out of order, to catch an implementation that only appends.
    for page in [3u64, 0, 7, 1, 2, 6, 5, 4] {
        io(
            f.write(page * PAGE as u64, &pattern(page, PAGE)),
            "write page",
        )?;
    }
    let len = io(f.len(), "len")?;
    ensure(len == 8 * PAGE as u64, || {
        format!("length {len} after writing 8 pages")
    })?;
    for page in 0..8u64 {
        let got = read(f, page * PAGE as u64, PAGE)?;
        ensure(got == pattern(page, PAGE), || {
            format!("page {page} reads back different bytes")
        })?;
    }
    Ok(())
}

fn write_past_end_zero_fills(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, b"head"), "write")?;
    io(f.write(10_000, b"tail"), "write past end")?;
    let len = io(f.len(), "len")?;
    ensure(len == 10_004, || format!("length {len}, expected 10004"))?;
    let gap = read(f, 4, 9_996)?;
    ensure(gap.iter().all(|&b| b == 0), || {
        "the gap before a write past the end is not zeros".into()
    })?;
    ensure(read(f, 10_000, 4)? == b"tail", || {
        "the write past the end did not read back".into()
    })
}

/// A write that starts inside the file and ends past it overwrites the one part and appends the
/// other.
fn write_across_end(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, &pattern(1, 100)), "write")?;
    let data = pattern(2, 50);
    io(f.write(80, &data), "write across the end")?;
    let len = io(f.len(), "len")?;
    ensure(len == 130, || format!("length {len}, expected 130"))?;
    ensure(read(f, 0, 80)? == pattern(1, 100)[..80], || {
        "a write across the end changed the bytes before it".into()
    })?;
    ensure(read(f, 80, 50)? == data, || {
        "a write across the end did not read back".into()
    })
}

fn read_past_end_is_out_of_bounds(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, &pattern(0, 100)), "write")?;
    for (offset, len) in [(100u64, 1usize), (90, 20), (1 << 40, 8), (u64::MAX - 2, 8)] {
        let mut buf = vec![0u8; len];
        match f.read(offset, &mut buf) {
            Err(Error::OutOfBounds { .. }) => {}
            Ok(()) => return Err(format!("read of {len} at {offset} past the end succeeded")),
            Err(e) => {
                return Err(format!(
                    "read past the end gave {} ({e}), not OUT_OF_BOUNDS",
                    e.code()
                ))
            }
        }
    }
    // A failed read must not have changed the file.
    ensure(read(f, 0, 100)? == pattern(0, 100), || {
        "a failed read changed the file".into()
    })
}

fn overwrite_in_place(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, &pattern(1, 8192)), "write")?;
    io(f.write(4096, &pattern(9, 4096)), "overwrite")?;
    ensure(read(f, 0, 4096)? == pattern(1, 8192)[..4096], || {
        "overwrite touched the page before it".into()
    })?;
    ensure(read(f, 4096, 4096)? == pattern(9, 4096), || {
        "overwritten page reads back wrong".into()
    })?;
    let len = io(f.len(), "len")?;
    ensure(len == 8192, || {
        format!("overwrite changed the length to {len}")
    })
}

fn set_len_truncates_and_extends(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, &pattern(2, 8192)), "write")?;
    io(f.set_len(1000), "truncate")?;
    let len = io(f.len(), "len")?;
    ensure(len == 1000, || {
        format!("length {len} after truncating to 1000")
    })?;
    ensure(read(f, 0, 1000)? == pattern(2, 8192)[..1000], || {
        "truncate changed the kept bytes".into()
    })?;
    io(f.set_len(5000), "extend")?;
    let tail = read(f, 1000, 4000)?;
    ensure(tail.iter().all(|&b| b == 0), || {
        "bytes after extending a truncated file are not zeros".into()
    })?;
    io(f.set_len(0), "truncate to zero")?;
    let len = io(f.len(), "len")?;
    ensure(len == 0, || format!("length {len} after truncating to 0"))
}

fn flush_keeps_contents(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, &pattern(4, 4096)), "write")?;
    io(f.flush(), "flush")?;
    io(f.flush(), "second flush")?;
    ensure(read(f, 0, 4096)? == pattern(4, 4096), || {
        "contents changed across flush".into()
    })
}

fn empty_read_and_write(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, &[]), "empty write")?;
    let len = io(f.len(), "len")?;
    ensure(len == 0, || {
        format!("an empty write at 0 made the length {len}")
    })?;
    let mut buf = [];
    io(f.read(0, &mut buf), "empty read at the end")
}

fn unaligned_writes(f: &mut dyn BlockFile) -> CaseResult {
    let mut model = Vec::new();
    for (i, off) in [17usize, 1023, 1, 2047, 999, 2500].into_iter().enumerate() {
        let data = pattern(i as u64 + 20, 333);
        io(f.write(off as u64, &data), "unaligned write")?;
        if model.len() < off + data.len() {
            model.resize(off + data.len(), 0);
        }
        model[off..off + data.len()].copy_from_slice(&data);
    }
    let len = io(f.len(), "len")? as usize;
    ensure(len == model.len(), || {
        format!("length {len}, expected {}", model.len())
    })?;
    ensure(read(f, 0, len)? == model, || {
        "unaligned writes read back wrong".into()
    })
}

fn large_write(f: &mut dyn BlockFile) -> CaseResult {
    let data = pattern(77, 1 << 20);
    io(f.write(4096, &data), "1 MiB write")?;
    io(f.flush(), "flush")?;
    ensure(read(f, 4096, 1 << 20)? == data, || {
        "1 MiB write reads back wrong".into()
    })
}

fn closed_file_refuses_io(f: &mut dyn BlockFile) -> CaseResult {
    io(f.write(0, b"x"), "write")?;
    io(f.close(), "close")?;
    let mut buf = [0u8; 1];
    let results = [
        ("len", f.len().map(|_| ())),
        ("read", f.read(0, &mut buf)),
        ("write", f.write(0, b"y")),
        ("flush", f.flush()),
        ("set_len", f.set_len(0)),
    ];
    for (what, r) in results {
        match r {
            Err(Error::Closed) => {}
            Ok(()) => return Err(format!("{what} after close succeeded")),
            Err(e) => {
                return Err(format!(
                    "{what} after close gave {} ({e}), not CLOSED",
                    e.code()
                ))
            }
        }
    }
    io(f.close(), "second close")
}
