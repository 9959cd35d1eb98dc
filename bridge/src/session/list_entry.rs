//! A session's list entry as data (docs/control-messages.md, "Session lists"): what
//! the actor keeps for it between blocks ([`Recent`]), the edits `rename_session` and
//! `archive_session` make ([`MetaEdit`]), and the entry made from the metadata. The
//! actor's side is in `listing`.

use terminull_protocol::control::{SessionListing, SessionState};
use terminull_protocol::ids::BlockId;
use terminull_protocol::session_list::Attention;

use crate::history::{LogStatus, SessionMeta};

/// The agent's reply being streamed, kept to [`PREVIEW_CHARS`] characters for the
/// preview saved at the turn's end, and what the session waits for.
#[derive(Debug, Default)]
pub(super) struct Recent {
    pub(super) reply_id: Option<BlockId>,
    pub(super) reply: String,
    pub(super) asking: Option<Attention>,
}

/// A change to a session's list entry.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaEdit {
    /// `rename_session`: the title, already checked and made one line.
    Rename(String),
    /// `archive_session`.
    Archive(bool),
}

impl MetaEdit {
    /// Applies the edit to `meta`.
    pub fn apply(&self, meta: &mut SessionMeta) {
        match self {
            MetaEdit::Rename(title) => {
                meta.title = Some(title.clone());
                meta.renamed = true;
            }
            MetaEdit::Archive(archived) => meta.archived = *archived,
        }
    }
}

/// The list entry of a session from its metadata, in `state`, with `last_seq`.
pub fn listing_of(
    meta: &SessionMeta,
    state: SessionState,
    last_seq: u64,
    attention: Option<Attention>,
) -> SessionListing {
    SessionListing {
        session_id: meta.session_id.clone(),
        agent_id: meta.agent_id.clone(),
        cwd: meta.cwd.clone(),
        state,
        last_seq,
        title: meta.title.clone(),
        preview: meta.preview.clone(),
        last_activity: Some(meta.last_activity.unwrap_or(meta.created_at)),
        attention,
        archived: meta.archived,
        origin: meta.origin,
    }
}

/// The state a session that no actor runs is listed in.
pub fn stored_state(meta: &SessionMeta) -> SessionState {
    if meta.status == LogStatus::Stopped { SessionState::Stopped } else { SessionState::Detached }
}
