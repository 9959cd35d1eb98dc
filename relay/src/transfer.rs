//! Moving a relay's state between stores: `terminull-relay import` copies a stopped
//! relay's `relay.redb` into Postgres, `terminull-relay export` copies Postgres back into
//! a `relay.redb`. Everything moves, the secrets included (the resume-token key and the
//! VAPID key), so paired devices, their tokens and their push subscriptions keep working
//! without pairing again.

use std::path::Path;
use std::time::Duration;

use crate::error::StoreError;
use crate::store::{Snapshot, postgres, redb};

/// What was moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// Bridge registrations.
    pub bridges: usize,
    /// Device registries (one per bridge that has one).
    pub device_registries: usize,
    /// Push subscriptions.
    pub subscriptions: usize,
    /// Pushes held for offline devices.
    pub held_pushes: usize,
}

impl Moved {
    fn of(snapshot: &Snapshot) -> Self {
        Self {
            bridges: snapshot.bridges.len(),
            device_registries: snapshot.devices.len(),
            subscriptions: snapshot.subscriptions.len(),
            held_pushes: snapshot.queue.len(),
        }
    }
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bridges, {} device registries, {} push subscriptions, {} held pushes, and the secrets",
            self.bridges, self.device_registries, self.subscriptions, self.held_pushes
        )
    }
}

/// Copies `relay.redb` in `data_dir` into the Postgres database at `url` (migrating it
/// first), replacing its secrets and every entry with the same key. Stop the relay that
/// uses `data_dir` first (redb refuses a file another process has open).
pub async fn redb_to_postgres(data_dir: &Path, url: &str, timeout: Duration) -> Result<Moved, StoreError> {
    let dir = data_dir.to_owned();
    let snapshot = tokio::task::spawn_blocking(move || redb::read_all(&dir))
        .await
        .map_err(|e| StoreError::WriterStopped { detail: format!("reading relay.redb failed: {e}") })??;
    postgres::write_all(url, &snapshot, timeout).await?;
    Ok(Moved::of(&snapshot))
}

/// Copies the Postgres database at `url` into `relay.redb` in `data_dir` (created if
/// missing), replacing its secrets and every entry with the same key.
pub async fn postgres_to_redb(url: &str, data_dir: &Path, timeout: Duration) -> Result<Moved, StoreError> {
    let snapshot = postgres::read_all(url, timeout).await?;
    let moved = Moved::of(&snapshot);
    let dir = data_dir.to_owned();
    std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io { path: dir.clone(), source })?;
    tokio::task::spawn_blocking(move || redb::write_all(&dir, &snapshot))
        .await
        .map_err(|e| StoreError::WriterStopped { detail: format!("writing relay.redb failed: {e}") })??;
    Ok(moved)
}
