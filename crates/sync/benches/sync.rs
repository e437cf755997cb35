//! Native benchmarks of cairn-sync: `cargo bench -p cairn-sync --bench sync`.
//! Medians of several rounds; results are saved by hand under `bench-results/`.

use cairn_sync::chain::verify_signatures;
use cairn_sync::merge::{MemoryRows, RowKey, RowStore, Version};
use cairn_sync::{
    Block, Config, Identity, Link, Op, Payload, Replica, ScopeId, TableSchema, Value,
};
use std::time::{Duration, Instant};

const NOW: u64 = 1_700_000_000_000;

fn schema() -> TableSchema {
    TableSchema::new("todo", 1)
        .lww("title")
        .lww("done")
        .lww("priority")
        .lww("owner")
        .counter("n")
}

fn replica(secret: u8, config: Config) -> Replica {
    let mut r = Replica::in_memory(Identity::from_secret([secret; 32]), config);
    r.register_table(schema()).expect("valid schema");
    r
}

/// The to-do record of every local-first demo: a title, a flag, a priority, an owner.
fn todo_op(i: u64) -> Op {
    Op::new(
        "todo",
        vec![Value::Text(format!("0190c7d2-7e4b-7000-8000-{i:012x}"))],
        Payload::Set(vec![
            (0, Value::Text(format!("todo number {i}"))),
            (1, Value::Integer((i % 2) as i64)),
            (2, Value::Integer((i % 5) as i64)),
            (3, Value::Text("alice".into())),
        ]),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn rounds(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    f(); // warm-up
    median((0..n).map(|_| f()).collect())
}

fn per(d: Duration, n: u64) -> String {
    let ns = d.as_nanos() as f64 / n as f64;
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn rate(d: Duration, n: u64) -> String {
    let r = n as f64 / d.as_secs_f64();
    if r >= 1e6 {
        format!("{:.2} M/s", r / 1e6)
    } else {
        format!("{:.0} k/s", r / 1e3)
    }
}

/// A writer with `n` one-op records in one scope, sealed every `per_block` records.
fn writer_with(n: u64, per_block: u64) -> (Replica, ScopeId) {
    let mut w = replica(1, Config::default());
    let scope = ScopeId::new(w.id(), "todo");
    for i in 0..n {
        w.commit(NOW + i / 1000, &scope, vec![todo_op(i)])
            .expect("valid");
        if (i + 1) % per_block == 0 {
            w.seal();
        }
    }
    w.seal();
    (w, scope)
}

/// Replicates everything from `from` to a new empty replica over an in-process link; returns
/// the time and the number of records applied.
fn replicate(from: &mut Replica, config: Config) -> (Duration, Replica) {
    let mut to = replica(2, config);
    let (mut lf, mut lt) = (Link::new(), Link::new());
    let t = Instant::now();
    let mut to_t = vec![from.open_link(&mut lf, NOW)];
    let mut to_f = vec![to.open_link(&mut lt, NOW)];
    while !(to_t.is_empty() && to_f.is_empty()) {
        for m in std::mem::take(&mut to_t) {
            to_f.extend(to.handle(&mut lt, NOW, &m).send);
        }
        for m in std::mem::take(&mut to_f) {
            to_t.extend(from.handle(&mut lf, NOW, &m).send);
        }
    }
    (t.elapsed(), to)
}

fn main() {
    println!("cairn-sync native benchmarks (medians)");
    println!(
        "machine: {} cores available, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::consts::ARCH
    );
    println!();

    // 1. Recording a change: the merge alone (what an unreplicated table would also pay in
    //    this model) against a full commit (record, hash, chain, merge).
    let n = 10_000u64;
    let ops: Vec<Op> = (0..n).map(todo_op).collect();
    let scope = ScopeId::new(cairn_sync::AuthorId([1; 32]), "todo");
    let merge_only = rounds(9, || {
        let mut rows = MemoryRows::default();
        let t = Instant::now();
        for (i, op) in ops.iter().enumerate() {
            let v = Version {
                hlc: i as u64,
                author: scope.owner,
                seq: i as u64,
                idx: 0,
            };
            rows.update(&RowKey::new(&op.table, &scope, &op.pk), &mut |r| {
                r.apply(op, v)
            });
        }
        t.elapsed()
    });
    let commit = rounds(9, || {
        let mut w = replica(1, Config::default());
        let scope = ScopeId::new(w.id(), "todo");
        let ops = ops.clone();
        let t = Instant::now();
        for (i, op) in ops.into_iter().enumerate() {
            w.commit(NOW + i as u64, &scope, vec![op]).expect("valid");
        }
        t.elapsed()
    });
    println!("record a change (1 op, 4 columns), {n} commits:");
    println!(
        "  merge only (no record)      {:>10} / op   {:>10}",
        per(merge_only, n),
        rate(merge_only, n)
    );
    println!(
        "  commit (record+hash+merge)  {:>10} / op   {:>10}   ratio {:.2}x",
        per(commit, n),
        rate(commit, n),
        commit.as_secs_f64() / merge_only.as_secs_f64()
    );

    // 2. Sealing a block of 1,000 records (one signature).
    let seal = rounds(21, || {
        let mut w = replica(1, Config::default());
        let scope = ScopeId::new(w.id(), "todo");
        for i in 0..1000 {
            w.commit(NOW + i, &scope, vec![todo_op(i)]).expect("valid");
        }
        let t = Instant::now();
        w.seal();
        t.elapsed()
    });
    println!("seal a block of 1,000 records  {:>10}", per(seal, 1));

    // 3. Verifying a block of 1,000 changes: decode (recomputes every hash) + signature, and
    //    applying it to an empty replica.
    let (w, scope) = writer_with(1000, 1000);
    let block = w.chain(&(w.id(), scope.clone())).expect("written").blocks[0].clone();
    let bytes = block.to_bytes();
    let decode = rounds(21, || {
        let t = Instant::now();
        let b = Block::from_bytes(&bytes).expect("valid");
        std::hint::black_box(&b);
        t.elapsed()
    });
    let sig = rounds(101, || {
        let t = Instant::now();
        block.check_signature().expect("valid");
        t.elapsed()
    });
    let receive = rounds(11, || {
        let mut r = replica(2, Config::default());
        let b = Block::from_bytes(&bytes).expect("valid");
        let t = Instant::now();
        let ev = r.receive_blocks(NOW, vec![b]);
        let d = t.elapsed();
        assert!(matches!(
            ev[0],
            cairn_sync::Event::Applied { records: 1000, .. }
        ));
        d
    });
    println!("verify a block of 1,000 records ({} bytes):", bytes.len());
    println!(
        "  decode + rehash 1,000 records {:>10}   ({} / record)",
        per(decode, 1),
        per(decode, 1000)
    );
    println!("  one signature check           {:>10}", per(sig, 1));
    println!(
        "  verify + apply (receive)      {:>10}   ({} / record, {})",
        per(receive, 1),
        per(receive, 1000),
        rate(receive + decode, 1000)
    );

    // Batch verification: 64 blocks by 64 authors, one by one and as a batch.
    let blocks: Vec<Block> = (0..64u8)
        .map(|a| {
            let mut w = replica(a.wrapping_add(10), Config::default());
            let scope = ScopeId::new(w.id(), "todo");
            w.commit(NOW, &scope, vec![todo_op(a as u64)])
                .expect("valid");
            w.seal();
            w.chain(&(w.id(), scope)).expect("written").blocks[0].clone()
        })
        .collect();
    let refs: Vec<&Block> = blocks.iter().collect();
    let single = rounds(11, || {
        let t = Instant::now();
        for b in &blocks {
            b.check_signature().expect("valid");
        }
        t.elapsed()
    });
    let batch = rounds(11, || {
        let t = Instant::now();
        assert!(verify_signatures(&refs).iter().all(|r| r.is_ok()));
        t.elapsed()
    });
    println!(
        "64 block signatures: one by one {} / sig, batch {} / sig ({:.2}x)",
        per(single, 64),
        per(batch, 64),
        single.as_secs_f64() / batch.as_secs_f64()
    );

    // 4. Replicating to an empty replica over the protocol (HELLO, BLOCKS pages of 1,000
    //    records, ACKs, bytes encoded and decoded), every block verified.
    println!("replicate to an empty replica (in-process link, bytes both ways):");
    for (n, per_block, rounds_n) in [(1_000u64, 100u64, 11usize), (100_000, 1000, 5)] {
        let (mut w, _) = writer_with(n, per_block);
        let d = rounds(rounds_n, || {
            let (d, to) = replicate(&mut w, Config::default());
            assert_eq!(to.version_vector(), w.version_vector());
            d
        });
        println!(
            "  {n:>7} records, blocks of {per_block:>4}: {:>10}   {:>10} records/s",
            per(d, 1),
            rate(d, n)
        );
        let d = rounds(rounds_n, || {
            let (d, to) = replicate(
                &mut w,
                Config {
                    report_rows: false,
                    ..Config::default()
                },
            );
            assert_eq!(to.version_vector(), w.version_vector());
            d
        });
        println!(
            "  {n:>7} records, no row report:   {:>10}   {:>10} records/s",
            per(d, 1),
            rate(d, n)
        );
    }
}
