//! The relay path end to end on loopback: a real `terminull-relay` (in-process),
//! a bridge with the echo adapter connected to it, and a device that pairs through
//! the relay's HTTP broker and drives a session through the relay — the device's
//! transcript equals the bridge's history; cut mid-stream, and across a relay
//! restart, it resumes with no block lost or duplicated.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use terminull_bridge::daemon_client::Client;
use terminull_bridge::devices;
use terminull_client::connection::Connection;
use terminull_client::home::DeviceHome;
use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::control::{self, BridgeMessage, ControlMessage};
use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig, RunningRelay};

async fn start_relay(listen: SocketAddr, data: &Path) -> RunningRelay {
    support::remote::logs();
    let mut config = RelayConfig::new(listen, data);
    config.ping_interval = Duration::from_secs(2);
    Relay::start(config).await.expect("the relay starts")
}

/// Opens the device's link, retrying while the bridge is not yet (re)registered.
async fn connect(device: &DeviceHome, relay: &str) -> Client {
    let record = device.bridge(None).unwrap();
    let mut last = String::new();
    for _ in 0..100 {
        match Connection::open(device, &record, Some(relay)).await {
            Ok(c) => return Client::remote(c),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no link through {relay}: {last}");
}

/// Sends `text` and applies blocks to `transcript` until the turn's session_end.
async fn turn(client: &mut Client, session: &SessionId, text: &str, transcript: &mut Transcript) {
    support::remote::say(client, session, text, transcript).await;
    support::remote::until_turn_end(client, transcript).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_paired_through_the_relay_runs_a_turn_and_its_transcript_equals_the_bridge_history() {
    let data = tempfile::tempdir().unwrap();
    let relay = start_relay("127.0.0.1:0".parse().unwrap(), data.path()).await;
    let paired = support::remote::paired_bridge().await;
    support::remote::connect_to_relay(&paired, relay.ws_url());

    // A second device pairs through the relay's HTTP broker, as a phone would.
    let link = support::remote::offer_link(&paired.home(), Some(relay.ws_url()), None, 60);
    let phone_dir = tempfile::tempdir().unwrap();
    let phone = DeviceHome::at(phone_dir.path());
    let mut paired_phone = None;
    for _ in 0..100 {
        match terminull_client::pairing::pair(&phone, &link.to_url(&relay.http_url()), "phone", None).await {
            Ok(p) => {
                paired_phone = Some(p);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let paired_phone = paired_phone.expect("the phone pairs through the relay");
    let shown_by_bridge = devices::offer_result(&paired.home(), &link.secret).expect("the bridge recorded the pairing");
    assert_eq!(paired_phone.short_code, shown_by_bridge.short_code, "both sides show the same short code");

    let mut client = connect(&phone, &relay.ws_url()).await;
    let cwd = tempfile::tempdir().unwrap();
    let mut transcript = Transcript::new();
    let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;
    turn(&mut client, &session, "hello through the relay", &mut transcript).await;
    let texts = support::remote::texts(&transcript);
    assert!(texts.iter().any(|t| t == "You said: hello through the relay"), "{texts:?}");
    let written = support::remote::history(paired.bridge_home.path(), &session);
    support::remote::assert_complete(&transcript, &written);

    // The other paired device was offline during the turn: the relay held the bridge's
    // notification for it, sealed for that device, and delivers it when it connects.
    let offline = Connection::open(&paired.device, &paired.record, Some(&relay.ws_url())).await.expect("link");
    let stats = offline.info.stats.clone();
    for _ in 0..100 {
        if stats.pushes.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let notices: Vec<serde_json::Value> = stats.notices.lock().unwrap().iter().cloned().collect();
    assert!(
        notices.iter().any(|n| n["kind"] == "turn_finished"
            && n["session_id"] == session.as_str()
            && n["title"] == "echo: turn finished"),
        "the held notification opens on the device: {notices:?}"
    );
    drop(offline);

    // A phone that lost its view resumes by time (the spec's lifecycle, §1.4): the
    // blocks after `since_ts` as live blocks, `replay_done`, then the older history
    // with `replay: true`; merged by seq, the view is whole again.
    drop(client);
    let mut client = connect(&phone, &relay.ws_url()).await;
    let since_ts = written[written.len() / 2].ts;
    let mut kept = Vec::new();
    let resume = ControlMessage::SessionResume(control::SessionResume {
        session_id: session.clone(),
        since_seq: None,
        since_ts: Some(since_ts),
        app_pubkey: String::new(),
    });
    client.call(resume, &mut kept).await.expect("resumed by time");
    let mut pending: std::collections::VecDeque<_> = kept.into();
    let mut view = Transcript::new();
    let (mut live, mut older, mut done) = (0, 0, false);
    let started = std::time::Instant::now();
    loop {
        let m = match pending.pop_front() {
            Some(m) => m,
            // The stream has no end marker after the older history: settle on 3 s of
            // silence, but only once both halves have begun (a loaded machine may pause).
            None => match tokio::time::timeout(Duration::from_secs(3), client.next()).await {
                Ok(m) => m.expect("open"),
                Err(_) if done && live > 0 && older > 0 => break,
                Err(_) => {
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "live {live}, history {older}, replay_done {done}"
                    );
                    continue;
                }
            },
        };
        match m {
            BridgeMessage::Block { block, replay, .. } => {
                assert_eq!(replay, done, "live blocks before replay_done, history after");
                if replay {
                    older += 1
                } else {
                    live += 1
                }
                // A resume by time is inexact: a message that began before `since_ts`
                // continues live as an append, which waits (a gap) for its beginning in
                // the older history. Nothing arrives twice, and the view ends whole.
                let applied = view.apply(block);
                assert!(matches!(applied, Applied::Added | Applied::Gap { .. }), "{applied:?}");
            }
            BridgeMessage::ReplayDone { .. } => done = true,
            BridgeMessage::Reply(_) => {}
            other @ (BridgeMessage::TerminalOutput(_) | BridgeMessage::TerminalExit(_)) => {
                panic!("no terminal here: {other:?}")
            }
        }
    }
    assert!(done && live > 0 && older > 0, "live {live}, history {older}, replay_done {done}");
    assert!(view.gaps().is_empty(), "every message rebuilt: {:?}", view.gaps());
    support::remote::assert_complete(&view, &written);
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_cut_mid_stream_resumes_without_loss_or_duplicates_also_across_a_relay_restart() {
    let data = tempfile::tempdir().unwrap();
    let mut relay = Some(start_relay("127.0.0.1:0".parse().unwrap(), data.path()).await);
    let addr = relay.as_ref().unwrap().addr();
    let url = relay.as_ref().unwrap().ws_url();
    let paired = support::remote::paired_bridge().await;
    support::remote::connect_to_relay(&paired, url.clone());
    let cwd = tempfile::tempdir().unwrap();
    let mut transcript = Transcript::new();
    let mut client = connect(&paired.device, &url).await;
    let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;

    // 1. The device goes away in the middle of a slow turn, then resumes.
    for (round, restart_relay) in [(1, false), (2, true)] {
        let text = format!("slow round {round} one two three four five six");
        support::remote::say(&mut client, &session, &text, &mut transcript).await;
        // Take a few blocks of the turn, then cut.
        let mut taken = 0;
        while taken < 3 {
            if let BridgeMessage::Block { block, .. } =
                tokio::time::timeout(Duration::from_secs(20), client.next()).await.unwrap().unwrap()
            {
                assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
                taken += 1;
            }
        }
        if restart_relay {
            // The relay goes away mid-stream and comes back on the same port and data directory.
            if let Some(running) = relay.take() {
                running.shutdown().await;
            }
            relay = Some(start_relay(addr, data.path()).await);
        }
        drop(client);
        client = connect(&paired.device, &url).await;
        let mut kept = Vec::new();
        let resume = ControlMessage::SessionResume(control::SessionResume {
            session_id: session.clone(),
            since_seq: Some(transcript.last_seq()),
            since_ts: None,
            app_pubkey: String::new(),
        });
        client.call(resume, &mut kept).await.expect("resumed");
        // The reply comes before the blocks the resume sends: none are kept.
        support::remote::apply_blocks(kept, &mut transcript);
        support::remote::until_turn_end(&mut client, &mut transcript).await;
    }
    support::remote::assert_complete(&transcript, &support::remote::history(paired.bridge_home.path(), &session));
    if let Some(running) = relay {
        running.shutdown().await;
    }
}
