//! Forks (an author that signed two different records at one place of a chain: a cloned
//! device, a restored backup) are found by every replica that holds one branch, at its next
//! exchange with a replica that holds another, whichever order the branches arrived in and
//! whichever branch is longer, equal lengths included; and every replica ends on the same
//! branch (the one whose record where they part has the lower hash), with the same rows. A
//! peer that only claims another head makes nobody a forker.

mod common;

use cairn_sync::{
    Config, Event, Heads, Identity, Link, Message, Op, Payload, Replica, ScopeId, Subscription,
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

/// `n` sealed records by `r` in its own scope `todo`, each setting `k{i}` to `title`.
fn write(r: &mut Replica, n: usize, title: &str) {
    let scope = ScopeId::new(r.id(), "todo");
    for i in 0..n {
        let op = Op::new(
            "todo",
            vec![text(format!("k{i}"))],
            Payload::Set(vec![(0, text(title))]),
        );
        r.commit(NOW + i as u64, &scope, vec![op])
            .expect("invariant: valid commit");
    }
    r.seal();
}

/// Syncs `x` and `y` over one link each way until neither has anything to send; returns the
/// events each saw.
fn exchange(x: &mut Replica, y: &mut Replica) -> (Vec<Event>, Vec<Event>) {
    exchange_over(x, y, Link::new)
}

/// As [`exchange`], over links that take snapshots from the peer ([`Link::snapshot_source`]),
/// as a replica's own devices and relays are.
fn exchange_snapshots(x: &mut Replica, y: &mut Replica) -> (Vec<Event>, Vec<Event>) {
    exchange_over(x, y, Link::snapshot_source)
}

fn exchange_over(x: &mut Replica, y: &mut Replica, link: fn() -> Link) -> (Vec<Event>, Vec<Event>) {
    let (mut lx, mut ly) = (link(), link());
    let mut to_y = vec![x.open_link(&mut lx, NOW)];
    let mut to_x = vec![y.open_link(&mut ly, NOW)];
    let (mut ex, mut ey) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        if to_x.is_empty() && to_y.is_empty() {
            break;
        }
        let (mut next_x, mut next_y) = (Vec::new(), Vec::new());
        for m in to_y.drain(..) {
            let out = y.handle(&mut ly, NOW, &m);
            next_x.extend(out.send);
            ey.extend(out.events);
        }
        for m in to_x.drain(..) {
            let out = x.handle(&mut lx, NOW, &m);
            next_y.extend(out.send);
            ex.extend(out.events);
        }
        to_x = next_x;
        to_y = next_y;
    }
    assert!(to_x.is_empty() && to_y.is_empty(), "the exchange settles");
    (ex, ey)
}

fn delivered(from: &mut Replica, to: &mut Replica) {
    exchange(from, to);
}

/// Same heads (hashes included) and same rows, and history that verifies.
fn assert_same(rs: &mut [&mut Replica]) {
    let first = (rs[0].heads(), rs[0].state_digest());
    for r in rs.iter_mut() {
        assert_eq!((r.heads(), r.state_digest()), first);
        assert!(r.verify().is_empty(), "{:?}", r.verify());
    }
}

fn saw_fork(events: &[Event], author: &Identity) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::Fork { author: a, .. } if *a == author.id()))
}

#[test]
fn branches_of_equal_length_are_found_by_both_holders() {
    let key = Identity::from_secret([1; 32]);
    let (mut device, mut clone) = (replica(1), replica(1));
    write(&mut device, 2, "from the device");
    write(&mut clone, 2, "from its clone");
    let (mut x, mut y) = (replica(2), replica(3));
    delivered(&mut device, &mut x);
    delivered(&mut clone, &mut y);
    assert!(x.forks().is_empty() && y.forks().is_empty());
    // Same seqs, different hashes: version vectors alone would call them equal.
    assert_eq!(x.version_vector(), y.version_vector());
    let (ex, ey) = exchange(&mut x, &mut y);
    assert!(saw_fork(&ex, &key), "x finds the fork: {ex:?}");
    assert!(saw_fork(&ey, &key), "y finds the fork: {ey:?}");
    assert!(x.forks().contains(&key.id()) && y.forks().contains(&key.id()));
    assert_same(&mut [&mut x, &mut y]);
}

#[test]
fn the_holder_of_either_branch_finds_it_whatever_the_lengths() {
    let key = Identity::from_secret([1; 32]);
    for (long, short) in [(3, 1), (1, 3), (5, 2)] {
        let (mut device, mut clone) = (replica(1), replica(1));
        write(&mut device, long, "from the device");
        write(&mut clone, short, "from its clone");
        let (mut x, mut y) = (replica(2), replica(3));
        delivered(&mut device, &mut x);
        delivered(&mut clone, &mut y);
        let (ex, ey) = exchange(&mut x, &mut y);
        assert!(saw_fork(&ex, &key), "{long} vs {short}: x finds it: {ex:?}");
        assert!(saw_fork(&ey, &key), "{long} vs {short}: y finds it: {ey:?}");
        assert_same(&mut [&mut x, &mut y]);
    }
}

#[test]
fn three_replicas_that_saw_the_branches_in_opposite_orders_end_alike() {
    let key = Identity::from_secret([1; 32]);
    let (mut device, mut clone) = (replica(1), replica(1));
    write(&mut device, 2, "from the device");
    write(&mut clone, 2, "from its clone");
    let (mut x, mut y) = (replica(2), replica(3));
    // x: the device's branch first, then the clone's; y: the other way round.
    delivered(&mut device, &mut x);
    delivered(&mut clone, &mut y);
    let (ex, _) = exchange(&mut clone, &mut x);
    let (ey, _) = exchange(&mut device, &mut y);
    assert!(saw_fork(&ex, &key) && saw_fork(&ey, &key));
    assert_same(&mut [&mut x, &mut y]);
    // z holds the branch that lost, and meets only y: it finds the fork and moves over.
    // (The device and its clone synced with x and y, so they are on the winner now: the
    // losing branch is written again, alike, by a fresh replica of the same key.)
    let (mut fresh_device, mut fresh_clone) = (replica(1), replica(1));
    write(&mut fresh_device, 2, "from the device");
    write(&mut fresh_clone, 2, "from its clone");
    let loser = if x.state_digest() == fresh_device.state_digest() {
        &mut fresh_clone
    } else {
        &mut fresh_device
    };
    let mut z = replica(4);
    delivered(loser, &mut z);
    assert_ne!(z.state_digest(), y.state_digest());
    let (ez, _) = exchange(&mut z, &mut y);
    assert!(saw_fork(&ez, &key), "z finds the fork through y: {ez:?}");
    for r in [&x, &y, &z] {
        assert!(r.forks().contains(&key.id()));
    }
    assert_same(&mut [&mut x, &mut y, &mut z]);
}

#[test]
fn the_winner_is_the_same_whichever_side_holds_it() {
    // Both orders of meeting, and both branches on each side: the rows all end alike, and
    // they are those of one branch, whole.
    for swap in [false, true] {
        let (mut device, mut clone) = (replica(1), replica(1));
        write(&mut device, 3, "from the device");
        write(&mut clone, 3, "from its clone");
        let (mut x, mut y) = (replica(2), replica(3));
        if swap {
            delivered(&mut clone, &mut x);
            delivered(&mut device, &mut y);
        } else {
            delivered(&mut device, &mut x);
            delivered(&mut clone, &mut y);
        }
        exchange(&mut x, &mut y);
        assert_same(&mut [&mut x, &mut y]);
        let winner = [&device, &clone]
            .into_iter()
            .find(|b| b.state_digest() == x.state_digest())
            .expect("the rows are one branch's, whole");
        // The forking devices themselves converge too when they sync.
        let (mut a, mut b) = (replica(1), replica(1));
        write(&mut a, 3, "from the device");
        write(&mut b, 3, "from its clone");
        exchange(&mut a, &mut x);
        exchange(&mut b, &mut x);
        exchange(&mut a, &mut x);
        assert_same(&mut [&mut a, &mut b, &mut x]);
        assert_eq!(a.state_digest(), winner.state_digest());
    }
}

#[test]
fn a_head_claimed_without_records_makes_nobody_a_forker() {
    let key = Identity::from_secret([1; 32]);
    let mut device = replica(1);
    write(&mut device, 3, "from the device");
    let mut x = replica(2);
    delivered(&mut device, &mut x);
    // A peer says it holds the device's chain up to seq 2 with another hash, and has nothing to
    // show for it: x sends it its own records from there, and concludes nothing.
    let mut heads = Heads::new();
    heads.insert((key.id(), ScopeId::new(key.id(), "todo")), (2, [9; 32]));
    let liar = Identity::from_secret([7; 32]);
    let mut link = Link::new();
    x.open_link(&mut link, NOW);
    let hello = Message::Hello {
        replica: liar.id(),
        device: None,
        wants_snapshot: false,
        want: Subscription::All,
        have: heads.clone(),
    };
    let out = x.handle(&mut link, NOW, &hello.encode());
    assert!(out.events.is_empty(), "{:?}", out.events);
    assert!(x.forks().is_empty());
    let blocks: Vec<_> = out
        .send
        .iter()
        .filter_map(|m| match Message::decode(m) {
            Ok(Message::Blocks(b)) => Some(b),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        blocks.first().map(|b| b.first_seq()),
        Some(1),
        "x sends its records from after the last place the peer agreed with it (none: the first)"
    );
    // Said again in an ACK, the same claim is not answered again (no loop of resends).
    let again = x.handle(&mut link, NOW, &Message::Ack(heads).encode());
    assert!(again.events.is_empty() && x.forks().is_empty());
    assert!(again
        .send
        .iter()
        .all(|m| !matches!(Message::decode(m), Ok(Message::Blocks(_)))));
}

#[test]
fn a_chain_a_peer_holds_another_branch_of_is_not_compacted_past_where_they_part() {
    // Two devices on one key share a peer id: what one acknowledges says nothing of the other's
    // branch. A replica that saw a head of another branch keeps the chain from its checkpoint
    // on, though its owner attested it and the peer id acknowledged it all, so that it can still
    // decide the fork when the other branch's records come.
    let key = Identity::from_secret([1; 32]);
    let chain = (key.id(), ScopeId::new(key.id(), "todo"));
    let mut title = 0;
    let (mut device, mut clone) = loop {
        let (mut device, mut clone) = (replica(1), replica(1));
        write(&mut device, 3, "from the device");
        write(&mut clone, 3, &format!("from its clone {title}"));
        let at = |r: &Replica| r.chain(&chain).and_then(|l| l.hash_at(1));
        if at(&clone) < at(&device) {
            break (device, clone);
        }
        title += 1;
    };
    let mut peer = replica(2);
    delivered(&mut device, &mut peer);
    // Only the clone's HELLO reaches the peer: its records are lost on the way.
    let (mut lc, mut lp) = (Link::new(), Link::new());
    let hello = clone.open_link(&mut lc, NOW);
    peer.handle(&mut lp, NOW, &hello);
    // The device, under the same id, acknowledges its branch again and attests it.
    delivered(&mut device, &mut peer);
    device.compact();
    delivered(&mut device, &mut peer);
    assert!(
        peer.attestations().contains_key(&chain.1),
        "the peer holds the owner's attestation"
    );
    assert_eq!(
        peer.compact(),
        0,
        "nothing of the disputed chain is dropped"
    );
    assert_eq!(peer.chain(&chain).map(|l| l.first_held()), Some(1));
    // The clone's records come: the peer decides by the rule every replica applies (the lower
    // hash where the branches part), and ends on the clone's branch with its rows.
    let (_, ep) = exchange(&mut clone, &mut peer);
    assert!(saw_fork(&ep, &key), "{ep:?}");
    assert_eq!(
        peer.chain(&chain).map(|l| l.head()),
        clone.chain(&chain).map(|l| l.head())
    );
    assert_eq!(peer.state_digest(), clone.state_digest());
}

#[test]
fn two_devices_on_one_key_are_counted_apart_for_compaction() {
    // A device and its clone name their devices: the peer counts what each acknowledged
    // apart. The clone met the peer before it wrote, so the peer compacts nothing of the chain
    // it has not acknowledged, though the device acknowledged all of it and its owner (the key)
    // attested it; when the clone's branch comes, the peer still holds where they part and
    // decides by the rule every replica applies.
    let key = Identity::from_secret([1; 32]);
    let chain = (key.id(), ScopeId::new(key.id(), "todo"));
    for named in [true, false] {
        let mut title = 0;
        let (mut device, mut clone) = loop {
            let (mut device, mut clone) = (replica(1), replica(1));
            write(&mut device, 3, "from the device");
            write(&mut clone, 3, &format!("from its clone {title}"));
            let at = |r: &Replica| r.chain(&chain).and_then(|l| l.hash_at(1));
            if at(&clone) < at(&device) {
                break (replica(1), clone);
            }
            title += 1;
        };
        if named {
            device.set_device([1; 16]);
            clone.set_device([2; 16]);
        }
        // The clone meets the peer while it holds nothing of the chain, then goes out of sight.
        let mut peer = replica(2);
        let mut empty = replica(1);
        if named {
            empty.set_device([2; 16]);
        }
        delivered(&mut empty, &mut peer);
        write(&mut device, 3, "from the device");
        delivered(&mut device, &mut peer);
        device.compact();
        delivered(&mut device, &mut peer);
        assert!(peer.attestations().contains_key(&chain.1));
        let dropped = peer.compact();
        if !named {
            // One peer id for both: the device's acknowledgements stand for the clone's.
            assert!(dropped > 0, "without devices the chain is compacted");
            continue;
        }
        assert_eq!(dropped, 0, "the clone has not acknowledged the chain");
        assert_eq!(peer.chain(&chain).map(|l| l.first_held()), Some(1));
        let (_, ep) = exchange(&mut clone, &mut peer);
        assert!(saw_fork(&ep, &key), "{ep:?}");
        assert_eq!(
            peer.chain(&chain).map(|l| l.head()),
            clone.chain(&chain).map(|l| l.head())
        );
        assert_eq!(peer.state_digest(), clone.state_digest());
    }
}

#[test]
fn a_hello_names_its_device_only_when_set() {
    let hello = |device| Message::Hello {
        replica: Identity::from_secret([1; 32]).id(),
        device,
        wants_snapshot: true,
        want: Subscription::All,
        have: Heads::new(),
    };
    let plain = hello(None).encode();
    let named = hello(Some([7; 16])).encode();
    // Magic, version, type, the key: then the flags, bit1 set only when a device follows.
    assert_eq!((plain[36], named[36]), (1, 3));
    assert_eq!(named.len(), plain.len() + 16);
    for (bytes, device) in [(&plain, None), (&named, Some([7; 16]))] {
        match Message::decode(bytes) {
            Ok(Message::Hello {
                device: d,
                wants_snapshot: true,
                ..
            }) => assert_eq!(d, device),
            other => panic!("{other:?}"),
        }
    }
    let mut bad = plain.clone();
    bad[36] = 4;
    assert!(Message::decode(&bad).is_err(), "unknown flags are refused");
}

#[test]
fn a_fork_below_what_the_owner_attested_is_decided_by_the_attested_branch() {
    // The device (the scope's owner) attests its branch and compacts it: it can no longer take
    // it back. Its clone's branch has the lower hash where they part, so the rule of the lower
    // hash alone would put every other replica on the clone's branch and leave the device
    // apart. The owner's attestation is final: three replicas that meet the branches in
    // opposite orders, and the clone itself, all end on the attested branch.
    let key = Identity::from_secret([1; 32]);
    let chain = (key.id(), ScopeId::new(key.id(), "todo"));
    let mut title = 0;
    let (mut device, mut clone) = loop {
        let (mut device, mut clone) = (replica(1), replica(1));
        write(&mut device, 3, "from the device");
        write(&mut clone, 3, &format!("from its clone {title}"));
        let at = |r: &Replica| r.chain(&chain).and_then(|l| l.hash_at(1));
        if at(&clone) < at(&device) {
            break (device, clone);
        }
        title += 1;
    };
    let mut p = replica(5);
    delivered(&mut device, &mut p);
    assert!(
        device.compact() > 0,
        "the device attests and drops its branch"
    );
    delivered(&mut device, &mut p);
    assert!(p.attestations().contains_key(&chain.1));
    let attested = device.chain(&chain).map(|l| l.head());
    let (mut x, mut y, mut z) = (replica(2), replica(3), replica(4));
    // x and z: the clone's branch first (before the clone meets anyone holding the attested
    // branch); then x meets it, and z meets only x.
    delivered(&mut clone, &mut x);
    delivered(&mut clone, &mut z);
    exchange(&mut p, &mut x);
    exchange(&mut p, &mut x);
    // y: the attested branch first, then the clone's.
    delivered(&mut p, &mut y);
    exchange(&mut clone, &mut y);
    exchange(&mut x, &mut z);
    exchange(&mut x, &mut z);
    // The clone gave up its branch when it met y; it meets p too.
    exchange(&mut clone, &mut p);
    exchange(&mut clone, &mut p);
    // Those that held the clone's branch found the fork (y and p may never see it: the clone
    // moved over when it met y).
    for (name, r) in [("x", &x), ("z", &z), ("clone", &clone)] {
        assert!(r.forks().contains(&key.id()), "{name} found the fork");
    }
    for r in [&x, &y, &z, &p, &clone] {
        assert_eq!(r.chain(&chain).map(|l| l.head()), attested);
        assert_eq!(r.state_digest(), device.state_digest());
    }
    assert_same(&mut [&mut x, &mut y, &mut z, &mut p, &mut clone]);
}

#[test]
fn a_branch_kept_aside_is_assembled_whichever_of_its_blocks_came_first() {
    // The owner's device attests its branch (three blocks of one record each); two copies of
    // its key write two other branches. A replica that holds one of those and knows the
    // attestation keeps the start of the other aside (it does not reach the attested head),
    // then meets the attested branch's blocks, in order or in reverse: they are a branch of
    // their own, not pieces of the one kept aside, and the replica takes it.
    let key = Identity::from_secret([1; 32]);
    let chain = (key.id(), ScopeId::new(key.id(), "todo"));
    let (mut device, mut clone, mut other) = (replica(1), replica(1), replica(1));
    for i in 0..3 {
        write(&mut device, 1, &format!("from the device {i}"));
    }
    write(&mut clone, 3, "from a clone");
    write(&mut other, 1, "from another clone");
    let blocks = |r: &Replica| r.chain(&chain).map_or(Vec::new(), |l| l.blocks.clone());
    let (attested_blocks, clone_blocks, other_blocks) =
        (blocks(&device), blocks(&clone), blocks(&other));
    assert_eq!(attested_blocks.len(), 3);
    let mut p = replica(5);
    delivered(&mut device, &mut p);
    assert!(device.compact() > 0, "the device attests its branch");
    let attested = device.chain(&chain).map(|l| l.head());
    let attestation = (device.attestations().get(&chain.1))
        .map(|a| a.newest.clone())
        .expect("the device attested its scope");
    for reverse in [false, true] {
        let mut x = replica(2);
        x.receive_blocks(NOW, clone_blocks.clone());
        let out = x.handle(
            &mut Link::new(),
            NOW,
            &Message::Attest(vec![attestation.clone()]).encode(),
        );
        assert!(x.attestations().contains_key(&chain.1), "{:?}", out.events);
        x.receive_blocks(NOW, other_blocks.clone());
        assert_ne!(x.chain(&chain).map(|l| l.head()), attested);
        let mut pieces = attested_blocks.clone();
        if reverse {
            pieces.reverse();
        }
        for b in pieces {
            x.receive_blocks(NOW, vec![b]);
        }
        assert!(x.forks().contains(&key.id()));
        assert_eq!(
            x.chain(&chain).map(|l| l.head()),
            attested,
            "reverse: {reverse}"
        );
        assert_eq!(
            x.state_digest(),
            device.state_digest(),
            "reverse: {reverse}"
        );
    }
}

/// The owner's key on two devices, each attesting its own branch of the owner's chain; a
/// replica compacted to each device's attestation, so each holds its branch only from its
/// checkpoint on. The device writes `lengths.0` records, the clone `lengths.1`; the pairs of
/// `meetings` (indices into `[device, clone, x, y, z]`) then meet in the order given. Returns
/// the five replicas and the winning device's index.
fn owner_on_two_devices(
    lengths: (usize, usize),
    meetings: &[(usize, usize)],
) -> (Vec<Replica>, usize) {
    let key = Identity::from_secret([1; 32]);
    let scope = ScopeId::new(key.id(), "todo");
    let (mut device, mut clone) = (replica(1), replica(1));
    write(&mut device, lengths.0, "from the device");
    write(&mut clone, lengths.1, "from its clone");
    let (mut x, mut y, z) = (replica(2), replica(3), replica(4));
    // x compacts to the device's attestation, y to the clone's.
    for (d, r) in [(&mut device, &mut x), (&mut clone, &mut y)] {
        exchange_snapshots(d, r);
        assert!(d.compact() > 0, "the device attests and drops its branch");
        exchange_snapshots(d, r);
        assert!(r.compact() > 0, "the replica compacts to that attestation");
    }
    let newest = |r: &Replica| r.attestations().get(&scope).map(|a| a.newest.clone());
    let (a, b) = (
        newest(&device).expect("attested"),
        newest(&clone).expect("attested"),
    );
    assert_ne!(a.heads, b.heads, "two branches attested");
    let winner = if a.newer_than(&b) { 0 } else { 1 };
    let mut rs = vec![device, clone, x, y, z];
    for &(i, j) in meetings {
        let (lo, hi) = (i.min(j), i.max(j));
        let (left, right) = rs.split_at_mut(hi);
        exchange_snapshots(&mut left[lo], &mut right[0]);
    }
    (rs, winner)
}

#[test]
fn an_owner_whose_key_is_cloned_ends_alike_on_every_replica() {
    // x holds the device's branch from its checkpoint, y the clone's (equal lengths, or
    // either the longer); z meets them (and the devices) in one order, then the other. Whichever attestation is the newest, every
    // replica ends on its branch, with its rows, the owner's fork reported by those that
    // compacted to the other.
    let key = Identity::from_secret([1; 32]);
    let chain = (key.id(), ScopeId::new(key.id(), "todo"));
    let orders: [&[(usize, usize)]; 2] = [
        &[
            (2, 4),
            (3, 4),
            (2, 3),
            (0, 4),
            (1, 3),
            (0, 1),
            (2, 4),
            (3, 4),
        ],
        &[
            (3, 4),
            (2, 4),
            (3, 2),
            (1, 4),
            (0, 2),
            (1, 0),
            (3, 4),
            (2, 4),
        ],
    ];
    let cases = [(3, 3), (2, 3), (3, 2)]
        .into_iter()
        .flat_map(|lengths| orders.map(|order| (lengths, order)));
    for (n, (lengths, order)) in cases.enumerate() {
        let (mut rs, winner) = owner_on_two_devices(lengths, order);
        let want = (
            rs[winner].chain(&chain).map(|l| l.head()),
            rs[winner].state_digest(),
        );
        let names = ["device", "clone", "x", "y", "z"];
        for (i, r) in rs.iter().enumerate() {
            assert_eq!(
                (r.chain(&chain).map(|l| l.head()), r.state_digest()),
                want,
                "order {n}: {} ends on the winning branch",
                names[i]
            );
        }
        // With branches of equal length, the replica that compacted to the losing attestation
        // holds another record at the winning checkpoint's seq: it proves the owner's fork. A
        // shorter losing branch is given up for the checkpoint past it, which cannot show
        // where the branches part (docs/sync.md sec. 11).
        let loser_replica = if winner == 0 { 3 } else { 2 };
        if lengths.0 == lengths.1 {
            assert!(
                rs[loser_replica].forks().contains(&key.id()),
                "order {n}: the replica that compacted to the losing attestation reports it"
            );
        }
        let mut refs: Vec<&mut Replica> = rs.iter_mut().collect();
        assert_same(&mut refs);
    }
}
