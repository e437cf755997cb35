//! The shell, run as a process: stdin in, stdout and exit code out.

use std::io::Write;
use std::process::{Command, Stdio};

fn run(args: &[&str], input: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cairn");
    // A shell that exits before reading all its input (refusing the file, say) closes the
    // pipe; that is not the test's failure.
    match child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write: {e}"),
        _ => {}
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn runs_sql_from_stdin_in_each_mode() {
    let script = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL);
INSERT INTO t (name, score) VALUES ('ann', 1.5), ('b,\"o\"b', NULL);
SELECT * FROM t ORDER BY id;
.mode csv
SELECT * FROM t ORDER BY id;
.mode json
SELECT * FROM
  t ORDER BY id;
.tables
.schema
.check
";
    let (code, out, err) = run(&[], script);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "+----+--------+-------+
| id | name   | score |
+----+--------+-------+
|  1 | ann    |   1.5 |
|  2 | b,\"o\"b | NULL  |
+----+--------+-------+
id,name,score
1,ann,1.5
2,\"b,\"\"o\"\"b\",NULL
[
  {\"id\": 1, \"name\": \"ann\", \"score\": 1.5},
  {\"id\": 2, \"name\": \"b,\\\"o\\\"b\", \"score\": null}
]
t
CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL);
ok
"
    );
}

#[test]
fn a_failing_statement_ends_a_script_with_exit_code_1() {
    let (code, out, err) = run(&[], "SELECT 1;\nSELECT * FROM nope;\nSELECT 2;\n");
    assert_eq!(code, 1);
    assert!(out.contains("| 1 |") && !out.contains("| 2 |"), "{out}");
    assert!(err.contains("UNKNOWN_TABLE"), "{err}");
    let (code, _, err) = run(&[], ".mode xml\n");
    assert_eq!(code, 1, "{err}");
}

#[test]
fn read_runs_a_file() {
    let dir = std::env::temp_dir().join(format!("cairn-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("setup.sql");
    std::fs::write(
        &f,
        "CREATE TABLE x (v INTEGER);\nINSERT INTO x VALUES (41);\n",
    )
    .expect("write");
    let (code, out, err) = run(
        &[],
        &format!(
            ".read {}\n.mode csv\nSELECT v + 1 AS w FROM x;\n",
            f.display()
        ),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "w\n42\n");
}

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cairn-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn a_file_database_keeps_what_was_committed_across_runs() {
    let path = temp_path("keep.db");
    let p = path.to_str().expect("utf-8 path");
    let (code, _, err) = run(
        &[p],
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);\nINSERT INTO t (name) VALUES ('kept');\n",
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&[p], ".mode csv\nSELECT id, name FROM t;\n.check\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1,kept"), "{out}");
    assert!(out.contains("ok"), "{out}");
}

#[test]
fn a_file_that_is_not_a_cairn_database_is_refused_with_exit_code_2() {
    let path = temp_path("foreign.db");
    std::fs::write(&path, vec![0x42u8; 10_000]).expect("write");
    let (code, _, err) = run(&[path.to_str().expect("utf-8 path")], "SELECT 1;\n");
    assert_eq!(code, 2);
    assert!(err.contains("NOT_A_DATABASE"), "{err}");
    // Nothing was written over it.
    assert_eq!(std::fs::read(&path).expect("read"), vec![0x42u8; 10_000]);
}

#[test]
fn schema_shows_one_table_and_its_indexes() {
    let (code, out, err) = run(
        &[],
        "CREATE TABLE b (x INTEGER);\nCREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT UNIQUE);\nCREATE INDEX a_v2 ON a (v, id);\n.tables\n.schema a\n",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "a  b\nCREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT, UNIQUE (v));\nCREATE INDEX a_v2 ON a (v, id);\n"
    );
}

#[test]
fn read_failures_end_a_script_with_exit_code_1() {
    let dir = temp_path("read-dir");
    std::fs::create_dir_all(&dir).expect("dir");
    // A failing statement inside the file stops the file and the script.
    let bad = dir.join("bad file.sql");
    std::fs::write(&bad, "SELECT 1;\nSELECT * FROM nope;\nSELECT 2;\n").expect("write");
    let (code, out, err) = run(&[], &format!(".read '{}'\nSELECT 3;\n", bad.display()));
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("| 1 |") && !out.contains("| 2 |") && !out.contains("| 3 |"),
        "{out}"
    );
    assert!(err.contains("UNKNOWN_TABLE"), "{err}");
    // A file that does not exist.
    let (code, _, err) = run(&[], &format!(".read {}\n", dir.join("none.sql").display()));
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
    // A file that reads itself is stopped, not left to overflow the stack.
    let selfish = dir.join("self.sql");
    std::fs::write(
        &selfish,
        format!("SELECT 7 AS n;\n.read {}\n", selfish.display()),
    )
    .expect("write");
    let (code, out, err) = run(&[], &format!(".read {}\n", selfish.display()));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nest more than"), "{err}");
    // The script opens it once and each copy once more, until 16 are open.
    assert_eq!(out.matches("| 7 |").count(), 16, "{out}");
}
