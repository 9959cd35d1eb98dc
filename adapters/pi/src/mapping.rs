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
//! | `message_update` `text_*` / `thinking_*` | `text` / `thinking` appends, one per delta (bounded); `*_end` closes the block with its whole text |
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
//! **Bounded output.** pi streams token deltas, and each one is sent as one append (the
//! new text and its offset), so the bytes sent stay linear in the answer's length
//! however many deltas there are. Text is cut at [`MAX_TEXT_BYTES`], tool output at
//! [`MAX_TOOL_OUTPUT_BYTES`], tool input at [`MAX_INPUT_BYTES`].

use std::collections::BTreeMap;

use serde_json::Value;
pub use terminull_adapter_sdk::bounds::bounded;
use terminull_adapter_sdk::bounds::{bounded_input, cut, first_line};
use terminull_adapter_sdk::streamer::{StreamKind, TextStreamer};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, ErrorBlock, Progress, SessionEnd, Usage};

use crate::command;
use crate::events::{Content, Delta, DeltaKind, Event, Message, PiUsage, Response, State};

/// The SDK's shared limits, used by this mapping.
pub use terminull_adapter_sdk::bounds::{
    MAX_ERROR_BYTES, MAX_INPUT_BYTES, MAX_TEXT_BYTES, MAX_TITLE_CHARS, MAX_TOOL_OUTPUT_BYTES,
};

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

/// One streamed text or thinking block: its text so far (bounded) in a [`TextStreamer`].
#[derive(Debug)]
struct Stream {
    streamer: TextStreamer,
    /// Bytes the block has in all (more than the streamer holds once it was cut).
    seen: usize,
    /// The block's whole text as pi reported it at its end, cut, not yet streamed.
    full: Option<String>,
    emitted: bool,
}

impl Stream {
    fn new(kind: DeltaKind, id: String) -> Self {
        let kind = match kind {
            DeltaKind::Text => StreamKind::Text,
            DeltaKind::Thinking => StreamKind::Thinking,
        };
        Stream { streamer: TextStreamer::new(kind, id), seen: 0, full: None, emitted: false }
    }

    /// Appends a delta; the append to send (nothing once the text reached its bound).
    fn push(&mut self, delta: &str) -> Option<BlockKind> {
        if self.streamer.is_finished() {
            return None;
        }
        self.seen += delta.len();
        let part = cut(delta, MAX_TEXT_BYTES.saturating_sub(self.streamer.text().len()));
        if part.is_empty() {
            return None;
        }
        self.emitted = true;
        Some(self.streamer.push(part))
    }

    /// Takes the block's whole text as pi reports it at its end; the `done: true` chunk
    /// carries what it adds.
    fn set_full(&mut self, full: &str) {
        if self.streamer.is_finished() {
            return;
        }
        self.full = Some(cut(full, MAX_TEXT_BYTES).to_owned());
        self.seen = full.len();
    }

    /// The one `done: true` chunk: what the whole text adds to what was streamed, with
    /// a note when the text was cut; nothing for a block that never showed anything.
    fn finish(&mut self) -> Option<BlockKind> {
        if self.streamer.is_finished() {
            return None;
        }
        let shown = self.full.take().unwrap_or_else(|| self.streamer.text().to_owned());
        if !self.emitted && shown.trim().is_empty() {
            self.close();
            return None;
        }
        let whole = if self.seen > shown.len() {
            format!("{shown}\n… [truncated: {} bytes in all]", self.seen)
        } else {
            shown
        };
        let chunk = self.streamer.finish_with(&whole);
        self.close();
        chunk
    }

    /// Marks the block finished and lets its text go: the stream stays so that its id
    /// is never reopened, and no chunk follows.
    fn close(&mut self) {
        let mut closed = TextStreamer::new(self.streamer.kind(), self.streamer.id().clone());
        let _ = closed.finish();
        self.streamer = closed;
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
                out.extend(stream.finish().map(Action::Emit));
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
            out.extend(stream.finish().map(Action::Emit));
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
            out.extend(stream.finish().map(Action::Emit));
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
mod tests;
