//! A small JSON-RPC 2.0 peer over any byte stream framed as NDJSON, used on both
//! ends of the adapter protocol: the bridge (which calls adapters) and adapters
//! (which answer and stream notifications). Both sides run the same code.
//!
//! Why not jsonrpsee: its client cannot answer requests from the other side and its
//! server expects HTTP/WS; over a child's stdio we need a symmetric peer, a bounded
//! line reader that survives garbage, and one writer that batches its flushes (a
//! measured ~10x throughput gain over flushing per message). See docs/adapter-protocol.md.
//!
//! Shape:
//! - [`spawn`] starts one reader task and one writer task and returns a [`Peer`]
//!   (cheap to clone; sends requests, notifications and responses) and a bounded
//!   receiver of [`Incoming`] messages, in the order the other side wrote them.
//! - Responses never go through the receiver: the reader completes the matching
//!   pending call directly, so a caller may await a response while the receiver is
//!   drained elsewhere. Drain the receiver in its own task: when it is full the reader
//!   stops reading (back-pressure on the other side), and with it the responses.
//! - When the stream ends, every pending call fails with [`CallError::Closed`] and the
//!   receiver yields `None`.

#![warn(missing_docs)]

mod incoming;
pub mod log_limit;

pub use incoming::{Held, IncomingQueue};

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use serde_json::Value;
use terminull_protocol::adapter::{AdapterNotification, AdapterRequest};
use terminull_protocol::jsonrpc::{
    Message, MessageError, Notification, ParamsError, Request, RequestId, Response, RpcError,
};
use terminull_protocol::ndjson::{LineError, NdjsonCodec};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::codec::{Encoder, FramedRead};

/// Messages queued for the writer before senders wait: one turn's burst of blocks fits.
pub const DEFAULT_OUTGOING_CAPACITY: usize = 1024;
/// Incoming messages buffered before the reader stops reading (back-pressure).
pub const DEFAULT_INCOMING_CAPACITY: usize = 1024;
/// Bytes of incoming lines buffered (until their receiver lets go of them) before the
/// reader stops reading: two of the longest lines.
pub const DEFAULT_INCOMING_BYTES: usize = 2 * terminull_protocol::ndjson::DEFAULT_MAX_LINE_BYTES;
/// Messages the writer encodes into one write and one flush at most.
const MAX_BATCH: usize = 256;

/// Tunables of a peer.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Name used in logs (`adapter claude`, `bridge`).
    pub name: String,
    /// Longest accepted line in bytes.
    pub max_line: usize,
    /// Capacity of the incoming queue, in messages.
    pub incoming_capacity: usize,
    /// Capacity of the incoming queue, in bytes of the lines its messages were read
    /// from, counted until the receiver lets go of them ([`Held`]).
    pub incoming_bytes: usize,
    /// Capacity of the outgoing queue.
    pub outgoing_capacity: usize,
}

impl PeerConfig {
    /// Defaults with the given log name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            max_line: terminull_protocol::ndjson::DEFAULT_MAX_LINE_BYTES,
            incoming_capacity: DEFAULT_INCOMING_CAPACITY,
            incoming_bytes: DEFAULT_INCOMING_BYTES,
            outgoing_capacity: DEFAULT_OUTGOING_CAPACITY,
        }
    }
}

/// Something the other side sent that is not a response.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request; answer it with [`Peer::respond`].
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A line that was too long or not JSON; it was skipped.
    BadLine(LineError),
    /// JSON that is not a JSON-RPC message; it was skipped.
    Invalid {
        /// What was wrong.
        error: MessageError,
        /// The `id`, when the value had a usable one (answer it with `INVALID_REQUEST`).
        id: Option<RequestId>,
    },
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The other side answered with an error.
    #[error("{method}: {error}")]
    Rpc {
        /// The method called.
        method: String,
        /// The error it answered.
        error: RpcError,
    },
    /// No response within the deadline.
    #[error("{method}: no response within {after:?}")]
    Timeout {
        /// The method called.
        method: String,
        /// The deadline.
        after: Duration,
    },
    /// The stream ended (or the writer failed) before the response came.
    #[error("{method}: the connection closed")]
    Closed {
        /// The method called.
        method: String,
    },
    /// The result did not decode as the method's result type.
    #[error("{method}: malformed result: {problem}")]
    BadResult {
        /// The method called.
        method: String,
        /// Which field, and what is wrong.
        problem: ParamsError,
    },
}

type PendingMap = HashMap<RequestId, (String, oneshot::Sender<Result<Value, RpcError>>)>;

/// State shared by the peer handles and the reader task. The outgoing sender is
/// deliberately not in here: the writer must end (closing the stream) when the last
/// [`Peer`] is dropped, even while the reader task is still alive.
#[derive(Debug)]
struct Shared {
    name: String,
    pending: Mutex<PendingMap>,
    next_id: AtomicI64,
    bad_lines: AtomicU64,
    /// The rate limit of this peer's warnings (bad lines, unknown ids).
    log_limit: Mutex<log_limit::LogLimit>,
    /// Set by the reader at end of stream: no response can arrive any more.
    closed: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Whether a warning about what this peer sent is logged (rate-limited per peer).
    fn admit_warning(&self) -> bool {
        self.log_limit.lock().unwrap_or_else(|e| e.into_inner()).admit(&self.name)
    }
}

/// The sending half of a connection. Clone it freely; dropping the last clone closes
/// the outgoing stream.
#[derive(Debug, Clone)]
pub struct Peer {
    out: mpsc::Sender<Outgoing>,
    shared: Arc<Shared>,
}

/// What the writer task is asked to do.
#[derive(Debug)]
enum Outgoing {
    /// Write this message.
    Message(Message),
    /// Answer once everything queued before has been written and flushed.
    Flush(oneshot::Sender<()>),
}

/// The reader and writer tasks; aborted when dropped.
#[derive(Debug)]
pub struct PeerTasks {
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl PeerTasks {
    /// Waits until the reader has seen the end of the stream.
    pub async fn reader_finished(&mut self) {
        let _ = (&mut self.reader).await;
    }
}

impl Drop for PeerTasks {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

/// Starts a peer on a byte stream pair.
pub fn spawn<R, W>(reader: R, writer: W, config: PeerConfig) -> Endpoint
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::channel(config.outgoing_capacity.max(1));
    let (in_tx, in_rx) = incoming::channel(config.incoming_capacity, config.incoming_bytes);
    let shared = Arc::new(Shared {
        name: config.name.clone(),
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicI64::new(1),
        bad_lines: AtomicU64::new(0),
        log_limit: Mutex::new(log_limit::LogLimit::default()),
        closed: std::sync::atomic::AtomicBool::new(false),
    });
    let writer = tokio::spawn(write_loop(writer, out_rx, config.name.clone()));
    let reader = tokio::spawn(read_loop(reader, in_tx, shared.clone(), config.max_line));
    (Peer { out: out_tx, shared }, in_rx, PeerTasks { reader, writer })
}

/// One end of a connection: the sending handle, the incoming messages, the tasks.
pub type Endpoint = (Peer, IncomingQueue, PeerTasks);

/// Two peers connected in memory, for tests: what one sends, the other receives.
pub fn memory_pair() -> (Endpoint, Endpoint) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let (a_read, a_write) = tokio::io::split(a);
    let (b_read, b_write) = tokio::io::split(b);
    (spawn(a_read, a_write, PeerConfig::named("memory-a")), spawn(b_read, b_write, PeerConfig::named("memory-b")))
}

impl Peer {
    /// The name used in logs.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Lines skipped so far because they were too long or not JSON.
    pub fn bad_lines(&self) -> u64 {
        self.shared.bad_lines.load(Ordering::Relaxed)
    }

    /// Calls a typed method and decodes its result.
    pub async fn request<M: AdapterRequest>(
        &self,
        params: &M::Params,
        timeout: Option<Duration>,
    ) -> Result<M::Result, CallError> {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        let result = self.request_raw(M::METHOD, params, timeout).await?;
        terminull_protocol::jsonrpc::decode_params(&result)
            .map_err(|problem| CallError::BadResult { method: M::METHOD.to_owned(), problem })
    }

    /// Calls a method by name with raw params.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let id = RequestId::Int(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.lock_pending().insert(id.clone(), (method.to_owned(), tx));
        // After the reader has seen the end of the stream nobody would answer: fail now
        // instead of at the deadline. (The reader sets `closed` before it drains the
        // pending table, so a call is either drained or sees the flag.)
        if self.shared.closed.load(Ordering::SeqCst) {
            self.lock_pending().remove(&id);
            return Err(CallError::Closed { method: method.to_owned() });
        }
        let request = Message::Request(Request { id: id.clone(), method: method.to_owned(), params });
        if self.out.send(Outgoing::Message(request)).await.is_err() {
            self.lock_pending().remove(&id);
            return Err(CallError::Closed { method: method.to_owned() });
        }
        let outcome = match timeout {
            Some(after) => match tokio::time::timeout(after, rx).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    self.lock_pending().remove(&id);
                    return Err(CallError::Timeout { method: method.to_owned(), after });
                }
            },
            None => rx.await,
        };
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(CallError::Rpc { method: method.to_owned(), error }),
            Err(_) => Err(CallError::Closed { method: method.to_owned() }),
        }
    }

    /// Sends a typed notification.
    pub async fn notify<M: AdapterNotification>(&self, params: &M::Params) -> Result<(), CallError> {
        self.send(Message::Notification(Notification::typed::<M>(params)), M::METHOD).await
    }

    /// Sends a notification by name with raw params.
    pub async fn notify_raw(&self, method: &str, params: Value) -> Result<(), CallError> {
        self.send(Message::Notification(Notification { method: method.to_owned(), params }), method).await
    }

    /// Answers a request.
    pub async fn respond(&self, id: RequestId, outcome: Result<Value, RpcError>) -> Result<(), CallError> {
        self.send(Message::Response(Response { id: Some(id), outcome }), "response").await
    }

    /// Sends any message (also responses with a null id).
    pub async fn send(&self, message: Message, what: &str) -> Result<(), CallError> {
        self.out.send(Outgoing::Message(message)).await.map_err(|_| CallError::Closed { method: what.to_owned() })
    }

    /// Waits until everything sent before this call is written and flushed (e.g.
    /// before a process exits after answering `stop`).
    pub async fn flush(&self) -> Result<(), CallError> {
        let closed = || CallError::Closed { method: "flush".to_owned() };
        let (tx, rx) = oneshot::channel();
        self.out.send(Outgoing::Flush(tx)).await.map_err(|_| closed())?;
        rx.await.map_err(|_| closed())
    }

    /// Number of calls still waiting for a response.
    pub fn pending_calls(&self) -> usize {
        self.lock_pending().len()
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, PendingMap> {
        lock(&self.shared.pending)
    }
}

/// A poisoned lock only means another task panicked while holding it; the map itself
/// is still consistent (every operation on it is a single insert or remove).
fn lock(m: &Mutex<PendingMap>) -> std::sync::MutexGuard<'_, PendingMap> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut rx: mpsc::Receiver<Outgoing>, name: String) {
    let mut codec = NdjsonCodec::default();
    let mut buf = BytesMut::new();
    let mut flushed = Vec::new();
    while let Some(first) = rx.recv().await {
        buf.clear();
        let mut batch = 0;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Outgoing::Message(message) => {
                    if let Err(e) = codec.encode(message.to_value(), &mut buf) {
                        tracing::error!(peer = %name, "cannot encode an outgoing message: {e}");
                    }
                }
                Outgoing::Flush(done) => flushed.push(done),
            }
            batch += 1;
            if batch < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if let Err(e) = writer.write_all(&buf).await {
            tracing::debug!(peer = %name, "write failed, closing: {e}");
            return;
        }
        if let Err(e) = writer.flush().await {
            tracing::debug!(peer = %name, "flush failed, closing: {e}");
            return;
        }
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
    // Every sender is gone: close our end so the other side sees EOF.
    let _ = writer.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    tx: incoming::IncomingSender,
    shared: Arc<Shared>,
    max_line: usize,
) {
    let mut lines = FramedRead::new(reader, NdjsonCodec::new(max_line));
    while let Some(item) = lines.next().await {
        let incoming = match item {
            Err(e) => {
                tracing::debug!(peer = %shared.name, "read failed: {e}");
                break;
            }
            Ok(Err(line_error)) => {
                shared.bad_lines.fetch_add(1, Ordering::Relaxed);
                if shared.admit_warning() {
                    tracing::warn!(peer = %shared.name, "skipped a line: {line_error}");
                }
                Incoming::BadLine(line_error)
            }
            Ok(Ok(value)) => {
                let id = value.get("id").and_then(RequestId::from_value);
                match Message::from_value(value) {
                    Ok(Message::Response(response)) => {
                        complete(&shared, response);
                        continue;
                    }
                    Ok(Message::Request(r)) => Incoming::Request(r),
                    Ok(Message::Notification(n)) => Incoming::Notification(n),
                    Err(error) => {
                        if shared.admit_warning() {
                            tracing::warn!(peer = %shared.name, "skipped a message that is not JSON-RPC: {error}");
                        }
                        Incoming::Invalid { error, id }
                    }
                }
            }
        };
        let bytes = lines.decoder().last_line_bytes();
        if tx.send(incoming, bytes).await.is_err() {
            // Nobody listens for requests any more; keep completing responses.
            continue;
        }
    }
    // End of stream: nothing pending can be answered now.
    shared.closed.store(true, Ordering::SeqCst);
    let pending: Vec<_> = lock(&shared.pending).drain().collect();
    drop(pending);
}

fn complete(shared: &Shared, response: Response) {
    let Some(id) = response.id else {
        if shared.admit_warning() {
            tracing::warn!(peer = %shared.name, "error response without id: {:?}", response.outcome);
        }
        return;
    };
    match lock(&shared.pending).remove(&id) {
        Some((_, tx)) => {
            let _ = tx.send(response.outcome);
        }
        None => {
            if shared.admit_warning() {
                tracing::warn!(peer = %shared.name, "response to unknown request id {id}");
            }
        }
    }
}

#[cfg(test)]
mod tests;
