//! The part of `codex app-server`'s JSON-RPC protocol this adapter speaks (checked
//! against codex 0.171.0: `codex app-server generate-ts` prints the whole schema).
//!
//! Requests the adapter sends: `initialize` (then the `initialized` notification),
//! `thread/start`, `thread/resume`, `turn/start`, `turn/interrupt`. Notifications it reads
//! are decoded by [`Notice::parse`]; the server's approval requests by [`Approval::parse`].
//! Decoding is tolerant: unknown methods, item types and fields are kept as
//! `Unknown`/`Other` and ignored, missing fields take their defaults.

use serde::Deserialize;
use serde_json::{Value, json};

/// Methods of the protocol, as the wire spells them.
pub mod method {
    /// Client → server: the handshake.
    pub const INITIALIZE: &str = "initialize";
    /// Client → server notification after `initialize` answered.
    pub const INITIALIZED: &str = "initialized";
    /// Client → server: a new thread (conversation).
    pub const THREAD_START: &str = "thread/start";
    /// Client → server: load a thread from its rollout file and continue it.
    pub const THREAD_RESUME: &str = "thread/resume";
    /// Client → server: run one turn of user input.
    pub const TURN_START: &str = "turn/start";
    /// Client → server: stop the running turn.
    pub const TURN_INTERRUPT: &str = "turn/interrupt";
    /// Server → client request: may this command run?
    pub const COMMAND_APPROVAL: &str = "item/commandExecution/requestApproval";
    /// Server → client request: may this patch be applied?
    pub const FILE_CHANGE_APPROVAL: &str = "item/fileChange/requestApproval";
}

/// `thread/start` and `thread/resume` answer with the thread: only its id matters here.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ThreadResponse {
    /// The thread.
    #[serde(default)]
    pub thread: ThreadInfo,
}

/// A thread as the server describes it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ThreadInfo {
    /// Its id (a UUIDv7); also the rollout file's and `codex resume`'s id.
    #[serde(default)]
    pub id: String,
}

/// `turn/start` answers with the turn (its id is needed for `turn/interrupt`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TurnResponse {
    /// The turn.
    #[serde(default)]
    pub turn: TurnInfo,
}

/// A turn (`Turn` in the schema), as far as this adapter reads it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInfo {
    /// The turn's id.
    #[serde(default)]
    pub id: String,
    /// `inProgress`, `completed`, `interrupted` or `failed`.
    #[serde(default)]
    pub status: TurnStatus,
    /// Why a failed turn failed.
    #[serde(default)]
    pub error: Option<TurnError>,
}

/// `Turn.status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    /// Still running.
    #[default]
    InProgress,
    /// Ended normally.
    Completed,
    /// Ended by `turn/interrupt`.
    Interrupted,
    /// Ended with an error (`error` says why).
    Failed,
    /// A status this adapter does not know.
    #[serde(other)]
    Unknown,
}

/// `TurnError` (also the `error` notification's `error`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TurnError {
    /// What went wrong, for people.
    #[serde(default)]
    pub message: String,
}

/// One thread item (`ThreadItem`), by its `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Item {
    /// The model's answer text.
    #[serde(rename_all = "camelCase")]
    AgentMessage {
        /// The item id.
        id: String,
        /// The whole text (complete in `item/completed`).
        #[serde(default)]
        text: String,
    },
    /// The model's reasoning: summary parts and (rarely) raw content.
    #[serde(rename_all = "camelCase")]
    Reasoning {
        /// The item id.
        id: String,
        /// Summary parts.
        #[serde(default)]
        summary: Vec<String>,
        /// Raw reasoning text parts.
        #[serde(default)]
        content: Vec<String>,
    },
    /// A shell command.
    #[serde(rename_all = "camelCase")]
    CommandExecution {
        /// The item id.
        id: String,
        /// The command line (`/bin/bash -lc '…'`).
        #[serde(default)]
        command: String,
        /// `inProgress`, `completed`, `failed`, `declined`.
        #[serde(default)]
        status: ItemStatus,
        /// stdout and stderr together.
        #[serde(default)]
        aggregated_output: Option<String>,
        /// The exit code, once it ran.
        #[serde(default)]
        exit_code: Option<i64>,
    },
    /// A patch (`apply_patch`), one entry per file.
    #[serde(rename_all = "camelCase")]
    FileChange {
        /// The item id.
        id: String,
        /// The files.
        #[serde(default)]
        changes: Vec<FileUpdate>,
        /// `inProgress`, `completed`, `failed`, `declined`.
        #[serde(default)]
        status: ItemStatus,
    },
    /// A call of an MCP server's tool.
    #[serde(rename_all = "camelCase")]
    McpToolCall {
        /// The item id.
        id: String,
        /// The server's name.
        #[serde(default)]
        server: String,
        /// The tool's name.
        #[serde(default)]
        tool: String,
        /// Its arguments.
        #[serde(default)]
        arguments: Value,
        /// `inProgress`, `completed`, `failed`.
        #[serde(default)]
        status: ItemStatus,
        /// The result (`{content: [...], structuredContent}`).
        #[serde(default)]
        result: Option<Value>,
        /// The error (`{message}`).
        #[serde(default)]
        error: Option<Value>,
    },
    /// A web search.
    #[serde(rename_all = "camelCase")]
    WebSearch {
        /// The item id.
        id: String,
        /// What was searched for.
        #[serde(default)]
        query: String,
    },
    /// Any other item (the user's own message, plans, reviews, …): not shown.
    #[serde(other)]
    Other,
}

/// The status of a command, patch or MCP call item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemStatus {
    /// Running (or waiting for approval).
    #[default]
    InProgress,
    /// Done.
    Completed,
    /// Could not run, or failed.
    Failed,
    /// Refused by the user (or policy).
    Declined,
    /// A status this adapter does not know.
    #[serde(other)]
    Unknown,
}

/// One file of a `fileChange` item.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FileUpdate {
    /// The file, absolute.
    pub path: String,
    /// `{"type": "add" | "delete" | "update", "move_path"?}`.
    #[serde(default)]
    pub kind: FileUpdateKind,
    /// For `add`, the new content; for `update`, a unified diff of the hunks; for
    /// `delete`, the old content.
    #[serde(default)]
    pub diff: String,
}

/// `PatchChangeKind`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct FileUpdateKind {
    /// `add`, `delete`, `update`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Where an `update` moved the file, when it did.
    #[serde(default)]
    pub move_path: Option<String>,
}

/// `thread/tokenUsage/updated`'s counts (`TokenUsageBreakdown`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenCounts {
    /// Input tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: i64,
    /// Of those, read from the cache.
    #[serde(default)]
    pub cached_input_tokens: i64,
    /// Tokens written to the cache.
    #[serde(default)]
    pub cache_write_input_tokens: i64,
    /// Output tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: i64,
}

/// A notification from the server, decoded as far as the adapter uses it.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `turn/started`.
    TurnStarted(TurnInfo),
    /// `turn/completed`: the turn is over (`status` says how).
    TurnCompleted(TurnInfo),
    /// `item/started`.
    ItemStarted(Item),
    /// `item/completed`.
    ItemCompleted(Item),
    /// `item/agentMessage/delta`: more answer text.
    TextDelta {
        /// The `agentMessage` item.
        item_id: String,
        /// The new text.
        delta: String,
    },
    /// `item/reasoning/summaryTextDelta` or `item/reasoning/textDelta`.
    ReasoningDelta {
        /// The `reasoning` item.
        item_id: String,
        /// The new text.
        delta: String,
    },
    /// `item/reasoning/summaryPartAdded`: a new summary paragraph begins.
    ReasoningPart {
        /// The `reasoning` item.
        item_id: String,
    },
    /// `item/commandExecution/outputDelta`: more output of a running command.
    CommandOutput {
        /// The `commandExecution` item.
        item_id: String,
        /// The new output.
        delta: String,
    },
    /// `thread/tokenUsage/updated`: `last` is one model call's usage.
    TokenUsage(TokenCounts),
    /// `error`: the turn hit an error; `will_retry` when codex tries again by itself.
    Error {
        /// What went wrong.
        message: String,
        /// Codex retries the request.
        will_retry: bool,
    },
    /// `warning`: something the user may want to know (e.g. unknown model metadata).
    Warning(String),
    /// `serverRequest/resolved`: a request of the server was settled (answered, or
    /// withdrawn because the turn ended).
    RequestResolved(Value),
    /// Anything else (`thread/status/changed`, `account/rateLimits/updated`, …).
    Unknown(String),
}

fn field<T: serde::de::DeserializeOwned + Default>(params: &Value, pointer: &str) -> T {
    params.pointer(pointer).and_then(|v| T::deserialize(v).ok()).unwrap_or_default()
}

impl Notice {
    /// Decodes a notification. A known method whose params do not decode is `Unknown`
    /// (and logged).
    pub fn parse(method: &str, params: &Value) -> Notice {
        let text = |p: &str| field::<String>(params, p);
        let item = |params: &Value| Item::deserialize(params.get("item").unwrap_or(&Value::Null));
        let decoded = match method {
            "turn/started" => Ok(Notice::TurnStarted(field(params, "/turn"))),
            "turn/completed" => Ok(Notice::TurnCompleted(field(params, "/turn"))),
            "item/started" => item(params).map(Notice::ItemStarted),
            "item/completed" => item(params).map(Notice::ItemCompleted),
            "item/agentMessage/delta" => Ok(Notice::TextDelta { item_id: text("/itemId"), delta: text("/delta") }),
            "item/reasoning/summaryTextDelta" | "item/reasoning/textDelta" => {
                Ok(Notice::ReasoningDelta { item_id: text("/itemId"), delta: text("/delta") })
            }
            "item/reasoning/summaryPartAdded" => Ok(Notice::ReasoningPart { item_id: text("/itemId") }),
            "item/commandExecution/outputDelta" => {
                Ok(Notice::CommandOutput { item_id: text("/itemId"), delta: text("/delta") })
            }
            "thread/tokenUsage/updated" => Ok(Notice::TokenUsage(field(params, "/tokenUsage/last"))),
            "error" => Ok(Notice::Error { message: text("/error/message"), will_retry: field(params, "/willRetry") }),
            "warning" => Ok(Notice::Warning(text("/message"))),
            "serverRequest/resolved" => Ok(Notice::RequestResolved(field(params, "/requestId"))),
            other => Ok(Notice::Unknown(other.to_owned())),
        };
        decoded.unwrap_or_else(|e: serde_json::Error| {
            tracing::warn!(method, "codex app-server sent a notification that does not decode ({e}); skipped");
            Notice::Unknown(method.to_owned())
        })
    }
}

/// What an approval request asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalKind {
    /// Running `command` in `cwd`.
    Command {
        /// The command line.
        command: String,
        /// Its working directory.
        cwd: String,
    },
    /// Applying the patch of a `fileChange` item; `grant_root` when codex asks to write
    /// under a directory for the rest of the session.
    Patch {
        /// The directory, when asked.
        grant_root: Option<String>,
    },
}

/// An approval request from the server, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The item (command or patch) it is about.
    pub item_id: String,
    /// What it asks.
    pub kind: ApprovalKind,
    /// Why codex asks, when it says.
    pub reason: Option<String>,
    /// Whether "allow for this session" can be answered (`acceptForSession` is in
    /// `availableDecisions`, or the request lists none).
    pub session_allowed: bool,
}

impl Approval {
    /// Decodes `item/commandExecution/requestApproval` or
    /// `item/fileChange/requestApproval`; `None` for any other method.
    pub fn parse(method: &str, params: &Value) -> Option<Approval> {
        let text = |p: &str| params.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let kind = match method {
            method::COMMAND_APPROVAL => ApprovalKind::Command {
                command: text("/command").unwrap_or_default(),
                cwd: text("/cwd").unwrap_or_default(),
            },
            method::FILE_CHANGE_APPROVAL => ApprovalKind::Patch { grant_root: text("/grantRoot") },
            _ => return None,
        };
        let session_allowed = match params.get("availableDecisions").and_then(Value::as_array) {
            Some(decisions) => decisions.iter().any(|d| d.as_str() == Some("acceptForSession")),
            None => true,
        };
        Some(Approval { item_id: text("/itemId").unwrap_or_default(), kind, reason: text("/reason"), session_allowed })
    }
}

/// The answer to an approval request (`CommandExecutionApprovalDecision` /
/// `FileChangeApprovalDecision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// `accept`: this once.
    Accept,
    /// `acceptForSession`: this and the like for the rest of the session.
    AcceptForSession,
    /// `decline`: do not run it; the turn goes on.
    Decline,
    /// `cancel`: do not run it and stop the turn (the user interrupted).
    Cancel,
}

impl Decision {
    /// The response's `result`.
    pub fn result(self) -> Value {
        let decision = match self {
            Decision::Accept => "accept",
            Decision::AcceptForSession => "acceptForSession",
            Decision::Decline => "decline",
            Decision::Cancel => "cancel",
        };
        json!({ "decision": decision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_decode_from_captured_lines() {
        let item = json!({"item": {"type": "commandExecution", "id": "call_1", "command": "/bin/bash -lc 'echo hello'",
            "status": "completed", "aggregatedOutput": "hello\n", "exitCode": 0, "processId": "7"}, "threadId": "t"});
        assert_eq!(
            Notice::parse("item/completed", &item),
            Notice::ItemCompleted(Item::CommandExecution {
                id: "call_1".into(),
                command: "/bin/bash -lc 'echo hello'".into(),
                status: ItemStatus::Completed,
                aggregated_output: Some("hello\n".into()),
                exit_code: Some(0),
            })
        );
        let user = json!({"item": {"type": "userMessage", "id": "u", "content": []}});
        assert_eq!(Notice::parse("item/started", &user), Notice::ItemStarted(Item::Other));
        let usage = json!({"tokenUsage": {"total": {"inputTokens": 9}, "last": {"totalTokens": 11174, "inputTokens": 11148,
            "cachedInputTokens": 3, "cacheWriteInputTokens": 0, "outputTokens": 26, "reasoningOutputTokens": 0}}});
        assert_eq!(
            Notice::parse("thread/tokenUsage/updated", &usage),
            Notice::TokenUsage(TokenCounts {
                input_tokens: 11148,
                cached_input_tokens: 3,
                cache_write_input_tokens: 0,
                output_tokens: 26
            })
        );
        let done =
            json!({"turn": {"id": "tu", "status": "failed", "error": {"message": "boom", "codexErrorInfo": "x"}}});
        assert_eq!(
            Notice::parse("turn/completed", &done),
            Notice::TurnCompleted(TurnInfo {
                id: "tu".into(),
                status: TurnStatus::Failed,
                error: Some(TurnError { message: "boom".into() })
            })
        );
        assert_eq!(
            Notice::parse("error", &json!({"error": {"message": "m"}, "willRetry": true})),
            Notice::Error { message: "m".into(), will_retry: true }
        );
        assert_eq!(Notice::parse("thread/status/changed", &json!({})), Notice::Unknown("thread/status/changed".into()));
    }

    #[test]
    fn hostile_notifications_decode_to_unknown_not_a_panic() {
        for (method, params) in [
            ("item/completed", json!({"item": {"type": "agentMessage"}})),
            ("item/completed", json!({"item": 7})),
            ("item/started", json!(null)),
        ] {
            assert_eq!(Notice::parse(method, &params), Notice::Unknown(method.into()), "{params}");
        }
        assert_eq!(
            Notice::parse("item/agentMessage/delta", &json!({"itemId": 3, "delta": ["x"]})),
            Notice::TextDelta { item_id: String::new(), delta: String::new() }
        );
    }

    #[test]
    fn approval_requests_decode() {
        let params = json!({"kind": "command", "itemId": "call_1", "command": "/bin/bash -lc 'touch x'", "cwd": "/w",
            "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": {}}, "cancel"]});
        assert_eq!(
            Approval::parse(method::COMMAND_APPROVAL, &params),
            Some(Approval {
                item_id: "call_1".into(),
                kind: ApprovalKind::Command { command: "/bin/bash -lc 'touch x'".into(), cwd: "/w".into() },
                reason: None,
                session_allowed: false,
            })
        );
        let patch = json!({"itemId": "p", "reason": "write outside", "grantRoot": "/x"});
        let decoded = Approval::parse(method::FILE_CHANGE_APPROVAL, &patch).unwrap();
        assert_eq!(decoded.kind, ApprovalKind::Patch { grant_root: Some("/x".into()) });
        assert!(decoded.session_allowed);
        assert_eq!(Approval::parse("item/tool/requestUserInput", &patch), None);
        assert_eq!(Decision::AcceptForSession.result(), json!({"decision": "acceptForSession"}));
    }
}
