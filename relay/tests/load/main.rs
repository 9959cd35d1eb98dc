//! A bounded load test: oversized messages, malformed frames, floods, connections that
//! never answer the challenge or never read, and connections beyond the relay's limits,
//! all against one relay at once, while a healthy device keeps doing round trips through
//! a bridge and hundreds of idle devices stay connected.
//!
//! The relay must end every attacking connection with the refusal the protocol names for
//! it, and keep serving everyone else: no round trip of the healthy device is lost,
//! duplicated or misrouted, every idle connection still answers at the end, and
//! `/healthz` still says ok.
//!
//! Nothing here asserts on time, and nothing is ordered by time: the relay is filled to its
//! connection limit before the probes that must be refused, half the attackers strike
//! together when the healthy device starts and the rest are released by its progress
//! (round trips completed), and the bridge paces its pushes the same way. Timeouts are
//! hang guards only; the one delay (the healthy device's pause between round trips) keeps
//! it under its rate limit by construction. The figures are printed on one
//! `load summary:` line (`cargo test -p terminull-relay --test load -- --nocapture`).

#[path = "../support/mod.rs"]
mod support;

mod attacks;
mod bridge_side;
mod healthy;
mod idle;
mod wire;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use attacks::*;
use bridge_side::*;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, Stream, StreamExt as _};
use healthy::*;
use idle::*;
use support::*;
use terminull_protocol::crypto::channel::{Opener, Sealer};
use terminull_protocol::crypto::envelope::{open_block, open_control, seal_block, seal_control, sign_batch};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::{b64, b64url, from_b64url};
use terminull_protocol::relay::{DeviceRecord, LinkAccept, LinkHello, RelayErrorCode, RelayFrame};
use terminull_protocol::{BridgeId, DeviceId, SessionId};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::{self, Message};
use wire::{drain, next_event, next_frame, open_admitted, open_bridge_socket, read_challenge, register_bridge};

/// Devices that only hold connections, each as many as a device may.
const IDLE_DEVICES: usize = 40;
/// `max_connections_per_device`.
const CONNECTIONS_PER_DEVICE: usize = 8;
const IDLE_CONNECTIONS: usize = IDLE_DEVICES * CONNECTIONS_PER_DEVICE;

/// Attackers of each kind. Those "after auth" authenticate as devices of the bridge first.
const OVERSIZED_BEFORE_AUTH: usize = 15;
const OVERSIZED_AFTER_AUTH: usize = 15;
const MALFORMED_BEFORE_AUTH: usize = 15;
const MALFORMED_AFTER_AUTH: usize = 15;
const FLOOD: usize = 20;
const SILENT: usize = 20;
const SLOW: usize = 4;
const OVER_DEVICE_LIMIT: usize = 20;
const OVER_CONNECTION_LIMIT: usize = 20;
/// The attackers connected before the wave: with the bridge, the healthy device and the
/// idle connections they fill the relay exactly to `max_connections`.
const AUTHENTICATED_ATTACKERS: usize = OVERSIZED_AFTER_AUTH + MALFORMED_AFTER_AUTH + FLOOD + SLOW;
const MAX_CONNECTIONS: usize = 2 + IDLE_CONNECTIONS + AUTHENTICATED_ATTACKERS;

/// The relay's bounds for this test: small, so that every attack ends quickly.
const MAX_MESSAGE_BYTES: usize = 128 * 1024;
const CLIENT_RATE: u32 = 200;
const CLIENT_BURST: u32 = 32;
const RATE_LIMITED_BUDGET: u32 = 16;
const MALFORMED_BUDGET: u32 = 8;
/// Room for every `error` a flooding or malformed connection earns, so that those end by
/// their own rule and never as slow consumers, however the relay's tasks are scheduled.
const CLIENT_QUEUE: usize = 20;

/// Round trips the healthy device completes at least; it goes on until the attack is over.
const MIN_ROUND_TRIPS: u64 = 200;
/// Half the attackers strike at once when the healthy device starts; the others start one
/// by one as it completes its round trips, up to this one.
const SPREAD_UNTIL: u64 = 180;
/// The healthy device waits this long after each answer before asking again: the relay
/// sees at most 125 of its frames a second, under [`CLIENT_RATE`], so the rate limit never
/// drops one of them.
const PACE: Duration = Duration::from_millis(8);
/// A hang guard, never an expectation.
const HANG: Duration = Duration::from_secs(60);

const HEALTHY_SESSION: &str = "healthy";
const SLOW_SESSION: &str = "slow";
const HEALTHY_CONTROL_KEY: [u8; 32] = [0x11; 32];
const HEALTHY_BLOCK_KEY: [u8; 32] = [0x22; 32];
const SLOW_BLOCK_KEY: [u8; 32] = [0x33; 32];
const SERVER_TS: f64 = 1_767_225_611.25;
/// Content bytes of each block pushed to a slow consumer.
const SLOW_BLOCK_BYTES: usize = 80 * 1024;
/// Blocks the bridge pushes to slow consumers per healthy round trip.
const PUSH_PER_ROUND: usize = 4;

// What makes each outcome certain rather than likely.
const _: () = {
    // The healthy device stays under its rate limit.
    assert!(1000 / PACE.as_millis() < CLIENT_RATE as u128);
    // Malformed text frames are refused as malformed, never dropped by the rate limit.
    assert!(MALFORMED_BUDGET < CLIENT_BURST);
    // The `error` frames a flooding or malformed connection earns fit in its queue.
    assert!(CLIENT_QUEUE >= RATE_LIMITED_BUDGET as usize && CLIENT_QUEUE >= MALFORMED_BUDGET as usize);
    // A pushed block (base64 content plus the envelope) is within the message limit.
    assert!(SLOW_BLOCK_BYTES * 4 / 3 + 4096 < MAX_MESSAGE_BYTES);
};

fn load_config(dir: &std::path::Path) -> terminull_relay::RelayConfig {
    let mut c = config(dir);
    c.max_message_bytes = MAX_MESSAGE_BYTES;
    c.client_queue_frames = CLIENT_QUEUE;
    c.client_frames_per_sec = CLIENT_RATE;
    c.client_frames_burst = CLIENT_BURST;
    c.max_rate_limited_frames = RATE_LIMITED_BUDGET;
    c.max_malformed_frames = MALFORMED_BUDGET;
    c.max_connections_per_device = CONNECTIONS_PER_DEVICE;
    c.max_connections = MAX_CONNECTIONS;
    // Every simulated peer comes from 127.0.0.1: the per-address bounds (pinned by
    // attack_relay.rs) would otherwise refuse most of them.
    c.max_connections_per_ip = 4 * MAX_CONNECTIONS;
    c.max_unauthenticated_per_ip = c.max_unauthenticated;
    // A slow consumer reads its final `error` only once the bridge has heard of the cut;
    // the relay must still be trying to deliver it then. Every other peer answers the
    // relay's close (or drops the socket) at once, so this costs no time. The challenge
    // must be answered within `config`'s 2 s.
    c.close_timeout = Duration::from_secs(15);
    c
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Attack {
    OversizedBeforeAuth,
    OversizedAfterAuth,
    MalformedBeforeAuth,
    MalformedAfterAuth,
    Flood,
    Silent,
    SlowConsumer,
    OverDeviceLimit,
    OverConnectionLimit,
}

/// What one attacking connection got from the relay.
#[derive(Debug, Default)]
struct Drained {
    /// The `error` frames, in order.
    errors: Vec<(RelayErrorCode, String)>,
    /// The types of the other frames.
    frames: Vec<&'static str>,
    /// The close code, when the relay sent a close frame.
    close: Option<u16>,
}

#[derive(Debug)]
struct Outcome {
    attack: Attack,
    drained: Drained,
    /// The status of a refused upgrade.
    http_status: Option<u16>,
    /// Upgrades refused with 503 (the relay was full) before this one was admitted.
    retried_503: usize,
}

impl Outcome {
    fn codes(&self) -> Vec<RelayErrorCode> {
        self.drained.errors.iter().map(|(code, _)| *code).collect()
    }

    /// How the relay refused it: the last `error` code and the close code, or the HTTP status.
    fn refusal(&self) -> String {
        if let Some(status) = self.http_status {
            return format!("http_{status}");
        }
        let code = self.drained.errors.last().map_or("none".to_owned(), |(code, _)| code_name(*code));
        format!("{code}/{}", self.drained.close.map_or("no_close".to_owned(), |c| c.to_string()))
    }

    /// Whether it ended as this attack must.
    fn is_expected(&self) -> bool {
        use RelayErrorCode as C;
        let codes = self.codes();
        let only = |code: C| !codes.is_empty() && codes.iter().all(|c| *c == code);
        let no_frames = self.drained.frames.is_empty();
        let close = self.drained.close;
        match self.attack {
            Attack::OversizedBeforeAuth | Attack::OversizedAfterAuth => {
                codes == [C::TooLarge] && close == Some(1009) && no_frames
            }
            Attack::MalformedBeforeAuth | Attack::MalformedAfterAuth => {
                only(C::BadFrame) && codes.len() == MALFORMED_BUDGET as usize && close == Some(1008) && no_frames
            }
            // Each dropped frame is answered, and the last drop closes; frames within
            // the limit reach the bridge.
            Attack::Flood => {
                only(C::RateLimited) && codes.len() >= RATE_LIMITED_BUDGET as usize && close == Some(1008) && no_frames
            }
            Attack::Silent => {
                codes == [C::BadFrame]
                    && self.drained.errors[0].1.contains("no answer to the challenge")
                    && close == Some(1008)
                    && no_frames
            }
            // What it was sent before the cut, then the cut.
            Attack::SlowConsumer => {
                codes == [C::SlowConsumer]
                    && close == Some(1013)
                    && self.drained.frames.iter().all(|f| *f == "block" || *f == "relay_status")
            }
            Attack::OverDeviceLimit => codes == [C::TooManyConnections] && close == Some(1013) && no_frames,
            Attack::OverConnectionLimit => self.http_status == Some(503),
        }
    }
}

fn code_name(code: RelayErrorCode) -> String {
    serde_json::to_value(code).unwrap().as_str().unwrap().to_owned()
}

/// `count` fresh device identities.
fn identities(count: usize) -> Vec<Identity> {
    (0..count).map(|_| Identity::generate()).collect()
}

fn records(devices: &[Identity], name: &str) -> Vec<DeviceRecord> {
    devices.iter().enumerate().map(|(i, d)| device_record(d, &format!("{name}-{i}"), false)).collect()
}

/// The `p`-quantile (nearest rank) of sorted `values`.
fn quantile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_oversized_and_flooding_connections_leave_the_relay_serving_everyone_else() {
    tokio::time::timeout(Duration::from_secs(180), load()).await.expect("hang guard: the load test finishes");
}

async fn load() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let relay = start(load_config(dir.path())).await;
    let ws_url = relay.ws_url();

    // ----- setup: a bridge, its devices, a healthy link, idle connections -----
    let bridge_key = Identity::generate();
    let healthy_device = Identity::generate();
    let idle_devices = identities(IDLE_DEVICES);
    let oversized_devices = identities(OVERSIZED_AFTER_AUTH);
    let malformed_devices = identities(MALFORMED_AFTER_AUTH);
    let flood_devices = identities(FLOOD);
    let slow_devices = identities(SLOW);
    let mut devices = vec![device_record(&healthy_device, "healthy", false)];
    devices.extend(records(&idle_devices, "idle"));
    devices.extend(records(&oversized_devices, "oversized"));
    devices.extend(records(&malformed_devices, "malformed"));
    devices.extend(records(&flood_devices, "flood"));
    devices.extend(records(&slow_devices, "slow"));
    let mut bridge_ws = open_bridge_socket(&relay).await;
    register_bridge(&mut bridge_ws, &bridge_key, devices.clone()).await;
    let bridge_id = bridge_key.public().bridge_id();

    let (mut healthy_ws, status) = connect_device(&relay, &bridge_id, &healthy_device).await;
    assert!(status.bridge_online);
    send(&mut healthy_ws, &link_hello(&healthy_device)).await;
    let healthy_conn = match next_frame(&mut bridge_ws).await {
        RelayFrame::LinkHello(h) => h.conn.expect("the relay sets conn"),
        other => panic!("expected link_hello, got {other:?}"),
    };
    let accept = LinkAccept {
        device_id: healthy_device.public().device_id(),
        bridge_nonce: "bg".into(),
        bridge_ephemeral: "ZXBo".into(),
        sig: b64(&[0; 64]),
        conn: Some(healthy_conn),
    };
    send(&mut bridge_ws, &RelayFrame::LinkAccept(accept)).await;
    assert!(matches!(recv(&mut healthy_ws).await, RelayFrame::LinkAccept(_)));

    let (idle_events_tx, mut idle_events) = mpsc::unbounded_channel();
    let idle: Vec<(usize, Ws, Identity)> = futures::stream::iter(0..IDLE_CONNECTIONS)
        .map(|index| {
            let (relay, bridge_id) = (&relay, &bridge_id);
            let device = idle_devices[index / CONNECTIONS_PER_DEVICE].clone();
            async move {
                let (ws, status) = connect_device(relay, bridge_id, &device).await;
                assert!(status.bridge_online);
                (index, ws, device)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let idle_tasks: Vec<_> = idle
        .into_iter()
        .map(|(index, ws, device)| tokio::spawn(idle_connection(index, ws, device, idle_events_tx.clone())))
        .collect();

    // The attackers that authenticate first.
    let mut slow_starts = HashMap::new();
    let mut armed = HashMap::new();
    let groups = [
        (Attack::OversizedAfterAuth, &oversized_devices),
        (Attack::MalformedAfterAuth, &malformed_devices),
        (Attack::Flood, &flood_devices),
        (Attack::SlowConsumer, &slow_devices),
    ];
    for (attack, group) in groups {
        for (index, device) in group.iter().enumerate() {
            let (ws, start) = if attack == Attack::SlowConsumer {
                // A receive buffer as small as the kernel allows: the relay backs up fast.
                let socket = open_with_small_receive_buffer(&relay, "/v1/client").await;
                let (ws, first) = authenticate(socket, &bridge_id, device).await;
                assert!(matches!(first, RelayFrame::RelayStatus(_)), "{first:?}");
                let (start_tx, start_rx) = oneshot::channel();
                slow_starts.insert(device.public().device_id(), start_tx);
                (ws, Some(start_rx))
            } else {
                (connect_device(&relay, &bridge_id, device).await.0, None)
            };
            armed.insert((attack, index), (ws, device.clone(), start));
        }
    }
    let setup_done = started.elapsed();

    // ----- the bridge goes asynchronous: a reader, a writer, a pusher -----
    let (bridge_sink, bridge_stream) = bridge_ws.split();
    let (answers_tx, answers_rx) = mpsc::unbounded_channel();
    let (bulk_tx, bulk_rx) = mpsc::channel(1);
    let (new_slow_tx, new_slow_rx) = mpsc::unbounded_channel();
    let closed = Arc::new(Mutex::new(HashSet::new()));
    let side = BridgeSide {
        bridge: bridge_key.clone(),
        healthy_conn,
        healthy_device: healthy_device.public().device_id(),
        flood_devices: flood_devices.iter().map(|d| d.public().device_id()).collect(),
        slow_starts,
        new_slow: new_slow_tx,
        closed: Arc::clone(&closed),
        answers: answers_tx,
    };
    let reader = tokio::spawn(bridge_reader(bridge_stream, side));
    let writer = tokio::spawn(bridge_writer(bridge_sink, answers_rx, bulk_rx));
    let (progress_tx, progress) = watch::channel(0);
    let pusher = tokio::spawn(pusher(bridge_key.clone(), new_slow_rx, Arc::clone(&closed), bulk_tx, progress.clone()));

    // ----- the relay is exactly full: every further upgrade is refused -----
    let probes = futures::future::join_all((0..OVER_CONNECTION_LIMIT).map(|_| over_connection_limit(ws_url.clone())));
    let mut outcomes = probes.await;

    // ----- the healthy device starts its round trips, and the attack with it -----
    let wave_started = Instant::now();
    let (active, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let attack_over = Arc::new(AtomicBool::new(false));
    let healthy = tokio::spawn(healthy_round_trips(
        healthy_ws,
        healthy_device.clone(),
        bridge_id.clone(),
        progress_tx,
        Arc::clone(&active),
        Arc::clone(&attack_over),
    ));
    let mut attackers = Vec::new();
    for (attack, index, due) in schedule() {
        let (progress, active, peak) = (progress.clone(), Arc::clone(&active), Arc::clone(&peak));
        let task = match armed.remove(&(attack, index)) {
            Some((ws, device, start)) => {
                let attack = attack_after_auth(attack, index, ws, device, start);
                tokio::spawn(when_due(due, progress, active, peak, attack))
            }
            None => {
                let full_device = idle_devices[0].clone();
                let attack = attack_before_auth(attack, index, ws_url.clone(), bridge_id.clone(), full_device);
                tokio::spawn(when_due(due, progress, active, peak, attack))
            }
        };
        attackers.push(task);
    }
    assert!(armed.is_empty(), "every authenticated attacker has its turn");
    for attacker in attackers {
        outcomes.push(attacker.await.expect("an attacker task"));
    }
    attack_over.store(true, Ordering::SeqCst);
    let wave = wave_started.elapsed();
    let healthy = healthy.await.expect("the healthy device");
    let pushed = pusher.await.expect("the pusher");

    // Nothing reached an idle connection, and none was closed.
    if let Ok((index, event)) = idle_events.try_recv() {
        panic!("idle connection {index} during the attack: {event:?}");
    }

    // ----- the bridge registers again: every idle connection hears of it and answers -----
    let (mut new_bridge, bridge_retried_503) = open_admitted(&format!("{ws_url}/v1/bridge")).await;
    register_bridge(&mut new_bridge, &bridge_key, devices.clone()).await;
    let log = reader.await.expect("the bridge reader");
    writer.await.expect("the bridge writer");
    let idle_ids: HashSet<DeviceId> = idle_devices.iter().map(|d| d.public().device_id()).collect();
    let mut answered = HashSet::new();
    let mut late_conn_closed = 0;
    while answered.len() < IDLE_CONNECTIONS {
        match next_frame(&mut new_bridge).await {
            RelayFrame::LinkHello(h) if idle_ids.contains(&h.device_id) => {
                let conn = h.conn.expect("the relay sets conn");
                assert!(answered.insert(conn), "two link_hellos from connection {conn}");
                let accept = LinkAccept {
                    device_id: h.device_id,
                    bridge_nonce: h.client_nonce,
                    bridge_ephemeral: h.client_ephemeral,
                    sig: h.sig,
                    conn: Some(conn),
                };
                send(&mut new_bridge, &RelayFrame::LinkAccept(accept)).await;
            }
            // An attacker's connection whose end the relay reported only after the
            // re-registration (the idle connections all stay open).
            RelayFrame::ConnClosed(_) => late_conn_closed += 1,
            other => panic!("the re-registered bridge got {other:?}"),
        }
    }
    let mut idle_state: HashMap<usize, Vec<Idle>> = HashMap::new();
    let mut accepted = 0;
    while accepted < IDLE_CONNECTIONS {
        let (index, event) =
            tokio::time::timeout(HANG, idle_events.recv()).await.expect("hang guard: idle answers").unwrap();
        match event {
            Idle::Accepted => accepted += 1,
            Idle::Status => {}
            Idle::Wrong(frame) => panic!("idle connection {index} got {frame}"),
            Idle::Closed(code) => panic!("idle connection {index} was closed ({code:?})"),
        }
        idle_state.entry(index).or_default().push(event);
    }
    let mut still_open = Vec::new();
    for task in idle_tasks {
        still_open.extend(task.await.expect("an idle connection"));
    }
    let mut healthy_ws = healthy.ws;
    match next_frame(&mut healthy_ws).await {
        RelayFrame::RelayStatus(s) => assert!(s.bridge_online),
        other => panic!("the healthy device expected relay_status, got {other:?}"),
    }
    let (health, body) = http(relay.addr(), "GET", "/healthz", None).await;

    // ----- figures -----
    let mut opened: BTreeMap<String, usize> = BTreeMap::new();
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for outcome in &outcomes {
        *opened.entry(format!("{:?}", outcome.attack)).or_default() += 1;
        *refusals.entry(outcome.refusal()).or_default() += 1;
    }
    let retried_503: usize = outcomes.iter().map(|o| o.retried_503).sum();
    let slow_received: usize =
        outcomes.iter().filter(|o| o.attack == Attack::SlowConsumer).map(|o| o.drained.frames.len()).sum();
    let mut sorted = healthy.latencies.clone();
    sorted.sort();
    eprintln!(
        "load summary: connections opened: idle={IDLE_CONNECTIONS} healthy=1 bridge=2 attackers={} {opened:?} \
         (+{retried_503} attacker and {bridge_retried_503} bridge upgrades refused 503 and retried while the \
         relay was full); refusals by code/close: {refusals:?}; healthy round trips={} ({} started while \
         attackers were at work, at most {} at once) p50={:.1?} p99={:.1?} max={:.1?}; idle answering at the \
         end={}/{IDLE_CONNECTIONS}; flood link_hellos forwarded={}; blocks pushed to slow consumers={pushed} \
         (frames they read after the cut={slow_received}); conn_closed to bridge={}+{late_conn_closed}; \
         setup={:.1?} wave={wave:.1?} total={:.1?}",
        outcomes.len(),
        sorted.len(),
        healthy.during_attack,
        peak.load(Ordering::SeqCst),
        quantile(&sorted, 0.50),
        quantile(&sorted, 0.99),
        sorted.last().copied().unwrap_or_default(),
        answered.len(),
        log.flood_hellos,
        log.conn_closed,
        setup_done,
        started.elapsed(),
    );

    // ----- the verdict -----
    let wrong: Vec<&Outcome> = outcomes.iter().filter(|o| !o.is_expected()).collect();
    assert!(wrong.is_empty(), "{} attackers did not end as they must: {wrong:#?}", wrong.len());
    let expected_attackers = OVERSIZED_BEFORE_AUTH
        + OVERSIZED_AFTER_AUTH
        + MALFORMED_BEFORE_AUTH
        + MALFORMED_AFTER_AUTH
        + FLOOD
        + SILENT
        + SLOW
        + OVER_DEVICE_LIMIT
        + OVER_CONNECTION_LIMIT;
    assert_eq!(outcomes.len(), expected_attackers);
    assert!(log.unexpected.is_empty(), "the bridge got unexpected frames: {:#?}", log.unexpected);
    assert_eq!(log.close, Some(1001), "the old bridge connection is replaced by the new one");
    assert!(healthy.latencies.len() as u64 >= MIN_ROUND_TRIPS);
    assert_eq!(log.round_trips, healthy.latencies.len() as u64, "every request reached the bridge exactly once");
    assert_eq!((answered.len(), still_open.len()), (IDLE_CONNECTIONS, IDLE_CONNECTIONS));
    for index in 0..IDLE_CONNECTIONS {
        let events = idle_state.get(&index).map(Vec::as_slice).unwrap_or_default();
        assert!(matches!(events, [Idle::Status, Idle::Accepted]), "idle connection {index}: {events:?}");
    }
    assert_eq!((health, body.as_str()), (200, "ok"), "the relay still serves HTTP");
    relay.shutdown().await;
}
