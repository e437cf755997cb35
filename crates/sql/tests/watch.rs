//! What commits changed (`Database::take_changed`) and what a query reads
//! (`Database::tables_read`): what live queries run on.

use cairn_sql::{Changed, Database, TableChange};

fn db() -> Database {
    let mut db = Database::memory();
    db.exec_script(
        "CREATE TABLE a(id INTEGER PRIMARY KEY, n INTEGER UNIQUE, s TEXT);
         CREATE TABLE b(id TEXT PRIMARY KEY, a_id INTEGER);",
    )
    .unwrap();
    db.take_changed();
    db
}

fn change(table: &str, inserted: u64, updated: u64, deleted: u64) -> TableChange {
    TableChange {
        table: table.into(),
        inserted,
        updated,
        deleted,
    }
}

#[test]
fn each_commit_counts_its_rows_by_table() {
    let mut db = db();
    assert_eq!(db.take_changed(), Changed::default());
    db.execute("INSERT INTO a VALUES (1, 10, 'x'), (2, 20, 'y')", &[])
        .unwrap();
    db.execute("UPDATE a SET s = 'z' WHERE id = 99", &[])
        .unwrap();
    let c = db.take_changed();
    assert_eq!(
        (c.tables, c.schema, c.commits),
        (vec![change("a", 2, 0, 0)], false, 1)
    );
    assert!(db.take_changed().is_empty(), "taken once");

    db.exec_script(
        "BEGIN;
         INSERT INTO b VALUES ('p', 1);
         UPDATE a SET s = s || '!';
         DELETE FROM a WHERE id = 2;
         INSERT INTO a VALUES (3, 30, 'w') ON CONFLICT (id) DO UPDATE SET s = 'again';
         INSERT INTO a VALUES (1, 11, 'v') ON CONFLICT (id) DO UPDATE SET s = excluded.s;
         COMMIT;",
    )
    .unwrap();
    let c = db.take_changed();
    assert_eq!(
        (c.tables, c.commits),
        (vec![change("b", 1, 0, 0), change("a", 1, 3, 1)], 1)
    );
}

#[test]
fn what_did_not_commit_changed_nothing() {
    let mut db = db();
    db.exec_script("BEGIN; INSERT INTO a VALUES (1, 10, 'x'); ROLLBACK;")
        .unwrap();
    assert!(db.take_changed().is_empty());
    // A statement that fails inside a transaction takes its rows back; the others commit.
    db.execute("BEGIN", &[]).unwrap();
    db.execute("INSERT INTO a VALUES (1, 10, 'x')", &[])
        .unwrap();
    let e = db
        .execute("INSERT INTO a VALUES (2, 20, 'y'), (3, 10, 'dup')", &[])
        .unwrap_err();
    assert_eq!(e.code(), "CONSTRAINT_UNIQUE");
    assert!(db.take_changed().is_empty(), "nothing before the commit");
    db.execute("COMMIT", &[]).unwrap();
    assert_eq!(db.take_changed().tables, vec![change("a", 1, 0, 0)]);
    // An autocommit statement that fails.
    assert!(db
        .execute("INSERT INTO a VALUES (5, 10, 'dup')", &[])
        .is_err());
    assert!(db.take_changed().is_empty());
}

#[test]
fn schema_changes_are_reported() {
    let mut db = db();
    db.execute("CREATE INDEX a_s ON a(s)", &[]).unwrap();
    let c = db.take_changed();
    assert!(c.schema && c.tables.is_empty() && c.commits == 1, "{c:?}");
    db.exec_script("BEGIN; DROP INDEX a_s; ROLLBACK;").unwrap();
    assert!(db.take_changed().is_empty());
}

#[test]
fn a_query_reads_the_tables_it_names_once_each() {
    let db = db();
    assert_eq!(db.tables_read("SELECT * FROM a").unwrap(), vec!["a"]);
    assert_eq!(
        db.tables_read(
            "WITH c AS (SELECT a_id FROM b) \
             SELECT x.s, (SELECT count(*) FROM b) FROM a AS x JOIN a AS y ON y.id = x.id \
             WHERE x.id IN (SELECT a_id FROM c)"
        )
        .unwrap(),
        vec!["a", "b"]
    );
    assert_eq!(
        db.tables_read("SELECT 1 + 1").unwrap(),
        Vec::<String>::new()
    );
    for bad in ["DELETE FROM a", "SELECT 1; SELECT 2"] {
        assert_eq!(db.tables_read(bad).unwrap_err().code(), "INVALID", "{bad}");
    }
    assert_eq!(
        db.tables_read("SELECT * FROM missing").unwrap_err().code(),
        "UNKNOWN_TABLE"
    );
}

#[test]
fn rows_rolled_back_to_a_savepoint_are_not_counted() {
    let mut db = db();
    db.exec_script(
        "SAVEPOINT a;
         INSERT INTO a VALUES (1, 10, 'x');
         SAVEPOINT b;
         INSERT INTO b VALUES ('p', 1);
         DELETE FROM a;
         ROLLBACK TO b;
         UPDATE a SET s = 'y';
         RELEASE a;",
    )
    .unwrap();
    let c = db.take_changed();
    assert_eq!((c.tables, c.commits), (vec![change("a", 1, 1, 0)], 1));
}
