//! The replayer: an adapter driven with the bridge side of a recording, its answers
//! compared line by line.

use std::ffi::OsStr;
use std::fmt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::appends::AppendRun;
use super::driven::{Driven, Line, Read, temp_cwd};
use super::{Entry, Normalizer, RecordingError};

/// Timeouts of [`replay_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// How long to wait for each line the recording expects. Default 20 s.
    pub line_timeout: Duration,
    /// How long the adapter has, after the last entry, to close stdout and exit. Default 5 s.
    pub exit_timeout: Duration,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self { line_timeout: Duration::from_secs(20), exit_timeout: Duration::from_secs(5) }
    }
}

/// Where an adapter departed from a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// 0-based index of the recording entry (its JSONL line is `entry + 1` when the
    /// file has no blank lines). Equal to the recording's length for what happens
    /// after its last entry.
    pub entry: usize,
    /// What went wrong.
    pub kind: MismatchKind,
}

/// The kinds of [`Mismatch`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MismatchKind {
    /// The adapter wrote a different line.
    Different {
        /// The recording's entry.
        expected: Entry,
        /// The adapter's line, normalised.
        actual: Entry,
        /// JSON pointer to the first difference inside `msg` (`/params/block/text`);
        /// empty when the lines differ as a whole (a raw line against a JSON one).
        path: String,
    },
    /// The adapter wrote nothing within the line timeout.
    Timeout {
        /// The recording's entry.
        expected: Entry,
        /// How long replay waited.
        waited: Duration,
    },
    /// The adapter closed its stdout (typically: it exited) while a line was expected.
    Closed {
        /// The recording's entry.
        expected: Entry,
    },
    /// A message could not be written to the adapter (it closed its stdin or exited).
    WriteFailed {
        /// The message, as written.
        entry: Entry,
        /// The write error.
        error: String,
    },
    /// After the recording's last entry, the adapter wrote another line.
    Extra {
        /// The adapter's line, normalised.
        actual: Entry,
    },
    /// After the recording's last entry, the adapter did not exit in time.
    NoExit {
        /// How long replay waited.
        waited: Duration,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry {} (transcript line {}): ", self.entry, self.entry + 1)?;
        match &self.kind {
            MismatchKind::Different { expected, actual, path } => {
                let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
                write!(f, "the adapter's line differs{at}\n  expected: {expected}\n  actual:   {actual}")
            }
            MismatchKind::Timeout { expected, waited } => {
                write!(f, "the adapter wrote nothing within {waited:?}\n  expected: {expected}")
            }
            MismatchKind::Closed { expected } => {
                write!(f, "the adapter closed its stdout\n  expected: {expected}")
            }
            MismatchKind::WriteFailed { entry, error } => {
                write!(f, "could not write to the adapter: {error}\n  message: {entry}")
            }
            MismatchKind::Extra { actual } => {
                write!(f, "the transcript has ended but the adapter wrote another line\n  actual:   {actual}")
            }
            MismatchKind::NoExit { waited } => {
                write!(f, "the transcript has ended but the adapter did not exit within {waited:?}")
            }
        }
    }
}

/// The outcome of [`replay`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// Entries in the recording.
    pub entries: usize,
    /// `to_adapter` entries written to the adapter.
    pub sent: usize,
    /// `from_adapter` entries the adapter matched.
    pub matched: usize,
    /// The first difference; `None` when the adapter matched the whole recording and
    /// exited.
    pub mismatch: Option<Mismatch>,
    /// The adapter's exit status, when it was reaped.
    pub exit_status: Option<ExitStatus>,
    /// The adapter's last stderr lines.
    pub stderr_tail: String,
}

impl ReplayReport {
    /// True when the adapter matched every entry and exited.
    pub fn is_match(&self) -> bool {
        self.mismatch.is_none()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mismatch {
            None => write!(
                f,
                "transcript matched: {} entries, {} sent, {} adapter lines matched",
                self.entries, self.sent, self.matched
            )?,
            Some(mismatch) => write!(
                f,
                "transcript mismatch after {} sent and {} matched of {} entries: {mismatch}",
                self.sent, self.matched, self.entries
            )?,
        }
        if let Some(status) = self.exit_status {
            write!(f, "\nadapter {status}")?;
        }
        if self.mismatch.is_some() && !self.stderr_tail.is_empty() {
            write!(f, "\nthe adapter's stderr ends with:\n{}", self.stderr_tail)?;
        }
        Ok(())
    }
}

/// [`replay_with`] with the default [`ReplayOptions`].
pub async fn replay(
    recording: &[Entry],
    program: impl AsRef<OsStr>,
    args: &[String],
) -> Result<ReplayReport, RecordingError> {
    replay_with(recording, program, args, &ReplayOptions::default()).await
}

/// Runs `program args…` as an adapter and drives it with the `to_adapter` side of
/// `recording`, comparing every line it writes with the recording's `from_adapter`
/// entries (see the [module documentation](super)). Stops at the first difference. An
/// adapter that departs from the recording gives `Ok` with a [`Mismatch`] in the
/// report; `Err` means the replay itself could not run.
pub async fn replay_with(
    recording: &[Entry],
    program: impl AsRef<OsStr>,
    args: &[String],
    opts: &ReplayOptions,
) -> Result<ReplayReport, RecordingError> {
    let dir = temp_cwd()?;
    let mut adapter = Driven::spawn(program.as_ref(), args)?;
    let mut report = ReplayReport {
        entries: recording.len(),
        sent: 0,
        matched: 0,
        mismatch: None,
        exit_status: None,
        stderr_tail: String::new(),
    };
    let kind = drive(recording, &mut adapter, dir.path(), opts, &mut report).await;
    report.mismatch = kind.map(|(entry, kind)| Mismatch { entry, kind });
    let status = adapter.shutdown().await;
    report.exit_status = report.exit_status.or(status);
    report.stderr_tail = adapter.stderr_tail();
    Ok(report)
}

/// The replay walk; returns the first mismatch and its entry index.
async fn drive(
    recording: &[Entry],
    adapter: &mut Driven,
    cwd: &Path,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> Option<(usize, MismatchKind)> {
    let mut normalizer = Normalizer::new(cwd);
    let mut index = 0;
    while let Some(expected) = recording.get(index) {
        if let Entry::ToAdapter(msg) = expected {
            let actual = normalizer.denormalize(msg);
            normalizer.to_adapter(&actual);
            if let Err(e) = adapter.write(&actual).await {
                let kind = MismatchKind::WriteFailed { entry: Entry::ToAdapter(actual), error: e.to_string() };
                return Some((index, kind));
            }
            report.sent += 1;
            index += 1;
            continue;
        }
        let actual = match read_entry(adapter, &mut normalizer, opts).await {
            Ok(actual) => actual,
            Err(kind) => return Some((index, kind(expected.clone()))),
        };
        // Where appends of one message are split is timing (the SDK joins a burst), so
        // a run of them is compared as the text it adds up to.
        if let (Some(want), Some(got)) = (AppendRun::of(expected), AppendRun::of(&actual)) {
            match compare_runs(recording, index, want, got, adapter, &mut normalizer, opts).await {
                Ok(next) => {
                    report.matched += next - index;
                    index = next;
                    continue;
                }
                Err((at, kind)) => return Some((at, kind)),
            }
        }
        if let Some(path) = entry_difference(expected, &actual) {
            return Some((index, MismatchKind::Different { expected: expected.clone(), actual, path }));
        }
        report.matched += 1;
        index += 1;
    }

    // The recording is done: the adapter must write nothing more and exit.
    let end = recording.len();
    let deadline = Instant::now() + opts.exit_timeout;
    match adapter.next(deadline).await {
        Read::Line(line) => {
            let actual = match line {
                Line::Json(v) => Entry::FromAdapter(normalizer.from_adapter(&v)),
                Line::Raw(raw) => Entry::FromAdapterRaw(normalizer.raw(&raw)),
            };
            return Some((end, MismatchKind::Extra { actual }));
        }
        Read::Closed => {}
        Read::TimedOut => return Some((end, MismatchKind::NoExit { waited: opts.exit_timeout })),
    }
    match adapter.wait_exit(deadline).await {
        Some(status) => {
            report.exit_status = Some(status);
            None
        }
        None => Some((end, MismatchKind::NoExit { waited: opts.exit_timeout })),
    }
}

/// What a failed read means, once the expected entry is known.
type ReadFailure = Box<dyn FnOnce(Entry) -> MismatchKind + Send>;

/// The adapter's next line as an entry (normalised).
async fn read_entry(
    adapter: &mut Driven,
    normalizer: &mut Normalizer,
    opts: &ReplayOptions,
) -> Result<Entry, ReadFailure> {
    match adapter.next(Instant::now() + opts.line_timeout).await {
        Read::Line(Line::Json(v)) => Ok(Entry::FromAdapter(normalizer.from_adapter(&v))),
        Read::Line(Line::Raw(raw)) => Ok(Entry::FromAdapterRaw(normalizer.raw(&raw))),
        Read::Closed => Err(Box::new(|expected| MismatchKind::Closed { expected })),
        Read::TimedOut => {
            let waited = opts.line_timeout;
            Err(Box::new(move |expected| MismatchKind::Timeout { expected, waited }))
        }
    }
}

/// Compares the run of appends starting at recording entry `start` with the adapter's
/// lines from `got` on, joined on both sides until they end at the same place; the
/// index after the recording's part of the run.
async fn compare_runs(
    recording: &[Entry],
    start: usize,
    mut want: AppendRun,
    mut got: AppendRun,
    adapter: &mut Driven,
    normalizer: &mut Normalizer,
    opts: &ReplayOptions,
) -> Result<usize, (usize, MismatchKind)> {
    let mut next = start + 1;
    let differ = |at: usize, want: &AppendRun, got: &AppendRun| {
        let (expected, actual) = (want.entry(), got.entry());
        let path = entry_difference(&expected, &actual).unwrap_or_default();
        (at, MismatchKind::Different { expected, actual, path })
    };
    loop {
        if want.shape != got.shape || want.offset != got.offset {
            return Err(differ(start, &want, &got));
        }
        if want.text.len() == got.text.len() {
            if want.text != got.text || want.done != got.done {
                return Err(differ(start, &want, &got));
            }
            if want.done || !recording.get(next).and_then(AppendRun::of).is_some_and(|n| n.shape == want.shape) {
                return Ok(next);
            }
        }
        if want.text.len() <= got.text.len() {
            // The adapter joined more than the recording: take the recording's next piece.
            match recording.get(next).and_then(AppendRun::of) {
                Some(piece) if want.extend(&piece) => next += 1,
                _ => return Err(differ(start, &want, &got)),
            }
        } else {
            // The recording joined more: read the adapter's next piece.
            let line = read_entry(adapter, normalizer, opts)
                .await
                .map_err(|kind| (next, kind(recording[next - 1].clone())))?;
            match AppendRun::of(&line) {
                Some(piece) if got.extend(&piece) => {}
                _ => {
                    let path = entry_difference(&recording[next - 1], &line).unwrap_or_default();
                    let kind = MismatchKind::Different { expected: recording[next - 1].clone(), actual: line, path };
                    return Err((next - 1, kind));
                }
            }
        }
    }
}

/// Where two entries differ: `None` when equal, else a JSON pointer into `msg` (empty
/// when they differ as a whole).
fn entry_difference(expected: &Entry, actual: &Entry) -> Option<String> {
    match (expected, actual) {
        (Entry::FromAdapter(a), Entry::FromAdapter(b)) | (Entry::ToAdapter(a), Entry::ToAdapter(b)) => {
            first_difference(a, b, String::new())
        }
        _ if expected == actual => None,
        _ => Some(String::new()),
    }
}

/// JSON pointer to the first place where `a` and `b` differ, keys in sorted order.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let here = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => first_difference(u, v, here),
                    _ => Some(here),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            let common =
                x.iter().zip(y).enumerate().find_map(|(i, (u, v))| first_difference(u, v, format!("{path}/{i}")));
            common.or_else(|| (x.len() != y.len()).then(|| format!("{path}/{}", x.len().min(y.len()))))
        }
        _ if a == b => None,
        _ => Some(path),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn first_difference_points_at_the_first_differing_leaf() {
        let a = json!({"a": 1, "b": {"c": [1, 2, {"d": "x"}]}});
        assert_eq!(first_difference(&a, &a, String::new()), None);
        let b = json!({"a": 1, "b": {"c": [1, 2, {"d": "y"}]}});
        assert_eq!(first_difference(&a, &b, String::new()).as_deref(), Some("/b/c/2/d"));
        let c = json!({"a": 1, "b": {"c": [1, 2]}});
        assert_eq!(first_difference(&a, &c, String::new()).as_deref(), Some("/b/c/2"));
        let d = json!({"a": 1, "b": {"c": [1, 2, {"d": "x"}]}, "a/b": 0});
        assert_eq!(first_difference(&a, &d, String::new()).as_deref(), Some("/a~1b"));
        assert_eq!(first_difference(&json!(1), &json!("1"), String::new()).as_deref(), Some(""));
    }

    #[test]
    fn raw_and_json_lines_differ_as_a_whole() {
        let json = Entry::FromAdapter(json!({"a": 1}));
        let raw = Entry::FromAdapterRaw("a".into());
        assert_eq!(entry_difference(&json, &raw).as_deref(), Some(""));
        assert_eq!(entry_difference(&raw, &raw), None);
    }
}
