//! `terminull chat AGENT` when AGENT's CLI is not installed: one plain sentence saying
//! so and how to install it, a non-zero exit, and no session left behind — with the
//! real Claude Code adapter and no `claude` on PATH, and with a drop-in whose CLI is
//! missing.

mod support;

use std::path::Path;
use std::process::{Command, Output};

fn sessions_json(exe: &Path, home: &Path) -> serde_json::Value {
    let out = Command::new(exe)
        .args(["sessions", "--json", "--home"])
        .arg(home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn chat(exe: &Path, home: &Path, agent: &str) -> Output {
    Command::new(exe)
        .args(["chat", agent, "-p", "hello", "--home"])
        .arg(home)
        // No `claude` (nor any other agent CLI) on this PATH.
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// The one sentence on stderr, checked and returned.
fn one_sentence(out: &Output) -> String {
    assert!(!out.status.success(), "a start that cannot happen exits non-zero");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("is not installed on this computer: install it with "), "{stderr}");
    assert!(!stderr.contains("JSON-RPC") && !stderr.contains("-32010"), "plain words: {stderr}");
    stderr
}

#[test]
fn chat_with_claude_code_missing_says_how_to_install_it_and_leaves_no_session() {
    let bin = tempfile::tempdir().unwrap();
    let exe = bin.path().join("terminull");
    std::fs::copy(assert_cmd::cargo::cargo_bin("terminull"), &exe).unwrap();
    let adapter = support::workspace_bin("terminull-claude-code", "terminull-claude-code");
    std::fs::copy(adapter, bin.path().join("terminull-claude-code")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = chat(&exe, home.path(), "claude-code");
    let said = one_sentence(&out);
    assert!(said.contains("Claude Code") && said.contains("npm install -g @anthropic-ai/claude-code"), "{said}");
    assert_eq!(sessions_json(&exe, home.path()), serde_json::json!([]), "no session left behind");
}

#[test]
fn chat_with_a_drop_in_whose_cli_is_missing_leaves_no_session() {
    let home = tempfile::tempdir().unwrap();
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    let script = support::workspace().join("tests/fixtures/adapters/broken.py");
    let missing = ext.join("missing");
    std::fs::write(&missing, format!("#!/bin/sh\nexec python3 '{}' not-installed\n", script.display())).unwrap();
    std::fs::set_permissions(&missing, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let exe = support::echo_only_exe_dir().join("terminull");
    one_sentence(&chat(&exe, home.path(), "broken-not-installed"));
    assert_eq!(sessions_json(&exe, home.path()), serde_json::json!([]));
    assert_eq!(std::fs::read_dir(home.path().join("sessions")).unwrap().count(), 0);
}
