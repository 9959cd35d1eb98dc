//! terminull's adapter for [Cursor](https://cursor.com)'s agent CLI: it speaks the adapter
//! protocol (docs/adapter-protocol.md) on stdin/stdout through the Rust SDK and runs
//! `cursor-agent -p --output-format stream-json` once per turn, resuming the same chat on
//! later turns. See docs/adapters/cursor.md for the command line, the event mapping, the
//! permission modes, interrupts and limits.
//!
//! **Not verified against the real binary**: Cursor's CLI has no package in a registry this
//! project can install from, so everything here follows Cursor's documented stream-json
//! format and is tested with hand-written lines in that format. The declaration leaves
//! `verified_against` out, and `terminull agents` says so.
//!
//! - [`events`]: tolerant parsing of the lines the CLI prints.
//! - [`mapping`]: the pure state machine from those events to blocks.
//! - [`command`]: the turn's argv, from the session's settings.
//! - [`adapter`]: the [`Cursor`] adapter (the only part that does I/O).

pub mod adapter;
pub mod command;
pub mod events;
pub mod mapping;

pub use adapter::Cursor;
