//! `terminull-qwen`: the Qwen Code adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_acp::AcpAdapter;
use terminull_adapter_sdk::serve;
use terminull_qwen::Qwen;

fn main() -> ExitCode {
    serve::<AcpAdapter<Qwen>>()
}
