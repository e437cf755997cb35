//! Full-text search: `CREATE VIRTUAL TABLE t USING fts5(...)`, with FTS5's surface (MATCH,
//! the table-valued form, `rank`, `bm25()`, `highlight()`, `snippet()`).
//!
//! An fts5 table is an index over a content table's rows. Without `content=`, that table is
//! its own: an ordinary table of the same name whose columns are the declared ones and a last
//! `rowid INTEGER PRIMARY KEY`. With `content='x'` it is `x`, and `content_rowid` names x's
//! INTEGER PRIMARY KEY. Either way the index is kept by the writer itself (`Table::fts`, the
//! hook `index_row` called wherever a row or its index entries are written or deleted), so
//! it commits with the rows, and rows applied from peers or removed by a purge, which go
//! through the same writer, are indexed and unindexed like local ones. SQLite's triggers on
//! an external content table are therefore not needed (and cairn has none).
//!
//! The index is two B+trees in the database file, next to each other:
//! - postings (`Fts::tree`): key `term 0x00 row key` (the content row's key in its tree, so
//!   rows come in key order, which is row id order), value the
//!   term's positions in that row: per column holding it, varints `column, count, deltas`.
//! - documents (`tree + 1`): `'d' row key` to the row's token count per column; `'t' term` to
//!   the number of rows holding the term (the term list that typo search walks); `'s'` to
//!   the row count and the token count per column (bm25's averages).
//!
//! A query (`search`) is parsed by `query.rs`, each phrase's instances are found from the
//! postings, NEAR groups keep the instances that lie within reach, the boolean tree gives
//! the rows, and `rank.rs` scores them and builds `highlight()` and `snippet()`.

mod expected;
mod porter;
pub(crate) mod query;
mod rank;
pub(crate) mod rewrite;
pub(crate) mod tokenize;

use crate::error::{Error, Result};
use crate::parse::ast;
use crate::schema::{quote_ident, Catalog, Key, Table};
use crate::storage::{Storage, TreeId};
use crate::Value;
use cairn_store::hash::FastMap;
use cairn_value::codec::decode_record;
use query::{Node, Query};
use std::ops::Bound;
use std::rc::Rc;
use tokenize::Tokenizer;

/// An fts5 table's definition, resolved against its content table.
#[derive(Debug, Clone, PartialEq)]
pub struct Fts {
    pub name: String,
    pub columns: Vec<String>,
    /// Columns declared UNINDEXED, a bit each: stored, not searched.
    pub unindexed: u64,
    /// `content='x'`: the content table; None: its own.
    pub content: Option<String>,
    pub content_rowid: Option<String>,
    pub tokenize: Option<String>,
    pub tok: Tokenizer,
    /// The content table's positions of the columns, and of the row id.
    pub src: Vec<usize>,
    pub rowid_col: usize,
    /// Whether the content table is keyed by its row id (else by the `rowid_col` column).
    pub int_key: bool,
    /// The content table's tree (None while it does not exist).
    pub content_tree: Option<TreeId>,
    /// The postings tree; the documents tree is the next one.
    pub tree: TreeId,
}

impl Fts {
    fn docs(&self) -> TreeId {
        self.tree + 1
    }

    /// The name of the table that holds the rows.
    pub fn content_table(&self) -> &str {
        self.content.as_deref().unwrap_or(&self.name)
    }

    /// SQL that recreates the definition (kept in the catalog).
    pub fn sql(&self) -> String {
        let mut parts: Vec<String> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut s = quote_ident(c);
                if self.unindexed & (1 << i) != 0 {
                    s.push_str(" UNINDEXED");
                }
                s
            })
            .collect();
        let opt = |k: &str, v: &Option<String>, parts: &mut Vec<String>| {
            if let Some(v) = v {
                parts.push(format!(
                    "{k}={}",
                    crate::sql_literal(&Value::Text(v.clone()))
                ));
            }
        };
        opt("content", &self.content, &mut parts);
        opt("content_rowid", &self.content_rowid, &mut parts);
        opt("tokenize", &self.tokenize, &mut parts);
        format!(
            "CREATE VIRTUAL TABLE {} USING fts5({})",
            quote_ident(&self.name),
            parts.join(", ")
        )
    }
}

/// Reads the arguments of `USING fts5(...)`: columns (`name [UNINDEXED]`) and options
/// (`key = value`).
pub fn define(cv: &ast::CreateVirtual, tree: TreeId) -> Result<Fts> {
    if !cv.module.eq_ignore_ascii_case("fts5") {
        return Err(Error::Unsupported(format!("no such module: {}", cv.module)));
    }
    let mut f = Fts {
        name: cv.name.clone(),
        columns: vec![],
        unindexed: 0,
        content: None,
        content_rowid: None,
        tokenize: None,
        tok: Tokenizer::default(),
        src: vec![],
        rowid_col: 0,
        int_key: true,
        content_tree: None,
        tree,
    };
    for arg in &cv.args {
        match arg.as_slice() {
            [k, eq, v] if eq == "=" => {
                let v = Some(v.clone());
                match k.to_ascii_lowercase().as_str() {
                    "content" => f.content = v.filter(|v| !v.is_empty()),
                    "content_rowid" => f.content_rowid = v,
                    "tokenize" => f.tokenize = v,
                    "prefix" | "detail" | "columnsize" => {}
                    _ => return Err(Error::Invalid(format!("unrecognized option: \"{k}\""))),
                }
            }
            [c] | [c, _] => {
                if let [_, u] = arg.as_slice() {
                    if !u.eq_ignore_ascii_case("unindexed") {
                        return Err(Error::Invalid(format!("unrecognized column option: {u}")));
                    }
                    f.unindexed |= 1 << f.columns.len().min(63);
                }
                let lc = c.to_ascii_lowercase();
                if lc == "rank" || lc == "rowid" || lc == f.name.to_ascii_lowercase() {
                    return Err(Error::Invalid(format!("reserved fts5 column name: {c}")));
                }
                if f.columns.iter().any(|x| x.eq_ignore_ascii_case(c)) {
                    return Err(Error::AlreadyExists(format!("column {c}")));
                }
                f.columns.push(c.clone());
            }
            _ => return Err(Error::Invalid("parse error in fts5 arguments".into())),
        }
    }
    if f.columns.is_empty() || f.columns.len() > 64 {
        return Err(Error::Invalid("an fts5 table takes 1 to 64 columns".into()));
    }
    if f.content.is_none() && f.content_rowid.is_some() {
        return Err(Error::Invalid(
            "content_rowid needs an external content table".into(),
        ));
    }
    f.tok = Tokenizer::parse(f.tokenize.as_deref().unwrap_or(""))?;
    Ok(f)
}

/// The own content table of `f`: its columns, then the row id.
pub fn own_content_sql(f: &Fts) -> String {
    let mut s = format!("CREATE TABLE {} (", quote_ident(&f.name));
    for c in &f.columns {
        s.push_str(&quote_ident(c));
        s.push_str(", ");
    }
    s.push_str("rowid INTEGER PRIMARY KEY)");
    s
}

/// Resolves `f` against its content table (when it exists).
fn resolve(f: &Fts, t: Option<&Table>) -> Result<Fts> {
    let mut f = f.clone();
    f.content_tree = None;
    let Some(t) = t else { return Ok(f) };
    f.src = t.columns_named(&f.columns)?;
    // Row ids come from the key: an integer row id, or a single-column primary key (a
    // replicated table's, unique on every device), which the fts table's `rowid` then shows.
    let (key, int_key) = match &t.key {
        Key::Rowid(Some(c)) => (*c, true),
        Key::Columns(c) if c.len() == 1 => (c[0], false),
        _ => {
            return Err(Error::Invalid(format!(
                "the content table {} needs an INTEGER PRIMARY KEY or a one-column primary key",
                t.name
            )))
        }
    };
    if let Some(c) = &f.content_rowid {
        if t.column(c) != Some(key) {
            return Err(Error::Invalid(format!(
                "content_rowid of {} must be the primary key of {}",
                f.name, t.name
            )));
        }
    }
    f.rowid_col = key;
    f.int_key = int_key;
    f.content_tree = Some(t.tree);
    Ok(f)
}

impl Catalog {
    pub fn fts(&self, name: &str) -> Option<&Rc<Fts>> {
        self.fts.iter().find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// Resolves every fts5 table against its content table and gives each table the list
    /// of indexes its writes must keep (`Table::fts`).
    pub fn attach_fts(&mut self) -> Result<()> {
        let mut resolved = Vec::with_capacity(self.fts.len());
        for f in &self.fts {
            let t = self.tables.get(&f.content_table().to_ascii_lowercase());
            resolved.push(Rc::new(resolve(f, t.map(|t| &**t))?));
        }
        self.fts = resolved;
        let names: Vec<String> = self
            .tables
            .values()
            .map(|t| t.name.to_ascii_lowercase())
            .collect();
        for n in names {
            let Some(t) = self.tables.get(&n) else {
                continue;
            };
            let hooks: Vec<Rc<Fts>> = self
                .fts
                .iter()
                .filter(|f| f.content_table().eq_ignore_ascii_case(&t.name))
                .cloned()
                .collect();
            if hooks != t.fts {
                let t = Table {
                    fts: hooks,
                    ..(**t).clone()
                };
                self.tables.insert(n, Rc::new(t));
            }
        }
        Ok(())
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], i: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let x = *b.get(*i).ok_or_else(corrupt)?;
        *i += 1;
        v |= u64::from(x & 0x7f) << shift.min(63);
        if x & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err(corrupt());
        }
    }
}

fn corrupt() -> Error {
    Error::Storage(cairn_store::Error::Corrupt(
        "malformed full-text index".into(),
    ))
}

/// A content row, by its key in the content table's tree.
pub type Doc = Vec<u8>;

fn doc_key(r: &[u8]) -> Vec<u8> {
    let mut k = vec![b'd'];
    k.extend_from_slice(r);
    k
}

fn find(rows: &[Doc], r: &[u8]) -> bool {
    rows.binary_search_by(|x| x.as_slice().cmp(r)).is_ok()
}

/// A value as the text FTS5 tokenizes (NULL and BLOBs have none here).
fn text_of(v: &Value) -> Option<std::borrow::Cow<'_, str>> {
    match v {
        Value::Text(s) => Some(s.as_str().into()),
        Value::Integer(i) => Some(i.to_string().into()),
        Value::Real(r) => Some(crate::types::fmt_real(*r).into()),
        _ => None,
    }
}

/// Row count and token count per column.
fn load_stats(store: &dyn Storage, f: &Fts) -> Result<(u64, Vec<u64>)> {
    let mut totals = vec![0; f.columns.len()];
    let Some(v) = store.get(f.docs(), b"s")? else {
        return Ok((0, totals));
    };
    let mut i = 0;
    let n = get_varint(&v, &mut i)?;
    for t in &mut totals {
        *t = get_varint(&v, &mut i)?;
    }
    Ok((n, totals))
}

/// Adds (`add`) or removes the content row `row` (of the content table's columns), stored
/// at key `rowid`, to or from the index of `f`.
// Out of line: its one caller is a common function, where inlined it would sit in cairn.wasm.
#[inline(never)]
pub fn index_row(
    store: &mut dyn Storage,
    f: &Fts,
    rowid: &[u8],
    row: &[Value],
    add: bool,
) -> Result<()> {
    // The row's terms in the order first met, each with its hits, found through a map of the
    // engine's common layout (bytes to `usize`): a `BTreeMap<String, _>` would be a copy of
    // std's B-tree code of its own. The order the postings are written in changes nothing
    // of what they hold.
    let mut at: FastMap<Vec<u8>, usize> = FastMap::default();
    let mut terms: Vec<(String, Vec<(u32, u32)>)> = Vec::new();
    let mut sizes = vec![0u64; f.columns.len()];
    for (c, &s) in f.src.iter().enumerate() {
        if f.unindexed & (1 << c) != 0 {
            continue;
        }
        let Some(text) = row.get(s).and_then(text_of) else {
            continue;
        };
        let mut pos = 0u32;
        f.tok.each(&text, &mut |t| {
            let i = match at.get(t.term.as_bytes()) {
                Some(&i) => i,
                None => {
                    at.insert(t.term.as_bytes().to_vec(), terms.len());
                    terms.push((t.term, Vec::new()));
                    terms.len() - 1
                }
            };
            if let Some((_, hits)) = terms.get_mut(i) {
                hits.push((c as u32, pos));
            }
            pos += 1;
        });
        sizes[c] = u64::from(pos);
    }
    let (mut n, mut totals) = load_stats(store, f)?;
    if add {
        n += 1;
        for (t, s) in totals.iter_mut().zip(&sizes) {
            *t += s;
        }
    } else {
        n = n.saturating_sub(1);
        for (t, s) in totals.iter_mut().zip(&sizes) {
            *t = t.saturating_sub(*s);
        }
    }
    let mut buf = Vec::new();
    put_varint(&mut buf, n);
    for t in &totals {
        put_varint(&mut buf, *t);
    }
    store.put(f.docs(), b"s", &buf)?;
    if add {
        buf.clear();
        for s in &sizes {
            put_varint(&mut buf, *s);
        }
        store.put(f.docs(), &doc_key(rowid), &buf)?;
    } else {
        store.delete(f.docs(), &doc_key(rowid))?;
    }
    let mut key = Vec::new();
    for (term, hits) in terms {
        key.clear();
        key.extend_from_slice(term.as_bytes());
        key.push(0);
        key.extend_from_slice(rowid);
        let mut tkey = vec![b't'];
        tkey.extend_from_slice(term.as_bytes());
        let count = match store.get(f.docs(), &tkey)? {
            Some(v) => get_varint(&v, &mut 0)?,
            None => 0,
        };
        if add {
            buf.clear();
            let mut i = 0;
            while i < hits.len() {
                let col = hits[i].0;
                let j = hits[i..]
                    .iter()
                    .position(|h| h.0 != col)
                    .map_or(hits.len(), |k| i + k);
                put_varint(&mut buf, u64::from(col));
                put_varint(&mut buf, (j - i) as u64);
                let mut last = 0;
                for h in &hits[i..j] {
                    put_varint(&mut buf, u64::from(h.1 - last));
                    last = h.1;
                }
                i = j;
            }
            store.put(f.tree, &key, &buf)?;
            buf.clear();
            put_varint(&mut buf, count + 1);
            store.put(f.docs(), &tkey, &buf)?;
        } else {
            store.delete(f.tree, &key)?;
            if count <= 1 {
                store.delete(f.docs(), &tkey)?;
            } else {
                buf.clear();
                put_varint(&mut buf, count - 1);
                store.put(f.docs(), &tkey, &buf)?;
            }
        }
    }
    Ok(())
}

/// Empties the index of `f` and indexes every row of its content table again (the
/// `'rebuild'` command).
pub fn rebuild(store: &mut dyn Storage, f: &Fts) -> Result<()> {
    for tree in [f.tree, f.docs()] {
        let mut keys = Vec::new();
        {
            let mut cur = store.scan(tree, Bound::Unbounded, Bound::Unbounded, false)?;
            while cur.next()? {
                keys.push(cur.key().to_vec());
            }
        }
        for k in keys {
            store.delete(tree, &k)?;
        }
    }
    let Some(ct) = f.content_tree else {
        return Ok(());
    };
    let mut rows = Vec::new();
    {
        let mut cur = store.scan(ct, Bound::Unbounded, Bound::Unbounded, false)?;
        while cur.next()? {
            rows.push((cur.key().to_vec(), decode_record(cur.value())?));
        }
    }
    for (k, r) in rows {
        index_row(store, f, &k, &r, true)?;
    }
    Ok(())
}

/// Problems found comparing the index of `f` with what indexing its content gives
/// (`Database::check`, the `'integrity-check'` command): empty when they agree. The index
/// expected is built beside the database (`expected::Expected`).
pub fn verify(store: &dyn Storage, f: &Fts) -> Result<Vec<String>> {
    let read = |store: &dyn Storage, tree: TreeId| -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut cur = store.scan(tree, Bound::Unbounded, Bound::Unbounded, false)?;
        while cur.next()? {
            out.push((cur.key().to_vec(), cur.value().to_vec()));
        }
        Ok(out)
    };
    let mut mem = expected::Expected::default();
    if let Some(ct) = f.content_tree {
        let mut cur = store.scan(ct, Bound::Unbounded, Bound::Unbounded, false)?;
        while cur.next()? {
            let row = decode_record(cur.value())?;
            index_row(&mut mem, f, cur.key(), &row, true)?;
        }
    }
    let mut problems = Vec::new();
    if !mem.same(f.tree, &read(store, f.tree)?) {
        problems.push(format!(
            "full-text index {}: its postings differ from its content's",
            f.name
        ));
    }
    if !mem.same(f.docs(), &read(store, f.docs())?) {
        problems.push(format!(
            "full-text index {}: its row sizes or term counts differ from its content's",
            f.name
        ));
    }
    Ok(problems)
}

/// Every row of `term` in the postings (or of each term it is a prefix of, or within its
/// edits): rowid to (column, position) pairs, sorted.
fn term_hits(store: &dyn Storage, f: &Fts, t: &query::QTerm) -> Result<Instances> {
    // One term's rows come in key order, each once, its hits in (column, position) order: a
    // run that needs no sort. Several terms' runs (a prefix's, a typo's) are merged.
    let mut runs: Vec<Vec<Row>> = Vec::new();
    let mut read_range = |lo: Vec<u8>, hi: Vec<u8>| {
        let mut cur = store.scan(f.tree, Bound::Included(&lo), Bound::Excluded(&hi), false)?;
        let mut list = Vec::new();
        let mut term: Vec<u8> = Vec::new();
        while cur.next()? {
            let k = cur.key();
            let z = k.iter().position(|&b| b == 0).ok_or_else(corrupt)?;
            if k[..z] != term[..] {
                if !list.is_empty() {
                    runs.push(std::mem::take(&mut list));
                }
                term.clear();
                term.extend_from_slice(&k[..z]);
            }
            let v = cur.value();
            let mut hits = Vec::new();
            let mut i = 0;
            while i < v.len() {
                let col = get_varint(v, &mut i)? as u32;
                let n = get_varint(v, &mut i)?;
                hits.reserve(n as usize);
                let mut pos = 0u32;
                for _ in 0..n {
                    pos += get_varint(v, &mut i)? as u32;
                    hits.push((col, pos));
                }
            }
            list.push((k[z + 1..].to_vec(), hits));
        }
        if !list.is_empty() {
            runs.push(list);
        }
        Ok::<(), Error>(())
    };
    let text = t.text.as_bytes();
    if t.typo > 0 {
        let mut terms = Vec::new();
        {
            let mut cur = store.scan(
                f.docs(),
                Bound::Included(b"t".as_slice()),
                Bound::Excluded(b"u".as_slice()),
                false,
            )?;
            while cur.next()? {
                let term = &cur.key()[1..];
                if rank::within_edits(term, text, t.typo) {
                    terms.push(term.to_vec());
                }
            }
        }
        for term in terms {
            let mut lo = term.clone();
            lo.push(0);
            let mut hi = term;
            hi.push(1);
            read_range(lo, hi)?;
        }
    } else if t.prefix {
        let mut hi = text.to_vec();
        hi.push(0xff);
        read_range(text.to_vec(), hi)?;
    } else {
        let mut lo = text.to_vec();
        lo.push(0);
        let mut hi = text.to_vec();
        hi.push(1);
        read_range(lo, hi)?;
    }
    // Merged two by two, as a merge sort's rounds: each row moves once a round, and there are
    // log2(runs) rounds.
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut it = runs.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => merge_runs(a, b),
                None => a,
            });
        }
        runs = next;
    }
    Ok(Instances(runs.pop().unwrap_or_default()))
}

/// A row's hits: (column, position) pairs, sorted.
type Row = (Doc, Vec<(u32, u32)>);

/// Two runs of rows in rowid order as one, the hits of a row in both joined.
fn merge_runs(a: Vec<Row>, b: Vec<Row>) -> Vec<Row> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    let (mut x, mut y) = (a.next(), b.next());
    loop {
        match (x.take(), y.take()) {
            (Some(p), Some(q)) => match p.0.cmp(&q.0) {
                std::cmp::Ordering::Less => {
                    out.push(p);
                    (x, y) = (a.next(), Some(q));
                }
                std::cmp::Ordering::Greater => {
                    out.push(q);
                    (x, y) = (Some(p), b.next());
                }
                std::cmp::Ordering::Equal => {
                    let (rowid, mut hits) = p;
                    let mut more = q.1;
                    hits.append(&mut more);
                    cairn_store::sort::sort(&mut hits);
                    hits.dedup();
                    out.push((rowid, hits));
                    (x, y) = (a.next(), b.next());
                }
            },
            (Some(p), None) => {
                out.push(p);
                out.extend(a);
                break;
            }
            (None, Some(q)) => {
                out.push(q);
                out.extend(b);
                break;
            }
            (None, None) => break,
        }
    }
    out
}

/// A phrase's instances: rowid to (column, first position), within its columns, in rowid
/// order. A sorted list rather than a `BTreeMap<Doc, _>`, which would be a copy of std's
/// B-tree code of its own: the rows of a term come from the postings in rowid order, so each
/// is pushed at the end, and several terms' are merged as sorted runs (`term_hits`).
#[derive(Clone, Default)]
pub struct Instances(Vec<Row>);

impl Instances {
    fn new() -> Self {
        Instances(Vec::new())
    }

    fn at(&self, rowid: &[u8]) -> std::result::Result<usize, usize> {
        self.0.binary_search_by(|e| e.0.as_slice().cmp(rowid))
    }

    pub fn get(&self, rowid: &[u8]) -> Option<&Vec<(u32, u32)>> {
        self.at(rowid)
            .ok()
            .and_then(|i| self.0.get(i))
            .map(|e| &e.1)
    }

    fn contains_key(&self, rowid: &[u8]) -> bool {
        self.at(rowid).is_ok()
    }

    /// Sets the instances of `rowid`: a push when it is past the last row, as it is when
    /// rows are added in order.
    fn insert(&mut self, rowid: Doc, hits: Vec<(u32, u32)>) {
        if self.0.last().is_none_or(|l| l.0 < rowid) {
            self.0.push((rowid, hits));
            return;
        }
        match self.at(&rowid) {
            Ok(i) => self.0[i].1 = hits,
            Err(i) => self.0.insert(i, (rowid, hits)),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn keys(&self) -> impl Iterator<Item = &Doc> {
        self.0.iter().map(|e| &e.0)
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Vec<(u32, u32)>> {
        self.0.iter_mut().map(|e| &mut e.1)
    }

    fn retain(&mut self, mut keep: impl FnMut(&Doc, &mut Vec<(u32, u32)>) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
    }
}

fn phrase_instances(store: &dyn Storage, f: &Fts, p: &query::Phrase) -> Result<Instances> {
    let mut out = Instances::new();
    let Some(first) = p.terms.first() else {
        return Ok(out);
    };
    let allowed = p.cols & !f.unindexed;
    let mut lists = vec![term_hits(store, f, first)?];
    if p.terms.len() == 1 {
        // One term: its hits are the instances, narrowed in place rather than copied.
        let mut only = lists.pop().unwrap_or_default();
        only.retain(|_, hits| {
            hits.retain(|&(c, pos)| c < 64 && allowed & (1 << c) != 0 && (!p.first || pos == 0));
            !hits.is_empty()
        });
        return Ok(only);
    }
    for t in &p.terms[1..] {
        lists.push(term_hits(store, f, t)?);
    }
    for (rowid, hits) in &lists[0].0 {
        let rest: Option<Vec<&Vec<(u32, u32)>>> = lists[1..].iter().map(|l| l.get(rowid)).collect();
        let Some(rest) = rest else { continue };
        let inst: Vec<(u32, u32)> = hits
            .iter()
            .filter(|&&(c, pos)| {
                c < 64
                    && allowed & (1 << c) != 0
                    && (!p.first || pos == 0)
                    && rest
                        .iter()
                        .enumerate()
                        .all(|(k, l)| l.binary_search(&(c, pos + k as u32 + 1)).is_ok())
            })
            .copied()
            .collect();
        if !inst.is_empty() {
            out.insert(rowid.clone(), inst);
        }
    }
    Ok(out)
}

/// What a search found: the rows, and per row and phrase the instances that count.
pub struct Found {
    pub rows: Vec<Doc>,
    /// Per phrase: its instances in every row (before NEAR), and those a NEAR group kept
    /// (`Found::kept`; empty when they are all of them, as for a query of one phrase).
    pub raw: Vec<Instances>,
    pub kept: Vec<Instances>,
    /// Rows where a `word~N` term matched only other words (ranked after the exact ones).
    pub fuzzy: Vec<Doc>,
}

impl Found {
    /// The instances of phrase `i` that count (bm25, highlight, snippet).
    pub fn kept(&self) -> &[Instances] {
        if self.kept.is_empty() {
            &self.raw
        } else {
            &self.kept
        }
    }
}

/// Runs `q` over the index of `f`.
pub fn search(store: &dyn Storage, f: &Fts, q: &Query) -> Result<Found> {
    let mut raw = Vec::with_capacity(q.phrases.len());
    for p in &q.phrases {
        raw.push(phrase_instances(store, f, p)?);
    }
    let mut kept = Vec::new();
    let rows = match &q.root {
        // One phrase: its rows, every instance counting.
        Some(Node::Near(group, _)) if group.len() == 1 => raw[group[0]].keys().cloned().collect(),
        Some(root) => {
            kept = vec![Instances::new(); raw.len()];
            let r = eval(root, q, &raw, &mut kept);
            let rows = r.rows().to_vec();
            restrict(&r, &rows, &raw, &mut kept);
            rows
        }
        None => vec![],
    };
    let mut fuzzy = Vec::new();
    for t in q
        .phrases
        .iter()
        .flat_map(|p| &p.terms)
        .filter(|t| t.typo > 0)
    {
        let exact = query::QTerm {
            typo: 0,
            ..t.clone()
        };
        let exact = term_hits(store, f, &exact)?;
        fuzzy.extend(rows.iter().filter(|r| !exact.contains_key(r)).cloned());
    }
    cairn_store::sort::sort(&mut fuzzy);
    fuzzy.dedup();
    Ok(Found {
        rows,
        raw,
        kept,
        fuzzy,
    })
}

/// A node's rows, with its children's (the NEAR group's phrases at a leaf).
enum Eval<'a> {
    Leaf(&'a [usize], Vec<Doc>),
    Inner(Box<Eval<'a>>, Box<Eval<'a>>, Vec<Doc>),
}

impl Eval<'_> {
    fn rows(&self) -> &[Doc] {
        match self {
            Eval::Leaf(_, r) | Eval::Inner(_, _, r) => r,
        }
    }
}

fn intersect(a: &[Doc], b: &[Doc]) -> Vec<Doc> {
    a.iter().filter(|r| find(b, r)).cloned().collect()
}

/// A phrase's instances count in a row only where every node above it matches that row
/// (FTS5 reads a phrase's positions only while its node sits on the row the query is on):
/// the other branch of an OR, the failed side of an AND, add nothing to bm25 or highlight.
/// A lone phrase's `kept` is filled here, from `raw`, for those rows only; a NEAR group's
/// was filled by `near_rows`.
fn restrict(e: &Eval, allowed: &[Doc], raw: &[Instances], kept: &mut [Instances]) {
    let here = intersect(allowed, e.rows());
    match e {
        Eval::Leaf([p], _) => {
            // `here` is in rowid order, as the instances are kept.
            kept[*p] = Instances(
                here.into_iter()
                    .filter_map(|r| raw[*p].get(&r).map(|i| (r, i.clone())))
                    .collect(),
            );
        }
        Eval::Leaf(group, _) => {
            for &p in group.iter() {
                kept[p].retain(|r, _| find(&here, r));
            }
        }
        Eval::Inner(a, b, _) => {
            restrict(a, &here, raw, kept);
            restrict(b, &here, raw, kept);
        }
    }
}

/// The rows of `n`, ascending, with its children's; NEAR groups narrow `kept` to the
/// instances within reach.
fn eval<'a>(n: &'a Node, q: &Query, raw: &[Instances], kept: &mut [Instances]) -> Eval<'a> {
    let (a, b) = match n {
        Node::Near(group, dist) => return Eval::Leaf(group, near_rows(group, *dist, q, raw, kept)),
        Node::And(a, b) | Node::Or(a, b) | Node::Not(a, b) => (a, b),
    };
    let (a, b) = (eval(a, q, raw, kept), eval(b, q, raw, kept));
    let rows = match n {
        Node::And(..) => intersect(a.rows(), b.rows()),
        Node::Or(..) => {
            let mut v = a.rows().to_vec();
            v.extend_from_slice(b.rows());
            cairn_store::sort::sort(&mut v);
            v.dedup();
            v
        }
        _ => a
            .rows()
            .iter()
            .filter(|r| !find(b.rows(), r))
            .cloned()
            .collect(),
    };
    Eval::Inner(Box::new(a), Box::new(b), rows)
}

/// The rows of a NEAR group (of one phrase: the phrase's rows).
fn near_rows(
    group: &[usize],
    dist: u32,
    q: &Query,
    raw: &[Instances],
    kept: &mut [Instances],
) -> Vec<Doc> {
    match group {
        [one] => raw[*one].keys().cloned().collect(),
        group => {
            let mut rows = Vec::new();
            let candidates: Vec<Doc> = raw[group[0]].keys().cloned().collect();
            for k in group {
                for i in kept[*k].values_mut() {
                    i.clear();
                }
            }
            for rowid in candidates {
                let lists: Option<Vec<&Vec<(u32, u32)>>> =
                    group.iter().map(|&p| raw[p].get(&rowid)).collect();
                let Some(lists) = lists else { continue };
                let lens: Vec<u32> = group
                    .iter()
                    .map(|&p| q.phrases[p].terms.len() as u32)
                    .collect();
                let keep = rank::near(&lists, &lens, dist);
                if keep.iter().all(|k| !k.is_empty()) {
                    for (j, k) in keep.into_iter().enumerate() {
                        kept[group[j]].insert(rowid.clone(), k);
                    }
                    rows.push(rowid);
                }
            }
            for k in group {
                kept[*k].retain(|_, v| !v.is_empty());
            }
            rows
        }
    }
}

/// An auxiliary function call on a match: `bm25(t, w...)`, `highlight(t, col, open, close)`,
/// `snippet(t, col, open, close, ellipsis, tokens)`, with its arguments after the table.
#[derive(Debug, Clone, PartialEq)]
pub struct AuxCall<'a> {
    pub kind: &'a str,
    pub args: Vec<Value>,
}

/// The rows of the fts5 table `f` for a query of it: the columns, `rank`, `rowid`, then a
/// value per auxiliary call. `query` is one MATCH (`(None, q)`; NULL reads every row,
/// unranked) or the branches of an OR (`rewrite::branches`): each gives its rows not given
/// already, a MATCH's ranked by its own query, a row id comparison's (`Some(op)`) with a
/// NULL rank, as SQLite's union of index scans does. Without `content` the columns are left
/// NULL for a match (the query reads none of them) and the content table is not read.
// Out of line: its one caller is a common function, where inlined it would sit in cairn.wasm.
#[inline(never)]
pub fn rows(
    store: &dyn Storage,
    f: &Fts,
    query: &[(Option<&str>, Value)],
    aux: &[AuxCall],
    content: bool,
) -> Result<Vec<Vec<Value>>> {
    // The content table is needed for a full scan and for its columns; a query of row ids
    // and ranks is answered from the index alone (as SQLite does when the table is gone).
    let ct = f
        .content_tree
        .ok_or_else(|| Error::UnknownTable(f.content_table().to_string()));
    let width = f.columns.len() + 2 + aux.len();
    let mut out = Vec::new();
    // The row id: the key of a row-id table, else the (single) key column's value.
    let row_of = |key: &[u8], rec: Option<&[u8]>| -> Result<Vec<Value>> {
        let rec = match rec {
            Some(r) => decode_record(r)?,
            None => vec![],
        };
        let mut row = Vec::with_capacity(width);
        for &s in &f.src {
            row.push(rec.get(s).cloned().unwrap_or(Value::Null));
        }
        row.push(Value::Null);
        row.push(if f.int_key {
            cairn_value::codec::decode_key(key)?
                .into_iter()
                .next()
                .unwrap_or(Value::Null)
        } else {
            rec.get(f.rowid_col).cloned().unwrap_or(Value::Null)
        });
        Ok(row)
    };
    if let [] | [(None, Value::Null)] = query {
        let mut cur = store.scan(ct?, Bound::Unbounded, Bound::Unbounded, false)?;
        while cur.next()? {
            let mut row = row_of(cur.key(), Some(cur.value()))?;
            row.resize(width, Value::Null);
            out.push(row);
        }
        return Ok(out);
    }
    let n = f.columns.len();
    // The rows the branches before gave, sorted.
    let mut seen: Vec<Doc> = Vec::new();
    for (op, v) in query {
        let (q, docs) = match op {
            None => {
                let text = text_of(v).map(|t| t.into_owned()).unwrap_or_default();
                let q = query::parse(&text, &f.tok, &f.columns)?;
                let found = search(store, f, &q)?;
                (q, found)
            }
            Some(op) => {
                let none = Found {
                    rows: rowid_rows(store, ct.clone()?, f, op, v)?,
                    raw: vec![],
                    kept: vec![],
                    fuzzy: vec![],
                };
                (Query::default(), none)
            }
        };
        let scorer = rank::Scorer::new(store, f, &q, &docs)?;
        let lens = scorer.lengths(store, &docs.rows)?;
        for (rowid, &d) in docs.rows.iter().zip(&lens).filter(|(r, _)| !find(&seen, r)) {
            // An external content table without the row: SQLite gives NULL columns.
            // A row id that is a key column's value is in the record: read it then too.
            let rec = if content || !f.int_key || op.is_some() {
                store.get(ct.clone()?, rowid)?
            } else {
                None
            };
            let mut row = row_of(rowid, rec.as_deref())?;
            if op.is_none() {
                row[n] = Value::Real(scorer.bm25(rowid, d, &[])?);
            }
            for a in aux {
                let v = match a.kind {
                    "bm25" => Value::Real(scorer.bm25(rowid, d, &a.args)?),
                    "highlight" => rank::highlight(f, &q, &docs, rowid, &row[..n], &a.args)?,
                    _ => rank::snippet(f, &q, &docs, rowid, &row[..n], &a.args)?,
                };
                row.push(v);
            }
            out.push(row);
        }
        if query.len() > 1 {
            let new: Vec<Doc> = docs
                .rows
                .iter()
                .filter(|r| !find(&seen, r))
                .cloned()
                .collect();
            seen.extend(new);
            cairn_store::sort::sort(&mut seen);
        }
    }
    Ok(out)
}

/// The keys of the content rows whose row id stands in `op` (`=`, `<`, `<=`, `>`, `>=`) to
/// `v`, in key order.
fn rowid_rows(store: &dyn Storage, ct: TreeId, f: &Fts, op: &str, v: &Value) -> Result<Vec<Doc>> {
    use crate::parse::ast::BinOp;
    let op = match op {
        "=" => BinOp::Eq,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        _ => BinOp::Ge,
    };
    let mut out = Vec::new();
    if let (true, BinOp::Eq, Value::Integer(_)) = (f.int_key, op, v) {
        let key = cairn_value::codec::encode_key(std::slice::from_ref(v));
        if store.get(ct, &key)?.is_some() {
            out.push(key);
        }
        return Ok(out);
    }
    let aff = crate::types::Affinity::Integer;
    let mut cur = store.scan(ct, Bound::Unbounded, Bound::Unbounded, false)?;
    while cur.next()? {
        let id = if f.int_key {
            cairn_value::codec::decode_key(cur.key())?
                .into_iter()
                .next()
        } else {
            decode_record(cur.value())?.into_iter().nth(f.rowid_col)
        };
        let id = id.unwrap_or(Value::Null);
        let hit = crate::exec::eval::compare_op(op, &id, v, aff, crate::types::Affinity::None);
        if hit == Value::Integer(1) {
            out.push(cur.key().to_vec());
        }
    }
    Ok(out)
}

/// `INSERT INTO t(t[, rowid, cols...]) VALUES ('command', ...)`: SQLite's special inserts.
/// `'rebuild'` indexes the content again; `'delete'`, `'optimize'`, `'merge'` and
/// `'integrity-check'` have nothing to do, since the writer keeps the index in step with its
/// content (`'integrity-check'` runs `verify`).
pub fn command(store: &mut dyn Storage, f: &Fts, cmd: &Value) -> Result<()> {
    let cmd = text_of(cmd)
        .map(|c| c.to_ascii_lowercase())
        .unwrap_or_default();
    match cmd.as_str() {
        "rebuild" => rebuild(store, f),
        "delete" | "optimize" | "merge" | "automerge" | "crisismerge" | "usermerge" | "pgsz" => {
            Ok(())
        }
        "integrity-check" => match verify(&*store, f)?.into_iter().next() {
            Some(p) => Err(Error::Storage(cairn_store::Error::Corrupt(p))),
            None => Ok(()),
        },
        _ => Err(Error::Invalid(format!(
            "unknown fts5 command: {cmd} (rebuild, delete, optimize, merge, integrity-check)"
        ))),
    }
}

impl crate::Database {
    /// `CREATE VIRTUAL TABLE ... USING fts5(...)`: the own content table when there is no
    /// `content=`, the two index trees, the catalog row, and the rows already in an external
    /// content table indexed.
    pub(crate) fn create_fts(&mut self, cv: &ast::CreateVirtual) -> Result<()> {
        if self.catalog.fts(&cv.name).is_some() {
            if cv.if_not_exists {
                return Ok(());
            }
            return Err(Error::AlreadyExists(format!("table {}", cv.name)));
        }
        if self.name_taken(&cv.name) {
            return Err(Error::AlreadyExists(format!("table {}", cv.name)));
        }
        crate::ddl::reserved(&cv.name)?;
        let probe = define(cv, 0)?;
        if probe.content.is_none() {
            let (ast::Statement::CreateTable(ct), _) =
                crate::parse::parse(&own_content_sql(&probe))?
            else {
                return Err(Error::Invalid("invariant: own content table".into()));
            };
            self.ddl(&ast::Statement::CreateTable(ct))?;
        }
        let tree = self.catalog.next_tree;
        self.catalog.next_tree += 2;
        let f = define(cv, tree)?;
        self.store.create_tree(tree)?;
        self.store.create_tree(tree + 1)?;
        let t = self
            .catalog
            .tables
            .get(&f.content_table().to_ascii_lowercase());
        let f = resolve(&f, t.map(|t| &**t))?;
        Catalog::save_fts(self.store.as_mut(), &f.name, Some(&f))?;
        self.catalog.fts.push(Rc::new(f.clone()));
        self.catalog.attach_fts()?;
        if f.content.is_some() {
            rebuild(self.store.as_mut(), &f)?;
        }
        Ok(())
    }

    /// DROP TABLE of an fts5 table: its index trees and catalog row, and its own content
    /// table (an external one stays). False when `name` is no fts5 table.
    pub(crate) fn drop_fts(&mut self, name: &str) -> Result<bool> {
        let Some(f) = self.catalog.fts(name).cloned() else {
            return Ok(false);
        };
        self.store.drop_tree(f.tree)?;
        self.store.drop_tree(f.docs())?;
        Catalog::save_fts(self.store.as_mut(), &f.name, None)?;
        self.catalog
            .fts
            .retain(|x| !x.name.eq_ignore_ascii_case(name));
        self.catalog.attach_fts()?;
        if f.content.is_none() {
            self.ddl(&ast::Statement::DropTable {
                name: f.name.clone(),
                if_exists: true,
            })?;
        }
        Ok(true)
    }

    /// Runs an fts5 command insert (`command`), or returns None when `ins` is none.
    pub(crate) fn fts_insert_command(&mut self, ins: &ast::Insert) -> Option<Result<()>> {
        let f = self.catalog.fts(&ins.table)?.clone();
        if !ins
            .columns
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case(&f.name))
        {
            return None;
        }
        let ast::InsertSource::Values(rows) = &ins.source else {
            return Some(Err(Error::Unsupported(
                "an fts5 command takes VALUES".into(),
            )));
        };
        Some(self.atomic(false, |db| {
            for r in rows {
                let cmd = match r.first() {
                    Some(ast::Expr::Literal(v)) => v.clone(),
                    _ => {
                        return Err(Error::Unsupported(
                            "an fts5 command must be a literal".into(),
                        ))
                    }
                };
                command(db.store.as_mut(), &f, &cmd)?;
            }
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u8, hits: &[(u32, u32)]) -> Row {
        (vec![id], hits.to_vec())
    }

    #[test]
    fn merged_runs_keep_rowid_order_and_join_a_rows_hits() {
        let a = vec![
            row(1, &[(0, 1)]),
            row(3, &[(0, 5), (1, 0)]),
            row(7, &[(0, 0)]),
        ];
        let b = vec![
            row(2, &[(0, 2)]),
            row(3, &[(0, 1), (0, 5)]),
            row(9, &[(1, 1)]),
        ];
        let m = merge_runs(a, b);
        assert_eq!(
            m,
            vec![
                row(1, &[(0, 1)]),
                row(2, &[(0, 2)]),
                row(3, &[(0, 1), (0, 5), (1, 0)]),
                row(7, &[(0, 0)]),
                row(9, &[(1, 1)]),
            ]
        );
        assert_eq!(merge_runs(Vec::new(), m.clone()), m);
        assert_eq!(merge_runs(m.clone(), Vec::new()), m);
    }

    #[test]
    fn instances_insert_in_order_or_not() {
        let mut i = Instances::new();
        i.insert(vec![5], vec![(0, 0)]);
        i.insert(vec![9], vec![(0, 1)]);
        i.insert(vec![1], vec![(0, 2)]);
        i.insert(vec![5], vec![(0, 3)]);
        assert_eq!(
            i.keys().cloned().collect::<Vec<_>>(),
            vec![vec![1], vec![5], vec![9]]
        );
        assert_eq!(i.get(&[5]), Some(&vec![(0, 3)]));
        assert!(i.get(&[4]).is_none() && !i.contains_key(&[4]) && i.contains_key(&[9]));
    }
}
