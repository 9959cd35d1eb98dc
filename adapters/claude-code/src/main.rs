//! `terminull-claude-code`: the Claude Code adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_adapter_sdk::serve;
use terminull_claude_code::ClaudeCode;

fn main() -> ExitCode {
    serve::<ClaudeCode>()
}
