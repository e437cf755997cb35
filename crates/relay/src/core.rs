//! The relay's core: one thread that owns the `Replica` (every chain and writer list, verified),
//! the store, and one `Link` per authenticated connection. Connection tasks hand it sync
//! messages; it runs `Replica::handle`, stores what was accepted, then forwards new blocks by
//! polling every other link. One thread, because the replica is a state machine that must see
//! messages one at a time and the store's handles are single-threaded; the sockets, framing,
//! authentication and limits run on the async runtime around it.

use crate::frame::{Code, Frame, Refusal};
use crate::metrics::Metrics;
use crate::source::{release_stored, RelayReplica, SharedStore};
use cairn_sync::{AuthorId, Event, Link, Reason, ScopeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit};

/// Messages taken from the queue and handled before one store commit (group commit).
const BATCH: usize = 64;
/// While the store is down, the `retry_after_ms` of the `INTERNAL` refusals.
const STORE_RETRY_MS: u32 = 500;

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What goes to a connection's writer.
#[derive(Debug)]
pub enum Out {
    Frame(Vec<u8>),
    /// Send this refusal, then close.
    Close(Refusal),
}

/// The sending side of a connection, shared by its task and the core. `queued` counts frames
/// not yet written to the socket; past `max_pending` the client is not reading, and `kill`
/// tells its writer to give up (`TOO_SLOW`).
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Out>,
    pub queued: Arc<AtomicUsize>,
    pub kill: Arc<Notify>,
    max_pending: usize,
}

impl Outbox {
    pub fn new(max_pending: usize) -> (Outbox, mpsc::UnboundedReceiver<Out>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let outbox = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            kill: Arc::new(Notify::new()),
            max_pending,
        };
        (outbox, rx)
    }

    /// Queues a frame; false if the client is too far behind (it is then being closed) or gone.
    pub fn send(&self, item: Out) -> bool {
        if self.queued.load(Relaxed) >= self.max_pending {
            self.kill.notify_one();
            return false;
        }
        self.queued.fetch_add(1, Relaxed);
        self.tx.send(item).is_ok()
    }
}

pub enum Command {
    /// An authenticated connection: bind its key to the token's user (if tokens are
    /// required), then send WELCOME, make its link and send the relay's HELLO.
    Open {
        id: u64,
        key: AuthorId,
        /// The token's `sub`, when the relay requires tokens.
        user: Option<String>,
        out: Outbox,
    },
    /// A sync message from connection `id` (decoded once already by the connection task, which
    /// checked its size, rate and HELLO key). The permit bounds the messages one connection has
    /// waiting here; it is released when the message has been handled.
    Message {
        id: u64,
        bytes: Vec<u8>,
        /// The scopes of the blocks or writer lists it carries: whose members may get news.
        scopes: Vec<ScopeId>,
        permit: OwnedSemaphorePermit,
    },
    Close {
        id: u64,
    },
    /// Poll every link: resend what went unacknowledged.
    Tick,
    /// Another relay sharing the store committed rows `from..=to` (PostgreSQL NOTIFY).
    Refresh {
        from: i64,
        to: i64,
    },
    Shutdown,
}

struct Conn {
    key: AuthorId,
    link: Link,
    out: Outbox,
}

pub struct Core {
    replica: RelayReplica,
    store: SharedStore,
    conns: HashMap<u64, Conn>,
    metrics: Arc<Metrics>,
    /// A recoverable store failed: connections are refused until it works again.
    store_down: bool,
}

impl Core {
    pub fn new(replica: RelayReplica, store: SharedStore, metrics: Arc<Metrics>) -> Core {
        Core {
            replica,
            store,
            conns: HashMap::new(),
            metrics,
            store_down: false,
        }
    }

    /// Runs until `Shutdown` or until every sender is gone; closes the store on the way out.
    /// A store failure closes every connection with `INTERNAL`: nothing is acknowledged that is
    /// not stored. The file store then stops the relay; a recoverable store (PostgreSQL) is
    /// retried at every batch (a tick is 250 ms) while new connections are refused, and once
    /// it answers, what the replica holds and the store lacks is stored and what other relays
    /// stored meanwhile is read again.
    pub fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) -> crate::Result<()> {
        let mut result = Ok(());
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(c) => batch.push(c),
                    Err(_) => break,
                }
            }
            self.metrics.queue.store(rx.len() as u64, Relaxed);
            match self.handle_batch(batch) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) if self.store.borrow().recoverable() => self.store_failed(&e),
                Err(e) => {
                    for c in self.conns.values() {
                        let refusal = Refusal::new(Code::Internal, true, e.to_string());
                        c.out.send(Out::Close(refusal));
                    }
                    result = Err(e);
                    break;
                }
            }
        }
        // The replica's block source holds the other handle on the store.
        let Core { replica, store, .. } = self;
        drop(replica);
        match std::rc::Rc::try_unwrap(store) {
            Ok(store) => store.into_inner().close()?,
            Err(_) => panic!("invariant: only the core and its replica hold the store"),
        }
        result
    }

    /// A recoverable store failed: close every connection (their clients reconnect and resend
    /// what this relay has not acknowledged) and refuse new ones until it is back.
    fn store_failed(&mut self, e: &crate::Error) {
        eprintln!("cairn-relay: store failed, closing connections and retrying: {e}");
        self.metrics.store_errors.fetch_add(1, Relaxed);
        self.metrics.store_down.store(1, Relaxed);
        self.store_down = true;
        for (_, c) in self.conns.drain() {
            let mut r = Refusal::new(Code::Internal, true, e.to_string());
            r.retry_after_ms = STORE_RETRY_MS;
            self.metrics.refused(Code::Internal);
            c.out.send(Out::Close(r));
        }
    }

    /// Stores what the replica took in while the store was failing (`persist` compares with
    /// what is stored, so nothing is lost or written twice), then reads everything again:
    /// other relays may have stored blocks whose notifications this one missed.
    fn recover(&mut self, now: u64) -> crate::Result<()> {
        let purged = self.store.borrow_mut().persist(&self.replica)?;
        self.replica.rows_mut().source.add_purged(purged);
        let report = self
            .store
            .borrow_mut()
            .refresh(&mut self.replica, now, 1, i64::MAX)?;
        self.replica
            .rows_mut()
            .source
            .add_purged(report.purged.clone());
        release_stored(&mut self.replica, &self.store);
        self.metrics
            .records_in
            .fetch_add(report.records as u64, Relaxed);
        eprintln!("cairn-relay: store back, accepting connections");
        self.metrics.store_down.store(0, Relaxed);
        self.store_down = false;
        Ok(())
    }

    /// Handles queued commands; false on shutdown.
    fn handle_batch(&mut self, batch: Vec<Command>) -> crate::Result<bool> {
        let now = now_ms();
        if self.store_down && self.recover(now).is_err() {
            // Still down: refuse whoever connected; messages of closed connections are dropped.
            for cmd in batch {
                match cmd {
                    Command::Open { out, .. } => {
                        let mut r = Refusal::new(
                            Code::Internal,
                            true,
                            "the relay's store is unavailable; retry",
                        );
                        r.retry_after_ms = STORE_RETRY_MS;
                        self.metrics.refused(Code::Internal);
                        out.send(Out::Close(r));
                    }
                    Command::Shutdown => return Ok(false),
                    _ => {}
                }
            }
            return Ok(true);
        }
        let mut sends: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut touched: BTreeSet<ScopeId> = BTreeSet::new();
        let mut go_on = true;
        for cmd in batch {
            match cmd {
                Command::Open { id, key, user, out } => {
                    if let Some(user) = user {
                        let owner = self.store.borrow_mut().bind_key(&key, &user)?;
                        if owner != user {
                            self.metrics.refused(Code::Forbidden);
                            out.send(Out::Close(Refusal::new(
                                Code::Forbidden,
                                true,
                                "this device key belongs to another user",
                            )));
                            continue;
                        }
                    }
                    out.send(Out::Frame(Frame::Welcome { key }.encode()));
                    let mut link = Link::new();
                    sends.push((id, self.replica.open_link(&mut link, now)));
                    self.conns.insert(id, Conn { key, link, out });
                }
                Command::Message {
                    id,
                    bytes,
                    scopes,
                    permit,
                } => {
                    let Some(conn) = self.conns.get_mut(&id) else {
                        continue;
                    };
                    let t = std::time::Instant::now();
                    let out = self.replica.handle(&mut conn.link, now, &bytes);
                    drop(permit);
                    self.metrics
                        .handle_us
                        .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
                    // WRITERS may open scopes to members of other connections.
                    let mut news = bytes.get(3) == Some(&2);
                    for e in &out.events {
                        match e {
                            Event::Applied { records, .. } => {
                                self.metrics.records_in.fetch_add(*records as u64, Relaxed);
                                news = true;
                            }
                            Event::Rejected { reason, .. }
                                if !matches!(reason, Reason::Replay | Reason::ChainGap) =>
                            {
                                self.metrics.verification_failures.fetch_add(1, Relaxed);
                            }
                            _ => {}
                        }
                    }
                    sends.extend(out.send.into_iter().map(|b| (id, b)));
                    if news {
                        touched.extend(scopes);
                    }
                }
                Command::Close { id } => {
                    self.conns.remove(&id);
                }
                Command::Tick => {
                    for (id, c) in self.conns.iter_mut() {
                        let out = self.replica.poll(&mut c.link, now);
                        sends.extend(out.into_iter().map(|b| (*id, b)));
                    }
                }
                Command::Refresh { from, to } => {
                    let report =
                        self.store
                            .borrow_mut()
                            .refresh(&mut self.replica, now, from, to)?;
                    self.replica
                        .rows_mut()
                        .source
                        .add_purged(report.purged.clone());
                    release_stored(&mut self.replica, &self.store);
                    self.metrics
                        .records_in
                        .fetch_add(report.records as u64, Relaxed);
                    // Rare, and the scopes are not at hand: every link may have news.
                    for (id, c) in self.conns.iter_mut() {
                        let out = self.replica.poll(&mut c.link, now);
                        sends.extend(out.into_iter().map(|b| (*id, b)));
                    }
                }
                Command::Shutdown => go_on = false,
            }
        }
        if !touched.is_empty() {
            // Stored before any ACK or forwarded page leaves: an acknowledged block is on disk.
            let t = std::time::Instant::now();
            let purged = self.store.borrow_mut().persist(&self.replica)?;
            self.replica.rows_mut().source.add_purged(purged);
            // Stored: the replica keeps the heads, the store the blocks.
            release_stored(&mut self.replica, &self.store);
            self.metrics
                .store_us
                .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
            // Only the members of what changed can have news: polling every link after every
            // batch made the relay quadratic in its connections.
            for (id, c) in self.conns.iter_mut() {
                if !touched.iter().any(|s| self.replica.may_write(&c.key, s)) {
                    continue;
                }
                let out = self.replica.poll(&mut c.link, now);
                sends.extend(out.into_iter().map(|b| (*id, b)));
            }
            let (chains, records) = self
                .replica
                .chains()
                .fold((0, 0), |(c, r), (_, log)| (c + 1, r + log.head().0));
            self.metrics.chains.store(chains, Relaxed);
            self.metrics.records_held.store(records, Relaxed);
        }
        for (id, bytes) in sends {
            let Some(c) = self.conns.get(&id) else {
                continue;
            };
            if bytes.get(3) == Some(&3) {
                self.metrics.block_pages_out.fetch_add(1, Relaxed);
            }
            if !c.out.send(Out::Frame(bytes)) {
                // Too far behind: its writer was told to close; forget its link now.
                self.conns.remove(&id);
            }
        }
        let lag: u64 = self.conns.values().map(|c| c.link.in_flight()).sum();
        self.metrics.lag_records.store(lag, Relaxed);
        let source = &mut self.replica.rows_mut().source;
        self.metrics.blocks_read.store(source.reads, Relaxed);
        self.metrics
            .block_cache_bytes
            .store(source.cached_bytes() as u64, Relaxed);
        // A history read that failed (the store, or a stored block that does not decode):
        // handled as any store failure.
        if let Some(e) = source.take_failure() {
            return Err(e);
        }
        Ok(go_on)
    }
}

/// A refusal as a frame, for the writer.
pub fn refusal_frame(r: &Refusal) -> Vec<u8> {
    Frame::Error(r.clone()).encode()
}
