//! The public API: prepared statements, parameters, outputs, reopening a storage.

use cairn_sql::{Database, Output, Value};

fn rows(o: Output) -> Vec<Vec<Value>> {
    o.rows().to_vec()
}

#[test]
fn prepared_statements_run_many_times_and_replan_after_schema_changes() {
    let mut db = Database::memory();
    db.exec_script("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        .unwrap();
    let ins = db.prepare("INSERT INTO t (v) VALUES (?)").unwrap();
    assert_eq!(ins.param_count(), 1);
    for i in 0..100 {
        let o = ins
            .execute(&mut db, &[Value::Text(format!("v{i}"))])
            .unwrap();
        assert_eq!(
            o,
            Output::Changes {
                changes: 1,
                last_insert_rowid: i + 1
            }
        );
    }
    let get = db.prepare("SELECT v FROM t WHERE id = ?1").unwrap();
    assert_eq!(
        rows(get.execute(&mut db, &[Value::Integer(7)]).unwrap()),
        vec![vec![Value::Text("v6".into())]]
    );
    // Planned once, at prepare: running it again with other values reuses the plan, and so
    // do writes that leave the schema alone.
    for i in 1..=20 {
        get.execute(&mut db, &[Value::Integer(i)]).unwrap();
        ins.execute(&mut db, &[Value::Text(format!("w{i}"))])
            .unwrap();
    }
    assert_eq!((get.times_planned(), ins.times_planned()), (1, 1));
    // A schema change makes the statement re-plan; it still works and sees the new index.
    db.execute("CREATE INDEX t_v ON t (v)", &[]).unwrap();
    let by_v = db.prepare("SELECT id FROM t WHERE v = :v").unwrap();
    assert_eq!(by_v.param_index(":v"), Some(0));
    assert_eq!(
        rows(
            by_v.execute_named(&mut db, &[(":v", Value::Text("v9".into()))])
                .unwrap()
        ),
        vec![vec![Value::Integer(10)]]
    );
    db.execute("ALTER TABLE t ADD COLUMN w INTEGER DEFAULT 5", &[])
        .unwrap();
    assert_eq!(
        rows(get.execute(&mut db, &[Value::Integer(8)]).unwrap()),
        vec![vec![Value::Text("v7".into())]]
    );
    // Planned again on its first run after the schema changed (two changes, one re-plan).
    assert_eq!(get.times_planned(), 2);
    get.execute(&mut db, &[Value::Integer(9)]).unwrap();
    assert_eq!(get.times_planned(), 2);
    db.execute("DROP TABLE t", &[]).unwrap();
    assert_eq!(
        get.execute(&mut db, &[Value::Integer(8)])
            .unwrap_err()
            .code(),
        "UNKNOWN_TABLE"
    );
}

#[test]
fn parameter_errors() {
    let mut db = Database::memory();
    let s = db.prepare("SELECT ?, ?3, :x").unwrap();
    assert_eq!(s.param_count(), 4);
    assert_eq!(
        s.execute(&mut db, &[Value::Null]).unwrap_err().code(),
        "PARAM_COUNT"
    );
    assert_eq!(
        db.execute("SELECT ?", &[]).unwrap_err().code(),
        "PARAM_COUNT"
    );
    assert_eq!(
        s.execute_named(&mut db, &[(":y", Value::Null)])
            .unwrap_err()
            .code(),
        "PARAM_COUNT"
    );
    let n = db.prepare("SELECT :a + :b, :a").unwrap();
    assert_eq!(n.param_count(), 2);
    assert_eq!(
        rows(
            n.execute_named(
                &mut db,
                &[(":a", Value::Integer(2)), (":b", Value::Integer(3))]
            )
            .unwrap()
        ),
        vec![vec![Value::Integer(5), Value::Integer(2)]]
    );
    assert_eq!(
        n.execute_named(&mut db, &[(":a", Value::Integer(2))])
            .unwrap_err()
            .code(),
        "PARAM_COUNT"
    );
    let o = db
        .execute(
            "SELECT $x, @y",
            &[Value::Integer(1), Value::Text("s".into())],
        )
        .unwrap();
    assert_eq!(
        rows(o),
        vec![vec![Value::Integer(1), Value::Text("s".into())]]
    );
}

#[test]
fn a_table_definition_with_parameters_is_refused_as_sqlite_refuses_it() {
    let mut db = Database::memory();
    db.exec_script("CREATE TABLE t(a INTEGER)").unwrap();
    for sql in [
        "CREATE TABLE c(a INTEGER CHECK (a > :x))",
        "CREATE TABLE c(a INTEGER, b INTEGER DEFAULT ?)",
        "ALTER TABLE t ADD COLUMN z INTEGER DEFAULT ?1",
    ] {
        assert_eq!(
            db.prepare(sql).err().map(|e| e.code()),
            Some("INVALID"),
            "{sql}"
        );
        assert_eq!(db.exec_script(sql).unwrap_err().code(), "INVALID", "{sql}");
        // SQLite refuses the same definitions.
        let lite = rusqlite::Connection::open_in_memory().unwrap();
        lite.execute_batch("CREATE TABLE t(a INTEGER)").unwrap();
        assert!(lite.prepare(sql).is_err(), "SQLite takes {sql}");
    }
    // Nothing was made: no table c, no column z; the table still takes rows.
    assert_eq!(
        db.execute("SELECT * FROM c", &[]).unwrap_err().code(),
        "UNKNOWN_TABLE"
    );
    assert_eq!(
        db.execute("SELECT z FROM t", &[]).unwrap_err().code(),
        "UNKNOWN_COLUMN"
    );
    db.execute("INSERT INTO t VALUES (?)", &[Value::Integer(1)])
        .unwrap();
    // The same definitions without parameters are taken.
    db.exec_script("CREATE TABLE c(a INTEGER CHECK (a > 0), b INTEGER DEFAULT 7)")
        .unwrap();
}

#[test]
fn schema_and_rows_survive_reopening_the_storage() {
    let mut db = Database::memory();
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE, n INTEGER DEFAULT 3 CHECK (n > 0));
         CREATE INDEX t_n ON t (n);
         INSERT INTO t (v) VALUES ('a'), ('b');
         CREATE TABLE gone (x INTEGER);
         DROP TABLE gone;
         ALTER TABLE t RENAME TO t2;",
    )
    .unwrap();
    let store = db.into_storage().unwrap();
    let mut db = Database::open(store).unwrap();
    let o = db
        .execute("SELECT id, v, n FROM t2 WHERE n = 3 ORDER BY id", &[])
        .unwrap();
    assert_eq!(o.rows().len(), 2);
    assert_eq!(
        db.execute("INSERT INTO t2 (v) VALUES ('a')", &[])
            .unwrap_err()
            .code(),
        "CONSTRAINT_UNIQUE"
    );
    assert_eq!(
        db.execute("INSERT INTO t2 (v, n) VALUES ('c', 0)", &[])
            .unwrap_err()
            .code(),
        "CONSTRAINT_CHECK"
    );
    assert_eq!(
        db.execute("SELECT * FROM gone", &[]).unwrap_err().code(),
        "UNKNOWN_TABLE"
    );
    let plan = db
        .execute("EXPLAIN SELECT v FROM t2 WHERE n = 3", &[])
        .unwrap();
    assert!(format!("{plan:?}").contains("t_n"), "{plan:?}");
    // New trees do not reuse the ids of the old ones.
    db.execute("CREATE TABLE fresh (x INTEGER)", &[]).unwrap();
    db.execute("INSERT INTO fresh VALUES (1)", &[]).unwrap();
    assert_eq!(
        db.execute("SELECT count(*) FROM t2", &[]).unwrap().rows()[0][0],
        Value::Integer(2)
    );
}

#[test]
fn random_is_injected_and_repeatable() {
    let mut a = Database::memory();
    let mut b = Database::memory();
    a.set_random_seed(42);
    b.set_random_seed(42);
    let ra = a.execute("SELECT random(), random()", &[]).unwrap();
    let rb = b.execute("SELECT random(), random()", &[]).unwrap();
    assert_eq!(ra, rb);
    assert_ne!(ra.rows()[0][0], ra.rows()[0][1]);
}

#[test]
fn failed_statement_in_transaction_has_no_effect_and_the_transaction_goes_on() {
    let mut db = Database::memory();
    db.exec_script("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE); CREATE INDEX t_v2 ON t (v)").unwrap();
    db.execute("BEGIN", &[]).unwrap();
    db.execute("INSERT INTO t (v) VALUES ('a')", &[]).unwrap();
    // The second row fails: the first row of this statement must be undone too, with its
    // index entries.
    let e = db
        .execute("INSERT INTO t (v) VALUES ('b'), ('a')", &[])
        .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_UNIQUE");
    assert!(db.in_transaction());
    assert_eq!(
        db.execute("SELECT v FROM t WHERE v = 'b'", &[])
            .unwrap()
            .rows()
            .len(),
        0
    );
    assert_eq!(
        db.execute("SELECT count(*) FROM t", &[]).unwrap().rows()[0][0],
        Value::Integer(1)
    );
    db.execute("INSERT INTO t (v) VALUES ('b')", &[]).unwrap();
    db.execute("COMMIT", &[]).unwrap();
    assert_eq!(
        db.execute("SELECT count(*) FROM t", &[]).unwrap().rows()[0][0],
        Value::Integer(2)
    );
}

#[test]
fn check_finds_nothing_wrong_after_many_writes() {
    let mut db = Database::memory();
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b TEXT UNIQUE);
         CREATE INDEX t_a ON t (a);
         CREATE TABLE k (x TEXT, y INTEGER, z ANY, PRIMARY KEY (x, y));
         CREATE INDEX k_z ON k (z);",
    )
    .unwrap();
    for i in 0..200 {
        let _ = db.execute(
            &format!(
                "INSERT OR REPLACE INTO t (id, a, b) VALUES ({}, {}, 'b{}')",
                i % 50,
                i % 7,
                i % 30
            ),
            &[],
        );
        let _ = db.execute(
            &format!(
                "INSERT OR IGNORE INTO k VALUES ('x{}', {}, {})",
                i % 9,
                i % 4,
                i % 3
            ),
            &[],
        );
        let _ = db.execute(
            &format!("UPDATE t SET a = a + 1, b = 'c{}' WHERE id = {}", i, i % 13),
            &[],
        );
        let _ = db.execute(
            &format!("UPDATE k SET z = {}.5 WHERE y = {}", i % 5, i % 4),
            &[],
        );
        let _ = db.execute(&format!("DELETE FROM t WHERE a = {}", i % 11), &[]);
    }
    assert_eq!(db.check().unwrap(), Vec::<String>::new());
}

#[test]
fn a_statement_prepared_on_one_database_replans_on_another() {
    let mut a = Database::memory();
    let mut b = Database::memory();
    a.exec_script("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)")
        .unwrap();
    b.exec_script(
        "CREATE TABLE other (y INTEGER); CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (2)",
    )
    .unwrap();
    let s = a.prepare("SELECT x FROM t").unwrap();
    assert_eq!(
        s.execute(&mut b, &[]).unwrap().rows(),
        &[vec![Value::Integer(2)]]
    );
    assert_eq!(
        s.execute(&mut a, &[]).unwrap().rows(),
        &[vec![Value::Integer(1)]]
    );
    // A rolled-back DROP brings the table back, and plans follow.
    a.execute("BEGIN", &[]).unwrap();
    a.execute("DROP TABLE t", &[]).unwrap();
    assert_eq!(s.execute(&mut a, &[]).unwrap_err().code(), "UNKNOWN_TABLE");
    a.execute("ROLLBACK", &[]).unwrap();
    assert_eq!(
        s.execute(&mut a, &[]).unwrap().rows(),
        &[vec![Value::Integer(1)]]
    );
}

#[test]
fn explain_needs_no_parameter_values() {
    let mut db = Database::memory();
    db.exec_script("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX tb ON t (b)")
        .unwrap();
    // As in SQLite: EXPLAIN of a statement with parameters shows the plan with them unbound.
    let plan = rows(
        db.execute("EXPLAIN SELECT * FROM t WHERE b = ? AND a > :lo", &[])
            .unwrap(),
    );
    let text: Vec<String> = plan
        .iter()
        .map(|r| match &r[0] {
            Value::Text(s) => s.clone(),
            v => panic!("plan line {v:?}"),
        })
        .collect();
    assert!(text.iter().any(|l| l.contains("tb")), "{text:?}");
    // Given values, their number must still be right; the statement itself still needs them.
    assert_eq!(
        db.execute(
            "EXPLAIN SELECT * FROM t WHERE a = ?",
            &[Value::Null, Value::Null]
        )
        .unwrap_err()
        .code(),
        "PARAM_COUNT"
    );
    assert_eq!(
        db.execute("SELECT * FROM t WHERE a = ?", &[])
            .unwrap_err()
            .code(),
        "PARAM_COUNT"
    );
}

/// An INSERT ... SELECT of rows already in the target's layout copies records as bytes; its
/// count and last row id are what inserting the rows one by one reports.
#[test]
fn insert_select_copying_records_reports_like_row_by_row() {
    let mut db = Database::memory();
    db.exec_script(
        "CREATE TABLE s (id INTEGER PRIMARY KEY, b INTEGER, c TEXT);
         INSERT INTO s VALUES (3, 1, 'x'), (70, 2, NULL), (12, 3, 'z');
         CREATE TABLE t (id INTEGER PRIMARY KEY, b INTEGER, c TEXT);
         CREATE TABLE u (id INTEGER PRIMARY KEY, b INTEGER, c TEXT);
         INSERT INTO u VALUES (1000, 0, '');",
    )
    .unwrap();
    // t is empty (copied); u is not (row by row): both end on the scan's last row, id 70.
    for table in ["t", "u"] {
        let o = db
            .prepare(&format!("INSERT INTO {table} SELECT * FROM s"))
            .unwrap()
            .execute(&mut db, &[])
            .unwrap();
        assert_eq!(
            o,
            Output::Changes {
                changes: 3,
                last_insert_rowid: 70
            }
        );
    }
    let all = db.prepare("SELECT * FROM t ORDER BY id").unwrap();
    let got = rows(all.execute(&mut db, &[]).unwrap());
    assert_eq!(
        got,
        vec![
            vec![
                Value::Integer(3),
                Value::Integer(1),
                Value::Text("x".into())
            ],
            vec![
                Value::Integer(12),
                Value::Integer(3),
                Value::Text("z".into())
            ],
            vec![Value::Integer(70), Value::Integer(2), Value::Null],
        ]
    );
}

/// The schema's tables are made when a statement is planned: a prepared statement that reads
/// them is planned again after the schema or the user version changes (and after a rollback
/// that undoes such a change), never answering from an older schema.
#[test]
fn prepared_schema_reads_follow_the_schema() {
    let mut db = Database::memory();
    db.exec_script("CREATE TABLE t (a INTEGER)").unwrap();
    let info = db.prepare("SELECT name FROM pragma_table_info(?)").unwrap();
    let version = db.prepare("PRAGMA user_version").unwrap();
    let t = [Value::Text("T".into())];
    let names = |db: &mut Database| rows(info.execute(db, &t).unwrap());
    let text = |s: &str| vec![Value::Text(s.into())];
    assert_eq!(names(&mut db), vec![text("a")]);
    db.execute("ALTER TABLE t ADD COLUMN b TEXT", &[]).unwrap();
    assert_eq!(names(&mut db), vec![text("a"), text("b")]);
    db.exec_script("BEGIN; ALTER TABLE t RENAME COLUMN b TO c;")
        .unwrap();
    assert_eq!(names(&mut db), vec![text("a"), text("c")]);
    db.exec_script("ROLLBACK").unwrap();
    assert_eq!(names(&mut db), vec![text("a"), text("b")]);
    db.execute("ALTER TABLE t DROP COLUMN a", &[]).unwrap();
    assert_eq!(names(&mut db), vec![text("b")]);

    assert_eq!(
        rows(version.execute(&mut db, &[]).unwrap()),
        vec![vec![Value::Integer(0)]]
    );
    db.exec_script("PRAGMA user_version = 12").unwrap();
    assert_eq!(
        rows(version.execute(&mut db, &[]).unwrap()),
        vec![vec![Value::Integer(12)]]
    );
    db.exec_script("BEGIN; PRAGMA user_version = 13;").unwrap();
    assert_eq!(
        rows(version.execute(&mut db, &[]).unwrap()),
        vec![vec![Value::Integer(13)]]
    );
    db.exec_script("ROLLBACK").unwrap();
    assert_eq!(
        rows(version.execute(&mut db, &[]).unwrap()),
        vec![vec![Value::Integer(12)]]
    );
}
