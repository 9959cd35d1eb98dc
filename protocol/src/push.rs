//! What a push notification is about: shared by the relay frames (`push`) and the
//! control messages (`push_settings`), so neither imports the other.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a notification is about (plaintext: the relay sets urgency from it).
/// `question` is new in this version: an older relay refuses it as `bad_frame`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum PushKind {
    /// A turn finished.
    TurnFinished,
    /// The agent waits for a permission answer.
    PermissionNeeded,
    /// The agent asks the user a question (a permission request of a question tool,
    /// such as Claude Code's `AskUserQuestion`).
    Question,
    /// A turn failed.
    Error,
}

impl PushKind {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            PushKind::TurnFinished => "turn_finished",
            PushKind::PermissionNeeded => "permission_needed",
            PushKind::Question => "question",
            PushKind::Error => "error",
        }
    }
}
