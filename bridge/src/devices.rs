//! Who may drive this bridge from elsewhere: its identity, the devices it paired
//! (`<home>/devices.json`, public keys only, mode 0600) and open pairing offers
//! (`<home>/pairing/`). The daemon and the `terminull pair` / `terminull devices`
//! commands share these files, so a revocation from the command line takes effect
//! in the running daemon from the next message on (the registry re-reads the file
//! whenever it changed).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use terminull_net::private_file::{
    JsonLayout, PrivateFileError, load_or_create_identity, read_json, write_private_json,
};
use terminull_protocol::crypto::keys::{Identity, PublicIdentity};
use terminull_protocol::crypto::pairing::{self, AcceptedDevice, PairRequest, PairResponse};
use terminull_protocol::crypto::{b64url, b64url_array};
use terminull_protocol::ids::DeviceId;
use terminull_protocol::relay::DeviceRecord;

use crate::home::Home;

/// Why the device files are unusable or a pairing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevicesError {
    /// A file is unreadable, unwritable or not what it should be.
    #[error(transparent)]
    Home(#[from] PrivateFileError),
    /// A pairing request was refused.
    #[error("pairing refused: {0}")]
    Refused(String),
    /// No such device.
    #[error("no paired device `{0}`")]
    UnknownDevice(String),
}

/// The bridge's identity, created on first use.
pub fn bridge_identity(home: &Home) -> Result<Identity, DevicesError> {
    Ok(load_or_create_identity(&home.identity_file())?)
}

/// The paired devices, re-read whenever the file changes.
#[derive(Debug, Clone)]
pub struct DeviceRegistry {
    path: PathBuf,
    cache: Arc<Mutex<Cached>>,
}

#[derive(Debug, Default)]
struct Cached {
    stamp: Option<(SystemTime, u64)>,
    devices: Vec<DeviceRecord>,
    version: u64,
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl DeviceRegistry {
    /// The registry of `home`.
    pub fn open(home: &Home) -> Self {
        Self { path: home.devices_file(), cache: Arc::new(Mutex::new(Cached::default())) }
    }

    fn read(&self) -> Result<Vec<DeviceRecord>, DevicesError> {
        Ok(read_json(&self.path)?.unwrap_or_default())
    }

    /// Every device, revoked ones included, and a version that changes with them.
    pub fn snapshot(&self) -> (Vec<DeviceRecord>, u64) {
        let now = stamp(&self.path);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.version == 0 || cache.stamp != now {
            match self.read() {
                Ok(devices) => {
                    if devices != cache.devices || cache.version == 0 {
                        cache.version += 1;
                    }
                    cache.devices = devices;
                    cache.stamp = now;
                }
                // Keep the last good list: a half-written or damaged file must not
                // unpair everyone, nor re-admit a revoked device.
                Err(e) => tracing::error!("{e}; keeping the previous device list"),
            }
        }
        (cache.devices.clone(), cache.version)
    }

    /// The keys of `device` when it is paired and not revoked.
    pub fn active(&self, device: &DeviceId) -> Option<PublicIdentity> {
        let (devices, _) = self.snapshot();
        let record = devices.into_iter().find(|d| &d.device_id == device && !d.revoked)?;
        PublicIdentity::from_wire(&record.keys).ok()
    }

    /// Changes the device list under the registry's locks: an in-process mutex (threads
    /// of this process) and an advisory lock on `devices.json.lock` (other processes:
    /// the daemon, `terminull devices revoke`, a pairing), held across the read, the
    /// change and the atomic write (temp file, rename, 0600), so two changes at once
    /// cannot lose one another.
    fn modify<R>(
        &self,
        change: impl FnOnce(&mut Vec<DeviceRecord>) -> Result<R, DevicesError>,
    ) -> Result<R, DevicesError> {
        static IN_PROCESS: Mutex<()> = Mutex::new(());
        let _in_process = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
        let lock_path = lock_file(&self.path);
        let io = |e| DevicesError::Home(PrivateFileError::io(&lock_path, e));
        if let Some(dir) = lock_path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io)?;
        lock.lock().map_err(io)?;
        let mut devices = self.read()?;
        let out = change(&mut devices)?;
        write_private_json(&self.path, &devices, JsonLayout::Pretty)?;
        // Unlocked when `lock` closes.
        Ok(out)
    }

    /// Adds (or re-pairs) a device.
    pub fn add(&self, record: DeviceRecord) -> Result<(), DevicesError> {
        self.modify(|devices| {
            devices.retain(|d| d.device_id != record.device_id);
            devices.push(record);
            Ok(())
        })
    }

    /// Revokes a device: from its next message on it can do nothing.
    pub fn revoke(&self, device: &str) -> Result<DeviceRecord, DevicesError> {
        self.modify(|devices| {
            let record = devices
                .iter_mut()
                .find(|d| d.device_id.as_str() == device)
                .ok_or_else(|| DevicesError::UnknownDevice(device.to_owned()))?;
            record.revoked = true;
            Ok(record.clone())
        })
    }
}

/// The advisory lock file next to the device list (`devices.json.lock`).
fn lock_file(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    path.with_file_name(name)
}

/// How long a pairing offer lives by default.
pub const DEFAULT_OFFER_TTL_SECS: u64 = 600;

/// An open pairing offer, as stored under `<home>/pairing/<pairing id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Offer {
    /// The one-time secret, base64url.
    pub secret: String,
    /// Expiry, Unix seconds.
    pub expires_at: u64,
    /// True: a device that pairs is held pending (not in `devices.json`, so refused
    /// everywhere) until the bridge's terminal confirms that both sides show the same
    /// short code ([`confirm_pairing`]); false (an offer made with `--yes`): it is
    /// usable at once.
    #[serde(default)]
    pub confirm: bool,
}

/// What a completed pairing left for `terminull pair` to show.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PairingResult {
    /// The device paired.
    pub device_id: DeviceId,
    /// Its name.
    pub name: String,
    /// The short code both sides show.
    pub short_code: String,
    /// The device's record while it waits for the short code to be confirmed on the
    /// bridge's terminal (it is in the registry only once confirmed); `None` once in
    /// the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<DeviceRecord>,
}

/// Creates an offer whose device is usable as soon as it pairs (no confirmation):
/// returns its secret and expiry.
pub fn create_offer(home: &Home, ttl_secs: u64) -> Result<([u8; 32], u64), DevicesError> {
    create_offer_with(home, ttl_secs, false)
}

/// Creates an offer; with `confirm`, the device that pairs stays pending until
/// [`confirm_pairing`]. Returns its secret and expiry.
pub fn create_offer_with(home: &Home, ttl_secs: u64, confirm: bool) -> Result<([u8; 32], u64), DevicesError> {
    let secret = terminull_protocol::crypto::random_bytes::<32>();
    let expires_at = unix_now() + ttl_secs;
    let path = home.pairing_dir().join(format!("{}.json", pairing::pairing_id(&secret)));
    write_private_json(&path, &Offer { secret: b64url(&secret), expires_at, confirm }, JsonLayout::Compact)?;
    Ok((secret, expires_at))
}

fn result_path(home: &Home, secret: &[u8; 32]) -> PathBuf {
    home.pairing_dir().join(format!("{}.result.json", pairing::pairing_id(secret)))
}

/// The result file of the offer with `secret`, once a device paired.
pub fn offer_result(home: &Home, secret: &[u8; 32]) -> Option<PairingResult> {
    serde_json::from_slice(&std::fs::read(result_path(home, secret)).ok()?).ok()
}

/// The terminal's answer for the device pending on the offer with `secret`: `accept`
/// adds it to the registry (usable from its next connection on); otherwise it is
/// forgotten and never usable. Returns the result, `pending` now `None`.
pub fn confirm_pairing(
    home: &Home,
    registry: &DeviceRegistry,
    secret: &[u8; 32],
    accept: bool,
) -> Result<PairingResult, DevicesError> {
    let path = result_path(home, secret);
    let mut result =
        offer_result(home, secret).ok_or_else(|| DevicesError::Refused("no device is waiting on this offer".into()))?;
    let Some(record) = result.pending.take() else { return Ok(result) };
    if accept {
        registry.add(record)?;
        write_private_json(&path, &result, JsonLayout::Compact)?;
        tracing::info!("device {} ({}) confirmed on the terminal", result.device_id, result.name);
    } else {
        let _ = std::fs::remove_file(&path);
        tracing::warn!("device {} ({}) refused on the terminal: the short codes differ", result.device_id, result.name);
    }
    Ok(result)
}

fn valid_pairing_id(id: &str) -> bool {
    id.len() == 22 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The bridge's side of a pairing request: finds the offer, checks the request
/// against its secret, records the device, consumes the offer and leaves the
/// result for `terminull pair`.
pub fn handle_pair_request(
    home: &Home,
    identity: &Identity,
    registry: &DeviceRegistry,
    request: &PairRequest,
) -> Result<PairResponse, DevicesError> {
    if !valid_pairing_id(&request.pairing_id) {
        return Err(DevicesError::Refused("malformed pairing id".into()));
    }
    let path = home.pairing_dir().join(format!("{}.json", request.pairing_id));
    let bytes = std::fs::read(&path).map_err(|_| DevicesError::Refused("no open pairing offer has that id".into()))?;
    let offer: Offer = serde_json::from_slice(&bytes).map_err(|e| PrivateFileError::corrupt(&path, e))?;
    if offer.expires_at < unix_now() {
        let _ = std::fs::remove_file(&path);
        return Err(DevicesError::Refused("the pairing offer expired".into()));
    }
    let secret = b64url_array::<32>("secret", &offer.secret).map_err(|e| PrivateFileError::corrupt(&path, e))?;
    let AcceptedDevice { response, device_id, keys, name, short_code } =
        pairing::accept(identity, &secret, request).map_err(|e| DevicesError::Refused(e.to_string()))?;
    let record = DeviceRecord { device_id: device_id.clone(), keys, name: name.clone(), revoked: false };
    let result_path = home.pairing_dir().join(format!("{}.result.json", request.pairing_id));
    let pending = if offer.confirm {
        // Held until the terminal confirms the short code: the result file is the only
        // place the device is named, and it is written before the device is answered.
        let result = PairingResult { device_id, name, short_code, pending: Some(record) };
        write_private_json(&result_path, &result, JsonLayout::Compact)?;
        result
    } else {
        registry.add(record)?;
        let result = PairingResult { device_id, name, short_code, pending: None };
        let _ = write_private_json(&result_path, &result, JsonLayout::Compact);
        result
    };
    // One-time: the offer is gone once used.
    let _ = std::fs::remove_file(&path);
    let state = if pending.pending.is_some() { "pending the terminal's confirmation" } else { "active" };
    tracing::info!(
        "paired device {} ({}), short code {}, {state}",
        pending.device_id,
        pending.name,
        pending.short_code
    );
    Ok(response)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::crypto::pairing::PairingLink;

    #[test]
    fn an_offer_pairs_one_device_once_and_revocation_is_seen_by_a_running_registry() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let bridge = bridge_identity(&home).unwrap();
        let registry = DeviceRegistry::open(&home);
        let (secret, expires_at) = create_offer(&home, 60).unwrap();
        let link = PairingLink {
            bridge_id: bridge.public().bridge_id(),
            bridge: bridge.public().to_wire(),
            relay: None,
            lan: None,
            secret,
            expires_at,
        };
        let device = Identity::generate();
        let (request, pending) = pairing::request(&link, &device, "phone").unwrap();
        let response = handle_pair_request(&home, &bridge, &registry, &request).unwrap();
        let paired = pending.finish(&response).unwrap();
        assert_eq!(offer_result(&home, &secret).unwrap().short_code, paired.short_code);
        let id = device.public().device_id();
        assert!(registry.active(&id).is_some());
        // The offer is one-time.
        assert!(handle_pair_request(&home, &bridge, &registry, &request).is_err());
        // A second handle on the same file (the CLI) revokes; the first sees it.
        DeviceRegistry::open(&home).revoke(id.as_str()).unwrap();
        assert!(registry.active(&id).is_none());
    }

    fn pair_on(home: &Home, confirm: bool) -> ([u8; 32], DeviceId, String) {
        let bridge = bridge_identity(home).unwrap();
        let (secret, expires_at) = create_offer_with(home, 60, confirm).unwrap();
        let link = PairingLink {
            bridge_id: bridge.public().bridge_id(),
            bridge: bridge.public().to_wire(),
            relay: None,
            lan: None,
            secret,
            expires_at,
        };
        let device = Identity::generate();
        let (request, pending) = pairing::request(&link, &device, "phone").unwrap();
        let response = handle_pair_request(home, &bridge, &DeviceRegistry::open(home), &request).unwrap();
        (secret, device.public().device_id(), pending.finish(&response).unwrap().short_code)
    }

    #[test]
    fn a_device_paired_on_a_confirming_offer_is_usable_only_once_the_terminal_confirms_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let registry = DeviceRegistry::open(&home);
        let (secret, id, code) = pair_on(&home, true);
        let waiting = offer_result(&home, &secret).unwrap();
        assert_eq!(waiting.short_code, code);
        assert!(waiting.pending.is_some());
        assert!(registry.active(&id).is_none(), "pending: refused until confirmed");
        let confirmed = confirm_pairing(&home, &registry, &secret, true).unwrap();
        assert!(confirmed.pending.is_none());
        assert!(registry.active(&id).is_some());

        // Refused on the terminal: never usable, and the answer cannot be replayed.
        let (secret, id, _) = pair_on(&home, true);
        confirm_pairing(&home, &registry, &secret, false).unwrap();
        assert!(registry.active(&id).is_none());
        assert!(confirm_pairing(&home, &registry, &secret, true).is_err());
        assert!(registry.active(&id).is_none());
    }
}
