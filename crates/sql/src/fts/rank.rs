//! Ranking and the auxiliary functions: `bm25()` as FTS5 computes it (k1 = 1.2, b = 0.75,
//! IDF floored at 1e-6, the row's length over all columns), NEAR's reach, edit distance for
//! `word~N`, `highlight()` and `snippet()`.

use super::query::Query;
use super::{corrupt, doc_key, get_varint, load_stats, text_of, Doc, Found, Fts};
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::Value;
use std::ops::Bound;

const K1: f64 = 1.2;
const B: f64 = 0.75;

pub struct Scorer<'a> {
    found: &'a Found,
    f: &'a Fts,
    idf: Vec<f64>,
    avgdl: f64,
    /// Rows in the table.
    n: f64,
}

impl<'a> Scorer<'a> {
    pub fn new(store: &dyn Storage, f: &'a Fts, q: &Query, found: &'a Found) -> Result<Self> {
        let (n, totals) = load_stats(store, f)?;
        let n = n as f64;
        let tokens: u64 = totals.iter().sum();
        let avgdl = if n > 0.0 { tokens as f64 / n } else { 0.0 };
        let idf = (0..q.phrases.len())
            .map(|i| {
                let hits = found.raw[i].len() as f64;
                let idf = ((n - hits + 0.5) / (hits + 0.5)).ln();
                if idf <= 0.0 {
                    1e-6
                } else {
                    idf
                }
            })
            .collect();
        Ok(Scorer {
            found,
            f,
            idf,
            avgdl,
            n,
        })
    }

    /// `bm25(t, weights...)` of `rowid` (more negative is better). A row that a `word~N`
    /// term matched only through other words gets `1 / (1 + |score|)` instead: positive,
    /// so after every exact match, and still better the more it matched.
    /// `d` is the row's token count (`Scorer::lengths`).
    pub fn bm25(&self, rowid: &[u8], d: f64, weights: &[Value]) -> Result<f64> {
        let mut score = 0.0;
        for (i, kept) in self.found.kept().iter().enumerate() {
            let mut freq = 0.0;
            for &(c, _) in kept.get(rowid).map_or(&[][..], |v| v.as_slice()) {
                freq += match weights.get(c as usize) {
                    Some(Value::Integer(w)) => *w as f64,
                    Some(Value::Real(w)) => *w,
                    Some(_) => 0.0,
                    None => 1.0,
                };
            }
            score +=
                self.idf[i] * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * d / self.avgdl)));
        }
        if super::find(&self.found.fuzzy, rowid) {
            return Ok(1.0 / (1.0 + score));
        }
        Ok(-score)
    }
}

impl Scorer<'_> {
    /// The token count of each of `rows` (sorted keys), for bm25: looked up one by one when
    /// they are few beside the table, else read in one pass over the row sizes, which costs
    /// less than a descent of the tree for each.
    pub fn lengths(&self, store: &dyn Storage, rows: &[Doc]) -> Result<Vec<f64>> {
        let sum = |v: &[u8]| -> Result<f64> {
            let (mut i, mut d) = (0, 0u64);
            while i < v.len() {
                d += get_varint(v, &mut i)?;
            }
            Ok(d as f64)
        };
        let mut out = Vec::with_capacity(rows.len());
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Ok(out);
        };
        let docs = self.f.tree + 1;
        if (rows.len() as f64) * 8.0 < self.n {
            let mut buf = Vec::new();
            for r in rows {
                let hit = store.get_into(docs, &doc_key(r), &mut buf)?;
                out.push(if hit { sum(&buf)? } else { 0.0 });
            }
            return Ok(out);
        }
        let (lo, hi) = (doc_key(first), doc_key(last));
        let mut cur = store.scan(docs, Bound::Included(&lo), Bound::Included(&hi), false)?;
        let mut more = cur.next()?;
        for r in rows {
            while more && &cur.key()[1..] < r.as_slice() {
                more = cur.next()?;
            }
            out.push(if more && &cur.key()[1..] == r.as_slice() {
                sum(cur.value())?
            } else {
                0.0
            });
        }
        Ok(out)
    }
}

/// NEAR: which instances of each phrase (`lists[j]`, (column, start) sorted; phrase `j` is
/// `lens[j]` terms long) take part in a match, where a match is one instance of each phrase
/// in one column such that, with M the largest start, each starts at least
/// `M - len - dist` (FTS5's test). An instance is in some match iff, for some instance
/// starting at M, every phrase has one in its window below M; then every instance in those
/// windows is.
pub fn near(lists: &[&Vec<(u32, u32)>], lens: &[u32], dist: u32) -> Vec<Vec<(u32, u32)>> {
    let mut keep: Vec<Vec<(u32, u32)>> = vec![Vec::new(); lists.len()];
    for l in lists {
        for &(c, m) in l.iter() {
            let window = |j: usize| {
                let lo = m.saturating_sub(lens[j] + dist);
                lists[j]
                    .iter()
                    .filter(move |&&(cc, p)| cc == c && p >= lo && p <= m)
            };
            if (0..lists.len()).all(|j| window(j).next().is_some()) {
                for (j, k) in keep.iter_mut().enumerate() {
                    k.extend(window(j));
                }
            }
        }
    }
    for k in &mut keep {
        cairn_store::sort::sort(k);
        k.dedup();
    }
    keep
}

/// Whether `a` and `b` (UTF-8) are within `k` single-character edits.
pub fn within_edits(a: &[u8], b: &[u8], k: u8) -> bool {
    let (Ok(a), Ok(b)) = (std::str::from_utf8(a), std::str::from_utf8(b)) else {
        return false;
    };
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let k = usize::from(k);
    if a.len().abs_diff(b.len()) > k {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut best = cur[0];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
            best = best.min(cur[j]);
        }
        if best > k {
            return false;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()] <= k
}

/// The token ranges [start, end) of `rowid`'s matches in column `col`, overlapping ones
/// merged, in order.
fn ranges(q: &Query, found: &Found, rowid: &[u8], col: u32) -> Vec<(u32, u32)> {
    let mut r = Vec::new();
    for (i, kept) in found.kept().iter().enumerate() {
        let len = q.phrases[i].terms.len() as u32;
        for &(c, p) in kept.get(rowid).map_or(&[][..], |v| v.as_slice()) {
            if c == col && len > 0 {
                r.push((p, p + len));
            }
        }
    }
    cairn_store::sort::sort(&mut r);
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (s, e) in r {
        match out.last_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn arg_text(args: &[Value], i: usize) -> String {
    args.get(i)
        .and_then(text_of)
        .map(|t| t.into_owned())
        .unwrap_or_default()
}

fn arg_int(args: &[Value], i: usize, name: &str) -> Result<i64> {
    match args.get(i) {
        Some(Value::Integer(n)) => Ok(*n),
        _ => Err(Error::Invalid(format!(
            "wrong number or type of arguments to {name}()"
        ))),
    }
}

/// `highlight(t, col, open, close)`: the column's text with each match between the markers.
pub fn highlight(
    f: &Fts,
    q: &Query,
    found: &Found,
    rowid: &[u8],
    cols: &[Value],
    args: &[Value],
) -> Result<Value> {
    if args.len() != 3 {
        return Err(Error::Invalid(
            "wrong number of arguments to function highlight()".into(),
        ));
    }
    let col = arg_int(args, 0, "highlight")?;
    let Some(v) = usize::try_from(col).ok().and_then(|c| cols.get(c)) else {
        return Err(Error::Invalid("no such column in highlight()".into()));
    };
    let Some(text) = text_of(v) else {
        return Ok(Value::Null);
    };
    let (open, close) = (arg_text(args, 1), arg_text(args, 2));
    let toks = f.tok.tokens(&text);
    let mut out = String::with_capacity(text.len() + 16);
    let mut at = 0;
    for (s, e) in ranges(q, found, rowid, col as u32) {
        let (Some(a), Some(b)) = (toks.get(s as usize), toks.get(e as usize - 1)) else {
            return Err(corrupt());
        };
        out.push_str(&text[at..a.start]);
        out.push_str(&open);
        out.push_str(&text[a.start..b.end]);
        out.push_str(&close);
        at = b.end;
    }
    out.push_str(&text[at..]);
    Ok(Value::Text(out))
}

/// `snippet(t, col, open, close, ellipsis, tokens)`: up to `tokens` tokens of the column
/// (of the best column when `col` is negative) around the most matched phrases, with
/// `ellipsis` where text is cut and the matches highlighted. The window starts at a match
/// and is moved back to centre it; SQLite's choice of window can differ on ties.
pub fn snippet(
    f: &Fts,
    q: &Query,
    found: &Found,
    rowid: &[u8],
    cols: &[Value],
    args: &[Value],
) -> Result<Value> {
    if args.len() != 5 {
        return Err(Error::Invalid(
            "wrong number of arguments to function snippet()".into(),
        ));
    }
    let want = arg_int(args, 0, "snippet")?;
    let n = arg_int(args, 4, "snippet")?.clamp(1, 64) as u32;
    let (open, close, ellipsis) = (arg_text(args, 1), arg_text(args, 2), arg_text(args, 3));
    // The best window: most distinct phrases, then most matches.
    let mut best: Option<((usize, usize), usize, u32)> = None;
    for (c, v) in cols.iter().enumerate() {
        if want >= 0 && want as usize != c {
            continue;
        }
        let Some(text) = text_of(v) else { continue };
        let ntok = f.tok.tokens(&text).len() as u32;
        let mut starts: Vec<u32> = vec![0];
        for kept in found.kept() {
            for &(cc, p) in kept.get(rowid).map_or(&[][..], |v| v.as_slice()) {
                if cc as usize == c {
                    starts.push(p);
                }
            }
        }
        for s in starts {
            let mut phrases = 0;
            let mut hits = 0;
            for kept in found.kept() {
                let k = kept.get(rowid).map_or(0, |v| {
                    v.iter()
                        .filter(|&&(cc, p)| cc as usize == c && p >= s && p < s + n)
                        .count()
                });
                phrases += usize::from(k > 0);
                hits += k;
            }
            let start = if s + n > ntok {
                ntok.saturating_sub(n)
            } else {
                s
            };
            let score = (phrases, hits);
            if best.is_none_or(|(b, _, _)| score > b) {
                best = Some((score, c, start));
            }
        }
    }
    let Some((_, c, start)) = best else {
        return Ok(Value::Text(String::new()));
    };
    let Some(text) = text_of(&cols[c]) else {
        return Ok(Value::Null);
    };
    let toks = f.tok.tokens(&text);
    let end = (start + n).min(toks.len() as u32);
    let mut out = String::new();
    // A window at the column's start keeps the text before its first token, as SQLite's does.
    if start > 0 {
        out.push_str(&ellipsis);
    } else if let Some(first) = toks.first() {
        out.push_str(&text[..first.start]);
    }
    let marks = ranges(q, found, rowid, c as u32);
    for i in start..end {
        let t = &toks[i as usize];
        if i > start {
            out.push_str(&text[toks[i as usize - 1].end..t.start]);
        }
        if marks.iter().any(|&(s, _)| s == i)
            || (i == start && marks.iter().any(|&(s, e)| s < i && i < e))
        {
            out.push_str(&open);
        }
        out.push_str(&text[t.start..t.end]);
        if marks.iter().any(|&(_, e)| e == i + 1)
            || (i + 1 == end && marks.iter().any(|&(s, e)| s <= i && i + 1 < e))
        {
            out.push_str(&close);
        }
    }
    if (end as usize) < toks.len() {
        out.push_str(&ellipsis);
    } else if let Some(last) = toks.last() {
        out.push_str(&text[last.end..]);
    }
    Ok(Value::Text(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits() {
        assert!(within_edits(b"search", b"serch", 1));
        assert!(within_edits(b"search", b"saerch", 2));
        assert!(!within_edits(b"search", b"saerch", 1));
        assert!(within_edits("café".as_bytes(), b"cafe", 1));
        assert!(!within_edits(b"a", b"abcd", 2));
    }

    #[test]
    fn near_keeps_instances_within_reach() {
        let a = vec![(0, 0), (0, 20)];
        let b = vec![(0, 3)];
        let k = near(&[&a, &b], &[1, 1], 2);
        assert_eq!(k, vec![vec![(0, 0)], vec![(0, 3)]]);
        assert_eq!(near(&[&a, &b], &[1, 1], 1), vec![vec![], vec![]]);
        // Another column is out of reach.
        let c = vec![(1, 1)];
        assert_eq!(near(&[&a, &c], &[1, 1], 10), vec![vec![], vec![]]);
    }
}
