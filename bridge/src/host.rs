//! The adapter host: runs one adapter executable and is the bridge's only way to
//! talk to it.
//!
//! - The adapter runs in its own process group, with the user's environment plus
//!   the agent's `env` from config.
//! - [`launch`] does the handshake under a deadline and the contract check; a
//!   refused adapter is shut down and the error names the adapter, its path and every
//!   violation.
//! - One ordered dispatch task per child turns what it writes into
//!   [`AdapterEvent`]s, in the order written: blocks are validated (a bad one becomes
//!   an event naming the field, never a crash), bad lines are counted and logged
//!   without dropping the child, and when the adapter exits (its own death, noticed
//!   from the process, not from stdout: a descendant may hold stdout open) the exit
//!   status and the stderr tail are reported. Updates written before `start` answers wait in the
//!   event queue; nothing is lost.
//! - Calls carry the per-method deadline of `adapter::response_timeout`.
//! - [`HostedAdapter::shutdown`] closes stdin, waits, then SIGTERM and SIGKILL of
//!   the whole group.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use terminull_process::child::{AgentProcess, ShutdownOutcome, SpawnOptions};
use terminull_protocol::adapter::{
    self as proto, AdapterNotification, AdapterRequest, ContractViolation, Declaration, InitParam, check_declaration,
};
use terminull_protocol::blocks::{self, Block};
use terminull_protocol::ids::AgentSessionId;
use terminull_protocol::ndjson::LineError;
use terminull_rpc::{CallError, Held, Incoming, IncomingQueue, Peer, PeerTasks};
use tokio::sync::mpsc;

/// Events queued per adapter before its reader waits (back-pressure on the child).
const EVENT_QUEUE: usize = 4096;
/// How long the stdin → SIGTERM → SIGKILL ladder waits at each step.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Once the adapter process has exited, how long what it wrote before exiting may
/// still be read from stdout before the exit is reported (stdout may never close: a
/// process it left behind can hold it).
pub const EXIT_DRAIN: Duration = Duration::from_millis(300);

/// How to start an adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Added to the inherited environment.
    pub env: Vec<(String, String)>,
}

impl AdapterCommand {
    /// `program` with no arguments and no extra environment.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self { program: program.into(), args: Vec::new(), env: Vec::new() }
    }

    /// The command line, for logs and errors.
    pub fn display(&self) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Something the adapter did, in the order it did it.
#[derive(Debug, Clone, PartialEq)]
pub enum AdapterEvent {
    /// A valid streamed block (without `seq`; the session stamps it).
    Block(Block),
    /// The agent's own session id (`session_id` notification).
    AgentSessionId(AgentSessionId),
    /// A streamed block that failed validation, or a message the bridge cannot use;
    /// the text names what is wrong.
    Invalid(String),
    /// A stdout line that was too long or not JSON; it was skipped.
    BadLine(LineError),
    /// The adapter exited (noticed from the process itself), or closed its stdout.
    /// Always the last event.
    Exited {
        /// The exit status, when the process was reaped.
        status: Option<ExitStatus>,
        /// The last lines it wrote to stderr.
        stderr_tail: String,
    },
}

/// Why an adapter could not be brought up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The executable could not be started.
    #[error("adapter {command}: cannot start: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        source: terminull_process::child::SpawnError,
    },
    /// No answer to `initialize` in time.
    #[error("adapter {command}: no answer to initialize within {after:?}")]
    HandshakeTimeout {
        /// The command.
        command: String,
        /// The deadline.
        after: Duration,
    },
    /// The process went away during the handshake.
    #[error("adapter {command}: exited during initialize ({status}){}", tail_suffix(stderr_tail))]
    ExitedDuringHandshake {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
        /// Its last stderr lines.
        stderr_tail: String,
    },
    /// `initialize` was answered with an error (e.g. a protocol version mismatch).
    #[error("adapter {command}: initialize failed: {error}")]
    Initialize {
        /// The command.
        command: String,
        /// The error.
        error: CallError,
    },
    /// The declaration broke the contract.
    #[error("adapter {agent} ({path}) refused: {}", violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Refused {
        /// The declared agent id, or `?`.
        agent: String,
        /// The executable.
        path: String,
        /// Every violation.
        violations: Vec<ContractViolation>,
    },
}

fn tail_suffix(tail: &str) -> String {
    let tail = tail.trim_end();
    if tail.is_empty() { String::new() } else { format!("; stderr tail:\n{tail}") }
}

/// A running, handshake-checked adapter.
#[derive(Debug)]
pub struct HostedAdapter {
    command: AdapterCommand,
    declaration: Declaration,
    process: AgentProcess,
    peer: Option<Peer>,
    tasks: Option<PeerTasks>,
    /// What the adapter sent, each holding its bytes' share of the peer's incoming
    /// budget until the session takes it: the adapter's stdout is back-pressured by the
    /// bytes waiting here, not only by their count.
    events: mpsc::Receiver<(AdapterEvent, Held)>,
    /// stdout has closed; the exit is still to be reported.
    stdout_closed: bool,
    /// The `Exited` event has been handed out.
    exit_reported: bool,
    /// Set when the process itself was seen to exit: until then stdout is still read.
    drain_until: Option<tokio::time::Instant>,
}

/// Starts an adapter and runs the handshake and the contract check.
pub async fn launch(command: AdapterCommand, handshake_timeout: Duration) -> Result<HostedAdapter, HostError> {
    let label = command.display();
    let mut cmd = tokio::process::Command::new(&command.program);
    cmd.args(&command.args);
    for (k, v) in &command.env {
        cmd.env(k, v);
    }
    let (mut process, (peer, incoming, tasks)) =
        AgentProcess::spawn_rpc(cmd, SpawnOptions { record: false, ..SpawnOptions::default() }, label.clone())
            .map_err(|source| HostError::Spawn { command: label.clone(), source })?;
    // Events are dispatched from the start, so nothing written before `start` answers is lost.
    let (tx, events) = mpsc::channel(EVENT_QUEUE);
    tokio::spawn(dispatch(incoming, tx, peer.clone(), label.clone()));
    tracing::debug!(adapter = %label, pid = process.pid(), "handshake");
    let params = proto::InitializeParams::from_bridge(
        proto::PeerInfo { name: "terminull".into(), version: env!("CARGO_PKG_VERSION").into() },
        InitParam::ALL.to_vec(),
    );
    let answer = {
        let request = peer.request_raw(
            proto::Initialize::METHOD,
            serde_json::to_value(params).unwrap_or_default(),
            Some(handshake_timeout),
        );
        tokio::pin!(request);
        // An adapter that dies is noticed from the process, even when something it started
        // holds its stdout open; an answer it wrote before dying still counts.
        tokio::select! {
            answer = &mut request => answer,
            _ = process.exited() => match tokio::time::timeout(EXIT_DRAIN, &mut request).await {
                Ok(answer) => answer,
                Err(_) => Err(CallError::Closed { method: proto::Initialize::METHOD.to_owned() }),
            },
        }
    };
    let refused = match answer {
        Ok(raw) => match check_declaration(&raw) {
            Ok(declaration) => {
                return Ok(HostedAdapter {
                    command,
                    declaration,
                    process,
                    peer: Some(peer),
                    tasks: Some(tasks),
                    events,
                    stdout_closed: false,
                    exit_reported: false,
                    drain_until: None,
                });
            }
            Err(violations) => HostError::Refused {
                agent: raw.get("agent_id").and_then(|v| v.as_str()).unwrap_or("?").to_owned(),
                path: command.program.display().to_string(),
                violations,
            },
        },
        Err(CallError::Timeout { after, .. }) => HostError::HandshakeTimeout { command: label, after },
        Err(CallError::Closed { .. }) => {
            let status = match tokio::time::timeout(SHUTDOWN_GRACE, process.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                _ => "stdout closed".to_owned(),
            };
            HostError::ExitedDuringHandshake { command: label, status, stderr_tail: process.stderr_tail() }
        }
        Err(error) => HostError::Initialize { command: label, error },
    };
    // Closing our ends closes the child's stdin; then the shutdown ladder.
    drop((peer, tasks, events));
    process.shutdown(SHUTDOWN_GRACE).await;
    Err(refused)
}

/// Sleeps until `at`; never wakes when there is none.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The per-child dispatch loop: one task, so events keep the order the child wrote them.
async fn dispatch(mut incoming: IncomingQueue, tx: mpsc::Sender<(AdapterEvent, Held)>, peer: Peer, label: String) {
    // What the adapter sends must not flood the log: its warnings are rate-limited.
    let mut limit = terminull_rpc::log_limit::LogLimit::default();
    let source = format!("adapter {label}");
    while let Some((message, held)) = incoming.recv_held().await {
        let event = match message {
            Incoming::Notification(n) if n.method == proto::Stream::METHOD => {
                let raw = match n.params {
                    serde_json::Value::Object(mut map) => map.remove("block").unwrap_or_default(),
                    _ => serde_json::Value::Null,
                };
                match blocks::validate(raw) {
                    Ok(block) => AdapterEvent::Block(block),
                    Err(e) => {
                        if limit.admit(&source) {
                            tracing::warn!(adapter = %label, "invalid block: {e}");
                        }
                        AdapterEvent::Invalid(e.to_string())
                    }
                }
            }
            Incoming::Notification(n) if n.method == proto::SessionIdNotification::METHOD => {
                match n.params_as::<proto::SessionIdNotification>() {
                    Ok(p) => AdapterEvent::AgentSessionId(p.agent_session_id),
                    Err(e) => AdapterEvent::Invalid(e.to_string()),
                }
            }
            Incoming::Notification(n) => {
                if limit.admit(&source) {
                    tracing::warn!(adapter = %label, "unknown notification `{}`", n.method);
                }
                AdapterEvent::Invalid(format!("unknown notification `{}`", n.method))
            }
            Incoming::Request(r) => {
                // Adapters answer; they do not call the bridge.
                let _ =
                    peer.respond(r.id, Err(terminull_protocol::jsonrpc::RpcError::method_not_found(&r.method))).await;
                AdapterEvent::Invalid(format!("the adapter sent a request (`{}`)", r.method))
            }
            Incoming::BadLine(e) => {
                if limit.admit(&source) {
                    tracing::warn!(adapter = %label, "skipped a stdout line: {e}");
                }
                AdapterEvent::BadLine(e)
            }
            Incoming::Invalid { error, .. } => AdapterEvent::Invalid(format!("not a JSON-RPC message: {error}")),
        };
        if tx.send((event, held)).await.is_err() {
            return;
        }
    }
    // stdout closed. The exit status is added by `HostedAdapter::next_event`, which owns the process.
    let _ = tx.send((AdapterEvent::Exited { status: None, stderr_tail: String::new() }, Held::none())).await;
}

impl HostedAdapter {
    /// The checked declaration.
    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// The command it was started with.
    pub fn command(&self) -> &AdapterCommand {
        &self.command
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The last lines the adapter wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.process.stderr_tail()
    }

    /// Lines skipped so far because they were too long or not JSON.
    pub fn bad_lines(&self) -> u64 {
        self.peer.as_ref().map_or(0, Peer::bad_lines)
    }

    /// Calls a method with its policy deadline.
    pub async fn call<M: AdapterRequest>(&self, params: &M::Params) -> Result<M::Result, CallError> {
        match &self.peer {
            Some(peer) => peer.request::<M>(params, proto::response_timeout(M::METHOD)).await,
            None => Err(CallError::Closed { method: M::METHOD.to_owned() }),
        }
    }

    /// The next event; `Exited` carries the exit status and the stderr tail. `None`
    /// after `Exited`. Cancel-safe: usable in `select!`.
    ///
    /// The exit is noticed two ways, whichever comes first: stdout closing, or the
    /// process itself exiting. After the latter, what it wrote before exiting is still
    /// read for [`EXIT_DRAIN`] (or until stdout closes), then `Exited` comes even if a
    /// process it left behind holds stdout open or keeps writing to it.
    pub async fn next_event(&mut self) -> Option<AdapterEvent> {
        while !self.stdout_closed {
            let drain_until = self.drain_until;
            // Bounded even when what it left behind keeps writing: no more after the drain.
            if drain_until.is_some_and(|at| tokio::time::Instant::now() >= at) {
                tracing::warn!(
                    adapter = %self.command.display(), pid = self.pid(),
                    "the adapter exited but its stdout is still open (a process it started holds it)"
                );
                self.stdout_closed = true;
                break;
            }
            tokio::select! {
                biased;
                event = self.events.recv() => match event {
                    Some((AdapterEvent::Exited { .. }, _)) | None => self.stdout_closed = true,
                    Some((event, _held)) => return Some(event),
                },
                exited = self.process.exited(), if drain_until.is_none() => {
                    tracing::debug!(adapter = %self.command.display(), pid = self.pid(), ?exited, "adapter process exited");
                    self.drain_until = Some(tokio::time::Instant::now() + EXIT_DRAIN);
                }
                () = sleep_until_some(drain_until) => {}
            }
        }
        if self.exit_reported {
            return None;
        }
        // After its own death noticed, only a moment for the stderr tail: a process left
        // behind may hold stderr too.
        let wait = if self.drain_until.is_some() { EXIT_DRAIN } else { SHUTDOWN_GRACE };
        let status = tokio::time::timeout(wait, self.process.wait()).await.ok().and_then(Result::ok);
        let status = status.or_else(|| self.process.try_wait().ok().flatten());
        self.exit_reported = true;
        Some(AdapterEvent::Exited { status, stderr_tail: self.process.stderr_tail() })
    }

    /// True when `param` is among the accepted init params.
    pub fn accepts(&self, param: InitParam) -> bool {
        self.declaration.accepted_init_params.contains(&param)
    }

    /// Ends the process: close stdin, wait, SIGTERM, wait, SIGKILL of the whole group.
    pub async fn shutdown(&mut self) -> ShutdownOutcome {
        // Dropping the peer and its tasks closes the child's stdin.
        self.peer = None;
        self.tasks = None;
        self.process.shutdown(SHUTDOWN_GRACE).await
    }
}
