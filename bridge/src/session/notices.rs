//! What a session tells a user away from the screen: which blocks become a push
//! notice (a finished turn, a permission request, a question, an error or an abnormal
//! end) and what it says. Pure, so the wording is tested without a session.

use serde::Serialize;
use serde_json::Value;
use terminull_protocol::blocks::{BlockKind, EndReason, PermissionOptionKind, PermissionRequest};
use terminull_protocol::ids::{AgentId, SessionId};
use terminull_protocol::relay::PushKind;

/// Characters of a tool's command or input kept in a notice (the sealed push must stay
/// under the relay's push frame bound).
pub const DETAIL_CHARS: usize = 600;

/// Something a user away from the screen wants to hear about: sent to paired devices
/// as a push, sealed for each (see docs/encryption.md §Pushes). Its JSON is the sealed
/// `notice_json`; the optional fields are absent when they do not apply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// The session.
    pub session_id: SessionId,
    /// What happened.
    pub kind: PushKind,
    /// One line for the notification's title.
    pub title: String,
    /// Detail: the command or input of a permission request, the error's text.
    pub body: String,
    /// The agent (`claude`, `echo`, …).
    pub agent: AgentId,
    /// The `seq` of the block, so a tap opens the session at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The tool of a permission request or question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The permission request's id (what Allow/Deny answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The id of its first allowing option (`allow_once`, else `allow_always`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_option: Option<String>,
    /// The id of its first rejecting option.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_option: Option<String>,
}

/// Whether a permission request is the agent asking the user a question.
pub(crate) fn is_question(p: &PermissionRequest) -> bool {
    let tool = p.tool.to_ascii_lowercase();
    tool.contains("question") || tool == "ask_user" || tool == "askuser"
}

/// What a user reads of a tool's input: its command, else its text, path or
/// question, else the input's JSON; at most [`DETAIL_CHARS`] characters.
pub fn detail_of(input: &Value) -> String {
    let text = ["command", "cmd", "text", "question", "file_path", "path", "url", "prompt"]
        .iter()
        .find_map(|k| input.get(*k))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Array(a) => a
                .iter()
                .map(|w| w.as_str().map(str::to_owned).unwrap_or_else(|| w.to_string()))
                .collect::<Vec<_>>()
                .join(" "),
            other => other.to_string(),
        })
        .unwrap_or_else(|| if input.is_null() { String::new() } else { input.to_string() });
    let mut out: String = text.chars().take(DETAIL_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// The notice a block of `kind` (its `seq`, when stamped) in a session of `agent` is worth, if any.
pub fn notice_for(session_id: &SessionId, agent: &AgentId, seq: Option<u64>, kind: &BlockKind) -> Option<Notice> {
    let mut notice = Notice {
        session_id: session_id.clone(),
        kind: PushKind::TurnFinished,
        title: String::new(),
        body: String::new(),
        agent: agent.clone(),
        seq,
        tool: None,
        request_id: None,
        allow_option: None,
        deny_option: None,
    };
    match kind {
        BlockKind::SessionEnd(end) => match end.reason {
            EndReason::Stopped => return None,
            EndReason::Error => {
                notice.kind = PushKind::Error;
                notice.title = format!("{agent}: the turn failed");
                notice.body = end.message.clone().unwrap_or_default();
            }
            _ => {
                notice.title = format!("{agent}: turn finished");
                notice.body = end.message.clone().unwrap_or_default();
            }
        },
        BlockKind::PermissionRequest(p) => {
            let question = is_question(p);
            notice.kind = if question { PushKind::Question } else { PushKind::PermissionNeeded };
            notice.title = if question {
                format!("{agent} asks you a question")
            } else {
                format!("{agent} asks to use {}", p.tool)
            };
            notice.body = detail_of(&p.input);
            notice.tool = Some(p.tool.clone());
            notice.request_id = Some(p.request_id.to_string());
            let first = |kinds: &[PermissionOptionKind]| {
                kinds.iter().find_map(|k| p.options.iter().find(|o| o.kind == *k).map(|o| o.id.clone()))
            };
            if !question {
                notice.allow_option = first(&[PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways]);
                notice.deny_option = first(&[PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways]);
            }
        }
        BlockKind::Error(e) => {
            notice.kind = PushKind::Error;
            notice.title = format!("{agent}: error");
            notice.body = e.message.clone();
        }
        _ => return None,
    }
    Some(notice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::blocks::PermissionOption;

    fn request(tool: &str, input: Value) -> BlockKind {
        let option = |id: &str, kind| PermissionOption { id: id.into(), label: id.into(), kind };
        BlockKind::PermissionRequest(PermissionRequest {
            request_id: "perm_1".into(),
            tool: tool.into(),
            input,
            options: vec![
                option("yes", PermissionOptionKind::AllowOnce),
                option("no", PermissionOptionKind::RejectOnce),
            ],
            tool_call_id: None,
        })
    }

    #[test]
    fn a_permission_notice_names_the_agent_the_tool_the_command_and_the_answers() {
        let n = notice_for(
            &SessionId("s-1".into()),
            &AgentId("claude".into()),
            Some(7),
            &request("Bash", serde_json::json!({"command": "rm -rf build"})),
        )
        .unwrap();
        assert_eq!(n.kind, PushKind::PermissionNeeded);
        assert_eq!(n.title, "claude asks to use Bash");
        assert_eq!(n.body, "rm -rf build");
        assert_eq!((n.allow_option.as_deref(), n.deny_option.as_deref()), (Some("yes"), Some("no")));
        assert_eq!((n.seq, n.request_id.as_deref()), (Some(7), Some("perm_1")));
    }

    #[test]
    fn a_question_tool_is_a_question_and_a_long_input_is_cut() {
        let long = "x".repeat(5000);
        let n = notice_for(
            &SessionId("s-1".into()),
            &AgentId("claude".into()),
            None,
            &request("AskUserQuestion", serde_json::json!({ "question": long })),
        )
        .unwrap();
        assert_eq!(n.kind, PushKind::Question);
        assert_eq!(n.body.chars().count(), DETAIL_CHARS + 1);
        assert!(n.allow_option.is_none());
    }
}
