//! The [`Cursor`] adapter: one `cursor-agent -p --output-format stream-json` process per
//! turn.
//!
//! `start` only checks the settings and the CLI (`<binary> --version`); nothing runs
//! between turns. `send` builds the turn's command line ([`crate::command`]), spawns it
//! through the SDK's [`AgentProcess`] (own process group, bounded stdout lines and stderr
//! tail), closes its stdin at once (the prompt is an argument; a piped stdin would be read
//! as more prompt), feeds every stdout line through the pure [`TurnMapper`] and carries
//! out the actions: stream blocks, report the chat id, end the turn. The chat id from
//! `system`/`init` makes the next turn a `--resume`.
//!
//! Interrupt: SIGINT to the process group (the CLI's Ctrl-C; it also reaches the commands
//! it runs), up to [`INTERRUPT_GRACE`] to exit, then the SDK's shutdown ladder (SIGTERM,
//! SIGKILL). The chat stays resumable: the next turn resumes it.

use std::time::Duration;

use terminull_adapter_sdk::child::{AgentProcess, SpawnOptions};
use terminull_adapter_sdk::per_turn::{Driven, TurnProcess};
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::{binary, require_cli, working_dir};
use tokio::process::Command;

use crate::command::{PermissionMode, Settings, turn_args};
use crate::events::parse_event;
use crate::mapping::TurnMapper;

/// The executable's name on `PATH` (newer installs also name it `agent`; pass that as
/// the `binary` init param).
pub const BINARY: &str = "cursor-agent";
/// How long `<binary> --version` may take at `start`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// After SIGINT, how long the CLI gets to exit on its own.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(3);
/// The CLI's turn process: after the `result` event (or end of stdout) it gets 3 s to
/// exit; each step of the SDK's shutdown ladder gets 2 s.
const PROCESS: TurnProcess = TurnProcess {
    agent: "cursor-agent",
    interrupt_grace: INTERRUPT_GRACE,
    exit_wait: Duration::from_secs(3),
    shutdown_grace: Duration::from_secs(2),
};

/// One Cursor session: the settings every turn's command line is built from, and the
/// conversation (the chat to resume, the usage totals for `get_usage`).
#[derive(Debug)]
pub struct Cursor {
    binary: String,
    settings: Settings,
    chat: Conversation,
}

impl Adapter for Cursor {
    const AGENT_ID: &'static str = "cursor";
    const DISPLAY_NAME: &'static str = "Cursor";
    const CLI_BINARY: Option<&'static str> = Some(BINARY);
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    // Built from Cursor's documentation only: never run against the real binary.
    const VERIFIED_AGAINST: Option<&'static str> = None;
    // images: print mode takes a text prompt only.
    // thinking: `thinking` delta/completed events, where the CLI prints them.
    // permissions: print mode never asks; the permission mode decides.
    const CAPS: Caps = caps! {
        supported: [thinking, interrupt],
        unsupported: [images, documents, permissions, subagents, input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::PerTurn;
    const INIT_PARAMS: &'static [InitParam] = &[
        InitParam::Cwd,
        InitParam::Model,
        InitParam::Binary,
        InitParam::ResumeSessionId,
        InitParam::OnSessionId,
        InitParam::PermissionMode,
    ];

    type Models = NotProvided;
    type Usage = Provided;

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let mode = PermissionMode::parse(init.permission_mode.as_deref())?;
        let cwd = working_dir(init.cwd.as_deref())?;
        let binary = binary(init.binary.clone(), BINARY);
        let version = require_cli(&binary, "cursor-agent", VERSION_TIMEOUT).await?;
        let chat_id = init.resume_session_id.as_ref().map(|id| id.as_str().to_owned());
        if let Some(id) = &chat_id {
            session.set_agent_session_id(id.as_str()).await?;
        }
        tracing::info!(%binary, cwd = %cwd.display(), ?mode, resume = ?chat_id, "cursor session ready");
        let model = init.model.clone();
        let settings = Settings { cwd, model: init.model, mode };
        let adapter = Cursor { binary, settings, chat: Conversation::new("cursor-agent", chat_id) };
        Ok((adapter, StartInfo { version, model, slash_commands: Vec::new() }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        if let Some(first) = message.attachments.first() {
            return Err(AdapterError::invalid(format!(
                "`{}` is an attachment; cursor-agent's print mode takes text only (mention the file's path instead)",
                first.name
            )));
        }
        let args = turn_args(&self.settings, self.chat.id(), &message.text);
        tracing::debug!(binary = %self.binary, ?args, "starting cursor-agent");
        let mut cmd = Command::new(&self.binary);
        cmd.args(&args).current_dir(&self.settings.cwd);
        let (mut process, mut lines) =
            AgentProcess::spawn(cmd, SpawnOptions::default()).map_err(AdapterError::agent)?;
        process.close_stdin();

        let mut mapper = TurnMapper::new(mint_id("cursor"), self.chat.id().map(str::to_owned));
        let status = match PROCESS
            .drive(&mut process, &mut lines, turn, &mut self.chat, &mut mapper, parse_event, async |a| a)
            .await?
        {
            Driven::Ended(reason) => return Ok(reason),
            Driven::Closed(status) => status,
        };
        // stdout closed before the CLI printed its result.
        let stderr = process.stderr_tail();
        let detail = PROCESS.exit_detail(status, &stderr);
        tracing::warn!("{detail}");
        match self.chat.apply(mapper.on_exit(&detail, exit_code(&stderr)), turn).await? {
            Some(end) => self.chat.end_turn(end, turn).await,
            None => Ok(EndReason::Error),
        }
    }
}

impl GetUsage for Cursor {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.chat.totals().clone())
    }
}

/// The `error` code for a turn the CLI ended without a result: `auth_required` when its
/// stderr says it is not logged in, else `agent_exited`.
fn exit_code(stderr_tail: &str) -> &'static str {
    let lower = stderr_tail.to_ascii_lowercase();
    let auth = ["not logged in", "not authenticated", "authentication required", "cursor_api_key", "agent login"];
    if auth.iter().any(|needle| lower.contains(needle)) { "auth_required" } else { "agent_exited" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        let cases = [
            ("Error: Not logged in. Run 'cursor-agent login', or set CURSOR_API_KEY.", "auth_required"),
            ("Authentication required", "auth_required"),
            ("Error: connect ECONNREFUSED 127.0.0.1:443", "agent_exited"),
            ("", "agent_exited"),
        ];
        for (stderr, want) in cases {
            assert_eq!(exit_code(stderr), want, "{stderr}");
        }
    }
}
