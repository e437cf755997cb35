//! Load on one relay: `cargo bench -p cairn-relay --bench load [-- N ...]` (default 50 and 200
//! clients). Results are saved by hand under `bench-results/`.
//!
//! With `--two-relays` (a build with `--features postgres` and `CAIRN_RELAY_POSTGRES_URL` set;
//! `scripts/relay-postgres-test.sh bench [N ...]` provides both), each N runs twice over
//! PostgreSQL: one relay serving every client, then two relays sharing the database with the
//! clients split between them (client i on relay i mod 2, so half of the deliveries cross from
//! one relay to the other through NOTIFY). The tables are emptied before each run.
//!
//! Every client is a real `Replica` on its own authenticated WebSocket, and owns one scope whose
//! writer list names the next four clients (a ring), so each record is stored once by the relay
//! and delivered to four readers. Two phases:
//! - steady: each client commits one record every 100 ms for 5 s; delivery latency is the time
//!   from the commit to the reader having the record (p50, p99 over every delivery);
//! - burst: each client commits 200 records at once; records/s in (verified and stored by the
//!   relay) and out (delivered to readers) until everything has arrived.
//!
//! Relay and clients share one process and the machine's cores: the figures are what one relay
//! sustains while its clients run beside it, not a ceiling of the relay alone.
//!
//! With `--memory [BLOCKS]` (default 20000) it measures the relay's memory against what it
//! stored instead, at BLOCKS and at ten times BLOCKS: the relay binary runs as a child process
//! on a fresh directory; 20 writers store BLOCKS one-record blocks through it (each in its own
//! scope, readable by one reader key); the relay is killed and started again on its file; then
//! a new reader syncs the whole history through it. It prints the relay's resident memory
//! (`VmRSS` of `/proc/PID/status`) after storing, after the restart and after serving
//! everything, its peak (`VmHWM`), and the time the restart took. `--relay-bin PATH` runs
//! another build of the relay (an older one, to compare).

use cairn_relay::client::{connect, recv, Incoming};
use cairn_relay::{Limits, Relay, RelayConfig};
use cairn_sync::{AuthorId, Identity, Link, Message, Replica, ScopeId, TableSchema, Value};
use futures_util::SinkExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};
use tokio_tungstenite::tungstenite::Message as Ws;

const READERS: usize = 4;
const STEADY_MS: u64 = 5000;
const STEADY_EVERY_MS: u64 = 100;
const BURST: usize = 200;

fn secret(i: usize) -> [u8; 32] {
    *blake3::hash(&(i as u64).to_le_bytes()).as_bytes()
}

/// When each record `(author, seq)` was committed.
type Sent = Mutex<HashMap<(AuthorId, u64), Instant>>;

struct Bench {
    sent: Sent,
    latencies_us: Mutex<Vec<u64>>,
    delivered: AtomicU64,
}

struct Client {
    replica: Mutex<Replica>,
    wake: Notify,
    scope: ScopeId,
}

fn now_ms() -> u64 {
    cairn_relay::core::now_ms()
}

impl Client {
    fn commit(&self, bench: &Bench, id: i64) {
        let mut r = self.replica.lock().expect("invariant: not poisoned");
        let op = r
            .set_op(
                "todo",
                vec![Value::Integer(id)],
                vec![("title", Value::Text(format!("item {id}")))],
            )
            .expect("invariant: valid op");
        r.commit(now_ms(), &self.scope, vec![op])
            .expect("own scope");
        let seq = r.version_vector()[&(r.id(), self.scope.clone())];
        bench
            .sent
            .lock()
            .expect("invariant: not poisoned")
            .insert((r.id(), seq), Instant::now());
        drop(r);
        self.wake.notify_one();
    }
}

async fn run_client(
    c: Arc<Client>,
    identity: Identity,
    url: String,
    bench: Arc<Bench>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conn = connect(&url, &identity, None)
        .await
        .expect("client authenticates");
    let mut link = Link::new();
    let hello = c
        .replica
        .lock()
        .expect("invariant")
        .open_link(&mut link, now_ms());
    conn.socket
        .send(Ws::Binary(hello.into()))
        .await
        .expect("send");
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        let out = tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => c.replica.lock().expect("invariant").poll(&mut link, now_ms()),
            _ = c.wake.notified() => c.replica.lock().expect("invariant").poll(&mut link, now_ms()),
            m = recv(&mut conn.socket) => match m {
                Incoming::Sync(bytes) => {
                    let mut r = c.replica.lock().expect("invariant");
                    let mut fresh = Vec::new();
                    if let Ok(Message::Blocks(blocks)) = Message::decode(&bytes) {
                        let vv = r.version_vector();
                        for b in &blocks {
                            let held = vv.get(&b.key()).copied().unwrap_or(0);
                            fresh.extend(b.records.iter().filter(|rec| rec.seq > held).map(|rec| (b.author, rec.seq)));
                        }
                    }
                    let out = r.handle(&mut link, now_ms(), &bytes);
                    drop(r);
                    let at = Instant::now();
                    if !fresh.is_empty() {
                        let sent = bench.sent.lock().expect("invariant");
                        let mut lat = bench.latencies_us.lock().expect("invariant");
                        for k in &fresh {
                            if let Some(t) = sent.get(k) {
                                lat.push(at.duration_since(*t).as_micros() as u64);
                            }
                        }
                        bench.delivered.fetch_add(fresh.len() as u64, Relaxed);
                    }
                    out.send
                }
                Incoming::Refusal(r) => panic!("refused: {r:?}"),
                Incoming::Closed => return,
            },
        };
        for m in out {
            if conn.socket.send(Ws::Binary(m.into())).await.is_err() {
                return;
            }
        }
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn wait_for(what: &str, deadline: Duration, cond: impl Fn() -> bool) {
    let give_up = Instant::now() + deadline;
    while !cond() {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Where the relays keep blocks.
#[derive(Clone)]
enum Setup {
    /// One relay on a cairn file.
    File,
    /// `relays` relays sharing the PostgreSQL database at the URL.
    Postgres(String, usize),
}

#[cfg(feature = "postgres")]
async fn empty_tables(url: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects to PostgreSQL");
    tokio::spawn(conn);
    client
        .batch_execute(
            "DROP TABLE IF EXISTS cairn_relay_meta, cairn_relay_writers, cairn_relay_blocks, \
             cairn_relay_users, cairn_relay_purged",
        )
        .await
        .expect("empties the relay tables");
}

#[cfg(not(feature = "postgres"))]
async fn empty_tables(_url: &str) {
    panic!("--two-relays needs `--features postgres`");
}

fn sum(relays: &[Relay], f: impl Fn(&cairn_relay::metrics::Metrics) -> &AtomicU64) -> u64 {
    relays.iter().map(|r| f(r.metrics()).load(Relaxed)).sum()
}

async fn run(n: usize, setup: Setup) {
    let dir = std::env::temp_dir().join(format!("cairn-relay-bench-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (postgres, count, label) = match &setup {
        Setup::File => (None, 1, "1 relay, cairn file".to_string()),
        Setup::Postgres(url, k) => {
            empty_tables(url).await;
            let label = format!("{k} relay{}, PostgreSQL", if *k == 1 { "" } else { "s" });
            (Some(url.clone()), *k, label)
        }
    };
    let mut relays = Vec::new();
    for _ in 0..count {
        relays.push(
            Relay::start(RelayConfig {
                listen: "127.0.0.1:0".parse().expect("invariant"),
                data: dir.clone(),
                postgres: postgres.clone(),
                limits: Limits::default(),
                auth: None,
            })
            .await
            .expect("relay starts"),
        );
    }
    let urls: Vec<String> = relays.iter().map(|r| r.url()).collect();
    let bench = Arc::new(Bench {
        sent: Mutex::new(HashMap::new()),
        latencies_us: Mutex::new(Vec::new()),
        delivered: AtomicU64::new(0),
    });
    let ids: Vec<AuthorId> = (0..n)
        .map(|i| Identity::from_secret(secret(i)).id())
        .collect();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    let t0 = Instant::now();
    for i in 0..n {
        let mut r = Replica::in_memory(
            Identity::from_secret(secret(i)),
            cairn_sync::Config::default(),
        );
        r.register_table(TableSchema::new("todo", 1).lww("title"))
            .expect("invariant");
        let readers: Vec<AuthorId> = (1..=READERS).map(|k| ids[(i + k) % n]).collect();
        let name = format!("todo/c{i}");
        r.sign_writers(name.as_bytes(), 1, readers);
        let c = Arc::new(Client {
            replica: Mutex::new(r),
            wake: Notify::new(),
            scope: ScopeId::new(ids[i], name),
        });
        clients.push(c.clone());
        tasks.push(tokio::spawn(run_client(
            c,
            Identity::from_secret(secret(i)),
            urls[i % urls.len()].clone(),
            bench.clone(),
            stop_rx.clone(),
        )));
    }
    wait_for("every client connected", Duration::from_secs(60), || {
        sum(&relays, |m| &m.connections) == n as u64
    })
    .await;
    let connect_s = t0.elapsed().as_secs_f64();

    // Steady phase.
    let steady_commits = (STEADY_MS / STEADY_EVERY_MS) as usize;
    let start = Instant::now();
    let mut interval = tokio::time::interval(Duration::from_millis(STEADY_EVERY_MS));
    for k in 0..steady_commits {
        interval.tick().await;
        for c in &clients {
            c.commit(&bench, k as i64);
        }
    }
    let expected = (n * steady_commits * READERS) as u64;
    wait_for("steady deliveries", Duration::from_secs(120), || {
        bench.delivered.load(Relaxed) >= expected
    })
    .await;
    let steady_s = start.elapsed().as_secs_f64();
    let mut lat = std::mem::take(&mut *bench.latencies_us.lock().expect("invariant"));
    lat.sort_unstable();
    let steady_in = (n * steady_commits) as u64;

    // Burst phase. Every relay ends up applying every record: its clients' and, over
    // PostgreSQL, those the other relay stored. "In" is done when each relay holds them all.
    let delivered0 = bench.delivered.load(Relaxed);
    let in0: Vec<u64> = relays
        .iter()
        .map(|r| r.metrics().records_in.load(Relaxed))
        .collect();
    let start = Instant::now();
    for c in &clients {
        for k in 0..BURST {
            c.commit(&bench, (steady_commits + k) as i64);
        }
    }
    wait_for("burst stored", Duration::from_secs(300), || {
        relays
            .iter()
            .zip(&in0)
            .all(|(r, i0)| r.metrics().records_in.load(Relaxed) >= i0 + (n * BURST) as u64)
    })
    .await;
    let in_s = start.elapsed().as_secs_f64();
    let want_out = delivered0 + (n * BURST * READERS) as u64;
    wait_for("burst delivered", Duration::from_secs(300), || {
        bench.delivered.load(Relaxed) >= want_out
    })
    .await;
    let out_s = start.elapsed().as_secs_f64();
    let mut burst_lat = std::mem::take(&mut *bench.latencies_us.lock().expect("invariant"));
    burst_lat.sort_unstable();

    println!("{n} clients, {READERS} readers per scope, {label} (connect {connect_s:.2} s)");
    println!(
        "  steady: {} records in ({:.0}/s offered), {} deliveries in {steady_s:.2} s; latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        steady_in,
        n as f64 * 1000.0 / STEADY_EVERY_MS as f64,
        lat.len(),
        pct(&lat, 0.50),
        pct(&lat, 0.99),
        pct(&lat, 1.0),
    );
    println!(
        "  burst:  {} records in {in_s:.2} s ({:.0} records/s in), {} delivered in {out_s:.2} s ({:.0} records/s out); latency p50 {:.0} ms, p99 {:.0} ms",
        n * BURST,
        (n * BURST) as f64 / in_s,
        n * BURST * READERS,
        (n * BURST * READERS) as f64 / out_s,
        pct(&burst_lat, 0.50),
        pct(&burst_lat, 0.99),
    );
    println!(
        "  relay{}: frames in {}, frames out {}, block pages out {}, verification failures {}; core busy handling {:.2} s, storing {:.2} s",
        if count == 1 { "" } else { "s (summed)" },
        sum(&relays, |m| &m.frames_in),
        sum(&relays, |m| &m.frames_out),
        sum(&relays, |m| &m.block_pages_out),
        sum(&relays, |m| &m.verification_failures),
        sum(&relays, |m| &m.handle_us) as f64 / 1e6,
        sum(&relays, |m| &m.store_us) as f64 / 1e6,
    );
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    for relay in relays {
        relay.shutdown().await.expect("clean shutdown");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `VmRSS` and `VmHWM` of a process, in MiB.
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts the relay binary on `dir`; returns it, its WebSocket URL and the seconds until it
/// listened.
fn spawn_relay(bin: &str, dir: &std::path::Path) -> (std::process::Child, String, f64) {
    use std::io::BufRead;
    let t = Instant::now();
    let mut child = std::process::Command::new(bin)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--write-rate",
            "1000000",
            "--data",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the relay binary starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("invariant: piped"))
        .read_line(&mut line)
        .expect("reads the first line");
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, format!("ws://{addr}/"), t.elapsed().as_secs_f64())
}

const WRITERS: usize = 20;

async fn memory(bin: &str, blocks: usize) {
    use cairn_relay::client::SyncPeer;
    let dir = std::env::temp_dir().join(format!(
        "cairn-relay-memory-{}-{blocks}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut relay, url, _) = spawn_relay(bin, &dir);
    let reader = Identity::from_secret(secret(1_000_000));
    let per = blocks / WRITERS;
    let schema = || TableSchema::new("todo", 1).lww("title");
    // Every writer sends one page at a time: what is in flight towards the relay is then the
    // same whatever it has stored.
    let config = cairn_sync::Config {
        window_pages: 1,
        ..cairn_sync::Config::default()
    };
    let mut prepared = Vec::new();
    for w in 0..WRITERS {
        let id = Identity::from_secret(secret(w));
        let mut r = Replica::in_memory(Identity::from_secret(secret(w)), config.clone());
        r.register_table(schema()).expect("invariant");
        let name = format!("todo/w{w}");
        r.sign_writers(name.as_bytes(), 1, vec![reader.id()]);
        let scope = ScopeId::new(id.id(), name);
        // One record a block, as when every commit is synced at once.
        for i in 0..per {
            let op = r
                .set_op(
                    "todo",
                    vec![Value::Integer(i as i64)],
                    vec![("title", Value::Text(format!("item {i} of writer {w}")))],
                )
                .expect("invariant: valid op");
            r.commit(now_ms(), &scope, vec![op]).expect("own scope");
            r.seal();
        }
        prepared.push((r, id));
    }
    let t = Instant::now();
    let writers: Vec<SyncPeer> = prepared
        .into_iter()
        .map(|(r, id)| SyncPeer::spawn(r, id, url.clone()))
        .collect();
    let total = (per * WRITERS) as u64;
    let acked = |p: &SyncPeer| {
        let r = p.replica();
        let vv = r.version_vector();
        vv.values().sum::<u64>()
    };
    // A writer's records are stored once the relay acknowledged them; its HELLO on a new
    // connection then asks for nothing. Wait until the relay reports them all held.
    let health = |url: &str| {
        let addr = url
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .to_string();
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(&addr).await.ok()?;
            s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .ok()?;
            let mut out = String::new();
            s.read_to_string(&mut out).await.ok()?;
            let records = out.split("\"records\":").nth(1)?;
            records
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<u64>()
                .ok()
        }
    };
    loop {
        if health(&url).await == Some(total) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the relay never held every block"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let store_s = t.elapsed().as_secs_f64();
    let (stored_rss, stored_hwm) = memory_mib(relay.id());
    for w in writers {
        w.stop().await;
    }
    relay.kill().expect("kill");
    relay.wait().expect("reaped");
    let file_mib = std::fs::metadata(dir.join(cairn_relay::store::FILE_NAME))
        .map_or(0.0, |m| m.len() as f64 / 1048576.0);

    let (mut relay, url, start_s) = spawn_relay(bin, &dir);
    let (start_rss, _) = memory_mib(relay.id());
    let mut r = Replica::in_memory(
        Identity::from_secret(secret(1_000_000)),
        cairn_sync::Config::default(),
    );
    r.register_table(schema()).expect("invariant");
    let t = Instant::now();
    let peer = SyncPeer::spawn(r, reader, url.clone());
    loop {
        if acked(&peer) == total {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the reader never got everything"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let serve_s = t.elapsed().as_secs_f64();
    let (served_rss, served_hwm) = memory_mib(relay.id());
    peer.stop().await;
    relay.kill().expect("kill");
    relay.wait().expect("reaped");
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{total} blocks stored ({file_mib:.1} MiB file) by {WRITERS} writers in {store_s:.1} s: relay RSS {stored_rss:.1} MiB (peak {stored_hwm:.1})"
    );
    println!(
        "  restart in {start_s:.2} s: RSS {start_rss:.1} MiB; one reader synced all {total} in {serve_s:.1} s: RSS {served_rss:.1} MiB (peak since restart {served_hwm:.1})"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--memory") {
        let blocks = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000usize);
        let bin = args
            .iter()
            .position(|a| a == "--relay-bin")
            .and_then(|j| args.get(j + 1).cloned())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_cairn-relay").to_string());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("invariant: a runtime");
        for scale in [1, 10] {
            runtime.block_on(memory(&bin, blocks * scale));
        }
        return;
    }
    let ns: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let ns = if ns.is_empty() { vec![50, 200] } else { ns };
    let setups = if args.iter().any(|a| a == "--two-relays") {
        let url = std::env::var("CAIRN_RELAY_POSTGRES_URL").expect(
            "--two-relays needs CAIRN_RELAY_POSTGRES_URL (scripts/relay-postgres-test.sh bench)",
        );
        vec![Setup::Postgres(url.clone(), 1), Setup::Postgres(url, 2)]
    } else {
        vec![Setup::File]
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("invariant: a runtime");
    for n in ns {
        for setup in &setups {
            runtime.block_on(run(n, setup.clone()));
        }
    }
}
