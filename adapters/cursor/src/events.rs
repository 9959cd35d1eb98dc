//! The events `cursor-agent -p --output-format stream-json` prints on stdout, one JSON
//! object per line.
//!
//! Built from Cursor's documentation (docs/adapters/cursor.md lists the pages), **not
//! from captured output**: the CLI cannot be installed here. Every line has a `type`:
//!
//! - `system` (`subtype: "init"`): `session_id` (the chat id `--resume` takes), `model`,
//!   `cwd`, `apiKeySource`, `permissionMode`.
//! - `user`: the prompt echoed back.
//! - `assistant`: `message.content[]` text. Without `--stream-partial-output` one line per
//!   complete message; with it, deltas (`timestamp_ms`, no `model_call_id`) followed by
//!   consolidated repeats (with `model_call_id`, or without `timestamp_ms`).
//! - `thinking` (`subtype: "delta"` with `text`, then `"completed"`): reasoning, where the
//!   CLI prints it.
//! - `tool_call` (`subtype: "started"` / `"completed"`), `call_id`, and `tool_call` holding
//!   one key such as `shellToolCall` / `readToolCall` / `editToolCall` / `writeToolCall`
//!   with `args` and, once completed, `result` (`{"success": …}`, `{"rejected": …}`, or
//!   another failure key); or `function` with `name` and `arguments`.
//! - `result`: the terminal event: `subtype`, `is_error`, `result` (the whole assistant
//!   text), `duration_ms`, `session_id`, `request_id`, and in newer CLIs `usage`.
//!
//! Parsing is tolerant on purpose: unknown event types and subtypes parse to
//! [`Event::Unknown`], unknown fields are ignored, missing fields take defaults. Only a
//! line without a string `type` is an [`EventError`].

use serde::Deserialize;
use serde_json::{Map, Value};

/// One parsed line of `cursor-agent`'s stream-json output.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `system`/`init`: emitted once at the start of every run (a resumed run reports the
    /// chat it resumed).
    SystemInit {
        /// The chat id (a UUID); what `--resume` takes.
        session_id: Option<String>,
        /// The model's display name ("Claude 4 Sonnet", "Auto").
        model: Option<String>,
    },
    /// `user`: the prompt, echoed. Carries nothing the adapter needs.
    User,
    /// `assistant`: assistant text (a delta or a whole message, see the module docs).
    Assistant(AssistantText),
    /// `thinking`/`delta`: a piece of the model's reasoning.
    ThinkingDelta {
        /// The piece.
        text: String,
    },
    /// `thinking`/`completed`: the reasoning phase ended.
    ThinkingCompleted,
    /// `tool_call`/`started` or `tool_call`/`completed`.
    ToolCall {
        /// Started or completed.
        phase: ToolPhase,
        /// Cursor's `call_id` (correlates start and completion); may be missing.
        call_id: Option<String>,
        /// The tool, its arguments and (once completed) its outcome.
        call: ToolInvocation,
    },
    /// `result`: the run ended.
    Result(RunResult),
    /// An event type or subtype this adapter does not know (`interaction_query`, …); ignored.
    Unknown {
        /// Its `type`.
        event_type: String,
        /// Its `subtype`, if any.
        subtype: Option<String>,
    },
}

/// The text of one `assistant` line and the fields that tell a delta from a repeat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssistantText {
    /// `message.content[]` text parts, joined.
    pub text: String,
    /// `model_call_id`: present on consolidated messages (before tool calls).
    pub model_call_id: Option<String>,
    /// `timestamp_ms`: present on streamed pieces (and on consolidated mid-turn messages).
    pub timestamp_ms: Option<i64>,
}

impl AssistantText {
    /// With `--stream-partial-output`, a streamed piece: it has `timestamp_ms` and no
    /// `model_call_id`. Everything else may repeat text already streamed.
    pub fn is_delta(&self) -> bool {
        self.timestamp_ms.is_some() && self.model_call_id.is_none()
    }
}

/// `tool_call.subtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPhase {
    /// `started`: the call began; `args` known.
    Started,
    /// `completed`: the call ended; `result` known.
    Completed,
}

/// The `tool_call` object of a `tool_call` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInvocation {
    /// The tool's name: the key without its `ToolCall` suffix (`shellToolCall` → `shell`),
    /// or `function.name`.
    pub name: String,
    /// `args` (`function.arguments`, parsed when it is a JSON string); `null` when absent.
    pub args: Value,
    /// `result`, once completed.
    pub outcome: Option<ToolOutcome>,
}

/// How a tool call ended: the one meaningful key of its `result` object.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// `{"success": …}`.
    Success(Value),
    /// `{"rejected": …}`: refused by cursor-agent's permissions (shell commands in print
    /// mode without `--force`, a denied path, …).
    Rejected(Value),
    /// Any other key (`error`, `failure`, …) with its value.
    Failed {
        /// The key.
        kind: String,
        /// Its value.
        value: Value,
    },
}

/// `result`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunResult {
    /// `subtype`: `success` normally.
    pub subtype: String,
    /// `is_error`.
    pub is_error: bool,
    /// `result`: the whole assistant text (or the error, when it failed).
    pub result: String,
    /// `session_id`.
    pub session_id: Option<String>,
    /// `duration_ms`.
    pub duration_ms: Option<u64>,
    /// `usage`, when the CLI reports it.
    pub usage: Option<TokenUsage>,
}

impl RunResult {
    /// True when the run failed: `is_error`, or a subtype other than `success`.
    pub fn failed(&self) -> bool {
        self.is_error || (!self.subtype.is_empty() && self.subtype != "success")
    }
}

/// `result.usage`. Cursor spells the counts in camelCase; snake_case is accepted too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    #[serde(default, alias = "input_tokens")]
    #[serde(rename = "inputTokens")]
    pub input_tokens: Option<i64>,
    /// Completion tokens.
    #[serde(default, alias = "output_tokens")]
    #[serde(rename = "outputTokens")]
    pub output_tokens: Option<i64>,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, alias = "cache_read_tokens", alias = "cacheReadInputTokens")]
    #[serde(rename = "cacheReadTokens")]
    pub cache_read_tokens: Option<i64>,
    /// Prompt tokens written to the provider's cache.
    #[serde(default, alias = "cache_write_tokens", alias = "cacheWriteInputTokens")]
    #[serde(rename = "cacheWriteTokens")]
    pub cache_write_tokens: Option<i64>,
}

/// A line that could not be understood as an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not an object with a string `type`.
    #[error("not a cursor-agent event (no string `type`): {0}")]
    NoType(String),
}

/// How much of an unparseable line goes into an error message.
const PREVIEW_CHARS: usize = 120;

fn preview(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn string(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Parses one stdout line (already decoded as JSON) into an [`Event`].
pub fn parse_event(value: Value) -> Result<Event, EventError> {
    let Value::Object(map) = value else {
        return Err(EventError::NoType(preview(&value)));
    };
    let Some(event_type) = string(&map, "type") else {
        return Err(EventError::NoType(preview(&Value::Object(map))));
    };
    let subtype = string(&map, "subtype");
    let unknown = || Event::Unknown { event_type: event_type.clone(), subtype: subtype.clone() };
    Ok(match (event_type.as_str(), subtype.as_deref()) {
        ("system", Some("init")) => {
            Event::SystemInit { session_id: string(&map, "session_id"), model: string(&map, "model") }
        }
        ("user", _) => Event::User,
        ("assistant", _) => Event::Assistant(AssistantText {
            text: message_text(map.get("message")),
            model_call_id: string(&map, "model_call_id"),
            timestamp_ms: map.get("timestamp_ms").and_then(Value::as_i64),
        }),
        ("thinking", Some("delta")) => Event::ThinkingDelta { text: string(&map, "text").unwrap_or_default() },
        ("thinking", Some("completed")) => Event::ThinkingCompleted,
        ("tool_call", Some(phase @ ("started" | "completed"))) => Event::ToolCall {
            phase: if phase == "started" { ToolPhase::Started } else { ToolPhase::Completed },
            call_id: string(&map, "call_id"),
            call: parse_invocation(map.get("tool_call")),
        },
        ("result", _) => Event::Result(RunResult {
            subtype: subtype.clone().unwrap_or_default(),
            is_error: map.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            result: match map.get("result") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
            session_id: string(&map, "session_id"),
            duration_ms: map.get("duration_ms").and_then(Value::as_u64),
            usage: map.get("usage").and_then(|u| serde_json::from_value(u.clone()).ok()),
        }),
        _ => unknown(),
    })
}

/// The text parts of an `assistant` message, joined. A `content` that is a plain string
/// is taken as it is; parts of other types (images, tool uses) are skipped.
fn message_text(message: Option<&Value>) -> String {
    match message.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// The tool of a `tool_call` object: the first `…ToolCall` key, else `function`, else
/// the first key of any name.
fn parse_invocation(tool_call: Option<&Value>) -> ToolInvocation {
    let Some(Value::Object(map)) = tool_call else {
        return ToolInvocation { name: "tool".to_owned(), args: Value::Null, outcome: None };
    };
    let entry = map
        .iter()
        .find(|(k, _)| k.ends_with("ToolCall"))
        .or_else(|| map.iter().find(|(k, _)| k.as_str() == "function"))
        .or_else(|| map.iter().next());
    let Some((key, inner)) = entry else {
        return ToolInvocation { name: "tool".to_owned(), args: Value::Null, outcome: None };
    };
    if key == "function" {
        let name = inner.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("function");
        let args = match inner.get("arguments") {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
            Some(v) => v.clone(),
            None => Value::Null,
        };
        return ToolInvocation { name: name.to_owned(), args, outcome: inner.get("result").map(parse_outcome) };
    }
    let name = match key.strip_suffix("ToolCall") {
        Some("") | None => key.clone(),
        Some(stem) => stem.to_owned(),
    };
    ToolInvocation {
        name,
        args: inner.get("args").cloned().unwrap_or(Value::Null),
        outcome: inner.get("result").map(parse_outcome),
    }
}

/// `result` of a completed tool call: `success` wins, then `rejected`, then the first
/// other key holding an object or a string (a failure); metadata flags beside them
/// (`isBackground`) are ignored. A result that is not an object, or has no such key, is a
/// success carrying itself.
fn parse_outcome(result: &Value) -> ToolOutcome {
    let Value::Object(map) = result else {
        return ToolOutcome::Success(result.clone());
    };
    if let Some(v) = map.get("success") {
        return ToolOutcome::Success(v.clone());
    }
    if let Some(v) = map.get("rejected") {
        return ToolOutcome::Rejected(v.clone());
    }
    match map.iter().find(|(_, v)| v.is_object() || v.is_string()) {
        Some((kind, value)) => ToolOutcome::Failed { kind: kind.clone(), value: value.clone() },
        None => ToolOutcome::Success(result.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(line: &str) -> Result<Event, EventError> {
        parse_event(serde_json::from_str(line).unwrap())
    }

    #[test]
    fn documented_events_parse() {
        let cases: Vec<(&str, Event)> = vec![
            (
                r#"{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/w","session_id":"c6b6","model":"Claude 4 Sonnet","permissionMode":"default"}"#,
                Event::SystemInit { session_id: Some("c6b6".into()), model: Some("Claude 4 Sonnet".into()) },
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi"}]},"session_id":"c"}"#,
                Event::User,
            ),
            (
                r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I'll "},{"type":"text","text":"read"}]},"session_id":"c"}"#,
                Event::Assistant(AssistantText { text: "I'll read".into(), model_call_id: None, timestamp_ms: None }),
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"x"}]},"model_call_id":"m1","timestamp_ms":17}"#,
                Event::Assistant(AssistantText {
                    text: "x".into(),
                    model_call_id: Some("m1".into()),
                    timestamp_ms: Some(17),
                }),
            ),
            (
                r#"{"type":"thinking","subtype":"delta","text":"hm","timestamp_ms":1}"#,
                Event::ThinkingDelta { text: "hm".into() },
            ),
            (r#"{"type":"thinking","subtype":"completed"}"#, Event::ThinkingCompleted),
            (
                r#"{"type":"interaction_query","subtype":"request","session_id":"c"}"#,
                Event::Unknown { event_type: "interaction_query".into(), subtype: Some("request".into()) },
            ),
            (
                r#"{"type":"system","subtype":"status"}"#,
                Event::Unknown { event_type: "system".into(), subtype: Some("status".into()) },
            ),
        ];
        for (line, want) in cases {
            assert_eq!(parse(line), Ok(want), "{line}");
        }
    }

    #[test]
    fn tool_calls_parse() {
        let Ok(Event::ToolCall { phase, call_id, call }) = parse(
            r#"{"type":"tool_call","subtype":"started","call_id":"toolu_1","tool_call":{"readToolCall":{"args":{"path":"README.md"}}},"session_id":"c"}"#,
        ) else {
            panic!()
        };
        assert_eq!((phase, call_id.as_deref()), (ToolPhase::Started, Some("toolu_1")));
        assert_eq!(call, ToolInvocation { name: "read".into(), args: json!({"path": "README.md"}), outcome: None });

        let Ok(Event::ToolCall { phase, call, .. }) = parse(
            r#"{"type":"tool_call","subtype":"completed","call_id":"c","tool_call":{"shellToolCall":{"args":{"command":"ls"},"result":{"success":{"exitCode":0,"stdout":"a\n","stderr":""},"isBackground":false}}}}"#,
        ) else {
            panic!()
        };
        assert_eq!(phase, ToolPhase::Completed);
        assert_eq!(call.outcome, Some(ToolOutcome::Success(json!({"exitCode":0,"stdout":"a\n","stderr":""}))));

        let outcome = |result: Value| parse_outcome(&result);
        assert_eq!(outcome(json!({"rejected": {"reason": ""}})), ToolOutcome::Rejected(json!({"reason": ""})));
        assert_eq!(
            outcome(json!({"isBackground": false, "error": {"error": "boom"}})),
            ToolOutcome::Failed { kind: "error".into(), value: json!({"error": "boom"}) }
        );
        assert_eq!(outcome(json!("plain")), ToolOutcome::Success(json!("plain")));
        assert_eq!(outcome(json!({"isBackground": true})), ToolOutcome::Success(json!({"isBackground": true})));

        let function =
            parse_invocation(Some(&json!({"function": {"name": "mcp_docs_search", "arguments": "{\"q\":\"x\"}"}})));
        assert_eq!(function, ToolInvocation { name: "mcp_docs_search".into(), args: json!({"q": "x"}), outcome: None });
        let odd = parse_invocation(Some(&json!({"function": {"arguments": "not json"}})));
        assert_eq!((odd.name.as_str(), odd.args), ("function", json!("not json")));
        assert_eq!(parse_invocation(None).name, "tool");
        assert_eq!(parse_invocation(Some(&json!({"ToolCall": {}}))).name, "ToolCall");
        assert_eq!(parse_invocation(Some(&json!({"mcpCall": {"args": 1}}))).name, "mcpCall");
    }

    #[test]
    fn results_parse() {
        let Ok(Event::Result(r)) = parse(
            r#"{"type":"result","subtype":"success","duration_ms":5234,"duration_api_ms":5234,"is_error":false,"result":"done","session_id":"c","request_id":"r","usage":{"inputTokens":14948,"outputTokens":103}}"#,
        ) else {
            panic!()
        };
        assert!(!r.failed());
        assert_eq!((r.result.as_str(), r.session_id.as_deref(), r.duration_ms), ("done", Some("c"), Some(5234)));
        assert_eq!(
            r.usage,
            Some(TokenUsage {
                input_tokens: Some(14948),
                output_tokens: Some(103),
                cache_read_tokens: None,
                cache_write_tokens: None
            })
        );
        let Ok(Event::Result(r)) = parse(r#"{"type":"result","subtype":"error","is_error":true,"result":"denied"}"#)
        else {
            panic!()
        };
        assert!(r.failed());
        let Ok(Event::Result(r)) = parse(r#"{"type":"result","subtype":"error_max_turns"}"#) else { panic!() };
        assert!(r.failed(), "a non-success subtype fails even without is_error");
        let Ok(Event::Result(r)) = parse(r#"{"type":"result","usage":{"input_tokens":1,"cacheReadTokens":2}}"#) else {
            panic!()
        };
        assert!(!r.failed());
        let usage = r.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.cache_read_tokens), (Some(1), Some(2)));
    }

    #[test]
    fn bad_lines_are_errors() {
        assert!(matches!(parse_event(json!([1, 2])), Err(EventError::NoType(_))));
        assert!(matches!(parse_event(json!({"type": 7})), Err(EventError::NoType(_))));
        assert!(matches!(parse_event(json!("text")), Err(EventError::NoType(_))));
    }

    #[test]
    fn delta_or_repeat() {
        let t = |model_call_id: Option<&str>, timestamp_ms: Option<i64>| AssistantText {
            text: "x".into(),
            model_call_id: model_call_id.map(str::to_owned),
            timestamp_ms,
        };
        assert!(t(None, Some(1)).is_delta());
        assert!(!t(Some("m"), Some(1)).is_delta());
        assert!(!t(None, None).is_delta());
    }
}
