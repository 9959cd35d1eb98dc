//! The shared store: a Postgres database (`--store postgres://user@host:port/db`).
//!
//! Opening connects, runs the versioned migrations below under an advisory lock (so
//! relay processes starting together migrate once), creates the secrets one relay
//! process generates and every other one then reads (so resume tokens and VAPID
//! signatures verify on every node), and loads everything. Then one task writes: each
//! burst of operations is one transaction, each statement prepared once per connection.
//!
//! An outage never blocks a connection task: a transaction that fails or takes longer
//! than the store timeout drops the connection, marks the store unavailable (pairing
//! and new registrations are refused with a clear error meanwhile, see
//! [`Store::available`](super::Store::available)) and is retried on a fresh connection
//! with jittered backoff, in order, until it commits; later writes wait in the bounded
//! queue behind it. Frames between connected peers never touch the database.

use std::sync::Arc;
use std::time::Duration;

use rand::RngExt as _;
use terminull_protocol::relay::DeviceRecord;
use terminull_protocol::{BridgeId, DeviceId};
use tokio::sync::mpsc;
use tokio_postgres::{Client, NoTls, Statement};

use super::{
    Batch, Changes, Health, JWT_KEY, MAX_BATCH, QueuedPush, Snapshot, StoreOp, StoredBridge, StoredSubscription,
    VAPID_KEY,
};
use crate::config::postgres_location;
use crate::error::StoreError;
use crate::webpush::VapidKey;

/// The schema, one entry per version, applied in order, each once (recorded in
/// `relay_schema_migrations`). Never edit a released entry: add one.
pub(crate) const MIGRATIONS: &[(i32, &str, &str)] = &[(
    1,
    "registrations, device registries, push subscriptions, held pushes, secrets",
    "CREATE TABLE relay_bridges (
         bridge_id text PRIMARY KEY,
         record jsonb NOT NULL
     );
     CREATE TABLE relay_devices (
         bridge_id text PRIMARY KEY,
         devices jsonb NOT NULL
     );
     CREATE TABLE relay_push_subscriptions (
         bridge_id text NOT NULL,
         device_id text NOT NULL,
         record jsonb NOT NULL,
         PRIMARY KEY (bridge_id, device_id)
     );
     CREATE TABLE relay_push_queue (
         bridge_id text NOT NULL,
         device_id text NOT NULL,
         seq bigint NOT NULL,
         record jsonb NOT NULL,
         PRIMARY KEY (bridge_id, device_id, seq)
     );
     CREATE TABLE relay_secrets (
         name text PRIMARY KEY,
         value bytea NOT NULL
     );",
)];

/// The advisory lock migrations hold ("relay" in ASCII).
const MIGRATION_LOCK: i64 = 0x72_65_6c_61_79;
/// How often an idle writer checks that the database answers.
const PING_EVERY: Duration = Duration::from_secs(5);
/// The longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What [`open`] hands the store handle.
pub(crate) type Opened = (String, mpsc::Sender<StoreOp>, tokio::task::JoinHandle<()>, Arc<Health>, Snapshot);

/// Connects, migrates, creates missing secrets, loads everything and starts the writer.
pub(crate) async fn open(
    url: &str,
    queue_ops: usize,
    timeout: Duration,
    changes: Arc<Changes>,
) -> Result<Opened, StoreError> {
    let location = postgres_location(url);
    let mut client = connect(url, &location, timeout).await?;
    within(timeout, &location, "migrating", migrate(&mut client, &location)).await?;
    let snapshot = within(timeout, &location, "loading", load(&client, &location)).await?;
    let (tx, rx) = mpsc::channel(queue_ops);
    let health = Arc::new(Health::new());
    let writer = Writer {
        url: url.to_owned(),
        location: location.clone(),
        timeout,
        health: Arc::clone(&health),
        conn: Some(Conn::new(client, &location).await?),
        changes,
    };
    let handle = tokio::spawn(writer.run(rx));
    Ok((location, tx, handle, health, snapshot))
}

/// Runs `fut` within `timeout`, naming what timed out.
async fn within<T>(
    timeout: Duration,
    location: &str,
    during: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(timeout, fut).await.map_err(|_| StoreError::Timeout {
        location: location.to_owned(),
        during,
        timeout,
    })?
}

fn pg_err<'a>(location: &'a str, during: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError + 'a {
    move |source| StoreError::Postgres { location: location.to_owned(), during, source: Box::new(source) }
}

/// A connection whose I/O runs in its own task.
async fn connect(url: &str, location: &str, timeout: Duration) -> Result<Client, StoreError> {
    let connecting = async {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await.map_err(pg_err(location, "connecting"))?;
        let where_ = location.to_owned();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(store = %where_, error = %e, "the database connection ended");
            }
        });
        Ok(client)
    };
    within(timeout, location, "connecting", connecting).await
}

/// Applies the migrations this database lacks, then creates the secrets if missing.
async fn migrate(client: &mut Client, location: &str) -> Result<(), StoreError> {
    let err = pg_err(location, "migrating");
    let txn = client.transaction().await.map_err(&err)?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(&err)?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS relay_schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(&err)?;
    let row =
        txn.query_one("SELECT coalesce(max(version), 0) FROM relay_schema_migrations", &[]).await.map_err(&err)?;
    let current: i32 = row.get(0);
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if current > known {
        return Err(StoreError::SchemaTooNew { location: location.to_owned(), found: current, known });
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tracing::info!(store = %location, version, name, "applying a database migration");
        txn.batch_execute(sql).await.map_err(&err)?;
        txn.execute("INSERT INTO relay_schema_migrations (version, name) VALUES ($1, $2)", &[version, name])
            .await
            .map_err(&err)?;
    }
    let jwt = terminull_protocol::crypto::random_bytes::<32>();
    let vapid = VapidKey::generate().private_key_base64url();
    for (name, value) in [(JWT_KEY, jwt.to_vec()), (VAPID_KEY, vapid.into_bytes())] {
        txn.execute(
            "INSERT INTO relay_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            &[&name, &value],
        )
        .await
        .map_err(&err)?;
    }
    txn.commit().await.map_err(&err)
}

/// Everything in the database.
async fn load(client: &Client, location: &str) -> Result<Snapshot, StoreError> {
    let err = pg_err(location, "loading");
    let unreadable =
        |what: String, detail: String| StoreError::Unreadable { location: location.to_owned(), what, detail };
    let secret = |rows: &[tokio_postgres::Row], name: &str| -> Option<Vec<u8>> {
        rows.iter().find(|r| r.get::<_, &str>(0) == name).map(|r| r.get::<_, Vec<u8>>(1))
    };
    let secrets = client.query("SELECT name, value FROM relay_secrets", &[]).await.map_err(&err)?;
    let jwt_key: [u8; 32] = secret(&secrets, JWT_KEY)
        .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok())
        .ok_or_else(|| unreadable("secret `jwt_hmac_key`".into(), "missing or not 32 bytes".into()))?;
    let vapid_text = secret(&secrets, VAPID_KEY)
        .and_then(|v| String::from_utf8(v).ok())
        .ok_or_else(|| unreadable("secret `vapid_private_key`".into(), "missing or not UTF-8".into()))?;
    let vapid_key = VapidKey::from_base64url(&vapid_text)
        .map_err(|e| unreadable("secret `vapid_private_key`".into(), e.to_string()))?;
    let mut snapshot = Snapshot::empty(jwt_key, vapid_key);

    // A value that does not decode is skipped with an error in the log rather than
    // refusing to start: one bad entry must not take every bridge offline.
    for row in client.query("SELECT bridge_id, record::text FROM relay_bridges", &[]).await.map_err(&err)? {
        let id: String = row.get(0);
        match serde_json::from_str::<StoredBridge>(row.get(1)) {
            Ok(b) => snapshot.bridges.push((BridgeId(id), b)),
            Err(e) => tracing::error!(bridge_id = id, error = %e, "skipping an unreadable stored bridge"),
        }
    }
    for row in client.query("SELECT bridge_id, devices::text FROM relay_devices", &[]).await.map_err(&err)? {
        let id: String = row.get(0);
        match serde_json::from_str(row.get(1)) {
            Ok(d) => snapshot.devices.push((BridgeId(id), d)),
            Err(e) => tracing::error!(bridge_id = id, error = %e, "skipping an unreadable device registry"),
        }
    }
    let subs = "SELECT bridge_id, device_id, record::text FROM relay_push_subscriptions";
    for row in client.query(subs, &[]).await.map_err(&err)? {
        let (bridge, device): (String, String) = (row.get(0), row.get(1));
        match serde_json::from_str::<StoredSubscription>(row.get(2)) {
            Ok(s) => snapshot.subscriptions.push((BridgeId(bridge), DeviceId(device), s)),
            Err(e) => {
                tracing::error!(bridge_id = bridge, device_id = device, error = %e, "skipping an unreadable push subscription")
            }
        }
    }
    let queue = "SELECT bridge_id, device_id, seq, record::text FROM relay_push_queue ORDER BY seq";
    for row in client.query(queue, &[]).await.map_err(&err)? {
        let (bridge, device, seq): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
        match serde_json::from_str::<QueuedPush>(row.get(3)) {
            Ok(q) => snapshot.queue.push((BridgeId(bridge), DeviceId(device), seq.unsigned_abs(), q)),
            Err(e) => {
                tracing::error!(bridge_id = bridge, device_id = device, error = %e, "skipping an unreadable queued push")
            }
        }
    }
    Ok(snapshot)
}

/// One bridge's stored state, as another relay process committed it.
#[derive(Debug)]
pub(crate) struct BridgeRows {
    /// The registration; `None` when it was deleted.
    pub bridge: Option<StoredBridge>,
    /// The device registry.
    pub devices: Option<Vec<DeviceRecord>>,
    /// Push subscriptions by device.
    pub subscriptions: Vec<(DeviceId, StoredSubscription)>,
    /// Held pushes, oldest first.
    pub queue: Vec<(DeviceId, u64, QueuedPush)>,
}

/// Reads one bridge's rows (for the bus: another process changed them).
pub(crate) async fn load_bridge(client: &Client, id: &BridgeId) -> Result<BridgeRows, tokio_postgres::Error> {
    let id = id.as_str();
    let bridge = client.query_opt("SELECT record::text FROM relay_bridges WHERE bridge_id = $1", &[&id]).await?;
    let devices = client.query_opt("SELECT devices::text FROM relay_devices WHERE bridge_id = $1", &[&id]).await?;
    let subs = client
        .query("SELECT device_id, record::text FROM relay_push_subscriptions WHERE bridge_id = $1", &[&id])
        .await?;
    let queue = client
        .query("SELECT device_id, seq, record::text FROM relay_push_queue WHERE bridge_id = $1 ORDER BY seq", &[&id])
        .await?;
    let decode = |what: &str, text: &str| {
        tracing::error!(bridge_id = id, what, text_len = text.len(), "skipping an unreadable stored value");
    };
    Ok(BridgeRows {
        bridge: bridge
            .and_then(|r| serde_json::from_str(r.get(0)).inspect_err(|_| decode("registration", r.get(0))).ok()),
        devices: devices
            .and_then(|r| serde_json::from_str(r.get(0)).inspect_err(|_| decode("device registry", r.get(0))).ok()),
        subscriptions: subs
            .iter()
            .filter_map(|r| Some((DeviceId(r.get(0)), serde_json::from_str(r.get(1)).ok()?)))
            .collect(),
        queue: queue
            .iter()
            .filter_map(|r| {
                let seq: i64 = r.get(1);
                Some((DeviceId(r.get(0)), seq.unsigned_abs(), serde_json::from_str(r.get(2)).ok()?))
            })
            .collect(),
    })
}

/// A read-only connection for [`load_bridge`].
pub(crate) async fn reader(url: &str, timeout: Duration) -> Result<Client, StoreError> {
    connect(url, &postgres_location(url), timeout).await
}

/// Reads everything at `url` (for `terminull-relay export`), migrating first.
pub(crate) async fn read_all(url: &str, timeout: Duration) -> Result<Snapshot, StoreError> {
    let location = postgres_location(url);
    let mut client = connect(url, &location, timeout).await?;
    within(timeout, &location, "migrating", migrate(&mut client, &location)).await?;
    within(timeout, &location, "loading", load(&client, &location)).await
}

/// Writes everything in `snapshot`, its secrets replacing the database's, in one
/// transaction (for `terminull-relay import`).
pub(crate) async fn write_all(url: &str, snapshot: &Snapshot, timeout: Duration) -> Result<(), StoreError> {
    let location = postgres_location(url);
    let mut client = connect(url, &location, timeout).await?;
    within(timeout, &location, "migrating", migrate(&mut client, &location)).await?;
    let err = pg_err(&location, "importing");
    let conn = Conn::new(client, &location).await?;
    let mut conn = conn;
    let txn = conn.client.transaction().await.map_err(&err)?;
    let vapid = snapshot.vapid_key.private_key_base64url().into_bytes();
    for (name, value) in [(JWT_KEY, snapshot.jwt_key.to_vec()), (VAPID_KEY, vapid)] {
        txn.execute("UPDATE relay_secrets SET value = $2 WHERE name = $1", &[&name, &value]).await.map_err(&err)?;
    }
    for op in snapshot.ops() {
        conn.statements.apply(&txn, &op).await.map_err(&err)?;
    }
    txn.commit().await.map_err(&err)
}

/// The statements the writer uses, prepared on its connection.
struct Statements {
    put_bridge: Statement,
    put_devices: Statement,
    put_subscription: Statement,
    delete_subscription: Statement,
    put_queued: Statement,
    delete_queued: Statement,
    delete_bridge: [Statement; 4],
}

impl Statements {
    async fn prepare(client: &Client) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            put_bridge: client
                .prepare(
                    "INSERT INTO relay_bridges (bridge_id, record) VALUES ($1, $2::text::jsonb)
                     ON CONFLICT (bridge_id) DO UPDATE SET record = EXCLUDED.record",
                )
                .await?,
            put_devices: client
                .prepare(
                    "INSERT INTO relay_devices (bridge_id, devices) VALUES ($1, $2::text::jsonb)
                     ON CONFLICT (bridge_id) DO UPDATE SET devices = EXCLUDED.devices",
                )
                .await?,
            put_subscription: client
                .prepare(
                    "INSERT INTO relay_push_subscriptions (bridge_id, device_id, record) VALUES ($1, $2, $3::text::jsonb)
                     ON CONFLICT (bridge_id, device_id) DO UPDATE SET record = EXCLUDED.record",
                )
                .await?,
            delete_subscription: client
                .prepare("DELETE FROM relay_push_subscriptions WHERE bridge_id = $1 AND device_id = $2")
                .await?,
            put_queued: client
                .prepare(
                    "INSERT INTO relay_push_queue (bridge_id, device_id, seq, record) VALUES ($1, $2, $3, $4::text::jsonb)
                     ON CONFLICT (bridge_id, device_id, seq) DO UPDATE SET record = EXCLUDED.record",
                )
                .await?,
            delete_queued: client
                .prepare("DELETE FROM relay_push_queue WHERE bridge_id = $1 AND device_id = $2 AND seq = $3")
                .await?,
            delete_bridge: [
                client.prepare("DELETE FROM relay_bridges WHERE bridge_id = $1").await?,
                client.prepare("DELETE FROM relay_devices WHERE bridge_id = $1").await?,
                client.prepare("DELETE FROM relay_push_subscriptions WHERE bridge_id = $1").await?,
                client.prepare("DELETE FROM relay_push_queue WHERE bridge_id = $1").await?,
            ],
        })
    }

    async fn apply(&self, txn: &tokio_postgres::Transaction<'_>, op: &StoreOp) -> Result<(), tokio_postgres::Error> {
        match op {
            StoreOp::PutBridge(id, record) => {
                txn.execute(&self.put_bridge, &[&id.as_str(), &text(record)]).await?;
            }
            StoreOp::PutDevices(id, list) => {
                txn.execute(&self.put_devices, &[&id.as_str(), &text(list)]).await?;
            }
            StoreOp::PutSubscription(b, d, s) => {
                txn.execute(&self.put_subscription, &[&b.as_str(), &d.as_str(), &text(s)]).await?;
            }
            StoreOp::DeleteSubscription(b, d) => {
                txn.execute(&self.delete_subscription, &[&b.as_str(), &d.as_str()]).await?;
            }
            StoreOp::PutQueued(b, d, seq, entry) => {
                let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
                txn.execute(&self.put_queued, &[&b.as_str(), &d.as_str(), &seq, &text(entry)]).await?;
            }
            StoreOp::DeleteQueued(b, d, seq) => {
                let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
                txn.execute(&self.delete_queued, &[&b.as_str(), &d.as_str(), &seq]).await?;
            }
            StoreOp::DeleteBridge(b) => {
                for statement in &self.delete_bridge {
                    txn.execute(statement, &[&b.as_str()]).await?;
                }
            }
            StoreOp::Flush(_) | StoreOp::Stop => {}
        }
        Ok(())
    }
}

/// The JSON text of a stored value.
fn text<T: serde::Serialize>(value: &T) -> String {
    String::from_utf8(super::json(value)).unwrap_or_default()
}

/// A connection with its prepared statements.
struct Conn {
    client: Client,
    statements: Statements,
}

impl Conn {
    async fn new(client: Client, location: &str) -> Result<Self, StoreError> {
        let statements = Statements::prepare(&client).await.map_err(pg_err(location, "preparing statements"))?;
        Ok(Self { client, statements })
    }
}

/// The writer task's state.
struct Writer {
    url: String,
    location: String,
    timeout: Duration,
    health: Arc<Health>,
    /// `None` after a failure, until a reconnection succeeds.
    conn: Option<Conn>,
    /// Told what each commit changed.
    changes: Arc<Changes>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<StoreOp>) {
        loop {
            let first = tokio::select! {
                op = rx.recv() => op,
                _ = tokio::time::sleep(PING_EVERY) => {
                    self.ping().await;
                    continue;
                }
            };
            let Some(first) = first else { return };
            let mut ops = vec![first];
            while ops.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => ops.push(op),
                    Err(_) => break,
                }
            }
            let mut batch = Batch::sort(ops);
            self.commit(&mut batch).await;
            if batch.stop {
                return;
            }
        }
    }

    /// Commits `batch.writes`, retrying on fresh connections until it works (or the
    /// relay stops: `batch.stop` set means the last attempt is the only one).
    async fn commit(&mut self, batch: &mut Batch) {
        let mut attempt: u32 = 0;
        loop {
            self.health.busy();
            // A batch of flushes only still makes a round trip: a flush is how pairing
            // checks that the database answers.
            let result = self.try_commit(&batch.writes).await;
            match result {
                Ok(()) => {
                    self.health.succeeded();
                    self.changes.committed(&batch.writes);
                    batch.answer(&Ok(()));
                    return;
                }
                Err(e) => {
                    tracing::error!(store = %self.location, error = %e, attempt, "committing relay state failed; retrying");
                    self.conn = None;
                    self.health.failed(e.clone());
                    batch.answer(&Err(e));
                    if batch.stop {
                        return;
                    }
                }
            }
            attempt = attempt.saturating_add(1);
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    async fn try_commit(&mut self, writes: &[StoreOp]) -> Result<(), String> {
        let timeout = self.timeout;
        let fut = async {
            if self.conn.is_none() {
                let client = connect(&self.url, &self.location, timeout).await.map_err(|e| e.to_string())?;
                self.conn = Some(Conn::new(client, &self.location).await.map_err(|e| e.to_string())?);
            }
            let Some(conn) = self.conn.as_mut() else { return Err("no connection".to_owned()) };
            let txn = conn.client.transaction().await.map_err(|e| e.to_string())?;
            for op in writes {
                conn.statements.apply(&txn, op).await.map_err(|e| e.to_string())?;
            }
            txn.commit().await.map_err(|e| e.to_string())
        };
        match tokio::time::timeout(timeout, fut).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        }
    }

    /// An idle check that the database answers, so that an outage shows before a
    /// pairing needs the database.
    async fn ping(&mut self) {
        self.health.busy();
        let result = match &self.conn {
            Some(conn) => match tokio::time::timeout(self.timeout, conn.client.simple_query("SELECT 1")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
            },
            None => self.try_commit(&[]).await,
        };
        match result {
            Ok(()) => self.health.succeeded(),
            Err(e) => {
                tracing::warn!(store = %self.location, error = %e, "the relay database does not answer");
                self.conn = None;
                self.health.failed(e);
            }
        }
    }
}

/// The pause before reconnection attempt `attempt` (1-based): doubling from 100 ms up to
/// [`MAX_BACKOFF`], with ±50 % jitter so that nodes do not retry in step.
fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(100).saturating_mul(1u32 << attempt.min(6)).min(MAX_BACKOFF);
    base.mul_f64(rand::rng().random_range(0.5..1.5))
}
