//! Keeping Gemini CLI 0.61 from losing a session.
//!
//! Whenever Gemini CLI opens a session that already exists — `gemini --resume <id>` in a
//! terminal, `session/load` over ACP — it first starts a fresh chat recording for it, in
//! `chats/session-<UTC minute>-<first 8 of the id>.jsonl`, writing a header and a `$set`
//! of the new context, and then goes on in the session's own file. Two things follow
//! (reproduced by hand against the pinned CLI; docs/session-handoff.md):
//!
//! - over ACP the lookup comes after the fresh recording: when the session's own file is
//!   named for the current minute (a terminal turn less than a minute ago, the usual
//!   case in a handoff), that file *is* the fresh recording, the `$set` replaces the
//!   history and the load fails with "No previous sessions found for this project";
//! - otherwise the fresh file is left holding only the context, and at its next start
//!   any `gemini` process deletes every file of a session one of whose files holds no
//!   conversation: the whole conversation goes.
//!
//! So before a load the session's files written in the last two minutes are renamed out
//! of the CLI's minute-stamped naming (seconds added: the CLI finds a session by the
//! `-<first 8>.jsonl` suffix and the id inside, never by the stamp), and after a load and
//! at each mirror (a terminal's resume) a file of the session that holds no conversation
//! is removed when another file of the session holds it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use terminull_adapter_sdk::handoff::{MAX_SCANNED_FILES, files_with_suffix, mtime_secs, read_head};

use crate::store::{IDS, chats_dir, prompt_text};

/// How recent a file's last write must be for its name to risk the clash: a file named
/// for the current minute was written within the last minute (one more for a slow start).
const RECENT_SECS: f64 = 120.0;
/// What is read of a file to tell whether it holds a conversation.
const READ: usize = 256 * 1024;

/// The session's chat files in `cwd`'s project (by the id inside, not the name alone).
fn session_files(root: &Path, cwd: &str, id: &str) -> Vec<PathBuf> {
    if IDS.check(id).is_err() {
        return Vec::new();
    }
    let Some(dir) = chats_dir(root, cwd) else { return Vec::new() };
    files_with_suffix(&dir, &format!("-{}.jsonl", &id[..8]), 0, MAX_SCANNED_FILES)
        .into_iter()
        .filter(|p| {
            read_head(p, READ).is_some_and(|h| {
                h.records.first().and_then(|(_, r)| r.get("sessionId")).and_then(Value::as_str) == Some(id)
            })
        })
        .collect()
}

/// `session-2026-12-02T14-16-6dddb7e1.jsonl` → `session-2026-12-02T14-16-SS-6dddb7e1.jsonl`
/// for the first free `SS`; `None` for a name not in the CLI's minute format.
fn out_of_minute_naming(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_prefix("session-")?.strip_suffix(".jsonl")?;
    // `YYYY-MM-DDTHH-MM` then `-` and the 8 characters.
    let (stamp, short) = stem.rsplit_once('-')?;
    if stamp.len() != 16 || short.len() != 8 {
        return None;
    }
    (0..60)
        .map(|second| path.with_file_name(format!("session-{stamp}-{second:02}-{short}.jsonl")))
        .find(|candidate| !candidate.exists())
}

/// Before `session/load` of `id`: renames its recently written files out of the
/// minute-stamped naming.
pub(crate) fn before_load(root: &Path, cwd: &str, id: &str, now_secs: f64) {
    for path in session_files(root, cwd, id) {
        if now_secs - mtime_secs(&path) > RECENT_SECS {
            continue;
        }
        let Some(renamed) = out_of_minute_naming(&path) else { continue };
        match std::fs::rename(&path, &renamed) {
            Ok(()) => tracing::debug!("renamed {} to {} before session/load", path.display(), renamed.display()),
            Err(e) => tracing::warn!("could not rename {} before session/load: {e}", path.display()),
        }
    }
}

/// True when the whole file was read and it holds no message a user typed and no answer
/// (only the header, the context Gemini CLI injects and `$set` patches).
fn holds_no_conversation(path: &Path) -> bool {
    let Some(head) = read_head(path, READ) else { return false };
    if !head.whole {
        return false;
    }
    let is_conversation = |record: &Value| match record.get("type").and_then(Value::as_str) {
        Some("gemini") => true,
        Some("user") => prompt_text(record).is_some(),
        _ => false,
    };
    !head.records.iter().any(|(_, record)| {
        is_conversation(record)
            || record
                .pointer("/$set/messages")
                .and_then(Value::as_array)
                .is_some_and(|messages| messages.iter().any(is_conversation))
    })
}

/// Removes the files of session `id` that hold no conversation, when another of its
/// files does (what opening the session left behind; see the module documentation).
pub(crate) fn remove_empty_files(root: &Path, cwd: &str, id: &str) {
    let (empty, full): (Vec<PathBuf>, Vec<PathBuf>) =
        session_files(root, cwd, id).into_iter().partition(|p| holds_no_conversation(p));
    if full.is_empty() {
        return;
    }
    for path in empty {
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!("removed {}, an empty recording Gemini CLI left", path.display()),
            Err(e) => tracing::warn!("could not remove {}, an empty recording Gemini CLI left: {e}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6dddb7e1-538c-4207-a36c-d8ee17884471";
    const CWD: &str = "/tmp/proj/ws";
    const HEADER: &str = r#"{"sessionId":"6dddb7e1-538c-4207-a36c-d8ee17884471","projectHash":"x","startTime":"2026-12-02T14:17:19.243Z","lastUpdated":"2026-12-02T14:17:19.243Z","kind":"main"}"#;
    const CONTEXT: &str = r#"{"$set":{"messages":[{"id":"c","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI."}]}]}}"#;

    fn project() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let chats = root.path().join("tmp/ws/chats");
        std::fs::create_dir_all(&chats).unwrap();
        std::fs::write(root.path().join("projects.json"), format!(r#"{{"projects":{{"{CWD}":"ws"}}}}"#)).unwrap();
        (root, chats)
    }

    fn conversation() -> String {
        format!(
            "{HEADER}\n{CONTEXT}\n{}\n{}\n",
            r#"{"id":"u1","type":"user","content":[{"text":"mock:plain first"}]}"#,
            r#"{"id":"g1","type":"gemini","content":"Hello"}"#
        )
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    fn now() -> f64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
    }

    #[test]
    fn a_recently_written_session_file_leaves_the_minute_stamped_naming_before_the_load() {
        let (root, chats) = project();
        std::fs::write(chats.join("session-2026-12-02T14-17-6dddb7e1.jsonl"), conversation()).unwrap();
        // Taken: the next free second is used.
        std::fs::write(chats.join("session-2026-12-02T14-17-00-6dddb7e1.jsonl"), "not json\n").unwrap();
        // Another session's file with the same first eight characters is not touched.
        let other = HEADER.replace("a36c", "ffff");
        std::fs::write(chats.join("session-2026-12-02T14-16-6dddb7e1.jsonl"), format!("{other}\n")).unwrap();
        before_load(root.path(), CWD, ID, now());
        assert_eq!(
            names(&chats),
            [
                "session-2026-12-02T14-16-6dddb7e1.jsonl",
                "session-2026-12-02T14-17-00-6dddb7e1.jsonl",
                "session-2026-12-02T14-17-01-6dddb7e1.jsonl"
            ]
        );
    }

    #[test]
    fn an_old_session_file_keeps_its_name() {
        let (root, chats) = project();
        std::fs::write(chats.join("session-2026-12-02T14-17-6dddb7e1.jsonl"), conversation()).unwrap();
        before_load(root.path(), CWD, ID, now() + 3600.0);
        assert_eq!(names(&chats), ["session-2026-12-02T14-17-6dddb7e1.jsonl"]);
    }

    #[test]
    fn an_empty_recording_is_removed_only_beside_a_file_holding_the_conversation() {
        let (root, chats) = project();
        // A brand-new session's first file holds only the context for a while: it stays.
        let fresh = chats.join("session-2026-12-02T14-18-6dddb7e1.jsonl");
        std::fs::write(&fresh, format!("{HEADER}\n{CONTEXT}\n")).unwrap();
        remove_empty_files(root.path(), CWD, ID);
        assert_eq!(names(&chats), ["session-2026-12-02T14-18-6dddb7e1.jsonl"]);
        // Beside the conversation (what a load or a resume leaves: the header and the context, twice).
        std::fs::write(&fresh, format!("{HEADER}\n{CONTEXT}\n{HEADER}\n{CONTEXT}\n")).unwrap();
        std::fs::write(chats.join("session-2026-12-02T14-17-01-6dddb7e1.jsonl"), conversation()).unwrap();
        std::fs::write(chats.join("session-2026-12-02T14-19-6dddb7e1.jsonl"), conversation()).unwrap();
        remove_empty_files(root.path(), CWD, ID);
        assert_eq!(
            names(&chats),
            ["session-2026-12-02T14-17-01-6dddb7e1.jsonl", "session-2026-12-02T14-19-6dddb7e1.jsonl"]
        );
    }

    #[test]
    fn hostile_ids_and_names_touch_nothing() {
        let (root, chats) = project();
        std::fs::write(chats.join("session-2026-12-02T14-17-6dddb7e1.jsonl"), conversation()).unwrap();
        before_load(root.path(), CWD, "../../etc", now());
        remove_empty_files(root.path(), CWD, "../../etc");
        assert_eq!(out_of_minute_naming(Path::new("/x/session-odd-6dddb7e1.jsonl")), None);
        assert_eq!(out_of_minute_naming(Path::new("/x/notes.txt")), None);
        assert_eq!(names(&chats), ["session-2026-12-02T14-17-6dddb7e1.jsonl"]);
    }
}
