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

use serde_json::Value;
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::replayed::{self, ToolCallItem};
use terminull_adapter_sdk::handoff::{
    AgentHome, Described, SessionFiles, SessionIds, TITLE_CHARS, dashed_dir_name, file_here_or_below, jsonl_files,
    newest_first, read_head, str_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{ExternalSession, ScanExternalSessionsParams};
use terminull_protocol::blocks::EndReason;

/// What a scan reads of each file (the head: cwd and the first prompt).
const SCAN_READ: usize = 256 * 1024;

/// Reads the head of one transcript into a listing.
fn describe(path: &Path) -> Option<ExternalSession> {
    let head = read_head(path, SCAN_READ)?;
    let mut found = Described { id: Some(path.file_stem()?.to_string_lossy().into_owned()), ..Described::default() };
    for (_, record) in &head.records {
        if found.cwd.is_none() {
            found.cwd = str_at(record, "cwd").map(str::to_owned);
        }
        if matches!(str_at(record, "type"), Some("user" | "assistant")) {
            found.messages += 1;
        }
        if found.title.is_none() && is_prompt(record) {
            found.title = prompt_text(record).map(|t| title_of(&t, TITLE_CHARS));
        }
    }
    // A file with no conversation in it (only queue bookkeeping) is not listed.
    if found.messages == 0 {
        return None;
    }
    let whole = head.whole && head.records.len() < 10_000;
    found.listing(&ClaudeSessions::IDS, path, whole)
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

/// Where Claude Code keeps its sessions (`~/.claude/projects`, a directory per cwd), and
/// how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeSessions;

impl SessionFiles for ClaudeSessions {
    const HOME: AgentHome = AgentHome { env: Some("CLAUDE_CONFIG_DIR"), under_home: ".claude" };
    /// A session id is a file name here: nothing that could leave the directory.
    const IDS: SessionIds = SessionIds { underscore: true, ..SessionIds::named("a Claude Code session id") };
    const CLI: &'static str = "claude";
    const RESUME_ARGS: &'static [&'static str] = &["--resume"];

    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        let files = jsonl_files(&root.join("projects"), params.cwd.as_deref().map(dashed_dir_name).as_deref());
        // Sub-agent transcripts (`agent-*.jsonl`) are not sessions of their own.
        let sessions =
            files.iter().filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("agent-")));
        newest_first(sessions.filter_map(|p| describe(p)), params)
    }

    /// Whether a `claude` command line may be driving `sid`: it names it, or names no
    /// session (a new or `--continue`d one in that directory).
    fn drives(argv: &[String], sid: Option<&str>) -> bool {
        let Some(sid) = sid else { return true };
        let named = argv
            .windows(2)
            .find_map(|w| matches!(w[0].as_str(), "--resume" | "-r" | "--session-id").then(|| w[1].clone()));
        let named = named.or_else(|| {
            argv.iter().find_map(|a| {
                a.strip_prefix("--resume=").or_else(|| a.strip_prefix("--session-id=")).map(str::to_owned)
            })
        });
        named.is_none_or(|n| n == sid)
    }

    /// The directory naming is Claude Code's business: when the transcript is not in the
    /// directory made from `cwd`, any project's will do.
    fn session_path(&self, root: &Path, cwd: &str, sid: &str) -> Result<PathBuf, AdapterError> {
        let projects = root.join("projects");
        file_here_or_below(&projects.join(dashed_dir_name(cwd)), &projects, &format!("{sid}.jsonl"))
            .ok_or_else(|| AdapterError::not_found(format!("no Claude Code transcript for session {sid} (cwd {cwd})")))
    }

    fn record_blocks(record: &Value) -> Vec<BlockKind> {
        if record.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            return Vec::new();
        }
        let content = record.pointer("/message/content");
        match str_at(record, "type").unwrap_or_default() {
            "user" if is_prompt(record) => prompt_text(record).map(replayed::user).into_iter().collect(),
            "user" => replayed::tool_results(content),
            "assistant" => {
                replayed::assistant_items(str_at(record, "uuid").unwrap_or("record"), content, ToolCallItem::ANTHROPIC)
            }
            // Written once the turn is over.
            "last-prompt" => vec![replayed::turn_end(EndReason::Completed, replayed::FINISHED_IN_TERMINAL)],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_adapter_sdk::handoff::testing::{self, PLAIN_TURN, TOOL_TURN};
    use terminull_protocol::adapter::MirrorParams;

    const FIXTURE: &str = include_str!("../../../tests/fixtures/handoff/claude-code/session.jsonl");
    const SID: &str = "31097f06-536b-48b5-8764-fd25df0d2d6d";
    const CWD: &str = "/tmp/hrec/ws";

    fn store() -> tempfile::TempDir {
        testing::home_with(&format!("projects/{}", dashed_dir_name(CWD)), &format!("{SID}.jsonl"), FIXTURE)
    }

    #[test]
    fn the_recorded_session_is_listed_and_a_turn_appended_later_arrives_alone() {
        let root = store();
        let all = testing::check_recorded(&ClaudeSessions, root.path(), CWD, SID);
        assert_eq!(testing::types(&all.blocks), [&TOOL_TURN[..], &PLAIN_TURN[..]].concat());
        let path = ClaudeSessions.session_path(root.path(), CWD, SID).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(r#"{"type":"user","uuid":"u9","sessionId":"x","message":{"role":"user","content":"third"}}"#);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        let params = MirrorParams { cursor: Some(all.cursor), ..testing::mirror_params(CWD, SID) };
        let next = ClaudeSessions.read_mirror(root.path(), &params).unwrap();
        assert!(matches!(&next.blocks[..], [b] if matches!(&b.kind, BlockKind::UserMessage(m) if m.text == "third")));
    }

    #[test]
    fn garbage_in_a_transcript_is_skipped() {
        let root = store();
        let garbage = "garbage\n{\"type\":\"assistant\",\"message\":{\"content\":\"not a list\"}}\n[1,2]\n";
        assert!(testing::mirror_of_garbage(&ClaudeSessions, root.path(), CWD, SID, garbage).is_empty());
        assert_eq!(testing::resume_argv(&ClaudeSessions, SID), ["claude", "--resume", SID]);
    }

    /// A claude naming another session does not own this one; one naming none may.
    #[test]
    fn which_claude_command_lines_drive_the_session() {
        let cases: [(&[&str], bool); 3] =
            [(&["claude"], true), (&["claude", "--resume", SID], true), (&["claude", "-r", "other"], false)];
        testing::check_drives::<ClaudeSessions>(Some(SID), &cases);
        testing::check_drives::<ClaudeSessions>(None, &[(&["claude", "-r", "other"], true)]);
    }
}
