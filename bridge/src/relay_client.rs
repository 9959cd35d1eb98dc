//! The bridge's connection to a relay: proves its key, registers its resumable
//! sessions, agents and devices, then serves every device connection the relay
//! forwards through [`crate::link`], answers pairing requests, republishes the
//! device list when it changes and sends notifications. On any failure it
//! reconnects with exponential backoff and jitter.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use terminull_net::transport as net;
use terminull_protocol::crypto::envelope::{push_aad, relay_auth_bytes, sign_batch};
use terminull_protocol::crypto::{b64, from_b64url};
use terminull_protocol::ids::SessionId;
use terminull_protocol::relay::{
    BlockEnvelope, CloseConn, ControlEnvelope, Devices, MAX_BATCH_BLOCKS, PROTOCOL_VERSION, PairResponseFrame, Push,
    Register, RelayErrorCode, RelayFrame, ResumableSessions, version_mismatch,
};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::devices::handle_pair_request;
use crate::home::Home;
use crate::link::{self, LinkContext, LinkEnd};
use crate::push_counter::PushCounters;
use crate::service::Notice;

/// Frames queued toward the relay before links wait.
const OUTBOX: usize = 8192;
/// Bytes queued toward the relay at most, all links together (each frame counted by
/// its sealed size): a link waits for room, falls behind and resumes from history.
const OUTBOX_BYTES: usize = 16 << 20;
/// A write to the relay (or a flush) that makes no progress for this long ends the
/// connection; the bridge reconnects and devices resume.
const RELAY_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Control messages queued per device link.
const LINK_INBOX: usize = 256;
/// Sealed frames a link hands on before it waits for room in the byte budget toward the
/// relay ([`OUTBOX_BYTES`]). Few: a sealed block can be megabytes, and this hand-over is
/// counted in no budget (with 1024 here, a relay that stopped reading let a long stream
/// pile up behind it, about 200 MiB of 270 MB).
const LINK_SEALED: usize = 8;
/// Queued frames written per flush (a flush's consecutive blocks for one connection
/// go as one signed `batch`).
const FLUSH_FRAMES: usize = MAX_BATCH_BLOCKS;
/// Most `enc` text in one batch: a batch stays well under the relay's message limit.
pub const MAX_BATCH_ENC_BYTES: usize = 512 * 1024;

/// A frame queued toward the relay. A link's blocks keep their connection beside
/// them (a [`BlockEnvelope`] has no `conn`: the `batch` carrying it has).
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// One sealed block for relay connection `conn`.
    Block {
        /// The relay's connection number.
        conn: u64,
        /// The block.
        block: BlockEnvelope,
    },
    /// Any other frame, its `conn` (if it has one) already set.
    Frame(RelayFrame),
}

/// One write of a flush: a frame as it is, or consecutive blocks for one connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A frame as it is.
    Frame(RelayFrame),
    /// 1 to `max_blocks` blocks for `conn`, in order, to be signed as one `batch`.
    Batch {
        /// The relay's connection number.
        conn: u64,
        /// The blocks, never empty.
        blocks: Vec<BlockEnvelope>,
    },
}

/// Groups a flush's queued frames: consecutive blocks for the same connection become
/// one batch of at most `max_blocks` blocks and `max_enc_bytes` of `enc` text (a
/// single larger block still goes, alone); every other frame stays where it was.
/// Nothing is reordered, dropped or repeated, and no batch is empty.
pub fn group(queued: Vec<Outgoing>, max_blocks: usize, max_enc_bytes: usize) -> Vec<Write> {
    let mut writes: Vec<Write> = Vec::new();
    let mut bytes = 0usize;
    for item in queued {
        match item {
            Outgoing::Frame(frame) => writes.push(Write::Frame(frame)),
            Outgoing::Block { conn, block } => {
                let size = block.enc.len();
                if let Some(Write::Batch { conn: open, blocks }) = writes.last_mut()
                    && *open == conn
                    && blocks.len() < max_blocks
                    && bytes.saturating_add(size) <= max_enc_bytes
                {
                    bytes += size;
                    blocks.push(block);
                    continue;
                }
                bytes = size;
                writes.push(Write::Batch { conn, blocks: vec![block] });
            }
        }
    }
    writes
}

/// Reconnection policy: exponential backoff from `min` to `max`, with up to 50 %
/// random jitter so that bridges do not reconnect in lockstep after a relay restart.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// The first delay.
    pub min: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { min: Duration::from_millis(200), max: Duration::from_secs(30) }
    }
}

/// The delay before attempt `failures` (0 = first retry), jitter `jitter` in [0, 1).
pub fn backoff_delay(policy: Backoff, failures: u32, jitter: f64) -> Duration {
    let base = policy.min.saturating_mul(1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX)).min(policy.max);
    base.mul_f64(1.0 + 0.5 * jitter.clamp(0.0, 1.0)).min(policy.max.mul_f64(1.5))
}

/// Runs the relay connection until the future is dropped.
pub async fn run(ctx: LinkContext, home: Home, relay_url: String, backoff: Backoff) {
    let mut failures = 0u32;
    // A damaged counters file stops pushes (a counter could repeat), not the link.
    let counters = PushCounters::open(home.root())
        .inspect_err(|e| tracing::error!("pushes are off until it is fixed or removed: {e}"))
        .ok();
    loop {
        let started = std::time::Instant::now();
        match connect_once(&ctx, &home, counters.as_ref(), &relay_url).await {
            Ok(()) => tracing::info!("relay connection to {relay_url} closed"),
            Err(e) => tracing::warn!("relay {relay_url}: {e}"),
        }
        // A connection that lasted resets the backoff.
        if started.elapsed() > Duration::from_secs(30) {
            failures = 0;
        }
        let mut jitter = [0u8; 1];
        rand_fill(&mut jitter);
        let delay = backoff_delay(backoff, failures, f64::from(jitter[0]) / 256.0);
        failures = failures.saturating_add(1);
        tracing::info!("reconnecting to the relay in {delay:?}");
        tokio::time::sleep(delay).await;
    }
}

fn rand_fill(out: &mut [u8]) {
    let bytes = terminull_protocol::crypto::random_bytes::<8>();
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = b;
    }
}

/// Why one connection to the relay ended (logged before reconnecting).
#[derive(Debug, thiserror::Error)]
enum RelayConnError {
    /// The URL is bad or the connection could not be opened.
    #[error(transparent)]
    Net(#[from] net::NetError),
    /// The challenge's nonce did not decode.
    #[error(transparent)]
    Challenge(#[from] terminull_protocol::crypto::CryptoError),
    /// The relay sent a frame the handshake does not expect here.
    #[error("expected {expected}, got {got}")]
    Unexpected { expected: &'static str, got: &'static str },
    /// The relay answered the registration with an error.
    #[error("the relay refused the registration: {code:?}: {message}")]
    Refused { code: terminull_protocol::relay::RelayErrorCode, message: String },
    /// The relay speaks another protocol version: the one sentence naming both
    /// (the relay's own, or ours when its `registered` names another version).
    #[error("{0}")]
    Version(String),
    /// The relay was silent during the handshake.
    #[error("the relay did not answer within 15 s")]
    Timeout,
    /// The relay closed the connection during the handshake.
    #[error("the relay closed the connection")]
    Closed,
    /// A handshake frame was not a frame.
    #[error("unreadable frame from the relay: {0}")]
    Unreadable(serde_json::Error),
    /// Encoding a frame failed.
    #[error(transparent)]
    Encode(serde_json::Error),
    /// Sending a frame failed.
    #[error("sending {frame} to the relay: {source}")]
    Send { frame: &'static str, source: tokio_tungstenite::tungstenite::Error },
    /// Flushing the queued frames failed.
    #[error("sending to the relay: {0}")]
    Flush(tokio_tungstenite::tungstenite::Error),
    /// Reading from the socket failed.
    #[error(transparent)]
    Receive(tokio_tungstenite::tungstenite::Error),
    /// A write made no progress within the write deadline: the relay stopped reading.
    #[error("the relay read nothing for {0:?}; reconnecting")]
    WriteStalled(Duration),
}

async fn connect_once(
    ctx: &LinkContext,
    home: &Home,
    counters: Option<&PushCounters>,
    relay_url: &str,
) -> Result<(), RelayConnError> {
    let url = format!("{}/v1/bridge", net::Endpoint::parse(relay_url)?.ws_base());
    let mut ws = net::websocket(&url).await?;
    let identity = ctx.identity.clone();
    let public = identity.public();
    let bridge_id = public.bridge_id();
    let challenge = match read(&mut ws).await? {
        RelayFrame::Challenge(c) => from_b64url("nonce", &c.nonce)?,
        other => return Err(RelayConnError::Unexpected { expected: "challenge", got: other.frame_type() }),
    };
    let (devices, mut devices_version) = ctx.devices.snapshot();
    let register = Register {
        bridge_id: bridge_id.clone(),
        protocol_version: PROTOCOL_VERSION,
        resumable_session_ids: ctx.service.resumable_session_ids(),
        agents: ctx.service.agent_summaries().await,
        keys: public.to_wire(),
        devices,
        sig: b64(&identity.sign(&relay_auth_bytes("bridge", bridge_id.as_str(), bridge_id.as_str(), &challenge))),
        // The app this bridge embeds, signed: the relay serves the signature to the
        // app's service worker, which takes that code only when it verifies.
        app: Some(Box::new(terminull_web::sign_shell(&identity))),
    };
    write(&mut ws, &RelayFrame::Register(register)).await?;
    match read(&mut ws).await? {
        RelayFrame::Registered(r) if r.protocol_version != PROTOCOL_VERSION => {
            return Err(RelayConnError::Version(version_mismatch(
                "the relay",
                r.protocol_version,
                "this bridge",
                PROTOCOL_VERSION,
            )));
        }
        RelayFrame::Registered(_) => tracing::info!("registered with the relay {relay_url} as {bridge_id}"),
        RelayFrame::Error(e) if e.code == RelayErrorCode::UnsupportedVersion => {
            return Err(RelayConnError::Version(e.message));
        }
        RelayFrame::Error(e) => return Err(RelayConnError::Refused { code: e.code, message: e.message }),
        other => return Err(RelayConnError::Unexpected { expected: "registered", got: other.frame_type() }),
    }
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(OUTBOX);
    let budget = Arc::new(tokio::sync::Semaphore::new(OUTBOX_BYTES));
    // When this connection ends, links waiting for room stop waiting.
    let _close_budget = CloseOnDrop(budget.clone());
    let mut links: HashMap<u64, mpsc::Sender<ControlEnvelope>> = HashMap::new();
    let mut notices = ctx.service.notices();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Live sessions are announced (the first tick announces every one, even those
    // `register` could not list yet), so a session started over the LAN or the local
    // socket gets resume tokens here too and a device can move it to the relay.
    let mut live: HashSet<SessionId> = HashSet::new();
    loop {
        tokio::select! {
            frame = ws.next() => {
                let text = match frame {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) | None => return Ok(()),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(RelayConnError::Receive(e)),
                };
                let frame: RelayFrame = match serde_json::from_str(&text) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!("unreadable frame from the relay: {e}");
                        continue;
                    }
                };
                match frame {
                    RelayFrame::LinkHello(hello) => {
                        let Some(conn) = hello.conn else { continue };
                        match link::accept(ctx, &hello) {
                            Ok((mut accept, open)) => {
                                accept.conn = Some(conn);
                                write(&mut ws, &RelayFrame::LinkAccept(accept)).await?;
                                let (tx, rx) = mpsc::channel(LINK_INBOX);
                                links.insert(conn, tx);
                                let (link_out, mut link_rx) = mpsc::channel::<RelayFrame>(LINK_SEALED);
                                let out = out_tx.clone();
                                let budget = budget.clone();
                                tokio::spawn(async move {
                                    let run = open.run(rx, link_out);
                                    let forward = async {
                                        while let Some(frame) = link_rx.recv().await {
                                            if !enqueue(&out, &budget, with_conn(frame, conn)).await {
                                                return;
                                            }
                                        }
                                    };
                                    let (end, ()) = tokio::join!(run, forward);
                                    if let LinkEnd::Revoked(reason) = end {
                                        let close = Outgoing::Frame(RelayFrame::CloseConn(CloseConn { conn, reason }));
                                        enqueue(&out, &budget, close).await;
                                    }
                                });
                            }
                            Err(refused) => {
                                let reason = refused.to_string();
                                write(&mut ws, &RelayFrame::CloseConn(CloseConn { conn, reason })).await?;
                            }
                        }
                    }
                    RelayFrame::Control(control) => {
                        let Some(conn) = control.conn else { continue };
                        match links.get(&conn) {
                            Some(tx) => {
                                if tx.try_send(control).is_err() {
                                    links.remove(&conn);
                                    let reason = "too many control messages waiting; reconnect".to_owned();
                                    write(&mut ws, &RelayFrame::CloseConn(CloseConn { conn, reason })).await?;
                                }
                            }
                            None => tracing::debug!("a control message for connection {conn}, which has no link"),
                        }
                    }
                    RelayFrame::ConnClosed(c) => {
                        links.remove(&c.conn);
                    }
                    RelayFrame::PairRequest(p) => {
                        let answer = match handle_pair_request(home, &identity, &ctx.devices, &p.request) {
                            Ok(response) => PairResponseFrame { request_id: p.request_id, response: Some(response), error: None },
                            Err(e) => {
                                ctx.refusals.record(format!("refused a pairing request: {e}"));
                                PairResponseFrame { request_id: p.request_id, response: None, error: Some(e.to_string()) }
                            }
                        };
                        write(&mut ws, &RelayFrame::PairResponse(answer)).await?;
                        // Publish the new device at once, so it can connect right after pairing.
                        let (devices, version) = ctx.devices.snapshot();
                        if version != devices_version {
                            devices_version = version;
                            write(&mut ws, &RelayFrame::Devices(Devices { devices })).await?;
                        }
                    }
                    RelayFrame::Error(e) => tracing::warn!("relay error {:?}: {}", e.code, e.message),
                    other => tracing::warn!("unexpected `{}` frame from the relay", other.frame_type()),
                }
            }
            Some(first) = out_rx.recv() => {
                // Frames already queued go out in one write (a flush per frame cost a
                // syscall each while a session streams), a connection's consecutive
                // blocks in one `batch` signed once.
                let mut queued = vec![first];
                while queued.len() < FLUSH_FRAMES {
                    let Ok(next) = out_rx.try_recv() else { break };
                    queued.push(next);
                }
                // The room these frames hold is given back once they are written.
                let written: usize = queued.iter().map(|o| outgoing_cost(o) as usize).sum();
                for write in group(queued, MAX_BATCH_BLOCKS, MAX_BATCH_ENC_BYTES) {
                    let frame = match write {
                        Write::Frame(frame) => frame,
                        Write::Batch { conn, blocks } => RelayFrame::Batch(sign_batch(&identity, conn, blocks)),
                    };
                    feed(&mut ws, &frame).await?;
                }
                match tokio::time::timeout(RELAY_WRITE_TIMEOUT, ws.flush()).await {
                    Ok(flushed) => flushed.map_err(RelayConnError::Flush)?,
                    Err(_) => return Err(RelayConnError::WriteStalled(RELAY_WRITE_TIMEOUT)),
                }
                budget.add_permits(written);
            }
            _ = tick.tick() => {
                let now: HashSet<SessionId> = ctx.service.live_session_ids().await.into_iter().collect();
                let mut started: Vec<SessionId> = now.difference(&live).cloned().collect();
                live = now;
                if !started.is_empty() {
                    started.sort();
                    write(&mut ws, &RelayFrame::Sessions(ResumableSessions { resumable_session_ids: started })).await?;
                }
                let (devices, version) = ctx.devices.snapshot();
                if version != devices_version {
                    devices_version = version;
                    write(&mut ws, &RelayFrame::Devices(Devices { devices })).await?;
                }
            }
            notice = notices.recv() => {
                let Ok(notice) = notice else { continue };
                let Some(counters) = counters else { continue };
                for push in seal_pushes(ctx, counters, &notice) {
                    write(&mut ws, &RelayFrame::Push(push)).await?;
                }
            }
        }
    }
}

/// A link's frame addressed to relay connection `conn`.
fn with_conn(mut frame: RelayFrame, conn: u64) -> Outgoing {
    match &mut frame {
        RelayFrame::ReplayDone(f) => f.conn = Some(conn),
        RelayFrame::Reply(f) => f.conn = Some(conn),
        RelayFrame::LinkAccept(f) => f.conn = Some(conn),
        _ => {}
    }
    match frame {
        RelayFrame::Block(block) => Outgoing::Block { conn, block },
        other => Outgoing::Frame(other),
    }
}

/// One sealed push per active device. The counter comes from the home's persisted
/// push counters ([`PushCounters`]): it never repeats under a device's push key, across
/// restarts and clock steps, so the device can refuse a replayed notification. A
/// device whose counter cannot be reserved gets no push (logged).
fn seal_pushes(ctx: &LinkContext, counters: &PushCounters, notice: &Notice) -> Vec<Push> {
    let bridge_id = ctx.identity.public().bridge_id();
    let (devices, _) = ctx.devices.snapshot();
    let Ok(payload) = serde_json::to_vec(notice) else { return Vec::new() };
    let mut out = Vec::new();
    for device in devices.into_iter().filter(|d| !d.revoked) {
        // The device's switches, presence on any device, and its rate limit
        // (docs/relay-operations.md, "Push bounds").
        if let Err(skipped) = ctx.service.push_policy().decide(&device.device_id, &notice.session_id, notice.kind) {
            tracing::debug!(device = %device.device_id, session = %notice.session_id, kind = notice.kind.as_str(), ?skipped, "no push");
            continue;
        }
        let Ok(public) = terminull_protocol::crypto::keys::PublicIdentity::from_wire(&device.keys) else { continue };
        let Ok(shared) = ctx.identity.agree(&public.x25519, "device x25519") else { continue };
        let counter = match counters.next(&device.device_id) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(device = %device.device_id, "no push sent: {e}");
                continue;
            }
        };
        let key = terminull_protocol::crypto::channel::push_key(&shared, bridge_id.as_str(), device.device_id.as_str());
        let mut sealer = terminull_protocol::crypto::channel::Sealer::starting_at(key, counter, "push");
        let aad = push_aad(bridge_id.as_str(), device.device_id.as_str(), notice.kind.as_str());
        if let Ok(sealed) = sealer.seal(&aad, &payload) {
            out.push(Push { device_id: device.device_id, kind: notice.kind, payload: b64(&sealed) });
        }
    }
    out
}

type Ws = tokio_tungstenite::WebSocketStream<net::Stream>;

async fn read(ws: &mut Ws) -> Result<RelayFrame, RelayConnError> {
    loop {
        match tokio::time::timeout(Duration::from_secs(15), ws.next()).await {
            Err(_) => return Err(RelayConnError::Timeout),
            Ok(Some(Ok(Message::Text(text)))) => {
                return serde_json::from_str(&text).map_err(RelayConnError::Unreadable);
            }
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => return Err(RelayConnError::Closed),
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(e))) => return Err(RelayConnError::Receive(e)),
        }
    }
}

/// Closes the queue's byte budget when dropped: whoever waits for room gets an error.
struct CloseOnDrop(Arc<tokio::sync::Semaphore>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The queue room `outgoing` takes: its sealed text (a block's `enc`) or its JSON,
/// at most the whole budget.
fn outgoing_cost(outgoing: &Outgoing) -> u32 {
    let len = match outgoing {
        Outgoing::Block { block, .. } => {
            block.enc.len() + block.block_type.len() + block.session_id.as_str().len() + 64
        }
        Outgoing::Frame(frame) => serde_json::to_vec(frame).map(|v| v.len()).unwrap_or(0),
    };
    u32::try_from(len.clamp(1, OUTBOX_BYTES)).unwrap_or(u32::MAX)
}

/// Queues `outgoing` toward the relay once the byte budget has room for it (the
/// connection's writer gives the room back); `false` once the connection is gone.
async fn enqueue(out: &mpsc::Sender<Outgoing>, budget: &tokio::sync::Semaphore, outgoing: Outgoing) -> bool {
    let Ok(room) = budget.acquire_many(outgoing_cost(&outgoing)).await else { return false };
    room.forget();
    out.send(outgoing).await.is_ok()
}

/// Queues `frame` without flushing, within the write deadline.
async fn feed(ws: &mut Ws, frame: &RelayFrame) -> Result<(), RelayConnError> {
    let text = serde_json::to_string(frame).map_err(RelayConnError::Encode)?;
    match tokio::time::timeout(RELAY_WRITE_TIMEOUT, ws.feed(Message::text(text))).await {
        Ok(fed) => fed.map_err(|source| RelayConnError::Send { frame: frame.frame_type(), source }),
        Err(_) => Err(RelayConnError::WriteStalled(RELAY_WRITE_TIMEOUT)),
    }
}

/// Sends `frame`, within the write deadline.
async fn write(ws: &mut Ws, frame: &RelayFrame) -> Result<(), RelayConnError> {
    let text = serde_json::to_string(frame).map_err(RelayConnError::Encode)?;
    match tokio::time::timeout(RELAY_WRITE_TIMEOUT, ws.send(Message::text(text))).await {
        Ok(sent) => sent.map_err(|source| RelayConnError::Send { frame: frame.frame_type(), source }),
        Err(_) => Err(RelayConnError::WriteStalled(RELAY_WRITE_TIMEOUT)),
    }
}

/// Wraps a link so its `Arc` context can be built from the daemon's parts.
pub fn context(
    identity: terminull_protocol::crypto::keys::Identity,
    devices: crate::devices::DeviceRegistry,
    service: crate::service::Service,
) -> LinkContext {
    LinkContext {
        identity: Arc::new(identity),
        devices,
        service,
        refusals: Default::default(),
        coalesce_chunks: true,
        coalesced: Default::default(),
        rtc: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(name: &str, enc_len: usize) -> BlockEnvelope {
        BlockEnvelope {
            session_id: SessionId(name.into()),
            block_type: "text".into(),
            enc: "e".repeat(enc_len),
            replay: false,
            server_ts: 1.0,
        }
    }

    fn reply(conn: u64) -> RelayFrame {
        RelayFrame::Reply(terminull_protocol::relay::ReplyEnvelope {
            device_id: terminull_protocol::ids::DeviceId("dev".into()),
            body: "b".into(),
            conn: Some(conn),
        })
    }

    /// The flush's writes in short form: `c1[a,b]` a batch for connection 1, `R` a frame.
    fn shape(writes: &[Write]) -> Vec<String> {
        writes
            .iter()
            .map(|w| match w {
                Write::Frame(_) => "R".to_owned(),
                Write::Batch { conn, blocks } => {
                    format!("c{conn}[{}]", blocks.iter().map(|b| b.session_id.as_str()).collect::<Vec<_>>().join(","))
                }
            })
            .collect()
    }

    #[test]
    fn a_flush_groups_each_connections_consecutive_blocks_into_batches_in_order() {
        let b = |conn: u64, name: &str| Outgoing::Block { conn, block: block(name, 10) };
        let big = |conn: u64, name: &str| Outgoing::Block { conn, block: block(name, 400) };
        let r = |conn: u64| Outgoing::Frame(reply(conn));
        // (case, queued, max blocks, max enc bytes, expected writes)
        type Case = (&'static str, Vec<Outgoing>, usize, usize, Vec<&'static str>);
        let table: Vec<Case> = vec![
            ("one block", vec![b(1, "a")], 256, 1 << 19, vec!["c1[a]"]),
            ("one connection", vec![b(1, "a"), b(1, "b"), b(1, "c")], 256, 1 << 19, vec!["c1[a,b,c]"]),
            (
                "interleaved connections",
                vec![b(1, "a"), b(2, "b"), b(2, "c"), b(1, "d")],
                256,
                1 << 19,
                vec!["c1[a]", "c2[b,c]", "c1[d]"],
            ),
            (
                "a reply between blocks",
                vec![b(1, "a"), r(1), b(1, "b"), b(1, "c"), r(2)],
                256,
                1 << 19,
                vec!["c1[a]", "R", "c1[b,c]", "R"],
            ),
            ("only frames", vec![r(1), r(2)], 256, 1 << 19, vec!["R", "R"]),
            (
                "capped by count",
                vec![b(1, "a"), b(1, "b"), b(1, "c"), b(1, "d"), b(1, "e")],
                2,
                1 << 19,
                vec!["c1[a,b]", "c1[c,d]", "c1[e]"],
            ),
            (
                "capped by bytes",
                vec![big(1, "a"), big(1, "b"), big(1, "c"), b(1, "d")],
                256,
                1000,
                vec!["c1[a,b]", "c1[c,d]"],
            ),
            (
                "a block larger than the cap goes alone",
                vec![b(1, "a"), big(1, "b"), b(1, "c")],
                256,
                100,
                vec!["c1[a]", "c1[b]", "c1[c]"],
            ),
            ("nothing", vec![], 256, 1 << 19, vec![]),
        ];
        for (case, queued, max_blocks, max_bytes, expected) in table {
            let blocks_in = queued.iter().filter(|q| matches!(q, Outgoing::Block { .. })).count();
            let writes = group(queued, max_blocks, max_bytes);
            assert_eq!(shape(&writes), expected, "{case}");
            let blocks_out: usize = writes
                .iter()
                .map(|w| match w {
                    Write::Batch { blocks, .. } => {
                        assert!(!blocks.is_empty() && blocks.len() <= max_blocks, "{case}: batch size");
                        blocks.len()
                    }
                    Write::Frame(_) => 0,
                })
                .sum();
            assert_eq!(blocks_out, blocks_in, "{case}: every block once");
        }
    }

    #[test]
    fn a_links_block_keeps_its_connection_beside_it_and_other_frames_get_theirs() {
        let Outgoing::Block { conn, .. } = with_conn(RelayFrame::Block(block("s", 1)), 9) else {
            panic!("a block stays a block")
        };
        assert_eq!(conn, 9);
        let Outgoing::Frame(frame) = with_conn(reply(0), 9) else { panic!("a reply is a frame") };
        assert_eq!(frame.conn(), Some(9));
    }

    #[test]
    fn backoff_grows_exponentially_with_bounded_jitter() {
        let p = Backoff { min: Duration::from_millis(100), max: Duration::from_secs(10) };
        assert_eq!(backoff_delay(p, 0, 0.0), Duration::from_millis(100));
        assert_eq!(backoff_delay(p, 3, 0.0), Duration::from_millis(800));
        assert_eq!(backoff_delay(p, 30, 0.0), Duration::from_secs(10));
        assert_eq!(backoff_delay(p, 0, 0.999).as_millis(), 149);
        assert!(backoff_delay(p, 30, 1.0) <= Duration::from_secs(15));
    }
}
