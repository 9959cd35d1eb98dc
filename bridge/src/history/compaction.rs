//! Compaction: the chunks of a streamed message (`text`, `thinking`) are joined into
//! one, and of the blocks replaced by id (`progress`, `bg_task`) only the last counts.
//! A replay compacts as it reads (`Compactor`); a rewrite does the same to the file
//! itself ([`SessionLog::compact`](super::SessionLog::compact)).
//!
//! A joined message sits where its last chunk was and carries that chunk's `seq`, so a
//! replay stays in `seq` order. It is a snapshot when the replay covers the message
//! from its start, and an append that continues it when the replay starts in its
//! middle (`since_seq` between two of its chunks): either way the receiver ends up
//! with the whole text (docs/block-protocol.md).

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Deserialize;
use tempfile::NamedTempFile;
use terminull_protocol::blocks::{Block, BlockKind};

use super::error::{Result, io_err};
use super::index::IndexRecord;
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
    /// True for the chunk of a streamed message, which is joined, not replaced.
    fn is_streamed(&self) -> bool {
        matches!(self.block_type.as_ref(), "text" | "thinking")
    }

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

/// Collects replayed lines, joining the chunks of each streamed message and keeping
/// only the last block of each other replaceable id, and decodes the survivors at the
/// end: deciding on each line's head and decoding only what is kept (or joined) saves
/// most of the decoding of a log of superseded `progress` blocks.
#[derive(Default)]
pub(super) struct Compactor {
    out: Vec<Option<Kept>>,
    last: HashMap<(&'static str, String), usize>,
}

/// A line a replay keeps: as it is, or a message joined from several chunks.
enum Kept {
    Line(Vec<u8>),
    Joined(Block),
}

impl Compactor {
    pub(super) fn push(&mut self, head: &LineHead<'_>, line: &[u8]) {
        let Some(key) = head.replace_key() else {
            self.out.push(Some(Kept::Line(line.to_vec())));
            return;
        };
        let earlier = self.last.get(&key).copied();
        let kept = match (earlier, head.is_streamed()) {
            (Some(earlier), true) => {
                let Some(mut joined) = self.out[earlier].take().and_then(decoded) else {
                    return self.keep(key, Kept::Line(line.to_vec()));
                };
                if parse_line(line).is_ok_and(|piece| joined.join(piece).is_ok()) {
                    Kept::Joined(joined)
                } else {
                    // A chunk that does not continue what is held (the log lost a line):
                    // the message stays as far as it goes, never wrong.
                    tracing::warn!(id = %key.1, seq = ?head.seq, "a streamed chunk does not continue its message in the log; skipped");
                    self.out[earlier] = Some(Kept::Joined(joined));
                    return;
                }
            }
            (Some(earlier), false) => {
                self.out[earlier] = None;
                Kept::Line(line.to_vec())
            }
            (None, _) => Kept::Line(line.to_vec()),
        };
        self.keep(key, kept);
    }

    fn keep(&mut self, key: (&'static str, String), kept: Kept) {
        self.last.insert(key, self.out.len());
        self.out.push(Some(kept));
    }

    /// The kept blocks in log order; a kept line whose body does not decode is
    /// skipped with a warning (it still replaced the earlier chunks of its id).
    pub(super) fn finish(self, path: &Path) -> Vec<Block> {
        let mut blocks = Vec::with_capacity(self.out.len());
        for kept in self.out.into_iter().flatten() {
            match kept {
                Kept::Joined(block) => blocks.push(whole_from_start(block)),
                Kept::Line(line) => match parse_line(&line) {
                    Ok(block) => blocks.push(block),
                    Err(problem) => {
                        tracing::warn!(file = %path.display(), %problem, "skipping an unreadable line of the block log")
                    }
                },
            }
        }
        blocks
    }
}

/// The block a kept entry holds, decoded.
fn decoded(kept: Kept) -> Option<Block> {
    match kept {
        Kept::Joined(block) => Some(block),
        Kept::Line(line) => parse_line(&line).ok(),
    }
}

/// A joined message that starts at offset 0 is the whole message: a snapshot.
fn whole_from_start(mut block: Block) -> Block {
    if let BlockKind::Text(t) | BlockKind::Thinking(t) = &mut block.kind
        && t.offset == Some(0)
    {
        t.offset = None;
    }
    block
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

/// Writes the first `data_len` bytes of the log at `data_path` compacted to a temporary
/// file in `dir` (each streamed message joined into one line at its last chunk, the
/// superseded `progress`/`bg_task` lines dropped), and says how big both are.
/// Unreadable lines are kept as they are. Reads the log twice; holds one entry per
/// distinct id and the messages being joined.
pub(super) fn rewrite_without_superseded(
    data_path: &Path,
    dir: &Path,
    data_len: u64,
) -> Result<(CompactStats, NamedTempFile, Vec<IndexRecord>)> {
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
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(terminull_net::private_file::PRIVATE_FILE_MODE))
        .tempfile_in(dir)
        .map_err(io_err(dir, "create a temporary file in"))?;
    let tmp_path = tmp.path().to_owned();
    let mut blocks_after = 0u64;
    let mut bytes_after = 0u64;
    // The index of the new log, as `BlockIndex::rebuild` would make it: one record per
    // readable line whose seq grows, with the running maximum of `ts`.
    let mut index = Vec::new();
    let mut max_ts = 0.0f64;
    {
        let mut out = BufWriter::with_capacity(64 * 1024, tmp.as_file_mut());
        let mut reader = LineReader::open(data_path, 0, data_len, None)?;
        // The chunks of each streamed message read so far, joined; written at its last.
        let mut joining: HashMap<(&'static str, String), Block> = HashMap::new();
        while let Some((_, line)) = reader.next_line().map_err(read_err())? {
            let mut kept = Some(line.to_vec());
            let parsed = parse_line(line);
            // The seq and ts of the line written, when it is a readable block.
            let mut head = parsed.as_ref().ok().map(|b| (b.seq.unwrap_or(0), b.ts));
            if let Ok(b) = parsed
                && let Some((kind, id)) = b.kind.replace_key()
            {
                let key = (kind, id.to_owned());
                let is_last = last_of.get(&key).is_some_and(|&last| Some(last) == b.seq);
                kept = match (&b.kind, is_last) {
                    (BlockKind::Text(_) | BlockKind::Thinking(_), _) => {
                        let joined = match joining.remove(&key) {
                            Some(mut held) => {
                                if held.join(b).is_err() {
                                    tracing::warn!(id = %key.1, "a streamed chunk does not continue its message in the log; dropped");
                                }
                                held
                            }
                            None => b,
                        };
                        if is_last {
                            head = Some((joined.seq.unwrap_or(0), joined.ts));
                            Some(serde_json::to_vec(&whole_from_start(joined)).map_err(|e| {
                                io_err(&tmp_path, "encode a joined message for")(std::io::Error::other(e))
                            })?)
                        } else {
                            joining.insert(key, joined);
                            None
                        }
                    }
                    (_, true) => kept,
                    (_, false) => None,
                };
            }
            let Some(line) = kept else { continue };
            if let Some((seq, ts)) = head
                && seq > index.last().map_or(0, |r: &IndexRecord| r.seq)
            {
                max_ts = max_ts.max(ts);
                index.push(IndexRecord { seq, max_ts, offset: bytes_after });
            }
            out.write_all(&line).and_then(|()| out.write_all(b"\n")).map_err(io_err(&tmp_path, "write"))?;
            blocks_after += 1;
            bytes_after += line.len() as u64 + 1;
        }
        out.flush().map_err(io_err(&tmp_path, "write"))?;
    }
    let stats = CompactStats { blocks_before, blocks_after, bytes_before: data_len, bytes_after };
    Ok((stats, tmp, index))
}
