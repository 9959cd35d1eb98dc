//! A session's metadata (`meta.json`): what the bridge keeps about a session besides
//! its blocks, checked against its directory name and only ever replaced whole
//! (temporary file, fsync, rename, fsync of the directory).

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use terminull_protocol::blocks::now_ts;
use terminull_protocol::{AgentId, AgentSessionId, SessionId};

use super::error::{HistoryError, Result, io_err};
use super::sync::sync_dir;
use crate::handoff::PendingWork;

/// Name of a session's metadata file.
pub const META_FILE: &str = "meta.json";
/// The longest session id accepted, in bytes.
pub const MAX_SESSION_ID_LEN: usize = 128;

/// Checks that `id` can be used as a session directory name: 1–[`MAX_SESSION_ID_LEN`]
/// bytes of ASCII letters, digits, `-`, `_` and `.`, not starting with `.`.
pub fn validate_session_id(id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        Some("it is empty")
    } else if id.len() > MAX_SESSION_ID_LEN {
        Some("it is longer than 128 bytes")
    } else if id.starts_with('.') {
        Some("it starts with `.`")
    } else if !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        Some("only ASCII letters, digits, `-`, `_` and `.` are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(HistoryError::InvalidSessionId { id: id.to_owned(), reason }),
        None => Ok(()),
    }
}

/// Whether a stored session is still active (resumable) or was stopped (kept as
/// history only). Not the live turn state a client sees, which is
/// [`SessionState`](terminull_protocol::control::SessionState).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogStatus {
    /// Running, or interrupted by a bridge restart: resumable when it has an agent session id.
    Active,
    /// Ended by the user (`stop_session`); kept as history only.
    Stopped,
}

/// What the bridge keeps about a session besides its blocks (`meta.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The bridge's session id; also the directory name.
    pub session_id: SessionId,
    /// The agent running the session.
    pub agent_id: AgentId,
    /// The session's working directory.
    pub cwd: String,
    /// The model asked for, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The reasoning effort asked for, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The permission mode asked for, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// When the session was created, Unix seconds.
    pub created_at: f64,
    /// When this metadata last changed, Unix seconds ([`HistoryStore::update_meta`](super::HistoryStore::update_meta) sets it).
    pub updated_at: f64,
    /// The agent's own conversation id, once the adapter has reported it; what a
    /// restarted bridge resumes the agent with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<AgentSessionId>,
    /// The conversation's title, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The title was set by the user (`rename_session`): the agent's titles no longer replace it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub renamed: bool,
    /// Attached with `pin` (`attach_external`): the session resumes exactly its
    /// `agent_session_id` and never follows the directory's newest conversation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// The newest message made one line, for lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// When it last had a message or a turn ended, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<f64>,
    /// Archived by the user (`archive_session`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// Where it was started, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<terminull_protocol::session_list::SessionOrigin>,
    /// Active or stopped (`state` in `meta.json`).
    #[serde(rename = "state")]
    pub status: LogStatus,
    /// Work the session owes its user across a bridge restart; absent when none.
    #[serde(default, skip_serializing_if = "PendingWork::is_empty")]
    pub pending: PendingWork,
}

impl SessionMeta {
    /// Metadata of a new active session created now, with no model, effort, agent
    /// session id or title yet.
    pub fn new(session_id: SessionId, agent_id: AgentId, cwd: impl Into<String>) -> Self {
        let now = now_ts();
        Self {
            session_id,
            agent_id,
            cwd: cwd.into(),
            model: None,
            effort: None,
            permission_mode: None,
            created_at: now,
            updated_at: now,
            agent_session_id: None,
            title: None,
            renamed: false,
            pinned: false,
            preview: None,
            last_activity: None,
            archived: false,
            origin: None,
            status: LogStatus::Active,
            pending: PendingWork::default(),
        }
    }
}

/// Reads `<dir>/meta.json`, checking that it belongs to `session_id`.
pub(super) fn read_meta(dir: &Path, session_id: &SessionId) -> Result<SessionMeta> {
    let path = dir.join(META_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(HistoryError::NoSuchSession { session_id: session_id.0.clone(), path });
        }
        Err(e) => return Err(io_err(&path, "read")(e)),
    };
    let meta: SessionMeta =
        serde_json::from_slice(&bytes).map_err(|source| HistoryError::BadMeta { path: path.clone(), source })?;
    if meta.session_id != *session_id {
        return Err(HistoryError::MetaMismatch { path, expected: session_id.0.clone(), found: meta.session_id.0 });
    }
    Ok(meta)
}

/// Replaces `<dir>/meta.json`: temporary file, fsync, rename, fsync of the directory.
pub(super) fn write_meta(dir: &Path, meta: &SessionMeta) -> Result<()> {
    let path = dir.join(META_FILE);
    let mut bytes = serde_json::to_vec_pretty(meta).map_err(|source| HistoryError::Encode {
        path: path.clone(),
        what: "session metadata".into(),
        source,
    })?;
    bytes.push(b'\n');
    let mut tmp = tempfile::Builder::new()
        .prefix(".meta.")
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(terminull_net::private_file::PRIVATE_FILE_MODE))
        .tempfile_in(dir)
        .map_err(io_err(dir, "create a temporary file in"))?;
    tmp.write_all(&bytes).map_err(io_err(tmp.path(), "write"))?;
    tmp.as_file().sync_all().map_err(io_err(tmp.path(), "fsync"))?;
    tmp.persist(&path).map_err(|e| io_err(&path, "replace")(e.error))?;
    sync_dir(dir)
}
