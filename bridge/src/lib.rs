//! The terminull bridge: the daemon that hosts adapters and runs sessions, and the
//! `terminull` command line.
//!
//! - [`home`]: the home directory and `config.toml`.
//! - [`session`]: one actor per session; [`history`]: its blocks and metadata on disk;
//!   [`handoff`]: what a session owes across a restart; [`service`]: the dispatcher.
//! - [`host`]: one adapter process — handshake, contract check, ordered events, shutdown.
//! - [`registry`]: built-in and drop-in adapters, checked and detected.
//! - [`connection`]: the one connection loop every transport drives; [`local`]: the
//!   Unix socket; [`daemon_client`]: the command line's client of the daemon.
//! - The tools for adapter authors (`terminull adapter check / record / replay`,
//!   `terminull self-check`) are the `terminull-adapter-check` crate; `main.rs` wires them.
//! - [`devices`], [`link`], [`relay_client`]: paired devices, their encrypted links,
//!   and the connection to a relay; [`lan`]: the same for devices on the local network.
//! - [`terminal`]: terminals (a login shell in a pseudo-terminal) for any client.

pub mod agent_hints;
pub mod chat;
pub mod connection;
pub mod daemon_client;
pub mod devices;
pub mod files;
pub mod git;
pub mod handoff;
pub mod history;
pub mod home;
pub mod home_guard;
pub mod host;
pub mod lan;
pub mod link;
pub mod live;
pub mod local;
pub mod push_counter;
pub mod push_policy;
pub mod registry;
pub mod relay_client;
pub mod service;
pub mod session;
pub mod terminal;
