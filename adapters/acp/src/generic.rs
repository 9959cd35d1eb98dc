//! The generic host: any ACP agent, its identity and command given at run time.
//!
//! `terminull-acp --agent-id ID [--name NAME] [--lease persistent|per_turn] -- <command> [args…]`
//! serves the agent `<command>` under agent id `ID`. The bridge runs it this way for
//! every `[acp_agents.<id>]` of its `config.toml` (docs/acp.md). The declaration's
//! identity comes from the command line through the SDK's
//! [`DeclarationOverride`](terminull_adapter_sdk::DeclarationOverride); the command is
//! kept in a process-wide cell read by the [`Generic`] profile.

use std::ffi::OsString;
use std::path::Path;
use std::sync::OnceLock;

use terminull_adapter_sdk::DeclarationOverride;
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::adapter::{DetectResult, is_valid_agent_id};
use terminull_protocol::ids::AgentId;

use crate::profile::{AcpProfile, Launch, Settings};

/// The usage line of `terminull-acp`.
pub const USAGE: &str =
    "usage: terminull-acp --agent-id ID [--name NAME] [--lease persistent|per_turn] -- COMMAND [ARG...]";

/// The agent command of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    /// The executable.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

static COMMAND: OnceLock<AgentCommand> = OnceLock::new();

/// Sets the command [`Generic`] runs; the first call wins (one agent per process).
pub fn install(command: AgentCommand) {
    if COMMAND.set(command).is_err() {
        tracing::debug!("the generic ACP command was already set");
    }
}

fn installed() -> Option<&'static AgentCommand> {
    COMMAND.get()
}

/// A parsed `terminull-acp` command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The declaration's identity.
    pub overrides: DeclarationOverride,
    /// The agent to run.
    pub command: AgentCommand,
}

/// What is wrong with a `terminull-acp` command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// A flag without its value.
    #[error("{0} needs a value")]
    MissingValue(&'static str),
    /// `--lease` with another value than `persistent` or `per_turn`.
    #[error("unknown lease `{0}`; use persistent or per_turn")]
    UnknownLease(String),
    /// An argument that is not one of the flags (before `--`).
    #[error("unexpected argument `{0}`")]
    Unexpected(String),
    /// No `--agent-id`.
    #[error("--agent-id is required")]
    NoAgentId,
    /// An `--agent-id` the bridge would refuse.
    #[error("`{0}` is not a valid agent id (1-64 of a-z 0-9 _ -, starting with a letter or digit)")]
    InvalidAgentId(String),
    /// Nothing after `--`.
    #[error("the agent command is missing after --")]
    NoCommand,
}

/// Parses the arguments after the program name.
pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, ArgsError> {
    let mut args = args.into_iter();
    let mut agent_id = None;
    let mut name = None;
    let mut lease = None;
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        let mut value =
            |flag: &'static str| args.next().and_then(|v| v.into_string().ok()).ok_or(ArgsError::MissingValue(flag));
        match arg.to_str() {
            Some("--") => {
                command.extend(args.by_ref());
                break;
            }
            Some("--agent-id") => agent_id = Some(value("--agent-id")?),
            Some("--name") => name = Some(value("--name")?),
            Some("--lease") => {
                lease = Some(match value("--lease")?.as_str() {
                    "persistent" => LeaseKind::Persistent,
                    "per_turn" | "per-turn" => LeaseKind::PerTurn,
                    other => return Err(ArgsError::UnknownLease(other.to_owned())),
                })
            }
            _ => return Err(ArgsError::Unexpected(arg.to_string_lossy().into_owned())),
        }
    }
    let agent_id = agent_id.ok_or(ArgsError::NoAgentId)?;
    if !is_valid_agent_id(&agent_id) {
        return Err(ArgsError::InvalidAgentId(agent_id));
    }
    let mut command = command.into_iter();
    let program = command.next().ok_or(ArgsError::NoCommand)?;
    let cli = Path::new(&program).file_name().map(|n| n.to_string_lossy().into_owned());
    let display_name = name.filter(|n| !n.trim().is_empty()).unwrap_or_else(|| agent_id.clone());
    Ok(Invocation {
        overrides: DeclarationOverride {
            agent_id: Some(AgentId::from(agent_id)),
            display_name: Some(display_name),
            cli_binary: cli,
            lease,
        },
        command: AgentCommand { program, args: command.collect() },
    })
}

/// Any ACP agent; see the [module documentation](self).
#[derive(Debug)]
pub struct Generic;

impl AcpProfile for Generic {
    const AGENT_ID: &'static str = "acp";
    const DISPLAY_NAME: &'static str = "ACP agent";
    const CLI_BINARY: Option<&'static str> = None;
    const CAPS: Caps = caps! {
        supported: [thinking, permissions, interrupt],
        unsupported: [images, documents, subagents, input_during_turn, terminal],
    };

    fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
        let command = installed().ok_or_else(|| AdapterError::agent("no agent command was given (-- COMMAND)"))?;
        let program = match settings.binary.as_deref().filter(|b| !b.trim().is_empty()) {
            Some(binary) => binary.into(),
            None => command.program.clone().into(),
        };
        Ok(Launch { program, args: command.args.clone(), env: Vec::new() })
    }

    async fn detect() -> DetectResult {
        let Some(command) = installed() else {
            return DetectResult {
                installed: false,
                version: None,
                path: None,
                reason: Some("no agent command".into()),
            };
        };
        match which::which(&command.program) {
            Ok(path) => {
                DetectResult { installed: true, version: None, path: Some(path.display().to_string()), reason: None }
            }
            Err(_) => DetectResult {
                installed: false,
                version: None,
                path: None,
                reason: Some(format!("`{}` was not found", command.program.to_string_lossy())),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Invocation, ArgsError> {
        parse_args(args.iter().map(OsString::from))
    }

    #[test]
    fn the_command_line_gives_identity_lease_and_command() {
        let inv =
            parse(&["--agent-id", "goose", "--name", "Goose", "--lease", "per_turn", "--", "/opt/goose", "acp", "--x"])
                .unwrap();
        assert_eq!(inv.overrides.agent_id.as_ref().map(AgentId::as_str), Some("goose"));
        assert_eq!(inv.overrides.display_name.as_deref(), Some("Goose"));
        assert_eq!(inv.overrides.cli_binary.as_deref(), Some("goose"));
        assert_eq!(inv.overrides.lease, Some(LeaseKind::PerTurn));
        assert_eq!(inv.command.program, OsString::from("/opt/goose"));
        assert_eq!(inv.command.args, vec![OsString::from("acp"), OsString::from("--x")]);
        let inv = parse(&["--agent-id", "x", "--", "agent"]).unwrap();
        assert_eq!(inv.overrides.display_name.as_deref(), Some("x"), "the name defaults to the id");
        assert_eq!(inv.overrides.lease, None);
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        for (args, needle) in [
            (&["--", "agent"][..], "--agent-id is required"),
            (&["--agent-id", "Bad Id", "--", "a"][..], "not a valid agent id"),
            (&["--agent-id", "x"][..], "command is missing"),
            (&["--agent-id", "x", "--lease", "sometimes", "--", "a"][..], "unknown lease"),
            (&["--agent-id"][..], "needs a value"),
            (&["--agnet-id", "x"][..], "unexpected argument"),
        ] {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }
}
