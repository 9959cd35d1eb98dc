//! Relay forwarding against a bare forwarder, on loopback, in release mode: the relay
//! section of `terminull-bench` without the rest of the workspace (the bench needs the
//! bridge and client crates). A raw bridge floods pre-signed `batch`es of 1 KiB sealed
//! blocks to one device through the relay; a bare tokio-tungstenite forwarder moves the
//! same blocks' `block` frames one by one. Both servers run in their own process (this
//! binary, re-run as a child), as in the bench.
//!
//! ```sh
//! cargo run --release -p terminull-relay --example forward_bench -- [BLOCKS] [BATCH] [ROUNDS]
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead as _, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{SinkExt as _, StreamExt as _};
use terminull_protocol::SessionId;
use terminull_protocol::crypto::channel::Sealer;
use terminull_protocol::crypto::envelope::{relay_auth_bytes, seal_block, sign_batch};
use terminull_protocol::crypto::handshake::DeviceHandshake;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::{b64, from_b64url};
use terminull_protocol::relay::{Auth, BlockEnvelope, DeviceRecord, PROTOCOL_VERSION, Register, RelayFrame};
use terminull_relay::{Relay, RelayConfig};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Runtime::new()?;
    match args.first().map(String::as_str) {
        Some("relay-child") => rt.block_on(relay_child()),
        Some("forwarder-child") => rt.block_on(forwarder_child()),
        _ => {
            let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
            rt.block_on(drive(num(0, 200_000), num(1, 64) as usize, num(2, 2_000)))
        }
    }
}

/// The relay as the bench configures it: no rate limit in the way, a deep device queue.
async fn relay_child() -> Result<()> {
    let data = tempfile::tempdir()?;
    let mut config = RelayConfig::new("127.0.0.1:0".parse()?, data.path());
    config.bridge_frames_per_sec = 10_000_000;
    config.bridge_frames_burst = 10_000_000;
    config.client_queue_frames = 8192;
    config.idle_timeout = Duration::from_secs(600);
    config.ping_interval = Duration::from_secs(120);
    let relay = Relay::start(config).await?;
    ready(&relay.ws_url())?;
    stdin_closed().await;
    relay.shutdown().await;
    Ok(())
}

/// The bench's bare forwarder: sink first, then source; text messages go through as is,
/// writes batched while more are ready.
async fn forwarder_child() -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    ready(&format!("ws://{}", listener.local_addr()?))?;
    let serve = async move {
        let (sink, _) = listener.accept().await?;
        sink.set_nodelay(true)?;
        let mut sink = tokio_tungstenite::accept_async(sink).await?;
        let (source, _) = listener.accept().await?;
        source.set_nodelay(true)?;
        let source = tokio_tungstenite::accept_async(source).await?;
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
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

fn ready(url: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {url}")?;
    out.flush()?;
    Ok(())
}

async fn stdin_closed() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    })
    .await;
}

/// A child process of this binary and the URL it serves.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(mode: &str) -> Result<Self> {
        let mut child =
            Command::new(std::env::current_exe()?).arg(mode).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().context("child stdout")?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let url = line.trim().strip_prefix("ready ").context("the child's ready line")?.to_owned();
        Ok(Self { child, url })
    }

    /// CPU time the child has used so far, every thread, in ns (schedstat).
    fn cpu_ns(&self) -> u64 {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else { return 0 };
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
            .sum()
    }

    fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

async fn connect(url: &str) -> Result<Ws> {
    Ok(tokio_tungstenite::connect_async_with_config(url, None, true).await?.0)
}

async fn read_frame(ws: &mut Ws) -> Result<RelayFrame> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await? {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(&t)?),
            Some(Ok(_)) => {}
            other => bail!("closed: {other:?}"),
        }
    }
}

async fn send_frame(ws: &mut Ws, frame: &RelayFrame) -> Result<()> {
    Ok(ws.send(Message::text(serde_json::to_string(frame)?)).await?)
}

async fn nonce(ws: &mut Ws) -> Result<Vec<u8>> {
    match read_frame(ws).await? {
        RelayFrame::Challenge(c) => Ok(from_b64url("nonce", &c.nonce)?),
        other => bail!("expected challenge, got {other:?}"),
    }
}

/// `n` sealed 1 KiB blocks of one session (the bench's size: ~1 KiB of JSON sealed).
fn blocks(n: usize) -> Result<Vec<BlockEnvelope>> {
    let mut sealer = Sealer::new([5; 32], "block");
    let session = SessionId("s-0192f0c5a1b27c3d8e9f00112233aabb".into());
    let text = "x".repeat(1024 - 80);
    (0..n)
        .map(|i| {
            let json =
                format!(r#"{{"type":"text","seq":{i},"ts":1767225611.25,"id":"msg-{i}","text":"{text}","done":true}}"#);
            Ok(seal_block(&mut sealer, &session, "text", false, 1_767_225_611.25, json.as_bytes())?)
        })
        .collect()
}

fn is_block(m: &Message) -> bool {
    matches!(m, Message::Text(t) if t.as_str().starts_with("{\"type\":\"block\""))
}

/// Most blocks sent and not yet received during a flood: half the device queue the
/// relay is configured with, so the flood measures throughput rather than how fast the
/// relay cuts off a device that reads slower than the bridge writes.
const WINDOW: u64 = 4096;

/// Sends copies of `frame` (`per_frame` blocks each) until `blocks` went, at most
/// [`WINDOW`] blocks in flight; blocks/s.
async fn flood(tx: &mut Ws, rx: &mut Ws, frame: &str, per_frame: u64, blocks: u64) -> Result<f64> {
    let sends = blocks.div_ceil(per_frame);
    let total = sends * per_frame;
    let message = Message::text(frame.to_owned());
    let flush_every = (64 / per_frame).max(1);
    let (progress, mut received) = tokio::sync::watch::channel(0u64);
    let start = Instant::now();
    let send = async {
        for i in 0..sends {
            let sent = (i + 1) * per_frame;
            // Flush and wait only when the window is full: ~64 KiB per flush still.
            let in_flight = sent.saturating_sub(*received.borrow());
            if in_flight > WINDOW {
                tx.flush().await?;
                received.wait_for(|r| sent.saturating_sub(*r) <= WINDOW).await?;
            }
            tx.feed(message.clone()).await?;
            if i % flush_every == flush_every - 1 {
                tx.flush().await?;
            }
        }
        tx.flush().await?;
        anyhow::Ok(())
    };
    let receive = async {
        // Owned here: when the receiver stops, the sender's wait ends too.
        let progress = progress;
        let mut seen = 0;
        while seen < total {
            match rx.next().await {
                Some(Ok(m)) if is_block(&m) => {
                    seen += 1;
                    if seen % 64 == 0 {
                        progress.send_replace(seen);
                    }
                }
                Some(Ok(_)) => {}
                other => bail!("{seen} of {total}, then {other:?}"),
            }
        }
        progress.send_replace(seen);
        anyhow::Ok(Instant::now())
    };
    let (sent, end) = tokio::join!(send, receive);
    sent?;
    Ok(total as f64 / (end? - start).as_secs_f64())
}

/// One frame at a time; p50 and p99 in µs.
async fn round_trips(tx: &mut Ws, rx: &mut Ws, frame: &str, rounds: u64) -> Result<(f64, f64)> {
    let message = Message::text(frame.to_owned());
    let mut lat = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        tx.send(message.clone()).await?;
        loop {
            match rx.next().await {
                Some(Ok(m)) if is_block(&m) => break,
                Some(Ok(_)) => {}
                other => bail!("closed: {other:?}"),
            }
        }
        lat.push(start.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    Ok((at(0.5), at(0.99)))
}

async fn drive(blocks_n: u64, batch: usize, rounds: u64) -> Result<()> {
    // The bare forwarder.
    let forwarder = Server::start("forwarder-child")?;
    let mut sink = connect(&forwarder.url).await?;
    let mut source = connect(&forwarder.url).await?;
    let block_frame = serde_json::to_string(&RelayFrame::Block(blocks(1)?.remove(0)))?;
    println!("block frame: {} B", block_frame.len());

    // The relay, a raw bridge and a raw device with a link open.
    let relay = Server::start("relay-child")?;
    let bridge = Identity::generate();
    let device = Identity::generate();
    let (bridge_id, device_id) = (bridge.public().bridge_id(), device.public().device_id());
    let mut bws = connect(&format!("{}/v1/bridge", relay.url)).await?;
    let n = nonce(&mut bws).await?;
    let register = Register {
        bridge_id: bridge_id.clone(),
        protocol_version: PROTOCOL_VERSION,
        resumable_session_ids: vec![],
        agents: vec![],
        keys: bridge.public().to_wire(),
        devices: vec![DeviceRecord {
            device_id: device_id.clone(),
            keys: device.public().to_wire(),
            name: "bench".into(),
            revoked: false,
        }],
        sig: b64(&bridge.sign(&relay_auth_bytes("bridge", bridge_id.as_str(), bridge_id.as_str(), &n))),
        app: None,
    };
    send_frame(&mut bws, &RelayFrame::Register(register)).await?;
    read_frame(&mut bws).await?;
    let mut dws = connect(&format!("{}/v1/client", relay.url)).await?;
    let n = nonce(&mut dws).await?;
    let sig = b64(&device.sign(&relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), &n)));
    let auth =
        Auth { bridge_id: bridge_id.clone(), device_id: device_id.clone(), sig, protocol_version: PROTOCOL_VERSION };
    send_frame(&mut dws, &RelayFrame::Auth(auth)).await?;
    read_frame(&mut dws).await?;
    let (hello, _) = DeviceHandshake::start(&device, bridge_id.as_str());
    send_frame(&mut dws, &RelayFrame::LinkHello(hello)).await?;
    let conn = loop {
        if let RelayFrame::LinkHello(h) = read_frame(&mut bws).await? {
            break h.conn.context("conn")?;
        }
    };
    let single = serde_json::to_string(&RelayFrame::Batch(sign_batch(&bridge, conn, blocks(1)?)))?;
    let many = serde_json::to_string(&RelayFrame::Batch(sign_batch(&bridge, conn, blocks(batch)?)))?;
    println!("batch of {batch}: {} B", many.len());
    round_trips(&mut bws, &mut dws, &single, 1).await?; // the session's token first

    let per_block = |ns: u64| ns as f64 / 1e3 / blocks_n as f64;
    for run in 1..=5 {
        let cpu = forwarder.cpu_ns();
        let floor = flood(&mut source, &mut sink, &block_frame, 1, blocks_n).await?;
        let floor_us = per_block(forwarder.cpu_ns() - cpu);
        let cpu = relay.cpu_ns();
        let rate = flood(&mut bws, &mut dws, &many, batch as u64, blocks_n).await?;
        let relay_us = per_block(relay.cpu_ns() - cpu);
        println!(
            "run {run}: relay {rate:.0} blocks/s (batches of {batch}), bare forwarder {floor:.0} frames/s, ratio {:.2}; \
             CPU per block: relay {relay_us:.2} µs, forwarder {floor_us:.2} µs, ratio {:.2}",
            rate / floor,
            floor_us / relay_us
        );
    }
    let idle = (relay.cpu_ns(), Instant::now());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_share = (relay.cpu_ns() - idle.0) as f64 / idle.1.elapsed().as_nanos() as f64;
    println!("relay CPU while idle after the floods: {:.1}% of a core", idle_share * 100.0);
    let (fp50, fp99) = round_trips(&mut source, &mut sink, &block_frame, rounds).await?;
    let (rp50, rp99) = round_trips(&mut bws, &mut dws, &single, rounds).await?;
    println!(
        "round trip, batches of 1: relay p50 {rp50:.0} µs p99 {rp99:.0} µs; forwarder p50 {fp50:.0} µs p99 {fp99:.0} µs"
    );
    drop((bws, dws, sink, source));
    relay.stop();
    forwarder.stop();
    Ok(())
}
