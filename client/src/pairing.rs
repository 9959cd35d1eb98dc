//! Pairing with a bridge from its QR link, through the relay's HTTP pairing broker.
//! The relay carries the request and the answer but cannot forge either: both are
//! authenticated with the link's one-time secret (docs/encryption.md §Pairing).

use std::time::Duration;

use terminull_protocol::crypto::pairing::{self, PairResponse, PairedBridge, PairingLink};

use crate::home::{DeviceHome, HomeError, PairedBridgeRecord};
use crate::mdns::{self, MdnsScope};
use crate::net::{self, Endpoint, NetError};

/// How long the broker may take (the bridge answers while its user watches).
const PAIR_TIMEOUT: Duration = Duration::from_secs(40);
/// How long to browse for the bridge by mDNS.
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(3);

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
    /// Neither the link's addresses nor mDNS led to the bridge (each attempt and why).
    #[error("cannot reach the bridge to pair: {0}")]
    Unreachable(String),
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
///
/// The request goes to the link's LAN server, else its relay; when neither answers
/// (or the link names neither) and `discover` is set, to the bridge's LAN server found
/// by mDNS. Only a failure to reach one moves on to the next: a refusal is final.
pub async fn pair(
    home: &DeviceHome,
    link_url: &str,
    name: &str,
    discover: Option<MdnsScope>,
) -> Result<PairedBridge, PairError> {
    let link = PairingLink::parse(link_url)?;
    let now = unix_now();
    if link.expires_at < now {
        return Err(PairError::Crypto(terminull_protocol::crypto::CryptoError::Pairing(format!(
            "the link expired {} s ago; run `terminull pair` again",
            now - link.expires_at
        ))));
    }
    let identity = home.identity()?;
    let (request, pending) = pairing::request(&link, &identity, name)?;
    let body = serde_json::to_vec(&request).map_err(|e| PairError::Refused { status: 0, message: e.to_string() })?;
    let mut tried = Vec::new();
    let mut answered = None;
    for (base, is_lan) in
        link.lan.iter().map(|l| (l.clone(), true)).chain(link.relay.iter().map(|r| (r.clone(), false)))
    {
        match post_pair_request(&base, &link, &body).await {
            Ok(response) => {
                answered = Some((response, is_lan.then_some(base)));
                break;
            }
            Err(PairError::Net(e)) => tried.push(format!("{base}: {e}")),
            Err(e) => return Err(e),
        }
    }
    if answered.is_none()
        && let Some(scope) = discover
    {
        let found = mdns::browse(scope, DISCOVER_TIMEOUT, Some(&link.bridge_id))
            .await
            .map_err(|e| PairError::Unreachable(e.to_string()))?;
        match found.first().and_then(|b| b.url()) {
            Some(url) => match post_pair_request(&url, &link, &body).await {
                Ok(response) => answered = Some((response, Some(url))),
                Err(PairError::Net(e)) => tried.push(format!("{url} (found by mDNS): {e}")),
                Err(e) => return Err(e),
            },
            None => tried.push("mDNS found no LAN server of this bridge".into()),
        }
    }
    let Some((response, lan)) = answered else {
        if tried.is_empty() {
            tried.push("the link names no relay and no LAN server, and discovery is off".into());
        }
        return Err(PairError::Unreachable(tried.join("; ")));
    };
    let answer: PairResponse = serde_json::from_slice(&response.body)
        .map_err(|e| PairError::Refused { status: 200, message: format!("unreadable answer: {e}") })?;
    let paired = pending.finish(&answer)?;
    home.add_bridge(PairedBridgeRecord {
        bridge_id: paired.bridge_id.clone(),
        keys: paired.keys.clone(),
        relay: paired.relay.clone(),
        lan: lan.or_else(|| paired.lan.clone()),
        paired_at: now,
    })?;
    Ok(paired)
}

/// POSTs a pairing request to the broker at `base` (a relay or a LAN server).
async fn post_pair_request(base: &str, link: &PairingLink, body: &[u8]) -> Result<net::HttpResponse, PairError> {
    let url = format!("{}/v1/bridges/{}/pair", Endpoint::parse(base)?.http_base(), link.bridge_id);
    let response = net::request_json("POST", &url, Some(body), PAIR_TIMEOUT).await?;
    if response.status != 200 {
        let message = serde_json::from_slice::<serde_json::Value>(&response.body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&response.body).chars().take(200).collect());
        return Err(PairError::Refused { status: response.status, message });
    }
    Ok(response)
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
