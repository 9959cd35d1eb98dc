//! The LAN server's second transport: a WebRTC data channel, for the web app loaded
//! from the relay's https origin (which may not open `ws://` to the LAN: mixed
//! content). docs/web-client.md, "The LAN as a data channel".
//!
//! The device offers through its link (`rtc_offer`, sealed like every control
//! message: only a paired device can offer, and only it learns the answer). The
//! bridge answers as an ICE-lite peer ([`answer_offer`]): one UDP socket on its LAN
//! address per offer, one host candidate, its DTLS fingerprint. When the page opens
//! the channel, the channel carries exactly what a LAN WebSocket carries
//! (`challenge` → `auth` → `relay_status` → `link_hello` → sealed frames), served by
//! the same [`super::serve_device`], which accepts on it only the device that offered.
//!
//! Framing: a data channel message is at most 64 KiB for some peers, a frame up to
//! [`super::LanConfig::max_message_bytes`]; so every frame travels as binary pieces
//! ([`terminull_protocol::rtc::pieces`]).
//!
//! Bounds: [`MAX_PEERS`] data channels at once, [`MAX_PEERS_PER_DEVICE`] per device; a
//! peer whose channel is not open within [`OPEN_TIMEOUT`] is dropped; a reassembled
//! frame is at most the LAN server's message limit; what waits for the channel is the
//! LAN connection's own bounded queue (pieces are taken from it only when SCTP
//! accepts them). ICE consent checks (str0m's) tell when the path is gone: the peer
//! ends and the link with it; the device resumes by `seq` wherever it reconnects.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ws::Message;
use futures::channel::mpsc;
use futures::{Sink, Stream, StreamExt};
use str0m::change::SdpOffer;
use str0m::channel::ChannelId;
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig};
use terminull_protocol::control::ReplyErrorCode;
use terminull_protocol::ids::DeviceId;
use terminull_protocol::rtc::{DATA_CHANNEL_LABEL, Reassembly, SdpError, check_offer, pieces};
use tokio::net::UdpSocket;

use super::Lan;
use crate::link::LinkContext;

/// Data channels open (or being opened) at once, in all.
pub const MAX_PEERS: usize = 32;
/// Data channels open (or being opened) at once per device.
pub const MAX_PEERS_PER_DEVICE: usize = 4;
/// Time from the answer to the channel's opening.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// A peer that sends nothing for this long is gone (browsers send ICE consent checks
/// every few seconds; an ICE-lite end sends none of its own to find out).
pub const SILENCE_TIMEOUT: Duration = Duration::from_secs(20);
/// Messages from the channel waiting for the connection's read loop.
const INBOUND_QUEUE: usize = 64;
/// Frames from the connection's queue held by the peer (the queue itself is bounded).
const OUTBOUND_HANDOFF: usize = 4;
/// The largest UDP datagram read.
const DATAGRAM: usize = 2048;

/// The running LAN server (weakly: the server owns itself) and the data channels open
/// now; the links reach it as their [`crate::link::RtcHook`]'s answer. Cheap to clone.
#[derive(Clone, Default)]
pub struct LanSlot(Arc<Mutex<Slot>>);

#[derive(Default)]
struct Slot {
    lan: Weak<Lan>,
    addr: Option<SocketAddr>,
    peers: HashMap<DeviceId, usize>,
}

impl std::fmt::Debug for LanSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.lock();
        f.debug_struct("LanSlot").field("addr", &slot.addr).field("peers", &slot.peers.len()).finish()
    }
}

impl LanSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set(&self, lan: &Arc<Lan>, addr: SocketAddr) {
        let mut slot = self.lock();
        slot.lan = Arc::downgrade(lan);
        slot.addr = Some(addr);
    }

    fn get(&self) -> Option<(Lan, SocketAddr)> {
        let slot = self.lock();
        Some((Lan::clone(&*slot.lan.upgrade()?), slot.addr?))
    }

    /// Data channels open (or being opened) now, in all.
    pub fn peers(&self) -> usize {
        self.lock().peers.values().sum()
    }

    fn admit(&self, device: &DeviceId) -> Result<PeerGuard, RtcAnswerError> {
        let mut slot = self.lock();
        let total: usize = slot.peers.values().sum();
        if total >= MAX_PEERS {
            return Err(RtcAnswerError::TooMany(format!("{MAX_PEERS} in all")));
        }
        let n = slot.peers.entry(device.clone()).or_default();
        if *n >= MAX_PEERS_PER_DEVICE {
            return Err(RtcAnswerError::TooMany(format!("{MAX_PEERS_PER_DEVICE} for this device")));
        }
        *n += 1;
        Ok(PeerGuard { slot: self.clone(), device: device.clone() })
    }
}

impl crate::link::RtcAnswer for LanSlot {
    fn answer(&self, _ctx: &LinkContext, device: &DeviceId, sdp: &str) -> Result<String, (ReplyErrorCode, String)> {
        answer_offer(self, device, sdp).map_err(|e| (e.code(), e.to_string()))
    }

    fn peers(&self) -> usize {
        LanSlot::peers(self)
    }
}

/// One admitted peer; counted until dropped.
struct PeerGuard {
    slot: LanSlot,
    device: DeviceId,
}

impl Drop for PeerGuard {
    fn drop(&mut self) {
        let mut slot = self.slot.lock();
        if let Some(n) = slot.peers.get_mut(&self.device) {
            *n -= 1;
            if *n == 0 {
                slot.peers.remove(&self.device);
            }
        }
    }
}

/// Why an `rtc_offer` was not answered; the text is what the device is told.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RtcAnswerError {
    /// The bridge runs no LAN server.
    #[error("this bridge runs no LAN server (`terminull up --lan`), so there is no LAN path to offer")]
    NoLan,
    /// The offer breaks a bound or has a candidate that is not a local host one.
    #[error("rtc_offer: {0}")]
    Sdp(#[from] SdpError),
    /// The offer is not SDP str0m accepts (no data channel, bad fingerprint…).
    #[error("rtc_offer: the SDP was refused: {0}")]
    Refused(String),
    /// Too many data channels.
    #[error("too many data channels open ({0}); close one first")]
    TooMany(String),
    /// The UDP socket could not be bound.
    #[error("binding a UDP socket on {addr}: {source}")]
    Bind {
        /// Where.
        addr: IpAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl RtcAnswerError {
    /// The reply's error code.
    pub fn code(&self) -> ReplyErrorCode {
        match self {
            RtcAnswerError::NoLan => ReplyErrorCode::NotSupported,
            RtcAnswerError::Sdp(_) | RtcAnswerError::Refused(_) => ReplyErrorCode::InvalidMessage,
            RtcAnswerError::TooMany(_) => ReplyErrorCode::Busy,
            RtcAnswerError::Bind { .. } => ReplyErrorCode::Internal,
        }
    }
}

/// The address the data channel listens on: the LAN server's when it is a specific
/// one, else this machine's address on its default route (found afresh on every
/// offer, so a new DHCP lease is announced), else loopback.
fn lan_ip(addr: SocketAddr) -> IpAddr {
    if !addr.ip().is_unspecified() {
        return addr.ip();
    }
    super::device_url(addr)
        .and_then(|url| url.strip_prefix("ws://")?.parse::<SocketAddr>().ok())
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// Answers `device`'s SDP offer: checks it, binds a UDP socket on the LAN address,
/// and starts the peer, which serves the channel once the page opens it. Returns the
/// SDP answer.
pub fn answer_offer(slot: &LanSlot, device: &DeviceId, sdp: &str) -> Result<String, RtcAnswerError> {
    let (lan, addr) = slot.get().ok_or(RtcAnswerError::NoLan)?;
    let sdp = check_offer(sdp)?;
    let offer = SdpOffer::from_sdp_string(&sdp).map_err(|e| RtcAnswerError::Refused(e.to_string()))?;
    let guard = slot.admit(device)?;
    let ip = lan_ip(addr);
    let bind = |ip| {
        let socket = std::net::UdpSocket::bind(SocketAddr::new(ip, 0))?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        Ok::<_, std::io::Error>((UdpSocket::from_std(socket)?, local))
    };
    let (socket, local) = bind(ip).map_err(|source| RtcAnswerError::Bind { addr: ip, source })?;
    let crypto = Arc::new(str0m::crypto::from_feature_flags());
    let mut rtc = RtcConfig::new().set_ice_lite(true).set_crypto_provider(crypto).build(Instant::now());
    let candidate = Candidate::host(local, "udp").map_err(|e| RtcAnswerError::Refused(e.to_string()))?;
    rtc.add_local_candidate(candidate);
    let answer = rtc.sdp_api().accept_offer(offer).map_err(|e| RtcAnswerError::Refused(e.to_string()))?;
    tracing::info!(%device, %local, "answered a data channel offer");
    let peer = Peer { lan, device: device.clone(), rtc, socket, local, remote: None, _guard: guard };
    tokio::spawn(peer.run());
    Ok(answer.to_sdp_string())
}

/// The connection's end of a data channel, as [`super::serve_device`] reads and
/// writes a WebSocket.
struct ChannelSocket {
    rx: mpsc::Receiver<Result<Message, axum::Error>>,
    tx: mpsc::Sender<Message>,
}

impl Stream for ChannelSocket {
    type Item = Result<Message, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.get_mut().rx).poll_next(cx)
    }
}

impl Sink<Message> for ChannelSocket {
    type Error = axum::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.get_mut().tx).poll_ready(cx).map_err(axum::Error::new)
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        Pin::new(&mut self.get_mut().tx).start_send(item).map_err(axum::Error::new)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.get_mut().tx).poll_flush(cx).map_err(axum::Error::new)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.get_mut().tx).poll_close(cx).map_err(axum::Error::new)
    }
}

/// One answered offer: the ICE-lite peer, its UDP socket and, once the page opens the
/// channel, the device connection served over it.
struct Peer {
    lan: Lan,
    device: DeviceId,
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    /// Where the page's datagrams last came from.
    remote: Option<SocketAddr>,
    _guard: PeerGuard,
}

/// The channel once open: its id, the connection's two ends, what waits for SCTP.
struct Open {
    id: ChannelId,
    to_connection: mpsc::Sender<Result<Message, axum::Error>>,
    from_connection: mpsc::Receiver<Message>,
    reassembly: Reassembly,
    waiting: std::collections::VecDeque<Vec<u8>>,
}

/// Why a peer ended (logged).
enum End {
    Gone(&'static str),
    Failed(String),
}

impl Peer {
    async fn run(mut self) {
        let device = self.device.clone();
        match self.drive().await {
            End::Gone(why) => tracing::info!(%device, "LAN data channel ended: {why}"),
            End::Failed(why) => tracing::warn!(%device, "LAN data channel dropped: {why}"),
        }
    }

    async fn drive(&mut self) -> End {
        let opened_by = tokio::time::Instant::now() + OPEN_TIMEOUT;
        let mut open: Option<Open> = None;
        let mut buf = vec![0u8; DATAGRAM];
        let mut stopping = self.lan.stopping.clone();
        let mut heard = tokio::time::Instant::now();
        loop {
            let timeout = loop {
                match self.rtc.poll_output() {
                    Ok(Output::Timeout(t)) => break t,
                    Ok(Output::Transmit(t)) => {
                        // UDP: a datagram that cannot go now is lost, as on the wire.
                        let _ = self.socket.try_send_to(&t.contents, t.destination);
                    }
                    Ok(Output::Event(event)) => {
                        if let Some(end) = self.event(event, &mut open) {
                            return end;
                        }
                    }
                    Err(e) => return End::Failed(e.to_string()),
                }
            };
            if !self.rtc.is_alive() {
                return End::Gone("the peer connection closed");
            }
            if let Some(open) = &mut open
                && let Err(e) = self.flush(open)
            {
                return End::Failed(e);
            }
            let can_take = open.as_ref().is_some_and(|o| o.waiting.is_empty());
            let wake = tokio::time::Instant::from_std(timeout);
            tokio::select! {
                received = self.socket.recv_from(&mut buf) => {
                    let (n, source) = match received {
                        Ok(r) => r,
                        Err(e) => return End::Failed(format!("reading UDP on {}: {e}", self.local)),
                    };
                    self.remote = Some(source);
                    heard = tokio::time::Instant::now();
                    let Ok(contents) = buf[..n].try_into() else { continue };
                    let input = Input::Receive(Instant::now(), Receive {
                        proto: Protocol::Udp,
                        source,
                        destination: self.local,
                        contents,
                    });
                    if let Err(e) = self.rtc.handle_input(input) {
                        tracing::debug!(device = %self.device, "a datagram from {source} was not taken: {e}");
                    }
                }
                () = tokio::time::sleep_until(wake) => {
                    if let Err(e) = self.rtc.handle_input(Input::Timeout(Instant::now())) {
                        return End::Failed(e.to_string());
                    }
                }
                message = async { open.as_mut()?.from_connection.next().await }, if can_take => {
                    let Some(open) = open.as_mut() else { continue };
                    match message {
                        Some(Message::Text(text)) => open.waiting.extend(pieces(text.as_bytes())),
                        // Liveness is ICE's (consent checks): a ping is answered here.
                        Some(Message::Ping(p)) => { let _ = open.to_connection.try_send(Ok(Message::Pong(p))); }
                        Some(Message::Close(_)) | None => {
                            self.rtc.disconnect();
                            return End::Gone("the connection ended");
                        }
                        Some(_) => {}
                    }
                }
                () = tokio::time::sleep_until(heard + SILENCE_TIMEOUT) => {
                    return End::Gone("nothing heard from the page for a while (the LAN path went away)");
                }
                () = tokio::time::sleep_until(opened_by), if open.is_none() => {
                    return End::Gone("the page did not open the channel in time");
                }
                _ = stopping.wait_for(|stop| *stop) => return End::Gone("the LAN server stopped"),
            }
        }
    }

    /// Handles one event; `Some` ends the peer.
    fn event(&mut self, event: Event, open: &mut Option<Open>) -> Option<End> {
        match event {
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                Some(End::Gone("ICE disconnected (the LAN path went away)"))
            }
            Event::ChannelOpen(id, label) if open.is_none() && label == DATA_CHANNEL_LABEL => {
                let (to_connection, rx) = mpsc::channel(INBOUND_QUEUE);
                let (tx, from_connection) = mpsc::channel(OUTBOUND_HANDOFF);
                *open = Some(Open {
                    id,
                    to_connection,
                    from_connection,
                    reassembly: Reassembly::default(),
                    waiting: Default::default(),
                });
                let lan = self.lan.clone();
                let ip = self.remote.map_or(self.local.ip(), |r| r.ip());
                let config = &lan.config;
                let pending = match lan.unauthenticated.admit(
                    ip,
                    config.max_unauthenticated_per_ip,
                    config.max_unauthenticated,
                ) {
                    Ok(pending) => pending,
                    Err(_) => return Some(End::Failed("too many unauthenticated connections".into())),
                };
                let only = self.device.clone();
                tokio::spawn(async move {
                    let socket = ChannelSocket { rx, tx };
                    super::serve_device(lan, socket, ip, pending, Some(only)).await;
                });
                None
            }
            Event::ChannelData(data) => {
                let open = open.as_mut().filter(|o| o.id == data.id)?;
                match open.reassembly.push(&data.data, self.lan.config.max_message_bytes) {
                    Ok(Some(frame)) => {
                        if open.to_connection.try_send(Ok(Message::Text(frame.into()))).is_err() {
                            return Some(End::Failed(format!("more than {INBOUND_QUEUE} frames waiting")));
                        }
                        None
                    }
                    Ok(None) => None,
                    Err(e) => Some(End::Failed(e.to_string())),
                }
            }
            Event::ChannelClose(id) if open.as_ref().is_some_and(|o| o.id == id) => {
                Some(End::Gone("the page closed the channel"))
            }
            _ => None,
        }
    }

    /// Writes the pieces SCTP accepts now.
    fn flush(&mut self, open: &mut Open) -> Result<(), String> {
        let Some(mut channel) = self.rtc.channel(open.id) else { return Err("the channel is gone".into()) };
        while let Some(piece) = open.waiting.front() {
            match channel.write(true, piece) {
                Ok(true) => {
                    open.waiting.pop_front();
                }
                Ok(false) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }
}
