//! mDNS for the LAN path, both sides: a bridge advertises its LAN server
//! ([`advertise`]), a device browses for the bridges it paired with ([`browse`]).
//! The service type and TXT keys are in [`terminull_protocol::lan`].
//!
//! An mDNS daemon joins the multicast group on every interface it uses, so tests run
//! it inside a private network namespace with only loopback (see `terminull-netns`),
//! and [`MdnsScope::LoopbackOnly`] narrows a daemon to loopback on top of that.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent, ServiceInfo};
use terminull_protocol::ids::BridgeId;
use terminull_protocol::lan::{LanAdvert, SERVICE_TYPE};

/// Bridges kept from one browse (a network can advertise anything).
const MAX_BRIDGES: usize = 64;

/// Which interfaces an mDNS daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MdnsScope {
    /// Every interface (what a bridge on a real LAN wants).
    #[default]
    AllInterfaces,
    /// IPv4 loopback only (tests, a bridge bound to 127.0.0.1).
    LoopbackOnly,
}

/// Why mDNS could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MdnsError {
    /// The mDNS daemon failed (no multicast, socket errors).
    #[error("mDNS: {0}")]
    Daemon(#[from] mdns_sd::Error),
}

fn daemon(scope: MdnsScope) -> Result<ServiceDaemon, MdnsError> {
    let daemon = ServiceDaemon::new()?;
    if scope == MdnsScope::LoopbackOnly {
        daemon.disable_interface(IfKind::All)?;
        daemon.enable_interface(IfKind::LoopbackV4)?;
    }
    Ok(daemon)
}

/// A running advertisement; dropping it withdraws it (a goodbye packet) and stops
/// its daemon.
pub struct Advertisement {
    daemon: ServiceDaemon,
    fullname: String,
}

impl Drop for Advertisement {
    fn drop(&mut self) {
        if let Ok(done) = self.daemon.unregister(&self.fullname) {
            // The goodbye is sent by the daemon's thread; wait for it briefly so a
            // browser learns the bridge left instead of waiting for the record's TTL.
            let _ = done.recv_timeout(Duration::from_millis(500));
        }
        let _ = self.daemon.shutdown();
    }
}

impl std::fmt::Debug for Advertisement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Advertisement").field("fullname", &self.fullname).finish_non_exhaustive()
    }
}

impl Advertisement {
    /// The advertised instance's full DNS-SD name.
    pub fn fullname(&self) -> &str {
        &self.fullname
    }
}

/// Advertises `advert` for a LAN server bound to `bind`: that address alone, or, when
/// it is unspecified (`0.0.0.0`), the address of each interface the answer goes out on.
pub fn advertise(advert: &LanAdvert, bind: IpAddr, scope: MdnsScope) -> Result<Advertisement, MdnsError> {
    let daemon = daemon(scope)?;
    let host = format!("terminull-{}.local.", advert.bridge_id.as_str().trim_start_matches("brg_"));
    let txt: Vec<(&str, String)> = advert.txt();
    let txt: Vec<(&str, &str)> = txt.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let info = if bind.is_unspecified() {
        ServiceInfo::new(SERVICE_TYPE, &advert.instance_name(), &host, "", advert.port, &txt[..])?.enable_addr_auto()
    } else {
        ServiceInfo::new(SERVICE_TYPE, &advert.instance_name(), &host, bind, advert.port, &txt[..])?
    };
    let fullname = info.get_fullname().to_owned();
    daemon.register(info)?;
    tracing::info!("advertising {fullname} on port {} by mDNS", advert.port);
    Ok(Advertisement { daemon, fullname })
}

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
