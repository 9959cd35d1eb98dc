//! The pure state machine from ACP `session/update`s, permission requests and prompt
//! results to terminull blocks. No I/O: the host feeds it what the agent said and
//! sends what it returns, so every rule here is tested with plain values.
//!
//! | ACP | blocks |
//! |---|---|
//! | `agent_message_chunk` | `text`: one append per chunk, under one id per message |
//! | `agent_thought_chunk` | `thinking`, likewise |
//! | `user_message_chunk` | nothing (the bridge already shows the user's message) |
//! | `tool_call`, `tool_call_update` | `tool_call` `running`; at `completed`/`failed` the call re-sent `done`/`error`, one `diff` per `diff` item (completed only), then `tool_result` |
//! | `plan` | `plan` (the whole plan) |
//! | `available_commands_update` | no block: kept as the agent's slash commands |
//! | `current_mode_update` | `progress` `Mode: <name>` (done) |
//! | `usage_update` | `session_summary` with the cost, when the cost is in USD |
//! | `session_info_update` | `session_summary` with the title |
//! | anything else | nothing (logged) |
//!
//! A message ends when another kind of content arrives (a thought, a tool call, a
//! plan) or its `messageId` changes; a new chunk then starts a new block id.

use std::collections::HashMap;

use serde_json::{Value, json};
use terminull_adapter_sdk::bounds;
use terminull_adapter_sdk::streamer::TextStreamer;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{
    CommandSource, Diff, DiffChange, EndReason, ErrorBlock, PermissionOption, Plan, PlanEntry, PlanStatus, Progress,
    SessionEnd, SessionSummary, SlashCommand, ToolCall, ToolResult, ToolStatus, Usage,
};
use terminull_protocol::ids::ToolCallId;

use crate::notice::{Notice, NoticeMatch, no_notice};
use crate::schema::{
    AvailableCommand, ContentChunk, PermissionParams, PlanUpdate, PromptResult, SessionUpdate, ToolCallFields,
    UsageUpdate, content_text,
};

/// Bounds on what one turn can make the host hold or send.
pub mod limits {
    /// One `text` / `thinking` block.
    pub const TEXT_BYTES: usize = 1 << 20;
    /// One `tool_result`, one `error` message.
    pub const OUTPUT_BYTES: usize = 256 * 1024;
    /// One `tool_call` input, as JSON.
    pub const INPUT_BYTES: usize = 64 * 1024;
    /// One tool call title.
    pub const TITLE_CHARS: usize = 200;
    /// One side of a `diff`.
    pub const DIFF_BYTES: usize = 1 << 20;
    /// `diff` blocks per tool call.
    pub const DIFFS_PER_CALL: usize = 100;
    /// Tool calls remembered per turn (more are shown but not tracked).
    pub const CALLS_PER_TURN: usize = 10_000;
    /// Plan entries, and bytes per entry.
    pub const PLAN_ENTRIES: usize = 1000;
    /// Bytes of one plan entry.
    pub const PLAN_ENTRY_BYTES: usize = 4096;
    /// Slash commands kept.
    pub const COMMANDS: usize = 500;
}

/// Rewrites one thought chunk given the thought so far (Gemini CLI prefixes every
/// chunk with `**subject**\n`); the default keeps it as it is.
pub type ChunkRewrite = fn(so_far: &str, chunk: &str) -> String;

/// Keeps a chunk unchanged.
pub fn keep_chunk(_: &str, chunk: &str) -> String {
    chunk.to_owned()
}

/// How a prompt ended, as the host observed it.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptEnd {
    /// The agent answered the prompt.
    Answered(PromptResult),
    /// The agent answered the prompt with a JSON-RPC error.
    Failed {
        /// The error's message (and data, when it says more).
        message: String,
    },
    /// The agent's process went away; `report` has its exit status and stderr tail.
    Exited {
        /// How it ended.
        report: String,
    },
    /// The agent did not end the turn after `session/cancel` and was killed.
    CancelTimedOut,
}

#[derive(Debug)]
struct OpenStream {
    message_id: Option<String>,
    streamer: TextStreamer,
    truncated: bool,
}

/// The mapping state of one session. See the [module documentation](self).
#[derive(Debug)]
pub struct Mapper {
    prefix: String,
    next_block: u64,
    text: Option<OpenStream>,
    thought: Option<OpenStream>,
    tools: HashMap<String, ToolState>,
    tool_order: Vec<String>,
    commands: Vec<SlashCommand>,
    mode_names: HashMap<String, String>,
    current_mode: Option<String>,
    rewrite_thought: ChunkRewrite,
    session_usage: Usage,
    /// Token counts the turn's message chunks carried (`_meta.usage`), summed.
    turn_usage: Option<Usage>,
    last_cost: Option<f64>,
    /// Recognises the agent's retry and failure notices in message text.
    message_notice: NoticeMatch,
    /// The turn's retry `progress`, while it is not done.
    retry: Option<Progress>,
    /// Retry notices this turn.
    retries: u64,
    /// The agent said it gave up on the model (its answer is that message).
    gave_up: Option<String>,
}

impl Mapper {
    /// A session's mapper; thought chunks go through `rewrite_thought`.
    pub fn new(rewrite_thought: ChunkRewrite) -> Self {
        Self {
            prefix: "acp".to_owned(),
            next_block: 0,
            text: None,
            thought: None,
            tools: HashMap::new(),
            tool_order: Vec::new(),
            commands: Vec::new(),
            mode_names: HashMap::new(),
            current_mode: None,
            rewrite_thought,
            session_usage: Usage::default(),
            turn_usage: None,
            last_cost: None,
            message_notice: no_notice,
            retry: None,
            retries: 0,
            gave_up: None,
        }
    }

    /// Message chunks that `message_notice` recognises are retry or failure notices,
    /// not text (see [`crate::notice`]).
    pub fn with_message_notices(mut self, message_notice: NoticeMatch) -> Self {
        self.message_notice = message_notice;
        self
    }

    /// Maps one notice of the running turn (from its message text or its stderr): a
    /// retry is the turn's `progress` (current = the failed attempt, total = the
    /// attempts when known), replaced at each retry; giving up makes the turn end in
    /// error with that message.
    pub fn notice(&mut self, notice: Notice) -> Vec<BlockKind> {
        let mut out = Vec::new();
        self.close_streams(&mut out);
        match notice {
            Notice::Retrying { attempt, total, why } => {
                self.retries += 1;
                let attempt = attempt.unwrap_or(self.retries);
                let of = total.map(|t| format!(" of {t}")).unwrap_or_default();
                let message = cut(&format!("Model call failed (attempt {attempt}{of}): {why}; retrying"), 2000);
                let id = self.retry.as_ref().map_or_else(|| format!("{}-retry", self.prefix), |p| p.id.to_string());
                let progress = Progress { id: id.into(), message, current: Some(attempt), total, done: false };
                out.push(BlockKind::Progress(progress.clone()));
                self.retry = Some(progress);
            }
            Notice::GaveUp(message) => {
                self.gave_up = Some(truncate(message, limits::OUTPUT_BYTES));
            }
        }
        out
    }

    /// Ends the retry `progress`, if one is open, saying how it ended.
    fn settle_retry(&mut self, message: String, out: &mut Vec<BlockKind>) {
        if let Some(mut progress) = self.retry.take() {
            progress.message = message;
            progress.done = true;
            out.push(BlockKind::Progress(progress));
        }
    }

    /// Starts a turn. `prefix` makes its block and tool-call ids unique in the session
    /// (the host mints one per turn; agents reuse their own tool-call ids across turns).
    pub fn begin_turn(&mut self, prefix: impl Into<String>) {
        self.prefix = prefix.into();
        self.next_block = 0;
        self.retry = None;
        self.retries = 0;
        self.gave_up = None;
        self.text = None;
        self.thought = None;
        self.tools.clear();
        self.tool_order.clear();
        self.turn_usage = None;
    }

    /// The agent's slash commands, as last advertised.
    pub fn commands(&self) -> Vec<SlashCommand> {
        self.commands.clone()
    }

    /// True once the agent has advertised slash commands.
    pub fn has_commands(&self) -> bool {
        !self.commands.is_empty()
    }

    /// The session's mode, as last reported.
    pub fn current_mode(&self) -> Option<&str> {
        self.current_mode.as_deref()
    }

    /// Learns the session's modes (from `session/new` or `session/load`): their names
    /// for the `Mode:` progress line, and the current one.
    pub fn set_modes(&mut self, modes: &crate::schema::SessionModes) {
        self.mode_names = modes.available_modes.iter().map(|m| (m.id.clone(), m.name.clone())).collect();
        if let Some(current) = &modes.current_mode_id {
            self.current_mode = Some(current.clone());
        }
    }

    /// Token totals of the session's turns so far, and the last cost reported.
    pub fn session_usage(&self) -> Usage {
        Usage { cost_usd: self.last_cost.or(self.session_usage.cost_usd), ..self.session_usage.clone() }
    }

    /// An update that arrived outside a turn (before the first, between two, or while
    /// a session is loaded): only what describes the session is kept; content
    /// (replayed history, stragglers of an ended turn) is dropped.
    pub fn outside_turn(&mut self, update: SessionUpdate) {
        match update {
            SessionUpdate::AvailableCommands(commands) => self.commands = slash_commands(commands),
            SessionUpdate::CurrentMode { mode_id } => self.current_mode = Some(mode_id),
            SessionUpdate::Usage(u) => {
                self.note_cost(&u);
            }
            other => tracing::debug!(?other, "an update outside a turn; not shown"),
        }
    }

    /// Maps one update of the running turn.
    pub fn update(&mut self, update: SessionUpdate) -> Vec<BlockKind> {
        let mut out = Vec::new();
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => self.chunk(false, chunk, &mut out),
            SessionUpdate::AgentThoughtChunk(chunk) => self.chunk(true, chunk, &mut out),
            SessionUpdate::UserMessageChunk(_) => {}
            SessionUpdate::ToolCall(fields) => {
                self.close_streams(&mut out);
                self.model_answered(&mut out);
                self.tool(fields, true, &mut out);
            }
            SessionUpdate::ToolCallUpdate(fields) => {
                self.close_streams(&mut out);
                self.tool(fields, false, &mut out);
            }
            SessionUpdate::Plan(plan) => {
                self.close_streams(&mut out);
                out.push(BlockKind::Plan(plan_block(plan)));
            }
            SessionUpdate::AvailableCommands(commands) => self.commands = slash_commands(commands),
            SessionUpdate::CurrentMode { mode_id } => {
                if self.current_mode.as_deref() != Some(mode_id.as_str()) {
                    let name = self.mode_names.get(&mode_id).cloned().unwrap_or_else(|| mode_id.clone());
                    let id = self.block_id("mode");
                    out.push(BlockKind::Progress(Progress {
                        id: id.into(),
                        message: format!("Mode: {name}"),
                        current: None,
                        total: None,
                        done: true,
                    }));
                    self.current_mode = Some(mode_id);
                }
            }
            SessionUpdate::Usage(u) => {
                if self.note_cost(&u) {
                    let usage = Usage { cost_usd: self.last_cost, ..Usage::default() };
                    out.push(BlockKind::SessionSummary(SessionSummary { title: None, usage: Some(usage) }));
                }
            }
            SessionUpdate::SessionInfo { title: Some(title) } => {
                out.push(BlockKind::SessionSummary(SessionSummary { title: Some(title), usage: None }));
            }
            SessionUpdate::SessionInfo { title: None } => {}
            SessionUpdate::Other(tag) => tracing::debug!(%tag, "an update this host does not show"),
            SessionUpdate::Malformed { tag, problem } => tracing::warn!(%tag, %problem, "skipping a malformed update"),
        }
        out
    }

    /// Applies what a `session/request_permission` says of a call already shown (its
    /// `toolCall` is a `tool_call_update`: Qwen Code announces a shell call with an
    /// empty input and the title `Shell`, and gives the command only here). Returns the
    /// call re-sent when that changed it. The status is not taken from the request: the
    /// call runs only once allowed.
    pub fn permission_update(&mut self, params: &PermissionParams) -> Vec<BlockKind> {
        let mut out = Vec::new();
        let fields = ToolCallFields { status: None, ..params.tool_call.clone() };
        if let Some(tool) = self.tools.get_mut(&fields.tool_call_id)
            && !tool.finished
            && tool.shown.is_some()
        {
            merge(tool, &fields, false);
            let call = tool_block(tool, ToolStatus::Running);
            if tool.shown.as_ref() != Some(&call) {
                tool.shown = Some(call.clone());
                out.push(BlockKind::ToolCall(call));
            }
        }
        out
    }

    /// Prepares the question for a `session/request_permission`.
    ///
    /// The request names a call by the agent's id. When no call of that id was shown,
    /// and exactly one call of the turn is open, the request is taken to be about that
    /// one (Hermes 0.19 asks about its edits under an id of its own, `edit-approval-N`).
    /// Otherwise nothing is emitted for the call: the request stands alone (Gemini CLI
    /// asks before it announces a call), and the call appears if and when the agent
    /// reports it.
    pub fn permission(&mut self, params: &PermissionParams) -> PermissionAsk {
        let fields = &params.tool_call;
        let acp_call_id = if self.tools.contains_key(&fields.tool_call_id) {
            fields.tool_call_id.clone()
        } else {
            let open: Vec<&String> = self
                .tool_order
                .iter()
                .filter(|id| self.tools.get(*id).is_some_and(|t| !t.finished && t.shown.is_some()))
                .collect();
            match open.as_slice() {
                [only] => (*only).clone(),
                _ => fields.tool_call_id.clone(),
            }
        };
        let known = self.tools.get(&acp_call_id);
        let name = fields
            .name
            .clone()
            .or_else(|| known.map(|t| t.name.clone()))
            .unwrap_or_else(|| tool_name(fields.name.as_deref(), fields.kind.as_deref()));
        let input = match fields.raw_input.clone().or_else(|| known.and_then(|t| t.raw_input.clone())) {
            Some(raw) => bounded_input(raw),
            None => permission_input(fields),
        };
        let options = params
            .options
            .iter()
            .filter_map(|o| {
                let kind = option_kind(o)?;
                Some(PermissionOption { id: o.option_id.clone(), label: o.name.clone(), kind })
            })
            .collect();
        PermissionAsk {
            tool: name,
            input,
            options,
            tool_call_id: known.and_then(|t| t.shown.as_ref().map(|s| s.id.clone())),
            acp_call_id,
        }
    }

    /// Records the user's answer: a refused call still open at the end of the turn is
    /// closed as refused.
    pub fn permission_answered(&mut self, ask: &PermissionAsk, answer: Option<&str>) {
        if ask.refuses(answer)
            && let Some(tool) = self.tools.get_mut(&ask.acp_call_id)
        {
            tool.refused = true;
        }
    }

    /// Ends the turn: closes what is open and returns the closing blocks, an `error`
    /// block when the turn failed, and the `session_end`. `interrupted` (the user asked
    /// to stop) makes the turn `interrupted` whatever the agent answered.
    pub fn end_turn(&mut self, end: PromptEnd, interrupted: bool) -> Vec<BlockKind> {
        // The prompt result's counts are the turn's; else what its chunks carried.
        let answered_usage = match &end {
            PromptEnd::Answered(result) => prompt_usage(result),
            _ => None,
        };
        let turn_usage = answered_usage.or_else(|| self.turn_usage.take());
        if let Some(u) = &turn_usage {
            self.session_usage.add(u);
        }
        let gave_up = self.gave_up.take();
        let (reason, usage, error) = match end {
            _ if interrupted => (EndReason::Interrupted, turn_usage, None),
            PromptEnd::Answered(result) => match (stop_reason(&result.stop_reason), gave_up) {
                ((EndReason::Completed, None), Some(message)) => {
                    (EndReason::Error, turn_usage, Some(error_block(message, "model_error")))
                }
                ((reason, error), _) => (reason, turn_usage, error),
            },
            PromptEnd::Failed { message } => {
                let error = error_block(truncate(message, limits::OUTPUT_BYTES), "agent_error");
                (EndReason::Error, turn_usage, Some(error))
            }
            PromptEnd::Exited { report } => (
                EndReason::Error,
                turn_usage,
                Some(error_block(
                    truncate(format!("the agent exited during the turn {report}"), limits::OUTPUT_BYTES),
                    "agent_exited",
                )),
            ),
            PromptEnd::CancelTimedOut => (EndReason::Interrupted, turn_usage, None),
        };
        let mut out = Vec::new();
        self.close_streams(&mut out);
        let retries = self.retries;
        let settled = match reason {
            EndReason::Error => format!("Model call failed {retries} time(s); the agent gave up"),
            _ => format!("Model call failed {retries} time(s); the turn ended"),
        };
        self.settle_retry(settled, &mut out);
        self.close_tools(reason, &mut out);
        let message = error.as_ref().map(|e| e.message.clone());
        if let Some(error) = error {
            out.push(BlockKind::Error(error));
        }
        out.push(BlockKind::SessionEnd(SessionEnd { reason, usage, message }));
        out
    }

    fn block_id(&mut self, what: &str) -> String {
        self.next_block += 1;
        format!("{}-{what}{}", self.prefix, self.next_block)
    }

    fn note_cost(&mut self, u: &UsageUpdate) -> bool {
        match &u.cost {
            Some(cost) if cost.currency.as_deref().is_some_and(|c| c.eq_ignore_ascii_case("USD")) => {
                let changed = cost.amount.is_some() && cost.amount != self.last_cost;
                if cost.amount.is_some() {
                    self.last_cost = cost.amount;
                }
                changed
            }
            _ => false,
        }
    }

    fn chunk(&mut self, thought: bool, chunk: ContentChunk, out: &mut Vec<BlockKind>) {
        if let Some(u) = chunk_usage(chunk.meta.as_ref()) {
            self.turn_usage.get_or_insert_with(Usage::default).add(&u);
        }
        // An empty chunk (Qwen Code's usage carrier) neither opens nor ends a block.
        let Some(text) = content_text(&chunk.content).filter(|t| !t.is_empty()) else { return };
        if !thought && let Some(notice) = (self.message_notice)(&text) {
            out.extend(self.notice(notice));
            return;
        }
        self.model_answered(out);
        // The other kind of stream ends here.
        let other = if thought { self.text.take() } else { self.thought.take() };
        if let Some(mut open) = other
            && let Some(done) = open.streamer.finish()
        {
            out.push(done);
        }
        let current = if thought { &self.thought } else { &self.text };
        let same_message = match (current.as_ref(), chunk.message_id.as_deref()) {
            (Some(open), Some(id)) => open.message_id.as_deref().is_none_or(|current| current == id),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let fresh = (!same_message).then(|| {
            self.next_block += 1;
            let id = format!("{}-{}{}", self.prefix, if thought { "thinking" } else { "text" }, self.next_block);
            let streamer = if thought { TextStreamer::new_thinking(id) } else { TextStreamer::new_text(id) };
            OpenStream { message_id: chunk.message_id.clone(), streamer, truncated: false }
        });
        let slot = if thought { &mut self.thought } else { &mut self.text };
        if let Some(fresh) = fresh
            && let Some(mut ended) = slot.replace(fresh)
        {
            out.extend(ended.streamer.finish());
        }
        let Some(open) = slot.as_mut() else { return };
        if open.message_id.is_none() {
            open.message_id = chunk.message_id;
        }
        if open.truncated {
            return;
        }
        let delta = if thought { (self.rewrite_thought)(open.streamer.text(), &text) } else { text };
        let room = limits::TEXT_BYTES.saturating_sub(open.streamer.text().len());
        let delta = if delta.len() > room {
            open.truncated = true;
            format!("{}\n… [truncated]", cut(&delta, room))
        } else {
            delta
        };
        if delta.is_empty() {
            return;
        }
        out.push(open.streamer.push(&delta));
    }

    /// The model produced something: a retry in progress is over.
    fn model_answered(&mut self, out: &mut Vec<BlockKind>) {
        if self.retry.is_some() {
            let retries = self.retries;
            self.settle_retry(format!("Model call succeeded after {retries} failed attempt(s)"), out);
        }
    }

    fn close_streams(&mut self, out: &mut Vec<BlockKind>) {
        for slot in [&mut self.thought, &mut self.text] {
            if let Some(mut open) = slot.take() {
                out.extend(open.streamer.finish());
            }
        }
    }

    fn tool(&mut self, fields: ToolCallFields, whole: bool, out: &mut Vec<BlockKind>) {
        let acp_id = fields.tool_call_id.clone();
        if acp_id.is_empty() {
            tracing::warn!("a tool call without an id; skipped");
            return;
        }
        if !self.tools.contains_key(&acp_id) {
            if self.tools.len() >= limits::CALLS_PER_TURN {
                tracing::warn!("too many tool calls in one turn; not tracking {acp_id}");
                return;
            }
            let block_id = ToolCallId::from(format!("{}-{acp_id}", self.prefix));
            self.tool_order.push(acp_id.clone());
            self.tools.insert(
                acp_id.clone(),
                ToolState {
                    block_id,
                    name: String::new(),
                    title: None,
                    kind: None,
                    raw_input: None,
                    locations: Vec::new(),
                    content: Vec::new(),
                    raw_output: None,
                    shown: None,
                    finished: false,
                    refused: false,
                },
            );
        }
        let Some(tool) = self.tools.get_mut(&acp_id) else { return };
        if tool.finished {
            tracing::debug!(%acp_id, "an update for a finished tool call; ignored");
            return;
        }
        merge(tool, &fields, whole);
        match fields.status.as_deref() {
            Some("completed") => finish_tool(tool, ToolStatus::Done, None, out),
            Some("failed") => finish_tool(tool, ToolStatus::Error, None, out),
            _ => {
                let call = tool_block(tool, ToolStatus::Running);
                if tool.shown.as_ref() != Some(&call) {
                    tool.shown = Some(call.clone());
                    out.push(BlockKind::ToolCall(call));
                }
            }
        }
    }

    fn close_tools(&mut self, reason: EndReason, out: &mut Vec<BlockKind>) {
        for acp_id in std::mem::take(&mut self.tool_order) {
            let Some(tool) = self.tools.get_mut(&acp_id) else { continue };
            if tool.finished || tool.shown.is_none() {
                continue;
            }
            let (status, note) = if tool.refused {
                (ToolStatus::Error, "The user refused this tool call.")
            } else if reason == EndReason::Completed {
                (ToolStatus::Done, "(the agent ended its turn without reporting this call's result)")
            } else {
                (ToolStatus::Error, "The turn ended before this tool call finished.")
            };
            finish_tool(tool, status, Some(note), out);
        }
    }
}

fn slash_commands(commands: Vec<AvailableCommand>) -> Vec<SlashCommand> {
    commands
        .into_iter()
        .filter_map(|c| {
            let name = c.name.trim().trim_start_matches('/').to_owned();
            (!name.is_empty()).then(|| SlashCommand {
                name,
                description: bounds::bounded_chars(c.description.lines().next().unwrap_or_default().trim(), 200),
                source: CommandSource::Agent,
            })
        })
        .take(limits::COMMANDS)
        .collect()
}

fn plan_block(plan: PlanUpdate) -> Plan {
    let entries = plan
        .entries
        .into_iter()
        .take(limits::PLAN_ENTRIES)
        .map(|e| PlanEntry {
            content: cut(&e.content, limits::PLAN_ENTRY_BYTES),
            status: match e.status.as_str() {
                "in_progress" => PlanStatus::InProgress,
                "completed" => PlanStatus::Completed,
                _ => PlanStatus::Pending,
            },
        })
        .collect();
    Plan { entries }
}

/// ACP `stopReason` → how the turn ended (and an error block when it is a failure).
pub fn stop_reason(stop: &str) -> (EndReason, Option<ErrorBlock>) {
    match stop {
        "end_turn" | "" => (EndReason::Completed, None),
        "max_tokens" => (EndReason::MaxTokens, None),
        "refusal" => (EndReason::Refusal, None),
        "cancelled" => (EndReason::Interrupted, None),
        "max_turn_requests" => (
            EndReason::Error,
            Some(error_block(
                "The agent stopped: it reached its limit of model requests for one turn (max_turn_requests).".into(),
                "max_turn_requests",
            )),
        ),
        other => {
            tracing::warn!(stop_reason = other, "an unknown stop reason; the turn counts as completed");
            (EndReason::Completed, None)
        }
    }
}

fn error_block(message: String, code: &str) -> ErrorBlock {
    ErrorBlock { message, recoverable: true, code: Some(code.to_owned()) }
}

fn bounded_input(value: Value) -> Value {
    let text = value.to_string();
    if text.len() <= limits::INPUT_BYTES { value } else { json!({"truncated": cut(&text, 1024)}) }
}

/// `s` cut to at most `max` bytes on a character boundary.
pub fn cut(s: &str, max: usize) -> String {
    bounds::cut(s, max).to_owned()
}

/// `s` bounded to `max` bytes, saying how long it was.
pub fn truncate(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    format!("{}… [truncated: {} bytes in all]", cut(&s, max), s.len())
}

mod permission;
mod tools;
mod usage;

pub use permission::PermissionAsk;
use permission::{location_paths, option_kind, permission_input};
use tools::{ToolState, finish_tool, merge, tool_block, tool_name};
pub use usage::{chunk_usage, prompt_usage};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod recorded_tests;
