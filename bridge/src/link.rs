//! One paired device's encrypted link, whatever carries it (the relay now, the LAN
//! server later): checks the device at `link_hello`, opens its control messages,
//! hands them to the one dispatcher exactly as the local socket does, and seals
//! what comes back — replies under the link, blocks under the session keys of the
//! device's attachment.
//!
//! A control message is refused (logged with its reason; nothing is dispatched)
//! when the device is no longer paired or was revoked, when its signature does not
//! verify, or when its body does not open (tampered, replayed, reordered).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use terminull_protocol::blocks::now_ts;
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::crypto::channel::{Channel, Sealer, link_keys, session_keys};
use terminull_protocol::crypto::envelope::{
    link_accept_bytes, link_hello_bytes, open_control, seal_block, seal_reply, verify_control,
};
use terminull_protocol::crypto::keys::{Identity, PublicIdentity};
use terminull_protocol::crypto::{CryptoError, b64, b64url, b64url_array, from_b64};
use terminull_protocol::ids::{DeviceId, SessionId};
use terminull_protocol::ndjson::LineError;
use terminull_protocol::relay::{
    Attach, ControlEnvelope, LinkAccept, LinkHello, RelayFrame, ReplayDone, ReplyEnvelope, SealedReply,
};
use tokio::sync::mpsc;

use crate::devices::DeviceRegistry;
use crate::local;
use crate::service::Service;

/// Messages from the dispatcher buffered per link before it waits on the transport.
const LINK_QUEUE: usize = 4096;

/// What a link needs from the bridge.
#[derive(Debug, Clone)]
pub struct LinkContext {
    /// The bridge's identity.
    pub identity: Arc<Identity>,
    /// The paired devices.
    pub devices: DeviceRegistry,
    /// The dispatcher.
    pub service: Service,
    /// The reasons of the latest refusals (tests and diagnostics read them).
    pub refusals: Refusals,
}

/// The reasons of the latest refusals, newest last, at most [`Refusals::KEPT`].
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<(u64, std::collections::VecDeque<String>)>>);

impl Refusals {
    /// Reasons kept.
    pub const KEPT: usize = 256;

    /// Records one refusal and logs it.
    pub fn record(&self, reason: String) {
        tracing::warn!("{reason}");
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        guard.0 += 1;
        if guard.1.len() == Self::KEPT {
            guard.1.pop_front();
        }
        guard.1.push_back(reason);
    }

    /// How many so far.
    pub fn count(&self) -> u64 {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// The kept reasons, oldest first.
    pub fn reasons(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).1.iter().cloned().collect()
    }
}

impl LinkContext {
    fn refuse(&self, device: &DeviceId, what: &str, reason: impl std::fmt::Display) {
        self.refusals.record(format!("refused {what} from device {device}: {reason}"));
    }
}

/// A link accepted at `link_hello`, ready to [`run`](OpenLink::run).
#[derive(Debug)]
pub struct OpenLink {
    ctx: LinkContext,
    device_id: DeviceId,
    device: PublicIdentity,
    channel: Channel,
}

/// Checks a `link_hello`: the device must be paired, not revoked, and its signature
/// valid. Returns the `link_accept` to send and the open link.
pub fn accept(ctx: &LinkContext, hello: &LinkHello) -> Result<(LinkAccept, OpenLink), String> {
    let bridge_id = ctx.identity.public().bridge_id();
    let refuse = |reason: String| {
        ctx.refuse(&hello.device_id, "a link", &reason);
        reason
    };
    let device = ctx
        .devices
        .active(&hello.device_id)
        .ok_or_else(|| refuse(format!("device `{}` is not paired with this bridge or was revoked", hello.device_id)))?;
    let client_nonce = b64url_array::<16>("client_nonce", &hello.client_nonce).map_err(|e| refuse(e.to_string()))?;
    let sig = from_b64("sig", &hello.sig).map_err(|e| refuse(e.to_string()))?;
    device
        .verify(&link_hello_bytes(bridge_id.as_str(), hello.device_id.as_str(), &client_nonce), &sig, "link_hello")
        .map_err(|e| refuse(e.to_string()))?;
    let bridge_nonce = terminull_protocol::crypto::random_bytes::<16>();
    let shared = ctx.identity.agree(&device.x25519, "device x25519").map_err(|e| refuse(e.to_string()))?;
    let keys = link_keys(&shared, &client_nonce, &bridge_nonce, bridge_id.as_str(), hello.device_id.as_str());
    let accept = LinkAccept {
        device_id: hello.device_id.clone(),
        bridge_nonce: b64url(&bridge_nonce),
        sig: b64(&ctx.identity.sign(&link_accept_bytes(
            bridge_id.as_str(),
            hello.device_id.as_str(),
            &client_nonce,
            &bridge_nonce,
        ))),
        conn: None,
    };
    Ok((
        accept,
        OpenLink {
            ctx: ctx.clone(),
            device_id: hello.device_id.clone(),
            device,
            channel: Channel::bridge_side(&keys, "link"),
        },
    ))
}

/// A session request or resume waiting for its reply: the app's key for the session.
#[derive(Debug, Clone)]
struct PendingAttach {
    app_pubkey: [u8; 32],
    /// The session, for a resume (a new session's id comes in the reply).
    session_id: Option<SessionId>,
}

/// Why a link ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEnd {
    /// The transport closed (device gone).
    Closed,
    /// The device was revoked (or unpaired) while connected.
    Revoked(String),
}

impl OpenLink {
    /// Runs the link: control envelopes in, frames out (without `conn`). Returns when
    /// `controls` ends or the device is revoked.
    pub async fn run(self, mut controls: mpsc::Receiver<ControlEnvelope>, out: mpsc::Sender<RelayFrame>) -> LinkEnd {
        let OpenLink { ctx, device_id, device, channel } = self;
        let Channel { sealer, mut opener } = channel;
        let bridge_id = ctx.identity.public().bridge_id();
        let pending: Arc<Mutex<HashMap<String, PendingAttach>>> = Arc::default();
        let (lines_tx, lines_rx) = mpsc::channel::<Value>(64);
        let (messages_tx, messages_rx) = mpsc::channel::<BridgeMessage>(LINK_QUEUE);
        let lines = Box::pin(futures::stream::unfold(lines_rx, |mut rx| async move {
            rx.recv().await.map(|v| (Ok::<_, LineError>(v), rx))
        }));
        let dispatcher = tokio::spawn(local::serve_connection(ctx.service.clone(), lines, messages_tx));
        let sealing = tokio::spawn(seal_outgoing(
            ctx.identity.clone(),
            device_id.clone(),
            device,
            sealer,
            pending.clone(),
            messages_rx,
            out,
        ));
        let mut next_id = 0u64;
        let end = loop {
            let Some(envelope) = controls.recv().await else { break LinkEnd::Closed };
            // Revocation takes effect from the next message on.
            let Some(current) = ctx.devices.active(&device_id) else {
                let reason = format!("device `{device_id}` was revoked");
                ctx.refuse(&device_id, "a control message", &reason);
                break LinkEnd::Revoked(reason);
            };
            if envelope.device_id != device_id {
                ctx.refuse(&device_id, "a control message", format!("it names device `{}`", envelope.device_id));
                continue;
            }
            if let Err(e) = verify_control(&current, bridge_id.as_str(), &envelope) {
                ctx.refuse(&device_id, "a control message", e);
                continue;
            }
            let mut value = match open_control(&mut opener, bridge_id.as_str(), &envelope).and_then(|bytes| {
                serde_json::from_slice::<Value>(&bytes)
                    .map_err(|e| CryptoError::Json { what: "control", detail: e.to_string() })
            }) {
                Ok(v) => v,
                Err(e) => {
                    ctx.refuse(&device_id, "a control message", e);
                    continue;
                }
            };
            let kind = value.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
            if matches!(kind.as_str(), "session_request" | "session_resume" | "attach_external") {
                let key = value.get("app_pubkey").and_then(Value::as_str).map(|k| b64url_array::<32>("app_pubkey", k));
                let Some(Ok(app_pubkey)) = key else {
                    ctx.refuse(&device_id, "a control message", format!("{kind} without a valid app_pubkey"));
                    continue;
                };
                let id = match value.get("id").and_then(Value::as_str) {
                    Some(id) => id.to_owned(),
                    None => {
                        next_id += 1;
                        let id = format!("link-{next_id}");
                        value["id"] = Value::from(id.clone());
                        id
                    }
                };
                let session_id = value.get("session_id").and_then(Value::as_str).map(|s| SessionId(s.to_owned()));
                pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, PendingAttach { app_pubkey, session_id });
            }
            if lines_tx.send(value).await.is_err() {
                break LinkEnd::Closed;
            }
        };
        drop(lines_tx);
        dispatcher.abort();
        sealing.abort();
        end
    }
}

async fn seal_outgoing(
    identity: Arc<Identity>,
    device_id: DeviceId,
    device: PublicIdentity,
    mut link_sealer: Sealer,
    pending: Arc<Mutex<HashMap<String, PendingAttach>>>,
    mut messages: mpsc::Receiver<BridgeMessage>,
    out: mpsc::Sender<RelayFrame>,
) {
    let bridge_id = identity.public().bridge_id();
    let mut sessions: HashMap<SessionId, Sealer> = HashMap::new();
    while let Some(message) = messages.recv().await {
        let frame = match message {
            BridgeMessage::Reply(reply) => {
                let waiting =
                    reply.id.as_ref().and_then(|id| pending.lock().unwrap_or_else(|p| p.into_inner()).remove(id));
                let attach = waiting.and_then(|p| {
                    let session_id = match &reply.outcome {
                        ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } => session_id.clone(),
                        ReplyOutcome::Ok { .. } => p.session_id?,
                        ReplyOutcome::Error { .. } => return None,
                    };
                    let shared = match identity.agree(&x25519_dalek::PublicKey::from(p.app_pubkey), "app_pubkey") {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(device = %device_id, "no session keys: {e}");
                            return None;
                        }
                    };
                    let nonce = terminull_protocol::crypto::random_bytes::<16>();
                    let keys = session_keys(&shared, session_id.as_str(), &p.app_pubkey, &nonce);
                    sessions.insert(session_id.clone(), Sealer::new(keys.bridge_to_app, "block"));
                    Some(Attach { session_id, attach_nonce: b64url(&nonce) })
                });
                let sealed = SealedReply { reply, attach };
                let body = serde_json::to_vec(&sealed)
                    .map_err(|e| CryptoError::Json { what: "reply", detail: e.to_string() })
                    .and_then(|json| seal_reply(&mut link_sealer, bridge_id.as_str(), device_id.as_str(), &json));
                match body {
                    Ok(body) => RelayFrame::Reply(ReplyEnvelope { device_id: device_id.clone(), body, conn: None }),
                    Err(e) => {
                        tracing::error!(device = %device_id, "cannot seal a reply: {e}");
                        continue;
                    }
                }
            }
            BridgeMessage::Block { session_id, block, replay } => {
                let Some(sealer) = sessions.get_mut(&session_id) else {
                    tracing::warn!(device = %device_id, session = %session_id, "a block for a session this link has no keys for; not sent");
                    continue;
                };
                let sealed = serde_json::to_vec(&block)
                    .map_err(|e| CryptoError::Json { what: "block", detail: e.to_string() })
                    .and_then(|json| {
                        // Live blocks carry the send time, history its original time (§1.3).
                        let server_ts = if replay { block.ts } else { now_ts() };
                        seal_block(sealer, &identity, &session_id, block.block_type(), replay, server_ts, &json)
                    });
                match sealed {
                    Ok(envelope) => RelayFrame::Block(envelope),
                    Err(e) => {
                        tracing::error!(device = %device_id, "cannot seal a block: {e}");
                        continue;
                    }
                }
            }
            BridgeMessage::ReplayDone { session_id, last_seq } => {
                RelayFrame::ReplayDone(ReplayDone { session_id, last_seq, conn: None })
            }
        };
        if out.send(frame).await.is_err() {
            return;
        }
    }
    let _ = device;
}
