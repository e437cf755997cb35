//! INSERT: rows from VALUES or a query, stored records copied, upserts.

use crate::error::{Error, Result};
use crate::exec::eval::{eval, eval_bool, Cache, Cx};
use crate::exec::query::collect_rows;
use crate::exec::scan::{key_columns, null_frame};
use crate::exec::write::{inputs_distinct, Upsert, WriteResult, Writer};
use crate::exec::{eval_owned, eval_row, rowid_value};
use crate::parse::ast::Conflict;
use crate::plan::*;
use crate::schema::{Key, Table};
use crate::storage::Each;
use cairn_value::codec::{decode_key_value, encode_record_into, get_varint, Layout};
use cairn_value::Value;
use std::ops::Bound;

impl Writer<'_> {
    pub fn insert(&mut self, p: &InsertPlan, checks: &[PExpr]) -> Result<WriteResult> {
        if checks.is_empty() {
            if let Some(res) = self.insert_copy(p)? {
                return Ok(res);
            }
        }
        let t = &p.table;
        let cache = Cache::default();
        // VALUES rows without a subquery read nothing stored: each is evaluated as it is
        // inserted (as SQLite does), into buffers reused from row to row.
        let streamed = match &p.rows {
            InsertRows::Values(rows)
                if !rows.iter().flatten().any(|e| {
                    // The common values first, without a walk.
                    !matches!(e, PExpr::Param(_) | PExpr::Lit(_)) && crate::plan::has_subquery(e)
                }) =>
            {
                Some(rows)
            }
            _ => None,
        };
        // Other input rows first: a SELECT must not see this statement's own inserts.
        let inputs: Vec<Vec<Value>> = {
            let cx = self.cx(&cache);
            match &p.rows {
                _ if streamed.is_some() => Vec::new(),
                InsertRows::Values(rows) => {
                    let mut out = Vec::with_capacity(rows.len());
                    for r in rows {
                        let mut vals = Vec::with_capacity(r.len());
                        for e in r {
                            vals.push(eval_owned(e, &[], &cx)?);
                        }
                        out.push(vals);
                    }
                    out
                }
                InsertRows::Query(q) => collect_rows(q, &cx)?,
            }
        };
        // The planner gives each input value to one column (a column listed twice is an
        // error), so values move from the input row instead of being copied; checked here
        // rather than assumed, as a copy is only slower.
        let movable = inputs_distinct(&p.columns);
        // Input value i goes to column i, for every column: the input row is the row.
        let identity = p
            .columns
            .iter()
            .enumerate()
            .all(|(c, src)| matches!(src, ColSource::Input(i) if *i == c));
        // The key, the record and the values of each row, in buffers reused from row to row
        // and kept from statement to statement.
        let (mut pk, mut rec, mut row) = self.bufs.take();
        let count = streamed.map_or(inputs.len(), |rows| rows.len());
        let mut inputs = inputs.into_iter();
        row.reserve(t.columns.len());
        let mut input = Vec::new();
        let r = self.insert_rows(
            p,
            checks,
            streamed,
            &mut inputs,
            count,
            identity,
            movable,
            &cache,
            &mut pk,
            &mut rec,
            &mut row,
            &mut input,
        );
        self.bufs.keep(pk, rec, row);
        r
    }

    /// `insert`'s loop over its rows.
    #[allow(clippy::too_many_arguments)]
    fn insert_rows(
        &mut self,
        p: &InsertPlan,
        checks: &[PExpr],
        streamed: Option<&Vec<Vec<PExpr>>>,
        inputs: &mut std::vec::IntoIter<Vec<Value>>,
        count: usize,
        identity: bool,
        movable: bool,
        cache: &Cache,
        pk: &mut Vec<u8>,
        rec: &mut Vec<u8>,
        row: &mut Vec<Value>,
        input: &mut Vec<Value>,
    ) -> Result<WriteResult> {
        let t = &p.table;
        let mut res = WriteResult::default();
        let mut next_rowid = None;
        for n in 0..count {
            row.clear();
            let whole = |len: usize| identity && len == p.columns.len();
            let direct = match streamed {
                Some(rows) => {
                    let direct = whole(rows[n].len());
                    let into = if direct { &mut *row } else { &mut *input };
                    into.clear();
                    let cx = self.cx(cache);
                    for e in &rows[n] {
                        into.push(eval_owned(e, &[], &cx)?);
                    }
                    direct
                }
                None => {
                    *input = inputs.next().expect("invariant: one input per row");
                    let direct = whole(input.len());
                    if direct {
                        std::mem::swap(row, input);
                    }
                    direct
                }
            };
            if !direct {
                let cx = self.cx(cache);
                for src in &p.columns {
                    row.push(match src {
                        ColSource::Input(i) if movable => {
                            std::mem::replace(&mut input[*i], Value::Null)
                        }
                        ColSource::Input(i) => input[*i].clone(),
                        ColSource::Default(Some(e)) => eval(e, &[], &cx)?.into_owned(),
                        ColSource::Default(None) => Value::Null,
                    });
                }
            }
            if let Key::Rowid(Some(c)) = t.key {
                let v = std::mem::replace(&mut row[c], Value::Null);
                row[c] = rowid_value(v, t, c)?;
            }
            // The row id first (a CHECK may read it), the primary key of other tables after
            // coercion (which may change the key columns' values).
            // A row that is not inserted takes no row id: the next one gets the same, as in
            // SQLite, which takes one past the largest in the table.
            let rowid_before = next_rowid;
            let mut pk_rowid = None;
            if let Key::Rowid(_) = t.key {
                pk_rowid = Some(self.pk_of(t, row, &mut next_rowid, pk)?);
            }
            match self.check_row(t, row, checks, cache) {
                Ok(()) => {}
                Err(Error::ConstraintNotNull(_) | Error::ConstraintCheck(_))
                    if p.or == Conflict::Ignore =>
                {
                    next_rowid = rowid_before;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let rowid = match pk_rowid {
                Some(x) => x,
                None => self.pk_of(t, row, &mut next_rowid, pk)?,
            };
            if !self.insert_tail(p, checks, row, pk, rowid, cache, &mut res, rec)? {
                next_rowid = rowid_before;
            }
        }
        Ok(res)
    }

    /// `INSERT INTO t SELECT * FROM s` where s's rows are already t's: the same column types
    /// and key, every NOT NULL of t also one of s, and t empty, without indexes, checks or a
    /// capture to feed. Each stored record is then what decoding and re-encoding it would give,
    /// so it is copied as bytes with its key (as SQLite's transfer optimization does). None
    /// when any of that does not hold, or a record is short of columns (written before an
    /// `ADD COLUMN`), and the general path runs instead.
    fn insert_copy(&mut self, p: &InsertPlan) -> Result<Option<WriteResult>> {
        let t = &p.table;
        let InsertRows::Query(q) = &p.rows else {
            return Ok(None);
        };
        let Body::Core(c) = &q.body else {
            return Ok(None);
        };
        let n = t.columns.len();
        let plain = p.upsert.is_none()
            && p.returning.is_empty()
            && t.generated.is_empty()
            && t.indexes.is_empty()
            && t.fts.is_empty()
            && (t.replicated.is_none() || self.capture.is_none())
            && !matches!(t.key, Key::Rowid(None))
            && q.order.is_empty()
            && q.limit.is_none()
            && q.offset.is_none()
            && q.width == n
            && c.levels.len() == 1
            && c.const_filters.is_empty()
            && c.agg.is_none()
            && c.window.is_none()
            && !c.distinct
            && c.project.len() == n
            && c.project
                .iter()
                .enumerate()
                .all(|(i, e)| *e == PExpr::Col(i))
            && p.columns.len() == n
            && p.columns
                .iter()
                .enumerate()
                .all(|(i, s)| *s == ColSource::Input(i));
        if !plain {
            return Ok(None);
        }
        let lvl = &c.levels[0];
        let Source::Table(s) = &lvl.source else {
            return Ok(None);
        };
        let same_rows = lvl.base == 0
            && matches!(lvl.access, Access::Scan { .. })
            && lvl.filters.is_empty()
            && lvl.after.is_empty()
            && s.tree != t.tree
            && s.key == t.key
            && s.columns.len() == n
            && s.columns
                .iter()
                .zip(&t.columns)
                .all(|(a, b)| a.ty == b.ty && (a.not_null || !b.not_null));
        if !same_rows || self.store.last_key(t.tree)?.is_some() {
            return Ok(None);
        }
        // Gathered before the first write: the scan borrows the store. The bytes go into
        // blocks of `GATHER_BLOCK`, each row whole in one: a single buffer doubling as it grew
        // copied the rows gathered so far at every doubling. `rows` holds each row's block,
        // start, key end and end.
        const GATHER_BLOCK: usize = 64 * 1024;
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut rows: Vec<(u32, u32, u32, u32)> = Vec::new();
        let whole = {
            let all = (Bound::Unbounded, Bound::Unbounded);
            // The first varint of a record is its column count; the copy checks no more of
            // it than that, as the bytes stored are the bytes copied.
            self.store
                .scan_each(s.tree, all.0, all.1, false, &mut |k, v| {
                    let mut pos = 0;
                    if get_varint(v, &mut pos)? != n as u64 {
                        return Ok(false);
                    }
                    let len = k.len() + v.len();
                    let block = match blocks.last_mut() {
                        Some(b) if b.capacity() - b.len() >= len => b,
                        _ => {
                            blocks.push(Vec::with_capacity(GATHER_BLOCK.max(len)));
                            blocks.last_mut().expect("invariant: just pushed")
                        }
                    };
                    let start = block.len();
                    block.extend_from_slice(k);
                    block.extend_from_slice(v);
                    // A block is at most one row past 64 KiB, and a row at most a record's length.
                    rows.push((
                        (blocks.len() - 1) as u32,
                        start as u32,
                        (start + k.len()) as u32,
                        (start + len) as u32,
                    ));
                    Ok(true)
                })?
        };
        if !whole {
            return Ok(None);
        }
        let mut res = WriteResult::default();
        // The source's keys come strictly ascending from its scan, and the table is empty:
        // the store can build the tree bottom-up (it refuses keys out of order).
        let mut pairs = rows.iter().map(|&(b, s, m, e)| {
            let block = &blocks[b as usize];
            (
                &block[s as usize..m as usize],
                &block[m as usize..e as usize],
            )
        });
        self.store.load_rows(t.tree, &mut pairs)?;
        res.changes = rows.len() as u64;
        // The keys come in order: the last one copied is the last row id inserted.
        if let (Key::Rowid(_), Some(&(b, s, m, _))) = (&t.key, rows.last()) {
            let key = &blocks[b as usize][s as usize..m as usize];
            if let Value::Integer(id) = decode_key_value(key, false)?.0 {
                res.last_rowid = Some(id);
            }
        }
        Ok(Some(res))
    }

    /// Stores one row an INSERT made (key `pk`, its record encoded into `rec`), settling
    /// conflicts as the statement says. Whether the row went in (false when it was ignored or
    /// an upsert updated the existing row instead).
    #[allow(clippy::too_many_arguments)]
    fn insert_tail(
        &mut self,
        p: &InsertPlan,
        checks: &[PExpr],
        row: &mut Vec<Value>,
        pk: &[u8],
        rowid: Option<i64>,
        cache: &Cache,
        res: &mut WriteResult,
        rec: &mut Vec<u8>,
    ) -> Result<bool> {
        let t = &p.table;
        rec.clear();
        encode_record_into(rec, row);
        // The common case in one descent of the table: the key is free, so the row goes in at
        // once, and only UNIQUE indexes are left to check. A conflict there takes the row out
        // again and leaves it to the loop below, which finds the same conflict a look-up
        // first would have found.
        let fresh = if p.upsert.is_none() {
            self.store.put_new(t.tree, pk, rec)?
        } else {
            match self.put_upserting(p, checks, row, pk, rec, cache, res)? {
                Some(fresh) => fresh,
                None => return Ok(false),
            }
        };
        let mut stored = fresh;
        if stored && self.unique_conflicts(t, row)? {
            self.store.delete(t.tree, pk)?;
            stored = false;
        }
        // A key that was there is the first conflict (`find_conflict` checks the key first),
        // known without looking again.
        let mut known = (!fresh).then(|| (None, pk.to_vec()));
        while let Some((constraint, other)) = if stored {
            None
        } else if let Some(k) = known.take() {
            Some(k)
        } else {
            self.find_conflict(t, pk, row, &[])?
        } {
            if let Some(u) = &p.upsert {
                let applies = match u.target {
                    None => true,
                    Some(c) => c == constraint,
                };
                if applies {
                    let Some((sets, w)) = &u.set else {
                        return Ok(false);
                    };
                    if checks.is_empty() && p.returning.is_empty() {
                        if let Some(changed) = self.upsert_in_place(
                            t,
                            Upsert::At(&other),
                            row,
                            sets,
                            w.as_ref(),
                            cache,
                        )? {
                            let n = u64::from(changed.unwrap_or(false));
                            res.changes += n;
                            res.updated += n;
                            return Ok(false);
                        }
                    }
                    let old = self.load_row(t, &other)?;
                    let mut frame = old.clone();
                    frame.extend(row.iter().cloned());
                    let mut new = old.clone();
                    {
                        let cx = self.cx(cache);
                        if let Some(w) = w {
                            if eval_bool(w, &frame, &cx)? != Some(true) {
                                return Ok(false);
                            }
                        }
                        for (c, e) in sets {
                            new[*c] = eval(e, &frame, &cx)?.into_owned();
                        }
                    }
                    let mut rec = Vec::new();
                    if self.update_row(
                        t,
                        &other,
                        &old,
                        &mut new,
                        Conflict::Abort,
                        checks,
                        cache,
                        &mut rec,
                    )? {
                        res.changes += 1;
                        res.updated += 1;
                        self.returning(&p.returning, &new, cache, res)?;
                    }
                    return Ok(false);
                }
            }
            match p.or {
                Conflict::Ignore => return Ok(false),
                Conflict::Replace => {
                    let old = self.load_row(t, &other)?;
                    self.delete_row(t, &other, &old)?;
                }
                Conflict::Abort => return Err(Self::unique_error(t, constraint)),
            }
        }
        if !stored {
            self.store.put(t.tree, pk, rec)?;
        }
        self.put_index_entries(t, pk, row)?;
        let returning = !p.returning.is_empty();
        self.capture_set(t, None, row)?;
        res.changes += 1;
        if rowid.is_some() {
            res.last_rowid = rowid;
        }
        if returning {
            self.returning(&p.returning, row, cache, res)?;
        }
        Ok(true)
    }

    /// `put_new` for an upsert: its DO UPDATE of the row holding the key, when it can be made
    /// where that row is stored, goes into the same descent (the insert that finds the key
    /// rewrites it). Some(whether the row was put); None when the existing row was handled
    /// instead (updated or not, counted in `res`). Kept out of line: a plain INSERT's loop
    /// does not carry it.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn put_upserting(
        &mut self,
        p: &InsertPlan,
        checks: &[PExpr],
        row: &mut Vec<Value>,
        pk: &[u8],
        rec: &[u8],
        cache: &Cache,
        res: &mut WriteResult,
    ) -> Result<Option<bool>> {
        let t = &p.table;
        let mut direct = None;
        if let Some(u) = &p.upsert {
            if let (None | Some(None), Some((sets, w))) = (u.target, &u.set) {
                if checks.is_empty() && p.returning.is_empty() {
                    direct = self.upsert_in_place(
                        t,
                        Upsert::Put(pk, rec),
                        row,
                        sets,
                        w.as_ref(),
                        cache,
                    )?;
                }
            }
        }
        match direct {
            Some(Some(changed)) => {
                res.changes += u64::from(changed);
                res.updated += u64::from(changed);
                Ok(None)
            }
            Some(None) => Ok(Some(true)),
            None => Ok(Some(self.store.put_new(t.tree, pk, rec)?)),
        }
    }

    /// DO UPDATE of the row at `other` where it is stored, as `update_in_place` rewrites a
    /// row, when the same holds: no key or indexed column is set, nothing reads the whole row
    /// (CHECK, RETURNING, replication; the caller checks the first two) and no expression has
    /// a subquery. The frame is the existing row (only the columns the expressions read) and
    /// then the excluded `row`, moved there when the row is updated (the caller is done with
    /// it). With `Upsert::Put` the new row is put if its key is free, and the row holding the
    /// key is updated otherwise, in one descent. Some(None) when the new row was put,
    /// Some(Some(whether the row was updated)) when it was not; None when this does not apply,
    /// with nothing written and `row` untouched.
    fn upsert_in_place(
        &mut self,
        t: &Table,
        other: Upsert,
        row: &mut Vec<Value>,
        sets: &[(usize, PExpr)],
        w: Option<&PExpr>,
        cache: &Cache,
    ) -> Result<Option<Option<bool>>> {
        let key = key_columns(t);
        let settable = t.replicated.is_none()
            && t.fts.is_empty()
            && t.generated.is_empty()
            && sets.iter().all(|(c, _)| {
                !key.contains(c) && !t.indexes.iter().any(|ix| ix.columns.contains(c))
            });
        if !settable {
            return Ok(None);
        }
        // The frame, the columns read and the new values in buffers kept across statements.
        let mut bufs = std::mem::take(&mut self.bufs.upsert);
        let r = self.upsert_with(t, other, row, sets, w, cache, &mut bufs);
        bufs.0.clear();
        bufs.1.clear();
        bufs.2.clear();
        self.bufs.upsert = bufs;
        r
    }

    /// `upsert_in_place` with its buffers: the frame, the columns read, the new values.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn upsert_with(
        &mut self,
        t: &Table,
        other: Upsert,
        row: &mut Vec<Value>,
        sets: &[(usize, PExpr)],
        w: Option<&PExpr>,
        cache: &Cache,
        (frame, reads, vals, layout): &mut (Vec<Value>, Vec<usize>, Vec<Value>, Layout),
    ) -> Result<Option<Option<bool>>> {
        let width = t.columns.len();
        let mut subquery = false;
        for e in sets.iter().map(|(_, e)| e).chain(w) {
            crate::plan::walk(e, &mut |x| match x {
                PExpr::InSub(..) | PExpr::Exists(..) | PExpr::SemiHash(..) | PExpr::Scalar(_) => {
                    subquery = true
                }
                PExpr::Col(c) if *c < width => reads.push(*c),
                _ => {}
            });
        }
        if subquery {
            return Ok(None);
        }
        cairn_store::sort::sort(reads);
        reads.dedup();
        let none = crate::storage::NoStore;
        let cx = Cx {
            store: &none,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache,
            regroup: None,
        };
        // Where each column's new value is in `vals`: the last SET of it wins.
        let value_of = |c: usize| sets.iter().rposition(|(s, _)| *s == c);
        vals.reserve(sets.len());
        let mut updated = false;
        let mut f = |_: &[u8], v: &[u8], out: &mut Vec<u8>| -> Result<Each> {
            // Built here, where the row is known to be updated: an insert keeps `row`.
            frame.reserve(width + row.len());
            null_frame(frame, width);
            frame.append(row);
            let rec = layout.read_all(v)?;
            for &c in &*reads {
                rec.get_into(c, &mut frame[c])?;
            }
            if let Some(w) = w {
                if eval_bool(w, frame, &cx)? != Some(true) {
                    return Ok(Each::Keep);
                }
            }
            for (_, e) in sets {
                vals.push(eval_owned(e, frame, &cx)?);
            }
            // In column order, as a whole row is checked.
            for c in 0..width {
                if let Some(j) = value_of(c) {
                    Self::check_column(t, c, &mut vals[j])?;
                }
            }
            rec.rewrite_into(v, width, |c| value_of(c).map(|j| &vals[j]), out)?;
            updated = true;
            Ok(if out.as_slice() == v {
                Each::Keep
            } else {
                Each::Write
            })
        };
        match other {
            Upsert::At(other) => {
                let k = Bound::Included(other);
                self.store.update_each(t.tree, k, k, &mut f)?;
            }
            Upsert::Put(pk, rec) => {
                if self
                    .store
                    .put_new_or_rewrite(t.tree, pk, rec, &mut f)?
                    .is_none()
                {
                    return Ok(Some(None));
                }
            }
        }
        Ok(Some(Some(updated)))
    }

    pub(super) fn returning(
        &self,
        exprs: &[PExpr],
        row: &[Value],
        cache: &Cache,
        res: &mut WriteResult,
    ) -> Result<()> {
        if exprs.is_empty() {
            return Ok(());
        }
        let cx = self.cx(cache);
        res.returned.push(eval_row(exprs, row, &cx)?);
        Ok(())
    }
}
