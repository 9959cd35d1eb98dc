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
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(source) => return Some(Err(NetnsError::Spawn { what: "find the test binary", source })),
    };
    Some(run_in_netns(Command::new(exe).args([name, "--exact", "--nocapture", "--test-threads=1"])))
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
