//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for Hermes
//! Agent: [`HermesSessions`].
//!
//! Hermes 0.19 keeps every conversation in one SQLite database, `$HERMES_HOME/state.db`
//! (default `~/.hermes/state.db`): a `sessions` row per conversation (`id` such as
//! `20261202_204828_425440`, `source` `cli` / `acp` / a messaging platform, `cwd`,
//! `title`, `started_at`, `parent_session_id` for a compressed continuation, `archived`)
//! and a `messages` row per message (an increasing integer `id`, `role` `user` /
//! `assistant` / `tool`, `content` — text, or a JSON list of parts —, `reasoning`,
//! OpenAI-shaped `tool_calls` JSON, `tool_call_id`, `finish_reason`, `timestamp`). The
//! hooks read it directly, read-only ([`sqlite::read_rows`]); the mirror's cursor is
//! the last message id read.
//!
//! The terminal's command is `hermes --resume <id>` (its TUI). Hermes' ACP server loads
//! such a session with `session/load`, so terminull continues it with the same id.
//!
//! The database is untrusted input: ids are checked before they go into a query, a
//! directory is quoted as an SQL string, every read is bounded.

use std::path::PathBuf;

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::handoff::{
    Handoff, SessionIds, TITLE_CHARS, is_probe, mirrored, owned_by_cli, replayed, sqlite, str_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, LatestSidForCwdParams,
    LatestSidForCwdResult, MirrorParams, MirrorResult, ScanExternalSessionsParams, TerminalResumeCommandParams,
    TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, EndReason};

/// The most bytes of text one query reads.
const QUERY_BYTES: usize = 16 * 1024 * 1024;
/// The most messages one mirror call reads (the rest comes with the next).
const MIRROR_ROWS: usize = 2000;
/// Sessions listed at most.
const MAX_SESSIONS: u32 = 2000;

/// Hermes' session ids: 1–64 letters, digits, `_` and `-`.
pub const IDS: SessionIds = SessionIds { max: 64, underscore: true, ..SessionIds::named("a Hermes session id") };

/// The CLI's subcommands that drive no conversation in a directory.
const NOT_A_SESSION: &[&str] = &[
    "acp",
    "model",
    "moa",
    "fallback",
    "secrets",
    "migrate",
    "gateway",
    "proxy",
    "lsp",
    "setup",
    "postinstall",
    "whatsapp",
    "whatsapp-cloud",
    "slack",
    "send",
    "login",
    "logout",
    "auth",
    "status",
    "cron",
    "webhook",
    "portal",
    "kanban",
    "project",
    "hooks",
    "doctor",
    "security",
    "dump",
    "debug",
    "backup",
    "checkpoints",
    "import",
    "config",
    "console",
    "pairing",
    "skills",
    "bundles",
    "plugins",
    "curator",
    "pets",
    "journey",
    "learning",
    "memory-graph",
    "memory",
    "tools",
    "computer-use",
    "mcp",
    "sessions",
    "insights",
    "claw",
    "version",
    "update",
    "uninstall",
    "profile",
    "completion",
    "dashboard",
    "serve",
    "desktop",
    "gui",
    "logs",
    "prompt-size",
];

/// Where Hermes keeps its database, from `var` (the process environment in use).
pub fn database_path(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let nonempty = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let home = match nonempty("HERMES_HOME") {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(nonempty("HOME")?).join(".hermes"),
    };
    Some(home.join("state.db"))
}

/// `text` as an SQL string literal.
fn sql_string(text: &str) -> Result<String, AdapterError> {
    if text.contains('\0') {
        return Err(AdapterError::invalid("a directory with a NUL byte"));
    }
    Ok(format!("'{}'", text.replace('\'', "''")))
}

/// The directory of a session row: the `cwd` column, or for an ACP session the `cwd`
/// of its `model_config` JSON.
const SESSION_CWD: &str = "COALESCE(s.cwd, CASE WHEN json_valid(s.model_config) \
     THEN json_extract(s.model_config, '$.cwd') END)";

/// The session query of a scan: the top-level conversations Hermes' ACP server started
/// (the only ones it loads again: docs/session-handoff.md), newest message first.
pub fn sessions_sql(params: &ScanExternalSessionsParams) -> Result<String, AdapterError> {
    let mut sql = format!(
        "SELECT s.id AS id, s.title AS title, {SESSION_CWD} AS cwd, s.message_count AS message_count, \
         COALESCE((SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id), s.started_at) AS updated, \
         (SELECT m.content FROM messages m WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1) \
         AS first_prompt FROM sessions s WHERE s.parent_session_id IS NULL AND s.archived = 0 \
         AND s.source = 'acp' AND {SESSION_CWD} IS NOT NULL"
    );
    if let Some(cwd) = &params.cwd {
        sql.push_str(&format!(" AND {SESSION_CWD} = {}", sql_string(cwd)?));
    }
    let limit = params.limit.unwrap_or(MAX_SESSIONS).min(MAX_SESSIONS);
    sql.push_str(&format!(" ORDER BY updated DESC LIMIT {limit}"));
    Ok(sql)
}

/// The listings of session rows; malformed rows are skipped.
pub fn sessions_from_rows(rows: &[Value]) -> Vec<ExternalSession> {
    rows.iter()
        .filter_map(|row| {
            let id = str_at(row, "id")?;
            IDS.is_valid(id).then_some(())?;
            let title = str_at(row, "title")
                .filter(|t| !t.trim().is_empty())
                .map(str::to_owned)
                .or_else(|| row.get("first_prompt").map(message_text).filter(|t| !t.trim().is_empty()));
            Some(ExternalSession {
                agent_session_id: id.to_owned().into(),
                cwd: str_at(row, "cwd").map(str::to_owned),
                title: title.map(|t| title_of(&t, TITLE_CHARS)),
                updated_at: row.get("updated").and_then(Value::as_f64).unwrap_or(0.0),
                message_count: row.get("message_count").and_then(Value::as_u64),
            })
        })
        .collect()
}

/// A message's `content`: text, or a JSON list of parts whose `text`s are joined.
fn message_text(content: &Value) -> String {
    let Some(text) = content.as_str() else { return String::new() };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => text.to_owned(),
    }
}

/// Whether a command line of the CLI (`hermes …`, or `python …/hermes …`) may drive
/// session `sid`: not a subcommand that drives none, and `--resume`/`-r` naming it or
/// no session.
pub fn drives(argv: &[String], sid: Option<&str>) -> bool {
    let script = argv.iter().position(|a| std::path::Path::new(a).file_name().is_some_and(|f| f == "hermes"));
    let args = &argv[script.map_or(1, |i| i + 1).min(argv.len())..];
    if is_probe(argv) || args.first().is_some_and(|a| NOT_A_SESSION.contains(&a.as_str())) {
        return false;
    }
    let Some(sid) = sid else { return true };
    let named = args.windows(2).find(|w| w[0] == "-r" || w[0] == "--resume").map(|w| w[1].clone());
    named.is_none_or(|n| n == sid)
}

/// The message query of a mirror: the session's messages after message `after`.
pub fn messages_sql(sid: &str, after: i64) -> Result<String, AdapterError> {
    IDS.check(sid)?;
    Ok(format!(
        "SELECT id, role, content, reasoning, tool_calls, tool_call_id, finish_reason FROM messages \
         WHERE session_id = '{sid}' AND id > {after} AND active = 1 ORDER BY id LIMIT {MIRROR_ROWS}"
    ))
}

/// One OpenAI-shaped tool call (`{id, function: {name, arguments}}`) as a block.
fn tool_call(call: &Value) -> Option<BlockKind> {
    let id = str_at(call, "id")?;
    let function = call.get("function").unwrap_or(call);
    let input = match function.get("arguments") {
        Some(Value::String(text)) => serde_json::from_str(text).unwrap_or_else(|_| json!({ "arguments": text })),
        Some(other) => other.clone(),
        None => json!({}),
    };
    Some(replayed::tool_call(id, str_at(function, "name").unwrap_or("tool"), input))
}

/// The blocks of message rows, and the id of the last one read (`after` when none).
pub fn rows_blocks(rows: &[Value], after: i64) -> (Vec<Block>, i64) {
    let mut last = after;
    let mut out = Vec::new();
    for row in rows {
        let Some(id) = row.get("id").and_then(Value::as_i64).filter(|id| *id > after) else { continue };
        last = last.max(id);
        let content = row.get("content").map(message_text).unwrap_or_default();
        match str_at(row, "role") {
            Some("user") if !content.is_empty() => out.push(replayed::user(content)),
            Some("assistant") => {
                if let Some(reasoning) = str_at(row, "reasoning").filter(|r| !r.trim().is_empty()) {
                    out.push(replayed::thinking(format!("hermes-{id}-thinking"), reasoning));
                }
                if !content.trim().is_empty() {
                    out.push(replayed::text(format!("hermes-{id}-text"), content));
                }
                let calls: Value =
                    str_at(row, "tool_calls").and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
                out.extend(calls.as_array().into_iter().flatten().filter_map(tool_call));
                if str_at(row, "finish_reason") == Some("stop") {
                    out.push(replayed::turn_end(EndReason::Completed, replayed::FINISHED_IN_TERMINAL));
                }
            }
            Some("tool") => {
                if let Some(call) = str_at(row, "tool_call_id") {
                    out.push(replayed::tool_result(call, content, false));
                }
            }
            _ => {}
        }
    }
    (out.into_iter().map(mirrored).collect(), last)
}

/// The handoff hooks of Hermes: its sessions are rows of its SQLite database.
#[derive(Debug, Clone, Copy)]
pub struct HermesSessions;

impl HermesSessions {
    async fn query(&self, sql: &str) -> Result<Vec<Value>, AdapterError> {
        let path = database_path(|name| std::env::var(name).ok())
            .ok_or_else(|| AdapterError::agent("no home directory to find Hermes' state.db in"))?;
        if !path.is_file() {
            // No conversation yet.
            return Ok(Vec::new());
        }
        sqlite::read_rows(&path, sql, QUERY_BYTES).await
    }
}

impl Handoff for HermesSessions {
    async fn scan_external_sessions(
        &self,
        params: ScanExternalSessionsParams,
    ) -> Result<Vec<ExternalSession>, AdapterError> {
        Ok(sessions_from_rows(&self.query(&sessions_sql(&params)?).await?))
    }

    /// A `hermes` process (not terminull's) drives `cwd`.
    async fn is_cwd_externally_owned(
        &self,
        params: IsCwdExternallyOwnedParams,
    ) -> Result<IsCwdExternallyOwnedResult, AdapterError> {
        Ok(owned_by_cli(&["hermes"], &params, drives))
    }

    async fn mirror(&self, params: MirrorParams) -> Result<MirrorResult, AdapterError> {
        let after = params.cursor.as_deref().and_then(|c| c.parse::<i64>().ok()).unwrap_or(0);
        let rows = self.query(&messages_sql(params.agent_session_id.as_str(), after)?).await?;
        let (blocks, last) = rows_blocks(&rows, after);
        Ok(MirrorResult { blocks, cursor: last.to_string() })
    }

    async fn latest_sid_for_cwd(&self, params: LatestSidForCwdParams) -> Result<LatestSidForCwdResult, AdapterError> {
        let scan_params = ScanExternalSessionsParams { cwd: Some(params.cwd.clone()), limit: Some(1) };
        let newest = self.scan_external_sessions(scan_params).await?.into_iter().next();
        Ok(LatestSidForCwdResult { agent_session_id: newest.map(|s| s.agent_session_id) })
    }

    /// `hermes --resume <id>` (the TUI).
    async fn terminal_resume_command(
        &self,
        params: TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        IDS.check(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec!["hermes".into(), "--resume".into(), params.agent_session_id.to_string()],
            cwd: params.cwd,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_database_is_in_hermes_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(database_path(env(&[("HOME", "/h")])), Some(PathBuf::from("/h/.hermes/state.db")));
        assert_eq!(database_path(env(&[("HOME", "/h"), ("HERMES_HOME", "/p")])), Some(PathBuf::from("/p/state.db")));
        assert_eq!(database_path(env(&[])), None);
    }

    #[test]
    fn which_command_lines_drive_a_session() {
        let venv = "/venv/bin/hermes";
        assert!(drives(&argv(&["hermes"]), Some("a_1")));
        assert!(drives(&argv(&["python3", venv, "chat", "-q", "hi", "--resume", "a_1"]), Some("a_1")));
        assert!(!drives(&argv(&["python3", venv, "chat", "--resume", "b_2"]), Some("a_1")));
        assert!(drives(&argv(&["hermes", "-r", "a_1"]), Some("a_1")));
        assert!(!drives(&argv(&["hermes", "sessions", "list"]), None));
        assert!(!drives(&argv(&["python3", venv, "acp"]), None));
        assert!(!drives(&argv(&["hermes", "--version"]), None));
    }

    #[test]
    fn hostile_ids_and_directories_stay_out_of_the_queries() {
        assert!(messages_sql("a'; DROP TABLE messages; --", 0).is_err());
        let sql = sessions_sql(&ScanExternalSessionsParams { cwd: Some("/it's".into()), limit: Some(3) }).unwrap();
        assert!(sql.contains(" = '/it''s'") && sql.ends_with("LIMIT 3"), "{sql}");
        assert!(sessions_sql(&ScanExternalSessionsParams { cwd: Some("/a\0b".into()), limit: None }).is_err());
    }

    /// A store with Hermes 0.19's tables (the columns the hooks read), one conversation
    /// its ACP server started and `hermes chat` continued (a tool round trip), read back
    /// by the hooks' queries; a CLI-started, an archived, a platform's and a malformed
    /// session are not listed.
    #[tokio::test]
    async fn a_conversation_in_the_store_is_listed_and_mirrored_from_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            r#"PRAGMA journal_mode=WAL;
            CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, cwd TEXT, model_config TEXT, title TEXT,
                message_count INTEGER DEFAULT 0, parent_session_id TEXT, started_at REAL NOT NULL,
                archived INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
                content TEXT, tool_call_id TEXT, tool_calls TEXT, timestamp REAL NOT NULL, finish_reason TEXT,
                reasoning TEXT, active INTEGER NOT NULL DEFAULT 1);
            INSERT INTO sessions VALUES
                ('20261202_204828_425440', 'acp', NULL, '{"cwd": "/w"}', NULL, 4, NULL, 1796244510.4, 0),
                ('20261202_205006_41926a', 'telegram', NULL, NULL, NULL, 2, NULL, 1796244607.8, 0),
                ('20261202_205100_aaaaaa', 'acp', NULL, '{"cwd": "/w"}', 'archived one', 2, NULL, 1796244700.0, 1),
                ('20261202_205200_bbbbbb', 'cli', '/w', NULL, 'started in the CLI', 2, NULL, 1796244800.0, 0),
                ('20261202_205300_cccccc', 'acp', NULL, 'not json', NULL, 0, NULL, 1796244900.0, 0);
            INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, timestamp, finish_reason, reasoning)
            VALUES ('20261202_204828_425440', 'user', 'mock:tool please run it', NULL, NULL, 1796244510.5, NULL, NULL),
                ('20261202_204828_425440', 'assistant', '', NULL,
                 '[{"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"echo hello\"}"}}]',
                 1796244511.0, 'tool_calls', 'I will run it.'),
                ('20261202_204828_425440', 'tool', 'hello', 'call_1', NULL, 1796244511.5, NULL, NULL),
                ('20261202_204828_425440', 'assistant', 'It printed hello.', NULL, NULL, 1796244512.0, 'stop', NULL);"#,
        )
        .unwrap();

        let params = ScanExternalSessionsParams { cwd: Some("/w".into()), limit: None };
        let rows = sqlite::read_rows(&path, &sessions_sql(&params).unwrap(), QUERY_BYTES).await.unwrap();
        let listed = sessions_from_rows(&rows);
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].agent_session_id.as_str(), "20261202_204828_425440");
        assert_eq!(listed[0].title.as_deref(), Some("mock:tool please run it"));
        assert_eq!(listed[0].updated_at, 1_796_244_512.0);
        assert_eq!(listed[0].message_count, Some(4));

        let sid = "20261202_204828_425440";
        let rows = sqlite::read_rows(&path, &messages_sql(sid, 0).unwrap(), QUERY_BYTES).await.unwrap();
        let (blocks, last) = rows_blocks(&rows, 0);
        let types: Vec<&str> = blocks.iter().map(Block::block_type).collect();
        assert_eq!(types, ["user_message", "thinking", "tool_call", "tool_result", "text", "session_end"]);
        let BlockKind::ToolCall(call) = &blocks[2].kind else { unreachable!() };
        assert_eq!((call.name.as_str(), &call.input), ("terminal", &json!({"command": "echo hello"})));
        assert!(blocks.iter().all(|b| b.meta.as_ref().is_some_and(|m| m.get("mirrored") == Some(&Value::Bool(true)))));
        assert_eq!(last, 4);
        let rows = sqlite::read_rows(&path, &messages_sql(sid, last).unwrap(), QUERY_BYTES).await.unwrap();
        assert!(rows_blocks(&rows, last).0.is_empty(), "nothing after the cursor");
    }
}
