//! `terminull-hermes`: the Hermes Agent adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_acp::AcpAdapter;
use terminull_adapter_sdk::serve;
use terminull_hermes::Hermes;

fn main() -> ExitCode {
    serve::<AcpAdapter<Hermes>>()
}
