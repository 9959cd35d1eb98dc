//! What a session list shows about a session (docs/control-messages.md, "Session
//! lists"): the actor keeps its title (from the first prompt unless the user or the
//! agent named it), the newest message in a few words, when it was last active and
//! what it waits for; these are saved in `meta.json` at each user message and each
//! turn's end (two writes per turn), and edited by `rename_session` and
//! `archive_session` through [`MetaEdit`].

use terminull_protocol::blocks::{BlockKind, now_ts};
use terminull_protocol::control::{SessionListing, SessionState};
use terminull_protocol::ids::BlockId;
use terminull_protocol::session_list::{Attention, PREVIEW_CHARS, one_line, title_from_prompt};

use super::actor::Actor;
use super::notices::is_question;
use crate::history::{LogStatus, SessionMeta};

/// The agent's reply being streamed, kept to [`PREVIEW_CHARS`] characters for the
/// preview saved at the turn's end, and what the session waits for.
#[derive(Debug, Default)]
pub(super) struct Recent {
    reply_id: Option<BlockId>,
    reply: String,
    asking: Option<Attention>,
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

impl Actor {
    /// Notes a block written to the history for the list entry; saves the metadata at
    /// a user message and at a turn's end.
    pub(super) fn note_for_list(&mut self, kind: &BlockKind) {
        match kind {
            BlockKind::UserMessage(m) => {
                let meta = &mut self.spec.meta;
                if meta.title.is_none() && !meta.renamed {
                    meta.title = title_from_prompt(&m.text);
                }
                meta.preview = one_line(&m.text, PREVIEW_CHARS).or(meta.preview.take());
                meta.last_activity = Some(now_ts());
                self.save_meta();
            }
            BlockKind::Text(t) => {
                let recent = &mut self.recent;
                if recent.reply_id.as_ref() != Some(&t.id) || !t.is_append() {
                    recent.reply_id = Some(t.id.clone());
                    recent.reply.clear();
                }
                // Enough to make a preview of; the rest is not kept.
                if recent.reply.len() < PREVIEW_CHARS * 4 {
                    recent.reply.push_str(&t.text);
                }
            }
            BlockKind::PermissionRequest(p) => {
                self.recent.asking = Some(if is_question(p) { Attention::Question } else { Attention::Permission });
            }
            BlockKind::SessionEnd(_) => {
                self.recent.asking = None;
                let reply = std::mem::take(&mut self.recent.reply);
                self.recent.reply_id = None;
                let meta = &mut self.spec.meta;
                if let Some(preview) = one_line(&reply, PREVIEW_CHARS) {
                    meta.preview = Some(preview);
                }
                meta.last_activity = Some(now_ts());
                self.save_meta();
            }
            _ => {}
        }
    }

    /// The session's list entry now.
    pub(super) fn listing(&self) -> SessionListing {
        let attention = match self.state {
            SessionState::AwaitingPermission => self.recent.asking.or(Some(Attention::Permission)),
            _ => None,
        };
        listing_of(&self.spec.meta, self.state, self.log.last_seq(), attention)
    }

    /// Applies `edit` and saves the metadata.
    pub(super) fn edit_meta(&mut self, edit: &MetaEdit) {
        edit.apply(&mut self.spec.meta);
        self.save_meta();
    }
}
