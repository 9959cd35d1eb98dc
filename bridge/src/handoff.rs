//! The handoff state a session keeps across a bridge restart (docs/session-handoff.md,
//! "Across a bridge restart"): what it accepted and has not carried out, and whether a
//! terminal holds the conversation. Saved in the session's `meta.json` under
//! `pending`; the behaviour that changes it is [`crate::session`]'s.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use terminull_protocol::blocks::UserMessage;

/// What a session has accepted and not yet carried out: kept in `meta.json` so that a
/// restarted bridge neither loses a queued message nor forgets that a terminal owns
/// the conversation (docs/session-handoff.md, "Across a bridge restart").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWork {
    /// Messages accepted but not yet sent to the agent, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub queued: VecDeque<UserMessage>,
    /// Set while a terminal owns the conversation (or was handed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<TerminalHold>,
    /// Where the mirror of the agent's own transcript stopped (opaque, the adapter's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_cursor: Option<String>,
}

impl PendingWork {
    /// Nothing queued, not parked, no mirror position.
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty() && self.parked.is_none() && self.mirror_cursor.is_none()
    }

    /// Whether a restarted bridge must revive the session at once rather than when a
    /// client next touches it: a message waits, or a terminal must be watched.
    pub fn needs_attention(&self) -> bool {
        !self.queued.is_empty() || self.parked.is_some()
    }
}

/// A terminal's hold on a conversation: while a session keeps one (it is *parked*),
/// nothing is sent to the agent until the terminal lets go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalHold {
    /// A terminal was seen owning the conversation since it was parked.
    #[serde(default)]
    pub seen_owner: bool,
    /// The terminal's process, when last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_pid: Option<u32>,
    /// The command given to the user (`continue_in_terminal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_command: Option<Vec<String>>,
}
