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

use serde_json::Value;
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::replayed::{self, ToolCallItem};
use terminull_adapter_sdk::handoff::{
    AgentHome, Described, ProcInfo, SessionFiles, SessionIds, TITLE_CHARS, dashed_dir_name, file_here_or_below,
    find_owner_anywhere, is_probe, jsonl_files, newest_first, str_at, title_of, within_dir,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, ScanExternalSessionsParams,
};
use terminull_protocol::blocks::EndReason;

/// What a scan reads of each file.
const SCAN_READ: usize = 256 * 1024;

/// A user message's text, unless it is tool results or Droid's injected
/// `<system-reminder>`.
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
    Described::from_head(path, SCAN_READ, &DroidSessions::IDS, |found, record| match str_at(record, "type") {
        Some("session_start") if found.id.is_none() => {
            found.header(record);
            found.title = str_at(record, "title").map(|t| title_of(t, TITLE_CHARS));
        }
        Some("message") => {
            let role = record.pointer("/message/role").and_then(Value::as_str);
            let prompt = role == Some("user") && record.get("message").and_then(user_text).is_some();
            if prompt || role == Some("assistant") {
                found.messages += 1;
            }
        }
        _ => {}
    })
}

/// Whether a `droid` command line may drive session `sid` in `cwd`: `-s`, `--resume`,
/// `-r` or `resume <id>` name one (another id is another session); `--cwd <dir>` names
/// the directory when it is not the process's own.
pub fn drives(p: &ProcInfo, cwd: &Path, sid: Option<&str>) -> bool {
    let argv = &p.argv;
    let dir_flag = argv.windows(2).find(|w| w[0] == "--cwd").map(|w| PathBuf::from(&w[1]));
    let in_dir = match &dir_flag {
        Some(dir) => within_dir(dir, cwd),
        None => p.cwd.as_deref().is_some_and(|d| within_dir(d, cwd)),
    };
    let named = argv
        .windows(2)
        .find(|w| {
            matches!(w[0].as_str(), "-s" | "--session-id" | "--resume" | "-r" | "resume") && !w[1].starts_with('-')
        })
        .map(|w| w[1].clone());
    in_dir && sid.is_none_or(|sid| named.is_none_or(|n| n == sid))
}

/// Where Droid keeps its sessions (`~/.factory/sessions`), and how they are read for the
/// handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct DroidSessions;

impl SessionFiles for DroidSessions {
    const HOME: AgentHome = AgentHome { env: None, under_home: ".factory" };
    const IDS: SessionIds = SessionIds::named("a Droid session id");
    const CLI: &'static str = "droid";
    const RESUME_ARGS: &'static [&'static str] = &["--resume"];

    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        let files = jsonl_files(&root.join("sessions"), params.cwd.as_deref().map(dashed_dir_name).as_deref());
        let sessions = files.iter().filter(|p| !p.to_string_lossy().ends_with(".settings.jsonl"));
        newest_first(sessions.filter_map(|p| describe(p)), params)
    }

    /// A `droid` process (not terminull's) drives `cwd`. Its own working directory may
    /// differ when `--cwd` is given, so every droid process is looked at.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        let sid = params.agent_session_id.as_ref().map(ToString::to_string);
        let cwd = Path::new(&params.cwd);
        let pid = find_owner_anywhere(|p| {
            p.program_names().iter().any(|n| n == Self::CLI) && !is_probe(&p.argv) && drives(p, cwd, sid.as_deref())
        });
        IsCwdExternallyOwnedResult { owned: pid.is_some(), pid }
    }

    fn session_path(&self, root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
        let sessions = root.join("sessions");
        file_here_or_below(&sessions.join(dashed_dir_name(cwd)), &sessions, &format!("{id}.jsonl"))
            .ok_or_else(|| AdapterError::not_found(format!("no Droid session file for {id} (cwd {cwd})")))
    }

    fn record_blocks(record: &Value) -> Vec<BlockKind> {
        let message = record.get("message").unwrap_or(&Value::Null);
        let content = message.get("content");
        match (str_at(record, "type"), str_at(message, "role")) {
            (Some("message"), Some("user")) => {
                user_text(message).map(replayed::user).into_iter().chain(replayed::tool_results(content)).collect()
            }
            (Some("message"), Some("assistant")) => {
                replayed::assistant_items(str_at(record, "id").unwrap_or("message"), content, ToolCallItem::ANTHROPIC)
            }
            (Some("agent_turn_outcome"), _) => {
                let reason = match str_at(record, "reason") {
                    Some("completed") => EndReason::Completed,
                    Some("interrupted" | "cancelled" | "aborted") => EndReason::Interrupted,
                    _ => EndReason::Error,
                };
                vec![replayed::turn_end(reason, replayed::FINISHED_IN_TERMINAL)]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_adapter_sdk::handoff::testing::{self, TOOL_TURN};

    const FIXTURE: &str =
        include_str!("../../../tests/fixtures/handoff/droid/a9c67ee4-25db-4e11-90a8-15ef62b6718d.jsonl");
    const ID: &str = "a9c67ee4-25db-4e11-90a8-15ef62b6718d";
    const CWD: &str = "/tmp/hrec3/ws";

    fn root() -> tempfile::TempDir {
        assert_eq!(dashed_dir_name(CWD), "-tmp-hrec3-ws");
        testing::home_with("sessions/-tmp-hrec3-ws", &format!("{ID}.jsonl"), FIXTURE)
    }

    #[test]
    fn the_recorded_session_is_listed_mirrored_and_resumed() {
        let root = root();
        let all = testing::check_recorded(&DroidSessions, root.path(), CWD, ID);
        assert_eq!(testing::types(&all.blocks), TOOL_TURN);
        let BlockKind::UserMessage(m) = &all.blocks[0].kind else { unreachable!() };
        assert_eq!(m.text, testing::FIRST_PROMPT);
        assert_eq!(testing::resume_argv(&DroidSessions, ID), ["droid", "--resume", ID]);
        let garbage = "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":{}}}\n\u{0}\n";
        assert!(testing::mirror_of_garbage(&DroidSessions, root.path(), CWD, ID, garbage).is_empty());
    }

    /// Droid's `--cwd` makes its directory, not the process's own.
    #[test]
    fn a_droid_given_another_directory_or_session_does_not_own_this_one() {
        let p = |argv: &[&str], cwd: &str| testing::process("droid", argv, Some(cwd));
        let here = Path::new("/w/shop");
        assert!(drives(&p(&["droid"], "/w/shop"), here, Some(ID)));
        assert!(drives(&p(&["droid", "exec", "--cwd", "/w/shop", "hi"], "/"), here, Some(ID)));
        assert!(!drives(&p(&["droid", "exec", "--cwd", "/w/other", "hi"], "/w/shop"), here, Some(ID)));
        assert!(!drives(&p(&["droid", "--resume", "another"], "/w/shop"), here, Some(ID)));
    }
}
