//! The block-file trait: all byte I/O of the engine goes through it, so the pager and everything
//! above it never see OPFS, `std::fs` or a fault injector directly. Implementations: [`MemoryFile`]
//! here, [`crate::StdFile`] natively, [`crate::OpfsFile`] in the browser, and
//! [`crate::fault::FaultFile`] for crash tests.
//!
//! The contract, checked for every implementation by [`crate::conformance`]:
//! - `read` fills the whole buffer or fails with `OutOfBounds`; it never returns short.
//! - `write` past the end extends the file; a gap between the old end and the write reads as zeros.
//! - `flush` makes every completed `write` and `set_len` durable. Nothing is durable before it.
//! - After `close` every call fails with `Closed`; `close` twice is harmless.

use crate::error::{Error, Result};

pub trait BlockFile {
    /// The file's length in bytes.
    fn len(&self) -> Result<u64>;
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes all of `data` at `offset`, extending the file if needed.
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()>;
    /// Truncates or extends (with zeros) the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> Result<()>;
    /// Makes every write so far durable.
    fn flush(&mut self) -> Result<()>;
    /// Releases the file. OPFS handles are exclusive, so this is what lets another Worker in.
    fn close(&mut self) -> Result<()>;

    /// True when the bytes go when the process does (memory), so no crash can tear a write
    /// and nothing reads the file but this process's store. The store then keeps committed
    /// pages in its cache and writes them, with their checksums, and the superblock only when
    /// it must: on eviction and when the file is handed back (`Db::into_file`); and a write
    /// changes committed pages under their own numbers instead of copying them to new ones
    /// (`Writer::page_mut` in `db`).
    fn volatile(&self) -> bool {
        false
    }

    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl<F: BlockFile + ?Sized> BlockFile for Box<F> {
    fn len(&self) -> Result<u64> {
        (**self).len()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read(offset, buf)
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        (**self).write(offset, data)
    }
    fn set_len(&mut self, len: u64) -> Result<()> {
        (**self).set_len(len)
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
    fn close(&mut self) -> Result<()> {
        (**self).close()
    }
    fn volatile(&self) -> bool {
        (**self).volatile()
    }
}

/// Checks that a read of `len` bytes at `offset` fits in a file of `file_len` bytes.
pub(crate) fn check_read(offset: u64, len: usize, file_len: u64) -> Result<()> {
    let end = offset.checked_add(len as u64);
    match end {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(Error::OutOfBounds {
            offset,
            len: len as u64,
            file_len,
        }),
    }
}

/// Converts a file offset to a memory index, refusing what this platform cannot address.
pub(crate) fn to_index(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::InvalidInput(format!("offset {v} is too large")))
}

/// A file held in memory. Every write is "durable" at once; [`crate::fault::FaultFile`] is the one
/// that tells written from durable bytes.
#[derive(Debug, Default, Clone)]
pub struct MemoryFile {
    data: Vec<u8>,
    closed: bool,
}

impl MemoryFile {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_bytes(data: Vec<u8>) -> Self {
        Self {
            data,
            closed: false,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    fn open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }
}

impl BlockFile for MemoryFile {
    fn len(&self) -> Result<u64> {
        self.open()?;
        Ok(self.data.len() as u64)
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.open()?;
        check_read(offset, buf.len(), self.data.len() as u64)?;
        let start = to_index(offset)?;
        buf.copy_from_slice(&self.data[start..start + buf.len()]);
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.open()?;
        let start = to_index(offset)?;
        let end = start
            .checked_add(data.len())
            .ok_or_else(|| Error::InvalidInput(format!("write at {offset} overflows")))?;
        let len = self.data.len();
        if end <= len {
            self.data[start..end].copy_from_slice(data);
        } else {
            // Growing: what lies past the end is appended, not zero-filled and then overwritten
            // (a commit in memory writes its pages at the end of the file).
            if start > len {
                self.data.resize(start, 0);
            }
            let inside = self.data.len() - start;
            self.data[start..].copy_from_slice(&data[..inside]);
            self.data.extend_from_slice(&data[inside..]);
        }
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.open()?;
        self.data.resize(to_index(len)?, 0);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.open()
    }

    fn close(&mut self) -> Result<()> {
        self.closed = true;
        Ok(())
    }

    fn volatile(&self) -> bool {
        true
    }
}
