//! Recording what an agent CLI hears and says: the [`terminull_process::tap`] module,
//! re-exported (the recording is made by the process supervisor of
//! [`terminull_process::child`], which lives in its own crate).

pub use terminull_process::tap::*;
