//! What a `session/request_permission` asks the user, and the answer sent back.

use serde_json::{Value, json};
use terminull_adapter_sdk::bounds;
use terminull_protocol::blocks::{PermissionOption, PermissionOptionKind};
use terminull_protocol::ids::ToolCallId;

use super::{bounded_input, cut, limits};
use crate::schema::{PermissionOptionWire, ToolCallFields, content_text};

/// What the user is asked, and how to answer the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    /// The tool, as named in the `permission_request`.
    pub tool: String,
    /// What the user sees of the call.
    pub input: Value,
    /// The choices, with the agent's own option ids.
    pub options: Vec<PermissionOption>,
    /// The `tool_call` block this gates, when the call is already shown.
    pub tool_call_id: Option<ToolCallId>,
    /// The agent's id of the call.
    pub(super) acp_call_id: String,
}

impl PermissionAsk {
    /// The result to send the agent: the chosen option, or `cancelled` when there is no
    /// answer (interrupted, withdrawn) or the answer names no option of this request.
    pub fn reply(&self, answer: Option<&str>) -> Value {
        match answer.filter(|id| self.options.iter().any(|o| o.id == *id)) {
            Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
            None => json!({"outcome": {"outcome": "cancelled"}}),
        }
    }

    /// True when `answer` refuses the call.
    pub fn refuses(&self, answer: Option<&str>) -> bool {
        match answer.and_then(|id| self.options.iter().find(|o| o.id == id)) {
            Some(o) => matches!(o.kind, PermissionOptionKind::RejectOnce | PermissionOptionKind::RejectAlways),
            None => true,
        }
    }
}

/// What the user sees of a call the agent gave no raw input for.
pub(super) fn permission_input(f: &ToolCallFields) -> Value {
    let mut input = serde_json::Map::new();
    if let Some(title) = &f.title {
        input.insert("title".into(), json!(bounds::bounded_chars(title, limits::TITLE_CHARS)));
    }
    if let Some(kind) = &f.kind {
        input.insert("kind".into(), json!(kind));
    }
    let locations = f.locations.as_deref().map(location_paths).unwrap_or_default();
    if !locations.is_empty() {
        input.insert("locations".into(), json!(locations));
    }
    let mut diffs = Vec::new();
    let mut text = Vec::new();
    for item in f.content.as_deref().unwrap_or_default() {
        match item.get("type").and_then(Value::as_str) {
            Some("diff") => diffs.push(json!({
                "path": item.get("path"),
                "old_text": item.get("oldText").and_then(Value::as_str).map(|t| cut(t, limits::INPUT_BYTES / 4)),
                "new_text": item.get("newText").and_then(Value::as_str).map(|t| cut(t, limits::INPUT_BYTES / 4)),
            })),
            Some("content") => text.extend(item.get("content").and_then(content_text)),
            _ => {}
        }
    }
    if !diffs.is_empty() {
        input.insert("diff".into(), json!(diffs));
    }
    if !text.is_empty() {
        input.insert("description".into(), json!(cut(&text.join("\n"), limits::INPUT_BYTES / 4)));
    }
    bounded_input(Value::Object(input))
}

pub(super) fn location_paths(locations: &[Value]) -> Vec<String> {
    locations.iter().filter_map(|l| l.get("path").and_then(Value::as_str)).map(str::to_owned).collect()
}

pub(super) fn option_kind(o: &PermissionOptionWire) -> Option<PermissionOptionKind> {
    Some(match o.kind.as_str() {
        "allow_once" => PermissionOptionKind::AllowOnce,
        "allow_always" => PermissionOptionKind::AllowAlways,
        "reject_once" => PermissionOptionKind::RejectOnce,
        "reject_always" => PermissionOptionKind::RejectAlways,
        other => {
            tracing::warn!(kind = other, option = %o.option_id, "a permission option of unknown kind; not offered");
            return None;
        }
    })
}
