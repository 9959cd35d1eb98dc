//! `terminull self-check`: exercises the protocol crate end to end in-process —
//! schema generation, every block type through the NDJSON codec and the adapter
//! block validator, the contract check, and codec recovery after bad lines — so a
//! user can tell in one command that this build speaks the protocol it claims.

use bytes::BytesMut;
use serde::Serialize;
use serde_json::{Value, json};
use terminull_protocol::adapter::{self, check_declaration};
use terminull_protocol::ndjson::{LineError, NdjsonCodec};
use terminull_protocol::{blocks, control, relay, samples, schema};
use tokio_util::codec::{Decoder, Encoder};

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Short name of what was checked.
    pub name: &'static str,
    /// True when it held.
    pub ok: bool,
    /// What was seen, for a person.
    pub detail: String,
}

/// All checks, in the order they ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The adapter protocol version of this build.
    pub protocol_version: u32,
    /// Each check.
    pub checks: Vec<Check>,
}

impl Report {
    /// True when every check held.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// Why a check failed; its text is the check's detail.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// Encoding or decoding NDJSON failed.
    #[error(transparent)]
    Codec(#[from] std::io::Error),
    /// A line the codec should have decoded was refused.
    #[error(transparent)]
    Line(#[from] LineError),
    /// A block the validator should have accepted was refused.
    #[error(transparent)]
    Block(#[from] blocks::BlockError),
    /// A control message the parser should have accepted was refused.
    #[error(transparent)]
    Control(#[from] control::ControlError),
    /// The protocol crate answered, but not as it should have.
    #[error("{0}")]
    Unexpected(String),
}

fn check(name: &'static str, outcome: Result<String, Failure>) -> Check {
    match outcome {
        Ok(detail) => Check { name, ok: true, detail },
        Err(failure) => Check { name, ok: false, detail: failure.to_string() },
    }
}

/// Runs every check.
pub fn run() -> Report {
    Report {
        protocol_version: adapter::PROTOCOL_VERSION,
        checks: vec![
            check("schemas", schemas()),
            check("blocks", blocks_through_codec()),
            check("contract check", contract_check()),
            check("codec recovery", codec_recovery()),
            check("control messages", control_messages()),
        ],
    }
}

fn schemas() -> Result<String, Failure> {
    let files = schema::generate();
    for (name, text) in &files {
        let v: Value = serde_json::from_str(text).map_err(|e| Failure::Unexpected(format!("{name}: not JSON: {e}")))?;
        if name.ends_with(".schema.json") && v.get("$schema").is_none() {
            return Err(Failure::Unexpected(format!("{name}: no $schema")));
        }
    }
    Ok(format!("{} schema files generated ({} adapter methods)", files.len(), adapter::METHODS.len()))
}

fn blocks_through_codec() -> Result<String, Failure> {
    let sent = samples::one_of_each_block(1_767_225_600.25);
    let mut codec = NdjsonCodec::default();
    let mut wire = BytesMut::new();
    for b in &sent {
        codec.encode(b, &mut wire)?;
    }
    let mut received = Vec::new();
    while let Some(line) = codec.decode_eof(&mut wire)? {
        received.push(blocks::validate(line?)?);
    }
    if received != sent {
        return Err(Failure::Unexpected(format!("{} blocks sent, {} came back different", sent.len(), received.len())));
    }
    Ok(format!("all {} block types survive NDJSON and validation", blocks::BLOCK_TYPES.len()))
}

fn contract_check() -> Result<String, Failure> {
    let mut decl = json!({
        "protocol_version": adapter::PROTOCOL_VERSION, "agent_id": "echo", "display_name": "Echo",
        "cap_images": false, "cap_documents": false, "cap_thinking": false, "cap_permissions": false,
        "cap_subagents": false, "cap_interrupt": false, "cap_input_during_turn": false, "cap_terminal": false,
        "provides_models": false, "provides_usage": false, "lease": "per_turn"
    });
    check_declaration(&decl).map_err(|v| Failure::Unexpected(format!("a valid declaration was refused: {v:?}")))?;
    for field in ["provides_usage", "agent_id", "cap_thinking"] {
        decl.as_object_mut().map(|m| m.remove(field));
    }
    let violations = check_declaration(&decl)
        .err()
        .ok_or_else(|| Failure::Unexpected("a declaration missing three fields was accepted".into()))?;
    let mut named: Vec<_> = violations.iter().map(|v| v.field.as_str()).collect();
    named.sort_unstable();
    if named != ["agent_id", "cap_thinking", "provides_usage"] {
        return Err(Failure::Unexpected(format!("expected three named violations, got {named:?}")));
    }
    Ok("valid declaration accepted; three missing fields reported by name".into())
}

fn codec_recovery() -> Result<String, Failure> {
    let mut codec = NdjsonCodec::new(64);
    let mut input = BytesMut::new();
    input.extend_from_slice(&[b'x'; 100]);
    input.extend_from_slice(b"\nnot json\n{\"ok\":true}\n");
    let mut items = Vec::new();
    while let Some(item) = codec.decode_eof(&mut input)? {
        items.push(item);
    }
    match items.as_slice() {
        [Err(LineError::TooLong { .. }), Err(LineError::NotJson { .. }), Ok(v)] if v["ok"] == json!(true) => {
            Ok("over-long and non-JSON lines are reported and skipped".into())
        }
        other => Err(Failure::Unexpected(format!("unexpected decode: {other:?}"))),
    }
}

fn control_messages() -> Result<String, Failure> {
    match control::parse(json!({"type": "from_the_future"})) {
        Err(control::ControlError::UnknownType { .. }) => {}
        other => {
            return Err(Failure::Unexpected(format!("unknown control type not flagged as unknown: {other:?}")));
        }
    }
    control::parse(json!({"type": "interrupt", "session_id": "s1"}))?;
    Ok(format!(
        "{} control message types, {} relay frame types",
        control::CONTROL_TYPES.len(),
        relay::FRAME_TYPES.len()
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_self_check_passes_on_this_build() {
        let report = super::run();
        assert!(report.passed(), "{report:#?}");
        assert_eq!(report.checks.len(), 5);
    }
}
