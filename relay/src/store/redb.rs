//! The default store: one redb file, `relay.redb`, in the data directory, written by one
//! thread.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use terminull_protocol::relay::DeviceRecord;
use terminull_protocol::{BridgeId, DeviceId};
use tokio::sync::mpsc;

use super::{
    Batch, Health, JWT_KEY, MAX_BATCH, QueuedPush, Snapshot, StoreOp, StoredBridge, StoredSubscription, VAPID_KEY, json,
};
use crate::error::StoreError;
use crate::webpush::VapidKey;

/// The database file's name inside the data directory.
pub(crate) const DB_FILE: &str = "relay.redb";

const BRIDGES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("bridges");
const DEVICES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("devices");
const SUBSCRIPTIONS: TableDefinition<'_, (&str, &str), &[u8]> = TableDefinition::new("push_subscriptions");
const PUSH_QUEUE: TableDefinition<'_, (&str, &str, u64), &[u8]> = TableDefinition::new("push_queue");
const SECRETS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("secrets");

/// What [`open`] hands the store handle.
pub(crate) type Opened = (String, mpsc::Sender<StoreOp>, JoinHandle<()>, Arc<Health>, Snapshot);

/// Opens (or creates) the database in `dir`, loads it, creates missing secrets, and
/// starts the writer thread. Blocking.
pub(crate) fn open(dir: &Path, queue_ops: usize) -> Result<Opened, StoreError> {
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
    let health = Arc::new(Health::new());
    let writer_path = path.clone();
    let writer_health = Arc::clone(&health);
    let writer = std::thread::Builder::new()
        .name("relay-store".to_owned())
        .spawn(move || write_loop(db, rx, &writer_path, &writer_health))
        .map_err(|e| db_err("starting the writer thread")(e.into()))?;
    Ok((path.display().to_string(), tx, writer, health, snapshot))
}

/// Reads the whole database at `dir` (for `terminull-relay import`), creating nothing
/// but the secrets a fresh file lacks. Blocking.
pub(crate) fn read_all(dir: &Path) -> Result<Snapshot, StoreError> {
    let path = dir.join(DB_FILE);
    if !path.exists() {
        return Err(StoreError::Missing { path });
    }
    let db = Database::create(&path).map_err(|e| StoreError::Database {
        path: path.clone(),
        during: "opening",
        source: Box::new(e.into()),
    })?;
    load(&db, &path)
}

/// Writes everything in `snapshot` (and its secrets) into the database at `dir`. Blocking.
pub(crate) fn write_all(dir: &Path, snapshot: &Snapshot) -> Result<(), StoreError> {
    let path = dir.join(DB_FILE);
    let db_err = |during: &'static str| {
        let path = path.clone();
        move |e: redb::Error| StoreError::Database { path: path.clone(), during, source: Box::new(e) }
    };
    let db = Database::create(&path).map_err(|e| db_err("opening")(e.into()))?;
    restrict_permissions(&path);
    ensure_tables_and_secrets(&db).map_err(db_err("creating tables and secrets"))?;
    let txn = db.begin_write().map_err(|e| db_err("writing secrets")(e.into()))?;
    {
        let mut secrets = txn.open_table(SECRETS).map_err(|e| db_err("writing secrets")(e.into()))?;
        secrets.insert(JWT_KEY, snapshot.jwt_key.as_slice()).map_err(|e| db_err("writing secrets")(e.into()))?;
        let vapid = snapshot.vapid_key.private_key_base64url();
        secrets.insert(VAPID_KEY, vapid.as_bytes()).map_err(|e| db_err("writing secrets")(e.into()))?;
    }
    txn.commit().map_err(|e| db_err("writing secrets")(e.into()))?;
    apply(&db, &snapshot.ops()).map_err(db_err("writing the state"))
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

fn write_loop(db: Database, mut rx: mpsc::Receiver<StoreOp>, path: &Path, health: &Health) {
    loop {
        let Some(first) = rx.blocking_recv() else { return };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let mut batch = Batch::sort(batch);
        health.busy();
        let result =
            if batch.writes.is_empty() { Ok(()) } else { apply(&db, &batch.writes).map_err(|e| e.to_string()) };
        match &result {
            Ok(()) => health.succeeded(),
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "committing relay state failed");
                health.failed(e.clone());
            }
        }
        batch.answer(&result);
        if batch.stop {
            return;
        }
    }
}
fn apply(db: &Database, writes: &[StoreOp]) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    {
        let mut bridges = txn.open_table(BRIDGES)?;
        let mut devices = txn.open_table(DEVICES)?;
        let mut subscriptions = txn.open_table(SUBSCRIPTIONS)?;
        let mut queue = txn.open_table(PUSH_QUEUE)?;
        for op in writes {
            match op {
                StoreOp::PutBridge(id, record) => {
                    bridges.insert(id.as_str(), json(record).as_slice())?;
                }
                StoreOp::PutDevices(id, list) => {
                    devices.insert(id.as_str(), json(list).as_slice())?;
                }
                StoreOp::PutSubscription(b, d, s) => {
                    subscriptions.insert((b.as_str(), d.as_str()), json(s).as_slice())?;
                }
                StoreOp::DeleteSubscription(b, d) => {
                    subscriptions.remove((b.as_str(), d.as_str()))?;
                }
                StoreOp::PutQueued(b, d, seq, entry) => {
                    queue.insert((b.as_str(), d.as_str(), *seq), json(entry).as_slice())?;
                }
                StoreOp::DeleteQueued(b, d, seq) => {
                    queue.remove((b.as_str(), d.as_str(), *seq))?;
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
