//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for Gemini CLI:
//! [`GeminiSessions`].
//!
//! Gemini CLI 0.61 keeps its conversations as JSONL files in
//! `~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<first 8 of the id>.jsonl`,
//! where `~/.gemini/projects.json` maps a directory to its project name (and
//! `~/.gemini/tmp/<project>/.project_root` holds the directory). A file starts with a
//! header `{sessionId, projectHash, startTime, lastUpdated, kind}`, then message records
//! `{id, timestamp, type: "user" | "gemini", content, thoughts, toolCalls, …}` — a record
//! is written again under the same id as it grows — and `{"$set": {…}}` patches, one of
//! which carries the whole history when a session is resumed. `gemini --resume <id>` may
//! append to the newest file of that session or start a new file for the same id, so a
//! session is the set of files whose header names it; its transcript is the newest.
//!
//! These files are untrusted: every read is bounded ([`terminull_adapter_sdk::handoff`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::{
    AgentHome, JsonlCursor, MAX_SCANNED_FILES, SessionFiles, SessionIds, TITLE_CHARS, files_with_suffix,
    mirror_records, mtime_secs, newest_first, read_head, replayed, str_at, strings_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{ExternalSession, MirrorParams, MirrorResult, ScanExternalSessionsParams};
use terminull_protocol::blocks::{ToolCall, ToolStatus};

use crate::store::{chats_dir, project_dirs, prompt_text, read_small};

/// What a scan reads of each file.
const SCAN_READ: usize = 256 * 1024;
fn project_cwd(chats: &Path) -> Option<String> {
    let project = chats.parent()?;
    read_small(&project.join(".project_root")).map(|r| r.trim().to_owned())
}

/// One chat file, as its head tells.
struct Chat {
    path: PathBuf,
    session_id: String,
    title: Option<String>,
    messages: u64,
    complete: bool,
}

fn read_chat(path: &Path) -> Option<Chat> {
    let head = read_head(path, SCAN_READ)?;
    let mut session_id = None;
    let mut title = None;
    let mut seen = std::collections::HashSet::new();
    for (_, record) in &head.records {
        if session_id.is_none() {
            session_id = record.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        }
        let kind = record.get("type").and_then(Value::as_str);
        if matches!(kind, Some("user" | "gemini"))
            && let Some(id) = record.get("id").and_then(Value::as_str)
        {
            seen.insert(id.to_owned());
        }
        if kind == Some("user") && title.is_none() {
            title = prompt_text(record).map(|t| title_of(&t, TITLE_CHARS));
        }
    }
    let session_id = session_id.filter(|s| GeminiSessions::IDS.is_valid(s))?;
    Some(Chat { path: path.to_path_buf(), session_id, title, messages: seen.len() as u64, complete: head.whole })
}

fn chat_files(root: &Path, cwd: Option<&str>) -> Vec<PathBuf> {
    let dirs = match cwd {
        Some(cwd) => chats_dir(root, cwd).into_iter().collect(),
        None => project_dirs(root).into_iter().map(|d| d.join("chats")).collect::<Vec<_>>(),
    };
    dirs.iter().flat_map(|d| files_with_suffix(d, ".jsonl", 0, MAX_SCANNED_FILES)).take(MAX_SCANNED_FILES).collect()
}

/// The cursor: the file it is in, then the JSONL cursor in it.
fn split_cursor(cursor: Option<&str>) -> (Option<&str>, JsonlCursor) {
    match cursor.and_then(|c| c.rsplit_once('|')) {
        Some((file, at)) => (Some(file), JsonlCursor::parse(Some(at))),
        None => (None, JsonlCursor::default()),
    }
}

/// Where Gemini CLI keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiSessions;

impl SessionFiles for GeminiSessions {
    const HOME: AgentHome = AgentHome { env: None, under_home: ".gemini" };
    const IDS: SessionIds = crate::store::IDS;
    const CLI: &'static str = "gemini";
    const RESUME_ARGS: &'static [&'static str] = &["--resume"];

    /// `scan_external_sessions` against `root` (`~/.gemini`): one entry per session id, from
    /// its newest file.
    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession> {
        let mut newest: std::collections::BTreeMap<String, (f64, Chat)> = std::collections::BTreeMap::new();
        for path in chat_files(root, params.cwd.as_deref()) {
            let Some(chat) = read_chat(&path) else { continue };
            let at = mtime_secs(&path);
            match newest.get(&chat.session_id) {
                Some((t, _)) if *t >= at => {}
                _ => {
                    newest.insert(chat.session_id.clone(), (at, chat));
                }
            }
        }
        newest_first(
            newest.into_values().map(|(at, chat)| ExternalSession {
                agent_session_id: chat.session_id.into(),
                cwd: chat.path.parent().and_then(project_cwd),
                title: chat.title,
                updated_at: at,
                message_count: chat.complete.then_some(chat.messages),
            }),
            params,
        )
    }

    /// Whether a `gemini` command line may drive session `sid`: `--resume <uuid>` names
    /// one; `latest`, an index or none may be it.
    fn drives(argv: &[String], sid: Option<&str>) -> bool {
        let Some(sid) = sid else { return true };
        let named = argv.windows(2).find(|w| w[0] == "--resume" || w[0] == "-r").map(|w| w[1].clone());
        named.is_none_or(|n| n == sid || n == "latest" || n.chars().all(|c| c.is_ascii_digit()))
    }

    /// The newest file of session `id` in `cwd`'s chats.
    fn session_path(&self, root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
        // Checked here too: the file name holds its first eight characters.
        Self::IDS.check(id)?;
        let suffix = format!("-{}.jsonl", &id[..8]);
        let dir = chats_dir(root, cwd)
            .ok_or_else(|| AdapterError::not_found(format!("Gemini CLI has no project for {cwd}")))?;
        let mut files: Vec<PathBuf> = files_with_suffix(&dir, &suffix, 0, MAX_SCANNED_FILES)
            .into_iter()
            .filter(|p| read_chat(p).is_some_and(|c| c.session_id == id))
            .collect();
        files.sort_by(|a, b| mtime_secs(a).total_cmp(&mtime_secs(b)).then_with(|| a.cmp(b)));
        files.pop().ok_or_else(|| AdapterError::not_found(format!("no Gemini CLI chat for session {id} (cwd {cwd})")))
    }

    /// `mirror`: the newest chat file of the session after the cursor, as blocks (after
    /// removing what would cost the session at the CLI's next start). When the
    /// terminal started a new file for the session, the new one is read from its start;
    /// the history it repeats (a `$set` patch) is not mirrored again.
    fn read_mirror(&self, root: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        // A terminal's `gemini --resume` leaves an empty recording that would cost the
        // whole conversation at the CLI's next start (crate::repair).
        crate::repair::remove_empty_files(root, &params.cwd, params.agent_session_id.as_str());
        let path = self.session_path(root, &params.cwd, params.agent_session_id.as_str())?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (file, at) = split_cursor(params.cursor.as_deref());
        let at = if file == Some(name.as_str()) { at } else { JsonlCursor::default() };
        let (blocks, next) = mirror_records(&path, at, Self::record_blocks)?;
        Ok(MirrorResult { blocks, cursor: format!("{name}|{}", next.encode()) })
    }

    /// The blocks of one chat record; nothing for headers and `$set` patches.
    fn record_blocks(record: &Value) -> Vec<BlockKind> {
        let Some(id) = str_at(record, "id") else { return Vec::new() };
        let mut out = Vec::new();
        match str_at(record, "type") {
            Some("user") => {
                if let Some(text) = prompt_text(record) {
                    out.push(replayed::user(text));
                }
            }
            Some("gemini") => {
                let thoughts = strings_at(record.get("thoughts"), "description");
                if !thoughts.is_empty() {
                    out.push(replayed::thinking(format!("{id}-thoughts"), thoughts.join(" ")));
                }
                let text = match record.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    items => strings_at(items, "text").join("\n"),
                };
                if !text.is_empty() {
                    out.push(replayed::text(id, text));
                }
                for call in record.get("toolCalls").and_then(Value::as_array).into_iter().flatten() {
                    let Some(call_id) = str_at(call, "id") else { continue };
                    let status = str_at(call, "status");
                    let settled = matches!(status, Some("success" | "error" | "cancelled"));
                    out.push(BlockKind::ToolCall(ToolCall {
                        id: call_id.to_owned().into(),
                        name: str_at(call, "name").unwrap_or("tool").to_owned(),
                        input: call.get("args").cloned().unwrap_or(json!({})),
                        status: match status {
                            Some("success") => ToolStatus::Done,
                            Some("error" | "cancelled") => ToolStatus::Error,
                            _ => ToolStatus::Running,
                        },
                        parent_id: None,
                        title: str_at(call, "description").map(str::to_owned),
                    }));
                    if settled {
                        out.push(replayed::tool_result(
                            call_id,
                            str_at(call, "resultDisplay").unwrap_or_default().to_owned(),
                            status != Some("success"),
                        ));
                    }
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
    use terminull_adapter_sdk::handoff::testing;
    use terminull_protocol::blocks::ToolResult;

    const FILE: &str = "session-2026-11-30T06-47-c20bfe98.jsonl";
    const FIXTURE: &str =
        include_str!("../../../tests/fixtures/handoff/gemini/session-2026-11-30T06-47-c20bfe98.jsonl");
    const ID: &str = "c20bfe98-f580-4bae-8287-256ac4713ae8";
    const CWD: &str = "/tmp/hrec2/ws";

    fn root() -> tempfile::TempDir {
        let root = testing::home_with("tmp/ws/chats", FILE, FIXTURE);
        std::fs::write(root.path().join("tmp/ws/.project_root"), CWD).unwrap();
        std::fs::write(root.path().join("projects.json"), format!(r#"{{"projects":{{"{CWD}":"ws"}}}}"#)).unwrap();
        root
    }

    #[test]
    fn the_recorded_chat_is_listed_and_a_new_file_of_the_same_session_is_followed() {
        let root = root();
        let all = testing::check_recorded(&GeminiSessions, root.path(), CWD, ID);
        let prompts: Vec<&str> = all
            .blocks
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::UserMessage(m) => Some(m.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(prompts, [testing::FIRST_PROMPT, "mock:plain second"]);
        let results: Vec<&ToolResult> = all
            .blocks
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::ToolResult(r) => Some(r),
                _ => None,
            })
            .collect();
        assert!(results.iter().any(|r| r.output == "hello"), "{results:?}");
        assert!(all.blocks.iter().any(|b| matches!(&b.kind, BlockKind::Text(t) if t.text.starts_with("Hello from"))));
        // `gemini --resume <id>` started a new file for the session: it repeats the
        // history in a `$set`, which is not mirrored again; the new turn is.
        let header = FIXTURE.lines().next().unwrap();
        let new_file = format!(
            "{header}\n{}\n{}\n",
            r#"{"$set":{"messages":[{"id":"old","type":"user","content":[{"text":"mock:tool please"}]}]}}"#,
            r#"{"id":"n1","type":"user","content":[{"text":"third"}]}"#
        );
        let later = root.path().join("tmp/ws/chats/session-2026-11-30T06-52-c20bfe98.jsonl");
        std::fs::write(&later, new_file).unwrap();
        let future = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(&later).unwrap().set_modified(future).unwrap();
        let next = GeminiSessions
            .read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor), ..testing::mirror_params(CWD, ID) })
            .unwrap();
        assert!(
            matches!(&next.blocks[..], [b] if matches!(&b.kind, BlockKind::UserMessage(m) if m.text == "third")),
            "{:?}",
            next.blocks
        );
    }

    #[test]
    fn hostile_chats_give_errors_not_panics() {
        let root = root();
        let nowhere = root.path().join("nowhere");
        assert!(GeminiSessions.read_mirror(&nowhere, &testing::mirror_params(CWD, ID)).is_err());
        let header = FIXTURE.lines().next().unwrap();
        let garbage = format!(
            "{header}\n{{\"id\":1,\"type\":\"gemini\"}}\n{{\"id\":\"x\",\"type\":\"gemini\",\"toolCalls\":7}}\n[\n"
        );
        assert!(testing::mirror_of_garbage(&GeminiSessions, root.path(), CWD, ID, &garbage).is_empty());
    }

    /// `gemini --resume` also takes `latest` or an index, which may be any session.
    #[test]
    fn the_resume_command_and_session_arguments() {
        assert_eq!(testing::resume_argv(&GeminiSessions, ID), ["gemini", "--resume", ID]);
        let cases: [(&[&str], bool); 3] = [
            (&["gemini"], true),
            (&["gemini", "-r", "latest"], true),
            (&["gemini", "--resume", "0000-other-id"], false),
        ];
        testing::check_drives::<GeminiSessions>(Some(ID), &cases);
    }
}
