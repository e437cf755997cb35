//! A model-based test driver shared by the property test, the fuzz target and the replay of the
//! fuzz corpus: it decodes a byte string into operations (insert, update, insert-if-absent,
//! delete, get, range scan both ways, commit, rollback, reopen, check), runs them against a database over a
//! [`MemoryFile`] with small pages (so trees get deep fast) and against a `BTreeMap`, and compares
//! every result. Not part of the engine's API.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::db::{Db, Options, Tree, TreeKind, WriteTx};
use crate::file::MemoryFile;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

struct Bytes<'a>(&'a [u8], usize);
impl Bytes<'_> {
    fn next(&mut self) -> Option<u8> {
        let b = self.0.get(self.1).copied();
        self.1 += 1;
        b
    }
}

/// The sizes of keys and values a run uses, and its page size.
#[derive(Clone, Copy)]
struct Shape {
    page_size: usize,
    /// Bytes a key grows by per step (12 steps).
    key_step: usize,
    /// Bytes an overflow value grows by per step (6 steps from 600 bytes).
    big_step: usize,
}

/// Keys up to ~90 bytes, so 512-byte pages split after a handful of entries.
const SMALL: Shape = Shape {
    page_size: 512,
    key_step: 8,
    big_step: 900,
};

/// Keys up to 662 bytes (a two-byte key length from 128) and values past 8 KiB (a three-byte
/// value field), on 4 KiB pages.
const LONG: Shape = Shape {
    page_size: 4096,
    key_step: 60,
    big_step: 3000,
};

fn key(shape: Shape, b: u8, len: u8) -> Vec<u8> {
    // Few distinct keys, so updates and deletes hit.
    let mut k = vec![b'k', b / 4];
    k.extend(std::iter::repeat_n(b, (len % 12) as usize * shape.key_step));
    k
}

fn value(shape: Shape, b: u8, len: u8) -> Vec<u8> {
    let n = match len {
        250.. => 600 + (len as usize - 250) * shape.big_step, // overflow pages
        _ => len as usize % 100,
    };
    (0..n).map(|i| b.wrapping_add(i as u8)).collect()
}

fn bound(kind: u8, k: Vec<u8>) -> Bound<Vec<u8>> {
    match kind % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

const TREES: [&str; 2] = ["a", "b"];

/// Runs the operations `data` encodes; returns a description of the first difference from the
/// model (or of any error).
pub fn run(data: &[u8]) -> Result<(), String> {
    run_shaped(data, SMALL)
}

/// [`run`] on 4 KiB pages with keys up to 662 bytes and overflow values past 8 KiB: the leaf
/// cell's longer key lengths and value fields (`docs/file-format.md`).
pub fn run_long_keys(data: &[u8]) -> Result<(), String> {
    run_shaped(data, LONG)
}

fn run_shaped(data: &[u8], shape: Shape) -> Result<(), String> {
    let opts = Options {
        page_size: shape.page_size,
        cache_pages: 16,
        dirty_pages: 64,
        ..Options::default()
    };
    fn e(m: &str) -> impl Fn(crate::Error) -> String + '_ {
        move |x| format!("{m}: {x}")
    }
    let mut db = Db::create(MemoryFile::new(), opts.clone()).map_err(e("create"))?;
    {
        let mut tx = db.begin_write().map_err(e("begin"))?;
        for t in TREES {
            tx.create_tree(t, TreeKind::Table)
                .map_err(e("create_tree"))?;
        }
        tx.commit().map_err(e("commit"))?;
    }
    let mut committed: [Map; 2] = Default::default();
    let mut work = committed.clone();
    let mut tx: Option<(WriteTx<MemoryFile>, [Tree; 2])> = None;
    let mut d = Bytes(data, 0);
    let mut step = 0;
    while let Some(op) = d.next() {
        step += 1;
        let ti = (op >> 7) as usize;
        let a = d.next().unwrap_or(0);
        let b = d.next().unwrap_or(0);
        if tx.is_none() && op % 16 < 9 {
            let mut t = db.begin_write().map_err(e("begin"))?;
            let h = [
                t.open_tree("a").map_err(e("open"))?,
                t.open_tree("b").map_err(e("open"))?,
            ];
            tx = Some((t, h));
        }
        let ctx = |what: &str| format!("step {step} ({what})");
        match op % 16 {
            3 => {
                let (t, h) = tx.as_mut().expect("open above");
                let (k, v) = (key(shape, a, b), value(shape, a ^ op, b));
                let mut got = false;
                t.insert_new(h[ti], &k, &v, &mut got)
                    .map_err(e(&ctx("insert_new")))?;
                let want = !work[ti].contains_key(&k);
                if want {
                    work[ti].insert(k, v);
                }
                if got != want {
                    return Err(format!(
                        "{}: insert_new said inserted={got}, model {want}",
                        ctx("insert_new")
                    ));
                }
            }
            0..=2 => {
                let (t, h) = tx.as_mut().expect("open above");
                let (k, v) = (key(shape, a, b), value(shape, a ^ op, b));
                let got = t.insert(h[ti], &k, &v).map_err(e(&ctx("insert")))?;
                let want = work[ti].insert(k, v).is_some();
                if got != want {
                    return Err(format!(
                        "{}: insert said existed={got}, model {want}",
                        ctx("insert")
                    ));
                }
            }
            5 => {
                let (t, h) = tx.as_mut().expect("open above");
                let k = key(shape, a, b);
                let (mut old, mut removed) = (vec![7u8], false);
                t.remove_appending(h[ti], &k, &mut old, &mut removed)
                    .map_err(e(&ctx("remove_appending")))?;
                let want = work[ti].remove(&k);
                let mut want_old = vec![7u8];
                want_old.extend(want.iter().flatten());
                if removed != want.is_some() || old != want_old {
                    return Err(format!(
                        "{}: remove_appending said {removed} with {} bytes, model {:?}",
                        ctx("remove_appending"),
                        old.len(),
                        want.map(|v| v.len())
                    ));
                }
            }
            4 => {
                let (t, h) = tx.as_mut().expect("open above");
                let k = key(shape, a, b);
                let got = t.remove(h[ti], &k).map_err(e(&ctx("remove")))?;
                let want = work[ti].remove(&k).is_some();
                if got != want {
                    return Err(format!(
                        "{}: remove said {got}, model {want}",
                        ctx("remove")
                    ));
                }
            }
            6 => {
                let (t, h) = tx.as_mut().expect("open above");
                let k = key(shape, a, b);
                let got = t.get(h[ti], &k).map_err(e(&ctx("get")))?;
                if got.as_ref() != work[ti].get(&k) {
                    return Err(format!("{}: get differs", ctx("get")));
                }
                if t.len(h[ti]).map_err(e("len"))? != work[ti].len() as u64 {
                    return Err(format!("{}: len differs", ctx("len")));
                }
            }
            7 | 8 => {
                let (t, h) = tx.as_mut().expect("open above");
                let c = d.next().unwrap_or(0);
                let (lo, hi) = (bound(b, key(shape, a, 0)), bound(b / 3, key(shape, c, 0)));
                let rev = op % 16 == 8;
                let mut r = t
                    .range(h[ti], as_ref(&lo), as_ref(&hi), rev)
                    .map_err(e("range"))?;
                let got = r.collect_all().map_err(e(&ctx("range")))?;
                let valid = match (&lo, &hi) {
                    (
                        Bound::Included(l) | Bound::Excluded(l),
                        Bound::Included(h) | Bound::Excluded(h),
                    ) => {
                        l < h
                            || (l == h
                                && matches!((&lo, &hi), (Bound::Included(_), Bound::Included(_))))
                    }
                    _ => true,
                };
                let mut want: Vec<(Vec<u8>, Vec<u8>)> = if valid {
                    work[ti]
                        .range((lo.clone(), hi.clone()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                if rev {
                    want.reverse();
                }
                if got != want {
                    return Err(format!(
                        "{}: range {lo:?}..{hi:?} rev={rev}: {} entries, model {}",
                        ctx("range"),
                        got.len(),
                        want.len()
                    ));
                }
            }
            9..=11 => {
                if let Some((t, _)) = tx.take() {
                    t.commit().map_err(e(&ctx("commit")))?;
                    committed = work.clone();
                }
            }
            12 => {
                if let Some((t, _)) = tx.take() {
                    t.rollback();
                    work = committed.clone();
                }
            }
            13 | 14 => {
                if let Some((t, _)) = tx.take() {
                    t.rollback();
                    work = committed.clone();
                }
                let f = db.into_file().map_err(e("into_file"))?;
                db = Db::open(f, opts.clone()).map_err(e(&ctx("reopen")))?;
                let r = db.begin_read().map_err(e("begin_read"))?;
                compare_all(&r, &committed).map_err(|m| format!("{}: {m}", ctx("reopen")))?;
            }
            _ => {
                if tx.is_none() {
                    let rep = db.check().map_err(e("check"))?;
                    if !rep.is_ok() {
                        return Err(format!("{}: check found\n{rep}", ctx("check")));
                    }
                }
            }
        }
    }
    if let Some((t, _)) = tx.take() {
        t.commit().map_err(e("final commit"))?;
        committed = work;
    }
    let rep = db.check().map_err(e("check"))?;
    if !rep.is_ok() {
        return Err(format!("final check found\n{rep}"));
    }
    let r = db.begin_read().map_err(e("begin_read"))?;
    compare_all(&r, &committed)
}

fn compare_all(r: &crate::db::ReadTx<MemoryFile>, model: &[Map; 2]) -> Result<(), String> {
    for (i, name) in TREES.iter().enumerate() {
        let t = r.open_tree(name).map_err(|e| e.to_string())?;
        let got = r
            .range(t, Bound::Unbounded, Bound::Unbounded, false)
            .and_then(|mut x| x.collect_all())
            .map_err(|e| e.to_string())?;
        let want: Vec<_> = model[i]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if got != want {
            return Err(format!(
                "tree {name}: {} entries, model {}",
                got.len(),
                want.len()
            ));
        }
        let mut back = r
            .range(t, Bound::Unbounded, Bound::Unbounded, true)
            .and_then(|mut x| x.collect_all())
            .map_err(|e| e.to_string())?;
        back.reverse();
        if back != want {
            return Err(format!("tree {name}: reverse scan differs"));
        }
    }
    Ok(())
}
