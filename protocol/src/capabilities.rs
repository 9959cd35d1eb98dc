//! What an agent can do, declared by its adapter and surfaced to the app.
//!
//! The same ten flags appear in the adapter's declaration (the `initialize` result)
//! and in the `agent_info` block, flattened into both objects. Every flag is
//! required on the wire: an adapter states each one explicitly, as the spec's
//! "explicit opt-out" demands (docs/adapter-protocol.md#52-explicit-opt-out).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec's eight `cap_*` flags plus the two optional surfaces.
///
/// Deliberately no `Default`: every flag is written out wherever capabilities are
/// built, the compile-time form of the spec's explicit opt-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Capabilities {
    /// The composer offers an image picker; `send` may carry image attachments.
    pub cap_images: bool,
    /// Non-image file attachments are accepted.
    pub cap_documents: bool,
    /// The adapter streams `thinking` blocks.
    pub cap_thinking: bool,
    /// The adapter emits `permission_request` blocks and accepts `permission_response`.
    pub cap_permissions: bool,
    /// Tool calls may nest (`parent_id`); the app renders them as groups.
    pub cap_subagents: bool,
    /// `interrupt` stops the running turn; the app shows a live stop button.
    pub cap_interrupt: bool,
    /// `send` is accepted while a turn runs; otherwise the bridge queues messages.
    pub cap_input_during_turn: bool,
    /// The agent can open a terminal on the device.
    pub cap_terminal: bool,
    /// `list_models` is implemented and feeds the new-session model picker.
    pub provides_models: bool,
    /// `get_usage` is implemented and feeds `/status`.
    pub provides_usage: bool,
}

/// The wire names of the eight `cap_*` flags, in declaration order.
pub const CAP_FLAGS: [&str; 8] = [
    "cap_images",
    "cap_documents",
    "cap_thinking",
    "cap_permissions",
    "cap_subagents",
    "cap_interrupt",
    "cap_input_during_turn",
    "cap_terminal",
];

/// The wire names of the two optional-surface flags.
pub const SURFACE_FLAGS: [&str; 2] = ["provides_models", "provides_usage"];
