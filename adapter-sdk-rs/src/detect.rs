//! The default `detect`: is the agent's CLI installed here, and which version.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use terminull_protocol::adapter::DetectResult;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::child::signal_group;

/// At most this much of `--version`'s stdout and of its stderr is read.
const OUTPUT_CAP: u64 = 64 * 1024;

/// A reported version longer than this is cut (a CLI that prints a banner on one line).
const VERSION_MAX_CHARS: usize = 200;

/// Finds `binary` and runs `<binary> --version` to fill the `detect` result.
///
/// - **Finding it.** A name without `/` is looked up on `PATH` (with `which`); a path
///   containing `/` (absolute, or relative to the current directory) is checked
///   directly and must be an executable file. `path` in the result is where it was
///   found: absolute, symlinks not resolved (an npm-installed CLI is reported at its
///   `bin` link, not the script it points to).
/// - **Not found** (or not executable, or `binary` is empty): `installed: false` and a
///   reason (`` `acme` not found on PATH``); nothing is run.
/// - **Running it.** stdin is `/dev/null`; stdout and stderr are read (at most 64 KiB
///   each); the process runs in its own process group, and on timeout that whole group
///   is killed (so an `npx`/`node` wrapper's children die too).
/// - **Exit 0:** `installed: true`; `version` is the first non-empty line of stdout,
///   or of stderr when stdout has none, trimmed, ANSI colour codes removed, cut to 200
///   characters. When neither printed anything, `version` is absent and `reason` says so.
/// - **Non-zero exit or killed by a signal:** the binary exists, so `installed: true`,
///   but `version` is absent and `reason` names the exit status and the first line of
///   stderr (a CLI without a `--version` flag lands here).
/// - **Timeout:** `installed: false` (a CLI that cannot answer `--version` in time
///   cannot be relied on to start), `path` set, `reason` naming the timeout. The timeout
///   covers the run until stdout and stderr are closed, so a leftover grandchild that
///   keeps them open counts as not finishing.
/// - **Cannot be run** (exec fails: bad interpreter line, wrong architecture):
///   `installed: false`, `path` set, `reason` naming the error.
pub async fn detect_cli(binary: &str, timeout: Duration) -> DetectResult {
    let path = match resolve(binary) {
        Ok(path) => path,
        Err(reason) => {
            tracing::debug!(binary, %reason, "agent CLI not found");
            return not_installed(None, reason.to_string());
        }
    };
    let shown = path.display().to_string();
    tracing::debug!(binary, path = %shown, "running --version");
    let mut child = match spawn_version(&path).await {
        Ok(child) => child,
        Err(error) => return not_installed(Some(shown), format!("could not run `{binary}`: {error}")),
    };
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let run = async {
        let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
        (out, err, child.wait().await)
    };
    let (out, err, status) = match tokio::time::timeout(timeout, run).await {
        Ok(finished) => finished,
        Err(_) => {
            if let Some(pid) = pid
                && let Err(error) = signal_group(pid, Some(Signal::SIGKILL))
            {
                tracing::warn!(binary, pid, %error, "could not kill the --version process group");
            }
            // Reap the child itself (kill_on_drop would otherwise do it in the background).
            let _ = child.kill().await;
            tracing::debug!(binary, ?timeout, "--version timed out");
            return not_installed(Some(shown), format!("`{binary} --version` did not finish within {timeout:?}"));
        }
    };
    let status = match status {
        Ok(status) => status,
        Err(error) => return not_installed(Some(shown), format!("waiting for `{binary} --version` failed: {error}")),
    };
    let result = interpret(binary, shown, status, &out, &err);
    tracing::debug!(binary, ?result, "detected");
    result
}

fn not_installed(path: Option<String>, reason: String) -> DetectResult {
    DetectResult { installed: false, version: None, path, reason: Some(reason) }
}

/// Why an agent CLI cannot be run (the `reason` of [`DetectResult`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unavailable {
    #[error("no agent CLI name given")]
    NoName,
    #[error("`{0}` not found on PATH")]
    NotOnPath(String),
    #[error("`{0}` does not exist")]
    Missing(String),
    #[error("`{binary}` cannot be read: {error}")]
    Unreadable { binary: String, error: String },
    #[error("`{0}` is not an executable file")]
    NotExecutable(String),
}

/// Where `binary` is, or why it is not there.
fn resolve(binary: &str) -> Result<PathBuf, Unavailable> {
    if binary.trim().is_empty() {
        return Err(Unavailable::NoName);
    }
    if !binary.contains('/') {
        return which::which(binary).map_err(|_| Unavailable::NotOnPath(binary.to_owned()));
    }
    let path = std::path::absolute(binary).unwrap_or_else(|_| PathBuf::from(binary));
    match std::fs::metadata(&path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(Unavailable::Missing(binary.to_owned())),
        Err(error) => Err(Unavailable::Unreadable { binary: binary.to_owned(), error: error.to_string() }),
        Ok(meta) if !meta.is_file() || !is_executable(&meta) => Err(Unavailable::NotExecutable(binary.to_owned())),
        Ok(_) => Ok(path),
    }
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    true
}

async fn spawn_version(path: &Path) -> io::Result<tokio::process::Child> {
    let mut attempt = 0;
    loop {
        let mut cmd = Command::new(path);
        cmd.arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        match cmd.spawn() {
            // The file is being written right now (an update in progress, or a racing
            // fork still holding a write descriptor): try again shortly.
            Err(error) if error.kind() == io::ErrorKind::ExecutableFileBusy && attempt < 5 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
            other => return other,
        }
    }
}

async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(reader) = reader {
        // A read error just ends the output; what was read so far is kept.
        let _ = reader.take(OUTPUT_CAP).read_to_end(&mut out).await;
    }
    out
}

fn interpret(binary: &str, path: String, status: ExitStatus, out: &[u8], err: &[u8]) -> DetectResult {
    let out_line = first_line(out);
    let err_line = first_line(err);
    if !status.success() {
        let mut reason = format!("`{binary} --version` failed ({status})");
        if let Some(line) = err_line.or(out_line) {
            reason.push_str(": ");
            reason.push_str(&line);
        }
        return DetectResult { installed: true, version: None, path: Some(path), reason: Some(reason) };
    }
    let version = out_line.or(err_line);
    let reason = version.is_none().then(|| format!("`{binary} --version` printed nothing"));
    DetectResult { installed: true, version, path: Some(path), reason }
}

/// The first line with visible text, trimmed, without ANSI escapes, cut to a sane length.
fn first_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines().map(|line| strip_ansi(line).trim().to_owned()).find(|line| !line.is_empty()).map(|mut line| {
        if let Some((cut, _)) = line.char_indices().nth(VERSION_MAX_CHARS) {
            line.truncate(cut);
        }
        line
    })
}

/// Removes ANSI CSI sequences (`ESC [ … final-byte`) and other `ESC x` pairs.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            // Parameters and intermediates, up to and including the final byte @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    /// Writes an executable shell script into `dir` and returns its path.
    fn script(dir: &Path, name: &str, body: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_str().unwrap().to_owned()
    }

    const LONG: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_real_cli_reports_its_version_and_path() {
        // cargo runs these tests, so it is installed wherever they run.
        let r = detect_cli("cargo", LONG).await;
        assert!(r.installed, "{r:?}");
        assert!(r.version.as_deref().is_some_and(|v| v.starts_with("cargo ")), "{r:?}");
        let path = r.path.unwrap();
        assert!(Path::new(&path).is_absolute() && path.ends_with("cargo"), "{path}");
        assert_eq!(r.reason, None);
    }

    #[tokio::test]
    async fn a_missing_binary_is_not_installed_with_a_reason() {
        let r = detect_cli("terminull-no-such-agent-cli", LONG).await;
        assert_eq!(
            r,
            DetectResult {
                installed: false,
                version: None,
                path: None,
                reason: Some("`terminull-no-such-agent-cli` not found on PATH".into()),
            }
        );
        let r = detect_cli("/nonexistent/dir/acme", LONG).await;
        assert_eq!(r.reason.as_deref(), Some("`/nonexistent/dir/acme` does not exist"));
        assert!(!detect_cli("", LONG).await.installed);
    }

    #[tokio::test]
    async fn version_is_the_first_non_empty_line_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let acme = script(dir.path(), "acme", "echo; printf '  \\033[1macme\\033[0m 2.4.1  \\n'; echo extra");
        let r = detect_cli(&acme, LONG).await;
        assert_eq!(
            r,
            DetectResult { installed: true, version: Some("acme 2.4.1".into()), path: Some(acme), reason: None }
        );
    }

    #[tokio::test]
    async fn version_on_stderr_is_used_when_stdout_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let acme = script(dir.path(), "acme", "echo 'acme v9' >&2");
        assert_eq!(detect_cli(&acme, LONG).await.version.as_deref(), Some("acme v9"));
        let silent = script(dir.path(), "silent", "exit 0");
        let r = detect_cli(&silent, LONG).await;
        assert!(r.installed && r.version.is_none(), "{r:?}");
        assert!(r.reason.unwrap().contains("printed nothing"));
    }

    #[tokio::test]
    async fn a_failing_version_flag_means_installed_without_version() {
        let dir = tempfile::tempdir().unwrap();
        let acme = script(dir.path(), "acme", "echo 'acme 1.0'; echo 'unknown option --version' >&2; exit 2");
        let r = detect_cli(&acme, LONG).await;
        assert!(r.installed, "{r:?}");
        assert_eq!(r.version, None);
        assert_eq!(r.path.as_deref(), Some(acme.as_str()));
        let reason = r.reason.unwrap();
        assert!(reason.contains("exit status: 2") && reason.contains("unknown option --version"), "{reason}");
    }

    #[tokio::test]
    async fn a_file_that_is_not_executable_is_not_installed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acme");
        std::fs::write(&path, "#!/bin/sh\necho 1\n").unwrap();
        let r = detect_cli(path.to_str().unwrap(), LONG).await;
        assert!(!r.installed);
        assert!(r.reason.unwrap().contains("not an executable file"));
        let r = detect_cli(dir.path().to_str().unwrap(), LONG).await;
        assert!(!r.installed, "a directory is not a CLI");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_hanging_version_times_out_and_its_process_group_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("sleep.pid");
        let body = format!("sleep 1000 &\necho $! > '{}'\nwait", pidfile.display());
        let slow = script(dir.path(), "slow", &body);
        let started = Instant::now();
        let r = detect_cli(&slow, Duration::from_secs(2)).await;
        assert!(started.elapsed() < Duration::from_secs(30), "detect hung: {:?}", started.elapsed());
        assert!(!r.installed, "{r:?}");
        assert_eq!(r.path.as_deref(), Some(slow.as_str()));
        assert!(r.reason.as_deref().is_some_and(|s| s.contains("did not finish within")), "{r:?}");

        let grandchild: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let gone = |pid: u32| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        };
        let mut waited = 0;
        while !gone(grandchild) && waited < 400 {
            tokio::time::sleep(Duration::from_millis(25)).await;
            waited += 1;
        }
        assert!(gone(grandchild), "the --version process's child {grandchild} survived the timeout");
    }

    #[test]
    fn first_line_strips_colour_and_cuts_long_lines() {
        assert_eq!(first_line(b"\n \x1b[32mv1.2\x1b[0m\nnext"), Some("v1.2".into()));
        assert_eq!(first_line(b"  \n\t\n"), None);
        assert_eq!(first_line("é".repeat(300).as_bytes()).unwrap().chars().count(), VERSION_MAX_CHARS);
    }
}
