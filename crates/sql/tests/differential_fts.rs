//! Full-text search against SQLite's FTS5 (rusqlite's bundled SQLite has it): the same
//! statements on both, results compared row for row, in order when the query has a
//! top-level ORDER BY (`ORDER BY rank` ties are broken by rowid in the corpus).
//!
//! - `corpus`: every `testscripts/fts/*.sql` file. A statement starting `-- sqlite:` runs on
//!   SQLite only: the triggers that keep an external content index there, which cairn's
//!   writer does itself.
//! - `random_match_queries`: a seeded generator of documents over a small vocabulary (with
//!   accents and case) and of MATCH queries (terms, prefixes, phrases, AND/OR/NOT, NEAR,
//!   column filters, `^`), compared with rank, bm25 with weights and highlight, alone and
//!   inside an OR with other MATCHes and row id comparisons.
//!   `CAIRN_DIFF_CASES=N` runs N queries per seed.
//! - `typo_terms`: cairn's extension (`word~N`), checked against a scan of the vocabulary.

use cairn_sql::{Database, Output, Paged, Value};
use cairn_store::{MemoryFile, Options};

#[derive(Debug)]
enum Res {
    Rows(Vec<String>, Vec<Vec<Value>>),
    Changes,
    Err(String),
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

fn sqlite_run(c: &rusqlite::Connection, sql: &str) -> Res {
    let mut stmt = match c.prepare(sql) {
        Ok(s) => s,
        Err(e) => return Res::Err(e.to_string()),
    };
    let n = stmt.column_count();
    let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
    if n == 0 {
        return match stmt.execute([]) {
            Ok(_) => Res::Changes,
            Err(e) => Res::Err(e.to_string()),
        };
    }
    let mut rows = match stmt.query([]) {
        Ok(r) => r,
        Err(e) => return Res::Err(e.to_string()),
    };
    let mut out = Vec::new();
    loop {
        match rows.next() {
            Ok(Some(r)) => {
                let mut row = Vec::new();
                for i in 0..n {
                    row.push(match r.get_ref(i).expect("value") {
                        rusqlite::types::ValueRef::Null => Value::Null,
                        rusqlite::types::ValueRef::Integer(i) => Value::Integer(i),
                        rusqlite::types::ValueRef::Real(f) => Value::Real(f),
                        rusqlite::types::ValueRef::Text(t) => {
                            Value::Text(String::from_utf8_lossy(t).into_owned())
                        }
                        rusqlite::types::ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                    });
                }
                out.push(row);
            }
            Ok(None) => break,
            Err(e) => return Res::Err(e.to_string()),
        }
    }
    Res::Rows(names, out)
}

fn cairn_run(db: &mut Database, sql: &str) -> Res {
    match db.execute(sql, &[]) {
        Ok(Output::Rows { columns, rows }) => Res::Rows(columns.to_vec(), rows),
        Ok(_) => Res::Changes,
        Err(e) => Res::Err(format!("{e} ({})", e.code())),
    }
}

struct Pair {
    cairn: Database,
    sqlite: rusqlite::Connection,
    checked: usize,
}

impl Pair {
    fn new(paged: bool) -> Pair {
        let cairn = if paged {
            let store = Paged::open(MemoryFile::new(), Options::default()).expect("paged");
            Database::open(Box::new(store)).expect("opens")
        } else {
            Database::memory()
        };
        Pair {
            cairn,
            sqlite: rusqlite::Connection::open_in_memory().expect("sqlite"),
            checked: 0,
        }
    }

    fn check(&mut self, sql: &str) {
        let a = cairn_run(&mut self.cairn, sql);
        let b = sqlite_run(&self.sqlite, sql);
        self.checked += 1;
        let ordered = sql.to_ascii_uppercase().contains("ORDER BY");
        let ok = match (&a, &b) {
            (Res::Err(_), Res::Err(_)) | (Res::Changes, Res::Changes) => true,
            (Res::Rows(m, x), Res::Rows(n, y)) => {
                let (mut x, mut y) = (x.clone(), y.clone());
                if !ordered {
                    x.sort_by_key(|r| format!("{r:?}"));
                    y.sort_by_key(|r| format!("{r:?}"));
                }
                m == n
                    && x.len() == y.len()
                    && x.iter().zip(&y).all(|(r, s)| {
                        r.len() == s.len() && r.iter().zip(s).all(|(p, q)| same(p, q))
                    })
            }
            _ => false,
        };
        assert!(
            ok,
            "difference on\n  {sql}\n  cairn:  {a:?}\n  sqlite: {b:?}"
        );
    }
}

fn statements(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("-- sqlite:") {
            // One whole statement a line.
            out.push((rest.trim().trim_end_matches(';').to_string(), true));
            continue;
        } else if t.starts_with("--") || t.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if t.ends_with(';') {
            out.push((cur.trim().trim_end_matches(';').to_string(), false));
            cur.clear();
        }
    }
    out
}

fn run_corpus(paged: bool) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testscripts/fts");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("corpus dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut total = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let mut pair = Pair::new(paged);
        for (s, only_sqlite) in statements(&text) {
            if only_sqlite {
                if let Res::Err(e) = sqlite_run(&pair.sqlite, &s) {
                    panic!("sqlite refused {s}: {e}");
                }
            } else {
                pair.check(&s);
            }
        }
        total += pair.checked;
    }
    assert!(total > 50, "fts corpus ran {total} statements");
}

#[test]
fn corpus() {
    run_corpus(false);
}

#[test]
fn corpus_on_the_paged_store() {
    run_corpus(true);
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
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len())]
    }
}

const WORDS: &[&str] = &[
    "apple", "apples", "apply", "banana", "band", "bandit", "cherry", "Crème", "creme", "délice",
    "delta", "echo", "Echo", "fox", "foxes", "garden", "grape", "hotel", "ice", "India", "juliet",
    "kilo", "lima", "mike", "naïve", "naive", "oscar", "papa", "quebec", "romeo", "sierra",
    "tango", "the", "a", "of", "x1", "2024",
];

fn doc(rng: &mut Rng, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push_str(match rng.below(6) {
                0 => ", ",
                1 => ". ",
                2 => " - ",
                _ => " ",
            });
        }
        s.push_str(rng.pick(WORDS));
    }
    s
}

fn term(rng: &mut Rng) -> String {
    let w = rng.pick(WORDS);
    match rng.below(8) {
        0 => format!(
            "{}*",
            &w[..w.char_indices().nth(2).map_or(w.len(), |(i, _)| i)]
        ),
        1 => format!("\"{w} {}\"", rng.pick(WORDS)),
        2 => format!("\"{w}\""),
        _ if w.chars().all(|c| c.is_ascii_alphanumeric()) && !matches!(w, "AND" | "OR" | "NOT") => {
            w.to_string()
        }
        _ => format!("\"{w}\""),
    }
}

fn query(rng: &mut Rng, depth: u32) -> String {
    if depth > 2 {
        return term(rng);
    }
    match rng.below(10) {
        0 => format!("{} AND {}", query(rng, depth + 1), query(rng, depth + 1)),
        1 => format!("{} OR {}", query(rng, depth + 1), query(rng, depth + 1)),
        2 => format!("{} NOT {}", term(rng), term(rng)),
        3 => format!(
            "({}) AND {} {}",
            query(rng, depth + 1),
            term(rng),
            term(rng)
        ),
        4 => format!("NEAR({} {}, {})", term(rng), term(rng), rng.below(4)),
        5 => format!("{}: {}", ["title", "body"][rng.below(2)], term(rng)),
        6 => format!("{{title body}}: ({})", query(rng, depth + 1)),
        7 => format!("-title: {}", term(rng)),
        8 => match rng.below(3) {
            0 => format!("^{}", term(rng)),
            1 => format!("{}:^{}", ["title", "body"][rng.below(2)], term(rng)),
            _ => format!("{} ^{}", term(rng), term(rng)),
        },
        _ => term(rng),
    }
}

#[test]
fn random_match_queries() {
    let cases: usize = std::env::var("CAIRN_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    for seed in [0x9e3779b97f4a7c15u64, 7, 1234567] {
        let mut rng = Rng(seed);
        let mut pair = Pair::new(seed == 7);
        pair.check("CREATE VIRTUAL TABLE docs USING fts5(title, body)");
        for i in 0..60 {
            let (nt, nb) = (1 + rng.below(3), 3 + rng.below(25));
            let (t, b) = (doc(&mut rng, nt), doc(&mut rng, nb));
            pair.check(&format!(
                "INSERT INTO docs(rowid, title, body) VALUES ({i}, '{t}', '{b}')"
            ));
        }
        for i in 0..8 {
            let b = doc(&mut rng, 5);
            pair.check(&format!(
                "UPDATE docs SET body = '{b}' WHERE rowid = {}",
                i * 7
            ));
            pair.check(&format!("DELETE FROM docs WHERE rowid = {}", i * 7 + 3));
        }
        for _ in 0..cases {
            let q = query(&mut rng, 0).replace('\'', "''");
            // SQLite's instances of a NEAR group that failed on a row matched through another
            // branch depend on where its iterators stopped; cairn counts none (docs/sql.md):
            // with NEAR, only the rows are compared.
            let kind = if q.contains("NEAR") { 0 } else { rng.below(7) };
            let sql = match kind {
                0 => format!("SELECT rowid, title FROM docs WHERE docs MATCH '{q}'"),
                1 => format!("SELECT rowid, rank FROM docs WHERE docs MATCH '{q}' ORDER BY rank, rowid"),
                2 => format!(
                    "SELECT rowid, bm25(docs, 2.0, 0.5) AS s FROM docs('{q}') ORDER BY s, rowid LIMIT 5"
                ),
                3 => format!(
                    "SELECT rowid, highlight(docs, 1, '[', ']') FROM docs WHERE docs MATCH '{q}'"
                ),
                // MATCH inside OR: a union of the branches' rows, each ranked by its own.
                4 => {
                    let r = query(&mut rng, 1).replace('\'', "''");
                    format!(
                        "SELECT rowid, rank FROM docs WHERE docs MATCH '{q}' OR docs MATCH '{r}'"
                    )
                }
                5 => format!(
                    "SELECT rowid, rank FROM docs WHERE rowid {} {} OR docs MATCH '{q}'",
                    ["=", "<", ">="][rng.below(3)],
                    rng.below(60)
                ),
                _ => format!(
                    "SELECT rowid, bm25(docs) FROM docs WHERE docs MATCH '{q}' OR rowid = {} \
                     ORDER BY rank, rowid LIMIT 8",
                    rng.below(60)
                ),
            };
            pair.check(&sql);
        }
    }
}

#[test]
fn typo_terms() {
    let mut db = Database::memory();
    db.exec_script(
        "CREATE VIRTUAL TABLE t USING fts5(body);
         INSERT INTO t(rowid, body) VALUES (1, 'the search box'), (2, 'a serch box'),
           (3, 'research'), (4, 'sarch and seach'), (5, 'nothing');",
    )
    .expect("setup");
    let rows = |db: &mut Database, q: &str| -> Vec<i64> {
        match db
            .execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank, rowid",
                &[Value::Text(q.into())],
            )
            .expect("query")
        {
            Output::Rows { rows, .. } => rows
                .iter()
                .map(|r| match r[0] {
                    Value::Integer(i) => i,
                    _ => panic!("rowid"),
                })
                .collect(),
            _ => panic!("rows"),
        }
    };
    // The exact match first, then the ones an edit away.
    let mut near = rows(&mut db, "search~1");
    assert_eq!(near.remove(0), 1);
    near.sort();
    assert_eq!(near, [2, 4]);
    let mut far = rows(&mut db, "search~2");
    assert_eq!(far.remove(0), 1);
    far.sort();
    assert_eq!(far, [2, 3, 4]);
    assert_eq!(rows(&mut db, "search"), [1]);
    assert_eq!(rows(&mut db, "serch~1 AND box"), [2, 1]);
}

/// The porter tokenizer stems as SQLite's does: the words of docs/sql.md, a row each, and a
/// query for each word finds the same rows (the words with the same stem).
#[test]
fn porter_stems_like_sqlite() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/sql.md"))
        .expect("docs/sql.md");
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 3)
        .map(str::to_ascii_lowercase)
        .collect();
    words.sort();
    words.dedup();
    assert!(words.len() > 300, "{} words", words.len());
    let mut pair = Pair::new(false);
    pair.check("CREATE VIRTUAL TABLE p USING fts5(w, tokenize='porter unicode61')");
    for (i, w) in words.iter().enumerate() {
        pair.check(&format!("INSERT INTO p(rowid, w) VALUES ({i}, '{w}')"));
    }
    for w in words.iter().step_by(2) {
        pair.check(&format!("SELECT rowid FROM p WHERE p MATCH '\"{w}\"'"));
    }
}
