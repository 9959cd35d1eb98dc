//! One running `codex app-server` (JSON-RPC over its stdin/stdout) and the turn loop:
//! `turn/start`, the notifications through [`AppMapper`], approval requests asked on the
//! bridge (`permission_request`), `turn/interrupt`.
//!
//! Request ids are the peer's own counter (1, 2, 3, … per process), so a recorded run can
//! be replayed by a fake CLI. Everything read while the user decides on an approval is
//! queued (at most [`MAX_BACKLOG`] messages, then reading pauses and codex blocks on its
//! pipe until the user answers).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use terminull_adapter_sdk::child::{AgentProcess, SpawnOptions, describe_exit, quote_stderr};
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::jsonrpc::{RequestId, RpcError};
use terminull_rpc::{CallError, Incoming, Peer, PeerTasks};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::mapping::AppMapper;
use super::wire::{Approval, ApprovalKind, Decision, Notice, ThreadResponse, TurnResponse, method};
use crate::mapping::command_title;

/// How long `initialize`, `thread/start`, `thread/resume` and `turn/start` may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// After `turn/interrupt`, how long codex has to end the turn before it is killed.
pub const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Each step of the shutdown ladder (close stdin, SIGTERM, SIGKILL).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
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
    peer: Peer,
    incoming: mpsc::Receiver<Incoming>,
    _tasks: PeerTasks,
    backlog: VecDeque<Incoming>,
    closed: bool,
}

/// Why the app-server could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Unavailable {
    /// What happened (exit status, stderr tail, or the error answered).
    pub detail: String,
}

impl AppServer {
    /// Starts `<binary> app-server` in `cwd` and performs the `initialize` handshake.
    pub async fn start(binary: &str, cwd: &Path) -> Result<AppServer, Unavailable> {
        let mut cmd = Command::new(binary);
        cmd.arg("app-server").current_dir(cwd);
        let (process, (peer, incoming, tasks)) = AgentProcess::spawn_rpc(cmd, SpawnOptions::default(), "codex")
            .map_err(|e| Unavailable { detail: format!("cannot start `{binary} app-server`: {e}") })?;
        let mut server = AppServer { process, peer, incoming, _tasks: tasks, backlog: VecDeque::new(), closed: false };
        let params = json!({
            "clientInfo": {"name": "terminull", "title": "terminull", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": null,
        });
        match server.call(method::INITIALIZE, params).await {
            Ok(_) => {}
            Err(e) => {
                let detail = server.failure(&e).await;
                server.shutdown().await;
                return Err(Unavailable { detail });
            }
        }
        if let Err(e) = server.peer.notify_raw(method::INITIALIZED, json!({})).await {
            return Err(Unavailable { detail: e.to_string() });
        }
        Ok(server)
    }

    /// A sentence about a failed call: the error, and when the process is gone its exit
    /// status and the end of its stderr.
    async fn failure(&mut self, error: &CallError) -> String {
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

    /// Calls `method` outside a turn, answering what codex sends meanwhile: its
    /// notifications are logged and dropped, approval requests declined (no turn asks).
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        let peer = self.peer.clone();
        let owned = method.to_owned();
        let call = async move { peer.request_raw(&owned, params, Some(CALL_TIMEOUT)).await };
        tokio::pin!(call);
        loop {
            tokio::select! {
                biased;
                answer = &mut call => return answer,
                message = self.incoming.recv(), if !self.closed => match message {
                    None => self.closed = true,
                    Some(Incoming::Request(r)) => self.refuse(r.id, &r.method).await,
                    Some(other) => tracing::debug!(?other, "codex app-server message outside a turn; skipped"),
                },
            }
        }
    }

    /// `thread/start`: a new thread; its id.
    pub async fn start_thread(&mut self, settings: &ThreadSettings) -> Result<String, CallError> {
        let value = self.call(method::THREAD_START, settings.params(None)).await?;
        Ok(serde_json::from_value::<ThreadResponse>(value).unwrap_or_default().thread.id)
    }

    /// `thread/resume`: loads the thread `id` from its rollout; the id it runs under.
    pub async fn resume_thread(&mut self, id: &str, settings: &ThreadSettings) -> Result<String, CallError> {
        let value = self.call(method::THREAD_RESUME, settings.params(Some(id))).await?;
        let resumed = serde_json::from_value::<ThreadResponse>(value).unwrap_or_default().thread.id;
        Ok(if resumed.is_empty() { id.to_owned() } else { resumed })
    }

    async fn refuse(&self, id: RequestId, method_name: &str) {
        let outcome = if Approval::parse(method_name, &Value::Null).is_some() {
            tracing::warn!(method_name, "codex asked for approval outside a turn; declined");
            Ok(Decision::Decline.result())
        } else {
            tracing::debug!(method_name, "codex sent a request this adapter does not serve");
            Err(RpcError::method_not_found(method_name))
        };
        if let Err(e) = self.peer.respond(id, outcome).await {
            tracing::debug!("cannot answer codex: {e}");
        }
    }

    /// Drops what codex sent between turns (nothing, normally), answering requests.
    async fn drain(&mut self) {
        self.backlog.clear();
        loop {
            match self.incoming.try_recv() {
                Ok(Incoming::Request(r)) => self.refuse(r.id, &r.method).await,
                Ok(other) => tracing::debug!(?other, "codex app-server message between turns; skipped"),
                Err(mpsc::error::TryRecvError::Empty) => return,
                Err(mpsc::error::TryRecvError::Disconnected) => {
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
        let peer = self.peer.clone();
        let call = async move { peer.request_raw(method::TURN_START, params, Some(CALL_TIMEOUT)).await };
        tokio::pin!(call);
        let mut started = false;
        let mut turn_id: Option<String> = None;
        let mut interrupt_at: Option<Instant> = None;
        let mut interrupt_sent = false;
        loop {
            enum Next {
                Interrupt,
                InterruptTimedOut,
                Started(Result<Value, CallError>),
                Message(Incoming),
                Closed,
            }
            let next = match self.backlog.pop_front() {
                Some(message) => Next::Message(message),
                None => {
                    let deadline = interrupt_at.unwrap_or_else(Instant::now);
                    tokio::select! {
                        biased;
                        () = turn.interrupted(), if interrupt_at.is_none() => Next::Interrupt,
                        () = sleep_until(deadline), if interrupt_at.is_some() => Next::InterruptTimedOut,
                        answer = &mut call, if !started => Next::Started(answer),
                        message = self.incoming.recv(), if !self.closed => match message {
                            Some(message) => Next::Message(message),
                            None => Next::Closed,
                        },
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
                Next::Started(Ok(value)) => {
                    started = true;
                    let id = serde_json::from_value::<TurnResponse>(value).unwrap_or_default().turn.id;
                    if turn_id.is_none() && !id.is_empty() {
                        turn_id = Some(id);
                    }
                    Vec::new()
                }
                Next::Started(Err(e)) => {
                    let detail = self.failure(&e).await;
                    tracing::warn!("turn/start failed: {detail}");
                    let lost = matches!(e, CallError::Closed { .. } | CallError::Timeout { .. });
                    let actions = mapper.on_lost(&detail);
                    let reason = finish(conversation, actions, turn).await.unwrap_or(EndReason::Error);
                    return if lost { TurnOutcome::Lost(reason) } else { TurnOutcome::Ended(reason) };
                }
                Next::Closed => {
                    self.closed = true;
                    let detail = self.failure(&CallError::Closed { method: "the turn".into() }).await;
                    tracing::warn!("{detail}");
                    let actions =
                        if interrupt_at.is_some() { mapper.on_interrupted() } else { mapper.on_lost(&detail) };
                    let reason = finish(conversation, actions, turn).await.unwrap_or(EndReason::Interrupted);
                    return TurnOutcome::Lost(reason);
                }
                Next::Message(Incoming::Notification(n)) => {
                    let notice = Notice::parse(&n.method, &n.params);
                    if let Notice::TurnStarted(info) = &notice
                        && turn_id.is_none()
                        && !info.id.is_empty()
                    {
                        turn_id = Some(info.id.clone());
                    }
                    mapper.on_notice(notice)
                }
                Next::Message(Incoming::Request(request)) => {
                    self.approve(request.id, &request.method, &request.params, mapper, turn).await;
                    Vec::new()
                }
                Next::Message(other) => {
                    tracing::warn!(?other, "skipping a bad message from codex app-server");
                    Vec::new()
                }
            };
            if interrupt_at.is_some()
                && !interrupt_sent
                && let Some(id) = &turn_id
            {
                interrupt_sent = true;
                let params = json!({"threadId": thread_id, "turnId": id});
                let peer = self.peer.clone();
                // The answer comes after `turn/completed`; nothing waits for it.
                tokio::spawn(async move {
                    if let Err(e) = peer.request_raw(method::TURN_INTERRUPT, params, Some(INTERRUPT_TIMEOUT)).await {
                        tracing::debug!("turn/interrupt: {e}");
                    }
                });
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
    async fn approve(&mut self, id: RequestId, name: &str, params: &Value, mapper: &AppMapper, turn: &mut Turn) {
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
                    message = self.incoming.recv(), if reading => match message {
                        Some(Incoming::Notification(n)) if n.method == "serverRequest/resolved"
                            && n.params.get("requestId").is_some_and(|r| same_id(r, &id)) => {
                            tracing::info!("codex withdrew its approval request");
                            break None;
                        }
                        Some(message) => self.backlog.push_back(message),
                        None => {
                            self.closed = true;
                            break None;
                        }
                    },
                }
            }
        };
        let decision = match outcome {
            None => return,
            Some(Ok(option_id)) => match option_id.as_str() {
                option::ALLOW => Decision::Accept,
                option::ALLOW_SESSION if approval.session_allowed => Decision::AcceptForSession,
                option::ALLOW_SESSION => Decision::Accept,
                _ => Decision::Decline,
            },
            Some(Err(TurnError::Interrupted)) => Decision::Cancel,
            Some(Err(e)) => {
                tracing::warn!("the permission request failed ({e}); declining");
                Decision::Decline
            }
        };
        tracing::info!(?decision, item = %approval.item_id, "answering codex's approval request");
        if let Err(e) = self.peer.respond(id, Ok(decision.result())).await {
            tracing::warn!("cannot answer codex's approval request: {e}");
        }
    }

    /// Ends the process: stdin closed (codex exits on end of input), then the SDK's
    /// shutdown ladder for it and whatever it left behind.
    pub async fn shutdown(&mut self) {
        let _ = self.peer.flush().await;
        let outcome = self.process.shutdown(SHUTDOWN_GRACE).await;
        tracing::debug!(?outcome, "codex app-server stopped");
    }
}

fn same_id(value: &Value, id: &RequestId) -> bool {
    match id {
        RequestId::Int(n) => value.as_i64() == Some(*n),
        RequestId::Str(s) => value.as_str() == Some(s.as_str()),
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
    fn request_ids_compare_with_what_resolved_names() {
        assert!(same_id(&json!(0), &RequestId::Int(0)));
        assert!(!same_id(&json!(1), &RequestId::Int(0)));
        assert!(same_id(&json!("a"), &RequestId::Str("a".into())));
    }
}
