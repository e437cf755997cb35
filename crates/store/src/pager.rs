//! The pager: reads and writes whole pages through a [`BlockFile`], verifies and sets page
//! checksums, and keeps a bounded cache of clean pages (CLOCK eviction). The cache holds at most
//! `capacity` pages; pages a cursor still holds stay alive through their `Rc` even when evicted, so
//! memory is bounded by the cache plus what open cursors point at (one root-to-leaf path each).

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

    fn put(&mut self, id: u32, page: Page) {
        if let Some(&i) = self.map.get(&id) {
            self.slots[i].page = page;
            self.slots[i].referenced = true;
            return;
        }
        if self.slots.len() < self.capacity {
            self.map.insert(id, self.slots.len());
            self.slots.push(Slot {
                id,
                page,
                referenced: false,
            });
            return;
        }
        loop {
            let s = &mut self.slots[self.hand];
            if s.referenced {
                s.referenced = false;
                self.hand = (self.hand + 1) % self.slots.len();
                continue;
            }
            self.map.remove(&s.id);
            s.id = id;
            s.page = page;
            self.map.insert(id, self.hand);
            self.hand = (self.hand + 1) % self.slots.len();
            return;
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
    cache: Cache,
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

impl<F: BlockFile> Pager<F> {
    pub fn new(file: F, page_size: usize, cache_pages: usize) -> Self {
        Pager {
            file,
            page_size,
            cache: Cache {
                map: IdMap::default(),
                slots: Vec::new(),
                hand: 0,
                capacity: cache_pages.max(8),
            },
            reads: 0,
        }
    }

    pub fn cached_pages(&self) -> usize {
        self.cache.slots.len()
    }

    /// Reads page `id` without the cache, verifying its checksum and layout.
    pub fn read_uncached(&mut self, id: u32) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.page_size];
        let off = id as u64 * self.page_size as u64;
        self.reads += 1;
        self.file.read(off, &mut buf).map_err(|e| match e {
            Error::OutOfBounds { .. } => page::corrupt(id, "lies past the end of the file"),
            e => e,
        })?;
        let stored = page::get_u64(&buf, 0);
        if stored != page_checksum(id, &buf) {
            return Err(page::corrupt(id, "checksum mismatch"));
        }
        page::validate(&buf).map_err(|m| page::corrupt(id, m))?;
        Ok(buf)
    }

    /// Page `id`'s bytes, borrowed from the cache (no reference count touched).
    pub fn read_ref(&mut self, id: u32) -> Result<&[u8]> {
        if !self.cache.map.contains_key(&id) {
            let p = Rc::new(self.read_uncached(id)?);
            self.cache.put(id, p);
        }
        let i = *self.cache.map.get(&id).expect("invariant: just cached");
        let s = &mut self.cache.slots[i];
        s.referenced = true;
        Ok(&s.page)
    }

    pub fn read(&mut self, id: u32) -> Result<Page> {
        if let Some(p) = self.cache.get(id) {
            return Ok(p);
        }
        let p = Rc::new(self.read_uncached(id)?);
        self.cache.put(id, p.clone());
        Ok(p)
    }

    pub fn cache_put(&mut self, id: u32, p: Page) {
        self.cache.put(id, p)
    }

    /// Removes page `id` from the cache and hands it over (a spilled page being changed again:
    /// no copy when nothing else holds it).
    pub fn take(&mut self, id: u32) -> Option<Page> {
        let p = self.cache.get(id)?;
        self.cache.remove(id);
        Some(p)
    }

    pub fn forget(&mut self, id: u32) {
        self.cache.remove(id)
    }
}
