//! Why recording or replaying could not run.

use std::io;
use std::time::Duration;

use serde_json::Value;
use terminull_process::child::{SpawnError, WriteError};

/// Why recording or replaying could not be carried out. (An adapter that answers
/// differently from a recording is not an error of [`replay`](super::replay): it is the
/// [`ReplayReport`](super::ReplayReport)'s [`Mismatch`](super::Mismatch).)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// The session's temporary working directory could not be created.
    #[error("could not create a temporary directory for the session: {0}")]
    TempDir(#[source] io::Error),
    /// The adapter could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// A request could not be written to the adapter.
    #[error("could not send `{method}` to the adapter: {source}{}", tail_suffix(.stderr_tail))]
    Write {
        /// The request's method.
        method: String,
        /// The write error.
        #[source]
        source: WriteError,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// The adapter did not answer a request in time.
    #[error("no answer to `{method}` within {waited:?}{}", tail_suffix(.stderr_tail))]
    Timeout {
        /// The request's method.
        method: String,
        /// How long the recorder waited.
        waited: Duration,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// The turn started by `send` did not end with a `session_end` block in time.
    #[error("the turn did not end with a session_end block within {waited:?}{}", tail_suffix(.stderr_tail))]
    TurnTimeout {
        /// How long the recorder waited.
        waited: Duration,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// The adapter closed its stdout (typically: it exited) while an answer was due.
    #[error("the adapter closed its stdout while the recorder waited for {waiting_for}{}", tail_suffix(.stderr_tail))]
    Closed {
        /// What the recorder was waiting for, such as "the answer to `start`".
        waiting_for: String,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// `initialize` was answered without a declaration, so the script cannot go on.
    #[error("`initialize` was not answered with a declaration: {response}")]
    Initialize {
        /// The adapter's response.
        response: Value,
    },
    /// The adapter did not exit after `stop`.
    #[error("the adapter did not exit within {waited:?} after the script ended{}", tail_suffix(.stderr_tail))]
    NoExit {
        /// How long the recorder waited.
        waited: Duration,
        /// The adapter's last stderr lines.
        stderr_tail: String,
    },
    /// A line of a recording is not a valid entry.
    #[error("transcript line {line}: {problem}")]
    Parse {
        /// 1-based line number in the JSONL text.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() { String::new() } else { format!("; the adapter's stderr ends with:\n{tail}") }
}
