//! `terminull chat` and `terminull attach`: a terminal conversation with an agent
//! through the bridge, and the scriptable form (`-p PROMPT --json`).
//!
//! Text mode reads lines with a line editor (history, a `❯` prompt) and prints the
//! conversation above the prompt ([`screen`]): streamed text grows in place, laid out
//! as markdown ([`render`], [`markdown`]), tool calls are one-line cards with their
//! status, a permission request shows the whole of what would run and is answered
//! with y/n at the prompt. Ctrl-C interrupts a running turn; at idle a second Ctrl-C
//! leaves, as does Ctrl-D, with a hint how to come back (`--continue`, `attach`).
//! JSON mode prints every block the client receives as one NDJSON line, as it came on
//! the wire (a streamed append stays an append, with its `offset`), and answers
//! permission requests from a flag.

mod converse;
pub mod input;
pub mod markdown;
pub mod render;
pub mod screen;
pub mod style;

use std::path::PathBuf;

use terminull_protocol::blocks::{Block, PermissionOptionKind, PermissionRequest};
use terminull_protocol::control::{self as control, ControlMessage, ReplyResult, SessionRequest, SessionResume};
use terminull_protocol::ids::SessionId;

use self::converse::converse;
use crate::daemon_client::{Client, ClientError};

/// How to answer permission requests without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PermissionAnswer {
    /// Allow this call only: the request's `allow_once` option, else its
    /// `allow_always` one (the narrowest allowance offered, never a standing rule when
    /// a one-off is possible).
    Allow,
    /// Refuse this call: the `reject_once` option, else the `reject_always` one.
    Deny,
}

/// Which session a chat talks in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A new session.
    New,
    /// The session started last in this directory (of the agent, when one is named).
    Continue,
    /// This session.
    Session(String),
}

/// What `terminull chat` was asked to do.
#[derive(Debug, Clone)]
pub struct ChatOptions {
    /// The agent (required for a new session).
    pub agent: Option<String>,
    /// Which session.
    pub target: Target,
    /// Working directory of the session.
    pub cwd: String,
    /// Model, when chosen.
    pub model: Option<String>,
    /// Permission mode, when chosen (agent-specific).
    pub permission_mode: Option<String>,
    /// One prompt, then exit when the turn ends (the scriptable form).
    pub prompt: Option<String>,
    /// Print blocks as NDJSON instead of rendering them.
    pub json: bool,
    /// Answer permission requests automatically.
    pub permission: Option<PermissionAnswer>,
    /// The line editor's history file.
    pub history_file: Option<PathBuf>,
}

/// Why a chat could not run.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// Talking to the bridge failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `--continue` found no session to go back to.
    #[error("no earlier session in {cwd}{}: start one with `terminull chat AGENT`", agent.as_deref().map(|a| format!(" with {a}")).unwrap_or_default())]
    NothingToContinue {
        /// The directory looked in.
        cwd: String,
        /// The agent asked for, if any.
        agent: Option<String>,
    },
    /// Neither an agent nor a session was named.
    #[error(
        "name an agent (`terminull chat AGENT`, see `terminull agents`) or a session (`--continue`, `--session ID`)"
    )]
    NoAgent,
}

/// The option id that answers `request` as `answer`.
pub fn choose(request: &PermissionRequest, answer: PermissionAnswer) -> Option<String> {
    let wanted: &[PermissionOptionKind] = match answer {
        PermissionAnswer::Allow => &[PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways],
        PermissionAnswer::Deny => &[PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways],
    };
    wanted.iter().find_map(|k| request.options.iter().find(|o| o.kind == *k)).map(|o| o.id.clone())
}

/// Runs a chat; the exit status is 0 only when the (last) turn completed.
pub async fn chat(client: &mut Client, opts: &ChatOptions) -> Result<bool, ChatError> {
    let mut kept = Vec::new();
    let session = match &opts.target {
        Target::New => {
            let agent = opts.agent.as_deref().ok_or(ChatError::NoAgent)?;
            let request = ControlMessage::SessionRequest(SessionRequest {
                model: opts.model.clone(),
                permission_mode: opts.permission_mode.clone(),
                ..SessionRequest::new(agent, opts.cwd.clone())
            });
            let ReplyResult::SessionStarted { session_id } = client.call(request, &mut kept).await? else {
                return Err(ClientError::Closed.into());
            };
            session_id
        }
        Target::Continue => {
            let id = last_session(client, &opts.cwd, opts.agent.as_deref())
                .await?
                .ok_or_else(|| ChatError::NothingToContinue { cwd: opts.cwd.clone(), agent: opts.agent.clone() })?;
            client.call(resume_from(&id, 0), &mut kept).await?;
            id
        }
        Target::Session(id) => {
            let id = SessionId(id.clone());
            client.call(resume_from(&id, 0), &mut kept).await?;
            id
        }
    };
    note_stderr(&format!("session {session}"));
    let mode = Mode {
        prompt: opts.prompt.clone(),
        json: opts.json,
        auto: opts.permission,
        history: opts.history_file.clone(),
        replay: opts.target != Target::New,
    };
    Ok(converse(client, &session, kept, mode).await?)
}

/// Attaches to an existing session, replaying its history first.
pub async fn attach(client: &mut Client, session: &str, json: bool) -> Result<bool, ClientError> {
    let mut kept = Vec::new();
    let session = SessionId(session.to_owned());
    client.call(resume_from(&session, 0), &mut kept).await?;
    let mode = Mode { prompt: None, json, auto: None, history: None, replay: true };
    converse(client, &session, kept, mode).await
}

/// The session started last in `cwd` (ids are time-ordered), of `agent` when given.
async fn last_session(client: &mut Client, cwd: &str, agent: Option<&str>) -> Result<Option<SessionId>, ClientError> {
    let mut kept = Vec::new();
    let ReplyResult::Sessions { sessions } =
        client.call(ControlMessage::ListSessions(control::ListSessions {}), &mut kept).await?
    else {
        return Err(ClientError::Closed);
    };
    Ok(sessions
        .into_iter()
        .filter(|s| s.cwd == cwd && agent.is_none_or(|a| s.agent_id.as_str() == a))
        .map(|s| s.session_id)
        .max_by(|a, b| a.0.cmp(&b.0)))
}

/// `--json`'s line for `block`: the block as it came on the wire (an append keeps its
/// `offset`), one NDJSON line.
fn json_line(block: &Block) -> String {
    format!("{}\n", serde_json::to_string(block).unwrap_or_default())
}

/// `session_resume` of `session` from `since_seq` (0: its whole history).
fn resume_from(session: &SessionId, since_seq: u64) -> ControlMessage {
    ControlMessage::SessionResume(SessionResume {
        session_id: session.clone(),
        since_seq: Some(since_seq),
        since_ts: None,
        app_pubkey: String::new(),
    })
}

fn note_stderr(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

/// How a conversation runs.
#[derive(Debug)]
struct Mode {
    /// The one prompt of the scriptable form.
    prompt: Option<String>,
    /// NDJSON output.
    json: bool,
    /// Automatic permission answers.
    auto: Option<PermissionAnswer>,
    /// The editor's history file.
    history: Option<PathBuf>,
    /// The session's history is replayed first (attach, --continue, --session).
    replay: bool,
}

/// The one-line key hint shown when an interactive chat starts.
const KEY_HINT: &str = "Enter sends · ↑ history · Ctrl-C interrupts a reply, twice leaves · Ctrl-D leaves";

async fn send_user(client: &mut Client, session: &SessionId, text: String) -> Result<(), ClientError> {
    let message = ControlMessage::UserMessage(control::UserMessage {
        session_id: session.clone(),
        text,
        attachments: Vec::new(),
    });
    client.send(message).await.map(drop)
}

async fn answer_permission(
    client: &mut Client,
    session: &SessionId,
    request: &PermissionRequest,
    answer: PermissionAnswer,
) -> Result<(), ClientError> {
    let Some(option_id) = choose(request, answer) else {
        note_stderr(&format!("no {answer:?} option offered for {}", request.tool));
        return Ok(());
    };
    let message = ControlMessage::PermissionResponse(control::PermissionResponse {
        session_id: session.clone(),
        request_id: request.request_id.clone(),
        option_id,
    });
    client.send(message).await.map(drop)
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
