//! Finding an agent's session files and describing them for a scan: where the agent
//! keeps its state, which session ids are safe to put into a path, bounded directory
//! walks, and the listing made from a file's head.
//!
//! Session files are untrusted input: every walk and read here is bounded.

use std::path::{Path, PathBuf};

use serde_json::Value;
use terminull_protocol::adapter::ExternalSession;

use crate::AdapterError;

/// The most session files one scan looks at.
pub const MAX_SCANNED_FILES: usize = 2000;

/// The longest title of a listed session, in characters.
pub const TITLE_CHARS: usize = 80;

/// Where an agent keeps its state: `$<env>` when set and not empty, else `~/<under_home>`.
#[derive(Debug, Clone, Copy)]
pub struct AgentHome {
    /// The variable that moves it (`CODEX_HOME`), when the agent has one.
    pub env: Option<&'static str>,
    /// Its place under `$HOME` (`.codex`).
    pub under_home: &'static str,
}

impl AgentHome {
    /// The directory; `None` without the variable or `HOME`.
    pub fn find(&self) -> Option<PathBuf> {
        if let Some(dir) = self.env.and_then(std::env::var_os).filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(self.under_home))
    }

    /// The directory, or an error saying which variables are missing.
    pub fn require(&self) -> Result<PathBuf, AdapterError> {
        self.find().ok_or_else(|| match self.env {
            Some(env) => AdapterError::agent(format!("neither {env} nor HOME is set")),
            None => AdapterError::agent("HOME is not set"),
        })
    }
}

/// What an agent's session ids look like. An id from the bridge goes into a file path,
/// a query or a command line, so it is checked first: ASCII letters, digits and `-`
/// (and `_` where the agent uses it), within length bounds; nothing that could leave a
/// directory or end an argument.
#[derive(Debug, Clone, Copy)]
pub struct SessionIds {
    /// How an error names one, with its article: "a Codex thread id".
    pub name: &'static str,
    /// The fewest characters.
    pub min: usize,
    /// The most characters.
    pub max: usize,
    /// Whether `_` may appear.
    pub underscore: bool,
}

impl SessionIds {
    /// 1 to 128 ASCII letters, digits and `-` (UUIDs and the like), named `name`.
    pub const fn named(name: &'static str) -> Self {
        Self { name, min: 1, max: 128, underscore: false }
    }

    /// True when `id` is one.
    pub fn is_valid(&self, id: &str) -> bool {
        (self.min.max(1)..=self.max).contains(&id.len())
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || (self.underscore && c == '_'))
    }

    /// `id` when it is one, else an `invalid` error naming it.
    pub fn check<'a>(&self, id: &'a str) -> Result<&'a str, AdapterError> {
        if self.is_valid(id) { Ok(id) } else { Err(AdapterError::invalid(format!("`{id}` is not {}", self.name))) }
    }
}

/// The directory name Claude Code and Droid give a working directory's sessions: every
/// character but `a-z A-Z 0-9` as `-`.
pub fn dashed_dir_name(cwd: &str) -> String {
    cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// The file `name` in `dir`, else in any directory right under `base`: an agent that
/// files sessions by a directory name made from the cwd may make it otherwise than we
/// guess (a symlinked or renamed cwd).
pub fn file_here_or_below(dir: &Path, base: &Path, name: &str) -> Option<PathBuf> {
    let direct = dir.join(name);
    if direct.is_file() {
        return Some(direct);
    }
    files_with_suffix(base, name, 1, MAX_SCANNED_FILES)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == name))
}

/// The `.jsonl` files in `base`'s directory `dir_name` (a directory per cwd), or in
/// every directory right under `base` without one.
pub fn jsonl_files(base: &Path, dir_name: Option<&str>) -> Vec<PathBuf> {
    match dir_name {
        Some(dir) => files_with_suffix(&base.join(dir), ".jsonl", 0, MAX_SCANNED_FILES),
        None => files_with_suffix(base, ".jsonl", 1, MAX_SCANNED_FILES),
    }
}

/// What a scan learned of one session from its file's head (see
/// [`read_head`](super::read_head)); [`Self::listing`] makes its entry.
#[derive(Debug, Clone, Default)]
pub struct Described {
    /// The session id the file names.
    pub id: Option<String>,
    /// The directory the session ran in.
    pub cwd: Option<String>,
    /// The title (the first prompt, say), already shortened.
    pub title: Option<String>,
    /// The messages counted.
    pub messages: u64,
}

impl Described {
    /// The listing of the session file at `path`: its head (the first `bytes`, see
    /// [`read_head`](super::read_head)) read record by record into `note`, then
    /// [`Self::listing`].
    pub fn from_head(
        path: &Path,
        bytes: usize,
        ids: &SessionIds,
        mut note: impl FnMut(&mut Self, &Value),
    ) -> Option<ExternalSession> {
        let head = super::read_head(path, bytes)?;
        let mut found = Self::default();
        for (_, record) in &head.records {
            note(&mut found, record);
        }
        found.listing(ids, path, head.whole)
    }

    /// Takes the id and directory from a session's header record (its `id` and `cwd`)
    /// when no earlier record gave them; true when it did.
    pub fn header(&mut self, header: &Value) -> bool {
        if self.id.is_some() {
            return false;
        }
        self.id = header.get("id").and_then(Value::as_str).map(str::to_owned);
        self.cwd = header.get("cwd").and_then(Value::as_str).map(str::to_owned);
        true
    }

    /// The listing of the session in the file at `path`, when the head named an id
    /// `ids` accepts. The message count is given only when `whole` (the head was the
    /// whole file): for a longer session it would be wrong.
    pub fn listing(self, ids: &SessionIds, path: &Path, whole: bool) -> Option<ExternalSession> {
        let id = self.id.filter(|id| ids.is_valid(id))?;
        Some(ExternalSession {
            agent_session_id: id.into(),
            cwd: self.cwd,
            title: self.title,
            updated_at: mtime_secs(path),
            message_count: whole.then_some(self.messages),
        })
    }
}

/// The first `max` characters of `text` on one line, for titles.
pub fn title_of(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// Modification time of `path` as Unix seconds (0 when unknown).
pub fn mtime_secs(path: &Path) -> f64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Files under `dir` (recursing at most `depth` levels) whose name ends with `suffix`,
/// at most `max` of them.
pub fn files_with_suffix(dir: &Path, suffix: &str, depth: usize, max: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, level)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() && level < depth {
                stack.push((path, level + 1));
            } else if kind.is_file() && path.file_name().is_some_and(|n| n.to_string_lossy().ends_with(suffix)) {
                out.push(path);
                if out.len() >= max {
                    return out;
                }
            }
        }
    }
    out
}
