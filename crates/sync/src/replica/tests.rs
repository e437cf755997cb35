use super::*;
use crate::change::{Op, OpsWriter, Payload};
use cairn_value::Value;

#[test]
fn verify_reports_tampered_history() {
    let mut r = Replica::in_memory(Identity::from_secret([1; 32]), Config::default());
    r.register_table(TableSchema::new("t", 1).lww("a"))
        .expect("invariant: valid");
    let scope = ScopeId::new(r.id(), "t");
    for i in 0..3 {
        let op = Op::new(
            "t",
            vec![Value::Integer(i)],
            Payload::Set(vec![(0, Value::Integer(i))]),
        );
        r.commit(1000, &scope, vec![op]).expect("invariant: valid");
    }
    r.seal();
    assert!(r.verify().is_empty());
    let key = (r.id(), scope);
    let log = r.chains.get_mut(&key).expect("invariant: written");
    log.blocks[0].records[1].ops[0] = Op::new(
        "t",
        vec![Value::Integer(1)],
        Payload::Set(vec![(0, Value::Integer(99))]),
    );
    let failures = r.verify();
    assert!(failures
        .iter()
        .any(|f| f.seq == 2 && f.reason == Reason::BadSignature));
    let log = r.chains.get_mut(&key).expect("invariant: written");
    log.blocks[0].records[1].ops[0] = Op::new(
        "t",
        vec![Value::Integer(1)],
        Payload::Set(vec![(0, Value::Integer(1))]),
    );
    assert!(r.verify().is_empty());
    log_sig_flip(&mut r, &key);
    assert_eq!(r.verify().len(), 1);
}

#[test]
fn edits_move_with_everything_a_host_saves_but_local_records() {
    // A host saves only the chains of its local records while `edits` stands still
    // (cairn-replicated's save): sealing, a peer's blocks, a peer met, a writer list and
    // compaction must move it; a local record, hashing and merging must not.
    let schema = TableSchema::new("t", 1).lww("a");
    let mut a = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
    let mut b = Replica::in_memory(Identity::from_secret([6; 32]), Config::default());
    for r in [&mut a, &mut b] {
        r.register_table(schema.clone()).expect("invariant: valid");
    }
    let key = (a.id(), ScopeId::new(a.id(), "t"));
    let write = |r: &mut Replica, i: i64| {
        let mut w = OpsWriter::new();
        w.op(&Op::new(
            "t",
            vec![Value::Integer(i)],
            Payload::Set(vec![(0, Value::Integer(i))]),
        ));
        let key = (r.id(), ScopeId::new(r.id(), "t"));
        r.commit_written_to(1000, &key, w)
            .expect("invariant: valid");
    };
    let e = a.edits();
    write(&mut a, 1);
    write(&mut a, 2);
    a.catch_up();
    assert_eq!(a.edits(), e, "local records, hashing and merging");
    a.seal();
    assert!(a.edits() > e, "sealing");
    let e = a.edits();
    write(&mut b, 3);
    b.seal();
    let bkey = (b.id(), ScopeId::new(b.id(), "t"));
    let blocks = b.chain(&bkey).expect("invariant: written").blocks.clone();
    a.receive_blocks(1000, blocks);
    assert!(a.edits() > e, "a peer's blocks");
    let e = a.edits();
    let (mut la, mut lb) = (crate::Link::new(), crate::Link::new());
    let hello = b.open_link(&mut lb, 1000);
    a.handle(&mut la, 1000, &hello);
    assert!(a.edits() > e, "a peer met");
    let e = a.edits();
    a.sign_writers(b"t", 1, vec![b.id()]);
    assert!(a.edits() > e, "a writer list");
    let e = a.edits();
    a.compact();
    assert!(a.edits() > e, "compaction");
    assert!(a.chain(&key).is_some());
}

#[test]
fn deferred_commits_find_their_chain_again_after_each_catch_up() {
    // A chain's place in the replica's deferred maps is remembered in the chain: commits
    // between partial catch-ups (hashes only, merges only, a replay of history), over two
    // scopes, must leave the same chains and rows as commits made at once.
    let schema = TableSchema::new("t", 1).lww("a");
    let mut now = Replica::in_memory(Identity::from_secret([3; 32]), Config::default());
    let mut late = Replica::in_memory(Identity::from_secret([3; 32]), Config::default());
    for r in [&mut now, &mut late] {
        r.register_table(schema.clone()).expect("invariant: valid");
    }
    let scopes = [ScopeId::new(now.id(), "a"), ScopeId::new(now.id(), "b")];
    let op = |i: i64| {
        vec![Op::new(
            "t",
            vec![Value::Integer(i % 4)],
            Payload::Set(vec![(0, Value::Integer(i))]),
        )]
    };
    for i in 0..24i64 {
        let scope = &scopes[(i % 2) as usize];
        now.commit(1000 + i as u64, scope, op(i))
            .expect("invariant: valid");
        late.commit_deferred(1000 + i as u64, scope, op(i))
            .expect("invariant: valid");
        let key = (late.id(), scope.clone());
        let seq = late.chain(&key).expect("invariant: written").head().0;
        assert!(late.written_bytes(&key, seq).is_some());
        match i % 6 {
            1 => {
                late.hash_deferred();
                assert!(late.written_bytes(&key, seq).is_none());
                assert!(late.has_unmerged());
            }
            3 => late.merge_deferred(),
            5 if i % 12 == 5 => late.replay_history(),
            _ => {}
        }
    }
    late.catch_up();
    assert!(!late.has_unmerged());
    assert_eq!(now.state_digest(), late.state_digest());
    assert_eq!(now.version_vector(), late.version_vector());
    for scope in &scopes {
        let key = (now.id(), scope.clone());
        assert_eq!(
            now.chain(&key).expect("invariant: written").head(),
            late.chain(&key).expect("invariant: written").head()
        );
    }
    assert!(late.verify().is_empty());
    // A local record goes to this replica's own chain only.
    let other = Identity::from_secret([4; 32]).id();
    let mut w = OpsWriter::new();
    w.op(&op(99)[0]);
    assert!(matches!(
        late.commit_written_to(2000, &(other, scopes[0].clone()), w),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn one_writer_serves_many_records() {
    // `commit_written_from` copies a small record's bytes after the chain's others, keeps
    // a large one's buffer, and empties the writer for the next: each record must hold its
    // own ops only, whichever way it was kept, and whatever was hashed between.
    let schema = TableSchema::new("t", 1).lww("a");
    let mut now = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
    let mut late = Replica::in_memory(Identity::from_secret([5; 32]), Config::default());
    for r in [&mut now, &mut late] {
        r.register_table(schema.clone()).expect("invariant: valid");
    }
    let scope = ScopeId::new(now.id(), "t");
    let key = (now.id(), scope.clone());
    let ops = |i: i64| -> Vec<Op> {
        (0..=i % 3)
            .map(|k| {
                Op::new(
                    "t",
                    vec![Value::Integer(i + k)],
                    // Every fifth record is large (past `SMALL_RECORD`); the others,
                    // of up to about 800 bytes, fill a shared buffer every dozen or so.
                    Payload::Set(vec![(
                        0,
                        Value::Text(format!("{i}-{k}").repeat(if i % 5 == 4 { 900 } else { 60 })),
                    )]),
                )
            })
            .collect()
    };
    let mut w = OpsWriter::new();
    for i in 0..60i64 {
        now.commit(1000 + i as u64, &scope, ops(i))
            .expect("invariant: valid");
        for op in &ops(i) {
            w.op(op);
        }
        let (seq, hlc, bytes) = late
            .commit_written_from(1000 + i as u64, &key, &mut w, |seq, hlc, b| {
                (seq, hlc, b.to_vec())
            })
            .expect("invariant: valid")
            .expect("invariant: ops written");
        assert!(w.is_empty());
        // What the host is handed is the record as held, to be saved as it is.
        let log = late.chain(&key).expect("invariant: written");
        assert_eq!(log.head().0, seq);
        assert_eq!(log.written().last(), Some((seq, hlc, &bytes[..])));
        assert_eq!(log.written_bytes(seq), Some(&bytes[..]));
        assert_eq!(log.unsealed() as u64, seq);
        if i % 7 == 3 {
            late.hash_deferred();
            // Hashed: decoded into `pending`, nothing left waiting.
            let log = late.chain(&key).expect("invariant: written");
            assert_eq!(log.written().count(), 0);
            assert_eq!(log.pending.last().map(|r| (r.seq, r.hlc)), Some((seq, hlc)));
        }
    }
    // A record waiting to be hashed costs its encoding and 32 bytes, not a `Record`.
    assert_eq!(std::mem::size_of::<crate::chain::Written>(), 32);
    late.catch_up();
    let pending = |r: &Replica| r.chain(&key).expect("invariant: written").pending.clone();
    assert_eq!(pending(&now), pending(&late));
    assert_eq!(now.state_digest(), late.state_digest());
    assert!(late.verify().is_empty());
}

#[test]
fn deferred_commits_merge_to_the_same_rows() {
    let schema = TableSchema::new("t", 1).lww("a").counter("n");
    let mut now = Replica::in_memory(Identity::from_secret([2; 32]), Config::default());
    let mut late = Replica::in_memory(Identity::from_secret([2; 32]), Config::default());
    for r in [&mut now, &mut late] {
        r.register_table(schema.clone()).expect("invariant: valid");
    }
    let scope = ScopeId::new(now.id(), "t");
    let ops = |i: i64| {
        vec![
            Op::new(
                "t",
                vec![Value::Integer(i % 3)],
                Payload::Set(vec![(0, Value::Integer(i))]),
            ),
            Op::new("t", vec![Value::Integer(i % 3)], Payload::Add(1, i)),
            Op::new("t", vec![Value::Integer((i + 1) % 3)], Payload::Delete),
        ]
    };
    for i in 0..6 {
        now.commit(1000, &scope, ops(i)).expect("invariant: valid");
        late.commit_deferred(1000, &scope, ops(i))
            .expect("invariant: valid");
        if i == 2 {
            // Sealing moves deferred records into a block; they still merge.
            late.seal();
        }
    }
    assert!(late.has_unmerged());
    late.catch_up();
    assert!(!late.has_unmerged());
    assert_eq!(now.state_digest(), late.state_digest());
    assert_eq!(now.version_vector(), late.version_vector());
    // Hashed late, the chain is the one hashed at each commit.
    let key = (now.id(), scope);
    let head = |r: &Replica| r.chain(&key).expect("invariant: written").head();
    assert_eq!(head(&now), head(&late));
    assert!(late.verify().is_empty());
    now.seal();
    late.seal();
    let records = |r: &Replica| -> Vec<Record> {
        let log = r.chain(&key).expect("invariant: written");
        log.blocks.iter().flat_map(|b| b.records.clone()).collect()
    };
    assert_eq!(records(&now), records(&late));
}

fn log_sig_flip(r: &mut Replica, key: &ChainKey) {
    let log = r.chains.get_mut(key).expect("invariant: written");
    log.blocks[0].sig[0] ^= 1;
}
