//! What the bridge answers (bridge → app): [`BridgeMessage`] on the transports that
//! carry blocks in the clear, and the [`Reply`] to a control message with its
//! [`ReplyResult`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::blocks::Block;
use crate::ids::{AgentId, SessionId};

/// What the bridge sends a client on the transports that carry blocks in the clear:
/// the local socket and the in-process path. (The relay and the LAN server carry the
/// same blocks sealed in the relay's `block` envelopes, docs/relay.md#block.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BridgeMessage {
    /// One block of a session the client follows.
    Block {
        /// The session.
        session_id: SessionId,
        /// The block, with its `seq`.
        block: Block,
        /// True for older history sent after `replay_done` (a resume by `since_ts`);
        /// merge it by `seq`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replay: bool,
    },
    /// The replayed part of a resume is complete; live blocks follow.
    ReplayDone {
        /// The session.
        session_id: SessionId,
        /// The highest `seq` sent so far, when any block was sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_seq: Option<u64>,
    },
    /// Output of a terminal the client follows (docs/terminals.md).
    TerminalOutput(crate::terminal::TerminalOutput),
    /// A terminal the client follows ended.
    TerminalExit(crate::terminal::TerminalExit),
    /// The answer to one control message.
    Reply(
        #[cfg_attr(
            test,
            proptest(strategy = "proptest::strategy::Strategy::boxed(proptest::prelude::any::<Reply>())")
        )]
        Reply,
    ),
}

/// The answer to a control message, carrying its `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Reply {
    /// The control message's `id`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `"status": "ok"` with a `result`, or `"status": "error"` with an `error`.
    #[serde(flatten)]
    pub outcome: ReplyOutcome,
}

/// Success or failure of a control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ReplyOutcome {
    /// It was done.
    Ok {
        /// What it produced.
        result: ReplyResult,
    },
    /// It was refused or failed.
    Error {
        /// Why.
        error: ReplyError,
    },
    /// The link refused the control message before dispatching it: nothing ran
    /// (docs/control-messages.md#refused). Only a device's encrypted link sends it.
    Refused {
        /// Why, as a code.
        reason: RefusalReason,
        /// The counter of the control's sealed body (the last 8 bytes of its nonce,
        /// readable without opening it), when the body decoded that far: how a device
        /// finds which of its controls was refused when `id` is absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counter: Option<u64>,
        /// A sentence for a person.
        message: String,
    },
}

/// Why a device's link refused a control message without dispatching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// The body's counter is at or below the last one the link accepted: a replayed
    /// (or late, reordered) control.
    Replayed,
    /// The body did not open: tampered, not base64, or sealed under other keys.
    BadSeal,
    /// The envelope names another device, or its signature does not verify.
    BadSignature,
    /// The sealed message names a session other than the envelope's `session_id`
    /// (or one of the two names none): the relay's resume-token check would not
    /// cover the session it drives.
    SessionMismatch,
    /// The device was revoked; the link closes after this reply.
    Revoked,
    /// Too many refusals on this link in a short time; later ones get no reply.
    RateLimited,
}

impl RefusalReason {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Replayed => "replayed",
            RefusalReason::BadSeal => "bad_seal",
            RefusalReason::BadSignature => "bad_signature",
            RefusalReason::SessionMismatch => "session_mismatch",
            RefusalReason::Revoked => "revoked",
            RefusalReason::RateLimited => "rate_limited",
        }
    }
}

/// Why a control message failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ReplyError {
    /// The kind of failure.
    pub code: ReplyErrorCode,
    /// A sentence for a person, naming what is wrong.
    pub message: String,
}

/// Kinds of failure of a control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum ReplyErrorCode {
    /// A known message type with a missing or malformed field.
    InvalidMessage,
    /// No such agent is registered.
    UnknownAgent,
    /// No such session.
    UnknownSession,
    /// The agent does not offer this (e.g. `list_models` without `provides_models`).
    NotSupported,
    /// Not possible in the session's current state.
    Busy,
    /// The adapter or the agent failed.
    AgentFailed,
    /// `files`/`git`: the path is refused (outside the session's directory, `..`,
    /// absolute, a symlink that leads outside, a FIFO or device, a name that is not UTF-8).
    PathRefused,
    /// `files`/`git`: no such file, directory or branch.
    NotFound,
    /// `files`: the file is larger than the limit (the message says both sizes).
    TooLarge,
    /// `files`: the file is not text (binary, not UTF-8) or not a known image type.
    NotText,
    /// `files`: the file changed since it was read; `git`: the working tree has
    /// changes that forbid a switch.
    Conflict,
    /// `git`: git refused (a hook failed, no identity, a merge in progress, not a
    /// repository); the message carries git's own words.
    GitFailed,
    /// A bug or an I/O failure in the bridge.
    Internal,
    /// No such open terminal (never opened, or it ended).
    UnknownTerminal,
}

/// What a successful control message produced, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReplyResult {
    /// Taken; its effects arrive as blocks (user_message, interrupt, permission_response, stop_session,
    /// set_session_options).
    Accepted {},
    /// A session was started or attached; its blocks follow.
    SessionStarted {
        /// The new session.
        session_id: SessionId,
    },
    /// Answer to `list_sessions`.
    Sessions {
        /// Every session the bridge knows, newest first.
        sessions: Vec<SessionListing>,
    },
    /// Answer to `list_agents`.
    Agents {
        /// The registered agents.
        agents: Vec<AgentSummary>,
    },
    /// Answer to `list_models`.
    Models {
        /// The agent's models.
        models: Vec<crate::adapter::ModelInfo>,
    },
    /// Answer to `get_usage`.
    Usage {
        /// Token and cost totals.
        usage: crate::blocks::Usage,
    },
    /// Answer to a slash command the bridge handles itself (`/help`, `/status`, …).
    CommandOutput {
        /// The output, for a person.
        text: String,
    },
    /// Answer to `scan_external_sessions`.
    ExternalSessions {
        /// Sessions the agents' CLIs started outside the bridge, newest first.
        #[cfg_attr(
            test,
            proptest(
                strategy = "proptest::strategy::Strategy::boxed(proptest::collection::vec(proptest::prelude::any::<ExternalSessionListing>(), 0..3))"
            )
        )]
        sessions: Vec<ExternalSessionListing>,
    },
    /// Answer to `search_sessions`: the sessions that match, most recently active first.
    SessionMatches {
        /// Each matching session and where it matched.
        matches: Vec<crate::session_list::SessionMatch>,
    },
    /// Answer to `continue_in_terminal`: run this in a terminal to continue the
    /// conversation there.
    TerminalCommand {
        /// Program and arguments (`["claude", "--resume", "…"]`).
        argv: Vec<String>,
        /// The directory to run it in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// The same as one shell line, quoted, with a `cd` first when `cwd` is known.
        command: String,
    },
    /// Answer to `rtc_offer`: the bridge's SDP, whose candidates are its current LAN
    /// addresses.
    RtcAnswer {
        /// The SDP answer.
        sdp: String,
    },
    /// Answer to `files`.
    Files {
        /// What it produced, tagged by `op`.
        #[serde(flatten)]
        result: crate::files::FilesResult,
    },
    /// Answer to `git`.
    Git {
        /// What it produced, tagged by `op`.
        #[serde(flatten)]
        result: crate::git::GitResult,
    },
    /// Answer to `terminal_open` and `terminal_attach`: the terminal now followed.
    Terminal {
        /// The terminal.
        terminal: crate::terminal::TerminalListing,
    },
    /// Answer to `list_terminals`.
    Terminals {
        /// The open terminals, oldest first.
        terminals: Vec<crate::terminal::TerminalListing>,
    },
}

/// One session an agent's CLI started outside the bridge, as `scan_external_sessions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ExternalSessionListing {
    /// The agent whose CLI holds it.
    pub agent_id: AgentId,
    /// The session, as the agent's adapter described it.
    #[serde(flatten)]
    pub session: crate::adapter::ExternalSession,
}

/// An agent as listed to apps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct AgentSummary {
    /// The agent id.
    pub agent_id: AgentId,
    /// Its display name.
    pub display_name: String,
    /// Its CLI version, when detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether the new-session model picker can list its models.
    pub provides_models: bool,
    /// Whether its CLI was found on the bridge's computer; sent only when `false`
    /// (absent: installed). A session of a missing agent cannot start.
    #[serde(
        default = "crate::session_list::installed_default",
        skip_serializing_if = "crate::session_list::is_installed"
    )]
    pub installed: bool,
    /// Whether a permission mode can be chosen at start (`session_request`'s
    /// `permission_mode`; the adapter accepts the `permission_mode` init param).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub takes_permission_mode: bool,
    /// Whether `continue_in_terminal` works for its sessions (its adapter has the
    /// `terminal_resume_command` hook); the app offers "Continue in Terminal" only then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continues_in_terminal: bool,
    /// When it is missing: how to install it, one sentence (what `terminull agents` and
    /// `terminull doctor` say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hint: Option<String>,
}

/// One session as listed by `list_sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SessionListing {
    /// The session.
    pub session_id: SessionId,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its working directory.
    pub cwd: String,
    /// Where it stands.
    pub state: SessionState,
    /// The highest `seq` in its history.
    pub last_seq: u64,
    /// Its title, when known: the user's (`rename_session`), else the agent's, else
    /// its first prompt made one line of at most 60 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The newest message (the user's, or the agent's last reply) made one line of at
    /// most 140 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// When it last had a message or a turn ended, Unix seconds (its creation when
    /// nothing happened yet). Lists sort by it, newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, proptest(strategy = "proptest::option::of(crate::arb::timestamp())"))]
    pub last_activity: Option<f64>,
    /// What it waits for from the user now, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<crate::session_list::Attention>,
    /// Archived by `archive_session`; absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// Where it was started, when known (sessions from before this field have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::session_list::SessionOrigin>,
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Waiting for a message.
    Idle,
    /// A turn runs.
    Running,
    /// A turn waits for the user's answer to a permission request.
    AwaitingPermission,
    /// The adapter is gone (crashed or stopped); the next message restarts it.
    Detached,
    /// A terminal drives the conversation: terminull mirrors it read-only and queues
    /// messages until the terminal goes idle (docs/session-handoff.md).
    Parked,
    /// Ended by `stop_session`.
    Stopped,
}

impl Reply {
    /// A success.
    pub fn ok(id: Option<String>, result: ReplyResult) -> Self {
        Self { id, outcome: ReplyOutcome::Ok { result } }
    }

    /// A refusal by the link ([`ReplyOutcome::Refused`]).
    pub fn refused(
        id: Option<String>,
        reason: RefusalReason,
        counter: Option<u64>,
        message: impl Into<String>,
    ) -> Self {
        Self { id, outcome: ReplyOutcome::Refused { reason, counter, message: message.into() } }
    }

    /// A failure.
    pub fn error(id: Option<String>, code: ReplyErrorCode, message: impl Into<String>) -> Self {
        Self { id, outcome: ReplyOutcome::Error { error: ReplyError { code, message: message.into() } } }
    }
}
