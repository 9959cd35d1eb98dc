//! What every WebSocket connection shares, bridge or client: an outbound queue bounded
//! in frames and in bytes, drained by a writer task whose every write has a deadline, a
//! kill switch that ends the connection with a final `error` frame and a close reason,
//! pings, the idle timeout, the inbound rate limit, and the malformed-frame budget.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use terminull_protocol::SessionId;
use terminull_protocol::relay::{RelayError as ErrorBody, RelayErrorCode, RelayFrame};
use terminull_protocol::text::prefix_within;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::RelayConfig;
use crate::limits::{TokenBucket, deadline_after};

mod queue;

pub(crate) use queue::{Outbound, QueueLimits};
use queue::{Queue, QueueBound};

/// A connection's number, unique in this process (the `conn` of bridge-side frames).
pub(crate) type ConnId = u64;

/// WebSocket close codes the relay uses (RFC 6455 §7.4.1).
pub(crate) mod close_code {
    /// The connection did what it was for.
    pub const NORMAL: u16 = 1000;
    /// The relay is shutting down, or a newer connection replaced this one.
    pub const GOING_AWAY: u16 = 1001;
    /// "Service restart": reconnect (through any relay node) and resume; a device is told
    /// this when its bridge's link went through another node that moved or stopped.
    pub const SERVICE_RESTART: u16 = 1012;
    /// The peer broke a rule (authentication, rate, malformed frames).
    pub const POLICY: u16 = 1008;
    /// A message was larger than the relay accepts.
    pub const TOO_BIG: u16 = 1009;
    /// The relay is overloaded for this peer (slow consumer, too many connections).
    pub const TRY_AGAIN_LATER: u16 = 1013;
}

/// How long a connection's last frames may take when the relay is shutting down.
const SHUTDOWN_FAREWELL: Duration = Duration::from_millis(500);

/// How a `batch` frame's text starts when `type` is its first field (as every
/// serializer of the protocol's tagged frames writes it).
const BATCH_HEAD: &str = r#"{"type":"batch""#;

/// Longest `error.message` the relay builds from peer input.
const MAX_DETAIL: usize = 240;
/// A close reason fits in a control frame: 125 bytes less the 2-byte code.
const MAX_CLOSE_REASON: usize = 123;

/// How a connection is to end.
#[derive(Debug, Clone)]
pub(crate) struct Kill {
    /// The `error` frame sent before closing, when there is one.
    pub error: Option<ErrorBody>,
    /// The WebSocket close code.
    pub close_code: u16,
    /// The close reason (truncated to fit a close frame).
    pub reason: String,
    /// Deliver what is already queued before the final frames (the peer broke a rule and
    /// should see every answer it was sent); otherwise the queue is discarded (a slow
    /// consumer, a revoked device, a shutdown).
    pub flush_queue: bool,
}

impl Kill {
    /// An `error` frame with `code` and `message`, then a close with `close_code` and the
    /// same message as the reason.
    pub(crate) fn with_error(code: RelayErrorCode, message: impl Into<String>, close_code: u16) -> Self {
        let message = message.into();
        Self {
            error: Some(ErrorBody { code, message: message.clone(), session_id: None }),
            close_code,
            reason: message,
            flush_queue: false,
        }
    }

    /// A close without an `error` frame.
    pub(crate) fn close(close_code: u16, reason: impl Into<String>) -> Self {
        Self { error: None, close_code, reason: reason.into(), flush_queue: false }
    }

    /// Delivers what is already queued first.
    pub(crate) fn after_queue(mut self) -> Self {
        self.flush_queue = true;
        self
    }
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The queue is full: the peer reads too slowly.
    Full,
    /// The connection is ending.
    Closed,
}

/// The sending side of a connection, held by the hub.
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    /// The connection's number.
    pub id: ConnId,
    tx: mpsc::Sender<Outbound>,
    bound: Arc<QueueBound>,
    kill: Arc<watch::Sender<Option<Kill>>>,
}

impl ConnHandle {
    /// Queues `frame` without waiting.
    pub(crate) fn send_frame(&self, frame: &RelayFrame) -> Result<(), SendError> {
        self.send_text(frame_json(frame))
    }

    /// Queues an already serialized frame without waiting.
    pub(crate) fn send_text(&self, text: String) -> Result<(), SendError> {
        self.send(Outbound::One(text))
    }

    /// Queues an item without waiting; it counts its frames against the queue's bound.
    fn send(&self, item: Outbound) -> Result<(), SendError> {
        if self.is_killed() {
            return Err(SendError::Closed);
        }
        let frames = item.frames();
        if frames == 0 {
            return Ok(());
        }
        let bytes = item.bytes();
        if !self.bound.reserve(frames, bytes) {
            return Err(SendError::Full);
        }
        self.tx.try_send(item).map_err(|e| {
            self.bound.release(frames, bytes);
            match e {
                mpsc::error::TrySendError::Full(_) => SendError::Full,
                mpsc::error::TrySendError::Closed(_) => SendError::Closed,
            }
        })
    }

    /// Queues `frame`; when the queue is full the connection is cut off as a slow
    /// consumer. Returns whether the frame was queued.
    pub(crate) fn send_or_cut_off(&self, frame: &RelayFrame) -> bool {
        self.send_text_or_cut_off(frame_json(frame))
    }

    /// [`Self::send_or_cut_off`] for an already serialized frame.
    pub(crate) fn send_text_or_cut_off(&self, text: String) -> bool {
        self.send_or_cut_off_item(Outbound::One(text))
    }

    /// [`Self::send_or_cut_off`] for already serialized frames, queued as one item.
    pub(crate) fn send_texts_or_cut_off(&self, texts: Vec<String>) -> bool {
        self.send_or_cut_off_item(Outbound::Many(texts))
    }

    fn send_or_cut_off_item(&self, item: Outbound) -> bool {
        match self.send(item) {
            Ok(()) => true,
            Err(SendError::Full) => {
                self.kill(Kill::with_error(
                    RelayErrorCode::SlowConsumer,
                    "the connection read too slowly and its queue overflowed; reconnect and resume",
                    close_code::TRY_AGAIN_LATER,
                ));
                false
            }
            Err(SendError::Closed) => false,
        }
    }

    /// Ends the connection (the first kill wins; later ones are ignored).
    pub(crate) fn kill(&self, kill: Kill) {
        self.kill.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(kill);
            true
        });
    }

    /// Whether the connection is ending.
    pub(crate) fn is_killed(&self) -> bool {
        self.kill.borrow().is_some()
    }
}

/// A queue with no socket behind it: the sending side is an ordinary [`ConnHandle`]
/// (bounded in frames and bytes, with its kill switch), the receiving side is drained
/// by whoever owns it — the cluster's forwarders, which publish what is queued on the
/// bus (`crate::cluster`).
#[derive(Debug)]
pub(crate) struct Detached {
    /// For the hub, as any connection's.
    pub handle: ConnHandle,
    /// What was queued, for the drainer.
    pub queue: DetachedQueue,
    /// Set when the handle is killed.
    pub kill: watch::Receiver<Option<Kill>>,
}

/// The receiving end of a [`Detached`] queue.
#[derive(Debug)]
pub(crate) struct DetachedQueue(Queue);

impl DetachedQueue {
    /// The next item, waiting for it; `None` when every sender is gone.
    pub(crate) async fn recv(&mut self) -> Option<Outbound> {
        self.0.recv().await
    }

    /// The next item if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Outbound> {
        self.0.try_recv()
    }

    /// Closes the queue and frees what it holds.
    pub(crate) fn discard(&mut self) -> usize {
        self.0.discard()
    }
}

/// A [`Detached`] queue for connection number `id`, bounded by `limits`.
pub(crate) fn detached(id: ConnId, limits: QueueLimits) -> Detached {
    let limits = QueueLimits { frames: limits.frames.max(1), bytes: limits.bytes.max(1) };
    let (tx, rx) = mpsc::channel(limits.frames);
    let bound = Arc::new(QueueBound::new(limits));
    let (kill_tx, kill_rx) = watch::channel(None);
    Detached {
        handle: ConnHandle { id, tx, bound: Arc::clone(&bound), kill: Arc::new(kill_tx) },
        queue: DetachedQueue(Queue { rx, bound }),
        kill: kill_rx,
    }
}

/// The JSON text of a frame.
pub(crate) fn frame_json(frame: &RelayFrame) -> String {
    // Relay frames hold strings, numbers, booleans and maps with string keys: serializing
    // cannot fail.
    serde_json::to_string(frame).unwrap_or_default()
}

/// An `error` frame.
pub(crate) fn error_frame(
    code: RelayErrorCode,
    message: impl Into<String>,
    session_id: Option<SessionId>,
) -> RelayFrame {
    RelayFrame::Error(ErrorBody { code, message: message.into(), session_id })
}

/// What the reader got.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A well-formed frame, within the rate limit.
    Frame(Box<RelayFrame>),
    /// A `batch` frame's text, within the rate limit (its first block's token is taken;
    /// [`ConnIo::charge`] takes the rest once it is read): it goes the fast path
    /// (`crate::batch`) that forwards its blocks' text without re-serialising them.
    Batch(Utf8Bytes),
    /// The connection is over (closed by the peer, killed, timed out or failed).
    Ended,
}

/// Per-role inbound limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InboundLimits {
    pub frames_per_sec: u32,
    pub burst: u32,
}

/// The receiving side of a connection, owned by its task, plus its writer task.
#[derive(Debug)]
pub(crate) struct ConnIo {
    /// For the hub.
    pub handle: ConnHandle,
    role: &'static str,
    stream: SplitStream<WebSocket>,
    kill_rx: watch::Receiver<Option<Kill>>,
    writer: JoinHandle<()>,
    bucket: TokenBucket,
    malformed: u32,
    rate_dropped: u32,
    last_seen: Instant,
    config: Arc<RelayConfig>,
    stopping: CancellationToken,
}

impl ConnIo {
    /// Splits `socket`, starts its writer with a queue bounded by `queue`.
    pub(crate) fn start(
        socket: WebSocket,
        id: ConnId,
        role: &'static str,
        queue: QueueLimits,
        limits: InboundLimits,
        config: Arc<RelayConfig>,
        stopping: CancellationToken,
    ) -> Self {
        let (sink, stream) = socket.split();
        // Every item holds at least one frame, so the frame bound also bounds the items.
        let queue = QueueLimits { frames: queue.frames.max(1), bytes: queue.bytes.max(1) };
        let (tx, rx) = mpsc::channel(queue.frames);
        let bound = Arc::new(QueueBound::new(queue));
        let (kill_tx, kill_rx) = watch::channel(None);
        let kill = Arc::new(kill_tx);
        let writer = tokio::spawn(write_loop(
            sink,
            Queue { rx, bound: Arc::clone(&bound) },
            Arc::clone(&kill),
            Arc::clone(&config),
            stopping.clone(),
        ));
        Self {
            handle: ConnHandle { id, tx, bound, kill },
            role,
            stream,
            kill_rx,
            writer,
            bucket: TokenBucket::new(f64::from(limits.frames_per_sec), f64::from(limits.burst)),
            malformed: 0,
            rate_dropped: 0,
            last_seen: Instant::now(),
            config,
            stopping,
        }
    }

    /// The next frame, or [`Inbound::Ended`]. `deadline` bounds the wait (used for the
    /// challenge answer); the idle timeout always applies.
    pub(crate) async fn next_frame(&mut self, deadline: Option<Instant>) -> Inbound {
        loop {
            if self.handle.is_killed() {
                return Inbound::Ended;
            }
            let idle_deadline = deadline_after(self.last_seen, self.config.idle_timeout);
            let wait_until = deadline.map_or(idle_deadline, |d| d.min(idle_deadline));
            let next = tokio::select! {
                biased;
                _ = self.kill_rx.changed() => return Inbound::Ended,
                next = tokio::time::timeout_at(wait_until, self.stream.next()) => next,
            };
            let message = match next {
                Err(_elapsed) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        self.handle.kill(
                            Kill::with_error(
                                RelayErrorCode::BadFrame,
                                format!(
                                    "no answer to the challenge within {} s",
                                    self.config.auth_timeout.as_secs_f32()
                                ),
                                close_code::POLICY,
                            )
                            .after_queue(),
                        );
                    } else {
                        tracing::debug!(role = self.role, conn = self.handle.id, "closing an idle connection");
                        self.handle.kill(Kill::close(
                            close_code::NORMAL,
                            format!("nothing received for {} s", self.config.idle_timeout.as_secs_f32()),
                        ));
                    }
                    return Inbound::Ended;
                }
                Ok(None) => {
                    self.handle.kill(Kill::close(close_code::NORMAL, ""));
                    return Inbound::Ended;
                }
                Ok(Some(Err(error))) => {
                    self.read_failed(&error);
                    return Inbound::Ended;
                }
                Ok(Some(Ok(message))) => message,
            };
            self.last_seen = Instant::now();
            match message {
                Message::Text(text) => {
                    if !self.bucket.try_take(std::time::Instant::now()) {
                        if self.rate_limited() {
                            continue;
                        }
                        return Inbound::Ended;
                    }
                    if text.as_str().starts_with(BATCH_HEAD) {
                        tokio::task::consume_budget().await;
                        return Inbound::Batch(text);
                    }
                    match serde_json::from_str::<RelayFrame>(text.as_str()) {
                        // A batch whose `type` is not its first field: the fast path
                        // reads it again, borrowed.
                        Ok(RelayFrame::Batch(_)) => {
                            tokio::task::consume_budget().await;
                            return Inbound::Batch(text);
                        }
                        Ok(frame) => {
                            // One socket read holds dozens of frames, and frames already
                            // buffered cost tokio no budget, so a busy bridge's reader
                            // could run for ~8,000 frames without yielding while the
                            // device's writer it just woke waits in this worker's
                            // (unstealable) LIFO slot — until its queue overflows and
                            // the device is cut as a slow consumer. Charging one unit
                            // per frame makes the reader yield every 128.
                            tokio::task::consume_budget().await;
                            return Inbound::Frame(Box::new(frame));
                        }
                        Err(e) => {
                            let detail = format!("not a relay frame: {e}");
                            if !self.malformed(prefix_within(&detail, MAX_DETAIL)) {
                                return Inbound::Ended;
                            }
                        }
                    }
                }
                Message::Binary(_) => {
                    if !self.malformed("binary messages are not part of the relay protocol; send JSON text") {
                        return Inbound::Ended;
                    }
                }
                Message::Ping(_) | Message::Pong(_) => {}
                Message::Close(_) => {
                    self.handle.kill(Kill::close(close_code::NORMAL, ""));
                    return Inbound::Ended;
                }
            }
        }
    }

    /// Counts `blocks` more frames against the inbound rate bucket (a `batch` counts as
    /// its number of blocks; its first was taken when it arrived). The bucket may go
    /// into debt by at most one batch: the frames after it wait until it has refilled.
    pub(crate) fn charge(&mut self, blocks: usize) {
        self.bucket.take_debt(blocks as f64, std::time::Instant::now());
    }

    /// Answers a refused frame with `error` and counts it against the malformed budget
    /// when it is `bad_frame`. Returns false when the connection is now over.
    pub(crate) fn refuse(&mut self, code: RelayErrorCode, message: &str, session_id: Option<SessionId>) -> bool {
        if code == RelayErrorCode::BadFrame {
            return self.malformed(message);
        }
        self.handle.send_or_cut_off(&error_frame(code, message, session_id))
    }

    /// Reports a malformed frame. Returns false when the budget is spent and the
    /// connection is closing.
    fn malformed(&mut self, message: &str) -> bool {
        self.malformed += 1;
        tracing::debug!(role = self.role, conn = self.handle.id, count = self.malformed, message, "malformed frame");
        if self.malformed >= self.config.max_malformed_frames {
            self.handle.kill(
                Kill::with_error(
                    RelayErrorCode::BadFrame,
                    format!("{} malformed frames; closing (last: {message})", self.malformed),
                    close_code::POLICY,
                )
                .after_queue(),
            );
            return false;
        }
        self.handle.send_or_cut_off(&error_frame(RelayErrorCode::BadFrame, message, None))
    }

    /// Reports a frame dropped by the rate limit. Returns false when the connection is
    /// closing.
    fn rate_limited(&mut self) -> bool {
        self.rate_dropped += 1;
        if self.rate_dropped >= self.config.max_rate_limited_frames {
            tracing::info!(role = self.role, conn = self.handle.id, "closing a connection that keeps flooding");
            self.handle.kill(
                Kill::with_error(
                    RelayErrorCode::RateLimited,
                    format!("{} frames dropped for exceeding the rate limit; closing", self.rate_dropped),
                    close_code::POLICY,
                )
                .after_queue(),
            );
            return false;
        }
        let message = format!("too many frames; this one was dropped ({} dropped so far)", self.rate_dropped);
        self.handle.send_or_cut_off(&error_frame(RelayErrorCode::RateLimited, message, None))
    }

    fn read_failed(&mut self, error: &axum::Error) {
        let text = error.to_string();
        // tungstenite reports an oversized message or frame as a capacity error
        // ("Space limit exceeded: Message too long: N > M").
        if text.contains("Space limit exceeded") || text.contains("too long") || text.contains("too big") {
            tracing::info!(role = self.role, conn = self.handle.id, error = %text, "closing a connection that sent an oversized message");
            self.handle.kill(
                Kill::with_error(
                    RelayErrorCode::TooLarge,
                    format!("message larger than {} bytes", self.config.max_message_bytes),
                    close_code::TOO_BIG,
                )
                .after_queue(),
            );
        } else {
            tracing::debug!(role = self.role, conn = self.handle.id, error = %text, "websocket read failed");
            self.handle.kill(Kill::close(close_code::POLICY, prefix_within(&text, MAX_CLOSE_REASON)));
        }
    }

    /// Ends the connection: kills it if nothing did yet, waits (bounded) for the peer's
    /// close while discarding what it still sends, and for the writer to finish. When the
    /// relay is shutting down it does not wait for the peer.
    pub(crate) async fn finish(mut self) {
        self.handle.kill(Kill::close(close_code::NORMAL, ""));
        let deadline = deadline_after(Instant::now(), self.config.close_timeout);
        // Reading on lets the final frames reach the peer without a TCP reset discarding
        // them (unread input makes the kernel answer with a reset on close).
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout_at(deadline, self.stream.next()) => next,
                _ = self.stopping.cancelled() => break,
            };
            match next {
                Ok(Some(Ok(Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
                Ok(Some(Ok(_))) => {}
            }
        }
        let grace = self.config.close_timeout.saturating_add(Duration::from_secs(1));
        if tokio::time::timeout(grace, &mut self.writer).await.is_err() {
            self.writer.abort();
        }
    }
}

/// Most queued frames the writer hands the socket per flush (it always takes whole
/// items, so a flush may hold one batch more).
const WRITE_BATCH: usize = 64;
/// Most queued bytes the writer hands the socket per flush (one item more at most): a
/// flush of big frames stays short, so the write deadline measures a peer's reading,
/// not the size of what happened to be queued.
const WRITE_BATCH_BYTES: usize = 1024 * 1024;

/// Why a write stopped.
#[derive(Debug)]
enum WriteError {
    /// The socket failed (the peer is gone).
    Socket,
    /// The socket did not take a frame within the write timeout.
    Stalled,
}

/// `step` within `timeout`.
async fn timed<T>(timeout: Duration, step: impl Future<Output = Result<T, axum::Error>>) -> Result<T, WriteError> {
    match tokio::time::timeout(timeout, step).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(WriteError::Socket),
        Err(_elapsed) => Err(WriteError::Stalled),
    }
}

/// Feeds every frame of `item` to the sink (without flushing), each within `timeout`;
/// returns how many frames and bytes.
async fn feed(
    sink: &mut SplitSink<WebSocket, Message>,
    item: Outbound,
    timeout: Duration,
) -> Result<(usize, usize), WriteError> {
    let bytes = item.bytes();
    match item {
        Outbound::One(text) => {
            timed(timeout, sink.feed(Message::Text(text.into()))).await?;
            Ok((1, bytes))
        }
        Outbound::Many(texts) => {
            let n = texts.len();
            for text in texts {
                timed(timeout, sink.feed(Message::Text(text.into()))).await?;
            }
            Ok((n, bytes))
        }
    }
}

/// Drains the queue into the socket, pings on schedule, and on kill sends the final
/// `error` frame and close frame (bounded by `close_timeout`). Every frame, ping and
/// flush must be taken by the socket within `write_timeout`, or the connection is cut
/// off as a slow consumer: the writer needs nothing from the read loop to notice a peer
/// that stopped reading.
async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: Queue,
    kill: Arc<watch::Sender<Option<Kill>>>,
    config: Arc<RelayConfig>,
    stopping: CancellationToken,
) {
    let mut kill_rx = kill.subscribe();
    let ping_interval = config.ping_interval;
    let write_timeout = config.write_timeout;
    let mut ping = tokio::time::interval_at(deadline_after(Instant::now(), ping_interval), ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let first = tokio::select! {
            biased;
            _ = kill_rx.changed() => break,
            item = queue.recv() => match item {
                Some(item) => Some(item),
                None => break,
            },
            _ = ping.tick() => None,
        };
        // What else is queued goes in the same write (up to WRITE_BATCH frames or
        // WRITE_BATCH_BYTES): one flush, one syscall, for a batch's worth of blocks
        // instead of one per frame.
        let write = async {
            let (mut fed, mut bytes) = match first {
                Some(item) => feed(&mut sink, item, write_timeout).await?,
                None => {
                    timed(write_timeout, sink.feed(Message::Ping(Default::default()))).await?;
                    (1, 0)
                }
            };
            while fed < WRITE_BATCH && bytes < WRITE_BATCH_BYTES {
                let Some(item) = queue.try_recv() else { break };
                let (f, b) = feed(&mut sink, item, write_timeout).await?;
                fed += f;
                bytes += b;
            }
            timed(write_timeout, sink.flush()).await
        };
        // A peer that stops reading blocks this write until the deadline; the kill
        // switch still ends it sooner (frames fed but not flushed stay in the sink's
        // buffer and go first in the farewell).
        tokio::select! {
            biased;
            _ = kill_rx.changed() => break,
            sent = write => match sent {
                Ok(()) => {}
                Err(WriteError::Socket) => {
                    queue.discard();
                    return;
                }
                Err(WriteError::Stalled) => {
                    tracing::info!(conn_queue = ?queue.bound.queued(), "cutting off a connection that stopped reading");
                    let _ = kill.send_if_modified(|current| {
                        if current.is_some() {
                            return false;
                        }
                        *current = Some(Kill::with_error(
                            RelayErrorCode::SlowConsumer,
                            format!(
                                "the connection took no frame for {} s; reconnect and resume",
                                write_timeout.as_secs_f32()
                            ),
                            close_code::TRY_AGAIN_LATER,
                        ));
                        true
                    });
                    break;
                }
            },
        }
    }
    let kill = kill_rx.borrow().clone();
    let Some(kill) = kill else {
        queue.discard();
        return;
    };
    if !kill.flush_queue {
        // A slow consumer's backlog (megabytes, perhaps) is freed now, not when the
        // farewell below gives up.
        let dropped = queue.discard();
        tracing::debug!(dropped, "discarded the queue of an ending connection");
    }
    let farewell = async {
        if kill.flush_queue {
            while let Some(item) = queue.try_recv() {
                feed(&mut sink, item, write_timeout).await?;
                timed(write_timeout, sink.flush()).await?;
            }
            queue.discard();
        }
        if let Some(error) = kill.error {
            timed(write_timeout, sink.send(Message::Text(frame_json(&RelayFrame::Error(error)).into()))).await?;
        }
        let reason = prefix_within(&kill.reason, MAX_CLOSE_REASON).to_owned();
        let close = Message::Close(Some(CloseFrame { code: kill.close_code, reason: reason.into() }));
        timed(write_timeout, sink.send(close)).await?;
        timed(write_timeout, sink.close()).await
    };
    // The peer may be gone or never read again: either way, stop after the bound.
    let bound =
        if stopping.is_cancelled() { config.close_timeout.min(SHUTDOWN_FAREWELL) } else { config.close_timeout };
    let _ = tokio::time::timeout(bound, farewell).await;
}

#[cfg(test)]
mod tests {
    use super::queue::Queued;
    use super::*;

    fn bound(frames: usize, bytes: usize) -> QueueBound {
        QueueBound::new(QueueLimits { frames, bytes })
    }

    #[test]
    fn an_ending_connection_frees_its_queue_and_refuses_more() {
        let (tx, rx) = mpsc::channel(16);
        let bound = Arc::new(bound(16, 1 << 20));
        let (kill, _) = watch::channel(None);
        let handle = ConnHandle { id: 1, tx, bound: Arc::clone(&bound), kill: Arc::new(kill) };
        let mut queue = Queue { rx, bound: Arc::clone(&bound) };
        for _ in 0..3 {
            handle.send_text("x".repeat(1000)).unwrap();
        }
        handle.send_texts_or_cut_off(vec!["y".repeat(1000), "z".repeat(1000)]);
        assert_eq!(bound.queued().frames, 5);
        assert_eq!(queue.discard(), 5);
        assert_eq!(bound.queued(), Queued::default(), "nothing is counted (or held) any more");
        assert_eq!(handle.send_text("late".into()), Err(SendError::Closed));
    }
}
