//! `terminull-droid`: the Droid adapter executable. stdout carries the adapter protocol
//! only; logs go to stderr (`TERMINULL_LOG` sets the level).

use std::process::ExitCode;

use terminull_adapter_sdk::serve;
use terminull_droid::Droid;

fn main() -> ExitCode {
    serve::<Droid>()
}
