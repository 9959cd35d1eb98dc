//! The terminull relay: a WebSocket router between bridges and their paired devices,
//! a pairing broker, a device registry and a push hold-queue. It holds no block
//! history and cannot open what it routes (docs/relay.md, docs/encryption.md).
//!
//! Start one with [`Relay::start`] and a [`RelayConfig`]; operating it is described in
//! docs/relay-operations.md.

#![warn(missing_docs)]

mod admission;
mod batch;
mod bridge_conn;
mod bus;
mod challenge;
mod client_conn;
mod cluster;
pub mod config;
mod conn;
pub mod error;
mod http_api;
mod http_limits;
mod hub;
mod limits;
pub mod listing;
mod peers;
mod refusal;
pub mod server;
mod store;
mod tls;
pub mod token;
pub mod transfer;
pub mod webpush;

pub use config::{RelayConfig, StoreLocation, TlsFiles};
pub use error::{ConfigError, RelayError, StoreError};
pub use server::{Relay, RunningRelay};
