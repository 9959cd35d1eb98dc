//! The adapter's declaration (the `initialize` result) and the contract check the
//! bridge runs on it at handshake.
//!
//! The check is this protocol's equivalent of the original's `TypeError` at import:
//! an adapter that leaves a required declaration out is refused, never registered,
//! and told every problem at once, each naming its field.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::blocks::json_type_name;
use crate::capabilities::{CAP_FLAGS, Capabilities, SURFACE_FLAGS};
use crate::ids::AgentId;

/// What an adapter is and can do. Every capability flag is required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Declaration {
    /// The adapter protocol version it speaks; this bridge speaks `1`.
    #[schemars(extend("const" = 1))]
    pub protocol_version: u32,
    /// Unique id: 1–64 of `a-z 0-9 _ -`, starting with a letter or digit.
    pub agent_id: AgentId,
    /// Name shown to people ("Claude Code"); not blank.
    #[schemars(regex(pattern = r"\S"))]
    pub display_name: String,
    /// The agent CLI the default `detect` probes (`claude`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_binary: Option<String>,
    /// The adapter's own version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_version: Option<String>,
    /// Every capability flag, each stated explicitly.
    #[serde(flatten)]
    pub capabilities: Capabilities,
    /// How the adapter holds the agent between turns (developer-docs §2.5).
    pub lease: LeaseKind,
    /// Which of the offered init params `start` should receive; the others are withheld.
    #[serde(default)]
    #[schemars(extend("uniqueItems" = true))]
    pub accepted_init_params: Vec<InitParam>,
    /// The handoff hooks implemented; calling any other answers "method not found".
    #[serde(default)]
    #[schemars(extend("uniqueItems" = true))]
    pub handoff_hooks: Vec<HandoffHook>,
}

/// An init param the bridge can pass to `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum InitParam {
    /// Working directory.
    Cwd,
    /// Model id.
    Model,
    /// Path of the agent CLI.
    Binary,
    /// The agent's session id to resume.
    ResumeSessionId,
    /// The adapter will report the agent's session id with the `session_id` notification.
    OnSessionId,
    /// Reasoning effort.
    Effort,
}

impl InitParam {
    /// Every init param, in the spec's order.
    pub const ALL: [InitParam; 6] = [
        InitParam::Cwd,
        InitParam::Model,
        InitParam::Binary,
        InitParam::ResumeSessionId,
        InitParam::OnSessionId,
        InitParam::Effort,
    ];
}

/// A handoff hook (developer-docs §2.5), plus `release` for persistent adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum HandoffHook {
    /// Lists sessions started outside the bridge.
    ScanExternalSessions,
    /// Tells whether a native process drives a directory.
    IsCwdExternallyOwned,
    /// Reads a terminal-owned transcript (the spec's make_transcript_mirror).
    Mirror,
    /// Re-resolves the lineage head.
    LatestSidForCwd,
    /// Gives the command that resumes in a terminal.
    TerminalResumeCommand,
    /// Lets go of a persistent agent between turns.
    Release,
}

/// How an adapter holds its agent between turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum LeaseKind {
    /// A fresh agent process per turn; the CLI is free between turns.
    PerTurn,
    /// A long-lived agent process or server; must `release` before a terminal takes over.
    Persistent,
}

/// One problem with a declaration, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ContractViolation {
    /// The declaration field at fault.
    pub field: String,
    /// What is wrong with it, as a sentence ending in what to do.
    pub problem: String,
}

impl ContractViolation {
    fn new(field: &str, problem: impl Into<String>) -> Self {
        Self { field: field.to_owned(), problem: problem.into() }
    }
}

/// The expected JSON shape of one declaration field.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Version,
    AgentId,
    NonEmptyString,
    OptionalString,
    Flag,
    Lease,
    InitParams,
    HandoffHooks,
}

/// Every declaration field with whether it is required and its shape.
/// A test checks that this table and the JSON Schema agree.
const FIELD_RULES: [(&str, bool, Shape); 18] = [
    ("protocol_version", true, Shape::Version),
    ("agent_id", true, Shape::AgentId),
    ("display_name", true, Shape::NonEmptyString),
    ("cli_binary", false, Shape::OptionalString),
    ("adapter_version", false, Shape::OptionalString),
    (CAP_FLAGS[0], true, Shape::Flag),
    (CAP_FLAGS[1], true, Shape::Flag),
    (CAP_FLAGS[2], true, Shape::Flag),
    (CAP_FLAGS[3], true, Shape::Flag),
    (CAP_FLAGS[4], true, Shape::Flag),
    (CAP_FLAGS[5], true, Shape::Flag),
    (CAP_FLAGS[6], true, Shape::Flag),
    (CAP_FLAGS[7], true, Shape::Flag),
    (SURFACE_FLAGS[0], true, Shape::Flag),
    (SURFACE_FLAGS[1], true, Shape::Flag),
    ("lease", true, Shape::Lease),
    ("accepted_init_params", false, Shape::InitParams),
    ("handoff_hooks", false, Shape::HandoffHooks),
];

/// The names of the fields a declaration must carry.
pub fn required_fields() -> impl Iterator<Item = &'static str> {
    FIELD_RULES.iter().filter(|(_, required, _)| *required).map(|(name, _, _)| *name)
}

/// The names of every field a declaration may carry.
pub fn known_fields() -> impl Iterator<Item = &'static str> {
    FIELD_RULES.iter().map(|(name, _, _)| *name)
}

/// Checks an adapter's `initialize` result and returns every violation at once.
///
/// Unknown extra fields are allowed (newer adapters may declare more).
pub fn check_declaration(value: &Value) -> Result<Declaration, Vec<ContractViolation>> {
    let Some(map) = value.as_object() else {
        return Err(vec![ContractViolation::new(
            "(declaration)",
            format!("the initialize result must be a JSON object, found {}", json_type_name(value)),
        )]);
    };
    let mut violations = Vec::new();
    for (field, required, shape) in FIELD_RULES {
        match map.get(field) {
            None | Some(Value::Null) if required => violations.push(missing(field, shape)),
            None | Some(Value::Null) => {}
            Some(v) => {
                if let Err(problem) = check_shape(shape, v) {
                    violations.push(ContractViolation::new(field, problem));
                }
            }
        }
    }
    if !violations.is_empty() {
        return Err(violations);
    }
    serde_json::from_value(value.clone())
        .map_err(|e| vec![ContractViolation::new("(declaration)", e.to_string())])
}

fn missing(field: &str, shape: Shape) -> ContractViolation {
    let problem = match shape {
        Shape::Flag => format!("{field} must be set explicitly to true or false"),
        Shape::Lease => format!("{field} must be set explicitly to \"per_turn\" or \"persistent\""),
        Shape::Version => format!("{field} is required (this bridge speaks {})", super::PROTOCOL_VERSION),
        _ => format!("{field} is required"),
    };
    ContractViolation::new(field, problem)
}

fn check_shape(shape: Shape, v: &Value) -> Result<(), String> {
    let found = || format!("found {} {v}", json_type_name(v));
    match shape {
        Shape::Flag => v.as_bool().map(drop).ok_or_else(|| format!("must be true or false, {}", found())),
        Shape::Version => match v.as_u64() {
            Some(n) if n == u64::from(super::PROTOCOL_VERSION) => Ok(()),
            Some(n) => Err(format!("protocol version {n} is not supported (this bridge speaks {})", super::PROTOCOL_VERSION)),
            None => Err(format!("must be an integer, {}", found())),
        },
        Shape::AgentId => match v.as_str() {
            Some(s) if is_valid_agent_id(s) => Ok(()),
            Some(s) => Err(format!("{s:?} is not a valid agent id: use 1-64 of a-z 0-9 _ -, starting with a letter or digit")),
            None => Err(format!("must be a string, {}", found())),
        },
        Shape::NonEmptyString => match v.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(()),
            Some(_) => Err("must not be empty".to_owned()),
            None => Err(format!("must be a string, {}", found())),
        },
        Shape::OptionalString => v.as_str().map(drop).ok_or_else(|| format!("must be a string, {}", found())),
        Shape::Lease => serde_json::from_value::<LeaseKind>(v.clone())
            .map(drop)
            .map_err(|_| format!("must be \"per_turn\" or \"persistent\", {}", found())),
        Shape::InitParams => check_list::<InitParam>(v),
        Shape::HandoffHooks => check_list::<HandoffHook>(v),
    }
}

fn check_list<T: serde::de::DeserializeOwned + PartialEq + Serialize>(v: &Value) -> Result<(), String> {
    let Some(items) = v.as_array() else {
        return Err(format!("must be an array, found {}", json_type_name(v)));
    };
    let mut seen: Vec<T> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match serde_json::from_value::<T>(item.clone()) {
            Ok(t) if seen.contains(&t) => return Err(format!("item {i} ({item}) is listed twice")),
            Ok(t) => seen.push(t),
            Err(e) => return Err(format!("item {i}: {}", crate::blocks::strip_position(&e.to_string()))),
        }
    }
    Ok(())
}

/// 1–64 of `a-z 0-9 _ -`, starting with a letter or digit.
pub fn is_valid_agent_id(s: &str) -> bool {
    let bytes = s.as_bytes();
    (1..=64).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}
