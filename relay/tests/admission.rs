//! Admission control per relay process: a herd of reconnecting devices is paced with a
//! jittered `Retry-After` and every one gets in; the last connection slots are kept for
//! peers the relay knows.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::*;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{RelayErrorCode, RelayFrame};
use tokio_tungstenite::tungstenite;

const HERD: usize = 250;

#[tokio::test]
async fn a_herd_of_reconnecting_devices_is_paced_with_retry_after_and_all_get_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    (cfg.admissions_per_sec, cfg.admission_burst) = (100, 50);
    cfg.admission_retry_spread = Duration::from_secs(2);
    cfg.max_connections_per_ip = 4 * HERD;
    (cfg.max_unauthenticated, cfg.max_unauthenticated_per_ip) = (4 * HERD, 4 * HERD);
    let relay = start(cfg).await;
    let devices: Vec<Identity> = (0..HERD).map(|_| Identity::generate()).collect();
    let records = devices.iter().enumerate().map(|(i, d)| device_record(d, &format!("d{i}"), false)).collect();
    let bridge = FakeBridge::connect(&relay, &Identity::generate(), records, vec![]).await;
    let bridge_id = bridge.id();

    let (refused, longest_wait) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicU64::new(0)));
    let url = format!("{}/v1/client", relay.ws_url());
    let started = Instant::now();
    let herd = devices.into_iter().map(|device| {
        let (url, bridge_id, refused, longest_wait) =
            (url.clone(), bridge_id.clone(), Arc::clone(&refused), Arc::clone(&longest_wait));
        tokio::spawn(async move {
            loop {
                match tokio_tungstenite::connect_async(url.as_str()).await {
                    Ok((ws, _)) => {
                        let (ws, first) = authenticate(ws, &bridge_id, &device).await;
                        assert!(matches!(first, RelayFrame::RelayStatus(_)), "{first:?}");
                        return ws;
                    }
                    Err(tungstenite::Error::Http(response)) if response.status() == 503 => {
                        let secs: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
                        assert!((1..=2).contains(&secs), "Retry-After {secs} within the configured spread");
                        refused.fetch_add(1, Ordering::Relaxed);
                        longest_wait.fetch_max(secs, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_secs(secs)).await;
                    }
                    Err(e) => panic!("connecting failed: {e}"),
                }
            }
        })
    });
    let bound = Duration::from_secs(30);
    let connected =
        tokio::time::timeout(bound, futures::future::join_all(herd)).await.expect("all in within the bound");
    let took = started.elapsed();
    assert_eq!(connected.into_iter().filter(Result::is_ok).count(), HERD);
    let refused = refused.load(Ordering::Relaxed);
    assert!(refused > 0, "a herd beyond the burst is paced");
    eprintln!(
        "admission: {HERD} devices at once (100/s, burst 50): {refused} upgrades refused with Retry-After <= {} s, \
         all in after {:.1} s (bound {} s)",
        longest_wait.load(Ordering::Relaxed),
        took.as_secs_f64(),
        bound.as_secs()
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn the_last_connection_slots_are_kept_for_known_peers() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.max_connections = 20; // a reserve of 2 (a tenth)
    let relay = start(cfg).await;
    let devices: Vec<Identity> = (0..18).map(|_| Identity::generate()).collect();
    let records = devices.iter().enumerate().map(|(i, d)| device_record(d, &format!("d{i}"), false)).collect();
    let bridge = FakeBridge::connect(&relay, &Identity::generate(), records, vec![]).await;
    let mut open = Vec::new();
    for device in &devices[..17] {
        open.push(connect_device(&relay, &bridge.id(), device).await.0);
    }
    // 18 connections (the bridge and 17 devices): the reserve is reached.
    let mut newcomer = open_ws(&relay).await;
    let nonce = challenge(&mut newcomer).await;
    send(&mut newcomer, &RelayFrame::Register(register(&Identity::generate(), &nonce, vec![], vec![]))).await;
    let message = expect_error(&mut newcomer, RelayErrorCode::TooManyConnections).await;
    assert!(message.contains("keeps its last 2 connections for reconnecting peers"), "{message}");
    drop(newcomer);
    let (code, body) = http(relay.addr(), "POST", &format!("/v1/bridges/{}/pair", bridge.id()), Some("{}")).await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("keeps its last connections for reconnecting peers; retry after"), "{body}");
    // A paired device still gets in.
    let (_ws, status) = connect_device(&relay, &bridge.id(), &devices[17]).await;
    assert!(status.bridge_online);
    relay.shutdown().await;
}

async fn open_ws(relay: &terminull_relay::RunningRelay) -> Ws {
    open(relay, "/v1/bridge").await
}
