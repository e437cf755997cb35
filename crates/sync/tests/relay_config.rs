//! The two switches a relay sets: `accept_unknown_tables` (it stores and forwards tables it has
//! no schema for) and `serve_members_only` (a peer receives only the scopes its key may write to).

mod common;

use cairn_sync::{
    Config, Event, Identity, Link, Reason, Replica, ScopeFilter, ScopeId, Subscription,
};
use common::{schemas, text};

const NOW: u64 = 1_700_000_000_000;

fn app(secret: u8) -> Replica {
    let mut r = Replica::in_memory(Identity::from_secret([secret; 32]), Config::default());
    for s in schemas() {
        r.register_table(s).expect("invariant: valid schema");
    }
    r
}

fn relay(accept_unknown_tables: bool) -> Replica {
    let config = Config {
        accept_unknown_tables,
        serve_members_only: true,
        report_rows: false,
        ..Config::default()
    };
    Replica::in_memory(Identity::from_secret([99; 32]), config)
}

/// Connects a and b, delivers both ways until quiet; returns every event b saw.
fn sync(a: &mut Replica, b: &mut Replica) -> Vec<Event> {
    let (mut la, mut lb) = (Link::new(), Link::new());
    let mut to_b = vec![a.open_link(&mut la, NOW)];
    let mut to_a = vec![b.open_link(&mut lb, NOW)];
    let mut events = Vec::new();
    for _ in 0..1000 {
        if to_a.is_empty() && to_b.is_empty() {
            to_b = a.poll(&mut la, NOW);
            to_a = b.poll(&mut lb, NOW);
            if to_a.is_empty() && to_b.is_empty() {
                return events;
            }
        }
        for m in std::mem::take(&mut to_b) {
            let out = b.handle(&mut lb, NOW, &m);
            events.extend(out.events);
            to_a.extend(out.send);
        }
        for m in std::mem::take(&mut to_a) {
            to_b.extend(a.handle(&mut la, NOW, &m).send);
        }
    }
    panic!("sync did not settle");
}

fn write(r: &mut Replica, scope: &str, id: i64, title: &str) -> ScopeId {
    let scope = ScopeId::new(r.id(), scope);
    let op = r
        .set_op(
            "todo",
            vec![cairn_sync::Value::Integer(id)],
            vec![("title", text(title))],
        )
        .expect("invariant: valid op");
    r.commit(NOW, &scope, vec![op])
        .expect("invariant: own scope");
    scope
}

#[test]
fn a_relay_without_schemas_accepts_and_forwards_any_table() {
    let mut a = app(1);
    write(&mut a, "todo", 1, "one");
    write(&mut a, "todo", 2, "two");

    // Without the switch, a schema-less replica refuses the blocks.
    let mut strict = relay(false);
    let events = sync(&mut a, &mut strict);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Rejected {
            reason: Reason::UnknownTable,
            ..
        }
    )));
    assert!(strict.version_vector().is_empty());

    let mut r = relay(true);
    let events = sync(&mut a, &mut r);
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Applied { records: 2, .. })));
    assert!(r.verify().is_empty());
    assert_eq!(r.state_digest(), a.state_digest());

    // A replica that does know the schema gets the same rows through the relay.
    let mut b = app(1); // same key as a: a second device of the owner
    sync(&mut r, &mut b);
    assert_eq!(b.state_digest(), a.state_digest());
}

#[test]
fn serve_members_only_sends_a_peer_only_the_scopes_it_may_write() {
    let mut alice = app(1);
    let mut carol = app(3);
    let bob_id = app(2).id();
    let shared = write(&mut alice, "todo/list=shared", 1, "for bob");
    write(&mut alice, "todo/list=private", 2, "alice only");
    write(&mut carol, "todo/list=carol", 3, "carol only");
    alice.sign_writers(b"todo/list=shared", 1, vec![bob_id]);

    let mut r = relay(true);
    sync(&mut alice, &mut r);
    sync(&mut carol, &mut r);
    assert_eq!(r.version_vector().len(), 3);

    // Bob asks for everything; he gets the shared scope (he is listed) and nothing else.
    let mut bob = app(2);
    sync(&mut r, &mut bob);
    let held: Vec<ScopeId> = bob.version_vector().into_keys().map(|(_, s)| s).collect();
    assert_eq!(held, vec![shared.clone()]);
    let only_shared = Subscription::Filters(vec![ScopeFilter {
        owner: Some(alice.id()),
        prefix: shared.name.clone(),
    }]);
    assert_eq!(bob.state_digest(), alice.state_digest_of(&only_shared));

    // Dave is in no list: nothing. Alice (owner) gets her two scopes back, not Carol's.
    let mut dave = app(4);
    sync(&mut r, &mut dave);
    assert!(dave.version_vector().is_empty());
    let mut alice2 = app(1);
    sync(&mut r, &mut alice2);
    assert_eq!(alice2.version_vector().len(), 2);
    assert_eq!(alice2.state_digest(), alice.state_digest());

    // A list that adds Dave later opens the scope to him on the next exchange.
    alice.sign_writers(b"todo/list=shared", 2, vec![bob_id, dave.id()]);
    sync(&mut alice, &mut r);
    sync(&mut r, &mut dave);
    assert_eq!(dave.state_digest(), alice.state_digest_of(&only_shared));
}

#[test]
fn blocks_are_not_echoed_to_the_peer_that_sent_them() {
    let mut a = app(1);
    write(&mut a, "todo", 1, "one");
    let mut r = relay(true);
    let (mut la, mut lr) = (Link::new(), Link::new());
    let hello_a = a.open_link(&mut la, NOW);
    let hello_r = r.open_link(&mut lr, NOW);
    let to_r = a.handle(&mut la, NOW, &hello_r).send;
    r.handle(&mut lr, NOW, &hello_a);
    let mut back = Vec::new();
    for m in to_r {
        back.extend(r.handle(&mut lr, NOW, &m).send);
    }
    back.extend(r.poll(&mut lr, NOW));
    assert_eq!(r.version_vector().len(), 1);
    let types: Vec<u8> = back.iter().map(|m| m[3]).collect();
    assert!(!types.contains(&3), "BLOCKS sent back: {types:?}");
    assert!(types.contains(&4), "an ACK: {types:?}");
}
