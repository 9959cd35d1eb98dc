//! Reading the block log by lines: backwards from the end (to find the last line
//! without reading the file), forward from an offset, and decoding a stored line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use terminull_protocol::blocks::Block;

use super::error::{Result, io_err};

/// Backwards reads while looking for the last line go in chunks of this size.
const TAIL_CHUNK: usize = 64 * 1024;

/// Why a line of the log is not a stored block.
#[derive(Debug, thiserror::Error)]
pub(super) enum LineError {
    /// A block, but without the `seq` every stored block has.
    #[error("the block has no seq")]
    NoSeq,
    /// Not a block at all.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// A line of the log decoded as a stored block (one that has its `seq`).
pub(super) fn parse_line(line: &[u8]) -> std::result::Result<Block, LineError> {
    let block = serde_json::from_slice::<Block>(line)?;
    if block.seq.is_some() { Ok(block) } else { Err(LineError::NoSeq) }
}

/// Reads exactly `buf.len()` bytes of `file` at `offset`.
pub(super) fn read_exact_at(mut file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

/// The position of the last `\n` in `file[..before]`, reading backwards in chunks.
pub(super) fn find_last_newline(file: &File, before: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; TAIL_CHUNK];
    let mut end = before;
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK as u64);
        let chunk = &mut buf[..(end - start) as usize];
        read_exact_at(file, start, chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

/// Reads `file[start..end]`.
pub(super) fn read_range(file: &File, start: u64, end: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; (end - start) as usize];
    read_exact_at(file, start, &mut buf)?;
    Ok(buf)
}

/// Reads the lines of `file[from..to]` forward; `to` is at a line boundary.
pub(super) struct LineReader<'a> {
    reader: BufReader<io::Take<File>>,
    /// The offset of the next line.
    pub(super) pos: u64,
    buf: Vec<u8>,
    counter: Option<&'a AtomicU64>,
}

impl<'a> LineReader<'a> {
    pub(super) fn open(path: &Path, from: u64, to: u64, counter: Option<&'a AtomicU64>) -> Result<Self> {
        let mut file = File::open(path).map_err(io_err(path, "open"))?;
        file.seek(SeekFrom::Start(from)).map_err(io_err(path, "seek in"))?;
        let reader = BufReader::with_capacity(64 * 1024, file.take(to.saturating_sub(from)));
        Ok(Self { reader, pos: from, buf: Vec::new(), counter })
    }

    /// The next line's offset and bytes (without `\n`), or `None` at the end.
    pub(super) fn next_line(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(c) = self.counter {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        let offset = self.pos;
        self.pos += n as u64;
        let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        Ok(Some((offset, line)))
    }
}

/// The block whose line starts exactly at `offset` of the log `file` (at `path`,
/// complete up to `len`), and the offset after its line.
pub(super) fn line_at(file: &File, path: &Path, offset: u64, len: u64) -> Option<(Block, u64)> {
    if offset > 0 {
        let mut before = [0u8; 1];
        read_exact_at(file, offset - 1, &mut before).ok()?;
        if before[0] != b'\n' {
            return None;
        }
    }
    let mut reader = LineReader::open(path, offset, len, None).ok()?;
    let (_, line) = reader.next_line().ok()??;
    let block = parse_line(line).ok()?;
    Some((block, reader.pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_without_seq_or_not_json_is_refused_with_the_logged_reason() {
        let no_seq = parse_line(br#"{"ts":1.0,"type":"progress","id":"p","message":"x","done":false}"#).unwrap_err();
        assert_eq!(no_seq.to_string(), "the block has no seq");
        let garbage = parse_line(b"{\"seq\":").unwrap_err();
        assert!(matches!(garbage, LineError::Json(_)), "{garbage:?}");
        assert!(parse_line(br#"{"seq":3,"ts":1.0,"type":"progress","id":"p","message":"x","done":false}"#).is_ok());
    }
}
