//! terminull's host for agents that speak the Agent Client Protocol (ACP, JSON-RPC 2.0
//! over stdio): the ACP *client* of any agent command, behind terminull's adapter
//! protocol.
//!
//! An adapter for one ACP agent is a [`profile::AcpProfile`] (its id, name, command
//! line and capabilities) and a `main` of one line, `serve::<AcpAdapter<MyProfile>>()`;
//! the Gemini and Hermes adapters are built that way. The `terminull-acp` binary of
//! this crate serves any ACP agent whose identity and command are given on its command
//! line ([`generic`]), which is how the bridge runs the `[acp_agents.<id>]` of its
//! configuration.
//!
//! - [`schema`]: tolerant serde types for the slice of ACP v1 spoken here;
//! - [`mapping`]: the pure state machine from ACP updates to blocks;
//! - [`notice`]: an agent's retry and failure notices outside ACP's structure;
//! - [`client`]: one agent process as a JSON-RPC peer, and where the known ACP bug
//!   classes (early and late updates, junk on stdout, foreign sessions, unoffered
//!   methods) are absorbed;
//! - [`adapter`]: the [`Adapter`](terminull_adapter_sdk::Adapter) implementation.
//!
//! The mapping table, the bug classes and the config agents are written down in
//! `docs/acp.md`.

#![warn(missing_docs)]

pub mod adapter;
pub mod client;
pub mod generic;
pub mod mapping;
pub mod notice;
pub mod profile;
pub mod schema;

pub use adapter::AcpAdapter;
pub use profile::{AcpProfile, Launch, Settings, Via};
