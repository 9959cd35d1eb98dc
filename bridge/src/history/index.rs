//! The block index (`blocks.idx`, see the module docs of [`super`] for the layout):
//! derived from the log, checked and repaired against it on open, extended by every
//! append, and binary-searched by replays. Never fsynced: the log is the truth.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::{Result, io_err};
use super::lines::{LineReader, line_at, parse_line, read_exact_at};

/// Name of a session's index into the block log.
pub const INDEX_FILE: &str = "blocks.idx";
/// The first eight bytes of every index file (format version 1).
pub const INDEX_MAGIC: &[u8; 8] = b"TNULIDX1";
/// Size of one index record in bytes.
pub const INDEX_RECORD_LEN: u64 = 32;

/// Length of the index header ([`INDEX_MAGIC`]).
pub(super) const HEADER_LEN: u64 = INDEX_MAGIC.len() as u64;

/// One index record; see the module docs for the layout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct IndexRecord {
    pub(super) seq: u64,
    pub(super) max_ts: f64,
    pub(super) offset: u64,
}

impl IndexRecord {
    pub(super) fn encode(&self) -> [u8; INDEX_RECORD_LEN as usize] {
        let mut b = [0u8; INDEX_RECORD_LEN as usize];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.max_ts.to_bits().to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        let check = fnv1a(&b[0..24]);
        b[24..32].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// `None` when the checksum does not match or `max_ts` is not a finite number.
    pub(super) fn decode(b: &[u8; INDEX_RECORD_LEN as usize]) -> Option<Self> {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        if word(24) != fnv1a(&b[0..24]) {
            return None;
        }
        let max_ts = f64::from_bits(word(8));
        max_ts.is_finite().then_some(Self { seq: word(0), max_ts, offset: word(16) })
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Start {
    /// At this record's line, which must hold its `seq`.
    At(IndexRecord),
    /// After the last indexed line (nothing indexed is in the range).
    Unindexed,
    /// The index is unusable: scan from the beginning.
    Scan,
}

/// The block log as the index sees it: the open file, its path, its length up to the
/// last complete line, and the last `seq` in it.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogView<'a> {
    /// The log, open for reading.
    pub(super) file: &'a File,
    /// Its path (for reading forward and for messages).
    pub(super) path: &'a Path,
    /// Its length up to its last complete line.
    pub(super) len: u64,
    /// The `seq` of its last readable block.
    pub(super) last_seq: u64,
}

/// A session's open index and what it knows of the log it indexes.
#[derive(Debug)]
pub(super) struct BlockIndex {
    path: PathBuf,
    /// The index, opened for reading and appending.
    file: File,
    /// Records in the index.
    records: u64,
    /// End of the last indexed line: everything from here to the log's end is unindexed.
    indexed_end: u64,
    /// Largest `ts` in the log (the last record's `max_ts`).
    max_ts: f64,
    /// An index write failed: stop writing records until the index is rebuilt.
    stale: bool,
    /// A read found the index disagreeing with the data: rebuild before the next append.
    suspect: AtomicBool,
}

fn open_for_append(path: &Path) -> Result<File> {
    terminull_net::private_file::private_open_options()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_err(path, "open"))
}

impl BlockIndex {
    /// Opens (creating it when missing) the index at `path`; [`check`](Self::check)
    /// it against the log before use.
    pub(super) fn open(path: PathBuf) -> Result<Self> {
        let file = open_for_append(&path)?;
        Ok(Self { path, file, records: 0, indexed_end: 0, max_ts: 0.0, stale: false, suspect: AtomicBool::new(false) })
    }

    /// Opens the index file again (after the log was replaced and the old index removed);
    /// [`rebuild`](Self::rebuild) it next.
    pub(super) fn reopen(&mut self) -> Result<()> {
        self.file = open_for_append(&self.path)?;
        Ok(())
    }

    /// The index file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Largest `ts` in the log.
    pub(super) fn max_ts(&self) -> f64 {
        self.max_ts
    }

    /// End of the last indexed line of the log.
    pub(super) fn indexed_end(&self) -> u64 {
        self.indexed_end
    }

    /// A read found the index disagreeing with the log.
    pub(super) fn is_suspect(&self) -> bool {
        self.suspect.load(Ordering::Relaxed)
    }

    /// Marks the index as disagreeing with the log: rebuild it before the next append.
    pub(super) fn mark_suspect(&self) {
        self.suspect.store(true, Ordering::Relaxed);
    }

    /// Checks the index against the log and repairs it (see the module docs).
    pub(super) fn check(&mut self, log: &LogView<'_>) -> Result<()> {
        let path = self.path.clone();
        let len = self.file.metadata().map_err(io_err(&path, "stat"))?.len();
        let mut header = [0u8; HEADER_LEN as usize];
        if len < HEADER_LEN || read_exact_at(&self.file, 0, &mut header).is_err() || &header != INDEX_MAGIC {
            if len > 0 || log.len > 0 {
                tracing::warn!(file = %path.display(), "block index is missing or has a bad header; rebuilding it");
            }
            return self.rebuild(log);
        }
        let whole = (len - HEADER_LEN) / INDEX_RECORD_LEN;
        let torn = (len - HEADER_LEN) % INDEX_RECORD_LEN;
        // Longest prefix of sound records.
        let mut valid = 0u64;
        let mut prev: Option<IndexRecord> = None;
        {
            let mut file = &self.file;
            file.seek(SeekFrom::Start(HEADER_LEN)).map_err(io_err(&path, "seek in"))?;
            let mut reader = BufReader::with_capacity(64 * 1024, file);
            let mut buf = [0u8; INDEX_RECORD_LEN as usize];
            while valid < whole {
                reader.read_exact(&mut buf).map_err(io_err(&path, "read"))?;
                let Some(rec) = IndexRecord::decode(&buf) else { break };
                let ordered = prev.is_none_or(|p| rec.seq > p.seq && rec.offset > p.offset && rec.max_ts >= p.max_ts);
                if !ordered || rec.offset >= log.len || rec.seq > log.last_seq {
                    break;
                }
                prev = Some(rec);
                valid += 1;
            }
        }
        if valid < whole || torn != 0 {
            tracing::warn!(
                file = %path.display(), kept_records = valid, dropped_bytes = len - HEADER_LEN - valid * INDEX_RECORD_LEN,
                "block index has records that do not match the log; cutting them off"
            );
            self.file.set_len(HEADER_LEN + valid * INDEX_RECORD_LEN).map_err(io_err(&path, "truncate"))?;
        }
        self.records = valid;
        let Some(rec) = prev else {
            self.indexed_end = 0;
            self.max_ts = 0.0;
            return self.extend(log);
        };
        // The last kept record must point at the start of a line holding its seq.
        match line_at(log.file, log.path, rec.offset, log.len) {
            Some((block, end)) if block.seq == Some(rec.seq) => {
                self.indexed_end = end;
                self.max_ts = rec.max_ts;
                self.extend(log)
            }
            _ => {
                tracing::warn!(
                    file = %path.display(), seq = rec.seq, offset = rec.offset,
                    "block index does not match the log; rebuilding it"
                );
                self.rebuild(log)
            }
        }
    }

    /// Replaces the index with one built from the whole log.
    pub(super) fn rebuild(&mut self, log: &LogView<'_>) -> Result<()> {
        let path = self.path.clone();
        self.file.set_len(0).map_err(io_err(&path, "truncate"))?;
        (&self.file).write_all(INDEX_MAGIC).map_err(io_err(&path, "write"))?;
        self.records = 0;
        self.indexed_end = 0;
        self.max_ts = 0.0;
        self.stale = false;
        self.suspect.store(false, Ordering::Relaxed);
        self.extend(log)
    }

    /// Indexes the lines from `indexed_end` to the end of the log.
    fn extend(&mut self, log: &LogView<'_>) -> Result<()> {
        if self.indexed_end >= log.len {
            return Ok(());
        }
        let from = self.indexed_end;
        let mut reader = LineReader::open(log.path, from, log.len, None)?;
        let mut out = BufWriter::with_capacity(64 * 1024, &self.file);
        let mut added = 0u64;
        let mut last_seq = 0u64;
        while let Some((offset, line)) = reader.next_line().map_err(io_err(log.path, "read"))? {
            let block = match parse_line(line) {
                Ok(b) => b,
                Err(problem) => {
                    tracing::warn!(file = %log.path.display(), offset, %problem, "not indexing an unreadable line");
                    continue;
                }
            };
            let seq = block.seq.unwrap_or(0);
            if seq <= last_seq {
                tracing::warn!(file = %log.path.display(), offset, seq, "not indexing a block whose seq does not grow");
                continue;
            }
            last_seq = seq;
            self.max_ts = self.max_ts.max(block.ts);
            out.write_all(&IndexRecord { seq, max_ts: self.max_ts, offset }.encode())
                .map_err(io_err(&self.path, "write"))?;
            added += 1;
        }
        out.flush().map_err(io_err(&self.path, "write"))?;
        drop(out);
        self.records += added;
        self.indexed_end = log.len;
        if from > 0 {
            tracing::info!(file = %self.path.display(), added, "indexed blocks missing from the end of the index");
        }
        Ok(())
    }

    /// Records a block just appended at `offset` (the log is now `log_len` long). A
    /// failed write does not fail the append (the block is in the log, which is what
    /// counts): the index stops growing and is repaired on reopen.
    pub(super) fn push(&mut self, seq: u64, ts: f64, offset: u64, log_len: u64) {
        self.max_ts = self.max_ts.max(ts);
        if self.stale {
            return;
        }
        let rec = IndexRecord { seq, max_ts: self.max_ts, offset };
        match (&self.file).write_all(&rec.encode()) {
            Ok(()) => {
                self.records += 1;
                self.indexed_end = log_len;
            }
            Err(e) => {
                tracing::warn!(
                    file = %self.path.display(), error = %e,
                    "cannot append to the block index; it will be repaired when the session is reopened"
                );
                let _ = self.file.set_len(HEADER_LEN + self.records * INDEX_RECORD_LEN);
                self.stale = true;
            }
        }
    }

    /// Binary search of the index for the first record where `pred` holds (`pred` must
    /// be false then true along the index).
    pub(super) fn seek(&self, pred: impl Fn(&IndexRecord) -> bool) -> Start {
        let n = self.records;
        if n == 0 {
            return Start::Unindexed;
        }
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, "cannot open the block index; scanning the log");
                return Start::Scan;
            }
        };
        let read = |i: u64| -> Option<IndexRecord> {
            let mut buf = [0u8; INDEX_RECORD_LEN as usize];
            read_exact_at(&file, HEADER_LEN + i * INDEX_RECORD_LEN, &mut buf).ok()?;
            IndexRecord::decode(&buf)
        };
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(rec) = read(mid) else { return self.broken(mid) };
            if pred(&rec) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == n {
            return Start::Unindexed;
        }
        match read(lo) {
            Some(rec) => Start::At(rec),
            None => self.broken(lo),
        }
    }

    fn broken(&self, record: u64) -> Start {
        tracing::warn!(
            file = %self.path.display(), record,
            "block index record is damaged; scanning the log and rebuilding the index before the next append"
        );
        self.mark_suspect();
        Start::Scan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_records_round_trip_and_reject_garbage() {
        let rec = IndexRecord { seq: 7, max_ts: 1767225600.25, offset: 12345 };
        assert_eq!(IndexRecord::decode(&rec.encode()), Some(rec));
        let mut bad = rec.encode();
        bad[3] ^= 1;
        assert_eq!(IndexRecord::decode(&bad), None);
        assert_eq!(IndexRecord::decode(&[0u8; 32]), None);
    }
}
