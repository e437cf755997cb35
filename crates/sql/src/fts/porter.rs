//! The `porter` tokenizer wrapper: Porter's English stemmer as FTS5 applies it, to the
//! folded bytes of each token 3 to 64 bytes long (others pass through). Bytes other than
//! ASCII letters are consonants; `y` is a vowel after a consonant. Each step is a table of
//! suffix rules: the first rule whose suffix ends the word (with something left before it)
//! is the step's only candidate, applied when its condition holds of what is left.

#[derive(Clone, Copy)]
enum Cond {
    /// m > 0
    M0,
    /// m > 1
    M1,
    /// m > 1 and the stem ends in s or t
    M1St,
    /// the stem holds a vowel
    Vowel,
    Always,
}

use Cond::*;

type Rule = (&'static str, &'static str, Cond);

const STEP1B: &[Rule] = &[("eed", "ee", M0), ("ed", "", Vowel), ("ing", "", Vowel)];
const STEP1B2: &[Rule] = &[
    ("at", "ate", Always),
    ("bl", "ble", Always),
    ("iz", "ize", Always),
];
const STEP2: &[Rule] = &[
    ("ational", "ate", M0),
    ("tional", "tion", M0),
    ("enci", "ence", M0),
    ("anci", "ance", M0),
    ("izer", "ize", M0),
    ("logi", "log", M0),
    ("bli", "ble", M0),
    ("alli", "al", M0),
    ("entli", "ent", M0),
    ("eli", "e", M0),
    ("ousli", "ous", M0),
    ("ization", "ize", M0),
    ("ation", "ate", M0),
    ("ator", "ate", M0),
    ("alism", "al", M0),
    ("iveness", "ive", M0),
    ("fulness", "ful", M0),
    ("ousness", "ous", M0),
    ("aliti", "al", M0),
    ("iviti", "ive", M0),
    ("biliti", "ble", M0),
];
const STEP3: &[Rule] = &[
    ("ical", "ic", M0),
    ("ness", "", M0),
    ("icate", "ic", M0),
    ("iciti", "ic", M0),
    ("ful", "", M0),
    ("ative", "", M0),
    ("alize", "al", M0),
];
const STEP4: &[Rule] = &[
    ("al", "", M1),
    ("ance", "", M1),
    ("ence", "", M1),
    ("er", "", M1),
    ("ic", "", M1),
    ("able", "", M1),
    ("ible", "", M1),
    ("ant", "", M1),
    ("ement", "", M1),
    ("ment", "", M1),
    ("ent", "", M1),
    ("ion", "", M1St),
    ("ou", "", M1),
    ("ism", "", M1),
    ("ate", "", M1),
    ("iti", "", M1),
    ("ous", "", M1),
    ("ive", "", M1),
    ("ize", "", M1),
];

fn is_vowel(c: u8, y_vowel: bool) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_vowel && c == b'y')
}

/// Where the first vowel-consonant sequence at or after the start of `w` ends (0: none).
fn gobble_vc(w: &[u8], prev_cons: bool) -> usize {
    let mut cons = prev_cons;
    let mut i = 0;
    while i < w.len() {
        cons = !is_vowel(w[i], cons);
        if !cons {
            break;
        }
        i += 1;
    }
    i += 1;
    while i < w.len() {
        cons = !is_vowel(w[i], cons);
        if cons {
            return i + 1;
        }
        i += 1;
    }
    0
}

fn m_gt0(w: &[u8]) -> bool {
    gobble_vc(w, false) > 0
}

fn m_gt1(w: &[u8]) -> bool {
    let n = gobble_vc(w, false);
    n > 0 && gobble_vc(&w[n..], true) > 0
}

fn m_eq1(w: &[u8]) -> bool {
    let n = gobble_vc(w, false);
    n > 0 && gobble_vc(&w[n..], true) == 0
}

/// Ends consonant-vowel-consonant, the last not w, x or y.
fn o_star(w: &[u8]) -> bool {
    if matches!(w.last(), None | Some(b'w' | b'x' | b'y')) {
        return false;
    }
    let mut mask = 0u32;
    let mut cons = false;
    for &c in w {
        cons = !is_vowel(c, cons);
        mask = (mask << 1) | u32::from(cons);
    }
    mask & 7 == 5
}

fn has_vowel(w: &[u8]) -> bool {
    w.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
}

/// Applies the step's candidate rule; the suffix it replaced, if it did.
fn step(w: &mut Vec<u8>, rules: &[Rule]) -> Option<&'static str> {
    let &(suffix, to, cond) = rules
        .iter()
        .find(|(s, _, _)| w.len() > s.len() && w.ends_with(s.as_bytes()))?;
    let stem = w.len() - suffix.len();
    let s = &w[..stem];
    let ok = match cond {
        M0 => m_gt0(s),
        M1 => m_gt1(s),
        M1St => matches!(s.last(), Some(b's' | b't')) && m_gt1(s),
        Vowel => has_vowel(s),
        Always => true,
    };
    if !ok {
        return None;
    }
    w.truncate(stem);
    w.extend_from_slice(to.as_bytes());
    Some(suffix)
}

/// The stem of a folded token.
pub fn stem(token: &str) -> String {
    if token.len() < 3 || token.len() > 64 {
        return token.to_string();
    }
    let mut w = token.as_bytes().to_vec();
    // Step 1a.
    let n = w.len();
    if w[n - 1] == b's' {
        if w[n - 2] == b'e' {
            if (n > 4 && &w[n - 4..n - 2] == b"ss") || (n > 3 && w[n - 3] == b'i') {
                w.truncate(n - 2);
            } else {
                w.truncate(n - 1);
            }
        } else if w[n - 2] != b's' {
            w.truncate(n - 1);
        }
    }
    // Step 1b: only "ed" and "ing" go on to the clean-up.
    let ed_ing = matches!(step(&mut w, STEP1B), Some("ed" | "ing"));
    if ed_ing && w.len() >= 2 && step(&mut w, STEP1B2).is_none() {
        let n = w.len();
        let c = w[n - 1];
        if !is_vowel(c, false) && !matches!(c, b'l' | b's' | b'z') && c == w[n - 2] {
            w.truncate(n - 1);
        } else if m_eq1(&w) && o_star(&w) {
            w.push(b'e');
        }
    }
    // Step 1c.
    let n = w.len();
    if n > 0 && w[n - 1] == b'y' && has_vowel(&w[..n - 1]) {
        w[n - 1] = b'i';
    }
    for rules in [STEP2, STEP3, STEP4] {
        step(&mut w, rules);
    }
    // Step 5a.
    let n = w.len();
    if n > 0 && w[n - 1] == b'e' {
        let s = &w[..n - 1];
        if m_gt1(s) || (m_eq1(s) && !o_star(s)) {
            w.truncate(n - 1);
        }
    }
    // Step 5b.
    let n = w.len();
    if n > 1 && w[n - 1] == b'l' && w[n - 2] == b'l' && m_gt1(&w[..n - 1]) {
        w.truncate(n - 1);
    }
    // Only ASCII letters are changed or removed, so the bytes stay UTF-8.
    String::from_utf8(w).unwrap_or_else(|_| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn porters_examples() {
        for (w, s) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("generalization", "gener"),
            ("electrical", "electr"),
            ("adjustment", "adjust"),
            ("controlling", "control"),
            ("running", "run"),
            ("crème", "crème"),
        ] {
            assert_eq!(stem(w), s, "{w}");
        }
    }
}
