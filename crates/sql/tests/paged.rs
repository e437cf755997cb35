//! The SQL engine over the real paged store: results survive a reopen, statement atomicity
//! inside a transaction holds, and a failed commit leaves the last commit and a usable database.

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

fn open<F: BlockFile + 'static>(file: F) -> Database {
    Database::open(Box::new(
        Paged::open(file, Options::default()).expect("open store"),
    ))
    .expect("open database")
}

#[test]
fn tables_and_indexes_survive_reopen() {
    let file = FaultFile::new();
    let mut db = open(file.clone());
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n INTEGER);
         CREATE INDEX t_n ON t (n);
         INSERT INTO t (name, n) VALUES ('a', 3), ('b', 1), ('c', 2);",
    )
    .unwrap();
    drop(db);
    // Only what was flushed: a crash right now would leave exactly this.
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(
        rows(&mut db, "SELECT name FROM t WHERE n >= 2 ORDER BY n"),
        vec![vec![Value::Text("c".into())], vec![Value::Text("a".into())]]
    );
    assert_eq!(
        rows(&mut db, "SELECT count(*) FROM t"),
        vec![vec![Value::Integer(3)]]
    );
}

#[test]
fn a_failed_statement_in_a_transaction_undoes_only_itself() {
    let mut db = open(MemoryFile::new());
    db.exec_script(
        "CREATE TABLE u (id INTEGER PRIMARY KEY, email TEXT UNIQUE);
         BEGIN;
         INSERT INTO u (email) VALUES ('a'), ('b');",
    )
    .unwrap();
    // The second row of this insert conflicts: the first must not stay behind.
    let err = db
        .execute("INSERT INTO u (email) VALUES ('c'), ('a')", &[])
        .unwrap_err();
    assert_eq!(err.code(), "CONSTRAINT_UNIQUE");
    db.exec_script("CREATE TABLE gone (x INTEGER); DROP TABLE gone; INSERT INTO u (email) VALUES ('d'); COMMIT;")
        .unwrap();
    assert_eq!(
        rows(&mut db, "SELECT email FROM u ORDER BY email"),
        vec![
            vec![Value::Text("a".into())],
            vec![Value::Text("b".into())],
            vec![Value::Text("d".into())]
        ]
    );
    assert!(db.execute("SELECT * FROM gone", &[]).is_err());
}

/// A statement that fails after writing many rows (values of the same size, rewritten in
/// place, and of other sizes; index entries; deletes) leaves every one as it was: the undo
/// log gives each back.
#[test]
fn a_statement_failing_after_many_writes_undoes_them_all() {
    let mut db = open(MemoryFile::new());
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT NOT NULL);
         CREATE INDEX t_n ON t (n);",
    )
    .unwrap();
    db.execute("BEGIN", &[]).unwrap();
    for i in 1..=600i64 {
        db.execute(
            "INSERT INTO t VALUES (?, ?, ?)",
            &[
                Value::Integer(i),
                Value::Integer(i % 7),
                Value::Text(format!("row {i}")),
            ],
        )
        .unwrap();
    }
    let before = rows(&mut db, "SELECT * FROM t ORDER BY id");
    for sql in [
        "UPDATE t SET n = n + 1, s = CASE WHEN id = 590 THEN NULL ELSE s END",
        "UPDATE t SET s = CASE WHEN id = 590 THEN NULL ELSE s || ' longer' END",
        "UPDATE t SET n = CASE WHEN id = 590 THEN 'x' ELSE n * 2 END",
        "UPDATE t SET s = CASE WHEN id = 590 THEN NULL ELSE s || s END WHERE id IN (3, 4, 590)",
    ] {
        assert!(db.execute(sql, &[]).is_err(), "{sql}");
        assert_eq!(
            rows(&mut db, "SELECT * FROM t ORDER BY id"),
            before,
            "{sql}"
        );
    }
    db.execute("DELETE FROM t WHERE id > 500", &[]).unwrap();
    db.execute("COMMIT", &[]).unwrap();
    assert_eq!(
        rows(&mut db, "SELECT count(*) FROM t"),
        vec![vec![Value::Integer(500)]]
    );
    assert_eq!(
        rows(&mut db, "SELECT count(*) FROM t WHERE n = 3"),
        rows(&mut db, "SELECT count(*) FROM t WHERE n + 0 = 3")
    );
    assert!(db.check().unwrap().is_empty());
}

#[test]
fn rollback_restores_the_last_commit() {
    let mut db = open(MemoryFile::new());
    db.exec_script("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    db.exec_script(
        "BEGIN; INSERT INTO t VALUES (2); UPDATE t SET x = 10 WHERE x = 1; DROP TABLE t; ROLLBACK;",
    )
    .unwrap();
    assert_eq!(
        rows(&mut db, "SELECT x FROM t"),
        vec![vec![Value::Integer(1)]]
    );
}

#[test]
fn a_failed_commit_keeps_the_last_commit_and_the_database_usable() {
    let file = FaultFile::new();
    let mut db = open(file.clone());
    db.exec_script("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    // The next write call fails once, as a full disk would.
    file.fail_at(file.ops(), false);
    let err = db.execute("INSERT INTO t VALUES (2)", &[]).unwrap_err();
    assert_eq!(err.code(), "IO", "{err}");
    assert_eq!(
        rows(&mut db, "SELECT x FROM t"),
        vec![vec![Value::Integer(1)]]
    );
    db.execute("INSERT INTO t VALUES (3)", &[]).unwrap();
    assert_eq!(
        rows(&mut db, "SELECT x FROM t ORDER BY x"),
        vec![vec![Value::Integer(1)], vec![Value::Integer(3)]]
    );
    drop(db);
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(
        rows(&mut db, "SELECT x FROM t ORDER BY x"),
        vec![vec![Value::Integer(1)], vec![Value::Integer(3)]]
    );
}

#[test]
fn paged_store_passes_the_storage_conformance_suite() {
    cairn_sql::conformance::run(&|| {
        Box::new(Paged::open(MemoryFile::new(), Options::default()).expect("open store"))
    });
}

/// An in-memory database writes its pages and superblock only when handed back: its export
/// must open and pass the integrity check, with every row, and the database goes on after it.
#[test]
fn an_in_memory_database_exports_a_sound_file() {
    let mut db = open(MemoryFile::new());
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, b INTEGER, c TEXT);
         CREATE INDEX t_b ON t (b);",
    )
    .unwrap();
    for i in 0..600 {
        db.execute(
            "INSERT INTO t (b, c) VALUES (?, ?)",
            &[
                Value::Integer(i % 97),
                Value::Text(format!("row {i:04} {}", "x".repeat(40))),
            ],
        )
        .unwrap();
    }
    db.exec_script("DELETE FROM t WHERE id % 3 = 0; UPDATE t SET b = b + 1 WHERE id % 5 = 0;")
        .unwrap();
    let want = rows(&mut db, "SELECT id, b, c FROM t ORDER BY id");
    let sums = rows(
        &mut db,
        "SELECT sum(b), count(*) FROM t WHERE b BETWEEN 10 AND 50",
    );
    for round in 0..2 {
        let bytes = db.export().unwrap();
        let mut copy = open(MemoryFile::from_bytes(bytes));
        assert_eq!(copy.integrity_check().unwrap(), Vec::<String>::new());
        assert_eq!(rows(&mut copy, "SELECT id, b, c FROM t ORDER BY id"), want);
        assert_eq!(
            rows(
                &mut copy,
                "SELECT sum(b), count(*) FROM t WHERE b BETWEEN 10 AND 50"
            ),
            sums
        );
        if round == 0 {
            // The exporting database is still in use, and exports again what it has now.
            db.execute("INSERT INTO t (b, c) VALUES (1, 'after')", &[])
                .unwrap();
            db.execute("DELETE FROM t WHERE c = 'after'", &[]).unwrap();
        }
    }
}

/// `INSERT INTO t SELECT * FROM s` into an empty table copies the stored rows; with more rows
/// than one gathering block holds (64 KiB), and some longer than a page, every row arrives.
#[test]
fn insert_select_copies_more_rows_than_one_gathering_block() {
    let mut db = open(MemoryFile::new());
    db.exec_script(
        "CREATE TABLE s (id INTEGER PRIMARY KEY, c TEXT, n INTEGER);
         CREATE TABLE t (id INTEGER PRIMARY KEY, c TEXT, n INTEGER);",
    )
    .unwrap();
    db.exec_script("BEGIN").unwrap();
    for i in 0..3000i64 {
        let len = if i % 97 == 0 {
            5000
        } else {
            40 + (i % 13) as usize
        };
        db.execute(
            "INSERT INTO s VALUES (?, ?, ?)",
            &[
                Value::Integer(i * 3),
                Value::Text("x".repeat(len)),
                Value::Integer(i),
            ],
        )
        .unwrap();
    }
    db.exec_script("COMMIT").unwrap();
    db.exec_script("INSERT INTO t SELECT * FROM s").unwrap();
    let sums = "SELECT count(*), sum(id), sum(length(c)), sum(n), max(id) FROM ";
    let want = rows(&mut db, &format!("{sums} s"));
    assert_eq!(want[0][0], Value::Integer(3000));
    assert_eq!(rows(&mut db, &format!("{sums} t")), want);
    assert_eq!(
        rows(&mut db, "SELECT * FROM t ORDER BY id"),
        rows(&mut db, "SELECT * FROM s ORDER BY id")
    );
    // The next row id follows the last one copied.
    db.exec_script("INSERT INTO t (c, n) VALUES ('next', 0)")
        .unwrap();
    assert_eq!(
        rows(&mut db, "SELECT id FROM t WHERE c = 'next'"),
        vec![vec![Value::Integer(8998)]]
    );
}

/// Point reads and index probes one after another, over tables of different widths, some
/// finding nothing, some inside a subquery of another: each execution's first level starts
/// from buffers the one before used (`executor::Pool`), and must see only its own key.
#[test]
fn point_reads_and_index_probes_one_after_another_see_only_their_own_keys() {
    let mut db = open(MemoryFile::new());
    db.exec_script(
        "CREATE TABLE a (id INTEGER PRIMARY KEY, x INTEGER, c TEXT);
         CREATE INDEX a_x ON a (x);
         CREATE TABLE b (k TEXT PRIMARY KEY, y INTEGER);
         CREATE INDEX b_y ON b (y);",
    )
    .unwrap();
    db.exec_script("BEGIN").unwrap();
    for i in 0..300i64 {
        db.execute(
            "INSERT INTO a VALUES (?, ?, ?)",
            &[
                Value::Integer(i),
                Value::Integer(i % 50),
                Value::Text("long text ".repeat((i % 7) as usize)),
            ],
        )
        .unwrap();
        db.execute(
            "INSERT INTO b VALUES (?, ?)",
            &[Value::Text(format!("key {i}")), Value::Integer(i * 2)],
        )
        .unwrap();
    }
    db.exec_script("COMMIT").unwrap();
    let one = |db: &mut Database, sql: &str, p: Value| -> Vec<Vec<Value>> {
        match db.execute(sql, &[p]).unwrap() {
            Output::Rows { rows, .. } => rows,
            other => panic!("{sql}: {other:?}"),
        }
    };
    for i in 0..320i64 {
        let a = one(
            &mut db,
            "SELECT id, x, length(c) FROM a WHERE id = ?",
            Value::Integer(i),
        );
        let want_a = if i < 300 {
            vec![vec![
                Value::Integer(i),
                Value::Integer(i % 50),
                Value::Integer(10 * (i % 7)),
            ]]
        } else {
            vec![]
        };
        assert_eq!(a, want_a, "a {i}");
        let b = one(
            &mut db,
            "SELECT k FROM b WHERE y = ?",
            Value::Integer(i * 2),
        );
        let want_b = if i < 300 {
            vec![vec![Value::Text(format!("key {i}"))]]
        } else {
            vec![]
        };
        assert_eq!(b, want_b, "b {i}");
        let n = one(
            &mut db,
            "SELECT count(*) FROM a WHERE x = ?",
            Value::Integer(i % 60),
        );
        assert_eq!(
            n,
            vec![vec![Value::Integer(if i % 60 < 50 { 6 } else { 0 })]]
        );
        let s = one(
            &mut db,
            "SELECT (SELECT y FROM b WHERE k = 'key ' || a.id), (SELECT count(*) FROM a AS a2 WHERE a2.x = a.x) FROM a WHERE id = ?",
            Value::Integer(i),
        );
        let want_s = if i < 300 {
            vec![vec![Value::Integer(i * 2), Value::Integer(6)]]
        } else {
            vec![]
        };
        assert_eq!(s, want_s, "subqueries {i}");
    }
}

/// A commit that fails on a file that keeps failing, so that the store cannot be opened again
/// after it either, leaves a database whose every later statement fails with `NEEDS_REOPEN`
/// (not a panic); opened anew once the file heals, it holds the last commit.
#[test]
fn a_store_that_cannot_be_opened_again_refuses_every_statement() {
    let file = FaultFile::new();
    let mut db = open(file.clone());
    db.exec_script(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT); INSERT INTO t (x) VALUES ('kept');",
    )
    .unwrap();
    file.fail_at(file.ops(), true);
    assert!(db
        .execute("INSERT INTO t (x) VALUES ('lost')", &[])
        .is_err());
    for sql in [
        "SELECT count(*) FROM t",
        "INSERT INTO t (x) VALUES ('y')",
        "BEGIN",
    ] {
        let e = db.execute(sql, &[]).unwrap_err();
        assert_eq!(e.code(), "NEEDS_REOPEN", "{sql}: {e}");
    }
    file.heal();
    let e = db.execute("SELECT count(*) FROM t", &[]).unwrap_err();
    assert_eq!(e.code(), "NEEDS_REOPEN", "the handle stays closed: {e}");
    drop(db);
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(
        rows(&mut db, "SELECT x FROM t"),
        vec![vec![Value::Text("kept".into())]]
    );
}

/// A commit that fails at any one call of its file, its final flush included, is not visible
/// afterwards: the store opened again after it reads the last commit that succeeded, though the
/// failed one's superblock may have reached the file, and the next commit takes its place. What
/// the file keeps (as after a crash then) is one commit or the other, whole.
#[test]
fn a_commit_that_fails_anywhere_is_not_seen_after_it() {
    let setup = |file: &FaultFile| {
        let mut db = open(file.clone());
        db.exec_script(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT); INSERT INTO t (x) VALUES ('kept');",
        )
        .unwrap();
        db
    };
    let twin = FaultFile::new();
    let mut db = setup(&twin);
    let before = twin.ops();
    db.execute("INSERT INTO t (x) VALUES ('new')", &[]).unwrap();
    let calls = twin.ops() - before;
    assert!(calls >= 2, "a commit writes and flushes ({calls} calls)");
    let xs = |db: &mut Database| -> Vec<Vec<Value>> { rows(db, "SELECT x FROM t ORDER BY id") };
    let kept = vec![vec![Value::Text("kept".into())]];
    for k in 0..calls {
        let file = FaultFile::new();
        let mut db = setup(&file);
        file.fail_at(file.ops() + k, false);
        let r = db.execute("INSERT INTO t (x) VALUES ('new')", &[]);
        file.heal();
        assert!(r.is_err(), "call {k} of {calls} failed the commit");
        assert_eq!(
            xs(&mut db),
            kept,
            "after a failure at call {k}, in the same handle"
        );
        db.execute("INSERT INTO t (x) VALUES ('next')", &[])
            .unwrap();
        let after = vec![kept[0].clone(), vec![Value::Text("next".into())]];
        assert_eq!(
            xs(&mut db),
            after,
            "the next commit, after a failure at call {k}"
        );
        assert!(db.check().unwrap().is_empty());
        drop(db);
        let mut again = open(MemoryFile::from_bytes(file.durable_bytes()));
        assert_eq!(
            xs(&mut again),
            after,
            "opened again, after a failure at call {k}"
        );
    }
}

/// `PRAGMA user_version` is kept in the file (docs/file-format.md): what was committed reads
/// back after a reopen, a rolled-back change does not, and a file that never had one (as every
/// file written before it was kept) reads 0.
#[test]
fn user_version_survives_reopen() {
    let version = |db: &mut Database| rows(db, "PRAGMA user_version");
    let file = FaultFile::new();
    let mut db = open(file.clone());
    db.exec_script("CREATE TABLE t (a INTEGER)").unwrap();
    assert_eq!(version(&mut db), vec![vec![Value::Integer(0)]]);
    drop(db);
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(version(&mut db), vec![vec![Value::Integer(0)]]);
    drop(db);

    let mut db = open(file.clone());
    db.exec_script("PRAGMA user_version = 42; BEGIN; PRAGMA user_version = 7; ROLLBACK;")
        .unwrap();
    assert_eq!(version(&mut db), vec![vec![Value::Integer(42)]]);
    drop(db);
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(version(&mut db), vec![vec![Value::Integer(42)]]);
    db.execute("PRAGMA user_version = -9", &[]).unwrap();
    let bytes = db.export().unwrap();
    let mut db = open(MemoryFile::from_bytes(bytes));
    assert_eq!(version(&mut db), vec![vec![Value::Integer(-9)]]);
    assert_eq!(
        rows(&mut db, "SELECT count(*) FROM t"),
        vec![vec![Value::Integer(0)]]
    );
}

/// A table after RENAME COLUMN and DROP COLUMN reads the same after a reopen: its key, its
/// indexes and its CHECKs (a column's own, dropped with it) come back from its definition.
#[test]
fn altered_columns_survive_reopen() {
    let file = FaultFile::new();
    let mut db = open(file.clone());
    db.exec_script(
        "CREATE TABLE t (note TEXT, k TEXT, n INTEGER CHECK (n > 0), w INTEGER CHECK (w < 10),
                         v TEXT UNIQUE, PRIMARY KEY (k, n));
         CREATE INDEX t_w ON t (w);
         INSERT INTO t VALUES ('a', 'x', 1, 1, 'p'), ('b', 'x', 2, 2, 'q'), ('c', 'y', 1, 3, 'r');
         ALTER TABLE t DROP COLUMN note;
         ALTER TABLE t RENAME COLUMN n TO num;
         ALTER TABLE t RENAME COLUMN w TO weight;",
    )
    .unwrap();
    let listing = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name";
    let before = rows(&mut db, listing);
    drop(db);
    let mut db = open(MemoryFile::from_bytes(file.durable_bytes()));
    assert_eq!(rows(&mut db, listing), before);
    assert!(db.integrity_check().unwrap().is_empty());
    assert_eq!(
        rows(&mut db, "SELECT v FROM t WHERE k = 'x' AND num = 2"),
        vec![vec![Value::Text("q".into())]]
    );
    assert_eq!(
        rows(&mut db, "SELECT k, num FROM t WHERE weight = 3"),
        vec![vec![Value::Text("y".into()), Value::Integer(1)]]
    );
    for (sql, code) in [
        ("INSERT INTO t VALUES ('z', 0, 1, 's')", "CONSTRAINT_CHECK"),
        ("INSERT INTO t VALUES ('z', 1, 10, 's')", "CONSTRAINT_CHECK"),
        ("INSERT INTO t VALUES ('z', 1, 1, 'p')", "CONSTRAINT_UNIQUE"),
        (
            "INSERT INTO t VALUES ('x', 1, 1, 's')",
            "CONSTRAINT_PRIMARY_KEY",
        ),
    ] {
        assert_eq!(db.execute(sql, &[]).unwrap_err().code(), code, "{sql}");
    }
    // The weight column's own CHECK goes with it; the column's index must go first.
    assert!(db.execute("ALTER TABLE t DROP COLUMN weight", &[]).is_err());
    db.exec_script(
        "DROP INDEX t_w; ALTER TABLE t DROP COLUMN weight; INSERT INTO t VALUES ('z', 1, 's')",
    )
    .unwrap();
    let bytes = db.export().unwrap();
    let mut db = open(MemoryFile::from_bytes(bytes));
    assert!(db.integrity_check().unwrap().is_empty());
    assert_eq!(
        rows(&mut db, "SELECT * FROM t ORDER BY k, num"),
        [("x", 1, "p"), ("x", 2, "q"), ("y", 1, "r"), ("z", 1, "s")]
            .iter()
            .map(|(k, n, v)| vec![
                Value::Text(k.to_string()),
                Value::Integer(*n),
                Value::Text(v.to_string())
            ])
            .collect::<Vec<_>>()
    );
}

/// A commit that writes full-text indexes (an external content table's and an own one's:
/// inserts, updates, deletes), cut by a crash at each call of its file in turn, leaves either
/// the commit before it or itself, whole: `check()` finds each index agreeing with its content,
/// every word finds exactly the rows that hold it, and no row of the cut commit is found
/// unless all of it is there.
#[test]
fn a_crash_while_writing_an_fts_index_leaves_it_agreeing_with_its_content() {
    use cairn_store::fault::CrashMode;
    const WORDS: [&str; 6] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    let body = |i: usize| format!("{} {} r{i}", WORDS[i % 6], WORDS[(i * 7 + 1) % 6]);
    let setup = |file: &FaultFile| {
        let mut db = open(file.clone());
        db.exec_script(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
             CREATE VIRTUAL TABLE nf USING fts5(body, content='notes', content_rowid='id');
             CREATE VIRTUAL TABLE own USING fts5(body);",
        )
        .unwrap();
        let mut s = String::from("BEGIN;");
        for i in 0..40 {
            s.push_str(&format!(
                "INSERT INTO notes VALUES ({i}, '{b}'); INSERT INTO own(rowid, body) VALUES ({i}, '{b}');",
                b = body(i)
            ));
        }
        s.push_str("COMMIT;");
        db.exec_script(&s).unwrap();
        db
    };
    // The cut commit: 160 new rows (pages split), updates and deletes of old ones.
    let mut commit = String::from("BEGIN;");
    for i in 40..200 {
        commit.push_str(&format!(
            "INSERT INTO notes VALUES ({i}, '{b}'); INSERT INTO own(rowid, body) VALUES ({i}, '{b}');",
            b = body(i + 3)
        ));
    }
    commit.push_str(
        "UPDATE notes SET body = 'golf ' || body WHERE id % 5 = 0;
         UPDATE own SET body = 'golf ' || body WHERE rowid % 5 = 0;
         DELETE FROM notes WHERE id % 7 = 1; DELETE FROM own WHERE rowid % 7 = 1; COMMIT;",
    );
    let ids = |db: &mut Database, sql: &str| -> Vec<i64> {
        rows(db, sql)
            .iter()
            .map(|r| match r[0] {
                Value::Integer(i) => i,
                _ => panic!("{sql}: an id"),
            })
            .collect()
    };
    let content = |db: &mut Database| ids(db, "SELECT id FROM notes ORDER BY id");
    let twin = FaultFile::new();
    let mut db = setup(&twin);
    let old = content(&mut db);
    let before = twin.ops();
    db.exec_script(&commit).unwrap();
    let calls = twin.ops() - before;
    let new = content(&mut db);
    // Its pages (in one call when they lie in one run), its superblock, a flush.
    assert!(
        calls >= 3,
        "the commit writes pages and flushes ({calls} calls)"
    );
    // Every word (and "golf", only in the cut commit) finds the rows whose text holds it,
    // in both indexes; the content is one commit or the other.
    let agrees = |db: &mut Database, what: &str| {
        assert!(db.check().unwrap().is_empty(), "check(), {what}");
        let now = content(db);
        assert!(now == old || now == new, "{what}: a commit in part");
        for w in WORDS.iter().chain(&["golf"]) {
            let holds = ids(
                db,
                &format!(
                    "SELECT id FROM notes WHERE (' ' || body || ' ') LIKE '% {w} %' ORDER BY id"
                ),
            );
            let nf = ids(
                db,
                &format!("SELECT rowid FROM nf WHERE nf MATCH '{w}' ORDER BY rowid"),
            );
            let own = ids(
                db,
                &format!("SELECT rowid FROM own WHERE own MATCH '{w}' ORDER BY rowid"),
            );
            assert_eq!(nf, holds, "{what}: nf MATCH '{w}'");
            assert_eq!(own, holds, "{what}: own MATCH '{w}'");
        }
        now == new
    };
    assert!(agrees(&mut db, "after the commit"));
    // Past the first few calls every cut is alike but for where it falls: a stride keeps the
    // test short while still cutting inside the page writes and at each flush.
    let stride = (calls / 40).max(1);
    let mut cuts: Vec<u64> = (0..calls).step_by(stride as usize).collect();
    cuts.extend([calls - 2, calls - 1]);
    let mut saw_new = false;
    for k in cuts {
        let file = FaultFile::new();
        let mut db = setup(&file);
        file.fail_at(file.ops() + k, true);
        assert!(
            db.exec_script(&commit).is_err(),
            "call {k} of {calls} cut the commit"
        );
        drop(db);
        for mode in [
            CrashMode::DropUnflushed,
            CrashMode::KeepUnflushed,
            CrashMode::TearLast,
        ] {
            let mut again = open(MemoryFile::from_bytes(file.crash_image(mode)));
            saw_new |= agrees(
                &mut again,
                &format!("a crash at call {k} of {calls}, {mode:?}"),
            );
        }
    }
    // The last cut falls on the superblock's flush after its write: with the write kept,
    // the commit is there.
    assert!(saw_new, "no crash image held the cut commit");
}
