//! A node dies and its 1,000 device connections come back at once through another node
//! (the load balancer's next backend): the node paces them with `Retry-After`, nothing
//! crashes, and every device is back, seeing its bridge (held by a third node) online,
//! within the bound stated below. Own Postgres and NATS on loopback (support/servers.rs).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::servers::{Nats, Postgres};
use support::*;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::RelayFrame;
use terminull_relay::{RelayConfig, StoreLocation};
use tokio_tungstenite::tungstenite;

/// Devices in the herd: 4 bridges of 250 (a bridge lists at most 256).
const BRIDGES: usize = 4;
const PER_BRIDGE: usize = 250;
const HERD: usize = BRIDGES * PER_BRIDGE;
/// What the surviving node admits: 100 upgrades a second, bursts of 50.
const RATE: u32 = 100;
const BURST: u32 = 50;
/// The stated bound: the herd at the admission rate takes HERD / RATE = 10 s; the rest
/// is for the herd itself, 1,000 clients in this one debug-built test process beside
/// three relays, on a shared 2-core machine.
const BOUND: Duration = Duration::from_secs(120);
/// How long one handshake step of a device may take here (the herd's own side is slow).
const STEP: Duration = Duration::from_secs(30);

fn node_config(dir: &std::path::Path, store: &str, bus: &str) -> RelayConfig {
    let mut c = config(dir);
    c.store = StoreLocation::Postgres { url: store.to_owned() };
    c.store_timeout = Duration::from_secs(2);
    c.bus = Some(bus.to_owned());
    // Every device comes from 127.0.0.1 here (behind a load balancer, from its address).
    // The relay's default: the herd's own side (in this test process) is slow to answer.
    c.auth_timeout = Duration::from_secs(10);
    c.max_connections_per_ip = 4 * HERD;
    (c.max_unauthenticated, c.max_unauthenticated_per_ip) = (4 * HERD, 4 * HERD);
    c
}

/// Heavy (1,000 connections, a minute or two on a loaded 2-core machine): run it with
/// `cargo test -p terminull-relay --test cluster_herd -- --ignored --nocapture`.
#[ignore = "1,000 connections: run with --ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_devices_of_a_dead_node_reconnect_to_another_paced_and_all_within_the_bound() {
    let (pg, nats) = (Postgres::start(), Nats::start());
    let store = pg.url("postgres");
    let dirs: [tempfile::TempDir; 3] = std::array::from_fn(|_| tempfile::tempdir().unwrap());
    let home = start(node_config(dirs[0].path(), &store, &nats.url())).await;
    // The node that dies is a process of its own, killed with SIGKILL.
    let herd = HERD * 4;
    let mut dying = std::process::Command::new(env!("CARGO_BIN_EXE_terminull-relay"))
        .args(["--listen", "127.0.0.1:0", "--data", dirs[1].path().to_str().unwrap()])
        .args(["--store", &store, "--bus", &nats.url(), "--auth-timeout-secs", "10"])
        .args(["--admissions-per-sec", "10000", "--admission-burst", "10000"])
        .args(["--max-connections-per-ip", &herd.to_string(), "--max-unauthenticated", &herd.to_string()])
        .args(["--max-unauthenticated-per-ip", &herd.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("terminull-relay starts");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(dying.stdout.take().unwrap()), &mut line).unwrap();
    let dying_ws = line.trim().strip_prefix("terminull-relay listening on ").expect("the listening line").to_owned();
    let mut survivor_cfg = node_config(dirs[2].path(), &store, &nats.url());
    (survivor_cfg.admissions_per_sec, survivor_cfg.admission_burst) = (RATE, BURST);
    survivor_cfg.admission_retry_spread = Duration::from_secs(2);
    let survivor = start(survivor_cfg).await;

    // The bridges on the home node; their devices all on the node about to die.
    let mut bridges = Vec::new();
    let mut devices = Vec::new();
    for _ in 0..BRIDGES {
        let mine: Vec<Identity> = (0..PER_BRIDGE).map(|_| Identity::generate()).collect();
        let records = mine.iter().enumerate().map(|(i, d)| device_record(d, &format!("d{i}"), false)).collect();
        let bridge = FakeBridge::connect(&home, &Identity::generate(), records, vec![]).await;
        devices.extend(mine.into_iter().map(|d| (bridge.id(), d)));
        bridges.push(bridge);
    }
    let dying_url = format!("{dying_ws}/v1/client");
    let survivor_url = format!("{}/v1/client", survivor.ws_url());
    let (refused, longest_wait) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicU64::new(0)));
    let retried = Arc::new(AtomicUsize::new(0));
    let back = Arc::new(AtomicUsize::new(0));
    let on_dying = Arc::new(AtomicUsize::new(0));
    // Getting them onto the first node is not what is measured: a few at a time.
    let first_in = Arc::new(tokio::sync::Semaphore::new(32));
    let herd: Vec<_> = devices
        .into_iter()
        .map(|(bridge_id, device)| {
            let (dying_url, survivor_url) = (dying_url.clone(), survivor_url.clone());
            let (refused, longest_wait, on_dying) =
                (Arc::clone(&refused), Arc::clone(&longest_wait), Arc::clone(&on_dying));
            let first_in = Arc::clone(&first_in);
            let retried = Arc::clone(&retried);
            let back = Arc::clone(&back);
            tokio::spawn(async move {
                // On the node that will die, once the registry reached it.
                let permit = first_in.acquire_owned().await.unwrap();
                let mut ws = loop {
                    let (ws, _) =
                        tokio_tungstenite::connect_async(dying_url.as_str()).await.expect("the first node admits");
                    match slow_authenticate(ws, &bridge_id, &device).await {
                        (ws, RelayFrame::RelayStatus(s)) if s.bridge_online => break ws,
                        _ => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                };
                on_dying.fetch_add(1, Ordering::Relaxed);
                drop(permit);
                let _ = until_closed_or_gone(&mut ws).await;
                // Straight to the next node, as a load balancer would send it.
                loop {
                    match tokio_tungstenite::connect_async(survivor_url.as_str()).await {
                        Ok((ws, _)) => match slow_authenticate(ws, &bridge_id, &device).await {
                            (ws, RelayFrame::RelayStatus(s)) if s.bridge_online => {
                                back.fetch_add(1, Ordering::Relaxed);
                                return ws;
                            }
                            // Refused after the upgrade (the test process was too slow to
                            // answer the challenge): a client reconnects.
                            (_, other) => {
                                retried.fetch_add(1, Ordering::Relaxed);
                                tracing_free_note(&other);
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                        },
                        Err(tungstenite::Error::Http(response)) if response.status() == 503 => {
                            let secs: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
                            refused.fetch_add(1, Ordering::Relaxed);
                            longest_wait.fetch_max(secs, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_secs(secs)).await;
                        }
                        Err(e) => {
                            // Refused by the kernel or cut mid-handshake under load: retry.
                            retried.fetch_add(1, Ordering::Relaxed);
                            eprintln!("herd: a reconnect failed: {e}");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while on_dying.load(Ordering::Relaxed) < HERD {
        assert!(Instant::now() < deadline, "only {} of {HERD} on the first node", on_dying.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The node dies; the herd comes back through the survivor.
    let died_at = Instant::now();
    dying.kill().unwrap();
    dying.wait().unwrap();
    let progress = {
        let (back, refused) = (Arc::clone(&back), Arc::clone(&refused));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let (b, r) = (back.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
                eprintln!(
                    "herd: after {:.0} s, {b} back, {r} upgrades refused so far",
                    died_at.elapsed().as_secs_f64()
                );
            }
        })
    };
    let connected = tokio::time::timeout(BOUND, futures::future::join_all(herd))
        .await
        .unwrap_or_else(|_| panic!("only {} of {HERD} back within {BOUND:?}", back.load(Ordering::Relaxed)));
    progress.abort();
    let took = died_at.elapsed();
    let connected: Vec<_> = connected.into_iter().map(|r| r.expect("no device task failed")).collect();
    assert_eq!(connected.len(), HERD);
    let refused = refused.load(Ordering::Relaxed);
    assert!(refused > 0, "a herd beyond the burst is paced");
    let (code, _) = http(survivor.addr(), "GET", "/healthz", None).await;
    assert_eq!(code, 200, "the survivor still serves");
    eprintln!(
        "herd: {HERD} devices of a dead node reconnected to another ({RATE}/s, burst {BURST}): {refused} upgrades refused \
         with Retry-After <= {} s, {} retried after a refusal, all back and seeing their bridge (held by a third node) online \
         after {:.1} s (bound {} s)",
        longest_wait.load(Ordering::Relaxed),
        retried.load(Ordering::Relaxed),
        took.as_secs_f64(),
        BOUND.as_secs()
    );
    drop(connected);
    drop(bridges);
    survivor.shutdown().await;
    home.shutdown().await;
}

/// [`authenticate`] allowing [`STEP`] per frame.
async fn slow_authenticate(
    mut ws: Ws,
    bridge_id: &terminull_protocol::BridgeId,
    device: &Identity,
) -> (Ws, RelayFrame) {
    let nonce = match next_frame(&mut ws).await {
        Some(RelayFrame::Challenge(c)) => terminull_protocol::crypto::from_b64url("nonce", &c.nonce).unwrap(),
        other => return (ws, other.unwrap_or(RelayFrame::Error(gone()))),
    };
    send(&mut ws, &RelayFrame::Auth(auth(device, bridge_id, &nonce))).await;
    let first = next_frame(&mut ws).await.unwrap_or(RelayFrame::Error(gone()));
    (ws, first)
}

fn gone() -> terminull_protocol::relay::RelayError {
    terminull_protocol::relay::RelayError {
        code: terminull_protocol::relay::RelayErrorCode::BadFrame,
        message: "the connection ended or nothing came in time".into(),
        session_id: None,
    }
}

/// The next frame within [`STEP`], skipping pings; `None` when the connection ended.
async fn next_frame(ws: &mut Ws) -> Option<RelayFrame> {
    use futures::StreamExt as _;
    loop {
        match tokio::time::timeout(STEP, ws.next()).await.ok()?? {
            Ok(tungstenite::Message::Text(text)) => return serde_json::from_str(text.as_str()).ok(),
            Ok(tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_)) => {}
            _ => return None,
        }
    }
}

/// What a refused reconnect got (for the test's output when it fails later).
fn tracing_free_note(frame: &RelayFrame) {
    if !matches!(frame, RelayFrame::RelayStatus(_)) {
        eprintln!("herd: a reconnect was refused: {frame:?}");
    }
}

/// Reads until the connection ends (a close, an error or the stream's end).
async fn until_closed_or_gone(ws: &mut Ws) -> Option<u16> {
    use futures::StreamExt as _;
    loop {
        match ws.next().await {
            None | Some(Err(_)) => return None,
            Some(Ok(tungstenite::Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
            Some(Ok(_)) => {}
        }
    }
}
