//! Several bridges in one page, in a real browser: two in-process bridges (echo
//! adapter) on one relay, both paired in one Chromium page at a phone-sized viewport
//! by `web/test/browser-multi.mjs`, each with its own session; the page switches
//! between them, counts a permission request waiting on the one not shown, opens a
//! session by its URL, and forgets one (its keys leave the page's store, and it stays
//! forgotten after a reload). This test then checks that each session ran on its own
//! bridge. Everything runs in a private network namespace; screenshots are kept under
//! `target/tmp/browser-screenshots/multi/`.
//!
//! `.ci/run` sets `TERMINULL_BROWSER_TESTS=1`: then a browser test that cannot run
//! fails. Without it, and without Chromium or `web/node_modules`, the test says so and passes.

mod support;

use support::browser::{available, web_dir};

use std::path::PathBuf;
use std::time::Duration;

use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    bridges: Vec<String>,
    sessions: Sessions,
    screenshots: Vec<String>,
}

/// The session started on each bridge.
#[derive(Debug, serde::Deserialize)]
struct Sessions {
    a: String,
    b: String,
}

/// Whether `bridge` holds session `id` (its history file exists and has blocks).
fn holds(bridge: &support::remote::Paired, id: &str) -> bool {
    bridge.bridge_home.path().join("sessions").join(id).join("blocks.jsonl").exists()
}

#[test]
fn two_bridges_on_one_relay_are_paired_switched_and_one_forgotten_in_one_page_in_chromium() {
    const NAME: &str = "two_bridges_on_one_relay_are_paired_switched_and_one_forgotten_in_one_page_in_chromium";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let first = support::remote::paired_bridge().await;
        let second = support::remote::paired_bridge().await;
        for bridge in [&first, &second] {
            support::remote::connect_to_relay(bridge, relay.ws_url());
            support::remote::until_registered(&relay, bridge).await;
        }
        let link = |b: &support::remote::Paired| {
            support::remote::offer_link(&b.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url())
        };
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("multi");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let cwd = tempfile::tempdir().unwrap();
        for sub in ["a", "b"] {
            std::fs::create_dir_all(cwd.path().join(sub)).unwrap();
        }
        let mut command = tokio::process::Command::new("node");
        command
            .arg(web_dir().join("test/browser-multi.mjs"))
            .args(["--link-a", &link(&first), "--link-b", &link(&second), "--screenshots"])
            .arg(&shots)
            .arg("--cwd")
            .arg(cwd.path())
            .kill_on_drop(true);
        let report: Report = support::browser::run_script(command, Duration::from_secs(300)).await;
        eprintln!("multi: screenshots {:?}", report.screenshots);
        assert_eq!(report.bridges, [first.record.bridge_id.to_string(), second.record.bridge_id.to_string()]);
        // Each session ran on the bridge it was started on, and only there.
        assert!(holds(&first, &report.sessions.a) && !holds(&second, &report.sessions.a), "session A: {report:?}");
        assert!(holds(&second, &report.sessions.b) && !holds(&first, &report.sessions.b), "session B: {report:?}");
        let history = support::remote::history(second.bridge_home.path(), &SessionId(report.sessions.b.clone()));
        assert!(
            history.iter().any(|b| b.block_type() == "permission_request"),
            "the second bridge's session never asked for a permission"
        );
        relay.shutdown().await;
    });
}
