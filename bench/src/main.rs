//! `terminull-bench`: the end-to-end benchmark. Starts the real pieces on loopback —
//! the echo adapter, the bridge's dispatcher, its LAN server, the relay, the device
//! client, the `terminull up` daemon — and reports each hop beside its floor measured
//! in the same run: a raw pipe, a bare WebSocket forwarder, the one-core crypto
//! ceiling, the final text's size. A table on stdout, the same rows as JSON.
//!
//! ```sh
//! cargo build --release -p terminull-echo -p terminull-bridge
//! cargo run --release -p terminull-bench -- --quick   # under a minute
//! cargo run --release -p terminull-bench              # the full run (docs/performance.md)
//! ```
//!
//! Everything listens on 127.0.0.1, port 0. Tests never assert on these figures.

// A benchmark's output is its table.
#![allow(clippy::print_stdout)]

mod cluster;
mod helpers;
mod report;
mod sections;
mod setup;
mod streaming;
mod util;
mod web;
mod web_rtc;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::report::Row;
use crate::sections::Scale;
use crate::setup::{Bridge, Tools};

#[derive(Debug, Parser)]
#[command(about = "Measure every hop of terminull against its floor, on loopback")]
struct Cli {
    /// A shorter run (under a minute): smaller counts, 1,000 idle relay connections.
    #[arg(long)]
    quick: bool,
    /// The smallest run, for the structure test only (figures are meaningless).
    #[arg(long, hide = true)]
    tiny: bool,
    /// Where to write the JSON report.
    #[arg(long, default_value = "target/bench-e2e.json")]
    out: PathBuf,
    /// Where `echo-rs` and `terminull` are (default: next to this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Run only these sections (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Section>,
    #[command(subcommand)]
    helper: Option<Helper>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Section {
    /// echo-rs → the dispatcher, vs a raw pipe.
    Adapter,
    /// bridge → device through the relay and the LAN server.
    Transport,
    /// The relay alone: forwarding and RSS per idle connection.
    Relay,
    /// session_resume → replay_done.
    Resume,
    /// A streamed answer's bytes on every hop (adapter stdout, history, each path).
    Streaming,
    /// Daemon and adapter RSS.
    Memory,
    /// Relay nodes on one Postgres and one NATS: same-node vs cross-node forwarding, and
    /// the aggregate with 1, 2 and 3 nodes (needs `postgres` and `nats-server`).
    Cluster,
    /// The web app in Chromium: the list's first render, tap → first text, scrolling
    /// (needs Debian's Chromium and `web/node_modules`).
    Web,
    /// The app from the relay's https origin: its LAN data channel beside the relay
    /// (Chromium, in a private network namespace: needs root).
    WebRtc,
}

/// The helper processes this binary runs of itself.
#[derive(Debug, Subcommand)]
enum Helper {
    /// The relay, configured for the benchmark.
    #[command(hide = true)]
    RelayChild {
        /// Its data directory.
        #[arg(long)]
        data: PathBuf,
        /// A Postgres store (a cluster node).
        #[arg(long)]
        store: Option<String>,
        /// The NATS bus joining the nodes.
        #[arg(long)]
        bus: Option<String>,
    },
    /// The bare WebSocket forwarder.
    #[command(hide = true)]
    ForwarderChild,
    /// The web-rtc section's body, inside its private network namespace.
    #[command(hide = true)]
    WebRtcChild {
        /// Taps per path (times two).
        #[arg(long)]
        rounds: usize,
        /// Blocks of the throughput turn.
        #[arg(long)]
        blocks: u64,
    },
    /// Writes an adapter's stream lines to stdout.
    #[command(hide = true)]
    PipeSource {
        /// Lines.
        count: u64,
        /// Bytes of text per block.
        size: usize,
        /// Microseconds between lines.
        pace_us: u64,
    },
}

#[derive(Debug, Serialize)]
struct Report {
    mode: &'static str,
    started_unix: u64,
    seconds: f64,
    machine: Machine,
    sections: Vec<Section>,
    crypto_one_core_us: Option<CryptoUs>,
    rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
struct Machine {
    cpus: usize,
    kernel: String,
}

#[derive(Debug, Serialize)]
struct CryptoUs {
    seal_and_sign: f64,
    verify: f64,
    open: f64,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Some(Helper::PipeSource { count, size, pace_us }) = cli.helper {
        return helpers::pipe_source(count, size, pace_us);
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    runtime.block_on(async move {
        match cli.helper {
            Some(Helper::RelayChild { data, store, bus }) => helpers::relay_child(data, store, bus).await,
            Some(Helper::ForwarderChild) => helpers::forwarder_child().await,
            Some(Helper::WebRtcChild { rounds, blocks }) => web_rtc::child(rounds, blocks).await,
            _ => run(cli).await,
        }
    })
}

async fn run(cli: Cli) -> Result<()> {
    let (mode, scale) = match (cli.tiny, cli.quick) {
        (true, _) => ("tiny", Scale::tiny()),
        (_, true) => ("quick", Scale::quick()),
        _ => ("full", Scale::full()),
    };
    let tools = Tools::locate(cli.bin_dir.clone())?;
    let sections = if cli.only.is_empty() {
        let mut all = vec![
            Section::Adapter,
            Section::Transport,
            Section::Relay,
            Section::Resume,
            Section::Streaming,
            Section::Memory,
        ];
        // The browser runs only where it is installed, and never in the structure test's
        // tiny mode unless asked for (`--only web`).
        match (cli.tiny, cluster::missing()) {
            (false, None) => all.push(Section::Cluster),
            (false, Some(why)) => println!("cluster section skipped: {why}"),
            (true, _) => {}
        }
        match (cli.tiny, web::missing()) {
            (false, None) => all.push(Section::Web),
            (false, Some(why)) => println!("web section skipped: {why}"),
            (true, _) => {}
        }
        match (cli.tiny, web_rtc::missing()) {
            (false, None) => all.push(Section::WebRtc),
            (false, Some(why)) => println!("web-rtc section skipped: {why}"),
            (true, _) => {}
        }
        all
    } else {
        cli.only.clone()
    };
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    println!("terminull-bench ({mode}): {sections:?}");
    let cwd = tempfile::tempdir()?;
    let bridge_home = tempfile::tempdir()?;
    let needs_bridge = sections.iter().any(|s| matches!(s, Section::Adapter | Section::Transport | Section::Streaming));
    let mut bridge = match needs_bridge {
        true => Some(Bridge::start(&tools, bridge_home.path()).await.context("starting the bridge")?),
        false => None,
    };
    let needs_floor = sections.iter().any(|s| matches!(s, Section::Transport | Section::Relay));
    let forwarder = match needs_floor {
        true => Some(sections::forwarder(&tools, &scale).await.context("the bare forwarder")?),
        false => None,
    };
    let crypto = match sections.contains(&Section::Transport) {
        true => Some(sections::crypto(scale.crypto_ops)?),
        false => None,
    };
    let mut rows = Vec::new();
    for section in &sections {
        let t = Instant::now();
        let got = match (section, bridge.as_mut(), forwarder, crypto) {
            (Section::Adapter, Some(b), _, _) => sections::adapter_hop(&tools, b, &scale, cwd.path()).await,
            (Section::Transport, Some(b), Some(f), Some(c)) => {
                sections::bridge_to_client(&tools, b, &scale, cwd.path(), f, c).await
            }
            (Section::Relay, _, Some(f), _) => sections::relay(&tools, &scale, f).await,
            (Section::Resume, _, _, _) => sections::resume(&tools, &scale, cwd.path()).await,
            (Section::Streaming, Some(b), _, _) => streaming::streaming(&tools, b, &scale, cwd.path()).await,
            (Section::Memory, _, _, _) => sections::memory(&tools, &scale, cwd.path()).await,
            (Section::Cluster, _, _, _) => cluster::cluster(&tools, &scale).await,
            (Section::Web, _, _, _) => web::web(&tools, &scale, cwd.path()).await,
            (Section::WebRtc, _, _, _) => web_rtc::web_rtc(&tools, &scale).await,
            _ => Err(anyhow::anyhow!("the prerequisites of {section:?} were not started")),
        };
        let got = got.with_context(|| format!("section {section:?}"))?;
        println!("  {section:?}: {} rows in {:.1} s", got.len(), t.elapsed().as_secs_f64());
        rows.extend(got);
    }
    if let Some(b) = bridge.take() {
        b.service.shutdown().await;
    }
    let report = Report {
        mode,
        started_unix,
        seconds: started.elapsed().as_secs_f64(),
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_owned(),
        },
        sections,
        crypto_one_core_us: crypto.map(|c| CryptoUs {
            seal_and_sign: c.seal_us + c.sign_us,
            verify: c.verify_us,
            open: c.open_us,
        }),
        rows,
    };
    println!();
    print!("{}", report::markdown(&report.rows));
    if let Some(c) = &report.crypto_one_core_us {
        println!(
            "\none core, 1 KiB block (signed in batches of 64): seal+sign {:.1} µs, relay verify {:.1} µs, device open {:.1} µs",
            c.seal_and_sign, c.verify, c.open
        );
    }
    if let Some(dir) = cli.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&cli.out, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", cli.out.display()))?;
    println!("{:.1} s; JSON in {}", report.seconds, cli.out.display());
    Ok(())
}
