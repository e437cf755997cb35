//! The integrity check: walks every page reachable from the superblock (catalog, every tree, the
//! free tree, overflow chains), verifies checksums, page kinds, key order against the parents'
//! separators, tree shape, entry counts, that every page below the page count is used exactly
//! once or free, and — through [`IndexHook`] — that indexes and their tables agree. It reports
//! every problem it finds rather than stopping at the first; it never repairs anything.

use std::fmt;

use crate::btree::{self, Stack};
use crate::db::{Db, Shared, TreeInfo, TreeKind};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page::{self, LeafValue, KIND_BRANCH, KIND_LEAF, KIND_OVERFLOW};

/// One thing `check` found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The page concerned, when there is one.
    pub page: Option<u32>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.page {
            Some(p) => write!(f, "page {p}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

/// What `check` found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub problems: Vec<Problem>,
    pub page_count: u32,
    pub used_pages: u64,
    /// Of the used pages, those of the free tree (which lists the free pages).
    pub free_tree_pages: u64,
    pub free_pages: u64,
    pub trees: usize,
    pub entries: u64,
}

impl Report {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.problems.is_empty() {
            return write!(
                f,
                "ok: {} pages ({} used, {} free), {} trees, {} entries",
                self.page_count, self.used_pages, self.free_pages, self.trees, self.entries
            );
        }
        for p in &self.problems {
            writeln!(f, "{p}")?;
        }
        Ok(())
    }
}

/// What the SQL layer supplies so `check` can compare an index with its table: the entries a
/// table row must have in an index (none if the row is not indexed, one for a plain index).
pub trait IndexHook {
    fn entries(
        &self,
        index: &TreeInfo,
        table: &TreeInfo,
        row_key: &[u8],
        row_value: &[u8],
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<()>;
}

const USED: u8 = 1;
const FREE: u8 = 2;
/// Past this many problems about one index, the rest are summarised.
const INDEX_PROBLEMS: usize = 20;

struct Checker<'a, F> {
    sh: &'a mut Shared<F>,
    marks: Vec<u8>,
    /// Pages marked used so far.
    used: u64,
    report: Report,
}

impl<F: BlockFile> Checker<'_, F> {
    fn problem(&mut self, page: Option<u32>, msg: impl Into<String>) {
        self.report.problems.push(Problem {
            page,
            message: msg.into(),
        });
    }

    fn mark(&mut self, id: u32, how: u8, what: &str) -> bool {
        let Some(m) = self.marks.get_mut(id as usize) else {
            self.problem(
                Some(id),
                format!(
                    "{what} points past the page count {}",
                    self.report.page_count
                ),
            );
            return false;
        };
        if id < 2 {
            self.problem(Some(id), format!("{what} points at a superblock"));
            return false;
        }
        match (*m, how) {
            (0, _) => {
                *m = how;
                self.used += (how == USED) as u64;
                true
            }
            (USED, FREE) | (FREE, USED) => {
                self.problem(Some(id), format!("is both used ({what}) and free"));
                false
            }
            _ => {
                self.problem(Some(id), format!("is reached twice ({what})"));
                false
            }
        }
    }

    fn read(&mut self, id: u32) -> Option<crate::pager::Page> {
        match self.sh.st.pager.read_uncached(id) {
            Ok(p) => Some(p),
            Err(Error::Corrupt(m)) => {
                // read_uncached names the page already.
                let m = m
                    .strip_prefix(&format!("page {id}: "))
                    .unwrap_or(&m)
                    .to_string();
                self.problem(Some(id), m);
                None
            }
            Err(e) => {
                self.problem(Some(id), e.to_string());
                None
            }
        }
    }

    /// Walks a tree; returns its number of entries.
    fn tree(&mut self, name: &str, root: u32) -> u64 {
        if root == 0 {
            return 0;
        }
        let mut leaf_depth = None;
        let mut n = 0;
        self.node(name, root, 0, None, None, &mut leaf_depth, &mut n);
        n
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        name: &str,
        id: u32,
        depth: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        leaf_depth: &mut Option<usize>,
        n: &mut u64,
    ) {
        if !self.mark(id, USED, &format!("a node of tree {name:?}")) {
            return;
        }
        let Some(pg) = self.read(id) else { return };
        let kind = page::kind(&pg);
        if kind != KIND_LEAF && kind != KIND_BRANCH {
            self.problem(
                Some(id),
                format!("tree {name:?} holds a page of kind {kind}"),
            );
            return;
        }
        let count = page::count(&pg);
        if count == 0 && depth > 0 {
            self.problem(Some(id), format!("empty node in tree {name:?}"));
        }
        for i in 0..count {
            let k = page::key(&pg, i);
            if i > 0 && page::key(&pg, i - 1) >= k {
                self.problem(Some(id), format!("keys {} and {} out of order", i - 1, i));
            }
            if lo.is_some_and(|l| k < l) || hi.is_some_and(|h| k >= h) {
                self.problem(
                    Some(id),
                    format!("key {i} lies outside its parent's separators"),
                );
            }
        }
        if kind == KIND_BRANCH {
            for i in 0..=count {
                let clo = if i == 0 {
                    lo
                } else {
                    Some(page::key(&pg, i - 1))
                };
                let chi = if i == count {
                    hi
                } else {
                    Some(page::key(&pg, i))
                };
                let c = page::child(&pg, i);
                self.node(name, c, depth + 1, clo, chi, leaf_depth, n);
            }
        } else {
            match *leaf_depth {
                None => *leaf_depth = Some(depth),
                Some(d) if d != depth => self.problem(
                    Some(id),
                    format!("leaf at depth {depth}, others of tree {name:?} at depth {d}"),
                ),
                _ => {}
            }
            *n += count as u64;
            for i in 0..count {
                if let LeafValue::Overflow(len, first) = page::leaf_value(&pg, i) {
                    self.overflow(name, id, len, first);
                }
            }
        }
    }

    fn overflow(&mut self, name: &str, leaf: u32, len: usize, first: u32) {
        let mut next = first;
        let mut got = 0usize;
        while next != 0 {
            if !self.mark(next, USED, &format!("an overflow page of tree {name:?}")) {
                return;
            }
            let Some(pg) = self.read(next) else { return };
            if page::kind(&pg) != KIND_OVERFLOW {
                self.problem(Some(next), "expected an overflow page");
                return;
            }
            got += page::get_u32(&pg, 20) as usize;
            next = page::right(&pg);
        }
        if got != len {
            self.problem(
                Some(leaf),
                format!("an overflow chain holds {got} bytes, its cell says {len}"),
            );
        }
    }

    fn free_tree(&mut self, root: u32) -> u64 {
        let n = self.tree("(free)", root);
        let mut st = Stack::default();
        let r = (|| -> Result<Vec<u32>> {
            let mut out = Vec::new();
            let mut ok = st.first(&mut *self.sh, root)?;
            while ok {
                let (pg, i) = st.leaf().expect("invariant: valid stack");
                let k = page::key(pg, i);
                if k.len() == 4 {
                    out.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
                }
                ok = st.next(&mut *self.sh)?;
            }
            Ok(out)
        })();
        match r {
            Ok(ids) => {
                for id in ids {
                    if self.mark(id, FREE, "the free tree") {
                        self.report.free_pages += 1;
                    }
                }
            }
            Err(e) => self.problem(None, format!("cannot read the free tree: {e}")),
        }
        n
    }

    fn index(&mut self, hook: &dyn IndexHook, index: &TreeInfo, table: &TreeInfo) -> Result<()> {
        let mut expected = Vec::new();
        let mut st = Stack::default();
        let mut ok = st.first(&mut *self.sh, table.root)?;
        let mut v = Vec::new();
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack");
            let pg = pg.clone();
            btree::read_value(&mut *self.sh, &pg, i, &mut v)?;
            hook.entries(index, table, page::key(&pg, i), &v, &mut expected)?;
            ok = st.next(&mut *self.sh)?;
        }
        crate::sort::sort(&mut expected);
        let mut e = expected.iter().peekable();
        let mut ok = st.first(&mut *self.sh, index.root)?;
        let mut problems = 0;
        let mut say = |c: &mut Self, m: String| {
            problems += 1;
            if problems <= INDEX_PROBLEMS {
                c.problem(None, m);
            }
        };
        while ok {
            let (pg, i) = st.leaf().expect("invariant: valid stack");
            let pg = pg.clone();
            let k = page::key(&pg, i).to_vec();
            btree::read_value(&mut *self.sh, &pg, i, &mut v)?;
            while let Some((ek, _)) = e.peek() {
                if ek.as_slice() < k.as_slice() {
                    say(
                        self,
                        format!(
                            "index {:?} lacks the entry {} of a row of {:?}",
                            index.name,
                            hex(ek),
                            table.name
                        ),
                    );
                    e.next();
                } else {
                    break;
                }
            }
            match e.peek() {
                Some((ek, ev)) if *ek == k => {
                    if *ev != v {
                        say(
                            self,
                            format!(
                                "index {:?} entry {} has the wrong value",
                                index.name,
                                hex(&k)
                            ),
                        );
                    }
                    e.next();
                }
                _ => say(
                    self,
                    format!(
                        "index {:?} has an entry {} no row of {:?} accounts for",
                        index.name,
                        hex(&k),
                        table.name
                    ),
                ),
            }
            ok = st.next(&mut *self.sh)?;
        }
        for (ek, _) in e {
            say(
                self,
                format!(
                    "index {:?} lacks the entry {} of a row of {:?}",
                    index.name,
                    hex(ek),
                    table.name
                ),
            );
        }
        if problems > INDEX_PROBLEMS {
            self.problem(
                None,
                format!(
                    "index {:?}: {} more problems",
                    index.name,
                    problems - INDEX_PROBLEMS
                ),
            );
        }
        Ok(())
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl<F: BlockFile> Db<F> {
    /// Checks the last committed state (see the module doc). Index trees are checked against
    /// their tables only by [`Db::check_with`].
    pub fn check(&self) -> Result<Report> {
        self.check_inner(None)
    }

    /// [`Db::check`], plus every index against its table through `hook`.
    pub fn check_with(&self, hook: &dyn IndexHook) -> Result<Report> {
        self.check_inner(Some(hook))
    }

    fn check_inner(&self, hook: Option<&dyn IndexHook>) -> Result<Report> {
        let mut sh = self.shared().borrow_mut();
        if sh.has_writer() {
            return Err(Error::Busy("check needs no open write transaction".into()));
        }
        let state = sh.st.state;
        let mut c = Checker {
            sh: &mut sh,
            marks: vec![0; state.page_count as usize],
            used: 0,
            report: Report {
                page_count: state.page_count,
                ..Report::default()
            },
        };
        let n = c.tree("(catalog)", state.catalog);
        if n != state.catalog_len {
            c.problem(
                None,
                format!(
                    "the catalog holds {n} trees, the superblock says {}",
                    state.catalog_len
                ),
            );
        }
        let trees = if c.report.problems.is_empty() {
            match crate::db::catalog_list(&mut *c.sh, state.catalog) {
                Ok(t) => t,
                Err(e) => {
                    c.problem(None, format!("cannot read the catalog: {e}"));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        c.report.trees = trees.len();
        for t in &trees {
            let n = c.tree(&t.name, t.root);
            c.report.entries += n;
            if n != t.len {
                c.problem(
                    Some(t.root),
                    format!(
                        "tree {:?} holds {n} entries, the catalog says {}",
                        t.name, t.len
                    ),
                );
            }
        }
        let before = c.used;
        let n = c.free_tree(state.free);
        c.report.free_tree_pages = c.used - before;
        if n != state.free_len {
            c.problem(
                None,
                format!(
                    "the free tree holds {n} pages, the superblock says {}",
                    state.free_len
                ),
            );
        }
        for id in 2..state.page_count {
            match c.marks[id as usize] {
                0 => c.problem(Some(id), "is lost: neither used nor free"),
                USED => c.report.used_pages += 1,
                _ => {}
            }
        }
        if let (Some(hook), true) = (hook, c.report.problems.is_empty()) {
            for index in &trees {
                if let TreeKind::Index { table } = &index.kind {
                    match trees.iter().find(|t| &t.name == table) {
                        Some(t) => {
                            if let Err(e) = c.index(hook, index, t) {
                                c.problem(None, format!("checking index {:?}: {e}", index.name));
                            }
                        }
                        None => c.problem(
                            None,
                            format!("index {:?} names a missing table {table:?}", index.name),
                        ),
                    }
                }
            }
        }
        Ok(c.report)
    }
}
