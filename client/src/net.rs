//! Connections to a relay or a LAN server: the transport of `terminull-net`, which the
//! bridge shares, re-exported so this crate's users keep writing `terminull_client::net`.

pub use terminull_net::transport::*;
