//! Golden scripts (toydb-style): each file under `testscripts/` holds cases separated by a line
//! `===`; a case is input, a line `---`, and the expected output. `CAIRN_BLESS=1` rewrites the
//! expected outputs from what the engine prints now (review the diff before committing it).
//!
//! - `testscripts/parse/`: the input is parsed; the output is the AST (`{:?}`) or the error.
//! - `testscripts/sql/`: the input's statements run in one database per file; the output is
//!   each statement's result (rows as `a|b`, `changes=N`, `ok`, or `error CODE: message`).
//!   `EXPLAIN` cases show plans.

use cairn_sql::{parse_statements, Database, Output, Value};
use std::fmt::Write;
use std::path::Path;

fn fmt_value(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => cairn_sql::fmt_real(*r),
        Value::Text(s) => s.clone(),
        Value::Blob(b) => cairn_sql::sql_literal(&Value::Blob(b.clone())),
    }
}

fn run_parse(input: &str) -> String {
    match parse_statements(input) {
        Ok(stmts) => stmts
            .iter()
            .map(|(s, ..)| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("error {}: {e}", e.code()),
    }
}

fn run_sql(db: &mut Database, input: &str) -> String {
    let mut out = String::new();
    let stmts = match parse_statements(input) {
        Ok(s) => s,
        Err(e) => return format!("error {}: {e}", e.code()),
    };
    for (_, text, _) in stmts {
        match db.execute(&text, &[]) {
            Ok(Output::Rows { columns, rows }) => {
                if !text.to_ascii_uppercase().starts_with("EXPLAIN") {
                    let _ = writeln!(out, "{}", columns.join("|"));
                }
                for r in rows {
                    let _ = writeln!(
                        out,
                        "{}",
                        r.iter().map(fmt_value).collect::<Vec<_>>().join("|")
                    );
                }
            }
            Ok(Output::Changes { changes, .. }) => {
                let _ = writeln!(out, "changes={changes}");
            }
            Ok(Output::Done) => {
                let _ = writeln!(out, "ok");
            }
            Err(e) => {
                let _ = writeln!(out, "error {}: {e}", e.code());
            }
        }
    }
    out.trim_end().to_string()
}

fn run_dir(dir: &str, sql: bool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testscripts")
        .join(dir);
    let bless = std::env::var("CAIRN_BLESS").is_ok();
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut count = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let mut db = Database::memory();
        let mut rewritten = Vec::new();
        for case in text.split("\n===\n") {
            let (input, expected) = match case.split_once("\n---\n") {
                Some((i, e)) => (i, e.trim_end()),
                None => (case.trim_end_matches("\n---").trim_end(), ""),
            };
            let got = if sql {
                run_sql(&mut db, input)
            } else {
                run_parse(input)
            };
            count += 1;
            if got != expected {
                failures.push(format!(
                    "{}:\n{input}\n--- expected\n{expected}\n--- got\n{got}\n",
                    f.display()
                ));
            }
            rewritten.push(format!("{input}\n---\n{got}"));
        }
        if bless {
            std::fs::write(&f, rewritten.join("\n===\n") + "\n").expect("write");
        }
    }
    assert!(count > 0, "no cases in {dir}");
    if !bless && !failures.is_empty() {
        panic!(
            "{} golden cases differ:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

#[test]
fn parse_scripts() {
    run_dir("parse", false);
}

#[test]
fn sql_scripts() {
    run_dir("sql", true);
}
