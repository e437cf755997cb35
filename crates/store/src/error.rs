//! The storage crate's one error type. Every variant has a stable code (`Error::code`) that
//! crosses the Worker boundary unchanged, and a message a person can act on.

use std::fmt;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The platform refused or failed an I/O call (the message carries its reason).
    Io(String),
    /// A read asked for bytes past the end of the file.
    OutOfBounds {
        offset: u64,
        len: u64,
        file_len: u64,
    },
    /// A file name the platform will not accept.
    InvalidName(String),
    /// The file is held open elsewhere (OPFS sync access handles are exclusive).
    Busy(String),
    /// The file does not exist and was not to be created.
    NotFound(String),
    /// The storage quota is exhausted; nothing past the last successful write was kept.
    QuotaExceeded(String),
    /// The file's contents are not what they must be (bad magic, checksum, structure).
    Corrupt(String),
    /// A caller passed something that cannot be right (a bad setting, a bad argument).
    InvalidInput(String),
    /// The file was closed; no further I/O is possible through this handle.
    Closed,
}

impl Error {
    /// A stable, machine-readable code. These strings are part of the public API: never change
    /// one, only add new ones.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Io(_) => "IO",
            Error::OutOfBounds { .. } => "OUT_OF_BOUNDS",
            Error::InvalidName(_) => "INVALID_NAME",
            Error::Busy(_) => "BUSY",
            Error::NotFound(_) => "NOT_FOUND",
            Error::QuotaExceeded(_) => "QUOTA_EXCEEDED",
            Error::Corrupt(_) => "CORRUPT",
            Error::InvalidInput(_) => "INVALID_INPUT",
            Error::Closed => "CLOSED",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(m) => write!(f, "I/O error: {m}"),
            Error::OutOfBounds { offset, len, file_len } => write!(
                f,
                "read of {len} bytes at offset {offset} goes past the end of the file ({file_len} bytes)"
            ),
            Error::InvalidName(m) => write!(f, "invalid file name: {m}"),
            Error::Busy(m) => write!(f, "file is in use: {m}"),
            Error::NotFound(m) => write!(f, "file not found: {m}"),
            Error::QuotaExceeded(m) => write!(f, "storage quota exceeded: {m}"),
            Error::Corrupt(m) => write!(f, "corrupt file: {m}"),
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Error::Closed => write!(f, "the file is closed"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound(e.to_string()),
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidFilename => {
                Error::InvalidName(e.to_string())
            }
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                Error::QuotaExceeded(e.to_string())
            }
            _ => Error::Io(e.to_string()),
        }
    }
}
