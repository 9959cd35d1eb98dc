//! [`AcpAdapter`]: the [`Adapter`] of any ACP agent, given its [`AcpProfile`].
//!
//! - `start` launches the agent, performs `initialize`, opens the session
//!   (`session/load` to resume when the agent advertises `loadSession`, else
//!   `session/new`, saying so in a `progress` block of the first turn), applies the
//!   permission mode and model, waits briefly for the agent's slash commands and
//!   reports the ACP session id through `on_session_id`.
//! - `send` is one `session/prompt`; `interrupt` becomes `session/cancel`.
//! - With a `persistent` lease one agent process serves every turn; with `per_turn`
//!   each turn starts the agent and loads the session again (which needs
//!   `loadSession`). A process lost mid-session (crash, kill after a cancel that did not
//!   end the turn) is replaced on the next `send` the same way.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::check_choice;
use terminull_protocol::adapter::DetectResult;
use terminull_protocol::blocks::Progress;

use crate::client::{self, Connection, LOAD_TIMEOUT, SESSION_TIMEOUT};
use crate::mapping::Mapper;
use crate::profile::{AcpProfile, AfterLoad, Launch, Settings, Via};
use crate::schema::{PromptCapabilities, SessionResult, SessionUpdate, method};

/// How long `start` waits for the agent's slash commands (`available_commands_update`,
/// which agents send right after `session/new` answers).
pub const COMMANDS_WAIT: Duration = Duration::from_millis(300);
/// Attachments per message, and bytes per attachment (base64).
const MAX_ATTACHMENTS: usize = 16;
const MAX_ATTACHMENT_BYTES: usize = 28 * 1024 * 1024;

/// One session with an ACP agent. See the [module documentation](self).
#[derive(Debug)]
pub struct AcpAdapter<P: AcpProfile> {
    settings: Settings,
    launch: Launch,
    lease: LeaseKind,
    conn: Option<Connection>,
    /// The ACP session id, once one is open.
    session_id: Option<String>,
    mapper: Mapper,
    /// Said in a `progress` block at the start of the next turn.
    notice: Option<String>,
    notices: u64,
    mode: Option<String>,
    model: Option<String>,
    prompt_caps: PromptCapabilities,
    load_session: bool,
    _profile: PhantomData<P>,
}

/// An opened ACP session.
struct Opened {
    session_id: String,
    result: SessionResult,
    /// Why this is not the conversation that was asked for, when it is not.
    notice: Option<String>,
}

impl<P: AcpProfile> AcpAdapter<P> {
    async fn connect(&mut self) -> Result<(), AdapterError> {
        if self.conn.is_some() {
            return Ok(());
        }
        let mut conn = Connection::start(&self.launch, &self.settings.cwd, P::DISPLAY_NAME).await?;
        conn.watch_stderr(P::NOTICES.stderr);
        self.prompt_caps = conn.info.agent_capabilities.prompt_capabilities.clone();
        self.load_session = conn.info.agent_capabilities.load_session;
        self.conn = Some(conn);
        Ok(())
    }

    /// Opens `resume` (or a new session) on the running agent and applies the mode and
    /// model. On failure the agent is shut down.
    async fn open(&mut self, resume: Option<String>) -> Result<Opened, AdapterError> {
        let Some(mut conn) = self.conn.take() else { return Err(AdapterError::agent("the agent is not running")) };
        let opening = open_session(
            &mut conn,
            &self.settings.cwd,
            resume,
            &mut self.mapper,
            P::DISPLAY_NAME,
            P::EMPTY_LOAD_MEANS_UNKNOWN,
            P::prepare_load,
        );
        match opening.await {
            Ok(opened) => match self.apply_choices(&mut conn, &opened).await {
                Ok(()) => {
                    self.conn = Some(conn);
                    Ok(opened)
                }
                Err(e) => {
                    conn.shutdown().await;
                    Err(e)
                }
            },
            Err(e) => {
                conn.shutdown().await;
                Err(e)
            }
        }
    }

    /// `session/set_mode` and `session/set_model` for what the start params asked,
    /// checked against what the session offers.
    async fn apply_choices(&mut self, conn: &mut Connection, opened: &Opened) -> Result<(), AdapterError> {
        if let Some(mode) = self.mode.clone() {
            let modes = opened.result.modes.clone().unwrap_or_default();
            let ids: Vec<&str> = modes.available_modes.iter().map(|m| m.id.as_str()).collect();
            // By id, else by name or by an URL id's fragment (Copilot CLI's modes are
            // `https://agentclientprotocol.com/protocol/session-modes#plan`: `plan` works).
            let mode = match resolve_mode(&modes, &mode) {
                Some(id) => id,
                None => mode,
            };
            if !ids.contains(&mode.as_str()) {
                return Err(AdapterError::invalid(if ids.is_empty() {
                    format!("{} offers no permission modes over ACP, so `{mode}` cannot be set", P::DISPLAY_NAME)
                } else {
                    format!(
                        "unknown permission mode `{mode}` for {}; choose one of: {}",
                        P::DISPLAY_NAME,
                        ids.join(", ")
                    )
                }));
            }
            if modes.current_mode_id.as_deref() != Some(mode.as_str()) {
                let params = json!({"sessionId": opened.session_id, "modeId": mode});
                let mut held = Vec::new();
                if let Err(e) = conn.call(method::SESSION_SET_MODE, params, SESSION_TIMEOUT, &mut held).await {
                    return Err(conn.failure(method::SESSION_SET_MODE, e).await);
                }
                keep_session_updates(&opened.session_id, held, &mut self.mapper);
                self.mapper.outside_turn(SessionUpdate::CurrentMode { mode_id: mode.clone() });
            }
        }
        if let Some(model) = self.model.clone() {
            let models = opened.result.models.clone().unwrap_or_default();
            let found = models.available_models.iter().find(|m| m.model_id == model || m.name == model);
            let Some(found) = found else {
                let ids: Vec<&str> = models.available_models.iter().map(|m| m.model_id.as_str()).collect();
                return Err(AdapterError::invalid(if ids.is_empty() {
                    format!("{} offers no model choice over ACP, so `{model}` cannot be set", P::DISPLAY_NAME)
                } else {
                    format!("unknown model `{model}` for {}; choose one of: {}", P::DISPLAY_NAME, ids.join(", "))
                }));
            };
            if models.current_model_id.as_deref() != Some(found.model_id.as_str()) {
                let params = json!({"sessionId": opened.session_id, "modelId": found.model_id});
                let mut held = Vec::new();
                if let Err(e) = conn.call(method::SESSION_SET_MODEL, params, SESSION_TIMEOUT, &mut held).await {
                    return Err(conn.failure(method::SESSION_SET_MODEL, e).await);
                }
                keep_session_updates(&opened.session_id, held, &mut self.mapper);
            }
        }
        Ok(())
    }

    /// Makes sure an agent runs with our session open; after a lost process (or for
    /// every turn of a per-turn lease) that means a new process loading the session.
    async fn ensure_running(&mut self, session: &Session) -> Result<(), AdapterError> {
        if self.conn.is_some() {
            return Ok(());
        }
        self.connect().await?;
        let opened = self.open(self.session_id.clone()).await?;
        if let Some(notice) = opened.notice {
            self.notice = Some(notice);
        }
        if self.session_id.as_deref() != Some(opened.session_id.as_str()) {
            self.session_id = Some(opened.session_id.clone());
            if let Err(e) = session.set_agent_session_id(opened.session_id).await {
                tracing::warn!("cannot report the session id: {e}");
            }
        }
        Ok(())
    }

    async fn let_go(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.shutdown().await;
        }
    }
}

/// `session/load` when `resume` is given and the agent can load sessions, else (or
/// when loading fails) `session/new`.
async fn open_session(
    conn: &mut Connection,
    cwd: &Path,
    resume: Option<String>,
    mapper: &mut Mapper,
    name: &str,
    empty_load_means_unknown: bool,
    prepare_load: fn(&Path, &str) -> Option<AfterLoad>,
) -> Result<Opened, AdapterError> {
    let cwd_text = cwd.display().to_string();
    let mut notice = None;
    if let Some(id) = resume {
        if conn.info.agent_capabilities.load_session {
            let params = json!({"sessionId": id, "cwd": cwd_text, "mcpServers": []});
            let mut held = Vec::new();
            let after_load = prepare_load(cwd, &id);
            match conn.call(method::SESSION_LOAD, params, LOAD_TIMEOUT, &mut held).await {
                Ok(value) if empty_load_means_unknown && value.as_object().is_none_or(|o| o.is_empty()) => {
                    tracing::warn!("{name} does not know session {id}");
                    notice = Some(format!(
                        "{name} does not know the previous conversation ({id}); this is a new conversation"
                    ));
                }
                Ok(value) => {
                    if let Some(after_load) = after_load {
                        after_load();
                    }
                    // The replayed history is not shown again: the bridge has it.
                    keep_session_updates(&id, held, mapper);
                    let result: SessionResult = serde_json::from_value(value).unwrap_or_default();
                    if let Some(modes) = &result.modes {
                        mapper.set_modes(modes);
                    }
                    return Ok(Opened { session_id: id, result, notice: None });
                }
                Err(e) => {
                    let e = conn.failure(method::SESSION_LOAD, e).await;
                    if !conn.alive() {
                        return Err(e);
                    }
                    tracing::warn!("could not load session {id}: {}", e.message);
                    notice = Some(format!(
                        "{name} could not resume the previous conversation ({}); this is a new conversation",
                        e.message
                    ));
                }
            }
        } else {
            notice = Some(format!(
                "{name} cannot load earlier sessions (it does not offer session/load); this is a new conversation"
            ));
        }
    }
    let params = json!({"cwd": cwd_text, "mcpServers": []});
    let mut held = Vec::new();
    let value = match conn.call(method::SESSION_NEW, params, SESSION_TIMEOUT, &mut held).await {
        Ok(value) => value,
        Err(e) => return Err(conn.failure(method::SESSION_NEW, e).await),
    };
    let result: SessionResult = serde_json::from_value(value)
        .map_err(|e| AdapterError::agent(format!("{name} answered session/new with a malformed result: {e}")))?;
    let Some(session_id) = result.session_id.clone().filter(|s| !s.is_empty()) else {
        return Err(AdapterError::agent(format!("{name} answered session/new without a sessionId")));
    };
    if let Some(modes) = &result.modes {
        mapper.set_modes(modes);
    }
    // Updates sent before the answer (the bug class where an agent announces its
    // commands before saying which session they belong to) are sorted out now.
    keep_session_updates(&session_id, held, mapper);
    Ok(Opened { session_id, result, notice })
}

/// Applies the updates held during a call that belong to `session_id` (what describes
/// the session; content is not shown outside a turn) and drops the others.
fn keep_session_updates(session_id: &str, held: Vec<(String, SessionUpdate)>, mapper: &mut Mapper) {
    for (sid, update) in held {
        if sid == session_id {
            mapper.outside_turn(update);
        } else {
            tracing::debug!("an update for session `{sid}`, not ours; dropped");
        }
    }
}

/// The `session/prompt` content for a user message: its text, images as `image`
/// blocks (when the agent takes images), other files as embedded `resource` blocks
/// (when it takes embedded context).
pub fn prompt_content(
    message: &UserMessage,
    caps: &PromptCapabilities,
    name: &str,
) -> Result<Vec<Value>, AdapterError> {
    if message.attachments.len() > MAX_ATTACHMENTS {
        return Err(AdapterError::invalid(format!("at most {MAX_ATTACHMENTS} attachments per message")));
    }
    let mut content = Vec::new();
    if !message.text.is_empty() || message.attachments.is_empty() {
        content.push(json!({"type": "text", "text": message.text}));
    }
    for a in &message.attachments {
        if a.data.len() > MAX_ATTACHMENT_BYTES {
            return Err(AdapterError::invalid(format!("attachment `{}` is too large", a.name)));
        }
        let mime = a.mime_type.to_ascii_lowercase();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(a.data.as_bytes())
            .map_err(|e| AdapterError::invalid(format!("attachment `{}` is not valid base64: {e}", a.name)))?;
        let uri = format!("attachment:///{}", a.name.replace(['/', ' '], "_"));
        if mime.starts_with("image/") && caps.image {
            content.push(json!({"type": "image", "mimeType": mime, "data": a.data}));
        } else if caps.embedded_context {
            let resource = match String::from_utf8(bytes) {
                Ok(text) if mime.starts_with("text/") || mime == "application/json" => {
                    json!({"uri": uri, "mimeType": mime, "text": text})
                }
                _ => json!({"uri": uri, "mimeType": mime, "blob": a.data}),
            };
            content.push(json!({"type": "resource", "resource": resource}));
        } else {
            return Err(AdapterError::invalid(format!(
                "{name} cannot take the attachment `{}` ({mime}) over ACP",
                a.name
            )));
        }
    }
    Ok(content)
}

/// The id of the session mode `wanted` names: its id, else the one mode whose name or
/// id fragment (after `#`) is `wanted`, ignoring case.
fn resolve_mode(modes: &crate::schema::SessionModes, wanted: &str) -> Option<String> {
    if modes.available_modes.iter().any(|m| m.id == wanted) {
        return Some(wanted.to_owned());
    }
    let mut named = modes.available_modes.iter().filter(|m| {
        m.name.eq_ignore_ascii_case(wanted)
            || m.id.rsplit_once('#').is_some_and(|(_, f)| f.eq_ignore_ascii_case(wanted))
    });
    match (named.next(), named.next()) {
        (Some(one), None) => Some(one.id.clone()),
        _ => None,
    }
}

/// The working directory: the `cwd` init param taken from the adapter's own (a blank
/// one is the adapter's own), and a directory. The OpenCode family starts its sessions
/// the same way.
pub fn working_dir(cwd: Option<String>) -> Result<PathBuf, AdapterError> {
    let here = std::env::current_dir().map_err(|e| AdapterError::agent(format!("no working directory: {e}")))?;
    let dir = match cwd.filter(|c| !c.trim().is_empty()) {
        Some(c) => here.join(c),
        None => here,
    };
    if !dir.is_dir() {
        return Err(AdapterError::invalid(format!("cwd `{}` is not a directory", dir.display())));
    }
    Ok(dir)
}

impl<P: AcpProfile> Adapter for AcpAdapter<P> {
    const AGENT_ID: &'static str = P::AGENT_ID;
    const DISPLAY_NAME: &'static str = P::DISPLAY_NAME;
    const CLI_BINARY: Option<&'static str> = P::CLI_BINARY;
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = P::VERIFIED_AGAINST;
    const CAPS: Caps = P::CAPS;
    const LEASE: LeaseKind = P::LEASE;
    const INIT_PARAMS: &'static [InitParam] = P::INIT_PARAMS;
    const HANDOFF_HOOKS: &'static [HandoffHook] = P::HANDOFF_HOOKS;

    type Models = NotProvided;
    type Usage = Provided;

    /// Lets the agent process go; the next `send` starts it again and loads the session.
    async fn release(&mut self) -> Result<(), AdapterError> {
        self.let_go().await;
        Ok(())
    }

    fn handoff() -> Option<impl Handoff> {
        P::handoff()
    }

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let permission_mode = match P::PERMISSION_MODES {
            Some(modes) => check_choice(P::DISPLAY_NAME, "permission mode", init.permission_mode, modes)?,
            None => init.permission_mode.filter(|m| !m.trim().is_empty()),
        };
        let settings = Settings {
            cwd: working_dir(init.cwd)?,
            binary: init.binary,
            model: init.model.filter(|m| !m.trim().is_empty()),
            permission_mode,
        };
        let launch = P::launch(&settings)?;
        let via_acp = |v: Via| match v {
            Via::Acp(id) => Some(id),
            Via::CommandLine => None,
        };
        let mode = settings.permission_mode.as_deref().and_then(|m| via_acp(P::permission_mode_via(m)));
        let model = settings.model.as_deref().and_then(|m| via_acp(P::model_via(m)));
        let lease = session.declaration().lease;
        let mut adapter = AcpAdapter::<P> {
            settings,
            launch,
            lease,
            conn: None,
            session_id: None,
            mapper: Mapper::new(P::REWRITE_THOUGHT).with_message_notices(P::NOTICES.message),
            notice: None,
            notices: 0,
            mode,
            model,
            prompt_caps: PromptCapabilities::default(),
            load_session: false,
            _profile: PhantomData,
        };
        adapter.connect().await?;
        if lease == LeaseKind::PerTurn && !adapter.load_session {
            adapter.let_go().await;
            return Err(AdapterError::invalid(format!(
                "{} cannot load sessions (no loadSession), so it cannot be run one process per turn; \
                 use a persistent lease",
                P::DISPLAY_NAME
            )));
        }
        let resume = init.resume_session_id.map(|id| id.to_string());
        let opened = adapter.open(resume).await?;
        adapter.notice = opened.notice;
        adapter.session_id = Some(opened.session_id.clone());
        if let Some(conn) = adapter.conn.as_mut() {
            conn.wait_for_commands(&opened.session_id, &mut adapter.mapper, COMMANDS_WAIT).await;
        }
        session.set_agent_session_id(opened.session_id.clone()).await.map_err(AdapterError::agent)?;
        let version = adapter.conn.as_ref().and_then(Connection::agent_version);
        let model = adapter.model.clone().or_else(|| opened.result.models.and_then(|m| m.current_model_id));
        let slash_commands = adapter.mapper.commands();
        if lease == LeaseKind::PerTurn {
            adapter.let_go().await;
        }
        Ok((adapter, StartInfo { version, model, slash_commands }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        self.ensure_running(turn.session()).await?;
        let content = prompt_content(&message, &self.prompt_caps, P::DISPLAY_NAME)?;
        let (Some(conn), Some(session_id)) = (self.conn.as_mut(), self.session_id.clone()) else {
            return Err(AdapterError::agent(format!("{} is not running", P::DISPLAY_NAME)));
        };
        conn.drain_idle(&session_id, &mut self.mapper).await;
        self.mapper.begin_turn(mint_id("acp"));
        if let Some(message) = self.notice.take() {
            self.notices += 1;
            let id = format!("acp-notice-{session_id}-{}", self.notices);
            let progress = Progress { id: id.into(), message, current: None, total: None, done: true };
            client::emit(turn, BlockKind::Progress(progress)).await;
        }
        let outcome = conn.prompt(&session_id, content, &mut self.mapper, turn).await;
        // `session_end` tells the bridge it may send the next message: a process that
        // goes away (lost, or the end of a per-turn lease) is gone before it is sent.
        if outcome.lost || self.lease == LeaseKind::PerTurn {
            self.let_go().await;
        }
        Ok(outcome.close_turn(&mut self.mapper, turn).await)
    }

    async fn stop(&mut self) {
        self.let_go().await;
    }

    fn detect() -> impl std::future::Future<Output = DetectResult> {
        P::detect()
    }
}

impl<P: AcpProfile> GetUsage for AcpAdapter<P> {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.mapper.session_usage())
    }
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::Attachment;
    use terminull_protocol::jsonrpc::codes;

    use super::*;

    fn message(attachments: Vec<Attachment>) -> UserMessage {
        UserMessage { text: "look".into(), attachments }
    }

    fn attachment(name: &str, mime: &str, data: &str) -> Attachment {
        Attachment { name: name.into(), mime_type: mime.into(), data: data.into() }
    }

    #[test]
    fn prompt_content_follows_the_agents_prompt_capabilities() {
        let all = PromptCapabilities { image: true, embedded_context: true };
        let content = prompt_content(
            &message(vec![
                attachment("a.png", "image/png", "iVBORw0KGgo="),
                attachment("n.txt", "text/plain", "aGVsbG8="),
                attachment("b.pdf", "application/pdf", "JVBERi0="),
            ]),
            &all,
            "X",
        )
        .unwrap();
        assert_eq!(content[0], json!({"type": "text", "text": "look"}));
        assert_eq!(content[1], json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}));
        assert_eq!(content[2]["resource"]["text"], "hello");
        assert_eq!(content[3]["resource"]["blob"], "JVBERi0=");
        let none = PromptCapabilities::default();
        let e =
            prompt_content(&message(vec![attachment("a.png", "image/png", "iVBORw0KGgo=")]), &none, "X").unwrap_err();
        assert_eq!(e.code, codes::INVALID_PARAMS);
        let e = prompt_content(&message(vec![attachment("a.png", "image/png", "!!")]), &all, "X").unwrap_err();
        assert!(e.message.contains("base64"), "{}", e.message);
        assert_eq!(prompt_content(&message(vec![]), &none, "X").unwrap().len(), 1);
    }

    #[test]
    fn a_mode_is_found_by_id_name_or_url_fragment() {
        use crate::schema::{SessionMode, SessionModes};
        let mode = |id: &str, name: &str| SessionMode { id: id.into(), name: name.into() };
        let modes = SessionModes {
            current_mode_id: None,
            available_modes: vec![
                mode("https://agentclientprotocol.com/protocol/session-modes#agent", "Agent"),
                mode("https://agentclientprotocol.com/protocol/session-modes#plan", "Plan"),
                mode("auto-edit", "Auto Edit"),
            ],
        };
        let plan = "https://agentclientprotocol.com/protocol/session-modes#plan";
        assert_eq!(resolve_mode(&modes, plan).as_deref(), Some(plan));
        assert_eq!(resolve_mode(&modes, "plan").as_deref(), Some(plan));
        assert_eq!(resolve_mode(&modes, "Agent").as_deref(), Some(modes.available_modes[0].id.as_str()));
        assert_eq!(resolve_mode(&modes, "auto edit").as_deref(), Some("auto-edit"));
        assert_eq!(resolve_mode(&modes, "yolo"), None);
    }

    #[test]
    fn the_working_directory_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(working_dir(Some(dir.path().display().to_string())).unwrap(), dir.path());
        let e = working_dir(Some(dir.path().join("nope").display().to_string())).unwrap_err();
        assert_eq!(e.code, codes::INVALID_PARAMS);
        assert!(working_dir(None).unwrap().is_absolute());
    }
}
