//! The ACP client side: one agent process, spoken to as a JSON-RPC peer over its stdio.
//!
//! Every message the agent writes goes through [`Connection::route`], which is where
//! the known ACP bug classes are absorbed:
//!
//! - **junk on stdout** (logs, spinners, escape sequences): the peer skips a line that is
//!   not JSON, or not JSON-RPC, and counts it; the host logs it and goes on;
//! - **updates before the `session/new` answer**: while a call is pending, updates are
//!   kept with the session id they name and sorted out once the answer says which
//!   session is ours;
//! - **updates after the `session/prompt` answer**: everything written before the
//!   answer is already queued when it arrives (the peer queues in order) and is drained
//!   first; then the host keeps listening for a short quiet period;
//! - **updates for a session that is not ours**: logged and dropped;
//! - **requests the host does not offer** (`fs/*`, `terminal/*`, anything unknown):
//!   answered at once with JSON-RPC "method not found", so the agent never hangs on them.
//!
//! Request ids the host sends are the peer's counter (1, 2, 3, … per process), so a
//! recorded conversation replays.

use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};
use terminull_adapter_sdk::child::{AgentProcess, SpawnOptions};
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::blocks::SessionEnd;
use terminull_protocol::jsonrpc::{Request, RequestId, RpcError, codes};
use terminull_protocol::text::suffix_within;
use terminull_rpc::{CallError, Incoming, Peer, PeerTasks};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout};

use crate::mapping::{Mapper, PromptEnd};
use crate::notice::{NoticeMatch, no_notice};
use crate::profile::Launch;
use crate::schema::{self, InitializeResult, PermissionParams, SessionScoped, SessionUpdate, method};

mod turn;

/// How long the agent has to answer `initialize` (cold starts of `npx`/Python agents are slow).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `session/new` and `session/set_*` may take.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `session/load` may take (it replays the whole history first).
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the agent has to end its turn after `session/cancel` before it is killed.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);
/// After the prompt answer, how long without a message ends the turn.
pub const SETTLE_QUIET: Duration = Duration::from_millis(50);
/// After the prompt answer, how long at most to keep listening.
pub const SETTLE_MAX: Duration = Duration::from_secs(1);
/// How long the agent has to exit once its stdin is closed (then SIGTERM, then SIGKILL).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// Updates kept while a call other than the prompt is pending.
const MAX_HELD_UPDATES: usize = 4096;
/// Messages read ahead while a permission request waits for the user.
const MAX_BACKLOG: usize = 4096;
/// Stderr lines of the agent held for the notice watcher (more are dropped).
const STDERR_LINES: usize = 256;

/// How long to wait for an agent whose stdout closed to be reaped.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// What one message from the agent means for the host.
#[derive(Debug)]
pub enum Routed {
    /// A `session/update` for the session it names.
    Update {
        /// The session named.
        session_id: String,
        /// The update.
        update: SessionUpdate,
    },
    /// A `session/request_permission` (still to be answered).
    Permission {
        /// The request (its id is the agent's).
        request: Request,
        /// Its params.
        params: PermissionParams,
    },
    /// The agent withdrew one of its requests (`$/cancel_request`).
    Withdrawn(RequestId),
    /// Nothing for the caller (answered, logged or skipped here).
    Handled,
}

/// A running ACP agent.
#[derive(Debug)]
pub struct Connection {
    process: AgentProcess,
    peer: Peer,
    incoming: terminull_rpc::IncomingQueue,
    _tasks: PeerTasks,
    backlog: VecDeque<Incoming>,
    stdout_closed: bool,
    /// What the agent said in `initialize`.
    pub info: InitializeResult,
    name: String,
    /// The agent's stderr lines (bounded; lines beyond it are dropped).
    stderr: mpsc::Receiver<String>,
    stderr_open: bool,
    /// Recognises the retry and failure notices among them.
    stderr_notice: NoticeMatch,
}

/// How a prompt went, before the mapper closes the turn.
#[derive(Debug)]
pub struct PromptOutcome {
    /// How it ended.
    pub end: PromptEnd,
    /// The user interrupted it (`session/cancel` was sent).
    pub interrupted: bool,
    /// The agent process is gone (exited or killed): start a new one for the next turn.
    pub lost: bool,
    /// The bridge went away: nothing more can be sent.
    pub bridge_gone: bool,
}

impl PromptOutcome {
    /// Closes the turn this prompt ran: what the mapper left open and the turn's
    /// `session_end` (or nothing when the bridge is gone); the turn's end reason. Call it
    /// once the agent process no longer holds the session, since `session_end` lets the
    /// bridge send the next message.
    pub async fn close_turn(self, mapper: &mut Mapper, turn: &mut Turn) -> EndReason {
        if self.bridge_gone {
            mapper.end_turn(PromptEnd::CancelTimedOut, true);
            return EndReason::Interrupted;
        }
        let mut reason = EndReason::Error;
        for block in mapper.end_turn(self.end, self.interrupted) {
            if let BlockKind::SessionEnd(SessionEnd { reason: r, .. }) = &block {
                reason = *r;
            }
            if !emit(turn, block).await {
                break;
            }
        }
        reason
    }
}

impl Connection {
    /// Starts the agent in `cwd` and performs the `initialize` handshake (protocol 1,
    /// no client file system, no client terminals).
    pub async fn start(launch: &Launch, cwd: &Path, name: &str) -> Result<Connection, AdapterError> {
        let mut cmd = Command::new(&launch.program);
        cmd.args(&launch.args).envs(launch.env.iter().map(|(k, v)| (k, v))).current_dir(cwd);
        tracing::info!(program = %launch.program.display(), args = ?launch.args, "starting {name}");
        let (stderr_tx, stderr) = mpsc::channel(STDERR_LINES);
        let options = SpawnOptions { stderr_lines: Some(stderr_tx), ..SpawnOptions::default() };
        let (process, (peer, incoming, tasks)) = AgentProcess::spawn_rpc(cmd, options, name)
            .map_err(|e| AdapterError::agent(format!("cannot start {name}: {e}")))?;
        let mut conn = Connection {
            process,
            peer,
            incoming,
            _tasks: tasks,
            backlog: VecDeque::new(),
            stdout_closed: false,
            info: InitializeResult::default(),
            name: name.to_owned(),
            stderr,
            stderr_open: true,
            stderr_notice: no_notice,
        };
        let params = json!({
            "protocolVersion": schema::PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
            "clientInfo": {"name": "terminull", "title": "terminull", "version": env!("CARGO_PKG_VERSION")},
        });
        let mut held = Vec::new();
        let answer = conn.call(method::INITIALIZE, params, INIT_TIMEOUT, &mut held).await;
        let result = match answer {
            Ok(value) => value,
            Err(e) => {
                let e = conn.failure("initialize", e).await;
                conn.shutdown().await;
                return Err(e);
            }
        };
        conn.info = serde_json::from_value(result).unwrap_or_else(|e| {
            tracing::warn!("{name}: malformed initialize result ({e}); assuming no capabilities");
            InitializeResult::default()
        });
        let version = conn.info.protocol_version.clone();
        if version.as_ref().and_then(Value::as_u64) != Some(schema::PROTOCOL_VERSION) {
            conn.shutdown().await;
            return Err(AdapterError::agent(format!(
                "{name} speaks ACP protocol version {}, this host speaks {}",
                version.map(|v| v.to_string()).unwrap_or_else(|| "(none)".into()),
                schema::PROTOCOL_VERSION
            )));
        }
        Ok(conn)
    }

    /// Reads the agent's stderr during turns for the notices `stderr_notice` recognises
    /// (see [`crate::notice`]).
    pub fn watch_stderr(&mut self, stderr_notice: NoticeMatch) {
        self.stderr_notice = stderr_notice;
    }

    /// The agent's own name and version (`agentInfo`).
    pub fn agent_version(&self) -> Option<String> {
        self.info.agent_info.as_ref().and_then(|i| i.version.clone())
    }

    /// Calls `method` and waits for its answer, reading what the agent sends meanwhile:
    /// session updates are held in `held` (with the session they name, bounded),
    /// permission requests are answered `cancelled` (no turn runs), the rest is routed.
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        deadline: Duration,
        held: &mut Vec<(String, SessionUpdate)>,
    ) -> Result<Value, CallError> {
        let peer = self.peer.clone();
        let method_owned = method.to_owned();
        let call = async move { peer.request_raw(&method_owned, params, Some(deadline)).await };
        tokio::pin!(call);
        loop {
            tokio::select! {
                biased;
                answer = &mut call => return answer,
                message = self.recv(), if !self.stdout_closed => {
                    let Some(message) = message else { continue };
                    match self.route(message).await {
                        Routed::Update { session_id, update } => {
                            if held.len() < MAX_HELD_UPDATES {
                                held.push((session_id, update));
                            } else {
                                tracing::warn!("{}: too many updates during `{method}`; dropping one", self.name);
                            }
                        }
                        Routed::Permission { request, .. } => {
                            tracing::warn!("{}: a permission request outside a turn; answering cancelled", self.name);
                            self.answer(request.id, json!({"outcome": {"outcome": "cancelled"}})).await;
                        }
                        Routed::Withdrawn(_) | Routed::Handled => {}
                    }
                }
            }
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) {
        if let Err(e) = self.peer.notify_raw(method, params).await {
            tracing::debug!("{}: cannot send `{method}`: {e}", self.name);
        }
    }

    async fn answer(&self, id: RequestId, result: Value) {
        if let Err(e) = self.peer.respond(id, Ok(result)).await {
            tracing::debug!("{}: cannot answer a request: {e}", self.name);
        }
    }

    /// The next message: read-ahead first, then the agent's stdout. `None` once stdout
    /// is closed.
    async fn recv(&mut self) -> Option<Incoming> {
        if let Some(message) = self.backlog.pop_front() {
            return Some(message);
        }
        if self.stdout_closed {
            return None;
        }
        let message = self.incoming.recv().await;
        if message.is_none() {
            self.stdout_closed = true;
        }
        message
    }

    /// What is already queued, without waiting.
    fn try_recv(&mut self) -> Option<Incoming> {
        if let Some(message) = self.backlog.pop_front() {
            return Some(message);
        }
        match self.incoming.try_recv() {
            Ok(message) => Some(message),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => {
                self.stdout_closed = true;
                None
            }
        }
    }

    /// Sorts one message out. See the [module documentation](self).
    pub async fn route(&mut self, message: Incoming) -> Routed {
        match message {
            Incoming::Notification(n) if n.method == method::SESSION_UPDATE => {
                let scoped: SessionScoped = serde_json::from_value(n.params.clone()).unwrap_or_default();
                match n.params.get("update") {
                    Some(update) => {
                        Routed::Update { session_id: scoped.session_id, update: SessionUpdate::parse(update) }
                    }
                    None => {
                        tracing::warn!("{}: a session/update without an update; skipped", self.name);
                        Routed::Handled
                    }
                }
            }
            Incoming::Notification(n) if n.method == method::CANCEL_REQUEST => {
                match n.params.get("requestId").and_then(RequestId::from_value) {
                    Some(id) => Routed::Withdrawn(id),
                    None => Routed::Handled,
                }
            }
            Incoming::Notification(n) => {
                tracing::debug!("{}: ignoring notification `{}`", self.name, n.method);
                Routed::Handled
            }
            Incoming::Request(request) if request.method == method::REQUEST_PERMISSION => {
                match serde_json::from_value::<PermissionParams>(request.params.clone()) {
                    Ok(params) => Routed::Permission { request, params },
                    Err(e) => {
                        let error = RpcError::new(codes::INVALID_PARAMS, format!("bad permission request: {e}"));
                        let _ = self.peer.respond(request.id, Err(error)).await;
                        Routed::Handled
                    }
                }
            }
            Incoming::Request(request) => {
                // fs/*, terminal/* (not offered in clientCapabilities), or anything else.
                tracing::info!("{}: answering `{}` with method not found", self.name, request.method);
                let _ = self.peer.respond(request.id, Err(RpcError::method_not_found(&request.method))).await;
                Routed::Handled
            }
            Incoming::BadLine(e) => {
                tracing::warn!("{}: skipping a line that is not ACP: {e}", self.name);
                Routed::Handled
            }
            Incoming::Invalid { error, id } => {
                tracing::warn!("{}: skipping a message that is not JSON-RPC: {error}", self.name);
                if let Some(id) = id {
                    let _ = self.peer.respond(id, Err(RpcError::new(codes::INVALID_REQUEST, error.to_string()))).await;
                }
                Routed::Handled
            }
        }
    }

    /// True while the agent's process runs and its stdout is open.
    pub fn alive(&mut self) -> bool {
        !self.stdout_closed && matches!(self.process.try_wait(), Ok(None))
    }

    /// Right after a session is opened: waits up to `wait` for the agent's slash
    /// commands (`available_commands_update`, which agents send just after answering
    /// `session/new`), keeping what else describes the session.
    pub async fn wait_for_commands(&mut self, session_id: &str, mapper: &mut Mapper, wait: Duration) {
        let until = Instant::now() + wait;
        loop {
            let message = match self.try_recv() {
                Some(message) => message,
                None if self.stdout_closed || mapper.has_commands() => return,
                None => match tokio::time::timeout_at(until, self.recv()).await {
                    Ok(Some(message)) => message,
                    Ok(None) | Err(_) => return,
                },
            };
            match self.route(message).await {
                Routed::Update { session_id: sid, update } if sid == session_id => mapper.outside_turn(update),
                Routed::Update { session_id: sid, .. } => {
                    tracing::debug!("{}: an update for session `{sid}`, not ours; dropped", self.name);
                }
                Routed::Permission { request, .. } => {
                    self.answer(request.id, json!({"outcome": {"outcome": "cancelled"}})).await;
                }
                Routed::Withdrawn(_) | Routed::Handled => {}
            }
        }
    }

    /// Handles what arrived between turns: nothing is shown; what describes the session
    /// (commands, mode) is kept, requests are refused.
    pub async fn drain_idle(&mut self, session_id: &str, mapper: &mut Mapper) {
        while let Some(message) = self.try_recv() {
            match self.route(message).await {
                Routed::Update { session_id: sid, update } if sid == session_id => mapper.outside_turn(update),
                Routed::Update { session_id: sid, .. } => {
                    tracing::debug!("{}: an update for session `{sid}`, not ours; dropped", self.name);
                }
                Routed::Permission { request, .. } => {
                    self.answer(request.id, json!({"outcome": {"outcome": "cancelled"}})).await;
                }
                Routed::Withdrawn(_) | Routed::Handled => {}
            }
        }
    }

    /// Describes a failed call: the agent's error, or how the process ended.
    pub async fn failure(&mut self, what: &str, e: CallError) -> AdapterError {
        match e {
            CallError::Rpc { error, .. } if error.code == schema::AUTH_REQUIRED => AdapterError::auth_required(
                format!("{} needs a login before `{what}`: {}", self.name, describe_error(&error)),
            ),
            CallError::Rpc { error, .. } => {
                AdapterError::agent(format!("{} refused `{what}`: {}", self.name, describe_error(&error)))
            }
            CallError::Timeout { after, .. } => {
                AdapterError::agent(format!("{} did not answer `{what}` within {after:?}", self.name))
            }
            other => {
                tracing::debug!("{what}: {other}");
                let report = self.exit_report().await;
                AdapterError::agent(format!("{} exited during `{what}` {report}", self.name))
            }
        }
    }

    /// Waits (bounded) for the process to exit and describes how it ended, with the
    /// tail of its stderr.
    pub async fn exit_report(&mut self) -> String {
        let status = match timeout(EXIT_WAIT, self.process.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("status unknown: {e}"),
            Err(_) => "still running".to_owned(),
        };
        let tail = stderr_tail(&self.process.stderr_tail());
        if tail.is_empty() { format!("({status})") } else { format!("({status}): {tail}") }
    }

    /// Ends the agent: close stdin, then SIGTERM, then SIGKILL, to its whole group.
    pub async fn shutdown(mut self) {
        // The peer's writer closes the agent's stdin when the last handle goes.
        drop(self.peer);
        drop(self._tasks);
        let outcome = self.process.shutdown(SHUTDOWN_GRACE).await;
        tracing::debug!(?outcome, "{} stopped", self.name);
    }
}

/// Sends one block ([`Turn::emit_lenient`]: a block the turn contract refuses is
/// logged and skipped); false only when the bridge is gone.
pub async fn emit(turn: &mut Turn, block: BlockKind) -> bool {
    match turn.emit_lenient(block).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("cannot send a block: {e}");
            false
        }
    }
}

/// An agent's JSON-RPC error for a person: its message (unwrapped when it is a provider's
/// JSON error body, as Gemini CLI forwards them), and its data when that says more.
pub fn describe_error(error: &RpcError) -> String {
    if let Ok(Value::Object(body)) = serde_json::from_str::<Value>(error.message.trim()) {
        let inner = body.get("error").and_then(Value::as_object).unwrap_or(&body);
        if let Some(message) = inner.get("message").and_then(Value::as_str) {
            let tags: Vec<String> = ["code", "status", "type"]
                .iter()
                .filter_map(|k| match inner.get(*k) {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                })
                .collect();
            return if tags.is_empty() { message.to_owned() } else { format!("{message} ({})", tags.join(" ")) };
        }
    }
    let detail = match &error.data {
        Some(Value::String(s)) if !s.trim().is_empty() && s != &error.message => Some(s.clone()),
        Some(Value::Object(map)) => ["details", "message", "error"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .filter(|s| !s.trim().is_empty() && *s != error.message)
            .map(str::to_owned),
        _ => None,
    };
    match detail {
        Some(detail) => format!("{} ({detail})", error.message),
        None => error.message.clone(),
    }
}

/// The last lines of stderr worth quoting: at most 12 lines and 2000 bytes, without
/// stack-frame lines.
pub fn stderr_tail(tail: &str) -> String {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("at "))
        .collect();
    let start = lines.len().saturating_sub(12);
    let joined = lines[start..].join("\n");
    if joined.len() <= 2000 {
        return joined;
    }
    format!("…{}", suffix_within(&joined, 2000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_errors_read_like_sentences() {
        let e = |message: &str, data: Option<Value>| RpcError { code: -32603, message: message.into(), data };
        assert_eq!(describe_error(&e("Internal error", None)), "Internal error");
        assert_eq!(
            describe_error(&e("Internal error", Some(json!({"details": "model overloaded"})))),
            "Internal error (model overloaded)"
        );
        assert_eq!(describe_error(&e("Internal error", Some(json!("Internal error")))), "Internal error");
        assert_eq!(
            describe_error(&e(r#"{"error":{"code":500,"message":"server error","status":"INTERNAL"}}"#, None)),
            "server error (500 INTERNAL)"
        );
        assert_eq!(describe_error(&e(r#"{"message":"plain"}"#, None)), "plain");
    }

    #[test]
    fn the_stderr_tail_drops_stack_frames_and_is_bounded() {
        let tail = "a\n    at f (x.js:1)\n\nb\n";
        assert_eq!(stderr_tail(tail), "a\nb");
        let many: String = (0..50).map(|i| format!("line {i}\n")).collect();
        assert_eq!(stderr_tail(&many).lines().count(), 12);
        let long = "x".repeat(5000);
        assert!(stderr_tail(&long).len() <= 2000 + 3);
    }
}
