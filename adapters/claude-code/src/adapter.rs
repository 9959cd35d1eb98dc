//! The [`Adapter`] implementation: runs one long-lived `claude` process per session
//! and feeds its stdout through the [`Mapper`].
//!
//! Why a persistent process: `claude -p --input-format stream-json` reads user messages
//! from stdin for as long as stdin is open, so one process serves every turn without
//! paying the CLI's start-up (and its `initialize` handshake) again. When the process
//! dies (a crash, or a kill after an interrupt that did not stop it) the next `send`
//! starts a new one with `--resume <session id>`, so the conversation goes on.
//!
//! Everything the adapter sends the CLI that has a request id uses ids that are
//! deterministic per CLI process (`init-1`, then `interrupt-1`, `interrupt-2`, …), so a
//! recorded transcript can be replayed against the adapter by a fake CLI.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::blocks::{ErrorBlock, Progress};
use terminull_protocol::jsonrpc::codes;
use tokio::time::{Instant, sleep_until};

use crate::cli::{Cli, Launch, SHUTDOWN_GRACE, spawn_cli};
use crate::events::Event;
use crate::handoff::ClaudeSessions;
use crate::mapping::{self, Action, CliStep, Mapper, PermissionAsk};

/// The permission modes `claude --permission-mode` accepts.
pub const PERMISSION_MODES: &[&str] = &["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"];

/// The effort levels `claude --effort` accepts.
pub const EFFORT_LEVELS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// The model id that means "no `--model` flag": the CLI's own default.
pub const DEFAULT_MODEL: &str = "default";

/// How long the CLI has to end its turn after an interrupt before it is killed.
const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long `<cli> --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Events read while a permission request waits are queued up to this many; beyond
/// it, reading pauses (the CLI blocks on its pipe) until the user answers.
const MAX_BACKLOG: usize = 4096;

/// The Claude Code adapter: one session.
#[derive(Debug)]
pub struct ClaudeCode {
    launch: Launch,
    mapper: Mapper,
    cli: Option<Cli>,
    /// True once the conversation exists in the CLI's store (a message was sent to it,
    /// or it was resumed): a new process must then `--resume` it, as `--session-id`
    /// refuses an id that is already in use.
    conversation_exists: bool,
    /// Times the conversation had to be started again without its history.
    restarts: u64,
}

/// The first version-looking word of `claude --version` (`2.1.197 (Claude Code)`).
pub fn parse_version(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}

/// Validates the start params that name a choice of the CLI.
fn check_choice(what: &str, value: Option<String>, choices: &[&str]) -> Result<Option<String>, AdapterError> {
    match value {
        Some(v) if !choices.contains(&v.as_str()) => Err(AdapterError::invalid(format!(
            "unknown {what} `{v}` for Claude Code; choose one of: {}",
            choices.join(", ")
        ))),
        v => Ok(v),
    }
}

/// `bypassPermissions` as root is refused by the CLI unless `IS_SANDBOX=1`; say so up
/// front rather than let the CLI exit.
fn check_bypass_as_root(
    permission_mode: Option<&str>,
    euid_is_root: bool,
    is_sandbox: Option<&str>,
) -> Result<(), AdapterError> {
    if permission_mode == Some("bypassPermissions") && euid_is_root && is_sandbox != Some("1") {
        return Err(AdapterError::invalid(
            "Claude Code refuses permission mode bypassPermissions when running as root unless IS_SANDBOX=1 is set; \
             if this machine is a sandbox, set IS_SANDBOX=1 in the agent's environment \
             (bridge config: [agents.claude-code.env] IS_SANDBOX = \"1\")",
        ));
    }
    Ok(())
}

/// The `content` of the user message line: the text, then each attachment as an
/// Anthropic content block (images as `image`, PDFs and text files as `document`).
pub fn user_content(message: &UserMessage) -> Result<Vec<Value>, AdapterError> {
    let mut content = Vec::new();
    if !message.text.is_empty() || message.attachments.is_empty() {
        content.push(json!({"type": "text", "text": message.text}));
    }
    for a in &message.attachments {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(a.data.as_bytes())
            .map_err(|e| AdapterError::invalid(format!("attachment `{}` is not valid base64: {e}", a.name)))?;
        let mime = a.mime_type.to_ascii_lowercase();
        let block = match mime.as_str() {
            "image/png" | "image/jpeg" | "image/gif" | "image/webp" => {
                json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": a.data}})
            }
            "application/pdf" => json!({
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": a.data},
                "title": a.name,
            }),
            m if m.starts_with("text/") => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| AdapterError::invalid(format!("attachment `{}` is not UTF-8 text", a.name)))?;
                json!({
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": text},
                    "title": a.name,
                })
            }
            _ => {
                return Err(AdapterError::invalid(format!(
                    "Claude Code cannot take attachment `{}` of type {}; it takes PNG, JPEG, GIF and WebP images, \
                     PDF documents and text files",
                    a.name, a.mime_type
                )));
            }
        };
        content.push(block);
    }
    Ok(content)
}

/// How a turn's reading loop ended.
enum TurnEnd {
    /// With this reason; the CLI is still usable.
    Ended(EndReason),
    /// The CLI is gone or unusable: drop it (the next turn starts a new one).
    CliLost(EndReason),
}

/// What the reading loop does next.
enum Next {
    Event(Event),
    Interrupt,
    InterruptTimedOut,
    Closed,
}

impl ClaudeCode {
    /// Starts a new CLI process when none runs or the last one exited. Returns a
    /// notice for the user when the conversation could not be resumed.
    async fn ensure_running(&mut self) -> Result<Option<String>, AdapterError> {
        if let Some(cli) = self.cli.as_mut() {
            let exited = cli.process.try_wait().ok().flatten();
            if exited.is_none() && !cli.stdout_closed {
                return Ok(None);
            }
            tracing::info!(?exited, "Claude Code is no longer running; starting it again");
            if let Some(mut cli) = self.cli.take() {
                cli.process.shutdown(SHUTDOWN_GRACE).await;
            }
        }
        let session_id = self.mapper.session_id().to_owned();
        let mut notice = None;
        let cli = match spawn_cli(&self.launch, &session_id, self.conversation_exists).await {
            Ok((cli, _)) => cli,
            // The CLI writes its transcript shortly after each turn; one that died
            // before that left nothing to resume. Go on under the same id.
            Err(e) if self.conversation_exists && e.code == codes::NOT_FOUND => {
                tracing::warn!("cannot resume the conversation ({e}); starting it again under the same id");
                notice = Some(
                    "Claude Code could not restore this conversation's history (it exited before saving it); \
                     continuing as a new conversation"
                        .to_owned(),
                );
                spawn_cli(&self.launch, &session_id, false).await?.0
            }
            Err(e) => return Err(e),
        };
        self.mapper.process_started();
        self.cli = Some(cli);
        Ok(notice)
    }

    /// Runs one turn on the running CLI, from the user message written to its end.
    async fn run_turn(cli: &mut Cli, mapper: &mut Mapper, turn: &mut Turn) -> TurnEnd {
        let mut interrupt_deadline: Option<Instant> = None;
        loop {
            let next = match cli.backlog.pop_front() {
                Some(event) => Next::Event(event),
                None if cli.stdout_closed => Next::Closed,
                None => {
                    let deadline = interrupt_deadline.unwrap_or_else(Instant::now);
                    tokio::select! {
                        biased;
                        () = turn.interrupted(), if interrupt_deadline.is_none() => Next::Interrupt,
                        () = sleep_until(deadline), if interrupt_deadline.is_some() => Next::InterruptTimedOut,
                        line = cli.lines.recv() => match line {
                            Some(Ok(value)) => Next::Event(Event::parse(value)),
                            Some(Err(e)) => {
                                tracing::warn!("skipping a bad line from Claude Code: {e}");
                                continue;
                            }
                            None => {
                                cli.stdout_closed = true;
                                Next::Closed
                            }
                        },
                    }
                }
            };
            let actions = match next {
                Next::Event(event) => mapper.handle(event),
                Next::Interrupt => {
                    cli.interrupts += 1;
                    let id = format!("interrupt-{}", cli.interrupts);
                    tracing::info!(%id, "interrupting the turn");
                    mapper.interrupt_requested();
                    interrupt_deadline = Some(Instant::now() + INTERRUPT_TIMEOUT);
                    if let Err(e) = cli.write(&mapping::interrupt_request(&id)).await {
                        tracing::warn!("{e}");
                    }
                    continue;
                }
                Next::InterruptTimedOut => {
                    tracing::warn!(
                        "Claude Code did not end the turn within {INTERRUPT_TIMEOUT:?} of the interrupt; killing it"
                    );
                    if let Err(e) = cli.process.kill_group() {
                        tracing::warn!("cannot kill Claude Code: {e}");
                    }
                    perform_all(mapper.abort(EndReason::Interrupted, None), turn).await;
                    return TurnEnd::CliLost(EndReason::Interrupted);
                }
                Next::Closed => {
                    let report = cli.exit_report().await;
                    tracing::warn!("Claude Code exited during the turn {report}");
                    let actions = if mapper.is_interrupted() {
                        mapper.abort(EndReason::Interrupted, None)
                    } else {
                        let error = ErrorBlock {
                            message: format!("Claude Code exited during the turn {report}"),
                            recoverable: true,
                            code: Some("agent_exited".to_owned()),
                        };
                        mapper.abort(EndReason::Error, Some(error))
                    };
                    let reason = perform_all(actions, turn).await.unwrap_or(EndReason::Error);
                    return TurnEnd::CliLost(reason);
                }
            };
            for action in actions {
                match action {
                    Action::Emit(block) => {
                        if let Err(e) = turn.emit_lenient(block).await {
                            tracing::warn!("the bridge is gone ({e}); abandoning the turn");
                            return TurnEnd::CliLost(EndReason::Error);
                        }
                    }
                    Action::Agent(CliStep::AskPermission(ask)) => {
                        if let Err(e) = ask_permission(cli, turn, ask).await {
                            tracing::warn!("{e}");
                        }
                    }
                    Action::Agent(CliStep::Reply(value)) => {
                        if let Err(e) = cli.write(&value).await {
                            tracing::warn!("{e}");
                        }
                    }
                    Action::SessionId(id) => {
                        if let Err(e) = turn.session().set_agent_session_id(id).await {
                            tracing::warn!("cannot report the conversation id: {e}");
                        }
                    }
                    Action::End(end) => {
                        let reason = end.reason;
                        if let Err(e) = turn.emit_lenient(BlockKind::SessionEnd(end)).await {
                            tracing::warn!("cannot end the turn: {e}");
                        }
                        return TurnEnd::Ended(reason);
                    }
                }
            }
        }
    }

    /// Reads and answers what the CLI wrote between turns (nothing, normally), so that
    /// nothing stale is mistaken for the next turn's events.
    async fn drain_between_turns(cli: &mut Cli) -> Result<(), AdapterError> {
        cli.backlog.clear();
        loop {
            match cli.lines.try_recv() {
                Ok(Ok(value)) => match Event::parse(value) {
                    Event::ControlRequest(r) => {
                        let reply = if r.request.subtype == "can_use_tool" {
                            mapping::success_reply(
                                &r.request_id,
                                json!({"behavior": "deny", "message": mapping::DENIED_MESSAGE}),
                            )
                        } else {
                            mapping::error_reply(&r.request_id, "not supported")
                        };
                        cli.write(&reply).await?;
                    }
                    other => tracing::debug!(?other, "skipping an event between turns"),
                },
                Ok(Err(e)) => tracing::warn!("skipping a bad line from Claude Code: {e}"),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return Ok(()),
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    cli.stdout_closed = true;
                    return Ok(());
                }
            }
        }
    }
}

/// Performs the closing actions of an aborted turn; returns the end reason sent.
async fn perform_all(actions: Vec<Action>, turn: &mut Turn) -> Option<EndReason> {
    let mut reason = None;
    for action in actions {
        let block = match action {
            Action::Emit(block) => block,
            Action::End(end) => {
                reason = Some(end.reason);
                BlockKind::SessionEnd(end)
            }
            other => {
                tracing::debug!(?other, "not performed: the CLI is gone");
                continue;
            }
        };
        if let Err(e) = turn.emit_lenient(block).await {
            tracing::warn!("cannot send a block: {e}");
            break;
        }
    }
    reason
}

/// Asks the user and answers the CLI. While the user decides, the CLI's output is
/// read ahead into the backlog, so that its withdrawing the request
/// (`control_cancel_request`) or exiting ends the wait.
async fn ask_permission(cli: &mut Cli, turn: &mut Turn, ask: PermissionAsk) -> Result<(), AdapterError> {
    let outcome = {
        let shown = mapping::display_input(&ask.input);
        let waiting = turn.ask_permission(ask.tool.clone(), shown, ask.options(), ask.tool_call_id.clone());
        tokio::pin!(waiting);
        loop {
            let reading = !cli.stdout_closed && cli.backlog.len() < MAX_BACKLOG;
            tokio::select! {
                answer = &mut waiting => break Some(answer),
                line = cli.lines.recv(), if reading => match line {
                    Some(Ok(value)) => match Event::parse(value) {
                        Event::ControlCancel { request_id } if request_id == ask.request_id => {
                            tracing::info!(%request_id, "Claude Code withdrew its permission request");
                            break None;
                        }
                        event => cli.backlog.push_back(event),
                    },
                    Some(Err(e)) => tracing::warn!("skipping a bad line from Claude Code: {e}"),
                    None => {
                        cli.stdout_closed = true;
                        break None;
                    }
                },
            }
        }
    };
    let reply = match outcome {
        None => return Ok(()),
        Some(Ok(option_id)) => ask.reply(&option_id),
        Some(Err(TurnError::Interrupted)) => ask.interrupted_reply(),
        Some(Err(e)) => {
            tracing::warn!("the permission request failed ({e}); denying the tool call");
            ask.reply(mapping::option::REJECT)
        }
    };
    cli.write(&reply).await
}

impl Adapter for ClaudeCode {
    const AGENT_ID: &'static str = "claude-code";
    const DISPLAY_NAME: &'static str = "Claude Code";
    const CLI_BINARY: Option<&'static str> = Some("claude");
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = Some("2.1.197");
    const CAPS: Caps = caps! {
        supported: [images, documents, thinking, permissions, subagents, interrupt],
        unsupported: [input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::Persistent;
    const INIT_PARAMS: &'static [InitParam] = EVERY_INIT_PARAM;

    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PERSISTENT_HOOKS;

    type Models = Provided;
    type Usage = Provided;

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let permission_mode = check_choice("permission mode", init.permission_mode, PERMISSION_MODES)?;
        let effort = check_choice("effort", init.effort, EFFORT_LEVELS)?;
        let is_sandbox = std::env::var("IS_SANDBOX").ok();
        check_bypass_as_root(permission_mode.as_deref(), nix::unistd::geteuid().is_root(), is_sandbox.as_deref())?;
        let program = match init.binary.filter(|b| !b.trim().is_empty()) {
            Some(binary) => PathBuf::from(binary),
            None => which::which("claude").map_err(|_| AdapterError {
                code: codes::AGENT_ERROR,
                message: "`claude` was not found on PATH; install Claude Code or give the path of its binary".into(),
            })?,
        };
        let requested_model = init.model.filter(|m| !m.trim().is_empty());
        let launch = Launch {
            program,
            cwd: init.cwd.map(PathBuf::from),
            model: requested_model.clone().filter(|m| m != DEFAULT_MODEL),
            permission_mode,
            effort,
        };
        let (session_id, resume) = match init.resume_session_id {
            Some(id) => (id.to_string(), true),
            None => (uuid::Uuid::new_v4().to_string(), false),
        };
        let program_name = launch.program.to_string_lossy().into_owned();
        let (spawned, detected) = tokio::join!(spawn_cli(&launch, &session_id, resume), detect_version(&program_name));
        let (cli, info) = spawned?;
        session.set_agent_session_id(session_id.clone()).await.map_err(AdapterError::agent)?;
        let alias = requested_model.unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let model = info.models.iter().find(|(value, _)| *value == alias).map(|(_, resolved)| resolved.clone());
        let model = model.or_else(|| (alias != DEFAULT_MODEL).then_some(alias));
        let mut mapper = Mapper::new(session_id);
        mapper.process_started();
        let adapter = ClaudeCode { launch, mapper, cli: Some(cli), conversation_exists: resume, restarts: 0 };
        Ok((adapter, StartInfo { version: detected, model, slash_commands: info.commands }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        let content = user_content(&message)?;
        let notice = self.ensure_running().await?;
        let Some(cli) = self.cli.as_mut() else {
            return Err(AdapterError::agent("Claude Code is not running"));
        };
        Self::drain_between_turns(cli).await?;
        let line = json!({
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": null,
            "session_id": self.mapper.session_id(),
        });
        if let Err(e) = cli.write(&line).await {
            let report = cli.exit_report().await;
            if let Some(mut cli) = self.cli.take() {
                cli.process.shutdown(SHUTDOWN_GRACE).await;
            }
            return Err(AdapterError::agent(format!("{e} {report}")));
        }
        self.conversation_exists = true;
        self.mapper.begin_turn();
        if let Some(message) = notice {
            self.restarts += 1;
            let id = format!("history-lost-{}-{}", self.mapper.session_id(), self.restarts);
            let progress = Progress { id: id.into(), message, current: None, total: None, done: true };
            turn.emit_lenient(BlockKind::Progress(progress)).await?;
        }
        match Self::run_turn(cli, &mut self.mapper, turn).await {
            TurnEnd::Ended(reason) => Ok(reason),
            TurnEnd::CliLost(reason) => {
                if let Some(mut cli) = self.cli.take() {
                    cli.process.shutdown(SHUTDOWN_GRACE).await;
                }
                Ok(reason)
            }
        }
    }

    async fn stop(&mut self) {
        if let Some(mut cli) = self.cli.take() {
            let outcome = cli.process.shutdown(SHUTDOWN_GRACE).await;
            tracing::debug!(?outcome, "Claude Code stopped");
        }
    }

    /// Ends the `claude` process so a terminal can `--resume` the conversation; the
    /// next `send` starts a new one that resumes it (the session's id is kept).
    async fn release(&mut self) -> Result<(), AdapterError> {
        if let Some(mut cli) = self.cli.take() {
            let outcome = cli.process.shutdown(SHUTDOWN_GRACE).await;
            tracing::info!(?outcome, "Claude Code released for the terminal");
        }
        Ok(())
    }

    fn handoff() -> Option<impl Handoff> {
        Some(ClaudeSessions)
    }
}

/// `claude --version`, reduced to the version number.
async fn detect_version(program: &str) -> Option<String> {
    let detected = terminull_adapter_sdk::detect::detect_cli(program, VERSION_TIMEOUT).await;
    detected.version.as_deref().and_then(parse_version).or(detected.version)
}

impl ListModels for ClaudeCode {
    async fn list_models() -> Result<Vec<ModelInfo>, AdapterError> {
        let model = |id: &str, name: &str, description: &str, is_default: bool| ModelInfo {
            id: id.to_owned(),
            name: name.to_owned(),
            description: Some(description.to_owned()),
            is_default,
        };
        Ok(vec![
            model(DEFAULT_MODEL, "Default (recommended)", "Claude Code's default model for your account", true),
            model("sonnet", "Sonnet", "The latest Sonnet: efficient for everyday tasks", false),
            model("opus", "Opus", "The latest Opus: the most capable, for complex tasks", false),
            model("haiku", "Haiku", "The latest Haiku: the fastest, for quick answers", false),
        ])
    }
}

impl GetUsage for ClaudeCode {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.mapper.session_usage())
    }
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::Attachment;

    use super::*;

    #[test]
    fn unknown_modes_are_refused_with_the_choices() {
        let e = check_choice("permission mode", Some("yolo".into()), PERMISSION_MODES).unwrap_err();
        assert_eq!(e.code, codes::INVALID_PARAMS);
        assert!(e.message.contains("acceptEdits") && e.message.contains("yolo"), "{}", e.message);
        assert_eq!(check_choice("effort", Some("max".into()), EFFORT_LEVELS).unwrap().as_deref(), Some("max"));
        assert_eq!(check_choice("effort", None, EFFORT_LEVELS).unwrap(), None);
    }

    #[test]
    fn bypass_as_root_needs_is_sandbox() {
        let e = check_bypass_as_root(Some("bypassPermissions"), true, None).unwrap_err();
        assert_eq!(e.code, codes::INVALID_PARAMS);
        assert!(e.message.contains("IS_SANDBOX=1") && e.message.contains("[agents.claude-code.env]"));
        assert!(check_bypass_as_root(Some("bypassPermissions"), true, Some("true")).is_err());
        assert!(check_bypass_as_root(Some("bypassPermissions"), true, Some("1")).is_ok());
        assert!(check_bypass_as_root(Some("bypassPermissions"), false, None).is_ok());
        assert!(check_bypass_as_root(Some("default"), true, None).is_ok());
    }

    #[test]
    fn versions_are_the_first_version_looking_word() {
        assert_eq!(parse_version("2.1.197 (Claude Code)").as_deref(), Some("2.1.197"));
        assert_eq!(parse_version("claude v 1.0.3").as_deref(), Some("1.0.3"));
        assert_eq!(parse_version("Claude Code"), None);
    }

    fn attachment(name: &str, mime: &str, data: &str) -> Attachment {
        Attachment { name: name.into(), mime_type: mime.into(), data: data.into() }
    }

    #[test]
    fn attachments_become_anthropic_content_blocks() {
        let message = UserMessage {
            text: "look".into(),
            attachments: vec![
                attachment("a.png", "image/png", "iVBORw0KGgo="),
                attachment("b.pdf", "application/pdf", "JVBERi0="),
                attachment("c.txt", "text/plain", "aGVsbG8="),
            ],
        };
        let content = user_content(&message).unwrap();
        assert_eq!(content[0], json!({"type": "text", "text": "look"}));
        assert_eq!(
            content[1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
        );
        assert_eq!(
            content[2]["source"],
            json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="})
        );
        assert_eq!(content[3]["source"], json!({"type": "text", "media_type": "text/plain", "data": "hello"}));
        // An image alone: no empty text block.
        let only =
            UserMessage { text: String::new(), attachments: vec![attachment("a.png", "image/png", "iVBORw0KGgo=")] };
        assert_eq!(user_content(&only).unwrap().len(), 1);
    }

    #[test]
    fn bad_attachments_are_invalid_params() {
        for a in [attachment("x.zip", "application/zip", "UEs="), attachment("a.png", "image/png", "not base64!")] {
            let e = user_content(&UserMessage { text: "t".into(), attachments: vec![a] }).unwrap_err();
            assert_eq!(e.code, codes::INVALID_PARAMS, "{}", e.message);
        }
    }
}
