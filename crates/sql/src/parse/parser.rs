//! The parser: tokens to an [`crate::parse::ast::Statement`], by recursive descent, with precedence climbing
//! for expressions (SQLite's operator precedence). Hand-written rather than generated, because
//! the wasm download pays for every table a generator would emit.

use crate::error::{Error, Result};
use crate::parse::ast::*;
use crate::parse::lexer::{tokenize, Tok, Token};
use cairn_value::Value;

/// A statement's parameters, numbered as SQLite numbers them: in the order they appear in the
/// text, `?NNN` is NNN, and `?` or a name not seen before takes one more than the largest number
/// so far; a name seen before keeps its number.
#[derive(Debug, Default, Clone)]
pub struct Params {
    /// Each named parameter (prefix included) with its 0-based position.
    pub names: Vec<(String, usize)>,
    /// The largest number: how many values the statement takes.
    pub count: usize,
}

/// Parses every statement of `sql`, returning each with the text it was parsed from and its
/// parameters.
pub fn parse_statements(sql: &str) -> Result<Vec<(Statement, String, Params)>> {
    let tokens = tokenize(sql)?;
    let mut p = Parser::new(sql, tokens);
    let mut out = Vec::new();
    loop {
        while p.eat_op(";") {}
        if p.peek() == &Tok::Eof {
            break;
        }
        let start = p.pos;
        let stmt = p.statement()?;
        let end = p.pos;
        let text = p.source_text(start, end);
        out.push((stmt, text, std::mem::take(&mut p.params)));
        if !p.eat_op(";") && p.peek() != &Tok::Eof {
            return Err(p.unexpected("';' or the end of input"));
        }
    }
    Ok(out)
}

/// Parses exactly one statement (a trailing `;` is allowed), returning it with its parameters.
pub fn parse(sql: &str) -> Result<(Statement, Params)> {
    let tokens = tokenize(sql)?;
    let mut p = Parser::new(sql, tokens);
    if p.peek() == &Tok::Eof {
        return Err(p.unexpected("a statement"));
    }
    let stmt = p.statement()?;
    while p.eat_op(";") {}
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("the end of the statement"));
    }
    Ok((stmt, p.params))
}

/// Words that cannot be used as a bare identifier or alias, because they would make the grammar
/// ambiguous (`SELECT a FROM t WHERE ...`: WHERE is not an alias of t).
const RESERVED: &[&str] = &[
    "ADD",
    "ALL",
    "ALTER",
    "AND",
    "AS",
    "ASC",
    "BETWEEN",
    "BY",
    "CASE",
    "CAST",
    "CHECK",
    "COLLATE",
    "CONSTRAINT",
    "CREATE",
    "CROSS",
    "DEFAULT",
    "DELETE",
    "DESC",
    "DISTINCT",
    "DROP",
    "ELSE",
    "END",
    "ESCAPE",
    "EXCEPT",
    "EXISTS",
    "FROM",
    "GLOB",
    "GROUP",
    "HAVING",
    "IN",
    "INDEX",
    "INNER",
    "INSERT",
    "INTERSECT",
    "INTO",
    "IS",
    "ISNULL",
    "JOIN",
    "LEFT",
    "LIKE",
    "LIMIT",
    "NOT",
    "NOTNULL",
    "NULL",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "OUTER",
    "PRIMARY",
    "REFERENCES",
    "RETURNING",
    "SELECT",
    "SET",
    "TABLE",
    "THEN",
    "UNION",
    "UNIQUE",
    "UPDATE",
    "USING",
    "VALUES",
    "WHEN",
    "WHERE",
    "WITH",
];

pub(super) fn is_reserved(w: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(w))
}

/// Whether `w` must be quoted to be used as a name.
pub fn is_keyword(w: &str) -> bool {
    is_reserved(w)
}

pub(super) struct Parser<'a> {
    pub(super) sql: &'a str,
    pub(super) tokens: Vec<Token>,
    pub(super) pos: usize,
    /// The parameters of the statement being parsed.
    pub(super) params: Params,
    /// Nesting depth of expressions and queries, bounded so hostile input cannot overflow the stack.
    pub(super) depth: u32,
    /// The WINDOW clause of the core just parsed, for its query's ORDER BY.
    pub(super) windows: Vec<(String, crate::parse::window::WindowDef)>,
}

/// How deep expressions and queries may nest (SQLite allows 1000; cairn keeps the executor's
/// recursion well inside a small thread stack).
const MAX_DEPTH: u32 = 100;
/// How long a chain of binary operators other than AND and OR (`a + b + c ...`) may be: each
/// link is one more level of recursion in the planner and executor. AND and OR chains are
/// rebalanced instead (see `balance`), so generated queries may have long OR lists.
pub(super) const MAX_CHAIN: u32 = 250;

impl<'a> Parser<'a> {
    fn new(sql: &'a str, tokens: Vec<Token>) -> Self {
        Parser {
            sql,
            tokens,
            pos: 0,
            params: Params::default(),
            depth: 0,
            windows: Vec::new(),
        }
    }

    /// The SQL text of tokens `start..end`, as written.
    pub(super) fn source_text(&self, start: usize, end: usize) -> String {
        if end <= start {
            return String::new();
        }
        let (s, e) = (self.tokens[start].at, self.tokens[end - 1].end);
        self.sql[s as usize..e as usize].to_string()
    }

    pub(super) fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    pub(super) fn peek_at(&self, n: usize) -> &Tok {
        let i = (self.pos + n).min(self.tokens.len() - 1);
        &self.tokens[i].tok
    }

    pub(super) fn next(&mut self) -> Tok {
        let t = self.tokens[self.pos].tok.clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    pub(super) fn describe(t: &Tok) -> String {
        match t {
            Tok::Word(w) => format!("'{w}'"),
            Tok::Quoted(w) => format!("\"{w}\""),
            Tok::Str(s) => format!("string '{s}'"),
            Tok::Blob(_) => "a blob literal".into(),
            Tok::Int(n) => format!("number {n}"),
            Tok::Real(n) => format!("number {}", crate::types::fmt_real(*n)),
            Tok::IntMin => "number 9223372036854775808".into(),
            Tok::QParam(_) | Tok::NamedParam(_) => "a parameter".into(),
            Tok::Op(o) => format!("'{o}'"),
            Tok::Eof => "the end of input".into(),
        }
    }

    /// The parameter numbered `n` (see [`Params`]), which SQLite caps at 32766.
    pub(super) fn param(&mut self, n: usize, make: impl FnOnce(u32) -> Param) -> Result<Expr> {
        if n > 32766 {
            return Err(self.error_here("too many SQL variables"));
        }
        self.next();
        self.params.count = self.params.count.max(n);
        Ok(Expr::Param(make(n as u32)))
    }

    pub(super) fn unexpected(&self, expected: &str) -> Error {
        let t = &self.tokens[self.pos];
        Error::syntax(
            t.line,
            t.col,
            format!("expected {expected}, found {}", Self::describe(&t.tok)),
        )
    }

    pub(super) fn error_here(&self, msg: impl Into<String>) -> Error {
        let t = &self.tokens[self.pos];
        Error::syntax(t.line, t.col, msg)
    }

    pub(super) fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    pub(super) fn is_kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_at(n), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    pub(super) fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.next();
            true
        } else {
            false
        }
    }

    pub(super) fn expect_kw(&mut self, kw: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected(kw))
        }
    }

    pub(super) fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Tok::Op(o) if *o == op) {
            self.next();
            true
        } else {
            false
        }
    }

    pub(super) fn expect_op(&mut self, op: &str) -> Result<()> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{op}'")))
        }
    }

    pub(super) fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_here("statement nested too deeply"));
        }
        Ok(())
    }

    /// An identifier: a quoted name, or a word that is not reserved.
    pub(super) fn ident(&mut self) -> Result<String> {
        match self.peek().clone() {
            Tok::Quoted(s) => {
                self.next();
                Ok(s)
            }
            Tok::Word(w) if !is_reserved(&w) => {
                self.next();
                Ok(w)
            }
            // SQLite accepts a string literal where a name is expected, in some places.
            Tok::Str(s) => {
                self.next();
                Ok(s)
            }
            _ => Err(self.unexpected("a name")),
        }
    }

    pub(super) fn ident_list(&mut self) -> Result<Vec<String>> {
        self.expect_op("(")?;
        let mut v = vec![self.ident()?];
        while self.eat_op(",") {
            v.push(self.ident()?);
        }
        self.expect_op(")")?;
        Ok(v)
    }

    fn statement(&mut self) -> Result<Statement> {
        if self.eat_kw("EXPLAIN") {
            if self.eat_kw("QUERY") {
                self.expect_kw("PLAN")?;
            }
            return Ok(Statement::Explain(Box::new(self.statement()?)));
        }
        if self.is_kw("SELECT") || self.is_kw("VALUES") || (self.is_kw("WITH")) {
            let with = self.with_clause()?;
            if self.is_kw("INSERT") || self.is_kw("REPLACE") {
                let mut i = self.insert()?;
                i.with = with;
                return Ok(Statement::Insert(Box::new(i)));
            }
            if self.is_kw("UPDATE") {
                let mut u = self.update()?;
                u.with = with;
                return Ok(Statement::Update(Box::new(u)));
            }
            if self.is_kw("DELETE") {
                let mut d = self.delete()?;
                d.with = with;
                return Ok(Statement::Delete(Box::new(d)));
            }
            let mut s = self.select_after_with()?;
            s.with = with;
            return Ok(Statement::Select(Box::new(s)));
        }
        if self.is_kw("INSERT") || self.is_kw("REPLACE") {
            return Ok(Statement::Insert(Box::new(self.insert()?)));
        }
        if self.is_kw("UPDATE") {
            return Ok(Statement::Update(Box::new(self.update()?)));
        }
        if self.is_kw("DELETE") {
            return Ok(Statement::Delete(Box::new(self.delete()?)));
        }
        if self.eat_kw("BEGIN") {
            let _ = self.eat_kw("DEFERRED") || self.eat_kw("IMMEDIATE") || self.eat_kw("EXCLUSIVE");
            self.eat_kw("TRANSACTION");
            return Ok(Statement::Begin);
        }
        if self.eat_kw("COMMIT") || self.eat_kw("END") {
            self.eat_kw("TRANSACTION");
            return Ok(Statement::Commit);
        }
        if self.eat_kw("ROLLBACK") {
            self.eat_kw("TRANSACTION");
            if self.eat_kw("TO") {
                self.eat_kw("SAVEPOINT");
                return Ok(Statement::RollbackTo(self.ident()?));
            }
            return Ok(Statement::Rollback);
        }
        if self.eat_kw("SAVEPOINT") {
            return Ok(Statement::Savepoint(self.ident()?));
        }
        if self.eat_kw("RELEASE") {
            self.eat_kw("SAVEPOINT");
            return Ok(Statement::Release(self.ident()?));
        }
        if self.eat_kw("CREATE") {
            let unique = self.eat_kw("UNIQUE");
            if self.eat_kw("INDEX") {
                return self.create_index(unique);
            }
            if unique {
                return Err(self.unexpected("INDEX"));
            }
            if self.eat_kw("TABLE") {
                return self.create_table();
            }
            if self.eat_kw("VIRTUAL") {
                self.expect_kw("TABLE")?;
                return self.create_virtual();
            }
            return Err(self.unexpected("TABLE or INDEX"));
        }
        if self.eat_kw("DROP") {
            let table = if self.eat_kw("TABLE") {
                true
            } else if self.eat_kw("INDEX") {
                false
            } else {
                return Err(self.unexpected("TABLE or INDEX"));
            };
            let if_exists = if self.eat_kw("IF") {
                self.expect_kw("EXISTS")?;
                true
            } else {
                false
            };
            let name = self.ident()?;
            return Ok(if table {
                Statement::DropTable { name, if_exists }
            } else {
                Statement::DropIndex { name, if_exists }
            });
        }
        if self.eat_kw("ALTER") {
            self.expect_kw("TABLE")?;
            let table = self.ident()?;
            if self.eat_kw("RENAME") {
                if self.eat_kw("TO") {
                    let to = self.ident()?;
                    return Ok(Statement::AlterTable {
                        table,
                        action: AlterAction::RenameTo(to),
                    });
                }
                self.eat_kw("COLUMN");
                let from = self.ident()?;
                self.expect_kw("TO")?;
                let to = self.ident()?;
                return Ok(Statement::AlterTable {
                    table,
                    action: AlterAction::RenameColumn { from, to },
                });
            }
            if self.eat_kw("DROP") {
                self.eat_kw("COLUMN");
                let name = self.ident()?;
                return Ok(Statement::AlterTable {
                    table,
                    action: AlterAction::DropColumn(name),
                });
            }
            if self.eat_kw("ADD") {
                self.eat_kw("COLUMN");
                let col = self.column_def()?;
                return Ok(Statement::AlterTable {
                    table,
                    action: AlterAction::AddColumn(col),
                });
            }
            return Err(self.unexpected("RENAME TO, RENAME COLUMN, ADD COLUMN or DROP COLUMN"));
        }
        if self.eat_kw("PRAGMA") {
            return self.pragma();
        }
        Err(self.unexpected("a statement"))
    }

    /// `PRAGMA [main.]name [= value | (value)]`. The pragmas that read a table of the schema
    /// become `SELECT * FROM pragma_name(value)` (no value: NULL, which names nothing, as
    /// SQLite lists nothing for it), and `PRAGMA user_version` reads `pragma_user_version`;
    /// the rest (setting the user version, and the pragmas cairn does not know) are run as
    /// [`Statement::Pragma`].
    fn pragma(&mut self) -> Result<Statement> {
        let mut name = self.ident()?;
        if self.eat_op(".") {
            if !name.eq_ignore_ascii_case("main") {
                return Err(Error::Invalid(format!("unknown database {name}")));
            }
            name = self.ident()?;
        }
        let value = if self.eat_op("=") {
            Some(self.pragma_value()?)
        } else if self.eat_op("(") {
            let v = self.pragma_value()?;
            self.expect_op(")")?;
            Some(v)
        } else {
            None
        };
        let lower = name.to_ascii_lowercase();
        let reads = matches!(
            lower.as_str(),
            "table_info"
                | "table_xinfo"
                | "index_list"
                | "index_info"
                | "index_xinfo"
                | "foreign_key_list"
        );
        let args = if reads {
            vec![Expr::Literal(value.map_or(Value::Null, Value::Text))]
        } else if lower == "user_version" && value.is_none() {
            Vec::new()
        } else {
            return Ok(Statement::Pragma { name, value });
        };
        let from = vec![FromItem {
            source: TableSource::Function {
                name: format!("pragma_{lower}"),
                args,
            },
            alias: None,
            join: None,
            on: None,
        }];
        Ok(Statement::Select(Box::new(Select {
            with: None,
            body: SelectBody::Core(Box::new(SelectCore {
                distinct: false,
                columns: vec![SelectItem::All],
                from,
                where_: None,
                group_by: Vec::new(),
                having: None,
            })),
            order_by: Vec::new(),
            limit: None,
            offset: None,
        })))
    }

    /// A pragma's value as SQLite hands it to the pragma: a number as written (with its sign),
    /// or a name or string.
    fn pragma_value(&mut self) -> Result<String> {
        let sign = if self.eat_op("-") {
            "-"
        } else {
            self.eat_op("+");
            ""
        };
        let start = self.pos;
        match self.next() {
            Tok::Int(_) | Tok::Real(_) | Tok::IntMin => {
                Ok(format!("{sign}{}", self.source_text(start, start + 1)))
            }
            Tok::Word(w) | Tok::Quoted(w) | Tok::Str(w) if sign.is_empty() => Ok(w),
            _ => {
                self.pos = start;
                Err(self.unexpected("a pragma's value"))
            }
        }
    }

    fn if_not_exists(&mut self) -> Result<bool> {
        if self.eat_kw("IF") {
            self.expect_kw("NOT")?;
            self.expect_kw("EXISTS")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn create_index(&mut self, unique: bool) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.ident()?;
        self.expect_kw("ON")?;
        let table = self.ident()?;
        self.expect_op("(")?;
        let mut columns = Vec::new();
        let mut exprs = Vec::new();
        loop {
            // A name alone is a column; anything else an expression.
            let start = self.pos;
            let name = self.ident().ok().filter(|_| {
                matches!(self.peek(), Tok::Op("," | ")"))
                    || matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case("ASC") || w.eq_ignore_ascii_case("DESC"))
            });
            match name {
                Some(n) => {
                    exprs.push(Expr::Column {
                        table: None,
                        name: n.clone(),
                    });
                    columns.push(n);
                }
                None => {
                    self.pos = start;
                    exprs.push(self.expr()?);
                }
            }
            if self.eat_kw("DESC") {
                return Err(Error::Unsupported("descending index columns".into()));
            }
            self.eat_kw("ASC");
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")")?;
        if exprs.len() == columns.len() {
            exprs.clear();
        } else {
            columns.clear();
        }
        Ok(Statement::CreateIndex(CreateIndex {
            name,
            table,
            unique,
            if_not_exists,
            columns,
            exprs,
        }))
    }

    /// `CREATE VIRTUAL TABLE [IF NOT EXISTS] name USING module(args)`: each argument kept as
    /// its words (names, strings and numbers as text, `=` as itself).
    fn create_virtual(&mut self) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.ident()?;
        self.expect_kw("USING")?;
        let module = self.ident()?;
        let mut args: Vec<Vec<String>> = Vec::new();
        if self.eat_op("(") {
            let mut arg = Vec::new();
            loop {
                match self.next() {
                    Tok::Op(")") => break,
                    Tok::Op(",") => args.push(std::mem::take(&mut arg)),
                    Tok::Word(w) | Tok::Quoted(w) | Tok::Str(w) => arg.push(w),
                    Tok::Int(n) => arg.push(n.to_string()),
                    Tok::Op("=") => arg.push("=".into()),
                    _ => return Err(self.unexpected("an fts5 argument")),
                }
            }
            args.push(arg);
            args.retain(|a| !a.is_empty());
        }
        Ok(Statement::CreateVirtual(CreateVirtual {
            name,
            if_not_exists,
            module,
            args,
        }))
    }

    fn create_table(&mut self) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.ident()?;
        self.expect_op("(")?;
        let mut t = CreateTable {
            name,
            if_not_exists,
            columns: Vec::new(),
            primary_key: None,
            uniques: Vec::new(),
            primary_key_after: 0,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            replicated: None,
        };
        // UNIQUE constraints so far, for `primary_key_after`.
        let mut uniques = 0;
        // A FOREIGN KEY table constraint seen: no column definition may follow.
        let mut table_fk = false;
        loop {
            if self.eat_kw("CONSTRAINT") {
                self.ident()?;
            }
            if self.eat_kw("PRIMARY") {
                self.expect_kw("KEY")?;
                if t.primary_key.is_some() {
                    return Err(self.error_here("a table has at most one PRIMARY KEY"));
                }
                t.primary_key = Some(self.ident_list()?);
                t.primary_key_after = uniques;
            } else if self.eat_kw("UNIQUE") {
                t.uniques.push(self.ident_list()?);
                uniques += 1;
            } else if self.eat_kw("CHECK") {
                self.expect_op("(")?;
                t.checks.push(self.expr()?);
                self.expect_op(")")?;
            } else if self.eat_kw("FOREIGN") {
                self.expect_kw("KEY")?;
                let columns = self.ident_list()?;
                self.expect_kw("REFERENCES")?;
                let mut fk = self.foreign_key_clause()?;
                fk.columns = columns;
                t.foreign_keys.push(fk);
                table_fk = true;
            } else {
                if !t.uniques.is_empty()
                    || !t.checks.is_empty()
                    || t.primary_key.is_some()
                    || table_fk
                {
                    return Err(self.unexpected("a table constraint"));
                }
                let mut c = self.column_def()?;
                if let Some(fk) = c.references.take() {
                    let mut fk = *fk;
                    fk.columns = vec![c.name.clone()];
                    t.foreign_keys.push(fk);
                }
                if c.primary_key {
                    // The column's own UNIQUE, if any, is the key's index: not counted.
                    t.primary_key_after = uniques;
                }
                uniques += c.unique as usize;
                t.columns.push(c);
            }
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")")?;
        if self.eat_kw("STRICT") {
            // cairn's tables are always strict; the word is accepted for SQLite compatibility.
        }
        if self.eat_kw("REPLICATED") {
            let mut r = crate::parse::ast::Replicated::default();
            if self.eat_op("(") {
                loop {
                    if self.eat_kw("SCOPE") {
                        if r.scope.is_some() {
                            return Err(self.error_here("a replicated table has at most one SCOPE"));
                        }
                        r.scope = Some(self.ident()?);
                    } else if self.eat_kw("COUNTER") {
                        r.counters.push(self.ident()?);
                    } else if self.eat_kw("SET") {
                        r.sets.push(self.ident()?);
                    } else if self.eat_kw("MAP") {
                        r.maps.push(self.ident()?);
                    } else {
                        return Err(self.unexpected("SCOPE, COUNTER, SET or MAP"));
                    }
                    if !self.eat_op(",") {
                        break;
                    }
                }
                self.expect_op(")")?;
            }
            t.replicated = Some(r);
        }
        Ok(Statement::CreateTable(t))
    }

    fn column_def(&mut self) -> Result<ColumnDef> {
        let name = self.ident()?;
        let mut type_name = None;
        // A type is one or more words, optionally with (n) or (n, m), kept as written (as
        // SQLite keeps it, for `PRAGMA table_info`).
        let type_start = self.pos;
        let mut words = Vec::new();
        while let Tok::Word(w) = self.peek().clone() {
            // `GENERATED` starts a generated column's clause only when `ALWAYS` or `AS`
            // follows; otherwise it is a word of the type, as in SQLite.
            let generated = w.eq_ignore_ascii_case("GENERATED")
                && (self.is_kw_at(1, "ALWAYS") || self.is_kw_at(1, "AS"));
            if generated
                || is_reserved(&w)
                || [
                    "PRIMARY",
                    "NOT",
                    "NULL",
                    "UNIQUE",
                    "DEFAULT",
                    "CHECK",
                    "CONSTRAINT",
                    "REFERENCES",
                    "COLLATE",
                ]
                .iter()
                .any(|k| k.eq_ignore_ascii_case(&w))
            {
                break;
            }
            self.next();
            words.push(w);
        }
        if !words.is_empty() {
            if self.eat_op("(") {
                loop {
                    match self.next() {
                        Tok::Int(_) | Tok::Op("-") | Tok::Op("+") => {}
                        _ => return Err(self.unexpected("a number in the type's size")),
                    }
                    if self.eat_op(",") || matches!(self.peek(), Tok::Int(_)) {
                        continue;
                    }
                    break;
                }
                self.expect_op(")")?;
            }
            type_name = Some(self.source_text(type_start, self.pos));
        }
        let mut c = ColumnDef {
            name,
            type_name,
            primary_key: false,
            primary_key_desc: false,
            not_null: false,
            unique: false,
            default: None,
            check: None,
            references: None,
            generated: None,
        };
        loop {
            if self.eat_kw("CONSTRAINT") {
                self.ident()?;
            }
            if self.eat_kw("PRIMARY") {
                self.expect_kw("KEY")?;
                if self.eat_kw("DESC") {
                    c.primary_key_desc = true;
                } else {
                    self.eat_kw("ASC");
                }
                self.eat_kw("AUTOINCREMENT");
                c.primary_key = true;
            } else if self.eat_kw("NOT") {
                self.expect_kw("NULL")?;
                c.not_null = true;
            } else if self.eat_kw("NULL") {
            } else if self.eat_kw("UNIQUE") {
                c.unique = true;
            } else if self.eat_kw("DEFAULT") {
                let paren = self.eat_op("(");
                let start = self.pos;
                let expr = if paren {
                    self.expr()?
                } else {
                    // A signed literal or a bare literal-like term.
                    self.unary()?
                };
                let text = self.source_text(start, self.pos);
                if paren {
                    self.expect_op(")")?;
                }
                c.default = Some(DefaultValue { expr, text });
            } else if self.eat_kw("CHECK") {
                self.expect_op("(")?;
                c.check = Some(self.expr()?);
                self.expect_op(")")?;
            } else if self.eat_kw("REFERENCES") {
                c.references = Some(Box::new(self.foreign_key_clause()?));
            } else if self.is_kw("AS") || self.is_kw("GENERATED") {
                if c.generated.is_some() {
                    return Err(self.unexpected("one generated column clause"));
                }
                c.generated = Some(self.generated_clause()?);
            } else if self.is_kw("COLLATE") {
                return Err(Error::Unsupported(format!(
                    "{} in a column definition",
                    Self::describe(self.peek())
                )));
            } else {
                break;
            }
        }
        Ok(c)
    }

    /// `[GENERATED [ALWAYS]] AS (expr) [VIRTUAL | STORED]`. Out of line, so that the module a
    /// page fetches first (docs/size.md) holds only the test that leads here.
    #[inline(never)]
    fn generated_clause(&mut self) -> Result<Box<Generated>> {
        if self.eat_kw("GENERATED") {
            self.eat_kw("ALWAYS");
        }
        self.expect_kw("AS")?;
        self.expect_op("(")?;
        let expr = self.expr()?;
        self.expect_op(")")?;
        let stored = self.eat_kw("STORED");
        if !stored {
            self.eat_kw("VIRTUAL");
        }
        Ok(Box::new(Generated { expr, stored }))
    }

    /// What follows `REFERENCES`: the parent table, its columns and the clause's actions
    /// (`MATCH` is accepted and ignored, as SQLite does).
    fn foreign_key_clause(&mut self) -> Result<ForeignKey> {
        let mut fk = ForeignKey {
            parent: self.ident()?,
            ..Default::default()
        };
        if matches!(self.peek(), Tok::Op("(")) {
            fk.parent_columns = self.ident_list()?;
        }
        loop {
            if self.eat_kw("ON") {
                let delete = self.eat_kw("DELETE");
                if !delete {
                    self.expect_kw("UPDATE")?;
                }
                let action = if self.eat_kw("SET") {
                    if self.eat_kw("NULL") {
                        FkAction::SetNull
                    } else {
                        self.expect_kw("DEFAULT")?;
                        FkAction::SetDefault
                    }
                } else if self.eat_kw("NO") {
                    self.expect_kw("ACTION")?;
                    FkAction::NoAction
                } else if self.eat_kw("CASCADE") {
                    FkAction::Cascade
                } else {
                    self.expect_kw("RESTRICT")?;
                    FkAction::Restrict
                };
                if delete {
                    fk.on_delete = action;
                } else {
                    fk.on_update = action;
                }
            } else if self.eat_kw("MATCH") {
                self.ident()?;
            } else if self.is_kw("DEFERRABLE")
                || (self.is_kw("NOT") && self.is_kw_at(1, "DEFERRABLE"))
            {
                let not = self.eat_kw("NOT");
                self.next();
                let mut deferred = false;
                if self.eat_kw("INITIALLY") && !self.eat_kw("IMMEDIATE") {
                    self.expect_kw("DEFERRED")?;
                    deferred = true;
                }
                // NOT DEFERRABLE INITIALLY DEFERRED is immediate, as in SQLite.
                fk.deferred = deferred && !not;
            } else {
                return Ok(fk);
            }
        }
    }
}
