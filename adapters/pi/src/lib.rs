//! terminull's adapter for [pi](https://github.com/badlogic/pi-mono) (`pi-coding-agent`):
//! it speaks the adapter protocol (docs/adapter-protocol.md) on stdin/stdout through the
//! Rust SDK and drives one long-lived `pi --mode rpc` process per session. See
//! docs/adapters/pi.md for the command line, the event mapping, interrupts and limits.
//!
//! - [`events`]: tolerant, bounded parsing of the lines `pi --mode rpc` prints.
//! - [`mapping`]: the pure state machine from those events to blocks.
//! - [`command`]: the command line and the RPC commands the adapter writes.
//! - [`adapter`]: the [`Pi`] adapter (the only part that does I/O).

pub mod adapter;
pub mod command;
pub mod events;
pub mod handoff;
pub mod mapping;

pub use adapter::Pi;
