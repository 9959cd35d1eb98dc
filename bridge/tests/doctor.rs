//! `terminull doctor` on broken and working homes: each problem reported with its fix,
//! a non-zero exit code when something failed, and the same as JSON.

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A directory with `terminull`, `echo-rs` and the Claude Code adapter only (not its
/// CLI): a bridge started from there has one agent whose CLI is missing.
fn exe_dir(root: &Path) -> PathBuf {
    let dir = root.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, package) in [
        ("terminull", "terminull-bridge"),
        ("echo-rs", "terminull-echo"),
        ("terminull-claude-code", "terminull-claude-code"),
    ] {
        std::fs::copy(support::workspace_bin(name, package), dir.join(name)).unwrap();
    }
    dir
}

fn terminull(bin: &Path, user_home: &Path) -> Command {
    let mut cmd = Command::new(bin.join("terminull"));
    // No agent CLI on this PATH: /usr/bin and /bin only.
    cmd.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", user_home).env("LANG", "C.UTF-8");
    cmd
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Starts `terminull up` on `home` (LAN on a free loopback port) and waits for its socket.
fn start_daemon(bin: &Path, user_home: &Path, home: &Path, extra: &[&str]) -> Child {
    let mut child = terminull(bin, user_home)
        .args(["up", "--no-mdns", "--lan", "127.0.0.1:0", "--home"])
        .arg(home)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(home.join("bridge.sock").exists() && home.join("lan-url").exists()) {
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited");
        assert!(Instant::now() < deadline, "the daemon did not bind its socket and LAN server in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn doctor(bin: &Path, user_home: &Path, home: &Path, json: bool) -> Output {
    let mut cmd = terminull(bin, user_home);
    cmd.arg("doctor").arg("--home").arg(home);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

#[test]
fn a_missing_agent_cli_a_stale_socket_and_an_open_key_file_are_each_reported_with_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let bin = exe_dir(dir.path());
    let home = dir.path().join("home");
    // A daemon that made its identity (LAN on), then was killed: its socket stays.
    let mut daemon = start_daemon(&bin, dir.path(), &home, &[]);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(home.join("bridge.sock").exists());
    let key = home.join("identity.json");
    assert!(key.exists(), "the daemon did not write its identity");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();

    let out = doctor(&bin, dir.path(), &home, false);
    let report = text(&out);
    #[allow(clippy::print_stdout, reason = "the report, for whoever reads the test's output")]
    {
        println!("{report}");
    }
    assert_eq!(out.status.code(), Some(1), "{report}");
    let socket = home.join("bridge.sock").display().to_string();
    let key = key.display().to_string();
    for expected in [
        // The agent whose CLI is missing, and how to install it.
        "warn  agents   claude-code (built-in): its CLI is missing",
        "fix: install the CLI with `npm install -g @anthropic-ai/claude-code`",
        // The socket of the killed daemon, and what clears it.
        &format!("FAIL  socket   {socket} is left over from a daemon that did not stop cleanly"),
        &format!("`terminull up` replaces the stale socket (or remove it: `rm {socket}`)"),
        // The key file others can read, and the chmod.
        &format!("FAIL  home     {key} holds secret keys and is readable by group or others (mode 644)"),
        &format!("fix: `chmod 600 {key}`"),
        // The echo agent works; the LAN is not probed with no daemon; no relay configured.
        "ok    agents   echo (built-in)",
        "skip  lan      LAN port",
        "skip  relay    no relay configured",
    ] {
        assert!(report.contains(expected), "missing `{expected}` in:\n{report}");
    }

    let out = doctor(&bin, dir.path(), &home, true);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    let failed: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["area"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["home", "socket"], "{json:#}");
    assert!(
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "ok" || c["status"] == "skip" || c["fix"].is_string()),
        "{json:#}"
    );
}

#[test]
fn a_running_daemon_with_lan_and_relay_passes_with_warnings_only() {
    let dir = tempfile::tempdir().unwrap();
    let bin = exe_dir(dir.path());
    let home = dir.path().join("home");
    let data = dir.path().join("relay");
    let mut relay = Command::new(support::relay_bin())
        .args(["--listen", "127.0.0.1:0", "--data"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(relay.stdout.take().unwrap()), &mut line).unwrap();
    let url = line.trim().strip_prefix("terminull-relay listening on ").unwrap_or_else(|| panic!("{line}")).to_owned();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(home.join("config.toml"), format!("[relay]\nurl = \"{url}\"\n")).unwrap();
    let mut daemon = start_daemon(&bin, dir.path(), &home, &[]);

    let out = doctor(&bin, dir.path(), &home, false);
    let report = text(&out);
    daemon.kill().unwrap();
    relay.kill().unwrap();
    let _ = (daemon.wait(), relay.wait());
    assert_eq!(out.status.code(), Some(0), "{report}");
    for expected in [
        "ok    daemon   the daemon answers on",
        "ok    lan      the LAN server answers on 127.0.0.1:",
        &format!("ok    relay    {url} answers /healthz"),
        "ok    clock    clock within",
        "warn  devices  no device is paired",
        "fix: pair your phone: `terminull pair`",
        "0 failed",
    ] {
        assert!(report.contains(expected), "missing `{expected}` in:\n{report}");
    }
}

#[test]
fn an_unreachable_relay_and_a_bad_config_fail_with_fixes() {
    let dir = tempfile::tempdir().unwrap();
    let bin = exe_dir(dir.path());
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(home.join("config.toml"), format!("[relay]\nurl = \"ws://127.0.0.1:{port}\"\n")).unwrap();
    let report = text(&doctor(&bin, dir.path(), &home, false));
    assert!(report.contains(&format!("FAIL  relay    cannot reach the relay ws://127.0.0.1:{port}")), "{report}");
    assert!(report.contains("fix: check the network and `[relay] url`"), "{report}");
    assert!(report.contains("warn  daemon   no daemon is running"), "{report}");

    std::fs::write(home.join("config.toml"), "[relay\n").unwrap();
    let out = doctor(&bin, dir.path(), &home, false);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("config.toml") && report.contains("fix: correct the file"), "{report}");
}
