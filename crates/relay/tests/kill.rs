//! The relay binary killed (SIGKILL) in the middle of a sync and started again on the same port
//! and directory: clients reconnect and resume, and nothing is lost or stored twice.

mod common;

use cairn_relay::Limits;
use cairn_sync::{Config, ScopeId};
use common::*;

use std::process::Child;

/// Starts the binary; returns it and the address it printed.
fn spawn_relay(listen: &str, dir: &std::path::Path) -> (Child, String) {
    spawn_relay_binary(&[
        std::ffi::OsStr::new("--listen"),
        std::ffi::OsStr::new(listen),
        std::ffi::OsStr::new("--data"),
        dir.as_os_str(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_resume_after_the_relay_is_killed_mid_sync() {
    let dir = temp_dir("kill");
    let (mut child, addr) = spawn_relay("127.0.0.1:0", &dir);
    let url = format!("ws://{addr}/");
    let small = Config {
        page_records: 5,
        window_pages: 2,
        ..Config::default()
    };
    let scope = ScopeId::new(key(1).id(), "todo/list=log");
    let alice = peer(1, app_with(1, small.clone()), &url);
    let bob = peer(2, app_with(2, small.clone()), &url);
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id()]);
    });
    let held =
        |p: &cairn_relay::client::SyncPeer| p.replica().version_vector().values().sum::<u64>();
    for i in 0..60 {
        alice.with(|r| {
            write(r, &scope, i % 13, &format!("v{i}"));
            r.seal();
        });
    }
    wait_until("bob has part of it", || held(&bob) >= 10).await;
    child.kill().expect("kill");
    child.wait().expect("reaped");
    // Writes while the relay is down wait in alice's replica.
    for i in 60..90 {
        alice.with(|r| write(r, &scope, i % 13, &format!("v{i}")));
    }
    let (mut child, _) = spawn_relay(&addr, &dir);
    for i in 90..120 {
        alice.with(|r| write(r, &scope, i % 13, &format!("v{i}")));
    }
    wait_until("alice and bob converge after the restart", || {
        converged(&[&alice, &bob]) && held(&bob) == 120
    })
    .await;
    assert_verified(&[&alice, &bob]);
    assert!(
        alice.connects() >= 2 && bob.connects() >= 2,
        "both reconnected"
    );
    let bad: Vec<_> = bob
        .take_events()
        .into_iter()
        .filter(|e| {
            matches!(e, cairn_sync::Event::Rejected { reason, .. }
            if !matches!(reason, cairn_sync::Reason::Replay | cairn_sync::Reason::ChainGap))
        })
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    alice.stop().await;
    bob.stop().await;
    child.kill().expect("kill");
    child.wait().expect("reaped");

    // The store holds each record once: a relay started on it loads exactly 120.
    let relay = start_relay(&dir, Limits::default()).await;
    assert_eq!(relay.loaded().records, 120);
    assert_eq!(relay.loaded().refused, 0);
    relay.shutdown().await.expect("clean shutdown");
}
