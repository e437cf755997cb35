//! SELECT (with its WITH, compound and FROM clauses), INSERT, UPDATE and DELETE.

use crate::error::{Error, Result};
use crate::parse::ast::*;
use crate::parse::lexer::Tok;
use crate::parse::parser::{is_reserved, Parser};
use crate::parse::window;

impl Parser<'_> {
    pub(super) fn with_clause(&mut self) -> Result<Option<With>> {
        if !self.eat_kw("WITH") {
            return Ok(None);
        }
        if self.is_kw("RECURSIVE") {
            return Err(Error::Unsupported("WITH RECURSIVE".into()));
        }
        let mut ctes = Vec::new();
        loop {
            let name = self.ident()?;
            let columns = if matches!(self.peek(), Tok::Op("(")) {
                self.ident_list()?
            } else {
                Vec::new()
            };
            self.expect_kw("AS")?;
            self.expect_op("(")?;
            let query = self.select()?;
            self.expect_op(")")?;
            ctes.push(Cte {
                name,
                columns,
                query,
            });
            if !self.eat_op(",") {
                break;
            }
        }
        Ok(Some(With { ctes }))
    }

    pub(super) fn select(&mut self) -> Result<Select> {
        self.enter()?;
        let with = self.with_clause()?;
        let mut s = self.select_after_with()?;
        s.with = with;
        self.depth -= 1;
        Ok(s)
    }

    pub(super) fn select_after_with(&mut self) -> Result<Select> {
        let mut body = self.select_term()?;
        loop {
            if self.eat_kw("UNION") {
                let all = self.eat_kw("ALL");
                let right = self.select_term()?;
                body = SelectBody::Union {
                    all,
                    left: Box::new(body),
                    right: Box::new(right),
                };
            } else if self.is_kw("EXCEPT") || self.is_kw("INTERSECT") {
                return Err(Error::Unsupported("EXCEPT and INTERSECT".into()));
            } else {
                break;
            }
        }
        let windows = std::mem::take(&mut self.windows);
        let mut order_by = Vec::new();
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            order_by = self.order_list()?;
        }
        let (mut limit, mut offset) = (None, None);
        if self.eat_kw("LIMIT") {
            let l = self.expr()?;
            if self.eat_kw("OFFSET") {
                offset = Some(self.expr()?);
                limit = Some(l);
            } else if self.eat_op(",") {
                // LIMIT offset, count
                offset = Some(l);
                limit = Some(self.expr()?);
            } else {
                limit = Some(l);
            }
        }
        let mut q = Select {
            with: None,
            body,
            order_by,
            limit,
            offset,
        };
        window::resolve_order(&mut q, &windows)?;
        Ok(q)
    }

    pub(super) fn order_list(&mut self) -> Result<Vec<OrderItem>> {
        let mut v = Vec::new();
        loop {
            let expr = self.expr()?;
            let desc = if self.eat_kw("DESC") {
                true
            } else {
                self.eat_kw("ASC");
                false
            };
            let mut nulls_first = None;
            if self.eat_kw("NULLS") {
                if self.eat_kw("FIRST") {
                    nulls_first = Some(true);
                } else {
                    self.expect_kw("LAST")?;
                    nulls_first = Some(false);
                }
            }
            v.push(OrderItem {
                expr,
                desc,
                nulls_first,
            });
            if !self.eat_op(",") {
                return Ok(v);
            }
        }
    }

    fn select_term(&mut self) -> Result<SelectBody> {
        if self.eat_kw("VALUES") {
            return Ok(SelectBody::Values(self.values_rows()?));
        }
        if matches!(self.peek(), Tok::Op("("))
            && (self.is_kw_at(1, "SELECT") || self.is_kw_at(1, "VALUES"))
        {
            return Err(Error::Unsupported(
                "a parenthesized query as a compound term".into(),
            ));
        }
        self.expect_kw("SELECT")?;
        let distinct = if self.eat_kw("DISTINCT") {
            true
        } else {
            self.eat_kw("ALL");
            false
        };
        let mut columns = Vec::new();
        loop {
            columns.push(self.select_item()?);
            if !self.eat_op(",") {
                break;
            }
        }
        let mut from = Vec::new();
        if self.eat_kw("FROM") {
            from = self.parse_from_list()?;
        }
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let mut group_by = Vec::new();
        if self.eat_kw("GROUP") {
            self.expect_kw("BY")?;
            loop {
                group_by.push(self.expr()?);
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        let having = if self.eat_kw("HAVING") {
            Some(self.expr()?)
        } else {
            None
        };
        let windows = self.window_clause()?;
        for it in &mut columns {
            if let SelectItem::Expr { expr, .. } = it {
                window::resolve(expr, &windows)?;
            }
        }
        self.windows = windows;
        Ok(SelectBody::Core(Box::new(SelectCore {
            distinct,
            columns,
            from,
            where_,
            group_by,
            having,
        })))
    }

    fn values_rows(&mut self) -> Result<Vec<Vec<Expr>>> {
        let mut rows = Vec::new();
        loop {
            self.expect_op("(")?;
            let mut row = vec![self.expr()?];
            while self.eat_op(",") {
                row.push(self.expr()?);
            }
            self.expect_op(")")?;
            if let Some(first) = rows.first() {
                let first: &Vec<Expr> = first;
                if first.len() != row.len() {
                    return Err(
                        self.error_here("all VALUES rows must have the same number of values")
                    );
                }
            }
            rows.push(row);
            if !self.eat_op(",") {
                return Ok(rows);
            }
        }
    }

    fn alias(&mut self) -> Result<Option<String>> {
        if self.eat_kw("AS") {
            return Ok(Some(self.ident()?));
        }
        match self.peek().clone() {
            Tok::Quoted(s) | Tok::Str(s) => {
                self.next();
                Ok(Some(s))
            }
            Tok::Word(w)
                if !is_reserved(&w)
                    && !["NATURAL", "RETURNING", "WINDOW"]
                        .iter()
                        .any(|k| k.eq_ignore_ascii_case(&w)) =>
            {
                self.next();
                Ok(Some(w))
            }
            _ => Ok(None),
        }
    }

    fn select_item(&mut self) -> Result<SelectItem> {
        if self.eat_op("*") {
            return Ok(SelectItem::All);
        }
        if matches!(self.peek(), Tok::Word(_) | Tok::Quoted(_))
            && matches!(self.peek_at(1), Tok::Op("."))
            && matches!(self.peek_at(2), Tok::Op("*"))
        {
            let t = self.ident()?;
            self.next();
            self.next();
            return Ok(SelectItem::TableAll(t));
        }
        let start = self.pos;
        let expr = self.expr()?;
        // A result column without an alias is named as written, as SQLite names it.
        let text = self.source_text(start, self.pos);
        let alias = self.alias()?;
        Ok(SelectItem::Expr { expr, alias, text })
    }

    fn parse_from_list(&mut self) -> Result<Vec<FromItem>> {
        let mut items = vec![self.parse_from_item(None)?];
        loop {
            let join = if self.eat_op(",") || self.eat_kw("JOIN") {
                JoinKind::Inner
            } else if self.eat_kw("INNER") || self.eat_kw("CROSS") {
                self.expect_kw("JOIN")?;
                JoinKind::Inner
            } else if self.eat_kw("LEFT") {
                self.eat_kw("OUTER");
                self.expect_kw("JOIN")?;
                JoinKind::Left
            } else if self.is_kw("RIGHT") || self.is_kw("FULL") || self.is_kw("NATURAL") {
                return Err(Error::Unsupported(format!(
                    "{} JOIN",
                    Self::describe(self.peek())
                )));
            } else {
                break;
            };
            let mut item = self.parse_from_item(Some(join))?;
            if self.eat_kw("ON") {
                item.on = Some(self.expr()?);
            } else if self.is_kw("USING") {
                return Err(Error::Unsupported("JOIN ... USING".into()));
            }
            items.push(item);
        }
        Ok(items)
    }

    fn parse_from_item(&mut self, join: Option<JoinKind>) -> Result<FromItem> {
        let source = if self.eat_op("(") {
            let q = self.select()?;
            self.expect_op(")")?;
            TableSource::Subquery(Box::new(q))
        } else {
            let name = self.ident()?;
            if self.eat_op("(") {
                // A table-valued function: `pragma_table_info(t.name)`.
                let mut args = Vec::new();
                if !self.eat_op(")") {
                    loop {
                        args.push(self.expr()?);
                        if !self.eat_op(",") {
                            break;
                        }
                    }
                    self.expect_op(")")?;
                }
                TableSource::Function { name, args }
            } else {
                TableSource::Table(name)
            }
        };
        let alias = self.alias()?;
        Ok(FromItem {
            source,
            alias,
            join,
            on: None,
        })
    }

    fn conflict_clause(&mut self) -> Result<Conflict> {
        if !self.eat_kw("OR") {
            return Ok(Conflict::Abort);
        }
        if self.eat_kw("REPLACE") {
            Ok(Conflict::Replace)
        } else if self.eat_kw("IGNORE") {
            Ok(Conflict::Ignore)
        } else if self.eat_kw("ABORT") || self.eat_kw("FAIL") || self.eat_kw("ROLLBACK") {
            Ok(Conflict::Abort)
        } else {
            Err(self.unexpected("REPLACE, IGNORE or ABORT"))
        }
    }

    fn returning(&mut self) -> Result<Vec<SelectItem>> {
        let mut v = Vec::new();
        if self.eat_kw("RETURNING") {
            loop {
                v.push(self.select_item()?);
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        Ok(v)
    }

    pub(super) fn insert(&mut self) -> Result<Insert> {
        let or = if self.eat_kw("REPLACE") {
            Conflict::Replace
        } else {
            self.expect_kw("INSERT")?;
            self.conflict_clause()?
        };
        self.expect_kw("INTO")?;
        let table = self.ident()?;
        if self.eat_kw("AS") {
            return Err(Error::Unsupported("an alias on the INSERT target".into()));
        }
        let columns = if matches!(self.peek(), Tok::Op("(")) {
            self.ident_list()?
        } else {
            Vec::new()
        };
        let source = if self.eat_kw("DEFAULT") {
            self.expect_kw("VALUES")?;
            InsertSource::DefaultValues
        } else if self.is_kw("VALUES") && !self.is_kw_at(1, "SELECT") {
            self.next();
            InsertSource::Values(self.values_rows()?)
        } else {
            InsertSource::Select(Box::new(self.select()?))
        };
        let mut upsert = None;
        if self.eat_kw("ON") {
            self.expect_kw("CONFLICT")?;
            let target = if matches!(self.peek(), Tok::Op("(")) {
                self.ident_list()?
            } else {
                Vec::new()
            };
            if self.is_kw("WHERE") {
                return Err(Error::Unsupported("a WHERE on the conflict target".into()));
            }
            self.expect_kw("DO")?;
            let update = if self.eat_kw("NOTHING") {
                None
            } else {
                self.expect_kw("UPDATE")?;
                self.expect_kw("SET")?;
                let set = self.set_list()?;
                let w = if self.eat_kw("WHERE") {
                    Some(self.expr()?)
                } else {
                    None
                };
                Some((set, w))
            };
            upsert = Some(Upsert { target, update });
        }
        let returning = self.returning()?;
        Ok(Insert {
            with: None,
            or,
            table,
            columns,
            source,
            upsert,
            returning,
        })
    }

    fn set_list(&mut self) -> Result<Vec<(String, Expr)>> {
        let mut v = Vec::new();
        loop {
            if matches!(self.peek(), Tok::Op("(")) {
                return Err(Error::Unsupported("SET (a, b) = ...".into()));
            }
            let c = self.ident()?;
            self.expect_op("=")?;
            v.push((c, self.expr()?));
            if !self.eat_op(",") {
                return Ok(v);
            }
        }
    }

    pub(super) fn update(&mut self) -> Result<Update> {
        self.expect_kw("UPDATE")?;
        let or = self.conflict_clause()?;
        let table = self.ident()?;
        let alias = if self.eat_kw("AS") {
            Some(self.ident()?)
        } else {
            None
        };
        self.expect_kw("SET")?;
        let set = self.set_list()?;
        if self.is_kw("FROM") {
            return Err(Error::Unsupported("UPDATE ... FROM".into()));
        }
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let returning = self.returning()?;
        Ok(Update {
            with: None,
            or,
            table,
            alias,
            set,
            where_,
            returning,
        })
    }

    pub(super) fn delete(&mut self) -> Result<Delete> {
        self.expect_kw("DELETE")?;
        self.expect_kw("FROM")?;
        let table = self.ident()?;
        let alias = if self.eat_kw("AS") {
            Some(self.ident()?)
        } else {
            None
        };
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let returning = self.returning()?;
        Ok(Delete {
            with: None,
            table,
            alias,
            where_,
            returning,
        })
    }
}
