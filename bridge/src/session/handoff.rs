//! Handoff between terminull and a terminal (docs/session-handoff.md): the contention
//! guard before every message, parking, the parked poll, attaching back, binding to a
//! terminal's conversation (`attach_external`) and handing one to the terminal
//! (`continue_in_terminal`). Built on the [`super::hooks`] calls and the
//! [`super::mirror`].

use terminull_protocol::adapter::{self as proto, HandoffHook};
use terminull_protocol::blocks::{BlockKind, Ownership, SessionStateNotice, UserMessage};
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionState};
use tokio::time::Instant;

use super::actor::{Actor, agent_failed};
use super::policy::{AttachDecision, attach_decision};
use crate::handoff::TerminalHold;

impl Actor {
    /// Delivers `message` unless a terminal drives the conversation, in which case the
    /// session parks and the message waits at the head of the queue.
    pub(super) async fn guarded_deliver(&mut self, message: UserMessage) -> Result<(), ReplyError> {
        if let Some(owner) = self.terminal_owner().await {
            self.pending.queued.push_front(message);
            self.park(TerminalHold { seen_owner: true, owner_pid: owner, resume_command: None }).await;
            return Ok(());
        }
        self.deliver(message).await
    }

    /// The first steps of an `attach_external` session: mirror the conversation so far
    /// into the history, then park when a terminal drives it.
    pub(super) async fn attach_external(&mut self) -> Result<(), ReplyError> {
        self.mirror().await;
        match self.terminal_owner().await {
            Some(owner) => self.park(TerminalHold { seen_owner: true, owner_pid: owner, resume_command: None }).await,
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
    pub(super) async fn park(&mut self, hold: TerminalHold) {
        if self.pending.mirror_cursor.is_none() {
            // Without a cursor the whole transcript would be mirrored again on top of the
            // history: start from its end.
            self.skip_mirror().await;
        }
        self.pending.parked = Some(hold);
        self.next_poll = Instant::now() + self.spec.policy.handoff_poll;
        self.state = SessionState::Parked;
        self.announce_parked();
        // What the terminal already wrote.
        self.mirror().await;
    }

    pub(super) fn announce_parked(&mut self) {
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
    pub(super) async fn poll_parked(&mut self) {
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
        if attach_decision(false, parked.seen_owner, self.pending.queued.len()) == AttachDecision::Attach {
            self.attach().await;
        }
    }

    /// The terminal let go: re-resolve the lineage head (unless the session is pinned to
    /// the conversation the user chose), go live, drain the queue.
    pub(super) async fn attach(&mut self) {
        if self.has_hook(HandoffHook::LatestSidForCwd) && !self.spec.meta.pinned {
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
    pub(super) async fn continue_in_terminal(&mut self) -> Result<proto::TerminalResumeCommandResult, ReplyError> {
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
        let command =
            self.hook::<proto::TerminalResumeCommand>(&params).await.map_err(|e| agent_failed(e.to_string()))?;
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
        self.pending.parked =
            Some(TerminalHold { seen_owner, owner_pid: None, resume_command: Some(command.argv.clone()) });
        self.next_poll = Instant::now() + self.spec.policy.handoff_poll;
        self.state = SessionState::Parked;
        self.announce_parked();
        Ok(command)
    }
}
