//! The LAN server's admission budgets, per address and in all.
//!
//! - Unauthenticated WebSockets (upgraded, not yet through `auth`) have their own
//!   small budget, per IP and in all, and a handshake deadline; a paired device,
//!   once authenticated, moves to the authenticated budget, so a flood of sockets
//!   that never authenticate cannot deny a paired device.
//! - Pairing requests are limited per IP and in all, per minute: one address
//!   sending junk requests uses up its own allowance, not another's.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Addresses remembered by the pairing limiter at most; beyond, a new address is
/// refused until old ones expire (the global limit applies to everyone anyway).
const MAX_TRACKED_ADDRESSES: usize = 4096;

/// Connections counted per IP and in all.
#[derive(Debug, Default)]
pub(super) struct Counter {
    counts: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; gives its place back when dropped.
#[derive(Debug)]
pub(super) struct Admitted {
    counter: Arc<Counter>,
    ip: IpAddr,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    /// This address holds its whole share.
    ThisAddress,
    /// The budget is used up in all.
    Everyone,
}

impl Counter {
    /// Admits one more connection from `ip` when it has fewer than `per_ip` and
    /// everyone fewer than `total`.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr, per_ip: usize, total: usize) -> Result<Admitted, Full> {
        let mut guard = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (all, per) = &mut *guard;
        if *all >= total {
            return Err(Full::Everyone);
        }
        let n = per.entry(ip).or_default();
        if *n >= per_ip {
            return Err(Full::ThisAddress);
        }
        *n += 1;
        *all += 1;
        Ok(Admitted { counter: self.clone(), ip })
    }

    /// Connections admitted now, in all.
    pub(super) fn total(&self) -> usize {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut guard = self.counter.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (all, per) = &mut *guard;
        *all = all.saturating_sub(1);
        if let Some(n) = per.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
    }
}

/// Pairing requests in the last minute, per IP and in all.
#[derive(Debug, Default)]
pub(super) struct PairLimiter {
    recent: Mutex<(Times, HashMap<IpAddr, Times>)>,
}

/// When the requests of the last minute came.
type Times = VecDeque<Instant>;

impl PairLimiter {
    /// Counts a request from `ip` when it is within `per_ip` and `total` per minute.
    pub(super) fn allow(&self, ip: IpAddr, per_ip: u32, total: u32) -> Result<(), Full> {
        let minute = Duration::from_secs(60);
        let mut guard = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let (all, per) = &mut *guard;
        let expire = |q: &mut Times| {
            while q.front().is_some_and(|t| t.elapsed() > minute) {
                q.pop_front();
            }
        };
        expire(all);
        if per.len() >= MAX_TRACKED_ADDRESSES {
            per.retain(|_, q| {
                expire(q);
                !q.is_empty()
            });
        }
        if !per.contains_key(&ip) && per.len() >= MAX_TRACKED_ADDRESSES {
            return Err(Full::Everyone);
        }
        let mine = per.entry(ip).or_default();
        expire(mine);
        if mine.len() >= per_ip as usize {
            return Err(Full::ThisAddress);
        }
        if all.len() >= total as usize {
            return Err(Full::Everyone);
        }
        mine.push_back(Instant::now());
        all.push_back(Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_that_used_its_share_does_not_use_up_another_addresss() {
        let counter = Arc::new(Counter::default());
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let held: Vec<_> = (0..3).map(|_| counter.admit(a, 3, 10).unwrap()).collect();
        assert_eq!(counter.admit(a, 3, 10).unwrap_err(), Full::ThisAddress);
        let other = counter.admit(b, 3, 10).unwrap();
        assert_eq!(counter.total(), 4);
        drop(held);
        drop(other);
        assert_eq!(counter.total(), 0);
        assert!(counter.admit(a, 3, 10).is_ok());

        let pairing = PairLimiter::default();
        for _ in 0..5 {
            pairing.allow(a, 5, 20).unwrap();
        }
        assert_eq!(pairing.allow(a, 5, 20), Err(Full::ThisAddress));
        assert_eq!(pairing.allow(b, 5, 20), Ok(()));
        assert_eq!(pairing.allow(b, 5, 6), Err(Full::Everyone));
    }
}
