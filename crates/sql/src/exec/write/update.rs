//! UPDATE and DELETE: their target rows, and rows rewritten where they are stored.

use crate::error::{Error, Result};
use crate::exec::capture::same_value;
use crate::exec::eval::{eval, push_norm, Cache, Cx};
use crate::exec::scan::{
    bound_ref, index_ranges, null_frame, nulls, point_key_into, point_keys, point_width,
    row_passes, run_levels, Range, RowFilter,
};
use crate::exec::write::{PointBufs, PointKeys, Targets, WriteResult, Writer};
use crate::parse::ast::Conflict;
use crate::plan::*;
use crate::schema::{Key, Table};
use crate::storage::Each;
use cairn_value::codec::{encode_key, encode_record_into};
use cairn_value::Value;
use std::ops::Bound;

impl Writer<'_> {
    /// Replaces the row at `old_pk` (`old`, or empty when neither an index nor the capture
    /// reads it) with `new`, checked and coerced in place; false when OR IGNORE skipped it.
    /// `rec` is a buffer for the new record, reused from row to row.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_row(
        &mut self,
        t: &Table,
        old_pk: &[u8],
        old: &[Value],
        new: &mut [Value],
        or: Conflict,
        checks: &[PExpr],
        cache: &Cache,
        rec: &mut Vec<u8>,
    ) -> Result<bool> {
        if let Key::Rowid(Some(c)) = t.key {
            if new[c].is_null() {
                return Err(Error::Type(format!(
                    "{}.{} (the row id) cannot be NULL",
                    t.name, t.columns[c].name
                )));
            }
        }
        match self.check_row(t, new, checks, cache) {
            Ok(()) => {}
            Err(Error::ConstraintNotNull(_) | Error::ConstraintCheck(_))
                if or == Conflict::Ignore =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        }
        let new_pk: std::borrow::Cow<[u8]> = match &t.key {
            Key::Rowid(None) => old_pk.into(),
            Key::Rowid(Some(c)) => encode_key(std::slice::from_ref(&new[*c])).into(),
            Key::Columns(cols) => {
                let mut k = Vec::new();
                for &c in cols {
                    push_norm(&new[c], &mut k);
                }
                k.into()
            }
        };
        while let Some((constraint, other)) = self.find_conflict(t, &new_pk, new, &[old_pk])? {
            match or {
                Conflict::Ignore => return Ok(false),
                Conflict::Replace => {
                    let o = self.load_row(t, &other)?;
                    self.delete_row(t, &other, &o)?;
                }
                Conflict::Abort => return Err(Self::unique_error(t, constraint)),
            }
        }
        if *new_pk != *old_pk {
            self.delete_row(t, old_pk, old)?;
            self.put_row(t, &new_pk, new)?;
        } else {
            self.capture_set(t, Some(old), new)?;
            rec.clear();
            encode_record_into(rec, new);
            self.store.put(t.tree, &new_pk, rec)?;
            if t.fts
                .iter()
                .any(|f| f.src.iter().any(|&c| !same_value(&old[c], &new[c])))
            {
                self.index_text(t, old_pk, old, false)?;
                self.index_text(t, &new_pk, new, true)?;
            }
            for i in 0..t.indexes.len() {
                let changed = t.indexes[i]
                    .columns
                    .iter()
                    .any(|&c| !same_value(&old[c], &new[c]));
                if changed {
                    self.store
                        .delete(t.indexes[i].tree, &Self::index_key(t, i, old, old_pk)?)?;
                    self.store.put(
                        t.indexes[i].tree,
                        &Self::index_key(t, i, new, &new_pk)?,
                        &[],
                    )?;
                }
            }
        }
        Ok(true)
    }

    /// The rows a write changes: their primary keys, and the rows themselves when `rows`.
    fn targets(&self, p: &WritePlan, rows: bool, cache: &Cache) -> Result<Targets> {
        let cx = self.cx(cache);
        let width = p.table.columns.len();
        let mut out = Targets {
            keys: Vec::new(),
            ends: Vec::new(),
            rows: Vec::new(),
            width: if rows { width } else { 0 },
        };
        let mut frame = nulls(p.scan.frame_len);
        run_levels(&p.scan, 0, &mut frame, &cx, &mut |frame| {
            let Value::Blob(pk) = &frame[width] else {
                return Err(Error::Invalid("invariant: key slot holds the key".into()));
            };
            out.keys.extend_from_slice(pk);
            out.ends.push(out.keys.len());
            if rows {
                out.rows.extend_from_slice(&frame[..width]);
            }
            Ok(true)
        })?;
        Ok(out)
    }

    pub fn update(&mut self, p: &WritePlan, checks: &[PExpr]) -> Result<WriteResult> {
        if p.keys_only && checks.is_empty() {
            return self.update_in_place(p);
        }
        let cache = Cache::default();
        let mut targets = self.targets(p, true, &cache)?;
        let mut res = WriteResult::default();
        let t = &p.table;
        // The old row is read only to take index entries out and by the capture; without
        // either, the new row is the old one changed in place, not a copy of it.
        let keep_old = !t.indexes.is_empty()
            || !t.fts.is_empty()
            || (t.replicated.is_some() && self.capture.is_some());
        let mut vals = Vec::with_capacity(p.set.len());
        let (mut new, mut rec) = (Vec::with_capacity(targets.width), Vec::new());
        for i in 0..targets.len() {
            let (pk, old) = targets.get_mut(i);
            // An earlier row's REPLACE may have deleted this one.
            if p.or == Conflict::Replace && self.store.get(p.table.tree, pk)?.is_none() {
                continue;
            }
            // Every SET expression reads the old row, so all are evaluated before any is stored.
            vals.clear();
            {
                let cx = self.cx(&cache);
                for (_, e) in &p.set {
                    vals.push(eval(e, old, &cx)?.into_owned());
                }
            }
            new.clear();
            let old: &[Value] = if keep_old {
                new.extend_from_slice(old);
                old
            } else {
                new.extend(old.iter_mut().map(|v| std::mem::replace(v, Value::Null)));
                &[]
            };
            for ((c, _), v) in p.set.iter().zip(vals.drain(..)) {
                new[*c] = v;
            }
            if self.update_row(t, pk, old, &mut new, p.or, checks, &cache, &mut rec)? {
                res.changes += 1;
                self.returning(&p.returning, &new, &cache, &mut res)?;
            }
        }
        Ok(res)
    }

    pub fn delete(&mut self, p: &WritePlan) -> Result<WriteResult> {
        let cache = Cache::default();
        let t = &p.table;
        // The deleted row is read for RETURNING, to find its index entries, and by the
        // capture; with none of them, its key is all a delete needs.
        let rows = !p.returning.is_empty()
            || !t.indexes.is_empty()
            || !t.fts.is_empty()
            || (t.replicated.is_some() && self.capture.is_some());
        if p.keys_only && !rows {
            let mut bufs = std::mem::take(&mut self.bufs.point);
            let keys = self.point_targets(p, &mut bufs.frame, &mut bufs.key, &cache);
            let done = match keys {
                Ok(Some(keys)) => {
                    let mut res = WriteResult::default();
                    let mut r = Ok(());
                    for k in keys.as_slice() {
                        match self.store.delete(t.tree, k) {
                            Ok(gone) => res.changes += u64::from(gone),
                            Err(e) => {
                                r = Err(e);
                                break;
                            }
                        }
                    }
                    bufs.give_back(keys);
                    Some(r.map(|()| res))
                }
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            };
            bufs.clear();
            self.bufs.point = bufs;
            if let Some(r) = done {
                return r;
            }
            if let Some(range) = self.scan_range(p, &cache)? {
                return self.delete_range(p, range, &cache);
            }
        }
        let mut targets = self.targets(p, rows, &cache)?;
        let mut res = WriteResult::default();
        for i in 0..targets.len() {
            let (pk, old) = targets.get_mut(i);
            self.returning(&p.returning, old, &cache, &mut res)?;
            self.delete_row(&p.table, pk, old)?;
            res.changes += 1;
        }
        Ok(res)
    }

    /// The primary keys a write names outright (`WHERE id = ?`, `WHERE id IN (...)`, with no
    /// other condition), for a write that needs only keys: it goes to each key directly, and
    /// a key without a row is skipped there, instead of a look-up first. None for any other
    /// scan.
    /// `frame` is scratch for evaluating the keys (the caller's row frame, reused); a single
    /// key is made in `key`'s buffer (the caller gets it back with `PointBufs::give_back`).
    fn point_targets(
        &self,
        p: &WritePlan,
        frame: &mut Vec<Value>,
        key: &mut Vec<u8>,
        cache: &Cache,
    ) -> Result<Option<PointKeys>> {
        let c = &p.scan;
        let [lvl] = c.levels.as_slice() else {
            return Ok(None);
        };
        let Access::Index {
            index: None,
            probes,
            lower: None,
            upper: None,
            reverse,
            sub_probe: None,
            ..
        } = &lvl.access
        else {
            return Ok(None);
        };
        if !lvl.filters.is_empty() || !lvl.after.is_empty() || !c.const_filters.is_empty() {
            return Ok(None);
        }
        null_frame(frame, c.frame_len);
        if let [probe] = probes.as_slice() {
            if point_width(&p.table) == Some(probe.len()) {
                let mut k = std::mem::take(key);
                k.clear();
                let named = point_key_into(probe, frame, &self.cx(cache), &mut k)?;
                return Ok(named.map(|named| match named {
                    true => PointKeys::One(k),
                    false => PointKeys::Many(Vec::new()),
                }));
            }
        }
        let keys = point_keys(&p.table, probes, frame, &self.cx(cache))?;
        Ok(keys.map(|mut k| {
            if *reverse {
                k.reverse();
            }
            PointKeys::Many(k)
        }))
    }

    /// The one range of primary keys a write's scan walks (the whole table, or a range of
    /// keys: `WHERE id BETWEEN ? AND ?`), when its filters can be tested on each row without
    /// reading the store (no subquery); `Some(None)` when no key can match. None for any
    /// other scan.
    fn scan_range(&self, p: &WritePlan, cache: &Cache) -> Result<Option<Option<Range>>> {
        let c = &p.scan;
        let [lvl] = c.levels.as_slice() else {
            return Ok(None);
        };
        if !lvl.after.is_empty() || !c.const_filters.is_empty() {
            return Ok(None);
        }
        if lvl.filters.iter().any(crate::plan::has_subquery) {
            return Ok(None);
        }
        match &lvl.access {
            Access::Scan { .. } => Ok(Some(Some((Bound::Unbounded, Bound::Unbounded)))),
            Access::Index {
                index: None,
                probes,
                lower,
                upper,
                sub_probe: None,
                ..
            } => {
                let frame = nulls(c.frame_len);
                let mut ranges = index_ranges(probes, lower, upper, &frame, &self.cx(cache))?;
                if ranges.len() > 1 {
                    return Ok(None);
                }
                Ok(Some(ranges.pop()))
            }
            _ => Ok(None),
        }
    }

    /// DELETE of a `keys_only` plan over one range of keys (`scan_range`), in one walk
    /// ([`Storage::update_each`]): each row's filters are tested where it is stored, and the
    /// row removed there, instead of a scan that collects keys and a removal per key. As for
    /// `update_in_place`, the filters have no subquery, so they get an empty store.
    fn delete_range(
        &mut self,
        p: &WritePlan,
        range: Option<Range>,
        cache: &Cache,
    ) -> Result<WriteResult> {
        let mut res = WriteResult::default();
        let Some((lo, hi)) = range else {
            return Ok(res);
        };
        let lvl = &p.scan.levels[0];
        let none = crate::storage::NoStore;
        let cx = Cx {
            store: &none,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache,
            regroup: None,
        };
        let mut frame = nulls(p.scan.frame_len);
        let mut rf = RowFilter::new(lvl, &frame, &cx);
        let mut f = |k: &[u8], v: &[u8], _: &mut Vec<u8>| -> Result<Each> {
            if !lvl.filters.is_empty() && !row_passes(lvl, &mut rf, (k, v), &mut frame, &cx)? {
                return Ok(Each::Keep);
            }
            Ok(Each::Remove)
        };
        res.changes =
            self.store
                .update_each(p.table.tree, bound_ref(&lo), bound_ref(&hi), &mut f)?;
        Ok(res)
    }

    /// UPDATE of a `keys_only` plan, each row rewritten where it is stored
    /// ([`Storage::update_each`]): its new record is made from the old one in the leaf, only
    /// the columns the SET expressions read are decoded, and `Fields::rewrite_into` copies the
    /// other columns' bytes (the whole record, with the new values written over the old ones,
    /// when they are as long). No index entry changes (no indexed column is set) and no key
    /// changes, so no constraint but a column's type and NOT NULL can fail. The rows are
    /// the keys a `WHERE id = ?` names, or one range of keys walked in one pass (the whole
    /// table, `WHERE id BETWEEN ? AND ?`) with the filters tested on each row there, or else
    /// the keys the scan collects. The expressions cannot read the store while it is being
    /// written, and need not: neither the SET expressions (`keys_only`) nor the filters tested
    /// in the walk (`scan_range`) have a subquery, so they get an empty store.
    fn update_in_place(&mut self, p: &WritePlan) -> Result<WriteResult> {
        let mut bufs = std::mem::take(&mut self.bufs.point);
        let r = self.update_in_place_with(p, &mut bufs);
        bufs.clear();
        self.bufs.point = bufs;
        r
    }

    /// `update_in_place` with its buffers.
    fn update_in_place_with(&mut self, p: &WritePlan, bufs: &mut PointBufs) -> Result<WriteResult> {
        enum Rows {
            /// Keys named outright.
            Points(PointKeys),
            /// Keys a scan collected, end to end, and where each ends.
            Keys(Vec<u8>, Vec<usize>),
            Range(Option<Range>),
        }
        let cache = Cache::default();
        let PointBufs {
            frame,
            key,
            value_of,
            vals,
            layout,
        } = bufs;
        let rows = match self.point_targets(p, frame, key, &cache)? {
            Some(keys) => Rows::Points(keys),
            None => match self.scan_range(p, &cache)? {
                Some(range) => Rows::Range(range),
                None => {
                    let targets = self.targets(p, false, &cache)?;
                    Rows::Keys(targets.keys, targets.ends)
                }
            },
        };
        let t = &p.table;
        let lvl = &p.scan.levels[0];
        let width = t.columns.len();
        // Where each column's new value is in `vals`: the last SET of it wins, as in SQLite.
        value_of.clear();
        value_of.resize(width, None);
        for (j, (c, _)) in p.set.iter().enumerate() {
            value_of[*c] = Some(j);
        }
        // Keys named outright or collected by a scan have passed the filters already.
        let filtered = matches!(rows, Rows::Range(_)) && !lvl.filters.is_empty();
        // A replicated table's capture reads the old values of the columns set, the key and
        // the scope column, which the planner adds to `set_reads`. It keeps a table with
        // counters, or an UPDATE of the scope column, off this path.
        let mut cap = match (&t.replicated, self.capture.as_deref_mut()) {
            (Some(_), Some(cap)) => Some(cap),
            _ => None,
        };
        let none = crate::storage::NoStore;
        let cx = Cx {
            store: &none,
            params: self.params,
            outer: None,
            rng: self.rng,
            cache: &cache,
            regroup: None,
        };
        // Keys named outright left the frame as this needs it.
        if frame.len() != p.scan.frame_len {
            null_frame(frame, p.scan.frame_len);
        }
        let mut rf = filtered.then(|| RowFilter::new(lvl, frame, &cx));
        let mut changes = 0;
        let mut f = |k: &[u8], v: &[u8], out: &mut Vec<u8>| -> Result<Each> {
            if let Some(rf) = &mut rf {
                if !row_passes(lvl, rf, (k, v), frame, &cx)? {
                    return Ok(Each::Keep);
                }
            }
            let row = layout.read_all(v)?;
            for &c in &p.set_reads {
                row.get_into(c, &mut frame[c])?;
            }
            vals.clear();
            for (_, e) in &p.set {
                vals.push(eval(e, frame, &cx)?.into_owned());
            }
            // In column order, as a whole row is checked.
            for (c, j) in value_of.iter().enumerate() {
                let Some(j) = *j else { continue };
                match Self::check_column(t, c, &mut vals[j]) {
                    Ok(()) => {}
                    Err(Error::ConstraintNotNull(_)) if p.or == Conflict::Ignore => {
                        return Ok(Each::Keep)
                    }
                    Err(e) => return Err(e),
                }
            }
            row.rewrite_into(v, width, |c| value_of[c].map(|j| &vals[j]), out)?;
            if let Some(cap) = &mut cap {
                cap.push_in_place(t, &frame[..width], |c| value_of[c].map(|j| &vals[j]));
            }
            changes += 1;
            // A row set to what it holds counts as changed (as in SQLite) but is not written.
            Ok(if out.as_slice() == v {
                Each::Keep
            } else {
                Each::Write
            })
        };
        match rows {
            Rows::Range(None) => {}
            Rows::Range(Some((lo, hi))) => {
                self.store
                    .update_each(t.tree, bound_ref(&lo), bound_ref(&hi), &mut f)?;
            }
            Rows::Points(keys) => {
                let mut r = Ok(0);
                for k in keys.as_slice() {
                    let k = Bound::Included(k.as_slice());
                    r = self.store.update_each(t.tree, k, k, &mut f);
                    if r.is_err() {
                        break;
                    }
                }
                if let PointKeys::One(k) = keys {
                    *key = k;
                }
                r?;
            }
            Rows::Keys(keys, ends) => {
                let mut start = 0;
                for end in ends {
                    let k = Bound::Included(&keys[start..end]);
                    start = end;
                    self.store.update_each(t.tree, k, k, &mut f)?;
                }
            }
        }
        Ok(WriteResult {
            changes,
            ..WriteResult::default()
        })
    }
}
