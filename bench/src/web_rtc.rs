//! The installed app's two paths (issue 22): the app from the relay's https origin
//! reaches the bridge over a WebRTC data channel on the LAN, and through the relay when
//! the LAN is gone. Both are measured in one Chromium page (`web/bench/lan-rtc.mjs`):
//! tap → first streamed text and a turn of 1 KiB blocks, on the data channel, then —
//! once this section took the bridge's LAN address away — through the relay.
//!
//! WebRTC gathers candidates on every interface (and announces mDNS names), so all of
//! it runs inside a private network namespace (`unshare -n`, as root): the section
//! starts this binary again there (`web-rtc-child`), which puts the bridge's LAN address
//! on a veth pair with the default route (the "LAN", no way out), starts a relay behind
//! a TLS front with the test certificate (the app's https origin, trusted by Chromium
//! through its key's hash), a bridge with its LAN server on 0.0.0.0 and an echo
//! session, runs the script and prints the figures as one JSON line.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use terminull_bridge::lan::{self, LanConfig};

use crate::report::Row;
use crate::sections::Scale;
use crate::setup::{self, Bridge, Tools};
use crate::util::{Helper, median};
use crate::web::{TapFigures, per_sec};

#[path = "../../bridge/tests/support/conversing.rs"]
mod conversing;
#[path = "../../bridge/tests/support/tls_front.rs"]
mod tls_front;

const LAN_HOP: &str = "web app (https origin, LAN data channel)";
const RELAY_HOP: &str = "web app (https origin, via relay)";
/// The bridge's LAN address inside the namespace.
const LAN_ADDR: &str = "10.77.0.1";

/// What the child prints.
#[derive(Debug, Serialize, Deserialize)]
struct Figures {
    lan: TapFigures,
    relay: TapFigures,
    /// The Rust client's tap → first text on the bridge's LAN server, same namespace.
    rust_lan_tap_ms: f64,
    /// Blocks the page received per path (`window.terminull.pathBlocks`).
    path_blocks: serde_json::Value,
}

/// Why the section cannot run here, if it cannot: the browser's, or no private
/// network namespace (it needs root).
pub fn missing() -> Option<String> {
    if let Some(why) = crate::web::missing() {
        return Some(why);
    }
    let probe = std::process::Command::new("unshare").args(["-n", "true"]).output();
    match probe {
        Ok(out) if out.status.success() => None,
        _ => Some("no private network namespace here (`unshare -n` needs root)".to_owned()),
    }
}

/// The section: runs [`child`] in a private network namespace and makes its rows.
pub async fn web_rtc(tools: &Tools, scale: &Scale) -> Result<Vec<Row>> {
    if let Some(why) = missing() {
        bail!("the web-rtc section cannot run: {why}");
    }
    let mut command = std::process::Command::new(&tools.self_exe);
    command.args([
        "web-rtc-child",
        "--rounds",
        &scale.web_rounds.to_string(),
        "--blocks",
        &scale.web_stream_blocks.to_string(),
    ]);
    let output = tokio::task::spawn_blocking(move || terminull_netns::run_in_netns(&mut command))
        .await?
        .context("the web-rtc child in its network namespace")?;
    let last = output.lines().rev().find(|l| l.starts_with("{\"lan\"")).unwrap_or_default();
    let figures: Figures = serde_json::from_str(last).with_context(|| format!("the child printed:\n{output}"))?;
    Ok(rows_of(&figures))
}

fn ip(args: &str) -> Result<()> {
    let status = std::process::Command::new("ip").args(args.split(' ')).status().context("running ip")?;
    if !status.success() {
        bail!("ip {args}: {status}");
    }
    Ok(())
}

/// `web-rtc-child`, inside the namespace: sets the LAN up, starts everything, runs the
/// script and prints [`Figures`].
pub async fn child(rounds: usize, blocks: u64) -> Result<()> {
    if !terminull_netns::inside() {
        bail!("web-rtc-child runs only inside its private network namespace (terminull-bench --only web-rtc)");
    }
    ip("link add lan0 type veth peer name lan1")?;
    // No IPv6 link-local addresses: one appearing a second later (after its duplicate
    // address detection) is a network change to Chromium, which then aborts the page's
    // navigation (ERR_NETWORK_CHANGED, seen once in CI).
    ip("link set lan0 addrgenmode none")?;
    ip("link set lan1 addrgenmode none")?;
    ip(&format!("addr add {LAN_ADDR}/24 dev lan0"))?;
    ip("link set lan0 up")?;
    ip("link set lan1 up")?;
    // The bridge offers the address it has on the default route.
    ip("route add default dev lan0")?;

    let tools = Tools::locate(None)?;
    let cwd = tempfile::tempdir()?;
    let home = tempfile::tempdir()?;
    let mut bridge = Bridge::start(&tools, home.path()).await?;
    let relay_dir = tempfile::tempdir()?;
    let relay =
        Helper::start(&tools.self_exe, &["relay-child", "--data", &relay_dir.path().display().to_string()]).await?;
    let relay_addr = relay.url.trim_start_matches("ws://").parse().context("the relay's address")?;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../relay/tests/fixtures/tls");
    let origin = tls_front::tls_front(relay_addr, &fixtures).await.map_err(anyhow::Error::msg)?;
    bridge.connect_relay(&relay.url);
    let server = lan::start(bridge.ctx.clone(), bridge.home.clone(), LanConfig::new("0.0.0.0:0".parse()?))
        .await
        .context("starting the LAN server")?;

    let mut client = bridge.in_process();
    let echo = setup::start_session(&mut client, cwd.path()).await?;
    setup::turn(&mut client, &echo, "hello").await?;
    // The floor: the Rust client's tap → first text on the LAN server.
    let (mut remote, _) = bridge.open_lan(&server).await?;
    let floor_session = setup::start_session(&mut remote, cwd.path()).await?;
    let rust_ms = setup::tap_to_first_text_ms(&mut remote, &floor_session, rounds * 2).await?;
    drop(remote);

    let link = bridge.page_pairing_link(Some(origin.replace("https://", "wss://")), None, &origin)?;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-web-rtc");
    let mut command = tokio::process::Command::new("node");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/bench/lan-rtc.mjs"))
        .args(["--link", &link, "--spki", tls_front::TEST_CERT_SPKI, "--echo", echo.as_str()])
        .args(["--rounds", &rounds.to_string(), "--blocks", &blocks.to_string()])
        .arg("--screenshots")
        .arg(&shots);
    let report = conversing::converse(command, Duration::from_secs(600), async |event: &str| match event {
        "drop-lan" => ip(&format!("addr del {LAN_ADDR}/24 dev lan0")).map_err(|e| e.to_string()),
        other => Err(format!("lan-rtc.mjs asked for {other}")),
    })
    .await
    .map_err(anyhow::Error::msg)?;
    let figures = Figures {
        lan: serde_json::from_value(report["lan"].clone()).context("the report's lan figures")?,
        relay: serde_json::from_value(report["relay"].clone()).context("the report's relay figures")?,
        rust_lan_tap_ms: median(rust_ms),
        path_blocks: report["path_blocks"].clone(),
    };
    println!("{}", serde_json::to_string(&figures)?);
    server.stop();
    relay.stop().await;
    bridge.service.shutdown().await;
    Ok(())
}

fn rows_of(f: &Figures) -> Vec<Row> {
    let tap = |t: &TapFigures| {
        format!("tap Send → first streamed text, echo (median of {}, max {:.0} ms)", t.turns, t.tap_max_ms)
    };
    let stream =
        |t: &TapFigures| format!("a turn of {} finished 1 KiB blocks, tap → the last in the DOM", t.stream_blocks);
    vec![
        Row::new(LAN_HOP, tap(&f.lan), f.lan.tap_ms, "ms")
            .floor("the Rust client, same turn, on the bridge's LAN server", f.rust_lan_tap_ms),
        Row::new(RELAY_HOP, tap(&f.relay), f.relay.tap_ms, "ms")
            .floor("the same page on the LAN data channel", f.lan.tap_ms),
        Row::new(LAN_HOP, stream(&f.lan), per_sec(&f.lan), "blocks/s"),
        Row::new(RELAY_HOP, stream(&f.relay), per_sec(&f.relay), "blocks/s")
            .floor("the same page on the LAN data channel", per_sec(&f.lan)),
    ]
}
