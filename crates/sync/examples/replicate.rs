//! Replicates N records (default 100,000) to an empty replica, for profiling:
//! `cargo run --release -p cairn-sync --example replicate -- 100000`.

use cairn_sync::{Config, Identity, Link, Op, Payload, Replica, ScopeId, TableSchema, Value};
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let schema = TableSchema::new("todo", 1)
        .lww("title")
        .lww("done")
        .lww("priority")
        .lww("owner");
    let mut a = Replica::in_memory(Identity::from_secret([1; 32]), Config::default());
    let mut b = Replica::in_memory(Identity::from_secret([2; 32]), Config::default());
    a.register_table(schema.clone()).expect("valid");
    b.register_table(schema).expect("valid");
    let scope = ScopeId::new(a.id(), "todo");
    for i in 0..n {
        let op = Op::new(
            "todo",
            vec![Value::Text(format!("0190c7d2-7e4b-7000-8000-{i:012x}"))],
            Payload::Set(vec![
                (0, Value::Text(format!("todo number {i}"))),
                (1, Value::Integer((i % 2) as i64)),
                (2, Value::Integer((i % 5) as i64)),
                (3, Value::Text("alice".into())),
            ]),
        );
        a.commit(1_700_000_000_000, &scope, vec![op])
            .expect("valid");
        if i % 1000 == 999 {
            a.seal();
        }
    }
    a.seal();
    let (mut la, mut lb) = (Link::new(), Link::new());
    let t = Instant::now();
    let mut to_b = vec![a.open_link(&mut la, 1_700_000_000_000)];
    let mut to_a = vec![b.open_link(&mut lb, 1_700_000_000_000)];
    while !(to_a.is_empty() && to_b.is_empty()) {
        for m in std::mem::take(&mut to_b) {
            to_a.extend(b.handle(&mut lb, 1_700_000_000_000, &m).send);
        }
        for m in std::mem::take(&mut to_a) {
            to_b.extend(a.handle(&mut la, 1_700_000_000_000, &m).send);
        }
    }
    let d = t.elapsed();
    assert_eq!(a.state_digest(), b.state_digest());
    println!(
        "{n} records in {d:?}: {:.0} records/s",
        n as f64 / d.as_secs_f64()
    );
}
