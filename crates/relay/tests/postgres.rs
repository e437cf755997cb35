//! `--postgres`: two relays over one PostgreSQL database serve each other's clients (NOTIFY),
//! and a restarted relay loads everything from it. Needs `--features postgres` and
//! `CAIRN_RELAY_POSTGRES_URL`; `scripts/relay-postgres-test.sh` provides both with a throwaway
//! cluster on a loopback port.
#![cfg(feature = "postgres")]

mod common;

use cairn_relay::{Limits, Relay, RelayConfig};
use cairn_sync::ScopeId;
use common::*;

async fn start_pg(url: &str) -> Relay {
    Relay::start(RelayConfig {
        listen: "127.0.0.1:0".parse().expect("invariant: valid address"),
        data: Default::default(),
        postgres: Some(url.to_string()),
        limits: Limits::default(),
    })
    .await
    .expect("relay starts on postgres")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_share_one_database_and_a_restart_loads_it() {
    let Ok(url) = std::env::var("CAIRN_RELAY_POSTGRES_URL") else {
        eprintln!("CAIRN_RELAY_POSTGRES_URL is not set: run scripts/relay-postgres-test.sh");
        return;
    };
    {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        tokio::spawn(conn);
        client
            .batch_execute(
                "DROP TABLE IF EXISTS cairn_relay_meta, cairn_relay_writers, cairn_relay_blocks",
            )
            .await
            .expect("clean slate");
    }
    let a = start_pg(&url).await;
    let b = start_pg(&url).await; // runs the migration again: a no-op
    assert_eq!(
        a.id(),
        b.id(),
        "relays over one database share the identity"
    );

    let scope = ScopeId::new(key(1).id(), "todo/list=shared");
    let alice = peer(1, app(1), &a.url());
    let bob = peer(2, app(2), &b.url());
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id()]);
        for i in 0..20 {
            write(r, &scope, i, "alice via relay a");
        }
    });
    wait_until("bob, on relay b, gets the list", || {
        bob.replica().may_write(&key(2).id(), &scope)
    })
    .await;
    bob.with(|r| {
        for i in 10..30 {
            write(r, &scope, i, "bob via relay b");
        }
    });
    wait_until("alice and bob converge across relays", || {
        converged(&[&alice, &bob])
    })
    .await;
    assert_verified(&[&alice, &bob]);
    let held = alice.replica().version_vector();
    assert_eq!(held.values().sum::<u64>(), 40);
    let digest = alice.replica().state_digest();
    alice.stop().await;
    bob.stop().await;
    a.shutdown().await.expect("clean shutdown");
    b.shutdown().await.expect("clean shutdown");

    let a = start_pg(&url).await;
    assert_eq!(a.loaded().records, 40);
    assert_eq!(a.loaded().refused, 0);
    let carol = peer(3, app(3), &a.url());
    wait_until("carol gets everything from the restarted relay", || {
        carol.replica().state_digest() == digest
    })
    .await;
    assert_eq!(carol.replica().version_vector(), held);
    carol.stop().await;
    a.shutdown().await.expect("clean shutdown");
}
