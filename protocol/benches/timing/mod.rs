//! The timing loop the protocol's bench binaries share.

use std::time::{Duration, Instant};

/// Runs `f` in batches of `batch` (after one warm-up batch) for about `budget`;
/// returns (iterations, elapsed).
pub fn measure(budget: Duration, batch: u64, mut f: impl FnMut()) -> (u64, Duration) {
    for _ in 0..batch {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for _ in 0..batch {
            f();
        }
        n += batch;
    }
    (n, start.elapsed())
}
