//! The phone web app in a real browser: Debian's Chromium driven by Playwright
//! (`web/test/browser.mjs`) at a phone-sized viewport, against a bridge's LAN server
//! and against a relay, both serving the embedded app. The script pairs by opening the
//! QR link, runs a turn with the echo adapter, approves a permission, interrupts a
//! long turn and reloads mid-stream; this test then checks the page's blocks against
//! the bridge's history. Everything runs in a private network namespace (the browser
//! cannot reach anything but loopback). Screenshots of each state are kept under
//! `target/tmp/browser-screenshots/<path>/`.
//!
//! `.ci/run` installs Chromium and the app's npm packages and sets
//! `TERMINULL_BROWSER_TESTS=1`: then a browser test that cannot run fails. Without it,
//! and without Chromium or `web/node_modules`, the tests say so and pass.

mod support;

use support::browser::{available, web_dir};

use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    session_id: String,
    seqs: Vec<u64>,
    path: String,
    screenshots: Vec<String>,
}

/// Runs the browser script on `link` and returns its report.
async fn run_browser(link: &str, expect_path: &str) -> Report {
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join(expect_path);
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new("node");
    command
        .arg(web_dir().join("test/browser.mjs"))
        .args(["--link", link, "--expect-path", expect_path, "--screenshots"])
        .arg(&shots)
        .arg("--cwd")
        .arg(cwd.path())
        .kill_on_drop(true);
    let report: Report = support::browser::run_script(command, Duration::from_secs(240)).await;
    eprintln!("{expect_path}: screenshots {:?}", report.screenshots);
    report
}

/// The page paired as the phone it says it is (an Android user agent), not as "Linux".
fn assert_paired_as_android(home: &terminull_bridge::home::Home) {
    let (devices, _) = terminull_bridge::devices::DeviceRegistry::open(home).snapshot();
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    assert!(names.contains(&"Web app (Android)"), "the bridge's devices are named {names:?}");
}

/// The runtime for a browser test's body, or `None` when the body does not run in
/// this process (no browser here, or this is the process that re-runs the test in a
/// private network namespace).
fn browser_test(name: &str) -> Option<tokio::runtime::Runtime> {
    if !available(true) || !terminull_netns::body_runs_here(name) {
        return None;
    }
    Some(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap())
}

fn offer(home: &terminull_bridge::home::Home, relay: Option<String>, lan: Option<String>, base: &str) -> String {
    support::remote::offer_link(home, relay, lan, 300).to_url(base)
}

#[test]
fn the_phone_app_pairs_and_drives_the_bridge_over_the_lan_in_chromium() {
    let Some(runtime) = browser_test("the_phone_app_pairs_and_drives_the_bridge_over_the_lan_in_chromium") else {
        return;
    };
    runtime.block_on(async {
        let bridge = support::remote::paired_bridge().await;
        let server = support::remote::start_lan(&bridge).await;
        let link = offer(&bridge.home(), None, Some(server.ws_url()), &server.http_url());
        let report = run_browser(&link, "lan").await;
        assert_eq!(report.path, "lan");
        let history = support::remote::history(bridge.bridge_home.path(), &SessionId(report.session_id.clone()));
        support::browser::assert_page_complete(&report.seqs, &history);
        assert_paired_as_android(&bridge.home());
        server.stop();
    });
}

#[test]
fn the_phone_app_pairs_and_drives_the_bridge_through_the_relay_in_chromium() {
    let Some(runtime) = browser_test("the_phone_app_pairs_and_drives_the_bridge_through_the_relay_in_chromium") else {
        return;
    };
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        // The bridge registers before the phone arrives.
        let mut online = false;
        for _ in 0..100 {
            // The listing is for the bridge or its devices only: signed by the paired device.
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            let query = terminull_relay::listing::devices_listing_query(
                &bridge.device_identity,
                bridge.record.bridge_id.as_str(),
                now,
            );
            let url = format!("{}/v1/bridges/{}/devices?{query}", relay.http_url(), bridge.record.bridge_id);
            if terminull_client::net::request_json("GET", &url, None, Duration::from_secs(2))
                .await
                .is_ok_and(|r| r.status == 200)
            {
                online = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(online, "the bridge never registered with the relay");
        let link = offer(&bridge.home(), Some(relay.ws_url()), None, &relay.http_url());
        let report = run_browser(&link, "relay").await;
        assert_eq!(report.path, "relay");
        let history = support::remote::history(bridge.bridge_home.path(), &SessionId(report.session_id.clone()));
        support::browser::assert_page_complete(&report.seqs, &history);
        assert_paired_as_android(&bridge.home());
        relay.shutdown().await;
    });
}

#[test]
fn the_apps_javascript_tests_pass_and_its_crypto_reproduces_the_envelope_vectors() {
    // They launch Chromium against an in-process fake bridge: in a namespace too.
    if !available(true)
        || !terminull_netns::body_runs_here(
            "the_apps_javascript_tests_pass_and_its_crypto_reproduces_the_envelope_vectors",
        )
    {
        return;
    }
    let output = std::process::Command::new("node")
        .args(["--test", "test/"])
        .current_dir(web_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "node --test web/test/ failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{}", stdout.lines().filter(|l| l.starts_with("# ")).collect::<Vec<_>>().join("\n"));
    assert!(stdout.contains("# fail 0"), "{stdout}");
}

#[test]
fn the_committed_app_is_what_its_sources_build_to() {
    if !available(false) {
        return;
    }
    // Build a copy of the sources, so a failing check leaves web/dist as committed.
    // (index.html, style.css, the manifest and the icons are not built: they are
    // embedded from web/ as written.)
    let copy = tempfile::tempdir().unwrap();
    let web = web_dir();
    for file in ["build.mjs", "package.json"] {
        std::fs::copy(web.join(file), copy.path().join(file)).unwrap();
    }
    copy_dir(&web.join("src"), &copy.path().join("src"));
    std::os::unix::fs::symlink(web.join("node_modules"), copy.path().join("node_modules")).unwrap();
    let output = std::process::Command::new("node")
        .arg("build.mjs")
        .current_dir(copy.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("node runs");
    assert!(output.status.success(), "the build failed: {}", String::from_utf8_lossy(&output.stderr));
    for file in ["app.js", "sw.js"] {
        let built = std::fs::read(copy.path().join("dist").join(file)).unwrap();
        let committed = std::fs::read(web.join("dist").join(file)).unwrap();
        assert!(
            built == committed,
            "web/dist/{file} differs from what web/src builds to; run `npm run build` in web/ and commit web/dist/{file}"
        );
    }
    let mut dist: Vec<String> = std::fs::read_dir(web.join("dist"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dist.sort();
    assert_eq!(
        dist,
        ["app.js", "sw.js"],
        "web/dist holds the built script and service worker only; the page, its style, manifest and icons are served from web/"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
