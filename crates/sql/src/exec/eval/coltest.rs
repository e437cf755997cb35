//! Filters tested on a column where it lies in the page, without decoding the row.

use crate::error::{Error, Result};
use crate::exec::eval::{cmp_truth, compare_truth, conv, eval, text_of, Cx};
use crate::parse::ast::BinOp;
use crate::plan::PExpr;
use crate::types::{Affinity, LikeMatcher};
use cairn_value::codec::{Field, Fields};
use cairn_value::Value;
use std::borrow::Cow;
use std::cmp::Ordering;

/// A filter condition on one column of the table a scan reads, against values fixed for the
/// whole scan (literals, parameters, columns of tables joined before, an enclosing query's
/// columns): tested on the column as it lies in the page ([`Field`]), so a row that fails is
/// never decoded and a text is never copied to be compared or matched. Prepared by
/// [`ColTest::prepare`] at the start of each scan, once its values are known.
#[derive(Debug)]
pub enum ColTest {
    /// `column op value`: the value has its side's affinity applied already; `aff` is the
    /// column side's.
    Cmp {
        col: usize,
        op: BinOp,
        value: Value,
        aff: Affinity,
    },
    /// `column > a`, `column BETWEEN a AND b`, `column = a` and the like against integers:
    /// an integer column is compared with both bounds as integers, after one read. Any other
    /// value is compared as [`ColTest::Cmp`] would, bound by bound (`aff` is the column side's
    /// affinity, never TEXT).
    Range {
        col: usize,
        aff: Affinity,
        /// `Gt` or `Ge`, and the bound.
        lower: Option<(BinOp, i64)>,
        /// `Lt` or `Le`, and the bound.
        upper: Option<(BinOp, i64)>,
    },
    Like {
        col: usize,
        matcher: LikeMatcher,
        negated: bool,
    },
    IsNull {
        col: usize,
        negated: bool,
    },
}

impl ColTest {
    /// Appends the tests that filter `f` of a level (columns `base..base + width` of the frame)
    /// consists of, and says whether it is wholly such tests (an AND of them counts: a row
    /// passes both exactly when it passes the AND). False leaves `out` as it was: the filter is
    /// then evaluated on decoded columns, as is any whose value is not known or valid yet (an
    /// unbound parameter, a bad ESCAPE), so that its error comes from the row as before.
    pub fn prepare(
        f: &PExpr,
        base: usize,
        width: usize,
        frame: &[Value],
        cx: &Cx,
        out: &mut Vec<ColTest>,
    ) -> bool {
        let local = |e: &PExpr| match e {
            PExpr::Col(s) if *s >= base && *s < base + width => Some(*s - base),
            _ => None,
        };
        // A value that does not change while this level is scanned.
        let fixed = |e: &PExpr| -> Option<Value> {
            match e {
                PExpr::Lit(v) => Some(v.clone()),
                PExpr::Param(i) => cx.params.get(*i).cloned(),
                PExpr::Col(s) if local(e).is_none() => frame.get(*s).cloned(),
                PExpr::Outer(..) => eval(e, frame, cx).ok().map(Cow::into_owned),
                _ => None,
            }
        };
        let test = match f {
            PExpr::And(a, b) => {
                let n = out.len();
                if Self::prepare(a, base, width, frame, cx, out)
                    && Self::prepare(b, base, width, frame, cx, out)
                {
                    return true;
                }
                out.truncate(n);
                return false;
            }
            PExpr::Cmp(op, a, b, la, lb) if !matches!(op, BinOp::Is | BinOp::IsNot) => {
                // `value op column` is `column op' value` with the operator mirrored.
                let (col, value, op, aff, vaff) = match (local(a), local(b)) {
                    (Some(c), None) => (c, fixed(b), *op, *la, *lb),
                    (None, Some(c)) => {
                        let op = match op {
                            BinOp::Lt => BinOp::Gt,
                            BinOp::Le => BinOp::Ge,
                            BinOp::Gt => BinOp::Lt,
                            BinOp::Ge => BinOp::Le,
                            op => *op,
                        };
                        (c, fixed(a), op, *lb, *la)
                    }
                    _ => return false,
                };
                let Some(value) = value else { return false };
                let value = conv(&value, vaff).unwrap_or(value);
                match (&value, op) {
                    (
                        Value::Integer(v),
                        BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge,
                    ) if aff != Affinity::Text => {
                        let v = *v;
                        let (lo, hi) = match op {
                            BinOp::Gt | BinOp::Ge => (Some((op, v)), None),
                            BinOp::Lt | BinOp::Le => (None, Some((op, v))),
                            _ => (Some((BinOp::Ge, v)), Some((BinOp::Le, v))),
                        };
                        // The other half of a range just prepared on this column (BETWEEN).
                        if let Some(ColTest::Range {
                            col: c,
                            aff: a,
                            lower,
                            upper,
                        }) = out.last_mut()
                        {
                            if *c == col && *a == aff {
                                match (lo, hi) {
                                    (Some(l), None) if lower.is_none() => {
                                        *lower = Some(l);
                                        return true;
                                    }
                                    (None, Some(h)) if upper.is_none() => {
                                        *upper = Some(h);
                                        return true;
                                    }
                                    _ => {}
                                }
                            }
                        }
                        ColTest::Range {
                            col,
                            aff,
                            lower: lo,
                            upper: hi,
                        }
                    }
                    _ => ColTest::Cmp {
                        col,
                        op,
                        value,
                        aff,
                    },
                }
            }
            PExpr::Like {
                expr,
                pattern,
                escape,
                negated,
            } => {
                let Some(col) = local(expr) else { return false };
                let Some(p) = fixed(pattern)
                    .as_ref()
                    .and_then(text_of)
                    .map(Cow::into_owned)
                else {
                    return false;
                };
                let escape = match escape {
                    None => None,
                    Some(e) => {
                        let Some(s) = fixed(e).as_ref().and_then(text_of).map(Cow::into_owned)
                        else {
                            return false;
                        };
                        let mut it = s.chars();
                        match (it.next(), it.next()) {
                            (Some(c), None) => Some(c),
                            _ => return false,
                        }
                    }
                };
                ColTest::Like {
                    col,
                    matcher: LikeMatcher::new(p, escape),
                    negated: *negated,
                }
            }
            PExpr::IsNull(a, negated) => match local(a) {
                Some(col) => ColTest::IsNull {
                    col,
                    negated: *negated,
                },
                None => return false,
            },
            _ => return false,
        };
        out.push(test);
        true
    }

    /// The (table-relative) column tested.
    pub fn column(&self) -> usize {
        match self {
            ColTest::Cmp { col, .. }
            | ColTest::Range { col, .. }
            | ColTest::Like { col, .. }
            | ColTest::IsNull { col, .. } => *col,
        }
    }

    /// Whether the row passes (the condition is true, not false or NULL). `scratch` takes a
    /// column that must be converted to be compared (text under a numeric affinity, a number
    /// matched by LIKE), as evaluation would.
    #[inline]
    pub fn passes(&self, row: &Fields, scratch: &mut Value) -> Result<bool> {
        let field = row.field(self.column())?;
        match self {
            ColTest::Cmp {
                col,
                op,
                value,
                aff,
            } => {
                let o = match field {
                    Field::Null => return Ok(false),
                    Field::Integer(i) => {
                        return Ok(compare_truth(
                            *op,
                            &Value::Integer(i),
                            value,
                            *aff,
                            Affinity::None,
                        ) == Some(true))
                    }
                    Field::Real(r) => {
                        return Ok(
                            compare_truth(*op, &Value::Real(r), value, *aff, Affinity::None)
                                == Some(true),
                        )
                    }
                    // Text under no numeric affinity stays text: bytewise against text, after
                    // every number, before every blob.
                    Field::Text(t)
                        if !matches!(
                            aff,
                            Affinity::Integer | Affinity::Real | Affinity::Numeric
                        ) =>
                    {
                        match value {
                            Value::Null => return Ok(false),
                            Value::Text(v) => t.cmp(v.as_bytes()),
                            Value::Blob(_) => Ordering::Less,
                            Value::Integer(_) | Value::Real(_) => Ordering::Greater,
                        }
                    }
                    // No affinity converts a blob.
                    Field::Blob(b) => match value {
                        Value::Null => return Ok(false),
                        Value::Blob(v) => b.cmp(v.as_slice()),
                        _ => Ordering::Greater,
                    },
                    Field::Text(_) => {
                        row.get_into(*col, scratch)?;
                        return Ok(
                            compare_truth(*op, scratch, value, *aff, Affinity::None) == Some(true)
                        );
                    }
                };
                Ok(cmp_truth(*op, o))
            }
            ColTest::Range {
                col,
                aff,
                lower,
                upper,
            } => {
                let f = field;
                if let Field::Integer(i) = f {
                    return Ok(lower
                        .is_none_or(|(op, v)| if op == BinOp::Gt { i > v } else { i >= v })
                        && upper
                            .is_none_or(|(op, v)| if op == BinOp::Lt { i < v } else { i <= v }));
                }
                if f == Field::Null {
                    return Ok(false);
                }
                row.get_into(*col, scratch)?;
                let holds = |b: &Option<(BinOp, i64)>| {
                    b.is_none_or(|(op, v)| {
                        compare_truth(op, scratch, &Value::Integer(v), *aff, Affinity::None)
                            == Some(true)
                    })
                };
                Ok(holds(lower) && holds(upper))
            }
            ColTest::Like {
                col,
                matcher,
                negated,
            } => match field {
                Field::Null => Ok(false),
                Field::Text(t) => match matcher.matches(t) {
                    Some(m) => Ok(m != *negated),
                    None => Err(Error::Storage(cairn_store::Error::Corrupt(
                        "text column is not UTF-8".into(),
                    ))),
                },
                _ => {
                    row.get_into(*col, scratch)?;
                    Ok(match text_of(scratch) {
                        Some(x) => matcher.matches_str(&x) != *negated,
                        None => false,
                    })
                }
            },
            ColTest::IsNull { negated, .. } => Ok(matches!(field, Field::Null) != *negated),
        }
    }
}
