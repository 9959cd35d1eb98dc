//! The installable phone app and its pinned code, in Debian's Chromium
//! (`web/test/install.mjs`, phone viewport) inside a private network namespace: a
//! relay with a registered bridge, a hostile loopback proxy (run by the script) in
//! front of it. The manifest and service worker pass Chromium's installability
//! check; the app shell loads offline and says "reconnecting"; an altered `app.js`
//! from the relay is refused by the pinned worker and the page says so; an update
//! signed by the paired bridge is taken. Screenshots under
//! `target/tmp/browser-screenshots/install/`.
//!
//! Without Chromium or `web/node_modules` the test says so and passes, unless
//! `TERMINULL_BROWSER_TESTS` is set (then it fails).

mod support;

use support::browser::{available, web_dir};

use std::path::PathBuf;
use std::time::Duration;

use terminull_protocol::crypto::app_code::{self, SHELL_PATHS};
use terminull_relay::{Relay, RelayConfig};

/// The embedded shell with `/app.js` replaced by `app_js`: its digest.
fn digest_with_app(app_js: &[u8]) -> [u8; 32] {
    let files: Vec<(&str, &[u8])> = SHELL_PATHS
        .iter()
        .map(|p| (*p, if *p == "/app.js" { app_js } else { terminull_web::asset(p).expect("a shell file").bytes }))
        .collect();
    app_code::shell_digest(&files).expect("the shell's paths")
}

#[test]
fn the_app_installs_runs_offline_and_its_pinned_worker_refuses_code_the_bridge_did_not_sign() {
    const NAME: &str = "the_app_installs_runs_offline_and_its_pinned_worker_refuses_code_the_bridge_did_not_sign";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        // The bridge registers with its signature over the app it embeds; the relay serves it.
        let url = format!("{}/v1/bridges/{}/app-signature", relay.http_url(), bridge.record.bridge_id);
        let mut served = None;
        for _ in 0..100 {
            if let Ok(r) = terminull_client::net::request_json("GET", &url, None, Duration::from_secs(2)).await
                && r.status == 200
            {
                served = Some(r.body);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let served = served.expect("the relay serves the bridge's app signature");
        let signature: app_code::AppSignature = serde_json::from_slice(&served).unwrap();
        let identity = terminull_bridge::devices::bridge_identity(&bridge.home()).unwrap();
        assert_eq!(app_code::verify_shell(&identity.public(), &signature).unwrap(), terminull_web::shell_digest());

        // The altered bundles the hostile proxy serves: one nobody signed, one the bridge signed.
        let files = tempfile::tempdir().unwrap();
        let app = terminull_web::asset("/app.js").unwrap().bytes;
        let evil = [app, b"\n;globalThis.terminullBuild='evil';\n"].concat();
        let signed = [app, b"\n;globalThis.terminullBuild='signed-update';\n"].concat();
        let signed_sig = app_code::sign_shell(&identity, &digest_with_app(&signed));
        std::fs::write(files.path().join("evil.js"), &evil).unwrap();
        std::fs::write(files.path().join("signed.js"), &signed).unwrap();
        std::fs::write(files.path().join("signed.json"), serde_json::to_vec(&signed_sig).unwrap()).unwrap();

        let link =
            support::remote::offer_link(&bridge.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url());
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("install");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let mut command = tokio::process::Command::new("node");
        command
            .arg(web_dir().join("test/install.mjs"))
            .args(["--link", &link, "--evil"])
            .arg(files.path().join("evil.js"))
            .arg("--signed-app")
            .arg(files.path().join("signed.js"))
            .arg("--signed-sig")
            .arg(files.path().join("signed.json"))
            .arg("--screenshots")
            .arg(&shots)
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(240), command.output())
            .await
            .expect("the browser script finished in time")
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "the browser script failed ({}):\n{stdout}\n{stderr}", output.status);
        let last = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).expect("a JSON report line");
        let report: serde_json::Value = serde_json::from_str(last).unwrap();
        assert_eq!(report["ok"], true, "{stdout}");
        assert_eq!(report["manifest"]["installabilityErrors"], 0, "{report}");
        assert_eq!(report["refused"]["ranAltered"], false, "{report}");
        assert_eq!(report["update"]["running"], "signed-update", "{report}");
        eprintln!("install: {report}");
        relay.shutdown().await;
    });
}
