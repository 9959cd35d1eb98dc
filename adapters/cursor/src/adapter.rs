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

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use terminull_adapter_sdk::child::{AgentProcess, LineReceiver, SpawnOptions, describe_exit, quote_stderr};
use terminull_adapter_sdk::detect::detect_cli;
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::blocks::SessionEnd;
use tokio::process::Command;

use crate::command::{PermissionMode, Settings, turn_args};
use crate::events::parse_event;
use crate::mapping::{Action, TurnMapper};

/// The executable's name on `PATH` (newer installs also name it `agent`; pass that as
/// the `binary` init param).
pub const BINARY: &str = "cursor-agent";
/// How long `<binary> --version` may take at `start`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// After SIGINT, how long the CLI gets to exit on its own.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(3);
/// After the `result` event (or end of stdout), how long the CLI gets to exit.
const EXIT_WAIT: Duration = Duration::from_secs(3);
/// Each step of the SDK's shutdown ladder (close stdin, SIGTERM, SIGKILL).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// One Cursor session: the settings every turn's command line is built from, the chat to
/// resume, and the usage totals for `get_usage`.
#[derive(Debug)]
pub struct Cursor {
    binary: String,
    settings: Settings,
    chat_id: Option<String>,
    totals: Usage,
}

impl Adapter for Cursor {
    const AGENT_ID: &'static str = "cursor";
    const DISPLAY_NAME: &'static str = "Cursor";
    const CLI_BINARY: Option<&'static str> = Some(BINARY);
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    // Built from Cursor's documentation only: never run against the real binary.
    const VERIFIED_AGAINST: Option<&'static str> = None;
    const CAPS: Caps = Caps {
        // Print mode takes a text prompt only.
        images: false,
        documents: false,
        // `thinking` delta/completed events, where the CLI prints them.
        thinking: true,
        // Print mode never asks; the permission mode decides.
        permissions: false,
        subagents: false,
        interrupt: true,
        input_during_turn: false,
        terminal: false,
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
        let mode = PermissionMode::parse(init.permission_mode.as_deref()).map_err(AdapterError::invalid)?;
        let cwd = match &init.cwd {
            Some(cwd) => PathBuf::from(cwd),
            None => std::env::current_dir().map_err(|e| AdapterError::agent(format!("no working directory: {e}")))?,
        };
        let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
        if !cwd.is_dir() {
            return Err(AdapterError::invalid(format!("the working directory {} is not a directory", cwd.display())));
        }
        let binary = init.binary.clone().filter(|b| !b.trim().is_empty()).unwrap_or_else(|| BINARY.to_owned());
        let detected = detect_cli(&binary, VERSION_TIMEOUT).await;
        if !detected.installed {
            let reason = detected.reason.unwrap_or_else(|| format!("`{binary}` cannot be run"));
            return Err(AdapterError::agent(format!("cursor-agent is not available: {reason}")));
        }
        let chat_id = init.resume_session_id.as_ref().map(|id| id.as_str().to_owned());
        if let Some(id) = &chat_id {
            session.set_agent_session_id(id.as_str()).await.map_err(AdapterError::agent)?;
        }
        tracing::info!(%binary, cwd = %cwd.display(), ?mode, resume = ?chat_id, "cursor session ready");
        let model = init.model.clone();
        let settings = Settings { cwd, model: init.model, mode };
        let adapter = Cursor { binary, settings, chat_id, totals: Usage::default() };
        Ok((adapter, StartInfo { version: detected.version, model, slash_commands: Vec::new() }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        if let Some(first) = message.attachments.first() {
            return Err(AdapterError::invalid(format!(
                "`{}` is an attachment; cursor-agent's print mode takes text only (mention the file's path instead)",
                first.name
            )));
        }
        let args = turn_args(&self.settings, self.chat_id.as_deref(), &message.text);
        tracing::debug!(binary = %self.binary, ?args, "starting cursor-agent");
        let mut cmd = Command::new(&self.binary);
        cmd.args(&args).current_dir(&self.settings.cwd);
        let (mut process, mut lines) =
            AgentProcess::spawn(cmd, SpawnOptions::default()).map_err(AdapterError::agent)?;
        process.close_stdin();

        let mut mapper = TurnMapper::new(mint_id("cursor"), self.chat_id.clone());
        loop {
            let next = tokio::select! {
                () = turn.interrupted() => None,
                line = lines.recv() => Some(line),
            };
            let Some(line) = next else {
                return self.interrupt(process, lines, mapper, turn).await;
            };
            let value = match line {
                Some(Ok(value)) => value,
                Some(Err(bad)) => {
                    tracing::warn!("skipping a line of cursor-agent output: {bad}");
                    continue;
                }
                None => break,
            };
            let event = match parse_event(value) {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("skipping a cursor-agent line: {e}");
                    continue;
                }
            };
            if let Some(end) = self.apply(mapper.on_event(event), turn).await? {
                let status = wind_down(&mut process, &mut lines).await;
                tracing::debug!(?status, reason = ?end.reason, "cursor-agent turn ended");
                return self.end_turn(end, turn).await;
            }
        }
        // stdout closed before the CLI printed its result.
        let status = wind_down(&mut process, &mut lines).await;
        let stderr = process.stderr_tail();
        let detail = exit_detail(status, &stderr);
        tracing::warn!("{detail}");
        match self.apply(mapper.on_exit(&detail, exit_code(&stderr)), turn).await? {
            Some(end) => self.end_turn(end, turn).await,
            None => Ok(EndReason::Error),
        }
    }
}

impl GetUsage for Cursor {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.totals.clone())
    }
}

impl Cursor {
    /// Ends the turn's process on interrupt and closes what the turn left open.
    async fn interrupt(
        &mut self,
        mut process: AgentProcess,
        mut lines: LineReceiver,
        mut mapper: TurnMapper,
        turn: &mut Turn,
    ) -> Result<EndReason, AdapterError> {
        tracing::info!(pid = process.pid(), "interrupting cursor-agent");
        let outcome = process.interrupt_and_end(&mut lines, INTERRUPT_GRACE, SHUTDOWN_GRACE).await;
        tracing::debug!(?outcome, "cursor-agent interrupted");
        self.apply(mapper.on_interrupt(), turn).await?;
        Ok(EndReason::Interrupted)
    }

    /// Streams the turn's `session_end` (with this turn's usage, also added to the
    /// session's totals) as the last thing the turn does.
    async fn end_turn(&mut self, end: SessionEnd, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        if let Some(usage) = &end.usage {
            self.totals.add(usage);
        }
        let reason = end.reason;
        emit(turn, BlockKind::SessionEnd(end)).await?;
        Ok(reason)
    }

    /// Carries out the mapper's actions in order, except the turn's end, which is
    /// returned: it is streamed by [`end_turn`](Self::end_turn) only once the CLI has
    /// exited, because `session_end` tells the bridge the session is idle again, and the
    /// next turn must not resume the chat while this process still holds it.
    async fn apply(&mut self, actions: Vec<Action>, turn: &mut Turn) -> Result<Option<SessionEnd>, AdapterError> {
        let mut ended = None;
        for action in actions {
            match action {
                Action::Emit(kind) => emit(turn, kind).await?,
                Action::SessionId(id) => {
                    tracing::info!(chat_id = %id, "cursor-agent chat");
                    self.chat_id = Some(id.clone());
                    turn.session().set_agent_session_id(id).await.map_err(AdapterError::agent)?;
                }
                Action::End(end) => ended = Some(end),
            }
        }
        Ok(ended)
    }
}

/// Streams one block. A block the SDK refuses as a contract breach is logged and
/// dropped (the mapper should never produce one); a closed bridge ends the turn.
async fn emit(turn: &mut Turn, kind: BlockKind) -> Result<(), AdapterError> {
    match turn.emit(kind).await {
        Ok(()) => Ok(()),
        Err(TurnError::Contract(violation)) => {
            tracing::warn!("dropped a block that would break the turn contract: {violation}");
            Ok(())
        }
        Err(e) => Err(AdapterError::agent(e)),
    }
}

/// Lets the CLI finish after its last event: reads the rest of stdout (dropped) and
/// waits for it to exit, at most [`EXIT_WAIT`]; if it does not, the SDK's shutdown ladder
/// ends its process group. The exit status when known. Whatever is left in the process
/// group when the CLI exits by itself is killed when the [`AgentProcess`] is dropped.
async fn wind_down(process: &mut AgentProcess, lines: &mut LineReceiver) -> Option<ExitStatus> {
    let waited = tokio::time::timeout(EXIT_WAIT, async {
        while lines.recv().await.is_some() {}
        process.wait().await
    })
    .await;
    match waited {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            tracing::warn!("waiting for cursor-agent failed: {e}");
            process.shutdown(SHUTDOWN_GRACE).await.status
        }
        Err(_) => {
            tracing::warn!("cursor-agent did not exit within {EXIT_WAIT:?} after its output ended; ending it");
            process.shutdown(SHUTDOWN_GRACE).await.status
        }
    }
}

/// The `error` code for a turn the CLI ended without a result: `auth_required` when its
/// stderr says it is not logged in, else `agent_exited`.
fn exit_code(stderr_tail: &str) -> &'static str {
    let lower = stderr_tail.to_ascii_lowercase();
    let auth = ["not logged in", "not authenticated", "authentication required", "cursor_api_key", "agent login"];
    if auth.iter().any(|needle| lower.contains(needle)) { "auth_required" } else { "agent_exited" }
}

/// What to tell the user when the CLI stopped without ending the turn: how it exited and
/// the end of its stderr.
fn exit_detail(status: Option<ExitStatus>, stderr_tail: &str) -> String {
    let (how, quoted) = (describe_exit(status), quote_stderr(stderr_tail));
    if quoted.is_empty() {
        format!("cursor-agent exited {how} before finishing the turn")
    } else {
        format!("cursor-agent exited {how} before finishing the turn:\n{quoted}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use terminull_adapter_sdk::child::STDERR_QUOTE_BYTES;

    #[test]
    fn exit_details() {
        let status = ExitStatus::from_raw(1 << 8);
        assert_eq!(exit_detail(Some(status), ""), "cursor-agent exited with status 1 before finishing the turn");
        let signalled = ExitStatus::from_raw(9);
        let tail: String = (0..40).map(|i| format!("line {i}\n\n")).collect();
        let detail = exit_detail(Some(signalled), &tail);
        assert!(
            detail.starts_with("cursor-agent exited on signal 9 before finishing the turn:\nline 28\n"),
            "{detail}"
        );
        assert!(detail.ends_with("line 39"));
        let long = "é".repeat(5000);
        assert!(exit_detail(None, &long).len() < STDERR_QUOTE_BYTES + 100);
    }

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
