//! From codex events to terminull blocks: a pure state machine for one turn.
//!
//! [`TurnMapper::on_event`] takes one parsed [`Event`] and returns the [`Action`]s it
//! causes, in order: blocks to stream, the agent session id to report, a file whose diff
//! must be read, and the turn's end. It does no I/O, so the adapter's whole behaviour on
//! the wire is tested here from captured `codex exec --json` lines.
//!
//! | codex event | blocks |
//! |---|---|
//! | `thread.started` | `session_id` notification, once per new thread id |
//! | `turn.started` | nothing |
//! | item `reasoning` | `thinking`, `done: true` on `item.completed` |
//! | item `agent_message` | `text`, `done: true` on `item.completed` |
//! | item `command_execution` | `tool_call` `shell` running → done/error, `tool_result` with the output |
//! | item `file_change` | `tool_call` `apply_patch` running, one `diff` per file, done/error, `tool_result` |
//! | item `mcp_tool_call` | `tool_call` `<server>.<tool>` → done/error, `tool_result` |
//! | item `web_search` | `tool_call` `web_search` → done, `tool_result` |
//! | item `todo_list` | `plan` (whenever the list changes) |
//! | item `error` | `error`, recoverable, code `agent_warning` |
//! | top-level `error` | `error`, recoverable, code `agent_error` (merged into the next `turn.failed` when it repeats the message) |
//! | `turn.completed` | `session_end` completed, with this turn's usage |
//! | `turn.failed` | `error` code `model_error`, `session_end` error |
//! | end of output without either | `error` code `agent_exited`, `session_end` error ([`TurnMapper::on_exit`]) |
//!
//! Codex's item ids restart at `item_0` in every process, so every block and tool-call id
//! is `<turn prefix>-<item id>`, the prefix minted once per turn. Before any
//! `session_end` the mapper closes what is still open (text and thinking get their
//! `done: true` chunk, running tool calls end as `error` with a result), so the turn
//! contract holds whatever codex printed.
//!
//! Everything is bounded: text and thinking at [`MAX_TEXT_BYTES`], tool outputs at
//! [`MAX_TOOL_OUTPUT_BYTES`], tool inputs at [`MAX_INPUT_BYTES`], titles at
//! [`MAX_TITLE_CHARS`], diffs per patch at [`MAX_DIFFS_PER_PATCH`], and the set of
//! finished item ids at [`MAX_TRACKED_IDS`].

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};
pub use terminull_adapter_sdk::bounds::bounded;
use terminull_adapter_sdk::bounds::{bounded_chars, bounded_input};
use terminull_adapter_sdk::per_turn::EventMapper;
use terminull_adapter_sdk::streamer::{StreamKind, TextStreamer};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{Diff, DiffChange, EndReason, Plan, PlanEntry, PlanStatus, SessionEnd, Usage};
use terminull_protocol::ids::ToolCallId;

use crate::events::{
    ChangeKind, CommandExecution, CommandStatus, Event, FileChange, Item, ItemDetails, ItemPhase, McpStatus,
    McpToolCall, PatchStatus, TodoList, TokenUsage,
};

/// The SDK's shared limits, used by this mapping.
pub use terminull_adapter_sdk::bounds::{
    MAX_INPUT_BYTES, MAX_TEXT_BYTES, MAX_TITLE_CHARS, MAX_TOOL_OUTPUT_BYTES, MAX_TRACKED_IDS,
};
/// Most `diff` blocks for one `file_change` item (the rest are listed in its result).
pub const MAX_DIFFS_PER_PATCH: usize = 100;
/// Most bytes of a changed file read for its `diff` block.
pub const MAX_DIFF_FILE_BYTES: u64 = 1024 * 1024;

/// What the adapter must do for one event: the SDK's actions, plus reading a changed
/// file for its `diff` block ([`diff_block`]); the turn's `session_end` is streamed once
/// codex has exited.
pub type Action = terminull_adapter_sdk::Action<DiffRequest>;

/// A `diff` block to build once the file has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRequest {
    /// The path as codex reported it (absolute, or relative to the session's cwd).
    pub path: String,
    /// What happened to the file.
    pub kind: ChangeKind,
    /// The `apply_patch` tool call that made the change.
    pub tool_call_id: ToolCallId,
}

/// The changed file as the adapter found it after the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// Its text (at most [`MAX_DIFF_FILE_BYTES`]).
    Text(String),
    /// It does not exist (deleted, or moved again since).
    Missing,
    /// It is larger than [`MAX_DIFF_FILE_BYTES`]; its size.
    TooLarge(u64),
    /// It is not UTF-8 text.
    Binary,
    /// It could not be read; why.
    Unreadable(String),
}

/// The `diff` block of one changed file.
///
/// Codex reports which files a patch touched but not their content, so the adapter reads
/// each file after the change:
/// - `add`: `replace` with `old_text: null` and the new text.
/// - `update`: `replace` with the new text; the old text is unknown, so `old_text` is
///   `null` too (a client shows the file as it is now).
/// - `delete`: a `unified` patch to `/dev/null` without hunks (the old text is gone).
/// - a file that cannot be shown (too large, binary, unreadable, already gone): a
///   `unified` patch with the two headers, no hunks.
pub fn diff_block(request: &DiffRequest, content: FileContent) -> BlockKind {
    let rel = request.path.trim_start_matches('/');
    let headers = |old: &str, new: &str| DiffChange::Unified { patch: format!("--- {old}\n+++ {new}\n") };
    let change = match (request.kind, content) {
        (ChangeKind::Delete, _) => headers(&format!("a/{rel}"), "/dev/null"),
        (ChangeKind::Add, FileContent::Text(new_text)) => DiffChange::Replace { old_text: None, new_text },
        (ChangeKind::Update | ChangeKind::Unknown, FileContent::Text(new_text)) => {
            DiffChange::Replace { old_text: None, new_text }
        }
        (ChangeKind::Add, _) => headers("/dev/null", &format!("b/{rel}")),
        (_, _) => headers(&format!("a/{rel}"), &format!("b/{rel}")),
    };
    BlockKind::Diff(Diff { path: request.path.clone(), change, tool_call_id: Some(request.tool_call_id.clone()) })
}

/// Why a file's content is not in its diff, for the `apply_patch` result; `None` when it is.
pub fn content_note(content: &FileContent) -> Option<String> {
    match content {
        FileContent::Text(_) => None,
        FileContent::Missing => Some("not found after the change".to_owned()),
        FileContent::TooLarge(size) => {
            Some(format!("content not shown: {size} bytes, over the {MAX_DIFF_FILE_BYTES}-byte limit"))
        }
        FileContent::Binary => Some("content not shown: not UTF-8 text".to_owned()),
        FileContent::Unreadable(why) => Some(format!("content not shown: {why}")),
    }
}

/// This turn's usage in terminull's terms: codex's `input_tokens` (cached ones included,
/// OpenAI's convention) and `output_tokens` (reasoning included) as they are,
/// `cached_input_tokens` as `cache_read_tokens`, `cache_write_input_tokens` as
/// `cache_write_tokens`. Codex reports no cost. Negative counts read as 0.
pub fn usage_of(t: &TokenUsage) -> Usage {
    let n = |v: Option<i64>| v.map(|v| u64::try_from(v).unwrap_or(0));
    Usage {
        input_tokens: n(t.input_tokens),
        output_tokens: n(t.output_tokens),
        cache_read_tokens: n(t.cached_input_tokens),
        cache_write_tokens: n(t.cache_write_input_tokens),
        cost_usd: None,
    }
}

/// The command a person would type: codex runs `/bin/bash -lc '<cmd>'`; the title shows
/// `<cmd>` (single-quote escapes undone), anything else as it is, cut to
/// [`MAX_TITLE_CHARS`].
pub fn command_title(command: &str) -> String {
    let inner = ["/bin/bash -lc ", "bash -lc ", "/bin/sh -lc ", "sh -lc ", "/bin/zsh -lc ", "zsh -lc "]
        .iter()
        .find_map(|p| command.strip_prefix(p))
        .and_then(|rest| rest.strip_prefix('\'')?.strip_suffix('\''))
        .map(|quoted| quoted.replace("'\\''", "'"));
    bounded_chars(inner.as_deref().unwrap_or(command).trim(), MAX_TITLE_CHARS)
}

/// The text of an MCP result: its text content blocks joined, other blocks named by
/// type, the structured content as JSON when there is no content.
fn mcp_output(call: &McpToolCall) -> String {
    if let Some(error) = &call.error {
        return error.message.clone();
    }
    let Some(result) = &call.result else { return String::new() };
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match (block.get("type").and_then(Value::as_str), block.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(text)) => text.to_owned(),
            (Some(other), _) => format!("[{other}]"),
            (None, _) => block.to_string(),
        })
        .collect();
    match (&parts[..], &result.structured_content) {
        ([], Some(structured)) => structured.to_string(),
        _ => parts.join("\n"),
    }
}

/// The state of one turn. Create one per turn with a fresh prefix.
#[derive(Debug)]
pub struct TurnMapper {
    prefix: String,
    thread_id: Option<String>,
    /// True once this turn's `thread.started` arrived.
    thread_started: bool,
    tools: ToolCallTracker,
    /// Open text/thinking streams by codex item id (ordered, so closing is deterministic).
    texts: BTreeMap<String, TextStreamer>,
    /// Item ids whose blocks are complete; later events for them are dropped.
    finished: HashSet<String>,
    last_plan: Option<Vec<PlanEntry>>,
    /// A top-level `error` held back one event, to merge it with a `turn.failed` that
    /// repeats it.
    pending_error: Option<String>,
    ended: bool,
}

impl TurnMapper {
    /// A mapper for one turn. `prefix` makes this turn's block ids unique (mint it with
    /// the SDK's `mint_id`); `thread_id` is the thread already known (resumed), so its
    /// `thread.started` is not reported again.
    pub fn new(prefix: impl Into<String>, thread_id: Option<String>) -> Self {
        Self {
            prefix: prefix.into(),
            thread_id,
            thread_started: false,
            tools: ToolCallTracker::new(),
            texts: BTreeMap::new(),
            finished: HashSet::new(),
            last_plan: None,
            pending_error: None,
            ended: false,
        }
    }

    /// The thread id as known now (from `thread.started`, or the one given at creation).
    pub fn thread_id(&self) -> Option<&str> {
        self.thread_id.as_deref()
    }

    /// True once codex printed `thread.started` in this turn (a resume that fails
    /// never gets that far).
    pub fn thread_started(&self) -> bool {
        self.thread_started
    }

    /// True once the turn ended (`turn.completed`, `turn.failed`, [`on_exit`](Self::on_exit)
    /// or [`on_interrupt`](Self::on_interrupt)); later events produce nothing.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn id(&self, item_id: &str) -> String {
        format!("{}-{item_id}", self.prefix)
    }

    /// The actions when codex's output ended without `turn.completed` or `turn.failed`
    /// (it exited, crashed or closed stdout): close what is open, an `error` block with
    /// `detail` (exit status and stderr tail), and `session_end` error.
    pub fn on_exit(&mut self, detail: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.flush_error(&mut out);
        self.close_open("codex exited before the tool call finished", &mut out);
        out.push(Action::agent_error("codex", detail, "agent_exited"));
        out.push(Action::End(SessionEnd {
            reason: EndReason::Error,
            usage: None,
            message: Some(bounded_chars(detail, 500)),
        }));
        self.ended = true;
        out
    }

    fn flush_error(&mut self, out: &mut Vec<Action>) {
        if let Some(message) = self.pending_error.take() {
            out.push(Action::agent_error("codex", &message, "agent_error"));
        }
    }

    fn close_open(&mut self, why: &str, out: &mut Vec<Action>) {
        close_open(&mut self.texts, &mut self.tools, why, out);
    }

    fn mark_finished(&mut self, item_id: String) {
        if self.finished.len() < MAX_TRACKED_IDS {
            self.finished.insert(item_id);
        } else {
            tracing::debug!("too many items in one turn; no longer remembering finished ones");
        }
    }

    fn on_item(&mut self, phase: ItemPhase, item: Item, out: &mut Vec<Action>) {
        if self.finished.contains(&item.id) {
            tracing::debug!(item_id = %item.id, ?phase, "event for a finished codex item; ignored");
            return;
        }
        let done = phase == ItemPhase::Completed;
        match item.details {
            ItemDetails::AgentMessage(t) => self.on_text(StreamKind::Text, &item.id, t.text, done, out),
            ItemDetails::Reasoning(t) => self.on_text(StreamKind::Thinking, &item.id, t.text, done, out),
            ItemDetails::CommandExecution(c) => self.on_command(&item.id, c, done, out),
            ItemDetails::FileChange(f) => self.on_file_change(&item.id, f, done, out),
            ItemDetails::McpToolCall(m) => self.on_mcp(&item.id, m, done, out),
            ItemDetails::WebSearch(w) => {
                let call_id = ToolCallId::from(self.id(&item.id));
                let title = (!w.query.is_empty()).then(|| bounded_chars(&w.query, MAX_TITLE_CHARS));
                self.start_tool(&call_id, "web_search", json!({ "query": w.query }), title, out);
                if done {
                    let output = format!("Searched the web for {:?}", bounded_chars(&w.query, MAX_TITLE_CHARS));
                    self.finish_tool(&call_id, output, false, out);
                }
            }
            ItemDetails::TodoList(list) => self.on_todo(list, out),
            ItemDetails::Error(e) => {
                out.push(Action::agent_error("codex", &e.message, "agent_warning"));
                self.mark_finished(item.id);
                return;
            }
            ItemDetails::Unknown { item_type } => {
                tracing::debug!(item_type, item_id = %item.id, "unknown codex item type; ignored");
                return;
            }
        }
        if done {
            self.mark_finished(item.id);
        }
    }

    fn on_text(&mut self, kind: StreamKind, item_id: &str, text: String, done: bool, out: &mut Vec<Action>) {
        let block_id = self.id(item_id);
        let streamer = self.texts.entry(item_id.to_owned()).or_insert_with(|| TextStreamer::new(kind, block_id));
        let text = bounded(&text, MAX_TEXT_BYTES);
        if !done {
            // Codex reports the whole text so far: what it adds is one append.
            if !text.is_empty() {
                match streamer.update(&text) {
                    Ok(chunk) => out.extend(chunk.map(Action::Emit)),
                    Err(e) => tracing::debug!("{e}"),
                }
            }
            return;
        }
        let mut streamer = self.texts.remove(item_id).expect("inserted above");
        let whole = if text.is_empty() { streamer.text().to_owned() } else { text };
        if whole.is_empty() {
            return;
        }
        out.extend(streamer.finish_with(&whole).map(Action::Emit));
    }

    fn start_tool(&mut self, id: &ToolCallId, name: &str, input: Value, title: Option<String>, out: &mut Vec<Action>) {
        if self.tools.is_running(id) {
            return;
        }
        match self.tools.start(id.clone(), name, bounded_input(input, MAX_INPUT_BYTES), None, title) {
            Ok(block) => out.push(Action::Emit(block)),
            Err(e) => tracing::debug!("{e}"),
        }
    }

    fn finish_tool(&mut self, id: &ToolCallId, output: String, is_error: bool, out: &mut Vec<Action>) {
        match self.tools.finish(id.clone(), bounded(&output, MAX_TOOL_OUTPUT_BYTES), is_error) {
            Ok(blocks) => out.extend(blocks.into_iter().map(Action::Emit)),
            Err(e) => tracing::debug!("{e}"),
        }
    }

    fn on_command(&mut self, item_id: &str, c: CommandExecution, done: bool, out: &mut Vec<Action>) {
        let call_id = ToolCallId::from(self.id(item_id));
        let title = Some(command_title(&c.command));
        self.start_tool(&call_id, "shell", json!({ "command": c.command }), title, out);
        if !done {
            return;
        }
        let failed = matches!(c.status, CommandStatus::Failed | CommandStatus::Declined);
        let is_error = failed || c.exit_code.is_some_and(|code| code != 0);
        let output = match (c.aggregated_output.is_empty(), c.status, c.exit_code) {
            (false, _, _) => c.aggregated_output,
            (true, CommandStatus::Declined, _) => "the command was declined".to_owned(),
            (true, _, Some(code)) if code != 0 => format!("exit code {code}"),
            (true, CommandStatus::Failed, _) => "the command failed".to_owned(),
            (true, _, _) => String::new(),
        };
        self.finish_tool(&call_id, output, is_error, out);
    }

    fn on_file_change(&mut self, item_id: &str, f: FileChange, done: bool, out: &mut Vec<Action>) {
        let call_id = ToolCallId::from(self.id(item_id));
        let changes: Vec<Value> = f.changes.iter().map(|c| json!({ "path": c.path, "kind": c.kind.verb() })).collect();
        let title = match &f.changes[..] {
            [one] => Some(bounded_chars(&format!("{} {}", one.kind.verb(), one.path), MAX_TITLE_CHARS)),
            [] => None,
            many => Some(format!("{} files", many.len())),
        };
        self.start_tool(&call_id, "apply_patch", json!({ "changes": changes }), title, out);
        let settled = done || !matches!(f.status, PatchStatus::InProgress);
        if !settled || !self.tools.is_running(&call_id) {
            return;
        }
        let applied = f.status == PatchStatus::Completed;
        if applied {
            for change in f.changes.iter().take(MAX_DIFFS_PER_PATCH) {
                out.push(Action::Agent(DiffRequest {
                    path: change.path.clone(),
                    kind: change.kind,
                    tool_call_id: call_id.clone(),
                }));
            }
        }
        let mut lines: Vec<String> = f.changes.iter().map(|c| format!("{} {}", c.kind.verb(), c.path)).collect();
        if applied && f.changes.len() > MAX_DIFFS_PER_PATCH {
            lines.push(format!("(diffs shown for the first {MAX_DIFFS_PER_PATCH} files only)"));
        }
        let status = match f.status {
            PatchStatus::Completed => "applied",
            PatchStatus::Failed => "failed to apply",
            PatchStatus::Declined => "declined",
            PatchStatus::InProgress | PatchStatus::Unknown => "ended in an unknown state",
        };
        lines.insert(0, format!("patch {status}"));
        self.finish_tool(&call_id, lines.join("\n"), !applied, out);
    }

    fn on_mcp(&mut self, item_id: &str, m: McpToolCall, done: bool, out: &mut Vec<Action>) {
        let call_id = ToolCallId::from(self.id(item_id));
        let name = format!("{}.{}", m.server, m.tool);
        self.start_tool(&call_id, &name, m.arguments.clone(), None, out);
        if !done {
            return;
        }
        let is_error = m.status == McpStatus::Failed || m.error.is_some();
        self.finish_tool(&call_id, mcp_output(&m), is_error, out);
    }

    fn on_todo(&mut self, list: TodoList, out: &mut Vec<Action>) {
        let entries: Vec<PlanEntry> = list
            .items
            .into_iter()
            .take(1000)
            .map(|e| PlanEntry {
                content: bounded(&e.text, 4096),
                status: if e.completed { PlanStatus::Completed } else { PlanStatus::Pending },
            })
            .collect();
        if self.last_plan.as_ref() != Some(&entries) {
            self.last_plan = Some(entries.clone());
            out.push(Action::Emit(BlockKind::Plan(Plan { entries })));
        }
    }
}

impl EventMapper for TurnMapper {
    type Event = Event;
    type Step = DiffRequest;

    /// The actions for one event.
    fn on_event(&mut self, event: Event) -> Vec<Action> {
        if self.ended {
            tracing::debug!(?event, "codex event after the turn ended; ignored");
            return Vec::new();
        }
        let mut out = Vec::new();
        if !matches!(event, Event::TurnFailed { .. }) {
            self.flush_error(&mut out);
        }
        match event {
            Event::ThreadStarted { thread_id } => {
                self.thread_started = true;
                if self.thread_id.as_deref() != Some(thread_id.as_str()) {
                    self.thread_id = Some(thread_id.clone());
                    out.push(Action::SessionId(thread_id));
                }
            }
            Event::TurnStarted => {}
            Event::TurnCompleted { usage } => {
                self.close_open("the turn ended before the tool call finished", &mut out);
                out.push(Action::End(SessionEnd {
                    reason: EndReason::Completed,
                    usage: Some(usage_of(&usage)),
                    message: None,
                }));
                self.ended = true;
            }
            Event::TurnFailed { message } => {
                let message =
                    if message.trim().is_empty() { "codex reported that the turn failed".into() } else { message };
                if self.pending_error.as_ref().is_some_and(|pending| pending != &message) {
                    self.flush_error(&mut out);
                }
                self.pending_error = None;
                self.close_open(&message, &mut out);
                out.push(Action::agent_error("codex", &message, "model_error"));
                out.push(Action::End(SessionEnd { reason: EndReason::Error, usage: None, message: Some(message) }));
                self.ended = true;
            }
            Event::Error { message } => self.pending_error = Some(message),
            Event::Item { phase, item } => self.on_item(phase, item, &mut out),
            Event::Unknown { event_type } => tracing::debug!(event_type, "unknown codex event; ignored"),
        }
        out
    }

    /// The actions when the user interrupted the turn: close what is open. The
    /// `session_end` (reason `interrupted`) is the SDK's, from the adapter's return value.
    fn on_interrupt(&mut self) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.flush_error(&mut out);
        self.close_open("interrupted", &mut out);
        self.ended = true;
        out
    }
}

/// Finishes the streamed messages that have text and closes the tool calls still open
/// (failed with `why`): what a turn that ends leaves behind, in either protocol.
pub(crate) fn close_open<D>(
    texts: &mut BTreeMap<String, TextStreamer>,
    tools: &mut ToolCallTracker,
    why: &str,
    out: &mut Vec<terminull_adapter_sdk::Action<D>>,
) {
    for (_, mut streamer) in std::mem::take(texts) {
        if !streamer.text().is_empty()
            && let Some(done) = streamer.finish()
        {
            out.push(terminull_adapter_sdk::Action::Emit(done));
        }
    }
    out.extend(tools.close_all(why).into_iter().map(terminull_adapter_sdk::Action::Emit));
}

#[cfg(test)]
mod tests;
