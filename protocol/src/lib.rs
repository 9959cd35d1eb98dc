//! terminull's wire protocol: the types every part of the system exchanges, and
//! the one NDJSON codec that frames them.
//!
//! - [`blocks`]: the block stream (bridge → app) and [`blocks::validate`] for blocks
//!   an adapter streams.
//! - [`control`]: control messages (app → bridge).
//! - [`files`], [`git`]: the `files` and `git` control messages' requests and results.
//! - [`relay`]: frames on the relay WebSocket.
//! - [`terminal`]: terminals (a shell in a pseudo-terminal) and their output.
//! - [`crypto`]: identities, pairing, per-direction keys and envelope sealing.
//! - [`adapter`]: the adapter JSON-RPC protocol (bridge ↔ adapter executable), its
//!   declaration and [`adapter::check_declaration`].
//! - [`jsonrpc`]: JSON-RPC 2.0 envelopes.
//! - [`ndjson`]: newline-delimited JSON framing with a line cap.
//! - [`schema`]: JSON Schemas generated from these types (committed under docs/schema).
//!
//! This crate does no I/O and spawns nothing; callers own their loops.

#![warn(missing_docs)]

pub mod adapter;
pub mod blocks;
pub mod capabilities;
pub mod commands;
pub mod control;
pub mod crypto;
pub mod files;
pub mod git;
pub mod ids;
pub mod jsonrpc;
pub mod lan;
pub mod ndjson;
pub mod pacing;
pub mod push;
pub mod relay;
pub mod rtc;
pub mod samples;
pub mod schema;
pub mod session_list;
pub mod streamed;
pub mod terminal;
pub mod text;
pub mod turn;

pub use blocks::{Block, BlockKind};
pub use capabilities::Capabilities;
pub use ids::{AgentId, AgentSessionId, BlockId, BridgeId, DeviceId, PermissionRequestId, SessionId, ToolCallId};

#[cfg(test)]
mod roundtrip_tests;

/// proptest strategies for the fields the derive cannot generate on its own.
#[cfg(test)]
pub(crate) mod arb;
