//! The scenarios: what the app sends and what it must see. The live tests (real CLI)
//! and the replay tests (recorded CLI) run exactly these checks.

use std::collections::HashMap;
use std::fmt::Write as _;

use anyhow::{Context, bail, ensure};
use serde_json::Value;
use terminull_adapter_sdk::tap::{TapEvent, TapRecord};
use terminull_bridge::chat::PermissionAnswer;
use terminull_model_server::PLAIN_TEXT;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{Block, EndReason, ToolStatus};

use crate::agents::{Agent, Lease};
use crate::rig::{InterruptAt, Mode, Rig, TurnPlan};

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A short answer; the session's `agent_info`; usage at the end.
    Plain,
    /// Thinking, a shell tool call whose result holds the real command output, a final
    /// text quoting it; then a second turn that continues the same agent conversation.
    ToolRoundTrip,
    /// A file write the CLI asks permission for: denied, then allowed (Claude Code).
    /// Codex (permission mode `ask`): a shell command denied (it does not run), then
    /// allowed (its output arrives), then a patch allowed (its diff arrives).
    Permission,
    /// The permission mode maps to the CLI's sandbox: a write under `read-only` fails,
    /// under the default `workspace-write` it lands (Codex).
    Sandbox,
    /// A slow answer interrupted mid-stream; the next turn works.
    Interrupt,
    /// The model answers with an error; the turn ends in error and the next one works.
    ModelError,
    /// An answer over 50 KB.
    Long,
    /// A shell call with a fresh HOME and no settings file at all (the CLI's defaults):
    /// its result still holds the command's output (Gemini CLI, whose default
    /// interactive shell reported none).
    ShellDefaults,
    /// The model fails twice (`mock:flaky`), the CLI retries: the app sees a `progress`
    /// saying so, done once the model answers; the turn completes with the answer.
    Retry,
    /// The model always fails (`mock:error`), the CLI retries and gives up: retry
    /// `progress`, then an `error` and `session_end` error; the next turn works.
    RetryGiveUp,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 10] = [
        Scenario::Plain,
        Scenario::ToolRoundTrip,
        Scenario::Permission,
        Scenario::Sandbox,
        Scenario::Interrupt,
        Scenario::ModelError,
        Scenario::Long,
        Scenario::ShellDefaults,
        Scenario::Retry,
        Scenario::RetryGiveUp,
    ];

    /// The fixture's file stem.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Plain => "plain",
            Scenario::ToolRoundTrip => "tool-round-trip",
            Scenario::Permission => "permission",
            Scenario::Sandbox => "sandbox",
            Scenario::Interrupt => "interrupt",
            Scenario::ModelError => "model-error",
            Scenario::Long => "long",
            Scenario::ShellDefaults => "shell-defaults",
            Scenario::Retry => "retry",
            Scenario::RetryGiveUp => "retry-give-up",
        }
    }

    /// Whether the scenario exists for `agent`: permission requests only where the CLI
    /// can ask through its machine interface; the sandbox mode is Codex's. Two model
    /// errors are left out: OpenCode 1.18.33 retries a failed model call five times over
    /// ~65 s with no setting to stop it (its adapter's error path is Kilo's, which is
    /// tested), Hermes answers a failed model call with a normal text reply and
    /// `end_turn`, so nothing in its ACP stream says it failed, and Droid 0.225.2 retries
    /// for about four minutes before it reports the error. Copilot CLI 1.0.102, like Hermes,
    /// retries five times, then answers with an `Error: …` text and `end_turn`.
    pub fn applies_to(self, agent: Agent) -> bool {
        match self {
            Scenario::Permission => {
                matches!(
                    agent,
                    Agent::ClaudeCode
                        | Agent::Codex
                        | Agent::OpenCode
                        | Agent::Kilo
                        | Agent::Gemini
                        | Agent::Hermes
                        | Agent::Qwen
                        | Agent::Copilot
                )
            }
            Scenario::ShellDefaults => agent == Agent::Gemini,
            Scenario::Sandbox => agent == Agent::Codex,
            Scenario::ModelError => !matches!(agent, Agent::OpenCode | Agent::Hermes | Agent::Droid | Agent::Copilot),
            // The CLIs that retry a failed model call on their own (docs/agents.md).
            Scenario::Retry | Scenario::RetryGiveUp => {
                matches!(agent, Agent::OpenCode | Agent::Hermes | Agent::Droid | Agent::Copilot)
            }
            _ => true,
        }
    }
}

/// Whether a live run of `scenario` is kept as a fixture and replayed. Not Pi's long
/// answer: pi repeats the whole message so far in every streamed event, so its 64 KiB
/// answer is a 56 MB recording (the live test still runs it).
/// Nor the shell with default settings: a replay has no settings to leave out. Nor the
/// retries: Hermes and OpenCode tell of them on stderr and droid in its log, which a
/// recording does not hold (their parsing is unit-tested in each adapter).
pub fn is_replayed(agent: Agent, scenario: Scenario) -> bool {
    scenario.applies_to(agent)
        && !(agent == Agent::Pi && scenario == Scenario::Long)
        && !matches!(scenario, Scenario::ShellDefaults | Scenario::Retry | Scenario::RetryGiveUp)
}

/// What a scenario run produced.
#[derive(Debug)]
pub struct Outcome {
    /// Every block the app saw, one line each.
    pub transcript: String,
    /// What the CLI said and heard (the fixture, when recorded live).
    pub recording: Vec<TapRecord>,
}

/// Runs `scenario` for `agent` and checks what the app sees.
pub async fn run(agent: Agent, scenario: Scenario, mode: Mode) -> anyhow::Result<Outcome> {
    let mut rig = Rig::start(agent, mode).await?;
    let mut seen = Vec::new();
    let result = play(&mut rig, scenario, &mut seen).await;
    let transcript = render(&seen);
    if let Err(error) = result {
        bail!("{error:#}\n--- blocks:\n{transcript}--- daemon log:\n{}", tail(&rig.daemon_log(), 60));
    }
    rig.stop();
    let recording = rig.take_recording(1)?;
    check_recording(agent, scenario, &recording)
        .with_context(|| format!("the recorded CLI processes: {:?}", recorded_spawns(&recording)))?;
    Ok(Outcome { transcript, recording })
}

/// What the CLI's own processes show: a persistent agent keeps one process for both
/// turns; a per-turn one starts one per turn and resumes in the second (Codex: the
/// very thread the first started).
fn check_recording(agent: Agent, scenario: Scenario, recording: &[TapRecord]) -> anyhow::Result<()> {
    let spawns = recorded_spawns(recording);
    ensure!(!spawns.is_empty(), "the CLI was started and recorded");
    if scenario == Scenario::ToolRoundTrip {
        match agent.lease() {
            Lease::Persistent => ensure!(spawns.len() == 1, "one {} process served both turns", agent.cli()),
            Lease::PerTurnForkedOffline { fork_flag } => {
                ensure!(spawns.len() == 3, "one {} process, then a failed resume and a fork", agent.cli());
                ensure!(spawns[2].iter().any(|a| a.starts_with(fork_flag)), "the second turn forks the first");
            }
            Lease::PerTurn { resume_flag } => {
                ensure!(spawns.len() == 2, "one {} process per turn", agent.cli());
                ensure!(spawns[1].iter().any(|a| a.starts_with(resume_flag)), "the second turn resumes");
            }
        }
        if agent == Agent::Codex {
            // One app-server thread served both turns.
            let sent = |method: &str| {
                recording
                    .iter()
                    .filter(|r| match &r.event {
                        TapEvent::In { input } => {
                            serde_json::from_str::<serde_json::Value>(input).is_ok_and(|v| v["method"] == method)
                        }
                        _ => false,
                    })
                    .count()
            };
            ensure!(sent("thread/start") == 1, "one thread/start, found {}", sent("thread/start"));
            ensure!(sent("turn/start") == 2, "two turn/start, found {}", sent("turn/start"));
        }
    }
    Ok(())
}

/// Runs `terminull adapter check` on `agent`'s adapter with the real CLI from `cli_dir`
/// against the scripted model server (its test turn runs a tool call); returns the
/// report, or an error holding it when a check failed.
pub async fn adapter_check(agent: Agent, cli_dir: &std::path::Path) -> anyhow::Result<String> {
    let bins = crate::workspace::bin_dir();
    let dir = tempfile::tempdir()?;
    let addr = crate::rig::start_model_server(dir.path()).await?;
    let path = std::env::join_paths(
        std::iter::once(cli_dir.to_owned()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )?;
    let output = tokio::process::Command::new(bins.join("terminull"))
        .args(["adapter", "check", "--message", "mock:tool please run it"])
        .arg(bins.join(format!("terminull-{}", agent.id())))
        .envs(agent.environment(dir.path(), &format!("http://{addr}"))?)
        .env("PATH", path)
        .current_dir(dir.path())
        .output()
        .await?;
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    ensure!(output.status.success(), "adapter check failed ({}):\n{report}", output.status);
    Ok(report)
}

/// Writes `recording` as the fixture of `agent`'s `scenario`; returns its path.
pub fn save_fixture(agent: Agent, scenario: Scenario, recording: &[TapRecord]) -> anyhow::Result<std::path::PathBuf> {
    let dir = crate::workspace::fixtures(agent.id());
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}.jsonl", scenario.name()));
    let mut text = String::new();
    for record in recording {
        text.push_str(&serde_json::to_string(record)?);
        text.push('\n');
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

async fn play(rig: &mut Rig, scenario: Scenario, seen: &mut Vec<Block>) -> anyhow::Result<()> {
    let plain = TurnPlan::default();
    if scenario == Scenario::ShellDefaults {
        // A fresh HOME: nothing the test environment wrote (the CLI's credentials and
        // endpoint stay in its environment).
        for entry in std::fs::read_dir(rig.root().join("home"))? {
            let path = entry?.path();
            if path.is_dir() { std::fs::remove_dir_all(&path)? } else { std::fs::remove_file(&path)? }
        }
    }
    let opening = rig.open_session(None).await?;
    seen.extend(opening.iter().cloned());
    check_agent_info(rig.agent, &opening)?;
    match scenario {
        Scenario::Plain => {
            let blocks = turn(rig, seen, "mock:plain hello", plain).await?;
            check_completed(&blocks)?;
            ensure!(final_text(&blocks).as_deref() == Some(PLAIN_TEXT), "the answer is the scripted plain text");
            let usage = end_usage(&blocks).context("session_end carries usage")?;
            ensure!(usage.output_tokens.unwrap_or(0) > 0, "output tokens are counted: {usage:?}");
        }
        Scenario::ToolRoundTrip => {
            // Copilot CLI asks before any shell command, even `echo`.
            let allow = TurnPlan { permission: Some(PermissionAnswer::Allow), ..plain };
            let first = turn(rig, seen, "mock:tool please run it", allow).await?;
            check_tool_round_trip(&first)?;
            let second = turn(rig, seen, "mock:tool once more", allow).await?;
            check_tool_round_trip(&second)?;
            let (n1, n2) = (history_len(&first)?, history_len(&second)?);
            ensure!(n2 > n1, "the second turn continues the conversation: the model saw {n1} then {n2} messages");
        }
        Scenario::Permission => {
            if rig.agent == Agent::Codex {
                // Codex asks only in permission mode `ask` (approval policy `untrusted`).
                rig.open_session(Some("ask")).await.map(|b| seen.extend(b))?;
            }
            let target = rig.workspace().join("made_by_agent.txt");
            let deny = TurnPlan { permission: Some(PermissionAnswer::Deny), ..plain };
            let denied = turn(rig, seen, "mock:write the file", deny).await?;
            check_completed(&denied)?;
            let asked = permission_requests(&denied);
            ensure!(asked.len() == 1, "the write was asked for once: {asked:?}");
            // The denied call fails, or (Gemini) is never made.
            ensure!(tool_results(&denied).iter().all(|(_, _, is_error)| *is_error), "no call succeeded");
            ensure!(!target.exists(), "a denied write wrote nothing");
            let allow = TurnPlan { permission: Some(PermissionAnswer::Allow), ..plain };
            let allowed = turn(rig, seen, "mock:write the file", allow).await?;
            check_completed(&allowed)?;
            ensure!(permission_requests(&allowed) == asked, "asked again");
            ensure!(tool_results(&allowed).iter().all(|(_, _, is_error)| !*is_error), "the allowed call worked");
            // A replay has no real CLI behind it to write the file.
            ensure!(!rig.is_live() || target.exists(), "the allowed write landed at {}", target.display());
            if rig.agent == Agent::Codex {
                ensure!(
                    tool_results(&allowed).iter().any(|(_, out, _)| out.contains("created")),
                    "the allowed command's output arrived"
                );
                check_patch(rig, seen).await?;
            }
        }
        Scenario::Sandbox => {
            let target = rig.workspace().join("made_by_agent.txt");
            rig.open_session(Some("read-only")).await.map(|b| seen.extend(b))?;
            let blocked = turn(rig, seen, "mock:write the file", plain).await?;
            check_turn_contract(&blocked)?;
            ensure!(!target.exists(), "read-only mode wrote nothing");
            rig.open_session(Some("workspace-write")).await.map(|b| seen.extend(b))?;
            let written = turn(rig, seen, "mock:write the file", plain).await?;
            check_completed(&written)?;
            ensure!(tool_results(&written).iter().any(|(_, out, _)| out.contains("created")), "the touch ran");
            // A replay has no real CLI behind it to write the file.
            ensure!(!rig.is_live() || target.exists(), "workspace-write mode wrote {}", target.display());
        }
        Scenario::Interrupt => {
            let at = if rig.agent.streams_text() { InterruptAt::FirstText } else { InterruptAt::ModelStreaming };
            let stopped = turn(rig, seen, "mock:slow please", TurnPlan { interrupt: Some(at), ..plain }).await?;
            check_turn_contract(&stopped)?;
            ensure!(end_reason(&stopped) == Some(EndReason::Interrupted), "the turn ended interrupted");
            // Codex warns about the mock's unknown model id every turn (code `agent_warning`).
            let errors: Vec<_> = stopped
                .iter()
                .filter_map(|b| match &b.kind {
                    BlockKind::Error(e) if e.code.as_deref() != Some("agent_warning") => Some(e.message.clone()),
                    _ => None,
                })
                .collect();
            ensure!(errors.is_empty(), "an interrupt is not an error: {errors:?}");
            let after = turn(rig, seen, "mock:plain are you there", plain).await?;
            check_completed(&after)?;
            ensure!(final_text(&after).as_deref() == Some(PLAIN_TEXT), "the session goes on after the interrupt");
        }
        Scenario::ModelError => {
            let failed = turn(rig, seen, "mock:error now", plain).await?;
            check_turn_contract(&failed)?;
            ensure!(end_reason(&failed) == Some(EndReason::Error), "the turn ended in error");
            ensure!(failed.iter().any(|b| matches!(b.kind, BlockKind::Error(_))), "an error block says why");
            let after = turn(rig, seen, "mock:plain again", plain).await?;
            check_completed(&after)?;
        }
        Scenario::ShellDefaults => {
            let blocks = turn(rig, seen, "mock:tool please run it", plain).await?;
            check_tool_round_trip(&blocks)?;
        }
        Scenario::Retry => {
            let blocks = turn(rig, seen, "mock:flaky hello", plain).await?;
            let checked = check_completed(&blocks).and_then(|()| check_retry_progress(&blocks, "succeeded"));
            if let Err(error) = checked {
                bail!("{error:#}\nthe model server saw:\n{}", requests_summary(&rig.model_requests().await?));
            }
            ensure!(final_text(&blocks).as_deref() == Some(PLAIN_TEXT), "the answer after the retries");
        }
        Scenario::RetryGiveUp => {
            let failed = turn(rig, seen, "mock:error now", plain).await?;
            check_turn_contract(&failed)?;
            check_retry_progress(&failed, "failed")?;
            ensure!(end_reason(&failed) == Some(EndReason::Error), "the turn ended in error");
            ensure!(failed.iter().any(|b| matches!(b.kind, BlockKind::Error(_))), "an error block says why");
            let after = turn(rig, seen, "mock:plain again", plain).await?;
            check_completed(&after)?;
        }
        Scenario::Long => {
            let blocks = turn(rig, seen, "mock:long story", plain).await?;
            check_completed(&blocks)?;
            let text = final_text(&blocks).context("a final text")?;
            ensure!(text.len() >= 50_000, "the long answer arrived whole: {} bytes", text.len());
        }
    }
    Ok(())
}

/// One line per model server request: its number, path, scenario, message and tool
/// counts, status, and the start of its last user text.
fn requests_summary(requests: &[Value]) -> String {
    requests
        .iter()
        .map(|r| {
            let body = r["body"].to_string();
            let tail: String = body.chars().rev().take(120).collect::<Vec<_>>().into_iter().rev().collect();
            format!(
                "#{} {} scenario={} messages={} tools={} status={} …{}",
                r["seq"],
                r["path"].as_str().unwrap_or_default(),
                r["scenario"],
                r["messages"],
                r["tools"].as_array().map_or(0, Vec::len),
                r["status"],
                tail
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The turn shows the CLI's retries: a `progress` `Model call failed (attempt n…): …;
/// retrying` (not done), then the same id done, its message saying how it ended (`how`:
/// `succeeded`, or `failed` when the CLI gave up).
fn check_retry_progress(blocks: &[Block], how: &str) -> anyhow::Result<()> {
    let progress: Vec<_> = blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Progress(p) if p.id.as_str().ends_with("-retry") => Some(p),
            _ => None,
        })
        .collect();
    let retrying = progress.iter().filter(|p| !p.done && p.message.contains("retrying")).count();
    ensure!(retrying >= 1, "a retry progress while the CLI retries: {progress:?}");
    ensure!(progress.iter().all(|p| p.current.is_some_and(|n| n >= 1)), "each names its attempt: {progress:?}");
    let last = progress.last().context("retry progress")?;
    ensure!(last.done && last.message.contains(how), "the retry progress ends done, {how}: {last:?}");
    Ok(())
}

/// Codex: a patch (`mock:patch`) it asks to apply, allowed: the `apply_patch` call
/// carries the file's `diff`, and the file is written.
async fn check_patch(rig: &mut Rig, seen: &mut Vec<Block>) -> anyhow::Result<()> {
    let target = rig.workspace().join(terminull_model_server::PATCH_FILE);
    let allow = TurnPlan { permission: Some(PermissionAnswer::Allow), ..TurnPlan::default() };
    let patched = turn(rig, seen, "mock:patch the file", allow).await?;
    check_completed(&patched)?;
    ensure!(permission_requests(&patched) == ["apply_patch"], "the patch was asked for");
    let diff = patched
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::Diff(d) if d.path.ends_with(terminull_model_server::PATCH_FILE) => Some(d),
            _ => None,
        })
        .context("a diff of the patched file")?;
    ensure!(
        serde_json::to_string(&diff.change)?.contains(terminull_model_server::PATCH_LINE),
        "the diff holds the added line: {:?}",
        diff.change
    );
    ensure!(!rig.is_live() || target.exists(), "the allowed patch wrote {}", target.display());
    Ok(())
}

async fn turn(rig: &mut Rig, seen: &mut Vec<Block>, text: &str, plan: TurnPlan) -> anyhow::Result<Vec<Block>> {
    let result = rig.turn(text, plan).await;
    if let Ok(blocks) = &result {
        seen.extend(blocks.iter().cloned());
        check_no_empty_text(blocks)?;
    }
    result
}

/// No `text` message of the turn is empty: a message opened and closed with nothing in
/// it is a mapping bug (an ACP usage chunk read as text, say). Every scenario turn of
/// every agent, live and replayed, goes through this.
pub fn check_no_empty_text(blocks: &[Block]) -> anyhow::Result<()> {
    let mut messages: HashMap<&str, terminull_protocol::streamed::Assembly> = HashMap::new();
    for b in blocks {
        if let BlockKind::Text(t) = &b.kind {
            let message = messages.entry(t.id.as_str()).or_default();
            message.apply(t);
            ensure!(!(message.is_done() && message.text().is_empty()), "text block {} is empty", t.id);
        }
    }
    Ok(())
}

fn check_agent_info(agent: Agent, opening: &[Block]) -> anyhow::Result<()> {
    let info = opening
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::AgentInfo(info) => Some(info),
            _ => None,
        })
        .context("the session opens with agent_info")?;
    ensure!(info.agent_id.as_str() == agent.id(), "agent_info names {}", agent.id());
    let pinned = crate::agents::pinned_version(agent);
    let version = info.version.as_deref().unwrap_or_default();
    ensure!(version.contains(&pinned), "agent_info reports the pinned CLI {pinned}, not {version:?}");
    Ok(())
}

/// The turn contract every turn keeps: exactly one `session_end`, last; every streamed
/// id closed once by its last chunk; every tool call running first, settled, with one
/// result after it.
pub fn check_turn_contract(blocks: &[Block]) -> anyhow::Result<()> {
    let ends = blocks.iter().filter(|b| matches!(b.kind, BlockKind::SessionEnd(_))).count();
    ensure!(ends == 1, "one session_end, found {ends}");
    ensure!(matches!(blocks.last().map(|b| &b.kind), Some(BlockKind::SessionEnd(_))), "session_end comes last");
    let mut streams: HashMap<String, Vec<bool>> = HashMap::new();
    let mut calls: HashMap<String, Vec<ToolStatus>> = HashMap::new();
    let mut results: HashMap<String, usize> = HashMap::new();
    for (i, block) in blocks.iter().enumerate() {
        match &block.kind {
            BlockKind::Text(t) | BlockKind::Thinking(t) => streams.entry(t.id.to_string()).or_default().push(t.done),
            BlockKind::ToolCall(c) => calls.entry(c.id.to_string()).or_default().push(c.status),
            BlockKind::ToolResult(r) => {
                ensure!(calls.contains_key(r.tool_call_id.as_str()), "result {i} follows its call");
                *results.entry(r.tool_call_id.to_string()).or_default() += 1;
            }
            _ => {}
        }
    }
    for (id, dones) in &streams {
        ensure!(dones.last() == Some(&true), "stream {id} ends with done=true");
        ensure!(dones.iter().filter(|d| **d).count() == 1, "stream {id} is closed once");
    }
    for (id, statuses) in &calls {
        ensure!(statuses.last() != Some(&ToolStatus::Running), "tool call {id} is settled");
        ensure!(results.get(id) == Some(&1), "tool call {id} has exactly one result");
    }
    Ok(())
}

pub(crate) fn check_completed(blocks: &[Block]) -> anyhow::Result<()> {
    check_turn_contract(blocks)?;
    ensure!(end_reason(blocks) == Some(EndReason::Completed), "the turn completed");
    Ok(())
}

fn check_tool_round_trip(blocks: &[Block]) -> anyhow::Result<()> {
    check_completed(blocks)?;
    ensure!(blocks.iter().any(|b| matches!(&b.kind, BlockKind::Thinking(t) if t.done)), "thinking is shown");
    let position = |pred: &dyn Fn(&BlockKind) -> bool| blocks.iter().position(|b| pred(&b.kind));
    let running = position(&|k| matches!(k, BlockKind::ToolCall(c) if c.status == ToolStatus::Running))
        .context("the tool call is shown running")?;
    let done = position(&|k| matches!(k, BlockKind::ToolCall(c) if c.status == ToolStatus::Done))
        .context("the tool call is shown done")?;
    let results = tool_results(blocks);
    let (_, output, is_error) = results.first().context("the tool call has a result")?;
    ensure!(output.contains("hello") && !is_error, "the result holds the real command output: {output:?}");
    let result_at = position(&|k| matches!(k, BlockKind::ToolResult(_))).unwrap_or(0);
    let text = final_text(blocks).context("a final text")?;
    let text_at = blocks
        .iter()
        .rposition(|b| matches!(&b.kind, BlockKind::Text(t) if t.done))
        .context("a final text position")?;
    ensure!(running < done && running < result_at && result_at < text_at, "running → result → final text");
    ensure!(text.contains("The command printed") && text.contains("hello"), "the final text quotes it: {text:?}");
    let usage = end_usage(blocks).context("session_end carries usage")?;
    ensure!(usage.input_tokens.unwrap_or(0) > 0, "input tokens are counted: {usage:?}");
    Ok(())
}

fn end_reason(blocks: &[Block]) -> Option<EndReason> {
    blocks.iter().rev().find_map(|b| match &b.kind {
        BlockKind::SessionEnd(end) => Some(end.reason),
        _ => None,
    })
}

fn end_usage(blocks: &[Block]) -> Option<terminull_protocol::blocks::Usage> {
    blocks.iter().rev().find_map(|b| match &b.kind {
        BlockKind::SessionEnd(end) => end.usage.clone(),
        _ => None,
    })
}

/// The last completed `text` of the turn, rebuilt from its chunks (snapshots or appends).
fn final_text(blocks: &[Block]) -> Option<String> {
    let mut messages: std::collections::HashMap<&str, terminull_protocol::streamed::Assembly> = Default::default();
    let mut last = None;
    for b in blocks {
        if let BlockKind::Text(t) = &b.kind {
            let message = messages.entry(t.id.as_str()).or_default();
            message.apply(t);
            if message.is_done() {
                last = Some(message.text().to_owned());
            }
        }
    }
    last
}

fn tool_results(blocks: &[Block]) -> Vec<(String, String, bool)> {
    blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::ToolResult(r) => Some((r.tool_call_id.to_string(), r.output.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

fn permission_requests(blocks: &[Block]) -> Vec<String> {
    blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::PermissionRequest(p) => Some(p.tool.clone()),
            _ => None,
        })
        .collect()
}

/// The model server's `(history=N msgs)` in the final text: how much conversation the
/// model was sent.
fn history_len(blocks: &[Block]) -> anyhow::Result<u64> {
    let text = final_text(blocks).context("a final text")?;
    let start = text.rfind("(history=").context("the final text names the history length")? + "(history=".len();
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    Ok(digits.parse()?)
}

/// The blocks, one line each: `seq type details`.
pub fn render(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        let seq = b.seq.map(|s| s.to_string()).unwrap_or_default();
        let detail = match &b.kind {
            BlockKind::AgentInfo(i) => {
                format!("{} {} {}", i.agent_id, i.version.as_deref().unwrap_or("?"), i.model.as_deref().unwrap_or(""))
            }
            BlockKind::UserMessage(m) => quote(&m.text),
            BlockKind::Text(t) | BlockKind::Thinking(t) => format!("id={} done={} {}", t.id, t.done, quote(&t.text)),
            BlockKind::ToolCall(c) => format!("id={} {} {:?} {}", c.id, c.name, c.status, quote(&c.input.to_string())),
            BlockKind::ToolResult(r) => format!("call={} error={} {}", r.tool_call_id, r.is_error, quote(&r.output)),
            BlockKind::PermissionRequest(p) => format!("{} options={}", p.tool, p.options.len()),
            BlockKind::Error(e) => format!("{} {}", e.code.as_deref().unwrap_or("-"), quote(&e.message)),
            BlockKind::SessionEnd(e) => format!(
                "{:?} usage={}",
                e.reason,
                e.usage.as_ref().map(|u| serde_json::to_string(u).unwrap_or_default()).unwrap_or_default()
            ),
            other => quote(&serde_json::to_string(other).unwrap_or_default()),
        };
        let _ = writeln!(out, "{seq:>3} {:<18} {detail}", b.kind.block_type());
    }
    out
}

fn quote(text: &str) -> String {
    let flat = text.replace('\n', "⏎");
    let short: String = flat.chars().take(90).collect();
    if short.len() < flat.len() { format!("{short:?}… ({} bytes)", text.len()) } else { format!("{short:?}") }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The spawn arguments of each recorded process, in order.
pub fn recorded_spawns(recording: &[TapRecord]) -> Vec<Vec<String>> {
    recording
        .iter()
        .filter_map(|r| match &r.event {
            TapEvent::Spawn { spawn } if !spawn.iter().any(|a| a == "--version") => Some(spawn.clone()),
            _ => None,
        })
        .collect()
}
