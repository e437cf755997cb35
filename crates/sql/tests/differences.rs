//! Each deliberate difference from SQLite listed in docs/sql.md, shown on both engines.

use cairn_sql::{Database, Value};

fn sqlite() -> rusqlite::Connection {
    rusqlite::Connection::open_in_memory().expect("sqlite")
}

#[test]
fn column_types_are_strict() {
    let mut db = Database::memory();
    db.execute("CREATE TABLE t (n INTEGER, s VARCHAR(10))", &[])
        .unwrap();
    // Converted as SQLite converts it...
    db.execute("INSERT INTO t VALUES ('12', 3)", &[]).unwrap();
    assert_eq!(
        db.execute("SELECT n, s, typeof(s) FROM t", &[])
            .unwrap()
            .rows(),
        &[vec![
            Value::Integer(12),
            Value::Text("3".into()),
            Value::Text("text".into())
        ]]
    );
    // ...but what does not fit is refused, where plain SQLite stores it.
    assert_eq!(
        db.execute("INSERT INTO t (n) VALUES ('abc')", &[])
            .unwrap_err()
            .code(),
        "TYPE"
    );
    let s = sqlite();
    s.execute("CREATE TABLE t (n INTEGER, s VARCHAR(10))", [])
        .unwrap();
    s.execute("INSERT INTO t (n) VALUES ('abc')", []).unwrap();
    let t: String = s
        .query_row("SELECT typeof(n) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(t, "text");
    // A SQLite STRICT table refuses it too.
    s.execute("CREATE TABLE st (n INTEGER) STRICT", []).unwrap();
    assert!(s.execute("INSERT INTO st VALUES ('abc')", []).is_err());
}

#[test]
fn primary_key_columns_are_not_null() {
    let mut db = Database::memory();
    db.execute("CREATE TABLE t (k TEXT PRIMARY KEY)", &[])
        .unwrap();
    assert_eq!(
        db.execute("INSERT INTO t VALUES (NULL)", &[])
            .unwrap_err()
            .code(),
        "CONSTRAINT_NOT_NULL"
    );
    let s = sqlite();
    s.execute("CREATE TABLE t (k TEXT PRIMARY KEY)", [])
        .unwrap();
    s.execute("INSERT INTO t VALUES (NULL)", []).unwrap();
}

#[test]
fn tables_with_other_keys_are_stored_in_key_order() {
    let mut db = Database::memory();
    let s = sqlite();
    for sql in [
        "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)",
        "INSERT INTO t VALUES ('b', 1), ('a', 2)",
    ] {
        db.execute(sql, &[]).unwrap();
        s.execute(sql, []).unwrap();
    }
    let ours: Vec<Vec<Value>> = db
        .execute("SELECT k FROM t WHERE v > 0", &[])
        .unwrap()
        .rows()
        .to_vec();
    assert_eq!(
        ours,
        vec![vec![Value::Text("a".into())], vec![Value::Text("b".into())]]
    );
    let mut st = s.prepare("SELECT k FROM t WHERE v > 0").unwrap();
    let theirs: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(theirs, vec!["b", "a"]);
}

#[test]
fn all_parameters_must_be_bound() {
    let mut db = Database::memory();
    assert_eq!(
        db.execute("SELECT ?1, ?2", &[Value::Integer(1)])
            .unwrap_err()
            .code(),
        "PARAM_COUNT"
    );
    let s = sqlite();
    let mut st = s.prepare("SELECT ?1, ?2").unwrap();
    st.raw_bind_parameter(1, 1).unwrap();
    let v: Option<i64> = st.raw_query().next().unwrap().unwrap().get(1).unwrap();
    assert_eq!(v, None);
}

#[test]
fn text_with_nul_is_handled_whole() {
    let mut db = Database::memory();
    let o = db
        .execute("SELECT length(CAST(X'610062' AS TEXT))", &[])
        .unwrap();
    assert_eq!(o.rows()[0][0], Value::Integer(3));
    let n: i64 = sqlite()
        .query_row("SELECT length(CAST(X'610062' AS TEXT))", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn reals_as_text_have_an_exact_17th_digit() {
    let mut db = Database::memory();
    let o = db
        .execute("SELECT CAST(1.0 / 3 AS TEXT), CAST(0.1 + 0.2 AS TEXT)", &[])
        .unwrap();
    assert_eq!(
        o.rows()[0],
        vec![
            Value::Text("0.33333333333333331".into()),
            Value::Text("0.30000000000000004".into())
        ]
    );
    let (a, b): (String, String) = sqlite()
        .query_row(
            "SELECT CAST(1.0 / 3 AS TEXT), CAST(0.1 + 0.2 AS TEXT)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("0.33333333333333332", "0.30000000000000004")
    );
}

#[test]
fn nesting_is_bounded() {
    let mut db = Database::memory();
    let deep = format!("SELECT {}1{}", "(".repeat(150), ")".repeat(150));
    assert_eq!(db.execute(&deep, &[]).unwrap_err().code(), "SYNTAX");
    assert!(sqlite()
        .query_row(&deep, [], |r| r.get::<_, i64>(0))
        .is_ok());
}

#[test]
fn window_ties_keep_scan_order() {
    // Rows that tie in a window's ORDER BY are numbered in the order the query reads them:
    // cairn reads a TEXT-keyed table in key order, SQLite in insertion (rowid) order.
    let setup = "CREATE TABLE t (k TEXT PRIMARY KEY, g INTEGER)";
    let fill = "INSERT INTO t VALUES ('b', 1), ('a', 1), ('c', 0)";
    let q = "SELECT k, row_number() OVER (ORDER BY g) FROM t ORDER BY k";
    let mut db = Database::memory();
    db.execute(setup, &[]).unwrap();
    db.execute(fill, &[]).unwrap();
    let row = |k: &str, n: i64| vec![Value::Text(k.into()), Value::Integer(n)];
    assert_eq!(
        db.execute(q, &[]).unwrap().rows(),
        &[row("a", 2), row("b", 3), row("c", 1)]
    );
    let s = sqlite();
    s.execute(setup, []).unwrap();
    s.execute(fill, []).unwrap();
    let mut st = s.prepare(q).unwrap();
    let got: Vec<(String, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got, [("a".into(), 3), ("b".into(), 2), ("c".into(), 1)]);
}

#[test]
fn the_schema_tables_are_cairns_own_text() {
    let create = "CREATE TABLE t (k text primary key, n INT default 3, UNIQUE (n))";
    let mut db = Database::memory();
    db.execute(create, &[]).unwrap();
    let s = sqlite();
    s.execute(create, []).unwrap();
    // SQLite keeps the statement as written; cairn writes the definition its own way.
    let sql = "SELECT sql FROM sqlite_schema WHERE name = 't'";
    let theirs: String = s.query_row(sql, [], |r| r.get(0)).unwrap();
    assert_eq!(theirs, create);
    assert_eq!(
        db.execute(sql, &[]).unwrap().rows(),
        &[vec![Value::Text(
            "CREATE TABLE t (k text NOT NULL, n INT DEFAULT (3), PRIMARY KEY (k), UNIQUE (n))"
                .into()
        )]]
    );
    // The same rows otherwise, rootpage aside.
    let listing = "SELECT type, name, tbl_name, sql IS NULL FROM sqlite_schema ORDER BY name";
    let mut stmt = s.prepare(listing).unwrap();
    let theirs: Vec<Vec<Value>> = stmt
        .query_map([], |r| {
            Ok(vec![
                Value::Text(r.get(0)?),
                Value::Text(r.get(1)?),
                Value::Text(r.get(2)?),
                Value::Integer(r.get(3)?),
            ])
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(db.execute(listing, &[]).unwrap().rows(), theirs.as_slice());
    // Without an argument a pragma function lists every table's rows; SQLite's lists none.
    let all = "SELECT count(*) FROM pragma_table_info";
    let none: i64 = s.query_row(all, [], |r| r.get(0)).unwrap();
    assert_eq!(none, 0);
    assert_eq!(
        db.execute(all, &[]).unwrap().rows(),
        &[vec![Value::Integer(2)]]
    );
}

#[test]
fn foreign_keys_are_not_enforced() {
    let schema = "CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (id INTEGER PRIMARY KEY,
            parent_id INTEGER NOT NULL REFERENCES parent(id) ON DELETE CASCADE,
            FOREIGN KEY (parent_id) REFERENCES parent (id))";
    let orphan = "INSERT INTO child VALUES (1, 99)";
    let mut db = Database::memory();
    db.exec_script(schema).unwrap();
    db.execute(orphan, &[]).unwrap();
    assert_eq!(
        db.execute("SELECT parent_id FROM child", &[])
            .unwrap()
            .rows(),
        &[vec![Value::Integer(99)]]
    );
    // SQLite alike while foreign_keys is off (its default build's default)...
    let s = sqlite();
    s.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    s.execute_batch(schema).unwrap();
    s.execute(orphan, []).unwrap();
    // ...and refuses the row once they are on.
    s.execute_batch("PRAGMA foreign_keys = ON; DELETE FROM child")
        .unwrap();
    assert!(s.execute(orphan, []).is_err());
}

#[test]
fn jsonb_is_not_there() {
    let mut db = Database::memory();
    let err = db.execute("SELECT jsonb('{}')", &[]).unwrap_err();
    assert_eq!(err.code(), "UNKNOWN_FUNCTION");
    assert_eq!(
        db.execute("SELECT jsonb_extract('{}', '$')", &[])
            .unwrap_err()
            .code(),
        "UNKNOWN_FUNCTION"
    );
    let b: Vec<u8> = sqlite()
        .query_row("SELECT jsonb('{}')", [], |r| r.get(0))
        .unwrap();
    assert_eq!(b, vec![0x0c]);
}

#[test]
fn json5_input_is_malformed() {
    let mut db = Database::memory();
    for text in ["{a:1}", "[1,]", "'x'", "0x10", "// c\n1"] {
        let err = db
            .execute("SELECT json(?)", &[Value::Text(text.into())])
            .unwrap_err();
        assert_eq!(
            (err.code(), err.to_string()),
            ("JSON", "malformed JSON".into())
        );
        let fixed: String = sqlite()
            .query_row("SELECT json(?)", [text], |r| r.get(0))
            .unwrap();
        assert!(!fixed.is_empty(), "SQLite reads {text:?} as JSON5");
    }
}

#[test]
fn json_each_ids_number_the_rows() {
    let mut db = Database::memory();
    let sql = "SELECT id, parent FROM json_tree('{\"a\":[1,2]}') ORDER BY id";
    assert_eq!(
        db.execute(sql, &[]).unwrap().rows(),
        &[
            vec![Value::Integer(1), Value::Null],
            vec![Value::Integer(2), Value::Integer(1)],
            vec![Value::Integer(3), Value::Integer(2)],
            vec![Value::Integer(4), Value::Integer(2)],
        ]
    );
    // SQLite's are offsets into its binary form: distinct, and a parent's id is its row's.
    let s = sqlite();
    let mut st = s.prepare(sql).unwrap();
    let ids: Vec<(i64, Option<i64>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(ids[2].1, Some(ids[1].0));
}

#[test]
fn reals_in_json_have_an_exact_17th_digit() {
    let mut db = Database::memory();
    let sql = "SELECT json_array(1/3.0)";
    assert_eq!(
        db.execute(sql, &[]).unwrap().rows(),
        &[vec![Value::Text("[0.33333333333333331]".into())]]
    );
    let theirs: String = sqlite().query_row(sql, [], |r| r.get(0)).unwrap();
    assert_eq!(theirs, "[0.33333333333333332]");
}

#[test]
fn json_nests_at_most_100_deep() {
    let mut db = Database::memory();
    let doc = format!("{}{}", "[".repeat(101), "]".repeat(101));
    let sql = "SELECT json_valid(?)";
    assert_eq!(
        db.execute(sql, &[Value::Text(doc.clone())]).unwrap().rows(),
        &[vec![Value::Integer(0)]]
    );
    let theirs: i64 = sqlite().query_row(sql, [&doc], |r| r.get(0)).unwrap();
    assert_eq!(theirs, 1);
}
