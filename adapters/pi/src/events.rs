//! The lines `pi --mode rpc` prints on stdout: responses to the adapter's commands and
//! the agent's events, one JSON object per line (pi 0.73.1, `docs/rpc.md` and
//! `docs/json.md` in the package).
//!
//! **Bounded parsing.** Every `message_update` line repeats the whole partial assistant
//! message twice (`message` and `assistantMessageEvent.partial`), so a long answer makes
//! the output grow quadratically. [`parse_line`] therefore reads each line with a flat,
//! borrowing serde struct: the partial message is skipped without being built (serde's
//! `IgnoredAny`), and the `message` of other events is kept as raw JSON text and only
//! decoded for the events that need it (`message_start` / `message_end`). Nothing on a
//! `message_update` line but the delta itself is ever allocated.
//!
//! Parsing is tolerant: an unknown event type parses to [`Event::Unknown`], unknown
//! fields are ignored and missing ones take defaults. Only a line that is not a JSON
//! object with a string `type`, or a known field of the wrong JSON type, is an
//! [`EventError`].

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// A line that could not be read as a pi event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a pi event: {0}")]
pub struct EventError(pub String);

/// One parsed line of `pi --mode rpc`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `response`: the answer to a command the adapter wrote.
    Response(Response),
    /// `agent_start`: a run (prompt or automatic retry) begins.
    AgentStart,
    /// `agent_end`: the run is over (pi may still retry it: `auto_retry_start`).
    AgentEnd,
    /// `message_start`: a message begins (`role` only is kept, plus the whole message
    /// for an assistant one).
    MessageStart(Message),
    /// `message_update`: a streaming delta of the assistant message.
    MessageUpdate(Delta),
    /// `message_end`: a message is complete.
    MessageEnd(Message),
    /// `tool_execution_start`.
    ToolStart {
        /// pi's tool call id (the provider's, e.g. `toolu_…`).
        id: String,
        /// The tool (`bash`, `read`, `edit`, `write`, …).
        name: String,
        /// Its arguments.
        args: Value,
    },
    /// `tool_execution_end`.
    ToolEnd {
        /// pi's tool call id.
        id: String,
        /// The tool.
        name: String,
        /// The result's text.
        output: String,
        /// True when the tool failed (or was aborted).
        is_error: bool,
    },
    /// `auto_retry_start`: a transient model error; pi retries after a delay.
    RetryStart {
        /// Which attempt this is, from 1.
        attempt: u64,
        /// How many attempts pi makes at most.
        max_attempts: u64,
        /// The delay before the attempt.
        delay_ms: u64,
        /// The error being retried.
        error_message: String,
    },
    /// `auto_retry_end`: the retries are over.
    RetryEnd {
        /// True when a retry succeeded.
        success: bool,
        /// The attempts made.
        attempt: u64,
        /// Why it gave up, when it did.
        final_error: Option<String>,
    },
    /// `compaction_start`: pi summarises the conversation to free context.
    CompactionStart {
        /// `manual`, `threshold` or `overflow`.
        reason: String,
    },
    /// `compaction_end`.
    CompactionEnd {
        /// True when the compaction was aborted.
        aborted: bool,
        /// True when pi re-runs the prompt after it (overflow recovery).
        will_retry: bool,
        /// Why it failed, when it did.
        error_message: Option<String>,
    },
    /// `extension_error`: an extension threw.
    ExtensionError {
        /// The extension's file.
        extension_path: String,
        /// The error.
        error: String,
    },
    /// `extension_ui_request`: an extension wants the user (dialogs wait for an
    /// answer; the others are fire-and-forget).
    ExtensionUi {
        /// The request id, echoed by the answer.
        id: String,
        /// `select`, `confirm`, `input`, `editor`, `notify`, `setStatus`, …
        method: String,
        /// The dialog's title or the notification's text.
        text: String,
    },
    /// `turn_start`, `turn_end`, `queue_update`, …: nothing to show.
    Ignored {
        /// Its `type`.
        event_type: String,
    },
    /// An event type this adapter does not know.
    Unknown {
        /// Its `type`.
        event_type: String,
    },
}

impl Event {
    /// True for the extension UI methods that block until they are answered.
    pub fn is_dialog(method: &str) -> bool {
        matches!(method, "select" | "confirm" | "input" | "editor")
    }
}

/// A `response` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The command's id as the adapter sent it.
    pub id: Option<String>,
    /// The command (`prompt`, `get_state`, `abort`, `parse`, …).
    pub command: String,
    /// Whether it succeeded.
    pub success: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// Its data (`get_state`'s state, `get_commands`' list, …).
    pub data: Option<Value>,
}

/// A message of `message_start` / `message_end`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    /// `user`, `assistant`, `toolResult`, `custom`, …
    pub role: String,
    /// The content of an assistant message (empty for the other roles).
    pub content: Vec<Content>,
    /// The assistant message's usage.
    pub usage: Option<PiUsage>,
    /// `stop`, `length`, `toolUse`, `error` or `aborted`.
    pub stop_reason: Option<String>,
    /// The error of a failed assistant message.
    pub error_message: Option<String>,
}

/// One content block of an assistant message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub enum Content {
    /// Prose.
    #[serde(rename = "text")]
    Text {
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// Reasoning.
    #[serde(rename = "thinking")]
    Thinking {
        /// The reasoning text.
        #[serde(default)]
        thinking: String,
    },
    /// A tool call (shown once it executes: `tool_execution_start`).
    #[serde(rename = "toolCall")]
    ToolCall {
        /// Its id.
        #[serde(default)]
        id: String,
    },
    /// Anything else (images, …).
    #[serde(other)]
    Other,
}

/// pi's usage of one assistant message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PiUsage {
    /// Input tokens (not served from the cache).
    #[serde(default)]
    pub input: Option<f64>,
    /// Output tokens.
    #[serde(default)]
    pub output: Option<f64>,
    /// Input tokens read from the cache.
    #[serde(default, rename = "cacheRead")]
    pub cache_read: Option<f64>,
    /// Input tokens written to the cache.
    #[serde(default, rename = "cacheWrite")]
    pub cache_write: Option<f64>,
    /// The cost.
    #[serde(default)]
    pub cost: Option<PiCost>,
}

/// pi's cost of one assistant message, in US dollars.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PiCost {
    /// The total.
    #[serde(default)]
    pub total: Option<f64>,
}

/// The delta of a `message_update` (`assistantMessageEvent`), without its partial
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// `text_start` / `thinking_start`.
    Start {
        /// Text or thinking.
        kind: DeltaKind,
        /// Index of the content block.
        index: usize,
    },
    /// `text_delta` / `thinking_delta`.
    Append {
        /// Text or thinking.
        kind: DeltaKind,
        /// Index of the content block.
        index: usize,
        /// The new text.
        delta: String,
    },
    /// `text_end` / `thinking_end`, with the block's whole text.
    End {
        /// Text or thinking.
        kind: DeltaKind,
        /// Index of the content block.
        index: usize,
        /// The block's whole text.
        content: Option<String>,
    },
    /// `start`, `toolcall_*`, `done`, `error`, or an unknown kind.
    Other {
        /// The `assistantMessageEvent.type`.
        kind: String,
    },
}

/// Which streamed block a [`Delta`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaKind {
    /// `text_*`.
    Text,
    /// `thinking_*`.
    Thinking,
}

/// The state `get_state` reports (the fields the adapter uses).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct State {
    /// True while a run is going on.
    #[serde(default, rename = "isStreaming")]
    pub is_streaming: bool,
    /// True while a compaction is going on.
    #[serde(default, rename = "isCompacting")]
    pub is_compacting: bool,
    /// The session's id (what `--session` takes).
    #[serde(default, rename = "sessionId")]
    pub session_id: Option<String>,
    /// The session's file (written once the session has an assistant message).
    #[serde(default, rename = "sessionFile")]
    pub session_file: Option<String>,
    /// The model.
    #[serde(default)]
    pub model: Option<StateModel>,
}

/// The model in [`State`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StateModel {
    /// The model id.
    #[serde(default)]
    pub id: String,
    /// Its provider.
    #[serde(default)]
    pub provider: String,
}

impl State {
    /// The state in a `get_state` response's data (defaults for what is missing).
    pub fn from_data(data: Option<&Value>) -> State {
        data.and_then(|d| serde_json::from_value(d.clone()).ok()).unwrap_or_default()
    }

    /// `provider/id`, as `--model` takes it.
    pub fn model_name(&self) -> Option<String> {
        self.model
            .as_ref()
            .filter(|m| !m.id.is_empty())
            .map(|m| if m.provider.is_empty() { m.id.clone() } else { format!("{}/{}", m.provider, m.id) })
    }
}

/// Every field any line may carry, borrowed where it can be large.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    #[serde(default, rename = "assistantMessageEvent")]
    delta: Option<WireDelta>,
    #[serde(default, rename = "toolCallId")]
    tool_call_id: Option<String>,
    #[serde(default, rename = "toolName")]
    tool_name: Option<String>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    success: Option<bool>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
    #[serde(default)]
    attempt: Option<u64>,
    #[serde(default, rename = "maxAttempts")]
    max_attempts: Option<u64>,
    #[serde(default, rename = "delayMs")]
    delay_ms: Option<u64>,
    #[serde(default, rename = "errorMessage")]
    error_message: Option<String>,
    #[serde(default, rename = "finalError")]
    final_error: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    aborted: Option<bool>,
    #[serde(default, rename = "willRetry")]
    will_retry: Option<bool>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default, rename = "extensionPath")]
    extension_path: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, rename = "contentIndex")]
    content_index: Option<usize>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default)]
    role: String,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    usage: Option<PiUsage>,
    #[serde(default, rename = "stopReason")]
    stop_reason: Option<String>,
    #[serde(default, rename = "errorMessage")]
    error_message: Option<String>,
}

/// Reads one stdout line of `pi --mode rpc`.
pub fn parse_line(line: &str) -> Result<Event, EventError> {
    let wire: Wire<'_> = serde_json::from_str(line).map_err(|e| EventError(e.to_string()))?;
    let event = match wire.kind.as_ref() {
        "response" => Event::Response(Response {
            id: wire.id,
            command: wire.command.unwrap_or_default(),
            success: wire.success.unwrap_or(false),
            error: wire.error.map(raw_text),
            data: wire.data.and_then(|d| serde_json::from_str(d.get()).ok()),
        }),
        "agent_start" => Event::AgentStart,
        "agent_end" => Event::AgentEnd,
        "message_start" => Event::MessageStart(message(wire.message)?),
        "message_end" => Event::MessageEnd(message(wire.message)?),
        "message_update" => Event::MessageUpdate(match wire.delta {
            Some(d) => delta(d),
            None => Delta::Other { kind: String::new() },
        }),
        "tool_execution_start" => Event::ToolStart {
            id: wire.tool_call_id.unwrap_or_default(),
            name: wire.tool_name.unwrap_or_default(),
            args: wire.args.and_then(|a| serde_json::from_str(a.get()).ok()).unwrap_or(Value::Null),
        },
        "tool_execution_end" => Event::ToolEnd {
            id: wire.tool_call_id.unwrap_or_default(),
            name: wire.tool_name.unwrap_or_default(),
            output: wire.result.map(|r| tool_output(r.get())).unwrap_or_default(),
            is_error: wire.is_error.unwrap_or(false),
        },
        "auto_retry_start" => Event::RetryStart {
            attempt: wire.attempt.unwrap_or(1),
            max_attempts: wire.max_attempts.unwrap_or(0),
            delay_ms: wire.delay_ms.unwrap_or(0),
            error_message: wire.error_message.unwrap_or_default(),
        },
        "auto_retry_end" => Event::RetryEnd {
            success: wire.success.unwrap_or(false),
            attempt: wire.attempt.unwrap_or(0),
            final_error: wire.final_error,
        },
        "compaction_start" => Event::CompactionStart { reason: wire.reason.unwrap_or_default() },
        "compaction_end" => Event::CompactionEnd {
            aborted: wire.aborted.unwrap_or(false),
            will_retry: wire.will_retry.unwrap_or(false),
            error_message: wire.error_message,
        },
        "extension_error" => Event::ExtensionError {
            extension_path: wire.extension_path.unwrap_or_default(),
            error: wire.error.map(raw_text).unwrap_or_default(),
        },
        "extension_ui_request" => Event::ExtensionUi {
            id: wire.id.unwrap_or_default(),
            method: wire.method.unwrap_or_default(),
            text: wire.title.or_else(|| wire.message.map(raw_text)).unwrap_or_default(),
        },
        "turn_start" | "turn_end" | "tool_execution_update" | "queue_update" | "session" => {
            Event::Ignored { event_type: wire.kind.into_owned() }
        }
        other => Event::Unknown { event_type: other.to_owned() },
    };
    Ok(event)
}

/// A raw JSON value as text: a string's content, anything else as JSON.
fn raw_text(raw: &RawValue) -> String {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => raw.get().to_owned(),
    }
}

fn message(raw: Option<&RawValue>) -> Result<Message, EventError> {
    let Some(raw) = raw else { return Ok(Message::default()) };
    let wire: WireMessage<'_> = serde_json::from_str(raw.get()).map_err(|e| EventError(format!("message: {e}")))?;
    // Only an assistant message's content is needed; a user message's may be a string,
    // a tool result's holds the tool output again.
    let content = match (wire.role.as_str(), wire.content) {
        ("assistant", Some(content)) => {
            let blocks: Vec<Value> = serde_json::from_str(content.get()).unwrap_or_default();
            blocks.into_iter().map(|b| serde_json::from_value(b).unwrap_or(Content::Other)).collect()
        }
        _ => Vec::new(),
    };
    Ok(Message {
        role: wire.role,
        content,
        usage: wire.usage,
        stop_reason: wire.stop_reason,
        error_message: wire.error_message,
    })
}

fn delta(d: WireDelta) -> Delta {
    let index = d.content_index.unwrap_or(0);
    let (kind, phase) = match d.kind.split_once('_') {
        Some(("text", phase)) => (DeltaKind::Text, phase),
        Some(("thinking", phase)) => (DeltaKind::Thinking, phase),
        _ => return Delta::Other { kind: d.kind },
    };
    match phase {
        "start" => Delta::Start { kind, index },
        "delta" => Delta::Append { kind, index, delta: d.delta.unwrap_or_default() },
        "end" => Delta::End { kind, index, content: d.content },
        _ => Delta::Other { kind: d.kind },
    }
}

/// The text of a tool result (`{"content": [{"type": "text", "text": …}, …]}`): the text
/// parts joined by newlines, other parts named (`[image]`); a result of another shape as
/// JSON.
pub fn tool_output(raw: &str) -> String {
    #[derive(Deserialize)]
    struct Result {
        #[serde(default)]
        content: Option<Vec<Value>>,
    }
    match serde_json::from_str::<Result>(raw) {
        Ok(Result { content: Some(parts) }) => parts
            .iter()
            .map(|part| match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                (Some("text"), Some(text)) => text.to_owned(),
                (Some(other), _) => format!("[{other}]"),
                (None, _) => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => match serde_json::from_str::<Value>(raw) {
            Ok(Value::String(s)) => s,
            Ok(Value::Null) | Err(_) => String::new(),
            Ok(other) => other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_parse_to_events() {
        let cases: Vec<(&str, Event)> = vec![
            (
                r#"{"id":"state-1","type":"response","command":"get_state","success":true,"data":{"isStreaming":false,"sessionId":"s1"}}"#,
                Event::Response(Response {
                    id: Some("state-1".into()),
                    command: "get_state".into(),
                    success: true,
                    error: None,
                    data: Some(json!({"isStreaming": false, "sessionId": "s1"})),
                }),
            ),
            (
                r#"{"type":"response","command":"prompt","success":false,"error":"No API key found for mock"}"#,
                Event::Response(Response {
                    id: None,
                    command: "prompt".into(),
                    success: false,
                    error: Some("No API key found for mock".into()),
                    data: None,
                }),
            ),
            (r#"{"type":"agent_start"}"#, Event::AgentStart),
            (r#"{"type":"agent_end","messages":[{"role":"user","content":"x"}]}"#, Event::AgentEnd),
            (
                r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":1,"delta":"Hel","partial":{"role":"assistant","content":[{"type":"text","text":"Hello"}]}},"message":{"role":"assistant","content":[]}}"#,
                Event::MessageUpdate(Delta::Append { kind: DeltaKind::Text, index: 1, delta: "Hel".into() }),
            ),
            (
                r#"{"type":"message_update","assistantMessageEvent":{"type":"thinking_end","contentIndex":0,"content":"done thinking","partial":{}}}"#,
                Event::MessageUpdate(Delta::End {
                    kind: DeltaKind::Thinking,
                    index: 0,
                    content: Some("done thinking".into()),
                }),
            ),
            (
                r#"{"type":"message_update","assistantMessageEvent":{"type":"thinking_start","contentIndex":0,"partial":{}}}"#,
                Event::MessageUpdate(Delta::Start { kind: DeltaKind::Thinking, index: 0 }),
            ),
            (
                r#"{"type":"message_update","assistantMessageEvent":{"type":"toolcall_delta","contentIndex":2,"delta":"{\"c","partial":{}}}"#,
                Event::MessageUpdate(Delta::Other { kind: "toolcall_delta".into() }),
            ),
            (
                r#"{"type":"message_update","assistantMessageEvent":{"type":"error","reason":"aborted","error":{"role":"assistant"}}}"#,
                Event::MessageUpdate(Delta::Other { kind: "error".into() }),
            ),
            (
                r#"{"type":"tool_execution_start","toolCallId":"toolu_1","toolName":"bash","args":{"command":"echo hello"}}"#,
                Event::ToolStart { id: "toolu_1".into(), name: "bash".into(), args: json!({"command": "echo hello"}) },
            ),
            (
                r#"{"type":"tool_execution_update","toolCallId":"toolu_1","toolName":"bash","args":{},"partialResult":{"content":[{"type":"text","text":"hel"}]}}"#,
                Event::Ignored { event_type: "tool_execution_update".into() },
            ),
            (
                r#"{"type":"tool_execution_end","toolCallId":"toolu_1","toolName":"bash","result":{"content":[{"type":"text","text":"hello\n"},{"type":"image","data":"x"}],"details":{}},"isError":false}"#,
                Event::ToolEnd {
                    id: "toolu_1".into(),
                    name: "bash".into(),
                    output: "hello\n\n[image]".into(),
                    is_error: false,
                },
            ),
            (
                r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"529 overloaded"}"#,
                Event::RetryStart {
                    attempt: 1,
                    max_attempts: 3,
                    delay_ms: 2000,
                    error_message: "529 overloaded".into(),
                },
            ),
            (
                r#"{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"529 overloaded"}"#,
                Event::RetryEnd { success: false, attempt: 3, final_error: Some("529 overloaded".into()) },
            ),
            (
                r#"{"type":"compaction_start","reason":"threshold"}"#,
                Event::CompactionStart { reason: "threshold".into() },
            ),
            (
                r#"{"type":"compaction_end","reason":"overflow","result":null,"aborted":false,"willRetry":true}"#,
                Event::CompactionEnd { aborted: false, will_retry: true, error_message: None },
            ),
            (
                r#"{"type":"extension_error","extensionPath":"/x.ts","event":"tool_call","error":"boom"}"#,
                Event::ExtensionError { extension_path: "/x.ts".into(), error: "boom".into() },
            ),
            (
                r#"{"type":"extension_ui_request","id":"u1","method":"confirm","title":"Clear?","message":"All lost"}"#,
                Event::ExtensionUi { id: "u1".into(), method: "confirm".into(), text: "Clear?".into() },
            ),
            (
                r#"{"type":"extension_ui_request","id":"u2","method":"notify","message":"Blocked","notifyType":"warning"}"#,
                Event::ExtensionUi { id: "u2".into(), method: "notify".into(), text: "Blocked".into() },
            ),
            (r#"{"type":"turn_start"}"#, Event::Ignored { event_type: "turn_start".into() }),
            (r#"{"type":"brand_new","x":1}"#, Event::Unknown { event_type: "brand_new".into() }),
        ];
        for (line, want) in cases {
            assert_eq!(parse_line(line), Ok(want), "{line}");
        }
    }

    #[test]
    fn messages_keep_what_the_mapping_needs() {
        let line = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"x"},{"type":"text","text":"Hi"},{"type":"toolCall","id":"t1","name":"bash","arguments":{}},{"type":"image","data":"x","mimeType":"image/png"}],"usage":{"input":10,"output":5,"cacheRead":2,"cacheWrite":0,"totalTokens":17,"cost":{"total":0.25}},"stopReason":"toolUse"}}"#;
        let Ok(Event::MessageEnd(m)) = parse_line(line) else { panic!() };
        assert_eq!(m.role, "assistant");
        assert_eq!(
            m.content,
            vec![
                Content::Thinking { thinking: "hm".into() },
                Content::Text { text: "Hi".into() },
                Content::ToolCall { id: "t1".into() },
                Content::Other,
            ]
        );
        let usage = m.usage.unwrap();
        assert_eq!((usage.input, usage.output, usage.cache_read), (Some(10.0), Some(5.0), Some(2.0)));
        assert_eq!(usage.cost.unwrap().total, Some(0.25));
        assert_eq!(m.stop_reason.as_deref(), Some("toolUse"));

        // A user message's content is a string or a list; it is not kept.
        let Ok(Event::MessageStart(m)) =
            parse_line(r#"{"type":"message_start","message":{"role":"user","content":"hello","timestamp":1}}"#)
        else {
            panic!()
        };
        assert_eq!((m.role.as_str(), m.content.len()), ("user", 0));
        let Ok(Event::MessageEnd(m)) = parse_line(
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 {\"error\":1}"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(m.error_message.as_deref(), Some("529 {\"error\":1}"));
    }

    #[test]
    fn bad_lines_are_errors() {
        for line in
            ["", "not json", "[1,2]", r#"{"no_type":1}"#, r#"{"type":7}"#, r#"{"type":"agent_start","success":"yes"}"#]
        {
            assert!(parse_line(line).is_err(), "{line}");
        }
    }

    #[test]
    fn state_from_get_state_data() {
        let data = json!({"model":{"id":"mock-claude","provider":"mock","api":"x"},"isStreaming":true,"isCompacting":false,"sessionId":"abc","sessionFile":"/f.jsonl"});
        let state = State::from_data(Some(&data));
        assert!(state.is_streaming && !state.is_compacting);
        assert_eq!(state.session_id.as_deref(), Some("abc"));
        assert_eq!(state.model_name().as_deref(), Some("mock/mock-claude"));
        assert_eq!(State::from_data(None), State::default());
        assert_eq!(State::from_data(Some(&json!("odd"))), State::default());
    }

    #[test]
    fn tool_outputs() {
        let cases = [
            (r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#, "a\nb"),
            (r#"{"content":[]}"#, ""),
            (r#""plain""#, "plain"),
            (r#"{"other":1}"#, r#"{"other":1}"#),
            ("null", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(tool_output(raw), want, "{raw}");
        }
    }
}
