//! `--postgres`: two relays over one PostgreSQL database serve each other's clients (NOTIFY),
//! and a restarted relay loads everything from it; a relay killed mid-sync while its clients
//! fail over to the other; PostgreSQL itself restarted while clients write. Needs
//! `--features postgres` and `CAIRN_RELAY_POSTGRES_URL` (and `CAIRN_PG_CTL` for the restart);
//! `scripts/relay-postgres-test.sh` provides them with a throwaway cluster on a loopback port,
//! and runs the tests one at a time (one stops the cluster).
#![cfg(feature = "postgres")]

mod common;

use cairn_relay::client::SyncPeer;
use cairn_relay::{Limits, Relay, RelayConfig};
use cairn_sync::{Config, Event, Reason, ScopeId};
use common::*;

use std::process::{Child, Command};
use std::sync::atomic::Ordering::Relaxed;

/// A fresh database `name` on the server of `url`; returns its URL (a later `dbname` wins).
async fn fresh_database(url: &str, name: &str) -> String {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(conn);
    // Two statements: neither may run inside the implicit transaction of a batch.
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await
        .expect("drops the old database");
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("creates the database");
    format!("{url} dbname={name}")
}

/// Starts the relay binary on PostgreSQL; returns it and its WebSocket URL.
fn spawn_pg_relay(url: &str) -> (Child, String) {
    let (child, addr) = spawn_relay_binary(&["--listen", "127.0.0.1:0", "--postgres", url]);
    (child, format!("ws://{addr}/"))
}

fn held(p: &SyncPeer) -> u64 {
    p.replica().version_vector().values().sum()
}

/// Rejections other than replays and gaps (which a reconnect may cause and sync repairs).
fn bad_events(p: &SyncPeer) -> Vec<Event> {
    p.take_events()
        .into_iter()
        .filter(|e| {
            matches!(e, Event::Rejected { reason, .. }
                if !matches!(reason, Reason::Replay | Reason::ChainGap))
        })
        .collect()
}

/// What the database holds, counted three times: the records of its rows (a record stored twice
/// would count twice), a relay that loads it (nothing refused), and a fresh replica of a member
/// that syncs from that relay.
async fn assert_database_holds(url: &str, records: u64, digest: [u8; 32], member: u8) {
    {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        tokio::spawn(conn);
        let rows = client
            .query("SELECT block FROM cairn_relay_blocks", &[])
            .await
            .expect("reads the blocks");
        let stored: usize = rows
            .iter()
            .map(|r| {
                let bytes: Vec<u8> = r.get(0);
                cairn_sync::Block::from_bytes(&bytes)
                    .expect("a stored block decodes")
                    .records
                    .len()
            })
            .sum();
        assert_eq!(stored as u64, records, "records in the database's rows");
    }
    let relay = start_pg(url).await;
    assert_eq!(relay.loaded().records as u64, records, "stored once each");
    assert_eq!(relay.loaded().refused, 0);
    let fresh = peer(member, app(member), &relay.url());
    wait_until("a fresh replica gets everything", || {
        fresh.replica().state_digest() == digest
    })
    .await;
    assert_eq!(held(&fresh), records);
    assert_verified(&[&fresh]);
    fresh.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

async fn start_pg(url: &str) -> Relay {
    Relay::start(RelayConfig {
        listen: "127.0.0.1:0".parse().expect("invariant: valid address"),
        data: Default::default(),
        postgres: Some(url.to_string()),
        limits: Limits::default(),
        auth: None,
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
                "DROP TABLE IF EXISTS cairn_relay_meta, cairn_relay_writers, cairn_relay_blocks, \
                 cairn_relay_users, cairn_relay_purged",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_fail_over_when_a_relay_is_killed_mid_sync() {
    let Ok(base) = std::env::var("CAIRN_RELAY_POSTGRES_URL") else {
        eprintln!("CAIRN_RELAY_POSTGRES_URL is not set: run scripts/relay-postgres-test.sh");
        return;
    };
    let url = fresh_database(&base, "cairn_relay_failover").await;
    let (mut relay_a, a) = spawn_pg_relay(&url);
    let (mut relay_b, b) = spawn_pg_relay(&url);
    let small = Config {
        page_records: 5,
        window_pages: 2,
        ..Config::default()
    };
    // Alice and bob start on relay a, carol and dave on relay b; each knows both.
    let on = |secret: u8, urls: [&String; 2]| {
        SyncPeer::spawn_failover(
            app_with(secret, small.clone()),
            key(secret),
            urls.iter().map(|u| u.to_string()).collect(),
            None,
        )
    };
    let alice = on(1, [&a, &b]);
    let bob = on(2, [&a, &b]);
    let carol = on(3, [&b, &a]);
    let dave = on(4, [&b, &a]);
    let all = [&alice, &bob, &carol, &dave];
    let scope = ScopeId::new(key(1).id(), "todo/list=failover");
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id(), key(4).id()]);
    });
    wait_until("carol, on relay b, may write", || {
        carol.replica().may_write(&key(3).id(), &scope)
    })
    .await;
    for i in 0..60 {
        alice.with(|r| {
            write(r, &scope, i % 13, &format!("alice {i}"));
            r.seal();
        });
        carol.with(|r| {
            write(r, &scope, i % 17, &format!("carol {i}"));
            r.seal();
        });
    }
    wait_until("bob and dave have part of it", || {
        held(&bob) >= 10 && held(&dave) >= 10
    })
    .await;
    relay_a.kill().expect("kill");
    relay_a.wait().expect("reaped");
    // Alice and bob move to relay b; alice's writes meanwhile wait in her replica.
    for i in 60..90 {
        alice.with(|r| write(r, &scope, i % 13, &format!("alice {i}")));
        carol.with(|r| write(r, &scope, i % 17, &format!("carol {i}")));
    }
    wait_until("every replica converges on relay b", || {
        converged(&all) && held(&bob) == 180
    })
    .await;
    assert_verified(&all);
    for p in [&alice, &bob] {
        assert_eq!(p.relay_index(), 1, "moved to relay b");
        assert!(p.connects() >= 2, "reconnected");
    }
    for p in all {
        let bad = bad_events(p);
        assert!(bad.is_empty(), "{bad:?}");
    }
    let digest = alice.replica().state_digest();
    let vv = alice.replica().version_vector();
    for p in [alice, bob, carol, dave] {
        assert_eq!(p.stop().await.version_vector(), vv);
    }
    relay_b.kill().expect("kill");
    relay_b.wait().expect("reaped");
    assert_database_holds(&url, 180, digest, 2).await;
}

/// Runs `$CAIRN_PG_CTL stop|start` (the script's throwaway cluster).
async fn pg_ctl(ctl: &str, what: &'static str) {
    let ctl = ctl.to_string();
    let status = tokio::task::spawn_blocking(move || Command::new(ctl).arg(what).status())
        .await
        .expect("joins")
        .expect("pg-ctl runs");
    assert!(status.success(), "pg-ctl {what}: {status}");
}

/// Starts the cluster again if the test fails while it is stopped, for the tests after it.
struct StartOnDrop(Option<String>);

impl Drop for StartOnDrop {
    fn drop(&mut self) {
        if let Some(ctl) = self.0.take() {
            let _ = Command::new(ctl).arg("start").status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_recover_when_postgres_restarts() {
    let (Ok(base), Ok(ctl)) = (
        std::env::var("CAIRN_RELAY_POSTGRES_URL"),
        std::env::var("CAIRN_PG_CTL"),
    ) else {
        eprintln!("CAIRN_RELAY_POSTGRES_URL or CAIRN_PG_CTL is not set: run scripts/relay-postgres-test.sh");
        return;
    };
    let url = fresh_database(&base, "cairn_relay_restart").await;
    let a = start_pg(&url).await;
    let b = start_pg(&url).await;
    let alice = SyncPeer::spawn_failover(app(1), key(1), vec![a.url(), b.url()], None);
    let bob = SyncPeer::spawn_failover(app(2), key(2), vec![b.url(), a.url()], None);
    let carol = SyncPeer::spawn_failover(app(3), key(3), vec![a.url(), b.url()], None);
    let all = [&alice, &bob, &carol];
    let scope = ScopeId::new(key(1).id(), "todo/list=restart");
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id()]);
    });
    wait_until("bob, on relay b, may write", || {
        bob.replica().may_write(&key(2).id(), &scope)
    })
    .await;
    let mut n = 0;
    let mut round = |alice: &SyncPeer, bob: &SyncPeer, count: i64| {
        for _ in 0..count {
            alice.with(|r| write(r, &scope, n % 11, &format!("alice {n}")));
            bob.with(|r| write(r, &scope, n % 7, &format!("bob {n}")));
            n += 1;
        }
    };
    round(&alice, &bob, 20);
    wait_until("carol has part of it", || held(&carol) >= 10).await;

    pg_ctl(&ctl, "stop").await;
    let mut down = StartOnDrop(Some(ctl.clone()));
    // Written while the database is down: each relay fails to store them and says so.
    round(&alice, &bob, 20);
    wait_until("both relays saw the store fail", || {
        a.metrics().store_errors.load(Relaxed) >= 1 && b.metrics().store_errors.load(Relaxed) >= 1
    })
    .await;
    assert_eq!(a.metrics().store_down.load(Relaxed), 1);
    round(&alice, &bob, 10);
    pg_ctl(&ctl, "start").await;
    down.0 = None;
    round(&alice, &bob, 20);

    wait_until("both relays store again", || {
        a.metrics().store_down.load(Relaxed) == 0 && b.metrics().store_down.load(Relaxed) == 0
    })
    .await;
    wait_until("every replica converges", || {
        converged(&all) && held(&carol) == 140
    })
    .await;
    assert_verified(&all);
    for p in all {
        let bad = bad_events(p);
        assert!(bad.is_empty(), "{bad:?}");
        assert!(
            p.connects() >= 2,
            "closed by the failing relay and reconnected"
        );
    }
    let digest = alice.replica().state_digest();
    for p in [alice, bob, carol] {
        p.stop().await;
    }
    a.shutdown().await.expect("clean shutdown");
    b.shutdown().await.expect("clean shutdown");
    assert_database_holds(&url, 140, digest, 3).await;
}

/// Clients of both relays writing at once: a relay's batches then mix its clients' blocks with
/// the other relay's notifications, and every block must still be stored (and so reach the
/// other relay's clients).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_both_relays_at_once_are_all_stored() {
    let Ok(base) = std::env::var("CAIRN_RELAY_POSTGRES_URL") else {
        eprintln!("CAIRN_RELAY_POSTGRES_URL is not set: run scripts/relay-postgres-test.sh");
        return;
    };
    let url = fresh_database(&base, "cairn_relay_concurrent").await;
    let a = start_pg(&url).await;
    let b = start_pg(&url).await;
    let scope = ScopeId::new(key(1).id(), "todo/list=concurrent");
    let writers: Vec<u8> = (1..=6).collect();
    let peers: Vec<SyncPeer> = writers
        .iter()
        .map(|&s| peer(s, app(s), &if s % 2 == 0 { b.url() } else { a.url() }))
        .collect();
    peers[0].with(|r| {
        r.sign_writers(&scope.name, 1, (2..=6).map(|s| key(s).id()).collect());
    });
    wait_until("every writer may write", || {
        peers
            .iter()
            .zip(&writers)
            .all(|(p, &s)| p.replica().may_write(&key(s).id(), &scope))
    })
    .await;
    for i in 0..50 {
        for p in &peers {
            p.with(|r| {
                write(r, &scope, i % 9, &format!("{i}"));
                r.seal();
            });
        }
        tokio::task::yield_now().await;
    }
    let all: Vec<&SyncPeer> = peers.iter().collect();
    wait_until("every replica converges", || {
        converged(&all) && held(&peers[0]) == 300
    })
    .await;
    assert_verified(&all);
    let digest = peers[0].replica().state_digest();
    for p in peers {
        p.stop().await;
    }
    a.shutdown().await.expect("clean shutdown");
    b.shutdown().await.expect("clean shutdown");
    assert_database_holds(&url, 300, digest, 2).await;
}

/// A device key bound to one app user through one relay is refused to another user through the
/// other relay on the same database: the binding lives in the shared `cairn_relay_users`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_bound_through_one_relay_is_refused_to_another_user_through_the_other() {
    let Ok(base) = std::env::var("CAIRN_RELAY_POSTGRES_URL") else {
        eprintln!("CAIRN_RELAY_POSTGRES_URL is not set: run scripts/relay-postgres-test.sh");
        return;
    };
    let url = fresh_database(&base, "cairn_relay_users").await;
    const SECRET: &[u8] = b"a shared secret of at least 32 bytes";
    let start = || {
        Relay::start(RelayConfig {
            listen: "127.0.0.1:0".parse().expect("invariant: valid address"),
            data: Default::default(),
            postgres: Some(url.clone()),
            limits: Limits::default(),
            auth: Some(cairn_relay::AuthConfig::secret(SECRET).expect("secret")),
        })
    };
    let a = start().await.expect("relay a");
    let b = start().await.expect("relay b");
    let token = |sub: &str| {
        let exp = now() / 1000 + 600;
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &serde_json::json!({ "sub": sub, "exp": exp }),
            &jsonwebtoken::EncodingKey::from_secret(SECRET).expect("secret"),
        )
        .expect("token")
    };
    let code =
        |r: Result<cairn_relay::client::Connection, cairn_relay::client::ConnectError>| match r {
            Ok(_) => "OK".to_string(),
            Err(cairn_relay::client::ConnectError::Refused(r)) => r.code,
            Err(e) => panic!("{e}"),
        };
    let connect = cairn_relay::client::connect;
    assert_eq!(
        code(connect(&a.url(), &key(1), Some(&token("alice"))).await),
        "OK"
    );
    assert_eq!(
        code(connect(&b.url(), &key(1), Some(&token("mallory"))).await),
        "FORBIDDEN"
    );
    assert_eq!(
        code(connect(&b.url(), &key(1), Some(&token("alice"))).await),
        "OK"
    );
    a.shutdown().await.expect("clean shutdown");
    b.shutdown().await.expect("clean shutdown");
}
