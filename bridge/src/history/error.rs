//! The history store's one error type: each variant names the file or session.

use std::io;
use std::path::{Path, PathBuf};

/// What went wrong in the history store. Each variant names the file or session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// A session id that cannot be used as a directory name.
    #[error("invalid session id {id:?}: {reason}")]
    InvalidSessionId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// [`HistoryStore::create`](super::HistoryStore::create) for a session whose directory already exists.
    #[error("session {session_id} already exists at {}", path.display())]
    SessionExists {
        /// The session.
        session_id: String,
        /// Its directory.
        path: PathBuf,
    },
    /// The session has no directory or no `meta.json`.
    #[error("no session {session_id}: {} does not exist", path.display())]
    NoSuchSession {
        /// The session.
        session_id: String,
        /// The file that is missing.
        path: PathBuf,
    },
    /// An I/O operation on a history file failed.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`read`, `append a block to`, `fsync`, …).
        action: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `meta.json` is not a valid [`SessionMeta`](super::SessionMeta).
    #[error("{}: malformed session metadata: {source}", path.display())]
    BadMeta {
        /// The `meta.json` file.
        path: PathBuf,
        /// The decoder's message.
        #[source]
        source: serde_json::Error,
    },
    /// `meta.json` belongs to another session than its directory says.
    #[error("{}: metadata names session {found:?}, but the directory is {expected:?}", path.display())]
    MetaMismatch {
        /// The `meta.json` file.
        path: PathBuf,
        /// The session id from the directory name.
        expected: String,
        /// The session id inside the file.
        found: String,
    },
    /// A block or the metadata could not be encoded as JSON.
    #[error("{}: cannot encode {what}: {source}", path.display())]
    Encode {
        /// The file it was meant for.
        path: PathBuf,
        /// What was being encoded (`block 12`, `session metadata`).
        what: String,
        /// The encoder's message.
        #[source]
        source: serde_json::Error,
    },
    /// The block was written (its `seq` is taken and it will be replayed) but the fsync
    /// the policy asked for failed, so it may not survive an OS crash.
    #[error("{}: block {seq} was written but fsync failed, it may not survive a crash: {source}", path.display())]
    NotDurable {
        /// The block log.
        path: PathBuf,
        /// The `seq` the block was given.
        seq: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An earlier append failed and its partial line could not be removed; the log
    /// refuses further appends until it is reopened (which repairs it).
    #[error("{}: an earlier failed write could not be undone; reopen the session to repair it", path.display())]
    Poisoned {
        /// The block log.
        path: PathBuf,
    },
}

/// Result of history operations.
pub type Result<T, E = HistoryError> = std::result::Result<T, E>;

/// The [`HistoryError::Io`] for `action` on `path`, as a closure for `map_err`.
pub(super) fn io_err(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> HistoryError {
    let path = path.to_owned();
    move |source| HistoryError::Io { path, action, source }
}
