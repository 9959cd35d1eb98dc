//! A `terminull` daemon running one built-in adapter, driven over its socket like an
//! app would: the rig of both the live and the replay tests.
//!
//! Live: the real CLI from the pinned install is first on PATH and the scripted model
//! server runs in this process. Replay: `terminull-fake-cli`, under the CLI's name, is
//! first on PATH and plays a recording. Either way the adapter records what its CLI
//! said (see `terminull_adapter_sdk::tap`) into the rig's directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use serde_json::Value;
use terminull_adapter_sdk::tap::{TAP_DIR_ENV, TapRecord};
use terminull_bridge::chat::{PermissionAnswer, choose};
use terminull_bridge::daemon_client::Client;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::Block;
use terminull_protocol::control::{BridgeMessage, ControlMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::control::{Interrupt, PermissionResponse, SessionRequest, UserMessage};
use terminull_protocol::ids::SessionId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agents::Agent;

/// How long the rig waits for the next message before it calls the run hung. A guard
/// against hanging forever, not a performance assertion.
const QUIET_LIMIT: Duration = Duration::from_secs(120);

/// What the adapter's CLI is.
#[derive(Debug, Clone)]
pub enum Mode {
    /// The real CLI from this directory, against the scripted model server.
    Live {
        /// The directory holding the CLI (`<cache>/bin` of scripts/install-agents.sh).
        cli_dir: PathBuf,
    },
    /// The fake CLI playing this recording.
    Replay {
        /// The recording (a fixture).
        recording: PathBuf,
    },
}

/// When to interrupt a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptAt {
    /// Once the first streamed `text` block arrives.
    FirstText,
    /// Once the model server has received the turn's `mock:slow` request (live), or once
    /// the fake CLI of the turn has played all the live run saw before its interrupt
    /// (replay): for an agent that shows nothing until its answer is complete.
    ModelStreaming,
}

/// How to drive one turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnPlan {
    /// How to answer permission requests; unanswered when `None`.
    pub permission: Option<PermissionAnswer>,
    /// Interrupt the turn.
    pub interrupt: Option<InterruptAt>,
}

/// The running rig. Dropping it stops the daemon.
#[derive(Debug)]
pub struct Rig {
    /// The agent under test.
    pub agent: Agent,
    /// Live or replay.
    pub mode: Mode,
    root: tempfile::TempDir,
    daemon: Child,
    client: Client,
    model: Option<SocketAddr>,
    session: Option<SessionId>,
    /// Recording files already handed out by [`Rig::take_recording`].
    taken: Vec<PathBuf>,
    /// In the last turn, the time from sending the message to the first block that
    /// came from the agent (anything but the echoed `user_message`).
    pub last_first_block: Option<Duration>,
    /// The environment the daemon (and so the CLIs) got, PATH included.
    cli_env: Vec<(String, std::ffi::OsString)>,
}

/// Options of [`Rig::start_with`].
#[derive(Debug, Clone, Default)]
pub struct RigOptions {
    /// Written as the daemon's `config.toml`.
    pub config_toml: Option<String>,
}

impl Rig {
    /// Starts the model server (live), the daemon and a client.
    pub async fn start(agent: Agent, mode: Mode) -> anyhow::Result<Rig> {
        Self::start_with(agent, mode, RigOptions::default()).await
    }

    /// [`Rig::start`] with options.
    pub async fn start_with(agent: Agent, mode: Mode, options: RigOptions) -> anyhow::Result<Rig> {
        let bins = crate::workspace::bin_dir();
        let root = tempfile::Builder::new().prefix("terminull-agent-").tempdir()?;
        let (home, state, workspace, fakes) = (
            root.path().join("home"),
            root.path().join("terminull"),
            root.path().join("ws"),
            root.path().join("fake-bin"),
        );
        for dir in [&home, &state, &workspace, &fakes] {
            std::fs::create_dir_all(dir)?;
        }
        let mut model = None;
        let (cli_dir, model_url) = match &mode {
            Mode::Live { cli_dir } => {
                let addr = start_model_server(&workspace).await?;
                model = Some(addr);
                (cli_dir.clone(), format!("http://{addr}"))
            }
            Mode::Replay { .. } => {
                std::os::unix::fs::symlink(bins.join("terminull-fake-cli"), fakes.join(agent.cli()))?;
                // Nothing listens there: a replay that reached for a model would fail.
                (fakes.clone(), "http://127.0.0.1:9".to_owned())
            }
        };
        let path = std::env::join_paths(
            std::iter::once(cli_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )?;
        if let Some(config) = &options.config_toml {
            std::fs::write(state.join("config.toml"), config)?;
        }
        let mut cli_env: Vec<(String, std::ffi::OsString)> =
            agent.environment(&home, &model_url)?.into_iter().map(|(k, v)| (k, v.into())).collect();
        cli_env.push(("PATH".into(), path.clone()));
        let mut command = Command::new(bins.join("terminull"));
        command
            .args(["up", "--log-level", "info", "--home"])
            .arg(&state)
            .envs(agent.environment(&home, &model_url)?)
            .env("PATH", path)
            .env(TAP_DIR_ENV, root.path().join("tap"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.path().join("daemon.log"))?);
        if let Mode::Replay { recording } = &mode {
            command
                .env("TERMINULL_FAKE_CLI_SCRIPT", recording)
                .env("TERMINULL_FAKE_CLI_STATE", root.path().join("fake-state"))
                .env("TERMINULL_FAKE_CLI_ROOT", root.path())
                .env("TERMINULL_FAKE_CLI_VERSION", crate::agents::pinned_version(agent));
        }
        let daemon = command.spawn().context("starting terminull up")?;
        let socket = state.join("bridge.sock");
        let mut waited = Duration::ZERO;
        let client = loop {
            match Client::connect(&socket).await {
                Ok(client) => break client,
                Err(e) if waited >= QUIET_LIMIT => bail!("the daemon did not come up: {e}"),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    waited += Duration::from_millis(50);
                }
            }
        };
        Ok(Rig {
            agent,
            mode,
            root,
            daemon,
            client,
            model,
            session: None,
            taken: Vec::new(),
            last_first_block: None,
            cli_env,
        })
    }

    /// True when the real CLI runs (not a replay).
    pub fn is_live(&self) -> bool {
        matches!(self.mode, Mode::Live { .. })
    }

    /// The rig's private directory (`<root>` in recordings).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The session's working directory.
    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    /// A command running `program` the way a user would in a terminal: in the
    /// session's workspace, with the CLI's environment (its HOME, the model server) and
    /// the pinned CLIs first on PATH, and nothing of terminull's.
    pub fn native_command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.workspace())
            // A shell keeps PWD in step with the directory; some CLIs (OpenCode) read it.
            .env("PWD", self.workspace())
            .env_remove(terminull_adapter_sdk::handoff::SESSION_MARKER_ENV)
            .stdin(Stdio::null());
        for (k, v) in &self.cli_env {
            command.env(k, v);
        }
        command
    }

    /// The client, to send any control message.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// The next message from the daemon (failing after a long silence).
    pub async fn next_message(&mut self) -> anyhow::Result<BridgeMessage> {
        loop {
            if let Some(m) = self.next_block().await? {
                return Ok(m);
            }
        }
    }

    /// The directory where the adapters record the CLI processes they start.
    pub fn tap_dir(&self) -> PathBuf {
        self.root.path().join("tap")
    }

    /// Whether the model server has answered a request with `scenario` (live only).
    pub async fn model_saw(&self, scenario: &str) -> anyhow::Result<bool> {
        model_saw(self.model.context("no model server in a replay")?, scenario).await
    }

    /// Lets the model server's `mock:held` answers go on (live).
    pub async fn release_held_answers(&self) -> anyhow::Result<()> {
        http_bodyless(self.model.context("no model server in a replay")?, "POST", "/__release").await.map(drop)
    }

    /// The daemon's log so far, for failure messages.
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("daemon.log")).unwrap_or_default()
    }

    /// Opens a session of the rig's agent; returns the blocks up to its `agent_info`.
    pub async fn open_session(&mut self, permission_mode: Option<&str>) -> anyhow::Result<Vec<Block>> {
        let mut kept = Vec::new();
        let request = ControlMessage::SessionRequest(SessionRequest {
            model: self.agent.test_model().map(str::to_owned),
            permission_mode: permission_mode.or(self.agent.test_permission_mode()).map(str::to_owned),
            ..SessionRequest::new(self.agent.id(), self.workspace().display().to_string())
        });
        let started = self.client.call(request, &mut kept).await.context("session_request")?;
        let ReplyResult::SessionStarted { session_id } = started else { bail!("unexpected reply {started:?}") };
        self.session = Some(session_id);
        let mut blocks: Vec<Block> = kept.into_iter().filter_map(block_of).collect();
        while !blocks.iter().any(|b| matches!(b.kind, BlockKind::AgentInfo(_) | BlockKind::SessionEnd(_))) {
            if let Some(block) = self.next_block().await?.and_then(block_of) {
                blocks.push(block);
            }
        }
        Ok(blocks)
    }

    /// The session [`Rig::open_session`] opened last.
    pub fn session_id(&self) -> Option<SessionId> {
        self.session.clone()
    }

    /// Sends `text` and returns every block of the turn, up to its `session_end`.
    pub async fn turn(&mut self, text: &str, plan: TurnPlan) -> anyhow::Result<Vec<Block>> {
        self.turn_with(text, Vec::new(), plan).await
    }

    /// [`Rig::turn`] with attachments.
    pub async fn turn_with(
        &mut self,
        text: &str,
        attachments: Vec<terminull_protocol::blocks::Attachment>,
        plan: TurnPlan,
    ) -> anyhow::Result<Vec<Block>> {
        let session_id = self.session.clone().context("no session is open")?;
        let message = UserMessage { session_id: session_id.clone(), text: text.into(), attachments };
        let fakes_before = self.fake_starts();
        let sent_at = std::time::Instant::now();
        let sent = self.client.send(ControlMessage::UserMessage(message)).await?;
        self.last_first_block = None;
        let mut blocks = Vec::new();
        let mut interrupted = false;
        loop {
            if let (Some(at), false) = (plan.interrupt, interrupted) {
                let due = match at {
                    InterruptAt::FirstText => blocks.iter().any(|b: &Block| matches!(b.kind, BlockKind::Text(_))),
                    InterruptAt::ModelStreaming => match self.model {
                        Some(addr) => model_saw(addr, "slow").await?,
                        None => self.fake_waiting() > fakes_before,
                    },
                };
                if due {
                    interrupted = true;
                    self.client.send(ControlMessage::Interrupt(Interrupt { session_id: session_id.clone() })).await?;
                }
            }
            let poll = plan.interrupt.is_some() && !interrupted;
            let message = if poll {
                match tokio::time::timeout(Duration::from_millis(100), self.client.next()).await {
                    Ok(message) => message.context("the daemon closed the connection")?,
                    Err(_) => continue,
                }
            } else {
                match self.next_block().await? {
                    Some(message) => message,
                    None => continue,
                }
            };
            match message {
                BridgeMessage::Reply(reply) if reply.id.as_deref() == Some(&sent) => {
                    if let ReplyOutcome::Error { error } = reply.outcome {
                        bail!("user_message refused: {error:?}");
                    }
                }
                BridgeMessage::Block { block, .. } => {
                    if self.last_first_block.is_none() && !matches!(block.kind, BlockKind::UserMessage(_)) {
                        self.last_first_block = Some(sent_at.elapsed());
                    }
                    if let (BlockKind::PermissionRequest(request), Some(answer)) = (&block.kind, plan.permission) {
                        let option_id = choose(request, answer).context("no option for that answer")?;
                        let response = PermissionResponse {
                            session_id: session_id.clone(),
                            request_id: request.request_id.clone(),
                            option_id,
                        };
                        self.client.send(ControlMessage::PermissionResponse(response)).await?;
                    }
                    let end = matches!(block.kind, BlockKind::SessionEnd(_));
                    blocks.push(block);
                    if end {
                        return Ok(blocks);
                    }
                }
                _ => {}
            }
        }
    }

    /// How many times the fake CLI has started (replay; 0 live).
    fn fake_starts(&self) -> u64 {
        let state = self.root.path().join("fake-state");
        std::fs::read_to_string(state).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }

    /// The start number of the fake CLI that has played its recording and waits to be
    /// killed (replay; 0 when none).
    fn fake_waiting(&self) -> u64 {
        let marker = self.root.path().join("fake-state.waiting");
        std::fs::read_to_string(marker).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }

    async fn next_block(&mut self) -> anyhow::Result<Option<BridgeMessage>> {
        match tokio::time::timeout(QUIET_LIMIT, self.client.next()).await {
            Ok(Some(message)) => Ok(Some(message)),
            Ok(None) => bail!("the daemon closed the connection\n{}", self.daemon_log()),
            Err(_) => bail!("nothing from the daemon for {QUIET_LIMIT:?}\n{}", self.daemon_log()),
        }
    }

    /// Every request the model server received (live only).
    pub async fn model_requests(&self) -> anyhow::Result<Vec<Value>> {
        let addr = self.model.context("no model server in a replay")?;
        let body = http_get(addr, "/__requests").await?;
        Ok(serde_json::from_str(&body)?)
    }

    /// The recording of the adapter processes started since the last call, as one
    /// recording with its processes numbered on from `first_proc`, and the rig's root
    /// path replaced by `<root>`.
    pub fn take_recording(&mut self, first_proc: u64) -> anyhow::Result<Vec<TapRecord>> {
        let dir = self.root.path().join("tap");
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(&dir).with_context(|| format!("no recording in {}", dir.display()))? {
            let path = entry?.path();
            if !self.taken.contains(&path) {
                files.push((
                    std::fs::metadata(&path)?.created().or_else(|_| std::fs::metadata(&path)?.modified())?,
                    path,
                ));
            }
        }
        files.sort();
        let root = self.root.path().display().to_string();
        let mut out = Vec::new();
        let mut next = first_proc;
        for (_, path) in files {
            let text = std::fs::read_to_string(&path)?.replace(&root, "<root>");
            let mut renumber = std::collections::BTreeMap::new();
            for line in text.lines() {
                let mut record: TapRecord = serde_json::from_str(line)?;
                let proc = *renumber.entry(record.proc).or_insert_with(|| {
                    next += 1;
                    next - 1
                });
                record.proc = proc;
                out.push(record);
            }
            self.taken.push(path);
        }
        Ok(out)
    }

    /// Stops the daemon (SIGTERM, then SIGKILL) so its adapters and CLIs end too.
    pub fn stop(&mut self) {
        if let Ok(pid) = i32::try_from(self.daemon.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        for _ in 0..100 {
            if matches!(self.daemon.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop();
        end_processes_run_from(self.root.path());
    }
}

/// Ends the processes whose executable lies under `root` (the rig's temporary HOME and
/// workspace). Codex 0.171's terminal UI unpacks a managed `codex app-server
/// --managed-daemon` (and its `pid-update-loop`) into `$CODEX_HOME/packages/` and starts
/// it detached, so it outlives the test; matching executables under this rig's own
/// temporary directory ends only what this test caused.
fn end_processes_run_from(root: &Path) {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(exe) = std::fs::read_link(entry.path().join("exe")) else { continue };
        if exe.starts_with(&root) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn block_of(message: BridgeMessage) -> Option<Block> {
    match message {
        BridgeMessage::Block { block, .. } => Some(block),
        _ => None,
    }
}

/// Starts the scripted model server on 127.0.0.1 port 0 in this process; its write
/// scenario targets `workspace/made_by_agent.txt`.
pub async fn start_model_server(workspace: &Path) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = terminull_model_server::Config {
        write_path: workspace.join("made_by_agent.txt").display().to_string(),
        ..terminull_model_server::Config::default()
    };
    tokio::spawn(async move {
        if let Err(e) = terminull_model_server::serve(listener, config).await {
            eprintln!("model server failed: {e}");
        }
    });
    Ok(addr)
}

/// Whether the model server has answered a request with `scenario`.
async fn model_saw(addr: SocketAddr, scenario: &str) -> anyhow::Result<bool> {
    let body = http_get(addr, "/__requests").await?;
    let records: Vec<Value> = serde_json::from_str(&body)?;
    Ok(records.iter().any(|r| r["scenario"] == scenario))
}

/// A bare HTTP/1.1 GET on loopback; the body as text.
async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    http_bodyless(addr, "GET", path).await
}

/// A bare HTTP/1.1 request with no body on loopback; the response body as text.
async fn http_bodyless(addr: SocketAddr, method: &str, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8(response)?;
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP header end")?;
    ensure!(head.starts_with("HTTP/1.1 200"), "{method} {path}: {head}");
    ensure!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{method} {path}: chunked body");
    Ok(body.to_owned())
}
