//! The `claude` process of one session: its command line, starting it, and the
//! stream-json `initialize` handshake that reports its slash commands and models.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use terminull_adapter_sdk::bounds;
use terminull_adapter_sdk::child::{AgentProcess, LineReceiver, SpawnOptions};
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::blocks::{CommandSource, SlashCommand};
use tokio::process::Command;
use tokio::time::{Instant, timeout_at};

use crate::events::{ControlResponseBody, Event};
use crate::mapping;

/// How long the CLI has to exit once its stdin is closed (then SIGTERM, then SIGKILL).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// Most characters of a slash command's description (the palette shows one line).
const DESCRIPTION_CHARS: usize = 200;
/// How long the CLI has to answer `initialize` after it was started.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to wait for a CLI whose stdout closed to be reaped (for its exit status).
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How to start the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Working directory (the adapter's own when absent).
    pub cwd: Option<PathBuf>,
    /// `--model`, when not the CLI's default.
    pub model: Option<String>,
    /// `--permission-mode`.
    pub permission_mode: Option<String>,
    /// `--effort`.
    pub effort: Option<String>,
}

impl Launch {
    /// The command line arguments for conversation `session_id`: a new conversation
    /// (`--session-id`) or an existing one (`--resume`).
    pub fn args(&self, session_id: &str, resume: bool) -> Vec<String> {
        let mut args: Vec<String> = [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-prompt-tool",
            "stdio",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let flags =
            [("--model", &self.model), ("--permission-mode", &self.permission_mode), ("--effort", &self.effort)];
        for (flag, value) in flags {
            if let Some(value) = value {
                args.extend([flag.to_owned(), value.clone()]);
            }
        }
        args.extend([if resume { "--resume" } else { "--session-id" }.to_owned(), session_id.to_owned()]);
        args
    }
}

/// A running CLI process.
#[derive(Debug)]
pub(crate) struct Cli {
    pub(crate) process: AgentProcess,
    pub(crate) lines: LineReceiver,
    /// Interrupt requests sent to this process so far.
    pub(crate) interrupts: u64,
    /// Events read ahead while a permission request waited, oldest first.
    pub(crate) backlog: VecDeque<Event>,
    /// stdout reached end of file.
    pub(crate) stdout_closed: bool,
}

/// What the CLI said in answer to `initialize`.
#[derive(Debug, Default)]
pub(crate) struct InitInfo {
    pub(crate) commands: Vec<SlashCommand>,
    /// `models[]` as (value, resolved model) pairs.
    pub(crate) models: Vec<(String, String)>,
}

impl Cli {
    pub(crate) async fn write(&mut self, value: &Value) -> Result<(), AdapterError> {
        self.process
            .write_json(value)
            .await
            .map_err(|e| AdapterError::agent(format!("cannot write to Claude Code: {e}")))
    }

    /// Waits (bounded) for the process to exit and describes how it ended, with the
    /// tail of its stderr.
    pub(crate) async fn exit_report(&mut self) -> String {
        let status = match tokio::time::timeout(EXIT_WAIT, self.process.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("status unknown: {e}"),
            Err(_) => "still running".to_owned(),
        };
        let tail = self.process.stderr_tail();
        if tail.trim().is_empty() { format!("({status})") } else { format!("({status}): {}", tail.trim()) }
    }
}

/// Starts the CLI for conversation `session_id` and performs the `initialize`
/// handshake.
pub(crate) async fn spawn_cli(
    launch: &Launch,
    session_id: &str,
    resume: bool,
) -> Result<(Cli, InitInfo), AdapterError> {
    let mut cmd = Command::new(&launch.program);
    cmd.args(launch.args(session_id, resume));
    if let Some(cwd) = &launch.cwd {
        cmd.current_dir(cwd);
    }
    tracing::info!(program = %launch.program.display(), session_id, resume, "starting Claude Code");
    let (process, lines) = AgentProcess::spawn(cmd, SpawnOptions::default())
        .map_err(|e| AdapterError::agent(format!("cannot start Claude Code: {e}")))?;
    let mut cli = Cli { process, lines, interrupts: 0, backlog: VecDeque::new(), stdout_closed: false };
    match initialize(&mut cli).await {
        Ok(info) => Ok((cli, info)),
        Err(e) => {
            cli.process.shutdown(SHUTDOWN_GRACE).await;
            Err(e)
        }
    }
}

/// Sends `initialize` (`init-1`) and waits for its answer.
async fn initialize(cli: &mut Cli) -> Result<InitInfo, AdapterError> {
    const INIT_ID: &str = "init-1";
    let deadline = Instant::now() + INIT_TIMEOUT;
    let written = cli.write(&mapping::initialize_request(INIT_ID)).await;
    let mut errors: Vec<String> = Vec::new();
    if written.is_ok() {
        loop {
            let item = match timeout_at(deadline, cli.lines.recv()).await {
                Err(_) => {
                    return Err(AdapterError::agent(format!(
                        "Claude Code did not answer `initialize` within {INIT_TIMEOUT:?}"
                    )));
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    tracing::warn!("skipping a bad line from Claude Code: {e}");
                    continue;
                }
                Ok(Some(Ok(value))) => value,
            };
            match Event::parse(item) {
                Event::ControlResponse(r) if r.response.request_id == INIT_ID => return init_info(r.response),
                Event::ControlRequest(r) => {
                    cli.write(&mapping::error_reply(&r.request_id, "not supported")).await?;
                }
                // A resume of an unknown conversation ends at once with a result.
                Event::Result(r) => errors.extend(r.errors),
                other => tracing::debug!(?other, "before the initialize answer"),
            }
        }
    }
    cli.stdout_closed = true;
    let report = cli.exit_report().await;
    let said = errors.join("; ");
    if said.contains("No conversation found") || report.contains("No conversation found") {
        return Err(AdapterError::not_found(if said.is_empty() { report } else { said }));
    }
    let detail = if said.is_empty() { report } else { format!("{said} {report}") };
    Err(AdapterError::agent(format!("Claude Code exited during start-up {detail}")))
}

fn init_info(response: ControlResponseBody) -> Result<InitInfo, AdapterError> {
    if response.subtype == "error" {
        let error = response.error.unwrap_or_default();
        return Err(AdapterError::agent(format!("Claude Code refused `initialize`: {error}")));
    }
    let body = response.response.unwrap_or(Value::Null);
    let commands = body
        .get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?.trim_start_matches('/');
            let description = c.get("description").and_then(Value::as_str).unwrap_or_default();
            (!name.is_empty()).then(|| SlashCommand {
                name: name.to_owned(),
                description: bounds::first_line(description, DESCRIPTION_CHARS),
                source: CommandSource::Agent,
            })
        })
        .collect();
    let models = body
        .get("models")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m.get("value")?.as_str()?.to_owned(), m.get("resolvedModel")?.as_str()?.to_owned())))
        .collect();
    Ok(InitInfo { commands, models })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_starts_or_resumes_a_conversation() {
        let launch = Launch {
            program: "claude".into(),
            cwd: None,
            model: Some("sonnet".into()),
            permission_mode: Some("plan".into()),
            effort: None,
        };
        let args = launch.args("abc", false).join(" ");
        assert_eq!(
            args,
            "-p --input-format stream-json --output-format stream-json --verbose --include-partial-messages \
             --permission-prompt-tool stdio --model sonnet --permission-mode plan --session-id abc"
        );
        assert!(launch.args("abc", true).join(" ").ends_with("--resume abc"));
    }

    #[test]
    fn init_answer_gives_commands_and_models() {
        let line = include_str!("../tests/fixtures/init-response.json");
        let Event::ControlResponse(r) = Event::parse(serde_json::from_str(line).unwrap()) else { panic!() };
        let info = init_info(r.response).unwrap();
        let names: Vec<_> = info.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["debug", "compact", "init", "review"]);
        assert!(info.commands.iter().all(|c| c.source == CommandSource::Agent && !c.description.contains('\n')));
        assert!(info.models.contains(&("default".to_owned(), "claude-opus-4-8[1m]".to_owned())));
    }
}
