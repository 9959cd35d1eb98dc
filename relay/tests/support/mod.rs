//! A relay on loopback, a fake bridge and fake devices built from the protocol crypto,
//! a bare HTTP/1.1 client, and a local Web Push receiver.

#![allow(dead_code)] // each test binary uses a different part

pub mod servers;
pub mod user_agent;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use terminull_protocol::crypto::channel::Sealer;
use terminull_protocol::crypto::envelope::{relay_auth_bytes, seal_block, seal_control, sign_batch};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::{b64, b64url, from_b64url, random_bytes};
use terminull_protocol::relay::{
    AgentSummary, Auth, BlockEnvelope, ControlEnvelope, DeviceRecord, Devices, LinkHello, PROTOCOL_VERSION, Register,
    RelayErrorCode, RelayFrame, RelayStatus,
};
use terminull_protocol::{AgentId, BridgeId, SessionId};
use terminull_relay::{Relay, RelayConfig, RunningRelay};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a test waits for something that should happen.
pub const WAIT: Duration = Duration::from_secs(5);

/// A WebSocket client connection.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The test defaults: loopback, short timeouts, plain-http push endpoints allowed and the
/// loopback push receivers admitted (`--push-allow-host 127.0.0.1`).
pub fn config(dir: &Path) -> RelayConfig {
    let mut c = RelayConfig::new("127.0.0.1:0".parse().unwrap(), dir);
    c.auth_timeout = Duration::from_secs(2);
    c.close_timeout = Duration::from_secs(2);
    c.allow_insecure_push_endpoints = true;
    c.push_allowed_hosts = vec!["127.0.0.1".parse().unwrap()];
    c.push_retry_base = Duration::from_millis(50);
    c.push_timeout = Duration::from_secs(2);
    c
}

/// A relay with `config`.
pub async fn start(config: RelayConfig) -> RunningRelay {
    Relay::start(config).await.expect("the relay starts")
}

/// Session ids from their names.
pub fn sessions(ids: &[&str]) -> Vec<SessionId> {
    ids.iter().map(|s| SessionId((*s).into())).collect()
}

/// The start of most tests: a relay on loopback with its data in a fresh temporary
/// directory, a bridge registered with it and `N` devices paired with the bridge (not
/// yet connected).
pub struct Paired<const N: usize> {
    /// The relay's data directory: removed when this is dropped, so keep it bound.
    pub dir: tempfile::TempDir,
    /// The relay.
    pub relay: RunningRelay,
    /// The registered bridge.
    pub bridge: FakeBridge,
    /// The paired devices, in the order of their names.
    pub devices: [Identity; N],
}

impl<const N: usize> Paired<N> {
    /// Devices named `names`; the bridge can resume `resumable`; [`config`] as `tune` changes it.
    pub async fn start(names: [&str; N], resumable: &[&str], tune: impl FnOnce(&mut RelayConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        tune(&mut cfg);
        let relay = start(cfg).await;
        let devices: [Identity; N] = std::array::from_fn(|_| Identity::generate());
        let records = names.iter().zip(&devices).map(|(name, device)| device_record(device, name, false)).collect();
        let bridge = FakeBridge::connect(&relay, &Identity::generate(), records, sessions(resumable)).await;
        Self { dir, relay, bridge, devices }
    }
}

/// Opens a WebSocket to `path` of `relay`.
pub async fn open(relay: &RunningRelay, path: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(format!("{}{path}", relay.ws_url())).await.expect("websocket opens");
    ws
}

/// Opens a WebSocket to `path` over a socket whose receive buffer is as small as the
/// kernel allows, so that a peer that stops reading backs the relay up quickly.
pub async fn open_with_small_receive_buffer(relay: &RunningRelay, path: &str) -> Ws {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(relay.addr()).await.unwrap();
    let url = format!("{}{path}", relay.ws_url());
    let (ws, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream)).await.expect("websocket opens");
    ws
}

/// Sends a frame.
pub async fn send(ws: &mut Ws, frame: &RelayFrame) {
    send_text(ws, serde_json::to_string(frame).unwrap()).await;
}

/// Sends a text message.
pub async fn send_text(ws: &mut Ws, text: String) {
    ws.send(Message::text(text)).await.expect("send");
}

/// What arrives on a connection.
#[derive(Debug)]
pub enum Event {
    /// A relay frame.
    Frame(RelayFrame),
    /// The relay closed the connection, with this code and reason when it sent a close frame.
    Closed(Option<(u16, String)>),
}

/// The next frame or close, skipping pings; panics after [`WAIT`].
pub async fn next_event(ws: &mut Ws) -> Event {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let message = tokio::time::timeout_at(deadline, ws.next()).await.expect("something arrives in time");
        if let Some(event) = event_of(message) {
            return event;
        }
    }
}

/// What a message read from the relay means: a frame, the end, or (`None`) nothing to
/// report (a ping, a pong).
pub fn event_of(message: Option<Result<Message, tungstenite::Error>>) -> Option<Event> {
    match message {
        None | Some(Err(_)) => Some(Event::Closed(None)),
        Some(Ok(Message::Text(text))) => {
            Some(Event::Frame(serde_json::from_str(text.as_str()).expect("the relay sends relay frames")))
        }
        Some(Ok(Message::Close(frame))) => {
            Some(Event::Closed(frame.map(|f| (u16::from(f.code), f.reason.as_str().to_owned()))))
        }
        Some(Ok(_)) => None,
    }
}

/// The next frame; panics on close.
pub async fn recv(ws: &mut Ws) -> RelayFrame {
    match next_event(ws).await {
        Event::Frame(frame) => frame,
        Event::Closed(close) => panic!("expected a frame, the connection closed: {close:?}"),
    }
}

/// The next frame, which must be an `error` with `code`; returns its message.
pub async fn expect_error(ws: &mut Ws, code: RelayErrorCode) -> String {
    match recv(ws).await {
        RelayFrame::Error(e) => {
            assert_eq!(e.code, code, "error message: {}", e.message);
            e.message
        }
        other => panic!("expected an error {code:?}, got {other:?}"),
    }
}

/// Reads until the connection closes; returns the error codes seen on the way and the
/// close code.
pub async fn until_closed(ws: &mut Ws) -> (Vec<RelayErrorCode>, Option<u16>) {
    let mut errors = Vec::new();
    loop {
        match next_event(ws).await {
            Event::Frame(RelayFrame::Error(e)) => errors.push(e.code),
            Event::Frame(_) => {}
            Event::Closed(close) => return (errors, close.map(|(code, _)| code)),
        }
    }
}

/// Nothing but pings for `quiet`.
pub async fn expect_silence(ws: &mut Ws, quiet: Duration) {
    let deadline = tokio::time::Instant::now() + quiet;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return,
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Ok(other) => panic!("expected silence, got {other:?}"),
        }
    }
}

/// The challenge nonce, from the first frame.
pub async fn challenge(ws: &mut Ws) -> Vec<u8> {
    match recv(ws).await {
        RelayFrame::Challenge(c) => from_b64url("nonce", &c.nonce).unwrap(),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

/// A device as a bridge lists it.
pub fn device_record(device: &Identity, name: &str, revoked: bool) -> DeviceRecord {
    DeviceRecord { device_id: device.public().device_id(), keys: device.public().to_wire(), name: name.into(), revoked }
}

/// One agent, for `register`.
pub fn agents() -> Vec<AgentSummary> {
    vec![AgentSummary {
        agent_id: AgentId("claude".into()),
        display_name: "Claude Code".into(),
        version: Some("2.1.3".into()),
        provides_models: true,
        installed: true,
        takes_permission_mode: false,
        continues_in_terminal: false,
        install_hint: None,
    }]
}

/// A `register` answering `nonce`.
pub fn register(bridge: &Identity, nonce: &[u8], devices: Vec<DeviceRecord>, resumable: Vec<SessionId>) -> Register {
    let bridge_id = bridge.public().bridge_id();
    let sig = bridge.sign(&relay_auth_bytes("bridge", bridge_id.as_str(), bridge_id.as_str(), nonce));
    Register {
        bridge_id,
        protocol_version: PROTOCOL_VERSION,
        resumable_session_ids: resumable,
        agents: agents(),
        keys: bridge.public().to_wire(),
        devices,
        sig: b64(&sig),
        app: None,
    }
}

/// A bridge connected to the relay.
pub struct FakeBridge {
    pub identity: Identity,
    pub ws: Ws,
    sealer: Sealer,
}

impl FakeBridge {
    /// Connects and registers `identity` with these devices and resumable sessions.
    pub async fn connect(
        relay: &RunningRelay,
        identity: &Identity,
        devices: Vec<DeviceRecord>,
        resumable: Vec<SessionId>,
    ) -> Self {
        let mut ws = open(relay, "/v1/bridge").await;
        let nonce = challenge(&mut ws).await;
        send(&mut ws, &RelayFrame::Register(register(identity, &nonce, devices, resumable))).await;
        match recv(&mut ws).await {
            RelayFrame::Registered(r) => {
                assert_eq!(r.bridge_id, identity.public().bridge_id());
                assert_eq!(r.protocol_version, PROTOCOL_VERSION);
            }
            other => panic!("expected registered, got {other:?}"),
        }
        Self { identity: identity.clone(), ws, sealer: Sealer::new([9; 32], "block") }
    }

    /// The bridge's id.
    pub fn id(&self) -> BridgeId {
        self.identity.public().bridge_id()
    }

    /// A sealed block of `session` with `padding` bytes of content (blocks carry no
    /// signature: the batch that carries them does).
    pub fn block(&mut self, session: &str, padding: usize) -> BlockEnvelope {
        let json = format!(r#"{{"type":"text","text":"{}"}}"#, "x".repeat(padding));
        seal_block(&mut self.sealer, &SessionId(session.into()), "text", false, 1_767_225_611.25, json.as_bytes())
            .unwrap()
    }

    /// A `batch` of `blocks` for `conn`, signed by this bridge.
    pub fn batch(&self, conn: u64, blocks: Vec<BlockEnvelope>) -> RelayFrame {
        RelayFrame::Batch(sign_batch(&self.identity, conn, blocks))
    }

    /// A `batch` of one fresh block of `session` for `conn`.
    pub fn one_block(&mut self, session: &str, conn: u64, padding: usize) -> RelayFrame {
        let block = self.block(session, padding);
        self.batch(conn, vec![block])
    }

    /// Sends a frame.
    pub async fn send(&mut self, frame: &RelayFrame) {
        send(&mut self.ws, frame).await;
    }

    /// The next frame.
    pub async fn recv(&mut self) -> RelayFrame {
        recv(&mut self.ws).await
    }

    /// Replaces the device registry.
    pub async fn set_devices(&mut self, devices: Vec<DeviceRecord>) {
        self.send(&RelayFrame::Devices(Devices { devices })).await;
    }

    /// Waits for a `link_hello` and returns its `conn`, skipping `conn_closed` frames of
    /// connections that went away meanwhile.
    pub async fn expect_link_hello(&mut self) -> u64 {
        loop {
            match self.recv().await {
                RelayFrame::LinkHello(h) => return h.conn.expect("the relay sets conn"),
                RelayFrame::ConnClosed(_) => {}
                other => panic!("expected link_hello, got {other:?}"),
            }
        }
    }
}

/// The `auth` of `device` for `bridge_id` answering `nonce`.
pub fn auth(device: &Identity, bridge_id: &BridgeId, nonce: &[u8]) -> Auth {
    let device_id = device.public().device_id();
    let sig = device.sign(&relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), nonce));
    Auth { bridge_id: bridge_id.clone(), device_id, sig: b64(&sig), protocol_version: PROTOCOL_VERSION }
}

/// Opens `/v1/client`, answers the challenge, returns the connection and the first frame.
pub async fn try_connect_device(relay: &RunningRelay, bridge_id: &BridgeId, device: &Identity) -> (Ws, RelayFrame) {
    authenticate(open(relay, "/v1/client").await, bridge_id, device).await
}

/// Answers the challenge on a fresh `/v1/client` connection; returns it and the first frame.
pub async fn authenticate(mut ws: Ws, bridge_id: &BridgeId, device: &Identity) -> (Ws, RelayFrame) {
    let nonce = challenge(&mut ws).await;
    send(&mut ws, &RelayFrame::Auth(auth(device, bridge_id, &nonce))).await;
    let first = recv(&mut ws).await;
    (ws, first)
}

/// A device connection that authenticated; returns it with its `relay_status`.
pub async fn connect_device(relay: &RunningRelay, bridge_id: &BridgeId, device: &Identity) -> (Ws, RelayStatus) {
    match try_connect_device(relay, bridge_id, device).await {
        (ws, RelayFrame::RelayStatus(status)) => {
            assert_eq!(status.protocol_version, PROTOCOL_VERSION);
            (ws, status)
        }
        (_, other) => panic!("expected relay_status, got {other:?}"),
    }
}

/// A `link_hello` from `device`.
pub fn link_hello(device: &Identity) -> RelayFrame {
    RelayFrame::LinkHello(LinkHello {
        device_id: device.public().device_id(),
        client_nonce: b64url(&random_bytes::<16>()),
        client_ephemeral: b64url(&random_bytes::<32>()),
        sig: b64(&[0; 64]),
        conn: None,
    })
}

/// A control signed by `signer` claiming to come from `device`.
pub fn control(
    device: &Identity,
    bridge_id: &BridgeId,
    session: Option<&str>,
    token: Option<String>,
    body: &str,
) -> ControlEnvelope {
    let mut sealer = Sealer::new([3; 32], "control");
    seal_control(&mut sealer, device, bridge_id.as_str(), session.map(|s| SessionId(s.into())), token, body.as_bytes())
        .unwrap()
}

/// One HTTP/1.1 request with `Connection: close`; returns the status and body.
pub async fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write request");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(40), stream.read_to_end(&mut response))
        .await
        .expect("response in time")
        .expect("read response");
    let text = String::from_utf8(response).expect("utf-8 response");
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// `GET /v1/bridges/{bridge_id}/devices` signed by `signer` (the bridge or a device).
pub async fn list_devices(relay: &RunningRelay, bridge_id: &BridgeId, signer: &Identity) -> (u16, String) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let query = terminull_relay::listing::devices_listing_query(signer, bridge_id.as_str(), now);
    http(relay.addr(), "GET", &format!("/v1/bridges/{bridge_id}/devices?{query}"), None).await
}

/// A request a local push receiver got.
#[derive(Debug)]
pub struct ReceivedPush {
    /// Header lines, lowercased names.
    pub headers: Vec<(String, String)>,
    /// The encrypted body.
    pub body: Vec<u8>,
}

impl ReceivedPush {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A push service on 127.0.0.1 answering `status` to every POST; returns its endpoint URL
/// and what it receives.
pub async fn push_receiver(status: u16) -> (String, mpsc::Receiver<ReceivedPush>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                let header_end = loop {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
                let headers: Vec<(String, String)> = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_once(':'))
                    .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
                    .collect();
                let length: usize =
                    headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
                while buffer.len() < header_end + length {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                }
                let body = buffer[header_end..header_end + length].to_vec();
                let reply = format!("HTTP/1.1 {status} Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = tx.send(ReceivedPush { headers, body }).await;
            });
        }
    });
    (format!("http://{addr}/push/abc"), rx)
}

/// The next text message as it came (the exact bytes a device reads); panics on close
/// or after [`WAIT`].
pub async fn recv_text(ws: &mut Ws) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await.expect("something arrives in time") {
            Some(Ok(Message::Text(text))) => return text.as_str().to_owned(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected a text message, got {other:?}"),
        }
    }
}

/// The `{"type":"block",…}` text a device gets for a block whose JSON in the batch is
/// `block_json`.
pub fn block_frame_text(block_json: &str) -> String {
    format!(r#"{{"type":"block",{}"#, &block_json[1..])
}
