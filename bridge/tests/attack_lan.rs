//! Attacks on the LAN server and the device registry (issue 20): a paired device that
//! stops reading during a long stream, a flood of sockets that never authenticate, a
//! flood of junk pairing requests, and device adds and revocations at once. Each test
//! prints one `attack: …` line (`cargo test -p terminull-bridge --test attack_lan --
//! --nocapture attack_`). Loopback only; "another address" is 127.0.0.2 (a client
//! socket bound before it connects).

#![allow(clippy::print_stdout, reason = "each attack prints its one result line")]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use terminull_bridge::devices::DeviceRegistry;
use terminull_bridge::lan::{self, LanConfig, RunningLan};
use terminull_client::connection::Connection;
use terminull_client::home::DeviceHome;
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{DeviceRecord, RelayFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Held by the tests that measure this process's memory, so they do not measure
/// each other.
static MEMORY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// This process's resident set, in MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024
}

/// A TCP stream to `to` from `from` (an address of this machine, e.g. 127.0.0.2).
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

async fn start_lan(paired: &support::remote::Paired, config: impl FnOnce(&mut LanConfig)) -> RunningLan {
    let mut c = LanConfig::new("127.0.0.1:0".parse().unwrap());
    config(&mut c);
    lan::start(paired.ctx.clone(), paired.home(), c).await.expect("the LAN server binds")
}

/// A TCP proxy to `server` whose server-to-device direction stops when `stall` is
/// set: the device keeps its socket, the bridge sees a device that stopped reading.
async fn stallable_proxy(server: SocketAddr, stall: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((device, _)) = listener.accept().await {
            // A small receive buffer: the bridge's writes stall soon after the stall,
            // not after the kernel has taken tens of MB.
            let socket = TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(64 * 1024).unwrap();
            let bridge = socket.connect(server).await.unwrap();
            let (mut device_read, mut device_write) = device.into_split();
            let (mut bridge_read, mut bridge_write) = bridge.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut device_read, &mut bridge_write).await;
            });
            let stall = stall.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    while stall.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    match bridge_read.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if device_write.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

async fn next(rx: &mut tokio::sync::mpsc::Receiver<BridgeMessage>) -> BridgeMessage {
    tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a message in time").expect("open")
}

/// Opens an echo session on `connection` and reads up to its `replay_done`.
async fn open_session(connection: &mut Connection, cwd: &std::path::Path) -> String {
    support::remote::request_echo_session(&connection.tx, Some("s1"), cwd).await;
    let mut session = None;
    loop {
        match next(&mut connection.rx).await {
            BridgeMessage::Reply(r) => match r.outcome {
                ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } => session = Some(session_id),
                other => panic!("{other:?}"),
            },
            BridgeMessage::ReplayDone { .. } => break,
            BridgeMessage::Block { .. } => {}
            other @ (BridgeMessage::TerminalOutput(_) | BridgeMessage::TerminalExit(_)) => {
                panic!("no terminal here: {other:?}")
            }
        }
    }
    session.expect("session_started").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_lan_stalled_reader_is_cut_within_the_write_deadline_and_memory_stays_bounded() {
    /// The stream: BLOCKS finished text blocks of BLOCK_BYTES (what the issue measured
    /// with 0.93 MB blocks).
    const BLOCKS: u64 = 300;
    const BLOCK_BYTES: u64 = 900_000;
    /// The stated bound on the process's growth while the device is stalled.
    const BOUND_MIB: u64 = 160;
    let write_timeout = Duration::from_secs(3);
    let _alone = MEMORY.lock().await;
    let paired = support::remote::paired_bridge().await;
    let server = start_lan(&paired, |c| c.write_timeout = write_timeout).await;
    let stall = Arc::new(AtomicBool::new(false));
    let proxy = stallable_proxy(server.addr(), stall.clone()).await;
    let url = format!("ws://{proxy}");
    let mut connection = Connection::open_lan(&paired.device, &paired.record, &url).await.expect("link over the LAN");
    let cwd = tempfile::tempdir().unwrap();
    let session = open_session(&mut connection, cwd.path()).await;
    let before = rss_mib();
    stall.store(true, Ordering::SeqCst);
    let text = format!("bench blocks {BLOCKS} {BLOCK_BYTES}");
    connection.tx.send(json!({"id": "m1", "type": "user_message", "session_id": session, "text": text})).await.unwrap();
    let stalled_at = Instant::now();
    let mut peak = before;
    let mut cut_after = None;
    // The cut comes once the kernel's buffers and the outbox are full and then a write
    // made no progress for the deadline; filling them takes a debug build on a loaded
    // 2-core machine anywhere from a few seconds to half a minute.
    while stalled_at.elapsed() < Duration::from_secs(90) {
        peak = peak.max(rss_mib());
        if cut_after.is_none() && server.device_connections() == 0 {
            cut_after = Some(stalled_at.elapsed());
        }
        // Watch memory a little past the cut too (the stream goes on to the history).
        if cut_after.is_some_and(|t| stalled_at.elapsed() > t + Duration::from_secs(3)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let total_mb = BLOCKS * BLOCK_BYTES / 1_000_000;
    println!(
        "attack: lan stalled reader: {total_mb} MB stream, RSS {before} MiB -> peak {peak} MiB (bound +{BOUND_MIB} MiB), cut after {:.1} s (write deadline {} s)",
        cut_after.map(|t| t.as_secs_f64()).unwrap_or(f64::NAN),
        write_timeout.as_secs()
    );
    let cut_after = cut_after.expect("the stalled device is cut");
    assert!(cut_after < write_timeout + Duration::from_secs(60), "cut after {cut_after:?}");
    assert!(peak - before <= BOUND_MIB, "RSS grew {} MiB", peak - before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_lan_unauthenticated_flood_from_one_address_does_not_deny_a_paired_device() {
    const SOCKETS: usize = 256;
    let paired = support::remote::paired_bridge().await;
    let server = start_lan(&paired, |_| {}).await;
    let url = format!("{}/v1/client", server.ws_url());
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..SOCKETS {
        let tcp = connect_from("127.0.0.2", server.addr()).await;
        match tokio_tungstenite::client_async(url.as_str(), tcp).await {
            // Upgraded: hold it without ever answering the challenge.
            Ok((ws, _)) => held.push(ws),
            Err(_) => refused += 1,
        }
    }
    let opened = tokio::time::timeout(
        Duration::from_secs(20),
        Connection::open_lan(&paired.device, &paired.record, &server.ws_url()),
    )
    .await
    .expect("the paired device connects in time");
    println!(
        "attack: lan unauthenticated flood: {SOCKETS} sockets from 127.0.0.2: {} upgraded, {refused} refused (503 or closed); paired device from 127.0.0.1: {}",
        held.len(),
        if opened.is_ok() { "linked" } else { "refused" }
    );
    let mut connection = opened.expect("a paired device links during the flood");
    let cwd = tempfile::tempdir().unwrap();
    open_session(&mut connection, cwd.path()).await;
    assert!(held.len() <= LanConfig::new(server.addr()).max_unauthenticated_per_ip);
}

/// A raw `POST` from `from`; the response's status.
async fn post_from(from: &str, to: SocketAddr, path: &str, body: &str) -> u16 {
    let mut tcp = connect_from(from, to).await;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut response)).await;
    let head = String::from_utf8_lossy(&response);
    head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_lan_junk_pairing_requests_from_one_address_do_not_block_a_pairing_from_another() {
    const JUNK: usize = 30;
    let paired = support::remote::paired_bridge().await;
    let server = start_lan(&paired, |_| {}).await;
    let bridge_id = paired.ctx.identity.public().bridge_id();
    let path = format!("/v1/bridges/{bridge_id}/pair");
    let junk = json!({"pairing_id": "AAAAAAAAAAAAAAAAAAAAAA", "nonsense": true}).to_string();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for _ in 0..JUNK {
        *statuses.entry(post_from("127.0.0.2", server.addr(), &path, &junk).await).or_default() += 1;
    }
    let link = support::remote::offer_link(&paired.home(), None, Some(server.ws_url()), 60);
    let phone_dir = tempfile::tempdir().unwrap();
    let phone = DeviceHome::at(phone_dir.path());
    let pairing = terminull_client::pairing::pair(&phone, &link.to_url(&server.http_url()), "phone", None).await;
    println!(
        "attack: lan pairing flood: {JUNK} junk requests from 127.0.0.2 answered {statuses:?}; a real pairing from 127.0.0.1: {}",
        match &pairing {
            Ok(_) => "paired".to_owned(),
            Err(e) => format!("refused ({e})"),
        }
    );
    assert!(statuses.get(&429).copied().unwrap_or(0) > 0, "the flooding address is limited: {statuses:?}");
    pairing.expect("the other address pairs");
}

fn record(name: &str) -> DeviceRecord {
    let identity = Identity::generate();
    DeviceRecord {
        device_id: identity.public().device_id(),
        keys: identity.public().to_wire(),
        name: name.into(),
        revoked: false,
    }
}

#[test]
fn attack_device_registry_concurrent_adds_and_revokes_lose_nothing() {
    const EACH: usize = 25;
    let dir = tempfile::tempdir().unwrap();
    let home = terminull_bridge::home::Home::at(dir.path());
    let first: Vec<DeviceRecord> = (0..EACH).map(|i| record(&format!("old-{i}"))).collect();
    let registry = DeviceRegistry::open(&home);
    for r in &first {
        registry.add(r.clone()).unwrap();
    }
    let added: Vec<DeviceRecord> = (0..EACH).map(|i| record(&format!("new-{i}"))).collect();
    // Revocations from other processes (`terminull devices revoke`), adds from threads
    // of this one, each through its own registry handle, all at once.
    let revokers: Vec<std::process::Child> = first
        .iter()
        .map(|r| {
            std::process::Command::new(env!("CARGO_BIN_EXE_terminull"))
                .arg("devices")
                .arg("--home")
                .arg(dir.path())
                .args(["revoke", r.device_id.as_str()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::scope(|scope| {
        for r in &added {
            let home = home.clone();
            scope.spawn(move || DeviceRegistry::open(&home).add(r.clone()).unwrap());
        }
    });
    let failed = revokers.into_iter().map(|mut c| c.wait().unwrap()).filter(|s| !s.success()).count();
    let (devices, _) = DeviceRegistry::open(&home).snapshot();
    let revoked = first.iter().filter(|r| devices.iter().any(|d| d.device_id == r.device_id && d.revoked)).count();
    let active = added.iter().filter(|r| devices.iter().any(|d| d.device_id == r.device_id && !d.revoked)).count();
    println!(
        "attack: device registry races: {EACH} revokes (processes) + {EACH} adds (threads) at once: {} devices, {revoked}/{EACH} revoked, {active}/{EACH} added, {failed} commands failed",
        devices.len()
    );
    assert_eq!(failed, 0);
    assert_eq!((devices.len(), revoked, active), (2 * EACH, EACH, EACH), "a change was lost");
}

/// Runs `terminull pair` (waiting, asking) for the bridge of `paired` at `server`,
/// pairs a phone with its link, checks the phone is refused while the terminal has
/// not answered, answers `answer`; returns the exit status and whether the phone can
/// connect afterwards.
async fn pair_and_answer(
    paired: &support::remote::Paired,
    server: &RunningLan,
    answer: &str,
) -> (std::process::ExitStatus, bool) {
    use std::io::{BufRead, Write};
    let mut cli = std::process::Command::new(env!("CARGO_BIN_EXE_terminull"))
        .args(["pair", "--json", "--lan", &server.ws_url(), "--ttl", "60", "--home"])
        .arg(paired.bridge_home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(cli.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let offer: serde_json::Value = serde_json::from_str(&line).unwrap();
    let phone_dir = tempfile::tempdir().unwrap();
    let phone = DeviceHome::at(phone_dir.path());
    terminull_client::pairing::pair(&phone, offer["link"].as_str().unwrap(), "phone", None)
        .await
        .expect("the exchange itself completes");
    let record = phone.bridge(None).unwrap();
    let pending = Connection::open_lan(&phone, &record, &server.ws_url()).await;
    assert!(pending.is_err(), "usable before the terminal confirmed its code");
    // The question comes once the device answered: read it, then answer.
    let mut question = String::new();
    // The question ends without a newline, and may come in more than one write.
    while !question.contains("[y/N]") {
        let mut buf = [0u8; 256];
        let n = std::io::Read::read(&mut stdout, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        question.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(question.contains("Does the device show"), "{question:?}");
    cli.stdin.take().unwrap().write_all(answer.as_bytes()).unwrap();
    let status = cli.wait().unwrap();
    let usable = Connection::open_lan(&phone, &record, &server.ws_url()).await.is_ok();
    (status, usable)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_lan_a_paired_device_is_refused_until_its_short_code_is_confirmed_on_the_terminal() {
    let paired = support::remote::paired_bridge().await;
    let server = start_lan(&paired, |_| {}).await;
    let (no, usable_after_no) = pair_and_answer(&paired, &server, "n\n").await;
    let (yes, usable_after_yes) = pair_and_answer(&paired, &server, "y\n").await;
    println!(
        "attack: lan unconfirmed pairing: refused while pending; answer N: exit {:?}, usable {usable_after_no}; answer y: exit {:?}, usable {usable_after_yes}",
        no.code(),
        yes.code()
    );
    assert!(!no.success() && !usable_after_no, "a device refused on the terminal stays refused");
    assert!(yes.success() && usable_after_yes, "a confirmed device is usable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_lan_silent_sockets_and_trickled_pairing_bodies_are_cut_at_the_deadline() {
    const SILENT: usize = 40;
    let deadline = Duration::from_secs(2);
    let paired = support::remote::paired_bridge().await;
    let server = start_lan(&paired, |c| c.auth_timeout = deadline).await;
    let started = Instant::now();
    // Sockets that never send a request: over the per-address share they are closed at
    // once, the others when the headers' deadline passes.
    let mut silent = Vec::new();
    for _ in 0..SILENT {
        silent.push(connect_from("127.0.0.2", server.addr()).await);
    }
    let mut closed = 0;
    for tcp in &mut silent {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut byte)).await {
            closed += 1;
        }
    }
    let silent_after = started.elapsed();
    // A pairing body announced and trickled.
    let bridge_id = paired.ctx.identity.public().bridge_id();
    let mut tcp = connect_from("127.0.0.2", server.addr()).await;
    let head = format!(
        "POST /v1/bridges/{bridge_id}/pair HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n{{\"pairing"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let trickled_at = Instant::now();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(15), tcp.read_to_end(&mut response)).await;
    let trickle_after = trickled_at.elapsed();
    let status = String::from_utf8_lossy(&response).split_whitespace().nth(1).unwrap_or("none").to_owned();
    println!(
        "attack: lan silent sockets and trickled body: {closed}/{SILENT} silent sockets from one address closed within {:.1} s; a trickled pairing body answered {status} after {:.1} s (deadline {} s)",
        silent_after.as_secs_f64(),
        trickle_after.as_secs_f64(),
        deadline.as_secs()
    );
    assert_eq!(closed, SILENT);
    assert_eq!(status, "408");
}

// Before the byte bounds on the live feed, the link queue, history reads, the sealed
// hand-over and the adapter's incoming queue, the test process grew +405 MiB; the
// last of them (an adapter's 1,024 queued lines, counted in messages only) held about
// 125 MB of the stream at the peak (heaptrack), +170 MiB on an idle machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_relay_that_stops_reading_the_bridge_is_left_at_the_write_deadline_with_memory_bounded() {
    const BLOCKS: u64 = 300;
    const BLOCK_BYTES: u64 = 900_000;
    const BOUND_MIB: u64 = 128;
    let _alone = MEMORY.lock().await;
    let paired = support::remote::paired_bridge().await;
    let relay = support::hostile::HostileRelay::start().await;
    tokio::spawn(terminull_bridge::relay_client::run(
        paired.ctx.clone(),
        paired.home(),
        relay.url.clone(),
        Default::default(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut connection = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect("link opens");
    let cwd = tempfile::tempdir().unwrap();
    let session = open_session(&mut connection, cwd.path()).await;
    let registrations =
        || relay.from_bridge.lock().unwrap().iter().filter(|f| matches!(f, RelayFrame::Register(_))).count();
    let before = rss_mib();
    relay.stall_bridge.store(true, Ordering::SeqCst);
    let text = format!("bench blocks {BLOCKS} {BLOCK_BYTES}");
    connection.tx.send(json!({"id": "m1", "type": "user_message", "session_id": session, "text": text})).await.unwrap();
    let stalled_at = Instant::now();
    let mut peak = before;
    let mut left_after = None;
    // As for the LAN: the deadline runs once the buffers before the relay are full,
    // which a loaded machine's debug build takes a while to reach.
    while stalled_at.elapsed() < Duration::from_secs(120) {
        peak = peak.max(rss_mib());
        if registrations() > 1 {
            left_after = Some(stalled_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let total_mb = BLOCKS * BLOCK_BYTES / 1_000_000;
    println!(
        "attack: relay stops reading the bridge: {total_mb} MB stream, RSS {before} MiB -> peak {peak} MiB (bound +{BOUND_MIB} MiB), bridge reconnected after {:.1} s (write deadline 30 s)",
        left_after.map(|t| t.as_secs_f64()).unwrap_or(f64::NAN)
    );
    let left_after = left_after.expect("the bridge leaves a relay that stopped reading");
    assert!(left_after < Duration::from_secs(110), "left after {left_after:?}");
    assert!(peak - before <= BOUND_MIB, "RSS grew {} MiB", peak - before);
}
