//! What a session tells a user away from the screen: which blocks become a push
//! notice (a finished turn, a permission request, an error) and what it says. Pure,
//! so the wording is tested without a session.

use serde::Serialize;
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::ids::{AgentId, SessionId};
use terminull_protocol::relay::PushKind;

/// Something a user away from the screen wants to hear about: sent to paired devices
/// as a push, sealed for each (see docs/relay.md §Pushes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// The session.
    pub session_id: SessionId,
    /// What happened.
    pub kind: PushKind,
    /// One line for the notification's title.
    pub title: String,
    /// Detail.
    pub body: String,
}

/// The notice a block of `kind` in a session of `agent` is worth, if any.
pub fn notice_for(session_id: &SessionId, agent: &AgentId, kind: &BlockKind) -> Option<Notice> {
    let (kind, title, body) = match kind {
        BlockKind::SessionEnd(end) => {
            (PushKind::TurnFinished, format!("{agent}: turn finished"), end.message.clone().unwrap_or_default())
        }
        BlockKind::PermissionRequest(p) => {
            (PushKind::PermissionNeeded, format!("{agent} asks to use {}", p.tool), String::new())
        }
        BlockKind::Error(e) => (PushKind::Error, format!("{agent}: error"), e.message.clone()),
        _ => return None,
    };
    Some(Notice { session_id: session_id.clone(), kind, title, body })
}
