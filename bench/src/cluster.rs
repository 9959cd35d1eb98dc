//! The relay as a cluster (issue 25): relay nodes, each its own process (`relay-child
//! --store postgres://… --bus nats://…`), on one Postgres and one NATS started here on
//! loopback (the relay tests' throwaway servers). A raw bridge sends pre-sealed,
//! pre-signed batches as in the relay section, so only the relays' work (and NATS's)
//! is timed:
//!
//! - same node vs cross node: the bridge on node 1, its device on node 1 or on node 2
//!   (every frame then crosses NATS): throughput of a flood, and one frame at a time
//!   for p50/p99;
//! - the aggregate with 1, 2 and 3 nodes: six bridge/device pairs flooding at once,
//!   each bridge on node `i mod n` and its device on the next node (cross-node
//!   whenever there are two or more).
//!
//! The floor is the single relay process of the same run (the same pairs on a relay
//! without store or bus).

use std::path::Path;

use anyhow::{Context, Result, bail};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::RelayFrame;

use crate::report::Row;
use crate::sections::{
    FLOOD_BATCH, Scale, Ws, flood, latency_rows, raw_bridge, raw_device, read_frame, round_trips, sealed_batch,
    send_frame,
};
use crate::setup::Tools;
use crate::util::{Helper, Percentiles};

#[path = "../../relay/tests/support/servers.rs"]
#[allow(dead_code, clippy::print_stdout)]
mod servers;

const HOP: &str = "relay cluster (Postgres + NATS)";
/// Bridge/device pairs flooding at once for the aggregate figures.
const PAIRS: usize = 6;

/// Why the cluster cannot run here, if it cannot.
pub fn missing() -> Option<String> {
    let found = |bin: &str| {
        std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(bin).is_file()))
            || Path::new("/usr/lib/postgresql").exists() && bin == "postgres"
    };
    let missing: Vec<&str> = ["postgres", "nats-server"].into_iter().filter(|b| !found(b)).collect();
    (!missing.is_empty())
        .then(|| format!("{} missing (scripts/install-test-deps.sh installs them)", missing.join(", ")))
}

/// One relay process: a node of the cluster, or alone.
async fn node(tools: &Tools, data: &Path, cluster: Option<(&str, &str)>) -> Result<Helper> {
    let data = data.display().to_string();
    let mut args = vec!["relay-child", "--data", &data];
    if let Some((store, bus)) = cluster {
        args.extend(["--store", store, "--bus", bus]);
    }
    Helper::start(&tools.self_exe, &args).await
}

/// A linked pair: the raw bridge's socket (on one node), the device's (on another),
/// and the batches to send for the device's `conn`.
struct Pair {
    bridge: Ws,
    device: Ws,
    single: String,
    batch: String,
}

/// Registers a bridge on `bridge_url`, authenticates its device on `device_url` (until
/// that node sees the bridge online: across nodes it learns it through the bus), and
/// links them.
async fn pair(bridge_url: &str, device_url: &str) -> Result<Pair> {
    let bridge = Identity::generate();
    let device = Identity::generate();
    let mut bws = raw_bridge(bridge_url, &bridge, &device).await?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    // Another node learns of the registration through the store and the bus: until
    // then it refuses the device (`unknown_device`) or says the bridge is offline.
    let mut dws = loop {
        let last = match raw_device(device_url, &bridge, &device, false).await {
            Ok((ws, true)) => break ws,
            Ok((_, false)) => "the bridge offline".to_owned(),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() > deadline {
            bail!("the device's node never saw the bridge online: {last}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let bridge_id = bridge.public().bridge_id();
    let (hello, _) = terminull_protocol::crypto::handshake::DeviceHandshake::start(&device, bridge_id.as_str());
    send_frame(&mut dws, &RelayFrame::LinkHello(hello)).await?;
    let conn = loop {
        if let RelayFrame::LinkHello(h) = read_frame(&mut bws).await? {
            break h.conn.context("link_hello reached the bridge without its conn")?;
        }
    };
    let single = sealed_batch(&bridge, conn, 1)?;
    let batch = sealed_batch(&bridge, conn, FLOOD_BATCH)?;
    // The first block makes the session resumable (a token is issued): not timed.
    round_trips(&mut bws, &mut dws, &single, 1).await?;
    Ok(Pair { bridge: bws, device: dws, single, batch })
}

/// Throughput of one pair's flood (blocks/s) and its one-at-a-time latency.
async fn measure(mut p: Pair, scale: &Scale) -> Result<(f64, Percentiles)> {
    let (rate, mut device) = flood(&mut p.bridge, p.device, &p.batch, FLOOD_BATCH as u64, scale.forward_frames).await?;
    let latency = round_trips(&mut p.bridge, &mut device, &p.single, scale.forward_rounds).await?;
    Ok((rate, latency))
}

/// The pairs flooding at once: the sum of their rates (each over its own, nearly equal, span).
async fn aggregate(pairs: Vec<Pair>, blocks: u64) -> Result<f64> {
    let floods = pairs.into_iter().map(|mut p| async move {
        let (rate, _) = flood(&mut p.bridge, p.device, &p.batch, FLOOD_BATCH as u64, blocks).await?;
        anyhow::Ok(rate)
    });
    let rates = futures::future::join_all(floods).await;
    rates.into_iter().sum::<Result<f64>>()
}

/// The section: its rows.
pub async fn cluster(tools: &Tools, scale: &Scale) -> Result<Vec<Row>> {
    if let Some(why) = missing() {
        bail!("the cluster section needs Postgres and NATS: {why}");
    }
    // The floor: one relay process, no store, no bus.
    let alone_dir = tempfile::tempdir()?;
    let alone = node(tools, alone_dir.path(), None).await?;
    let (alone_rate, alone_latency) = measure(pair(&alone.url, &alone.url).await?, scale).await?;
    let per_pair = scale.forward_frames / PAIRS as u64;
    let mut alone_pairs = Vec::new();
    for _ in 0..PAIRS {
        alone_pairs.push(pair(&alone.url, &alone.url).await?);
    }
    let alone_aggregate = aggregate(alone_pairs, per_pair).await?;
    alone.stop().await;

    let (pg, nats) = tokio::task::spawn_blocking(|| (servers::Postgres::start(), servers::Nats::start()))
        .await
        .context("starting Postgres and NATS")?;
    let store = pg.url("postgres");
    let bus = nats.url();
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?, tempfile::tempdir()?];
    let mut nodes = Vec::new();
    for dir in &dirs {
        nodes.push(node(tools, dir.path(), Some((&store, &bus))).await?);
    }
    let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();

    let (same_rate, same_latency) = measure(pair(&urls[0], &urls[0]).await?, scale).await?;
    let (cross_rate, cross_latency) = measure(pair(&urls[0], &urls[1]).await?, scale).await?;
    let mut rows = vec![
        Row::new(HOP, "1 KiB blocks/s, bridge and device on node 1 (same node)", same_rate, "blocks/s")
            .floor("one relay process, no store, no bus", alone_rate),
        Row::new(HOP, "1 KiB blocks/s, bridge on node 1, device on node 2 (cross node)", cross_rate, "blocks/s")
            .floor("one relay process, no store, no bus", alone_rate),
    ];
    rows.extend(latency_rows(&format!("{HOP}, same node"), same_latency, "one relay process", alone_latency));
    rows.extend(latency_rows(&format!("{HOP}, cross node"), cross_latency, "one relay process", alone_latency));
    for n in 1..=urls.len() {
        let mut pairs = Vec::new();
        for i in 0..PAIRS {
            pairs.push(pair(&urls[i % n], &urls[(i + 1) % n]).await?);
        }
        let total = aggregate(pairs, per_pair).await?;
        let how = if n == 1 { "all on node 1" } else { "each device on the node after its bridge's" };
        rows.push(
            Row::new(
                HOP,
                format!("aggregate 1 KiB blocks/s, {PAIRS} pairs at once, {n} node(s), {how}"),
                total,
                "blocks/s",
            )
            .floor(&format!("one relay process, the same {PAIRS} pairs"), alone_aggregate),
        );
    }
    for node in nodes {
        node.stop().await;
    }
    drop((pg, nats));
    Ok(rows)
}
