//! The web app's terminal view in a real browser (`web/test/browser-terminal.mjs`,
//! Chromium at 390x844, touch, scale 2) against an in-process bridge's LAN server: a
//! terminal opened from a session's view runs a real login shell (bash) in the scratch
//! directory; the page types with a phone IME's composition events, refits when the
//! viewport shrinks as for a soft keyboard (the shell gets the size), uses the key
//! bar's Tab, sticky Ctrl and ^C, runs `less` and quits it, reloads and finds its screen,
//! opens a second terminal from the bridge's screen, reattaches to and closes the
//! first, and ends the second with ^D. This test then checks the bridge's side: no
//! terminal left open. A bridge with terminals off: the page shows the bridge's reason.
//!
//! Everything runs in a private network namespace (only loopback), with `SHELL` set to
//! bash (Tab completion) and `HOME` to an empty directory (the bridge's home for a
//! terminal opened there, and no rc files of the user's). Screenshots are kept under
//! `target/tmp/browser-screenshots/terminal/` (and `terminal-off/`).
//!
//! `.ci/run` sets `TERMINULL_BROWSER_TESTS=1`: then a browser test that cannot run
//! fails. Without it, and without Chromium or `web/node_modules`, the test says so and passes.

mod support;

use support::browser::{available, web_dir};

use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_bridge::daemon_client::Client;
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_protocol::control::{ControlMessage, ListTerminals, ReplyResult};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    ok: bool,
    terminals: Vec<String>,
    screenshots: Vec<String>,
}

/// Runs the test `name`'s body in a private network namespace with bash as the login
/// shell and an empty home; `false` when this process is not the one to run it.
fn body_runs_here(name: &str) -> bool {
    if terminull_netns::inside() {
        return true;
    }
    if !available(true) {
        return false;
    }
    let bash = ["/bin/bash", "/usr/bin/bash"].into_iter().find(|p| Path::new(p).exists()).expect("bash is installed");
    let home = tempfile::tempdir().unwrap();
    let mut command = terminull_netns::test_command(name).unwrap();
    command.env("SHELL", bash).env("HOME", home.path());
    if let Err(e) = terminull_netns::run_test(&mut command) {
        panic!("{name} failed in its private network namespace:\n{e}");
    }
    false
}

/// Starts a bridge (echo adapter) with `config`, pairs a device, serves the LAN server.
async fn bridge(
    config: &str,
) -> (tempfile::TempDir, Service, support::remote::PairedDevice, terminull_bridge::lan::RunningLan) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path());
    let config = Config::parse(config).unwrap();
    let mut scan = ScanOptions::new(home.clone(), config.clone());
    scan.exe_dir = Some(support::echo_only_exe_dir());
    scan.handshake_timeout = Duration::from_secs(10);
    let policy = SessionPolicy { handshake_timeout: Duration::from_secs(10), ..SessionPolicy::default() };
    let service = Service::start(home.clone(), config, scan, policy).await.unwrap();
    let device = support::remote::pair_device(&home, &service);
    let lan = terminull_bridge::lan::start(
        device.ctx.clone(),
        home,
        terminull_bridge::lan::LanConfig::new("127.0.0.1:0".parse().unwrap()),
    )
    .await
    .expect("the LAN server binds");
    (dir, service, device, lan)
}

/// Runs the browser script against the pairing link of `home`'s LAN server `lan`.
async fn run_browser(
    home: &Home,
    lan: &terminull_bridge::lan::RunningLan,
    shots: &str,
    cwd: &Path,
    off: bool,
) -> Report {
    let link = support::remote::offer_link(home, None, Some(lan.ws_url()), 300).to_url(&lan.http_url());
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join(shots);
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let mut command = tokio::process::Command::new("node");
    command
        .arg(web_dir().join("test/browser-terminal.mjs"))
        .args(["--link", &link, "--screenshots"])
        .arg(&shots)
        .arg("--cwd")
        .arg(cwd)
        .kill_on_drop(true);
    if off {
        command.arg("--off");
    }
    let report: Report = support::browser::run_script(command, Duration::from_secs(300)).await;
    eprintln!("terminal: screenshots {:?}", report.screenshots);
    report
}

#[test]
fn a_phone_types_into_a_terminal_with_composition_events_and_the_key_bar_and_reattaches_after_a_reload_in_chromium() {
    const NAME: &str = "a_phone_types_into_a_terminal_with_composition_events_and_the_key_bar_and_reattaches_after_a_reload_in_chromium";
    if !body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let (dir, service, _device, lan) = bridge("").await;
        let cwd = tempfile::tempdir().unwrap();
        // A file longer than the screen (`less` pages it) whose name `notes-a` + Tab completes.
        let notes: String = (1..=200).map(|i| format!("line {i} of the notes\n")).collect();
        std::fs::write(cwd.path().join("notes-about-terminals.txt"), notes).unwrap();
        std::fs::write(cwd.path().join("other.txt"), "x\n").unwrap();
        let report = run_browser(&Home::at(dir.path()), &lan, "terminal", cwd.path(), false).await;
        assert_eq!(report.terminals.len(), 2, "{report:?}");
        assert!(report.terminals.iter().all(|t| t.starts_with("t-")), "{report:?}");
        // Closed from the page and ended by ^D: the bridge holds none.
        let mut client = Client::in_process(&service);
        let mut open = Vec::new();
        for _ in 0..50 {
            let listed = client.call(ControlMessage::ListTerminals(ListTerminals {}), &mut Vec::new()).await.unwrap();
            let ReplyResult::Terminals { terminals } = listed else { panic!("{listed:?}") };
            open = terminals;
            if open.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(open.is_empty(), "terminals left open: {open:?}");
        lan.stop();
    });
}

#[test]
fn with_terminals_off_the_phone_shows_the_bridges_reason_in_chromium() {
    const NAME: &str = "with_terminals_off_the_phone_shows_the_bridges_reason_in_chromium";
    if !body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let (dir, _service, _device, lan) = bridge("[terminals]\nenabled = false\n").await;
        let cwd = tempfile::tempdir().unwrap();
        let report = run_browser(&Home::at(dir.path()), &lan, "terminal-off", cwd.path(), true).await;
        assert!(report.ok && report.terminals.is_empty());
        lan.stop();
    });
}
