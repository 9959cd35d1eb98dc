//! The terminull bridge: the daemon that hosts adapters and runs sessions, and the
//! `terminull` command line.
//!
//! - [`home`]: the home directory and `config.toml`.
//! - [`host`]: one adapter process — handshake, contract check, ordered events, shutdown.
//! - [`registry`]: built-in and drop-in adapters, checked and detected.
//! - The tools for adapter authors (`terminull adapter check / record / replay`,
//!   `terminull self-check`) are the `terminull-adapter-check` crate; `main.rs` wires them.
//! - [`devices`], [`link`], [`relay_client`]: paired devices, their encrypted links,
//!   and the connection to a relay; [`lan`]: the same for devices on the local network.

pub mod chat;
pub mod client;
pub mod devices;
pub mod history;
pub mod home;
pub mod host;
pub mod lan;
pub mod link;
pub mod local;
pub mod registry;
pub mod relay_client;
pub mod service;
pub mod session;
