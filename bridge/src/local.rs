//! The local transport: a Unix socket (`<home>/bridge.sock`, mode 0600) speaking
//! control messages in and [`BridgeMessage`]s out, one JSON object per line, with no
//! encryption (only the user can open the socket). The same per-connection loop also
//! serves in-process clients, so both paths run the one dispatcher the same way.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use terminull_protocol::control::{BridgeMessage, Reply, ReplyErrorCode};
use terminull_protocol::ids::SessionId;
use terminull_protocol::ndjson::{LineError, NdjsonCodec};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{RwLock, broadcast, mpsc};
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::service::Service;
use crate::session::Following;

/// Messages queued per client before the bridge stops reading its requests.
const CLIENT_QUEUE: usize = 4096;

/// Why the socket could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// Binding or securing the socket failed.
    #[error("{path}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another bridge is already listening there.
    #[error("a bridge is already running on {0}")]
    InUse(PathBuf),
}

/// Binds `path` (replacing a stale socket), restricted to the user.
pub async fn bind(path: &Path) -> Result<UnixListener, LocalError> {
    let io = |source| LocalError::Io { path: path.to_owned(), source };
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(LocalError::InUse(path.to_owned()));
        }
        std::fs::remove_file(path).map_err(io)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let listener = UnixListener::bind(path).map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    Ok(listener)
}

/// Accepts clients until the task is dropped.
pub async fn serve(service: Service, listener: UnixListener) {
    let mut clients = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let service = service.clone();
                clients.spawn(async move {
                    let (read, write) = stream.into_split();
                    let (tx, mut rx) = mpsc::channel::<BridgeMessage>(CLIENT_QUEUE);
                    let writer = tokio::spawn(async move {
                        let mut out = FramedWrite::new(write, NdjsonCodec::default());
                        while let Some(message) = rx.recv().await {
                            if out.send(&message).await.is_err() {
                                break;
                            }
                        }
                    });
                    let lines =
                        FramedRead::new(read, NdjsonCodec::default()).filter_map(|r| std::future::ready(r.ok()));
                    serve_connection(service, lines, tx).await;
                    let _ = writer.await;
                });
            }
            Err(e) => tracing::warn!("accepting a local client failed: {e}"),
        }
        while clients.try_join_next().is_some() {}
    }
}

/// Orders one followed session's output on one connection: the dispatcher holds it
/// (write) from handing a message for that session to the service until its reply is
/// queued; the session's forwarder holds it (read) for each block it queues. So the
/// reply to a `user_message`, `interrupt` or `permission_response` always comes before
/// the blocks it causes, although the two are sent by different tasks.
type OrderGate = Arc<RwLock<()>>;

/// One client: every control line goes to the dispatcher; replies and followed
/// sessions' blocks go to `out`, in order per session, each reply before the blocks
/// its message causes. Returns when the client's input ends.
pub async fn serve_connection(
    service: Service,
    lines: impl futures::Stream<Item = Result<Value, LineError>> + Unpin,
    out: mpsc::Sender<BridgeMessage>,
) {
    let mut lines = lines;
    let mut followers: JoinSet<()> = JoinSet::new();
    let mut gates: HashMap<SessionId, OrderGate> = HashMap::new();
    while let Some(line) = lines.next().await {
        let value = match line {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("local client sent a bad line: {e}");
                let reply = Reply::error(None, ReplyErrorCode::InvalidMessage, e.to_string());
                if out.send(BridgeMessage::Reply(reply)).await.is_err() {
                    break;
                }
                continue;
            }
        };
        let gate = value
            .get("session_id")
            .and_then(Value::as_str)
            .and_then(|id| gates.get(&SessionId(id.to_owned())))
            .cloned();
        let held = match &gate {
            Some(gate) => Some(gate.clone().write_owned().await),
            None => None,
        };
        let Some(dispatched) = service.dispatch_value(value).await else { continue };
        if out.send(BridgeMessage::Reply(dispatched.reply)).await.is_err() {
            break;
        }
        drop(held);
        if let Some((session_id, following)) = dispatched.follow {
            let gate = gates.entry(session_id.clone()).or_default().clone();
            followers.spawn(forward(session_id, following, gate, service.clone(), out.clone()));
        }
    }
    followers.abort_all();
}

/// Sends the backlog, `replay_done`, then live blocks; after a lag, resumes from the
/// last block sent so nothing is lost or repeated. Each live block waits for a reply
/// the dispatcher is sending for this session (`gate`).
async fn forward(
    session_id: SessionId,
    following: Following,
    gate: OrderGate,
    service: Service,
    out: mpsc::Sender<BridgeMessage>,
) {
    let Following { backlog, history, mut live } = following;
    let mut last_seq = 0u64;
    for block in backlog {
        last_seq = block.seq.unwrap_or(last_seq);
        if out.send(BridgeMessage::Block { session_id: session_id.clone(), block, replay: false }).await.is_err() {
            return;
        }
    }
    let done =
        BridgeMessage::ReplayDone { session_id: session_id.clone(), last_seq: (last_seq > 0).then_some(last_seq) };
    if out.send(done).await.is_err() {
        return;
    }
    for block in history {
        if out.send(BridgeMessage::Block { session_id: session_id.clone(), block, replay: true }).await.is_err() {
            return;
        }
    }
    loop {
        match live.recv().await {
            Ok(block) => {
                let seq = block.seq.unwrap_or(0);
                if seq != 0 && seq <= last_seq {
                    continue;
                }
                last_seq = seq.max(last_seq);
                let _order = gate.read().await;
                if out
                    .send(BridgeMessage::Block { session_id: session_id.clone(), block, replay: false })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(session = %session_id, "a local client fell {missed} blocks behind; resuming from seq {last_seq}");
                let resumed = service
                    .dispatch(terminull_protocol::control::Control {
                        id: None,
                        message: terminull_protocol::control::ControlMessage::SessionResume(
                            terminull_protocol::control::SessionResume {
                                session_id: session_id.clone(),
                                since_seq: Some(last_seq),
                                since_ts: None,
                                app_pubkey: String::new(),
                            },
                        ),
                    })
                    .await;
                let Some((_, following)) = resumed.follow else { return };
                for block in following.backlog {
                    last_seq = block.seq.unwrap_or(last_seq);
                    let _order = gate.read().await;
                    if out
                        .send(BridgeMessage::Block { session_id: session_id.clone(), block, replay: false })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                live = following.live;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
