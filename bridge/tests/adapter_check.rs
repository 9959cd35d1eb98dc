//! The `terminull adapter check` command: its exit status and its JSON report follow
//! the outcome. (The checks themselves are tested in the terminull-adapter-check crate.)

mod support;

use assert_cmd::Command;

#[test]
fn cli_exit_status_and_json_report_follow_the_outcome() {
    let (program, args) = support::broken("missing-provides-usage");
    let out = Command::cargo_bin("terminull")
        .unwrap()
        .args(["adapter", "check", "--json", "--handshake-timeout", "3"])
        .arg(program)
        .args(args)
        .assert()
        .failure()
        .code(1);
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["agent_id"], "broken-missing-provides-usage");
    let failed: Vec<_> = report["findings"].as_array().unwrap().iter().filter(|f| f["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "{report:#}");

    Command::cargo_bin("terminull").unwrap().args(["adapter", "check"]).arg(support::echo_rs()).assert().success();
}
