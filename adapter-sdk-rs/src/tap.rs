//! Recording what an agent CLI hears and says, so adapter tests can replay it offline.
//!
//! When the adapter runs with [`TAP_DIR_ENV`] set to a directory, every
//! [`AgentProcess`](crate::child::AgentProcess) it starts is recorded into
//! `<dir>/<adapter pid>.jsonl`, one [`TapRecord`] per line: the arguments it was started
//! with, each raw stdout line, each line written to its stdin, and how it exited, each
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

use serde::{Deserialize, Serialize};

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

    /// Records what was written to stdin, one record per line.
    pub(crate) fn stdin_bytes(&self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        for line in text.strip_suffix('\n').unwrap_or(&text).split('\n') {
            self.record(TapEvent::In { input: line.to_owned() });
        }
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
    fn records_read_back_as_the_events_they_were_written_from() {
        let cases = [
            (
                json!({"proc":1,"ms":0,"spawn":["-p","--verbose"]}),
                TapEvent::Spawn { spawn: vec!["-p".into(), "--verbose".into()] },
            ),
            (json!({"proc":1,"ms":5,"out":"{\"type\":\"x\"}"}), TapEvent::Out { out: "{\"type\":\"x\"}".into() }),
            (json!({"proc":1,"ms":6,"in":"hello"}), TapEvent::In { input: "hello".into() }),
            (json!({"proc":1,"ms":7,"exit":0}), TapEvent::Exit { exit: Some(0), signal: None }),
            (json!({"proc":2,"ms":8,"exit":null,"signal":9}), TapEvent::Exit { exit: None, signal: Some(9) }),
        ];
        for (wire, event) in cases {
            let record: TapRecord = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(record.event, event, "{wire}");
            assert_eq!(serde_json::to_value(&record).unwrap(), wire);
        }
    }
}
