//! terminull's adapter for [Droid](https://factory.ai), Factory's coding agent: it speaks
//! the adapter protocol (docs/adapter-protocol.md) on stdin/stdout through the Rust SDK
//! and runs the real `droid exec -o stream-json` once per turn, continuing the session
//! on later turns. See docs/adapters/droid.md for the command line, the event mapping,
//! the permission modes, resume (which needs Factory's cloud), interrupts and limits.
//!
//! - [`events`]: serde types for the lines `droid exec -o stream-json` prints.
//! - [`mapping`]: the pure state machine from those events to blocks.
//! - [`retries`]: droid's retries of a failing model call, read from its log.
//! - [`command`]: the turn's argv, from the session's settings.
//! - [`adapter`]: the [`Droid`] adapter (the only part that does I/O).

pub mod adapter;
pub mod command;
pub mod events;
pub mod handoff;
pub mod mapping;
pub mod retries;

pub use adapter::Droid;
