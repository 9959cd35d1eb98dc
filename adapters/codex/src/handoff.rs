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
    AgentHome, Described, MAX_SCANNED_FILES, SessionFiles, SessionIds, TITLE_CHARS, files_with_suffix, newest_first,
    replayed, str_at, strings_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{ExternalSession, ScanExternalSessionsParams};
use terminull_protocol::blocks::EndReason;

/// What a scan reads of each file: `session_meta` carries the base instructions, so
/// the head is tens of KiB before the first prompt.
const SCAN_READ: usize = 512 * 1024;

fn rollouts(home: &Path) -> Vec<PathBuf> {
    files_with_suffix(&home.join("sessions"), ".jsonl", 3, MAX_SCANNED_FILES)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rollout-")))
        .collect()
}

/// A user `message` that the user typed (not the environment context Codex injects).
fn prompt_of(payload: &Value) -> Option<String> {
    if str_at(payload, "type") != Some("message") || str_at(payload, "role") != Some("user") {
        return None;
    }
    let items = payload.get("content")?.as_array()?;
    let typed = items.iter().filter(|c| str_at(c, "type") == Some("input_text"));
    let text = typed.filter_map(|c| str_at(c, "text")).collect::<Vec<_>>().join("\n");
    let injected = text.trim_start().starts_with('<');
    (!text.is_empty() && !injected).then_some(text)
}

fn describe(path: &Path) -> Option<ExternalSession> {
    Described::from_head(path, SCAN_READ, &CodexSessions::IDS, |found, record| {
        let payload = record.get("payload").unwrap_or(&Value::Null);
        match (str_at(record, "type"), str_at(payload, "type")) {
            (Some("session_meta"), _) => {
                found.header(payload);
            }
            (Some("response_item"), Some("message")) => {
                if let Some(prompt) = prompt_of(payload) {
                    found.title.get_or_insert_with(|| title_of(&prompt, TITLE_CHARS));
                }
                if matches!(str_at(payload, "role"), Some("user" | "assistant")) {
                    found.messages += 1;
                }
            }
            _ => {}
        }
    })
}

/// Where Codex keeps its sessions (`$CODEX_HOME/sessions`), and how they are read for the
/// handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct CodexSessions;

impl SessionFiles for CodexSessions {
    const HOME: AgentHome = AgentHome { env: Some("CODEX_HOME"), under_home: ".codex" };
    const IDS: SessionIds = SessionIds::named("a Codex thread id");
    /// The node wrapper or the native binary.
    const CLI: &'static str = "codex";
    /// The interactive `codex resume <id>`.
    const RESUME_ARGS: &'static [&'static str] = &["resume"];

    fn scan(&self, home: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        newest_first(rollouts(home).iter().filter_map(|p| describe(p)), params)
    }

    /// Whether a `codex` command line may drive thread `sid`: `resume <id>` names one;
    /// any other command line (a new thread, `resume --last`) is taken as driving it.
    fn drives(argv: &[String], sid: Option<&str>) -> bool {
        let Some(sid) = sid else { return true };
        let named = argv
            .windows(2)
            .find(|w| w[0] == "resume" && !w[1].starts_with('-'))
            .map(|w| w[1].clone())
            .filter(|id| Self::IDS.is_valid(id) && id.len() >= 32);
        named.is_none_or(|n| n == sid)
    }

    /// The rollout whose name ends with the thread id (rollouts are filed by date).
    fn session_path(&self, home: &Path, _cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
        files_with_suffix(&home.join("sessions"), &format!("-{id}.jsonl"), 3, 1).into_iter().next().ok_or_else(|| {
            AdapterError::not_found(format!("no Codex rollout for thread {id} under {}", home.display()))
        })
    }

    /// The blocks of one rollout record; nothing for bookkeeping records.
    fn record_blocks(record: &Value) -> Vec<BlockKind> {
        let payload = record.get("payload").unwrap_or(&Value::Null);
        let kind = match (str_at(record, "type"), str_at(payload, "type")) {
            (Some("response_item"), Some("message")) => match str_at(payload, "role") {
                Some("user") => prompt_of(payload).map(replayed::user),
                Some("assistant") => {
                    let text = strings_at(payload.get("content"), "text").join("\n");
                    Some(replayed::text(str_at(payload, "id").unwrap_or("message"), text))
                }
                _ => None,
            },
            (Some("response_item"), Some("reasoning")) => {
                let text = strings_at(payload.get("summary"), "text");
                let id = str_at(payload, "id").unwrap_or("reasoning");
                (!text.is_empty()).then(|| replayed::thinking(id, text.join("\n")))
            }
            (Some("response_item"), Some("function_call" | "custom_tool_call")) => {
                str_at(payload, "call_id").map(|id| {
                    let raw = payload.get("arguments").or_else(|| payload.get("input"));
                    let input = match raw {
                        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| json!({ "input": s })),
                        Some(other) => other.clone(),
                        None => json!({}),
                    };
                    replayed::tool_call(id, str_at(payload, "name").unwrap_or("tool"), input)
                })
            }
            (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
                str_at(payload, "call_id").map(|id| {
                    let output = match payload.get("output") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    replayed::tool_result(id, output, false)
                })
            }
            (Some("event_msg"), Some("task_complete")) => {
                Some(replayed::turn_end(EndReason::Completed, replayed::FINISHED_IN_TERMINAL))
            }
            (Some("event_msg"), Some("turn_aborted")) => {
                Some(replayed::turn_end(EndReason::Interrupted, "turn interrupted in the terminal"))
            }
            _ => None,
        };
        kind.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_adapter_sdk::handoff::testing::{self, PLAIN_TURN, TOOL_TURN};

    const FIXTURE: &str = include_str!(
        "../../../tests/fixtures/handoff/codex/rollout-2026-11-30T06-22-51-01a22b1e-d736-78a3-a961-79b9da931632.jsonl"
    );
    const ID: &str = "01a22b1e-d736-78a3-a961-79b9da931632";
    const CWD: &str = "/tmp/hrec/ws";

    #[test]
    fn the_resume_command_names_the_thread() {
        assert_eq!(testing::resume_argv(&CodexSessions, ID), ["codex", "resume", ID]);
        let other = "01a22b1e-0000-78a3-a961-79b9da931632";
        let cases: [(&[&str], bool); 3] = [
            (&["codex", "exec", "resume", ID, "hi"], true),
            (&["codex", "exec", "resume", other], false),
            (&["codex", "exec", "hi"], true),
        ];
        testing::check_drives::<CodexSessions>(Some(ID), &cases);
    }

    #[test]
    fn the_recorded_rollout_is_listed_and_both_turns_mirrored() {
        // Rollouts are filed by date and named by their thread.
        let file = format!("rollout-2026-11-30T06-22-51-{ID}.jsonl");
        let home = testing::home_with("sessions/2026/11/30", &file, FIXTURE);
        let all = testing::check_recorded(&CodexSessions, home.path(), CWD, ID);
        assert_eq!(testing::types(&all.blocks), [&TOOL_TURN[..], &PLAIN_TURN[..]].concat());
        let BlockKind::ToolCall(call) = &all.blocks[3].kind else { panic!() };
        assert_eq!(call.input["cmd"], "echo hello");
        // A rollout without its `session_meta` is no thread.
        let garbage = "{\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":7}}\nnope\n";
        assert_eq!(testing::mirror_of_garbage(&CodexSessions, home.path(), CWD, ID, garbage).len(), 1);
        assert!(CodexSessions.scan(home.path(), &ScanExternalSessionsParams { cwd: None, limit: None }).is_empty());
    }
}
