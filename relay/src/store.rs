//! The relay's durable state, in one redb file (`relay.redb` in the data directory).
//!
//! The relay keeps its working state in memory and writes every change through here.
//! Writes go to one writer thread in order, batched into one transaction per burst,
//! so a slow disk never blocks a connection task; the in-memory copy stays
//! authoritative while the relay runs, and [`Store::open`] reloads it on start.
//!
//! Tables (keys → JSON values unless noted):
//! - `bridges`: bridge id → [`StoredBridge`] (public keys, last agents, resumable sessions).
//! - `devices`: bridge id → the bridge's `Vec<DeviceRecord>`.
//! - `push_subscriptions`: (bridge id, device id) → [`StoredSubscription`].
//! - `push_queue`: (bridge id, device id, sequence) → [`QueuedPush`].
//! - `secrets`: name → raw bytes (`jwt_hmac_key`: 32 bytes; `vapid_private_key`: the
//!   base64url P-256 scalar).

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use terminull_protocol::crypto::keys::PublicKeys;
use terminull_protocol::relay::{AgentSummary, DeviceRecord, Push};
use terminull_protocol::{BridgeId, DeviceId, SessionId};
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;
use crate::webpush::{Subscription, VapidKey};

/// The database file's name inside the data directory.
pub(crate) const DB_FILE: &str = "relay.redb";

const BRIDGES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("bridges");
const DEVICES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("devices");
const SUBSCRIPTIONS: TableDefinition<'_, (&str, &str), &[u8]> = TableDefinition::new("push_subscriptions");
const PUSH_QUEUE: TableDefinition<'_, (&str, &str, u64), &[u8]> = TableDefinition::new("push_queue");
const SECRETS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("secrets");

const JWT_KEY: &str = "jwt_hmac_key";
const VAPID_KEY: &str = "vapid_private_key";

/// Store operations applied in one transaction at most.
const MAX_BATCH: usize = 1024;

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

/// The handle to the writer thread.
#[derive(Debug)]
pub(crate) struct Store {
    path: PathBuf,
    tx: mpsc::Sender<StoreOp>,
    writer: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Store {
    /// Opens (or creates) the database in `dir`, loads it, creates missing secrets, and
    /// starts the writer thread. Blocking.
    pub(crate) fn open(dir: &Path, queue_ops: usize) -> Result<(Store, Snapshot), StoreError> {
        let path = dir.join(DB_FILE);
        let db_err = |during: &'static str| {
            let path = path.clone();
            move |e: redb::Error| StoreError::Database { path: path.clone(), during, source: Box::new(e) }
        };
        let db = Database::create(&path).map_err(|e| db_err("opening")(e.into()))?;
        restrict_permissions(&path);
        ensure_tables_and_secrets(&db).map_err(db_err("creating tables and secrets"))?;
        let snapshot = load(&db, &path)?;
        let (tx, rx) = mpsc::channel(queue_ops);
        let writer_path = path.clone();
        let writer = std::thread::Builder::new()
            .name("relay-store".to_owned())
            .spawn(move || write_loop(db, rx, &writer_path))
            .map_err(|e| db_err("starting the writer thread")(e.into()))?;
        Ok((Store { path, tx, writer: std::sync::Mutex::new(Some(writer)) }, snapshot))
    }

    /// Queues a write. Never blocks: when the queue is full the write is dropped and
    /// logged (the in-memory state still has it until the next restart).
    pub(crate) fn submit(&self, op: StoreOp) {
        match self.tx.try_send(op) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(op)) => {
                tracing::error!(path = %self.path.display(), ?op, "store write queue full; write dropped");
            }
            Err(mpsc::error::TrySendError::Closed(op)) => {
                tracing::warn!(path = %self.path.display(), ?op, "store closed; write dropped");
            }
        }
    }

    /// Waits until every write queued so far is committed.
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let (ack, done) = oneshot::channel();
        self.tx.send(StoreOp::Flush(ack)).await.map_err(|_| StoreError::WriterStopped)?;
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(detail)) => Err(StoreError::Corrupt { path: self.path.clone(), what: "commit".to_owned(), detail }),
            Err(_) => Err(StoreError::WriterStopped),
        }
    }

    /// Commits what is pending, stops the writer and closes the database file.
    pub(crate) async fn close(&self) {
        // The writer may already be gone; then there is nothing to stop.
        let _ = self.tx.send(StoreOp::Stop).await;
        let handle = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle {
            let joined = tokio::task::spawn_blocking(move || handle.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::error!(path = %self.path.display(), "the store writer thread panicked");
            }
        }
    }
}

/// The file holds the relay's secrets: readable by its owner only.
fn restrict_permissions(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            tracing::warn!(path = %path.display(), error = %e, "could not make the relay database private (mode 0600)");
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn ensure_tables_and_secrets(db: &Database) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    {
        txn.open_table(BRIDGES)?;
        txn.open_table(DEVICES)?;
        txn.open_table(SUBSCRIPTIONS)?;
        txn.open_table(PUSH_QUEUE)?;
        let mut secrets = txn.open_table(SECRETS)?;
        if secrets.get(JWT_KEY)?.is_none() {
            let key = terminull_protocol::crypto::random_bytes::<32>();
            secrets.insert(JWT_KEY, key.as_slice())?;
        }
        if secrets.get(VAPID_KEY)?.is_none() {
            let key = VapidKey::generate().private_key_base64url();
            secrets.insert(VAPID_KEY, key.as_bytes())?;
        }
    }
    txn.commit()?;
    Ok(())
}

fn load(db: &Database, path: &Path) -> Result<Snapshot, StoreError> {
    let db_err =
        |e: redb::Error| StoreError::Database { path: path.to_owned(), during: "loading", source: Box::new(e) };
    let corrupt = |what: String, detail: String| StoreError::Corrupt { path: path.to_owned(), what, detail };
    let read = db.begin_read().map_err(|e| db_err(e.into()))?;

    let secrets = read.open_table(SECRETS).map_err(|e| db_err(e.into()))?;
    let jwt = secrets.get(JWT_KEY).map_err(|e| db_err(e.into()))?;
    let jwt_key: [u8; 32] = jwt
        .as_ref()
        .and_then(|v| <[u8; 32]>::try_from(v.value()).ok())
        .ok_or_else(|| corrupt("secret `jwt_hmac_key`".into(), "missing or not 32 bytes".into()))?;
    let vapid = secrets.get(VAPID_KEY).map_err(|e| db_err(e.into()))?;
    let vapid_text = vapid
        .as_ref()
        .and_then(|v| std::str::from_utf8(v.value()).ok().map(str::to_owned))
        .ok_or_else(|| corrupt("secret `vapid_private_key`".into(), "missing or not UTF-8".into()))?;
    let vapid_key = VapidKey::from_base64url(&vapid_text)
        .map_err(|e| corrupt("secret `vapid_private_key`".into(), e.to_string()))?;

    let mut snapshot = Snapshot {
        bridges: Vec::new(),
        devices: Vec::new(),
        subscriptions: Vec::new(),
        queue: Vec::new(),
        jwt_key,
        vapid_key,
    };

    // A value that does not decode is skipped with an error in the log rather than
    // refusing to start: one bad entry must not take every bridge offline.
    let table = read.open_table(BRIDGES).map_err(|e| db_err(e.into()))?;
    for entry in table.iter().map_err(|e| db_err(e.into()))? {
        let (k, v) = entry.map_err(|e| db_err(e.into()))?;
        match serde_json::from_slice::<StoredBridge>(v.value()) {
            Ok(b) => snapshot.bridges.push((BridgeId(k.value().to_owned()), b)),
            Err(e) => tracing::error!(bridge_id = k.value(), error = %e, "skipping an unreadable stored bridge"),
        }
    }
    let table = read.open_table(DEVICES).map_err(|e| db_err(e.into()))?;
    for entry in table.iter().map_err(|e| db_err(e.into()))? {
        let (k, v) = entry.map_err(|e| db_err(e.into()))?;
        match serde_json::from_slice::<Vec<DeviceRecord>>(v.value()) {
            Ok(d) => snapshot.devices.push((BridgeId(k.value().to_owned()), d)),
            Err(e) => tracing::error!(bridge_id = k.value(), error = %e, "skipping an unreadable device registry"),
        }
    }
    let table = read.open_table(SUBSCRIPTIONS).map_err(|e| db_err(e.into()))?;
    for entry in table.iter().map_err(|e| db_err(e.into()))? {
        let (k, v) = entry.map_err(|e| db_err(e.into()))?;
        let (bridge, device) = k.value();
        match serde_json::from_slice::<StoredSubscription>(v.value()) {
            Ok(s) => snapshot.subscriptions.push((BridgeId(bridge.to_owned()), DeviceId(device.to_owned()), s)),
            Err(e) => {
                tracing::error!(bridge_id = bridge, device_id = device, error = %e, "skipping an unreadable push subscription")
            }
        }
    }
    let table = read.open_table(PUSH_QUEUE).map_err(|e| db_err(e.into()))?;
    for entry in table.iter().map_err(|e| db_err(e.into()))? {
        let (k, v) = entry.map_err(|e| db_err(e.into()))?;
        let (bridge, device, seq) = k.value();
        match serde_json::from_slice::<QueuedPush>(v.value()) {
            Ok(q) => snapshot.queue.push((BridgeId(bridge.to_owned()), DeviceId(device.to_owned()), seq, q)),
            Err(e) => {
                tracing::error!(bridge_id = bridge, device_id = device, error = %e, "skipping an unreadable queued push")
            }
        }
    }
    Ok(snapshot)
}

fn write_loop(db: Database, mut rx: mpsc::Receiver<StoreOp>, path: &Path) {
    loop {
        let Some(first) = rx.blocking_recv() else { return };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let mut acks = Vec::new();
        let mut stop = false;
        let mut writes = Vec::with_capacity(batch.len());
        for op in batch {
            match op {
                StoreOp::Flush(ack) => acks.push(ack),
                StoreOp::Stop => stop = true,
                write => writes.push(write),
            }
        }
        let result = if writes.is_empty() { Ok(()) } else { apply(&db, writes).map_err(|e| e.to_string()) };
        if let Err(e) = &result {
            tracing::error!(path = %path.display(), error = %e, "committing relay state failed");
        }
        for ack in acks {
            // The waiter may have given up; nothing to tell then.
            let _ = ack.send(result.clone());
        }
        if stop {
            return;
        }
    }
}

fn apply(db: &Database, writes: Vec<StoreOp>) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    {
        let mut bridges = txn.open_table(BRIDGES)?;
        let mut devices = txn.open_table(DEVICES)?;
        let mut subscriptions = txn.open_table(SUBSCRIPTIONS)?;
        let mut queue = txn.open_table(PUSH_QUEUE)?;
        for op in writes {
            match op {
                StoreOp::PutBridge(id, record) => {
                    bridges.insert(id.as_str(), json(&record).as_slice())?;
                }
                StoreOp::PutDevices(id, list) => {
                    devices.insert(id.as_str(), json(&list).as_slice())?;
                }
                StoreOp::PutSubscription(b, d, s) => {
                    subscriptions.insert((b.as_str(), d.as_str()), json(&s).as_slice())?;
                }
                StoreOp::DeleteSubscription(b, d) => {
                    subscriptions.remove((b.as_str(), d.as_str()))?;
                }
                StoreOp::PutQueued(b, d, seq, entry) => {
                    queue.insert((b.as_str(), d.as_str(), seq), json(&entry).as_slice())?;
                }
                StoreOp::DeleteQueued(b, d, seq) => {
                    queue.remove((b.as_str(), d.as_str(), seq))?;
                }
                StoreOp::DeleteBridge(b) => {
                    let b = b.as_str();
                    bridges.remove(b)?;
                    devices.remove(b)?;
                    let mut subs = Vec::new();
                    for entry in subscriptions.range((b, "")..)? {
                        let (key, _) = entry?;
                        let (bridge, device) = key.value();
                        if bridge != b {
                            break;
                        }
                        subs.push(device.to_owned());
                    }
                    for device in subs {
                        subscriptions.remove((b, device.as_str()))?;
                    }
                    let mut held = Vec::new();
                    for entry in queue.range((b, "", 0)..)? {
                        let (key, _) = entry?;
                        let (bridge, device, seq) = key.value();
                        if bridge != b {
                            break;
                        }
                        held.push((device.to_owned(), seq));
                    }
                    for (device, seq) in held {
                        queue.remove((b, device.as_str(), seq))?;
                    }
                }
                StoreOp::Flush(_) | StoreOp::Stop => {}
            }
        }
    }
    txn.commit()?;
    Ok(())
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // These types hold only strings, numbers and sequences: serializing cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::relay::PushKind;

    #[tokio::test]
    async fn state_written_before_close_is_loaded_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let (store, first) = Store::open(dir.path(), 16).unwrap();
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

        let (store, second) = Store::open(dir.path(), 16).unwrap();
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
        let (store, _) = Store::open(dir.path(), 64).unwrap();
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
        let (store, loaded) = Store::open(dir.path(), 16).unwrap();
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
