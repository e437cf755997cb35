//! Counters the connection tasks and the core update and `GET /metrics` prints (docs/relay.md
//! sec. 7). Plain atomics: read at any time from any task without a lock.

use crate::frame::Code;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct Metrics {
    pub connections: AtomicU64,
    pub connections_total: AtomicU64,
    pub frames_in: AtomicU64,
    pub frames_out: AtomicU64,
    pub records_in: AtomicU64,
    pub block_pages_out: AtomicU64,
    pub verification_failures: AtomicU64,
    pub lag_records: AtomicU64,
    pub queue: AtomicU64,
    pub chains: AtomicU64,
    pub records_held: AtomicU64,
    /// Microseconds the core spent handling messages (verification included) and storing.
    pub handle_us: AtomicU64,
    pub store_us: AtomicU64,
    /// Store failures that closed every connection (PostgreSQL unreachable); the relay retries.
    pub store_errors: AtomicU64,
    /// 1 while the store is unreachable and connections are refused.
    pub store_down: AtomicU64,
    /// Stored blocks read back for clients (cache misses), and the cache's size.
    pub blocks_read: AtomicU64,
    pub block_cache_bytes: AtomicU64,
    refusals: [AtomicU64; Code::ALL.len()],
}

impl Metrics {
    pub fn refused(&self, code: Code) {
        self.refusals[code.index()].fetch_add(1, Relaxed);
    }

    pub fn refusals(&self, code: Code) -> u64 {
        self.refusals[code.index()].load(Relaxed)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |name: &str, kind: &str, help: &str, v: u64| {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
            ));
        };
        line(
            "cairn_relay_connections",
            "gauge",
            "authenticated connections now",
            self.connections.load(Relaxed),
        );
        line(
            "cairn_relay_connections_total",
            "counter",
            "authenticated connections since start",
            self.connections_total.load(Relaxed),
        );
        line(
            "cairn_relay_frames_in_total",
            "counter",
            "frames received",
            self.frames_in.load(Relaxed),
        );
        line(
            "cairn_relay_frames_out_total",
            "counter",
            "frames sent",
            self.frames_out.load(Relaxed),
        );
        line(
            "cairn_relay_records_in_total",
            "counter",
            "records verified, stored and applied",
            self.records_in.load(Relaxed),
        );
        line(
            "cairn_relay_block_pages_out_total",
            "counter",
            "BLOCKS messages sent",
            self.block_pages_out.load(Relaxed),
        );
        line(
            "cairn_relay_verification_failures_total",
            "counter",
            "blocks and writer lists refused (replays and gaps aside)",
            self.verification_failures.load(Relaxed),
        );
        line(
            "cairn_relay_lag_records",
            "gauge",
            "records sent to clients and not acknowledged",
            self.lag_records.load(Relaxed),
        );
        line(
            "cairn_relay_queue",
            "gauge",
            "messages waiting for the replica",
            self.queue.load(Relaxed),
        );
        line(
            "cairn_relay_chains",
            "gauge",
            "chains held",
            self.chains.load(Relaxed),
        );
        line(
            "cairn_relay_handle_microseconds_total",
            "counter",
            "time the core spent handling messages, verification included",
            self.handle_us.load(Relaxed),
        );
        line(
            "cairn_relay_store_microseconds_total",
            "counter",
            "time the core spent storing (commits, flushes)",
            self.store_us.load(Relaxed),
        );
        line(
            "cairn_relay_store_errors_total",
            "counter",
            "store failures that closed every connection (the relay retries the store)",
            self.store_errors.load(Relaxed),
        );
        line(
            "cairn_relay_store_down",
            "gauge",
            "1 while the store is unreachable and connections are refused",
            self.store_down.load(Relaxed),
        );
        line(
            "cairn_relay_blocks_read_total",
            "counter",
            "stored blocks read back from the store for clients (block cache misses)",
            self.blocks_read.load(Relaxed),
        );
        line(
            "cairn_relay_block_cache_bytes",
            "gauge",
            "bytes of stored blocks held in the block cache",
            self.block_cache_bytes.load(Relaxed),
        );
        out.push_str("# HELP cairn_relay_refusals_total ERROR frames sent, by code\n");
        out.push_str("# TYPE cairn_relay_refusals_total counter\n");
        for c in Code::ALL {
            out.push_str(&format!(
                "cairn_relay_refusals_total{{code=\"{c}\"}} {}\n",
                self.refusals(c)
            ));
        }
        out
    }
}
