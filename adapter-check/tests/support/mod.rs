//! Shared by the integration tests: where the workspace and the example adapters are.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("adapter-check/ has a parent").to_path_buf()
}

/// `target/<profile>/echo-rs`, the built-in echo adapter (`adapters/echo`). It is a
/// workspace member, so `cargo build` and `cargo test --workspace` build it; a test never
/// runs cargo itself. Before a per-crate run, build it: `cargo build -p terminull-echo`.
pub fn echo_rs() -> PathBuf {
    // …/target/<profile>/deps/<test binary>
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe.parent().and_then(Path::parent).expect("the test binary lives in target/<profile>/deps");
    let bin = profile.join("echo-rs");
    assert!(
        bin.exists(),
        "{} is missing: build the echo adapter first (`cargo build -p terminull-echo`; `cargo build` and `cargo test --workspace` build it with the rest of the workspace)",
        bin.display()
    );
    bin
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
