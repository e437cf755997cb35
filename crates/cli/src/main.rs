//! `cairn [FILE]`: a shell over the same engine the browser runs. SQL comes from a prompt (on a
//! terminal) or from stdin; dot-commands `.tables`, `.schema [TABLE]`, `.check`,
//! `.mode table|csv|json`, `.read FILE` (the rest of the line, quotes optional; files nest at
//! most 16 deep), `.help`, `.quit`. In non-interactive use the first failing statement or
//! dot-command, also inside a `.read` file, ends the run with exit code 1.
//!
//! With no FILE the database lives in memory. A FILE is a cairn database file (one exported
//! from the browser with `export()`, say), opened with full durability; it is created when it
//! does not exist. A file that cannot be opened (not cairn's, damaged, newer format) ends the run
//! with exit code 2 and the reason.

#![forbid(unsafe_code)]

use cairn_sql::Paged;
use cairn_sql::{Database, Output, Value};
use cairn_store::{Options, StdFile};
use std::io::{BufRead, IsTerminal, Write};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Table,
    Csv,
    Json,
}

struct Shell {
    db: Database,
    mode: Mode,
    interactive: bool,
    /// How many `.read` files are open inside each other (a file that reads itself would
    /// otherwise recurse until the stack runs out).
    reading: usize,
}

/// `.read` files open inside each other at most this deep.
const MAX_READ_DEPTH: usize = 16;

fn text(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => cairn_sql::fmt_real(*r),
        Value::Text(s) => s.clone(),
        Value::Blob(_) => cairn_sql::sql_literal(v),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn json_string(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) if r.is_finite() => cairn_sql::fmt_real(*r),
        Value::Real(_) => "null".into(),
        Value::Text(s) => json_string(s),
        Value::Blob(_) => json_string(&cairn_sql::sql_literal(v)),
    }
}

/// Renders a result in the chosen mode.
fn render(mode: Mode, columns: &[String], rows: &[Vec<Value>]) -> String {
    let mut out = String::new();
    match mode {
        Mode::Csv => {
            out.push_str(
                &columns
                    .iter()
                    .map(|c| csv_field(c))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            out.push('\n');
            for r in rows {
                out.push_str(
                    &r.iter()
                        .map(|v| csv_field(&text(v)))
                        .collect::<Vec<_>>()
                        .join(","),
                );
                out.push('\n');
            }
        }
        Mode::Json => {
            out.push('[');
            for (i, r) in rows.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("\n  {");
                let fields: Vec<String> = columns
                    .iter()
                    .zip(r)
                    .map(|(c, v)| format!("{}: {}", json_string(c), json_value(v)))
                    .collect();
                out.push_str(&fields.join(", "));
                out.push('}');
            }
            out.push_str(if rows.is_empty() { "]\n" } else { "\n]\n" });
        }
        Mode::Table => {
            let cells: Vec<Vec<String>> =
                rows.iter().map(|r| r.iter().map(text).collect()).collect();
            let mut w: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
            for r in &cells {
                for (i, c) in r.iter().enumerate() {
                    if let Some(x) = w.get_mut(i) {
                        *x = (*x).max(c.chars().count());
                    }
                }
            }
            let line = |l: char, m: char, r: char| {
                let mut s = String::new();
                s.push(l);
                for (i, x) in w.iter().enumerate() {
                    if i > 0 {
                        s.push(m);
                    }
                    s.push_str(&"-".repeat(x + 2));
                }
                s.push(r);
                s.push('\n');
                s
            };
            let row = |vals: &[String], numeric: &[bool]| {
                let mut s = String::from("|");
                for (i, x) in w.iter().enumerate() {
                    let v = vals.get(i).map(String::as_str).unwrap_or("");
                    let pad = x - v.chars().count();
                    if numeric.get(i).copied().unwrap_or(false) {
                        s.push_str(&format!(" {}{v} |", " ".repeat(pad)));
                    } else {
                        s.push_str(&format!(" {v}{} |", " ".repeat(pad)));
                    }
                }
                s.push('\n');
                s
            };
            out.push_str(&line('+', '+', '+'));
            out.push_str(&row(columns, &[]));
            out.push_str(&line('+', '+', '+'));
            for (r, vals) in rows.iter().zip(&cells) {
                let numeric: Vec<bool> = r
                    .iter()
                    .map(|v| matches!(v, Value::Integer(_) | Value::Real(_)))
                    .collect();
                out.push_str(&row(vals, &numeric));
            }
            out.push_str(&line('+', '+', '+'));
        }
    }
    out
}

/// Whether `buf` holds a complete statement (ends with `;` outside strings and comments).
fn complete(buf: &str) -> bool {
    match cairn_sql::tokenize(buf) {
        Ok(toks) => {
            let n = toks.len();
            n >= 2 && toks[n - 2].tok == cairn_sql::Tok::Op(";")
        }
        // An unterminated string or identifier waits for more input; any other error is
        // complete enough to be reported.
        Err(e) => !e.to_string().contains("unterminated"),
    }
}

impl Shell {
    /// Runs SQL text; returns false if a statement failed.
    fn sql(&mut self, sql: &str, out: &mut dyn Write) -> bool {
        let stmts = match cairn_sql::parse_statements(sql) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error {}: {e}", e.code());
                return false;
            }
        };
        for (_, text, _) in stmts {
            match self.db.execute(&text, &[]) {
                Ok(Output::Rows { columns, rows }) => {
                    let _ = write!(out, "{}", render(self.mode, &columns, &rows));
                }
                Ok(Output::Changes { changes, .. }) => {
                    if self.interactive {
                        let _ = writeln!(
                            out,
                            "({changes} row{} changed)",
                            if changes == 1 { "" } else { "s" }
                        );
                    }
                }
                Ok(Output::Done) => {}
                Err(e) => {
                    eprintln!("error {}: {e}", e.code());
                    return false;
                }
            }
        }
        true
    }

    /// Runs a dot-command; returns None to quit, Some(ok) otherwise.
    fn dot(&mut self, line: &str, out: &mut dyn Write) -> Option<bool> {
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let arg = rest.split_whitespace().next();
        match cmd {
            ".quit" | ".exit" => return None,
            ".help" => {
                let _ = writeln!(
                    out,
                    ".check              verify every page, row and index entry\n\
                     .help               this text\n\
                     .mode table|csv|json  how results are printed\n\
                     .quit               leave\n\
                     .read FILE          run the SQL in FILE\n\
                     .schema [TABLE]     the CREATE statements\n\
                     .tables             the table names"
                );
            }
            ".tables" => {
                let names: Vec<String> = self
                    .db
                    .catalog()
                    .tables
                    .values()
                    .map(|t| t.name.clone())
                    .collect();
                let _ = writeln!(out, "{}", names.join("  "));
            }
            ".schema" => {
                for t in self.db.catalog().tables.values() {
                    if arg.is_some_and(|a| !a.eq_ignore_ascii_case(&t.name)) {
                        continue;
                    }
                    let _ = writeln!(out, "{};", t.sql());
                    for ix in t.indexes.iter().filter(|i| !i.auto) {
                        let _ = writeln!(out, "{};", t.index_sql(ix));
                    }
                }
            }
            ".check" => match self.db.integrity_check() {
                Ok(p) if p.is_empty() => {
                    let _ = writeln!(out, "ok");
                }
                Ok(p) => {
                    for x in p {
                        eprintln!("{x}");
                    }
                    return Some(false);
                }
                Err(e) => {
                    eprintln!("error {}: {e}", e.code());
                    return Some(false);
                }
            },
            ".mode" => {
                self.mode = match arg {
                    Some("table") => Mode::Table,
                    Some("csv") => Mode::Csv,
                    Some("json") => Mode::Json,
                    _ => {
                        eprintln!("usage: .mode table|csv|json");
                        return Some(false);
                    }
                };
            }
            ".read" => {
                // The rest of the line is the path (it may hold spaces), optionally quoted.
                let path = match rest.as_bytes() {
                    [q @ (b'\'' | b'"'), .., last] if last == q && rest.len() >= 2 => {
                        &rest[1..rest.len() - 1]
                    }
                    _ => rest,
                };
                if path.is_empty() {
                    eprintln!("usage: .read FILE");
                    return Some(false);
                }
                if self.reading >= MAX_READ_DEPTH {
                    eprintln!(
                        "cannot read {path}: .read files nest more than {MAX_READ_DEPTH} deep"
                    );
                    return Some(false);
                }
                match std::fs::read_to_string(path) {
                    Ok(text) => {
                        self.reading += 1;
                        let ok = self.run_lines(text.lines().map(str::to_string), out, false);
                        self.reading -= 1;
                        return Some(ok);
                    }
                    Err(e) => {
                        eprintln!("cannot read {path}: {e}");
                        return Some(false);
                    }
                }
            }
            other => {
                eprintln!("unknown command {other}; try .help");
                return Some(false);
            }
        }
        Some(true)
    }

    /// Feeds lines to the shell. Non-interactively, stops at the first failure and returns
    /// false; interactively, reports and goes on.
    fn run_lines(
        &mut self,
        lines: impl Iterator<Item = String>,
        out: &mut dyn Write,
        prompt: bool,
    ) -> bool {
        let mut buf = String::new();
        let mut ok = true;
        let show = |out: &mut dyn Write, cont: bool| {
            if prompt {
                let _ = write!(out, "{}", if cont { "   ...> " } else { "cairn> " });
                let _ = out.flush();
            }
        };
        show(out, false);
        for line in lines {
            if buf.is_empty() && line.trim_start().starts_with('.') {
                match self.dot(line.trim(), out) {
                    None => return ok,
                    Some(true) => {}
                    Some(false) => {
                        ok = false;
                        if !self.interactive {
                            return false;
                        }
                    }
                }
                show(out, false);
                continue;
            }
            buf.push_str(&line);
            buf.push('\n');
            if complete(&buf) {
                let sql = std::mem::take(&mut buf);
                if !self.sql(&sql, out) {
                    ok = false;
                    if !self.interactive {
                        return false;
                    }
                }
            }
            show(out, !buf.trim().is_empty());
        }
        if !buf.trim().is_empty() && !self.sql(&buf, out) {
            ok = false;
        }
        ok
    }
}

fn open_file(path: &str) -> cairn_sql::Result<Database> {
    let file = StdFile::open(path, true)?;
    Database::open(Box::new(Paged::open(file, Options::default())?))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: cairn [FILE]   (SQL from the prompt or stdin; .help for commands)");
        return;
    }
    let db = match args.first() {
        None => Database::memory(),
        Some(file) => match open_file(file) {
            Ok(db) => db,
            Err(e) => {
                eprintln!("cairn: cannot open {file}: {e} ({})", e.code());
                std::process::exit(2);
            }
        },
    };
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    let mut shell = Shell {
        db,
        mode: Mode::Table,
        interactive,
        reading: 0,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let lines = stdin.lock().lines().map_while(|l| l.ok());
    let ok = shell.run_lines(lines, &mut out, interactive);
    let _ = out.flush();
    if !ok && !interactive {
        std::process::exit(1);
    }
}
