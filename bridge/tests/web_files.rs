//! The Files and Changes tabs in a real browser (`web/test/browser-files.mjs`, Chromium
//! at 390x844, touch, scale 2) against an in-process bridge's LAN server, with an echo
//! session whose directory is a scratch git repository: a Rust file, an SVG image, a
//! binary file, a 300 KiB log, a modified tracked file, one to discard, an untracked
//! file and a pre-commit hook that refuses it. The page browses, opens, refuses, edits
//! and saves (and is refused a save over a file changed meanwhile),
//! shows the diff (compared with `git diff`), discards, stages, commits, meets the
//! hook, unstages and switches branch; this test then checks the repository with git.
//! Everything runs in a private network namespace; screenshots are kept under
//! `target/tmp/browser-screenshots/files/`.

mod support;

use support::browser::{available, web_dir};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use terminull_bridge::daemon_client::Client;
use terminull_protocol::control::{ControlMessage, ReplyResult, SessionRequest};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    screenshots: Vec<String>,
}

/// `git args…` in `dir`, which must succeed; its standard output.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const MAIN_RS: &str = "use std::env;\n\n/// Greets whoever is named on the command line.\nfn main() {\n    let name = env::args().nth(1).unwrap_or_else(|| \"world\".to_string());\n    // A comment the highlighter colours.\n    println!(\"hello, {name}\");\n}\n";
const MAIN_RS_CHANGED: &str = "use std::env;\n\n/// Greets whoever is named on the command line.\nfn main() {\n    let name = env::args().nth(1).unwrap_or_else(|| \"phone\".to_string());\n    // A comment the highlighter colours.\n    println!(\"hello, {name}\");\n    println!(\"sent from the train\");\n}\n";
const README: &str = "# demo\n\nA scratch repository for the Files and Changes tabs.\n";
const LOGO: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"240\" height=\"120\" viewBox=\"0 0 240 120\"><rect width=\"240\" height=\"120\" rx=\"16\" fill=\"#1f6fe0\"/><circle cx=\"60\" cy=\"60\" r=\"32\" fill=\"#4cc38a\"/><text x=\"108\" y=\"70\" font-size=\"28\" font-family=\"sans-serif\" fill=\"#fff\">logo</text></svg>\n";
const TODO_ON_DISK: &str = "- written on the computer while the phone edited\n";
const HOOK_SAYS: &str = "pre-commit: todo.txt holds notes, not code; keep it out of commits";

/// The scratch repository: one commit on `main`, a branch `feature`, then changes.
fn scratch_repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Ada Lovelace"]);
    git(dir, &["config", "user.email", "ada@example.com"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN_RS).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn answer() -> u32 {\n    42\n}\n").unwrap();
    std::fs::write(dir.join("README.md"), README).unwrap();
    std::fs::write(dir.join("assets/logo.svg"), LOGO).unwrap();
    let mut binary = vec![0u8; 4096];
    for (i, b) in binary.iter_mut().enumerate() {
        *b = (i % 7) as u8;
    }
    std::fs::write(dir.join("data.bin"), binary).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "initial"]);
    git(dir, &["branch", "feature"]);
    // Not committed: a large log (too large to show), and the changes the page sees.
    std::fs::write(dir.join("big.log"), "log line\n".repeat(300 * 1024 / 9 + 1)).unwrap();
    std::fs::write(dir.join(".git/info/exclude"), "big.log\n").unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN_RS_CHANGED).unwrap();
    std::fs::write(dir.join("README.md"), format!("{README}\nAn edit to throw away.\n")).unwrap();
    std::fs::write(dir.join("todo.txt"), "- buy milk\n").unwrap();
    let hook = dir.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\nif git diff --cached --name-only | grep -qx todo.txt; then\n  echo '{HOOK_SAYS}' >&2\n  exit 1\nfi\n"),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_files_and_changes_tabs_browse_highlight_diff_stage_commit_and_show_a_hook_failure_in_chromium() {
    const NAME: &str =
        "the_files_and_changes_tabs_browse_highlight_diff_stage_commit_and_show_a_hook_failure_in_chromium";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let bridge = support::remote::paired_bridge().await;
        let server = support::remote::start_lan(&bridge).await;
        let repo = tempfile::tempdir().unwrap();
        scratch_repo(repo.path());
        let diff = git(repo.path(), &["diff", "--", "src/main.rs"]);
        assert!(diff.contains("+    println!(\"sent from the train\");"), "{diff}");

        let mut local = Client::in_process(&bridge.service);
        let request = ControlMessage::SessionRequest(SessionRequest {
            app_pubkey: "k".into(),
            ..SessionRequest::new("echo", repo.path().display().to_string())
        });
        let ReplyResult::SessionStarted { session_id } = local.call(request, &mut Vec::new()).await.unwrap() else {
            panic!("no session")
        };
        let message = "Say hello from the phone";
        let expect = json!({
            "session": session_id.as_str(),
            "repo": repo.path(),
            "todo": TODO_ON_DISK,
            "main_rs": MAIN_RS_CHANGED,
            "diff": diff,
            "message": message,
            "hook_says": HOOK_SAYS,
        });
        let expect_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(expect_file.path(), expect.to_string()).unwrap();

        let link =
            support::remote::offer_link(&bridge.home(), None, Some(server.ws_url()), 300).to_url(&server.http_url());
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("files");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let mut command = tokio::process::Command::new("node");
        command
            .arg(web_dir().join("test/browser-files.mjs"))
            .args(["--link", &link, "--screenshots"])
            .arg(&shots)
            .arg("--expect")
            .arg(expect_file.path())
            .kill_on_drop(true);
        let report: Report = support::browser::run_script(command, Duration::from_secs(300)).await;
        eprintln!("files: screenshots {:?}", report.screenshots);

        // The repository after what the page did.
        let dir = repo.path();
        let subjects = git(dir, &["log", "--format=%s", "main"]);
        assert_eq!(subjects.lines().collect::<Vec<_>>(), vec![message, "initial"], "the commit the page made");
        let committed = git(dir, &["show", "--name-only", "--format=%an <%ae>", "main"]);
        assert_eq!(
            committed.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(),
            vec!["Ada Lovelace <ada@example.com>", "src/main.rs"]
        );
        assert_eq!(git(dir, &["show", "main:src/main.rs"]), MAIN_RS_CHANGED);
        assert_eq!(std::fs::read_to_string(dir.join("README.md")).unwrap(), README, "README.md discarded");
        assert_eq!(git(dir, &["branch", "--show-current"]).trim(), "feature", "switched to feature");
        assert_eq!(
            git(dir, &["status", "--porcelain"]),
            "?? todo.txt\n",
            "only the hook-refused file is left, untracked"
        );
    });
}
