use cairn_sql::paged::Paged;
use cairn_sql::{Database, Value};
use cairn_store::{BlockFile, MemoryFile, Options};
fn main() {
    let store = Paged::open(Box::new(MemoryFile::new()) as Box<dyn BlockFile>, Options::default()).unwrap();
    let mut db = Database::open(Box::new(store)).unwrap();
    db.exec_script("CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT); INSERT INTO kv VALUES (1, 'one'), (2, 'two');").unwrap();
    for (sql, p) in [("SELECT 1", vec![]), ("SELECT v FROM kv WHERE k = ?", vec![Value::Integer(1)])] {
        let stmt = db.prepare(sql).unwrap();
        let n: u32 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
        let t = std::time::Instant::now();
        for _ in 0..n { stmt.execute(&mut db, &p).unwrap(); }
        println!("{sql}: {:.2} us", t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
}
