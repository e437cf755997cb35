//! Differential tests: the same statements on cairn and on SQLite (rusqlite, bundled), results
//! compared row for row (in order only when the query has a top-level ORDER BY).
//!
//! Tables are created STRICT on the SQLite side, because cairn's column types are always
//! strict (docs/sql.md).
//!
//! - `corpus`: every `testscripts/diff/*.sql` file, statement by statement.
//! - `random_queries` / `random_writes`: a seeded generator of schemas, data, queries and writes
//!   within the dialect; `random_window_queries`: queries with window calls over its schemas.
//!   `CAIRN_DIFF_CASES=N` runs N cases per seed instead of the default; `CAIRN_DIFF_SEED=S`
//!   starts from another seed.
//! - `corpus_on_the_paged_store` / `random_writes_on_the_paged_store`: the same on the paged
//!   store instead of `Memory`, where writes take the store's own paths (rows rewritten and
//!   removed where they are stored).
//! - `kysely_introspection_queries` / `schema_sql_makes_the_same_definitions`: what an ORM
//!   reads of the schema (`testscripts/diff/89_introspection.sql` has the rest).

use cairn_sql::Paged;
use cairn_sql::{Database, Output, Value};
use cairn_store::{MemoryFile, Options};

struct Pair {
    cairn: Database,
    sqlite: rusqlite::Connection,
    checked: usize,
    /// Every statement run so far, written out when a difference is found.
    log: Vec<String>,
}

#[derive(Debug)]
enum Res {
    /// Column names, then rows.
    Rows(Vec<String>, Vec<Vec<Value>>),
    Changes(u64),
    Err(String),
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()) || (x.is_nan() && y.is_nan())
        }
        (Value::Integer(x), Value::Integer(y)) => x == y,
        // An integer and an equal real tie in min()/max(), and which one wins depends on the
        // scan order, which SQLite leaves unspecified. typeof() tests in the corpus pin types.
        (Value::Integer(i), Value::Real(r)) | (Value::Real(r), Value::Integer(i)) => {
            as_integer(*r) == Some(*i)
        }
        // SQLite's 17th significant digit of a real turned to text is not always exact.
        (Value::Text(x), Value::Text(y)) => {
            x == y
                || matches!((x.parse::<f64>(), y.parse::<f64>()), (Ok(p), Ok(q)) if x.len() >= 17 && (p - q).abs() <= 1e-15 * p.abs().max(q.abs()))
        }
        (Value::Blob(x), Value::Blob(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

/// The INTEGER equal to `r`, if there is one (an integral real within i64's range; -2^63 is
/// exact as an f64 and 2^63 is past i64::MAX).
fn as_integer(r: f64) -> Option<i64> {
    (r.fract() == 0.0 && r >= i64::MIN as f64 && r < -(i64::MIN as f64)).then_some(r as i64)
}

fn fmt_row(r: &[Value]) -> String {
    let parts: Vec<String> = r
        .iter()
        .map(|v| match v {
            // Sorted like the equal integer: which of 1 and 1.0 DISTINCT keeps is unspecified,
            // and so is the order of 2^62 and 2^62.0 among ORDER BY's ties.
            Value::Real(x) if as_integer(*x).is_some() => {
                format!("Integer({})", *x as i64)
            }
            Value::Real(x) => format!("Real({x:.9e})"),
            v => format!("{v:?}"),
        })
        .collect();
    parts.join("|")
}

/// Whether the statement's outermost query has an ORDER BY (so row order is defined).
fn ordered(sql: &str) -> bool {
    let up = sql.to_ascii_uppercase();
    let mut depth = 0i32;
    let b = up.as_bytes();
    let mut last_top_order = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b'\'' => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            _ => {
                if depth == 0 && up[i..].starts_with("ORDER BY") {
                    last_top_order = true;
                }
            }
        }
        i += 1;
    }
    last_top_order
}

impl Pair {
    fn new() -> Pair {
        Pair::with(Database::memory())
    }

    /// cairn on the paged store (copy-on-write B+trees in a file held in memory) instead of
    /// `Memory`: writes then take the store's own paths (`update_each`, in-place rewrites).
    fn paged() -> Pair {
        let store = Paged::open(MemoryFile::new(), Options::default()).expect("paged store opens");
        Pair::with(Database::open(Box::new(store)).expect("paged database opens"))
    }

    fn with(cairn: Database) -> Pair {
        Pair {
            cairn,
            sqlite: rusqlite::Connection::open_in_memory().expect("sqlite opens"),
            checked: 0,
            log: Vec::new(),
        }
    }

    fn run_sqlite(&self, sql: &str, params: &[Value]) -> Res {
        let mut stmt = match self.sqlite.prepare(sql) {
            Ok(s) => s,
            Err(e) => return Res::Err(e.to_string()),
        };
        let params = rusqlite::params_from_iter(params.iter().map(|v| match v {
            Value::Null => rusqlite::types::Value::Null,
            Value::Integer(i) => rusqlite::types::Value::Integer(*i),
            Value::Real(r) => rusqlite::types::Value::Real(*r),
            Value::Text(t) => rusqlite::types::Value::Text(t.clone()),
            Value::Blob(b) => rusqlite::types::Value::Blob(b.clone()),
        }));
        let n = stmt.column_count();
        let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
        if n == 0 {
            return match stmt.execute(params) {
                Ok(c) => Res::Changes(c as u64),
                Err(e) => Res::Err(e.to_string()),
            };
        }
        let mut rows = match stmt.query(params) {
            Ok(r) => r,
            Err(e) => return Res::Err(e.to_string()),
        };
        let mut out = Vec::new();
        loop {
            match rows.next() {
                Ok(Some(r)) => {
                    let mut row = Vec::with_capacity(n);
                    for i in 0..n {
                        // SQLite can make text that is not UTF-8 (CAST(X'FF' AS TEXT)); read it
                        // lossily, as cairn converts it.
                        let v = match r.get_ref(i).expect("value") {
                            rusqlite::types::ValueRef::Text(t) => {
                                Value::Text(String::from_utf8_lossy(t).into_owned())
                            }
                            rusqlite::types::ValueRef::Null => Value::Null,
                            rusqlite::types::ValueRef::Integer(i) => Value::Integer(i),
                            rusqlite::types::ValueRef::Real(f) => Value::Real(f),
                            rusqlite::types::ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                        };
                        row.push(v);
                    }
                    out.push(row);
                }
                Ok(None) => break,
                Err(e) => return Res::Err(e.to_string()),
            }
        }
        Res::Rows(names, out)
    }

    fn run_cairn(&mut self, sql: &str, params: &[Value]) -> Res {
        match self.cairn.execute(sql, params) {
            Ok(Output::Rows { columns, rows }) => Res::Rows(columns.to_vec(), rows),
            Ok(Output::Changes { changes, .. }) => Res::Changes(changes),
            Ok(Output::Done) => Res::Changes(0),
            Err(e) => Res::Err(format!("{} ({})", e, e.code())),
        }
    }

    /// Runs `sql` on both with the same positional parameters; `sqlite_sql` may differ (STRICT
    /// tables). Panics on a difference; returns SQLite's result.
    fn check2(&mut self, sql: &str, sqlite_sql: &str, params: &[Value]) -> Res {
        let a = self.run_cairn(sql, params);
        let b = self.run_sqlite(sqlite_sql, params);
        self.checked += 1;
        self.log.push(format!("{sql};"));
        let log = self.log.join("\n");
        let plan = self.cairn.execute(&format!("EXPLAIN {sql}"), &[]);
        let fail = |why: &str| -> ! {
            let path = std::env::temp_dir().join("cairn_diff_fail.sql");
            let _ = std::fs::write(&path, &log);
            eprintln!("statements so far: {}\nplan: {plan:?}", path.display());
            panic!("difference on\n  {sql}\n{why}\n  cairn:  {a:?}\n  sqlite: {b:?}");
        };
        match (&a, &b) {
            (Res::Err(_), Res::Err(_)) => {}
            // Whether sum() overflows depends on the order it sees its rows in (an integer
            // overflow before the first real fails, after it does not), and scan order is
            // unspecified: such a case is not a difference.
            (Res::Err(e), _) | (_, Res::Err(e)) if e.contains("integer overflow") => {}
            (Res::Changes(x), Res::Changes(y)) => {
                // SQLite's count after a statement that changes no row is the last one's.
                let ddl = [
                    "CREATE",
                    "DROP",
                    "ALTER",
                    "SAVEPOINT",
                    "RELEASE",
                    "ROLLBACK",
                    "BEGIN",
                    "COMMIT",
                    "PRAGMA",
                ]
                .iter()
                .any(|k| sql.trim_start().to_ascii_uppercase().starts_with(k));
                if x != y && !ddl {
                    fail("change counts differ");
                }
            }
            (Res::Rows(m, x), Res::Rows(n, y)) => {
                if m != n {
                    fail(&format!("column names differ: {m:?} vs {n:?}"));
                }
                if x.len() != y.len() {
                    fail("row counts differ");
                }
                let (mut x, mut y) = (x.clone(), y.clone());
                if !ordered(sql) {
                    x.sort_by_key(|r| fmt_row(r));
                    y.sort_by_key(|r| fmt_row(r));
                }
                for (r, s) in x.iter().zip(&y) {
                    if r.len() != s.len() || !r.iter().zip(s).all(|(p, q)| same_value(p, q)) {
                        fail(&format!("rows differ: {} vs {}", fmt_row(r), fmt_row(s)));
                    }
                }
            }
            // A write with RETURNING gives rows on one side and changes on the other only if
            // the harness misread it; DDL gives Changes(0) on both.
            _ => fail("one failed, the other did not"),
        }
        b
    }

    fn check(&mut self, sql: &str) {
        let sqlite_sql = strict(sql);
        self.check2(sql, &sqlite_sql, &[]);
    }
}

/// Adds STRICT to a CREATE TABLE for SQLite.
fn strict(sql: &str) -> String {
    let t = sql.trim().trim_end_matches(';');
    if t.to_ascii_uppercase().starts_with("CREATE TABLE")
        && !t.to_ascii_uppercase().ends_with("STRICT")
    {
        format!("{t} STRICT")
    } else {
        t.to_string()
    }
}

fn split_statements(text: &str) -> Vec<String> {
    // Statements end with ';' at the end of a line; lines starting with -- are comments.
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("--") || line.trim().is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if line.trim_end().ends_with(';') {
            out.push(cur.trim().trim_end_matches(';').to_string());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[test]
fn corpus() {
    corpus_with(Pair::new);
}

#[test]
fn corpus_on_the_paged_store() {
    corpus_with(Pair::paged);
}

fn corpus_with(new: fn() -> Pair) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testscripts/diff");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("corpus dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut total = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let mut pair = new();
        for s in split_statements(&text) {
            pair.check(&s);
        }
        total += pair.checked;
    }
    assert!(total > 100, "corpus ran {total} statements");
    eprintln!("differential corpus: {total} statements");
}

// ---- the random generator ----

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

#[derive(Clone)]
struct GenCol {
    name: String,
    ty: &'static str,
    /// A generated column: read by queries, never written.
    generated: bool,
}

#[derive(Clone)]
struct GenTable {
    name: String,
    cols: Vec<GenCol>,
    /// Keyed by a composite primary key: cairn scans it in key order, SQLite in rowid order.
    composite: bool,
}

const WORDS: &[&str] = &[
    "a", "b", "ab", "abc", "B", "Abc", "x_y", "x%y", "", " a ", "zz", "10", "2.5", "-3",
];

/// JSON documents a TEXT value may be (one malformed). Numbers in them are short: a real
/// computed and written into JSON may differ from SQLite's in its 17th digit (docs/sql.md).
const JSON_DOCS: &[&str] = &[
    r#"{"a":1,"b":[1,2.5,"x"],"c":"s"}"#,
    r#"{"a":{"b":2},"k":"v","n":null}"#,
    r#"[1,"two",[3],{"a":4}]"#,
    r#"{"a":-3,"b":[],"c":true}"#,
    r#"{"a":"x","a":2}"#,
    "3",
    r#""s""#,
    "[]",
    "{}",
    "{bad",
];

/// A JSON path, valid unless `bad`.
fn json_path(r: &mut Rng) -> String {
    r.pick(&[
        "'$.a'", "'$.b[1]'", "'$.a.b'", "'$[0]'", "'$'", "'$.k'", "'$[#-1]'", "'$.b[#]'", "'$.c'",
    ])
    .to_string()
}

fn literal(r: &mut Rng, ty: &str) -> String {
    if r.chance(12) {
        return "NULL".into();
    }
    if ty == "TEXT" && r.chance(20) {
        return format!("'{}'", r.pick(JSON_DOCS));
    }
    match ty {
        "INTEGER" => match r.below(10) {
            0 => (r.below(2000) as i64 - 1000).to_string(),
            1 => "9223372036854775807".into(),
            2 => "-9223372036854775807".into(),
            3 => "4611686018427387904".into(),
            _ => (r.below(12) as i64 - 3).to_string(),
        },
        // Reals with a fraction only: 1 and 1.0 in one ANY column group together, and which
        // of them a group shows is unspecified.
        "REALFRAC" => r.pick(&["-2.5", "0.25", "1.75", "-0.5", "0.1"]).to_string(),
        "REAL" => match r.below(6) {
            0 => format!("{}.25", r.below(10) as i64 - 5),
            1 => "0.1".into(),
            2 => "1e20".into(),
            3 => "-2.5".into(),
            _ => format!("{}.0", r.below(8) as i64 - 3),
        },
        // No X'00': SQLite's text functions stop at a NUL inside text, cairn's do not (docs/sql.md).
        "BLOB" => r.pick(&["X''", "X'41'", "X'4142'", "X'FF'"]).to_string(),
        _ => format!("'{}'", r.pick(WORDS)),
    }
}

fn any_literal(r: &mut Rng) -> String {
    let ty = *r.pick(&["INTEGER", "INTEGER", "REAL", "TEXT", "TEXT", "BLOB"]);
    literal(r, ty)
}

struct ExprGen<'a> {
    cols: &'a [(String, &'static str)],
    /// Aggregates allowed.
    agg: bool,
}

impl ExprGen<'_> {
    fn col(&self, r: &mut Rng) -> String {
        r.pick(self.cols).0.clone()
    }

    fn expr(&self, r: &mut Rng, depth: usize) -> String {
        if depth == 0 || r.chance(30) {
            return if r.chance(65) {
                self.col(r)
            } else {
                any_literal(r)
            };
        }
        let d = depth - 1;
        match r.below(27) {
            0 => format!(
                "({} {} {})",
                self.expr(r, d),
                r.pick(&["+", "-", "*", "/", "%"]),
                self.expr(r, d)
            ),
            1 => format!("({} || {})", self.expr(r, d), self.expr(r, d)),
            2 | 3 => self.cond(r, d),
            4 => format!("(-{})", self.expr(r, d)),
            5 => format!("abs({})", self.expr(r, d)),
            6 => format!("coalesce({}, {})", self.expr(r, d), self.expr(r, d)),
            7 => format!("ifnull({}, {})", self.expr(r, d), self.expr(r, d)),
            8 => format!("nullif({}, {})", self.expr(r, d), self.expr(r, d)),
            9 => format!("length({})", self.expr(r, d)),
            10 => format!(
                "{}({})",
                r.pick(&["lower", "upper", "trim", "ltrim", "rtrim", "typeof"]),
                self.expr(r, d)
            ),
            11 => format!(
                "substr({}, {}, {})",
                self.expr(r, d),
                r.below(7) as i64 - 3,
                r.below(7) as i64 - 3
            ),
            12 => format!("substr({}, {})", self.expr(r, d), r.below(7) as i64 - 3),
            13 => format!(
                "replace({}, {}, {})",
                self.expr(r, d),
                literal(r, "TEXT"),
                literal(r, "TEXT")
            ),
            14 => format!("instr({}, {})", self.expr(r, d), literal(r, "TEXT")),
            15 => format!("round({})", self.expr(r, d)),
            16 => format!(
                "{}({}, {})",
                r.pick(&["min", "max"]),
                self.expr(r, d),
                self.expr(r, d)
            ),
            17 => format!(
                "CASE WHEN {} THEN {} WHEN {} THEN {} ELSE {} END",
                self.cond(r, d),
                self.expr(r, d),
                self.cond(r, d),
                self.expr(r, d),
                self.expr(r, d)
            ),
            18 => format!(
                "CASE {} WHEN {} THEN {} ELSE {} END",
                self.expr(r, d),
                any_literal(r),
                self.expr(r, d),
                self.expr(r, d)
            ),
            19 => format!(
                "CAST({} AS {})",
                self.expr(r, d),
                r.pick(&["INTEGER", "REAL", "TEXT", "NUMERIC"])
            ),
            20 if self.agg => format!(
                "{}({})",
                r.pick(&[
                    "count",
                    "sum",
                    "total",
                    "min",
                    "max",
                    "count",
                    "group_concat",
                    "json_group_array"
                ]),
                self.expr(r, d.min(1))
            ),
            21 if self.agg => "count(*)".into(),
            22 if self.agg => format!("count(DISTINCT {})", self.col(r)),
            // hex() of a computed real would expose SQLite's inexact 17th digit; of a column
            // only, and not of a generated one (`gen_columns`' names start with g).
            22 if !self.agg => {
                let c = self.col(r);
                if c.rsplit('.').next().is_some_and(|n| n.starts_with('g')) {
                    format!("hex({})", self.cols[0].0)
                } else {
                    format!("hex({c})")
                }
            }
            23 => format!(
                "({} {} {})",
                self.expr(r, d),
                r.pick(&["&", "|"]),
                self.expr(r, d)
            ),
            // Dates: a time value (a date literal, or any expression: numbers are Julian days,
            // text is parsed or is NULL), then a modifier.
            24 => {
                let value = if r.chance(50) {
                    format!(
                        "'{:04}-{:02}-{:02} {:02}:{:02}'",
                        1990 + r.below(50),
                        1 + r.below(12),
                        1 + r.below(31),
                        r.below(24),
                        r.below(60)
                    )
                } else {
                    self.expr(r, d)
                };
                let modifier = match r.below(6) {
                    0 => format!("'{:+} days'", r.below(800) as i64 - 400),
                    1 => format!("'{:+} months'", r.below(30) as i64 - 15),
                    2 => format!("'{:+}.5 hours'", r.below(50) as i64 - 25),
                    3 => r
                        .pick(&["'start of month'", "'start of year'", "'end of month'"])
                        .to_string(),
                    4 => format!("'weekday {}'", r.below(7)),
                    _ => self.expr(r, d),
                };
                format!(
                    "{}({value}, {modifier})",
                    r.pick(&["date", "time", "datetime", "julianday", "unixepoch"])
                )
            }
            // JSON: a document, a path, a value. Nothing here fails (a malformed document
            // is NULL'd by json_valid, no value is a BLOB): the two engines evaluate
            // constant conditions at different times, so an error would show in only one.
            // Values written into JSON are columns or literals (see JSON_DOCS).
            25 => {
                let doc = if r.chance(40) {
                    format!("'{}'", r.pick(&JSON_DOCS[..JSON_DOCS.len() - 1]))
                } else {
                    let e = self.expr(r, d);
                    format!("iif(json_valid({e}), {e}, NULL)")
                };
                let path = json_path(r);
                let v = if r.chance(50) {
                    self.col(r)
                } else {
                    let ty = *r.pick(&["INTEGER", "REAL", "TEXT"]);
                    literal(r, ty)
                };
                match r.below(12) {
                    0 => format!("json_extract({doc}, {path})"),
                    1 => format!("json_type({doc}, {path})"),
                    2 => format!("json_array_length({doc})"),
                    3 => format!("json_valid({doc})"),
                    4 => format!("json({doc})"),
                    5 => format!("json_array({v}, {})", self.col(r)),
                    6 => format!("json_object('k', {v}, 'j', json_array({}))", self.col(r)),
                    7 => format!("json_quote({v})"),
                    8 => format!("json_set({doc}, {path}, {v})"),
                    9 => format!("json_insert({doc}, {path}, {v})"),
                    10 => format!("json_remove({doc}, {path})"),
                    _ => format!("json_patch({doc}, '{}')", r.pick(&JSON_DOCS[..4])),
                }
            }
            26 => format!(
                "('{}' {} {})",
                r.pick(&JSON_DOCS[..JSON_DOCS.len() - 1]),
                r.pick(&["->", "->>"]),
                r.pick(&["'a'", "0", "1", "-1", "'$.b[0]'", "'k'", "'[1]'"])
            ),
            _ => self.col(r),
        }
    }

    fn cond(&self, r: &mut Rng, depth: usize) -> String {
        let d = depth.saturating_sub(1);
        match r.below(12) {
            0..=2 => format!(
                "{} {} {}",
                self.expr(r, d),
                r.pick(&["=", "<>", "<", "<=", ">", ">=", "==", "!="]),
                self.expr(r, d)
            ),
            3 => format!("({} AND {})", self.cond(r, d), self.cond(r, d)),
            4 => format!("({} OR {})", self.cond(r, d), self.cond(r, d)),
            5 => format!("NOT ({})", self.cond(r, d)),
            6 => format!(
                "{} IS {}NULL",
                self.expr(r, d),
                if r.chance(50) { "NOT " } else { "" }
            ),
            7 => format!(
                "{} {}BETWEEN {} AND {}",
                self.expr(r, d),
                if r.chance(30) { "NOT " } else { "" },
                self.expr(r, d),
                self.expr(r, d)
            ),
            8 => {
                let n = 1 + r.below(4);
                let items: Vec<String> = (0..n).map(|_| any_literal(r)).collect();
                format!(
                    "{} {}IN ({})",
                    self.expr(r, d),
                    if r.chance(30) { "NOT " } else { "" },
                    items.join(", ")
                )
            }
            9 => format!(
                "{} {}LIKE '{}'",
                self.expr(r, d),
                if r.chance(30) { "NOT " } else { "" },
                r.pick(&["a%", "%b%", "_b%", "A_C", "%", "x!%y", "%y"])
            ),
            10 => format!(
                "{} GLOB '{}'",
                self.expr(r, d),
                r.pick(&["a*", "*b*", "?b*", "[a-b]*", "[^a]*", "A*"])
            ),
            _ => format!(
                "{} IS {}{}",
                self.expr(r, d),
                if r.chance(50) { "NOT " } else { "" },
                self.expr(r, d)
            ),
        }
    }
}

const COL_TYPES: [&str; 6] = ["INTEGER", "INTEGER", "REAL", "TEXT", "TEXT", "ANY"];

fn gen_schema(r: &mut Rng, pair: &mut Pair) -> Vec<GenTable> {
    let mut tables = Vec::new();
    for ti in 0..(2 + r.below(2)) {
        let name = format!("t{ti}");
        let ncols = 2 + r.below(3);
        let mut cols = Vec::new();
        for ci in 0..ncols {
            cols.push(GenCol {
                name: format!("c{ci}"),
                ty: COL_TYPES[r.below(COL_TYPES.len())],
                generated: false,
            });
        }
        let pk = r.below(3);
        let mut defs: Vec<String> = Vec::new();
        if pk == 0 {
            defs.push("id INTEGER PRIMARY KEY".into());
        }
        for c in &cols {
            defs.push(format!("{} {}", c.name, c.ty));
        }
        if pk == 2 {
            defs.push(format!("PRIMARY KEY ({}, id)", cols[0].name));
            defs.push("id INTEGER NOT NULL".into());
            // A table-level constraint must come last: rebuild in order.
            let pkdef = defs.remove(defs.len() - 2);
            defs.push(pkdef);
        }
        let mut all_cols = cols.clone();
        if pk != 1 {
            all_cols.insert(
                0,
                GenCol {
                    name: "id".into(),
                    ty: "INTEGER",
                    generated: false,
                },
            );
        }
        // Generated columns over the others, before any table constraint.
        if r.chance(60) {
            let at = defs
                .iter()
                .position(|d| d.starts_with("PRIMARY KEY"))
                .unwrap_or(defs.len());
            for (k, (def, col)) in gen_columns(r, &all_cols).into_iter().enumerate() {
                defs.insert(at + k, def);
                all_cols.push(col);
            }
        }
        pair.check(&format!("CREATE TABLE {name} ({})", defs.join(", ")));
        for ix in 0..r.below(3) {
            let c1 = &cols[r.below(cols.len())].name;
            let c2 = &cols[r.below(cols.len())].name;
            let cols_sql = if c1 != c2 && r.chance(40) {
                format!("{c1}, {c2}")
            } else {
                c1.clone()
            };
            pair.check(&format!("CREATE INDEX {name}_i{ix} ON {name} ({cols_sql})"));
        }
        // An index on a JSON expression, kept by every write and checked by `check()`.
        if r.chance(40) {
            let c = &cols[r.below(cols.len())].name;
            // Guarded, as most values are not JSON: a malformed one would fail the write.
            let doc = format!("iif(json_valid({c}), {c}, '[]')");
            let e = match r.below(3) {
                0 => format!("json_extract({doc}, '$.a')"),
                1 => format!("{doc} ->> 'a', {c}"),
                _ => format!("json_type({doc}, '$.b')"),
            };
            pair.check(&format!("CREATE INDEX {name}_j ON {name} ({e})"));
        }
        // Rows; primary key clashes are expected and make both sides fail alike.
        let nrows = 5 + r.below(25);
        for k in 0..nrows {
            let mut names = Vec::new();
            let mut vals = Vec::new();
            for c in all_cols.iter().filter(|c| !c.generated) {
                names.push(c.name.clone());
                if c.name == "id" {
                    vals.push(if pk == 0 && r.chance(30) {
                        "NULL".to_string()
                    } else {
                        (k as i64 + r.below(3) as i64).to_string()
                    });
                } else {
                    let ty = if c.ty == "ANY" {
                        *r.pick(&["INTEGER", "REALFRAC", "TEXT"])
                    } else {
                        c.ty
                    };
                    vals.push(literal(r, ty));
                }
            }
            pair.check(&format!(
                "INSERT INTO {name} ({}) VALUES ({})",
                names.join(", "),
                vals.join(", ")
            ));
        }
        tables.push(GenTable {
            name,
            cols: all_cols,
            composite: pk == 2,
        });
    }
    tables
}

/// One or two generated columns over `cols` (VIRTUAL or STORED, some reading the one before),
/// with their definitions. Their expressions are `ExprGen`'s: deterministic, without
/// subqueries; an evaluation that fails (an overflow) fails the write on both sides.
fn gen_columns(r: &mut Rng, cols: &[GenCol]) -> Vec<(String, GenCol)> {
    let mut read: Vec<(String, &'static str)> =
        cols.iter().map(|c| (c.name.clone(), c.ty)).collect();
    let mut out = Vec::new();
    for k in 0..1 + r.below(2) {
        let g = ExprGen {
            cols: &read,
            agg: false,
        };
        // A stored real read as text may differ in its 17th digit (docs/sql.md, item 6):
        // computed reals are kept short.
        let e = g.expr(r, 2);
        let e = format!(
            "CASE WHEN typeof({e}) <> 'real' THEN {e} WHEN abs({e}) < 1e9 THEN round({e}, 4) END"
        );
        let name = format!("g{k}");
        // ANY, as a typed column would refuse many values (STRICT); TEXT where the value is
        // text or NULL.
        let (e, ty) = if r.chance(25) {
            (format!("{} || 'x'", g.col(r)), "TEXT")
        } else {
            (e, "ANY")
        };
        let def = match r.below(4) {
            0 => format!("{name} {ty} GENERATED ALWAYS AS ({e}) STORED"),
            1 => format!("{name} {ty} AS ({e}) VIRTUAL"),
            _ => format!("{name} {ty} AS ({e})"),
        };
        read.push((name.clone(), ty));
        out.push((
            def,
            GenCol {
                name,
                ty,
                generated: true,
            },
        ));
    }
    out
}

fn gen_select(r: &mut Rng, tables: &[GenTable]) -> String {
    let njoin = if r.chance(12) {
        3
    } else if r.chance(35) {
        2
    } else {
        1
    };
    let mut from = Vec::new();
    let mut cols: Vec<(String, &'static str)> = Vec::new();
    for j in 0..njoin {
        let t = r.pick(tables);
        let alias = format!("a{j}");
        for c in &t.cols {
            cols.push((format!("{alias}.{}", c.name), c.ty));
        }
        from.push((t.name.clone(), alias));
    }
    let agg = r.chance(30);
    let g = ExprGen {
        cols: &cols,
        agg: false,
    };
    let mut sql = String::from("SELECT ");
    let distinct = !agg && r.chance(15);
    if distinct {
        sql.push_str("DISTINCT ");
    }
    let nout = 1 + r.below(3);
    let mut outs = Vec::new();
    let mut group = Vec::new();
    if agg {
        let ga = ExprGen {
            cols: &cols,
            agg: true,
        };
        if r.chance(60) {
            let gc = g.col(r);
            group.push(gc.clone());
            outs.push(gc);
        }
        // Only aggregates and grouped columns: a bare column's row is unspecified in SQLite.
        let _ = &ga;
        while outs.len() < nout {
            let f = *r.pick(&[
                "count",
                "sum",
                "max",
                "min",
                "total",
                "avg",
                "count(DISTINCT",
            ]);
            let arg = g.expr(r, 1);
            let shape = if f == "count(DISTINCT" {
                format!("{f} {arg})")
            } else {
                format!("{f}({arg})")
            };
            outs.push(if r.chance(20) {
                format!("{shape} + count(*)")
            } else {
                shape
            });
        }
    } else {
        for _ in 0..nout {
            outs.push(g.expr(r, 2));
        }
    }
    sql.push_str(&outs.join(", "));
    sql.push_str(&format!(" FROM {} {}", from[0].0, from[0].1));
    if njoin == 3 {
        // Three tables, inner joins written in any order: the planner may reorder them.
        let t1 = tables.iter().find(|t| t.name == from[1].0).expect("table");
        let t2 = tables.iter().find(|t| t.name == from[2].0).expect("table");
        let t0 = tables.iter().find(|t| t.name == from[0].0).expect("table");
        let on1 = format!(
            "a0.{} = a1.{}",
            r.pick(&t0.cols).name,
            r.pick(&t1.cols).name
        );
        let on2 = format!(
            "a{}.{} = a2.{}",
            r.below(2),
            r.pick(&t0.cols).name,
            r.pick(&t2.cols).name
        );
        let on2 = if on2.starts_with("a1.") {
            format!(
                "a1.{} = a2.{}",
                r.pick(&t1.cols).name,
                r.pick(&t2.cols).name
            )
        } else {
            on2
        };
        sql.push_str(&format!(
            " JOIN {} a1 ON {on1} JOIN {} a2 ON {on2}",
            from[1].0, from[2].0
        ));
    }
    if njoin == 2 {
        let kind = if r.chance(40) { "LEFT JOIN" } else { "JOIN" };
        let left = r
            .pick(
                &cols[..tables
                    .iter()
                    .find(|t| t.name == from[0].0)
                    .map_or(1, |t| t.cols.len())],
            )
            .0
            .clone();
        let right_t = tables.iter().find(|t| t.name == from[1].0).expect("table");
        let right = format!("a1.{}", r.pick(&right_t.cols).name);
        let extra = if r.chance(30) {
            format!(" AND {}", g.cond(r, 1))
        } else {
            String::new()
        };
        sql.push_str(&format!(
            " {kind} {} {} ON {left} = {right}{extra}",
            from[1].0, from[1].1
        ));
    }
    if r.chance(70) {
        sql.push_str(&format!(" WHERE {}", g.cond(r, 2)));
    }
    if r.chance(10) {
        let t = r.pick(tables);
        let c = &r.pick(&t.cols).name;
        sql.push_str(&format!(
            "{} {} {}IN (SELECT {c} FROM {})",
            if sql.contains(" WHERE ") {
                " AND"
            } else {
                " WHERE"
            },
            g.col(r),
            if r.chance(30) { "NOT " } else { "" },
            t.name
        ));
    }
    if agg && !group.is_empty() {
        sql.push_str(&format!(" GROUP BY {}", group.join(", ")));
        if r.chance(30) {
            sql.push_str(&format!(" HAVING count(*) > {}", r.below(3)));
        }
    }
    if r.chance(60) {
        let keys: Vec<String> = (1..=outs.len())
            .map(|i| format!("{i}{}", if r.chance(40) { " DESC" } else { "" }))
            .collect();
        sql.push_str(&format!(" ORDER BY {}", keys.join(", ")));
        if r.chance(40) {
            sql.push_str(&format!(" LIMIT {}", r.below(6)));
            if r.chance(40) {
                sql.push_str(&format!(" OFFSET {}", r.below(4)));
            }
        }
    }
    sql
}

/// A query with window calls over one table (sometimes grouped). A call whose value depends on
/// the order of rows that tie (row_number, lag, a ROWS frame...) gets an ORDER BY on every
/// column of the table: rows that still tie are identical, so either order gives the same
/// rows. Other calls (rank, the aggregates over RANGE and GROUPS frames) may order by anything.
fn gen_window_select(r: &mut Rng, tables: &[GenTable]) -> String {
    let t = r.pick(tables);
    let cols: Vec<(String, &'static str)> = t.cols.iter().map(|c| (c.name.clone(), c.ty)).collect();
    let g = ExprGen {
        cols: &cols,
        agg: false,
    };
    let grouped = r.chance(20);
    let gcol = g.col(r);
    // Grouped: the windows see the group column and aggregates of the group.
    let operand = |r: &mut Rng| -> String {
        if grouped {
            match r.below(3) {
                0 => gcol.clone(),
                1 => "count(*)".into(),
                _ => format!("sum({})", g.col(r)),
            }
        } else if r.chance(75) {
            g.col(r)
        } else {
            g.expr(r, 1)
        }
    };
    let mut outs = vec![if grouped { gcol.clone() } else { g.col(r) }];
    for _ in 0..1 + r.below(3) {
        let total_order = !grouped && r.chance(50);
        let mut over = Vec::new();
        if r.chance(40) {
            over.push(format!("PARTITION BY {}", operand(r)));
        }
        let mut order: Vec<String> = Vec::new();
        if total_order {
            for c in &t.cols {
                order.push(c.name.clone());
            }
        } else if r.chance(80) {
            for _ in 0..1 + r.below(2) {
                order.push(operand(r));
            }
        }
        let keys: Vec<String> = order
            .iter()
            .map(|k| {
                format!(
                    "{k}{}{}",
                    if r.chance(35) { " DESC" } else { "" },
                    *r.pick(&["", "", " NULLS FIRST", " NULLS LAST"])
                )
            })
            .collect();
        if !keys.is_empty() {
            over.push(format!("ORDER BY {}", keys.join(", ")));
        }
        let x = operand(r);
        let agg = *r.pick(&["count", "sum", "total", "avg", "min", "max", "count(*)"]);
        let agg_call = if agg == "count(*)" {
            agg.to_string()
        } else {
            format!("{agg}({x})")
        };
        let filter = if !r.chance(15) {
            String::new()
        } else if grouped {
            format!(" FILTER (WHERE {} > {})", operand(r), r.below(3))
        } else {
            format!(" FILTER (WHERE {})", g.cond(r, 1))
        };
        let n = 1 + r.below(3);
        let exclude = *r.pick(&[
            "",
            "",
            "",
            " EXCLUDE CURRENT ROW",
            " EXCLUDE GROUP",
            " EXCLUDE TIES",
        ]);
        let tie_free = [
            "".to_string(),
            "RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING".into(),
            "RANGE CURRENT ROW".into(),
            format!("GROUPS BETWEEN {n} PRECEDING AND CURRENT ROW"),
            format!("GROUPS BETWEEN 1 PRECEDING AND {n} FOLLOWING"),
            "GROUPS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING".to_string(),
        ];
        let (call, frame) = if total_order {
            let f = *r.pick(&[
                "row_number()",
                "ntile(3)",
                "lag(X)",
                "lead(X, 2, 0)",
                "first_value(X)",
                "last_value(X)",
                "nth_value(X, 2)",
                "AGG",
                "AGG",
            ]);
            let call = f.replace('X', &x).replace("AGG", &agg_call);
            let frame = match r.below(4) {
                0 => format!("ROWS BETWEEN {n} PRECEDING AND {} FOLLOWING", r.below(3)),
                1 => format!("ROWS {n} PRECEDING"),
                2 => "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING".to_string(),
                _ => r.pick(&tie_free).clone(),
            };
            (call, frame)
        } else {
            let f = *r.pick(&[
                "rank()",
                "dense_rank()",
                "percent_rank()",
                "cume_dist()",
                "AGG",
                "AGG",
                "AGG",
            ]);
            (f.replace("AGG", &agg_call), r.pick(&tie_free).clone())
        };
        let aggregate = call == agg_call;
        if aggregate && !frame.is_empty() && !(frame.starts_with("GROUPS") && keys.is_empty()) {
            over.push(format!("{frame}{exclude}"));
        }
        let filter = if aggregate { filter } else { String::new() };
        outs.push(format!("{call}{filter} OVER ({})", over.join(" ")));
    }
    let mut sql = format!("SELECT {} FROM {}", outs.join(", "), t.name);
    if r.chance(40) {
        sql.push_str(&format!(" WHERE {}", g.cond(r, 1)));
    }
    if grouped {
        sql.push_str(&format!(" GROUP BY {gcol}"));
    }
    if r.chance(30) {
        sql.push_str(" ORDER BY ");
        let keys: Vec<String> = (1..=outs.len()).map(|i| i.to_string()).collect();
        sql.push_str(&keys.join(", "));
    }
    sql
}

fn gen_write(r: &mut Rng, tables: &[GenTable]) -> String {
    let t = r.pick(tables);
    let cols: Vec<(String, &'static str)> = t.cols.iter().map(|c| (c.name.clone(), c.ty)).collect();
    let g = ExprGen {
        cols: &cols,
        agg: false,
    };
    match r.below(4) {
        0 => {
            // Rewriting a composite key row by row collides or not depending on the scan
            // order, which differs (see GenTable::composite); key columns stay put there.
            let cols: Vec<&GenCol> = t
                .cols
                .iter()
                .filter(|c| !c.generated && (!t.composite || (c.name != "id" && c.name != "c0")))
                .collect();
            let c = cols[r.below(cols.len())];
            let v = if c.name == "id" {
                format!("{} + 100", g.col(r))
            } else {
                g.expr(r, 2)
            };
            // OR IGNORE on a key column: which of two colliding rows wins depends on the scan
            // order, which differs when cairn keys a table by its primary key (SQLite: rowid).
            let or = if c.name != "id" && r.chance(20) {
                "OR IGNORE "
            } else {
                ""
            };
            format!(
                "UPDATE {}{} SET {} = {} WHERE {}",
                or,
                t.name,
                c.name,
                v,
                g.cond(r, 2)
            )
        }
        1 => format!("DELETE FROM {} WHERE {}", t.name, g.cond(r, 2)),
        _ => {
            let written: Vec<&GenCol> = t.cols.iter().filter(|c| !c.generated).collect();
            let names: Vec<String> = written.iter().map(|c| c.name.clone()).collect();
            let vals: Vec<String> = written
                .iter()
                .map(|c| {
                    if c.name == "id" {
                        (r.below(40) as i64).to_string()
                    } else {
                        literal(r, if c.ty == "ANY" { "TEXT" } else { c.ty })
                    }
                })
                .collect();
            let or = *r.pick(&["", "", "OR IGNORE ", "OR REPLACE "]);
            format!(
                "INSERT {or}INTO {} ({}) VALUES ({})",
                t.name,
                names.join(", "),
                vals.join(", ")
            )
        }
    }
}

fn cases() -> usize {
    std::env::var("CAIRN_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

fn seed() -> u64 {
    std::env::var("CAIRN_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED)
}

#[test]
fn random_queries() {
    let mut total = 0;
    for s in 0..8u64 {
        let mut r = Rng(seed().wrapping_add(s).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut pair = Pair::new();
        let tables = gen_schema(&mut r, &mut pair);
        for _ in 0..cases() {
            let q = gen_select(&mut r, &tables);
            pair.check(&q);
        }
        total += pair.checked;
    }
    eprintln!("random differential queries: {total} statements");
}

#[test]
fn random_window_queries() {
    let mut total = 0;
    for s in 0..4u64 {
        let mut r = Rng(seed()
            .wrapping_add(200 + s)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1);
        let mut pair = Pair::new();
        let tables = gen_schema(&mut r, &mut pair);
        for _ in 0..cases() {
            let q = gen_window_select(&mut r, &tables);
            pair.check(&q);
        }
        total += pair.checked;
    }
    eprintln!("random differential window queries: {total} statements");
}

#[test]
fn random_writes() {
    random_writes_with(Pair::new);
}

#[test]
fn random_writes_on_the_paged_store() {
    random_writes_with(Pair::paged);
}

fn random_writes_with(new: fn() -> Pair) {
    let mut total = 0;
    for s in 0..6u64 {
        let mut r = Rng(seed()
            .wrapping_add(100 + s)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1);
        let mut pair = new();
        let tables = gen_schema(&mut r, &mut pair);
        for i in 0..cases() / 2 {
            let w = gen_write(&mut r, &tables);
            pair.check(&w);
            if i % 5 == 0 {
                for t in &tables {
                    pair.check(&format!("SELECT * FROM {}", t.name));
                }
            }
        }
        for t in &tables {
            pair.check(&format!("SELECT * FROM {}", t.name));
        }
        // Indexes still match the rows after all those writes.
        assert_eq!(
            pair.cairn.check().expect("check runs"),
            Vec::<String>::new()
        );
        total += pair.checked;
    }
    eprintln!("random differential writes: {total} statements");
}

/// Foreign keys on: a parent, children whose one key names it with random actions (by its
/// INTEGER PRIMARY KEY or by a UNIQUE text column, immediate or deferred), a table that names
/// itself, and random writes to all of them, inside and outside transactions. A key changes
/// one row at a time (which of two rows a multi-row key change hits first is scan order),
/// a DELETE from the table that names itself deletes one row (docs/sql.md, difference 12), and
/// RESTRICT stays off that table (SQLite checks it row by row, cairn once the statement's
/// cascades are done).
#[test]
fn random_foreign_key_writes() {
    const ACTIONS: [&str; 5] = [
        "CASCADE",
        "SET NULL",
        "SET DEFAULT",
        "RESTRICT",
        "NO ACTION",
    ];
    let mut total = 0;
    for s in 0..6u64 {
        let mut r = Rng(seed()
            .wrapping_add(300 + s)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1);
        let mut pair = Pair::new();
        pair.check("PRAGMA foreign_keys = ON");
        pair.check("CREATE TABLE p (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v INTEGER)");
        let mut children = Vec::new();
        for i in 0..(2 + r.below(2)) {
            let (col, ty, target) = if r.chance(60) {
                ("pid", "INTEGER", "id")
            } else {
                ("pk", "TEXT", "k")
            };
            let default = if ty == "TEXT" { "'k1'" } else { "1" };
            let deferred = if r.chance(20) {
                " DEFERRABLE INITIALLY DEFERRED"
            } else {
                ""
            };
            pair.check(&format!(
                "CREATE TABLE c{i} (id INTEGER PRIMARY KEY, {col} {ty} DEFAULT {default} \
                 REFERENCES p ({target}) ON DELETE {} ON UPDATE {}{deferred}, v INTEGER)",
                r.pick(&ACTIONS),
                r.pick(&ACTIONS),
            ));
            if r.chance(60) {
                pair.check(&format!("CREATE INDEX c{i}_fk ON c{i} ({col})"));
            }
            children.push((format!("c{i}"), col, ty));
        }
        pair.check(&format!(
            "CREATE TABLE s (id INTEGER PRIMARY KEY, up INTEGER REFERENCES s (id) ON DELETE {}, v INTEGER)",
            r.pick(&["CASCADE", "SET NULL", "NO ACTION"])
        ));
        let key = |r: &mut Rng| (r.below(12) as i64).to_string();
        let text_key = |r: &mut Rng| format!("'k{}'", r.below(12));
        for i in 1..8 {
            pair.check(&format!(
                "INSERT INTO p VALUES ({i}, 'k{i}', {})",
                r.below(5)
            ));
        }
        let mut tables: Vec<String> = vec!["p".into(), "s".into()];
        tables.extend(children.iter().map(|c| c.0.clone()));
        let mut in_tx = false;
        for i in 0..cases() {
            let w = match r.below(9) {
                0 => format!(
                    "INSERT INTO p VALUES ({}, {}, {})",
                    key(&mut r),
                    text_key(&mut r),
                    r.below(5)
                ),
                1 => format!(
                    "UPDATE p SET id = {} WHERE id = {}",
                    key(&mut r),
                    key(&mut r)
                ),
                2 => format!(
                    "UPDATE p SET k = {} WHERE id = {}",
                    text_key(&mut r),
                    key(&mut r)
                ),
                3 => format!("DELETE FROM p WHERE v = {}", r.below(5)),
                4 => format!("DELETE FROM p WHERE id = {}", key(&mut r)),
                5 | 6 => {
                    let (t, col, ty) = r.pick(&children).clone();
                    let v = if r.chance(15) {
                        "NULL".to_string()
                    } else if ty == "TEXT" {
                        text_key(&mut r)
                    } else {
                        key(&mut r)
                    };
                    if r.chance(50) {
                        format!(
                            "INSERT INTO {t} (id, {col}, v) VALUES ({}, {v}, {})",
                            r.below(40),
                            r.below(5)
                        )
                    } else {
                        format!("UPDATE {t} SET {col} = {v} WHERE id = {}", r.below(40))
                    }
                }
                7 => {
                    let up = if r.chance(20) {
                        "NULL".into()
                    } else {
                        key(&mut r)
                    };
                    format!(
                        "INSERT INTO s VALUES ({}, {up}, {})",
                        key(&mut r),
                        r.below(5)
                    )
                }
                _ => {
                    if r.chance(50) {
                        // One row: a cascade through s may delete a row the WHERE matched
                        // before the scan reaches it (SQLite then does not count it).
                        format!("DELETE FROM s WHERE id = {}", key(&mut r))
                    } else if in_tx {
                        in_tx = r.chance(30);
                        if in_tx {
                            "SELECT 1".into()
                        } else {
                            (*r.pick(&["COMMIT", "ROLLBACK"])).into()
                        }
                    } else {
                        in_tx = true;
                        "BEGIN".into()
                    }
                }
            };
            pair.check(&w);
            if i % 7 == 0 {
                for t in &tables {
                    pair.check(&format!("SELECT * FROM {t}"));
                }
                pair.check("PRAGMA foreign_key_check");
            }
        }
        if in_tx {
            pair.check("ROLLBACK");
        }
        for t in &tables {
            pair.check(&format!("SELECT * FROM {t}"));
        }
        assert_eq!(
            pair.cairn.check().expect("check runs"),
            Vec::<String>::new()
        );
        total += pair.checked;
    }
    eprintln!("random differential foreign key writes: {total} statements");
}

/// Adaptive semi- and anti-joins (`testscripts/diff/99_semi_joins_adaptive.sql`'s tables) run
/// with parameters, each statement several times with other values, as a prepared statement
/// is: each run decides afresh when to build its set.
#[test]
fn semi_joins_with_parameters() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testscripts/diff");
    let text = std::fs::read_to_string(format!("{dir}/99_semi_joins_adaptive.sql")).expect("read");
    let mut pair = Pair::new();
    for s in split_statements(&text) {
        if s.starts_with("CREATE") || s.starts_with("INSERT") {
            pair.check(&s);
        }
    }
    let queries = [
        "SELECT count(*), sum(b) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.k = ao.k AND ai.w > ?)",
        "SELECT count(*), sum(b) FROM ao WHERE NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id AND ai.w < ?)",
        "SELECT count(*) FROM ao WHERE EXISTS (SELECT 1 FROM ai WHERE ai.t = ao.t AND ai.k > ?) AND ao.b > ?",
        "SELECT count(*), sum(ao.b) FROM ao LEFT JOIN ai ON ai.id = ao.id AND ai.w > ? WHERE ai.id IS NULL",
        "SELECT count(*) FROM ao WHERE ao.id > ? AND NOT EXISTS (SELECT 1 FROM ai WHERE ai.id = ao.id)",
    ];
    for q in queries {
        for v in [-1i64, 0, 3, 6, 9, 250, 1000] {
            let n = q.matches('?').count();
            let params = vec![Value::Integer(v); n];
            pair.check2(q, q, &params);
        }
    }
    assert!(pair.checked > 30, "checked {}", pair.checked);
}

/// Parameters are numbered as SQLite numbers them (in the order they appear in the text: `?NNN`
/// is NNN, `?` and a new name take one more than the largest number so far, a name seen before
/// keeps its number), whatever order the planner meets them in: the same count, the same index
/// for each name, and the same results when the same values are bound by position.
#[test]
fn parameters_are_numbered_as_in_sqlite() {
    use Value::{Integer as I, Text as T};
    let t = |s: &str| T(s.into());
    let cases: Vec<(&str, Vec<Value>)> = vec![
        // SELECT: result columns, WHERE, ORDER BY, LIMIT and OFFSET.
        (
            "SELECT n + :a, v FROM t WHERE n > :b ORDER BY n * :c LIMIT :d",
            vec![I(1), I(15), I(-1), I(2)],
        ),
        (
            "SELECT k, :a FROM t WHERE k <> :b ORDER BY k LIMIT :c OFFSET :d",
            vec![t("x"), I(2), I(2), I(1)],
        ),
        (
            "SELECT t.k, u.w + :a FROM t JOIN u ON u.t_k = t.k AND u.w > :b WHERE t.n < :c ORDER BY 1, 2",
            vec![I(1), I(150), I(25)],
        ),
        (
            "SELECT t_k, sum(w) + :a FROM u GROUP BY t_k HAVING sum(w) > :b ORDER BY t_k",
            vec![I(1000), I(150)],
        ),
        // UPDATE: SET before WHERE before RETURNING.
        (
            "UPDATE t SET n = :v WHERE k = :k RETURNING k, n, :r",
            vec![I(7), I(2), t("r")],
        ),
        (
            "UPDATE t SET n = n + :d, v = :s WHERE k >= :k RETURNING *",
            vec![I(5), t("s"), I(3)],
        ),
        ("UPDATE t SET n = :n WHERE k = :k", vec![I(99), I(1)]),
        // DELETE.
        (
            "DELETE FROM t WHERE n > :lo AND n < :hi RETURNING k, :tag",
            vec![I(15), I(35), t("gone")],
        ),
        // INSERT: several rows, a name used in two of them; INSERT ... SELECT; upsert.
        (
            "INSERT INTO t (k, v, n) VALUES (:k1, :v, :n), (:k2, :v, :n + 1) RETURNING k, v, n",
            vec![I(10), t("z"), I(5), I(11)],
        ),
        (
            "INSERT INTO t (k, v, n) SELECT k + :off, v, n * :m FROM t WHERE n > :min",
            vec![I(100), I(2), I(15)],
        ),
        (
            "INSERT INTO t (k, v, n) VALUES (:k, :v, :n) ON CONFLICT (k) DO UPDATE SET n = :a WHERE excluded.n > :b RETURNING *",
            vec![I(2), t("q"), I(50), I(77), I(10)],
        ),
        (
            "INSERT INTO t (k, v, n) VALUES (:k, :v, :n) ON CONFLICT (k) DO UPDATE SET n = :a, v = excluded.v || :s",
            vec![I(3), t("q"), I(50), I(-3), t("!")],
        ),
        // Subqueries, a CTE, a compound.
        (
            "SELECT k FROM t WHERE n > :a AND k IN (SELECT t_k FROM u WHERE w > :b) ORDER BY k",
            vec![I(0), I(250)],
        ),
        (
            "SELECT k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.t_k = t.k AND w = :w) OR n = :n ORDER BY k",
            vec![I(100), I(40)],
        ),
        (
            "SELECT (SELECT max(w) FROM u WHERE t_k = t.k AND w < :a), k FROM t WHERE k < :b ORDER BY k",
            vec![I(250), I(4)],
        ),
        (
            "UPDATE t SET n = (SELECT count(*) FROM u WHERE w > :a) WHERE k IN (SELECT t_k FROM u WHERE w < :b)",
            vec![I(150), I(250)],
        ),
        (
            "WITH c(x) AS (SELECT n + :a FROM t WHERE k > :b) SELECT x * :c FROM c WHERE x > :d ORDER BY x",
            vec![I(1), I(1), I(10), I(25)],
        ),
        (
            "SELECT :a, k FROM t WHERE k = :b UNION SELECT :c, k FROM u WHERE k = :d ORDER BY 1, 2",
            vec![I(1), I(2), I(3), I(3)],
        ),
        // A name used again keeps its number.
        (
            "SELECT k FROM t WHERE n > :a AND n < :b OR k = :a ORDER BY k",
            vec![I(15), I(35)],
        ),
        // Names as SQLite reads them: `::` inside, a suffix in parentheses.
        (
            "SELECT $ns::a, $ns::b + 1, @x::y::z, :p(1), $ns::a, $q(a,b) FROM t WHERE k = $ns::b",
            vec![I(1), I(2), t("z"), t("p"), t("q")],
        ),
        // Mixed with `?` and `?NNN`: a new name takes one more than the largest number so far,
        // and so does a bare `?` after a name.
        (
            "SELECT ?5, :a, ?",
            vec![I(1), I(2), I(3), I(4), I(5), I(6), I(7)],
        ),
        ("SELECT :a, ?, :b, ?1, :a", vec![I(1), I(2), I(3)]),
        (
            "UPDATE t SET n = ?2 WHERE k = :k RETURNING ?, :k",
            vec![I(0), I(8), I(4), I(9)],
        ),
        ("SELECT ?3 WHERE :x = 1", vec![I(1), I(2), I(3), I(1)]),
        // `$name` and `@name`, distinct from `:name`.
        (
            "SELECT k FROM t WHERE n > $x AND k < @y ORDER BY k",
            vec![I(15), I(4)],
        ),
        ("SELECT $x, :x, @x, $x", vec![I(1), I(2), I(3)]),
    ];
    for (sql, values) in cases {
        let mut pair = Pair::new();
        for s in [
            "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, n INTEGER)",
            "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', 40)",
            "CREATE TABLE u (k INTEGER PRIMARY KEY, t_k INTEGER, w INTEGER)",
            "INSERT INTO u VALUES (1, 1, 100), (2, 2, 200), (3, 2, 300)",
        ] {
            pair.check(s);
        }
        let ours = pair.cairn.prepare(sql).expect("cairn prepares");
        let theirs = pair.sqlite.prepare(sql).expect("sqlite prepares");
        assert_eq!(
            ours.param_count(),
            theirs.parameter_count(),
            "parameter count of {sql}"
        );
        let mut i = 0;
        while let Some(at) = sql[i..].find([':', '$', '@']).map(|at| at + i) {
            let end = sql[at + 1..]
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .map_or(sql.len(), |e| e + at + 1);
            let name = &sql[at..end];
            assert_eq!(
                ours.param_index(name).map(|i| i + 1),
                theirs.parameter_index(name).expect("sqlite names it"),
                "number of {name} in {sql}"
            );
            i = end;
        }
        drop(theirs);
        assert!(
            !matches!(pair.check2(sql, sql, &values), Res::Err(_)),
            "{sql} runs"
        );
        pair.check("SELECT * FROM t");
        pair.check("SELECT * FROM u");
    }
}

/// A schema for the introspection tests: keys of each kind, UNIQUE constraints, indexes, NOT
/// NULL, defaults and CHECKs, and columns renamed and dropped after the fact.
const INTROSPECTED: &str = "
CREATE TABLE person (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT DEFAULT 'x', born INT CHECK (born > 1900), gone INT);
CREATE TABLE pet (owner INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT DEFAULT ('cat'), age REAL DEFAULT -1.5, PRIMARY KEY (owner, name), UNIQUE (kind, age));
CREATE TABLE kysely_migration (name TEXT PRIMARY KEY, timestamp TEXT NOT NULL);
CREATE INDEX pet_age ON pet (age, kind);
CREATE UNIQUE INDEX person_name ON person (name);
ALTER TABLE person RENAME COLUMN born TO birth_year;
ALTER TABLE person DROP COLUMN gone;
ALTER TABLE person ADD COLUMN note TEXT DEFAULT '' CHECK (length(note) < 100);
";

fn introspected(pair: &mut Pair) {
    for s in split_statements(INTROSPECTED) {
        pair.check(&s);
    }
}

/// The queries Kysely's SQLite introspector sends (`SqliteIntrospector#getTableMetadata`, as
/// its query compiler writes them, with its parameters) give SQLite's rows.
#[test]
fn kysely_introspection_queries() {
    let mut pair = Pair::new();
    introspected(&mut pair);
    let params: Vec<Value> = [
        "table",
        "view",
        "sqlite_%",
        "kysely_migration",
        "kysely_migration_lock",
    ]
    .iter()
    .map(|s| Value::Text(s.to_string()))
    .collect();
    let tables = r#"select "name", "sql", "type" from "sqlite_master" where "type" in (?, ?) and "name" not like ? and "name" != ? and "name" != ? order by "name""#;
    // The stored CREATE text is cairn's own: compared as a definition below.
    let names = tables.replace(r#""sql","#, r#""sql" is null,"#);
    pair.check2(&names, &names, &params);
    let columns = format!(
        r#"with "table_list" as ({tables}) select "tl"."name" as "table", "p"."cid", "p"."name", "p"."type", "p"."notnull", "p"."dflt_value", "p"."pk" from "table_list" as "tl", pragma_table_info(tl.name) as "p" order by "tl"."name", "p"."cid""#
    );
    let Res::Rows(_, rows) = pair.check2(&columns, &columns, &params) else {
        panic!("the introspector's query gives rows");
    };
    assert_eq!(rows.len(), 9, "{rows:?}");
    let with_internal = &params[..3];
    let all = r#"select "name" from "sqlite_master" where "type" in (?, ?) and "name" not like ? order by "name""#;
    pair.check2(all, all, with_internal);
}

/// The CREATE statements `sqlite_schema` gives are cairn's own text, not the statement as
/// written (docs/sql.md): each of SQLite's, run in a new cairn database, makes the same
/// definitions as cairn's.
#[test]
fn schema_sql_makes_the_same_definitions() {
    let mut pair = Pair::new();
    introspected(&mut pair);
    let read = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid";
    let Res::Rows(_, sqlite_rows) = pair.run_sqlite(read, &[]) else {
        panic!("sqlite_schema reads");
    };
    let mut again = Database::memory();
    for r in &sqlite_rows {
        if let Value::Text(sql) = &r[3] {
            let sql = sql.strip_suffix(" STRICT").unwrap_or(sql);
            again
                .execute(sql, &[])
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
    let listing = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name";
    let mine = pair.cairn.execute(listing, &[]).expect("cairn lists");
    assert_eq!(again.execute(listing, &[]).expect("cairn lists"), mine);
    assert_eq!(mine.rows().len(), sqlite_rows.len());
}

/// `CAIRN_DIFF_REPLAY=file.sql` replays a statement log (as written on a failure).
#[test]
fn replay() {
    let Ok(path) = std::env::var("CAIRN_DIFF_REPLAY") else {
        return;
    };
    let text = std::fs::read_to_string(path).expect("replay file");
    let mut pair = Pair::new();
    for s in split_statements(&text) {
        pair.check(&s);
    }
}
