//! The one connection loop every transport drives: the local socket ([`crate::local`]),
//! the in-process client ([`crate::daemon_client`]) and each device's encrypted link
//! ([`crate::link`], carried by the relay or the LAN server).
//!
//! A transport parses what it receives once, at its edge, into [`Inbound`] values
//! (with [`parse`]), and hands them to [`serve`] with what it knows about the other
//! end ([`Peer`], and per message the data it needs to attach a session). The loop
//! hands each control message to the one dispatcher, [`Service::dispatch`], and sends
//! back [`Outbound`] values: the replies, and the blocks of every session the
//! connection follows — in order per session, each reply before the blocks its
//! message causes — and the output of every terminal it follows ([`crate::terminal`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde_json::Value;
use terminull_protocol::blocks::Block;
use terminull_protocol::control::{self, BridgeMessage, Control, ControlError, ControlMessage, Reply, ReplyErrorCode};
use terminull_protocol::ids::{DeviceId, SessionId};
use terminull_protocol::ndjson::LineError;
use terminull_protocol::terminal::TerminalId;
use tokio::sync::{RwLock, broadcast};
use tokio::task::JoinSet;

use crate::service::Service;
use crate::session::{Following, LiveBlock, SessionHandle};

mod queue;

pub use queue::{OutboundQueue, OutboundReceiver, OutboundSender, QueueClosed, Queued, Room, TrySendError, json_len};

/// Who is at the other end of a connection, for the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// A client of the local socket or an in-process client.
    Local,
    /// A paired device, over its encrypted link.
    Device(DeviceId),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Local => f.write_str("a local client"),
            Peer::Device(id) => write!(f, "device {id}"),
        }
    }
}

/// Input a transport received that is not a control message the bridge can act on.
/// It is answered `invalid_message`; nothing is dispatched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// The line is not JSON (or too long): the local socket's framing.
    #[error(transparent)]
    Line(#[from] LineError),
    /// A known message type with a missing or malformed field (or not a JSON object).
    #[error("{error}")]
    Control {
        /// The message's `id`, when it had a readable one, so the reply can name it.
        id: Option<String>,
        /// What is wrong, naming the field.
        error: ControlError,
    },
}

impl Malformed {
    /// The reply that answers it.
    fn reply(&self) -> Reply {
        let id = match self {
            Malformed::Line(_) => None,
            Malformed::Control { id, .. } => id.clone(),
        };
        Reply::error(id, ReplyErrorCode::InvalidMessage, self.to_string())
    }
}

/// What a transport hands the loop. `A` is what it attaches to a message that makes
/// the connection follow a session (the link: the app's key for the session's
/// encryption); transports without encryption use `()`.
#[derive(Debug)]
pub enum Inbound<A = ()> {
    /// A control message to dispatch.
    Control {
        /// The message.
        control: Control,
        /// Returned with the reply when the message makes the connection follow a
        /// session ([`Outbound::Attached`]).
        attach: Option<A>,
    },
    /// Input that is not a control message: answered `invalid_message`.
    Malformed(Malformed),
}

impl<A> From<Control> for Inbound<A> {
    fn from(control: Control) -> Self {
        Inbound::Control { control, attach: None }
    }
}

impl<A> From<Malformed> for Inbound<A> {
    fn from(malformed: Malformed) -> Self {
        Inbound::Malformed(malformed)
    }
}

/// Decodes one JSON value a transport received. An unknown `type` is ignored and
/// logged (`None`: no reply, as the spec says); a bad field is [`Malformed`], naming
/// the field.
pub fn parse<A>(value: Value) -> Option<Inbound<A>> {
    let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
    match control::parse(value) {
        Ok(control) => Some(control.into()),
        Err(e @ ControlError::UnknownType { .. }) => {
            tracing::info!("ignored: {e}");
            None
        }
        Err(error) => Some(Malformed::Control { id, error }.into()),
    }
}

/// What the loop sends back through the transport.
#[derive(Debug)]
pub enum Outbound<A = ()> {
    /// A reply, a block or a `replay_done`, as the client receives it.
    Message(BridgeMessage),
    /// The reply to a message that carried attach data and made the connection follow
    /// `session_id`. It is queued before any block of that session, so the transport
    /// can set the session up (the link derives its keys) before the first block.
    Attached {
        /// The reply.
        reply: Reply,
        /// The session now followed.
        session_id: SessionId,
        /// The data the message carried ([`Inbound::Control::attach`]).
        attach: A,
    },
}

impl<A> Outbound<A> {
    /// The message as a client without encryption receives it.
    pub fn into_message(self) -> BridgeMessage {
        match self {
            Outbound::Message(message) => message,
            Outbound::Attached { reply, .. } => BridgeMessage::Reply(reply),
        }
    }
}

/// Orders one followed session's output on one connection: the dispatcher holds it
/// (write) from handing a message for that session to the service until its reply is
/// queued; the session's forwarder holds it (read) for each block it queues. So the
/// reply to a `user_message`, `interrupt` or `permission_response` always comes before
/// the blocks it causes, although the two are sent by different tasks.
type OrderGate = Arc<RwLock<()>>;

/// The session a message is about, if any: its gate must be held while it is handled.
fn session_of(message: &ControlMessage) -> Option<&SessionId> {
    match message {
        ControlMessage::SessionResume(m) => Some(&m.session_id),
        ControlMessage::UserMessage(m) => Some(&m.session_id),
        ControlMessage::Interrupt(m) => Some(&m.session_id),
        ControlMessage::PermissionResponse(m) => Some(&m.session_id),
        ControlMessage::StopSession(m) => Some(&m.session_id),
        ControlMessage::SetSessionOptions(m) => Some(&m.session_id),
        ControlMessage::GetUsage(m) => Some(&m.session_id),
        ControlMessage::SlashCommand(m) => Some(&m.session_id),
        ControlMessage::ContinueInTerminal(m) => Some(&m.session_id),
        ControlMessage::RenameSession(m) => Some(&m.session_id),
        ControlMessage::ArchiveSession(m) => Some(&m.session_id),
        ControlMessage::DeleteSession(m) => Some(&m.session_id),
        ControlMessage::SessionRequest(_)
        | ControlMessage::ListSessions(_)
        | ControlMessage::ListAgents(_)
        | ControlMessage::ListModels(_)
        | ControlMessage::ScanExternalSessions(_)
        | ControlMessage::AttachExternal(_)
        | ControlMessage::PushSettings(_)
        | ControlMessage::Presence(_)
        | ControlMessage::SearchSessions(_)
        // Answered at once; they cause no block.
        | ControlMessage::Files(_)
        | ControlMessage::Git(_)
        // Answered by the device's link (crate::rtc).
        | ControlMessage::RtcOffer(_) => None,
        ControlMessage::TerminalOpen(_)
        | ControlMessage::TerminalAttach(_)
        | ControlMessage::TerminalInput(_)
        | ControlMessage::TerminalResize(_)
        | ControlMessage::TerminalClose(_)
        | ControlMessage::ListTerminals(_) => None,
    }
}

/// Handles one control message from `peer`: `push_settings` and `presence` are about
/// the device that sends them, so they are answered here with its id; the rest go to
/// [`Service::dispatch`] (which answers those two `not_supported` for a local client).
async fn dispatch_from(service: &Service, peer: &Peer, control: Control) -> crate::service::Dispatched {
    let accepted = |id| crate::service::Dispatched::reply(Reply::ok(id, control::ReplyResult::Accepted {}));
    match (&control.message, peer) {
        (ControlMessage::PushSettings(m), Peer::Device(device)) => {
            service.push_policy().set_kinds(device, &m.kinds);
            accepted(control.id)
        }
        (ControlMessage::Presence(m), Peer::Device(device)) => {
            service.push_policy().set_presence(device, &m.visible_session_ids);
            accepted(control.id)
        }
        _ => {
            let origin = match peer {
                Peer::Local => terminull_protocol::session_list::SessionOrigin::Terminal,
                Peer::Device(_) => terminull_protocol::session_list::SessionOrigin::App,
            };
            service.dispatch_from(control, Some(origin)).await
        }
    }
}

/// Serves one connection: every inbound message goes to the dispatcher; replies and
/// followed sessions' blocks go to `out`, in order per session, each reply before the
/// blocks its message causes. Returns when `inbound` ends (or `out` closes); the
/// connection's forwarders stop with it.
pub async fn serve<A: Send + 'static>(
    service: Service,
    peer: Peer,
    mut inbound: impl Stream<Item = Inbound<A>> + Unpin,
    out: OutboundSender<A>,
) {
    let mut followers: JoinSet<()> = JoinSet::new();
    let mut gates: HashMap<SessionId, OrderGate> = HashMap::new();
    // One follower per terminal: a new attach replaces the previous one.
    let mut terminals: HashMap<TerminalId, tokio::task::AbortHandle> = HashMap::new();
    while let Some(item) = inbound.next().await {
        let (control, attach) = match item {
            Inbound::Control { control, attach } => (control, attach),
            Inbound::Malformed(malformed) => {
                if let Malformed::Line(e) = &malformed {
                    tracing::warn!("{peer} sent a bad line: {e}");
                }
                if out.send(Outbound::Message(BridgeMessage::Reply(malformed.reply()))).await.is_err() {
                    break;
                }
                continue;
            }
        };
        if crate::terminal::is_terminal_control(&control.message) {
            let (reply, follow) = service.terminals().dispatch(control, |s| service.session_cwd(s));
            let reply = match (&follow, attach) {
                (Some(follow), Some(attach)) => {
                    Outbound::Attached { reply, session_id: follow.terminal_id().routing_id(), attach }
                }
                _ => Outbound::Message(BridgeMessage::Reply(reply)),
            };
            if out.send(reply).await.is_err() {
                break;
            }
            if let Some(follow) = follow {
                let out = out.clone();
                let id = follow.terminal_id().clone();
                let task = followers.spawn(follow.run(move |message| {
                    let out = out.clone();
                    async move { out.send(Outbound::Message(message)).await.map_err(|_| ()) }
                }));
                if let Some(previous) = terminals.insert(id, task) {
                    previous.abort();
                }
            }
            continue;
        }
        let gate = session_of(&control.message).and_then(|id| gates.get(id)).cloned();
        let held = match gate {
            Some(gate) => Some(gate.write_owned().await),
            None => None,
        };
        let mut dispatched = dispatch_from(&service, &peer, control).await;
        let mut guard = dispatched.guard.take();
        if let (Some(guard), Peer::Local) = (guard.as_mut(), &peer) {
            guard.reap_when_left();
        }
        let reply = match (&dispatched.follow, attach) {
            (Some((session, _)), Some(attach)) => {
                Outbound::Attached { reply: dispatched.reply, session_id: session.id.clone(), attach }
            }
            _ => Outbound::Message(BridgeMessage::Reply(dispatched.reply)),
        };
        if out.send(reply).await.is_err() {
            break;
        }
        drop(held);
        if let Some((session, following)) = dispatched.follow {
            let gate = gates.entry(session.id.clone()).or_default().clone();
            let forwarder = Forwarder { session, gate, peer: peer.clone(), out: out.clone() };
            followers.spawn(async move {
                // Following until the forwarder ends (the connection left, or the session).
                let _guard = guard;
                forwarder.run(following).await;
            });
        }
    }
    followers.abort_all();
}

/// Sends one followed session's blocks to one connection.
struct Forwarder<A> {
    session: SessionHandle,
    gate: OrderGate,
    peer: Peer,
    out: OutboundSender<A>,
}

/// The connection went away.
struct Gone;

impl<A: Send + 'static> Forwarder<A> {
    async fn send(&self, message: BridgeMessage) -> Result<(), Gone> {
        self.out.send(Outbound::Message(message)).await.map_err(|_| Gone)
    }

    async fn send_block(&self, block: Block, replay: bool) -> Result<(), Gone> {
        self.send(BridgeMessage::Block { session_id: self.session.id.clone(), block, replay }).await
    }

    /// A live block, after any reply the dispatcher is sending for this session.
    async fn send_live(&self, block: Block) -> Result<(), Gone> {
        let _order = self.gate.read().await;
        self.send_block(block, false).await
    }

    /// Sends the backlog, `replay_done`, then live blocks; after a lag, resumes from
    /// the last block sent so nothing is lost or repeated.
    async fn run(self, following: Following) {
        let _ = self.forward(following).await;
    }

    async fn forward(&self, following: Following) -> Result<(), Gone> {
        let Following { backlog, more, history, mut live } = following;
        // Every block up to `covered` was sent (or a later one sent replaces it).
        let mut covered = 0u64;
        let last_sent = self.send_history(backlog, more, &mut covered, false).await?;
        let session_id = self.session.id.clone();
        self.send(BridgeMessage::ReplayDone { session_id, last_seq: last_sent }).await?;
        for block in history {
            self.send_block(block, true).await?;
        }
        loop {
            match live.recv().await {
                Ok(LiveBlock::Inline(block)) => {
                    let seq = block.seq.unwrap_or(0);
                    if seq != 0 && seq <= covered {
                        continue;
                    }
                    covered = seq.max(covered);
                    self.send_live(block).await?;
                }
                Ok(LiveBlock::Stored { seq }) => {
                    if seq <= covered {
                        continue;
                    }
                    // Read from history, with whatever came after it.
                    let page = self.session.read_page(covered).await.map_err(|_| Gone)?;
                    self.send_history(page.blocks, page.more, &mut covered, true).await?;
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    let (peer, session) = (&self.peer, &self.session.id);
                    tracing::warn!(%session, "{peer} fell {missed} blocks behind; resuming from seq {covered}");
                    let caught_up = self.session.catch_up(covered).await.map_err(|_| Gone)?;
                    live = caught_up.live;
                    self.send_history(caught_up.backlog, caught_up.more, &mut covered, true).await?;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            }
        }
    }

    /// Sends `blocks`, a page of history, and the pages after it while `more` says
    /// there are some, one page in memory at a time; `live` sends them as live blocks
    /// (after any reply being sent). Raises `covered` to what they cover; returns the
    /// `seq` of the last block sent.
    async fn send_history(
        &self,
        mut blocks: Vec<Block>,
        mut more: Option<u64>,
        covered: &mut u64,
        live: bool,
    ) -> Result<Option<u64>, Gone> {
        let mut last_sent = None;
        loop {
            for block in blocks {
                if let Some(seq) = block.seq {
                    *covered = seq.max(*covered);
                    last_sent = Some(seq);
                }
                if live {
                    self.send_live(block).await?;
                } else {
                    self.send_block(block, false).await?;
                }
            }
            let Some(after) = more else { return Ok(last_sent) };
            *covered = after.max(*covered);
            let page = self.session.read_page(after).await.map_err(|_| Gone)?;
            (blocks, more) = (page.blocks, page.more);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use terminull_protocol::control::ReplyOutcome;

    use super::*;

    #[test]
    fn a_bad_field_is_answered_naming_the_field_and_the_id_and_an_unknown_type_is_ignored() {
        assert!(parse::<()>(json!({"id": "c0", "type": "no_such_message"})).is_none());
        let Some(Inbound::Malformed(malformed)) = parse::<()>(json!({"id": "c1", "type": "interrupt"})) else {
            panic!("an interrupt without a session is malformed")
        };
        let reply = malformed.reply();
        assert_eq!(reply.id.as_deref(), Some("c1"));
        let ReplyOutcome::Error { error } = reply.outcome else { panic!("{reply:?}") };
        assert_eq!(error.code, ReplyErrorCode::InvalidMessage);
        assert!(error.message.contains("`session_id`"), "{}", error.message);
        let Some(Inbound::Control { control, attach: None }) =
            parse::<()>(json!({"type": "interrupt", "session_id": "s"}))
        else {
            panic!("a valid interrupt")
        };
        assert_eq!(session_of(&control.message), Some(&SessionId("s".into())));
    }
}
