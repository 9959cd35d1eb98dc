//! The conformance checker against the three example adapters (all pass) and the
//! broken fixtures (each fails, naming its problem). Real child processes throughout.
//! (The `terminull adapter check` command itself is tested in the bridge's
//! `tests/adapter_check.rs`.)

mod support;

use std::time::Duration;

use terminull_adapter_check::conformance::{CheckOptions, Report, check_adapter};

async fn check(program: std::path::PathBuf, args: Vec<String>) -> Report {
    let mut opts = CheckOptions::new(program, args);
    // Short enough that `never-initializes` and `no-session-end` end quickly (the cases
    // run at once), long enough that a Python adapter starting on a loaded 2-core
    // machine answers in time: 3 s was not (a CI run with a load average of 19).
    opts.handshake_timeout = Duration::from_secs(20);
    opts.turn_timeout = Duration::from_secs(20);
    check_adapter(opts).await
}

#[tokio::test]
async fn every_example_adapter_passes_every_check() {
    for (name, program, args) in support::examples() {
        let report = check(program, args).await;
        assert!(report.passed(), "{name} failed:\n{}", report.render());
        let checks: Vec<_> = report.findings.iter().map(|f| f.check.as_str()).collect();
        for expected in
            ["handshake", "declaration", "detect", "start", "send", "blocks validate", "turn contract", "stop", "exit"]
        {
            assert!(checks.contains(&expected), "{name}: no `{expected}` check in {checks:?}");
        }
    }
}

/// `(mode, failing check, text the failure must contain)`.
const BROKEN: &[(&str, &str, &str)] = &[
    ("missing-provides-usage", "declaration", "provides_usage must be set explicitly to true or false"),
    ("no-session-end", "turn contract", "without a session_end"),
    ("tool-call-left-running", "turn contract", "was left running"),
    ("text-id-changes", "turn contract", "never got its done=true chunk"),
    ("stdout-garbage", "clean stdout", "debug: hello from stdout"),
    ("never-initializes", "handshake", "no answer to initialize within"),
    ("exits-mid-turn", "turn contract", "exited mid-turn (exit status: 3)"),
    (
        "wrong-protocol-version",
        "declaration",
        "protocol_version must be 1 or 2 (the versions this bridge speaks), found 3",
    ),
    ("append-out-of-place", "blocks validate", "an append at offset 5, but the text so far is 4 bytes"),
    ("appends-under-v1", "blocks validate", "declares protocol_version 1"),
];

#[tokio::test]
async fn each_broken_adapter_fails_naming_its_problem() {
    let checks = BROKEN.iter().map(|(mode, check_name, needle)| async move {
        let (program, args) = support::broken(mode);
        (mode, check_name, needle, check(program, args).await)
    });
    for (mode, check_name, needle, report) in futures::future::join_all(checks).await {
        assert!(!report.passed(), "{mode} passed:\n{}", report.render());
        let failures: Vec<_> = report.failures().collect();
        assert!(
            failures.iter().any(|f| f.check == *check_name && f.detail.contains(needle)),
            "{mode}: expected a `{check_name}` failure mentioning {needle:?}, got:\n{}",
            report.render()
        );
    }
}

#[tokio::test]
async fn garbage_on_stdout_is_reported_and_the_check_goes_on() {
    let (program, args) = support::broken("stdout-garbage");
    let report = check(program, args).await;
    let failed: Vec<_> = report.failures().map(|f| f.check.as_str()).collect();
    assert_eq!(failed, ["clean stdout"], "{}", report.render());
    // The turn after the garbage line was still checked, and the adapter still stopped.
    for later in ["turn contract", "stop", "exit"] {
        assert!(report.findings.iter().any(|f| f.check == later && f.ok), "{later} missing:\n{}", report.render());
    }
}

#[tokio::test]
async fn a_correct_fixture_passes_so_the_failures_are_the_modes_own() {
    let (program, args) = support::broken("ok");
    let report = check(program, args).await;
    assert!(report.passed(), "{}", report.render());
}

#[tokio::test]
async fn a_permission_request_in_the_test_turn_is_answered_and_checked() {
    let (program, args) = support::broken("asks-permission");
    let report = check(program, args).await;
    assert!(report.passed(), "{}", report.render());
    assert!(
        report.findings.iter().any(|f| f.check == "permission_response" && f.detail.contains("`deny`")),
        "{}",
        report.render()
    );
}
