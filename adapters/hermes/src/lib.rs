//! The terminull adapter for [Hermes Agent](https://github.com/NousResearch/hermes-agent)
//! (Nous Research), a thin profile on the ACP host (`terminull-acp`): it runs
//! `hermes acp` (which needs `hermes-agent[acp]`) and speaks the Agent Client Protocol
//! with it. See `docs/adapters/hermes.md`.

#![warn(missing_docs)]

pub mod handoff;

use terminull_acp::notice::{Notice, Notices, fraction_after};
use terminull_acp::profile::{self, AcpProfile, Launch, Settings};
use terminull_adapter_sdk::prelude::*;

/// Hermes' ACP session modes (its edit-approval policies).
pub const PERMISSION_MODES: &[&str] = &["default", "accept_edits", "dont_ask"];

/// The Hermes Agent profile.
#[derive(Debug)]
pub struct Hermes;

impl AcpProfile for Hermes {
    const AGENT_ID: &'static str = "hermes";
    const DISPLAY_NAME: &'static str = "Hermes Agent";
    const CLI_BINARY: Option<&'static str> = Some("hermes");
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.19.0");
    // images: promptCapabilities: image only.
    const CAPS: Caps = caps! {
        supported: [images, thinking, permissions, interrupt],
        unsupported: [documents, subagents, input_during_turn, terminal],
    };
    const PERMISSION_MODES: Option<&'static [&'static str]> = Some(PERMISSION_MODES);
    /// `session/load` of an unknown id answers `{}` (and prompts for it are refused).
    const EMPTY_LOAD_MEANS_UNKNOWN: bool = true;
    const NOTICES: Notices = Notices { message: message_notice, stderr: stderr_notice };
    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PERSISTENT_HOOKS;

    fn handoff() -> Option<impl Handoff> {
        Some(handoff::HermesSessions)
    }

    fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
        let program = profile::program(settings, "hermes", "Hermes Agent (pip install 'hermes-agent[acp]')")?;
        Ok(Launch { program, args: vec!["acp".into()], env: Vec::new() })
    }
}

/// Hermes 0.19 logs each failed model call on stderr
/// (`[WARNING] agent.conversation_loop: API call failed (attempt 1/3) … summary=HTTP 500: …`)
/// and retries it while its ACP stream says nothing; the last attempt is not a retry.
pub fn stderr_notice(line: &str) -> Option<Notice> {
    if !line.contains("agent.conversation_loop:") {
        return None;
    }
    let (attempt, total) = fraction_after(line, "API call failed (attempt ")?;
    if attempt >= total {
        return None;
    }
    let why = line.split_once(" summary=").map_or("the model call failed", |(_, why)| why.trim());
    Some(Notice::Retrying { attempt: Some(attempt), total: Some(total), why: why.to_owned() })
}

/// When it gives up, Hermes answers with the text `API call failed after N retries: …`
/// and `stopReason: end_turn`.
pub fn message_notice(text: &str) -> Option<Notice> {
    let text = text.trim();
    text.starts_with("API call failed after ").then(|| Notice::GaveUp(text.to_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn hermes_retries_on_stderr_and_its_failure_answer_are_notices() {
        let line = "2026-12-02 06:26:22 [WARNING] agent.conversation_loop: API call failed (attempt 1/3) error_type=InternalServerError thread=acp-agent_0:1 provider=custom model=mock-model summary=HTTP 500: scripted failure";
        assert_eq!(
            stderr_notice(line),
            Some(Notice::Retrying { attempt: Some(1), total: Some(3), why: "HTTP 500: scripted failure".into() })
        );
        assert_eq!(stderr_notice(&line.replace("1/3", "3/3")), None, "the last attempt is no retry");
        assert_eq!(stderr_notice("⚠️  API call failed (attempt 1/3): InternalServerError [HTTP 500]"), None);
        assert_eq!(
            message_notice("API call failed after 2 retries: HTTP 500: scripted failure"),
            Some(Notice::GaveUp("API call failed after 2 retries: HTTP 500: scripted failure".into()))
        );
        assert_eq!(message_notice("Hello"), None);
    }

    use std::ffi::OsString;
    use std::path::PathBuf;

    use terminull_acp::Via;

    use super::*;

    #[test]
    fn the_command_line_is_hermes_acp_and_modes_and_models_go_over_acp() {
        let settings = Settings {
            cwd: PathBuf::from("/"),
            binary: Some("/venv/bin/hermes".into()),
            model: None,
            permission_mode: None,
        };
        let launch = Hermes::launch(&settings).unwrap();
        assert_eq!((launch.program, launch.args), (PathBuf::from("/venv/bin/hermes"), vec![OsString::from("acp")]));
        assert_eq!(Hermes::permission_mode_via("dont_ask"), Via::Acp("dont_ask".into()));
        assert_eq!(Hermes::model_via("custom:mock-model"), Via::Acp("custom:mock-model".into()));
    }
}
