//! Everything the relay can be told: where to listen, where to keep its state, and every
//! bound it enforces. Each field's default is stated in its doc comment and set by
//! [`RelayConfig::new`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::ConfigError;
use crate::webpush::AllowedHost;

/// A PEM certificate chain and its private key: the relay terminates TLS itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, PEM, leaf first.
    pub cert_chain: PathBuf,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub private_key: PathBuf,
}

/// Where the relay keeps its durable state.
#[derive(Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StoreLocation {
    /// `relay.redb` in the data directory: one relay process.
    #[default]
    Redb,
    /// A Postgres database, shared by any number of relay processes.
    Postgres {
        /// A `postgres://user:password@host:port/database` URL or `key=value` pairs.
        url: String,
    },
}

impl StoreLocation {
    /// `redb`, or a `postgres://`/`postgresql://` URL.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text == "redb" {
            Ok(Self::Redb)
        } else if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            text.parse::<tokio_postgres::Config>().map_err(|e| format!("not a usable Postgres URL: {e}"))?;
            Ok(Self::Postgres { url: text.to_owned() })
        } else {
            Err("expected `redb` or a postgres:// URL".to_owned())
        }
    }
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Redb => f.write_str("Redb"),
            // Never the password.
            Self::Postgres { url } => write!(f, "Postgres({})", postgres_location(url)),
        }
    }
}

/// Host, port and database of `url`, for messages: never the password. `url` is
/// anything `tokio_postgres::Config` parses (a URL or `key=value` pairs).
pub(crate) fn postgres_location(url: &str) -> String {
    let Ok(config) = url.parse::<tokio_postgres::Config>() else { return "postgres (unparsable URL)".to_owned() };
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("postgres://{host}:{port}/{}", config.get_dbname().unwrap_or("(default)"))
}

/// The relay's configuration. Build it with [`RelayConfig::new`] and change the fields
/// that need to differ from the defaults.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// The address to bind; port 0 picks a free port (see `RunningRelay::addr`).
    pub listen: SocketAddr,
    /// The directory holding the relay's database (`relay.redb`); created if missing.
    /// Unused with [`StoreLocation::Postgres`].
    pub data_dir: PathBuf,
    /// Where the durable state lives. Default [`StoreLocation::Redb`] in `data_dir`.
    pub store: StoreLocation,
    /// A NATS URL (`nats://host:port`) connecting the relay processes that share a
    /// Postgres store: each announces the bridges whose stored state it changed and
    /// reloads those the others changed. Default none (one process).
    pub bus: Option<String>,
    /// Terminate TLS with these files; `None` serves plain HTTP/WebSocket, meant to sit
    /// behind a TLS-terminating proxy.
    pub tls: Option<TlsFiles>,
    /// The VAPID `sub` claim (a `mailto:` or `https:` URL where push services can reach
    /// the operator). Default `mailto:relay-operator@terminull.invalid`.
    pub vapid_subject: String,

    /// The largest WebSocket message (and frame) accepted, in bytes. Default 1 MiB.
    pub max_message_bytes: usize,
    /// Frames queued toward one client connection before it is cut off as a slow
    /// consumer. Default 1024. A batch's blocks are queued together, and admitted
    /// whole when the queue is empty, so a queue holds at most the larger of this and
    /// one batch (`MAX_BATCH_BLOCKS` frames).
    pub client_queue_frames: usize,
    /// Bytes queued toward one client connection (the frames' JSON text, as allocated)
    /// before it is cut off as a slow consumer, whatever the frame count. Default 8 MiB.
    /// Like the frame bound, one item (a batch's blocks, at most `max_message_bytes` of
    /// text) is admitted whole into an empty queue.
    pub client_queue_bytes: usize,
    /// Frames queued toward one bridge connection. Default 8192.
    pub bridge_queue_frames: usize,
    /// Bytes queued toward one bridge connection; past it a device's frame for the
    /// bridge is refused (`rate_limited`) and a relay frame cuts the bridge off.
    /// Default 32 MiB.
    pub bridge_queue_bytes: usize,
    /// How long the socket may take to accept one queued frame (or a ping, or the final
    /// flush of a write) before the connection is cut off as a slow consumer. It runs in
    /// the writer, apart from the read loop: a peer that stops reading is cut off even
    /// while it keeps sending. Default 20 s.
    pub write_timeout: Duration,
    /// Frames per second a client connection may send (token bucket rate). Default 200.
    pub client_frames_per_sec: u32,
    /// The client token bucket's burst. Default 400.
    pub client_frames_burst: u32,
    /// Frames per second a bridge connection may send, a `batch` counting as its number
    /// of blocks (a batch larger than what is left puts the bucket in debt: the frames
    /// after it wait). Default 5000 (history replays come in bursts).
    pub bridge_frames_per_sec: u32,
    /// The bridge token bucket's burst. Default 20 000.
    pub bridge_frames_burst: u32,
    /// Frames dropped by the rate limit over a connection's life before it is closed.
    /// Default 1000.
    pub max_rate_limited_frames: u32,
    /// Malformed frames over a connection's life before it is closed. Default 32.
    pub max_malformed_frames: u32,
    /// How often the relay pings each WebSocket. Default 20 s.
    pub ping_interval: Duration,
    /// A connection that sends nothing (no frame, no pong) for this long is closed.
    /// Default 60 s.
    pub idle_timeout: Duration,
    /// How long a new connection has to answer the challenge. Default 10 s.
    pub auth_timeout: Duration,
    /// How long the relay tries to deliver its last `error` and close frame, and waits
    /// for the peer's close, when it ends a connection. Default 5 s.
    pub close_timeout: Duration,
    /// How long a TLS handshake may take. Default 10 s.
    pub tls_handshake_timeout: Duration,
    /// TCP connections (HTTP and WebSocket, authenticated or not) from one address at
    /// once; past it the relay answers 503 and closes. IPv6 addresses count per /64.
    /// Default 128.
    pub max_connections_per_ip: usize,
    /// Unauthenticated TCP connections in total: every HTTP connection, and every
    /// WebSocket until its `register`/`auth` is accepted. Default 1024.
    pub max_unauthenticated: usize,
    /// Unauthenticated TCP connections from one address (IPv6: per /64). Default 32.
    pub max_unauthenticated_per_ip: usize,
    /// Live connections one device may hold to one bridge. Default 8.
    pub max_connections_per_device: usize,
    /// WebSocket connections in total (bridges, clients, and those still authenticating).
    /// Default 20 000.
    pub max_connections: usize,
    /// Connection slots (of `max_connections`) kept for peers the relay already knows:
    /// past `max_connections - reconnect_reserve` connections, a new bridge registration
    /// or a pairing is refused (retry later). At most a tenth of `max_connections` is
    /// kept. Default 2000.
    pub reconnect_reserve: usize,
    /// WebSocket upgrades admitted per second (token bucket rate); beyond it `503` with
    /// a jittered `Retry-After`. Default 500.
    pub admissions_per_sec: u32,
    /// Burst of `admissions_per_sec`. Default 2000.
    pub admission_burst: u32,
    /// `Retry-After` of a refused upgrade is drawn from 1 s to this. Default 10 s.
    pub admission_retry_spread: Duration,
    /// Bridges the relay keeps registrations for. Default 100 000.
    pub max_bridges: usize,
    /// Devices in one bridge's registry. Default 256.
    pub max_devices_per_bridge: usize,
    /// Agents in one bridge's registration. Default 128.
    pub max_agents_per_bridge: usize,
    /// Resumable sessions remembered per bridge (the oldest is forgotten first). Default 512.
    pub max_resumable_sessions: usize,

    /// Lifetime of a resume token. Default 24 h.
    pub resume_token_ttl: Duration,

    /// The largest HTTP request body, in bytes. Default 16 KiB. A `Content-Length`
    /// above it is refused with 413 before any of the body is read.
    pub http_body_limit: usize,
    /// How long a client may take to send an HTTP request's headers (also how long an
    /// idle keep-alive connection stays open). Default 10 s.
    pub http_header_timeout: Duration,
    /// How long a client may take to send an HTTP request's body, once its headers are
    /// in; past it the request gets 408 and the connection is closed. Default 10 s.
    pub http_body_timeout: Duration,
    /// How long an HTTP connection that has not become a WebSocket is kept: at the
    /// bound the request in progress gets the longer of `http_body_timeout` and
    /// `pair_timeout` more to finish, then the connection is closed. Default 120 s.
    pub http_connection_lifetime: Duration,
    /// How long a pairing request waits for the bridge's answer. Default 30 s.
    pub pair_timeout: Duration,
    /// Pairing requests per minute per client IP address. Default 10.
    pub pair_requests_per_minute: u32,
    /// Pairing requests waiting for an answer, per bridge. Default 16.
    pub max_pending_pairings_per_bridge: usize,
    /// Pairing requests waiting for an answer, in total. Default 1024.
    pub max_pending_pairings: usize,
    /// Client IP addresses the pairing rate limiter tracks at once. Default 65 536.
    pub max_tracked_ips: usize,

    /// Pushes held per device while it is offline (the oldest is dropped first). Default 64.
    pub push_queue_per_device: usize,
    /// How long a held push is kept. Default 24 h.
    pub push_ttl: Duration,
    /// The largest `push` frame, as JSON bytes. Default 3993 (what one Web Push record holds).
    pub max_push_frame_bytes: usize,
    /// Attempts per Web Push delivery (the first included). Default 4.
    pub push_max_attempts: u32,
    /// The first retry's delay; each later retry doubles it. Default 2 s.
    pub push_retry_base: Duration,
    /// The longest wait between retries, `Retry-After` included. Default 5 min.
    pub push_retry_max: Duration,
    /// Bound on one Web Push exchange (connect, TLS, request, response). Default 15 s.
    pub push_timeout: Duration,
    /// Web Push deliveries in flight at once; beyond it a push is only held. Default 256.
    pub max_push_in_flight: usize,
    /// Accept plain `http://` push endpoints. Default false: the relay would otherwise
    /// `POST` wherever a client points it. For local test receivers only.
    pub allow_insecure_push_endpoints: bool,
    /// How far a push subscription's `ts` may be from the relay's clock. Default 300 s.
    pub subscription_clock_skew: Duration,
    /// Pending store writes before new ones are dropped (and logged). Default 65 536.
    pub store_queue_ops: usize,
    /// How long one database transaction (or connection attempt) may take before the
    /// store counts as unavailable and retries, and how long a write that must be
    /// durable (a push subscription, the check before pairing) waits. Default 5 s.
    pub store_timeout: Duration,

    /// Push endpoint hosts admitted whatever address they resolve to (a self-hosted push
    /// service on a private network, a test receiver on loopback). Every other endpoint
    /// must be, and resolve to, a public unicast address. Default none.
    pub push_allowed_hosts: Vec<AllowedHost>,
    /// An established registration (its bridge connected again after registering, or one
    /// of its devices authenticated) whose bridge has not connected for this long is
    /// deleted with its devices, subscriptions and held pushes. Default 30 days.
    pub registration_ttl: Duration,
    /// A registration not yet established is deleted this long after its bridge was last
    /// connected. Default 1 h.
    pub unestablished_registration_ttl: Duration,
    /// New bridge registrations (ids the relay does not know) one IP address may make per
    /// `new_bridges_window`, as a token bucket: this many at once, then one every
    /// window / count. Default 10.
    pub new_bridges_per_ip: u32,
    /// The window of `new_bridges_per_ip`. Default 1 h.
    pub new_bridges_window: Duration,
}

impl RelayConfig {
    /// The defaults, listening on `listen` and keeping state in `data_dir`.
    pub fn new(listen: SocketAddr, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen,
            data_dir: data_dir.into(),
            store: StoreLocation::Redb,
            bus: None,
            tls: None,
            vapid_subject: "mailto:relay-operator@terminull.invalid".to_owned(),
            max_message_bytes: 1024 * 1024,
            client_queue_frames: 1024,
            client_queue_bytes: 8 * 1024 * 1024,
            bridge_queue_frames: 8192,
            bridge_queue_bytes: 32 * 1024 * 1024,
            write_timeout: Duration::from_secs(20),
            client_frames_per_sec: 200,
            client_frames_burst: 400,
            bridge_frames_per_sec: 5000,
            bridge_frames_burst: 20_000,
            max_rate_limited_frames: 1000,
            max_malformed_frames: 32,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            auth_timeout: Duration::from_secs(10),
            close_timeout: Duration::from_secs(5),
            tls_handshake_timeout: Duration::from_secs(10),
            max_connections_per_ip: 128,
            max_unauthenticated: 1024,
            max_unauthenticated_per_ip: 32,
            max_connections_per_device: 8,
            max_connections: 20_000,
            reconnect_reserve: 2000,
            admissions_per_sec: 500,
            admission_burst: 2000,
            admission_retry_spread: Duration::from_secs(10),
            max_bridges: 100_000,
            max_devices_per_bridge: 256,
            max_agents_per_bridge: 128,
            max_resumable_sessions: 512,
            resume_token_ttl: Duration::from_secs(24 * 60 * 60),
            http_body_limit: 16 * 1024,
            http_header_timeout: Duration::from_secs(10),
            http_body_timeout: Duration::from_secs(10),
            http_connection_lifetime: Duration::from_secs(120),
            pair_timeout: Duration::from_secs(30),
            pair_requests_per_minute: 10,
            max_pending_pairings_per_bridge: 16,
            max_pending_pairings: 1024,
            max_tracked_ips: 65_536,
            push_queue_per_device: 64,
            push_ttl: Duration::from_secs(24 * 60 * 60),
            max_push_frame_bytes: crate::webpush::MAX_PLAINTEXT_LEN,
            push_max_attempts: 4,
            push_retry_base: Duration::from_secs(2),
            push_retry_max: Duration::from_secs(300),
            push_timeout: Duration::from_secs(15),
            max_push_in_flight: 256,
            allow_insecure_push_endpoints: false,
            subscription_clock_skew: Duration::from_secs(300),
            store_queue_ops: 65_536,
            store_timeout: Duration::from_secs(5),
            push_allowed_hosts: Vec::new(),
            registration_ttl: Duration::from_secs(30 * 24 * 60 * 60),
            unestablished_registration_ttl: Duration::from_secs(60 * 60),
            new_bridges_per_ip: 10,
            new_bridges_window: Duration::from_secs(60 * 60),
        }
    }

    /// Refuses settings the relay cannot run with (zero-sized queues, zero rates).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let nonzero: [(&str, usize); 19] = [
            ("admissions_per_sec", self.admissions_per_sec as usize),
            ("admission_burst", self.admission_burst as usize),
            ("max_message_bytes", self.max_message_bytes),
            ("client_queue_frames", self.client_queue_frames),
            ("bridge_queue_frames", self.bridge_queue_frames),
            ("client_queue_bytes", self.client_queue_bytes),
            ("bridge_queue_bytes", self.bridge_queue_bytes),
            ("max_connections_per_ip", self.max_connections_per_ip),
            ("max_unauthenticated", self.max_unauthenticated),
            ("max_unauthenticated_per_ip", self.max_unauthenticated_per_ip),
            ("client_frames_per_sec", self.client_frames_per_sec as usize),
            ("client_frames_burst", self.client_frames_burst as usize),
            ("bridge_frames_per_sec", self.bridge_frames_per_sec as usize),
            ("bridge_frames_burst", self.bridge_frames_burst as usize),
            ("max_connections_per_device", self.max_connections_per_device),
            ("max_connections", self.max_connections),
            ("push_queue_per_device", self.push_queue_per_device),
            ("store_queue_ops", self.store_queue_ops),
            ("http_body_limit", self.http_body_limit),
        ];
        for (name, value) in nonzero {
            if value == 0 {
                return Err(ConfigError::Zero { setting: name });
            }
        }
        let durations = [
            ("store_timeout", self.store_timeout),
            ("ping_interval", self.ping_interval),
            ("write_timeout", self.write_timeout),
            ("http_header_timeout", self.http_header_timeout),
            ("http_body_timeout", self.http_body_timeout),
            ("http_connection_lifetime", self.http_connection_lifetime),
        ];
        for (name, value) in durations {
            if value.is_zero() {
                return Err(ConfigError::Zero { setting: name });
            }
        }
        if self.new_bridges_per_ip == 0 {
            return Err(ConfigError::Zero { setting: "new_bridges_per_ip" });
        }
        if self.new_bridges_window.is_zero() {
            return Err(ConfigError::Zero { setting: "new_bridges_window" });
        }
        Ok(())
    }
}
