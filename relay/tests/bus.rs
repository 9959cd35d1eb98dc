//! Relay processes joined by the bus (`--bus nats://…`) on one Postgres store: a change
//! committed through one reaches the others, and a NATS restart is survived. Each test
//! starts its own Postgres and NATS on loopback (support/servers.rs).

mod support;

use std::time::Duration;

use support::servers::{Nats, Postgres};
use support::*;
use terminull_protocol::BridgeId;
use terminull_protocol::crypto::b64;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{Push, PushKind, RelayErrorCode, RelayFrame};
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

#[tokio::test]
async fn when_a_node_dies_its_bridge_and_devices_resume_on_another_with_held_pushes_and_tokens() {
    let (pg, nats) = (Postgres::start(), Nats::start());
    let store = pg.url("postgres");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node_a = start(node_config(dir_a.path(), &store, &nats.url())).await;
    let node_b = start(node_config(dir_b.path(), &store, &nats.url())).await;
    let [bridge_key, phone] = std::array::from_fn(|_| Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let records = vec![device_record(&phone, "phone", false)];

    let mut bridge = FakeBridge::connect(&node_a, &bridge_key, records.clone(), sessions(&["s1"])).await;
    let (ws, status) = connect_device(&node_a, &bridge_id, &phone).await;
    let token_from_a = status.resume_tokens[&terminull_protocol::SessionId("s1".into())].clone();
    drop(ws);
    let push = Push { device_id: phone.public().device_id(), kind: PushKind::TurnFinished, payload: b64(&[5; 40]) };
    bridge.send(&RelayFrame::Push(push.clone())).await;
    // Node B has the held push once A committed it and announced the change: poll the
    // database for it, then give the announcement (one NATS hop, one query) a second.
    let (client, conn) = tokio_postgres::connect(&store, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let deadline = tokio::time::Instant::now() + WAIT;
    while client.query_one("SELECT count(*) FROM relay_push_queue", &[]).await.unwrap().get::<_, i64>(0) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the held push reaches the database");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Node A dies without a graceful stop; everything reconnects to B.
    drop(node_a);
    drop(bridge);
    let mut bridge = FakeBridge::connect(&node_b, &bridge_key, records, sessions(&["s1"])).await;
    let (mut ws, status) = connect_device(&node_b, &bridge_id, &phone).await;
    assert!(status.bridge_online);
    assert_eq!(recv(&mut ws).await, RelayFrame::Push(push), "the push held on A is delivered by B");
    let good = control(&phone, &bridge_id, Some("s1"), Some(token_from_a), "resume");
    send(&mut ws, &RelayFrame::Control(good.clone())).await;
    match bridge.recv().await {
        RelayFrame::Control(c) => assert_eq!(c.body, good.body, "A's resume token is accepted by B"),
        other => panic!("expected the control, got {other:?}"),
    }
    node_b.shutdown().await;
}

#[tokio::test]
async fn a_bus_without_a_shared_store_or_an_unreachable_nats_is_refused_at_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.bus = Some("nats://127.0.0.1:4222".into());
    let err = terminull_relay::Relay::start(cfg).await.unwrap_err().to_string();
    assert_eq!(err, "relay bus: the bus needs a shared store (--store postgres://…)");

    let pg = Postgres::start();
    let port = support::servers::free_port();
    let nowhere = format!("nats://127.0.0.1:{port}");
    let err = terminull_relay::Relay::start(node_config(dir.path(), &pg.url("postgres"), &nowhere))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with(&format!("relay bus: connecting to NATS at {nowhere}: ")), "{err}");
}
