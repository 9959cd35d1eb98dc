//! The terminull adapter for [Qwen Code](https://github.com/QwenLM/qwen-code), a thin
//! profile on the ACP host (`terminull-acp`): it runs `qwen --acp` and speaks the Agent
//! Client Protocol with it. What is Qwen-specific (its usage on empty message chunks,
//! its shell calls announced empty and completed by the permission request) is handled
//! by the host's generic mapping; see `docs/adapters/qwen.md`.

#![warn(missing_docs)]

use std::ffi::OsString;

use terminull_acp::profile::{self, AcpProfile, Launch, Settings, Via};
use terminull_adapter_sdk::prelude::*;

/// The Qwen Code profile.
#[derive(Debug)]
pub struct Qwen;

impl AcpProfile for Qwen {
    const AGENT_ID: &'static str = "qwen";
    const DISPLAY_NAME: &'static str = "Qwen Code";
    const CLI_BINARY: Option<&'static str> = Some("qwen");
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.24.4");
    // images: promptCapabilities: image, audio, embeddedContext.
    const CAPS: Caps = caps! {
        supported: [images, documents, thinking, permissions, interrupt],
        unsupported: [subagents, input_during_turn, terminal],
    };

    fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
        let program = profile::program(settings, "qwen", "Qwen Code (npm install -g @qwen-code/qwen-code)")?;
        Ok(Launch { program, args: args(settings), env: Vec::new() })
    }

    /// The model is a command-line flag: Qwen Code takes any model name of its
    /// provider there.
    fn model_via(_: &str) -> Via {
        Via::CommandLine
    }
}

/// `qwen --acp [--model <model>]`.
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
    fn the_command_line_is_acp_mode_with_the_model_and_modes_go_over_acp() {
        let settings = Settings {
            cwd: PathBuf::from("/"),
            binary: Some("/opt/qwen".into()),
            model: Some("qwen3-coder-plus".into()),
            permission_mode: None,
        };
        let launch = Qwen::launch(&settings).unwrap();
        assert_eq!(launch.program, PathBuf::from("/opt/qwen"));
        assert_eq!(launch.args, ["--acp", "--model", "qwen3-coder-plus"].map(OsString::from));
        assert_eq!(args(&Settings::default()), ["--acp"].map(OsString::from));
        assert_eq!(Qwen::permission_mode_via("yolo"), Via::Acp("yolo".into()));
    }

    #[test]
    fn the_declaration_is_qwen_codes() {
        let d = declaration::<terminull_acp::AcpAdapter<Qwen>>();
        assert_eq!((d.agent_id.as_str(), d.display_name.as_str()), ("qwen", "Qwen Code"));
        assert_eq!(d.cli_binary.as_deref(), Some("qwen"));
        assert_eq!(d.verified_against.as_deref(), Some("0.24.4"));
        assert!(d.capabilities.provides_usage && d.capabilities.cap_permissions);
    }
}
