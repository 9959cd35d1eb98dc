//! The terminull relay: a WebSocket router between bridges and their paired devices,
//! a pairing broker, a device registry and a push hold-queue. It holds no block
//! history and cannot open what it routes (docs/relay.md, docs/encryption.md).

#![warn(missing_docs)]

pub mod webpush;
