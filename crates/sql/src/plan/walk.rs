//! Walks and rewrites over plan expressions, shared by the planner's stages, EXPLAIN and the
//! executor.

use crate::plan::*;

/// Visits every planned expression node, not descending into subquery plans.
pub fn walk(e: &PExpr, f: &mut dyn FnMut(&PExpr)) {
    f(e);
    match e {
        PExpr::Neg(a)
        | PExpr::Pos(a)
        | PExpr::Not(a)
        | PExpr::BitNot(a)
        | PExpr::IsNull(a, _)
        | PExpr::Cast(a, _)
        | PExpr::Affine(a, _) => walk(a, f),
        PExpr::InSub(a, ..) => walk(a, f),
        PExpr::Arith(_, a, b)
        | PExpr::Concat(a, b)
        | PExpr::Bit(_, a, b)
        | PExpr::Cmp(_, a, b, _, _)
        | PExpr::And(a, b)
        | PExpr::Or(a, b) => {
            walk(a, f);
            walk(b, f);
        }
        PExpr::InList(a, l, _, _) => {
            walk(a, f);
            l.iter().for_each(|x| walk(x, f));
        }
        PExpr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            walk(expr, f);
            walk(pattern, f);
            if let Some(e) = escape {
                walk(e, f);
            }
        }
        PExpr::Glob { expr, pattern, .. } => {
            walk(expr, f);
            walk(pattern, f);
        }
        PExpr::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                walk(o, f);
            }
            for (a, b) in whens {
                walk(a, f);
                walk(b, f);
            }
            if let Some(e) = else_ {
                walk(e, f);
            }
        }
        PExpr::Func(_, args) => args.iter().for_each(|x| walk(x, f)),
        PExpr::Lit(_)
        | PExpr::Param(_)
        | PExpr::Col(_)
        | PExpr::Outer(..)
        | PExpr::Exists(..)
        | PExpr::SemiHash(..)
        | PExpr::Scalar(_)
        | PExpr::AggRef(_)
        | PExpr::WinRef(_) => {}
    }
}

pub(crate) fn has_subquery(e: &PExpr) -> bool {
    let mut found = false;
    walk(e, &mut |x| {
        if matches!(
            x,
            PExpr::InSub(..) | PExpr::Exists(..) | PExpr::SemiHash(..) | PExpr::Scalar(_)
        ) {
            found = true;
        }
    });
    found
}

/// Whether `e` reads an enclosing query's row (outside any subquery of its own).
pub(super) fn reads_outer(e: &PExpr) -> bool {
    let mut found = false;
    walk(e, &mut |x| found |= matches!(x, PExpr::Outer(..)));
    found
}

/// [`Core::moves`] for a query without aggregates. A subquery in `project` may read the frame
/// as its outer row, so none is moved then.
pub(super) fn movable(levels: &[Level], project: &[PExpr], agg: bool) -> u64 {
    let Some(last) = levels.last() else {
        return 0;
    };
    // How often each of the last level's slots is named, and whether a subquery is.
    let mut named = vec![0u8; last.width];
    let mut sub = agg;
    for e in project {
        walk(e, &mut |x| match x {
            PExpr::Col(s) => {
                if let Some(n) = s.checked_sub(last.base).and_then(|i| named.get_mut(i)) {
                    *n = n.saturating_add(1);
                }
            }
            PExpr::InSub(..) | PExpr::Exists(..) | PExpr::SemiHash(..) | PExpr::Scalar(_) => {
                sub = true
            }
            _ => {}
        });
    }
    let mut moves = 0;
    for (i, e) in project.iter().enumerate().take(64) {
        if let PExpr::Col(s) = e {
            if !sub && s.checked_sub(last.base).and_then(|i| named.get(i)) == Some(&1) {
                moves |= 1 << i;
            }
        }
    }
    moves
}

pub(super) fn slots(e: &PExpr) -> Vec<usize> {
    let mut v = Vec::new();
    walk(e, &mut |x| {
        if let PExpr::Col(s) = x {
            v.push(*s);
        }
    });
    v
}

/// Replaces sub-expressions in place (post-order), for aggregate rewriting.
pub(super) fn rewrite(e: &mut PExpr, f: &mut dyn FnMut(&mut PExpr) -> bool) {
    if f(e) {
        return;
    }
    match e {
        PExpr::Neg(a)
        | PExpr::Pos(a)
        | PExpr::Not(a)
        | PExpr::BitNot(a)
        | PExpr::IsNull(a, _)
        | PExpr::Cast(a, _)
        | PExpr::Affine(a, _)
        | PExpr::InSub(a, ..) => rewrite(a, f),
        PExpr::Arith(_, a, b)
        | PExpr::Concat(a, b)
        | PExpr::Bit(_, a, b)
        | PExpr::Cmp(_, a, b, _, _)
        | PExpr::And(a, b)
        | PExpr::Or(a, b) => {
            rewrite(a, f);
            rewrite(b, f);
        }
        PExpr::InList(a, l, _, _) => {
            rewrite(a, f);
            l.iter_mut().for_each(|x| rewrite(x, f));
        }
        PExpr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            rewrite(expr, f);
            rewrite(pattern, f);
            if let Some(e) = escape {
                rewrite(e, f);
            }
        }
        PExpr::Glob { expr, pattern, .. } => {
            rewrite(expr, f);
            rewrite(pattern, f);
        }
        PExpr::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                rewrite(o, f);
            }
            for (a, b) in whens {
                rewrite(a, f);
                rewrite(b, f);
            }
            if let Some(e) = else_ {
                rewrite(e, f);
            }
        }
        PExpr::Func(_, args) => args.iter_mut().for_each(|x| rewrite(x, f)),
        _ => {}
    }
}
