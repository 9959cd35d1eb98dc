//! `terminull-relay`: runs the relay until SIGINT or SIGTERM.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use terminull_relay::webpush::AllowedHost;
use terminull_relay::{Relay, RelayConfig, StoreLocation, TlsFiles, transfer};
use tracing_subscriber::EnvFilter;

/// The terminull relay: routes sealed frames between bridges and their paired devices,
/// brokers pairing and holds pushes for offline devices. It cannot read what it routes.
///
/// Without --tls-cert/--tls-key it serves plain ws:// and http://: put it behind a
/// TLS-terminating proxy. Logs go to stderr (filter with RUST_LOG, default `info`);
/// stdout gets one line, `terminull-relay listening on <ws url>`, once bound.
#[derive(Debug, Parser)]
#[command(name = "terminull-relay", version)]
struct Cli {
    /// Move state between stores instead of serving (the relay must be stopped).
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "TERMINULL_RELAY_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Directory for the relay's database (relay.redb); created if missing. Needed
    /// unless --store names a Postgres database.
    #[arg(long, env = "TERMINULL_RELAY_DATA", global = true)]
    data: Option<PathBuf>,
    /// Where the state lives: `redb` (relay.redb in --data, one process) or a
    /// postgres://user:password@host:port/database URL shared by every relay node
    /// (migrations run at start) [default: redb].
    #[arg(long, env = "TERMINULL_RELAY_STORE", value_parser = StoreLocation::parse, global = true)]
    store: Option<StoreLocation>,
    /// NATS URL (nats://host:port) joining the relay processes that share --store
    /// postgres://…: each announces the bridges it changed, the others reload them.
    #[arg(long, env = "TERMINULL_RELAY_BUS", global = true)]
    bus: Option<String>,
    /// Seconds one database transaction may take before the store counts as unavailable
    /// (pairing and new registrations are refused meanwhile) [default: 5].
    #[arg(long, global = true)]
    store_timeout_secs: Option<u64>,
    /// PEM certificate chain: serve TLS (wss://, https://) with it. Needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// VAPID subject: a mailto: or https: URL where push services can reach you.
    #[arg(long, env = "TERMINULL_RELAY_VAPID_SUBJECT")]
    vapid_subject: Option<String>,

    /// Largest WebSocket message accepted, bytes [default: 1048576].
    #[arg(long)]
    max_message_bytes: Option<usize>,
    /// Frames queued toward one client before it is cut off as a slow consumer [default: 1024].
    #[arg(long)]
    client_queue: Option<usize>,
    /// Frames queued toward one bridge [default: 8192].
    #[arg(long)]
    bridge_queue: Option<usize>,
    /// Bytes queued toward one client before it is cut off as a slow consumer [default: 8388608].
    #[arg(long)]
    client_queue_bytes: Option<usize>,
    /// Bytes queued toward one bridge [default: 33554432].
    #[arg(long)]
    bridge_queue_bytes: Option<usize>,
    /// Seconds the socket may take to accept one frame before the peer is cut off [default: 20].
    #[arg(long)]
    write_timeout_secs: Option<u64>,
    /// Frames per second one client connection may send [default: 200].
    #[arg(long)]
    client_rate: Option<u32>,
    /// Burst of the client rate limit [default: 400].
    #[arg(long)]
    client_burst: Option<u32>,
    /// Frames per second one bridge connection may send [default: 5000].
    #[arg(long)]
    bridge_rate: Option<u32>,
    /// Burst of the bridge rate limit [default: 20000].
    #[arg(long)]
    bridge_burst: Option<u32>,
    /// WebSocket connections in total [default: 20000].
    #[arg(long)]
    max_connections: Option<usize>,
    /// Connection slots kept for known bridges and paired devices: past
    /// max-connections minus this, new bridges and pairings are refused [default: 2000].
    #[arg(long)]
    reconnect_reserve: Option<usize>,
    /// WebSocket connections admitted per second; beyond, 503 with a jittered
    /// Retry-After [default: 500].
    #[arg(long)]
    admissions_per_sec: Option<u32>,
    /// Burst of --admissions-per-sec [default: 2000].
    #[arg(long)]
    admission_burst: Option<u32>,
    /// TCP connections (HTTP and WebSocket) from one address, IPv6 per /64 [default: 128].
    #[arg(long)]
    max_connections_per_ip: Option<usize>,
    /// Unauthenticated connections (HTTP, WebSockets before register/auth) in total [default: 1024].
    #[arg(long)]
    max_unauthenticated: Option<usize>,
    /// Unauthenticated connections from one address [default: 32].
    #[arg(long)]
    max_unauthenticated_per_ip: Option<usize>,
    /// Connections one device may hold to one bridge [default: 8].
    #[arg(long)]
    max_connections_per_device: Option<usize>,
    /// Bridges the relay keeps registrations for [default: 100000].
    #[arg(long)]
    max_bridges: Option<usize>,
    /// Devices in one bridge's registry [default: 256].
    #[arg(long)]
    max_devices_per_bridge: Option<usize>,
    /// Resumable sessions remembered per bridge [default: 512].
    #[arg(long)]
    max_resumable_sessions: Option<usize>,
    /// Seconds between pings [default: 20].
    #[arg(long)]
    ping_interval_secs: Option<u64>,
    /// Seconds without any frame or pong before a connection is closed [default: 60].
    #[arg(long)]
    idle_timeout_secs: Option<u64>,
    /// Seconds a new connection has to answer the challenge [default: 10].
    #[arg(long)]
    auth_timeout_secs: Option<u64>,
    /// Lifetime of resume tokens, seconds [default: 86400].
    #[arg(long)]
    resume_token_ttl_secs: Option<u64>,
    /// Largest HTTP request body, bytes [default: 16384].
    #[arg(long)]
    http_body_limit: Option<usize>,
    /// Seconds an HTTP client may take to send a request's headers [default: 10].
    #[arg(long)]
    http_header_timeout_secs: Option<u64>,
    /// Seconds an HTTP client may take to send a request's body [default: 10].
    #[arg(long)]
    http_body_timeout_secs: Option<u64>,
    /// Seconds an HTTP connection (not a WebSocket) is kept at most [default: 120].
    #[arg(long)]
    http_connection_lifetime_secs: Option<u64>,
    /// Seconds a pairing request waits for the bridge [default: 30].
    #[arg(long)]
    pair_timeout_secs: Option<u64>,
    /// Pairing requests per minute per client IP [default: 10].
    #[arg(long)]
    pair_rate_per_minute: Option<u32>,
    /// Pushes held per offline device [default: 64].
    #[arg(long)]
    push_queue_per_device: Option<usize>,
    /// Seconds a held push is kept [default: 86400].
    #[arg(long)]
    push_ttl_secs: Option<u64>,
    /// Web Push attempts per push, the first included [default: 4].
    #[arg(long)]
    push_max_attempts: Option<u32>,
    /// Accept plain http:// push endpoints (local testing only).
    #[arg(long)]
    allow_insecure_push_endpoints: bool,
    /// Admit push endpoints on HOST (any port) or HOST:PORT whatever address it resolves to:
    /// a self-hosted push service on a private network. Repeatable. Without it, push
    /// endpoints must be public addresses.
    #[arg(long = "push-allow-host", value_name = "HOST[:PORT]")]
    push_allow_hosts: Vec<AllowedHost>,
    /// Seconds an established bridge registration survives without its bridge connecting
    /// [default: 2592000 (30 days)].
    #[arg(long)]
    registration_ttl_secs: Option<u64>,
    /// Seconds a registration that is not yet established survives after its bridge was
    /// last connected [default: 3600].
    #[arg(long)]
    unestablished_registration_ttl_secs: Option<u64>,
    /// New bridge registrations per IP address per hour [default: 10].
    #[arg(long)]
    new_bridges_per_ip: Option<u32>,
}

/// What to do besides serving.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Copy relay.redb in --data into the Postgres database --store names (secrets
    /// included: paired devices keep working), then exit.
    Import,
    /// Copy the Postgres database --store names into relay.redb in --data, then exit.
    Export,
}

impl Cli {
    fn config(&self) -> RelayConfig {
        let data = self.data.clone().unwrap_or_default();
        let mut c = RelayConfig::new(self.listen, data);
        c.store = self.store.clone().unwrap_or_default();
        c.bus = self.bus.clone();
        set(&mut c.store_timeout, self.store_timeout_secs.map(Duration::from_secs));
        if let (Some(cert_chain), Some(private_key)) = (&self.tls_cert, &self.tls_key) {
            c.tls = Some(TlsFiles { cert_chain: cert_chain.clone(), private_key: private_key.clone() });
        }
        let secs = Duration::from_secs;
        set(&mut c.vapid_subject, self.vapid_subject.clone());
        set(&mut c.max_message_bytes, self.max_message_bytes);
        set(&mut c.client_queue_frames, self.client_queue);
        set(&mut c.bridge_queue_frames, self.bridge_queue);
        set(&mut c.client_queue_bytes, self.client_queue_bytes);
        set(&mut c.bridge_queue_bytes, self.bridge_queue_bytes);
        set(&mut c.write_timeout, self.write_timeout_secs.map(secs));
        set(&mut c.max_connections_per_ip, self.max_connections_per_ip);
        set(&mut c.max_unauthenticated, self.max_unauthenticated);
        set(&mut c.max_unauthenticated_per_ip, self.max_unauthenticated_per_ip);
        set(&mut c.http_header_timeout, self.http_header_timeout_secs.map(secs));
        set(&mut c.http_body_timeout, self.http_body_timeout_secs.map(secs));
        set(&mut c.http_connection_lifetime, self.http_connection_lifetime_secs.map(secs));
        set(&mut c.client_frames_per_sec, self.client_rate);
        set(&mut c.client_frames_burst, self.client_burst);
        set(&mut c.bridge_frames_per_sec, self.bridge_rate);
        set(&mut c.bridge_frames_burst, self.bridge_burst);
        set(&mut c.max_connections, self.max_connections);
        set(&mut c.reconnect_reserve, self.reconnect_reserve);
        set(&mut c.admissions_per_sec, self.admissions_per_sec);
        set(&mut c.admission_burst, self.admission_burst);
        set(&mut c.max_connections_per_device, self.max_connections_per_device);
        set(&mut c.max_bridges, self.max_bridges);
        set(&mut c.max_devices_per_bridge, self.max_devices_per_bridge);
        set(&mut c.max_resumable_sessions, self.max_resumable_sessions);
        set(&mut c.ping_interval, self.ping_interval_secs.map(secs));
        set(&mut c.idle_timeout, self.idle_timeout_secs.map(secs));
        set(&mut c.auth_timeout, self.auth_timeout_secs.map(secs));
        set(&mut c.resume_token_ttl, self.resume_token_ttl_secs.map(secs));
        set(&mut c.http_body_limit, self.http_body_limit);
        set(&mut c.pair_timeout, self.pair_timeout_secs.map(secs));
        set(&mut c.pair_requests_per_minute, self.pair_rate_per_minute);
        set(&mut c.push_queue_per_device, self.push_queue_per_device);
        set(&mut c.push_ttl, self.push_ttl_secs.map(secs));
        set(&mut c.push_max_attempts, self.push_max_attempts);
        c.allow_insecure_push_endpoints = self.allow_insecure_push_endpoints;
        c.push_allowed_hosts = self.push_allow_hosts.clone();
        set(&mut c.registration_ttl, self.registration_ttl_secs.map(secs));
        set(&mut c.unestablished_registration_ttl, self.unestablished_registration_ttl_secs.map(secs));
        set(&mut c.new_bridges_per_ip, self.new_bridges_per_ip);
        c
    }
}

/// Overrides a default when the flag was given.
fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();

    let config = cli.config();
    let postgres = match &config.store {
        StoreLocation::Postgres { url } => Some(url.clone()),
        _ => None,
    };
    if postgres.is_none() && cli.data.is_none() {
        anyhow::bail!("--data (or TERMINULL_RELAY_DATA) is needed unless --store names a Postgres database");
    }
    if let Some(command) = &cli.command {
        let (Some(url), Some(data)) = (&postgres, &cli.data) else {
            anyhow::bail!("import and export need both --data (relay.redb) and --store postgres://…");
        };
        let moved = match command {
            Command::Import => transfer::redb_to_postgres(data, url, config.store_timeout).await,
            Command::Export => transfer::postgres_to_redb(url, data, config.store_timeout).await,
        }
        .context("moving the relay's state")?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "moved {moved}").context("writing to stdout")?;
        return Ok(());
    }
    let store = format!("{:?}", config.store);
    let relay = Relay::start(config)
        .await
        .with_context(|| format!("starting the relay on {} with its state in {store}", cli.listen))?;
    {
        // The one line scripts and tests wait for.
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "terminull-relay listening on {}", relay.ws_url()).context("writing to stdout")?;
        stdout.flush().context("flushing stdout")?;
    }
    wait_for_signal().await.context("waiting for a shutdown signal")?;
    tracing::info!("shutting down");
    relay.shutdown().await;
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn wait_for_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            ctrl_c = tokio::signal::ctrl_c() => ctrl_c,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_allow_hosts_and_registration_bounds_reach_the_config() {
        let cli = Cli::try_parse_from([
            "terminull-relay",
            "--data",
            "/tmp/relay",
            "--push-allow-host",
            "Push.Internal:8443",
            "--push-allow-host",
            "[fd00::5]",
            "--registration-ttl-secs",
            "86400",
            "--unestablished-registration-ttl-secs",
            "600",
            "--new-bridges-per-ip",
            "3",
        ])
        .unwrap();
        let c = cli.config();
        let hosts: Vec<String> = c.push_allowed_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(hosts, ["push.internal:8443", "[fd00::5]"]);
        assert_eq!(c.registration_ttl, Duration::from_secs(86400));
        assert_eq!(c.unestablished_registration_ttl, Duration::from_secs(600));
        assert_eq!(c.new_bridges_per_ip, 3);

        let defaults = Cli::try_parse_from(["terminull-relay", "--data", "/tmp/relay"]).unwrap().config();
        assert!(defaults.push_allowed_hosts.is_empty(), "no host admitted unless named");
        let err = Cli::try_parse_from(["terminull-relay", "--data", "/d", "--push-allow-host", "a b"]).unwrap_err();
        assert!(err.to_string().contains("expected HOST or HOST:PORT"), "{err}");
    }

    #[test]
    fn store_flag_takes_redb_or_a_postgres_url_and_never_shows_the_password() {
        let cli = Cli::try_parse_from(["terminull-relay", "--store", "postgres://relay:s3cret@db.internal:6543/relay"])
            .unwrap();
        let c = cli.config();
        let shown = format!("{:?}", c.store);
        assert_eq!(shown, "Postgres(postgres://db.internal:6543/relay)");
        assert!(!shown.contains("s3cret"));
        let redb = Cli::try_parse_from(["terminull-relay", "--data", "/d", "--store", "redb"]).unwrap().config();
        assert_eq!(redb.store, StoreLocation::Redb);
        let err = Cli::try_parse_from(["terminull-relay", "--store", "mysql://x"]).unwrap_err();
        assert!(err.to_string().contains("expected `redb` or a postgres:// URL"), "{err}");
        let import = Cli::try_parse_from(["terminull-relay", "import", "--data", "/d", "--store", "postgres://h/db"]);
        assert!(matches!(import.unwrap().command, Some(Command::Import)));
    }
}
