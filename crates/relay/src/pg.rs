//! PostgreSQL as the relay's store (`--postgres URL`, feature `postgres`; docs/relay.md sec. 6).
//! Same contents as the cairn file — the relay identity, writer lists and blocks in their sync
//! encodings — in three tables, created by an idempotent migration. Several relays may share one
//! database: each commit that adds rows ends with a NOTIFY naming the rows, and the other relays
//! feed them to their replicas (verified again) and forward them to their clients.
//!
//! The core thread is synchronous; this store drives `tokio-postgres` on a small runtime of its
//! own on that thread. The LISTEN side runs on the server's runtime.

use crate::core::Command;
use crate::error::{Error, Result};
use crate::source::{decode_row, encode_row, purges, RelayReplica};
use crate::store::{chain_hash, feed, stored_block, unsaved, Durable, LoadReport};
use cairn_sync::chain::ChainKey;
use cairn_sync::wire::{Reader, Writer};
use cairn_sync::{AuthorId, Block, Checkpoint, Identity, RowKey, WriterList};
use rand_core::RngCore;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};

pub const CHANNEL: &str = "cairn_relay_blocks";
const SCHEMA_VERSION: &[u8] = b"1";

/// Every statement is `IF NOT EXISTS`: running it again, or from a second relay, changes nothing.
const MIGRATION: &str = "
CREATE TABLE IF NOT EXISTS cairn_relay_meta (key text PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE IF NOT EXISTS cairn_relay_writers (hash bytea PRIMARY KEY, list bytea NOT NULL);
CREATE TABLE IF NOT EXISTS cairn_relay_blocks (
    id bigserial PRIMARY KEY,
    chain bytea NOT NULL,
    first_seq bigint NOT NULL,
    block bytea NOT NULL,
    UNIQUE (chain, first_seq)
);
CREATE TABLE IF NOT EXISTS cairn_relay_users (key bytea PRIMARY KEY, app_user text NOT NULL);
CREATE TABLE IF NOT EXISTS cairn_relay_purged (hash bytea PRIMARY KEY, row_key bytea NOT NULL);
INSERT INTO cairn_relay_meta (key, value) VALUES ('schema', '\\x31') ON CONFLICT DO NOTHING;
";

fn pg(e: tokio_postgres::Error) -> Error {
    Error::Store(format!("postgres: {e}"))
}

pub struct PgStore {
    rt: tokio::runtime::Runtime,
    url: String,
    client: Client,
    /// Tells this relay's NOTIFYs from the others' (relays sharing a database share the relay
    /// identity too, so the identity cannot).
    instance: String,
    heads: HashMap<ChainKey, u64>,
    lists: HashSet<[u8; 64]>,
}

/// A random tag for one running relay, in its NOTIFYs, so that it skips its own.
pub fn instance_tag() -> String {
    let mut b = [0u8; 8];
    rand_core::OsRng.fill_bytes(&mut b);
    crate::frame::hex(&b)
}

/// Opens a connection whose driver runs on the runtime this is awaited on.
async fn connect(url: &str) -> Result<Client> {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.map_err(pg)?;
    tokio::spawn(conn);
    Ok(client)
}

impl PgStore {
    pub fn open(url: &str, instance: &str) -> Result<(PgStore, Identity)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Io(e.to_string()))?;
        let client = rt.block_on(async {
            let client = connect(url).await?;
            client.batch_execute(MIGRATION).await.map_err(pg)?;
            Ok::<_, Error>(client)
        })?;
        let identity = rt.block_on(async {
            let schema = client
                .query_one("SELECT value FROM cairn_relay_meta WHERE key = 'schema'", &[])
                .await
                .map_err(pg)?;
            let v: Vec<u8> = schema.get(0);
            if v != SCHEMA_VERSION {
                return Err(Error::Corrupt(format!(
                    "relay tables at schema {:?}; this relay knows {:?}",
                    String::from_utf8_lossy(&v),
                    String::from_utf8_lossy(SCHEMA_VERSION)
                )));
            }
            // The first relay to start makes the identity; the others adopt it.
            let fresh = Identity::generate(&mut rand_core::OsRng).export();
            client
                .execute(
                    "INSERT INTO cairn_relay_meta (key, value) VALUES ('identity', $1) ON CONFLICT DO NOTHING",
                    &[&fresh],
                )
                .await
                .map_err(pg)?;
            let row = client
                .query_one("SELECT value FROM cairn_relay_meta WHERE key = 'identity'", &[])
                .await
                .map_err(pg)?;
            let bytes: Vec<u8> = row.get(0);
            Identity::import(&bytes).map_err(|e| Error::Corrupt(format!("relay identity: {e}")))
        })?;
        Ok((
            PgStore {
                rt,
                url: url.to_string(),
                client,
                instance: instance.to_string(),
                heads: HashMap::new(),
                lists: HashSet::new(),
            },
            identity,
        ))
    }

    /// A new connection when the server closed the last one (it restarted): every statement
    /// here may be run again, so the caller retries once on the new connection.
    fn reconnect_if_closed(&mut self) -> Result<bool> {
        if !self.client.is_closed() {
            return Ok(false);
        }
        self.client = self.rt.block_on(connect(&self.url))?;
        Ok(true)
    }

    fn load_lists(&mut self, replica: &mut RelayReplica, report: &mut LoadReport) -> Result<()> {
        self.reconnect_if_closed()?;
        let rows = self
            .rt
            .block_on(
                self.client
                    .query("SELECT row_key FROM cairn_relay_purged", &[]),
            )
            .map_err(pg)?;
        for row in rows {
            let bytes: Vec<u8> = row.get(0);
            report.purged.push(decode_row(&bytes)?);
        }
        let rows = self
            .rt
            .block_on(
                self.client
                    .query("SELECT list FROM cairn_relay_writers", &[]),
            )
            .map_err(pg)?;
        for row in rows {
            let bytes: Vec<u8> = row.get(0);
            let mut r = Reader::new(&bytes);
            let list = WriterList::decode(&mut r).and_then(|l| r.finish().map(|_| l));
            match list {
                Ok(l) if self.lists.contains(&l.sig) => {}
                Ok(l) => {
                    let sig = l.sig;
                    if replica.add_writer_list(l).is_ok() {
                        self.lists.insert(sig);
                        report.lists += 1;
                    } else {
                        report.refused += 1;
                    }
                }
                Err(_) => report.refused += 1,
            }
        }
        Ok(())
    }

    /// Feeds the blocks of rows `from..=to` (another relay's commit) to the replica, verified.
    fn load_blocks(
        &mut self,
        replica: &mut RelayReplica,
        now_ms: u64,
        (from, to): (i64, i64),
        report: &mut LoadReport,
    ) -> Result<()> {
        self.reconnect_if_closed()?;
        let rows = self
            .rt
            .block_on(self.client.query(
                "SELECT block FROM cairn_relay_blocks WHERE id BETWEEN $1 AND $2 ORDER BY chain, first_seq",
                &[&from, &to],
            ))
            .map_err(pg)?;
        let mut blocks = Vec::with_capacity(rows.len());
        for row in rows {
            let bytes: Vec<u8> = row.get(0);
            blocks.push(stored_block(&bytes)?);
        }
        // What the database holds, from its rows: not the replica's heads, which may include
        // blocks this relay's clients brought in the same batch and `persist` has yet to store.
        for b in &blocks {
            let h = self.heads.entry(b.key()).or_insert(0);
            *h = (*h).max(b.last_seq());
        }
        feed(replica, now_ms, blocks, report);
        Ok(())
    }

    /// Sets every chain's head from its last stored block (one row per chain, through the
    /// `(chain, first_seq)` index): at start, and when notifications were missed.
    fn load_heads(&mut self, replica: &mut RelayReplica, report: &mut LoadReport) -> Result<()> {
        self.reconnect_if_closed()?;
        let rows = self
            .rt
            .block_on(self.client.query(
                "SELECT DISTINCT ON (chain) block FROM cairn_relay_blocks ORDER BY chain, first_seq DESC",
                &[],
            ))
            .map_err(pg)?;
        for row in rows {
            let bytes: Vec<u8> = row.get(0);
            let head = stored_block(&bytes)?;
            let cp = Checkpoint::of_block(&head);
            report.blocks += 1;
            report.records += cp.seq as usize;
            let h = self.heads.entry(head.key()).or_insert(0);
            *h = (*h).max(cp.seq);
            replica
                .restore_head(cp)
                .expect("invariant: the relay's replica has a block source");
        }
        Ok(())
    }

    /// One transaction: the lists and blocks, then the NOTIFY naming the inserted rows.
    fn store_rows(
        &mut self,
        lists: &[Vec<u8>],
        blocks: &[(Vec<u8>, i64, Vec<u8>)],
        purged: &[Vec<u8>],
    ) -> Result<()> {
        let instance = &self.instance;
        let client = &mut self.client;
        self.rt
            .block_on(async {
                let tx = client.transaction().await?;
                for l in lists {
                    let hash = blake3::hash(l).as_bytes().to_vec();
                    tx.execute(
                        "INSERT INTO cairn_relay_writers (hash, list) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        &[&hash, l],
                    )
                    .await?;
                }
                let (mut from, mut to) = (i64::MAX, 0i64);
                for (chain, first, block) in blocks {
                    let rows = tx
                        .query(
                            "INSERT INTO cairn_relay_blocks (chain, first_seq, block) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING id",
                            &[chain, first, block],
                        )
                        .await?;
                    for r in rows {
                        let id: i64 = r.get(0);
                        from = from.min(id);
                        to = to.max(id);
                    }
                }
                for row in purged {
                    let hash = blake3::hash(row).as_bytes().to_vec();
                    tx.execute(
                        "INSERT INTO cairn_relay_purged (hash, row_key) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        &[&hash, row],
                    )
                    .await?;
                }
                // Delivered to listeners when (and only if) the transaction commits.
                let payload = format!("{instance} {from} {to}");
                tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
                    .await?;
                tx.commit().await
            })
            .map_err(pg)
    }
}

impl Durable for PgStore {
    fn load_into(&mut self, replica: &mut RelayReplica, _now_ms: u64) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        self.load_lists(replica, &mut report)?;
        self.load_heads(replica, &mut report)?;
        Ok(report)
    }

    fn stored_head(&self, key: &ChainKey) -> u64 {
        self.heads.get(key).copied().unwrap_or(0)
    }

    fn read_blocks(
        &mut self,
        key: &ChainKey,
        from: u64,
        upto: u64,
        max_records: usize,
    ) -> Result<Vec<(Block, usize)>> {
        let chain = chain_hash(key).to_vec();
        let (from, upto) = (from as i64, upto.min(i64::MAX as u64) as i64);
        // Blocks hold at least one record each: `max_records` rows are always enough.
        let limit = max_records.clamp(1, 100_000) as i64;
        const READ: &str = "SELECT block FROM cairn_relay_blocks WHERE chain = $1 \
            AND first_seq <= $3 AND first_seq >= COALESCE((SELECT max(first_seq) \
            FROM cairn_relay_blocks WHERE chain = $1 AND first_seq <= $2), 0) \
            ORDER BY first_seq LIMIT $4";
        self.reconnect_if_closed()?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&chain, &from, &upto, &limit];
        let rows = match self.rt.block_on(self.client.query(READ, &params)) {
            Err(_) if self.reconnect_if_closed()? => {
                self.rt.block_on(self.client.query(READ, &params))
            }
            r => r,
        }
        .map_err(pg)?;
        let mut out = Vec::new();
        let mut n = 0;
        for row in rows {
            if n >= max_records.max(1) {
                break;
            }
            let bytes: Vec<u8> = row.get(0);
            let b = stored_block(&bytes)?;
            if b.last_seq() as i64 > upto {
                break;
            }
            n += b.records.len();
            out.push((b, bytes.len()));
        }
        Ok(out)
    }

    fn persist(&mut self, replica: &RelayReplica) -> Result<Vec<RowKey>> {
        let (new_lists, new_blocks) = unsaved(replica, &self.heads, &self.lists);
        if new_lists.is_empty() && new_blocks.is_empty() {
            return Ok(Vec::new());
        }
        let purged = purges(new_blocks.iter().map(|(_, b)| *b));
        let rows: Vec<Vec<u8>> = purged.iter().map(encode_row).collect();
        let lists: Vec<Vec<u8>> = new_lists
            .iter()
            .map(|l| {
                let mut w = Writer::new();
                l.encode(&mut w);
                w.buf
            })
            .collect();
        let blocks: Vec<(Vec<u8>, i64, Vec<u8>)> = new_blocks
            .iter()
            .map(|(k, b)| (chain_hash(k).to_vec(), b.first_seq() as i64, b.to_bytes()))
            .collect();
        // Safe to run twice: rows already there are skipped (`ON CONFLICT DO NOTHING`), and a
        // transaction cut by a lost connection either committed whole or not at all.
        self.reconnect_if_closed()?;
        let result = self.store_rows(&lists, &blocks, &rows);
        if result.is_err() && self.reconnect_if_closed()? {
            self.store_rows(&lists, &blocks, &rows)?;
        } else {
            result?;
        }
        for l in new_lists {
            self.lists.insert(l.sig);
        }
        for (key, b) in new_blocks {
            let h = self.heads.entry(key).or_insert(0);
            *h = (*h).max(b.last_seq());
        }
        Ok(purged)
    }

    fn refresh(
        &mut self,
        replica: &mut RelayReplica,
        now_ms: u64,
        from: i64,
        to: i64,
    ) -> Result<LoadReport> {
        // Reading again is harmless (what is held is a replay): retry once on a new connection.
        match self.refresh_once(replica, now_ms, from, to) {
            Err(_) if self.reconnect_if_closed()? => self.refresh_once(replica, now_ms, from, to),
            r => r,
        }
    }

    fn bind_key(&mut self, key: &AuthorId, user: &str) -> Result<String> {
        // Insert if absent, then read: whichever relay inserted first decides, for all of them.
        self.reconnect_if_closed()?;
        match self.bind_once(key, user) {
            Err(_) if self.reconnect_if_closed()? => self.bind_once(key, user),
            r => r,
        }
    }

    fn recoverable(&self) -> bool {
        true
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

impl PgStore {
    fn bind_once(&mut self, key: &AuthorId, user: &str) -> Result<String> {
        let key = key.0.to_vec();
        let client = &self.client;
        self.rt
            .block_on(async {
                client
                    .execute(
                        "INSERT INTO cairn_relay_users (key, app_user) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        &[&key, &user],
                    )
                    .await?;
                let row = client
                    .query_one("SELECT app_user FROM cairn_relay_users WHERE key = $1", &[&key])
                    .await?;
                Ok::<String, tokio_postgres::Error>(row.get(0))
            })
            .map_err(pg)
    }

    fn refresh_once(
        &mut self,
        replica: &mut RelayReplica,
        now_ms: u64,
        from: i64,
        to: i64,
    ) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        self.load_lists(replica, &mut report)?;
        let everything = from <= 1 && to == i64::MAX;
        if from <= to && !everything {
            self.load_blocks(replica, now_ms, (from, to), &mut report)?;
        }
        if everything || report.refused > 0 {
            // Notifications were missed (a gap, or a lost LISTEN): take every chain's stored
            // head instead. The rows are this relay's own store, verified when they were
            // stored; what the replica refused of the range is counted, not held against it.
            let mut heads = LoadReport::default();
            self.load_heads(replica, &mut heads)?;
            report.refused = 0;
        }
        Ok(report)
    }
}

/// A LISTEN connection: its client (dropping it ends the LISTEN) and its notifications, until
/// the connection ends.
async fn subscribe(
    url: &str,
) -> Result<(
    Client,
    mpsc::UnboundedReceiver<tokio_postgres::Notification>,
)> {
    let (client, mut conn) = tokio_postgres::connect(url, NoTls).await.map_err(pg)?;
    let (tx, rx) = mpsc::unbounded_channel();
    // Polling the connection runs the client's queries and yields the notifications.
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(n).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(pg)?;
    Ok((client, rx))
}

/// LISTENs on the relay channel (its own connection) and turns other relays' NOTIFYs into
/// `Command::Refresh`. Returns once the first LISTEN is in place. When the connection is lost
/// (the server restarted), it connects and LISTENs again, backing off up to 2 s, then asks the
/// core to read everything again: notifications sent meanwhile are lost.
pub async fn listen(
    url: &str,
    instance: String,
    core: mpsc::UnboundedSender<Command>,
) -> Result<()> {
    let first = subscribe(url).await?;
    let url = url.to_string();
    tokio::spawn(async move {
        let mut current = Some(first);
        let mut backoff = Duration::from_millis(100);
        loop {
            if core.is_closed() {
                return;
            }
            let (client, mut rx) = match current.take() {
                Some(c) => c,
                None => match subscribe(&url).await {
                    Ok(c) => {
                        backoff = Duration::from_millis(100);
                        eprintln!("cairn-relay: listening for other relays again");
                        if core
                            .send(Command::Refresh {
                                from: 1,
                                to: i64::MAX,
                            })
                            .is_err()
                        {
                            return;
                        }
                        c
                    }
                    Err(_) => {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                },
            };
            while let Some(n) = rx.recv().await {
                let mut parts = n.payload().split(' ');
                let (Some(who), Some(from), Some(to)) = (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                if who == instance {
                    continue;
                }
                let (Ok(from), Ok(to)) = (from.parse(), to.parse()) else {
                    continue;
                };
                if core.send(Command::Refresh { from, to }).is_err() {
                    return;
                }
            }
            drop(client);
            eprintln!("cairn-relay: lost the LISTEN connection to PostgreSQL; reconnecting");
        }
    });
    Ok(())
}
