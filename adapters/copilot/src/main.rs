//! `terminull-copilot`: the GitHub Copilot CLI adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_acp::AcpAdapter;
use terminull_adapter_sdk::serve;
use terminull_copilot::Copilot;

fn main() -> ExitCode {
    serve::<AcpAdapter<Copilot>>()
}
