//! One paired device's encrypted link, whatever carries it (the relay or the LAN
//! server): checks the device at `link_hello`, opens and parses its control messages,
//! hands them to the one connection loop ([`crate::connection`]) exactly as the local
//! socket does, and seals what comes back — replies under the link, blocks under the
//! session keys of the device's attachment.
//!
//! A control message is refused (logged with its reason; nothing is dispatched)
//! when the device is no longer paired or was revoked, when its signature does not
//! verify, when its body does not open (tampered, replayed, reordered), or when the
//! session it names is not the envelope's `session_id` (which the relay checks the
//! resume token against). Every refusal but a revocation (which closes the link) is
//! answered with a sealed `refused` reply (`link/refusal.rs`), at most
//! `refusal::REPLIES_PER_WINDOW` per window.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use terminull_protocol::blocks::{Block, now_ts};
use terminull_protocol::control::{
    BridgeMessage, Control, ControlError, ControlMessage, RefusalReason, Reply, ReplyErrorCode, ReplyResult,
};
use terminull_protocol::crypto::channel::{Channel, Sealer, session_keys};
use terminull_protocol::crypto::envelope::{open_control, seal_block, seal_reply, verify_control};
use terminull_protocol::crypto::handshake::accept_hello;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::{CryptoError, b64url, b64url_array};
use terminull_protocol::ids::{DeviceId, SessionId};
use terminull_protocol::relay::{
    Attach, ControlEnvelope, LinkAccept, LinkHello, RelayFrame, ReplyEnvelope, SealedReply,
};
use terminull_protocol::terminal;
use tokio::sync::mpsc;

mod refusal;

use crate::connection::{self, Inbound, Malformed, Outbound, OutboundQueue, OutboundReceiver, Peer, Queued};
use crate::devices::DeviceRegistry;
use crate::service::Service;
use terminull_protocol::crypto::attested::{control_counter, seal_replay_done};

/// What the dispatcher queues per link before it waits on the transport (sealing and
/// the transport's own queue come after): at most this many messages and bytes,
/// counting the messages the sealer reads ahead to join chunks.
const LINK_QUEUE: OutboundQueue = OutboundQueue { max_messages: 4096, max_bytes: 4 << 20 };

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
    /// Join streamed chunks under back-pressure (on by default; the benchmark turns it
    /// off to measure what it saves). See [`coalesce`].
    pub coalesce_chunks: bool,
    /// Chunks not sent on their own because they were joined into the one before.
    pub coalesced: Arc<std::sync::atomic::AtomicU64>,
    /// What answers a device's `rtc_offer`: the LAN server while one runs (it sets it).
    pub rtc: RtcHook,
}

/// Answers a device's `rtc_offer` (docs/web-client.md, "The LAN as a data channel").
pub trait RtcAnswer: Send + Sync + std::fmt::Debug {
    /// The SDP answer, or the reply's error code and the sentence naming what is wrong.
    fn answer(&self, ctx: &LinkContext, device: &DeviceId, sdp: &str) -> Result<String, (ReplyErrorCode, String)>;
    /// Data channels open (or being opened) now.
    fn peers(&self) -> usize;
}

/// Where the running LAN server puts its [`RtcAnswer`]; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct RtcHook(Arc<Mutex<Option<Arc<dyn RtcAnswer>>>>);

impl RtcHook {
    /// Makes `answer` the one that answers from now on.
    pub fn set(&self, answer: Arc<dyn RtcAnswer>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(answer);
    }

    fn get(&self) -> Option<Arc<dyn RtcAnswer>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Answers `device`'s offer; `not_supported` when no LAN server runs.
    pub fn answer(&self, ctx: &LinkContext, device: &DeviceId, sdp: &str) -> Result<String, (ReplyErrorCode, String)> {
        match self.get() {
            Some(answer) => answer.answer(ctx, device, sdp),
            None => Err((
                ReplyErrorCode::NotSupported,
                "this bridge runs no LAN server (`terminull up --lan`), so there is no LAN path to offer".into(),
            )),
        }
    }

    /// Data channels open (or being opened) now.
    pub fn peers(&self) -> usize {
        self.get().map_or(0, |answer| answer.peers())
    }
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
    channel: Channel,
}

/// Why a `link_hello` was refused; its text is the reason the device is told.
#[derive(Debug, thiserror::Error)]
pub enum LinkRefused {
    /// The device is not (or no longer) among the active paired devices.
    #[error("device `{0}` is not paired with this bridge or was revoked")]
    NotPaired(DeviceId),
    /// A field did not decode, the signature did not verify, or the device's key
    /// cannot agree on a secret.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
}

/// Checks a `link_hello`: the device must be paired, not revoked, and its signature
/// valid. Returns the `link_accept` to send and the open link; a refusal is also
/// recorded in [`LinkContext::refusals`].
pub fn accept(ctx: &LinkContext, hello: &LinkHello) -> Result<(LinkAccept, OpenLink), LinkRefused> {
    check_hello(ctx, hello).inspect_err(|reason| ctx.refuse(&hello.device_id, "a link", reason))
}

fn check_hello(ctx: &LinkContext, hello: &LinkHello) -> Result<(LinkAccept, OpenLink), LinkRefused> {
    let device = ctx.devices.active(&hello.device_id).ok_or_else(|| LinkRefused::NotPaired(hello.device_id.clone()))?;
    // Version 3: the device's signed ephemeral key meets a fresh one of the bridge's,
    // which is dropped (zeroized) inside `accept_hello`; the keys are forward-secret.
    let (accept, keys) = accept_hello(&ctx.identity, &device, hello)?;
    Ok((
        accept,
        OpenLink { ctx: ctx.clone(), device_id: hello.device_id.clone(), channel: Channel::bridge_side(&keys, "link") },
    ))
}

/// The app's X25519 key for one session (`app_pubkey` of `session_request`,
/// `session_resume` and `attach_external`): what the link attaches to those messages,
/// to derive the session's keys when the reply says which session it follows.
type AppKey = [u8; 32];

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
        let OpenLink { ctx, device_id, channel } = self;
        let Channel { sealer, mut opener } = channel;
        let bridge_id = ctx.identity.public().bridge_id();
        let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound<AppKey>>(64);
        let (outbound_tx, outbound_rx) = LINK_QUEUE.open::<AppKey>();
        let mut answer = refusal::Answer::new(outbound_tx.clone());
        let signalling = outbound_tx.clone();
        let inbound = futures::stream::poll_fn(move |cx| inbound_rx.poll_recv(cx));
        let peer = Peer::Device(device_id.clone());
        let dispatcher = tokio::spawn(connection::serve(ctx.service.clone(), peer, inbound, outbound_tx));
        let sealing = tokio::spawn(seal_outgoing(ctx.clone(), device_id.clone(), sealer, outbound_rx, out));
        let mut next_id = 0u64;
        let end = loop {
            let Some(envelope) = controls.recv().await else { break LinkEnd::Closed };
            // Revocation takes effect from the next message on.
            let Some(current) = ctx.devices.active(&device_id) else {
                let reason = format!("device `{device_id}` was revoked");
                ctx.refuse(&device_id, "a control message", &reason);
                break LinkEnd::Revoked(reason);
            };
            let counter = control_counter(&envelope.body);
            let mut refuse = |id: Option<String>, reason: RefusalReason, detail: String| {
                ctx.refuse(&device_id, "a control message", &detail);
                answer.refused(id, reason, counter, &detail);
            };
            if envelope.device_id != device_id {
                refuse(None, RefusalReason::BadSignature, format!("it names device `{}`", envelope.device_id));
                continue;
            }
            if let Err(e) = verify_control(&current, bridge_id.as_str(), &envelope) {
                refuse(None, RefusalReason::BadSignature, e.to_string());
                continue;
            }
            let bytes = match open_control(&mut opener, bridge_id.as_str(), &envelope) {
                Ok(bytes) => bytes,
                Err(e @ CryptoError::Replayed { .. }) => {
                    refuse(None, RefusalReason::Replayed, e.to_string());
                    continue;
                }
                Err(e) => {
                    refuse(None, RefusalReason::BadSeal, e.to_string());
                    continue;
                }
            };
            // It opened: the device sent it, so what is wrong with it is answered as
            // on the local socket (invalid_message), naming its id.
            let value = match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => v,
                Err(e) => {
                    ctx.refuse(&device_id, "a control message", format!("not JSON: {e}"));
                    answer.error(None, format!("the control message is not JSON: {e}"));
                    continue;
                }
            };
            let inbound = match with_app_key(connection::parse(value), &mut next_id) {
                Ok(Some(inbound)) => inbound,
                Ok(None) => continue,
                Err(reason) => {
                    ctx.refuse(&device_id, "a control message", &reason);
                    answer.error(reason.id.clone(), reason.to_string());
                    continue;
                }
            };
            // The LAN fast path's signalling is answered here: it needs the link's device.
            let inbound = match inbound {
                Inbound::Control { control: Control { id, message: ControlMessage::RtcOffer(offer) }, .. } => {
                    let reply = match ctx.rtc.answer(&ctx, &device_id, &offer.sdp) {
                        Ok(sdp) => Reply::ok(id, ReplyResult::RtcAnswer { sdp }),
                        Err((code, message)) => Reply::error(id, code, message),
                    };
                    if signalling.send(Outbound::Message(BridgeMessage::Reply(reply))).await.is_err() {
                        break LinkEnd::Closed;
                    }
                    continue;
                }
                inbound => inbound,
            };
            if let Err(mismatch) = refusal::same_session(&inbound, envelope.session_id.as_ref()) {
                let id = match &inbound {
                    Inbound::Control { control, .. } => control.id.clone(),
                    Inbound::Malformed(_) => None,
                };
                refuse(id, RefusalReason::SessionMismatch, mismatch);
                continue;
            }
            if inbound_tx.send(inbound).await.is_err() {
                break LinkEnd::Closed;
            }
        };
        drop(inbound_tx);
        // A device whose link ended shows nothing any more (docs/control-messages.md, `presence`).
        ctx.service.push_policy().forget_presence(&device_id);
        dispatcher.abort();
        sealing.abort();
        end
    }
}

/// Why the link refused a message that would make it follow a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message_type} without a valid app_pubkey")]
struct NoAppKey {
    /// The message's `type`.
    message_type: String,
    /// The message's `id`, when it had one.
    id: Option<String>,
}

/// Attaches the app's key to a message that makes the link follow a session, which is
/// refused without a valid one. Such a message without an `id` gets one (`link-N`),
/// so the device can tell which reply answers it.
fn with_app_key(inbound: Option<Inbound<AppKey>>, next_id: &mut u64) -> Result<Option<Inbound<AppKey>>, NoAppKey> {
    let mut control = match inbound {
        Some(Inbound::Control { control, .. }) => control,
        Some(Inbound::Malformed(Malformed::Control {
            error: ControlError::InvalidField { message_type, field, .. },
            id,
        })) if field == "app_pubkey" => return Err(NoAppKey { message_type, id }),
        other => return Ok(other),
    };
    let app_pubkey = match &control.message {
        ControlMessage::SessionRequest(m) => &m.app_pubkey,
        ControlMessage::SessionResume(m) => &m.app_pubkey,
        ControlMessage::AttachExternal(m) => &m.app_pubkey,
        ControlMessage::TerminalOpen(m) => &m.app_pubkey,
        ControlMessage::TerminalAttach(m) => &m.app_pubkey,
        _ => return Ok(Some(control.into())),
    };
    let Ok(app_key) = b64url_array::<32>("app_pubkey", app_pubkey) else {
        return Err(NoAppKey { message_type: control.message.message_type().to_owned(), id: control.id.clone() });
    };
    control.id.get_or_insert_with(|| {
        *next_id += 1;
        format!("link-{next_id}")
    });
    Ok(Some(Inbound::Control { control, attach: Some(app_key) }))
}

/// Messages read ahead from the dispatcher's queue to find chunks to join.
const COALESCE_WINDOW: usize = 256;

/// Joins `next` into `message` when both are chunks of one streamed `text`/`thinking`
/// message of the same session and replay flag and `next` continues `message` (an append
/// where it ends, or a snapshot): the joined chunk carries the text of both and the
/// header (`seq`, `ts`) of `next`. Nothing is lost (docs/block-protocol.md: "the bridge
/// may merge the chunks of one id"), and since nothing is queued between them no block
/// changes its position. Gives `next` back when they do not join.
// The message given back is moved, not boxed: a box would allocate on every join.
#[allow(clippy::result_large_err)]
pub fn coalesce(message: &mut BridgeMessage, next: BridgeMessage) -> Result<(), BridgeMessage> {
    let (
        BridgeMessage::Block { session_id, block, replay },
        BridgeMessage::Block { session_id: next_session, replay: next_replay, .. },
    ) = (&mut *message, &next)
    else {
        return Err(next);
    };
    if session_id != next_session || replay != next_replay {
        return Err(next);
    }
    let BridgeMessage::Block { session_id, block: next_block, replay } = next else { unreachable!("matched above") };
    block.join(next_block).map_err(|block| BridgeMessage::Block { session_id, block, replay })
}

/// Joins the queued chunks that continue `queued` into it ([`coalesce`]), with their
/// queue room; how many were joined.
fn coalesce_ahead(queued: &mut Queued<AppKey>, ahead: &mut std::collections::VecDeque<Queued<AppKey>>) -> u64 {
    let Outbound::Message(message) = &mut queued.message else { return 0 };
    let mut joined = 0;
    let mut rooms = Vec::new();
    while let Some(Outbound::Message(_)) = ahead.front().map(|q| &q.message) {
        let Some((Outbound::Message(next), room)) = ahead.pop_front().map(Queued::into_parts) else {
            unreachable!("checked above")
        };
        match coalesce(message, next) {
            Ok(()) => {
                joined += 1;
                rooms.push(room);
            }
            Err(next) => {
                ahead.push_front(Queued::from_parts(Outbound::Message(next), room));
                break;
            }
        }
    }
    for room in rooms {
        queued.absorb(room);
    }
    joined
}

/// Seals the connection loop's messages for the device. While the transport keeps up,
/// one message is read and sent at a time; when it falls behind (sealing, the socket),
/// the messages that queued meanwhile are read ahead and the chunks of one streamed
/// message that follow each other are joined into one (counted in `coalesced`, when
/// given) — so a slow link receives fewer, larger chunks and no text is dropped.
async fn seal_outgoing(
    ctx: LinkContext,
    device_id: DeviceId,
    link_sealer: Sealer,
    mut messages: OutboundReceiver<AppKey>,
    out: mpsc::Sender<RelayFrame>,
) {
    let coalesced = ctx.coalesce_chunks.then(|| ctx.coalesced.clone());
    let mut sealing = Sealing { identity: ctx.identity, device_id, link_sealer, sessions: HashMap::new() };
    // Messages read ahead keep their queue room until sealed and handed on.
    let mut ahead: std::collections::VecDeque<Queued<AppKey>> = std::collections::VecDeque::new();
    loop {
        if ahead.is_empty() {
            match messages.recv_queued().await {
                Some(m) => ahead.push_back(m),
                None => break,
            }
        }
        if let Some(counter) = &coalesced {
            while ahead.len() < COALESCE_WINDOW {
                match messages.try_recv_queued() {
                    Some(m) => ahead.push_back(m),
                    None => break,
                }
            }
            let Some(mut message) = ahead.pop_front() else { continue };
            counter.fetch_add(coalesce_ahead(&mut message, &mut ahead), std::sync::atomic::Ordering::Relaxed);
            ahead.push_front(message);
        }
        let Some(queued) = ahead.pop_front() else { continue };
        // The room is given back once the transport took the sealed frame.
        let (message, _room) = queued.into_parts();
        let Some(frame) = sealing.frame(message) else { continue };
        if out.send(frame).await.is_err() {
            return;
        }
    }
}

/// What sealing for one device keeps: the link's sealer for replies and one sealer
/// per attached session for its blocks.
struct Sealing {
    identity: Arc<Identity>,
    device_id: DeviceId,
    link_sealer: Sealer,
    sessions: HashMap<SessionId, Sealer>,
}

impl Sealing {
    /// The frame that carries `message`, or `None` (logged) when it cannot be sealed.
    fn frame(&mut self, message: Outbound<AppKey>) -> Option<RelayFrame> {
        match message {
            Outbound::Attached { reply, session_id, attach } => {
                let attach = self.attach(session_id, attach);
                self.reply(reply, attach)
            }
            Outbound::Message(BridgeMessage::Reply(reply)) => self.reply(reply, None),
            Outbound::Message(BridgeMessage::Block { session_id, block, replay }) => {
                self.block(session_id, block, replay)
            }
            Outbound::Message(BridgeMessage::ReplayDone { session_id, last_seq }) => {
                self.replay_done(session_id, last_seq)
            }
            Outbound::Message(BridgeMessage::TerminalOutput(output)) => {
                let routing = output.terminal_id.routing_id();
                self.sealed(routing, terminal::OUTPUT_BLOCK_TYPE, &output)
            }
            Outbound::Message(BridgeMessage::TerminalExit(exit)) => {
                let routing = exit.terminal_id.routing_id();
                self.sealed(routing, terminal::EXIT_BLOCK_TYPE, &exit)
            }
        }
    }

    /// Derives the keys of a session the device now follows, from the app's key for
    /// it; the returned attachment tells the device the nonce.
    fn attach(&mut self, session_id: SessionId, app_key: AppKey) -> Option<Attach> {
        let shared = match self.identity.agree(&x25519_dalek::PublicKey::from(app_key), "app_pubkey") {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(device = %self.device_id, "no session keys: {e}");
                return None;
            }
        };
        let nonce = terminull_protocol::crypto::random_bytes::<16>();
        let keys = session_keys(&shared, session_id.as_str(), &app_key, &nonce);
        self.sessions.insert(session_id.clone(), Sealer::new(keys.bridge_to_app, "block"));
        Some(Attach { session_id, attach_nonce: b64url(&nonce) })
    }

    fn reply(&mut self, reply: Reply, attach: Option<Attach>) -> Option<RelayFrame> {
        let bridge_id = self.identity.public().bridge_id();
        let device_id = &self.device_id;
        let sealed = SealedReply { reply, attach };
        let body = serde_json::to_vec(&sealed)
            .map_err(|e| CryptoError::Json { what: "reply", detail: e.to_string() })
            .and_then(|json| seal_reply(&mut self.link_sealer, bridge_id.as_str(), device_id.as_str(), &json));
        match body {
            Ok(body) => Some(RelayFrame::Reply(ReplyEnvelope { device_id: device_id.clone(), body, conn: None })),
            Err(e) => {
                tracing::error!(device = %device_id, "cannot seal a reply: {e}");
                None
            }
        }
    }

    /// A `replay_done`, sealed in the session's block sequence so the relay cannot
    /// make one up (docs/encryption.md#sealed-replay_done).
    fn replay_done(&mut self, session_id: SessionId, last_seq: Option<u64>) -> Option<RelayFrame> {
        let device_id = &self.device_id;
        let Some(sealer) = self.sessions.get_mut(&session_id) else {
            tracing::warn!(device = %device_id, session = %session_id, "a replay_done for a session this link has no keys for; not sent");
            return None;
        };
        match seal_replay_done(sealer, &session_id, last_seq) {
            Ok(frame) => Some(RelayFrame::ReplayDone(frame)),
            Err(e) => {
                tracing::error!(device = %device_id, "cannot seal a replay_done: {e}");
                None
            }
        }
    }

    /// A terminal's output or exit notice, sealed as a `block` envelope of the
    /// terminal's keys (docs/terminals.md): the same counters and batching as blocks.
    fn sealed<T: serde::Serialize>(&mut self, routing: SessionId, block_type: &str, body: &T) -> Option<RelayFrame> {
        let device_id = &self.device_id;
        let Some(sealer) = self.sessions.get_mut(&routing) else {
            tracing::warn!(device = %device_id, terminal = %routing, "terminal output this link has no keys for; not sent");
            return None;
        };
        let sealed = serde_json::to_vec(body)
            .map_err(|e| CryptoError::Json { what: "terminal output", detail: e.to_string() })
            .and_then(|json| seal_block(sealer, &routing, block_type, false, now_ts(), &json));
        match sealed {
            Ok(envelope) => Some(RelayFrame::Block(envelope)),
            Err(e) => {
                tracing::error!(device = %device_id, "cannot seal terminal output: {e}");
                None
            }
        }
    }

    fn block(&mut self, session_id: SessionId, block: Block, replay: bool) -> Option<RelayFrame> {
        let device_id = &self.device_id;
        let Some(sealer) = self.sessions.get_mut(&session_id) else {
            tracing::warn!(device = %device_id, session = %session_id, "a block for a session this link has no keys for; not sent");
            return None;
        };
        let sealed = serde_json::to_vec(&block)
            .map_err(|e| CryptoError::Json { what: "block", detail: e.to_string() })
            .and_then(|json| {
                // Live blocks carry the send time, history its original time (§1.3).
                let server_ts = if replay { block.ts } else { now_ts() };
                seal_block(sealer, &session_id, block.block_type(), replay, server_ts, &json)
            });
        match sealed {
            Ok(envelope) => Some(RelayFrame::Block(envelope)),
            Err(e) => {
                tracing::error!(device = %device_id, "cannot seal a block: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::{Block, BlockKind, StreamedText};

    use super::*;

    fn chunk(session: &str, id: &str, text: &str, done: bool, replay: bool) -> BridgeMessage {
        let kind = BlockKind::Text(StreamedText::snapshot(id, text, done));
        BridgeMessage::Block { session_id: SessionId(session.into()), block: Block::now(kind), replay }
    }

    #[test]
    fn a_message_that_follows_a_session_carries_the_app_key_and_an_id_and_is_refused_without_a_valid_key() {
        let key = b64url(&[7u8; 32]);
        let request = |key: serde_json::Value| {
            let mut value = serde_json::json!({"type": "session_request", "agent": "echo", "cwd": "/"});
            if !key.is_null() {
                value["app_pubkey"] = key;
            }
            connection::parse(value)
        };
        let mut next_id = 0;
        let Ok(Some(Inbound::Control { control, attach: Some(app_key) })) =
            with_app_key(request(key.clone().into()), &mut next_id)
        else {
            panic!("a session_request with a valid key is dispatched")
        };
        assert_eq!((control.id.as_deref(), app_key), (Some("link-1"), [7u8; 32]));
        for bad in [serde_json::Value::Null, "k".into()] {
            let refused = with_app_key(request(bad), &mut next_id).unwrap_err();
            assert_eq!(refused.to_string(), "session_request without a valid app_pubkey");
        }
        let listing = connection::parse(serde_json::json!({"type": "list_sessions"}));
        let Ok(Some(Inbound::Control { control, attach: None })) = with_app_key(listing, &mut next_id) else {
            panic!("other messages pass as they are")
        };
        assert_eq!(control.id, None);
    }

    fn append(session: &str, id: &str, offset: u64, text: &str, done: bool, replay: bool) -> BridgeMessage {
        let kind = BlockKind::Text(StreamedText::append(id, offset, text, done));
        BridgeMessage::Block { session_id: SessionId(session.into()), block: Block::now(kind), replay }
    }

    fn text_of(message: &BridgeMessage) -> StreamedText {
        match message {
            BridgeMessage::Block { block: Block { kind: BlockKind::Text(t), .. }, .. } => t.clone(),
            other => panic!("not a text block: {other:?}"),
        }
    }

    #[test]
    fn only_chunks_that_continue_each_other_are_joined() {
        let mut first = append("s", "a", 0, "He", false, false);
        assert!(coalesce(&mut first, append("s", "a", 2, "llo", false, false)).is_ok());
        assert!(coalesce(&mut first, append("s", "a", 5, "", true, false)).is_ok());
        assert_eq!(text_of(&first), StreamedText::append("a", 0, "Hello", true));
        // Nothing joins a closed message, and only a piece where the text ends joins.
        assert!(coalesce(&mut first, append("s", "a", 5, "!", false, false)).is_err());
        let mut open = append("s", "a", 0, "He", false, false);
        assert!(coalesce(&mut open, append("s", "a", 3, "lo", false, false)).is_err());
        // A snapshot replaces what it follows (a full-text chunk of an old adapter).
        assert!(coalesce(&mut open, chunk("s", "a", "Hello", false, false)).is_ok());
        assert_eq!(text_of(&open), StreamedText::snapshot("a", "Hello", false));
        // Another id, session or replay flag, or another kind of message, is kept.
        for other in [
            append("s", "b", 5, "x", false, false),
            append("t", "a", 5, "x", false, false),
            append("s", "a", 5, "x", false, true),
            BridgeMessage::ReplayDone { session_id: SessionId("s".into()), last_seq: None },
        ] {
            assert!(coalesce(&mut open, other).is_err());
        }
    }

    #[test]
    fn a_joined_chunk_takes_the_header_of_the_last_one() {
        let mut first = append("s", "a", 0, "a", false, false);
        let mut next = append("s", "a", 1, "b", false, false);
        if let BridgeMessage::Block { block, .. } = &mut next {
            block.seq = Some(9);
        }
        coalesce(&mut first, next).unwrap();
        let BridgeMessage::Block { block, .. } = &first else { unreachable!() };
        assert_eq!(block.seq, Some(9));
    }
}
