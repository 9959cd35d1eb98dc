//! A relay that misbehaves on purpose. It routes like a relay, records every frame
//! and lets the test hold, tamper with, replay, reorder and inject frames in both
//! directions. Every attack must be refused (by the device or by the bridge),
//! leave a logged reason, and run no agent; the test reports how many cases it
//! tried and how many were accepted (which must be none).

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::json;
use terminull_client::connection::Connection;
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::pairing::{self, PairingLink};
use terminull_protocol::crypto::{b64, b64url, from_b64};
use terminull_protocol::ids::SessionId;
use terminull_protocol::relay::{
    Challenge, LinkHello, PairRequestFrame, Registered, RelayError, RelayErrorCode, RelayFrame, RelayStatus,
};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

type Shared<T> = Arc<Mutex<T>>;

/// The misbehaving relay.
#[derive(Clone)]
struct HostileRelay {
    url: String,
    to_bridge: mpsc::UnboundedSender<RelayFrame>,
    clients: Shared<HashMap<u64, mpsc::UnboundedSender<RelayFrame>>>,
    from_bridge: Shared<Vec<RelayFrame>>,
    from_clients: Shared<Vec<RelayFrame>>,
    /// While `Some`, blocks and replies from the bridge are held here instead of routed.
    hold: Shared<Option<Vec<RelayFrame>>>,
}

fn strip(mut frame: RelayFrame) -> RelayFrame {
    match &mut frame {
        RelayFrame::Block(b) => {
            b.sig = None;
            b.conn = None;
        }
        RelayFrame::ReplayDone(f) => f.conn = None,
        RelayFrame::Reply(f) => f.conn = None,
        RelayFrame::LinkAccept(f) => f.conn = None,
        _ => {}
    }
    frame
}

impl HostileRelay {
    // The handshake callback's error type is tungstenite's, large by its design.
    #[allow(clippy::result_large_err)]
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (to_bridge, bridge_rx) = mpsc::unbounded_channel();
        let relay = HostileRelay {
            url,
            to_bridge,
            clients: Arc::default(),
            from_bridge: Arc::default(),
            from_clients: Arc::default(),
            hold: Arc::default(),
        };
        let bridge_rx = Arc::new(tokio::sync::Mutex::new(bridge_rx));
        let r = relay.clone();
        tokio::spawn(async move {
            let mut next_conn = 0u64;
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let path = Arc::new(Mutex::new(String::new()));
                let seen = path.clone();
                let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                    *seen.lock().unwrap() = req.uri().path().to_owned();
                    Ok(resp)
                };
                let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else { continue };
                let path = path.lock().unwrap().clone();
                next_conn += 1;
                if path == "/v1/bridge" {
                    tokio::spawn(r.clone().serve_bridge(ws, bridge_rx.clone()));
                } else {
                    tokio::spawn(r.clone().serve_client(ws, next_conn));
                }
            }
        });
        relay
    }

    async fn serve_bridge(
        self,
        mut ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
        injected: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<RelayFrame>>>,
    ) {
        let send = |f: &RelayFrame| Message::text(serde_json::to_string(f).unwrap());
        ws.send(send(&RelayFrame::Challenge(Challenge { nonce: b64url(&[7; 32]) }))).await.unwrap();
        let Some(Ok(Message::Text(register))) = ws.next().await else { return };
        let RelayFrame::Register(register) = serde_json::from_str(&register).unwrap() else { panic!("not register") };
        ws.send(send(&RelayFrame::Registered(Registered { bridge_id: register.bridge_id }))).await.unwrap();
        let mut injected = injected.lock().await;
        loop {
            tokio::select! {
                frame = ws.next() => {
                    let Some(Ok(Message::Text(text))) = frame else { return };
                    let frame: RelayFrame = serde_json::from_str(&text).unwrap();
                    self.from_bridge.lock().unwrap().push(frame.clone());
                    let Some(conn) = frame.conn() else { continue };
                    {
                        let mut hold = self.hold.lock().unwrap();
                        if let Some(held) = hold.as_mut()
                            && matches!(frame, RelayFrame::Block(_) | RelayFrame::Reply(_))
                        {
                            held.push(frame);
                            continue;
                        }
                    }
                    let frame = match frame {
                        RelayFrame::CloseConn(c) => RelayFrame::Error(RelayError {
                            code: RelayErrorCode::UnknownDevice,
                            message: c.reason,
                            session_id: None,
                        }),
                        other => strip(other),
                    };
                    if let Some(client) = self.clients.lock().unwrap().get(&conn) {
                        let _ = client.send(frame);
                    }
                }
                Some(frame) = injected.recv() => {
                    if ws.send(send(&frame)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    async fn serve_client(self, mut ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, conn: u64) {
        let send = |f: &RelayFrame| Message::text(serde_json::to_string(f).unwrap());
        ws.send(send(&RelayFrame::Challenge(Challenge { nonce: b64url(&[8; 32]) }))).await.unwrap();
        let Some(Ok(Message::Text(_auth))) = ws.next().await else { return };
        let status = RelayStatus { bridge_online: true, agents: vec![], resume_tokens: Default::default() };
        ws.send(send(&RelayFrame::RelayStatus(status))).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.clients.lock().unwrap().insert(conn, tx);
        loop {
            tokio::select! {
                frame = ws.next() => {
                    let Some(Ok(Message::Text(text))) = frame else { return };
                    let mut frame: RelayFrame = serde_json::from_str(&text).unwrap();
                    match &mut frame {
                        RelayFrame::LinkHello(h) => h.conn = Some(conn),
                        RelayFrame::Control(c) => c.conn = Some(conn),
                        _ => {}
                    }
                    self.from_clients.lock().unwrap().push(frame.clone());
                    let _ = self.to_bridge.send(frame);
                }
                Some(frame) = rx.recv() => {
                    if ws.send(send(&frame)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    fn to_client(&self, conn: u64, frame: RelayFrame) {
        let _ = self.clients.lock().unwrap()[&conn].send(strip(frame));
    }

    fn hold(&self) {
        *self.hold.lock().unwrap() = Some(Vec::new());
    }

    /// Stops holding and returns what was held.
    fn release(&self) -> Vec<RelayFrame> {
        self.hold.lock().unwrap().take().unwrap_or_default()
    }

    async fn held_blocks(&self, n: usize) -> Vec<RelayFrame> {
        for _ in 0..200 {
            let count = self
                .hold
                .lock()
                .unwrap()
                .as_ref()
                .map_or(0, |h| h.iter().filter(|f| matches!(f, RelayFrame::Block(_))).count());
            if count >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.hold
            .lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .iter()
            .filter(|f| matches!(f, RelayFrame::Block(_)))
            .cloned()
            .collect()
    }

    fn last_from_client(&self, pred: impl Fn(&RelayFrame) -> bool) -> RelayFrame {
        self.from_clients.lock().unwrap().iter().rev().find(|f| pred(f)).cloned().expect("a recorded frame")
    }
}

/// Nothing reaches the device's caller for a while.
async fn nothing_delivered(rx: &mut mpsc::Receiver<BridgeMessage>) -> bool {
    tokio::time::timeout(Duration::from_millis(400), rx.recv()).await.is_err()
}

async fn next_reply(rx: &mut mpsc::Receiver<BridgeMessage>) -> terminull_protocol::control::Reply {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a reply in time").expect("open") {
            BridgeMessage::Reply(r) => return r,
            _ => continue,
        }
    }
}

async fn until_session_end(rx: &mut mpsc::Receiver<BridgeMessage>) {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("blocks in time").expect("open");
        if let BridgeMessage::Block { block, .. } = m
            && block.block_type() == "session_end"
        {
            return;
        }
    }
}

fn flip_b64(text: &str) -> String {
    let mut bytes = from_b64("x", text).unwrap();
    let i = bytes.len() - 3;
    bytes[i] ^= 0x40;
    b64(&bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_of_a_hostile_relay_is_refused_logged_and_runs_no_agent() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    tokio::spawn(terminull_bridge::relay_client::run(
        paired.ctx.clone(),
        paired.home(),
        relay.url.clone(),
        Default::default(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut connection = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect("link opens");
    let stats = connection.info.stats.clone();
    let cwd = tempfile::tempdir().unwrap();

    // A normal session first.
    support::remote::request_echo_session(&connection.tx, Some("r1"), cwd.path()).await;
    let reply = next_reply(&mut connection.rx).await;
    let ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } = reply.outcome else {
        panic!("{reply:?}")
    };
    // The session's opening blocks (agent_info, …) are not part of any case.
    while tokio::time::timeout(Duration::from_millis(300), connection.rx.recv()).await.is_ok() {}
    let sessions_before = paired.service.resumable_session_ids().len();
    let conn = relay.last_from_client(|f| matches!(f, RelayFrame::Control(_))).conn().unwrap();

    let mut tried = 0u32;
    let mut accepted = 0u32;
    let mut device_case =
        |name: &str, refused_before: u64, delivered_nothing: bool, stats: &terminull_client::connection::LinkStats| {
            tried += 1;
            let refused = stats.rejected.load(std::sync::atomic::Ordering::Relaxed) > refused_before;
            if !(refused && delivered_nothing) {
                accepted += 1;
                eprintln!("ACCEPTED by the device: {name}");
            }
        };

    // Hold the blocks of one turn to play with them.
    relay.hold();
    connection
        .tx
        .send(json!({"type": "user_message", "session_id": session_id, "text": "one two three"}))
        .await
        .unwrap();
    let blocks = relay.held_blocks(3).await;
    assert!(blocks.len() >= 3, "the turn streams blocks");
    let (b1, b2) = (blocks[0].clone(), blocks[1].clone());
    let RelayFrame::Block(original) = b1.clone() else { unreachable!() };

    // 1. Tampered ciphertext.
    let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    let mut tampered = original.clone();
    tampered.enc = flip_b64(&tampered.enc);
    relay.to_client(conn, RelayFrame::Block(tampered));
    device_case("tampered ciphertext", before, nothing_delivered(&mut connection.rx).await, &stats);
    // 2. A relabelled block (routing hint changed) and a flipped replay flag.
    for change in 0..2 {
        let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
        let mut relabelled = original.clone();
        if change == 0 {
            relabelled.block_type = "error".into();
        } else {
            relabelled.replay = true;
        }
        relay.to_client(conn, RelayFrame::Block(relabelled));
        device_case("relabelled block", before, nothing_delivered(&mut connection.rx).await, &stats);
    }
    // 3. A block forged under a key of the relay's own.
    let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    let mut forged_sealer = terminull_protocol::crypto::channel::Sealer::new([9; 32], "block");
    let forged = terminull_protocol::crypto::envelope::seal_block(
        &mut forged_sealer,
        &Identity::generate(),
        &SessionId(session_id.to_string()),
        "text",
        false,
        1.0,
        br#"{"seq":999,"ts":1,"type":"text","id":"x","text":"rm -rf","done":true}"#,
    )
    .unwrap();
    relay.to_client(conn, RelayFrame::Block(forged));
    device_case("forged block", before, nothing_delivered(&mut connection.rx).await, &stats);
    // The genuine blocks, reordered: the second is accepted, the first then refused.
    relay.to_client(conn, b2.clone());
    let got = tokio::time::timeout(Duration::from_secs(5), connection.rx.recv()).await.unwrap().unwrap();
    assert!(matches!(got, BridgeMessage::Block { .. }), "the genuine later block opens");
    // 4. Reordered.
    let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    relay.to_client(conn, b1.clone());
    device_case("reordered block", before, nothing_delivered(&mut connection.rx).await, &stats);
    // 5. Replayed.
    let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    relay.to_client(conn, b2.clone());
    device_case("replayed block", before, nothing_delivered(&mut connection.rx).await, &stats);
    // Let the rest of the turn through.
    for frame in relay.release().into_iter().skip(2) {
        relay.to_client(conn, frame);
    }
    until_session_end(&mut connection.rx).await;
    // 6. A replayed reply.
    let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    let old_reply =
        relay.from_bridge.lock().unwrap().iter().find(|f| matches!(f, RelayFrame::Reply(_))).cloned().unwrap();
    relay.to_client(conn, old_reply);
    device_case("replayed reply", before, nothing_delivered(&mut connection.rx).await, &stats);

    // 7. A notification replayed, to the same client and to a restarted one (the
    // device keeps its push high-water mark in its home).
    let push = relay
        .from_bridge
        .lock()
        .unwrap()
        .iter()
        .find(|f| matches!(f, RelayFrame::Push(p) if p.device_id == paired.device_identity.public().device_id()))
        .cloned()
        .expect("the bridge sent a notice at the end of the turn");
    relay.to_client(conn, push.clone());
    for _ in 0..40 {
        if stats.pushes.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(stats.pushes.load(std::sync::atomic::Ordering::Relaxed), 1, "the genuine notice opens");
    let before = stats.rejected.load(std::sync::atomic::Ordering::Relaxed);
    relay.to_client(conn, push.clone());
    device_case("replayed push", before, nothing_delivered(&mut connection.rx).await, &stats);
    let mut restarted = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect("second link");
    let restarted_stats = restarted.info.stats.clone();
    let conn2 = relay.last_from_client(|f| matches!(f, RelayFrame::LinkHello(_))).conn().unwrap();
    relay.to_client(conn2, push);
    device_case("push replayed to a restarted client", 0, nothing_delivered(&mut restarted.rx).await, &restarted_stats);
    assert_eq!(restarted_stats.pushes.load(std::sync::atomic::Ordering::Relaxed), 0);
    drop(restarted);

    // The bridge's side: nothing here may reach the dispatcher.
    let refusals = paired.ctx.refusals.clone();
    let bridge_case = |name: &str, before: u64, accepted_count: &mut u32, tried_count: &mut u32| {
        *tried_count += 1;
        if refusals.count() <= before {
            *accepted_count += 1;
            eprintln!("ACCEPTED by the bridge: {name}");
        }
    };
    let settle = || tokio::time::sleep(Duration::from_millis(300));
    let session_request = relay.last_from_client(|f| matches!(f, RelayFrame::Control(c) if c.session_id.is_none()));
    let RelayFrame::Control(request_envelope) = session_request.clone() else { unreachable!() };
    // 7. A replayed session_request (same connection).
    let before = refusals.count();
    relay.to_bridge.send(session_request.clone()).unwrap();
    settle().await;
    bridge_case("replayed session_request", before, &mut accepted, &mut tried);
    // 8. A forged signature, and a stripped one.
    for forge in [true, false] {
        let before = refusals.count();
        let mut env = request_envelope.clone();
        env.sig = if forge { flip_b64(&env.sig) } else { String::new() };
        relay.to_bridge.send(RelayFrame::Control(env)).unwrap();
        settle().await;
        bridge_case(
            if forge { "forged control signature" } else { "stripped control signature" },
            before,
            &mut accepted,
            &mut tried,
        );
    }
    // 9. A tampered control body (signature left as it was).
    let before = refusals.count();
    let mut env = request_envelope.clone();
    env.body = flip_b64(&env.body);
    relay.to_bridge.send(RelayFrame::Control(env)).unwrap();
    settle().await;
    bridge_case("tampered control body", before, &mut accepted, &mut tried);
    // 10. A session_request injected from a key the bridge never paired.
    let stranger = Identity::generate();
    let bridge_id = paired.record.bridge_id.clone();
    let hello_from = |identity: &Identity, claimed: terminull_protocol::ids::DeviceId, conn: u64| {
        let nonce = [5u8; 16];
        RelayFrame::LinkHello(LinkHello {
            device_id: claimed.clone(),
            client_nonce: b64url(&nonce),
            sig: b64(&identity.sign(&terminull_protocol::crypto::envelope::link_hello_bytes(
                bridge_id.as_str(),
                claimed.as_str(),
                &nonce,
            ))),
            conn: Some(conn),
        })
    };
    let before = refusals.count();
    relay.to_bridge.send(hello_from(&stranger, stranger.public().device_id(), 900)).unwrap();
    let mut sealer = terminull_protocol::crypto::channel::Sealer::new([1; 32], "control");
    let mut injected = terminull_protocol::crypto::envelope::seal_control(
        &mut sealer,
        &stranger,
        bridge_id.as_str(),
        None,
        None,
        serde_json::to_vec(
            &json!({"type": "session_request", "agent": "echo", "cwd": "/", "app_pubkey": b64url(&[9; 32])}),
        )
        .unwrap()
        .as_slice(),
    )
    .unwrap();
    injected.conn = Some(900);
    relay.to_bridge.send(RelayFrame::Control(injected)).unwrap();
    settle().await;
    bridge_case("session_request from an unpaired key", before, &mut accepted, &mut tried);
    // 11. The paired device's id with the relay's own key.
    let before = refusals.count();
    relay.to_bridge.send(hello_from(&stranger, paired.device_identity.public().device_id(), 901)).unwrap();
    settle().await;
    bridge_case("link_hello impersonating the paired device", before, &mut accepted, &mut tried);
    // 12. A pairing attempt without the secret: guessed secret, and the real offer's id with a wrong secret.
    let offer = support::remote::offer_link(&paired.home(), None, None, 60);
    for with_real_id in [false, true] {
        let before = refusals.count();
        let guess = PairingLink { secret: terminull_protocol::crypto::random_bytes::<32>(), ..offer.clone() };
        let (mut request, _) = pairing::request(&guess, &stranger, "relay").unwrap();
        if with_real_id {
            request.pairing_id = pairing::pairing_id(&offer.secret);
        }
        relay.to_bridge.send(RelayFrame::PairRequest(PairRequestFrame { request_id: 7, request })).unwrap();
        settle().await;
        bridge_case("pairing without the secret", before, &mut accepted, &mut tried);
    }
    assert!(paired.ctx.devices.active(&stranger.public().device_id()).is_none(), "the stranger is not paired");
    // 13. A recorded session_request replayed after the device is revoked, on a new link and on the old one.
    let recorded_hello = relay.last_from_client(|f| matches!(f, RelayFrame::LinkHello(_)));
    paired.ctx.devices.revoke(paired.device_identity.public().device_id().as_str()).unwrap();
    let before = refusals.count();
    let RelayFrame::LinkHello(mut replayed_hello) = recorded_hello else { unreachable!() };
    replayed_hello.conn = Some(902);
    relay.to_bridge.send(RelayFrame::LinkHello(replayed_hello)).unwrap();
    settle().await;
    bridge_case("replayed link_hello of a revoked device", before, &mut accepted, &mut tried);
    let before = refusals.count();
    support::remote::request_echo_session(&connection.tx, None, cwd.path()).await;
    settle().await;
    bridge_case("session_request of a revoked device", before, &mut accepted, &mut tried);

    // No agent ran for any of it.
    assert_eq!(paired.service.resumable_session_ids().len(), sessions_before, "no session was started");
    let reasons = paired.ctx.refusals.reasons().join("\n");
    for expected in ["replayed or reordered", "signature", "not paired", "revoked", "MAC", "no open pairing offer"] {
        assert!(reasons.contains(expected), "no refusal mentions `{expected}`:\n{reasons}");
    }
    let device_reasons = stats.reasons().join("\n");
    for expected in ["authentication failed", "replayed or reordered"] {
        assert!(device_reasons.contains(expected), "no device refusal mentions `{expected}`:\n{device_reasons}");
    }
    // Printed for the report (see docs/relay.md §Hostile relay).
    eprintln!("hostile relay: {tried} cases tried, {accepted} accepted");
    assert_eq!(accepted, 0, "bridge refusals:\n{reasons}\ndevice refusals:\n{device_reasons}");
}
