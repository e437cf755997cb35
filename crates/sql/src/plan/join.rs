//! Join order, and the placement of each WHERE and ON conjunct on a join level.

use crate::parse::ast::{self, BinOp};
use crate::plan::walk::{has_subquery, reads_outer, slots, walk};
use crate::plan::*;
use crate::types::Affinity;

/// Join order: inner joins only, greedily (see `join_order`). Without LEFT joins, ON is just
/// more WHERE, so every conjunct is freed from its level.
pub(super) fn reorder_joins(levels: &mut Vec<Level>, conjuncts: &mut [(PExpr, Option<usize>)]) {
    // A json_each level reads the levels before it: the written order stays.
    if levels.len() > 1
        && levels.len() <= 8
        && levels
            .iter()
            .all(|l| !l.left && !matches!(l.source, Source::Json { .. } | Source::Fts { .. }))
    {
        let order = join_order(levels, conjuncts);
        if order.iter().enumerate().any(|(i, &o)| i != o) {
            let mut old: Vec<Option<Level>> =
                std::mem::take(levels).into_iter().map(Some).collect();
            *levels = order
                .iter()
                .map(|&o| old[o].take().expect("a permutation"))
                .collect();
        }
        // Without LEFT joins, ON is just more WHERE.
        for c in conjuncts.iter_mut() {
            c.1 = None;
        }
    }
}

/// Places each conjunct on the first level where every column it reads is bound (an ON
/// conjunct no earlier than its own level, a LEFT level's after the join); returns those
/// that read no level.
pub(super) fn place_conjuncts(
    levels: &mut [Level],
    conjuncts: Vec<(PExpr, Option<usize>)>,
) -> Vec<PExpr> {
    let mut const_filters = Vec::new();
    let level_of = |slot: usize, levels: &[Level]| {
        levels
            .iter()
            .position(|l| slot >= l.base && slot < l.base + l.width)
            .unwrap_or(0)
    };
    for (e, on_level) in conjuncts {
        let refs: Vec<usize> = slots(&e).into_iter().map(|s| level_of(s, levels)).collect();
        let correlated_sub = has_subquery(&e);
        let max = if correlated_sub && !levels.is_empty() {
            levels.len() - 1
        } else {
            refs.iter().copied().max().unwrap_or(0)
        };
        match on_level {
            Some(l) => {
                let l = l.max(max);
                levels[l].filters.push(e);
            }
            None if levels.is_empty() || (refs.is_empty() && !correlated_sub) => {
                const_filters.push(e)
            }
            None => {
                if levels[max].left {
                    levels[max].after.push(e);
                } else {
                    levels[max].filters.push(e);
                }
            }
        }
    }
    const_filters
}

/// Orders inner-joined levels greedily: first the table a constant condition narrows best
/// (primary key or unique equality, then index equality, then a range), then at each step the
/// table the placed ones reach best (an equality on its key or an index, then any equality,
/// which can be hashed), ties kept in the written order. No statistics exist yet, so this
/// only looks at the shape of the conditions.
fn join_order(levels: &[Level], conjuncts: &[(PExpr, Option<usize>)]) -> Vec<usize> {
    let level_of = |slot: usize| {
        levels
            .iter()
            .position(|l| slot >= l.base && slot < l.base + l.width)
    };
    // How well a column can be looked up: 3 primary key/unique, 2 leading index column, 0 not.
    let lookup = |li: usize, col: usize| -> i32 {
        let Source::Table(t) = &levels[li].source else {
            return 0;
        };
        let pk = t.key_columns();
        if pk.len() == 1 && pk[0] == col {
            return 3;
        }
        let mut best = 0;
        for ix in &t.indexes {
            if ix.exprs.is_empty() && ix.columns.first() == Some(&col) {
                best = best.max(if ix.unique && ix.columns.len() == 1 {
                    3
                } else {
                    2
                });
            }
        }
        if pk.first() == Some(&col) {
            best = best.max(2);
        }
        best
    };
    // (level, column, other side's levels, op) for each comparison of a column.
    let mut facts: Vec<(usize, usize, Vec<usize>, BinOp)> = Vec::new();
    for (e, _) in conjuncts {
        if let PExpr::Cmp(op, a, b, _, _) = e {
            for (x, y) in [(a, b), (b, a)] {
                if let PExpr::Col(s) = **x {
                    let Some(li) = level_of(s) else { continue };
                    if has_subquery(y) {
                        continue;
                    }
                    let mut other: Vec<usize> = slots(y).into_iter().filter_map(level_of).collect();
                    cairn_store::sort::sort(&mut other);
                    other.dedup();
                    if other.contains(&li) {
                        continue;
                    }
                    facts.push((li, s - levels[li].base, other, *op));
                }
            }
        }
    }
    let mut placed: Vec<usize> = Vec::new();
    while placed.len() < levels.len() {
        let mut best: Option<(i32, usize)> = None;
        for li in 0..levels.len() {
            if placed.contains(&li) {
                continue;
            }
            let mut score = 0;
            for (l, col, other, op) in &facts {
                if *l != li || !other.iter().all(|o| placed.contains(o)) {
                    continue;
                }
                let joined = !other.is_empty();
                let s = match op {
                    BinOp::Eq => {
                        let k = lookup(li, *col);
                        if k > 0 {
                            k * 10 + joined as i32
                        } else if joined {
                            5
                        } else {
                            1
                        }
                    }
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge if lookup(li, *col) > 0 => 8,
                    _ => 1,
                };
                score = score.max(s);
            }
            // Once something is placed, a table no condition reaches would be a cross product.
            if !placed.is_empty() && score < 5 {
                score -= 100;
            }
            if best.is_none_or(|b| score > b.0) {
                best = Some((score, li));
            }
        }
        placed.push(best.expect("an unplaced level").1);
    }
    placed
}

/// `EXISTS (SELECT ... FROM t WHERE ... AND t.k = outer.c)` as a hash semi-join, when no index
/// serves that equality (the one table is scanned, or read by an index for its other
/// conditions): instead of a scan of `t` per outer row (or per distinct `c`, memoized), the
/// subquery without the equality, yielding `t.k`, runs once into a set that each outer row's
/// `c` is looked up in. The equality's comparison affinities become the set's and the probe's,
/// as `c IN (SELECT t.k ...)` applies them; unlike IN, a NULL finds nothing. Gives back the
/// outer column's slot and the two affinities (outer, inner) after rewriting `q` so, or None
/// (and `q` unchanged) when it is not of that shape.
pub(crate) fn semi_join(q: &mut QueryPlan) -> Option<(usize, Affinity, Affinity)> {
    let (i, slot, la, lb) = semi_shape(q)?;
    let Body::Core(c) = &mut q.body else {
        return None;
    };
    let PExpr::Cmp(_, a, b, _, _) = c.levels[0].filters.remove(i) else {
        return None;
    };
    let inner = if matches!(*a, PExpr::Outer(..)) {
        *b
    } else {
        *a
    };
    c.project = vec![inner];
    c.moves = 0;
    c.distinct = false;
    c.ordered = false;
    c.levels[0].topk = None;
    q.order.clear();
    q.limit = None;
    q.width = 1;
    q.columns = Rc::from(vec![String::new()]);
    q.affinities = vec![lb];
    q.correlated = false;
    q.memo = None;
    Some((slot, la, lb))
}

/// Whether a correlated subquery reads its one table through a key or an index probed with
/// the enclosing query's values (where [`semi_join`] finds no equality left among the filters).
/// Such a subquery runs as an adaptive hash semi-join: per outer row while those runs cost
/// less than the build, then from a set built once (`exec::eval`, `SemiHash`). In a
/// competitive sense (the ski-rental argument) this costs at most about twice the better of
/// the two plans, without knowing the outer row count in advance.
pub(crate) fn probes_outer(q: &QueryPlan) -> bool {
    let Body::Core(c) = &q.body else {
        return false;
    };
    match &c.levels[..] {
        [Level {
            source: Source::Table(_),
            access:
                Access::Index {
                    probes,
                    sub_probe: None,
                    ..
                },
            ..
        }] => q.correlated && probes.iter().flatten().any(reads_outer),
        _ => false,
    }
}

/// An adaptive semi-join that is the only filter of a first level scanning a whole table runs
/// for every row of that table: its outer row count is the table's entry count, which the
/// execution then compares with the set's cost at the first row (see `exec::eval::hashed`).
/// Only for a query that reads all its rows (the caller's: no LIMIT, not a subquery).
pub(super) fn hint_semi_joins(levels: &mut [Level]) {
    if let Some(Level {
        source: Source::Table(t),
        access: Access::Scan { .. },
        filters,
        ..
    }) = levels.first_mut()
    {
        if let [PExpr::SemiHash(.., Some((_, outer)))] = &mut filters[..] {
            *outer = Some(t.tree);
        }
    }
}

/// Where [`semi_join`]'s equality is among the level's filters, the outer slot, and the
/// affinities (outer, inner); None when the subquery reads the outer query anywhere else.
fn semi_shape(q: &QueryPlan) -> Option<(usize, usize, Affinity, Affinity)> {
    // Reads only its own row: no outer column, no subquery (which might read one).
    let local = |e: &PExpr| {
        let mut ok = true;
        walk(e, &mut |x| {
            if matches!(
                x,
                PExpr::Outer(..)
                    | PExpr::InSub(..)
                    | PExpr::Exists(..)
                    | PExpr::SemiHash(..)
                    | PExpr::Scalar(_)
            ) {
                ok = false;
            }
        });
        ok
    };
    let limit_ok = match &q.limit {
        None => true,
        Some(PExpr::Lit(cairn_value::Value::Integer(n))) => *n > 0,
        Some(_) => false,
    };
    let Body::Core(c) = &q.body else {
        return None;
    };
    let [lvl] = &c.levels[..] else {
        return None;
    };
    if !q.correlated
        || !limit_ok
        || q.offset.is_some()
        || c.agg.is_some()
        || c.window.is_some()
        || lvl.left
        || lvl.key_slot
        || !lvl.after.is_empty()
        || !matches!(lvl.source, Source::Table(_))
        || !c.const_filters.iter().chain(&c.project).all(local)
    {
        return None;
    }
    match &lvl.access {
        Access::Scan { .. } => {}
        Access::Index {
            probes,
            lower,
            upper,
            sub_probe: None,
            ..
        } if probes.iter().flatten().all(local)
            && lower.iter().chain(upper).all(|(e, _)| local(e)) => {}
        _ => return None,
    }
    let mut found = None;
    for (i, f) in lvl.filters.iter().enumerate() {
        if local(f) {
            continue;
        }
        let PExpr::Cmp(BinOp::Eq, a, b, la, lb) = f else {
            return None;
        };
        let shape = match (&**a, &**b) {
            (PExpr::Outer(1, s), e) if local(e) => (i, *s, *la, *lb),
            (e, PExpr::Outer(1, s)) if local(e) => (i, *s, *lb, *la),
            _ => return None,
        };
        if found.replace(shape).is_some() {
            return None;
        }
    }
    found
}

/// `... FROM a LEFT JOIN t ON cond WHERE ... AND t.c IS NULL` as `... FROM a WHERE ... AND
/// NOT EXISTS (SELECT 1 FROM t WHERE cond)`, the anti-join users write as a LEFT JOIN: the
/// same rows (an outer row passes exactly when no row of `t` meets `cond`), run as an
/// (adaptive hash) anti-join instead of a join level whose rows are all thrown away. Only
/// when `t`, the last FROM item and a table, is named nowhere else, and `t.c` cannot be NULL
/// in a row that meets `cond` (the INTEGER PRIMARY KEY, a NOT NULL column, or one `cond`
/// compares with `=`). `is_table` says whether a name is a stored table (not a CTE or fts5).
// Never inlined: kept out of `query_inner`, which every query runs (docs/size.md).
#[inline(never)]
pub(super) fn left_anti_join(
    core: &ast::SelectCore,
    order_by: &[ast::OrderItem],
    is_table: &dyn Fn(&str) -> Option<Rc<crate::schema::Table>>,
) -> Option<ast::SelectCore> {
    use crate::parse::ast::{Expr, FromItem, JoinKind, SelectItem, TableSource};
    let (last, rest) = core.from.split_last()?;
    let (TableSource::Table(name), Some(JoinKind::Left), Some(cond), false) =
        (&last.source, &last.join, &last.on, rest.is_empty())
    else {
        return None;
    };
    let t = is_table(name)?;
    let n = last.alias.as_deref().unwrap_or(name);
    let own = |c: &str| {
        t.columns.iter().any(|x| x.name.eq_ignore_ascii_case(c))
            || ["rowid", "oid", "_rowid_"]
                .iter()
                .any(|r| r.eq_ignore_ascii_case(c))
    };
    // Names no column of `t` (qualified: `qualified_ok`) and holds no subquery, which could.
    fn clean(e: &Expr, qualified_ok: bool, n: &str, own: &dyn Fn(&str) -> bool) -> bool {
        let ok = match e {
            Expr::Column { table: Some(q), .. } => qualified_ok || !q.eq_ignore_ascii_case(n),
            Expr::Column { table: None, name } => !own(name),
            Expr::Exists { .. } | Expr::InSelect { .. } | Expr::Subquery(_) => false,
            _ => true,
        };
        let mut all = ok;
        e.each_child(&mut |c| all = all && clean(c, qualified_ok, n, own));
        all
    }
    let mut conjuncts = Vec::new();
    if let Some(w) = &core.where_ {
        super::bind::split_and(w, &mut conjuncts);
    }
    let mut conds = Vec::new();
    super::bind::split_and(cond, &mut conds);
    let eq_col = |c: &str| {
        conds.iter().any(|e| match e {
            Expr::Binary(BinOp::Eq, a, b) => [a, b].iter().any(|x| {
                matches!(&***x, Expr::Column { table: Some(q), name }
                    if q.eq_ignore_ascii_case(n) && name.eq_ignore_ascii_case(c))
            }),
            _ => false,
        })
    };
    let never_null = |c: &str| {
        let col = t
            .columns
            .iter()
            .position(|x| x.name.eq_ignore_ascii_case(c));
        col.is_some_and(|i| t.columns[i].not_null || t.key == crate::schema::Key::Rowid(Some(i)))
            || eq_col(c)
    };
    let at = conjuncts.iter().position(|e| {
        matches!(e, Expr::IsNull { expr, negated: false }
            if matches!(&**expr, Expr::Column { table: Some(q), name }
                if q.eq_ignore_ascii_case(n) && never_null(name)))
    })?;
    conjuncts.remove(at);
    let items_ok = core.columns.iter().all(|i| match i {
        SelectItem::All => false,
        SelectItem::TableAll(q) => !q.eq_ignore_ascii_case(n),
        SelectItem::Expr { expr, .. } => clean(expr, false, n, &own),
    });
    if !items_ok
        || !clean(cond, true, n, &own)
        || !(conjuncts.iter())
            .chain(&core.group_by)
            .chain(&core.having)
            .chain(order_by.iter().map(|o| &o.expr))
            .all(|e| clean(e, false, n, &own))
    {
        return None;
    }
    let sub = ast::Select {
        with: None,
        body: ast::SelectBody::Core(Box::new(ast::SelectCore {
            distinct: false,
            columns: vec![SelectItem::Expr {
                expr: Expr::Literal(cairn_value::Value::Integer(1)),
                alias: None,
                text: "1".into(),
            }],
            from: vec![FromItem {
                source: last.source.clone(),
                alias: last.alias.clone(),
                join: None,
                on: None,
            }],
            where_: Some(cond.clone()),
            group_by: Vec::new(),
            having: None,
        })),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    };
    conjuncts.push(Expr::Exists {
        query: Box::new(sub),
        negated: true,
    });
    let where_ = conjuncts
        .into_iter()
        .reduce(|a, b| Expr::Binary(BinOp::And, Box::new(a), Box::new(b)));
    Some(ast::SelectCore {
        from: rest.to_vec(),
        where_,
        ..core.clone()
    })
}
