//! The catalog: a tree of trees, keyed by tree name, whose entries ([`TreeInfo`]) give each
//! tree's kind, root, entry count and the caller's bytes. Reads (`get`, `list`) go through any
//! view of the pages; the changes (`Writer::catalog_put`, `catalog_remove`, and the in-place
//! rewrites commit and `WriteTx::set_meta_of` take when they can) go through the writer and
//! hand the catalog's new root to the transaction's state, which the commit's superblock names.

use super::writer::Writer;
use crate::btree::{self, Pages, PagesMut, Stack};
use crate::error::{Error, Result};
use crate::file::BlockFile;
use crate::page;

/// What a tree is for. An index names the table tree its entries are derived from, which is what
/// lets [`Db::check_with`](crate::Db::check_with) compare the two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeKind {
    Table,
    Index { table: String },
}

/// A tree as the catalog records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeInfo {
    pub name: String,
    pub kind: TreeKind,
    /// Number of entries.
    pub len: u64,
    /// Bytes owned by the caller (the SQL layer's schema for this tree).
    pub meta: Vec<u8>,
    pub(crate) root: u32,
}

impl TreeInfo {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v);
        v
    }

    /// [`TreeInfo::encode`] into `v` (emptied first).
    pub(crate) fn encode_into(&self, v: &mut Vec<u8>) {
        let (k, t) = match &self.kind {
            TreeKind::Table => (0u8, &[][..]),
            TreeKind::Index { table } => (1u8, table.as_bytes()),
        };
        v.clear();
        v.extend_from_slice(&self.root.to_le_bytes());
        v.extend_from_slice(&self.len.to_le_bytes());
        v.push(k);
        v.extend_from_slice(&(t.len() as u16).to_le_bytes());
        v.extend_from_slice(t);
        v.extend_from_slice(&self.meta);
    }

    pub(crate) fn decode(name: &[u8], v: &[u8]) -> Result<TreeInfo> {
        let bad = || {
            Error::Corrupt(format!(
                "catalog entry {:?} is malformed",
                String::from_utf8_lossy(name)
            ))
        };
        if v.len() < 15 {
            return Err(bad());
        }
        let root = page::get_u32(v, 0);
        let len = page::get_u64(v, 4);
        let tlen = page::get_u16(v, 13);
        if v.len() < 15 + tlen {
            return Err(bad());
        }
        let table = String::from_utf8(v[15..15 + tlen].to_vec()).map_err(|_| bad())?;
        let kind = match v[12] {
            0 => TreeKind::Table,
            1 => TreeKind::Index { table },
            _ => return Err(bad()),
        };
        Ok(TreeInfo {
            name: String::from_utf8(name.to_vec()).map_err(|_| bad())?,
            kind,
            len,
            meta: v[15 + tlen..].to_vec(),
            root,
        })
    }
}

pub(super) struct CommittedTrees {
    pub(super) txn: u64,
    pub(super) catalog: u32,
    pub(super) infos: Vec<TreeInfo>,
}

/// What [`Writer::catalog_rewrite_meta`] did.
pub(super) enum MetaRewrite {
    Done,
    Missing,
    /// Nothing: the general path (a get and a put of the entry) is to be taken.
    Fallback,
}

impl<F: BlockFile> Writer<'_, F> {
    /// The commit's rewrite of an existing catalog entry in a volatile file: the new value,
    /// of the old one's length, written over it in the leaf (changed under its own number,
    /// `page_mut`), without `catalog_put`'s general insert. False, with nothing changed, for
    /// any other case (a file, an entry that is new, not inline or of another length): the
    /// caller takes `catalog_put`.
    pub(super) fn catalog_entry_in_place(&mut self, name: &[u8], v: &[u8]) -> Result<bool> {
        let mut id = self.w.state.catalog;
        if !self.st.pager.volatile || id == 0 {
            return Ok(false);
        }
        let mut depth = 0;
        let found = loop {
            // A tree's depth bound (`btree`'s), against a cycle of pages.
            depth += 1;
            if depth > 40 {
                return Err(Error::Corrupt("the catalog is deeper than 40 pages".into()));
            }
            // Ok: the entry's slot in leaf `id`, or None to fall back; Err: the child to go to.
            let step = self.with_page(id, |pg| match page::kind(pg) {
                page::KIND_BRANCH => Err(page::child(pg, page::child_index(pg, name))),
                page::KIND_LEAF => Ok(match page::search(pg, name) {
                    Ok(i) => match page::leaf_value(pg, i) {
                        page::LeafValue::Inline(old) if old.len() == v.len() => Some(i),
                        _ => None,
                    },
                    Err(_) => None,
                }),
                // Not a catalog page: `catalog_put` reports it.
                _ => Ok(None),
            })?;
            match step {
                Ok(found) => break found,
                Err(child) => id = child,
            }
        };
        let Some(i) = found else { return Ok(false) };
        let pg = self.page_mut(id)?;
        let done = page::rewrite_value(pg, i, v);
        debug_assert!(done, "a value of the same length fits where it is");
        Ok(done)
    }

    pub(super) fn catalog_put(&mut self, name: &[u8], v: &[u8]) -> Result<()> {
        self.w.catalog_written = true;
        let mut root = self.w.state.catalog;
        let mut path = std::mem::take(&mut self.st.bufs.path);
        let mut scratch = std::mem::take(&mut self.st.bufs.scratch);
        let r = btree::insert(self, &mut root, name, v, &mut path, &mut scratch);
        self.st.bufs.path = path;
        self.st.bufs.scratch = scratch;
        let existed = r?;
        self.w.state.catalog = root;
        if !existed {
            self.w.state.catalog_len += 1;
        }
        Ok(())
    }

    /// Replaces the caller bytes of catalog entry `name` with `meta` within the leaf that holds
    /// the entry, first making the leaf and the branches above it the transaction's if they
    /// are not: what [`Writer::catalog_put`] does with the entry's other fields kept, without
    /// reading the entry out, building its new value apart and inserting it as a new cell.
    /// A caller that sets the bytes on every commit pays for a copy of its bytes into the page.
    /// [`MetaRewrite::Fallback`] when the entry is not inline in its leaf, or its new value does
    /// not fit there, or would leave the leaf underfull (a rebalance needs the general path);
    /// the pages made the transaction's are then as the general path would make them.
    pub(super) fn catalog_rewrite_meta(&mut self, name: &[u8], meta: &[u8]) -> Result<MetaRewrite> {
        self.w.catalog_written = true;
        let mut root = self.w.state.catalog;
        if root == 0 {
            return Ok(MetaRewrite::Missing);
        }
        let quarter = page::capacity(self.page_size()) / 4;
        let mut path = std::mem::take(&mut self.st.bufs.path);
        path.clear();
        let r = self.catalog_rewrite_in(&mut root, &mut path, name, meta, quarter);
        self.st.bufs.path = path;
        self.w.state.catalog = root;
        r
    }

    fn catalog_rewrite_in(
        &mut self,
        root: &mut u32,
        path: &mut Vec<(u32, usize)>,
        name: &[u8],
        meta: &[u8],
        quarter: usize,
    ) -> Result<MetaRewrite> {
        enum Step {
            Child(usize, u32),
            /// The entry's slot and the length of its fields before the caller's bytes.
            Found(usize, usize),
            Missing,
            Fallback,
            Bad(String),
        }
        let mut id = *root;
        let (i, fields) = loop {
            // A tree's depth bound (`btree`'s), against a cycle of pages.
            if path.len() > 40 {
                return Err(Error::Corrupt("the catalog is deeper than 40 pages".into()));
            }
            let step = self.with_page(id, |pg| match page::kind(pg) {
                page::KIND_BRANCH => {
                    let idx = page::child_index(pg, name);
                    Step::Child(idx, page::child(pg, idx))
                }
                page::KIND_LEAF => match page::search(pg, name) {
                    Ok(i) => match page::leaf_value(pg, i) {
                        page::LeafValue::Inline(v) => {
                            // The entry's fields before the caller's bytes (`TreeInfo::encode`).
                            if v.len() < 15 || v.len() < 15 + page::get_u16(v, 13) {
                                return Step::Bad(format!(
                                    "catalog entry {:?} is malformed",
                                    String::from_utf8_lossy(name)
                                ));
                            }
                            let fields = 15 + page::get_u16(v, 13);
                            let new = fields + meta.len();
                            // A root leaf may hold any amount; another needs a rebalance.
                            if new < v.len()
                                && !path.is_empty()
                                && page::used(pg) - (v.len() - new) < quarter
                            {
                                Step::Fallback
                            } else {
                                Step::Found(i, fields)
                            }
                        }
                        page::LeafValue::Overflow(..) => Step::Fallback,
                    },
                    Err(_) => Step::Missing,
                },
                k => Step::Bad(format!("page {id}: page kind {k} inside the catalog")),
            })?;
            match step {
                Step::Child(idx, c) => {
                    path.push((id, idx));
                    id = c;
                }
                Step::Found(i, fields) => break (i, fields),
                Step::Missing => return Ok(MetaRewrite::Missing),
                Step::Fallback => return Ok(MetaRewrite::Fallback),
                Step::Bad(e) => return Err(Error::Corrupt(e)),
            }
        };
        // An owned leaf's path is owned (its parent was changed to point at it); else the
        // pages are copied from the root down, each parent pointed at its child's copy.
        let leaf = if self.is_owned(id) {
            id
        } else {
            btree::cow_path(self, root, name, path)?
        };
        let mut v = std::mem::take(&mut self.st.bufs.scratch);
        v.clear();
        let pg = self.page_mut(leaf)?;
        match page::leaf_value(pg, i) {
            page::LeafValue::Inline(old) => v.extend_from_slice(&old[..fields]),
            page::LeafValue::Overflow(..) => {
                unreachable!("invariant: the copy holds what was read")
            }
        }
        v.extend_from_slice(meta);
        let done = page::rewrite_value(pg, i, &v);
        self.st.bufs.scratch = v;
        Ok(if done {
            MetaRewrite::Done
        } else {
            MetaRewrite::Fallback
        })
    }

    pub(super) fn catalog_remove(&mut self, name: &[u8]) -> Result<bool> {
        self.w.catalog_written = true;
        let mut root = self.w.state.catalog;
        let mut path = std::mem::take(&mut self.st.bufs.path);
        let r = btree::remove(self, &mut root, name, &mut path);
        self.st.bufs.path = path;
        let existed = r?;
        self.w.state.catalog = root;
        if existed {
            self.w.state.catalog_len -= 1;
        }
        Ok(existed)
    }
}

/// Catalog entry `name` in the catalog at `catalog`, read through `p`.
pub(crate) fn get<P: Pages>(p: &mut P, catalog: u32, name: &str) -> Result<Option<TreeInfo>> {
    let mut v = Vec::new();
    if btree::get(p, catalog, name.as_bytes(), &mut v)? {
        Ok(Some(TreeInfo::decode(name.as_bytes(), &v)?))
    } else {
        Ok(None)
    }
}

/// Every entry of the catalog at `catalog`, in name order, read through `p`.
pub(crate) fn list<P: Pages>(p: &mut P, catalog: u32) -> Result<Vec<TreeInfo>> {
    let mut out = Vec::new();
    let mut st = Stack::default();
    let mut ok = st.first(p, catalog)?;
    let mut v = Vec::new();
    while ok {
        let (pg, i) = st.leaf().expect("invariant: valid stack has a leaf");
        let pg = pg.clone();
        btree::read_value(p, &pg, i, &mut v)?;
        out.push(TreeInfo::decode(page::key(&pg, i), &v)?);
        ok = st.next(p)?;
    }
    Ok(out)
}
