//! Frames across relay nodes (`--bus nats://…` on one Postgres store): a device on one
//! node reaches its bridge on another, in order; pairing, pushes and resume tokens work
//! across nodes; a bridge that moves to another node takes its devices' links with it.
//! Each test starts its own Postgres and NATS on loopback (support/servers.rs).

mod support;

use std::time::Duration;

use support::servers::{Nats, Postgres};
use support::*;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::pairing::{self, PairingLink};
use terminull_protocol::crypto::{b64, random_bytes};
use terminull_protocol::relay::{LinkAccept, PairResponseFrame, Push, PushKind, RelayFrame, ReplyEnvelope};
use terminull_protocol::{BridgeId, SessionId};
use terminull_relay::{RelayConfig, RunningRelay, StoreLocation};

/// [`config`] on Postgres at `store` joined by NATS at `bus`.
fn node_config(dir: &std::path::Path, store: &str, bus: &str) -> RelayConfig {
    let mut c = config(dir);
    c.store = StoreLocation::Postgres { url: store.to_owned() };
    c.store_timeout = Duration::from_secs(2);
    c.bus = Some(bus.to_owned());
    c
}

/// One Postgres, one NATS and `N` relay nodes joined by them, each node with its own
/// data directory (kept alive with the returned value).
async fn cluster<const N: usize>() -> (Postgres, Nats, [tempfile::TempDir; N], [RunningRelay; N]) {
    let (pg, nats) = (Postgres::start(), Nats::start());
    let store = pg.url("postgres");
    let dirs: [tempfile::TempDir; N] = std::array::from_fn(|_| tempfile::tempdir().unwrap());
    let mut nodes = Vec::with_capacity(N);
    for dir in &dirs {
        nodes.push(start(node_config(dir.path(), &store, &nats.url())).await);
    }
    let Ok(nodes) = nodes.try_into() else { unreachable!("N nodes were started") };
    (pg, nats, dirs, nodes)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// `device` authenticated on `relay` once the node knows the bridge and sees it online.
async fn online_device(
    relay: &RunningRelay,
    bridge_id: &BridgeId,
    device: &Identity,
) -> (Ws, terminull_protocol::relay::RelayStatus) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match try_connect_device(relay, bridge_id, device).await {
            (ws, RelayFrame::RelayStatus(status)) if status.bridge_online => return (ws, status),
            (_, other) => assert!(tokio::time::Instant::now() < deadline, "not online in time: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The next frame that is not a `relay_status`.
async fn recv_skipping_status(ws: &mut Ws) -> RelayFrame {
    loop {
        match recv(ws).await {
            RelayFrame::RelayStatus(_) => {}
            other => return other,
        }
    }
}

/// The bridge's next frame that is not a `conn_closed`.
async fn bridge_recv(bridge: &mut FakeBridge) -> RelayFrame {
    loop {
        match bridge.recv().await {
            RelayFrame::ConnClosed(_) => {}
            other => return other,
        }
    }
}

/// Opens a link from `device` (connected to some node) to `bridge`: returns the
/// bridge's `conn` for it.
async fn link(bridge: &mut FakeBridge, ws: &mut Ws, device: &Identity) -> u64 {
    send(ws, &link_hello(device)).await;
    let conn = bridge.expect_link_hello().await;
    let accept = LinkAccept {
        device_id: device.public().device_id(),
        bridge_nonce: "bn".into(),
        bridge_ephemeral: "be".into(),
        sig: b64(&[0; 64]),
        conn: Some(conn),
    };
    bridge.send(&RelayFrame::LinkAccept(accept)).await;
    match recv_skipping_status(ws).await {
        RelayFrame::LinkAccept(a) => assert_eq!(a.conn, None, "conn is stripped"),
        other => panic!("expected link_accept, got {other:?}"),
    }
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_on_other_nodes_reach_the_bridge_in_order_and_pair_push_and_resume_across_nodes() {
    let (pg, _nats, _dirs, [n1, n2, n3]) = cluster().await;
    let store = pg.url("postgres");
    let [bridge_key, phone, laptop] = std::array::from_fn(|_| Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let records = vec![device_record(&phone, "phone", false)];
    let mut bridge = FakeBridge::connect(&n1, &bridge_key, records, sessions(&["s1"])).await;

    // A resume token issued by node 1 is accepted by node 2.
    let (ws, status) = connect_device(&n1, &bridge_id, &phone).await;
    let token_from_1 = status.resume_tokens[&SessionId("s1".into())].clone();
    drop(ws);

    // The phone on node 2 links with the bridge on node 1.
    let (mut phone_ws, status) = online_device(&n2, &bridge_id, &phone).await;
    assert_eq!(status.agents, agents(), "node 2 knows the bridge's agents");
    let conn = link(&mut bridge, &mut phone_ws, &phone).await;
    let resume = control(&phone, &bridge_id, Some("s1"), Some(token_from_1), "resume");
    send(&mut phone_ws, &RelayFrame::Control(resume.clone())).await;
    match bridge_recv(&mut bridge).await {
        RelayFrame::Control(c) => {
            assert_eq!((c.body, c.conn), (resume.body, Some(conn)), "node 1's token is accepted on node 2");
        }
        other => panic!("expected the control, got {other:?}"),
    }
    bridge
        .send(&RelayFrame::Reply(ReplyEnvelope {
            device_id: phone.public().device_id(),
            body: "answer".into(),
            conn: Some(conn),
        }))
        .await;
    match recv_skipping_status(&mut phone_ws).await {
        RelayFrame::Reply(r) => assert_eq!((r.body.as_str(), r.conn), ("answer", None)),
        other => panic!("expected the reply, got {other:?}"),
    }

    // 300 blocks in 60 batches arrive on node 2 in order, each once, a new session's
    // token ahead of its first block.
    let mut sent = Vec::new();
    for i in 0..60 {
        let session = if i < 30 { "s1" } else { "s2" };
        let blocks: Vec<_> = (0..5).map(|_| bridge.block(session, 200)).collect();
        sent.extend(blocks.iter().map(|b| b.enc.clone()));
        let batch = bridge.batch(conn, blocks);
        bridge.send(&batch).await;
    }
    let mut got = Vec::new();
    let mut token_for_s2 = false;
    while got.len() < sent.len() {
        match recv(&mut phone_ws).await {
            RelayFrame::Block(b) => {
                if b.session_id.0 == "s2" {
                    assert!(token_for_s2, "the token for s2 arrives before its first block");
                }
                got.push(b.enc);
            }
            RelayFrame::RelayStatus(s) => token_for_s2 |= s.resume_tokens.contains_key(&SessionId("s2".into())),
            other => panic!("expected blocks, got {other:?}"),
        }
    }
    assert_eq!(got, sent, "every block once, in order");
    eprintln!("cluster: {} blocks in {} batches crossed nodes in order", got.len(), 60);

    // Pairing through node 3 reaches the bridge on node 1.
    let link_offer = PairingLink {
        bridge_id: bridge_id.clone(),
        bridge: bridge_key.public().to_wire(),
        relay: Some(n3.ws_url()),
        lan: None,
        secret: random_bytes::<32>(),
        expires_at: unix_now() + 300,
    };
    let (request, pending) = pairing::request(&link_offer, &laptop, "laptop").unwrap();
    let body = serde_json::to_string(&request).unwrap();
    let addr = n3.addr();
    let path = format!("/v1/bridges/{bridge_id}/pair");
    let post = tokio::spawn(async move { http(addr, "POST", &path, Some(&body)).await });
    let request_id = match bridge_recv(&mut bridge).await {
        RelayFrame::PairRequest(f) => {
            assert_eq!(f.request, request);
            f.request_id
        }
        other => panic!("expected pair_request, got {other:?}"),
    };
    let accepted = pairing::accept(&bridge_key, &link_offer.secret, &request).unwrap();
    let answer = PairResponseFrame { request_id, response: Some(accepted.response.clone()), error: None };
    bridge.send(&RelayFrame::PairResponse(answer)).await;
    let (code, answer) = post.await.unwrap();
    assert_eq!(code, 200, "{answer}");
    assert_eq!(pending.finish(&serde_json::from_str(&answer).unwrap()).unwrap().short_code, accepted.short_code);
    bridge.set_devices(vec![device_record(&phone, "phone", false), device_record(&laptop, "laptop", false)]).await;

    // A push for the phone (connected to node 2) reaches it there; one for the laptop
    // (offline) is held and delivered when it connects to node 3.
    let to_phone =
        Push { device_id: phone.public().device_id(), kind: PushKind::PermissionNeeded, payload: b64(&[1; 40]) };
    bridge.send(&RelayFrame::Push(to_phone.clone())).await;
    assert_eq!(recv_skipping_status(&mut phone_ws).await, RelayFrame::Push(to_phone));
    let to_laptop =
        Push { device_id: laptop.public().device_id(), kind: PushKind::TurnFinished, payload: b64(&[2; 40]) };
    bridge.send(&RelayFrame::Push(to_laptop.clone())).await;
    // Held in the shared database before the laptop connects anywhere.
    let (db, db_conn) = tokio_postgres::connect(&store, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(db_conn);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let query = "SELECT count(*) FROM relay_push_queue WHERE device_id = $1";
    let laptop_id = laptop.public().device_id().0;
    while db.query_one(query, &[&laptop_id]).await.unwrap().get::<_, i64>(0) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the push for the offline laptop is held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Node 3 delivers it after the laptop's relay_status, whether it loaded it before the
    // laptop connected or after.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut laptop_ws = loop {
        match try_connect_device(&n3, &bridge_id, &laptop).await {
            (ws, RelayFrame::RelayStatus(_)) => break ws,
            (_, other) => {
                assert!(tokio::time::Instant::now() < deadline, "the laptop is accepted on node 3: {other:?}")
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(recv_skipping_status(&mut laptop_ws).await, RelayFrame::Push(to_laptop));
    let laptop_conn = link(&mut bridge, &mut laptop_ws, &laptop).await;
    assert_ne!(laptop_conn, conn);

    // The bridge moves to node 3: the devices' links through node 1 end (close 1012)
    // and they link again with the bridge where it is now.
    drop(bridge);
    let records = vec![device_record(&phone, "phone", false), device_record(&laptop, "laptop", false)];
    let mut bridge = FakeBridge::connect(&n3, &bridge_key, records, sessions(&["s1", "s2"])).await;
    let (_, close) = until_closed(&mut phone_ws).await;
    assert_eq!(close, Some(1012), "the phone's link through node 1 ends");
    let (mut phone_ws, _) = online_device(&n2, &bridge_id, &phone).await;
    let conn = link(&mut bridge, &mut phone_ws, &phone).await;
    let block = bridge.one_block("s1", conn, 10);
    bridge.send(&block).await;
    assert!(matches!(recv_skipping_status(&mut phone_ws).await, RelayFrame::Block(_)));
    for node in [n1, n2, n3] {
        node.shutdown().await;
    }
}

/// Sends `n` batches of `per` blocks to `conn` and checks `ws` receives them in order,
/// each once; returns how many blocks.
async fn stream(bridge: &mut FakeBridge, ws: &mut Ws, conn: u64, session: &str, n: usize, per: usize) -> usize {
    let mut sent = Vec::new();
    for _ in 0..n {
        let blocks: Vec<_> = (0..per).map(|_| bridge.block(session, 100)).collect();
        sent.extend(blocks.iter().map(|b| b.enc.clone()));
        let batch = bridge.batch(conn, blocks);
        bridge.send(&batch).await;
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        match recv(ws).await {
            RelayFrame::Block(b) => got.push(b.enc),
            RelayFrame::RelayStatus(_) => {}
            other => panic!("expected blocks, got {other:?}"),
        }
    }
    assert_eq!(got, sent, "every block once, in order");
    got.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_paused_for_10_s_stops_no_cross_node_stream_and_pairing_recovers_after_sigcont() {
    let (pg, _nats, _dirs, [n1, n2]) = cluster().await;
    let [bridge_key, phone, tablet] = std::array::from_fn(|_| Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let mut bridge =
        FakeBridge::connect(&n1, &bridge_key, vec![device_record(&phone, "phone", false)], sessions(&["s1"])).await;
    let (mut phone_ws, _) = online_device(&n2, &bridge_id, &phone).await;
    let conn = link(&mut bridge, &mut phone_ws, &phone).await;
    let offer = PairingLink {
        bridge_id: bridge_id.clone(),
        bridge: bridge_key.public().to_wire(),
        relay: Some(n2.ws_url()),
        lan: None,
        secret: random_bytes::<32>(),
        expires_at: unix_now() + 300,
    };
    let (request, _) = pairing::request(&offer, &tablet, "tablet").unwrap();
    let body = serde_json::to_string(&request).unwrap();
    let path = format!("/v1/bridges/{bridge_id}/pair");

    // Postgres frozen for 10 s while the bridge streams to the device across nodes.
    pg.pause();
    let paused = std::time::Instant::now();
    let mut forwarded = 0;
    let mut refusal = None;
    while paused.elapsed() < Duration::from_secs(10) {
        forwarded += stream(&mut bridge, &mut phone_ws, conn, "s1", 5, 4).await;
        if refusal.is_none() && paused.elapsed() > Duration::from_secs(8) {
            // By now every node's writer found the database unavailable.
            refusal = Some(http(n2.addr(), "POST", &path, Some(&body)).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pg.resume();
    let (code, answer) = refusal.expect("a pairing was tried while the database was frozen");
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("pairing is paused: the relay's database (postgres://127.0.0.1:"), "{answer}");
    eprintln!(
        "cluster: {forwarded} blocks crossed nodes in order during a 10 s database freeze; pairing meanwhile: {code} {answer}"
    );

    // After SIGCONT, a pairing through node 2 reaches the bridge on node 1 again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let addr = n2.addr();
    loop {
        let post = tokio::spawn({
            let (path, body) = (path.clone(), body.clone());
            async move { http(addr, "POST", &path, Some(&body)).await }
        });
        let got = tokio::time::timeout(Duration::from_secs(4), async {
            loop {
                if let RelayFrame::PairRequest(f) = bridge.recv().await {
                    return f;
                }
            }
        })
        .await;
        if let Ok(f) = got {
            assert_eq!(f.request, request);
            post.abort();
            break;
        }
        let (code, answer) = post.await.unwrap();
        assert_eq!(code, 503, "{answer}");
        assert!(tokio::time::Instant::now() < deadline, "pairing still refused after SIGCONT: {answer}");
    }
    forwarded = stream(&mut bridge, &mut phone_ws, conn, "s1", 2, 2).await;
    assert_eq!(forwarded, 4);
    n1.shutdown().await;
    n2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_gracefully_announces_its_bridges_leaving_and_other_nodes_close_their_links() {
    let (_pg, _nats, _dirs, [n1, n2]) = cluster().await;
    let [bridge_key, phone] = std::array::from_fn(|_| Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let mut bridge =
        FakeBridge::connect(&n1, &bridge_key, vec![device_record(&phone, "phone", false)], sessions(&["s1"])).await;
    let (mut phone_ws, _) = online_device(&n2, &bridge_id, &phone).await;
    link(&mut bridge, &mut phone_ws, &phone).await;
    n1.shutdown().await;
    let (_, close) = until_closed(&mut phone_ws).await;
    assert_eq!(close, Some(1012), "the link through the stopped node ends at once, to be opened again");
    let (_, status) = connect_device(&n2, &bridge_id, &phone).await;
    assert!(!status.bridge_online, "node 2 sees the bridge offline until it registers again");
    n2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_goes_silent_is_taken_for_dead_and_its_bridges_offline_elsewhere() {
    let (_pg, _nats, _dirs, [n1, n2]) = cluster().await;
    let [bridge_key, phone] = std::array::from_fn(|_| Identity::generate());
    let bridge_id = bridge_key.public().bridge_id();
    let bridge =
        FakeBridge::connect(&n1, &bridge_key, vec![device_record(&phone, "phone", false)], sessions(&["s1"])).await;
    // Connected to node 2, not linked (a link would be closed by node 1 as it drops).
    let (mut phone_ws, _) = online_device(&n2, &bridge_id, &phone).await;
    // Node 1 stops without a word (no announcement, no more heartbeats).
    let silent_at = std::time::Instant::now();
    drop(n1);
    let close = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match futures::StreamExt::next(&mut phone_ws).await {
                Some(Ok(tokio_tungstenite::tungstenite::Message::Close(frame))) => {
                    return frame.map(|f| u16::from(f.code));
                }
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("node 2 notices the silence");
    assert_eq!(close, Some(1012));
    eprintln!(
        "cluster: a silent node's bridge taken offline elsewhere after {:.1} s",
        silent_at.elapsed().as_secs_f64()
    );
    let (_, status) = connect_device(&n2, &bridge_id, &phone).await;
    assert!(!status.bridge_online);
    drop(bridge);
    n2.shutdown().await;
}
