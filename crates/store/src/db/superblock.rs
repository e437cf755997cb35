//! The superblock: the format of the two slots (pages 0 and 1) that name the committed state.
//! A commit writes the slot that does not hold the last flushed superblock; open reads both
//! and takes the newer whose commit list checks out. Here: the encoding
//! (`encode_superblock_into`, `decode_superblock`, which refuses any format version but this
//! build's), the commit list of runs of adjacent pages with their checksums (`run_sum`,
//! `list_capacity`, `verify_list`), and the room for the caller's root bytes. The byte layout
//! is in `docs/file-format.md`. Hands commit (`commit.rs`) the encoder and open (`open.rs`)
//! the decoder and the list check.

use crate::file::BlockFile;
use crate::hash::xxh64;
use crate::page;
use crate::pager::Pager;

use super::State;

pub const MAGIC: [u8; 8] = *b"cairnDB\0";

pub const FORMAT_VERSION: u32 = 4;

/// Where the commit list starts: after the root bytes' length.
const SB_LIST: usize = 68;

/// A commit list entry: a run of adjacent pages (first, count, checksum).
const ENTRY: usize = 16;

/// A commit list entry: a run of `count` adjacent pages from `first`, and its checksum
/// ([`run_sum`] of the pages' own).
pub(super) type Run = (u32, u32, u64);

/// A run's checksum, folded page by page from the pages' own checksums in page order: the
/// first page's, then `(sum ^ next).wrapping_mul(RUN_MIX)` for each page after it. A run of
/// one page has that page's checksum; any page of another write changes the result (each
/// step is a bijection of the sum so far).
pub(super) fn run_sum(sum: u64, next: u64) -> u64 {
    (sum ^ next).wrapping_mul(RUN_MIX)
}

const RUN_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

pub(super) fn encode_superblock(ps: usize, slot: usize, s: &State, list: &[Run]) -> Vec<u8> {
    let mut b = Vec::new();
    encode_superblock_into(&mut b, ps, slot, s, list, &[]);
    b
}

/// [`encode_superblock`] into a buffer kept between commits, with the root bytes `root` (at
/// most [`root_meta_room`], and the list no longer than [`list_capacity`] leaves room for).
pub(super) fn encode_superblock_into(
    b: &mut Vec<u8>,
    ps: usize,
    slot: usize,
    s: &State,
    list: &[Run],
    root: &[u8],
) {
    assert!(
        root.len() <= root_meta_room(ps) && SB_LIST + ENTRY * list.len() + root.len() <= ps,
        "invariant: the root bytes and the commit list fit the superblock"
    );
    if b.len() == ps {
        // The buffer holds the last superblock (written here, so it fits): zeroes past its
        // list and before its root bytes, which stay zeroes.
        let old_root = page::get_u32(b, 64) as usize;
        let used = SB_LIST + ENTRY * page::get_u32(b, 60) as usize;
        b[..used].fill(0);
        if old_root > 0 {
            b[ps - old_root..].fill(0);
        }
    } else {
        b.clear();
        b.resize(ps, 0);
    }
    b[..8].copy_from_slice(&MAGIC);
    page::put_u32(b, 16, FORMAT_VERSION);
    page::put_u32(b, 20, ps as u32);
    page::put_u64(b, 24, s.txn);
    page::put_u32(b, 32, s.page_count);
    page::put_u32(b, 36, s.catalog);
    page::put_u32(b, 40, s.free);
    page::put_u64(b, 44, s.catalog_len);
    page::put_u64(b, 52, s.free_len);
    page::put_u32(b, 60, list.len() as u32);
    page::put_u32(b, 64, root.len() as u32);
    for (i, &(first, count, sum)) in list.iter().enumerate() {
        let at = SB_LIST + ENTRY * i;
        page::put_u32(b, at, first);
        page::put_u32(b, at + 4, count);
        page::put_u64(b, at + 8, sum);
    }
    if !root.is_empty() {
        b[ps - root.len()..].copy_from_slice(root);
    }
    let sum = xxh64(&b[16..], slot as u64);
    page::put_u64(b, 8, sum);
}

/// How many runs a superblock's commit list can name beside `root` root bytes.
pub(super) fn list_capacity(ps: usize, root: usize) -> usize {
    (ps - SB_LIST - root) / ENTRY
}

/// The most root bytes a superblock holds: a quarter of the page, so that the commit list keeps
/// most of its room (187 runs at 4 KiB beside a full room of root bytes).
pub(crate) fn root_meta_room(ps: usize) -> usize {
    ps / 4
}

pub(super) struct Slot {
    pub(super) state: State,
    pub(super) list: Vec<Run>,
    pub(super) root: Vec<u8>,
}

/// Parses one superblock slot, or says what is wrong with it.
pub(super) fn decode_superblock(
    b: &[u8],
    slot: usize,
    ps: usize,
) -> std::result::Result<Slot, SlotError> {
    if b[..8] != MAGIC {
        return Err(SlotError::NoMagic);
    }
    let version = page::get_u32(b, 16);
    // Any other version is refused whole, before anything else in the slot is read: a newer one
    // this build cannot know, an older (pre-release) one it no longer reads.
    if version != FORMAT_VERSION && version != 0 {
        return Err(SlotError::Version(version));
    }
    if xxh64(&b[16..ps], slot as u64) != page::get_u64(b, 8) {
        return Err(SlotError::Bad("checksum mismatch".into()));
    }
    if version == 0 {
        return Err(SlotError::Bad("format version 0".into()));
    }
    if page::get_u32(b, 20) as usize != ps {
        return Err(SlotError::Bad(
            "page size differs from the other slot".into(),
        ));
    }
    let state = State {
        txn: page::get_u64(b, 24),
        page_count: page::get_u32(b, 32),
        catalog: page::get_u32(b, 36),
        free: page::get_u32(b, 40),
        catalog_len: page::get_u64(b, 44),
        free_len: page::get_u64(b, 52),
    };
    let n = page::get_u32(b, 60) as usize;
    let root = page::get_u32(b, 64) as usize;
    if root > root_meta_room(ps) {
        return Err(SlotError::Bad(format!(
            "{root} root bytes, more than a quarter of the page"
        )));
    }
    if n > list_capacity(ps, root) {
        return Err(SlotError::Bad(format!(
            "commit list of {n} entries is too long"
        )));
    }
    let mut list = Vec::with_capacity(n);
    for i in 0..n {
        let e = SB_LIST + ENTRY * i;
        let run = (
            page::get_u32(b, e),
            page::get_u32(b, e + 4),
            page::get_u64(b, e + 8),
        );
        if run.1 == 0 {
            return Err(SlotError::Bad("a commit list entry names no page".into()));
        }
        list.push(run);
    }
    Ok(Slot {
        state,
        list,
        root: b[ps - root..ps].to_vec(),
    })
}

pub(super) enum SlotError {
    NoMagic,
    Version(u32),
    Bad(String),
}

pub(super) fn valid_page_size(ps: usize) -> bool {
    ps.is_power_of_two() && (512..=65536).contains(&ps)
}

/// Reads every page a commit list names: each must hold its own checksum, and each run the
/// checksum the list gives it.
pub(super) fn verify_list<F: BlockFile>(
    pager: &mut Pager<F>,
    list: &[Run],
) -> std::result::Result<(), String> {
    let ps = pager.page_size;
    let mut buf = vec![0u8; ps];
    for &(first, count, sum) in list {
        let mut got = 0;
        for id in first..first.saturating_add(count) {
            pager.reads += 1;
            if pager.file.read(id as u64 * ps as u64, &mut buf).is_err()
                || crate::pager::page_checksum(id, &buf) != page::get_u64(&buf, 0)
            {
                return Err(format!(
                    "page {id} of the last commit did not reach the disk intact"
                ));
            }
            let own = page::get_u64(&buf, 0);
            got = if id == first { own } else { run_sum(got, own) };
        }
        if got != sum {
            return Err(format!(
                "pages {first}..{} of the last commit did not all reach the disk",
                first + count
            ));
        }
    }
    Ok(())
}
