//! One pseudo-terminal and the shell in it, without `unsafe`: the pair comes from
//! rustix (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname`), and the shell is started
//! through util-linux's `setsid --ctty`, which makes it a session leader whose
//! controlling terminal is the pty (so Ctrl-C reaches the foreground job and `exit`
//! hangs up the session). The shell's pid is its session and process group id.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rustix::fs::{Mode, OFlags};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// Why a terminal could not start.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    /// No pseudo-terminal could be allocated or set up.
    #[error("cannot allocate a pseudo-terminal: {0}")]
    Allocate(#[source] std::io::Error),
    /// `setsid` (util-linux) is not on PATH: without it the shell gets no controlling terminal.
    #[error("`setsid` (util-linux) is not installed; terminals need it to give the shell a controlling terminal")]
    NoSetsid,
    /// The shell did not start.
    #[error("cannot start the shell `{shell}`: {source}")]
    Spawn {
        /// The shell.
        shell: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A started shell: the master side of its pty and the process.
#[derive(Debug)]
pub struct Spawned {
    /// The master side: read the shell's output, write its input, resize.
    pub master: OwnedFd,
    /// The shell (its pid is its session and process group id).
    pub child: tokio::process::Child,
}

fn io(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// The user's login shell: `$SHELL` when it names an executable file, else `/bin/sh`.
pub fn login_shell() -> PathBuf {
    std::env::var_os("SHELL")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// Sets the window size (the kernel sends the foreground job SIGWINCH).
pub fn resize(master: &OwnedFd, cols: u16, rows: u16) -> std::io::Result<()> {
    tcsetwinsize(master, Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 }).map_err(io)
}

/// Opens a pty of `cols`×`rows` and starts `shell -l` in it, in `cwd`.
pub fn spawn(shell: &Path, cwd: &Path, cols: u16, rows: u16) -> Result<Spawned, PtyError> {
    let setsid = which::which("setsid").map_err(|_| PtyError::NoSetsid)?;
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
        .map_err(|e| PtyError::Allocate(io(e)))?;
    grantpt(&master).map_err(|e| PtyError::Allocate(io(e)))?;
    unlockpt(&master).map_err(|e| PtyError::Allocate(io(e)))?;
    let name = ptsname(&master, Vec::new()).map_err(|e| PtyError::Allocate(io(e)))?;
    // NOCTTY: the bridge itself must never take the pty as its controlling terminal.
    let slave = rustix::fs::open(name.as_c_str(), OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| PtyError::Allocate(io(e)))?;
    resize(&master, cols, rows).map_err(PtyError::Allocate)?;
    let slave = File::from(slave);
    let stdio = || slave.try_clone().map(Stdio::from).map_err(PtyError::Allocate);
    let mut command = tokio::process::Command::new(setsid);
    command
        .arg("--ctty")
        .arg(shell)
        .arg("-l")
        .current_dir(cwd)
        .env("TERM", "xterm-256color")
        .env_remove("COLUMNS")
        .env_remove("LINES")
        .stdin(stdio()?)
        .stdout(stdio()?)
        .stderr(stdio()?);
    let child = command.spawn().map_err(|source| PtyError::Spawn { shell: shell.display().to_string(), source })?;
    // The parent's copies of the slave close here: the shell holds the only ones, so
    // the master reads EOF/EIO once the session is gone.
    drop(slave);
    Ok(Spawned { master, child })
}

/// Every process of session `sid` (the terminal's shell and whatever it started,
/// whichever process group it is in), from /proc; empty where /proc is missing.
fn session_members(sid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut members = Vec::new();
    for entry in dir.flatten().take(1 << 20) {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid pgrp session …`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        if rest.split_whitespace().nth(3).and_then(|s| s.parse::<i32>().ok()) == Some(sid) {
            members.push(pid);
        }
    }
    members
}

/// Ends session `sid`: SIGHUP to its process group, then after `grace` SIGKILL to every
/// process still in the session (background jobs have process groups of their own).
pub async fn kill_session(sid: u32, grace: Duration) {
    let Ok(sid) = i32::try_from(sid) else { return };
    if sid <= 1 {
        return;
    }
    let _ = killpg(Pid::from_raw(sid), Signal::SIGHUP);
    let _ = killpg(Pid::from_raw(sid), Signal::SIGCONT);
    tokio::time::sleep(grace).await;
    kill_session_now(sid);
}

/// SIGKILL to every process of session `sid` (and its process group), at once.
pub fn kill_session_now(sid: i32) {
    if sid <= 1 {
        return;
    }
    let _ = killpg(Pid::from_raw(sid), Signal::SIGKILL);
    for pid in session_members(sid) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}
