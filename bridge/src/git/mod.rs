//! The `git` control message, through the user's `git` binary (docs/files-and-git.md
//! says why: exactly the user's git, config and hooks), bounded in time and output
//! ([`run`]), with git's refusals said in plain words ([`GitError`]).

use std::path::{Path, PathBuf};

use terminull_protocol::control::{ReplyError, ReplyErrorCode};
use terminull_protocol::git::{
    DEFAULT_LOG_COMMITS, GitRequest, GitResult, MAX_COMMIT_MESSAGE_BYTES, MAX_LOG_COMMITS, MAX_PATHS,
};

mod ops;
pub mod run;

pub use run::GIT_TIMEOUT;

/// Why a `git` request failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The directory is not in a git repository.
    #[error("`{0}` is not in a git repository")]
    NotARepository(String),
    /// git refused or failed; the message is plain and carries git's words.
    #[error("{0}")]
    Failed(String),
    /// A path was refused (confinement) or not found.
    #[error(transparent)]
    Path(#[from] crate::files::FilesError),
    /// The working tree has changes that forbid the operation.
    #[error("{0}")]
    Conflict(String),
    /// No such branch.
    #[error("{0}")]
    NotFound(String),
    /// A malformed request.
    #[error("{0}")]
    Invalid(String),
    /// `git` could not be run.
    #[error("could not run git: {0} (is git installed and on the bridge's PATH?)")]
    Spawn(String),
    /// git ran past its deadline and was stopped.
    #[error("git {op} did not finish within {secs} s and was stopped")]
    Timeout {
        /// The git command.
        op: String,
        /// The deadline.
        secs: u64,
    },
}

impl From<GitError> for ReplyError {
    fn from(e: GitError) -> Self {
        let code = match &e {
            GitError::Path(p) => p.code(),
            GitError::Conflict(_) => ReplyErrorCode::Conflict,
            GitError::NotFound(_) => ReplyErrorCode::NotFound,
            GitError::Invalid(_) => ReplyErrorCode::InvalidMessage,
            GitError::NotARepository(_) | GitError::Failed(_) | GitError::Spawn(_) | GitError::Timeout { .. } => {
                ReplyErrorCode::GitFailed
            }
        };
        ReplyError { code, message: e.to_string() }
    }
}

/// A repository as seen from a session's directory.
#[derive(Debug)]
pub struct Repo {
    /// The session's directory (git runs there).
    pub cwd: PathBuf,
    /// The repository's top level (paths are relative to it).
    pub top: PathBuf,
    /// Its git directory.
    pub git_dir: PathBuf,
}

impl Repo {
    /// The repository holding `cwd`.
    pub async fn find(cwd: &Path) -> Result<Self, GitError> {
        let out = run::git(cwd, &["rev-parse", "--show-toplevel", "--absolute-git-dir"], 64 * 1024).await?;
        if !out.ok() {
            if out.stderr.contains("not a git repository") {
                return Err(GitError::NotARepository(cwd.display().to_string()));
            }
            return Err(GitError::Failed(format!("git could not open the repository: {}", out.said())));
        }
        let text = out.text();
        let mut lines = text.lines();
        let (Some(top), Some(git_dir)) = (lines.next(), lines.next()) else {
            return Err(GitError::NotARepository(cwd.display().to_string()));
        };
        Ok(Self { cwd: cwd.to_path_buf(), top: PathBuf::from(top), git_dir: PathBuf::from(git_dir) })
    }

    /// Runs git in the session's directory.
    pub async fn git(&self, args: &[&str], max_stdout: usize) -> Result<run::Output, GitError> {
        run::git(&self.cwd, args, max_stdout).await
    }

    /// The operation in progress, from the git directory's marker files.
    pub fn in_progress(&self) -> Option<String> {
        let markers = [
            ("MERGE_HEAD", "merge"),
            ("rebase-merge", "rebase"),
            ("rebase-apply", "rebase"),
            ("CHERRY_PICK_HEAD", "cherry-pick"),
            ("REVERT_HEAD", "revert"),
            ("BISECT_LOG", "bisect"),
        ];
        markers.iter().find(|(file, _)| self.git_dir.join(file).exists()).map(|(_, what)| (*what).to_owned())
    }
}

/// A path of a request as a literal pathspec from the top level, checked lexically
/// (relative, no `..`, no NUL).
pub fn pathspec(path: &str) -> Result<String, GitError> {
    let rel = crate::files::confine::relative(path)?;
    let rel = rel.to_string_lossy();
    if rel.is_empty() {
        return Err(GitError::Invalid("a path is empty; name a file".into()));
    }
    Ok(format!(":(top,literal){rel}"))
}

/// Answers one `git` request for the session whose directory is `cwd`.
pub async fn handle(cwd: &Path, request: GitRequest) -> Result<GitResult, GitError> {
    let repo = Repo::find(cwd).await?;
    match request {
        GitRequest::Status {} => ops::status(&repo).await,
        GitRequest::Diff { path, staged } => ops::diff(&repo, &path, staged).await,
        GitRequest::Log { limit } => {
            ops::log(&repo, limit.unwrap_or(DEFAULT_LOG_COMMITS).clamp(1, MAX_LOG_COMMITS) as usize).await
        }
        GitRequest::Stage { paths } => ops::stage(&repo, &checked_paths(&paths)?).await,
        GitRequest::Unstage { paths } => ops::unstage(&repo, &checked_paths(&paths)?).await,
        GitRequest::Commit { message } => {
            if message.trim().is_empty() {
                return Err(GitError::Invalid("the commit message is empty".into()));
            }
            if message.len() > MAX_COMMIT_MESSAGE_BYTES {
                return Err(GitError::Invalid(format!(
                    "the commit message is longer than {MAX_COMMIT_MESSAGE_BYTES} bytes"
                )));
            }
            ops::commit(&repo, &message).await
        }
        GitRequest::Discard { path, confirmed } => {
            if !confirmed {
                return Err(GitError::Invalid(
                    "discarding a file's changes cannot be undone: send `confirmed: true` once the user agreed".into(),
                ));
            }
            ops::discard(&repo, &path).await
        }
        GitRequest::Branches {} => ops::branches(&repo).await,
        GitRequest::Switch { branch } => ops::switch(&repo, &branch).await,
    }
}

fn checked_paths(paths: &[String]) -> Result<Vec<String>, GitError> {
    if paths.is_empty() {
        return Err(GitError::Invalid("no paths given".into()));
    }
    if paths.len() > MAX_PATHS {
        return Err(GitError::Invalid(format!("{} paths given; at most {MAX_PATHS} at once", paths.len())));
    }
    paths.iter().map(|p| pathspec(p)).collect()
}
