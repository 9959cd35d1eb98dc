//! Where the relay may send a push: public addresses only, unless the operator names a host.
//!
//! A push subscription's endpoint comes from a device, so without a check the relay would
//! `POST` wherever a device points it, including its own loopback interface and the private
//! network it sits in (blind SSRF). [`EndpointPolicy`] refuses every address that is not
//! globally routable unicast (loopback, RFC 1918, CGNAT, link-local, unique-local,
//! multicast, unspecified, documentation, benchmarking and reserved ranges), both when a
//! subscription is registered and on the very address the sender is about to connect to
//! (so a name that resolves elsewhere later, DNS rebinding, is still refused). An operator
//! admits a self-hosted push service by naming its host ([`AllowedHost`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use super::error::PushError;
use super::http::Endpoint;

/// How long resolving an endpoint's host may take.
pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Addresses of one host tried per push attempt, at most.
pub(crate) const MAX_ADDRESSES_TRIED: usize = 4;

/// A host the operator admits as a push endpoint whatever it resolves to: `HOST` (any port)
/// or `HOST:PORT`, IPv6 literals in brackets (`[::1]:8443`). Compared with the endpoint's
/// host case-insensitively, exactly (no wildcards).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// The host, lowercased, IPv6 literals without brackets.
    pub host: String,
    /// The port, or `None` for any.
    pub port: Option<u16>,
}

impl FromStr for AllowedHost {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| format!("push allow-host `{text}`: {why} (expected HOST or HOST:PORT)");
        let (host, port) = if let Some(inner) = text.strip_prefix('[') {
            let (host, after) = inner.split_once(']').ok_or_else(|| bad("unterminated IPv6 literal"))?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or_else(|| bad("junk after the IPv6 literal"))?),
            };
            (host, port)
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            }
        };
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
        {
            return Err(bad("not a host name or IP address"));
        }
        let port = match port {
            None => None,
            Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| bad("invalid port"))?),
        };
        Ok(Self { host: host.to_ascii_lowercase(), port })
    }
}

impl fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => f.write_str(&host),
        }
    }
}

/// Which push endpoints the relay may contact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPolicy {
    /// Hosts admitted whatever they resolve to (self-hosted push services, test receivers).
    pub allowed_hosts: Vec<AllowedHost>,
}

impl EndpointPolicy {
    /// Public addresses only, plus `allowed_hosts`.
    pub fn new(allowed_hosts: Vec<AllowedHost>) -> Self {
        Self { allowed_hosts }
    }

    /// Whether the operator admitted this endpoint's host and port.
    pub(crate) fn admits(&self, endpoint: &Endpoint) -> bool {
        self.allowed_hosts.iter().any(|a| a.host == endpoint.host && a.port.is_none_or(|p| p == endpoint.port))
    }

    /// The addresses of `endpoint` the relay may connect to, at most
    /// [`MAX_ADDRESSES_TRIED`]: every resolved address for an admitted host, the public
    /// ones otherwise. Refuses when none is left, naming the first refused address.
    pub(crate) async fn resolve(&self, endpoint: &Endpoint) -> Result<Vec<SocketAddr>, PushError> {
        let host = endpoint.authority.clone();
        let lookup = tokio::net::lookup_host((endpoint.host.as_str(), endpoint.port));
        let resolved: Vec<SocketAddr> = tokio::time::timeout(RESOLVE_TIMEOUT, lookup)
            .await
            .map_err(|_| PushError::Timeout { host: host.clone(), timeout: RESOLVE_TIMEOUT })?
            .map_err(|source| PushError::Connect { host: host.clone(), source })?
            .collect();
        self.filter(endpoint, resolved)
    }

    /// The part of [`Self::resolve`] after the lookup.
    pub(crate) fn filter(&self, endpoint: &Endpoint, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, PushError> {
        let host = &endpoint.authority;
        if resolved.is_empty() {
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, "the host has no address");
            return Err(PushError::Connect { host: host.clone(), source });
        }
        if self.admits(endpoint) {
            return Ok(resolved.into_iter().take(MAX_ADDRESSES_TRIED).collect());
        }
        let mut refused = None;
        let mut usable = Vec::new();
        for addr in resolved {
            match non_public(addr.ip()) {
                None => usable.push(addr),
                Some(range) => {
                    refused.get_or_insert((addr.ip(), range));
                }
            }
        }
        match refused {
            Some((addr, range)) if usable.is_empty() => {
                Err(PushError::ForbiddenAddress { host: host.clone(), addr, range })
            }
            _ => Ok(usable.into_iter().take(MAX_ADDRESSES_TRIED).collect()),
        }
    }

    /// The check a subscription passes before it is stored: an IP literal or a resolved name
    /// in a non-public range is refused. A name that does not resolve now is accepted (the
    /// check on the address connected to still applies to every push).
    pub async fn check_subscription_endpoint(&self, url: &str) -> Result<(), PushError> {
        let endpoint = Endpoint::parse(url).map_err(|reason| PushError::InvalidEndpoint { reason })?;
        match self.resolve(&endpoint).await {
            Err(e @ PushError::ForbiddenAddress { .. }) => Err(e),
            Err(e) => {
                tracing::debug!(host = %endpoint.authority, error = %e, "push endpoint host does not resolve now; accepting it");
                Ok(())
            }
            Ok(_) => Ok(()),
        }
    }
}

/// Why `ip` is not a public unicast address, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: [([u8; 4], u32, &str); 17] = [
        ([0, 0, 0, 0], 8, "\"this network\" (0.0.0.0/8)"),
        ([10, 0, 0, 0], 8, "private (10.0.0.0/8)"),
        ([100, 64, 0, 0], 10, "carrier-grade NAT (100.64.0.0/10)"),
        ([127, 0, 0, 0], 8, "loopback (127.0.0.0/8)"),
        ([169, 254, 0, 0], 16, "link-local (169.254.0.0/16)"),
        ([172, 16, 0, 0], 12, "private (172.16.0.0/12)"),
        ([192, 0, 0, 0], 24, "IETF protocol assignments (192.0.0.0/24)"),
        ([192, 0, 2, 0], 24, "documentation (192.0.2.0/24)"),
        ([192, 31, 196, 0], 24, "AS112 (192.31.196.0/24)"),
        ([192, 52, 193, 0], 24, "AMT (192.52.193.0/24)"),
        ([192, 88, 99, 0], 24, "6to4 relay anycast (192.88.99.0/24)"),
        ([192, 168, 0, 0], 16, "private (192.168.0.0/16)"),
        ([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
        ([198, 51, 100, 0], 24, "documentation (198.51.100.0/24)"),
        ([203, 0, 113, 0], 24, "documentation (203.0.113.0/24)"),
        ([224, 0, 0, 0], 4, "multicast (224.0.0.0/4)"),
        ([240, 0, 0, 0], 4, "reserved or broadcast (240.0.0.0/4)"),
    ];
    RANGES.iter().find(|(net, bits, _)| in_v4(ip, *net, *bits)).map(|(_, _, name)| *name)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], bits: u32) -> bool {
    let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
    (u128::from(ip) & mask) == (u128::from(Ipv6Addr::from(net)) & mask)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    // Addresses that carry an IPv4 address reach that address: judge it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4).map(|_| "IPv4-mapped non-public (::ffff:0:0/96)");
    }
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        let [a, b] = ip.segments()[1].to_be_bytes();
        let [c, d] = ip.segments()[2].to_be_bytes();
        return non_public_v4(Ipv4Addr::new(a, b, c, d)).map(|_| "6to4 of a non-public IPv4 address (2002::/16)");
    }
    const RANGES: [([u16; 8], u32, &str); 5] = [
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation (2001:db8::/32)"),
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, "IETF protocol assignments (2001::/23)"),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation (3fff::/20)"),
        ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "segment routing (5f00::/16)"),
        ([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48, "AS112 (2620:4f:8000::/48)"),
    ];
    if let Some((_, _, name)) = RANGES.iter().find(|(net, bits, _)| in_v6(ip, *net, *bits)) {
        return Some(name);
    }
    if in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return None;
    }
    Some(if ip.is_unspecified() {
        "unspecified (::)"
    } else if ip.is_loopback() {
        "loopback (::1)"
    } else if in_v6(ip, [0xfc00, 0, 0, 0, 0, 0, 0, 0], 7) {
        "unique-local (fc00::/7)"
    } else if in_v6(ip, [0xfe80, 0, 0, 0, 0, 0, 0, 0], 10) {
        "link-local (fe80::/10)"
    } else if in_v6(ip, [0xff00, 0, 0, 0, 0, 0, 0, 0], 8) {
        "multicast (ff00::/8)"
    } else {
        "outside global unicast (2000::/3)"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn only_global_unicast_addresses_are_public() {
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "142.250.74.10",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "2a00:1450:4001::1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:0808:0808::1",
        ] {
            assert_eq!(non_public(ip(public)), None, "{public}");
        }
        for (private, range) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "carrier-grade NAT"),
            ("169.254.169.254", "link-local"),
            ("0.0.0.0", "\"this network\""),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved or broadcast"),
            ("192.0.2.1", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("::ffff:127.0.0.1", "IPv4-mapped"),
            ("::ffff:10.0.0.1", "IPv4-mapped"),
            ("2002:7f00:0001::1", "6to4"),
            ("64:ff9b::7f00:1", "outside global unicast"),
            ("::127.0.0.1", "outside global unicast"),
        ] {
            let reason = non_public(ip(private)).unwrap_or_else(|| panic!("{private} passed as public"));
            assert!(reason.starts_with(range), "{private}: {reason}");
        }
    }

    #[test]
    fn allowed_hosts_parse_and_match_host_and_port() {
        let a: AllowedHost = "Push.Local:8443".parse().unwrap();
        assert_eq!(a, AllowedHost { host: "push.local".into(), port: Some(8443) });
        assert_eq!("[::1]".parse::<AllowedHost>().unwrap(), AllowedHost { host: "::1".into(), port: None });
        assert_eq!("[::1]:9".parse::<AllowedHost>().unwrap().to_string(), "[::1]:9");
        for bad in ["", ":80", "a b", "host:0", "host:x", "[::1"] {
            assert!(bad.parse::<AllowedHost>().is_err(), "{bad}");
        }
        let policy = EndpointPolicy::new(vec![a, "127.0.0.1".parse().unwrap()]);
        let admits = |url: &str| policy.admits(&Endpoint::parse(url).unwrap());
        assert!(admits("https://push.local:8443/x") && admits("http://127.0.0.1:1234/x"));
        assert!(!admits("https://push.local/x") && !admits("https://127.0.0.2/x"));
    }

    #[test]
    fn a_forbidden_address_is_refused_unless_a_public_one_remains_or_the_host_is_admitted() {
        let endpoint = Endpoint::parse("https://rebind.example/x").unwrap();
        let addr = |s: &str| SocketAddr::new(ip(s), 443);
        let policy = EndpointPolicy::default();
        let err = policy.filter(&endpoint, vec![addr("127.0.0.1")]).unwrap_err();
        assert!(matches!(err, PushError::ForbiddenAddress { range, .. } if range.starts_with("loopback")));
        assert_eq!(policy.filter(&endpoint, vec![addr("10.0.0.1"), addr("8.8.8.8")]).unwrap(), vec![addr("8.8.8.8")]);
        let admitted = EndpointPolicy::new(vec!["rebind.example".parse().unwrap()]);
        assert_eq!(admitted.filter(&endpoint, vec![addr("127.0.0.1")]).unwrap(), vec![addr("127.0.0.1")]);
    }
}
