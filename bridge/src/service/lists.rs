//! The session-list controls (docs/control-messages.md, "Session lists"):
//! `list_sessions` with titles, previews and activity, `rename_session`,
//! `archive_session`, `delete_session` and a bounded `search_sessions`.

use std::io::{Read, Seek, SeekFrom};

use terminull_protocol::blocks::{Block, BlockKind};
use terminull_protocol::control::{self, ReplyError, ReplyErrorCode, ReplyResult, SessionListing};
use terminull_protocol::ids::SessionId;
use terminull_protocol::session_list::{
    MAX_QUERY_CHARS, MAX_SEARCH_RESULTS, MAX_TITLE_CHARS, PREVIEW_CHARS, SessionMatch, one_line,
};

use super::{Service, error};
use crate::history::{DATA_FILE, HistoryError, HistoryStore};
use crate::session::list_entry::{MetaEdit, listing_of, stored_state};

/// `search_sessions` reads at most this many sessions (the most recently active).
pub const SEARCH_SESSIONS: usize = 200;
/// …and at most this many bytes from the end of each one's log.
pub const SEARCH_BYTES_PER_SESSION: u64 = 256 << 10;

fn unknown(id: &SessionId) -> impl FnOnce(HistoryError) -> ReplyError + '_ {
    move |e| match e {
        HistoryError::NoSuchSession { .. } | HistoryError::InvalidSessionId { .. } => {
            error(ReplyErrorCode::UnknownSession, format!("no session `{id}`"))
        }
        e => error(ReplyErrorCode::Internal, format!("session `{id}`: {e}")),
    }
}

impl Service {
    /// Every session, live or in history, most recently active first.
    pub(super) async fn listings(&self) -> Vec<SessionListing> {
        let live: Vec<_> = self.inner.sessions.lock().await.values().map(|l| l.handle.clone()).collect();
        let mut out = Vec::new();
        for handle in live {
            if let Some(listing) = handle.listing().await {
                out.push(listing);
            }
        }
        // Sessions in history that no actor runs right now.
        let stored = self.inner.history.list().unwrap_or_else(|e| {
            tracing::warn!("cannot list session history: {e}");
            Vec::new()
        });
        for meta in stored {
            if out.iter().any(|l| l.session_id == meta.session_id) {
                continue;
            }
            let last_seq = self.inner.history.open_session(&meta.session_id).map(|l| l.last_seq()).unwrap_or(0);
            out.push(listing_of(&meta, stored_state(&meta), last_seq, None));
        }
        out.sort_by(|a, b| {
            let at = |l: &SessionListing| l.last_activity.unwrap_or(0.0);
            at(b).total_cmp(&at(a)).then_with(|| b.session_id.cmp(&a.session_id))
        });
        out
    }

    /// Applies `edit` to a session's metadata: through its actor when it is live (the
    /// actor owns its metadata), else in history. The live sessions stay locked, so the
    /// session cannot be revived meanwhile.
    async fn edit_meta(&self, id: &SessionId, edit: MetaEdit) -> Result<ReplyResult, ReplyError> {
        let sessions = self.inner.sessions.lock().await;
        if let Some(live) = sessions.get(id)
            && live.handle.edit_meta(edit.clone()).await.is_some()
        {
            return Ok(ReplyResult::Accepted {});
        }
        self.inner.history.update_meta(id, |m| edit.apply(m)).map_err(unknown(id))?;
        Ok(ReplyResult::Accepted {})
    }

    pub(super) async fn rename(&self, m: control::RenameSession) -> Result<ReplyResult, ReplyError> {
        let title = one_line(&m.title, usize::MAX).ok_or_else(|| {
            error(ReplyErrorCode::InvalidMessage, "rename_session: title: empty; give the session a title")
        })?;
        let chars = title.chars().count();
        if chars > MAX_TITLE_CHARS {
            return Err(error(
                ReplyErrorCode::InvalidMessage,
                format!("rename_session: title: {chars} characters; at most {MAX_TITLE_CHARS}"),
            ));
        }
        self.edit_meta(&m.session_id, MetaEdit::Rename(title)).await
    }

    pub(super) async fn archive(&self, m: control::ArchiveSession) -> Result<ReplyResult, ReplyError> {
        self.edit_meta(&m.session_id, MetaEdit::Archive(m.archived)).await
    }

    /// Stops the session when it is live, then removes its history.
    pub(super) async fn delete(&self, m: control::DeleteSession) -> Result<ReplyResult, ReplyError> {
        let id = &m.session_id;
        let mut sessions = self.inner.sessions.lock().await;
        if let Some(live) = sessions.remove(id) {
            // A session whose actor is already gone has nothing left to stop.
            if let Err(e) = live.handle.stop().await {
                tracing::debug!(session = %id, "delete_session: stop: {}", e.message);
            }
        }
        self.inner.history.delete(id).map_err(unknown(id))?;
        drop(sessions);
        tracing::info!(session = %id, "deleted a session and its history");
        Ok(ReplyResult::Accepted {})
    }

    pub(super) async fn search(&self, m: control::SearchSessions) -> Result<ReplyResult, ReplyError> {
        let query = m.query.trim().to_lowercase();
        let chars = query.chars().count();
        if chars == 0 || chars > MAX_QUERY_CHARS {
            return Err(error(
                ReplyErrorCode::InvalidMessage,
                format!("search_sessions: query: {chars} characters; 1 to {MAX_QUERY_CHARS} wanted"),
            ));
        }
        let listings = self.listings().await;
        let store = self.inner.history.clone();
        let matches = tokio::task::spawn_blocking(move || search_listings(&store, &listings, &query))
            .await
            .map_err(|e| error(ReplyErrorCode::Internal, format!("search_sessions: {e}")))?;
        Ok(ReplyResult::SessionMatches { matches })
    }
}

/// The sessions among the [`SEARCH_SESSIONS`] most recently active of `listings`
/// whose title, preview or newest [`SEARCH_BYTES_PER_SESSION`] of messages contain
/// `query` (lower case); at most [`MAX_SEARCH_RESULTS`].
fn search_listings(store: &HistoryStore, listings: &[SessionListing], query: &str) -> Vec<SessionMatch> {
    let mut out = Vec::new();
    for l in listings.iter().take(SEARCH_SESSIONS) {
        if out.len() == MAX_SEARCH_RESULTS {
            break;
        }
        let head = [l.title.as_deref(), l.preview.as_deref()];
        let found = head
            .into_iter()
            .flatten()
            .find_map(|t| snippet(t, query))
            .or_else(|| messages_tail(store, &l.session_id).into_iter().rev().find_map(|t| snippet(&t, query)));
        if let Some(snippet) = found {
            out.push(SessionMatch { session_id: l.session_id.clone(), snippet });
        }
    }
    out
}

/// Around the first match of `query` (lower case) in `text`, made one line.
fn snippet(text: &str, query: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let at = lower.find(query)?;
    // Lower-casing can change byte lengths: start from the same character count.
    let start_chars = lower[..at].chars().count().saturating_sub(PREVIEW_CHARS / 3);
    let from: String = text.chars().skip(start_chars).collect();
    let line = one_line(&from, PREVIEW_CHARS)?;
    Some(if start_chars > 0 { format!("…{line}") } else { line })
}

/// The texts of the user messages and replies in the newest bytes of a session's log,
/// oldest first (a piece of a message streamed in chunks counts as its own text).
fn messages_tail(store: &HistoryStore, id: &SessionId) -> Vec<String> {
    let Ok(dir) = store.session_dir(id) else { return Vec::new() };
    let Ok(mut file) = std::fs::File::open(dir.join(DATA_FILE)) else { return Vec::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(SEARCH_BYTES_PER_SESSION);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.take(SEARCH_BYTES_PER_SESSION).read_to_end(&mut bytes).is_err()
    {
        return Vec::new();
    }
    // The first line may be cut: whole lines only.
    let lines = bytes.split(|b| *b == b'\n').skip(usize::from(from > 0));
    lines
        .filter_map(|line| serde_json::from_slice::<Block>(line).ok())
        .filter_map(|b| match b.kind {
            BlockKind::UserMessage(m) => Some(m.text),
            BlockKind::Text(t) => Some(t.text),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_starts_a_little_before_the_match_and_is_one_line() {
        assert_eq!(snippet("Fix the LOGIN bug", "login").as_deref(), Some("Fix the LOGIN bug"));
        let long = format!("{} needle {}", "a ".repeat(100), "b ".repeat(100));
        let s = snippet(&long, "needle").unwrap();
        assert!(s.starts_with('…') && s.contains("needle"), "{s}");
        assert_eq!(snippet("nothing", "needle"), None);
    }
}
