//! The terminull adapter for [Hermes Agent](https://github.com/NousResearch/hermes-agent)
//! (Nous Research), a thin profile on the ACP host (`terminull-acp`): it runs
//! `hermes acp` (which needs `hermes-agent[acp]`) and speaks the Agent Client Protocol
//! with it. See `docs/adapters/hermes.md`.

#![warn(missing_docs)]

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

    fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
        let program = profile::program(settings, "hermes", "Hermes Agent (pip install 'hermes-agent[acp]')")?;
        Ok(Launch { program, args: vec!["acp".into()], env: Vec::new() })
    }
}

#[cfg(test)]
mod tests {
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
