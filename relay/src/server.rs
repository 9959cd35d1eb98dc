//! Starting and stopping the relay: one listening socket serves the WebSocket endpoints
//! and the HTTP API, over TLS when the configuration names a certificate and key.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use crate::config::{RelayConfig, StoreLocation};
use crate::error::RelayError;
use crate::hub::Hub;
use crate::hub::push::sweep_interval;
use crate::peers::{PeerSlot, Peers};
use crate::store::Store;
use crate::webpush::{EndpointPolicy, PushSender};

/// The largest HTTP request head (request line and headers) hyper buffers.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long stopping waits for connections to finish before closing the store anyway.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The relay server.
#[derive(Debug)]
pub struct Relay;

impl Relay {
    /// Opens the store `config.store` names, binds `config.listen` and starts serving.
    pub async fn start(config: RelayConfig) -> Result<RunningRelay, RelayError> {
        config.validate()?;
        if config.store == StoreLocation::Redb {
            std::fs::create_dir_all(&config.data_dir)
                .map_err(|source| RelayError::DataDir { path: config.data_dir.clone(), source })?;
        }
        let tls = config.tls.as_ref().map(crate::tls::acceptor).transpose()?;
        let (store, snapshot) = Store::open(&config).await?;
        let sender = match PushSender::new(snapshot.vapid_key.clone(), config.vapid_subject.clone()) {
            Ok(sender) => sender
                .with_timeout(config.push_timeout)
                .allow_plain_http(config.allow_insecure_push_endpoints)
                .with_policy(EndpointPolicy::new(config.push_allowed_hosts.clone())),
            Err(e) => {
                store.close().await;
                return Err(e.into());
            }
        };
        let listener = match TcpListener::bind(config.listen).await {
            Ok(listener) => listener,
            Err(source) => {
                store.close().await;
                return Err(RelayError::Bind { addr: config.listen, source });
            }
        };
        let addr = listener.local_addr().map_err(|source| RelayError::Bind { addr: config.listen, source })?;
        let secure = tls.is_some();
        let hub = Arc::new(Hub::new(Arc::new(config), store, snapshot, sender));
        if let (Some(bus), StoreLocation::Postgres { url }) = (&hub.config.bus, &hub.config.store) {
            if let Err(e) = crate::bus::start(Arc::clone(&hub), bus, url).await {
                hub.shutdown.cancel();
                hub.store().close().await;
                return Err(e);
            }
        } else if hub.config.bus.is_some() {
            hub.store().close().await;
            return Err(RelayError::Bus("the bus needs a shared store (--store postgres://…)".into()));
        }
        let router = crate::http_api::router(Arc::clone(&hub));
        let peers = Peers::new(&hub.config);
        hub.tasks.spawn(accept_loop(Arc::clone(&hub), listener, router, tls, peers));
        hub.tasks.spawn(sweep_loop(Arc::clone(&hub)));
        hub.tasks.spawn(crate::hub::expiry::sweep_registrations(Arc::clone(&hub)));
        tracing::info!(%addr, tls = secure, "relay listening");
        Ok(RunningRelay { addr, secure, hub })
    }
}

/// A started relay. Stop it with [`RunningRelay::shutdown`]; dropping it closes every
/// connection and stops accepting without waiting.
#[derive(Debug)]
pub struct RunningRelay {
    addr: SocketAddr,
    secure: bool,
    hub: Arc<Hub>,
}

impl RunningRelay {
    /// The bound address (the real port when the configuration asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The WebSocket base URL, `ws://ADDR` or `wss://ADDR`; the endpoints are
    /// `/v1/bridge` and `/v1/client` under it.
    pub fn ws_url(&self) -> String {
        format!("{}://{}", if self.secure { "wss" } else { "ws" }, self.addr)
    }

    /// The HTTP base URL, `http://ADDR` or `https://ADDR`.
    pub fn http_url(&self) -> String {
        format!("{}://{}", if self.secure { "https" } else { "http" }, self.addr)
    }

    /// Stops accepting, closes every connection with "going away", waits (bounded) for
    /// the connection tasks, then commits and closes the store.
    pub async fn shutdown(self) {
        let hub = Arc::clone(&self.hub);
        // Other nodes close their devices' links to the bridges connected here now.
        hub.announce_leaving().await;
        drop(self);
        hub.tasks.close();
        if tokio::time::timeout(STOP_GRACE, hub.tasks.wait()).await.is_err() {
            tracing::warn!(left = hub.tasks.len(), "connections still open after the grace period; closing the store");
        }
        hub.store().close().await;
        tracing::info!("relay stopped");
    }
}

impl Drop for RunningRelay {
    fn drop(&mut self) {
        self.hub.shutdown.cancel();
        self.hub.stop_connections();
    }
}

/// Accepts TCP connections until shutdown, each admitted by `peers` (per address, and
/// while unauthenticated) and served by hyper (HTTP/1.1 with upgrades).
async fn accept_loop(
    hub: Arc<Hub>,
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    peers: Arc<Peers>,
) {
    let refusal = refused_response();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = hub.shutdown.cancelled() => return,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let admission = match peers.admit(peer.ip()) {
            Ok(admission) => admission,
            Err(refused) => {
                tracing::debug!(%peer, %refused, "refusing a connection");
                if tls.is_none() {
                    // Best effort, never waiting: the socket is closed right after.
                    let _ = tcp.try_write(refusal.as_bytes());
                }
                continue;
            }
        };
        // Only latency is at stake; a refusal changes nothing.
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        let conn_hub = Arc::clone(&hub);
        hub.tasks.spawn(async move {
            match tls {
                None => serve_connection(conn_hub, tcp, peer, router, admission).await,
                Some(acceptor) => {
                    let timeout = conn_hub.config.tls_handshake_timeout;
                    match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_connection(conn_hub, stream, peer, router, admission).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// Serves HTTP/1.1 on one connection, handing upgraded WebSockets to the router's
/// handlers (with `admission`, the connection's place in the per-address table). Request
/// heads must arrive within `http_header_timeout` (an idle keep-alive connection is
/// closed after as long); after `http_connection_lifetime`, or on shutdown, the request
/// in progress is finished (within the longer of `http_body_timeout` and `pair_timeout`)
/// and the connection closed. A connection that became a WebSocket has left this
/// function by then: its bounds are the WebSocket's own.
async fn serve_connection<S>(hub: Arc<Hub>, io: S, peer: SocketAddr, router: Router, admission: Arc<PeerSlot>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request.extensions_mut().insert(Arc::clone(&admission));
        router.clone().oneshot(request)
    });
    let config = &hub.config;
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(config.http_header_timeout).max_buf_size(MAX_HEAD_BYTES);
    let connection = builder.serve_connection(TokioIo::new(io), service).with_upgrades();
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = hub.shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        _ = tokio::time::sleep(config.http_connection_lifetime) => {
            connection.as_mut().graceful_shutdown();
            // A pairing request in progress may wait for its bridge that long.
            let grace = config.http_body_timeout.max(config.pair_timeout);
            match tokio::time::timeout(grace, connection).await {
                Ok(result) => result,
                Err(_) => {
                    tracing::debug!(%peer, "closing an HTTP connection that outlived its bound");
                    return;
                }
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
    }
}

/// What a connection refused by the per-address bounds gets (plain HTTP only), written
/// without waiting before the socket is closed.
fn refused_response() -> String {
    let body = r#"{"error":"too many connections from this address to the relay; retry later"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\nRetry-After: 10\r\n\r\n{body}",
        body.len()
    )
}

/// Drops expired held pushes now and then.
async fn sweep_loop(hub: Arc<Hub>) {
    let mut tick = tokio::time::interval(sweep_interval(hub.config.push_ttl));
    loop {
        tokio::select! {
            _ = tick.tick() => hub.expire_held_pushes(),
            _ = hub.shutdown.cancelled() => return,
        }
    }
}
