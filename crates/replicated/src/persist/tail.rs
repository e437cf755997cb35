//! The tail: small pending records kept in the store's root bytes (layout 5), which a commit
//! writes anyway, rather than in the log tree, until they reach [`TAIL_BYTES`]; then they
//! move to the log, one value per run ([`super::save()`]).

use super::corrupt;
#[cfg(doc)]
use super::TAIL_BYTES;
use cairn_sql::Result;
use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{AuthorId, ChainKey, ScopeId};

/// Consecutive pending records of one chain in the tail: the chain's key, where the run lies
/// in the tail's bytes (its start, its count's varint, its records), the first seq and how many.
#[derive(Debug)]
pub(super) struct TailRun {
    pub(super) key: ChainKey,
    pub(super) start: usize,
    pub(super) n_at: usize,
    pub(super) records: usize,
    pub(super) first: u64,
    pub(super) n: u64,
}

impl TailRun {
    pub(super) fn contains(&self, key: &ChainKey, seq: u64) -> bool {
        (self.first..self.first + self.n).contains(&seq) && self.key == *key
    }
}

/// The tail as the root bytes hold it (runs one after the other: `author`, `scope`, `varint
/// first seq`, `varint n`, n x `bytes` record), kept encoded so that a commit appends its record
/// to the bytes it then hands the store, with no run encoded again; and where each run is.
#[derive(Debug, Default)]
pub(super) struct Tail {
    pub(super) buf: Vec<u8>,
    pub(super) runs: Vec<TailRun>,
}

pub(super) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

impl Tail {
    /// Reads the runs of `buf`.
    pub(super) fn parse(buf: Vec<u8>) -> Result<Tail> {
        let mut runs = Vec::new();
        let mut r = Reader::new(&buf);
        while !r.is_empty() {
            let start = r.pos();
            let author = AuthorId(r.array().map_err(|e| corrupt("pending tail", e))?);
            let scope = ScopeId::decode(&mut r).map_err(|e| corrupt("pending tail", e))?;
            let first = r.varint().map_err(|e| corrupt("pending tail", e))?;
            let n_at = r.pos();
            let n = r
                .count(1, u64::MAX)
                .map_err(|e| corrupt("pending tail", e))?;
            if n == 0 {
                return Err(corrupt("pending tail", "empty run"));
            }
            let records = r.pos();
            for _ in 0..n {
                r.bytes().map_err(|e| corrupt("pending tail", e))?;
            }
            runs.push(TailRun {
                key: (author, scope),
                start,
                n_at,
                records,
                first,
                n: n as u64,
            });
        }
        Ok(Tail { buf, runs })
    }

    pub(super) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Where run `i` ends.
    pub(super) fn end(&self, i: usize) -> usize {
        self.runs.get(i + 1).map_or(self.buf.len(), |r| r.start)
    }

    /// Each run: its key, its prefix (author, scope), first seq, count and records' bytes.
    pub(super) fn each(&self) -> impl Iterator<Item = (&ChainKey, &[u8], u64, u64, &[u8])> {
        self.runs.iter().enumerate().map(|(i, t)| {
            let prefix_end = t.n_at - varint_len(t.first);
            (
                &t.key,
                &self.buf[t.start..prefix_end],
                t.first,
                t.n,
                &self.buf[t.records..self.end(i)],
            )
        })
    }

    /// Appends a run of one record, `seq`, of the chain `key`.
    pub(super) fn push(&mut self, key: &ChainKey, seq: u64, rec: &[u8]) {
        let mut w = Writer {
            buf: std::mem::take(&mut self.buf),
        };
        let start = w.buf.len();
        // The chain's prefix (`chain_prefix`).
        w.raw(&key.0 .0);
        key.1.encode(&mut w);
        w.varint(seq);
        let n_at = w.buf.len();
        w.varint(1);
        let records = w.buf.len();
        w.bytes(rec);
        self.buf = w.buf;
        self.runs.push(TailRun {
            key: key.clone(),
            start,
            n_at,
            records,
            first: seq,
            n: 1,
        });
    }

    /// Appends a record to the last run (the next seq of its chain).
    pub(super) fn extend_last(&mut self, rec: &[u8]) {
        let t = self.runs.last_mut().expect("invariant: a run to extend");
        t.n += 1;
        if t.n < 0x80 && t.records == t.n_at + 1 {
            // A one-byte count, as nearly always.
            self.buf[t.n_at] = t.n as u8;
            let mut w = Writer {
                buf: std::mem::take(&mut self.buf),
            };
            w.bytes(rec);
            self.buf = w.buf;
            return;
        }
        // The count's varint, on the stack.
        let (mut n, mut v, mut len) = ([0u8; 10], t.n, 0);
        loop {
            n[len] = (v as u8 & 0x7f) | if v >= 0x80 { 0x80 } else { 0 };
            len += 1;
            v >>= 7;
            if v == 0 {
                break;
            }
        }
        let n = &n[..len];
        if len == t.records - t.n_at {
            self.buf[t.n_at..t.records].copy_from_slice(n);
        } else {
            self.buf.splice(t.n_at..t.records, n.iter().copied());
            t.records = t.n_at + len;
        }
        let mut w = Writer {
            buf: std::mem::take(&mut self.buf),
        };
        w.bytes(rec);
        self.buf = w.buf;
    }

    /// Encodes the runs again, `keep` saying for each (by key and first seq) from which of its
    /// seqs on it stays (a run with none left goes).
    pub(super) fn rebuild(&mut self, keep: impl Fn(&ChainKey) -> Option<u64>) -> Result<()> {
        let mut out = Tail {
            buf: Vec::with_capacity(self.buf.capacity()),
            runs: Vec::new(),
        };
        for (key, prefix, first, n, records) in self.each() {
            let Some(from) = keep(key) else {
                continue;
            };
            let mut r = Reader::new(records);
            let mut first = first;
            let mut n = n;
            while n > 0 && first < from {
                r.bytes().map_err(|e| corrupt("pending tail", e))?;
                first += 1;
                n -= 1;
            }
            if n == 0 {
                continue;
            }
            let rest = &records[r.pos()..];
            let mut w = Writer {
                buf: std::mem::take(&mut out.buf),
            };
            let start = w.buf.len();
            w.raw(prefix);
            w.varint(first);
            let n_at = w.buf.len();
            w.varint(n);
            let at = w.buf.len();
            w.raw(rest);
            out.buf = w.buf;
            out.runs.push(TailRun {
                key: key.clone(),
                start,
                n_at,
                records: at,
                first,
                n,
            });
        }
        *self = out;
        Ok(())
    }

    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.runs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::{chain_prefix, prefix_len};

    fn key(name: &str) -> ChainKey {
        let a = AuthorId([7; 32]);
        (a, ScopeId::new(a, name.as_bytes()))
    }

    /// The tail kept encoded reads back as it was written: runs appended and extended (past a
    /// one-byte count), dropped up to a seq and by chain, and parsed again from its bytes.
    #[test]
    fn the_encoded_tail_reads_back_after_every_change() {
        let (a, b) = (key("a"), key("b"));
        let rec = |seq: u64| vec![seq as u8; 1 + (seq % 5) as usize];
        let mut t = Tail::default();
        t.push(&a, 1, &rec(1));
        for seq in 2..=130 {
            t.extend_last(&rec(seq));
        }
        t.push(&b, 5, &rec(5));
        t.extend_last(&rec(6));
        let records = |t: &Tail| -> Vec<(String, u64, Vec<u8>)> {
            let mut out = Vec::new();
            for (k, prefix, first, n, recs) in t.each() {
                assert_eq!(prefix, chain_prefix(&k.0, &k.1));
                assert_eq!(prefix.len(), prefix_len(k));
                let mut r = Reader::new(recs);
                for i in 0..n {
                    let name = String::from_utf8(k.1.name.clone()).unwrap();
                    out.push((name, first + i, r.bytes().unwrap().to_vec()));
                }
                assert!(r.is_empty());
            }
            out
        };
        let want = |from_a: u64, b_too: bool| {
            let mut w: Vec<_> = (from_a..=130)
                .map(|s| ("a".to_string(), s, rec(s)))
                .collect();
            if b_too {
                w.extend((5..=6).map(|s| ("b".to_string(), s, rec(s))));
            }
            w
        };
        assert_eq!(records(&t), want(1, true));
        assert_eq!(records(&Tail::parse(t.buf.clone()).unwrap()), want(1, true));
        t.rebuild(|k| Some(if *k == a { 100 } else { 0 })).unwrap();
        assert_eq!(records(&t), want(100, true));
        assert_eq!(
            records(&Tail::parse(t.buf.clone()).unwrap()),
            want(100, true)
        );
        t.rebuild(|k| if *k == b { None } else { Some(0) }).unwrap();
        assert_eq!(records(&t), want(100, false));
        t.extend_last(&rec(131));
        let mut w = want(100, false);
        w.push(("a".to_string(), 131, rec(131)));
        assert_eq!(records(&Tail::parse(t.buf.clone()).unwrap()), w);
        t.rebuild(|_| Some(200)).unwrap();
        assert!(t.buf.is_empty() && t.runs.is_empty());
    }
}
