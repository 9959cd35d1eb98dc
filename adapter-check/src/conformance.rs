//! `terminull adapter check`: the conformance checker adapter authors run before they
//! ship. It drives a real adapter process through the protocol exactly as the bridge
//! would and reports, check by check, what holds and what does not (with the
//! offending message), instead of stopping at the first problem.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use terminull_process::child::{AgentProcess, SpawnOptions};
use terminull_protocol::adapter::{
    self as proto, AdapterNotification, AdapterRequest, Declaration, HandoffHook, InitParam, check_declaration,
};
use terminull_protocol::blocks::{self, BlockKind, EndReason, UserMessage};
use terminull_protocol::jsonrpc::codes;
use terminull_protocol::turn::TurnTracker;
use terminull_rpc::{CallError, Incoming, Peer};
use tokio::sync::Notify;

/// How to run the checks.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The adapter executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Deadline for the answer to `initialize`.
    pub handshake_timeout: Duration,
    /// Deadline for other calls (`detect`, `start`, `send`'s acknowledgement, …).
    pub call_timeout: Duration,
    /// Deadline for a turn to end with `session_end`.
    pub turn_timeout: Duration,
    /// Deadline for the process to exit after `stop`.
    pub exit_timeout: Duration,
    /// The message sent in the test turn.
    pub message: String,
}

impl CheckOptions {
    /// Defaults for `program args…`.
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>) -> Self {
        Self {
            program: program.into(),
            args,
            handshake_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(20),
            turn_timeout: Duration::from_secs(60),
            exit_timeout: Duration::from_secs(5),
            message: "hello from terminull adapter check".into(),
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What was checked (`handshake`, `declaration`, `turn contract`, …).
    pub check: String,
    /// True when it held.
    pub ok: bool,
    /// What was seen; for a failure, the offending message.
    pub detail: String,
}

/// Everything the checker found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The command checked.
    pub command: String,
    /// The declared agent id, once known.
    pub agent_id: Option<String>,
    /// Every check, in the order run.
    pub findings: Vec<Finding>,
}

impl Report {
    /// True when every check held.
    pub fn passed(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
    }

    /// Failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.ok)
    }

    /// A readable report: one line per check, then the totals.
    pub fn render(&self) -> String {
        let mut out = format!("terminull adapter check: {}\n", self.command);
        if let Some(id) = &self.agent_id {
            out.push_str(&format!("agent: {id}\n"));
        }
        for f in &self.findings {
            let mut lines = f.detail.lines();
            out.push_str(&format!(
                "{} {:<22} {}\n",
                if f.ok { "PASS" } else { "FAIL" },
                f.check,
                lines.next().unwrap_or("")
            ));
            for more in lines {
                out.push_str(&format!("     {:<22} {more}\n", ""));
            }
        }
        let failed = self.failures().count();
        out.push_str(&format!("{} passed, {} failed", self.findings.len() - failed, failed));
        out
    }

    fn pass(&mut self, check: &str, detail: impl Into<String>) {
        self.findings.push(Finding { check: check.into(), ok: true, detail: detail.into() });
    }

    fn fail(&mut self, check: &str, detail: impl Into<String>) {
        self.findings.push(Finding { check: check.into(), ok: false, detail: detail.into() });
    }
}

/// Incoming messages collected by a background task, so the adapter is never
/// blocked on a full queue while the checker waits for a response.
#[derive(Debug, Default)]
struct Inbox {
    items: Mutex<(Vec<Incoming>, bool)>,
    changed: Notify,
}

/// Events kept at most; an adapter flooding more than this is reported.
const INBOX_LIMIT: usize = 200_000;

impl Inbox {
    fn push(&self, item: Incoming) {
        let mut guard = self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.0.len() < INBOX_LIMIT {
            guard.0.push(item);
        }
        drop(guard);
        self.changed.notify_waiters();
    }

    fn close(&self) {
        self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1 = true;
        self.changed.notify_waiters();
    }

    /// The item at `index`, waiting for it; `None` once the stream ended or on timeout.
    async fn get(&self, index: usize, deadline: tokio::time::Instant) -> Option<Incoming> {
        loop {
            let notified = self.changed.notified();
            {
                let guard = self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(item) = guard.0.get(index) {
                    return Some(item.clone());
                }
                if guard.1 {
                    return None;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    fn is_closed(&self) -> bool {
        self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1
    }
}

struct Checker {
    opts: CheckOptions,
    report: Report,
    process: AgentProcess,
    peer: Peer,
    inbox: Arc<Inbox>,
    cursor: usize,
    agent_session_ids: Vec<String>,
    bad_lines_reported: usize,
    cwd: tempfile::TempDir,
}

/// Runs every check against one adapter executable.
pub async fn check_adapter(opts: CheckOptions) -> Report {
    let command = std::iter::once(opts.program.display().to_string())
        .chain(opts.args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut report = Report { command, agent_id: None, findings: Vec::new() };
    let cwd = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            report.fail("setup", format!("cannot create a temporary directory: {e}"));
            return report;
        }
    };
    let mut cmd = tokio::process::Command::new(&opts.program);
    cmd.args(&opts.args);
    let (process, (peer, mut incoming, tasks)) = match AgentProcess::spawn_rpc(
        cmd,
        SpawnOptions { record: false, ..SpawnOptions::default() },
        "adapter under check",
    ) {
        Ok(spawned) => spawned,
        Err(e) => {
            report.fail("spawn", e.to_string());
            return report;
        }
    };
    report.pass("spawn", format!("pid {}", process.pid()));
    let inbox = Arc::new(Inbox::default());
    let collector = {
        let inbox = inbox.clone();
        tokio::spawn(async move {
            while let Some(item) = incoming.recv().await {
                inbox.push(item);
            }
            inbox.close();
        })
    };
    let mut checker = Checker {
        opts,
        report,
        process,
        peer,
        inbox,
        cursor: 0,
        agent_session_ids: Vec::new(),
        bad_lines_reported: 0,
        cwd,
    };
    checker.run().await;
    let Checker { report, peer, process, .. } = checker;
    drop(peer);
    drop(tasks);
    collector.abort();
    drop(process);
    report
}

impl Checker {
    async fn call<M: AdapterRequest>(&self, params: &M::Params, timeout: Duration) -> Result<M::Result, CallError> {
        self.peer.request::<M>(params, Some(timeout)).await
    }

    fn describe_call_error(&self, e: &CallError) -> String {
        let tail = self.process.stderr_tail();
        match e {
            CallError::Closed { .. } if !tail.trim().is_empty() => format!("{e}; stderr tail:\n{}", tail.trim_end()),
            _ => e.to_string(),
        }
    }

    async fn run(&mut self) {
        let Some(declaration) = self.handshake().await else {
            self.finish(false).await;
            return;
        };
        self.detect().await;
        self.optional_class_calls(&declaration).await;
        if !self.start(&declaration).await {
            self.finish(false).await;
            return;
        }
        let alive = self.turn(&declaration).await;
        if alive && declaration.capabilities.provides_usage {
            match self.call::<proto::GetUsage>(&proto::Empty {}, self.opts.call_timeout).await {
                Ok(usage) => self.report.pass("get_usage", serde_json::to_string(&usage).unwrap_or_default()),
                Err(e) => self.report.fail("get_usage", self.describe_call_error(&e)),
            }
        }
        if alive && declaration.capabilities.cap_interrupt {
            self.interrupt_turn().await;
        }
        if alive && declaration.handoff_hooks.contains(&HandoffHook::Release) {
            match self.call::<proto::Release>(&proto::Empty {}, self.opts.call_timeout).await {
                Ok(_) => self.report.pass("release", "answered {}"),
                Err(e) => self.report.fail("release", self.describe_call_error(&e)),
            }
        }
        self.finish(alive).await;
    }

    async fn handshake(&mut self) -> Option<Declaration> {
        let params = proto::InitializeParams::from_bridge(
            proto::PeerInfo { name: "terminull adapter check".into(), version: env!("CARGO_PKG_VERSION").into() },
            InitParam::ALL.to_vec(),
        );
        let raw = self
            .peer
            .request_raw(
                proto::Initialize::METHOD,
                serde_json::to_value(params).unwrap_or(Value::Null),
                Some(self.opts.handshake_timeout),
            )
            .await;
        let raw = match raw {
            Ok(v) => v,
            Err(CallError::Timeout { after, .. }) => {
                self.report.fail("handshake", format!("no answer to initialize within {after:?}"));
                return None;
            }
            Err(e) => {
                let detail = self.describe_call_error(&e);
                self.report.fail("handshake", detail);
                return None;
            }
        };
        self.report.pass("handshake", "initialize answered");
        self.report.agent_id = raw.get("agent_id").and_then(Value::as_str).map(str::to_owned);
        match check_declaration(&raw) {
            Ok(d) => {
                self.report.pass(
                    "declaration",
                    format!(
                        "{} ({}), lease {}{}",
                        d.agent_id,
                        d.display_name,
                        serde_json::to_value(d.lease)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                        d.verification_note().map(|n| format!(", {n}")).unwrap_or_default()
                    ),
                );
                Some(d)
            }
            Err(violations) => {
                let lines: Vec<_> = violations.iter().map(ToString::to_string).collect();
                self.report.fail("declaration", lines.join("\n"));
                None
            }
        }
    }

    async fn detect(&mut self) {
        match self.call::<proto::Detect>(&proto::Empty {}, self.opts.call_timeout).await {
            Ok(d) if d.installed => self.report.pass(
                "detect",
                format!("installed{}", d.version.map(|v| format!(", version {v}")).unwrap_or_default()),
            ),
            // Not being installed is a fact about this machine, not a protocol failure.
            Ok(d) => self.report.pass("detect", format!("not installed here: {}", d.reason.unwrap_or_default())),
            Err(e) => self.report.fail("detect", self.describe_call_error(&e)),
        }
    }

    /// list_models and the class-level handoff hooks, each only when declared.
    async fn optional_class_calls(&mut self, d: &Declaration) {
        let t = self.opts.call_timeout;
        if d.capabilities.provides_models {
            match self.call::<proto::ListModels>(&proto::Empty {}, t).await {
                Ok(r) if !r.models.is_empty() => self.report.pass("list_models", format!("{} models", r.models.len())),
                Ok(_) => self.report.pass("list_models", "no models listed"),
                Err(e) => self.report.fail("list_models", self.describe_call_error(&e)),
            }
        }
        let cwd = self.cwd.path().display().to_string();
        for hook in &d.handoff_hooks {
            let outcome = match hook {
                HandoffHook::ScanExternalSessions => self
                    .call::<proto::ScanExternalSessions>(
                        &proto::ScanExternalSessionsParams { cwd: None, limit: Some(5) },
                        t,
                    )
                    .await
                    .map(|r| format!("{} sessions", r.sessions.len())),
                HandoffHook::IsCwdExternallyOwned => self
                    .call::<proto::IsCwdExternallyOwned>(
                        &proto::IsCwdExternallyOwnedParams { cwd: cwd.clone(), agent_session_id: None },
                        t,
                    )
                    .await
                    .map(|r| format!("owned: {}", r.owned)),
                HandoffHook::LatestSidForCwd => self
                    .call::<proto::LatestSidForCwd>(&proto::LatestSidForCwdParams { cwd: cwd.clone() }, t)
                    .await
                    .map(|r| format!("{:?}", r.agent_session_id.map(|s| s.0))),
                HandoffHook::TerminalResumeCommand => self
                    .call::<proto::TerminalResumeCommand>(
                        &proto::TerminalResumeCommandParams {
                            agent_session_id: "check-session".into(),
                            cwd: Some(cwd.clone()),
                        },
                        t,
                    )
                    .await
                    .map(|r| r.argv.join(" ")),
                HandoffHook::Mirror => self
                    .call::<proto::Mirror>(
                        &proto::MirrorParams {
                            cwd: cwd.clone(),
                            agent_session_id: "check-session".into(),
                            cursor: None,
                        },
                        t,
                    )
                    .await
                    .map(|r| format!("{} blocks", r.blocks.len())),
                // Needs a session; checked after the turn.
                HandoffHook::Release => continue,
            };
            let name = serde_json::to_value(hook).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            match outcome {
                Ok(detail) => self.report.pass(&name, detail),
                // A declared hook may say the session does not exist; it may not say it is not implemented.
                Err(CallError::Rpc { error, .. }) if error.code == codes::NOT_FOUND => {
                    self.report.pass(&name, format!("answered not found: {}", error.message))
                }
                Err(e) => {
                    let detail = self.describe_call_error(&e);
                    self.report.fail(&name, format!("declared but: {detail}"));
                }
            }
        }
    }

    async fn start(&mut self, d: &Declaration) -> bool {
        let takes = |p| d.accepted_init_params.contains(&p);
        let params = proto::StartParams {
            session_id: "check-session".into(),
            cwd: takes(InitParam::Cwd).then(|| self.cwd.path().display().to_string()),
            model: None,
            binary: None,
            resume_session_id: None,
            effort: None,
            permission_mode: None,
        };
        match self.call::<proto::Start>(&params, self.opts.call_timeout.max(Duration::from_secs(60))).await {
            Ok(r) => {
                let info = r.agent_info;
                let mut problems = Vec::new();
                if info.agent_id != d.agent_id {
                    problems.push(format!(
                        "agent_info.agent_id is `{}`, the declaration says `{}`",
                        info.agent_id, d.agent_id
                    ));
                }
                if info.capabilities != d.capabilities {
                    problems.push("agent_info's capabilities differ from the declaration's".to_owned());
                }
                if problems.is_empty() {
                    self.report.pass("start", format!("agent_info for {}", info.agent_id));
                } else {
                    self.report.fail("start", problems.join("\n"));
                }
                true
            }
            Err(e) => {
                let detail = self.describe_call_error(&e);
                self.report.fail("start", detail);
                false
            }
        }
    }

    /// One turn: send, then read until session_end. Returns whether the adapter is
    /// still usable afterwards.
    async fn turn(&mut self, d: &Declaration) -> bool {
        let message = user_message(&self.opts.message);
        if let Err(e) = self.call::<proto::Send>(&message, self.opts.call_timeout).await {
            let detail = self.describe_call_error(&e);
            self.report.fail("send", detail);
            return false;
        }
        self.report.pass("send", "acknowledged");
        let outcome = self.read_turn(d, "turn").await;
        outcome.alive
    }

    async fn interrupt_turn(&mut self) {
        let message = user_message("slow: please take your time so I can interrupt you");
        if let Err(e) = self.call::<proto::Send>(&message, self.opts.call_timeout).await {
            let detail = self.describe_call_error(&e);
            self.report.fail("interrupt", format!("second send failed: {detail}"));
            return;
        }
        match self.call::<proto::Interrupt>(&proto::Empty {}, self.opts.call_timeout).await {
            Ok(_) => {}
            Err(e) => {
                let detail = self.describe_call_error(&e);
                self.report.fail("interrupt", detail);
                return;
            }
        }
        let turn = self.read_turn_quiet().await;
        match turn {
            Some(EndReason::Interrupted) => self.report.pass("interrupt", "the turn ended as interrupted"),
            // The turn may have finished before the interrupt arrived.
            Some(EndReason::Completed) => self.report.pass("interrupt", "answered; the turn had already completed"),
            Some(other) => {
                self.report.fail("interrupt", format!("the interrupted turn ended as {other:?}, not interrupted"))
            }
            None => self.report.fail("interrupt", "no session_end after interrupt"),
        }
    }

    /// Reads the next turn's blocks up to session_end, checking only that it ends.
    async fn read_turn_quiet(&mut self) -> Option<EndReason> {
        let deadline = tokio::time::Instant::now() + self.opts.turn_timeout;
        while let Some(item) = self.inbox.get(self.cursor, deadline).await {
            self.cursor += 1;
            if let Incoming::Notification(n) = item
                && n.method == proto::Stream::METHOD
                && let Ok(p) = n.params_as::<proto::Stream>()
                && let BlockKind::SessionEnd(end) = p.block.kind
            {
                return Some(end.reason);
            }
        }
        None
    }

    async fn read_turn(&mut self, d: &Declaration, name: &str) -> TurnOutcome {
        let deadline = tokio::time::Instant::now() + self.opts.turn_timeout;
        let mut tracker = TurnTracker::new();
        let mut invalid_blocks = Vec::new();
        let mut undeclared = BTreeSet::new();
        let mut blocks_seen = 0usize;
        let mut appends_reported = false;
        let mut ended = false;
        loop {
            // After session_end, linger briefly to catch blocks sent after it.
            let wait_until = if ended { tokio::time::Instant::now() + Duration::from_millis(300) } else { deadline };
            let Some(item) = self.inbox.get(self.cursor, wait_until).await else { break };
            self.cursor += 1;
            match item {
                Incoming::Notification(n) if n.method == proto::Stream::METHOD => {
                    let raw = n.params.get("block").cloned().unwrap_or(Value::Null);
                    match blocks::validate(raw) {
                        Ok(block) => {
                            blocks_seen += 1;
                            if matches!(block.kind, BlockKind::Thinking(_)) && !d.capabilities.cap_thinking {
                                undeclared.insert("thinking block without cap_thinking");
                            }
                            if matches!(block.kind, BlockKind::PermissionRequest(_)) && !d.capabilities.cap_permissions
                            {
                                undeclared.insert("permission_request without cap_permissions");
                            }
                            if let Some(v) = tracker.observe(&block.kind) {
                                invalid_blocks.push(format!("contract: {v}"));
                            }
                            if let Some(problem) = append_under_v1(d, &block.kind, &mut appends_reported) {
                                invalid_blocks.push(problem);
                            }
                            if matches!(block.kind, BlockKind::SessionEnd(_)) {
                                ended = true;
                            }
                            if let BlockKind::PermissionRequest(request) = &block.kind
                                && d.capabilities.cap_permissions
                            {
                                self.answer_permission(request).await;
                            }
                        }
                        Err(e) => invalid_blocks.push(e.to_string()),
                    }
                }
                Incoming::Notification(n) if n.method == proto::SessionIdNotification::METHOD => {
                    match n.params_as::<proto::SessionIdNotification>() {
                        Ok(p) => self.agent_session_ids.push(p.agent_session_id.0),
                        Err(e) => invalid_blocks.push(e.to_string()),
                    }
                }
                Incoming::Notification(n) => invalid_blocks.push(format!("unknown notification `{}`", n.method)),
                Incoming::Request(r) => {
                    invalid_blocks.push(format!("the adapter sent a request (`{}`); adapters only answer", r.method));
                    let _ = self
                        .peer
                        .respond(r.id, Err(terminull_protocol::jsonrpc::RpcError::method_not_found(&r.method)))
                        .await;
                }
                Incoming::BadLine(e) => {
                    self.bad_lines_reported += 1;
                    self.report.fail("clean stdout", e.to_string());
                }
                Incoming::Invalid { error, .. } => {
                    self.report.fail("clean stdout", format!("not a JSON-RPC message: {error}"))
                }
            }
        }
        let exited = self.inbox.is_closed();
        let mut violations: Vec<String> = tracker.end_violations().iter().map(ToString::to_string).collect();
        if exited && !ended {
            let status = match tokio::time::timeout(Duration::from_secs(2), self.process.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                _ => "stdout closed".to_owned(),
            };
            let tail = self.process.stderr_tail();
            violations.push(format!(
                "the adapter exited mid-turn ({status}){}",
                if tail.trim().is_empty() { String::new() } else { format!("; stderr tail:\n{}", tail.trim_end()) }
            ));
        } else if !ended {
            violations.push(format!("no session_end within {:?}", self.opts.turn_timeout));
        }
        if invalid_blocks.is_empty() {
            self.report.pass("blocks validate", format!("{blocks_seen} blocks in the {name}"));
        } else {
            self.report.fail("blocks validate", invalid_blocks.join("\n"));
        }
        if violations.is_empty() {
            self.report.pass("turn contract", "exactly one session_end; every tool call and text closed");
        } else {
            self.report.fail("turn contract", violations.join("\n"));
        }
        if !undeclared.is_empty() {
            self.report.fail("capabilities", undeclared.into_iter().collect::<Vec<_>>().join("\n"));
        }
        if d.accepted_init_params.contains(&InitParam::OnSessionId) && !self.agent_session_ids.is_empty() {
            self.report.pass("session_id", format!("reported {}", self.agent_session_ids.join(", ")));
        }
        TurnOutcome { alive: !exited && ended }
    }

    /// Answers a permission request the way a cautious user would: the first "reject"
    /// option, else the first option. The answer itself is a check.
    async fn answer_permission(&mut self, request: &terminull_protocol::blocks::PermissionRequest) {
        use terminull_protocol::blocks::PermissionOptionKind as Kind;
        let choice = request
            .options
            .iter()
            .find(|o| matches!(o.kind, Kind::RejectOnce | Kind::RejectAlways))
            .or_else(|| request.options.first());
        let Some(choice) = choice else {
            self.report
                .fail("permission_response", format!("permission request `{}` offers no options", request.request_id));
            return;
        };
        let params =
            proto::PermissionResponseParams { request_id: request.request_id.clone(), option_id: choice.id.clone() };
        match self.call::<proto::PermissionResponse>(&params, self.opts.call_timeout).await {
            Ok(_) => self.report.pass("permission_response", format!("answered `{}` to `{}`", choice.id, request.tool)),
            Err(e) => {
                let detail = self.describe_call_error(&e);
                self.report.fail("permission_response", detail);
            }
        }
    }

    /// Sends stop (when the adapter can still take it) and checks the process exits.
    async fn finish(&mut self, send_stop: bool) {
        if send_stop && !self.inbox.is_closed() {
            match self.call::<proto::Stop>(&proto::Empty {}, self.opts.call_timeout).await {
                Ok(_) => self.report.pass("stop", "answered {}"),
                Err(e) => {
                    let detail = self.describe_call_error(&e);
                    self.report.fail("stop", detail);
                }
            }
            match tokio::time::timeout(self.opts.exit_timeout, self.process.wait()).await {
                Ok(Ok(status)) => self.report.pass("exit", format!("exited after stop ({status})")),
                Ok(Err(e)) => self.report.fail("exit", format!("cannot wait for the process: {e}")),
                Err(_) => self.report.fail("exit", format!("still running {:?} after stop", self.opts.exit_timeout)),
            }
        }
        let outcome = self.process.shutdown(Duration::from_millis(500)).await;
        tracing::debug!("adapter under check shut down: {outcome:?}");
    }
}

struct TurnOutcome {
    alive: bool,
}

/// An append (a chunk with `offset`) from an adapter that declared protocol version 1,
/// which allows snapshots only; reported once per turn.
fn append_under_v1(d: &Declaration, kind: &BlockKind, reported: &mut bool) -> Option<String> {
    let (BlockKind::Text(chunk) | BlockKind::Thinking(chunk)) = kind else { return None };
    if *reported || d.protocol_version >= 2 || !chunk.is_append() {
        return None;
    }
    *reported = true;
    Some(format!(
        "contract: {} `{}`: an append (`offset`) from an adapter that declares protocol_version {}; appends need protocol_version 2",
        kind.block_type(),
        chunk.id,
        d.protocol_version
    ))
}

fn user_message(text: &str) -> UserMessage {
    UserMessage { text: text.to_owned(), attachments: Vec::new() }
}
