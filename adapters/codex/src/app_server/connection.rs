//! One running `codex app-server` (JSON-RPC over its stdin/stdout) and the turn loop:
//! `turn/start`, the notifications through [`AppMapper`], approval requests asked on the
//! bridge (`permission_request`), `turn/interrupt`.
//!
//! The lines are JSON-RPC as codex speaks it ([`super::rpc`]). Everything read while the
//! user decides on an approval is queued (at most [`MAX_BACKLOG`] messages, then reading
//! pauses and codex blocks on its pipe until the user answers).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use terminull_adapter_sdk::child::{AgentProcess, LineReceiver, SpawnOptions, describe_exit, quote_stderr};
use terminull_adapter_sdk::prelude::*;
use tokio::process::Command;
use tokio::time::{Instant, sleep_until};

use super::mapping::AppMapper;
use super::rpc::{self, CallFailure, Msg, RpcFailure};
use super::wire::{Approval, ApprovalKind, Decision, Notice, ThreadResponse, TurnResponse, method};
use crate::mapping::command_title;

/// How long `initialize`, `thread/start`, `thread/resume` and `turn/start` may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// After `turn/interrupt`, how long codex has to end the turn before it is killed.
pub const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Each step of the shutdown ladder (close stdin, SIGTERM, SIGKILL).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Most `turn/interrupt` requests for one interrupt (codex refuses one sent before the
/// turn is active; the next is sent when that refusal arrives).
pub const MAX_INTERRUPTS: u32 = 5;
/// Messages queued while a permission request waits for the user.
pub const MAX_BACKLOG: usize = 4096;

/// Permission option ids, as `permission_response.option_id` sends them back.
pub mod option {
    /// Allow this once (`accept`).
    pub const ALLOW: &str = "allow";
    /// Allow this and the like for the rest of the session (`acceptForSession`).
    pub const ALLOW_SESSION: &str = "allow_session";
    /// Do not run it; the turn goes on (`decline`).
    pub const DENY: &str = "deny";
}

/// What a thread is started or resumed with (`thread/start`, `thread/resume`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSettings {
    /// The working directory.
    pub cwd: String,
    /// `approvalPolicy`: `untrusted`, `on-request` or `never`.
    pub approval_policy: &'static str,
    /// `sandbox`: `read-only`, `workspace-write` or `danger-full-access`.
    pub sandbox: &'static str,
    /// The model, when chosen.
    pub model: Option<String>,
}

impl ThreadSettings {
    fn params(&self, thread_id: Option<&str>) -> Value {
        let mut params = json!({"cwd": self.cwd, "approvalPolicy": self.approval_policy, "sandbox": self.sandbox});
        if let Some(model) = &self.model {
            params["model"] = json!(model);
        }
        if let Some(id) = thread_id {
            params["threadId"] = json!(id);
        }
        params
    }
}

/// How a turn on the app-server ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// With this reason; the process serves the next turn too.
    Ended(EndReason),
    /// With this reason, and the process is gone or unusable (the next turn starts a
    /// new one and resumes the thread).
    Lost(EndReason),
}

/// A running `codex app-server`.
#[derive(Debug)]
pub struct AppServer {
    process: AgentProcess,
    lines: LineReceiver,
    /// The id of the adapter's next request.
    next_id: i64,
    backlog: VecDeque<Msg>,
    closed: bool,
}

/// Why the app-server could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Unavailable {
    /// What happened (exit status, stderr tail, or the error answered).
    pub detail: String,
}

/// JSON-RPC's "method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;

impl AppServer {
    /// Starts `<binary> app-server` in `cwd` and performs the `initialize` handshake.
    pub async fn start(binary: &str, cwd: &Path) -> Result<AppServer, Unavailable> {
        let mut cmd = Command::new(binary);
        cmd.arg("app-server").current_dir(cwd);
        let (process, lines) = AgentProcess::spawn(cmd, SpawnOptions::default())
            .map_err(|e| Unavailable { detail: format!("cannot start `{binary} app-server`: {e}") })?;
        let mut server = AppServer { process, lines, next_id: 1, backlog: VecDeque::new(), closed: false };
        let params = json!({
            "clientInfo": {"name": "terminull", "title": "terminull", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": null,
        });
        let initialized = match server.call(method::INITIALIZE, params).await {
            Ok(_) => server.write(&rpc::notification(method::INITIALIZED, json!({}))).await,
            Err(e) => Err(e),
        };
        if let Err(e) = initialized {
            let detail = server.failure(&e).await;
            server.shutdown().await;
            return Err(Unavailable { detail });
        }
        Ok(server)
    }

    /// A sentence about a failed call: the error, and when the process is gone its exit
    /// status and the end of its stderr.
    async fn failure(&mut self, error: &CallFailure) -> String {
        let exited = match tokio::time::timeout(Duration::from_secs(2), self.process.exited()).await {
            Ok(Ok(status)) => Some(status),
            _ => None,
        };
        match exited {
            Some(status) => {
                let tail = quote_stderr(&self.process.stderr_tail());
                let mut detail = format!("codex app-server {} ({error})", describe_exit(Some(status)));
                if !tail.is_empty() {
                    detail.push_str(":\n");
                    detail.push_str(&tail);
                }
                detail
            }
            None => format!("codex app-server: {error}"),
        }
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        !self.closed && self.process.try_wait().ok().flatten().is_none()
    }

    async fn write(&mut self, line: &Value) -> Result<(), CallFailure> {
        let method = line.get("method").and_then(Value::as_str).unwrap_or("a response").to_owned();
        self.process.write_json(line).await.map_err(|e| {
            tracing::warn!("cannot write to codex app-server: {e}");
            CallFailure::Closed { method }
        })
    }

    /// Sends a request; its id.
    async fn send(&mut self, method: &str, params: Value) -> Result<i64, CallFailure> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&rpc::request(id, method, params)).await?;
        Ok(id)
    }

    /// The next message from codex; `None` once its stdout closed.
    async fn recv(&mut self) -> Option<Msg> {
        if self.closed {
            return None;
        }
        match self.lines.recv().await {
            Some(Ok(value)) => Some(Msg::classify(value)),
            Some(Err(e)) => Some(Msg::Bad(e.to_string())),
            None => {
                self.closed = true;
                None
            }
        }
    }

    /// Calls `method` outside a turn, answering what codex sends meanwhile: its
    /// notifications are logged and dropped, approval requests declined (no turn asks).
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, CallFailure> {
        let id = self.send(method, params).await?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let message = tokio::select! {
                () = sleep_until(deadline) => {
                    return Err(CallFailure::Timeout { method: method.to_owned(), seconds: CALL_TIMEOUT.as_secs() });
                }
                message = self.recv() => message,
            };
            match message {
                None => return Err(CallFailure::Closed { method: method.to_owned() }),
                Some(Msg::Response { id: Some(answered), outcome }) if answered == id => {
                    return outcome.map_err(|error| CallFailure::Rpc { method: method.to_owned(), error });
                }
                Some(Msg::Request { id, method: asked, .. }) => self.refuse(&id, &asked).await,
                Some(other) => tracing::debug!(?other, "codex app-server message outside a turn; skipped"),
            }
        }
    }

    /// `thread/start`: a new thread; its id.
    pub async fn start_thread(&mut self, settings: &ThreadSettings) -> Result<String, CallFailure> {
        let value = self.call(method::THREAD_START, settings.params(None)).await?;
        Ok(serde_json::from_value::<ThreadResponse>(value).unwrap_or_default().thread.id)
    }

    /// `thread/resume`: loads the thread `id` from its rollout; the id it runs under.
    pub async fn resume_thread(&mut self, id: &str, settings: &ThreadSettings) -> Result<String, CallFailure> {
        let value = self.call(method::THREAD_RESUME, settings.params(Some(id))).await?;
        let resumed = serde_json::from_value::<ThreadResponse>(value).unwrap_or_default().thread.id;
        Ok(if resumed.is_empty() { id.to_owned() } else { resumed })
    }

    async fn refuse(&mut self, id: &Value, method_name: &str) {
        let outcome = if Approval::parse(method_name, &Value::Null).is_some() {
            tracing::warn!(method_name, "codex asked for approval outside a turn; declined");
            Ok(Decision::Decline.result())
        } else {
            tracing::debug!(method_name, "codex sent a request this adapter does not serve");
            Err(RpcFailure { code: METHOD_NOT_FOUND, message: format!("method not found: {method_name}") })
        };
        let _ = self.write(&rpc::response(id, outcome)).await;
    }

    /// Drops what codex sent between turns (nothing, normally), answering requests.
    async fn drain(&mut self) {
        self.backlog.clear();
        loop {
            match self.lines.try_recv() {
                Ok(Ok(value)) => match Msg::classify(value) {
                    Msg::Request { id, method, .. } => self.refuse(&id, &method).await,
                    other => tracing::debug!(?other, "codex app-server message between turns; skipped"),
                },
                Ok(Err(e)) => tracing::debug!("a bad line from codex app-server between turns: {e}"),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    /// Runs one turn of `input` on `thread_id`: streams its blocks, asks the user for
    /// approvals, interrupts it on request. The turn's `session_end` is streamed through
    /// `conversation` (whose usage totals it updates).
    pub async fn run_turn(
        &mut self,
        thread_id: &str,
        params: Value,
        mapper: &mut AppMapper,
        conversation: &mut Conversation,
        turn: &mut Turn,
    ) -> TurnOutcome {
        self.drain().await;
        let turn_start = self.send(method::TURN_START, params).await;
        let mut start_deadline = Some(Instant::now() + CALL_TIMEOUT);
        // The turn's id, from `turn/started`: codex refuses `turn/interrupt` ("no active
        // turn") between its answer to `turn/start` and that notification.
        let mut turn_id: Option<String> = None;
        let mut interrupt_at: Option<Instant> = None;
        // The pending `turn/interrupt` request, and how many were sent.
        let mut interrupt_request: Option<i64> = None;
        let mut interrupts_sent = 0;
        loop {
            enum Next {
                Interrupt,
                InterruptTimedOut,
                StartFailed(CallFailure),
                Message(Msg),
                Closed,
            }
            let next = if let Err(e) = &turn_start {
                Next::StartFailed(e.clone())
            } else {
                match self.backlog.pop_front() {
                    Some(message) => Next::Message(message),
                    None => {
                        let interrupt_deadline = interrupt_at.unwrap_or_else(Instant::now);
                        let start_by = start_deadline.unwrap_or_else(Instant::now);
                        tokio::select! {
                            biased;
                            () = turn.interrupted(), if interrupt_at.is_none() => Next::Interrupt,
                            () = sleep_until(interrupt_deadline), if interrupt_at.is_some() => Next::InterruptTimedOut,
                            () = sleep_until(start_by), if start_deadline.is_some() => Next::StartFailed(
                                CallFailure::Timeout { method: method::TURN_START.into(), seconds: CALL_TIMEOUT.as_secs() },
                            ),
                            message = self.recv() => match message {
                                Some(message) => Next::Message(message),
                                None => Next::Closed,
                            },
                        }
                    }
                }
            };
            let actions = match next {
                Next::Interrupt => {
                    tracing::info!("interrupting the codex turn");
                    interrupt_at = Some(Instant::now() + INTERRUPT_TIMEOUT);
                    Vec::new()
                }
                Next::InterruptTimedOut => {
                    tracing::warn!(
                        "codex did not end the turn within {INTERRUPT_TIMEOUT:?} of turn/interrupt; killing it"
                    );
                    if let Err(e) = self.process.kill_group() {
                        tracing::warn!("cannot kill codex app-server: {e}");
                    }
                    self.closed = true;
                    let _ = conversation.apply(mapper.on_interrupted(), turn).await;
                    return TurnOutcome::Lost(EndReason::Interrupted);
                }
                Next::StartFailed(e) => {
                    let detail = self.failure(&e).await;
                    tracing::warn!("turn/start failed: {detail}");
                    let lost = !matches!(e, CallFailure::Rpc { .. });
                    let actions = mapper.on_lost(&detail);
                    let reason = finish(conversation, actions, turn).await.unwrap_or(EndReason::Error);
                    return if lost { TurnOutcome::Lost(reason) } else { TurnOutcome::Ended(reason) };
                }
                Next::Closed => {
                    let detail = self.failure(&CallFailure::Closed { method: "the turn".into() }).await;
                    tracing::warn!("{detail}");
                    let actions =
                        if interrupt_at.is_some() { mapper.on_interrupted() } else { mapper.on_lost(&detail) };
                    let reason = finish(conversation, actions, turn).await.unwrap_or(EndReason::Interrupted);
                    return TurnOutcome::Lost(reason);
                }
                Next::Message(Msg::Response { id, outcome }) => {
                    if id.is_some() && id == turn_start.as_ref().ok().copied() {
                        start_deadline = None;
                        match outcome {
                            Ok(value) => {
                                let started = serde_json::from_value::<TurnResponse>(value).unwrap_or_default();
                                tracing::debug!(turn_id = %started.turn.id, "codex accepted the turn");
                            }
                            Err(error) => {
                                let e = CallFailure::Rpc { method: method::TURN_START.into(), error };
                                self.backlog.clear();
                                let actions = mapper.on_lost(&format!("codex refused the turn: {e}"));
                                let reason = finish(conversation, actions, turn).await.unwrap_or(EndReason::Error);
                                return TurnOutcome::Ended(reason);
                            }
                        }
                    } else if id.is_some() && id == interrupt_request {
                        interrupt_request = None;
                        if let Err(e) = outcome {
                            // Refused (the turn was not active yet, or just ended): ask again
                            // while the turn goes on, a few times.
                            tracing::debug!("codex refused turn/interrupt: {e}");
                        }
                    }
                    Vec::new()
                }
                Next::Message(Msg::Notification { method: name, params }) => {
                    let notice = Notice::parse(&name, &params);
                    if let Notice::TurnStarted(info) = &notice
                        && turn_id.is_none()
                        && !info.id.is_empty()
                    {
                        turn_id = Some(info.id.clone());
                    }
                    mapper.on_notice(notice)
                }
                Next::Message(Msg::Request { id, method: name, params }) => {
                    self.approve(&id, &name, &params, mapper, turn).await;
                    Vec::new()
                }
                Next::Message(Msg::Bad(why)) => {
                    tracing::warn!("skipping a bad message from codex app-server: {why}");
                    Vec::new()
                }
            };
            if interrupt_at.is_some()
                && interrupt_request.is_none()
                && interrupts_sent < MAX_INTERRUPTS
                && let Some(id) = &turn_id
            {
                interrupts_sent += 1;
                // Its answer comes around `turn/completed`; nothing waits for it.
                let params = json!({"threadId": thread_id, "turnId": id});
                match self.send(method::TURN_INTERRUPT, params).await {
                    Ok(request) => interrupt_request = Some(request),
                    Err(e) => tracing::warn!("cannot interrupt the turn: {e}"),
                }
            }
            if actions.is_empty() {
                continue;
            }
            match conversation.apply(actions, turn).await {
                Ok(None) => {}
                Ok(Some(end)) => {
                    return match conversation.end_turn(end, turn).await {
                        Ok(reason) => TurnOutcome::Ended(reason),
                        Err(e) => {
                            tracing::warn!("cannot end the turn: {e}");
                            TurnOutcome::Ended(EndReason::Error)
                        }
                    };
                }
                Err(e) => {
                    tracing::warn!("the bridge is gone ({e}); abandoning the turn");
                    return TurnOutcome::Lost(EndReason::Error);
                }
            }
        }
    }

    /// Asks the user about an approval request and answers codex. While the user
    /// decides, codex's messages are queued; its withdrawing the request
    /// (`serverRequest/resolved`) or exiting ends the wait.
    async fn approve(&mut self, id: &Value, name: &str, params: &Value, mapper: &AppMapper, turn: &mut Turn) {
        let Some(approval) = Approval::parse(name, params) else {
            self.refuse(id, name).await;
            return;
        };
        let tool_call_id = mapper.is_running(&approval.item_id).then(|| mapper.call_id(&approval.item_id));
        let (tool, mut input) = match &approval.kind {
            ApprovalKind::Command { command, cwd } => {
                ("shell", json!({"command": command_title(command), "full_command": command, "cwd": cwd}))
            }
            ApprovalKind::Patch { grant_root } => ("apply_patch", json!({"grant_root": grant_root})),
        };
        if let Some(reason) = &approval.reason {
            input["reason"] = json!(reason);
        }
        let mut options = vec![PermissionOption {
            id: option::ALLOW.into(),
            label: "Allow".into(),
            kind: PermissionOptionKind::AllowOnce,
        }];
        if approval.session_allowed {
            options.push(PermissionOption {
                id: option::ALLOW_SESSION.into(),
                label: "Allow for this session".into(),
                kind: PermissionOptionKind::AllowAlways,
            });
        }
        options.push(PermissionOption {
            id: option::DENY.into(),
            label: "Deny".into(),
            kind: PermissionOptionKind::RejectOnce,
        });
        let outcome = {
            let waiting = turn.ask_permission(tool, input, options, tool_call_id);
            tokio::pin!(waiting);
            loop {
                let reading = !self.closed && self.backlog.len() < MAX_BACKLOG;
                tokio::select! {
                    answer = &mut waiting => break Some(answer),
                    message = self.recv(), if reading => match message {
                        Some(Msg::Notification { method, params }) if method == "serverRequest/resolved"
                            && params.get("requestId") == Some(id) => {
                            tracing::info!("codex withdrew its approval request");
                            break None;
                        }
                        Some(message) => self.backlog.push_back(message),
                        None => break None,
                    },
                }
            }
        };
        let decision = match outcome {
            None => return,
            Some(Ok(option_id)) => decision_for(&option_id, approval.session_allowed),
            Some(Err(TurnError::Interrupted)) => Decision::Cancel,
            Some(Err(e)) => {
                tracing::warn!("the permission request failed ({e}); declining");
                Decision::Decline
            }
        };
        tracing::info!(?decision, item = %approval.item_id, "answering codex's approval request");
        let _ = self.write(&rpc::response(id, Ok(decision.result()))).await;
    }

    /// Ends the process: stdin closed (codex exits on end of input), then the SDK's
    /// shutdown ladder for it and whatever it left behind.
    pub async fn shutdown(&mut self) {
        let outcome = self.process.shutdown(SHUTDOWN_GRACE).await;
        tracing::debug!(?outcome, "codex app-server stopped");
    }
}

/// The decision for the option the user chose: allow once, allow for the session (when
/// codex offers it, else once), anything else declines.
fn decision_for(option_id: &str, session_allowed: bool) -> Decision {
    match option_id {
        option::ALLOW => Decision::Accept,
        option::ALLOW_SESSION if session_allowed => Decision::AcceptForSession,
        option::ALLOW_SESSION => Decision::Accept,
        _ => Decision::Decline,
    }
}

/// Carries out the closing actions of a turn and streams its `session_end`.
async fn finish(
    conversation: &mut Conversation,
    actions: Vec<terminull_adapter_sdk::Action>,
    turn: &mut Turn,
) -> Option<EndReason> {
    match conversation.apply(actions, turn).await {
        Ok(Some(end)) => conversation.end_turn(end, turn).await.ok(),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("cannot close the turn: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_params_carry_the_policy_the_sandbox_and_the_model() {
        let settings = ThreadSettings {
            cwd: "/w".into(),
            approval_policy: "untrusted",
            sandbox: "workspace-write",
            model: Some("gpt-5-codex".into()),
        };
        assert_eq!(
            settings.params(Some("t1")),
            json!({"cwd": "/w", "approvalPolicy": "untrusted", "sandbox": "workspace-write", "model": "gpt-5-codex", "threadId": "t1"})
        );
        let plain = ThreadSettings { model: None, ..settings };
        assert_eq!(
            plain.params(None),
            json!({"cwd": "/w", "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
        );
    }

    #[test]
    fn permission_options_map_to_codex_decisions() {
        let cases = [
            (option::ALLOW, true, Decision::Accept),
            (option::ALLOW_SESSION, true, Decision::AcceptForSession),
            (option::ALLOW_SESSION, false, Decision::Accept),
            (option::DENY, true, Decision::Decline),
            ("something else", true, Decision::Decline),
        ];
        for (option_id, session_allowed, want) in cases {
            assert_eq!(decision_for(option_id, session_allowed), want, "{option_id} {session_allowed}");
        }
    }
}
