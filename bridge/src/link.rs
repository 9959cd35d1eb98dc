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
    Attach, ControlEnvelope, LinkAccept, LinkHello, RelayFrame, ReplayDoneFrame, ReplyEnvelope, SealedReply,
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
    /// Coalesce streamed chunks under back-pressure (on by default; the benchmark
    /// turns it off to measure what it saves). See [`superseded`].
    pub coalesce_chunks: bool,
    /// Chunks not sent because the next queued message replaced them.
    pub coalesced: Arc<std::sync::atomic::AtomicU64>,
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
            ctx.clone(),
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

/// Messages read ahead from the dispatcher's queue to find superseded chunks.
const COALESCE_WINDOW: usize = 256;

/// True when `message` is a non-final `text` or `thinking` chunk and `next` is a chunk
/// of the same id, session and replay flag. Each chunk carries the full text so far, so
/// `next` holds everything `message` does; and since nothing is queued between them,
/// dropping `message` changes no block's position (docs/block-protocol.md allows it:
/// "the bridge may coalesce the chunks of one id"). A `done: true` chunk is never
/// superseded.
pub fn superseded(message: &BridgeMessage, next: Option<&BridgeMessage>) -> bool {
    use terminull_protocol::blocks::BlockKind;
    let (
        BridgeMessage::Block { session_id, block, replay },
        Some(BridgeMessage::Block { session_id: next_session, block: next_block, replay: next_replay }),
    ) = (message, next)
    else {
        return false;
    };
    let open_chunk = match &block.kind {
        BlockKind::Text(t) | BlockKind::Thinking(t) => !t.done,
        _ => false,
    };
    open_chunk
        && session_id == next_session
        && replay == next_replay
        && block.kind.replace_key().is_some()
        && block.kind.replace_key() == next_block.kind.replace_key()
}

/// Seals the dispatcher's messages for the device. While the transport keeps up, one
/// message is read and sent at a time; when it falls behind (sealing, the socket), the
/// messages that queued meanwhile are read ahead and a chunk replaced by the next one
/// is skipped (counted in `coalesced`, when given) — so a slow link receives fewer,
/// larger-but-current chunks instead of every full-text-so-far copy.
async fn seal_outgoing(
    ctx: LinkContext,
    device_id: DeviceId,
    device: PublicIdentity,
    mut link_sealer: Sealer,
    pending: Arc<Mutex<HashMap<String, PendingAttach>>>,
    mut messages: mpsc::Receiver<BridgeMessage>,
    out: mpsc::Sender<RelayFrame>,
) {
    let identity = ctx.identity.clone();
    let coalesced = ctx.coalesce_chunks.then(|| ctx.coalesced.clone());
    let bridge_id = identity.public().bridge_id();
    let mut sessions: HashMap<SessionId, Sealer> = HashMap::new();
    let mut ahead: std::collections::VecDeque<BridgeMessage> = std::collections::VecDeque::new();
    loop {
        if ahead.is_empty() {
            match messages.recv().await {
                Some(m) => ahead.push_back(m),
                None => break,
            }
        }
        if let Some(counter) = &coalesced {
            while ahead.len() < COALESCE_WINDOW {
                match messages.try_recv() {
                    Ok(m) => ahead.push_back(m),
                    Err(_) => break,
                }
            }
            let Some(message) = ahead.pop_front() else { continue };
            if superseded(&message, ahead.front()) {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            ahead.push_front(message);
        }
        let Some(message) = ahead.pop_front() else { continue };
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
                RelayFrame::ReplayDone(ReplayDoneFrame { session_id, last_seq, conn: None })
            }
        };
        if out.send(frame).await.is_err() {
            return;
        }
    }
    let _ = device;
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::{Block, BlockKind, StreamedText};

    use super::*;

    fn chunk(session: &str, id: &str, text: &str, done: bool, replay: bool) -> BridgeMessage {
        let kind = BlockKind::Text(StreamedText { id: id.into(), text: text.into(), done });
        BridgeMessage::Block { session_id: SessionId(session.into()), block: Block::now(kind), replay }
    }

    #[test]
    fn only_an_open_chunk_followed_by_its_own_next_chunk_is_superseded() {
        let a1 = chunk("s", "a", "He", false, false);
        let a2 = chunk("s", "a", "Hello", false, false);
        let a_done = chunk("s", "a", "Hello", true, false);
        assert!(superseded(&a1, Some(&a2)));
        assert!(superseded(&a2, Some(&a_done)));
        // The final chunk is never dropped, whatever follows.
        assert!(!superseded(&a_done, Some(&chunk("s", "a", "Hello", true, false))));
        // Another id, session or replay flag in between keeps the chunk.
        assert!(!superseded(&a1, Some(&chunk("s", "b", "x", false, false))));
        assert!(!superseded(&a1, Some(&chunk("t", "a", "Hello", false, false))));
        assert!(!superseded(&a1, Some(&chunk("s", "a", "Hello", false, true))));
        assert!(!superseded(&a1, None));
        let done = BridgeMessage::ReplayDone { session_id: SessionId("s".into()), last_seq: None };
        assert!(!superseded(&a1, Some(&done)));
    }
}
