//! Running an agent CLI as a child process: the [`terminull_process::child`] module,
//! re-exported so adapters keep writing `terminull_adapter_sdk::child::…`. It lives in
//! its own crate because the bridge supervises adapters the same way and must not
//! depend on the SDK for it.

pub use terminull_process::child::*;
