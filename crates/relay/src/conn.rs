//! One WebSocket connection: the challenge and its answer, then size, rate and key checks on
//! every frame before a sync message reaches the core (docs/relay.md sec. 2-3). Refusals are
//! ERROR frames with stable codes; most leave the connection open, so a client that made one
//! mistake keeps being served.

use crate::auth::User;
use crate::core::{Command, Out, Outbox};
use crate::frame::{auth_message, Code, Frame, Refusal, RELAY_MAGIC, SYNC_MAGIC};
use crate::server::Shared;
use cairn_sync::{AuthorId, Message, ScopeId};
use futures_util::{SinkExt, StreamExt};
use rand_core::RngCore;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::WebSocketStream;

/// Refusals tolerated before authentication.
const MAX_UNAUTH_STRIKES: u32 = 8;
/// BLOCKS messages in a row dropped for the rate before the client is cut off.
const MAX_RATE_STRIKES: u32 = 32;
/// Sync messages of one connection waiting for the core: beyond it the connection stops
/// reading its socket, which slows the client through TCP.
const MAX_WAITING: usize = 8;
/// How long the `TOO_SLOW` refusal waits for room on a client's socket before the close.
const TOO_SLOW_GRACE: Duration = Duration::from_secs(5);

/// Records per second, with one second of burst. A message is let through while the bucket is
/// above zero, even if it is bigger than what is left (the bucket then goes negative): a page
/// larger than the burst still passes, and the average rate holds.
struct Bucket {
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: u32) -> Bucket {
        let rate = f64::from(rate.max(1));
        Bucket {
            tokens: rate,
            rate,
            last: Instant::now(),
        }
    }
    /// Ok, or the milliseconds until a message would pass.
    fn take(&mut self, n: usize) -> Result<(), u32> {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.rate);
        if self.tokens > 0.0 {
            self.tokens -= n as f64;
            Ok(())
        } else {
            Err(((1.0 - self.tokens) / self.rate * 1000.0).ceil() as u32)
        }
    }
}

enum Phase {
    Challenged {
        nonce: [u8; 32],
        strikes: u32,
        /// The user of a valid TOKEN, when the relay requires tokens.
        user: Option<User>,
    },
    Authenticated {
        key: AuthorId,
    },
}

pub async fn serve(ws: WebSocketStream<TcpStream>, shared: Arc<Shared>) {
    let id = shared.next_conn.fetch_add(1, Relaxed);
    let (mut sink, mut stream) = ws.split();
    let (outbox, mut rx) = Outbox::new(shared.limits.max_pending);
    let metrics = shared.metrics.clone();
    let kill = outbox.kill.clone();
    let queued = outbox.queued.clone();
    let writer_metrics = metrics.clone();
    let mut writer = tokio::spawn(async move {
        // Set when the client fell `max_pending` frames behind; the kill may come while a send
        // is blocked on a full socket (the usual case: the client stopped reading), so both
        // waits watch for it.
        let mut too_slow = false;
        loop {
            let item = tokio::select! {
                biased;
                _ = kill.notified() => {
                    too_slow = true;
                    break;
                }
                item = rx.recv() => item,
            };
            let (bytes, last) = match item {
                Some(Out::Frame(b)) => (b, false),
                Some(Out::Close(r)) => (Frame::Error(r).encode(), true),
                None => break,
            };
            // Cancelling a send keeps the frame whole: tungstenite either has not taken it yet
            // or holds all of it in its buffer, which the next send flushes first.
            let sent = tokio::select! {
                biased;
                _ = kill.notified() => {
                    too_slow = true;
                    break;
                }
                r = sink.send(Ws::Binary(bytes.into())) => r.is_ok(),
            };
            queued.fetch_sub(1, Relaxed);
            writer_metrics.frames_out.fetch_add(1, Relaxed);
            if !sent || last {
                break;
            }
        }
        if too_slow {
            // What is still queued is dropped; the refusal follows what is already on the wire,
            // so a client that reads again learns why it was cut off. It gets a few seconds.
            writer_metrics.refused(Code::TooSlow);
            let f = Frame::Error(Refusal::new(
                Code::TooSlow,
                true,
                "too many frames queued: the client does not read",
            ))
            .encode();
            let _ = tokio::time::timeout(TOO_SLOW_GRACE, sink.send(Ws::Binary(f.into()))).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    });

    let mut nonce = [0u8; 32];
    rand_core::OsRng.fill_bytes(&mut nonce);
    outbox.send(Out::Frame(
        Frame::Challenge {
            nonce,
            relay: shared.relay_id,
            max_message: shared.limits.max_message as u32,
        }
        .encode(),
    ));
    let mut phase = Phase::Challenged {
        nonce,
        strikes: 0,
        user: None,
    };
    let deadline = tokio::time::Instant::now() + shared.limits.auth_timeout;
    let mut bucket = Bucket::new(shared.limits.write_rate);
    let mut rate_strikes = 0u32;
    let waiting = Arc::new(Semaphore::new(MAX_WAITING));
    let refuse = |outbox: &Outbox, code: Code, fatal: bool, msg: &str, retry: u32| {
        shared.metrics.refused(code);
        let mut r = Refusal::new(code, fatal, msg);
        r.retry_after_ms = retry;
        outbox.send(if fatal {
            Out::Close(r)
        } else {
            Out::Frame(crate::core::refusal_frame(&r))
        });
    };
    // Counts a refusal before authentication; when it is one too many, tells the client so
    // (fatal TOO_MANY_ERRORS) and returns true: the connection ends.
    let struck_out = |phase: &mut Phase, outbox: &Outbox| -> bool {
        if !strike(phase) {
            return false;
        }
        refuse(
            outbox,
            Code::TooManyErrors,
            true,
            "too many refusals before AUTH",
            0,
        );
        true
    };

    let mut writer_done = false;
    loop {
        let authed = matches!(phase, Phase::Authenticated { .. });
        let next = tokio::select! {
            m = stream.next() => m,
            _ = &mut writer => {
                writer_done = true;
                break;
            }
            _ = tokio::time::sleep_until(deadline), if !authed => {
                refuse(&outbox, Code::AuthRequired, true, &format!("no valid AUTH within {} ms of the challenge", shared.limits.auth_timeout.as_millis()), 0);
                break;
            }
        };
        let bytes = match next {
            Some(Ok(Ws::Binary(b))) => b,
            Some(Ok(Ws::Text(_))) => {
                metrics.frames_in.fetch_add(1, Relaxed);
                if struck_out(&mut phase, &outbox) {
                    break;
                }
                refuse(
                    &outbox,
                    Code::Malformed,
                    false,
                    "text frames are not part of the protocol; send binary",
                    0,
                );
                continue;
            }
            Some(Ok(Ws::Close(_))) | None => break,
            Some(Err(_)) => break,
            Some(Ok(_)) => continue, // ping, pong: tungstenite answers pings itself
        };
        metrics.frames_in.fetch_add(1, Relaxed);
        if bytes.len() > shared.limits.max_message {
            if struck_out(&mut phase, &outbox) {
                break;
            }
            let msg = format!(
                "frame of {} bytes; the limit is {}",
                bytes.len(),
                shared.limits.max_message
            );
            refuse(&outbox, Code::TooLarge, false, &msg, 0);
            continue;
        }
        match (&mut phase, bytes.get(..2)) {
            (
                Phase::Challenged {
                    nonce,
                    strikes,
                    user,
                },
                Some(m),
            ) if m == RELAY_MAGIC => {
                let (code, msg) = match Frame::decode(&bytes) {
                    // A relay that requires no token ignores one: the same client code serves
                    // both kinds of relay.
                    Ok(Frame::Token { .. }) if shared.auth.is_none() => continue,
                    Ok(Frame::Token { token }) if user.is_none() => {
                        let auth = shared.auth.as_ref().expect("invariant: checked above");
                        match auth.check(&token) {
                            Ok(u) => {
                                *user = Some(u);
                                continue;
                            }
                            Err(e) => {
                                refuse(&outbox, e.code, true, &e.message, 0);
                                break;
                            }
                        }
                    }
                    Ok(Frame::Token { .. }) => {
                        (Code::Malformed, "one TOKEN per connection".to_string())
                    }
                    Ok(Frame::Auth { .. }) if shared.auth.is_some() && user.is_none() => {
                        refuse(
                            &outbox,
                            Code::TokenRequired,
                            true,
                            "this relay requires a TOKEN frame before AUTH",
                            0,
                        );
                        break;
                    }
                    Ok(Frame::Auth { key, sig }) => {
                        if key.verify(&auth_message(nonce, &shared.relay_id), &sig) {
                            if user.as_ref().is_some_and(|u| !u.allows(&key)) {
                                refuse(
                                    &outbox,
                                    Code::Forbidden,
                                    true,
                                    "the token's cairn_keys do not include this key",
                                    0,
                                );
                                break;
                            }
                            metrics.connections.fetch_add(1, Relaxed);
                            metrics.connections_total.fetch_add(1, Relaxed);
                            let _ = shared.core.send(Command::Open {
                                id,
                                key,
                                user: user.take().map(|u| u.sub),
                                out: outbox.clone(),
                            });
                            phase = Phase::Authenticated { key };
                            continue;
                        }
                        (Code::BadSignature, "the AUTH signature does not verify over \"cairn-relay auth v1\" || nonce || relay id".to_string())
                    }
                    Ok(_) => (
                        Code::Malformed,
                        "only TOKEN or AUTH is expected from a client now".into(),
                    ),
                    Err(e) => (Code::Malformed, e),
                };
                *strikes += 1;
                if *strikes >= MAX_UNAUTH_STRIKES {
                    refuse(
                        &outbox,
                        Code::TooManyErrors,
                        true,
                        "too many refusals before AUTH",
                        0,
                    );
                    break;
                }
                refuse(&outbox, code, false, &msg, 0);
            }
            (Phase::Challenged { strikes, .. }, _) => {
                *strikes += 1;
                if *strikes >= MAX_UNAUTH_STRIKES {
                    refuse(
                        &outbox,
                        Code::TooManyErrors,
                        true,
                        "too many refusals before AUTH",
                        0,
                    );
                    break;
                }
                let is_sync = bytes.get(..2) == Some(&SYNC_MAGIC[..]);
                if is_sync {
                    refuse(
                        &outbox,
                        Code::AuthRequired,
                        false,
                        "answer the CHALLENGE with AUTH before sync messages",
                        0,
                    );
                } else {
                    refuse(
                        &outbox,
                        Code::Malformed,
                        false,
                        "neither a relay frame (CR) nor a sync message (CS)",
                        0,
                    );
                }
            }
            (Phase::Authenticated { .. }, Some(m)) if m == RELAY_MAGIC => {
                refuse(
                    &outbox,
                    Code::Malformed,
                    false,
                    "already authenticated; only sync messages now",
                    0,
                );
            }
            (Phase::Authenticated { key }, Some(m)) if m == SYNC_MAGIC => {
                let mut scopes: Vec<ScopeId> = Vec::new();
                let records = match Message::decode(&bytes) {
                    Err(e) => {
                        refuse(&outbox, Code::Malformed, false, &e.to_string(), 0);
                        continue;
                    }
                    Ok(Message::Hello { replica, .. }) if replica != *key => {
                        refuse(
                            &outbox,
                            Code::Forbidden,
                            true,
                            "the HELLO names another key than the one authenticated",
                            0,
                        );
                        break;
                    }
                    Ok(Message::Blocks(blocks)) => {
                        scopes.extend(blocks.iter().map(|b| b.scope.clone()));
                        blocks.iter().map(|b| b.record_count()).sum()
                    }
                    Ok(Message::Writers(lists)) => {
                        scopes.extend(lists.into_iter().map(|l| l.scope));
                        0
                    }
                    Ok(Message::Attest(list)) => {
                        scopes.extend(list.into_iter().map(|a| a.scope));
                        0
                    }
                    Ok(_) => 0,
                };
                scopes.sort_unstable();
                scopes.dedup();
                if records > 0 {
                    if let Err(retry) = bucket.take(records) {
                        rate_strikes += 1;
                        if rate_strikes >= MAX_RATE_STRIKES {
                            refuse(
                                &outbox,
                                Code::RateLimited,
                                true,
                                "write rate exceeded again and again",
                                retry,
                            );
                            break;
                        }
                        let msg = format!(
                            "over {} records/s; message dropped, send it again later",
                            shared.limits.write_rate
                        );
                        refuse(&outbox, Code::RateLimited, false, &msg, retry);
                        continue;
                    }
                    rate_strikes = 0;
                }
                let Ok(permit) = waiting.clone().acquire_owned().await else {
                    break;
                };
                if shared
                    .core
                    .send(Command::Message {
                        id,
                        bytes: bytes.into(),
                        scopes,
                        permit,
                    })
                    .is_err()
                {
                    break;
                }
            }
            (Phase::Authenticated { .. }, _) => {
                refuse(
                    &outbox,
                    Code::Malformed,
                    false,
                    "neither a relay frame (CR) nor a sync message (CS)",
                    0,
                );
            }
        }
    }
    if let Phase::Authenticated { .. } = phase {
        metrics.connections.fetch_sub(1, Relaxed);
        let _ = shared.core.send(Command::Close { id });
    }
    drop(outbox);
    // Let the writer send what is queued (a fatal refusal last); it ends when the core has
    // dropped its copy of the outbox too.
    if !writer_done {
        // Keep reading (and dropping) while the writer finishes and the close handshake runs:
        // closing a socket with unread input resets it, and the client would lose the
        // refusal that says why.
        let drain = async {
            while let Some(Ok(m)) = stream.next().await {
                if let Ws::Close(_) = m {
                    break;
                }
            }
        };
        let both = async { tokio::join!(&mut writer, drain) };
        let _ = tokio::time::timeout(Duration::from_secs(2), both).await;
        writer.abort();
    }
}

/// Counts a refusal before authentication; true when the client has had too many.
fn strike(phase: &mut Phase) -> bool {
    match phase {
        Phase::Challenged { strikes, .. } => {
            *strikes += 1;
            *strikes >= MAX_UNAUTH_STRIKES
        }
        Phase::Authenticated { .. } => false,
    }
}
