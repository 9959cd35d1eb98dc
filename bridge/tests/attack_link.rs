//! Attacks on the link's guarantees (issue 20, "low" items), through the relay and the
//! LAN server:
//!
//! - a paired device that leaves the envelope's `session_id` out of a control that
//!   drives a session (so the relay checks no resume token) is refused
//!   (`refused`/`session_mismatch`), and nothing runs;
//! - a replayed control gets a `refused`/`replayed` reply, which the device's client
//!   matches to the control by its counter;
//! - a `replay_done` or an agent list made up by the relay is ignored by the client;
//! - push nonces keep rising across a bridge restart.
//!
//! Each test prints one `attack: …` line (`cargo test -p terminull-bridge --test
//! attack_link -- --nocapture attack_`).

#![allow(clippy::print_stdout, reason = "attack tests print one result line each")]

mod support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::hostile::HostileRelay;
use terminull_bridge::push_counter::{self, PushCounters};
use terminull_client::connection::Connection;
use terminull_protocol::control::{BridgeMessage, RefusalReason, Reply, ReplyOutcome, ReplyResult};
use terminull_protocol::crypto::channel::Channel;
use terminull_protocol::crypto::envelope::{open_reply, relay_auth_bytes, seal_control};
use terminull_protocol::crypto::handshake::DeviceHandshake;
use terminull_protocol::crypto::keys::{Identity, PublicIdentity};
use terminull_protocol::crypto::{b64, b64url, from_b64url};
use terminull_protocol::ids::{BridgeId, DeviceId, SessionId};
use terminull_protocol::relay::{
    Auth, ControlEnvelope, LinkAccept, PROTOCOL_VERSION, RelayFrame, RelayStatus, SealedReply,
};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// A paired device written by hand: the link handshake and sealing as the docs state
/// them, so a test can send what the real client never would (a control whose
/// envelope leaves its session out, the same envelope twice).
struct RawDevice {
    identity: Identity,
    bridge_id: BridgeId,
    bridge: PublicIdentity,
    pending: Option<DeviceHandshake>,
    channel: Option<Channel>,
}

impl RawDevice {
    fn new(identity: Identity, paired: &support::remote::Paired) -> Self {
        let bridge = PublicIdentity::from_wire(&paired.record.keys).unwrap();
        Self { identity, bridge_id: paired.record.bridge_id.clone(), bridge, pending: None, channel: None }
    }

    fn device_id(&self) -> DeviceId {
        self.identity.public().device_id()
    }

    /// A fresh `link_hello` (version 3: with this link's ephemeral key).
    fn hello(&mut self, conn: Option<u64>) -> RelayFrame {
        let (mut hello, pending) = DeviceHandshake::start(&self.identity, self.bridge_id.as_str());
        hello.conn = conn;
        self.pending = Some(pending);
        RelayFrame::LinkHello(hello)
    }

    /// Checks the bridge's `link_accept` and derives the link's keys.
    fn accepted(&mut self, accept: &LinkAccept) {
        let pending = self.pending.take().expect("hello sent first");
        let keys = pending.finish(&self.identity, &self.bridge, accept).unwrap();
        self.channel = Some(Channel::app_side(&keys, "link"));
    }

    /// Seals `control` with `envelope_session` as the envelope's `session_id` (the
    /// real client always puts the message's own there).
    fn control(&mut self, control: &Value, envelope_session: Option<&str>, conn: Option<u64>) -> ControlEnvelope {
        let json = serde_json::to_vec(control).unwrap();
        let session = envelope_session.map(|s| SessionId(s.to_owned()));
        let token = session.as_ref().map(|s| format!("token-{s}"));
        let sealer = &mut self.channel.as_mut().expect("the link is open").sealer;
        let mut envelope =
            seal_control(sealer, &self.identity, self.bridge_id.as_str(), session, token, &json).unwrap();
        envelope.conn = conn;
        envelope
    }

    fn open(&mut self, body: &str) -> Reply {
        let device_id = self.device_id();
        let opener = &mut self.channel.as_mut().expect("the link is open").opener;
        let bytes = open_reply(opener, self.bridge_id.as_str(), device_id.as_str(), body).unwrap();
        serde_json::from_slice::<SealedReply>(&bytes).unwrap().reply
    }
}

/// The bridge's frames for relay connection `conn` (the hostile relay records them).
async fn from_bridge_for(relay: &HostileRelay, conn: u64, skip: usize, want: usize) -> Vec<RelayFrame> {
    for _ in 0..200 {
        let frames: Vec<RelayFrame> = relay
            .from_bridge
            .lock()
            .unwrap()
            .iter()
            .filter(|f| match f {
                RelayFrame::LinkAccept(a) => a.conn == Some(conn),
                RelayFrame::Reply(r) => r.conn == Some(conn),
                _ => false,
            })
            .cloned()
            .collect();
        if frames.len() >= skip + want {
            return frames.into_iter().skip(skip).collect();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the bridge sent fewer than {} frames for connection {conn}", skip + want);
}

fn refused_reason(reply: &Reply) -> Option<(RefusalReason, Option<u64>)> {
    match &reply.outcome {
        ReplyOutcome::Refused { reason, counter, .. } => Some((*reason, *counter)),
        _ => None,
    }
}

async fn started_session(device: &mut RawDevice, replies: Vec<RelayFrame>) -> SessionId {
    let RelayFrame::Reply(r) = &replies[0] else { panic!("{replies:?}") };
    let reply = device.open(&r.body);
    let ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } = reply.outcome else {
        panic!("{reply:?}")
    };
    session_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_session_control_without_the_envelope_session_is_refused_through_the_relay() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    support::remote::connect_to_relay(&paired, relay.url.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let conn = 950;
    let mut device = RawDevice::new(paired.device_identity.clone(), &paired);
    relay.to_bridge.send(device.hello(Some(conn))).unwrap();
    let RelayFrame::LinkAccept(accept) = from_bridge_for(&relay, conn, 0, 1).await.remove(0) else { unreachable!() };
    device.accepted(&accept);
    let cwd = tempfile::tempdir().unwrap();
    let request = json!({"id": "r1", "type": "session_request", "agent": "echo", "cwd": cwd.path(), "app_pubkey": b64url(&[7; 32])});
    relay.to_bridge.send(RelayFrame::Control(device.control(&request, None, Some(conn)))).unwrap();
    let session = started_session(&mut device, from_bridge_for(&relay, conn, 1, 1).await).await;

    // The device names the session inside the seal but not on the envelope (so a relay
    // would check no token), then the other way round, then another session.
    let cases = [
        (json!({"id": "m1", "type": "user_message", "session_id": session, "text": "no token needed?"}), None),
        (json!({"id": "m2", "type": "list_sessions"}), Some(session.as_str())),
        (json!({"id": "m3", "type": "interrupt", "session_id": session}), Some("s-other")),
    ];
    let before = paired.ctx.refusals.count();
    let mut refused = 0;
    for (i, (control, envelope_session)) in cases.iter().enumerate() {
        relay.to_bridge.send(RelayFrame::Control(device.control(control, *envelope_session, Some(conn)))).unwrap();
        let RelayFrame::Reply(r) = from_bridge_for(&relay, conn, 2 + i, 1).await.remove(0) else { unreachable!() };
        let reply = device.open(&r.body);
        assert_eq!(reply.id.as_deref(), control["id"].as_str(), "{reply:?}");
        assert_eq!(refused_reason(&reply).map(|r| r.0), Some(RefusalReason::SessionMismatch), "{reply:?}");
        refused += 1;
    }
    assert_eq!(paired.ctx.refusals.count() - before, 3);
    let history = support::remote::history(paired.bridge_home.path(), &session);
    assert!(
        !history.iter().any(|b| serde_json::to_string(b).unwrap().contains("no token needed?")),
        "the stripped user_message reached the agent"
    );
    println!(
        "attack: session control without the envelope's session_id (relay): {refused} of 3 refused session_mismatch, 0 dispatched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_replayed_control_through_the_relay_gets_a_refused_reply_the_client_matches() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    support::remote::connect_to_relay(&paired, relay.url.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut connection = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect("link opens");
    connection.tx.send(json!({"id": "q1", "type": "list_sessions"})).await.unwrap();
    let first = next_reply(&mut connection.rx).await;
    assert!(matches!(first.outcome, ReplyOutcome::Ok { .. }), "{first:?}");
    let recorded = relay.last_from_client(|f| matches!(f, RelayFrame::Control(_)));
    let before = paired.ctx.refusals.count();
    let mut tried = 0;
    let mut answered = 0;
    for _ in 0..3 {
        tried += 1;
        relay.to_bridge.send(recorded.clone()).unwrap();
        let reply = next_reply(&mut connection.rx).await;
        // The bridge could not read the replayed body's id: the client finds it by counter.
        assert_eq!(reply.id.as_deref(), Some("q1"), "{reply:?}");
        assert_eq!(refused_reason(&reply), Some((RefusalReason::Replayed, Some(1))), "{reply:?}");
        answered += 1;
    }
    assert_eq!(paired.ctx.refusals.count() - before, tried);
    // The link still works.
    connection.tx.send(json!({"id": "q2", "type": "list_sessions"})).await.unwrap();
    assert!(matches!(next_reply(&mut connection.rx).await.outcome, ReplyOutcome::Ok { .. }));
    println!(
        "attack: replayed control (relay): {tried} replays, {answered} answered refused/replayed naming `q1`, 0 dispatched"
    );
}

async fn next_reply(rx: &mut mpsc::Receiver<BridgeMessage>) -> Reply {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a reply in time").expect("open") {
            BridgeMessage::Reply(r) => return r,
            _ => continue,
        }
    }
}

type LanWs = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn lan_send(ws: &mut LanWs, frame: &RelayFrame) {
    ws.send(Message::text(serde_json::to_string(frame).unwrap())).await.unwrap();
}

async fn lan_next(ws: &mut LanWs) -> RelayFrame {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("a frame in time");
        if let Some(Ok(Message::Text(text))) = message {
            return serde_json::from_str(&text).unwrap();
        }
        assert!(matches!(message, Some(Ok(_))), "the LAN server closed: {message:?}");
    }
}

async fn lan_reply(ws: &mut LanWs, device: &mut RawDevice) -> Reply {
    loop {
        if let RelayFrame::Reply(r) = lan_next(ws).await {
            return device.open(&r.body);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_replayed_and_session_stripped_controls_on_the_lan_get_refused_replies() {
    let paired = support::remote::paired_bridge().await;
    let lan = support::remote::start_lan(&paired).await;
    let url = format!("ws://{}{}", lan.addr(), terminull_protocol::lan::CLIENT_PATH);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.expect("the LAN server accepts");
    let mut device = RawDevice::new(paired.device_identity.clone(), &paired);
    let RelayFrame::Challenge(challenge) = lan_next(&mut ws).await else { panic!("no challenge") };
    let challenge = from_b64url("nonce", &challenge.nonce).unwrap();
    let signed = relay_auth_bytes("device", device.device_id().as_str(), device.bridge_id.as_str(), &challenge);
    let auth = Auth {
        bridge_id: device.bridge_id.clone(),
        device_id: device.device_id(),
        sig: b64(&device.identity.sign(&signed)),
        protocol_version: PROTOCOL_VERSION,
    };
    lan_send(&mut ws, &RelayFrame::Auth(auth)).await;
    let RelayFrame::RelayStatus(_) = lan_next(&mut ws).await else { panic!("no relay_status") };
    lan_send(&mut ws, &device.hello(None)).await;
    let accept = loop {
        if let RelayFrame::LinkAccept(a) = lan_next(&mut ws).await {
            break a;
        }
    };
    device.accepted(&accept);
    let listing = device.control(&json!({"id": "l1", "type": "list_sessions"}), None, None);
    lan_send(&mut ws, &RelayFrame::Control(listing.clone())).await;
    assert!(matches!(lan_reply(&mut ws, &mut device).await.outcome, ReplyOutcome::Ok { .. }));
    // The same envelope again (a replay on the way), and a stripped session.
    lan_send(&mut ws, &RelayFrame::Control(listing)).await;
    let replayed = lan_reply(&mut ws, &mut device).await;
    assert_eq!(refused_reason(&replayed), Some((RefusalReason::Replayed, Some(1))), "{replayed:?}");
    let stripped = device.control(&json!({"id": "i1", "type": "interrupt", "session_id": "s-1"}), None, None);
    lan_send(&mut ws, &RelayFrame::Control(stripped)).await;
    let mismatch = lan_reply(&mut ws, &mut device).await;
    assert_eq!(mismatch.id.as_deref(), Some("i1"));
    assert_eq!(refused_reason(&mismatch), Some((RefusalReason::SessionMismatch, Some(2))), "{mismatch:?}");
    println!(
        "attack: replayed and session-stripped controls (LAN): 2 of 2 answered refused (replayed, session_mismatch), 0 dispatched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_forged_replay_done_and_agent_list_from_the_relay_are_ignored() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    support::remote::connect_to_relay(&paired, relay.url.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut connection = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect("link opens");
    let stats = connection.info.stats.clone();
    let cwd = tempfile::tempdir().unwrap();
    support::remote::request_echo_session(&connection.tx, Some("r1"), cwd.path()).await;
    // The genuine, sealed replay_done of the new session arrives and opens.
    let mut session = None;
    let mut genuine_done = false;
    while !genuine_done {
        match tokio::time::timeout(Duration::from_secs(20), connection.rx.recv()).await.unwrap().unwrap() {
            BridgeMessage::Reply(r) => {
                if let ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } = r.outcome {
                    session = Some(session_id);
                }
            }
            BridgeMessage::ReplayDone { .. } => genuine_done = true,
            BridgeMessage::Block { .. } => {}
            other @ (BridgeMessage::TerminalOutput(_) | BridgeMessage::TerminalExit(_)) => {
                panic!("no terminal here: {other:?}")
            }
        }
    }
    let session = session.expect("the session started");
    while tokio::time::timeout(Duration::from_millis(300), connection.rx.recv()).await.is_ok() {}
    let conn = relay.newest_link().0;
    let rejected = || stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    let (mut tried, mut accepted) = (0, 0);
    // Forged replay_done frames: unsealed, with a made-up seal, and a genuine one replayed.
    let genuine = relay
        .from_bridge
        .lock()
        .unwrap()
        .iter()
        .find(|f| matches!(f, RelayFrame::ReplayDone(_)))
        .cloned()
        .expect("the bridge sent a replay_done");
    let RelayFrame::ReplayDone(genuine) = genuine else { unreachable!() };
    assert!(genuine.enc.is_some(), "the bridge seals replay_done");
    let mut unsealed = genuine.clone();
    unsealed.enc = None;
    let mut made_up = genuine.clone();
    made_up.enc = Some(b64(&[0u8; 60]));
    for forged in [unsealed, made_up, genuine] {
        tried += 1;
        let before = rejected();
        relay.to_client(conn, RelayFrame::ReplayDone(forged));
        let delivered = tokio::time::timeout(Duration::from_millis(400), connection.rx.recv()).await;
        if rejected() == before || matches!(delivered, Ok(Some(BridgeMessage::ReplayDone { .. }))) {
            accepted += 1;
        }
    }
    // A forged agent list.
    tried += 1;
    let forged_status = RelayStatus {
        protocol_version: PROTOCOL_VERSION,
        bridge_online: true,
        agents: vec![terminull_protocol::relay::AgentSummary {
            agent_id: "rm-rf".into(),
            display_name: "Totally Claude".into(),
            version: None,
            provides_models: false,
            installed: true,
            takes_permission_mode: false,
            continues_in_terminal: false,
            install_hint: None,
        }],
        resume_tokens: [(session.clone(), format!("token-{session}"))].into(),
    };
    relay.to_client(conn, RelayFrame::RelayStatus(forged_status));
    tokio::time::sleep(Duration::from_millis(300)).await;
    if !connection.info.status.borrow().agents.is_empty() {
        accepted += 1;
    }
    // The authenticated list comes from the bridge.
    connection.tx.send(json!({"id": "a1", "type": "list_agents"})).await.unwrap();
    let agents = next_reply(&mut connection.rx).await;
    let ReplyOutcome::Ok { result: ReplyResult::Agents { agents } } = agents.outcome else { panic!("{agents:?}") };
    assert!(agents.iter().all(|a| a.agent_id.as_str() != "rm-rf"));
    println!("attack: forged replay_done and agent list (relay): {tried} cases tried, {accepted} accepted");
    assert_eq!(accepted, 0, "{:?}", stats.reasons());
}

#[test]
fn attack_push_nonces_stay_monotonic_across_a_bridge_restart() {
    let home = tempfile::tempdir().unwrap();
    let device = DeviceId("dev_attack".into());
    let mut seen = Vec::new();
    for _restart in 0..3 {
        let counters = PushCounters::open(home.path()).unwrap();
        for _ in 0..5 {
            seen.push(counters.next(&device).unwrap());
        }
        // A "crash": nothing written at exit.
        drop(counters);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    let path = home.path().join(push_counter::FILE_NAME);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    println!(
        "attack: push nonce repeat across restarts: 15 pushes over 3 bridge runs, counters strictly rising ({} .. {}), 0 repeats, {} 0600",
        seen[0],
        seen[seen.len() - 1],
        push_counter::FILE_NAME
    );
}

/// The push frames the bridge sent `device` so far, as their counters.
fn push_counters_sent(relay: &HostileRelay, device: &DeviceId) -> Vec<u64> {
    relay
        .from_bridge
        .lock()
        .unwrap()
        .iter()
        .filter_map(|f| match f {
            RelayFrame::Push(p) if &p.device_id == device => {
                terminull_protocol::crypto::attested::control_counter(&p.payload)
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_push_nonces_keep_rising_when_the_bridges_relay_link_restarts() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    let device = paired.device_identity.public().device_id();
    let mut client = terminull_bridge::daemon_client::Client::in_process(&paired.service);
    let mut transcript = terminull_client::transcript::Transcript::default();
    let cwd = tempfile::tempdir().unwrap();
    let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;
    let registers =
        || relay.from_bridge.lock().unwrap().iter().filter(|f| matches!(f, RelayFrame::Register(_))).count();
    let runs = 3;
    for run in 0..runs {
        // A bridge run: the relay client starts with the home's counters file, as after a restart.
        let task = tokio::spawn(terminull_bridge::relay_client::run(
            paired.ctx.clone(),
            paired.home(),
            relay.url.clone(),
            Default::default(),
        ));
        for _ in 0..400 {
            if registers() > run {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        support::remote::say(&mut client, &session, "ping", &mut transcript).await;
        support::remote::until_turn_end(&mut client, &mut transcript).await;
        for _ in 0..400 {
            if push_counters_sent(&relay, &device).len() > run {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        task.abort();
        let _ = task.await;
    }
    let sent = push_counters_sent(&relay, &device);
    assert_eq!(sent.len(), runs, "one push per turn: {sent:?}");
    assert!(
        sent.windows(2).all(|w| w[1] == w[0] + push_counter::BLOCK),
        "each run starts past the last reservation: {sent:?}"
    );
    println!(
        "attack: push nonces across {runs} bridge relay-link restarts: counters {sent:?}, strictly rising, each run starting exactly at the last reservation's end ({} counters a block), not the clock",
        push_counter::BLOCK
    );
}
