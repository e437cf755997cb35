//! Small text helpers for the crates above the store, written out so that the wasm module carries
//! one short copy of each instead of std's general versions (docs/size.md).

/// `parts` with `sep` between them, as `parts.join(sep)` does. std's `join` is specialized for
/// separators of one to four bytes, about 1 KB of wasm; messages and schema text need none of it.
pub fn join<S: AsRef<str>>(parts: &[S], sep: &str) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(p.as_ref());
    }
    out
}

/// How many characters `s` holds, as `s.chars().count()`: the bytes that do not continue a
/// character. std's count reads a word at a time in about 600 bytes of wasm; the lexer (for
/// columns in messages) and `length()` count short texts.
pub fn char_count(s: &str) -> usize {
    s.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

/// `s` between two `q`s, with each `q` inside it doubled: SQL's quoting of identifiers (`"`) and
/// strings (`'`). As `format!("{q}{}{q}", s.replace(q, ..))` without the pattern searcher.
pub fn quote(s: &str, q: char) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        out.push(c);
        if c == q {
            out.push(q);
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_count_matches_std() {
        for s in [
            "",
            "a",
            "héllo",
            "€uro",
            "日本語",
            "😀x😀",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}",
        ] {
            assert_eq!(char_count(s), s.chars().count(), "{s:?}");
        }
    }

    #[test]
    fn join_matches_std() {
        let cases: [&[&str]; 4] = [&[], &["a"], &["a", "", "bc"], &["x y", "z"]];
        for parts in cases {
            for sep in ["", ", ", "; ", " AND "] {
                assert_eq!(join(parts, sep), parts.join(sep), "{parts:?} {sep:?}");
            }
        }
        let owned = vec![String::from("k"), String::from("v")];
        assert_eq!(join(&owned, "="), "k=v");
    }

    #[test]
    fn quote_doubles_the_quote_inside() {
        assert_eq!(quote("", '"'), "\"\"");
        assert_eq!(quote("a\"b", '"'), "\"a\"\"b\"");
        assert_eq!(quote("it's", '\''), "'it''s'");
        assert_eq!(quote("é'\"", '\''), "'é''\"'");
        for s in ["x", "q''q", "\"\"", "naïve 'text'"] {
            assert_eq!(quote(s, '\''), format!("'{}'", s.replace('\'', "''")));
        }
    }
}
