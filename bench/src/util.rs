//! Clocks, percentiles, RSS, and the helper processes this binary starts from itself.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// Nanoseconds since the Unix epoch. Latencies across processes (the adapter stamps
/// its blocks) are differences of this clock; both ends run on this machine.
pub fn unix_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// The `t=<unix ns>;` stamp a benchmark payload starts with (echo-rs `bench blocks`).
pub fn stamp_of(text: &str) -> Option<u128> {
    let start = text.find("t=")? + 2;
    let rest = &text[start..];
    let end = rest.find(';')?;
    rest[..end].parse().ok()
}

/// Latency figures, in microseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Percentiles {
    /// Samples.
    pub n: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// p50 and p99 of `samples` (µs).
pub fn percentiles(mut samples: Vec<f64>) -> Percentiles {
    if samples.is_empty() {
        return Percentiles::default();
    }
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    Percentiles { n: samples.len(), p50_us: at(0.50), p99_us: at(0.99) }
}

/// The median of `samples`.
pub fn median(mut samples: Vec<f64>) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Resident set size of process `pid`, in KiB (`VmRSS` of /proc/<pid>/status).
pub fn rss_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no VmRSS in {path}"))
}

/// The direct children of `pid` (every thread's `children` list).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A helper process: this binary run with a hidden subcommand, which prints
/// `ready <url>` once serving and exits when its stdin closes, so it never outlives
/// the benchmark (and `kill_on_drop` covers a panic).
#[derive(Debug)]
pub struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    /// What it printed after `ready`.
    pub url: String,
}

impl Helper {
    /// Starts `exe args…` and waits for its `ready` line.
    pub async fn start(exe: &Path, args: &[&str]) -> Result<Self> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))?;
        let stdout = child.stdout.take().context("helper stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .with_context(|| format!("{} did not get ready in 30 s", args.join(" ")))??
            .with_context(|| format!("{} exited before it was ready", args.join(" ")))?;
        let Some(url) = line.strip_prefix("ready ") else { bail!("unexpected line from the helper: {line}") };
        Ok(Self { stdin: child.stdin.take(), url: url.to_owned(), child })
    }

    /// Its process id.
    pub fn pid(&self) -> Result<u32> {
        self.child.id().context("the helper has exited")
    }

    /// Closes its stdin and waits (bounded) for it to exit.
    pub async fn stop(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// Returns when stdin reaches end of file (the parent closed it or went away).
pub async fn stdin_closed() {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
}
