//! Frames on the relay WebSocket (one JSON object per text message, tagged by `type`).
//!
//! Flow (docs/relay.md#session-lifecycle):
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

pub use crate::control::AgentSummary;
use crate::control::Reply;
use crate::crypto::keys::PublicKeys;
use crate::crypto::pairing::{PairRequest, PairResponse};
use crate::ids::{BridgeId, DeviceId, SessionId};

macro_rules! relay_frames {
    ($( $(#[$doc:meta])* $tag:literal => $variant:ident($body:ty), )*) => {
        /// Every frame of the relay protocol.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[cfg_attr(test, derive(proptest_derive::Arbitrary))]
        #[serde(tag = "type")]
        pub enum RelayFrame {
            $( $(#[$doc])* #[serde(rename = $tag)] $variant($body), )*
        }

        /// Every frame `type` of the relay protocol, in the enum's order.
        pub const FRAME_TYPES: &[&str] = &[$($tag),*];

        impl RelayFrame {
            /// The wire value of `type`.
            pub fn frame_type(&self) -> &'static str {
                match self { $(Self::$variant(_) => $tag,)* }
            }
        }
    };
}

relay_frames! {
    /// relay → bridge or device, first frame of every connection: sign this.
    "challenge" => Challenge(Challenge),
    /// bridge → relay: prove the key, announce the sessions it can resume and its devices.
    "register" => Register(Register),
    /// relay → bridge: the registration was accepted.
    "registered" => Registered(Registered),
    /// bridge → relay: the device registry changed (paired or revoked).
    "devices" => Devices(Devices),
    /// bridge → relay: the sessions it can resume now (sessions started since
    /// `register`, e.g. over the LAN, become resumable through the relay too).
    "sessions" => Sessions(ResumableSessions),
    /// device → relay: prove the device key.
    "auth" => Auth(Auth),
    /// relay → app: is the bridge there, what it runs, and the app's resume tokens.
    "relay_status" => RelayStatus(RelayStatus),
    /// device → relay → bridge: open an encrypted link.
    "link_hello" => LinkHello(LinkHello),
    /// bridge → relay → device: the link is open.
    "link_accept" => LinkAccept(LinkAccept),
    /// relay → app (and LAN server → app): one sealed block.
    "block" => Block(BlockEnvelope),
    /// bridge → relay: consecutive sealed blocks for one connection under one
    /// signature; the relay verifies it once and forwards each block as a `block`.
    "batch" => Batch(BlockBatch),
    /// bridge → relay → app: the live part of a resume is complete; history follows.
    "replay_done" => ReplayDone(ReplayDoneFrame),
    /// app → relay → bridge: one signed, sealed control message.
    "control" => Control(ControlEnvelope),
    /// bridge → relay → app: the sealed answer to a control message.
    "reply" => Reply(ReplyEnvelope),
    /// relay → bridge: a device asks to pair (from the HTTP pairing broker).
    "pair_request" => PairRequest(PairRequestFrame),
    /// bridge → relay: the answer to a pairing request.
    "pair_response" => PairResponse(PairResponseFrame),
    /// bridge → relay (→ device): a notification sealed for one device.
    "push" => Push(Push),
    /// bridge → relay: close a device connection (revoked, refused).
    "close_conn" => CloseConn(CloseConn),
    /// relay → bridge: a device connection ended.
    "conn_closed" => ConnClosed(ConnClosed),
    /// relay → either side: a frame was refused.
    "error" => Error(RelayError),
}

/// The relay protocol version this crate speaks: `register`, `registered`, `auth` and
/// `relay_status` carry it, and a peer that speaks another is refused with
/// [`RelayErrorCode::UnsupportedVersion`] and a message naming both
/// ([`version_mismatch`]). Version 2: blocks reach the relay in signed `batch`es,
/// each session's blocks arrive with consecutive counters, streamed text travels as
/// appends (docs/block-protocol.md). Version 3: the link handshake carries an
/// ephemeral X25519 key from each side and its keys are forward-secret
/// (docs/encryption.md#forward-secrecy).
pub const PROTOCOL_VERSION: u32 = 3;

/// The version a peer speaks when its frame has no `protocol_version` (version 1
/// frames had it only in `register`).
pub const fn first_protocol_version() -> u32 {
    1
}

/// Most blocks in one `batch`.
pub const MAX_BATCH_BLOCKS: usize = 256;

/// The one sentence both sides show when versions differ: who speaks what, and which
/// side to update. `peer` and `own` name the sides ("this bridge", "the relay").
pub fn version_mismatch(peer: &str, peer_version: u32, own: &str, own_version: u32) -> String {
    let update = if peer_version < own_version { peer } else { own };
    format!("{peer} speaks relay protocol {peer_version} and {own} speaks {own_version}: update {update}")
}

impl RelayFrame {
    /// The relay-assigned connection a bridge-side frame concerns, when it has one.
    pub fn conn(&self) -> Option<u64> {
        match self {
            RelayFrame::LinkHello(f) => f.conn,
            RelayFrame::LinkAccept(f) => f.conn,
            RelayFrame::Batch(f) => Some(f.conn),
            RelayFrame::ReplayDone(f) => f.conn,
            RelayFrame::Control(f) => f.conn,
            RelayFrame::Reply(f) => f.conn,
            RelayFrame::CloseConn(f) => Some(f.conn),
            RelayFrame::ConnClosed(f) => Some(f.conn),
            _ => None,
        }
    }
}

/// Body of `challenge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Challenge {
    /// 32 random bytes, base64url; the peer signs them (docs/encryption.md §Relay authentication).
    pub nonce: String,
}

/// Body of `registered`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Registered {
    /// The bridge, as the relay now knows it.
    pub bridge_id: BridgeId,
    /// The relay protocol version the relay speaks (absent: 1).
    #[serde(default = "first_protocol_version")]
    pub protocol_version: u32,
}

/// A paired device as the bridge publishes it to the relay: public keys only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeviceRecord {
    /// The device.
    pub device_id: DeviceId,
    /// Its public keys.
    pub keys: PublicKeys,
    /// Its name.
    pub name: String,
    /// True once revoked: the relay refuses its connections and its frames.
    #[serde(default)]
    pub revoked: bool,
}

/// Body of `devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Devices {
    /// Every device the bridge has paired, revoked ones included.
    pub devices: Vec<DeviceRecord>,
}

/// Body of `sessions`: the sessions a device may resume through the relay (not the
/// session listing a `list_sessions` reply carries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ResumableSessions {
    /// The sessions the bridge can resume, newest last (as in `register`). The relay
    /// adds the ones it did not know; it forgets none it already issued tokens for.
    pub resumable_session_ids: Vec<SessionId>,
}

/// Body of `auth`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Auth {
    /// The bridge the device wants.
    pub bridge_id: BridgeId,
    /// The device.
    pub device_id: DeviceId,
    /// The device's Ed25519 signature over the challenge (docs/encryption.md), base64.
    pub sig: String,
    /// The relay protocol version the device speaks (absent: 1, which a version 2
    /// relay refuses).
    #[serde(default = "first_protocol_version")]
    pub protocol_version: u32,
}

/// Body of `link_hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LinkHello {
    /// The device.
    pub device_id: DeviceId,
    /// 16 fresh random bytes, base64url.
    pub client_nonce: String,
    /// The device's ephemeral X25519 public key for this link only (32 bytes,
    /// base64url); its secret is never stored (docs/encryption.md#forward-secrecy).
    pub client_ephemeral: String,
    /// The device's signature over the link-hello bytes, base64.
    pub sig: String,
    /// The relay's connection number (relay ↔ bridge only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u64>,
}

/// Body of `link_accept`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LinkAccept {
    /// The device.
    pub device_id: DeviceId,
    /// 16 fresh random bytes, base64url.
    pub bridge_nonce: String,
    /// The bridge's ephemeral X25519 public key for this link only (32 bytes,
    /// base64url); its secret is never stored (docs/encryption.md#forward-secrecy).
    pub bridge_ephemeral: String,
    /// The bridge's signature over the link-accept bytes, base64.
    pub sig: String,
    /// The relay's connection number (relay ↔ bridge only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u64>,
}

/// Body of `reply`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ReplyEnvelope {
    /// The device it answers.
    pub device_id: DeviceId,
    /// base64(nonce12 ‖ AES-256-GCM ciphertext ‖ tag16) of the reply's JSON, under the link.
    pub body: String,
    /// The relay's connection number (relay ↔ bridge only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u64>,
}

/// What a `reply` frame's `body` holds once opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SealedReply {
    /// The answer to a control message, as on the local socket.
    pub reply: Reply,
    /// Set when the control message started or resumed a session: the session
    /// keys' inputs from the bridge (docs/encryption.md §Session keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<Attach>,
}

/// The bridge's half of a session attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Attach {
    /// The session attached.
    pub session_id: SessionId,
    /// 16 fresh random bytes, base64url: goes into the session keys' HKDF info.
    pub attach_nonce: String,
}

/// Body of `pair_request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PairRequestFrame {
    /// Chosen by the relay; the answer carries it.
    pub request_id: u64,
    /// The device's request, as posted to the HTTP broker.
    pub request: PairRequest,
}

/// Body of `pair_response`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PairResponseFrame {
    /// The request answered.
    pub request_id: u64,
    /// The bridge's answer, when it accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<PairResponse>,
    /// Why it refused, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub use crate::push::PushKind;

/// Body of `push`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Push {
    /// The device to notify.
    pub device_id: DeviceId,
    /// What it is about.
    pub kind: PushKind,
    /// base64(nonce12 ‖ ciphertext ‖ tag16) under the device's push key.
    pub payload: String,
}

/// Body of `close_conn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CloseConn {
    /// The connection.
    pub conn: u64,
    /// Why, for the device's user.
    pub reason: String,
}

/// Body of `conn_closed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConnClosed {
    /// The connection.
    pub conn: u64,
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
    /// The bridge's public keys; `bridge_id` must be derived from them.
    pub keys: PublicKeys,
    /// Every device the bridge has paired (public keys only).
    pub devices: Vec<DeviceRecord>,
    /// The bridge's Ed25519 signature over the relay-auth bytes of the challenge, base64.
    pub sig: String,
    /// The bridge's signature over the digest of the phone app it embeds; the relay
    /// serves it at `GET /v1/bridges/{bridge_id}/app-signature` (absent: none served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<Box<crate::crypto::app_code::AppSignature>>,
}

/// Body of `relay_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct RelayStatus {
    /// The relay protocol version the relay (or LAN server) speaks (absent: 1).
    #[serde(default = "first_protocol_version")]
    pub protocol_version: u32,
    /// True while the bridge holds its relay connection.
    pub bridge_online: bool,
    /// The bridge's agents (empty while it is offline).
    pub agents: Vec<AgentSummary>,
    /// A resume token per resumable session, for `control` envelopes.
    pub resume_tokens: BTreeMap<SessionId, String>,
}

/// Body of `block`, and one element of a `batch`'s `blocks`: a sealed block
/// (docs/relay.md#block, sealed as docs/encryption.md#the-block-envelope says). It
/// has exactly these fields: the relay forwards a batched block's JSON text to the
/// device as it came, behind `"type":"block"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct BlockEnvelope {
    /// The session the block belongs to (routing).
    pub session_id: SessionId,
    /// The block's `type`, in plaintext: the relay routes on this only (e.g. to decide
    /// which blocks wake an offline app through the push hold-queue).
    pub block_type: String,
    /// base64(nonce12 ‖ AES-256-GCM ciphertext ‖ tag16) of the block's JSON.
    pub enc: String,
    /// True for history backfill sent after `replay_done`.
    pub replay: bool,
    /// The block's original `ts` on replay, the send time on live blocks.
    #[cfg_attr(test, proptest(strategy = "crate::arb::timestamp()"))]
    pub server_ts: f64,
}

/// Body of `batch`: blocks the bridge sends one connection in one flush, in order,
/// under one signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct BlockBatch {
    /// The relay's connection number the blocks are for.
    pub conn: u64,
    /// 1 to [`MAX_BATCH_BLOCKS`] sealed blocks, in the order the device must receive them.
    pub blocks: Vec<BlockEnvelope>,
    /// The bridge's Ed25519 signature over the batch (docs/encryption.md#batches),
    /// base64; the relay verifies it before forwarding any of the blocks.
    pub sig: String,
}

/// Body of `replay_done`: the local socket's `replay_done` message (a `BridgeMessage`)
/// plus the relay's connection number for routing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ReplayDoneFrame {
    /// The session resumed.
    pub session_id: SessionId,
    /// The highest `seq` sent before this frame, when any block was sent. Plaintext
    /// for routing and logs only: a device takes `last_seq` from `enc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// base64(nonce12 ‖ AES-256-GCM ciphertext ‖ tag16) of `{"session_id", "last_seq"}`
    /// under the session's bridge→app key, the next counter of its block stream
    /// (docs/encryption.md#sealed-replay_done). A device ignores a `replay_done`
    /// without it (one the relay made up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enc: Option<String>,
    /// The relay's connection number (relay ↔ bridge only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u64>,
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
    /// The relay's connection number (relay ↔ bridge only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u64>,
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
    /// The device is not paired with this bridge, or was revoked.
    UnknownDevice,
    /// The client read too slowly; its queue overflowed. Reconnect and resume.
    SlowConsumer,
    /// Too many connections for this key.
    TooManyConnections,
    /// The peer speaks another relay protocol version; the message names both.
    UnsupportedVersion,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_mismatch_names_both_versions_and_the_side_to_update() {
        assert_eq!(
            version_mismatch("this bridge", 1, "the relay", 2),
            "this bridge speaks relay protocol 1 and the relay speaks 2: update this bridge"
        );
        assert_eq!(
            version_mismatch("this device", 3, "the relay", 2),
            "this device speaks relay protocol 3 and the relay speaks 2: update the relay"
        );
    }

    #[test]
    fn frames_without_a_version_are_version_1_and_a_block_has_no_other_fields() {
        let auth: RelayFrame =
            serde_json::from_str(r#"{"type":"auth","bridge_id":"b","device_id":"d","sig":"s"}"#).unwrap();
        let RelayFrame::Auth(auth) = auth else { panic!("auth") };
        assert_eq!(auth.protocol_version, 1);
        let with_sig = r#"{"type":"block","session_id":"s","block_type":"text","enc":"e","replay":false,"server_ts":1.0,"sig":"x"}"#;
        assert!(serde_json::from_str::<RelayFrame>(with_sig).is_err());
    }

    #[test]
    fn frame_types_list_matches_the_enum() {
        let schema = serde_json::to_string(&schemars::schema_for!(RelayFrame)).unwrap();
        for t in FRAME_TYPES {
            assert!(schema.contains(&format!("\"const\":\"{t}\"")), "{t}");
        }
        let distinct: std::collections::BTreeSet<_> = FRAME_TYPES.iter().collect();
        assert_eq!(distinct.len(), FRAME_TYPES.len());
        assert_eq!(FRAME_TYPES.len(), 20);
    }
}
