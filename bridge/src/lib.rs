//! The terminull bridge. Today it holds the protocol self-check that
//! `terminull self-check` runs; the daemon (adapter host, sessions, history,
//! transports) grows here.

pub mod conformance;
pub mod self_check;
pub mod transcript;
