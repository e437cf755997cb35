//! A block file over the Origin Private File System, through a `FileSystemSyncAccessHandle`.
//!
//! Opening is asynchronous (the directory and file handles come from promises; `OpfsFile::open`,
//! with the `async-opfs` feature, in `opfs_open`); every call after that is synchronous, which is
//! why this only works inside a dedicated Worker. A sync access
//! handle is exclusive: while one is open, no other context of the origin can open the same file,
//! and [`OpfsFile::open`] reports that as `Busy` instead of waiting.
//!
//! The Worker that serves a database takes the handle itself, in JavaScript, and hands it over
//! with [`OpfsFile::from_handle`]: the engine it ships then has no asynchronous code at all
//! (promise and closure glue is a good part of a small module), and maps the platform's errors
//! with [`OpfsFile::error_from_js`], the same way [`OpfsFile::open`] does.
//!
//! Files live in one directory of the origin's OPFS, `cairn` (the Worker's script and `opfs_open`
//! agree on it), so a page's other OPFS users and
//! cairn never see each other's files.

use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{DomException, FileSystemReadWriteOptions, FileSystemSyncAccessHandle};

use crate::error::{Error, Result};
use crate::file::{check_read, BlockFile};

/// Offsets travel to JavaScript as numbers; past 2^53 they are no longer exact.
const MAX_SAFE: u64 = (1 << 53) - 1;

#[derive(Debug)]
pub struct OpfsFile {
    handle: Option<FileSystemSyncAccessHandle>,
    name: String,
}

/// Turns a rejected promise or a thrown exception into an error with a stable code.
pub(crate) fn js_error(e: JsValue, name: &str) -> Error {
    let (kind, message) = match e.dyn_ref::<DomException>() {
        Some(d) => (d.name(), d.message()),
        None => {
            let kind = Reflect::get(&e, &"name".into())
                .ok()
                .and_then(|v| v.as_string())
                .unwrap_or_default();
            let message = Reflect::get(&e, &"message".into())
                .ok()
                .and_then(|v| v.as_string())
                .or_else(|| e.as_string())
                .unwrap_or_else(|| "unknown error".into());
            (kind, message)
        }
    };
    let what = format!("{name:?}: {message}");
    match kind.as_str() {
        "NoModificationAllowedError" => Error::Busy(format!(
            "{name:?} is open in another Worker or tab (sync access handles are exclusive): {message}"
        )),
        "NotFoundError" => Error::NotFound(what),
        "TypeError" => Error::InvalidName(what),
        "QuotaExceededError" => Error::QuotaExceeded(what),
        "InvalidStateError" => Error::Closed,
        _ if kind.is_empty() => Error::Io(what),
        _ => Error::Io(format!("{kind}: {what}")),
    }
}

/// Refuses names OPFS would refuse, or that would escape the directory, with the reason.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = if name.is_empty() {
        Some("the name is empty")
    } else if name == "." || name == ".." {
        Some("\".\" and \"..\" are not file names")
    } else if name.contains(['/', '\\']) {
        Some("a name cannot contain '/' or '\\'")
    } else if name.contains('\0') {
        Some("a name cannot contain a NUL character")
    } else {
        None
    };
    match bad {
        Some(why) => Err(Error::InvalidName(format!("{name:?}: {why}"))),
        None => Ok(()),
    }
}

impl OpfsFile {
    /// Wraps `handle`, a `FileSystemSyncAccessHandle` taken for the file `name` in cairn's OPFS
    /// directory. The file closes the handle when it is closed or dropped.
    pub fn from_handle(handle: JsValue, name: &str) -> Self {
        Self {
            handle: Some(handle.unchecked_into()),
            name: name.to_owned(),
        }
    }

    /// The error, with its stable code, for what an OPFS call on the file `name` threw or
    /// rejected with (`NoModificationAllowedError` is `Busy`, and so on).
    pub fn error_from_js(e: JsValue, name: &str) -> Error {
        js_error(e, name)
    }

    /// Refuses a name OPFS would refuse, or that would escape cairn's directory.
    pub fn check_name(name: &str) -> Result<()> {
        check_name(name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn handle(&self) -> Result<&FileSystemSyncAccessHandle> {
        self.handle.as_ref().ok_or(Error::Closed)
    }

    fn at(offset: u64) -> FileSystemReadWriteOptions {
        let opts = FileSystemReadWriteOptions::new();
        opts.set_at(offset as f64);
        opts
    }
}

impl BlockFile for OpfsFile {
    fn len(&self) -> Result<u64> {
        let size = self
            .handle()?
            .get_size()
            .map_err(|e| js_error(e, &self.name))?;
        Ok(size as u64)
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let h = self.handle()?;
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > MAX_SAFE) {
            return check_read(offset, buf.len(), self.len()?);
        }
        if buf.is_empty() {
            return check_read(offset, 0, self.len()?);
        }
        let n = h
            .read_with_u8_array_and_options(buf, &Self::at(offset))
            .map_err(|e| js_error(e, &self.name))?;
        if (n as usize) < buf.len() {
            // Only a read past the end comes back short.
            check_read(offset, buf.len(), self.len()?)?;
            return Err(Error::Io(format!(
                "short read of {} bytes from {:?}",
                n as u64, self.name
            )));
        }
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let h = self.handle()?;
        if offset.saturating_add(data.len() as u64) > MAX_SAFE {
            return Err(Error::InvalidInput(format!(
                "write at {offset} is past the largest file"
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        let n = h
            .write_with_u8_array_and_options(data, &Self::at(offset))
            .map_err(|e| js_error(e, &self.name))?;
        if (n as usize) != data.len() {
            // OPFS writes all or throws; a short count means the quota ran out part way.
            return Err(Error::QuotaExceeded(format!(
                "wrote {} of {} bytes to {:?}",
                n as u64,
                data.len(),
                self.name
            )));
        }
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        if len > MAX_SAFE {
            return Err(Error::InvalidInput(format!(
                "length {len} is past the largest file"
            )));
        }
        self.handle()?
            .truncate_with_f64(len as f64)
            .map_err(|e| js_error(e, &self.name))
    }

    fn flush(&mut self) -> Result<()> {
        self.handle()?.flush().map_err(|e| js_error(e, &self.name))
    }

    fn close(&mut self) -> Result<()> {
        if let Some(h) = self.handle.take() {
            h.close();
        }
        Ok(())
    }
}

impl Drop for OpfsFile {
    fn drop(&mut self) {
        // Releasing the handle is what lets the next Worker open the file.
        let _ = BlockFile::close(self);
    }
}
