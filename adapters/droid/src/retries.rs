//! droid's retries of a failing model call, which it prints nowhere but in its own log.
//!
//! `droid exec -o stream-json` retries a failed model call for about four minutes, and
//! neither its stdout nor its stderr says so; its log, `~/.factory/logs/droid-log-single.log`,
//! has one line per failed attempt:
//!
//! ```text
//! [2026-12-02T06:25:36.786Z] WARN: [LLM] LLM error | Context: {"attempt":1,"failureReason":"overloaded","statusCode":500,…,"tags":{…,"sessionId":"fc3d…"}}
//! ```
//!
//! While a turn runs, the adapter reads what the log gained since the turn started
//! ([`LogWatch`]) and turns such lines of its own session into retry notices
//! ([`retry_of`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde_json::Value;

/// The most of the log read at one poll; the rest waits for the next.
const MAX_READ: u64 = 256 * 1024;
/// A partial line longer than this is dropped.
const MAX_LINE: usize = 64 * 1024;

/// droid's log file under `home`.
pub fn log_path(home: &std::path::Path) -> PathBuf {
    home.join(".factory/logs/droid-log-single.log")
}

/// Follows the log from where it ended when the watch started.
#[derive(Debug)]
pub struct LogWatch {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl LogWatch {
    /// Watches `path` from its current end (from its start when it does not exist yet).
    pub fn start(path: PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        LogWatch { path, offset, partial: Vec::new() }
    }

    /// The complete lines the log gained since the last poll (bounded); none when it
    /// cannot be read. A log that shrank (rotated) is followed from its start.
    pub fn poll(&mut self) -> Vec<String> {
        let Ok(mut file) = std::fs::File::open(&self.path) else { return Vec::new() };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut chunk = Vec::new();
        let Ok(read) = file.take(MAX_READ).read_to_end(&mut chunk) else { return Vec::new() };
        self.offset += read as u64;
        self.partial.extend_from_slice(&chunk);
        let Some(last_newline) = self.partial.iter().rposition(|b| *b == b'\n') else {
            if self.partial.len() > MAX_LINE {
                self.partial.clear();
            }
            return Vec::new();
        };
        let rest = self.partial.split_off(last_newline + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        String::from_utf8_lossy(&complete).lines().map(str::to_owned).collect()
    }
}

/// A failed model call of `session` (any session when still unknown) in one log line:
/// the attempt that failed and why.
pub fn retry_of(line: &str, session: Option<&str>) -> Option<(u64, String)> {
    let (_, context) = line.split_once("[LLM] LLM error | Context: ")?;
    let context: Value = serde_json::from_str(context.trim()).ok()?;
    if let Some(session) = session
        && context["tags"]["sessionId"].as_str().is_some_and(|s| s != session)
    {
        return None;
    }
    let attempt = context["attempt"].as_u64()?;
    let why = match (context["statusCode"].as_u64(), context["failureReason"].as_str()) {
        (Some(status), Some(reason)) => format!("HTTP {status} ({reason})"),
        (Some(status), None) => format!("HTTP {status}"),
        (None, Some(reason)) => reason.to_owned(),
        (None, None) => context["errorName"].as_str().unwrap_or("the model call failed").to_owned(),
    };
    Some((attempt, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"[2026-12-02T06:25:36.786Z] WARN: [LLM] LLM error | Context: {"attempt":1,"modelId":"mock-claude","providerType":"anthropic","errorName":"Error","failureReason":"overloaded","statusCode":500,"count":0,"tags":{"clientType":"cli","sessionId":"fc3df945-d155-4de6-8bb4-9c05fac372e5"}}"#;

    #[test]
    fn a_failed_model_call_of_the_session_is_read_from_the_log_line() {
        assert_eq!(
            retry_of(LINE, Some("fc3df945-d155-4de6-8bb4-9c05fac372e5")),
            Some((1, "HTTP 500 (overloaded)".into()))
        );
        assert_eq!(retry_of(LINE, None), Some((1, "HTTP 500 (overloaded)".into())));
        assert_eq!(retry_of(LINE, Some("another-session")), None, "another session's call");
        assert_eq!(retry_of("[…] WARN: Retry attempt failed", None), None);
    }

    #[test]
    fn the_watch_reads_only_what_the_log_gained_in_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("droid-log-single.log");
        std::fs::write(&path, "old line\n").unwrap();
        let mut watch = LogWatch::start(path.clone());
        assert!(watch.poll().is_empty());
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, b"new 1\nnew 2\npart").unwrap();
        assert_eq!(watch.poll(), ["new 1", "new 2"]);
        std::io::Write::write_all(&mut file, b"ial\n").unwrap();
        assert_eq!(watch.poll(), ["partial"]);
        std::fs::write(&path, "rotated\n").unwrap();
        assert_eq!(watch.poll(), ["rotated"], "a shorter log is read from its start");
    }
}
