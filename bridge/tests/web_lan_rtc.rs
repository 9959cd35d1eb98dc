//! The app from the relay's https origin keeps the LAN as its fast path, in Debian's
//! Chromium at a phone's size (`web/test/lan-rtc.mjs`), inside a private network
//! namespace: the relay's https origin is a TLS front on 127.0.0.1 (the test
//! certificate of `relay/tests/fixtures/tls`, trusted by Chromium through its public
//! key's hash) before the relay, which the bridge reaches directly (its client trusts
//! only the public roots), and
//! the bridge's LAN server listens on 0.0.0.0 and offers its address on the default
//! route: 10.77.0.1, on one end of a veth pair (a "LAN" with no way out; the browser
//! uses the same address). The page pairs through the relay, offers a data channel
//! through its link and runs a slow echo turn on it; mid-turn the test removes the LAN
//! address (the bridge's UDP socket and its route are gone), the page must go on
//! through the relay, and when the LAN is back on another address (10.77.0.3: a new
//! lease), the page learns it in the bridge's next answer and returns to the LAN. The
//! page's blocks are then checked against the bridge's history: none lost, none twice.
//! Screenshots under `target/tmp/browser-screenshots/lan-rtc/`.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::browser::{available, run_conversing, web_dir};
use support::tls_front::{TEST_CERT_SPKI, tls_front};
use terminull_bridge::lan::{self, LanConfig};
use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};

/// The LAN address of the bridge inside the namespace.
const LAN_ADDR: &str = "10.77.0.1";
/// Its address once the LAN is back (a new lease): the page must re-learn it.
const NEW_LAN_ADDR: &str = "10.77.0.3";

fn ip(args: &str) {
    let status = std::process::Command::new("ip").args(args.split(' ')).status().expect("ip runs");
    assert!(status.success(), "ip {args}: {status}");
}

#[derive(Debug, serde::Deserialize)]
struct Report {
    ok: bool,
    session_id: String,
    seqs: Vec<u64>,
    paths: Vec<String>,
    blocks: serde_json::Value,
    lan_after_return: u64,
    screenshots: Vec<String>,
}

#[test]
fn the_https_app_runs_on_the_lan_data_channel_falls_back_to_the_relay_mid_turn_and_returns() {
    const NAME: &str = "the_https_app_runs_on_the_lan_data_channel_falls_back_to_the_relay_mid_turn_and_returns";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    support::remote::logs();
    // The LAN: a veth pair, the bridge's address on one end.
    ip("link add lan0 type veth peer name lan1");
    // No IPv6 link-local addresses: one appearing a second later (after its duplicate
    // address detection) is a network change to Chromium, which then aborts the page's
    // navigation (ERR_NETWORK_CHANGED, seen once in CI).
    ip("link set lan0 addrgenmode none");
    ip("link set lan1 addrgenmode none");
    ip(&format!("addr add {LAN_ADDR}/24 dev lan0"));
    ip("link set lan0 up");
    ip("link set lan1 up");
    // The default route goes out on the LAN: a bridge listening on 0.0.0.0 offers the
    // address it has there (looked up afresh on every offer).
    ip("route add default dev lan0");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let fixtures = support::workspace().join("relay/tests/fixtures/tls");
        let origin = tls_front(relay.http_url().trim_start_matches("http://").parse().unwrap(), &fixtures).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        let lan_listen = "0.0.0.0:0".parse().unwrap();
        let server = lan::start(bridge.ctx.clone(), bridge.home(), LanConfig::new(lan_listen)).await.unwrap();
        support::remote::until_registered(&relay, &bridge).await;

        let link =
            support::remote::offer_link(&bridge.home(), Some(origin.replace("https://", "wss://")), None, 300).to_url(&origin);
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("lan-rtc");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new("node");
        command.arg(web_dir().join("test/lan-rtc.mjs")).args(["--link", &link, "--spki", TEST_CERT_SPKI, "--screenshots"]);
        command.arg(&shots).arg("--cwd").arg(cwd.path());
        let mut dropped = false;
        let report: Report = run_conversing(command, Duration::from_secs(400), async |event: &str| match event {
            // The LAN address goes away: the bridge's UDP socket can no longer send or
            // receive, and nothing routes to it.
            "drop-lan" => {
                ip(&format!("addr del {LAN_ADDR}/24 dev lan0"));
                dropped = true;
                eprintln!("LAN address removed; data channels on the bridge: {}", bridge.ctx.rtc.peers());
            }
            // Back, on another address.
            "restore-lan" => {
                ip(&format!("addr add {NEW_LAN_ADDR}/24 dev lan0"));
                ip("route replace default dev lan0");
            }
            other => panic!("the script asked for {other}"),
        })
        .await;
        assert!(report.ok && dropped, "{report:?}");
        assert_eq!(report.paths, ["LAN direct", "via relay", "LAN direct"]);
        let (lan_blocks, relay_blocks) =
            (report.blocks["lan"].as_u64().unwrap_or(0), report.blocks["relay"].as_u64().unwrap_or(0));
        assert!(lan_blocks > 0 && relay_blocks > 0, "blocks per path: {}", report.blocks);
        assert!(report.lan_after_return > 0, "no block came over the LAN after it returned: {}", report.blocks);
        let history = support::remote::history(bridge.bridge_home.path(), &SessionId(report.session_id.clone()));
        support::browser::assert_page_complete(&report.seqs, &history);
        eprintln!(
            "blocks over the LAN data channel: {lan_blocks} ({} after it returned), through the relay: {relay_blocks}; screenshots {:?}",
            report.lan_after_return, report.screenshots
        );
        server.stop();
        relay.shutdown().await;
    });
}
