//! Where Gemini CLI 0.61 keeps its chats (`~/.gemini/tmp/<project>/chats`, the project
//! named in `projects.json` or by a `.project_root` file), what its session ids look like
//! and which records a user typed: what the handoff hooks and the repairs share.

use std::path::{Path, PathBuf};

use serde_json::Value;
use terminull_adapter_sdk::handoff::{MAX_SCANNED_FILES, SessionIds};

/// Gemini CLI's session ids (UUIDs; the file name holds their first eight characters).
pub(crate) const IDS: SessionIds = SessionIds { min: 8, ..SessionIds::named("a Gemini CLI session id") };

/// The most bytes of `projects.json` and `.project_root` read.
const MAX_SMALL_FILE: u64 = 1024 * 1024;

pub(crate) fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(MAX_SMALL_FILE).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The chats directory of `cwd`: from `projects.json`, else a project whose
/// `.project_root` is `cwd`.
pub(crate) fn chats_dir(root: &Path, cwd: &str) -> Option<PathBuf> {
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

/// The project directories under `root/tmp`.
pub(crate) fn project_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join("tmp")) else { return Vec::new() };
    entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).take(MAX_SCANNED_FILES).collect()
}

/// The text of a user record typed by the user (not the context Gemini CLI injects,
/// not a tool's answer).
pub(crate) fn prompt_text(record: &Value) -> Option<String> {
    let items = record.get("content")?.as_array()?;
    if items.iter().any(|i| i.get("functionResponse").is_some()) {
        return None;
    }
    let text: Vec<&str> = items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect();
    let text = text.join("\n");
    (!text.is_empty() && !text.trim_start().starts_with("<session_context>")).then_some(text)
}
