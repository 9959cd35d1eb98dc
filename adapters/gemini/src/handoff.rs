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
    JsonlCursor, JsonlLimits, MAX_SCANNED_FILES, SessionFiles, TITLE_CHARS, agent_home, files_with_suffix, mirrored,
    mtime_secs, newest_first, owned_by_cli, read_jsonl, replayed, str_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, MirrorParams, MirrorResult,
    ScanExternalSessionsParams, TerminalResumeCommandParams, TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, ToolCall, ToolStatus};

/// What a scan reads of each file.
const SCAN_READ: usize = 256 * 1024;
/// The most bytes of `projects.json` and `.project_root` read.
const MAX_SMALL_FILE: u64 = 1024 * 1024;

/// `~/.gemini`.
pub fn gemini_dir() -> Option<PathBuf> {
    agent_home(None, ".gemini")
}

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(MAX_SMALL_FILE).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The chats directory of `cwd`: from `projects.json`, else a project whose
/// `.project_root` is `cwd`.
fn chats_dir(root: &Path, cwd: &str) -> Option<PathBuf> {
    let projects: Option<Value> = read_small(&root.join("projects.json")).and_then(|t| serde_json::from_str(&t).ok());
    if let Some(name) = projects.as_ref().and_then(|p| p.pointer("/projects")?.get(cwd)?.as_str())
        && !name.contains('/')
        && !name.starts_with('.')
    {
        return Some(root.join("tmp").join(name).join("chats"));
    }
    project_dirs(root)
        .into_iter()
        .find(|dir| read_small(&dir.join(".project_root")).is_some_and(|r| r.trim() == cwd))
        .map(|dir| dir.join("chats"))
}

fn project_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join("tmp")) else { return Vec::new() };
    entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).take(MAX_SCANNED_FILES).collect()
}

fn project_cwd(chats: &Path) -> Option<String> {
    let project = chats.parent()?;
    read_small(&project.join(".project_root")).map(|r| r.trim().to_owned())
}

fn check_id(id: &str) -> Result<(), AdapterError> {
    let ok = id.len() >= 8 && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok { Ok(()) } else { Err(AdapterError::invalid(format!("`{id}` is not a Gemini CLI session id"))) }
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
    let chunk =
        read_jsonl(path, JsonlCursor::default(), JsonlLimits { max_line: SCAN_READ, max_read: SCAN_READ }).ok()?;
    let mut session_id = None;
    let mut title = None;
    let mut seen = std::collections::HashSet::new();
    for (_, record) in &chunk.records {
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
    let session_id = session_id.filter(|s| check_id(s).is_ok())?;
    Some(Chat {
        path: path.to_path_buf(),
        session_id,
        title,
        messages: seen.len() as u64,
        complete: (chunk.cursor.offset as usize) < SCAN_READ,
    })
}

fn chat_files(root: &Path, cwd: Option<&str>) -> Vec<PathBuf> {
    let dirs = match cwd {
        Some(cwd) => chats_dir(root, cwd).into_iter().collect(),
        None => project_dirs(root).into_iter().map(|d| d.join("chats")).collect::<Vec<_>>(),
    };
    dirs.iter().flat_map(|d| files_with_suffix(d, ".jsonl", 0, MAX_SCANNED_FILES)).take(MAX_SCANNED_FILES).collect()
}

/// The newest file of session `id` in `cwd`'s chats.
pub fn transcript_path(root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError> {
    check_id(id)?;
    let suffix = format!("-{}.jsonl", &id[..8]);
    let dir =
        chats_dir(root, cwd).ok_or_else(|| AdapterError::not_found(format!("Gemini CLI has no project for {cwd}")))?;
    let mut files: Vec<PathBuf> = files_with_suffix(&dir, &suffix, 0, MAX_SCANNED_FILES)
        .into_iter()
        .filter(|p| read_chat(p).is_some_and(|c| c.session_id == id))
        .collect();
    files.sort_by(|a, b| mtime_secs(a).total_cmp(&mtime_secs(b)).then_with(|| a.cmp(b)));
    files.pop().ok_or_else(|| AdapterError::not_found(format!("no Gemini CLI chat for session {id} (cwd {cwd})")))
}

/// Whether a `gemini` command line may drive session `sid`: `--resume <uuid>` names
/// one; `latest`, an index or none may be it.
pub fn names_session(argv: &[String], sid: Option<&str>) -> bool {
    let Some(sid) = sid else { return true };
    let named = argv.windows(2).find(|w| w[0] == "--resume" || w[0] == "-r").map(|w| w[1].clone());
    named.is_none_or(|n| n == sid || n == "latest" || n.chars().all(|c| c.is_ascii_digit()))
}

/// The cursor: the file it is in, then the JSONL cursor in it.
fn split_cursor(cursor: Option<&str>) -> (Option<&str>, JsonlCursor) {
    match cursor.and_then(|c| c.rsplit_once('|')) {
        Some((file, at)) => (Some(file), JsonlCursor::parse(Some(at))),
        None => (None, JsonlCursor::default()),
    }
}

/// The text of a user record typed by the user (not the context Gemini CLI injects,
/// not a tool's answer).
fn prompt_text(record: &Value) -> Option<String> {
    let items = record.get("content")?.as_array()?;
    if items.iter().any(|i| i.get("functionResponse").is_some()) {
        return None;
    }
    let text: Vec<&str> = items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect();
    let text = text.join("\n");
    (!text.is_empty() && !text.trim_start().starts_with("<session_context>")).then_some(text)
}

/// Where Gemini CLI keeps its sessions, and how they are read for the handoff hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiSessions;

impl SessionFiles for GeminiSessions {
    fn root(&self) -> Result<PathBuf, AdapterError> {
        gemini_dir().ok_or_else(|| AdapterError::agent("HOME is not set"))
    }

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

    /// A `gemini` process (not terminull's) drives `cwd`.
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        owned_by_cli(&["gemini"], params, names_session)
    }

    /// `mirror`: the newest chat file of the session after the cursor, as blocks. When the
    /// terminal started a new file for the session, the new one is read from its start;
    /// the history it repeats (a `$set` patch) is not mirrored again.
    fn read_mirror(&self, root: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        let path = transcript_path(root, &params.cwd, params.agent_session_id.as_str())?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (file, at) = split_cursor(params.cursor.as_deref());
        let at = if file == Some(name.as_str()) { at } else { JsonlCursor::default() };
        let chunk = read_jsonl(&path, at, JsonlLimits::default()).map_err(AdapterError::agent)?;
        let blocks = chunk.records.iter().flat_map(|(_, r)| record_blocks(r)).collect();
        Ok(MirrorResult { blocks, cursor: format!("{name}|{}", chunk.cursor.encode()) })
    }

    /// `terminal_resume_command`: `gemini --resume <id>`.
    fn resume_command(
        &self,
        params: &TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        check_id(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec!["gemini".into(), "--resume".into(), params.agent_session_id.to_string()],
            cwd: params.cwd.clone(),
        })
    }
}

/// The blocks of one chat record; nothing for headers and `$set` patches.
pub fn record_blocks(record: &Value) -> Vec<Block> {
    let Some(id) = str_at(record, "id") else { return Vec::new() };
    let mut out = Vec::new();
    match str_at(record, "type") {
        Some("user") => {
            if let Some(text) = prompt_text(record) {
                out.push(replayed::user(text));
            }
        }
        Some("gemini") => {
            let thoughts: Vec<&str> = record
                .get("thoughts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|t| str_at(t, "description"))
                .collect();
            if !thoughts.is_empty() {
                out.push(replayed::thinking(format!("{id}-thoughts"), thoughts.join(" ")));
            }
            let text = match record.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(items)) => {
                    items.iter().filter_map(|i| str_at(i, "text")).collect::<Vec<_>>().join("\n")
                }
                _ => String::new(),
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
    out.into_iter().map(mirrored).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::adapter::LatestSidForCwdParams;
    use terminull_protocol::blocks::ToolResult;

    const FILE: &str = "session-2026-11-30T06-47-c20bfe98.jsonl";
    const FIXTURE: &str =
        include_str!("../../../tests/fixtures/handoff/gemini/session-2026-11-30T06-47-c20bfe98.jsonl");
    const ID: &str = "c20bfe98-f580-4bae-8287-256ac4713ae8";
    const CWD: &str = "/tmp/hrec2/ws";

    fn root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let chats = root.path().join("tmp/ws/chats");
        std::fs::create_dir_all(&chats).unwrap();
        std::fs::write(chats.join(FILE), FIXTURE).unwrap();
        std::fs::write(root.path().join("tmp/ws/.project_root"), CWD).unwrap();
        std::fs::write(root.path().join("projects.json"), format!(r#"{{"projects":{{"{CWD}":"ws"}}}}"#)).unwrap();
        root
    }

    #[test]
    fn a_recorded_chat_is_found_by_scan_with_its_cwd_and_first_prompt() {
        let root = root();
        let all = GeminiSessions.scan(root.path(), &ScanExternalSessionsParams { cwd: None, limit: None });
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].agent_session_id.as_str(), ID);
        assert_eq!(all[0].cwd.as_deref(), Some(CWD));
        assert_eq!(all[0].title.as_deref(), Some("mock:tool please"));
        let head = GeminiSessions.latest(root.path(), &LatestSidForCwdParams { cwd: CWD.into() });
        assert_eq!(head.agent_session_id.as_ref().map(|s| s.as_str()), Some(ID));
    }

    #[test]
    fn the_mirror_maps_both_recorded_turns_and_follows_a_new_file_of_the_same_session() {
        let root = root();
        let params = MirrorParams { cwd: CWD.into(), agent_session_id: ID.into(), cursor: None };
        let all = GeminiSessions.read_mirror(root.path(), &params).unwrap();
        let prompts: Vec<&str> = all
            .blocks
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::UserMessage(m) => Some(m.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(prompts, ["mock:tool please", "mock:plain second"]);
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
        assert!(
            GeminiSessions
                .read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor.clone()), ..params.clone() })
                .unwrap()
                .blocks
                .is_empty()
        );
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
        let next =
            GeminiSessions.read_mirror(root.path(), &MirrorParams { cursor: Some(all.cursor), ..params }).unwrap();
        assert!(
            matches!(&next.blocks[..], [b] if matches!(&b.kind, BlockKind::UserMessage(m) if m.text == "third")),
            "{:?}",
            next.blocks
        );
    }

    #[test]
    fn hostile_chats_give_errors_not_panics() {
        let root = root();
        let params = |id: &str| MirrorParams { cwd: CWD.into(), agent_session_id: id.into(), cursor: None };
        assert!(GeminiSessions.read_mirror(root.path(), &params("../../../etc")).is_err());
        assert!(
            GeminiSessions.read_mirror(root.path(), &params("deadbeef-0000")).unwrap_err().message.contains("deadbeef")
        );
        assert!(GeminiSessions.read_mirror(&root.path().join("nowhere"), &params(ID)).is_err());
        let path = root.path().join("tmp/ws/chats").join(FILE);
        let header = FIXTURE.lines().next().unwrap();
        std::fs::write(
            &path,
            format!(
                "{header}\n{{\"id\":1,\"type\":\"gemini\"}}\n{{\"id\":\"x\",\"type\":\"gemini\",\"toolCalls\":7}}\n[\n"
            ),
        )
        .unwrap();
        assert!(GeminiSessions.read_mirror(root.path(), &params(ID)).unwrap().blocks.is_empty());
    }

    #[test]
    fn the_resume_command_and_session_arguments() {
        let params = TerminalResumeCommandParams { agent_session_id: ID.into(), cwd: None };
        assert_eq!(GeminiSessions.resume_command(&params).unwrap().argv, ["gemini", "--resume", ID]);
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(names_session(&argv(&["gemini"]), Some(ID)));
        assert!(names_session(&argv(&["gemini", "-r", "latest"]), Some(ID)));
        assert!(!names_session(&argv(&["gemini", "--resume", "0000-other-id"]), Some(ID)));
    }
}
