//! Per adapter, in one run: the time from an app's `user_message` to the first block the
//! agent produced, as the app sees it through the daemon; and the time from starting
//! the raw CLI with the same prompt to its first stdout line. Both against the scripted
//! model server, offline, in a private network namespace.
//!
//! `cargo bench -p terminull-agent-tests --bench first_block` (needs the CLIs from
//! scripts/install-agents.sh). `BENCH_RUNS` sets the runs per measure (default 7).

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

use std::process::Stdio;
use std::time::{Duration, Instant};

use terminull_agent_tests::agents::{self, Agent};
use terminull_agent_tests::netns;
use terminull_agent_tests::rig::{Mode, Rig, TurnPlan};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PROMPT: &str = "mock:plain hello";

fn main() {
    let cli_dir = agents::installed_bin_dir();
    if !netns::inside() {
        if !cli_dir.join("claude").exists() || !cli_dir.join("codex").exists() {
            println!("skipped: the agent CLIs are not installed (scripts/install-agents.sh)");
            return;
        }
        let exe = std::env::current_exe().expect("the bench binary");
        match netns::run_in_netns(std::process::Command::new(exe).args(std::env::args().skip(1))) {
            Ok(output) => print!("{output}"),
            Err(error) => panic!("{error}"),
        }
        return;
    }
    let runs: usize = std::env::var("BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(7);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    println!("first output after a prompt, {runs} runs each (median / min / max)\n");
    println!(
        "| adapter | bridge: user_message → first agent block | raw CLI: start → first stdout line | bridge: session start → agent_info |"
    );
    println!("|---|---|---|---|");
    for agent in [Agent::ClaudeCode, Agent::Codex] {
        let (bridge, opening) = runtime.block_on(through_bridge(agent, runs, &cli_dir));
        let raw = runtime.block_on(raw_cli(agent, runs, &cli_dir));
        println!("| {} | {} | {} | {} |", agent.id(), summary(bridge), summary(raw), summary(opening));
    }
}

/// Each run: a fresh daemon and session, then one turn; returns the turn's
/// time to the first agent block and the session's time to `agent_info`.
async fn through_bridge(agent: Agent, runs: usize, cli_dir: &std::path::Path) -> (Vec<Duration>, Vec<Duration>) {
    let (mut first, mut opening) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut rig = Rig::start(agent, Mode::Live { cli_dir: cli_dir.to_owned() }).await.expect("rig");
        let started = Instant::now();
        rig.open_session(None).await.expect("session");
        opening.push(started.elapsed());
        rig.turn(PROMPT, TurnPlan::default()).await.expect("turn");
        first.push(rig.last_first_block.expect("a block"));
    }
    (first, opening)
}

/// Each run: the bare CLI with the same prompt and environment, no adapter.
async fn raw_cli(agent: Agent, runs: usize, cli_dir: &std::path::Path) -> Vec<Duration> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(terminull_model_server::serve(listener, terminull_model_server::Config::default()));
    let mut times = Vec::new();
    for _ in 0..runs {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = tokio::process::Command::new(cli_dir.join(agent.cli()));
        cmd.envs(agent.environment(dir.path(), &url).expect("env")).current_dir(dir.path()).kill_on_drop(true);
        match agent {
            Agent::ClaudeCode => cmd.args([
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
            ]),
            Agent::Codex => cmd.args(["exec", "--json", "--skip-git-repo-check", "--", PROMPT]),
            other => panic!("no bare command line for {other:?} in this bench"),
        };
        let started = Instant::now();
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
        // Claude reads the prompt from stdin and must keep it open; codex must see it closed.
        let mut stdin = child.stdin.take();
        if agent == Agent::ClaudeCode {
            let line = serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":PROMPT}]},"parent_tool_use_id":null,"session_id":""});
            let pipe = stdin.as_mut().expect("stdin");
            pipe.write_all(format!("{line}\n").as_bytes()).await.expect("write");
        } else {
            stdin = None;
        }
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        lines.next_line().await.expect("read").expect("a first line");
        times.push(started.elapsed());
        drop(stdin);
        let _ = child.kill().await;
    }
    times
}

fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    format!("{} / {} / {}", ms(times[times.len() / 2]), ms(times[0]), ms(times[times.len() - 1]))
}
