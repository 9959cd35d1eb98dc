//! A rate limit for log lines of one source (one adapter): what a peer sends must not
//! be able to flood the bridge's log. At most `per_window` lines pass per window; the
//! rest are counted, announced once when the limit is hit, and summed up in one line
//! ("suppressed K lines from …") with the first line let through after the window.

use std::time::{Duration, Instant};

/// Warnings let through per source and minute by [`LogLimit::default`].
pub const DEFAULT_LINES_PER_MINUTE: u32 = 20;

/// What [`LogLimit::check`] decided for one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log the line; first say that `suppressed_before` lines were dropped (when > 0).
    Log {
        /// Lines dropped in the windows before this line.
        suppressed_before: u64,
    },
    /// Drop the line; `first` is the first one dropped since lines last passed (say so once).
    Suppress {
        /// The first line dropped.
        first: bool,
    },
}

/// The rate limit of one source's log lines. Pure: the caller gives the time.
#[derive(Debug, Clone)]
pub struct LogLimit {
    per_window: u32,
    window: Duration,
    started: Option<Instant>,
    passed: u32,
    suppressed: u64,
}

impl Default for LogLimit {
    fn default() -> Self {
        Self::new(DEFAULT_LINES_PER_MINUTE, Duration::from_secs(60))
    }
}

impl LogLimit {
    /// At most `per_window` (at least 1) lines per `window`.
    pub fn new(per_window: u32, window: Duration) -> Self {
        Self { per_window: per_window.max(1), window, started: None, passed: 0, suppressed: 0 }
    }

    /// Whether a line at `now` is logged.
    pub fn check(&mut self, now: Instant) -> Verdict {
        let expired = self.started.is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if expired {
            self.started = Some(now);
            self.passed = 1;
            return Verdict::Log { suppressed_before: std::mem::take(&mut self.suppressed) };
        }
        if self.passed < self.per_window {
            self.passed += 1;
            return Verdict::Log { suppressed_before: 0 };
        }
        self.suppressed += 1;
        Verdict::Suppress { first: self.suppressed == 1 }
    }

    /// [`check`](Self::check) now, writing the notice and the summary lines for
    /// `source` itself; true when the caller logs its line.
    pub fn admit(&mut self, source: &str) -> bool {
        match self.check(Instant::now()) {
            Verdict::Log { suppressed_before } => {
                if suppressed_before > 0 {
                    tracing::warn!("suppressed {suppressed_before} lines from {source}");
                }
                true
            }
            Verdict::Suppress { first } => {
                if first {
                    tracing::warn!(
                        "{source} sends more than {} lines to log per {:?}; the rest are counted, not logged",
                        self.per_window,
                        self.window
                    );
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_passes_the_limit_then_one_notice_then_one_summary_after_the_window() {
        let t0 = Instant::now();
        let mut limit = LogLimit::new(3, Duration::from_secs(60));
        let verdicts: Vec<_> = (0..10).map(|i| limit.check(t0 + Duration::from_millis(i))).collect();
        assert_eq!(&verdicts[..3], &[Verdict::Log { suppressed_before: 0 }; 3]);
        assert_eq!(verdicts[3], Verdict::Suppress { first: true });
        assert!(verdicts[4..].iter().all(|v| *v == Verdict::Suppress { first: false }));
        assert_eq!(limit.check(t0 + Duration::from_secs(60)), Verdict::Log { suppressed_before: 7 });
        assert_eq!(limit.check(t0 + Duration::from_secs(61)), Verdict::Log { suppressed_before: 0 });
    }

    #[test]
    fn a_quiet_source_is_never_limited_and_a_time_going_back_does_not_panic() {
        let t0 = Instant::now();
        let mut limit = LogLimit::new(2, Duration::from_secs(1));
        for i in 0..10 {
            assert_eq!(limit.check(t0 + Duration::from_secs(i)), Verdict::Log { suppressed_before: 0 });
        }
        assert_eq!(limit.check(t0), Verdict::Log { suppressed_before: 0 });
    }
}
