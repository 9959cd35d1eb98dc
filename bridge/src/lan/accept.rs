//! The LAN server's accept loop: TCP connections admitted per IP and in all before
//! anything is read from them, each served by hyper (HTTP/1.1 with upgrades) with a
//! deadline for the request's headers, so sockets that never send a request cannot
//! pile up.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tower::ServiceExt;

use super::LanConfig;
use super::limits::{Admitted, Counter};

/// Accepts until `stopping` becomes true.
pub(super) async fn accept_loop(
    listener: TcpListener,
    router: Router,
    config: Arc<LanConfig>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let open = Arc::new(Counter::default());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                tracing::warn!("the LAN server could not accept a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(admitted) = open.admit(peer.ip(), config.max_tcp_per_ip, config.max_tcp) else {
            tracing::debug!(%peer, "too many TCP connections from this address (or in all); dropped");
            continue;
        };
        // Without TCP_NODELAY a small frame (a reply, one block) waits for the peer's
        // delayed ACK: the end-to-end benchmark measured 24 ms p50 per block on loopback.
        let _ = tcp.set_nodelay(true);
        let (router, config, stopping) = (router.clone(), config.clone(), stopping.clone());
        tokio::spawn(serve_connection(tcp, peer, router, config, stopping, admitted));
    }
}

/// Serves HTTP/1.1 on one connection (its place in the budget held until it ends),
/// handing upgraded WebSockets to the router's handlers.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    config: Arc<LanConfig>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    _admitted: Admitted,
) {
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(config.auth_timeout);
    let connection = builder.serve_connection(TokioIo::new(tcp), service).with_upgrades();
    tokio::select! {
        result = connection => {
            if let Err(e) = result {
                tracing::debug!(%peer, "LAN HTTP connection ended: {e}");
            }
        }
        _ = stopping.wait_for(|stop| *stop) => {}
    }
}
