//! `terminull-acp`: serves any ACP agent as a terminull adapter (see the library crate).
//!
//! `terminull-acp --agent-id ID [--name NAME] [--lease persistent|per_turn] -- COMMAND [ARG...]`

use std::process::ExitCode;

use terminull_acp::AcpAdapter;
use terminull_acp::generic::{self, Generic, USAGE};
use terminull_adapter_sdk::serve_with;

fn main() -> ExitCode {
    let invocation = match generic::parse_args(std::env::args_os().skip(1)) {
        Ok(invocation) => invocation,
        Err(e) => {
            // stdout belongs to the protocol: the complaint goes to stderr.
            eprintln!("terminull-acp: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    generic::install(invocation.command);
    serve_with::<AcpAdapter<Generic>>(invocation.overrides)
}
