//! What ORMs and schema tools read to learn a database's schema, as SQLite offers it:
//! `sqlite_schema` (also named `sqlite_master`; `sqlite_temp_schema` and `sqlite_temp_master`
//! are empty), the pragma table-valued functions (`pragma_table_info(t)`, `pragma_index_list(t)`,
//! `pragma_index_info(i)`, ...), `PRAGMA` statements, and `PRAGMA user_version` (docs/sql.md,
//! "Schema introspection").
//!
//! Each of these tables is made from the catalog when a statement is planned: its rows become a
//! `VALUES` source (`plan::Source::Query`), so the planner and the executor need nothing of
//! their own for them. That is sound because a plan is made again whenever the catalog changes
//! (the schema epoch, `Database::schema_moved`), and the user version is kept in the catalog
//! for the same reason. A pragma function's argument is a condition on its hidden column
//! `arg`, as SQLite's pragma virtual tables read it: `FROM sqlite_schema m,
//! pragma_table_info(m.name) p` is the join of the two on `lower(p.arg) = lower(m.name)`.

use crate::error::{Error, Result};
use crate::parse::ast::{BinOp, Expr};
use crate::schema::{Catalog, Key, Table};
use crate::storage::{Storage, SCHEMA_TREE};
use crate::types::Affinity;
use crate::{Database, Output, Value};

/// A read-only table made from the catalog.
pub(crate) struct Virtual {
    /// Every column with its affinity, the hidden ones (not in `*`) last.
    pub columns: Vec<(String, Affinity)>,
    /// How many of the columns are hidden.
    pub hidden: usize,
    pub rows: Vec<Vec<Value>>,
}

const PRAGMA_HIDDEN: [&str; 2] = ["arg", "schema"];

/// An index entry's column that is an expression.
const EXPR_PART: usize = usize::MAX;

/// The table `name` names among the introspection tables, made from `catalog`; None when it
/// names none.
pub(crate) fn table(catalog: &Catalog, name: &str) -> Option<Virtual> {
    let name = name.to_ascii_lowercase();
    let (cols, rows): (&[&str], Vec<Vec<Value>>) = match name.as_str() {
        "sqlite_schema" | "sqlite_master" => {
            let v = schema_table(catalog);
            return Some(v);
        }
        "sqlite_temp_schema" | "sqlite_temp_master" => {
            let mut v = schema_table(&Catalog::default());
            v.rows.clear();
            return Some(v);
        }
        "pragma_user_version" => {
            return Some(Virtual {
                columns: vec![("user_version".into(), Affinity::None)],
                hidden: 0,
                rows: vec![vec![Value::Integer(catalog.user_version as i64)]],
            })
        }
        "pragma_table_info" | "pragma_table_xinfo" => {
            let x = name == "pragma_table_xinfo";
            let mut rows = Vec::new();
            for t in catalog.tables.values() {
                // An fts5 table's own content is listed as the fts5 table, below.
                if catalog.fts(&t.name).is_some() {
                    continue;
                }
                for row in table_info(t, x) {
                    rows.push(with_arg(row, &t.name));
                }
            }
            fts_table_info(catalog, x, &mut rows);
            let cols: &[&str] = if x {
                &[
                    "cid",
                    "name",
                    "type",
                    "notnull",
                    "dflt_value",
                    "pk",
                    "hidden",
                ]
            } else {
                &["cid", "name", "type", "notnull", "dflt_value", "pk"]
            };
            (cols, rows)
        }
        "pragma_index_list" => {
            let mut rows = Vec::new();
            for t in catalog.tables.values() {
                let entries = index_entries(t);
                for (seq, e) in entries.iter().rev().enumerate() {
                    let row = vec![
                        Value::Integer(seq as i64),
                        Value::Text(e.name.clone()),
                        Value::Integer(e.unique as i64),
                        Value::Text(e.origin.into()),
                        Value::Integer(0),
                    ];
                    rows.push(with_arg(row, &t.name));
                }
            }
            (&["seq", "name", "unique", "origin", "partial"], rows)
        }
        "pragma_index_info" | "pragma_index_xinfo" => {
            let x = name == "pragma_index_xinfo";
            let mut rows = Vec::new();
            for t in catalog.tables.values() {
                for e in index_entries(t) {
                    let mut n = 0;
                    for &c in &e.columns {
                        let mut row = if c == EXPR_PART {
                            vec![Value::Integer(n), Value::Integer(-2), Value::Null]
                        } else {
                            vec![
                                Value::Integer(n),
                                Value::Integer(c as i64),
                                Value::Text(t.columns[c].name.clone()),
                            ]
                        };
                        if x {
                            row.extend([
                                Value::Integer(0),
                                Value::Text("BINARY".into()),
                                Value::Integer(1),
                            ]);
                        }
                        rows.push(with_arg(row, &e.name));
                        n += 1;
                    }
                    if x {
                        // The entry's reference to its row, shown as SQLite shows a rowid
                        // table's (a table keyed by its columns is what SQLite calls a rowid
                        // table with a primary key index: docs/sql.md).
                        let row = vec![
                            Value::Integer(n),
                            Value::Integer(-1),
                            Value::Null,
                            Value::Integer(0),
                            Value::Text("BINARY".into()),
                            Value::Integer(0),
                        ];
                        rows.push(with_arg(row, &e.name));
                    }
                }
            }
            let cols: &[&str] = if x {
                &["seqno", "cid", "name", "desc", "coll", "key"]
            } else {
                &["seqno", "cid", "name"]
            };
            (cols, rows)
        }
        "pragma_foreign_key_list" => {
            let mut rows = Vec::new();
            for t in catalog.tables.values() {
                let n = t.foreign_keys.len();
                // SQLite numbers a table's foreign keys from the last written.
                for (i, fk) in t.foreign_keys.iter().enumerate() {
                    for (seq, from) in fk.columns.iter().enumerate() {
                        let to = fk.parent_columns.get(seq);
                        let row = vec![
                            Value::Integer((n - 1 - i) as i64),
                            Value::Integer(seq as i64),
                            Value::Text(fk.parent.clone()),
                            Value::Text(from.clone()),
                            to.map_or(Value::Null, |c| Value::Text(c.clone())),
                            Value::Text(fk.on_update.sql().into()),
                            Value::Text(fk.on_delete.sql().into()),
                            Value::Text("NONE".into()),
                        ];
                        rows.push(with_arg(row, &t.name));
                    }
                }
            }
            (
                &[
                    "id",
                    "seq",
                    "table",
                    "from",
                    "to",
                    "on_update",
                    "on_delete",
                    "match",
                ],
                rows,
            )
        }
        _ => return None,
    };
    let mut columns: Vec<(String, Affinity)> = cols
        .iter()
        .map(|c| (c.to_string(), Affinity::None))
        .collect();
    columns.extend(
        PRAGMA_HIDDEN
            .iter()
            .map(|c| (c.to_string(), Affinity::None)),
    );
    Some(Virtual {
        columns,
        hidden: PRAGMA_HIDDEN.len(),
        rows,
    })
}

/// A pragma function's row with its hidden columns: the object it describes, and the schema.
fn with_arg(mut row: Vec<Value>, arg: &str) -> Vec<Value> {
    row.push(Value::Text(arg.to_string()));
    row.push(Value::Text("main".into()));
    row
}

/// The condition a pragma function's arguments put on its rows (`alias` names the function in
/// FROM): the first on `arg`, a second on `schema`, each compared as SQLite compares names
/// (ASCII case-insensitively). None for no arguments: every row.
pub(crate) fn argument_condition(
    function: &str,
    alias: &str,
    hidden: usize,
    args: &[Expr],
) -> Result<Option<Expr>> {
    if args.len() > hidden {
        return Err(Error::Invalid(format!(
            "too many arguments on {function}() - max {hidden}"
        )));
    }
    let lower = |e: Expr| Expr::Function {
        name: "lower".into(),
        args: vec![e],
        distinct: false,
        star: false,
    };
    let mut cond: Option<Expr> = None;
    for (a, col) in args.iter().zip(PRAGMA_HIDDEN) {
        let column = Expr::Column {
            table: Some(alias.to_string()),
            name: col.into(),
        };
        let eq = Expr::Binary(
            BinOp::Eq,
            Box::new(lower(column)),
            Box::new(lower(a.clone())),
        );
        cond = Some(match cond {
            None => eq,
            Some(c) => Expr::Binary(BinOp::And, Box::new(c), Box::new(eq)),
        });
    }
    Ok(cond)
}

/// `sqlite_schema`: a row per table and per index (those of UNIQUE constraints and, for a table
/// keyed by its columns, of its primary key, with NULL `sql`, as SQLite lists them), in the
/// order they were made. `rootpage` is the object's tree number (a key-ordered table's primary
/// key shares its table's).
fn schema_table(catalog: &Catalog) -> Virtual {
    let mut rows: Vec<((u64, usize), Vec<Value>)> = Vec::new();
    // An fts5 table is listed as SQLite lists it: a table with rootpage 0 and its CREATE
    // VIRTUAL TABLE; it comes where its own content table, or else its index, was made.
    // SQLite's shadow tables (`t_data`, `t_idx`, ...) have no counterpart: the index is two
    // trees of the file that no statement reads as tables (docs/sql.md).
    for f in &catalog.fts {
        let order = catalog.table(&f.name).map_or(f.tree, |t| t.tree);
        let row = vec![
            Value::Text("table".into()),
            Value::Text(f.name.clone()),
            Value::Text(f.name.clone()),
            Value::Integer(0),
            Value::Text(f.sql()),
        ];
        rows.push(((order, 0), row));
    }
    for t in catalog.tables.values() {
        if catalog.fts(&t.name).is_some() {
            continue;
        }
        let row = |kind: &str, name: &str, tree: u64, sql: Option<String>| {
            vec![
                Value::Text(kind.into()),
                Value::Text(name.into()),
                Value::Text(t.name.clone()),
                Value::Integer(tree as i64),
                sql.map_or(Value::Null, Value::Text),
            ]
        };
        rows.push(((t.tree, 0), row("table", &t.name, t.tree, Some(t.sql()))));
        for (i, e) in index_entries(t).into_iter().enumerate() {
            // Indexes made with the table follow it; the others come where they were made.
            let order = if e.origin == "c" {
                (e.tree, 0)
            } else {
                (t.tree, i + 1)
            };
            rows.push((order, row("index", &e.name, e.tree, e.sql)));
        }
    }
    // The keys are distinct, so an unstable sort will do; the store's is small in wasm.
    cairn_store::sort::sort_by(&mut rows, |a, b| a.0 < b.0);
    Virtual {
        columns: ["type", "name", "tbl_name", "rootpage", "sql"]
            .iter()
            .zip([
                Affinity::Text,
                Affinity::Text,
                Affinity::Text,
                Affinity::Integer,
                Affinity::Text,
            ])
            .map(|(c, a)| (c.to_string(), a))
            .collect(),
        hidden: 0,
        rows: rows.into_iter().map(|r| r.1).collect(),
    }
}

/// `pragma_table_info`'s rows of each fts5 table, as SQLite gives them: its columns, untyped
/// and outside any key (no `rowid`); with `x` (`pragma_table_xinfo`) also the hidden columns
/// a query may name, the table's own name and `rank`.
fn fts_table_info(catalog: &Catalog, x: bool, rows: &mut Vec<Vec<Value>>) {
    for f in &catalog.fts {
        let hidden = if x { 2 } else { 0 };
        let names = f.columns.iter().map(|c| c.as_str());
        let names = names.chain([f.name.as_str(), "rank"].into_iter().take(hidden));
        for (cid, name) in names.enumerate() {
            let mut row = vec![
                Value::Integer(cid as i64),
                Value::Text(name.into()),
                Value::Text(String::new()),
                Value::Integer(0),
                Value::Null,
                Value::Integer(0),
            ];
            if x {
                row.push(Value::Integer((cid >= f.columns.len()) as i64));
            }
            rows.push(with_arg(row, &f.name));
        }
    }
}

/// `pragma_table_info`'s row for each column of `t`: cid, name, declared type (as written;
/// empty for none), NOT NULL, the DEFAULT as written, and the column's place in the primary
/// key (1-based; 0 outside it).
/// `pragma_table_info` leaves generated columns out and numbers the others from 0;
/// `pragma_table_xinfo` (`x`) lists them all with `hidden`: 2 for a VIRTUAL generated column,
/// 3 for a STORED one, as SQLite does.
fn table_info(t: &Table, x: bool) -> Vec<Vec<Value>> {
    let key = t.key_columns();
    let mut rows = Vec::new();
    for (i, c) in t.columns.iter().enumerate() {
        let hidden = c.generated.as_ref().map_or(0, |g| 2 + i64::from(g.stored));
        if hidden != 0 && !x {
            continue;
        }
        let cid = if x { i } else { rows.len() };
        let pk = key.iter().position(|&k| k == i).map_or(0, |p| p + 1);
        let mut row = vec![
            Value::Integer(cid as i64),
            Value::Text(c.name.clone()),
            Value::Text(c.decl.clone().unwrap_or_default()),
            Value::Integer(c.not_null as i64),
            c.default
                .as_ref()
                .map_or(Value::Null, |d| Value::Text(d.text.clone())),
            Value::Integer(pk as i64),
        ];
        if x {
            row.push(Value::Integer(hidden));
        }
        rows.push(row);
    }
    rows
}

/// One of a table's indexes as SQLite would list it.
struct IndexEntry {
    name: String,
    unique: bool,
    /// `pk` (the primary key of a table keyed by its columns), `u` (a UNIQUE constraint's) or
    /// `c` (made by CREATE INDEX).
    origin: &'static str,
    columns: Vec<usize>,
    tree: u64,
    /// The CREATE INDEX that makes it; None for the constraints' own.
    sql: Option<String>,
}

/// The indexes SQLite would have for `t`, in the order they were made: the constraints' (its
/// UNIQUE constraints' and, for a table keyed by its columns, its primary key's, numbered in
/// the order the definition gave them), then the ones CREATE INDEX made. cairn keeps no index
/// for a primary key (the table is stored in key order), so that one is named here: SQLite's
/// `sqlite_autoindex_<table>_<n>` with the first number no UNIQUE constraint's index has, which
/// is the number it was given when the table was made (`schema::table_from_ast`).
fn index_entries(t: &Table) -> Vec<IndexEntry> {
    let auto = by_tree(t, true);
    let mut out: Vec<IndexEntry> = auto
        .iter()
        .map(|ix| IndexEntry {
            name: ix.name.clone(),
            unique: true,
            origin: "u",
            columns: ix.columns.clone(),
            tree: ix.tree,
            sql: None,
        })
        .collect();
    if let Key::Columns(cols) = &t.key {
        let taken = |n: usize| {
            let name = crate::schema::auto_index_name(&t.name, n);
            auto.iter().any(|i| i.name.eq_ignore_ascii_case(&name))
        };
        let n = (1..).find(|&n| !taken(n)).unwrap_or(1);
        out.insert(
            (n - 1).min(out.len()),
            IndexEntry {
                name: crate::schema::auto_index_name(&t.name, n),
                unique: true,
                origin: "pk",
                columns: cols.clone(),
                tree: t.tree,
                sql: None,
            },
        );
    }
    for ix in by_tree(t, false) {
        out.push(IndexEntry {
            name: ix.name.clone(),
            unique: ix.unique,
            origin: "c",
            // A key part on an expression is no column: SQLite shows it as cid -2.
            columns: if ix.exprs.is_empty() {
                ix.columns.clone()
            } else {
                (ix.exprs.iter())
                    .map(|e| match e.plan {
                        crate::plan::PExpr::Col(c) => c,
                        _ => EXPR_PART,
                    })
                    .collect()
            },
            tree: ix.tree,
            sql: Some(t.index_sql(ix)),
        });
    }
    out
}

/// `t`'s constraints' indexes (`auto`) or the others, in the order they were made: by tree
/// number, which grows with every tree made (a catalog read back lists them by name).
fn by_tree(t: &Table, auto: bool) -> Vec<&crate::schema::Index> {
    let mut v: Vec<&crate::schema::Index> = t.indexes.iter().filter(|i| i.auto == auto).collect();
    cairn_store::sort::sort_by(&mut v, |a, b| a.tree < b.tree);
    v
}

/// The user version kept in the storage beside the schema tree (docs/file-format.md): 4 bytes,
/// a little-endian i32; none (a file from before it was kept, or a store that keeps no such
/// bytes) is 0.
pub(crate) fn load_user_version(store: &dyn Storage) -> Result<i32> {
    match store.tree_meta(SCHEMA_TREE) {
        Ok(b) if b.is_empty() => Ok(0),
        Ok(b) => match b.get(..4) {
            Some(v) => Ok(i32::from_le_bytes([v[0], v[1], v[2], v[3]])),
            None => Err(Error::Storage(cairn_store::Error::Corrupt(
                "the schema tree's user version is cut short".into(),
            ))),
        },
        Err(Error::Unsupported(_)) => Ok(0),
        Err(e) => Err(e),
    }
}

/// The number SQLite's `PRAGMA user_version = N` stores for the text `N` (its `sqlite3Atoi`):
/// a decimal integer's leading digits (a sign first, or `0x` and up to eight hex digits), 0
/// when there are none or they do not fit 32 bits.
pub(crate) fn atoi32(s: &str) -> i32 {
    let b = s.as_bytes();
    let (neg, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    if i == 0 && b.len() > 2 && b[0] == b'0' && (b[1] | 0x20) == b'x' && b[2].is_ascii_hexdigit() {
        let mut j = 2;
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut u: u32 = 0;
        let mut k = 0;
        while k < 8 && b.get(j + k).is_some_and(|c| c.is_ascii_hexdigit()) {
            u = u * 16 + (b[j + k] as char).to_digit(16).unwrap_or(0);
            k += 1;
        }
        let more = b.get(j + k).is_some_and(|c| c.is_ascii_hexdigit());
        return if u & 0x8000_0000 == 0 && !more {
            u as i32
        } else {
            0
        };
    }
    if !b.get(i).is_some_and(|c| c.is_ascii_digit()) {
        return 0;
    }
    while b.get(i) == Some(&b'0') {
        i += 1;
    }
    let mut v: i64 = 0;
    let mut n = 0;
    while n < 11 && b.get(i + n).is_some_and(|c| c.is_ascii_digit()) {
        v = v * 10 + (b[i + n] - b'0') as i64;
        n += 1;
    }
    if n > 10 || v - neg as i64 > i32::MAX as i64 {
        return 0;
    }
    (if neg { -v } else { v }) as i32
}

impl Database {
    /// A `PRAGMA` that sets something or is not known (the ones that read become queries in
    /// the parser). Only `user_version` is set; any other pragma does nothing, as SQLite does
    /// with one it does not know.
    pub(crate) fn pragma(&mut self, name: &str, value: Option<&str>) -> Result<Output> {
        if let Some(out) = self.fk_pragma(name, value)? {
            return Ok(out);
        }
        let Some(value) = value.filter(|_| name.eq_ignore_ascii_case("user_version")) else {
            return Ok(Output::Done);
        };
        let v = atoi32(value);
        self.atomic(true, |db| {
            db.store.set_tree_meta(SCHEMA_TREE, &v.to_le_bytes())?;
            db.catalog.user_version = v;
            Ok(())
        })?;
        // Plans that read the version hold it: they are made again.
        self.schema_moved();
        Ok(Output::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::atoi32;

    #[test]
    fn atoi32_reads_as_sqlite() {
        for (s, v) in [
            ("7", 7),
            ("-3", -3),
            ("+5", 5),
            ("1.9", 1),
            ("12abc", 12),
            ("abc", 0),
            ("", 0),
            ("-", 0),
            ("2147483647", i32::MAX),
            ("2147483648", 0),
            ("-2147483648", i32::MIN),
            ("-2147483649", 0),
            ("4294967297", 0),
            ("00000000000042", 42),
            ("0x10", 16),
            ("0X7fffffff", i32::MAX),
            ("0x80000000", 0),
            ("0x123456789", 0),
            ("-0x10", 0),
        ] {
            assert_eq!(atoi32(s), v, "{s}");
        }
    }
}
