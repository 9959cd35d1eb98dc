//! The built-in echo adapter, as the real `echo-rs` binary, passes every check of
//! `terminull adapter check`. Naming the binary here (`CARGO_BIN_EXE_echo-rs`) also makes
//! `cargo test --workspace` build it, which the bridge's, the checker's and the bench's
//! tests rely on: they run `target/<profile>/echo-rs` and never run cargo themselves.

use std::path::PathBuf;
use std::time::Duration;

use terminull_adapter_check::conformance::{CheckOptions, check_adapter};

#[tokio::test]
async fn the_echo_binary_passes_every_conformance_check() {
    let program = PathBuf::from(env!("CARGO_BIN_EXE_echo-rs"));
    let mut opts = CheckOptions::new(program, Vec::new());
    // Generous: the machine may be loaded by the rest of the suite.
    opts.handshake_timeout = Duration::from_secs(20);
    let report = check_adapter(opts).await;
    assert!(report.passed(), "echo-rs failed:\n{}", report.render());
    assert_eq!(report.agent_id.as_deref(), Some("echo"));
}
