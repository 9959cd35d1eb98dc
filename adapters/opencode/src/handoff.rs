//! The handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md)) for OpenCode and its
//! forks (Kilo): [`OpenCodeSessions`].
//!
//! OpenCode 1.18 keeps its sessions in a SQLite database (`session`, `message` and
//! `part` tables, each row's body a JSON `data` column). The hooks read that file
//! directly, read-only ([`crate::store`] says where); where it is not found (a development
//! channel's database) through the CLI's own read-only query command,
//! `<cli> db "<SELECT …>" --format json`, which follows the CLI's storage wherever it
//! is configured but starts the whole CLI for each query. Session ids are checked
//! (letters, digits, `_`, `-`) before they go into a query; a directory is quoted as an
//! SQL string.
//!
//! The mirror reads the parts of a session updated since the cursor (`<ms>|<ids>`: the
//! newest `time_updated` seen and the part ids seen at that millisecond), in order. A
//! part is rewritten as it grows, so a text or tool part can come again under its id.
//!
//! What the CLI prints is untrusted: bounded, parsed leniently, never a panic.

use std::time::Duration;

use serde_json::{Value, json};
use terminull_adapter_sdk::AdapterError;
use terminull_adapter_sdk::child::{AgentProcess, Lines, SpawnOptions};
use terminull_adapter_sdk::handoff::{
    Handoff, SessionIds, TITLE_CHARS, is_probe, mirrored, owned_by_cli, replayed, str_at, title_of,
};
use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, LatestSidForCwdParams,
    LatestSidForCwdResult, MirrorParams, MirrorResult, ScanExternalSessionsParams, TerminalResumeCommandParams,
    TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Block, EndReason, StreamedText, ToolCall, ToolStatus};
use tokio::process::Command;

use crate::store;
use terminull_adapter_sdk::handoff::sqlite;

/// How long one `<cli> db` query may take: Kilo 7.7 offline first stalls about 12 s on
/// its gateway's model fetches, and took over 20 s on a loaded machine; below the
/// bridge's 30 s deadline for a hook.
const QUERY_TIMEOUT: Duration = Duration::from_secs(25);
/// The most bytes of a query's output read.
const QUERY_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// The most parts one mirror call reads (the rest comes with the next).
const MIRROR_ROWS: usize = 2000;
/// Sessions listed at most.
const MAX_SESSIONS: u32 = 2000;

/// The CLI's subcommands that drive no session.
const NOT_A_SESSION: &[&str] = &[
    "session",
    "db",
    "export",
    "import",
    "models",
    "stats",
    "providers",
    "auth",
    "agent",
    "mcp",
    "debug",
    "completion",
    "upgrade",
    "uninstall",
    "github",
    "pr",
    "plugin",
    "plug",
];

/// OpenCode's session ids (`ses_` and letters and digits): 1–64 letters, digits, `_`
/// and `-`, checked before one goes into a query.
pub const IDS: SessionIds = SessionIds { max: 64, underscore: true, ..SessionIds::named("an OpenCode session id") };

/// `text` as an SQL string literal.
pub fn sql_string(text: &str) -> Result<String, AdapterError> {
    if text.contains('\0') {
        return Err(AdapterError::invalid("a directory with a NUL byte"));
    }
    Ok(format!("'{}'", text.replace('\'', "''")))
}

/// Runs `<cli> db <query> --format json` and parses its rows.
async fn query_through_cli(cli: &str, sql: &str) -> Result<Vec<Value>, AdapterError> {
    let program = which::which(cli).map_err(|_| AdapterError::agent(format!("`{cli}` was not found on PATH")))?;
    let mut cmd = Command::new(program);
    cmd.args(["db", sql, "--format", "json"]).current_dir("/");
    let opts = SpawnOptions { lines: Lines::Text, channel_capacity: 1024, record: false, ..SpawnOptions::default() };
    let (mut process, mut lines) =
        AgentProcess::spawn(cmd, opts).map_err(|e| AdapterError::agent(format!("cannot run `{cli} db`: {e}")))?;
    process.close_stdin();
    let mut output = String::new();
    let mut too_long = false;
    let read = tokio::time::timeout(QUERY_TIMEOUT, async {
        while let Some(line) = lines.recv().await {
            if let Ok(Value::String(line)) = line {
                if output.len() + line.len() >= QUERY_OUTPUT_BYTES {
                    too_long = true;
                    continue;
                }
                output.push_str(&line);
                output.push('\n');
            }
        }
    })
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(5), process.wait()).await;
    process.shutdown(Duration::from_secs(1)).await;
    if read.is_err() {
        return Err(AdapterError::agent(format!("`{cli} db` did not answer within {QUERY_TIMEOUT:?}")));
    }
    if too_long {
        return Err(AdapterError::agent(format!("`{cli} db` printed over {QUERY_OUTPUT_BYTES} bytes")));
    }
    let trimmed = output.trim();
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(rows)) => Ok(rows),
        Ok(_) => Err(AdapterError::agent(format!("`{cli} db` did not print a JSON array"))),
        Err(e) => Err(AdapterError::agent(format!("`{cli} db` printed no JSON ({e}): {}", title_of(trimmed, 200)))),
    }
}

/// The session query of a scan.
pub fn sessions_sql(params: &ScanExternalSessionsParams) -> Result<String, AdapterError> {
    let mut sql = "SELECT id, title, directory, time_updated FROM session WHERE parent_id IS NULL".to_owned();
    if let Some(cwd) = &params.cwd {
        sql.push_str(&format!(" AND directory = {}", sql_string(cwd)?));
    }
    let limit = params.limit.unwrap_or(MAX_SESSIONS).min(MAX_SESSIONS);
    sql.push_str(&format!(" ORDER BY time_updated DESC LIMIT {limit}"));
    Ok(sql)
}

/// The listings of session rows; malformed rows are skipped.
pub fn sessions_from_rows(rows: &[Value]) -> Vec<ExternalSession> {
    rows.iter()
        .filter_map(|row| {
            let id = row.get("id")?.as_str()?;
            IDS.is_valid(id).then_some(())?;
            Some(ExternalSession {
                agent_session_id: id.to_owned().into(),
                cwd: row.get("directory").and_then(Value::as_str).map(str::to_owned),
                title: row.get("title").and_then(Value::as_str).map(|t| title_of(t, TITLE_CHARS)),
                updated_at: row.get("time_updated").and_then(Value::as_f64).map_or(0.0, |ms| ms / 1000.0),
                message_count: None,
            })
        })
        .collect()
}

/// Whether a command line of the CLI may drive session `sid`: not a subcommand that
/// drives none, and `-s`/`--session` naming it or no session.
pub fn drives(argv: &[String], sid: Option<&str>) -> bool {
    if is_probe(argv) || argv.get(1).is_some_and(|a| NOT_A_SESSION.contains(&a.as_str())) {
        return false;
    }
    let Some(sid) = sid else { return true };
    let named = argv.windows(2).find(|w| w[0] == "-s" || w[0] == "--session").map(|w| w[1].clone());
    named.is_none_or(|n| n == sid)
}

/// The mirror's cursor: the newest `time_updated` seen and the ids seen at it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartCursor {
    /// Milliseconds.
    pub at: i64,
    /// Parts already read at `at`.
    pub ids: Vec<String>,
}

impl PartCursor {
    /// Parses the wire form; anything else reads from the start.
    pub fn parse(text: Option<&str>) -> Self {
        text.and_then(|t| {
            let (at, ids) = t.split_once('|')?;
            let ids = ids.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect();
            Some(Self { at: at.parse().ok()?, ids })
        })
        .unwrap_or_default()
    }

    /// The wire form.
    pub fn encode(&self) -> String {
        format!("{}|{}", self.at, self.ids.join(","))
    }
}

/// The part query of a mirror.
pub fn parts_sql(sid: &str, cursor: &PartCursor) -> Result<String, AdapterError> {
    IDS.check(sid)?;
    Ok(format!(
        "SELECT p.id AS id, p.message_id AS message_id, p.time_updated AS time_updated, p.data AS data, \
         m.data AS message FROM part p JOIN message m ON m.id = p.message_id \
         WHERE p.session_id = '{sid}' AND p.time_updated >= {} ORDER BY p.time_updated, p.id LIMIT {MIRROR_ROWS}",
        cursor.at
    ))
}

/// A JSON column: a string holding JSON, or already an object.
fn column(row: &Value, key: &str) -> Value {
    match row.get(key) {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// The blocks of part rows after the cursor, and the cursor after them.
pub fn rows_blocks(rows: &[Value], cursor: &PartCursor) -> (Vec<Block>, PartCursor) {
    let mut next = cursor.clone();
    let mut out = Vec::new();
    for row in rows {
        let (Some(id), Some(at)) = (str_at(row, "id"), row.get("time_updated").and_then(Value::as_i64)) else {
            continue;
        };
        if at < cursor.at || (at == cursor.at && cursor.ids.iter().any(|seen| seen == id)) {
            continue;
        }
        if at > next.at {
            next = PartCursor { at, ids: Vec::new() };
        }
        if at == next.at {
            next.ids.push(id.to_owned());
        }
        let part = column(row, "data");
        let message = column(row, "message");
        let user = str_at(&message, "role") == Some("user");
        let kind = match (user, str_at(&part, "type")) {
            (true, Some("text")) if part.get("synthetic").and_then(Value::as_bool) != Some(true) => {
                Some(replayed::user(str_at(&part, "text").unwrap_or_default().to_owned()))
            }
            (false, Some("text")) => Some(BlockKind::Text(StreamedText::snapshot(
                id.to_owned(),
                str_at(&part, "text").unwrap_or_default().to_owned(),
                part.pointer("/time/end").is_some(),
            ))),
            (false, Some("reasoning")) => Some(BlockKind::Thinking(StreamedText::snapshot(
                id.to_owned(),
                str_at(&part, "text").unwrap_or_default().to_owned(),
                part.pointer("/time/end").is_some(),
            ))),
            (false, Some("tool")) => {
                let call = str_at(&part, "callID").unwrap_or(id).to_owned();
                let state = part.get("state").cloned().unwrap_or(Value::Null);
                let status = match str_at(&state, "status") {
                    Some("completed") => ToolStatus::Done,
                    Some("error") => ToolStatus::Error,
                    _ => ToolStatus::Running,
                };
                out.push(mirrored(BlockKind::ToolCall(ToolCall {
                    id: call.clone().into(),
                    name: str_at(&part, "tool").unwrap_or("tool").to_owned(),
                    input: state.get("input").cloned().unwrap_or(json!({})),
                    status,
                    parent_id: None,
                    title: str_at(&state, "title").map(str::to_owned),
                })));
                (status != ToolStatus::Running).then(|| {
                    replayed::tool_result(
                        call,
                        str_at(&state, "output").or_else(|| str_at(&state, "error")).unwrap_or_default().to_owned(),
                        status == ToolStatus::Error,
                    )
                })
            }
            (false, Some("step-finish")) if str_at(&part, "reason") == Some("stop") => {
                Some(replayed::turn_end(EndReason::Completed, replayed::FINISHED_IN_TERMINAL))
            }
            _ => None,
        };
        out.extend(kind.map(mirrored));
    }
    (out, next)
}

/// The handoff hooks of one CLI of the family (`opencode`, `kilo`): its sessions are
/// rows of its SQLite database ([`OpenCodeSessions::query`]).
#[derive(Debug, Clone, Copy)]
pub struct OpenCodeSessions {
    /// The CLI's name on `PATH`.
    pub cli: &'static str,
    /// The prefix of its environment variables (`OPENCODE`, `KILO`): `$<prefix>_DB`.
    pub env_prefix: &'static str,
}

impl OpenCodeSessions {
    /// The rows of `sql`: read from the CLI's database file when it is where the CLI
    /// keeps it by default, otherwise through `<cli> db`.
    async fn query(&self, sql: &str) -> Result<Vec<Value>, AdapterError> {
        let path = store::database_path(self.cli, self.env_prefix, |name| std::env::var(name).ok());
        match path.filter(|p| p.is_file()) {
            Some(path) => sqlite::read_rows(&path, sql, QUERY_OUTPUT_BYTES).await,
            None => query_through_cli(self.cli, sql).await,
        }
    }
}

impl Handoff for OpenCodeSessions {
    async fn scan_external_sessions(
        &self,
        params: ScanExternalSessionsParams,
    ) -> Result<Vec<ExternalSession>, AdapterError> {
        Ok(sessions_from_rows(&self.query(&sessions_sql(&params)?).await?))
    }

    /// A process of the CLI (not terminull's) drives `cwd`.
    async fn is_cwd_externally_owned(
        &self,
        params: IsCwdExternallyOwnedParams,
    ) -> Result<IsCwdExternallyOwnedResult, AdapterError> {
        Ok(owned_by_cli(&[self.cli], &params, drives))
    }

    async fn mirror(&self, params: MirrorParams) -> Result<MirrorResult, AdapterError> {
        let sid = params.agent_session_id.as_str();
        let cursor = PartCursor::parse(params.cursor.as_deref());
        let rows = self.query(&parts_sql(sid, &cursor)?).await?;
        let (blocks, next) = rows_blocks(&rows, &cursor);
        Ok(MirrorResult { blocks, cursor: next.encode() })
    }

    async fn latest_sid_for_cwd(&self, params: LatestSidForCwdParams) -> Result<LatestSidForCwdResult, AdapterError> {
        let scan_params = ScanExternalSessionsParams { cwd: Some(params.cwd.clone()), limit: Some(1) };
        let newest = self.scan_external_sessions(scan_params).await?.into_iter().next();
        Ok(LatestSidForCwdResult { agent_session_id: newest.map(|s| s.agent_session_id) })
    }

    /// `<cli> --session <id>` (the TUI).
    async fn terminal_resume_command(
        &self,
        params: TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        IDS.check(params.agent_session_id.as_str())?;
        Ok(TerminalResumeCommandResult {
            argv: vec![self.cli.to_owned(), "--session".into(), params.agent_session_id.to_string()],
            cwd: params.cwd,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSIONS: &str = include_str!("../../../tests/fixtures/handoff/opencode/session-list.json");
    const PARTS: &str = include_str!("../../../tests/fixtures/handoff/opencode/parts.json");

    #[test]
    fn recorded_session_rows_become_listings_and_hostile_ids_are_refused() {
        let rows: Vec<Value> = serde_json::from_str(SESSIONS).unwrap();
        // The recording is `session list --format json`: same names but `updated`.
        let rows: Vec<Value> = rows
            .into_iter()
            .map(|mut r| {
                r["time_updated"] = r["updated"].clone();
                r
            })
            .collect();
        let listed = sessions_from_rows(&rows);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].agent_session_id.as_str(), "ses_dd4b3ccf2ffe46piWlr8eUMa3j");
        assert_eq!(listed[0].cwd.as_deref(), Some("/tmp/hrec4/ws"));
        assert!(sessions_from_rows(&[json!({"id": "ses_x'; DROP TABLE session; --"}), json!(7)]).is_empty());
        assert!(IDS.check("ses_abc").is_ok());
        assert!(IDS.check("ses_a'b").is_err() && IDS.check("").is_err() && IDS.check("a b").is_err());
        let sql = sessions_sql(&ScanExternalSessionsParams { cwd: Some("/it's".into()), limit: Some(3) }).unwrap();
        assert!(sql.contains("directory = '/it''s'") && sql.ends_with("LIMIT 3"), "{sql}");
    }

    #[test]
    fn recorded_parts_map_to_the_turn_and_the_cursor_skips_what_was_read() {
        let rows: Vec<Value> = serde_json::from_str(PARTS).unwrap();
        let (blocks, cursor) = rows_blocks(&rows, &PartCursor::default());
        let types: Vec<&str> = blocks.iter().map(Block::block_type).collect();
        assert_eq!(
            types,
            ["user_message", "thinking", "text", "tool_call", "tool_result", "thinking", "text", "session_end"]
        );
        let BlockKind::ToolResult(result) = &blocks[4].kind else { unreachable!() };
        assert_eq!(result.output, "hello\n");
        // The same rows again (the query is `>=` the cursor): nothing new.
        let (again, same) = rows_blocks(&rows, &PartCursor::parse(Some(&cursor.encode())));
        assert!(again.is_empty());
        assert_eq!(same, cursor);
    }

    /// The recorded rows written into a store with the CLI's tables (the columns the hooks
    /// read, as in kilo 7.7.7's `kilo.db`), read back with the hooks' own queries.
    #[tokio::test]
    async fn the_hooks_queries_read_the_recorded_rows_back_from_a_store_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kilo.db");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE session (id text PRIMARY KEY, parent_id text, directory text NOT NULL, title text NOT NULL,
                 time_updated integer NOT NULL);
             CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_updated integer NOT NULL,
                 data text NOT NULL);
             CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
                 time_updated integer NOT NULL, data text NOT NULL);",
        )
        .unwrap();
        let sessions: Vec<Value> = serde_json::from_str(SESSIONS).unwrap();
        let sid = sessions[0]["id"].as_str().unwrap();
        for s in &sessions {
            db.execute(
                "INSERT INTO session VALUES (?1, NULL, ?2, ?3, ?4)",
                rusqlite::params![
                    s["id"].as_str(),
                    s["directory"].as_str(),
                    s["title"].as_str(),
                    s["updated"].as_i64()
                ],
            )
            .unwrap();
        }
        let parts: Vec<Value> = serde_json::from_str(PARTS).unwrap();
        for p in &parts {
            let (id, message, at) = (p["message_id"].as_str(), p["message"].as_str(), p["time_updated"].as_i64());
            db.execute(
                "INSERT OR IGNORE INTO message VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![id, sid, at, message],
            )
            .unwrap();
            db.execute(
                "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![p["id"].as_str(), id, sid, at, p["data"].as_str()],
            )
            .unwrap();
        }

        let params = ScanExternalSessionsParams { cwd: Some("/tmp/hrec4/ws".into()), limit: None };
        let rows = sqlite::read_rows(&path, &sessions_sql(&params).unwrap(), QUERY_OUTPUT_BYTES).await.unwrap();
        let listed = sessions_from_rows(&rows);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].agent_session_id.as_str(), sid);
        assert_eq!(listed[0].updated_at, 1_796_022_746.084);

        let from_file = sqlite::read_rows(&path, &parts_sql(sid, &PartCursor::default()).unwrap(), QUERY_OUTPUT_BYTES)
            .await
            .unwrap();
        let (blocks, cursor) = rows_blocks(&from_file, &PartCursor::default());
        let (recorded, recorded_cursor) = rows_blocks(&parts, &PartCursor::default());
        let untimed = |blocks: &[Block]| {
            let mut value = serde_json::to_value(blocks).unwrap();
            value.as_array_mut().unwrap().iter_mut().for_each(|b| drop(b.as_object_mut().unwrap().remove("ts")));
            value
        };
        assert_eq!(untimed(&blocks), untimed(&recorded));
        assert_eq!(cursor, recorded_cursor);
        let later = sqlite::read_rows(&path, &parts_sql(sid, &cursor).unwrap(), QUERY_OUTPUT_BYTES).await.unwrap();
        assert!(rows_blocks(&later, &cursor).0.is_empty(), "nothing new after the cursor");
    }

    #[tokio::test]
    async fn the_resume_command_and_who_drives_a_session() {
        let opencode = OpenCodeSessions { cli: "opencode", env_prefix: "OPENCODE" };
        let params = TerminalResumeCommandParams { agent_session_id: "ses_abc".into(), cwd: None };
        assert_eq!(opencode.terminal_resume_command(params).await.unwrap().argv, ["opencode", "--session", "ses_abc"]);
        let hostile = TerminalResumeCommandParams { agent_session_id: "x;rm".into(), cwd: None };
        assert!(opencode.terminal_resume_command(hostile).await.is_err());
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(drives(&argv(&["opencode"]), Some("ses_a")));
        assert!(drives(&argv(&["opencode", "run", "-s", "ses_a", "hi"]), Some("ses_a")));
        assert!(!drives(&argv(&["opencode", "run", "-s", "ses_b", "hi"]), Some("ses_a")));
        assert!(!drives(&argv(&["opencode", "db", "SELECT 1"]), None));
        assert!(!drives(&argv(&["opencode", "--version"]), None));
    }
}
