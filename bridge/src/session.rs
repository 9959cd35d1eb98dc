//! Sessions: one actor task per session that owns its adapter process and its
//! history, and enforces the turn contract whatever the adapter does.
//!
//! Turn state: idle → running → awaiting_permission → running → idle. The actor:
//! - appends every block to the session's history (which assigns `seq`) and
//!   broadcasts it to the clients following the session;
//! - checks each block against the shared [`TurnTracker`]: a block that breaks the
//!   contract is logged and dropped; what the adapter leaves open when its own
//!   `session_end` arrives is closed first;
//! - when the adapter crashes, exits, or goes silent past the liveness deadline in a
//!   turn, closes the turn with an `error` block and a `session_end` (reason `error`),
//!   and restarts the adapter on the next message, resuming with the agent's own
//!   session id — unless the crash budget is spent;
//! - queues messages sent during a turn when the adapter lacks
//!   `cap_input_during_turn` and delivers them in order after `session_end`;
//! - never becomes a second writer to a conversation a terminal drives
//!   (docs/session-handoff.md): for an agent with the handoff hooks, a message is
//!   delivered only after `is_cwd_externally_owned` says no native process drives the
//!   directory; otherwise the session is *parked*: messages queue, a `session_state`
//!   block tells the app, the terminal's transcript is mirrored read-only, and once the
//!   terminal is idle the lineage head is re-resolved and the queue drained in order.

use std::collections::VecDeque;
use std::time::Duration;
use terminull_protocol::blocks::MIRRORED_META;

use terminull_protocol::adapter::{self as proto, AdapterRequest, Declaration, HandoffHook, InitParam, StartParams};
use terminull_protocol::blocks::{
    Block, BlockKind, EndReason, Ownership, SessionStateNotice, Usage, UserMessage, now_ts,
};
use terminull_protocol::commands::with_universal_first;
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionListing, SessionState};
use terminull_protocol::ids::{AgentSessionId, PermissionRequestId, SessionId};
use terminull_protocol::turn::TurnTracker;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use crate::history::{self, HistoryStore, Parked, PendingWork, SessionLog, SessionMeta};
use crate::host::{AdapterCommand, AdapterEvent, HostedAdapter, launch};

/// Policy of a session; small pure values so tests can shorten them.
#[derive(Debug, Clone)]
pub struct SessionPolicy {
    /// A running turn with no output for this long is declared hung.
    pub liveness: Duration,
    /// Deadline for the adapter's handshake.
    pub handshake_timeout: Duration,
    /// At most this many crashes …
    pub crash_budget: usize,
    /// … within this window before automatic restarts stop.
    pub crash_window: Duration,
    /// How often a parked session asks whether the terminal still owns it and reads
    /// the terminal's transcript.
    pub handoff_poll: Duration,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        Self {
            liveness: Duration::from_secs(600),
            handshake_timeout: Duration::from_secs(120),
            crash_budget: 5,
            crash_window: Duration::from_secs(180),
            handoff_poll: Duration::from_secs(2),
        }
    }
}

/// True when `crashes` (times of past crashes, oldest first) leave room for another
/// automatic restart at `now`.
pub fn may_restart(crashes: &VecDeque<Instant>, now: Instant, policy: &SessionPolicy) -> bool {
    crashes.iter().filter(|t| now.duration_since(**t) <= policy.crash_window).count() < policy.crash_budget
}

/// What a parked session does at a poll, given whether a terminal owns the
/// conversation now, whether one was seen owning it since the session was parked, and
/// how many messages wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkedStep {
    /// Stay parked (mirroring).
    Stay,
    /// Attach: re-resolve the lineage head, go live, drain the queue.
    Attach,
}

/// The parking policy: attach once no terminal owns the conversation and either a
/// terminal was seen owning it (it went idle) or a message waits. A session handed to
/// the terminal by `continue_in_terminal` therefore stays parked until the terminal has
/// taken it and let it go, or until the user writes from the app again.
pub fn parked_step(owned: bool, seen_owner: bool, queued: usize) -> ParkedStep {
    if !owned && (seen_owner || queued > 0) { ParkedStep::Attach } else { ParkedStep::Stay }
}

/// Blocks buffered for followers before a slow one lags; a lagging follower resumes
/// from history by seq, so nothing is lost. tokio's broadcast channel allocates every
/// slot up front, so this is per-session memory (4096 slots measured ~1 MB per idle
/// session; 256 keep it small while covering a burst of streamed chunks).
const FOLLOWER_BUFFER: usize = 256;
/// Messages a session holds for later delivery (behind a turn, or while a terminal
/// owns the conversation); one more is refused as `busy`. They are kept in the
/// session's metadata, so the bound also bounds that file.
pub const MAX_QUEUED_MESSAGES: usize = 64;

/// Commands queued per session.
const COMMAND_QUEUE: usize = 256;

/// A request to a session actor.
#[derive(Debug)]
pub enum SessionCommand {
    /// A user message (queued while a turn runs unless the agent takes input during turns).
    UserMessage(UserMessage, oneshot::Sender<Result<(), ReplyError>>),
    /// Interrupt the running turn.
    Interrupt(oneshot::Sender<Result<(), ReplyError>>),
    /// Answer a permission request.
    PermissionResponse(PermissionRequestId, String, oneshot::Sender<Result<(), ReplyError>>),
    /// Usage of the session.
    GetUsage(oneshot::Sender<Result<Usage, ReplyError>>),
    /// Follow the session: the blocks after a point, then live ones.
    Follow {
        /// Blocks with a greater seq are replayed.
        since_seq: Option<u64>,
        /// Or blocks newer than this time.
        since_ts: Option<f64>,
        /// The backlog and the live feed.
        reply: oneshot::Sender<Result<Following, ReplyError>>,
    },
    /// A listing line.
    Listing(oneshot::Sender<SessionListing>),
    /// End the session.
    Stop(oneshot::Sender<Result<(), ReplyError>>),
    /// Let the adapter go and end the actor, keeping the session resumable (bridge shutdown).
    Detach(oneshot::Sender<()>),
    /// Hand the idle conversation to a terminal: release the agent, park the session,
    /// answer the resume command.
    ContinueInTerminal(oneshot::Sender<Result<proto::TerminalResumeCommandResult, ReplyError>>),
}

/// The most older-history blocks a resume by `since_ts` sends after `replay_done`.
pub const OLDER_HISTORY_CAP: usize = 1000;

/// What [`SessionCommand::Follow`] returns.
#[derive(Debug)]
pub struct Following {
    /// Blocks after the resume point, compacted.
    pub backlog: Vec<Block>,
    /// For a resume by `since_ts`: the older history (at most [`OLDER_HISTORY_CAP`]
    /// blocks, the newest), compacted, sent after `replay_done` with `replay: true`.
    pub history: Vec<Block>,
    /// Blocks from now on.
    pub live: broadcast::Receiver<Block>,
}

/// A handle to a running session actor.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    /// The session.
    pub id: SessionId,
    /// Its agent.
    pub agent_id: String,
    tx: mpsc::Sender<SessionCommand>,
}

fn gone() -> ReplyError {
    ReplyError { code: ReplyErrorCode::UnknownSession, message: "the session has ended".into() }
}

impl SessionHandle {
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> SessionCommand) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Sends a user message.
    pub async fn user_message(&self, message: UserMessage) -> Result<(), ReplyError> {
        self.ask(|tx| SessionCommand::UserMessage(message, tx)).await.unwrap_or_else(|| Err(gone()))
    }

    /// Interrupts the running turn.
    pub async fn interrupt(&self) -> Result<(), ReplyError> {
        self.ask(SessionCommand::Interrupt).await.unwrap_or_else(|| Err(gone()))
    }

    /// Answers a permission request.
    pub async fn permission_response(&self, id: PermissionRequestId, option: String) -> Result<(), ReplyError> {
        self.ask(|tx| SessionCommand::PermissionResponse(id, option, tx)).await.unwrap_or_else(|| Err(gone()))
    }

    /// The session's usage.
    pub async fn usage(&self) -> Result<Usage, ReplyError> {
        self.ask(SessionCommand::GetUsage).await.unwrap_or_else(|| Err(gone()))
    }

    /// Follows the session from a resume point.
    pub async fn follow(&self, since_seq: Option<u64>, since_ts: Option<f64>) -> Result<Following, ReplyError> {
        self.ask(|reply| SessionCommand::Follow { since_seq, since_ts, reply }).await.unwrap_or_else(|| Err(gone()))
    }

    /// A listing line, `None` once the actor is gone.
    pub async fn listing(&self) -> Option<SessionListing> {
        self.ask(SessionCommand::Listing).await
    }

    /// Stops the session.
    pub async fn stop(&self) -> Result<(), ReplyError> {
        self.ask(SessionCommand::Stop).await.unwrap_or_else(|| Err(gone()))
    }

    /// Ends the actor and its adapter but keeps the session resumable; returns once done.
    pub async fn detach(&self) {
        let _ = self.ask(SessionCommand::Detach).await;
    }

    /// Hands the conversation to a terminal; the command that continues it there.
    pub async fn continue_in_terminal(&self) -> Result<proto::TerminalResumeCommandResult, ReplyError> {
        self.ask(SessionCommand::ContinueInTerminal).await.unwrap_or_else(|| Err(gone()))
    }
}

/// Everything needed to (re)start a session's adapter.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// The session.
    pub meta: SessionMeta,
    /// How to start the adapter.
    pub command: AdapterCommand,
    /// The agent CLI path from config, passed as `binary` when accepted.
    pub binary: Option<String>,
    /// Policy.
    pub policy: SessionPolicy,
    /// Where the session's metadata is kept.
    pub store: HistoryStore,
    /// Where turn ends, permission requests and errors are announced.
    pub notices: tokio::sync::broadcast::Sender<crate::service::Notice>,
    /// The handoff hooks the agent's adapter declares.
    pub hooks: Vec<HandoffHook>,
    /// Bound to a conversation the agent's CLI started (`attach_external`): its
    /// transcript is mirrored into the history first, and the session parks when a
    /// terminal drives it.
    pub attach: bool,
}

/// Starts a session actor and returns its handle. With `start_now` the adapter is
/// launched and the session started (appending its `agent_info`) before this returns,
/// and a failure to start is the error; otherwise (a session revived from history)
/// the adapter starts with the first message, so replaying history costs no process.
pub async fn spawn_session(spec: SessionSpec, log: SessionLog, start_now: bool) -> Result<SessionHandle, ReplyError> {
    let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
    let (live, _) = broadcast::channel(FOLLOWER_BUFFER);
    let mut actor = Actor {
        spec,
        log,
        live,
        adapter: None,
        declaration: None,
        state: SessionState::Idle,
        turn: None,
        last_output: Instant::now(),
        pending: PendingWork::default(),
        crashes: VecDeque::new(),
        ever_started: false,
        next_poll: Instant::now(),
    };
    if start_now {
        actor.ensure_adapter().await?;
    } else {
        actor.state = SessionState::Detached;
        // Revived after a bridge restart: what it had accepted and not carried out.
        actor.pending = actor.spec.meta.pending.clone();
        if actor.pending.parked.is_some() {
            actor.state = SessionState::Parked;
        }
    }
    if actor.spec.attach {
        actor.attach_external().await?;
    }
    let handle =
        SessionHandle { id: actor.spec.meta.session_id.clone(), agent_id: actor.spec.meta.agent_id.to_string(), tx };
    tokio::spawn(actor.run(rx));
    Ok(handle)
}

struct Actor {
    spec: SessionSpec,
    log: SessionLog,
    live: broadcast::Sender<Block>,
    adapter: Option<HostedAdapter>,
    declaration: Option<Declaration>,
    state: SessionState,
    turn: Option<TurnTracker>,
    last_output: Instant,
    /// Queued messages, the parked state and the mirror's position; saved in the
    /// session's metadata whenever they change ([`Actor::save_pending`]).
    pending: PendingWork,
    crashes: VecDeque<Instant>,
    ever_started: bool,
    /// When a parked session polls next (a deadline, so that commands arriving in
    /// between do not postpone it).
    next_poll: Instant,
}

fn agent_failed(message: impl Into<String>) -> ReplyError {
    ReplyError { code: ReplyErrorCode::AgentFailed, message: message.into() }
}

impl Actor {
    fn label(&self) -> String {
        format!("{} ({})", self.spec.meta.agent_id, self.spec.command.program.display())
    }

    /// Appends to history and broadcasts; logs (never panics) when the disk refuses.
    fn publish(&mut self, kind: BlockKind) {
        let block = Block { seq: None, ts: now_ts(), meta: None, kind };
        self.publish_block(block);
    }

    fn publish_block(&mut self, block: Block) {
        // The terminal's own turns, mirrored, are not news for the user's devices.
        let mirrored =
            block.meta.as_ref().is_some_and(|m| m.get(MIRRORED_META) == Some(&serde_json::Value::Bool(true)));
        match self.log.append(block) {
            Ok(stamped) => {
                if !mirrored {
                    self.announce(&stamped.kind);
                }
                let _ = self.live.send(stamped);
            }
            Err(e) => tracing::error!(session = %self.spec.meta.session_id, "cannot write history: {e}"),
        }
    }

    fn announce(&self, kind: &BlockKind) {
        use terminull_protocol::relay::PushKind;
        let agent = &self.spec.meta.agent_id;
        let (kind, title, body) = match kind {
            BlockKind::SessionEnd(end) => {
                (PushKind::TurnFinished, format!("{agent}: turn finished"), end.message.clone().unwrap_or_default())
            }
            BlockKind::PermissionRequest(p) => {
                (PushKind::PermissionNeeded, format!("{agent} asks to use {}", p.tool), String::new())
            }
            BlockKind::Error(e) => (PushKind::Error, format!("{agent}: error"), e.message.clone()),
            _ => return,
        };
        let notice = crate::service::Notice { session_id: self.spec.meta.session_id.clone(), kind, title, body };
        let _ = self.spec.notices.send(notice);
    }

    /// Starts the adapter when none runs (first start, or after a crash).
    async fn ensure_adapter(&mut self) -> Result<(), ReplyError> {
        if self.adapter.is_some() {
            return Ok(());
        }
        if self.ever_started && !may_restart(&self.crashes, Instant::now(), &self.spec.policy) {
            let n = self.spec.policy.crash_budget;
            let message = format!(
                "the adapter {} crashed {n} {} within {:?}; automatic restarts are stopped — start a new session",
                self.label(),
                if n == 1 { "time" } else { "times" },
                self.spec.policy.crash_window
            );
            tracing::error!("{message}");
            return Err(agent_failed(message));
        }
        let mut adapter = launch(self.spec.command.clone(), self.spec.policy.handshake_timeout)
            .await
            .map_err(|e| agent_failed(e.to_string()))?;
        let d = adapter.declaration().clone();
        let takes = |p| d.accepted_init_params.contains(&p);
        let meta = &self.spec.meta;
        let params = StartParams {
            session_id: meta.session_id.clone(),
            cwd: takes(InitParam::Cwd).then(|| meta.cwd.clone()),
            model: meta.model.clone().filter(|_| takes(InitParam::Model)),
            binary: self.spec.binary.clone().filter(|_| takes(InitParam::Binary)),
            resume_session_id: meta.agent_session_id.clone().filter(|_| takes(InitParam::ResumeSessionId)),
            effort: meta.effort.clone().filter(|_| takes(InitParam::Effort)),
            permission_mode: meta.permission_mode.clone().filter(|_| takes(InitParam::PermissionMode)),
        };
        match adapter.call::<proto::Start>(&params).await {
            Ok(started) => {
                let mut info = started.agent_info;
                info.slash_commands = with_universal_first(info.slash_commands);
                // The declaration is the single source of truth for capabilities.
                info.capabilities = d.capabilities;
                self.publish(BlockKind::AgentInfo(info));
                self.adapter = Some(adapter);
                self.declaration = Some(d);
                self.ever_started = true;
                if self.state == SessionState::Detached {
                    self.state = SessionState::Idle;
                }
                Ok(())
            }
            Err(e) => {
                let message = format!("{}: start failed: {e}", self.label());
                adapter.shutdown().await;
                Err(agent_failed(message))
            }
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<SessionCommand>) {
        self.resume_pending().await;
        loop {
            self.save_pending();
            let watching = matches!(self.state, SessionState::Running);
            let parked = self.pending.parked.is_some();
            let next_poll = self.next_poll;
            let deadline = self.last_output + self.spec.policy.liveness;
            tokio::select! {
                command = rx.recv() => match command {
                    Some(command) => {
                        if self.command(command).await {
                            break;
                        }
                    }
                    None => {
                        // Every handle is gone (bridge shutdown): let the adapter go.
                        self.shutdown_adapter(true).await;
                        break;
                    }
                },
                event = next_event(&mut self.adapter) => self.event(event).await,
                () = tokio::time::sleep_until(deadline), if watching => self.hung().await,
                () = tokio::time::sleep_until(next_poll), if parked => {
                    self.poll_parked().await;
                    // From the end of this poll: a slow hook does not stack polls up.
                    self.next_poll = Instant::now() + self.spec.policy.handoff_poll;
                }
            }
        }
    }

    /// Handles one command; true when the session is over.
    async fn command(&mut self, command: SessionCommand) -> bool {
        match command {
            SessionCommand::UserMessage(message, reply) => {
                let result = self.user_message(message).await;
                let _ = reply.send(result);
            }
            SessionCommand::Interrupt(reply) => {
                let result = self.interrupt().await;
                let _ = reply.send(result);
            }
            SessionCommand::PermissionResponse(id, option, reply) => {
                let result = self.permission_response(id, option).await;
                let _ = reply.send(result);
            }
            SessionCommand::GetUsage(reply) => {
                let result = self.usage().await;
                let _ = reply.send(result);
            }
            SessionCommand::Follow { since_seq, since_ts, reply } => {
                let backlog = match (since_seq, since_ts) {
                    (Some(seq), _) => self.log.read_since_seq(seq),
                    (None, Some(ts)) => self.log.read_since_ts(ts),
                    (None, None) => self.log.read_since_seq(0),
                };
                // The spec's lifecycle (§1.4): an app resuming by time gets the older
                // history too, after replay_done; a resume by seq is exact and gets none.
                let history = match (since_seq, since_ts, &backlog) {
                    (None, Some(_), Ok(backlog)) => {
                        let first = backlog.first().and_then(|b| b.seq).unwrap_or(u64::MAX);
                        let mut older: Vec<Block> = self
                            .log
                            .read_all()
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|b| b.seq.is_some_and(|s| s < first))
                            .collect();
                        let skip = older.len().saturating_sub(OLDER_HISTORY_CAP);
                        older.drain(..skip);
                        older
                    }
                    _ => Vec::new(),
                };
                let result = backlog
                    .map(|backlog| Following { backlog, history, live: self.live.subscribe() })
                    .map_err(|e| ReplyError { code: ReplyErrorCode::Internal, message: e.to_string() });
                let _ = reply.send(result);
            }
            SessionCommand::Listing(reply) => {
                let m = &self.spec.meta;
                let _ = reply.send(SessionListing {
                    session_id: m.session_id.clone(),
                    agent_id: m.agent_id.clone(),
                    cwd: m.cwd.clone(),
                    state: self.state,
                    last_seq: self.log.last_seq(),
                    title: m.title.clone(),
                });
            }
            SessionCommand::Detach(reply) => {
                if self.turn.is_some() {
                    self.end_turn(EndReason::Stopped, Some("the bridge is shutting down"));
                }
                self.shutdown_adapter(true).await;
                if let Err(e) = self.log.sync() {
                    tracing::warn!(session = %self.spec.meta.session_id, "cannot sync history: {e}");
                }
                let _ = reply.send(());
                return true;
            }
            SessionCommand::ContinueInTerminal(reply) => {
                let result = self.continue_in_terminal().await;
                let _ = reply.send(result);
            }
            SessionCommand::Stop(reply) => {
                if self.turn.is_some() {
                    self.end_turn(EndReason::Stopped, None);
                }
                self.shutdown_adapter(true).await;
                self.state = SessionState::Stopped;
                self.spec.meta.state = history::SessionState::Stopped;
                self.save_meta();
                let _ = reply.send(Ok(()));
                return true;
            }
        }
        false
    }

    async fn user_message(&mut self, message: UserMessage) -> Result<(), ReplyError> {
        let in_turn = matches!(self.state, SessionState::Running | SessionState::AwaitingPermission);
        let takes_input = self.declaration.as_ref().is_some_and(|d| d.capabilities.cap_input_during_turn);
        let would_queue = self.pending.parked.is_some() || (in_turn && !takes_input);
        if would_queue && self.pending.queued.len() >= MAX_QUEUED_MESSAGES {
            return Err(ReplyError {
                code: ReplyErrorCode::Busy,
                message: format!(
                    "{MAX_QUEUED_MESSAGES} messages are already waiting for this session; send more once they are delivered"
                ),
            });
        }
        self.publish(BlockKind::UserMessage(message.clone()));
        if self.pending.parked.is_some() {
            // Never sent while a terminal owns the conversation: it waits for the attach.
            self.pending.queued.push_back(message);
            self.announce_parked();
            return Ok(());
        }
        if in_turn && !takes_input {
            self.pending.queued.push_back(message);
            return Ok(());
        }
        self.guarded_deliver(message).await
    }

    /// Delivers `message` unless a terminal drives the conversation, in which case the
    /// session parks and the message waits at the head of the queue.
    async fn guarded_deliver(&mut self, message: UserMessage) -> Result<(), ReplyError> {
        if let Some(owner) = self.terminal_owner().await {
            self.pending.queued.push_front(message);
            self.park(Parked { seen_owner: true, owner_pid: owner, resume_command: None }).await;
            return Ok(());
        }
        self.deliver(message).await
    }

    fn has_hook(&self, hook: HandoffHook) -> bool {
        self.spec.hooks.contains(&hook)
    }

    /// A short-lived adapter process for class-level hook calls.
    async fn hook_process(&self) -> Result<HostedAdapter, String> {
        launch(self.spec.command.clone(), self.spec.policy.handshake_timeout)
            .await
            .map_err(|e| format!("{}: {e}", self.label()))
    }

    /// One class-level hook call on its own short-lived adapter process.
    async fn hook<M: AdapterRequest>(&self, params: &M::Params) -> Result<M::Result, String> {
        let mut adapter = self.hook_process().await?;
        let result = self.hook_on::<M>(&adapter, params).await;
        adapter.shutdown().await;
        result
    }

    async fn hook_on<M: AdapterRequest>(
        &self,
        adapter: &HostedAdapter,
        params: &M::Params,
    ) -> Result<M::Result, String> {
        adapter.call::<M>(params).await.map_err(|e| format!("{}: {}: {e}", self.label(), M::METHOD))
    }

    /// `Some(pid)` when a native agent process (not terminull's) drives the session's
    /// directory now. An adapter without the hook, or a failing hook, owns nothing
    /// (logged): the guard cannot know better than the adapter.
    async fn terminal_owner(&self) -> Option<Option<u32>> {
        if !self.has_hook(HandoffHook::IsCwdExternallyOwned) {
            return None;
        }
        let owner = match self.hook_process().await {
            Ok(mut adapter) => {
                let owner = self.terminal_owner_on(&adapter).await;
                adapter.shutdown().await;
                owner
            }
            Err(e) => Err(e),
        };
        owner.unwrap_or_else(|e| {
            tracing::warn!(session = %self.spec.meta.session_id, "is_cwd_externally_owned failed: {e}");
            None
        })
    }

    /// `Ok(Some(pid))` owned, `Ok(None)` not owned (or no hook), `Err` unknown.
    async fn terminal_owner_on(&self, adapter: &HostedAdapter) -> Result<Option<Option<u32>>, String> {
        if !self.has_hook(HandoffHook::IsCwdExternallyOwned) {
            return Ok(None);
        }
        let params = proto::IsCwdExternallyOwnedParams {
            cwd: self.spec.meta.cwd.clone(),
            agent_session_id: self.spec.meta.agent_session_id.clone(),
        };
        let r = self.hook_on::<proto::IsCwdExternallyOwned>(adapter, &params).await?;
        Ok(r.owned.then_some(r.pid))
    }

    /// Publishes the transcript entries the terminal wrote since the cursor.
    async fn mirror(&mut self) {
        self.read_mirror(true).await;
    }

    /// Moves the mirror's cursor to the end of the transcript without publishing, so
    /// terminull's own turns are not mirrored back.
    async fn skip_mirror(&mut self) {
        self.read_mirror(false).await;
    }

    async fn read_mirror(&mut self, publish: bool) {
        if !self.has_hook(HandoffHook::Mirror) || self.spec.meta.agent_session_id.is_none() {
            return;
        }
        match self.hook_process().await {
            Ok(mut adapter) => {
                self.read_mirror_on(&adapter, publish).await;
                adapter.shutdown().await;
            }
            Err(e) => tracing::warn!(session = %self.spec.meta.session_id, "mirror: {e}"),
        }
    }

    /// Reads the transcript from the cursor to its end (a huge one over a few calls,
    /// bounded; the rest at the next poll), publishing the blocks when `publish`.
    async fn read_mirror_on(&mut self, adapter: &HostedAdapter, publish: bool) {
        if !self.has_hook(HandoffHook::Mirror) {
            return;
        }
        let Some(sid) = self.spec.meta.agent_session_id.clone() else { return };
        for _ in 0..8 {
            let params = proto::MirrorParams {
                cwd: self.spec.meta.cwd.clone(),
                agent_session_id: sid.clone(),
                cursor: self.pending.mirror_cursor.clone(),
            };
            match self.hook_on::<proto::Mirror>(adapter, &params).await {
                Ok(r) => {
                    let done = r.blocks.is_empty() || Some(&r.cursor) == self.pending.mirror_cursor.as_ref();
                    self.pending.mirror_cursor = Some(r.cursor);
                    if publish {
                        for mut block in r.blocks {
                            if matches!(block.kind, BlockKind::SessionState(_) | BlockKind::AgentInfo(_)) {
                                continue;
                            }
                            block.seq = None;
                            block.meta.get_or_insert_with(Default::default).insert(MIRRORED_META.into(), true.into());
                            self.publish_block(block);
                        }
                    }
                    if done {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(session = %self.spec.meta.session_id, "mirror failed: {e}");
                    return;
                }
            }
        }
    }

    /// The first steps of an `attach_external` session: mirror the conversation so far
    /// into the history, then park when a terminal drives it.
    async fn attach_external(&mut self) -> Result<(), ReplyError> {
        self.mirror().await;
        match self.terminal_owner().await {
            Some(owner) => self.park(Parked { seen_owner: true, owner_pid: owner, resume_command: None }).await,
            None => {
                self.state = SessionState::Idle;
                self.publish(BlockKind::SessionState(SessionStateNotice {
                    state: Ownership::Live,
                    message: Some("attached: no terminal drives this conversation; terminull continues it".into()),
                    owner_pid: None,
                    queued: 0,
                    resume_command: None,
                }));
            }
        }
        Ok(())
    }

    /// Parks the session: from now on nothing is sent to the agent until the terminal
    /// lets go.
    async fn park(&mut self, parked: Parked) {
        if self.pending.mirror_cursor.is_none() {
            // Without a cursor the whole transcript would be mirrored again on top of the
            // history: start from its end.
            self.skip_mirror().await;
        }
        self.pending.parked = Some(parked);
        self.next_poll = Instant::now() + self.spec.policy.handoff_poll;
        self.state = SessionState::Parked;
        self.announce_parked();
        // What the terminal already wrote.
        self.mirror().await;
    }

    fn announce_parked(&mut self) {
        let Some(p) = self.pending.parked.clone() else { return };
        let agent = &self.spec.meta.agent_id;
        let message = match (&p.resume_command, p.owner_pid) {
            (Some(argv), _) => format!(
                "handed to the terminal: run `{}` in {}; terminull observes and queues your messages",
                argv.join(" "),
                self.spec.meta.cwd
            ),
            (None, Some(pid)) => format!(
                "{agent} (pid {pid}) drives this conversation in a terminal; terminull observes it and queues your messages"
            ),
            (None, None) => {
                format!(
                    "{agent} drives this conversation in a terminal; terminull observes it and queues your messages"
                )
            }
        };
        self.publish(BlockKind::SessionState(SessionStateNotice {
            state: Ownership::Parked,
            message: Some(message),
            owner_pid: p.owner_pid,
            queued: u32::try_from(self.pending.queued.len()).unwrap_or(u32::MAX),
            resume_command: p.resume_command,
        }));
    }

    /// One poll of a parked session: who owns it, what the terminal wrote, and attach
    /// when the terminal is done.
    async fn poll_parked(&mut self) {
        // One short-lived adapter process for both questions of this poll.
        let owner = match self.hook_process().await {
            Ok(mut adapter) => {
                let owner = self.terminal_owner_on(&adapter).await;
                // Mirrored after the ownership check, so a terminal that just exited has
                // its last turn shown before terminull writes.
                self.read_mirror_on(&adapter, true).await;
                adapter.shutdown().await;
                owner
            }
            Err(e) => Err(e),
        };
        let owner = match owner {
            Ok(owner) => owner,
            Err(e) => {
                // Unknown: stay parked rather than risk a second writer; ask again next poll.
                tracing::warn!(session = %self.spec.meta.session_id, "handoff poll: {e}");
                return;
            }
        };
        let Some(parked) = self.pending.parked.as_mut() else { return };
        if let Some(pid) = owner {
            parked.seen_owner = true;
            if parked.owner_pid != pid && pid.is_some() {
                parked.owner_pid = pid;
                self.announce_parked();
            }
            return;
        }
        if parked_step(false, parked.seen_owner, self.pending.queued.len()) == ParkedStep::Attach {
            self.attach().await;
        }
    }

    /// The terminal let go: re-resolve the lineage head, go live, drain the queue.
    async fn attach(&mut self) {
        if self.has_hook(HandoffHook::LatestSidForCwd) {
            let params = proto::LatestSidForCwdParams { cwd: self.spec.meta.cwd.clone() };
            match self.hook::<proto::LatestSidForCwd>(&params).await {
                Ok(r) => {
                    if let Some(head) = r.agent_session_id
                        && self.spec.meta.agent_session_id.as_ref() != Some(&head)
                    {
                        tracing::info!(session = %self.spec.meta.session_id, "lineage head is now {head}");
                        self.spec.meta.agent_session_id = Some(head);
                        self.save_meta();
                        // Another transcript: its cursor means nothing here.
                        self.pending.mirror_cursor = None;
                        self.skip_mirror().await;
                    }
                }
                Err(e) => tracing::warn!(session = %self.spec.meta.session_id, "latest_sid_for_cwd failed: {e}"),
            }
        }
        // The agent may hold a stale view of the conversation; the next message starts
        // it afresh with the head.
        self.shutdown_adapter(true).await;
        self.pending.parked = None;
        self.state = SessionState::Idle;
        let queued = u32::try_from(self.pending.queued.len()).unwrap_or(u32::MAX);
        self.publish(BlockKind::SessionState(SessionStateNotice {
            state: Ownership::Live,
            message: Some(if queued == 0 {
                "the terminal is idle; terminull continues this conversation".into()
            } else {
                format!(
                    "the terminal is idle; terminull continues this conversation with your {queued} queued message(s)"
                )
            }),
            owner_pid: None,
            queued,
            resume_command: None,
        }));
        if let Some(next) = self.pending.queued.pop_front() {
            let _ = self.deliver(next).await;
        }
    }

    /// `continue_in_terminal`: only between turns; releases the agent and parks.
    async fn continue_in_terminal(&mut self) -> Result<proto::TerminalResumeCommandResult, ReplyError> {
        let unsupported = |what: &str| ReplyError {
            code: ReplyErrorCode::NotSupported,
            message: format!("{} cannot continue in a terminal: {what}", self.spec.meta.agent_id),
        };
        if !self.has_hook(HandoffHook::TerminalResumeCommand) {
            return Err(unsupported("its adapter has no terminal_resume_command"));
        }
        if matches!(self.state, SessionState::Running | SessionState::AwaitingPermission) {
            return Err(ReplyError {
                code: ReplyErrorCode::Busy,
                message: "a turn is running; interrupt it or wait for it to end".into(),
            });
        }
        let Some(sid) = self.spec.meta.agent_session_id.clone() else {
            return Err(unsupported("the agent has not reported its session id yet (send a message first)"));
        };
        let params =
            proto::TerminalResumeCommandParams { agent_session_id: sid, cwd: Some(self.spec.meta.cwd.clone()) };
        let command = self.hook::<proto::TerminalResumeCommand>(&params).await.map_err(agent_failed)?;
        if self.pending.parked.as_ref().is_some_and(|p| p.resume_command.as_ref() == Some(&command.argv)) {
            return Ok(command);
        }
        // Release: a persistent adapter lets its CLI go; then the adapter itself goes, so
        // nothing of terminull holds the conversation while the terminal has it.
        if let Some(adapter) = self.adapter.as_ref()
            && adapter.declaration().handoff_hooks.contains(&HandoffHook::Release)
            && let Err(e) = adapter.call::<proto::Release>(&proto::Empty {}).await
        {
            tracing::warn!(session = %self.spec.meta.session_id, "release failed ({e}); stopping the adapter");
        }
        self.shutdown_adapter(true).await;
        if self.pending.mirror_cursor.is_none() || self.pending.parked.is_none() {
            // Terminull's own turns are in the history already.
            self.skip_mirror().await;
        }
        let seen_owner = self.pending.parked.as_ref().is_some_and(|p| p.seen_owner);
        self.pending.parked = Some(Parked { seen_owner, owner_pid: None, resume_command: Some(command.argv.clone()) });
        self.next_poll = Instant::now() + self.spec.policy.handoff_poll;
        self.state = SessionState::Parked;
        self.announce_parked();
        Ok(command)
    }

    async fn deliver(&mut self, message: UserMessage) -> Result<(), ReplyError> {
        if let Err(e) = self.ensure_adapter().await {
            // The message was recorded; its turn still ends, so no client waits forever.
            self.turn = Some(TurnTracker::new());
            self.end_turn(EndReason::Error, Some(&e.message));
            self.state = SessionState::Detached;
            return Err(e);
        }
        let Some(adapter) = self.adapter.as_ref() else { return Err(agent_failed("no adapter")) };
        if self.turn.is_none() {
            self.turn = Some(TurnTracker::new());
        }
        self.state = SessionState::Running;
        self.last_output = Instant::now();
        if let Err(e) = adapter.call::<proto::Send>(&message).await {
            let text = format!("{}: send failed: {e}", self.label());
            self.end_turn(EndReason::Error, Some(&text));
            return Err(agent_failed(text));
        }
        Ok(())
    }

    async fn interrupt(&mut self) -> Result<(), ReplyError> {
        let Some(adapter) = self.adapter.as_ref() else { return Ok(()) };
        if !adapter.declaration().capabilities.cap_interrupt {
            return Err(ReplyError {
                code: ReplyErrorCode::NotSupported,
                message: format!("{} cannot be interrupted (cap_interrupt is false)", self.spec.meta.agent_id),
            });
        }
        adapter.call::<proto::Interrupt>(&proto::Empty {}).await.map(drop).map_err(|e| agent_failed(e.to_string()))
    }

    async fn permission_response(&mut self, id: PermissionRequestId, option: String) -> Result<(), ReplyError> {
        let Some(adapter) = self.adapter.as_ref() else { return Err(agent_failed("the adapter is not running")) };
        if !adapter.declaration().capabilities.cap_permissions {
            return Err(ReplyError {
                code: ReplyErrorCode::NotSupported,
                message: format!("{} does not ask for permissions (cap_permissions is false)", self.spec.meta.agent_id),
            });
        }
        let params = proto::PermissionResponseParams { request_id: id, option_id: option };
        adapter.call::<proto::PermissionResponse>(&params).await.map_err(|e| agent_failed(e.to_string()))?;
        if self.state == SessionState::AwaitingPermission {
            self.state = SessionState::Running;
            self.last_output = Instant::now();
        }
        Ok(())
    }

    async fn usage(&mut self) -> Result<Usage, ReplyError> {
        let Some(adapter) = self.adapter.as_ref() else { return Err(agent_failed("the adapter is not running")) };
        if !adapter.declaration().capabilities.provides_usage {
            return Err(ReplyError {
                code: ReplyErrorCode::NotSupported,
                message: format!("{} does not provide usage", self.spec.meta.agent_id),
            });
        }
        adapter.call::<proto::GetUsage>(&proto::Empty {}).await.map_err(|e| agent_failed(e.to_string()))
    }

    async fn event(&mut self, event: Option<AdapterEvent>) {
        match event {
            Some(AdapterEvent::Block(block)) => self.block(block).await,
            Some(AdapterEvent::AgentSessionId(id)) => self.agent_session_id(id),
            Some(AdapterEvent::Invalid(what)) => {
                tracing::warn!(adapter = %self.label(), "dropped: {what}");
            }
            Some(AdapterEvent::BadLine(e)) => {
                tracing::warn!(adapter = %self.label(), "skipped a stdout line: {e}");
            }
            Some(AdapterEvent::Exited { status, stderr_tail }) => {
                let status = status.map_or_else(|| "stdout closed".to_owned(), |s| s.to_string());
                let mut text = format!("the adapter {} exited ({status})", self.label());
                let tail = stderr_tail.trim_end();
                if !tail.is_empty() {
                    text.push_str(&format!("; stderr tail:\n{tail}"));
                }
                tracing::error!("{text}");
                if self.adapter.take().is_some() {
                    self.crashes.push_back(Instant::now());
                    while self.crashes.len() > self.spec.policy.crash_budget {
                        self.crashes.pop_front();
                    }
                }
                if self.turn.is_some() {
                    self.end_turn(EndReason::Error, Some(&text));
                }
                self.pending.queued.clear();
                self.state = SessionState::Detached;
            }
            None => {}
        }
    }

    async fn block(&mut self, mut block: Block) {
        self.last_output = Instant::now();
        block.seq = None;
        if matches!(block.kind, BlockKind::SessionState(_)) {
            tracing::warn!(adapter = %self.label(), "dropped a `session_state` block: only the bridge sends those");
            return;
        }
        let Some(mut tracker) = self.turn.take() else {
            // Outside a turn only informational blocks make sense.
            match block.kind {
                BlockKind::SessionSummary(_) | BlockKind::Progress(_) | BlockKind::BgTask(_) | BlockKind::Error(_) => {
                    self.publish_block(block);
                }
                _ => {
                    tracing::warn!(adapter = %self.label(), "dropped a `{}` block sent outside a turn", block.block_type())
                }
            }
            return;
        };
        if let BlockKind::SessionEnd(_) = &block.kind {
            for closing in tracker.close_open("the agent ended the turn before this finished") {
                tracing::warn!(adapter = %self.label(), "closing a `{}` the adapter left open", closing.block_type());
                self.publish(closing);
            }
        }
        if let Some(violation) = tracker.observe(&block.kind) {
            tracing::warn!(adapter = %self.label(), "dropped a block that breaks the turn contract: {violation}");
            self.turn = Some(tracker);
            return;
        }
        match &block.kind {
            BlockKind::PermissionRequest(_) => self.state = SessionState::AwaitingPermission,
            BlockKind::SessionSummary(s) => {
                if let Some(title) = &s.title {
                    self.spec.meta.title = Some(title.clone());
                    self.save_meta();
                }
            }
            _ => {}
        }
        let ended = matches!(block.kind, BlockKind::SessionEnd(_));
        self.publish_block(block);
        if ended {
            self.state = SessionState::Idle;
            if let Some(next) = self.pending.queued.pop_front() {
                let _ = self.guarded_deliver(next).await;
            } else if self.has_hook(HandoffHook::Mirror) {
                // Terminull's own turn is in the history: the mirror starts after it.
                self.skip_mirror().await;
            }
        } else {
            self.turn = Some(tracker);
        }
    }

    fn agent_session_id(&mut self, id: AgentSessionId) {
        if self.spec.meta.agent_session_id.as_ref() != Some(&id) {
            self.spec.meta.agent_session_id = Some(id);
            self.save_meta();
        }
    }

    /// The running turn produced nothing for too long.
    async fn hung(&mut self) {
        let text = format!(
            "the adapter {} produced nothing for {:?} during a turn; it was stopped",
            self.label(),
            self.spec.policy.liveness
        );
        tracing::error!("{text}");
        self.end_turn(EndReason::Error, Some(&text));
        self.shutdown_adapter(false).await;
        self.state = SessionState::Detached;
    }

    /// Closes the current turn: everything open, an error block when `error`, and
    /// the single `session_end`.
    fn end_turn(&mut self, reason: EndReason, error: Option<&str>) {
        if let Some(mut tracker) = self.turn.take() {
            for kind in tracker.close(reason, error) {
                self.publish(kind);
            }
        }
        self.state = SessionState::Idle;
    }

    async fn shutdown_adapter(&mut self, polite: bool) {
        if let Some(mut adapter) = self.adapter.take() {
            if polite {
                let _ = adapter.call::<proto::Stop>(&proto::Empty {}).await;
            }
            adapter.shutdown().await;
        }
    }

    /// A revived session with messages queued and no terminal to wait for sends the
    /// first now (through the guard: a terminal that took the conversation meanwhile
    /// parks it); the rest follow at each turn's end, as before the restart.
    async fn resume_pending(&mut self) {
        if self.pending.parked.is_some() || self.adapter.is_some() {
            return;
        }
        if let Some(next) = self.pending.queued.pop_front() {
            tracing::info!(session = %self.spec.meta.session_id, "delivering a message queued before the bridge restarted");
            // A failure ends the turn with an error block (see `deliver`).
            if let Err(e) = self.guarded_deliver(next).await {
                tracing::warn!(session = %self.spec.meta.session_id, "a queued message was not delivered: {}", e.message);
            }
        }
    }

    /// Saves the pending work in the session's metadata when it changed, so that a
    /// bridge restart loses no queued message and no parked state.
    fn save_pending(&mut self) {
        if self.pending != self.spec.meta.pending {
            self.spec.meta.pending = self.pending.clone();
            self.save_meta();
        }
    }

    fn save_meta(&mut self) {
        let meta = self.spec.meta.clone();
        match self.spec.store.update_meta(&meta.session_id, |m| *m = meta.clone()) {
            Ok(saved) => self.spec.meta = saved,
            Err(e) => tracing::error!(session = %meta.session_id, "cannot save session metadata: {e}"),
        }
    }
}

async fn next_event(adapter: &mut Option<HostedAdapter>) -> Option<AdapterEvent> {
    match adapter {
        Some(a) => a.next_event().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_session_attaches_only_once_the_terminal_is_gone_and_there_is_a_reason() {
        use ParkedStep::{Attach, Stay};
        // Owned: never, whatever waits.
        assert_eq!(parked_step(true, true, 3), Stay);
        assert_eq!(parked_step(true, false, 0), Stay);
        // The terminal was seen and is gone: attach, queue or not.
        assert_eq!(parked_step(false, true, 0), Attach);
        assert_eq!(parked_step(false, true, 2), Attach);
        // Handed over but the terminal has not started yet: wait, unless the user writes.
        assert_eq!(parked_step(false, false, 0), Stay);
        assert_eq!(parked_step(false, false, 1), Attach);
    }

    #[test]
    fn crash_budget_counts_only_recent_crashes() {
        let policy =
            SessionPolicy { crash_budget: 3, crash_window: Duration::from_secs(60), ..SessionPolicy::default() };
        let now = Instant::now() + Duration::from_secs(1000);
        let at = |secs_ago: u64| now - Duration::from_secs(secs_ago);
        assert!(may_restart(&VecDeque::new(), now, &policy));
        assert!(may_restart(&[at(10), at(20)].into(), now, &policy));
        assert!(!may_restart(&[at(10), at(20), at(30)].into(), now, &policy));
        assert!(may_restart(&[at(100), at(20), at(30)].into(), now, &policy));
    }
}
