//! The terminull adapter for Claude Code.
//!
//! The binary (`terminull-claude-code`) speaks terminull's adapter protocol on
//! stdio and runs the real `claude` CLI in its stream-json mode, one long-lived
//! process per session. The crate is split so the interesting part can be tested
//! without a CLI:
//!
//! - [`events`]: serde types for the CLI's stdout lines, tolerant of what they do not know;
//! - [`mapping`]: a pure state machine from those events to blocks and other actions;
//! - [`adapter`]: the [`Adapter`](terminull_adapter_sdk::Adapter) implementation doing the I/O.
//!
//! The design (command line, mapping table, permission modes, resume, limits) is
//! written down in `docs/adapters/claude-code.md`.

#![warn(missing_docs)]

pub mod adapter;
pub mod cli;
pub mod events;
pub mod handoff;
pub mod mapping;

pub use adapter::ClaudeCode;
