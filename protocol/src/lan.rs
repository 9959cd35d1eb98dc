//! The LAN path's mDNS advertisement (docs/relay.md#lan-discovery).
//!
//! While its LAN server runs, a bridge advertises one DNS-SD service instance of
//! [`SERVICE_TYPE`]. The SRV record carries the port, the A/AAAA records the addresses,
//! and the TXT record the keys below — never a secret: anyone on the network may read
//! them, and anyone may forge them. A device therefore treats an advertisement as a
//! hint only: the link handshake that follows is signed by the bridge's key, which the
//! device pinned at pairing, so a forged advertisement can make a connection fail
//! (the device then falls back to the relay) but can never impersonate the bridge.

use crate::ids::BridgeId;

/// The DNS-SD service type of a bridge's LAN server.
pub const SERVICE_TYPE: &str = "_terminull._tcp.local.";

/// TXT key: the bridge's id (`brg_…`), so a device finds the bridge it paired with.
pub const TXT_BRIDGE_ID: &str = "bridge_id";
/// TXT key: the device protocol version the LAN server speaks ([`crate::relay::PROTOCOL_VERSION`]).
pub const TXT_PROTOCOL: &str = "protocol";
/// TXT key: the LAN server's TCP port (the SRV record's port; repeated for readers of TXT alone).
pub const TXT_PORT: &str = "port";
/// TXT key: the WebSocket path devices connect to.
pub const TXT_PATH: &str = "path";

/// The WebSocket path of the device endpoint, on the relay and on the LAN server.
pub const CLIENT_PATH: &str = "/v1/client";

/// What a bridge advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanAdvert {
    /// The bridge.
    pub bridge_id: BridgeId,
    /// The device protocol version.
    pub protocol: u32,
    /// The LAN server's port.
    pub port: u16,
}

/// Why an advertisement read from the network is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LanAdvertError {
    /// A TXT key is missing.
    #[error("the advertisement has no `{0}` TXT key")]
    Missing(&'static str),
    /// A TXT value is malformed.
    #[error("the advertisement's `{key}` is not valid: {detail}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// What is wrong.
        detail: String,
    },
}

impl LanAdvert {
    /// The advertisement of `bridge_id`'s LAN server on `port`, this build's protocol.
    pub fn new(bridge_id: BridgeId, port: u16) -> Self {
        Self { bridge_id, protocol: crate::relay::PROTOCOL_VERSION, port }
    }

    /// The DNS-SD instance name: the bridge id, unique per bridge.
    pub fn instance_name(&self) -> String {
        self.bridge_id.as_str().to_owned()
    }

    /// The TXT record's key/value pairs.
    pub fn txt(&self) -> Vec<(&'static str, String)> {
        vec![
            (TXT_BRIDGE_ID, self.bridge_id.as_str().to_owned()),
            (TXT_PROTOCOL, self.protocol.to_string()),
            (TXT_PORT, self.port.to_string()),
            (TXT_PATH, CLIENT_PATH.to_owned()),
        ]
    }

    /// Reads an advertisement from its TXT record (`txt` looks a key up) and the SRV
    /// record's port, which wins over the TXT copy and must agree with it.
    pub fn from_txt<'a>(txt: impl Fn(&str) -> Option<&'a str>, srv_port: u16) -> Result<Self, LanAdvertError> {
        let get = |key: &'static str| txt(key).ok_or(LanAdvertError::Missing(key));
        let invalid = |key: &'static str, detail: String| LanAdvertError::Invalid { key, detail };
        let id = get(TXT_BRIDGE_ID)?;
        let well_formed = id.len() == 20
            && id.starts_with("brg_")
            && id[4..].bytes().all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b));
        if !well_formed {
            return Err(invalid(TXT_BRIDGE_ID, format!("`{}` is not a bridge id", truncate(id))));
        }
        let protocol = get(TXT_PROTOCOL)?;
        let protocol = protocol
            .parse::<u32>()
            .map_err(|_| invalid(TXT_PROTOCOL, format!("`{}` is not a version number", truncate(protocol))))?;
        if let Some(port) = txt(TXT_PORT)
            && port.parse::<u16>().ok() != Some(srv_port)
        {
            return Err(invalid(TXT_PORT, format!("`{}` disagrees with the SRV port {srv_port}", truncate(port))));
        }
        if srv_port == 0 {
            return Err(invalid(TXT_PORT, "port 0".into()));
        }
        if let Some(path) = txt(TXT_PATH)
            && path != CLIENT_PATH
        {
            return Err(invalid(TXT_PATH, format!("`{}` is not {CLIENT_PATH}", truncate(path))));
        }
        Ok(Self { bridge_id: BridgeId(id.to_owned()), protocol, port: srv_port })
    }

    /// True when this build can talk to the advertised server.
    pub fn is_compatible(&self) -> bool {
        self.protocol == crate::relay::PROTOCOL_VERSION
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "brg_abcdefghijklmnop";

    fn read(pairs: &[(&'static str, &'static str)], port: u16) -> Result<LanAdvert, LanAdvertError> {
        LanAdvert::from_txt(|k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v), port)
    }

    #[test]
    fn an_advertisement_reads_back_from_its_own_txt_record() {
        let advert = LanAdvert::new(BridgeId(ID.into()), 8478);
        let txt = advert.txt();
        let back = LanAdvert::from_txt(|k| txt.iter().find(|(key, _)| *key == k).map(|(_, v)| v.as_str()), 8478);
        assert_eq!(back, Ok(advert.clone()));
        assert!(advert.is_compatible());
        assert_eq!(advert.instance_name(), ID);
    }

    #[test]
    fn malformed_advertisements_are_refused_naming_the_key() {
        type Case<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);
        let cases: &[Case<'_>] = &[
            (&[("protocol", "1")], 8478, "bridge_id"),
            (&[("bridge_id", ID)], 8478, "protocol"),
            (&[("bridge_id", "dev_abcdefghijklmnop"), ("protocol", "1")], 8478, "bridge_id"),
            (&[("bridge_id", "brg_ABCDEFGHIJKLMNOP"), ("protocol", "1")], 8478, "bridge_id"),
            (&[("bridge_id", ID), ("protocol", "one")], 8478, "protocol"),
            (&[("bridge_id", ID), ("protocol", "1"), ("port", "9000")], 8478, "port"),
            (&[("bridge_id", ID), ("protocol", "1")], 0, "port"),
            (&[("bridge_id", ID), ("protocol", "1"), ("path", "/evil")], 8478, "path"),
        ];
        for (pairs, port, key) in cases {
            let err = read(pairs, *port).expect_err(&format!("{pairs:?} must be refused"));
            assert!(err.to_string().contains(key), "{pairs:?}: `{err}` should name `{key}`");
        }
    }

    #[test]
    fn another_protocol_version_reads_but_is_not_compatible() {
        let advert = read(&[("bridge_id", ID), ("protocol", "1")], 8478).unwrap();
        assert!(!advert.is_compatible());
    }
}
