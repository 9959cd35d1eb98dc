//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for pi:
//! [`PiSessions`].
//!
//! pi keeps one JSONL file per session at `$PI_CODING_AGENT_DIR` (default
//! `~/.pi/agent`) `/sessions/--<cwd, / as ->--/<ISO time>_<session id>.jsonl`;
//! `pi --session <id>` appends to the same file under the same id. Records (0.73.1): a
//! `session` header (`id`, `cwd`), then a tree (`id`/`parentId`) of `model_change`,
//! `thinking_level_change` and `message` records whose `message` has `role` `user`,
//! `assistant` (content items `thinking`, `text`, `toolCall`; `stopReason`) or
//! `toolResult`.
//!
//! These files are untrusted: every read is bounded ([`terminull_adapter_sdk::handoff`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::{
    JsonlCursor, JsonlLimits, MAX_SCANNED_FILES, ProcInfo, SessionFiles, TITLE_CHARS, agent_home, files_with_suffix,
    find_native_owner_where, is_probe, mirror_jsonl, mirrored, mtime_secs, newest_first, read_jsonl, replayed, str_at,
    title_of,
};
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, MirrorParams, MirrorResult,
    ScanExternalSessionsParams, TerminalResumeCommandParams, TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, EndReason};

/// What a scan reads of each file.
const SCAN_READ: usize = 256 * 1024;

/// `$PI_CODING_AGENT_DIR`, or `~/.pi/agent`.
pub fn agent_dir() -> Option<PathBuf> {
    agent_home(Some("PI_CODING_AGENT_DIR"), ".pi/agent")
}

/// The directory name pi uses for `cwd`'s sessions.
pub fn session_dir_name(cwd: &str) -> String {
    let inner: String =
        cwd.trim_start_matches('/').chars().map(|c| if matches!(c, '/' | '\\' | ':') { '-' } else { c }).collect();
    format!("--{inner}--")
}

fn check_id(id: &str) -> Result<(), AdapterError> {
    let ok = !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok { Ok(()) } else { Err(AdapterError::invalid(format!("`{id}` is not a pi session id"))) }
}

fn session_files(root: &Path, cwd: Option<&str>) -> Vec<PathBuf> {
    let sessions = root.join("sessions");
    if let Some(cwd) = cwd {
        let dir = sessions.join(session_dir_name(cwd));
        if dir.is_dir() {
            return files_with_suffix(&dir, ".jsonl", 0, MAX_SCANNED_FILES);
        }
    }
    files_with_suffix(&sessions, ".jsonl", 1, MAX_SCANNED_FILES)
}

/// The file of session `id` (the header's id is what the file name ends with).
pub fn session_path(root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
    check_id(id)?;
    let suffix = format!("_{id}.jsonl");
    let direct = files_with_suffix(&root.join("sessions").join(session_dir_name(cwd)), &suffix, 0, 1);
    direct
        .into_iter()
        .next()
        .or_else(|| files_with_suffix(&root.join("sessions"), &suffix, 1, 1).into_iter().next())
        .ok_or_else(|| AdapterError::not_found(format!("no pi session file for {id} (cwd {cwd})")))
}

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn describe(path: &Path) -> Option<ExternalSession> {
    let chunk =
        read_jsonl(path, JsonlCursor::default(), JsonlLimits { max_line: SCAN_READ, max_read: SCAN_READ }).ok()?;
    let (mut id, mut cwd, mut title, mut messages) = (None, None, None, 0u64);
    for (_, record) in &chunk.records {
        match record.get("type").and_then(Value::as_str) {
            Some("session") if id.is_none() => {
                id = record.get("id").and_then(Value::as_str).map(str::to_owned);
                cwd = record.get("cwd").and_then(Value::as_str).map(str::to_owned);
            }
            Some("message") => {
                let role = record.pointer("/message/role").and_then(Value::as_str);
                if matches!(role, Some("user" | "assistant")) {
                    messages += 1;
                }
                if role == Some("user") && title.is_none() {
                    let text = text_of(record.pointer("/message/content"));
                    if !text.is_empty() {
                        title = Some(title_of(&text, TITLE_CHARS));
                    }
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

/// Whether a process is pi: named `pi`, or node running pi's package.
pub fn is_pi(p: &ProcInfo) -> bool {
    p.program_names().iter().any(|n| n == "pi")
        || (p.program_names().iter().any(|n| n == "node")
            && p.argv.iter().skip(1).take(2).any(|a| a.contains("/pi-coding-agent/")))
}

/// Whether a pi command line may drive session `sid`: `--session <x>` names one (a
/// prefix of the id, or a path holding it); any other (a new session, `-c`) may be it.
pub fn names_session(argv: &[String], sid: Option<&str>) -> bool {
    let Some(sid) = sid else { return true };
    let named = argv.windows(2).find(|w| w[0] == "--session").map(|w| w[1].clone());
    named.is_none_or(|n| sid.starts_with(n.as_str()) || n.contains(sid))
}

/// Where pi keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct PiSessions;

impl SessionFiles for PiSessions {
    fn root(&self) -> Result<PathBuf, AdapterError> {
        agent_dir().ok_or_else(|| AdapterError::agent("neither PI_CODING_AGENT_DIR nor HOME is set"))
    }

    /// `scan_external_sessions` against pi's agent dir `root`.
    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        newest_first(session_files(root, params.cwd.as_deref()).iter().filter_map(|p| describe(p)), params)
    }

    /// A pi process (not terminull's) drives `cwd`, and may be driving that session.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        let sid = params.agent_session_id.as_ref().map(ToString::to_string);
        let pid = find_native_owner_where(Path::new(&params.cwd), |p| {
            is_pi(p) && !is_probe(&p.argv) && names_session(&p.argv, sid.as_deref())
        });
        IsCwdExternallyOwnedResult { owned: pid.is_some(), pid }
    }

    /// `mirror`: the session file after the cursor, as blocks.
    fn read_mirror(&self, root: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        let path = session_path(root, &params.cwd, params.agent_session_id.as_str())?;
        mirror_jsonl(&path, params.cursor.as_deref(), record_blocks)
    }

    /// `terminal_resume_command`: `pi --session <id>`.
    fn resume_command(
        &self,
        params: &TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        check_id(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec!["pi".into(), "--session".into(), params.agent_session_id.to_string()],
            cwd: params.cwd.clone(),
        })
    }
}

/// The blocks of one session record.
pub fn record_blocks(record: &Value) -> Vec<Block> {
    if str_at(record, "type") != Some("message") {
        return Vec::new();
    }
    let Some(message) = record.get("message") else { return Vec::new() };
    let record_id = str_at(record, "id").unwrap_or("message");
    let mut out = Vec::new();
    match str_at(message, "role") {
        Some("user") => {
            let text = text_of(message.get("content"));
            if !text.is_empty() {
                out.push(replayed::user(text));
            }
        }
        Some("assistant") => {
            for (i, item) in message.get("content").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let id = format!("{record_id}-{i}");
                match str_at(item, "type") {
                    Some("text") => out.push(replayed::text(id, str_at(item, "text").unwrap_or_default())),
                    Some("thinking") => out.push(replayed::thinking(id, str_at(item, "thinking").unwrap_or_default())),
                    Some("toolCall") => {
                        let Some(call) = str_at(item, "id") else { continue };
                        out.push(replayed::tool_call(
                            call,
                            str_at(item, "name").unwrap_or("tool"),
                            item.get("arguments").cloned().unwrap_or(json!({})),
                        ));
                    }
                    _ => {}
                }
            }
            let reason = match str_at(message, "stopReason") {
                Some("stop") => Some(EndReason::Completed),
                Some("aborted") => Some(EndReason::Interrupted),
                Some("error") => Some(EndReason::Error),
                Some("length") => Some(EndReason::MaxTokens),
                _ => None,
            };
            if let Some(reason) = reason {
                out.push(replayed::turn_end(reason, "turn finished in the terminal"));
            }
        }
        Some("toolResult") => {
            if let Some(id) = str_at(message, "toolCallId") {
                out.push(replayed::tool_result(
                    id,
                    text_of(message.get("content")),
                    message.get("isError").and_then(Value::as_bool).unwrap_or(false),
                ));
            }
        }
        _ => {}
    }
    out.into_iter().map(mirrored).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::adapter::LatestSidForCwdParams;

    const FILE: &str = "2026-11-30T06-47-00-363Z_01a22b34-f40a-70a9-b8a3-d7362b0b15da.jsonl";
    const FIXTURE: &str = include_str!(
        "../../../tests/fixtures/handoff/pi/2026-11-30T06-47-00-363Z_01a22b34-f40a-70a9-b8a3-d7362b0b15da.jsonl"
    );
    const ID: &str = "01a22b34-f40a-70a9-b8a3-d7362b0b15da";
    const CWD: &str = "/tmp/hrec2/ws";

    fn root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("sessions").join(session_dir_name(CWD));
        assert_eq!(session_dir_name(CWD), "--tmp-hrec2-ws--");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), FIXTURE).unwrap();
        root
    }

    #[test]
    fn a_recorded_session_is_found_by_scan_with_its_cwd_and_first_prompt() {
        let root = root();
        let all = PiSessions.scan(root.path(), &ScanExternalSessionsParams { cwd: None, limit: None });
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].agent_session_id.as_str(), ID);
        assert_eq!(all[0].cwd.as_deref(), Some(CWD));
        assert_eq!(all[0].title.as_deref(), Some("mock:tool please"));
        assert_eq!(all[0].message_count, Some(5));
        let head = PiSessions.latest(root.path(), &LatestSidForCwdParams { cwd: CWD.into() });
        assert_eq!(head.agent_session_id.as_ref().map(|s| s.as_str()), Some(ID));
        assert!(PiSessions.latest(root.path(), &LatestSidForCwdParams { cwd: "/x".into() }).agent_session_id.is_none());
    }

    #[test]
    fn the_mirror_maps_both_recorded_turns_to_blocks_and_continues_from_its_cursor() {
        let root = root();
        let params = MirrorParams { cwd: CWD.into(), agent_session_id: ID.into(), cursor: None };
        let all = PiSessions.read_mirror(root.path(), &params).unwrap();
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
        let again = PiSessions.read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor), ..params }).unwrap();
        assert!(again.blocks.is_empty());
    }

    #[test]
    fn hostile_session_files_give_errors_not_panics() {
        let root = root();
        let params = |id: &str| MirrorParams { cwd: CWD.into(), agent_session_id: id.into(), cursor: None };
        assert!(PiSessions.read_mirror(root.path(), &params("../../x")).is_err());
        assert!(PiSessions.read_mirror(root.path(), &params("abc")).unwrap_err().message.contains("abc"));
        let path = session_path(root.path(), CWD, ID).unwrap();
        std::fs::write(&path, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":\"x\"}}\n{]\n")
            .unwrap();
        assert!(PiSessions.read_mirror(root.path(), &params(ID)).unwrap().blocks.is_empty());
    }

    #[test]
    fn the_resume_command_and_session_arguments() {
        let params = TerminalResumeCommandParams { agent_session_id: ID.into(), cwd: None };
        assert_eq!(PiSessions.resume_command(&params).unwrap().argv, ["pi", "--session", ID]);
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(names_session(&argv(&["pi"]), Some(ID)));
        assert!(names_session(&argv(&["pi", "--session", "01a22b34-f40a"]), Some(ID)));
        assert!(!names_session(&argv(&["pi", "--session", "99"]), Some(ID)));
        let node = ProcInfo {
            pid: 1,
            ppid: 0,
            exe: Some("node".into()),
            argv: argv(&["node", "/x/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"]),
            cwd: None,
            marked: false,
        };
        assert!(is_pi(&node));
    }
}
