//! Runs the bridge's contract check on a declaration file and prints every violation.
//!
//! `cargo run -p terminull-protocol --example check_declaration -- examples/declarations/echo.json`

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check_declaration FILE.json");
        return ExitCode::from(2);
    };
    let value: serde_json::Value = match std::fs::read_to_string(&path).map(|t| serde_json::from_str(&t)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            eprintln!("{path}: not JSON: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    match terminull_protocol::adapter::check_declaration(&value) {
        Ok(d) => {
            eprintln!("{path}: accepted ({})", d.agent_id);
            ExitCode::SUCCESS
        }
        Err(violations) => {
            for v in violations {
                eprintln!("{v}");
            }
            ExitCode::FAILURE
        }
    }
}
