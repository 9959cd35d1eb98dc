//! The adapter process, driven one line at a time by the recorder and the replayer.

use std::ffi::OsStr;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::Value;
use terminull_process::child::{AgentProcess, LineReceiver, Lines, SpawnOptions, WriteError};
use terminull_protocol::ndjson::LineError;
use tokio::process::Command;
use tokio::time::Instant;

use super::RecordingError;

/// How long the final shutdown waits at each step for an adapter that is still running.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// One stdout line of the adapter.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Line {
    Json(Value),
    Raw(String),
}

/// The outcome of waiting for a stdout line.
#[derive(Debug)]
pub(super) enum Read {
    Line(Line),
    /// stdout reached end of file.
    Closed,
    TimedOut,
}

/// An adapter process driven one line at a time.
#[derive(Debug)]
pub(super) struct Driven {
    process: AgentProcess,
    lines: LineReceiver,
}

impl Driven {
    pub(super) fn spawn(program: &OsStr, args: &[String]) -> Result<Self, RecordingError> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        // Text lines, so that a line that is not JSON is kept whole for its `raw` entry.
        let opts = SpawnOptions { lines: Lines::Text, ..SpawnOptions::default() };
        let (process, lines) = AgentProcess::spawn(cmd, opts)?;
        Ok(Self { process, lines })
    }

    pub(super) async fn write(&mut self, msg: &Value) -> Result<(), WriteError> {
        self.process.write_json(msg).await
    }

    /// The next non-blank stdout line, or why there is none by `deadline`.
    pub(super) async fn next(&mut self, deadline: Instant) -> Read {
        loop {
            let item = match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Err(_) => return Read::TimedOut,
                Ok(None) => return Read::Closed,
                Ok(Some(item)) => item,
            };
            let line = match item {
                Ok(Value::String(text)) => {
                    if text.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Value>(&text) {
                        Ok(v) => Line::Json(v),
                        Err(_) => Line::Raw(text),
                    }
                }
                // Text mode yields strings only; keep anything else as the JSON it is.
                Ok(other) => Line::Json(other),
                Err(LineError::TooLong { line, length, .. }) => {
                    Line::Raw(format!("<line {line} too long: {length} bytes>"))
                }
                Err(LineError::NotJson { preview, .. }) => Line::Raw(preview),
                Err(other) => Line::Raw(format!("<{other}>")),
            };
            tracing::trace!(?line, "adapter line");
            return Read::Line(line);
        }
    }

    /// Waits until `deadline` for the process to exit (stdout must be drained first).
    pub(super) async fn wait_exit(&mut self, deadline: Instant) -> Option<ExitStatus> {
        tokio::time::timeout_at(deadline, self.process.wait()).await.ok().and_then(Result::ok)
    }

    /// Ends the process whatever state it is in; its exit status when known.
    pub(super) async fn shutdown(&mut self) -> Option<ExitStatus> {
        self.process.shutdown(SHUTDOWN_GRACE).await.status
    }

    pub(super) fn stderr_tail(&self) -> String {
        self.process.stderr_tail()
    }
}

/// A fresh temporary directory for the session's `cwd`, removed when dropped.
pub(super) fn temp_cwd() -> Result<tempfile::TempDir, RecordingError> {
    tempfile::Builder::new().prefix("terminull-transcript-").tempdir().map_err(RecordingError::TempDir)
}
