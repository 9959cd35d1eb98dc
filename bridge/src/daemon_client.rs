//! A client of the bridge daemon for the command line and tests (not to be confused
//! with the device, the remote client): over the local socket when a daemon runs,
//! otherwise an in-process bridge behind the same connection loop
//! ([`crate::connection`]).

use std::path::Path;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use terminull_protocol::control::{BridgeMessage, Control, ControlMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::ids::SessionId;
use terminull_protocol::ndjson::NdjsonCodec;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::connection::{self, Outbound, OutboundQueue, OutboundReceiver, Peer};
use crate::service::Service;

/// Messages buffered from the bridge.
const INBOX: usize = 4096;
/// Bytes queued for an in-process client at most (see [`OutboundQueue`]).
const INBOX_BYTES: usize = 8 << 20;

/// A connection to a bridge.
#[derive(Debug)]
pub struct Client {
    tx: mpsc::Sender<Value>,
    rx: Inbox,
    next_id: u64,
    /// The bridge this client runs in-process, when there is no daemon.
    in_process: Option<Service>,
}

/// Where a client's messages from the bridge arrive.
#[derive(Debug)]
enum Inbox {
    /// Straight from the connection loop of an in-process bridge.
    Loop(OutboundReceiver),
    /// Read from the socket, or opened by a device-side link.
    Messages(mpsc::Receiver<BridgeMessage>),
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The bridge went away.
    #[error("the bridge closed the connection")]
    Closed,
    /// The bridge refused the message.
    #[error("{message}")]
    Refused {
        /// The error code.
        code: terminull_protocol::control::ReplyErrorCode,
        /// The bridge's explanation.
        message: String,
    },
    /// A link refused the message before dispatching it (only an encrypted link
    /// sends this; docs/control-messages.md#refused).
    #[error("refused ({}): {message}", reason.as_str())]
    LinkRefused {
        /// The reason code.
        reason: terminull_protocol::control::RefusalReason,
        /// The bridge's explanation.
        message: String,
    },
    /// The socket could not be opened.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The bridge answered with a result of another kind than the request's.
    #[error("unexpected reply: {0}")]
    UnexpectedReply(String),
}

impl Client {
    /// A client of a bridge running in this process.
    pub fn in_process(service: &Service) -> Self {
        Self::in_process_with_inbox(service, INBOX)
    }

    /// [`in_process`](Self::in_process) with room for `inbox` messages before the bridge
    /// waits on this client (a small inbox makes a slow client fall behind sooner).
    pub fn in_process_with_inbox(service: &Service, inbox: usize) -> Self {
        let (tx, mut values) = mpsc::channel::<Value>(64);
        let (out_tx, rx) = OutboundQueue { max_messages: inbox, max_bytes: INBOX_BYTES }.open();
        let inbound = futures::stream::poll_fn(move |cx| values.poll_recv(cx))
            .filter_map(|value| std::future::ready(connection::parse(value)));
        tokio::spawn(connection::serve(service.clone(), Peer::Local, inbound, out_tx));
        Client { tx, rx: Inbox::Loop(rx), next_id: 0, in_process: Some(service.clone()) }
    }

    /// A client of the daemon listening on `socket`.
    pub async fn connect(socket: &Path) -> Result<Self, ClientError> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Connect { path: socket.display().to_string(), source })?;
        let (read, write) = stream.into_split();
        let (tx, mut lines_rx) = mpsc::channel::<Value>(64);
        tokio::spawn(async move {
            let mut out = FramedWrite::new(write, NdjsonCodec::default());
            while let Some(v) = lines_rx.recv().await {
                if out.send(&v).await.is_err() {
                    break;
                }
            }
        });
        let (out_tx, rx) = mpsc::channel(INBOX);
        tokio::spawn(async move {
            let mut lines = FramedRead::new(read, NdjsonCodec::default());
            while let Some(Ok(line)) = lines.next().await {
                let message = match line.map(serde_json::from_value::<BridgeMessage>) {
                    Ok(Ok(m)) => m,
                    Ok(Err(e)) => {
                        tracing::warn!("unreadable message from the bridge: {e}");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("bad line from the bridge: {e}");
                        continue;
                    }
                };
                if out_tx.send(message).await.is_err() {
                    break;
                }
            }
        });
        Ok(Client { tx, rx: Inbox::Messages(rx), next_id: 0, in_process: None })
    }

    /// A client of a bridge reached through a relay: the device-side link of
    /// [`terminull_client::connection`], which seals what is sent and opens what arrives.
    pub fn remote(connection: terminull_client::connection::Connection) -> Self {
        Client { tx: connection.tx, rx: Inbox::Messages(connection.rx), next_id: 0, in_process: None }
    }

    /// True when the bridge runs inside this process (no daemon was found).
    pub fn is_in_process(&self) -> bool {
        self.in_process.is_some()
    }

    /// Sends a raw control value (tests use it for malformed messages).
    pub async fn send_raw(&mut self, value: Value) -> Result<(), ClientError> {
        self.tx.send(value).await.map_err(|_| ClientError::Closed)
    }

    /// Sends a control message and returns its correlation id.
    pub async fn send(&mut self, message: ControlMessage) -> Result<String, ClientError> {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let value = serde_json::to_value(Control { id: Some(id.clone()), message }).map_err(|_| ClientError::Closed)?;
        self.send_raw(value).await?;
        Ok(id)
    }

    /// The next message from the bridge; `None` when it is gone.
    pub async fn next(&mut self) -> Option<BridgeMessage> {
        match &mut self.rx {
            Inbox::Loop(rx) => rx.recv().await.map(Outbound::into_message),
            Inbox::Messages(rx) => rx.recv().await,
        }
    }

    /// Sends a control message and waits for its reply; other messages that arrive
    /// meanwhile are appended to `kept`, in order.
    pub async fn call(
        &mut self,
        message: ControlMessage,
        kept: &mut Vec<BridgeMessage>,
    ) -> Result<ReplyResult, ClientError> {
        let id = self.send(message).await?;
        loop {
            match self.next().await.ok_or(ClientError::Closed)? {
                BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id) => {
                    return match r.outcome {
                        ReplyOutcome::Ok { result } => Ok(result),
                        ReplyOutcome::Error { error } => {
                            Err(ClientError::Refused { code: error.code, message: error.message })
                        }
                        ReplyOutcome::Refused { reason, message, .. } => {
                            Err(ClientError::LinkRefused { reason, message })
                        }
                    };
                }
                other => kept.push(other),
            }
        }
    }

    /// Sends a `files` request about `session`'s directory and waits for its result
    /// (docs/files-and-git.md); other messages meanwhile are appended to `kept`.
    pub async fn files(
        &mut self,
        session: &SessionId,
        request: terminull_protocol::files::FilesRequest,
        kept: &mut Vec<BridgeMessage>,
    ) -> Result<terminull_protocol::files::FilesResult, ClientError> {
        let message =
            ControlMessage::Files(terminull_protocol::control::Files { session_id: session.clone(), request });
        match self.call(message, kept).await? {
            ReplyResult::Files { result } => Ok(result),
            other => Err(ClientError::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// Sends a `git` request about the repository of `session`'s directory and waits
    /// for its result; other messages meanwhile are appended to `kept`.
    pub async fn git(
        &mut self,
        session: &SessionId,
        request: terminull_protocol::git::GitRequest,
        kept: &mut Vec<BridgeMessage>,
    ) -> Result<terminull_protocol::git::GitResult, ClientError> {
        let message = ControlMessage::Git(terminull_protocol::control::Git { session_id: session.clone(), request });
        match self.call(message, kept).await? {
            ReplyResult::Git { result } => Ok(result),
            other => Err(ClientError::UnexpectedReply(format!("{other:?}"))),
        }
    }
}
