//! The chat's cards in a real browser (`web/test/browser-cards.mjs`, Chromium at
//! 390x844, touch, scale 2) against an in-process bridge on a relay with the demo
//! adapter (`tests/fixtures/adapters/demo.py`, a drop-in), whose one turn emits every
//! block type: shell, edit, write, read, search, web, sub-agent and generic tool cards,
//! inline diffs, a permission card with a 300-character command, links, a highlighted
//! code block and copy buttons, with axe-core run on the pairing screen, the chat and
//! the session list. Everything runs in a private network namespace; screenshots are
//! kept under `target/tmp/browser-screenshots/cards/`.

mod support;

use support::browser::{available, web_dir};

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use terminull_relay::{Relay, RelayConfig};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    axe: serde_json::Value,
    screenshots: Vec<String>,
}

#[test]
fn every_card_of_the_demo_adapter_renders_per_kind_and_passes_axe_core_in_chromium() {
    const NAME: &str = "every_card_of_the_demo_adapter_renders_per_kind_and_passes_axe_core_in_chromium";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        let ext = bridge.bridge_home.path().join("ext_adapters");
        std::fs::create_dir_all(&ext).unwrap();
        let script = support::workspace().join("tests/fixtures/adapters/demo.py");
        let path = ext.join("demo");
        std::fs::write(&path, format!("#!/bin/sh\nexec python3 '{}'\n", script.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        bridge.service.rescan().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        support::remote::until_registered(&relay, &bridge).await;

        let cwd = tempfile::tempdir().unwrap();
        let link =
            support::remote::offer_link(&bridge.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url());
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("cards");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let mut command = tokio::process::Command::new("node");
        command
            .arg(web_dir().join("test/browser-cards.mjs"))
            .args(["--link", &link, "--screenshots"])
            .arg(&shots)
            .arg("--cwd")
            .arg(cwd.path())
            .kill_on_drop(true);
        let report: Report = support::browser::run_script(command, Duration::from_secs(300)).await;
        for screen in ["pairing", "chat-dark", "chat-light", "chat-all-open", "session-list"] {
            assert_eq!(report.axe[screen]["serious_or_critical"], 0, "axe-core on {screen}: {}", report.axe);
        }
        eprintln!("cards: axe {}", report.axe);
        eprintln!("cards: screenshots {:?}", report.screenshots);
        relay.shutdown().await;
    });
}
