//! JSON beyond what the differential corpus (`testscripts/diff/93_json.sql`) compares: the
//! errors' codes and messages, and indexes on expressions over the paged store, through a
//! reopen and the integrity check.

use cairn_sql::Paged;
use cairn_sql::{Database, Output, Value};
use cairn_store::fault::FaultFile;
use cairn_store::{BlockFile, MemoryFile, Options};

fn rows(db: &mut Database, sql: &str) -> Vec<Vec<Value>> {
    match db
        .execute(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    {
        Output::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

#[test]
fn bad_json_and_bad_paths_have_sqlites_messages_and_the_code_json() {
    let mut db = Database::memory();
    let sqlite = rusqlite::Connection::open_in_memory().expect("sqlite");
    for (sql, message) in [
        ("SELECT json('{\"a\":1')", "malformed JSON"),
        ("SELECT '[1' -> 0", "malformed JSON"),
        ("SELECT json_extract('{}', 'a')", "bad JSON path: 'a'"),
        ("SELECT json_extract('{}', '$.')", "bad JSON path: '$.'"),
        ("SELECT json_set('[]', '$[x', 1)", "bad JSON path: '$[x'"),
        (
            "SELECT json_remove('[]', 'it''s')",
            "bad JSON path: 'it''s'",
        ),
        ("SELECT key FROM json_each('[1', '$')", "malformed JSON"),
        ("SELECT json_array(x'ff')", "JSON cannot hold BLOB values"),
        (
            "SELECT json_object('a')",
            "json_object() requires an even number of arguments",
        ),
        (
            "SELECT json_object(1, 2)",
            "json_object() labels must be TEXT",
        ),
        (
            "SELECT json_insert('{}', '$.a')",
            "json_insert() needs an odd number of arguments",
        ),
    ] {
        let err = db.execute(sql, &[]).unwrap_err();
        assert_eq!(err.code(), "JSON", "{sql}");
        assert_eq!(err.to_string(), message, "{sql}");
        let theirs = sqlite
            .query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
            .unwrap_err()
            .to_string();
        assert!(theirs.contains(message), "{sql}: SQLite says {theirs}");
    }
}

#[test]
fn index_expressions_must_be_deterministic() {
    let mut db = Database::memory();
    db.execute("CREATE TABLE t (a TEXT)", &[]).unwrap();
    for sql in [
        "CREATE INDEX i ON t (random())",
        "CREATE INDEX i ON t (a || date('now'))",
        "CREATE INDEX i ON t ((SELECT 1))",
        "CREATE INDEX i ON t (lower(t.a))",
    ] {
        assert_eq!(db.execute(sql, &[]).unwrap_err().code(), "INVALID", "{sql}");
    }
}

#[test]
fn expression_indexes_survive_a_reopen_and_pass_the_integrity_check() {
    fn open<F: BlockFile + 'static>(f: F) -> Database {
        Database::open(Box::new(Paged::open(f, Options::default()).expect("store")))
            .expect("database")
    }
    let file = FaultFile::new();
    let mut db = open(file.clone());
    db.exec_script(
        "CREATE TABLE doc (id INTEGER PRIMARY KEY, body TEXT);
         CREATE INDEX doc_a ON doc (json_extract(body, '$.a'));
         CREATE UNIQUE INDEX doc_k ON doc (body ->> 'k');",
    )
    .unwrap();
    for i in 0..300 {
        db.execute(
            "INSERT INTO doc (body) VALUES (json_object('a', ?1 % 7, 'k', ?1))",
            &[Value::Integer(i)],
        )
        .unwrap();
    }
    db.exec_script(
        "UPDATE doc SET body = json_set(body, '$.a', 100) WHERE id % 5 = 0;
         DELETE FROM doc WHERE json_extract(body, '$.a') = 3;",
    )
    .unwrap();
    let err = db
        .execute("INSERT INTO doc (body) VALUES ('{\"k\":1}')", &[])
        .unwrap_err();
    assert_eq!(
        (err.code(), err.to_string()),
        (
            "CONSTRAINT_UNIQUE",
            "UNIQUE constraint failed: index 'doc_k'".into()
        )
    );
    assert_eq!(db.check().unwrap(), Vec::<String>::new());
    let before = rows(
        &mut db,
        "SELECT count(*), sum(id) FROM doc WHERE body ->> 'a' = 100",
    );
    drop(db);
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(db.check().unwrap(), Vec::<String>::new());
    assert_eq!(
        rows(
            &mut db,
            "SELECT count(*), sum(id) FROM doc WHERE json_extract(body, '$.a') = 100"
        ),
        before
    );
    let plan = rows(
        &mut db,
        "EXPLAIN SELECT id FROM doc WHERE json_extract(body, '$.a') = 100",
    );
    assert_eq!(
        plan[0],
        vec![text(
            "SEARCH doc USING INDEX doc_a (json_extract(body, '$.a')=?)"
        )]
    );
    assert_eq!(
        rows(
            &mut db,
            "SELECT sql FROM sqlite_schema WHERE name = 'doc_k'"
        ),
        vec![vec![text(
            "CREATE UNIQUE INDEX doc_k ON doc ((body ->> 'k'))"
        )]]
    );
    // Renamed, the table keeps its indexes through another reopen.
    let file = FaultFile::new();
    let mut db2 = open(file.clone());
    db2.exec_script(
        "CREATE TABLE doc (id INTEGER PRIMARY KEY, body TEXT);
         CREATE INDEX doc_a ON doc (json_extract(body, '$.a'));
         INSERT INTO doc (body) VALUES ('{\"a\":1}'), ('{\"a\":2}');
         ALTER TABLE doc RENAME TO papers;
         ALTER TABLE papers RENAME COLUMN body TO content;",
    )
    .unwrap();
    drop(db2);
    let mut db2 = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(
        rows(
            &mut db2,
            "SELECT id FROM papers WHERE json_extract(content, '$.a') = 2"
        ),
        vec![vec![Value::Integer(2)]]
    );
    assert_eq!(db2.check().unwrap(), Vec::<String>::new());
}

#[test]
fn a_document_nests_100_deep() {
    let mut db = Database::memory();
    let nest = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
    let sql = "SELECT json_valid(?1), (SELECT count(*) FROM json_tree(?1 -> '$')), \
               length(json_set(?1, '$[0]', json(?1))), json_patch(?1, ?1) = ?1";
    assert_eq!(
        rows_with(&mut db, sql, &[text(&nest(100))]),
        vec![vec![
            Value::Integer(1),
            Value::Integer(101),
            Value::Integer(203),
            Value::Integer(1)
        ]]
    );
    let err = db.execute(sql, &[text(&nest(101))]).unwrap_err();
    assert_eq!(
        (err.code(), err.to_string()),
        ("JSON", "malformed JSON".into())
    );
}

fn rows_with(db: &mut Database, sql: &str, params: &[Value]) -> Vec<Vec<Value>> {
    db.execute(sql, params)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .rows()
        .to_vec()
}

/// Short strings over JSON's alphabet, read by both engines: the same verdict of json_valid
/// (SQLite's RFC 8259 check), and for the valid ones the same json() and json_type().
#[test]
fn random_short_texts_are_read_as_sqlite_reads_them() {
    const ALPHABET: &[u8] = b"{}[],:\"\\ 0123456789.-+eEtrufalsn/u\t";
    let mut db = Database::memory();
    let sqlite = rusqlite::Connection::open_in_memory().expect("sqlite");
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let sql = "SELECT json_valid(?1), CASE WHEN json_valid(?1) THEN json(?1) || json_type(?1) END";
    let mut valid = 0;
    for _ in 0..20_000 {
        let len = 1 + (next() % 10) as usize;
        let mut s: String = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
            .collect();
        // Seed some structure: a quoted string or a number at the start.
        match next() % 4 {
            0 => s = format!("[\"{s}\"]"),
            1 => s = format!("{{\"k\":{s}}}"),
            _ => {}
        }
        let ours = rows_with(&mut db, sql, &[text(&s)]);
        let theirs = sqlite
            .query_row(sql, [&s], |r| {
                Ok(vec![
                    Value::Integer(r.get(0)?),
                    r.get::<_, Option<String>>(1)?
                        .map_or(Value::Null, Value::Text),
                ])
            })
            .expect("sqlite runs it");
        assert_eq!(ours, vec![theirs], "{s:?}");
        valid += usize::from(ours[0][0] == Value::Integer(1));
    }
    assert!(valid > 1000, "only {valid} valid texts");
}
