//! Parsing: SQL text to an AST. [`lexer::tokenize`] turns the text into tokens (each with its
//! line and column, for error messages); the parser builds an [`ast::Statement`] from them by
//! recursive descent (`parser.rs`: the statements and DDL; `query.rs`: SELECT and the writes;
//! `expr.rs`: expressions, by precedence climbing) and numbers the parameters ([`Params`]).
//! [`display`] prints an AST back as SQL text (the stored schema, CHECK errors). The planner
//! ([`crate::plan`]) takes the AST from here.

pub(crate) mod ast;
pub(crate) mod display;
mod expr;
pub(crate) mod lexer;
mod parser;
mod query;
pub(crate) mod window;

pub use parser::{is_keyword, parse, parse_statements, Params};
