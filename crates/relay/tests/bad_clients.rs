//! Clients that break the rules — no AUTH, a wrong signature, a forged HELLO, an oversized
//! frame, malformed frames, a flood of writes — each refused with its stable code, while two
//! honest clients keep syncing through the same relay. Then `/health` and `/metrics` show it.

mod common;

use cairn_relay::client::{self, Incoming, Socket};
use cairn_relay::frame::auth_message;
use cairn_relay::{Frame, Limits, Refusal};
use cairn_sync::{Message, ScopeId, Subscription};
use common::*;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message as Ws;

const MAX_MESSAGE: usize = 64 * 1024;

async fn send(s: &mut Socket, bytes: Vec<u8>) {
    s.send(Ws::Binary(bytes.into())).await.expect("send");
}

/// The next refusal on the socket, skipping sync messages.
async fn refusal(s: &mut Socket) -> Option<Refusal> {
    loop {
        match client::recv(s).await {
            Incoming::Refusal(r) => return Some(r),
            Incoming::Sync(_) => continue,
            Incoming::Closed => return None,
        }
    }
}

fn hello(secret: u8) -> Vec<u8> {
    Message::Hello {
        replica: key(secret).id(),
        device: None,
        wants_snapshot: false,
        want: Subscription::All,
        have: Default::default(),
    }
    .encode()
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_clients_are_refused_with_their_reason_while_honest_ones_sync() {
    let dir = temp_dir("bad");
    let relay = start_relay(
        &dir,
        Limits {
            max_message: MAX_MESSAGE,
            write_rate: 20,
            ..Limits::default()
        },
    )
    .await;
    let url = relay.url();
    let scope = ScopeId::new(key(1).id(), "todo/list=honest");
    let alice = peer(1, app(1), &url);
    let bob = peer(2, app(2), &url);
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id()]);
        write(r, &scope, 1, "before the attacks");
    });
    wait_until("bob syncs", || converged(&[&alice, &bob])).await;

    // 1. No AUTH: a sync message is refused, the connection stays and can still authenticate.
    let mut s = client::open(&url).await.expect("open");
    let (nonce, relay_id, max) = client::challenge(&mut s).await.expect("challenge");
    assert_eq!(relay_id, relay.id());
    assert_eq!(max as usize, MAX_MESSAGE);
    send(&mut s, hello(5)).await;
    let r = refusal(&mut s).await.expect("refused, not closed");
    assert_eq!((r.code.as_str(), r.fatal), ("AUTH_REQUIRED", false));

    // 2. A wrong signature (over another nonce), then the right one on the same connection.
    let mallory = key(5);
    let wrong = mallory.sign(&auth_message(&[0; 32], &relay_id));
    send(
        &mut s,
        Frame::Auth {
            key: mallory.id(),
            sig: wrong,
        }
        .encode(),
    )
    .await;
    let r = refusal(&mut s).await.expect("refused, not closed");
    assert_eq!((r.code.as_str(), r.fatal), ("BAD_SIGNATURE", false));
    let right = mallory.sign(&auth_message(&nonce, &relay_id));
    send(
        &mut s,
        Frame::Auth {
            key: mallory.id(),
            sig: right,
        }
        .encode(),
    )
    .await;
    match s.next().await {
        Some(Ok(Ws::Binary(b))) => {
            assert_eq!(Frame::decode(&b), Ok(Frame::Welcome { key: mallory.id() }))
        }
        other => panic!("expected WELCOME, got {other:?}"),
    }

    // 3. Oversized and malformed frames: refused, the connection goes on.
    send(&mut s, vec![b'C'; MAX_MESSAGE + 1]).await;
    let r = refusal(&mut s).await.expect("refused, not closed");
    assert_eq!((r.code.as_str(), r.fatal), ("TOO_LARGE", false));
    s.send(Ws::Text("hello".into())).await.expect("send");
    assert_eq!(refusal(&mut s).await.expect("open").code, "MALFORMED");
    send(&mut s, b"XYZ".to_vec()).await;
    assert_eq!(refusal(&mut s).await.expect("open").code, "MALFORMED");
    send(&mut s, b"CS\x01\x03\xff\xff".to_vec()).await;
    assert_eq!(refusal(&mut s).await.expect("open").code, "MALFORMED");

    // 4. A HELLO naming someone else's key (to read alice's scopes): fatal.
    send(&mut s, hello(1)).await;
    let r = refusal(&mut s).await.expect("refused before closing");
    assert_eq!((r.code.as_str(), r.fatal), ("FORBIDDEN", true));
    assert_eq!(refusal(&mut s).await, None, "closed after a fatal refusal");

    // 5. Garbage before AUTH, again and again: cut off after 8 refusals.
    let mut s = client::open(&url).await.expect("open");
    client::challenge(&mut s).await.expect("challenge");
    let mut codes = Vec::new();
    for _ in 0..8 {
        send(&mut s, b"garbage".to_vec()).await;
    }
    while let Some(r) = refusal(&mut s).await {
        codes.push((r.code, r.fatal));
    }
    assert_eq!(codes.len(), 8, "{codes:?}");
    assert!(codes[..7]
        .iter()
        .all(|c| *c == ("MALFORMED".to_string(), false)));
    assert_eq!(codes[7], ("TOO_MANY_ERRORS".to_string(), true));

    // 6. A flood: big BLOCKS messages again and again. The first passes (the bucket may go
    //    into debt once), the rest are dropped with RATE_LIMITED until the relay gives up.
    let mut flooder = app(6);
    let own = ScopeId::new(flooder.id(), "todo/flood");
    for i in 0..1000 {
        write(&mut flooder, &own, i, "x");
    }
    flooder.seal();
    let block = flooder
        .chain(&(flooder.id(), own.clone()))
        .expect("written")
        .blocks[0]
        .clone();
    let page = Message::Blocks(vec![block]).encode();
    assert!(page.len() < MAX_MESSAGE);
    let mut conn = client::connect(&url, &key(6), None)
        .await
        .expect("flooder authenticates");
    send(&mut conn.socket, hello(6)).await;
    for _ in 0..40 {
        if conn
            .socket
            .send(Ws::Binary(page.clone().into()))
            .await
            .is_err()
        {
            break;
        }
    }
    let mut codes = Vec::new();
    while let Some(r) = refusal(&mut conn.socket).await {
        codes.push((r.code, r.fatal, r.retry_after_ms));
    }
    assert!(
        codes.iter().all(|(c, _, _)| c == "RATE_LIMITED"),
        "{codes:?}"
    );
    assert!(codes.iter().any(|(_, fatal, retry)| !fatal && *retry > 0));
    assert!(
        codes.last().is_some_and(|(_, fatal, _)| *fatal),
        "{codes:?}"
    );

    // The honest clients were served all along.
    alice.with(|r| write(r, &scope, 2, "after the attacks"));
    bob.with(|r| write(r, &scope, 3, "bob too"));
    wait_until("alice and bob still converge", || {
        converged(&[&alice, &bob])
    })
    .await;
    assert_verified(&[&alice, &bob]);
    assert!(alice.refusals().is_empty() && bob.refusals().is_empty());

    // What the operator sees.
    let health = http_get(relay.local_addr(), "/health").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains(&cairn_relay::frame::hex(&relay.id().0)));
    let metrics = http_get(relay.local_addr(), "/metrics").await;
    for code in [
        "AUTH_REQUIRED",
        "BAD_SIGNATURE",
        "TOO_LARGE",
        "FORBIDDEN",
        "RATE_LIMITED",
    ] {
        let line = format!("cairn_relay_refusals_total{{code=\"{code}\"}} ");
        let n: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {code} counter in {metrics}"));
        assert!(n >= 1, "{code}: {n}");
    }
    assert!(metrics.contains("cairn_relay_connections 2\n"), "{metrics}");
    assert!(http_get(relay.local_addr(), "/nope")
        .await
        .starts_with("HTTP/1.1 404"));

    alice.stop().await;
    bob.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_answers_the_challenge_is_cut_off() {
    let dir = temp_dir("silent");
    let relay = start_relay(
        &dir,
        Limits {
            auth_timeout: std::time::Duration::from_millis(200),
            ..Limits::default()
        },
    )
    .await;
    let mut s = client::open(&relay.url()).await.expect("open");
    client::challenge(&mut s).await.expect("challenge");
    let r = refusal(&mut s).await.expect("told why before the close");
    assert_eq!((r.code.as_str(), r.fatal), ("AUTH_REQUIRED", true));
    assert_eq!(refusal(&mut s).await, None);
    relay.shutdown().await.expect("clean shutdown");
}

/// Reads `/metrics` and returns the count of refusals with `code`.
async fn refusals_of(addr: std::net::SocketAddr, code: &str) -> u64 {
    let line = format!("cairn_relay_refusals_total{{code=\"{code}\"}} ");
    http_get(addr, "/metrics")
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_while_others_sync() {
    let dir = temp_dir("slow");
    let relay = start_relay(
        &dir,
        Limits {
            max_pending: 6,
            ..Limits::default()
        },
    )
    .await;
    let url = relay.url();
    let scope = ScopeId::new(key(1).id(), "todo/list=big");
    // Small pages on alice's side keep her frames far under the message limit.
    let alice = peer(
        1,
        app_with(
            1,
            cairn_sync::Config {
                page_records: 50,
                ..cairn_sync::Config::default()
            },
        ),
        &url,
    );
    let bob = peer(2, app(2), &url);
    let title = "x".repeat(1500);
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id(), key(3).id()]);
        for id in 0..3000 {
            write(r, &scope, id, &title);
        }
    });
    wait_until("bob syncs 3,000 records", || converged(&[&alice, &bob])).await;

    // Carol, a member of the scope, authenticates, says HELLO, then never reads. A small receive
    // buffer and megabyte pages fill the sockets at once; the relay's retransmits then pile up
    // in her queue until it passes `max_pending`.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let tcp = socket.connect(relay.local_addr()).await.expect("connect");
    let (mut s, _) = tokio_tungstenite::client_async(
        url.as_str(),
        tokio_tungstenite::MaybeTlsStream::Plain(tcp),
    )
    .await
    .expect("websocket handshake");
    let (nonce, relay_id, _) = client::challenge(&mut s).await.expect("challenge");
    let carol = key(3);
    let sig = carol.sign(&auth_message(&nonce, &relay_id));
    send(
        &mut s,
        Frame::Auth {
            key: carol.id(),
            sig,
        }
        .encode(),
    )
    .await;
    match s.next().await {
        Some(Ok(Ws::Binary(b))) => {
            assert_eq!(Frame::decode(&b), Ok(Frame::Welcome { key: carol.id() }))
        }
        other => panic!("expected WELCOME, got {other:?}"),
    }
    assert_eq!(refusals_of(relay.local_addr(), "TOO_SLOW").await, 0);
    send(&mut s, hello(3)).await;

    let addr = relay.local_addr();
    let give_up = tokio::time::Instant::now() + DEADLINE;
    while refusals_of(addr, "TOO_SLOW").await == 0 {
        assert!(
            tokio::time::Instant::now() < give_up,
            "the relay never cut off a client that does not read"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // The relay goes on serving the others.
    alice.with(|r| write(r, &scope, 5000, "after the slow client"));
    wait_until("bob syncs after the cut", || converged(&[&alice, &bob])).await;
    assert!(bob.with(|r| r.state_digest() == alice.replica().state_digest()));

    // Carol reads again: what was on the wire, then why she was cut off, then the close.
    let mut pages = 0;
    let refusal = loop {
        match client::recv(&mut s).await {
            Incoming::Sync(_) => pages += 1,
            Incoming::Refusal(r) => break Some(r),
            Incoming::Closed => break None,
        }
    };
    let r = refusal.expect("told why before the close");
    assert_eq!((r.code.as_str(), r.fatal), ("TOO_SLOW", true));
    assert!(pages >= 1, "the pages already on the wire arrive whole");
    assert!(matches!(client::recv(&mut s).await, Incoming::Closed));
    assert_eq!(refusals_of(addr, "TOO_SLOW").await, 1);

    alice.stop().await;
    bob.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}

/// Two attacks on trust beside the blocks (docs/sync.md sec. 6 and 8): a client pushes a
/// snapshot nobody asked for (rows rewriting alice's), and a clone of alice's key forks her chain
/// through the relay. The relay takes neither; the honest clients keep their rows and converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsolicited_snapshot_and_a_forked_chain_change_nothing_for_honest_clients() {
    let dir = temp_dir("trust");
    let relay = start_relay(&dir, Limits::default()).await;
    let url = relay.url();
    let scope = ScopeId::new(key(1).id(), "todo/list=trust");
    let alice = peer(1, app(1), &url);
    let bob = peer(2, app(2), &url);
    alice.with(|r| {
        r.sign_writers(&scope.name, 1, vec![key(2).id()]);
        write(r, &scope, 1, "alice's");
    });
    wait_until("bob syncs", || converged(&[&alice, &bob])).await;
    let digest = bob.replica().state_digest();

    // 1. Mallory, authenticated as herself, sends a snapshot of alice's scope: her row at a
    //    version signed by nobody.
    let mut conn = client::connect(&url, &key(5), None)
        .await
        .expect("mallory authenticates");
    send(&mut conn.socket, hello(5)).await;
    let mut row = cairn_sync::RowState::default();
    let planted = cairn_sync::Op::new(
        "todo",
        vec![cairn_sync::Value::Integer(1)],
        cairn_sync::Payload::Set(vec![(0, cairn_sync::Value::Text("planted".into()))]),
    );
    row.apply(
        &planted,
        cairn_sync::Version {
            hlc: u64::MAX >> 1,
            author: key(5).id(),
            seq: 1,
            idx: 0,
        },
    );
    let key_of = cairn_sync::RowKey::new("todo", &scope, &[cairn_sync::Value::Integer(1)]);
    let snapshot = Message::Snapshot {
        id: 1,
        page: 0,
        last: true,
        checkpoints: vec![],
        attestations: vec![],
        rows: vec![(key_of, row)],
    };
    send(&mut conn.socket, snapshot.encode()).await;

    // 2. A clone of alice's key, with a branch of her chain of its own.
    let mut twin = app(1);
    twin.add_writer_list(alice.with(|r| r.writer_lists().next().cloned().expect("listed")))
        .expect("alice's list");
    write(&mut twin, &scope, 1, "the clone's");
    let twin = peer(1, twin, &url);
    let mut seen = Vec::new();
    wait_until("the clone hears of the fork", || {
        seen.extend(twin.take_events());
        seen.iter().any(|e| {
            matches!(e, cairn_sync::Event::PeerRejected { code, .. } if code == "FORK")
                || matches!(e, cairn_sync::Event::Fork { .. })
        })
    })
    .await;

    // The honest clients: the same rows as before, both, and each other's next writes.
    alice.with(|r| write(r, &scope, 2, "after"));
    wait_until("alice and bob converge", || converged(&[&alice, &bob])).await;
    let bob_rows = format!("{:?}", bob.replica().visible("todo").0);
    assert!(
        !bob_rows.contains("planted") && !bob_rows.contains("clone"),
        "{bob_rows}"
    );
    assert_ne!(
        bob.replica().state_digest(),
        digest,
        "alice's next write arrived"
    );
    assert_verified(&[&alice, &bob]);
    twin.stop().await;
    alice.stop().await;
    bob.stop().await;
    relay.shutdown().await.expect("clean shutdown");
}
