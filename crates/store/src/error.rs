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
    /// A key, value or file grew past what the format allows.
    TooLarge(String),
    /// The file is not a cairn database (wrong magic, or too short to hold a superblock).
    NotADatabase(String),
    /// The file was written by a newer format version than this build reads.
    UnsupportedVersion { found: u32, supported: u32 },
    /// A tree or other named thing already exists.
    AlreadyExists(String),
    /// An earlier commit failed part-way; the database must be reopened before writing again.
    NeedsReopen(String),
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
            Error::TooLarge(_) => "TOO_LARGE",
            Error::NotADatabase(_) => "NOT_A_DATABASE",
            Error::UnsupportedVersion { .. } => "UNSUPPORTED_VERSION",
            Error::AlreadyExists(_) => "ALREADY_EXISTS",
            Error::NeedsReopen(_) => "NEEDS_REOPEN",
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
            Error::NotFound(m) => write!(f, "not found: {m}"),
            Error::QuotaExceeded(m) => write!(f, "storage quota exceeded: {m}"),
            Error::Corrupt(m) => write!(f, "corrupt file: {m}"),
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Error::Closed => write!(f, "the file is closed"),
            Error::TooLarge(m) => write!(f, "too large: {m}"),
            Error::NotADatabase(m) => write!(f, "not a cairn database: {m}"),
            Error::UnsupportedVersion { found, supported } if found > supported => write!(
                f,
                "the file has format version {found}, newer than the version {supported} this build reads"
            ),
            Error::UnsupportedVersion { found, supported } => write!(
                f,
                "the file has format version {found}, written by an earlier cairn: an older, pre-release format this build does not read (it reads version {supported} only; export the rows with the build that wrote it)"
            ),
            Error::AlreadyExists(m) => write!(f, "already exists: {m}"),
            Error::NeedsReopen(m) => {
                write!(f, "a commit failed ({m}); reopen the database before writing")
            }
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
