//! Purge, compaction, snapshots and subscriptions, over an in-process lossless transport.

mod common;

use cairn_sync::{
    Config, Identity, Link, Op, Payload, Replica, ScopeFilter, ScopeId, Subscription, Value,
};
use common::{schemas, text};

const NOW: u64 = 1_700_000_000_000;

fn replica(secret: u8, config: Config) -> Replica {
    let mut r = Replica::in_memory(Identity::from_secret([secret; 32]), config);
    for s in schemas() {
        r.register_table(s).expect("invariant: valid schema");
    }
    r
}

/// Connects a and b and delivers messages both ways until none is left.
/// Syncs `a` and `b` until both are quiet; `b` takes snapshots from `a` (it bootstraps from it).
fn sync(a: &mut Replica, b: &mut Replica, now: u64) {
    let (mut la, mut lb) = (Link::new(), Link::snapshot_source());
    let mut to_b = vec![a.open_link(&mut la, now)];
    let mut to_a = vec![b.open_link(&mut lb, now)];
    for _ in 0..1000 {
        if to_a.is_empty() && to_b.is_empty() {
            to_b = a.poll(&mut la, now);
            to_a = b.poll(&mut lb, now);
            if to_a.is_empty() && to_b.is_empty() {
                return;
            }
        }
        for m in std::mem::take(&mut to_b) {
            to_a.extend(b.handle(&mut lb, now, &m).send);
        }
        for m in std::mem::take(&mut to_a) {
            to_b.extend(a.handle(&mut la, now, &m).send);
        }
    }
    panic!("sync did not settle");
}

fn stored_bytes(r: &Replica) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, log) in r.chains() {
        for b in &log.blocks {
            out.extend(b.to_bytes());
        }
        for rec in &log.pending {
            let mut w = cairn_sync::wire::Writer::new();
            rec.encode(&mut w);
            out.extend(w.buf);
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn purge_erases_values_from_every_replica_and_history_still_verifies() {
    let (mut a, mut b) = (replica(1, Config::default()), replica(2, Config::default()));
    let scope = ScopeId::new(a.id(), "todo");
    let list = a.sign_writers(b"todo", 1, vec![b.id()]);
    b.add_writer_list(list).expect("invariant: owner-signed");
    let k = || vec![text("k1")];
    a.commit(
        NOW,
        &scope,
        vec![Op::new(
            "todo",
            k(),
            Payload::Set(vec![(0, text("SECRET-1"))]),
        )],
    )
    .expect("valid");
    a.commit(
        NOW + 1,
        &scope,
        vec![Op::new("todo", k(), Payload::Add(3, 4))],
    )
    .expect("valid");
    a.commit(
        NOW + 1,
        &scope,
        vec![Op::new(
            "todo",
            vec![text("k2")],
            Payload::Set(vec![(0, text("keep"))]),
        )],
    )
    .expect("valid");
    sync(&mut a, &mut b, NOW + 2);
    b.commit(
        NOW + 3,
        &scope,
        vec![Op::new(
            "todo",
            k(),
            Payload::Set(vec![(1, text("SECRET-2"))]),
        )],
    )
    .expect("valid");
    sync(&mut a, &mut b, NOW + 4);
    assert!(contains(&stored_bytes(&a), b"SECRET-2"));

    b.purge(NOW + 5, &scope, "todo", k()).expect("valid");
    sync(&mut a, &mut b, NOW + 6);
    for r in [&a, &b] {
        let bytes = stored_bytes(r);
        assert!(!contains(&bytes, b"SECRET-1") && !contains(&bytes, b"SECRET-2"));
        assert!(contains(&bytes, b"keep"));
        assert!(r.verify().is_empty(), "{:?}", r.verify());
        let (rows, _) = r.visible("todo");
        assert_eq!(rows.len(), 1);
    }
    // A later write to a purged row is absorbed.
    a.commit(
        NOW + 7,
        &scope,
        vec![Op::new("todo", k(), Payload::Set(vec![(0, text("again"))]))],
    )
    .expect("valid");
    sync(&mut a, &mut b, NOW + 8);
    assert_eq!(a.visible("todo").0.len(), 1);
    assert!(!contains(&stored_bytes(&b), b"again"));
    assert_eq!(a.state_digest(), b.state_digest());
}

#[test]
fn compaction_keeps_what_peers_lack_and_late_replicas_bootstrap_by_snapshot() {
    let mut a = replica(1, Config::default());
    let mut b = replica(2, Config::default());
    let scope = ScopeId::new(a.id(), "todo");
    for i in 0..20 {
        a.commit(
            NOW + i,
            &scope,
            vec![Op::new(
                "todo",
                vec![text(format!("k{i}"))],
                Payload::Set(vec![(0, Value::Integer(i as i64))]),
            )],
        )
        .expect("valid");
        if i % 5 == 4 {
            a.seal();
        }
    }
    // b has not acknowledged anything yet: nothing may go.
    sync(&mut a, &mut b, NOW + 100);
    a.commit(
        NOW + 101,
        &scope,
        vec![Op::new("todo", vec![text("late")], Payload::Delete)],
    )
    .expect("valid");
    a.seal();
    let dropped = a.compact();
    assert_eq!(
        dropped, 20,
        "b acknowledged the first 20 records, not the 21st"
    );
    assert!(a.verify().is_empty());
    sync(&mut a, &mut b, NOW + 102);
    assert_eq!(a.state_digest(), b.state_digest());

    for snapshot_when_empty in [true, false] {
        let mut c = replica(
            3,
            Config {
                snapshot_when_empty,
                ..Config::default()
            },
        );
        sync(&mut a, &mut c, NOW + 200);
        assert_eq!(c.state_digest(), a.state_digest());
        assert_eq!(c.version_vector(), a.version_vector());
        assert!(c.verify().is_empty());
        // c continues the chain from the checkpoint.
        a.commit(
            NOW + 201,
            &scope,
            vec![Op::new("todo", vec![text("k1")], Payload::Add(3, 1))],
        )
        .expect("valid");
        sync(&mut a, &mut c, NOW + 202);
        assert_eq!(c.state_digest(), a.state_digest());
    }
}

#[test]
fn a_subscription_receives_only_its_scopes() {
    let mut a = replica(1, Config::default());
    let want = Subscription::Filters(vec![ScopeFilter {
        owner: None,
        prefix: b"todo/list=1".to_vec(),
    }]);
    let mut b = replica(
        2,
        Config {
            subscription: want,
            ..Config::default()
        },
    );
    let one = ScopeId::new(a.id(), "todo/list=1");
    let two = ScopeId::new(a.id(), "todo/list=2");
    a.commit(
        NOW,
        &one,
        vec![Op::new(
            "todo",
            vec![text("x")],
            Payload::Set(vec![(0, text("in"))]),
        )],
    )
    .expect("valid");
    a.commit(
        NOW,
        &two,
        vec![Op::new(
            "todo",
            vec![text("y")],
            Payload::Set(vec![(0, text("out"))]),
        )],
    )
    .expect("valid");
    sync(&mut a, &mut b, NOW + 1);
    let (rows, _) = b.visible("todo");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].values[0], text("in"));
    assert_eq!(b.version_vector().len(), 1);
}

#[test]
fn unique_conflicts_resolve_the_same_way_everywhere() {
    let (mut a, mut b) = (replica(1, Config::default()), replica(2, Config::default()));
    let scope = ScopeId::new(a.id(), "user");
    let list = a.sign_writers(b"user", 1, vec![b.id()]);
    b.add_writer_list(list).expect("invariant: owner-signed");
    let email = |k: &str| {
        Op::new(
            "user",
            vec![text(k)],
            Payload::Set(vec![(0, text("same@x"))]),
        )
    };
    a.commit(NOW + 10, &scope, vec![email("a")]).expect("valid");
    b.commit(NOW + 5, &scope, vec![email("b")]).expect("valid");
    sync(&mut a, &mut b, NOW + 20);
    for r in [&a, &b] {
        let (shown, hidden) = r.visible("user");
        assert_eq!(shown.len(), 1);
        assert_eq!(
            shown[0].pk,
            vec![text("b")],
            "the earlier write keeps the value"
        );
        assert_eq!(hidden.len(), 1);
    }
    // The winner changes its email: the hidden row reappears.
    b.commit(
        NOW + 30,
        &scope,
        vec![Op::new(
            "user",
            vec![text("b")],
            Payload::Set(vec![(0, text("new@x"))]),
        )],
    )
    .expect("valid");
    sync(&mut a, &mut b, NOW + 40);
    assert_eq!(a.visible("user").0.len(), 2);
    assert_eq!(a.visible("user"), b.visible("user"));
}

#[test]
fn identities_move_between_devices() {
    let a = Identity::from_secret([1; 32]);
    let moved = Identity::import(&a.export()).expect("round trip");
    assert_eq!(a.id(), moved.id());
    let mut rng = rand_core::OsRng;
    let fresh = Identity::generate(&mut rng);
    assert_ne!(fresh.id(), a.id());
}

#[test]
fn the_sql_layer_speaks_column_names_and_gets_rows_to_upsert_or_delete() {
    let (mut a, mut b) = (replica(1, Config::default()), replica(2, Config::default()));
    let scope = ScopeId::new(a.id(), "todo");
    let set = a
        .set_op(
            "todo",
            vec![text("k")],
            vec![("title", text("x")), ("done", Value::Integer(0))],
        )
        .expect("valid");
    let add = a.add_op("todo", vec![text("k")], "n", 2).expect("valid");
    assert!(a
        .set_op("todo", vec![text("k")], vec![("n", Value::Integer(1))])
        .is_err());
    assert!(a
        .set_op("todo", vec![text("k")], vec![("nope", Value::Integer(1))])
        .is_err());
    assert!(a.add_op("todo", vec![text("k")], "title", 1).is_err());
    assert!(a.set_op("nope", vec![text("k")], vec![]).is_err());
    let changed = a.commit(NOW, &scope, vec![set, add]).expect("valid");
    assert_eq!(
        a.materialize(&changed)[0].1,
        Some(vec![
            text("x"),
            Value::Integer(0),
            Value::Null,
            Value::Integer(2)
        ])
    );
    let del = Op::new("todo", vec![text("k")], Payload::Delete);
    a.commit(NOW + 1, &scope, vec![del]).expect("valid");
    let (mut la, mut lb) = (Link::new(), Link::new());
    let hello_a = a.open_link(&mut la, NOW + 2);
    let hello_b = b.open_link(&mut lb, NOW + 2);
    b.handle(&mut lb, NOW + 2, &hello_a);
    let mut applied = Vec::new();
    for m in a.handle(&mut la, NOW + 2, &hello_b).send {
        for e in b.handle(&mut lb, NOW + 2, &m).events {
            if let cairn_sync::Event::Applied { rows, .. } = e {
                applied.extend(rows);
            }
        }
    }
    applied.dedup();
    assert_eq!(b.materialize(&applied), vec![(applied[0].clone(), None)]);
}

fn blocks_in(msgs: &[Vec<u8>]) -> Vec<usize> {
    msgs.iter()
        .filter_map(|m| match cairn_sync::Message::decode(m) {
            Ok(cairn_sync::Message::Blocks(bs)) => Some(bs.iter().map(|b| b.records.len()).sum()),
            _ => None,
        })
        .collect()
}

#[test]
fn pages_are_bounded_windowed_and_a_cut_resumes_where_it_stopped() {
    let config = Config {
        page_records: 250,
        window_pages: 2,
        ..Config::default()
    };
    let mut a = replica(1, config.clone());
    let mut b = replica(2, config);
    let scope = ScopeId::new(a.id(), "todo");
    for i in 0..1000u64 {
        let op = Op::new("todo", vec![text(format!("k{i}"))], Payload::Add(3, 1));
        a.commit(NOW + i, &scope, vec![op]).expect("valid");
        if i % 100 == 99 {
            a.seal(); // blocks of 100 records
        }
    }
    let (mut la, mut lb) = (Link::new(), Link::new());
    a.open_link(&mut la, NOW);
    let hello_b = b.open_link(&mut lb, NOW);
    let first = a.handle(&mut la, NOW, &hello_b).send;
    let pages = blocks_in(&first);
    assert_eq!(
        pages,
        vec![300, 300],
        "two pages in the window, cut at block boundaries"
    );
    // b takes the first page only, then the connection drops.
    let hello_a = a.open_link(&mut Link::new(), NOW);
    b.handle(&mut lb, NOW, &hello_a);
    let page1 = first
        .iter()
        .find(|m| {
            matches!(
                cairn_sync::Message::decode(m),
                Ok(cairn_sync::Message::Blocks(_))
            )
        })
        .expect("a page");
    b.handle(&mut lb, NOW, page1);
    assert_eq!(
        b.version_vector().values().copied().collect::<Vec<_>>(),
        vec![300]
    );
    // A new connection: b's HELLO says 300, a resumes from 301 and nothing is sent twice.
    let (mut la, mut lb) = (Link::new(), Link::new());
    let mut to_b = vec![a.open_link(&mut la, NOW + 1)];
    let mut to_a = vec![b.open_link(&mut lb, NOW + 1)];
    let mut sent = 0;
    while !(to_a.is_empty() && to_b.is_empty()) {
        sent += blocks_in(&to_b).iter().sum::<usize>();
        for m in std::mem::take(&mut to_b) {
            to_a.extend(b.handle(&mut lb, NOW + 1, &m).send);
        }
        for m in std::mem::take(&mut to_a) {
            to_b.extend(a.handle(&mut la, NOW + 1, &m).send);
        }
    }
    assert_eq!(sent, 700);
    assert_eq!(a.state_digest(), b.state_digest());
    assert_eq!(b.visible("todo").0.len(), 1000);
}
