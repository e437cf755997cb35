//! Whole-file maintenance, outside any transaction: [`Db::vacuum`] (pages moved down from the
//! end through `btree::relocate`, then the free tail cut off), [`Db::erase_free_pages`] (every
//! free page zeroed) and [`Db::free_pages`] (the free tree's pages, for tests and checks). Each
//! runs through ordinary write transactions and commits, so a crash at any point opens a
//! sound state.

use super::catalog;
use super::writer::delta_set;
use super::Db;
use crate::btree::{self, Stack};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page;

impl<F: BlockFile> Db<F> {
    /// Every free page of the last committed state, in order (from the free tree).
    pub fn free_pages(&self) -> Result<Vec<u32>> {
        let mut sh = self.shared.borrow_mut();
        let root = sh.st.state.free;
        let mut out = Vec::new();
        let mut st = Stack::default();
        let mut ok = st.first(&mut *sh, root)?;
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack has a leaf");
            let k = page::key(pg, i);
            if k.len() == 4 {
                out.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
            }
            ok = st.next(&mut *sh)?;
        }
        Ok(out)
    }

    /// Compacts the file: moves pages from its end into free pages nearer the start, then cuts
    /// the free tail off. Needs no open transaction. Costs a walk of every tree and four commits;
    /// returns the page counts before and after.
    pub fn vacuum(&self) -> Result<(u32, u32)> {
        let before = self.page_count();
        {
            let mut sh = self.shared.borrow_mut();
            if sh.has_writer() || !sh.st.readers.is_empty() {
                return Err(Error::Busy("vacuum needs no open transaction".into()));
            }
            sh.st.flush()?;
        }
        // 1. Move pages past the cutoff down.
        let tx = self.begin_write()?;
        let held: Vec<u32> = {
            let mut guard = self.shared.borrow_mut();
            let sh = &mut guard.writer(tx.serial)?;
            // Pages move below the cutoff only: the lowest free one each time, never the end.
            sh.w.lowest_first = true;
            let free = &mut sh.w.free;
            let count = sh.w.state.page_count;
            let live = count - free.len() as u32;
            let cutoff = (live + live / 8 + 16).min(count);
            let held: Vec<u32> = free.iter_from(cutoff).collect();
            for id in &held {
                free.remove(id);
            }
            let catalog = sh.w.state.catalog;
            for mut info in catalog::list(sh, catalog)? {
                let root = btree::relocate(sh, info.root, cutoff)?;
                if root != info.root {
                    info.root = root;
                    sh.catalog_put(info.name.as_bytes(), &info.encode())?;
                }
            }
            let (cat, fr) = (sh.w.state.catalog, sh.w.state.free);
            let cat = btree::relocate(sh, cat, cutoff)?;
            let fr = btree::relocate(sh, fr, cutoff)?;
            sh.w.state.catalog = cat;
            sh.w.state.free = fr;
            held
        };
        let r = tx.commit();
        {
            let mut sh = self.shared.borrow_mut();
            if let Some(free) = sh.st.free.as_mut() {
                free.extend(held);
            }
        }
        r?;
        self.flush()?;
        // 2. Drop the free tail from the free tree and the page count.
        let tx = self.begin_write()?;
        let new_count = {
            let mut guard = self.shared.borrow_mut();
            let w = guard.writer(tx.serial)?.w;
            w.lowest_first = true;
            let mut n = w.state.page_count;
            while n > 2 && w.free.contains(&(n - 1)) {
                n -= 1;
                w.free.remove(&n);
                delta_set(&mut w.delta, n, false);
            }
            w.state.page_count = n;
            n
        };
        tx.commit()?;
        self.flush()?;
        // 3. One more commit, so the other superblock slot no longer names the tail either.
        self.begin_write()?.commit()?;
        self.flush()?;
        let mut sh = self.shared.borrow_mut();
        let st = &mut sh.st;
        let count = st.state.page_count.max(new_count);
        let ps = st.pager.page_size as u64;
        st.pager.truncate(count);
        st.pager.file.set_len(count as u64 * ps)?;
        st.flush()?;
        Ok((before, count))
    }

    /// Overwrites every free page with zeros and flushes, so that nothing a transaction deleted
    /// stays readable in the file (what a purge of replicated history needs: copy-on-write
    /// leaves the old versions of rewritten pages behind until they are reused). Needs no open
    /// transaction. One empty commit comes first, so that neither superblock slot names a state
    /// that uses a page about to be zeroed and a crash at any point opens a sound state. Returns
    /// the number of pages zeroed.
    pub fn erase_free_pages(&self) -> Result<u32> {
        {
            let mut sh = self.shared.borrow_mut();
            if sh.has_writer() || !sh.st.readers.is_empty() {
                return Err(Error::Busy(
                    "erasing free pages needs no open transaction".into(),
                ));
            }
            sh.st.flush()?;
        }
        self.begin_write()?.commit()?;
        self.flush()?;
        let free = self.free_pages()?;
        let mut sh = self.shared.borrow_mut();
        let st = &mut sh.st;
        let ps = st.pager.page_size;
        let zeros = vec![0u8; ps];
        for &id in &free {
            st.pager.forget(id);
            st.pager.file.write(id as u64 * ps as u64, &zeros)?;
        }
        st.flush()?;
        Ok(free.len() as u32)
    }
}
