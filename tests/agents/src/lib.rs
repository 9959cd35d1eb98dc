//! Tests of the built-in adapters against the real agent CLIs, pinned in
//! `tests/agents/package.json`, and against recordings of them.
//!
//! - [`netns`]: every live run happens in a private network namespace with only
//!   loopback, so nothing a CLI sends can leave the machine.
//! - [`agents`]: where the pinned CLIs are installed, and the environment that points
//!   each at the scripted model server.
//! - [`rig`]: a `terminull` daemon with the adapter, driven over its socket like an app.
//! - [`scenarios`]: what each scenario sends and what the app must see; the live tests
//!   and the replay tests run the very same checks.
//! - [`runner`]: the test files' shared `agent_tests!` macro and runtime.
//! - [`attachments`]: an image attachment reaching the model.
//!
//! See docs/agent-tests.md.

pub mod agents;
pub mod attachments;
pub mod handoff;
pub use terminull_netns as netns;
pub mod rig;
pub mod runner;
pub mod scenarios;
pub mod workspace;
