//! The FTS5 query language, parsed into a tree over numbered phrases: barewords and "strings"
//! (each cut into terms by the table's tokenizer: one phrase), `*` for a prefix, `+` to join
//! phrases, `^` before a phrase that must start a column, `NEAR(a b, N)`, column filters
//! (`col:`, `{a b}:`, `-col:`), parentheses, and the operators by FTS5's precedence: juxtaposition (an implicit AND) binds tightest, then `NOT`,
//! `AND`, `OR`. cairn's extension: `word~1` and `word~2` match terms within that many edits.

use super::tokenize::Tokenizer;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct QTerm {
    pub text: String,
    pub prefix: bool,
    /// Edits allowed (0: exact).
    pub typo: u8,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Phrase {
    pub terms: Vec<QTerm>,
    /// The columns it may match in, a bit each.
    pub cols: u64,
    /// `^phrase`: it matches only at a column's first token.
    pub first: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Phrases (by number) that must occur within `dist` tokens of each other in one column;
    /// a lone phrase is a group of one.
    Near(Vec<usize>, u32),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Query {
    /// None: the query has no terms, and matches no row.
    pub root: Option<Node>,
    pub phrases: Vec<Phrase>,
}

#[derive(Debug, Clone, PartialEq)]
enum T {
    /// A bareword (`true`) or a "string".
    Word(String, bool),
    Op(char),
    /// `~N` after a term.
    Typo(u8),
    Eof,
}

fn is_bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\u{1a}' || !c.is_ascii()
}

fn syntax(q: &str, at: usize) -> Error {
    let near: String = q.get(at..).unwrap_or("").chars().take(1).collect();
    let near = if near.is_empty() {
        String::new()
    } else {
        q[at..].split_whitespace().next().unwrap_or("").to_string()
    };
    Error::Syntax {
        line: 1,
        column: q.get(..at).map_or(1, |p| p.chars().count() as u32 + 1),
        message: format!("fts5: syntax error near \"{near}\""),
    }
}

fn lex(q: &str) -> Result<Vec<(T, usize)>> {
    let mut out = Vec::new();
    let b = q.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = q[i..].chars().next().unwrap_or(' ');
        let at = i;
        if c.is_whitespace() {
            i += c.len_utf8();
        } else if c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err(syntax(q, at)),
                    Some(b'"') if b.get(i + 1) == Some(&b'"') => {
                        s.push('"');
                        i += 2;
                    }
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(_) => {
                        let ch = q[i..].chars().next().unwrap_or(' ');
                        s.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
            out.push((T::Word(s, false), at));
        } else if is_bare(c) {
            let end = q[i..]
                .char_indices()
                .find(|&(_, ch)| !is_bare(ch))
                .map_or(q.len(), |(j, _)| i + j);
            out.push((T::Word(q[i..end].to_string(), true), at));
            i = end;
        } else if c == '~' && matches!(b.get(i + 1), Some(b'1' | b'2')) {
            out.push((T::Typo(b[i + 1] - b'0'), at));
            i += 2;
        } else if "*():{},+-^".contains(c) {
            out.push((T::Op(c), at));
            i += 1;
        } else {
            return Err(syntax(q, at));
        }
    }
    out.push((T::Eof, q.len()));
    Ok(out)
}

struct P<'a> {
    q: &'a str,
    toks: Vec<(T, usize)>,
    pos: usize,
    tok: &'a Tokenizer,
    columns: &'a [String],
    phrases: Vec<Phrase>,
    depth: u32,
}

const ALL: u64 = u64::MAX;

/// Parses `q` against a table with `columns`, cutting its strings with `tok`.
pub fn parse(q: &str, tok: &Tokenizer, columns: &[String]) -> Result<Query> {
    let mut p = P {
        q,
        toks: lex(q)?,
        pos: 0,
        tok,
        columns,
        phrases: Vec::new(),
        depth: 0,
    };
    // An empty query is a syntax error, as in SQLite.
    let root = p.or(ALL)?;
    if p.peek() != &T::Eof {
        return Err(p.err());
    }
    Ok(Query {
        root: Some(root),
        phrases: p.phrases,
    })
}

impl P<'_> {
    fn peek(&self) -> &T {
        &self.toks[self.pos.min(self.toks.len() - 1)].0
    }
    fn peek_at(&self, n: usize) -> &T {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].0
    }
    fn err(&self) -> Error {
        syntax(self.q, self.toks[self.pos.min(self.toks.len() - 1)].1)
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), T::Word(w, true) if w == kw)
    }
    fn eat_op(&mut self, c: char) -> bool {
        if self.peek() == &T::Op(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self, cols: u64) -> Result<Node> {
        let mut l = self.and(cols)?;
        while self.is_kw("OR") {
            self.pos += 1;
            l = Node::Or(Box::new(l), Box::new(self.and(cols)?));
        }
        Ok(l)
    }

    fn and(&mut self, cols: u64) -> Result<Node> {
        let mut l = self.not(cols)?;
        while self.is_kw("AND") {
            self.pos += 1;
            l = Node::And(Box::new(l), Box::new(self.not(cols)?));
        }
        Ok(l)
    }

    fn not(&mut self, cols: u64) -> Result<Node> {
        let mut l = self.list(cols)?;
        while self.is_kw("NOT") {
            self.pos += 1;
            l = Node::Not(Box::new(l), Box::new(self.list(cols)?));
        }
        Ok(l)
    }

    fn starts_unit(&self) -> bool {
        match self.peek() {
            T::Word(w, true) => !matches!(w.as_str(), "AND" | "OR" | "NOT"),
            T::Word(..) => true,
            T::Op(c) => "({-^".contains(*c),
            _ => false,
        }
    }

    /// Whether the next unit is parenthesized (`(...)` or `cols : (...)`): FTS5 juxtaposes
    /// only phrases and NEAR groups, so such a unit stands alone between operators.
    fn paren_unit(&self) -> bool {
        let mut i = 0;
        if self.peek_at(i) == &T::Op('(') {
            return true;
        }
        if self.peek_at(i) == &T::Op('-') {
            i += 1;
        }
        match self.peek_at(i) {
            T::Word(..) => i += 1,
            T::Op('{') => {
                while !matches!(self.peek_at(i), T::Op('}') | T::Eof) {
                    i += 1;
                }
                i += 1;
            }
            _ => return false,
        }
        self.peek_at(i) == &T::Op(':') && self.peek_at(i + 1) == &T::Op('(')
    }

    fn list(&mut self, cols: u64) -> Result<Node> {
        if !self.starts_unit() {
            return Err(self.err());
        }
        if self.paren_unit() {
            return self.unit(cols);
        }
        let mut l = self.unit(cols)?;
        while self.starts_unit() && !self.paren_unit() {
            l = Node::And(Box::new(l), Box::new(self.unit(cols)?));
        }
        Ok(l)
    }

    fn unit(&mut self, cols: u64) -> Result<Node> {
        self.depth += 1;
        if self.depth > 200 {
            return Err(self.err());
        }
        let r = self.unit_inner(cols);
        self.depth -= 1;
        r
    }

    fn unit_inner(&mut self, cols: u64) -> Result<Node> {
        // A column filter: `col :`, `{a b} :`, `- col :`, `-{a b} :`.
        let filter = matches!(
            (self.peek(), self.peek_at(1)),
            (T::Op('-' | '{'), _) | (T::Word(..), T::Op(':'))
        );
        if filter {
            let negate = self.eat_op('-');
            let mut mask = 0u64;
            if self.eat_op('{') {
                while let T::Word(w, _) = self.peek().clone() {
                    mask |= self.column(&w)?;
                    self.pos += 1;
                }
                if !self.eat_op('}') {
                    return Err(self.err());
                }
            } else if let T::Word(w, _) = self.peek().clone() {
                mask = self.column(&w)?;
                self.pos += 1;
            } else {
                return Err(self.err());
            }
            if !self.eat_op(':') {
                return Err(self.err());
            }
            if negate {
                mask = !mask;
            }
            let cols = cols & mask;
            if self.eat_op('(') {
                let e = self.or(cols)?;
                if !self.eat_op(')') {
                    return Err(self.err());
                }
                return Ok(e);
            }
            return self.nearset(cols);
        }
        if self.eat_op('(') {
            let e = self.or(cols)?;
            if !self.eat_op(')') {
                return Err(self.err());
            }
            return Ok(e);
        }
        self.nearset(cols)
    }

    fn column(&self, name: &str) -> Result<u64> {
        match self
            .columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
        {
            Some(i) if i < 64 => Ok(1 << i),
            _ => Err(Error::UnknownColumn(format!("no such column: {name}"))),
        }
    }

    fn nearset(&mut self, cols: u64) -> Result<Node> {
        let near = self.is_kw("NEAR") && self.peek_at(1) == &T::Op('(');
        if !near {
            // `^` goes only before a phrase that stands alone, as in FTS5's grammar.
            let first = self.eat_op('^');
            let p = self.phrase(cols)?;
            self.phrases[p].first = first;
            return Ok(Node::Near(vec![p], 0));
        }
        self.pos += 2;
        let mut group = Vec::new();
        while matches!(self.peek(), T::Word(..)) {
            group.push(self.phrase(cols)?);
        }
        let mut dist = 10;
        if self.eat_op(',') {
            match self.peek().clone() {
                T::Word(w, true) if w.bytes().all(|b| b.is_ascii_digit()) => {
                    dist = w.parse().map_err(|_| self.err())?;
                    self.pos += 1;
                }
                _ => return Err(self.err()),
            }
        }
        if group.is_empty() || !self.eat_op(')') {
            return Err(self.err());
        }
        Ok(Node::Near(group, dist))
    }

    /// One phrase: strings joined by `+`, each with an optional `*` (and `~N`).
    fn phrase(&mut self, cols: u64) -> Result<usize> {
        let mut terms = Vec::new();
        loop {
            let T::Word(w, _) = self.peek().clone() else {
                return Err(self.err());
            };
            self.pos += 1;
            let start = terms.len();
            for t in self.tok.tokens(&w) {
                terms.push(QTerm {
                    text: t.term,
                    prefix: false,
                    typo: 0,
                });
            }
            if self.eat_op('*') {
                if let Some(t) = terms[start..].last_mut() {
                    t.prefix = true;
                }
            } else if let T::Typo(n) = *self.peek() {
                self.pos += 1;
                if let Some(t) = terms[start..].last_mut() {
                    t.typo = n;
                }
            }
            if !self.eat_op('+') {
                break;
            }
        }
        self.phrases.push(Phrase {
            terms,
            cols,
            first: false,
        });
        Ok(self.phrases.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols() -> Vec<String> {
        vec!["title".into(), "body".into()]
    }

    fn p(q: &str) -> Result<Query> {
        parse(q, &Tokenizer::default(), &cols())
    }

    #[test]
    fn precedence_is_fts5s() {
        // Juxtaposition binds tighter than NOT, NOT tighter than AND, AND than OR.
        let q = p("a b NOT c OR d AND e").unwrap();
        let n = |i| Box::new(Node::Near(vec![i], 0));
        assert_eq!(
            q.root.unwrap(),
            Node::Or(
                Box::new(Node::Not(Box::new(Node::And(n(0), n(1))), n(2))),
                Box::new(Node::And(n(3), n(4)))
            )
        );
    }

    #[test]
    fn phrases_prefixes_filters() {
        let q = p("title: \"Hello World\"* -title: x~2 NEAR(a b, 3)").unwrap();
        assert_eq!(q.phrases[0].terms.len(), 2);
        assert!(q.phrases[0].terms[1].prefix);
        assert_eq!(q.phrases[0].cols, 1);
        assert_eq!(q.phrases[1].cols, !1);
        assert_eq!(q.phrases[1].terms[0].typo, 2);
        assert!(matches!(q.root, Some(Node::And(_, ref r)) if **r == Node::Near(vec![2, 3], 3)));
    }

    #[test]
    fn caret_marks_a_phrase_that_starts_a_column() {
        let q = p("^a title:^\"b c\"* d").unwrap();
        let first: Vec<bool> = q.phrases.iter().map(|p| p.first).collect();
        assert_eq!(first, [true, true, false]);
        assert_eq!(q.phrases[1].cols, 1);
        for bad in ["NEAR(^a b)", "^^a", "^(a)", "a + ^b", "^title: a", "^"] {
            assert!(matches!(p(bad), Err(Error::Syntax { .. })), "{bad}");
        }
    }

    #[test]
    fn bad_input_is_a_syntax_error() {
        for q in [
            "\"abc",
            "a AND",
            "(a",
            "a)",
            "NEAR(a b,",
            "a : b",
            "{title",
            "OR",
            "a # b",
            "(a) b",
            "a (b)",
        ] {
            let e = p(q).unwrap_err();
            assert!(
                matches!(e, Error::Syntax { .. } | Error::UnknownColumn(_)),
                "{q}: {e:?}"
            );
        }
        assert!(matches!(p("nope: x"), Err(Error::UnknownColumn(_))));
        assert!(matches!(p(""), Err(Error::Syntax { .. })));
        assert!(matches!(p("   "), Err(Error::Syntax { .. })));
    }
}
