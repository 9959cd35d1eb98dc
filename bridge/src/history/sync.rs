//! The fsync policy (see the module docs of [`super`]): when appending a block must
//! fsync the log, as a pure function, and the fsync of a directory that makes a
//! create, rename or unlink durable.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use terminull_protocol::blocks::BlockKind;

use super::error::{Result, io_err};

/// The default longest time between two fsyncs of a session log while blocks arrive.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(1000);

/// When [`SessionLog::append`](super::SessionLog::append) fsyncs the block log. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Never from `append`; only [`SessionLog::sync`](super::SessionLog::sync), `close` and drop do.
    Never,
    /// After every block.
    EveryBlock,
    /// After every turn-boundary block ([`is_sync_boundary`]), and after any other
    /// block once `max_interval` has passed since the last fsync.
    Boundaries {
        /// The longest time between fsyncs while blocks arrive.
        max_interval: Duration,
    },
}

impl Default for SyncPolicy {
    fn default() -> Self {
        Self::Boundaries { max_interval: DEFAULT_SYNC_INTERVAL }
    }
}

/// Whether a block of this kind is one the user must not lose: `agent_info`,
/// `user_message`, `permission_request`, `error` and `session_end`.
pub fn is_sync_boundary(kind: &BlockKind) -> bool {
    matches!(
        kind,
        BlockKind::AgentInfo(_)
            | BlockKind::UserMessage(_)
            | BlockKind::PermissionRequest(_)
            | BlockKind::Error(_)
            | BlockKind::SessionEnd(_)
    )
}

/// The fsync policy as a pure function: whether appending a block of `kind`, when
/// `since_last_sync` has passed since the log was last fsynced, must fsync it.
pub fn sync_due(policy: SyncPolicy, kind: &BlockKind, since_last_sync: Duration) -> bool {
    match policy {
        SyncPolicy::Never => false,
        SyncPolicy::EveryBlock => true,
        SyncPolicy::Boundaries { max_interval } => is_sync_boundary(kind) || since_last_sync >= max_interval,
    }
}

/// fsyncs a directory so that a create, rename or unlink in it is durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir, "fsync the directory"))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::{EndReason, ErrorBlock, SessionEnd, StreamedText, UserMessage};

    use super::*;

    fn text(id: &str, body: &str, done: bool) -> BlockKind {
        BlockKind::Text(StreamedText::snapshot(id, body, done))
    }

    #[test]
    fn sync_policy_fsyncs_at_boundaries_and_at_most_every_interval() {
        let policy = SyncPolicy::Boundaries { max_interval: Duration::from_millis(500) };
        let chunk = text("m", "x", false);
        let end = BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None });
        let user_msg = BlockKind::UserMessage(UserMessage { text: "x".into(), attachments: vec![] });
        let error = BlockKind::Error(ErrorBlock { message: "x".into(), recoverable: false, code: None });
        let ms = Duration::from_millis;
        let cases: &[(SyncPolicy, &BlockKind, Duration, bool)] = &[
            (policy, &chunk, ms(0), false),
            (policy, &chunk, ms(499), false),
            (policy, &chunk, ms(500), true),
            (policy, &text("m", "x", true), ms(10), false),
            (policy, &end, ms(0), true),
            (policy, &user_msg, ms(0), true),
            (policy, &error, ms(0), true),
            (SyncPolicy::Never, &end, ms(10_000), false),
            (SyncPolicy::EveryBlock, &chunk, ms(0), true),
        ];
        for (policy, kind, elapsed, want) in cases {
            assert_eq!(sync_due(*policy, kind, *elapsed), *want, "{policy:?} {} after {elapsed:?}", kind.block_type());
        }
        assert_eq!(SyncPolicy::default(), SyncPolicy::Boundaries { max_interval: DEFAULT_SYNC_INTERVAL });
    }
}
