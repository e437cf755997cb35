//! Expressions, by precedence climbing with SQLite's operator precedence.

use crate::error::{Error, Result};
use crate::parse::ast::*;
use crate::parse::lexer::Tok;
use crate::parse::parser::{is_reserved, Parser, MAX_CHAIN};
use cairn_value::Value;

impl Parser<'_> {
    pub fn expr(&mut self) -> Result<Expr> {
        self.enter()?;
        let e = self.binary(0);
        self.depth -= 1;
        e
    }

    /// Precedence climbing. Levels (low to high): OR 1, AND 2, NOT 3, equality/IS/IN/LIKE/BETWEEN 4,
    /// comparison 5, bitwise 6, additive 7, multiplicative 8, concatenation 9.
    fn binary(&mut self, min: u8) -> Result<Expr> {
        // NOT may start any operand (`a <= NOT b`), and takes everything above its own level.
        let mut left = if self.is_kw("NOT") && !self.is_kw_at(1, "EXISTS") {
            self.next();
            self.enter()?;
            let e = self.binary(3)?;
            self.depth -= 1;
            Expr::Unary(UnOp::Not, Box::new(e))
        } else {
            self.unary()?
        };
        let mut chain = 0;
        loop {
            let (prec, op) = match self.peek() {
                Tok::Word(w) => {
                    let w = w.to_ascii_uppercase();
                    match w.as_str() {
                        "OR" => (1, None),
                        "AND" => (2, None),
                        "IS" | "IN" | "LIKE" | "GLOB" | "BETWEEN" | "ISNULL" | "NOTNULL"
                        | "NOT" => (4, None),
                        // `a MATCH b` is the function `match`(a, b), which the full-text
                        // rewrite (`fts/rewrite.rs`) takes out of WHERE.
                        "MATCH" => (4, None),
                        "REGEXP" => return Err(Error::Unsupported(format!("the {w} operator"))),
                        "COLLATE" => return Err(Error::Unsupported("COLLATE".into())),
                        _ => break,
                    }
                }
                Tok::Op(o) => match *o {
                    "=" | "==" => (4, Some(BinOp::Eq)),
                    "!=" | "<>" => (4, Some(BinOp::Ne)),
                    "<" => (5, Some(BinOp::Lt)),
                    "<=" => (5, Some(BinOp::Le)),
                    ">" => (5, Some(BinOp::Gt)),
                    ">=" => (5, Some(BinOp::Ge)),
                    "&" => (6, Some(BinOp::BitAnd)),
                    "|" => (6, Some(BinOp::BitOr)),
                    "<<" => (6, Some(BinOp::Shl)),
                    ">>" => (6, Some(BinOp::Shr)),
                    "+" => (7, Some(BinOp::Add)),
                    "-" => (7, Some(BinOp::Sub)),
                    "*" => (8, Some(BinOp::Mul)),
                    "/" => (8, Some(BinOp::Div)),
                    "%" => (8, Some(BinOp::Rem)),
                    "||" => (9, Some(BinOp::Concat)),
                    // SQLite gives `->` and `->>` the precedence of `||`.
                    "->" | "->>" => (9, None),
                    _ => break,
                },
                _ => break,
            };
            if prec <= min {
                break;
            }
            // A left-deep chain (`a + b + c ...`) nests one level per operator.
            if !matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case("AND") || w.eq_ignore_ascii_case("OR"))
            {
                chain += 1;
            }
            if chain > MAX_CHAIN {
                return Err(self.error_here("expression nested too deeply"));
            }
            left = match op {
                Some(op) => {
                    self.next();
                    let right = self.binary(prec)?;
                    Expr::Binary(op, Box::new(left), Box::new(right))
                }
                None if matches!(self.peek(), Tok::Op("->" | "->>")) => {
                    // `a -> b` is the function `->`(a, b), as SQLite has it.
                    let name = match self.next() {
                        Tok::Op(o) => o.to_string(),
                        _ => unreachable!("invariant: peeked an arrow"),
                    };
                    let right = self.binary(prec)?;
                    Expr::Function {
                        name,
                        args: vec![left, right],
                        distinct: false,
                        star: false,
                    }
                }
                None => self.keyword_op(left, prec)?,
            };
        }
        Ok(balance(left))
    }

    fn keyword_op(&mut self, left: Expr, prec: u8) -> Result<Expr> {
        let w = match self.next() {
            Tok::Word(w) => w.to_ascii_uppercase(),
            _ => return Err(self.unexpected("an operator")),
        };
        if w == "MATCH" {
            let right = self.binary(prec)?;
            return Ok(Expr::Function {
                name: "match".into(),
                args: vec![left, right],
                distinct: false,
                star: false,
            });
        }
        let b = Box::new(left);
        Ok(match w.as_str() {
            "OR" => Expr::Binary(BinOp::Or, b, Box::new(self.binary(prec)?)),
            "AND" => Expr::Binary(BinOp::And, b, Box::new(self.binary(prec)?)),
            "ISNULL" => Expr::IsNull {
                expr: b,
                negated: false,
            },
            "NOTNULL" => Expr::IsNull {
                expr: b,
                negated: true,
            },
            "IS" => {
                let not = self.eat_kw("NOT");
                if self.eat_kw("DISTINCT") {
                    self.expect_kw("FROM")?;
                    let r = self.binary(prec)?;
                    let op = if not { BinOp::Is } else { BinOp::IsNot };
                    return Ok(Expr::Binary(op, b, Box::new(r)));
                }
                // `x IS NOT NULL & y` is `x IS NOT (NULL & y)`, as in SQLite's grammar.
                let r = self.binary(prec)?;
                // `matches!`, not `==`: the AST's derived equality is otherwise unused outside
                // tests, and this one comparison linked all of it.
                if matches!(r, Expr::Literal(Value::Null)) {
                    return Ok(Expr::IsNull {
                        expr: b,
                        negated: not,
                    });
                }
                Expr::Binary(if not { BinOp::IsNot } else { BinOp::Is }, b, Box::new(r))
            }
            "NOT" => {
                if self.eat_kw("NULL") {
                    return Ok(Expr::IsNull {
                        expr: b,
                        negated: true,
                    });
                }
                let w2 = match self.peek() {
                    Tok::Word(w) => w.to_ascii_uppercase(),
                    _ => return Err(self.unexpected("IN, LIKE, GLOB, BETWEEN or NULL after NOT")),
                };
                self.next();
                self.negatable(&w2, b, prec, true)?
            }
            other => self.negatable(other, b, prec, false)?,
        })
    }

    fn negatable(&mut self, w: &str, b: Box<Expr>, prec: u8, negated: bool) -> Result<Expr> {
        Ok(match w {
            "IN" => {
                self.expect_op("(")?;
                if self.is_kw("SELECT") || self.is_kw("WITH") || self.is_kw("VALUES") {
                    let q = self.select()?;
                    self.expect_op(")")?;
                    Expr::InSelect {
                        expr: b,
                        query: Box::new(q),
                        negated,
                    }
                } else {
                    let mut list = Vec::new();
                    if !matches!(self.peek(), Tok::Op(")")) {
                        loop {
                            list.push(self.expr()?);
                            if !self.eat_op(",") {
                                break;
                            }
                        }
                    }
                    self.expect_op(")")?;
                    Expr::InList {
                        expr: b,
                        list,
                        negated,
                    }
                }
            }
            "LIKE" => {
                let pattern = Box::new(self.binary(prec)?);
                let escape = if self.eat_kw("ESCAPE") {
                    Some(Box::new(self.binary(prec)?))
                } else {
                    None
                };
                Expr::Like {
                    expr: b,
                    pattern,
                    escape,
                    negated,
                }
            }
            "GLOB" => Expr::Glob {
                expr: b,
                pattern: Box::new(self.binary(prec)?),
                negated,
            },
            "BETWEEN" => {
                // The low bound may hold operators of BETWEEN's own level (`x BETWEEN a IS b
                // AND c`), as in SQLite's grammar: nothing can end the BETWEEN before AND.
                let low = self.binary(prec - 1)?;
                self.expect_kw("AND")?;
                let high = self.binary(prec)?;
                Expr::Between {
                    expr: b,
                    low: Box::new(low),
                    high: Box::new(high),
                    negated,
                }
            }
            _ => return Err(self.unexpected("IN, LIKE, GLOB or BETWEEN")),
        })
    }

    pub(super) fn unary(&mut self) -> Result<Expr> {
        self.enter()?;
        let e = if self.is_kw("NOT") && !self.is_kw_at(1, "EXISTS") {
            // `-NOT x`: NOT starts an operand here too.
            self.next();
            Expr::Unary(UnOp::Not, Box::new(self.binary(3)?))
        } else if self.eat_op("-") {
            if self.peek() == &Tok::IntMin {
                self.next();
                self.depth -= 1;
                return Ok(Expr::Literal(Value::Integer(i64::MIN)));
            }
            let inner = self.unary()?;
            match inner {
                Expr::Literal(Value::Integer(n)) => Expr::Literal(Value::Integer(-n)),
                Expr::Literal(Value::Real(r)) => Expr::Literal(Value::Real(-r)),
                e => Expr::Unary(UnOp::Neg, Box::new(e)),
            }
        } else if self.eat_op("+") {
            let inner = self.unary()?;
            match inner {
                e @ Expr::Literal(Value::Integer(_) | Value::Real(_)) => e,
                e => Expr::Unary(UnOp::Pos, Box::new(e)),
            }
        } else if self.eat_op("~") {
            Expr::Unary(UnOp::BitNot, Box::new(self.unary()?))
        } else {
            self.primary()?
        };
        self.depth -= 1;
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr> {
        let tok = self.peek().clone();
        match tok {
            Tok::Int(n) => {
                self.next();
                // 9223372036854775808 only exists negated; the lexer made it a real, and
                // `-9223372036854775808` then folds to that real, as SQLite reads it.
                Ok(Expr::Literal(Value::Integer(n)))
            }
            Tok::Real(r) => {
                self.next();
                Ok(Expr::Literal(Value::Real(r)))
            }
            Tok::IntMin => {
                self.next();
                Ok(Expr::Literal(Value::Real(9_223_372_036_854_775_808.0)))
            }
            Tok::Str(s) => {
                self.next();
                Ok(Expr::Literal(Value::Text(s)))
            }
            Tok::Blob(b) => {
                self.next();
                Ok(Expr::Literal(Value::Blob(b)))
            }
            Tok::QParam(n) => {
                let n = n.map_or(self.params.count + 1, |n| n as usize);
                self.param(n, Param::Index)
            }
            Tok::NamedParam(name) => {
                let p = &mut self.params;
                let n = match p.names.iter().find(|(m, _)| *m == name) {
                    Some((_, i)) => i + 1,
                    None => {
                        p.names.push((name.clone(), p.count));
                        p.count + 1
                    }
                };
                self.param(n, |n| Param::Named(name, n))
            }
            Tok::Op("(") => {
                self.next();
                if self.is_kw("SELECT") || self.is_kw("WITH") || self.is_kw("VALUES") {
                    let q = self.select()?;
                    self.expect_op(")")?;
                    return Ok(Expr::Subquery(Box::new(q)));
                }
                let e = self.expr()?;
                if matches!(self.peek(), Tok::Op(",")) {
                    return Err(Error::Unsupported("row values (a, b)".into()));
                }
                self.expect_op(")")?;
                Ok(e)
            }
            Tok::Quoted(_) => self.column_ref(),
            Tok::Word(w) => {
                let up = w.to_ascii_uppercase();
                match up.as_str() {
                    "NULL" => {
                        self.next();
                        Ok(Expr::Literal(Value::Null))
                    }
                    "TRUE" if !matches!(self.peek_at(1), Tok::Op("." | "(")) => {
                        self.next();
                        Ok(Expr::Literal(Value::Integer(1)))
                    }
                    "FALSE" if !matches!(self.peek_at(1), Tok::Op("." | "(")) => {
                        self.next();
                        Ok(Expr::Literal(Value::Integer(0)))
                    }
                    "CURRENT_TIME" | "CURRENT_DATE" | "CURRENT_TIMESTAMP" => Err(
                        Error::Unsupported(format!("{up} (time is not part of the dialect)")),
                    ),
                    "EXISTS" => {
                        self.next();
                        self.expect_op("(")?;
                        let q = self.select()?;
                        self.expect_op(")")?;
                        Ok(Expr::Exists {
                            query: Box::new(q),
                            negated: false,
                        })
                    }
                    "NOT" if self.is_kw_at(1, "EXISTS") => {
                        self.next();
                        self.next();
                        self.expect_op("(")?;
                        let q = self.select()?;
                        self.expect_op(")")?;
                        Ok(Expr::Exists {
                            query: Box::new(q),
                            negated: true,
                        })
                    }
                    "CASE" => {
                        self.next();
                        let operand = if self.is_kw("WHEN") {
                            None
                        } else {
                            Some(Box::new(self.expr()?))
                        };
                        let mut whens = Vec::new();
                        while self.eat_kw("WHEN") {
                            let c = self.expr()?;
                            self.expect_kw("THEN")?;
                            whens.push((c, self.expr()?));
                        }
                        if whens.is_empty() {
                            return Err(self.unexpected("WHEN"));
                        }
                        let else_ = if self.eat_kw("ELSE") {
                            Some(Box::new(self.expr()?))
                        } else {
                            None
                        };
                        self.expect_kw("END")?;
                        Ok(Expr::Case {
                            operand,
                            whens,
                            else_,
                        })
                    }
                    "CAST" => {
                        self.next();
                        self.expect_op("(")?;
                        let e = self.expr()?;
                        self.expect_kw("AS")?;
                        let mut words = Vec::new();
                        while let Tok::Word(w) = self.peek().clone() {
                            self.next();
                            words.push(w);
                        }
                        if words.is_empty() {
                            return Err(self.unexpected("a type name"));
                        }
                        if self.eat_op("(") {
                            while !self.eat_op(")") {
                                if self.peek() == &Tok::Eof {
                                    return Err(self.unexpected("')'"));
                                }
                                self.next();
                            }
                        }
                        self.expect_op(")")?;
                        Ok(Expr::Cast {
                            expr: Box::new(e),
                            type_name: cairn_value::text::join(&words, " "),
                        })
                    }
                    _ if matches!(self.peek_at(1), Tok::Op("(")) && !is_reserved(&w)
                        || up == "REPLACE" && matches!(self.peek_at(1), Tok::Op("(")) =>
                    {
                        self.next();
                        self.next();
                        let mut args = Vec::new();
                        let mut distinct = false;
                        let mut star = false;
                        if self.eat_op("*") {
                            star = true;
                        } else if !matches!(self.peek(), Tok::Op(")")) {
                            distinct = self.eat_kw("DISTINCT");
                            loop {
                                args.push(self.expr()?);
                                if !self.eat_op(",") {
                                    break;
                                }
                            }
                        }
                        self.expect_op(")")?;
                        let f = Expr::Function {
                            name: w.to_ascii_lowercase(),
                            args,
                            distinct,
                            star,
                        };
                        if self.is_kw("FILTER") || self.is_kw("OVER") {
                            return self.window_call(f);
                        }
                        Ok(f)
                    }
                    _ if !is_reserved(&w) => self.column_ref(),
                    _ => Err(self.unexpected("an expression")),
                }
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    fn column_ref(&mut self) -> Result<Expr> {
        let first = self.ident()?;
        if self.eat_op(".") {
            let name = self.ident()?;
            if self.eat_op(".") {
                // schema.table.column: only the main schema exists.
                let col = self.ident()?;
                return Ok(Expr::Column {
                    table: Some(name),
                    name: col,
                });
            }
            Ok(Expr::Column {
                table: Some(first),
                name,
            })
        } else {
            Ok(Expr::Column {
                table: None,
                name: first,
            })
        }
    }
}

/// Rebuilds a left-deep chain of one AND or OR operator (`a OR b OR c ...`) as a balanced
/// tree, so that a thousand-term OR recurses ten levels deep, not a thousand. AND and OR are
/// associative in SQL's three-valued logic, so the result is the same.
fn balance(e: Expr) -> Expr {
    let op = match &e {
        Expr::Binary(op @ (BinOp::And | BinOp::Or), l, _) if matches!(&**l, Expr::Binary(o, _, _) if o == op) => {
            *op
        }
        _ => return e,
    };
    let mut terms = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            Expr::Binary(o, l, r) if o == op => {
                terms.push(*r);
                cur = *l;
            }
            other => {
                terms.push(other);
                break;
            }
        }
    }
    terms.reverse();
    fn build(op: BinOp, mut terms: Vec<Expr>) -> Expr {
        if terms.len() == 1 {
            return terms.pop().expect("one term");
        }
        let right = terms.split_off(terms.len() / 2);
        Expr::Binary(op, Box::new(build(op, terms)), Box::new(build(op, right)))
    }
    build(op, terms)
}
