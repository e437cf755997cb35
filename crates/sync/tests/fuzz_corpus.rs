//! Replays the fuzz target's saved corpus (fuzz/corpus/decode) as an ordinary test, plus a
//! deterministic mutation pass over valid messages of every type, so the decoder's no-panic
//! property is checked on every `cargo test`, not only when someone fuzzes.
//!
//! `CAIRN_SYNC_WRITE_CORPUS=1` rewrites the seed files from the messages built here.

mod common;

use cairn_sync::protocol::fuzz_decode;
use cairn_sync::{
    Config, Identity, Link, Message, Op, Payload, Replica, ScopeFilter, ScopeId, Subscription,
    Value,
};
use common::{schemas, text, Rng};
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode")
}

/// One valid message of every type, from a real exchange.
fn seeds() -> Vec<Vec<u8>> {
    let now = 1_700_000_000_000;
    let mut a = Replica::in_memory(Identity::from_secret([1; 32]), Config::default());
    let mut b = Replica::in_memory(
        Identity::from_secret([2; 32]),
        Config {
            snapshot_when_empty: true,
            subscription: Subscription::Filters(vec![ScopeFilter {
                owner: None,
                prefix: b"todo".to_vec(),
            }]),
            ..Config::default()
        },
    );
    // A table of a SET and a MAP column, so blocks and snapshot rows hold their ops and state.
    let bag = cairn_sync::TableSchema::new("bag", 1)
        .set("tags")
        .map("props");
    for r in [&mut a, &mut b] {
        for s in schemas().into_iter().chain([bag.clone()]) {
            r.register_table(s).expect("invariant: valid schema");
        }
    }
    let scope = ScopeId::new(a.id(), "todo");
    a.sign_writers(b"todo", 1, vec![b.id()]);
    a.commit(
        now,
        &scope,
        vec![
            Op::new(
                "todo",
                vec![text("k")],
                Payload::Set(vec![
                    (0, text("t")),
                    (1, Value::Real(0.5)),
                    (2, Value::Blob(vec![1, 2])),
                ]),
            ),
            Op::new("todo", vec![text("k")], Payload::Add(3, -7)),
            Op::new("todo", vec![text("j")], Payload::Delete),
            Op::new("bag", vec![text("b")], Payload::SetAdd(0, text("x"))),
            Op::new(
                "bag",
                vec![text("b")],
                Payload::SetAdd(0, Value::Integer(2)),
            ),
            Op::new(
                "bag",
                vec![text("b")],
                Payload::SetRemove(0, text("x"), vec![(b.id(), 3)]),
            ),
            Op::new(
                "bag",
                vec![text("b")],
                Payload::MapSet(1, "k".into(), Value::Real(1.5)),
            ),
            Op::new("bag", vec![text("b")], Payload::MapRemove(1, "j".into())),
        ],
    )
    .expect("invariant: valid");
    a.purge(now + 1, &scope, "todo", vec![text("j")])
        .expect("invariant: valid");
    // Compacted, a serves a snapshot with its attestation and checkpoints.
    a.seal();
    a.compact();
    let mut out = Vec::new();
    // b bootstraps from a: it takes a snapshot from that link.
    let (mut la, mut lb) = (Link::new(), Link::snapshot_source());
    let mut to_b = vec![a.open_link(&mut la, now)];
    let mut to_a = vec![b.open_link(&mut lb, now)];
    for _ in 0..10 {
        for m in std::mem::take(&mut to_b) {
            out.push(m.clone());
            to_a.extend(b.handle(&mut lb, now, &m).send);
        }
        for m in std::mem::take(&mut to_a) {
            out.push(m.clone());
            to_b.extend(a.handle(&mut la, now, &m).send);
        }
    }
    // A record after, sent to b as a block.
    a.commit(
        now + 2,
        &scope,
        vec![Op::new("todo", vec![text("m")], Payload::Delete)],
    )
    .expect("invariant: valid");
    out.extend(a.poll(&mut la, now + 2));
    // A plain exchange (no snapshot: a compacted), and a REJECT.
    let mut c = Replica::in_memory(Identity::from_secret([3; 32]), Config::default());
    for s in schemas() {
        c.register_table(s).expect("invariant: valid schema");
    }
    let mut lc = Link::new();
    let mut la2 = Link::new();
    let hello = c.open_link(&mut lc, now);
    out.push(hello.clone());
    for m in a.handle(&mut la2, now, &hello).send {
        out.push(m);
    }
    out.push(
        Message::Reject {
            code: "FORK".into(),
            author: a.id(),
            scope,
            first_seq: 3,
        }
        .encode(),
    );
    out
}

#[test]
fn seeds_cover_every_message_type() {
    let mut types: Vec<u8> = seeds().iter().map(|m| m[3]).collect();
    types.sort();
    types.dedup();
    assert_eq!(types, vec![1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn saved_corpus_replays_without_panic() {
    let dir = corpus_dir();
    if std::env::var("CAIRN_SYNC_WRITE_CORPUS").is_ok() {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (i, m) in seeds().iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}-type{}", m[3])), m).expect("write seed");
        }
    }
    let mut n = 0;
    let mut r = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
    let bag = cairn_sync::TableSchema::new("bag", 1)
        .set("tags")
        .map("props");
    for s in schemas().into_iter().chain([bag]) {
        r.register_table(s).expect("invariant: valid schema");
    }
    let mut link = Link::new();
    for entry in std::fs::read_dir(&dir).expect("the corpus is checked in") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
        fuzz_decode(&bytes);
        // The `handle` target's body, over the same inputs.
        r.handle(&mut link, 1_700_000_000_000, &bytes);
        n += 1;
    }
    r.poll(&mut link, u64::MAX);
    assert!(r.verify().is_empty());
    assert!(n > 0);
}

#[test]
fn mutated_messages_never_panic() {
    let seeds = seeds();
    let mut rng = Rng(42);
    for _ in 0..common::seed_count(20_000) {
        let mut m = rng.pick(&seeds).clone();
        for _ in 0..1 + rng.below(4) {
            match rng.below(4) {
                0 if !m.is_empty() => {
                    let i = rng.below(m.len() as u64) as usize;
                    m[i] ^= 1 << rng.below(8);
                }
                1 if !m.is_empty() => {
                    let cut = rng.below(m.len() as u64) as usize;
                    m.truncate(cut);
                }
                2 => {
                    let i = rng.below(m.len() as u64 + 1) as usize;
                    m.insert(i, rng.below(256) as u8);
                }
                _ if !m.is_empty() => {
                    let i = rng.below(m.len() as u64) as usize;
                    m[i] = [0x00, 0x7f, 0x80, 0xff][rng.below(4) as usize];
                }
                _ => {}
            }
        }
        fuzz_decode(&m);
    }
}

/// Mutated messages fed to a replica's `handle`: no panic (arithmetic on peer-supplied seqs and
/// page numbers included), and the replica still verifies afterwards.
#[test]
fn mutated_messages_into_a_replica_never_panic() {
    let seeds = seeds();
    let mut rng = Rng(7);
    let mut r = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
    for s in schemas() {
        r.register_table(s).expect("invariant: valid schema");
    }
    let mut link = Link::new();
    for _ in 0..common::seed_count(400) {
        let mut m = rng.pick(&seeds).clone();
        let i = rng.below(m.len() as u64) as usize;
        match rng.below(3) {
            0 => m[i] ^= 1 << rng.below(8),
            1 => m[i] = 0xff,
            _ => m.truncate(i.max(4)),
        }
        r.handle(&mut link, 1_700_000_000_000, &m);
        if rng.chance(5) {
            link = Link::new();
        }
    }
    // Hostile numbers in a HELLO and an ACK.
    let a = Identity::from_secret([1; 32]).id();
    let mut vv = cairn_sync::Heads::new();
    vv.insert((a, ScopeId::new(a, "todo")), (u64::MAX, [7; 32]));
    for m in [
        Message::Hello {
            replica: a,
            device: None,
            wants_snapshot: true,
            want: Subscription::All,
            have: vv.clone(),
        },
        Message::Ack(vv),
        Message::Snapshot {
            id: u64::MAX,
            page: u64::MAX,
            last: true,
            checkpoints: vec![],
            attestations: vec![],
            rows: vec![],
        },
    ] {
        r.handle(&mut link, 1_700_000_000_000, &m.encode());
        r.poll(&mut link, u64::MAX);
    }
    assert!(r.verify().is_empty());
}
