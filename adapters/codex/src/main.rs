//! `terminull-codex`: the Codex adapter executable. stdout carries the adapter protocol
//! only; logs go to stderr (`TERMINULL_LOG` sets the level).

use std::process::ExitCode;

use terminull_adapter_sdk::serve;
use terminull_codex::Codex;

fn main() -> ExitCode {
    serve::<Codex>()
}
