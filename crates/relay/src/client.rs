//! The Rust client: the relay handshake ([`connect`]), and [`SyncPeer`], a `Replica` kept in
//! sync through a relay by a background task that reconnects when the connection drops (a new
//! HELLO resumes where the version vectors say). Given several relays sharing one store
//! ([`SyncPeer::spawn_failover`]), it moves to the next one each time a connection fails or
//! ends. Tests and the load bench use it; an application with a native replica can too.

use crate::frame::{auth_message, Frame, Refusal, RELAY_MAGIC};
use cairn_sync::{AuthorId, Event, Identity, Link, Replica};
use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What arrives from the relay.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A sync message, for `Replica::handle`.
    Sync(Vec<u8>),
    /// An ERROR frame (or another relay frame, as a `MALFORMED` refusal when unexpected).
    Refusal(Refusal),
    /// The connection is gone.
    Closed,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConnectError {
    /// The socket or the WebSocket handshake failed.
    Io(String),
    /// The relay refused the AUTH, or sent something else than the handshake frames.
    Refused(Refusal),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Io(m) => write!(f, "IO: {m}"),
            ConnectError::Refused(r) => write!(f, "{}: {}", r.code, r.message),
        }
    }
}

/// An authenticated connection.
pub struct Connection {
    pub socket: Socket,
    pub relay: AuthorId,
    pub key: AuthorId,
    pub max_message: u32,
}

/// Opens a WebSocket without authenticating (what a bad client, or a custom handshake, needs).
pub async fn open(url: &str) -> Result<Socket, ConnectError> {
    let (socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .map_err(|e| ConnectError::Io(e.to_string()))?;
    Ok(socket)
}

/// Receives the next frame of a raw socket.
pub async fn recv(socket: &mut Socket) -> Incoming {
    loop {
        match socket.next().await {
            Some(Ok(Ws::Binary(b))) => {
                if b.get(..2) == Some(&RELAY_MAGIC[..]) {
                    return Incoming::Refusal(match Frame::decode(&b) {
                        Ok(Frame::Error(r)) => r,
                        Ok(other) => Refusal::new(
                            crate::Code::Malformed,
                            false,
                            format!("unexpected relay frame {other:?}"),
                        ),
                        Err(e) => Refusal::new(crate::Code::Malformed, false, e),
                    });
                }
                return Incoming::Sync(b.to_vec());
            }
            Some(Ok(Ws::Close(_))) | None | Some(Err(_)) => return Incoming::Closed,
            Some(Ok(_)) => continue,
        }
    }
}

/// Receives the relay's CHALLENGE on a fresh socket: `(nonce, relay id, max_message)`.
pub async fn challenge(socket: &mut Socket) -> Result<([u8; 32], AuthorId, u32), ConnectError> {
    match socket.next().await {
        Some(Ok(Ws::Binary(b))) => match Frame::decode(&b) {
            Ok(Frame::Challenge {
                nonce,
                relay,
                max_message,
            }) => Ok((nonce, relay, max_message)),
            Ok(Frame::Error(r)) => Err(ConnectError::Refused(r)),
            _ => Err(ConnectError::Io(
                "the relay did not send a CHALLENGE".into(),
            )),
        },
        _ => Err(ConnectError::Io("closed before the CHALLENGE".into())),
    }
}

/// Connects and authenticates with `identity` (the replica's own key: the relay checks that its
/// HELLO names the same key). `token` is the app's token for its user (a JWT from the app's
/// server), sent in a TOKEN frame before AUTH; a relay that requires no token ignores it.
pub async fn connect(
    url: &str,
    identity: &Identity,
    token: Option<&str>,
) -> Result<Connection, ConnectError> {
    let mut socket = open(url).await?;
    let (nonce, relay, max_message) = challenge(&mut socket).await?;
    let io = |e: tokio_tungstenite::tungstenite::Error| ConnectError::Io(e.to_string());
    if let Some(token) = token {
        let frame = Frame::Token {
            token: token.to_string(),
        };
        socket
            .send(Ws::Binary(frame.encode().into()))
            .await
            .map_err(io)?;
    }
    let sig = identity.sign(&auth_message(&nonce, &relay));
    let key = identity.id();
    socket
        .send(Ws::Binary(Frame::Auth { key, sig }.encode().into()))
        .await
        .map_err(io)?;
    match socket.next().await {
        Some(Ok(Ws::Binary(b))) => match Frame::decode(&b) {
            Ok(Frame::Welcome { key: k }) if k == key => Ok(Connection {
                socket,
                relay,
                key,
                max_message,
            }),
            Ok(Frame::Error(r)) => Err(ConnectError::Refused(r)),
            _ => Err(ConnectError::Io("the relay did not send WELCOME".into())),
        },
        _ => Err(ConnectError::Io("closed during the handshake".into())),
    }
}

fn now_ms() -> u64 {
    crate::core::now_ms()
}

/// What a `SyncPeer` shares with its task.
struct PeerState {
    replica: Mutex<Replica>,
    refusals: Mutex<Vec<Refusal>>,
    events: Mutex<Vec<Event>>,
    wake: Notify,
    connects: AtomicU64,
    messages_in: AtomicU64,
    /// Index in the URL list of the relay last connected to (or tried).
    relay: AtomicUsize,
    /// The app's token, sent at every connect (`SyncPeer::set_token` renews it).
    token: Mutex<Option<String>>,
}

/// A replica synced through a relay by a background task.
pub struct SyncPeer {
    state: Arc<PeerState>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl SyncPeer {
    /// Starts syncing `replica` through the relay at `url`; `identity` must be the replica's
    /// key (passed separately because the replica keeps its own and does not lend it out).
    pub fn spawn(replica: Replica, identity: Identity, url: String) -> SyncPeer {
        SyncPeer::spawn_failover(replica, identity, vec![url], None)
    }

    /// As [`SyncPeer::spawn`], over several relays that share one store (PostgreSQL): it
    /// connects to the first, and whenever a connection fails or ends, tries the next one in
    /// the list (wrapping around). Every relay holds what any of them acknowledged, so a new
    /// HELLO resumes where the version vectors say, whichever relay answers. `token` is the
    /// app's token for its user, for relays that require one (see [`connect`]).
    ///
    /// # Panics
    /// If `urls` is empty.
    pub fn spawn_failover(
        replica: Replica,
        identity: Identity,
        urls: Vec<String>,
        token: Option<String>,
    ) -> SyncPeer {
        assert!(!urls.is_empty(), "SyncPeer needs at least one relay URL");
        let state = Arc::new(PeerState {
            replica: Mutex::new(replica),
            refusals: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            wake: Notify::new(),
            connects: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            relay: AtomicUsize::new(0),
            token: Mutex::new(token),
        });
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(state.clone(), identity, urls, stop_rx));
        SyncPeer { state, stop, task }
    }

    /// The replica, locked (never across an await: the sync task needs it too).
    pub fn replica(&self) -> MutexGuard<'_, Replica> {
        self.state.replica.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the replica (a local commit), then wakes the task to send it.
    pub fn with<R>(&self, f: impl FnOnce(&mut Replica) -> R) -> R {
        let r = f(&mut self.replica());
        self.state.wake.notify_one();
        r
    }

    pub fn refusals(&self) -> Vec<Refusal> {
        self.state
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Events from `handle` (applied, rejected, forks), taken.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut self.state.events.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the token used from the next connection on (a token about to expire, or one
    /// the relay refused with `TOKEN_EXPIRED`: the task keeps retrying until it gets one).
    pub fn set_token(&self, token: Option<String>) {
        *self.state.token.lock().unwrap_or_else(|e| e.into_inner()) = token;
        self.state.wake.notify_one();
    }

    /// Successful handshakes so far (more than one: it reconnected).
    pub fn connects(&self) -> u64 {
        self.state.connects.load(Relaxed)
    }

    pub fn messages_in(&self) -> u64 {
        self.state.messages_in.load(Relaxed)
    }

    /// The index, in the list given to [`SyncPeer::spawn_failover`], of the relay it is
    /// connected to (or trying).
    pub fn relay_index(&self) -> usize {
        self.state.relay.load(Relaxed)
    }

    /// Stops the task and gives the replica back.
    pub async fn stop(self) -> Replica {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        match Arc::try_unwrap(self.state) {
            Ok(s) => s.replica.into_inner().unwrap_or_else(|e| e.into_inner()),
            Err(_) => panic!("invariant: the task has ended and dropped its state"),
        }
    }
}

async fn run(
    state: Arc<PeerState>,
    identity: Identity,
    urls: Vec<String>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(20);
    let mut at = 0;
    loop {
        if *stop.borrow() {
            return;
        }
        state.relay.store(at, Relaxed);
        let token = state
            .token
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let conn = tokio::select! {
            c = connect(&urls[at], &identity, token.as_deref()) => c,
            _ = stop.changed() => return,
        };
        // A relay that fails or drops the connection: the next one is tried after the pause.
        let wait = match conn {
            Ok(mut conn) => {
                backoff = Duration::from_millis(20);
                state.connects.fetch_add(1, Relaxed);
                match session(&state, &mut conn.socket, &mut stop).await {
                    Ended::Stopped => {
                        let _ = conn.socket.close(None).await;
                        return;
                    }
                    // Honour the relay's hint (its store is down), within reason. With one
                    // relay and no hint, reconnect at once; with several, pause briefly.
                    Ended::Dropped { retry_after_ms } => {
                        let hint = Duration::from_millis(u64::from(retry_after_ms).min(5000));
                        if urls.len() > 1 {
                            hint.max(backoff)
                        } else {
                            hint
                        }
                    }
                }
            }
            Err(e) => {
                if let ConnectError::Refused(r) = e {
                    state
                        .refusals
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(r);
                }
                let wait = backoff;
                backoff = (backoff * 2).min(Duration::from_millis(500));
                wait
            }
        };
        at = (at + 1) % urls.len();
        if !wait.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// How a session ended.
#[derive(Clone, Copy)]
enum Ended {
    Stopped,
    /// The connection broke or the relay closed it (`retry_after_ms` of its fatal refusal).
    Dropped {
        retry_after_ms: u32,
    },
}

/// One connection's life.
async fn session(
    state: &PeerState,
    socket: &mut Socket,
    stop: &mut watch::Receiver<bool>,
) -> Ended {
    let mut link = Link::new();
    let hello = {
        let mut r = state.replica.lock().unwrap_or_else(|e| e.into_inner());
        r.open_link(&mut link, now_ms())
    };
    let dropped = Ended::Dropped { retry_after_ms: 0 };
    if socket.send(Ws::Binary(hello.into())).await.is_err() {
        return dropped;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        let out: Vec<Vec<u8>> = tokio::select! {
            _ = stop.changed() => return Ended::Stopped,
            _ = tick.tick() => {
                let mut r = state.replica.lock().unwrap_or_else(|e| e.into_inner());
                r.poll(&mut link, now_ms())
            }
            _ = state.wake.notified() => {
                let mut r = state.replica.lock().unwrap_or_else(|e| e.into_inner());
                r.poll(&mut link, now_ms())
            }
            m = recv(socket) => match m {
                Incoming::Sync(bytes) => {
                    state.messages_in.fetch_add(1, Relaxed);
                    let out = {
                        let mut r = state.replica.lock().unwrap_or_else(|e| e.into_inner());
                        r.handle(&mut link, now_ms(), &bytes)
                    };
                    state.events.lock().unwrap_or_else(|e| e.into_inner()).extend(out.events);
                    out.send
                }
                Incoming::Refusal(r) => {
                    let (fatal, retry_after_ms) = (r.fatal, r.retry_after_ms);
                    state.refusals.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                    if fatal {
                        return Ended::Dropped { retry_after_ms };
                    }
                    Vec::new()
                }
                Incoming::Closed => return dropped,
            },
        };
        for m in out {
            if socket.send(Ws::Binary(m.into())).await.is_err() {
                return dropped;
            }
        }
    }
}
