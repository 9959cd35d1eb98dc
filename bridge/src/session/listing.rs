//! What a session list shows about a session (docs/control-messages.md, "Session
//! lists"): the actor keeps its title (from the first prompt unless the user or the
//! agent named it), the newest message in a few words, when it was last active and
//! what it waits for; these are saved in `meta.json` at each user message and each
//! turn's end (two writes per turn), and edited by `rename_session` and
//! `archive_session` through [`MetaEdit`](super::list_entry::MetaEdit).

use terminull_protocol::blocks::{BlockKind, now_ts};
use terminull_protocol::control::{SessionListing, SessionState};
use terminull_protocol::session_list::{Attention, PREVIEW_CHARS, one_line, title_from_prompt};

use super::actor::Actor;
use super::list_entry::{MetaEdit, listing_of};
use super::notices::is_question;

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
