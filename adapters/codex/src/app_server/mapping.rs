//! From `codex app-server` notifications to terminull blocks: a pure state machine for
//! one turn ([`AppMapper`]). It does no I/O; the driver ([`super::connection`]) feeds it
//! the decoded [`Notice`]s and carries out the actions.
//!
//! | notification | blocks |
//! |---|---|
//! | `item/agentMessage/delta` | `text` appends; `item/completed` closes it with the whole text |
//! | `item/reasoning/summaryTextDelta`, `…/textDelta` | `thinking` appends (summary parts separated by a blank line); closed on `item/completed` |
//! | item `commandExecution` | `tool_call` `shell` running at `item/started`; at `item/completed` `done` (or `error`: exit code ≠ 0, `failed`, `declined`) and `tool_result` with the output |
//! | item `fileChange` | `tool_call` `apply_patch` running; at completion one `diff` per file (when applied), `done`/`error`, `tool_result` listing the files |
//! | item `mcpToolCall` | `tool_call` `<server>.<tool>`, `tool_result` with the text content or the error |
//! | item `webSearch` | `tool_call` `web_search`, `tool_result` |
//! | `thread/tokenUsage/updated` | the `last` call's counts are added to the turn's usage |
//! | `warning` | `error`, recoverable, code `agent_warning` |
//! | `error` with `willRetry` | `progress` saying codex retries, and why |
//! | `error` | `error` code `agent_error` (merged into a `failed` turn's `model_error` when it repeats its message) |
//! | `turn/completed` | `session_end`: `completed`, `interrupted`, or `error` (after an `error` block `model_error`), with the turn's usage |
//!
//! Ids: item ids are unique within a thread but a resumed thread in a new process could
//! reuse them, so every block and tool-call id is `<turn prefix>-<item id>`.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};
use terminull_adapter_sdk::bounds::{bounded, bounded_chars, bounded_input};
use terminull_adapter_sdk::streamer::{StreamKind, TextStreamer};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{Diff, DiffChange, EndReason, Progress, SessionEnd, Usage};
use terminull_protocol::ids::ToolCallId;

use super::wire::{FileUpdate, Item, ItemStatus, Notice, TokenCounts, TurnInfo, TurnStatus};
use crate::mapping::{
    MAX_DIFFS_PER_PATCH, MAX_INPUT_BYTES, MAX_TEXT_BYTES, MAX_TITLE_CHARS, MAX_TOOL_OUTPUT_BYTES, MAX_TRACKED_IDS,
    command_title,
};

/// What the driver does for one notification.
pub type Action = terminull_adapter_sdk::Action;

/// The state of one turn. Create one per turn with a fresh prefix.
#[derive(Debug)]
pub struct AppMapper {
    prefix: String,
    tools: ToolCallTracker,
    /// Open text/thinking streams by item id (ordered, so closing is deterministic).
    texts: BTreeMap<String, TextStreamer>,
    /// Output of running commands, by item id (bounded), for a completion without
    /// `aggregatedOutput`.
    outputs: HashMap<String, String>,
    /// Items whose blocks are complete; later notifications for them are dropped.
    finished: HashSet<String>,
    /// The turn's usage so far (the sum of every model call's `last`).
    usage: Option<Usage>,
    /// An `error` held back one notification, to merge it with a failed turn that repeats it.
    pending_error: Option<String>,
    retries: u32,
    ended: bool,
}

fn usage_of(t: TokenCounts) -> Usage {
    let n = |v: i64| Some(u64::try_from(v).unwrap_or(0));
    Usage {
        input_tokens: n(t.input_tokens),
        output_tokens: n(t.output_tokens),
        cache_read_tokens: n(t.cached_input_tokens),
        cache_write_tokens: n(t.cache_write_input_tokens),
        cost_usd: None,
    }
}

/// The `diff` block of one file of a patch. Codex gives, per file, the new content
/// (`add`), the old content (`delete`) or a unified diff of the hunks (`update`).
pub fn patch_diff(change: &FileUpdate, tool_call_id: &ToolCallId) -> BlockKind {
    let rel = change.path.trim_start_matches('/');
    let diff = bounded(&change.diff, MAX_TOOL_OUTPUT_BYTES);
    let change_kind = match change.kind.kind.as_str() {
        "add" => DiffChange::Replace { old_text: None, new_text: diff },
        "delete" => {
            let lines: Vec<&str> = diff.lines().collect();
            let mut patch = format!("--- a/{rel}\n+++ /dev/null\n");
            if !lines.is_empty() {
                patch.push_str(&format!("@@ -1,{} +0,0 @@\n", lines.len()));
                for line in lines {
                    patch.push('-');
                    patch.push_str(line);
                    patch.push('\n');
                }
            }
            DiffChange::Unified { patch }
        }
        _ if diff.starts_with("--- ") || diff.starts_with("diff ") => DiffChange::Unified { patch: diff },
        _ => {
            let new = change.kind.move_path.as_deref().unwrap_or(&change.path).trim_start_matches('/');
            DiffChange::Unified { patch: format!("--- a/{rel}\n+++ b/{new}\n{diff}") }
        }
    };
    BlockKind::Diff(Diff { path: change.path.clone(), change: change_kind, tool_call_id: Some(tool_call_id.clone()) })
}

fn verb(change: &FileUpdate) -> &str {
    match change.kind.kind.as_str() {
        "add" | "delete" | "update" => &change.kind.kind,
        _ => "change",
    }
}

/// The text of an MCP result: its text content blocks joined, other blocks named by
/// type, the structured content as JSON when there is no content; or the error.
fn mcp_output(result: Option<&Value>, error: Option<&Value>) -> String {
    if let Some(error) = error.filter(|e| !e.is_null()) {
        return error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
    }
    let Some(result) = result else { return String::new() };
    let content = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let parts: Vec<String> = content
        .iter()
        .map(|block| match (block.get("type").and_then(Value::as_str), block.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(text)) => text.to_owned(),
            (Some(other), _) => format!("[{other}]"),
            (None, _) => block.to_string(),
        })
        .collect();
    match (&parts[..], result.get("structuredContent").filter(|s| !s.is_null())) {
        ([], Some(structured)) => structured.to_string(),
        _ => parts.join("\n"),
    }
}

impl AppMapper {
    /// A mapper for one turn; `prefix` makes its block ids unique (mint it with the
    /// SDK's `mint_id`).
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            tools: ToolCallTracker::new(),
            texts: BTreeMap::new(),
            outputs: HashMap::new(),
            finished: HashSet::new(),
            usage: None,
            pending_error: None,
            retries: 0,
            ended: false,
        }
    }

    /// The tool-call id of an item (a command or patch an approval request is about).
    pub fn call_id(&self, item_id: &str) -> ToolCallId {
        ToolCallId::from(format!("{}-{item_id}", self.prefix))
    }

    /// Whether the item's tool call is shown running (a permission request then names it).
    pub fn is_running(&self, item_id: &str) -> bool {
        self.tools.is_running(&self.call_id(item_id))
    }

    /// True once the turn ended; later notifications produce nothing.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The actions for one notification.
    pub fn on_notice(&mut self, notice: Notice) -> Vec<Action> {
        if self.ended {
            tracing::debug!(?notice, "codex notification after the turn ended; ignored");
            return Vec::new();
        }
        let mut out = Vec::new();
        if !matches!(notice, Notice::TurnCompleted(_) | Notice::Unknown(_) | Notice::TokenUsage(_)) {
            self.flush_error(&mut out);
        }
        match notice {
            Notice::TurnStarted(_) | Notice::RequestResolved(_) | Notice::Unknown(_) => {}
            Notice::ItemStarted(item) => self.on_item(item, false, &mut out),
            Notice::ItemCompleted(item) => self.on_item(item, true, &mut out),
            Notice::TextDelta { item_id, delta } => self.push(StreamKind::Text, &item_id, &delta, &mut out),
            Notice::ReasoningDelta { item_id, delta } => self.push(StreamKind::Thinking, &item_id, &delta, &mut out),
            Notice::ReasoningPart { item_id } => {
                if self.texts.get(&item_id).is_some_and(|s| !s.text().is_empty()) {
                    self.push(StreamKind::Thinking, &item_id, "\n\n", &mut out);
                }
            }
            Notice::CommandOutput { item_id, delta } => {
                let held = self.outputs.entry(item_id).or_default();
                if held.len() < MAX_TOOL_OUTPUT_BYTES {
                    held.push_str(&bounded(&delta, MAX_TOOL_OUTPUT_BYTES - held.len()));
                }
            }
            Notice::TokenUsage(counts) => {
                self.usage.get_or_insert_with(Usage::default).add(&usage_of(counts));
            }
            Notice::Warning(message) => out.push(Action::agent_error("codex", &message, "agent_warning")),
            Notice::Error { message, will_retry: true } => {
                self.retries += 1;
                let progress = Progress {
                    id: format!("{}-retry-{}", self.prefix, self.retries).into(),
                    message: bounded_chars(&format!("Codex is retrying (attempt {}): {message}", self.retries), 500),
                    current: None,
                    total: None,
                    done: true,
                };
                out.push(Action::Emit(BlockKind::Progress(progress)));
            }
            Notice::Error { message, will_retry: false } => self.pending_error = Some(message),
            Notice::TurnCompleted(turn) => self.on_turn_completed(turn, &mut out),
        }
        out
    }

    /// The actions when codex app-server went away in the middle of the turn: close
    /// what is open, an `error` block with `detail`, `session_end` error.
    pub fn on_lost(&mut self, detail: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.flush_error(&mut out);
        self.close_open("codex exited before the tool call finished", &mut out);
        out.push(Action::agent_error("codex", detail, "agent_exited"));
        out.push(Action::End(SessionEnd {
            reason: EndReason::Error,
            usage: self.usage.clone(),
            message: Some(bounded_chars(detail, 500)),
        }));
        self.ended = true;
        out
    }

    /// The actions when the turn was interrupted and codex did not confirm it: close
    /// what is open; the `session_end` (`interrupted`) is the SDK's.
    pub fn on_interrupted(&mut self) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("interrupted", &mut out);
        self.ended = true;
        out
    }

    fn on_turn_completed(&mut self, turn: TurnInfo, out: &mut Vec<Action>) {
        let (reason, message) = match turn.status {
            TurnStatus::Completed => (EndReason::Completed, None),
            TurnStatus::Interrupted => (EndReason::Interrupted, None),
            TurnStatus::Failed | TurnStatus::InProgress | TurnStatus::Unknown => {
                let message = turn.error.map(|e| e.message).filter(|m| !m.trim().is_empty());
                let message = message.or_else(|| self.pending_error.clone());
                (EndReason::Error, Some(message.unwrap_or_else(|| "codex reported that the turn failed".to_owned())))
            }
        };
        if self.pending_error.as_ref().is_some_and(|p| Some(p) != message.as_ref()) {
            self.flush_error(out);
        }
        self.pending_error = None;
        let why = match reason {
            EndReason::Interrupted => "interrupted",
            _ => "the turn ended before the tool call finished",
        };
        self.close_open(why, out);
        if let Some(message) = &message {
            out.push(Action::agent_error("codex", message, "model_error"));
        }
        out.push(Action::End(SessionEnd { reason, usage: self.usage.clone(), message }));
        self.ended = true;
    }

    fn flush_error(&mut self, out: &mut Vec<Action>) {
        if let Some(message) = self.pending_error.take() {
            out.push(Action::agent_error("codex", &message, "agent_error"));
        }
    }

    fn close_open(&mut self, why: &str, out: &mut Vec<Action>) {
        crate::mapping::close_open(&mut self.texts, &mut self.tools, why, out);
    }

    fn mark_finished(&mut self, item_id: String) {
        self.outputs.remove(&item_id);
        if self.finished.len() < MAX_TRACKED_IDS {
            self.finished.insert(item_id);
        }
    }

    fn push(&mut self, kind: StreamKind, item_id: &str, delta: &str, out: &mut Vec<Action>) {
        if delta.is_empty() || self.finished.contains(item_id) {
            return;
        }
        let block_id = format!("{}-{item_id}", self.prefix);
        let streamer = self.texts.entry(item_id.to_owned()).or_insert_with(|| TextStreamer::new(kind, block_id));
        let room = MAX_TEXT_BYTES.saturating_sub(streamer.text().len());
        if room == 0 {
            return;
        }
        let delta = if delta.len() > room { bounded(delta, room) } else { delta.to_owned() };
        out.push(Action::Emit(streamer.push(&delta)));
    }

    fn finish_text(&mut self, kind: StreamKind, item_id: &str, whole: String, out: &mut Vec<Action>) {
        let block_id = format!("{}-{item_id}", self.prefix);
        let mut streamer = self.texts.remove(item_id).unwrap_or_else(|| TextStreamer::new(kind, block_id));
        let whole = if whole.is_empty() { streamer.text().to_owned() } else { bounded(&whole, MAX_TEXT_BYTES) };
        if whole.is_empty() {
            return;
        }
        out.extend(streamer.finish_with(&whole).map(Action::Emit));
    }

    fn start_tool(&mut self, id: &ToolCallId, name: &str, input: Value, title: Option<String>, out: &mut Vec<Action>) {
        if !self.tools.is_running(id) {
            let input = bounded_input(input, MAX_INPUT_BYTES);
            out.extend(self.tools.start_lenient(id.clone(), name, input, title).map(Action::Emit));
        }
    }

    fn finish_tool(&mut self, id: &ToolCallId, name: &str, output: &str, is_error: bool, out: &mut Vec<Action>) {
        let output = bounded(output, MAX_TOOL_OUTPUT_BYTES);
        out.extend(self.tools.finish_lenient(id.clone(), name, output, is_error).into_iter().map(Action::Emit));
    }

    fn on_item(&mut self, item: Item, done: bool, out: &mut Vec<Action>) {
        let item_id = match &item {
            Item::AgentMessage { id, .. }
            | Item::Reasoning { id, .. }
            | Item::CommandExecution { id, .. }
            | Item::FileChange { id, .. }
            | Item::McpToolCall { id, .. }
            | Item::WebSearch { id, .. } => id.clone(),
            Item::Other => return,
        };
        if self.finished.contains(&item_id) {
            tracing::debug!(%item_id, "notification for a finished codex item; ignored");
            return;
        }
        let call_id = self.call_id(&item_id);
        match item {
            Item::AgentMessage { text, .. } if done => self.finish_text(StreamKind::Text, &item_id, text, out),
            Item::Reasoning { summary, content, .. } if done => {
                let parts = if summary.is_empty() { content } else { summary };
                self.finish_text(StreamKind::Thinking, &item_id, parts.join("\n\n"), out);
            }
            Item::AgentMessage { .. } | Item::Reasoning { .. } => {}
            Item::CommandExecution { command, status, aggregated_output, exit_code, .. } => {
                let title = Some(command_title(&command));
                self.start_tool(&call_id, "shell", json!({ "command": command }), title, out);
                if !done {
                    return;
                }
                let held = self.outputs.remove(&item_id).unwrap_or_default();
                let output = aggregated_output.filter(|o| !o.is_empty()).unwrap_or(held);
                let is_error = matches!(status, ItemStatus::Failed | ItemStatus::Declined | ItemStatus::Unknown)
                    || exit_code.is_some_and(|c| c != 0);
                let output = match (output.is_empty(), status, exit_code) {
                    (false, _, _) => output,
                    (true, ItemStatus::Declined, _) => "the command was declined; it did not run".to_owned(),
                    (true, _, Some(code)) if code != 0 => format!("exit code {code}"),
                    (true, ItemStatus::Failed, _) => "the command failed".to_owned(),
                    (true, _, _) => String::new(),
                };
                self.finish_tool(&call_id, "shell", &output, is_error, out);
            }
            Item::FileChange { changes, status, .. } => {
                let listed: Vec<Value> = changes.iter().map(|c| json!({ "path": c.path, "kind": verb(c) })).collect();
                let title = match &changes[..] {
                    [one] => Some(bounded_chars(&format!("{} {}", verb(one), one.path), MAX_TITLE_CHARS)),
                    [] => None,
                    many => Some(format!("{} files", many.len())),
                };
                self.start_tool(&call_id, "apply_patch", json!({ "changes": listed }), title, out);
                if !done {
                    return;
                }
                let applied = status == ItemStatus::Completed;
                if applied {
                    out.extend(changes.iter().take(MAX_DIFFS_PER_PATCH).map(|c| Action::Emit(patch_diff(c, &call_id))));
                }
                let state = match status {
                    ItemStatus::Completed => "applied",
                    ItemStatus::Failed => "failed to apply",
                    ItemStatus::Declined => "declined; nothing was written",
                    ItemStatus::InProgress | ItemStatus::Unknown => "ended in an unknown state",
                };
                let mut lines = vec![format!("patch {state}")];
                lines.extend(changes.iter().map(|c| format!("{} {}", verb(c), c.path)));
                if applied && changes.len() > MAX_DIFFS_PER_PATCH {
                    lines.push(format!("(diffs shown for the first {MAX_DIFFS_PER_PATCH} files only)"));
                }
                self.finish_tool(&call_id, "apply_patch", &lines.join("\n"), !applied, out);
            }
            Item::McpToolCall { server, tool, arguments, status, result, error, .. } => {
                let name = format!("{server}.{tool}");
                self.start_tool(&call_id, &name, arguments, None, out);
                if !done {
                    return;
                }
                let is_error = status != ItemStatus::Completed || error.as_ref().is_some_and(|e| !e.is_null());
                self.finish_tool(&call_id, &name, &mcp_output(result.as_ref(), error.as_ref()), is_error, out);
            }
            Item::WebSearch { query, .. } => {
                let title = (!query.is_empty()).then(|| bounded_chars(&query, MAX_TITLE_CHARS));
                self.start_tool(&call_id, "web_search", json!({ "query": query }), title, out);
                if done {
                    let output = format!("Searched the web for {:?}", bounded_chars(&query, MAX_TITLE_CHARS));
                    self.finish_tool(&call_id, "web_search", &output, false, out);
                }
            }
            Item::Other => {}
        }
        if done {
            self.mark_finished(item_id);
        }
    }
}

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;
