//! The web app's budgets (issue 21): the app in Debian's Chromium at a phone's size,
//! against this bridge's LAN server on 127.0.0.1, driven by `web/bench/budgets.mjs`.
//! The bridge holds `web_sessions` echo sessions with one turn each and one big
//! session written as history; the script pairs, then measures the list's first
//! render, tap → first streamed text, opening the big session and scrolling it. The
//! floors are taken in the same run: the page's own `load` event, the same turn from
//! the Rust client on the same LAN server, the same text as a static page.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::samples::realistic_session;

use crate::report::Row;
use crate::sections::{Scale, write_history};
use crate::setup::{self, Bridge, Tools};
use crate::util::{Helper, median};

const HOP: &str = "web app (Chromium, 390×844, LAN)";
const RELAY_HOP: &str = "web app (Chromium, 390×844, via relay)";

/// What `budgets.mjs` prints.
#[derive(Debug, Deserialize)]
struct Report {
    list: ListFigures,
    tap: TapFigures,
    relay_tap: TapFigures,
    open: OpenFigures,
    scroll: ScrollFigures,
    floor: ScrollFigures,
}

#[derive(Debug, Deserialize)]
struct ListFigures {
    list_ms: f64,
    load_ms: f64,
    runs: u32,
}

/// tap → first text and the block turn, as `web/bench/probe.mjs` measures them.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TapFigures {
    pub(crate) tap_ms: f64,
    pub(crate) tap_max_ms: f64,
    pub(crate) turns: u32,
    pub(crate) stream_blocks: u64,
    pub(crate) stream_ms: f64,
}

#[derive(Debug, Deserialize)]
struct OpenFigures {
    open_ms: f64,
    block_elements: u64,
}

#[derive(Debug, Deserialize)]
struct ScrollFigures {
    gesture_ms: f64,
    frames: u64,
    frames_over_50ms: u64,
    longest_frame_ms: f64,
    long_tasks: u64,
    longest_task_ms: f64,
}

/// `web/`, next to this crate.
fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web")
}

/// Why the browser cannot run here, if it cannot.
pub fn missing() -> Option<String> {
    let missing: Vec<String> = [
        (!Path::new("/usr/bin/chromium").exists()).then(|| "/usr/bin/chromium".to_owned()),
        (!web_dir().join("node_modules/playwright-core").exists()).then(|| "web/node_modules".to_owned()),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!missing.is_empty())
        .then(|| format!("{} missing (scripts/install-test-deps.sh installs them)", missing.join(", ")))
}

/// The section: its rows.
pub async fn web(tools: &Tools, scale: &Scale, cwd: &Path) -> Result<Vec<Row>> {
    if let Some(why) = missing() {
        bail!("the web section needs Chromium and the app's packages: {why}");
    }
    let home = tempfile::tempdir()?;
    let (big, _) = write_history(home.path(), scale.web_big_blocks, cwd)?;
    let big_turns =
        realistic_session(scale.web_big_blocks).iter().filter(|b| matches!(b.kind, BlockKind::SessionEnd(_))).count();
    let mut bridge = Bridge::start(tools, home.path()).await?;
    // A relay too: the page's relay path is measured beside its LAN path.
    let relay_dir = tempfile::tempdir()?;
    let relay =
        Helper::start(&tools.self_exe, &["relay-child", "--data", &relay_dir.path().display().to_string()]).await?;
    bridge.connect_relay(&relay.url);
    let mut client = bridge.in_process();
    let mut echo = None;
    for i in 0..scale.web_sessions {
        let session = setup::start_session(&mut client, cwd).await?;
        setup::turn(&mut client, &session, &format!("session {i}: look at the parser's error messages")).await?;
        echo = Some(session);
    }
    let echo = echo.context("no echo session (web_sessions is 0)")?;
    let (lan, _) = bridge.lan(true).await?;

    // The floor of tap → first text: the same turn from the Rust client, same LAN server.
    let (mut remote, _) = bridge.open_lan(&lan).await?;
    let floor_session = setup::start_session(&mut remote, cwd).await?;
    let rust_ms = setup::tap_to_first_text_ms(&mut remote, &floor_session, scale.web_rounds * 2).await?;
    // The floor of opening the big session: the Rust client's resume of it from seq 0.
    let (resumed, _) = setup::resume(&mut remote, &big, Some(0), None).await?;
    drop(remote);

    let link = bridge.page_pairing_link(Some(relay.url.clone()), Some(lan.ws_url()), &lan.http_url())?;
    // Every session is listed: the echo ones, the floor's and the big one.
    let rows = scale.web_sessions + 2;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-web");
    let mut command = tokio::process::Command::new("node");
    command
        .arg(web_dir().join("bench/budgets.mjs"))
        .args(["--link", &link, "--rows", &rows.to_string(), "--echo", echo.as_str()])
        .args(["--big", big.as_str(), "--big-turns", &big_turns.to_string()])
        .args([
            "--rounds",
            &scale.web_rounds.to_string(),
            "--blocks",
            &scale.web_stream_blocks.to_string(),
            "--relay",
            "true",
        ])
        .arg("--screenshots")
        .arg(&shots)
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(600), command.output())
        .await
        .context("budgets.mjs ran for 10 minutes")?
        .context("running node")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_default();
    if !output.status.success() {
        bail!("budgets.mjs failed ({}): {last}\n{}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    let report: Report = serde_json::from_str(last).with_context(|| format!("budgets.mjs printed `{last}`"))?;
    lan.stop();
    relay.stop().await;
    Ok(rows_of(&report, median(rust_ms), resumed.as_secs_f64() * 1e3, scale.web_big_blocks))
}

pub(crate) fn per_sec(t: &TapFigures) -> f64 {
    t.stream_blocks as f64 / (t.stream_ms / 1e3).max(1e-6)
}

fn rows_of(r: &Report, rust_tap_ms: f64, rust_resume_ms: f64, big_blocks: u64) -> Vec<Row> {
    let (s, f) = (&r.scroll, &r.floor);
    vec![
        Row::new(
            HOP,
            format!("first render of the session list after a load (median of {})", r.list.runs),
            r.list.list_ms,
            "ms",
        )
        .floor("the page's load event (app.js fetched and run)", r.list.load_ms),
        Row::new(
            HOP,
            format!("tap Send → first streamed text, echo (median of {}, max {:.0} ms)", r.tap.turns, r.tap.tap_max_ms),
            r.tap.tap_ms,
            "ms",
        )
        .floor("the Rust client, same turn, same LAN server", rust_tap_ms),
        Row::new(
            RELAY_HOP,
            format!(
                "tap Send → first streamed text, echo (median of {}, max {:.0} ms)",
                r.relay_tap.turns, r.relay_tap.tap_max_ms
            ),
            r.relay_tap.tap_ms,
            "ms",
        )
        .floor("the same page's LAN path", r.tap.tap_ms),
        Row::new(
            HOP,
            format!("a turn of {} finished 1 KiB blocks, tap → the last in the DOM", r.tap.stream_blocks),
            per_sec(&r.tap),
            "blocks/s",
        ),
        Row::new(
            RELAY_HOP,
            format!("a turn of {} finished 1 KiB blocks, tap → the last in the DOM", r.relay_tap.stream_blocks),
            per_sec(&r.relay_tap),
            "blocks/s",
        )
        .floor("the same page's LAN path", per_sec(&r.tap)),
        Row::new(
            HOP,
            format!("open a {big_blocks}-block history ({} block elements shown)", r.open.block_elements),
            r.open.open_ms,
            "ms",
        )
        .floor("the Rust client's session_resume → replay_done, same LAN server", rust_resume_ms),
        Row::new(
            HOP,
            format!(
                "scroll it end to top ({} frames in {:.1} s, longest {:.0} ms)",
                s.frames,
                s.gesture_ms / 1e3,
                s.longest_frame_ms
            ),
            s.frames_over_50ms as f64,
            "frames over 50 ms",
        )
        .floor(
            &format!("the same text as static elements ({} frames, longest {:.0} ms)", f.frames, f.longest_frame_ms),
            f.frames_over_50ms as f64,
        ),
        Row::new(
            HOP,
            format!("scroll: main-thread tasks over 50 ms in the trace (longest {:.0} ms)", s.longest_task_ms),
            s.long_tasks as f64,
            "tasks",
        )
        .floor(&format!("static elements (longest {:.0} ms)", f.longest_task_ms), f.long_tasks as f64),
    ]
}
