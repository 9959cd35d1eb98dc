//! The core of a session actor: its state, how it publishes a block (history, then
//! followers and notices), starts and stops its adapter, delivers a message, closes a
//! turn and saves its metadata. Everything else the actor does ([`super::handoff`],
//! [`super::turn`], [`super::run`]) is built on these.

use std::collections::VecDeque;

use terminull_protocol::adapter::{self as proto, Declaration, HandoffHook, InitParam, StartParams};
use terminull_protocol::blocks::MIRRORED_META;
use terminull_protocol::blocks::{Block, BlockKind, EndReason, UserMessage, now_ts};
use terminull_protocol::commands::with_universal_first;
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionState};
use terminull_protocol::turn::TurnTracker;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::appends::Appends;
use super::handle::{LIVE_INLINE_BYTES, LiveBlock};
use super::notices::{Notice, notice_for};
use super::policy::{SessionPolicy, may_restart};
use crate::handoff::PendingWork;
use crate::history::{HistoryStore, SessionLog, SessionMeta};
use crate::host::{AdapterCommand, AdapterEvent, HostedAdapter, launch};

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
    pub notices: broadcast::Sender<Notice>,
    /// The handoff hooks the agent's adapter declares.
    pub hooks: Vec<HandoffHook>,
    /// Bound to a conversation the agent's CLI started (`attach_external`): its
    /// transcript is mirrored into the history first, and the session parks when a
    /// terminal drives it.
    pub attach: bool,
}

/// A compaction of the session's log running on a blocking thread.
pub(super) type RunningCompaction = tokio::task::JoinHandle<crate::history::Result<crate::history::PreparedCompaction>>;

/// A session actor's state; its methods are spread over this module's files by
/// concern (core here, then hooks, mirror, handoff, turn, run).
pub(super) struct Actor {
    pub(super) spec: SessionSpec,
    pub(super) log: SessionLog,
    pub(super) live: broadcast::Sender<LiveBlock>,
    pub(super) adapter: Option<HostedAdapter>,
    pub(super) declaration: Option<Declaration>,
    pub(super) state: SessionState,
    pub(super) turn: Option<TurnTracker>,
    pub(super) last_output: Instant,
    /// Queued messages, the parked state and the mirror's position; saved in the
    /// session's metadata whenever they change ([`Actor::save_pending`]).
    pub(super) pending: PendingWork,
    pub(super) crashes: VecDeque<Instant>,
    pub(super) ever_started: bool,
    /// When a parked session polls next (a deadline, so that commands arriving in
    /// between do not postpone it).
    pub(super) next_poll: Instant,
    /// Streamed text on its way out: made appends, bursts joined.
    pub(super) appends: Appends,
    /// The log's compaction running in the background, if any (see `session::compact`).
    pub(super) compaction: Option<RunningCompaction>,
    /// The reply being streamed and what the session waits for, for its list entry.
    pub(super) recent: super::list_entry::Recent,
}

pub(super) fn agent_failed(message: impl Into<String>) -> ReplyError {
    ReplyError { code: ReplyErrorCode::AgentFailed, message: message.into() }
}

impl Actor {
    pub(super) fn label(&self) -> String {
        format!("{} ({})", self.spec.meta.agent_id, self.spec.command.program.display())
    }

    /// Appends to history and broadcasts; logs (never panics) when the disk refuses.
    pub(super) fn publish(&mut self, kind: BlockKind) {
        let block = Block { seq: None, ts: now_ts(), meta: None, kind };
        self.publish_block(block);
    }

    /// Publishes `block`, or holds it back to join it with the appends that follow
    /// ([`Appends`]); what was held goes out first.
    pub(super) fn publish_block(&mut self, block: Block) {
        for block in self.appends.admit(block, Instant::now()) {
            self.write_block(block);
        }
    }

    /// Publishes the append held back, if any.
    pub(super) fn flush_appends(&mut self) {
        if let Some(block) = self.appends.flush(Instant::now()) {
            self.write_block(block);
        }
    }

    fn write_block(&mut self, block: Block) {
        // The terminal's own turns, mirrored, are not news for the user's devices.
        let mirrored =
            block.meta.as_ref().is_some_and(|m| m.get(MIRRORED_META) == Some(&serde_json::Value::Bool(true)));
        match self.log.append(block) {
            Ok(stamped) => {
                self.note_for_list(&stamped.kind);
                if !mirrored {
                    self.announce(stamped.seq, &stamped.kind);
                }
                let live = match stamped.seq {
                    Some(seq) if self.log.last_block_bytes() > LIVE_INLINE_BYTES => LiveBlock::Stored { seq },
                    _ => LiveBlock::Inline(stamped),
                };
                let _ = self.live.send(live);
            }
            Err(e) => tracing::error!(session = %self.spec.meta.session_id, "cannot write history: {e}"),
        }
    }

    fn announce(&self, seq: Option<u64>, kind: &BlockKind) {
        if let Some(notice) = notice_for(&self.spec.meta.session_id, &self.spec.meta.agent_id, seq, kind) {
            let _ = self.spec.notices.send(notice);
        }
    }

    /// Starts the adapter when none runs (first start, or after a crash).
    pub(super) async fn ensure_adapter(&mut self) -> Result<(), ReplyError> {
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
                tracing::warn!("{}: start failed: {e}", self.label());
                let message = match &e {
                    // The agent's CLI itself failed: its words, without the plumbing.
                    terminull_rpc::CallError::Rpc { error, .. }
                        if error.code == terminull_protocol::jsonrpc::codes::AGENT_ERROR =>
                    {
                        format!("{} could not start: {}.", d.display_name, error.message.trim_end_matches('.'))
                    }
                    _ => format!("{}: start failed: {e}", self.label()),
                };
                adapter.shutdown().await;
                Err(agent_failed(message))
            }
        }
    }

    /// Sends `message` to the adapter (starting it when none runs) and opens a turn for
    /// it; a failure to start or send closes that turn with an error.
    pub(super) async fn deliver(&mut self, message: UserMessage) -> Result<(), ReplyError> {
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

    /// Closes the current turn: everything open, an error block when `error`, and
    /// the single `session_end`.
    pub(super) fn end_turn(&mut self, reason: EndReason, error: Option<&str>) {
        if let Some(mut tracker) = self.turn.take() {
            for kind in tracker.close(reason, error) {
                self.publish(kind);
            }
        }
        self.state = SessionState::Idle;
    }

    pub(super) async fn shutdown_adapter(&mut self, polite: bool) {
        if let Some(mut adapter) = self.adapter.take() {
            if polite {
                let _ = adapter.call::<proto::Stop>(&proto::Empty {}).await;
            }
            adapter.shutdown().await;
        }
    }

    /// Saves the pending work in the session's metadata when it changed, so that a
    /// bridge restart loses no queued message and no parked state.
    pub(super) fn save_pending(&mut self) {
        if self.pending != self.spec.meta.pending {
            self.spec.meta.pending = self.pending.clone();
            self.save_meta();
        }
    }

    pub(super) fn save_meta(&mut self) {
        let meta = self.spec.meta.clone();
        match self.spec.store.update_meta(&meta.session_id, |m| *m = meta.clone()) {
            Ok(saved) => self.spec.meta = saved,
            Err(e) => tracing::error!(session = %meta.session_id, "cannot save session metadata: {e}"),
        }
    }
}

pub(super) async fn next_event(adapter: &mut Option<HostedAdapter>) -> Option<AdapterEvent> {
    match adapter {
        Some(a) => a.next_event().await,
        None => std::future::pending().await,
    }
}
