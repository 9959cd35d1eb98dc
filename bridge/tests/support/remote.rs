//! A bridge with one paired device, for the tests of the relay and LAN paths: an
//! in-process service with the echo adapter, its identity and device registry, and a
//! device home that paired with it (through the pairing functions, no relay needed);
//! and what those tests do alike (pairing links, a LAN server, the relay connection,
//! turns driven through a client and checked against the bridge's history).

use std::path::Path;
use std::time::Duration;

use terminull_bridge::daemon_client::Client;
use terminull_bridge::devices::{self, DeviceRegistry};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::lan::{self, LanConfig, RunningLan};
use terminull_bridge::link::LinkContext;
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::relay_client;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_client::home::{DeviceHome, PairedBridgeRecord};
use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::blocks::Block;
use terminull_protocol::control::{self, BridgeMessage, ControlMessage, ReplyResult};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::pairing::{self, PairingLink};
use terminull_protocol::ids::SessionId;

/// A running bridge service and a device paired with it.
pub struct Paired {
    /// The bridge's home.
    pub bridge_home: tempfile::TempDir,
    /// The device's home.
    pub device_dir: tempfile::TempDir,
    /// The device.
    pub device: DeviceHome,
    /// The bridge as the device recorded it.
    pub record: PairedBridgeRecord,
    /// The bridge's dispatcher.
    pub service: Service,
    /// What the bridge's links share (identity, registry, refusals).
    pub ctx: LinkContext,
    /// The device's identity.
    pub device_identity: Identity,
}

impl Paired {
    /// The bridge's home.
    pub fn home(&self) -> Home {
        Home::at(self.bridge_home.path())
    }
}

/// Starts a bridge (echo adapter only) and pairs one device with it.
pub async fn paired_bridge() -> Paired {
    let bridge_home = tempfile::tempdir().unwrap();
    let home = Home::at(bridge_home.path());
    let mut scan = ScanOptions::new(home.clone(), Config::default());
    scan.exe_dir = Some(super::echo_only_exe_dir());
    scan.handshake_timeout = Duration::from_secs(10);
    let policy = SessionPolicy { handshake_timeout: Duration::from_secs(10), ..SessionPolicy::default() };
    let service = Service::start(home.clone(), Config::default(), scan, policy).await.unwrap();
    let device = pair_device(&home, &service);
    Paired {
        bridge_home,
        device_dir: device.device_dir,
        device: device.device,
        record: device.record,
        service,
        ctx: device.ctx,
        device_identity: device.device_identity,
    }
}

/// A device paired with the bridge of `home`, and that bridge's link context.
pub struct PairedDevice {
    /// The device's home (kept alive).
    pub device_dir: tempfile::TempDir,
    /// The device.
    pub device: DeviceHome,
    /// The bridge as the device recorded it.
    pub record: PairedBridgeRecord,
    /// What the bridge's links share.
    pub ctx: LinkContext,
    /// The device's identity.
    pub device_identity: Identity,
}

/// Pairs a new device with the bridge of `home` (through the pairing functions, no
/// relay) and returns it with the bridge's link context over `service`.
pub fn pair_device(home: &Home, service: &Service) -> PairedDevice {
    let identity = devices::bridge_identity(home).unwrap();
    let registry = DeviceRegistry::open(home);
    let link = offer_link(home, None, None, 60);
    let device_dir = tempfile::tempdir().unwrap();
    let device = DeviceHome::at(device_dir.path());
    let device_identity = device.identity().unwrap();
    let (request, pending) = pairing::request(&link, &device_identity, "test-device").unwrap();
    let response = devices::handle_pair_request(home, &identity, &registry, &request).unwrap();
    let paired = pending.finish(&response).unwrap();
    let record =
        PairedBridgeRecord { bridge_id: paired.bridge_id, keys: paired.keys, relay: None, lan: None, paired_at: 0 };
    device.add_bridge(record.clone()).unwrap();
    let ctx = relay_client::context(identity, registry, service.clone());
    PairedDevice { device_dir, device, record, ctx, device_identity }
}

/// Every block the bridge wrote for `session`, chunks included, from its history file.
pub fn history(home: &Path, session: &SessionId) -> Vec<Block> {
    let path = home.join("sessions").join(session.as_str()).join("blocks.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// No block lost or duplicated: seqs strictly increase; every seq of the history the
/// client lacks was superseded by a later block of the same id that it holds (the
/// bridge compacts replays); and the transcript equals the history's.
pub fn assert_complete(client: &Transcript, history: &[Block]) {
    let seqs = client.seqs();
    for (i, block) in history.iter().enumerate() {
        let seq = block.seq.unwrap();
        if seqs.contains(&seq) {
            continue;
        }
        let superseded = block.kind.replace_key().is_some_and(|key| {
            history[i + 1..]
                .iter()
                .any(|later| later.kind.replace_key() == Some(key) && seqs.contains(&later.seq.unwrap()))
        });
        assert!(superseded, "seq {seq} ({}) was lost; the client holds {seqs:?}", block.block_type());
    }
    let mut expected = Transcript::new();
    for block in history {
        expected.apply(block.clone());
    }
    assert_eq!(client.last_seq(), expected.last_seq(), "the client is missing the newest blocks");
    assert_eq!(client.entries(), expected.entries(), "the client's transcript differs from the bridge's history");
}

/// Starts an echo session through `client` and applies its opening blocks, up to the
/// session's `replay_done`, to `transcript`; returns the session's id.
pub async fn start_echo_session(client: &mut Client, cwd: &Path, transcript: &mut Transcript) -> SessionId {
    let mut kept = Vec::new();
    let request = ControlMessage::SessionRequest(control::SessionRequest::new("echo", cwd.display().to_string()));
    let ReplyResult::SessionStarted { session_id } = client.call(request, &mut kept).await.expect("session starts")
    else {
        panic!("not started")
    };
    apply_blocks(kept, transcript);
    // The opening blocks (agent_info, …) up to the replay_done of the new session.
    loop {
        match tokio::time::timeout(Duration::from_secs(20), client.next()).await.unwrap().unwrap() {
            BridgeMessage::Block { block, .. } => {
                assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            }
            BridgeMessage::ReplayDone { .. } => break,
            _ => {}
        }
    }
    session_id
}

/// Sends a raw `session_request` for the echo agent in `cwd` through a device's link
/// (which puts its own session key in `app_pubkey`), with `id` when given.
pub async fn request_echo_session(link: &tokio::sync::mpsc::Sender<serde_json::Value>, id: Option<&str>, cwd: &Path) {
    let mut request = serde_json::json!({"type": "session_request", "agent": "echo", "cwd": cwd, "app_pubkey": ""});
    if let Some(id) = id {
        request["id"] = id.into();
    }
    link.send(request).await.unwrap();
}

/// Logs to the test's output when `RUST_LOG` is set.
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A fresh pairing offer of the bridge of `home`, valid `ttl_secs`, as the link a
/// device opens (the QR code), naming `relay` and `lan` when given.
pub fn offer_link(home: &Home, relay: Option<String>, lan: Option<String>, ttl_secs: u64) -> PairingLink {
    let public = devices::bridge_identity(home).unwrap().public();
    let (secret, expires_at) = devices::create_offer(home, ttl_secs).unwrap();
    PairingLink { bridge_id: public.bridge_id(), bridge: public.to_wire(), relay, lan, secret, expires_at }
}

/// The bridge's LAN server, on a loopback port the kernel picks.
pub async fn start_lan(bridge: &Paired) -> RunningLan {
    lan::start(bridge.ctx.clone(), bridge.home(), LanConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .expect("the LAN server binds")
}

/// Connects the bridge to the relay at `relay_url`, reconnecting quickly (50 ms to
/// 400 ms) when the relay goes away, for as long as the test runs.
pub fn connect_to_relay(bridge: &Paired, relay_url: String) {
    let backoff =
        terminull_bridge::relay_client::Backoff { min: Duration::from_millis(50), max: Duration::from_millis(400) };
    tokio::spawn(terminull_bridge::relay_client::run(bridge.ctx.clone(), bridge.home(), relay_url, backoff));
}

/// The texts of a transcript's entries (messages, replies), in order.
pub fn texts(transcript: &Transcript) -> Vec<String> {
    transcript
        .entries()
        .iter()
        .filter_map(|b| serde_json::to_value(b).ok()?.get("text")?.as_str().map(str::to_owned))
        .collect()
}

/// The next message from the bridge, within `secs` seconds.
pub async fn next_within(client: &mut Client, secs: u64) -> BridgeMessage {
    tokio::time::timeout(Duration::from_secs(secs), client.next()).await.expect("a message in time").expect("open")
}

/// Applies the blocks among `messages` to `transcript`, each once.
pub fn apply_blocks(messages: Vec<BridgeMessage>, transcript: &mut Transcript) {
    for m in messages {
        if let BridgeMessage::Block { block, .. } = m {
            assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
        }
    }
}

/// Sends `text` to `session` and applies the blocks that arrived before its reply.
pub async fn say(client: &mut Client, session: &SessionId, text: &str, transcript: &mut Transcript) {
    let mut kept = Vec::new();
    let message = ControlMessage::UserMessage(control::UserMessage {
        session_id: session.clone(),
        text: text.into(),
        attachments: vec![],
    });
    client.call(message, &mut kept).await.expect("user_message accepted");
    apply_blocks(kept, transcript);
}

/// Applies blocks until the turn's `session_end`; returns how many arrived.
pub async fn until_turn_end(client: &mut Client, transcript: &mut Transcript) -> usize {
    let mut n = 0;
    loop {
        if let BridgeMessage::Block { block, .. } = next_within(client, 30).await {
            let end = block.block_type() == "session_end";
            assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            n += 1;
            if end {
                return n;
            }
        }
    }
}

/// Waits until the relay lists `bridge` as registered (the listing is signed by its device).
pub async fn until_registered(relay: &terminull_relay::RunningRelay, bridge: &Paired) {
    for _ in 0..100 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let query = terminull_relay::listing::devices_listing_query(
            &bridge.device_identity,
            bridge.record.bridge_id.as_str(),
            now,
        );
        let url = format!("{}/v1/bridges/{}/devices?{query}", relay.http_url(), bridge.record.bridge_id);
        if terminull_client::net::request_json("GET", &url, None, Duration::from_secs(2))
            .await
            .is_ok_and(|r| r.status == 200)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the bridge {} never registered with the relay", bridge.record.bridge_id);
}
