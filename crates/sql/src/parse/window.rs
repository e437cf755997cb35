//! Window calls: `f(args) [FILTER (WHERE cond)] OVER (window)`, the `WINDOW name AS (...)`
//! clause, and named windows resolved into the calls that use them, as SQLite does
//! (`sqlite3WindowChain`): a call may name a window bare (`OVER w`) or refine it
//! (`OVER (w ORDER BY x)`), adding an ORDER BY only where the named one has none, never a
//! PARTITION BY, and never where the named window has a frame of its own.

use crate::error::{Error, Result};
use crate::parse::ast::{Expr, OrderItem, Select, SelectBody};
use crate::parse::display;
use crate::parse::lexer::Tok;
use crate::parse::parser::Parser;
use cairn_value::text::join;

/// A window as written: an optional base window's name, then what it adds.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowDef {
    pub base: Option<String>,
    /// `OVER name`, without parentheses: the named window as it is, frame included.
    pub named: bool,
    pub partition: Vec<Expr>,
    pub order: Vec<OrderItem>,
    /// None: the default frame (`RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`).
    pub frame: Option<Frame>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub unit: FrameUnit,
    pub start: FrameBound,
    pub end: FrameBound,
    pub exclude: Exclude,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameUnit {
    Rows,
    Range,
    Groups,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(Expr),
    CurrentRow,
    Following(Expr),
    UnboundedFollowing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclude {
    NoOthers,
    CurrentRow,
    Group,
    Ties,
}

impl Parser<'_> {
    /// What follows a function call's `)` when it is `FILTER` or `OVER`.
    pub(super) fn window_call(&mut self, func: Expr) -> Result<Expr> {
        let mut filter = None;
        if self.eat_kw("FILTER") {
            self.expect_op("(")?;
            self.expect_kw("WHERE")?;
            filter = Some(Box::new(self.expr()?));
            self.expect_op(")")?;
        }
        if !self.eat_kw("OVER") {
            return match filter {
                Some(c) => filtered(func, *c),
                None => Err(self.unexpected("OVER")),
            };
        }
        let over = if self.eat_op("(") {
            let w = self.window_body()?;
            self.expect_op(")")?;
            w
        } else {
            WindowDef {
                base: Some(self.ident()?),
                named: true,
                partition: Vec::new(),
                order: Vec::new(),
                frame: None,
            }
        };
        Ok(Expr::Window {
            func: Box::new(func),
            filter,
            over: Box::new(over),
        })
    }

    /// `[base] [PARTITION BY ...] [ORDER BY ...] [frame]`, inside the parentheses.
    fn window_body(&mut self) -> Result<WindowDef> {
        let base = match self.peek() {
            Tok::Word(w)
                if !["PARTITION", "ORDER", "ROWS", "RANGE", "GROUPS"]
                    .iter()
                    .any(|k| k.eq_ignore_ascii_case(w)) =>
            {
                Some(self.ident()?)
            }
            Tok::Quoted(_) => Some(self.ident()?),
            _ => None,
        };
        let mut partition = Vec::new();
        if self.eat_kw("PARTITION") {
            self.expect_kw("BY")?;
            loop {
                partition.push(self.expr()?);
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        let mut order = Vec::new();
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            order = self.order_list()?;
        }
        let unit = if self.eat_kw("ROWS") {
            Some(FrameUnit::Rows)
        } else if self.eat_kw("RANGE") {
            Some(FrameUnit::Range)
        } else if self.eat_kw("GROUPS") {
            Some(FrameUnit::Groups)
        } else {
            None
        };
        let frame = match unit {
            Some(unit) => Some(self.frame(unit)?),
            None => None,
        };
        Ok(WindowDef {
            base,
            named: false,
            partition,
            order,
            frame,
        })
    }

    fn frame(&mut self, unit: FrameUnit) -> Result<Frame> {
        let at = self.pos;
        let (start, end) = if self.eat_kw("BETWEEN") {
            let s = self.frame_bound(true)?;
            self.expect_kw("AND")?;
            (s, self.frame_bound(false)?)
        } else {
            (self.frame_bound(true)?, FrameBound::CurrentRow)
        };
        use FrameBound::*;
        let unsupported = matches!(
            (&start, &end),
            (CurrentRow, Preceding(_)) | (Following(_), Preceding(_) | CurrentRow)
        ) || matches!(start, UnboundedFollowing)
            || matches!(end, UnboundedPreceding);
        if unsupported {
            self.pos = at;
            return Err(self.error_here("unsupported frame specification"));
        }
        let exclude = if self.eat_kw("EXCLUDE") {
            if self.eat_kw("NO") {
                self.expect_kw("OTHERS")?;
                Exclude::NoOthers
            } else if self.eat_kw("CURRENT") {
                self.expect_kw("ROW")?;
                Exclude::CurrentRow
            } else if self.eat_kw("GROUP") {
                Exclude::Group
            } else {
                self.expect_kw("TIES")?;
                Exclude::Ties
            }
        } else {
            Exclude::NoOthers
        };
        Ok(Frame {
            unit,
            start,
            end,
            exclude,
        })
    }

    fn frame_bound(&mut self, start: bool) -> Result<FrameBound> {
        if self.eat_kw("UNBOUNDED") {
            return if self.eat_kw("PRECEDING") {
                Ok(FrameBound::UnboundedPreceding)
            } else if self.eat_kw("FOLLOWING") {
                if start {
                    return Err(self.error_here("unsupported frame specification"));
                }
                Ok(FrameBound::UnboundedFollowing)
            } else {
                Err(self.unexpected("PRECEDING or FOLLOWING"))
            };
        }
        if self.is_kw("CURRENT") && self.is_kw_at(1, "ROW") {
            self.next();
            self.next();
            return Ok(FrameBound::CurrentRow);
        }
        let e = self.expr()?;
        if self.eat_kw("PRECEDING") {
            Ok(FrameBound::Preceding(e))
        } else if self.eat_kw("FOLLOWING") {
            Ok(FrameBound::Following(e))
        } else {
            Err(self.unexpected("PRECEDING or FOLLOWING"))
        }
    }

    /// `WINDOW name AS (...), ...` after HAVING; each may build on one defined before it.
    pub(super) fn window_clause(&mut self) -> Result<Vec<(String, WindowDef)>> {
        let mut defs: Vec<(String, WindowDef)> = Vec::new();
        if !self.eat_kw("WINDOW") {
            return Ok(defs);
        }
        loop {
            let name = self.ident()?;
            self.expect_kw("AS")?;
            self.expect_op("(")?;
            let mut w = self.window_body()?;
            self.expect_op(")")?;
            chain(&mut w, &defs)?;
            defs.push((name, w));
            if !self.eat_op(",") {
                return Ok(defs);
            }
        }
    }
}

/// `agg(x) FILTER (WHERE c)` outside a window, as `agg(CASE WHEN c THEN x END)`: every
/// aggregate skips NULLs, so the rows `c` leaves out count for nothing (`count(*)` counts
/// `CASE WHEN c THEN 1 END`).
fn filtered(func: Expr, c: Expr) -> Result<Expr> {
    let Expr::Function {
        name,
        mut args,
        distinct,
        star,
    } = func
    else {
        return Err(Error::Invalid("invariant: FILTER follows a call".into()));
    };
    let aggregate = match (name.as_str(), args.len()) {
        ("count", 0) => star,
        ("count" | "sum" | "total" | "avg" | "min" | "max" | "group_concat", 1) => true,
        ("group_concat" | "string_agg", 2) => true,
        _ => false,
    };
    if !aggregate {
        return Err(Error::Invalid(format!(
            "FILTER may not be used with non-aggregate {name}()"
        )));
    }
    let x = if star {
        Expr::Literal(cairn_value::Value::Integer(1))
    } else {
        args.remove(0)
    };
    args.insert(
        0,
        Expr::Case {
            operand: None,
            whens: vec![(c, x)],
            else_: None,
        },
    );
    Ok(Expr::Function {
        name,
        args,
        distinct,
        star: false,
    })
}

/// Resolves `w`'s base window against `defs` (SQLite's `sqlite3WindowChain`).
fn chain(w: &mut WindowDef, defs: &[(String, WindowDef)]) -> Result<()> {
    let Some(name) = w.base.take() else {
        return Ok(());
    };
    let Some((_, base)) = defs.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name)) else {
        return Err(Error::Invalid(format!("no such window: {name}")));
    };
    let what = if !w.partition.is_empty() {
        "PARTITION clause"
    } else if !base.order.is_empty() && !w.order.is_empty() {
        "ORDER BY clause"
    } else if base.frame.is_some() {
        "frame specification"
    } else {
        ""
    };
    // `OVER w` is the window itself, frame included; `OVER (w ...)` refines it.
    if w.named {
        *w = base.clone();
        return Ok(());
    }
    if !what.is_empty() {
        return Err(Error::Invalid(format!(
            "cannot override {what} of window: {name}"
        )));
    }
    w.partition = base.partition.clone();
    if w.order.is_empty() {
        w.order = base.order.clone();
    }
    Ok(())
}

/// Resolves the named windows the calls in `e` use; a subquery resolved its own.
pub(super) fn resolve(e: &mut Expr, defs: &[(String, WindowDef)]) -> Result<()> {
    // Without a WINDOW clause there is nothing to resolve (a call naming a window then fails
    // in the planner), and a common statement does not walk its expressions again.
    if defs.is_empty() {
        return Ok(());
    }
    let mut err = None;
    each_mut(e, &mut |x| {
        if let Expr::Window { over, .. } = x {
            if let Err(e) = chain(over, defs) {
                err.get_or_insert(e);
            }
        }
    });
    err.map_or(Ok(()), Err)
}

/// Resolves the named windows of the only core of a query's body, in its ORDER BY.
pub(super) fn resolve_order(q: &mut Select, defs: &[(String, WindowDef)]) -> Result<()> {
    if !defs.is_empty() && matches!(q.body, SelectBody::Core(_)) {
        for o in &mut q.order_by {
            resolve(&mut o.expr, defs)?;
        }
    }
    Ok(())
}

/// Visits every expression node (pre-order), not descending into subqueries.
fn each_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    f(e);
    e.each_child_mut(&mut |c| each_mut(c, f));
}

/// A window call as SQL text (`display::expr` of an [`Expr::Window`]).
pub(super) fn text(func: &Expr, filter: Option<&Expr>, w: &WindowDef) -> String {
    let filter = filter.map_or(String::new(), |c| {
        format!(" FILTER (WHERE {})", display::expr(c))
    });
    let mut parts = Vec::new();
    if let Some(b) = &w.base {
        if w.named {
            return format!("{}{filter} OVER {b}", display::expr(func));
        }
        parts.push(b.clone());
    }
    if !w.partition.is_empty() {
        let p: Vec<_> = w.partition.iter().map(display::expr).collect();
        parts.push(format!("PARTITION BY {}", join(&p, ", ")));
    }
    if !w.order.is_empty() {
        let o: Vec<_> = w
            .order
            .iter()
            .map(|o| {
                let mut s = display::expr(&o.expr);
                if o.desc {
                    s.push_str(" DESC");
                }
                match o.nulls_first {
                    Some(true) => s.push_str(" NULLS FIRST"),
                    Some(false) => s.push_str(" NULLS LAST"),
                    None => {}
                }
                s
            })
            .collect();
        parts.push(format!("ORDER BY {}", join(&o, ", ")));
    }
    if let Some(fr) = &w.frame {
        let bound = |b: &FrameBound| match b {
            FrameBound::UnboundedPreceding => "UNBOUNDED PRECEDING".to_string(),
            FrameBound::Preceding(e) => format!("{} PRECEDING", display::expr(e)),
            FrameBound::CurrentRow => "CURRENT ROW".to_string(),
            FrameBound::Following(e) => format!("{} FOLLOWING", display::expr(e)),
            FrameBound::UnboundedFollowing => "UNBOUNDED FOLLOWING".to_string(),
        };
        let unit = match fr.unit {
            FrameUnit::Rows => "ROWS",
            FrameUnit::Range => "RANGE",
            FrameUnit::Groups => "GROUPS",
        };
        let exclude = match fr.exclude {
            Exclude::NoOthers => "",
            Exclude::CurrentRow => " EXCLUDE CURRENT ROW",
            Exclude::Group => " EXCLUDE GROUP",
            Exclude::Ties => " EXCLUDE TIES",
        };
        parts.push(format!(
            "{unit} BETWEEN {} AND {}{exclude}",
            bound(&fr.start),
            bound(&fr.end)
        ));
    }
    format!(
        "{}{filter} OVER ({})",
        display::expr(func),
        join(&parts, " ")
    )
}
