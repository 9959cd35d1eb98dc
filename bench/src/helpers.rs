//! The helper processes (hidden subcommands of this binary): the relay, the bare
//! forwarder and the raw pipe source each run in their own process so that their RSS
//! is theirs alone and they are scheduled like the real deployment.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::{SinkExt, StreamExt};
use terminull_protocol::blocks::{Block, BlockKind, StreamedText};
use terminull_protocol::jsonrpc::{Message, Notification};
use terminull_relay::{Relay, RelayConfig, StoreLocation};
use tokio::sync::mpsc;

use crate::util::{stdin_closed, unix_nanos};

/// The relay's configuration in the benchmark: the defaults, except the bounds that
/// would stop a benchmark rather than a misbehaving peer. The per-bridge rate limit
/// (5,000 frames/s by default) would cap every throughput figure at itself, and one
/// device (from one address) holds the thousands of idle connections.
pub fn bench_relay_config(data: PathBuf) -> RelayConfig {
    let mut config = RelayConfig::new("127.0.0.1:0".parse().expect("a socket address"), data);
    config.bridge_frames_per_sec = 10_000_000;
    config.bridge_frames_burst = 10_000_000;
    config.client_queue_frames = 8192;
    config.max_connections_per_device = 20_000;
    config.max_connections = 25_000;
    // Every benchmark peer comes from 127.0.0.1, and a stream's backlog may pass the
    // default byte bound of a device's queue while the benchmark measures throughput.
    config.max_connections_per_ip = 25_000;
    config.max_unauthenticated = 25_000;
    config.max_unauthenticated_per_ip = 25_000;
    // The memory section opens thousands of connections at once: no admission pacing.
    config.admissions_per_sec = 1_000_000;
    config.admission_burst = 1_000_000;
    config.client_queue_bytes = 1024 * 1024 * 1024;
    // The cluster section registers a few dozen bridges, all from 127.0.0.1.
    config.new_bridges_per_ip = 10_000;
    config.idle_timeout = Duration::from_secs(600);
    config.ping_interval = Duration::from_secs(120);
    config.auth_timeout = Duration::from_secs(60);
    config
}

/// `relay-child`: the real relay on 127.0.0.1, port 0; a node of a cluster when given
/// a Postgres `store` and a NATS `bus`.
pub async fn relay_child(data: PathBuf, store: Option<String>, bus: Option<String>) -> Result<()> {
    let mut config = bench_relay_config(data);
    if let Some(url) = store {
        config.store = StoreLocation::Postgres { url };
    }
    config.bus = bus;
    let relay = Relay::start(config).await.context("starting the relay")?;
    ready(&relay.ws_url())?;
    stdin_closed().await;
    relay.shutdown().await;
    Ok(())
}

fn ready(url: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {url}")?;
    out.flush()?;
    Ok(())
}

/// `forwarder-child`: the floor of a WebSocket hop. The first connection is the sink,
/// the second the source; every text message from the source goes to the sink as is.
/// No parsing, no crypto, no routing table: only what any forwarder must do (read a
/// frame, write it), batching writes while more are ready, as the relay's writer does.
pub async fn forwarder_child() -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    ready(&format!("ws://{}", listener.local_addr()?))?;
    let serve = async move {
        // As the relay and the client do: a small frame must not wait for an ACK.
        let (sink, _) = listener.accept().await?;
        sink.set_nodelay(true)?;
        let mut sink = tokio_tungstenite::accept_async(sink).await?;
        let (source, _) = listener.accept().await?;
        source.set_nodelay(true)?;
        let source = tokio_tungstenite::accept_async(source).await?;
        let (tx, mut rx) = mpsc::channel(1024);
        let (_, mut read) = source.split();
        tokio::spawn(async move {
            while let Some(Ok(message)) = read.next().await {
                if message.is_text() && tx.send(message).await.is_err() {
                    break;
                }
            }
        });
        while let Some(message) = rx.recv().await {
            sink.feed(message).await?;
            let mut more = 0;
            while more < 64 {
                match rx.try_recv() {
                    Ok(m) => {
                        sink.feed(m).await?;
                        more += 1;
                    }
                    Err(_) => break,
                }
            }
            sink.flush().await?;
        }
        anyhow::Ok(())
    };
    tokio::select! {
        r = serve => r,
        () = stdin_closed() => Ok(()),
    }
}

/// One `stream` notification line as an adapter writes it: a finished `text` block of
/// `size` bytes starting with the emit stamp.
pub fn stream_line(i: u64, size: usize) -> Result<Vec<u8>> {
    let mut text = format!("t={};", unix_nanos());
    text.extend(std::iter::repeat_n('x', size.saturating_sub(text.len())));
    let block = Block::now(BlockKind::Text(StreamedText::snapshot(format!("pipe-{i}"), text, true)));
    let note =
        Message::Notification(Notification { method: "stream".into(), params: serde_json::json!({ "block": block }) });
    Ok(terminull_protocol::ndjson::to_line(&note.to_value())?)
}

/// `pipe-source N SIZE PACE_US`: the floor of the adapter hop. Writes the lines an
/// adapter would for `bench blocks N SIZE PACE_US` to stdout, as fast as a process can
/// (buffered when unpaced, one write per line when paced), then exits.
pub fn pipe_source(count: u64, size: usize, pace_us: u64) -> Result<()> {
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout);
    for i in 0..count {
        if pace_us > 0 {
            std::thread::sleep(Duration::from_micros(pace_us));
        }
        out.write_all(&stream_line(i, size)?)?;
        if pace_us > 0 {
            out.flush()?;
        }
    }
    out.flush()?;
    Ok(())
}
