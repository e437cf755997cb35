use cairn_sql::{Database, Output, Value};

fn q(db: &mut Database, sql: &str) -> Vec<Vec<Value>> {
    match db.execute(sql, &[]) {
        Ok(o) => o.rows().to_vec(),
        Err(e) => panic!("{sql}: {e}"),
    }
}

#[test]
fn basics() {
    let mut db = Database::memory();
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, tag TEXT UNIQUE);
         CREATE INDEX t_score ON t (score);
         INSERT INTO t (name, score, tag) VALUES ('a', 1.5, 'x'), ('b', 2.5, 'y'), ('c', NULL, NULL);",
    )
    .unwrap();
    assert_eq!(
        q(&mut db, "SELECT count(*) FROM t"),
        vec![vec![Value::Integer(3)]]
    );
    assert_eq!(
        q(&mut db, "SELECT name FROM t WHERE score > 2 ORDER BY name"),
        vec![vec![Value::Text("b".into())]]
    );
    assert_eq!(
        q(&mut db, "SELECT id FROM t WHERE id = 2"),
        vec![vec![Value::Integer(2)]]
    );
    let e = db
        .execute("INSERT INTO t (name, tag) VALUES ('d', 'x')", &[])
        .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_UNIQUE");
    let o = db
        .execute(
            "UPDATE t SET score = score + 1 WHERE name = 'a' RETURNING score",
            &[],
        )
        .unwrap();
    assert_eq!(o.rows(), &[vec![Value::Real(2.5)]]);
    let o = db
        .execute("DELETE FROM t WHERE score IS NULL", &[])
        .unwrap();
    assert!(matches!(o, Output::Changes { changes: 1, .. }));
    let o = db
        .execute("EXPLAIN SELECT name FROM t WHERE score > 2", &[])
        .unwrap();
    println!("{o:?}");
}
