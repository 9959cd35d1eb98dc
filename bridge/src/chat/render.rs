//! Blocks to terminal lines. Streamed text is rebuilt with the client's [`Transcript`]
//! (an append adds its piece, a snapshot that extends what was shown adds the rest, one
//! that rewrites it shows the whole text again; a piece that does not fit, a gap, shows
//! nothing and asks to resume the session from before that message). Complete lines
//! are laid out as markdown; the unfinished last line is shown as a [`Out::Partial`]
//! that the next output replaces, so the reply grows in place above the prompt.
//!
//! A user message that arrives while a turn runs (typed during a reply, from here or
//! another device) waits until the turn ends: it is queued for the agent anyway, and
//! shown in the middle it would split the reply.

use std::collections::HashMap;

use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::blocks::{
    Block, BlockKind, EndReason, Ownership, PermissionRequest, PlanStatus, ToolCall, ToolStatus,
};

use super::markdown::Markdown;
use super::style::Style;

/// At most this many user messages wait for a turn to end (the bridge queues fewer).
const MAX_DEFERRED: usize = 64;
/// A tool card's input summary is cut to this many characters (a card is one line).
const CARD_INPUT_CHARS: usize = 100;

/// One piece of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// A finished line: it replaces the unfinished line shown, if any, and stays.
    Line(String),
    /// The unfinished line as it stands now: it replaces the one shown before.
    Partial(String),
}

/// What was shown of one streamed message.
#[derive(Debug, Default)]
struct Shown {
    /// The text seen so far (to tell an extension from a rewrite).
    seen: String,
    /// Bytes of `seen` printed as finished lines.
    done: usize,
    /// Markdown state after those lines.
    md: Markdown,
}

/// Renders blocks for a person.
#[derive(Debug, Default)]
pub struct Renderer {
    /// How to decorate.
    style: Style,
    /// The session as received: streamed text rebuilt, repeats by `seq` dropped.
    transcript: Transcript,
    /// Per streamed message (`type:id`), what was shown.
    shown: HashMap<String, Shown>,
    /// The message or tool card whose unfinished line is shown, and that line.
    open: Option<(String, String)>,
    /// Where to resume the session from to repair a gap, once asked.
    resume: Option<u64>,
    /// A turn runs (a user message was shown and its `session_end` has not come).
    in_turn: bool,
    /// User messages that came during the turn, shown when it ends.
    deferred: Vec<String>,
    /// The agent line shown last (an adapter that restarts says the same again).
    agent_line: Option<String>,
}

impl Renderer {
    /// A renderer decorating with `style`.
    pub fn new(style: Style) -> Self {
        Renderer { style, ..Renderer::default() }
    }

    /// The output for `block`.
    pub fn render(&mut self, block: &Block) -> Vec<Out> {
        let mut out = Vec::new();
        match self.transcript.apply(block.clone()) {
            Applied::Duplicate => return out,
            Applied::Gap { since_seq } => {
                self.resume = Some(self.resume.map_or(since_seq, |held| held.min(since_seq)));
                return out;
            }
            Applied::Added | Applied::Rebuilt => {}
        }
        if let Some((key, _)) = &self.open
            && key.starts_with("perm:")
        {
            // The agent went on (or the turn ended) while the question was shown.
            let answered = !matches!(block.kind, BlockKind::SessionEnd(_));
            let verdict = if answered { "— answered" } else { "— not answered" };
            out.push(Out::Line(format!("  {} {}", self.style.yellow(QUESTION), self.style.dim(verdict))));
            self.open = None;
        }
        match &block.kind {
            BlockKind::Text(t) | BlockKind::Thinking(t) => {
                let thinking = matches!(block.kind, BlockKind::Thinking(_));
                let Some(message) = self.transcript.message(block) else { return out };
                let (text, done) = (message.text().to_owned(), message.is_done());
                self.streamed(format!("{}:{}", block.block_type(), t.id), &text, done, thinking, &mut out);
            }
            BlockKind::UserMessage(m) => {
                if self.in_turn {
                    if self.deferred.len() < MAX_DEFERRED {
                        self.deferred.push(m.text.clone());
                    }
                } else {
                    self.close(&mut out);
                    self.user_lines(&m.text, &mut out);
                    self.in_turn = true;
                }
            }
            BlockKind::ToolCall(call) => {
                let key = format!("tool:{}", call.id);
                let card = self.tool_card(call);
                if self.open.as_ref().is_none_or(|(k, _)| *k != key) {
                    self.close(&mut out);
                }
                if call.status == ToolStatus::Running {
                    // Replaced in place by its next status while nothing else came.
                    out.push(Out::Partial(card.clone()));
                    self.open = Some((key, card));
                } else {
                    out.push(Out::Line(card));
                    self.open = None;
                }
            }
            BlockKind::PermissionRequest(p) => {
                self.close(&mut out);
                for line in permission_lines(p, self.style).lines() {
                    out.push(Out::Line(line.to_owned()));
                }
                // Replaced by the answer, or by "answered" when the agent goes on.
                let question = format!("  {}", self.style.yellow(QUESTION));
                out.push(Out::Partial(question.clone()));
                self.open = Some((format!("perm:{}", p.request_id), question));
            }
            BlockKind::SessionEnd(end) => {
                self.close(&mut out);
                if end.reason != EndReason::Completed {
                    let reason = format!("{:?}", end.reason).to_lowercase();
                    let why = end.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
                    out.push(Out::Line(self.style.dim(&format!("── turn ended: {reason}{why} ──"))));
                }
                self.in_turn = false;
                for text in std::mem::take(&mut self.deferred) {
                    self.user_lines(&text, &mut out);
                    self.in_turn = true;
                }
            }
            BlockKind::AgentInfo(_) if self.agent_line.as_deref() == Some(self.describe(&block.kind).as_str()) => {}
            other => {
                self.close(&mut out);
                if matches!(other, BlockKind::AgentInfo(_)) {
                    self.agent_line = Some(self.describe(other));
                }
                for line in self.describe(other).lines() {
                    out.push(Out::Line(line.to_owned()));
                }
            }
        }
        out
    }

    /// The `seq` to resume the session from when a streamed message met a gap since
    /// the last call (a piece of it missing); `None` otherwise.
    pub fn take_resume(&mut self) -> Option<u64> {
        self.resume.take()
    }

    /// The answer to the permission request shown, in place of its question.
    pub fn answer(&mut self, allowed: bool, typed: &str) -> Vec<Out> {
        let mut out = Vec::new();
        if self.open.as_ref().is_some_and(|(key, _)| key.starts_with("perm:")) {
            self.open = None;
        } else {
            self.close(&mut out);
        }
        out.push(Out::Line(answer_line(allowed, typed, self.style)));
        out
    }

    /// Makes the unfinished line shown, if any, a finished one.
    pub fn close(&mut self, out: &mut Vec<Out>) {
        if let Some((key, line)) = self.open.take() {
            if let Some(shown) = self.shown.get_mut(&key) {
                shown.done = shown.seen.len();
            }
            out.push(Out::Line(line));
        }
    }

    fn streamed(&mut self, key: String, text: &str, done: bool, thinking: bool, out: &mut Vec<Out>) {
        if self.open.as_ref().is_none_or(|(k, _)| *k != key) {
            self.close(out);
        }
        let style = self.style;
        let mut shown = self.shown.remove(&key).unwrap_or_default();
        if !text.starts_with(shown.seen.as_str()) {
            // Not an extension of what was shown: show the whole text again.
            if let Some((_, line)) = self.open.take() {
                out.push(Out::Line(line));
            }
            shown = Shown::default();
        }
        shown.seen = text.to_owned();
        let decorate = |md: &mut Markdown, line: &str, first: bool, peek: bool| {
            let laid = if peek { md.peek(line, style) } else { md.line(line, style) };
            match (thinking, first) {
                (true, true) => style.dim(&format!("(thinking) {}", super::style::strip_ansi(&laid))),
                (true, false) => style.dim(&super::style::strip_ansi(&laid)),
                (false, _) => laid,
            }
        };
        while let Some(end) = text[shown.done..].find('\n') {
            let first = shown.done == 0;
            let line = &text[shown.done..shown.done + end];
            out.push(Out::Line(decorate(&mut shown.md, line, first, false)));
            shown.done += end + 1;
        }
        let rest = &text[shown.done..];
        let first = shown.done == 0;
        if done {
            if !rest.is_empty() {
                out.push(Out::Line(decorate(&mut shown.md, rest, first, false)));
                shown.done = text.len();
            }
            self.open = None;
        } else if rest.is_empty() {
            self.open = None;
        } else {
            let line = decorate(&mut shown.md, rest, first, true);
            out.push(Out::Partial(line.clone()));
            self.open = Some((key.clone(), line));
        }
        self.shown.insert(key, shown);
    }

    fn user_lines(&self, text: &str, out: &mut Vec<Out>) {
        for (i, line) in text.lines().enumerate() {
            let marker = if i == 0 { self.style.cyan(&self.style.bold("❯")) } else { " ".to_owned() };
            out.push(Out::Line(format!("{marker} {}", self.style.bold(line))));
        }
    }

    fn tool_card(&self, call: &ToolCall) -> String {
        let s = self.style;
        let (mark, status) = match call.status {
            ToolStatus::Running => (s.yellow("⚙"), s.yellow("running")),
            ToolStatus::Done => (s.green("✓"), s.green("done")),
            ToolStatus::Error => (s.red("✗"), s.red("error")),
        };
        let name = call.title.as_deref().unwrap_or(&call.name);
        let mut summary = input_summary(&call.input);
        if summary.chars().count() > CARD_INPUT_CHARS {
            summary = summary.chars().take(CARD_INPUT_CHARS - 1).collect::<String>() + "…";
        }
        let summary = if summary.is_empty() { String::new() } else { format!(" {}", s.dim(&summary)) };
        format!("{mark} {}{summary} · {status}", s.bold(name))
    }

    fn describe(&self, kind: &BlockKind) -> String {
        let s = self.style;
        match kind {
            BlockKind::AgentInfo(a) => s.dim(&format!(
                "── {} {}{} ──",
                a.name,
                a.version.as_deref().unwrap_or(""),
                a.model.as_deref().map(|m| format!(" · {m}")).unwrap_or_default()
            )),
            BlockKind::ToolResult(r) => {
                let first = r.output.lines().next().unwrap_or("");
                let first: String = first.chars().take(CARD_INPUT_CHARS * 2).collect();
                if r.is_error { s.red(&format!("  ↳ error: {first}")) } else { s.dim(&format!("  ↳ {first}")) }
            }
            BlockKind::Plan(p) => p
                .entries
                .iter()
                .map(|e| {
                    let mark = match e.status {
                        PlanStatus::Pending => " ",
                        PlanStatus::InProgress => "~",
                        PlanStatus::Completed => "x",
                    };
                    format!("  [{mark}] {}", e.content)
                })
                .collect::<Vec<_>>()
                .join("\n"),
            BlockKind::Diff(d) => s.yellow(&format!("± {}", d.path)),
            BlockKind::Progress(p) => s.dim(&format!("… {}", p.message)),
            BlockKind::BgTask(t) => s.dim(&format!("⧗ {}", t.title)),
            BlockKind::Error(e) => s.red(&format!("error: {}", e.message)),
            BlockKind::SessionSummary(summary) => {
                s.dim(&format!("── {} ──", summary.title.as_deref().unwrap_or("summary")))
            }
            BlockKind::SessionState(state) => {
                let mut line = s.dim(&format!(
                    "── {} ──",
                    state.message.as_deref().unwrap_or(match state.state {
                        Ownership::Parked => "parked: a terminal drives this session",
                        Ownership::Live => "live",
                    })
                ));
                if let Some(argv) = &state.resume_command {
                    line.push_str(&format!("\n   continue in a terminal: {}", argv.join(" ")));
                }
                line
            }
            BlockKind::UserMessage(_)
            | BlockKind::PermissionRequest(_)
            | BlockKind::ToolCall(_)
            | BlockKind::SessionEnd(_)
            | BlockKind::Text(_)
            | BlockKind::Thinking(_) => String::new(),
        }
    }
}

/// What a tool input says in a few words: its command, path, pattern or URL when it
/// has one, else its compact JSON.
pub fn input_summary(input: &serde_json::Value) -> String {
    const KEYS: &[&str] = &["command", "cmd", "file_path", "path", "pattern", "url", "query", "text"];
    if let Some(object) = input.as_object() {
        for key in KEYS {
            match object.get(*key) {
                Some(serde_json::Value::String(s)) => return s.clone(),
                Some(serde_json::Value::Array(parts)) if parts.iter().all(|p| p.is_string()) => {
                    return parts.iter().filter_map(|p| p.as_str()).collect::<Vec<_>>().join(" ");
                }
                _ => {}
            }
        }
    }
    match input {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The question under a permission request.
const QUESTION: &str = "allow? [y/N]";

/// A permission request: the tool, then the whole of what it would run (every line,
/// never cut; the terminal wraps long ones). The question follows as an unfinished line.
fn permission_lines(p: &PermissionRequest, s: Style) -> String {
    let mut lines = vec![format!("{} {} {}", s.yellow(&s.bold("?")), s.bold(&p.tool), s.yellow("asks to run:"))];
    for line in input_summary(&p.input).lines() {
        lines.push(format!("  {line}"));
    }
    lines.join("\n")
}

/// The line recording the answer to a permission request, as the transcript shows it.
pub fn answer_line(allowed: bool, typed: &str, style: Style) -> String {
    let verdict = if allowed { style.green("allowed") } else { style.red("denied") };
    format!("  {} {} — {verdict}", style.yellow(QUESTION), typed.trim())
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
