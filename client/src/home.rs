//! A device's own files: its identity (mode 0600) and the bridges it has paired with.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use terminull_net::private_file::{
    JsonLayout, PrivateFileError, load_or_create_identity, read_json, write_private_json,
};
use terminull_protocol::crypto::keys::{Identity, PublicKeys};
use terminull_protocol::ids::BridgeId;

/// The device identity file, under the device's home.
pub const IDENTITY_FILE: &str = "device-identity.json";
/// The paired bridges, under the device's home.
pub const BRIDGES_FILE: &str = "paired-bridges.json";
/// The highest push counter opened per bridge, under the device's home.
pub const PUSH_STATE_FILE: &str = "push-counters.json";

/// Why the device's files are unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HomeError {
    /// A file is unreadable, unwritable or not what it should be.
    #[error(transparent)]
    File(#[from] PrivateFileError),
    /// No paired bridge matches.
    #[error("{0}")]
    NotPaired(String),
}

/// A bridge this device paired with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairedBridgeRecord {
    /// The bridge.
    pub bridge_id: BridgeId,
    /// Its public keys, confirmed at pairing.
    pub keys: PublicKeys,
    /// The relay it uses, from the pairing link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<String>,
    /// Its LAN server, as last known (from the link, or found by mDNS since).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lan: Option<String>,
    /// When, Unix seconds.
    pub paired_at: u64,
}

/// A device's home directory.
#[derive(Debug, Clone)]
pub struct DeviceHome {
    dir: PathBuf,
}

impl DeviceHome {
    /// The home at `dir` (created on first write).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The device's identity, created on first use.
    pub fn identity(&self) -> Result<Identity, HomeError> {
        Ok(load_or_create_identity(&self.dir.join(IDENTITY_FILE))?)
    }

    /// Every bridge paired with.
    pub fn bridges(&self) -> Result<Vec<PairedBridgeRecord>, HomeError> {
        Ok(read_json(&self.dir.join(BRIDGES_FILE))?.unwrap_or_default())
    }

    /// Records a paired bridge (replacing an earlier pairing with it).
    pub fn add_bridge(&self, record: PairedBridgeRecord) -> Result<(), HomeError> {
        let mut all = self.bridges()?;
        all.retain(|b| b.bridge_id != record.bridge_id);
        all.push(record);
        Ok(write_private_json(&self.dir.join(BRIDGES_FILE), &all, JsonLayout::Pretty)?)
    }

    /// The highest push counter opened from `bridge` (0 when none): a push at or
    /// below it is a replay, also after this device restarts.
    pub fn push_counter(&self, bridge: &BridgeId) -> u64 {
        let path = self.dir.join(PUSH_STATE_FILE);
        let Ok(bytes) = std::fs::read(path) else { return 0 };
        serde_json::from_slice::<std::collections::BTreeMap<String, u64>>(&bytes)
            .ok()
            .and_then(|m| m.get(bridge.as_str()).copied())
            .unwrap_or(0)
    }

    /// Records the highest push counter opened from `bridge`.
    pub fn set_push_counter(&self, bridge: &BridgeId, counter: u64) -> Result<(), HomeError> {
        let path = self.dir.join(PUSH_STATE_FILE);
        let mut all: std::collections::BTreeMap<String, u64> =
            std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        all.insert(bridge.as_str().to_owned(), counter);
        Ok(write_private_json(&path, &all, JsonLayout::Compact)?)
    }

    /// The paired bridge with id `bridge`, or the only one when `bridge` is `None`.
    pub fn bridge(&self, bridge: Option<&str>) -> Result<PairedBridgeRecord, HomeError> {
        let all = self.bridges()?;
        match bridge {
            Some(id) => all
                .into_iter()
                .find(|b| b.bridge_id.as_str() == id)
                .ok_or_else(|| HomeError::NotPaired(format!("this device has not paired with bridge `{id}`"))),
            None => match all.len() {
                0 => Err(HomeError::NotPaired(format!(
                    "this device ({}) has not paired with any bridge; run `terminull device pair <link>`",
                    self.dir.display()
                ))),
                1 => Ok(all.into_iter().next().ok_or_else(|| HomeError::NotPaired(String::new()))?),
                _ => {
                    Err(HomeError::NotPaired("this device paired with several bridges; name one with --bridge".into()))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_identity_is_created_once_with_mode_0600_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let home = DeviceHome::at(dir.path().join("dev"));
        let a = home.identity().unwrap();
        let b = home.identity().unwrap();
        assert_eq!(a.public(), b.public());
        let mode = std::fs::metadata(dir.path().join("dev").join(IDENTITY_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_corrupt_identity_file_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IDENTITY_FILE), b"{").unwrap();
        let err = DeviceHome::at(dir.path()).identity().unwrap_err().to_string();
        assert!(err.contains(IDENTITY_FILE), "{err}");
    }
}
