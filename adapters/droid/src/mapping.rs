//! From droid's stream-json events to terminull blocks: a pure state machine for one
//! turn.
//!
//! [`TurnMapper::on_event`] takes one parsed [`Event`] and returns the [`Action`]s it
//! causes, in order: blocks to stream, the agent session id to report, and the turn's
//! end. It does no I/O, so the adapter's behaviour on the wire is tested here from
//! captured `droid exec -o stream-json` lines.
//!
//! | droid event | blocks |
//! |---|---|
//! | `system` `init` | `session_id` notification when the id is new (every fork has a new one) |
//! | `message` user | nothing (the prompt, echoed) |
//! | `reasoning` | `thinking`, `done: true` (id `<prefix>-thinking-<message id>`) |
//! | `message` assistant | `text`, `done: true` (id `<prefix>-text-<message id>`) |
//! | `tool_call` | `tool_call` running (id `<prefix>-<call id>`, title from the `summary`, command or path) |
//! | `tool_result` | `tool_call` done / error + `tool_result` with `value` |
//! | `completion` | the `finalText` as `text` when no assistant message came; `session_end` completed with the usage |
//! | `error` | `error`, recoverable (code `model_error` from `agent_loop`, `agent_error` from `cli`) |
//! | end of output without `completion` | `session_end` error with the first error's message, or `error` (code `agent_exited`) with the exit status and stderr ([`TurnMapper::on_exit`]) |
//!
//! droid sends whole items (no token deltas), so every text and thinking block is one
//! `done: true` chunk. Before any `session_end` the mapper closes running tool calls as
//! `error` with a result, so the turn contract holds whatever droid printed. Everything
//! is bounded: text at [`MAX_TEXT_BYTES`], tool output at [`MAX_TOOL_OUTPUT_BYTES`],
//! tool input at [`MAX_INPUT_BYTES`], titles at [`MAX_TITLE_CHARS`].

use std::collections::HashSet;

use serde_json::{Value, json};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, ErrorBlock, SessionEnd, StreamedText, Usage};

use crate::events::{DroidUsage, Event};

/// Most bytes of one `text` or `thinking` block.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// Most bytes of one `tool_result` output.
pub const MAX_TOOL_OUTPUT_BYTES: usize = 256 * 1024;
/// Most bytes of a tool call's `input` once encoded as JSON.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// Most characters of a tool call's `title`.
pub const MAX_TITLE_CHARS: usize = 120;
/// Most bytes of an error message.
pub const MAX_ERROR_BYTES: usize = 16 * 1024;
/// Most block ids remembered per turn (to drop repeated items).
pub const MAX_TRACKED_IDS: usize = 65_536;

/// What the adapter must do for one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Stream this block.
    Emit(BlockKind),
    /// Report the agent's session id (the next turn continues it).
    SessionId(String),
    /// The turn's one `session_end`; everything open was closed before it. Always the
    /// last action.
    End(SessionEnd),
}

/// `text` cut to at most `max` bytes on a character boundary, with a note saying so.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… [truncated: {} bytes in all]", &text[..end], text.len())
}

fn bounded_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_owned(),
    }
}

fn bounded_input(value: Value) -> Value {
    let encoded = value.to_string();
    if encoded.len() <= MAX_INPUT_BYTES { value } else { json!({ "truncated": bounded(&encoded, MAX_INPUT_BYTES) }) }
}

/// A short title for a tool call: droid's own `summary` (its `Execute` tool requires
/// one), else the command, path or pattern it works on.
pub fn tool_title(parameters: &Value) -> Option<String> {
    ["summary", "command", "file_path", "path", "pattern", "query", "url"]
        .iter()
        .find_map(|key| parameters.get(*key).and_then(Value::as_str))
        .map(|s| bounded_line(s, MAX_TITLE_CHARS))
        .filter(|s| !s.is_empty())
}

/// The run's usage in terminull's terms (droid reports no cost).
pub fn usage_of(u: &DroidUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_input_tokens,
        cache_write_tokens: u.cache_creation_input_tokens,
        cost_usd: None,
    }
}

/// Adds `more` to `total` (a field stays absent until something reports it).
pub fn add_usage(total: &mut Usage, more: &Usage) {
    let add = |a: &mut Option<u64>, b: Option<u64>| {
        if let Some(b) = b {
            *a = Some(a.unwrap_or(0).saturating_add(b));
        }
    };
    add(&mut total.input_tokens, more.input_tokens);
    add(&mut total.output_tokens, more.output_tokens);
    add(&mut total.cache_read_tokens, more.cache_read_tokens);
    add(&mut total.cache_write_tokens, more.cache_write_tokens);
    if let Some(cost) = more.cost_usd {
        total.cost_usd = Some(total.cost_usd.unwrap_or(0.0) + cost);
    }
}

/// The state of one turn (one `droid exec` process). Create one per process.
#[derive(Debug)]
pub struct TurnMapper {
    prefix: String,
    session_id: Option<String>,
    started: bool,
    tools: ToolCallTracker,
    /// Text and thinking block ids already sent (repeats are dropped).
    sent: HashSet<String>,
    texts: usize,
    first_error: Option<String>,
    /// True once droid reported an error of the `exec` command itself (`source: cli`),
    /// its last word before it exits.
    failed: bool,
    ended: bool,
}

impl TurnMapper {
    /// A mapper for one turn. `prefix` makes the turn's ids unique (mint it with the
    /// SDK's `mint_id`); `session_id` is the session already known (so resuming it does
    /// not report it again).
    pub fn new(prefix: impl Into<String>, session_id: Option<String>) -> Self {
        TurnMapper {
            prefix: prefix.into(),
            session_id,
            started: false,
            tools: ToolCallTracker::new(),
            sent: HashSet::new(),
            texts: 0,
            first_error: None,
            failed: false,
            ended: false,
        }
    }

    /// True once droid printed anything this turn (its `init` comes first): a run that
    /// never started is a failed resume or a refused command line.
    pub fn started(&self) -> bool {
        self.started
    }

    /// True once the turn ended; later events produce nothing.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// True once droid reported that the exec command failed (an `error` with
    /// `source: cli`): nothing but its slow shutdown follows.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The session id as known now.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The actions for one event.
    pub fn on_event(&mut self, event: Event) -> Vec<Action> {
        self.started = true;
        if self.ended {
            tracing::debug!(?event, "droid event after the turn ended; ignored");
            return Vec::new();
        }
        let mut out = Vec::new();
        match event {
            Event::Init { session_id, model } => {
                tracing::debug!(?model, %session_id, "droid run started");
                if !session_id.is_empty() && self.session_id.as_deref() != Some(session_id.as_str()) {
                    self.session_id = Some(session_id.clone());
                    out.push(Action::SessionId(session_id));
                }
            }
            Event::UserMessage => {}
            Event::AssistantMessage { id, text } => {
                if let Some(block) = self.whole("text", &id, &text) {
                    self.texts += 1;
                    out.push(Action::Emit(block));
                }
            }
            Event::Reasoning { id, text } => out.extend(self.whole("thinking", &id, &text).map(Action::Emit)),
            Event::ToolCall { id, name, parameters } => {
                let title = tool_title(&parameters);
                match self.tools.start(self.tool_id(&id), name, bounded_input(parameters), None, title) {
                    Ok(block) => out.push(Action::Emit(block)),
                    Err(e) => tracing::debug!("{e}; ignored"),
                }
            }
            Event::ToolResult { id, name, output, is_error } => {
                let block_id = self.tool_id(&id);
                if !self.tools.is_running(&block_id.clone().into())
                    && let Ok(block) = self.tools.start(block_id.clone(), name, Value::Null, None, None)
                {
                    out.push(Action::Emit(block));
                }
                match self.tools.finish(block_id, bounded(&output, MAX_TOOL_OUTPUT_BYTES), is_error) {
                    Ok(blocks) => out.extend(blocks.into_iter().map(Action::Emit)),
                    Err(e) => tracing::debug!("{e}; ignored"),
                }
            }
            Event::Completion { final_text, usage, session_id } => {
                if let Some(id) = session_id.filter(|id| !id.is_empty() && self.session_id.as_ref() != Some(id)) {
                    self.session_id = Some(id.clone());
                    out.push(Action::SessionId(id));
                }
                if self.texts == 0
                    && let Some(block) = self.whole("text", "final", &final_text)
                {
                    out.push(Action::Emit(block));
                }
                self.close_open("the turn ended before the tool call finished", &mut out);
                self.end(EndReason::Completed, usage.as_ref().map(usage_of), None, &mut out);
            }
            Event::Error { source, message } => {
                let message = if message.trim().is_empty() { format!("droid reported an error ({source})") } else { message };
                let message = bounded(&message, MAX_ERROR_BYTES);
                let code = if source == "agent_loop" { "model_error" } else { "agent_error" };
                self.failed |= source == "cli";
                self.first_error.get_or_insert_with(|| message.clone());
                out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                    message,
                    recoverable: true,
                    code: Some(code.to_owned()),
                })));
            }
            Event::Ignored { what } => tracing::debug!(what, "droid event ignored"),
            Event::Unknown { event_type } => tracing::debug!(event_type, "unknown droid event; ignored"),
        }
        out
    }

    /// droid's output ended without `completion`: closes what is open, then
    /// `session_end` error with the first error droid reported or, when it reported
    /// none, an `error` (code `agent_exited`) with `detail` (exit status, stderr).
    pub fn on_exit(&mut self, detail: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("droid exited before the tool call finished", &mut out);
        let message = match self.first_error.clone() {
            Some(first) => first,
            None => {
                let message = bounded(detail, MAX_ERROR_BYTES);
                out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                    message: message.clone(),
                    recoverable: true,
                    code: Some("agent_exited".to_owned()),
                })));
                message
            }
        };
        self.end(EndReason::Error, None, Some(message), &mut out);
        out
    }

    /// The turn was interrupted (droid was killed): closes what is open and ends the
    /// turn `interrupted`.
    pub fn on_interrupted(&mut self) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("interrupted by the user", &mut out);
        self.end(EndReason::Interrupted, None, None, &mut out);
        out
    }

    fn tool_id(&self, droid_id: &str) -> String {
        format!("{}-{droid_id}", self.prefix)
    }

    /// A whole text or thinking block, once per id; nothing for empty text.
    fn whole(&mut self, kind: &str, id: &str, text: &str) -> Option<BlockKind> {
        if text.trim().is_empty() {
            return None;
        }
        let block_id = format!("{}-{kind}-{id}", self.prefix);
        if self.sent.contains(&block_id) || self.sent.len() >= MAX_TRACKED_IDS {
            tracing::debug!(%block_id, "repeated droid item; ignored");
            return None;
        }
        self.sent.insert(block_id.clone());
        let body = StreamedText { id: block_id.into(), text: bounded(text, MAX_TEXT_BYTES), done: true };
        Some(if kind == "thinking" { BlockKind::Thinking(body) } else { BlockKind::Text(body) })
    }

    fn close_open(&mut self, reason: &str, out: &mut Vec<Action>) {
        out.extend(self.tools.close_all(reason).into_iter().map(Action::Emit));
    }

    fn end(&mut self, reason: EndReason, usage: Option<Usage>, message: Option<String>, out: &mut Vec<Action>) {
        self.ended = true;
        out.push(Action::End(SessionEnd { reason, usage, message }));
    }
}
