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
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                s.push(char::from(HEX[usize::from(x >> 4)]));
                s.push(char::from(HEX[usize::from(x & 15)]));
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
/// Built with `concat`, not `format!`: result columns are named by it in the common statements,
/// and without a `format!` on their paths core's formatting stays out of cairn.wasm.
pub fn expr(e: &Expr) -> String {
    match e {
        Expr::Literal(v) => match v {
            Value::Integer(i) if *i < 0 => ["(", &i.to_string(), ")"].concat(),
            Value::Real(r) if *r < 0.0 => ["(", &fmt_real(*r), ")"].concat(),
            v => value(v),
        },
        Expr::Param(Param::Index(n)) => ["?", &n.to_string()].concat(),
        Expr::Param(Param::Named(n, _)) => n.clone(),
        Expr::Column {
            table: Some(t),
            name,
        } => [quote_ident(t).as_str(), ".", &quote_ident(name)].concat(),
        Expr::Column { table: None, name } => quote_ident(name),
        Expr::Unary(op, e) => {
            let o = match op {
                UnOp::Neg => "-",
                UnOp::Pos => "+",
                UnOp::Not => "NOT ",
                UnOp::BitNot => "~",
            };
            ["(", o, &expr(e), ")"].concat()
        }
        Expr::Binary(op, l, r) => ["(", &expr(l), " ", binop(*op), " ", &expr(r), ")"].concat(),
        Expr::IsNull { expr: e, negated } => {
            ["(", &expr(e), " IS ", not(*negated), "NULL)"].concat()
        }
        Expr::Between {
            expr: e,
            low,
            high,
            negated,
        } => [
            "(",
            &expr(e),
            " ",
            not(*negated),
            "BETWEEN ",
            &expr(low),
            " AND ",
            &expr(high),
            ")",
        ]
        .concat(),
        Expr::InList {
            expr: e,
            list,
            negated,
        } => {
            let items: Vec<_> = list.iter().map(expr).collect();
            [
                "(",
                &expr(e),
                " ",
                not(*negated),
                "IN (",
                &join(&items, ", "),
                "))",
            ]
            .concat()
        }
        Expr::InSelect {
            expr: e, negated, ..
        } => ["(", &expr(e), " ", not(*negated), "IN (SELECT ...))"].concat(),
        Expr::Exists { negated, .. } => ["(", not(*negated), "EXISTS (SELECT ...))"].concat(),
        Expr::Subquery(_) => "(SELECT ...)".into(),
        Expr::Like {
            expr: e,
            pattern,
            escape,
            negated,
        } => {
            let mut s = ["(", &expr(e), " ", not(*negated), "LIKE ", &expr(pattern)].concat();
            if let Some(esc) = escape {
                s.push_str(" ESCAPE ");
                s.push_str(&expr(esc));
            }
            s.push(')');
            s
        }
        Expr::Glob {
            expr: e,
            pattern,
            negated,
        } => [
            "(",
            &expr(e),
            " ",
            not(*negated),
            "GLOB ",
            &expr(pattern),
            ")",
        ]
        .concat(),
        Expr::Case {
            operand,
            whens,
            else_,
        } => {
            let mut s = String::from("CASE");
            if let Some(o) = operand {
                s.push(' ');
                s.push_str(&expr(o));
            }
            for (w, t) in whens {
                s.push_str(" WHEN ");
                s.push_str(&expr(w));
                s.push_str(" THEN ");
                s.push_str(&expr(t));
            }
            if let Some(e) = else_ {
                s.push_str(" ELSE ");
                s.push_str(&expr(e));
            }
            s.push_str(" END");
            s
        }
        Expr::Cast { expr: e, type_name } => ["CAST(", &expr(e), " AS ", type_name, ")"].concat(),
        Expr::Function {
            name,
            args,
            distinct,
            star,
        } => {
            if *star {
                return [name.as_str(), "(*)"].concat();
            }
            if let (true, [a, b]) = (name.starts_with("->"), args.as_slice()) {
                return ["(", &expr(a), " ", name, " ", &expr(b), ")"].concat();
            }
            let items: Vec<_> = args.iter().map(expr).collect();
            [
                name.as_str(),
                "(",
                if *distinct { "DISTINCT " } else { "" },
                &join(&items, ", "),
                ")",
            ]
            .concat()
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
