//! A snapshot is installed only when the replica asked for it, over a link its host chose to
//! bootstrap from (docs/sync.md sec. 8); its rows must give the digest their scope's owner
//! signed at the heads its checkpoints name, and even then may not carry a clock from the
//! future, a value by an author who may not write the scope, or a value past its chain's head.
//! Anything else is refused whole, with a reason, and nothing of it is applied.

mod common;

use cairn_sync::attest::{rows_digest, Attestation};
use cairn_sync::{
    Config, Event, Identity, Link, Message, Op, Payload, Reason, Replica, ScopeId, Value,
};
use common::{schemas, text};

const NOW: u64 = 1_700_000_000_000;

fn replica(secret: u8, snapshot_when_empty: bool) -> Replica {
    let config = Config {
        snapshot_when_empty,
        ..Config::default()
    };
    let mut r = Replica::in_memory(Identity::from_secret([secret; 32]), config);
    for s in schemas() {
        r.register_table(s).expect("invariant: valid schema");
    }
    r
}

/// A replica that wrote three rows and compacted all of its history (no peer known).
fn compacted() -> Replica {
    let mut a = replica(1, false);
    let scope = ScopeId::new(a.id(), "todo");
    for i in 0..3 {
        let op = Op::new(
            "todo",
            vec![text(format!("k{i}"))],
            Payload::Set(vec![(0, text(format!("title {i}")))]),
        );
        a.commit(NOW + i, &scope, vec![op]).expect("valid");
    }
    a.seal();
    assert_eq!(a.compact(), 3);
    a
}

/// Runs `a` (serving) and `b` (over `lb`) until quiet; returns b's events and every SNAPSHOT
/// message `a` sent.
fn exchange(a: &mut Replica, b: &mut Replica, lb: &mut Link) -> (Vec<Event>, Vec<Vec<u8>>) {
    let mut la = Link::new();
    let mut to_b = vec![a.open_link(&mut la, NOW)];
    let mut to_a = vec![b.open_link(lb, NOW)];
    let (mut events, mut snapshots) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        if to_a.is_empty() && to_b.is_empty() {
            break;
        }
        for m in std::mem::take(&mut to_b) {
            if m[3] == 5 {
                snapshots.push(m.clone());
            }
            let out = b.handle(lb, NOW, &m);
            to_a.extend(out.send);
            events.extend(out.events);
        }
        for m in std::mem::take(&mut to_a) {
            to_b.extend(a.handle(&mut la, NOW, &m).send);
        }
    }
    (events, snapshots)
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

/// The snapshot `a` serves to an empty replica that asks for one.
fn snapshot_of(a: &mut Replica) -> Vec<u8> {
    let mut c = replica(9, true);
    let (events, snapshots) = exchange(a, &mut c, &mut Link::snapshot_source());
    assert_eq!(refusals(&events), vec![]);
    assert_eq!(
        c.state_digest(),
        a.state_digest(),
        "the genuine one installs"
    );
    assert_eq!(snapshots.len(), 1);
    snapshots.into_iter().next().expect("one page")
}

/// Hands `msg` to `b` over `link` after a HELLO from the serving replica; returns b's events,
/// checking that nothing changed when something was refused.
fn offer(b: &mut Replica, link: &mut Link, a: &mut Replica, msg: &[u8]) -> Vec<Event> {
    b.open_link(link, NOW);
    let hello = a.open_link(&mut Link::new(), NOW);
    b.handle(link, NOW, &hello);
    let before = (b.state_digest(), b.version_vector(), b.clock());
    let events = b.handle(link, NOW, msg).events;
    if !refusals(&events).is_empty() {
        assert_eq!(
            (b.state_digest(), b.version_vector(), b.clock()),
            before,
            "a refused snapshot leaves nothing"
        );
    }
    events
}

#[test]
fn an_unsolicited_snapshot_is_refused() {
    let mut a = compacted();
    let page = snapshot_of(&mut a);
    // Over a link the host did not choose to bootstrap from, even by an empty replica that
    // would have asked.
    let mut b = replica(2, true);
    let events = offer(&mut b, &mut Link::new(), &mut a, &page);
    assert_eq!(refusals(&events), vec![Reason::Unsolicited]);
    // Over a chosen link, by a replica that did not ask (it holds what it follows).
    let mut b = replica(2, false);
    let scope = ScopeId::new(b.id(), "todo");
    let op = Op::new("todo", vec![text("mine")], Payload::Delete);
    b.commit(NOW, &scope, vec![op]).expect("valid");
    let events = offer(&mut b, &mut Link::snapshot_source(), &mut a, &page);
    assert_eq!(refusals(&events), vec![Reason::Unsolicited]);
}

#[test]
fn a_replica_behind_a_compaction_asks_its_chosen_peer_and_no_other() {
    let mut a = compacted();
    // Not empty (so it does not ask at HELLO), and behind a's compaction point.
    let mut b = replica(2, false);
    let (events, snapshots) = exchange(&mut a, &mut b, &mut Link::new());
    assert!(snapshots.is_empty(), "nothing is pushed unasked");
    assert!(events.iter().any(
        |e| matches!(e, Event::PeerRejected { code, .. } if code == cairn_sync::link::COMPACTED)
    ));
    assert_ne!(b.state_digest(), a.state_digest());
    let (events, snapshots) = exchange(&mut a, &mut b, &mut Link::snapshot_source());
    assert_eq!(snapshots.len(), 1, "asked for, then sent");
    assert_eq!(refusals(&events), vec![]);
    assert_eq!(b.state_digest(), a.state_digest());
    assert!(b.verify().is_empty());
}

/// The snapshot `page` with its rows changed by `f`; with `owner`, its attestations signed
/// again over the changed rows (a scope's owner lying about its own scope).
fn forged(page: &[u8], owner: Option<&Identity>, f: impl Fn(&mut cairn_sync::RowState)) -> Vec<u8> {
    let Ok(Message::Snapshot {
        id,
        page,
        last,
        checkpoints,
        mut attestations,
        mut rows,
    }) = Message::decode(page)
    else {
        panic!("a snapshot page");
    };
    for (_, row) in rows.iter_mut() {
        f(row);
    }
    if let Some(owner) = owner {
        for a in attestations.iter_mut() {
            let digest = rows_digest(
                rows.iter()
                    .filter(|(k, _)| k.scope == a.scope)
                    .map(|(k, r)| (k, r)),
            );
            *a = Attestation::sign(owner, a.scope.clone(), a.hlc, a.heads.clone(), digest);
        }
    }
    Message::Snapshot {
        id,
        page,
        last,
        checkpoints,
        attestations,
        rows,
    }
    .encode()
}

fn refused_by_empty_asker(a: &mut Replica, page: &[u8]) -> Vec<Reason> {
    let mut b = replica(2, true);
    let mut link = Link::snapshot_source();
    let events = offer(&mut b, &mut link, a, page);
    assert!(b.forks().is_empty());
    refusals(&events)
}

#[test]
fn a_clock_from_the_far_future_is_refused_whole() {
    let mut a = compacted();
    let page = snapshot_of(&mut a);
    // Rows changed by anyone else fail the owner's digest; the owner itself is bounded too.
    let owner = Identity::from_secret([1; 32]);
    let far = forged(&page, Some(&owner), |row| {
        for (_, (v, _)) in row.cells.iter_mut() {
            v.hlc = (u64::MAX >> 16) << 16;
        }
    });
    assert_eq!(
        refused_by_empty_asker(&mut a, &far),
        vec![Reason::ClockSkew]
    );
}

#[test]
fn a_value_no_signed_history_stands_for_is_refused_whole() {
    let mut a = compacted();
    let page = snapshot_of(&mut a);
    // Signed by nobody who may write the scope.
    let stranger = Identity::from_secret([7; 32]).id();
    let owner = Identity::from_secret([1; 32]);
    let foreign = forged(&page, Some(&owner), |row| {
        for (_, (v, value)) in row.cells.iter_mut() {
            v.author = stranger;
            *value = Value::Text("rewritten".into());
        }
    });
    assert_eq!(
        refused_by_empty_asker(&mut a, &foreign),
        vec![Reason::Unauthorized]
    );
    // By the author, at a record its chain's checkpoint does not reach.
    let ahead = forged(&page, Some(&owner), |row| {
        for (_, (v, _)) in row.cells.iter_mut() {
            v.seq = 1000;
        }
    });
    assert_eq!(
        refused_by_empty_asker(&mut a, &ahead),
        vec![Reason::Malformed]
    );
}

#[test]
fn the_genuine_snapshot_after_refusals_still_installs() {
    let mut a = compacted();
    let page = snapshot_of(&mut a);
    let bad = forged(&page, None, |row| {
        for (_, (v, _)) in row.cells.iter_mut() {
            v.seq = 1000;
        }
    });
    let mut b = replica(2, true);
    let mut link = Link::snapshot_source();
    let events = offer(&mut b, &mut link, &mut a, &bad);
    assert_eq!(refusals(&events), vec![Reason::Malformed]);
    // Still asked for: the genuine one goes in.
    let events = b.handle(&mut link, NOW, &page).events;
    assert_eq!(refusals(&events), vec![]);
    assert_eq!(b.state_digest(), a.state_digest());
}

/// A value changed under its genuine version, by the peer sending the snapshot: the rows no
/// longer give the digest the scope's owner signed. Signing the attestation again with another
/// key does not help.
#[test]
fn a_value_changed_by_the_sender_is_refused_whole() {
    let mut a = compacted();
    let page = snapshot_of(&mut a);
    let changed = forged(&page, None, |row| {
        for (_, (_, value)) in row.cells.iter_mut() {
            *value = Value::Text("rewritten".into());
        }
    });
    assert_eq!(
        refused_by_empty_asker(&mut a, &changed),
        vec![Reason::Malformed]
    );
    let sender = Identity::from_secret([5; 32]);
    let resigned = forged(&page, None, |_| {});
    let Ok(Message::Snapshot {
        id,
        page: p,
        last,
        checkpoints,
        mut attestations,
        rows,
    }) = Message::decode(&resigned)
    else {
        panic!("a snapshot page");
    };
    for x in attestations.iter_mut() {
        // The sender's own key over the owner's scope: not the owner's signature.
        let mut y = Attestation::sign(
            &sender,
            ScopeId::new(sender.id(), "todo"),
            x.hlc,
            x.heads.clone(),
            [0; 32],
        );
        y.scope = x.scope.clone();
        *x = y;
    }
    let msg = Message::Snapshot {
        id,
        page: p,
        last,
        checkpoints,
        attestations,
        rows,
    }
    .encode();
    assert_eq!(
        refused_by_empty_asker(&mut a, &msg),
        vec![Reason::BadSignature]
    );
}

/// Every byte of a snapshot page flipped in turn: the page is refused whole, or what it
/// installs is exactly what the source holds (a flip in what no check reads, such as the
/// snapshot's id).
#[test]
fn a_byte_flipped_at_every_offset_of_a_snapshot_page_is_refused_or_harmless() {
    let mut a = compacted();
    let page = snapshot_of(&mut a);
    let heads = a.version_vector();
    let (mut refused, mut installed) = (0, 0);
    for at in 0..page.len() {
        for bit in [0x01u8, 0x80] {
            let mut flipped = page.clone();
            flipped[at] ^= bit;
            let mut b = replica(2, true);
            let events = offer(&mut b, &mut Link::snapshot_source(), &mut a, &flipped);
            if !refusals(&events).is_empty() || b.version_vector().is_empty() {
                refused += 1;
                continue;
            }
            installed += 1;
            assert_eq!(b.version_vector(), heads, "offset {at}: other heads");
            assert_eq!(
                b.state_digest(),
                a.state_digest(),
                "offset {at}: other rows"
            );
        }
    }
    assert!(refused > 0);
    eprintln!(
        "{} flips: {refused} refused, {installed} installed the source's rows",
        2 * page.len()
    );
}

#[test]
fn a_snapshot_takes_the_place_of_a_branch_given_up_below_it() {
    // The receiver holds two records of another branch of the serving replica's chain (a
    // clone of its key wrote them): the snapshot's checkpoint is past them, so they are given
    // up, and what they wrote must go from the rows too, not be joined with the attested ones.
    let mut a = compacted();
    let mut clone = replica(1, false);
    let scope = ScopeId::new(clone.id(), "todo");
    for i in 0..2 {
        let op = Op::new(
            "todo",
            vec![text(format!("k{i}"))],
            Payload::Set(vec![(0, text(format!("from the clone {i}")))]),
        );
        // Later than the owner's records: joined, its values would win.
        clone
            .commit(NOW + 100 + i, &scope, vec![op])
            .expect("valid");
    }
    clone.seal();
    let mut b = replica(2, true);
    exchange(&mut clone, &mut b, &mut Link::new());
    assert_eq!(b.state_digest(), clone.state_digest());
    let (events, snapshots) = exchange(&mut a, &mut b, &mut Link::snapshot_source());
    assert_eq!(
        snapshots.len(),
        1,
        "asked for one after COMPACTED: {events:?}"
    );
    assert_eq!(refusals(&events), vec![]);
    assert_eq!(
        b.state_digest(),
        a.state_digest(),
        "the attested rows, alone"
    );
    assert_eq!(b.heads(), a.heads());
}
