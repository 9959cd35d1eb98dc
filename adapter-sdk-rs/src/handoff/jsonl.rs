//! Bounded reads of JSONL transcripts, for the read-only `mirror` and for a scan's look
//! at a session file's head: only complete lines, each at most a given length, at most
//! a given number of bytes per call; a bad line is reported with its file and line
//! number and skipped, never a panic. Session files are untrusted input.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::MirrorResult;
use terminull_protocol::blocks::Block;

/// `mirror` of a JSONL transcript: see [`mirror_records`]; the cursor on the wire is the
/// [`JsonlCursor`]'s.
pub fn mirror_jsonl(
    path: &Path,
    cursor: Option<&str>,
    record_blocks: impl Fn(&Value) -> Vec<BlockKind>,
) -> Result<MirrorResult, crate::AdapterError> {
    let (blocks, next) = mirror_records(path, JsonlCursor::parse(cursor), record_blocks)?;
    Ok(MirrorResult { blocks, cursor: next.encode() })
}

/// The complete records of the JSONL transcript at `path` after `cursor` (bounded by
/// [`JsonlLimits::default`]), each turned into blocks by `record_blocks` and
/// [`mirrored`](super::mirrored), and where to continue.
pub fn mirror_records(
    path: &Path,
    cursor: JsonlCursor,
    record_blocks: impl Fn(&Value) -> Vec<BlockKind>,
) -> Result<(Vec<Block>, JsonlCursor), crate::AdapterError> {
    let chunk = read_jsonl(path, cursor, JsonlLimits::default()).map_err(crate::AdapterError::agent)?;
    let blocks = chunk.records.iter().flat_map(|(_, r)| record_blocks(r)).map(super::mirrored).collect();
    Ok((blocks, chunk.cursor))
}

/// The head of a session file, as a scan read it (see [`read_head`]).
#[derive(Debug, Clone, Default)]
pub struct FileHead {
    /// Its records with their 1-based line numbers.
    pub records: Vec<(u64, Value)>,
    /// True when the head is the whole file, so that what was counted in it is right.
    pub whole: bool,
}

/// The head of a session file, as a scan reads it: its first `bytes` bytes, lines of
/// any length within them (the first records carry the id, the directory and the first
/// prompt). `None` when it cannot be read.
pub fn read_head(path: &Path, bytes: usize) -> Option<FileHead> {
    let chunk = read_jsonl(path, JsonlCursor::default(), JsonlLimits { max_line: bytes, max_read: bytes }).ok()?;
    Some(FileHead { whole: (chunk.cursor.offset as usize) < bytes, records: chunk.records })
}

/// Where a [`read_jsonl`] stopped: the byte offset of the next unread line and its
/// 1-based line number. Opaque text on the wire (`"<offset>:<line>"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JsonlCursor {
    /// Byte offset of the next unread line.
    pub offset: u64,
    /// Number of lines before it.
    pub lines: u64,
}

impl JsonlCursor {
    /// Parses the wire form; `None` or a malformed one reads from the start.
    pub fn parse(text: Option<&str>) -> Self {
        text.and_then(|t| {
            let (offset, lines) = t.split_once(':')?;
            Some(Self { offset: offset.parse().ok()?, lines: lines.parse().ok()? })
        })
        .unwrap_or_default()
    }

    /// The wire form.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.offset, self.lines)
    }
}

/// Limits of one [`read_jsonl`].
#[derive(Debug, Clone, Copy)]
pub struct JsonlLimits {
    /// A line longer than this is skipped (reported, not parsed).
    pub max_line: usize,
    /// At most this many bytes are read per call; the rest comes with the next one.
    pub max_read: usize,
}

impl Default for JsonlLimits {
    fn default() -> Self {
        Self { max_line: 4 * 1024 * 1024, max_read: 16 * 1024 * 1024 }
    }
}

/// What [`read_jsonl`] read.
#[derive(Debug, Clone, Default)]
pub struct JsonlChunk {
    /// The parsed lines with their 1-based line numbers.
    pub records: Vec<(u64, Value)>,
    /// Lines that were skipped, each naming the file and line.
    pub problems: Vec<String>,
    /// Where to continue.
    pub cursor: JsonlCursor,
}

/// Why a transcript could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Opening or reading it failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// Reads the complete lines of the JSONL file at `path` after `cursor`. A trailing line
/// without its newline (still being written) is left for the next call. A file shorter
/// than the cursor (rewritten) is read again from the start.
pub fn read_jsonl(path: &Path, cursor: JsonlCursor, limits: JsonlLimits) -> Result<JsonlChunk, TranscriptError> {
    let io = |source| TranscriptError::Io { path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let cursor = if cursor.offset > len { JsonlCursor::default() } else { cursor };
    file.seek(SeekFrom::Start(cursor.offset)).map_err(io)?;
    let mut buf = Vec::new();
    file.take(limits.max_read as u64).read_to_end(&mut buf).map_err(io)?;
    let mut chunk = JsonlChunk { cursor, ..JsonlChunk::default() };
    let mut start = 0usize;
    while let Some(nl) = buf[start..].iter().position(|b| *b == b'\n') {
        let line = &buf[start..start + nl];
        chunk.cursor.lines += 1;
        chunk.cursor.offset += (nl + 1) as u64;
        start += nl + 1;
        let number = chunk.cursor.lines;
        if line.len() > limits.max_line {
            chunk.problems.push(format!(
                "{}:{number}: line of {} bytes is over the {} byte limit; skipped",
                path.display(),
                line.len(),
                limits.max_line
            ));
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(value) => chunk.records.push((number, value)),
            Err(e) => chunk.problems.push(format!("{}:{number}: not JSON: {e}", path.display())),
        }
    }
    // A single line longer than the whole read window: skip to its end next time
    // rather than stalling on it forever.
    if start == 0 && buf.len() == limits.max_read && limits.max_read > 0 {
        chunk.cursor.offset += buf.len() as u64;
        chunk.problems.push(format!(
            "{}:{}: line longer than {} bytes; skipped",
            path.display(),
            chunk.cursor.lines + 1,
            limits.max_read
        ));
    }
    for problem in &chunk.problems {
        tracing::warn!("{problem}");
    }
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_reads_whole_lines_and_continues_from_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"a\":1}\nnot json\n{\"b\":2}\n{\"c\":").unwrap();
        let first = read_jsonl(&path, JsonlCursor::default(), JsonlLimits::default()).unwrap();
        assert_eq!(first.records.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(first.problems.len(), 1);
        assert!(first.problems[0].contains("t.jsonl:2: not JSON"), "{:?}", first.problems);
        // The half-written fourth line waits.
        assert_eq!(first.cursor.lines, 3);
        std::fs::write(&path, "{\"a\":1}\nnot json\n{\"b\":2}\n{\"c\":3}\n").unwrap();
        let cursor = JsonlCursor::parse(Some(&first.cursor.encode()));
        let next = read_jsonl(&path, cursor, JsonlLimits::default()).unwrap();
        assert_eq!(next.records, vec![(4, serde_json::json!({"c": 3}))]);
    }

    #[test]
    fn an_oversized_line_is_skipped_with_its_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        std::fs::write(&path, format!("{{\"x\":\"{}\"}}\n{{\"ok\":true}}\n", "y".repeat(100))).unwrap();
        let chunk = read_jsonl(&path, JsonlCursor::default(), JsonlLimits { max_line: 50, max_read: 1 << 20 }).unwrap();
        assert_eq!(chunk.records.len(), 1);
        assert!(chunk.problems[0].contains("big.jsonl:1:"), "{:?}", chunk.problems);
        // A line longer than the whole read window is stepped over, not stalled on.
        let stuck = read_jsonl(&path, JsonlCursor::default(), JsonlLimits { max_line: 50, max_read: 20 }).unwrap();
        assert!(stuck.cursor.offset > 0);
    }

    #[test]
    fn a_truncated_file_is_read_again_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{}\n").unwrap();
        let chunk = read_jsonl(&path, JsonlCursor { offset: 999, lines: 9 }, JsonlLimits::default()).unwrap();
        assert_eq!(chunk.records.len(), 1);
        assert!(
            read_jsonl(&dir.path().join("missing"), JsonlCursor::default(), JsonlLimits::default())
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
    }
}
