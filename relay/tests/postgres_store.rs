//! The relay on Postgres (`--store postgres://…`): state and secrets shared by relay
//! processes on one database, migrations, a stalled database, and moving a redb relay
//! to Postgres. Each test starts its own Postgres on loopback (support/servers.rs).

mod support;

use std::time::Duration;

use support::servers::Postgres;
use support::*;
use terminull_protocol::crypto::b64;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::pairing::{self, PairingLink};
use terminull_protocol::crypto::random_bytes;
use terminull_protocol::relay::{LinkAccept, Push, PushKind, RelayErrorCode, RelayFrame, ReplayDoneFrame};
use terminull_protocol::{BridgeId, SessionId};
use terminull_relay::{RelayConfig, RunningRelay, StoreLocation};

/// [`config`] on the Postgres database at `url`, with a short store timeout.
fn pg_config(dir: &std::path::Path, url: &str) -> RelayConfig {
    let mut c = config(dir);
    c.store = StoreLocation::Postgres { url: url.to_owned() };
    c.store_timeout = Duration::from_secs(1);
    c.pair_timeout = Duration::from_secs(3);
    c
}

/// A link between `phone` and `bridge` (link_hello → link_accept) and one frame from the
/// bridge through it: forwarding works.
async fn forward_once(bridge: &mut FakeBridge, phone: &mut Ws, device: &Identity) {
    send(phone, &link_hello(device)).await;
    let conn = bridge.expect_link_hello().await;
    let accept = LinkAccept {
        device_id: device.public().device_id(),
        bridge_nonce: "bg".into(),
        bridge_ephemeral: "ZXBo".into(),
        sig: "c2ln".into(),
        conn: Some(conn),
    };
    bridge.send(&RelayFrame::LinkAccept(accept.clone())).await;
    let mut first = recv(phone).await;
    while matches!(first, RelayFrame::RelayStatus(_)) {
        first = recv(phone).await; // the bridge reconnected meanwhile
    }
    assert_eq!(first, RelayFrame::LinkAccept(LinkAccept { conn: None, ..accept }));
    let done = ReplayDoneFrame { session_id: SessionId("s1".into()), last_seq: Some(3), enc: None, conn: Some(conn) };
    bridge.send(&RelayFrame::ReplayDone(done.clone())).await;
    assert_eq!(recv(phone).await, RelayFrame::ReplayDone(ReplayDoneFrame { conn: None, ..done }));
}

/// Sends `token`'s control for `s1` and checks that the bridge gets it.
async fn control_reaches_bridge(phone: &mut Ws, bridge: &mut FakeBridge, device: &Identity, token: String) {
    let bridge_id = bridge.id();
    let good = control(device, &bridge_id, Some("s1"), Some(token), "resume");
    send(phone, &RelayFrame::Control(good.clone())).await;
    match bridge.recv().await {
        RelayFrame::Control(c) => assert_eq!(c.body, good.body),
        other => panic!("expected the control, got {other:?}"),
    }
}

#[tokio::test]
async fn relays_on_one_database_share_registrations_held_pushes_and_the_resume_token_key() {
    let pg = Postgres::start();
    let url = pg.url("postgres");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (bridge_key, device) = (Identity::generate(), Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let push = Push { device_id: device.public().device_id(), kind: PushKind::TurnFinished, payload: b64(&[7; 40]) };

    // Node A: registration, a token for s1, a push held for the offline device.
    let node_a = start(pg_config(dir_a.path(), &url)).await;
    let records = vec![device_record(&device, "phone", false)];
    let mut bridge = FakeBridge::connect(&node_a, &bridge_key, records.clone(), sessions(&["s1"])).await;
    let (phone, status) = connect_device(&node_a, &bridge_id, &device).await;
    let token_from_a = status.resume_tokens[&SessionId("s1".into())].clone();
    drop(phone);
    bridge.send(&RelayFrame::Push(push.clone())).await;
    // A frame after the push: once it is answered, the push has been handled.
    bridge.send(&RelayFrame::Register(register(&bridge_key, &[0; 32], vec![], vec![]))).await;
    loop {
        match bridge.recv().await {
            RelayFrame::ConnClosed(_) => {}
            RelayFrame::Error(e) => break assert_eq!(e.code, RelayErrorCode::BadFrame),
            other => panic!("expected the bad_frame error, got {other:?}"),
        }
    }
    drop(bridge);
    node_a.shutdown().await;

    // Node B, another process's view of the same database.
    let node_b = start(pg_config(dir_b.path(), &url)).await;
    let (code, body) = list_devices(&node_b, &bridge_id, &bridge_key).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(device.public().device_id().as_str()));
    let mut bridge = FakeBridge::connect(&node_b, &bridge_key, records, sessions(&["s1"])).await;
    let (mut phone, status) = connect_device(&node_b, &bridge_id, &device).await;
    assert!(status.bridge_online);
    assert_eq!(recv(&mut phone).await, RelayFrame::Push(push), "the push held on node A reaches the device on B");
    control_reaches_bridge(&mut phone, &mut bridge, &device, token_from_a).await;
    forward_once(&mut bridge, &mut phone, &device).await;
    node_b.shutdown().await;
}

#[tokio::test]
async fn migrations_run_once_when_nodes_start_together_and_a_newer_schema_is_refused() {
    let pg = Postgres::start();
    let url = pg.create_db("fresh").await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<RunningRelay> =
        futures::future::join_all(dirs.iter().map(|d| start(pg_config(d.path(), &url)))).await;
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let rows = client.query("SELECT version FROM relay_schema_migrations", &[]).await.unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, [1], "each migration applied once");
    let secrets: i64 = client.query_one("SELECT count(*) FROM relay_secrets", &[]).await.unwrap().get(0);
    assert_eq!(secrets, 2, "one JWT key and one VAPID key, shared");
    for node in nodes {
        node.shutdown().await;
    }

    client.execute("INSERT INTO relay_schema_migrations (version, name) VALUES (999, 'future')", &[]).await.unwrap();
    let err = terminull_relay::Relay::start(pg_config(dirs[0].path(), &url)).await.unwrap_err().to_string();
    assert!(err.contains("schema version 999, newer than this relay knows (1): upgrade the relay"), "{err}");
    assert!(err.contains("postgres://127.0.0.1:"), "names the database: {err}");
}

#[tokio::test]
async fn a_stalled_database_pauses_pairing_and_new_registrations_clearly_while_forwarding_continues() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let relay = start(pg_config(dir.path(), &pg.url("postgres"))).await;
    let (bridge_key, device) = (Identity::generate(), Identity::generate());
    let mut bridge =
        FakeBridge::connect(&relay, &bridge_key, vec![device_record(&device, "phone", false)], sessions(&["s1"])).await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    let link = PairingLink {
        bridge_id: bridge.id(),
        bridge: bridge.identity.public().to_wire(),
        relay: Some(relay.ws_url()),
        lan: None,
        secret: random_bytes::<32>(),
        expires_at: u64::MAX / 2,
    };
    let path = format!("/v1/bridges/{}/pair", bridge.id());
    let (request, _) = pairing::request(&link, &Identity::generate(), "tablet").unwrap();
    let body = serde_json::to_string(&request).unwrap();

    pg.pause();
    // Forwarding between connected peers never waits for the database.
    forward_once(&mut bridge, &mut phone, &device).await;
    let (code, answer) = http(relay.addr(), "POST", &path, Some(&body)).await;
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("pairing is paused: the relay's database (postgres://127.0.0.1:"), "{answer}");
    assert!(answer.contains("retry in a few seconds"), "{answer}");
    // A bridge the relay does not know cannot register meanwhile; a known one can.
    let mut newcomer = open(&relay, "/v1/bridge").await;
    let nonce = challenge(&mut newcomer).await;
    send(&mut newcomer, &RelayFrame::Register(register(&Identity::generate(), &nonce, vec![], vec![]))).await;
    let refused = expect_error(&mut newcomer, RelayErrorCode::RateLimited).await;
    assert!(refused.contains("registering a new bridge is paused"), "{refused}");
    let records = vec![device_record(&device, "phone", false)];
    let mut bridge = FakeBridge::connect(&relay, &bridge_key, records, sessions(&["s1"])).await;
    forward_once(&mut bridge, &mut phone, &device).await;
    pg.resume();

    // Recovery: the writer reconnects with backoff; pairing reaches the bridge again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let addr = relay.addr();
    loop {
        let post = tokio::spawn({
            let (path, body) = (path.clone(), body.clone());
            async move { http(addr, "POST", &path, Some(&body)).await }
        });
        let got = tokio::time::timeout(Duration::from_secs(3), async {
            loop {
                if let RelayFrame::PairRequest(f) = bridge.recv().await {
                    return f;
                }
            }
        })
        .await;
        if got.is_ok() {
            post.abort();
            break;
        }
        let (code, answer) = post.await.unwrap();
        assert_eq!(code, 503, "{answer}");
        assert!(tokio::time::Instant::now() < deadline, "pairing still refused after SIGCONT: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    relay.shutdown().await;
}

#[tokio::test]
async fn import_moves_a_redb_relay_to_postgres_and_its_devices_keep_working_without_pairing() {
    let pg = Postgres::start();
    let url = pg.url("postgres");
    let dir = tempfile::tempdir().unwrap();
    let (bridge_key, device) = (Identity::generate(), Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let records = vec![device_record(&device, "phone", false)];
    let token = {
        let relay = start(config(dir.path())).await;
        let _bridge = FakeBridge::connect(&relay, &bridge_key, records.clone(), sessions(&["s1"])).await;
        let (_phone, status) = connect_device(&relay, &bridge_id, &device).await;
        relay.shutdown().await;
        status.resume_tokens[&SessionId("s1".into())].clone()
    };

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_terminull-relay"))
        .args(["import", "--data", dir.path().to_str().unwrap(), "--store", &url])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "import failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stdout.trim(),
        "moved 1 bridges, 1 device registries, 0 push subscriptions, 0 held pushes, and the secrets"
    );

    let other = tempfile::tempdir().unwrap();
    let relay = start(pg_config(other.path(), &url)).await;
    let mut bridge = FakeBridge::connect(&relay, &bridge_key, records, sessions(&["s1"])).await;
    let (mut phone, status) = connect_device(&relay, &bridge_id, &device).await;
    assert!(status.bridge_online, "the device authenticates with no new pairing");
    control_reaches_bridge(&mut phone, &mut bridge, &device, token).await;
    relay.shutdown().await;

    // And back: export into a fresh relay.redb that a redb relay serves.
    let back = tempfile::tempdir().unwrap();
    let moved = terminull_relay::transfer::postgres_to_redb(&url, back.path(), Duration::from_secs(5)).await.unwrap();
    assert_eq!((moved.bridges, moved.device_registries), (1, 1));
    let relay = start(config(back.path())).await;
    let (code, body) = list_devices(&relay, &BridgeId(bridge_id.as_str().to_owned()), &bridge_key).await;
    assert_eq!(code, 200, "{body}");
    relay.shutdown().await;
}
