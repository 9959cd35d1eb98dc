//! terminull's wire protocol: the types every part of the system exchanges, and
//! the one NDJSON codec that frames them.
//!
//! - [`blocks`]: the block stream (bridge → app) and [`blocks::validate`] for blocks
//!   an adapter streams.
//! - [`control`]: control messages (app → bridge).
//! - [`relay`]: frames on the relay WebSocket.
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
pub mod ids;
pub mod jsonrpc;
pub mod lan;
pub mod ndjson;
pub mod relay;
pub mod samples;
pub mod schema;
pub mod turn;

pub use blocks::{Block, BlockKind};
pub use capabilities::Capabilities;
pub use ids::{AgentId, AgentSessionId, BlockId, BridgeId, DeviceId, PermissionRequestId, SessionId, ToolCallId};

#[cfg(test)]
mod roundtrip_tests;

/// proptest strategies for the fields the derive cannot generate on its own.
#[cfg(test)]
pub(crate) mod arb {
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    /// Unix seconds in a plausible range.
    pub fn timestamp() -> impl Strategy<Value = f64> {
        0.0f64..4.0e9
    }

    /// Any finite float (JSON has no NaN or infinity).
    pub fn finite() -> impl Strategy<Value = f64> {
        -1.0e12f64..1.0e12
    }

    /// Arbitrary JSON, a few levels deep.
    pub fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            finite().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map(".{0,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// An optional `_meta` object.
    pub fn meta() -> impl Strategy<Value = Option<Map<String, Value>>> {
        proptest::option::of(btree_map("[a-z_.]{1,12}", json_value(), 0..3).prop_map(|m| m.into_iter().collect()))
    }
}
