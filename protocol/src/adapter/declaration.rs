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

/// The newest adapter protocol version this crate speaks: what adapters built on the SDK
/// declare (`protocol_version`). Version 2 lets an adapter stream `text`/`thinking` as
/// appends (chunks with an `offset`); version 1 adapters send full-text snapshots only.
pub const PROTOCOL_VERSION: u32 = 2;

/// The oldest adapter protocol version the bridge still accepts. It greets every adapter
/// with it (`initialize.protocol_version`), so adapters written against version 1, which
/// refuse any other number there, keep working unchanged.
pub const OLDEST_PROTOCOL_VERSION: u32 = 1;

/// True for a version the bridge accepts in a declaration: 1 or 2. Anything else is
/// refused at handshake with an error naming both.
pub fn is_supported_version(version: u64) -> bool {
    (u64::from(OLDEST_PROTOCOL_VERSION)..=u64::from(PROTOCOL_VERSION)).contains(&version)
}

/// The versions the bridge accepts, for error messages: `1 or 2`.
fn supported_versions() -> String {
    let all: Vec<String> = (OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).map(|v| v.to_string()).collect();
    all.join(" or ")
}

/// What an adapter is and can do. Every capability flag is required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Declaration {
    /// The adapter protocol version it speaks: `1` (full-text snapshots only) or `2`
    /// (appends allowed); this bridge accepts both.
    #[schemars(extend("enum" = [1, 2]))]
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
    /// The version of the agent CLI this adapter was checked against (`"0.171.0"`).
    /// Absent: the adapter was never run against the real CLI (built from its
    /// documentation only), and front ends say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_against: Option<String>,
    /// Every capability flag, each stated explicitly.
    #[serde(flatten)]
    pub capabilities: Capabilities,
    /// How the adapter holds the agent between turns (docs/adapter-protocol.md#55-lease).
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

impl Declaration {
    /// What front ends say about how this adapter was verified: `None` when it drives no
    /// CLI (nothing to verify), else "verified against <version>" or "not verified
    /// against the real binary". `terminull agents` and `terminull adapter check` print it.
    pub fn verification_note(&self) -> Option<String> {
        self.cli_binary.as_ref()?;
        Some(match &self.verified_against {
            Some(version) => format!("verified against {version}"),
            None => "not verified against the real binary".to_owned(),
        })
    }
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
    /// How much the agent may do without asking: an agent-specific mode name
    /// (Claude Code `default`/`acceptEdits`/`plan`/`bypassPermissions`, Codex
    /// `read-only`/`workspace-write`/`full-access`, …).
    PermissionMode,
}

impl InitParam {
    /// Every init param, in the spec's order.
    pub const ALL: [InitParam; 7] = [
        InitParam::Cwd,
        InitParam::Model,
        InitParam::Binary,
        InitParam::ResumeSessionId,
        InitParam::OnSessionId,
        InitParam::Effort,
        InitParam::PermissionMode,
    ];
}

/// A handoff hook (docs/adapter-protocol.md#54-handoff-hooks), plus `release` for persistent adapters.
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

/// One problem with a declaration, naming the field. Displays as one sentence:
/// `provides_usage must be set explicitly to true or false`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct ContractViolation {
    /// The declaration field at fault (`(declaration)` for the whole value).
    pub field: String,
    /// What is wrong with it, as a predicate on the field ("must be …", "is required").
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
const FIELD_RULES: [(&str, bool, Shape); 19] = [
    ("protocol_version", true, Shape::Version),
    ("agent_id", true, Shape::AgentId),
    ("display_name", true, Shape::NonEmptyString),
    ("cli_binary", false, Shape::OptionalString),
    ("adapter_version", false, Shape::OptionalString),
    ("verified_against", false, Shape::OptionalString),
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
            format!("must be a JSON object, found {}", json_type_name(value)),
        )]);
    };
    let mut violations = Vec::new();
    for (field, required, shape) in FIELD_RULES {
        match map.get(field) {
            None | Some(Value::Null) if required => violations.push(missing(field, shape)),
            // Optional strings may be null (the schema says string or null); lists may not.
            None => {}
            Some(Value::Null) if matches!(shape, Shape::OptionalString) => {}
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
    serde_json::from_value(value.clone()).map_err(|e| vec![ContractViolation::new("(declaration)", e.to_string())])
}

fn missing(field: &str, shape: Shape) -> ContractViolation {
    let problem = match shape {
        Shape::Flag => "must be set explicitly to true or false".to_owned(),
        Shape::Lease => "must be set explicitly to \"per_turn\" or \"persistent\"".to_owned(),
        Shape::Version => format!("is required (this bridge speaks {})", supported_versions()),
        _ => "is required".to_owned(),
    };
    ContractViolation::new(field, problem)
}

fn check_shape(shape: Shape, v: &Value) -> Result<(), String> {
    let found = || format!("found {}", describe(v));
    match shape {
        Shape::Flag => v.as_bool().map(drop).ok_or_else(|| format!("must be true or false, {}", found())),
        Shape::Version => match v.as_u64() {
            Some(n) if is_supported_version(n) => Ok(()),
            Some(n) => Err(format!("must be {} (the versions this bridge speaks), found {n}", supported_versions())),
            None => Err(format!("must be an integer, {}", found())),
        },
        Shape::AgentId => match v.as_str() {
            Some(s) if is_valid_agent_id(s) => Ok(()),
            Some(s) => Err(format!("must be 1-64 of a-z 0-9 _ -, starting with a letter or digit, found {s:?}")),
            None => Err(format!("must be a string, {}", found())),
        },
        Shape::NonEmptyString => match v.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(()),
            Some(_) => Err("must not be blank".to_owned()),
            None => Err(format!("must be a string, {}", found())),
        },
        Shape::OptionalString => v.as_str().map(drop).ok_or_else(|| format!("must be a string or null, {}", found())),
        Shape::Lease => serde_json::from_value::<LeaseKind>(v.clone())
            .map(drop)
            .map_err(|_| format!("must be \"per_turn\" or \"persistent\", {}", found())),
        Shape::InitParams => check_list::<InitParam>(v),
        Shape::HandoffHooks => check_list::<HandoffHook>(v),
    }
}

fn check_list<T: serde::de::DeserializeOwned + PartialEq + Serialize>(v: &Value) -> Result<(), String> {
    let Some(items) = v.as_array() else {
        return Err(format!("must be an array, found {}", describe(v)));
    };
    let mut seen: Vec<T> = Vec::new();
    for item in items {
        match serde_json::from_value::<T>(item.clone()) {
            Ok(t) if seen.contains(&t) => return Err(format!("must not list {item} twice")),
            Ok(t) => seen.push(t),
            Err(e) => {
                return Err(format!("must not contain {item}: {}", crate::blocks::strip_position(&e.to_string())));
            }
        }
    }
    Ok(())
}

/// A value as an error message shows it: its JSON type, then the value itself.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        _ => format!("{} {v}", json_type_name(v)),
    }
}

/// 1–64 of `a-z 0-9 _ -`, starting with a letter or digit.
pub fn is_valid_agent_id(s: &str) -> bool {
    let bytes = s.as_bytes();
    (1..=64).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> Value {
        json!({
            "protocol_version": 1,
            "agent_id": "echo",
            "display_name": "Echo",
            "cli_binary": "echo",
            "cap_images": false, "cap_documents": false, "cap_thinking": false, "cap_permissions": false,
            "cap_subagents": false, "cap_interrupt": true, "cap_input_during_turn": false, "cap_terminal": false,
            "provides_models": false, "provides_usage": false,
            "lease": "per_turn",
            "accepted_init_params": ["cwd", "on_session_id"],
            "handoff_hooks": []
        })
    }

    fn without(mut v: Value, fields: &[&str]) -> Value {
        for f in fields {
            v.as_object_mut().unwrap().remove(*f);
        }
        v
    }

    fn with(mut v: Value, field: &str, value: Value) -> Value {
        v[field] = value;
        v
    }

    fn fields(r: Result<Declaration, Vec<ContractViolation>>) -> Vec<String> {
        r.expect_err("should be refused").into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn valid_declaration_is_accepted() {
        let d = check_declaration(&valid()).unwrap();
        assert_eq!(d.agent_id.as_str(), "echo");
        assert!(d.capabilities.cap_interrupt);
        assert_eq!(d.accepted_init_params, vec![InitParam::Cwd, InitParam::OnSessionId]);
    }

    #[test]
    fn missing_provides_usage_agent_id_and_a_cap_flag_yield_three_violations_naming_them() {
        let bad = without(valid(), &["provides_usage", "agent_id", "cap_thinking"]);
        let violations = check_declaration(&bad).unwrap_err();
        let mut named: Vec<_> = violations.iter().map(|v| v.field.as_str()).collect();
        named.sort();
        assert_eq!(named, ["agent_id", "cap_thinking", "provides_usage"]);
        let usage = violations.iter().find(|v| v.field == "provides_usage").unwrap();
        assert_eq!(usage.to_string(), "provides_usage must be set explicitly to true or false");
    }

    #[test]
    fn null_counts_as_missing_for_a_required_flag() {
        assert_eq!(fields(check_declaration(&with(valid(), "provides_models", Value::Null))), ["provides_models"]);
    }

    #[test]
    fn each_malformed_field_is_named() {
        let cases: Vec<(&str, Value)> = vec![
            ("protocol_version", json!(3)),
            ("protocol_version", json!(0)),
            ("protocol_version", json!("1")),
            ("agent_id", json!("Echo")),
            ("agent_id", json!("")),
            ("agent_id", json!("-echo")),
            ("agent_id", json!("x".repeat(65))),
            ("agent_id", json!(7)),
            ("display_name", json!("  ")),
            ("display_name", json!(false)),
            ("cli_binary", json!(["echo"])),
            ("verified_against", json!(1.2)),
            ("cap_images", json!("yes")),
            ("cap_terminal", json!(1)),
            ("provides_models", json!("false")),
            ("lease", json!("sometimes")),
            ("accepted_init_params", json!(["cwd", "colour"])),
            ("accepted_init_params", json!(["cwd", "cwd"])),
            ("accepted_init_params", json!("cwd")),
            ("handoff_hooks", json!(["make_transcript_mirror"])),
            ("handoff_hooks", Value::Null),
            ("accepted_init_params", Value::Null),
        ];
        for (field, value) in cases {
            let got = fields(check_declaration(&with(valid(), field, value.clone())));
            assert_eq!(got, [field], "{field} = {value}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let bad = json!({"agent_id": "Bad Id", "cap_images": "no", "lease": 3, "extra": true});
        let got = fields(check_declaration(&bad));
        // protocol_version, agent_id, display_name, 8 caps (1 malformed, 7 missing), 2 surfaces, lease.
        assert_eq!(got.len(), 14, "{got:?}");
        assert!(got.contains(&"cap_images".to_owned()) && got.contains(&"lease".to_owned()));
    }

    #[test]
    fn non_object_is_refused_with_one_violation() {
        let got = check_declaration(&json!([1, 2])).unwrap_err();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].to_string(), "(declaration) must be a JSON object, found array");
    }

    #[test]
    fn optional_strings_may_be_null() {
        assert!(check_declaration(&with(valid(), "cli_binary", Value::Null)).is_ok());
        assert!(check_declaration(&with(valid(), "verified_against", Value::Null)).is_ok());
    }

    #[test]
    fn verified_against_is_optional_and_kept() {
        assert_eq!(check_declaration(&valid()).unwrap().verified_against, None);
        let d = check_declaration(&with(valid(), "verified_against", json!("0.171.0"))).unwrap();
        assert_eq!(d.verified_against.as_deref(), Some("0.171.0"));
        assert_eq!(serde_json::to_value(&d).unwrap()["verified_against"], json!("0.171.0"));
    }

    #[test]
    fn unknown_extra_fields_are_allowed() {
        assert!(check_declaration(&with(valid(), "future_flag", json!(true))).is_ok());
    }

    #[test]
    fn rule_table_names_every_field_of_the_type_exactly_once() {
        let schema = schemars::schema_for!(Declaration);
        let props: std::collections::BTreeSet<_> =
            schema.get("properties").unwrap().as_object().unwrap().keys().cloned().collect();
        let rules: std::collections::BTreeSet<_> = known_fields().map(str::to_owned).collect();
        assert_eq!(props, rules);
        assert_eq!(known_fields().count(), rules.len());
        let required: std::collections::BTreeSet<_> = schema
            .get("required")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(required, required_fields().map(str::to_owned).collect());
    }

    #[test]
    fn schema_lists_the_protocol_versions_this_crate_accepts() {
        let schema = schemars::schema_for!(Declaration);
        let listed = &schema.as_value()["properties"]["protocol_version"]["enum"];
        let accepted: Vec<u32> = (OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).collect();
        assert_eq!(listed, &json!(accepted));
    }

    #[test]
    fn versions_one_and_two_are_accepted_and_others_named_with_both() {
        for version in [1, 2] {
            let d = check_declaration(&with(valid(), "protocol_version", json!(version))).unwrap();
            assert_eq!(d.protocol_version, version);
        }
        let refused = check_declaration(&with(valid(), "protocol_version", json!(3))).unwrap_err();
        assert_eq!(
            refused[0].to_string(),
            "protocol_version must be 1 or 2 (the versions this bridge speaks), found 3"
        );
        let missing = check_declaration(&without(valid(), &["protocol_version"])).unwrap_err();
        assert_eq!(missing[0].to_string(), "protocol_version is required (this bridge speaks 1 or 2)");
    }
}
