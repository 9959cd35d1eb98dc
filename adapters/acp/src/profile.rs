//! What differs between ACP agents: the [`AcpProfile`] an adapter built on this host
//! implements. Everything else (the handshake, sessions, the turn, permissions, the
//! mapping) is shared.

use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;

use terminull_adapter_sdk::detect::detect_cli;
use terminull_adapter_sdk::handoff::NoHandoff;
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::program_on_path;
use terminull_protocol::adapter::DetectResult;

use crate::mapping::{ChunkRewrite, keep_chunk};
use crate::notice::Notices;

/// The init params an ACP adapter usually accepts.
pub const DEFAULT_INIT_PARAMS: &[InitParam] = &[
    InitParam::Cwd,
    InitParam::Model,
    InitParam::Binary,
    InitParam::ResumeSessionId,
    InitParam::OnSessionId,
    InitParam::PermissionMode,
];

/// What the session asked for, already checked against the profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The working directory (absolute); the adapter's own when the bridge gave none.
    pub cwd: PathBuf,
    /// The `binary` init param: the agent's executable.
    pub binary: Option<String>,
    /// The `model` init param.
    pub model: Option<String>,
    /// The `permission_mode` init param.
    pub permission_mode: Option<String>,
}

/// How to start the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Added to the (inherited, otherwise unchanged) environment.
    pub env: Vec<(OsString, OsString)>,
}

/// How a start param reaches the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// On the command line ([`AcpProfile::launch`] put it there): nothing to do over ACP.
    CommandLine,
    /// Over ACP, after the session is open: `session/set_mode` / `session/set_model`
    /// with this id, checked against what the session offers.
    Acp(String),
}

/// What runs once a `session/load` succeeded (see [`AcpProfile::prepare_load`]).
pub type AfterLoad = Box<dyn FnOnce() + Send>;

/// One ACP agent. See the [module documentation](self).
pub trait AcpProfile: Send + Sync + Sized + 'static {
    /// The adapter's agent id.
    const AGENT_ID: &'static str;
    /// The agent's display name.
    const DISPLAY_NAME: &'static str;
    /// The agent's executable name (what `detect` probes).
    const CLI_BINARY: Option<&'static str>;
    /// The agent version the adapter was checked against.
    const VERIFIED_AGAINST: Option<&'static str> = None;
    /// The capability flags. An ACP agent always can ask permission and be cancelled;
    /// images and documents depend on its `promptCapabilities`.
    const CAPS: Caps;
    /// The lease (the declaration may override it at run time; the host follows the
    /// effective declaration).
    const LEASE: LeaseKind = LeaseKind::Persistent;
    /// The init params accepted.
    const INIT_PARAMS: &'static [InitParam] = DEFAULT_INIT_PARAMS;
    /// The permission modes accepted, checked at `start`; `None` accepts the session
    /// modes the agent offers (checked once the session is open).
    const PERMISSION_MODES: Option<&'static [&'static str]> = None;

    /// The command that starts the agent in ACP mode for these settings.
    fn launch(settings: &Settings) -> Result<Launch, AdapterError>;

    /// How `permission_mode` reaches the agent.
    fn permission_mode_via(mode: &str) -> Via {
        Via::Acp(mode.to_owned())
    }

    /// How `model` reaches the agent.
    fn model_via(model: &str) -> Via {
        Via::Acp(model.to_owned())
    }

    /// The agent answers `session/load` of a session it does not know with an empty
    /// result (`null` or `{}`) instead of an error. ACP allows an empty result for a
    /// successful load, so this is off by default; Hermes 0.19 answers a real load with
    /// the session's modes and models.
    const EMPTY_LOAD_MEANS_UNKNOWN: bool = false;

    /// Runs just before `session/load` of `session_id` in `cwd`, for an agent whose load
    /// harms its own session store (Gemini CLI); what it returns runs once the load
    /// succeeded (default: nothing).
    fn prepare_load(_cwd: &std::path::Path, _session_id: &str) -> Option<AfterLoad> {
        None
    }

    /// Rewrites each thought chunk (default: unchanged).
    const REWRITE_THOUGHT: ChunkRewrite = keep_chunk;

    /// The agent's retry and failure notices that ACP does not mark as such: in its
    /// message text or on its stderr (default: none; see [`crate::notice`]).
    const NOTICES: Notices = Notices::NONE;

    /// The handoff hooks the profile implements (default: none). `release` is the
    /// host's (it lets the agent process go); the others are the profile's functions
    /// profile's [`handoff`](Self::handoff).
    const HANDOFF_HOOKS: &'static [HandoffHook] = &[];

    /// The handoff hooks in [`Self::HANDOFF_HOOKS`] other than `release`, read from the
    /// agent's own session store (default: none).
    fn handoff() -> Option<impl Handoff> {
        None::<NoHandoff>
    }

    /// Is the agent installed here. Default: `CLI_BINARY --version`, reduced to the
    /// version number.
    fn detect() -> impl Future<Output = DetectResult> + Send {
        async {
            match Self::CLI_BINARY {
                Some(binary) => {
                    // 25 s: Copilot CLI's first run in a fresh HOME unpacks its package (5.6 s measured on a
                    // loaded machine) and Hermes imports for seconds; the bridge waits 30 s.
                    let mut detected = detect_cli(binary, std::time::Duration::from_secs(25)).await;
                    detected.version = detected.version.map(|v| parse_version(&v).unwrap_or(v));
                    detected
                }
                None => DetectResult { installed: true, version: None, path: None, reason: None },
            }
        }
    }
}

/// The first version-looking word of a `--version` output, without a leading `v`
/// or trailing punctuation (`Hermes Agent v0.19.0 (2026.7.20)` → `0.19.0`,
/// `GitHub Copilot CLI 1.0.102.` → `1.0.102`).
pub fn parse_version(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .map(|w| w.strip_prefix('v').unwrap_or(w).trim_end_matches(|c: char| !c.is_ascii_alphanumeric()))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}

/// The program to run: the `binary` init param when given, else `name` on `PATH`.
pub fn program(settings: &Settings, name: &str, display_name: &str) -> Result<PathBuf, AdapterError> {
    program_on_path(settings.binary.as_deref(), name, display_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_the_first_version_looking_word() {
        assert_eq!(parse_version("Hermes Agent v0.19.0 (2026.7.20)").as_deref(), Some("0.19.0"));
        assert_eq!(parse_version("0.61.0").as_deref(), Some("0.61.0"));
        assert_eq!(
            parse_version("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.").as_deref(),
            Some("1.0.102")
        );
        assert_eq!(parse_version("no version here"), None);
    }
}
