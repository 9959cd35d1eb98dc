//! Attacks on the bridge's home and its local resources (issue 20, items 3, 6, 8, 9, 11
//! and the log flood): each test runs the attack against the real `terminull` binary
//! (or the library where that is enough), loopback and temporary homes only, bounded
//! in count and time, and prints one `attack: <what>: <result>` line.

mod support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use terminull_bridge::daemon_client::{Client, ClientError};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::{ScanOptions, scan};
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::control::{self, BridgeMessage, ControlMessage, ReplyErrorCode, ReplyResult, SessionRequest};
use terminull_protocol::ids::SessionId;

/// `terminull` in a directory where the echo adapter is the only built-in.
fn terminull() -> Command {
    Command::new(support::echo_only_exe_dir().join("terminull"))
}

/// A daemon killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// `terminull up --home <home>`, its log (at `level`) in `log` when given; returns once
/// its socket answers, and how long that took.
fn up(home: &Path, level: &str, log: Option<&Path>) -> (Daemon, Duration) {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
        None => Stdio::null(),
    };
    let started = Instant::now();
    let child = terminull()
        .args(["up", "--log-level", level, "--home"])
        .arg(home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let daemon = Daemon(child);
    let socket = home.join("bridge.sock");
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    (daemon, started.elapsed())
}

/// A fresh home (mode 0700, as `mktemp -d` makes it) with `config` as its config.toml.
fn home_with(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

/// Writes an executable drop-in `name` (mode 0755) with `body`.
fn drop_in(home: &Path, name: &str, body: &str) -> PathBuf {
    let ext = home.join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    let path = ext.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The `echo-rs` processes whose parent is `pid`.
fn echo_children(pid: u32) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid …
        let Some((head, rest)) = stat.rsplit_once(") ") else { continue };
        let comm = head.split_once(" (").map(|(_, c)| c).unwrap_or("");
        let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if comm == "echo-rs" && ppid == Some(pid) {
            n += 1;
        }
    }
    n
}

fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Starts an echo session in `cwd` on `client`.
async fn start_echo(client: &mut Client, cwd: &Path) -> Result<SessionId, ClientError> {
    let mut kept = Vec::new();
    match client
        .call(ControlMessage::SessionRequest(SessionRequest::new("echo", cwd.display().to_string())), &mut kept)
        .await?
    {
        ReplyResult::SessionStarted { session_id } => Ok(session_id),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Sends `text` and waits (bounded) for the turn's session_end among the followed blocks.
async fn run_turn(client: &mut Client, session: &SessionId, text: &str) {
    let mut kept = Vec::new();
    let message = control::UserMessage { session_id: session.clone(), text: text.into(), attachments: vec![] };
    client.call(ControlMessage::UserMessage(message), &mut kept).await.unwrap();
    let ended = |m: &BridgeMessage| matches!(m, BridgeMessage::Block { block, .. } if matches!(block.kind, BlockKind::SessionEnd(_)));
    if kept.iter().any(ended) {
        return;
    }
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(m) = client.next().await {
            if ended(&m) {
                return;
            }
        }
        panic!("the bridge went away mid-turn");
    })
    .await
    .expect("the turn ended");
}

fn modes_under(root: &Path, files: &mut Vec<(PathBuf, u32)>, dirs: &mut Vec<(PathBuf, u32)>) {
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        let mode = meta.mode() & 0o7777;
        if meta.is_dir() {
            dirs.push((entry.path(), mode));
            modes_under(&entry.path(), files, dirs);
        } else {
            files.push((entry.path(), mode));
        }
    }
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_history_readable_by_other_users() {
    let home = home_with("");
    // What an older bridge left: a session readable by everyone.
    let old = home.path().join("sessions/s-old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("blocks.jsonl"), "{\"secret\":\"hunter2\"}\n").unwrap();
    std::fs::set_permissions(old.join("blocks.jsonl"), std::fs::Permissions::from_mode(0o644)).unwrap();
    for dir in [home.path().join("sessions"), old.clone(), home.path().to_owned()] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let log = home.path().join("daemon.log");
    let (_daemon, _) = up(home.path(), "info", Some(&log));
    let out = terminull().args(["chat", "echo", "-p", "my secret", "--home"]).arg(home.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    modes_under(&home.path().join("sessions"), &mut files, &mut dirs);
    let open_files: Vec<_> = files.iter().filter(|(_, m)| m & 0o077 != 0).collect();
    let open_dirs: Vec<_> = dirs.iter().filter(|(_, m)| m & 0o077 != 0).collect();
    assert!(files.len() >= 4, "a new session and the old one: {files:?}");
    assert!(open_files.is_empty() && open_dirs.is_empty(), "{open_files:?} {open_dirs:?}");
    assert!(files.iter().all(|(_, m)| *m == 0o600) && dirs.iter().all(|(_, m)| *m == 0o700), "{files:?} {dirs:?}");
    let root_mode = std::fs::metadata(home.path()).unwrap().mode() & 0o7777;
    assert_eq!(root_mode, 0o700);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().filter(|l| l.contains("private (group and others could read them)")).count(), 1, "{text}");
    println!(
        "attack: history readable by others: {} files all 0600, {} dirs all 0700, pre-existing 0644 log -> 0600, home 0755 -> 0700",
        files.len(),
        dirs.len()
    );
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_two_bridges_on_one_home() {
    let home = home_with("");
    let (daemon, _) = up(home.path(), "warn", None);
    let second = terminull().args(["up", "--home"]).arg(home.path()).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second daemon must not start");
    assert!(err.contains(&format!("pid {}", daemon.pid())) && err.contains("the daemon"), "{err}");
    drop(daemon);

    // No daemon, an in-process bridge (as `terminull chat` runs one) holds the home:
    // another in-process bridge is refused, naming it.
    let holder = terminull_bridge::home_guard::prepare(&Home::at(home.path()), "terminull chat (test holder)").unwrap();
    let chat = terminull().args(["chat", "echo", "-p", "hi", "--home"]).arg(home.path()).output().unwrap();
    let chat_err = String::from_utf8_lossy(&chat.stderr);
    assert!(!chat.status.success(), "a second in-process bridge must not start");
    assert!(chat_err.contains(&format!("pid {}: terminull chat (test holder)", std::process::id())), "{chat_err}");
    assert!(!home.path().join("sessions").read_dir().unwrap().any(|_| true), "no session was written");
    drop(holder);
    let chat = terminull().args(["chat", "echo", "-p", "hi", "--home"]).arg(home.path()).output().unwrap();
    assert!(chat.status.success(), "the lock is released with its holder: {}", String::from_utf8_lossy(&chat.stderr));
    println!(
        "attack: two bridges on one home: second daemon refused ({}), second in-process bridge refused, lock free after the holder",
        err.lines().find(|l| l.contains("another bridge")).unwrap_or("").chars().take(120).collect::<String>()
    );
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_hanging_drop_in_holds_the_socket() {
    let home = home_with("[limits]\nscan_timeout_secs = 8\n");
    // Reads everything, answers nothing, exits at EOF.
    drop_in(home.path(), "hang", "#!/bin/sh\nwhile read -r line; do :; done\n");
    let (_daemon, to_socket) = up(home.path(), "warn", None);
    let rt = runtime();
    let (agents_after, session_after) = rt.block_on(async {
        let mut client = Client::connect(&home.path().join("bridge.sock")).await.unwrap();
        let asked = Instant::now();
        let mut kept = Vec::new();
        let reply = tokio::time::timeout(
            Duration::from_secs(3),
            client.call(ControlMessage::ListAgents(control::ListAgents {}), &mut kept),
        )
        .await
        .expect("list_agents answered while the drop-in hangs")
        .unwrap();
        assert!(matches!(reply, ReplyResult::Agents { .. }));
        let agents_after = asked.elapsed();
        let asked = Instant::now();
        tokio::time::timeout(Duration::from_secs(4), start_echo(&mut client, home.path()))
            .await
            .expect("an echo session starts before the hanging drop-in's deadline")
            .unwrap();
        (agents_after, asked.elapsed())
    });
    assert!(to_socket < Duration::from_secs(5), "socket after {to_socket:?}");
    let out = terminull().args(["agents", "--json", "--home"]).arg(home.path()).output().unwrap();
    let registry: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let refused = registry["refused"].as_array().unwrap();
    assert!(refused.iter().any(|r| r["path"].as_str().is_some_and(|p| p.ends_with("hang"))), "{registry:#}");
    println!(
        "attack: drop-in never answers initialize: socket up in {:.2} s, list_agents in {:.3} s, echo session in {:.2} s (scan deadline 8 s; was 120 s)",
        to_socket.as_secs_f64(),
        agents_after.as_secs_f64(),
        session_after.as_secs_f64()
    );
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_session_flood_is_capped() {
    let home = home_with("[limits]\nmax_live_sessions = 3\n");
    let (daemon, _) = up(home.path(), "warn", None);
    let rt = runtime();
    let refused = rt.block_on(async {
        let mut client = Client::connect(&home.path().join("bridge.sock")).await.unwrap();
        for _ in 0..3 {
            start_echo(&mut client, home.path()).await.unwrap();
        }
        let mut refusals = Vec::new();
        for _ in 0..5 {
            match start_echo(&mut client, home.path()).await {
                Err(ClientError::Refused { code, message }) => refusals.push((code, message)),
                other => panic!("a session beyond the cap: {other:?}"),
            }
        }
        let children = echo_children(daemon.pid());
        assert_eq!(children, 3, "one adapter per live session, none for the refused ones");
        drop(client);
        refusals
    });
    assert!(
        refused.iter().all(|(code, m)| *code == ReplyErrorCode::Busy && m.contains("max_live_sessions")),
        "{refused:?}"
    );
    println!(
        "attack: 8 session_requests with max_live_sessions = 3: 3 started, {} refused `busy`, 3 adapter processes",
        refused.len()
    );
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_idle_adapters_are_reaped() {
    let home = home_with("[limits]\nidle_secs = 1\n");
    let (daemon, _) = up(home.path(), "warn", None);
    let rt = runtime();
    let session = rt.block_on(async {
        let socket = home.path().join("bridge.sock");
        let mut kept = Vec::new();
        let mut starter = Client::connect(&socket).await.unwrap();
        let session = start_echo(&mut starter, home.path()).await.unwrap();
        // Another client sends a message and does not follow: the adapter runs the turn,
        // then nobody follows an idle session.
        let mut other = Client::connect(&socket).await.unwrap();
        run_turn(&mut starter, &session, "first").await;
        drop(starter);
        let message = control::UserMessage { session_id: session.clone(), text: "again".into(), attachments: vec![] };
        other.call(ControlMessage::UserMessage(message), &mut kept).await.unwrap();
        session
    });
    wait_until("the message revived the adapter", Duration::from_secs(10), || echo_children(daemon.pid()) == 1);
    let idle = wait_until("the idle adapter stopped", Duration::from_secs(15), || echo_children(daemon.pid()) == 0);
    // Still resumable: its history replays and a message revives it.
    rt.block_on(async {
        let mut client = Client::connect(&home.path().join("bridge.sock")).await.unwrap();
        let mut kept = Vec::new();
        let resume = control::SessionResume {
            session_id: session.clone(),
            since_seq: Some(0),
            since_ts: None,
            app_pubkey: String::new(),
        };
        client.call(ControlMessage::SessionResume(resume), &mut kept).await.unwrap();
        run_turn(&mut client, &session, "revived").await;
    });
    println!(
        "attack: idle adapter left running: stopped within {:.2} s (idle_secs = 1), the session resumed and ran a turn after",
        idle.as_secs_f64()
    );
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_one_shot_chats_leave_adapters_running() {
    // Idle sessions are let go only after an hour here: what stops these is the one-shot ending.
    let home = home_with("[limits]\nidle_secs = 3600\n");
    let (daemon, _) = up(home.path(), "warn", None);
    let mut stopped_after = Vec::new();
    for i in 0..5 {
        let out = terminull()
            .args(["chat", "echo", "-p", &format!("one shot {i}"), "--home"])
            .arg(home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        stopped_after.push(wait_until("the one-shot's adapter stopped", Duration::from_secs(10), || {
            echo_children(daemon.pid()) == 0
        }));
    }
    let out = terminull().args(["sessions", "--json", "--home"]).arg(home.path()).output().unwrap();
    let sessions: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sessions.as_array().map(Vec::len), Some(5), "all five stay resumable: {sessions:#}");
    let slowest = stopped_after.iter().max().unwrap();
    println!(
        "attack: 5 finished `chat -p` through the daemon: 0 adapters left (each gone within {:.2} s of exit), 5 sessions still listed",
        slowest.as_secs_f64()
    );
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_foreign_or_writable_drop_ins_are_refused() {
    let rt = runtime();
    let registry_of = |home: &Path| {
        let mut opts = ScanOptions::new(Home::at(home), Config::default());
        opts.exe_dir = Some(support::echo_only_exe_dir());
        rt.block_on(scan(&opts))
    };
    let marker_body = |home: &Path| format!("#!/bin/sh\ntouch '{}'\nexit 1\n", home.join("ran").display());
    let mut cases = Vec::new();

    let home = tempfile::tempdir().unwrap();
    let file = drop_in(home.path(), "evil", &marker_body(home.path()));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o775)).unwrap();
    let r = registry_of(home.path());
    let reason = &r.refused.iter().find(|r| r.path == file).expect("the group-writable drop-in is refused").reason;
    assert!(reason.contains("chmod go-w") && reason.contains(&file.display().to_string()), "{reason}");
    assert!(!home.path().join("ran").exists(), "a refused drop-in never runs");
    cases.push("group-writable file");

    let home = tempfile::tempdir().unwrap();
    let file = drop_in(home.path(), "evil", &marker_body(home.path()));
    let ext = home.path().join("ext_adapters");
    std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = registry_of(home.path());
    let reason =
        &r.refused.iter().find(|r| r.path == file).expect("a drop-in in a world-writable dir is refused").reason;
    assert!(reason.contains(&ext.display().to_string()) && reason.contains("others"), "{reason}");
    assert!(!home.path().join("ran").exists());
    cases.push("world-writable ext_adapters/");

    let uid = terminull_bridge::home_guard::current_uid();
    if uid == 0 {
        let home = tempfile::tempdir().unwrap();
        let file = drop_in(home.path(), "evil", &marker_body(home.path()));
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
        let r = registry_of(home.path());
        let reason = &r.refused.iter().find(|r| r.path == file).expect("a drop-in owned by nobody is refused").reason;
        assert!(reason.contains("owned by uid 65534"), "{reason}");
        assert!(!home.path().join("ran").exists());
        // A home owned by someone else: the daemon refuses to start.
        let foreign = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(foreign.path(), Some(65534), Some(65534)).unwrap();
        let out = terminull().args(["up", "--home"]).arg(foreign.path()).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("owned by uid 65534"), "{err}");
        cases.push("file owned by nobody");
        cases.push("home owned by nobody");
    } else {
        println!(
            "attack: foreign drop-in: the owned-by-another-user case is skipped: not root (uid {uid}), cannot chown"
        );
    }
    println!("attack: foreign or writable drop-ins: refused, never run: {}", cases.join(", "));
}

#[allow(clippy::print_stdout, reason = "the attack table")]
#[test]
fn attack_adapter_floods_the_log() {
    let home = home_with("[limits]\nscan_timeout_secs = 3\n");
    // 3000 lines that are not JSON, then silence (no initialize answer).
    drop_in(
        home.path(),
        "flood",
        "#!/bin/sh\nread -r line\ni=0\nwhile [ $i -lt 3000 ]; do echo \"garbage $i secret-preview\"; i=$((i+1)); done\nwhile read -r line; do :; done\n",
    );
    let log = home.path().join("daemon.log");
    let (_daemon, _) = up(home.path(), "warn", Some(&log));
    let count = || std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| l.contains("garbage")).count();
    // The scan's deadline passes; by then every line was read.
    let text = {
        std::thread::sleep(Duration::from_secs(5));
        std::fs::read_to_string(&log).unwrap()
    };
    let lines = text.lines().count();
    let previews = count();
    assert!(
        previews <= 2 * 20,
        "{previews} lines with a preview logged:\n{}",
        text.chars().take(3000).collect::<String>()
    );
    assert!(text.contains("the rest are counted, not logged"), "{}", text.chars().take(3000).collect::<String>());
    println!(
        "attack: adapter floods the log: 3000 bad lines (6000 warnings unlimited) -> {previews} logged with a preview, {lines} log lines in all (bound 20 per source per minute, 2 sources)"
    );
}
