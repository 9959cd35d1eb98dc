//! The start every relay connection shares: open its I/O with the bounds of its side,
//! send a `challenge` and wait, up to `auth_timeout`, for the frame that answers it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::WebSocket;
use terminull_protocol::crypto::{b64url, random_bytes};
use terminull_protocol::relay::{Challenge, RelayErrorCode, RelayFrame};
use tokio::time::Instant;

use crate::config::RelayConfig;
use crate::conn::{ConnId, ConnIo, Inbound, InboundLimits, Kill, QueueLimits, close_code};
use crate::hub::Hub;
use crate::limits::deadline_after;

/// Which side of the relay a connection comes from: it sets the queue and rate bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Side {
    /// A bridge (`/v1/bridge`).
    Bridge,
    /// A device (`/v1/client`).
    Client,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Bridge => "bridge",
            Side::Client => "client",
        }
    }

    fn queue(self, config: &RelayConfig) -> QueueLimits {
        match self {
            Side::Bridge => QueueLimits { frames: config.bridge_queue_frames, bytes: config.bridge_queue_bytes },
            Side::Client => QueueLimits { frames: config.client_queue_frames, bytes: config.client_queue_bytes },
        }
    }

    fn limits(self, config: &RelayConfig) -> InboundLimits {
        match self {
            Side::Bridge => {
                InboundLimits { frames_per_sec: config.bridge_frames_per_sec, burst: config.bridge_frames_burst }
            }
            Side::Client => {
                InboundLimits { frames_per_sec: config.client_frames_per_sec, burst: config.client_frames_burst }
            }
        }
    }
}

/// A connection whose peer has answered the challenge (not yet checked).
pub(crate) struct Challenged {
    /// The connection's number.
    pub(crate) id: ConnId,
    /// Its I/O.
    pub(crate) io: ConnIo,
    /// The challenge the answer must sign.
    pub(crate) nonce: [u8; 32],
    /// The answer.
    pub(crate) answer: RelayFrame,
}

/// Opens `socket` for `side`, challenges the peer and waits for its answer. `Err`
/// holds the I/O to finish when the peer left or timed out first.
pub(crate) async fn challenge(
    hub: &Hub,
    socket: WebSocket,
    peer: SocketAddr,
    side: Side,
) -> Result<Challenged, ConnIo> {
    let id = hub.next_conn_id();
    let config = Arc::clone(&hub.config);
    let mut io = ConnIo::start(
        socket,
        id,
        side.name(),
        side.queue(&config),
        side.limits(&config),
        Arc::clone(&config),
        hub.shutdown.clone(),
    );
    tracing::debug!(conn = id, %peer, "{} connection opened", side.name());

    let nonce = random_bytes::<32>();
    // A fresh queue has room for the first frame.
    let _ = io.handle.send_frame(&RelayFrame::Challenge(Challenge { nonce: b64url(&nonce) }));
    let deadline = deadline_after(Instant::now(), config.auth_timeout);
    match io.next_frame(Some(deadline)).await {
        Inbound::Frame(answer) => Ok(Challenged { id, io, nonce, answer: *answer }),
        Inbound::Batch(_) => {
            let message = format!(
                "expected `{}` answering the challenge, got `batch`",
                match side {
                    Side::Bridge => "register",
                    Side::Client => "auth",
                }
            );
            io.handle.kill(Kill::with_error(RelayErrorCode::BadFrame, message, close_code::POLICY).after_queue());
            Err(io)
        }
        Inbound::Ended => Err(io),
    }
}
