//! The events `codex exec --json` prints on stdout, one JSON object per line.
//!
//! Shape (codex 0.171.0, `codex-rs/exec/src/exec_events.rs` upstream): every line has a
//! `type`. Thread and turn events are `thread.started` (`thread_id`, the id `codex exec
//! resume` takes), `turn.started`, `turn.completed` (`usage`), `turn.failed`
//! (`error.message`) and a top-level `error` (`message`). Item events are `item.started`,
//! `item.updated` and `item.completed`, each with an `item` object carrying `id` (only
//! unique within one process: `item_0`, `item_1`, …), `type` and the type's fields.
//!
//! Parsing is tolerant on purpose, because the CLI evolves faster than this adapter:
//! an unknown event or item type parses to an `Unknown` variant (the mapper logs it at
//! debug and ignores it), unknown fields are ignored, missing fields take defaults, and
//! unknown status strings parse to `Unknown`. Only a line without a string `type`, or a
//! known type whose fields have the wrong JSON types, is an [`EventError`].

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One parsed line of `codex exec --json`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `thread.started`: the conversation's id, printed first by every run (a resumed run
    /// prints the id it resumed).
    ThreadStarted {
        /// The thread id (a UUID); what `codex exec resume <id>` takes.
        thread_id: String,
    },
    /// `turn.started`: the model is being asked. Carries nothing.
    TurnStarted,
    /// `turn.completed`: the turn finished; the token usage of this turn.
    TurnCompleted {
        /// Tokens used by this turn.
        usage: TokenUsage,
    },
    /// `turn.failed`: the turn failed (the model errored, …); `error.message` says why.
    TurnFailed {
        /// The failure, for a person.
        message: String,
    },
    /// `item.started` / `item.updated` / `item.completed`.
    Item {
        /// Which of the three.
        phase: ItemPhase,
        /// The item as it is now (codex sends the whole item every time, not a delta).
        item: Item,
    },
    /// Top-level `error`: an error reported by the event stream itself. Usually followed
    /// by `turn.failed` with the same message.
    Error {
        /// The error, for a person.
        message: String,
    },
    /// An event type this adapter does not know; ignored.
    Unknown {
        /// Its `type`.
        event_type: String,
    },
}

/// Which item event a line was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemPhase {
    /// `item.started`: the item exists, typically `in_progress`.
    Started,
    /// `item.updated`: the item changed (e.g. a to-do list ticked an entry).
    Updated,
    /// `item.completed`: the item reached its final state.
    Completed,
}

/// A thread item: `id` plus a typed payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Codex's item id (`item_3`); unique within one `codex exec` process only.
    pub id: String,
    /// The payload, by `type`.
    pub details: ItemDetails,
}

/// The payload of an item, by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemDetails {
    /// `agent_message`: assistant prose (or JSON when an output schema is used).
    AgentMessage(TextItem),
    /// `reasoning`: the model's reasoning summary.
    Reasoning(TextItem),
    /// `command_execution`: a shell command the agent ran.
    CommandExecution(CommandExecution),
    /// `file_change`: a patch codex applied (paths and kinds only, no content).
    FileChange(FileChange),
    /// `mcp_tool_call`: a call to a tool of an MCP server.
    McpToolCall(McpToolCall),
    /// `web_search`: a web search.
    WebSearch(WebSearch),
    /// `todo_list`: the agent's running to-do list.
    TodoList(TodoList),
    /// `error`: a non-fatal error (e.g. `Model metadata for … not found`).
    Error(ErrorItem),
    /// An item type this adapter does not know; ignored.
    Unknown {
        /// Its `type`.
        item_type: String,
    },
}

/// `agent_message` and `reasoning`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TextItem {
    /// The whole text so far.
    #[serde(default)]
    pub text: String,
}

/// `command_execution`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CommandExecution {
    /// The command line as codex ran it (`/bin/bash -lc 'echo hello'`).
    #[serde(default)]
    pub command: String,
    /// stdout and stderr, interleaved.
    #[serde(default)]
    pub aggregated_output: String,
    /// The exit code once it exited; `null` while running.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// Where the command is.
    #[serde(default)]
    pub status: CommandStatus,
}

/// `command_execution.status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandStatus {
    /// Running.
    #[default]
    InProgress,
    /// Exited (with any exit code).
    Completed,
    /// Could not run, or failed.
    Failed,
    /// Refused (by policy or the sandbox).
    Declined,
    /// A status this adapter does not know.
    #[serde(other)]
    Unknown,
}

/// `file_change`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct FileChange {
    /// One entry per file.
    #[serde(default)]
    pub changes: Vec<FileUpdate>,
    /// Whether the patch applied.
    #[serde(default)]
    pub status: PatchStatus,
}

/// One file of a `file_change`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FileUpdate {
    /// The file (codex reports it absolute in practice; relative means to the cwd).
    pub path: String,
    /// What happened to it.
    pub kind: ChangeKind,
}

/// `file_change.changes[].kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A new file.
    Add,
    /// A removed file.
    Delete,
    /// An edited file.
    Update,
    /// A kind this adapter does not know.
    #[serde(other)]
    Unknown,
}

impl ChangeKind {
    /// The word used in tool results (`add`, `delete`, `update`, `change`).
    pub fn verb(self) -> &'static str {
        match self {
            ChangeKind::Add => "add",
            ChangeKind::Delete => "delete",
            ChangeKind::Update => "update",
            ChangeKind::Unknown => "change",
        }
    }
}

/// `file_change.status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchStatus {
    /// Being applied (newer CLIs announce patches with `item.started`).
    InProgress,
    /// Applied.
    #[default]
    Completed,
    /// Failed to apply (possibly partly applied).
    Failed,
    /// Refused.
    Declined,
    /// A status this adapter does not know.
    #[serde(other)]
    Unknown,
}

/// `mcp_tool_call`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct McpToolCall {
    /// The MCP server's name in codex's config.
    #[serde(default)]
    pub server: String,
    /// The tool's name on that server.
    #[serde(default)]
    pub tool: String,
    /// The tool's arguments.
    #[serde(default)]
    pub arguments: Value,
    /// The result, once it succeeded.
    #[serde(default)]
    pub result: Option<McpResult>,
    /// The error, once it failed.
    #[serde(default)]
    pub error: Option<McpError>,
    /// Where the call is.
    #[serde(default)]
    pub status: McpStatus,
}

/// `mcp_tool_call.result`: MCP content blocks, and structured content when the tool gives it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct McpResult {
    /// MCP content blocks (`{"type":"text","text":…}`, images, resources, …).
    #[serde(default)]
    pub content: Vec<Value>,
    /// The tool's structured output, if any.
    #[serde(default)]
    pub structured_content: Option<Value>,
}

/// `mcp_tool_call.error`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct McpError {
    /// What failed.
    #[serde(default)]
    pub message: String,
}

/// `mcp_tool_call.status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpStatus {
    /// Running.
    #[default]
    InProgress,
    /// Succeeded.
    Completed,
    /// Failed.
    Failed,
    /// A status this adapter does not know.
    #[serde(other)]
    Unknown,
}

/// `web_search`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct WebSearch {
    /// What was searched for (may be empty on `item.started` in newer CLIs).
    #[serde(default)]
    pub query: String,
}

/// `todo_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TodoList {
    /// The entries, in order.
    #[serde(default)]
    pub items: Vec<TodoEntry>,
}

/// One `todo_list` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TodoEntry {
    /// What the step is.
    #[serde(default)]
    pub text: String,
    /// Whether it is done.
    #[serde(default)]
    pub completed: bool,
}

/// `error` item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ErrorItem {
    /// The warning, for a person.
    #[serde(default)]
    pub message: String,
}

/// `turn.completed.usage`. Counts are signed upstream; a missing one is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens, cached ones included (OpenAI's convention).
    #[serde(default)]
    pub input_tokens: Option<i64>,
    /// The part of `input_tokens` served from the provider's cache.
    #[serde(default)]
    pub cached_input_tokens: Option<i64>,
    /// Prompt tokens written to the provider's cache (newer CLIs).
    #[serde(default)]
    pub cache_write_input_tokens: Option<i64>,
    /// Completion tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: Option<i64>,
    /// The part of `output_tokens` spent on reasoning.
    #[serde(default)]
    pub reasoning_output_tokens: Option<i64>,
}

/// A line that could not be understood as an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not an object with a string `type`.
    #[error("not a codex event (no string `type`): {0}")]
    NoType(String),
    /// A known event or item type with fields of the wrong shape.
    #[error("malformed `{kind}`: {problem}")]
    Malformed {
        /// The event type, or `item.<type>` for an item.
        kind: String,
        /// What serde said.
        problem: String,
    },
}

#[derive(Deserialize)]
struct ThreadStartedBody {
    thread_id: String,
}

#[derive(Deserialize)]
struct TurnCompletedBody {
    #[serde(default)]
    usage: TokenUsage,
}

#[derive(Deserialize, Default)]
struct MessageBody {
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct TurnFailedBody {
    #[serde(default)]
    error: MessageBody,
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

fn body<T: DeserializeOwned>(kind: &str, value: Value) -> Result<T, EventError> {
    serde_json::from_value(value).map_err(|e| EventError::Malformed { kind: kind.to_owned(), problem: e.to_string() })
}

/// Parses one stdout line (already decoded as JSON) into an [`Event`].
pub fn parse_event(value: Value) -> Result<Event, EventError> {
    let Some(event_type) = value.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return Err(EventError::NoType(preview(&value)));
    };
    let phase = match event_type.as_str() {
        "thread.started" => {
            let b: ThreadStartedBody = body(&event_type, value)?;
            return Ok(Event::ThreadStarted { thread_id: b.thread_id });
        }
        "turn.started" => return Ok(Event::TurnStarted),
        "turn.completed" => {
            let b: TurnCompletedBody = body(&event_type, value)?;
            return Ok(Event::TurnCompleted { usage: b.usage });
        }
        "turn.failed" => {
            let b: TurnFailedBody = body(&event_type, value)?;
            return Ok(Event::TurnFailed { message: b.error.message });
        }
        "error" => {
            let b: MessageBody = body(&event_type, value)?;
            return Ok(Event::Error { message: b.message });
        }
        "item.started" => ItemPhase::Started,
        "item.updated" => ItemPhase::Updated,
        "item.completed" => ItemPhase::Completed,
        _ => return Ok(Event::Unknown { event_type }),
    };
    let item = match value {
        Value::Object(mut map) => map.remove("item").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    Ok(Event::Item { phase, item: parse_item(&event_type, item)? })
}

fn parse_item(event_type: &str, value: Value) -> Result<Item, EventError> {
    let malformed = |problem: &str| EventError::Malformed { kind: event_type.to_owned(), problem: problem.to_owned() };
    if !value.is_object() {
        return Err(malformed("`item` is not an object"));
    }
    let id = value.get("id").and_then(Value::as_str).ok_or_else(|| malformed("`item.id` is not a string"))?.to_owned();
    let item_type =
        value.get("type").and_then(Value::as_str).ok_or_else(|| malformed("`item.type` is not a string"))?.to_owned();
    let kind = format!("item.{item_type}");
    let details = match item_type.as_str() {
        "agent_message" => ItemDetails::AgentMessage(body(&kind, value)?),
        "reasoning" => ItemDetails::Reasoning(body(&kind, value)?),
        "command_execution" => ItemDetails::CommandExecution(body(&kind, value)?),
        "file_change" => ItemDetails::FileChange(body(&kind, value)?),
        "mcp_tool_call" => ItemDetails::McpToolCall(body(&kind, value)?),
        "web_search" => ItemDetails::WebSearch(body(&kind, value)?),
        "todo_list" => ItemDetails::TodoList(body(&kind, value)?),
        "error" => ItemDetails::Error(body(&kind, value)?),
        _ => ItemDetails::Unknown { item_type },
    };
    Ok(Item { id, details })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(line: &str) -> Result<Event, EventError> {
        parse_event(serde_json::from_str(line).unwrap())
    }

    #[test]
    fn known_events_parse() {
        assert_eq!(
            parse(r#"{"type":"thread.started","thread_id":"01a2"}"#),
            Ok(Event::ThreadStarted { thread_id: "01a2".into() })
        );
        assert_eq!(parse(r#"{"type":"turn.started"}"#), Ok(Event::TurnStarted));
        assert_eq!(
            parse(r#"{"type":"turn.failed","error":{"message":"boom"}}"#),
            Ok(Event::TurnFailed { message: "boom".into() })
        );
        assert_eq!(parse(r#"{"type":"error","message":"x"}"#), Ok(Event::Error { message: "x".into() }));
        let Ok(Event::TurnCompleted { usage }) = parse(
            r#"{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":1,"output_tokens":2,"reasoning_output_tokens":0}}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            usage,
            TokenUsage {
                input_tokens: Some(5),
                cached_input_tokens: Some(1),
                cache_write_input_tokens: None,
                output_tokens: Some(2),
                reasoning_output_tokens: Some(0)
            }
        );
    }

    #[test]
    fn unknown_types_and_statuses_are_tolerated() {
        assert_eq!(
            parse(r#"{"type":"thread.archived","x":1}"#),
            Ok(Event::Unknown { event_type: "thread.archived".into() })
        );
        let Ok(Event::Item { item, .. }) = parse(r#"{"type":"item.started","item":{"id":"i","type":"collab_call"}}"#)
        else {
            panic!()
        };
        assert_eq!(item.details, ItemDetails::Unknown { item_type: "collab_call".into() });
        let Ok(Event::Item { item, .. }) = parse(
            r#"{"type":"item.completed","item":{"id":"i","type":"command_execution","command":"ls","status":"teleported","extra":true}}"#,
        ) else {
            panic!()
        };
        let ItemDetails::CommandExecution(c) = item.details else { panic!() };
        assert_eq!((c.status, c.exit_code, c.aggregated_output.as_str()), (CommandStatus::Unknown, None, ""));
    }

    #[test]
    fn bad_lines_are_errors() {
        assert!(matches!(parse_event(json!([1, 2])), Err(EventError::NoType(_))));
        assert!(matches!(parse_event(json!({"type": 7})), Err(EventError::NoType(_))));
        assert!(matches!(parse(r#"{"type":"thread.started"}"#), Err(EventError::Malformed { .. })));
        assert!(matches!(parse(r#"{"type":"item.completed"}"#), Err(EventError::Malformed { .. })));
        assert!(matches!(
            parse(r#"{"type":"item.completed","item":{"id":"i","type":"reasoning","text":5}}"#),
            Err(EventError::Malformed { kind, .. }) if kind == "item.reasoning"
        ));
    }
}
