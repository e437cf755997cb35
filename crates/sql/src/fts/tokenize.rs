//! The `unicode61` tokenizer as FTS5 defines it: a token is a run of letters and digits (or of
//! the `tokenchars` given), folded to lower case, with diacritics removed from Latin letters
//! (`remove_diacritics` 1 and 2 agree on these, each carrying one mark), and optionally
//! reduced to its stem by the `porter` wrapper (`porter.rs`).

use crate::error::{Error, Result};

/// How a table's text is cut into terms (`tokenize='...'` in CREATE VIRTUAL TABLE).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tokenizer {
    /// `remove_diacritics 0` keeps the marks.
    pub keep_diacritics: bool,
    pub porter: bool,
    /// Characters that are part of tokens (`tokenchars`) or that separate them
    /// (`separators`), beyond the Unicode classes.
    pub tokenchars: Vec<char>,
    pub separators: Vec<char>,
}

/// One term, with the byte range of the text it came from (for `highlight()`).
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub term: String,
    pub start: usize,
    pub end: usize,
}

/// Base letters of U+00C0..U+017F once lower-cased; `.` keeps the letter (no single mark).
const LATIN: &[u8; 192] = b"aaaaaa.ceeeeiiii.nooooo..uuuuy..\
aaaaaa.ceeeeiiii.nooooo..uuuuy.y\
aaaaaaccccccccdd..eeeeeeeeeegggg\
gggghh..iiiiiiiii...jjkk.llllll.\
...nnnnnn...oooooo..rrrrrrssssss\
sstttt..uuuuuuuuuuuuwwyyyzzzzzz.";

impl Tokenizer {
    /// Parses the `tokenize` option: `unicode61 [remove_diacritics N] [tokenchars 'x']
    /// [separators 'x']`, optionally wrapped as `porter unicode61 ...` (or `porter` alone).
    pub fn parse(spec: &str) -> Result<Tokenizer> {
        let mut t = Tokenizer::default();
        let words = split_spec(spec)?;
        let mut i = 0;
        if words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("porter"))
        {
            t.porter = true;
            i = 1;
        }
        match words.get(i) {
            None => return Ok(t),
            Some(w) if w.eq_ignore_ascii_case("unicode61") => i += 1,
            Some(w) if w.eq_ignore_ascii_case("ascii") => {
                t.keep_diacritics = true;
                i += 1
            }
            Some(w) => return Err(Error::Invalid(format!("no such tokenizer: {w}"))),
        }
        while i < words.len() {
            let value = words
                .get(i + 1)
                .ok_or_else(|| Error::Invalid("error in tokenizer constructor".into()))?;
            match words[i].to_ascii_lowercase().as_str() {
                "remove_diacritics" => match value.as_str() {
                    "0" => t.keep_diacritics = true,
                    "1" | "2" => t.keep_diacritics = false,
                    _ => return Err(Error::Invalid("error in tokenizer constructor".into())),
                },
                "tokenchars" => t.tokenchars.extend(value.chars()),
                "separators" => t.separators.extend(value.chars()),
                _ => return Err(Error::Invalid("error in tokenizer constructor".into())),
            }
            i += 2;
        }
        Ok(t)
    }

    fn is_token_char(&self, c: char) -> bool {
        if self.separators.contains(&c) {
            return false;
        }
        self.tokenchars.contains(&c) || c.is_alphanumeric() || is_mark(c)
    }

    /// The terms of `text`, in order; their positions are their indexes.
    pub fn tokens(&self, text: &str) -> Vec<Token> {
        let mut out = Vec::new();
        self.each(text, &mut |t| out.push(t));
        out
    }

    pub fn each(&self, text: &str, f: &mut dyn FnMut(Token)) {
        let mut term = String::new();
        let mut start = None;
        for (i, c) in text.char_indices() {
            if self.is_token_char(c) {
                if start.is_none() {
                    start = Some(i);
                    term.clear();
                }
                self.fold(c, &mut term);
            } else if let Some(s) = start.take() {
                self.emit(&mut term, s, i, f);
            }
        }
        if let Some(s) = start {
            self.emit(&mut term, s, text.len(), f);
        }
    }

    fn emit(&self, term: &mut String, start: usize, end: usize, f: &mut dyn FnMut(Token)) {
        // A run of marks alone folds to nothing: no token, as in SQLite.
        if term.is_empty() {
            return;
        }
        let mut t = std::mem::take(term);
        if self.porter {
            t = super::porter::stem(&t);
        }
        f(Token {
            term: t,
            start,
            end,
        });
    }

    fn fold(&self, c: char, out: &mut String) {
        if is_mark(c) {
            if self.keep_diacritics {
                out.push(c);
            }
            return;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
            return;
        }
        for l in c.to_lowercase() {
            let n = l as u32;
            if !self.keep_diacritics && (0xC0..0x180).contains(&n) {
                let b = LATIN[(n - 0xC0) as usize];
                if b != b'.' {
                    out.push(b as char);
                    continue;
                }
            }
            if !self.keep_diacritics && is_mark(l) {
                continue;
            }
            out.push(l);
        }
    }
}

/// Combining diacritical marks: part of the token they follow, removed with the diacritics.
fn is_mark(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

/// The words of a `tokenize` option, quoted ones ('x' or "x") unquoted.
fn split_spec(spec: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut it = spec.chars().peekable();
    while let Some(&c) = it.peek() {
        if c.is_whitespace() {
            it.next();
        } else if c == '\'' || c == '"' {
            it.next();
            let mut w = String::new();
            loop {
                match it.next() {
                    Some(x) if x == c => {
                        if it.peek() == Some(&c) {
                            it.next();
                            w.push(c);
                        } else {
                            break;
                        }
                    }
                    Some(x) => w.push(x),
                    None => return Err(Error::Invalid("parse error in tokenize option".into())),
                }
            }
            out.push(w);
        } else {
            let mut w = String::new();
            while let Some(&x) = it.peek() {
                if x.is_whitespace() {
                    break;
                }
                w.push(x);
                it.next();
            }
            out.push(w);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(t: &Tokenizer, s: &str) -> Vec<String> {
        t.tokens(s).into_iter().map(|t| t.term).collect()
    }

    #[test]
    fn folds_case_and_diacritics() {
        let t = Tokenizer::default();
        assert_eq!(
            terms(&t, "Crème BRÛLÉE, naïve-Łódź"),
            ["creme", "brulee", "naive", "łodz"]
        );
        let keep = Tokenizer::parse("unicode61 remove_diacritics 0").unwrap();
        assert_eq!(terms(&keep, "Crème"), ["crème"]);
        let chars = Tokenizer::parse("unicode61 tokenchars '-'").unwrap();
        assert_eq!(terms(&chars, "e-mail x"), ["e-mail", "x"]);
        let toks = t.tokens("ab  cd");
        assert_eq!((toks[1].start, toks[1].end), (4, 6));
    }

    #[test]
    fn latin_table_is_aligned() {
        for (c, b) in [
            ('ç', 'c'),
            ('ñ', 'n'),
            ('ÿ', 'y'),
            ('ő', 'o'),
            ('ž', 'z'),
            ('ğ', 'g'),
        ] {
            assert_eq!(LATIN[c as usize - 0xC0] as char, b, "{c}");
        }
    }
}
