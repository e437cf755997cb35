//! The SQL crate's one error type. Every variant has a stable code ([`Error::code`]) that crosses
//! the Worker boundary unchanged, and a message a person can act on.

use std::fmt;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Malformed SQL, with the 1-based line and column where the parser gave up.
    Syntax {
        line: u32,
        column: u32,
        message: String,
    },
    UnknownTable(String),
    UnknownColumn(String),
    UnknownIndex(String),
    UnknownFunction(String),
    /// A column name matches more than one table in scope.
    AmbiguousColumn(String),
    /// A table, index or column of that name already exists.
    AlreadyExists(String),
    /// Wrong number of parameters, or a named parameter left unbound.
    ParamCount(String),
    /// A value that does not fit the column's declared type, or an operation on the wrong type.
    Type(String),
    ConstraintNotNull(String),
    ConstraintUnique(String),
    ConstraintPrimaryKey(String),
    ConstraintCheck(String),
    /// A row whose foreign key names no parent row, or a parent row deleted or changed while
    /// children still name it (`PRAGMA foreign_keys = ON`).
    ConstraintForeignKey,
    /// An integer computation that SQLite also refuses (abs(-2^63), sum overflow).
    IntegerOverflow,
    /// BEGIN inside a transaction, COMMIT outside one.
    Transaction(String),
    /// Something the dialect does not cover (yet), named so the caller can rewrite the query.
    Unsupported(String),
    /// Wrong use of an otherwise valid construct (aggregate in WHERE, wrong argument count...).
    Invalid(String),
    /// Malformed JSON or a bad JSON path given to a JSON function, with SQLite's message.
    Json(String),
    /// A table that cannot be replicated as declared, or an operation a replicated table refuses.
    NotReplicable(String),
    /// A set function on a column of a replicated table that is not a SET, or a map function
    /// on one that is not a MAP.
    ColumnKind(String),
    /// A sync operation failed (bad key, malformed peer message, ...); the code is the sync
    /// layer's own (`SYNC_*`).
    Sync(&'static str, String),
    /// An error from the storage engine.
    Storage(cairn_store::Error),
}

impl Error {
    /// A stable, machine-readable code. These strings are part of the public API: never change
    /// one, only add new ones.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Syntax { .. } => "SYNTAX",
            Error::UnknownTable(_) => "UNKNOWN_TABLE",
            Error::UnknownColumn(_) => "UNKNOWN_COLUMN",
            Error::UnknownIndex(_) => "UNKNOWN_INDEX",
            Error::UnknownFunction(_) => "UNKNOWN_FUNCTION",
            Error::AmbiguousColumn(_) => "AMBIGUOUS_COLUMN",
            Error::AlreadyExists(_) => "ALREADY_EXISTS",
            Error::ParamCount(_) => "PARAM_COUNT",
            Error::Type(_) => "TYPE",
            Error::ConstraintNotNull(_) => "CONSTRAINT_NOT_NULL",
            Error::ConstraintUnique(_) => "CONSTRAINT_UNIQUE",
            Error::ConstraintPrimaryKey(_) => "CONSTRAINT_PRIMARY_KEY",
            Error::ConstraintCheck(_) => "CONSTRAINT_CHECK",
            Error::ConstraintForeignKey => "CONSTRAINT_FOREIGN_KEY",
            Error::IntegerOverflow => "INTEGER_OVERFLOW",
            Error::Transaction(_) => "TRANSACTION",
            Error::Unsupported(_) => "UNSUPPORTED",
            Error::Invalid(_) => "INVALID",
            Error::Json(_) => "JSON",
            Error::NotReplicable(_) => "NOT_REPLICABLE",
            Error::ColumnKind(_) => "COLUMN_KIND",
            Error::Sync(code, _) => code,
            Error::Storage(e) => e.code(),
        }
    }

    pub(crate) fn syntax(line: u32, column: u32, message: impl Into<String>) -> Self {
        Error::Syntax {
            line,
            column,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax {
                line,
                column,
                message,
            } => write!(f, "syntax error at line {line}, column {column}: {message}"),
            Error::UnknownTable(t) => write!(f, "no such table: {t}"),
            Error::UnknownColumn(c) => write!(f, "no such column: {c}"),
            Error::UnknownIndex(i) => write!(f, "no such index: {i}"),
            Error::UnknownFunction(n) => write!(f, "no such function: {n}"),
            Error::AmbiguousColumn(c) => {
                write!(
                    f,
                    "ambiguous column name: {c} (qualify it with a table name)"
                )
            }
            Error::AlreadyExists(m) => write!(f, "{m} already exists"),
            Error::ParamCount(m) => write!(f, "parameters: {m}"),
            Error::Type(m) => write!(f, "type error: {m}"),
            Error::ConstraintNotNull(c) => write!(f, "NOT NULL constraint failed: {c}"),
            Error::ConstraintUnique(c) => write!(f, "UNIQUE constraint failed: {c}"),
            Error::ConstraintPrimaryKey(c) => write!(f, "PRIMARY KEY constraint failed: {c}"),
            Error::ConstraintCheck(c) => write!(f, "CHECK constraint failed: {c}"),
            Error::ConstraintForeignKey => write!(f, "FOREIGN KEY constraint failed"),
            Error::IntegerOverflow => write!(f, "integer overflow"),
            Error::Transaction(m) => write!(f, "transaction: {m}"),
            Error::Unsupported(m) => write!(f, "not supported: {m}"),
            Error::Invalid(m) | Error::Json(m) => write!(f, "{m}"),
            Error::NotReplicable(m) => write!(f, "not replicable: {m}"),
            Error::ColumnKind(m) => f.write_str(m),
            Error::Sync(_, m) => write!(f, "sync: {m}"),
            Error::Storage(e) => write!(f, "storage: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<cairn_store::Error> for Error {
    fn from(e: cairn_store::Error) -> Self {
        Error::Storage(e)
    }
}

/// A key or record that does not decode comes from the file: the storage engine's `CORRUPT`.
impl From<cairn_value::Error> for Error {
    fn from(e: cairn_value::Error) -> Self {
        Error::Storage(cairn_store::Error::Corrupt(e.0))
    }
}
