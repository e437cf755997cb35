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
