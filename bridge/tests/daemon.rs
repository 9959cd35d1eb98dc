//! The `terminull` binary as a user runs it: `chat -p --json` (in-process and through
//! a daemon), `sessions`, and a daemon killed with SIGKILL mid-turn whose session is
//! replayed and resumed by the next daemon.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

fn terminull() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("terminull"))
}

fn home_with_python_drop_in() -> tempfile::TempDir {
    support::echo_rs(); // the built-in `echo` next to the binary
    let home = tempfile::tempdir().unwrap();
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
    let script = support::workspace().join("tests/fixtures/adapters/broken.py");
    let asks = ext.join("asker");
    std::fs::write(&asks, format!("#!/bin/sh\nexec python3 '{}' asks-permission\n", script.display())).unwrap();
    std::fs::set_permissions(&asks, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let crash = ext.join("crasher");
    std::fs::write(&crash, format!("#!/bin/sh\nexec python3 '{}' exits-mid-turn\n", script.display())).unwrap();
    std::fs::set_permissions(&crash, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    home
}

fn parse_lines(stdout: &[u8]) -> Vec<Value> {
    stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
}

fn up(home: &Path) -> Child {
    support::daemon_up(home, &[])
}

#[test]
fn chat_prompt_json_prints_every_block_and_exits_by_the_turn_outcome() {
    let home = home_with_python_drop_in();
    let out =
        terminull().args(["chat", "echo", "-p", "hi there", "--json", "--home"]).arg(home.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let blocks = parse_lines(&out.stdout);
    assert_eq!(blocks[0]["type"], "agent_info");
    assert_eq!(blocks.last().unwrap()["type"], "session_end");
    assert_eq!(blocks.last().unwrap()["reason"], "completed");
    assert!(support::rebuilt_texts(&blocks).contains(&("You said: hi there".to_owned(), true)));

    let out = terminull()
        .args(["chat", "broken-exits-mid-turn", "-p", "hi", "--json", "--home"])
        .arg(home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a turn that did not complete exits 1");
    let blocks = parse_lines(&out.stdout);
    assert!(blocks.iter().any(|b| b["type"] == "error"), "{blocks:#?}");

    let out = terminull().args(["sessions", "--json", "--home"]).arg(home.path()).output().unwrap();
    let sessions: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 2, "{sessions:#}");
}

#[test]
fn a_daemon_killed_mid_turn_leaves_history_intact_and_the_session_resumes() {
    let home = home_with_python_drop_in();
    let mut daemon = up(home.path());
    let mut chat = terminull()
        .args(["chat", "echo-py", "-p", "slow: one two three four five six seven eight", "--json", "--home"])
        .arg(home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(chat.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    // Wait until the turn is streaming, then kill the daemon.
    while seen.iter().filter(|b: &&Value| b["type"] == "text").count() < 2 {
        let line = lines.next().expect("chat ended before streaming").unwrap();
        seen.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    daemon.kill().unwrap(); // SIGKILL
    daemon.wait().unwrap();
    let status = chat.wait().unwrap();
    assert!(!status.success(), "the chat client notices the daemon is gone");
    let session = {
        let stderr = std::io::read_to_string(chat.stderr.take().unwrap()).unwrap();
        stderr.lines().find_map(|l| l.strip_prefix("session ")).expect("session id on stderr").to_owned()
    };

    // A new daemon: attach replays what was written, then the session goes on.
    let mut daemon = up(home.path());
    let mut attach = terminull()
        .args(["attach", &session, "--json", "--home"])
        .arg(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    attach.stdin.take().unwrap().write_all(b"still me\n").unwrap();
    let out = attach.wait_with_output().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(out.status.success(), "the resumed turn completes");
    let replayed = parse_lines(&out.stdout);
    let seqs: Vec<u64> = replayed.iter().map(|b| b["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seqs only grow: {seqs:?}");
    // The history up to the kill is there: the first prompt and the streamed text so far.
    assert!(replayed.iter().any(|b| b["type"] == "user_message" && b["text"].as_str().unwrap().starts_with("slow:")));
    let first_text = seen.iter().rev().find(|b| b["type"] == "text").unwrap();
    assert!(
        replayed.iter().any(|b| b["type"] == "text" && b["id"] == first_text["id"]),
        "the streamed text before the kill was replayed: {replayed:#?}"
    );
    // The Python adapter refuses a resume id it did not mint: a completed turn shows the
    // agent's own session id came back.
    assert!(support::rebuilt_texts(&replayed).contains(&("You said: still me".to_owned(), true)));
    assert_eq!(replayed.last().unwrap()["reason"], "completed");
}

#[test]
fn permission_requests_are_answered_by_the_flag_and_denied_without_one() {
    let home = home_with_python_drop_in();
    for (flag, expected) in
        [(Some("allow"), "(write allowed)"), (Some("deny"), "(write denied)"), (None, "(write denied)")]
    {
        let mut cmd = terminull();
        cmd.args(["chat", "broken-asks-permission", "-p", "write it", "--json", "--home"]).arg(home.path());
        if let Some(flag) = flag {
            cmd.args(["--permission", flag]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{flag:?}: {}", String::from_utf8_lossy(&out.stderr));
        let blocks = parse_lines(&out.stdout);
        assert!(blocks.iter().any(|b| b["type"] == "permission_request"), "{blocks:#?}");
        let (last_text, _) = support::rebuilt_texts(&blocks).pop().unwrap();
        assert!(last_text.ends_with(expected), "{flag:?}: {last_text}");
    }
}

#[test]
fn the_echo_adapter_asks_before_echoing_a_message_that_starts_with_ask() {
    let home = home_with_python_drop_in();
    for (flag, expected) in [("allow", "You said: ask nicely"), ("deny", "Denied: nothing echoed.")] {
        let out = terminull()
            .args(["chat", "echo", "-p", "ask nicely", "--json", "--permission", flag, "--home"])
            .arg(home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{flag}: {}", String::from_utf8_lossy(&out.stderr));
        let blocks = parse_lines(&out.stdout);
        let asked = blocks.iter().find(|b| b["type"] == "permission_request").expect("a permission request");
        let options: Vec<&str> =
            asked["options"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
        assert_eq!(options, ["allow", "deny"]);
        let (last_text, _) = support::rebuilt_texts(&blocks).pop().unwrap();
        assert_eq!(last_text, expected, "{flag}");
    }
}
