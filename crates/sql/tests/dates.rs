//! Where cairn's date functions deliberately differ from SQLite's (docs/sql.md): local time is
//! UTC. The rest is checked against SQLite by `testscripts/diff/91_dates.sql`.

use cairn_sql::{Database, Output, Value};

fn one(db: &mut Database, sql: &str) -> Vec<Value> {
    match db.execute(sql, &[]).unwrap() {
        Output::Rows { mut rows, .. } => rows.remove(0),
        o => panic!("{o:?}"),
    }
}

#[test]
fn local_time_is_utc() {
    let mut db = Database::memory();
    let text = |s: &str| Value::Text(s.into());
    assert_eq!(
        one(
            &mut db,
            "SELECT datetime('2024-05-15 10:00', 'localtime'), datetime('2024-05-15 10:00', 'utc'), \
             datetime('2024-05-15 10:00+02:00', 'localtime')"
        ),
        vec![
            text("2024-05-15 10:00:00"),
            text("2024-05-15 10:00:00"),
            text("2024-05-15 08:00:00")
        ]
    );
}

#[test]
fn now_is_one_moment_per_statement() {
    let mut db = Database::memory();
    let row = one(
        &mut db,
        "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f'), \
         unixepoch('now', 'subsec') * 1000 = unixepoch('subsec') * 1000",
    );
    assert_eq!(row[0], row[1]);
    assert_eq!(row[2], Value::Integer(1));
}
