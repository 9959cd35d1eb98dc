//! mDNS for the LAN path, the part both ends share: which interfaces a daemon uses
//! ([`MdnsScope`]), and the bridge's side, advertising its LAN server ([`advertise`]).
//! The device's side, browsing for the bridges it paired with, is in
//! `terminull_client::mdns`. The service type and TXT keys are in
//! [`terminull_protocol::lan`].
//!
//! An mDNS daemon joins the multicast group on every interface it uses, so tests run
//! it inside a private network namespace with only loopback (see `terminull-netns`),
//! and [`MdnsScope::LoopbackOnly`] narrows a daemon to loopback on top of that.

use std::net::IpAddr;
use std::time::Duration;

use mdns_sd::{IfKind, ServiceDaemon, ServiceInfo};
use terminull_protocol::lan::{LanAdvert, SERVICE_TYPE};

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

/// An mDNS daemon on the interfaces `scope` names: what [`advertise`] registers with
/// and a device browses with.
pub fn daemon(scope: MdnsScope) -> Result<ServiceDaemon, MdnsError> {
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
