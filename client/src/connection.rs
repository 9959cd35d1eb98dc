//! An end-to-end encrypted link from this device to its bridge through a relay.
//!
//! [`Connection::open`] authenticates to the relay (challenge signed with the device
//! key), opens a link with the bridge (`link_hello`/`link_accept`, both signed; link
//! keys from X25519 of the two identities and both sides' fresh nonces) and then
//! carries control messages out and the bridge's messages in:
//!
//! - every control message is sealed under the link's app→bridge key and signed; a
//!   `session_request` or `session_resume` gets a fresh X25519 key (`app_pubkey`) so
//!   the session's blocks are sealed under keys only this attachment can derive;
//! - replies are opened with the link's bridge→app key, blocks with their session's
//!   key; anything that fails (tampered, replayed, reordered, unknown session) is
//!   refused, logged with its reason and counted, and never reaches the caller;
//! - replies and each session's blocks must arrive whole (consecutive counters): one
//!   that shows an earlier one was dropped on the way is refused and ends the link
//!   (its close reason says so), so a [`crate::failover`] link reconnects with new keys
//!   and resumes each session from the last block delivered;
//! - `auth` names the protocol version this device speaks, and a relay or LAN server
//!   whose `relay_status` names another is refused with one sentence naming both
//!   ([`ConnectError::Version`]).
//!
//! The caller sees the same [`BridgeMessage`]s as on the bridge's local socket.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use terminull_protocol::blocks::Block;
use terminull_protocol::control::{BridgeMessage, Control, ControlMessage, ReplyOutcome};
use terminull_protocol::crypto::attested::open_replay_done;
use terminull_protocol::crypto::channel::{Channel, Opener, session_keys};
use terminull_protocol::crypto::envelope::{open_block, open_reply, relay_auth_bytes, seal_control};
use terminull_protocol::crypto::handshake::DeviceHandshake;
use terminull_protocol::crypto::keys::{AppSessionKey, Identity, PublicIdentity};
use terminull_protocol::crypto::{CryptoError, b64, b64url, b64url_array, from_b64};
use terminull_protocol::ids::{BridgeId, DeviceId, SessionId};
use terminull_protocol::relay::{
    Auth, PROTOCOL_VERSION, RelayErrorCode, RelayFrame, RelayStatus, SealedReply, version_mismatch,
};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use crate::home::{DeviceHome, HomeError, PairedBridgeRecord};
use crate::net::{self, NetError, Stream};

/// Messages buffered from the bridge before the link stops reading (back-pressure
/// reaches the relay, which cuts a client that stays behind).
const INBOX: usize = 4096;
/// Control messages held at most while they wait for a resume token.
const QUEUED: usize = 256;
/// How long a control message naming a session waits for that session's resume token.
const TOKEN_WAIT: Duration = Duration::from_secs(5);
/// Controls remembered by counter for `refused` replies that carry no id.
const SENT_KEPT: usize = 1024;
/// How long the handshake (challenge, auth, link) may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The device's files.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// Reaching the relay.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The relay refused (unknown device, bridge offline, …).
    #[error("the relay refused: {code:?}: {message}")]
    Refused {
        /// Its code.
        code: RelayErrorCode,
        /// Its explanation.
        message: String,
    },
    /// The bridge's answer did not verify.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// The relay broke the protocol or went away during the handshake.
    #[error("handshake: {0}")]
    Handshake(String),
    /// The relay or LAN server speaks another protocol version: one sentence naming
    /// both. Trying again does not help until one side is updated.
    #[error("{0}")]
    Version(String),
    /// No relay URL was given and the pairing named none.
    #[error("no relay URL: pass --relay")]
    NoRelay,
    /// Neither the LAN nor the relay could be reached (each attempt and why).
    #[error("cannot reach the bridge: {0}")]
    NoPath(String),
}

/// Which path carries a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkPath {
    /// Directly to the bridge's LAN server at this URL.
    Lan(String),
    /// Through the relay at this URL.
    Relay(String),
}

impl std::fmt::Display for LinkPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkPath::Lan(url) => write!(f, "LAN ({url})"),
            LinkPath::Relay(url) => write!(f, "relay ({url})"),
        }
    }
}

/// Counters a caller (or a test) can read while the link runs.
#[derive(Debug, Default)]
pub struct LinkStats {
    /// Frames refused: failed to open or verify, replayed, reordered, unexpected.
    pub rejected: AtomicU64,
    /// Pushes delivered over the WebSocket and opened.
    pub pushes: AtomicU64,
    /// The latest opened notifications (`{"session_id", "kind", "title", "body"}`), at most 64.
    pub notices: std::sync::Mutex<std::collections::VecDeque<Value>>,
    /// `error` frames the relay sent.
    pub relay_errors: AtomicU64,
    /// The reasons of the latest refusals, oldest first (at most 256).
    pub reasons: std::sync::Mutex<std::collections::VecDeque<String>>,
    /// WebSocket text messages received after the handshake, and their payload bytes
    /// (what the link costs on the wire; the benchmark reads them).
    pub frames_in: AtomicU64,
    /// See [`frames_in`](Self::frames_in).
    pub bytes_in: AtomicU64,
}

impl LinkStats {
    /// The kept refusal reasons.
    pub fn reasons(&self) -> Vec<String> {
        self.reasons.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }
}

/// What the caller keeps besides the two channels.
#[derive(Debug, Clone)]
pub struct LinkInfo {
    /// The bridge.
    pub bridge_id: BridgeId,
    /// This device.
    pub device_id: DeviceId,
    /// The relay's latest `relay_status`, with `agents` emptied: the relay writes that
    /// list and nothing authenticates it, so the agents come from a `list_agents`
    /// reply (sealed by the bridge) instead.
    pub status: watch::Receiver<RelayStatus>,
    /// Counters.
    pub stats: Arc<LinkStats>,
    /// Why the link ended, once it has.
    pub closed: watch::Receiver<Option<String>>,
    /// The path the link uses now (a [`crate::failover`] link moves between them).
    pub path: watch::Receiver<LinkPath>,
}

/// An open link: send control values, receive the bridge's messages.
#[derive(Debug)]
pub struct Connection {
    /// Control messages out (JSON objects as on the local socket).
    pub tx: mpsc::Sender<Value>,
    /// The bridge's messages in, verified and decrypted.
    pub rx: mpsc::Receiver<BridgeMessage>,
    /// Status, counters and the close reason.
    pub info: LinkInfo,
}

type Ws = WebSocketStream<Stream>;

async fn send_frame(ws: &mut Ws, frame: &RelayFrame) -> Result<(), ConnectError> {
    let text = serde_json::to_string(frame).map_err(|e| ConnectError::Handshake(e.to_string()))?;
    ws.send(Message::text(text))
        .await
        .map_err(|e| ConnectError::Handshake(format!("sending {}: {e}", frame.frame_type())))
}

async fn next_frame(ws: &mut Ws) -> Result<RelayFrame, ConnectError> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(&text)
                    .map_err(|e| ConnectError::Handshake(format!("unreadable frame from the relay: {e}")));
            }
            Some(Ok(Message::Close(reason))) => {
                return Err(ConnectError::Handshake(format!(
                    "the relay closed the connection{}",
                    reason.map(|r| format!(": {}", r.reason)).unwrap_or_default()
                )));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(ConnectError::Handshake(e.to_string())),
            None => return Err(ConnectError::Handshake("the relay closed the connection".into())),
        }
    }
}

impl Connection {
    /// Opens a link to `bridge` through `relay_url` (default: the relay named at pairing).
    pub async fn open(
        home: &DeviceHome,
        bridge: &PairedBridgeRecord,
        relay_url: Option<&str>,
    ) -> Result<Self, ConnectError> {
        let relay = relay_url.map(str::to_owned).or_else(|| bridge.relay.clone()).ok_or(ConnectError::NoRelay)?;
        Self::open_path(home, bridge, LinkPath::Relay(relay), Arc::default()).await
    }

    /// Opens a link directly to the bridge's LAN server at `lan_url` (no relay: no
    /// resume tokens to wait for; the same envelopes and keys).
    pub async fn open_lan(home: &DeviceHome, bridge: &PairedBridgeRecord, lan_url: &str) -> Result<Self, ConnectError> {
        Self::open_path(home, bridge, LinkPath::Lan(lan_url.to_owned()), Arc::default()).await
    }

    /// Opens a link over `path`, counting into `stats` (shared by the links a
    /// [`crate::failover`] link moves between).
    pub(crate) async fn open_path(
        home: &DeviceHome,
        bridge: &PairedBridgeRecord,
        path: LinkPath,
        stats: Arc<LinkStats>,
    ) -> Result<Self, ConnectError> {
        let identity = home.identity()?;
        let base = match &path {
            LinkPath::Lan(url) | LinkPath::Relay(url) => url,
        };
        let url = format!("{}{}", net::Endpoint::parse(base)?.ws_base(), terminull_protocol::lan::CLIENT_PATH);
        let ws = net::websocket(&url).await?;
        tokio::time::timeout(HANDSHAKE_TIMEOUT, Self::handshake(ws, identity, bridge, home.clone(), path, stats))
            .await
            .map_err(|_| ConnectError::Handshake(format!("{url}: no answer within {HANDSHAKE_TIMEOUT:?}")))?
    }

    async fn handshake(
        mut ws: Ws,
        identity: Identity,
        bridge: &PairedBridgeRecord,
        home: DeviceHome,
        path: LinkPath,
        stats: Arc<LinkStats>,
    ) -> Result<Self, ConnectError> {
        // On the LAN the device talks to the bridge itself: there are no resume tokens.
        let direct = matches!(path, LinkPath::Lan(_));
        let bridge_public = PublicIdentity::from_wire(&bridge.keys)?;
        let device_id = identity.public().device_id();
        let bridge_id = bridge.bridge_id.clone();
        let refused = |e: terminull_protocol::relay::RelayError| match e.code {
            RelayErrorCode::UnsupportedVersion => ConnectError::Version(e.message),
            code => ConnectError::Refused { code, message: e.message },
        };
        let server = server_name(&path);
        // 1. The relay's challenge, answered with the device key.
        let challenge = match next_frame(&mut ws).await? {
            RelayFrame::Challenge(c) => from_b64url_vec(&c.nonce)?,
            RelayFrame::Error(e) => return Err(refused(e)),
            other => return Err(ConnectError::Handshake(format!("expected challenge, got {}", other.frame_type()))),
        };
        let sig = identity.sign(&relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), &challenge));
        send_frame(
            &mut ws,
            &RelayFrame::Auth(Auth {
                bridge_id: bridge_id.clone(),
                device_id: device_id.clone(),
                sig: b64(&sig),
                protocol_version: PROTOCOL_VERSION,
            }),
        )
        .await?;
        let status = match next_frame(&mut ws).await? {
            RelayFrame::RelayStatus(s) => s,
            RelayFrame::Error(e) => return Err(refused(e)),
            other => return Err(ConnectError::Handshake(format!("expected relay_status, got {}", other.frame_type()))),
        };
        if let Some(mismatch) = check_version(server, &status) {
            return Err(ConnectError::Version(mismatch));
        }
        let (status_tx, status_rx) = watch::channel(advisory(status));
        // 2. The link with the bridge.
        // Version 3: a fresh ephemeral key for this link only; `pending` holds its
        // secret until `finish` consumes it (zeroized, never stored).
        let (hello, pending) = DeviceHandshake::start(&identity, bridge_id.as_str());
        send_frame(&mut ws, &RelayFrame::LinkHello(hello)).await?;
        let mut early_pushes = Vec::new();
        let accept = loop {
            match next_frame(&mut ws).await? {
                RelayFrame::LinkAccept(a) => break a,
                RelayFrame::RelayStatus(s) => {
                    if let Some(mismatch) = check_version(server, &s) {
                        return Err(ConnectError::Version(mismatch));
                    }
                    status_tx.send_replace(advisory(s));
                }
                RelayFrame::Push(p) => early_pushes.push(p),
                RelayFrame::Error(e) => return Err(refused(e)),
                other => {
                    return Err(ConnectError::Handshake(format!("expected link_accept, got {}", other.frame_type())));
                }
            }
        };
        let keys = pending.finish(&identity, &bridge_public, &accept)?;
        let shared = identity.agree(&bridge_public.x25519, "bridge x25519")?;
        let push_key = terminull_protocol::crypto::channel::push_key(&shared, bridge_id.as_str(), device_id.as_str());
        let (tx, out_rx) = mpsc::channel::<Value>(64);
        let (in_tx, rx) = mpsc::channel(INBOX);
        let (closed_tx, closed_rx) = watch::channel(None);
        let info = LinkInfo {
            bridge_id: bridge_id.clone(),
            device_id: device_id.clone(),
            status: status_rx,
            stats: stats.clone(),
            closed: closed_rx,
            path: watch::channel(path).1,
        };
        let mut link = Link {
            identity,
            bridge_id,
            device_id,
            bridge_x: bridge_public.x25519,
            channel: Channel::app_side(&keys, "link"),
            sessions: HashMap::new(),
            pending: HashMap::new(),
            sent: Default::default(),
            next_id: 0,
            status: status_tx,
            stats,
            inbox: in_tx,
            push_opener: Opener::after(push_key, home.push_counter(&bridge.bridge_id), "push"),
            home,
            direct,
            server,
        };
        for push in early_pushes {
            link.open_push(&push);
        }
        tokio::spawn(async move {
            let reason = link.run(ws, out_rx).await;
            tracing::info!("link to the bridge closed: {reason}");
            let _ = closed_tx.send(Some(reason));
        });
        Ok(Connection { tx, rx, info })
    }
}

/// The message an opened `block` envelope carries: a session's block, or a terminal's
/// output or exit notice (by its authenticated `block_type`, docs/terminals.md).
fn decode_block(
    envelope: &terminull_protocol::relay::BlockEnvelope,
    bytes: &[u8],
) -> Result<BridgeMessage, CryptoError> {
    use terminull_protocol::terminal::{EXIT_BLOCK_TYPE, OUTPUT_BLOCK_TYPE, TerminalExit, TerminalOutput};
    let json = |what: &'static str| move |x: serde_json::Error| CryptoError::Json { what, detail: x.to_string() };
    let named = |id: &str| {
        (id == envelope.session_id.as_str()).then_some(()).ok_or_else(|| CryptoError::Json {
            what: "terminal output",
            detail: format!("names terminal `{id}` inside an envelope of `{}`", envelope.session_id),
        })
    };
    match envelope.block_type.as_str() {
        OUTPUT_BLOCK_TYPE => {
            let output: TerminalOutput = serde_json::from_slice(bytes).map_err(json("terminal output"))?;
            named(output.terminal_id.as_str())?;
            Ok(BridgeMessage::TerminalOutput(output))
        }
        EXIT_BLOCK_TYPE => {
            let exit: TerminalExit = serde_json::from_slice(bytes).map_err(json("terminal exit"))?;
            named(exit.terminal_id.as_str())?;
            Ok(BridgeMessage::TerminalExit(exit))
        }
        _ => {
            let block: Block = serde_json::from_slice(bytes).map_err(json("block"))?;
            Ok(BridgeMessage::Block { session_id: envelope.session_id.clone(), block, replay: envelope.replay })
        }
    }
}

/// How errors name the other end of `path`.
fn server_name(path: &LinkPath) -> &'static str {
    match path {
        LinkPath::Lan(_) => "the LAN server",
        LinkPath::Relay(_) => "the relay",
    }
}

/// The one sentence naming both versions when `status` comes from a server that
/// speaks another protocol version than this device.
fn check_version(server: &str, status: &RelayStatus) -> Option<String> {
    (status.protocol_version != PROTOCOL_VERSION)
        .then(|| version_mismatch(server, status.protocol_version, "this device", PROTOCOL_VERSION))
}

/// The part of a `relay_status` a device may act on: the relay can forge any of it, so
/// its agent list (which a device would show and offer) is dropped; the resume tokens
/// are the relay's own business and only open the relay's gate.
fn advisory(mut status: RelayStatus) -> RelayStatus {
    status.agents.clear();
    status
}

fn from_b64url_vec(text: &str) -> Result<Vec<u8>, CryptoError> {
    terminull_protocol::crypto::from_b64url("nonce", text)
}

struct Link {
    identity: Identity,
    bridge_id: BridgeId,
    device_id: DeviceId,
    bridge_x: x25519_dalek::PublicKey,
    channel: Channel,
    /// Block openers by session (one per attachment; a new attachment replaces it).
    sessions: HashMap<SessionId, Opener>,
    /// Session keys waiting for the bridge's attach, by control id.
    pending: HashMap<String, AppSessionKey>,
    /// The counters of the latest controls sent with an id, at most [`SENT_KEPT`]:
    /// a `refused` reply without an id names the control by its counter.
    sent: std::collections::VecDeque<(u64, String)>,
    next_id: u64,
    status: watch::Sender<RelayStatus>,
    stats: Arc<LinkStats>,
    inbox: mpsc::Sender<BridgeMessage>,
    /// Opens the bridge's notifications; its high-water mark (kept in the device's
    /// home across restarts) refuses replayed ones.
    push_opener: Opener,
    home: DeviceHome,
    /// Connected to the bridge itself (LAN): there are no resume tokens to wait for.
    direct: bool,
    /// How errors name the server at the other end ("the relay", "the LAN server").
    server: &'static str,
}

impl Link {
    async fn run(mut self, mut ws: Ws, mut out: mpsc::Receiver<Value>) -> String {
        // Control messages wait here, in order, until the relay has given this device
        // the resume token of the session they name (it sends the token just before
        // the session's first block, which can be after the bridge's reply that
        // carries the session id), or until TOKEN_WAIT has passed.
        let mut queue: std::collections::VecDeque<(Value, tokio::time::Instant)> = Default::default();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut closing = false;
        loop {
            tokio::select! {
                frame = ws.next() => match frame {
                    Some(Ok(Message::Text(text))) => {
                        self.stats.frames_in.fetch_add(1, Ordering::Relaxed);
                        self.stats.bytes_in.fetch_add(text.len() as u64, Ordering::Relaxed);
                        if let Some(reason) = self.incoming(&text).await {
                            let _ = ws.close(None).await;
                            return reason;
                        }
                    }
                    Some(Ok(Message::Close(reason))) => {
                        return format!("the relay closed the connection{}", reason.map(|r| format!(": {}", r.reason)).unwrap_or_default());
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return format!("the connection failed: {e}"),
                    None => return "the relay closed the connection".into(),
                },
                // Bounded: while QUEUED messages wait, the caller's sends wait too.
                value = out.recv(), if !closing && queue.len() < QUEUED => match value {
                    Some(value) => queue.push_back((value, tokio::time::Instant::now())),
                    None => closing = true,
                },
                _ = tick.tick(), if !queue.is_empty() => {}
            }
            while let Some((value, since)) = queue.front() {
                if !self.sendable(value) && since.elapsed() < TOKEN_WAIT {
                    break;
                }
                let Some((value, _)) = queue.pop_front() else { break };
                match self.outgoing(value) {
                    Ok(frame) => {
                        let Ok(text) = serde_json::to_string(&frame) else { continue };
                        if let Err(e) = ws.send(Message::text(text)).await {
                            return format!("sending to the relay failed: {e}");
                        }
                    }
                    Err(e) => tracing::warn!("control message not sent: {e}"),
                }
            }
            if closing && queue.is_empty() {
                let _ = ws.close(None).await;
                return "closed by this device".into();
            }
        }
    }

    /// True when `value` names no session or the relay's token for it is held.
    fn sendable(&self, value: &Value) -> bool {
        if self.direct {
            return true;
        }
        match value.get("session_id").and_then(Value::as_str) {
            None => true,
            Some(s) => self.status.borrow().resume_tokens.contains_key(&SessionId(s.to_owned())),
        }
    }

    /// Seals one control value; session requests and resumes get a fresh session key.
    fn outgoing(&mut self, mut value: Value) -> Result<RelayFrame, CryptoError> {
        let mut session_id = value.get("session_id").and_then(Value::as_str).map(|s| SessionId(s.to_owned()));
        if let Ok(mut control) = serde_json::from_value::<Control>(value.clone()) {
            let key = match &mut control.message {
                ControlMessage::SessionRequest(r) => Some(&mut r.app_pubkey),
                ControlMessage::SessionResume(r) => Some(&mut r.app_pubkey),
                ControlMessage::AttachExternal(r) => Some(&mut r.app_pubkey),
                ControlMessage::TerminalOpen(r) => Some(&mut r.app_pubkey),
                ControlMessage::TerminalAttach(r) => Some(&mut r.app_pubkey),
                _ => None,
            };
            if let Some(app_pubkey) = key {
                let session_key = AppSessionKey::generate();
                *app_pubkey = b64url(&session_key.public_bytes());
                let id = control.id.clone().unwrap_or_else(|| {
                    self.next_id += 1;
                    format!("link-{}", self.next_id)
                });
                control.id = Some(id.clone());
                self.pending.insert(id, session_key);
            }
            session_id = control.message.session_id();
            value = serde_json::to_value(&control)
                .map_err(|e| CryptoError::Json { what: "control", detail: e.to_string() })?;
        }
        let token = session_id.as_ref().and_then(|s| self.status.borrow().resume_tokens.get(s).cloned());
        let json =
            serde_json::to_vec(&value).map_err(|e| CryptoError::Json { what: "control", detail: e.to_string() })?;
        let counter = self.channel.sealer.next_counter();
        let envelope =
            seal_control(&mut self.channel.sealer, &self.identity, self.bridge_id.as_str(), session_id, token, &json)?;
        if let Some(id) = value.get("id").and_then(Value::as_str) {
            if self.sent.len() == SENT_KEPT {
                self.sent.pop_front();
            }
            self.sent.push_back((counter, id.to_owned()));
        }
        Ok(RelayFrame::Control(envelope))
    }

    fn reject(&self, what: &str, reason: impl std::fmt::Display) {
        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        let reason = format!("refused {what} from the relay: {reason}");
        tracing::warn!("{reason}");
        let mut reasons = self.stats.reasons.lock().unwrap_or_else(|p| p.into_inner());
        if reasons.len() == 256 {
            reasons.pop_front();
        }
        reasons.push_back(reason);
    }

    /// Refuses a block or reply that did not open. One that shows an earlier one was
    /// dropped on the way ([`CryptoError::Missing`]) also breaks the link: what the
    /// device holds now has a hole, and only a new link (new keys, sessions resumed
    /// from the last block received) fills it; so the reason is returned, to end it.
    fn refuse_or_break(&self, what: &str, error: CryptoError) -> Option<String> {
        let broken = matches!(error, CryptoError::Missing { .. });
        self.reject(what, &error);
        broken.then(|| format!("{what} was dropped on the way ({error}): closing the link to {}", self.server))
    }

    /// Handles one frame; `Some(reason)` ends the link.
    async fn incoming(&mut self, text: &str) -> Option<String> {
        let frame: RelayFrame = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                self.reject("a frame", format!("unreadable: {e}"));
                return None;
            }
        };
        let message = match frame {
            RelayFrame::Reply(r) => match self.open_reply(&r.body) {
                Ok(m) => m,
                Err(e) => return self.refuse_or_break("a reply", e),
            },
            RelayFrame::Block(e) => {
                let Some(opener) = self.sessions.get_mut(&e.session_id) else {
                    self.reject("a block", format!("no key for session `{}` on this link", e.session_id));
                    return None;
                };
                match open_block(opener, &e).and_then(|bytes| decode_block(&e, &bytes)) {
                    Ok(message) => message,
                    Err(err) => return self.refuse_or_break("a block", err),
                }
            }
            RelayFrame::ReplayDone(d) => {
                // Only a sealed replay_done counts: one the relay made up has no `enc`
                // that opens in the session's block sequence.
                let Some(opener) = self.sessions.get_mut(&d.session_id) else {
                    self.reject("a replay_done", format!("no key for session `{}` on this link", d.session_id));
                    return None;
                };
                match open_replay_done(opener, &d) {
                    Ok(done) => BridgeMessage::ReplayDone { session_id: done.session_id, last_seq: done.last_seq },
                    Err(err) => return self.refuse_or_break("a replay_done", err),
                }
            }
            RelayFrame::RelayStatus(s) => {
                if let Some(mismatch) = check_version(self.server, &s) {
                    self.reject("a relay_status", &mismatch);
                    return Some(mismatch);
                }
                self.status.send_replace(advisory(s));
                return None;
            }
            RelayFrame::Push(p) => {
                self.open_push(&p);
                return None;
            }
            RelayFrame::Error(e) => {
                self.stats.relay_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("relay error {:?}: {}", e.code, e.message);
                return match e.code {
                    RelayErrorCode::UnsupportedVersion => Some(e.message),
                    RelayErrorCode::UnknownDevice
                    | RelayErrorCode::SlowConsumer
                    | RelayErrorCode::TooManyConnections => Some(format!("{:?}: {}", e.code, e.message)),
                    _ => None,
                };
            }
            other => {
                self.reject("a frame", format!("`{}` is not sent to devices", other.frame_type()));
                return None;
            }
        };
        if self.inbox.send(message).await.is_err() {
            return Some("the caller went away".into());
        }
        None
    }

    /// Opens a notification sealed for this device and keeps it in the stats.
    fn open_push(&mut self, push: &terminull_protocol::relay::Push) {
        let aad = terminull_protocol::crypto::envelope::push_aad(
            self.bridge_id.as_str(),
            self.device_id.as_str(),
            push.kind.as_str(),
        );
        let opened = from_b64("payload", &push.payload)
            .and_then(|sealed| self.push_opener.open(&aad, &sealed))
            .and_then(|bytes| {
                serde_json::from_slice::<Value>(&bytes)
                    .map_err(|e| CryptoError::Json { what: "push", detail: e.to_string() })
            });
        match opened {
            Ok(notice) => {
                if let Err(e) = self.home.set_push_counter(&self.bridge_id, self.push_opener.last_counter()) {
                    tracing::warn!("cannot record the push counter: {e}");
                }
                self.stats.pushes.fetch_add(1, Ordering::Relaxed);
                let mut notices = self.stats.notices.lock().unwrap_or_else(|p| p.into_inner());
                if notices.len() == 64 {
                    notices.pop_front();
                }
                notices.push_back(notice);
            }
            Err(e) => self.reject("a push", e),
        }
    }

    fn open_reply(&mut self, body: &str) -> Result<BridgeMessage, CryptoError> {
        let bytes = open_reply(&mut self.channel.opener, self.bridge_id.as_str(), self.device_id.as_str(), body)?;
        let sealed: SealedReply =
            serde_json::from_slice(&bytes).map_err(|e| CryptoError::Json { what: "reply", detail: e.to_string() })?;
        let mut reply = sealed.reply;
        // A refusal of a control whose id the bridge could not read names its counter.
        if let ReplyOutcome::Refused { counter: Some(counter), .. } = &reply.outcome
            && reply.id.is_none()
        {
            reply.id = self.sent.iter().find(|(c, _)| c == counter).map(|(_, id)| id.clone());
        }
        if let (ReplyOutcome::Refused { reason, message, .. }, Some(id)) = (&reply.outcome, &reply.id) {
            tracing::warn!("the bridge refused control `{id}` ({}): {message}", reason.as_str());
            self.pending.remove(id);
        }
        let key = reply.id.as_ref().and_then(|id| self.pending.remove(id));
        if let Some(attach) = &sealed.attach {
            let key =
                key.ok_or_else(|| CryptoError::Pairing("an attach for no session request of this link".into()))?;
            let nonce = b64url_array::<16>("attach_nonce", &attach.attach_nonce)?;
            let shared = key.agree(&self.bridge_x)?;
            let keys = session_keys(&shared, attach.session_id.as_str(), &key.public_bytes(), &nonce);
            self.sessions.insert(attach.session_id.clone(), Opener::new(keys.bridge_to_app, "block"));
        }
        Ok(BridgeMessage::Reply(reply))
    }
}
