//! The `terminull` binary, run as a user would.

use assert_cmd::Command;

#[test]
fn self_check_passes_and_says_so() {
    let out = Command::cargo_bin("terminull").unwrap().arg("self-check").assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("protocol v2"), "{text}");
    assert!(text.contains("5 passed, 0 failed"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
}

#[test]
fn self_check_json_is_machine_readable() {
    let out = Command::cargo_bin("terminull").unwrap().args(["self-check", "--json"]).assert().success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["protocol_version"], 2);
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["ok"] == true), "{report:#}");
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    Command::cargo_bin("terminull").unwrap().arg("fly").assert().failure().code(2);
}
