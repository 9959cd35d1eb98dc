//! A session's policy: the limits it runs under and the pure decisions taken from
//! them (may the adapter restart, does a parked session attach). Pure values and
//! functions, so tests can shorten the limits and check the decisions without a
//! process.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::home::Config;

/// Policy of a session; small pure values so tests can shorten them.
#[derive(Debug, Clone)]
pub struct SessionPolicy {
    /// A running turn with no output for this long is declared hung.
    pub liveness: Duration,
    /// Deadline for the adapter's handshake.
    pub handshake_timeout: Duration,
    /// At most this many crashes …
    pub crash_budget: usize,
    /// … within this window before automatic restarts stop.
    pub crash_window: Duration,
    /// How often a parked session asks whether the terminal still owns it and reads
    /// the terminal's transcript.
    pub handoff_poll: Duration,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        Self {
            liveness: Duration::from_secs(600),
            handshake_timeout: Duration::from_secs(120),
            crash_budget: 5,
            crash_window: Duration::from_secs(180),
            handoff_poll: Duration::from_secs(2),
        }
    }
}

/// The session policy a configuration asks for. Defined here rather than in
/// [`crate::home`] so that the configuration does not depend on the session module.
impl Config {
    /// The session policy this configuration asks for (the defaults, with `[handoff]`).
    pub fn session_policy(&self) -> SessionPolicy {
        let mut policy = SessionPolicy::default();
        if let Some(h) = &self.handoff {
            policy.handoff_poll = Duration::from_millis(h.poll_ms.clamp(50, 60_000));
        }
        policy
    }
}

/// Messages a session holds for later delivery (behind a turn, or while a terminal
/// owns the conversation); one more is refused as `busy`. They are kept in the
/// session's metadata, so the bound also bounds that file.
pub const MAX_QUEUED_MESSAGES: usize = 64;

/// True when `crashes` (times of past crashes, oldest first) leave room for another
/// automatic restart at `now`.
pub fn may_restart(crashes: &VecDeque<Instant>, now: Instant, policy: &SessionPolicy) -> bool {
    crashes.iter().filter(|t| now.duration_since(**t) <= policy.crash_window).count() < policy.crash_budget
}

/// What a parked session does at a poll, given whether a terminal owns the
/// conversation now, whether one was seen owning it since the session was parked, and
/// how many messages wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachDecision {
    /// Stay parked (mirroring).
    Stay,
    /// Attach: re-resolve the lineage head, go live, drain the queue.
    Attach,
}

/// The parking policy: attach once no terminal owns the conversation and either a
/// terminal was seen owning it (it went idle) or a message waits. A session handed to
/// the terminal by `continue_in_terminal` therefore stays parked until the terminal has
/// taken it and let it go, or until the user writes from the app again.
pub fn attach_decision(owned: bool, seen_owner: bool, queued: usize) -> AttachDecision {
    if !owned && (seen_owner || queued > 0) { AttachDecision::Attach } else { AttachDecision::Stay }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_session_attaches_only_once_the_terminal_is_gone_and_there_is_a_reason() {
        use AttachDecision::{Attach, Stay};
        // Owned: never, whatever waits.
        assert_eq!(attach_decision(true, true, 3), Stay);
        assert_eq!(attach_decision(true, false, 0), Stay);
        // The terminal was seen and is gone: attach, queue or not.
        assert_eq!(attach_decision(false, true, 0), Attach);
        assert_eq!(attach_decision(false, true, 2), Attach);
        // Handed over but the terminal has not started yet: wait, unless the user writes.
        assert_eq!(attach_decision(false, false, 0), Stay);
        assert_eq!(attach_decision(false, false, 1), Attach);
    }

    #[test]
    fn crash_budget_counts_only_recent_crashes() {
        let policy =
            SessionPolicy { crash_budget: 3, crash_window: Duration::from_secs(60), ..SessionPolicy::default() };
        let now = Instant::now() + Duration::from_secs(1000);
        let at = |secs_ago: u64| now - Duration::from_secs(secs_ago);
        assert!(may_restart(&VecDeque::new(), now, &policy));
        assert!(may_restart(&[at(10), at(20)].into(), now, &policy));
        assert!(!may_restart(&[at(10), at(20), at(30)].into(), now, &policy));
        assert!(may_restart(&[at(100), at(20), at(30)].into(), now, &policy));
    }
}
