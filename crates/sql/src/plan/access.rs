//! Access paths: for each join level, the primary key, an index (covering or not), a hash
//! join or a scan, from the conjuncts placed on it and the order the query wants; and top-k.

use crate::parse::ast::BinOp;
use crate::plan::walk::{self, has_subquery, slots};
use crate::plan::*;
use crate::schema::Table;
use crate::types::{Affinity, ColType};
use std::rc::Rc;

fn succ(mut p: Vec<u8>) -> Option<Vec<u8>> {
    while let Some(&last) = p.last() {
        if last == 0xFF {
            p.pop();
        } else {
            *p.last_mut().expect("non-empty") += 1;
            return Some(p);
        }
    }
    None
}
pub(crate) fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    succ(p.to_vec())
}

/// The first level's columns (with direction and NULLs order) that ORDER BY sorts by, when
/// every sort key is a plain column of that level.
// Loops rather than `collect::<Option<Vec<_>>>()`: each such collect is its own copy of
// the iterator code in the module.
pub(super) fn order_slots(
    order: &[SortKey],
    project: &[PExpr],
    levels: &[Level],
) -> Option<Vec<(usize, bool, bool)>> {
    if order.is_empty() || levels.is_empty() {
        None
    } else {
        let mut slots = Some(Vec::new());
        for k in order {
            match (level_slot(project.get(k.col), &levels[0]), &mut slots) {
                (Some(s), Some(v)) => v.push((s, k.desc, k.nulls_first)),
                _ => {
                    slots = None;
                    break;
                }
            }
        }
        slots
    }
}

/// GROUP BY over one table whose columns an index orders: the columns, for the groups to be
/// streamed.
pub(super) fn group_slots(
    agg: Option<&AggPlan>,
    levels: &[Level],
) -> Option<Vec<(usize, bool, bool)>> {
    match agg {
        Some(a) if !a.group_by.is_empty() && levels.len() == 1 => {
            let mut slots = Some(Vec::new());
            for g in &a.group_by {
                match (level_slot(Some(g), &levels[0]), &mut slots) {
                    (Some(s), Some(v)) => v.push((s, false, true)),
                    _ => {
                        slots = None;
                        break;
                    }
                }
            }
            slots
        }
        _ => None,
    }
}

/// Chooses each level's access path and splits its needed columns into those its filters
/// read first and the rest; returns whether the first level's access yields `first_order`.
/// Without `outer_keys`, a condition that reads an enclosing query's row serves no key or
/// index (the build side of a hash semi-join, see `join::probes_outer`).
pub(super) fn choose_accesses(
    levels: &mut [Level],
    needed: &[Vec<bool>],
    first_order: Option<&[(usize, bool, bool)]>,
    outer_keys: bool,
) -> bool {
    let mut order_served = false;
    for li in 0..levels.len() {
        let (access, served, consumed) = choose_access(
            levels,
            li,
            &needed[li],
            if li == 0 { first_order } else { None },
            outer_keys,
        );
        if li == 0 {
            order_served = served;
        }
        let lvl = &mut levels[li];
        lvl.access = access;
        remove_consumed(&mut lvl.filters, consumed);
        let mut pre = vec![false; lvl.width];
        let mut all = false;
        for f in &lvl.filters {
            if has_subquery(f) {
                all = true;
            }
            for s in slots(f) {
                if s >= lvl.base && s < lvl.base + lvl.width {
                    pre[s - lvl.base] = true;
                }
            }
        }
        if let Access::Hash { .. } = lvl.access {
            all = true;
        }
        for c in 0..lvl.width {
            if all && needed[li][c] {
                pre[c] = true;
            }
        }
        lvl.pre_cols = (0..lvl.width).filter(|&c| pre[c]).collect();
        lvl.post_cols = (0..lvl.width)
            .filter(|&c| needed[li][c] && !pre[c])
            .collect();
    }
    order_served
}

/// Top-k, for an unordered ORDER BY ... LIMIT without aggregates or DISTINCT: marks the
/// level's first sort key for the executor to keep only the best rows.
pub(super) fn top_k(levels: &mut [Level], order: &[SortKey], project: &[PExpr]) {
    // Top-k: ORDER BY ... LIMIT over one table, sorted in the executor, whose first sort
    // key is a plain column of that table.
    if levels.len() == 1 {
        let lvl = &mut levels[0];
        let first = order
            .first()
            .and_then(|k| Some((k, level_slot(project.get(k.col), lvl)?)));
        if let (Some((k, col)), Source::Table(_), Access::Scan { .. } | Access::Index { .. }) =
            (first, &lvl.source, &lvl.access)
        {
            if let Some(i) = lvl.post_cols.iter().position(|&p| p == col) {
                lvl.post_cols.remove(i);
                lvl.pre_cols.push(col);
                cairn_store::sort::sort(&mut lvl.pre_cols);
            }
            if lvl.pre_cols.contains(&col) {
                lvl.topk = Some(SortKey { col, ..k.clone() });
            }
        }
    }
}

/// A conjunct's usable shape for an index: column (table-relative) compared with an expression
/// that does not depend on this level or later ones.
enum Usable {
    Eq(usize, PExpr, Affinity),
    In(usize, Vec<PExpr>, Affinity),
    Range(usize, BinOp, PExpr),
    InSub(usize, Rc<QueryPlan>, Affinity),
}

/// Whether frame slot `s` belongs to a level joined before level `li` (bound when `li` runs).
fn bound_before(levels: &[Level], li: usize, s: usize) -> bool {
    levels[..li]
        .iter()
        .any(|l| s >= l.base && s < l.base + l.width)
}

fn independent(e: &PExpr, levels: &[Level], li: usize) -> bool {
    !has_subquery(e) && slots(e).iter().all(|&s| bound_before(levels, li, s))
}

fn usable(f: &PExpr, levels: &[Level], li: usize) -> Option<Usable> {
    let lvl = &levels[li];
    let local = |e: &PExpr| level_slot(Some(e), lvl);
    match f {
        PExpr::Cmp(op, a, b, la, lb) => {
            let flip = |op: BinOp| match op {
                BinOp::Lt => BinOp::Gt,
                BinOp::Le => BinOp::Ge,
                BinOp::Gt => BinOp::Lt,
                BinOp::Ge => BinOp::Le,
                o => o,
            };
            let (col, other, op, col_aff, other_aff) = if let Some(c) = local(a) {
                (c, b, *op, *la, *lb)
            } else if let Some(c) = local(b) {
                (c, a, flip(*op), *lb, *la)
            } else {
                return None;
            };
            if col_aff != Affinity::None || !independent(other, levels, li) {
                return None;
            }
            match op {
                BinOp::Eq => Some(Usable::Eq(col, (**other).clone(), other_aff)),
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    Some(Usable::Range(col, op, affine((**other).clone(), other_aff)))
                }
                _ => None,
            }
        }
        PExpr::InList(a, list, false, aff) => {
            let c = local(a)?;
            if list.is_empty()
                || list.len() > 1000
                || !list.iter().all(|e| independent(e, levels, li))
            {
                return None;
            }
            Some(Usable::In(c, list.clone(), *aff))
        }
        // `col IN (SELECT ...)` with no conversion of the column: probe with the subquery's
        // values. Correlated subqueries change per outer row and are not used this way.
        PExpr::InSub(a, q, false, Affinity::None, lb) if !q.correlated => {
            let c = local(a)?;
            Some(Usable::InSub(c, q.clone(), *lb))
        }
        _ => None,
    }
}

/// The column of `lvl` that `e` reads, counted from the level's first column, if `e` is a plain
/// column of that level; or if `e` is a key part of one of its table's indexes on expressions,
/// that part's number past the table's columns ([`expr_parts`]), so that an index on an
/// expression serves conditions on and orders by the same expression as one on a column does.
fn level_slot(e: Option<&PExpr>, lvl: &Level) -> Option<usize> {
    match (e, &lvl.source) {
        (Some(PExpr::Col(s)), _) if *s >= lvl.base && *s < lvl.base + lvl.width => {
            Some(*s - lvl.base)
        }
        (Some(e), Source::Table(t)) if !matches!(e, PExpr::Col(_) | PExpr::Lit(_)) => expr_parts(t)
            .find(|(_, p)| same_at(p, lvl.base, e))
            .map(|(id, _)| id),
        _ => None,
    }
}

/// Each key part of `t`'s indexes on expressions, numbered from `t.columns.len()` on in index
/// order: the access paths' name for it, as a column number is a column's.
fn expr_parts(t: &Table) -> impl Iterator<Item = (usize, &PExpr)> {
    t.indexes
        .iter()
        .flat_map(|ix| ix.exprs.iter().map(|e| &e.plan))
        .enumerate()
        .map(move |(k, p)| (t.columns.len() + k, p))
}

/// Whether `e`, planned over a frame where the table starts at slot `base`, is the index
/// expression `part` (planned over the table's row alone).
fn same_at(part: &PExpr, base: usize, e: &PExpr) -> bool {
    let mut p = part.clone();
    walk::rewrite(&mut p, &mut |x| {
        if let PExpr::Col(c) = x {
            *c += base;
            return true;
        }
        false
    });
    p == *e
}

/// Chooses the access path of level `li`; also says whether it yields rows in `order` (only
/// asked for the first level).
pub(super) fn choose_access(
    levels: &[Level],
    li: usize,
    needed: &[bool],
    order: Option<&[(usize, bool, bool)]>,
    outer_keys: bool,
) -> (Access, bool, Vec<usize>) {
    let lvl = &levels[li];
    // Each usable conjunct with its position in the level's filters.
    let uses: Vec<(usize, Usable)> = lvl
        .filters
        .iter()
        .enumerate()
        .filter(|(_, f)| outer_keys || !walk::reads_outer(f))
        .filter_map(|(i, f)| usable(f, levels, li).map(|u| (i, u)))
        .collect();
    let table = match &lvl.source {
        Source::Table(t) => t.clone(),
        Source::Query(_) => {
            return (hash_or_scan(levels, li), false, vec![]);
        }
        // Its rows depend on the levels before it: never hashed once.
        Source::Json { .. } | Source::Fts { .. } => {
            return (Access::Scan { reverse: false }, false, vec![])
        }
    };
    // Candidate key orders: the primary tree (None) and each index.
    let mut cands: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
    let pk = table.key_columns();
    if !pk.is_empty() {
        cands.push((None, pk.clone()));
    }
    for i in 0..table.indexes.len() {
        cands.push((Some(i), access_columns(&table, Some(i))));
    }
    let mut best: Option<(i64, Access, bool, Vec<usize>)> = None;
    for (index, cols) in &cands {
        let mut sub_probe: Option<(Rc<QueryPlan>, Affinity)> = None;
        // Filters the key range implements exactly (so they need no check per row).
        let mut consumed: Vec<usize> = Vec::new();
        let mut probes: Vec<Vec<PExpr>> = vec![vec![]];
        let mut eq_cols = Vec::new();
        let mut lower = None;
        let mut upper = None;
        let key_len = match index {
            Some(i) => table.indexes[*i].width(),
            None => pk.len(),
        };
        for (pos, &c) in cols.iter().enumerate().take(key_len) {
            let eq = uses.iter().find_map(|(i, u)| match u {
                Usable::Eq(col, e, aff) if *col == c => Some((*i, vec![affine(e.clone(), *aff)])),
                _ => None,
            });
            let inl = uses.iter().find_map(|(i, u)| match u {
                Usable::In(col, l, aff) if *col == c => Some((
                    *i,
                    l.iter()
                        .map(|e| affine(e.clone(), *aff))
                        .collect::<Vec<_>>(),
                )),
                _ => None,
            });
            let insub = uses.iter().find_map(|(i, u)| match u {
                Usable::InSub(col, q, aff) if *col == c && pos == 0 => {
                    Some((*i, (q.clone(), *aff)))
                }
                _ => None,
            });
            let alts = match (eq, inl) {
                (Some((i, e)), _) => {
                    consumed.push(i);
                    e
                }
                (None, Some((i, l))) if probes.len() * l.len() <= 1000 => {
                    consumed.push(i);
                    l
                }
                (None, None) if insub.is_some() => {
                    let (i, sp) = insub.expect("checked");
                    consumed.push(i);
                    sub_probe = Some(sp);
                    eq_cols.push(c);
                    break;
                }
                _ => {
                    for (i, u) in &uses {
                        if let Usable::Range(col, op, e) = u {
                            if *col == c {
                                match op {
                                    BinOp::Gt | BinOp::Ge if lower.is_none() => {
                                        consumed.push(*i);
                                        lower = Some((e.clone(), *op == BinOp::Ge))
                                    }
                                    BinOp::Lt | BinOp::Le if upper.is_none() => {
                                        consumed.push(*i);
                                        upper = Some((e.clone(), *op == BinOp::Le))
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                    break;
                }
            };
            probes = probes
                .iter()
                .flat_map(|p| {
                    alts.iter().map(move |a| {
                        let mut p = p.clone();
                        p.push(a.clone());
                        p
                    })
                })
                .collect();
            eq_cols.push(c);
            let _ = pos;
        }
        // Keys normalize integral reals to integers, so an ANY or NUMERIC column's type can only
        // be read from the row.
        let covering = index.is_none()
            || needed.iter().enumerate().all(|(c, &n)| {
                !n || (cols.contains(&c)
                    && !matches!(table.columns[c].ty, ColType::Any | ColType::Numeric))
            });
        // Does this order serve ORDER BY?
        let mut serves = false;
        let mut reverse = false;
        if let Some(ord) = order {
            if probes.len() == 1 && sub_probe.is_none() {
                let rest: Vec<usize> = cols
                    .iter()
                    .copied()
                    .filter(|c| !eq_cols.contains(c))
                    .collect();
                let terms: Vec<&(usize, bool, bool)> = ord
                    .iter()
                    .filter(|(s, _, _)| !eq_cols.contains(s))
                    .collect();
                let dir = terms.first().is_some_and(|t| t.1);
                serves = terms.len() <= rest.len()
                    && terms
                        .iter()
                        .zip(&rest)
                        .all(|((s, d, nf), c)| s == c && *d == dir && *nf != dir);
                reverse = dir;
            }
        }
        let eqn = eq_cols.len() as i64;
        if eqn == 0 && lower.is_none() && upper.is_none() && !serves {
            continue;
        }
        let unique_hit = match index {
            None => eqn as usize == key_len,
            Some(i) => table.indexes[*i].unique && eqn as usize == key_len,
        };
        let mut score = eqn * 100 + (lower.is_some() as i64 + upper.is_some() as i64) * 30;
        if unique_hit {
            score += 1000;
        }
        if covering {
            score += 5;
        }
        if index.is_none() {
            score += 3;
        }
        if serves {
            score += 10;
        }
        if probes.len() > 1 {
            score -= 1;
        }
        if best.as_ref().is_none_or(|b| score > b.0) {
            best = Some((
                score,
                Access::Index {
                    index: *index,
                    probes,
                    lower,
                    upper,
                    reverse,
                    covering: covering && index.is_some(),
                    sub_probe,
                },
                serves,
                consumed,
            ));
        }
    }
    if let Some((_, a, serves, consumed)) = best {
        return (a, serves, consumed);
    }
    let scan_serves = false;
    (hash_or_scan(levels, li), scan_serves, vec![])
}

/// Drops the filters an index range implements exactly. Sound because the range is built
/// from the same expressions with the comparison's affinity applied, keys order values as SQL
/// compares them (equal numbers have equal keys), and NULLs fall outside every range: so a row
/// is in the range exactly when those conjuncts are true.
pub(super) fn remove_consumed(filters: &mut Vec<PExpr>, mut consumed: Vec<usize>) {
    cairn_store::sort::sort(&mut consumed);
    consumed.dedup();
    for i in consumed.into_iter().rev() {
        filters.remove(i);
    }
}

/// Wraps a probe expression so the executor applies the comparison's affinity to it.
fn affine(e: PExpr, aff: Affinity) -> PExpr {
    match aff {
        Affinity::None | Affinity::Blob => e,
        a => PExpr::Affine(Box::new(e), a),
    }
}

fn hash_or_scan(levels: &[Level], li: usize) -> Access {
    let lvl = &levels[li];
    if li > 0 {
        for f in &lvl.filters {
            if let PExpr::Cmp(BinOp::Eq, a, b, la, lb) = f {
                let local = |e: &PExpr| {
                    let s = slots(e);
                    !s.is_empty()
                        && !has_subquery(e)
                        && s.iter().all(|&s| s >= lvl.base && s < lvl.base + lvl.width)
                };
                let outer = |e: &PExpr| {
                    let s = slots(e);
                    !s.is_empty()
                        && !has_subquery(e)
                        && s.iter().all(|&s| bound_before(levels, li, s))
                };
                // Both sides are hashed after the comparison's affinities are applied, so
                // equal keys mean the comparison holds.
                if local(a) && outer(b) {
                    return Access::Hash {
                        build: affine((**a).clone(), *la),
                        probe: affine((**b).clone(), *lb),
                    };
                }
                if local(b) && outer(a) {
                    return Access::Hash {
                        build: affine((**b).clone(), *lb),
                        probe: affine((**a).clone(), *la),
                    };
                }
            }
        }
    }
    Access::Scan { reverse: false }
}

/// The key columns of `t` in tree order for an access path (an index's key parts on
/// expressions numbered as [`expr_parts`] numbers them).
pub fn access_columns(t: &Table, index: Option<usize>) -> Vec<usize> {
    let pk = t.key_columns();
    match index {
        None => pk,
        Some(i) if !t.indexes[i].exprs.is_empty() => {
            let first = t.columns.len()
                + (t.indexes[..i].iter())
                    .map(|ix| ix.exprs.len())
                    .sum::<usize>();
            let mut c: Vec<usize> = (first..first + t.indexes[i].exprs.len()).collect();
            c.extend(pk);
            c
        }
        Some(i) => {
            let mut c = t.indexes[i].columns.clone();
            c.extend(pk);
            c
        }
    }
}
