//! Running a test inside a private network namespace with only loopback up.
//!
//! A live test calls [`run_isolated`] with its own name. Outside the namespace this
//! starts the test binary again under `unshare -n`, brings `lo` up, runs just that test
//! there and returns whether it passed; inside (marked by [`INSIDE_ENV`]) it returns
//! `None` and the caller runs the test body. The model server, the daemon, the adapter
//! and the agent CLI all live in that namespace: any telemetry or update check gets
//! "network unreachable", and the model server's port cannot clash with anything.

use std::process::{Command, ExitStatus, Stdio};

/// Why a run in the private namespace did not pass.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The test binary could not be found, or `unshare` could not be started.
    #[error("cannot {what}: {source}")]
    Spawn {
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The command ran and failed.
    #[error("{status} in the private namespace:\n{output}")]
    Failed {
        /// Its exit status.
        status: ExitStatus,
        /// Its stdout and stderr together.
        output: String,
    },
    /// The run exited cleanly but the test did not run in it (a wrong name, or a filter
    /// that skipped it): counting that as a pass would hide every failure.
    #[error("the test did not run in the private namespace:\n{output}")]
    NotRun {
        /// Its stdout and stderr together.
        output: String,
    },
}

/// Set in the environment of the process running inside the namespace.
pub const INSIDE_ENV: &str = "TERMINULL_IN_PRIVATE_NETNS";

/// True inside the private namespace.
pub fn inside() -> bool {
    std::env::var_os(INSIDE_ENV).is_some()
}

/// Outside the namespace: runs the test `name` of this test binary inside a fresh one
/// and returns its combined output on success, or an error with that output. Inside:
/// `None`.
pub fn run_isolated(name: &str) -> Option<Result<String, NetnsError>> {
    if inside() {
        return None;
    }
    Some(test_command(name).and_then(|mut command| run_test(&mut command)))
}

/// The command that runs only the test `name` of this test binary, for a caller that
/// adds environment to it before [`run_test`].
pub fn test_command(name: &str) -> Result<Command, NetnsError> {
    let exe = std::env::current_exe().map_err(|source| NetnsError::Spawn { what: "find the test binary", source })?;
    let mut command = Command::new(exe);
    // `--include-ignored`: the outer run may be `cargo test -- --ignored`, and the
    // inner one must then run the same (ignored) test rather than filter it out.
    command.args([name, "--exact", "--include-ignored", "--nocapture", "--test-threads=1"]);
    Ok(command)
}

/// Runs a [`test_command`] inside a fresh private namespace; its output when the one
/// test ran and passed.
pub fn run_test(command: &mut Command) -> Result<String, NetnsError> {
    let output = run_in_netns(command)?;
    if ran_one_test(&output) { Ok(output) } else { Err(NetnsError::NotRun { output }) }
}

/// True when libtest's summary says exactly one test ran and passed.
fn ran_one_test(output: &str) -> bool {
    output.lines().any(|line| line.starts_with("test result: ok. 1 passed"))
}

/// Runs `command` inside a fresh private network namespace (`unshare -n`, then
/// `ip link set lo up`), with [`INSIDE_ENV`] set; its stdout and stderr are returned
/// together.
pub fn run_in_netns(command: &mut Command) -> Result<String, NetnsError> {
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["-n", "--", "sh", "-c", r#"ip link set lo up && exec "$@""#, "sh"])
        .arg(program)
        .args(args)
        .env(INSIDE_ENV, "1")
        .stdin(Stdio::null());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    let output = wrapped.output().map_err(|source| NetnsError::Spawn { what: "run unshare", source })?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if output.status.success() { Ok(text) } else { Err(NetnsError::Failed { status: output.status, output: text }) }
}

/// For a test body that must run in a private namespace: true inside it (run the
/// body); outside, runs the test `name` there and returns false when it passed, and
/// panics with its output when it failed.
pub fn body_runs_here(name: &str) -> bool {
    match run_isolated(name) {
        None => true,
        Some(Ok(_)) => false,
        Some(Err(output)) => panic!("{name} failed in its private network namespace:\n{output}"),
    }
}

#[cfg(test)]
mod tests {
    use super::ran_one_test;

    #[test]
    fn only_a_summary_with_one_passed_test_counts_as_a_run() {
        assert!(ran_one_test("running 1 test\ntest x ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored\n"));
        assert!(!ran_one_test("running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 1 ignored\n"));
        assert!(!ran_one_test(
            "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 9 filtered out\n"
        ));
    }
}
