//! Live terminal handoff (docs/session-handoff.md) with a real agent CLI, offline
//! against the scripted model server, driven like an app plus a user at a terminal:
//!
//! 1. the CLI runs a first turn directly in the workspace (no terminull);
//! 2. `scan_external_sessions` finds that conversation;
//! 3. the CLI resumes it with a turn the model server holds, and while it runs the app attaches: the
//!    session is parked, the conversation is mirrored, and the app's message queues —
//!    and no CLI process is started by terminull (the adapters' process recording stays
//!    empty) while the terminal owns it;
//! 4. once the CLI exits, the bridge attaches and delivers the queued message; the model
//!    server sees it with both earlier turns in the request (the same conversation);
//! 5. `continue_in_terminal` returns the resume command; running it continues the same
//!    conversation: the model sees the app's turn. For Claude Code and Codex the returned
//!    shell line runs exactly as given, in a pseudo-terminal (`script`), and the prompt
//!    is typed into the TUI ([`run_in_terminal`]); for the others in print mode
//!    ([`terminal_run`]).

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use serde_json::Value;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{Block, Ownership};
use terminull_protocol::control::{
    AttachExternal, BridgeMessage, ContinueInTerminal, ControlMessage, ListSessions, ReplyResult, ScanExternalSessions,
    SessionState, UserMessage,
};
use terminull_protocol::ids::SessionId;

use crate::agents::Agent;
use crate::rig::{Mode, Rig, RigOptions};

/// What the run saw, for the test's output.
#[derive(Debug, Default)]
pub struct Outcome {
    /// One line per step.
    pub transcript: Vec<String>,
}

/// The command line of one non-interactive turn of `agent`'s CLI: a new conversation
/// (`resume` None) or a resumed one.
fn native_turn(agent: Agent, prompt: &str, resume: Option<&str>) -> anyhow::Result<Vec<String>> {
    let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    Ok(match (agent, resume) {
        (Agent::ClaudeCode, None) => words(&["claude", "-p", prompt, "--output-format", "stream-json", "--verbose"]),
        (Agent::ClaudeCode, Some(id)) => {
            words(&["claude", "-p", prompt, "--resume", id, "--output-format", "stream-json", "--verbose"])
        }
        (Agent::Codex, None) => words(&["codex", "exec", "--json", "--skip-git-repo-check", prompt]),
        (Agent::Codex, Some(id)) => words(&["codex", "exec", "resume", "--json", "--skip-git-repo-check", id, prompt]),
        (Agent::Gemini, None) => {
            words(&["gemini", "-p", prompt, "--output-format", "stream-json", "--yolo", "--skip-trust"])
        }
        (Agent::Gemini, Some(id)) => {
            words(&["gemini", "-r", id, "-p", prompt, "--output-format", "stream-json", "--yolo", "--skip-trust"])
        }
        (Agent::OpenCode, None) => words(&["opencode", "run", "--format", "json", prompt]),
        (Agent::OpenCode, Some(id)) => words(&["opencode", "run", "--format", "json", "--session", id, prompt]),
        (Agent::Kilo, None) => words(&["kilo", "run", "--format", "json", prompt]),
        (Agent::Kilo, Some(id)) => words(&["kilo", "run", "--format", "json", "--session", id, prompt]),
        (Agent::Pi, None) => words(&["pi", "--mode", "json", "-p", "--model", "mockant/mock-claude", prompt]),
        (Agent::Pi, Some(id)) => {
            words(&["pi", "--mode", "json", "-p", "--model", "mockant/mock-claude", "--session", id, prompt])
        }
        (Agent::Hermes, None) => words(&["hermes", "chat", "-Q", "-q", prompt]),
        (Agent::Hermes, Some(id)) => words(&["hermes", "chat", "-Q", "-q", prompt, "--resume", id]),
        // The first turn only: droid resumes through Factory's cloud (docs/session-handoff.md).
        (Agent::Droid, None) => {
            words(&["droid", "exec", "-o", "stream-json", "-m", "custom:mock-claude", "--", prompt])
        }
        (other, _) => bail!("no live handoff test for {} resuming in the terminal", other.id()),
    })
}

/// The resume command as returned, made non-interactive: `claude --resume <id>` gets
/// `-p <prompt>` and the JSON output flags appended (the same command, in print mode);
/// Codex's interactive `codex resume <id>` has the non-interactive form
/// `codex exec resume <id> <prompt>`; pi's `pi --session <id>` gets `--mode json -p
/// --model <the test model> <prompt>` appended, Gemini CLI's `gemini --resume <id>`
/// `-p <prompt> --output-format stream-json --yolo --skip-trust`. An interactive TUI cannot run without
/// a terminal.
pub fn terminal_run(agent: Agent, argv: &[String], prompt: &str) -> anyhow::Result<Vec<String>> {
    let mut argv = argv.to_vec();
    match agent {
        Agent::ClaudeCode => {
            argv.extend(["-p", prompt, "--output-format", "stream-json", "--verbose"].map(str::to_owned));
        }
        Agent::Codex => {
            ensure!(argv.len() == 3 && argv[1] == "resume", "unexpected codex command {argv:?}");
            argv =
                vec!["codex".into(), "exec".into(), "resume".into(), "--json".into(), "--skip-git-repo-check".into()]
                    .into_iter()
                    .chain([argv[2].clone(), prompt.to_owned()])
                    .collect();
        }
        Agent::Pi => {
            argv.extend(["--mode", "json", "-p", "--model", "mockant/mock-claude", prompt].map(str::to_owned));
        }
        Agent::Gemini => {
            argv.extend(["-p", prompt, "--output-format", "stream-json", "--yolo", "--skip-trust"].map(str::to_owned));
        }
        Agent::Hermes => {
            // `hermes --resume <id>` is the TUI; `hermes chat -Q -q <prompt> --resume <id>` the same, headless.
            ensure!(argv.len() == 3 && argv[1] == "--resume", "unexpected hermes command {argv:?}");
            argv = ["hermes", "chat", "-Q", "-q", prompt, "--resume", &argv[2]].map(str::to_owned).to_vec();
        }
        Agent::OpenCode | Agent::Kilo => {
            // `opencode --session <id>` is the TUI; `opencode run --session <id> <prompt>` the same,
            // headless (Kilo, its fork, alike).
            ensure!(argv.len() == 3 && argv[1] == "--session", "unexpected {} command {argv:?}", agent.cli());
            argv = [agent.cli(), "run", "--format", "json", "--session", &argv[2], prompt].map(str::to_owned).to_vec();
        }
        other => bail!("no live handoff test for {}", other.id()),
    }
    Ok(argv)
}

/// Runs the shell line `command` exactly as given in a pseudo-terminal (util-linux
/// `script`), as a user at a terminal would, waits for the CLI's input prompt, types
/// `prompt` and Enter, waits until the model server has the request, then ends it.
async fn run_in_terminal(rig: &Rig, command: &str, prompt: &str, ready: &str) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    let mut child = rig
        .native_command("script")
        .args(["-q", "-f", "-c", command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting `script` (util-linux)")?;
    let mut stdout = child.stdout.take().context("script's stdout")?;
    let (seen_tx, seen_rx) = std::sync::mpsc::channel::<()>();
    let wanted = ready.to_owned();
    let reader = std::thread::spawn(move || {
        let mut screen = Vec::new();
        let mut buf = [0u8; 8192];
        let mut signalled = false;
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            screen.extend_from_slice(&buf[..n]);
            if !signalled && String::from_utf8_lossy(&screen).contains(&wanted) {
                signalled = true;
                let _ = seen_tx.send(());
            }
        }
        String::from_utf8_lossy(&screen).into_owned()
    });
    let outcome = async {
        let waited = tokio::task::spawn_blocking(move || seen_rx.recv_timeout(Duration::from_secs(120))).await?;
        ensure!(waited.is_ok(), "the CLI never showed its input prompt `{ready}` in the terminal");
        let mut stdin = child.stdin.take().context("script's stdin")?;
        stdin.write_all(prompt.as_bytes())?;
        stdin.flush()?;
        // A TUI takes a pasted line and Enter apart.
        tokio::time::sleep(Duration::from_millis(500)).await;
        stdin.write_all(b"\r")?;
        stdin.flush()?;
        let mut polls = 0;
        while requests_with(rig, prompt).await?.is_empty() {
            polls += 1;
            ensure!(polls < 1200, "the prompt typed in the terminal never reached the model");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Give the CLI a moment to write its transcript before the terminal closes.
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    }
    .await;
    if let Ok(pgid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.wait();
    let screen = reader.join().unwrap_or_default();
    outcome.with_context(|| {
        format!(
            "the terminal showed:\n{}",
            screen.chars().rev().take(2000).collect::<String>().chars().rev().collect::<String>()
        )
    })
}

/// Marks Claude Code's throwaway HOME as that of a user who has used its TUI in `ws`
/// before (onboarding done, the API key approved, the folder trusted), so that its TUI
/// opens straight to the prompt.
fn claude_tui_ready(home: &std::path::Path, ws: &str) -> anyhow::Result<()> {
    let path = home.join(".claude.json");
    let mut config: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    let object = config.as_object_mut().context("~/.claude.json is an object")?;
    object.insert("hasCompletedOnboarding".into(), true.into());
    object.insert("theme".into(), "dark".into());
    let key = "sk-ant-mock-key";
    object.insert(
        "customApiKeyResponses".into(),
        serde_json::json!({"approved": [&key[key.len().saturating_sub(20)..]], "rejected": []}),
    );
    object.insert(
        "projects".into(),
        serde_json::json!({ ws: {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true, "allowedTools": []} }),
    );
    std::fs::write(path, serde_json::to_string(&config)?)?;
    Ok(())
}

/// Marks the workspace trusted in Codex's config, as a user who answered its TUI's
/// trust question once would have it, so that its TUI opens straight to the prompt.
fn codex_tui_ready(home: &std::path::Path, ws: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut config = std::fs::OpenOptions::new().append(true).open(home.join(".codex/config.toml"))?;
    writeln!(config, "\n[projects.{}]\ntrust_level = \"trusted\"", serde_json::to_string(ws)?)?;
    Ok(())
}

/// The agent's own session id in a CLI's JSON output.
fn session_id_in(agent: Agent, stdout: &str) -> Option<String> {
    let lines = stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    match agent {
        // `{"type":"session","version":3,"id":…}` first.
        Agent::Pi => lines
            .filter(|v| v["type"] == "session")
            .find_map(|v| v.get("id").and_then(Value::as_str).map(str::to_owned)),
        // `hermes chat -Q` ends with `session_id: <id>`.
        Agent::Hermes => stdout.lines().find_map(|l| l.trim().strip_prefix("session_id: ").map(str::to_owned)),
        _ => {
            let key = match agent {
                Agent::Codex => "thread_id",
                Agent::OpenCode | Agent::Kilo => "sessionID",
                _ => "session_id",
            };
            lines.into_iter().find_map(|v| v.get(key).and_then(Value::as_str).map(str::to_owned))
        }
    }
}

/// Runs `argv` to its end; what it printed, stdout then stderr (Hermes prints its
/// session id on stderr).
fn run_native(rig: &Rig, argv: &[String]) -> anyhow::Result<String> {
    let output = rig
        .native_command(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {argv:?}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "{argv:?}: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr)))
}

/// The bodies of the model requests whose text holds `needle`.
async fn requests_with(rig: &Rig, needle: &str) -> anyhow::Result<Vec<String>> {
    Ok(rig
        .model_requests()
        .await?
        .into_iter()
        .map(|r| r["body"].to_string())
        .filter(|body| body.contains(needle))
        .collect())
}

async fn call(rig: &mut Rig, message: ControlMessage, kept: &mut Vec<BridgeMessage>) -> anyhow::Result<ReplyResult> {
    rig.client().call(message, kept).await.context("control message")
}

async fn until(
    rig: &mut Rig,
    seen: &mut Vec<Block>,
    what: &str,
    matches: impl Fn(&Block) -> bool,
) -> anyhow::Result<Block> {
    if let Some(b) = seen.iter().find(|b| matches(b)) {
        return Ok(b.clone());
    }
    loop {
        if let BridgeMessage::Block { block, .. } =
            rig.next_message().await.with_context(|| format!("waiting for {what}"))?
        {
            seen.push(block.clone());
            if matches(&block) {
                return Ok(block);
            }
        }
    }
}

fn blocks_of(kept: Vec<BridgeMessage>) -> Vec<Block> {
    kept.into_iter()
        .filter_map(|m| match m {
            BridgeMessage::Block { block, .. } => Some(block),
            _ => None,
        })
        .collect()
}

fn is_state(b: &Block, want: Ownership) -> bool {
    matches!(&b.kind, BlockKind::SessionState(s) if s.state == want)
}

fn mirrored_prompt(b: &Block, needle: &str) -> bool {
    matches!(&b.kind, BlockKind::UserMessage(m) if m.text.contains(needle))
        && b.meta.as_ref().is_some_and(|m| m.get("mirrored") == Some(&Value::Bool(true)))
}

async fn state_of(rig: &mut Rig, session: &SessionId) -> anyhow::Result<SessionState> {
    let mut kept = Vec::new();
    let ReplyResult::Sessions { sessions } =
        call(rig, ControlMessage::ListSessions(ListSessions {}), &mut kept).await?
    else {
        bail!("list_sessions")
    };
    sessions.iter().find(|s| &s.session_id == session).map(|s| s.state).context("the session is listed")
}

/// The ids of `agent`'s sessions in `ws` that the app's scan lists.
async fn scan(rig: &mut Rig, agent: Agent, ws: &str) -> anyhow::Result<Vec<String>> {
    let scan = ControlMessage::ScanExternalSessions(ScanExternalSessions {
        agent: Some(agent.id().into()),
        cwd: Some(ws.to_owned()),
    });
    let mut kept = Vec::new();
    let ReplyResult::ExternalSessions { sessions } = call(rig, scan, &mut kept).await? else {
        bail!("scan_external_sessions")
    };
    Ok(sessions.into_iter().map(|s| s.session.agent_session_id.to_string()).collect())
}

/// Starts the terminal's turn `argv`, which the model server holds, and waits until the
/// model has it.
async fn spawn_held(rig: &Rig, argv: &[String]) -> anyhow::Result<std::process::Child> {
    let mut terminal = rig
        .native_command(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the terminal's held turn")?;
    while !rig.model_saw("held").await? {
        if let Some(status) = terminal.try_wait()? {
            bail!("the terminal's CLI exited ({status}) before its held turn reached the model");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(terminal)
}

fn tap_files(rig: &Rig) -> usize {
    std::fs::read_dir(rig.tap_dir()).map(|d| d.count()).unwrap_or(0)
}

/// Runs the whole handoff with `agent`'s real CLI from `cli_dir`.
pub async fn run(agent: Agent, cli_dir: std::path::PathBuf) -> anyhow::Result<Outcome> {
    let options = RigOptions { config_toml: Some("[handoff]\npoll_ms = 200\n".into()) };
    let mut rig = Rig::start_with(agent, Mode::Live { cli_dir }, options).await?;
    let mut out = Outcome::default();
    let ws = rig.workspace().display().to_string();

    // 1–3. A conversation started in the terminal, listed by the app; the terminal resumes
    // it with a turn the model server holds until this test releases it (however loaded
    // the machine), and the app attaches meanwhile. Droid resumes only through Factory's
    // cloud, so there the held turn is the conversation's first, listed while it runs.
    // Hermes' ACP server loads only conversations its ACP side started, so there the
    // first turn is the app's (then that session is stopped).
    let (sid, mut terminal) = if !agent.continues_terminal_conversations() {
        rig.open_session(None).await?;
        let first = rig.turn("mock:plain first native turn", crate::rig::TurnPlan::default()).await?;
        crate::scenarios::check_completed(&first)?;
        let session_id = rig.session_id().context("the app's session")?;
        let stop = ControlMessage::StopSession(terminull_protocol::control::StopSession { session_id });
        call(&mut rig, stop, &mut Vec::new()).await?;
        let mut listed = scan(&mut rig, agent, &ws).await?;
        ensure!(listed.len() == 1, "scan lists the app's conversation: {listed:?}\n{}", rig.daemon_log());
        let sid = listed.remove(0);
        out.transcript.push(format!("app: first turn in conversation {sid}, then the session stopped; scan lists it"));
        let held = native_turn(agent, "mock:held second native turn", Some(&sid))?;
        let terminal = spawn_held(&rig, &held).await?;
        (sid, terminal)
    } else if agent.terminal_resumes_offline() {
        let first = run_native(&rig, &native_turn(agent, "mock:plain first native turn", None)?)?;
        let sid = session_id_in(agent, &first).context("the CLI printed its session id")?;
        out.transcript.push(format!("terminal: first turn in conversation {sid}"));
        let listed = scan(&mut rig, agent, &ws).await?;
        ensure!(listed.contains(&sid), "scan missed {sid}: {listed:?}\n{}", rig.daemon_log());
        out.transcript.push(format!("app: scan_external_sessions lists {sid}"));
        let held = native_turn(agent, "mock:held second native turn", Some(&sid))?;
        let terminal = spawn_held(&rig, &held).await?;
        (sid, terminal)
    } else {
        let held = native_turn(agent, "mock:held first native turn", None)?;
        let mut terminal = spawn_held(&rig, &held).await?;
        let mut listed = scan(&mut rig, agent, &ws).await?;
        let mut polls = 0;
        while listed.is_empty() && terminal.try_wait()?.is_none() && polls < 100 {
            polls += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            listed = scan(&mut rig, agent, &ws).await?;
        }
        ensure!(listed.len() == 1, "scan lists the one running conversation: {listed:?}\n{}", rig.daemon_log());
        let sid = listed.remove(0);
        out.transcript.push(format!("terminal: first turn running in conversation {sid}; app: scan lists it"));
        (sid, terminal)
    };
    let taps_before = tap_files(&rig);
    let attach = ControlMessage::AttachExternal(AttachExternal {
        agent: agent.id().into(),
        agent_session_id: sid.clone().into(),
        cwd: ws.clone(),
        app_pubkey: String::new(),
        pin: false,
    });
    let mut kept = Vec::new();
    let ReplyResult::SessionStarted { session_id } = call(&mut rig, attach, &mut kept).await? else {
        bail!("attach_external")
    };
    let mut seen = blocks_of(kept);
    let parked = until(&mut rig, &mut seen, "parked", |b| is_state(b, Ownership::Parked)).await?;
    ensure!(
        terminal.try_wait()?.is_none(),
        "the terminal's CLI ended before the session could be seen parked; the test proves nothing"
    );
    out.transcript.push(format!("app: attached as {session_id}: {:?}", parked.kind));
    until(&mut rig, &mut seen, "the first terminal turn mirrored", |b| mirrored_prompt(b, "first native turn")).await?;
    out.transcript.push("app: the terminal's first turn arrived mirrored".into());

    let message = ControlMessage::UserMessage(UserMessage {
        session_id: session_id.clone(),
        text: "mock:plain from the phone".into(),
        attachments: vec![],
    });
    let mut kept = Vec::new();
    let accepted = call(&mut rig, message, &mut kept).await?;
    ensure!(matches!(accepted, ReplyResult::Accepted {}), "{accepted:?}");
    seen.extend(blocks_of(kept));
    until(
        &mut rig,
        &mut seen,
        "the message queued",
        |b| matches!(&b.kind, BlockKind::SessionState(s) if s.state == Ownership::Parked && s.queued == 1),
    )
    .await?;
    ensure!(state_of(&mut rig, &session_id).await? == SessionState::Parked, "not parked");
    let still_running = terminal.try_wait()?.is_none();
    // While the terminal owns the conversation terminull starts no CLI process at all.
    ensure!(
        tap_files(&rig) == taps_before,
        "terminull started a CLI process while the terminal owned the conversation"
    );
    ensure!(
        requests_with(&rig, "from the phone").await?.is_empty(),
        "the queued message reached the model while the terminal owned the conversation"
    );
    out.transcript.push(format!(
        "app: message queued; no CLI process started by terminull (terminal still running: {still_running})"
    ));

    // 4. The terminal finishes; the bridge attaches and delivers.
    rig.release_held_answers().await?;
    let status = tokio::task::spawn_blocking(move || terminal.wait()).await??;
    ensure!(status.success(), "the terminal's held turn failed: {status}");
    let terminal_turns: &[&str] = if agent.terminal_resumes_offline() {
        &["first native turn", "second native turn"]
    } else {
        &["first native turn"]
    };
    let last = terminal_turns[terminal_turns.len() - 1];
    until(&mut rig, &mut seen, "the terminal's last turn mirrored", |b| mirrored_prompt(b, last)).await?;
    until(&mut rig, &mut seen, "live again", |b| is_state(b, Ownership::Live)).await?;
    let end = until(&mut rig, &mut seen, "the queued message's turn", |b| {
        matches!(&b.kind, BlockKind::SessionEnd(_)) && b.meta.is_none()
    })
    .await?;
    ensure!(
        matches!(&end.kind, BlockKind::SessionEnd(e) if e.reason == terminull_protocol::blocks::EndReason::Completed),
        "{end:?}"
    );
    let delivered = requests_with(&rig, "from the phone").await?;
    ensure!(!delivered.is_empty(), "the queued message never reached the model");
    let body = &delivered[0];
    let missing: Vec<_> = terminal_turns.iter().filter(|t| !body.contains(**t)).collect();
    ensure!(
        missing.is_empty(),
        "the queued message went to another conversation: the model did not see the terminal's {missing:?}; notices: {:?}",
        seen.iter()
            .filter_map(|b| match &b.kind {
                BlockKind::Progress(p) => Some(p.message.clone()),
                BlockKind::Error(e) => Some(e.message.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    );
    out.transcript
        .push(format!("model: the queued message arrived with the terminal's {terminal_turns:?} in its history"));

    // 5. Continue in Terminal.
    let mut kept = Vec::new();
    let handed = call(
        &mut rig,
        ControlMessage::ContinueInTerminal(ContinueInTerminal { session_id: session_id.clone() }),
        &mut kept,
    )
    .await?;
    let ReplyResult::TerminalCommand { argv, cwd, command } = handed else { bail!("continue_in_terminal: {handed:?}") };
    ensure!(cwd.as_deref() == Some(ws.as_str()), "cwd {cwd:?}");
    out.transcript.push(format!("app: continue_in_terminal → {command}"));
    if !agent.terminal_resumes_offline() {
        ensure!(argv.len() == 3 && argv[0] == agent.cli() && argv[1] == "--resume", "{argv:?}");
        out.transcript.push(format!("terminal: not run: `{command}` needs Factory's cloud (docs/session-handoff.md)"));
        crate::scenarios::check_no_empty_text(&seen)?;
        return Ok(out);
    }
    if matches!(agent, Agent::ClaudeCode | Agent::Codex) {
        let ready = if agent == Agent::ClaudeCode {
            claude_tui_ready(&rig.root().join("home"), &ws)?;
            "❯"
        } else {
            codex_tui_ready(&rig.root().join("home"), &ws)?;
            // Codex's TUI reports its state to the terminal (OSC 7501) once it takes input.
            "state=idle"
        };
        run_in_terminal(&rig, &command, "mock:plain back in the terminal", ready).await?;
        out.transcript.push(format!("terminal: ran `{command}` as given in a pseudo-terminal and typed a prompt"));
    } else {
        let back = terminal_run(agent, &argv, "mock:plain back in the terminal")?;
        run_native(&rig, &back)?;
        out.transcript.push(format!("terminal: ran {back:?}"));
    }
    let resumed = requests_with(&rig, "back in the terminal").await?;
    ensure!(
        resumed.iter().any(|b| b.contains("from the phone") && b.contains("first native turn")),
        "the terminal did not continue the same conversation"
    );
    out.transcript.push("model: the terminal's turn arrived with the app's turn in its history".into());
    until(&mut rig, &mut seen, "the terminal's turn after continue_in_terminal", |b| {
        mirrored_prompt(b, "back in the terminal")
    })
    .await?;
    out.transcript.push("app: that turn arrived mirrored".into());

    // 6. Gemini CLI deletes, at its next start, every file of a session one of whose files
    // holds no conversation (what its `session/load` leaves behind unless the adapter
    // tidies up): a new conversation in the terminal must leave this one listed.
    if agent == Agent::Gemini {
        run_native(&rig, &native_turn(agent, "mock:plain another conversation", None)?)?;
        let listed = scan(&mut rig, agent, &ws).await?;
        ensure!(listed.contains(&sid), "the conversation {sid} was gone after the CLI's next start: {listed:?}");
        out.transcript.push(format!("terminal: a new conversation started; {sid} is still listed"));
    }
    crate::scenarios::check_no_empty_text(&seen)?;
    Ok(out)
}
