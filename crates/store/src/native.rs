//! A block file on the native file system (`std::fs`), used by the shell, the relay and tests.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{Error, Result};
use crate::file::{check_read, BlockFile};

#[derive(Debug)]
pub struct StdFile {
    file: Option<File>,
}

impl StdFile {
    /// Opens `path`, creating it when `create` is set.
    pub fn open(path: impl AsRef<Path>, create: bool) -> Result<Self> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| match Error::from(e) {
                Error::NotFound(_) => Error::NotFound(format!("file {}", path.display())),
                other => other,
            })?;
        Ok(Self { file: Some(file) })
    }

    fn file(&self) -> Result<&File> {
        self.file.as_ref().ok_or(Error::Closed)
    }
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
}
#[cfg(unix)]
fn write_at(f: &File, data: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, data, offset)
}

#[cfg(windows)]
fn read_at(f: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = f.seek_read(buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}
#[cfg(windows)]
fn write_at(f: &File, mut data: &[u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !data.is_empty() {
        let n = f.seek_write(data, offset)?;
        data = &data[n..];
        offset += n as u64;
    }
    Ok(())
}

impl BlockFile for StdFile {
    fn len(&self) -> Result<u64> {
        Ok(self.file()?.metadata()?.len())
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let f = self.file()?;
        match read_at(f, buf, offset) {
            Ok(()) => Ok(()),
            // The length is asked for only on this path, so a good read costs one syscall.
            Err(e) => {
                check_read(offset, buf.len(), f.metadata()?.len())?;
                Err(e.into())
            }
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        write_at(self.file()?, data, offset)?;
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.file()?.set_len(len)?;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // sync_data, not sync_all: the length is data too on every platform we run on, and the
        // inode times are not worth a second journal write.
        self.file()?.sync_data()?;
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.file = None;
        Ok(())
    }
}
