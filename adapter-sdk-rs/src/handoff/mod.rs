//! Building blocks of the handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md),
//! [docs/adapter-protocol.md §5.4](../../../docs/adapter-protocol.md#54-handoff-hooks)), shared by every
//! adapter whose agent keeps its sessions on disk:
//!
//! - [`hooks`]: the trait an adapter implements them with: [`Handoff`], or
//!   [`SessionFiles`] for an agent that keeps its sessions in files, which needs only
//!   where they are, how to read them and the CLI's resume flag.
//! - [`procs`]: the machine's processes read from `/proc`, and [`owned_by_cli`], which
//!   finds a native agent process driving a directory (one not descending from the
//!   bridge).
//! - [`jsonl`]: bounded reads of JSONL transcripts, for `mirror` and for a scan.
//! - [`files`]: where an agent keeps its state, safe session ids, bounded directory
//!   walks and the listing a scan makes of a session file.
//! - [`replayed`]: the blocks of a turn read back from a transcript.
//! - `sqlite` (feature `sqlite`): bounded read-only queries of an agent's SQLite store.
//!
//! Session files and `/proc` are untrusted input: every read here is bounded.

pub mod files;
pub mod hooks;
pub mod jsonl;
pub mod procs;
pub mod replayed;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use files::{
    AgentHome, Described, MAX_SCANNED_FILES, SessionIds, TITLE_CHARS, dashed_dir_name, file_here_or_below,
    files_with_suffix, jsonl_files, mtime_secs, title_of,
};
pub use hooks::{Handoff, NoHandoff, SessionFiles};
pub use jsonl::{
    FileHead, JsonlChunk, JsonlCursor, JsonlLimits, TranscriptError, mirror_jsonl, mirror_records, read_head,
    read_jsonl,
};
pub use procs::{
    ProcInfo, ProcessTable, find_native_owner, find_native_owner_where, find_owner_anywhere, is_probe, native_owner,
    native_owner_where, owned_by_cli, owned_where, same_dir, within_dir,
};

use serde_json::Value;
use terminull_protocol::adapter::{
    ExternalSession, HandoffHook, LatestSidForCwdParams, LatestSidForCwdResult, ScanExternalSessionsParams,
};

/// The five hooks an adapter declares when it implements handoff for an agent that keeps
/// its sessions on disk and holds no CLI process between turns (a per-turn lease).
pub const PER_TURN_HOOKS: &[HandoffHook] = &[
    HandoffHook::ScanExternalSessions,
    HandoffHook::IsCwdExternallyOwned,
    HandoffHook::Mirror,
    HandoffHook::LatestSidForCwd,
    HandoffHook::TerminalResumeCommand,
];

/// [`PER_TURN_HOOKS`] and `release`: for a persistent adapter, which lets its CLI
/// process go when the conversation is handed to a terminal.
pub const PERSISTENT_HOOKS: &[HandoffHook] = &[
    HandoffHook::ScanExternalSessions,
    HandoffHook::IsCwdExternallyOwned,
    HandoffHook::Mirror,
    HandoffHook::LatestSidForCwd,
    HandoffHook::TerminalResumeCommand,
    HandoffHook::Release,
];

/// Set in the environment of every process the bridge or an adapter starts; defined
/// with the process supervisor, which sets it.
pub use terminull_process::SESSION_MARKER_ENV;

/// The `_meta` key marking a mirrored block; defined in the protocol, since the bridge
/// reads it too.
pub use terminull_protocol::blocks::MIRRORED_META;

/// A block mirrored from a terminal's transcript: `kind`, stamped now, with
/// `_meta.mirrored = true`.
pub fn mirrored(kind: terminull_protocol::BlockKind) -> terminull_protocol::blocks::Block {
    let mut meta = serde_json::Map::new();
    meta.insert(MIRRORED_META.into(), Value::Bool(true));
    terminull_protocol::blocks::Block { seq: None, ts: terminull_protocol::blocks::now_ts(), meta: Some(meta), kind }
}

/// `v[key]` when it is a string.
pub fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The `key` strings of the items of `list` (none when it is not a list): the `text`
/// of each content item, say.
pub fn strings_at<'a>(list: Option<&'a Value>, key: &str) -> Vec<&'a str> {
    list.and_then(Value::as_array).into_iter().flatten().filter_map(|item| str_at(item, key)).collect()
}

/// The answer to `scan_external_sessions` from the sessions an adapter described:
/// those of `params.cwd` (all without one), newest first, at most `params.limit`.
pub fn newest_first(
    sessions: impl IntoIterator<Item = ExternalSession>,
    params: &ScanExternalSessionsParams,
) -> Vec<ExternalSession> {
    let mut sessions: Vec<ExternalSession> = sessions
        .into_iter()
        .filter(|s| params.cwd.as_deref().is_none_or(|want| s.cwd.as_deref() == Some(want)))
        .collect();
    sessions.sort_by(|a, b| b.updated_at.total_cmp(&a.updated_at));
    if let Some(limit) = params.limit {
        sessions.truncate(limit as usize);
    }
    sessions
}

/// `latest_sid_for_cwd` through an adapter's own `scan`: the newest session of the
/// directory (a terminal's `--resume` may have minted a new id).
pub fn latest_by_scan(
    params: &LatestSidForCwdParams,
    scan: impl FnOnce(&ScanExternalSessionsParams) -> Vec<ExternalSession>,
) -> LatestSidForCwdResult {
    let newest = scan(&ScanExternalSessionsParams { cwd: Some(params.cwd.clone()), limit: Some(1) });
    LatestSidForCwdResult { agent_session_id: newest.into_iter().next().map(|s| s.agent_session_id) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persistent_hook_list_is_the_per_turn_list_and_release() {
        assert_eq!(&PERSISTENT_HOOKS[..PER_TURN_HOOKS.len()], PER_TURN_HOOKS);
        assert_eq!(PERSISTENT_HOOKS[PER_TURN_HOOKS.len()..], [HandoffHook::Release]);
    }
}
