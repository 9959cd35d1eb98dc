//! The [`Pi`] adapter: one long-lived `pi --mode rpc` process per session.
//!
//! `start` spawns pi ([`crate::command::launch_args`]) through the SDK's
//! [`AgentProcess`] and asks it `get_state` (session id, model) and `get_commands`
//! (prompt templates and skills, offered as slash commands). `send` writes a `prompt`
//! command and feeds every stdout line through the pure [`TurnMapper`], carrying out its
//! actions: stream blocks, report the session id, write probes back, end the turn.
//!
//! Interrupt: the `abort` command; pi stops the model stream and kills the running tool
//! (`Command aborted`) and answers once it is idle. If it has not answered within
//! [`INTERRUPT_TIMEOUT`], its process group is killed and the next turn starts a new
//! process that continues the saved session (`--session <id>`). The same happens after
//! any crash.
//!
//! Every command written to pi carries an id that is deterministic per process
//! (`state-1`, `commands-1`, then per turn `t<n>-prompt`, `t<n>-state-<k>`,
//! `t<n>-abort-1`), so a recorded process can be replayed.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::{Value, json};
use terminull_adapter_sdk::child::{AgentProcess, LineReceiver, Lines, SpawnOptions, quote_stderr};
use terminull_adapter_sdk::detect::detect_cli;
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::{binary, working_dir};
use terminull_protocol::blocks::{Attachment, CommandSource, ErrorBlock, SlashCommand};
use tokio::process::Command;
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::command::{self, PermissionMode, Settings, check_effort, check_value, launch_args};
use crate::events::{Event, State, parse_line};
use crate::handoff::PiSessions;
use crate::mapping::{Action, TurnMapper, bounded};

/// How long pi has to answer `get_state` after it was started (it loads its extensions,
/// skills and models first: 1–4 s here).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long pi has to answer `abort` before its process group is killed.
pub const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `pi --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// Each step of the SDK's shutdown ladder (close stdin, SIGTERM, SIGKILL).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// How long to wait for a pi whose stdout closed to be reaped (for its exit status).
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// What pi 0.73 prints on stderr when `--session` names a session it has no file for.
const NO_SESSION: &str = "No session found";
/// Most image attachments in one message.
const MAX_IMAGES: usize = 16;
/// Most bytes of one image attachment, base64-encoded.
const MAX_IMAGE_BASE64_BYTES: usize = 28 * 1024 * 1024;
/// The image types pi's providers take.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One pi session.
#[derive(Debug)]
pub struct Pi {
    binary: String,
    settings: Settings,
    cli: Option<Cli>,
    /// pi's session id (from `get_state`) and the usage so far.
    session: Conversation,
    /// True once pi saved the session (it writes the file at the first assistant
    /// message) and the id was reported: a new process then continues it.
    session_saved: bool,
    /// Shown as an `error` block at the start of the next turn (a session that could not
    /// be continued).
    notice: Option<String>,
}

/// A running `pi --mode rpc`.
#[derive(Debug)]
struct Cli {
    process: AgentProcess,
    lines: LineReceiver,
    /// Turns started on this process (command ids `t<n>-…`).
    turns: u64,
    stdout_closed: bool,
}

/// What `start` learns from a new process.
#[derive(Debug, Default)]
struct Handshake {
    state: State,
    commands: Vec<SlashCommand>,
}

/// What the turn's reading loop does next.
enum Next {
    Interrupt,
    InterruptTimedOut,
    Line(String),
    Closed,
}

/// Why a pi process could not be started.
#[derive(Debug)]
struct SpawnFailure {
    message: String,
    /// pi has no saved session with the id given to `--session`.
    no_session: bool,
}

impl Cli {
    async fn write(&mut self, value: &Value) -> Result<(), AdapterError> {
        self.process.write_json(value).await.map_err(|e| AdapterError::agent(format!("cannot write to pi: {e}")))
    }

    /// The next stdout line as text; `None` at end of output. Bad lines are skipped.
    async fn next_line(&mut self) -> Option<String> {
        loop {
            match self.lines.recv().await {
                Some(Ok(Value::String(line))) => return Some(line),
                Some(Ok(other)) => return Some(other.to_string()),
                Some(Err(e)) => tracing::warn!("skipping a line of pi output: {e}"),
                None => {
                    self.stdout_closed = true;
                    return None;
                }
            }
        }
    }

    /// Waits (bounded) for the process to exit and describes how it ended.
    async fn exit_report(&mut self) -> String {
        let status = match tokio::time::timeout(EXIT_WAIT, self.process.wait()).await {
            Ok(Ok(status)) => match status.code() {
                Some(code) => format!("with status {code}"),
                None => format!("on signal {}", status.signal().unwrap_or_default()),
            },
            Ok(Err(e)) => format!("(status unknown: {e})"),
            Err(_) => "(still running)".to_owned(),
        };
        let tail = quote_stderr(&self.process.stderr_tail());
        if tail.is_empty() { format!("pi exited {status}") } else { format!("pi exited {status}:\n{tail}") }
    }
}

/// Starts `pi --mode rpc` (continuing `session` when given) and asks it `get_state` and
/// `get_commands`.
async fn spawn_cli(binary: &str, settings: &Settings, session: Option<&str>) -> Result<(Cli, Handshake), SpawnFailure> {
    let mut cmd = Command::new(binary);
    cmd.args(launch_args(settings, session)).current_dir(&settings.cwd);
    tracing::info!(%binary, ?session, "starting pi");
    let options = SpawnOptions { lines: Lines::Text, ..SpawnOptions::default() };
    let (process, lines) = AgentProcess::spawn(cmd, options)
        .map_err(|e| SpawnFailure { message: format!("cannot start pi: {e}"), no_session: false })?;
    let mut cli = Cli { process, lines, turns: 0, stdout_closed: false };
    match handshake(&mut cli).await {
        Ok(handshake) => Ok((cli, handshake)),
        Err(error) => {
            cli.process.shutdown(SHUTDOWN_GRACE).await;
            let message = error.to_string();
            let no_session = session.is_some() && message.contains(NO_SESSION);
            Err(SpawnFailure { message, no_session })
        }
    }
}

/// Why pi's start-up handshake failed.
#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    #[error("pi did not answer `get_state` within {STARTUP_TIMEOUT:?}")]
    Timeout,
    #[error("pi refused `get_state`: {0}")]
    Refused(String),
    #[error("{0}")]
    Write(AdapterError),
    /// pi exited: how, and the end of its stderr.
    #[error("{0}")]
    Exited(String),
}

/// Writes `get_state` (`state-1`) and `get_commands` (`commands-1`) and waits for both
/// answers.
async fn handshake(cli: &mut Cli) -> Result<Handshake, HandshakeError> {
    const STATE_ID: &str = "state-1";
    const COMMANDS_ID: &str = "commands-1";
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let written = async {
        cli.write(&command::get_state(STATE_ID)).await?;
        cli.write(&command::get_commands(COMMANDS_ID)).await
    }
    .await;
    let mut state = None;
    let mut commands = None;
    if written.is_ok() {
        while state.is_none() || commands.is_none() {
            let line = match timeout_at(deadline, cli.next_line()).await {
                Err(_) => return Err(HandshakeError::Timeout),
                Ok(None) => break,
                Ok(Some(line)) => line,
            };
            match parse_line(&line) {
                Ok(Event::Response(r)) if r.id.as_deref() == Some(STATE_ID) => {
                    if !r.success {
                        return Err(HandshakeError::Refused(r.error.unwrap_or_default()));
                    }
                    state = Some(State::from_data(r.data.as_ref()));
                }
                Ok(Event::Response(r)) if r.id.as_deref() == Some(COMMANDS_ID) => {
                    commands = Some(slash_commands(r.data.as_ref()));
                }
                Ok(Event::ExtensionUi { id, method, .. }) if Event::is_dialog(&method) => {
                    cli.write(&command::cancel_dialog(&id)).await.map_err(HandshakeError::Write)?;
                }
                Ok(other) => tracing::debug!(?other, "pi event during start-up"),
                Err(e) => tracing::warn!("skipping a line of pi output: {e}"),
            }
        }
        if let Some(state) = state {
            return Ok(Handshake { state, commands: commands.unwrap_or_default() });
        }
    }
    cli.stdout_closed = true;
    Err(HandshakeError::Exited(cli.exit_report().await))
}

/// pi's prompt templates, skills and extension commands, as the agent's slash commands.
fn slash_commands(data: Option<&Value>) -> Vec<SlashCommand> {
    data.and_then(|d| d.get("commands"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?.trim_start_matches('/');
            let description = c.get("description").and_then(Value::as_str).unwrap_or_default();
            let description = description.lines().next().unwrap_or_default().trim();
            let description = match description.char_indices().nth(200) {
                Some((end, _)) => format!("{}…", &description[..end]),
                None => description.to_owned(),
            };
            (!name.is_empty()).then(|| SlashCommand {
                name: name.to_owned(),
                description,
                source: CommandSource::Agent,
            })
        })
        .take(200)
        .collect()
}

/// The `images` of a `prompt` command from the message's attachments (images only).
pub fn prompt_images(attachments: &[Attachment]) -> Result<Vec<Value>, AdapterError> {
    if attachments.len() > MAX_IMAGES {
        return Err(AdapterError::invalid(format!(
            "{} attachments; pi takes at most {MAX_IMAGES} images per message",
            attachments.len()
        )));
    }
    attachments
        .iter()
        .map(|a| {
            let mime = a.mime_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            if !IMAGE_TYPES.contains(&mime.as_str()) {
                return Err(AdapterError::invalid(format!(
                    "pi cannot take attachment `{}` of type {}; it takes PNG, JPEG, GIF and WebP images",
                    a.name, a.mime_type
                )));
            }
            if a.data.len() > MAX_IMAGE_BASE64_BYTES {
                return Err(AdapterError::invalid(format!("attachment `{}` is too large", a.name)));
            }
            Ok(json!({"type": "image", "data": a.data, "mimeType": mime}))
        })
        .collect()
}

impl Adapter for Pi {
    const AGENT_ID: &'static str = "pi";
    const DISPLAY_NAME: &'static str = "Pi";
    const CLI_BINARY: Option<&'static str> = Some("pi");
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.73.1");
    // images: `prompt` takes images (`{type: image, data, mimeType}`).
    // thinking: thinking_* deltas.
    // permissions: pi has no approval system: tools run without asking.
    // interrupt: the `abort` command.
    const CAPS: Caps = caps! {
        supported: [images, thinking, interrupt],
        unsupported: [documents, permissions, subagents, input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::Persistent;
    const INIT_PARAMS: &'static [InitParam] = EVERY_INIT_PARAM;

    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PERSISTENT_HOOKS;

    type Models = NotProvided;
    type Usage = Provided;

    /// Ends the `pi` process so a terminal can continue the session; the next `send`
    /// starts one with `--session <id>`.
    async fn release(&mut self) -> Result<(), AdapterError> {
        self.drop_cli().await;
        Ok(())
    }

    fn handoff() -> Option<impl Handoff> {
        Some(PiSessions)
    }

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let mode = PermissionMode::parse(init.permission_mode.as_deref()).map_err(AdapterError::invalid)?;
        if let Some(effort) = &init.effort {
            check_effort(effort)?;
        }
        let model = init.model.filter(|m| !m.trim().is_empty());
        if let Some(model) = &model {
            check_value("model", model)?;
        }
        let resume = init.resume_session_id.map(|id| id.as_str().to_owned());
        if let Some(id) = &resume {
            check_value("session id", id)?;
        }
        let cwd = working_dir(init.cwd.as_deref())?;
        let binary = binary(init.binary, "pi");
        let settings = Settings { cwd, model: model.clone(), thinking: init.effort, mode };

        let (spawned, detected) =
            tokio::join!(spawn_cli(&binary, &settings, resume.as_deref()), detect_cli(&binary, VERSION_TIMEOUT));
        let mut notice = None;
        let (cli, handshake, saved) = match spawned {
            Ok((cli, handshake)) => (cli, handshake, resume.is_some()),
            Err(failure) if failure.no_session => {
                let id = resume.as_deref().unwrap_or_default();
                tracing::warn!("pi cannot continue session {id}: {}", failure.message);
                notice = Some(format!(
                    "pi has no saved session {id} on this machine (it saves a session once the model has \
                     answered in it), so its history is not available; this conversation starts a new pi session."
                ));
                let (cli, handshake) = spawn_cli(&binary, &settings, None).await.map_err(|f| {
                    if detected.installed { AdapterError::agent(f.message) } else { not_installed(&binary, &detected) }
                })?;
                (cli, handshake, false)
            }
            Err(failure) => {
                return Err(if detected.installed {
                    AdapterError::agent(failure.message)
                } else {
                    not_installed(&binary, &detected)
                });
            }
        };
        let session_id = handshake.state.session_id.clone();
        if saved && let Some(id) = &session_id {
            session.set_agent_session_id(id.as_str()).await?;
        }
        let shown_model = handshake.state.model_name().or(model);
        tracing::info!(?session_id, model = ?shown_model, "pi session ready");
        let session = Conversation::new("pi", session_id);
        let adapter = Pi { binary, settings, cli: Some(cli), session, session_saved: saved, notice };
        let info = StartInfo { version: detected.version, model: shown_model, slash_commands: handshake.commands };
        Ok((adapter, info))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        let images = prompt_images(&message.attachments)?;
        self.ensure_running().await?;
        let Some(cli) = self.cli.as_mut() else {
            return Err(AdapterError::agent("pi is not running"));
        };
        drain_between_turns(cli).await;
        cli.turns += 1;
        let command_prefix = format!("t{}", cli.turns);
        if let Some(notice) = self.notice.take() {
            let block = ErrorBlock { message: notice, recoverable: true, code: Some("resume_failed".to_owned()) };
            turn.emit_lenient(BlockKind::Error(block)).await?;
        }
        let prompt = command::prompt(&format!("{command_prefix}-prompt"), &message.text, images);
        if let Err(e) = cli.write(&prompt).await {
            let report = cli.exit_report().await;
            self.drop_cli().await;
            return Err(AdapterError::agent(format!("{e}; {report}")));
        }
        let mut mapper = TurnMapper::new(
            mint_id("pi"),
            command_prefix.clone(),
            self.session.id().map(str::to_owned),
            self.session_saved,
        );
        let mut interrupt_deadline: Option<Instant> = None;
        loop {
            let next = {
                let Some(cli) = self.cli.as_mut() else {
                    return Err(AdapterError::agent("pi is not running"));
                };
                let deadline = interrupt_deadline.unwrap_or_else(Instant::now);
                tokio::select! {
                    biased;
                    () = turn.interrupted(), if interrupt_deadline.is_none() => Next::Interrupt,
                    () = sleep_until(deadline), if interrupt_deadline.is_some() => Next::InterruptTimedOut,
                    line = cli.next_line() => match line {
                        Some(line) => Next::Line(line),
                        None => Next::Closed,
                    },
                }
            };
            let actions = match next {
                Next::Interrupt => {
                    tracing::info!("interrupting pi");
                    interrupt_deadline = Some(Instant::now() + INTERRUPT_TIMEOUT);
                    mapper.interrupt_requested();
                    if let Some(cli) = self.cli.as_mut()
                        && let Err(e) = cli.write(&command::abort(&format!("{command_prefix}-abort-1"))).await
                    {
                        tracing::warn!("{e}");
                    }
                    continue;
                }
                Next::InterruptTimedOut => {
                    tracing::warn!("pi did not answer `abort` within {INTERRUPT_TIMEOUT:?}; killing it");
                    if let Some(cli) = self.cli.as_mut()
                        && let Err(e) = cli.process.kill_group()
                    {
                        tracing::warn!("cannot kill pi: {e}");
                    }
                    self.drop_cli().await;
                    mapper.on_interrupted()
                }
                Next::Line(line) => match parse_line(&line) {
                    Ok(event) => mapper.on_event(event),
                    Err(e) => {
                        tracing::warn!("skipping a pi line: {e}");
                        continue;
                    }
                },
                Next::Closed => {
                    let report = match self.cli.as_mut() {
                        Some(cli) => cli.exit_report().await,
                        None => "pi exited".to_owned(),
                    };
                    tracing::warn!("{report}");
                    self.drop_cli().await;
                    mapper.on_exit(&report)
                }
            };
            if let Some(reason) = self.apply(actions, turn).await? {
                return Ok(reason);
            }
        }
    }

    async fn stop(&mut self) {
        self.drop_cli().await;
    }
}

impl GetUsage for Pi {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.session.totals().clone())
    }
}

impl Pi {
    /// Starts a new pi process when none runs or the last one exited: it continues the
    /// saved session, or starts a new one (with a notice) when pi has none to continue.
    async fn ensure_running(&mut self) -> Result<(), AdapterError> {
        if let Some(cli) = self.cli.as_mut() {
            let exited = cli.process.try_wait().ok().flatten();
            if exited.is_none() && !cli.stdout_closed {
                return Ok(());
            }
            tracing::info!(?exited, "pi is no longer running; starting it again");
            self.drop_cli().await;
        }
        let session = if self.session_saved { self.session.id().map(str::to_owned) } else { None };
        let (cli, handshake) = match spawn_cli(&self.binary, &self.settings, session.as_deref()).await {
            Ok(spawned) => spawned,
            Err(failure) if failure.no_session => {
                tracing::warn!("pi cannot continue its session: {}", failure.message);
                self.notice = Some(format!(
                    "pi could not continue session {} (it has no saved file for it); this conversation goes on \
                     in a new pi session without the earlier history.",
                    session.unwrap_or_default()
                ));
                self.session_saved = false;
                spawn_cli(&self.binary, &self.settings, None).await.map_err(|f| AdapterError::agent(f.message))?
            }
            Err(failure) => return Err(AdapterError::agent(failure.message)),
        };
        if let Some(id) = handshake.state.session_id
            && Some(id.as_str()) != self.session.id()
        {
            // A new session (the old one could not be continued): reported once saved.
            self.session.set_id(Some(id));
            self.session_saved = false;
        }
        self.cli = Some(cli);
        Ok(())
    }

    /// Ends the running process (close stdin, then SIGTERM, SIGKILL) and forgets it.
    async fn drop_cli(&mut self) {
        if let Some(mut cli) = self.cli.take() {
            let outcome = cli.process.shutdown(SHUTDOWN_GRACE).await;
            tracing::debug!(?outcome, "pi process ended");
        }
    }

    /// Carries out the mapper's actions in order; the end reason once the turn ended.
    async fn apply(&mut self, actions: Vec<Action>, turn: &mut Turn) -> Result<Option<EndReason>, AdapterError> {
        if actions.iter().any(|a| matches!(a, Action::SessionId(_))) {
            self.session_saved = true;
        }
        let cli = &mut self.cli;
        let write = async |command: serde_json::Value| {
            match cli.as_mut() {
                Some(cli) => {
                    if let Err(e) = cli.write(&command).await {
                        tracing::warn!("{e}");
                    }
                }
                None => tracing::debug!(%command, "not written: pi is gone"),
            }
            Ok(())
        };
        match self.session.apply_with(actions, turn, write).await? {
            Some(end) => self.session.end_turn(end, turn).await.map(Some),
            None => Ok(None),
        }
    }
}

/// Reads what pi wrote between turns (a late compaction's events, an extension's
/// dialog), so that nothing stale is read as part of the next turn; dialogs are
/// dismissed.
async fn drain_between_turns(cli: &mut Cli) {
    loop {
        match cli.lines.try_recv() {
            Ok(Ok(line)) => {
                let text = line.as_str().map(str::to_owned).unwrap_or_else(|| line.to_string());
                match parse_line(&text) {
                    Ok(Event::ExtensionUi { id, method, .. }) if Event::is_dialog(&method) => {
                        if let Err(e) = cli.write(&command::cancel_dialog(&id)).await {
                            tracing::warn!("{e}");
                        }
                    }
                    Ok(other) => tracing::debug!(?other, "pi event between turns; skipped"),
                    Err(e) => tracing::debug!("skipping a pi line between turns: {e}"),
                }
            }
            Ok(Err(e)) => tracing::warn!("skipping a line of pi output: {e}"),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return,
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                cli.stdout_closed = true;
                return;
            }
        }
    }
}

fn not_installed(binary: &str, detected: &terminull_protocol::adapter::DetectResult) -> AdapterError {
    let reason = detected.reason.clone().unwrap_or_else(|| format!("`{binary}` cannot be run"));
    AdapterError::agent(bounded(&format!("pi is not available: {reason}"), 4096))
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_adapter_sdk::child::STDERR_QUOTE_BYTES;

    fn attachment(name: &str, mime: &str, data: &str) -> Attachment {
        Attachment { name: name.into(), mime_type: mime.into(), data: data.into() }
    }

    #[test]
    fn images_become_prompt_images() {
        let images =
            prompt_images(&[attachment("a.png", "image/png", "iVBO"), attachment("b", "IMAGE/JPEG", "x")]).unwrap();
        assert_eq!(
            images,
            vec![
                json!({"type": "image", "data": "iVBO", "mimeType": "image/png"}),
                json!({"type": "image", "data": "x", "mimeType": "image/jpeg"}),
            ]
        );
        let err = prompt_images(&[attachment("a.pdf", "application/pdf", "x")]).unwrap_err();
        assert!(err.message.contains("a.pdf") && err.message.contains("PNG"), "{err}");
        let many: Vec<_> = (0..17).map(|_| attachment("a.png", "image/png", "x")).collect();
        assert!(prompt_images(&many).is_err());
        assert_eq!(prompt_images(&[]).unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn slash_commands_from_get_commands() {
        let data = json!({"commands": [
            {"name": "fix-tests", "description": "Fix failing tests\nmore", "source": "prompt"},
            {"name": "skill:search", "source": "skill"},
            {"name": "", "description": "nameless"},
            {"description": "no name"},
        ]});
        let commands = slash_commands(Some(&data));
        let got: Vec<_> = commands.iter().map(|c| (c.name.as_str(), c.description.as_str())).collect();
        assert_eq!(got, [("fix-tests", "Fix failing tests"), ("skill:search", "")]);
        assert!(commands.iter().all(|c| c.source == CommandSource::Agent));
        assert!(slash_commands(None).is_empty());
    }

    #[test]
    fn the_recorded_start_up() {
        let records: Vec<Value> =
            include_str!("../tests/fixtures/startup.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let written: Vec<Value> =
            records.iter().filter_map(|r| r["in"].as_str()).map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(written, [command::get_state("state-1"), command::get_commands("commands-1")]);
        let responses: Vec<_> = records
            .iter()
            .filter_map(|r| r["out"].as_str())
            .map(|l| match parse_line(l) {
                Ok(Event::Response(r)) => r,
                other => panic!("{other:?}"),
            })
            .collect();
        let state = State::from_data(responses[0].data.as_ref());
        assert_eq!(responses[0].id.as_deref(), Some("state-1"));
        assert_eq!(state.model_name().as_deref(), Some("mock/mock-claude"));
        assert!(state.session_id.is_some() && !state.is_streaming);
        assert_eq!(responses[1].id.as_deref(), Some("commands-1"));
        assert!(slash_commands(responses[1].data.as_ref()).is_empty());
    }

    #[test]
    fn stderr_quotes_are_bounded() {
        assert_eq!(quote_stderr("a\n\nb\n"), "a\nb");
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let quoted = quote_stderr(&long);
        assert!(quoted.starts_with("line 88") && quoted.ends_with("line 99"), "{quoted}");
        let wide = "é".repeat(3000);
        assert!(quote_stderr(&wide).len() <= STDERR_QUOTE_BYTES + 4);
    }
}
