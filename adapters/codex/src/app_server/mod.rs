//! Codex through `codex app-server`: one long-lived process per session speaking
//! JSON-RPC over its stdin/stdout (the protocol Codex's IDE integrations use), so the
//! turn streams as it is generated and Codex can ask for approval of commands and
//! patches, which become `permission_request` blocks.
//!
//! - [`wire`]: the requests, notifications and approval requests, decoded tolerantly.
//! - [`mapping`]: the pure state machine from notifications to blocks.
//! - [`rpc`]: JSON-RPC lines as codex writes them (without `"jsonrpc"`).
//! - [`connection`]: the process, the handshake, threads, the turn loop, approvals and
//!   interrupts.

pub mod connection;
pub mod mapping;
pub mod rpc;
pub mod wire;
