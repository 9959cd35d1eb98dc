//! `terminull-pi`: the pi adapter executable. stdout carries the adapter protocol only;
//! logs go to stderr (`TERMINULL_LOG` sets the level).

use std::process::ExitCode;

use terminull_adapter_sdk::serve;
use terminull_pi::Pi;

fn main() -> ExitCode {
    serve::<Pi>()
}
