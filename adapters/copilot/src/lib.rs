//! The terminull adapter for [GitHub Copilot CLI](https://github.com/github/copilot-cli),
//! a thin profile on the ACP host (`terminull-acp`): it runs `copilot --acp` and speaks
//! the Agent Client Protocol with it. See `docs/adapters/copilot.md`.

#![warn(missing_docs)]

use std::ffi::OsString;

use terminull_acp::notice::{Notice, Notices, no_notice};
use terminull_acp::profile::{self, AcpProfile, Launch, Settings, Via};
use terminull_adapter_sdk::prelude::*;

/// The GitHub Copilot CLI profile.
#[derive(Debug)]
pub struct Copilot;

impl AcpProfile for Copilot {
    const AGENT_ID: &'static str = "copilot";
    const DISPLAY_NAME: &'static str = "GitHub Copilot CLI";
    const CLI_BINARY: Option<&'static str> = Some("copilot");
    const VERIFIED_AGAINST: Option<&'static str> = Some("1.0.102");
    const CAPS: Caps = caps! {
        supported: [images, thinking, permissions, interrupt],
        unsupported: [documents, subagents, input_during_turn, terminal],
    };

    const NOTICES: Notices = Notices { message: message_notice, stderr: no_notice };

    fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
        let program = profile::program(settings, "copilot", "GitHub Copilot CLI (npm install -g @github/copilot)")?;
        Ok(Launch { program, args: args(settings), env: Vec::new() })
    }

    /// The model is a command-line flag (`--model`).
    fn model_via(_: &str) -> Via {
        Via::CommandLine
    }
}

/// Copilot CLI 1.0 writes its retries and its giving up as message text, each one chunk:
/// `Info: Request failed due to a transient API error. Retrying...` per retry, then
/// `Error: Failed to get response from the AI model; retried 5 times (…) Last error: …`
/// with `stopReason: end_turn`.
pub fn message_notice(text: &str) -> Option<Notice> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("Info: Request failed") {
        let why = rest.trim_start().strip_prefix("due to ").unwrap_or(rest);
        let why = why.split(". Retrying").next().unwrap_or(why).trim().trim_end_matches('.');
        return Some(Notice::Retrying { attempt: None, total: None, why: why.to_owned() });
    }
    if text.starts_with("Error: Failed to get response from the AI model") {
        return Some(Notice::GaveUp(text.trim_start_matches("Error: ").to_owned()));
    }
    None
}

/// `copilot --acp [--model <model>]`.
pub fn args(settings: &Settings) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--acp".into()];
    if let Some(model) = &settings.model {
        args.push("--model".into());
        args.push(model.into());
    }
    args
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use terminull_adapter_sdk::adapter::declaration;

    use super::*;

    #[test]
    fn the_command_line_is_acp_mode_with_the_model() {
        let settings =
            Settings { binary: Some("/opt/copilot".into()), model: Some("gpt-5".into()), ..Settings::default() };
        let launch = Copilot::launch(&settings).unwrap();
        assert_eq!(launch.program, PathBuf::from("/opt/copilot"));
        assert_eq!(launch.args, ["--acp", "--model", "gpt-5"].map(OsString::from));
        assert_eq!(args(&Settings::default()), ["--acp"].map(OsString::from));
    }

    #[test]
    fn copilots_retry_and_failure_texts_are_notices() {
        let retry = message_notice("Info: Request failed due to a transient API error. Retrying...");
        assert_eq!(retry, Some(Notice::Retrying { attempt: None, total: None, why: "a transient API error".into() }));
        let failed = "Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 15.98 seconds) Last error: 500 scripted failure";
        assert_eq!(
            message_notice(failed),
            Some(Notice::GaveUp(
                "Failed to get response from the AI model; retried 5 times (total retry wait time: 15.98 seconds) Last error: 500 scripted failure".into()
            ))
        );
        assert_eq!(message_notice("Info: the answer is 42"), None);
        assert_eq!(message_notice("Error handling in Rust uses Result."), None);
    }

    #[test]
    fn the_declaration_is_copilots() {
        let d = declaration::<terminull_acp::AcpAdapter<Copilot>>();
        assert_eq!((d.agent_id.as_str(), d.display_name.as_str()), ("copilot", "GitHub Copilot CLI"));
        assert_eq!(d.cli_binary.as_deref(), Some("copilot"));
        assert_eq!(d.verified_against.as_deref(), Some("1.0.102"));
        assert!(d.capabilities.provides_usage && d.capabilities.cap_permissions);
    }
}
