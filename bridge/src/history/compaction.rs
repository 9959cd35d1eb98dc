//! Compaction: of the streamed blocks (`text`, `thinking`, `progress`, `bg_task`), only
//! the last one of each id counts. A replay compacts as it reads (`Compactor`); a
//! rewrite drops the superseded lines from the file itself
//! ([`SessionLog::compact`](super::SessionLog::compact)).

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Deserialize;
use tempfile::NamedTempFile;
use terminull_protocol::blocks::Block;

use super::error::{Result, io_err};
use super::lines::{LineReader, parse_line};

/// The fields of a stored line a replay decides on (`seq`, `ts`, `type`, `id`), read
/// without decoding the rest of the block.
#[derive(Deserialize)]
pub(super) struct LineHead<'a> {
    pub(super) seq: Option<u64>,
    pub(super) ts: f64,
    #[serde(rename = "type", borrow)]
    block_type: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<&'a serde_json::value::RawValue>,
}

impl LineHead<'_> {
    /// [`BlockKind::replace_key`] of the block this line holds.
    fn replace_key(&self) -> Option<(&'static str, String)> {
        let kind = match self.block_type.as_ref() {
            "text" => "text",
            "thinking" => "thinking",
            "progress" => "progress",
            "bg_task" => "bg_task",
            _ => return None,
        };
        let id: String = serde_json::from_str(self.id?.get()).ok()?;
        Some((kind, id))
    }
}

/// Collects replayed lines, keeping only the last block of each replaceable id, and
/// decodes the survivors at the end: most of a replay is superseded chunks (82 % of a
/// realistic log), so deciding on each line's head and decoding only what is kept
/// saves most of the decoding.
#[derive(Default)]
pub(super) struct Compactor {
    out: Vec<Option<Vec<u8>>>,
    last: HashMap<(&'static str, String), usize>,
}

impl Compactor {
    pub(super) fn push(&mut self, head: &LineHead<'_>, line: &[u8]) {
        if let Some(key) = head.replace_key()
            && let Some(earlier) = self.last.insert(key, self.out.len())
        {
            self.out[earlier] = None;
        }
        self.out.push(Some(line.to_vec()));
    }

    /// The kept blocks in log order; a kept line whose body does not decode is
    /// skipped with a warning (it still replaced the earlier chunks of its id).
    pub(super) fn finish(self, path: &Path) -> Vec<Block> {
        let mut blocks = Vec::with_capacity(self.out.len());
        for line in self.out.into_iter().flatten() {
            match parse_line(&line) {
                Ok(block) => blocks.push(block),
                Err(problem) => {
                    tracing::warn!(file = %path.display(), %problem, "skipping an unreadable line of the block log")
                }
            }
        }
        blocks
    }
}

/// Sizes before and after [`SessionLog::compact`](super::SessionLog::compact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactStats {
    /// Lines in the log before.
    pub blocks_before: u64,
    /// Lines in the log after.
    pub blocks_after: u64,
    /// Bytes of the log before.
    pub bytes_before: u64,
    /// Bytes of the log after.
    pub bytes_after: u64,
}

/// Writes the first `data_len` bytes of the log at `data_path` without its superseded
/// lines to a temporary file in `dir`, and says how big both are. Unreadable lines are
/// kept as they are. Reads the log twice and holds one entry per distinct id.
pub(super) fn rewrite_without_superseded(
    data_path: &Path,
    dir: &Path,
    data_len: u64,
) -> Result<(CompactStats, NamedTempFile)> {
    let read_err = || io_err(data_path, "read");
    // Pass 1: the last seq of every replaceable id.
    let mut last_of: HashMap<(&'static str, String), u64> = HashMap::new();
    let mut blocks_before = 0u64;
    let mut reader = LineReader::open(data_path, 0, data_len, None)?;
    while let Some((_, line)) = reader.next_line().map_err(read_err())? {
        blocks_before += 1;
        if let Ok(b) = parse_line(line)
            && let Some((kind, id)) = b.kind.replace_key()
        {
            last_of.insert((kind, id.to_owned()), b.seq.unwrap_or(0));
        }
    }
    // Pass 2: copy the lines that stay.
    let mut tmp = tempfile::Builder::new()
        .prefix(".blocks.")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io_err(dir, "create a temporary file in"))?;
    let tmp_path = tmp.path().to_owned();
    let mut blocks_after = 0u64;
    let mut bytes_after = 0u64;
    {
        let mut out = BufWriter::with_capacity(64 * 1024, tmp.as_file_mut());
        let mut reader = LineReader::open(data_path, 0, data_len, None)?;
        while let Some((_, line)) = reader.next_line().map_err(read_err())? {
            let superseded = parse_line(line).is_ok_and(|b| {
                b.kind.replace_key().is_some_and(|(kind, id)| {
                    last_of.get(&(kind, id.to_owned())).is_some_and(|&last| Some(last) != b.seq)
                })
            });
            if superseded {
                continue;
            }
            out.write_all(line).and_then(|()| out.write_all(b"\n")).map_err(io_err(&tmp_path, "write"))?;
            blocks_after += 1;
            bytes_after += line.len() as u64 + 1;
        }
        out.flush().map_err(io_err(&tmp_path, "write"))?;
    }
    let stats = CompactStats { blocks_before, blocks_after, bytes_before: data_len, bytes_after };
    Ok((stats, tmp))
}
