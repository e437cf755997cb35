//! No input panics: the saved fuzz corpus replayed, a token-soup generator run against the
//! fuzz schema (`CAIRN_FUZZ_CASES=N` for more), and pathological nesting.

use cairn_sql::fuzzing::{match_bytes, parse_bytes, statements_bytes};
use cairn_sql::Database;

#[test]
fn replay_fuzz_corpus() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut n = 0;
    for (dir, f) in [
        ("parse", parse_bytes as fn(&[u8])),
        ("statements", statements_bytes),
        ("match_query", match_bytes),
    ] {
        let entries = std::fs::read_dir(root.join(dir)).expect("each fuzz target has a corpus");
        let mut here = 0;
        for e in entries {
            let data = std::fs::read(e.expect("entry").path()).expect("read");
            f(&data);
            here += 1;
        }
        assert!(here >= 10, "the {dir} corpus replayed only {here} inputs");
        n += here;
    }
    assert!(n >= 30, "corpus replayed {n} inputs");
}

const VOCAB: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "IS",
    "IN",
    "LIKE",
    "GLOB",
    "BETWEEN",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "AS",
    "INTEGER",
    "TEXT",
    "JOIN",
    "LEFT",
    "ON",
    "GROUP",
    "BY",
    "HAVING",
    "ORDER",
    "DESC",
    "LIMIT",
    "OFFSET",
    "UNION",
    "ALL",
    "DISTINCT",
    "EXISTS",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "RETURNING",
    "CONFLICT",
    "DO",
    "NOTHING",
    "REPLACE",
    "IGNORE",
    "CREATE",
    "TABLE",
    "INDEX",
    "UNIQUE",
    "DROP",
    "ALTER",
    "ADD",
    "COLUMN",
    "RENAME",
    "TO",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "WITH",
    "EXPLAIN",
    "PRIMARY",
    "KEY",
    "DEFAULT",
    "CHECK",
    "excluded",
    "t",
    "u",
    "w",
    "a",
    "b",
    "c",
    "d",
    "id",
    "k",
    "n",
    "x",
    "y",
    "t.a",
    "u.k",
    "count",
    "sum",
    "max",
    "min",
    "abs",
    "substr",
    "coalesce",
    "typeof",
    "round",
    "group_concat",
    "OVER",
    "PARTITION",
    "ROWS",
    "RANGE",
    "GROUPS",
    "UNBOUNDED",
    "PRECEDING",
    "FOLLOWING",
    "CURRENT",
    "ROW",
    "EXCLUDE",
    "TIES",
    "FILTER",
    "WINDOW",
    "row_number",
    "rank",
    "lag",
    "ntile",
    "nth_value",
    // JSON, dates, foreign keys, savepoints and generated columns.
    "json_extract",
    "json_set",
    "json_each",
    "json_tree",
    "json_group_array",
    "->",
    "->>",
    "'$.a'",
    "'$[#-1]'",
    "'{bad'",
    "date",
    "strftime",
    "julianday",
    "'now'",
    "'+1 days'",
    "'start of month'",
    "'weekday 3'",
    "'2024-02-30'",
    "REFERENCES",
    "FOREIGN",
    "CASCADE",
    "RESTRICT",
    "DEFERRABLE",
    "PRAGMA",
    "foreign_keys",
    "SAVEPOINT",
    "RELEASE",
    "GENERATED",
    "ALWAYS",
    "STORED",
    "VIRTUAL",
    "(",
    ")",
    "(",
    ")",
    ",",
    ";",
    "*",
    "+",
    "-",
    "/",
    "%",
    "||",
    "=",
    "<>",
    "<",
    ">=",
    "&",
    "<<",
    "~",
    "?",
    "?2",
    ":p",
    "0",
    "1",
    "-1",
    "2.5",
    "1e308",
    "9223372036854775807",
    "'x'",
    "'%'",
    "''",
    "X'00'",
    "X'FF'",
    ".",
];

#[test]
fn token_soup_never_panics() {
    let cases: usize = std::env::var("CAIRN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let mut state = 0x1234_5678_9ABC_DEF1u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..cases {
        // Start from a valid-looking prefix half of the time, so the planner and executor get
        // reached, not just the parser.
        let prefixes = [
            "SELECT ",
            "SELECT * FROM t WHERE ",
            "INSERT INTO t (a, b) VALUES (",
            "UPDATE t SET a = ",
            "DELETE FROM t WHERE ",
            "",
        ];
        let mut sql = prefixes[(next() % prefixes.len() as u64) as usize].to_string();
        let len = 1 + next() % 14;
        for _ in 0..len {
            sql.push_str(VOCAB[(next() % VOCAB.len() as u64) as usize]);
            sql.push(' ');
        }
        parse_bytes(sql.as_bytes());
        statements_bytes(sql.as_bytes());
    }
}

#[test]
fn pathological_nesting_is_an_error_not_a_crash() {
    // Debug builds use several times the stack of release builds (where the limits are sized
    // for a 1 MiB wasm stack), so this runs on a thread with room to spare.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(nesting)
        .expect("thread")
        .join()
        .expect("no panic");
}

fn nesting() {
    let mut db = Database::memory();
    for sql in [
        format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000)),
        format!("SELECT 1{}", " + 1".repeat(20000)),
        format!("SELECT {}1", "-".repeat(5000)),
        format!("SELECT {}1", "NOT ".repeat(5000)),
        format!("SELECT 1 WHERE {}", "1 AND ".repeat(5000) + "1"),
        format!("SELECT {}1{}", "(SELECT ".repeat(1000), ")".repeat(1000)),
        format!("SELECT CASE {} END", "WHEN 1 THEN 2 ".repeat(5000)),
    ] {
        let e = db.execute(&sql, &[]);
        if let Err(e) = e {
            assert_eq!(e.code(), "SYNTAX", "{e}");
        }
    }
    // Long operator chains are legal and work.
    let ors = format!(
        "SELECT 1 WHERE {}",
        (0..5000)
            .map(|i| format!("{i} = 5"))
            .collect::<Vec<_>>()
            .join(" OR ")
    );
    assert_eq!(db.execute(&ors, &[]).unwrap().rows().len(), 1);
    let sum = format!("SELECT {}", vec!["1"; 200].join(" + "));
    assert_eq!(
        db.execute(&sum, &[]).unwrap().rows()[0][0],
        cairn_sql::Value::Integer(200)
    );
    let long_in = format!(
        "SELECT 1 IN ({})",
        (0..20000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    assert!(db.execute(&long_in, &[]).is_ok());
}

/// Full-text queries made of random pieces of the query language never panic (the
/// `match_query` fuzz target's property, on stable).
#[test]
fn match_query_soup_never_panics() {
    const PIECES: &[&str] = &[
        "fox",
        "hello",
        "\"",
        "\"quick brown\"",
        "*",
        "(",
        ")",
        "AND",
        "OR",
        "NOT",
        "NEAR(",
        ",",
        "2",
        ":",
        "title",
        "body",
        "{",
        "}",
        "-",
        "+",
        "^",
        "~1",
        "~2",
        " ",
        "crème",
        "nosuch",
        "\"\"",
        "é",
        "0",
    ];
    let cases: usize = std::env::var("CAIRN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut x = 0x2545F4914F6CDD1Du64;
    for _ in 0..cases {
        let mut q = String::new();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for k in 0..(x % 9) {
            q.push_str(PIECES[((x >> (k * 5)) % PIECES.len() as u64) as usize]);
            if (x >> (k + 40)) & 1 == 1 {
                q.push(' ');
            }
        }
        cairn_sql::fuzzing::match_bytes(q.as_bytes());
    }
}
