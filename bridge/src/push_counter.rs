//! The counters of push nonces, one per device, persisted so that no counter is ever
//! used twice under a device's push key — not across restarts, not after a crash, not
//! when the clock steps back (docs/encryption.md#pushes).
//!
//! Counters are reserved in blocks of [`BLOCK`]: before the first counter of a block
//! is used, the end of the block is written to `<home>/push-counters.json` (0600,
//! written to a temporary file, synced, renamed). After a restart every device starts
//! at the end of its last reservation, so a crash skips at most a block and never
//! repeats. A device with no entry starts at the clock in microseconds since the Unix
//! epoch, which is above every counter the earlier clock-based scheme used (as long as
//! the clock did not go back), so devices that opened such pushes keep accepting.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use terminull_protocol::ids::DeviceId;

/// Counters reserved per write of the file.
pub const BLOCK: u64 = 1024;

/// The file in a bridge home.
pub const FILE_NAME: &str = "push-counters.json";

/// Why a counter could not be reserved (no push is sealed without one).
#[derive(Debug, thiserror::Error)]
pub enum PushCounterError {
    /// The file could not be read, written or synced.
    #[error("push counters {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not what this module writes.
    #[error("push counters {path}: not a counters file: {detail}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A device's counter reached the end of the 64-bit space.
    #[error("the push counter of device `{0}` is exhausted")]
    Exhausted(DeviceId),
}

/// What the file holds: per device, the first counter not reserved yet.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    /// Device id → every counter below this may have been used.
    reserved: BTreeMap<DeviceId, u64>,
}

#[derive(Debug)]
struct State {
    stored: Stored,
    /// Device id → the next counter to hand out (below `stored.reserved`).
    next: BTreeMap<DeviceId, u64>,
}

/// The push counters of one bridge home; cheap to clone, shared.
#[derive(Debug, Clone)]
pub struct PushCounters {
    path: PathBuf,
    state: Arc<Mutex<State>>,
}

impl PushCounters {
    /// Loads `<home root>/push-counters.json` (absent: empty).
    pub fn open(home_root: &Path) -> Result<Self, PushCounterError> {
        let path = home_root.join(FILE_NAME);
        let stored = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| PushCounterError::Syntax { path: path.clone(), detail: e.to_string() })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(source) => return Err(PushCounterError::Io { path, source }),
        };
        // Everything below a reservation may have been used before the restart.
        let next = stored.reserved.clone();
        Ok(Self { path, state: Arc::new(Mutex::new(State { stored, next })) })
    }

    /// The next counter for `device`, never handed out before under this home. Writes
    /// a new reservation to the file first when the current one is used up.
    pub fn next(&self, device: &DeviceId) -> Result<u64, PushCounterError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let next = match state.next.get(device) {
            Some(&n) => n,
            None => now_micros().max(1),
        };
        let reserved = state.stored.reserved.get(device).copied().unwrap_or(0);
        if next >= reserved {
            let end = next.checked_add(BLOCK).ok_or_else(|| PushCounterError::Exhausted(device.clone()))?;
            state.stored.reserved.insert(device.clone(), end);
            if let Err(e) = self.persist(&state.stored) {
                // Not reserved: undo, so the next attempt writes again.
                if reserved == 0 {
                    state.stored.reserved.remove(device);
                } else {
                    state.stored.reserved.insert(device.clone(), reserved);
                }
                return Err(e);
            }
        }
        state.next.insert(device.clone(), next + 1);
        Ok(next)
    }

    fn persist(&self, stored: &Stored) -> Result<(), PushCounterError> {
        let io = |source| PushCounterError::Io { path: self.path.clone(), source };
        let json = serde_json::to_vec_pretty(stored).map_err(|e| io(std::io::Error::other(e)))?;
        let tmp = self.path.with_extension("json.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
        file.write_all(&json).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent()
            && let Ok(dir) = std::fs::File::open(dir)
        {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_rise_per_device_and_a_reopened_home_starts_past_every_reservation() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (DeviceId("dev_a".into()), DeviceId("dev_b".into()));
        let counters = PushCounters::open(dir.path()).unwrap();
        let first = counters.next(&a).unwrap();
        assert_eq!(counters.next(&a).unwrap(), first + 1);
        let other = counters.next(&b).unwrap();
        assert!(other > 0);
        drop(counters);
        let reopened = PushCounters::open(dir.path()).unwrap();
        assert_eq!(reopened.next(&a).unwrap(), first + BLOCK);
        assert!(reopened.next(&b).unwrap() >= other + BLOCK);
    }

    #[test]
    fn a_damaged_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "nonsense").unwrap();
        let e = PushCounters::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains(FILE_NAME), "{e}");
    }
}
