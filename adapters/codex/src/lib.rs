//! terminull's adapter for [Codex](https://github.com/openai/codex): it speaks the
//! adapter protocol (docs/adapter-protocol.md) on stdin/stdout through the Rust SDK and
//! runs the real `codex exec --json` once per turn, resuming the same thread on later
//! turns. See docs/adapters/codex.md for the command line, the event mapping, the
//! permission modes, interrupts and limits.
//!
//! - [`events`]: serde types for the lines `codex exec --json` prints.
//! - [`mapping`]: the pure state machine from those events to blocks.
//! - [`command`]: the turn's argv, from the session's settings.
//! - [`adapter`]: the [`Codex`] adapter (the only part that does I/O).

pub mod adapter;
pub mod app_server;
pub mod command;
pub mod events;
pub mod handoff;
pub mod mapping;

pub use adapter::Codex;
