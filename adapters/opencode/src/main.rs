//! `terminull-opencode`: the OpenCode adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_adapter_sdk::serve;
use terminull_opencode::OpenCodeAdapter;

fn main() -> ExitCode {
    serve::<OpenCodeAdapter>()
}
