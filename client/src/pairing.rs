//! Pairing with a bridge from its QR link, through the relay's HTTP pairing broker.
//! The relay carries the request and the answer but cannot forge either: both are
//! authenticated with the link's one-time secret (docs/encryption.md §Pairing).

use std::time::Duration;

use terminull_protocol::crypto::pairing::{self, PairResponse, PairedBridge, PairingLink};

use crate::home::{DeviceHome, HomeError, PairedBridgeRecord};
use crate::net::{self, Endpoint, NetError};

/// How long the broker may take (the bridge answers while its user watches).
const PAIR_TIMEOUT: Duration = Duration::from_secs(40);

/// Why pairing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairError {
    /// The link is malformed, expired, or the bridge's answer did not verify.
    #[error(transparent)]
    Crypto(#[from] terminull_protocol::crypto::CryptoError),
    /// The device's files.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// Reaching the relay failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The link names no relay (pair over the LAN instead).
    #[error("the pairing link names no relay")]
    NoRelay,
    /// The relay or the bridge refused.
    #[error("pairing refused ({status}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// The relay's or bridge's explanation.
        message: String,
    },
}

/// Pairs this device with the bridge of `link_url` under `name`, records the bridge
/// in the device's home, and returns the short code to compare with the bridge's.
pub async fn pair(home: &DeviceHome, link_url: &str, name: &str) -> Result<PairedBridge, PairError> {
    let link = PairingLink::parse(link_url)?;
    let now = unix_now();
    if link.expires_at < now {
        return Err(PairError::Crypto(terminull_protocol::crypto::CryptoError::Pairing(format!(
            "the link expired {} s ago; run `terminull pair` again",
            now - link.expires_at
        ))));
    }
    let relay = link.relay.clone().ok_or(PairError::NoRelay)?;
    let identity = home.identity()?;
    let (request, pending) = pairing::request(&link, &identity, name)?;
    let url = format!("{}/v1/bridges/{}/pair", Endpoint::parse(&relay)?.http_base(), link.bridge_id);
    let body = serde_json::to_vec(&request).map_err(|e| PairError::Refused { status: 0, message: e.to_string() })?;
    let response = net::request_json("POST", &url, Some(&body), PAIR_TIMEOUT).await?;
    if response.status != 200 {
        let message = serde_json::from_slice::<serde_json::Value>(&response.body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&response.body).chars().take(200).collect());
        return Err(PairError::Refused { status: response.status, message });
    }
    let answer: PairResponse = serde_json::from_slice(&response.body)
        .map_err(|e| PairError::Refused { status: 200, message: format!("unreadable answer: {e}") })?;
    let paired = pending.finish(&answer)?;
    home.add_bridge(PairedBridgeRecord {
        bridge_id: paired.bridge_id.clone(),
        keys: paired.keys.clone(),
        relay: paired.relay.clone(),
        paired_at: now,
    })?;
    Ok(paired)
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
