//! Native replicas syncing through one relay over real loopback sockets: convergence with two
//! and three replicas, read access by membership, restart from the same directory, a relay
//! killed mid-sync, and connections cut mid-stream.

mod common;

use cairn_relay::Limits;
use cairn_sync::{Config, Message, ScopeId};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_converge_through_a_relay() {
    let dir = temp_dir("two");
    let relay = start_relay(&dir, Limits::default()).await;
    let (a, b) = (app(1), app(2));
    let shared = ScopeId::new(a.id(), "todo/list=home");
    let alice = peer(1, a, &relay.url());
    let bob = peer(2, b, &relay.url());
    let bob_id = bob.replica().id();
    alice.with(|r| {
        r.sign_writers(&shared.name, 1, vec![bob_id]);
        for i in 0..10 {
            write(r, &shared, i, "from alice");
        }
    });
    // Bob may write there once the list has reached him through the relay.
    wait_until("bob receives the writer list", || {
        bob.replica().may_write(&bob_id, &shared)
    })
    .await;
    bob.with(|r| {
        for i in 5..15 {
            write(r, &shared, i, "from bob");
        }
    });
    wait_until("alice and bob converge", || converged(&[&alice, &bob])).await;
    assert_verified(&[&alice, &bob]);
    assert_eq!(alice.replica().version_vector().len(), 2);
    assert!(
        relay
            .metrics()
            .records_in
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 20
    );
    assert!(alice.refusals().is_empty() && bob.refusals().is_empty());
    alice.stop().await;
    bob.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_converge_and_a_stranger_sees_nothing() {
    let dir = temp_dir("three");
    let relay = start_relay(&dir, Limits::default()).await;
    let ids: Vec<_> = (1..=3).map(|s| key(s).id()).collect();
    let peers: Vec<_> = (1..=3u8).map(|s| peer(s, app(s), &relay.url())).collect();
    let stranger = peer(9, app(9), &relay.url());
    // Each owns a scope that lists the other two; each writes in all three.
    let scopes: Vec<ScopeId> = ids
        .iter()
        .map(|id| ScopeId::new(*id, "todo/team"))
        .collect();
    for (i, p) in peers.iter().enumerate() {
        let others: Vec<_> = ids.iter().copied().filter(|k| *k != ids[i]).collect();
        p.with(|r| {
            r.sign_writers(b"todo/team", 1, others);
        });
    }
    wait_until("every member has every list", || {
        peers.iter().zip(&ids).all(|(p, id)| {
            let r = p.replica();
            scopes.iter().all(|s| r.may_write(id, s))
        })
    })
    .await;
    for round in 0..3 {
        for (i, p) in peers.iter().enumerate() {
            p.with(|r| {
                for s in &scopes {
                    write(r, s, round, &format!("round {round} by {i}"));
                }
            });
        }
    }
    // The stranger writes to its own scope: once the relay holds that, it has met the stranger.
    let own = ScopeId::new(key(9).id(), "todo/mine");
    stranger.with(|r| write(r, &own, 1, "mine"));
    let refs: Vec<&_> = peers.iter().collect();
    wait_until("three replicas converge", || {
        converged(&refs) && refs[0].replica().version_vector().len() == 9
    })
    .await;
    assert_verified(&refs);
    wait_until("the relay holds the stranger's record", || {
        relay
            .metrics()
            .chains
            .load(std::sync::atomic::Ordering::Relaxed)
            == 10
    })
    .await;
    // A member of nothing gets nothing but its own.
    let held: Vec<_> = stranger
        .replica()
        .version_vector()
        .into_keys()
        .map(|(_, s)| s)
        .collect();
    assert_eq!(held, vec![own]);
    for p in peers {
        p.stop().await;
    }
    stranger.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_relay_serves_everything_it_stored() {
    let dir = temp_dir("restart");
    let relay = start_relay(&dir, Limits::default()).await;
    let first_id = relay.id();
    let alice = peer(1, app(1), &relay.url());
    let bob = peer(2, app(2), &relay.url());
    let scope = ScopeId::new(key(1).id(), "todo/list=work");
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id()]);
        for i in 0..30 {
            write(r, &scope, i % 7, &format!("v{i}"));
        }
    });
    wait_until("bob has alice's records", || converged(&[&alice, &bob])).await;
    bob.stop().await;
    relay.shutdown().await.expect("clean shutdown");

    let relay = start_relay(&dir, Limits::default()).await;
    assert_eq!(relay.id(), first_id, "the relay keeps its identity");
    let loaded = relay.loaded().clone();
    assert_eq!(loaded.lists, 1);
    assert_eq!(loaded.records, 30);
    assert_eq!(loaded.refused, 0);
    // Carol, new and empty, gets everything from the restarted relay alone: alice is stopped.
    let a = alice.stop().await;
    let carol = peer(3, app(3), &relay.url());
    wait_until("carol has alice's records", || {
        carol.replica().state_digest() == a.state_digest()
    })
    .await;
    assert_eq!(carol.replica().version_vector(), a.version_vector());
    assert_verified(&[&carol]);
    carol.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_page_is_refused_and_a_cut_connection_resumes() {
    let dir = temp_dir("cut");
    let relay = start_relay(&dir, Limits::default()).await;
    let scope = ScopeId::new(key(1).id(), "todo/list=big");
    // Small pages so that the history travels in many of them.
    let small = Config {
        page_records: 5,
        window_pages: 2,
        ..Config::default()
    };
    let mut a = app_with(1, small.clone());
    a.sign_writers(&scope.name, 1, vec![key(2).id()]);
    for i in 0..200 {
        write(&mut a, &scope, i % 50, &format!("v{i}"));
        a.seal(); // one block per record: pages can be cut anywhere
    }

    // A page cut in the middle (what a torn frame would leave) is MALFORMED; nothing of it is
    // applied and the connection stays usable.
    let log = a.chain(&(a.id(), scope.clone())).expect("written").clone();
    let page = Message::Blocks(log.blocks[..5].to_vec()).encode();
    let mut conn = cairn_relay::client::connect(&relay.url(), &key(1), None)
        .await
        .expect("alice authenticates");
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message as Ws;
    let hello = Message::Hello {
        replica: key(1).id(),
        device: None,
        wants_snapshot: false,
        want: cairn_sync::Subscription::All,
        have: Default::default(),
    };
    conn.socket
        .send(Ws::Binary(hello.encode().into()))
        .await
        .expect("send");
    conn.socket
        .send(Ws::Binary(page[..page.len() / 2].to_vec().into()))
        .await
        .expect("send");
    let refusal = loop {
        match cairn_relay::client::recv(&mut conn.socket).await {
            cairn_relay::client::Incoming::Refusal(r) => break r,
            cairn_relay::client::Incoming::Sync(_) => continue,
            cairn_relay::client::Incoming::Closed => panic!("closed"),
        }
    };
    assert_eq!(refusal.code, "MALFORMED");
    assert!(!refusal.fatal);
    conn.socket
        .send(Ws::Binary(page.clone().into()))
        .await
        .expect("send");
    wait_until("the whole page is applied", || {
        relay
            .metrics()
            .records_in
            .load(std::sync::atomic::Ordering::Relaxed)
            == 5
    })
    .await;
    drop(conn);

    // Bob's connection is cut after a few pages, then resumes with a new HELLO.
    let alice = peer(1, a, &relay.url());
    let bob = peer(2, app_with(2, small.clone()), &relay.url());
    wait_until("bob received some pages", || bob.messages_in() >= 6).await;
    let b = bob.stop().await;
    let partial = b.version_vector().values().sum::<u64>();
    let bob = peer(2, b, &relay.url());
    wait_until("bob converges after the cut", || converged(&[&alice, &bob])).await;
    assert_verified(&[&alice, &bob]);
    assert!(
        partial < 200,
        "the cut came before the end ({partial} records)"
    );
    let refused: Vec<_> = bob
        .take_events()
        .into_iter()
        .filter(|e| {
            matches!(e, cairn_sync::Event::Rejected { reason, .. }
            if !matches!(reason, cairn_sync::Reason::Replay | cairn_sync::Reason::ChainGap))
        })
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    alice.stop().await;
    bob.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}
