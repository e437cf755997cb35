//! Starting and stopping a relay: open the store on the core thread, rebuild the replica from it,
//! bind the port, accept connections (HTTP or WebSocket) and tick the core.

use crate::auth::AuthConfig;
use crate::core::{Command, Core};
use crate::error::{Error, Result};
use crate::frame::hex;
use crate::http::{self, Route};
use crate::metrics::Metrics;
use crate::source::{SharedStore, Source};
use crate::store::{Durable, LoadReport, Store};
use cairn_sync::{AuthorId, Config, NoRows, Replica};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// How often every link is polled (retransmits of unacknowledged pages).
const TICK: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest frame accepted (`TOO_LARGE` beyond).
    pub max_message: usize,
    /// Records per second one connection may send (`RATE_LIMITED` beyond).
    pub write_rate: u32,
    /// Frames queued towards one client before it is cut off (`TOO_SLOW`).
    pub max_pending: usize,
    /// Time a client has to answer the challenge (`AUTH_REQUIRED`, fatal, after it).
    pub auth_timeout: Duration,
    /// Bytes of stored blocks kept in memory for clients catching up (`--block-cache`).
    pub block_cache: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message: 8 << 20,
            write_rate: 5000,
            max_pending: 1024,
            auth_timeout: Duration::from_secs(10),
            block_cache: 16 << 20,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub listen: SocketAddr,
    /// The directory of the cairn store (unused with `postgres`).
    pub data: PathBuf,
    /// A PostgreSQL connection string: keep blocks there instead (feature `postgres`).
    pub postgres: Option<String>,
    pub limits: Limits,
    /// Require a token of the app's users before AUTH (`--auth-secret`, `--auth-jwks`).
    pub auth: Option<AuthConfig>,
}

/// Opens the configured store; on the core thread, where it will be used.
fn open_store(
    config: &RelayConfig,
    _instance: &str,
) -> Result<(Box<dyn Durable>, cairn_sync::Identity)> {
    match &config.postgres {
        #[cfg(feature = "postgres")]
        Some(url) => {
            let (store, identity) = crate::pg::PgStore::open(url, _instance)?;
            Ok((Box::new(store), identity))
        }
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(Error::InvalidInput(
            "--postgres needs a relay built with the `postgres` feature".into(),
        )),
        None => {
            let (store, identity) = Store::open(&config.data)?;
            Ok((Box::new(store), identity))
        }
    }
}

/// What connection tasks share.
pub struct Shared {
    pub core: mpsc::UnboundedSender<Command>,
    pub metrics: Arc<Metrics>,
    pub relay_id: AuthorId,
    pub limits: Limits,
    pub auth: Option<AuthConfig>,
    pub next_conn: AtomicU64,
}

/// A running relay. `shutdown` stops it and closes its store; dropping it without does the
/// same less politely (the core thread finishes when its queue closes).
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
    core: Option<std::thread::JoinHandle<Result<()>>>,
    loaded: LoadReport,
}

/// The replica configuration of a relay (docs/relay.md): no schemas, members-only reads.
pub fn replica_config() -> Config {
    Config {
        accept_unknown_tables: true,
        serve_members_only: true,
        report_rows: false,
        merge_rows: false,
        ..Config::default()
    }
}

impl Relay {
    pub async fn start(config: RelayConfig) -> Result<Relay> {
        if config.limits.max_message < 1024 {
            return Err(Error::InvalidInput(
                "--max-message must be at least 1024".into(),
            ));
        }
        let metrics = Arc::new(Metrics::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        let store_config = config.clone();
        // Tells this relay's notifications from those of others sharing its database.
        #[cfg(feature = "postgres")]
        let instance = crate::pg::instance_tag();
        #[cfg(not(feature = "postgres"))]
        let instance = String::new();
        let core_instance = instance.clone();
        let core_metrics = metrics.clone();
        // The store's handles are single-threaded: it is opened, loaded and used on this thread.
        let core = std::thread::Builder::new()
            .name("cairn-relay-core".into())
            .spawn(move || {
                let opened =
                    open_store(&store_config, &core_instance).and_then(|(store, identity)| {
                        let store: SharedStore = Rc::new(RefCell::new(store));
                        let source = Source::new(store.clone(), store_config.limits.block_cache);
                        let mut replica =
                            Replica::new(identity, replica_config(), NoRows { source });
                        let report = store
                            .borrow_mut()
                            .load_into(&mut replica, crate::core::now_ms())?;
                        replica.rows_mut().source.add_purged(report.purged.clone());
                        Ok((store, replica, report))
                    });
                match opened {
                    Ok((store, replica, report)) => {
                        let _ = ready_tx.send(Ok((replica.id(), report)));
                        Core::new(replica, store, core_metrics).run(rx)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        Err(e)
                    }
                }
            })
            .map_err(|e| Error::Io(format!("core thread: {e}")))?;
        let (relay_id, loaded) = ready_rx
            .await
            .map_err(|_| Error::Io("the core thread stopped while opening the store".into()))??;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| Error::Io(format!("bind {}: {e}", config.listen)))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            core: tx,
            metrics,
            relay_id,
            limits: config.limits.clone(),
            auth: config.auth.clone(),
            next_conn: AtomicU64::new(1),
        });
        #[cfg(feature = "postgres")]
        if let Some(url) = &config.postgres {
            crate::pg::listen(url, instance.clone(), shared.core.clone()).await?;
        }
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Relay {
            addr,
            shared,
            accept,
            core: Some(core),
            loaded,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn url(&self) -> String {
        format!("ws://{}/", self.addr)
    }
    pub fn id(&self) -> AuthorId {
        self.shared.relay_id
    }
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }
    /// What was found in the store at start.
    pub fn loaded(&self) -> &LoadReport {
        &self.loaded
    }

    /// Stops accepting, drops every connection, lets the core finish its queue and close the
    /// store.
    pub async fn shutdown(mut self) -> Result<()> {
        self.accept.abort();
        let _ = (&mut self.accept).await;
        let _ = self.shared.core.send(Command::Shutdown);
        match self.core.take() {
            Some(h) => tokio::task::spawn_blocking(move || h.join())
                .await
                .map_err(|e| Error::Io(e.to_string()))?
                .map_err(|_| Error::Io("the core thread panicked".into()))?,
            None => Ok(()),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = self.shared.core.send(Command::Shutdown);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Owning the connection tasks here means aborting this task ends them all.
    let mut conns = JoinSet::new();
    let ticker = shared.core.clone();
    conns.spawn(async move {
        let mut t = tokio::time::interval(TICK);
        loop {
            t.tick().await;
            if ticker.send(Command::Tick).is_err() {
                break;
            }
        }
    });
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(hard_frame_limit(shared.limits.max_message)))
        .max_frame_size(Some(hard_frame_limit(shared.limits.max_message)));
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(_) => continue,
            },
            Some(_) = conns.join_next() => continue,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        conns.spawn(async move {
            match http::route(&stream).await {
                Ok(Route::Health) => {
                    let m = &shared.metrics;
                    let body = format!(
                        "{{\"status\":\"ok\",\"relay\":\"{}\",\"connections\":{},\"chains\":{},\"records\":{}}}\n",
                        hex(&shared.relay_id.0),
                        m.connections.load(Relaxed),
                        m.chains.load(Relaxed),
                        m.records_held.load(Relaxed),
                    );
                    http::respond(stream, "200 OK", "application/json", body).await;
                }
                Ok(Route::Metrics) => {
                    let body = shared.metrics.render();
                    http::respond(stream, "200 OK", "text/plain; version=0.0.4", body).await;
                }
                Ok(Route::NotFound) => {
                    http::respond(stream, "404 Not Found", "text/plain", "not found\n".into())
                        .await;
                }
                Ok(Route::WebSocket) => {
                    if let Ok(ws) =
                        tokio_tungstenite::accept_async_with_config(stream, Some(ws_config)).await
                    {
                        crate::conn::serve(ws, shared).await;
                    }
                }
                Err(_) => {}
            }
        });
    }
}

/// Frames past `max_message` are refused with `TOO_LARGE` and the connection goes on; frames
/// far past it end the WebSocket, so a client cannot make the relay buffer without bound.
pub fn hard_frame_limit(max_message: usize) -> usize {
    (max_message.saturating_mul(4)).max(16 << 20)
}
