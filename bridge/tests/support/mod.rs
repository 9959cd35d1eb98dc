//! Shared by the bridge's integration tests: where the workspace, the built-in echo
//! adapter and the other workspace binaries are, and how to run each.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bridge/ has a parent").to_path_buf()
}

/// `target/<profile>/<name>`: a binary of another workspace member (the echo adapter,
/// the ACP host, the relay). `cargo build` and `cargo test --workspace` build every
/// member's binaries, so a test never runs cargo itself; before a per-crate run
/// (`cargo test -p terminull-bridge`), build them: `cargo build -p <package>`.
pub fn workspace_bin(name: &str, package: &str) -> PathBuf {
    // …/target/<profile>/deps/<test binary>
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe.parent().and_then(Path::parent).expect("the test binary lives in target/<profile>/deps");
    let bin = profile.join(name);
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build -p {package}`; `cargo build` and `cargo test --workspace` build it with the rest of the workspace)",
        bin.display()
    );
    bin
}

/// `target/<profile>/echo-rs`, the built-in echo adapter (`adapters/echo`).
pub fn echo_rs() -> PathBuf {
    workspace_bin("echo-rs", "terminull-echo")
}

/// `target/<profile>/terminull-relay`.
pub fn relay_bin() -> PathBuf {
    workspace_bin("terminull-relay", "terminull-relay")
}

/// The broken fixture adapter in `mode`, as `(program, args)`.
pub fn broken(mode: &str) -> (PathBuf, Vec<String>) {
    let script = workspace().join("tests/fixtures/adapters/broken.py");
    (PathBuf::from("python3"), vec![script.display().to_string(), mode.to_owned()])
}

/// A directory holding copies of `terminull` and `echo-rs` only: a registry scan (or a
/// `terminull` started from there) sees the echo built-in and no other built-in adapter
/// that happens to be built in `target/`.
pub fn echo_only_exe_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        exe_dir("echo-only", &[(echo_rs(), "echo-rs"), (assert_cmd::cargo::cargo_bin("terminull"), "terminull")])
    })
    .clone()
}

/// A directory under `target/tmp` holding copies of `files` (source, name), named by
/// the sources' sizes and times: made once per build of them and shared by every test
/// process, never left behind in /tmp. Made under a temporary name and renamed, so a
/// process never sees it half copied.
fn exe_dir(kind: &str, files: &[(PathBuf, &str)]) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut stamp = std::collections::hash_map::DefaultHasher::new();
    for (source, name) in files {
        let meta = std::fs::metadata(source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        (name, meta.len(), meta.modified().ok()).hash(&mut stamp);
    }
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("exe-dirs");
    let dir = root.join(format!("{kind}-{:016x}", stamp.finish()));
    if dir.exists() {
        return dir;
    }
    let staging = root.join(format!("{kind}.{}.tmp", std::process::id()));
    std::fs::create_dir_all(&staging).expect("a staging dir");
    for (source, name) in files {
        std::fs::copy(source, staging.join(name)).unwrap_or_else(|e| panic!("copying {}: {e}", source.display()));
    }
    if std::fs::rename(&staging, &dir).is_err() {
        // Another test process made it first.
        let _ = std::fs::remove_dir_all(&staging);
    }
    // Copies of older builds are never used again.
    let prefix = format!("{kind}-");
    for old in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let name = old.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && old.path() != dir {
            let _ = std::fs::remove_dir_all(old.path());
        }
    }
    dir
}

pub mod browser;
pub mod conversing;
pub mod hostile;
pub mod project;
pub mod remote;
pub mod tls_front;

/// Starts `terminull up --home <home> <extra…>` (output discarded) and waits for its socket.
pub fn daemon_up(home: &Path, extra: &[&str]) -> std::process::Child {
    echo_rs(); // the built-in `echo` next to the binary
    let child = Command::new(assert_cmd::cargo::cargo_bin("terminull"))
        .args(["up", "--log-level", "warn"])
        .args(extra)
        .arg("--home")
        .arg(home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawning terminull up");
    let socket = home.join("bridge.sock");
    let start = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the daemon did not come up");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child
}

/// `target/<profile>/terminull-acp` (the generic ACP host).
pub fn terminull_acp() -> PathBuf {
    workspace_bin("terminull-acp", "terminull-acp")
}

/// The fake ACP agent of adapters/acp (a Python script; see its header).
pub fn fake_acp_agent() -> PathBuf {
    workspace().join("adapters/acp/tests/fixtures/fake_acp_agent.py")
}

/// A directory holding copies of `terminull`, `echo-rs` and `terminull-acp` only: the
/// echo built-in plus the host of the ACP agents declared in config.
pub fn acp_exe_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        exe_dir(
            "acp",
            &[
                (echo_rs(), "echo-rs"),
                (terminull_acp(), "terminull-acp"),
                (assert_cmd::cargo::cargo_bin("terminull"), "terminull"),
            ],
        )
    })
    .clone()
}

/// The `text` messages of a `chat --json` transcript (or any list of blocks as JSON),
/// each rebuilt from its chunks (appends and snapshots) in order: `(text, done)`, in
/// the order the messages began.
#[allow(dead_code)] // Each test binary compiles this module; not all of them use it.
pub fn rebuilt_texts(blocks: &[serde_json::Value]) -> Vec<(String, bool)> {
    use terminull_protocol::streamed::{Assembly, StreamedText};
    let mut order: Vec<String> = Vec::new();
    let mut messages: std::collections::HashMap<String, Assembly> = std::collections::HashMap::new();
    for block in blocks.iter().filter(|b| b["type"] == "text") {
        let chunk: StreamedText = serde_json::from_value(block.clone()).expect("a text block");
        let id = chunk.id.as_str().to_owned();
        if !messages.contains_key(&id) {
            order.push(id.clone());
        }
        messages.entry(id).or_default().apply(&chunk);
    }
    order.iter().map(|id| (messages[id].text().to_owned(), messages[id].is_done())).collect()
}
