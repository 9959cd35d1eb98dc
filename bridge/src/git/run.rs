//! Running the user's `git` binary: no prompt, no pager, no editor, a deadline, and
//! output read up to a bound (the process is killed when it writes more).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::GitError;

/// How long one git command may run (a commit's hooks included).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// What one git command did.
#[derive(Debug)]
pub struct Output {
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output, at most the bound asked for.
    pub stdout: Vec<u8>,
    /// True when standard output was longer than the bound (the process was killed).
    pub stdout_cut: bool,
    /// Its standard error, lossy, at most [`terminull_protocol::git::MAX_GIT_OUTPUT_BYTES`].
    pub stderr: String,
}

impl Output {
    /// True when it exited 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Standard output as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Both outputs, for a person: what git (and a hook) said.
    pub fn said(&self) -> String {
        let out = String::from_utf8_lossy(&self.stdout);
        let both = match (out.trim(), self.stderr.trim()) {
            ("", err) => err.to_owned(),
            (out, "") => out.to_owned(),
            (out, err) => format!("{err}\n{out}"),
        };
        crate::files::cut(&both, terminull_protocol::git::MAX_GIT_OUTPUT_BYTES)
    }
}

/// Reads at most `max` bytes; `true` when there was more. With `drain`, the rest is
/// read and dropped (so the writer never blocks); without, reading stops there.
async fn read_bounded(mut from: impl AsyncRead + Unpin, max: usize, drain: bool) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut cut = false;
    loop {
        match from.read(&mut chunk).await {
            Ok(0) | Err(_) => return (buf, cut),
            Ok(_) if cut => {}
            Ok(n) => {
                if buf.len() + n > max {
                    let room = max - buf.len();
                    buf.extend_from_slice(&chunk[..room]);
                    cut = true;
                    if !drain {
                        return (buf, cut);
                    }
                    continue;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Runs `git args…` in `dir`, its standard output bounded by `max_stdout` bytes.
pub async fn git(dir: &Path, args: &[&str], max_stdout: usize) -> Result<Output, GitError> {
    let mut command = Command::new("git");
    command
        .arg("--no-pager")
        .args(["-c", "core.quotepath=off", "-c", "color.ui=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("GIT_EDITOR", "true")
        .env("GIT_ASKPASS", "true")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let op = args.iter().find(|a| !a.starts_with('-')).copied().unwrap_or("git").to_owned();
    let mut child = command.spawn().map_err(|e| GitError::Spawn(e.to_string()))?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let run = async {
        let ((stdout, stdout_cut), (stderr, _)) = tokio::join!(
            read_bounded(stdout, max_stdout, false),
            read_bounded(stderr, terminull_protocol::git::MAX_GIT_OUTPUT_BYTES, true)
        );
        if stdout_cut {
            let _ = child.start_kill();
        }
        let status = child.wait().await;
        (stdout, stdout_cut, stderr, status)
    };
    let (stdout, stdout_cut, stderr, status) = tokio::time::timeout(GIT_TIMEOUT, run)
        .await
        .map_err(|_| GitError::Timeout { op, secs: GIT_TIMEOUT.as_secs() })?;
    let status = status.map_err(|e| GitError::Spawn(e.to_string()))?;
    Ok(Output { code: status.code(), stdout, stdout_cut, stderr: String::from_utf8_lossy(&stderr).into_owned() })
}
