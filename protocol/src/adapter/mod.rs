//! The adapter protocol: JSON-RPC 2.0 between the bridge and an adapter executable,
//! one message per line on the child's stdin/stdout (see [`crate::ndjson`]).
//!
//! Flow:
//! - bridge → `initialize` → adapter answers with its [`Declaration`]; the bridge runs
//!   [`check_declaration`] on it and refuses the adapter on any violation.
//! - class-level calls on short-lived processes: `detect`, `list_models` (the picker
//!   is filled before a session exists), `scan_external_sessions`,
//!   `is_cwd_externally_owned`, `mirror`, `latest_sid_for_cwd`, `terminal_resume_command`.
//! - a session: `start` → agent_info; then per turn `send`, followed by `stream`
//!   notifications that end with exactly one `session_end` block; `interrupt`,
//!   `permission_response` while a turn runs; `session_id` whenever the agent's own id
//!   is known or changes; `release` hands a persistent agent back; `stop` ends it.
//!
//! Every method is a type implementing [`AdapterRequest`] or [`AdapterNotification`],
//! keyed by its name constant, so calls are typed end to end.

mod declaration;

pub use declaration::{
    ContractViolation, Declaration, HandoffHook, InitParam, LeaseKind, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION,
    check_declaration, is_supported_version, is_valid_agent_id, known_fields, required_fields,
};

use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::blocks::{AgentInfo, Block, Usage, UserMessage};
use crate::ids::{AgentSessionId, PermissionRequestId, SessionId};
use crate::jsonrpc::{Notification, ParamsError, Request, RequestId, decode_params};

/// A request the bridge sends to an adapter.
pub trait AdapterRequest {
    /// The JSON-RPC method name.
    const METHOD: &'static str;
    /// The `params` object.
    type Params: Serialize + DeserializeOwned + JsonSchema;
    /// The `result` value.
    type Result: Serialize + DeserializeOwned + JsonSchema;
}

/// A notification an adapter sends to the bridge.
pub trait AdapterNotification {
    /// The JSON-RPC method name.
    const METHOD: &'static str;
    /// The `params` object.
    type Params: Serialize + DeserializeOwned + JsonSchema;
}

/// Who sends a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The bridge calls the adapter.
    BridgeToAdapter,
    /// The adapter notifies the bridge.
    AdapterToBridge,
}

/// When an adapter must implement a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "when")]
pub enum Requirement {
    /// Every adapter.
    Always,
    /// Only when the named declaration flag is true (`cap_interrupt`, `provides_models`, …).
    Flag {
        /// The flag's wire name.
        flag: &'static str,
    },
    /// Only when the declaration lists this handoff hook.
    Hook,
    /// Only when the declaration accepts the named init param (`on_session_id`).
    InitParam {
        /// The init param's wire name.
        param: &'static str,
    },
}

/// One row of the method table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MethodInfo {
    /// The JSON-RPC method name.
    pub name: &'static str,
    /// `true` for a notification (no id, no response).
    pub notification: bool,
    /// Who sends it.
    pub direction: Direction,
    /// When an adapter must implement it.
    pub requirement: Requirement,
}

/// Per-method deadline the bridge applies while waiting for a response; `None` for
/// the notifications, which get no response.
///
/// A turn is not bounded by any of these: `send` only acknowledges, and the running
/// turn is watched by the bridge's liveness watchdog instead of a timer.
pub fn response_timeout(method: &str) -> Option<Duration> {
    let secs = match method {
        Stream::METHOD | SessionIdNotification::METHOD => return None,
        // npx / uvx cold starts of agent CLIs are slow (ACP's test kit allows 30–120 s).
        Initialize::METHOD | Start::METHOD => 120,
        Detect::METHOD | ScanExternalSessions::METHOD | ListModels::METHOD => 30,
        Stop::METHOD | Release::METHOD => 15,
        // Everything else is a control call: answered promptly or the adapter is stuck.
        _ => 20,
    };
    Some(Duration::from_secs(secs))
}

impl Request {
    /// Builds a typed request.
    pub fn typed<M: AdapterRequest>(id: RequestId, params: &M::Params) -> Self {
        Request { id, method: M::METHOD.to_owned(), params: to_params(params) }
    }

    /// Decodes this request's params as method `M`'s, or says why not.
    pub fn params_as<M: AdapterRequest>(&self) -> Result<M::Params, ExtractError> {
        extract(&self.method, M::METHOD, &self.params)
    }
}

impl Notification {
    /// Builds a typed notification.
    pub fn typed<M: AdapterNotification>(params: &M::Params) -> Self {
        Notification { method: M::METHOD.to_owned(), params: to_params(params) }
    }

    /// Decodes this notification's params as method `M`'s, or says why not.
    pub fn params_as<M: AdapterNotification>(&self) -> Result<M::Params, ExtractError> {
        extract(&self.method, M::METHOD, &self.params)
    }
}

fn to_params<P: Serialize>(params: &P) -> serde_json::Value {
    // Serializing our own plain data types cannot fail (no maps with non-string keys).
    serde_json::to_value(params).unwrap_or(serde_json::Value::Null)
}

fn extract<P: DeserializeOwned>(got: &str, want: &'static str, params: &serde_json::Value) -> Result<P, ExtractError> {
    if got != want {
        return Err(ExtractError::MethodMismatch { expected: want, found: got.to_owned() });
    }
    decode_params(params).map_err(|problem| ExtractError::InvalidParams { method: want, problem })
}

/// Why a message could not be read as a given typed method.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The message is for another method; dispatchers try the next one.
    #[error("expected method {expected}, found {found}")]
    MethodMismatch {
        /// The method asked for.
        expected: &'static str,
        /// The message's method.
        found: String,
    },
    /// Right method, wrong params.
    #[error("invalid params for {method}: {problem}")]
    InvalidParams {
        /// The method.
        method: &'static str,
        /// Which field is wrong and how.
        problem: ParamsError,
    },
}

/// An empty object, `{}`: the params or result of methods that carry nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Empty {}

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct InitializeParams {
    /// The oldest protocol version the bridge accepts ([`OLDEST_PROTOCOL_VERSION`], 1):
    /// what an adapter written against version 1 checks for.
    pub protocol_version: u32,
    /// The newest protocol version the bridge accepts ([`PROTOCOL_VERSION`], 2); absent
    /// from a bridge that speaks `protocol_version` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_protocol_version: Option<u32>,
    /// The bridge's name and version, for the adapter's logs.
    pub bridge: PeerInfo,
    /// The init params the bridge can pass to `start`; the adapter accepts a subset.
    pub offered_init_params: Vec<InitParam>,
}

impl InitializeParams {
    /// What this bridge sends: it greets in the oldest version it accepts and names the
    /// newest, so adapters of either version find theirs.
    pub fn from_bridge(bridge: PeerInfo, offered_init_params: Vec<InitParam>) -> Self {
        Self {
            protocol_version: OLDEST_PROTOCOL_VERSION,
            newest_protocol_version: Some(PROTOCOL_VERSION),
            bridge,
            offered_init_params,
        }
    }

    /// True when the bridge accepts an adapter that speaks `version`.
    pub fn accepts(&self, version: u32) -> bool {
        (self.protocol_version..=self.newest_protocol_version.unwrap_or(self.protocol_version)).contains(&version)
    }

    /// The versions the bridge accepts, for an error message: `1`, or `1 to 2`.
    pub fn versions(&self) -> String {
        match self.newest_protocol_version {
            Some(newest) if newest != self.protocol_version => format!("{} to {newest}", self.protocol_version),
            _ => self.protocol_version.to_string(),
        }
    }
}

/// A peer's name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PeerInfo {
    /// Program name (`terminull`).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Result of `detect`: is the agent installed here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DetectResult {
    /// True when the agent can be started.
    pub installed: bool,
    /// The agent CLI's version (`--version` output, trimmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where the CLI was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why not installed (or why detection is unsure), for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Params of `start`: the session id plus only the init params the adapter accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StartParams {
    /// The terminull session this process serves.
    pub session_id: SessionId,
    /// Working directory for the agent (init param `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Model to use (init param `model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Path of the agent CLI to run instead of the one on PATH (init param `binary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The agent's own session to resume (init param `resume_session_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_session_id: Option<AgentSessionId>,
    /// Reasoning effort (`low`, `medium`, `high`, …; init param `effort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Permission mode, an agent-specific name (init param `permission_mode`). The
    /// adapter refuses a name it does not know with `invalid_params`, listing its modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
}

/// Result of `start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StartResult {
    /// The session's `agent_info` block body (the bridge stamps `ts` and `seq`).
    pub agent_info: AgentInfo,
}

/// Params of `stream`: one block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StreamParams {
    /// The block, without `seq` (the bridge assigns it).
    pub block: Block,
}

/// Params of `session_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SessionIdParams {
    /// The agent's own conversation id; passed back as `resume_session_id` after a restart.
    pub agent_session_id: AgentSessionId,
}

/// Params of `permission_response`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PermissionResponseParams {
    /// The `permission_request` answered.
    pub request_id: PermissionRequestId,
    /// The chosen option's `id`.
    pub option_id: String,
}

/// Result of `list_models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ListModelsResult {
    /// Models offered in the new-session picker.
    pub models: Vec<ModelInfo>,
}

/// One model an agent can run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ModelInfo {
    /// Passed back as the `model` init param.
    pub id: String,
    /// Shown in the picker.
    pub name: String,
    /// One line about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// True for the agent's default model.
    #[serde(default)]
    pub is_default: bool,
}

/// Params of `scan_external_sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ScanExternalSessionsParams {
    /// Only sessions of this working directory, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// At most this many, newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Result of `scan_external_sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ScanExternalSessionsResult {
    /// Sessions found in the agent's own store, newest first.
    pub sessions: Vec<ExternalSession>,
}

/// A session the agent's CLI started outside the bridge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ExternalSession {
    /// The agent's own session id.
    pub agent_session_id: AgentSessionId,
    /// The directory it ran in, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Title or first user message, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Last activity, Unix seconds.
    #[cfg_attr(test, proptest(strategy = "crate::arb::timestamp()"))]
    pub updated_at: f64,
    /// Number of messages, when cheap to know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_count: Option<u64>,
}

/// Params of `is_cwd_externally_owned`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct IsCwdExternallyOwnedParams {
    /// The working directory.
    pub cwd: String,
    /// The session in question, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<AgentSessionId>,
}

/// Result of `is_cwd_externally_owned`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct IsCwdExternallyOwnedResult {
    /// True when a native agent process (not one of the bridge's) drives it now.
    pub owned: bool,
    /// That process, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// Params of `mirror`: read the transcript of a terminal-owned session from a cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MirrorParams {
    /// The session's directory.
    pub cwd: String,
    /// The agent's session id.
    pub agent_session_id: AgentSessionId,
    /// Where the previous call stopped; absent to read from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Result of `mirror`. Read-only: the adapter never writes to the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MirrorResult {
    /// Blocks for the transcript entries after the cursor.
    #[cfg_attr(test, proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<Block>(), 0..4)"))]
    pub blocks: Vec<Block>,
    /// Pass back in the next call to continue from here (opaque to the bridge).
    pub cursor: String,
}

/// Params of `latest_sid_for_cwd`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LatestSidForCwdParams {
    /// The working directory.
    pub cwd: String,
}

/// Result of `latest_sid_for_cwd`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LatestSidForCwdResult {
    /// The newest session of that directory (the lineage head), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<AgentSessionId>,
}

/// Params of `terminal_resume_command`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TerminalResumeCommandParams {
    /// The agent's session to resume.
    pub agent_session_id: AgentSessionId,
    /// Its directory, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Result of `terminal_resume_command`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TerminalResumeCommandResult {
    /// Program and arguments (`["claude", "--resume", "…"]`).
    pub argv: Vec<String>,
    /// Directory to run it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

macro_rules! adapter_methods {
    (
        requests { $( $(#[$rdoc:meta])* $rty:ident = $rname:literal, $params:ty => $result:ty, $req:expr; )* }
        notifications { $( $(#[$ndoc:meta])* $nty:ident = $nname:literal, $nparams:ty, $nreq:expr; )* }
    ) => {
        $(
            $(#[$rdoc])*
            #[derive(Debug, Clone, Copy)]
            pub enum $rty {}
            impl AdapterRequest for $rty {
                const METHOD: &'static str = $rname;
                type Params = $params;
                type Result = $result;
            }
        )*
        $(
            $(#[$ndoc])*
            #[derive(Debug, Clone, Copy)]
            pub enum $nty {}
            impl AdapterNotification for $nty {
                const METHOD: &'static str = $nname;
                type Params = $nparams;
            }
        )*

        /// Every method of the adapter protocol.
        pub const METHODS: &[MethodInfo] = &[
            $( MethodInfo { name: $rname, notification: false, direction: Direction::BridgeToAdapter, requirement: $req }, )*
            $( MethodInfo { name: $nname, notification: true, direction: Direction::AdapterToBridge, requirement: $nreq }, )*
        ];

        /// `(method, "params" | "result", JSON Schema)` for every method.
        pub fn method_schemas() -> Vec<(&'static str, &'static str, schemars::Schema)> {
            vec![
                $(
                    ($rname, "params", schemars::schema_for!($params)),
                    ($rname, "result", schemars::schema_for!($result)),
                )*
                $( ($nname, "params", schemars::schema_for!($nparams)), )*
            ]
        }
    };
}

adapter_methods! {
    requests {
        /// `initialize`: version handshake; the result is the adapter's declaration.
        Initialize = "initialize", InitializeParams => Declaration, Requirement::Always;
        /// `detect`: is the agent installed here.
        Detect = "detect", Empty => DetectResult, Requirement::Always;
        /// `start`: begin the session; returns the agent_info body.
        Start = "start", StartParams => StartResult, Requirement::Always;
        /// `send`: one user message; acknowledged at once, the turn streams after.
        Send = "send", UserMessage => Empty, Requirement::Always;
        /// `interrupt`: stop the running turn; it ends with `session_end` reason `interrupted`.
        Interrupt = "interrupt", Empty => Empty, Requirement::Flag { flag: "cap_interrupt" };
        /// `permission_response`: the user's answer to a `permission_request`.
        PermissionResponse = "permission_response", PermissionResponseParams => Empty, Requirement::Flag { flag: "cap_permissions" };
        /// `list_models`: models for the picker.
        ListModels = "list_models", Empty => ListModelsResult, Requirement::Flag { flag: "provides_models" };
        /// `get_usage`: cost and token totals of the session.
        GetUsage = "get_usage", Empty => Usage, Requirement::Flag { flag: "provides_usage" };
        /// `stop`: end the session and release the agent; the process exits after answering.
        Stop = "stop", Empty => Empty, Requirement::Always;
        /// `scan_external_sessions`: sessions the agent's CLI started outside the bridge.
        ScanExternalSessions = "scan_external_sessions", ScanExternalSessionsParams => ScanExternalSessionsResult, Requirement::Hook;
        /// `is_cwd_externally_owned`: does a native agent process drive this directory now.
        IsCwdExternallyOwned = "is_cwd_externally_owned", IsCwdExternallyOwnedParams => IsCwdExternallyOwnedResult, Requirement::Hook;
        /// `mirror`: read-only tail of a terminal-owned session's transcript.
        Mirror = "mirror", MirrorParams => MirrorResult, Requirement::Hook;
        /// `latest_sid_for_cwd`: the lineage head after a terminal hand-back.
        LatestSidForCwd = "latest_sid_for_cwd", LatestSidForCwdParams => LatestSidForCwdResult, Requirement::Hook;
        /// `terminal_resume_command`: the command that continues the session in a terminal.
        TerminalResumeCommand = "terminal_resume_command", TerminalResumeCommandParams => TerminalResumeCommandResult, Requirement::Hook;
        /// `release`: a persistent adapter lets go of the agent between turns so a terminal can take over.
        Release = "release", Empty => Empty, Requirement::Hook;
    }
    notifications {
        /// `stream`: one block of the session.
        Stream = "stream", StreamParams, Requirement::Always;
        /// `session_id`: the agent's own session id (the spec's on_session_id).
        SessionIdNotification = "session_id", SessionIdParams, Requirement::InitParam { param: "on_session_id" };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_follow_the_policy_table() {
        let secs = |m: &str| response_timeout(m).map(|d| d.as_secs());
        let cases = [
            ("initialize", Some(120)),
            ("start", Some(120)),
            ("detect", Some(30)),
            ("list_models", Some(30)),
            ("scan_external_sessions", Some(30)),
            ("stop", Some(15)),
            ("release", Some(15)),
            ("send", Some(20)),
            ("interrupt", Some(20)),
            ("mirror", Some(20)),
            ("some_future_method", Some(20)),
            ("stream", None),
            ("session_id", None),
        ];
        for (method, want) in cases {
            assert_eq!(secs(method), want, "{method}");
        }
    }

    #[test]
    fn gated_methods_name_a_real_flag_or_init_param() {
        let flags: Vec<_> =
            crate::capabilities::CAP_FLAGS.iter().chain(crate::capabilities::SURFACE_FLAGS.iter()).collect();
        for m in METHODS {
            match m.requirement {
                Requirement::Flag { flag } => assert!(flags.contains(&&flag), "{}: {flag}", m.name),
                Requirement::InitParam { param } => {
                    let p: InitParam = serde_json::from_value(serde_json::json!(param)).unwrap();
                    assert!(InitParam::ALL.contains(&p));
                }
                Requirement::Hook => {
                    let h: Result<HandoffHook, _> = serde_json::from_value(serde_json::json!(m.name));
                    assert!(h.is_ok(), "{} is gated on a hook but is not one", m.name);
                }
                Requirement::Always => {}
            }
        }
    }
}
