//! [`OpenCodeFamily`]: the [`Adapter`] of OpenCode and its forks, one long-lived
//! `<cli> acp` process per session, spoken to through the ACP host library
//! (`terminull-acp`: its [`Connection`] is the ACP client, its [`Mapper`] turns session
//! updates into blocks).
//!
//! What this module adds to the generic host, because OpenCode needs it:
//!
//! - the session's model, effort and agent (`permission_mode`) are ACP
//!   `configOptions`, not `modes`/`models`: they are checked against what the session
//!   offers ([`options`](crate::options)) and set with `session/set_config_option`;
//! - resuming uses `session/resume` (no history replay: about a second instead of
//!   five), falling back to `session/load` for a CLI without it;
//! - `list_models` runs `<cli> models`.
//!
//! When the process is lost (it crashed, or it was killed because it did not end a
//! cancelled turn in time) the next `send` starts a new one and resumes the same
//! session, so the conversation goes on.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use terminull_acp::Launch;
use terminull_acp::adapter::{prompt_content, working_dir};
use terminull_acp::client::{self, Connection, LOAD_TIMEOUT, SESSION_TIMEOUT, describe_error};
use terminull_acp::mapping::{Mapper, keep_chunk};
use terminull_acp::notice::{Notice, log_field};
use terminull_acp::schema::{PromptCapabilities, SessionUpdate, method};
use terminull_adapter_sdk::child::{AgentProcess, Lines, SpawnOptions};
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::program_on_path;
use terminull_protocol::blocks::Progress;
use terminull_protocol::jsonrpc::codes;
use terminull_rpc::CallError;
use tokio::process::Command;

use crate::flavor::Flavor;
use crate::handoff::OpenCodeSessions;
use crate::options::{self, DEFAULT_MODEL, SessionOptions, Setting};

/// `session/set_config_option` (ACP's successor of `set_mode`/`set_model`).
pub const SET_CONFIG_OPTION: &str = "session/set_config_option";
/// `session/resume`: reattach to a session without replaying it.
pub const SESSION_RESUME: &str = "session/resume";

/// How long `start` waits for the agent's slash commands (Kilo sends them right after
/// `session/new`; OpenCode only once the first prompt arrives).
const COMMANDS_WAIT: Duration = Duration::from_millis(300);
/// How long `<cli> models` may take (`list_models` has 30 s).
const MODELS_TIMEOUT: Duration = Duration::from_secs(25);
/// Most bytes of `<cli> models` output read.
const MODELS_OUTPUT_BYTES: usize = 512 * 1024;

/// The adapter for the OpenCode-family CLI `F`: one session. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct OpenCodeFamily<F: Flavor> {
    cwd: PathBuf,
    launch: Launch,
    wanted: Wanted,
    conn: Option<Connection>,
    /// The CLI's session id (`ses_…`).
    session_id: String,
    mapper: Mapper,
    prompt_caps: PromptCapabilities,
    /// Said in a `progress` block at the start of the next turn.
    notice: Option<String>,
    notices: u64,
    _flavor: PhantomData<F>,
}

/// What the start params asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Wanted {
    model: Option<String>,
    effort: Option<String>,
    mode: Option<String>,
}

impl Wanted {
    fn get(&self, setting: Setting) -> Option<&str> {
        match setting {
            Setting::Model => self.model.as_deref(),
            Setting::Effort => self.effort.as_deref(),
            Setting::Mode => self.mode.as_deref(),
        }
    }
}

/// The command line: `<program> acp`. The working directory is set on the process
/// (and sent again in `session/new`); the environment is inherited unchanged.
/// `<cli> acp --print-logs --log-level ERROR`: the CLI's errors on stderr, where each
/// failed model call is logged (and nothing in the ACP stream says so); see
/// [`stderr_notice`].
pub fn launch(program: PathBuf) -> Launch {
    let args = ["acp", "--print-logs", "--log-level", "ERROR"].map(Into::into).to_vec();
    Launch { program, args, env: Vec::new() }
}

/// A failed model call of the main agent, as the CLI logs it on stderr
/// (`level=ERROR … message="stream error" … small=false … error.error="AI_APICallError: …"`):
/// the CLI retries it (OpenCode 1.18 five times over about a minute) without a word in
/// its ACP stream. The title agent's calls (`small=true`) are not the turn's.
pub fn stderr_notice(line: &str) -> Option<Notice> {
    if log_field(line, "message")? != "stream error" || log_field(line, "small") == Some("true") {
        return None;
    }
    let why = log_field(line, "error.error").unwrap_or("the model call failed");
    Some(Notice::Retrying { attempt: None, total: None, why: why.to_owned() })
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// Applies the updates held during a call that belong to `session_id` (what describes
/// the session; content, such as a replayed history, is not shown outside a turn).
fn keep_session_updates(session_id: &str, held: Vec<(String, SessionUpdate)>, mapper: &mut Mapper) {
    for (sid, update) in held {
        if sid == session_id {
            mapper.outside_turn(update);
        } else {
            tracing::debug!("an update for session `{sid}`, not ours; dropped");
        }
    }
}

/// Opens a session on a running CLI: `session/resume` (or, for a CLI without it,
/// `session/load`) of `resume`, else `session/new`. Returns the session id and the
/// settings it offers. A session the CLI cannot resume is `not_found`.
async fn open_session<F: Flavor>(
    conn: &mut Connection,
    cwd: &Path,
    resume: Option<&str>,
    mapper: &mut Mapper,
) -> Result<(String, SessionOptions), AdapterError> {
    let name = F::DISPLAY_NAME;
    let cwd = cwd.display().to_string();
    let mut held = Vec::new();
    let Some(id) = resume else {
        let params = json!({"cwd": cwd, "mcpServers": []});
        let result = match conn.call(method::SESSION_NEW, params, SESSION_TIMEOUT, &mut held).await {
            Ok(result) => result,
            Err(e) => return Err(conn.failure(method::SESSION_NEW, e).await),
        };
        let Some(session_id) = result.get("sessionId").and_then(Value::as_str).filter(|s| !s.is_empty()) else {
            return Err(AdapterError::agent(format!("{name} answered session/new without a sessionId")));
        };
        keep_session_updates(session_id, held, mapper);
        return Ok((session_id.to_owned(), SessionOptions::from_result(&result)));
    };
    let params = json!({"sessionId": id, "cwd": cwd, "mcpServers": []});
    let mut answer = conn.call(SESSION_RESUME, params.clone(), SESSION_TIMEOUT, &mut held).await;
    let mut what = SESSION_RESUME;
    if matches!(&answer, Err(CallError::Rpc { error, .. }) if error.code == codes::METHOD_NOT_FOUND) {
        tracing::info!("{name} has no session/resume; loading the session instead");
        what = method::SESSION_LOAD;
        answer = conn.call(method::SESSION_LOAD, params, LOAD_TIMEOUT, &mut held).await;
    }
    match answer {
        Ok(result) => {
            keep_session_updates(id, held, mapper);
            Ok((id.to_owned(), SessionOptions::from_result(&result)))
        }
        Err(CallError::Rpc { error, .. }) if conn.alive() => Err(AdapterError::not_found(format!(
            "{name} cannot resume session `{id}` ({what}: {})",
            describe_error(&error)
        ))),
        Err(e) => Err(conn.failure(what, e).await),
    }
}

/// Sets the model, then the effort (whose choices follow the model), then the agent,
/// each only when asked for and not already current. Returns the session's settings
/// after the changes.
async fn apply_choices<F: Flavor>(
    conn: &mut Connection,
    session_id: &str,
    mut offered: SessionOptions,
    wanted: &Wanted,
    mapper: &mut Mapper,
) -> Result<SessionOptions, AdapterError> {
    for setting in [Setting::Model, Setting::Effort, Setting::Mode] {
        let hint = if setting == Setting::Effort { String::new() } else { F::config_hint() };
        let Some((config_id, value)) = options::choose(setting, wanted.get(setting), &offered, F::DISPLAY_NAME, &hint)?
        else {
            continue;
        };
        tracing::info!(config_id, value, "setting the session's {}", setting.what());
        let params = json!({"sessionId": session_id, "configId": config_id, "value": value});
        let mut held = Vec::new();
        match conn.call(SET_CONFIG_OPTION, params, SESSION_TIMEOUT, &mut held).await {
            Ok(result) => {
                let updated = SessionOptions::from_result(&result);
                if updated == SessionOptions::default() {
                    // An answer without the options: what was set is now current.
                    for select in [&mut offered.model, &mut offered.effort, &mut offered.mode].into_iter().flatten() {
                        if select.id == config_id {
                            select.current = Some(value.clone());
                        }
                    }
                } else {
                    offered = updated;
                }
            }
            Err(CallError::Rpc { error, .. }) if error.code == codes::INVALID_PARAMS => {
                return Err(AdapterError::invalid(format!(
                    "{} refused {} `{value}`: {}",
                    F::DISPLAY_NAME,
                    setting.what(),
                    describe_error(&error)
                )));
            }
            Err(e) => return Err(conn.failure(SET_CONFIG_OPTION, e).await),
        }
        keep_session_updates(session_id, held, mapper);
    }
    Ok(offered)
}

impl<F: Flavor> OpenCodeFamily<F> {
    /// Starts the CLI, opens `resume` (or a new session) and applies the choices. On
    /// failure the CLI is shut down. Returns the session id and its settings.
    async fn connect(&mut self, resume: Option<&str>) -> Result<(String, SessionOptions), AdapterError> {
        let mut conn = Connection::start(&self.launch, &self.cwd, F::DISPLAY_NAME).await?;
        conn.watch_stderr(stderr_notice);
        self.prompt_caps = conn.info.agent_capabilities.prompt_capabilities.clone();
        let opened = match open_session::<F>(&mut conn, &self.cwd, resume, &mut self.mapper).await {
            Ok((session_id, offered)) => {
                apply_choices::<F>(&mut conn, &session_id, offered, &self.wanted, &mut self.mapper)
                    .await
                    .map(|offered| (session_id, offered))
            }
            Err(e) => Err(e),
        };
        match opened {
            Ok(opened) => {
                self.conn = Some(conn);
                Ok(opened)
            }
            Err(e) => {
                conn.shutdown().await;
                Err(e)
            }
        }
    }

    /// Makes sure a CLI runs with our session open. After a lost process that means a
    /// new process resuming the session; if the CLI cannot resume it, a new session
    /// (and a notice for the user).
    async fn ensure_running(&mut self, session: &Session) -> Result<(), AdapterError> {
        if let Some(conn) = self.conn.as_mut() {
            if conn.alive() {
                return Ok(());
            }
            tracing::info!("{} is no longer running; starting it again", F::DISPLAY_NAME);
            self.let_go().await;
        }
        let session_id = self.session_id.clone();
        match self.connect(Some(&session_id)).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == codes::NOT_FOUND => {
                tracing::warn!("{}; starting a new session", e.message);
                let (new_id, _) = self.connect(None).await?;
                self.notice = Some(format!(
                    "{} could not resume the previous conversation ({}); this is a new conversation",
                    F::DISPLAY_NAME,
                    e.message
                ));
                self.session_id = new_id.clone();
                if let Err(e) = session.set_agent_session_id(new_id).await {
                    tracing::warn!("cannot report the session id: {e}");
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn let_go(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.shutdown().await;
        }
    }
}

impl<F: Flavor> Adapter for OpenCodeFamily<F> {
    const AGENT_ID: &'static str = F::AGENT_ID;
    const DISPLAY_NAME: &'static str = F::DISPLAY_NAME;
    const CLI_BINARY: Option<&'static str> = Some(F::CLI_BINARY);
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = Some(F::VERIFIED_AGAINST);
    const CAPS: Caps = caps! {
        supported: [images, documents, thinking, permissions, interrupt],
        unsupported: [subagents, input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::Persistent;
    const INIT_PARAMS: &'static [InitParam] = EVERY_INIT_PARAM;

    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PERSISTENT_HOOKS;

    type Models = Provided;
    type Usage = Provided;

    /// Ends the `<cli> acp` process; the next `send` starts one and resumes the session.
    async fn release(&mut self) -> Result<(), AdapterError> {
        self.let_go().await;
        Ok(())
    }

    fn handoff() -> Option<impl Handoff> {
        Some(OpenCodeSessions { cli: F::CLI_BINARY, env_prefix: F::ENV_PREFIX })
    }

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let cwd = working_dir(init.cwd)?;
        let program = program_on_path(init.binary.as_deref(), F::CLI_BINARY, F::DISPLAY_NAME)?;
        let wanted = Wanted {
            model: non_empty(init.model),
            effort: non_empty(init.effort),
            mode: non_empty(init.permission_mode),
        };
        let mut adapter = OpenCodeFamily::<F> {
            cwd,
            launch: launch(program),
            wanted,
            conn: None,
            session_id: String::new(),
            mapper: Mapper::new(keep_chunk),
            prompt_caps: PromptCapabilities::default(),
            notice: None,
            notices: 0,
            _flavor: PhantomData,
        };
        let resume = init.resume_session_id.map(|id| id.to_string());
        let (session_id, offered) = adapter.connect(resume.as_deref()).await?;
        adapter.session_id = session_id.clone();
        if let Some(conn) = adapter.conn.as_mut() {
            conn.wait_for_commands(&session_id, &mut adapter.mapper, COMMANDS_WAIT).await;
        }
        if let Err(e) = session.set_agent_session_id(session_id).await {
            adapter.let_go().await;
            return Err(AdapterError::agent(e));
        }
        let version = adapter.conn.as_ref().and_then(Connection::agent_version);
        let info = StartInfo { version, model: offered.current_model(), slash_commands: adapter.mapper.commands() };
        Ok((adapter, info))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        let content = prompt_content(&message, &self.prompt_caps, F::DISPLAY_NAME)?;
        self.ensure_running(turn.session()).await?;
        let session_id = self.session_id.clone();
        let Some(conn) = self.conn.as_mut() else {
            return Err(AdapterError::agent(format!("{} is not running", F::DISPLAY_NAME)));
        };
        conn.drain_idle(&session_id, &mut self.mapper).await;
        self.mapper.begin_turn(mint_id(F::AGENT_ID));
        if let Some(message) = self.notice.take() {
            self.notices += 1;
            let id = format!("{}-notice-{session_id}-{}", F::AGENT_ID, self.notices);
            let progress = Progress { id: id.into(), message, current: None, total: None, done: true };
            client::emit(turn, BlockKind::Progress(progress)).await;
        }
        let outcome = conn.prompt(&session_id, content, &mut self.mapper, turn).await;
        // `session_end` lets the bridge send the next message: a lost process is gone
        // before it is sent, so the next turn starts a new one.
        if outcome.lost {
            self.let_go().await;
        }
        Ok(outcome.close_turn(&mut self.mapper, turn).await)
    }

    async fn stop(&mut self) {
        self.let_go().await;
    }
}

impl<F: Flavor> GetUsage for OpenCodeFamily<F> {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.mapper.session_usage())
    }
}

impl<F: Flavor> ListModels for OpenCodeFamily<F> {
    /// `<cli> models` (the models of every configured provider, `provider/model`),
    /// after a first entry for the configuration's own default.
    async fn list_models() -> Result<Vec<ModelInfo>, AdapterError> {
        let program = program_on_path(None, F::CLI_BINARY, F::DISPLAY_NAME)?;
        let mut cmd = Command::new(program);
        cmd.arg("models");
        let opts = SpawnOptions { lines: Lines::Text, channel_capacity: 1024, ..SpawnOptions::default() };
        let (mut process, mut lines) = AgentProcess::spawn(cmd, opts)
            .map_err(|e| AdapterError::agent(format!("cannot run `{} models`: {e}", F::CLI_BINARY)))?;
        process.close_stdin();
        let mut output = String::new();
        let read = tokio::time::timeout(MODELS_TIMEOUT, async {
            while let Some(line) = lines.recv().await {
                if let Ok(Value::String(line)) = line
                    && output.len() + line.len() < MODELS_OUTPUT_BYTES
                {
                    output.push_str(&line);
                    output.push('\n');
                }
            }
        })
        .await;
        if read.is_err() {
            process.shutdown(Duration::from_secs(1)).await;
            return Err(AdapterError::agent(format!(
                "`{} models` did not finish within {MODELS_TIMEOUT:?}",
                F::CLI_BINARY
            )));
        }
        let status = tokio::time::timeout(Duration::from_secs(5), process.wait()).await;
        let models = options::parse_models(&output);
        if models.is_empty() {
            let tail = client::stderr_tail(&process.stderr_tail());
            let status = match status {
                Ok(Ok(status)) => status.to_string(),
                _ => "still running".to_owned(),
            };
            process.shutdown(Duration::from_secs(1)).await;
            return Err(AdapterError::agent(format!(
                "`{} models` listed no models ({status}){}{}",
                F::CLI_BINARY,
                if tail.is_empty() { "" } else { ": " },
                tail
            )));
        }
        let mut list = vec![ModelInfo {
            id: DEFAULT_MODEL.to_owned(),
            name: "Default".to_owned(),
            description: Some(format!("The model {}'s configuration chooses", F::DISPLAY_NAME)),
            is_default: true,
        }];
        list.extend(models.into_iter().map(|id| ModelInfo {
            name: id.clone(),
            id,
            description: None,
            is_default: false,
        }));
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_model_call_of_the_main_agent_on_stderr_is_a_retry_notice() {
        let main = r#"timestamp=2026-12-02T06:23:55.481Z level=ERROR run=2cd1b875 message="stream error" providerID=mock modelID=mock-model session.id=ses_1 small=false agent=build mode=primary error.error="AI_APICallError: scripted failure""#;
        assert_eq!(
            super::stderr_notice(main),
            Some(super::Notice::Retrying {
                attempt: None,
                total: None,
                why: "AI_APICallError: scripted failure".into()
            })
        );
        let title = main.replace("small=false", "small=true");
        assert_eq!(super::stderr_notice(&title), None, "the title agent's call is not the turn's");
        let other = r#"timestamp=2026-12-02T06:25:08.666Z level=ERROR message=process session.id=ses_1 error="scripted failure""#;
        assert_eq!(super::stderr_notice(other), None);
    }

    use super::*;
    use crate::flavor::OpenCode;
    use terminull_adapter_sdk::adapter::declaration;

    #[test]
    fn the_command_line_is_the_acp_subcommand_with_its_errors_on_stderr() {
        let l = launch(PathBuf::from("/opt/opencode"));
        assert_eq!(l.program, PathBuf::from("/opt/opencode"));
        assert_eq!(l.args, ["acp", "--print-logs", "--log-level", "ERROR"].map(std::ffi::OsString::from));
        assert!(l.env.is_empty(), "the environment is passed through unchanged");
    }

    #[test]
    fn the_declaration_is_persistent_and_takes_every_setting() {
        let d = declaration::<OpenCodeFamily<OpenCode>>();
        assert_eq!(d.agent_id.as_str(), "opencode");
        assert_eq!(d.cli_binary.as_deref(), Some("opencode"));
        assert_eq!(d.verified_against.as_deref(), Some("1.18.33"));
        assert_eq!(d.lease, LeaseKind::Persistent);
        assert!(d.capabilities.cap_permissions && d.capabilities.cap_interrupt && d.capabilities.cap_thinking);
        assert!(d.capabilities.provides_models && d.capabilities.provides_usage);
        for p in [InitParam::Effort, InitParam::PermissionMode, InitParam::ResumeSessionId, InitParam::OnSessionId] {
            assert!(d.accepted_init_params.contains(&p), "{p:?}");
        }
    }

    #[test]
    fn start_params_are_checked_before_anything_runs() {
        let e = working_dir(Some("/nonexistent/terminull-dir".into())).unwrap_err();
        assert_eq!(e.code, codes::INVALID_PARAMS);
        assert!(working_dir(None).unwrap().is_absolute());
        let e = program_on_path(None, "terminull-no-such-cli", "Nothing").unwrap_err();
        assert_eq!(e.code, codes::AGENT_ERROR);
        assert!(e.message.contains("terminull-no-such-cli"), "{}", e.message);
        assert_eq!(non_empty(Some("  ".into())), None);
        assert_eq!(non_empty(Some(" plan ".into())).as_deref(), Some("plan"));
    }
}
