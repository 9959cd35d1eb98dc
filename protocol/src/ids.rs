//! Newtype identifiers used across the wire protocol.
//!
//! Every id is a JSON string on the wire (`#[serde(transparent)]`); the newtypes
//! only stop a session id from being passed where a tool-call id is expected.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident $(, #[$field_attr:meta])?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        #[cfg_attr(test, derive(proptest_derive::Arbitrary))]
        #[serde(transparent)]
        pub struct $name($(#[$field_attr])? pub String);

        impl $name {
            /// The id as it appears on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // `pad` honours width and alignment (`{:<12}`), unlike `write_str`.
                f.pad(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

string_id!(
    /// A terminull session, minted by the bridge. Distinct from the agent's own
    /// session id ([`AgentSessionId`]).
    SessionId
);
string_id!(
    /// The agent CLI's own conversation id (Claude's session uuid, Codex's thread id…),
    /// reported by the adapter through the `session_id` notification.
    AgentSessionId
);
string_id!(
    /// The stable id of a streamed `text` or `thinking` block: repeated chunks with the
    /// same id replace each other.
    BlockId
);
string_id!(
    /// The stable id of a tool call; the paired `tool_result` and a nested call's
    /// `parent_id` refer to it.
    ToolCallId
);
string_id!(
    /// The id of one permission request, echoed by the permission response.
    PermissionRequestId
);
string_id!(
    /// An adapter's agent id (`claude`, `codex`, …): 1–64 of `a-z 0-9 _ -`, starting
    /// with a letter or digit.
    AgentId,
    #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9_-]{0,63}$"))]
);
string_id!(
    /// A paired device's id (derived from its public key, see docs/encryption.md).
    DeviceId
);
string_id!(
    /// A bridge's id (derived from its public key, see docs/encryption.md).
    BridgeId
);
