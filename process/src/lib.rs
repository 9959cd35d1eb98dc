//! Supervised child processes, shared by the bridge (which runs adapters) and the
//! adapter SDK (whose adapters run agent CLIs), so that neither depends on the other
//! for them.
//!
//! - [`child`]: an [`AgentProcess`](child::AgentProcess): its own process group,
//!   line-framed stdout, a bounded stderr tail, and a shutdown ladder that ends the
//!   whole process tree.
//! - [`tap`]: the optional recording of what such a process hears and says, for
//!   offline replay in tests.

#![warn(missing_docs)]

pub mod child;
pub mod tap;

/// Set in the environment of every process the bridge or an adapter starts (value:
/// the starting process's pid, or what the starter already had). A process carrying it,
/// or descending from one that does, is never taken for a native agent (see the adapter
/// SDK's `handoff` module).
pub const SESSION_MARKER_ENV: &str = "TERMINULL_SESSION";
