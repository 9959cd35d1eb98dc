//! [`serve`]: the adapter's protocol loop over stdin/stdout.
//!
//! One ordered loop: requests are handled in the order they arrive; while a turn
//! runs, `interrupt`, `permission_response`, `send` (for `cap_input_during_turn`) and
//! `stop` are routed into it and class-level calls are answered, so the bridge is
//! never blocked behind a turn. stdout carries protocol only (the peer's single
//! writer); logs go to stderr through `tracing`.

use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use terminull_protocol::adapter::{
    self as proto, AdapterRequest, Declaration, HandoffHook, InitParam, LeaseKind, PROTOCOL_VERSION, StartParams,
    StartResult,
};
use terminull_protocol::blocks::EndReason;
use terminull_protocol::ids::AgentId;
use terminull_protocol::jsonrpc::{Request, RpcError, codes};
use terminull_rpc::{Incoming, Peer, PeerConfig};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::adapter::{Adapter, AdapterError, ModelSurface, UsageSurface, declaration};
use crate::handoff::hooks::Handoff;
use crate::make_agent_info;
use crate::session::{Session, Turn, TurnControl};

/// Runs adapter `A` on stdin/stdout until `stop` or end of input. Call it from
/// `main`; it sets up logging to stderr (level from `TERMINULL_LOG`, default `info`)
/// and a single-threaded runtime.
pub fn serve<A: Adapter>() -> ExitCode {
    serve_with::<A>(DeclarationOverride::default())
}

/// Identity fields of the declaration that are decided at run time rather than by
/// the adapter's consts: an adapter executable that serves agents declared in a
/// configuration file (the generic ACP host, `terminull-acp --agent-id ID --name NAME
/// -- <command>`) takes its agent id, name, CLI and lease from its command line.
///
/// Only identity can be overridden. The capabilities, the init params and the hooks
/// stay the adapter's consts, so what the serve loop routes and what the declaration
/// promises still cannot disagree. A field left `None` keeps the const's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeclarationOverride {
    /// Replaces `AGENT_ID` (must be a valid agent id, or the bridge refuses the adapter).
    pub agent_id: Option<AgentId>,
    /// Replaces `DISPLAY_NAME`.
    pub display_name: Option<String>,
    /// Replaces `CLI_BINARY` (the name shown and probed).
    pub cli_binary: Option<String>,
    /// Replaces `LEASE`; the adapter must then behave accordingly (it can read the
    /// effective declaration with [`Session::declaration`]).
    pub lease: Option<LeaseKind>,
}

impl DeclarationOverride {
    /// The declaration of `A` with these fields replaced.
    pub fn apply<A: Adapter>(&self) -> Declaration {
        let mut d = declaration::<A>();
        if let Some(id) = &self.agent_id {
            d.agent_id = id.clone();
        }
        if let Some(name) = &self.display_name {
            d.display_name = name.clone();
        }
        if let Some(cli) = &self.cli_binary {
            d.cli_binary = Some(cli.clone());
        }
        if let Some(lease) = self.lease {
            d.lease = lease;
        }
        d
    }
}

/// [`serve`] with the declaration's identity overridden at run time (see
/// [`DeclarationOverride`]).
pub fn serve_with<A: Adapter>(overrides: DeclarationOverride) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TERMINULL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve_io_with::<A, _, _>(tokio::io::stdin(), tokio::io::stdout(), overrides));
    // tokio reads stdin on a blocking thread that only returns at end of input; do not
    // wait for it after `stop`.
    runtime.shutdown_background();
    ExitCode::SUCCESS
}

/// The protocol loop on any byte streams (stdin/stdout in production, in-memory pipes
/// in tests). Returns when the bridge sends `stop` or closes the stream.
pub async fn serve_io<A, R, W>(reader: R, writer: W)
where
    A: Adapter,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_io_with::<A, R, W>(reader, writer, DeclarationOverride::default()).await
}

/// [`serve_io`] with the declaration's identity overridden (see [`DeclarationOverride`]).
pub async fn serve_io_with<A, R, W>(reader: R, writer: W, overrides: DeclarationOverride)
where
    A: Adapter,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let declaration = Arc::new(overrides.apply::<A>());
    let name = declaration.agent_id.to_string();
    let (peer, mut incoming, tasks) = terminull_rpc::spawn(reader, writer, PeerConfig::named(name));
    let mut state = Loop::<A> { peer: peer.clone(), declaration, adapter: None, stopping: false };
    while let Some(message) = incoming.recv().await {
        let Some(request) = state.take_request(message).await else { continue };
        if request.method == proto::Send::METHOD {
            state.run_turn(request, &mut incoming).await;
        } else {
            state.handle_idle(request).await;
        }
        if state.stopping {
            break;
        }
    }
    if !state.stopping
        && let Some(adapter) = state.adapter.as_mut()
    {
        // The bridge closed our stdin without `stop`: still let the agent go cleanly.
        adapter.stop().await;
    }
    drop(state);
    // Everything answered so far (the reply to `stop` included) reaches the bridge
    // before the process exits.
    if let Err(e) = peer.flush().await {
        tracing::debug!("could not flush the last messages: {e}");
    }
    drop(tasks);
}

struct Loop<A> {
    peer: Peer,
    /// The effective declaration (the consts of `A`, identity possibly overridden).
    declaration: Arc<Declaration>,
    adapter: Option<A>,
    stopping: bool,
}

fn encode<T: Serialize>(result: Result<T, AdapterError>) -> Result<Value, RpcError> {
    result.map_err(RpcError::from).and_then(|v| serde_json::to_value(v).map_err(RpcError::internal))
}

fn params<M: AdapterRequest>(request: &Request) -> Result<M::Params, RpcError> {
    request.params_as::<M>().map_err(|e| RpcError::new(codes::INVALID_PARAMS, e.to_string()))
}

impl<A: Adapter> Loop<A> {
    async fn respond(&self, request: &Request, outcome: Result<Value, RpcError>) {
        if let Err(e) = self.peer.respond(request.id.clone(), outcome).await {
            tracing::debug!("cannot answer {}: {e}", request.method);
        }
    }

    /// Logs what is not a request; answers invalid messages that carry an id.
    async fn take_request(&self, message: Incoming) -> Option<Request> {
        match message {
            Incoming::Request(r) => Some(r),
            Incoming::Notification(n) => {
                tracing::warn!("ignoring unexpected notification `{}` from the bridge", n.method);
                None
            }
            Incoming::BadLine(e) => {
                tracing::warn!("ignoring a bad line from the bridge: {e}");
                None
            }
            Incoming::Invalid { error, id } => {
                tracing::warn!("ignoring an invalid message from the bridge: {error}");
                if let Some(id) = id {
                    let _ = self.peer.respond(id, Err(RpcError::new(codes::INVALID_REQUEST, error.to_string()))).await;
                }
                None
            }
        }
    }

    fn session(&self) -> Session {
        Session::new(self.peer.clone(), A::INIT_PARAMS.contains(&InitParam::OnSessionId), self.declaration.clone())
    }

    /// Methods answered the same whether or not a turn runs: `None` when `request`
    /// is not one of them.
    async fn class_level(&self, request: &Request) -> Option<Result<Value, RpcError>> {
        let hook = |h: HandoffHook| A::HANDOFF_HOOKS.contains(&h);
        let not_declared = || Err(RpcError::method_not_found(&request.method));
        Some(match request.method.as_str() {
            proto::Initialize::METHOD => match params::<proto::Initialize>(request) {
                Ok(p) if !p.accepts(PROTOCOL_VERSION) => Err(RpcError::new(
                    codes::PROTOCOL_VERSION_MISMATCH,
                    format!("this adapter speaks adapter protocol {PROTOCOL_VERSION}, the bridge {}", p.versions()),
                )
                .with_data(json!({"supported": [PROTOCOL_VERSION], "requested": p.protocol_version}))),
                Ok(_) => encode(Ok(self.declaration.as_ref().clone())),
                Err(e) => Err(e),
            },
            proto::Detect::METHOD => encode(Ok(A::detect().await)),
            proto::ListModels::METHOD if <A::Models as ModelSurface<A>>::PROVIDED => {
                encode(<A::Models as ModelSurface<A>>::list().await.map(|models| proto::ListModelsResult { models }))
            }
            proto::ScanExternalSessions::METHOD if hook(HandoffHook::ScanExternalSessions) => {
                match (params::<proto::ScanExternalSessions>(request), A::handoff()) {
                    (Ok(p), Some(h)) => encode(
                        h.scan_external_sessions(p)
                            .await
                            .map(|sessions| proto::ScanExternalSessionsResult { sessions }),
                    ),
                    (Ok(_), None) => not_declared(),
                    (Err(e), _) => Err(e),
                }
            }
            proto::IsCwdExternallyOwned::METHOD if hook(HandoffHook::IsCwdExternallyOwned) => {
                match (params::<proto::IsCwdExternallyOwned>(request), A::handoff()) {
                    (Ok(p), Some(h)) => encode(h.is_cwd_externally_owned(p).await),
                    (Ok(_), None) => not_declared(),
                    (Err(e), _) => Err(e),
                }
            }
            proto::Mirror::METHOD if hook(HandoffHook::Mirror) => {
                match (params::<proto::Mirror>(request), A::handoff()) {
                    (Ok(p), Some(h)) => encode(h.mirror(p).await),
                    (Ok(_), None) => not_declared(),
                    (Err(e), _) => Err(e),
                }
            }
            proto::LatestSidForCwd::METHOD if hook(HandoffHook::LatestSidForCwd) => {
                match (params::<proto::LatestSidForCwd>(request), A::handoff()) {
                    (Ok(p), Some(h)) => encode(h.latest_sid_for_cwd(p).await),
                    (Ok(_), None) => not_declared(),
                    (Err(e), _) => Err(e),
                }
            }
            proto::TerminalResumeCommand::METHOD if hook(HandoffHook::TerminalResumeCommand) => {
                match (params::<proto::TerminalResumeCommand>(request), A::handoff()) {
                    (Ok(p), Some(h)) => encode(h.terminal_resume_command(p).await),
                    (Ok(_), None) => not_declared(),
                    (Err(e), _) => Err(e),
                }
            }
            proto::ListModels::METHOD
            | proto::ScanExternalSessions::METHOD
            | proto::IsCwdExternallyOwned::METHOD
            | proto::Mirror::METHOD
            | proto::LatestSidForCwd::METHOD
            | proto::TerminalResumeCommand::METHOD => not_declared(),
            _ => return None,
        })
    }

    async fn handle_idle(&mut self, request: Request) {
        if let Some(outcome) = self.class_level(&request).await {
            return self.respond(&request, outcome).await;
        }
        let outcome = match request.method.as_str() {
            proto::Start::METHOD => self.start(&request).await,
            proto::GetUsage::METHOD if <A::Usage as UsageSurface<A>>::PROVIDED => match self.adapter.as_mut() {
                Some(adapter) => encode(<A::Usage as UsageSurface<A>>::usage(adapter).await),
                None => Err(no_session()),
            },
            proto::Release::METHOD if A::HANDOFF_HOOKS.contains(&HandoffHook::Release) => match self.adapter.as_mut() {
                Some(adapter) => encode(adapter.release().await.map(|()| proto::Empty {})),
                None => Err(no_session()),
            },
            // Nothing runs: an interrupt has nothing to stop.
            proto::Interrupt::METHOD if A::CAPS.interrupt => encode(Ok(proto::Empty {})),
            proto::PermissionResponse::METHOD if A::CAPS.permissions => {
                Err(RpcError::new(codes::NOT_FOUND, "no permission request is waiting"))
            }
            proto::Stop::METHOD => {
                if let Some(adapter) = self.adapter.as_mut() {
                    adapter.stop().await;
                }
                self.stopping = true;
                encode(Ok(proto::Empty {}))
            }
            _ => Err(RpcError::method_not_found(&request.method)),
        };
        self.respond(&request, outcome).await;
    }

    async fn start(&mut self, request: &Request) -> Result<Value, RpcError> {
        if self.adapter.is_some() {
            return Err(RpcError::new(codes::BUSY, "the session is already started"));
        }
        let offered = params::<proto::Start>(request)?;
        let init = accepted_only(offered, A::INIT_PARAMS);
        let (adapter, info) = A::start(init, &self.session()).await.map_err(RpcError::from)?;
        self.adapter = Some(adapter);
        let agent_info = make_agent_info(&self.declaration, info.version, info.model, info.slash_commands);
        encode(Ok(StartResult { agent_info }))
    }

    async fn run_turn(&mut self, request: Request, incoming: &mut terminull_rpc::IncomingQueue) {
        let message = match params::<proto::Send>(&request) {
            Ok(m) => m,
            Err(e) => return self.respond(&request, Err(e)).await,
        };
        // The adapter leaves `self` for the turn, so the loop can keep answering.
        let Some(mut adapter) = self.adapter.take() else {
            return self.respond(&request, Err(no_session())).await;
        };
        // Acknowledge first: the turn streams after the answer.
        self.respond(&request, encode(Ok(proto::Empty {}))).await;
        let (mut turn, control) = Turn::new(self.session());
        let mut deferred_stop: Option<Request> = None;
        let outcome = {
            let work = adapter.send(message, &mut turn);
            tokio::pin!(work);
            loop {
                tokio::select! {
                    outcome = &mut work => break outcome,
                    next = incoming.recv() => match next {
                        None => {
                            // The bridge is gone: stop the turn and let it wind down.
                            control.interrupt.cancel();
                            self.stopping = true;
                        }
                        Some(message) => {
                            let Some(r) = self.take_request(message).await else { continue };
                            if let Some(stop) = self.during_turn(r, &control).await {
                                control.interrupt.cancel();
                                deferred_stop = Some(stop);
                            }
                        }
                    },
                }
            }
        };
        let (reason, error) = match (&outcome, deferred_stop.is_some() || self.stopping) {
            (_, true) => (EndReason::Stopped, None),
            (Ok(reason), false) => (*reason, None),
            (Err(e), false) => (EndReason::Error, Some(e.message.clone())),
        };
        if let Err(e) = turn.finish(reason, error.as_deref()).await {
            tracing::debug!("could not end the turn: {e}");
        }
        self.adapter = Some(adapter);
        if let Some(stop) = deferred_stop {
            self.handle_idle(stop).await;
        }
    }

    /// Handles one request while a turn runs. Returns the request back when it is a
    /// `stop`, which is answered after the turn has wound down.
    async fn during_turn(&self, request: Request, control: &TurnControl) -> Option<Request> {
        if let Some(outcome) = self.class_level(&request).await {
            self.respond(&request, outcome).await;
            return None;
        }
        let outcome = match request.method.as_str() {
            proto::Stop::METHOD => return Some(request),
            proto::Interrupt::METHOD if A::CAPS.interrupt => {
                control.interrupt.cancel();
                encode(Ok(proto::Empty {}))
            }
            proto::PermissionResponse::METHOD if A::CAPS.permissions => {
                match params::<proto::PermissionResponse>(&request) {
                    Ok(p) => {
                        let waiter = control
                            .permissions
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .remove(&p.request_id);
                        match waiter {
                            Some(tx) => {
                                let _ = tx.send(p.option_id);
                                encode(Ok(proto::Empty {}))
                            }
                            None => Err(RpcError::new(
                                codes::NOT_FOUND,
                                format!("no permission request `{}` is waiting", p.request_id),
                            )),
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            proto::Send::METHOD if A::CAPS.input_during_turn => match params::<proto::Send>(&request) {
                Ok(message) => match control.input.try_send(message) {
                    Ok(()) => encode(Ok(proto::Empty {})),
                    Err(_) => Err(RpcError::new(codes::BUSY, "too many messages queued for this turn")),
                },
                Err(e) => Err(e),
            },
            proto::Send::METHOD => {
                Err(RpcError::new(codes::BUSY, "a turn is running and this adapter does not take input during a turn"))
            }
            proto::Start::METHOD | proto::GetUsage::METHOD | proto::Release::METHOD => {
                Err(RpcError::new(codes::BUSY, format!("{} is not available while a turn runs", request.method)))
            }
            _ => Err(RpcError::method_not_found(&request.method)),
        };
        self.respond(&request, outcome).await;
        None
    }
}

fn no_session() -> RpcError {
    RpcError::new(codes::NOT_FOUND, "no session: call start first")
}

/// Keeps only the init params the adapter accepts (the bridge filters too; this makes
/// the declaration hold even against a bridge that does not).
fn accepted_only(mut p: StartParams, accepted: &[InitParam]) -> StartParams {
    let takes = |param| accepted.contains(&param);
    if !takes(InitParam::Cwd) {
        p.cwd = None;
    }
    if !takes(InitParam::Model) {
        p.model = None;
    }
    if !takes(InitParam::Binary) {
        p.binary = None;
    }
    if !takes(InitParam::ResumeSessionId) {
        p.resume_session_id = None;
    }
    if !takes(InitParam::Effort) {
        p.effort = None;
    }
    if !takes(InitParam::PermissionMode) {
        p.permission_mode = None;
    }
    p
}

#[cfg(test)]
mod tests {
    use terminull_protocol::adapter::{InitializeParams, PeerInfo};

    use super::*;
    use crate::prelude::*;

    struct Quiet;

    impl Adapter for Quiet {
        const AGENT_ID: &'static str = "quiet";
        const DISPLAY_NAME: &'static str = "Quiet";
        const CLI_BINARY: Option<&'static str> = None;
        const LEASE: LeaseKind = LeaseKind::PerTurn;
        const INIT_PARAMS: &'static [InitParam] = &[];
        const CAPS: Caps = caps! {
            supported: [thinking, interrupt],
            unsupported: [images, documents, permissions, subagents, input_during_turn, terminal],
        };
        type Models = NotProvided;
        type Usage = NotProvided;
        async fn start(_: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
            // The effective declaration is visible to the adapter.
            let version = Some(format!("{:?}", session.declaration().lease));
            Ok((Quiet, StartInfo { version, ..StartInfo::default() }))
        }
        async fn send(&mut self, _: UserMessage, _: &mut Turn) -> Result<EndReason, AdapterError> {
            Ok(EndReason::Completed)
        }
    }

    #[tokio::test]
    async fn an_override_replaces_the_identity_and_nothing_else() {
        let overrides = DeclarationOverride {
            agent_id: Some("goose".into()),
            display_name: Some("Goose".into()),
            cli_binary: Some("goose".into()),
            lease: Some(LeaseKind::Persistent),
        };
        let want = overrides.apply::<Quiet>();
        assert_eq!((want.agent_id.as_str(), want.display_name.as_str()), ("goose", "Goose"));
        assert_eq!((want.cli_binary.as_deref(), want.lease), (Some("goose"), LeaseKind::Persistent));
        assert_eq!(want.capabilities, declaration::<Quiet>().capabilities);
        assert_eq!(DeclarationOverride::default().apply::<Quiet>(), declaration::<Quiet>());

        let ((bridge, _incoming, _tasks), (ar, aw)) = {
            let (a, b) = tokio::io::duplex(1 << 16);
            let (br, bw) = tokio::io::split(a);
            (terminull_rpc::spawn(br, bw, PeerConfig::named("bridge")), tokio::io::split(b))
        };
        let _server = tokio::spawn(serve_io_with::<Quiet, _, _>(ar, aw, overrides));
        let timeout = Some(std::time::Duration::from_secs(10));
        let init = InitializeParams::from_bridge(PeerInfo { name: "test".into(), version: "0".into() }, vec![]);
        assert_eq!(bridge.request::<proto::Initialize>(&init, timeout).await.unwrap(), want);
        let start = StartParams {
            session_id: "s".into(),
            cwd: None,
            model: None,
            binary: None,
            resume_session_id: None,
            effort: None,
            permission_mode: None,
        };
        let info = bridge.request::<proto::Start>(&start, timeout).await.unwrap().agent_info;
        assert_eq!((info.agent_id.as_str(), info.name.as_str()), ("goose", "Goose"));
        assert_eq!(info.version.as_deref(), Some("Persistent"));
    }
}
