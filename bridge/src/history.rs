//! Session history on disk: every block of every session, appended to a per-session
//! log that survives `kill -9` and a bridge restart, and replayed to clients that
//! resume. The user-facing description is `docs/history.md`; this is the reference.
//!
//! # Layout
//!
//! ```text
//! <sessions_dir>/<session_id>/meta.json     SessionMeta, replaced atomically
//! <sessions_dir>/<session_id>/blocks.jsonl  one Block per line, with its seq and ts
//! <sessions_dir>/<session_id>/blocks.idx    dense binary index into blocks.jsonl
//! ```
//!
//! A session id is a directory name, so it is checked first ([`validate_session_id`]):
//! 1–128 characters of `A-Z a-z 0-9 - _ .`, not starting with `.` (which also rules
//! out `.`, `..`, `/` and anything hidden).
//!
//! **`meta.json`** is a [`SessionMeta`] as pretty JSON. It is only ever replaced whole:
//! written to a temporary file in the same directory, fsynced, renamed over the old
//! one, then the directory is fsynced. A reader sees the old or the new version, never
//! a mix. [`HistoryStore::create`] writes it last, so a directory without `meta.json`
//! is a session whose creation did not finish; [`HistoryStore::list`] skips it.
//!
//! **`blocks.jsonl`** holds one [`Block`] per line, serialized with `serde_json`
//! exactly as the app receives it (`seq` and `ts` included), each line ended by `\n`.
//! It is the source of truth. Lines are appended with one `write` call each; `seq`
//! grows by one per line (1, 2, 3, …) until [`SessionLog::compact`] removes superseded
//! chunks, after which it still strictly increases but has gaps.
//!
//! **`blocks.idx`** is derived from `blocks.jsonl` and is rebuilt whenever it does not
//! match. It is an 8-byte header (`TNULIDX1`) followed by one 32-byte record per block
//! (dense: one record per line, so a seek lands exactly on its block), all little-endian:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0–7 | `seq` | the block's `seq` (u64) |
//! | 8–15 | `max_ts` | the largest `ts` of this block and every block before it (f64 bits) |
//! | 16–23 | `offset` | byte offset of the block's line in `blocks.jsonl` (u64) |
//! | 24–31 | `check` | FNV-1a 64 of bytes 0–23, so garbage is never mistaken for a record |
//!
//! `max_ts` is a running maximum rather than the block's own `ts` because `ts` comes
//! from the agent and is not guaranteed to grow (clock steps, equal stamps); the running
//! maximum always does, so a binary search for `since_ts` is exact: every block before
//! the first record whose `max_ts` exceeds `since_ts` has `ts <= since_ts`.
//!
//! # Crash safety and recovery
//!
//! A crash can lose the unsynced tail of `blocks.jsonl` (see the fsync policy below)
//! but never damages what is before it: lines are only ever appended, and a line is
//! only counted once its `\n` is on disk. [`HistoryStore::open_session`] checks the
//! last line without reading the rest of the file (it reads backwards from the end):
//!
//! - a last line without its `\n` (a torn write: `kill -9` mid-write, power loss, a
//!   full disk) is cut off;
//! - a last line that is not a valid block (garbage, zero bytes after a power loss) is
//!   cut off.
//!
//! Either way a warning names the file, the offset and the bytes dropped, and appending
//! continues at the `seq` after the last intact block. Only the one last line is ever
//! removed; an unreadable line elsewhere (a damaged disk, a hand edit) is left in place,
//! skipped with a warning when read, and never indexed.
//!
//! Then the index is checked against the data: header, whole records, checksums,
//! strictly increasing `seq` and `offset`, offsets inside the data, and the last record
//! must point at a line that holds its `seq`. Records past the data (the index got to
//! disk before the data did) and a torn last record are cut off; blocks missing from
//! the end of the index (the index is never fsynced) are indexed from the data; anything
//! else (missing file, bad header, a record that does not match) rebuilds the whole
//! index from the data. Opening reads the index once, sequentially, never the data file
//! whole (except for a full rebuild).
//!
//! # fsync policy
//!
//! `write` returning means the line is in the kernel: `kill -9` of the bridge cannot
//! lose it. fsync is what protects against an OS crash or a power loss. The default,
//! [`SyncPolicy::Boundaries`] with [`DEFAULT_SYNC_INTERVAL`] (1 s), fsyncs the data
//! file ([`File::sync_data`]):
//!
//! - after every block that marks a point the user must not lose: `agent_info` (the
//!   session exists), `user_message` (what the user sent), `permission_request` (a turn
//!   now waits for the user), `error` and `session_end` (the turn's outcome);
//! - after any other block when at least the interval has passed since the last fsync,
//!   so a stream of chunks costs at most one fsync per interval;
//! - on [`SessionLog::sync`], [`SessionLog::sync_if_due`] (for an idle timer: a stream
//!   that stops right after a chunk would otherwise leave it unsynced until the next
//!   block), [`SessionLog::close`] and drop.
//!
//! So an OS crash loses at most the blocks of the last interval of a running turn, and
//! never a completed turn. The index is never fsynced: it is repaired from the data on
//! open. [`sync_due`] is the policy as a pure function.
//!
//! # Replay
//!
//! [`SessionLog::read_since_seq`] and [`SessionLog::read_since_ts`] binary-search the
//! index (reading about log2(n) records, never the whole index) for the first block of
//! the range, then read `blocks.jsonl` forward from that offset to its end. The line the
//! index points at is checked to hold the expected `seq`; if it does not, the read
//! falls back to a full scan (correct, slower), logs a warning, and the index is
//! rebuilt before the next append.
//!
//! Replayed blocks are **compacted**: of the blocks in the range, only the last one of
//! each `text`, `thinking`, `progress` and `bg_task` id is kept (for `text`/`thinking`
//! that is the `done: true` chunk once the id is finished, else its latest chunk), in
//! its own position. Every other block is kept, in order. Blocks keep their `seq`, so a
//! replay has gaps in `seq`; a client resumes from the highest `seq` it has seen, as
//! `docs/block-protocol.md` says. Compaction happens at replay time, so the file holds
//! every chunk until [`SessionLog::compact`] rewrites it without the superseded ones.
//!
//! # Timestamps
//!
//! [`SessionLog::append`] keeps the block's `ts` (the producer's clock) and stamps the
//! current time only when `ts` is 0, negative or not finite; it always overwrites `seq`.
//!
//! # Concurrency
//!
//! One [`SessionLog`] per session, owned by that session's task: appends take
//! `&mut self`, reads `&self`. Nothing here locks files; two bridges on one
//! `sessions_dir` are not supported. [`HistoryStore::update_meta`] is a
//! read-modify-write; callers serialise updates of one session.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use terminull_protocol::blocks::{Block, BlockKind, UserMessage, now_ts};
use terminull_protocol::{AgentId, AgentSessionId, SessionId};

/// Name of a session's metadata file.
pub const META_FILE: &str = "meta.json";
/// Name of a session's block log.
pub const DATA_FILE: &str = "blocks.jsonl";
/// Name of a session's index into the block log.
pub const INDEX_FILE: &str = "blocks.idx";
/// The first eight bytes of every index file (format version 1).
pub const INDEX_MAGIC: &[u8; 8] = b"TNULIDX1";
/// Size of one index record in bytes.
pub const INDEX_RECORD_LEN: u64 = 32;
/// The longest session id accepted, in bytes.
pub const MAX_SESSION_ID_LEN: usize = 128;
/// The default longest time between two fsyncs of a session log while blocks arrive.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(1000);

const HEADER_LEN: u64 = INDEX_MAGIC.len() as u64;
/// Backwards reads while looking for the last line go in chunks of this size.
const TAIL_CHUNK: usize = 64 * 1024;

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
    /// [`HistoryStore::create`] for a session whose directory already exists.
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
    /// `meta.json` is not a valid [`SessionMeta`].
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

fn io_err(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> HistoryError {
    let path = path.to_owned();
    move |source| HistoryError::Io { path, action, source }
}

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

/// Whether a session can still be resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
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
    /// When this metadata last changed, Unix seconds ([`HistoryStore::update_meta`] sets it).
    pub updated_at: f64,
    /// The agent's own conversation id, once the adapter has reported it; what a
    /// restarted bridge resumes the agent with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<AgentSessionId>,
    /// The conversation's title, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Active or stopped.
    pub state: SessionState,
    /// Work the session owes its user across a bridge restart; absent when none.
    #[serde(default, skip_serializing_if = "PendingWork::is_empty")]
    pub pending: PendingWork,
}

/// What a session has accepted and not yet carried out: kept in `meta.json` so that a
/// restarted bridge neither loses a queued message nor forgets that a terminal owns
/// the conversation (docs/session-handoff.md, "Across a bridge restart").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWork {
    /// Messages accepted but not yet sent to the agent, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub queued: VecDeque<UserMessage>,
    /// Set while a terminal owns the conversation (or was handed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<Parked>,
    /// Where the mirror of the agent's own transcript stopped (opaque, the adapter's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_cursor: Option<String>,
}

impl PendingWork {
    /// Nothing queued, not parked, no mirror position.
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty() && self.parked.is_none() && self.mirror_cursor.is_none()
    }

    /// Whether a restarted bridge must revive the session at once rather than when a
    /// client next touches it: a message waits, or a terminal must be watched.
    pub fn needs_attention(&self) -> bool {
        !self.queued.is_empty() || self.parked.is_some()
    }
}

/// A parked session: nothing is sent to the agent until the terminal lets go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parked {
    /// A terminal was seen owning the conversation since it was parked.
    #[serde(default)]
    pub seen_owner: bool,
    /// The terminal's process, when last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_pid: Option<u32>,
    /// The command given to the user (`continue_in_terminal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_command: Option<Vec<String>>,
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
            state: SessionState::Active,
            pending: PendingWork::default(),
        }
    }
}

/// When [`SessionLog::append`] fsyncs the block log. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Never from `append`; only [`SessionLog::sync`], `close` and drop do.
    Never,
    /// After every block.
    EveryBlock,
    /// After every turn-boundary block ([`is_sync_boundary`]), and after any other
    /// block once `max_interval` has passed since the last fsync.
    Boundaries {
        /// The longest time between fsyncs while blocks arrive.
        max_interval: Duration,
    },
}

impl Default for SyncPolicy {
    fn default() -> Self {
        Self::Boundaries { max_interval: DEFAULT_SYNC_INTERVAL }
    }
}

/// Whether a block of this kind is one the user must not lose: `agent_info`,
/// `user_message`, `permission_request`, `error` and `session_end`.
pub fn is_sync_boundary(kind: &BlockKind) -> bool {
    matches!(
        kind,
        BlockKind::AgentInfo(_)
            | BlockKind::UserMessage(_)
            | BlockKind::PermissionRequest(_)
            | BlockKind::Error(_)
            | BlockKind::SessionEnd(_)
    )
}

/// The fsync policy as a pure function: whether appending a block of `kind`, when
/// `since_last_sync` has passed since the log was last fsynced, must fsync it.
pub fn sync_due(policy: SyncPolicy, kind: &BlockKind, since_last_sync: Duration) -> bool {
    match policy {
        SyncPolicy::Never => false,
        SyncPolicy::EveryBlock => true,
        SyncPolicy::Boundaries { max_interval } => is_sync_boundary(kind) || since_last_sync >= max_interval,
    }
}

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
        fs::create_dir_all(&dir).map_err(io_err(&dir, "create the sessions directory"))?;
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
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(HistoryError::SessionExists { session_id: meta.session_id.0, path: dir });
            }
            Err(e) => return Err(io_err(&dir, "create the session directory")(e)),
        }
        let data_path = dir.join(DATA_FILE);
        File::create(&data_path).map_err(io_err(&data_path, "create"))?;
        let index_path = dir.join(INDEX_FILE);
        fs::write(&index_path, INDEX_MAGIC).map_err(io_err(&index_path, "create"))?;
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
            .filter(|m| m.state != SessionState::Stopped && keep(m))
            .map(|m| m.session_id)
            .collect())
    }
}

fn read_meta(dir: &Path, session_id: &SessionId) -> Result<SessionMeta> {
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
fn write_meta(dir: &Path, meta: &SessionMeta) -> Result<()> {
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
        .tempfile_in(dir)
        .map_err(io_err(dir, "create a temporary file in"))?;
    tmp.write_all(&bytes).map_err(io_err(tmp.path(), "write"))?;
    tmp.as_file().sync_all().map_err(io_err(tmp.path(), "fsync"))?;
    tmp.persist(&path).map_err(|e| io_err(&path, "replace")(e.error))?;
    sync_dir(dir)
}

/// fsyncs a directory so that a create, rename or unlink in it is durable.
fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir, "fsync the directory"))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// One index record; see the module docs for the layout.
#[derive(Debug, Clone, Copy, PartialEq)]
struct IndexRecord {
    seq: u64,
    max_ts: f64,
    offset: u64,
}

impl IndexRecord {
    fn encode(&self) -> [u8; INDEX_RECORD_LEN as usize] {
        let mut b = [0u8; INDEX_RECORD_LEN as usize];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.max_ts.to_bits().to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        let check = fnv1a(&b[0..24]);
        b[24..32].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// `None` when the checksum does not match or `max_ts` is not a finite number.
    fn decode(b: &[u8; INDEX_RECORD_LEN as usize]) -> Option<Self> {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        if word(24) != fnv1a(&b[0..24]) {
            return None;
        }
        let max_ts = f64::from_bits(word(8));
        max_ts.is_finite().then_some(Self { seq: word(0), max_ts, offset: word(16) })
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A line of the log decoded as a stored block (one that has its `seq`).
fn parse_line(line: &[u8]) -> std::result::Result<Block, String> {
    match serde_json::from_slice::<Block>(line) {
        Ok(b) if b.seq.is_some() => Ok(b),
        Ok(_) => Err("the block has no seq".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The fields of a stored line a replay decides on (`seq`, `ts`, `type`, `id`), read
/// without decoding the rest of the block.
#[derive(Deserialize)]
struct LineHead<'a> {
    seq: Option<u64>,
    ts: f64,
    #[serde(rename = "type", borrow)]
    block_type: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<&'a serde_json::value::RawValue>,
}

impl LineHead<'_> {
    /// [`BlockKind::replace_key`] of the block this line holds.
    fn replace_key(&self) -> Option<(&'static str, String)> {
        let kind = match self.block_type.as_ref() {
            "text" => "text",
            "thinking" => "thinking",
            "progress" => "progress",
            "bg_task" => "bg_task",
            _ => return None,
        };
        let id: String = serde_json::from_str(self.id?.get()).ok()?;
        Some((kind, id))
    }
}

/// Collects replayed lines, keeping only the last block of each replaceable id, and
/// decodes the survivors at the end: most of a replay is superseded chunks (82 % of a
/// realistic log), so deciding on each line's head and decoding only what is kept
/// saves most of the decoding.
#[derive(Default)]
struct Compactor {
    out: Vec<Option<Vec<u8>>>,
    last: HashMap<(&'static str, String), usize>,
}

impl Compactor {
    fn push(&mut self, head: &LineHead<'_>, line: &[u8]) {
        if let Some(key) = head.replace_key()
            && let Some(earlier) = self.last.insert(key, self.out.len())
        {
            self.out[earlier] = None;
        }
        self.out.push(Some(line.to_vec()));
    }

    /// The kept blocks in log order; a kept line whose body does not decode is
    /// skipped with a warning (it still replaced the earlier chunks of its id).
    fn finish(self, path: &Path) -> Vec<Block> {
        let mut blocks = Vec::with_capacity(self.out.len());
        for line in self.out.into_iter().flatten() {
            match parse_line(&line) {
                Ok(block) => blocks.push(block),
                Err(problem) => {
                    tracing::warn!(file = %path.display(), %problem, "skipping an unreadable line of the block log")
                }
            }
        }
        blocks
    }
}

fn read_exact_at(mut file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

/// The position of the last `\n` in `file[..before]`, reading backwards in chunks.
fn find_last_newline(file: &File, before: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; TAIL_CHUNK];
    let mut end = before;
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK as u64);
        let chunk = &mut buf[..(end - start) as usize];
        read_exact_at(file, start, chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

/// Reads `file[start..end]`.
fn read_range(file: &File, start: u64, end: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; (end - start) as usize];
    read_exact_at(file, start, &mut buf)?;
    Ok(buf)
}

/// Reads the lines of `file[from..to]` forward; `to` is at a line boundary.
struct LineReader<'a> {
    reader: BufReader<io::Take<File>>,
    pos: u64,
    buf: Vec<u8>,
    counter: Option<&'a AtomicU64>,
}

impl<'a> LineReader<'a> {
    fn open(path: &Path, from: u64, to: u64, counter: Option<&'a AtomicU64>) -> Result<Self> {
        let mut file = File::open(path).map_err(io_err(path, "open"))?;
        file.seek(SeekFrom::Start(from)).map_err(io_err(path, "seek in"))?;
        let reader = BufReader::with_capacity(64 * 1024, file.take(to.saturating_sub(from)));
        Ok(Self { reader, pos: from, buf: Vec::new(), counter })
    }

    /// The next line's offset and bytes (without `\n`), or `None` at the end.
    fn next_line(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(c) = self.counter {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        let offset = self.pos;
        self.pos += n as u64;
        let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        Ok(Some((offset, line)))
    }
}

/// Where a replay starts reading.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// At this record's line, which must hold its `seq`.
    At(IndexRecord),
    /// After the last indexed line (nothing indexed is in the range).
    Unindexed,
    /// The index is unusable: scan from the beginning.
    Scan,
}

/// Sizes before and after [`SessionLog::compact`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactStats {
    /// Lines in the log before.
    pub blocks_before: u64,
    /// Lines in the log after.
    pub blocks_after: u64,
    /// Bytes of the log before.
    pub bytes_before: u64,
    /// Bytes of the log after.
    pub bytes_after: u64,
}

/// One session's block log, open for appending and replay.
#[derive(Debug)]
pub struct SessionLog {
    session_id: SessionId,
    dir: PathBuf,
    data_path: PathBuf,
    index_path: PathBuf,
    /// The log, opened for reading and appending.
    data: File,
    /// The index, opened for reading and appending.
    index: File,
    /// Length of the log up to its last complete line; reads never go past it.
    data_len: u64,
    last_seq: u64,
    /// Largest `ts` in the log (the last index record's `max_ts`).
    max_ts: f64,
    /// Records in the index.
    index_records: u64,
    /// End of the last indexed line: everything from here to `data_len` is unindexed.
    indexed_end: u64,
    /// An index write failed: stop writing records until the index is rebuilt.
    index_stale: bool,
    /// A read found the index disagreeing with the data: rebuild before the next append.
    index_suspect: AtomicBool,
    policy: SyncPolicy,
    last_sync: Instant,
    unsynced: bool,
    poisoned: bool,
    /// Bytes of the log read by replays (for tests and diagnostics).
    bytes_read: AtomicU64,
}

impl SessionLog {
    fn open(session_id: SessionId, dir: PathBuf, policy: SyncPolicy) -> Result<Self> {
        let data_path = dir.join(DATA_FILE);
        let index_path = dir.join(INDEX_FILE);
        let data = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&data_path)
            .map_err(io_err(&data_path, "open"))?;
        let index = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&index_path)
            .map_err(io_err(&index_path, "open"))?;
        let mut log = Self {
            session_id,
            dir,
            data_path,
            index_path,
            data,
            index,
            data_len: 0,
            last_seq: 0,
            max_ts: 0.0,
            index_records: 0,
            indexed_end: 0,
            index_stale: false,
            index_suspect: AtomicBool::new(false),
            policy,
            last_sync: Instant::now(),
            unsynced: false,
            poisoned: false,
            bytes_read: AtomicU64::new(0),
        };
        log.recover_tail()?;
        log.open_index()?;
        Ok(log)
    }

    /// Cuts off a torn or unparseable last line and finds the last `seq`.
    fn recover_tail(&mut self) -> Result<()> {
        let path = &self.data_path;
        let read_err = || io_err(path, "read");
        let len = self.data.metadata().map_err(io_err(path, "stat"))?.len();
        let mut keep = len;
        let mut last: Option<Block> = None;
        if len > 0 {
            let mut byte = [0u8; 1];
            read_exact_at(&self.data, len - 1, &mut byte).map_err(read_err())?;
            let line_start = find_last_newline(&self.data, len - 1).map_err(read_err())?.map_or(0, |p| p + 1);
            if byte[0] != b'\n' {
                // `line_start` is right after the last newline before the final byte,
                // which is not one: the whole tail from there is a torn line.
                keep = line_start;
                tracing::warn!(
                    file = %path.display(), offset = keep, dropped_bytes = len - keep,
                    "dropping a torn last line (no newline) from the block log"
                );
            } else {
                let line = read_range(&self.data, line_start, len - 1).map_err(read_err())?;
                match parse_line(&line) {
                    Ok(b) => last = Some(b),
                    Err(problem) => {
                        keep = line_start;
                        tracing::warn!(
                            file = %path.display(), offset = keep, dropped_bytes = len - keep, %problem,
                            "dropping an unreadable last line from the block log"
                        );
                    }
                }
            }
        }
        if keep < len {
            self.data.set_len(keep).map_err(io_err(path, "truncate"))?;
            self.data.sync_all().map_err(io_err(path, "fsync"))?;
        }
        // The last line is now intact; when it was cut, the one before it may not be
        // (damage elsewhere). Walk back to the last readable block for `last_seq`.
        let mut end = keep;
        while last.is_none() && end > 0 {
            let start = find_last_newline(&self.data, end - 1).map_err(read_err())?.map_or(0, |p| p + 1);
            let line = read_range(&self.data, start, end - 1).map_err(read_err())?;
            match parse_line(&line) {
                Ok(b) => last = Some(b),
                Err(problem) => tracing::warn!(
                    file = %path.display(), offset = start, %problem,
                    "the block log has an unreadable line; it is kept but skipped"
                ),
            }
            end = start;
        }
        self.data_len = keep;
        self.last_seq = last.and_then(|b| b.seq).unwrap_or(0);
        Ok(())
    }

    /// Checks the index against the data and repairs it (see the module docs).
    fn open_index(&mut self) -> Result<()> {
        let path = self.index_path.clone();
        let len = self.index.metadata().map_err(io_err(&path, "stat"))?.len();
        let mut header = [0u8; HEADER_LEN as usize];
        if len < HEADER_LEN || read_exact_at(&self.index, 0, &mut header).is_err() || &header != INDEX_MAGIC {
            if len > 0 || self.data_len > 0 {
                tracing::warn!(file = %path.display(), "block index is missing or has a bad header; rebuilding it");
            }
            return self.rebuild_index();
        }
        let whole = (len - HEADER_LEN) / INDEX_RECORD_LEN;
        let torn = (len - HEADER_LEN) % INDEX_RECORD_LEN;
        // Longest prefix of sound records.
        let mut valid = 0u64;
        let mut prev: Option<IndexRecord> = None;
        {
            let mut file = &self.index;
            file.seek(SeekFrom::Start(HEADER_LEN)).map_err(io_err(&path, "seek in"))?;
            let mut reader = BufReader::with_capacity(64 * 1024, file);
            let mut buf = [0u8; INDEX_RECORD_LEN as usize];
            while valid < whole {
                reader.read_exact(&mut buf).map_err(io_err(&path, "read"))?;
                let Some(rec) = IndexRecord::decode(&buf) else { break };
                let ordered = prev.is_none_or(|p| rec.seq > p.seq && rec.offset > p.offset && rec.max_ts >= p.max_ts);
                if !ordered || rec.offset >= self.data_len || rec.seq > self.last_seq {
                    break;
                }
                prev = Some(rec);
                valid += 1;
            }
        }
        if valid < whole || torn != 0 {
            tracing::warn!(
                file = %path.display(), kept_records = valid, dropped_bytes = len - HEADER_LEN - valid * INDEX_RECORD_LEN,
                "block index has records that do not match the log; cutting them off"
            );
            self.index.set_len(HEADER_LEN + valid * INDEX_RECORD_LEN).map_err(io_err(&path, "truncate"))?;
        }
        self.index_records = valid;
        let Some(rec) = prev else {
            self.indexed_end = 0;
            self.max_ts = 0.0;
            return self.extend_index();
        };
        // The last kept record must point at the start of a line holding its seq.
        match self.line_at(rec.offset) {
            Some((block, end)) if block.seq == Some(rec.seq) => {
                self.indexed_end = end;
                self.max_ts = rec.max_ts;
                self.extend_index()
            }
            _ => {
                tracing::warn!(
                    file = %path.display(), seq = rec.seq, offset = rec.offset,
                    "block index does not match the log; rebuilding it"
                );
                self.rebuild_index()
            }
        }
    }

    /// The block whose line starts exactly at `offset`, and the offset after its line.
    fn line_at(&self, offset: u64) -> Option<(Block, u64)> {
        if offset > 0 {
            let mut before = [0u8; 1];
            read_exact_at(&self.data, offset - 1, &mut before).ok()?;
            if before[0] != b'\n' {
                return None;
            }
        }
        let mut reader = LineReader::open(&self.data_path, offset, self.data_len, None).ok()?;
        let (_, line) = reader.next_line().ok()??;
        let block = parse_line(line).ok()?;
        Some((block, reader.pos))
    }

    /// Replaces the index with one built from the whole log.
    fn rebuild_index(&mut self) -> Result<()> {
        let path = self.index_path.clone();
        self.index.set_len(0).map_err(io_err(&path, "truncate"))?;
        (&self.index).write_all(INDEX_MAGIC).map_err(io_err(&path, "write"))?;
        self.index_records = 0;
        self.indexed_end = 0;
        self.max_ts = 0.0;
        self.index_stale = false;
        self.index_suspect.store(false, Ordering::Relaxed);
        self.extend_index()
    }

    /// Indexes the lines from `indexed_end` to the end of the log.
    fn extend_index(&mut self) -> Result<()> {
        if self.indexed_end >= self.data_len {
            return Ok(());
        }
        let from = self.indexed_end;
        let mut reader = LineReader::open(&self.data_path, from, self.data_len, None)?;
        let mut out = BufWriter::with_capacity(64 * 1024, &self.index);
        let mut added = 0u64;
        let mut last_seq = 0u64;
        while let Some((offset, line)) = reader.next_line().map_err(io_err(&self.data_path, "read"))? {
            let block = match parse_line(line) {
                Ok(b) => b,
                Err(problem) => {
                    tracing::warn!(file = %self.data_path.display(), offset, %problem, "not indexing an unreadable line");
                    continue;
                }
            };
            let seq = block.seq.unwrap_or(0);
            if seq <= last_seq {
                tracing::warn!(file = %self.data_path.display(), offset, seq, "not indexing a block whose seq does not grow");
                continue;
            }
            last_seq = seq;
            self.max_ts = self.max_ts.max(block.ts);
            out.write_all(&IndexRecord { seq, max_ts: self.max_ts, offset }.encode())
                .map_err(io_err(&self.index_path, "write"))?;
            added += 1;
        }
        out.flush().map_err(io_err(&self.index_path, "write"))?;
        drop(out);
        self.index_records += added;
        self.indexed_end = self.data_len;
        if from > 0 {
            tracing::info!(file = %self.index_path.display(), added, "indexed blocks missing from the end of the index");
        }
        Ok(())
    }

    /// The session this log belongs to.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The session's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `seq` of the last block stored; 0 for an empty log.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The size of the block log in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.data_len
    }

    /// Stores one block: gives it `seq = last_seq() + 1` (overwriting any `seq` it has),
    /// keeps its `ts` unless that is 0, negative or not finite (then stamps now), writes
    /// it as one line with one `write`, indexes it, fsyncs when the [`SyncPolicy`] says
    /// so, and returns the block as stored.
    ///
    /// On a write error the partial line is removed and nothing is stored. On
    /// [`HistoryError::NotDurable`] the block *is* stored under that `seq`.
    pub fn append(&mut self, mut block: Block) -> Result<Block> {
        if self.poisoned {
            return Err(HistoryError::Poisoned { path: self.data_path.clone() });
        }
        if self.index_suspect.load(Ordering::Relaxed) {
            tracing::warn!(file = %self.index_path.display(), "rebuilding a block index that did not match the log");
            self.rebuild_index()?;
        }
        let seq = self.last_seq + 1;
        block.seq = Some(seq);
        if !(block.ts.is_finite() && block.ts > 0.0) {
            block.ts = now_ts();
        }
        let mut line = serde_json::to_vec(&block).map_err(|source| HistoryError::Encode {
            path: self.data_path.clone(),
            what: format!("block {seq}"),
            source,
        })?;
        line.push(b'\n');
        if let Err(e) = (&self.data).write_all(&line) {
            if let Err(undo) = self.data.set_len(self.data_len) {
                tracing::error!(
                    file = %self.data_path.display(), error = %undo,
                    "cannot remove a partially written line; refusing further appends"
                );
                self.poisoned = true;
            }
            return Err(io_err(&self.data_path, "append to")(e));
        }
        let offset = self.data_len;
        self.data_len += line.len() as u64;
        self.last_seq = seq;
        self.max_ts = self.max_ts.max(block.ts);
        self.unsynced = true;
        self.write_index_record(IndexRecord { seq, max_ts: self.max_ts, offset });
        if sync_due(self.policy, &block.kind, self.last_sync.elapsed()) {
            self.sync_data().map_err(|source| HistoryError::NotDurable {
                path: self.data_path.clone(),
                seq,
                source,
            })?;
        }
        Ok(block)
    }

    /// Appends one index record. A failure does not fail the append (the block is in the
    /// log, which is what counts): the index stops growing and is repaired on reopen.
    fn write_index_record(&mut self, rec: IndexRecord) {
        if self.index_stale {
            return;
        }
        match (&self.index).write_all(&rec.encode()) {
            Ok(()) => {
                self.index_records += 1;
                self.indexed_end = self.data_len;
            }
            Err(e) => {
                tracing::warn!(
                    file = %self.index_path.display(), error = %e,
                    "cannot append to the block index; it will be repaired when the session is reopened"
                );
                let _ = self.index.set_len(HEADER_LEN + self.index_records * INDEX_RECORD_LEN);
                self.index_stale = true;
            }
        }
    }

    fn sync_data(&mut self) -> io::Result<()> {
        if self.unsynced {
            self.data.sync_data()?;
            self.unsynced = false;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// fsyncs the block log now if anything is unsynced.
    pub fn sync(&mut self) -> Result<()> {
        self.sync_data().map_err(io_err(&self.data_path, "fsync"))
    }

    /// fsyncs the block log if something is unsynced and the policy's interval has
    /// passed since the last fsync (with [`SyncPolicy::EveryBlock`]: whenever something
    /// is unsynced). For an idle timer, so a stream that stops mid-turn is synced too.
    pub fn sync_if_due(&mut self) -> Result<()> {
        let due = match self.policy {
            SyncPolicy::Never => false,
            SyncPolicy::EveryBlock => true,
            SyncPolicy::Boundaries { max_interval } => self.last_sync.elapsed() >= max_interval,
        };
        if due && self.unsynced { self.sync() } else { Ok(()) }
    }

    /// fsyncs what is unsynced and closes the log. Dropping the log does the same but
    /// can only log an error.
    pub fn close(mut self) -> Result<()> {
        self.sync()
    }

    /// Rebuilds the index from the whole log. Opening a session repairs the index
    /// already; this is for a caller that has reason to distrust it.
    pub fn repair_index(&mut self) -> Result<()> {
        self.rebuild_index()
    }

    /// Every block with `seq > after`, compacted (see the module docs), in log order.
    /// Seeks with the index; reads the log only from the first block of the range.
    pub fn read_since_seq(&self, after: u64) -> Result<Vec<Block>> {
        if after >= self.last_seq {
            return Ok(Vec::new());
        }
        let start = self.seek(|r| r.seq > after);
        self.read_from(start, &|seq, _| seq > after)
    }

    /// Every block with `ts > after`, compacted (see the module docs), in log order.
    /// Seeks with the index's running maximum of `ts`, so blocks whose `ts` went
    /// backwards are still found; reads the log only from the first candidate.
    pub fn read_since_ts(&self, after: f64) -> Result<Vec<Block>> {
        if after.is_nan() || after >= self.max_ts {
            return Ok(Vec::new());
        }
        let start = self.seek(|r| r.max_ts > after);
        self.read_from(start, &|_, ts| ts > after)
    }

    /// The whole history, compacted.
    pub fn read_all(&self) -> Result<Vec<Block>> {
        self.read_from(Start::Scan, &|_, _| true)
    }

    /// Binary search of the index for the first record where `pred` holds (`pred` must
    /// be false then true along the index).
    fn seek(&self, pred: impl Fn(&IndexRecord) -> bool) -> Start {
        let n = self.index_records;
        if n == 0 {
            return Start::Unindexed;
        }
        let file = match File::open(&self.index_path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(file = %self.index_path.display(), error = %e, "cannot open the block index; scanning the log");
                return Start::Scan;
            }
        };
        let read = |i: u64| -> Option<IndexRecord> {
            let mut buf = [0u8; INDEX_RECORD_LEN as usize];
            read_exact_at(&file, HEADER_LEN + i * INDEX_RECORD_LEN, &mut buf).ok()?;
            IndexRecord::decode(&buf)
        };
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(rec) = read(mid) else { return self.index_broken(mid) };
            if pred(&rec) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == n {
            return Start::Unindexed;
        }
        match read(lo) {
            Some(rec) => Start::At(rec),
            None => self.index_broken(lo),
        }
    }

    fn index_broken(&self, record: u64) -> Start {
        tracing::warn!(
            file = %self.index_path.display(), record,
            "block index record is damaged; scanning the log and rebuilding the index before the next append"
        );
        self.index_suspect.store(true, Ordering::Relaxed);
        Start::Scan
    }

    /// Reads forward from `start` to the end of the log, keeping blocks for which
    /// `keep` holds, compacted.
    fn read_from(&self, start: Start, keep: &dyn Fn(u64, f64) -> bool) -> Result<Vec<Block>> {
        let (from, mut expect) = match start {
            Start::At(rec) => (rec.offset, Some(rec.seq)),
            Start::Unindexed => (self.indexed_end, None),
            Start::Scan => (0, None),
        };
        let mut reader = LineReader::open(&self.data_path, from, self.data_len, Some(&self.bytes_read))?;
        let mut out = Compactor::default();
        while let Some((offset, line)) = reader.next_line().map_err(io_err(&self.data_path, "read"))? {
            let head = serde_json::from_slice::<LineHead<'_>>(line).ok().filter(|h| h.seq.is_some());
            // Only the first line is checked against the index record that led here.
            if let Some(seq) = expect.take()
                && head.as_ref().and_then(|h| h.seq) != Some(seq)
            {
                tracing::warn!(
                    file = %self.index_path.display(), seq, offset,
                    "block index points at the wrong line; scanning the log and rebuilding the index before the next append"
                );
                self.index_suspect.store(true, Ordering::Relaxed);
                return self.read_from(Start::Scan, keep);
            }
            match head {
                Some(head) if keep(head.seq.unwrap_or_default(), head.ts) => out.push(&head, line),
                Some(_) => {}
                None => {
                    let problem = parse_line(line).err().unwrap_or_else(|| "unreadable head".into());
                    tracing::warn!(
                        file = %self.data_path.display(), offset, %problem,
                        "skipping an unreadable line of the block log"
                    )
                }
            }
        }
        Ok(out.finish(&self.data_path))
    }

    /// Rewrites the log without the blocks a replay would drop (every `text`,
    /// `thinking`, `progress` and `bg_task` block followed by a later one with the same
    /// id), so finished streams take the space of their final text only. Kept blocks
    /// keep their `seq`; replays give the same result before and after. Unreadable
    /// lines are kept as they are. The new log replaces the old one atomically (temporary
    /// file, fsync, rename, fsync of the directory); the index is rebuilt.
    ///
    /// Reads the log twice and holds one entry per distinct id in memory. Meant for
    /// sessions that are stopped or idle, not for every turn.
    pub fn compact(&mut self) -> Result<CompactStats> {
        self.sync()?;
        let read_err = || io_err(&self.data_path, "read");
        // Pass 1: the last seq of every replaceable id.
        let mut last_of: HashMap<(&'static str, String), u64> = HashMap::new();
        let mut blocks_before = 0u64;
        let mut reader = LineReader::open(&self.data_path, 0, self.data_len, None)?;
        while let Some((_, line)) = reader.next_line().map_err(read_err())? {
            blocks_before += 1;
            if let Ok(b) = parse_line(line)
                && let Some((kind, id)) = b.kind.replace_key()
            {
                last_of.insert((kind, id.to_owned()), b.seq.unwrap_or(0));
            }
        }
        // Pass 2: copy the lines that stay.
        let mut tmp = tempfile::Builder::new()
            .prefix(".blocks.")
            .suffix(".tmp")
            .tempfile_in(&self.dir)
            .map_err(io_err(&self.dir, "create a temporary file in"))?;
        let tmp_path = tmp.path().to_owned();
        let mut blocks_after = 0u64;
        let mut bytes_after = 0u64;
        {
            let mut out = BufWriter::with_capacity(64 * 1024, tmp.as_file_mut());
            let mut reader = LineReader::open(&self.data_path, 0, self.data_len, None)?;
            while let Some((_, line)) = reader.next_line().map_err(read_err())? {
                let superseded = parse_line(line).is_ok_and(|b| {
                    b.kind.replace_key().is_some_and(|(kind, id)| {
                        last_of.get(&(kind, id.to_owned())).is_some_and(|&last| Some(last) != b.seq)
                    })
                });
                if superseded {
                    continue;
                }
                out.write_all(line).and_then(|()| out.write_all(b"\n")).map_err(io_err(&tmp_path, "write"))?;
                blocks_after += 1;
                bytes_after += line.len() as u64 + 1;
            }
            out.flush().map_err(io_err(&tmp_path, "write"))?;
        }
        let stats = CompactStats { blocks_before, blocks_after, bytes_before: self.data_len, bytes_after };
        if blocks_after == blocks_before {
            return Ok(stats);
        }
        tmp.as_file().sync_all().map_err(io_err(&tmp_path, "fsync"))?;
        // Remove the index first: a crash between here and the rebuild leaves no index
        // (rebuilt on open) rather than one that points into the old log.
        match fs::remove_file(&self.index_path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&self.index_path, "remove")(e)),
        }
        sync_dir(&self.dir)?;
        tmp.persist(&self.data_path).map_err(|e| io_err(&self.data_path, "replace")(e.error))?;
        sync_dir(&self.dir)?;
        self.data = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.data_path)
            .map_err(io_err(&self.data_path, "open"))?;
        self.index = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.index_path)
            .map_err(io_err(&self.index_path, "open"))?;
        self.data_len = bytes_after;
        self.unsynced = false;
        self.rebuild_index()?;
        tracing::info!(
            file = %self.data_path.display(), blocks_before, blocks_after, bytes_before = stats.bytes_before, bytes_after,
            "compacted the block log"
        );
        Ok(stats)
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        if self.unsynced
            && let Err(e) = self.sync_data()
        {
            tracing::error!(file = %self.data_path.display(), error = %e, "cannot fsync the block log on close");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::blocks::{
        BgTask, BgTaskStatus, EndReason, ErrorBlock, Progress, SessionEnd, StreamedText, ToolCall, ToolResult,
        ToolStatus, UserMessage,
    };

    fn store() -> (tempfile::TempDir, HistoryStore) {
        let tmp = tempfile::tempdir().unwrap();
        let store = HistoryStore::open(tmp.path().join("sessions")).unwrap().with_sync_policy(SyncPolicy::Never);
        (tmp, store)
    }

    fn meta(id: &str) -> SessionMeta {
        SessionMeta::new(id.into(), "echo".into(), "/tmp/work")
    }

    fn at(ts: f64, kind: BlockKind) -> Block {
        Block { seq: None, ts, meta: None, kind }
    }

    fn user(i: u64) -> Block {
        at(1000.0 + i as f64, BlockKind::UserMessage(UserMessage { text: format!("message {i}"), attachments: vec![] }))
    }

    fn text(id: &str, body: &str, done: bool) -> BlockKind {
        BlockKind::Text(StreamedText { id: id.into(), text: body.into(), done })
    }

    fn thinking(id: &str, body: &str, done: bool) -> BlockKind {
        BlockKind::Thinking(StreamedText { id: id.into(), text: body.into(), done })
    }

    fn seqs(blocks: &[Block]) -> Vec<u64> {
        blocks.iter().map(|b| b.seq.unwrap()).collect()
    }

    /// A session with `n` user messages, ts 1001, 1002, …
    fn filled(store: &HistoryStore, id: &str, n: u64) -> SessionLog {
        let mut log = store.create(meta(id)).unwrap();
        for i in 1..=n {
            log.append(user(i)).unwrap();
        }
        log
    }

    fn append_raw(path: &Path, bytes: &[u8]) {
        let mut f = OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn append_assigns_continuous_seqs_that_survive_reopen() {
        let (_tmp, store) = store();
        let mut log = store.create(meta("s1")).unwrap();
        assert_eq!(log.last_seq(), 0);
        for i in 1..=10 {
            let mut b = user(i);
            b.seq = Some(999); // whatever the producer sent is overwritten
            assert_eq!(log.append(b).unwrap().seq, Some(i));
        }
        drop(log);
        let mut log = store.open_session(&"s1".into()).unwrap();
        assert_eq!(log.last_seq(), 10);
        assert_eq!(log.append(user(11)).unwrap().seq, Some(11));
        let all = log.read_all().unwrap();
        assert_eq!(seqs(&all), (1..=11).collect::<Vec<_>>());
        assert_eq!(all[3].kind, user(4).kind);
        assert_eq!(all[3].ts, 1004.0);
    }

    #[test]
    fn append_keeps_ts_and_stamps_missing_ones() {
        let (_tmp, store) = store();
        let mut log = store.create(meta("s1")).unwrap();
        let before = now_ts();
        assert_eq!(log.append(at(1234.5, text("m", "x", true))).unwrap().ts, 1234.5);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let ts = log.append(at(bad, text("m", "x", true))).unwrap().ts;
            assert!(ts >= before && ts.is_finite(), "ts {bad} became {ts}");
        }
        // Stored as the app receives it: ts as a float, seq present.
        let line = fs::read_to_string(log.dir().join(DATA_FILE)).unwrap();
        assert!(line.starts_with(r#"{"seq":1,"ts":1234.5,"type":"text""#), "{line}");
    }

    #[test]
    fn torn_or_garbage_last_line_is_dropped_and_appending_continues() {
        let cases: &[(&str, &[u8])] = &[
            ("torn line", br#"{"seq":6,"ts":1006.0,"type":"user_mess"#),
            ("zero bytes", &[0u8; 300]),
            ("garbage line", b"not json at all\n"),
            ("json but not a block", b"{\"seq\":6}\n"),
            ("block without seq", b"{\"ts\":1.0,\"type\":\"user_message\",\"text\":\"x\"}\n"),
            ("empty line", b"\n"),
        ];
        for (name, tail) in cases {
            let (_tmp, store) = store();
            let log = filled(&store, "s1", 5);
            let data = log.dir().join(DATA_FILE);
            let good_len = log.len_bytes();
            drop(log);
            append_raw(&data, tail);
            let mut log = store.open_session(&"s1".into()).unwrap();
            assert_eq!(fs::metadata(&data).unwrap().len(), good_len, "{name}: tail not cut");
            assert_eq!(log.last_seq(), 5, "{name}");
            assert_eq!(seqs(&log.read_all().unwrap()), vec![1, 2, 3, 4, 5], "{name}");
            assert_eq!(log.append(user(6)).unwrap().seq, Some(6), "{name}");
            drop(log);
            let log = store.open_session(&"s1".into()).unwrap();
            assert_eq!(seqs(&log.read_all().unwrap()), vec![1, 2, 3, 4, 5, 6], "{name}");
            assert_eq!(log.read_since_seq(4).unwrap().len(), 2, "{name}");
        }
    }

    /// Runs `f` with a subscriber that records every log line, and returns them.
    fn capture_logs(f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink(Arc::default());
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = sink.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn recovery_warns_naming_the_file_and_the_bytes_dropped() {
        let (_tmp, store) = store();
        let log = filled(&store, "s1", 3);
        let data = log.dir().join(DATA_FILE);
        drop(log);
        append_raw(&data, b"{\"seq\":4,\"ts\":1.0,");
        let logs = capture_logs(|| drop(store.open_session(&"s1".into()).unwrap()));
        assert!(logs.contains("WARN"), "{logs}");
        assert!(logs.contains(&data.display().to_string()), "{logs}");
        assert!(logs.contains("dropped_bytes=18"), "{logs}");
        assert!(logs.contains("torn last line"), "{logs}");
    }

    /// The environment variable that turns [`kill_child_appends_until_killed`] on.
    const KILL_CHILD_ENV: &str = "TERMINULL_HISTORY_KILL_CHILD";

    /// Not a test on its own: the child process of
    /// [`kill_dash_nine_mid_append_loses_at_most_the_torn_line`], appending large chunks
    /// (250 KB–1 MB lines, so that some `write`s are cut short by the kill) until killed.
    #[test]
    #[ignore = "child process of kill_dash_nine_mid_append_loses_at_most_the_torn_line"]
    fn kill_child_appends_until_killed() {
        let Some(dir) = std::env::var_os(KILL_CHILD_ENV) else { return };
        let store = HistoryStore::open(PathBuf::from(dir)).unwrap().with_sync_policy(SyncPolicy::Never);
        let mut log = store.open_session(&"s1".into()).unwrap();
        for i in 0u64.. {
            let size = (i % 4 + 1) as usize * 250_000;
            log.append(at(1.0 + i as f64, text(&format!("m{}", i / 10), &"z".repeat(size), i % 10 == 9))).unwrap();
        }
    }

    #[test]
    fn kill_dash_nine_mid_append_loses_at_most_the_torn_line() {
        let (_tmp, store) = store();
        let data = store.create(meta("s1")).unwrap().dir().join(DATA_FILE);
        let index = data.with_file_name(INDEX_FILE);
        let exe = std::env::current_exe().unwrap();
        let mut total_torn = 0;
        for round in 0..4 {
            let start_len = fs::metadata(&data).unwrap().len();
            let mut child = std::process::Command::new(&exe)
                .args(["--exact", "history::tests::kill_child_appends_until_killed", "--ignored"])
                .env(KILL_CHILD_ENV, store.sessions_dir())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while fs::metadata(&data).unwrap().len() < start_len + 4_000_000 + round * 777_777 {
                assert!(Instant::now() < deadline, "the child did not append");
                assert!(child.try_wait().unwrap().is_none(), "the child exited");
                std::thread::sleep(Duration::from_millis(2));
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            let killed_len = fs::metadata(&data).unwrap().len();
            let mut log = store.open_session(&"s1".into()).unwrap();
            if log.len_bytes() < killed_len {
                total_torn += 1;
            }
            // Every line left is a whole block, numbered 1, 2, 3, … with no hole.
            let text = fs::read_to_string(&data).unwrap();
            let stored: Vec<u64> = text.lines().map(|l| parse_line(l.as_bytes()).unwrap().seq.unwrap()).collect();
            assert_eq!(stored, (1..=log.last_seq()).collect::<Vec<_>>(), "round {round}");
            assert_eq!(fs::metadata(&index).unwrap().len(), HEADER_LEN + log.last_seq() * INDEX_RECORD_LEN);
            let last = log.last_seq();
            assert_eq!(seqs(&log.read_since_seq(last - 1).unwrap()), vec![last]);
            assert_eq!(log.append(user(0)).unwrap().seq, Some(last + 1));
        }
        // Whether a kill lands mid-write is luck; report it rather than assert it.
        eprintln!("kill -9 tore the last line in {total_torn} of 4 rounds");
    }

    #[test]
    fn torn_line_in_an_otherwise_empty_log_leaves_an_empty_log() {
        let (_tmp, store) = store();
        let log = store.create(meta("s1")).unwrap();
        let data = log.dir().join(DATA_FILE);
        drop(log);
        append_raw(&data, b"{\"seq\":1,\"ts\"");
        let mut log = store.open_session(&"s1".into()).unwrap();
        assert_eq!(log.last_seq(), 0);
        assert_eq!(fs::metadata(&data).unwrap().len(), 0);
        assert_eq!(log.append(user(1)).unwrap().seq, Some(1));
    }

    #[test]
    fn only_the_last_line_is_cut_and_damage_before_it_is_skipped() {
        let (_tmp, store) = store();
        let log = filled(&store, "s1", 3);
        let data = log.dir().join(DATA_FILE);
        drop(log);
        append_raw(&data, b"damaged line\n{\"torn");
        let mut log = store.open_session(&"s1".into()).unwrap();
        assert_eq!(log.last_seq(), 3);
        assert_eq!(log.append(user(4)).unwrap().seq, Some(4));
        assert_eq!(seqs(&log.read_all().unwrap()), vec![1, 2, 3, 4]);
        assert_eq!(seqs(&log.read_since_seq(2).unwrap()), vec![3, 4]);
        assert!(fs::read_to_string(&data).unwrap().contains("damaged line\n"));
    }

    #[test]
    fn a_damaged_index_is_repaired_to_exactly_what_appends_write() {
        type Damage = fn(&Path);
        let cases: &[(&str, Damage)] = &[
            ("missing", |p| fs::remove_file(p).unwrap()),
            ("empty", |p| fs::write(p, b"").unwrap()),
            ("bad header", |p| {
                let mut b = fs::read(p).unwrap();
                b[0] = b'X';
                fs::write(p, b).unwrap();
            }),
            ("header only", |p| fs::write(p, INDEX_MAGIC).unwrap()),
            ("short by 40 records", |p| {
                let f = OpenOptions::new().write(true).open(p).unwrap();
                f.set_len(HEADER_LEN + 60 * INDEX_RECORD_LEN).unwrap();
            }),
            ("torn last record", |p| {
                let len = fs::metadata(p).unwrap().len();
                OpenOptions::new().write(true).open(p).unwrap().set_len(len - 5).unwrap();
            }),
            ("garbage in the middle", |p| {
                let mut b = fs::read(p).unwrap();
                let at = (HEADER_LEN + 50 * INDEX_RECORD_LEN + 3) as usize;
                b[at..at + 40].fill(0xAB);
                fs::write(p, b).unwrap();
            }),
            ("records past the end of the log", |p| {
                let rec = IndexRecord { seq: 101, max_ts: 2000.0, offset: 1 << 40 }.encode();
                append_raw(p, &rec);
                append_raw(p, &rec);
            }),
            ("valid records pointing at the wrong lines", |p| {
                let mut b = fs::read(p).unwrap();
                let last = b.len() - INDEX_RECORD_LEN as usize;
                let rec = IndexRecord { seq: 100, max_ts: 1100.0, offset: 7 }.encode();
                b[last..].copy_from_slice(&rec);
                fs::write(p, b).unwrap();
            }),
        ];
        for (name, damage) in cases {
            let (_tmp, store) = store();
            let log = filled(&store, "s1", 100);
            let index = log.dir().join(INDEX_FILE);
            let want = fs::read(&index).unwrap();
            assert_eq!(want.len() as u64, HEADER_LEN + 100 * INDEX_RECORD_LEN);
            drop(log);
            damage(&index);
            let mut log = store.open_session(&"s1".into()).unwrap();
            assert_eq!(fs::read(&index).unwrap(), want, "{name}: index not repaired");
            assert_eq!(seqs(&log.read_since_seq(97).unwrap()), vec![98, 99, 100], "{name}");
            assert!(!log.index_suspect.load(Ordering::Relaxed), "{name}");
            log.append(user(101)).unwrap();
            assert_eq!(seqs(&log.read_since_seq(99).unwrap()), vec![100, 101], "{name}");
        }
    }

    #[test]
    fn since_seq_returns_exactly_the_blocks_after_it() {
        let (_tmp, store) = store();
        let log = filled(&store, "s1", 20);
        // (since_seq, first seq returned); the range runs to 20, and 21 means nothing.
        let cases: &[(u64, u64)] = &[(0, 1), (1, 2), (10, 11), (19, 20), (20, 21), (21, 21), (u64::MAX, 21)];
        let check = |log: &SessionLog| {
            for (after, first) in cases {
                let got = log.read_since_seq(*after).unwrap();
                assert_eq!(seqs(&got), (*first..=20).collect::<Vec<_>>(), "since_seq {after}");
                for b in &got {
                    assert_eq!(b.ts, 1000.0 + b.seq.unwrap() as f64);
                }
            }
        };
        check(&log);
        drop(log);
        check(&store.open_session(&"s1".into()).unwrap());
        let empty = store.create(meta("empty")).unwrap();
        assert!(empty.read_since_seq(0).unwrap().is_empty());
        assert!(empty.read_since_ts(0.0).unwrap().is_empty());
        assert!(empty.read_all().unwrap().is_empty());
    }

    #[test]
    fn since_ts_returns_exactly_the_blocks_newer_than_it() {
        let (_tmp, store) = store();
        let log = filled(&store, "s1", 20); // ts 1001 ..= 1020
        // (since_ts, first seq returned); the range runs to 20, and 21 means nothing.
        let cases: &[(f64, u64)] = &[
            (-1.0, 1),
            (0.0, 1),
            (1000.99, 1),
            (1001.0, 2),
            (1010.5, 11),
            (1019.0, 20),
            (1020.0, 21),
            (1e12, 21),
            (f64::NAN, 21),
        ];
        for (after, first) in cases {
            assert_eq!(
                seqs(&log.read_since_ts(*after).unwrap()),
                (*first..=20).collect::<Vec<_>>(),
                "since_ts {after}"
            );
        }
    }

    #[test]
    fn since_ts_finds_blocks_whose_clock_went_backwards() {
        let (_tmp, store) = store();
        let mut log = store.create(meta("s1")).unwrap();
        for ts in [10.0, 20.0, 30.0, 15.0, 40.0, 30.0, 50.0] {
            log.append(at(
                ts,
                BlockKind::ToolResult(ToolResult { tool_call_id: "t".into(), output: String::new(), is_error: false }),
            ))
            .unwrap();
        }
        let cases: &[(f64, &[u64])] = &[
            (5.0, &[1, 2, 3, 4, 5, 6, 7]),
            (12.0, &[2, 3, 4, 5, 6, 7]),
            (16.0, &[2, 3, 5, 6, 7]),
            (25.0, &[3, 5, 6, 7]),
            (30.0, &[5, 7]),
            (45.0, &[7]),
            (50.0, &[]),
        ];
        for (after, want) in cases {
            assert_eq!(seqs(&log.read_since_ts(*after).unwrap()), want.to_vec(), "since_ts {after}");
        }
    }

    #[test]
    fn replay_compacts_streams_and_replaced_ids_but_keeps_everything_else() {
        let (_tmp, store) = store();
        let mut log = store.create(meta("s1")).unwrap();
        let mut push = |kind: BlockKind| log.append(at(1.0, kind)).unwrap().seq.unwrap();
        let u = push(BlockKind::UserMessage(UserMessage { text: "go".into(), attachments: vec![] }));
        let mut body = String::new();
        for i in 0..50 {
            body.push_str(&format!("chunk {i} "));
            push(text("m1", &body, false));
            if i == 10 {
                push(thinking("r1", "hmm", false));
                push(BlockKind::Progress(Progress {
                    id: "p1".into(),
                    message: "a".into(),
                    current: Some(1),
                    total: Some(3),
                    done: false,
                }));
            }
        }
        let m1_done = push(text("m1", &body, true));
        let r1_done = push(thinking("r1", "hmm, done", true));
        let call_running = push(BlockKind::ToolCall(ToolCall {
            id: "t1".into(),
            name: "Bash".into(),
            input: serde_json::json!({}),
            status: ToolStatus::Running,
            parent_id: None,
            title: None,
        }));
        let p1_last = push(BlockKind::Progress(Progress {
            id: "p1".into(),
            message: "b".into(),
            current: Some(2),
            total: Some(3),
            done: false,
        }));
        push(BlockKind::BgTask(BgTask {
            id: "b1".into(),
            title: "x".into(),
            status: BgTaskStatus::Running,
            output: None,
        }));
        let b1_last = push(BlockKind::BgTask(BgTask {
            id: "b1".into(),
            title: "x".into(),
            status: BgTaskStatus::Done,
            output: None,
        }));
        let call_done = push(BlockKind::ToolCall(ToolCall {
            id: "t1".into(),
            name: "Bash".into(),
            input: serde_json::json!({}),
            status: ToolStatus::Done,
            parent_id: None,
            title: None,
        }));
        let err = push(BlockKind::Error(ErrorBlock { message: "x".into(), recoverable: true, code: None }));
        // Same id under another type is another stream.
        let m1_thinking = push(thinking("m1", "other", true));
        push(text("m2", "still", false));
        let m2_latest = push(text("m2", "still going", false));
        let end = push(BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None }));

        let want =
            vec![u, m1_done, r1_done, call_running, p1_last, b1_last, call_done, err, m1_thinking, m2_latest, end];
        let all = log.read_all().unwrap();
        assert_eq!(seqs(&all), want);
        let done = all.iter().find(|b| b.seq == Some(m1_done)).unwrap();
        assert_eq!(done.kind, text("m1", &body, true));
        // Resuming in the middle of the stream sends the final text once.
        assert_eq!(seqs(&log.read_since_seq(25).unwrap()), want[1..].to_vec());
        // Resuming after the done chunk sends nothing of m1.
        assert_eq!(seqs(&log.read_since_seq(m1_done).unwrap()), want[2..].to_vec());
        assert_eq!(log.last_seq(), end);
    }

    #[test]
    fn compaction_keeps_only_the_done_chunk_of_fifty() {
        let (_tmp, store) = store();
        let mut log = store.create(meta("s1")).unwrap();
        for i in 1..=50 {
            log.append(at(1.0, text("m1", &"x".repeat(i), false))).unwrap();
        }
        log.append(at(1.0, text("m1", &"x".repeat(50), true))).unwrap();
        let all = log.read_all().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].seq, Some(51));
        assert_eq!(all[0].kind, text("m1", &"x".repeat(50), true));
        assert_eq!(seqs(&log.read_since_seq(10).unwrap()), vec![51]);
        assert_eq!(seqs(&log.read_since_seq(51).unwrap()), Vec::<u64>::new());
    }

    #[test]
    fn seek_reads_only_the_range_not_the_log_before_it() {
        let (_tmp, store) = store();
        let log = filled(&store, "s1", 1000);
        let data = log.dir().join(DATA_FILE);
        drop(log);
        // Overwrite the first three lines with junk of the same length: a scan from the
        // start would have to skip them; a seek never sees them.
        let mut bytes = fs::read(&data).unwrap();
        let mut lines = 0;
        for b in bytes.iter_mut() {
            if *b == b'\n' {
                lines += 1;
                if lines == 3 {
                    break;
                }
            } else {
                *b = b'#';
            }
        }
        fs::write(&data, &bytes).unwrap();
        let log = store.open_session(&"s1".into()).unwrap();
        log.bytes_read.store(0, Ordering::Relaxed);
        let got = log.read_since_seq(995).unwrap();
        assert_eq!(seqs(&got), vec![996, 997, 998, 999, 1000]);
        let tail: u64 = got.iter().map(|b| serde_json::to_vec(b).unwrap().len() as u64 + 1).sum();
        assert_eq!(log.bytes_read.load(Ordering::Relaxed), tail, "read more than the five lines asked for");

        log.bytes_read.store(0, Ordering::Relaxed);
        assert_eq!(log.read_since_ts(1990.5).unwrap().len(), 10);
        assert!(log.bytes_read.load(Ordering::Relaxed) < log.len_bytes() / 50);

        assert_eq!(seqs(&log.read_since_seq(3).unwrap()), (4..=1000).collect::<Vec<_>>());
        // Only a full read meets the damage, and skips it.
        assert_eq!(seqs(&log.read_all().unwrap()), (4..=1000).collect::<Vec<_>>());
    }

    #[test]
    fn an_index_pointing_at_the_wrong_line_falls_back_to_a_scan() {
        let (_tmp, store) = store();
        let mut log = filled(&store, "s1", 50);
        // Damage a record after opening, behind the log's back: checksummed but wrong.
        let index = log.dir().join(INDEX_FILE);
        let mut b = fs::read(&index).unwrap();
        let at = (HEADER_LEN + 30 * INDEX_RECORD_LEN) as usize;
        b[at..at + 32].copy_from_slice(&IndexRecord { seq: 31, max_ts: 1031.0, offset: 0 }.encode());
        fs::write(&index, b).unwrap();
        assert_eq!(seqs(&log.read_since_seq(30).unwrap()), (31..=50).collect::<Vec<_>>());
        assert!(log.index_suspect.load(Ordering::Relaxed));
        log.append(user(51)).unwrap(); // rebuilds first
        assert!(!log.index_suspect.load(Ordering::Relaxed));
        log.bytes_read.store(0, Ordering::Relaxed);
        assert_eq!(seqs(&log.read_since_seq(49).unwrap()), vec![50, 51]);
        assert!(log.bytes_read.load(Ordering::Relaxed) < log.len_bytes() / 10);
    }

    #[test]
    fn compact_rewrites_the_log_without_changing_any_replay() {
        let (_tmp, store) = store();
        let mut log = store.create(meta("s1")).unwrap();
        for turn in 0..5 {
            log.append(user(turn)).unwrap();
            for i in 1..=20 {
                log.append(at(1.0 + i as f64, text(&format!("m{turn}"), &"y".repeat(i * 10), i == 20))).unwrap();
            }
        }
        log.append(at(99.0, text("open", "partial", false))).unwrap();
        log.append(at(99.0, text("open", "partial text", false))).unwrap();
        let last = log.last_seq();
        let before: Vec<Vec<Block>> = (0..=last).map(|s| log.read_since_seq(s).unwrap()).collect();
        let stats = log.compact().unwrap();
        assert_eq!(stats.blocks_before, last);
        assert_eq!(stats.blocks_after, 5 * 2 + 1);
        assert!(stats.bytes_after < stats.bytes_before / 5, "{stats:?}");
        assert_eq!(log.len_bytes(), stats.bytes_after);
        for s in 0..=last {
            assert_eq!(log.read_since_seq(s).unwrap(), before[s as usize], "since_seq {s}");
        }
        assert_eq!(log.append(user(9)).unwrap().seq, Some(last + 1));
        drop(log);
        let log = store.open_session(&"s1".into()).unwrap();
        assert_eq!(log.last_seq(), last + 1);
        assert_eq!(log.read_all().unwrap().len(), 12);
        // Nothing left to drop: a second compaction leaves the file alone.
        let mut log = log;
        let again = log.compact().unwrap();
        assert_eq!(again.blocks_before, again.blocks_after);
    }

    #[test]
    fn bad_session_ids_are_rejected() {
        let (_tmp, store) = store();
        let long = "a".repeat(MAX_SESSION_ID_LEN + 1);
        for bad in ["", ".", "..", "../x", "a/b", "/abs", "a\\b", ".hidden", "a b", "nul\0", "é", long.as_str()] {
            let id = SessionId::from(bad);
            assert!(matches!(store.create(meta(bad)), Err(HistoryError::InvalidSessionId { .. })), "create {bad:?}");
            assert!(matches!(store.open_session(&id), Err(HistoryError::InvalidSessionId { .. })), "open {bad:?}");
            assert!(matches!(store.update_meta(&id, |_| {}), Err(HistoryError::InvalidSessionId { .. })), "{bad:?}");
        }
        let longest = "z".repeat(MAX_SESSION_ID_LEN);
        for good in ["0196f0c2-7b1e-7c3a-9a51-3d1f0e2b4c5d", "a", "A.b_c-1", longest.as_str()] {
            validate_session_id(good).unwrap();
        }
        // Nothing escaped the sessions directory.
        assert_eq!(fs::read_dir(store.sessions_dir()).unwrap().count(), 0);
    }

    #[test]
    fn create_refuses_an_existing_session_and_open_a_missing_one() {
        let (_tmp, store) = store();
        store.create(meta("s1")).unwrap();
        assert!(matches!(store.create(meta("s1")), Err(HistoryError::SessionExists { .. })));
        let e = store.open_session(&"nope".into()).unwrap_err();
        assert!(matches!(e, HistoryError::NoSuchSession { .. }), "{e}");
        assert!(e.to_string().contains("meta.json"), "{e}");
    }

    #[test]
    fn meta_updates_are_atomic_and_survive_a_new_store() {
        let (tmp, store) = store();
        let created = store.create(meta("s1")).unwrap();
        drop(created);
        let dir = store.session_dir(&"s1".into()).unwrap();
        // A crash in the middle of an earlier update left a half-written temporary file.
        fs::write(dir.join(".meta.abc123.tmp"), b"{\"session_id\": \"s1\", \"agent_").unwrap();
        let updated = store
            .update_meta(&"s1".into(), |m| {
                m.agent_session_id = Some("agent-42".into());
                m.title = Some("Fix the parser".into());
                m.session_id = "hijack".into(); // ignored
            })
            .unwrap();
        assert_eq!(updated.session_id.as_str(), "s1");
        assert!(updated.updated_at >= updated.created_at);
        let store2 = HistoryStore::open(tmp.path().join("sessions")).unwrap();
        let read = store2.meta(&"s1".into()).unwrap();
        assert_eq!(read, updated);
        assert_eq!(read.agent_session_id, Some("agent-42".into()));
        assert_eq!(store2.list().unwrap(), vec![updated]);
        // meta.json is whole JSON, never a mix.
        let text = fs::read_to_string(dir.join(META_FILE)).unwrap();
        serde_json::from_str::<SessionMeta>(&text).unwrap();
    }

    #[test]
    fn list_skips_malformed_session_directories() {
        let (_tmp, store) = store();
        let mut a = meta("a");
        a.created_at = 1.0;
        let mut b = meta("b");
        b.created_at = 2.0;
        store.create(b).unwrap();
        store.create(a).unwrap();
        let root = store.sessions_dir();
        fs::create_dir(root.join("no-meta")).unwrap();
        fs::create_dir(root.join("garbage")).unwrap();
        fs::write(root.join("garbage").join(META_FILE), b"{not json").unwrap();
        fs::create_dir(root.join("other")).unwrap();
        let mut wrong = meta("someone-else");
        wrong.created_at = 0.5;
        fs::write(root.join("other").join(META_FILE), serde_json::to_vec(&wrong).unwrap()).unwrap();
        fs::create_dir(root.join(".hidden")).unwrap();
        fs::write(root.join("stray-file"), b"x").unwrap();
        let ids: Vec<String> = store.list().unwrap().into_iter().map(|m| m.session_id.0).collect();
        assert_eq!(ids, vec!["a", "b"]);
        let e = store.meta(&"garbage".into()).unwrap_err();
        assert!(matches!(e, HistoryError::BadMeta { .. }) && e.to_string().contains("garbage"), "{e}");
        assert!(matches!(store.meta(&"other".into()), Err(HistoryError::MetaMismatch { .. })));
    }

    #[test]
    fn resumable_sessions_are_active_with_an_agent_session_id() {
        let (_tmp, store) = store();
        for (i, (id, agent_session, state)) in [
            ("resumable", Some("a1"), SessionState::Active),
            ("no-agent-id", None, SessionState::Active),
            ("stopped", Some("a3"), SessionState::Stopped),
            ("also-resumable", Some("a4"), SessionState::Active),
        ]
        .into_iter()
        .enumerate()
        {
            let mut m = meta(id);
            m.created_at = i as f64;
            m.agent_session_id = agent_session.map(AgentSessionId::from);
            m.state = state;
            store.create(m).unwrap();
        }
        let ids: Vec<String> = store.resumable_session_ids().unwrap().into_iter().map(|s| s.0).collect();
        assert_eq!(ids, vec!["resumable", "also-resumable"]);
        store.update_meta(&"resumable".into(), |m| m.state = SessionState::Stopped).unwrap();
        store.update_meta(&"no-agent-id".into(), |m| m.agent_session_id = Some("a2".into())).unwrap();
        let ids: Vec<String> = store.resumable_session_ids().unwrap().into_iter().map(|s| s.0).collect();
        assert_eq!(ids, vec!["no-agent-id", "also-resumable"]);
    }

    #[test]
    fn sync_policy_fsyncs_at_boundaries_and_at_most_every_interval() {
        let policy = SyncPolicy::Boundaries { max_interval: Duration::from_millis(500) };
        let chunk = text("m", "x", false);
        let end = BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None });
        let user_msg = BlockKind::UserMessage(UserMessage { text: "x".into(), attachments: vec![] });
        let error = BlockKind::Error(ErrorBlock { message: "x".into(), recoverable: false, code: None });
        let ms = Duration::from_millis;
        let cases: &[(SyncPolicy, &BlockKind, Duration, bool)] = &[
            (policy, &chunk, ms(0), false),
            (policy, &chunk, ms(499), false),
            (policy, &chunk, ms(500), true),
            (policy, &text("m", "x", true), ms(10), false),
            (policy, &end, ms(0), true),
            (policy, &user_msg, ms(0), true),
            (policy, &error, ms(0), true),
            (SyncPolicy::Never, &end, ms(10_000), false),
            (SyncPolicy::EveryBlock, &chunk, ms(0), true),
        ];
        for (policy, kind, elapsed, want) in cases {
            assert_eq!(sync_due(*policy, kind, *elapsed), *want, "{policy:?} {} after {elapsed:?}", kind.block_type());
        }
        assert_eq!(SyncPolicy::default(), SyncPolicy::Boundaries { max_interval: DEFAULT_SYNC_INTERVAL });
    }

    #[test]
    fn appends_under_each_policy_leave_nothing_unsynced_at_boundaries() {
        let tmp = tempfile::tempdir().unwrap();
        for policy in [SyncPolicy::default(), SyncPolicy::EveryBlock, SyncPolicy::Never] {
            let store = HistoryStore::open(tmp.path().join(format!("{policy:?}"))).unwrap().with_sync_policy(policy);
            let mut log = store.create(meta("s1")).unwrap();
            log.append(at(1.0, text("m", "x", false))).unwrap();
            assert_eq!(log.unsynced, policy == SyncPolicy::Never || policy == SyncPolicy::default());
            log.append(at(
                1.0,
                BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None }),
            ))
            .unwrap();
            assert_eq!(log.unsynced, policy == SyncPolicy::Never);
            log.sync_if_due().unwrap();
            log.close().unwrap();
        }
    }

    #[test]
    fn index_records_round_trip_and_reject_garbage() {
        let rec = IndexRecord { seq: 7, max_ts: 1767225600.25, offset: 12345 };
        assert_eq!(IndexRecord::decode(&rec.encode()), Some(rec));
        let mut bad = rec.encode();
        bad[3] ^= 1;
        assert_eq!(IndexRecord::decode(&bad), None);
        assert_eq!(IndexRecord::decode(&[0u8; 32]), None);
    }
}
