//! What an adapter holds while it runs: the [`Session`] handle and, during a turn,
//! the [`Turn`] it emits blocks through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use terminull_protocol::adapter::{Declaration, SessionIdNotification, SessionIdParams};
use terminull_protocol::blocks::{Block, BlockKind, PermissionOption, PermissionRequest, UserMessage, now_ts};
use terminull_protocol::ids::{AgentSessionId, PermissionRequestId, ToolCallId};
use terminull_protocol::turn::{TurnTracker, TurnViolation};
use terminull_rpc::Peer;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::paced::PacedStream;
use crate::streamer::mint_id;

/// Why a turn operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The bridge is gone; end the turn.
    #[error("the bridge connection is closed")]
    Closed,
    /// The block would break the turn contract; it was not sent.
    #[error("refused to emit a block: {0}")]
    Contract(TurnViolation),
    /// The turn was interrupted while waiting (e.g. for a permission answer).
    #[error("the turn was interrupted")]
    Interrupted,
}

/// The session's connection to the bridge, usable at `start` and during turns.
#[derive(Debug, Clone)]
pub struct Session {
    peer: Peer,
    reports_session_id: bool,
    declaration: Arc<Declaration>,
}

impl Session {
    pub(crate) fn new(peer: Peer, reports_session_id: bool, declaration: Arc<Declaration>) -> Self {
        Self { peer, reports_session_id, declaration }
    }

    /// The declaration the bridge was given: the adapter's consts, with the identity
    /// fields a [`crate::serve::DeclarationOverride`] replaced at run time.
    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// Reports the agent's own session id (the spec's `on_session_id`), so a bridge
    /// restart can resume the conversation. Sent only when the adapter accepts the
    /// `on_session_id` init param; otherwise logged and dropped.
    pub async fn set_agent_session_id(&self, id: impl Into<AgentSessionId>) -> Result<(), TurnError> {
        let agent_session_id = id.into();
        if !self.reports_session_id {
            tracing::debug!(%agent_session_id, "not reported: on_session_id is not an accepted init param");
            return Ok(());
        }
        self.peer
            .notify::<SessionIdNotification>(&SessionIdParams { agent_session_id })
            .await
            .map_err(|_| TurnError::Closed)
    }
}

/// Permission answers the serve loop routes into the running turn.
pub(crate) type PermissionWaiters = Arc<Mutex<HashMap<PermissionRequestId, oneshot::Sender<String>>>>;

/// The handles the serve loop keeps to drive a running turn from outside.
#[derive(Debug)]
pub(crate) struct TurnControl {
    pub(crate) interrupt: CancellationToken,
    pub(crate) permissions: PermissionWaiters,
    pub(crate) input: mpsc::Sender<UserMessage>,
}

/// One turn in progress: emit blocks, ask permission, watch for interruption.
#[derive(Debug)]
pub struct Turn {
    session: Session,
    /// Where the blocks go: stdout, appends paced.
    out: PacedStream,
    tracker: TurnTracker,
    interrupt: CancellationToken,
    permissions: PermissionWaiters,
    input: mpsc::Receiver<UserMessage>,
}

/// Extra messages queued for a turn of an adapter with `cap_input_during_turn`.
const TURN_INPUT_CAPACITY: usize = 64;

impl Turn {
    pub(crate) fn new(session: Session) -> (Self, TurnControl) {
        let interrupt = CancellationToken::new();
        let permissions = PermissionWaiters::default();
        let (tx, rx) = mpsc::channel(TURN_INPUT_CAPACITY);
        let turn = Turn {
            out: PacedStream::new(session.peer.clone()),
            session,
            tracker: TurnTracker::new(),
            interrupt: interrupt.clone(),
            permissions: permissions.clone(),
            input: rx,
        };
        (turn, TurnControl { interrupt, permissions, input: tx })
    }

    /// The session this turn belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Sends one block, stamped with the current time. A block that would break the
    /// turn contract (a chunk after `done=true`, a second result, anything after
    /// `session_end`) is refused with [`TurnError::Contract`] and not sent.
    pub async fn emit(&mut self, kind: BlockKind) -> Result<(), TurnError> {
        // `observe` leaves the tracker unchanged when it refuses a block, so no copy is
        // needed (a copy per block was O(blocks²) over a turn: 225 µs per block
        // at 5,000 blocks in the end-to-end benchmark).
        if let Some(violation) = self.tracker.observe(&kind) {
            return Err(TurnError::Contract(violation));
        }
        self.out.send(Block { seq: None, ts: now_ts(), meta: None, kind }).await.map_err(|_| TurnError::Closed)
    }

    /// [`emit`](Self::emit) for blocks a mapper produced: a block the turn contract
    /// refuses is logged and dropped (the mapper should never produce one) instead of
    /// failing the turn; only a closed bridge is an error.
    pub async fn emit_lenient(&mut self, kind: BlockKind) -> Result<(), TurnError> {
        match self.emit(kind).await {
            Err(TurnError::Contract(violation)) => {
                tracing::warn!("dropped a block that would break the turn contract: {violation}");
                Ok(())
            }
            other => other,
        }
    }

    /// True once the user interrupted the turn (or the session is stopping).
    pub fn is_interrupted(&self) -> bool {
        self.interrupt.is_cancelled()
    }

    /// Resolves when the turn is interrupted; use it in `select!` against the agent.
    pub async fn interrupted(&self) {
        self.interrupt.cancelled().await
    }

    /// Emits a `permission_request` and waits for the user's choice: the chosen
    /// option's id, or [`TurnError::Interrupted`] when the turn is interrupted first.
    pub async fn ask_permission(
        &mut self,
        tool: impl Into<String>,
        input: Value,
        options: Vec<PermissionOption>,
        tool_call_id: Option<ToolCallId>,
    ) -> Result<String, TurnError> {
        let request_id = PermissionRequestId::from(mint_id("perm"));
        let (tx, rx) = oneshot::channel();
        self.lock_permissions().insert(request_id.clone(), tx);
        let request =
            PermissionRequest { request_id: request_id.clone(), tool: tool.into(), input, options, tool_call_id };
        if let Err(e) = self.emit(BlockKind::PermissionRequest(request)).await {
            self.lock_permissions().remove(&request_id);
            return Err(e);
        }
        let outcome = tokio::select! {
            answer = rx => answer.map_err(|_| TurnError::Closed),
            () = self.interrupt.cancelled() => Err(TurnError::Interrupted),
        };
        self.lock_permissions().remove(&request_id);
        outcome
    }

    /// The next message the user sent during this turn (only for adapters with
    /// `cap_input_during_turn`; others never receive one). `None` when the turn is
    /// interrupted.
    pub async fn next_input(&mut self) -> Option<UserMessage> {
        tokio::select! {
            message = self.input.recv() => message,
            () = self.interrupt.cancelled() => None,
        }
    }

    fn lock_permissions(&self) -> std::sync::MutexGuard<'_, HashMap<PermissionRequestId, oneshot::Sender<String>>> {
        self.permissions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Closes what the adapter left open and ends the turn (the SDK calls this).
    pub(crate) async fn finish(
        mut self,
        reason: terminull_protocol::blocks::EndReason,
        error: Option<&str>,
    ) -> Result<(), TurnError> {
        let left_open = self.tracker.open_violations();
        if !left_open.is_empty() {
            tracing::warn!("closing what the turn left open: {left_open:?}");
        }
        for kind in self.tracker.close(reason, error) {
            self.out.send(Block { seq: None, ts: now_ts(), meta: None, kind }).await.map_err(|_| TurnError::Closed)?;
        }
        // Nothing of the turn may follow the answer to `send`.
        self.out.flush().await.map_err(|_| TurnError::Closed)
    }
}
