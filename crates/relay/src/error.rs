//! One error enum for the relay, each with a stable code.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The operating system refused something (bind, create a directory).
    Io(String),
    /// The store failed (its own stable code is in the message).
    Store(String),
    /// The relay's file holds something it cannot use.
    Corrupt(String),
    /// A bad flag or argument.
    InvalidInput(String),
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Error::Io(_) => "IO",
            Error::Store(_) => "STORE",
            Error::Corrupt(_) => "CORRUPT",
            Error::InvalidInput(_) => "INVALID_INPUT",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(m) | Error::Store(m) | Error::Corrupt(m) | Error::InvalidInput(m) => {
                write!(f, "{}: {m}", self.code())
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<cairn_store::Error> for Error {
    fn from(e: cairn_store::Error) -> Error {
        Error::Store(format!("{} ({})", e, e.code()))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
