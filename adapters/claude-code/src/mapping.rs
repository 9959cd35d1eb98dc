//! From Claude Code's stdout events to terminull blocks: a pure state machine.
//!
//! Why pure: the mapping is where the adapter's correctness lives (stable ids, exactly
//! one `done: true`, tool calls paired with their results, the single `session_end`),
//! and the CLI's event order has subtleties (one `assistant` event per content block,
//! arriving *before* that block's `content_block_stop`; no stop at all when a block is
//! interrupted). Keeping it free of I/O lets it be tested table-driven from captured
//! lines. [`Mapper::handle`] takes one parsed [`Event`] and returns the [`Action`]s the
//! adapter performs: blocks to emit, a permission to ask, a line to write back to the
//! CLI, the end of the turn.
//!
//! The rules (docs/adapters/claude-code.md has the full table):
//!
//! - **Streamed text/thinking**: `stream_event` `content_block_start` opens a block
//!   keyed by (message id, index); its id is `<message id>-<index>` (a suffix `~N` is
//!   added should that id already have been used in the session). Deltas are pushed into
//!   a [`TextStreamer`], and every delta is sent as one append (the new text and the
//!   offset it starts at), so the output stays linear in the message length however
//!   many deltas there are. `content_block_stop` sends the one `done: true` chunk.
//! - **`assistant` events** carry each block complete. A text/thinking block that was
//!   streamed is reconciled: what its full text adds is appended (the interrupted case),
//!   and a full text that rewrites the streamed one, should one ever, is sent as a
//!   snapshot. One that was not streamed is emitted whole with `done: true`. A
//!   `tool_use` block starts a `tool_call` (status `running`, title from
//!   `input.description`), nested under the call its `parent_tool_use_id` names.
//! - **Sub-agents**: a sub-agent's tool calls are nested (`parent_id`); its own
//!   text and thinking (events with a `parent_tool_use_id`) are not shown: the
//!   enclosing `Task` call's result carries the sub-agent's answer.
//! - **`user` events**: each `tool_result` closes its call (`done`, or `error` when
//!   `is_error`) followed by its `tool_result` block.
//! - **`result`** closes whatever is still open and ends the turn with usage.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use terminull_adapter_sdk::streamer::{StreamKind, TextStreamer};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{
    EndReason, ErrorBlock, PermissionOption, PermissionOptionKind, Progress, SessionEnd, StreamedText, Usage,
};
use terminull_protocol::ids::{BlockId, ToolCallId};
use terminull_protocol::text::prefix_within;

use crate::events::{
    ApiRetry, AssistantEvent, ContentBlock, ControlRequest, Delta, Event, ResultEvent, SseEvent, StreamEvent,
    SystemEvent, UserContent, UserEvent,
};

/// A tool's output longer than this is cut (the protocol caps a line at 8 MiB).
pub const MAX_TOOL_OUTPUT_BYTES: usize = 1024 * 1024;

/// A tool input whose JSON is longer than this is shown shortened (the CLI still gets
/// the whole input back when a permission is granted).
pub const MAX_TOOL_INPUT_BYTES: usize = 256 * 1024;

/// Why a running tool call is closed when the user interrupted the turn.
const INTERRUPTED: &str = "interrupted by the user";

/// Why a running tool call is closed when the turn ended without its result.
const ENDED_EARLY: &str = "the turn ended before the tool call finished";

/// What the adapter does for one event: the SDK's actions (`End` is the turn's last,
/// after every block it opened was closed), plus talking back to the CLI.
pub type Action = terminull_adapter_sdk::Action<CliStep>;

/// What only Claude Code's adapter does: answer the CLI on its stdin.
#[derive(Debug, Clone, PartialEq)]
pub enum CliStep {
    /// Ask the user, then write [`PermissionAsk::reply`] to the CLI.
    AskPermission(PermissionAsk),
    /// Write this JSON line to the CLI's stdin.
    Reply(Value),
}

/// A `can_use_tool` request of the CLI, waiting for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    /// The CLI's request id (echoed by the answer).
    pub request_id: String,
    /// The tool that wants to run.
    pub tool: String,
    /// Its input, passed back as `updatedInput` when allowed (shown to the user through
    /// [`display_input`]).
    pub input: Value,
    /// The `tool_call` this request gates.
    pub tool_call_id: Option<ToolCallId>,
    /// The CLI's `permission_suggestions` (a non-empty array), passed back as
    /// `updatedPermissions` on "always allow".
    pub suggestions: Option<Value>,
}

/// Option ids of a permission request.
pub mod option {
    /// Allow this call.
    pub const ALLOW: &str = "allow";
    /// Allow this call and apply the CLI's suggested rules.
    pub const ALWAYS: &str = "always";
    /// Refuse this call.
    pub const REJECT: &str = "reject";
}

/// The text the model gets back when the user refuses a tool call.
pub const DENIED_MESSAGE: &str = "The user denied this.";

impl PermissionAsk {
    /// The choices offered: allow once, allow always (only when the CLI suggested rules
    /// to remember), reject once.
    pub fn options(&self) -> Vec<PermissionOption> {
        let mut options = vec![PermissionOption {
            id: option::ALLOW.into(),
            label: "Allow".into(),
            kind: PermissionOptionKind::AllowOnce,
        }];
        if let Some(suggestions) = &self.suggestions {
            options.push(PermissionOption {
                id: option::ALWAYS.into(),
                label: always_label(suggestions),
                kind: PermissionOptionKind::AllowAlways,
            });
        }
        options.push(PermissionOption {
            id: option::REJECT.into(),
            label: "Reject".into(),
            kind: PermissionOptionKind::RejectOnce,
        });
        options
    }

    /// The `control_response` for the option the user chose (an unknown id rejects).
    pub fn reply(&self, option_id: &str) -> Value {
        let decision = match option_id {
            option::ALLOW => json!({"behavior": "allow", "updatedInput": self.input}),
            option::ALWAYS => json!({
                "behavior": "allow",
                "updatedInput": self.input,
                "updatedPermissions": self.suggestions.clone().unwrap_or_else(|| json!([])),
            }),
            _ => json!({"behavior": "deny", "message": DENIED_MESSAGE}),
        };
        success_reply(&self.request_id, decision)
    }

    /// The `control_response` when the turn was interrupted while asking: deny, and
    /// tell the CLI to stop the turn.
    pub fn interrupted_reply(&self) -> Value {
        success_reply(&self.request_id, json!({"behavior": "deny", "message": DENIED_MESSAGE, "interrupt": true}))
    }
}

/// "Always allow", with what the CLI would remember when that is simple to say.
fn always_label(suggestions: &Value) -> String {
    let described: Vec<String> = suggestions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| match s.get("type").and_then(Value::as_str)? {
            "setMode" => Some(format!("switch to {} mode", s.get("mode")?.as_str()?)),
            "addRules" => {
                let rules: Vec<String> = s
                    .get("rules")?
                    .as_array()?
                    .iter()
                    .filter_map(|r| {
                        let tool = r.get("toolName")?.as_str()?;
                        Some(match r.get("ruleContent").and_then(Value::as_str) {
                            Some(content) => format!("{tool}({content})"),
                            None => tool.to_owned(),
                        })
                    })
                    .collect();
                (!rules.is_empty()).then(|| format!("allow {}", rules.join(", ")))
            }
            "addDirectories" => {
                let dirs: Vec<&str> = s.get("directories")?.as_array()?.iter().filter_map(Value::as_str).collect();
                (!dirs.is_empty()).then(|| format!("add {}", dirs.join(", ")))
            }
            _ => None,
        })
        .collect();
    if described.is_empty() { "Always allow".to_owned() } else { format!("Always allow ({})", described.join("; ")) }
}

/// A successful `control_response` to the CLI's request `request_id`.
pub fn success_reply(request_id: &str, response: Value) -> Value {
    json!({"type": "control_response", "response": {"subtype": "success", "request_id": request_id, "response": response}})
}

/// An error `control_response` to the CLI's request `request_id`.
pub fn error_reply(request_id: &str, error: &str) -> Value {
    json!({"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": error}})
}

/// The adapter's `initialize` control request.
pub fn initialize_request(request_id: &str) -> Value {
    json!({"type": "control_request", "request_id": request_id, "request": {"subtype": "initialize", "hooks": null}})
}

/// The adapter's `interrupt` control request.
pub fn interrupt_request(request_id: &str) -> Value {
    json!({"type": "control_request", "request_id": request_id, "request": {"subtype": "interrupt"}})
}

/// A tool result's `content` as text: a string as is, content parts joined by
/// newlines (an image part becomes `[image]`), cut to [`MAX_TOOL_OUTPUT_BYTES`].
pub fn tool_output(content: &Value) -> String {
    let text = match content {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => part.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
                Some(other) => format!("[{other}]"),
                None => part.as_str().map_or_else(|| part.to_string(), str::to_owned),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    };
    truncate(text, MAX_TOOL_OUTPUT_BYTES)
}

/// A tool input as shown in `tool_call` and `permission_request` blocks: as is, or,
/// when its JSON exceeds [`MAX_TOOL_INPUT_BYTES`], each long string cut so it fits.
pub fn display_input(input: &Value) -> Value {
    let size = serde_json::to_string(input).map_or(0, |s| s.len());
    if size <= MAX_TOOL_INPUT_BYTES {
        return input.clone();
    }
    fn shorten(value: &Value, max: usize) -> Value {
        match value {
            Value::String(s) => Value::String(truncate(s.clone(), max)),
            Value::Array(items) => Value::Array(items.iter().map(|v| shorten(v, max)).collect()),
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), shorten(v, max))).collect()),
            other => other.clone(),
        }
    }
    let shortened = shorten(input, 16 * 1024);
    if serde_json::to_string(&shortened).map_or(usize::MAX, |s| s.len()) <= MAX_TOOL_INPUT_BYTES {
        shortened
    } else {
        json!({"truncated": format!("the tool input is {size} bytes of JSON; not shown")})
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, saying how much was cut.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let cut = prefix_within(&text, max).len();
    text.truncate(cut);
    text.push_str(&format!("\n… [output truncated: {} of {total} bytes shown]", cut));
    text
}

/// One text/thinking block of the current turn, keyed by (message id, index).
#[derive(Debug)]
enum BlockState {
    Open(OpenBlock),
    Closed,
}

#[derive(Debug)]
struct OpenBlock {
    streamer: TextStreamer,
    /// True once a chunk of this id was sent (so its `done: true` must follow).
    sent_any: bool,
}

impl OpenBlock {
    /// Pushes a delta; returns its append (nothing for an empty delta).
    fn push(&mut self, delta: &str) -> Option<BlockKind> {
        if delta.is_empty() {
            return None;
        }
        let chunk = self.streamer.push(delta);
        Some(self.sent(chunk))
    }

    /// Brings the text to the complete one from an `assistant` event: an append of what
    /// it adds, a snapshot should it differ, nothing when it matches.
    fn reconcile(&mut self, full: &str) -> Option<BlockKind> {
        let chunk = self.streamer.update(full).ok().flatten()?;
        Some(self.sent(chunk))
    }

    /// The `done: true` chunk, or nothing for a block that never had any text.
    fn finish(mut self) -> Option<BlockKind> {
        if !self.sent_any && self.streamer.text().is_empty() {
            return None;
        }
        self.streamer.finish()
    }

    fn sent(&mut self, chunk: BlockKind) -> BlockKind {
        self.sent_any = true;
        chunk
    }
}

/// The `api_retry` progress of the current turn.
#[derive(Debug)]
struct Retry {
    id: BlockId,
    what: String,
    attempt: u64,
}

/// The mapping's state for one session (see the [module documentation](self)).
#[derive(Debug)]
pub struct Mapper {
    session_id: String,
    model: Option<String>,
    /// Tool calls of the whole session (ids are never reused).
    tools: ToolCallTracker,
    /// The CLI's `tool_use` id → the `tool_call` id last sent for it.
    tool_ids: HashMap<String, ToolCallId>,
    /// The CLI's `tool_use` ids started this turn.
    turn_tools: HashSet<String>,
    /// Every text/thinking id and tool call id used in the session.
    used_ids: HashSet<String>,
    /// Text/thinking blocks of the current turn.
    blocks: HashMap<(String, u64), BlockState>,
    /// Open blocks in the order they opened (for closing in order).
    open_order: Vec<(String, u64)>,
    /// Per message id, how many content blocks its `assistant` events carried so far.
    assistant_blocks: HashMap<String, u64>,
    /// The main thread's current message.
    message: Option<String>,
    retry: Option<Retry>,
    interrupted: bool,
    turn: u64,
    /// `total_cost_usd` of the last `result` of the current CLI process.
    cost_baseline: f64,
    totals: Usage,
}

impl Mapper {
    /// A mapper for the conversation `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        Mapper {
            session_id: session_id.into(),
            model: None,
            tools: ToolCallTracker::new(),
            tool_ids: HashMap::new(),
            turn_tools: HashSet::new(),
            used_ids: HashSet::new(),
            blocks: HashMap::new(),
            open_order: Vec::new(),
            assistant_blocks: HashMap::new(),
            message: None,
            retry: None,
            interrupted: false,
            turn: 0,
            cost_baseline: 0.0,
            totals: Usage::default(),
        }
    }

    /// The conversation's id as last reported by the CLI.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The model the CLI reported in its last `system/init`.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Token and cost totals of the session (sum of the turns' usage).
    pub fn session_usage(&self) -> Usage {
        self.totals.clone()
    }

    /// A new CLI process was started: its `total_cost_usd` counts from zero again.
    pub fn process_started(&mut self) {
        self.cost_baseline = 0.0;
    }

    /// A new turn begins.
    pub fn begin_turn(&mut self) {
        self.turn += 1;
        self.blocks.clear();
        self.open_order.clear();
        self.assistant_blocks.clear();
        self.turn_tools.clear();
        self.message = None;
        self.retry = None;
        self.interrupted = false;
    }

    /// The user interrupted the turn: the coming `result` ends it as `interrupted`.
    pub fn interrupt_requested(&mut self) {
        self.interrupted = true;
    }

    /// True once [`interrupt_requested`](Self::interrupt_requested) was called this turn.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted
    }

    /// Maps one event.
    pub fn handle(&mut self, event: Event) -> Vec<Action> {
        match event {
            Event::System(s) => self.on_system(s),
            Event::Stream(s) => self.on_stream(s),
            Event::Assistant(a) => self.on_assistant(a),
            Event::User(u) => self.on_user(u),
            Event::Result(r) => self.on_result(r),
            Event::ControlRequest(r) => self.on_control_request(r),
            Event::ControlResponse(r) => {
                tracing::debug!(request_id = %r.response.request_id, subtype = %r.response.subtype, "control response");
                Vec::new()
            }
            Event::ControlCancel { request_id } => {
                tracing::debug!(%request_id, "the CLI withdrew a request that is no longer pending");
                Vec::new()
            }
            Event::Unknown { kind } => {
                tracing::debug!(kind, "skipping an event of unknown type");
                Vec::new()
            }
            Event::Malformed { kind, error } => {
                tracing::warn!(kind, error, "skipping an event that does not have the expected shape");
                Vec::new()
            }
        }
    }

    /// Ends the turn without a `result` (the CLI died, or did not stop after an
    /// interrupt): closes everything open, then `error` (when given) and `session_end`.
    pub fn abort(&mut self, reason: EndReason, error: Option<ErrorBlock>) -> Vec<Action> {
        let why = if reason == EndReason::Interrupted { INTERRUPTED } else { ENDED_EARLY };
        let mut out = self.close_all(why, "the turn ended before the retry");
        let message = error.as_ref().map(|e| e.message.clone());
        out.extend(error.map(|e| Action::Emit(BlockKind::Error(e))));
        out.push(Action::End(SessionEnd { reason, usage: None, message }));
        out
    }

    fn on_system(&mut self, event: SystemEvent) -> Vec<Action> {
        match event {
            SystemEvent::Init { session_id, model } => {
                if model.is_some() {
                    self.model = model;
                }
                match session_id {
                    Some(id) if !id.is_empty() && id != self.session_id => {
                        tracing::info!(old = %self.session_id, new = %id, "the conversation id changed");
                        self.session_id = id.clone();
                        vec![Action::SessionId(id)]
                    }
                    _ => Vec::new(),
                }
            }
            SystemEvent::ApiRetry(r) => self.on_api_retry(r),
            SystemEvent::Other { subtype } => {
                tracing::trace!(subtype, "system event");
                Vec::new()
            }
        }
    }

    fn on_api_retry(&mut self, r: ApiRetry) -> Vec<Action> {
        let what = match (r.error_status, r.error.as_deref()) {
            (Some(status), Some(error)) => format!("API error {status} {error}"),
            (Some(status), None) => format!("API error {status}"),
            (None, Some(error)) => format!("API error: {error}"),
            (None, None) => "API error".to_owned(),
        };
        let attempt = r.attempt.unwrap_or(1);
        let message = match r.max_retries {
            Some(max) => format!("{what}, retrying (attempt {attempt} of {max})"),
            None => format!("{what}, retrying (attempt {attempt})"),
        };
        let turn = self.turn;
        let retry = self.retry.get_or_insert_with(|| Retry {
            id: BlockId::from(format!("api-retry-{}", r.uuid.clone().unwrap_or_else(|| turn.to_string()))),
            what: what.clone(),
            attempt,
        });
        retry.what = what;
        retry.attempt = attempt;
        vec![Action::Emit(BlockKind::Progress(Progress {
            id: retry.id.clone(),
            message,
            current: Some(attempt),
            total: r.max_retries,
            done: false,
        }))]
    }

    /// Closes the retry progress, if any, with `outcome` ("recovered", "gave up").
    fn close_retry(&mut self, outcome: &str) -> Option<Action> {
        let retry = self.retry.take()?;
        let retries = if retry.attempt == 1 { "1 retry".to_owned() } else { format!("{} retries", retry.attempt) };
        Some(Action::Emit(BlockKind::Progress(Progress {
            id: retry.id,
            message: format!("{}; {outcome} after {retries}", retry.what),
            current: Some(retry.attempt),
            total: None,
            done: true,
        })))
    }

    fn on_stream(&mut self, event: StreamEvent) -> Vec<Action> {
        if let Some(parent) = &event.parent_tool_use_id {
            tracing::trace!(parent, "skipping a sub-agent's stream event");
            return Vec::new();
        }
        match event.event {
            SseEvent::MessageStart { message } => {
                let mut out: Vec<Action> = self.close_retry("recovered").into_iter().collect();
                // A new message: anything left open of the previous one is complete.
                out.extend(self.close_open_blocks());
                self.message = Some(message.id);
                out
            }
            SseEvent::ContentBlockStart { index, content_block } => {
                let kind = match content_block {
                    ContentBlock::Text { .. } => StreamKind::Text,
                    ContentBlock::Thinking { .. } => StreamKind::Thinking,
                    _ => return Vec::new(),
                };
                let key = (self.current_message(), index);
                self.open(key, kind);
                Vec::new()
            }
            SseEvent::ContentBlockDelta { index, delta } => {
                let (kind, text) = match delta {
                    Delta::TextDelta { text } => (StreamKind::Text, text),
                    Delta::ThinkingDelta { thinking } => (StreamKind::Thinking, thinking),
                    _ => return Vec::new(),
                };
                let key = (self.current_message(), index);
                if !self.blocks.contains_key(&key) {
                    // content_block_start was not seen: open it now.
                    self.open(key.clone(), kind);
                }
                match self.blocks.get_mut(&key) {
                    Some(BlockState::Open(block)) => block.push(&text).map(Action::Emit).into_iter().collect(),
                    _ => Vec::new(),
                }
            }
            SseEvent::ContentBlockStop { index } => {
                let key = (self.current_message(), index);
                self.close(&key).map(Action::Emit).into_iter().collect()
            }
            SseEvent::MessageStop => self.close_open_blocks(),
            SseEvent::MessageDelta | SseEvent::Other => Vec::new(),
        }
    }

    fn current_message(&self) -> String {
        self.message.clone().unwrap_or_else(|| format!("turn-{}", self.turn))
    }

    /// Opens the text/thinking block `key`, unless it is already known this turn.
    fn open(&mut self, key: (String, u64), kind: StreamKind) {
        if self.blocks.contains_key(&key) {
            return;
        }
        let id = self.fresh_id(format!("{}-{}", key.0, key.1));
        let block = OpenBlock { streamer: TextStreamer::new(kind, id), sent_any: false };
        self.blocks.insert(key.clone(), BlockState::Open(block));
        self.open_order.push(key);
    }

    /// Closes the block `key` if open: its `done: true` chunk.
    fn close(&mut self, key: &(String, u64)) -> Option<BlockKind> {
        match self.blocks.get(key) {
            Some(BlockState::Open(_)) => {}
            _ => return None,
        }
        self.open_order.retain(|k| k != key);
        match self.blocks.insert(key.clone(), BlockState::Closed) {
            Some(BlockState::Open(block)) => block.finish(),
            _ => None,
        }
    }

    fn close_open_blocks(&mut self) -> Vec<Action> {
        let keys = std::mem::take(&mut self.open_order);
        keys.iter().filter_map(|key| self.close(key)).map(Action::Emit).collect()
    }

    /// `base`, or `base~N` when `base` was already used in this session.
    fn fresh_id(&mut self, base: String) -> String {
        let mut id = base.clone();
        let mut n = 1;
        while self.used_ids.contains(&id) {
            n += 1;
            id = format!("{base}~{n}");
        }
        self.used_ids.insert(id.clone());
        id
    }

    fn on_assistant(&mut self, event: AssistantEvent) -> Vec<Action> {
        let AssistantEvent { message, parent_tool_use_id, error } = event;
        let mut out = Vec::new();
        for block in message.content {
            let counter = self.assistant_blocks.entry(message.id.clone()).or_insert(0);
            let index = *counter;
            *counter += 1;
            match block {
                ContentBlock::ToolUse { id, name, input } => {
                    out.extend(self.start_tool(&id, name, input, parent_tool_use_id.as_deref()));
                }
                ContentBlock::Text { text } | ContentBlock::Thinking { thinking: text }
                    if parent_tool_use_id.is_some() =>
                {
                    tracing::trace!(len = text.len(), "skipping a sub-agent's text");
                }
                ContentBlock::Text { .. } | ContentBlock::Thinking { .. } if error.is_some() => {
                    tracing::debug!(?error, "skipping the CLI's synthetic error message; the result reports it");
                }
                ContentBlock::Text { text } => {
                    out.extend(self.complete_block(&message.id, index, StreamKind::Text, &text));
                }
                ContentBlock::Thinking { thinking } => {
                    out.extend(self.complete_block(&message.id, index, StreamKind::Thinking, &thinking));
                }
                ContentBlock::ToolResult { .. } | ContentBlock::Other => {}
            }
        }
        out
    }

    /// An `assistant` event's complete text/thinking block `index` of `message`.
    fn complete_block(&mut self, message: &str, index: u64, kind: StreamKind, text: &str) -> Vec<Action> {
        let mut key = (message.to_owned(), index);
        if !self.blocks.contains_key(&key) {
            // Fall back to the latest open block of this message and kind, should the
            // event order ever not line up with the stream's indexes.
            if let Some(open) = self.open_order.iter().rev().find(|k| {
                k.0 == message && matches!(self.blocks.get(*k), Some(BlockState::Open(b)) if b.streamer.kind() == kind)
            }) {
                key = open.clone();
            }
        }
        match self.blocks.get_mut(&key) {
            Some(BlockState::Open(block)) => block.reconcile(text).map(Action::Emit).into_iter().collect(),
            Some(BlockState::Closed) => Vec::new(),
            None if text.is_empty() => Vec::new(),
            None => {
                // Not streamed: the whole block at once.
                let id = BlockId::from(self.fresh_id(format!("{message}-{index}")));
                self.blocks.insert(key, BlockState::Closed);
                let body = StreamedText::snapshot(id, text, true);
                vec![Action::Emit(match kind {
                    StreamKind::Text => BlockKind::Text(body),
                    StreamKind::Thinking => BlockKind::Thinking(body),
                })]
            }
        }
    }

    /// Starts the tool call for the CLI's `tool_use_id`, unless it already started this
    /// turn (a permission request may start it before its `assistant` event).
    fn start_tool(&mut self, tool_use_id: &str, name: String, input: Value, parent: Option<&str>) -> Option<Action> {
        if !self.turn_tools.insert(tool_use_id.to_owned()) {
            return None;
        }
        let id = ToolCallId::from(self.fresh_id(tool_use_id.to_owned()));
        self.tool_ids.insert(tool_use_id.to_owned(), id.clone());
        let parent_id = parent.and_then(|p| self.tool_ids.get(p)).cloned();
        let title = input.get("description").and_then(Value::as_str).map(str::to_owned);
        match self.tools.start(id, name, display_input(&input), parent_id, title) {
            Ok(block) => Some(Action::Emit(block)),
            Err(e) => {
                tracing::warn!(tool_use_id, "cannot start the tool call: {e}");
                None
            }
        }
    }

    fn on_user(&mut self, event: UserEvent) -> Vec<Action> {
        let UserContent::Blocks(blocks) = event.message.content else { return Vec::new() };
        let mut out = Vec::new();
        for block in blocks {
            let ContentBlock::ToolResult { tool_use_id, content, is_error } = block else { continue };
            let Some(id) = self.tool_ids.get(&tool_use_id).cloned() else {
                tracing::debug!(tool_use_id, "a tool result for a call never seen");
                continue;
            };
            match self.tools.finish(id, tool_output(&content), is_error.unwrap_or(false)) {
                Ok(blocks) => out.extend(blocks.into_iter().map(Action::Emit)),
                Err(e) => tracing::debug!(tool_use_id, "ignoring a tool result: {e}"),
            }
        }
        out
    }

    fn on_control_request(&mut self, request: ControlRequest) -> Vec<Action> {
        let ControlRequest { request_id, request } = request;
        if request.subtype != "can_use_tool" {
            tracing::info!(subtype = %request.subtype, "answering an unsupported control request with an error");
            return vec![Action::Agent(CliStep::Reply(error_reply(&request_id, "not supported")))];
        }
        let tool = request.tool_name.unwrap_or_else(|| "tool".to_owned());
        let input = request.input.unwrap_or(Value::Null);
        let mut out = Vec::new();
        let tool_call_id = request.tool_use_id.map(|tool_use_id| {
            // Normally the assistant event started the call already; if not, start it
            // now so the request points at a card.
            out.extend(self.start_tool(&tool_use_id, tool.clone(), input.clone(), None));
            self.tool_ids[&tool_use_id].clone()
        });
        let suggestions = request.permission_suggestions.filter(|s| s.as_array().is_some_and(|a| !a.is_empty()));
        out.push(Action::Agent(CliStep::AskPermission(PermissionAsk {
            request_id,
            tool,
            input,
            tool_call_id,
            suggestions,
        })));
        out
    }

    fn on_result(&mut self, r: ResultEvent) -> Vec<Action> {
        let interrupted = self.interrupted && (r.is_error || r.subtype != "success");
        let why = if interrupted { INTERRUPTED } else { ENDED_EARLY };
        let failed = r.is_error && !interrupted;
        let mut out = self.close_all(why, if failed { "gave up" } else { "recovered" });
        let usage = self.turn_usage(&r);
        self.totals.add(&usage);
        let reason = if interrupted {
            EndReason::Interrupted
        } else if r.is_error {
            EndReason::Error
        } else {
            match r.stop_reason.as_deref() {
                Some("max_tokens") => EndReason::MaxTokens,
                Some("refusal") => EndReason::Refusal,
                _ => EndReason::Completed,
            }
        };
        let mut message = None;
        if reason == EndReason::Error {
            let text = r
                .result
                .clone()
                .filter(|t| !t.trim().is_empty())
                .or_else(|| (!r.errors.is_empty()).then(|| r.errors.join("; ")))
                .unwrap_or_else(|| format!("Claude Code ended the turn with `{}`", r.subtype));
            let api = r.api_error_status.is_some() || text.starts_with("API Error");
            out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                message: text.clone(),
                recoverable: true,
                code: Some(if api { "model_error" } else { "agent_error" }.to_owned()),
            })));
            message = Some(text);
        }
        out.push(Action::End(SessionEnd { reason, usage: Some(usage), message }));
        out
    }

    /// Closes the open text/thinking blocks, the running tool calls and the retry
    /// progress.
    fn close_all(&mut self, why: &str, retry_outcome: &str) -> Vec<Action> {
        let mut out = self.close_open_blocks();
        out.extend(self.tools.close_all(why).into_iter().map(Action::Emit));
        out.extend(self.close_retry(retry_outcome));
        out
    }

    /// This turn's usage: tokens from `result.usage`, cost as the growth of the
    /// process's cumulative `total_cost_usd`.
    fn turn_usage(&mut self, r: &ResultEvent) -> Usage {
        let tokens = r.usage.clone().unwrap_or_default();
        let cost_usd = r.total_cost_usd.map(|total| {
            // A total below the last one means the count started again.
            let turn = if total >= self.cost_baseline { total - self.cost_baseline } else { total };
            self.cost_baseline = total;
            (turn * 1e9).round() / 1e9
        });
        tokens.to_usage(cost_usd)
    }
}

#[cfg(test)]
mod tests;
