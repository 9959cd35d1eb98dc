//! The outside of a session actor: the commands it takes and the cheap, cloneable
//! handle that sends them and waits for the answers. Nothing here touches the adapter
//! or the history; the actor does.

use terminull_protocol::adapter as proto;
use terminull_protocol::blocks::{Block, Usage, UserMessage};
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionListing};
use terminull_protocol::ids::{PermissionRequestId, SessionId};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::history::Page;

/// The most older-history blocks a resume by `since_ts` sends after `replay_done`.
pub const OLDER_HISTORY_CAP: usize = 1000;

/// Bytes of the log a follower reads from history at a time (resume by `seq`, catching
/// up after falling behind, a large live block): what it holds is bounded by this, not
/// by how far behind it is.
pub const HISTORY_PAGE_BYTES: u64 = 1 << 20;

/// Blocks whose line in the log is longer than this travel on the live feed by their
/// `seq` only ([`LiveBlock::Stored`]).
pub const LIVE_INLINE_BYTES: u64 = 32 << 10;

/// A block as the live feed carries it. The feed keeps what its slowest follower has
/// not read yet (up to its slot count), so a large block is sent by its `seq` and each
/// follower reads it from history when it gets there: the feed stays small in bytes
/// whatever the agent prints.
#[derive(Debug, Clone)]
pub enum LiveBlock {
    /// The block.
    Inline(Block),
    /// A block stored in history under this `seq`, too large to carry.
    Stored {
        /// Its `seq`.
        seq: u64,
    },
}

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
    /// The next page of history after `after` ([`HISTORY_PAGE_BYTES`]).
    ReadPage {
        /// Blocks with a greater seq are read.
        after: u64,
        /// The page.
        reply: oneshot::Sender<Result<Page, ReplyError>>,
    },
    /// A listing line.
    Listing(oneshot::Sender<SessionListing>),
    /// Change the session's list entry (`rename_session`, `archive_session`) and save it.
    EditMeta(super::list_entry::MetaEdit, oneshot::Sender<()>),
    /// End the session.
    Stop(oneshot::Sender<Result<(), ReplyError>>),
    /// Change the model and/or permission mode between turns (`set_session_options`).
    SetOptions(SessionOptions, oneshot::Sender<Result<(), ReplyError>>),
    /// Let the adapter go and end the actor, keeping the session resumable (bridge shutdown).
    Detach(oneshot::Sender<()>),
    /// Hand the idle conversation to a terminal: release the agent, park the session,
    /// answer the resume command.
    ContinueInTerminal(oneshot::Sender<Result<proto::TerminalResumeCommandResult, ReplyError>>),
}

/// The values asked for; `Some("")` returns to the agent's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// The model.
    pub model: Option<String>,
    /// The permission mode.
    pub permission_mode: Option<String>,
}

/// What [`SessionCommand::Follow`] returns.
#[derive(Debug)]
pub struct Following {
    /// Blocks after the resume point, compacted: the first page of them for a resume
    /// by `seq` ([`HISTORY_PAGE_BYTES`]).
    pub backlog: Vec<Block>,
    /// Where the rest of the backlog starts when it did not fit in one page
    /// ([`SessionHandle::read_page`]).
    pub more: Option<u64>,
    /// For a resume by `since_ts`: the older history (at most [`OLDER_HISTORY_CAP`]
    /// blocks, the newest), compacted, sent after `replay_done` with `replay: true`.
    pub history: Vec<Block>,
    /// Blocks from now on.
    pub live: broadcast::Receiver<LiveBlock>,
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
    /// A handle sending to the actor that reads `tx`'s other end.
    pub(super) fn new(id: SessionId, agent_id: String, tx: mpsc::Sender<SessionCommand>) -> Self {
        Self { id, agent_id, tx }
    }

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

    /// Follows again from just after `last_seq`, for a follower that fell behind the
    /// live feed: the blocks it missed, from history (paged), and a new live feed.
    pub async fn catch_up(&self, last_seq: u64) -> Result<Following, ReplyError> {
        self.follow(Some(last_seq), None).await
    }

    /// The page of history after `after` ([`HISTORY_PAGE_BYTES`]).
    pub async fn read_page(&self, after: u64) -> Result<Page, ReplyError> {
        self.ask(|reply| SessionCommand::ReadPage { after, reply }).await.unwrap_or_else(|| Err(gone()))
    }

    /// A listing line, `None` once the actor is gone.
    pub async fn listing(&self) -> Option<SessionListing> {
        self.ask(SessionCommand::Listing).await
    }

    /// Applies `edit` to the session's list entry and saves it; `None` when the actor is gone.
    pub async fn edit_meta(&self, edit: super::list_entry::MetaEdit) -> Option<()> {
        self.ask(|tx| SessionCommand::EditMeta(edit, tx)).await
    }

    /// Stops the session.
    pub async fn stop(&self) -> Result<(), ReplyError> {
        self.ask(SessionCommand::Stop).await.unwrap_or_else(|| Err(gone()))
    }

    /// Changes the model and/or permission mode between turns.
    pub async fn set_options(&self, options: SessionOptions) -> Result<(), ReplyError> {
        self.ask(|reply| SessionCommand::SetOptions(options, reply)).await.unwrap_or_else(|| Err(gone()))
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
