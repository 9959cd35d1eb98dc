//! Admission per peer address: every TCP connection (HTTP or WebSocket) counts toward
//! its address's `max_connections_per_ip`, and until it authenticates (a WebSocket's
//! accepted `register`/`auth`; plain HTTP never does) toward the smaller unauthenticated
//! budgets, per address and in total. One address can then hold only its share: it
//! cannot take every connection the relay has, nor every file descriptor with idle HTTP
//! sockets.
//!
//! An address is an IPv4 address, or an IPv6 /64 (one host usually has a whole /64);
//! an IPv4-mapped IPv6 address counts as its IPv4 address.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::RelayConfig;

/// The bounds [`Peers`] enforces.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    per_ip: usize,
    unauthenticated: usize,
    unauthenticated_per_ip: usize,
}

/// What one address holds now.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    total: usize,
    unauthenticated: usize,
}

#[derive(Debug, Default)]
struct Counts {
    /// Only addresses holding at least one connection: the map is bounded by the
    /// connections themselves.
    by_addr: HashMap<IpAddr, Held>,
    unauthenticated: usize,
}

/// The relay's table of connections per address.
#[derive(Debug)]
pub(crate) struct Peers {
    bounds: Bounds,
    counts: Mutex<Counts>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The address holds `max_connections_per_ip` connections.
    PerIp(usize),
    /// The address holds `max_unauthenticated_per_ip` unauthenticated connections.
    UnauthenticatedPerIp(usize),
    /// The relay holds `max_unauthenticated` unauthenticated connections.
    Unauthenticated(usize),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::PerIp(n) => write!(f, "this address already holds {n} connections to the relay"),
            Refused::UnauthenticatedPerIp(n) => {
                write!(f, "this address already holds {n} unauthenticated connections to the relay")
            }
            Refused::Unauthenticated(n) => write!(f, "the relay holds {n} unauthenticated connections"),
        }
    }
}

/// The address a connection from `ip` counts under.
fn addr_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl Peers {
    /// The table, with the bounds of `config`.
    pub(crate) fn new(config: &RelayConfig) -> Arc<Self> {
        Arc::new(Self {
            bounds: Bounds {
                per_ip: config.max_connections_per_ip,
                unauthenticated: config.max_unauthenticated,
                unauthenticated_per_ip: config.max_unauthenticated_per_ip,
            },
            counts: Mutex::new(Counts::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        // Counters stay valid on their own if a holder panicked.
        self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits a new, unauthenticated connection from `ip`, or says why not. The slot
    /// gives its counts back when dropped.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Arc<PeerSlot>, Refused> {
        let key = addr_key(ip);
        let b = self.bounds;
        let mut counts = self.lock();
        let held = counts.by_addr.get(&key).copied().unwrap_or_default();
        if held.total >= b.per_ip {
            return Err(Refused::PerIp(b.per_ip));
        }
        if held.unauthenticated >= b.unauthenticated_per_ip {
            return Err(Refused::UnauthenticatedPerIp(b.unauthenticated_per_ip));
        }
        if counts.unauthenticated >= b.unauthenticated {
            return Err(Refused::Unauthenticated(b.unauthenticated));
        }
        counts.unauthenticated += 1;
        let entry = counts.by_addr.entry(key).or_default();
        entry.total += 1;
        entry.unauthenticated += 1;
        Ok(Arc::new(PeerSlot { peers: Arc::clone(self), key, authenticated: AtomicBool::new(false) }))
    }

    /// What `ip` holds now: (connections, unauthenticated ones).
    #[cfg(test)]
    fn held(&self, ip: IpAddr) -> (usize, usize) {
        let held = self.lock().by_addr.get(&addr_key(ip)).copied().unwrap_or_default();
        (held.total, held.unauthenticated)
    }
}

/// One admitted connection's place in [`Peers`]; shared by the HTTP connection and the
/// WebSocket task it becomes, and given back when the last of them drops it.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    peers: Arc<Peers>,
    key: IpAddr,
    authenticated: AtomicBool,
}

impl PeerSlot {
    /// The connection authenticated: it leaves the unauthenticated budgets (and stays
    /// in its address's total). Idempotent.
    pub(crate) fn authenticated(&self) {
        if self.authenticated.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut counts = self.peers.lock();
        counts.unauthenticated = counts.unauthenticated.saturating_sub(1);
        if let Some(held) = counts.by_addr.get_mut(&self.key) {
            held.unauthenticated = held.unauthenticated.saturating_sub(1);
        }
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let unauthenticated = !*self.authenticated.get_mut();
        let mut counts = self.peers.lock();
        if unauthenticated {
            counts.unauthenticated = counts.unauthenticated.saturating_sub(1);
        }
        if let Some(held) = counts.by_addr.get_mut(&self.key) {
            held.total = held.total.saturating_sub(1);
            if unauthenticated {
                held.unauthenticated = held.unauthenticated.saturating_sub(1);
            }
            if held.total == 0 {
                counts.by_addr.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(per_ip: usize, unauthenticated: usize, unauthenticated_per_ip: usize) -> Arc<Peers> {
        let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), "/nonexistent");
        config.max_connections_per_ip = per_ip;
        config.max_unauthenticated = unauthenticated;
        config.max_unauthenticated_per_ip = unauthenticated_per_ip;
        Peers::new(&config)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_holds_at_most_its_share_and_another_address_is_not_affected() {
        let p = peers(3, 100, 2);
        let a = ip("10.0.0.1");
        let first = p.admit(a).unwrap();
        let second = p.admit(a).unwrap();
        assert_eq!(p.admit(a).unwrap_err(), Refused::UnauthenticatedPerIp(2), "two unauthenticated already");
        first.authenticated();
        second.authenticated();
        let third = p.admit(a).unwrap();
        assert_eq!(p.admit(a).unwrap_err(), Refused::PerIp(3), "three in all");
        assert!(p.admit(ip("10.0.0.2")).is_ok(), "another address has its own share");
        drop(third);
        assert_eq!(p.held(a), (2, 0));
        drop((first, second));
        assert_eq!(p.held(a), (0, 0));
        assert!(p.lock().by_addr.is_empty(), "addresses holding nothing are forgotten");
    }

    #[test]
    fn unauthenticated_connections_have_a_global_budget() {
        let p = peers(10, 2, 10);
        let _a = p.admit(ip("10.0.0.1")).unwrap();
        let b = p.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(p.admit(ip("10.0.0.3")).unwrap_err(), Refused::Unauthenticated(2));
        b.authenticated();
        b.authenticated();
        let _c = p.admit(ip("10.0.0.3")).expect("an authenticated connection left the budget");
        assert_eq!(p.lock().unauthenticated, 2, "and left it once");
    }

    #[test]
    fn ipv6_addresses_count_per_64_and_mapped_ipv4_as_ipv4() {
        let p = peers(1, 100, 100);
        let _one = p.admit(ip("2001:db8:1:2::1")).unwrap();
        assert!(p.admit(ip("2001:db8:1:2:ffff::9")).is_err(), "same /64");
        assert!(p.admit(ip("2001:db8:1:3::1")).is_ok(), "another /64");
        let _v4 = p.admit(ip("192.0.2.7")).unwrap();
        assert!(p.admit(ip("::ffff:192.0.2.7")).is_err(), "the mapped form is the same address");
    }
}
