//! The LAN path as a device uses it: finding the bridge by mDNS and pairing with no
//! relay at all (inside a private network namespace, so multicast never reaches a
//! real interface), and a link that prefers the LAN, falls back to the relay when the
//! LAN server goes away mid-stream and returns to the LAN when it is back — with no
//! block lost or repeated.

mod support;

use std::time::Duration;

use support::remote::{say, until_turn_end};
use terminull_bridge::daemon_client::Client;
use terminull_bridge::devices;
use terminull_bridge::lan::{self, LanConfig};
use terminull_client::connection::{Connection, LinkPath};
use terminull_client::failover::{self, FailoverPolicy, Routes};
use terminull_client::home::DeviceHome;
use terminull_client::mdns::MdnsScope;
use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::control::BridgeMessage;
use terminull_protocol::lan::LanAdvert;
use terminull_relay::{Relay, RelayConfig};

async fn next(client: &mut Client) -> BridgeMessage {
    support::remote::next_within(client, 30).await
}

#[test]
fn a_device_finds_the_bridge_by_mdns_pairs_without_a_relay_and_runs_a_turn() {
    if !terminull_netns::body_runs_here("a_device_finds_the_bridge_by_mdns_pairs_without_a_relay_and_runs_a_turn") {
        return;
    }
    support::remote::logs();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        // The bridge: its LAN server on a port the kernel picks, advertised by mDNS.
        let bridge = support::remote::paired_bridge().await;
        let server = support::remote::start_lan(&bridge).await;
        let bridge_id = bridge.ctx.identity.public().bridge_id();
        let advert = LanAdvert::new(bridge_id.clone(), server.addr().port());
        let _advertised = terminull_net::mdns::advertise(&advert, server.addr().ip(), MdnsScope::LoopbackOnly)
            .expect("advertised by mDNS");

        // The QR link names no relay and no address: the phone must find the bridge.
        let link = support::remote::offer_link(&bridge.home(), None, None, 60);
        let phone_dir = tempfile::tempdir().unwrap();
        let phone = DeviceHome::at(phone_dir.path());
        let paired = terminull_client::pairing::pair(
            &phone,
            &link.to_url("http://bridge.invalid"),
            "phone",
            Some(MdnsScope::LoopbackOnly),
        )
        .await
        .expect("pairs with the bridge found by mDNS");
        assert_eq!(paired.short_code, devices::offer_result(&bridge.home(), &link.secret).unwrap().short_code);
        let record = phone.bridge(None).unwrap();
        assert_eq!(record.lan, Some(server.ws_url()), "the device keeps the address it found");

        // Connect with nothing known but discovery: LAN, found again by mDNS.
        let routes = Routes { lan: None, discover: Some(MdnsScope::LoopbackOnly), relay: None };
        let connection = failover::open(&phone, &record, routes, FailoverPolicy::default()).await.expect("a link");
        assert_eq!(*connection.info.path.borrow(), LinkPath::Lan(server.ws_url()));
        let mut client = Client::remote(connection);
        let cwd = tempfile::tempdir().unwrap();
        let mut transcript = Transcript::new();
        let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;
        say(&mut client, &session, "hello, found by mDNS", &mut transcript).await;
        until_turn_end(&mut client, &mut transcript).await;
        let texts = support::remote::texts(&transcript);
        assert!(texts.iter().any(|t| t == "You said: hello, found by mDNS"), "{texts:?}");
        support::remote::assert_complete(&transcript, &support::remote::history(bridge.bridge_home.path(), &session));
        server.stop();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_falls_back_to_the_relay_when_the_lan_dies_mid_stream_and_returns_when_it_is_back() {
    support::remote::logs();
    let relay_data = tempfile::tempdir().unwrap();
    let mut relay_config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), relay_data.path());
    relay_config.ping_interval = Duration::from_secs(2);
    let relay = Relay::start(relay_config).await.expect("the relay starts");
    let bridge = support::remote::paired_bridge().await;
    support::remote::connect_to_relay(&bridge, relay.ws_url());
    let server = support::remote::start_lan(&bridge).await;
    let lan_addr = server.addr();
    let lan_url = server.ws_url();
    // Wait for the bridge to be on the relay, so the fallback has somewhere to go.
    let mut registered = false;
    for _ in 0..100 {
        if Connection::open(&bridge.device, &bridge.record, Some(&relay.ws_url())).await.is_ok() {
            registered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(registered, "the bridge never registered with the relay");

    let routes = Routes { lan: Some(lan_url.clone()), discover: None, relay: Some(relay.ws_url()) };
    let policy = FailoverPolicy { lan_probe_every: Duration::from_millis(300), ..FailoverPolicy::default() };
    let connection = failover::open(&bridge.device, &bridge.record, routes, policy).await.expect("a link");
    let mut path = connection.info.path.clone();
    assert_eq!(*path.borrow(), LinkPath::Lan(lan_url.clone()), "the LAN comes first");
    let mut client = Client::remote(connection);
    let cwd = tempfile::tempdir().unwrap();
    let mut transcript = Transcript::new();
    let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;
    let words = (1..=40).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    say(&mut client, &session, &format!("slow {words}"), &mut transcript).await;

    // Three blocks over the LAN, then the LAN server dies.
    let mut on_lan_before = 0;
    while on_lan_before < 3 {
        if let BridgeMessage::Block { block, .. } = next(&mut client).await {
            assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            on_lan_before += 1;
        }
    }
    server.stop();

    // The stream goes on through the relay.
    let mut on_relay = 0;
    let mut ended = false;
    while on_relay < 3 && !ended {
        if let BridgeMessage::Block { block, .. } = next(&mut client).await {
            ended = block.block_type() == "session_end";
            assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            if matches!(*path.borrow(), LinkPath::Relay(_)) {
                on_relay += 1;
            }
        }
    }
    assert!(matches!(*path.borrow_and_update(), LinkPath::Relay(_)), "the link moved to the relay");
    assert!(on_relay >= 3, "only {on_relay} blocks came through the relay before the turn ended");

    // The LAN server is back on the same address: the link returns to it.
    let server = lan::start(bridge.ctx.clone(), bridge.home(), LanConfig::new(lan_addr)).await.expect("rebinds");
    let mut on_lan_after = 0;
    while !ended {
        if let BridgeMessage::Block { block, .. } = next(&mut client).await {
            ended = block.block_type() == "session_end";
            assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            if *path.borrow() == LinkPath::Lan(lan_url.clone()) {
                on_lan_after += 1;
            }
        }
    }
    assert_eq!(*path.borrow(), LinkPath::Lan(lan_url.clone()), "the link returned to the LAN");
    assert!(on_lan_after > 0, "no block came over the LAN after it returned");
    eprintln!("blocks: {on_lan_before} over the LAN, {on_relay} over the relay, {on_lan_after} over the LAN again");

    // Nothing lost, nothing twice, in order; the next turn runs on the LAN.
    support::remote::assert_complete(&transcript, &support::remote::history(bridge.bridge_home.path(), &session));
    say(&mut client, &session, "back home", &mut transcript).await;
    until_turn_end(&mut client, &mut transcript).await;
    support::remote::assert_complete(&transcript, &support::remote::history(bridge.bridge_home.path(), &session));
    server.stop();
    relay.shutdown().await;
}

/// `terminull …` with its output, failing the test with stderr when it fails.
fn terminull(args: &[&str]) -> std::process::Output {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("terminull"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running terminull");
    assert!(
        output.status.success(),
        "terminull {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn the_cli_pairs_over_the_lan_and_a_remote_chat_finds_the_daemon_by_mdns() {
    if !terminull_netns::body_runs_here("the_cli_pairs_over_the_lan_and_a_remote_chat_finds_the_daemon_by_mdns") {
        return;
    }
    let bridge = tempfile::tempdir().unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let (bridge_home, laptop_home) = (bridge.path().to_str().unwrap(), laptop.path().to_str().unwrap());
    let mut daemon = support::daemon_up(bridge.path(), &["--lan", "127.0.0.1:0"]);
    let lan_url_file = bridge.path().join("lan-url");
    let start = std::time::Instant::now();
    while !lan_url_file.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "the daemon never wrote its LAN address");
        std::thread::sleep(Duration::from_millis(50));
    }
    let lan_url = std::fs::read_to_string(&lan_url_file).unwrap();
    assert!(lan_url.starts_with("ws://127.0.0.1:"), "{lan_url}");

    // No relay anywhere: the link names the daemon's LAN server.
    let offer = terminull(&["pair", "--home", bridge_home, "--json", "--no-wait", "--yes"]);
    let offer: serde_json::Value = serde_json::from_slice(&offer.stdout).unwrap();
    let link = offer["link"].as_str().unwrap();
    assert!(!link.contains("&r="), "no relay in {link}");
    let paired = terminull(&["device", "pair", link, "--home", laptop_home, "--name", "laptop"]);
    assert!(String::from_utf8_lossy(&paired.stdout).contains("Short code"));

    // Forget the address: `--remote` must find the daemon's advertisement.
    let records = laptop.path().join("device").join("paired-bridges.json");
    let mut all: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&records).unwrap()).unwrap();
    assert_eq!(all[0]["lan"].as_str(), Some(lan_url.as_str()), "pairing kept the LAN address");
    all[0].as_object_mut().unwrap().remove("lan");
    std::fs::write(&records, serde_json::to_vec(&all).unwrap()).unwrap();

    let cwd = tempfile::tempdir().unwrap();
    let chat = terminull(&[
        "chat",
        "echo",
        "-p",
        "hello from the CLI",
        "--json",
        "--remote",
        "--home",
        laptop_home,
        "--cwd",
        cwd.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&chat.stdout);
    let stderr = String::from_utf8_lossy(&chat.stderr);
    assert!(stdout.contains("You said: hello from the CLI"), "{stdout}");
    assert!(stderr.contains(&format!("over LAN ({lan_url})")), "{stderr}");
    let all: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&records).unwrap()).unwrap();
    assert_eq!(all[0]["lan"].as_str(), Some(lan_url.as_str()), "the address found by mDNS is remembered");
    let _ = daemon.kill();
    let _ = daemon.wait();
}
