//! Bridge figures: adapter spawn + handshake time for the Rust echo adapter, bridge RSS
//! with 10 idle echo sessions, and the adapter's own RSS. A bench binary
//! (`harness = false`); build echo-rs first (`cargo build --release -p terminull-echo`).
//!
//! `cargo bench -p terminull-bridge --bench bridge` (add `-- --quick` for a short run).

// A bench binary's output is its table.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use terminull_bridge::daemon_client::Client;
use terminull_bridge::home::{Config, Home};
use terminull_bridge::host::{AdapterCommand, launch};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_protocol::control::{ControlMessage, SessionRequest};

/// echo-rs next to this bench binary's profile directory (target/<profile>/echo-rs).
fn echo_rs() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let profile = exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps");
    let bin = profile.join("echo-rs");
    assert!(bin.exists(), "build it first: cargo build --release -p terminull-echo ({} missing)", bin.display());
    bin
}

/// Resident set size of a process in KiB, from /proc.
fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 10 } else { 50 };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let echo = echo_rs();
    runtime.block_on(async {
        let mut times = Vec::new();
        let mut adapter_rss = 0;
        for _ in 0..rounds {
            let start = Instant::now();
            let mut hosted = launch(AdapterCommand::new(&echo), Duration::from_secs(30)).await.unwrap();
            times.push(start.elapsed());
            adapter_rss = rss_kib(&hosted.pid().to_string());
            hosted.shutdown().await;
        }
        times.sort();
        println!(
            "adapter spawn + handshake (echo-rs, {rounds} runs): median {:.2?}, p90 {:.2?}, max {:.2?}",
            times[times.len() / 2],
            times[times.len() * 9 / 10],
            times[times.len() - 1]
        );
        println!("echo-rs adapter RSS after handshake: {adapter_rss} KiB");

        let home = tempfile::tempdir().unwrap();
        let mut scan = ScanOptions::new(Home::at(home.path()), Config::default());
        scan.exe_dir = echo.parent().map(PathBuf::from);
        let before = rss_kib("self");
        let service =
            Service::start(Home::at(home.path()), Config::default(), scan, SessionPolicy::default()).await.unwrap();
        let mut client = Client::in_process(&service);
        let base = rss_kib("self");
        for n in [10, 100] {
            let have = service_sessions(&mut client).await;
            for _ in have..n {
                let mut kept = Vec::new();
                let request = ControlMessage::SessionRequest(SessionRequest::new("echo", home.path().display().to_string()));
                client.call(request, &mut kept).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = rss_kib("self");
            println!(
                "bridge RSS with {n} idle echo sessions: {now} KiB ({} KiB over the started service, {} KiB per session; before start {before} KiB)",
                now.saturating_sub(base),
                now.saturating_sub(base) / n as u64
            );
            if quick {
                break;
            }
        }
        service.shutdown().await;
    });
}

async fn service_sessions(client: &mut Client) -> usize {
    let mut kept = Vec::new();
    match client.call(ControlMessage::ListSessions(terminull_protocol::control::ListSessions {}), &mut kept).await {
        Ok(terminull_protocol::control::ReplyResult::Sessions { sessions }) => sessions.len(),
        _ => 0,
    }
}
