//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for Droid:
//! [`DroidSessions`].
//!
//! Droid 0.225 keeps one JSONL file per session at `~/.factory/sessions/<cwd, every
//! character but a-z A-Z 0-9 as ->/<session id>.jsonl` (plus `<id>.settings.json`):
//! a `session_start` header (`id`, `title`, `cwd`), then `message` records whose
//! `message` is Anthropic-shaped (`role` `user` with `text` or `tool_result` items,
//! `role` `assistant` with `thinking`, `text`, `tool_use`) and an `agent_turn_outcome`
//! (`reason`) when a turn ends. Droid injects a `<system-reminder>` user message (id
//! `context-…`), which is not the user's.
//!
//! Note: `droid -s <id>` / `droid --resume <id>` fetch the session from Factory's cloud,
//! so offline (and in this project's tests) a handoff back into Droid cannot continue
//! the same conversation; the adapter forks it then (docs/adapters/droid.md).
//!
//! These files are untrusted: every read is bounded ([`terminull_adapter_sdk::handoff`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::{
    JsonlCursor, JsonlLimits, MAX_SCANNED_FILES, ProcInfo, ProcessTable, SessionFiles, TITLE_CHARS, agent_home,
    files_with_suffix, is_probe, mirror_jsonl, mirrored, mtime_secs, newest_first, read_jsonl, replayed, same_dir,
    str_at, title_of,
};
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, MirrorParams, MirrorResult,
    ScanExternalSessionsParams, TerminalResumeCommandParams, TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, EndReason};

/// What a scan reads of each file.
const SCAN_READ: usize = 256 * 1024;

/// `~/.factory`.
pub fn factory_dir() -> Option<PathBuf> {
    agent_home(None, ".factory")
}

/// The directory name Droid uses for `cwd`'s sessions.
pub fn session_dir_name(cwd: &str) -> String {
    cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

fn check_id(id: &str) -> Result<(), AdapterError> {
    let ok = !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok { Ok(()) } else { Err(AdapterError::invalid(format!("`{id}` is not a Droid session id"))) }
}

fn session_files(root: &Path, cwd: Option<&str>) -> Vec<PathBuf> {
    let sessions = root.join("sessions");
    let files = match cwd {
        Some(cwd) => files_with_suffix(&sessions.join(session_dir_name(cwd)), ".jsonl", 0, MAX_SCANNED_FILES),
        None => files_with_suffix(&sessions, ".jsonl", 1, MAX_SCANNED_FILES),
    };
    files.into_iter().filter(|p| !p.to_string_lossy().ends_with(".settings.jsonl")).collect()
}

/// The file of session `id`.
pub fn session_path(root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
    check_id(id)?;
    let direct = root.join("sessions").join(session_dir_name(cwd)).join(format!("{id}.jsonl"));
    if direct.is_file() {
        return Ok(direct);
    }
    files_with_suffix(&root.join("sessions"), &format!("/{id}.jsonl"), 1, 1)
        .into_iter()
        .next()
        .or_else(|| {
            files_with_suffix(&root.join("sessions"), ".jsonl", 1, MAX_SCANNED_FILES)
                .into_iter()
                .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == format!("{id}.jsonl")))
        })
        .ok_or_else(|| AdapterError::not_found(format!("no Droid session file for {id} (cwd {cwd})")))
}

fn user_text(message: &Value) -> Option<String> {
    let text = match message.get("content")? {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            if items.iter().any(|i| i.get("type").and_then(Value::as_str) == Some("tool_result")) {
                return None;
            }
            items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => return None,
    };
    (!text.is_empty() && !text.trim_start().starts_with("<system-reminder>")).then_some(text)
}

fn describe(path: &Path) -> Option<ExternalSession> {
    let chunk =
        read_jsonl(path, JsonlCursor::default(), JsonlLimits { max_line: SCAN_READ, max_read: SCAN_READ }).ok()?;
    let (mut id, mut cwd, mut title, mut messages) = (None, None, None, 0u64);
    for (_, record) in &chunk.records {
        match record.get("type").and_then(Value::as_str) {
            Some("session_start") if id.is_none() => {
                id = record.get("id").and_then(Value::as_str).map(str::to_owned);
                cwd = record.get("cwd").and_then(Value::as_str).map(str::to_owned);
                title = record.get("title").and_then(Value::as_str).map(|t| title_of(t, TITLE_CHARS));
            }
            Some("message") => {
                let role = record.pointer("/message/role").and_then(Value::as_str);
                let prompt = role == Some("user") && record.get("message").and_then(user_text).is_some();
                if prompt || role == Some("assistant") {
                    messages += 1;
                }
            }
            _ => {}
        }
    }
    let id = id.filter(|i| check_id(i).is_ok())?;
    Some(ExternalSession {
        agent_session_id: id.into(),
        cwd,
        title,
        updated_at: mtime_secs(path),
        message_count: ((chunk.cursor.offset as usize) < SCAN_READ).then_some(messages),
    })
}

/// Whether a `droid` command line may drive session `sid` in `cwd`: `-s`, `--resume`,
/// `-r` or `resume <id>` name one (another id is another session); `--cwd <dir>` names
/// the directory when it is not the process's own.
pub fn drives(p: &ProcInfo, cwd: &Path, sid: Option<&str>) -> bool {
    let argv = &p.argv;
    let dir_flag = argv.windows(2).find(|w| w[0] == "--cwd").map(|w| PathBuf::from(&w[1]));
    let in_dir = match &dir_flag {
        Some(dir) => same_dir(dir, cwd),
        None => p.cwd.as_deref().is_some_and(|d| same_dir(d, cwd)),
    };
    let named = argv
        .windows(2)
        .find(|w| {
            matches!(w[0].as_str(), "-s" | "--session-id" | "--resume" | "-r" | "resume") && !w[1].starts_with('-')
        })
        .map(|w| w[1].clone());
    in_dir && sid.is_none_or(|sid| named.is_none_or(|n| n == sid))
}

fn tool_output(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().filter_map(|i| str_at(i, "text")).collect::<Vec<_>>().join("\n"),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Where Droid keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct DroidSessions;

impl SessionFiles for DroidSessions {
    fn root(&self) -> Result<PathBuf, AdapterError> {
        factory_dir().ok_or_else(|| AdapterError::agent("HOME is not set"))
    }

    /// `scan_external_sessions` against `root` (`~/.factory`).
    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        newest_first(session_files(root, params.cwd.as_deref()).iter().filter_map(|p| describe(p)), params)
    }

    /// A `droid` process (not terminull's) drives `cwd`.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        let sid = params.agent_session_id.as_ref().map(ToString::to_string);
        let cwd = Path::new(&params.cwd);
        let table = ProcessTable::read();
        // The process's own cwd may differ when `--cwd` is given: look at every droid.
        let me = std::process::id();
        let mut owners: Vec<u32> = table
            .iter()
            .filter(|p| p.program_names().iter().any(|n| n == "droid"))
            .filter(|p| !is_probe(&p.argv) && drives(p, cwd, sid.as_deref()))
            .filter(|p| !table.is_terminulls(p.pid, me))
            .map(|p| p.pid)
            .collect();
        owners.sort_unstable();
        let pid = owners.first().copied();
        IsCwdExternallyOwnedResult { owned: pid.is_some(), pid }
    }

    /// `mirror`: the session file after the cursor, as blocks.
    fn read_mirror(&self, root: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        let path = session_path(root, &params.cwd, params.agent_session_id.as_str())?;
        mirror_jsonl(&path, params.cursor.as_deref(), record_blocks)
    }

    /// `terminal_resume_command`: `droid --resume <id>`.
    fn resume_command(
        &self,
        params: &TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        check_id(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec!["droid".into(), "--resume".into(), params.agent_session_id.to_string()],
            cwd: params.cwd.clone(),
        })
    }
}

/// The blocks of one session record.
pub fn record_blocks(record: &Value) -> Vec<Block> {
    let mut out = Vec::new();
    match str_at(record, "type") {
        Some("message") => {
            let Some(message) = record.get("message") else { return Vec::new() };
            let record_id = str_at(record, "id").unwrap_or("message");
            match str_at(message, "role") {
                Some("user") => {
                    if let Some(text) = user_text(message) {
                        out.push(replayed::user(text));
                    }
                    for item in message.get("content").and_then(Value::as_array).into_iter().flatten() {
                        if str_at(item, "type") == Some("tool_result")
                            && let Some(id) = str_at(item, "tool_use_id")
                        {
                            out.push(replayed::tool_result(
                                id,
                                tool_output(item.get("content")),
                                item.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                            ));
                        }
                    }
                }
                Some("assistant") => {
                    let items = message.get("content").and_then(Value::as_array);
                    for (i, item) in items.into_iter().flatten().enumerate() {
                        let id = format!("{record_id}-{i}");
                        match str_at(item, "type") {
                            Some("text") => out.push(replayed::text(id, str_at(item, "text").unwrap_or_default())),
                            Some("thinking") => {
                                out.push(replayed::thinking(id, str_at(item, "thinking").unwrap_or_default()))
                            }
                            Some("tool_use") => {
                                let Some(call) = str_at(item, "id") else { continue };
                                out.push(replayed::tool_call(
                                    call,
                                    str_at(item, "name").unwrap_or("tool"),
                                    item.get("input").cloned().unwrap_or(json!({})),
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Some("agent_turn_outcome") => {
            let reason = match str_at(record, "reason") {
                Some("completed") => EndReason::Completed,
                Some("interrupted" | "cancelled" | "aborted") => EndReason::Interrupted,
                _ => EndReason::Error,
            };
            out.push(replayed::turn_end(reason, "turn finished in the terminal"));
        }
        _ => {}
    }
    out.into_iter().map(mirrored).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::BlockKind;
    use terminull_protocol::adapter::LatestSidForCwdParams;

    const FIXTURE: &str =
        include_str!("../../../tests/fixtures/handoff/droid/a9c67ee4-25db-4e11-90a8-15ef62b6718d.jsonl");
    const ID: &str = "a9c67ee4-25db-4e11-90a8-15ef62b6718d";
    const CWD: &str = "/tmp/hrec3/ws";

    fn root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("sessions").join(session_dir_name(CWD));
        assert_eq!(session_dir_name(CWD), "-tmp-hrec3-ws");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{ID}.jsonl")), FIXTURE).unwrap();
        root
    }

    #[test]
    fn a_recorded_session_is_found_by_scan_with_its_cwd_and_title() {
        let root = root();
        let all = DroidSessions.scan(root.path(), &ScanExternalSessionsParams { cwd: None, limit: None });
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].agent_session_id.as_str(), ID);
        assert_eq!(all[0].cwd.as_deref(), Some(CWD));
        assert_eq!(all[0].title.as_deref(), Some("mock:tool please"));
        let head = DroidSessions.latest(root.path(), &LatestSidForCwdParams { cwd: CWD.into() });
        assert_eq!(head.agent_session_id.as_ref().map(|s| s.as_str()), Some(ID));
    }

    #[test]
    fn the_mirror_maps_the_recorded_turn_to_blocks_and_continues_from_its_cursor() {
        let root = root();
        let params = MirrorParams { cwd: CWD.into(), agent_session_id: ID.into(), cursor: None };
        let all = DroidSessions.read_mirror(root.path(), &params).unwrap();
        let types: Vec<&str> = all.blocks.iter().map(Block::block_type).collect();
        assert_eq!(
            types,
            ["user_message", "thinking", "text", "tool_call", "tool_result", "thinking", "text", "session_end"]
        );
        let BlockKind::UserMessage(m) = &all.blocks[0].kind else { unreachable!() };
        assert_eq!(m.text, "mock:tool please");
        assert!(
            DroidSessions
                .read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor), ..params })
                .unwrap()
                .blocks
                .is_empty()
        );
    }

    #[test]
    fn hostile_session_files_give_errors_not_panics() {
        let root = root();
        let params = |id: &str| MirrorParams { cwd: CWD.into(), agent_session_id: id.into(), cursor: None };
        assert!(DroidSessions.read_mirror(root.path(), &params("../x")).is_err());
        assert!(DroidSessions.read_mirror(root.path(), &params("nope")).unwrap_err().message.contains("nope"));
        let path = session_path(root.path(), CWD, ID).unwrap();
        std::fs::write(&path, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":{}}}\n\u{0}\n")
            .unwrap();
        assert!(DroidSessions.read_mirror(root.path(), &params(ID)).unwrap().blocks.is_empty());
    }

    #[test]
    fn a_droid_given_another_directory_or_session_does_not_own_this_one() {
        let p = |argv: &[&str], cwd: &str| ProcInfo {
            pid: 1,
            ppid: 0,
            exe: Some("droid".into()),
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            cwd: Some(PathBuf::from(cwd)),
            marked: false,
        };
        let here = Path::new("/w/shop");
        assert!(drives(&p(&["droid"], "/w/shop"), here, Some(ID)));
        assert!(drives(&p(&["droid", "exec", "--cwd", "/w/shop", "hi"], "/"), here, Some(ID)));
        assert!(!drives(&p(&["droid", "exec", "--cwd", "/w/other", "hi"], "/w/shop"), here, Some(ID)));
        assert!(!drives(&p(&["droid", "--resume", "another"], "/w/shop"), here, Some(ID)));
        let params = TerminalResumeCommandParams { agent_session_id: ID.into(), cwd: None };
        assert_eq!(DroidSessions.resume_command(&params).unwrap().argv, ["droid", "--resume", ID]);
    }
}
