//! Creating and opening a database file. [`Db::create`] writes the first superblock into an
//! empty file; [`Db::open`] finds the page size, reads both superblock slots
//! (`decode_superblock`, which refuses a file of another format version), checks the newer
//! one's commit list (`verify_list`) and falls back to the other when a page of the last commit
//! did not reach the disk intact, then hands the chosen state to a fresh [`Shared`].

use std::cell::RefCell;
use std::rc::Rc;

use super::shared::Shared;
use super::superblock::{
    decode_superblock, encode_superblock, valid_page_size, verify_list, SlotError, FORMAT_VERSION,
    MAGIC,
};
use super::{joined, Db, Options, State};
use crate::btree::Pages;
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page;
use crate::pager::Pager;

impl<F: BlockFile> Db<F> {
    /// Creates a database in an empty file.
    pub fn create(mut file: F, opts: Options) -> Result<Self> {
        if !valid_page_size(opts.page_size) {
            return Err(Error::InvalidInput(format!(
                "page size {} is not a power of two from 512 to 65536",
                opts.page_size
            )));
        }
        if file.len()? != 0 {
            return Err(Error::InvalidInput("create needs an empty file".into()));
        }
        let ps = opts.page_size;
        let state = State {
            txn: 1,
            page_count: 2,
            catalog: 0,
            free: 0,
            catalog_len: 0,
            free_len: 0,
        };
        file.write(0, &encode_superblock(ps, 0, &state, &[]))?;
        file.write(ps as u64, &vec![0u8; ps])?;
        file.flush()?;
        let pager = Pager::new(file, ps, opts.cache_pages);
        Ok(Db {
            shared: Rc::new(RefCell::new(Shared::new(pager, opts, state, 0))),
        })
    }

    /// Opens an existing database: reads the two superblock slots and the pages the newer one's
    /// commit list names, and the catalog's root. Refuses anything that is not a cairn file, is
    /// newer than this build, or is damaged, saying what and where.
    pub fn open(file: F, opts: Options) -> Result<Self> {
        Self::open_upto(file, opts, u64::MAX)
    }

    /// [`Db::open`] at the newest commit no later than transaction `txn`: for a file opened again
    /// after a commit failed (`txn` the last that succeeded), whose superblock may have reached
    /// the file before the failure did. That commit was reported failed: it stays invisible,
    /// and the next commit takes its slot.
    pub fn open_upto(file: F, opts: Options, txn: u64) -> Result<Self> {
        let len = file.len()?;
        if len < 64 {
            return Err(Error::NotADatabase(format!(
                "the file is {len} bytes, too short to hold a superblock"
            )));
        }
        let mut head = [0u8; 24];
        file.read(0, &mut head)?;
        let mut ps = page::get_u32(&head, 20) as usize;
        if head[..8] != MAGIC || !valid_page_size(ps) {
            // Slot A is damaged: look for slot B at every possible page size.
            ps = 0;
            let mut size = 512;
            while size <= 65536 {
                let mut h = [0u8; 24];
                if file.read(size as u64, &mut h).is_ok()
                    && h[..8] == MAGIC
                    && page::get_u32(&h, 20) as usize == size
                {
                    ps = size;
                    break;
                }
                size *= 2;
            }
            if ps == 0 {
                if head[..8] == MAGIC {
                    return Err(Error::Corrupt(
                        "page 0 (superblock A): bad page size and no valid superblock B".into(),
                    ));
                }
                return Err(Error::NotADatabase(
                    "no cairn magic number in either superblock".into(),
                ));
            }
        }
        let mut pager = Pager::new(file, ps, opts.cache_pages);
        let mut slots = Vec::new();
        let mut problems = Vec::new();
        let mut magic = false;
        for s in 0..2 {
            let mut b = vec![0u8; ps];
            if pager.file.read((s * ps) as u64, &mut b).is_err() {
                problems.push(format!("page {s} (superblock {}): missing", ["A", "B"][s]));
                continue;
            }
            match decode_superblock(&b, s, ps) {
                Ok(sl) => {
                    magic = true;
                    slots.push((s, sl))
                }
                Err(SlotError::NoMagic) => problems.push(format!(
                    "page {s} (superblock {}): no magic number",
                    ["A", "B"][s]
                )),
                Err(SlotError::Version(v)) => {
                    return Err(Error::UnsupportedVersion {
                        found: v,
                        supported: FORMAT_VERSION,
                    })
                }
                Err(SlotError::Bad(m)) => {
                    magic = true;
                    problems.push(format!("page {s} (superblock {}): {m}", ["A", "B"][s]))
                }
            }
        }
        if !magic {
            return Err(Error::NotADatabase(
                "no cairn magic number in either superblock".into(),
            ));
        }
        // Newest transaction first; on a tie, slot A first.
        crate::sort::sort_by(&mut slots, |(sa, a), (sb, b)| {
            (b.state.txn, sa) < (a.state.txn, sb)
        });
        let mut chosen = None;
        let mut newer = false;
        for (s, sl) in slots {
            if sl.state.txn > txn {
                newer = true;
                continue;
            }
            match verify_list(&mut pager, &sl.list) {
                Ok(()) => {
                    chosen = Some((s, sl.state, sl.list.len(), sl.root));
                    break;
                }
                Err(m) => problems.push(format!(
                    "superblock {} (transaction {}): {m}",
                    ["A", "B"][s],
                    sl.state.txn
                )),
            }
        }
        let Some((slot, state, list_len, root)) = chosen else {
            return Err(Error::Corrupt(joined(&problems)));
        };
        let mut sh = Shared::new(
            pager,
            Options {
                page_size: ps,
                ..opts
            },
            state,
            slot,
        );
        sh.st.last_list = list_len;
        sh.st.root_meta = root;
        sh.st.newer_slot = newer;
        let notes: Vec<&String> = problems
            .iter()
            .filter(|p| !p.ends_with("no magic number"))
            .collect();
        if !notes.is_empty() {
            sh.st.recovered = Some(joined(&notes));
        }
        if state.catalog != 0 {
            sh.read(state.catalog)?;
        }
        Ok(Db {
            shared: Rc::new(RefCell::new(sh)),
        })
    }
}
