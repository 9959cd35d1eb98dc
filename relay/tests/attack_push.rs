//! Attacks on the relay's push side and its registrations (issue 20, items 4 and 5): a
//! device pointing the relay's Web Push sender at loopback, private or link-local
//! addresses (blind SSRF), redirects, retry storms; a single address registering bridge
//! after bridge; registrations nobody renews; the device registry read by strangers.
//! Everything stays on loopback; every wait is bounded.

#![allow(clippy::print_stdout, reason = "each attack prints one `attack:` line for the report")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::user_agent::UserAgent;
use support::*;
use terminull_protocol::BridgeId;
use terminull_protocol::crypto::envelope::push_subscription_bytes;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::{b64, b64url};
use terminull_protocol::relay::{Push, PushKind, RelayErrorCode, RelayFrame};
use terminull_relay::RelayConfig;
use terminull_relay::webpush::{PushError, PushSender, Subscription, Urgency, VapidKey};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// A loopback listener that counts the connections it accepts, reads each request and
/// answers `response`.
struct Counting {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Counting {
    async fn start(response: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let response = response.clone();
                tokio::spawn(async move {
                    // Read until the sender stops (it sends one request, then waits).
                    let mut buf = [0u8; 8192];
                    let _ = tokio::time::timeout(Duration::from_millis(200), async {
                        while let Ok(n) = stream.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                        }
                    })
                    .await;
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { port, connections }
    }

    fn count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn status_response(status: &str, extra: &str) -> String {
    format!("HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n")
}

/// The signed body of `POST /v1/push/subscriptions`.
fn subscription_body(device: &Identity, bridge_id: &BridgeId, endpoint: &str, ua: &UserAgent) -> String {
    let ts = unix_now();
    let device_id = device.public().device_id();
    let (p256dh, auth) = (ua.p256dh(), b64url(&ua.auth));
    let signed = push_subscription_bytes(bridge_id.as_str(), device_id.as_str(), endpoint, &p256dh, &auth, ts);
    serde_json::json!({
        "bridge_id": bridge_id,
        "device_id": device_id,
        "subscription": {"endpoint": endpoint, "keys": {"p256dh": p256dh, "auth": auth}},
        "ts": ts,
        "sig": b64(&device.sign(&signed)),
    })
    .to_string()
}

/// Subscribes `device` to `endpoint`; returns the HTTP status and body.
async fn subscribe(
    relay: &terminull_relay::RunningRelay,
    bridge_id: &BridgeId,
    device: &Identity,
    endpoint: &str,
) -> (u16, String) {
    let body = subscription_body(device, bridge_id, endpoint, &UserAgent::new());
    http(relay.addr(), "POST", "/v1/push/subscriptions", Some(&body)).await
}

fn push(device: &Identity, n: u8) -> RelayFrame {
    RelayFrame::Push(Push {
        device_id: device.public().device_id(),
        kind: PushKind::TurnFinished,
        payload: b64(&[n; 8]),
    })
}

/// Waits until `count()` reaches `at_least` (up to 10 s), then `settle` more; returns it.
async fn settled_count(listener: &Counting, at_least: usize, settle: Duration) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    while listener.count() < at_least && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(settle).await;
    listener.count()
}

/// No host admitted: what a relay on the internet runs with.
fn strict(c: &mut RelayConfig) {
    c.push_allowed_hosts.clear();
}

#[tokio::test]
async fn attack_push_subscriptions_to_loopback_private_and_link_local_endpoints_are_refused() {
    let Paired { dir: _dir, relay, bridge, devices: [device] } = Paired::start(["phone"], &[], strict).await;
    let target = Counting::start(status_response("201 Created", "")).await;
    let port = target.port;
    let endpoints = [
        format!("https://127.0.0.1:{port}/push"),
        format!("http://127.0.0.1:{port}/push"),
        format!("https://localhost:{port}/push"),
        format!("https://[::1]:{port}/push"),
        format!("https://[::ffff:127.0.0.1]:{port}/push"),
        "https://10.0.0.7/push".to_owned(),
        "https://192.168.1.1/push".to_owned(),
        "https://100.64.0.1/push".to_owned(),
        "https://169.254.169.254/latest/meta-data".to_owned(),
        "https://[fe80::1]/push".to_owned(),
        "https://[fd00::1]/push".to_owned(),
        "https://0.0.0.0/push".to_owned(),
    ];
    let mut refused = 0;
    for endpoint in &endpoints {
        let (code, body) = subscribe(&relay, &bridge.id(), &device, endpoint).await;
        assert_eq!(code, 400, "{endpoint}: {body}");
        assert!(body.contains("only pushes to public hosts"), "{endpoint}: {body}");
        refused += 1;
    }
    // Nothing was stored: a push for the offline device contacts nobody.
    let mut bridge = bridge;
    bridge.send(&push(&device, 1)).await;
    let connections = settled_count(&target, 0, Duration::from_millis(500)).await;
    assert_eq!(connections, 0);
    println!(
        "attack: push subscription to loopback/private/link-local endpoints: {refused}/{} refused with 400, {connections} connections to the target",
        endpoints.len()
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn attack_push_to_a_name_resolving_to_loopback_is_refused_at_connect_time() {
    // The address the sender is about to dial is checked, not only the one seen at
    // subscription time: a subscription stored while the host was admitted (or while its
    // name resolved to a public address) is refused once it resolves to loopback.
    let target = Counting::start(status_response("201 Created", "")).await;
    let endpoint = format!("http://localhost:{}/push", target.port);
    let ua = UserAgent::new();
    let subscription: Subscription = serde_json::from_value(serde_json::json!({
        "endpoint": endpoint,
        "keys": {"p256dh": ua.p256dh(), "auth": b64url(&ua.auth)},
    }))
    .unwrap();
    let sender = PushSender::new(VapidKey::generate(), "mailto:ops@terminull.test").unwrap().allow_plain_http(true);
    let err = sender.send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
    assert!(matches!(&err, PushError::ForbiddenAddress { addr, .. } if addr.is_loopback()), "{err:?}");

    // The same through the relay: stored while `localhost` was admitted, then the relay
    // restarts without the setting and the bridge pushes to the offline device.
    let Paired { dir, relay, bridge, devices: [device] } =
        Paired::start(["phone"], &[], |c| c.push_allowed_hosts = vec!["localhost".parse().unwrap()]).await;
    let (code, body) = subscribe(&relay, &bridge.id(), &device, &endpoint).await;
    assert_eq!(code, 204, "{body}");
    let identity = bridge.identity.clone();
    drop(bridge);
    relay.shutdown().await;
    let mut cfg = config(dir.path());
    strict(&mut cfg);
    let relay = start(cfg).await;
    let mut bridge = FakeBridge::connect(&relay, &identity, vec![device_record(&device, "phone", false)], vec![]).await;
    bridge.send(&push(&device, 1)).await;
    let connections = settled_count(&target, 0, Duration::from_secs(1)).await;
    assert_eq!(connections, 0, "the relay connected to loopback");
    println!(
        "attack: push to a name resolving to loopback: refused at connect time ({err}); {connections} connections"
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn attack_push_redirect_is_not_followed() {
    let elsewhere = Counting::start(status_response("201 Created", "")).await;
    let location = format!("Location: http://127.0.0.1:{}/internal\r\n", elsewhere.port);
    let redirector = Counting::start(status_response("307 Temporary Redirect", &location)).await;
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let endpoint = format!("http://127.0.0.1:{}/push", redirector.port);
    let (code, body) = subscribe(&relay, &bridge.id(), &device, &endpoint).await;
    assert_eq!(code, 204, "{body}");
    bridge.send(&push(&device, 1)).await;
    let first = settled_count(&redirector, 1, Duration::from_millis(800)).await;
    assert_eq!(first, 1, "a redirect is a refusal: no retry");
    assert_eq!(elsewhere.count(), 0, "the redirect was followed");
    println!(
        "attack: push endpoint answering 307 to another address: {first} connection to the endpoint, {} to the redirect target",
        elsewhere.count()
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn attack_push_retries_and_concurrent_deliveries_are_bounded() {
    const ATTEMPTS: u32 = 3;
    const PUSHES: usize = 5;
    let failing = Counting::start(status_response("503 Service Unavailable", "")).await;
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |c| {
        c.push_max_attempts = ATTEMPTS;
        c.max_push_in_flight = 1;
    })
    .await;
    let endpoint = format!("http://127.0.0.1:{}/push", failing.port);
    let (code, body) = subscribe(&relay, &bridge.id(), &device, &endpoint).await;
    assert_eq!(code, 204, "{body}");
    for n in 0..PUSHES {
        bridge.send(&push(&device, n as u8)).await;
    }
    // Backoff 50 ms then 100 ms: the attempts are over well within the settle time.
    let connections = settled_count(&failing, ATTEMPTS as usize, Duration::from_millis(1500)).await;
    assert_eq!(connections, ATTEMPTS as usize, "one delivery in flight, {ATTEMPTS} attempts");
    println!(
        "attack: {PUSHES} pushes to an endpoint answering 503: {connections} connections (bound: max_push_in_flight 1 × push_max_attempts {ATTEMPTS})"
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn attack_registrations_from_one_address_beyond_the_cap_are_refused() {
    const CAP: u32 = 3;
    const TRIED: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.new_bridges_per_ip = CAP;
    let relay = start(cfg).await;
    let mut accepted = Vec::new();
    let mut refused = 0;
    for _ in 0..TRIED {
        let identity = Identity::generate();
        let mut ws = open(&relay, "/v1/bridge").await;
        let nonce = challenge(&mut ws).await;
        send(&mut ws, &RelayFrame::Register(register(&identity, &nonce, vec![], vec![]))).await;
        match recv(&mut ws).await {
            RelayFrame::Registered(_) => accepted.push(identity),
            RelayFrame::Error(e) => {
                assert_eq!(e.code, RelayErrorCode::RateLimited, "{}", e.message);
                assert!(e.message.contains("new bridge registrations"), "{}", e.message);
                assert_eq!(until_closed(&mut ws).await.1, Some(1008));
                refused += 1;
            }
            other => panic!("expected registered or error, got {other:?}"),
        }
    }
    assert_eq!(accepted.len(), CAP as usize);
    // A known bridge renewing its registration is not a new one.
    let renewed = FakeBridge::connect(&relay, &accepted[0], vec![], vec![]).await;
    println!(
        "attack: {TRIED} new bridge registrations from one address: {} accepted, {refused} refused (rate_limited, close 1008; cap {CAP}/h); a known bridge still renews",
        accepted.len()
    );
    drop(renewed);
    relay.shutdown().await;
}

#[tokio::test]
async fn attack_an_unrenewed_registration_expires_and_an_established_one_stays() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.unestablished_registration_ttl = Duration::from_secs(1);
    let relay = start(cfg.clone()).await;
    let (squatter, kept, phone) = (Identity::generate(), Identity::generate(), Identity::generate());
    let junk: Vec<_> = (0..200)
        .map(|i| device_record(&Identity::generate(), &format!("junk-{i}-{}", "x".repeat(200)), false))
        .collect();
    let bridge = FakeBridge::connect(&relay, &squatter, junk, vec![]).await;
    let left_at = Instant::now();
    drop(bridge);
    // An established one: a device of it authenticated.
    let other = FakeBridge::connect(&relay, &kept, vec![device_record(&phone, "phone", false)], vec![]).await;
    let (phone_ws, _) = connect_device(&relay, &kept.public().bridge_id(), &phone).await;
    drop(phone_ws);
    drop(other);
    // And one that stays connected: never expires.
    let online_key = Identity::generate();
    let online = FakeBridge::connect(&relay, &online_key, vec![], vec![]).await;

    let squatter_id = squatter.public().bridge_id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let expired_after = loop {
        let (code, _) = list_devices(&relay, &squatter_id, &squatter).await;
        if code == 404 {
            break left_at.elapsed();
        }
        assert_eq!(code, 200);
        assert!(Instant::now() < deadline, "the registration never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(list_devices(&relay, &kept.public().bridge_id(), &kept).await.0, 200, "established: kept");
    assert_eq!(list_devices(&relay, &online.id(), &online_key).await.0, 200, "online: kept");
    drop(online);
    relay.shutdown().await;
    // Deleted from the store too.
    let relay = start(cfg).await;
    assert_eq!(list_devices(&relay, &squatter_id, &squatter).await.0, 404, "the expired registration came back");
    let db = std::fs::metadata(dir.path().join("relay.redb")).unwrap().len();
    println!(
        "attack: unrenewed registration (200 junk devices): gone {:.1} s after its bridge left (lifetime 1 s), also after a restart; established and online ones kept; relay.redb {} KiB",
        expired_after.as_secs_f64(),
        db / 1024
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn attack_the_device_listing_needs_the_bridges_or_a_devices_signature() {
    let Paired { dir: _dir, relay, bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let path = format!("/v1/bridges/{}/devices", bridge.id());
    let (anonymous, body) = http(relay.addr(), "GET", &path, None).await;
    assert_eq!(anonymous, 401, "{body}");
    assert!(!body.contains("phone"), "{body}");
    let (unknown, _) = http(relay.addr(), "GET", "/v1/bridges/brg_nobody/devices", None).await;
    assert_eq!(unknown, 401, "no oracle for which bridges exist");
    let (stranger, body) = list_devices(&relay, &bridge.id(), &Identity::generate()).await;
    assert_eq!(stranger, 403, "{body}");
    let stale =
        terminull_relay::listing::devices_listing_query(&bridge.identity, bridge.id().as_str(), unix_now() - 3600);
    let (replayed, body) = http(relay.addr(), "GET", &format!("{path}?{stale}"), None).await;
    assert_eq!(replayed, 401, "{body}");
    let (forged, _) =
        http(relay.addr(), "GET", &format!("{path}?signer={}&ts={}&sig=AAAA", bridge.id(), unix_now()), None).await;
    assert_eq!(forged, 401);
    let (by_bridge, _) = list_devices(&relay, &bridge.id(), &bridge.identity).await;
    let (by_device, body) = list_devices(&relay, &bridge.id(), &device).await;
    assert_eq!((by_bridge, by_device), (200, 200), "{body}");
    println!(
        "attack: device listing: anonymous {anonymous}, unknown bridge anonymous {unknown}, stranger's signature {stranger}, stale {replayed}, forged {forged}; bridge {by_bridge}, device {by_device}"
    );
    relay.shutdown().await;
}
