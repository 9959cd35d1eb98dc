//! `terminull shell` as a user runs it (docs/terminals.md#terminull-shell): with no
//! daemon it starts an in-process bridge, runs the commands typed on stdin in the
//! login shell, prints their output, and exits with the shell's status.

use assert_cmd::Command;

#[test]
fn terminull_shell_runs_typed_commands_and_exits_with_the_shells_status() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("terminull")
        .unwrap()
        .args(["shell", "--home"])
        .arg(home.path())
        .arg("--cwd")
        .arg(cwd.path())
        .write_stdin("echo $((6*7))\nexit 3\n")
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(3);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stdout.contains("42\r\n"), "stdout: {stdout}");
    assert!(stderr.contains("ended: Exited, exit status 3"), "stderr: {stderr}");
}
