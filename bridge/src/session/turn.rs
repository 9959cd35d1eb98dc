//! The turn contract: user messages (delivered, or queued behind a turn), interrupts,
//! permission answers, and the adapter's events checked against the shared
//! [`TurnTracker`](terminull_protocol::turn::TurnTracker) before they reach the history.

use terminull_protocol::adapter::{self as proto, HandoffHook};
use terminull_protocol::blocks::{Block, BlockKind, EndReason, Usage, UserMessage};
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionState};
use terminull_protocol::ids::{AgentSessionId, PermissionRequestId};
use tokio::time::Instant;

use super::actor::{Actor, agent_failed};
use super::policy::MAX_QUEUED_MESSAGES;
use crate::host::AdapterEvent;

impl Actor {
    pub(super) async fn user_message(&mut self, message: UserMessage) -> Result<(), ReplyError> {
        if let Some(d) = self.declaration.as_ref() {
            refuse_attachments(&message, &d.capabilities, self.spec.meta.agent_id.as_str())?;
        }
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

    pub(super) async fn interrupt(&mut self) -> Result<(), ReplyError> {
        let Some(adapter) = self.adapter.as_ref() else { return Ok(()) };
        if !adapter.declaration().capabilities.cap_interrupt {
            return Err(ReplyError {
                code: ReplyErrorCode::NotSupported,
                message: format!("{} cannot be interrupted (cap_interrupt is false)", self.spec.meta.agent_id),
            });
        }
        adapter.call::<proto::Interrupt>(&proto::Empty {}).await.map(drop).map_err(|e| agent_failed(e.to_string()))
    }

    pub(super) async fn permission_response(
        &mut self,
        id: PermissionRequestId,
        option: String,
    ) -> Result<(), ReplyError> {
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

    pub(super) async fn usage(&mut self) -> Result<Usage, ReplyError> {
        let Some(adapter) = self.adapter.as_ref() else { return Err(agent_failed("the adapter is not running")) };
        if !adapter.declaration().capabilities.provides_usage {
            return Err(ReplyError {
                code: ReplyErrorCode::NotSupported,
                message: format!("{} does not provide usage", self.spec.meta.agent_id),
            });
        }
        adapter.call::<proto::GetUsage>(&proto::Empty {}).await.map_err(|e| agent_failed(e.to_string()))
    }

    pub(super) async fn event(&mut self, event: Option<AdapterEvent>) {
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
                if let Some(mut adapter) = self.adapter.take() {
                    // What it left behind (its group, descendants that left it with
                    // `setsid`) is ended politely in the background: the turn closes now.
                    tokio::spawn(async move {
                        adapter.shutdown().await;
                    });
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

    pub(super) async fn block(&mut self, mut block: Block) {
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
                if let Some(title) = s.title.as_ref().filter(|_| !self.spec.meta.renamed) {
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

    pub(super) fn agent_session_id(&mut self, id: AgentSessionId) {
        if self.spec.meta.agent_session_id.as_ref() != Some(&id) {
            self.spec.meta.agent_session_id = Some(id);
            self.save_meta();
        }
    }

    /// The running turn produced nothing for too long.
    pub(super) async fn hung(&mut self) {
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

    /// A revived session with messages queued and no terminal to wait for sends the
    /// first now (through the guard: a terminal that took the conversation meanwhile
    /// parks it); the rest follow at each turn's end, as before the restart.
    pub(super) async fn resume_pending(&mut self) {
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
}

/// Refuses a message whose attachments the agent did not declare it takes (images need
/// `cap_images`, other files `cap_documents`), before it reaches the history.
fn refuse_attachments(
    message: &UserMessage,
    caps: &terminull_protocol::capabilities::Capabilities,
    agent: &str,
) -> Result<(), ReplyError> {
    for a in &message.attachments {
        let image = a.mime_type.to_ascii_lowercase().starts_with("image/");
        let (taken, what, flag) = if image {
            (caps.cap_images, "images", "cap_images")
        } else {
            (caps.cap_documents, "files other than images", "cap_documents")
        };
        if !taken {
            return Err(ReplyError {
                code: ReplyErrorCode::NotSupported,
                message: format!(
                    "{agent} takes no {what} ({flag} is false): attachment `{}` ({}) refused",
                    a.name, a.mime_type
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::Attachment;
    use terminull_protocol::capabilities::Capabilities;

    use super::*;

    fn caps(images: bool, documents: bool) -> Capabilities {
        Capabilities {
            cap_images: images,
            cap_documents: documents,
            cap_thinking: false,
            cap_permissions: false,
            cap_subagents: false,
            cap_interrupt: false,
            cap_input_during_turn: false,
            cap_terminal: false,
            provides_models: false,
            provides_usage: false,
        }
    }

    fn with(name: &str, mime: &str) -> UserMessage {
        UserMessage {
            text: "look".into(),
            attachments: vec![Attachment { name: name.into(), mime_type: mime.into(), data: "AAAA".into() }],
        }
    }

    #[test]
    fn attachments_the_agent_did_not_declare_are_refused_by_name() {
        let e = refuse_attachments(&with("cat.png", "image/png"), &caps(false, true), "echo").unwrap_err();
        assert_eq!(e.code, ReplyErrorCode::NotSupported);
        assert!(
            e.message.contains("takes no images (cap_images is false)") && e.message.contains("`cat.png`"),
            "{e:?}"
        );
        let e = refuse_attachments(&with("a.pdf", "application/pdf"), &caps(true, false), "echo").unwrap_err();
        assert!(e.message.contains("cap_documents is false") && e.message.contains("`a.pdf`"), "{e:?}");
        assert!(refuse_attachments(&with("cat.PNG", "IMAGE/PNG"), &caps(true, false), "echo").is_ok());
        assert!(refuse_attachments(&with("a.pdf", "application/pdf"), &caps(false, true), "echo").is_ok());
        assert!(
            refuse_attachments(&UserMessage { text: "t".into(), attachments: vec![] }, &caps(false, false), "echo")
                .is_ok()
        );
    }
}
