//! Recorded stdio transcripts of an adapter: the format, a recorder that drives an
//! adapter through a fixed script, and a replay harness that checks an adapter still
//! answers the way a recorded transcript says. The user's guide is `docs/transcripts.md`.
//!
//! # Format
//!
//! A transcript is JSONL: one entry per line, in the order the messages crossed the
//! adapter's stdio. Each entry is an object with `dir` and either `msg` or `raw`:
//!
//! ```text
//! {"dir":"to_adapter","msg":{"id":1,"jsonrpc":"2.0","method":"initialize","params":{…}}}
//! {"dir":"from_adapter","msg":{"id":1,"jsonrpc":"2.0","result":{…}}}
//! {"dir":"from_adapter","raw":"npm WARN something printed to stdout"}
//! ```
//!
//! - `to_adapter`: a message the bridge side wrote to the adapter's stdin (`msg` only).
//! - `from_adapter` with `msg`: one JSON line the adapter wrote to stdout (any JSON
//!   value, normally a JSON-RPC response or notification).
//! - `from_adapter` with `raw`: a stdout line that is not JSON, as text. A line over
//!   the protocol's 8 MiB cap is recorded as `raw` `"<line N too long: B bytes>"`.
//!
//! Blank lines of a transcript file are ignored. Blank stdout lines are skipped, as the
//! protocol's framing does.
//!
//! # Normalisation
//!
//! Entries are stored normalised, so that two runs of a deterministic adapter give the
//! same transcript ([`Normalizer`]). Both directions go through the same rules:
//!
//! - every `ts`, `server_ts` and `updated_at` whose value is a number becomes `0`;
//! - the `id` of a `text`, `thinking`, `progress`, `bg_task` or `tool_call` block (an
//!   object whose `type` is one of those) and every string under `tool_call_id`,
//!   `parent_id` or `request_id` becomes `<id-1>`, `<id-2>`, … numbered by first
//!   appearance (one numbering for all of them, so a `tool_result` points at the
//!   placeholder of its call);
//! - every string under `agent_session_id` or `resume_session_id` becomes
//!   `<agent-session-1>`, `<agent-session-2>`, … by first appearance;
//! - the session's working directory (a fresh temporary directory, also in its
//!   canonical form) becomes `<cwd>` wherever it occurs inside a string, `raw` lines
//!   included;
//! - in the result of `detect`, `path` becomes `<path>` and `version` becomes `<version>`
//!   when present (they describe the machine, not the adapter).
//!
//! JSON-RPC request ids are kept: the script numbers them 1, 2, 3, … Within one message,
//! object keys are visited in sorted order, so the numbering does not depend on the
//! order in which the adapter wrote its keys.
//!
//! # Recording
//!
//! [`record`] runs a fixed, deterministic [`Script`] on one adapter process with a plain
//! line driver (one request at a time, nothing concurrent): `initialize` → `detect` →
//! `list_models` (only when the declaration says `provides_models`) → `start` → `send`
//! and the turn up to its `session_end` block → `get_usage` (only when `provides_usage`)
//! → `stop` → the adapter's exit. Every line both ways is recorded in order.
//!
//! # Replaying
//!
//! [`replay`] starts the adapter afresh with a new temporary directory as the session's
//! `cwd` and walks the transcript: a `to_adapter` entry is written (with `<cwd>` and the
//! id placeholders turned back into this run's values), a `from_adapter` entry is
//! compared with the next line the adapter writes, normalised by the same rules with
//! fresh numbering. It stops at the first difference and reports it
//! ([`Mismatch`]). After the last entry the adapter must write nothing more and exit.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use terminull_process::child::{AgentProcess, LineReceiver, Lines, SpawnError, SpawnOptions, WriteError};
use terminull_protocol::ndjson::LineError;
use tokio::process::Command;
use tokio::time::Instant;

/// The environment variable that tells the golden-transcript tests to re-record the
/// files under `tests/transcripts/` instead of checking them (`TERMINULL_UPDATE_TRANSCRIPTS=1`).
pub const UPDATE_ENV: &str = "TERMINULL_UPDATE_TRANSCRIPTS";

/// The placeholder for the session's working directory.
pub const CWD_PLACEHOLDER: &str = "<cwd>";

/// The init params the recorder offers in `initialize`: all six of protocol version 1.
const OFFERED_INIT_PARAMS: [&str; 7] =
    ["cwd", "model", "binary", "resume_session_id", "on_session_id", "effort", "permission_mode"];

/// Block types whose `id` is an adapter-minted id that the normaliser numbers.
const ID_BLOCK_TYPES: [&str; 5] = ["text", "thinking", "progress", "bg_task", "tool_call"];

/// Keys whose number values are timestamps.
const TIME_KEYS: [&str; 3] = ["ts", "server_ts", "updated_at"];

/// Keys whose string values are block-level ids (tool calls, permission requests).
const ID_REF_KEYS: [&str; 3] = ["tool_call_id", "parent_id", "request_id"];

/// Keys whose string values are the agent's own session ids.
const AGENT_SESSION_KEYS: [&str; 2] = ["agent_session_id", "resume_session_id"];

/// How long the final shutdown waits at each step for an adapter that is still running.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

// ─────────────────────────────────────────────────────────────────────────────────────
// Entries and JSONL
// ─────────────────────────────────────────────────────────────────────────────────────

/// Which way a line crossed the adapter's stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Written by the bridge side to the adapter's stdin.
    ToAdapter,
    /// Written by the adapter to its stdout.
    FromAdapter,
}

impl Direction {
    /// The wire value of `dir`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ToAdapter => "to_adapter",
            Direction::FromAdapter => "from_adapter",
        }
    }
}

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WireEntry", into = "WireEntry")]
pub enum Entry {
    /// A JSON-RPC message the bridge side wrote to the adapter.
    ToAdapter(Value),
    /// A JSON line the adapter wrote.
    FromAdapter(Value),
    /// A stdout line of the adapter that is not JSON.
    FromAdapterRaw(String),
}

impl Entry {
    /// Which way the line went.
    pub fn dir(&self) -> Direction {
        match self {
            Entry::ToAdapter(_) => Direction::ToAdapter,
            Entry::FromAdapter(_) | Entry::FromAdapterRaw(_) => Direction::FromAdapter,
        }
    }

    /// The JSON message, unless this is a raw line.
    pub fn msg(&self) -> Option<&Value> {
        match self {
            Entry::ToAdapter(msg) | Entry::FromAdapter(msg) => Some(msg),
            Entry::FromAdapterRaw(_) => None,
        }
    }

    /// The entry as one line of JSONL, without the newline.
    pub fn to_json_line(&self) -> String {
        // Written by hand: `Value`'s Display is compact JSON and cannot fail.
        match self {
            Entry::ToAdapter(msg) | Entry::FromAdapter(msg) => {
                format!("{{\"dir\":\"{}\",\"msg\":{msg}}}", self.dir().as_str())
            }
            Entry::FromAdapterRaw(raw) => {
                format!("{{\"dir\":\"{}\",\"raw\":{}}}", self.dir().as_str(), Value::String(raw.clone()))
            }
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_line())
    }
}

/// The on-disk shape of an entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEntry {
    dir: Direction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    msg: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
}

impl TryFrom<WireEntry> for Entry {
    type Error = String;

    fn try_from(wire: WireEntry) -> Result<Self, Self::Error> {
        match (wire.dir, wire.msg, wire.raw) {
            (Direction::ToAdapter, Some(msg), None) => Ok(Entry::ToAdapter(msg)),
            (Direction::FromAdapter, Some(msg), None) => Ok(Entry::FromAdapter(msg)),
            (Direction::FromAdapter, None, Some(raw)) => Ok(Entry::FromAdapterRaw(raw)),
            (Direction::ToAdapter, _, Some(_)) => Err("a to_adapter entry has `msg`, never `raw`".to_owned()),
            (_, Some(_), Some(_)) => Err("an entry has either `msg` or `raw`, not both".to_owned()),
            (_, None, None) => Err("an entry needs `msg` or `raw`".to_owned()),
        }
    }
}

impl From<Entry> for WireEntry {
    fn from(entry: Entry) -> Self {
        let dir = entry.dir();
        match entry {
            Entry::ToAdapter(msg) | Entry::FromAdapter(msg) => WireEntry { dir, msg: Some(msg), raw: None },
            Entry::FromAdapterRaw(raw) => WireEntry { dir, msg: None, raw: Some(raw) },
        }
    }
}

/// Writes entries as JSONL: one line each, every line ending in `\n`.
pub fn to_jsonl(entries: &[Entry]) -> String {
    let mut out = String::new();
    for entry in entries {
        out.push_str(&entry.to_json_line());
        out.push('\n');
    }
    out
}

/// Reads a JSONL transcript. Blank lines are skipped; a bad line is an error naming its
/// 1-based line number.
pub fn parse_jsonl(text: &str) -> Result<Vec<Entry>, TranscriptError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str::<Entry>(line)
            .map_err(|e| TranscriptError::Parse { line: i + 1, problem: e.to_string() })?;
        entries.push(entry);
    }
    Ok(entries)
}

// ─────────────────────────────────────────────────────────────────────────────────────
// Errors
// ─────────────────────────────────────────────────────────────────────────────────────

/// Why recording or replaying could not be carried out. (An adapter that answers
/// differently from a transcript is not an error of [`replay`]: it is the
/// [`ReplayReport`]'s [`Mismatch`].)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The session's temporary working directory could not be created.
    #[error("could not create a temporary directory for the session: {0}")]
    TempDir(#[source] io::Error),
    /// The adapter could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// A request could not be written to the adapter.
    #[error("could not send `{method}` to the adapter: {source}{}", tail_suffix(.stderr_tail))]
    Write {
        /// The request's method.
        method: String,
        /// The write error.
        #[source]
        source: WriteError,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// The adapter did not answer a request in time.
    #[error("no answer to `{method}` within {waited:?}{}", tail_suffix(.stderr_tail))]
    Timeout {
        /// The request's method.
        method: String,
        /// How long the recorder waited.
        waited: Duration,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// The turn started by `send` did not end with a `session_end` block in time.
    #[error("the turn did not end with a session_end block within {waited:?}{}", tail_suffix(.stderr_tail))]
    TurnTimeout {
        /// How long the recorder waited.
        waited: Duration,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// The adapter closed its stdout (typically: it exited) while an answer was due.
    #[error("the adapter closed its stdout while the recorder waited for {waiting_for}{}", tail_suffix(.stderr_tail))]
    Closed {
        /// What the recorder was waiting for, such as "the answer to `start`".
        waiting_for: String,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// `initialize` was answered without a declaration, so the script cannot go on.
    #[error("`initialize` was not answered with a declaration: {response}")]
    Initialize {
        /// The adapter's response.
        response: Value,
    },
    /// The adapter did not exit after `stop`.
    #[error("the adapter did not exit within {waited:?} after the script ended{}", tail_suffix(.stderr_tail))]
    NoExit {
        /// How long the recorder waited.
        waited: Duration,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// A transcript line is not a valid entry.
    #[error("transcript line {line}: {problem}")]
    Parse {
        /// 1-based line number in the JSONL text.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() { String::new() } else { format!("; the adapter's stderr ends with:\n{tail}") }
}

// ─────────────────────────────────────────────────────────────────────────────────────
// Normalisation
// ─────────────────────────────────────────────────────────────────────────────────────

/// A numbering of run-specific values: value → `<prefix-N>` by first appearance.
#[derive(Debug, Clone, Default)]
struct Placeholders {
    prefix: &'static str,
    by_value: HashMap<String, String>,
    by_placeholder: HashMap<String, String>,
}

impl Placeholders {
    fn new(prefix: &'static str) -> Self {
        Self { prefix, ..Self::default() }
    }

    fn placeholder(&mut self, value: &str) -> String {
        if let Some(p) = self.by_value.get(value) {
            return p.clone();
        }
        let p = format!("<{}-{}>", self.prefix, self.by_value.len() + 1);
        self.by_value.insert(value.to_owned(), p.clone());
        self.by_placeholder.insert(p.clone(), value.to_owned());
        p
    }

    fn value(&self, placeholder: &str) -> Option<&str> {
        self.by_placeholder.get(placeholder).map(String::as_str)
    }
}

/// Applies the transcript's normalisation rules (see the [module documentation](self))
/// to the messages of one run, in order. It is stateful: ids are numbered by first
/// appearance across the whole run, and the methods of requests seen going to the
/// adapter are remembered so that their responses can get method-specific rules.
#[derive(Debug, Clone)]
pub struct Normalizer {
    /// The forms of the session's cwd, longest first.
    cwd_forms: Vec<String>,
    /// The form written back by [`denormalize`](Self::denormalize).
    cwd: String,
    ids: Placeholders,
    agent_sessions: Placeholders,
    /// Outstanding requests: the id as compact JSON → the method.
    pending: HashMap<String, String>,
}

impl Normalizer {
    /// A normaliser for a run whose session's working directory is `cwd`. Both `cwd` as
    /// given and its canonical form (symlinks resolved) are replaced by `<cwd>`.
    pub fn new(cwd: &Path) -> Self {
        let given = cwd.to_string_lossy().into_owned();
        let mut cwd_forms = vec![given.clone()];
        if let Ok(canonical) = cwd.canonicalize() {
            let canonical = canonical.to_string_lossy().into_owned();
            if canonical != given {
                cwd_forms.push(canonical);
            }
        }
        cwd_forms.retain(|f| !f.is_empty());
        cwd_forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        Self {
            cwd_forms,
            cwd: given,
            ids: Placeholders::new("id"),
            agent_sessions: Placeholders::new("agent-session"),
            pending: HashMap::new(),
        }
    }

    /// Normalises a message written to the adapter and remembers the method of a request.
    pub fn to_adapter(&mut self, msg: &Value) -> Value {
        if let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str)) {
            self.pending.insert(id.to_string(), method.to_owned());
        }
        let mut out = msg.clone();
        self.walk(&mut out);
        out
    }

    /// Normalises a JSON line the adapter wrote.
    pub fn from_adapter(&mut self, msg: &Value) -> Value {
        let mut out = msg.clone();
        self.walk(&mut out);
        let is_response = msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some());
        let method = match msg.get("id") {
            Some(id) if is_response => self.pending.remove(&id.to_string()),
            _ => None,
        };
        if method.as_deref() == Some("detect")
            && let Some(result) = out.get_mut("result").and_then(Value::as_object_mut)
        {
            for (key, placeholder) in [("path", "<path>"), ("version", "<version>")] {
                if let Some(v) = result.get_mut(key)
                    && !v.is_null()
                {
                    *v = Value::String(placeholder.to_owned());
                }
            }
        }
        out
    }

    /// Normalises a stdout line that is not JSON (only `<cwd>` applies).
    pub fn raw(&self, line: &str) -> String {
        self.replace_cwd(line)
    }

    /// Normalises one entry of a raw (not yet normalised) run.
    pub fn entry(&mut self, entry: &Entry) -> Entry {
        match entry {
            Entry::ToAdapter(msg) => Entry::ToAdapter(self.to_adapter(msg)),
            Entry::FromAdapter(msg) => Entry::FromAdapter(self.from_adapter(msg)),
            Entry::FromAdapterRaw(raw) => Entry::FromAdapterRaw(self.raw(raw)),
        }
    }

    /// Turns a normalised message back into this run's values, for writing it to the
    /// adapter: `<cwd>` inside any string becomes this run's directory, and a string
    /// that is exactly an id or agent-session placeholder already numbered in this run
    /// becomes the value it stands for. Unknown placeholders stay as they are.
    pub fn denormalize(&self, msg: &Value) -> Value {
        let mut out = msg.clone();
        self.unwalk(&mut out);
        out
    }

    fn walk(&mut self, v: &mut Value) {
        match v {
            Value::Object(map) => self.walk_object(map),
            Value::Array(items) => items.iter_mut().for_each(|item| self.walk(item)),
            Value::String(s) => *s = self.replace_cwd(s),
            _ => {}
        }
    }

    fn walk_object(&mut self, map: &mut Map<String, Value>) {
        let is_id_block = map.get("type").and_then(Value::as_str).is_some_and(|t| ID_BLOCK_TYPES.contains(&t));
        for (key, child) in map.iter_mut() {
            let key = key.as_str();
            match child {
                Value::Number(_) if TIME_KEYS.contains(&key) => *child = json!(0),
                Value::String(s) if key == "id" && is_id_block => *s = self.ids.placeholder(s),
                Value::String(s) if ID_REF_KEYS.contains(&key) => *s = self.ids.placeholder(s),
                Value::String(s) if AGENT_SESSION_KEYS.contains(&key) => *s = self.agent_sessions.placeholder(s),
                _ => self.walk(child),
            }
        }
    }

    fn unwalk(&self, v: &mut Value) {
        match v {
            Value::Object(map) => map.values_mut().for_each(|child| self.unwalk(child)),
            Value::Array(items) => items.iter_mut().for_each(|item| self.unwalk(item)),
            Value::String(s) => {
                if let Some(real) = self.ids.value(s).or_else(|| self.agent_sessions.value(s)) {
                    *s = real.to_owned();
                } else if s.contains(CWD_PLACEHOLDER) {
                    *s = s.replace(CWD_PLACEHOLDER, &self.cwd);
                }
            }
            _ => {}
        }
    }

    fn replace_cwd(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for form in &self.cwd_forms {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), CWD_PLACEHOLDER);
            }
        }
        out
    }
}

/// Normalises the entries of one raw run whose session's working directory was `cwd`.
pub fn normalize(entries: &[Entry], cwd: &Path) -> Vec<Entry> {
    let mut normalizer = Normalizer::new(cwd);
    entries.iter().map(|e| normalizer.entry(e)).collect()
}

// ─────────────────────────────────────────────────────────────────────────────────────
// The adapter process, read line by line
// ─────────────────────────────────────────────────────────────────────────────────────

/// One stdout line of the adapter.
#[derive(Debug, Clone, PartialEq)]
enum Line {
    Json(Value),
    Raw(String),
}

/// The outcome of waiting for a stdout line.
#[derive(Debug)]
enum Read {
    Line(Line),
    /// stdout reached end of file.
    Closed,
    TimedOut,
}

/// An adapter process driven one line at a time.
#[derive(Debug)]
struct Driven {
    process: AgentProcess,
    lines: LineReceiver,
}

impl Driven {
    fn spawn(program: &OsStr, args: &[String]) -> Result<Self, TranscriptError> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        // Text lines, so that a line that is not JSON is kept whole for its `raw` entry.
        let opts = SpawnOptions { lines: Lines::Text, ..SpawnOptions::default() };
        let (process, lines) = AgentProcess::spawn(cmd, opts)?;
        Ok(Self { process, lines })
    }

    async fn write(&mut self, msg: &Value) -> Result<(), WriteError> {
        self.process.write_json(msg).await
    }

    /// The next non-blank stdout line, or why there is none by `deadline`.
    async fn next(&mut self, deadline: Instant) -> Read {
        loop {
            let item = match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Err(_) => return Read::TimedOut,
                Ok(None) => return Read::Closed,
                Ok(Some(item)) => item,
            };
            let line = match item {
                Ok(Value::String(text)) => {
                    if text.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Value>(&text) {
                        Ok(v) => Line::Json(v),
                        Err(_) => Line::Raw(text),
                    }
                }
                // Text mode yields strings only; keep anything else as the JSON it is.
                Ok(other) => Line::Json(other),
                Err(LineError::TooLong { line, length, .. }) => {
                    Line::Raw(format!("<line {line} too long: {length} bytes>"))
                }
                Err(LineError::NotJson { preview, .. }) => Line::Raw(preview),
                Err(other) => Line::Raw(format!("<{other}>")),
            };
            tracing::trace!(?line, "adapter line");
            return Read::Line(line);
        }
    }

    /// Waits until `deadline` for the process to exit (stdout must be drained first).
    async fn wait_exit(&mut self, deadline: Instant) -> Option<ExitStatus> {
        tokio::time::timeout_at(deadline, self.process.wait()).await.ok().and_then(Result::ok)
    }

    /// Ends the process whatever state it is in; its exit status when known.
    async fn shutdown(&mut self) -> Option<ExitStatus> {
        self.process.shutdown(SHUTDOWN_GRACE).await.status
    }

    fn stderr_tail(&self) -> String {
        self.process.stderr_tail()
    }
}

fn temp_cwd() -> Result<tempfile::TempDir, TranscriptError> {
    tempfile::Builder::new().prefix("terminull-transcript-").tempdir().map_err(TranscriptError::TempDir)
}

// ─────────────────────────────────────────────────────────────────────────────────────
// Recording
// ─────────────────────────────────────────────────────────────────────────────────────

/// The fixed script [`record`] runs. [`Script::default`] is the one the golden
/// transcripts use; the fields exist so a caller can vary the prompt or the timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `start`'s `session_id`. Default `transcript-session`.
    pub session_id: String,
    /// The text of the one `send`. Default `hello transcript`.
    pub prompt: String,
    /// `start`'s `model` when the adapter accepts `model` but does not provide models
    /// (when it does, the default model of its `list_models` answer is used). Default
    /// `default`.
    pub model: String,
    /// `start`'s `effort` when the adapter accepts `effort`. Default `medium`.
    pub effort: String,
    /// How long to wait for each response. Default 20 s.
    pub response_timeout: Duration,
    /// How long to wait, after `send` was answered, for the turn's `session_end`. Default 20 s.
    pub turn_timeout: Duration,
    /// How long the adapter has to exit after `stop` was answered. Default 5 s.
    pub exit_timeout: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            session_id: "transcript-session".to_owned(),
            prompt: "hello transcript".to_owned(),
            model: "default".to_owned(),
            effort: "medium".to_owned(),
            response_timeout: Duration::from_secs(20),
            turn_timeout: Duration::from_secs(20),
            exit_timeout: Duration::from_secs(5),
        }
    }
}

/// The recorder's state for one run.
#[derive(Debug)]
struct Recorder<'a> {
    adapter: Driven,
    script: &'a Script,
    /// Everything both ways, not yet normalised.
    entries: Vec<Entry>,
    next_id: u64,
}

impl Recorder<'_> {
    /// Writes a request and records it; returns its id.
    async fn send(&mut self, method: &str, params: Option<Value>) -> Result<u64, TranscriptError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        self.entries.push(Entry::ToAdapter(msg.clone()));
        if let Err(source) = self.adapter.write(&msg).await {
            return Err(TranscriptError::Write {
                method: method.to_owned(),
                source,
                stderr_tail: self.adapter.stderr_tail(),
            });
        }
        Ok(id)
    }

    /// Reads and records one line; `waiting_for` names what the caller waits for.
    async fn read(&mut self, deadline: Instant, waiting_for: &str) -> Result<Option<Value>, ReadFailure> {
        match self.adapter.next(deadline).await {
            Read::Line(Line::Json(v)) => {
                self.entries.push(Entry::FromAdapter(v.clone()));
                Ok(Some(v))
            }
            Read::Line(Line::Raw(raw)) => {
                self.entries.push(Entry::FromAdapterRaw(raw));
                Ok(None)
            }
            Read::Closed => Err(ReadFailure::Closed(waiting_for.to_owned())),
            Read::TimedOut => Err(ReadFailure::TimedOut),
        }
    }

    /// Sends a request and records lines until its response; returns the response.
    /// `on_line` sees every JSON line before the response.
    async fn call(
        &mut self,
        method: &str,
        params: Option<Value>,
        mut on_line: impl FnMut(&Value),
    ) -> Result<Value, TranscriptError> {
        let id = self.send(method, params).await?;
        let deadline = Instant::now() + self.script.response_timeout;
        loop {
            match self.read(deadline, &format!("the answer to `{method}`")).await {
                Ok(Some(v)) if is_response_to(&v, id) => return Ok(v),
                Ok(Some(v)) => on_line(&v),
                Ok(None) => {}
                Err(failure) => return Err(self.failure(failure, method, self.script.response_timeout, false)),
            }
        }
    }

    fn failure(&self, failure: ReadFailure, method: &str, waited: Duration, turn: bool) -> TranscriptError {
        let stderr_tail = self.adapter.stderr_tail();
        match failure {
            ReadFailure::Closed(waiting_for) => TranscriptError::Closed { waiting_for, stderr_tail },
            ReadFailure::TimedOut if turn => TranscriptError::TurnTimeout { waited, stderr_tail },
            ReadFailure::TimedOut => TranscriptError::Timeout { method: method.to_owned(), waited, stderr_tail },
        }
    }

    async fn run(&mut self, cwd: &Path) -> Result<(), TranscriptError> {
        let script = self.script;
        let init = self
            .call(
                "initialize",
                Some(json!({
                    "protocol_version": 1,
                    "bridge": {"name": "terminull", "version": "transcript"},
                    "offered_init_params": OFFERED_INIT_PARAMS,
                })),
                |_| {},
            )
            .await?;
        let Some(declaration) = init.get("result").filter(|r| r.is_object()).cloned() else {
            return Err(TranscriptError::Initialize { response: init });
        };
        let accepted: Vec<&str> = declaration
            .get("accepted_init_params")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let provides = |flag: &str| declaration.get(flag) == Some(&Value::Bool(true));

        self.call("detect", None, |_| {}).await?;

        let mut model = script.model.clone();
        if provides("provides_models") {
            let models = self.call("list_models", None, |_| {}).await?;
            if let Some(id) = default_model(&models) {
                model = id;
            }
        }

        let mut start = json!({"session_id": script.session_id});
        for (param, value) in
            [("cwd", cwd.to_string_lossy().into_owned()), ("model", model), ("effort", script.effort.clone())]
        {
            if accepted.contains(&param) {
                start[param] = Value::String(value);
            }
        }
        self.call("start", Some(start), |_| {}).await?;

        let mut ended = false;
        let ack = self.call("send", Some(json!({"text": script.prompt})), |v| ended |= is_session_end(v)).await?;
        if ack.get("result").is_some() && !ended {
            let deadline = Instant::now() + script.turn_timeout;
            loop {
                match self.read(deadline, "the turn's session_end").await {
                    Ok(Some(v)) if is_session_end(&v) => break,
                    Ok(_) => {}
                    Err(failure) => return Err(self.failure(failure, "send", script.turn_timeout, true)),
                }
            }
        }

        if provides("provides_usage") {
            self.call("get_usage", None, |_| {}).await?;
        }
        self.call("stop", None, |_| {}).await?;

        // Whatever the adapter still writes is recorded; then it must exit.
        let deadline = Instant::now() + script.exit_timeout;
        let no_exit = |adapter: &Driven| TranscriptError::NoExit {
            waited: script.exit_timeout,
            stderr_tail: adapter.stderr_tail(),
        };
        loop {
            match self.read(deadline, "the adapter's exit").await {
                Ok(_) => {}
                Err(ReadFailure::Closed(_)) => break,
                Err(ReadFailure::TimedOut) => return Err(no_exit(&self.adapter)),
            }
        }
        match self.adapter.wait_exit(deadline).await {
            Some(_) => Ok(()),
            None => Err(no_exit(&self.adapter)),
        }
    }
}

/// Why no line was read.
#[derive(Debug)]
enum ReadFailure {
    /// stdout closed while waiting for the named thing.
    Closed(String),
    TimedOut,
}

fn is_response_to(msg: &Value, id: u64) -> bool {
    msg.get("method").is_none()
        && msg.get("id").and_then(Value::as_u64) == Some(id)
        && (msg.get("result").is_some() || msg.get("error").is_some())
}

fn is_session_end(msg: &Value) -> bool {
    msg.get("method").and_then(Value::as_str) == Some("stream")
        && msg.pointer("/params/block/type").and_then(Value::as_str) == Some("session_end")
}

/// The id of the model marked `is_default` in a `list_models` response, else the first.
fn default_model(response: &Value) -> Option<String> {
    let models = response.pointer("/result/models")?.as_array()?;
    let default = models.iter().find(|m| m.get("is_default") == Some(&Value::Bool(true))).or(models.first())?;
    default.get("id")?.as_str().map(str::to_owned)
}

/// Runs `program args…` as an adapter through `script` and returns the normalised
/// transcript of everything written both ways. The session's `cwd` is a fresh
/// temporary directory, removed afterwards; the adapter process itself runs in the
/// caller's working directory, so relative paths in `args` work. Fails when the adapter
/// cannot be started, does not answer a request or end the turn in time, refuses
/// `initialize`, or does not exit after `stop`; error responses to other requests are
/// simply recorded.
pub async fn record(
    program: impl AsRef<OsStr>,
    args: &[String],
    script: &Script,
) -> Result<Vec<Entry>, TranscriptError> {
    let dir = temp_cwd()?;
    let adapter = Driven::spawn(program.as_ref(), args)?;
    let mut recorder = Recorder { adapter, script, entries: Vec::new(), next_id: 1 };
    let outcome = recorder.run(dir.path()).await;
    recorder.adapter.shutdown().await;
    outcome?;
    Ok(normalize(&recorder.entries, dir.path()))
}

// ─────────────────────────────────────────────────────────────────────────────────────
// Replaying
// ─────────────────────────────────────────────────────────────────────────────────────

/// Timeouts of [`replay_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// How long to wait for each line the transcript expects. Default 20 s.
    pub line_timeout: Duration,
    /// How long the adapter has, after the last entry, to close stdout and exit. Default 5 s.
    pub exit_timeout: Duration,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self { line_timeout: Duration::from_secs(20), exit_timeout: Duration::from_secs(5) }
    }
}

/// Where an adapter departed from a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// 0-based index of the transcript entry (its JSONL line is `entry + 1` when the
    /// file has no blank lines). Equal to the transcript's length for what happens
    /// after its last entry.
    pub entry: usize,
    /// What went wrong.
    pub kind: MismatchKind,
}

/// The kinds of [`Mismatch`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MismatchKind {
    /// The adapter wrote a different line.
    Different {
        /// The transcript's entry.
        expected: Entry,
        /// The adapter's line, normalised.
        actual: Entry,
        /// JSON pointer to the first difference inside `msg` (`/params/block/text`);
        /// empty when the lines differ as a whole (a raw line against a JSON one).
        path: String,
    },
    /// The adapter wrote nothing within the line timeout.
    Timeout {
        /// The transcript's entry.
        expected: Entry,
        /// How long replay waited.
        waited: Duration,
    },
    /// The adapter closed its stdout (typically: it exited) while a line was expected.
    Closed {
        /// The transcript's entry.
        expected: Entry,
    },
    /// A message could not be written to the adapter (it closed its stdin or exited).
    WriteFailed {
        /// The message, as written.
        entry: Entry,
        /// The write error.
        error: String,
    },
    /// After the transcript's last entry, the adapter wrote another line.
    Extra {
        /// The adapter's line, normalised.
        actual: Entry,
    },
    /// After the transcript's last entry, the adapter did not exit in time.
    NoExit {
        /// How long replay waited.
        waited: Duration,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry {} (transcript line {}): ", self.entry, self.entry + 1)?;
        match &self.kind {
            MismatchKind::Different { expected, actual, path } => {
                let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
                write!(f, "the adapter's line differs{at}\n  expected: {expected}\n  actual:   {actual}")
            }
            MismatchKind::Timeout { expected, waited } => {
                write!(f, "the adapter wrote nothing within {waited:?}\n  expected: {expected}")
            }
            MismatchKind::Closed { expected } => {
                write!(f, "the adapter closed its stdout\n  expected: {expected}")
            }
            MismatchKind::WriteFailed { entry, error } => {
                write!(f, "could not write to the adapter: {error}\n  message: {entry}")
            }
            MismatchKind::Extra { actual } => {
                write!(f, "the transcript has ended but the adapter wrote another line\n  actual:   {actual}")
            }
            MismatchKind::NoExit { waited } => {
                write!(f, "the transcript has ended but the adapter did not exit within {waited:?}")
            }
        }
    }
}

/// The outcome of [`replay`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// Entries in the transcript.
    pub entries: usize,
    /// `to_adapter` entries written to the adapter.
    pub sent: usize,
    /// `from_adapter` entries the adapter matched.
    pub matched: usize,
    /// The first difference; `None` when the adapter matched the whole transcript and
    /// exited.
    pub mismatch: Option<Mismatch>,
    /// The adapter's exit status, when it was reaped.
    pub exit_status: Option<ExitStatus>,
    /// The adapter's last stderr lines.
    pub stderr_tail: String,
}

impl ReplayReport {
    /// True when the adapter matched every entry and exited.
    pub fn is_match(&self) -> bool {
        self.mismatch.is_none()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mismatch {
            None => write!(
                f,
                "transcript matched: {} entries, {} sent, {} adapter lines matched",
                self.entries, self.sent, self.matched
            )?,
            Some(mismatch) => write!(
                f,
                "transcript mismatch after {} sent and {} matched of {} entries: {mismatch}",
                self.sent, self.matched, self.entries
            )?,
        }
        if let Some(status) = self.exit_status {
            write!(f, "\nadapter {status}")?;
        }
        if self.mismatch.is_some() && !self.stderr_tail.is_empty() {
            write!(f, "\nthe adapter's stderr ends with:\n{}", self.stderr_tail)?;
        }
        Ok(())
    }
}

/// [`replay_with`] with the default [`ReplayOptions`].
pub async fn replay(
    transcript: &[Entry],
    program: impl AsRef<OsStr>,
    args: &[String],
) -> Result<ReplayReport, TranscriptError> {
    replay_with(transcript, program, args, &ReplayOptions::default()).await
}

/// Runs `program args…` as an adapter and drives it with the `to_adapter` side of
/// `transcript`, comparing every line it writes with the transcript's `from_adapter`
/// entries (see the [module documentation](self)). Stops at the first difference. An
/// adapter that departs from the transcript gives `Ok` with a [`Mismatch`] in the
/// report; `Err` means the replay itself could not run.
pub async fn replay_with(
    transcript: &[Entry],
    program: impl AsRef<OsStr>,
    args: &[String],
    opts: &ReplayOptions,
) -> Result<ReplayReport, TranscriptError> {
    let dir = temp_cwd()?;
    let mut adapter = Driven::spawn(program.as_ref(), args)?;
    let mut report = ReplayReport {
        entries: transcript.len(),
        sent: 0,
        matched: 0,
        mismatch: None,
        exit_status: None,
        stderr_tail: String::new(),
    };
    let kind = drive(transcript, &mut adapter, dir.path(), opts, &mut report).await;
    report.mismatch = kind.map(|(entry, kind)| Mismatch { entry, kind });
    let status = adapter.shutdown().await;
    report.exit_status = report.exit_status.or(status);
    report.stderr_tail = adapter.stderr_tail();
    Ok(report)
}

/// The replay walk; returns the first mismatch and its entry index.
async fn drive(
    transcript: &[Entry],
    adapter: &mut Driven,
    cwd: &Path,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> Option<(usize, MismatchKind)> {
    let mut normalizer = Normalizer::new(cwd);
    for (index, expected) in transcript.iter().enumerate() {
        if let Entry::ToAdapter(msg) = expected {
            let actual = normalizer.denormalize(msg);
            normalizer.to_adapter(&actual);
            if let Err(e) = adapter.write(&actual).await {
                let kind = MismatchKind::WriteFailed { entry: Entry::ToAdapter(actual), error: e.to_string() };
                return Some((index, kind));
            }
            report.sent += 1;
            continue;
        }
        let actual = match adapter.next(Instant::now() + opts.line_timeout).await {
            Read::Line(Line::Json(v)) => Entry::FromAdapter(normalizer.from_adapter(&v)),
            Read::Line(Line::Raw(raw)) => Entry::FromAdapterRaw(normalizer.raw(&raw)),
            Read::Closed => return Some((index, MismatchKind::Closed { expected: expected.clone() })),
            Read::TimedOut => {
                let kind = MismatchKind::Timeout { expected: expected.clone(), waited: opts.line_timeout };
                return Some((index, kind));
            }
        };
        if let Some(path) = entry_difference(expected, &actual) {
            return Some((index, MismatchKind::Different { expected: expected.clone(), actual, path }));
        }
        report.matched += 1;
    }

    // The transcript is done: the adapter must write nothing more and exit.
    let end = transcript.len();
    let deadline = Instant::now() + opts.exit_timeout;
    match adapter.next(deadline).await {
        Read::Line(line) => {
            let actual = match line {
                Line::Json(v) => Entry::FromAdapter(normalizer.from_adapter(&v)),
                Line::Raw(raw) => Entry::FromAdapterRaw(normalizer.raw(&raw)),
            };
            return Some((end, MismatchKind::Extra { actual }));
        }
        Read::Closed => {}
        Read::TimedOut => return Some((end, MismatchKind::NoExit { waited: opts.exit_timeout })),
    }
    match adapter.wait_exit(deadline).await {
        Some(status) => {
            report.exit_status = Some(status);
            None
        }
        None => Some((end, MismatchKind::NoExit { waited: opts.exit_timeout })),
    }
}

/// Where two entries differ: `None` when equal, else a JSON pointer into `msg` (empty
/// when they differ as a whole).
fn entry_difference(expected: &Entry, actual: &Entry) -> Option<String> {
    match (expected, actual) {
        (Entry::FromAdapter(a), Entry::FromAdapter(b)) | (Entry::ToAdapter(a), Entry::ToAdapter(b)) => {
            first_difference(a, b, String::new())
        }
        _ if expected == actual => None,
        _ => Some(String::new()),
    }
}

/// JSON pointer to the first place where `a` and `b` differ, keys in sorted order.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let here = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => first_difference(u, v, here),
                    _ => Some(here),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            let common =
                x.iter().zip(y).enumerate().find_map(|(i, (u, v))| first_difference(u, v, format!("{path}/{i}")));
            common.or_else(|| (x.len() != y.len()).then(|| format!("{path}/{}", x.len().min(y.len()))))
        }
        _ if a == b => None,
        _ => Some(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_difference_points_at_the_first_differing_leaf() {
        let a = json!({"a": 1, "b": {"c": [1, 2, {"d": "x"}]}});
        assert_eq!(first_difference(&a, &a, String::new()), None);
        let b = json!({"a": 1, "b": {"c": [1, 2, {"d": "y"}]}});
        assert_eq!(first_difference(&a, &b, String::new()).as_deref(), Some("/b/c/2/d"));
        let c = json!({"a": 1, "b": {"c": [1, 2]}});
        assert_eq!(first_difference(&a, &c, String::new()).as_deref(), Some("/b/c/2"));
        let d = json!({"a": 1, "b": {"c": [1, 2, {"d": "x"}]}, "a/b": 0});
        assert_eq!(first_difference(&a, &d, String::new()).as_deref(), Some("/a~1b"));
        assert_eq!(first_difference(&json!(1), &json!("1"), String::new()).as_deref(), Some(""));
    }

    #[test]
    fn raw_and_json_lines_differ_as_a_whole() {
        let json = Entry::FromAdapter(json!({"a": 1}));
        let raw = Entry::FromAdapterRaw("a".into());
        assert_eq!(entry_difference(&json, &raw).as_deref(), Some(""));
        assert_eq!(entry_difference(&raw, &raw), None);
    }

    #[test]
    fn the_model_is_the_default_one_else_the_first() {
        let r = json!({"result": {"models": [{"id": "a"}, {"id": "b", "is_default": true}]}});
        assert_eq!(default_model(&r).as_deref(), Some("b"));
        let r = json!({"result": {"models": [{"id": "a"}, {"id": "b"}]}});
        assert_eq!(default_model(&r).as_deref(), Some("a"));
        assert_eq!(default_model(&json!({"error": {"code": -32601, "message": "no"}})), None);
    }
}
