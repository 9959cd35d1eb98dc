//! The relay's durable state: one redb file (`relay.redb` in the data directory, the
//! default) or a Postgres database (`--store postgres://…`, see `postgres.rs`).
//!
//! The relay keeps its working state in memory and writes every change through here.
//! Writes go to one writer (a thread for redb, a task for Postgres) in order, batched
//! into one transaction per burst, so a slow disk or database never blocks a connection
//! task and the per-frame path never touches storage; the in-memory copy stays
//! authoritative while the relay runs, and [`Store::open`] reloads it on start.
//!
//! Tables (keys → JSON values unless noted; the Postgres tables carry the same names
//! with a `relay_` prefix, the JSON in `jsonb` columns):
//! - `bridges`: bridge id → [`StoredBridge`] (public keys, last agents, resumable sessions).
//! - `devices`: bridge id → the bridge's `Vec<DeviceRecord>`.
//! - `push_subscriptions`: (bridge id, device id) → [`StoredSubscription`].
//! - `push_queue`: (bridge id, device id, sequence) → [`QueuedPush`].
//! - `secrets`: name → raw bytes (`jwt_hmac_key`: 32 bytes; `vapid_private_key`: the
//!   base64url P-256 scalar).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use terminull_protocol::crypto::keys::PublicKeys;
use terminull_protocol::relay::{AgentSummary, DeviceRecord, Push};
use terminull_protocol::{BridgeId, DeviceId, SessionId};
use tokio::sync::{mpsc, oneshot};

use crate::config::{RelayConfig, StoreLocation};
use crate::error::StoreError;
use crate::webpush::{Subscription, VapidKey};

pub(crate) mod postgres;
pub(crate) mod redb;

/// Name of the JWT (resume token) HMAC key in `secrets`.
const JWT_KEY: &str = "jwt_hmac_key";
/// Name of the VAPID private key in `secrets`.
const VAPID_KEY: &str = "vapid_private_key";

/// Store operations applied in one transaction at most.
const MAX_BATCH: usize = 1024;
/// A write in progress for longer than this makes the store count as unavailable
/// (a stalled database): pairing and new registrations are refused meanwhile.
const STALL: Duration = Duration::from_secs(2);

/// A bridge as the relay remembers it between runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredBridge {
    /// Its public keys (the bridge id is derived from them).
    pub keys: PublicKeys,
    /// The agents of its last registration.
    pub agents: Vec<AgentSummary>,
    /// Sessions a client may resume, oldest first.
    pub resumable: Vec<SessionId>,
    /// When the bridge was last connected, Unix seconds (0 in stores written before
    /// registrations expired: read as "now").
    #[serde(default)]
    pub last_seen: u64,
    /// Whether the registration is established: its bridge connected again after
    /// registering, or one of its devices authenticated. Decides its lifetime.
    #[serde(default)]
    pub established: bool,
}

/// A device's Web Push subscription and the `ts` it was registered with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredSubscription {
    /// Where and how to push.
    pub subscription: Subscription,
    /// The registration's timestamp, Unix seconds: older requests are refused.
    pub ts: u64,
}

/// A push held for an offline device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QueuedPush {
    /// The frame, as the bridge sent it.
    pub push: Push,
    /// When it was queued, Unix seconds.
    pub queued_at: u64,
}

/// Everything loaded at start.
pub(crate) struct Snapshot {
    pub bridges: Vec<(BridgeId, StoredBridge)>,
    pub devices: Vec<(BridgeId, Vec<DeviceRecord>)>,
    pub subscriptions: Vec<(BridgeId, DeviceId, StoredSubscription)>,
    pub queue: Vec<(BridgeId, DeviceId, u64, QueuedPush)>,
    pub jwt_key: [u8; 32],
    pub vapid_key: VapidKey,
}

impl Snapshot {
    /// No state, only the secrets.
    pub(crate) fn empty(jwt_key: [u8; 32], vapid_key: VapidKey) -> Self {
        Self {
            bridges: Vec::new(),
            devices: Vec::new(),
            subscriptions: Vec::new(),
            queue: Vec::new(),
            jwt_key,
            vapid_key,
        }
    }

    /// The writes that recreate this state (secrets apart), for export and import.
    pub(crate) fn ops(&self) -> Vec<StoreOp> {
        let mut ops = Vec::new();
        ops.extend(self.bridges.iter().map(|(id, b)| StoreOp::PutBridge(id.clone(), b.clone())));
        ops.extend(self.devices.iter().map(|(id, d)| StoreOp::PutDevices(id.clone(), d.clone())));
        ops.extend(
            self.subscriptions.iter().map(|(b, d, s)| StoreOp::PutSubscription(b.clone(), d.clone(), s.clone())),
        );
        ops.extend(self.queue.iter().map(|(b, d, seq, q)| StoreOp::PutQueued(b.clone(), d.clone(), *seq, q.clone())));
        ops
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secrets.
        f.debug_struct("Snapshot")
            .field("bridges", &self.bridges.len())
            .field("queue", &self.queue.len())
            .finish_non_exhaustive()
    }
}

/// One write.
#[derive(Debug)]
pub(crate) enum StoreOp {
    PutBridge(BridgeId, StoredBridge),
    PutDevices(BridgeId, Vec<DeviceRecord>),
    PutSubscription(BridgeId, DeviceId, StoredSubscription),
    DeleteSubscription(BridgeId, DeviceId),
    PutQueued(BridgeId, DeviceId, u64, QueuedPush),
    DeleteQueued(BridgeId, DeviceId, u64),
    /// Deletes a bridge's registration, device registry, subscriptions and held pushes.
    DeleteBridge(BridgeId),
    /// Answered once every earlier operation is committed.
    Flush(oneshot::Sender<Result<(), String>>),
    /// Commit what is pending and stop.
    Stop,
}

/// Why the store cannot take a write that must be durable now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the relay's database ({location}) is unavailable: {reason}; retry in a few seconds")]
pub(crate) struct Unavailable {
    /// Which database.
    pub location: String,
    /// The last error, or how long a write has been waiting.
    pub reason: String,
}

/// Whether the writer's last transaction succeeded and how long the current one runs.
#[derive(Debug)]
pub(crate) struct Health {
    started: Instant,
    /// Milliseconds after `started` when the running transaction began; 0 when idle.
    busy_since_ms: AtomicU64,
    failing: AtomicBool,
    last_error: Mutex<String>,
}

impl Health {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            busy_since_ms: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            last_error: Mutex::new(String::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX).max(1)
    }

    /// A transaction begins.
    pub(crate) fn busy(&self) {
        self.busy_since_ms.store(self.now_ms(), Ordering::Release);
    }

    /// The transaction committed.
    pub(crate) fn succeeded(&self) {
        self.busy_since_ms.store(0, Ordering::Release);
        if self.failing.swap(false, Ordering::AcqRel) {
            tracing::info!("the relay database is reachable again");
        }
    }

    /// The transaction failed with `error`.
    pub(crate) fn failed(&self, error: String) {
        self.busy_since_ms.store(0, Ordering::Release);
        self.failing.store(true, Ordering::Release);
        if let Ok(mut last) = self.last_error.lock() {
            *last = error;
        }
    }

    /// `Err(reason)` while the last transaction failed or the current one is stalled.
    fn check(&self) -> Result<(), String> {
        if self.failing.load(Ordering::Acquire) {
            return Err(self.last_error.lock().map(|e| e.clone()).unwrap_or_default());
        }
        let since = self.busy_since_ms.load(Ordering::Acquire);
        let waited = if since == 0 { 0 } else { self.now_ms().saturating_sub(since) };
        if waited > u64::try_from(STALL.as_millis()).unwrap_or(u64::MAX) {
            return Err(format!("a write has been waiting {} ms for it", waited));
        }
        Ok(())
    }
}

/// Bridges whose stored state a committed transaction changed, for the bus to announce
/// to the other relay processes (coalesced: a bridge changed twice is announced once).
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pending: Mutex<std::collections::HashSet<BridgeId>>,
    notify: tokio::sync::Notify,
}

impl Changes {
    /// At most this many bridges wait to be announced; past it the oldest news is
    /// dropped (logged): the other nodes then see that bridge's change on its next one.
    const MAX_PENDING: usize = 65_536;

    /// Records what `writes` changed (called after they committed).
    pub(crate) fn committed(&self, writes: &[StoreOp]) {
        let Ok(mut pending) = self.pending.lock() else { return };
        for op in writes {
            if let Some(id) = op.bridge() {
                if pending.len() >= Self::MAX_PENDING {
                    tracing::warn!(bridge_id = %id, "too many bridge changes waiting for the bus; one not announced");
                    continue;
                }
                pending.insert(id.clone());
            }
        }
        drop(pending);
        self.notify.notify_one();
    }

    /// Waits for changes and takes them.
    pub(crate) async fn next(&self) -> Vec<BridgeId> {
        loop {
            let taken: Vec<BridgeId> = self.pending.lock().map(|mut p| p.drain().collect()).unwrap_or_default();
            if !taken.is_empty() {
                return taken;
            }
            self.notify.notified().await;
        }
    }
}

impl StoreOp {
    /// The bridge whose state this write changes.
    fn bridge(&self) -> Option<&BridgeId> {
        match self {
            StoreOp::PutBridge(b, _)
            | StoreOp::PutDevices(b, _)
            | StoreOp::PutSubscription(b, _, _)
            | StoreOp::DeleteSubscription(b, _)
            | StoreOp::PutQueued(b, _, _, _)
            | StoreOp::DeleteQueued(b, _, _)
            | StoreOp::DeleteBridge(b) => Some(b),
            StoreOp::Flush(_) | StoreOp::Stop => None,
        }
    }
}

/// The writer: a thread (redb) or a task (Postgres).
#[derive(Debug)]
enum Writer {
    Thread(JoinHandle<()>),
    Task(tokio::task::JoinHandle<()>),
}

/// The handle to the writer.
#[derive(Debug)]
pub(crate) struct Store {
    /// Where the state is, for messages (never a password).
    location: String,
    tx: mpsc::Sender<StoreOp>,
    writer: Mutex<Option<Writer>>,
    health: Arc<Health>,
    /// How long [`Store::flush`] waits.
    flush_timeout: Duration,
    /// What committed transactions changed (Postgres only: other processes share it).
    changes: Option<Arc<Changes>>,
}

impl Store {
    /// Opens the store `config` names (creating tables, running migrations, creating
    /// missing secrets), loads it and starts the writer.
    pub(crate) async fn open(config: &RelayConfig) -> Result<(Store, Snapshot), StoreError> {
        let queue_ops = config.store_queue_ops;
        let (location, tx, writer, health, changes, snapshot) = match &config.store {
            StoreLocation::Redb => {
                let dir = config.data_dir.clone();
                let opened = tokio::task::spawn_blocking(move || self::redb::open(&dir, queue_ops))
                    .await
                    .map_err(|e| StoreError::WriterStopped { detail: format!("the redb loader failed: {e}") })??;
                let (location, tx, handle, health, snapshot) = opened;
                (location, tx, Writer::Thread(handle), health, None, snapshot)
            }
            StoreLocation::Postgres { url } => {
                let changes = Arc::new(Changes::default());
                let (location, tx, handle, health, snapshot) =
                    self::postgres::open(url, queue_ops, config.store_timeout, Arc::clone(&changes)).await?;
                (location, tx, Writer::Task(handle), health, Some(changes), snapshot)
            }
        };
        let store = Store {
            location,
            tx,
            writer: Mutex::new(Some(writer)),
            health,
            flush_timeout: config.store_timeout,
            changes,
        };
        Ok((store, snapshot))
    }

    /// What committed transactions changed, for the bus (Postgres stores only).
    pub(crate) fn changes(&self) -> Option<Arc<Changes>> {
        self.changes.clone()
    }

    /// Queues a write. Never blocks: when the queue is full the write is dropped and
    /// logged (the in-memory state still has it until the next restart).
    pub(crate) fn submit(&self, op: StoreOp) {
        match self.tx.try_send(op) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(op)) => {
                tracing::error!(store = %self.location, ?op, "store write queue full; write dropped");
            }
            Err(mpsc::error::TrySendError::Closed(op)) => {
                tracing::warn!(store = %self.location, ?op, "store closed; write dropped");
            }
        }
    }

    /// Whether the database took the last write and none is stalled (no waiting).
    pub(crate) fn available(&self) -> Result<(), Unavailable> {
        self.health.check().map_err(|reason| Unavailable { location: self.location.clone(), reason })
    }

    /// [`Store::available`], then every write queued so far committed within the store
    /// timeout: what pairing checks before it starts.
    pub(crate) async fn ready(&self) -> Result<(), Unavailable> {
        self.available()?;
        self.flush().await.map_err(|e| Unavailable { location: self.location.clone(), reason: e.to_string() })
    }

    /// Waits (at most the store timeout) until every write queued so far is committed.
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let timeout = self.flush_timeout;
        let timed_out = || StoreError::Timeout { location: self.location.clone(), during: "committing", timeout };
        let (ack, done) = oneshot::channel();
        let sent = tokio::time::timeout(timeout, self.tx.send(StoreOp::Flush(ack))).await.map_err(|_| timed_out())?;
        sent.map_err(|_| StoreError::WriterStopped { detail: "the relay is stopping".into() })?;
        match tokio::time::timeout(timeout, done).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(detail))) => Err(StoreError::Commit { location: self.location.clone(), detail }),
            Ok(Err(_)) => Err(StoreError::WriterStopped { detail: "the writer dropped the request".into() }),
        }
    }

    /// Commits what is pending (waiting at most the store timeout for a Postgres
    /// writer), stops the writer and closes the database.
    pub(crate) async fn close(&self) {
        // The writer may already be gone; then there is nothing to stop.
        let _ = tokio::time::timeout(self.flush_timeout, self.tx.send(StoreOp::Stop)).await;
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        match writer {
            Some(Writer::Thread(handle)) => {
                let joined = tokio::task::spawn_blocking(move || handle.join()).await;
                if !matches!(joined, Ok(Ok(()))) {
                    tracing::error!(store = %self.location, "the store writer thread panicked");
                }
            }
            Some(Writer::Task(handle)) => {
                let abort = handle.abort_handle();
                let waited = tokio::time::timeout(self.flush_timeout, handle).await;
                let _ = waited.map_err(|_| {
                    tracing::error!(store = %self.location, "the database did not take the last writes in time; giving up on them");
                    abort.abort();
                });
            }
            None => {}
        }
    }
}

/// One burst of operations, sorted: the writes, the flushes to answer, whether to stop.
pub(crate) struct Batch {
    pub writes: Vec<StoreOp>,
    pub acks: Vec<oneshot::Sender<Result<(), String>>>,
    pub stop: bool,
}

impl Batch {
    /// Sorts `ops` (taken from the queue in order).
    pub(crate) fn sort(ops: Vec<StoreOp>) -> Self {
        let mut batch = Batch { writes: Vec::with_capacity(ops.len()), acks: Vec::new(), stop: false };
        for op in ops {
            match op {
                StoreOp::Flush(ack) => batch.acks.push(ack),
                StoreOp::Stop => batch.stop = true,
                write => batch.writes.push(write),
            }
        }
        batch
    }

    /// Tells every flush waiting on this batch how it went.
    pub(crate) fn answer(&mut self, result: &Result<(), String>) {
        for ack in self.acks.drain(..) {
            // The waiter may have given up; nothing to tell then.
            let _ = ack.send(result.clone());
        }
    }
}

/// The value of a JSON column or table entry.
pub(crate) fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // These types hold only strings, numbers and sequences: serializing cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::relay::PushKind;

    async fn open(dir: &std::path::Path, queue_ops: usize) -> (Store, Snapshot) {
        let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), dir);
        config.store_queue_ops = queue_ops;
        Store::open(&config).await.unwrap()
    }

    #[tokio::test]
    async fn state_written_before_close_is_loaded_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let (store, first) = open(dir.path(), 16).await;
        let bridge = BridgeId("brg_a".into());
        let device = DeviceId("dev_b".into());
        store.submit(StoreOp::PutBridge(
            bridge.clone(),
            StoredBridge {
                keys: PublicKeys { ed25519: "e".into(), x25519: "x".into() },
                agents: vec![],
                resumable: vec![SessionId("s1".into())],
                last_seen: 5,
                established: false,
            },
        ));
        let push = Push { device_id: device.clone(), kind: PushKind::TurnFinished, payload: "cA==".into() };
        store.submit(StoreOp::PutQueued(bridge.clone(), device.clone(), 7, QueuedPush { push, queued_at: 1 }));
        store.submit(StoreOp::PutQueued(
            bridge.clone(),
            device.clone(),
            8,
            QueuedPush {
                push: Push { device_id: device.clone(), kind: PushKind::Error, payload: "cQ==".into() },
                queued_at: 2,
            },
        ));
        store.submit(StoreOp::DeleteQueued(bridge.clone(), device.clone(), 8));
        store.close().await;

        let (store, second) = open(dir.path(), 16).await;
        assert_eq!(second.jwt_key, first.jwt_key, "secrets persist");
        assert_eq!(second.vapid_key.public_key_base64url(), first.vapid_key.public_key_base64url());
        assert_eq!(second.bridges.len(), 1);
        assert_eq!(second.bridges[0].1.resumable, vec![SessionId("s1".into())]);
        assert_eq!(second.queue.len(), 1);
        assert_eq!(second.queue[0].2, 7);
        assert_eq!((second.bridges[0].1.last_seen, second.bridges[0].1.established), (5, false));
        store.close().await;
    }

    #[tokio::test]
    async fn deleting_a_bridge_deletes_its_devices_subscriptions_and_held_pushes_only() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = open(dir.path(), 64).await;
        let keys = PublicKeys { ed25519: "e".into(), x25519: "x".into() };
        let stored = StoredBridge { keys, agents: vec![], resumable: vec![], last_seen: 1, established: true };
        let sub = StoredSubscription {
            subscription: Subscription { endpoint: "https://p.example/x".into(), p256dh: "k".into(), auth: "a".into() },
            ts: 1,
        };
        for b in ["brg_a", "brg_ab", "brg_b"] {
            let b = BridgeId(b.into());
            store.submit(StoreOp::PutBridge(b.clone(), stored.clone()));
            store.submit(StoreOp::PutDevices(b.clone(), vec![]));
            for d in ["dev_1", "dev_2"] {
                let d = DeviceId(d.into());
                store.submit(StoreOp::PutSubscription(b.clone(), d.clone(), sub.clone()));
                let push = Push { device_id: d.clone(), kind: PushKind::Error, payload: "cQ==".into() };
                store.submit(StoreOp::PutQueued(b.clone(), d, 3, QueuedPush { push, queued_at: 2 }));
            }
        }
        store.submit(StoreOp::DeleteBridge(BridgeId("brg_a".into())));
        store.close().await;
        let (store, loaded) = open(dir.path(), 16).await;
        let left = |ids: Vec<&BridgeId>| ids.iter().all(|b| b.as_str() != "brg_a");
        assert_eq!(loaded.bridges.len(), 2);
        assert!(left(loaded.bridges.iter().map(|b| &b.0).collect()));
        assert!(left(loaded.devices.iter().map(|b| &b.0).collect()));
        assert_eq!(loaded.subscriptions.len(), 4);
        assert!(left(loaded.subscriptions.iter().map(|b| &b.0).collect()));
        assert_eq!(loaded.queue.len(), 4);
        assert!(left(loaded.queue.iter().map(|b| &b.0).collect()));
        store.close().await;
    }
}
