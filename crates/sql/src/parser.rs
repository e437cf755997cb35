//! The parser: tokens to an [`crate::ast::Statement`], by recursive descent, with precedence climbing
//! for expressions (SQLite's operator precedence). Hand-written rather than generated, because
//! the wasm download pays for every table a generator would emit.

use crate::ast::*;
use crate::error::{Error, Result};
use crate::lexer::{tokenize, Tok, Token};
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

fn is_reserved(w: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(w))
}

struct Parser<'a> {
    sql: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// The parameters of the statement being parsed.
    params: Params,
    /// Nesting depth of expressions and queries, bounded so hostile input cannot overflow the stack.
    depth: u32,
}

/// How deep expressions and queries may nest (SQLite allows 1000; cairn keeps the executor's
/// recursion well inside a small thread stack).
const MAX_DEPTH: u32 = 100;
/// How long a chain of binary operators other than AND and OR (`a + b + c ...`) may be: each
/// link is one more level of recursion in the planner and executor. AND and OR chains are
/// rebalanced instead (see `balance`), so generated queries may have long OR lists.
const MAX_CHAIN: u32 = 250;

impl<'a> Parser<'a> {
    fn new(sql: &'a str, tokens: Vec<Token>) -> Self {
        Parser {
            sql,
            tokens,
            pos: 0,
            params: Params::default(),
            depth: 0,
        }
    }

    /// The SQL text of tokens `start..end`, as written.
    fn source_text(&self, start: usize, end: usize) -> String {
        if end <= start {
            return String::new();
        }
        let (s, e) = (self.tokens[start].at, self.tokens[end - 1].end);
        self.sql[s as usize..e as usize].to_string()
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        let i = (self.pos + n).min(self.tokens.len() - 1);
        &self.tokens[i].tok
    }

    fn next(&mut self) -> Tok {
        let t = self.tokens[self.pos].tok.clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn describe(t: &Tok) -> String {
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
    fn param(&mut self, n: usize, make: impl FnOnce(u32) -> Param) -> Result<Expr> {
        if n > 32766 {
            return Err(self.error_here("too many SQL variables"));
        }
        self.next();
        self.params.count = self.params.count.max(n);
        Ok(Expr::Param(make(n as u32)))
    }

    fn unexpected(&self, expected: &str) -> Error {
        let t = &self.tokens[self.pos];
        Error::syntax(
            t.line,
            t.col,
            format!("expected {expected}, found {}", Self::describe(&t.tok)),
        )
    }

    fn error_here(&self, msg: impl Into<String>) -> Error {
        let t = &self.tokens[self.pos];
        Error::syntax(t.line, t.col, msg)
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn is_kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_at(n), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.next();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected(kw))
        }
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Tok::Op(o) if *o == op) {
            self.next();
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> Result<()> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{op}'")))
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_here("statement nested too deeply"));
        }
        Ok(())
    }

    /// An identifier: a quoted name, or a word that is not reserved.
    fn ident(&mut self) -> Result<String> {
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

    fn ident_list(&mut self) -> Result<Vec<String>> {
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
            return Ok(Statement::Rollback);
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
                self.expect_kw("TO")?;
                let to = self.ident()?;
                return Ok(Statement::AlterTable {
                    table,
                    action: AlterAction::RenameTo(to),
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
            return Err(self.unexpected("RENAME TO or ADD COLUMN"));
        }
        Err(self.unexpected("a statement"))
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
        loop {
            columns.push(self.ident()?);
            if self.eat_kw("DESC") {
                return Err(Error::Unsupported("descending index columns".into()));
            }
            self.eat_kw("ASC");
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")")?;
        Ok(Statement::CreateIndex(CreateIndex {
            name,
            table,
            unique,
            if_not_exists,
            columns,
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
            checks: Vec::new(),
            replicated: None,
        };
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
            } else if self.eat_kw("UNIQUE") {
                t.uniques.push(self.ident_list()?);
            } else if self.eat_kw("CHECK") {
                self.expect_op("(")?;
                t.checks.push(self.expr()?);
                self.expect_op(")")?;
            } else {
                if !t.uniques.is_empty() || !t.checks.is_empty() || t.primary_key.is_some() {
                    return Err(self.unexpected("a table constraint"));
                }
                t.columns.push(self.column_def()?);
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
            let mut r = crate::ast::Replicated::default();
            if self.eat_op("(") {
                loop {
                    if self.eat_kw("SCOPE") {
                        if r.scope.is_some() {
                            return Err(self.error_here("a replicated table has at most one SCOPE"));
                        }
                        r.scope = Some(self.ident()?);
                    } else if self.eat_kw("COUNTER") {
                        r.counters.push(self.ident()?);
                    } else {
                        return Err(self.unexpected("SCOPE or COUNTER"));
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
        // A type is one or more words, optionally with (n) or (n, m).
        let mut words = Vec::new();
        while let Tok::Word(w) = self.peek().clone() {
            if is_reserved(&w)
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
            let mut tn = cairn_value::text::join(&words, " ");
            if self.eat_op("(") {
                tn.push('(');
                loop {
                    match self.next() {
                        Tok::Int(n) => tn.push_str(&n.to_string()),
                        Tok::Op("-") => tn.push('-'),
                        Tok::Op("+") => {}
                        _ => return Err(self.unexpected("a number in the type's size")),
                    }
                    if self.eat_op(",") {
                        tn.push(',');
                        continue;
                    }
                    if matches!(self.peek(), Tok::Int(_)) {
                        continue;
                    }
                    break;
                }
                self.expect_op(")")?;
                tn.push(')');
            }
            type_name = Some(tn);
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
                let e = if self.eat_op("(") {
                    let e = self.expr()?;
                    self.expect_op(")")?;
                    e
                } else {
                    // A signed literal or a bare literal-like term.
                    self.unary()?
                };
                c.default = Some(e);
            } else if self.eat_kw("CHECK") {
                self.expect_op("(")?;
                c.check = Some(self.expr()?);
                self.expect_op(")")?;
            } else if self.is_kw("REFERENCES") || self.is_kw("COLLATE") {
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

    fn with_clause(&mut self) -> Result<Option<With>> {
        if !self.eat_kw("WITH") {
            return Ok(None);
        }
        if self.is_kw("RECURSIVE") {
            return Err(Error::Unsupported("WITH RECURSIVE".into()));
        }
        let mut ctes = Vec::new();
        loop {
            let name = self.ident()?;
            let columns = if matches!(self.peek(), Tok::Op("(")) {
                self.ident_list()?
            } else {
                Vec::new()
            };
            self.expect_kw("AS")?;
            self.expect_op("(")?;
            let query = self.select()?;
            self.expect_op(")")?;
            ctes.push(Cte {
                name,
                columns,
                query,
            });
            if !self.eat_op(",") {
                break;
            }
        }
        Ok(Some(With { ctes }))
    }

    fn select(&mut self) -> Result<Select> {
        self.enter()?;
        let with = self.with_clause()?;
        let mut s = self.select_after_with()?;
        s.with = with;
        self.depth -= 1;
        Ok(s)
    }

    fn select_after_with(&mut self) -> Result<Select> {
        let mut body = self.select_term()?;
        loop {
            if self.eat_kw("UNION") {
                let all = self.eat_kw("ALL");
                let right = self.select_term()?;
                body = SelectBody::Union {
                    all,
                    left: Box::new(body),
                    right: Box::new(right),
                };
            } else if self.is_kw("EXCEPT") || self.is_kw("INTERSECT") {
                return Err(Error::Unsupported("EXCEPT and INTERSECT".into()));
            } else {
                break;
            }
        }
        let mut order_by = Vec::new();
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            order_by = self.order_list()?;
        }
        let (mut limit, mut offset) = (None, None);
        if self.eat_kw("LIMIT") {
            let l = self.expr()?;
            if self.eat_kw("OFFSET") {
                offset = Some(self.expr()?);
                limit = Some(l);
            } else if self.eat_op(",") {
                // LIMIT offset, count
                offset = Some(l);
                limit = Some(self.expr()?);
            } else {
                limit = Some(l);
            }
        }
        Ok(Select {
            with: None,
            body,
            order_by,
            limit,
            offset,
        })
    }

    fn order_list(&mut self) -> Result<Vec<OrderItem>> {
        let mut v = Vec::new();
        loop {
            let expr = self.expr()?;
            let desc = if self.eat_kw("DESC") {
                true
            } else {
                self.eat_kw("ASC");
                false
            };
            let mut nulls_first = None;
            if self.eat_kw("NULLS") {
                if self.eat_kw("FIRST") {
                    nulls_first = Some(true);
                } else {
                    self.expect_kw("LAST")?;
                    nulls_first = Some(false);
                }
            }
            v.push(OrderItem {
                expr,
                desc,
                nulls_first,
            });
            if !self.eat_op(",") {
                return Ok(v);
            }
        }
    }

    fn select_term(&mut self) -> Result<SelectBody> {
        if self.eat_kw("VALUES") {
            return Ok(SelectBody::Values(self.values_rows()?));
        }
        if matches!(self.peek(), Tok::Op("("))
            && (self.is_kw_at(1, "SELECT") || self.is_kw_at(1, "VALUES"))
        {
            return Err(Error::Unsupported(
                "a parenthesized query as a compound term".into(),
            ));
        }
        self.expect_kw("SELECT")?;
        let distinct = if self.eat_kw("DISTINCT") {
            true
        } else {
            self.eat_kw("ALL");
            false
        };
        let mut columns = Vec::new();
        loop {
            columns.push(self.select_item()?);
            if !self.eat_op(",") {
                break;
            }
        }
        let mut from = Vec::new();
        if self.eat_kw("FROM") {
            from = self.parse_from_list()?;
        }
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let mut group_by = Vec::new();
        if self.eat_kw("GROUP") {
            self.expect_kw("BY")?;
            loop {
                group_by.push(self.expr()?);
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        let having = if self.eat_kw("HAVING") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(SelectBody::Core(Box::new(SelectCore {
            distinct,
            columns,
            from,
            where_,
            group_by,
            having,
        })))
    }

    fn values_rows(&mut self) -> Result<Vec<Vec<Expr>>> {
        let mut rows = Vec::new();
        loop {
            self.expect_op("(")?;
            let mut row = vec![self.expr()?];
            while self.eat_op(",") {
                row.push(self.expr()?);
            }
            self.expect_op(")")?;
            if let Some(first) = rows.first() {
                let first: &Vec<Expr> = first;
                if first.len() != row.len() {
                    return Err(
                        self.error_here("all VALUES rows must have the same number of values")
                    );
                }
            }
            rows.push(row);
            if !self.eat_op(",") {
                return Ok(rows);
            }
        }
    }

    fn alias(&mut self) -> Result<Option<String>> {
        if self.eat_kw("AS") {
            return Ok(Some(self.ident()?));
        }
        match self.peek().clone() {
            Tok::Quoted(s) | Tok::Str(s) => {
                self.next();
                Ok(Some(s))
            }
            Tok::Word(w)
                if !is_reserved(&w)
                    && !["NATURAL", "RETURNING"]
                        .iter()
                        .any(|k| k.eq_ignore_ascii_case(&w)) =>
            {
                self.next();
                Ok(Some(w))
            }
            _ => Ok(None),
        }
    }

    fn select_item(&mut self) -> Result<SelectItem> {
        if self.eat_op("*") {
            return Ok(SelectItem::All);
        }
        if matches!(self.peek(), Tok::Word(_) | Tok::Quoted(_))
            && matches!(self.peek_at(1), Tok::Op("."))
            && matches!(self.peek_at(2), Tok::Op("*"))
        {
            let t = self.ident()?;
            self.next();
            self.next();
            return Ok(SelectItem::TableAll(t));
        }
        let start = self.pos;
        let expr = self.expr()?;
        // A result column without an alias is named as written, as SQLite names it.
        let text = self.source_text(start, self.pos);
        let alias = self.alias()?;
        Ok(SelectItem::Expr { expr, alias, text })
    }

    fn parse_from_list(&mut self) -> Result<Vec<FromItem>> {
        let mut items = vec![self.parse_from_item(None)?];
        loop {
            let join = if self.eat_op(",") || self.eat_kw("JOIN") {
                JoinKind::Inner
            } else if self.eat_kw("INNER") || self.eat_kw("CROSS") {
                self.expect_kw("JOIN")?;
                JoinKind::Inner
            } else if self.eat_kw("LEFT") {
                self.eat_kw("OUTER");
                self.expect_kw("JOIN")?;
                JoinKind::Left
            } else if self.is_kw("RIGHT") || self.is_kw("FULL") || self.is_kw("NATURAL") {
                return Err(Error::Unsupported(format!(
                    "{} JOIN",
                    Self::describe(self.peek())
                )));
            } else {
                break;
            };
            let mut item = self.parse_from_item(Some(join))?;
            if self.eat_kw("ON") {
                item.on = Some(self.expr()?);
            } else if self.is_kw("USING") {
                return Err(Error::Unsupported("JOIN ... USING".into()));
            }
            items.push(item);
        }
        Ok(items)
    }

    fn parse_from_item(&mut self, join: Option<JoinKind>) -> Result<FromItem> {
        let source = if self.eat_op("(") {
            let q = self.select()?;
            self.expect_op(")")?;
            TableSource::Subquery(Box::new(q))
        } else {
            TableSource::Table(self.ident()?)
        };
        let alias = self.alias()?;
        Ok(FromItem {
            source,
            alias,
            join,
            on: None,
        })
    }

    fn conflict_clause(&mut self) -> Result<Conflict> {
        if !self.eat_kw("OR") {
            return Ok(Conflict::Abort);
        }
        if self.eat_kw("REPLACE") {
            Ok(Conflict::Replace)
        } else if self.eat_kw("IGNORE") {
            Ok(Conflict::Ignore)
        } else if self.eat_kw("ABORT") || self.eat_kw("FAIL") || self.eat_kw("ROLLBACK") {
            Ok(Conflict::Abort)
        } else {
            Err(self.unexpected("REPLACE, IGNORE or ABORT"))
        }
    }

    fn returning(&mut self) -> Result<Vec<SelectItem>> {
        let mut v = Vec::new();
        if self.eat_kw("RETURNING") {
            loop {
                v.push(self.select_item()?);
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        Ok(v)
    }

    fn insert(&mut self) -> Result<Insert> {
        let or = if self.eat_kw("REPLACE") {
            Conflict::Replace
        } else {
            self.expect_kw("INSERT")?;
            self.conflict_clause()?
        };
        self.expect_kw("INTO")?;
        let table = self.ident()?;
        if self.eat_kw("AS") {
            return Err(Error::Unsupported("an alias on the INSERT target".into()));
        }
        let columns = if matches!(self.peek(), Tok::Op("(")) {
            self.ident_list()?
        } else {
            Vec::new()
        };
        let source = if self.eat_kw("DEFAULT") {
            self.expect_kw("VALUES")?;
            InsertSource::DefaultValues
        } else if self.is_kw("VALUES") && !self.is_kw_at(1, "SELECT") {
            self.next();
            InsertSource::Values(self.values_rows()?)
        } else {
            InsertSource::Select(Box::new(self.select()?))
        };
        let mut upsert = None;
        if self.eat_kw("ON") {
            self.expect_kw("CONFLICT")?;
            let target = if matches!(self.peek(), Tok::Op("(")) {
                self.ident_list()?
            } else {
                Vec::new()
            };
            if self.is_kw("WHERE") {
                return Err(Error::Unsupported("a WHERE on the conflict target".into()));
            }
            self.expect_kw("DO")?;
            let update = if self.eat_kw("NOTHING") {
                None
            } else {
                self.expect_kw("UPDATE")?;
                self.expect_kw("SET")?;
                let set = self.set_list()?;
                let w = if self.eat_kw("WHERE") {
                    Some(self.expr()?)
                } else {
                    None
                };
                Some((set, w))
            };
            upsert = Some(Upsert { target, update });
        }
        let returning = self.returning()?;
        Ok(Insert {
            with: None,
            or,
            table,
            columns,
            source,
            upsert,
            returning,
        })
    }

    fn set_list(&mut self) -> Result<Vec<(String, Expr)>> {
        let mut v = Vec::new();
        loop {
            if matches!(self.peek(), Tok::Op("(")) {
                return Err(Error::Unsupported("SET (a, b) = ...".into()));
            }
            let c = self.ident()?;
            self.expect_op("=")?;
            v.push((c, self.expr()?));
            if !self.eat_op(",") {
                return Ok(v);
            }
        }
    }

    fn update(&mut self) -> Result<Update> {
        self.expect_kw("UPDATE")?;
        let or = self.conflict_clause()?;
        let table = self.ident()?;
        let alias = if self.eat_kw("AS") {
            Some(self.ident()?)
        } else {
            None
        };
        self.expect_kw("SET")?;
        let set = self.set_list()?;
        if self.is_kw("FROM") {
            return Err(Error::Unsupported("UPDATE ... FROM".into()));
        }
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let returning = self.returning()?;
        Ok(Update {
            with: None,
            or,
            table,
            alias,
            set,
            where_,
            returning,
        })
    }

    fn delete(&mut self) -> Result<Delete> {
        self.expect_kw("DELETE")?;
        self.expect_kw("FROM")?;
        let table = self.ident()?;
        let alias = if self.eat_kw("AS") {
            Some(self.ident()?)
        } else {
            None
        };
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let returning = self.returning()?;
        Ok(Delete {
            with: None,
            table,
            alias,
            where_,
            returning,
        })
    }

    // ---- expressions ----

    pub fn expr(&mut self) -> Result<Expr> {
        self.enter()?;
        let e = self.binary(0);
        self.depth -= 1;
        e
    }

    /// Precedence climbing. Levels (low to high): OR 1, AND 2, NOT 3, equality/IS/IN/LIKE/BETWEEN 4,
    /// comparison 5, bitwise 6, additive 7, multiplicative 8, concatenation 9.
    fn binary(&mut self, min: u8) -> Result<Expr> {
        // NOT may start any operand (`a <= NOT b`), and takes everything above its own level.
        let mut left = if self.is_kw("NOT") && !self.is_kw_at(1, "EXISTS") {
            self.next();
            self.enter()?;
            let e = self.binary(3)?;
            self.depth -= 1;
            Expr::Unary(UnOp::Not, Box::new(e))
        } else {
            self.unary()?
        };
        let mut chain = 0;
        loop {
            let (prec, op) = match self.peek() {
                Tok::Word(w) => {
                    let w = w.to_ascii_uppercase();
                    match w.as_str() {
                        "OR" => (1, None),
                        "AND" => (2, None),
                        "IS" | "IN" | "LIKE" | "GLOB" | "BETWEEN" | "ISNULL" | "NOTNULL"
                        | "NOT" => (4, None),
                        "REGEXP" | "MATCH" => {
                            return Err(Error::Unsupported(format!("the {w} operator")))
                        }
                        "COLLATE" => return Err(Error::Unsupported("COLLATE".into())),
                        _ => break,
                    }
                }
                Tok::Op(o) => match *o {
                    "=" | "==" => (4, Some(BinOp::Eq)),
                    "!=" | "<>" => (4, Some(BinOp::Ne)),
                    "<" => (5, Some(BinOp::Lt)),
                    "<=" => (5, Some(BinOp::Le)),
                    ">" => (5, Some(BinOp::Gt)),
                    ">=" => (5, Some(BinOp::Ge)),
                    "&" => (6, Some(BinOp::BitAnd)),
                    "|" => (6, Some(BinOp::BitOr)),
                    "<<" => (6, Some(BinOp::Shl)),
                    ">>" => (6, Some(BinOp::Shr)),
                    "+" => (7, Some(BinOp::Add)),
                    "-" => (7, Some(BinOp::Sub)),
                    "*" => (8, Some(BinOp::Mul)),
                    "/" => (8, Some(BinOp::Div)),
                    "%" => (8, Some(BinOp::Rem)),
                    "||" => (9, Some(BinOp::Concat)),
                    _ => break,
                },
                _ => break,
            };
            if prec <= min {
                break;
            }
            // A left-deep chain (`a + b + c ...`) nests one level per operator.
            if !matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case("AND") || w.eq_ignore_ascii_case("OR"))
            {
                chain += 1;
            }
            if chain > MAX_CHAIN {
                return Err(self.error_here("expression nested too deeply"));
            }
            left = match op {
                Some(op) => {
                    self.next();
                    let right = self.binary(prec)?;
                    Expr::Binary(op, Box::new(left), Box::new(right))
                }
                None => self.keyword_op(left, prec)?,
            };
        }
        Ok(balance(left))
    }

    fn keyword_op(&mut self, left: Expr, prec: u8) -> Result<Expr> {
        let w = match self.next() {
            Tok::Word(w) => w.to_ascii_uppercase(),
            _ => return Err(self.unexpected("an operator")),
        };
        let b = Box::new(left);
        Ok(match w.as_str() {
            "OR" => Expr::Binary(BinOp::Or, b, Box::new(self.binary(prec)?)),
            "AND" => Expr::Binary(BinOp::And, b, Box::new(self.binary(prec)?)),
            "ISNULL" => Expr::IsNull {
                expr: b,
                negated: false,
            },
            "NOTNULL" => Expr::IsNull {
                expr: b,
                negated: true,
            },
            "IS" => {
                let not = self.eat_kw("NOT");
                if self.eat_kw("DISTINCT") {
                    self.expect_kw("FROM")?;
                    let r = self.binary(prec)?;
                    let op = if not { BinOp::Is } else { BinOp::IsNot };
                    return Ok(Expr::Binary(op, b, Box::new(r)));
                }
                // `x IS NOT NULL & y` is `x IS NOT (NULL & y)`, as in SQLite's grammar.
                let r = self.binary(prec)?;
                // `matches!`, not `==`: the AST's derived equality is otherwise unused outside
                // tests, and this one comparison linked all of it.
                if matches!(r, Expr::Literal(Value::Null)) {
                    return Ok(Expr::IsNull {
                        expr: b,
                        negated: not,
                    });
                }
                Expr::Binary(if not { BinOp::IsNot } else { BinOp::Is }, b, Box::new(r))
            }
            "NOT" => {
                if self.eat_kw("NULL") {
                    return Ok(Expr::IsNull {
                        expr: b,
                        negated: true,
                    });
                }
                let w2 = match self.peek() {
                    Tok::Word(w) => w.to_ascii_uppercase(),
                    _ => return Err(self.unexpected("IN, LIKE, GLOB, BETWEEN or NULL after NOT")),
                };
                self.next();
                self.negatable(&w2, b, prec, true)?
            }
            other => self.negatable(other, b, prec, false)?,
        })
    }

    fn negatable(&mut self, w: &str, b: Box<Expr>, prec: u8, negated: bool) -> Result<Expr> {
        Ok(match w {
            "IN" => {
                self.expect_op("(")?;
                if self.is_kw("SELECT") || self.is_kw("WITH") || self.is_kw("VALUES") {
                    let q = self.select()?;
                    self.expect_op(")")?;
                    Expr::InSelect {
                        expr: b,
                        query: Box::new(q),
                        negated,
                    }
                } else {
                    let mut list = Vec::new();
                    if !matches!(self.peek(), Tok::Op(")")) {
                        loop {
                            list.push(self.expr()?);
                            if !self.eat_op(",") {
                                break;
                            }
                        }
                    }
                    self.expect_op(")")?;
                    Expr::InList {
                        expr: b,
                        list,
                        negated,
                    }
                }
            }
            "LIKE" => {
                let pattern = Box::new(self.binary(prec)?);
                let escape = if self.eat_kw("ESCAPE") {
                    Some(Box::new(self.binary(prec)?))
                } else {
                    None
                };
                Expr::Like {
                    expr: b,
                    pattern,
                    escape,
                    negated,
                }
            }
            "GLOB" => Expr::Glob {
                expr: b,
                pattern: Box::new(self.binary(prec)?),
                negated,
            },
            "BETWEEN" => {
                // The low bound may hold operators of BETWEEN's own level (`x BETWEEN a IS b
                // AND c`), as in SQLite's grammar: nothing can end the BETWEEN before AND.
                let low = self.binary(prec - 1)?;
                self.expect_kw("AND")?;
                let high = self.binary(prec)?;
                Expr::Between {
                    expr: b,
                    low: Box::new(low),
                    high: Box::new(high),
                    negated,
                }
            }
            _ => return Err(self.unexpected("IN, LIKE, GLOB or BETWEEN")),
        })
    }

    fn unary(&mut self) -> Result<Expr> {
        self.enter()?;
        let e = if self.is_kw("NOT") && !self.is_kw_at(1, "EXISTS") {
            // `-NOT x`: NOT starts an operand here too.
            self.next();
            Expr::Unary(UnOp::Not, Box::new(self.binary(3)?))
        } else if self.eat_op("-") {
            if self.peek() == &Tok::IntMin {
                self.next();
                self.depth -= 1;
                return Ok(Expr::Literal(Value::Integer(i64::MIN)));
            }
            let inner = self.unary()?;
            match inner {
                Expr::Literal(Value::Integer(n)) => Expr::Literal(Value::Integer(-n)),
                Expr::Literal(Value::Real(r)) => Expr::Literal(Value::Real(-r)),
                e => Expr::Unary(UnOp::Neg, Box::new(e)),
            }
        } else if self.eat_op("+") {
            let inner = self.unary()?;
            match inner {
                e @ Expr::Literal(Value::Integer(_) | Value::Real(_)) => e,
                e => Expr::Unary(UnOp::Pos, Box::new(e)),
            }
        } else if self.eat_op("~") {
            Expr::Unary(UnOp::BitNot, Box::new(self.unary()?))
        } else {
            self.primary()?
        };
        self.depth -= 1;
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr> {
        let tok = self.peek().clone();
        match tok {
            Tok::Int(n) => {
                self.next();
                // 9223372036854775808 only exists negated; the lexer made it a real, and
                // `-9223372036854775808` then folds to that real, as SQLite reads it.
                Ok(Expr::Literal(Value::Integer(n)))
            }
            Tok::Real(r) => {
                self.next();
                Ok(Expr::Literal(Value::Real(r)))
            }
            Tok::IntMin => {
                self.next();
                Ok(Expr::Literal(Value::Real(9_223_372_036_854_775_808.0)))
            }
            Tok::Str(s) => {
                self.next();
                Ok(Expr::Literal(Value::Text(s)))
            }
            Tok::Blob(b) => {
                self.next();
                Ok(Expr::Literal(Value::Blob(b)))
            }
            Tok::QParam(n) => {
                let n = n.map_or(self.params.count + 1, |n| n as usize);
                self.param(n, Param::Index)
            }
            Tok::NamedParam(name) => {
                let p = &mut self.params;
                let n = match p.names.iter().find(|(m, _)| *m == name) {
                    Some((_, i)) => i + 1,
                    None => {
                        p.names.push((name.clone(), p.count));
                        p.count + 1
                    }
                };
                self.param(n, |n| Param::Named(name, n))
            }
            Tok::Op("(") => {
                self.next();
                if self.is_kw("SELECT") || self.is_kw("WITH") || self.is_kw("VALUES") {
                    let q = self.select()?;
                    self.expect_op(")")?;
                    return Ok(Expr::Subquery(Box::new(q)));
                }
                let e = self.expr()?;
                if matches!(self.peek(), Tok::Op(",")) {
                    return Err(Error::Unsupported("row values (a, b)".into()));
                }
                self.expect_op(")")?;
                Ok(e)
            }
            Tok::Quoted(_) => self.column_ref(),
            Tok::Word(w) => {
                let up = w.to_ascii_uppercase();
                match up.as_str() {
                    "NULL" => {
                        self.next();
                        Ok(Expr::Literal(Value::Null))
                    }
                    "TRUE" if !matches!(self.peek_at(1), Tok::Op("." | "(")) => {
                        self.next();
                        Ok(Expr::Literal(Value::Integer(1)))
                    }
                    "FALSE" if !matches!(self.peek_at(1), Tok::Op("." | "(")) => {
                        self.next();
                        Ok(Expr::Literal(Value::Integer(0)))
                    }
                    "CURRENT_TIME" | "CURRENT_DATE" | "CURRENT_TIMESTAMP" => Err(
                        Error::Unsupported(format!("{up} (time is not part of the dialect)")),
                    ),
                    "EXISTS" => {
                        self.next();
                        self.expect_op("(")?;
                        let q = self.select()?;
                        self.expect_op(")")?;
                        Ok(Expr::Exists {
                            query: Box::new(q),
                            negated: false,
                        })
                    }
                    "NOT" if self.is_kw_at(1, "EXISTS") => {
                        self.next();
                        self.next();
                        self.expect_op("(")?;
                        let q = self.select()?;
                        self.expect_op(")")?;
                        Ok(Expr::Exists {
                            query: Box::new(q),
                            negated: true,
                        })
                    }
                    "CASE" => {
                        self.next();
                        let operand = if self.is_kw("WHEN") {
                            None
                        } else {
                            Some(Box::new(self.expr()?))
                        };
                        let mut whens = Vec::new();
                        while self.eat_kw("WHEN") {
                            let c = self.expr()?;
                            self.expect_kw("THEN")?;
                            whens.push((c, self.expr()?));
                        }
                        if whens.is_empty() {
                            return Err(self.unexpected("WHEN"));
                        }
                        let else_ = if self.eat_kw("ELSE") {
                            Some(Box::new(self.expr()?))
                        } else {
                            None
                        };
                        self.expect_kw("END")?;
                        Ok(Expr::Case {
                            operand,
                            whens,
                            else_,
                        })
                    }
                    "CAST" => {
                        self.next();
                        self.expect_op("(")?;
                        let e = self.expr()?;
                        self.expect_kw("AS")?;
                        let mut words = Vec::new();
                        while let Tok::Word(w) = self.peek().clone() {
                            self.next();
                            words.push(w);
                        }
                        if words.is_empty() {
                            return Err(self.unexpected("a type name"));
                        }
                        if self.eat_op("(") {
                            while !self.eat_op(")") {
                                if self.peek() == &Tok::Eof {
                                    return Err(self.unexpected("')'"));
                                }
                                self.next();
                            }
                        }
                        self.expect_op(")")?;
                        Ok(Expr::Cast {
                            expr: Box::new(e),
                            type_name: cairn_value::text::join(&words, " "),
                        })
                    }
                    _ if matches!(self.peek_at(1), Tok::Op("(")) && !is_reserved(&w)
                        || up == "REPLACE" && matches!(self.peek_at(1), Tok::Op("(")) =>
                    {
                        self.next();
                        self.next();
                        let mut args = Vec::new();
                        let mut distinct = false;
                        let mut star = false;
                        if self.eat_op("*") {
                            star = true;
                        } else if !matches!(self.peek(), Tok::Op(")")) {
                            distinct = self.eat_kw("DISTINCT");
                            loop {
                                args.push(self.expr()?);
                                if !self.eat_op(",") {
                                    break;
                                }
                            }
                        }
                        self.expect_op(")")?;
                        if self.is_kw("FILTER") || self.is_kw("OVER") {
                            return Err(Error::Unsupported("FILTER and window functions".into()));
                        }
                        Ok(Expr::Function {
                            name: w.to_ascii_lowercase(),
                            args,
                            distinct,
                            star,
                        })
                    }
                    _ if !is_reserved(&w) => self.column_ref(),
                    _ => Err(self.unexpected("an expression")),
                }
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    fn column_ref(&mut self) -> Result<Expr> {
        let first = self.ident()?;
        if self.eat_op(".") {
            let name = self.ident()?;
            if self.eat_op(".") {
                // schema.table.column: only the main schema exists.
                let col = self.ident()?;
                return Ok(Expr::Column {
                    table: Some(name),
                    name: col,
                });
            }
            Ok(Expr::Column {
                table: Some(first),
                name,
            })
        } else {
            Ok(Expr::Column {
                table: None,
                name: first,
            })
        }
    }
}

/// Rebuilds a left-deep chain of one AND or OR operator (`a OR b OR c ...`) as a balanced
/// tree, so that a thousand-term OR recurses ten levels deep, not a thousand. AND and OR are
/// associative in SQL's three-valued logic, so the result is the same.
fn balance(e: Expr) -> Expr {
    let op = match &e {
        Expr::Binary(op @ (BinOp::And | BinOp::Or), l, _) if matches!(&**l, Expr::Binary(o, _, _) if o == op) => {
            *op
        }
        _ => return e,
    };
    let mut terms = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            Expr::Binary(o, l, r) if o == op => {
                terms.push(*r);
                cur = *l;
            }
            other => {
                terms.push(other);
                break;
            }
        }
    }
    terms.reverse();
    fn build(op: BinOp, mut terms: Vec<Expr>) -> Expr {
        if terms.len() == 1 {
            return terms.pop().expect("one term");
        }
        let right = terms.split_off(terms.len() / 2);
        Expr::Binary(op, Box::new(build(op, terms)), Box::new(build(op, right)))
    }
    build(op, terms)
}

/// Whether `w` must be quoted to be used as a name.
pub fn is_keyword(w: &str) -> bool {
    is_reserved(w)
}
