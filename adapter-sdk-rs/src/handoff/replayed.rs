//! The blocks of a turn read back from an agent's transcript (for `mirror`): finished
//! text and thinking, tool calls that are done, their results, the user's message and
//! the turn's end. Every adapter's transcript reader builds these the same way.

use serde_json::{Value, json};
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, SessionEnd, StreamedText, ToolCall, ToolResult, ToolStatus, UserMessage};

/// The user's message.
pub fn user(text: impl Into<String>) -> BlockKind {
    BlockKind::UserMessage(UserMessage { text: text.into(), attachments: vec![] })
}

/// A finished text block.
pub fn text(id: impl Into<String>, text: impl Into<String>) -> BlockKind {
    BlockKind::Text(StreamedText::snapshot(id.into(), text, true))
}

/// A finished thinking block.
pub fn thinking(id: impl Into<String>, text: impl Into<String>) -> BlockKind {
    BlockKind::Thinking(StreamedText::snapshot(id.into(), text, true))
}

/// A tool call that is done (its result follows when recorded).
pub fn tool_call(id: impl Into<String>, name: impl Into<String>, input: Value) -> BlockKind {
    BlockKind::ToolCall(ToolCall {
        id: id.into().into(),
        name: name.into(),
        input,
        status: ToolStatus::Done,
        parent_id: None,
        title: None,
    })
}

/// A tool call's result.
pub fn tool_result(call_id: impl Into<String>, output: impl Into<String>, is_error: bool) -> BlockKind {
    BlockKind::ToolResult(ToolResult { tool_call_id: call_id.into().into(), output: output.into(), is_error })
}

/// What a [`turn_end`] says when the terminal's turn finished.
pub const FINISHED_IN_TERMINAL: &str = "turn finished in the terminal";

/// The end of a turn the terminal ran (no usage: the transcript's is not the bridge's).
pub fn turn_end(reason: EndReason, message: impl Into<String>) -> BlockKind {
    BlockKind::SessionEnd(SessionEnd { reason, usage: None, message: Some(message.into()) })
}

/// How an agent's transcript names a tool call among an assistant message's content
/// items (the others are `text` and `thinking`, with `text` / `thinking` fields).
#[derive(Debug, Clone, Copy)]
pub struct ToolCallItem {
    /// The item's `type`.
    pub kind: &'static str,
    /// The field holding the call's input.
    pub input: &'static str,
}

impl ToolCallItem {
    /// The Anthropic Messages shape (Claude Code, Droid): `tool_use` with `input`.
    pub const ANTHROPIC: Self = Self { kind: "tool_use", input: "input" };
}

/// The blocks of an assistant message's `content` items: finished text and thinking
/// (item `i` is `<message_id>-<i>`, a stable id across reads) and tool calls (their
/// own `id`; one without is skipped).
pub fn assistant_items(message_id: &str, content: Option<&Value>, tool: ToolCallItem) -> Vec<BlockKind> {
    let items = content.and_then(Value::as_array).into_iter().flatten().enumerate();
    items
        .filter_map(|(i, item)| {
            let field = |key: &str| item.get(key).and_then(Value::as_str);
            match field("type")? {
                "text" => Some(text(format!("{message_id}-{i}"), field("text").unwrap_or_default())),
                "thinking" => Some(thinking(format!("{message_id}-{i}"), field("thinking").unwrap_or_default())),
                kind if kind == tool.kind => Some(tool_call(
                    field("id")?,
                    field("name").unwrap_or("tool"),
                    item.get(tool.input).cloned().unwrap_or(json!({})),
                )),
                _ => None,
            }
        })
        .collect()
}

/// The tool results among a user message's Anthropic-shaped `content` items
/// (`tool_result` with `tool_use_id`, `content` and `is_error`).
pub fn tool_results(content: Option<&Value>) -> Vec<BlockKind> {
    let items = content.and_then(Value::as_array).into_iter().flatten();
    items
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("tool_result"))
        .filter_map(|item| {
            let id = item.get("tool_use_id").and_then(Value::as_str)?;
            let is_error = item.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            Some(tool_result(id, result_text(item.get("content")), is_error))
        })
        .collect()
}

/// The text of a tool result's `content`: a string, the `text` of each item of a list,
/// or else its JSON.
pub fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(list @ Value::Array(_)) => super::strings_at(Some(list), "text").join("\n"),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}
