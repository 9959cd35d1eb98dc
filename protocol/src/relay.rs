//! Frames on the relay WebSocket (one JSON object per text message, tagged by `type`).
//!
//! Flow (developer-docs §1.4):
//! 1. bridge → relay `register` with its resumable session ids; the relay issues
//!    resume tokens to the bridge's connected, authenticated clients.
//! 2. app connects → relay sends `relay_status` (bridge online, agents, resume tokens).
//! 3. app → relay `control` envelopes (session_request, session_resume, …), forwarded
//!    to the bridge after the relay checks the resume token.
//! 4. bridge → relay → app `block` envelopes: the live blocks missed since the resume
//!    point first, then `replay_done`, then older history with `replay: true`.
//! 5. the app flushes history into the chat on `replay_done`.
//!
//! The relay reads only the plaintext routing fields; `enc` is sealed end to end
//! (docs/encryption.md) and the relay cannot open it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, BridgeId, DeviceId, SessionId};

/// Every frame of the relay protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RelayFrame {
    /// bridge → relay: announce the bridge and the sessions it can resume.
    Register(Register),
    /// relay → app: is the bridge there, what it runs, and the app's resume tokens.
    RelayStatus(RelayStatus),
    /// bridge → relay → app: one sealed block.
    Block(BlockEnvelope),
    /// bridge → relay → app: the live part of a resume is complete; history follows.
    ReplayDone(ReplayDone),
    /// app → relay → bridge: one signed control message.
    Control(ControlEnvelope),
    /// relay → either side: a frame was refused.
    Error(RelayError),
}

/// The relay protocol version this crate speaks (`register.protocol_version`).
pub const PROTOCOL_VERSION: u32 = 1;

/// Every frame `type` of the relay protocol.
pub const FRAME_TYPES: [&str; 6] = ["register", "relay_status", "block", "replay_done", "control", "error"];

impl RelayFrame {
    /// The wire value of `type`.
    pub fn frame_type(&self) -> &'static str {
        match self {
            RelayFrame::Register(_) => FRAME_TYPES[0],
            RelayFrame::RelayStatus(_) => FRAME_TYPES[1],
            RelayFrame::Block(_) => FRAME_TYPES[2],
            RelayFrame::ReplayDone(_) => FRAME_TYPES[3],
            RelayFrame::Control(_) => FRAME_TYPES[4],
            RelayFrame::Error(_) => FRAME_TYPES[5],
        }
    }
}

/// Body of `register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Register {
    /// The bridge's id.
    pub bridge_id: BridgeId,
    /// The relay protocol version the bridge speaks.
    pub protocol_version: u32,
    /// Sessions a client may resume.
    pub resumable_session_ids: Vec<SessionId>,
    /// The agents installed on the bridge's machine.
    pub agents: Vec<AgentSummary>,
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
}

/// Body of `relay_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct RelayStatus {
    /// True while the bridge holds its relay connection.
    pub bridge_online: bool,
    /// The bridge's agents (empty while it is offline).
    pub agents: Vec<AgentSummary>,
    /// A resume token per resumable session, for `control` envelopes.
    pub resume_tokens: BTreeMap<SessionId, String>,
}

/// Body of `block`: the envelope exactly as developer-docs §1.3 shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct BlockEnvelope {
    /// The session the block belongs to (routing).
    pub session_id: SessionId,
    /// The block's `type`, in plaintext: the relay routes on this only (e.g. to decide
    /// which blocks wake an offline app through the push hold-queue).
    pub block_type: String,
    /// base64(nonce12 ‖ AES-256-GCM ciphertext ‖ tag16) of the block's JSON.
    pub enc: String,
    /// The bridge's Ed25519 signature; the relay verifies it, then strips it before
    /// forwarding to the app (absent on the app side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    /// True for history backfill sent after `replay_done`.
    pub replay: bool,
    /// The block's original `ts` on replay, the send time on live blocks.
    #[cfg_attr(test, proptest(strategy = "crate::arb::timestamp()"))]
    pub server_ts: f64,
}

/// Body of `replay_done`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ReplayDone {
    /// The session resumed.
    pub session_id: SessionId,
    /// The highest `seq` sent before this frame, when any block was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
}

/// Body of `control`: a control message, signed by a paired device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ControlEnvelope {
    /// The sending device.
    pub device_id: DeviceId,
    /// The session the message drives, when it drives one (routing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The relay's resume token for that session, when resuming through the relay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// base64 of the control message (sealed under the session key once one exists;
    /// see docs/encryption.md for which messages travel sealed).
    pub body: String,
    /// The device's Ed25519 signature over the envelope (docs/encryption.md); the
    /// bridge verifies it against its own list of paired devices.
    pub sig: String,
}

/// Body of `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct RelayError {
    /// What kind of refusal.
    pub code: RelayErrorCode,
    /// Detail for a person.
    pub message: String,
    /// The session concerned, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
}

/// Why the relay refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum RelayErrorCode {
    /// Not a frame of this protocol, or a field is wrong.
    BadFrame,
    /// A signature did not verify.
    BadSignature,
    /// Missing, expired or foreign resume token.
    Unauthorized,
    /// No such session on this bridge.
    UnknownSession,
    /// The bridge is not connected.
    BridgeOffline,
    /// The frame is larger than the relay accepts.
    TooLarge,
    /// Too many frames; slow down.
    RateLimited,
}
