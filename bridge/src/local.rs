//! The local transport: a Unix socket (`<home>/bridge.sock`, mode 0600) speaking
//! control messages in and [`BridgeMessage`]s out, one JSON object per line, with no
//! encryption (only the user can open the socket). Each client is served by the one
//! connection loop ([`crate::connection`]); this file only binds the socket, parses
//! the lines and writes the answers.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use futures::{SinkExt, StreamExt};
use serde_json::Value;
#[cfg(doc)]
use terminull_protocol::control::BridgeMessage;
use terminull_protocol::ndjson::{LineError, NdjsonCodec};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::connection::{self, Inbound, Malformed, OutboundQueue, Peer};
use crate::service::Service;

/// What is queued per client before the bridge stops reading its requests (and the
/// client's followers fall behind, to resume from history).
const CLIENT_QUEUE: OutboundQueue = OutboundQueue { max_messages: 4096, max_bytes: 8 << 20 };

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
        terminull_net::private_file::create_private_dir_all(dir).map_err(io)?;
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
                clients.spawn(serve_client(service.clone(), stream));
            }
            Err(e) => tracing::warn!("accepting a local client failed: {e}"),
        }
        while clients.try_join_next().is_some() {}
    }
}

/// One client: its lines, parsed, go through the connection loop; what comes back is
/// written one message per line.
async fn serve_client(service: Service, stream: UnixStream) {
    let (read, write) = stream.into_split();
    let (tx, mut rx) = CLIENT_QUEUE.open::<()>();
    let writer = tokio::spawn(async move {
        let mut out = FramedWrite::new(write, NdjsonCodec::default());
        while let Some(message) = rx.recv().await {
            if out.send(&message.into_message()).await.is_err() {
                break;
            }
        }
    });
    let inbound = FramedRead::new(read, NdjsonCodec::default())
        .filter_map(|read| std::future::ready(read.ok().and_then(parse_line)));
    connection::serve(service, Peer::Local, inbound, tx).await;
    let _ = writer.await;
}

/// One line of the socket: a control message, a malformed one, or nothing (an
/// unknown type, ignored).
fn parse_line(line: Result<Value, LineError>) -> Option<Inbound> {
    match line {
        Ok(value) => connection::parse(value),
        Err(e) => Some(Malformed::Line(e).into()),
    }
}
