//! The LAN server: a device on the local network pairs with the bridge and drives a
//! session with no relay at all — the same envelopes, keys and checks as the relay
//! path — and a stranger or a revoked device is refused.

mod support;

use std::time::Duration;

use serde_json::json;
use terminull_bridge::devices;
use terminull_client::connection::{ConnectError, Connection};
use terminull_client::home::DeviceHome;
use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::ids::SessionId;
use terminull_protocol::relay::RelayErrorCode;

async fn next(rx: &mut tokio::sync::mpsc::Receiver<BridgeMessage>) -> BridgeMessage {
    tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a message in time").expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_on_the_lan_pairs_and_runs_a_turn_without_a_relay() {
    let paired = support::remote::paired_bridge().await;
    let server = support::remote::start_lan(&paired).await;

    // Pairing over the LAN: the link names the bridge's own server.
    let link = support::remote::offer_link(&paired.home(), None, Some(server.ws_url()), 60);
    let phone_dir = tempfile::tempdir().unwrap();
    let phone = DeviceHome::at(phone_dir.path());
    let paired_phone = terminull_client::pairing::pair(&phone, &link.to_url(&server.http_url()), "phone", None)
        .await
        .expect("pairs over the LAN");
    assert_eq!(paired_phone.short_code, devices::offer_result(&paired.home(), &link.secret).unwrap().short_code);

    let record = phone.bridge(None).unwrap();
    assert_eq!(record.lan.as_deref(), Some(server.ws_url().as_str()), "the device keeps the LAN address");
    let mut connection = Connection::open_lan(&phone, &record, &server.ws_url()).await.expect("link over the LAN");
    let cwd = tempfile::tempdir().unwrap();
    support::remote::request_echo_session(&connection.tx, Some("r1"), cwd.path()).await;
    let mut transcript = Transcript::new();
    // The reply, then the session's opening blocks up to `replay_done`.
    let mut session = None;
    loop {
        match next(&mut connection.rx).await {
            BridgeMessage::Reply(r) => match r.outcome {
                ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } => session = Some(session_id),
                other => panic!("{other:?}"),
            },
            BridgeMessage::Block { block, .. } => {
                assert!(session.is_some(), "a block came before session_started: {block:?}");
                transcript.apply(block);
            }
            BridgeMessage::ReplayDone { .. } => break,
            other @ (BridgeMessage::TerminalOutput(_) | BridgeMessage::TerminalExit(_)) => {
                panic!("no terminal here: {other:?}")
            }
        }
    }
    let session = session.expect("session_started before replay_done");
    connection
        .tx
        .send(json!({"id": "m1", "type": "user_message", "session_id": session, "text": "hello over the LAN"}))
        .await
        .unwrap();
    // The message's acceptance comes first, then the turn's blocks.
    let (mut ended, mut accepted) = (false, false);
    while !(ended && accepted) {
        match next(&mut connection.rx).await {
            BridgeMessage::Block { block, .. } => {
                assert!(accepted, "a block of the turn came before the reply: {block:?}");
                ended |= block.block_type() == "session_end";
                assert_eq!(transcript.apply(block), Applied::Added);
            }
            BridgeMessage::Reply(r) => {
                assert_eq!(r.id.as_deref(), Some("m1"));
                assert!(matches!(r.outcome, ReplyOutcome::Ok { result: ReplyResult::Accepted { .. } }), "{r:?}");
                accepted = true;
            }
            BridgeMessage::ReplayDone { .. } => {}
            other @ (BridgeMessage::TerminalOutput(_) | BridgeMessage::TerminalExit(_)) => {
                panic!("no terminal here: {other:?}")
            }
        }
    }
    let texts = support::remote::texts(&transcript);
    assert!(texts.iter().any(|t| t == "You said: hello over the LAN"), "{texts:?}");
    support::remote::assert_complete(
        &transcript,
        &support::remote::history(paired.bridge_home.path(), &SessionId(session.to_string())),
    );

    // A device the bridge never paired is refused at the door.
    let stranger_dir = tempfile::tempdir().unwrap();
    let stranger = DeviceHome::at(stranger_dir.path());
    stranger.add_bridge(record.clone()).unwrap();
    match Connection::open_lan(&stranger, &record, &server.ws_url()).await {
        Err(ConnectError::Refused { code: RelayErrorCode::UnknownDevice, .. }) => {}
        other => panic!("a stranger got {other:?}"),
    }

    // Revoked: the live link is closed at its next message, and a new one is refused.
    paired.ctx.devices.revoke(paired_phone_device(&phone).as_str()).unwrap();
    connection.tx.send(json!({"type": "list_sessions"})).await.unwrap();
    // Messages the bridge queued before the revocation may still arrive; the answer to
    // `list_sessions` must not, and the link must close.
    loop {
        match tokio::time::timeout(Duration::from_secs(10), connection.rx.recv()).await.expect("closed in time") {
            None => break,
            Some(BridgeMessage::Reply(reply)) => panic!("a revoked device got an answer: {reply:?}"),
            Some(_) => {}
        }
    }
    assert!(Connection::open_lan(&phone, &record, &server.ws_url()).await.is_err());
    assert_eq!(paired.service.resumable_session_ids().len(), 1, "no session from refused devices");
    server.stop();
}

fn paired_phone_device(home: &DeviceHome) -> terminull_protocol::ids::DeviceId {
    home.identity().unwrap().public().device_id()
}
