//! Session history on disk: every block of every session, appended to a per-session
//! log that survives `kill -9` and a bridge restart, and replayed to clients that
//! resume. The user-facing description is `docs/history.md`; this is the reference.
//!
//! # Layout
//!
//! ```text
//! <sessions_dir>/<session_id>/meta.json     SessionMeta, replaced atomically
//! <sessions_dir>/<session_id>/blocks.jsonl  one Block per line, with its seq and ts
//! <sessions_dir>/<session_id>/blocks.idx    dense binary index into blocks.jsonl
//! ```
//!
//! A session id is a directory name, so it is checked first ([`validate_session_id`]):
//! 1–128 characters of `A-Z a-z 0-9 - _ .`, not starting with `.` (which also rules
//! out `.`, `..`, `/` and anything hidden).
//!
//! **`meta.json`** is a [`SessionMeta`] as pretty JSON. It is only ever replaced whole:
//! written to a temporary file in the same directory, fsynced, renamed over the old
//! one, then the directory is fsynced. A reader sees the old or the new version, never
//! a mix. [`HistoryStore::create`] writes it last, so a directory without `meta.json`
//! is a session whose creation did not finish; [`HistoryStore::list`] skips it.
//!
//! **`blocks.jsonl`** holds one [`Block`](terminull_protocol::blocks::Block) per line, serialized with `serde_json`
//! exactly as the app receives it (`seq` and `ts` included), each line ended by `\n`.
//! It is the source of truth. Lines are appended with one `write` call each; `seq`
//! grows by one per line (1, 2, 3, …) until [`SessionLog::compact`] removes superseded
//! chunks, after which it still strictly increases but has gaps.
//!
//! **`blocks.idx`** is derived from `blocks.jsonl` and is rebuilt whenever it does not
//! match. It is an 8-byte header (`TNULIDX1`) followed by one 32-byte record per block
//! (dense: one record per line, so a seek lands exactly on its block), all little-endian:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0–7 | `seq` | the block's `seq` (u64) |
//! | 8–15 | `max_ts` | the largest `ts` of this block and every block before it (f64 bits) |
//! | 16–23 | `offset` | byte offset of the block's line in `blocks.jsonl` (u64) |
//! | 24–31 | `check` | FNV-1a 64 of bytes 0–23, so garbage is never mistaken for a record |
//!
//! `max_ts` is a running maximum rather than the block's own `ts` because `ts` comes
//! from the agent and is not guaranteed to grow (clock steps, equal stamps); the running
//! maximum always does, so a binary search for `since_ts` is exact: every block before
//! the first record whose `max_ts` exceeds `since_ts` has `ts <= since_ts`.
//!
//! # Crash safety and recovery
//!
//! A crash can lose the unsynced tail of `blocks.jsonl` (see the fsync policy below)
//! but never damages what is before it: lines are only ever appended, and a line is
//! only counted once its `\n` is on disk. [`HistoryStore::open_session`] checks the
//! last line without reading the rest of the file (it reads backwards from the end):
//!
//! - a last line without its `\n` (a torn write: `kill -9` mid-write, power loss, a
//!   full disk) is cut off;
//! - a last line that is not a valid block (garbage, zero bytes after a power loss) is
//!   cut off.
//!
//! Either way a warning names the file, the offset and the bytes dropped, and appending
//! continues at the `seq` after the last intact block. Only the one last line is ever
//! removed; an unreadable line elsewhere (a damaged disk, a hand edit) is left in place,
//! skipped with a warning when read, and never indexed.
//!
//! Then the index is checked against the data: header, whole records, checksums,
//! strictly increasing `seq` and `offset`, offsets inside the data, and the last record
//! must point at a line that holds its `seq`. Records past the data (the index got to
//! disk before the data did) and a torn last record are cut off; blocks missing from
//! the end of the index (the index is never fsynced) are indexed from the data; anything
//! else (missing file, bad header, a record that does not match) rebuilds the whole
//! index from the data. Opening reads the index once, sequentially, never the data file
//! whole (except for a full rebuild).
//!
//! # fsync policy
//!
//! `write` returning means the line is in the kernel: `kill -9` of the bridge cannot
//! lose it. fsync is what protects against an OS crash or a power loss. The default,
//! [`SyncPolicy::Boundaries`] with [`DEFAULT_SYNC_INTERVAL`] (1 s), fsyncs the data
//! file ([`File::sync_data`](std::fs::File::sync_data)):
//!
//! - after every block that marks a point the user must not lose: `agent_info` (the
//!   session exists), `user_message` (what the user sent), `permission_request` (a turn
//!   now waits for the user), `error` and `session_end` (the turn's outcome);
//! - after any other block when at least the interval has passed since the last fsync,
//!   so a stream of chunks costs at most one fsync per interval;
//! - on [`SessionLog::sync`], [`SessionLog::sync_if_due`] (for an idle timer: a stream
//!   that stops right after a chunk would otherwise leave it unsynced until the next
//!   block), [`SessionLog::close`] and drop.
//!
//! So an OS crash loses at most the blocks of the last interval of a running turn, and
//! never a completed turn. The index is never fsynced: it is repaired from the data on
//! open. [`sync_due`] is the policy as a pure function.
//!
//! # Replay
//!
//! [`SessionLog::read_since_seq`] and [`SessionLog::read_since_ts`] binary-search the
//! index (reading about log2(n) records, never the whole index) for the first block of
//! the range, then read `blocks.jsonl` forward from that offset to its end. The line the
//! index points at is checked to hold the expected `seq`; if it does not, the read
//! falls back to a full scan (correct, slower), logs a warning, and the index is
//! rebuilt before the next append.
//!
//! Replayed blocks are **compacted**: of the blocks in the range, only the last one of
//! each `text`, `thinking`, `progress` and `bg_task` id is kept (for `text`/`thinking`
//! that is the `done: true` chunk once the id is finished, else its latest chunk), in
//! its own position. Every other block is kept, in order. Blocks keep their `seq`, so a
//! replay has gaps in `seq`; a client resumes from the highest `seq` it has seen, as
//! `docs/block-protocol.md` says. Compaction happens at replay time, so the file holds
//! every chunk until [`SessionLog::compact`] rewrites it without the superseded ones.
//! A session's task does that in the background after a replay that dropped more than
//! half of what it read ([`SessionLog::compaction_job`] on a blocking thread, then
//! [`SessionLog::install_compaction`], which gives up if the log grew meanwhile).
//!
//! # Timestamps
//!
//! [`SessionLog::append`] keeps the block's `ts` (the producer's clock) and stamps the
//! current time only when `ts` is 0, negative or not finite; it always overwrites `seq`.
//!
//! # Concurrency
//!
//! One [`SessionLog`] per session, owned by that session's task: appends take
//! `&mut self`, reads `&self`. Nothing here locks files; two bridges on one
//! `sessions_dir` are not supported. [`HistoryStore::update_meta`] is a
//! read-modify-write; callers serialise updates of one session.
//!
//! # Files
//!
//! [`store`] (the sessions directory), [`meta`] (`meta.json`), [`log`] (`blocks.jsonl`),
//! [`index`] (`blocks.idx`), [`compaction`], [`sync`] (the fsync policy), [`error`];
//! `lines` reads the log by lines. What a session owes across a restart (its queue,
//! whether a terminal holds it) is [`crate::handoff`]'s, stored in `meta.json`.

#[cfg(test)]
mod appends_tests;
#[cfg(test)]
mod compact_tests;
pub mod compaction;
pub mod error;
pub mod index;
mod lines;
pub mod log;
pub mod meta;
pub mod store;
pub mod sync;
#[cfg(test)]
mod tests;

pub use compaction::CompactStats;
pub use error::{HistoryError, Result};
pub use index::{INDEX_FILE, INDEX_MAGIC, INDEX_RECORD_LEN};
pub use log::{CompactionJob, DATA_FILE, Page, PreparedCompaction, SessionLog};
pub use meta::{LogStatus, MAX_SESSION_ID_LEN, META_FILE, SessionMeta, validate_session_id};
pub use store::HistoryStore;
pub use sync::{DEFAULT_SYNC_INTERVAL, SyncPolicy, is_sync_boundary, sync_due};
