//! The device side of terminull: what a phone, a browser or another computer runs to
//! drive a bridge from elsewhere.
//!
//! - [`home`]: the device's identity and the bridges it paired with.
//! - [`pairing`]: pairing through the relay's HTTP broker with a QR link.
//! - [`connection`]: an authenticated, end-to-end encrypted link to the bridge through
//!   the relay, presenting the bridge's messages decrypted and verified.
//! - [`mdns`]: the LAN path's mDNS as a device uses it: browsing for a paired bridge
//!   (the bridge's advertising is in `terminull-net`).
//! - [`transcript`]: a session's blocks with the replace-on-repeated-id rule, streamed
//!   text rebuilt from snapshots and appends, and the gaps to resume from.
//! - [`terminal`]: terminals on the bridge: their control messages and output feed.
//! - [`net`]: TCP/TLS, WebSocket and minimal HTTP to the relay.

#![warn(missing_docs)]

pub mod connection;
pub mod failover;
pub mod home;
pub mod mdns;
pub mod net;
pub mod pairing;
pub mod terminal;
pub mod transcript;
