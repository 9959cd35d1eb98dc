//! The terminull adapter for OpenCode, and through a [`Flavor`] for its forks (Kilo,
//! in the `terminull-kilo` crate).
//!
//! The binary (`terminull-opencode`) speaks terminull's adapter protocol on stdio and
//! runs the real `opencode acp` (the Agent Client Protocol server of the CLI), one
//! long-lived process per session, through the ACP host library `terminull-acp`:
//!
//! - [`flavor`]: what differs between the CLIs of the family (names, environment
//!   prefix, configuration file);
//! - [`options`]: the session's model, effort and agent as the CLI offers them
//!   (`configOptions`), and the checked choices: pure;
//! - [`handoff`]: the terminal handoff hooks, over the CLI's session store ([`store`]);
//! - [`adapter`]: the [`Adapter`](terminull_adapter_sdk::Adapter) implementation.
//!
//! Why ACP rather than `opencode serve` or `opencode run --format json`, the event to
//! block mapping, the permission modes, resume and the limits are written down in
//! `docs/adapters/opencode.md`.

#![warn(missing_docs)]

pub mod adapter;
pub mod flavor;
pub mod handoff;
pub mod options;
pub mod store;

pub use adapter::OpenCodeFamily;
pub use flavor::{Flavor, OpenCode};

/// The OpenCode adapter.
pub type OpenCodeAdapter = OpenCodeFamily<OpenCode>;
