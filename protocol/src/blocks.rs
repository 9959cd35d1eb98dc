//! Blocks: the uniform stream every agent's output is normalized into (bridge → app).
//!
//! A block is one JSON object tagged by `type`, with `ts` (Unix seconds, float) and,
//! once the bridge has accepted it into a session's history, `seq`: a per-session
//! counter that starts at 1 and grows by one per block, so a client resumes exactly
//! ("everything after seq N"). Adapters never assign `seq`; the bridge overwrites
//! whatever an adapter sent.
//!
//! Streaming rule (docs/block-protocol.md#streaming-and-replacement-rules): `text` and `thinking` arrive as `done=false`
//! chunks under a stable `id`, then exactly one `done=true`; a chunk is a snapshot
//! (the whole text so far, which replaces) or an append (the new text from a byte
//! `offset` on), see [`crate::streamed`]. The bridge may merge chunks of one id into
//! one but never drops text. `progress` and `bg_task` are replaced by id.
//!
//! [`validate`] checks a block coming from an untrusted adapter and names the field
//! that is wrong.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::capabilities::{CAP_FLAGS, Capabilities, SURFACE_FLAGS};
use crate::ids::{AgentId, BlockId, PermissionRequestId, ToolCallId};
pub use crate::streamed::StreamedText;

/// The `_meta` key (value `true`) marking a block mirrored from a terminal's transcript:
/// the adapter SDK stamps it on what `mirror` returns, the bridge sends no push for such a
/// block, and the app shows it as the terminal's.
pub const MIRRORED_META: &str = "mirrored";

/// One block: the common header plus the type-specific body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Block {
    /// Position in the session's history, assigned by the bridge: 1, 2, 3, …
    /// Absent on blocks an adapter streams (the bridge stamps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When the block was produced, Unix seconds as a float.
    #[cfg_attr(test, proptest(strategy = "crate::arb::timestamp()"))]
    pub ts: f64,
    /// Extension point: vendor data under namespaced keys. Clients ignore what they
    /// do not understand.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, proptest(strategy = "crate::arb::meta()"))]
    pub meta: Option<Map<String, Value>>,
    /// The `type` tag and the fields of that type.
    #[serde(flatten)]
    pub kind: BlockKind,
}

impl BlockKind {
    /// The key under which a later block replaces this one (the streaming contract:
    /// the app replaces, never appends, on a repeated id): `(type, id)` for `text`,
    /// `thinking`, `progress` and `bg_task`; `None` for blocks that never replace.
    pub fn replace_key(&self) -> Option<(&'static str, &str)> {
        match self {
            BlockKind::Text(t) => Some(("text", t.id.as_str())),
            BlockKind::Thinking(t) => Some(("thinking", t.id.as_str())),
            BlockKind::Progress(p) => Some(("progress", p.id.as_str())),
            BlockKind::BgTask(t) => Some(("bg_task", t.id.as_str())),
            _ => None,
        }
    }
}

impl Block {
    /// Joins `next` into this block when both are chunks of one streamed `text` or
    /// `thinking` message and `next` continues it ([`crate::streamed::merge`]); the
    /// joined block keeps `next`'s header (`seq`, `ts`, `_meta`). Gives `next` back
    /// otherwise.
    // The block given back is moved, not copied to the heap: boxing it would allocate
    // on every join of a burst.
    #[allow(clippy::result_large_err)]
    pub fn join(&mut self, next: Block) -> Result<(), Block> {
        let joined = match (&mut self.kind, &next.kind) {
            (BlockKind::Text(first), BlockKind::Text(piece))
            | (BlockKind::Thinking(first), BlockKind::Thinking(piece)) => crate::streamed::merge(first, piece),
            _ => false,
        };
        if !joined {
            return Err(next);
        }
        (self.seq, self.ts, self.meta) = (next.seq, next.ts, next.meta);
        Ok(())
    }

    /// A block stamped with the current time and no `seq` yet.
    pub fn now(kind: BlockKind) -> Self {
        Self { seq: None, ts: now_ts(), meta: None, kind }
    }

    /// The wire value of this block's `type`.
    pub fn block_type(&self) -> &'static str {
        self.kind.block_type()
    }
}

/// The current time as Unix seconds (float), the unit of every `ts` on the wire.
pub fn now_ts() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

macro_rules! block_kinds {
    ($( $(#[$doc:meta])* $tag:literal => $variant:ident($body:ty), )*) => {
        /// The type-specific part of a block, tagged on the wire by `type`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[cfg_attr(test, derive(proptest_derive::Arbitrary))]
        #[serde(tag = "type")]
        pub enum BlockKind {
            $( $(#[$doc])* #[serde(rename = $tag)] $variant($body), )*
        }

        /// Every block `type` this protocol version defines, in documentation order.
        pub const BLOCK_TYPES: &[&str] = &[$($tag),*];

        impl BlockKind {
            /// The wire value of `type`.
            pub fn block_type(&self) -> &'static str {
                match self { $(Self::$variant(_) => $tag,)* }
            }

            /// Decodes the body of a block whose `type` is `tag`; `None` for an unknown tag.
            fn decode_body(tag: &str, body: Value) -> Option<Result<Self, serde_path_to_error::Error<serde_json::Error>>> {
                match tag {
                    $( $tag => Some(serde_path_to_error::deserialize(body).map(Self::$variant)), )*
                    _ => None,
                }
            }
        }
    };
}

block_kinds! {
    /// Who the agent is and what it can do; the first block of every session.
    "agent_info" => AgentInfo(AgentInfo),
    /// What the user sent, so a replayed history shows both sides.
    "user_message" => UserMessage(UserMessage),
    /// Assistant prose, streamed as snapshots or appends under a stable id.
    "text" => Text(StreamedText),
    /// The model's reasoning, streamed like `text`.
    "thinking" => Thinking(StreamedText),
    /// A tool invocation and its status.
    "tool_call" => ToolCall(ToolCall),
    /// The output of a tool call.
    "tool_result" => ToolResult(ToolResult),
    /// The agent asks the user to allow a tool call.
    "permission_request" => PermissionRequest(PermissionRequest),
    /// The agent's plan; each block replaces the previous plan whole.
    "plan" => Plan(Plan),
    /// A change to a file.
    "diff" => Diff(Diff),
    /// Progress of long work, replaced by id.
    "progress" => Progress(Progress),
    /// A background task (a long shell command, a sub-agent), replaced by id.
    "bg_task" => BgTask(BgTask),
    /// Something went wrong.
    "error" => Error(ErrorBlock),
    /// Title, cost and token totals of the session so far.
    "session_summary" => SessionSummary(SessionSummary),
    /// Who writes to the conversation now: terminull, or a terminal it observes (handoff).
    "session_state" => SessionState(SessionStateNotice),
    /// The end of one turn. Every turn ends with exactly one.
    "session_end" => SessionEnd(SessionEnd),
}

/// Body of `agent_info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct AgentInfo {
    /// The adapter's agent id (`claude`, `codex`, …).
    pub agent_id: AgentId,
    /// Human-readable agent name ("Claude Code").
    pub name: String,
    /// The agent CLI's version, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The model this session runs, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Every capability flag (flattened: `cap_images`, …, `provides_usage`).
    #[serde(flatten)]
    pub capabilities: Capabilities,
    /// Slash commands the composer offers: the bridge's universal ones first, then the agent's.
    #[serde(default)]
    pub slash_commands: Vec<SlashCommand>,
}

/// One slash command offered in the composer's palette.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SlashCommand {
    /// The command without its leading slash (`status`).
    pub name: String,
    /// One line shown in the palette.
    pub description: String,
    /// Who executes it: the bridge itself, or the agent.
    pub source: CommandSource,
}

/// Who handles a slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum CommandSource {
    /// Handled by the bridge for every agent (see [`crate::commands`]).
    Bridge,
    /// Passed to the agent as a message.
    Agent,
}

/// Body of `user_message`; also what the app sends in a `user_message` control message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UserMessage {
    /// The message text.
    pub text: String,
    /// Attached files (images when `cap_images`, others when `cap_documents`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// A file attached to a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Attachment {
    /// File name as the user chose it.
    pub name: String,
    /// MIME type (`image/png`, `application/pdf`, …).
    pub mime_type: String,
    /// The file's bytes, standard base64 with padding.
    pub data: String,
}

/// Body of `tool_call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ToolCall {
    /// Stable id; the call is re-sent with the same id when its status changes.
    pub id: ToolCallId,
    /// The tool's name as the agent calls it (`Bash`, `exec_command`, `Edit`…).
    pub name: String,
    /// The tool's input as the agent gave it.
    #[serde(default)]
    #[cfg_attr(test, proptest(strategy = "crate::arb::json_value()"))]
    pub input: Value,
    /// `running`, then `done` or `error`.
    pub status: ToolStatus,
    /// The enclosing call when this one runs inside a sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<ToolCallId>,
    /// A short human description ("Run tests"), when the agent gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The life of a tool call: `running` → `done` | `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Started, no result yet.
    Running,
    /// Finished successfully.
    Done,
    /// Failed, was refused or was cancelled.
    Error,
}

/// Body of `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ToolResult {
    /// The `tool_call` this result belongs to.
    pub tool_call_id: ToolCallId,
    /// The tool's output as text.
    pub output: String,
    /// True when the tool failed.
    #[serde(default)]
    pub is_error: bool,
}

/// Body of `permission_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PermissionRequest {
    /// Echoed by the answer (`permission_response`).
    pub request_id: PermissionRequestId,
    /// The tool that wants to run.
    pub tool: String,
    /// Its input, so the user sees what would happen.
    #[serde(default)]
    #[cfg_attr(test, proptest(strategy = "crate::arb::json_value()"))]
    pub input: Value,
    /// The choices offered; the answer names one by `id`.
    pub options: Vec<PermissionOption>,
    /// The tool call this request gates, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<ToolCallId>,
}

/// One choice of a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PermissionOption {
    /// Sent back in `permission_response.option_id`.
    pub id: String,
    /// Button text.
    pub label: String,
    /// What choosing it means.
    pub kind: PermissionOptionKind,
}

/// The meaning of a permission option (the ACP set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Allow this one call.
    AllowOnce,
    /// Allow this and future calls of the same kind.
    AllowAlways,
    /// Refuse this one call.
    RejectOnce,
    /// Refuse this and future calls of the same kind.
    RejectAlways,
}

/// Body of `plan`: the whole plan, replacing any earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Plan {
    /// The plan's steps in order.
    pub entries: Vec<PlanEntry>,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PlanEntry {
    /// What the step does.
    pub content: String,
    /// Where the step stands.
    pub status: PlanStatus,
}

/// Status of a plan entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Completed,
}

/// Body of `diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Diff {
    /// The changed file's path (absolute, or relative to the session's cwd).
    pub path: String,
    /// The change itself.
    pub change: DiffChange,
    /// The tool call that made the change, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<ToolCallId>,
}

/// A file change, either as a unified diff or as whole old/new texts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "format", rename_all = "snake_case")]
pub enum DiffChange {
    /// A unified diff (`--- a/…`, `+++ b/…`, `@@ … @@` hunks).
    Unified {
        /// The diff text.
        patch: String,
    },
    /// The file's text before and after.
    Replace {
        /// The text before; `null` for a new file.
        old_text: Option<String>,
        /// The text after.
        new_text: String,
    },
}

/// Body of `progress`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Progress {
    /// Stable id; a repeated id replaces.
    pub id: BlockId,
    /// What is going on.
    pub message: String,
    /// Units done, when countable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<u64>,
    /// Units in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// True on the last update of this id.
    pub done: bool,
}

/// Body of `bg_task`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct BgTask {
    /// Stable id; a repeated id replaces.
    pub id: BlockId,
    /// What the task is (a command line, a sub-agent's goal).
    pub title: String,
    /// Where it stands.
    pub status: BgTaskStatus,
    /// Output so far (full, not a delta), when there is any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// Status of a background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum BgTaskStatus {
    /// Still running.
    Running,
    /// Finished successfully.
    Done,
    /// Failed.
    Error,
    /// Stopped before it finished.
    Cancelled,
}

/// Body of `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ErrorBlock {
    /// What went wrong, for a person.
    pub message: String,
    /// True when the session can go on (the user may send another message).
    pub recoverable: bool,
    /// A machine-readable code (`adapter_crashed`, `model_error`, …), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// Body of `session_state`: sent by the bridge (never by an adapter) when a session
/// changes hands between terminull and the agent's own CLI in a terminal
/// (docs/session-handoff.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SessionStateNotice {
    /// `parked`: a terminal drives the conversation and terminull only observes it
    /// (messages queue); `live`: terminull drives it.
    pub state: Ownership,
    /// Detail for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The terminal's agent process, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_pid: Option<u32>,
    /// Messages waiting for the terminal to go idle.
    #[serde(default)]
    pub queued: u32,
    /// The command that continues the conversation in a terminal, when terminull
    /// handed it over (`continue_in_terminal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_command: Option<Vec<String>>,
}

/// Who writes to a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Ownership {
    /// A terminal does; terminull mirrors it read-only and queues messages.
    Parked,
    /// terminull does.
    Live,
}

/// Body of `session_summary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SessionSummary {
    /// The conversation's title, when the agent or the bridge has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Token and cost totals of the session so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Body of `session_end`: the end of one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SessionEnd {
    /// Why the turn ended.
    pub reason: EndReason,
    /// Usage of this turn, when the agent reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Detail for a person (the error text, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The agent finished its answer.
    Completed,
    /// The user interrupted the turn. Never reported as an error.
    Interrupted,
    /// The agent, its model or the adapter failed.
    Error,
    /// The model hit its output limit.
    MaxTokens,
    /// The model refused.
    Refusal,
    /// The session was stopped (`stop_session`, bridge shutdown).
    Stopped,
}

/// Token and cost figures. Every field is optional: agents report what they know.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Prompt tokens served from the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, proptest(strategy = "proptest::option::of(crate::arb::finite())"))]
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Adds `more` to these totals (a session's, from its turns). A count stays absent
    /// until some addend reports it; costs add up, rounded to a billionth of a dollar so
    /// float noise does not pile up over a long session.
    pub fn add(&mut self, more: &Usage) {
        fn add(total: &mut Option<u64>, n: Option<u64>) {
            if let Some(n) = n {
                *total = Some(total.unwrap_or(0).saturating_add(n));
            }
        }
        add(&mut self.input_tokens, more.input_tokens);
        add(&mut self.output_tokens, more.output_tokens);
        add(&mut self.cache_read_tokens, more.cache_read_tokens);
        add(&mut self.cache_write_tokens, more.cache_write_tokens);
        if let Some(cost) = more.cost_usd {
            self.cost_usd = Some(((self.cost_usd.unwrap_or(0.0) + cost) * 1e9).round() / 1e9);
        }
    }
}

/// Why a block from an adapter was refused. Each variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// The block is not a JSON object.
    #[error("a block must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A required field is absent.
    #[error("block `{block_type}`: missing field `{field}`")]
    MissingField {
        /// The block's `type`, or `?` when `type` itself is missing.
        block_type: String,
        /// Dotted path of the missing field.
        field: String,
    },
    /// A field is present with a value of the wrong type or an unknown enum value.
    #[error("block `{block_type}`: field `{field}`: {problem}")]
    InvalidField {
        /// The block's `type`.
        block_type: String,
        /// Dotted path of the bad field (`entries[0].status`).
        field: String,
        /// What is wrong, from the decoder.
        problem: String,
    },
    /// `type` names no block type of this protocol version.
    #[error("unknown block type `{block_type}` (known: {})", BLOCK_TYPES.join(", "))]
    UnknownType {
        /// The unknown `type` value.
        block_type: String,
    },
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks one block an adapter streamed and decodes it.
///
/// Unknown extra fields are tolerated (and dropped); an unknown `type`, a missing
/// required field or a field of the wrong type is a [`BlockError`] naming the field.
/// A `seq` sent by the adapter is accepted here; the bridge overwrites it.
pub fn validate(value: Value) -> Result<Block, BlockError> {
    let Value::Object(mut map) = value else {
        return Err(BlockError::NotAnObject { found: json_type_name(&value) });
    };
    let block_type = match map.remove("type") {
        None => return Err(BlockError::MissingField { block_type: "?".into(), field: "type".into() }),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(BlockError::InvalidField {
                block_type: "?".into(),
                field: "type".into(),
                problem: format!("expected a string, found {}", json_type_name(&other)),
            });
        }
    };
    if !BLOCK_TYPES.contains(&block_type.as_str()) {
        return Err(BlockError::UnknownType { block_type });
    }
    let invalid = |field: &str, problem: String| BlockError::InvalidField {
        block_type: block_type.clone(),
        field: field.to_owned(),
        problem,
    };
    let ts = match map.remove("ts") {
        None => return Err(BlockError::MissingField { block_type, field: "ts".into() }),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(ts) if ts.is_finite() && ts >= 0.0 => ts,
            _ => return Err(invalid("ts", format!("expected non-negative Unix seconds, found {n}"))),
        },
        Some(other) => return Err(invalid("ts", format!("expected a number, found {}", json_type_name(&other)))),
    };
    let seq = match map.remove("seq") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| invalid("seq", format!("expected an unsigned integer, found {v}")))?),
    };
    let meta = match map.remove("_meta") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => return Err(invalid("_meta", format!("expected an object, found {}", json_type_name(&other)))),
    };
    if block_type == "agent_info" {
        // Capabilities are flattened into agent_info, where the decoder loses the field
        // path; check the flags here so a bad one is named.
        for flag in CAP_FLAGS.iter().chain(SURFACE_FLAGS.iter()) {
            if let Some(v) = map.get(*flag).filter(|v| !v.is_boolean()) {
                return Err(invalid(flag, format!("expected true or false, found {}", json_type_name(v))));
            }
        }
    }
    let kind = match BlockKind::decode_body(&block_type, Value::Object(map)) {
        Some(Ok(kind)) => kind,
        Some(Err(e)) => return Err(field_error(block_type, &e)),
        None => return Err(BlockError::UnknownType { block_type }),
    };
    Ok(Block { seq, ts, meta, kind })
}

/// Turns a path-tracking serde error into a [`BlockError`] that names the field.
fn field_error(block_type: String, e: &serde_path_to_error::Error<serde_json::Error>) -> BlockError {
    let path = e.path().to_string();
    let problem = e.inner().to_string();
    let join = |name: &str| if path == "." { name.to_owned() } else { format!("{path}.{name}") };
    match missing_field_name(&problem) {
        Some(name) => BlockError::MissingField { block_type, field: join(name) },
        None => BlockError::InvalidField {
            block_type,
            field: if path == "." { "(body)".to_owned() } else { path },
            problem: strip_position(&problem),
        },
    }
}

/// serde reports a missing field as "missing field `name`" (serde::de::Error::missing_field).
pub(crate) fn missing_field_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

/// serde_json appends " at line L column C" to some errors; on a decoded Value it means nothing.
pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod usage_tests {
    use super::Usage;

    #[test]
    fn usage_adds_up_counts_that_were_reported_and_costs_without_float_noise() {
        let mut total = Usage::default();
        total.add(&Usage { input_tokens: Some(10), cost_usd: Some(0.1), ..Usage::default() });
        total.add(&Usage { input_tokens: Some(5), output_tokens: Some(2), cost_usd: Some(0.2), ..Usage::default() });
        assert_eq!(total.input_tokens, Some(15));
        assert_eq!(total.output_tokens, Some(2));
        assert_eq!(total.cache_read_tokens, None, "never reported, still absent");
        assert_eq!(total.cost_usd, Some(0.3));
        total.add(&Usage { input_tokens: Some(u64::MAX), ..Usage::default() });
        assert_eq!(total.input_tokens, Some(u64::MAX), "saturates");
    }
}

#[cfg(test)]
mod tests;
