//! Revocation (docs/sync.md sec. 8): an owner removes a writer from a scope with a signed list
//! that says how far the writer's chain stays valid (its cut). Every replica keeps the records up
//! to the cut and refuses (or takes back) the rest, whichever came first, the list or the records.

mod common;

use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{
    Block, Config, Event, Identity, Op, Payload, Reason, Replica, ScopeId, WriterList,
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

/// `w` writes one record to `scope` (setting `key`) and seals it: one block.
fn write(w: &mut Replica, scope: &ScopeId, key: &str, title: &str) -> Block {
    let op = Op::new(
        "todo",
        vec![text(key)],
        Payload::Set(vec![(0, text(title))]),
    );
    w.commit(NOW, scope, vec![op])
        .expect("a listed writer writes");
    w.seal();
    w.chain(&(w.id(), scope.clone()))
        .and_then(|l| l.blocks.last().cloned())
        .expect("sealed")
}

fn refusals(events: &[Event]) -> Vec<Reason> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_revoked_writer_ends_at_its_cut_on_every_replica_whatever_the_order() {
    let mut owner = replica(1);
    let mut writer = replica(2);
    let scope = ScopeId::new(owner.id(), "todo");
    let listed = owner.sign_writers(b"todo", 1, vec![writer.id()]);
    writer.add_writer_list(listed.clone()).unwrap();
    // Two records reach the owner; two more are written before the revocation reaches anyone.
    let early: Vec<Block> = vec![
        write(&mut writer, &scope, "k1", "one"),
        write(&mut writer, &scope, "k2", "two"),
    ];
    assert!(refusals(&owner.receive_blocks(NOW, early.clone())).is_empty());
    let late: Vec<Block> = vec![
        write(&mut writer, &scope, "k1", "changed"),
        write(&mut writer, &scope, "k3", "three"),
    ];
    let revoked = owner.revoke_writers(b"todo", 2, &[writer.id()]);
    assert_eq!(
        revoked.removed,
        vec![(writer.id(), 2)],
        "cut at what the owner held"
    );
    assert!(!owner.may_write(&writer.id(), &scope));

    // b: every record first, then the lists: the late records are taken back.
    let mut b = replica(3);
    b.add_writer_list(listed.clone()).unwrap();
    let all: Vec<Block> = early.iter().chain(late.iter()).cloned().collect();
    assert!(refusals(&b.receive_blocks(NOW, all.clone())).is_empty());
    assert_eq!(b.version_vector()[&(writer.id(), scope.clone())], 4);
    b.add_writer_list(revoked.clone()).unwrap();
    let rows = b.take_revoked_rows();
    assert!(
        !rows.is_empty(),
        "the rows the late records touched are to be re-read"
    );
    // c: the lists first, then every record: the late ones are refused.
    let mut c = replica(4);
    c.add_writer_list(revoked.clone()).unwrap();
    c.add_writer_list(listed.clone()).unwrap();
    let events = c.receive_blocks(NOW, all);
    // The first late block is refused; the next then follows nothing held.
    assert_eq!(
        refusals(&events),
        vec![Reason::Unauthorized, Reason::ChainGap]
    );

    for r in [&mut b, &mut c] {
        assert_eq!(r.heads(), owner.heads());
        assert_eq!(r.state_digest(), owner.state_digest());
        assert!(r.verify().is_empty());
    }
    let (rows, _) = c.visible("todo");
    let shown = format!("{rows:?}");
    assert!(
        shown.contains("\"one\"") && shown.contains("\"two\""),
        "{shown}"
    );
    assert!(
        !shown.contains("changed") && !shown.contains("three"),
        "{shown}"
    );

    // The writer's later records are refused everywhere.
    let after = write(&mut writer, &scope, "k4", "after");
    for r in [&mut owner, &mut b, &mut c] {
        let events = r.receive_blocks(NOW, vec![after.clone()]);
        assert!(refusals(&events)
            .iter()
            .all(|x| matches!(x, Reason::Unauthorized | Reason::ChainGap)));
        assert_eq!(r.version_vector()[&(writer.id(), scope.clone())], 2);
    }
}

#[test]
fn listing_the_writer_again_lets_its_records_back_in() {
    let mut owner = replica(1);
    let mut writer = replica(2);
    let scope = ScopeId::new(owner.id(), "todo");
    let v1 = owner.sign_writers(b"todo", 1, vec![writer.id()]);
    writer.add_writer_list(v1).unwrap();
    let first = write(&mut writer, &scope, "k1", "one");
    owner.receive_blocks(NOW, vec![first]);
    owner.revoke_writers(b"todo", 2, &[writer.id()]);
    let second = write(&mut writer, &scope, "k2", "two");
    assert_eq!(
        refusals(&owner.receive_blocks(NOW, vec![second.clone()])),
        vec![Reason::Unauthorized]
    );
    owner.sign_writers(b"todo", 3, vec![writer.id()]);
    assert!(owner.may_write(&writer.id(), &scope));
    assert!(refusals(&owner.receive_blocks(NOW, vec![second])).is_empty());
    assert_eq!(owner.version_vector()[&(writer.id(), scope)], 2);
}

#[test]
fn a_removal_is_signed_and_round_trips() {
    let owner = Identity::from_secret([1; 32]);
    let w = Identity::from_secret([2; 32]).id();
    let list = WriterList::sign_removing(&owner, "todo", 2, vec![], vec![(w, 7)]);
    let mut buf = Writer::new();
    list.encode(&mut buf);
    let back = WriterList::decode(&mut Reader::new(&buf.buf)).unwrap();
    assert_eq!(back, list);
    assert!(back.check().is_ok());
    // Another cut under the same signature does not verify.
    let mut forged = back.clone();
    forged.removed[0].1 = 1000;
    assert!(forged.check().is_err());
    // Nor does a removal dropped from a signed list.
    let mut stripped = back;
    stripped.removed.clear();
    assert!(stripped.check().is_err());
}
