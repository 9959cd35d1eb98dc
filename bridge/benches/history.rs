//! Session history on disk: append throughput under each fsync policy, opening a large
//! log, and replay seeks (`since_seq`, `since_ts`) on a 100k-block log. A bench binary
//! (`harness = false`): it prints a table and exits; tests never assert on time.
//!
//! `cargo bench -p terminull-bridge --bench history` (add `-- --quick` for a short run).
//! The logs go to a temporary directory under `$TMPDIR`; set `TMPDIR` to measure another
//! disk (fsync figures depend entirely on it).

// A bench binary's output is its table.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use terminull_bridge::history::{HistoryStore, SessionLog, SessionMeta, SyncPolicy};
use terminull_protocol::blocks::Block;
use terminull_protocol::samples::realistic_session;

const BLOCKS: u64 = 100_000;

/// Appends `blocks` to a new session under `policy`; returns the log and the time taken.
fn append_all(store: &HistoryStore, id: &str, policy: SyncPolicy, blocks: &[Block]) -> (SessionLog, Duration) {
    let store = store.clone().with_sync_policy(policy);
    let mut log = store.create(SessionMeta::new(id.into(), "bench".into(), "/tmp")).expect("create");
    let start = Instant::now();
    for b in blocks {
        black_box(log.append(b.clone()).expect("append"));
    }
    log.sync().expect("sync");
    (log, start.elapsed())
}

/// Median and 99th percentile of `runs` calls of `f`.
fn latency(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..runs.min(20) {
        f();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    (times[runs / 2], times[(runs * 99 / 100).min(runs - 1)])
}

fn row(what: &str, figure: String, note: String) {
    println!("{what:<60} {figure:>16}  {note}");
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 100 } else { 1000 };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let store = HistoryStore::open(tmp.path().join("sessions")).expect("store");
    let all = realistic_session(BLOCKS);
    let bytes: usize = all.iter().map(|b| serde_json::to_vec(b).map_or(0, |v| v.len() + 10)).sum();
    println!("log: {BLOCKS} blocks of 45-block turns, about {:.0} MB, in {}", bytes as f64 / 1e6, tmp.path().display());
    println!("{:<60} {:>16}  note", "operation", "figure");

    let (log, t) = append_all(&store, "nosync", SyncPolicy::Never, &all);
    let mb = log.len_bytes() as f64 / 1e6;
    row(
        "append, no fsync (100k blocks)",
        format!("{:.0} k blocks/s", BLOCKS as f64 / t.as_secs_f64() / 1e3),
        format!("{:.0} MB/s, {:.2} µs/block", mb / t.as_secs_f64(), t.as_secs_f64() * 1e6 / BLOCKS as f64),
    );
    drop(log);

    let n = if quick { 9_000 } else { 45_000 };
    let (_, t) = append_all(&store, "policy", SyncPolicy::default(), &all[..n]);
    row(
        &format!("append, default policy ({}k blocks)", n / 1000),
        format!("{:.0} k blocks/s", n as f64 / t.as_secs_f64() / 1e3),
        format!("2 fsyncs per 45-block turn: {:.1} µs/block", t.as_secs_f64() * 1e6 / n as f64),
    );

    let n = if quick { 500 } else { 2_000 };
    let (_, t) = append_all(&store, "every", SyncPolicy::EveryBlock, &all[..n]);
    row(
        &format!("append, fsync every block ({n} blocks)"),
        format!("{:.1} k blocks/s", n as f64 / t.as_secs_f64() / 1e3),
        format!("{:.0} µs/block", t.as_secs_f64() * 1e6 / n as f64),
    );

    let id = "nosync".into();
    let (open, _) = latency(if quick { 5 } else { 20 }, || drop(black_box(store.open_session(&id).expect("open"))));
    row("open a 100k-block log (tail check, index check)", format!("{open:.2?}"), "median".into());

    let mut log = store.open_session(&id).expect("open");
    let start = Instant::now();
    log.repair_index().expect("rebuild");
    row("rebuild the index of a 100k-block log", format!("{:.2?}", start.elapsed()), "full scan of the log".into());

    let last = log.last_seq();
    for back in [1u64, 45, 1_000] {
        let (p50, p99) = latency(runs, || {
            black_box(log.read_since_seq(last - back).expect("read"));
        });
        let got = log.read_since_seq(last - back).expect("read").len();
        row(
            &format!("since_seq(last - {back}) on 100k ({got} blocks after compaction)"),
            format!("{p50:.2?}"),
            format!("median; p99 {p99:.2?}"),
        );
    }
    let last_turn_ts = 1e9 + 10.0 * ((BLOCKS - 1) / 45) as f64 - 0.001;
    let (p50, p99) = latency(runs, || {
        black_box(log.read_since_ts(last_turn_ts).expect("read"));
    });
    let got = log.read_since_ts(last_turn_ts).expect("read").len();
    row(
        &format!("since_ts(start of the last turn) on 100k ({got} blocks)"),
        format!("{p50:.2?}"),
        format!("median; p99 {p99:.2?}"),
    );
    let start = Instant::now();
    let n = log.read_since_seq(last / 2).expect("read").len();
    let t = start.elapsed();
    row(
        "since_seq(last / 2) on 100k (50k blocks, compacted)",
        format!("{t:.2?}"),
        format!("{n} blocks kept, {:.0} MB/s", mb / 2.0 / t.as_secs_f64()),
    );
    let start = Instant::now();
    let n = log.read_all().expect("read").len();
    let t = start.elapsed();
    row(
        "read_all on 100k (compacted)",
        format!("{t:.2?}"),
        format!("{n} blocks kept, {:.0} MB/s", mb / t.as_secs_f64()),
    );

    let start = Instant::now();
    let stats = log.compact().expect("compact");
    row(
        "compact a 100k-block log",
        format!("{:.2?}", start.elapsed()),
        format!(
            "{} → {} blocks, {:.0} → {:.1} MB",
            stats.blocks_before,
            stats.blocks_after,
            stats.bytes_before as f64 / 1e6,
            stats.bytes_after as f64 / 1e6
        ),
    );
}
