//! `GET /v1/bridges/{id}/app-signature`: the relay serves the signature a bridge sent
//! in `register.app` unchanged, and only one that verifies under that bridge's key
//! (docs/web-client.md#app-code-integrity).

mod support;

use support::*;
use terminull_protocol::crypto::app_code::{AppSignature, sign_shell};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{Registered, RelayFrame};
use terminull_relay::RunningRelay;

async fn register_with(relay: &RunningRelay, bridge: &Identity, app: Option<AppSignature>) -> Ws {
    let mut ws = open(relay, "/v1/bridge").await;
    let nonce = challenge(&mut ws).await;
    let mut frame = register(bridge, &nonce, Vec::new(), Vec::new());
    frame.app = app.map(Box::new);
    send(&mut ws, &RelayFrame::Register(frame)).await;
    assert!(matches!(recv(&mut ws).await, RelayFrame::Registered(Registered { .. })), "registered");
    ws
}

#[tokio::test]
async fn the_relay_serves_the_app_signature_its_bridge_registered_and_none_that_fails_to_verify() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start(config(dir.path())).await;
    let addr = relay.addr();

    let bridge = Identity::generate();
    let signature = sign_shell(&bridge, &[7; 32]);
    let _ws = register_with(&relay, &bridge, Some(signature.clone())).await;
    let (status, body) =
        http(addr, "GET", &format!("/v1/bridges/{}/app-signature", bridge.public().bridge_id()), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<AppSignature>(&body).unwrap(), signature);

    // Signed by another key under this bridge's id: registered, but not served.
    let other = Identity::generate();
    let liar = Identity::generate();
    let mut forged = sign_shell(&liar, &[8; 32]);
    forged.bridge_id = other.public().bridge_id().0;
    let _ws2 = register_with(&relay, &other, Some(forged)).await;
    let (status, body) =
        http(addr, "GET", &format!("/v1/bridges/{}/app-signature", other.public().bridge_id()), None).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no app signature is known"), "{body}");

    // A bridge the relay never saw.
    let (status, _) =
        http(addr, "GET", &format!("/v1/bridges/{}/app-signature", Identity::generate().public().bridge_id()), None)
            .await;
    assert_eq!(status, 404);
}
