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

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, Stream, StreamExt as _};
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

// ----- reading and connecting -----

/// The next frame or close (with the close code, when the relay sent one), skipping
/// pings; with `guard`, panics after [`HANG`].
async fn next_event<S>(stream: &mut S, guard: bool) -> Event
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    loop {
        let message = if guard {
            tokio::time::timeout(HANG, stream.next()).await.expect("hang guard: nothing arrived")
        } else {
            stream.next().await
        };
        if let Some(event) = event_of(message) {
            return event;
        }
    }
}

/// The next frame; panics on close.
async fn next_frame(ws: &mut Ws) -> RelayFrame {
    match next_event(ws, true).await {
        Event::Frame(frame) => frame,
        Event::Closed(close) => panic!("expected a frame, the connection closed ({close:?})"),
    }
}

/// Reads until the relay closes the connection.
async fn drain<S>(stream: &mut S) -> Drained
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    let mut drained = Drained::default();
    loop {
        match next_event(stream, true).await {
            Event::Frame(RelayFrame::Error(e)) => drained.errors.push((e.code, e.message)),
            Event::Frame(other) => drained.frames.push(other.frame_type()),
            Event::Closed(close) => {
                drained.close = close.map(|(code, _)| code);
                return drained;
            }
        }
    }
}

/// Opens a WebSocket, retrying while the relay refuses the upgrade for being at its
/// connection limit; returns it and how many upgrades were refused.
async fn open_admitted(url: &str) -> (Ws, usize) {
    let mut refused = 0;
    loop {
        match tokio_tungstenite::connect_async(url).await {
            Ok((ws, _)) => return (ws, refused),
            Err(tungstenite::Error::Http(response)) if response.status() == 503 => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("connecting to {url}: {e}"),
        }
    }
}

/// Opens `/v1/bridge` over a socket with a small send buffer, so that what the bridge has
/// written but the relay not yet read stays small (the bridge's writer puts answers ahead
/// of pushed blocks; a large kernel buffer would queue megabytes of blocks before them).
async fn open_bridge_socket(relay: &terminull_relay::RunningRelay) -> Ws {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(64 * 1024).unwrap();
    let stream = socket.connect(relay.addr()).await.unwrap();
    let url = format!("{}/v1/bridge", relay.ws_url());
    let (ws, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream)).await.expect("websocket opens");
    ws
}

/// Answers the challenge on a bridge connection with `register`.
async fn register_bridge(ws: &mut Ws, bridge: &Identity, devices: Vec<DeviceRecord>) {
    let nonce = read_challenge(ws).await;
    send(ws, &RelayFrame::Register(register(bridge, &nonce, devices, vec![]))).await;
    match next_frame(ws).await {
        RelayFrame::Registered(r) => assert_eq!(r.bridge_id, bridge.public().bridge_id()),
        other => panic!("expected registered, got {other:?}"),
    }
}

/// Reads the challenge nonce.
async fn read_challenge(ws: &mut Ws) -> Vec<u8> {
    match next_frame(ws).await {
        RelayFrame::Challenge(c) => from_b64url("nonce", &c.nonce).unwrap(),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

// ----- the attacks -----

/// A message just larger than the relay accepts, text or binary.
fn oversized_message(binary: bool) -> Message {
    let size = MAX_MESSAGE_BYTES + 1024;
    if binary {
        Message::binary(vec![0xa5; size])
    } else {
        let pad = "x".repeat(size);
        Message::text(format!(r#"{{"type":"link_hello","pad":"{pad}"}}"#))
    }
}

/// Malformed message number `n`: binary, not JSON, truncated JSON, and (when `wrong_type`)
/// a well-formed frame a client may not send.
fn malformed_message(n: usize, wrong_type: bool) -> Message {
    match n % if wrong_type { 4 } else { 3 } {
        0 => Message::binary(vec![0xde, 0xad, 0xbe, 0xef]),
        1 => Message::text(format!("not json {n}")),
        2 => Message::text(r#"{"type":"link_hello","device_id":"#.to_owned()),
        _ => Message::text(r#"{"type":"registered","bridge_id":"brg_aaaaaaaaaaaaaaaa"}"#.to_owned()),
    }
}

/// Sends `next(n)` over and over while reading, until the relay closes the connection.
async fn keep_sending(ws: Ws, mut next: impl FnMut(usize) -> Message) -> Drained {
    let (mut sink, mut stream) = ws.split();
    let mut drained = Drained::default();
    let (mut sent, mut sending) = (0, true);
    loop {
        tokio::select! {
            biased;
            event = next_event(&mut stream, true) => match event {
                Event::Frame(RelayFrame::Error(e)) => drained.errors.push((e.code, e.message)),
                Event::Frame(other) => drained.frames.push(other.frame_type()),
                Event::Closed(close) => {
                    drained.close = close.map(|(code, _)| code);
                    return drained;
                }
            },
            // Sends fail once the relay has dropped the socket.
            result = sink.send(next(sent)), if sending => {
                sent += 1;
                sending = result.is_ok();
            }
        }
    }
}

/// Each attacker (its kind and index within the kind) and the healthy round trip it waits
/// for: the even ones strike together at once, the odd ones one after another over the
/// round trips up to [`SPREAD_UNTIL`], the kinds interleaved.
fn schedule() -> Vec<(Attack, usize, u64)> {
    let kinds = [
        (Attack::OversizedBeforeAuth, OVERSIZED_BEFORE_AUTH),
        (Attack::OversizedAfterAuth, OVERSIZED_AFTER_AUTH),
        (Attack::MalformedBeforeAuth, MALFORMED_BEFORE_AUTH),
        (Attack::MalformedAfterAuth, MALFORMED_AFTER_AUTH),
        (Attack::Flood, FLOOD),
        (Attack::Silent, SILENT),
        (Attack::SlowConsumer, SLOW),
        (Attack::OverDeviceLimit, OVER_DEVICE_LIMIT),
    ];
    let most = kinds.iter().map(|(_, count)| *count).max().unwrap_or(0);
    let (mut plan, mut spread) = (Vec::new(), Vec::new());
    for index in 0..most {
        for (attack, count) in kinds {
            if index >= count {
                continue;
            }
            if index.is_multiple_of(2) {
                plan.push((attack, index, 0));
            } else {
                spread.push((attack, index));
            }
        }
    }
    let n = spread.len() as u64;
    plan.extend(spread.into_iter().zip(1..).map(|((attack, index), j)| (attack, index, j * SPREAD_UNTIL / n)));
    plan
}

/// Runs `attack` once the healthy device has completed `due` round trips, counted in
/// `active` meanwhile.
async fn when_due(
    due: u64,
    mut progress: watch::Receiver<u64>,
    active: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    attack: impl Future<Output = Outcome>,
) -> Outcome {
    progress.wait_for(|done| *done >= due).await.expect("the healthy device keeps going");
    peak.fetch_max(active.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
    let outcome = attack.await;
    active.fetch_sub(1, Ordering::SeqCst);
    outcome
}

/// An attacker that authenticated during setup.
async fn attack_after_auth(
    attack: Attack,
    index: usize,
    mut ws: Ws,
    device: Identity,
    slow_start: Option<oneshot::Receiver<()>>,
) -> Outcome {
    let drained = match attack {
        Attack::OversizedAfterAuth => {
            // The relay may close before the whole message is written.
            let _ = ws.send(oversized_message(index % 2 == 1)).await;
            drain(&mut ws).await
        }
        Attack::MalformedAfterAuth => keep_sending(ws, |n| malformed_message(n + index, true)).await,
        Attack::Flood => {
            let hello = serde_json::to_string(&link_hello(&device)).unwrap();
            keep_sending(ws, move |_| Message::text(hello.clone())).await
        }
        Attack::SlowConsumer => {
            // Opens a link so the bridge pushes blocks to it, then reads nothing until the
            // bridge has been told the connection is gone.
            send(&mut ws, &link_hello(&device)).await;
            let start = slow_start.expect("a slow consumer has a start signal");
            tokio::time::timeout(HANG, start).await.expect("hang guard: the slow consumer is cut off").unwrap();
            drain(&mut ws).await
        }
        other => unreachable!("{other:?} does not authenticate first"),
    };
    Outcome { attack, drained, http_status: None, retried_503: 0 }
}

/// An attacker that starts with a fresh connection.
async fn attack_before_auth(
    attack: Attack,
    index: usize,
    ws_url: String,
    bridge_id: BridgeId,
    full_device: Identity,
) -> Outcome {
    let (mut ws, retried_503) = open_admitted(&format!("{ws_url}/v1/client")).await;
    let nonce = read_challenge(&mut ws).await;
    let drained = match attack {
        Attack::OversizedBeforeAuth => {
            let _ = ws.send(oversized_message(index % 2 == 1)).await;
            drain(&mut ws).await
        }
        Attack::MalformedBeforeAuth => keep_sending(ws, |n| malformed_message(n + index, false)).await,
        Attack::Silent => drain(&mut ws).await,
        Attack::OverDeviceLimit => {
            // A device that already holds all the connections it may.
            send(&mut ws, &RelayFrame::Auth(auth(&full_device, &bridge_id, &nonce))).await;
            drain(&mut ws).await
        }
        other => unreachable!("{other:?} authenticates first"),
    };
    Outcome { attack, drained, http_status: None, retried_503 }
}

/// An upgrade while the relay is at its connection limit.
async fn over_connection_limit(ws_url: String) -> Outcome {
    let http_status = match tokio_tungstenite::connect_async(format!("{ws_url}/v1/client")).await {
        Ok(_) => None,
        Err(tungstenite::Error::Http(response)) => Some(response.status().as_u16()),
        Err(e) => panic!("upgrade failed without an HTTP answer: {e}"),
    };
    Outcome { attack: Attack::OverConnectionLimit, drained: Drained::default(), http_status, retried_503: 0 }
}

// ----- the healthy device -----

fn answer_text(round: u64) -> String {
    format!(r#"{{"type":"text","text":"round trip {round}"}}"#)
}

fn request_text(round: u64) -> String {
    format!(r#"{{"rt":{round}}}"#)
}

/// A `client_nonce` carrying the round trip's number.
fn round_nonce(round: u64) -> String {
    let mut bytes = [0x5a; 16];
    bytes[..8].copy_from_slice(&round.to_be_bytes());
    b64url(&bytes)
}

fn nonce_round(nonce: &str) -> Option<u64> {
    let bytes = from_b64url("client_nonce", nonce).ok()?;
    Some(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

struct Healthy {
    ws: Ws,
    latencies: Vec<Duration>,
    /// Round trips that started while at least one attacker was at work.
    during_attack: usize,
}

/// Round trips through the relay and the bridge, one at a time: even ones a signed
/// `control` answered by a sealed `block` (in a signed batch of one), odd ones a `link_hello` answered by a
/// `link_accept` echoing its nonce. Each answer must be the one for this request: blocks
/// open in counter order (none lost, duplicated or reordered) and carry the request's
/// number; accepts echo the request's nonce.
async fn healthy_round_trips(
    mut ws: Ws,
    device: Identity,
    bridge_id: BridgeId,
    progress: watch::Sender<u64>,
    active: Arc<AtomicUsize>,
    attack_over: Arc<AtomicBool>,
) -> Healthy {
    let mut sealer = Sealer::new(HEALTHY_CONTROL_KEY, "control");
    let mut opener = Opener::new(HEALTHY_BLOCK_KEY, "block");
    let (mut latencies, mut during_attack, mut status_seen) = (Vec::new(), 0, false);
    let mut round = 0u64;
    loop {
        let over = attack_over.load(Ordering::SeqCst);
        if over && round >= MIN_ROUND_TRIPS {
            break;
        }
        let attacked = active.load(Ordering::SeqCst) > 0;
        let started = Instant::now();
        if round.is_multiple_of(2) {
            let body = request_text(round);
            let control = seal_control(&mut sealer, &device, bridge_id.as_str(), None, None, body.as_bytes()).unwrap();
            send(&mut ws, &RelayFrame::Control(control)).await;
            let block = loop {
                match next_frame(&mut ws).await {
                    // The first block of the session brings its resume token first.
                    RelayFrame::RelayStatus(s) if !status_seen => {
                        status_seen = true;
                        assert!(s.resume_tokens.contains_key(&SessionId(HEALTHY_SESSION.into())), "{s:?}");
                    }
                    RelayFrame::Block(block) => break block,
                    other => panic!("round trip {round}: expected the block answering it, got {other:?}"),
                }
            };
            let json = open_block(&mut opener, &block)
                .unwrap_or_else(|e| panic!("round trip {round}: the answer does not open in order: {e}"));
            assert_eq!(String::from_utf8(json).unwrap(), answer_text(round), "round trip {round}: another answer");
        } else {
            let nonce = round_nonce(round);
            let hello = LinkHello {
                device_id: device.public().device_id(),
                client_nonce: nonce.clone(),
                client_ephemeral: nonce.clone(),
                sig: b64(&[0; 64]),
                conn: None,
            };
            send(&mut ws, &RelayFrame::LinkHello(hello)).await;
            match next_frame(&mut ws).await {
                RelayFrame::LinkAccept(a) => {
                    assert_eq!(a.bridge_nonce, nonce, "round trip {round}: the accept of another hello");
                    assert_eq!((a.device_id, a.conn), (device.public().device_id(), None), "round trip {round}");
                }
                other => panic!("round trip {round}: expected link_accept, got {other:?}"),
            }
        }
        latencies.push(started.elapsed());
        if attacked {
            during_attack += 1;
        }
        round += 1;
        progress.send_replace(round);
        tokio::time::sleep(PACE).await;
    }
    Healthy { ws, latencies, during_attack }
}

// ----- the bridge -----

/// What the bridge's reader needs.
struct BridgeSide {
    bridge: Identity,
    healthy_conn: u64,
    healthy_device: DeviceId,
    flood_devices: HashSet<DeviceId>,
    /// Fired when the bridge hears that a slow consumer's connection is gone.
    slow_starts: HashMap<DeviceId, oneshot::Sender<()>>,
    /// Connections of slow consumers, for the pusher.
    new_slow: mpsc::UnboundedSender<u64>,
    closed: Arc<Mutex<HashSet<u64>>>,
    /// Answers to the healthy device, written ahead of pushed blocks.
    answers: mpsc::UnboundedSender<String>,
}

#[derive(Debug, Default)]
struct BridgeLog {
    round_trips: u64,
    flood_hellos: usize,
    conn_closed: usize,
    unexpected: Vec<String>,
    close: Option<u16>,
}

/// Reads the bridge connection until the relay closes it: answers the healthy device,
/// hands slow consumers to the pusher, counts the rest. Anything else is unexpected.
async fn bridge_reader(mut stream: SplitStream<Ws>, mut side: BridgeSide) -> BridgeLog {
    let bridge_id = side.bridge.public().bridge_id();
    let mut log = BridgeLog::default();
    let mut opener = Opener::new(HEALTHY_CONTROL_KEY, "control");
    let mut sealer = Sealer::new(HEALTHY_BLOCK_KEY, "block");
    let mut slow_conns: HashMap<u64, DeviceId> = HashMap::new();
    loop {
        let frame = match next_event(&mut stream, false).await {
            Event::Frame(frame) => frame,
            Event::Closed(close) => {
                log.close = close.map(|(code, _)| code);
                return log;
            }
        };
        let healthy = frame.conn() == Some(side.healthy_conn);
        match frame {
            RelayFrame::Control(c) if healthy && c.device_id == side.healthy_device => {
                let round = log.round_trips;
                match open_control(&mut opener, bridge_id.as_str(), &c) {
                    Ok(body) if body == request_text(round).as_bytes() => {}
                    other => log.unexpected.push(format!("round trip {round}: control {other:?}")),
                }
                let session = SessionId(HEALTHY_SESSION.into());
                let answer = answer_text(round);
                let block = seal_block(&mut sealer, &session, "text", false, SERVER_TS, answer.as_bytes()).unwrap();
                let batch = sign_batch(&side.bridge, side.healthy_conn, vec![block]);
                side.answers.send(serde_json::to_string(&RelayFrame::Batch(batch)).unwrap()).unwrap();
                log.round_trips += 1;
            }
            RelayFrame::LinkHello(h) if healthy && h.device_id == side.healthy_device => {
                let round = log.round_trips;
                if nonce_round(&h.client_nonce) != Some(round) {
                    log.unexpected.push(format!("round trip {round}: link_hello {}", h.client_nonce));
                }
                let accept = LinkAccept {
                    device_id: h.device_id,
                    bridge_nonce: h.client_nonce,
                    bridge_ephemeral: h.client_ephemeral,
                    sig: b64(&[0; 64]),
                    conn: Some(side.healthy_conn),
                };
                side.answers.send(serde_json::to_string(&RelayFrame::LinkAccept(accept)).unwrap()).unwrap();
                log.round_trips += 1;
            }
            RelayFrame::LinkHello(h) if !healthy && h.conn.is_some() && side.flood_devices.contains(&h.device_id) => {
                log.flood_hellos += 1;
            }
            RelayFrame::LinkHello(h) if !healthy && side.slow_starts.contains_key(&h.device_id) => {
                let conn = h.conn.expect("the relay sets conn");
                slow_conns.insert(conn, h.device_id);
                side.new_slow.send(conn).unwrap();
            }
            RelayFrame::ConnClosed(c) => {
                log.conn_closed += 1;
                if healthy {
                    log.unexpected.push("conn_closed for the healthy device".to_owned());
                }
                side.closed.lock().unwrap().insert(c.conn);
                if let Some(start) = slow_conns.get(&c.conn).and_then(|device| side.slow_starts.remove(device)) {
                    let _ = start.send(());
                }
            }
            other => log.unexpected.push(format!("{other:?}")),
        }
    }
}

/// Writes the bridge's frames: answers first, then pushed blocks.
async fn bridge_writer(
    mut sink: SplitSink<Ws, Message>,
    mut answers: mpsc::UnboundedReceiver<String>,
    mut bulk: mpsc::Receiver<String>,
) {
    loop {
        let text = tokio::select! {
            biased;
            Some(text) = answers.recv() => text,
            Some(text) = bulk.recv() => text,
            else => return,
        };
        if sink.send(Message::text(text)).await.is_err() {
            return;
        }
    }
}

/// Pushes big signed blocks to every slow consumer, round-robin, until the relay has
/// cut off all of them; [`PUSH_PER_ROUND`] blocks per healthy round trip, so that what
/// the relay has yet to read on the bridge connection stays bounded (every answer the
/// healthy device gets means the relay has read the blocks written before it). Returns
/// how many blocks it pushed.
async fn pusher(
    bridge: Identity,
    mut new_slow: mpsc::UnboundedReceiver<u64>,
    closed: Arc<Mutex<HashSet<u64>>>,
    bulk: mpsc::Sender<String>,
    mut progress: watch::Receiver<u64>,
) -> usize {
    let mut sealer = Sealer::new(SLOW_BLOCK_KEY, "block");
    // One block per connection, sealed and signed once (a batch of one) and sent over and
    // over: the relay verifies every copy.
    let mut seal = |conn: u64| {
        let json = format!(r#"{{"type":"text","text":"{}"}}"#, "y".repeat(SLOW_BLOCK_BYTES));
        let session = SessionId(SLOW_SESSION.into());
        let block = seal_block(&mut sealer, &session, "text", false, SERVER_TS, json.as_bytes()).unwrap();
        (conn, serde_json::to_string(&RelayFrame::Batch(sign_batch(&bridge, conn, vec![block]))).unwrap())
    };
    let (mut active, mut seen, mut pushed) = (Vec::new(), 0, 0);
    let mut next = 0;
    loop {
        while let Ok(conn) = new_slow.try_recv() {
            active.push(seal(conn));
            seen += 1;
        }
        {
            let closed = closed.lock().unwrap();
            active.retain(|(conn, _)| !closed.contains(conn));
        }
        if active.is_empty() {
            if seen == SLOW {
                return pushed;
            }
            match new_slow.recv().await {
                Some(conn) => {
                    active.push(seal(conn));
                    seen += 1;
                }
                None => return pushed,
            }
            continue;
        }
        for _ in 0..PUSH_PER_ROUND {
            let (_, text) = &active[next % active.len()];
            next += 1;
            if bulk.send(text.clone()).await.is_err() {
                return pushed;
            }
            pushed += 1;
        }
        let round = *progress.borrow_and_update();
        if progress.wait_for(|done| *done > round).await.is_err() {
            return pushed;
        }
    }
}

// ----- the idle devices -----

#[derive(Debug)]
enum Idle {
    /// A `relay_status` arrived; a `link_hello` went out.
    Status,
    /// The bridge's `link_accept` echoing that hello arrived.
    Accepted,
    Wrong(String),
    Closed(Option<(u16, String)>),
}

/// Holds an authenticated connection, reading (and so answering pings); on the bridge's
/// next `relay_status` sends a `link_hello`, and expects the bridge's echo of it. Returns
/// the connection, still open, once the echo arrived.
async fn idle_connection(
    index: usize,
    mut ws: Ws,
    device: Identity,
    events: mpsc::UnboundedSender<(usize, Idle)>,
) -> Option<Ws> {
    let mut nonce = None;
    loop {
        let event = match next_event(&mut ws, false).await {
            Event::Frame(RelayFrame::RelayStatus(s)) if s.bridge_online && nonce.is_none() => {
                let hello = link_hello(&device);
                if let RelayFrame::LinkHello(h) = &hello {
                    nonce = Some(h.client_nonce.clone());
                }
                send(&mut ws, &hello).await;
                Idle::Status
            }
            Event::Frame(RelayFrame::LinkAccept(a))
                if Some(&a.bridge_nonce) == nonce.as_ref() && a.device_id == device.public().device_id() =>
            {
                let _ = events.send((index, Idle::Accepted));
                return Some(ws);
            }
            Event::Frame(other) => Idle::Wrong(format!("{other:?}")),
            Event::Closed(close) => {
                let _ = events.send((index, Idle::Closed(close)));
                return None;
            }
        };
        let _ = events.send((index, event));
    }
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
