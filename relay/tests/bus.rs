//! Relay processes joined by the bus (`--bus nats://…`) on one Postgres store: a change
//! committed through one reaches the others, and a NATS restart is survived. Each test
//! starts its own Postgres and NATS on loopback (support/servers.rs).

mod support;

use std::time::Duration;

use support::servers::{Nats, Postgres};
use support::*;
use terminull_protocol::BridgeId;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{RelayErrorCode, RelayFrame};
use terminull_relay::{RelayConfig, RunningRelay, StoreLocation};

/// [`config`] on Postgres at `store` joined by NATS at `bus`.
fn node_config(dir: &std::path::Path, store: &str, bus: &str) -> RelayConfig {
    let mut c = config(dir);
    c.store = StoreLocation::Postgres { url: store.to_owned() };
    c.store_timeout = Duration::from_secs(2);
    c.bus = Some(bus.to_owned());
    c
}

/// Authenticates `device` on `relay` until it is accepted (the node reloaded the
/// registry another node changed), or panics after `within`; `nudge` runs between tries.
async fn until_accepted(
    relay: &RunningRelay,
    bridge_id: &BridgeId,
    device: &Identity,
    within: Duration,
    mut nudge: impl AsyncFnMut(),
) -> Ws {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match try_connect_device(relay, bridge_id, device).await {
            (ws, RelayFrame::RelayStatus(_)) => return ws,
            (_, other) => assert!(tokio::time::Instant::now() < deadline, "still refused after {within:?}: {other:?}"),
        }
        nudge().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_registry_changed_through_one_node_reaches_the_others_and_a_nats_restart_is_survived() {
    let (pg, nats) = (Postgres::start(), Nats::start());
    let store = pg.url("postgres");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node_a = start(node_config(dir_a.path(), &store, &nats.url())).await;
    let node_b = start(node_config(dir_b.path(), &store, &nats.url())).await;
    let [bridge_key, phone, laptop, tablet] = std::array::from_fn(|_| Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();

    // Registered through A after B started: B learns it through the bus.
    let records = vec![device_record(&phone, "phone", false), device_record(&laptop, "laptop", false)];
    let mut bridge = FakeBridge::connect(&node_a, &bridge_key, records, sessions(&["s1"])).await;
    let mut phone_on_b = until_accepted(&node_b, &bridge_id, &phone, Duration::from_secs(5), async || {}).await;

    // Revoked through A: cut off on B.
    bridge.set_devices(vec![device_record(&phone, "phone", true), device_record(&laptop, "laptop", false)]).await;
    let message = tokio::time::timeout(WAIT, expect_error(&mut phone_on_b, RelayErrorCode::UnknownDevice))
        .await
        .expect("the revoked device is cut off on the other node");
    assert!(message.contains("no longer paired"), "{message}");

    // NATS restarts on the same port: the nodes reconnect and announce again.
    let port = nats.port;
    drop(nats);
    let _nats = Nats::start_on(port);
    let records = vec![
        device_record(&phone, "phone", true),
        device_record(&laptop, "laptop", false),
        device_record(&tablet, "tablet", false),
    ];
    let _tablet_on_b = until_accepted(&node_b, &bridge_id, &tablet, Duration::from_secs(20), async || {
        // Announcements made while a node was disconnected are lost: change again.
        bridge.set_devices(records.clone()).await;
    })
    .await;
    node_a.shutdown().await;
    node_b.shutdown().await;
}
