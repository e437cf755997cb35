//! One error enum for the crate, and the typed reasons a peer's block is rejected.

use std::fmt;

/// Why a block (or a writer list, a checkpoint) from a peer was refused. The code strings are
/// stable: applications match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    Malformed,
    UnknownTable,
    SchemaMismatch,
    BadSignature,
    Replay,
    ChainGap,
    Fork,
    Unauthorized,
    ClockSkew,
    /// A snapshot this replica did not ask for, or from a link it does not take snapshots from.
    Unsolicited,
}

impl Reason {
    pub fn code(self) -> &'static str {
        match self {
            Reason::Malformed => "MALFORMED",
            Reason::UnknownTable => "UNKNOWN_TABLE",
            Reason::SchemaMismatch => "SCHEMA_MISMATCH",
            Reason::BadSignature => "BAD_SIGNATURE",
            Reason::Replay => "REPLAY",
            Reason::ChainGap => "CHAIN_GAP",
            Reason::Fork => "FORK",
            Reason::Unauthorized => "UNAUTHORIZED",
            Reason::ClockSkew => "CLOCK_SKEW",
            Reason::Unsolicited => "UNSOLICITED",
        }
    }

    pub fn from_code(code: &str) -> Option<Reason> {
        use Reason::*;
        [
            Malformed,
            UnknownTable,
            SchemaMismatch,
            BadSignature,
            Replay,
            ChainGap,
            Fork,
            Unauthorized,
            ClockSkew,
            Unsolicited,
        ]
        .into_iter()
        .find(|r| r.code() == code)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bytes that do not decode (from a peer, a key import, a stored block).
    Malformed(String),
    /// A caller's mistake: unknown table, wrong column kind, bad key length...
    InvalidInput(String),
    /// A peer's block or list was refused.
    Rejected { reason: Reason, detail: String },
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Error::Malformed(_) => "MALFORMED",
            Error::InvalidInput(_) => "INVALID_INPUT",
            Error::Rejected { reason, .. } => reason.code(),
        }
    }
    pub(crate) fn reject(reason: Reason, detail: impl Into<String>) -> Error {
        Error::Rejected {
            reason,
            detail: detail.into(),
        }
    }
    /// The rejection reason this error stands for when it comes from a peer.
    pub fn reason(&self) -> Reason {
        match self {
            Error::Rejected { reason, .. } => *reason,
            Error::Malformed(_) | Error::InvalidInput(_) => Reason::Malformed,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Malformed(m) => write!(f, "MALFORMED: {m}"),
            Error::InvalidInput(m) => write!(f, "INVALID_INPUT: {m}"),
            Error::Rejected { reason, detail } => write!(f, "{reason}: {detail}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
