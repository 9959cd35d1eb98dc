//! The LAN server: the bridge's own WebSocket endpoint on the local network, for a
//! device that needs no relay. It speaks the relay path's device protocol exactly
//! (docs/relay.md): `challenge` → `auth` → `relay_status` → `link_hello` →
//! `link_accept` → sealed `control`s, `reply`s and `block`s, and the same pairing
//! endpoint (`POST /v1/bridges/{bridge_id}/pair`). Devices are checked against the
//! bridge's own registry and every control message goes through [`crate::link`], so
//! the one dispatcher sees the same messages as from the relay or the local socket.
//!
//! Off unless enabled (`terminull up --lan`, or `[lan]` in config.toml).
//!
//! Bounds (docs/relay.md, "LAN server limits"): unauthenticated sockets have their
//! own budget per IP and in all ([`limits`]) and a handshake deadline; paired devices
//! have theirs; pairing requests are limited per IP; each device connection writes
//! through a queue bounded in bytes and frames with a write deadline ([`outbox`]).

mod accept;
mod limits;
mod outbox;
mod rtc;

pub use rtc::{LanSlot, RtcAnswerError, answer_offer};

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::Message;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::{SinkExt, StreamExt};
use terminull_protocol::crypto::envelope::relay_auth_bytes;
use terminull_protocol::crypto::pairing::PairRequest;
use terminull_protocol::crypto::{b64url, from_b64};
use terminull_protocol::ids::DeviceId;
use terminull_protocol::relay::{
    Challenge, PROTOCOL_VERSION, RelayError, RelayErrorCode, RelayFrame, RelayStatus, version_mismatch,
};
use tokio::sync::mpsc;

use crate::devices::handle_pair_request;
use crate::home::Home;
use crate::link::{self, LinkContext, LinkEnd};

/// The LAN server's bounds and address.
#[derive(Debug, Clone)]
pub struct LanConfig {
    /// Where to listen (`0.0.0.0:8478` by default on the command line; tests use `127.0.0.1:0`).
    pub listen: SocketAddr,
    /// The largest WebSocket message accepted.
    pub max_message_bytes: usize,
    /// TCP connections at once from one IP address, whatever they carry (the web
    /// app's requests, pairing, WebSockets); more are closed at once.
    pub max_tcp_per_ip: usize,
    /// TCP connections at once in all.
    pub max_tcp: usize,
    /// Authenticated (paired) device connections at once.
    pub max_connections: usize,
    /// WebSockets not yet authenticated at once, from everyone.
    pub max_unauthenticated: usize,
    /// WebSockets not yet authenticated at once, from one IP address.
    pub max_unauthenticated_per_ip: usize,
    /// Connections at once per device.
    pub max_connections_per_device: usize,
    /// Time allowed for the whole handshake (the challenge written, `auth` read), and
    /// for an HTTP request's headers and a pairing request's body.
    pub auth_timeout: Duration,
    /// Bytes queued toward one device connection at most; the link waits for room.
    pub max_queued_bytes: usize,
    /// Frames queued toward one device connection at most.
    pub max_queued_frames: usize,
    /// A write (or flush) to a device that makes no progress for this long ends the
    /// connection (a slow consumer; the device resumes from its last seq).
    pub write_timeout: Duration,
    /// A connection with no frame (or pong) for this long is closed.
    pub idle_timeout: Duration,
    /// How often the server pings.
    pub ping_interval: Duration,
    /// Malformed frames tolerated before the connection is closed.
    pub max_malformed_frames: u32,
    /// Pairing requests accepted per minute (all clients together).
    pub pair_requests_per_minute: u32,
    /// Pairing requests accepted per minute from one IP address.
    pub pair_requests_per_minute_per_ip: u32,
    /// The relay this bridge is registered with (its WebSocket URL), if any: the web
    /// app this server serves may fall back to it when the LAN server cannot be
    /// reached, so its origin joins the page's `connect-src`.
    pub relay: Option<String>,
}

impl LanConfig {
    /// The defaults, listening on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            max_message_bytes: 1 << 20,
            max_tcp_per_ip: 32,
            max_tcp: 1024,
            max_connections: 256,
            max_unauthenticated: 64,
            max_unauthenticated_per_ip: 8,
            max_connections_per_device: 8,
            auth_timeout: Duration::from_secs(10),
            max_queued_bytes: 8 << 20,
            max_queued_frames: 1024,
            write_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            ping_interval: Duration::from_secs(20),
            max_malformed_frames: 32,
            pair_requests_per_minute: 60,
            pair_requests_per_minute_per_ip: 10,
            relay: None,
        }
    }
}

#[derive(Clone)]
struct Lan {
    ctx: LinkContext,
    home: Home,
    config: Arc<LanConfig>,
    connections: Arc<Mutex<HashMap<DeviceId, usize>>>,
    /// Upgraded sockets before `auth`, per IP.
    unauthenticated: Arc<limits::Counter>,
    /// Authenticated device connections (one address: every device behind a NAT).
    authenticated: Arc<limits::Counter>,
    pairings: Arc<limits::PairLimiter>,
    /// Becomes true when the server stops; every connection ends on it.
    stopping: tokio::sync::watch::Receiver<bool>,
}

/// What a device connection runs over: a WebSocket of the LAN server, or a WebRTC
/// data channel ([`rtc`]) that carries the same messages.
pub(crate) trait DeviceSocket:
    futures::Stream<Item = Result<Message, axum::Error>>
    + futures::Sink<Message, Error = axum::Error>
    + Unpin
    + Send
    + 'static
{
}

impl<T> DeviceSocket for T where
    T: futures::Stream<Item = Result<Message, axum::Error>>
        + futures::Sink<Message, Error = axum::Error>
        + Unpin
        + Send
        + 'static
{
}

impl std::fmt::Debug for Lan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lan").field("listen", &self.config.listen).finish_non_exhaustive()
    }
}

/// A running LAN server.
#[derive(Debug)]
pub struct RunningLan {
    addr: SocketAddr,
    /// Held while it runs: the links' [`LanSlot`] points at it (weakly), so a device
    /// can offer a data channel.
    _shared: Arc<Lan>,
    authenticated: Arc<limits::Counter>,
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl RunningLan {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://addr` (the base URL devices connect to).
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// `http://addr`.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Authenticated device connections open now.
    pub fn device_connections(&self) -> usize {
        self.authenticated.total()
    }

    /// Stops accepting and drops every connection (devices see their socket close).
    pub fn stop(self) {
        self.stop.send_replace(true);
        self.task.abort();
    }
}

/// The URL devices on the network reach a server bound to `addr` at: that address
/// when it is a specific one, else this machine's address on the interface its
/// default route uses (found by connecting a UDP socket, which sends nothing), else
/// `None`.
pub fn device_url(addr: SocketAddr) -> Option<String> {
    let ip = if addr.ip().is_unspecified() {
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        // TEST-NET-1 (RFC 5737): never routed; `connect` only picks the source address.
        probe.connect("192.0.2.1:9").ok()?;
        probe.local_addr().ok()?.ip()
    } else {
        addr.ip()
    };
    Some(format!("ws://{}", SocketAddr::new(ip, addr.port())))
}

/// Binds and serves until [`RunningLan::stop`].
pub async fn start(ctx: LinkContext, home: Home, config: LanConfig) -> std::io::Result<RunningLan> {
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let config = Arc::new(config);
    let lan = Lan {
        ctx,
        home,
        config: config.clone(),
        connections: Arc::default(),
        unauthenticated: Arc::default(),
        authenticated: Arc::default(),
        pairings: Arc::default(),
        stopping,
    };
    let authenticated = lan.authenticated.clone();
    let shared = Arc::new(lan.clone());
    let slot = LanSlot::default();
    slot.set(&shared, addr);
    lan.ctx.rtc.set(Arc::new(slot));
    let app_signature = terminull_web::sign_shell(&lan.ctx.identity);
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/client", get(device_socket))
        .route("/v1/bridges/{bridge_id}/pair", post(pair))
        // The phone web app: the pairing link opens it on this server.
        .merge(terminull_web::routes("lan", config.relay.as_deref()))
        // Its signature over that app's code, for the app's service worker.
        .merge(terminull_web::signature_route(app_signature))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint on this bridge") })
        .layer(DefaultBodyLimit::max(16 * 1024))
        .with_state(lan);
    tracing::info!("LAN server listening on ws://{addr}");
    let task = tokio::spawn(accept::accept_loop(listener, router, config, stop.subscribe()));
    Ok(RunningLan { addr, _shared: shared, authenticated, task, stop })
}

/// The largest pairing request body read.
const PAIR_BODY_LIMIT: usize = 16 * 1024;

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

async fn pair(
    State(lan): State<Lan>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(bridge_id): Path<String>,
    body: axum::body::Body,
) -> Response {
    if bridge_id != lan.ctx.identity.public().bridge_id().as_str() {
        return error(StatusCode::NOT_FOUND, format!("this is not bridge `{bridge_id}`"));
    }
    let config = &lan.config;
    match lan.pairings.allow(peer.ip(), config.pair_requests_per_minute_per_ip, config.pair_requests_per_minute) {
        Ok(()) => {}
        Err(limits::Full::ThisAddress) => {
            return error(StatusCode::TOO_MANY_REQUESTS, "too many pairing requests from this address; wait a minute");
        }
        Err(limits::Full::Everyone) => {
            return error(StatusCode::TOO_MANY_REQUESTS, "too many pairing requests; wait a minute");
        }
    }
    // A body trickled in, or announced and never sent, is cut at the deadline.
    let body = match tokio::time::timeout(config.auth_timeout, axum::body::to_bytes(body, PAIR_BODY_LIMIT)).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => return error(StatusCode::BAD_REQUEST, format!("the pairing request's body: {e}")),
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the pairing request's body did not arrive within {:?}", config.auth_timeout),
            );
        }
    };
    let request: PairRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the body is not a pairing request: {e}")),
    };
    let identity = lan.ctx.identity.clone();
    match handle_pair_request(&lan.home, &identity, &lan.ctx.devices, &request) {
        Ok(response) => Json(response).into_response(),
        Err(e) => {
            lan.ctx.refusals.record(format!("refused a pairing request on the LAN: {e}"));
            error(StatusCode::FORBIDDEN, e.to_string())
        }
    }
}

async fn device_socket(
    State(lan): State<Lan>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let config = &lan.config;
    let pending =
        match lan.unauthenticated.admit(peer.ip(), config.max_unauthenticated_per_ip, config.max_unauthenticated) {
            Ok(admitted) => admitted,
            Err(limits::Full::ThisAddress) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many unauthenticated connections from this address",
                );
            }
            Err(limits::Full::Everyone) => {
                return error(StatusCode::SERVICE_UNAVAILABLE, "too many unauthenticated connections");
            }
        };
    let max = config.max_message_bytes;
    upgrade.max_message_size(max).max_frame_size(max).on_upgrade(move |socket| async move {
        let mut stopping = lan.stopping.clone();
        tokio::select! {
            () = serve_device(lan.clone(), socket, peer.ip(), pending, None) => {}
            _ = stopping.wait_for(|stop| *stop) => {}
        }
    })
}

fn frame_message(frame: &RelayFrame) -> Message {
    Message::Text(serde_json::to_string(frame).unwrap_or_default().into())
}

fn refusal(code: RelayErrorCode, message: impl Into<String>) -> RelayFrame {
    RelayFrame::Error(RelayError { code, message: message.into(), session_id: None })
}

/// Sends `frame` within the handshake deadline (a peer that does not read gets no more).
async fn send_within<S: DeviceSocket>(lan: &Lan, socket: &mut S, frame: &RelayFrame) -> bool {
    matches!(tokio::time::timeout(lan.config.auth_timeout, socket.send(frame_message(frame))).await, Ok(Ok(())))
}

/// One device connection: authenticate (within the handshake deadline, on the
/// unauthenticated budget `pending`), then run its link on the authenticated budget.
/// `only`: the one device this connection may authenticate as (a data channel, which
/// the device offered through its own link).
async fn serve_device<S: DeviceSocket>(
    lan: Lan,
    mut socket: S,
    ip: IpAddr,
    pending: limits::Admitted,
    only: Option<DeviceId>,
) {
    let bridge_id = lan.ctx.identity.public().bridge_id();
    let challenge = terminull_protocol::crypto::random_bytes::<32>();
    let challenge_frame = RelayFrame::Challenge(Challenge { nonce: b64url(&challenge) });
    let handshake = async {
        if socket.send(frame_message(&challenge_frame)).await.is_err() {
            return None;
        }
        match socket.next().await {
            Some(Ok(Message::Text(t))) => Some(serde_json::from_str::<RelayFrame>(&t).ok()),
            _ => Some(None),
        }
    };
    let auth = match tokio::time::timeout(lan.config.auth_timeout, handshake).await {
        Ok(Some(auth)) => auth,
        // Gone, or too slow: nothing more to say.
        Ok(None) | Err(_) => return,
    };
    let Some(RelayFrame::Auth(auth)) = auth else {
        send_within(&lan, &mut socket, &refusal(RelayErrorCode::BadFrame, "expected `auth` answering the challenge"))
            .await;
        return;
    };
    if auth.protocol_version != PROTOCOL_VERSION {
        let message =
            version_mismatch("this device", auth.protocol_version, "this bridge's LAN server", PROTOCOL_VERSION);
        lan.ctx.refusals.record(format!("refused a LAN connection of device {}: {message}", auth.device_id));
        send_within(&lan, &mut socket, &refusal(RelayErrorCode::UnsupportedVersion, message)).await;
        let _ = tokio::time::timeout(lan.config.auth_timeout, socket.close()).await;
        return;
    }
    let device_id = auth.device_id.clone();
    let verified = lan.ctx.devices.active(&device_id).ok_or(RelayErrorCode::UnknownDevice).and_then(|device| {
        let sig = from_b64("sig", &auth.sig).map_err(|_| RelayErrorCode::BadSignature)?;
        let bytes = relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), &challenge);
        device.verify(&bytes, &sig, "auth").map_err(|_| RelayErrorCode::BadSignature)
    });
    let verified = match only {
        Some(only) if only != device_id => Err(RelayErrorCode::UnknownDevice),
        _ => verified,
    };
    if auth.bridge_id != bridge_id || verified.is_err() {
        let code = verified.err().unwrap_or(RelayErrorCode::UnknownDevice);
        lan.ctx.refusals.record(format!("refused a LAN connection of device {device_id}: {code:?}"));
        send_within(&lan, &mut socket, &refusal(code, "not a paired device of this bridge, or a bad signature")).await;
        return;
    }
    // Authenticated: off the unauthenticated budget, onto the paired devices' own.
    drop(pending);
    let Ok(_admitted) = lan.authenticated.admit(ip, usize::MAX, lan.config.max_connections) else {
        let too_many = refusal(RelayErrorCode::TooManyConnections, "too many device connections to this bridge");
        send_within(&lan, &mut socket, &too_many).await;
        return;
    };
    let admitted = {
        let mut per = lan.connections.lock().unwrap_or_else(|p| p.into_inner());
        let n = per.entry(device_id.clone()).or_default();
        let admitted = *n < lan.config.max_connections_per_device;
        if admitted {
            *n += 1;
        }
        admitted
    };
    if !admitted {
        let too_many = refusal(RelayErrorCode::TooManyConnections, "too many connections for this device");
        send_within(&lan, &mut socket, &too_many).await;
        return;
    }
    let status = RelayStatus {
        protocol_version: PROTOCOL_VERSION,
        bridge_online: true,
        agents: lan.ctx.service.agent_summaries().await,
        resume_tokens: Default::default(),
    };
    if send_within(&lan, &mut socket, &RelayFrame::RelayStatus(status)).await {
        run_device(&lan, socket, &device_id).await;
    }
    let mut per = lan.connections.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = per.get_mut(&device_id) {
        *n -= 1;
        if *n == 0 {
            per.remove(&device_id);
        }
    }
}

/// Frames handed from the link to the connection's queue at most; the queue itself
/// is bounded in bytes ([`LanConfig::max_queued_bytes`]).
const LINK_HANDOFF: usize = 16;

async fn run_device<S: DeviceSocket>(lan: &Lan, socket: S, device_id: &DeviceId) {
    let (sink, mut stream) = socket.split();
    let config = &lan.config;
    let (outbox, mut writer) =
        outbox::Outbox::start(sink, config.max_queued_bytes, config.max_queued_frames, config.write_timeout);
    // The link's frames wait for room in the queue in their own task, so the read
    // loop below (pings, the idle check, refusals) never waits on a slow device.
    let (out_tx, mut out_rx) = mpsc::channel::<RelayFrame>(LINK_HANDOFF);
    let forward = {
        let outbox = outbox.clone();
        tokio::spawn(async move {
            while let Some(frame) = out_rx.recv().await {
                if !outbox.push(frame_message(&frame)).await {
                    return;
                }
            }
        })
    };
    let send = |frame: &RelayFrame| outbox.try_push(frame_message(frame));
    let mut controls: Option<mpsc::Sender<terminull_protocol::relay::ControlEnvelope>> = None;
    let mut malformed = 0u32;
    let mut ping = tokio::time::interval(config.ping_interval);
    let mut last_heard = Instant::now();
    let (end_tx, mut end_rx) = mpsc::channel::<LinkEnd>(1);
    let writer_end = loop {
        tokio::select! {
            message = stream.next() => {
                let text = match message {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Pong(_) | Message::Ping(_))) => {
                        last_heard = Instant::now();
                        continue;
                    }
                    Some(Ok(Message::Binary(_))) => {
                        malformed += 1;
                        send(&refusal(RelayErrorCode::BadFrame, "binary messages are not frames"));
                        if malformed > config.max_malformed_frames { break None; }
                        continue;
                    }
                    _ => break None,
                };
                last_heard = Instant::now();
                match serde_json::from_str::<RelayFrame>(&text) {
                    Ok(RelayFrame::LinkHello(hello)) if &hello.device_id == device_id => match link::accept(&lan.ctx, &hello) {
                        Ok((accept, open)) => {
                            if !send(&RelayFrame::LinkAccept(accept)) { break None; }
                            let (tx, rx) = mpsc::channel(256);
                            controls = Some(tx);
                            let out = out_tx.clone();
                            let end = end_tx.clone();
                            tokio::spawn(async move {
                                let _ = end.send(open.run(rx, out).await).await;
                            });
                        }
                        Err(reason) => {
                            send(&refusal(RelayErrorCode::UnknownDevice, reason.to_string()));
                            break None;
                        }
                    },
                    Ok(RelayFrame::Control(control)) => match &controls {
                        Some(tx) if tx.try_send(control).is_ok() => {}
                        Some(_) => {
                            send(&refusal(RelayErrorCode::RateLimited, "too many control messages waiting"));
                            break None;
                        }
                        None => {
                            send(&refusal(RelayErrorCode::BadFrame, "send link_hello first"));
                        }
                    },
                    Ok(other) => {
                        malformed += 1;
                        let message = format!("`{}` is not sent to a bridge by a device", other.frame_type());
                        send(&refusal(RelayErrorCode::BadFrame, message));
                    }
                    Err(e) => {
                        malformed += 1;
                        send(&refusal(RelayErrorCode::BadFrame, format!("not a frame: {e}")));
                    }
                }
                if malformed > config.max_malformed_frames {
                    break None;
                }
            }
            end = &mut writer => break Some(end.unwrap_or(outbox::WriterEnd::Closed)),
            Some(end) = end_rx.recv() => {
                if let LinkEnd::Revoked(reason) = end {
                    send(&refusal(RelayErrorCode::UnknownDevice, reason));
                    break None;
                }
            }
            _ = ping.tick() => {
                if last_heard.elapsed() > config.idle_timeout {
                    break None;
                }
                // A full queue needs no ping: the write deadline watches it.
                outbox.try_push(Message::Ping(Vec::new().into()));
            }
        }
    };
    forward.abort();
    drop(controls);
    if writer_end == Some(outbox::WriterEnd::Stalled) {
        tracing::warn!(
            "cut LAN device {device_id}: a write made no progress for {:?} (a slow consumer; it can resume)",
            config.write_timeout
        );
        lan.ctx.refusals.record(format!("cut LAN device {device_id}: it stopped reading"));
        return;
    }
    if writer_end.is_some() {
        return;
    }
    // The last frames queued (a refusal) go out within the write deadline, then the
    // socket closes.
    drop(outbox);
    if tokio::time::timeout(config.write_timeout, &mut writer).await.is_err() {
        writer.abort();
    }
}
