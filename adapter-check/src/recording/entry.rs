//! The entries of a recording and their JSONL form (one entry per line, `dir` and
//! `msg` or `raw`).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RecordingError;

/// Which way a line crossed the adapter's stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Written by the bridge side to the adapter's stdin.
    ToAdapter,
    /// Written by the adapter to its stdout.
    FromAdapter,
}

impl Direction {
    /// The wire value of `dir`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ToAdapter => "to_adapter",
            Direction::FromAdapter => "from_adapter",
        }
    }
}

/// One line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WireEntry", into = "WireEntry")]
pub enum Entry {
    /// A JSON-RPC message the bridge side wrote to the adapter.
    ToAdapter(Value),
    /// A JSON line the adapter wrote.
    FromAdapter(Value),
    /// A stdout line of the adapter that is not JSON.
    FromAdapterRaw(String),
}

impl Entry {
    /// Which way the line went.
    pub fn dir(&self) -> Direction {
        match self {
            Entry::ToAdapter(_) => Direction::ToAdapter,
            Entry::FromAdapter(_) | Entry::FromAdapterRaw(_) => Direction::FromAdapter,
        }
    }

    /// The JSON message, unless this is a raw line.
    pub fn msg(&self) -> Option<&Value> {
        match self {
            Entry::ToAdapter(msg) | Entry::FromAdapter(msg) => Some(msg),
            Entry::FromAdapterRaw(_) => None,
        }
    }

    /// The entry as one line of JSONL, without the newline.
    pub fn to_json_line(&self) -> String {
        // Written by hand: `Value`'s Display is compact JSON and cannot fail.
        match self {
            Entry::ToAdapter(msg) | Entry::FromAdapter(msg) => {
                format!("{{\"dir\":\"{}\",\"msg\":{msg}}}", self.dir().as_str())
            }
            Entry::FromAdapterRaw(raw) => {
                format!("{{\"dir\":\"{}\",\"raw\":{}}}", self.dir().as_str(), Value::String(raw.clone()))
            }
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_line())
    }
}

/// The on-disk shape of an entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEntry {
    dir: Direction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    msg: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
}

impl TryFrom<WireEntry> for Entry {
    type Error = String;

    fn try_from(wire: WireEntry) -> Result<Self, Self::Error> {
        match (wire.dir, wire.msg, wire.raw) {
            (Direction::ToAdapter, Some(msg), None) => Ok(Entry::ToAdapter(msg)),
            (Direction::FromAdapter, Some(msg), None) => Ok(Entry::FromAdapter(msg)),
            (Direction::FromAdapter, None, Some(raw)) => Ok(Entry::FromAdapterRaw(raw)),
            (Direction::ToAdapter, _, Some(_)) => Err("a to_adapter entry has `msg`, never `raw`".to_owned()),
            (_, Some(_), Some(_)) => Err("an entry has either `msg` or `raw`, not both".to_owned()),
            (_, None, None) => Err("an entry needs `msg` or `raw`".to_owned()),
        }
    }
}

impl From<Entry> for WireEntry {
    fn from(entry: Entry) -> Self {
        let dir = entry.dir();
        match entry {
            Entry::ToAdapter(msg) | Entry::FromAdapter(msg) => WireEntry { dir, msg: Some(msg), raw: None },
            Entry::FromAdapterRaw(raw) => WireEntry { dir, msg: None, raw: Some(raw) },
        }
    }
}

/// Writes entries as JSONL: one line each, every line ending in `\n`.
pub fn to_jsonl(entries: &[Entry]) -> String {
    let mut out = String::new();
    for entry in entries {
        out.push_str(&entry.to_json_line());
        out.push('\n');
    }
    out
}

/// Reads a JSONL recording. Blank lines are skipped; a bad line is an error naming its
/// 1-based line number.
pub fn parse_jsonl(text: &str) -> Result<Vec<Entry>, RecordingError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str::<Entry>(line)
            .map_err(|e| RecordingError::Parse { line: i + 1, problem: e.to_string() })?;
        entries.push(entry);
    }
    Ok(entries)
}
