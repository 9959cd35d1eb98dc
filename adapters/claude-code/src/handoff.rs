//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for Claude Code:
//! [`ClaudeSessions`].
//!
//! Claude Code keeps one JSONL transcript per session at
//! `$CLAUDE_CONFIG_DIR` (default `~/.claude`) `/projects/<cwd, every character but
//! a-z A-Z 0-9 as ->/<session uuid>.jsonl`; `claude --resume <id>` appends to the same
//! file under the same id. Records (2.1.197): `user` / `assistant` (one per content
//! block, with `uuid`, `cwd`, `sessionId`, `message`), `queue-operation`, `attachment`,
//! `last-prompt` (written when a turn is done), `mode`.
//!
//! These files are untrusted: every read is bounded ([`terminull_adapter_sdk::handoff`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::{
    JsonlCursor, JsonlLimits, MAX_SCANNED_FILES, SessionFiles, TITLE_CHARS, agent_home, files_with_suffix,
    mirror_jsonl, mirrored, mtime_secs, newest_first, owned_by_cli, read_jsonl, replayed, str_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, MirrorParams, MirrorResult,
    ScanExternalSessionsParams, TerminalResumeCommandParams, TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, EndReason, UserMessage};

/// What a scan reads of each file (the head: cwd and the first prompt).
const SCAN_READ: usize = 256 * 1024;

/// `$CLAUDE_CONFIG_DIR`, or `~/.claude`.
pub fn config_dir() -> Option<PathBuf> {
    agent_home(Some("CLAUDE_CONFIG_DIR"), ".claude")
}

/// The project directory name Claude Code uses for `cwd`.
pub fn project_dir_name(cwd: &str) -> String {
    cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// The transcript of session `sid` in `cwd` under `root` (the config dir).
pub fn transcript_path(root: &Path, cwd: &str, sid: &str) -> Result<PathBuf, AdapterError> {
    check_sid(sid)?;
    let direct = root.join("projects").join(project_dir_name(cwd)).join(format!("{sid}.jsonl"));
    if direct.is_file() {
        return Ok(direct);
    }
    // The directory naming is Claude Code's business; fall back to any project.
    files_with_suffix(&root.join("projects"), &format!("{sid}.jsonl"), 1, 1)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == format!("{sid}.jsonl")))
        .ok_or_else(|| AdapterError::not_found(format!("no Claude Code transcript for session {sid} (cwd {cwd})")))
}

/// A session id is a file name here: refuse anything that could leave the directory.
fn check_sid(sid: &str) -> Result<(), AdapterError> {
    let ok =
        !sid.is_empty() && sid.len() <= 128 && sid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok { Ok(()) } else { Err(AdapterError::invalid(format!("`{sid}` is not a Claude Code session id"))) }
}

fn session_files(root: &Path, cwd: Option<&str>) -> Vec<PathBuf> {
    let projects = root.join("projects");
    let files = match cwd {
        Some(cwd) => files_with_suffix(&projects.join(project_dir_name(cwd)), ".jsonl", 0, MAX_SCANNED_FILES),
        None => files_with_suffix(&projects, ".jsonl", 1, MAX_SCANNED_FILES),
    };
    // Sub-agent transcripts (`agent-*.jsonl`) are not sessions of their own.
    files.into_iter().filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("agent-"))).collect()
}

/// Reads the head of one transcript into a listing.
fn describe(path: &Path) -> Option<ExternalSession> {
    let sid = path.file_stem()?.to_string_lossy().into_owned();
    let chunk =
        read_jsonl(path, JsonlCursor::default(), JsonlLimits { max_line: SCAN_READ, max_read: SCAN_READ }).ok()?;
    let mut cwd = None;
    let mut title = None;
    let mut messages = 0u64;
    for (_, record) in &chunk.records {
        if cwd.is_none() {
            cwd = record.get("cwd").and_then(Value::as_str).map(str::to_owned);
        }
        if matches!(record.get("type").and_then(Value::as_str), Some("user" | "assistant")) {
            messages += 1;
        }
        if title.is_none() && is_prompt(record) {
            title = prompt_text(record).map(|t| title_of(&t, TITLE_CHARS));
        }
    }
    // A file with no conversation in it (only queue bookkeeping) is not listed.
    if messages == 0 {
        return None;
    }
    Some(ExternalSession {
        agent_session_id: sid.into(),
        cwd,
        title,
        updated_at: mtime_secs(path),
        // Only the head was read: a count would be wrong for long sessions.
        message_count: (chunk.records.len() < 10_000 && (chunk.cursor.offset as usize) < SCAN_READ).then_some(messages),
    })
}

/// Whether a `claude` command line may be driving `sid`: it names it, or names no
/// session (a new or `--continue`d one in that directory).
pub fn names_session(argv: &[String], sid: Option<&str>) -> bool {
    let Some(sid) = sid else { return true };
    let named =
        argv.windows(2).find_map(|w| matches!(w[0].as_str(), "--resume" | "-r" | "--session-id").then(|| w[1].clone()));
    let named = named.or_else(|| {
        argv.iter()
            .find_map(|a| a.strip_prefix("--resume=").or_else(|| a.strip_prefix("--session-id=")).map(str::to_owned))
    });
    named.is_none_or(|n| n == sid)
}

fn is_prompt(record: &Value) -> bool {
    record.get("type").and_then(Value::as_str) == Some("user")
        && record.get("isMeta").and_then(Value::as_bool) != Some(true)
        && record.get("isSidechain").and_then(Value::as_bool) != Some(true)
        && prompt_text(record).is_some()
}

/// The text of a user record that is a prompt (not a tool result).
fn prompt_text(record: &Value) -> Option<String> {
    match record.pointer("/message/content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let texts: Vec<&str> = items
                .iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect();
            let only_text =
                items.iter().all(|i| matches!(i.get("type").and_then(Value::as_str), Some("text" | "image")));
            (only_text && !texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// Where Claude Code keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeSessions;

impl SessionFiles for ClaudeSessions {
    fn root(&self) -> Result<PathBuf, AdapterError> {
        config_dir().ok_or_else(|| AdapterError::agent("no HOME to find ~/.claude in"))
    }

    /// `scan_external_sessions` against the config dir `root`.
    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        newest_first(session_files(root, params.cwd.as_deref()).iter().filter_map(|p| describe(p)), params)
    }

    /// A `claude` process drives `cwd`, and (when `sid` is given) it is that session or
    /// one whose arguments do not say which.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        owned_by_cli(&["claude"], params, names_session)
    }

    /// `mirror`: the transcript after the cursor, as blocks.
    fn read_mirror(&self, root: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        let path = transcript_path(root, &params.cwd, params.agent_session_id.as_str())?;
        mirror_jsonl(&path, params.cursor.as_deref(), record_blocks)
    }

    /// `terminal_resume_command`.
    fn resume_command(
        &self,
        params: &TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        check_sid(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec!["claude".into(), "--resume".into(), params.agent_session_id.to_string()],
            cwd: params.cwd.clone(),
        })
    }
}

/// The blocks of one transcript record; nothing for bookkeeping records.
pub fn record_blocks(record: &Value) -> Vec<Block> {
    let kind = str_at(record, "type").unwrap_or_default();
    if record.get("isSidechain").and_then(Value::as_bool) == Some(true) {
        return Vec::new();
    }
    let uuid = str_at(record, "uuid").unwrap_or("record").to_owned();
    let mut out = Vec::new();
    match kind {
        "user" if is_prompt(record) => {
            if let Some(text) = prompt_text(record) {
                out.push(BlockKind::UserMessage(UserMessage { text, attachments: Vec::new() }));
            }
        }
        "user" => {
            for item in record.pointer("/message/content").and_then(Value::as_array).into_iter().flatten() {
                if str_at(item, "type") == Some("tool_result") {
                    let Some(id) = str_at(item, "tool_use_id") else { continue };
                    out.push(replayed::tool_result(
                        id,
                        tool_output(item.get("content")),
                        item.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    ));
                }
            }
        }
        "assistant" => {
            let items = record.pointer("/message/content").and_then(Value::as_array);
            for (i, item) in items.into_iter().flatten().enumerate() {
                let id = format!("{uuid}-{i}");
                match str_at(item, "type") {
                    Some("text") => out.push(replayed::text(id, str_at(item, "text").unwrap_or_default())),
                    Some("thinking") => out.push(replayed::thinking(id, str_at(item, "thinking").unwrap_or_default())),
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
        // Written once the turn is over.
        "last-prompt" => out.push(replayed::turn_end(EndReason::Completed, "turn finished in the terminal")),
        _ => {}
    }
    out.into_iter().map(mirrored).collect()
}

fn tool_output(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().filter_map(|i| str_at(i, "text")).collect::<Vec<_>>().join("\n"),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::adapter::LatestSidForCwdParams;

    const FIXTURE: &str = include_str!("../../../tests/fixtures/handoff/claude-code/session.jsonl");
    const SID: &str = "31097f06-536b-48b5-8764-fd25df0d2d6d";
    const CWD: &str = "/tmp/hrec/ws";

    fn store() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("projects").join(project_dir_name(CWD));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{SID}.jsonl")), FIXTURE).unwrap();
        root
    }

    #[test]
    fn a_recorded_session_is_found_by_scan_with_its_cwd_and_first_prompt() {
        let root = store();
        let all = ClaudeSessions.scan(root.path(), &ScanExternalSessionsParams { cwd: None, limit: None });
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].agent_session_id.as_str(), SID);
        assert_eq!(all[0].cwd.as_deref(), Some(CWD));
        assert_eq!(all[0].title.as_deref(), Some("mock:tool please"));
        let other = ClaudeSessions
            .scan(root.path(), &ScanExternalSessionsParams { cwd: Some("/elsewhere".into()), limit: None });
        assert!(other.is_empty());
        let head = ClaudeSessions.latest(root.path(), &LatestSidForCwdParams { cwd: CWD.into() });
        assert_eq!(head.agent_session_id.as_ref().map(|s| s.as_str()), Some(SID));
    }

    #[test]
    fn the_mirror_maps_both_recorded_turns_to_blocks_and_continues_from_its_cursor() {
        let root = store();
        let params = MirrorParams { cwd: CWD.into(), agent_session_id: SID.into(), cursor: None };
        let all = ClaudeSessions.read_mirror(root.path(), &params).unwrap();
        let types: Vec<&str> = all.blocks.iter().map(Block::block_type).collect();
        assert_eq!(
            types,
            [
                "user_message",
                "thinking",
                "text",
                "tool_call",
                "tool_result",
                "thinking",
                "text",
                "session_end",
                "user_message",
                "text",
                "session_end"
            ]
        );
        assert!(all.blocks.iter().all(|b| b.meta.as_ref().is_some_and(|m| m["mirrored"] == true)));
        let again = ClaudeSessions
            .read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor.clone()), ..params.clone() })
            .unwrap();
        assert!(again.blocks.is_empty());
        // A turn appended later arrives alone.
        let path = transcript_path(root.path(), CWD, SID).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(r#"{"type":"user","uuid":"u9","sessionId":"x","message":{"role":"user","content":"third"}}"#);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        let next =
            ClaudeSessions.read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor), ..params }).unwrap();
        assert!(matches!(&next.blocks[..], [b] if matches!(&b.kind, BlockKind::UserMessage(m) if m.text == "third")));
    }

    #[test]
    fn hostile_transcripts_give_errors_not_panics() {
        let root = store();
        let params = |sid: &str| MirrorParams { cwd: CWD.into(), agent_session_id: sid.into(), cursor: None };
        assert!(ClaudeSessions.read_mirror(root.path(), &params("../../etc/passwd")).is_err());
        assert!(
            ClaudeSessions
                .read_mirror(root.path(), &params("no-such-session"))
                .unwrap_err()
                .message
                .contains("no-such-session")
        );
        let path = transcript_path(root.path(), CWD, SID).unwrap();
        std::fs::write(&path, "garbage\n{\"type\":\"assistant\",\"message\":{\"content\":\"not a list\"}}\n[1,2]\n")
            .unwrap();
        let read = ClaudeSessions.read_mirror(root.path(), &params(SID)).unwrap();
        assert!(read.blocks.is_empty());
    }

    #[test]
    fn the_resume_command_names_the_session() {
        let params = TerminalResumeCommandParams { agent_session_id: SID.into(), cwd: Some(CWD.into()) };
        let command = ClaudeSessions.resume_command(&params).unwrap();
        assert_eq!(command.argv, ["claude", "--resume", SID]);
        assert_eq!(command.cwd.as_deref(), Some(CWD));
    }

    #[test]
    fn a_claude_naming_another_session_does_not_own_this_one() {
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(names_session(&argv(&["claude"]), Some(SID)));
        assert!(names_session(&argv(&["claude", "--resume", SID]), Some(SID)));
        assert!(!names_session(&argv(&["claude", "-r", "other"]), Some(SID)));
        assert!(names_session(&argv(&["claude", "-r", "other"]), None));
    }
}
