//! Tools for adapter authors, behind the `terminull` commands that run them:
//!
//! - [`conformance`]: `terminull adapter check`, every protocol check against a real
//!   adapter process, with a report.
//! - [`recording`]: `terminull adapter record / replay`, an adapter's stdio recorded
//!   through a fixed script, normalised, and replayed against it.
//! - [`self_check`]: `terminull self-check`, this build's own protocol code checked
//!   against itself (schemas, codec, contract check).
//!
//! None of this runs in the daemon: it lives here so the bridge crate holds only what
//! the daemon needs.

pub mod conformance;
pub mod recording;
pub mod self_check;
