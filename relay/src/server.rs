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

use crate::config::RelayConfig;
use crate::error::RelayError;
use crate::hub::Hub;
use crate::hub::push::sweep_interval;
use crate::store::Store;
use crate::webpush::{EndpointPolicy, PushSender};

/// How long an HTTP client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long stopping waits for connections to finish before closing the store anyway.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The relay server.
#[derive(Debug)]
pub struct Relay;

impl Relay {
    /// Opens the store in `config.data_dir`, binds `config.listen` and starts serving.
    pub async fn start(config: RelayConfig) -> Result<RunningRelay, RelayError> {
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|source| RelayError::DataDir { path: config.data_dir.clone(), source })?;
        let tls = config.tls.as_ref().map(crate::tls::acceptor).transpose()?;
        let dir = config.data_dir.clone();
        let queue_ops = config.store_queue_ops;
        let (store, snapshot) = tokio::task::spawn_blocking(move || Store::open(&dir, queue_ops))
            .await
            .map_err(RelayError::StoreLoader)??;
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
        let router = crate::http_api::router(Arc::clone(&hub));
        hub.tasks.spawn(accept_loop(Arc::clone(&hub), listener, router, tls));
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

/// Accepts TCP connections until shutdown, each served by hyper (HTTP/1.1 with upgrades).
async fn accept_loop(hub: Arc<Hub>, listener: TcpListener, router: Router, tls: Option<TlsAcceptor>) {
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
        // Only latency is at stake; a refusal changes nothing.
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        let conn_hub = Arc::clone(&hub);
        hub.tasks.spawn(async move {
            match tls {
                None => serve_connection(conn_hub, tcp, peer, router).await,
                Some(acceptor) => {
                    let timeout = conn_hub.config.tls_handshake_timeout;
                    match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_connection(conn_hub, stream, peer, router).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// Serves HTTP/1.1 on one connection, handing upgraded WebSockets to the router's
/// handlers; on shutdown, finishes the request in progress and closes.
async fn serve_connection<S>(hub: Arc<Hub>, io: S, peer: SocketAddr, router: Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let connection = builder.serve_connection(TokioIo::new(io), service).with_upgrades();
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = hub.shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
    }
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
