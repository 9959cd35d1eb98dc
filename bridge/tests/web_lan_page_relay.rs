//! One pairing, both paths, from the bridge's own http LAN page, in Debian's Chromium
//! at a phone's size (`web/test/lan-page-relay.mjs`) inside a private network
//! namespace: the bridge is on a relay and runs its LAN server with that relay in its
//! config (so the page's CSP lets it connect there). The page pairs once, on the LAN
//! page, with a link naming both; a slow echo turn begins on the LAN, the test stops
//! the LAN server mid-turn, and the page must go on through the relay as the same
//! device (no second pairing), then return to the LAN once the server is back on the
//! same address. Then the page takes its pairing to the relay's own page (another
//! origin, another store) through its carry link: connected there as the same
//! device, with no pairing. The page's blocks are checked against the bridge's
//! history: none lost, none twice; the bridge holds one web device. Screenshots under `target/tmp/browser-screenshots/lan-page-relay/`.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::browser::{assert_page_complete, available, run_conversing, web_dir};
use terminull_bridge::lan::{self, LanConfig};
use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};

#[derive(Debug, serde::Deserialize)]
struct Report {
    ok: bool,
    session_id: String,
    seqs: Vec<u64>,
    paths: Vec<String>,
    blocks: serde_json::Value,
    lan_after_return: u64,
    relay_page_path: String,
    screenshots: Vec<String>,
}

#[test]
fn a_device_paired_on_the_lan_page_goes_on_through_the_relay_when_the_lan_goes_and_returns() {
    const NAME: &str = "a_device_paired_on_the_lan_page_goes_on_through_the_relay_when_the_lan_goes_and_returns";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    support::remote::logs();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        let config = LanConfig { relay: Some(relay.ws_url()), ..LanConfig::new("127.0.0.1:0".parse().unwrap()) };
        let mut server = Some(lan::start(bridge.ctx.clone(), bridge.home(), config.clone()).await.unwrap());
        let addr = server.as_ref().unwrap().addr();
        support::remote::until_registered(&relay, &bridge).await;

        let lan_server = server.as_ref().unwrap();
        let link = support::remote::offer_link(&bridge.home(), Some(relay.ws_url()), Some(lan_server.ws_url()), 300)
            .to_url(&lan_server.http_url());
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("lan-page-relay");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new("node");
        command.arg(web_dir().join("test/lan-page-relay.mjs")).args(["--link", &link, "--screenshots"]).arg(&shots);
        command.arg("--cwd").arg(cwd.path());
        let mut stopped = false;
        let report: Report = run_conversing(command, Duration::from_secs(400), async |event: &str| match event {
            // The LAN server goes away with every connection it held.
            "stop-lan" => {
                server.take().expect("the LAN server runs").stop();
                stopped = true;
            }
            // Back on the same address (the page's origin).
            "start-lan" => {
                let again = LanConfig { listen: addr, ..config.clone() };
                server = Some(lan::start(bridge.ctx.clone(), bridge.home(), again).await.expect("the LAN port again"));
            }
            other => panic!("the script asked for {other}"),
        })
        .await;
        assert!(report.ok && stopped, "{report:?}");
        assert_eq!(report.paths, ["LAN", "via relay", "LAN"]);
        let (lan_blocks, relay_blocks) =
            (report.blocks["lan"].as_u64().unwrap_or(0), report.blocks["relay"].as_u64().unwrap_or(0));
        assert!(lan_blocks > 0 && relay_blocks > 0, "blocks per path: {}", report.blocks);
        assert!(report.lan_after_return > 0, "no block came over the LAN after it returned: {}", report.blocks);
        // One device: the page never paired a second time.
        let (devices, _) = terminull_bridge::devices::DeviceRegistry::open(&bridge.home()).snapshot();
        let web: Vec<&str> = devices.iter().map(|d| d.name.as_str()).filter(|n| n.starts_with("Web app")).collect();
        assert_eq!(web, ["Web app (Android)"], "the bridge's devices");
        let history = support::remote::history(bridge.bridge_home.path(), &SessionId(report.session_id.clone()));
        assert_page_complete(&report.seqs, &history);
        eprintln!(
            "blocks on the LAN: {lan_blocks} ({} after it returned), through the relay: {relay_blocks}; the relay's page: {}; screenshots {:?}",
            report.lan_after_return, report.relay_page_path, report.screenshots
        );
        if let Some(s) = server {
            s.stop();
        }
        relay.shutdown().await;
    });
}
