//! Foreign keys with `PRAGMA foreign_keys = ON`: what SQLite does, and that a failure leaves
//! nothing half-done (the cascades of a failed statement are undone with it).

use cairn_sql::{Database, Output, Value};

fn rows(db: &mut Database, sql: &str) -> Vec<Vec<Value>> {
    match db
        .execute(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    {
        Output::Rows { rows, .. } => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn ints(db: &mut Database, sql: &str) -> Vec<i64> {
    rows(db, sql)
        .into_iter()
        .map(|r| match r[0] {
            Value::Integer(i) => i,
            Value::Null => -1,
            ref v => panic!("{sql}: {v:?}"),
        })
        .collect()
}

fn code(db: &mut Database, sql: &str) -> &'static str {
    db.execute(sql, &[]).err().map_or("OK", |e| e.code())
}

fn setup() -> Database {
    let mut db = Database::memory();
    db.exec_script(
        "PRAGMA foreign_keys = ON;
         CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE c (id INTEGER PRIMARY KEY, pid INT REFERENCES p(id) ON DELETE CASCADE ON UPDATE CASCADE);
         CREATE TABLE g (id INTEGER PRIMARY KEY, cid INT REFERENCES c ON DELETE RESTRICT);
         INSERT INTO p VALUES (1, 'a'), (2, 'b'), (3, 'c');
         INSERT INTO c VALUES (10, 1), (11, 1), (12, 2), (13, NULL);",
    )
    .expect("setup");
    db
}

#[test]
fn off_by_default_and_read_by_the_pragma() {
    let mut db = Database::memory();
    assert_eq!(ints(&mut db, "PRAGMA foreign_keys"), vec![0]);
    db.exec_script("CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (x INT REFERENCES p);")
        .expect("schema");
    assert_eq!(code(&mut db, "INSERT INTO c VALUES (5)"), "OK");
    db.execute("PRAGMA foreign_keys = ON", &[]).expect("on");
    assert_eq!(ints(&mut db, "PRAGMA foreign_keys"), vec![1]);
    assert_eq!(
        code(&mut db, "INSERT INTO c VALUES (6)"),
        "CONSTRAINT_FOREIGN_KEY"
    );
    let e = db.execute("INSERT INTO c VALUES (6)", &[]).unwrap_err();
    assert_eq!(e.to_string(), "FOREIGN KEY constraint failed");
    assert_eq!(ints(&mut db, "SELECT x FROM c"), vec![5]);
    assert_eq!(
        rows(&mut db, "PRAGMA foreign_key_check"),
        vec![vec![
            Value::Text("c".into()),
            Value::Null,
            Value::Text("p".into()),
            Value::Integer(0)
        ]]
    );
}

#[test]
fn cascades_and_restrict() {
    let mut db = setup();
    db.execute("UPDATE p SET id = 5 WHERE id = 1", &[])
        .expect("update");
    assert_eq!(
        ints(&mut db, "SELECT pid FROM c ORDER BY id"),
        vec![5, 5, 2, -1]
    );
    db.execute("DELETE FROM p WHERE id = 5", &[])
        .expect("delete");
    assert_eq!(ints(&mut db, "SELECT id FROM c ORDER BY id"), vec![12, 13]);
    // A grandchild holds c 12: deleting p 2 would cascade into a RESTRICT, so nothing happens.
    db.execute("INSERT INTO g VALUES (1, 12)", &[])
        .expect("grandchild");
    assert_eq!(
        code(&mut db, "DELETE FROM p WHERE id = 2"),
        "CONSTRAINT_FOREIGN_KEY"
    );
    assert_eq!(ints(&mut db, "SELECT id FROM p ORDER BY id"), vec![2, 3]);
    assert_eq!(ints(&mut db, "SELECT id FROM c ORDER BY id"), vec![12, 13]);
}

#[test]
fn a_failed_cascade_inside_a_transaction_and_a_savepoint_leaves_nothing() {
    let mut db = setup();
    db.exec_script("INSERT INTO g VALUES (1, 12); BEGIN; SAVEPOINT s; DELETE FROM p WHERE id = 1;")
        .expect("first cascade");
    assert_eq!(
        code(&mut db, "DELETE FROM p WHERE id = 2"),
        "CONSTRAINT_FOREIGN_KEY"
    );
    assert_eq!(ints(&mut db, "SELECT id FROM c ORDER BY id"), vec![12, 13]);
    db.exec_script("ROLLBACK TO s; COMMIT;")
        .expect("rollback to");
    assert_eq!(
        ints(&mut db, "SELECT id FROM c ORDER BY id"),
        vec![10, 11, 12, 13]
    );
}

#[test]
fn deferred_keys_are_checked_at_commit() {
    let mut db = Database::memory();
    db.exec_script(
        "PRAGMA foreign_keys = ON;
         CREATE TABLE p (id INTEGER PRIMARY KEY);
         CREATE TABLE c (x INT REFERENCES p DEFERRABLE INITIALLY DEFERRED);",
    )
    .expect("schema");
    assert_eq!(
        code(&mut db, "INSERT INTO c VALUES (1)"),
        "CONSTRAINT_FOREIGN_KEY"
    );
    db.exec_script("BEGIN; INSERT INTO c VALUES (1);")
        .expect("deferred");
    assert_eq!(code(&mut db, "COMMIT"), "CONSTRAINT_FOREIGN_KEY");
    assert!(
        db.in_transaction(),
        "a failed COMMIT leaves the transaction open"
    );
    db.exec_script("INSERT INTO p VALUES (1); COMMIT;")
        .expect("commit");
    assert_eq!(ints(&mut db, "SELECT x FROM c"), vec![1]);
}

#[test]
fn set_null_set_default_and_self_reference() {
    let mut db = Database::memory();
    db.exec_script(
        "PRAGMA foreign_keys = ON;
         CREATE TABLE p (id INTEGER PRIMARY KEY);
         CREATE TABLE c (a INT DEFAULT 0 REFERENCES p ON DELETE SET DEFAULT, b INT REFERENCES p ON DELETE SET NULL);
         CREATE TABLE tree (id INTEGER PRIMARY KEY, up INT REFERENCES tree ON DELETE CASCADE);
         INSERT INTO p VALUES (0), (1), (2);
         INSERT INTO c VALUES (1, 2);
         INSERT INTO tree VALUES (1, 1), (2, 1), (3, 2), (4, NULL);",
    )
    .expect("schema");
    db.execute("DELETE FROM p WHERE id IN (1, 2)", &[])
        .expect("delete");
    assert_eq!(
        rows(&mut db, "SELECT a, b FROM c"),
        vec![vec![Value::Integer(0), Value::Null]]
    );
    assert_eq!(
        code(&mut db, "DELETE FROM p WHERE id = 0"),
        "CONSTRAINT_FOREIGN_KEY"
    );
    db.execute("DELETE FROM tree WHERE id = 2", &[])
        .expect("subtree");
    assert_eq!(ints(&mut db, "SELECT id FROM tree ORDER BY id"), vec![1, 4]);
}

#[test]
fn a_key_that_names_no_unique_parent_columns_is_a_mismatch() {
    let mut db = Database::memory();
    db.exec_script(
        "PRAGMA foreign_keys = ON; CREATE TABLE p (id INT, v INT); CREATE TABLE c (x INT REFERENCES p (v));",
    )
    .expect("schema");
    let e = db.execute("INSERT INTO c VALUES (1)", &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "foreign key mismatch - \"c\" referencing \"p\""
    );
}
