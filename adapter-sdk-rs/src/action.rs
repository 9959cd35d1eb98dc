//! What an adapter's pure mapper asks the adapter to do, and the state those actions
//! update across turns.
//!
//! Every mapper (codex, cursor, droid, pi, claude-code) turns the agent's events into
//! the same three things: a block to stream, the agent's own session id to report, and
//! the turn's `session_end`, held back until the agent process is done with the
//! conversation. Some agents need one more kind of action (a file to read for a
//! `diff`, a line to write to the agent's stdin); that is the `X` of [`Action`].
//! [`Conversation`] carries the actions out and keeps what outlives a turn: the id to
//! resume and the usage totals for `get_usage`.

use std::convert::Infallible;

use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, ErrorBlock, SessionEnd, Usage};

use crate::adapter::AdapterError;
use crate::bounds::{MAX_TOOL_OUTPUT_BYTES, bounded};
use crate::session::Turn;

/// One step a mapper asks for. `X` is an agent's own kind of step (none by default).
#[derive(Debug, Clone, PartialEq)]
pub enum Action<X = Infallible> {
    /// Stream this block.
    Emit(BlockKind),
    /// Report the agent's session id (the `session_id` notification) and continue that
    /// conversation in the next turn.
    SessionId(String),
    /// The turn's one `session_end`; everything open was closed before it. Always the
    /// last action of a turn.
    End(SessionEnd),
    /// A step only this agent has.
    Agent(X),
}

impl<X> Action<X> {
    /// A recoverable `error` block with `code` that the agent reported: its message cut
    /// to [`MAX_TOOL_OUTPUT_BYTES`], or, when it gave none, a sentence naming `agent`.
    pub fn agent_error(agent: &str, message: &str, code: &str) -> Self {
        let message = match message.trim() {
            "" => format!("{agent} reported an error without a message"),
            _ => bounded(message, MAX_TOOL_OUTPUT_BYTES),
        };
        Action::Emit(BlockKind::Error(ErrorBlock { message, recoverable: true, code: Some(code.to_owned()) }))
    }
}

/// The conversation an adapter continues from turn to turn: the agent's session id
/// (its thread, chat or session) and the usage of every turn so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The agent's name, for the logs.
    agent: &'static str,
    id: Option<String>,
    totals: Usage,
}

impl Conversation {
    /// A conversation of `agent`, continuing `id` when one is known (a resumed session).
    pub fn new(agent: &'static str, id: Option<String>) -> Self {
        Self { agent, id, totals: Usage::default() }
    }

    /// The id the next turn continues.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Forgets the id (its conversation cannot be continued); the old one is returned.
    pub fn forget(&mut self) -> Option<String> {
        self.id.take()
    }

    /// Takes `id` as the conversation's without reporting it (pi reports its session
    /// only once the session is saved, through a later [`Action::SessionId`]).
    pub fn set_id(&mut self, id: Option<String>) {
        self.id = id;
    }

    /// The usage of every turn so far (the answer to `get_usage`).
    pub fn totals(&self) -> &Usage {
        &self.totals
    }

    /// Carries out `actions` in order, except the turn's end, which is returned: the
    /// adapter streams it with [`end_turn`](Self::end_turn) once the agent process no
    /// longer holds the conversation (`session_end` tells the bridge the session is idle,
    /// and the next turn may start at once).
    pub async fn apply(
        &mut self,
        actions: impl IntoIterator<Item = Action>,
        turn: &mut Turn,
    ) -> Result<Option<SessionEnd>, AdapterError> {
        self.apply_with(actions, turn, async |never| match never {}).await
    }

    /// [`apply`](Self::apply) for a mapper with steps of its own, each handed to
    /// `agent_step` in its place in the order.
    pub async fn apply_with<X>(
        &mut self,
        actions: impl IntoIterator<Item = Action<X>>,
        turn: &mut Turn,
        mut agent_step: impl AsyncFnMut(X) -> Result<(), AdapterError>,
    ) -> Result<Option<SessionEnd>, AdapterError> {
        let mut ended = None;
        for action in actions {
            match action {
                Action::Emit(kind) => turn.emit_lenient(kind).await?,
                Action::SessionId(id) => self.record_id(id, turn).await?,
                Action::End(end) => ended = Some(end),
                Action::Agent(step) => agent_step(step).await?,
            }
        }
        Ok(ended)
    }

    /// Remembers `id` for the next turn and reports it to the bridge.
    pub async fn record_id(&mut self, id: String, turn: &Turn) -> Result<(), AdapterError> {
        tracing::info!(agent = self.agent, session_id = %id, "agent session");
        self.id = Some(id.clone());
        turn.session().set_agent_session_id(id).await?;
        Ok(())
    }

    /// Streams the turn's `session_end` (its usage is added to the totals) as the last
    /// thing the turn does; its reason is the turn's.
    pub async fn end_turn(&mut self, end: SessionEnd, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        if let Some(usage) = &end.usage {
            self.totals.add(usage);
        }
        let reason = end.reason;
        turn.emit_lenient(BlockKind::SessionEnd(end)).await?;
        Ok(reason)
    }
}
