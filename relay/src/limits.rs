//! Rate limits: a token bucket per connection, and one per client IP address for the
//! pairing broker (with a bounded table of addresses).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token bucket: `rate` tokens per second, at most `burst` banked.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(rate_per_sec: f64, burst: f64) -> Self {
        Self { rate: rate_per_sec, burst, tokens: burst, last: Instant::now() }
    }

    /// Takes one token if there is one.
    pub(crate) fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Takes `n` tokens whether or not the bucket holds them: the balance may go
    /// negative, and [`Self::try_take`] refuses until it has refilled past 1.
    pub(crate) fn take_debt(&mut self, n: f64, now: Instant) {
        self.refill(now);
        self.tokens -= n;
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
    }

    /// True when the bucket has refilled completely (the address is idle).
    fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= self.burst
    }
}

/// Per-IP token buckets, at most `max_ips` tracked at once.
#[derive(Debug)]
pub(crate) struct IpRateLimiter {
    /// Tokens refilled per second.
    rate: f64,
    /// Tokens banked at most.
    burst: f64,
    max_ips: usize,
    buckets: Mutex<HashMap<IpAddr, TokenBucket>>,
}

impl IpRateLimiter {
    /// `per_minute` requests per minute per address, bursting to `per_minute`.
    pub(crate) fn new(per_minute: u32, max_ips: usize) -> Self {
        Self::per_window(per_minute, Duration::from_secs(60), max_ips)
    }

    /// `count` requests per `window` per address: `count` at once, then one every
    /// `window / count`.
    pub(crate) fn per_window(count: u32, window: Duration, max_ips: usize) -> Self {
        let burst = f64::from(count.max(1));
        let rate = f64::from(count) / window.as_secs_f64().max(f64::MIN_POSITIVE);
        Self { rate, burst, max_ips, buckets: Mutex::new(HashMap::new()) }
    }

    /// Whether `ip` may make one more request now.
    pub(crate) fn allow(&self, ip: IpAddr) -> bool {
        self.allow_at(ip, Instant::now())
    }

    fn allow_at(&self, ip: IpAddr, now: Instant) -> bool {
        let Ok(mut buckets) = self.buckets.lock() else { return false };
        if !buckets.contains_key(&ip) && buckets.len() >= self.max_ips {
            // Forget addresses whose bucket has refilled: they are back to a fresh start
            // anyway. When every tracked address is active, refuse the newcomer rather
            // than grow without bound.
            buckets.retain(|_, b| !b.is_full(now));
            if buckets.len() >= self.max_ips {
                return false;
            }
        }
        let (rate, burst) = (self.rate, self.burst);
        buckets.entry(ip).or_insert_with(|| TokenBucket::new(rate, burst)).try_take(now)
    }
}

/// `Instant + Duration`, saturating instead of panicking on overflow.
pub(crate) fn deadline_after(now: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    now.checked_add(d).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let start = Instant::now();
        let mut b = TokenBucket::new(10.0, 3.0);
        assert!((0..3).all(|_| b.try_take(start)));
        assert!(!b.try_take(start));
        assert!(b.try_take(start + Duration::from_millis(100)));
        assert!(!b.try_take(start + Duration::from_millis(100)));
    }

    #[test]
    fn a_batch_charged_as_its_blocks_makes_the_next_frames_wait() {
        let start = Instant::now();
        let mut b = TokenBucket::new(10.0, 3.0);
        assert!(b.try_take(start));
        b.take_debt(4.0, start);
        assert!(!b.try_take(start + Duration::from_millis(200)), "2 in debt, 2 refilled: 0 < 1");
        assert!(b.try_take(start + Duration::from_millis(300)));
    }

    #[test]
    fn each_address_has_its_own_budget_and_the_table_is_bounded() {
        let limiter = IpRateLimiter::new(2, 2);
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        assert!(limiter.allow_at(a, now) && limiter.allow_at(a, now));
        assert!(!limiter.allow_at(a, now), "third request within the minute");
        assert!(limiter.allow_at(b, now));
        assert!(!limiter.allow_at(c, now), "table full of active addresses");
        assert!(limiter.allow_at(c, now + Duration::from_secs(61)), "idle addresses are forgotten");
    }
}
