//! Protocol versions: each side that meets a peer speaking another version says so in
//! one sentence naming both, and nothing retries in a hot loop or crashes.

mod support;

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use support::hostile::HostileRelay;
use terminull_client::connection::{ConnectError, Connection};
use terminull_client::failover::{self, FailoverPolicy, Routes};
use terminull_protocol::crypto::envelope::relay_auth_bytes;
use terminull_protocol::crypto::{b64, from_b64url};
use terminull_protocol::relay::{Auth, RelayErrorCode, RelayFrame};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lan_server_refuses_a_device_of_another_version_with_one_sentence_and_closes() {
    let paired = support::remote::paired_bridge().await;
    let lan = support::remote::start_lan(&paired).await;
    let bridge_id = paired.record.bridge_id.clone();
    let device_id = paired.device_identity.public().device_id();
    for version in [2, 4] {
        let (mut ws, _) =
            tokio_tungstenite::connect_async(format!("{}/v1/client", lan.ws_url())).await.expect("the LAN server");
        let Some(Ok(Message::Text(text))) = ws.next().await else { panic!("a challenge") };
        let RelayFrame::Challenge(challenge) = serde_json::from_str(&text).unwrap() else { panic!("a challenge") };
        let nonce = from_b64url("nonce", &challenge.nonce).unwrap();
        let sig =
            paired.device_identity.sign(&relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), &nonce));
        let auth = Auth {
            bridge_id: bridge_id.clone(),
            device_id: device_id.clone(),
            sig: b64(&sig),
            protocol_version: version,
        };
        ws.send(Message::text(serde_json::to_string(&RelayFrame::Auth(auth)).unwrap())).await.unwrap();
        let Some(Ok(Message::Text(text))) = ws.next().await else { panic!("an answer") };
        let RelayFrame::Error(error) = serde_json::from_str(&text).unwrap() else { panic!("an error: {text}") };
        assert_eq!(error.code, RelayErrorCode::UnsupportedVersion);
        let update = if version < 3 { "this device" } else { "this bridge's LAN server" };
        assert_eq!(
            error.message,
            format!(
                "this device speaks relay protocol {version} and this bridge's LAN server speaks 3: update {update}"
            )
        );
        // Then the connection ends.
        let end = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue,
                }
            }
        })
        .await;
        assert!(end.is_ok(), "the LAN server closes after refusing");
    }
    assert!(paired.ctx.refusals.reasons().iter().any(|r| r.contains("speaks relay protocol 2")));
    lan.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_meeting_a_relay_of_another_version_gives_up_at_once_naming_both() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    relay.versions.lock().unwrap().1 = 2;
    let error = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect_err("refused");
    let ConnectError::Version(sentence) = &error else { panic!("not a version error: {error}") };
    assert_eq!(sentence, "the relay speaks relay protocol 2 and this device speaks 3: update the relay");
    // The failover link tries once and says why, instead of retrying for minutes.
    let started = Instant::now();
    let routes = Routes { lan: None, discover: None, relay: Some(relay.url.clone()) };
    let error =
        failover::open(&paired.device, &paired.record, routes, FailoverPolicy::default()).await.expect_err("refused");
    assert!(matches!(error, ConnectError::Version(_)), "{error}");
    assert!(error.to_string().contains("the relay speaks relay protocol 2 and this device speaks 3"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5), "gave up at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_meeting_a_relay_of_another_version_goes_no_further_and_backs_off() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    relay.versions.lock().unwrap().0 = 4;
    support::remote::connect_to_relay(&paired, relay.url.clone());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let frames: Vec<&'static str> = relay.from_bridge.lock().unwrap().iter().map(RelayFrame::frame_type).collect();
    assert!(frames.iter().all(|t| *t == "register"), "nothing but register: {frames:?}");
    let registers = frames.len();
    // Backoff 50 ms doubling to 400 ms: a few attempts in 1.5 s, not a hot loop.
    assert!((2..=12).contains(&registers), "{registers} registrations");
    let register = relay.from_bridge.lock().unwrap()[0].clone();
    let RelayFrame::Register(register) = register else { unreachable!() };
    assert_eq!(register.protocol_version, 3, "the bridge says which version it speaks");
}
