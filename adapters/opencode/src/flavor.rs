//! What differs between OpenCode and its forks: the [`Flavor`]. Kilo (`@kilocode/cli`)
//! is an OpenCode fork with the same ACP server, the same event shapes and the same
//! session settings; only its names, environment variables and configuration paths
//! differ, so one adapter serves both (`OpenCodeFamily<OpenCode>` here,
//! `OpenCodeFamily<Kilo>` in the `terminull-kilo` crate).

/// One CLI of the OpenCode family.
pub trait Flavor: Send + Sync + Sized + 'static {
    /// The adapter's agent id.
    const AGENT_ID: &'static str;
    /// The agent's display name.
    const DISPLAY_NAME: &'static str;
    /// The CLI's executable name.
    const CLI_BINARY: &'static str;
    /// The CLI version the adapter was checked against.
    const VERIFIED_AGAINST: &'static str;
    /// The prefix of the CLI's environment variables (`OPENCODE` → `OPENCODE_CONFIG_CONTENT`,
    /// `OPENCODE_PERMISSION`, …).
    const ENV_PREFIX: &'static str;
    /// The user's configuration file, relative to the home directory.
    const CONFIG_FILE: &'static str;

    /// Where the model, agent and permission choices come from, for error messages.
    fn config_hint() -> String {
        format!(" (set up in ~/{} or ${}_CONFIG_CONTENT)", Self::CONFIG_FILE, Self::ENV_PREFIX)
    }
}

/// OpenCode (`opencode-ai`).
#[derive(Debug, Clone, Copy)]
pub struct OpenCode;

impl Flavor for OpenCode {
    const AGENT_ID: &'static str = "opencode";
    const DISPLAY_NAME: &'static str = "OpenCode";
    const CLI_BINARY: &'static str = "opencode";
    const VERIFIED_AGAINST: &'static str = "1.18.33";
    const ENV_PREFIX: &'static str = "OPENCODE";
    const CONFIG_FILE: &'static str = ".config/opencode/opencode.json";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_the_config_file_and_variable() {
        assert_eq!(
            OpenCode::config_hint(),
            " (set up in ~/.config/opencode/opencode.json or $OPENCODE_CONFIG_CONTENT)"
        );
    }
}
