//! JSON-RPC peer figures: sequential round-trip latency and pipelined throughput over
//! an in-memory pipe, and notification throughput. A bench binary (`harness = false`).
//!
//! `cargo bench -p terminull-rpc --bench peer` (add `-- --quick` for a short run).

// A bench binary's output is its table.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use serde_json::json;
use terminull_rpc::{Incoming, memory_pair};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p) as usize]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let calls: usize = if quick { 2_000 } else { 20_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let ((client, _crx, _ct), (server, mut srx, _st)) = memory_pair();
        tokio::spawn(async move {
            while let Some(msg) = srx.recv().await {
                if let Incoming::Request(r) = msg {
                    let _ = server.respond(r.id, Ok(r.params)).await;
                }
            }
        });
        let params = json!({"text": "x".repeat(64)});

        let mut latencies = Vec::with_capacity(calls);
        for _ in 0..calls {
            let start = Instant::now();
            client.request_raw("echo", params.clone(), None).await.unwrap();
            latencies.push(start.elapsed());
        }
        latencies.sort();
        println!(
            "sequential request/response (memory pipe, {calls} calls): median {:.1?}, p90 {:.1?}, p99 {:.1?}",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.9),
            percentile(&latencies, 0.99)
        );

        let start = Instant::now();
        let mut inflight = tokio::task::JoinSet::new();
        for i in 0..calls {
            let c = client.clone();
            let p = params.clone();
            inflight.spawn(async move { c.request_raw("echo", p, None).await.map(|_| i) });
            if inflight.len() >= 64 {
                inflight.join_next().await.unwrap().unwrap().unwrap();
            }
        }
        while let Some(r) = inflight.join_next().await {
            r.unwrap().unwrap();
        }
        let t = start.elapsed();
        println!("pipelined requests, 64 in flight: {:.0} calls/s", calls as f64 / t.as_secs_f64());
    });
    runtime.block_on(async move {
        let ((a, _arx, _at), (_b, mut brx, _bt)) = memory_pair();
        let n = calls * 10;
        let block = json!({"block": {"type": "text", "ts": 1.5, "id": "m", "text": "x".repeat(200), "done": false}});
        let start = Instant::now();
        let sender = tokio::spawn(async move {
            for _ in 0..n {
                a.notify_raw("stream", block.clone()).await.unwrap();
            }
        });
        for _ in 0..n {
            brx.recv().await.unwrap();
        }
        sender.await.unwrap();
        let t = start.elapsed();
        println!("notifications (≈260 B stream blocks): {:.0} msgs/s", n as f64 / t.as_secs_f64());
    });
}
