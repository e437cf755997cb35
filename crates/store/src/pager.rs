//! The pager: reads and writes whole pages through a [`BlockFile`], verifies and sets page
//! checksums, and keeps a bounded cache of committed pages (CLOCK eviction). The cache holds at
//! most `capacity` pages; pages a cursor still holds stay alive through their `Rc` even when
//! evicted, so memory is bounded by the cache plus what open cursors point at (one root-to-leaf
//! path each).
//!
//! Over a volatile file ([`BlockFile::volatile`]: memory, which no crash can tear) the cache is
//! also a write-back cache: a commit leaves its pages in the cache *unwritten*, and a page
//! reaches the file, with its checksum, only when it is evicted or when the file is handed back
//! ([`Pager::write_back`]). A small commit in memory then costs neither a checksum nor a copy
//! into the file per page.

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::hash::{xxh64, FastMap};
use crate::page;

/// A page's bytes. Shared, so a cursor can keep reading a page the cache has dropped.
pub type Page = Rc<Vec<u8>>;

/// Maps keyed by page number.
pub type IdMap<V> = FastMap<u32, V>;

struct Slot {
    id: u32,
    page: Page,
    referenced: bool,
    /// Newer than the file's copy (write-back only): written, with its checksum, when evicted.
    unwritten: bool,
}

struct Cache {
    map: IdMap<usize>,
    slots: Vec<Slot>,
    hand: usize,
    capacity: usize,
}

impl Cache {
    fn get(&mut self, id: u32) -> Option<Page> {
        let &i = self.map.get(&id)?;
        let s = &mut self.slots[i];
        s.referenced = true;
        Some(s.page.clone())
    }

    /// Caches `page` as page `id`; hands back the page it displaces: an older version of `id`
    /// (never to be written: `page` supersedes it), or the page it evicts, with whether that
    /// one is unwritten (the caller writes it).
    fn put(&mut self, id: u32, page: Page, unwritten: bool) -> Option<(u32, Page, bool)> {
        if let Some(&i) = self.map.get(&id) {
            let s = &mut self.slots[i];
            let old = std::mem::replace(&mut s.page, page);
            s.referenced = true;
            s.unwritten = unwritten;
            return Some((id, old, false));
        }
        if self.slots.len() < self.capacity {
            self.map.insert(id, self.slots.len());
            self.slots.push(Slot {
                id,
                page,
                referenced: false,
                unwritten,
            });
            return None;
        }
        loop {
            let s = &mut self.slots[self.hand];
            if s.referenced {
                s.referenced = false;
                self.hand = (self.hand + 1) % self.slots.len();
                continue;
            }
            self.map.remove(&s.id);
            let old_id = std::mem::replace(&mut s.id, id);
            let old = std::mem::replace(&mut s.page, page);
            let was_unwritten = std::mem::replace(&mut s.unwritten, unwritten);
            self.map.insert(id, self.hand);
            self.hand = (self.hand + 1) % self.slots.len();
            return Some((old_id, old, was_unwritten));
        }
    }

    fn remove(&mut self, id: u32) {
        if let Some(i) = self.map.remove(&id) {
            let last = self.slots.len() - 1;
            self.slots.swap(i, last);
            self.slots.pop();
            if i < self.slots.len() {
                self.map.insert(self.slots[i].id, i);
            }
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
        }
    }
}

pub struct Pager<F> {
    pub file: F,
    pub page_size: usize,
    /// The file is volatile: committed pages wait in the cache (see the module doc).
    pub volatile: bool,
    cache: Cache,
    /// Page buffers the cache let go of and nothing else held, for the next pages to take
    /// instead of allocating (a small commit copies a few pages and drops their old versions).
    spare: Vec<Page>,
    /// Page reads that went to the file (for tests and the benchmark).
    pub reads: u64,
}

/// The checksum a page's bytes must carry (`docs/file-format.md`, "Checksums").
pub fn page_checksum(id: u32, p: &[u8]) -> u64 {
    xxh64(&p[8..], id as u64)
}

/// Stamps `txn` and the checksum into page `id`'s bytes; returns the checksum.
pub fn stamp(id: u32, p: &mut [u8], txn: u64) -> u64 {
    page::put_u64(p, 8, txn);
    let sum = page_checksum(id, p);
    page::put_u64(p, 0, sum);
    sum
}

/// At most this many spare page buffers are kept (a small commit replaces a handful of pages).
const SPARE_PAGES: usize = 8;

impl<F: BlockFile> Pager<F> {
    pub fn new(file: F, page_size: usize, cache_pages: usize) -> Self {
        Pager {
            volatile: file.volatile(),
            file,
            page_size,
            cache: Cache {
                map: IdMap::default(),
                slots: Vec::new(),
                hand: 0,
                capacity: cache_pages.max(8),
            },
            reads: 0,
            spare: Vec::new(),
        }
    }

    pub fn cached_pages(&self) -> usize {
        self.cache.slots.len()
    }

    /// Reads page `id` without the cache, verifying its checksum and layout. An unwritten page
    /// (write-back) comes from the cache: the file does not hold it yet.
    pub fn read_uncached(&mut self, id: u32) -> Result<Page> {
        if self.volatile {
            if let Some(&i) = self.cache.map.get(&id) {
                let s = &self.cache.slots[i];
                if s.unwritten {
                    return Ok(Rc::new(s.page.to_vec()));
                }
            }
        }
        // The read fills the whole buffer, so a spare one needs no zeroing.
        let mut page = match self.spare.pop() {
            Some(p) => p,
            None => Rc::new(vec![0u8; self.page_size]),
        };
        let buf = Rc::get_mut(&mut page).expect("invariant: nothing else holds a spare page");
        let off = id as u64 * self.page_size as u64;
        self.reads += 1;
        self.file.read(off, buf).map_err(|e| match e {
            Error::OutOfBounds { .. } => page::corrupt(id, "lies past the end of the file"),
            e => e,
        })?;
        let stored = page::get_u64(buf, 0);
        if stored != page_checksum(id, buf) {
            return Err(page::corrupt(id, "checksum mismatch"));
        }
        page::validate(buf).map_err(|m| page::corrupt(id, m))?;
        Ok(page)
    }

    /// Page `id`'s bytes, borrowed from the cache (no reference count touched).
    pub fn read_ref(&mut self, id: u32) -> Result<&[u8]> {
        // One look-up for a cached page (nearly every read), not a test and then a get.
        let i = match self.cache.map.get(&id) {
            Some(&i) => i,
            None => {
                let p = self.read_uncached(id)?;
                self.cache_put(id, p)?;
                *self.cache.map.get(&id).expect("invariant: just cached")
            }
        };
        let s = &mut self.cache.slots[i];
        s.referenced = true;
        Ok(&s.page)
    }

    pub fn read(&mut self, id: u32) -> Result<Page> {
        if let Some(p) = self.cache.get(id) {
            return Ok(p);
        }
        let p = self.read_uncached(id)?;
        self.cache_put(id, p.clone())?;
        Ok(p)
    }

    /// Caches page `id` as the file holds it.
    pub fn cache_put(&mut self, id: u32, p: Page) -> Result<()> {
        let out = self.cache.put(id, p, false);
        self.displaced(out)
    }

    /// Caches committed page `id` without writing it (write-back only); its transaction id must
    /// be stamped already.
    pub fn cache_put_unwritten(&mut self, id: u32, p: Page) -> Result<()> {
        debug_assert!(self.volatile, "only a volatile file defers writes");
        let out = self.cache.put(id, p, true);
        self.displaced(out)
    }

    /// Writes a page the cache displaced if it is unwritten, and keeps its buffer if nothing
    /// else holds it.
    fn displaced(&mut self, out: Option<(u32, Page, bool)>) -> Result<()> {
        let Some((id, page, unwritten)) = out else {
            return Ok(());
        };
        if unwritten {
            self.write_page(id, &page)?;
        }
        self.keep_spare(page);
        Ok(())
    }

    /// Keeps `page` for [`Pager::spare_page`] when nothing else holds it.
    pub fn keep_spare(&mut self, mut page: Page) {
        if self.spare.len() < SPARE_PAGES
            && Rc::get_mut(&mut page).is_some_and(|b| b.len() == self.page_size)
        {
            self.spare.push(page);
        }
    }

    /// A page to overwrite whole, if the cache let go of one: nothing else holds it (so
    /// `Rc::get_mut` gives its bytes), and its bytes are any page's.
    pub fn spare_page(&mut self) -> Option<Page> {
        self.spare.pop()
    }

    /// Writes an unwritten page with its checksum (its cached bytes keep whatever the field
    /// held: nothing reads the checksum of a cached page).
    fn write_page(&mut self, id: u32, p: &[u8]) -> Result<()> {
        let off = id as u64 * self.page_size as u64;
        let sum = page_checksum(id, p);
        self.file.write(off, &sum.to_le_bytes())?;
        self.file.write(off + 8, &p[8..])
    }

    /// Writes every unwritten page, so the file holds the last commit (write-back only).
    pub fn write_back(&mut self) -> Result<()> {
        for i in 0..self.cache.slots.len() {
            if self.cache.slots[i].unwritten {
                let (id, p) = (self.cache.slots[i].id, self.cache.slots[i].page.clone());
                self.write_page(id, &p)?;
                self.cache.slots[i].unwritten = false;
            }
        }
        Ok(())
    }

    /// Drops every cached page from `count` on (the file is being cut to `count` pages).
    pub fn truncate(&mut self, count: u32) {
        let ids: Vec<u32> = (self.cache.slots.iter())
            .map(|s| s.id)
            .filter(|&id| id >= count)
            .collect();
        for id in ids {
            self.cache.remove(id);
        }
    }

    /// Removes page `id` from the cache and hands it over (a spilled page being changed again:
    /// no copy when nothing else holds it). An unwritten page needs no write: the transaction
    /// writes it again at commit, or drops it (it owns it) on rollback.
    pub fn take(&mut self, id: u32) -> Option<Page> {
        let p = self.cache.get(id)?;
        self.cache.remove(id);
        Some(p)
    }

    /// Drops page `id` from the cache, unwritten or not: its bytes are no longer needed (a page
    /// freed or rolled back, or about to be overwritten in the file).
    pub fn forget(&mut self, id: u32) {
        self.cache.remove(id)
    }
}
