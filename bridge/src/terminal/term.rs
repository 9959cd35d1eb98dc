//! One open terminal: its shell, its bounded scrollback, its followers, its end.
//!
//! A reader thread moves the shell's output into the scrollback ring (oldest chunks
//! dropped past the configured bytes) and onto a bounded broadcast; a follower that
//! falls behind the broadcast resumes from the ring, so a device that stops reading
//! costs the bridge nothing beyond the ring and its connection's bounded queue. A
//! writer thread takes input from a bounded queue (full: the input is refused `busy`).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use terminull_protocol::terminal::{MAX_OUTPUT_CHUNK, TerminalEndReason, TerminalExit, TerminalId, TerminalListing};
use tokio::sync::{broadcast, oneshot};

use super::pty;

/// Output chunks (or the exit) a follower may fall behind before it resumes from the ring.
const LIVE_BUFFER: usize = 256;
/// Past this many chunks not yet taken by the slowest follower, the reader waits
/// (back-pressure on the shell, as a real terminal gives) …
const THROTTLE_AT: usize = LIVE_BUFFER / 2;
/// … for at most this long per stall: a follower that stopped reading does not hold
/// the shell up any longer; it falls behind and later resumes from the scrollback.
const THROTTLE_BUDGET: Duration = Duration::from_secs(1);
/// Input writes queued at most for the shell.
const INPUT_QUEUE: usize = 64;
/// Between SIGHUP and SIGKILL when a terminal is closed.
const KILL_GRACE: Duration = Duration::from_millis(500);

/// What a terminal's followers receive.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// Chunk `seq` of output.
    Output(u64, Bytes),
    /// The terminal ended.
    Exit(TerminalExit),
}

#[derive(Debug)]
struct State {
    ring: VecDeque<(u64, Bytes)>,
    ring_bytes: usize,
    last_seq: u64,
    cols: u16,
    rows: u16,
    ended: Option<TerminalExit>,
    end_reason: Option<TerminalEndReason>,
    last_activity: Instant,
}

/// One terminal, shared by the manager, its lifecycle task and its followers.
#[derive(Debug)]
pub(crate) struct Terminal {
    pub(crate) id: TerminalId,
    cwd: String,
    shell: String,
    started_ts: f64,
    /// The shell's pid: its session and process group id.
    pub(crate) pid: u32,
    master: OwnedFd,
    scrollback: usize,
    input: std::sync::mpsc::SyncSender<Vec<u8>>,
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
    attached: AtomicU32,
}

/// What attaching gives a follower: the scrollback after its `since_seq`, and the live
/// events after it, with nothing lost or repeated between the two.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) chunks: Vec<(u64, Bytes)>,
    pub(crate) live: broadcast::Receiver<Event>,
    pub(crate) ended: Option<TerminalExit>,
}

/// Counts a follower while it lives.
#[derive(Debug)]
pub(crate) struct Attachment(pub(crate) Arc<Terminal>);

impl Drop for Attachment {
    fn drop(&mut self) {
        self.0.attached.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// Why input was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputError {
    /// The shell is not reading: the input queue is full.
    Full,
    /// The terminal ended.
    Gone,
}

impl Terminal {
    /// Starts `shell` in `cwd`; `on_end` runs (once) after the terminal ended and its
    /// followers were told.
    pub(crate) fn start(
        id: TerminalId,
        shell: &std::path::Path,
        cwd: &std::path::Path,
        (cols, rows): (u16, u16),
        scrollback: usize,
        on_end: impl FnOnce(&TerminalId) + Send + 'static,
    ) -> Result<Arc<Self>, pty::PtyError> {
        let pty::Spawned { master, mut child } = pty::spawn(shell, cwd, cols, rows)?;
        let pid = child.id().unwrap_or(0);
        let reader = master.try_clone().map_err(pty::PtyError::Allocate)?;
        let writer = master.try_clone().map_err(pty::PtyError::Allocate)?;
        let (input, input_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(INPUT_QUEUE);
        let terminal = Arc::new(Terminal {
            id,
            cwd: cwd.display().to_string(),
            shell: shell.display().to_string(),
            started_ts: terminull_protocol::blocks::now_ts(),
            pid,
            master,
            scrollback,
            input,
            state: Mutex::new(State {
                ring: VecDeque::new(),
                ring_bytes: 0,
                last_seq: 0,
                cols,
                rows,
                ended: None,
                end_reason: None,
                last_activity: Instant::now(),
            }),
            events: broadcast::channel(LIVE_BUFFER).0,
            attached: AtomicU32::new(0),
        });
        std::thread::Builder::new()
            .name(format!("pty-write-{pid}"))
            .spawn(move || {
                let mut writer = std::fs::File::from(writer);
                while let Ok(bytes) = input_rx.recv() {
                    if writer.write_all(&bytes).is_err() {
                        return;
                    }
                }
            })
            .map_err(pty::PtyError::Allocate)?;
        let (read_done, read_ended) = oneshot::channel::<()>();
        let weak = Arc::downgrade(&terminal);
        std::thread::Builder::new()
            .name(format!("pty-read-{pid}"))
            .spawn(move || {
                let mut reader = std::fs::File::from(reader);
                let mut buf = vec![0u8; MAX_OUTPUT_CHUNK];
                let mut budget = THROTTLE_BUDGET;
                loop {
                    // EIO once every holder of the slave side is gone: the session ended.
                    let n = match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let Some(terminal) = weak.upgrade() else { break };
                    terminal.push_output(Bytes::copy_from_slice(&buf[..n]));
                    if terminal.events.len() < THROTTLE_AT {
                        budget = THROTTLE_BUDGET;
                    }
                    while terminal.events.len() >= THROTTLE_AT && !budget.is_zero() {
                        let step = Duration::from_millis(2).min(budget);
                        std::thread::sleep(step);
                        budget -= step;
                    }
                }
                let _ = read_done.send(());
            })
            .map_err(pty::PtyError::Allocate)?;
        let lifecycle = terminal.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // The rest of the output, unless something the shell left holds the pty.
            let _ = tokio::time::timeout(Duration::from_secs(1), read_ended).await;
            if let Ok(sid) = i32::try_from(lifecycle.pid) {
                pty::kill_session_now(sid);
            }
            lifecycle.finish(status.ok());
            on_end(&lifecycle.id);
        });
        Ok(terminal)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push_output(&self, bytes: Bytes) {
        let mut state = self.lock();
        state.last_seq += 1;
        let seq = state.last_seq;
        state.ring_bytes += bytes.len();
        state.ring.push_back((seq, bytes.clone()));
        while state.ring_bytes > self.scrollback && state.ring.len() > 1 {
            if let Some((_, old)) = state.ring.pop_front() {
                state.ring_bytes -= old.len();
            }
        }
        // Sent under the lock, so an attach sees each chunk either in the ring or live.
        let _ = self.events.send(Event::Output(seq, bytes));
    }

    fn finish(&self, status: Option<std::process::ExitStatus>) {
        use std::os::unix::process::ExitStatusExt;
        let mut state = self.lock();
        let exit = TerminalExit {
            terminal_id: self.id.clone(),
            reason: state.end_reason.unwrap_or(TerminalEndReason::Exited),
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            last_seq: state.last_seq,
        };
        tracing::info!(terminal = %self.id, reason = ?exit.reason, code = ?exit.exit_code, "terminal ended");
        state.ended = Some(exit.clone());
        let _ = self.events.send(Event::Exit(exit));
    }

    /// Ends the terminal for `reason` (the first reason given wins): SIGHUP to the
    /// shell's process group, SIGKILL to its whole session after a grace period.
    pub(crate) fn end(&self, reason: TerminalEndReason) {
        {
            let mut state = self.lock();
            if state.ended.is_some() {
                return;
            }
            state.end_reason.get_or_insert(reason);
        }
        tokio::spawn(pty::kill_session(self.pid, KILL_GRACE));
    }

    /// The ring after `since_seq` and the live events after it.
    pub(crate) fn snapshot(&self, since_seq: u64) -> Snapshot {
        let state = self.lock();
        let chunks = state.ring.iter().filter(|(seq, _)| *seq > since_seq).cloned().collect();
        Snapshot { chunks, live: self.events.subscribe(), ended: state.ended.clone() }
    }

    /// A new follower.
    pub(crate) fn attach(self: &Arc<Self>, since_seq: u64) -> (Attachment, Snapshot) {
        self.attached.fetch_add(1, Ordering::Relaxed);
        self.touch();
        (Attachment(self.clone()), self.snapshot(since_seq))
    }

    pub(crate) fn touch(&self) {
        self.lock().last_activity = Instant::now();
    }

    /// True when nobody follows the terminal and nobody touched it for `idle`.
    pub(crate) fn idle_for(&self, idle: Duration) -> bool {
        self.attached.load(Ordering::Relaxed) == 0 && self.lock().last_activity.elapsed() >= idle
    }

    pub(crate) fn ended(&self) -> bool {
        self.lock().ended.is_some()
    }

    pub(crate) fn write(&self, bytes: Vec<u8>) -> Result<(), InputError> {
        self.touch();
        self.input.try_send(bytes).map_err(|e| match e {
            std::sync::mpsc::TrySendError::Full(_) => InputError::Full,
            std::sync::mpsc::TrySendError::Disconnected(_) => InputError::Gone,
        })
    }

    pub(crate) fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        pty::resize(&self.master, cols, rows)?;
        let mut state = self.lock();
        (state.cols, state.rows) = (cols, rows);
        state.last_activity = Instant::now();
        Ok(())
    }

    pub(crate) fn listing(&self) -> TerminalListing {
        let state = self.lock();
        TerminalListing {
            terminal_id: self.id.clone(),
            cwd: self.cwd.clone(),
            shell: self.shell.clone(),
            cols: state.cols,
            rows: state.rows,
            started_ts: self.started_ts,
            last_seq: state.last_seq,
            attached: self.attached.load(Ordering::Relaxed),
        }
    }
}
