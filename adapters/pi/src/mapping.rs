//! From pi's RPC events to terminull blocks: a pure state machine for one turn.
//!
//! [`TurnMapper::on_event`] takes one parsed [`Event`] and returns the [`Action`]s it
//! causes, in order: blocks to stream, the agent session id to report, commands to write
//! back to pi, and the turn's end. It does no I/O, so the adapter's behaviour on the wire
//! is tested here from captured `pi --mode rpc` lines.
//!
//! | pi event | blocks / actions |
//! |---|---|
//! | `response` to `prompt`, failed | `error` (code `agent_error`), `session_end` error |
//! | `response` to `prompt`, accepted | a `get_state` probe (a prompt an extension handles runs nothing) |
//! | `agent_start` | nothing (a retry's run clears the retry state) |
//! | `message_start` assistant | a new message: its text/thinking ids are `<prefix>-m<n>-<content index>` |
//! | `message_update` `text_*` / `thinking_*` | `text` / `thinking` chunks (throttled, bounded); `*_end` closes the block with its whole text |
//! | `message_update` `toolcall_*`, `start`, `done`, `error` | nothing (the call shows when it executes) |
//! | `message_end` assistant | closes its blocks with the final content; adds its usage; remembers its stop reason; the first one reports the session id |
//! | `tool_execution_start` | `tool_call` running (id `<prefix>-<pi id>`, title from the command / path / pattern) |
//! | `tool_execution_end` | `tool_call` done / error + `tool_result` with the text of the result |
//! | `auto_retry_start` / `auto_retry_end` | `progress` ("retrying …"), closed when the retries end |
//! | `compaction_start` / `compaction_end` | `progress` ("Compacting the conversation"), closed at the end |
//! | `extension_error` | `error`, recoverable, code `extension_error` |
//! | `extension_ui_request` dialog | answered `cancelled` (the adapter cannot show it) |
//! | `agent_end` | a `get_state` probe |
//! | `response` to the latest probe, pi idle, no retry / compaction pending | the turn's end: `session_end` completed / max_tokens / interrupted, or `error` (code `model_error`) + `session_end` error when the last assistant message failed |
//! | `response` to `abort` (after [`TurnMapper::interrupt_requested`]) | `session_end` interrupted |
//!
//! **Why the probe.** `agent_end` does not end a turn by itself: when the run failed
//! with a transient error, pi emits `auto_retry_start` right after it (in the same
//! synchronous step) and runs the prompt again later. A `get_state` written after
//! `agent_end` is answered after that `auto_retry_start`, so its answer tells the two
//! cases apart without any timer.
//!
//! **Bounded output.** pi streams token deltas; each text/thinking chunk carries the
//! full text so far (the block protocol's rule), so sending one per delta would be
//! quadratic. Up to [`EAGER_BYTES`] every delta is sent; beyond, a chunk is sent once the
//! unsent part is 1/[`THROTTLE_DIVISOR`] of the text, so the bytes sent stay linear in the
//! answer's length. Text is cut at [`MAX_TEXT_BYTES`], tool output at
//! [`MAX_TOOL_OUTPUT_BYTES`], tool input at [`MAX_INPUT_BYTES`].

use std::collections::BTreeMap;

use serde_json::Value;
pub use terminull_adapter_sdk::bounds::bounded;
use terminull_adapter_sdk::bounds::{bounded_input, cut, first_line};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, ErrorBlock, Progress, SessionEnd, StreamedText, Usage};
use terminull_protocol::ids::BlockId;

use crate::command;
use crate::events::{Content, Delta, DeltaKind, Event, Message, PiUsage, Response, State};

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
/// Up to this many bytes a streamed text is sent on every delta.
pub const EAGER_BYTES: usize = 4096;
/// Beyond [`EAGER_BYTES`], a chunk is sent once the unsent part is 1/N of the text.
pub const THROTTLE_DIVISOR: usize = 8;

/// What the adapter must do for one event: the SDK's actions, plus a command to write
/// to pi's stdin (`Action::Agent`).
pub type Action = terminull_adapter_sdk::Action<Value>;

/// A short title for a tool call: the command, path or pattern it works on.
pub fn tool_title(args: &Value) -> Option<String> {
    ["command", "path", "file_path", "pattern", "query", "url"]
        .iter()
        .find_map(|key| args.get(*key).and_then(Value::as_str))
        .map(|s| first_line(s, MAX_TITLE_CHARS))
        .filter(|s| !s.is_empty())
}

/// One message's usage in terminull's terms: `input` (pi counts it without cached
/// tokens), `output`, `cacheRead`, `cacheWrite`, `cost.total`.
pub fn usage_of(u: &PiUsage) -> Usage {
    let n = |v: Option<f64>| v.filter(|v| v.is_finite()).map(|v| v.max(0.0).round() as u64);
    Usage {
        input_tokens: n(u.input),
        output_tokens: n(u.output),
        cache_read_tokens: n(u.cache_read),
        cache_write_tokens: n(u.cache_write),
        cost_usd: u.cost.as_ref().and_then(|c| c.total).filter(|c| c.is_finite()),
    }
}

/// One streamed text or thinking block: its text so far (bounded), how much was sent.
#[derive(Debug)]
struct Stream {
    kind: DeltaKind,
    id: BlockId,
    text: String,
    /// Bytes the block has in all (more than `text` holds once it was cut).
    seen: usize,
    /// Bytes appended since the last chunk sent.
    unsent: usize,
    emitted: bool,
    finished: bool,
}

impl Stream {
    fn new(kind: DeltaKind, id: String) -> Self {
        Stream { kind, id: id.into(), text: String::new(), seen: 0, unsent: 0, emitted: false, finished: false }
    }

    fn chunk(&self, text: String, done: bool) -> BlockKind {
        let body = StreamedText { id: self.id.clone(), text, done };
        match self.kind {
            DeltaKind::Text => BlockKind::Text(body),
            DeltaKind::Thinking => BlockKind::Thinking(body),
        }
    }

    /// Appends a delta; the chunk to send when the throttle lets one through.
    fn push(&mut self, delta: &str) -> Option<BlockKind> {
        if self.finished {
            return None;
        }
        self.seen += delta.len();
        let part = cut(delta, MAX_TEXT_BYTES.saturating_sub(self.text.len()));
        if part.is_empty() {
            return None;
        }
        self.text.push_str(part);
        self.unsent += part.len();
        let len = self.text.len();
        if len <= EAGER_BYTES || self.unsent * THROTTLE_DIVISOR >= len {
            self.unsent = 0;
            self.emitted = true;
            Some(self.chunk(self.text.clone(), false))
        } else {
            None
        }
    }

    /// Takes the block's whole text as pi reports it at its end.
    fn set_full(&mut self, full: &str) {
        if self.finished {
            return;
        }
        let kept = cut(full, MAX_TEXT_BYTES);
        if kept != self.text {
            self.text = kept.to_owned();
        }
        self.seen = full.len();
    }

    /// The one `done: true` chunk (with a note when the text was cut); nothing for a
    /// block that never showed anything.
    fn finish(&mut self) -> Option<BlockKind> {
        if self.finished {
            return None;
        }
        self.finished = true;
        if !self.emitted && self.text.trim().is_empty() {
            self.text = String::new();
            return None;
        }
        // The text is not needed any more; the stream stays (finished) so that its id is
        // never reopened.
        let mut text = std::mem::take(&mut self.text);
        if self.seen > text.len() {
            text = format!("{text}\n… [truncated: {} bytes in all]", self.seen);
        }
        Some(self.chunk(text, true))
    }
}

/// The state of one turn. Create one per turn.
#[derive(Debug)]
pub struct TurnMapper {
    /// Prefix of this turn's block and tool call ids (minted per turn).
    prefix: String,
    /// Prefix of the ids of the commands this mapper writes (deterministic per process).
    command_prefix: String,
    session_id: Option<String>,
    session_reported: bool,
    message_no: u64,
    streams: BTreeMap<(u64, usize), Stream>,
    tools: ToolCallTracker,
    usage: Option<Usage>,
    last_stop: Option<String>,
    last_error: Option<String>,
    agent_started: bool,
    agent_ended: bool,
    retrying: bool,
    progress: Vec<Progress>,
    progress_count: u64,
    compacting: bool,
    probes: u64,
    latest_probe: Option<String>,
    interrupting: bool,
    ended: bool,
}

impl TurnMapper {
    /// A mapper for one turn. `prefix` makes the turn's block ids unique (mint it with
    /// the SDK's `mint_id`); `command_prefix` starts the ids of the `get_state` probes
    /// (`<command_prefix>-state-<n>`). `session_id` is pi's session id as known, and
    /// `session_reported` whether it was reported already (it is reported once pi has
    /// saved the session, at the first assistant message).
    pub fn new(
        prefix: impl Into<String>,
        command_prefix: impl Into<String>,
        session_id: Option<String>,
        session_reported: bool,
    ) -> Self {
        TurnMapper {
            prefix: prefix.into(),
            command_prefix: command_prefix.into(),
            session_id,
            session_reported,
            message_no: 0,
            streams: BTreeMap::new(),
            tools: ToolCallTracker::new(),
            usage: None,
            last_stop: None,
            last_error: None,
            agent_started: false,
            agent_ended: false,
            retrying: false,
            progress: Vec::new(),
            progress_count: 0,
            compacting: false,
            probes: 0,
            latest_probe: None,
            interrupting: false,
            ended: false,
        }
    }

    /// True once the turn ended; later events produce nothing.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// True once the session id was reported (or was known to be saved).
    pub fn session_reported(&self) -> bool {
        self.session_reported
    }

    /// This turn's usage so far.
    pub fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    /// The adapter sent `abort`: the turn now ends when pi answers it.
    pub fn interrupt_requested(&mut self) {
        self.interrupting = true;
    }

    /// True after [`interrupt_requested`](Self::interrupt_requested).
    pub fn is_interrupting(&self) -> bool {
        self.interrupting
    }

    /// The actions for one event.
    pub fn on_event(&mut self, event: Event) -> Vec<Action> {
        if self.ended {
            tracing::debug!(?event, "pi event after the turn ended; ignored");
            return Vec::new();
        }
        let mut out = Vec::new();
        match event {
            Event::Response(r) => self.on_response(r, &mut out),
            Event::AgentStart => {
                self.agent_started = true;
                self.agent_ended = false;
                self.retrying = false;
            }
            Event::AgentEnd => {
                self.agent_ended = true;
                self.probe(&mut out);
            }
            Event::MessageStart(m) if m.role == "assistant" => {
                self.finish_streams(&mut out);
                self.message_no += 1;
            }
            Event::MessageStart(_) => {}
            Event::MessageUpdate(delta) => self.on_delta(delta, &mut out),
            Event::MessageEnd(m) if m.role == "assistant" => self.on_assistant_end(m, &mut out),
            Event::MessageEnd(_) => {}
            Event::ToolStart { id, name, args } => {
                let title = tool_title(&args);
                let input = bounded_input(args, MAX_INPUT_BYTES);
                out.extend(self.tools.start_lenient(self.tool_id(&id), name, input, title).map(Action::Emit));
            }
            Event::ToolEnd { id, name, output, is_error } => {
                let output = bounded(&output, MAX_TOOL_OUTPUT_BYTES);
                out.extend(
                    self.tools.finish_lenient(self.tool_id(&id), name, output, is_error).into_iter().map(Action::Emit),
                );
            }
            Event::RetryStart { attempt, max_attempts, delay_ms, error_message } => {
                self.retrying = true;
                let of = if max_attempts > 0 { format!(" of {max_attempts}") } else { String::new() };
                let message = format!(
                    "Model error ({}); retrying in {} s (attempt {attempt}{of})",
                    first_line(&error_message, 200),
                    delay_ms.div_ceil(1000)
                );
                let total = (max_attempts > 0).then_some(max_attempts);
                self.update_progress("retry", message, Some(attempt), total, &mut out);
            }
            Event::RetryEnd { success, attempt, final_error } => {
                self.retrying = false;
                let retries = if attempt == 1 { "1 retry".to_owned() } else { format!("{attempt} retries") };
                let message = match (success, final_error) {
                    (true, _) => format!("Model error recovered after {retries}"),
                    (false, Some(e)) if e == "Retry cancelled" => "Retry cancelled".to_owned(),
                    (false, Some(e)) => format!("Gave up after {retries}: {}", first_line(&e, 200)),
                    (false, None) => format!("Gave up after {retries}"),
                };
                self.close_progress("retry", Some(message), &mut out);
            }
            Event::CompactionStart { reason } => {
                self.compacting = true;
                let message = format!("Compacting the conversation ({reason})");
                self.update_progress("compaction", message, None, None, &mut out);
            }
            Event::CompactionEnd { aborted, will_retry, error_message } => {
                self.compacting = false;
                let message = match (aborted, error_message) {
                    (true, _) => "Compaction aborted".to_owned(),
                    (false, Some(e)) => format!("Compaction failed: {}", first_line(&e, 200)),
                    (false, None) => "Conversation compacted".to_owned(),
                };
                self.close_progress("compaction", Some(message), &mut out);
                if self.agent_ended && !will_retry {
                    self.probe(&mut out);
                }
            }
            Event::ExtensionError { extension_path, error } => out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                message: bounded(&format!("pi extension {extension_path} failed: {error}"), MAX_ERROR_BYTES),
                recoverable: true,
                code: Some("extension_error".to_owned()),
            }))),
            Event::ExtensionUi { id, method, text } => {
                if Event::is_dialog(&method) {
                    tracing::info!(%method, %text, "dismissing a pi extension dialog (not supported)");
                    out.push(Action::Agent(command::cancel_dialog(&id)));
                } else {
                    tracing::debug!(%method, %text, "pi extension UI request; ignored");
                }
            }
            Event::Ignored { .. } => {}
            Event::Unknown { event_type } => tracing::debug!(event_type, "unknown pi event; ignored"),
        }
        out
    }

    /// pi's process ended (or its stdout closed) before the turn did: closes what is
    /// open, then an `error` (code `agent_exited`) and `session_end` error; or, when an
    /// interrupt was asked for, `session_end` interrupted.
    pub fn on_exit(&mut self, detail: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        if self.interrupting {
            return self.on_interrupted();
        }
        let mut out = Vec::new();
        self.close_open("pi exited before the tool call finished", &mut out);
        let message = bounded(detail, MAX_ERROR_BYTES);
        out.push(Action::Emit(BlockKind::Error(ErrorBlock {
            message: message.clone(),
            recoverable: true,
            code: Some("agent_exited".to_owned()),
        })));
        self.end(EndReason::Error, Some(message), &mut out);
        out
    }

    /// The interrupt is complete (pi answered `abort`, or it was killed): closes what is
    /// open and ends the turn `interrupted`.
    pub fn on_interrupted(&mut self) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("interrupted by the user", &mut out);
        self.end(EndReason::Interrupted, None, &mut out);
        out
    }

    fn on_response(&mut self, r: Response, out: &mut Vec<Action>) {
        match r.command.as_str() {
            "prompt" if !r.success => {
                let error = r.error.unwrap_or_else(|| "no reason given".to_owned());
                let message = bounded(&format!("pi refused the message: {error}"), MAX_ERROR_BYTES);
                self.close_open("the turn failed", out);
                out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                    message: message.clone(),
                    recoverable: true,
                    code: Some("agent_error".to_owned()),
                })));
                self.end(EndReason::Error, Some(message), out);
            }
            "prompt" => self.probe(out),
            "get_state" if r.id.is_some() && r.id == self.latest_probe => {
                let state = State::from_data(r.data.as_ref());
                self.check_end(&state, out);
            }
            "abort" if self.interrupting => out.extend(self.on_interrupted()),
            "parse" => tracing::warn!(error = ?r.error, "pi could not parse a command of the adapter"),
            other => tracing::debug!(command = other, success = r.success, "pi response"),
        }
    }

    fn on_delta(&mut self, delta: Delta, out: &mut Vec<Action>) {
        match delta {
            Delta::Start { kind, index } => {
                self.stream(kind, index);
            }
            Delta::Append { kind, index, delta } => {
                if let Some(chunk) = self.stream(kind, index).push(&delta) {
                    out.push(Action::Emit(chunk));
                }
            }
            Delta::End { kind, index, content } => {
                let stream = self.stream(kind, index);
                if let Some(full) = content {
                    stream.set_full(&full);
                }
                if let Some(chunk) = stream.finish() {
                    out.push(Action::Emit(chunk));
                }
            }
            Delta::Other { .. } => {}
        }
    }

    fn on_assistant_end(&mut self, m: Message, out: &mut Vec<Action>) {
        for (index, content) in m.content.iter().enumerate() {
            let (kind, full) = match content {
                Content::Text { text } => (DeltaKind::Text, text),
                Content::Thinking { thinking } => (DeltaKind::Thinking, thinking),
                _ => continue,
            };
            let stream = self.stream(kind, index);
            stream.set_full(full);
            if let Some(chunk) = stream.finish() {
                out.push(Action::Emit(chunk));
            }
        }
        self.finish_streams(out);
        if let Some(u) = &m.usage {
            self.usage.get_or_insert_with(Usage::default).add(&usage_of(u));
        }
        self.last_stop = m.stop_reason;
        self.last_error = m.error_message;
        if !self.session_reported
            && let Some(id) = &self.session_id
        {
            self.session_reported = true;
            out.push(Action::SessionId(id.clone()));
        }
    }

    /// The stream of content block `index` of the current message, opened if needed.
    fn stream(&mut self, kind: DeltaKind, index: usize) -> &mut Stream {
        let key = (self.message_no, index);
        let id = format!("{}-m{}-{index}", self.prefix, self.message_no);
        self.streams.entry(key).or_insert_with(|| Stream::new(kind, id))
    }

    fn tool_id(&self, pi_id: &str) -> String {
        format!("{}-{pi_id}", self.prefix)
    }

    fn probe(&mut self, out: &mut Vec<Action>) {
        self.probes += 1;
        let id = format!("{}-state-{}", self.command_prefix, self.probes);
        out.push(Action::Agent(command::get_state(&id)));
        self.latest_probe = Some(id);
    }

    fn check_end(&mut self, state: &State, out: &mut Vec<Action>) {
        let busy = self.retrying
            || self.compacting
            || state.is_compacting
            || state.is_streaming
            || (self.agent_started && !self.agent_ended);
        if self.interrupting || busy {
            return;
        }
        self.close_open("the turn ended before the tool call finished", out);
        match self.last_stop.as_deref() {
            Some("error") => {
                let message = bounded(
                    self.last_error.as_deref().filter(|e| !e.trim().is_empty()).unwrap_or("the model request failed"),
                    MAX_ERROR_BYTES,
                );
                out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                    message: message.clone(),
                    recoverable: true,
                    code: Some("model_error".to_owned()),
                })));
                self.end(EndReason::Error, Some(message), out);
            }
            Some("aborted") => self.end(EndReason::Interrupted, None, out),
            Some("length") => self.end(EndReason::MaxTokens, None, out),
            _ => self.end(EndReason::Completed, None, out),
        }
    }

    fn update_progress(
        &mut self,
        what: &str,
        message: String,
        current: Option<u64>,
        total: Option<u64>,
        out: &mut Vec<Action>,
    ) {
        let open = self.progress.iter_mut().find(|p| p.id.as_str().ends_with(&format!("-{what}")));
        let progress = match open {
            Some(p) => {
                p.message = message;
                p.current = current;
                p.total = total;
                p.clone()
            }
            None => {
                self.progress_count += 1;
                let id = format!("{}-p{}-{what}", self.prefix, self.progress_count);
                let p = Progress { id: id.into(), message, current, total, done: false };
                self.progress.push(p.clone());
                p
            }
        };
        out.push(Action::Emit(BlockKind::Progress(progress)));
    }

    fn close_progress(&mut self, what: &str, message: Option<String>, out: &mut Vec<Action>) {
        let suffix = format!("-{what}");
        if let Some(pos) = self.progress.iter().position(|p| p.id.as_str().ends_with(&suffix)) {
            let mut p = self.progress.remove(pos);
            if let Some(message) = message {
                p.message = message;
            }
            p.done = true;
            out.push(Action::Emit(BlockKind::Progress(p)));
        }
    }

    fn finish_streams(&mut self, out: &mut Vec<Action>) {
        for stream in self.streams.values_mut() {
            if let Some(chunk) = stream.finish() {
                out.push(Action::Emit(chunk));
            }
        }
    }

    fn close_open(&mut self, reason: &str, out: &mut Vec<Action>) {
        self.finish_streams(out);
        out.extend(self.tools.close_all(reason).into_iter().map(Action::Emit));
        for mut p in std::mem::take(&mut self.progress) {
            p.done = true;
            out.push(Action::Emit(BlockKind::Progress(p)));
        }
    }

    fn end(&mut self, reason: EndReason, message: Option<String>, out: &mut Vec<Action>) {
        self.ended = true;
        out.push(Action::End(SessionEnd { reason, usage: self.usage.clone(), message }));
    }
}

#[cfg(test)]
mod tests {
    use terminull_adapter_sdk::testing::{blocks_of, describe_with};

    use serde_json::json;

    use super::*;
    use crate::events::parse_line;
    use terminull_protocol::turn::TurnTracker;

    /// One recorded turn: the adapter's commands (`in`) and pi's lines (`out`).
    struct Recording {
        /// `t<n>` of the recorded turn (from its prompt's id).
        command_prefix: String,
        records: Vec<Value>,
    }

    fn recording(text: &str) -> Recording {
        let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let prompt_id = records
            .iter()
            .filter_map(|r| r.get("in").and_then(Value::as_str))
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|c| c["type"] == "prompt")
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .unwrap();
        Recording { command_prefix: prompt_id.trim_end_matches("-prompt").to_owned(), records }
    }

    /// Replays a recorded turn through a mapper: every `out` line is an event, an
    /// `abort` the adapter wrote is an interrupt request. Returns the actions and the
    /// commands the recording shows the adapter wrote on the mapper's behalf.
    fn replay(rec: &Recording, session_reported: bool) -> (Vec<Action>, Vec<Value>, TurnMapper) {
        let mut mapper = TurnMapper::new("p", rec.command_prefix.clone(), Some("sess-1".into()), session_reported);
        let mut actions = Vec::new();
        let mut written = Vec::new();
        for record in &rec.records {
            if let Some(line) = record.get("out").and_then(Value::as_str) {
                actions.extend(mapper.on_event(parse_line(line).unwrap()));
            } else if let Some(line) = record.get("in").and_then(Value::as_str) {
                let command: Value = serde_json::from_str(line).unwrap();
                match command["type"].as_str() {
                    Some("abort") => mapper.interrupt_requested(),
                    Some("prompt") => {}
                    _ => written.push(command),
                }
            }
        }
        (actions, written, mapper)
    }

    fn describe(action: &Action) -> String {
        describe_with(action, |command| format!("write {command}"))
    }

    /// The descriptions, with each run of `done: false` chunks of one id folded into
    /// `<kind> <id> chunks=<n>` (their texts are checked by [`chunks_grow`]).
    fn folded(actions: &[Action]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut run: Option<(String, usize)> = None;
        for action in actions {
            let open = match action {
                Action::Emit(BlockKind::Text(t)) if !t.done => Some(format!("text {}", t.id)),
                Action::Emit(BlockKind::Thinking(t)) if !t.done => Some(format!("thinking {}", t.id)),
                _ => None,
            };
            match (open, &mut run) {
                (Some(key), Some((k, n))) if *k == key => *n += 1,
                (Some(key), _) => {
                    if let Some((k, n)) = run.take() {
                        out.push(format!("{k} chunks={n}"));
                    }
                    run = Some((key, 1));
                }
                (None, _) => {
                    if let Some((k, n)) = run.take() {
                        out.push(format!("{k} chunks={n}"));
                    }
                    out.push(describe(action));
                }
            }
        }
        if let Some((k, n)) = run {
            out.push(format!("{k} chunks={n}"));
        }
        out
    }

    /// Every `done: false` chunk extends the previous text of its id, and the `done: true`
    /// chunk holds the last text.
    fn chunks_grow(actions: &[Action]) {
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        for action in actions {
            if let Action::Emit(BlockKind::Text(t) | BlockKind::Thinking(t)) = action {
                let before = last.get(t.id.as_str()).cloned().unwrap_or_default();
                assert!(t.text.starts_with(&before), "{} shrank: {:?} -> {:?}", t.id, before, t.text);
                last.insert(t.id.as_str().to_owned(), t.text.clone());
            }
        }
    }

    fn keeps_the_contract(name: &str, actions: &[Action]) {
        let mut tracker = TurnTracker::new();
        for block in blocks_of(actions) {
            assert_eq!(tracker.observe(&block), None, "{name}: {block:?}");
        }
        assert!(tracker.ended(), "{name}: no session_end");
        assert_eq!(tracker.open_violations(), vec![], "{name}");
    }

    const TOOL: &str = include_str!("../tests/fixtures/tool.jsonl");
    const PLAIN: &str = include_str!("../tests/fixtures/plain.jsonl");
    const SLOW_INTERRUPT: &str = include_str!("../tests/fixtures/slow-interrupt.jsonl");
    const ERROR: &str = include_str!("../tests/fixtures/error.jsonl");
    const ERROR_RETRIES: &str = include_str!("../tests/fixtures/error-retries.jsonl");
    const TOOL_INTERRUPT: &str = include_str!("../tests/fixtures/tool-interrupt.jsonl");

    const OVERLOADED: &str = r#""529 {\"error\":{\"message\":\"Overloaded (scripted mock:error)\",\"type\":\"overloaded_error\"},\"type\":\"error\"}""#;

    #[test]
    fn recorded_turns() {
        let error_end = format!(
            "session_end Error in=Some(0) out=Some(0) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0) {OVERLOADED}"
        );
        let error_block = format!("error model_error recoverable=true {OVERLOADED}");
        let inner = &OVERLOADED[1..OVERLOADED.len() - 1];
        #[rustfmt::skip]
        let cases: Vec<(&str, &str, bool, Vec<String>)> = vec![
            ("tool round trip (mock:tool, command `sleep 30; echo finished`)", TOOL, false, vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}".into(),
                "thinking p-m1-0 chunks=14".into(),
                "thinking p-m1-0 done=true \"The user wants me to run a command; I will use the shell tool.\"".into(),
                "text p-m1-1 chunks=4".into(),
                "text p-m1-1 done=true \"I'll run the command.\"".into(),
                "session_id sess-1".into(),
                "tool_call p-toolu_mock_000001 bash Running {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_call p-toolu_mock_000001 bash Done {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_result p-toolu_mock_000001 error=false \"finished\\n\"".into(),
                "thinking p-m2-0 chunks=6".into(),
                "thinking p-m2-0 done=true \"The tool ran; summarise its output.\"".into(),
                "text p-m2-1 chunks=7".into(),
                "text p-m2-1 done=true \"Done. The command printed: finished (history=3 msgs)\"".into(),
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Completed in=Some(2928) out=Some(53) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
            ("plain answer, session already reported", PLAIN, true, vec![
                "write {\"id\":\"t2-state-1\",\"type\":\"get_state\"}".into(),
                "text p-m1-0 chunks=12".into(),
                "text p-m1-0 done=true \"Hello from the terminull model server. This is a short scripted answer.\"".into(),
                "write {\"id\":\"t2-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Completed in=Some(1591) out=Some(18) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
            ("interrupt while the model streams (mock:slow, abort)", SLOW_INTERRUPT, true, vec![
                "write {\"id\":\"t3-state-1\",\"type\":\"get_state\"}".into(),
                "text p-m1-0 chunks=3".into(),
                "text p-m1-0 done=true \"Slow chunk 1. Slow chunk 2. Slow chunk 3. \"".into(),
                "write {\"id\":\"t3-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Interrupted in=Some(1640) out=Some(1) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
            ("model error without retries (mock:error)", ERROR, true, vec![
                "write {\"id\":\"t4-state-1\",\"type\":\"get_state\"}".into(),
                "write {\"id\":\"t4-state-2\",\"type\":\"get_state\"}".into(),
                error_block.clone(),
                error_end.clone(),
            ]),
            ("model error after pi's three retries", ERROR_RETRIES, false, vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}".into(),
                "session_id sess-1".into(),
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=false \"Model error ({}); retrying in 1 s (attempt 1 of 3)\"", inner),
                "write {\"id\":\"t1-state-3\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=false \"Model error ({}); retrying in 1 s (attempt 2 of 3)\"", inner),
                "write {\"id\":\"t1-state-4\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=false \"Model error ({}); retrying in 1 s (attempt 3 of 3)\"", inner),
                "write {\"id\":\"t1-state-5\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=true \"Gave up after 3 retries: {}\"", inner),
                error_block,
                error_end,
            ]),
            ("interrupt while a tool runs: pi kills it (`Command aborted`)", TOOL_INTERRUPT, true, vec![
                "write {\"id\":\"t2-state-1\",\"type\":\"get_state\"}".into(),
                "thinking p-m1-0 chunks=14".into(),
                "thinking p-m1-0 done=true \"The user wants me to run a command; I will use the shell tool.\"".into(),
                "text p-m1-1 chunks=4".into(),
                "text p-m1-1 done=true \"I'll run the command.\"".into(),
                "tool_call p-toolu_mock_000005 bash Running {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_call p-toolu_mock_000005 bash Error {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_result p-toolu_mock_000005 error=true \"Command aborted\"".into(),
                "write {\"id\":\"t2-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Interrupted in=Some(1426) out=Some(31) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
        ];
        for (name, text, reported, want) in cases {
            let rec = recording(text);
            let (actions, written, mapper) = replay(&rec, reported);
            assert_eq!(folded(&actions), want, "{name}");
            assert!(mapper.ended(), "{name}");
            chunks_grow(&actions);
            keeps_the_contract(name, &actions);
            // The probes the mapper asked for are the commands the adapter wrote.
            let asked: Vec<Value> =
                actions.iter().filter_map(|a| if let Action::Agent(c) = a { Some(c.clone()) } else { None }).collect();
            assert_eq!(asked, written, "{name}");
        }
    }

    fn line(value: Value) -> Event {
        parse_line(&value.to_string()).unwrap()
    }

    fn state(id: &str, streaming: bool) -> Event {
        line(json!({"id": id, "type": "response", "command": "get_state", "success": true,
            "data": {"isStreaming": streaming, "isCompacting": false, "sessionId": "sess-1"}}))
    }

    fn run(events: Vec<Event>) -> Vec<String> {
        let mut mapper = TurnMapper::new("p", "t1", Some("sess-1".into()), true);
        let mut actions = Vec::new();
        for event in events {
            actions.extend(mapper.on_event(event));
        }
        actions.iter().map(describe).collect()
    }

    fn assistant_end(content: Value, stop: &str) -> Event {
        line(json!({"type": "message_end", "message": {"role": "assistant", "content": content, "stopReason": stop,
            "usage": {"input": 3, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}}}))
    }

    #[test]
    fn synthetic_turns() {
        let prompt_ok = line(json!({"id": "t1-prompt", "type": "response", "command": "prompt", "success": true}));
        let start = line(json!({"type": "message_start", "message": {"role": "assistant", "content": []}}));
        let text_delta = |i: usize, d: &str| {
            line(
                json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": i, "delta": d}}),
            )
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<Event>, Vec<&str>)> = vec![
            ("pi refuses the prompt", vec![
                line(json!({"id": "t1-prompt", "type": "response", "command": "prompt", "success": false, "error": "No API key found for mock"})),
            ], vec![
                "error agent_error recoverable=true \"pi refused the message: No API key found for mock\"",
                "session_end Error \"pi refused the message: No API key found for mock\"",
            ]),
            ("a prompt handled without a run (an extension command)", vec![
                prompt_ok.clone(), state("t1-state-1", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "session_end Completed",
            ]),
            ("a probe answered while the run goes on changes nothing; an old probe's answer is ignored", vec![
                prompt_ok.clone(), Event::AgentStart, state("t1-state-1", true),
                Event::AgentEnd, state("t1-state-1", false), state("t1-state-2", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}",
                "session_end Completed",
            ]),
            ("a retry that succeeds; the failed message's usage counts too", vec![
                prompt_ok.clone(), Event::AgentStart, start.clone(),
                line(json!({"type": "message_end", "message": {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "503 busy"}})),
                Event::AgentEnd,
                line(json!({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "503 busy"})),
                state("t1-state-2", false),
                Event::AgentStart, start.clone(), text_delta(0, "ok"),
                assistant_end(json!([{"type": "text", "text": "ok"}]), "stop"),
                line(json!({"type": "auto_retry_end", "success": true, "attempt": 1})),
                Event::AgentEnd, state("t1-state-3", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}",
                "progress p-p1-retry done=false \"Model error (503 busy); retrying in 2 s (attempt 1 of 3)\"",
                "text p-m2-0 done=false \"ok\"",
                "text p-m2-0 done=true \"ok\"",
                "progress p-p1-retry done=true \"Model error recovered after 1 retry\"",
                "write {\"id\":\"t1-state-3\",\"type\":\"get_state\"}",
                "session_end Completed in=Some(3) out=Some(2) cache_read=Some(0) cache_write=Some(0) cost=Some(0.5)",
            ]),
            ("a compaction after the run delays the end", vec![
                prompt_ok.clone(), Event::AgentStart, Event::AgentEnd,
                line(json!({"type": "compaction_start", "reason": "threshold"})),
                line(json!({"id": "t1-state-2", "type": "response", "command": "get_state", "success": true, "data": {"isStreaming": false, "isCompacting": true}})),
                line(json!({"type": "compaction_end", "reason": "threshold", "aborted": false, "willRetry": false})),
                state("t1-state-3", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}",
                "progress p-p1-compaction done=false \"Compacting the conversation (threshold)\"",
                "progress p-p1-compaction done=true \"Conversation compacted\"",
                "write {\"id\":\"t1-state-3\",\"type\":\"get_state\"}",
                "session_end Completed",
            ]),
            ("output limit; thinking and text without deltas (lines lost) come whole at message_end", vec![
                Event::AgentStart, start.clone(),
                assistant_end(json!([{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "cut"}, {"type": "toolCall", "id": "x"}]), "length"),
                Event::AgentEnd, state("t1-state-1", false),
            ], vec![
                "thinking p-m1-0 done=true \"hm\"",
                "text p-m1-1 done=true \"cut\"",
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "session_end MaxTokens in=Some(3) out=Some(2) cache_read=Some(0) cache_write=Some(0) cost=Some(0.5)",
            ]),
            ("the final content wins over the streamed deltas", vec![
                Event::AgentStart, start.clone(), text_delta(0, "Hel"),
                line(json!({"type": "message_update", "assistantMessageEvent": {"type": "text_end", "contentIndex": 0, "content": "Hello"}})),
                assistant_end(json!([{"type": "text", "text": "Hello"}]), "stop"),
            ], vec![
                "text p-m1-0 done=false \"Hel\"",
                "text p-m1-0 done=true \"Hello\"",
            ]),
            ("extension dialogs are dismissed, notifications ignored, errors shown", vec![
                line(json!({"type": "extension_ui_request", "id": "u1", "method": "confirm", "title": "Allow?"})),
                line(json!({"type": "extension_ui_request", "id": "u2", "method": "notify", "message": "hi"})),
                line(json!({"type": "extension_error", "extensionPath": "/e.ts", "event": "tool_call", "error": "boom"})),
            ], vec![
                "write {\"cancelled\":true,\"id\":\"u1\",\"type\":\"extension_ui_response\"}",
                "error extension_error recoverable=true \"pi extension /e.ts failed: boom\"",
            ]),
            ("a tool that ends without a start; a repeated end is ignored", vec![
                line(json!({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "read", "result": {"content": [{"type": "text", "text": "x"}]}, "isError": false})),
                line(json!({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "read", "result": {"content": []}, "isError": false})),
                line(json!({"type": "tool_execution_start", "toolCallId": "c2", "toolName": "read", "args": {"path": "src/lib.rs"}})),
            ], vec![
                "tool_call p-c1 read Running null title=\"\"",
                "tool_call p-c1 read Done null title=\"\"",
                "tool_result p-c1 error=false \"x\"",
                "tool_call p-c2 read Running {\"path\":\"src/lib.rs\"} title=\"src/lib.rs\"",
            ]),
        ];
        for (name, events, want) in cases {
            assert_eq!(run(events), want, "{name}");
        }
    }

    #[test]
    fn exit_and_interrupt_close_what_is_open() {
        let start_tool = line(
            json!({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash", "args": {"command": "sleep 9"}}),
        );
        let delta = line(
            json!({"type": "message_update", "assistantMessageEvent": {"type": "thinking_delta", "contentIndex": 0, "delta": "hm"}}),
        );
        let mut mapper = TurnMapper::new("p", "t1", None, false);
        mapper.on_event(delta.clone());
        mapper.on_event(start_tool.clone());
        let got: Vec<String> = mapper.on_exit("pi exited with status 1:\nboom").iter().map(describe).collect();
        assert_eq!(
            got,
            [
                "thinking p-m0-0 done=true \"hm\"",
                "tool_call p-c1 bash Error {\"command\":\"sleep 9\"} title=\"sleep 9\"",
                "tool_result p-c1 error=true \"pi exited before the tool call finished\"",
                "error agent_exited recoverable=true \"pi exited with status 1:\\nboom\"",
                "session_end Error \"pi exited with status 1:\\nboom\"",
            ]
        );
        assert!(mapper.on_exit("again").is_empty() && mapper.on_interrupted().is_empty());
        assert!(mapper.on_event(Event::AgentEnd).is_empty(), "nothing after the end");

        // Exit while an abort is pending: the turn was interrupted, not failed.
        let mut mapper = TurnMapper::new("p", "t1", None, false);
        mapper.on_event(start_tool);
        mapper.interrupt_requested();
        assert!(mapper.on_event(state("t1-state-1", false)).is_empty(), "a probe does not end an interrupted turn");
        let got: Vec<String> = mapper.on_exit("killed").iter().map(describe).collect();
        assert_eq!(got[2], "session_end Interrupted");
        assert_eq!(got[1], "tool_result p-c1 error=true \"interrupted by the user\"");
    }

    #[test]
    fn streaming_is_throttled_and_bounded() {
        // 64 KiB in 80-byte deltas (mock:long's shape): the bytes sent stay linear.
        let mut stream = Stream::new(DeltaKind::Text, "s".into());
        let delta = "x".repeat(79) + "\n";
        let (mut sent, mut chunks, mut total) = (0usize, 0usize, 0usize);
        for _ in 0..820 {
            total += delta.len();
            if let Some(BlockKind::Text(t)) = stream.push(&delta) {
                sent += t.text.len();
                chunks += 1;
            }
        }
        let Some(BlockKind::Text(last)) = stream.finish() else { panic!() };
        assert_eq!((last.text.len(), last.done), (total, true));
        assert!(chunks < 100 && sent < 12 * total, "{chunks} chunks, {sent} bytes for {total}");
        assert!(stream.finish().is_none() && stream.push("more").is_none());

        // Beyond MAX_TEXT_BYTES the text is cut, with a note in the last chunk.
        let mut stream = Stream::new(DeltaKind::Thinking, "t".into());
        let big = "é".repeat(1000);
        for _ in 0..600 {
            stream.push(&big);
        }
        let Some(BlockKind::Thinking(last)) = stream.finish() else { panic!() };
        assert!(last.text.len() <= MAX_TEXT_BYTES + 64, "{}", last.text.len());
        assert!(last.text.ends_with(&format!("[truncated: {} bytes in all]", 600 * big.len())));

        // An empty block that never showed anything sends nothing.
        let mut empty = Stream::new(DeltaKind::Text, "e".into());
        assert!(empty.finish().is_none());
    }

    #[test]
    fn helpers() {
        assert_eq!(tool_title(&json!({"command": "ls -la\nsecond line"})).as_deref(), Some("ls -la"));
        assert_eq!(tool_title(&json!({"path": "a.rs", "content": "x"})).as_deref(), Some("a.rs"));
        assert_eq!(tool_title(&json!({"content": "x"})), None);
        assert_eq!(tool_title(&json!({"command": "z".repeat(500)})).unwrap().chars().count(), MAX_TITLE_CHARS + 1);
        let input = bounded_input(json!({"content": "y".repeat(MAX_INPUT_BYTES)}), MAX_INPUT_BYTES);
        assert!(input["truncated"].as_str().unwrap().len() < MAX_INPUT_BYTES + 100);
        assert_eq!(bounded("héllo", 2), "h\n… [truncated: 6 bytes in all]");
        let u = usage_of(&PiUsage {
            input: Some(10.4),
            output: Some(-1.0),
            cache_read: Some(f64::NAN),
            cache_write: None,
            cost: Some(crate::events::PiCost { total: Some(0.25) }),
        });
        assert_eq!(
            u,
            Usage {
                input_tokens: Some(10),
                output_tokens: Some(0),
                cache_read_tokens: None,
                cache_write_tokens: None,
                cost_usd: Some(0.25)
            }
        );
        let mut total = Usage::default();
        total.add(&u);
        total.add(&u);
        assert_eq!((total.input_tokens, total.cost_usd), (Some(20), Some(0.5)));
    }
}
