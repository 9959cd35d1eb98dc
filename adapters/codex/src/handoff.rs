//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for Codex:
//! [`CodexSessions`].
//!
//! Codex keeps one JSONL "rollout" per thread at
//! `$CODEX_HOME` (default `~/.codex`) `/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`;
//! `codex exec resume <id>` and `codex resume <id>` append to the same file under the
//! same id. Records (0.171.0) are `{timestamp, type, payload}`: `session_meta` first
//! (`id`, `cwd`), then `response_item` (the raw Responses items: `message` by role,
//! `reasoning`, `function_call`, `function_call_output`), `event_msg` (`task_started`,
//! `task_complete`, `token_count`, …), `turn_context`, `world_state`, `token_usage_record`.
//!
//! These files are untrusted: every read is bounded ([`terminull_adapter_sdk::handoff`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::{
    JsonlCursor, JsonlLimits, MAX_SCANNED_FILES, SessionFiles, TITLE_CHARS, agent_home, files_with_suffix,
    mirror_jsonl, mirrored, mtime_secs, newest_first, owned_by_cli, read_jsonl, replayed, str_at, title_of,
};
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, MirrorParams, MirrorResult,
    ScanExternalSessionsParams, TerminalResumeCommandParams, TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, EndReason};

/// What a scan reads of each file: `session_meta` carries the base instructions, so
/// the head is tens of KiB before the first prompt.
const SCAN_READ: usize = 512 * 1024;

/// `$CODEX_HOME`, or `~/.codex`.
pub fn codex_home() -> Option<PathBuf> {
    agent_home(Some("CODEX_HOME"), ".codex")
}

fn check_id(id: &str) -> Result<(), AdapterError> {
    let ok = !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok { Ok(()) } else { Err(AdapterError::invalid(format!("`{id}` is not a Codex thread id"))) }
}

/// The rollout of thread `id` under `home`.
pub fn rollout_path(home: &Path, id: &str) -> Result<PathBuf, AdapterError> {
    check_id(id)?;
    files_with_suffix(&home.join("sessions"), &format!("-{id}.jsonl"), 3, 1)
        .into_iter()
        .next()
        .ok_or_else(|| AdapterError::not_found(format!("no Codex rollout for thread {id} under {}", home.display())))
}

fn rollouts(home: &Path) -> Vec<PathBuf> {
    files_with_suffix(&home.join("sessions"), ".jsonl", 3, MAX_SCANNED_FILES)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rollout-")))
        .collect()
}

/// A user `message` that the user typed (not the environment context Codex injects).
fn prompt_of(payload: &Value) -> Option<String> {
    if payload.get("type").and_then(Value::as_str) != Some("message")
        || payload.get("role").and_then(Value::as_str) != Some("user")
    {
        return None;
    }
    let text: Vec<&str> = payload
        .get("content")?
        .as_array()?
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("input_text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    let text = text.join("\n");
    let injected = text.trim_start().starts_with('<');
    (!text.is_empty() && !injected).then_some(text)
}

fn describe(path: &Path) -> Option<ExternalSession> {
    let chunk =
        read_jsonl(path, JsonlCursor::default(), JsonlLimits { max_line: SCAN_READ, max_read: SCAN_READ }).ok()?;
    let (mut id, mut cwd, mut title, mut messages) = (None, None, None, 0u64);
    for (_, record) in &chunk.records {
        let payload = record.get("payload").unwrap_or(&Value::Null);
        match record.get("type").and_then(Value::as_str) {
            Some("session_meta") if id.is_none() => {
                id = payload.get("id").and_then(Value::as_str).map(str::to_owned);
                cwd = payload.get("cwd").and_then(Value::as_str).map(str::to_owned);
            }
            Some("response_item") if payload.get("type").and_then(Value::as_str) == Some("message") => {
                if let Some(prompt) = prompt_of(payload) {
                    title.get_or_insert_with(|| title_of(&prompt, TITLE_CHARS));
                }
                if matches!(payload.get("role").and_then(Value::as_str), Some("user" | "assistant")) {
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

/// Whether a `codex` command line may drive thread `sid`: `resume <id>` names one;
/// any other command line (a new thread, `resume --last`) is taken as driving it.
pub fn names_thread(argv: &[String], sid: Option<&str>) -> bool {
    let Some(sid) = sid else { return true };
    let named = argv
        .windows(2)
        .find(|w| w[0] == "resume" && !w[1].starts_with('-'))
        .map(|w| w[1].clone())
        .filter(|id| check_id(id).is_ok() && id.len() >= 32);
    named.is_none_or(|n| n == sid)
}

/// Where Codex keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct CodexSessions;

impl SessionFiles for CodexSessions {
    fn root(&self) -> Result<PathBuf, AdapterError> {
        codex_home().ok_or_else(|| AdapterError::agent("neither CODEX_HOME nor HOME is set"))
    }

    /// `scan_external_sessions` against `home` (`$CODEX_HOME`).
    fn scan(&self, home: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        newest_first(rollouts(home).iter().filter_map(|p| describe(p)), params)
    }

    /// A `codex` process (the node wrapper or the native binary) drives `cwd`, and when
    /// `sid` is given its arguments name that thread or none.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        owned_by_cli(&["codex"], params, names_thread)
    }

    /// `mirror`: the rollout after the cursor, as blocks.
    fn read_mirror(&self, home: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        let path = rollout_path(home, params.agent_session_id.as_str())?;
        mirror_jsonl(&path, params.cursor.as_deref(), record_blocks)
    }

    /// `terminal_resume_command`: the interactive `codex resume <id>`.
    fn resume_command(
        &self,
        params: &TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        check_id(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec!["codex".into(), "resume".into(), params.agent_session_id.to_string()],
            cwd: params.cwd.clone(),
        })
    }
}

/// The blocks of one rollout record; nothing for bookkeeping records.
pub fn record_blocks(record: &Value) -> Vec<Block> {
    let payload = record.get("payload").unwrap_or(&Value::Null);
    let kind = match (str_at(record, "type"), str_at(payload, "type")) {
        (Some("response_item"), Some("message")) => match str_at(payload, "role") {
            Some("user") => prompt_of(payload).map(replayed::user),
            Some("assistant") => {
                let text: Vec<&str> = payload
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| str_at(c, "text"))
                    .collect();
                let id = str_at(payload, "id").unwrap_or("message").to_owned();
                Some(replayed::text(id, text.join("\n")))
            }
            _ => None,
        },
        (Some("response_item"), Some("reasoning")) => {
            let text: Vec<&str> = payload
                .get("summary")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| str_at(s, "text"))
                .collect();
            let id = str_at(payload, "id").unwrap_or("reasoning").to_owned();
            (!text.is_empty()).then(|| replayed::thinking(id, text.join("\n")))
        }
        (Some("response_item"), Some("function_call" | "custom_tool_call")) => str_at(payload, "call_id").map(|id| {
            let raw = payload.get("arguments").or_else(|| payload.get("input"));
            let input = match raw {
                Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| json!({ "input": s })),
                Some(other) => other.clone(),
                None => json!({}),
            };
            replayed::tool_call(id, str_at(payload, "name").unwrap_or("tool"), input)
        }),
        (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => str_at(payload, "call_id")
            .map(|id| {
                let output = match payload.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                replayed::tool_result(id, output, false)
            }),
        (Some("event_msg"), Some("task_complete")) => {
            Some(replayed::turn_end(EndReason::Completed, "turn finished in the terminal"))
        }
        (Some("event_msg"), Some("turn_aborted")) => {
            Some(replayed::turn_end(EndReason::Interrupted, "turn interrupted in the terminal"))
        }
        _ => None,
    };
    kind.into_iter().map(mirrored).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::BlockKind;
    use terminull_protocol::adapter::LatestSidForCwdParams;

    const FILE: &str = "rollout-2026-11-30T06-22-51-01a22b1e-d736-78a3-a961-79b9da931632.jsonl";
    const FIXTURE: &str = include_str!(
        "../../../tests/fixtures/handoff/codex/rollout-2026-11-30T06-22-51-01a22b1e-d736-78a3-a961-79b9da931632.jsonl"
    );
    const ID: &str = "01a22b1e-d736-78a3-a961-79b9da931632";
    const CWD: &str = "/tmp/hrec/ws";

    fn home() -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("sessions/2026/11/30");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), FIXTURE).unwrap();
        home
    }

    #[test]
    fn a_recorded_rollout_is_found_by_scan_with_its_cwd_and_first_prompt() {
        let home = home();
        let all = CodexSessions.scan(home.path(), &ScanExternalSessionsParams { cwd: None, limit: None });
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].agent_session_id.as_str(), ID);
        assert_eq!(all[0].cwd.as_deref(), Some(CWD));
        assert_eq!(all[0].title.as_deref(), Some("mock:tool please"));
        assert!(
            CodexSessions
                .scan(home.path(), &ScanExternalSessionsParams { cwd: Some("/x".into()), limit: None })
                .is_empty()
        );
        let head = CodexSessions.latest(home.path(), &LatestSidForCwdParams { cwd: CWD.into() });
        assert_eq!(head.agent_session_id.as_ref().map(|s| s.as_str()), Some(ID));
    }

    #[test]
    fn the_mirror_maps_both_recorded_turns_to_blocks_and_continues_from_its_cursor() {
        let home = home();
        let params = MirrorParams { cwd: CWD.into(), agent_session_id: ID.into(), cursor: None };
        let all = CodexSessions.read_mirror(home.path(), &params).unwrap();
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
        let BlockKind::ToolCall(call) = &all.blocks[3].kind else { panic!() };
        assert_eq!(call.input["cmd"], "echo hello");
        let again =
            CodexSessions.read_mirror(home.path(), &MirrorParams { cursor: Some(all.cursor), ..params }).unwrap();
        assert!(again.blocks.is_empty());
    }

    #[test]
    fn hostile_rollouts_give_errors_not_panics() {
        let home = home();
        let params = |id: &str| MirrorParams { cwd: CWD.into(), agent_session_id: id.into(), cursor: None };
        assert!(CodexSessions.read_mirror(home.path(), &params("../x")).is_err());
        assert!(CodexSessions.read_mirror(home.path(), &params("0000")).unwrap_err().message.contains("0000"));
        let path = rollout_path(home.path(), ID).unwrap();
        std::fs::write(&path, "{\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":7}}\nnope\n").unwrap();
        let read = CodexSessions.read_mirror(home.path(), &params(ID)).unwrap();
        assert_eq!(read.blocks.len(), 1);
        assert!(CodexSessions.scan(home.path(), &ScanExternalSessionsParams { cwd: None, limit: None }).is_empty());
    }

    #[test]
    fn the_resume_command_names_the_thread() {
        let params = TerminalResumeCommandParams { agent_session_id: ID.into(), cwd: Some(CWD.into()) };
        assert_eq!(CodexSessions.resume_command(&params).unwrap().argv, ["codex", "resume", ID]);
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(names_thread(&argv(&["codex", "exec", "resume", ID, "hi"]), Some(ID)));
        assert!(!names_thread(&argv(&["codex", "exec", "resume", "01a22b1e-0000-78a3-a961-79b9da931632"]), Some(ID)));
        assert!(names_thread(&argv(&["codex", "exec", "hi"]), Some(ID)));
    }
}
