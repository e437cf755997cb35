//! A block file for crash and fault tests. It keeps apart what has been written (what reads see)
//! and what has been flushed (what survives a crash), can fail the Nth I/O call, and can build the
//! file a crash would leave: flushed bytes only, everything written, or the last unflushed write
//! torn halfway.
//!
//! Clones share one state, so a test keeps a clone while the engine owns the other.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::file::{BlockFile, MemoryFile};

/// What a crash leaves of the writes since the last flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// None of them: only flushed bytes survive.
    DropUnflushed,
    /// All of them, as if the OS flushed on its own just before the crash.
    KeepUnflushed,
    /// All but the last, and the last one half-written (a torn page).
    TearLast,
}

/// Which calls count toward [`FaultFile::fail_at`].
#[derive(Debug, Default)]
struct Inner {
    written: MemoryFile,
    durable: Vec<u8>,
    /// Writes and truncations since the last flush, in order, applied to `durable` on flush.
    pending: Vec<Pending>,
    /// Count of mutating calls (write, set_len, flush) so far.
    ops: u64,
    /// Count of flushes that succeeded.
    flushes: u64,
    /// The mutating call (counted from 0) that fails; with `sticky`, every call after it fails too.
    fail_at: Option<u64>,
    sticky: bool,
    failed: bool,
    closed: bool,
}

#[derive(Debug, Clone)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
pub struct FaultFile {
    inner: Arc<Mutex<Inner>>,
}

impl FaultFile {
    pub fn new() -> Self {
        Self::default()
    }

    /// A file whose bytes are already durable, such as one a crash left behind.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        let f = Self::default();
        {
            let mut i = f.lock();
            i.written = MemoryFile::from_bytes(bytes.clone());
            i.durable = bytes;
        }
        f
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock means a test already panicked; its state is still what we want to see.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes mutating call number `n` (from 0: writes, set_len and flushes) fail. With `sticky`,
    /// every later call fails too, as after a crash.
    pub fn fail_at(&self, n: u64, sticky: bool) {
        let mut i = self.lock();
        i.fail_at = Some(n);
        i.sticky = sticky;
        i.failed = false;
    }

    /// Stops injecting faults.
    pub fn heal(&self) {
        let mut i = self.lock();
        i.fail_at = None;
        i.failed = false;
    }

    /// The number of mutating calls made so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// The number of flushes that succeeded so far.
    pub fn flushes(&self) -> u64 {
        self.lock().flushes
    }

    /// The bytes reads see now.
    pub fn written_bytes(&self) -> Vec<u8> {
        self.lock().written.bytes().to_vec()
    }

    /// The bytes as of the last flush.
    pub fn durable_bytes(&self) -> Vec<u8> {
        self.lock().durable.clone()
    }

    /// The file as a crash now would leave it.
    pub fn crash_image(&self, mode: CrashMode) -> Vec<u8> {
        let i = self.lock();
        let mut file = MemoryFile::from_bytes(i.durable.clone());
        let n = i.pending.len();
        let keep = match mode {
            CrashMode::DropUnflushed => 0,
            CrashMode::KeepUnflushed => n,
            CrashMode::TearLast => n.saturating_sub(1),
        };
        for p in &i.pending[..keep] {
            apply(&mut file, p);
        }
        if mode == CrashMode::TearLast {
            if let Some(Pending::Write(off, data)) = i.pending.last() {
                apply(
                    &mut file,
                    &Pending::Write(*off, data[..data.len() / 2].to_vec()),
                );
            }
        }
        file.into_bytes()
    }

    /// Counts one mutating call and decides whether it fails.
    fn step(i: &mut Inner) -> Result<()> {
        if i.closed {
            return Err(Error::Closed);
        }
        let n = i.ops;
        i.ops += 1;
        if i.failed && i.sticky {
            return Err(Error::Io(format!("injected fault (after call {n})")));
        }
        if i.fail_at == Some(n) {
            i.failed = true;
            return Err(Error::Io(format!("injected fault at call {n}")));
        }
        Ok(())
    }
}

fn apply(file: &mut MemoryFile, p: &Pending) {
    // MemoryFile accepts any write or length this crate's tests use; a failure here is a bug.
    let r = match p {
        Pending::Write(off, data) => file.write(*off, data),
        Pending::SetLen(len) => file.set_len(*len),
    };
    r.expect("invariant: replaying a recorded write into memory cannot fail");
}

impl BlockFile for FaultFile {
    fn len(&self) -> Result<u64> {
        let i = self.lock();
        if i.closed {
            return Err(Error::Closed);
        }
        i.written.len()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let i = self.lock();
        if i.closed {
            return Err(Error::Closed);
        }
        if i.failed && i.sticky {
            return Err(Error::Io("injected fault (file crashed)".into()));
        }
        i.written.read(offset, buf)
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let mut i = self.lock();
        Self::step(&mut i)?;
        i.written.write(offset, data)?;
        i.pending.push(Pending::Write(offset, data.to_vec()));
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        let mut i = self.lock();
        Self::step(&mut i)?;
        i.written.set_len(len)?;
        i.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let mut i = self.lock();
        Self::step(&mut i)?;
        i.durable = i.written.bytes().to_vec();
        i.pending.clear();
        i.flushes += 1;
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.lock().closed = true;
        Ok(())
    }
}
