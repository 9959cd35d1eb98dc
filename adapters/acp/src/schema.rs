//! The slice of the Agent Client Protocol (ACP v1) this host speaks, as tolerant serde
//! types: every field the host does not need is left out, every field it reads has a
//! default, and a message that does not fit is reported, never fatal.
//!
//! Names follow the ACP schema (`agent-client-protocol-schema`, `src/v1/*.rs`): object
//! keys are camelCase, discriminators snake_case. A `session/update` is decoded in two
//! steps ([`SessionUpdate::parse`]): its `sessionUpdate` tag picks the variant, then the
//! rest of the object is read for that variant only, so one malformed or unknown
//! update never hides the others.

use serde::Deserialize;
use serde_json::Value;

/// The only stable ACP version.
pub const PROTOCOL_VERSION: u64 = 1;

/// Method names.
pub mod method {
    /// C→A: the handshake.
    pub const INITIALIZE: &str = "initialize";
    /// C→A: a new session.
    pub const SESSION_NEW: &str = "session/new";
    /// C→A: an existing session, its history replayed as updates first.
    pub const SESSION_LOAD: &str = "session/load";
    /// C→A: one turn; pending for the whole turn.
    pub const SESSION_PROMPT: &str = "session/prompt";
    /// C→A (notification): stop the running turn.
    pub const SESSION_CANCEL: &str = "session/cancel";
    /// C→A: switch the session's mode.
    pub const SESSION_SET_MODE: &str = "session/set_mode";
    /// C→A (unstable, widely implemented): switch the session's model.
    pub const SESSION_SET_MODEL: &str = "session/set_model";
    /// A→C (notification): everything the agent streams.
    pub const SESSION_UPDATE: &str = "session/update";
    /// A→C: ask the user before a tool runs.
    pub const REQUEST_PERMISSION: &str = "session/request_permission";
    /// Both ways (notification): cancel one pending request.
    pub const CANCEL_REQUEST: &str = "$/cancel_request";
}

/// ACP's `-32000`: the agent wants `authenticate` first.
pub const AUTH_REQUIRED: i64 = -32000;

/// `initialize` result.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InitializeResult {
    /// The version the agent speaks.
    pub protocol_version: Option<Value>,
    /// What it can do.
    pub agent_capabilities: AgentCapabilities,
    /// Who it is.
    pub agent_info: Option<Implementation>,
    /// How to log in, when it needs a login.
    pub auth_methods: Vec<Value>,
}

/// `agentCapabilities`; an omitted capability is unsupported.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCapabilities {
    /// `session/load` is available.
    pub load_session: bool,
    /// Which prompt content blocks beyond text it takes.
    pub prompt_capabilities: PromptCapabilities,
}

/// `promptCapabilities`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PromptCapabilities {
    /// `image` blocks.
    pub image: bool,
    /// `resource` (embedded file) blocks.
    pub embedded_context: bool,
}

/// `agentInfo`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Display name.
    pub title: Option<String>,
    /// Version.
    pub version: Option<String>,
}

/// `session/new` and `session/load` results (`sessionId` only for `new`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionResult {
    /// The new session's id.
    pub session_id: Option<String>,
    /// The session's modes, when it has any.
    pub modes: Option<SessionModes>,
    /// The session's models (unstable `models`).
    pub models: Option<SessionModels>,
}

/// `modes`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionModes {
    /// The mode in effect.
    pub current_mode_id: Option<String>,
    /// Every mode the session offers.
    pub available_modes: Vec<SessionMode>,
}

/// One mode.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionMode {
    /// Its id (what `session/set_mode` takes).
    pub id: String,
    /// Its name.
    pub name: String,
}

/// `models` (unstable).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionModels {
    /// The model in effect.
    pub current_model_id: Option<String>,
    /// Every model the session offers.
    pub available_models: Vec<ModelEntry>,
}

/// One model.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelEntry {
    /// Its id (what `session/set_model` takes).
    pub model_id: String,
    /// Its name.
    pub name: String,
}

/// `session/prompt` result.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PromptResult {
    /// `end_turn`, `max_tokens`, `max_turn_requests`, `refusal` or `cancelled`.
    pub stop_reason: String,
    /// Token counts of the turn (unstable `usage`).
    pub usage: Option<PromptUsage>,
    /// Vendor data: Gemini CLI puts its token counts in `_meta.quota.token_count`.
    #[serde(rename = "_meta")]
    pub meta: Option<Value>,
}

/// `usage` of a prompt result (unstable).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PromptUsage {
    /// Prompt tokens.
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    pub output_tokens: Option<u64>,
    /// Prompt tokens read from the cache.
    pub cached_read_tokens: Option<u64>,
    /// Prompt tokens written to the cache.
    pub cached_write_tokens: Option<u64>,
}

/// `session/update` and `session/request_permission` carry the session they are about.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionScoped {
    /// The session.
    pub session_id: String,
}

/// The body of a `session/update` notification, by its `sessionUpdate` tag.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionUpdate {
    /// The user's own message (replayed history, or an echo); the bridge already shows it.
    UserMessageChunk(ContentChunk),
    /// Assistant prose, one chunk.
    AgentMessageChunk(ContentChunk),
    /// Reasoning, one chunk.
    AgentThoughtChunk(ContentChunk),
    /// A new tool call (or a whole one, replacing what was known).
    ToolCall(ToolCallFields),
    /// The fields of a tool call that changed.
    ToolCallUpdate(ToolCallFields),
    /// The whole plan, replacing the previous one.
    Plan(PlanUpdate),
    /// The agent's slash commands.
    AvailableCommands(Vec<AvailableCommand>),
    /// The session's mode changed.
    CurrentMode {
        /// The new mode.
        mode_id: String,
    },
    /// Context window use and cost so far.
    Usage(UsageUpdate),
    /// The session's title changed.
    SessionInfo {
        /// The title, when it is one.
        title: Option<String>,
    },
    /// A tag this host does not use (`config_option_update`, unstable ones, new ones).
    Other(String),
    /// A known tag whose body did not decode.
    Malformed {
        /// The tag.
        tag: String,
        /// What was wrong.
        problem: String,
    },
}

impl SessionUpdate {
    /// Decodes the `update` object of a `session/update`.
    pub fn parse(update: &Value) -> SessionUpdate {
        let tag = update.get("sessionUpdate").and_then(Value::as_str).unwrap_or_default().to_owned();
        fn body<T: for<'de> Deserialize<'de>>(v: &Value) -> Result<T, serde_json::Error> {
            T::deserialize(v)
        }
        let parsed = match tag.as_str() {
            "user_message_chunk" => body(update).map(SessionUpdate::UserMessageChunk),
            "agent_message_chunk" => body(update).map(SessionUpdate::AgentMessageChunk),
            "agent_thought_chunk" => body(update).map(SessionUpdate::AgentThoughtChunk),
            "tool_call" => body(update).map(SessionUpdate::ToolCall),
            "tool_call_update" => body(update).map(SessionUpdate::ToolCallUpdate),
            "plan" => body(update).map(SessionUpdate::Plan),
            "available_commands_update" => body::<CommandsUpdate>(update).map(|u| {
                SessionUpdate::AvailableCommands(
                    u.available_commands.into_iter().filter_map(Lenient::into_inner).collect(),
                )
            }),
            "current_mode_update" => body::<ModeUpdate>(update)
                .map(|u| SessionUpdate::CurrentMode { mode_id: u.current_mode_id.or(u.mode_id).unwrap_or_default() }),
            "usage_update" => body(update).map(SessionUpdate::Usage),
            "session_info_update" => {
                body::<InfoUpdate>(update).map(|u| SessionUpdate::SessionInfo { title: u.title.and_then(non_empty) })
            }
            _ => return SessionUpdate::Other(tag),
        };
        parsed.unwrap_or_else(|problem| SessionUpdate::Malformed { tag, problem: problem.to_string() })
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

/// A list item that is skipped, not fatal, when it does not decode.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Lenient<T> {
    Ok(T),
    Bad(#[allow(dead_code)] Value),
}

impl<T> Lenient<T> {
    fn into_inner(self) -> Option<T> {
        match self {
            Lenient::Ok(t) => Some(t),
            Lenient::Bad(_) => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[derive(Default)]
struct CommandsUpdate {
    available_commands: Vec<Lenient<AvailableCommand>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ModeUpdate {
    current_mode_id: Option<String>,
    mode_id: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct InfoUpdate {
    title: Option<String>,
}

/// `agent_message_chunk`, `agent_thought_chunk`, `user_message_chunk`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentChunk {
    /// One ACP content block.
    pub content: Value,
    /// Chunks with the same id belong to one message (optional in v1).
    #[serde(default)]
    pub message_id: Option<String>,
    /// Vendor data: Qwen Code puts a model call's token counts in `_meta.usage`, on a
    /// chunk whose text is empty.
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
}

/// A `tool_call` or the changed fields of a `tool_call_update`; absent means unchanged.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallFields {
    /// Unique within the session.
    pub tool_call_id: String,
    /// What the call does, for a person.
    #[serde(default)]
    pub title: Option<String>,
    /// `read`, `edit`, `execute`, … (`other` for anything else).
    #[serde(default)]
    pub kind: Option<String>,
    /// `pending`, `in_progress`, `completed`, `failed`.
    #[serde(default)]
    pub status: Option<String>,
    /// `content`, `diff` and `terminal` items; replaces the previous list.
    #[serde(default)]
    pub content: Option<Vec<Value>>,
    /// Files the call touches.
    #[serde(default)]
    pub locations: Option<Vec<Value>>,
    /// The tool's input.
    #[serde(default)]
    pub raw_input: Option<Value>,
    /// The tool's output.
    #[serde(default)]
    pub raw_output: Option<Value>,
    /// The programmatic tool name (unstable).
    #[serde(default)]
    pub name: Option<String>,
}

/// `plan`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlanUpdate {
    /// The steps.
    pub entries: Vec<PlanEntryWire>,
}

/// One plan step.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlanEntryWire {
    /// What the step does.
    pub content: String,
    /// `pending`, `in_progress`, `completed`.
    pub status: String,
}

/// One advertised slash command.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AvailableCommand {
    /// The command without its slash.
    pub name: String,
    /// What it does.
    pub description: String,
}

/// `usage_update`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UsageUpdate {
    /// Tokens in the context window now.
    pub used: Option<u64>,
    /// The context window's size.
    pub size: Option<u64>,
    /// The session's cost so far.
    pub cost: Option<Cost>,
}

/// `cost`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Cost {
    /// The amount.
    pub amount: Option<f64>,
    /// ISO 4217 currency (`USD`).
    pub currency: Option<String>,
}

/// `session/request_permission` params.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PermissionParams {
    /// The session.
    pub session_id: String,
    /// The call to allow or refuse.
    pub tool_call: ToolCallFields,
    /// The choices.
    pub options: Vec<PermissionOptionWire>,
}

/// One choice of a permission request.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PermissionOptionWire {
    /// Sent back when chosen.
    pub option_id: String,
    /// Button text.
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once`, `reject_always`.
    pub kind: String,
}

/// The text of one ACP content block, for display: text as it is, other blocks as a
/// short placeholder (`[image]`), `None` for a block with nothing to show.
pub fn content_text(block: &Value) -> Option<String> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
    let str_field = |key: &str| block.get(key).and_then(Value::as_str).map(str::to_owned);
    match kind {
        "text" => str_field("text"),
        "image" => Some("[image]".to_owned()),
        "audio" => Some("[audio]".to_owned()),
        "resource_link" => str_field("uri").map(|uri| match str_field("name") {
            Some(name) if name != uri => format!("[{name}]({uri})"),
            _ => uri,
        }),
        "resource" => {
            let resource = block.get("resource")?;
            resource
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| resource.get("uri").and_then(Value::as_str).map(|u| format!("[{u}]")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn updates_decode_by_tag_and_tolerate_unknown_and_bad_ones() {
        let cases = [
            (
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}),
                SessionUpdate::AgentMessageChunk(ContentChunk {
                    content: json!({"type": "text", "text": "hi"}),
                    message_id: None,
                    meta: None,
                }),
            ),
            (
                json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}),
                SessionUpdate::CurrentMode { mode_id: "yolo".into() },
            ),
            (
                json!({"sessionUpdate": "available_commands_update", "availableCommands": [
                    {"name": "init", "description": "Make GEMINI.md"}, 7, {"name": "x", "input": {"hint": "h"}}]}),
                SessionUpdate::AvailableCommands(vec![
                    AvailableCommand { name: "init".into(), description: "Make GEMINI.md".into() },
                    AvailableCommand { name: "x".into(), description: String::new() },
                ]),
            ),
            (
                json!({"sessionUpdate": "config_option_update", "configOptions": []}),
                SessionUpdate::Other("config_option_update".into()),
            ),
            (json!({"update": 1}), SessionUpdate::Other(String::new())),
            (
                json!({"sessionUpdate": "session_info_update", "title": "Fix the tests"}),
                SessionUpdate::SessionInfo { title: Some("Fix the tests".into()) },
            ),
        ];
        for (wire, want) in cases {
            assert_eq!(SessionUpdate::parse(&wire), want, "{wire}");
        }
        let bad = SessionUpdate::parse(&json!({"sessionUpdate": "tool_call", "title": "no id"}));
        assert!(matches!(bad, SessionUpdate::Malformed { ref tag, .. } if tag == "tool_call"), "{bad:?}");
    }

    #[test]
    fn content_blocks_become_display_text() {
        assert_eq!(content_text(&json!({"type": "text", "text": "a"})).as_deref(), Some("a"));
        assert_eq!(
            content_text(&json!({"type": "image", "data": "", "mimeType": "image/png"})).as_deref(),
            Some("[image]")
        );
        assert_eq!(
            content_text(&json!({"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"})).as_deref(),
            Some("[a.rs](file:///a.rs)")
        );
        assert_eq!(
            content_text(&json!({"type": "resource", "resource": {"uri": "file:///a", "text": "body"}})).as_deref(),
            Some("body")
        );
        assert_eq!(content_text(&json!({"type": "mystery"})), None);
    }
}
