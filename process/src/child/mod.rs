//! Running an agent CLI as a child process: piped stdio, its own process group, stdout
//! read line by line into a bounded channel, stderr kept as a bounded tail, and a
//! shutdown ladder that ends the whole process tree.
//!
//! The child is started in a new process group whose id is its pid
//! (`process_group(0)`). Every signal this module sends goes to that whole group, so it
//! also reaches grandchildren: the real agent behind an `npx`/`node`/`uvx` wrapper, the
//! shell commands the agent runs. (A grandchild that moves itself to another group or
//! session with `setsid` escapes the group; [`tree`] finds it by a tag in its
//! environment, see there for exactly what is and is not found.)
//!
//! Dropping an [`AgentProcess`] sends SIGKILL to its group, unless the group is already
//! known to be gone, and to what is left of its [`tree`].
//!
//! Unix only. Must be used within a Tokio runtime (spawning starts reader tasks).

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use serde_json::Value;
use terminull_protocol::ndjson::{DEFAULT_MAX_LINE_BYTES, LineCodec, LineError, NdjsonCodec, NumberedLine};
use terminull_protocol::text::{prefix_within, suffix_within};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;

use crate::tap::{Tap, TappedStdin, TappedStdout};

pub mod tree;

/// One stdout line as the caller receives it: a decoded value, or why the line could
/// not be decoded (the stream goes on after it).
pub type LineItem = Result<Value, LineError>;

/// The receiving end of a child's stdout, in order. It yields `None` once stdout has
/// reached end of file (the child and every process sharing its stdout have closed it).
pub type LineReceiver = mpsc::Receiver<LineItem>;

/// How long [`AgentProcess::wait`] waits, after the child exited, for stderr to be read
/// to its end so the tail holds the child's last words.
const STDERR_DRAIN: Duration = Duration::from_secs(1);

/// How long to wait for the child to be reaped after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How often the shutdown sweep checks whether the process group is empty.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How stdout lines are decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Lines {
    /// NDJSON: each line is one JSON value (the protocol's [`NdjsonCodec`]); blank lines
    /// are skipped, a non-JSON line is a [`LineError::NotJson`] item.
    #[default]
    Json,
    /// Plain text: each line arrives as `Ok(Value::String(line))`, without its `\n` or
    /// `\r\n`. Blank lines are kept; invalid UTF-8 is replaced by U+FFFD.
    Text,
}

/// Options for [`AgentProcess::spawn`].
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// How stdout is decoded.
    pub lines: Lines,
    /// Cap on one stdout line in bytes; a longer line becomes a [`LineError::TooLong`]
    /// item and is discarded as it arrives. Default [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: usize,
    /// Capacity of the stdout channel (at least 1). When the caller falls behind, reading
    /// stops and the child blocks on its full pipe: back-pressure, nothing is dropped.
    /// Default 256.
    pub channel_capacity: usize,
    /// Most stderr lines kept in the tail. Default 200.
    pub stderr_tail_lines: usize,
    /// Most stderr bytes kept in the tail (newlines not counted); also the cap on one
    /// stderr line, a longer one is kept as a one-line marker. Default 64 KiB.
    pub stderr_tail_bytes: usize,
    /// Record this process's stdio when recording is on (see [`crate::tap`]). Default
    /// true: an adapter's CLI is what replay tests play back. The bridge turns it off for
    /// the adapters it hosts.
    pub record: bool,
    /// Where each stderr line goes too (besides the tail), when set: sent with
    /// `try_send`, so a full or closed channel drops the line and never blocks the child.
    /// An adapter watches it for what a CLI says only there (retry notices). Default none.
    pub stderr_lines: Option<tokio::sync::mpsc::Sender<String>>,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        Self {
            lines: Lines::Json,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            channel_capacity: 256,
            stderr_tail_lines: 200,
            stderr_tail_bytes: 64 * 1024,
            record: true,
            stderr_lines: None,
        }
    }
}

/// The child could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// Spawning failed (not found, not executable, …).
    #[error("could not start `{program}`: {source}")]
    Spawn {
        /// The program as given to the command.
        program: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

/// A write to the child's stdin failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// stdin was closed by [`AgentProcess::close_stdin`] or taken by
    /// [`AgentProcess::take_stdin`].
    #[error("stdin of `{program}` is closed")]
    StdinClosed {
        /// The child's program name.
        program: String,
    },
    /// The write failed, typically a broken pipe because the child exited.
    #[error("could not write to `{program}`: {source}")]
    Io {
        /// The child's program name.
        program: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The value could not be encoded as JSON.
    #[error("could not encode the message as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The step of the shutdown ladder at which the child exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownStage {
    /// It exited on its own: before the shutdown or after its stdin was closed.
    Exited,
    /// It exited after SIGTERM to its group.
    Terminated,
    /// SIGKILL to its group was needed.
    Killed,
}

/// What [`AgentProcess::shutdown`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownOutcome {
    /// The child's exit status; `None` only if it could not be reaped even after SIGKILL
    /// (a process stuck in the kernel) or waiting on it failed.
    pub status: Option<ExitStatus>,
    /// Which step ended it.
    pub stage: ShutdownStage,
}

/// A running agent CLI. See the [module documentation](self).
#[derive(Debug)]
pub struct AgentProcess {
    child: Child,
    /// The child's pid, which is also its process group id.
    pid: u32,
    /// Program name for logs and errors.
    program: String,
    stdin: Option<ChildStdin>,
    tail: Arc<Mutex<StderrTail>>,
    stderr_task: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
    /// True once the group was found empty; no signal is sent after that (its id may be reused).
    group_gone: bool,
    /// The recording of this process, when recording is on (see [`crate::tap`]).
    tap: Option<Tap>,
    /// The tag of its process tree (see [`tree`]).
    tree: String,
    /// True once the tree was swept after the child ended; Drop does not scan again.
    tree_swept: bool,
}

impl AgentProcess {
    /// Starts `cmd` with stdin, stdout and stderr piped (whatever `cmd` set for them is
    /// replaced), in its own process group, killed on drop. Returns the process and the
    /// receiver of its stdout lines.
    pub fn spawn(cmd: Command, opts: SpawnOptions) -> Result<(AgentProcess, LineReceiver), SpawnError> {
        let (process, stdout) = Self::spawn_piped(cmd, &opts)?;
        let (program, pid) = (process.program.clone(), process.pid);
        let (tx, rx) = mpsc::channel(opts.channel_capacity.max(1));
        let convert: fn(Result<NumberedLine, LineError>) -> Option<LineItem> = match opts.lines {
            Lines::Json => NdjsonCodec::parse_line,
            Lines::Text => |item| Some(text_line(item).map(Value::String)),
        };
        let lines = LineCodec::new(opts.max_line_bytes);
        tokio::spawn(pump(stdout, lines, tx, convert, process.tap.clone(), program, pid));
        Ok((process, rx))
    }

    /// Starts `cmd` like [`spawn`](Self::spawn) but speaks JSON-RPC with it: the
    /// child's stdin and stdout belong to the returned peer (line cap from `opts`).
    /// To close the child's stdin, drop every clone of the peer and its tasks.
    /// When recording is on, the lines passing between the peer and the child are
    /// recorded like [`spawn`](Self::spawn)'s.
    pub fn spawn_rpc(
        cmd: Command,
        opts: SpawnOptions,
        name: impl Into<String>,
    ) -> Result<(AgentProcess, terminull_rpc::Endpoint), SpawnError> {
        let (mut process, stdout) = Self::spawn_piped(cmd, &opts)?;
        let stdin = process.stdin.take().ok_or_else(|| SpawnError::Spawn {
            program: process.program.clone(),
            source: io::Error::other("the child's stdin was not captured"),
        })?;
        let config =
            terminull_rpc::PeerConfig { max_line: opts.max_line_bytes, ..terminull_rpc::PeerConfig::named(name) };
        let endpoint = match process.tap.clone() {
            Some(tap) => terminull_rpc::spawn(
                TappedStdout::new(stdout, tap.clone(), opts.max_line_bytes),
                TappedStdin::new(stdin, tap, opts.max_line_bytes),
                config,
            ),
            None => terminull_rpc::spawn(stdout, stdin, config),
        };
        Ok((process, endpoint))
    }

    fn spawn_piped(mut cmd: Command, opts: &SpawnOptions) -> Result<(AgentProcess, ChildStdout), SpawnError> {
        let program_path = cmd.as_std().get_program().to_owned();
        let program =
            Path::new(&program_path).file_name().unwrap_or(program_path.as_os_str()).to_string_lossy().into_owned();
        let spawn_error =
            |source: io::Error| SpawnError::Spawn { program: program_path.to_string_lossy().into_owned(), source };
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
        // Marks the child (and what it starts) as terminull's own, so the handoff hooks
        // never take it for a native agent driving its directory.
        let marker = std::env::var(crate::SESSION_MARKER_ENV).unwrap_or_else(|_| std::process::id().to_string());
        if !cmd.as_std().get_envs().any(|(k, _)| k == crate::SESSION_MARKER_ENV) {
            cmd.env(crate::SESSION_MARKER_ENV, marker);
        }
        // A shell keeps PWD in step with the working directory and some CLIs (Gemini CLI,
        // OpenCode) take their project from PWD: a child started in a directory must not
        // inherit the starter's.
        if let Some(dir) = cmd.as_std().get_current_dir().map(Path::to_path_buf)
            && !cmd.as_std().get_envs().any(|(k, _)| k == "PWD")
        {
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            cmd.env("PWD", dir);
        }
        // Tags the whole tree, so descendants that leave the process group are found.
        let tree_tag = tree::new_tag();
        let inherited = match cmd.as_std().get_envs().find(|(k, _)| *k == tree::TREE_ENV) {
            Some((_, value)) => value.map(ToOwned::to_owned),
            None => std::env::var_os(tree::TREE_ENV),
        };
        cmd.env(tree::TREE_ENV, tree::env_value(inherited, &tree_tag));
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let missing = |what: &str| spawn_error(io::Error::other(format!("the child's {what} was not captured")));
        let pid = child.id().ok_or_else(|| missing("pid"))?;
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        tracing::debug!(program = %program, pid, "spawned agent process");
        let args: Vec<String> = cmd.as_std().get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let tap = if opts.record { Tap::start(&args) } else { None };

        let tail = Arc::new(Mutex::new(StderrTail::new(opts.stderr_tail_lines, opts.stderr_tail_bytes)));
        let stderr_task = tokio::spawn(drain_stderr(
            stderr,
            opts.stderr_tail_bytes,
            tail.clone(),
            opts.stderr_lines.clone(),
            program.clone(),
            pid,
        ));

        let process = AgentProcess {
            child,
            pid,
            program,
            stdin: Some(stdin),
            tail,
            stderr_task: Some(stderr_task),
            status: None,
            group_gone: false,
            tap,
            tree: tree_tag,
            tree_swept: false,
        };
        Ok((process, stdout))
    }

    /// The child's pid; also the id of its process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The tag of the child's process tree ([`tree`]): set in the environment of the
    /// child and of everything it starts.
    pub fn tree_tag(&self) -> &str {
        &self.tree
    }

    /// The program's file name, as used in logs.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Writes `line` and a newline to the child's stdin and flushes. The text is written
    /// as given: a `\n` inside it starts another line.
    pub async fn write_line(&mut self, line: &str) -> Result<(), WriteError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.write_bytes(&bytes).await
    }

    /// Writes `value` as one line of compact JSON (NDJSON) to the child's stdin and flushes.
    pub async fn write_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        let mut bytes = serde_json::to_vec(value)?;
        bytes.push(b'\n');
        self.write_bytes(&bytes).await
    }

    async fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(WriteError::StdinClosed { program: self.program.clone() });
        };
        let io_error = |source| WriteError::Io { program: self.program.clone(), source };
        if let Some(tap) = &self.tap {
            tap.stdin_bytes(bytes);
        }
        stdin.write_all(bytes).await.map_err(io_error)?;
        stdin.flush().await.map_err(io_error)
    }

    /// Closes the child's stdin, so it reads end of file. Later writes fail with
    /// [`WriteError::StdinClosed`].
    pub fn close_stdin(&mut self) {
        if self.stdin.take().is_some() {
            tracing::debug!(program = %self.program, pid = self.pid, "closed stdin");
        }
    }

    /// Takes the stdin handle, for a caller that writes from its own task. Closing stdin
    /// is then the caller's business (drop the handle); `shutdown` cannot do it.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The last stderr lines, oldest first, joined by `\n`: at most
    /// `stderr_tail_lines` lines and `stderr_tail_bytes` bytes. For crash reports.
    pub fn stderr_tail(&self) -> String {
        lock(&self.tail).joined()
    }

    /// The exit status if the child has exited, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none()
            && let Some(status) = self.child.try_wait()?
        {
            self.record_exit(status);
        }
        Ok(self.status)
    }

    /// Waits for the child itself to exit, however long a process it left behind keeps its
    /// stdout or stderr open: how a death is noticed independently of end of file.
    /// Cancel-safe.
    pub async fn exited(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.record_exit(status);
        Ok(status)
    }

    /// Waits for the child to exit, then briefly for its stderr to be read to the end so
    /// [`stderr_tail`](Self::stderr_tail) holds its last lines. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = match self.status {
            Some(status) => status,
            None => {
                let status = self.child.wait().await?;
                self.record_exit(status);
                status
            }
        };
        self.drain_stderr().await;
        Ok(status)
    }

    /// Sends SIGKILL to the child's whole process group now.
    pub fn kill_group(&self) -> io::Result<()> {
        self.signal_group(Signal::SIGKILL)
    }

    /// Sends SIGKILL now to the child's whole process group and to every process of its
    /// [`tree`] (descendants that left the group with `setsid` included). Returns how many
    /// processes of the tree outside a known-gone group were signalled.
    pub fn kill_tree(&mut self) -> io::Result<usize> {
        self.log_signal_error(self.kill_group());
        let signalled = tree::signal_tree(&self.tree, Signal::SIGKILL)?;
        if self.status.is_some() {
            self.tree_swept = true;
        }
        Ok(signalled.len())
    }

    /// Sends SIGTERM to the child's whole process group.
    pub fn terminate_group(&self) -> io::Result<()> {
        self.signal_group(Signal::SIGTERM)
    }

    /// Sends SIGINT to the child's whole process group (what Ctrl-C in a terminal does;
    /// many agent CLIs stop their current turn on it).
    pub fn interrupt_group(&self) -> io::Result<()> {
        self.signal_group(Signal::SIGINT)
    }

    fn signal_group(&self, signal: Signal) -> io::Result<()> {
        if self.group_gone {
            return Ok(());
        }
        tracing::debug!(program = %self.program, pid = self.pid, %signal, "signalling process group");
        if let (Some(tap), None) = (&self.tap, self.status) {
            tap.signal(signal as i32);
        }
        signal_group(self.pid, Some(signal)).map(drop)
    }

    /// Interrupts a child mid-work the way a terminal's Ctrl-C would: SIGINT to its
    /// group, then reads and drops its stdout (so it never blocks on a full pipe) for up
    /// to `grace` while it exits, then the [`shutdown`](Self::shutdown) ladder with
    /// `shutdown_grace` for whatever is left.
    pub async fn interrupt_and_end(
        &mut self,
        lines: &mut LineReceiver,
        grace: Duration,
        shutdown_grace: Duration,
    ) -> ShutdownOutcome {
        if let Err(error) = self.interrupt_group() {
            tracing::warn!(program = %self.program, pid = self.pid, %error, "could not send SIGINT");
        }
        let exited = tokio::time::timeout(grace, async {
            while lines.recv().await.is_some() {}
            self.wait().await
        })
        .await;
        tracing::debug!(program = %self.program, pid = self.pid, ?exited, "interrupted");
        self.shutdown(shutdown_grace).await
    }

    /// Ends the child and everything in its process group, politely first:
    ///
    /// 1. close stdin and wait up to `grace` for the child to exit;
    /// 2. SIGTERM the group, wait up to `grace`;
    /// 3. SIGKILL the group, wait for the child to be reaped (bounded, a few seconds).
    ///
    /// Then, whichever step ended the child, processes left in its group (a grandchild
    /// that outlived its parent) get SIGTERM, up to `grace` to leave, then SIGKILL. So
    /// the whole call takes at most about three times `grace` plus a few seconds, and
    /// returns at once for a child that exits on end of input and leaves nothing behind.
    pub async fn shutdown(&mut self, grace: Duration) -> ShutdownOutcome {
        self.close_stdin();
        let mut stage = ShutdownStage::Exited;
        let mut status = self.wait_for(grace).await;
        if status.is_none() {
            stage = ShutdownStage::Terminated;
            self.log_signal_error(self.terminate_group());
            status = self.wait_for(grace).await;
        }
        if status.is_none() {
            stage = ShutdownStage::Killed;
            self.log_signal_error(self.kill_group());
            status = self.wait_for(KILL_WAIT).await;
            if status.is_none() {
                tracing::warn!(program = %self.program, pid = self.pid, "child not reaped after SIGKILL");
            }
        }
        self.sweep_group(grace, stage == ShutdownStage::Killed).await;
        self.sweep_tree(grace).await;
        self.drain_stderr().await;
        tracing::debug!(program = %self.program, pid = self.pid, ?status, ?stage, "shut down");
        ShutdownOutcome { status, stage }
    }

    fn log_signal_error(&self, result: io::Result<()>) {
        if let Err(error) = result {
            tracing::warn!(program = %self.program, pid = self.pid, %error, "could not signal process group");
        }
    }

    async fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(Ok(status)) => {
                self.record_exit(status);
                Some(status)
            }
            Ok(Err(error)) => {
                tracing::warn!(program = %self.program, pid = self.pid, %error, "waiting for the child failed");
                None
            }
            Err(_) => None,
        }
    }

    fn record_exit(&mut self, status: ExitStatus) {
        tracing::debug!(program = %self.program, pid = self.pid, %status, "agent process exited");
        if self.status.is_none()
            && let Some(tap) = &self.tap
        {
            tap.exit(status);
        }
        self.status = Some(status);
        self.refresh_group_gone();
    }

    /// Checks (signal 0) whether any process is left in the group.
    fn refresh_group_gone(&mut self) -> bool {
        if !self.group_gone && matches!(signal_group(self.pid, None), Ok(false)) {
            self.group_gone = true;
        }
        self.group_gone
    }

    /// Ends processes left in the group after the child itself is gone.
    async fn sweep_group(&mut self, grace: Duration, already_killed: bool) {
        if self.refresh_group_gone() {
            return;
        }
        if !already_killed {
            tracing::debug!(program = %self.program, pid = self.pid, "processes left in the group; SIGTERM");
            self.log_signal_error(self.terminate_group());
            if self.poll_group_gone(grace).await {
                return;
            }
        }
        tracing::debug!(program = %self.program, pid = self.pid, "processes left in the group; SIGKILL");
        self.log_signal_error(self.kill_group());
        // Zombies whose parent is gone stay members until init reaps them; don't wait long.
        self.poll_group_gone(grace.min(Duration::from_secs(1))).await;
    }

    /// Ends processes of the child's tree that left its group (`setsid`): SIGTERM, up to
    /// `grace` (at most a second) to leave, then SIGKILL.
    async fn sweep_tree(&mut self, grace: Duration) {
        if self.tree_swept {
            return;
        }
        let left = tree::signal_tree(&self.tree, Signal::SIGTERM).unwrap_or_default();
        if !left.is_empty() {
            tracing::debug!(program = %self.program, pid = self.pid, ?left, "processes left in the tree; SIGTERM");
            let deadline = tokio::time::Instant::now() + grace.min(Duration::from_secs(1));
            while tokio::time::Instant::now() < deadline && !tree::tree_pids(&self.tree).is_empty() {
                tokio::time::sleep(GROUP_POLL * 5).await;
            }
            let killed = tree::signal_tree(&self.tree, Signal::SIGKILL).unwrap_or_default();
            if !killed.is_empty() {
                tracing::debug!(program = %self.program, pid = self.pid, ?killed, "processes left in the tree; SIGKILL");
            }
        }
        self.tree_swept = self.status.is_some();
    }

    async fn poll_group_gone(&mut self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.refresh_group_gone() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(GROUP_POLL).await;
        }
    }

    async fn drain_stderr(&mut self) {
        let Some(task) = self.stderr_task.as_mut() else { return };
        // A grandchild may still hold stderr open; don't wait for it beyond a moment.
        if tokio::time::timeout(STDERR_DRAIN, task).await.is_ok() {
            self.stderr_task = None;
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if !self.group_gone {
            // kill_on_drop reaches only the child itself; take the group with it.
            let _ = signal_group(self.pid, Some(Signal::SIGKILL));
        }
        if !self.tree_swept {
            let _ = tree::signal_tree(&self.tree, Signal::SIGKILL);
        }
    }
}

/// Sends `signal` (`None`: only check existence) to process group `pgid`. `Ok(false)`
/// when the group no longer exists.
pub fn signal_group(pgid: u32, signal: Option<Signal>) -> io::Result<bool> {
    let pgid = i32::try_from(pgid).map_err(|_| io::Error::other(format!("process group id {pgid} out of range")))?;
    if pgid <= 1 {
        // 0 would mean our own group and 1 init's; never signal those.
        return Err(io::Error::other(format!("refusing to signal process group {pgid}")));
    }
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(errno) => Err(io::Error::from(errno)),
    }
}

fn lock(tail: &Mutex<StderrTail>) -> std::sync::MutexGuard<'_, StderrTail> {
    tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads `stdout` with `codec` and forwards every item, in order, until end of file or
/// until the receiver is dropped (the pipe is then closed; the child sees EPIPE).
async fn pump<R: AsyncRead + Unpin>(
    stdout: R,
    lines: LineCodec,
    tx: mpsc::Sender<LineItem>,
    convert: fn(Result<NumberedLine, LineError>) -> Option<LineItem>,
    tap: Option<Tap>,
    program: String,
    pid: u32,
) {
    let mut frames = FramedRead::new(stdout, lines);
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(item) => {
                if let (Some(tap), Ok((_, line))) = (&tap, &item) {
                    tap.stdout_line(line);
                }
                let Some(item) = convert(item) else { continue };
                if tx.send(item).await.is_err() {
                    tracing::debug!(program = %program, pid, "stdout receiver dropped; stopped reading");
                    return;
                }
            }
            Err(error) => {
                tracing::warn!(program = %program, pid, %error, "reading stdout failed");
                return;
            }
        }
    }
    tracing::debug!(program = %program, pid, "stdout closed");
}

/// Reads stderr line by line into the tail, logging each line at debug.
async fn drain_stderr<R: AsyncRead + Unpin>(
    stderr: R,
    max_line: usize,
    tail: Arc<Mutex<StderrTail>>,
    forward: Option<tokio::sync::mpsc::Sender<String>>,
    program: String,
    pid: u32,
) {
    let mut lines = FramedRead::new(stderr, LineCodec::new(max_line));
    while let Some(frame) = lines.next().await {
        let line = match frame.map(text_line) {
            Ok(Ok(line)) => line,
            Ok(Err(error)) => format!("[{error}; omitted]"),
            Err(error) => {
                tracing::warn!(program = %program, pid, %error, "reading stderr failed");
                return;
            }
        };
        tracing::debug!(program = %program, pid, stderr = %line);
        if let Some(forward) = &forward {
            // Full or closed: the watcher misses this line, the child goes on.
            let _ = forward.try_send(line.clone());
        }
        lock(&tail).push(line);
    }
}

/// The last lines of stderr, bounded in lines and bytes.
#[derive(Debug)]
struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
}

impl StderrTail {
    fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self { lines: VecDeque::new(), bytes: 0, max_lines, max_bytes }
    }

    fn push(&mut self, mut line: String) {
        line.truncate(prefix_within(&line, self.max_bytes).len());
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > self.max_lines || self.bytes > self.max_bytes {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    fn joined(&self) -> String {
        let mut out = String::with_capacity(self.bytes + self.lines.len());
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(line);
        }
        out
    }
}

/// A capped line as lossily decoded text (the protocol's shared [`LineCodec`] splits).
/// Most stderr lines [`quote_stderr`] keeps.
pub const STDERR_QUOTE_LINES: usize = 12;
/// Most bytes [`quote_stderr`] keeps.
pub const STDERR_QUOTE_BYTES: usize = 2000;
/// Longest stderr line, in characters, [`quote_stderr`] keeps whole.
pub const STDERR_LINE_CHARS: usize = 240;

/// How a child ended, to finish a sentence: `with status 1`, `on signal 9`, or
/// `(exit status unknown)`.
pub fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("with status {code}"),
            (None, Some(signal)) => format!("on signal {signal}"),
            (None, None) => "(exit status unknown)".to_owned(),
        },
        None => "(exit status unknown)".to_owned(),
    }
}

/// The part of a stderr tail worth quoting to a user when a CLI failed: its last
/// [`STDERR_QUOTE_LINES`] lines that are neither blank nor Rust backtrace frames
/// (`Stack backtrace:`, `  3: <unknown>`, `at src/x.rs:1` say nothing to a user; the
/// error line above them does), each cut to [`STDERR_LINE_CHARS`] characters (so a
/// huge line does not push out the ones that say what went wrong), the whole at most
/// [`STDERR_QUOTE_BYTES`] bytes (its start cut, marked `…`). Empty when nothing is left.
pub fn quote_stderr(tail: &str) -> String {
    let frame = |l: &str| {
        let t = l.trim();
        t.is_empty()
            || t == "Stack backtrace:"
            || t.starts_with("at ")
            || t.split_once(": ").or(t.split_once(':')).is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
    };
    let lines: Vec<String> = tail
        .lines()
        .filter(|l| !frame(l))
        .map(|l| match l.char_indices().nth(STDERR_LINE_CHARS) {
            Some((end, _)) => format!("{}…", &l[..end]),
            None => l.to_owned(),
        })
        .collect();
    let quoted = lines[lines.len().saturating_sub(STDERR_QUOTE_LINES)..].join("\n");
    if quoted.len() <= STDERR_QUOTE_BYTES {
        return quoted;
    }
    format!("…{}", suffix_within(&quoted, STDERR_QUOTE_BYTES))
}

fn text_line(item: Result<NumberedLine, LineError>) -> Result<String, LineError> {
    item.map(|(_, line)| String::from_utf8_lossy(&line).into_owned())
}

#[cfg(test)]
mod tests;
