//! Compacting a session's log in the background when a replay shows it pays: the
//! rewrite runs on a blocking thread from a snapshot of the log's length (appends
//! never change what is before it), and the session's task swaps the new log in only
//! if nothing was appended meanwhile. So the next resume reads the compacted log.

use terminull_protocol::control::SessionState;

use super::actor::{Actor, RunningCompaction as Running};
use crate::history::{PreparedCompaction, Result};

/// A replay must have read at least this many lines for a compaction to be worth it.
pub(super) const COMPACT_MIN_LINES: u64 = 2_000;

/// True when a replay that read `lines` lines of the log and returned `kept` blocks
/// dropped more than half of them, and read enough for a rewrite to pay.
pub(super) fn compaction_pays(lines: u64, kept: u64) -> bool {
    lines >= COMPACT_MIN_LINES && kept.saturating_mul(2) < lines
}

impl Actor {
    /// After a replay that returned `kept` blocks: starts compacting the log in the
    /// background if it pays, no turn runs and none is being compacted already.
    pub(super) fn maybe_compact(&mut self, kept: usize) {
        let lines = self.log.last_replay_lines();
        let quiet = self.turn.is_none() && matches!(self.state, SessionState::Idle | SessionState::Detached);
        if self.compaction.is_some() || !quiet || !compaction_pays(lines, kept as u64) {
            return;
        }
        tracing::debug!(session = %self.spec.meta.session_id, lines, kept, "compacting the block log in the background");
        let job = self.log.compaction_job();
        self.compaction = Some(tokio::task::spawn_blocking(move || job.prepare()));
    }

    /// Puts a finished background compaction in place (when nothing was appended since).
    pub(super) fn compaction_done(
        &mut self,
        done: std::result::Result<Result<PreparedCompaction>, tokio::task::JoinError>,
    ) {
        self.compaction = None;
        let session = &self.spec.meta.session_id;
        match done {
            Ok(Ok(prepared)) => {
                if let Err(e) = self.log.install_compaction(prepared) {
                    tracing::warn!(%session, "cannot put the compacted block log in place: {e}");
                }
            }
            Ok(Err(e)) => tracing::warn!(%session, "cannot compact the block log: {e}"),
            Err(e) => tracing::warn!(%session, "the block log's compaction failed: {e}"),
        }
    }
}

/// Waits for the running compaction; never wakes when there is none.
pub(super) async fn compaction_finished(
    running: &mut Option<Running>,
) -> std::result::Result<Result<PreparedCompaction>, tokio::task::JoinError> {
    match running {
        Some(handle) => handle.await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_pays_only_for_a_big_replay_that_dropped_more_than_half() {
        assert!(compaction_pays(100_000, 17_779));
        assert!(!compaction_pays(100_000, 50_000));
        assert!(!compaction_pays(COMPACT_MIN_LINES - 1, 1));
        assert!(compaction_pays(COMPACT_MIN_LINES, 1));
    }
}
