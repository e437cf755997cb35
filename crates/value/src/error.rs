//! The one error the value encodings raise: bytes that are not a well-formed key or record.

use std::fmt;

pub type Result<T> = std::result::Result<T, Error>;

/// Bytes that do not decode as the encoding says they must (a key that ends inside a value, a
/// record whose columns run past its end, text that is not UTF-8). The storage engine's callers
/// report it as the file's corruption (`CORRUPT`): keys and records come from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl Error {
    pub(crate) fn corrupt(message: String) -> Error {
        Error(message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt file: {}", self.0)
    }
}

impl std::error::Error for Error {}
