//! [`AdapterError`], what an adapter method answers with when it fails. Its own module
//! because both the [`Adapter`](crate::Adapter) trait and the handoff hooks it names
//! return it.

use terminull_protocol::jsonrpc::{RpcError, codes};

/// An error an adapter method answers with; becomes a JSON-RPC error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AdapterError {
    /// A code from [`terminull_protocol::jsonrpc::codes`].
    pub code: i64,
    /// A sentence for a person.
    pub message: String,
}

impl AdapterError {
    /// The agent CLI failed (`AGENT_ERROR`).
    pub fn agent(message: impl std::fmt::Display) -> Self {
        Self { code: codes::AGENT_ERROR, message: message.to_string() }
    }

    /// Bad input from the bridge (`INVALID_PARAMS`).
    pub fn invalid(message: impl std::fmt::Display) -> Self {
        Self { code: codes::INVALID_PARAMS, message: message.to_string() }
    }

    /// Something named does not exist (`NOT_FOUND`).
    pub fn not_found(message: impl std::fmt::Display) -> Self {
        Self { code: codes::NOT_FOUND, message: message.to_string() }
    }

    /// The agent needs the user to log in (`AUTH_REQUIRED`).
    pub fn auth_required(message: impl std::fmt::Display) -> Self {
        Self { code: codes::AUTH_REQUIRED, message: message.to_string() }
    }

    /// An optional method this adapter does not implement (`METHOD_NOT_FOUND`).
    pub fn not_supported(method: &str) -> Self {
        Self { code: codes::METHOD_NOT_FOUND, message: format!("method not found: {method}") }
    }
}

/// A turn that cannot go on (the bridge is gone) fails as the agent's error.
impl From<crate::session::TurnError> for AdapterError {
    fn from(e: crate::session::TurnError) -> Self {
        AdapterError::agent(e)
    }
}

impl From<AdapterError> for RpcError {
    fn from(e: AdapterError) -> Self {
        RpcError::new(e.code, e.message)
    }
}
