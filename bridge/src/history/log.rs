//! One session's block log (`blocks.jsonl`): opened with its torn tail cut off and its
//! index checked, appended to under the fsync policy, replayed from a `seq` or a time
//! (compacted), and rewritten without superseded chunks. See the module docs of
//! [`super`] for the format and the guarantees.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use terminull_protocol::SessionId;
use terminull_protocol::blocks::{Block, now_ts};

use super::compaction::{CompactStats, Compactor, LineHead, rewrite_without_superseded};
use super::error::{HistoryError, Result, io_err};
use super::index::{BlockIndex, INDEX_FILE, INDEX_MAGIC, LogView, Start};
use super::lines::{LineReader, find_last_newline, parse_line, read_exact_at, read_range};
use super::sync::{SyncPolicy, sync_dir, sync_due};

/// Name of a session's block log.
pub const DATA_FILE: &str = "blocks.jsonl";

/// One session's block log, open for appending and replay.
#[derive(Debug)]
pub struct SessionLog {
    session_id: SessionId,
    dir: PathBuf,
    data_path: PathBuf,
    /// The log, opened for reading and appending.
    data: File,
    /// Length of the log up to its last complete line; reads never go past it.
    data_len: u64,
    last_seq: u64,
    /// The index into the log (and the log's largest `ts`).
    pub(super) index: BlockIndex,
    policy: SyncPolicy,
    last_sync: Instant,
    /// Something was appended since the last fsync.
    pub(super) unsynced: bool,
    poisoned: bool,
    /// Bytes of the log read by replays (for tests and diagnostics).
    pub(super) bytes_read: AtomicU64,
    /// Lines of the log read by the last replay.
    last_replay_lines: AtomicU64,
    /// Length of the last line appended, its newline included.
    last_line_bytes: u64,
}

/// Part of a replay ([`SessionLog::read_page`]): the blocks of a stretch of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The stretch's blocks, compacted within it.
    pub blocks: Vec<Block>,
    /// When the page stopped before the end of the log: the `seq` of the last block
    /// the stretch covers, where the next page starts (`read_page(through, …)`).
    /// `None`: the page reached the end.
    pub more: Option<u64>,
}

impl SessionLog {
    /// Opens the log of the session in `dir` (creating the files when missing),
    /// repairing a torn last line and the index.
    pub(super) fn open(session_id: SessionId, dir: PathBuf, policy: SyncPolicy) -> Result<Self> {
        let data_path = dir.join(DATA_FILE);
        let data = terminull_net::private_file::private_open_options()
            .read(true)
            .append(true)
            .create(true)
            .open(&data_path)
            .map_err(io_err(&data_path, "open"))?;
        let index = BlockIndex::open(dir.join(INDEX_FILE))?;
        let mut log = Self {
            session_id,
            dir,
            data_path,
            data,
            data_len: 0,
            last_seq: 0,
            index,
            policy,
            last_sync: Instant::now(),
            unsynced: false,
            poisoned: false,
            bytes_read: AtomicU64::new(0),
            last_replay_lines: AtomicU64::new(0),
            last_line_bytes: 0,
        };
        log.recover_tail()?;
        let view = LogView { file: &log.data, path: &log.data_path, len: log.data_len, last_seq: log.last_seq };
        log.index.check(&view)?;
        Ok(log)
    }

    /// Cuts off a torn or unparseable last line and finds the last `seq`.
    fn recover_tail(&mut self) -> Result<()> {
        let path = &self.data_path;
        let read_err = || io_err(path, "read");
        let len = self.data.metadata().map_err(io_err(path, "stat"))?.len();
        let mut keep = len;
        let mut last: Option<Block> = None;
        if len > 0 {
            let mut byte = [0u8; 1];
            read_exact_at(&self.data, len - 1, &mut byte).map_err(read_err())?;
            let line_start = find_last_newline(&self.data, len - 1).map_err(read_err())?.map_or(0, |p| p + 1);
            if byte[0] != b'\n' {
                // `line_start` is right after the last newline before the final byte,
                // which is not one: the whole tail from there is a torn line.
                keep = line_start;
                tracing::warn!(
                    file = %path.display(), offset = keep, dropped_bytes = len - keep,
                    "dropping a torn last line (no newline) from the block log"
                );
            } else {
                let line = read_range(&self.data, line_start, len - 1).map_err(read_err())?;
                match parse_line(&line) {
                    Ok(b) => last = Some(b),
                    Err(problem) => {
                        keep = line_start;
                        tracing::warn!(
                            file = %path.display(), offset = keep, dropped_bytes = len - keep, %problem,
                            "dropping an unreadable last line from the block log"
                        );
                    }
                }
            }
        }
        if keep < len {
            self.data.set_len(keep).map_err(io_err(path, "truncate"))?;
            self.data.sync_all().map_err(io_err(path, "fsync"))?;
        }
        // The last line is now intact; when it was cut, the one before it may not be
        // (damage elsewhere). Walk back to the last readable block for `last_seq`.
        let mut end = keep;
        while last.is_none() && end > 0 {
            let start = find_last_newline(&self.data, end - 1).map_err(read_err())?.map_or(0, |p| p + 1);
            let line = read_range(&self.data, start, end - 1).map_err(read_err())?;
            match parse_line(&line) {
                Ok(b) => last = Some(b),
                Err(problem) => tracing::warn!(
                    file = %path.display(), offset = start, %problem,
                    "the block log has an unreadable line; it is kept but skipped"
                ),
            }
            end = start;
        }
        self.data_len = keep;
        self.last_seq = last.and_then(|b| b.seq).unwrap_or(0);
        Ok(())
    }

    /// Replaces the index with one built from the whole log.
    fn rebuild_index(&mut self) -> Result<()> {
        let view = LogView { file: &self.data, path: &self.data_path, len: self.data_len, last_seq: self.last_seq };
        self.index.rebuild(&view)
    }

    /// The session this log belongs to.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The session's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `seq` of the last block stored; 0 for an empty log.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The size of the block log in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.data_len
    }

    /// Stores one block: gives it `seq = last_seq() + 1` (overwriting any `seq` it has),
    /// keeps its `ts` unless that is 0, negative or not finite (then stamps now), writes
    /// it as one line with one `write`, indexes it, fsyncs when the [`SyncPolicy`] says
    /// so, and returns the block as stored.
    ///
    /// On a write error the partial line is removed and nothing is stored. On
    /// [`HistoryError::NotDurable`] the block *is* stored under that `seq`.
    pub fn append(&mut self, mut block: Block) -> Result<Block> {
        if self.poisoned {
            return Err(HistoryError::Poisoned { path: self.data_path.clone() });
        }
        if self.index.is_suspect() {
            tracing::warn!(file = %self.index.path().display(), "rebuilding a block index that did not match the log");
            self.rebuild_index()?;
        }
        let seq = self.last_seq + 1;
        block.seq = Some(seq);
        if !(block.ts.is_finite() && block.ts > 0.0) {
            block.ts = now_ts();
        }
        let mut line = serde_json::to_vec(&block).map_err(|source| HistoryError::Encode {
            path: self.data_path.clone(),
            what: format!("block {seq}"),
            source,
        })?;
        line.push(b'\n');
        if let Err(e) = (&self.data).write_all(&line) {
            if let Err(undo) = self.data.set_len(self.data_len) {
                tracing::error!(
                    file = %self.data_path.display(), error = %undo,
                    "cannot remove a partially written line; refusing further appends"
                );
                self.poisoned = true;
            }
            return Err(io_err(&self.data_path, "append to")(e));
        }
        let offset = self.data_len;
        self.data_len += line.len() as u64;
        self.last_line_bytes = line.len() as u64;
        self.last_seq = seq;
        self.unsynced = true;
        self.index.push(seq, block.ts, offset, self.data_len);
        if sync_due(self.policy, &block.kind, self.last_sync.elapsed()) {
            self.sync_data().map_err(|source| HistoryError::NotDurable {
                path: self.data_path.clone(),
                seq,
                source,
            })?;
        }
        Ok(block)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        if self.unsynced {
            self.data.sync_data()?;
            self.unsynced = false;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// fsyncs the block log now if anything is unsynced.
    pub fn sync(&mut self) -> Result<()> {
        self.sync_data().map_err(io_err(&self.data_path, "fsync"))
    }

    /// fsyncs the block log if something is unsynced and the policy's interval has
    /// passed since the last fsync (with [`SyncPolicy::EveryBlock`]: whenever something
    /// is unsynced). For an idle timer, so a stream that stops mid-turn is synced too.
    pub fn sync_if_due(&mut self) -> Result<()> {
        let due = match self.policy {
            SyncPolicy::Never => false,
            SyncPolicy::EveryBlock => true,
            SyncPolicy::Boundaries { max_interval } => self.last_sync.elapsed() >= max_interval,
        };
        if due && self.unsynced { self.sync() } else { Ok(()) }
    }

    /// fsyncs what is unsynced and closes the log. Dropping the log does the same but
    /// can only log an error.
    pub fn close(mut self) -> Result<()> {
        self.sync()
    }

    /// Rebuilds the index from the whole log. Opening a session repairs the index
    /// already; this is for a caller that has reason to distrust it.
    pub fn repair_index(&mut self) -> Result<()> {
        self.rebuild_index()
    }

    /// Length in the log of the block last appended (its line, newline included).
    pub fn last_block_bytes(&self) -> u64 {
        self.last_line_bytes
    }

    /// Every block with `seq > after`, compacted (see the module docs), in log order.
    /// Seeks with the index; reads the log only from the first block of the range.
    pub fn read_since_seq(&self, after: u64) -> Result<Vec<Block>> {
        Ok(self.read_page(after, u64::MAX)?.blocks)
    }

    /// The blocks with `seq > after` up to about `max_bytes` of the log: reading stops
    /// after the line that reaches `max_bytes` (so a page holds at least one block, and
    /// at most `max_bytes` plus one line), compacted within the page. The pages from
    /// `after` on, each read from the previous one's [`Page::more`], give a follower
    /// what one [`read_since_seq`](Self::read_since_seq) would, in bounded memory: a
    /// message whose chunks cross a page boundary comes as the part in each page, the
    /// later part continuing the earlier. Between two pages the log may be compacted;
    /// the next page is then read from the compacted log, whose blocks are whole from
    /// their start, so nothing a follower holds is contradicted.
    pub fn read_page(&self, after: u64, max_bytes: u64) -> Result<Page> {
        if after >= self.last_seq {
            return Ok(Page { blocks: Vec::new(), more: None });
        }
        let start = self.index.seek(|r| r.seq > after);
        self.read_from(start, &|seq, _| seq > after, max_bytes)
    }

    /// Every block with `ts > after`, compacted (see the module docs), in log order.
    /// Seeks with the index's running maximum of `ts`, so blocks whose `ts` went
    /// backwards are still found; reads the log only from the first candidate.
    pub fn read_since_ts(&self, after: f64) -> Result<Vec<Block>> {
        if after.is_nan() || after >= self.index.max_ts() {
            return Ok(Vec::new());
        }
        let start = self.index.seek(|r| r.max_ts > after);
        Ok(self.read_from(start, &|_, ts| ts > after, u64::MAX)?.blocks)
    }

    /// Every block with `seq < before`, compacted over that range only: a message
    /// whose chunks go on past `before` comes as what it was up to there (a snapshot
    /// from its start, at the `seq` of its last chunk before `before`). What a resume by
    /// time sends as the older history, below the blocks it sent live.
    pub fn read_before_seq(&self, before: u64) -> Result<Vec<Block>> {
        Ok(self.read_from(Start::Scan, &|seq, _| seq < before, u64::MAX)?.blocks)
    }

    /// The whole history, compacted.
    pub fn read_all(&self) -> Result<Vec<Block>> {
        Ok(self.read_from(Start::Scan, &|_, _| true, u64::MAX)?.blocks)
    }

    /// Reads forward from `start` to the end of the log, or until `max_bytes` of it
    /// were read, keeping blocks for which `keep` holds, compacted.
    fn read_from(&self, start: Start, keep: &dyn Fn(u64, f64) -> bool, max_bytes: u64) -> Result<Page> {
        let (from, mut expect) = match start {
            Start::At(rec) => (rec.offset, Some(rec.seq)),
            Start::Unindexed => (self.index.indexed_end(), None),
            Start::Scan => (0, None),
        };
        let mut reader = LineReader::open(&self.data_path, from, self.data_len, Some(&self.bytes_read))?;
        let mut out = Compactor::default();
        let mut lines = 0u64;
        let (mut bytes, mut through, mut more) = (0u64, None, None);
        let end = self.data_len;
        while let Some((offset, line)) = reader.next_line().map_err(io_err(&self.data_path, "read"))? {
            lines += 1;
            bytes += line.len() as u64 + 1;
            let head = serde_json::from_slice::<LineHead<'_>>(line).ok().filter(|h| h.seq.is_some());
            // Only the first line is checked against the index record that led here.
            if let Some(seq) = expect.take()
                && head.as_ref().and_then(|h| h.seq) != Some(seq)
            {
                tracing::warn!(
                    file = %self.index.path().display(), seq, offset,
                    "block index points at the wrong line; scanning the log and rebuilding the index before the next append"
                );
                self.index.mark_suspect();
                return self.read_from(Start::Scan, keep, max_bytes);
            }
            match head {
                Some(head) if keep(head.seq.unwrap_or_default(), head.ts) => {
                    through = head.seq;
                    out.push(&head, line)
                }
                Some(_) => {}
                None => {
                    let problem =
                        parse_line(line).err().map_or_else(|| "unreadable head".to_owned(), |e| e.to_string());
                    tracing::warn!(
                        file = %self.data_path.display(), offset, %problem,
                        "skipping an unreadable line of the block log"
                    )
                }
            }
            // Stop after the line that reached the page's size, unless it was the last.
            if bytes >= max_bytes
                && reader.pos < end
                && let Some(through) = through
            {
                more = Some(through);
                break;
            }
        }
        self.last_replay_lines.store(lines, Ordering::Relaxed);
        Ok(Page { blocks: out.finish(&self.data_path), more })
    }

    /// How many lines of the log the last replay read (its blocks before compaction);
    /// with the number of blocks it returned, whether compacting the log would pay.
    pub fn last_replay_lines(&self) -> u64 {
        self.last_replay_lines.load(Ordering::Relaxed)
    }

    /// Rewrites the log without the blocks a replay would drop (every `text`,
    /// `thinking`, `progress` and `bg_task` block followed by a later one with the same
    /// id), so finished streams take the space of their final text only. Kept blocks
    /// keep their `seq`; replays give the same result before and after. Unreadable
    /// lines are kept as they are. The new log replaces the old one atomically (temporary
    /// file, fsync, rename, fsync of the directory); the index is replaced with one
    /// written alongside.
    ///
    /// Reads the log twice and holds one entry per distinct id in memory. Meant for
    /// sessions that are stopped or idle, not for every turn. A session's task uses
    /// [`compaction_job`](Self::compaction_job) (run off the task) and
    /// [`install_compaction`](Self::install_compaction) instead, so that it is never
    /// blocked by the rewrite.
    pub fn compact(&mut self) -> Result<CompactStats> {
        self.sync()?;
        let prepared = self.compaction_job().prepare()?;
        let stats = prepared.stats;
        self.install_compaction(prepared)?;
        Ok(stats)
    }

    /// What a compaction of the log as it is now needs, to run on another thread:
    /// [`CompactionJob::prepare`] reads only the part of the log written so far, which
    /// appends never change.
    pub fn compaction_job(&self) -> CompactionJob {
        CompactionJob { data_path: self.data_path.clone(), dir: self.dir.clone(), data_len: self.data_len }
    }

    /// Replaces the log with a compaction [`prepare`](CompactionJob::prepare)d from it,
    /// if nothing was appended since the job was made; returns `Ok(None)` (and drops the
    /// prepared files) when something was, or when compaction would drop nothing.
    pub fn install_compaction(&mut self, prepared: PreparedCompaction) -> Result<Option<CompactStats>> {
        let PreparedCompaction { stats, data, index, data_len, data_path } = prepared;
        if data_len != self.data_len || data_path != self.data_path {
            tracing::debug!(file = %self.data_path.display(), "the block log grew during its compaction; keeping it as it is");
            return Ok(None);
        }
        let CompactStats { blocks_before, blocks_after, bytes_after, .. } = stats;
        if blocks_after == blocks_before {
            return Ok(None);
        }
        // The new log holds every line written so far (fsynced in `prepare`), so what was
        // unsynced in the old one is durable once it is in place.
        // Remove the index first: a crash between here and the new index's rename leaves
        // no index (rebuilt on open) rather than one that points into the other log.
        let index_path = self.index.path().to_owned();
        match fs::remove_file(&index_path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&index_path, "remove")(e)),
        }
        sync_dir(&self.dir)?;
        data.persist(&self.data_path).map_err(|e| io_err(&self.data_path, "replace")(e.error))?;
        sync_dir(&self.dir)?;
        self.data = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.data_path)
            .map_err(io_err(&self.data_path, "open"))?;
        self.data_len = bytes_after;
        self.unsynced = false;
        // The index is never fsynced; `check` verifies the new one against the new log
        // (and rebuilds it if it does not match, as on open).
        if let Err(e) = index.persist(&index_path) {
            tracing::warn!(file = %index_path.display(), error = %e.error, "cannot put the compacted log's index in place; rebuilding it");
        }
        self.index.reopen()?;
        let view = LogView { file: &self.data, path: &self.data_path, len: self.data_len, last_seq: self.last_seq };
        self.index.check(&view)?;
        tracing::info!(
            file = %self.data_path.display(), blocks_before, blocks_after, bytes_before = stats.bytes_before, bytes_after,
            "compacted the block log"
        );
        Ok(Some(stats))
    }
}

/// A compaction of a session's log to run off the session's task: the log's path and
/// the length written when it was made. See [`SessionLog::compaction_job`].
#[derive(Debug, Clone)]
pub struct CompactionJob {
    data_path: PathBuf,
    dir: PathBuf,
    data_len: u64,
}

impl CompactionJob {
    /// Writes the compacted log and its index to temporary files in the session's
    /// directory (the log fsynced). Blocking: reads the log twice.
    pub fn prepare(self) -> Result<PreparedCompaction> {
        let (stats, data, records) = rewrite_without_superseded(&self.data_path, &self.dir, self.data_len)?;
        let data_tmp = data.path().to_owned();
        data.as_file().sync_all().map_err(io_err(&data_tmp, "fsync"))?;
        let mut index = tempfile::Builder::new()
            .prefix(".blocks.")
            .suffix(".idx.tmp")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(terminull_net::private_file::PRIVATE_FILE_MODE))
            .tempfile_in(&self.dir)
            .map_err(io_err(&self.dir, "create a temporary file in"))?;
        let index_tmp = index.path().to_owned();
        {
            let mut out = io::BufWriter::with_capacity(64 * 1024, index.as_file_mut());
            out.write_all(INDEX_MAGIC).map_err(io_err(&index_tmp, "write"))?;
            for record in &records {
                out.write_all(&record.encode()).map_err(io_err(&index_tmp, "write"))?;
            }
            out.flush().map_err(io_err(&index_tmp, "write"))?;
        }
        Ok(PreparedCompaction { stats, data, index, data_len: self.data_len, data_path: self.data_path })
    }
}

/// A compacted log and its index in temporary files, ready for
/// [`SessionLog::install_compaction`]; dropping it removes them.
#[derive(Debug)]
pub struct PreparedCompaction {
    /// Sizes before and after.
    pub stats: CompactStats,
    data: tempfile::NamedTempFile,
    index: tempfile::NamedTempFile,
    /// The length of the log it was made from.
    data_len: u64,
    data_path: PathBuf,
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        if self.unsynced
            && let Err(e) = self.sync_data()
        {
            tracing::error!(file = %self.data_path.display(), error = %e, "cannot fsync the block log on close");
        }
    }
}
