//! mDNS for the LAN path, the device's side: browsing for the bridges it paired with
//! ([`browse`]). The bridge's side, advertising its LAN server, and the scope both use
//! are in [`terminull_net::mdns`] (re-exported here as far as a browse needs them).
//! The service type and TXT keys are in [`terminull_protocol::lan`].

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use mdns_sd::ServiceEvent;
use terminull_net::mdns::daemon;
pub use terminull_net::mdns::{MdnsError, MdnsScope};
use terminull_protocol::ids::BridgeId;
use terminull_protocol::lan::{LanAdvert, SERVICE_TYPE};

/// Bridges kept from one browse (a network can advertise anything).
const MAX_BRIDGES: usize = 64;

/// A bridge found on the LAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanBridge {
    /// What it advertised.
    pub advert: LanAdvert,
    /// Its addresses, IPv4 first.
    pub addrs: Vec<SocketAddr>,
}

impl LanBridge {
    /// The LAN server's base URL (`ws://addr:port`), from its first address.
    pub fn url(&self) -> Option<String> {
        self.addrs.first().map(|a| format!("ws://{a}"))
    }
}

/// Browses for bridges for up to `timeout`. With `want`, returns as soon as that
/// bridge is found (or an empty list at the deadline); without, returns every
/// compatible bridge heard by the deadline. Malformed or incompatible advertisements
/// are logged and skipped.
pub async fn browse(scope: MdnsScope, timeout: Duration, want: Option<&BridgeId>) -> Result<Vec<LanBridge>, MdnsError> {
    let daemon = daemon(scope)?;
    let events = daemon.browse(SERVICE_TYPE)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut found: BTreeMap<BridgeId, LanBridge> = BTreeMap::new();
    while let Ok(Ok(event)) = tokio::time::timeout_at(deadline, events.recv_async()).await {
        let ServiceEvent::ServiceResolved(service) = event else { continue };
        let advert = match LanAdvert::from_txt(|k| service.get_property_val_str(k), service.port) {
            Ok(advert) if advert.is_compatible() => advert,
            Ok(advert) => {
                tracing::debug!("{}: protocol {} is not this build's; skipped", service.fullname, advert.protocol);
                continue;
            }
            Err(e) => {
                tracing::warn!("{}: {e}; skipped", service.fullname.chars().take(128).collect::<String>());
                continue;
            }
        };
        let mut ips: Vec<IpAddr> = service.addresses.iter().map(|a| a.to_ip_addr()).collect();
        ips.sort_by_key(|ip| (ip.is_ipv6(), *ip));
        let addrs: Vec<SocketAddr> = ips.into_iter().map(|ip| SocketAddr::new(ip, advert.port)).collect();
        if addrs.is_empty() {
            continue;
        }
        let is_wanted = want == Some(&advert.bridge_id);
        if found.len() < MAX_BRIDGES || found.contains_key(&advert.bridge_id) {
            found.insert(advert.bridge_id.clone(), LanBridge { advert, addrs });
        }
        if is_wanted {
            break;
        }
    }
    let _ = daemon.stop_browse(SERVICE_TYPE);
    let _ = daemon.shutdown();
    Ok(match want {
        Some(id) => found.remove(id).into_iter().collect(),
        None => found.into_values().collect(),
    })
}
