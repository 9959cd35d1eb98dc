//! What a session tells a user away from the screen: which blocks become a push
//! notice (a finished turn, a permission request, an error) and what it says. Pure,
//! so the wording is tested without a session.

use terminull_protocol::blocks::BlockKind;
use terminull_protocol::ids::{AgentId, SessionId};
use terminull_protocol::relay::PushKind;

use crate::service::Notice;

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
