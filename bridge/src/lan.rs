//! The LAN server: the bridge's own WebSocket endpoint on the local network, for a
//! device that needs no relay. It speaks the relay path's device protocol exactly
//! (docs/relay.md): `challenge` → `auth` → `relay_status` → `link_hello` →
//! `link_accept` → sealed `control`s, `reply`s and `block`s, and the same pairing
//! endpoint (`POST /v1/bridges/{bridge_id}/pair`). Devices are checked against the
//! bridge's own registry and every control message goes through [`crate::link`], so
//! the one dispatcher sees the same messages as from the relay or the local socket.
//!
//! Off unless enabled (`terminull up --lan`, or `[lan]` in config.toml).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket};
use axum::extract::{DefaultBodyLimit, Path, State, WebSocketUpgrade};
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
    /// Device connections at once.
    pub max_connections: usize,
    /// Connections at once per device.
    pub max_connections_per_device: usize,
    /// Time allowed to answer the challenge.
    pub auth_timeout: Duration,
    /// A connection with no frame (or pong) for this long is closed.
    pub idle_timeout: Duration,
    /// How often the server pings.
    pub ping_interval: Duration,
    /// Malformed frames tolerated before the connection is closed.
    pub max_malformed_frames: u32,
    /// Pairing requests accepted per minute (all clients together).
    pub pair_requests_per_minute: u32,
}

impl LanConfig {
    /// The defaults, listening on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            max_message_bytes: 1 << 20,
            max_connections: 256,
            max_connections_per_device: 8,
            auth_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            ping_interval: Duration::from_secs(20),
            max_malformed_frames: 32,
            pair_requests_per_minute: 10,
        }
    }
}

#[derive(Clone)]
struct Lan {
    ctx: LinkContext,
    home: Home,
    config: Arc<LanConfig>,
    connections: Arc<Mutex<HashMap<DeviceId, usize>>>,
    total: Arc<std::sync::atomic::AtomicUsize>,
    pairings: Arc<Mutex<std::collections::VecDeque<Instant>>>,
    /// Becomes true when the server stops; every connection ends on it.
    stopping: tokio::sync::watch::Receiver<bool>,
}

/// A running LAN server.
#[derive(Debug)]
pub struct RunningLan {
    addr: SocketAddr,
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
    let lan = Lan {
        ctx,
        home,
        config: Arc::new(config),
        connections: Arc::default(),
        total: Arc::default(),
        pairings: Arc::default(),
        stopping,
    };
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/client", get(device_socket))
        .route("/v1/bridges/{bridge_id}/pair", post(pair))
        // The phone web app: the pairing link opens it on this server.
        .merge(terminull_web::routes("lan"))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint on this bridge") })
        .layer(DefaultBodyLimit::max(16 * 1024))
        .with_state(lan);
    tracing::info!("LAN server listening on ws://{addr}");
    // Without TCP_NODELAY a small frame (a reply, one block) waits for the peer's
    // delayed ACK: the end-to-end benchmark measured 24 ms p50 per block on loopback.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!("the LAN server stopped: {e}");
        }
    });
    Ok(RunningLan { addr, task, stop })
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

async fn pair(State(lan): State<Lan>, Path(bridge_id): Path<String>, body: axum::body::Bytes) -> Response {
    if bridge_id != lan.ctx.identity.public().bridge_id().as_str() {
        return error(StatusCode::NOT_FOUND, format!("this is not bridge `{bridge_id}`"));
    }
    {
        let mut recent = lan.pairings.lock().unwrap_or_else(|p| p.into_inner());
        while recent.front().is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
            recent.pop_front();
        }
        if recent.len() >= lan.config.pair_requests_per_minute as usize {
            return error(StatusCode::TOO_MANY_REQUESTS, "too many pairing requests; wait a minute");
        }
        recent.push_back(Instant::now());
    }
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

async fn device_socket(State(lan): State<Lan>, upgrade: WebSocketUpgrade) -> Response {
    use std::sync::atomic::Ordering;
    if lan.total.fetch_add(1, Ordering::SeqCst) >= lan.config.max_connections {
        lan.total.fetch_sub(1, Ordering::SeqCst);
        return error(StatusCode::SERVICE_UNAVAILABLE, "too many connections");
    }
    let max = lan.config.max_message_bytes;
    upgrade.max_message_size(max).max_frame_size(max).on_upgrade(move |socket| async move {
        let mut stopping = lan.stopping.clone();
        tokio::select! {
            () = serve_device(lan.clone(), socket) => {}
            _ = stopping.wait_for(|stop| *stop) => {}
        }
        lan.total.fetch_sub(1, Ordering::SeqCst);
    })
}

fn frame_message(frame: &RelayFrame) -> Message {
    Message::Text(serde_json::to_string(frame).unwrap_or_default().into())
}

fn refusal(code: RelayErrorCode, message: impl Into<String>) -> RelayFrame {
    RelayFrame::Error(RelayError { code, message: message.into(), session_id: None })
}

/// One device connection: authenticate, then run its link.
async fn serve_device(lan: Lan, mut socket: WebSocket) {
    let bridge_id = lan.ctx.identity.public().bridge_id();
    let challenge = terminull_protocol::crypto::random_bytes::<32>();
    if socket.send(frame_message(&RelayFrame::Challenge(Challenge { nonce: b64url(&challenge) }))).await.is_err() {
        return;
    }
    let auth = match tokio::time::timeout(lan.config.auth_timeout, socket.next()).await {
        Ok(Some(Ok(Message::Text(t)))) => serde_json::from_str::<RelayFrame>(&t).ok(),
        _ => None,
    };
    let Some(RelayFrame::Auth(auth)) = auth else {
        let _ = socket
            .send(frame_message(&refusal(RelayErrorCode::BadFrame, "expected `auth` answering the challenge")))
            .await;
        return;
    };
    if auth.protocol_version != PROTOCOL_VERSION {
        let message =
            version_mismatch("this device", auth.protocol_version, "this bridge's LAN server", PROTOCOL_VERSION);
        lan.ctx.refusals.record(format!("refused a LAN connection of device {}: {message}", auth.device_id));
        let _ = socket.send(frame_message(&refusal(RelayErrorCode::UnsupportedVersion, message))).await;
        let _ = socket.close().await;
        return;
    }
    let device_id = auth.device_id.clone();
    let verified = lan.ctx.devices.active(&device_id).ok_or(RelayErrorCode::UnknownDevice).and_then(|device| {
        let sig = from_b64("sig", &auth.sig).map_err(|_| RelayErrorCode::BadSignature)?;
        let bytes = relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), &challenge);
        device.verify(&bytes, &sig, "auth").map_err(|_| RelayErrorCode::BadSignature)
    });
    if auth.bridge_id != bridge_id || verified.is_err() {
        let code = verified.err().unwrap_or(RelayErrorCode::UnknownDevice);
        lan.ctx.refusals.record(format!("refused a LAN connection of device {device_id}: {code:?}"));
        let _ =
            socket.send(frame_message(&refusal(code, "not a paired device of this bridge, or a bad signature"))).await;
        return;
    }
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
        let _ = socket.send(frame_message(&too_many)).await;
        return;
    }
    let status = RelayStatus {
        protocol_version: PROTOCOL_VERSION,
        bridge_online: true,
        agents: lan.ctx.service.agent_summaries().await,
        resume_tokens: Default::default(),
    };
    if socket.send(frame_message(&RelayFrame::RelayStatus(status))).await.is_ok() {
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

async fn run_device(lan: &Lan, socket: WebSocket, device_id: &DeviceId) {
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<RelayFrame>(1024);
    let mut controls: Option<mpsc::Sender<terminull_protocol::relay::ControlEnvelope>> = None;
    let mut malformed = 0u32;
    let mut ping = tokio::time::interval(lan.config.ping_interval);
    let mut last_heard = Instant::now();
    let (end_tx, mut end_rx) = mpsc::channel::<LinkEnd>(1);
    loop {
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
                        let _ = sink.send(frame_message(&refusal(RelayErrorCode::BadFrame, "binary messages are not frames"))).await;
                        if malformed > lan.config.max_malformed_frames { return; }
                        continue;
                    }
                    _ => return,
                };
                last_heard = Instant::now();
                match serde_json::from_str::<RelayFrame>(&text) {
                    Ok(RelayFrame::LinkHello(hello)) if &hello.device_id == device_id => match link::accept(&lan.ctx, &hello) {
                        Ok((accept, open)) => {
                            if sink.send(frame_message(&RelayFrame::LinkAccept(accept))).await.is_err() { return; }
                            let (tx, rx) = mpsc::channel(256);
                            controls = Some(tx);
                            let out = out_tx.clone();
                            let end = end_tx.clone();
                            tokio::spawn(async move {
                                let _ = end.send(open.run(rx, out).await).await;
                            });
                        }
                        Err(reason) => {
                            let _ = sink.send(frame_message(&refusal(RelayErrorCode::UnknownDevice, reason.to_string()))).await;
                            return;
                        }
                    },
                    Ok(RelayFrame::Control(control)) => match &controls {
                        Some(tx) if tx.try_send(control).is_ok() => {}
                        Some(_) => {
                            let _ = sink.send(frame_message(&refusal(RelayErrorCode::RateLimited, "too many control messages waiting"))).await;
                            return;
                        }
                        None => {
                            let _ = sink.send(frame_message(&refusal(RelayErrorCode::BadFrame, "send link_hello first"))).await;
                        }
                    },
                    Ok(other) => {
                        malformed += 1;
                        let message = format!("`{}` is not sent to a bridge by a device", other.frame_type());
                        let _ = sink.send(frame_message(&refusal(RelayErrorCode::BadFrame, message))).await;
                    }
                    Err(e) => {
                        malformed += 1;
                        let _ = sink.send(frame_message(&refusal(RelayErrorCode::BadFrame, format!("not a frame: {e}")))).await;
                    }
                }
                if malformed > lan.config.max_malformed_frames {
                    return;
                }
            }
            Some(frame) = out_rx.recv() => {
                // Frames already queued go out in one write: a flush per frame cost a
                // syscall each while the link streams.
                if sink.feed(frame_message(&frame)).await.is_err() { return; }
                for _ in 0..63 {
                    let Ok(frame) = out_rx.try_recv() else { break };
                    if sink.feed(frame_message(&frame)).await.is_err() { return; }
                }
                if sink.flush().await.is_err() { return; }
            }
            Some(end) = end_rx.recv() => {
                if let LinkEnd::Revoked(reason) = end {
                    let _ = sink.send(frame_message(&refusal(RelayErrorCode::UnknownDevice, reason))).await;
                    return;
                }
            }
            _ = ping.tick() => {
                if last_heard.elapsed() > lan.config.idle_timeout {
                    return;
                }
                if sink.send(Message::Ping(Vec::new().into())).await.is_err() { return; }
            }
        }
    }
}
