//! Recording what an agent CLI hears and says, so adapter tests can replay it offline.
//!
//! When the adapter runs with [`TAP_DIR_ENV`] set to a directory, every
//! [`AgentProcess`](crate::child::AgentProcess) it starts is recorded into
//! `<dir>/<adapter pid>.jsonl`, one [`TapRecord`] per line: the arguments it was started
//! with, each raw stdout line, each line written to its stdin, the signals the adapter
//! sent it, and how it exited, each
//! with the milliseconds since that process started. The live agent tests save these
//! files as fixtures (`tests/fixtures/agents/<agent>/`), and the fake CLI of
//! `tests/agents` plays them back to the adapter in their place. Without the variable
//! nothing is recorded and nothing is opened.
//!
//! The recording is for tests: it writes synchronously, and a failed write is logged and
//! ends the recording, never the agent.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use std::pin::Pin;
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The environment variable naming the directory recordings are written to.
pub const TAP_DIR_ENV: &str = "TERMINULL_CLI_TAP_DIR";

/// One line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TapRecord {
    /// Which process of the recording, from 1 in start order (a per-turn adapter starts
    /// one per turn).
    pub proc: u64,
    /// Milliseconds since that process started.
    pub ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: TapEvent,
}

/// What a [`TapRecord`] records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TapEvent {
    /// The process started with these arguments (the program itself left out).
    Spawn {
        /// The arguments.
        spawn: Vec<String>,
    },
    /// One stdout line, without its newline (invalid UTF-8 replaced by U+FFFD).
    Out {
        /// The line.
        out: String,
    },
    /// One line the adapter wrote to stdin, without its newline.
    In {
        /// The line.
        #[serde(rename = "in")]
        input: String,
    },
    /// The adapter signalled the process's group (to interrupt or end it).
    SentSignal {
        /// The signal number.
        sent_signal: i32,
    },
    /// The process exited: its code, or the signal that ended it.
    Exit {
        /// The exit code; `null` when a signal ended it.
        exit: Option<i32>,
        /// The signal, when one ended it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
}

/// The recording of one process; cheap to clone into the reader tasks.
#[derive(Debug, Clone)]
pub(crate) struct Tap {
    file: Arc<Mutex<Option<File>>>,
    proc: u64,
    start: Instant,
}

impl Tap {
    /// The recording of a process that starts now with `args`, when recording is on.
    pub(crate) fn start(args: &[String]) -> Option<Tap> {
        static FILE: OnceLock<Option<Arc<Mutex<Option<File>>>>> = OnceLock::new();
        static PROCS: AtomicU64 = AtomicU64::new(0);
        let file = FILE.get_or_init(|| open(std::env::var_os(TAP_DIR_ENV)?.as_ref())).clone()?;
        let tap = Tap { file, proc: PROCS.fetch_add(1, Ordering::Relaxed) + 1, start: Instant::now() };
        tap.record(TapEvent::Spawn { spawn: args.to_vec() });
        Some(tap)
    }

    /// Records one stdout line.
    pub(crate) fn stdout_line(&self, line: &[u8]) {
        self.record(TapEvent::Out { out: String::from_utf8_lossy(line).into_owned() });
    }

    /// Records one line written to stdin.
    pub(crate) fn stdin_line(&self, line: &[u8]) {
        self.record(TapEvent::In { input: String::from_utf8_lossy(line).into_owned() });
    }

    /// Records what was written to stdin, one record per line.
    pub(crate) fn stdin_bytes(&self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        for line in text.strip_suffix('\n').unwrap_or(&text).split('\n') {
            self.record(TapEvent::In { input: line.to_owned() });
        }
    }

    /// Records a signal sent to the process group.
    pub(crate) fn signal(&self, signal: i32) {
        self.record(TapEvent::SentSignal { sent_signal: signal });
    }

    /// Records the exit.
    pub(crate) fn exit(&self, status: ExitStatus) {
        use std::os::unix::process::ExitStatusExt;
        self.record(TapEvent::Exit { exit: status.code(), signal: status.signal() });
    }

    fn record(&self, event: TapEvent) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let record = TapRecord { proc: self.proc, ms, event };
        let mut guard = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(file) = guard.as_mut() else { return };
        let written = serde_json::to_vec(&record).map_err(std::io::Error::other).and_then(|mut line| {
            line.push(b'\n');
            file.write_all(&line)
        });
        if let Err(error) = written {
            tracing::warn!(%error, "writing the CLI recording failed; recording stops");
            *guard = None;
        }
    }
}

/// Splits a byte stream into lines for the recording, holding at most `max` bytes of
/// one line; a longer line is recorded as a marker.
#[derive(Debug)]
struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    overflowed: bool,
}

/// What is recorded in place of a line over the cap.
const OVERSIZED_LINE: &[u8] = b"[a line over the recording cap was left out]";

impl LineSplitter {
    fn new(max: usize) -> Self {
        Self { buf: Vec::new(), max, overflowed: false }
    }

    fn feed(&mut self, bytes: &[u8], mut emit: impl FnMut(&[u8])) {
        for chunk in bytes.split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match chunk.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (chunk, false),
            };
            if !self.overflowed {
                if self.buf.len() + body.len() > self.max {
                    self.overflowed = true;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(body);
                }
            }
            if ends {
                if self.overflowed {
                    emit(OVERSIZED_LINE);
                } else {
                    let line = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
                    emit(line);
                }
                self.buf.clear();
                self.overflowed = false;
            }
        }
    }
}

/// A child's stdout that records each line it passes on (for a JSON-RPC child, whose
/// stdout the peer reads).
#[derive(Debug)]
pub(crate) struct TappedStdout<R> {
    inner: R,
    tap: Tap,
    lines: LineSplitter,
}

impl<R> TappedStdout<R> {
    pub(crate) fn new(inner: R, tap: Tap, max_line: usize) -> Self {
        Self { inner, tap, lines: LineSplitter::new(max_line) }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TappedStdout<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &poll {
            let tap = &this.tap;
            this.lines.feed(&buf.filled()[before..], |line| tap.stdout_line(line));
        }
        poll
    }
}

/// A child's stdin that records each line written to it.
#[derive(Debug)]
pub(crate) struct TappedStdin<W> {
    inner: W,
    tap: Tap,
    lines: LineSplitter,
}

impl<W> TappedStdin<W> {
    pub(crate) fn new(inner: W, tap: Tap, max_line: usize) -> Self {
        Self { inner, tap, lines: LineSplitter::new(max_line) }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for TappedStdin<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = &poll {
            let tap = &this.tap;
            this.lines.feed(&buf[..*written], |line| tap.stdin_line(line));
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn open(dir: &Path) -> Option<Arc<Mutex<Option<File>>>> {
    let path = dir.join(format!("{}.jsonl", std::process::id()));
    match std::fs::create_dir_all(dir).and_then(|()| File::options().create(true).append(true).open(&path)) {
        Ok(file) => {
            tracing::info!(path = %path.display(), "recording agent CLI processes");
            Some(Arc::new(Mutex::new(Some(file))))
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot open the CLI recording; not recording");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_split_across_reads_are_recorded_whole_and_oversized_ones_as_a_marker() {
        let mut lines = LineSplitter::new(8);
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for piece in [&b"ab"[..], b"c\r\nde", b"f\n", b"0123456789", b"x\nok\n"] {
            lines.feed(piece, |l| seen.push(l.to_vec()));
        }
        assert_eq!(seen, [b"abc".to_vec(), b"def".to_vec(), OVERSIZED_LINE.to_vec(), b"ok".to_vec()]);
    }

    #[test]
    fn records_read_back_as_the_events_they_were_written_from() {
        let cases = [
            (
                json!({"proc":1,"ms":0,"spawn":["-p","--verbose"]}),
                TapEvent::Spawn { spawn: vec!["-p".into(), "--verbose".into()] },
            ),
            (json!({"proc":1,"ms":5,"out":"{\"type\":\"x\"}"}), TapEvent::Out { out: "{\"type\":\"x\"}".into() }),
            (json!({"proc":1,"ms":6,"in":"hello"}), TapEvent::In { input: "hello".into() }),
            (json!({"proc":1,"ms":7,"exit":0}), TapEvent::Exit { exit: Some(0), signal: None }),
            (json!({"proc":1,"ms":7,"sent_signal":2}), TapEvent::SentSignal { sent_signal: 2 }),
            (json!({"proc":2,"ms":8,"exit":null,"signal":9}), TapEvent::Exit { exit: None, signal: Some(9) }),
        ];
        for (wire, event) in cases {
            let record: TapRecord = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(record.event, event, "{wire}");
            assert_eq!(serde_json::to_value(&record).unwrap(), wire);
        }
    }
}
