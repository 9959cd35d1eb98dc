//! The blocks of a turn read back from an agent's transcript (for `mirror`): finished
//! text and thinking, tool calls that are done, their results, the user's message and
//! the turn's end. Every adapter's transcript reader builds these the same way.

use serde_json::Value;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, SessionEnd, StreamedText, ToolCall, ToolResult, ToolStatus, UserMessage};

/// The user's message.
pub fn user(text: impl Into<String>) -> BlockKind {
    BlockKind::UserMessage(UserMessage { text: text.into(), attachments: vec![] })
}

/// A finished text block.
pub fn text(id: impl Into<String>, text: impl Into<String>) -> BlockKind {
    BlockKind::Text(StreamedText { id: id.into().into(), text: text.into(), done: true })
}

/// A finished thinking block.
pub fn thinking(id: impl Into<String>, text: impl Into<String>) -> BlockKind {
    BlockKind::Thinking(StreamedText { id: id.into().into(), text: text.into(), done: true })
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

/// The end of a turn the terminal ran (no usage: the transcript's is not the bridge's).
pub fn turn_end(reason: EndReason, message: impl Into<String>) -> BlockKind {
    BlockKind::SessionEnd(SessionEnd { reason, usage: None, message: Some(message.into()) })
}
