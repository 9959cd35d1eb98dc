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

use serde_json::Value;
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::replayed::{self, ToolCallItem};
use terminull_adapter_sdk::handoff::{
    AgentHome, Described, ProcInfo, SessionFiles, SessionIds, TITLE_CHARS, files_with_suffix, is_probe, jsonl_files,
    newest_first, owned_where, str_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, ScanExternalSessionsParams,
};
use terminull_protocol::blocks::EndReason;

/// What a scan reads of each file.
const SCAN_READ: usize = 256 * 1024;

/// The directory name pi uses for `cwd`'s sessions.
pub fn session_dir_name(cwd: &str) -> String {
    let inner: String =
        cwd.trim_start_matches('/').chars().map(|c| if matches!(c, '/' | '\\' | ':') { '-' } else { c }).collect();
    format!("--{inner}--")
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
    Described::from_head(path, SCAN_READ, &PiSessions::IDS, |found, record| match str_at(record, "type") {
        Some("session") => {
            found.header(record);
        }
        Some("message") => {
            let role = record.pointer("/message/role").and_then(Value::as_str);
            if matches!(role, Some("user" | "assistant")) {
                found.messages += 1;
            }
            if role == Some("user") && found.title.is_none() {
                let text = text_of(record.pointer("/message/content"));
                found.title = (!text.is_empty()).then(|| title_of(&text, TITLE_CHARS));
            }
        }
        _ => {}
    })
}

/// Whether a process is pi: named `pi`, or node running pi's package.
pub fn is_pi(p: &ProcInfo) -> bool {
    p.program_names().iter().any(|n| n == "pi")
        || (p.program_names().iter().any(|n| n == "node")
            && p.argv.iter().skip(1).take(2).any(|a| a.contains("/pi-coding-agent/")))
}

/// Where pi keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct PiSessions;

impl SessionFiles for PiSessions {
    const HOME: AgentHome = AgentHome { env: Some("PI_CODING_AGENT_DIR"), under_home: ".pi/agent" };
    const IDS: SessionIds = SessionIds::named("a pi session id");
    const CLI: &'static str = "pi";
    const RESUME_ARGS: &'static [&'static str] = &["--session"];

    /// The sessions of `cwd`'s directory, or of every directory when it has none (the
    /// listing is narrowed to `cwd` by the sessions' headers then).
    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        let sessions = root.join("sessions");
        let dir = params.cwd.as_deref().map(session_dir_name).filter(|d| sessions.join(d).is_dir());
        newest_first(jsonl_files(&sessions, dir.as_deref()).iter().filter_map(|p| describe(p)), params)
    }

    /// Whether a pi command line may drive session `sid`: `--session <x>` names one (a
    /// prefix of the id, or a path holding it); any other (a new session, `-c`) may be it.
    fn drives(argv: &[String], sid: Option<&str>) -> bool {
        let Some(sid) = sid else { return true };
        let named = argv.windows(2).find(|w| w[0] == "--session").map(|w| w[1].clone());
        named.is_none_or(|n| sid.starts_with(n.as_str()) || n.contains(sid))
    }

    /// A pi process (not terminull's, and pi may run as a node script) drives `cwd`, and
    /// may be driving that session.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        owned_where(params, |p, sid| is_pi(p) && !is_probe(&p.argv) && Self::drives(&p.argv, sid))
    }

    /// The file whose name ends with the id (the header's id).
    fn session_path(&self, root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
        let suffix = format!("_{id}.jsonl");
        let sessions = root.join("sessions");
        let direct = files_with_suffix(&sessions.join(session_dir_name(cwd)), &suffix, 0, 1);
        direct
            .into_iter()
            .next()
            .or_else(|| files_with_suffix(&sessions, &suffix, 1, 1).into_iter().next())
            .ok_or_else(|| AdapterError::not_found(format!("no pi session file for {id} (cwd {cwd})")))
    }

    fn record_blocks(record: &Value) -> Vec<BlockKind> {
        if str_at(record, "type") != Some("message") {
            return Vec::new();
        }
        let message = record.get("message").unwrap_or(&Value::Null);
        let mut out = Vec::new();
        match str_at(message, "role") {
            Some("user") => {
                let text = text_of(message.get("content"));
                if !text.is_empty() {
                    out.push(replayed::user(text));
                }
            }
            Some("assistant") => {
                let tool = ToolCallItem { kind: "toolCall", input: "arguments" };
                let record_id = str_at(record, "id").unwrap_or("message");
                out = replayed::assistant_items(record_id, message.get("content"), tool);
                let reason = match str_at(message, "stopReason") {
                    Some("stop") => Some(EndReason::Completed),
                    Some("aborted") => Some(EndReason::Interrupted),
                    Some("error") => Some(EndReason::Error),
                    Some("length") => Some(EndReason::MaxTokens),
                    _ => None,
                };
                out.extend(reason.map(|reason| replayed::turn_end(reason, replayed::FINISHED_IN_TERMINAL)));
            }
            Some("toolResult") => {
                if let Some(id) = str_at(message, "toolCallId") {
                    let is_error = message.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    out.push(replayed::tool_result(id, text_of(message.get("content")), is_error));
                }
            }
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_adapter_sdk::handoff::testing::{self, PLAIN_TURN, TOOL_TURN};
    use terminull_protocol::adapter::ScanExternalSessionsParams;

    const FIXTURE: &str = include_str!(
        "../../../tests/fixtures/handoff/pi/2026-11-30T06-47-00-363Z_01a22b34-f40a-70a9-b8a3-d7362b0b15da.jsonl"
    );
    const ID: &str = "01a22b34-f40a-70a9-b8a3-d7362b0b15da";
    const CWD: &str = "/tmp/hrec2/ws";

    #[test]
    fn the_recorded_session_is_listed_with_its_count_and_both_turns_mirrored() {
        // A directory per cwd; the file is named by its start time and the session id.
        assert_eq!(session_dir_name(CWD), "--tmp-hrec2-ws--");
        let file = format!("2026-11-30T06-47-00-363Z_{ID}.jsonl");
        let root = testing::home_with("sessions/--tmp-hrec2-ws--", &file, FIXTURE);
        let all = testing::check_recorded(&PiSessions, root.path(), CWD, ID);
        assert_eq!(testing::types(&all.blocks), [&TOOL_TURN[..], &PLAIN_TURN[..]].concat());
        let listed = PiSessions.scan(root.path(), &ScanExternalSessionsParams { cwd: None, limit: None });
        assert_eq!(listed[0].message_count, Some(5));
        let garbage = "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":\"x\"}}\n{]\n";
        assert!(testing::mirror_of_garbage(&PiSessions, root.path(), CWD, ID, garbage).is_empty());
    }

    /// `pi --session` takes a prefix of the id, and pi may run as node's script.
    #[test]
    fn the_resume_command_and_session_arguments() {
        assert_eq!(testing::resume_argv(&PiSessions, ID), ["pi", "--session", ID]);
        testing::check_drives::<PiSessions>(
            Some(ID),
            &[(&["pi"], true), (&["pi", "--session", "01a22b34-f40a"], true), (&["pi", "--session", "99"], false)],
        );
        let cli = "/x/node_modules/@mariozechner/pi-coding-agent/dist/cli.js";
        assert!(is_pi(&testing::process("node", &["node", cli], None)));
    }
}
