//! Attacks on the adapter's process and on the bridge's own (issue 20, items 7 and 10),
//! through the `terminull` binary as a user runs it: an adapter that dies mid-turn while
//! a `setsid` grandchild holds its stdout, and a bridge killed with SIGKILL mid-turn.
//! Each test prints one `attack: …` line.

#![allow(clippy::print_stderr, reason = "each attack prints its one `attack:` line")]

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest a turn may stay open after its adapter died.
const CLOSE_DEADLINE: Duration = Duration::from_secs(10);

fn terminull() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("terminull"))
}

fn drop_in(home: &Path, name: &str, script: &str) {
    let ext = home.join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    let path = ext.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// True when `pid` no longer runs (gone, or a zombie awaiting its reaper).
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_gone(pid: u32, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if is_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    is_gone(pid)
}

/// Lines of a child's stdout, each with when it arrived, through a channel (so a hang is
/// a timeout, not a stuck test).
fn lines_of(stdout: std::process::ChildStdout) -> mpsc::Receiver<(Instant, Value)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Ok(value) = serde_json::from_str(&line)
                && tx.send((Instant::now(), value)).is_err()
            {
                return;
            }
        }
    });
    rx
}

#[test]
fn attack_setsid_grandchild_holding_stdout_does_not_hide_the_adapter_death() {
    let home = tempfile::tempdir().unwrap();
    let pid_file = home.path().join("grandchild.pid");
    // The adapter starts a grandchild in a session of its own that keeps stdout (and
    // stderr) open, then becomes the broken fixture that exits with status 3 after the
    // first chunk of its first turn.
    let fixture = support::workspace().join("tests/fixtures/adapters/broken.py");
    let script = format!(
        "#!/bin/sh\nsetsid sleep 1000 &\necho $! > '{}'\nexec python3 '{}' exits-mid-turn\n",
        pid_file.display(),
        fixture.display()
    );
    drop_in(home.path(), "setsid-crasher", &script);
    let mut daemon = support::daemon_up(home.path(), &[]);
    let mut chat = terminull()
        .args(["chat", "broken-exits-mid-turn", "-p", "one two three", "--json", "--home"])
        .arg(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(chat.stdout.take().unwrap());
    let mut first_text = None;
    let mut end = None;
    let mut blocks = Vec::new();
    // Generous: the adapter's start (python) and the turn up to its death.
    let give_up = Instant::now() + Duration::from_secs(60);
    while end.is_none() {
        let left = give_up.saturating_duration_since(Instant::now());
        let Ok((at, block)) = rx.recv_timeout(left.min(first_text.map_or(left, |_| CLOSE_DEADLINE))) else { break };
        if block["type"] == "text" && first_text.is_none() {
            first_text = Some(at);
        }
        if block["type"] == "session_end" {
            end = Some(at);
        }
        blocks.push(block);
    }
    let _ = chat.kill();
    let _ = chat.wait();
    let grandchild: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let gone = wait_gone(grandchild, Duration::from_secs(5));
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    if !gone {
        // Not left behind by a failed test.
        let _ = Command::new("kill").args(["-9", &grandchild.to_string()]).status();
    }
    let (Some(first_text), Some(end)) = (first_text, end) else {
        panic!("the turn was not closed within {CLOSE_DEADLINE:?} of the adapter's death: {blocks:#?}");
    };
    let took = end - first_text;
    eprintln!(
        "attack: setsid grandchild holding the adapter's stdout: adapter died -> session_end in {} ms (bound {} s); grandchild {grandchild} killed: {gone}",
        took.as_millis(),
        CLOSE_DEADLINE.as_secs()
    );
    let last = blocks.last().unwrap();
    assert_eq!(last["reason"], "error", "{blocks:#?}");
    let error = blocks.iter().find(|b| b["type"] == "error").expect("an error block");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("exited") && message.contains('3'), "names the exit and its status: {message}");
    assert!(took < CLOSE_DEADLINE, "closed after {took:?}");
    assert!(gone, "the setsid grandchild {grandchild} survived the adapter");
}

#[test]
fn attack_bridge_killed_mid_turn_the_revived_session_ends_the_turn() {
    let home = tempfile::tempdir().unwrap();
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
    let mut daemon = support::daemon_up(home.path(), &[]);
    let mut chat = terminull()
        .args(["chat", "echo-py", "-p", "slow: one two three four five six seven eight", "--json", "--home"])
        .arg(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(chat.stdout.take().unwrap());
    let mut texts = 0;
    while texts < 2 {
        let (_, block) = rx.recv_timeout(Duration::from_secs(60)).expect("the turn did not stream");
        texts += usize::from(block["type"] == "text");
    }
    daemon.kill().unwrap(); // SIGKILL, mid-turn
    daemon.wait().unwrap();
    let _ = chat.wait();
    let stderr = std::io::read_to_string(chat.stderr.take().unwrap()).unwrap();
    let session = stderr.lines().find_map(|l| l.strip_prefix("session ")).expect("session id on stderr").to_owned();

    // Nothing written since the kill: the log ends in the open turn.
    let log = home.path().join("sessions").join(&session).join("blocks.jsonl");
    let before = std::fs::read_to_string(&log).unwrap();
    assert!(!before.contains("\"session_end\""), "the turn was open when the bridge died");

    let mut daemon = support::daemon_up(home.path(), &[]);
    let start = Instant::now();
    let out = terminull()
        .args(["attach", &session, "--json", "--home"])
        .arg(home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = start.elapsed();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let replayed: Vec<Value> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let ends: Vec<&Value> = replayed.iter().filter(|b| b["type"] == "session_end").collect();
    let open: Vec<(String, bool)> = support::rebuilt_texts(&replayed).into_iter().filter(|(_, done)| !done).collect();
    eprintln!(
        "attack: bridge SIGKILLed mid-turn, revived: {} session_end ({}), {} text left done: false, attach took {} ms",
        ends.len(),
        ends.first().map_or("none".into(), |e| format!(
            "{} \"{}\"",
            e["reason"].as_str().unwrap_or("?"),
            e["message"].as_str().unwrap_or("")
        )),
        open.len(),
        took.as_millis()
    );
    assert_eq!(ends.len(), 1, "{replayed:#?}");
    assert_eq!(ends[0]["reason"], "error");
    assert_eq!(ends[0]["message"], "the bridge stopped");
    assert!(open.is_empty(), "texts left open: {open:?}");
    assert!(replayed.iter().any(|b| b["type"] == "error" && b["message"] == "the bridge stopped"));
    // On disk too: every device resuming later gets the same end.
    let after = std::fs::read_to_string(&log).unwrap();
    assert!(after.contains("the bridge stopped") && after.len() > before.len());
    // The closing chunks continue what devices hold: each append starts where its text ends.
    let mut held: std::collections::HashMap<String, u64> = Default::default();
    for line in after.lines() {
        let block: Value = serde_json::from_str(line).unwrap();
        if block["type"] != "text" {
            continue;
        }
        let length = held.entry(block["id"].as_str().unwrap().to_owned()).or_default();
        let text = block["text"].as_str().unwrap().len() as u64;
        match block["offset"].as_u64() {
            Some(offset) => {
                assert_eq!(offset, *length, "an append out of place in the log: {line}");
                *length += text;
            }
            None => *length = text,
        }
    }
}

#[tokio::test]
async fn attack_setsid_grandchild_holding_stdout_does_not_stall_the_handshake() {
    use terminull_bridge::host::{AdapterCommand, HostError, launch};
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    // Dies before answering `initialize`, leaving a grandchild in a session of its own
    // that holds stdout: before, only the 120 s handshake deadline ended the wait.
    let script = format!("setsid sleep 1000 & echo $! > '{}'; exit 5", pid_file.display());
    let command = AdapterCommand { program: "sh".into(), args: vec!["-c".into(), script.into()], env: Vec::new() };
    let start = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(60), launch(command, Duration::from_secs(120))).await;
    let took = start.elapsed();
    let grandchild: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let gone = wait_gone(grandchild, Duration::from_secs(5));
    if !gone {
        let _ = Command::new("kill").args(["-9", &grandchild.to_string()]).status();
    }
    eprintln!(
        "attack: setsid grandchild holding stdout during initialize: refused in {} ms (deadline 120 s, bound {} s); grandchild killed: {gone}",
        took.as_millis(),
        CLOSE_DEADLINE.as_secs()
    );
    let err = result.expect("launch hung").map(|_| ()).unwrap_err();
    assert!(matches!(err, HostError::ExitedDuringHandshake { .. }), "{err}");
    assert!(err.to_string().contains("exit status: 5"), "{err}");
    assert!(took < CLOSE_DEADLINE, "took {took:?}");
    assert!(gone, "the setsid grandchild {grandchild} survived the adapter");
}
