//! The events `droid exec -o stream-json` prints on stdout, one JSON object per line
//! (droid 0.225.2).
//!
//! ```text
//! {"type":"system","subtype":"init","cwd":…,"session_id":…,"tools":[…],"model":…,"reasoning_effort":…}
//! {"type":"message","role":"user","id":…,"text":…}                  (the prompt, echoed)
//! {"type":"reasoning","id":…,"text":…}
//! {"type":"message","role":"assistant","id":…,"text":…}
//! {"type":"tool_call","id":"toolu_…","messageId":…,"toolId":"Execute","toolName":"Execute","parameters":{…}}
//! {"type":"tool_result","id":"toolu_…","toolId":"Execute","isError":false,"value":"hello\n…"}
//! {"type":"completion","finalText":…,"numTurns":2,"durationMs":…,"session_id":…,"usage":{…}}
//! {"type":"error","source":"agent_loop"|"cli",…,"message":…}
//! ```
//!
//! droid prints whole items, not token deltas. Parsing is tolerant: an unknown `type`
//! parses to [`Event::Unknown`], unknown fields are ignored and missing ones take
//! defaults. Only a line without a string `type`, or a known field of the wrong JSON
//! type, is an [`EventError`].

use serde::Deserialize;
use serde_json::Value;
/// The `usage` object, as Anthropic's API reports it.
pub use terminull_adapter_sdk::usage::AnthropicUsage;

/// A line that could not be read as a droid event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a droid event: {0}")]
pub struct EventError(pub String);

/// One parsed line of `droid exec -o stream-json`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `system` / `init`: the session this run writes to.
    Init {
        /// The session id (what `-s` / `--fork` take).
        session_id: String,
        /// The model as droid names it (`custom:Mock-Claude-0`).
        model: Option<String>,
    },
    /// `message` with `role: user`: the prompt, echoed.
    UserMessage,
    /// `message` with `role: assistant`: a whole assistant text.
    AssistantMessage {
        /// droid's message id (shared with the `reasoning` of the same model reply).
        id: String,
        /// The text.
        text: String,
    },
    /// `reasoning`: the model's reasoning for one reply.
    Reasoning {
        /// droid's message id.
        id: String,
        /// The reasoning text.
        text: String,
    },
    /// `tool_call`: droid runs a tool.
    ToolCall {
        /// The call's id (the provider's `toolu_…`).
        id: String,
        /// The tool (`Execute`, `Read`, `Create`, …).
        name: String,
        /// Its parameters.
        parameters: Value,
    },
    /// `tool_result`.
    ToolResult {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The output as text.
        output: String,
        /// True when the tool failed or was refused.
        is_error: bool,
    },
    /// `completion`: the run finished.
    Completion {
        /// The final answer.
        final_text: String,
        /// The usage of the run.
        usage: Option<AnthropicUsage>,
        /// The session id, again.
        session_id: Option<String>,
    },
    /// `error`.
    Error {
        /// Where it comes from (`agent_loop`: the model; `cli`: the exec command).
        source: String,
        /// What went wrong.
        message: String,
    },
    /// A `system` event of another subtype, or a `message` of another role.
    Ignored {
        /// Its `type` (and subtype or role).
        what: String,
    },
    /// An event type this adapter does not know.
    Unknown {
        /// Its `type`.
        event_type: String,
    },
}

#[derive(Deserialize)]
struct Wire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, rename = "toolId")]
    tool_id: Option<String>,
    #[serde(default, rename = "toolName")]
    tool_name: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    #[serde(default)]
    value: Option<Value>,
    #[serde(default, rename = "finalText")]
    final_text: Option<String>,
    #[serde(default)]
    usage: Option<AnthropicUsage>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    message: Option<Value>,
}

/// Reads one stdout line (already decoded as JSON) of `droid exec -o stream-json`.
pub fn parse_event(value: Value) -> Result<Event, EventError> {
    let wire: Wire = serde_json::from_value(value).map_err(|e| EventError(e.to_string()))?;
    let event = match wire.kind.as_str() {
        "system" if wire.subtype.as_deref() == Some("init") => {
            Event::Init { session_id: wire.session_id.unwrap_or_default(), model: wire.model }
        }
        "system" => Event::Ignored { what: format!("system/{}", wire.subtype.unwrap_or_default()) },
        "message" => match wire.role.as_deref() {
            Some("assistant") => {
                Event::AssistantMessage { id: wire.id.unwrap_or_default(), text: wire.text.unwrap_or_default() }
            }
            Some("user") => Event::UserMessage,
            other => Event::Ignored { what: format!("message/{}", other.unwrap_or_default()) },
        },
        "reasoning" => Event::Reasoning { id: wire.id.unwrap_or_default(), text: wire.text.unwrap_or_default() },
        "tool_call" => Event::ToolCall {
            id: wire.id.unwrap_or_default(),
            name: wire.tool_name.or(wire.tool_id).unwrap_or_default(),
            parameters: wire.parameters.unwrap_or(Value::Null),
        },
        "tool_result" => Event::ToolResult {
            id: wire.id.unwrap_or_default(),
            name: wire.tool_name.or(wire.tool_id).unwrap_or_default(),
            output: text_of(wire.value),
            is_error: wire.is_error.unwrap_or(false),
        },
        "completion" => Event::Completion {
            final_text: wire.final_text.unwrap_or_default(),
            usage: wire.usage,
            session_id: wire.session_id,
        },
        "error" => Event::Error {
            source: wire.source.unwrap_or_default(),
            message: text_of(wire.message.or(wire.text.map(Value::String))),
        },
        other => Event::Unknown { event_type: other.to_owned() },
    };
    Ok(event)
}

/// A value as text: a string as it is, `null` as nothing, anything else as JSON.
fn text_of(value: Option<Value>) -> String {
    match value {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_parse_to_events() {
        let cases = vec![
            (
                json!({"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","tools":["Read"],"model":"custom:Mock-Claude-0","reasoning_effort":"none"}),
                Event::Init { session_id: "s-1".into(), model: Some("custom:Mock-Claude-0".into()) },
            ),
            (json!({"type":"system","subtype":"status"}), Event::Ignored { what: "system/status".into() }),
            (json!({"type":"message","role":"user","id":"u","text":"hi","session_id":"s-1"}), Event::UserMessage),
            (
                json!({"type":"message","role":"assistant","id":"m1","text":"I'll run the command.","timestamp":1}),
                Event::AssistantMessage { id: "m1".into(), text: "I'll run the command.".into() },
            ),
            (json!({"type":"message","role":"system","text":"x"}), Event::Ignored { what: "message/system".into() }),
            (
                json!({"type":"reasoning","id":"m1","text":"Thinking."}),
                Event::Reasoning { id: "m1".into(), text: "Thinking.".into() },
            ),
            (
                json!({"type":"tool_call","id":"toolu_1","messageId":"m1","toolId":"Execute","toolName":"Execute","parameters":{"command":"echo hello","riskLevel":"low"}}),
                Event::ToolCall {
                    id: "toolu_1".into(),
                    name: "Execute".into(),
                    parameters: json!({"command":"echo hello","riskLevel":"low"}),
                },
            ),
            (
                json!({"type":"tool_result","id":"toolu_1","toolId":"Execute","isError":false,"value":"hello\n\n\n[Process exited with code 0]"}),
                Event::ToolResult {
                    id: "toolu_1".into(),
                    name: "Execute".into(),
                    output: "hello\n\n\n[Process exited with code 0]".into(),
                    is_error: false,
                },
            ),
            (
                json!({"type":"tool_result","id":"t2","toolId":"Create","isError":true,"value":{"success":false}}),
                Event::ToolResult {
                    id: "t2".into(),
                    name: "Create".into(),
                    output: "{\"success\":false}".into(),
                    is_error: true,
                },
            ),
            (
                json!({"type":"completion","finalText":"Done.","numTurns":2,"durationMs":5,"session_id":"s-1","usage":{"input_tokens":10,"output_tokens":2,"cache_read_input_tokens":1,"cache_creation_input_tokens":0,"factory_credits":0}}),
                Event::Completion {
                    final_text: "Done.".into(),
                    usage: Some(AnthropicUsage {
                        input_tokens: Some(10),
                        output_tokens: Some(2),
                        cache_read_input_tokens: Some(1),
                        cache_creation_input_tokens: Some(0),
                    }),
                    session_id: Some("s-1".into()),
                },
            ),
            (
                json!({"type":"error","source":"agent_loop","message":"529 overloaded","session_id":"s-1"}),
                Event::Error { source: "agent_loop".into(), message: "529 overloaded".into() },
            ),
            (json!({"type":"error","source":"cli"}), Event::Error { source: "cli".into(), message: String::new() }),
            (json!({"type":"todo_update","items":[]}), Event::Unknown { event_type: "todo_update".into() }),
        ];
        for (line, want) in cases {
            assert_eq!(parse_event(line.clone()), Ok(want), "{line}");
        }
    }

    #[test]
    fn bad_lines_are_errors() {
        for line in
            [json!("text"), json!({"no_type": 1}), json!({"type": 5}), json!({"type":"tool_call","isError":"no"})]
        {
            assert!(parse_event(line.clone()).is_err(), "{line}");
        }
    }
}
