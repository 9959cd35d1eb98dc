//! The history store: the directory of every session (`<home>/sessions`), creating,
//! opening, listing sessions and replacing their metadata.

use std::fs;
use std::io;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use terminull_net::private_file;
use terminull_protocol::SessionId;
use terminull_protocol::blocks::now_ts;

use super::error::{HistoryError, Result, io_err};
use super::index::{INDEX_FILE, INDEX_MAGIC};
use super::log::{DATA_FILE, SessionLog};
use super::meta::{LogStatus, SessionMeta, read_meta, validate_session_id, write_meta};
use super::sync::{SyncPolicy, sync_dir};

/// The root of all session histories (`<home>/sessions`).
#[derive(Debug, Clone)]
pub struct HistoryStore {
    dir: PathBuf,
    policy: SyncPolicy,
}

impl HistoryStore {
    /// Opens (creating it if needed) the directory that holds every session, with the
    /// default [`SyncPolicy`].
    pub fn open(sessions_dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = sessions_dir.into();
        private_file::create_private_dir_all(&dir).map_err(io_err(&dir, "create the sessions directory"))?;
        Ok(Self { dir, policy: SyncPolicy::default() })
    }

    /// The same store with another fsync policy for the logs it opens from now on.
    pub fn with_sync_policy(mut self, policy: SyncPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The directory holding every session.
    pub fn sessions_dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of one session (which need not exist), after checking its id.
    pub fn session_dir(&self, session_id: &SessionId) -> Result<PathBuf> {
        validate_session_id(session_id.as_str())?;
        Ok(self.dir.join(session_id.as_str()))
    }

    /// Creates a new session: its directory, an empty log and index, and `meta.json`
    /// (written last, atomically). Fails with [`HistoryError::SessionExists`] when the
    /// directory exists already.
    pub fn create(&self, meta: SessionMeta) -> Result<SessionLog> {
        let dir = self.session_dir(&meta.session_id)?;
        match private_file::create_private_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(HistoryError::SessionExists { session_id: meta.session_id.0, path: dir });
            }
            Err(e) => return Err(io_err(&dir, "create the session directory")(e)),
        }
        let data_path = dir.join(DATA_FILE);
        private_file::private_open_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&data_path)
            .map_err(io_err(&data_path, "create"))?;
        let index_path = dir.join(INDEX_FILE);
        private_file::private_open_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&index_path)
            .and_then(|mut f| f.write_all(INDEX_MAGIC.as_ref()))
            .map_err(io_err(&index_path, "create"))?;
        write_meta(&dir, &meta)?;
        sync_dir(&self.dir)?;
        SessionLog::open(meta.session_id, dir, self.policy)
    }

    /// Opens an existing session's log for reading and appending, repairing a torn
    /// last line and the index (see the module docs).
    pub fn open_session(&self, session_id: &SessionId) -> Result<SessionLog> {
        let dir = self.session_dir(session_id)?;
        read_meta(&dir, session_id)?;
        SessionLog::open(session_id.clone(), dir, self.policy)
    }

    /// Reads one session's metadata.
    pub fn meta(&self, session_id: &SessionId) -> Result<SessionMeta> {
        read_meta(&self.session_dir(session_id)?, session_id)
    }

    /// Changes one session's metadata with `f`, stamps `updated_at` with the current
    /// time and replaces `meta.json` atomically. `f` cannot change the session id.
    /// Returns the new metadata.
    pub fn update_meta(&self, session_id: &SessionId, f: impl FnOnce(&mut SessionMeta)) -> Result<SessionMeta> {
        let dir = self.session_dir(session_id)?;
        let mut meta = read_meta(&dir, session_id)?;
        f(&mut meta);
        meta.session_id = session_id.clone();
        meta.updated_at = now_ts();
        write_meta(&dir, &meta)?;
        Ok(meta)
    }

    /// Removes a session's directory (its log, index and metadata) for good: renamed
    /// aside first (so a crash leaves no half-deleted session that lists), then removed.
    /// Fails with [`HistoryError::NoSuchSession`] when it does not exist.
    pub fn delete(&self, session_id: &SessionId) -> Result<()> {
        let dir = self.session_dir(session_id)?;
        // Checks that it is a session (and that the id is its own) before removing anything.
        read_meta(&dir, session_id)?;
        let aside = self.dir.join(format!(".deleted.{}", session_id.as_str()));
        fs::rename(&dir, &aside).map_err(io_err(&dir, "move aside for deletion"))?;
        sync_dir(&self.dir)?;
        fs::remove_dir_all(&aside).map_err(io_err(&aside, "remove"))
    }

    /// Every session's metadata, oldest first. A directory that is not a valid session
    /// (bad name, missing or malformed `meta.json`) is skipped with a warning.
    pub fn list(&self) -> Result<Vec<SessionMeta>> {
        let entries = fs::read_dir(&self.dir).map_err(io_err(&self.dir, "list"))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err(&self.dir, "list"))?;
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                tracing::debug!(path = %path.display(), "sessions directory: skipping a non-directory");
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                tracing::warn!(path = %path.display(), "skipping a session directory whose name is not UTF-8");
                continue;
            };
            let session_id = SessionId(name);
            if let Err(e) = validate_session_id(session_id.as_str()) {
                tracing::warn!(path = %path.display(), error = %e, "skipping a malformed session directory");
                continue;
            }
            match read_meta(&path, &session_id) {
                Ok(meta) => out.push(meta),
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "skipping a malformed session directory"),
            }
        }
        out.sort_by(|a, b| a.created_at.total_cmp(&b.created_at).then_with(|| a.session_id.cmp(&b.session_id)));
        Ok(out)
    }

    /// The sessions with work a restarted bridge must pick up at once (a queued message,
    /// a terminal to watch): not stopped. Oldest first.
    pub fn sessions_with_pending_work(&self) -> Result<Vec<SessionId>> {
        self.live_session_ids_where(|m| m.pending.needs_attention())
    }

    /// The sessions a restarted bridge resumes: not stopped, and with an agent session id
    /// to resume the agent with. Oldest first.
    pub fn resumable_session_ids(&self) -> Result<Vec<SessionId>> {
        self.live_session_ids_where(|m| m.agent_session_id.is_some())
    }

    /// The ids of the sessions not stopped whose metadata satisfies `keep`, oldest first.
    fn live_session_ids_where(&self, keep: impl Fn(&SessionMeta) -> bool) -> Result<Vec<SessionId>> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|m| m.status != LogStatus::Stopped && keep(m))
            .map(|m| m.session_id)
            .collect())
    }
}
