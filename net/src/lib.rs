//! What both ends of a terminull link need below the protocol, shared by the bridge
//! (the daemon) and the device side (`terminull-client`) so that neither imports the
//! other:
//!
//! - [`transport`]: reaching a relay or a LAN server: TCP or TLS, a WebSocket on top,
//!   and a minimal HTTP/1.1 request for the relay's JSON API.
//! - [`mdns`]: the interfaces an mDNS daemon uses, and a bridge advertising its LAN
//!   server (a device's browse is in `terminull-client`).
//! - [`private_file`]: files only the user may read, and the long-term identity kept
//!   in one.

#![warn(missing_docs)]

pub mod mdns;
pub mod private_file;
pub mod transport;

pub use transport::{Endpoint, HttpResponse, MAX_MESSAGE, NetError, Stream, connect, request_json, websocket};
