//! Arrival order does not matter: the same ops joined in any order, or split between replicas
//! and joined as snapshots, give the same rows; the same blocks delivered to fresh replicas in
//! shuffled orders (gaps retried) give the same rows.

mod common;

use cairn_sync::merge::{MemoryRows, RowKey, RowState, RowStore, Version};
use cairn_sync::{Block, Config, Op, Payload, Replica, ScopeId, Value};
use common::{identity, schemas, seed_count, text, Rng};

fn random_op(rng: &mut Rng) -> Op {
    let key = vec![text(format!("k{}", rng.below(4)))];
    let elem = Value::Integer(rng.below(3) as i64);
    let field = format!("f{}", rng.below(3));
    match rng.below(15) {
        10 | 11 => Op::new("todo", key, Payload::SetAdd(4, elem)),
        12 => {
            // What a removal observed: some authors' chains up to some seq, in author order.
            let mut seen = Vec::new();
            for a in 0..3u8 {
                if rng.chance(50) {
                    seen.push((cairn_sync::AuthorId([a; 32]), rng.below(40)));
                }
            }
            Op::new("todo", key, Payload::SetRemove(4, elem, seen))
        }
        13 => Op::new("todo", key, Payload::MapSet(5, field, elem)),
        14 => Op::new("todo", key, Payload::MapRemove(5, field)),
        0..=4 => {
            let mut cols = vec![(rng.below(3) as u32, Value::Integer(rng.below(5) as i64))];
            if rng.chance(40) {
                cols.push((rng.below(3) as u32, text(format!("v{}", rng.below(5)))));
            }
            Op::new("todo", key, Payload::Set(cols))
        }
        5..=6 => Op::new("todo", key, Payload::Add(3, rng.below(11) as i64 - 5)),
        7..=8 => Op::new("todo", key, Payload::Delete),
        _ => Op::new("todo", key, Payload::Purge),
    }
}

fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn digest(rows: &MemoryRows) -> Vec<(RowKey, RowState)> {
    let mut out = Vec::new();
    rows.scan(&mut |k, r| {
        if *r != RowState::default() {
            out.push((k.clone(), r.clone()));
        }
    });
    out
}

#[test]
fn merge_is_independent_of_order_and_grouping() {
    let scope = ScopeId::new(cairn_sync::AuthorId([7; 32]), "s");
    for seed in 0..seed_count(300) {
        let mut rng = Rng(seed);
        let n = 1 + rng.below(40) as usize;
        let ops: Vec<(Op, Version)> = (0..n)
            .map(|i| {
                let v = Version {
                    hlc: rng.below(12), // many equal clocks: the tie-breaks matter
                    author: cairn_sync::AuthorId([rng.below(3) as u8; 32]),
                    seq: i as u64,
                    idx: rng.below(2) as u32,
                };
                (random_op(&mut rng), v)
            })
            .collect();
        let apply = |ops: &[(Op, Version)]| {
            let mut rows = MemoryRows::default();
            for (op, v) in ops {
                rows.update(&RowKey::new(&op.table, &scope, &op.pk), &mut |r| {
                    r.apply(op, *v)
                });
            }
            rows
        };
        let reference = digest(&apply(&ops));
        for _ in 0..4 {
            let mut shuffled = ops.clone();
            shuffle(&mut rng, &mut shuffled);
            assert_eq!(digest(&apply(&shuffled)), reference, "seed {seed}: order");
            // Split between two replicas, then join one into the other (a snapshot).
            let cut = rng.below(n as u64 + 1) as usize;
            let (mut left, right) = (apply(&shuffled[..cut]), apply(&shuffled[cut..]));
            for (k, r) in right.iter() {
                left.update(k, &mut |mine| mine.join(r));
            }
            assert_eq!(digest(&left), reference, "seed {seed}: join");
        }
    }
}

#[test]
fn replicas_receiving_blocks_in_any_order_agree() {
    for seed in 0..seed_count(3) {
        let mut rng = Rng(seed + 1000);
        let mut writers: Vec<Replica> = (0..3)
            .map(|_| {
                let mut r = Replica::in_memory(identity(&mut rng), Config::default());
                for s in schemas() {
                    r.register_table(s).expect("invariant: valid schema");
                }
                r
            })
            .collect();
        let ids: Vec<_> = writers.iter().map(|w| w.id()).collect();
        let list = writers[0].sign_writers(b"todo", 1, ids.clone());
        for w in &mut writers[1..] {
            w.add_writer_list(list.clone())
                .expect("invariant: owner-signed");
        }
        let scope = ScopeId::new(ids[0], "todo");
        let mut blocks: Vec<Block> = Vec::new();
        let mut now = 1_700_000_000_000u64;
        for _ in 0..12 {
            let w = rng.below(3) as usize;
            now += rng.below(3);
            let ops = (0..1 + rng.below(3)).map(|_| random_op(&mut rng)).collect();
            writers[w]
                .commit(now, &scope, ops)
                .expect("invariant: valid");
            if rng.chance(60) {
                writers[w].seal();
            }
        }
        for w in &mut writers {
            w.seal();
            for (_, log) in w.chains() {
                blocks.extend(log.blocks.iter().cloned());
            }
        }
        let mut digests = Vec::new();
        for _ in 0..3 {
            let mut r = Replica::in_memory(identity(&mut rng), Config::default());
            for s in schemas() {
                r.register_table(s).expect("invariant: valid schema");
            }
            r.add_writer_list(list.clone())
                .expect("invariant: owner-signed");
            let mut pending = blocks.clone();
            shuffle(&mut rng, &mut pending);
            // Deliver one at a time; what does not fit yet (a gap) is retried later.
            for _ in 0..blocks.len() {
                let mut retry = Vec::new();
                for b in pending {
                    let events = r.receive_blocks(now, vec![b.clone()]);
                    if events.iter().any(|e| {
                        matches!(
                            e,
                            cairn_sync::Event::Rejected {
                                reason: cairn_sync::Reason::ChainGap,
                                ..
                            }
                        )
                    }) {
                        retry.push(b);
                    }
                }
                pending = retry;
            }
            assert!(pending.is_empty());
            assert!(r.verify().is_empty());
            digests.push(r.state_digest());
        }
        let writer_digests: Vec<_> = {
            // Writers exchange everything too and must agree with the receivers.
            let all = blocks.clone();
            writers
                .iter_mut()
                .map(|w| {
                    let mut pending = all.clone();
                    for _ in 0..all.len() {
                        let mut retry = Vec::new();
                        for b in pending {
                            let ev = w.receive_blocks(now, vec![b.clone()]);
                            if ev.iter().any(|e| {
                                matches!(
                                    e,
                                    cairn_sync::Event::Rejected {
                                        reason: cairn_sync::Reason::ChainGap,
                                        ..
                                    }
                                )
                            }) {
                                retry.push(b);
                            }
                        }
                        pending = retry;
                    }
                    w.state_digest()
                })
                .collect()
        };
        assert!(digests.iter().all(|d| *d == digests[0]), "seed {seed}");
        assert!(
            writer_digests.iter().all(|d| *d == digests[0]),
            "seed {seed}: writers"
        );
    }
}
