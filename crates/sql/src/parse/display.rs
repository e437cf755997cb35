//! SQL text for AST expressions: used to store CHECK and DEFAULT clauses in the catalog and to
//! name result columns. The output parses back to the same tree.

use crate::parse::ast::{BinOp, Expr, Param, UnOp};
use crate::schema::quote_ident;
use crate::types::fmt_real;
use cairn_value::text::{join, quote};
use cairn_value::Value;

pub fn value(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => fmt_real(*r),
        Value::Text(s) => quote(s, '\''),
        Value::Blob(b) => {
            let mut s = String::from("X'");
            for x in b {
                s.push_str(&format!("{x:02X}"));
            }
            s.push('\'');
            s
        }
    }
}

fn binop(op: BinOp) -> &'static str {
    match op {
        BinOp::Or => "OR",
        BinOp::And => "AND",
        BinOp::Eq => "=",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::Is => "IS",
        BinOp::IsNot => "IS NOT",
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Concat => "||",
        BinOp::BitAnd => "&",
        BinOp::BitOr => "|",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
    }
}

/// Fully parenthesized where precedence could matter, so the text re-parses to the same tree.
pub fn expr(e: &Expr) -> String {
    match e {
        Expr::Literal(v) => match v {
            Value::Integer(i) if *i < 0 => format!("({i})"),
            Value::Real(r) if *r < 0.0 => format!("({})", fmt_real(*r)),
            v => value(v),
        },
        Expr::Param(Param::Index(n)) => format!("?{n}"),
        Expr::Param(Param::Named(n, _)) => n.clone(),
        Expr::Column {
            table: Some(t),
            name,
        } => format!("{}.{}", quote_ident(t), quote_ident(name)),
        Expr::Column { table: None, name } => quote_ident(name),
        Expr::Unary(op, e) => {
            let o = match op {
                UnOp::Neg => "-",
                UnOp::Pos => "+",
                UnOp::Not => "NOT ",
                UnOp::BitNot => "~",
            };
            format!("({o}{})", expr(e))
        }
        Expr::Binary(op, l, r) => format!("({} {} {})", expr(l), binop(*op), expr(r)),
        Expr::IsNull { expr: e, negated } => {
            format!(
                "({} IS {}NULL)",
                expr(e),
                if *negated { "NOT " } else { "" }
            )
        }
        Expr::Between {
            expr: e,
            low,
            high,
            negated,
        } => format!(
            "({} {}BETWEEN {} AND {})",
            expr(e),
            not(*negated),
            expr(low),
            expr(high)
        ),
        Expr::InList {
            expr: e,
            list,
            negated,
        } => {
            let items: Vec<_> = list.iter().map(expr).collect();
            format!("({} {}IN ({}))", expr(e), not(*negated), join(&items, ", "))
        }
        Expr::InSelect {
            expr: e, negated, ..
        } => {
            format!("({} {}IN (SELECT ...))", expr(e), not(*negated))
        }
        Expr::Exists { negated, .. } => format!("({}EXISTS (SELECT ...))", not(*negated)),
        Expr::Subquery(_) => "(SELECT ...)".into(),
        Expr::Like {
            expr: e,
            pattern,
            escape,
            negated,
        } => {
            let mut s = format!("({} {}LIKE {}", expr(e), not(*negated), expr(pattern));
            if let Some(esc) = escape {
                s.push_str(&format!(" ESCAPE {}", expr(esc)));
            }
            s.push(')');
            s
        }
        Expr::Glob {
            expr: e,
            pattern,
            negated,
        } => format!("({} {}GLOB {})", expr(e), not(*negated), expr(pattern)),
        Expr::Case {
            operand,
            whens,
            else_,
        } => {
            let mut s = String::from("CASE");
            if let Some(o) = operand {
                s.push_str(&format!(" {}", expr(o)));
            }
            for (w, t) in whens {
                s.push_str(&format!(" WHEN {} THEN {}", expr(w), expr(t)));
            }
            if let Some(e) = else_ {
                s.push_str(&format!(" ELSE {}", expr(e)));
            }
            s.push_str(" END");
            s
        }
        Expr::Cast { expr: e, type_name } => format!("CAST({} AS {type_name})", expr(e)),
        Expr::Function {
            name,
            args,
            distinct,
            star,
        } => {
            if *star {
                return format!("{name}(*)");
            }
            if let (true, [a, b]) = (name.starts_with("->"), args.as_slice()) {
                return format!("({} {name} {})", expr(a), expr(b));
            }
            let items: Vec<_> = args.iter().map(expr).collect();
            format!(
                "{name}({}{})",
                if *distinct { "DISTINCT " } else { "" },
                join(&items, ", ")
            )
        }
        Expr::Window { func, filter, over } => {
            crate::parse::window::text(func, filter.as_deref(), over)
        }
    }
}

fn not(n: bool) -> &'static str {
    if n {
        "NOT "
    } else {
        ""
    }
}
