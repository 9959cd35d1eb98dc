//! Testing an adapter without the bridge (cargo feature `testing`, for dev-dependencies).
//!
//! - [`TestBridge`] (and [`FakeCliBridge`], with the fake CLI's directory): the adapter's [`serve_io`](crate::serve_io) loop in memory,
//!   connected to a bridge-side rpc [`Peer`]; it starts sessions, sends messages and
//!   collects a turn's blocks the way the bridge sees them.
//! - [`fake_cli_script`], [`executable`], [`start_params`]: a fake agent CLI (a script
//!   replaying recorded output) and the `start` that runs it.
//! - [`assert_contract`], [`session_end`], [`first_error`], [`tool_calls`],
//!   [`tool_results`], [`final_texts`], [`rebuilt`]: checks on a collected turn and the blocks a
//!   test looks at.
//! - [`map_turn`], [`assert_contract_so_far`], [`describe`], [`blocks_of`]: a mapper fed
//!   recorded lines, its [`Action`]s as lines for tables of expected actions, and as
//!   the blocks they stream.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_protocol::BlockKind;
use terminull_protocol::adapter::{self as proto, PermissionResponseParams, StartParams, StartResult};
use terminull_protocol::blocks::{ErrorBlock, SessionEnd, ToolCall, ToolResult, Usage, UserMessage};
use terminull_protocol::ids::BlockId;
use terminull_protocol::jsonrpc::codes;
use terminull_protocol::streamed::{Applied, Assembly};
use terminull_protocol::turn::TurnTracker;
use terminull_rpc::{CallError, Incoming, Peer, PeerConfig, PeerTasks};

use crate::action::Action;
use crate::adapter::Adapter;
use crate::per_turn::EventMapper;
use crate::serve::{DeclarationOverride, serve_io_with};
use crate::streamer::StreamKind;

/// How long a request to the adapter, or the next message from it, may take.
pub const TIMEOUT: Duration = Duration::from_secs(40);

/// The bridge's side of an adapter served in memory.
#[derive(Debug)]
pub struct TestBridge {
    /// The bridge's peer: send requests to the adapter with it.
    pub peer: Peer,
    /// What the adapter sent that is not an answer (notifications), in order.
    pub incoming: terminull_rpc::IncomingQueue,
    /// The agent session ids the adapter reported while [`turn`](Self::turn) read.
    pub session_ids: Vec<String>,
    _tasks: PeerTasks,
    server: std::thread::JoinHandle<()>,
}

/// A [`TestBridge`] with the temporary directory its fake agent CLI and the CLI's log
/// (`<dir>/log`) live in; it derefs to the bridge.
#[derive(Debug)]
pub struct FakeCliBridge {
    /// The bridge's side.
    pub bridge: TestBridge,
    /// The fake CLI's directory (deleted when this is dropped).
    pub dir: tempfile::TempDir,
}

impl FakeCliBridge {
    /// `bridge`, with a new temporary directory.
    pub fn new(bridge: TestBridge) -> Self {
        Self { bridge, dir: tempfile::tempdir().expect("a temporary directory") }
    }

    /// What the fake CLI wrote to `<dir>/log` so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The JSON values the fake CLI logged as `<prefix><json>` lines (say, `in: ` for
    /// what it read on stdin), in order; such a line that is not JSON fails the test.
    pub fn logged_json(&self, prefix: &str) -> Vec<serde_json::Value> {
        let log = self.log();
        let json = |l: &str| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        log.lines().filter_map(|l| l.strip_prefix(prefix)).map(json).collect()
    }
}

impl std::ops::Deref for FakeCliBridge {
    type Target = TestBridge;
    fn deref(&self) -> &TestBridge {
        &self.bridge
    }
}

impl std::ops::DerefMut for FakeCliBridge {
    fn deref_mut(&mut self) -> &mut TestBridge {
        &mut self.bridge
    }
}

/// What the bridge does with a `permission_request` during [`TestBridge::turn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPermission<'a> {
    /// Answer with this option id.
    Answer(&'a str),
    /// Interrupt the turn instead of answering.
    Interrupt,
}

/// Serves adapter `A` in memory, as the bridge would run it.
pub fn serve_in_memory<A: Adapter>() -> TestBridge {
    serve_in_memory_with::<A>(DeclarationOverride::default())
}

/// [`serve_in_memory`] with the declaration's identity overridden.
pub fn serve_in_memory_with<A: Adapter>(overrides: DeclarationOverride) -> TestBridge {
    let (bridge_end, adapter_end) = tokio::io::duplex(1 << 20);
    let (ar, aw) = tokio::io::split(adapter_end);
    // The adapter runs on its own thread and single-threaded runtime, as in production
    // (its futures need not be `Send`); it ends when the bridge's end is dropped.
    let server = std::thread::spawn(move || match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(serve_io_with::<A, _, _>(ar, aw, overrides)),
        Err(e) => panic!("cannot start the adapter's runtime: {e}"),
    });
    let (br, bw) = tokio::io::split(bridge_end);
    let (peer, incoming, tasks) = terminull_rpc::spawn(br, bw, PeerConfig::named("bridge"));
    TestBridge { peer, incoming, session_ids: Vec::new(), _tasks: tasks, server }
}

impl TestBridge {
    /// `start`.
    pub async fn start(&self, params: &StartParams) -> Result<StartResult, CallError> {
        self.peer.request::<proto::Start>(params, Some(TIMEOUT)).await
    }

    /// `start` that the adapter must refuse: its JSON-RPC error.
    pub async fn start_refused(&self, params: &StartParams) -> terminull_protocol::jsonrpc::RpcError {
        match self.start(params).await {
            Err(CallError::Rpc { error, .. }) => error,
            other => panic!("start was not refused: {other:?}"),
        }
    }

    /// `send` with a text message.
    pub async fn send(&self, text: &str) -> Result<proto::Empty, CallError> {
        let message = UserMessage { text: text.into(), attachments: vec![] };
        self.peer.request::<proto::Send>(&message, Some(TIMEOUT)).await
    }

    /// Checks the refusals of `start` every adapter that runs a CLI makes: an unknown
    /// permission mode (`yolo`) is `INVALID_PARAMS` with a message listing `known_modes`, and a
    /// binary that does not exist is `AGENT_ERROR`. `params` is otherwise valid.
    pub async fn assert_refuses_unknown_mode_and_missing_binary(&self, params: &StartParams, known_modes: &str) {
        let mut params = params.clone();
        params.permission_mode = Some("yolo".into());
        let e = self.start_refused(&params).await;
        assert_eq!(e.code, codes::INVALID_PARAMS, "{}", e.message);
        assert!(e.message.contains(known_modes), "{}", e.message);
        params.permission_mode = None;
        let cwd = params.cwd.clone().unwrap_or_default();
        params.binary = Some(Path::new(&cwd).join("missing").display().to_string());
        let e = self.start_refused(&params).await;
        assert_eq!(e.code, codes::AGENT_ERROR, "{}", e.message);
    }

    /// `interrupt`.
    pub async fn interrupt(&self) {
        self.peer.request::<proto::Interrupt>(&proto::Empty {}, Some(TIMEOUT)).await.expect("interrupt");
    }

    /// Waits (up to [`TIMEOUT`]) for the adapter's serve loop to end while the bridge's
    /// end stays open, as it must after `stop`.
    pub async fn wait_for_serve_end(self) {
        let deadline = std::time::Instant::now() + TIMEOUT;
        while !self.server.is_finished() {
            assert!(std::time::Instant::now() < deadline, "the adapter's serve loop did not end");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The next message the adapter sends that is not an answer.
    pub async fn next_incoming(&mut self) -> Incoming {
        tokio::time::timeout(TIMEOUT, self.incoming.recv())
            .await
            .expect("the adapter sent nothing in time")
            .expect("the adapter closed the connection")
    }

    /// The agent session id the adapter reports next (or reported during a turn).
    pub async fn reported_session_id(&mut self) -> String {
        if !self.session_ids.is_empty() {
            return self.session_ids.remove(0);
        }
        loop {
            if let Incoming::Notification(n) = self.next_incoming().await
                && let Ok(p) = n.params_as::<proto::SessionIdNotification>()
            {
                return p.agent_session_id.to_string();
            }
        }
    }

    /// [`send`](Self::send)s `text` and collects its [`turn`](Self::turn).
    pub async fn send_turn(&mut self, text: &str, permission: OnPermission<'_>, interrupt: bool) -> Vec<BlockKind> {
        self.send(text).await.expect("send");
        self.turn(permission, interrupt).await
    }

    /// The blocks of one turn up to its `session_end`, checked against the turn
    /// contract. Permission requests are handled as `permission` says; with
    /// `interrupt`, the turn is interrupted after its first text chunk. Session ids
    /// reported meanwhile are added to [`session_ids`](Self::session_ids).
    pub async fn turn(&mut self, permission: OnPermission<'_>, interrupt: bool) -> Vec<BlockKind> {
        let mut out = Vec::new();
        let mut interrupted = false;
        loop {
            let Incoming::Notification(n) = self.next_incoming().await else { continue };
            if let Ok(id) = n.params_as::<proto::SessionIdNotification>() {
                self.session_ids.push(id.agent_session_id.to_string());
                continue;
            }
            let Ok(p) = n.params_as::<proto::Stream>() else { continue };
            let kind = p.block.kind;
            if let BlockKind::PermissionRequest(r) = &kind {
                match permission {
                    OnPermission::Interrupt => self.interrupt().await,
                    OnPermission::Answer(option) => {
                        let params =
                            PermissionResponseParams { request_id: r.request_id.clone(), option_id: option.into() };
                        self.peer.request::<proto::PermissionResponse>(&params, Some(TIMEOUT)).await.unwrap();
                    }
                }
            }
            if interrupt && !interrupted && matches!(kind, BlockKind::Text(_)) {
                interrupted = true;
                self.interrupt().await;
            }
            let end = matches!(kind, BlockKind::SessionEnd(_));
            out.push(kind);
            if end {
                assert_contract(&out);
                return out;
            }
        }
    }
}

/// `start` params running `binary` in `cwd`, everything else absent.
pub fn start_params(binary: &Path, cwd: &Path) -> StartParams {
    StartParams {
        session_id: "s1".into(),
        cwd: Some(cwd.display().to_string()),
        model: None,
        binary: Some(binary.display().to_string()),
        resume_session_id: None,
        effort: None,
        permission_mode: None,
    }
}

/// Writes `body` to `path` as an executable (mode 0755): a fake agent CLI.
pub fn executable(path: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).expect("write the fake CLI");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("make the fake CLI executable");
    path.to_path_buf()
}

/// Writes a fake agent CLI, `<dir>/<name>`: a bash script that answers `--version`
/// with `version` and otherwise runs `body`, with `$F` the crate's `fixtures` directory
/// (captured output to replay) and `$LOG` the log [`FakeCliBridge::log`] reads.
pub fn fake_cli_script(dir: &Path, name: &str, fixtures: &Path, version: &str, body: &str) -> PathBuf {
    let script = format!(
        "#!/bin/bash\nF='{}'\nLOG='{}'\nif [ \"$1\" = \"--version\" ]; then echo '{version}'; exit 0; fi\n{body}",
        fixtures.display(),
        dir.join("log").display()
    );
    executable(&dir.join(name), &script)
}

/// Panics unless `blocks` keep the turn contract and close everything they open.
pub fn assert_contract(blocks: &[BlockKind]) {
    let mut t = TurnTracker::new();
    for b in blocks {
        assert_eq!(t.observe(b), None, "{b:?}");
    }
    assert!(t.end_violations().is_empty(), "{:?}", t.end_violations());
}

/// The turn's `session_end` (its last block).
pub fn session_end(blocks: &[BlockKind]) -> &SessionEnd {
    match blocks.last() {
        Some(BlockKind::SessionEnd(e)) => e,
        other => panic!("no session_end: {other:?}"),
    }
}

/// The first error block of a turn.
pub fn first_error(blocks: &[BlockKind]) -> &ErrorBlock {
    match blocks.iter().find_map(|b| if let BlockKind::Error(e) = b { Some(e) } else { None }) {
        Some(e) => e,
        None => panic!("no error block: {blocks:?}"),
    }
}

/// Every tool call block (each status change of a call is one), in order.
pub fn tool_calls(blocks: &[BlockKind]) -> Vec<&ToolCall> {
    blocks.iter().filter_map(|b| if let BlockKind::ToolCall(c) = b { Some(c) } else { None }).collect()
}

/// Every tool result, in order.
pub fn tool_results(blocks: &[BlockKind]) -> Vec<&ToolResult> {
    blocks.iter().filter_map(|b| if let BlockKind::ToolResult(r) = b { Some(r) } else { None }).collect()
}

/// The text of every finished (`done`) text message, rebuilt from its chunks
/// (snapshots and appends) and in the order they finished: the answer as the user
/// reads it.
pub fn final_texts(blocks: &[BlockKind]) -> Vec<String> {
    rebuilt(blocks).into_iter().filter(|m| m.kind == StreamKind::Text && m.done).map(|m| m.text).collect()
}

/// One streamed `text` or `thinking` message as a receiver rebuilds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// `text` or `thinking`.
    pub kind: StreamKind,
    /// The message's id.
    pub id: BlockId,
    /// The whole text.
    pub text: String,
    /// True once its `done: true` chunk came.
    pub done: bool,
}

/// Every streamed message of `blocks` rebuilt from its chunks, in the order each
/// finished (unfinished ones last, in the order they started). Panics on a chunk a
/// receiver could not apply (a gap, or one after `done`): an adapter must never send it.
pub fn rebuilt(blocks: &[BlockKind]) -> Vec<Rebuilt> {
    let mut open: Vec<(StreamKind, BlockId, Assembly)> = Vec::new();
    let mut finished = Vec::new();
    for block in blocks {
        let (kind, chunk) = match block {
            BlockKind::Text(t) => (StreamKind::Text, t),
            BlockKind::Thinking(t) => (StreamKind::Thinking, t),
            _ => continue,
        };
        let at = match open.iter().position(|(k, id, _)| *k == kind && *id == chunk.id) {
            Some(at) => at,
            None => {
                open.push((kind, chunk.id.clone(), Assembly::default()));
                open.len() - 1
            }
        };
        let applied = open[at].2.apply(chunk);
        assert!(matches!(applied, Applied::Taken | Applied::Repeat), "{applied:?} for {chunk:?}");
        if open[at].2.is_done() {
            let (kind, id, assembly) = open.remove(at);
            finished.push(Rebuilt { kind, id, text: assembly.text().to_owned(), done: true });
        }
    }
    finished.extend(open.into_iter().map(|(kind, id, a)| Rebuilt { kind, id, text: a.text().to_owned(), done: false }));
    finished
}

/// How a turn fed to a mapper by [`map_turn`] ends after its recorded lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending<'a> {
    /// Nothing more: the lines end the turn (or leave it open).
    None,
    /// The agent process exits, with this detail.
    Exit(&'a str),
    /// The user interrupts.
    Interrupt,
}

/// Feeds `lines` (one JSON event a line, read with `parse`) to `mapper` as a per-turn
/// driver does, then `ending`, and returns every action in order. `on_exit` is the
/// mapper's own way to close a turn whose process exited.
pub fn map_turn<M: EventMapper, E: Debug>(
    mapper: &mut M,
    lines: &str,
    parse: impl Fn(serde_json::Value) -> Result<M::Event, E>,
    ending: Ending<'_>,
    on_exit: impl FnOnce(&mut M, &str) -> Vec<Action<M::Step>>,
) -> Vec<Action<M::Step>> {
    let mut actions = Vec::new();
    for line in lines.lines() {
        let value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let event = parse(value).unwrap_or_else(|e| panic!("{e:?}: {line}"));
        actions.extend(mapper.on_event(event));
    }
    match ending {
        Ending::None => {}
        Ending::Exit(detail) => actions.extend(on_exit(mapper, detail)),
        Ending::Interrupt => actions.extend(mapper.on_interrupt()),
    }
    actions
}

/// Panics unless `blocks` keep the turn contract and leave nothing open; unlike
/// [`assert_contract`], the turn need not have ended (an interrupted mapper leaves the
/// `session_end` to the SDK). `case` names the case in the message.
pub fn assert_contract_so_far(case: &str, blocks: &[BlockKind]) {
    let mut tracker = TurnTracker::new();
    for block in blocks {
        assert_eq!(tracker.observe(block), None, "{case}: {block:?}");
    }
    assert_eq!(tracker.open_violations(), vec![], "{case}");
}

/// The blocks `actions` stream, in order (`session_end` included).
pub fn blocks_of<X>(actions: &[Action<X>]) -> Vec<BlockKind> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Emit(kind) => Some(kind.clone()),
            Action::End(end) => Some(BlockKind::SessionEnd(end.clone())),
            Action::SessionId(_) | Action::Agent(_) => None,
        })
        .collect()
}

/// One line per action, short enough to read in a table; an agent's own step is its
/// `Debug`.
pub fn describe<X: Debug>(action: &Action<X>) -> String {
    describe_with(action, |step| format!("{step:?}"))
}

/// [`describe`] with the agent's own steps described by `step`.
pub fn describe_with<X>(action: &Action<X>, step: impl Fn(&X) -> String) -> String {
    match action {
        Action::SessionId(id) => format!("session_id {id}"),
        Action::Agent(x) => step(x),
        Action::End(end) => format!(
            "session_end {:?}{}{}",
            end.reason,
            end.usage.as_ref().map(describe_usage).unwrap_or_default(),
            end.message.as_ref().map(|m| format!(" {m:?}")).unwrap_or_default()
        ),
        Action::Emit(kind) => describe_block(kind),
    }
}

/// ` in=… out=…`, then the cache counts and the cost where known.
fn describe_usage(u: &Usage) -> String {
    let mut out = format!(" in={:?} out={:?}", u.input_tokens, u.output_tokens);
    if u.cache_read_tokens.is_some() || u.cache_write_tokens.is_some() {
        out += &format!(" cache_read={:?} cache_write={:?}", u.cache_read_tokens, u.cache_write_tokens);
    }
    if u.cost_usd.is_some() {
        out += &format!(" cost={:?}", u.cost_usd);
    }
    out
}

/// One line for a block (see [`describe`]).
pub fn describe_block(kind: &BlockKind) -> String {
    match kind {
        BlockKind::Text(t) | BlockKind::Thinking(t) => {
            let at = t.offset.map(|o| format!(" @{o}")).unwrap_or_default();
            format!("{} {}{at} done={} {:?}", kind.block_type(), t.id, t.done, t.text)
        }
        BlockKind::ToolCall(c) => format!(
            "tool_call {} {} {:?} {} title={:?}",
            c.id,
            c.name,
            c.status,
            c.input,
            c.title.as_deref().unwrap_or("")
        ),
        BlockKind::ToolResult(r) => format!("tool_result {} error={} {:?}", r.tool_call_id, r.is_error, r.output),
        BlockKind::Error(e) => {
            format!("error {} recoverable={} {:?}", e.code.as_deref().unwrap_or("-"), e.recoverable, e.message)
        }
        BlockKind::Plan(p) => format!(
            "plan {}",
            p.entries.iter().map(|e| format!("{:?}:{}", e.status, e.content)).collect::<Vec<_>>().join(", ")
        ),
        BlockKind::Diff(d) => format!(
            "diff {} for {} {}",
            d.path,
            d.tool_call_id.as_ref().map(|i| i.as_str()).unwrap_or("-"),
            serde_json::to_string(&d.change).unwrap_or_default()
        ),
        BlockKind::Progress(p) => format!("progress {} done={} {:?}", p.id, p.done, p.message),
        other => format!("{other:?}"),
    }
}
