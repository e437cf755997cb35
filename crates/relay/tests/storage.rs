//! The relay serves from its store: after a restart it holds each chain's head and reads the
//! blocks when a client needs them (docs/relay.md sec. 6); a stored block that does not decode
//! is a `CORRUPT` store failure, never a panic nor a block served.

mod common;

use cairn_relay::{Limits, Relay};
use cairn_store::{Db, Durability, Options, StdFile};
use cairn_sync::{Config, ScopeId};
use common::*;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

/// Alice writes `n` records in blocks of 5 to a scope bob may read; bob syncs; the relay stops.
async fn history(dir: &Path, n: i64) -> cairn_sync::Replica {
    let relay = start_relay(dir, Limits::default()).await;
    let scope = ScopeId::new(key(1).id(), "todo/list=long");
    let mut a = app_with(
        1,
        Config {
            page_records: 20,
            ..Config::default()
        },
    );
    a.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id()]);
    for i in 0..n {
        write(&mut a, &scope, i % 13, &format!("v{i}"));
        if i % 5 == 4 {
            a.seal();
        }
    }
    let alice = peer(1, a, &relay.url());
    let bob = peer(2, app(2), &relay.url());
    wait_until("bob syncs", || converged(&[&alice, &bob])).await;
    bob.stop().await;
    let a = alice.stop().await;
    relay.shutdown().await.expect("clean shutdown");
    a
}

fn open_file(dir: &Path) -> Db<StdFile> {
    let path = dir.join(cairn_relay::store::FILE_NAME);
    let opts = Options {
        durability: Durability::Full,
        ..Options::default()
    };
    Db::open(StdFile::open(&path, false).expect("file"), opts).expect("opens")
}

/// Replaces the value of the `nth` entry of the blocks tree (counting from the end with a
/// negative `nth`) with bytes that do not decode as a block.
fn damage_block(dir: &Path, nth: isize) {
    let db = open_file(dir);
    let keys: Vec<Vec<u8>> = {
        let r = db.begin_read().expect("read");
        let t = r.open_tree("blocks").expect("blocks tree");
        let mut range = r
            .range(
                t,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )
            .expect("range");
        let mut keys = Vec::new();
        while range.next().expect("next") {
            keys.push(range.entry().expect("entry").0.to_vec());
        }
        keys
    };
    let i = if nth < 0 {
        keys.len() as isize + nth
    } else {
        nth
    } as usize;
    let mut tx = db.begin_write().expect("write");
    let t = tx.open_tree("blocks").expect("blocks tree");
    tx.insert(t, &keys[i], b"\x01\x02 not a block")
        .expect("insert");
    tx.commit().expect("commit");
    db.close().expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_relay_loads_heads_only_and_reads_history_from_its_file() {
    let dir = temp_dir("heads");
    let a = history(&dir, 200).await;

    let relay = start_relay(
        &dir,
        Limits {
            block_cache: 8 * 1024,
            ..Limits::default()
        },
    )
    .await;
    // One block read per chain at start (alice's 40 blocks stay on disk), 200 records held.
    assert_eq!(relay.loaded().blocks, 1);
    assert_eq!(relay.loaded().records, 200);
    assert_eq!(relay.metrics().blocks_read.load(Relaxed), 0);
    // Carol, new and empty (she asks for a snapshot), gets the whole history as blocks read
    // back from the file, verified on her side as any blocks.
    let mut c = app(3);
    c.config_mut().snapshot_when_empty = true;
    let carol = peer(3, c, &relay.url());
    wait_until("carol has alice's records", || {
        carol.replica().state_digest() == a.state_digest()
    })
    .await;
    assert_eq!(carol.replica().version_vector(), a.version_vector());
    assert_verified(&[&carol]);
    assert!(carol.refusals().is_empty());
    assert!(relay.metrics().blocks_read.load(Relaxed) >= 40);
    assert!(relay.metrics().block_cache_bytes.load(Relaxed) <= 8 * 1024);
    carol.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_block_that_does_not_decode_is_corrupt() {
    // A damaged head: the relay refuses to start, with CORRUPT.
    let dir = temp_dir("corrupt-head");
    history(&dir, 20).await;
    damage_block(&dir, -1);
    let err = Relay::start(cairn_relay::RelayConfig {
        listen: "127.0.0.1:0".parse().expect("invariant: valid address"),
        data: dir.clone(),
        postgres: None,
        limits: Limits::default(),
        auth: None,
    })
    .await
    .err()
    .expect("a relay over a damaged head does not start");
    assert_eq!(err.code(), "CORRUPT", "{err}");

    // A damaged block in the middle: found when a client needs it. The client is told
    // (INTERNAL, fatal), nothing of it is served, and the relay on its file stops.
    let dir = temp_dir("corrupt-middle");
    history(&dir, 20).await;
    damage_block(&dir, 1);
    let relay = start_relay(&dir, Limits::default()).await;
    let carol = peer(3, app(3), &relay.url());
    wait_until("carol is told", || !carol.refusals().is_empty()).await;
    let r = &carol.refusals()[0];
    assert_eq!((r.code.as_str(), r.fatal), ("INTERNAL", true), "{r:?}");
    assert!(r.message.contains("CORRUPT"), "{r:?}");
    let held = carol.replica().version_vector();
    assert!(
        held.values().all(|&seq| seq < 6),
        "nothing past the damaged block: {held:?}"
    );
    carol.stop().await;
    let _ = relay.shutdown().await;
}

/// Every sync frame a new member gets from the relay until it holds `records` records of
/// `chain`, concatenated.
async fn served(url: &str, member: u8, chain: &cairn_sync::ChainKey, records: u64) -> Vec<u8> {
    use cairn_relay::client::{self, Incoming};
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message as Ws;
    let mut conn = client::connect(url, &key(member), None)
        .await
        .expect("connects");
    let mut r = app(member);
    let mut link = cairn_sync::Link::new();
    let hello = r.open_link(&mut link, now());
    conn.socket
        .send(Ws::Binary(hello.into()))
        .await
        .expect("send");
    let mut all = Vec::new();
    let give_up = tokio::time::Instant::now() + DEADLINE;
    while r.version_vector().get(chain).copied().unwrap_or(0) < records {
        let m = tokio::time::timeout_at(give_up, client::recv(&mut conn.socket))
            .await
            .expect("served in time");
        let Incoming::Sync(bytes) = m else {
            panic!("unexpected {m:?}");
        };
        all.extend_from_slice(&bytes);
        for out in r.handle(&mut link, now(), &bytes).send {
            conn.socket
                .send(Ws::Binary(out.into()))
                .await
                .expect("send");
        }
    }
    assert!(r.verify().is_empty());
    all
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_values_are_not_served_from_the_store() {
    let dir = temp_dir("purge");
    let relay = start_relay(&dir, Limits::default()).await;
    let scope = ScopeId::new(key(1).id(), "todo/list=purge");
    let chain = (key(1).id(), scope.clone());
    let alice = peer(1, app(1), &relay.url());
    let bob = peer(2, app(2), &relay.url());
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id()]);
        write(r, &scope, 1, "the secret value");
        write(r, &scope, 2, "a kept value");
    });
    wait_until("bob syncs", || converged(&[&alice, &bob])).await;
    alice.with(|r| {
        r.purge(now(), &scope, "todo", vec![cairn_sync::Value::Integer(1)])
            .expect("purge")
    });
    wait_until("bob gets the purge", || converged(&[&alice, &bob])).await;
    bob.stop().await;
    alice.stop().await;

    // Carol joins later and reads the history from the store: the purged value is not in any
    // frame (its op travels redacted, and still verifies); the others are.
    let frames = served(&relay.url(), 3, &chain, 3).await;
    assert!(contains(&frames, b"a kept value"));
    assert!(!contains(&frames, b"the secret value"));
    // After a restart too: the purged rows are kept in the store.
    relay.shutdown().await.expect("clean shutdown");
    let relay = start_relay(&dir, Limits::default()).await;
    let frames = served(&relay.url(), 3, &chain, 3).await;
    assert!(contains(&frames, b"a kept value"));
    assert!(!contains(&frames, b"the secret value"));
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_below_the_head_is_caught_against_the_stored_history() {
    use cairn_relay::client::{self, Incoming};
    use cairn_sync::Message;
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message as Ws;
    let dir = temp_dir("fork-stored");
    history(&dir, 20).await;
    let relay = start_relay(&dir, Limits::default()).await;
    // A clone of alice's device (her key, none of her history) signs another record 1 in the
    // same scope and sends it: the relay holds only the head (20), and reads record 1 back
    // from its file to compare.
    let scope = ScopeId::new(key(1).id(), "todo/list=long");
    let mut clone = app(1);
    write(&mut clone, &scope, 1, "another branch");
    clone.seal();
    let branch = clone
        .chain(&(key(1).id(), scope.clone()))
        .expect("written")
        .blocks
        .clone();
    let mut conn = client::connect(&relay.url(), &key(1), None)
        .await
        .expect("connects");
    let mut link = cairn_sync::Link::new();
    let hello = clone.open_link(&mut link, now());
    conn.socket
        .send(Ws::Binary(hello.into()))
        .await
        .expect("send");
    let page = Message::Blocks(branch).encode();
    conn.socket
        .send(Ws::Binary(page.into()))
        .await
        .expect("send");
    let code = loop {
        match client::recv(&mut conn.socket).await {
            Incoming::Sync(bytes) => {
                if let Ok(Message::Reject {
                    code, first_seq: 1, ..
                }) = Message::decode(&bytes)
                {
                    break code;
                }
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(code, "FORK");
    assert!(relay.metrics().verification_failures.load(Relaxed) >= 1);
    relay.shutdown().await.expect("clean shutdown");
}
