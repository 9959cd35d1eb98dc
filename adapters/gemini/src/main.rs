//! `terminull-gemini`: the Gemini CLI adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_acp::AcpAdapter;
use terminull_adapter_sdk::serve;
use terminull_gemini::Gemini;

fn main() -> ExitCode {
    serve::<AcpAdapter<Gemini>>()
}
