//! The forward-secret link handshake (protocol v3) against a hostile relay that
//! recorded a real link: a replayed `link_hello` gets a `link_accept` with a fresh
//! bridge ephemeral key, the recorded control replayed on it does not open (refused,
//! nothing runs), and the recorded `link_accept` fed to a new handshake of the
//! device is refused by the device.

mod support;

use std::time::Duration;

use support::hostile::HostileRelay;
use terminull_client::connection::Connection;
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::crypto::handshake::DeviceHandshake;
use terminull_protocol::relay::RelayFrame;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stdout, reason = "the attack table line")]
async fn attack_replayed_link_handshake_through_a_hostile_relay() {
    let paired = support::remote::paired_bridge().await;
    let relay = HostileRelay::start().await;
    support::remote::connect_to_relay(&paired, relay.url.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut connection = Connection::open(&paired.device, &paired.record, Some(&relay.url)).await.expect("link opens");
    let cwd = tempfile::tempdir().unwrap();
    support::remote::request_echo_session(&connection.tx, Some("r1"), cwd.path()).await;
    let reply = loop {
        match tokio::time::timeout(Duration::from_secs(20), connection.rx.recv()).await.expect("in time").expect("open")
        {
            BridgeMessage::Reply(r) => break r,
            _ => continue,
        }
    };
    assert!(matches!(reply.outcome, ReplyOutcome::Ok { result: ReplyResult::SessionStarted { .. } }), "{reply:?}");
    let sessions_before = paired.service.resumable_session_ids().len();

    // What the relay recorded of that link.
    let RelayFrame::LinkHello(mut hello) = relay.last_from_client(|f| matches!(f, RelayFrame::LinkHello(_))) else {
        unreachable!()
    };
    let RelayFrame::Control(mut control) = relay.last_from_client(|f| matches!(f, RelayFrame::Control(_))) else {
        unreachable!()
    };
    let recorded_accept = relay
        .from_bridge
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find_map(|f| if let RelayFrame::LinkAccept(a) = f { Some(a.clone()) } else { None })
        .expect("the bridge's link_accept was recorded");

    // 1. The hello replayed on a new connection, then the recorded control on it.
    let before = paired.ctx.refusals.count();
    hello.conn = Some(950);
    relay.to_bridge.send(RelayFrame::LinkHello(hello)).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fresh_accept = relay
        .from_bridge
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find_map(|f| if let RelayFrame::LinkAccept(a) = f { Some(a.clone()) } else { None })
        .expect("the bridge answered the replayed hello");
    assert_ne!(fresh_accept.bridge_ephemeral, recorded_accept.bridge_ephemeral, "a fresh ephemeral key");
    control.conn = Some(950);
    relay.to_bridge.send(RelayFrame::Control(control)).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = paired.ctx.refusals.count() - before;
    let reasons = paired.ctx.refusals.reasons();
    assert!(refused >= 1, "the replayed control is refused");
    assert!(reasons.last().unwrap().contains("authentication failed"), "{reasons:?}");
    assert_eq!(paired.service.resumable_session_ids().len(), sessions_before, "no session was started");

    // 2. The recorded accept offered to a new handshake of the device.
    let (_, pending) = DeviceHandshake::start(&paired.device_identity, paired.record.bridge_id.as_str());
    let bridge_keys = terminull_protocol::crypto::keys::PublicIdentity::from_wire(&paired.record.keys).unwrap();
    let old_accept_refused = pending.finish(&paired.device_identity, &bridge_keys, &recorded_accept).is_err();
    assert!(old_accept_refused, "a recorded link_accept is refused");

    println!(
        "attack: replayed link handshake: replayed hello answered with a fresh ephemeral key, \
         recorded control refused ({refused} refusal), sessions started 0; recorded link_accept refused by the device: {old_accept_refused}"
    );
}
