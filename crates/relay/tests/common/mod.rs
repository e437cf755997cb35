//! Shared by the relay's tests: a relay on a loopback port over a fresh directory, application
//! replicas with the test schema, and waiting for a condition (with a generous deadline that
//! only turns a hang into a failure; nothing is timed).
#![allow(dead_code)]

use cairn_relay::client::SyncPeer;
use cairn_relay::{Limits, Relay, RelayConfig};
use cairn_sync::{Config, Identity, Replica, ScopeId, TableSchema, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const DEADLINE: Duration = Duration::from_secs(60);

/// A fresh, empty directory under the system's temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cairn-relay-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("invariant: temp dir is writable");
    dir
}

pub async fn start_relay(dir: &std::path::Path, limits: Limits) -> Relay {
    Relay::start(RelayConfig {
        listen: "127.0.0.1:0".parse().expect("invariant: valid address"),
        data: dir.to_path_buf(),
        postgres: None,
        limits,
        auth: None,
    })
    .await
    .expect("relay starts")
}

pub fn key(secret: u8) -> Identity {
    Identity::from_secret([secret; 32])
}

/// An application replica with the `todo` table.
pub fn app(secret: u8) -> Replica {
    app_with(secret, Config::default())
}

pub fn app_with(secret: u8, config: Config) -> Replica {
    let mut r = Replica::in_memory(key(secret), config);
    r.register_table(
        TableSchema::new("todo", 1)
            .lww("title")
            .lww("done")
            .counter("n"),
    )
    .expect("invariant: valid schema");
    r
}

pub fn peer(secret: u8, replica: Replica, url: &str) -> SyncPeer {
    SyncPeer::spawn(replica, key(secret), url.to_string())
}

pub fn now() -> u64 {
    cairn_relay::core::now_ms()
}

/// Sets `todo(id).title` in `scope` and adds 1 to its counter, as one commit.
pub fn write(r: &mut Replica, scope: &ScopeId, id: i64, title: &str) {
    let set = r
        .set_op(
            "todo",
            vec![Value::Integer(id)],
            vec![("title", Value::Text(title.into()))],
        )
        .expect("invariant: valid op");
    let add = r
        .add_op("todo", vec![Value::Integer(id)], "n", 1)
        .expect("invariant: valid op");
    r.commit(now(), scope, vec![set, add]).expect("commit");
}

/// Waits until `cond` holds; panics with `what` after `DEADLINE`.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + DEADLINE;
    while !cond() {
        if tokio::time::Instant::now() > give_up {
            panic!("gave up waiting: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every peer holds the same rows and chains as the first, and its history verifies.
pub fn converged(peers: &[&SyncPeer]) -> bool {
    let first = peers[0].replica();
    let (digest, vv) = (first.state_digest(), first.version_vector());
    drop(first);
    peers.iter().all(|p| {
        let r = p.replica();
        r.state_digest() == digest && r.version_vector() == vv
    })
}

pub fn assert_verified(peers: &[&SyncPeer]) {
    for p in peers {
        let r = p.replica();
        assert!(r.verify().is_empty(), "verify: {:?}", r.verify());
        assert!(r.forks().is_empty());
    }
}

/// Starts the relay binary with `args`; returns it and the address it printed
/// (`listening on ADDR ...`).
pub fn spawn_relay_binary<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-relay"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the relay binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("invariant: piped"))
        .read_line(&mut line)
        .expect("reads the first line");
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}
