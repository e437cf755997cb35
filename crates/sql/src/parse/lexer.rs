//! The lexer: SQL text to tokens, each with the line and column it starts at.
//!
//! Keywords are not told apart from identifiers here: an unquoted word is a [`Tok::Word`] and the
//! parser decides whether it is a keyword where one may appear. That keeps the keyword list in one
//! place (the parser) and lets most keywords double as column names, as in SQLite.

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// An unquoted word: a keyword or an identifier.
    Word(String),
    /// A quoted identifier ("x", `x` or `[x]`); never a keyword.
    Quoted(String),
    Str(String),
    Blob(Vec<u8>),
    Int(i64),
    /// A number with a fraction or exponent, or an integer literal too large for i64.
    Real(f64),
    /// The literal 9223372036854775808: a real, unless negated (then it is i64::MIN, as in SQLite).
    IntMin,
    /// `?` (None), `?NNN` (Some(n)).
    QParam(Option<u32>),
    /// `:name`, `$name`, `@name`, with the prefix kept.
    NamedParam(String),
    /// Punctuation and operators.
    Op(&'static str),
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub line: u32,
    pub col: u32,
    /// Where the token starts and ends in the SQL text, in bytes.
    pub at: u32,
    pub end: u32,
}

const OPS: &[&str] = &[
    "->>", "->", "||", "<=", ">=", "==", "!=", "<>", "<<", ">>", "(", ")", ",", ";", ".", "+", "-",
    "*", "/", "%", "<", ">", "=", "~", "&", "|",
];

pub fn tokenize(sql: &str) -> Result<Vec<Token>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1u32;
    let mut line_start = 0usize;
    // Column counting is incremental so a long single-line statement stays linear.
    let (mut col_pos, mut col_n) = (0usize, 1u32);
    while i < b.len() {
        let c = b[i];
        if col_pos < line_start {
            (col_pos, col_n) = (line_start, 1);
        }
        col_n += cairn_value::text::char_count(&sql[col_pos..i]) as u32;
        col_pos = i;
        let col = col_n;
        let tok_line = line;
        let err = move |msg: &str| Err(Error::syntax(tok_line, col, msg));
        if c == b'\n' {
            i += 1;
            line += 1;
            line_start = i;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            loop {
                if i >= b.len() {
                    // SQLite accepts an unterminated block comment at the end of input.
                    break;
                }
                if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    i += 2;
                    break;
                }
                if b[i] == b'\n' {
                    line += 1;
                    line_start = i + 1;
                }
                i += 1;
            }
            continue;
        }
        let start = i;
        let tok = if (c == b'x' || c == b'X') && b.get(i + 1) == Some(&b'\'') {
            i += 2;
            let s = i;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            if i >= b.len() {
                return err("unterminated blob literal");
            }
            let hex = &sql[s..i];
            i += 1;
            if !hex.len().is_multiple_of(2) || !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                return err("a blob literal needs an even number of hex digits");
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).unwrap_or(0))
                .collect();
            Tok::Blob(bytes)
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            Tok::Word(sql[start..i].to_string())
        } else if c.is_ascii_digit()
            || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            if c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
                i += 2;
                let s = i;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
                if s == i || s + 16 < i {
                    return err("bad hexadecimal literal");
                }
                // SQLite reads hex literals as 64-bit two's complement.
                Tok::Int(u64::from_str_radix(&sql[s..i], 16).unwrap_or(0) as i64)
            } else {
                let mut real = false;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if i < b.len() && b[i] == b'.' {
                    real = true;
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        real = true;
                        i = j;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                    } else {
                        return err("bad number: exponent without digits");
                    }
                }
                if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
                    return err("bad number: letters right after digits");
                }
                let text = &sql[start..i];
                if real {
                    Tok::Real(cairn_value::num::parse_f64(text).unwrap_or(0.0))
                } else {
                    match text.parse::<i64>() {
                        Ok(n) => Tok::Int(n),
                        Err(_) if text.trim_start_matches('0') == "9223372036854775808" => {
                            Tok::IntMin
                        }
                        Err(_) => {
                            Tok::Real(cairn_value::num::parse_f64(text).unwrap_or(f64::INFINITY))
                        }
                    }
                }
            }
        } else if c == b'\'' {
            let mut s = String::new();
            i += 1;
            let mut seg = i;
            loop {
                if i >= b.len() {
                    return err("unterminated string literal");
                }
                if b[i] == b'\'' {
                    s.push_str(&sql[seg..i]);
                    if b.get(i + 1) == Some(&b'\'') {
                        s.push('\'');
                        i += 2;
                        seg = i;
                        continue;
                    }
                    i += 1;
                    break;
                }
                if b[i] == b'\n' {
                    line += 1;
                    line_start = i + 1;
                }
                i += 1;
            }
            Tok::Str(s)
        } else if c == b'"' || c == b'`' || c == b'[' {
            let close = if c == b'[' { b']' } else { c };
            let mut s = String::new();
            i += 1;
            let mut seg = i;
            loop {
                if i >= b.len() {
                    return err("unterminated quoted identifier");
                }
                if b[i] == close {
                    s.push_str(&sql[seg..i]);
                    if close != b']' && b.get(i + 1) == Some(&close) {
                        s.push(close as char);
                        i += 2;
                        seg = i;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
            Tok::Quoted(s)
        } else if c == b'?' {
            i += 1;
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if s == i {
                Tok::QParam(None)
            } else {
                match sql[s..i].parse::<u32>() {
                    Ok(n) if (1..=32766).contains(&n) => Tok::QParam(Some(n)),
                    _ => return err("parameter number must be between 1 and 32766"),
                }
            }
        } else if c == b':' || c == b'$' || c == b'@' {
            i += 1;
            let s = i;
            // As SQLite reads a name: identifier characters, `::` anywhere (`$ns::x`), and after
            // at least one character a suffix in parentheses (`$a(1)`), Tcl's forms.
            loop {
                match b.get(i) {
                    Some(&c)
                        if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 =>
                    {
                        i += 1
                    }
                    Some(b':') if b.get(i + 1) == Some(&b':') => i += 2,
                    Some(b'(') if i > s => {
                        match b[i..]
                            .iter()
                            .position(|&c| c == b')' || c.is_ascii_whitespace())
                        {
                            Some(n) if b[i + n] == b')' => i += n + 1,
                            _ => return err("a named parameter's '(' has no ')'"),
                        }
                        break;
                    }
                    _ => break,
                }
            }
            if s == i {
                return err("a named parameter needs a name after its prefix");
            }
            Tok::NamedParam(sql[start..i].to_string())
        } else {
            let rest = &b[i..];
            match OPS.iter().find(|op| rest.starts_with(op.as_bytes())) {
                Some(op) => {
                    i += op.len();
                    Tok::Op(op)
                }
                None => {
                    let ch = sql[i..].chars().next().unwrap_or('?');
                    return err(&format!("unexpected character {ch:?}"));
                }
            }
        };
        out.push(Token {
            tok,
            line: tok_line,
            col,
            at: col_pos as u32,
            end: i as u32,
        });
    }
    let col = (cairn_value::text::char_count(&sql[line_start..]) + 1) as u32;
    out.push(Token {
        tok: Tok::Eof,
        line,
        col,
        at: sql.len() as u32,
        end: sql.len() as u32,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_kinds() {
        let t = tokenize("SELECT 'it''s', x'0aFF', 1.5e3, 0x10\n  , ?2, :a -- c\n").unwrap();
        let kinds: Vec<_> = t.iter().map(|t| t.tok.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::Word("SELECT".into()),
                Tok::Str("it's".into()),
                Tok::Op(","),
                Tok::Blob(vec![0x0a, 0xff]),
                Tok::Op(","),
                Tok::Real(1500.0),
                Tok::Op(","),
                Tok::Int(16),
                Tok::Op(","),
                Tok::QParam(Some(2)),
                Tok::Op(","),
                Tok::NamedParam(":a".into()),
                Tok::Eof
            ]
        );
        assert_eq!((t[9].line, t[9].col), (2, 5));
        // Byte offsets: where each token starts and ends.
        let spans: Vec<_> = t
            .iter()
            .map(|t| {
                &"SELECT 'it''s', x'0aFF', 1.5e3, 0x10\n  , ?2, :a -- c\n"
                    [t.at as usize..t.end as usize]
            })
            .collect();
        assert_eq!(spans[..3], ["SELECT", "'it''s'", ","]);
        assert_eq!(spans[9..], ["?2", ",", ":a", ""]);
    }

    #[test]
    fn named_parameters_read_as_sqlite_reads_them() {
        let names = |sql: &str| -> Vec<String> {
            (tokenize(sql).unwrap().into_iter())
                .filter_map(|t| match t.tok {
                    Tok::NamedParam(n) => Some(n),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(
            names("$a::b, :x::y::z+1, @p(1), $q(a,b), $u$v, :w:x"),
            ["$a::b", ":x::y::z", "@p(1)", "$q(a,b)", "$u$v", ":w", ":x"]
        );
        for bad in ["SELECT $a(1", "SELECT $a(1 2)", "SELECT :(x)"] {
            assert!(
                matches!(tokenize(bad), Err(Error::Syntax { .. })),
                "{bad} is refused"
            );
        }
    }

    #[test]
    fn errors_have_positions() {
        match tokenize("SELECT\n  'abc") {
            Err(Error::Syntax { line, column, .. }) => assert_eq!((line, column), (2, 3)),
            other => panic!("{other:?}"),
        }
    }
}
