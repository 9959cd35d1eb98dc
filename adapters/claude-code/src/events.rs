//! What `claude -p --output-format stream-json --verbose --include-partial-messages`
//! writes on stdout, one JSON object per line, as serde types.
//!
//! Why a tolerant parser: the CLI's stream format is not a published, versioned
//! schema. New event types and fields appear between releases (2.1.x added
//! `system/thinking_tokens` and `system/status`), so every type here ignores unknown
//! fields, unknown `type`s become [`Event::Unknown`], and a line whose known `type`
//! does not have the expected shape becomes [`Event::Malformed`]. Both are logged at
//! debug and skipped by the mapping: the stream goes on.
//!
//! Only the fields the adapter uses are modelled. Shapes observed with 2.1.197 (raw
//! captures under `tests/fixtures/`):
//!
//! | `type` | carries |
//! |---|---|
//! | `system` | `subtype`: `init` (session id, model), `api_retry`, `status`, `thinking_tokens`, … |
//! | `stream_event` | `event`: one raw Anthropic SSE event; `parent_tool_use_id` |
//! | `assistant` | `message` with ONE content block, `parent_tool_use_id`, `error` on synthetic error messages |
//! | `user` | `message.content`: `tool_result` blocks (or text such as `[Request interrupted by user]`) |
//! | `result` | the turn's end: `subtype`, `is_error`, `result`, `usage`, `total_cost_usd` (cumulative per process) |
//! | `control_request` | a request from the CLI (`can_use_tool`, …) that must be answered |
//! | `control_response` | the CLI's answer to a request the adapter sent (`initialize`, `interrupt`) |
//! | `control_cancel_request` | the CLI withdrew one of its own requests |

use serde::Deserialize;
use serde_json::Value;
/// The `usage` object, as Anthropic's API reports it.
pub use terminull_adapter_sdk::usage::AnthropicUsage;

/// One stdout line of the CLI, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `type: system`.
    System(SystemEvent),
    /// `type: stream_event`: a raw Anthropic SSE event (with `--include-partial-messages`).
    Stream(StreamEvent),
    /// `type: assistant`: one complete content block of an assistant message.
    Assistant(AssistantEvent),
    /// `type: user`: tool results (and interruption markers) fed back to the model.
    User(UserEvent),
    /// `type: result`: the end of a turn.
    Result(ResultEvent),
    /// `type: control_request`: the CLI asks the adapter something.
    ControlRequest(ControlRequest),
    /// `type: control_response`: the CLI answers a request of the adapter.
    ControlResponse(ControlResponse),
    /// `type: control_cancel_request`: the CLI withdrew its request `request_id`.
    ControlCancel {
        /// The withdrawn request.
        request_id: String,
    },
    /// A `type` this adapter does not know (skipped).
    Unknown {
        /// The `type` value, or `?` when absent or not a string.
        kind: String,
    },
    /// A known `type` whose body did not have the expected shape (skipped).
    Malformed {
        /// The `type` value.
        kind: String,
        /// What serde said.
        error: String,
    },
}

impl Event {
    /// Parses one stdout line that was already decoded as JSON. Never fails: see the
    /// [module documentation](self).
    pub fn parse(value: Value) -> Event {
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("?").to_owned();
        let parsed = match kind.as_str() {
            "system" => SystemEvent::parse(value).map(Event::System),
            "stream_event" => serde_json::from_value(value).map(Event::Stream),
            "assistant" => serde_json::from_value(value).map(Event::Assistant),
            "user" => serde_json::from_value(value).map(Event::User),
            "result" => serde_json::from_value(value).map(Event::Result),
            "control_request" => serde_json::from_value(value).map(Event::ControlRequest),
            "control_response" => serde_json::from_value(value).map(Event::ControlResponse),
            "control_cancel_request" => {
                serde_json::from_value::<CancelBody>(value).map(|c| Event::ControlCancel { request_id: c.request_id })
            }
            _ => return Event::Unknown { kind },
        };
        parsed.unwrap_or_else(|e| Event::Malformed { kind, error: e.to_string() })
    }
}

#[derive(Deserialize)]
struct CancelBody {
    request_id: String,
}

/// A `system` event, by `subtype`.
#[derive(Debug, Clone, PartialEq)]
pub enum SystemEvent {
    /// `init`: sent at the start of every turn.
    Init {
        /// The conversation's id.
        session_id: Option<String>,
        /// The model the CLI resolved (`claude-opus-4-8[1m]`).
        model: Option<String>,
    },
    /// `api_retry`: a model API call failed and will be retried.
    ApiRetry(ApiRetry),
    /// Any other subtype (`status`, `thinking_tokens`, `compact_boundary`, hooks, …).
    Other {
        /// The subtype, `?` when absent.
        subtype: String,
    },
}

/// Body of `system/api_retry`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ApiRetry {
    /// This attempt's number, from 1.
    #[serde(default)]
    pub attempt: Option<u64>,
    /// How many retries the CLI makes at most.
    #[serde(default)]
    pub max_retries: Option<u64>,
    /// How long it waits before this attempt.
    #[serde(default)]
    pub retry_delay_ms: Option<f64>,
    /// The HTTP status of the failure (529, 500, …).
    #[serde(default)]
    pub error_status: Option<u64>,
    /// A short name of the failure (`overloaded`).
    #[serde(default)]
    pub error: Option<String>,
    /// The event's own id.
    #[serde(default)]
    pub uuid: Option<String>,
}

impl SystemEvent {
    fn parse(value: Value) -> Result<SystemEvent, serde_json::Error> {
        #[derive(Deserialize)]
        struct Init {
            #[serde(default)]
            session_id: Option<String>,
            #[serde(default)]
            model: Option<String>,
        }
        let subtype = value.get("subtype").and_then(Value::as_str).unwrap_or("?").to_owned();
        Ok(match subtype.as_str() {
            "init" => {
                let Init { session_id, model } = serde_json::from_value(value)?;
                SystemEvent::Init { session_id, model }
            }
            "api_retry" => SystemEvent::ApiRetry(serde_json::from_value(value)?),
            _ => SystemEvent::Other { subtype },
        })
    }
}

/// `stream_event`: one raw SSE event of the model API.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StreamEvent {
    /// The SSE event.
    pub event: SseEvent,
    /// Set when the event belongs to a sub-agent (the id of its `Task` tool call).
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
}

/// An Anthropic Messages SSE event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SseEvent {
    /// A new assistant message.
    MessageStart {
        /// The message, as far as known.
        message: StreamMessage,
    },
    /// A content block opens at `index`.
    ContentBlockStart {
        /// Position in the message.
        index: u64,
        /// The block's type and (empty) initial content.
        content_block: ContentBlock,
    },
    /// More content for the block at `index`.
    ContentBlockDelta {
        /// Position in the message.
        index: u64,
        /// The increment.
        delta: Delta,
    },
    /// The block at `index` is complete.
    ContentBlockStop {
        /// Position in the message.
        index: u64,
    },
    /// Stop reason and usage of the message.
    MessageDelta,
    /// The message is complete.
    MessageStop,
    /// `ping`, `error` and anything newer.
    #[serde(other)]
    Other,
}

/// The `message` of `message_start`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StreamMessage {
    /// The message id (`msg_…`).
    #[serde(default)]
    pub id: String,
}

/// A `content_block_delta` increment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// Assistant prose.
    TextDelta {
        /// The new text.
        #[serde(default)]
        text: String,
    },
    /// Reasoning.
    ThinkingDelta {
        /// The new reasoning text.
        #[serde(default)]
        thinking: String,
    },
    /// A piece of a tool call's JSON input (the adapter uses the complete input of the
    /// `assistant` event instead).
    InputJsonDelta,
    /// The thinking block's signature.
    SignatureDelta,
    /// Anything newer (`citations_delta`, …).
    #[serde(other)]
    Other,
}

/// A content block of an assistant or user message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Prose.
    Text {
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// Reasoning.
    Thinking {
        /// The reasoning text.
        #[serde(default)]
        thinking: String,
    },
    /// A tool call.
    ToolUse {
        /// The call's id (`toolu_…`).
        id: String,
        /// The tool (`Bash`, `Write`, `Task`, …).
        name: String,
        /// Its input.
        #[serde(default)]
        input: Value,
    },
    /// The result of a tool call (in `user` messages).
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// A string, or an array of content parts.
        #[serde(default)]
        content: Value,
        /// True when the tool failed or was refused.
        #[serde(default)]
        is_error: Option<bool>,
    },
    /// `redacted_thinking`, `image`, `server_tool_use` and anything newer.
    #[serde(other)]
    Other,
}

/// `assistant`: one content block of an assistant message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AssistantEvent {
    /// The message (its `content` holds the one block).
    pub message: AssistantMessage,
    /// Set for a sub-agent's messages: the id of its `Task` tool call.
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
    /// Set on the synthetic message the CLI makes of an API error
    /// (`"error": "server_error"`); the `result` that follows reports the error.
    #[serde(default)]
    pub error: Option<Value>,
}

/// The `message` of an `assistant` event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AssistantMessage {
    /// The message id (`msg_…`), shared by the events of one message.
    #[serde(default)]
    pub id: String,
    /// The model, `<synthetic>` for messages the CLI made itself.
    #[serde(default)]
    pub model: Option<String>,
    /// Its content blocks (one per event in practice).
    #[serde(default)]
    pub content: Vec<ContentBlock>,
}

/// `user`: a message fed back to the model.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UserEvent {
    /// The message.
    pub message: UserEventMessage,
    /// Set for a sub-agent's messages.
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
}

/// The `message` of a `user` event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UserEventMessage {
    /// A plain string or content blocks.
    #[serde(default)]
    pub content: UserContent,
}

/// `content` of a user message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// Plain text.
    Text(String),
    /// Content blocks.
    Blocks(Vec<ContentBlock>),
}

impl Default for UserContent {
    fn default() -> Self {
        UserContent::Blocks(Vec::new())
    }
}

/// `result`: how the turn ended.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ResultEvent {
    /// `success`, `error_during_execution`, `error_max_turns`, …
    #[serde(default)]
    pub subtype: String,
    /// True when the turn failed (an API error, an interruption, …).
    #[serde(default)]
    pub is_error: bool,
    /// The final text, or the error text (`API Error: 529 …`).
    #[serde(default)]
    pub result: Option<String>,
    /// The failing HTTP status of an API error.
    #[serde(default)]
    pub api_error_status: Option<u64>,
    /// The model's stop reason (`end_turn`, `max_tokens`, `refusal`, …).
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// Cost so far of this CLI process (cumulative across its turns).
    #[serde(default)]
    pub total_cost_usd: Option<f64>,
    /// Tokens of this turn.
    #[serde(default)]
    pub usage: Option<AnthropicUsage>,
    /// Error messages of `error_*` subtypes.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// `control_request` from the CLI.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ControlRequest {
    /// Echoed by the answer.
    pub request_id: String,
    /// What is asked.
    pub request: ControlRequestBody,
}

/// The `request` of a `control_request`. Only `can_use_tool` is answered with
/// something other than an error; its fields are modelled.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ControlRequestBody {
    /// `can_use_tool`, `hook_callback`, `mcp_message`, …
    #[serde(default)]
    pub subtype: String,
    /// The tool that wants to run.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// Its input.
    #[serde(default)]
    pub input: Option<Value>,
    /// Rules the CLI suggests to make an "always allow" stick (passed back as
    /// `updatedPermissions`).
    #[serde(default)]
    pub permission_suggestions: Option<Value>,
    /// The tool call this request gates.
    #[serde(default)]
    pub tool_use_id: Option<String>,
}

/// `control_response` from the CLI.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ControlResponse {
    /// The answer.
    pub response: ControlResponseBody,
}

/// The `response` of a `control_response`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ControlResponseBody {
    /// `success` or `error`.
    #[serde(default)]
    pub subtype: String,
    /// The adapter's request id.
    #[serde(default)]
    pub request_id: String,
    /// The answer's payload on success.
    #[serde(default)]
    pub response: Option<Value>,
    /// The error message on failure.
    #[serde(default)]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_types_and_fields_are_tolerated() {
        assert_eq!(Event::parse(json!({"type": "keep_alive"})), Event::Unknown { kind: "keep_alive".into() });
        assert_eq!(Event::parse(json!({"no_type": 1})), Event::Unknown { kind: "?".into() });
        assert_eq!(
            Event::parse(json!({"type": "system", "subtype": "brand_new", "x": 1})),
            Event::System(SystemEvent::Other { subtype: "brand_new".into() })
        );
        let Event::Stream(s) = Event::parse(json!({
            "type": "stream_event", "event": {"type": "content_block_delta", "index": 0,
            "delta": {"type": "citations_delta", "citation": {}}}, "new_field": true
        })) else {
            panic!()
        };
        assert_eq!(s.event, SseEvent::ContentBlockDelta { index: 0, delta: Delta::Other });
        let Event::Assistant(a) = Event::parse(json!({
            "type": "assistant", "message": {"id": "m", "content": [{"type": "server_tool_use", "id": "x"}]}
        })) else {
            panic!()
        };
        assert_eq!(a.message.content, vec![ContentBlock::Other]);
    }

    #[test]
    fn a_known_type_with_a_bad_body_is_malformed_not_fatal() {
        let e = Event::parse(json!({"type": "control_request", "request": {}}));
        assert!(matches!(e, Event::Malformed { ref kind, .. } if kind == "control_request"), "{e:?}");
    }

    #[test]
    fn user_content_may_be_a_string() {
        let Event::User(u) = Event::parse(json!({"type": "user", "message": {"role": "user", "content": "hi"}})) else {
            panic!()
        };
        assert_eq!(u.message.content, UserContent::Text("hi".into()));
    }
}
