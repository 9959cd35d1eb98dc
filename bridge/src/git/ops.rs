//! Each `git` operation: the git commands it runs and how their output is read.

use terminull_protocol::files::MAX_REPLY_BYTES;
use terminull_protocol::git::{
    BranchInfo, CommitInfo, GitResult, MAX_BRANCHES, MAX_DIFF_BYTES, MAX_STATUS_ENTRIES, StatusEntry,
};

use super::run::Output;
use super::{GitError, Repo, pathspec};

/// Standard output bound for commands whose output is not the reply itself.
const SMALL: usize = 64 * 1024;

/// What a failed git command means, in plain words, with git's (and a hook's) own.
async fn failed(repo: &Repo, op: &str, out: &Output) -> GitError {
    let said = out.said();
    let status = out.code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit status {c}"));
    let lower = said.to_lowercase();
    if lower.contains("please tell me who you are")
        || lower.contains("author identity unknown")
        || lower.contains("empty ident name")
        || lower.contains("unable to auto-detect email address")
    {
        return GitError::Failed(format!(
            "git has no identity to commit with on the bridge's machine: set one with \
             `git config --global user.name \"Your Name\"` and `git config --global user.email you@example.com`. \
             git said:\n{said}"
        ));
    }
    let in_progress = repo.in_progress().map(|what| format!(" (a {what} is in progress)")).unwrap_or_default();
    if op == "commit" {
        if lower.contains("nothing to commit") || lower.contains("no changes added to commit") {
            return GitError::Failed(format!("nothing is staged to commit: stage files first{in_progress}"));
        }
        let mut hooks = Vec::new();
        for hook in ["pre-commit", "commit-msg"] {
            if hook_exists(repo, hook).await {
                hooks.push(hook);
            }
        }
        if !hooks.is_empty() {
            let which = hooks.join(" or ");
            let said = if said.is_empty() { "(nothing)".to_owned() } else { said };
            return GitError::Failed(format!(
                "the commit was refused by the repository's {which} hook ({status}); it said:\n{said}"
            ));
        }
    }
    if lower.contains("you need to resolve your current index first") || lower.contains("unmerged") {
        return GitError::Failed(format!(
            "git {op} failed{in_progress}: resolve the conflicts first. git said:\n{said}"
        ));
    }
    GitError::Failed(format!("git {op} failed ({status}){in_progress}: {said}"))
}

/// True when the repository has an executable `hook` (honouring `core.hooksPath`).
async fn hook_exists(repo: &Repo, hook: &str) -> bool {
    let Ok(out) = repo.git(&["rev-parse", "--git-path", &format!("hooks/{hook}")], SMALL).await else {
        return false;
    };
    let path = out.text().trim().to_owned();
    let path = repo.cwd.join(path);
    std::fs::metadata(&path)
        .is_ok_and(|m| m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
}

async fn has_head(repo: &Repo) -> Result<bool, GitError> {
    Ok(repo.git(&["rev-parse", "-q", "--verify", "HEAD"], SMALL).await?.ok())
}

/// Runs a command that must succeed; its output (for a person) on success.
async fn must(repo: &Repo, op: &str, args: &[&str]) -> Result<Output, GitError> {
    let out = repo.git(args, SMALL).await?;
    if out.ok() { Ok(out) } else { Err(failed(repo, op, &out).await) }
}

/// Splits `git status --porcelain=v1 -z` output into entries.
fn parse_status(bytes: &[u8]) -> Vec<StatusEntry> {
    let mut entries = Vec::new();
    let mut records = bytes.split(|b| *b == 0).filter(|r| !r.is_empty());
    while let Some(record) = records.next() {
        let text = String::from_utf8_lossy(record);
        if text.len() < 4 || !text.is_char_boundary(3) {
            continue;
        }
        let (index, worktree, path) = (text[0..1].to_owned(), text[1..2].to_owned(), text[3..].to_owned());
        let orig_path = if index == "R" || index == "C" {
            records.next().map(|r| String::from_utf8_lossy(r).into_owned())
        } else {
            None
        };
        entries.push(StatusEntry { index, worktree, path, orig_path });
    }
    entries
}

async fn status_entries(repo: &Repo, extra: &[&str]) -> Result<(Vec<StatusEntry>, bool), GitError> {
    let mut args = vec!["status", "--porcelain=v1", "-z"];
    args.extend_from_slice(extra);
    let out = repo.git(&args, MAX_REPLY_BYTES / 2).await?;
    if !out.ok() && !out.stdout_cut {
        return Err(failed(repo, "status", &out).await);
    }
    let mut entries = parse_status(&out.stdout);
    let mut truncated = out.stdout_cut;
    if out.stdout_cut {
        // The last record may be cut.
        entries.pop();
    }
    if entries.len() > MAX_STATUS_ENTRIES {
        entries.truncate(MAX_STATUS_ENTRIES);
        truncated = true;
    }
    Ok((entries, truncated))
}

pub async fn status(repo: &Repo) -> Result<GitResult, GitError> {
    let (entries, truncated) = status_entries(repo, &[]).await?;
    let head = repo.git(&["symbolic-ref", "--short", "-q", "HEAD"], SMALL).await?;
    let branch = head.ok().then(|| head.text().trim().to_owned()).filter(|b| !b.is_empty());
    Ok(GitResult::Status { branch, in_progress: repo.in_progress(), entries, truncated })
}

/// Cuts diff output at a character boundary.
fn diff_text(out: &Output) -> (String, bool) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let cut = crate::files::cut(&text, MAX_DIFF_BYTES);
    let truncated = out.stdout_cut || cut.len() != text.len();
    (if truncated { cut.trim_end_matches('…').to_owned() } else { text }, truncated)
}

pub async fn diff(repo: &Repo, path: &str, staged: bool) -> Result<GitResult, GitError> {
    let spec = pathspec(path)?;
    let common = ["--no-color", "--no-ext-diff", "--no-textconv"];
    let result = |(diff, truncated)| GitResult::Diff { path: path.to_owned(), staged, diff, truncated };
    if !staged {
        let (entries, _) = status_entries(repo, &["--", &spec]).await?;
        if entries.iter().any(|e| e.index == "?" && e.path == path) {
            // Untracked: all added, from the file itself, which must lie inside the repository.
            let root = crate::files::confine::Root::new(&repo.top)?;
            let resolved = root.resolve(path)?;
            root.open_file(path, &resolved)?;
            let mut args = vec!["diff", "--no-index"];
            args.extend_from_slice(&common);
            args.extend_from_slice(&["--", "/dev/null", &resolved.rel]);
            let out = super::run::git(&repo.top, &args, MAX_DIFF_BYTES + 1).await?;
            // `--no-index` exits 1 when the files differ.
            if !matches!(out.code, Some(0 | 1)) && !out.stdout_cut {
                return Err(failed(repo, "diff", &out).await);
            }
            return Ok(result(diff_text(&out)));
        }
    }
    let mut args = vec!["diff"];
    if staged {
        args.push("--cached");
    }
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--", &spec]);
    let out = repo.git(&args, MAX_DIFF_BYTES + 1).await?;
    if !out.ok() && !out.stdout_cut {
        return Err(failed(repo, "diff", &out).await);
    }
    Ok(result(diff_text(&out)))
}

pub async fn log(repo: &Repo, limit: usize) -> Result<GitResult, GitError> {
    if !has_head(repo).await? {
        return Ok(GitResult::Log { commits: Vec::new(), truncated: false });
    }
    let n = format!("-n{}", limit + 1);
    let out = must(repo, "log", &["log", &n, "--format=%H%x00%an%x00%at%x00%s%x1e"]).await?;
    let text = out.text();
    let mut commits: Vec<CommitInfo> = text
        .split('\x1e')
        .filter_map(|record| {
            let mut fields = record.trim_start_matches('\n').splitn(4, '\0');
            let commit = fields.next()?.to_owned();
            let author = fields.next()?.to_owned();
            let time = fields.next()?.parse().ok()?;
            let subject = crate::files::cut(fields.next()?, 200);
            Some(CommitInfo { commit, author, time, subject })
        })
        .collect();
    let truncated = commits.len() > limit;
    commits.truncate(limit);
    Ok(GitResult::Log { commits, truncated })
}

fn done(out: Output) -> GitResult {
    GitResult::Done { output: out.said() }
}

pub async fn stage(repo: &Repo, specs: &[String]) -> Result<GitResult, GitError> {
    let mut args = vec!["add", "--"];
    args.extend(specs.iter().map(String::as_str));
    Ok(done(must(repo, "add", &args).await?))
}

pub async fn unstage(repo: &Repo, specs: &[String]) -> Result<GitResult, GitError> {
    let mut args = if has_head(repo).await? {
        vec!["restore", "--staged", "--"]
    } else {
        // Before the first commit there is no HEAD to restore from.
        vec!["rm", "--cached", "-q", "-r", "--"]
    };
    args.extend(specs.iter().map(String::as_str));
    Ok(done(must(repo, "unstage", &args).await?))
}

pub async fn commit(repo: &Repo, message: &str) -> Result<GitResult, GitError> {
    let out = must(repo, "commit", &["commit", "-m", message]).await?;
    let head = must(repo, "rev-parse", &["rev-parse", "HEAD"]).await?;
    Ok(GitResult::Committed { commit: head.text().trim().to_owned(), output: out.said() })
}

pub async fn discard(repo: &Repo, path: &str) -> Result<GitResult, GitError> {
    let spec = pathspec(path)?;
    let (entries, _) = status_entries(repo, &["--", &spec]).await?;
    let Some(entry) = entries.first() else {
        return Err(GitError::NotFound(format!("`{}` has no changes to discard", crate::files::cut(path, 200))));
    };
    if entry.index == "?" {
        return Ok(done(must(repo, "clean", &["clean", "-f", "-d", "-q", "--", &spec]).await?));
    }
    let in_head =
        has_head(repo).await? && repo.git(&["cat-file", "-e", &format!("HEAD:{}", entry.path)], SMALL).await?.ok();
    if in_head {
        return Ok(done(
            must(repo, "restore", &["restore", "--source=HEAD", "--staged", "--worktree", "--", &spec]).await?,
        ));
    }
    // Added since HEAD: forget it and remove the file.
    must(repo, "rm", &["rm", "--cached", "-q", "-f", "--", &spec]).await?;
    Ok(done(must(repo, "clean", &["clean", "-f", "-q", "--", &spec]).await?))
}

pub async fn branches(repo: &Repo) -> Result<GitResult, GitError> {
    let count = format!("--count={}", MAX_BRANCHES + 1);
    let format = "--format=%(HEAD)%00%(refname:short)%00%(upstream:short)";
    let out = must(repo, "for-each-ref", &["for-each-ref", &count, format, "refs/heads/"]).await?;
    let mut branches: Vec<BranchInfo> = out
        .text()
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\0');
            let current = fields.next()? == "*";
            let name = fields.next()?.to_owned();
            let upstream = fields.next().filter(|u| !u.is_empty()).map(str::to_owned);
            Some(BranchInfo { name, current, upstream })
        })
        .collect();
    let truncated = branches.len() > MAX_BRANCHES;
    branches.truncate(MAX_BRANCHES);
    Ok(GitResult::Branches { branches, truncated })
}

pub async fn switch(repo: &Repo, branch: &str) -> Result<GitResult, GitError> {
    let shown = crate::files::cut(branch, 200);
    if branch.is_empty() || branch.starts_with('-') || branch.contains('\0') {
        return Err(GitError::Invalid(format!("`{shown}` is not a branch name")));
    }
    let checked = repo.git(&["check-ref-format", "--branch", branch], SMALL).await?;
    if !checked.ok() {
        return Err(GitError::Invalid(format!("`{shown}` is not a valid branch name")));
    }
    let refname = format!("refs/heads/{branch}");
    if !repo.git(&["show-ref", "--verify", "-q", &refname], SMALL).await?.ok() {
        return Err(GitError::NotFound(format!("there is no local branch `{shown}`")));
    }
    if let Some(what) = repo.in_progress() {
        return Err(GitError::Conflict(format!("a {what} is in progress: finish or abort it before switching")));
    }
    let (changed, _) = status_entries(repo, &["-uno"]).await?;
    if !changed.is_empty() {
        return Err(GitError::Conflict(format!(
            "the working tree has changes to {} tracked file(s): commit or discard them before switching",
            changed.len()
        )));
    }
    Ok(done(must(repo, "switch", &["switch", branch]).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_z_records_are_read_with_renames_and_odd_names() {
        let raw = b"R  new name.txt\0old name.txt\0 M a b\0?? caf\xc3\xa9 -> x\0MM sub/\xe2\x9c\x93.rs\0";
        let entries = parse_status(raw);
        let lines: Vec<_> =
            entries.iter().map(|e| format!("{}{}|{}|{:?}", e.index, e.worktree, e.path, e.orig_path)).collect();
        assert_eq!(
            lines,
            ["R |new name.txt|Some(\"old name.txt\")", " M|a b|None", "??|café -> x|None", "MM|sub/✓.rs|None",]
        );
    }
}
