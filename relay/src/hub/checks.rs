//! What the relay checks in a bridge's device list and resumable sessions before it
//! keeps them.

use std::collections::{HashMap, HashSet};

use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::DeviceRecord;
use terminull_protocol::{DeviceId, SessionId};

use crate::refusal::Refusal;

/// The longest device name the relay stores.
const MAX_DEVICE_NAME: usize = 256;

/// Checks a device list from a bridge: every key parses, every id matches its key, no
/// duplicates, within the bound. Returns the devices that may connect.
pub(super) fn check_devices(
    devices: &[DeviceRecord],
    max: usize,
) -> Result<HashMap<DeviceId, PublicIdentity>, Refusal> {
    if devices.len() > max {
        return Err(Refusal::bad_frame(format!(
            "{} devices listed; this relay keeps at most {max} per bridge",
            devices.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut active = HashMap::new();
    for d in devices {
        let key = PublicIdentity::from_wire(&d.keys)
            .map_err(|e| Refusal::bad_frame(format!("device `{}`: {e}", d.device_id)))?;
        if key.device_id() != d.device_id {
            return Err(Refusal::bad_frame(format!(
                "device `{}`: the id does not match the device's key",
                d.device_id
            )));
        }
        if d.name.len() > MAX_DEVICE_NAME {
            return Err(Refusal::bad_frame(format!(
                "device `{}`: the name is longer than {MAX_DEVICE_NAME} bytes",
                d.device_id
            )));
        }
        if !seen.insert(d.device_id.clone()) {
            return Err(Refusal::bad_frame(format!("device `{}` is listed twice", d.device_id)));
        }
        if !d.revoked {
            active.insert(d.device_id.clone(), key);
        }
    }
    Ok(active)
}

/// `ids` without duplicates, the last `max` kept (oldest first).
pub(super) fn bounded_sessions(ids: &[SessionId], max: usize) -> Vec<SessionId> {
    let mut seen = HashSet::new();
    let mut out: Vec<SessionId> = ids.iter().filter(|s| seen.insert((*s).clone())).cloned().collect();
    if out.len() > max {
        out.drain(..out.len() - max);
    }
    out
}
