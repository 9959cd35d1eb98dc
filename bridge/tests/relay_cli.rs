//! The commands of docs/relay.md, run as a user runs them: a `terminull-relay`
//! process, `terminull up --relay`, `terminull pair`, a second home pairing with
//! `terminull device pair`, then `chat` and `attach` through the relay from that home,
//! and `terminull devices revoke` shutting the device out.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn terminull() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("terminull"))
}

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn relay(data: &Path) -> (Running, String) {
    let mut child = Command::new(support::relay_bin())
        // The device side retries pairing every 200 ms until the bridge has registered,
        // which on a loaded machine takes more than the default 10 tries a minute.
        .args(["--listen", "127.0.0.1:0", "--pair-rate-per-minute", "600", "--data"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("terminull-relay listening on ").expect("the relay's ready line").to_owned();
    (Running(child), url)
}

fn up(home: &Path, relay: &str) -> Running {
    Running(support::daemon_up(home, &["--relay", relay]))
}

/// Runs `command` until it succeeds (the bridge registers with the relay a moment
/// after it starts) or 20 s pass.
fn until_ok(mut make: impl FnMut() -> Command) -> Output {
    let start = Instant::now();
    loop {
        let out = make().output().unwrap();
        if out.status.success() || start.elapsed() > Duration::from_secs(20) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
}

#[test]
fn a_second_home_pairs_then_chats_and_attaches_through_the_relay_until_revoked() {
    let data = tempfile::tempdir().unwrap();
    let (_relay, url) = relay(data.path());
    let bridge = tempfile::tempdir().unwrap();
    let _daemon = up(bridge.path(), &url);

    // `terminull pair` on the bridge's machine.
    let out = terminull()
        .args(["pair", "--json", "--no-wait", "--yes", "--relay", &url, "--home"])
        .arg(bridge.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let offer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let link = offer["link"].as_str().unwrap().to_owned();
    assert!(link.contains("/pair#v=1&"), "{link}");

    // The other machine (its own home) pairs from the link.
    let laptop = tempfile::tempdir().unwrap();
    let out = until_ok(|| {
        let mut c = terminull();
        c.args(["device", "pair", &link, "--name", "laptop", "--home"]).arg(laptop.path());
        c
    });
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("Short code: "), "{said}");
    let out = terminull().args(["devices", "--json", "--home"]).arg(bridge.path()).output().unwrap();
    let devices: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(devices[0]["name"], "laptop");
    assert_eq!(devices[0]["revoked"], false);
    let device_id = devices[0]["device_id"].as_str().unwrap().to_owned();

    // chat through the relay.
    let cwd = tempfile::tempdir().unwrap();
    let out = until_ok(|| {
        let mut c = terminull();
        c.args(["chat", "echo", "-p", "hello over the relay", "--json", "--relay", &url, "--cwd"])
            .arg(cwd.path())
            .arg("--home")
            .arg(laptop.path());
        c
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let blocks = lines(&out.stdout);
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "text" && b["done"] == true && b["text"] == "You said: hello over the relay"),
        "{blocks:#?}"
    );

    // attach replays the session's history through the relay.
    let out = terminull().args(["sessions", "--json", "--home"]).arg(bridge.path()).output().unwrap();
    let sessions: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = sessions[0]["session_id"].as_str().unwrap().to_owned();
    let out = terminull()
        .args(["attach", &session, "--json", "--relay", &url, "--home"])
        .arg(laptop.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed = lines(&out.stdout);
    assert!(replayed.iter().any(|b| b["text"] == "You said: hello over the relay"), "{replayed:#?}");

    // Revoked: the laptop can do nothing any more.
    let out = terminull().args(["devices", "revoke", &device_id, "--home"]).arg(bridge.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::thread::sleep(Duration::from_millis(1500)); // the daemon republishes its devices every second
    let out = terminull()
        .args(["chat", "echo", "-p", "still there?", "--json", "--relay", &url, "--home"])
        .arg(laptop.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "a revoked device must not chat");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("still there"), "no agent answered");
}
