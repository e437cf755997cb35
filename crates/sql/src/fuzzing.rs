//! Entry points shared by the cargo-fuzz targets (`crates/sql/fuzz/`) and by the test that
//! replays their saved corpus, so a crash found by fuzzing stays a regression test.

use crate::{Database, Value};

/// Parses arbitrary bytes as SQL; must never panic.
pub fn parse_bytes(data: &[u8]) {
    if let Ok(sql) = std::str::from_utf8(data) {
        let _ = crate::parse::parse_statements(sql);
    }
}

/// The schema the statement target runs against.
pub const SCHEMA: &str = "
CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER NOT NULL DEFAULT 0, b TEXT UNIQUE, c REAL CHECK (c IS NULL OR c >= 0), d ANY);
CREATE INDEX t_a ON t (a);
CREATE INDEX t_ab ON t (a, b);
CREATE TABLE u (k TEXT PRIMARY KEY, n INTEGER, t_id INTEGER);
CREATE TABLE w (x INTEGER, y INTEGER, PRIMARY KEY (x, y));
INSERT INTO t (a, b, c, d) VALUES (1, 'one', 1.5, 1), (2, 'two', NULL, 'x'), (2, NULL, 0.0, X'00'), (-5, 'neg', 1e10, 2.5);
INSERT INTO u VALUES ('a', 1, 1), ('b', NULL, 2), ('c', 3, 99);
INSERT INTO w VALUES (1, 1), (1, 2), (2, 1);
CREATE TABLE j (id INTEGER PRIMARY KEY, doc TEXT);
CREATE INDEX j_a ON j (doc ->> 'a');
INSERT INTO j VALUES (1, '{\"a\":1,\"b\":[1,2,{\"c\":null}]}'), (2, '[1,{\"a\":\"x\"}]'), (3, '{\"a\":[]}');
CREATE TABLE g (id INTEGER PRIMARY KEY, t_id INTEGER REFERENCES t (id) ON DELETE CASCADE ON UPDATE SET NULL, v TEXT, n INTEGER AS (length(v)), s TEXT GENERATED ALWAYS AS (upper(v) || n) STORED);
CREATE INDEX g_s ON g (s);
INSERT INTO g (t_id, v) VALUES (1, 'ab'), (2, NULL), (NULL, 'x');
PRAGMA foreign_keys = ON;
";

/// Runs arbitrary bytes as statements against [`SCHEMA`], with a few parameters bound when
/// the statement wants them; must never panic, and must leave the database usable.
pub fn statements_bytes(data: &[u8]) {
    let Ok(sql) = std::str::from_utf8(data) else {
        return;
    };
    let mut db = Database::memory();
    db.exec_script(SCHEMA).expect("the fuzz schema is valid");
    if let Ok(stmts) = crate::parse::parse_statements(sql) {
        for (_, text, _) in stmts.into_iter().take(16) {
            if let Ok(stmt) = db.prepare(&text) {
                let params: Vec<Value> = (0..stmt.param_count().min(8))
                    .map(|i| match i % 3 {
                        0 => Value::Integer(i as i64),
                        1 => Value::Text("p".into()),
                        _ => Value::Null,
                    })
                    .collect();
                if params.len() == stmt.param_count() {
                    let _ = stmt.execute(&mut db, &params);
                }
            }
        }
    }
    // Whatever happened, the database still answers.
    let _ = db.execute("ROLLBACK", &[]);
    db.execute("SELECT count(*) FROM t", &[])
        .expect("database usable after fuzz input");
}

/// The fts5 table the MATCH target queries.
pub const FTS_SCHEMA: &str = "
CREATE VIRTUAL TABLE f USING fts5(title, body);
INSERT INTO f(rowid, title, body) VALUES (1, 'Hello World', 'the quick brown fox'),
  (2, 'Crème brûlée', 'a dessert: cream, sugar'), (3, NULL, 'fox fox hello naïve'),
  (4, 'x', ''), (5, 'near far', 'one two three four five six seven');
";

/// Runs arbitrary bytes as a full-text query (MATCH, with every auxiliary function) against
/// [`FTS_SCHEMA`]; must never panic: bad queries are errors.
pub fn match_bytes(data: &[u8]) {
    let Ok(q) = std::str::from_utf8(data) else {
        return;
    };
    let mut db = Database::memory();
    db.exec_script(FTS_SCHEMA)
        .expect("the fts fuzz schema is valid");
    let _ = db.execute(
        "SELECT rowid, rank, bm25(f, 2.0), highlight(f, 1, '[', ']'), \
         snippet(f, -1, '<', '>', '...', 4) FROM f WHERE f MATCH ? ORDER BY rank",
        &[Value::Text(q.into())],
    );
    db.execute("SELECT count(*) FROM f", &[])
        .expect("database usable after fuzz input");
}
