//! Shared by the bridge's integration tests: where the workspace and the example
//! adapters are, and how to run each.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bridge/ has a parent").to_path_buf()
}

/// The cargo target directory this test was built into (`…/target`).
fn target_dir() -> PathBuf {
    // …/target/<profile>/deps/<test-binary>
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// `target/<profile>/echo-rs`, built on first use: `cargo test` builds the bins of the
/// package under test only, and echo-rs lives in its own package.
pub fn echo_rs() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile_dir = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().to_path_buf();
            let bin = profile_dir.join("echo-rs");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "--quiet", "-p", "terminull-echo-rs"])
                .env("CARGO_TARGET_DIR", target_dir())
                .current_dir(workspace())
                .status()
                .expect("running cargo build for echo-rs");
            assert!(status.success(), "cargo build -p terminull-echo-rs failed");
            assert!(bin.exists(), "{} missing after the build", bin.display());
            bin
        })
        .clone()
}

/// `target/<profile>/terminull-relay`, built on first use (it lives in its own package).
pub fn relay_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build_bin("terminull-relay", "terminull-relay")).clone()
}

/// The three example adapters as `(name, program, args)`.
pub fn examples() -> Vec<(&'static str, PathBuf, Vec<String>)> {
    let ws = workspace();
    vec![
        ("echo-rs", echo_rs(), vec![]),
        ("echo-py", PathBuf::from("python3"), vec![ws.join("examples/ext_adapter_example.py").display().to_string()]),
        ("echo-node", PathBuf::from("node"), vec![ws.join("examples/echo.mjs").display().to_string()]),
    ]
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

pub mod remote;

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

/// `target/<profile>/terminull-acp` (the generic ACP host), built on first use.
pub fn terminull_acp() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build_bin("terminull-acp", "terminull-acp")).clone()
}

/// Builds binary `bin` of `package` into this build's `target/<profile>/` and returns
/// its path: `cargo test` builds only the package under test, and these tests start
/// other packages' binaries.
fn build_bin(package: &str, bin: &str) -> PathBuf {
    let profile_dir = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().to_path_buf();
    let path = profile_dir.join(bin);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .env("CARGO_TARGET_DIR", target_dir())
        .current_dir(workspace())
        .status()
        .unwrap_or_else(|e| panic!("running cargo build for {bin}: {e}"));
    assert!(status.success(), "cargo build -p {package} failed");
    assert!(path.exists(), "{} missing after the build", path.display());
    path
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
