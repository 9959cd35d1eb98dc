//! From cursor-agent events to terminull blocks: a pure state machine for one turn.
//!
//! [`TurnMapper::on_event`] takes one parsed [`Event`] and returns the [`Action`]s it
//! causes, in order: blocks to stream, the chat id to report, and the turn's end. It does
//! no I/O, so the adapter's whole behaviour on the wire is tested here, from lines written
//! after Cursor's documented stream-json format (the real CLI was not available).
//!
//! | cursor-agent event | blocks |
//! |---|---|
//! | `system`/`init` | `session_id` notification with `session_id`, once per new chat id |
//! | `user` | nothing (the prompt echoed) |
//! | `assistant` | `text`: pieces are appended to the open text block; repeats are dropped (see [`TurnMapper::on_event`]) |
//! | `thinking`/`delta`, `thinking`/`completed` | `thinking`, `done: true` at `completed` |
//! | `tool_call`/`started` | `tool_call` `<tool>` `running` (`shellToolCall` → `shell`, `function` → its name) |
//! | `tool_call`/`completed` | for edits and writes a `diff`, then `tool_call` `done`/`error` and `tool_result` |
//! | `result` | `session_end` `completed` with the usage; when failed, `error` code `agent_error` and `session_end` `error` |
//! | output ends without `result` | `error` (code from the adapter, `agent_exited` usually), `session_end` `error` ([`TurnMapper::on_exit`]) |
//!
//! Text and tool-call ids are `<turn prefix>-…`, the prefix minted once per turn, so ids
//! never repeat across turns. Before any `session_end` the mapper closes what is still
//! open, so the turn contract holds whatever the CLI printed.
//!
//! Everything is bounded: text and thinking at [`MAX_TEXT_BYTES`], tool outputs at
//! [`MAX_TOOL_OUTPUT_BYTES`], tool inputs at [`MAX_INPUT_BYTES`], titles at
//! [`MAX_TITLE_CHARS`], diff texts at [`MAX_DIFF_TEXT_BYTES`], call ids at
//! [`MAX_CALL_ID_CHARS`].

use serde_json::Value;
pub use terminull_adapter_sdk::bounds::bounded;
use terminull_adapter_sdk::bounds::{bounded_chars, bounded_input, cut};
use terminull_adapter_sdk::per_turn::EventMapper;
use terminull_adapter_sdk::streamer::{StreamKind, TextStreamer};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{Diff, DiffChange, EndReason, SessionEnd, Usage};
use terminull_protocol::ids::ToolCallId;

use crate::events::{AssistantText, Event, RunResult, TokenUsage, ToolInvocation, ToolOutcome, ToolPhase};

/// The SDK's shared limits, used by this mapping.
pub use terminull_adapter_sdk::bounds::{MAX_INPUT_BYTES, MAX_TEXT_BYTES, MAX_TITLE_CHARS, MAX_TOOL_OUTPUT_BYTES};
/// Most bytes of one side of a `diff` (a larger change is shown by its headers only).
pub const MAX_DIFF_TEXT_BYTES: usize = 1024 * 1024;
/// Most characters of Cursor's `call_id` kept in a tool-call id.
pub const MAX_CALL_ID_CHARS: usize = 128;
/// Most characters of a chat id accepted from the CLI.
pub const MAX_CHAT_ID_CHARS: usize = 256;

/// What the adapter must do for one event (the turn's `session_end` is streamed once
/// the CLI has exited).
pub type Action = terminull_adapter_sdk::Action;

/// The state of one turn. Create one per turn with a fresh prefix.
#[derive(Debug)]
pub struct TurnMapper {
    prefix: String,
    chat_id: Option<String>,
    saw_init: bool,
    tools: ToolCallTracker,
    /// The open text block.
    text: Option<TextStreamer>,
    /// The text of the turn's closed text blocks, to recognise repeats (bounded).
    closed_text: String,
    /// Whether any text was streamed this turn.
    any_text: bool,
    /// The open thinking block.
    thinking: Option<TextStreamer>,
    /// Counts blocks and anonymous tool calls, for ids.
    counter: usize,
    ended: bool,
}

impl TurnMapper {
    /// A mapper for one turn. `prefix` makes this turn's ids unique (mint it with the
    /// SDK's `mint_id`); `chat_id` is the chat already known (resumed), so its
    /// `system`/`init` is not reported again.
    pub fn new(prefix: impl Into<String>, chat_id: Option<String>) -> Self {
        Self {
            prefix: prefix.into(),
            chat_id,
            saw_init: false,
            tools: ToolCallTracker::new(),
            text: None,
            closed_text: String::new(),
            any_text: false,
            thinking: None,
            counter: 0,
            ended: false,
        }
    }

    /// The chat id as known now.
    pub fn chat_id(&self) -> Option<&str> {
        self.chat_id.as_deref()
    }

    /// True once the CLI printed its `system`/`init` in this turn.
    pub fn saw_init(&self) -> bool {
        self.saw_init
    }

    /// True once the turn ended (`result`, [`on_exit`](Self::on_exit) or
    /// [`on_interrupt`](Self::on_interrupt)); later events produce nothing.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn next_id(&mut self, kind: &str) -> String {
        self.counter += 1;
        format!("{}-{kind}{}", self.prefix, self.counter)
    }

    /// The actions when the output ended without `result` (the CLI exited, crashed or
    /// closed stdout): close what is open, an `error` block with `detail` (exit status and
    /// stderr tail) and `code`, and `session_end` error.
    pub fn on_exit(&mut self, detail: &str, code: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("cursor-agent exited before the tool call finished", &mut out);
        out.push(Action::agent_error("cursor-agent", detail, code));
        out.push(Action::End(SessionEnd {
            reason: EndReason::Error,
            usage: None,
            message: Some(bounded_chars(detail, 500)),
        }));
        self.ended = true;
        out
    }

    fn report_chat(&mut self, id: String, out: &mut Vec<Action>) {
        let valid = !id.is_empty()
            && id.chars().count() <= MAX_CHAT_ID_CHARS
            && !id.chars().any(|c| c.is_whitespace() || c.is_control());
        if !valid {
            tracing::warn!(?id, "cursor-agent reported a chat id that cannot be resumed; ignored");
            return;
        }
        if self.chat_id.as_deref() != Some(id.as_str()) {
            self.chat_id = Some(id.clone());
            out.push(Action::SessionId(id));
        }
    }

    fn on_assistant(&mut self, a: AssistantText, out: &mut Vec<Action>) {
        if a.text.is_empty() {
            return;
        }
        self.close_thinking(out);
        if !a.is_delta() {
            if self.repeats_recent_text(&a.text) {
                tracing::debug!(chars = a.text.len(), "assistant text repeats what was streamed; dropped");
                return;
            }
            if let Some(open) = &mut self.text
                && !open.text().is_empty()
                && a.text.starts_with(open.text())
                && a.text.len() <= MAX_TEXT_BYTES
            {
                // The whole text so far: what it adds is one append.
                match open.update(&a.text) {
                    Ok(chunk) => out.extend(chunk.map(Action::Emit)),
                    Err(e) => tracing::debug!("{e}"),
                }
                return;
            }
        }
        self.append_text(&a.text, out);
    }

    /// True when the turn's text so far (closed blocks and the open one) ends with
    /// `text`, whitespace ignored.
    fn repeats_recent_text(&self, text: &str) -> bool {
        let wanted: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if wanted.is_empty() || !self.any_text {
            return false;
        }
        let open = self.text.as_ref().map(TextStreamer::text).unwrap_or("");
        let so_far: String = self.closed_text.chars().chain(open.chars()).filter(|c| !c.is_whitespace()).collect();
        so_far.ends_with(&wanted)
    }

    fn append_text(&mut self, piece: &str, out: &mut Vec<Action>) {
        if self.text.is_none() {
            let id = self.next_id("text");
            self.text = Some(TextStreamer::new(StreamKind::Text, id));
        }
        self.any_text = true;
        let open = self.text.as_mut().expect("opened above");
        if let Some(chunk) = push_bounded(open, piece) {
            out.push(Action::Emit(chunk));
        }
    }

    fn close_text(&mut self, out: &mut Vec<Action>) {
        if let Some(mut open) = self.text.take()
            && !open.text().is_empty()
        {
            if self.closed_text.len() + open.text().len() <= MAX_TEXT_BYTES {
                self.closed_text.push_str(open.text());
            }
            out.extend(open.finish().map(Action::Emit));
        }
    }

    fn on_thinking(&mut self, piece: &str, out: &mut Vec<Action>) {
        if piece.is_empty() {
            return;
        }
        self.close_text(out);
        if self.thinking.is_none() {
            let id = self.next_id("thinking");
            self.thinking = Some(TextStreamer::new(StreamKind::Thinking, id));
        }
        let open = self.thinking.as_mut().expect("opened above");
        if let Some(chunk) = push_bounded(open, piece) {
            out.push(Action::Emit(chunk));
        }
    }

    fn close_thinking(&mut self, out: &mut Vec<Action>) {
        if let Some(mut open) = self.thinking.take()
            && !open.text().is_empty()
        {
            out.extend(open.finish().map(Action::Emit));
        }
    }

    fn close_open(&mut self, why: &str, out: &mut Vec<Action>) {
        self.close_thinking(out);
        self.close_text(out);
        out.extend(self.tools.close_all(why).into_iter().map(Action::Emit));
    }

    /// The tool-call id for an event: `<prefix>-<call_id>` (control characters dropped,
    /// bounded); without a `call_id`, a fresh id for a start, and for a completion the
    /// latest running call of the same tool.
    fn tool_id(&mut self, call_id: Option<&str>, name: &str, phase: ToolPhase) -> ToolCallId {
        let cleaned: String =
            call_id.unwrap_or("").chars().filter(|c| !c.is_control()).take(MAX_CALL_ID_CHARS).collect();
        let cleaned = cleaned.trim();
        if !cleaned.is_empty() {
            return ToolCallId::from(format!("{}-{cleaned}", self.prefix));
        }
        if phase == ToolPhase::Completed
            && let Some(id) =
                self.tools.open_ids().into_iter().rev().find(|id| self.tools.get(id).is_some_and(|c| c.name == name))
        {
            return id;
        }
        ToolCallId::from(self.next_id("call"))
    }

    fn on_tool(&mut self, phase: ToolPhase, call_id: Option<&str>, call: ToolInvocation, out: &mut Vec<Action>) {
        self.close_thinking(out);
        self.close_text(out);
        let id = self.tool_id(call_id, &call.name, phase);
        if !self.tools.is_running(&id) {
            let title = tool_title(&call.name, &call.args);
            match self.tools.start(
                id.clone(),
                call.name.clone(),
                bounded_input(call.args.clone(), MAX_INPUT_BYTES),
                None,
                title,
            ) {
                Ok(block) => out.push(Action::Emit(block)),
                Err(e) => {
                    // Already finished: a repeated event.
                    tracing::debug!("{e}");
                    return;
                }
            }
        }
        if phase == ToolPhase::Started {
            return;
        }
        let rendered = render_outcome(&call.name, &call.args, call.outcome.as_ref());
        if let Some((path, change)) = rendered.diff {
            out.push(Action::Emit(BlockKind::Diff(Diff { path, change, tool_call_id: Some(id.clone()) })));
        }
        match self.tools.finish(id, bounded(&rendered.output, MAX_TOOL_OUTPUT_BYTES), rendered.is_error) {
            Ok(blocks) => out.extend(blocks.into_iter().map(Action::Emit)),
            Err(e) => tracing::debug!("{e}"),
        }
    }

    fn on_result(&mut self, result: RunResult, out: &mut Vec<Action>) {
        if !self.saw_init
            && let Some(id) = result.session_id.clone()
        {
            self.report_chat(id, out);
        }
        self.close_open("the turn ended before the tool call finished", out);
        let usage = result.usage.as_ref().map(usage_of);
        if result.failed() {
            let message = if result.result.trim().is_empty() {
                "cursor-agent reported that the turn failed".to_owned()
            } else {
                result.result.clone()
            };
            out.push(Action::agent_error("cursor-agent", &message, "agent_error"));
            out.push(Action::End(SessionEnd {
                reason: EndReason::Error,
                usage,
                message: Some(bounded_chars(&message, 500)),
            }));
        } else {
            if !self.any_text && !result.result.trim().is_empty() {
                // No assistant line was printed: the result holds the whole answer.
                let mut answer = TextStreamer::new(StreamKind::Text, self.next_id("text"));
                out.extend(push_bounded(&mut answer, &result.result).map(Action::Emit));
                out.extend(answer.finish().map(Action::Emit));
            }
            out.push(Action::End(SessionEnd { reason: EndReason::Completed, usage, message: None }));
        }
        self.ended = true;
    }
}

impl EventMapper for TurnMapper {
    type Event = Event;
    type Step = std::convert::Infallible;

    /// The actions for one event.
    ///
    /// `assistant` text: a piece (`timestamp_ms` without `model_call_id`) is appended to
    /// the open text block. Any other `assistant` line may repeat what was streamed
    /// (`--stream-partial-output` sends each message again when it is complete, and the
    /// whole answer once more at the end), so it is dropped when the turn's text so far
    /// ends with it (whitespace ignored), replaces the open block when it extends it, and
    /// is appended otherwise (a whole message, as without `--stream-partial-output`).
    fn on_event(&mut self, event: Event) -> Vec<Action> {
        if self.ended {
            tracing::debug!(?event, "cursor-agent event after the turn ended; ignored");
            return Vec::new();
        }
        let mut out = Vec::new();
        match event {
            Event::SystemInit { session_id, model } => {
                self.saw_init = true;
                tracing::debug!(?model, "cursor-agent run started");
                if let Some(id) = session_id {
                    self.report_chat(id, &mut out);
                }
            }
            Event::User => {}
            Event::Assistant(a) => self.on_assistant(a, &mut out),
            Event::ThinkingDelta { text } => self.on_thinking(&text, &mut out),
            Event::ThinkingCompleted => self.close_thinking(&mut out),
            Event::ToolCall { phase, call_id, call } => self.on_tool(phase, call_id.as_deref(), call, &mut out),
            Event::Result(result) => self.on_result(result, &mut out),
            Event::Unknown { event_type, subtype } => {
                tracing::debug!(event_type, ?subtype, "unknown cursor-agent event; ignored");
            }
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
        self.close_open("interrupted", &mut out);
        self.ended = true;
        out
    }
}

/// Appends `piece` to a streamer unless that would pass [`MAX_TEXT_BYTES`]; the piece
/// that would is cut on a character boundary and followed by a note, once. The chunk to
/// stream, if anything changed.
fn push_bounded(streamer: &mut TextStreamer, piece: &str) -> Option<BlockKind> {
    const NOTE: &str = "\n… [truncated]";
    let used = streamer.text().len();
    if used >= MAX_TEXT_BYTES || streamer.text().ends_with(NOTE) {
        return None;
    }
    let room = MAX_TEXT_BYTES - used;
    let piece = if piece.len() <= room { piece.to_owned() } else { format!("{}{NOTE}", cut(piece, room)) };
    streamer.try_push(&piece).map_err(|e| tracing::debug!("{e}")).ok()
}

/// This turn's usage in terminull's terms; Cursor reports no cost. Negative counts read as 0.
pub fn usage_of(t: &TokenUsage) -> Usage {
    let n = |v: Option<i64>| v.map(|v| u64::try_from(v).unwrap_or(0));
    Usage {
        input_tokens: n(t.input_tokens),
        output_tokens: n(t.output_tokens),
        cache_read_tokens: n(t.cache_read_tokens),
        cache_write_tokens: n(t.cache_write_tokens),
        cost_usd: None,
    }
}

fn str_field<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| value.get(*k).and_then(Value::as_str))
}

/// A short title: the command of a shell call, the path of a file tool, the pattern of a
/// search; its first line, cut to [`MAX_TITLE_CHARS`].
pub fn tool_title(name: &str, args: &Value) -> Option<String> {
    let text = match name {
        "shell" => str_field(args, &["command"]),
        "read" | "write" | "edit" | "delete" | "ls" => str_field(args, &["path", "targetFile", "filePath"]),
        "grep" => str_field(args, &["pattern", "query"]),
        "glob" => str_field(args, &["globPattern", "pattern"]),
        _ => None,
    }?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(bounded_chars(line, MAX_TITLE_CHARS))
}

/// What a completed tool call shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The `tool_result` output (not yet bounded).
    pub output: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// The `diff` of the file it changed: path and change.
    pub diff: Option<(String, DiffChange)>,
}

/// The result, failure flag and diff of a completed call, by tool.
///
/// - `shell`: stdout then stderr; an error when `exitCode` is not 0.
/// - `edit`: the `diffString`; diff `replace` from `beforeFullFileContent` to
///   `afterFullFileContent`, else the `diffString` as a unified patch.
/// - `write`: "wrote <path> (N lines, M bytes)"; diff `replace` with `old_text: null` and
///   the written `fileText` (the CLI does not say whether the file existed).
/// - `delete`: "deleted <path>"; diff `unified` to `/dev/null`, headers only.
/// - others: the text of the result (`content`, `output`, `message`, …), else its JSON.
/// - `rejected`: an error naming the reason; other failure keys: an error with their text.
pub fn render_outcome(name: &str, args: &Value, outcome: Option<&ToolOutcome>) -> Rendered {
    let plain = |output: String, is_error: bool| Rendered { output, is_error, diff: None };
    let Some(outcome) = outcome else { return plain(String::new(), false) };
    match outcome {
        ToolOutcome::Success(v) => match name {
            "shell" => {
                let (output, is_error) = shell_output(v);
                plain(output, is_error)
            }
            "edit" => {
                let path = path_of(v, args);
                let output = match str_field(v, &["diffString"]) {
                    Some(diff) => diff.to_owned(),
                    None => format!("edited {}", path.as_deref().unwrap_or("a file")),
                };
                Rendered { output, is_error: false, diff: path.and_then(|p| edit_diff(v).map(|c| (p, c))) }
            }
            "write" => {
                let path = path_of(v, args);
                let mut output = format!("wrote {}", path.as_deref().unwrap_or("a file"));
                let lines = v.get("linesCreated").and_then(Value::as_u64);
                let size = v.get("fileSize").and_then(Value::as_u64);
                match (lines, size) {
                    (Some(l), Some(s)) => output.push_str(&format!(" ({l} lines, {s} bytes)")),
                    (Some(l), None) => output.push_str(&format!(" ({l} lines)")),
                    (None, Some(s)) => output.push_str(&format!(" ({s} bytes)")),
                    (None, None) => {}
                }
                let change = str_field(args, &["fileText", "contents", "content"]).map(|new_text| {
                    if new_text.len() > MAX_DIFF_TEXT_BYTES {
                        headers_only("/dev/null", path.as_deref().unwrap_or(""))
                    } else {
                        DiffChange::Replace { old_text: None, new_text: new_text.to_owned() }
                    }
                });
                Rendered { output, is_error: false, diff: path.zip(change) }
            }
            "delete" => {
                let path = path_of(v, args);
                let output = format!("deleted {}", path.as_deref().unwrap_or("a file"));
                let diff = path.map(|p| {
                    let rel = p.trim_start_matches('/').to_owned();
                    (p, DiffChange::Unified { patch: format!("--- a/{rel}\n+++ /dev/null\n") })
                });
                Rendered { output, is_error: false, diff }
            }
            _ => plain(text_of(v), false),
        },
        ToolOutcome::Rejected(v) => {
            let reason = str_field(v, &["reason", "message", "error"]).map(str::trim).filter(|r| !r.is_empty());
            let mut output = match reason {
                Some(reason) => format!("rejected by cursor-agent: {reason}"),
                None => "rejected by cursor-agent's permissions".to_owned(),
            };
            if name == "shell" {
                if let Some(command) = str_field(v, &["command"]).or_else(|| str_field(args, &["command"])) {
                    output.push_str(&format!("\ncommand not run: {command}"));
                }
                if reason.is_none() {
                    output.push_str(
                        "\n(in print mode cursor-agent runs shell commands only with permission mode `force`)",
                    );
                }
            }
            plain(output, true)
        }
        ToolOutcome::Failed { kind, value } => {
            let output = if name == "shell" && (value.get("stdout").is_some() || value.get("stderr").is_some()) {
                shell_output(value).0
            } else {
                text_of(value)
            };
            let output = if output.trim().is_empty() { format!("the tool call ended with `{kind}`") } else { output };
            plain(output, true)
        }
    }
}

/// stdout, then stderr on its own line; "exit code N" when both are empty and it failed.
fn shell_output(v: &Value) -> (String, bool) {
    let stdout = str_field(v, &["stdout"]).unwrap_or("");
    let stderr = str_field(v, &["stderr"]).unwrap_or("");
    let exit = v.get("exitCode").and_then(Value::as_i64);
    let is_error = exit.is_some_and(|code| code != 0);
    let output = match (stdout.is_empty(), stderr.is_empty()) {
        (false, true) => stdout.to_owned(),
        (true, false) => stderr.to_owned(),
        (false, false) if stdout.ends_with('\n') => format!("{stdout}{stderr}"),
        (false, false) => format!("{stdout}\n{stderr}"),
        (true, true) => match exit {
            Some(code) if code != 0 => format!("exit code {code}"),
            _ => str_field(v, &["output", "interleavedOutput"]).unwrap_or("").to_owned(),
        },
    };
    (output, is_error)
}

/// The file a tool touched: from its result, else from its arguments.
fn path_of(result: &Value, args: &Value) -> Option<String> {
    str_field(result, &["path"])
        .or_else(|| str_field(args, &["path", "targetFile", "filePath"]))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

fn headers_only(old: &str, new: &str) -> DiffChange {
    let side = |p: &str, prefix: &str| {
        if p == "/dev/null" { p.to_owned() } else { format!("{prefix}/{}", p.trim_start_matches('/')) }
    };
    DiffChange::Unified { patch: format!("--- {}\n+++ {}\n", side(old, "a"), side(new, "b")) }
}

fn edit_diff(v: &Value) -> Option<DiffChange> {
    let fits = |s: &&str| s.len() <= MAX_DIFF_TEXT_BYTES;
    let before = str_field(v, &["beforeFullFileContent"]).filter(fits);
    let after = str_field(v, &["afterFullFileContent"]).filter(fits);
    if let (Some(before), Some(after)) = (before, after) {
        return Some(DiffChange::Replace { old_text: Some(before.to_owned()), new_text: after.to_owned() });
    }
    str_field(v, &["diffString"]).filter(fits).map(|patch| DiffChange::Unified { patch: patch.to_owned() })
}

/// The text of a tool's result or failure: the string itself, else its first text field,
/// else its JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Object(_) => {
            match str_field(v, &["content", "output", "text", "message", "error", "errorMessage", "reason"]) {
                Some(s) => s.to_owned(),
                None => match v.get("error").and_then(|e| e.get("message")).and_then(Value::as_str) {
                    Some(s) => s.to_owned(),
                    None => bounded(&v.to_string(), MAX_TOOL_OUTPUT_BYTES),
                },
            }
        }
        other => bounded(&other.to_string(), MAX_TOOL_OUTPUT_BYTES),
    }
}

#[cfg(test)]
mod tests;
