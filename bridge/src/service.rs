//! The bridge service: the registry, the live sessions and their history, and the
//! one control dispatcher, [`Service::dispatch`]. Every transport reaches it through
//! the one connection loop ([`crate::connection`]): the local socket
//! ([`crate::local`]), the in-process client ([`crate::daemon_client`]), and each
//! paired device's encrypted link ([`crate::link`]) carried by the LAN server
//! ([`crate::lan`]) or the relay ([`crate::relay_client`]). A message type is
//! handled here, once; the service also hands the sessions' notices to the relay
//! connection, which pushes them to devices.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use terminull_protocol::adapter::{self as proto, HandoffHook};
use terminull_protocol::blocks::UserMessage;
use terminull_protocol::commands::{UNIVERSAL_SLASH_COMMANDS, is_universal};
use terminull_protocol::control::{
    self, Control, ControlMessage, Reply, ReplyError, ReplyErrorCode, ReplyOutcome, ReplyResult,
};
use terminull_protocol::ids::{AgentId, SessionId};
use terminull_protocol::relay::AgentSummary;
use terminull_protocol::session_list::SessionOrigin;
use tokio::sync::{broadcast, watch};

use crate::history::{HistoryStore, LogStatus, SessionMeta};
use crate::home::{Config, Home};
use crate::host::launch;
pub use crate::live::FollowGuard;
use crate::live::{Live, LiveSessions, Reaper};
use crate::registry::{Registry, ScanOptions, scan, scan_progressively};
/// Notices are made by the sessions; the service hands them to whoever listens.
pub use crate::session::notices::Notice;
use crate::session::{Following, SessionHandle, SessionPolicy, SessionSpec, spawn_session};

mod adapter_calls;
mod lists;

/// What one control message produced: the reply, and a session to follow when the
/// message started or resumed one.
#[derive(Debug)]
pub struct Dispatched {
    /// The reply to send.
    pub reply: Reply,
    /// The session this client follows from now on, and its blocks.
    pub follow: Option<(SessionHandle, Following)>,
    /// Held while the client follows that session (the reaper lets go only of sessions
    /// nobody follows).
    pub guard: Option<FollowGuard>,
}

impl Dispatched {
    /// Only a reply: nothing to follow.
    pub fn reply(reply: Reply) -> Self {
        Self { reply, follow: None, guard: None }
    }
}

/// The most sessions asked of each agent by `scan_external_sessions`.
const EXTERNAL_SCAN_LIMIT: u32 = 200;

/// `argv` as one POSIX shell line (each word single-quoted), after a `cd` to `cwd`.
pub fn shell_line(argv: &[String], cwd: Option<&str>) -> String {
    let quote = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    let command = argv.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
    match cwd {
        Some(dir) => format!("cd {} && {command}", quote(dir)),
        None => command,
    }
}

/// Notices buffered for slow listeners (older ones are dropped for them).
const NOTICE_BUFFER: usize = 256;

/// The running bridge. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    scan: ScanOptions,
    config: Config,
    registry: std::sync::RwLock<Registry>,
    /// True while the first scan runs.
    scanning: watch::Sender<bool>,
    history: HistoryStore,
    sessions: LiveSessions,
    /// Sessions being started, counted against the cap before they are live.
    starting: std::sync::atomic::AtomicUsize,
    reaper: Reaper,
    policy: SessionPolicy,
    notices: broadcast::Sender<Notice>,
    /// Which notices become pushes for which device.
    push: crate::push_policy::PushPolicy,
    /// The open terminals (docs/terminals.md).
    terminals: crate::terminal::Terminals,
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The home or its config is unusable.
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
    /// The history directory is unusable.
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
}

fn error(code: ReplyErrorCode, message: impl Into<String>) -> ReplyError {
    ReplyError { code, message: message.into() }
}

/// A handled message: its result, and the session to follow when it started or resumed one.
type Handled = (ReplyResult, Option<(SessionHandle, Following)>);

/// How [`Service::spawn`] brings a session's actor up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launch {
    /// Revived from history: the adapter starts with the first message, so replaying
    /// history costs no process.
    Revive,
    /// A new session: the adapter starts now, and a failure to start is the reply.
    Start,
    /// Bound to a conversation the agent's CLI started: its transcript is mirrored first.
    Attach,
}

/// The metadata of a new session of `agent` in `cwd`, under a fresh id; refused when
/// `cwd` is not a directory.
fn new_session_meta(agent: AgentId, cwd: String) -> Result<SessionMeta, ReplyError> {
    if !Path::new(&cwd).is_dir() {
        return Err(error(ReplyErrorCode::InvalidMessage, format!("cwd `{cwd}` is not a directory")));
    }
    let session_id = SessionId(format!("s-{}", uuid::Uuid::now_v7().simple()));
    Ok(SessionMeta::new(session_id, agent, cwd))
}

impl Service {
    /// Scans the adapters and opens the history under `home`; returns once the scan is done.
    pub async fn start(
        home: Home,
        config: Config,
        scan_options: ScanOptions,
        policy: SessionPolicy,
    ) -> Result<Self, ServiceError> {
        let service = Self::start_scanning(home, config, scan_options, policy)?;
        service.scanned().await;
        Ok(service)
    }

    /// Opens the history under `home` and scans the adapters in the background: the
    /// service answers at once (`list_agents` with the agents found so far); a request
    /// for an agent not found yet waits for the scan, which each adapter's deadline
    /// bounds. Also starts the reaper of idle sessions. Needs a Tokio runtime.
    pub fn start_scanning(
        home: Home,
        config: Config,
        scan_options: ScanOptions,
        policy: SessionPolicy,
    ) -> Result<Self, ServiceError> {
        let history = HistoryStore::open(home.sessions())?;
        let reaper = Reaper::new(config.limits.idle(), config.limits.max_live_sessions());
        let terminals = crate::terminal::Terminals::new(config.terminals.clone());
        let service = Self {
            inner: Arc::new(Inner {
                scan: scan_options,
                config,
                registry: std::sync::RwLock::new(Registry::default()),
                scanning: watch::channel(true).0,
                history,
                sessions: LiveSessions::default(),
                starting: 0.into(),
                reaper,
                policy,
                notices: broadcast::channel(NOTICE_BUFFER).0,
                push: crate::push_policy::PushPolicy::default(),
                terminals,
            }),
        };
        let weak = Arc::downgrade(&service.inner);
        tokio::spawn(async move {
            let Some(inner) = weak.upgrade() else { return };
            let registry = scan_progressively(&inner.scan, |partial| {
                *inner.registry.write().unwrap_or_else(|e| e.into_inner()) = partial;
                // Wakes the requests waiting for an agent.
                inner.scanning.send_replace(true);
            })
            .await;
            Self::log_registry(&registry);
            *inner.registry.write().unwrap_or_else(|e| e.into_inner()) = registry;
            inner.scanning.send_replace(false);
        });
        tokio::spawn(Self::reap_loop(Arc::downgrade(&service.inner)));
        Ok(service)
    }

    /// Returns once the first adapter scan is done.
    pub async fn scanned(&self) {
        let mut scanning = self.inner.scanning.subscribe();
        let _ = scanning.wait_for(|s| !*s).await;
    }

    /// Waits (bounded by the scan's own deadlines) until `agent` is registered or the
    /// first scan is done; `None` waits for the whole scan.
    async fn agents_ready(&self, agent: Option<&str>) {
        let bound = self.inner.scan.handshake_timeout + self.inner.scan.detect_timeout + Duration::from_secs(5);
        let mut scanning = self.inner.scanning.subscribe();
        let _ = tokio::time::timeout(bound, async {
            loop {
                if !*scanning.borrow_and_update() || agent.is_some_and(|a| self.read_registry().get(a).is_some()) {
                    return;
                }
                if scanning.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    fn read_registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.inner.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets idle sessions go, every tick and when a local starter leaves, until the
    /// service is gone.
    async fn reap_loop(inner: std::sync::Weak<Inner>) {
        let (Some(mut woken), tick) = ({
            let Some(inner) = inner.upgrade() else { return };
            (inner.reaper.take_queue(), inner.reaper.tick())
        }) else {
            return;
        };
        loop {
            let only = tokio::select! {
                id = woken.recv() => match id { Some(id) => Some(id), None => return },
                () = tokio::time::sleep(tick) => None,
            };
            let Some(inner) = inner.upgrade() else { return };
            let idle = if only.is_some() { Duration::ZERO } else { inner.reaper.idle };
            crate::live::reap(&inner.sessions, idle, only.as_ref()).await;
        }
    }

    /// Lets go now of the sessions nobody follows and that run no turn, idle for at
    /// least the configured time (`[limits] idle_secs`); returns those let go.
    pub async fn reap_idle(&self) -> Vec<SessionId> {
        crate::live::reap(&self.inner.sessions, self.inner.reaper.idle, None).await
    }

    /// Refuses a new live session when the cap is reached; else counts it as starting
    /// (call [`Self::started`] once it is live or failed).
    fn reserve(&self, live: usize) -> Result<(), ReplyError> {
        use std::sync::atomic::Ordering;
        let cap = self.inner.reaper.cap;
        let starting = self.inner.starting.fetch_add(1, Ordering::SeqCst);
        if live + starting >= cap {
            self.inner.starting.fetch_sub(1, Ordering::SeqCst);
            return Err(error(
                ReplyErrorCode::Busy,
                format!(
                    "the bridge runs {cap} live sessions, the most its [limits] max_live_sessions allows; \
                     stop one (stop_session) or wait until an idle one is let go"
                ),
            ));
        }
        Ok(())
    }

    fn started(&self) {
        self.inner.starting.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn log_registry(registry: &Registry) {
        for refusal in &registry.refused {
            tracing::warn!("{} adapter {} refused: {}", refusal.kind, refusal.path.display(), refusal.reason);
        }
        for agent in &registry.agents {
            tracing::info!(
                "agent {} ({}) from {}",
                agent.declaration.agent_id,
                agent.declaration.display_name,
                agent.source.path().display()
            );
        }
    }

    /// Scans the adapters again (new drop-ins, detect results) and swaps the registry.
    /// Running sessions keep the adapter they started with.
    pub async fn rescan(&self) {
        let registry = scan(&self.inner.scan).await;
        Self::log_registry(&registry);
        *self.inner.registry.write().unwrap_or_else(|e| e.into_inner()) = registry;
    }

    /// Watches `<home>/ext_adapters/` and rescans when its contents change, compared
    /// with what they are when this is called. The future runs until dropped.
    pub fn watch_drop_ins(self, every: std::time::Duration) -> impl std::future::Future<Output = ()> + Send {
        let dir = self.inner.scan.home.ext_adapters();
        let mut seen = crate::registry::fingerprint(&dir);
        async move {
            loop {
                tokio::time::sleep(every).await;
                let now = crate::registry::fingerprint(&dir);
                if now != seen {
                    tracing::info!("{} changed; rescanning adapters", dir.display());
                    self.rescan().await;
                    seen = now;
                }
            }
        }
    }

    /// Turn ends, permission requests and errors of every session, as they happen.
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.inner.notices.subscribe()
    }

    /// Which notices become pushes for which device (`push_settings`, `presence`,
    /// the rate limit).
    pub fn push_policy(&self) -> &crate::push_policy::PushPolicy {
        &self.inner.push
    }

    /// Sessions a client may resume (not stopped), from history.
    pub fn resumable_session_ids(&self) -> Vec<SessionId> {
        self.inner.history.resumable_session_ids().unwrap_or_else(|e| {
            tracing::warn!("cannot list resumable sessions: {e}");
            Vec::new()
        })
    }

    /// Revives every stored session that has work pending (a queued message, a
    /// terminal to watch), so a restarted daemon delivers and watches without waiting
    /// for a client to touch the session. Returns the sessions revived.
    pub async fn revive_pending_work(&self) -> Vec<SessionId> {
        let ids = self.inner.history.sessions_with_pending_work().unwrap_or_else(|e| {
            tracing::warn!("cannot list sessions with pending work: {e}");
            Vec::new()
        });
        let mut revived = Vec::new();
        for id in ids {
            match self.session(&id).await {
                Ok(_) => revived.push(id),
                Err(e) => tracing::warn!(session = %id, "cannot revive a session with pending work: {}", e.message),
            }
        }
        revived
    }

    /// The sessions running in this process now (from memory; cheap to poll).
    pub async fn live_session_ids(&self) -> Vec<SessionId> {
        self.inner.sessions.lock().await.keys().cloned().collect()
    }

    /// The registered agents as apps see them.
    pub async fn agent_summaries(&self) -> Vec<AgentSummary> {
        self.read_registry()
            .agents
            .iter()
            .map(|a| AgentSummary {
                agent_id: a.declaration.agent_id.clone(),
                display_name: a.declaration.display_name.clone(),
                version: a.detected.version.clone(),
                provides_models: a.declaration.capabilities.provides_models,
                installed: a.detected.installed,
                takes_permission_mode: a.declaration.accepted_init_params.contains(&proto::InitParam::PermissionMode),
                continues_in_terminal: a.declaration.handoff_hooks.contains(&HandoffHook::TerminalResumeCommand),
                install_hint: (!a.detected.installed)
                    .then(|| crate::agent_hints::install_hint(a.declaration.agent_id.as_str())),
            })
            .collect()
    }

    /// The current registry.
    pub async fn registry(&self) -> Registry {
        self.read_registry().clone()
    }

    /// Stops every live session's adapter and waits for it (history stays; sessions
    /// remain resumable by a later bridge).
    pub async fn shutdown(&self) {
        self.inner.terminals.shutdown();
        let sessions: Vec<_> = self.inner.sessions.lock().await.drain().map(|(_, live)| live.handle).collect();
        futures::future::join_all(sessions.iter().map(SessionHandle::detach)).await;
    }

    /// The open terminals.
    pub fn terminals(&self) -> &crate::terminal::Terminals {
        &self.inner.terminals
    }

    /// The directory of session `id` (live or in history), for a terminal opened in it.
    pub fn session_cwd(&self, id: &SessionId) -> Result<String, String> {
        self.inner.history.meta(id).map(|meta| meta.cwd).map_err(|e| format!("no session `{id}`: {e}"))
    }

    /// Handles one decoded control message.
    pub async fn dispatch(&self, control: Control) -> Dispatched {
        self.dispatch_from(control, None).await
    }

    /// Handles one decoded control message from a client started at `origin` (kept
    /// with a session it starts, for the app's lists), when known.
    pub async fn dispatch_from(&self, control: Control, origin: Option<SessionOrigin>) -> Dispatched {
        let id = control.id.clone();
        let starts = matches!(control.message, ControlMessage::SessionRequest(_) | ControlMessage::AttachExternal(_));
        let outcome = self.handle(control.message, origin).await;
        match outcome {
            Ok((result, follow)) => {
                let guard = match &follow {
                    Some((handle, _)) => self
                        .inner
                        .sessions
                        .lock()
                        .await
                        .get_mut(&handle.id)
                        .map(|live| self.inner.reaper.guard(live, starts)),
                    None => None,
                };
                Dispatched { reply: Reply::ok(id, result), follow, guard }
            }
            Err(e) => Dispatched::reply(Reply::error(id, e.code, e.message)),
        }
    }

    async fn session(&self, id: &SessionId) -> Result<SessionHandle, ReplyError> {
        // Held across the revive so two messages for the same stored session cannot
        // start two actors (and two writers) for it. Reviving starts no process.
        let mut sessions = self.inner.sessions.lock().await;
        if let Some(live) = sessions.get_mut(id) {
            live.touch();
            return Ok(live.handle.clone());
        }
        // Not live: a session in history can be revived (bridge restart).
        let unknown =
            |e: crate::history::HistoryError| error(ReplyErrorCode::UnknownSession, format!("no session `{id}`: {e}"));
        let meta = self.inner.history.meta(id).map_err(unknown)?;
        if meta.status == LogStatus::Stopped {
            return Err(error(ReplyErrorCode::UnknownSession, format!("session `{id}` was stopped")));
        }
        self.reserve(sessions.len())?;
        let revived = match self.inner.history.open_session(id).map_err(unknown) {
            Ok(log) => self.spawn(meta, log, Launch::Revive).await,
            Err(e) => Err(e),
        };
        self.started();
        let handle = revived?;
        sessions.insert(id.clone(), Live::new(handle.clone()));
        Ok(handle)
    }

    async fn spawn(
        &self,
        meta: SessionMeta,
        log: crate::history::SessionLog,
        launch: Launch,
    ) -> Result<SessionHandle, ReplyError> {
        self.agents_ready(Some(meta.agent_id.as_str())).await;
        let spec = {
            let registry = self.read_registry();
            let agent = registry.get(meta.agent_id.as_str()).ok_or_else(|| {
                error(ReplyErrorCode::UnknownAgent, format!("agent `{}` is not registered", meta.agent_id))
            })?;
            SessionSpec {
                command: agent.command.clone(),
                binary: self.inner.config.agent(meta.agent_id.as_str()).binary,
                meta,
                policy: self.inner.policy.clone(),
                store: self.inner.history.clone(),
                notices: self.inner.notices.clone(),
                hooks: agent.declaration.handoff_hooks.clone(),
                attach: launch == Launch::Attach,
            }
        };
        spawn_session(spec, log, launch == Launch::Start).await
    }

    /// Records a new session in history, brings it up as `launch` says, and follows it
    /// from its first block: what `session_request` and `attach_external` answer.
    async fn create_and_follow(&self, meta: SessionMeta, launch: Launch) -> Result<Handled, ReplyError> {
        let session_id = meta.session_id.clone();
        let live = self.inner.sessions.lock().await.len();
        self.reserve(live)?;
        let started = async {
            let log =
                self.inner.history.create(meta.clone()).map_err(|e| error(ReplyErrorCode::Internal, e.to_string()))?;
            let handle = match self.spawn(meta, log, launch).await {
                Ok(handle) => handle,
                Err(e) => {
                    // A session that never started is no session: nothing is left behind.
                    if let Err(removed) = self.inner.history.delete(&session_id) {
                        tracing::warn!(session = %session_id, "cannot remove a session that failed to start: {removed}");
                    }
                    return Err(e);
                }
            };
            let following = handle.follow(Some(0), None).await?;
            self.inner.sessions.lock().await.insert(session_id.clone(), Live::new(handle.clone()));
            Ok::<_, ReplyError>((handle, following))
        }
        .await;
        self.started();
        let (handle, following) = started?;
        Ok((ReplyResult::SessionStarted { session_id }, Some((handle, following))))
    }

    async fn handle(&self, message: ControlMessage, origin: Option<SessionOrigin>) -> Result<Handled, ReplyError> {
        let accepted = || ReplyResult::Accepted {};
        match message {
            ControlMessage::SessionRequest(r) => {
                self.agents_ready(Some(r.agent.as_str())).await;
                {
                    let registry = self.read_registry();
                    if registry.get(r.agent.as_str()).is_none() {
                        let known: Vec<_> = registry.agents.iter().map(|a| a.declaration.agent_id.as_str()).collect();
                        let scanning =
                            if *self.inner.scanning.borrow() { "; the adapter scan is still running" } else { "" };
                        return Err(error(
                            ReplyErrorCode::UnknownAgent,
                            format!("no agent `{}` is registered (known: {}){scanning}", r.agent, known.join(", ")),
                        ));
                    }
                    // A missing CLI is said plainly, before any session exists.
                    if let Some(agent) = registry.get(r.agent.as_str()).filter(|a| !a.detected.installed) {
                        let name = &agent.declaration.display_name;
                        return Err(error(
                            ReplyErrorCode::AgentFailed,
                            crate::agent_hints::not_installed(r.agent.as_str(), name),
                        ));
                    }
                }
                let mut meta = new_session_meta(r.agent, r.cwd)?;
                meta.origin = origin;
                meta.model = r.model;
                meta.effort = r.effort;
                meta.permission_mode = r.permission_mode;
                self.create_and_follow(meta, Launch::Start).await
            }
            ControlMessage::SessionResume(r) => {
                let handle = self.session(&r.session_id).await?;
                let following = handle.follow(r.since_seq, r.since_ts).await?;
                Ok((accepted(), Some((handle, following))))
            }
            ControlMessage::UserMessage(m) => {
                let handle = self.session(&m.session_id).await?;
                handle.user_message(UserMessage { text: m.text, attachments: m.attachments }).await?;
                Ok((accepted(), None))
            }
            ControlMessage::Interrupt(m) => {
                self.session(&m.session_id).await?.interrupt().await?;
                Ok((accepted(), None))
            }
            ControlMessage::PermissionResponse(m) => {
                self.session(&m.session_id).await?.permission_response(m.request_id, m.option_id).await?;
                Ok((accepted(), None))
            }
            ControlMessage::StopSession(m) => {
                let handle = self.session(&m.session_id).await?;
                handle.stop().await?;
                self.inner.sessions.lock().await.remove(&m.session_id);
                Ok((accepted(), None))
            }
            ControlMessage::SetSessionOptions(m) => {
                let options =
                    crate::session::handle::SessionOptions { model: m.model, permission_mode: m.permission_mode };
                self.session(&m.session_id).await?.set_options(options).await?;
                Ok((accepted(), None))
            }
            ControlMessage::ListSessions(_) => Ok((ReplyResult::Sessions { sessions: self.listings().await }, None)),
            ControlMessage::ListAgents(_) => Ok((ReplyResult::Agents { agents: self.agent_summaries().await }, None)),
            ControlMessage::ListModels(m) => {
                Ok((ReplyResult::Models { models: self.models(m.agent.as_str()).await? }, None))
            }
            ControlMessage::GetUsage(m) => {
                let usage = self.session(&m.session_id).await?.usage().await?;
                Ok((ReplyResult::Usage { usage }, None))
            }
            ControlMessage::SlashCommand(m) => self.slash(m).await.map(|r| (r, None)),
            ControlMessage::ScanExternalSessions(m) => {
                let sessions = self.scan_external(m.agent.as_ref().map(|a| a.as_str()), m.cwd).await?;
                Ok((ReplyResult::ExternalSessions { sessions }, None))
            }
            ControlMessage::AttachExternal(m) => {
                let hooks = self.hooks_of(m.agent.as_str()).await?;
                for needed in [HandoffHook::IsCwdExternallyOwned, HandoffHook::Mirror] {
                    if !hooks.contains(&needed) {
                        return Err(error(
                            ReplyErrorCode::NotSupported,
                            format!("agent `{}` cannot attach to its CLI's sessions (no {needed:?} hook)", m.agent),
                        ));
                    }
                }
                let mut meta = new_session_meta(m.agent, m.cwd)?;
                meta.agent_session_id = Some(m.agent_session_id);
                meta.pinned = m.pin;
                meta.origin = origin;
                self.create_and_follow(meta, Launch::Attach).await
            }
            ControlMessage::PushSettings(_) | ControlMessage::Presence(_) => Err(error(
                ReplyErrorCode::NotSupported,
                "push_settings and presence are for a paired device's link (relay or LAN), not this connection",
            )),
            // A device's link answers it before the dispatcher (crate::rtc).
            ControlMessage::RtcOffer(_) => Err(error(
                ReplyErrorCode::NotSupported,
                "rtc_offer is for a paired device's link to a bridge with a LAN server, not this connection",
            )),
            ControlMessage::Files(m) => {
                let dir = self.session_dir(&m.session_id)?;
                // Boxed: keeps the dispatcher's future small.
                let result = Box::pin(crate::files::handle(&dir, m.request)).await.map_err(ReplyError::from)?;
                Ok((ReplyResult::Files { result }, None))
            }
            ControlMessage::Git(m) => {
                let dir = self.session_dir(&m.session_id)?;
                let result = Box::pin(crate::git::handle(&dir, m.request)).await.map_err(ReplyError::from)?;
                Ok((ReplyResult::Git { result }, None))
            }
            ControlMessage::RenameSession(m) => self.rename(m).await.map(|r| (r, None)),
            ControlMessage::ArchiveSession(m) => self.archive(m).await.map(|r| (r, None)),
            ControlMessage::DeleteSession(m) => self.delete(m).await.map(|r| (r, None)),
            ControlMessage::SearchSessions(m) => self.search(m).await.map(|r| (r, None)),
            m @ (ControlMessage::TerminalOpen(_)
            | ControlMessage::TerminalAttach(_)
            | ControlMessage::TerminalInput(_)
            | ControlMessage::TerminalResize(_)
            | ControlMessage::TerminalClose(_)
            | ControlMessage::ListTerminals(_)) => {
                // The connection loop serves these (with the follow); this path is for
                // callers of `dispatch` without a connection.
                let (reply, _) = self.terminals().dispatch(Control { id: None, message: m }, |s| self.session_cwd(s));
                match reply.outcome {
                    ReplyOutcome::Ok { result } => Ok((result, None)),
                    ReplyOutcome::Error { error } => Err(error),
                    ReplyOutcome::Refused { message, .. } => Err(error(ReplyErrorCode::Internal, message)),
                }
            }
            ControlMessage::ContinueInTerminal(m) => {
                let command = self.session(&m.session_id).await?.continue_in_terminal().await?;
                let line = shell_line(&command.argv, command.cwd.as_deref());
                Ok((ReplyResult::TerminalCommand { argv: command.argv, cwd: command.cwd, command: line }, None))
            }
        }
    }

    /// The directory of a session in history (live or not), which `files` and `git`
    /// are confined to.
    fn session_dir(&self, id: &SessionId) -> Result<std::path::PathBuf, ReplyError> {
        let meta = self
            .inner
            .history
            .meta(id)
            .map_err(|e| error(ReplyErrorCode::UnknownSession, format!("no session `{id}`: {e}")))?;
        Ok(std::path::PathBuf::from(meta.cwd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminal_command_is_one_quoted_shell_line() {
        let argv = ["claude".to_owned(), "--resume".to_owned(), "it's".to_owned()];
        assert_eq!(shell_line(&argv, Some("/home/a b")), r"cd '/home/a b' && 'claude' '--resume' 'it'\''s'");
        assert_eq!(shell_line(&argv[..1], None), "'claude'");
    }
}
