//! `files` and `git` from a paired device with the Rust client (issue 23, items 2-4):
//! files over the LAN server, git through a relay on loopback, in scratch directories
//! and repositories (`git init` in a temporary directory, identity set locally).

mod support;

use std::path::Path;
use std::process::Command;

use support::project::{Via, project_rig};
use terminull_protocol::control::ReplyErrorCode;
use terminull_protocol::files::{FilesRequest, FilesResult};
use terminull_protocol::git::{GitRequest, GitResult};

/// Runs git in `dir` and returns its standard output; panics when it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).env("GIT_TERMINAL_PROMPT", "0").output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with two committed files and a local identity.
fn scratch_repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test User"]);
    git(dir, &["config", "user.email", "test@example.invalid"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
    std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(dir.join("b.txt"), "bee\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

fn porcelain_lines(result: &GitResult) -> Vec<String> {
    let GitResult::Status { entries, .. } = result else { panic!("{result:?}") };
    entries
        .iter()
        .map(|e| match &e.orig_path {
            Some(orig) => format!("{}{} {orig} -> {}", e.index, e.worktree, e.path),
            None => format!("{}{} {}", e.index, e.worktree, e.path),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_list_read_image_and_write_with_a_conflict_check() {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    let mut rig = project_rig(Via::Lan, |project, _| {
        std::fs::create_dir(project.join("src")).unwrap();
        std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(project.join("logo.png"), PNG).unwrap();
    })
    .await;
    let Ok(FilesResult::List { path, entries, truncated }) =
        rig.files(FilesRequest::List { path: ".".into(), limit: None }).await
    else {
        panic!()
    };
    assert_eq!((path.as_str(), truncated), ("", false));
    let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["src", "logo.png"], "directories first");
    assert_eq!(entries[1].size, PNG.len() as u64);
    assert!(entries[1].mtime_ms.is_some());

    let Ok(FilesResult::ReadText { text, sha256, size, .. }) =
        rig.files(FilesRequest::ReadText { path: "./src/main.rs".into() }).await
    else {
        panic!()
    };
    assert_eq!((text.as_str(), size), ("fn main() {}\n", 13));

    let Ok(FilesResult::ReadImage { mime_type, data, .. }) =
        rig.files(FilesRequest::ReadImage { path: "logo.png".into() }).await
    else {
        panic!()
    };
    assert_eq!(mime_type, "image/png");
    use base64::Engine;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), PNG);

    // Saved with the hash it was read with; a second save with the old hash conflicts.
    let write = |text: &str, expected: Option<String>| FilesRequest::WriteText {
        path: "src/main.rs".into(),
        text: text.into(),
        expected_sha256: expected,
    };
    let Ok(FilesResult::WriteText { sha256: new_hash, .. }) =
        rig.files(write("fn main() { }\n", Some(sha256.clone()))).await
    else {
        panic!()
    };
    assert_eq!(std::fs::read_to_string(rig.project.join("src/main.rs")).unwrap(), "fn main() { }\n");
    let (code, message) = rig.files(write("stale\n", Some(sha256))).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::Conflict, "{message}");
    assert!(message.contains("changed on disk"), "{message}");
    let (code, message) = rig.files(write("new\n", None)).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::Conflict, "{message}");
    assert!(message.contains("exists already"), "{message}");
    assert!(rig.files(write("fn main() {}\n", Some(new_hash))).await.is_ok());
    // A new file.
    let new = FilesRequest::WriteText { path: "src/lib.rs".into(), text: "//! lib\n".into(), expected_sha256: None };
    let Ok(FilesResult::WriteText { path, size, .. }) = rig.files(new).await else { panic!() };
    assert_eq!((path.as_str(), size), ("src/lib.rs", 8));
    assert_eq!(std::fs::read_to_string(rig.project.join("src/lib.rs")).unwrap(), "//! lib\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_status_and_diff_match_the_git_cli_and_stage_commit_discard_work() {
    let mut rig = project_rig(Via::Relay, |project, _| scratch_repo(project)).await;
    let dir = rig.project.clone();
    std::fs::write(dir.join("a.txt"), "one\nTWO\nthree\nfour\n").unwrap();
    std::fs::remove_file(dir.join("b.txt")).unwrap();
    std::fs::write(dir.join("c.txt"), "new file\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/d.txt"), "in a dir\n").unwrap();

    let status = rig.git(GitRequest::Status {}).await.unwrap();
    let expected: Vec<String> = git(&dir, &["status", "--porcelain"]).lines().map(str::to_owned).collect();
    assert_eq!(porcelain_lines(&status), expected);
    let GitResult::Status { branch, in_progress, truncated, .. } = &status else { panic!() };
    assert_eq!((branch.as_deref(), in_progress, truncated), (Some("main"), &None, &false));

    let Ok(GitResult::Diff { diff, truncated: false, .. }) =
        rig.git(GitRequest::Diff { path: "a.txt".into(), staged: false }).await
    else {
        panic!()
    };
    assert_eq!(diff, git(&dir, &["diff", "--", "a.txt"]));
    assert!(diff.contains("-two\n+TWO\n"), "{diff}");
    // An untracked file is all added.
    let Ok(GitResult::Diff { diff, .. }) = rig.git(GitRequest::Diff { path: "c.txt".into(), staged: false }).await
    else {
        panic!()
    };
    assert!(diff.contains("+new file"), "{diff}");

    // Stage, then the staged diff matches `git diff --cached`.
    rig.git(GitRequest::Stage { paths: vec!["a.txt".into(), "c.txt".into(), "b.txt".into()] }).await.unwrap();
    assert_eq!(
        git(&dir, &["status", "--porcelain", "--", "a.txt", "b.txt", "c.txt"]),
        "M  a.txt\nD  b.txt\nA  c.txt\n"
    );
    let Ok(GitResult::Diff { diff, staged: true, .. }) =
        rig.git(GitRequest::Diff { path: "c.txt".into(), staged: true }).await
    else {
        panic!()
    };
    assert_eq!(diff, git(&dir, &["diff", "--cached", "--", "c.txt"]));
    rig.git(GitRequest::Unstage { paths: vec!["b.txt".into()] }).await.unwrap();
    assert_eq!(git(&dir, &["status", "--porcelain", "--", "b.txt"]), " D b.txt\n");
    let status = rig.git(GitRequest::Status {}).await.unwrap();
    assert_eq!(porcelain_lines(&status), git(&dir, &["status", "--porcelain"]).lines().collect::<Vec<_>>());

    // Commit.
    let Ok(GitResult::Committed { commit, .. }) =
        rig.git(GitRequest::Commit { message: "second\n\nbody".into() }).await
    else {
        panic!()
    };
    assert_eq!(commit, git(&dir, &["rev-parse", "HEAD"]).trim());
    let Ok(GitResult::Log { commits, truncated: false }) = rig.git(GitRequest::Log { limit: None }).await else {
        panic!()
    };
    let subjects: Vec<_> = commits.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, ["second", "first"]);
    assert_eq!(commits[0].author, "Test User");
    let Ok(GitResult::Log { commits, truncated: true }) = rig.git(GitRequest::Log { limit: Some(1) }).await else {
        panic!()
    };
    assert_eq!(commits.len(), 1);

    // Discard: refused unless confirmed; then a tracked file comes back and an
    // untracked one goes.
    std::fs::write(dir.join("a.txt"), "scribbled\n").unwrap();
    let (code, message) = rig.git(GitRequest::Discard { path: "a.txt".into(), confirmed: false }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::InvalidMessage, "{message}");
    assert!(message.contains("cannot be undone"), "{message}");
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "scribbled\n");
    rig.git(GitRequest::Discard { path: "a.txt".into(), confirmed: true }).await.unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "one\nTWO\nthree\nfour\n");
    rig.git(GitRequest::Discard { path: "sub/d.txt".into(), confirmed: true }).await.unwrap();
    assert!(!dir.join("sub/d.txt").exists());
    // A staged new file, discarded, is gone from the index and the disk.
    std::fs::write(dir.join("e.txt"), "staged new\n").unwrap();
    git(&dir, &["add", "e.txt"]);
    rig.git(GitRequest::Discard { path: "e.txt".into(), confirmed: true }).await.unwrap();
    assert!(!dir.join("e.txt").exists());
    assert_eq!(git(&dir, &["status", "--porcelain"]), " D b.txt\n");

    // Paths outside the repository are refused before git runs.
    let (code, message) = rig.git(GitRequest::Diff { path: "../x".into(), staged: false }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::PathRefused, "{message}");
    let (code, _) = rig.git(GitRequest::Stage { paths: vec!["/etc/passwd".into()] }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::PathRefused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pre_commit_hook_and_a_missing_identity_are_said_plainly() {
    let mut rig = project_rig(Via::Relay, |project, _| {
        scratch_repo(project);
        let hook = project.join(".git/hooks/pre-commit");
        std::fs::write(&hook, "#!/bin/sh\necho 'lint: trailing whitespace in a.txt line 2' >&2\nexit 1\n").unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    })
    .await;
    let dir = rig.project.clone();
    std::fs::write(dir.join("a.txt"), "one \n").unwrap();
    rig.git(GitRequest::Stage { paths: vec!["a.txt".into()] }).await.unwrap();
    let (code, message) = rig.git(GitRequest::Commit { message: "try".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::GitFailed, "{message}");
    assert!(message.contains("refused by the repository's pre-commit hook"), "{message}");
    assert!(message.contains("lint: trailing whitespace in a.txt line 2"), "the hook's words reach the app: {message}");
    assert_eq!(git(&dir, &["rev-list", "--count", "HEAD"]).trim(), "1", "nothing was committed");

    // No identity: an empty local user.name overrides any global one.
    std::fs::remove_file(dir.join(".git/hooks/pre-commit")).unwrap();
    git(&dir, &["config", "user.name", ""]);
    let (code, message) = rig.git(GitRequest::Commit { message: "try".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::GitFailed, "{message}");
    assert!(message.starts_with("git has no identity to commit with"), "{message}");
    assert!(message.contains("git config --global user.name"), "{message}");

    // Nothing staged.
    git(&dir, &["config", "user.name", "Test User"]);
    git(&dir, &["commit", "-q", "-m", "by hand"]);
    let (code, message) = rig.git(GitRequest::Commit { message: "empty".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::GitFailed, "{message}");
    assert!(message.contains("nothing is staged"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_are_listed_and_switched_only_when_the_tree_is_clean() {
    let mut rig = project_rig(Via::Relay, |project, _| {
        scratch_repo(project);
        git(project, &["branch", "feature"]);
    })
    .await;
    let dir = rig.project.clone();
    let Ok(GitResult::Branches { branches, truncated: false }) = rig.git(GitRequest::Branches {}).await else {
        panic!()
    };
    let listed: Vec<_> = branches.iter().map(|b| (b.name.as_str(), b.current)).collect();
    assert_eq!(listed, [("feature", false), ("main", true)]);

    std::fs::write(dir.join("a.txt"), "dirty\n").unwrap();
    let (code, message) = rig.git(GitRequest::Switch { branch: "feature".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::Conflict, "{message}");
    assert!(message.contains("commit or discard them before switching"), "{message}");
    git(&dir, &["checkout", "--", "a.txt"]);

    let (code, _) = rig.git(GitRequest::Switch { branch: "nope".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::NotFound);
    let (code, _) = rig.git(GitRequest::Switch { branch: "--orphan".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::InvalidMessage);

    // A merge in progress is reported and blocks a switch.
    let head = git(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join(".git/MERGE_HEAD"), &head).unwrap();
    let Ok(GitResult::Status { in_progress, .. }) = rig.git(GitRequest::Status {}).await else { panic!() };
    assert_eq!(in_progress.as_deref(), Some("merge"));
    let (code, message) = rig.git(GitRequest::Switch { branch: "feature".into() }).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::Conflict, "{message}");
    assert!(message.contains("a merge is in progress"), "{message}");
    std::fs::remove_file(dir.join(".git/MERGE_HEAD")).unwrap();

    rig.git(GitRequest::Switch { branch: "feature".into() }).await.unwrap();
    assert_eq!(git(&dir, &["symbolic-ref", "--short", "HEAD"]).trim(), "feature");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_outside_a_repository_says_so() {
    let mut rig = project_rig(Via::Lan, |_, _| {}).await;
    let (code, message) = rig.git(GitRequest::Status {}).await.unwrap_err();
    assert_eq!(code, ReplyErrorCode::GitFailed, "{message}");
    assert!(message.contains("is not in a git repository"), "{message}");
}
