//! The relay server over real WebSockets and HTTP on loopback: authentication, routing,
//! resume tokens, pairing, persistence, bounds and pushes.

mod support;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::SinkExt as _;
use support::user_agent::UserAgent;
use support::*;
use terminull_protocol::crypto::envelope::push_subscription_bytes;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::pairing::{self, PairResponse, PairingLink};
use terminull_protocol::crypto::{b64, b64url, random_bytes};
use terminull_protocol::relay::{
    CloseConn, LinkAccept, PairResponseFrame, Push, PushKind, RelayErrorCode, RelayFrame, ReplayDoneFrame,
};
use terminull_protocol::{BridgeId, SessionId};
use tokio_tungstenite::tungstenite::Message;

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn a_registered_bridge_and_an_authenticated_device_reach_each_other() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;

    let (mut phone, status) = connect_device(&relay, &bridge.id(), &device).await;
    assert!(status.bridge_online);
    assert_eq!(status.agents, agents());
    assert!(status.resume_tokens.is_empty());

    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;
    let accept = LinkAccept {
        device_id: device.public().device_id(),
        bridge_nonce: "bg".into(),
        bridge_ephemeral: "ZXBo".into(),
        sig: "c2ln".into(),
        conn: Some(conn),
    };
    bridge.send(&RelayFrame::LinkAccept(accept.clone())).await;
    assert_eq!(recv(&mut phone).await, RelayFrame::LinkAccept(LinkAccept { conn: None, ..accept }), "conn is stripped");

    let done = ReplayDoneFrame { session_id: SessionId("s1".into()), last_seq: Some(3), enc: None, conn: Some(conn) };
    bridge.send(&RelayFrame::ReplayDone(done.clone())).await;
    assert_eq!(recv(&mut phone).await, RelayFrame::ReplayDone(ReplayDoneFrame { conn: None, ..done }));

    for signer in [&bridge.identity, &device] {
        let (code, body) = list_devices(&relay, &bridge.id(), signer).await;
        assert_eq!(code, 200, "{body}");
        let listed: Vec<terminull_protocol::relay::DeviceRecord> = serde_json::from_str(&body).unwrap();
        assert_eq!(listed, vec![device_record(&device, "phone", false)]);
    }
    let (code, body) = list_devices(&relay, &BridgeId("brg_nobody".into()), &device).await;
    assert_eq!(code, 404);
    assert!(body.contains("\"error\""), "{body}");
    assert_eq!(http(relay.addr(), "GET", "/healthz", None).await, (200, "ok".to_owned()));

    drop(bridge);
    match recv(&mut phone).await {
        RelayFrame::RelayStatus(s) => assert!(!s.bridge_online && s.agents.is_empty()),
        other => panic!("expected relay_status offline, got {other:?}"),
    }
    send(&mut phone, &link_hello(&device)).await;
    expect_error(&mut phone, RelayErrorCode::BridgeOffline).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_register_with_a_bad_signature_a_foreign_id_or_no_answer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.auth_timeout = Duration::from_millis(300);
    let relay = start(cfg).await;
    let bridge = Identity::generate();

    // Signed over another challenge.
    let mut ws = open(&relay, "/v1/bridge").await;
    let _ = challenge(&mut ws).await;
    send(&mut ws, &RelayFrame::Register(register(&bridge, &[0; 32], vec![], vec![]))).await;
    let (errors, close) = until_closed(&mut ws).await;
    assert_eq!(errors, vec![RelayErrorCode::BadSignature]);
    assert_eq!(close, Some(1008));

    // Claims another bridge's id.
    let mut ws = open(&relay, "/v1/bridge").await;
    let nonce = challenge(&mut ws).await;
    let mut reg = register(&bridge, &nonce, vec![], vec![]);
    reg.bridge_id = Identity::generate().public().bridge_id();
    send(&mut ws, &RelayFrame::Register(reg)).await;
    assert_eq!(until_closed(&mut ws).await.0, vec![RelayErrorCode::BadFrame]);

    // Another protocol version.
    let mut ws = open(&relay, "/v1/bridge").await;
    let nonce = challenge(&mut ws).await;
    let mut reg = register(&bridge, &nonce, vec![], vec![]);
    reg.protocol_version = 99;
    send(&mut ws, &RelayFrame::Register(reg)).await;
    let message = expect_error(&mut ws, RelayErrorCode::UnsupportedVersion).await;
    assert_eq!(message, "this bridge speaks relay protocol 99 and the relay speaks 3: update the relay");
    assert_eq!(until_closed(&mut ws).await, (vec![], Some(1008)));

    // Never answers.
    let mut ws = open(&relay, "/v1/bridge").await;
    let _ = challenge(&mut ws).await;
    let (errors, close) = until_closed(&mut ws).await;
    assert_eq!((errors, close), (vec![RelayErrorCode::BadFrame], Some(1008)));

    // None of them registered anything.
    assert_eq!(list_devices(&relay, &bridge.public().bridge_id(), &bridge).await.0, 404);
    relay.shutdown().await;
}

#[tokio::test]
async fn a_newer_registration_of_a_bridge_replaces_the_older_connection() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start(config(dir.path())).await;
    let (bridge_key, device) = (Identity::generate(), Identity::generate());
    let devices = vec![device_record(&device, "phone", false)];
    let mut old = FakeBridge::connect(&relay, &bridge_key, devices.clone(), vec![]).await;
    let mut new = FakeBridge::connect(&relay, &bridge_key, devices, vec![]).await;
    let (_, close) = until_closed(&mut old.ws).await;
    assert_eq!(close, Some(1001));

    let (mut phone, status) = connect_device(&relay, &new.id(), &device).await;
    assert!(status.bridge_online, "the old connection's end does not take the bridge offline");
    send(&mut phone, &link_hello(&device)).await;
    new.expect_link_hello().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn an_unpaired_forged_or_revoked_device_cannot_connect_and_a_revoked_device_is_cut_off() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let stranger = Identity::generate();
    let bridge_id = bridge.id();

    let (mut ws, first) = try_connect_device(&relay, &bridge_id, &stranger).await;
    assert!(matches!(first, RelayFrame::Error(ref e) if e.code == RelayErrorCode::UnknownDevice), "{first:?}");
    assert!(matches!(next_event(&mut ws).await, Event::Closed(_)));

    let unknown_bridge = BridgeId("brg_aaaaaaaaaaaaaaaa".into());
    let (_, first) = try_connect_device(&relay, &unknown_bridge, &device).await;
    assert!(matches!(first, RelayFrame::Error(ref e) if e.code == RelayErrorCode::UnknownDevice), "{first:?}");

    // The device's id with a signature by another key.
    let mut ws = open(&relay, "/v1/client").await;
    let nonce = challenge(&mut ws).await;
    let mut forged = auth(&stranger, &bridge_id, &nonce);
    forged.device_id = device.public().device_id();
    send(&mut ws, &RelayFrame::Auth(forged)).await;
    assert_eq!(until_closed(&mut ws).await.0, vec![RelayErrorCode::BadSignature]);

    // Revoked while connected: cut off, and refused afterwards.
    let (mut phone, _) = connect_device(&relay, &bridge_id, &device).await;
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;
    bridge.set_devices(vec![device_record(&device, "phone", true)]).await;
    let (errors, close) = until_closed(&mut phone).await;
    assert_eq!((errors, close), (vec![RelayErrorCode::UnknownDevice], Some(1008)));
    let (_, first) = try_connect_device(&relay, &bridge_id, &device).await;
    assert!(matches!(first, RelayFrame::Error(ref e) if e.code == RelayErrorCode::UnknownDevice), "{first:?}");
    match bridge.recv().await {
        RelayFrame::ConnClosed(c) => assert_eq!(c.conn, conn),
        other => panic!("expected conn_closed for the revoked connection, got {other:?}"),
    }
    relay.shutdown().await;
}

#[tokio::test]
async fn a_control_for_a_session_needs_that_sessions_valid_token() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } =
        Paired::start(["phone"], &["s1", "s2"], |_| {}).await;
    let bridge_id = bridge.id();
    let (mut phone, status) = connect_device(&relay, &bridge_id, &device).await;
    let token_s1 = status.resume_tokens[&SessionId("s1".into())].clone();
    let token_s2 = status.resume_tokens[&SessionId("s2".into())].clone();

    // One character of the MAC changed.
    let mac_start = token_s1.rfind('.').unwrap() + 1;
    let mut tampered = token_s1.clone();
    let flipped = if &token_s1[mac_start..=mac_start] == "A" { "B" } else { "A" };
    tampered.replace_range(mac_start..=mac_start, flipped);
    let refused = [
        None,
        Some("not.a.jwt".to_owned()),
        Some(tampered),
        Some(token_s2.clone()), // another session's token
    ];
    for token in refused {
        send(&mut phone, &RelayFrame::Control(control(&device, &bridge_id, Some("s1"), token, "{}"))).await;
        match recv(&mut phone).await {
            RelayFrame::Error(e) => {
                assert_eq!(e.code, RelayErrorCode::Unauthorized);
                assert_eq!(e.session_id, Some(SessionId("s1".into())));
            }
            other => panic!("expected unauthorized, got {other:?}"),
        }
    }
    // A control without a session needs no token.
    send(&mut phone, &RelayFrame::Control(control(&device, &bridge_id, None, None, "new"))).await;
    let good = control(&device, &bridge_id, Some("s1"), Some(token_s1), "resume");
    send(&mut phone, &RelayFrame::Control(good.clone())).await;
    match bridge.recv().await {
        RelayFrame::Control(c) => assert!(c.session_id.is_none(), "nothing refused reached the bridge first"),
        other => panic!("expected control, got {other:?}"),
    }
    match bridge.recv().await {
        RelayFrame::Control(c) => {
            assert_eq!(c.body, good.body);
            assert!(c.conn.is_some());
        }
        other => panic!("expected control, got {other:?}"),
    }
    relay.shutdown().await;

    // Tokens past their lifetime are refused.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.resume_token_ttl = Duration::ZERO;
    let relay = start(cfg).await;
    let _bridge =
        FakeBridge::connect(&relay, &bridge.identity, vec![device_record(&device, "phone", false)], sessions(&["s1"]))
            .await;
    let (mut phone, status) = connect_device(&relay, &bridge_id, &device).await;
    let expired = status.resume_tokens[&SessionId("s1".into())].clone();
    send(&mut phone, &RelayFrame::Control(control(&device, &bridge_id, Some("s1"), Some(expired), "{}"))).await;
    let message = expect_error(&mut phone, RelayErrorCode::Unauthorized).await;
    assert!(message.contains("expired"), "{message}");
    relay.shutdown().await;
}

#[tokio::test]
async fn a_control_with_a_bad_device_signature_never_reaches_the_bridge() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let other = Identity::generate();
    let bridge_id = bridge.id();
    let (mut phone, _) = connect_device(&relay, &bridge_id, &device).await;

    let mut signed_by_other = control(&other, &bridge_id, None, None, "x");
    signed_by_other.device_id = device.public().device_id();
    let mut edited = control(&device, &bridge_id, None, None, "x");
    edited.body = b64(b"edited in transit");
    let for_another_bridge = control(&device, &Identity::generate().public().bridge_id(), None, None, "x");
    for bad in [signed_by_other, edited, for_another_bridge] {
        send(&mut phone, &RelayFrame::Control(bad)).await;
        expect_error(&mut phone, RelayErrorCode::BadSignature).await;
    }
    // Claiming to be another device is refused too.
    send(&mut phone, &RelayFrame::Control(control(&other, &bridge_id, None, None, "x"))).await;
    expect_error(&mut phone, RelayErrorCode::UnknownDevice).await;

    let good = control(&device, &bridge_id, None, None, "good");
    send(&mut phone, &RelayFrame::Control(good.clone())).await;
    match bridge.recv().await {
        RelayFrame::Control(c) => assert_eq!(c.body, good.body, "the first control to arrive is the good one"),
        other => panic!("expected control, got {other:?}"),
    }
    relay.shutdown().await;
}

#[tokio::test]
async fn the_pairing_broker_round_trips_through_the_bridge_and_reports_refusals_and_absence() {
    let Paired { dir: _dir, relay, mut bridge, devices: [] } = Paired::start([], &[], |_| {}).await;
    let device = Identity::generate();
    let link = PairingLink {
        bridge_id: bridge.id(),
        bridge: bridge.identity.public().to_wire(),
        relay: Some(relay.ws_url()),
        lan: None,
        secret: random_bytes::<32>(),
        expires_at: unix_now() + 300,
    };
    let path = format!("/v1/bridges/{}/pair", bridge.id());

    // Accepted: the bridge checks the MAC with the secret and answers.
    let (request, pending) = pairing::request(&link, &device, "phone").unwrap();
    let body = serde_json::to_string(&request).unwrap();
    let addr = relay.addr();
    let post = tokio::spawn({
        let (path, body) = (path.clone(), body.clone());
        async move { http(addr, "POST", &path, Some(&body)).await }
    });
    let (request_id, received) = match bridge.recv().await {
        RelayFrame::PairRequest(f) => (f.request_id, f.request),
        other => panic!("expected pair_request, got {other:?}"),
    };
    assert_eq!(received, request);
    let accepted = pairing::accept(&bridge.identity, &link.secret, &received).unwrap();
    bridge
        .send(&RelayFrame::PairResponse(PairResponseFrame {
            request_id,
            response: Some(accepted.response.clone()),
            error: None,
        }))
        .await;
    let (code, answer) = post.await.unwrap();
    assert_eq!(code, 200, "{answer}");
    let response: PairResponse = serde_json::from_str(&answer).unwrap();
    assert_eq!(pending.finish(&response).unwrap().short_code, accepted.short_code);

    // Refused by the bridge.
    let post = tokio::spawn({
        let (path, body) = (path.clone(), body.clone());
        async move { http(addr, "POST", &path, Some(&body)).await }
    });
    let request_id = match bridge.recv().await {
        RelayFrame::PairRequest(f) => f.request_id,
        other => panic!("expected pair_request, got {other:?}"),
    };
    let refusal = PairResponseFrame { request_id, response: None, error: Some("offer expired".into()) };
    bridge.send(&RelayFrame::PairResponse(refusal)).await;
    let (code, answer) = post.await.unwrap();
    assert_eq!(code, 403);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&answer).unwrap()["error"], "offer expired");

    // Malformed and misaddressed requests.
    assert_eq!(http(addr, "POST", &path, Some("{}")).await.0, 400);
    let other_path = format!("/v1/bridges/{}/pair", Identity::generate().public().bridge_id());
    assert_eq!(http(addr, "POST", &other_path, Some(&body)).await.0, 400);

    // Bridge offline.
    drop(bridge);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (code, answer) = http(addr, "POST", &path, Some(&body)).await;
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("not connected"), "{answer}");
    relay.shutdown().await;
}

#[tokio::test]
async fn pairing_requests_are_rate_limited_per_address_and_time_out_without_an_answer() {
    let Paired { dir: _dir, relay, bridge, devices: [] } = Paired::start([], &[], |c| {
        c.pair_requests_per_minute = 2;
        c.pair_timeout = Duration::from_millis(200);
    })
    .await;
    let device = Identity::generate();
    let link = PairingLink {
        bridge_id: bridge.id(),
        bridge: bridge.identity.public().to_wire(),
        relay: None,
        lan: None,
        secret: [1; 32],
        expires_at: unix_now() + 300,
    };
    let body = serde_json::to_string(&pairing::request(&link, &device, "phone").unwrap().0).unwrap();
    let path = format!("/v1/bridges/{}/pair", link.bridge_id);
    let (code, answer) = http(relay.addr(), "POST", &path, Some(&body)).await;
    assert_eq!(code, 504, "the bridge never answers: {answer}");
    assert_eq!(http(relay.addr(), "POST", &path, Some(&body)).await.0, 504);
    let (code, answer) = http(relay.addr(), "POST", &path, Some(&body)).await;
    assert_eq!(code, 429, "{answer}");
    relay.shutdown().await;
}

#[tokio::test]
async fn a_restart_keeps_the_registration_the_registry_and_held_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let (bridge_key, device) = (Identity::generate(), Identity::generate());
    let push = Push { device_id: device.public().device_id(), kind: PushKind::TurnFinished, payload: b64(&[7; 40]) };
    {
        let relay = start(config(dir.path())).await;
        let mut bridge =
            FakeBridge::connect(&relay, &bridge_key, vec![device_record(&device, "phone", false)], sessions(&["s1"]))
                .await;
        bridge.send(&RelayFrame::Push(push.clone())).await;
        // A frame after the push: once it is answered, the push has been handled.
        bridge.send(&RelayFrame::Register(register(&bridge_key, &[0; 32], vec![], vec![]))).await;
        expect_error(&mut bridge.ws, RelayErrorCode::BadFrame).await;
        relay.shutdown().await;
    }
    let relay = start(config(dir.path())).await;
    let bridge_id = bridge_key.public().bridge_id();
    let (code, body) = list_devices(&relay, &bridge_id, &bridge_key).await;
    assert_eq!(code, 200);
    assert!(body.contains(device.public().device_id().as_str()));

    let (mut phone, status) = connect_device(&relay, &bridge_id, &device).await;
    assert!(!status.bridge_online);
    assert!(status.resume_tokens.contains_key(&SessionId("s1".into())), "resumable sessions persist");
    assert_eq!(recv(&mut phone).await, RelayFrame::Push(push));
    drop(phone);
    // Delivered pushes are deleted: the next connection gets none.
    let (mut phone, _) = connect_device(&relay, &bridge_id, &device).await;
    expect_silence(&mut phone, Duration::from_millis(200)).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_push_reaches_a_connected_device_directly_and_is_held_for_an_offline_one() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |c| {
        c.push_queue_per_device = 2;
    })
    .await;
    let push =
        |n: u8| Push { device_id: device.public().device_id(), kind: PushKind::TurnFinished, payload: b64(&[n; 8]) };

    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    bridge.send(&RelayFrame::Push(push(1))).await;
    assert_eq!(recv(&mut phone).await, RelayFrame::Push(push(1)));
    drop(phone);
    assert!(matches!(bridge.recv().await, RelayFrame::ConnClosed(_)), "the relay noticed the device left");

    for n in 2..=4 {
        bridge.send(&RelayFrame::Push(push(n))).await;
    }
    let stranger = Push { device_id: Identity::generate().public().device_id(), ..push(9) };
    bridge.send(&RelayFrame::Push(stranger)).await;
    expect_error(&mut bridge.ws, RelayErrorCode::UnknownDevice).await;

    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    assert_eq!(recv(&mut phone).await, RelayFrame::Push(push(3)), "the oldest was dropped at the bound");
    assert_eq!(recv(&mut phone).await, RelayFrame::Push(push(4)));
    relay.shutdown().await;
}

fn subscription_body(device: &Identity, bridge_id: &BridgeId, endpoint: &str, ua: &UserAgent, ts: u64) -> String {
    let device_id = device.public().device_id();
    let (p256dh, auth) = (ua.p256dh(), b64url(&ua.auth));
    let sig =
        device.sign(&push_subscription_bytes(bridge_id.as_str(), device_id.as_str(), endpoint, &p256dh, &auth, ts));
    serde_json::json!({
        "bridge_id": bridge_id,
        "device_id": device_id,
        "subscription": {"endpoint": endpoint, "keys": {"p256dh": p256dh, "auth": auth}},
        "ts": ts,
        "sig": b64(&sig),
    })
    .to_string()
}

#[tokio::test]
async fn a_held_push_goes_to_the_devices_web_push_endpoint_sealed_for_its_subscription() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let stranger = Identity::generate();
    let bridge_id = bridge.id();
    let (endpoint, mut received) = push_receiver(201).await;
    let ua = UserAgent::new();
    let addr = relay.addr();

    let (code, body) = http(addr, "GET", "/v1/push/vapid", None).await;
    assert_eq!(code, 200);
    let vapid: serde_json::Value = serde_json::from_str(&body).unwrap();
    let vapid_key = URL_SAFE_NO_PAD.decode(vapid["public_key"].as_str().unwrap()).unwrap();
    assert_eq!((vapid_key.len(), vapid_key[0]), (65, 4), "an uncompressed P-256 point");

    // Refused: a stranger's subscription, a bad signature, a stale timestamp.
    let path = "/v1/push/subscriptions";
    let now = unix_now();
    let stranger_body = subscription_body(&stranger, &bridge_id, &endpoint, &ua, now);
    assert_eq!(http(addr, "POST", path, Some(&stranger_body)).await.0, 403);
    let mut forged: serde_json::Value =
        serde_json::from_str(&subscription_body(&device, &bridge_id, &endpoint, &ua, now)).unwrap();
    forged["ts"] = serde_json::json!(now + 1);
    assert_eq!(http(addr, "POST", path, Some(&forged.to_string())).await.0, 401);
    let stale = subscription_body(&device, &bridge_id, &endpoint, &ua, now - 3600);
    assert_eq!(http(addr, "POST", path, Some(&stale)).await.0, 401);
    let (code, answer) =
        http(addr, "POST", path, Some(&subscription_body(&device, &bridge_id, &endpoint, &ua, now))).await;
    assert_eq!(code, 204, "{answer}");

    let push =
        Push { device_id: device.public().device_id(), kind: PushKind::PermissionNeeded, payload: b64(&[5; 64]) };
    bridge.send(&RelayFrame::Push(push.clone())).await;
    let delivered = tokio::time::timeout(WAIT, received.recv()).await.expect("a web push in time").unwrap();
    assert_eq!(delivered.header("urgency"), Some("high"));
    assert_eq!(delivered.header("content-encoding"), Some("aes128gcm"));
    assert!(delivered.header("authorization").is_some_and(|a| a.starts_with("vapid ")));
    let plaintext = terminull_relay::webpush::decrypt(&ua.private, &ua.auth, &delivered.body).unwrap();
    assert_eq!(plaintext, serde_json::to_vec(&RelayFrame::Push(push.clone())).unwrap(), "the push frame's JSON");

    // Deleting the subscription stops Web Push; the push is still held.
    let delete = subscription_body(&device, &bridge_id, &endpoint, &ua, unix_now());
    assert_eq!(http(addr, "DELETE", path, Some(&delete)).await.0, 204);
    bridge.send(&RelayFrame::Push(Push { kind: PushKind::TurnFinished, ..push.clone() })).await;
    assert!(tokio::time::timeout(Duration::from_millis(300), received.recv()).await.is_err());
    let (mut phone, _) = connect_device(&relay, &bridge_id, &device).await;
    assert_eq!(recv(&mut phone).await, RelayFrame::Push(push.clone()));
    relay.shutdown().await;
}

#[tokio::test]
async fn a_subscription_the_push_service_reports_gone_is_deleted() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let (endpoint, mut received) = push_receiver(410).await;
    let ua = UserAgent::new();
    let body = subscription_body(&device, &bridge.id(), &endpoint, &ua, unix_now());
    assert_eq!(http(relay.addr(), "POST", "/v1/push/subscriptions", Some(&body)).await.0, 204);
    let push = Push { device_id: device.public().device_id(), kind: PushKind::Error, payload: b64(&[1; 16]) };
    bridge.send(&RelayFrame::Push(push.clone())).await;
    let first = tokio::time::timeout(WAIT, received.recv()).await.unwrap().unwrap();
    assert_eq!(first.header("urgency"), Some("normal"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    bridge.send(&RelayFrame::Push(push)).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(400), received.recv()).await.is_err(),
        "no push to a subscription reported gone"
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn an_oversized_message_closes_only_its_connection() {
    let Paired { dir: _dir, relay, mut bridge, devices: [a, b] } = Paired::start(["a", "b"], &[], |c| {
        c.max_message_bytes = 16 * 1024;
    })
    .await;
    let (mut big, _) = connect_device(&relay, &bridge.id(), &a).await;
    let (mut fine, _) = connect_device(&relay, &bridge.id(), &b).await;

    send_text(&mut big, format!(r#"{{"type":"link_hello","pad":"{}"}}"#, "x".repeat(64 * 1024))).await;
    let (errors, close) = until_closed(&mut big).await;
    assert_eq!((errors, close), (vec![RelayErrorCode::TooLarge], Some(1009)));

    send(&mut fine, &link_hello(&b)).await;
    bridge.expect_link_hello().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_malformed_frame_flood_closes_only_its_connection() {
    let Paired { dir: _dir, relay, mut bridge, devices: [a, b] } = Paired::start(["a", "b"], &[], |_| {}).await;
    let (mut noisy, _) = connect_device(&relay, &bridge.id(), &a).await;
    let (mut fine, _) = connect_device(&relay, &bridge.id(), &b).await;

    noisy.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    expect_error(&mut noisy, RelayErrorCode::BadFrame).await;
    send_text(&mut noisy, r#"{"type":"registered","bridge_id":"x"}"#.into()).await;
    expect_error(&mut noisy, RelayErrorCode::BadFrame).await;
    for i in 0..40 {
        // The relay may close mid-flood; later sends may fail.
        let _ = noisy.send(Message::text(format!("not json {i}"))).await;
    }
    let (errors, close) = until_closed(&mut noisy).await;
    assert!(errors.iter().all(|c| *c == RelayErrorCode::BadFrame) && errors.len() >= 29, "{errors:?}");
    assert_eq!(close, Some(1008));

    send(&mut fine, &link_hello(&b)).await;
    bridge.expect_link_hello().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_rate_flood_is_dropped_then_closed_while_another_client_is_served() {
    let Paired { dir: _dir, relay, mut bridge, devices: [a, b] } = Paired::start(["a", "b"], &[], |c| {
        c.client_frames_per_sec = 20;
        c.client_frames_burst = 10;
        c.max_rate_limited_frames = 100;
    })
    .await;
    let (mut flood, _) = connect_device(&relay, &bridge.id(), &a).await;
    let (mut fine, _) = connect_device(&relay, &bridge.id(), &b).await;

    let hello = serde_json::to_string(&link_hello(&a)).unwrap();
    for _ in 0..300 {
        if flood.send(Message::text(hello.clone())).await.is_err() {
            break;
        }
    }
    let (errors, close) = until_closed(&mut flood).await;
    assert!(errors.len() >= 90 && errors.iter().all(|c| *c == RelayErrorCode::RateLimited), "{}", errors.len());
    assert_eq!(close, Some(1008));

    let mut forwarded = 0;
    loop {
        match bridge.recv().await {
            RelayFrame::LinkHello(h) if h.device_id == a.public().device_id() => forwarded += 1,
            RelayFrame::ConnClosed(_) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    // The burst (less the token `auth` took) and what refilled while the flood lasted.
    assert!((9..=20).contains(&forwarded), "only the burst and the refill pass: {forwarded}");
    send(&mut fine, &link_hello(&b)).await;
    bridge.expect_link_hello().await;
    relay.shutdown().await;
}

// Two worker threads: the relay's routing and the fast client's reading run side by side,
// as they would in production.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_cut_off_while_another_client_of_the_bridge_keeps_receiving() {
    let Paired { dir: _dir, relay, mut bridge, devices: [slow_device, fast_device] } =
        Paired::start(["slow", "fast"], &["s"], |c| {
            c.client_queue_frames = 32;
            // Long enough for the final error to wait until the test reads the slow client.
            c.close_timeout = Duration::from_secs(20);
        })
        .await;
    let slow_socket = open_with_small_receive_buffer(&relay, "/v1/client").await;
    let (mut slow, first) = authenticate(slow_socket, &bridge.id(), &slow_device).await;
    assert!(matches!(first, RelayFrame::RelayStatus(_)));
    send(&mut slow, &link_hello(&slow_device)).await;
    let slow_conn = bridge.expect_link_hello().await;
    let (mut fast, _) = connect_device(&relay, &bridge.id(), &fast_device).await;
    send(&mut fast, &link_hello(&fast_device)).await;
    let fast_conn = bridge.expect_link_hello().await;

    const PER_ROUND: usize = 4;
    const MAX_ROUNDS: usize = 400;
    let (progress, mut received) = tokio::sync::watch::channel(0usize);
    // The fast client reads all along; the slow one reads nothing until the end.
    let reader = tokio::spawn(async move {
        let mut blocks = 0;
        loop {
            if let RelayFrame::Block(_) = recv(&mut fast).await {
                blocks += 1;
                progress.send_replace(blocks);
            }
        }
    });
    // One big block sent over and over in a batch of one: the relay verifies each copy
    // (it cannot tell them apart), and sealing it only once keeps the test fast.
    let big = bridge.one_block("s", slow_conn, 48 * 1024);
    let small = bridge.one_block("s", fast_conn, 10);
    let mut cut_off_at = None;
    let started = std::time::Instant::now();
    for round in 1..=MAX_ROUNDS {
        for _ in 0..PER_ROUND {
            bridge.send(&big).await;
            bridge.send(&small).await;
        }
        // The fast client keeps up round by round, whatever the slow one does.
        tokio::time::timeout(WAIT, received.wait_for(|n| *n >= round * PER_ROUND))
            .await
            .expect("the fast client keeps receiving")
            .unwrap();
        if let Some(at) = cut_off_at {
            if round >= at + 2 {
                break; // two more rounds reached the fast client after the cut
            }
            continue;
        }
        // Has the bridge been told that the slow client is gone?
        if let Ok(Some(Ok(Message::Text(text)))) =
            tokio::time::timeout(Duration::from_millis(1), futures::StreamExt::next(&mut bridge.ws)).await
        {
            match serde_json::from_str(text.as_str()).unwrap() {
                RelayFrame::ConnClosed(c) => assert_eq!(c.conn, slow_conn),
                other => panic!("expected conn_closed for the slow client, got {other:?}"),
            }
            cut_off_at = Some(round);
        }
    }
    let cut_off_at = cut_off_at.expect("the slow client was cut off");
    eprintln!("cut off after {cut_off_at} rounds, {:?}", started.elapsed());
    reader.abort();
    let (errors, close) = until_closed(&mut slow).await;
    assert_eq!((errors, close), (vec![RelayErrorCode::SlowConsumer], Some(1013)));
    relay.shutdown().await;
}

#[tokio::test]
async fn a_device_may_hold_only_so_many_connections() {
    let Paired { dir: _dir, relay, bridge, devices: [device] } = Paired::start(["phone"], &[], |c| {
        c.max_connections_per_device = 2;
    })
    .await;
    let (_one, _) = connect_device(&relay, &bridge.id(), &device).await;
    let (two, _) = connect_device(&relay, &bridge.id(), &device).await;
    let (mut three, first) = try_connect_device(&relay, &bridge.id(), &device).await;
    assert!(matches!(first, RelayFrame::Error(ref e) if e.code == RelayErrorCode::TooManyConnections), "{first:?}");
    assert!(matches!(next_event(&mut three).await, Event::Closed(Some((1013, _)))));
    drop(two);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_again, _) = connect_device(&relay, &bridge.id(), &device).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn close_conn_from_the_bridge_ends_that_client_with_the_reason() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;
    bridge.send(&RelayFrame::CloseConn(CloseConn { conn, reason: "link refused".into() })).await;
    assert_eq!(expect_error(&mut phone, RelayErrorCode::UnknownDevice).await, "link refused");
    assert!(matches!(next_event(&mut phone).await, Event::Closed(_)));
    relay.shutdown().await;
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_idle_timeout() {
    let Paired { dir: _dir, relay, bridge, devices: [device] } = Paired::start(["phone"], &[], |c| {
        c.idle_timeout = Duration::from_millis(300);
        c.ping_interval = Duration::from_millis(100);
    })
    .await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    // Not reading means not answering pings.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(matches!(until_closed(&mut phone).await, (_, Some(1000))));
    relay.shutdown().await;
}

#[tokio::test]
async fn the_http_api_answers_errors_as_json_and_bounds_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.http_body_limit = 1024;
    let relay = start(cfg).await;
    let (code, body) = http(relay.addr(), "GET", "/nowhere", None).await;
    assert_eq!(code, 404);
    assert!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"].is_string());
    let big = "x".repeat(4096);
    let (code, body) = http(relay.addr(), "POST", "/v1/push/subscriptions", Some(&big)).await;
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("larger than 1024 bytes"), "{body}");
    let (code, body) = http(relay.addr(), "GET", "/v1/client", None).await;
    assert!(code >= 400 && body.contains("WebSocket"), "{code} {body}");
    relay.shutdown().await;
}

#[tokio::test]
async fn the_binary_prints_its_listening_line_and_serves() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_terminull-relay"))
        .args(["--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line()).await.unwrap().unwrap().unwrap();
    let url = line.strip_prefix("terminull-relay listening on ws://").expect(&line);
    let addr: std::net::SocketAddr = url.parse().unwrap();
    assert_eq!(http(addr, "GET", "/healthz", None).await, (200, "ok".to_owned()));
    child.kill().await.unwrap();
}

#[tokio::test]
async fn with_a_certificate_the_relay_serves_wss_and_https() {
    use futures::StreamExt as _;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.tls = Some(terminull_relay::TlsFiles {
        cert_chain: fixtures.join("cert.pem"),
        private_key: fixtures.join("key.pem"),
    });
    let relay = start(cfg).await;
    assert!(relay.ws_url().starts_with("wss://") && relay.http_url().starts_with("https://"));

    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(fixtures.join("ca.pem")).unwrap()).unwrap();
    let client = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let name = ServerName::IpAddress(relay.addr().ip().into());
    let tls = || async {
        let tcp = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
        connector.connect(name.clone(), tcp).await.expect("TLS handshake with the test CA")
    };

    let mut stream = tls().await;
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut response = String::new();
    // A peer may end TLS without close_notify; what was read is what counts.
    let _ = stream.read_to_string(&mut response).await;
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with("ok"), "{response}");

    let (mut ws, _) =
        tokio_tungstenite::client_async(format!("{}/v1/client", relay.ws_url()), tls().await).await.unwrap();
    let first = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
    let frame: RelayFrame = serde_json::from_str(first.to_text().unwrap()).unwrap();
    assert!(matches!(frame, RelayFrame::Challenge(_)), "{frame:?}");
    relay.shutdown().await;
}
