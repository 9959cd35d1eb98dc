//! The `git` control message: the working tree's changes, recent commits, staging,
//! committing, discarding a file's changes and switching branches in the repository
//! that holds a session's directory (docs/files-and-git.md).
//!
//! The bridge runs the user's `git` binary in the session's directory. Paths in
//! requests and replies are relative to the repository's top level (as
//! `git status --porcelain` prints them) and may not contain `..` parts or be
//! absolute. Every reply is bounded (diffs cut at [`MAX_DIFF_BYTES`], lists at
//! [`MAX_STATUS_ENTRIES`], [`MAX_LOG_COMMITS`], [`MAX_BRANCHES`]); git's own output in
//! an error is cut at [`MAX_GIT_OUTPUT_BYTES`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most bytes of one file's diff a `diff` returns (`truncated` says when cut).
pub const MAX_DIFF_BYTES: usize = 256 * 1024;
/// Most entries a `status` returns.
pub const MAX_STATUS_ENTRIES: usize = 2000;
/// Most commits a `log` returns (also the cap on its `limit`).
pub const MAX_LOG_COMMITS: u32 = 200;
/// Commits a `log` returns when it gives no `limit`.
pub const DEFAULT_LOG_COMMITS: u32 = 30;
/// Most branches a `branches` returns.
pub const MAX_BRANCHES: usize = 500;
/// Most paths one `stage` or `unstage` names.
pub const MAX_PATHS: usize = 1000;
/// Most bytes of git's output (a hook's, an error's) carried in a reply or an error.
pub const MAX_GIT_OUTPUT_BYTES: usize = 16 * 1024;
/// Longest commit message accepted.
pub const MAX_COMMIT_MESSAGE_BYTES: usize = 64 * 1024;

/// What a `git` request asks, tagged by `op`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum GitRequest {
    /// The working tree's changes (`git status --porcelain`).
    Status {},
    /// One file's unified diff: the working tree against the index (`git diff`), the
    /// index against HEAD when `staged` (`git diff --cached`); an untracked file is
    /// shown as all added.
    Diff {
        /// The file, relative to the repository's top level.
        path: String,
        /// The staged changes instead of the unstaged ones.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        staged: bool,
    },
    /// Recent commits on HEAD, newest first.
    Log {
        /// Most commits wanted (default [`DEFAULT_LOG_COMMITS`], at most [`MAX_LOG_COMMITS`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
    },
    /// Stage paths (`git add`).
    Stage {
        /// The paths, relative to the repository's top level.
        paths: Vec<String>,
    },
    /// Unstage paths (`git restore --staged`).
    Unstage {
        /// The paths, relative to the repository's top level.
        paths: Vec<String>,
    },
    /// Commit what is staged, with the user's identity, config and hooks.
    Commit {
        /// The commit message.
        message: String,
    },
    /// Throw away one file's changes, staged and unstaged (an untracked file is
    /// deleted). Irreversible: the app asks the user first and says so here.
    Discard {
        /// The file, relative to the repository's top level.
        path: String,
        /// Must be true: the user confirmed. False is refused (`invalid_message`).
        confirmed: bool,
    },
    /// The local branches.
    Branches {},
    /// Switch to a local branch; refused while the working tree has changes to
    /// tracked files.
    Switch {
        /// The branch's name.
        branch: String,
    },
}

impl GitRequest {
    /// The wire value of `op`.
    pub fn op(&self) -> &'static str {
        match self {
            GitRequest::Status {} => "status",
            GitRequest::Diff { .. } => "diff",
            GitRequest::Log { .. } => "log",
            GitRequest::Stage { .. } => "stage",
            GitRequest::Unstage { .. } => "unstage",
            GitRequest::Commit { .. } => "commit",
            GitRequest::Discard { .. } => "discard",
            GitRequest::Branches {} => "branches",
            GitRequest::Switch { .. } => "switch",
        }
    }
}

/// What a `git` request produced, tagged by `op` (the request's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum GitResult {
    /// The working tree's changes.
    Status {
        /// The current branch; absent on a detached HEAD.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        /// An operation in progress that a commit or switch would run into (`merge`,
        /// `rebase`, `cherry-pick`, `revert`, `bisect`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_progress: Option<String>,
        /// The changed paths, in git's order.
        entries: Vec<StatusEntry>,
        /// True when there were more than [`MAX_STATUS_ENTRIES`].
        truncated: bool,
    },
    /// One file's diff.
    Diff {
        /// The file.
        path: String,
        /// Whether it is the staged diff.
        staged: bool,
        /// Unified diff text as `git diff` prints it (no color); empty: no changes.
        diff: String,
        /// True when cut at [`MAX_DIFF_BYTES`].
        truncated: bool,
    },
    /// Recent commits.
    Log {
        /// Newest first.
        commits: Vec<CommitInfo>,
        /// True when HEAD has more commits than returned.
        truncated: bool,
    },
    /// `stage`, `unstage`, `discard` or `switch` was done.
    Done {
        /// What git printed, cut at [`MAX_GIT_OUTPUT_BYTES`] (often empty).
        output: String,
    },
    /// A commit was made.
    Committed {
        /// The new commit's hash.
        commit: String,
        /// What git (and its hooks) printed, cut at [`MAX_GIT_OUTPUT_BYTES`].
        output: String,
    },
    /// The local branches.
    Branches {
        /// By name; the current one has `current`.
        branches: Vec<BranchInfo>,
        /// True when there were more than [`MAX_BRANCHES`].
        truncated: bool,
    },
}

/// One changed path, as a line of `git status --porcelain` says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StatusEntry {
    /// The index's status letter (`M`, `A`, `D`, `R`, `C`, `U`, `?`, `!` or space).
    pub index: String,
    /// The working tree's status letter (same letters).
    pub worktree: String,
    /// The path, relative to the repository's top level.
    pub path: String,
    /// For a rename or copy, where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orig_path: Option<String>,
}

/// One commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CommitInfo {
    /// The full hash.
    pub commit: String,
    /// The author's name.
    pub author: String,
    /// Author time, Unix seconds.
    pub time: i64,
    /// The first line of the message (cut at 200 characters).
    pub subject: String,
}

/// One local branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct BranchInfo {
    /// Its name.
    pub name: String,
    /// True for the checked-out branch.
    pub current: bool,
    /// Its upstream, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
}
