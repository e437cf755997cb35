//! Tampered, forged, replayed, unauthorized, forking and otherwise bad input: each is refused
//! with its own reason, and nothing of it is applied.

mod common;

use cairn_sync::chain::head_message;
use cairn_sync::{
    Block, Config, Event, Identity, Link, Message, Op, Payload, Reason, Record, Replica, ScopeId,
    TableSchema, Value, WriterList,
};
use common::{schemas, text};

const NOW: u64 = 1_700_000_000_000;

fn replica(secret: u8) -> Replica {
    let mut r = Replica::in_memory(Identity::from_secret([secret; 32]), Config::default());
    for s in schemas() {
        r.register_table(s).expect("invariant: valid schema");
    }
    r
}

fn set(key: &str, title: &str) -> Op {
    Op::new(
        "todo",
        vec![text(key)],
        Payload::Set(vec![(0, text(title))]),
    )
}

/// A writes two records to its own scope and seals them as one block.
fn a_block(a: &mut Replica) -> Block {
    let scope = ScopeId::new(a.id(), "todo");
    a.commit(NOW, &scope, vec![set("k1", "hello")])
        .expect("invariant: valid commit");
    a.commit(
        NOW + 1,
        &scope,
        vec![Op::new("todo", vec![text("k1")], Payload::Add(3, 5))],
    )
    .expect("invariant: valid commit");
    a.seal();
    a.chain(&(a.id(), scope))
        .and_then(|l| l.blocks.last().cloned())
        .expect("invariant: just sealed")
}

/// Delivers blocks to `b` and returns the reasons of the rejections, checking that a rejection
/// left rows and version vector as they were.
fn deliver(b: &mut Replica, blocks: Vec<Block>) -> Vec<Reason> {
    let before = (b.state_digest(), b.version_vector());
    let events = b.receive_blocks(NOW, blocks);
    let reasons: Vec<Reason> = events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect();
    if !events.iter().any(|e| matches!(e, Event::Applied { .. })) {
        assert_eq!(
            (b.state_digest(), b.version_vector()),
            before,
            "nothing applied"
        );
    }
    reasons
}

#[test]
fn a_valid_block_applies() {
    let (mut a, mut b) = (replica(1), replica(2));
    let block = a_block(&mut a);
    assert_eq!(deliver(&mut b, vec![block]), vec![]);
    assert_eq!(b.state_digest(), a.state_digest());
    assert!(b.verify().is_empty());
}

#[test]
fn a_flipped_byte_in_a_value_is_a_bad_signature() {
    let (mut a, mut b) = (replica(1), replica(2));
    let mut bytes = a_block(&mut a).to_bytes();
    let at = bytes
        .windows(5)
        .position(|w| w == b"hello")
        .expect("invariant: the value is in the block");
    bytes[at] ^= 0x20;
    let forged = Block::from_bytes(&bytes).expect("invariant: still decodes");
    assert_eq!(deliver(&mut b, vec![forged]), vec![Reason::BadSignature]);
}

#[test]
fn every_flipped_byte_is_refused_and_nothing_applies() {
    let (mut a, mut b) = (replica(1), replica(2));
    let bytes = a_block(&mut a).to_bytes();
    for i in 0..bytes.len() {
        let mut t = bytes.clone();
        t[i] ^= 0x01;
        match Block::from_bytes(&t) {
            Err(e) => assert_eq!(e.code(), "MALFORMED"),
            Ok(block) => {
                let reasons = deliver(&mut b, vec![block]);
                assert_eq!(reasons.len(), 1, "byte {i}: {reasons:?}");
            }
        }
        assert!(b.version_vector().is_empty(), "byte {i} applied something");
    }
}

#[test]
fn a_forged_signature_is_refused() {
    let (mut a, mut b) = (replica(1), replica(2));
    let mut block = a_block(&mut a);
    let mallory = Identity::from_secret([9; 32]);
    block.sig = mallory.sign(&head_message(
        &block.author,
        &block.scope,
        block.last_seq(),
        &block.last_hash(),
    ));
    assert_eq!(deliver(&mut b, vec![block]), vec![Reason::BadSignature]);
}

#[test]
fn a_replayed_block_is_refused() {
    let (mut a, mut b) = (replica(1), replica(2));
    let block = a_block(&mut a);
    assert_eq!(deliver(&mut b, vec![block.clone()]), vec![]);
    let digest = b.state_digest();
    assert_eq!(deliver(&mut b, vec![block]), vec![Reason::Replay]);
    assert_eq!(b.state_digest(), digest);
}

#[test]
fn a_block_out_of_order_is_a_gap() {
    let (mut a, mut b) = (replica(1), replica(2));
    let first = a_block(&mut a);
    let second = a_block(&mut a);
    assert_eq!(
        deliver(&mut b, vec![second.clone()]),
        vec![Reason::ChainGap]
    );
    assert_eq!(deliver(&mut b, vec![first, second]), vec![]);
    assert_eq!(b.state_digest(), a.state_digest());
}

#[test]
fn an_unauthorized_writer_is_refused_until_listed() {
    let (mut a, mut b) = (replica(1), replica(2));
    let mallory = Identity::from_secret([9; 32]);
    let scope = ScopeId::new(a.id(), "todo");
    let rec = Record::new(
        &mallory.id(),
        &scope,
        1,
        cairn_sync::hlc::from_ms(NOW),
        [0; 32],
        vec![set("k1", "mine now")],
    );
    let block = Block::seal(&mallory, scope, vec![rec]);
    assert_eq!(
        deliver(&mut b, vec![block.clone()]),
        vec![Reason::Unauthorized]
    );
    // A list signed by someone other than the owner does not help.
    let fake = WriterList::sign(&mallory, "todo", 1, vec![mallory.id()]);
    let fake = WriterList {
        scope: ScopeId::new(a.id(), "todo"),
        ..fake
    };
    assert_eq!(
        b.add_writer_list(fake).map_err(|e| e.reason()),
        Err(Reason::BadSignature)
    );
    assert_eq!(
        deliver(&mut b, vec![block.clone()]),
        vec![Reason::Unauthorized]
    );
    // The owner's list does.
    let list = a.sign_writers(b"todo", 1, vec![mallory.id()]);
    b.add_writer_list(list).expect("invariant: owner-signed");
    assert_eq!(deliver(&mut b, vec![block]), vec![]);
}

#[test]
fn a_fork_is_reported_and_the_lower_hash_kept() {
    let (mut a, mut b) = (replica(1), replica(2));
    let mut twin = replica(1); // same key, different history: a forking author
    let scope = ScopeId::new(a.id(), "todo");
    let block = a_block(&mut a);
    twin.commit(NOW, &scope, vec![set("k1", "other")])
        .expect("invariant: valid");
    twin.seal();
    let forked = twin
        .chain(&(twin.id(), scope.clone()))
        .and_then(|l| l.blocks.last().cloned())
        .expect("invariant: sealed");
    let twin_wins = forked.records[0].hash < block.records[0].hash;
    assert_eq!(deliver(&mut b, vec![block]), vec![]);
    let digest = b.state_digest();
    let events = b.receive_blocks(NOW, vec![forked]);
    assert!(events.contains(&Event::Fork {
        author: a.id(),
        scope: ScopeId::new(a.id(), "todo"),
        seq: 1
    }));
    assert!(b.forks().contains(&a.id()));
    let refused = events.iter().any(|e| {
        matches!(
            e,
            Event::Rejected {
                reason: Reason::Fork,
                ..
            }
        )
    });
    assert_eq!(refused, !twin_wins);
    if twin_wins {
        assert_eq!(b.state_digest(), twin.state_digest());
        assert_eq!(b.heads(), twin.heads());
    } else {
        assert_eq!(b.state_digest(), digest);
    }
    assert!(b.verify().is_empty());
}

#[test]
fn a_clock_far_ahead_is_refused() {
    let (mut a, mut b) = (replica(1), replica(2));
    let scope = ScopeId::new(a.id(), "todo");
    a.commit(NOW + 3_600_000, &scope, vec![set("k1", "from the future")])
        .expect("invariant: valid");
    a.seal();
    let block = a
        .chain(&(a.id(), scope))
        .and_then(|l| l.blocks.last().cloned())
        .expect("invariant: sealed");
    assert_eq!(
        deliver(&mut b, vec![block.clone()]),
        vec![Reason::ClockSkew]
    );
    // An hour later, it is within the bound.
    assert!(b.receive_blocks(NOW + 3_600_000, vec![block]).len() == 1);
}

#[test]
fn an_unknown_table_and_a_schema_mismatch_are_refused() {
    let (mut a, mut b) = (replica(1), replica(2));
    a.register_table(TableSchema::new("secret", 1).lww("x"))
        .expect("invariant: valid");
    let scope = ScopeId::new(a.id(), "todo");
    a.commit(
        NOW,
        &scope,
        vec![Op::new(
            "secret",
            vec![text("k")],
            Payload::Set(vec![(0, Value::Integer(1))]),
        )],
    )
    .expect("invariant: valid");
    a.seal();
    let block = a
        .chain(&(a.id(), scope.clone()))
        .and_then(|l| l.blocks.last().cloned())
        .expect("invariant: sealed");
    assert_eq!(deliver(&mut b, vec![block]), vec![Reason::UnknownTable]);

    // ADD on a last-writer-wins column, signed by its author.
    let ida = Identity::from_secret([1; 32]);
    let rec = Record::new(
        &ida.id(),
        &scope,
        1,
        cairn_sync::hlc::from_ms(NOW),
        [0; 32],
        vec![Op::new("todo", vec![text("k")], Payload::Add(0, 1))],
    );
    let block = Block::seal(&ida, scope, vec![rec]);
    assert_eq!(deliver(&mut b, vec![block]), vec![Reason::SchemaMismatch]);
}

#[test]
fn a_batch_with_one_forgery_applies_the_rest() {
    let (mut a, mut c, mut b) = (replica(1), replica(3), replica(2));
    let good_a = a_block(&mut a);
    let mut bad_c = a_block(&mut c);
    bad_c.sig[0] ^= 1;
    let reasons = deliver(&mut b, vec![good_a, bad_c]);
    assert_eq!(reasons, vec![Reason::BadSignature]);
    assert_eq!(b.version_vector().len(), 1);
    assert!(b.verify().is_empty());
}

#[test]
fn malformed_messages_are_refused_without_panic() {
    let mut b = replica(2);
    let mut link = Link::new();
    for bytes in [
        &b""[..],
        b"CS",
        b"CS\x02\x01",
        b"CS\x01\x09",
        b"CS\x01\x03\xff\xff\xff\xff\x0f",
        b"XX\x01\x01",
    ] {
        let out = b.handle(&mut link, NOW, bytes);
        assert!(out.send.is_empty());
        assert!(matches!(
            out.events.as_slice(),
            [Event::Rejected {
                reason: Reason::Malformed,
                ..
            }]
        ));
    }
}

#[test]
fn a_rejection_is_reported_to_the_sender() {
    let (mut a, mut b) = (replica(1), replica(2));
    let mut block = a_block(&mut a);
    block.sig[5] ^= 1;
    let (mut la, mut lb) = (Link::new(), Link::new());
    let hello = a.open_link(&mut la, NOW);
    b.handle(&mut lb, NOW, &hello);
    let out = b.handle(&mut lb, NOW, &Message::Blocks(vec![block]).encode());
    let reject = out
        .send
        .iter()
        .find_map(|m| match Message::decode(m) {
            Ok(Message::Reject { code, .. }) => Some(code),
            _ => None,
        })
        .expect("a REJECT goes back");
    assert_eq!(reject, "BAD_SIGNATURE");
}

#[test]
fn an_unknown_block_format_is_refused_clearly() {
    let mut a = replica(1);
    let mut bytes = a_block(&mut a).to_bytes();
    bytes[0] = 2;
    let err = Block::from_bytes(&bytes).expect_err("format 2 is not v1");
    assert_eq!(err.code(), "MALFORMED");
    assert!(err.to_string().contains("unsupported block format"));
}

#[test]
fn a_snapshot_with_a_forged_checkpoint_is_refused_whole() {
    let mut a = replica(1);
    let mut b = replica(2);
    a_block(&mut a);
    let log = a
        .chain(&(a.id(), ScopeId::new(a.id(), "todo")))
        .expect("written");
    let mut cp = cairn_sync::Checkpoint::of_block(log.blocks.last().expect("sealed"));
    cp.seq += 5; // claims records it never signed
    let mut row = cairn_sync::RowState::default();
    row.apply(
        &set("k9", "planted"),
        cairn_sync::Version {
            hlc: 1,
            author: a.id(),
            seq: 1,
            idx: 0,
        },
    );
    let key = cairn_sync::RowKey::new("todo", &cp.scope, &[text("k9")]);
    // Its scope's owner attests the rows at the forged head: the checkpoint's signature, by the
    // chain's author, still fails.
    let mut heads = cairn_sync::attest::ScopeHeads::new();
    heads.insert(cp.author, (cp.seq, cp.hash));
    let digest = cairn_sync::attest::rows_digest([(&key, &row)]);
    let att = cairn_sync::Attestation::sign(a.identity(), cp.scope.clone(), 1, heads, digest);
    let events = b.install_snapshot(NOW, vec![cp], vec![att], vec![(key, row)]);
    assert!(matches!(
        events.as_slice(),
        [Event::Rejected {
            reason: Reason::BadSignature,
            ..
        }]
    ));
    assert!(b.version_vector().is_empty());
    assert!(b.visible("todo").0.is_empty());
}

#[test]
fn an_oversized_snapshot_is_refused() {
    let mut a = replica(1);
    let mut b = Replica::in_memory(
        Identity::from_secret([2; 32]),
        Config {
            max_snapshot_rows: 1,
            snapshot_when_empty: true,
            ..Config::default()
        },
    );
    for s in schemas() {
        b.register_table(s).expect("invariant: valid schema");
    }
    a_block(&mut a);
    let scope = ScopeId::new(a.id(), "todo");
    a.commit(NOW + 2, &scope, vec![set("k2", "two")])
        .expect("valid");
    a.seal();
    a.compact();
    // b bootstraps from a: it asks it for a snapshot.
    let (mut la, mut lb) = (Link::new(), Link::snapshot_source());
    let hello_b = b.open_link(&mut lb, NOW);
    a.open_link(&mut la, NOW);
    let out = a.handle(&mut la, NOW, &hello_b);
    let mut refused = false;
    for m in out.send {
        let o = b.handle(&mut lb, NOW, &m);
        refused |= o.events.iter().any(|e| {
            matches!(e, Event::Rejected { reason: Reason::Malformed, detail, .. } if detail.contains("max_snapshot_rows"))
        });
    }
    assert!(refused);
    assert!(b.visible("todo").0.is_empty());
}

#[test]
fn two_lists_with_one_version_both_count_whatever_the_order() {
    let a = Identity::from_secret([1; 32]);
    let (w1, w2) = (
        Identity::from_secret([7; 32]).id(),
        Identity::from_secret([8; 32]).id(),
    );
    let l1 = WriterList::sign(&a, "todo", 1, vec![w1]);
    let l2 = WriterList::sign(&a, "todo", 1, vec![w2]);
    let scope = ScopeId::new(a.id(), "todo");
    for order in [[&l1, &l2], [&l2, &l1]] {
        let mut r = replica(2);
        for l in order {
            assert_eq!(r.add_writer_list(l.clone()), Ok(true));
        }
        assert!(r.may_write(&w1, &scope) && r.may_write(&w2, &scope));
    }
}

/// A peer's set or map op that does not decode (a BLOB element, a NaN map value, a removal
/// whose observed chains are out of order) is `MALFORMED`, and one on a column of another kind
/// `SCHEMA_MISMATCH`: refused whole like any such op, nothing of it applied.
#[test]
fn malformed_set_and_map_ops_are_refused() {
    let schemas = || {
        let bag = TableSchema::new("bag", 1).set("tags").map("props");
        schemas().into_iter().chain([bag])
    };
    let mut b = Replica::in_memory(Identity::from_secret([2; 32]), Config::default());
    for s in schemas() {
        b.register_table(s).expect("invariant: valid schema");
    }
    let ida = Identity::from_secret([1; 32]);
    let scope = ScopeId::new(ida.id(), "bag");
    let block = |p: Payload| {
        let op = Op::new("bag", vec![text("k")], p);
        let rec = Record::new(
            &ida.id(),
            &scope,
            1,
            cairn_sync::hlc::from_ms(NOW),
            [0; 32],
            vec![op],
        );
        Block::seal(&ida, scope.clone(), vec![rec])
    };
    let (x, y) = (cairn_sync::AuthorId([9; 32]), cairn_sync::AuthorId([3; 32]));
    for bad in [
        Payload::SetAdd(0, Value::Blob(vec![1])),
        Payload::MapSet(1, "k".into(), Value::Real(f64::NAN)),
        Payload::SetRemove(0, text("e"), vec![(x, 1), (y, 2)]),
        Payload::SetRemove(0, text("e"), vec![(y, 1), (y, 2)]),
    ] {
        let mut link = Link::new();
        let before = b.state_digest();
        let out = b.handle(
            &mut link,
            NOW,
            &Message::Blocks(vec![block(bad.clone())]).encode(),
        );
        assert!(
            matches!(
                out.events.as_slice(),
                [Event::Rejected {
                    reason: Reason::Malformed,
                    ..
                }]
            ),
            "{bad:?}: {:?}",
            out.events
        );
        assert_eq!(b.state_digest(), before);
    }
    for wrong in [
        Payload::SetAdd(1, text("e")),
        Payload::MapRemove(0, "k".into()),
        Payload::Add(0, 1),
    ] {
        assert_eq!(
            deliver(&mut b, vec![block(wrong)]),
            vec![Reason::SchemaMismatch]
        );
    }
    // A sound one applies.
    assert_eq!(
        deliver(&mut b, vec![block(Payload::SetAdd(0, text("e")))]),
        vec![]
    );
}
