//! Where the workspace, its build output and its fixtures are, and building the
//! binaries the tests start (`cargo test` builds only the package under test).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root exists")
}

/// `tests/fixtures/agents/<agent>/`.
pub fn fixtures(agent: &str) -> PathBuf {
    root().join("tests/fixtures/agents").join(agent)
}

/// The directory holding `terminull`, the built-in adapters and the fake CLI, built
/// on first use into the cargo target directory of the running test or bench.
pub fn bin_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // …/target/<profile>/deps/<test binary>, or …/target/<profile>/<binary>.
            let exe = std::env::current_exe().expect("the running binary's path");
            let mut dir = exe.parent().expect("a parent").to_path_buf();
            if dir.ends_with("deps") {
                dir.pop();
            }
            let profile = dir.file_name().expect("a profile dir").to_string_lossy().into_owned();
            let target = dir.parent().expect("a target dir").to_path_buf();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = Command::new(cargo);
            build.args(["build", "--quiet"]);
            if profile == "release" {
                build.arg("--release");
            }
            for package in [
                "terminull-bridge",
                "terminull-agent-tests",
                "terminull-claude-code",
                "terminull-codex",
                "terminull-gemini",
                "terminull-opencode",
                "terminull-kilo",
                "terminull-hermes",
                "terminull-pi",
                "terminull-droid",
                "terminull-cursor",
                "terminull-qwen",
                "terminull-copilot",
                "terminull-acp",
            ] {
                build.args(["-p", package]);
            }
            let status = build
                .arg("--bins")
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(root())
                .status()
                .expect("running cargo build");
            assert!(status.success(), "building terminull and the adapters failed");
            dir
        })
        .clone()
}
