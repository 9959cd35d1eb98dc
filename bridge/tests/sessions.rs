//! Sessions end to end through the one dispatcher: real adapter processes (echo-rs,
//! the Python reference adapter and the broken fixtures as drop-ins), the in-process
//! path and the Unix socket. Whatever an adapter does, the client sees the turn end.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::local;
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_protocol::blocks::{Block, BlockKind, EndReason, ToolStatus};
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};

const BROKEN_MODES: &[&str] = &[
    "exits-mid-turn",
    "hangs-mid-turn",
    "no-session-end",
    "tool-call-left-running",
    "huge-line",
    "stdout-garbage",
    "slow-handshake",
];

/// A home with every broken mode and the Python reference adapter as drop-ins.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    let script = support::workspace().join("tests/fixtures/adapters/broken.py");
    for mode in BROKEN_MODES {
        let path = ext.join(mode);
        std::fs::write(&path, format!("#!/bin/sh\nexec python3 '{}' {mode}\n", script.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
    home
}

fn policy() -> SessionPolicy {
    SessionPolicy {
        liveness: Duration::from_secs(2),
        handshake_timeout: Duration::from_secs(10),
        ..SessionPolicy::default()
    }
}

async fn service(home: &Path, policy: SessionPolicy) -> Service {
    let mut scan = ScanOptions::new(Home::at(home), Config::default());
    scan.exe_dir = Some(support::echo_only_exe_dir());
    scan.handshake_timeout = Duration::from_secs(10);
    Service::start(Home::at(home), Config::default(), scan, policy).await.unwrap()
}

/// A bridge over a fresh [`home`] with the test [`policy`], and an in-process client
/// of it. The home is returned to keep it alive for the test.
async fn in_process_bridge() -> (tempfile::TempDir, Service, Client) {
    let home = home();
    let service = service(home.path(), policy()).await;
    let client = Client::in_process(&service);
    (home, service, client)
}

/// The library's client, with helpers that keep the tests short.
struct Client {
    inner: terminull_bridge::daemon_client::Client,
    next_id: u64,
}

impl Client {
    fn in_process(service: &Service) -> Self {
        Client { inner: terminull_bridge::daemon_client::Client::in_process(service), next_id: 0 }
    }

    fn remote(connection: terminull_client::connection::Connection) -> Self {
        Client { inner: terminull_bridge::daemon_client::Client::remote(connection), next_id: 0 }
    }

    async fn over_socket(path: &Path) -> Self {
        Client { inner: terminull_bridge::daemon_client::Client::connect(path).await.unwrap(), next_id: 0 }
    }

    async fn send(&mut self, mut message: Value) -> String {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        message["id"] = json!(id);
        self.inner.send_raw(message).await.unwrap();
        id
    }

    async fn next(&mut self) -> BridgeMessage {
        tokio::time::timeout(Duration::from_secs(20), self.inner.next())
            .await
            .expect("nothing from the bridge in 20 s")
            .unwrap()
    }

    /// Sends a control message and returns its reply, keeping other messages for later.
    async fn call(&mut self, message: Value, kept: &mut Vec<BridgeMessage>) -> ReplyOutcome {
        let id = self.send(message).await;
        loop {
            match self.next().await {
                BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id) => return r.outcome,
                other => kept.push(other),
            }
        }
    }

    async fn start(&mut self, agent: &str, cwd: &Path) -> (String, Vec<Block>) {
        let mut kept = Vec::new();
        let outcome = self
            .call(json!({"type": "session_request", "agent": agent, "cwd": cwd, "app_pubkey": "k"}), &mut kept)
            .await;
        let ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } = outcome else {
            panic!("session_request failed: {outcome:?}")
        };
        let mut blocks: Vec<Block> = kept.into_iter().filter_map(block_of).collect();
        loop {
            match self.next().await {
                BridgeMessage::ReplayDone { .. } => break,
                m => blocks.extend(block_of(m)),
            }
        }
        (session_id.0, blocks)
    }

    /// Sends a user message and collects blocks up to the turn's session_end.
    async fn turn(&mut self, session: &str, text: &str) -> Vec<Block> {
        let mut kept = Vec::new();
        let outcome = self.call(json!({"type": "user_message", "session_id": session, "text": text}), &mut kept).await;
        assert!(matches!(outcome, ReplyOutcome::Ok { .. }), "{outcome:?}");
        let mut blocks: Vec<Block> = kept.into_iter().filter_map(block_of).collect();
        while !blocks.iter().any(|b| matches!(b.kind, BlockKind::SessionEnd(_))) {
            blocks.extend(block_of(self.next().await));
        }
        blocks
    }
}

fn block_of(m: BridgeMessage) -> Option<Block> {
    match m {
        BridgeMessage::Block { block, .. } => Some(block),
        _ => None,
    }
}

fn end_of(blocks: &[Block]) -> EndReason {
    let ends: Vec<_> = blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::SessionEnd(e) => Some(e.reason),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "exactly one session_end per turn: {blocks:#?}");
    ends[0]
}

fn error_text(blocks: &[Block]) -> String {
    blocks
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::Error(e) => Some(e.message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no error block in {blocks:#?}"))
}

#[tokio::test]
async fn an_echo_session_streams_with_continuous_seqs() {
    let (home, _service, mut client) = in_process_bridge().await;
    let (session, opening) = client.start("echo", home.path()).await;
    assert!(matches!(opening[0].kind, BlockKind::AgentInfo(_)), "{opening:?}");
    let blocks = client.turn(&session, "hello bridge").await;
    assert_eq!(end_of(&blocks), EndReason::Completed);
    let seqs: Vec<u64> = opening.iter().chain(&blocks).map(|b| b.seq.unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(finished_texts(&blocks), ["You said: hello bridge"]);
}

#[tokio::test]
async fn a_crash_mid_turn_ends_the_turn_with_an_error_naming_the_adapter_and_the_bridge_goes_on() {
    let (home, _service, mut client) = in_process_bridge().await;
    let (session, _) = client.start("broken-exits-mid-turn", home.path()).await;
    let blocks = client.turn(&session, "hi").await;
    assert_eq!(end_of(&blocks), EndReason::Error);
    let text = error_text(&blocks);
    assert!(text.contains("broken-exits-mid-turn") && text.contains("exit status: 3"), "{text}");
    assert!(text.contains("exiting with status 3"), "stderr tail missing: {text}");
    // Every text opened before the crash was closed.
    assert!(blocks.iter().filter(|b| matches!(&b.kind, BlockKind::Text(t) if t.done)).count() >= 1, "{blocks:#?}");
    // The bridge still serves other sessions.
    let (other, _) = client.start("echo", home.path()).await;
    assert_eq!(end_of(&client.turn(&other, "still there?").await), EndReason::Completed);
    // The crashed session restarts its adapter on the next message.
    let again = client.turn(&session, "again").await;
    assert!(again.iter().any(|b| matches!(b.kind, BlockKind::AgentInfo(_))), "no restart: {again:#?}");
    assert_eq!(end_of(&again), EndReason::Error);
}

#[tokio::test]
async fn a_silent_adapter_is_declared_hung_and_the_turn_ends() {
    let (home, _service, mut client) = in_process_bridge().await;
    for agent in ["broken-hangs-mid-turn", "broken-no-session-end"] {
        let (session, _) = client.start(agent, home.path()).await;
        let blocks = client.turn(&session, "hi").await;
        assert_eq!(end_of(&blocks), EndReason::Error, "{agent}");
        let text = error_text(&blocks);
        assert!(text.contains(agent) && text.contains("produced nothing"), "{agent}: {text}");
    }
}

#[tokio::test]
async fn a_tool_call_left_running_is_closed_before_the_session_end() {
    let (home, _service, mut client) = in_process_bridge().await;
    let (session, _) = client.start("broken-tool-call-left-running", home.path()).await;
    let blocks = client.turn(&session, "hi").await;
    let end_at = blocks.iter().position(|b| matches!(b.kind, BlockKind::SessionEnd(_))).unwrap();
    let closed_at = blocks
        .iter()
        .position(|b| matches!(&b.kind, BlockKind::ToolCall(c) if c.status == ToolStatus::Error))
        .expect("the running call was closed");
    let result_at =
        blocks.iter().position(|b| matches!(&b.kind, BlockKind::ToolResult(r) if r.is_error)).expect("paired result");
    assert!(closed_at < end_at && result_at < end_at, "{blocks:#?}");
}

#[tokio::test]
async fn garbage_and_a_20_mib_line_do_not_break_the_turn() {
    let (home, _service, mut client) = in_process_bridge().await;
    for agent in ["broken-stdout-garbage", "broken-huge-line"] {
        let (session, _) = client.start(agent, home.path()).await;
        assert_eq!(end_of(&client.turn(&session, "hi").await), EndReason::Completed, "{agent}");
    }
}

#[tokio::test]
async fn a_slow_handshake_past_the_deadline_is_refused_with_a_reason() {
    let home = home();
    let tight = SessionPolicy { handshake_timeout: Duration::from_millis(500), ..policy() };
    let service = service(home.path(), tight).await;
    let mut client = Client::in_process(&service);
    let mut kept = Vec::new();
    let outcome = client
        .call(
            json!({"type": "session_request", "agent": "broken-slow-handshake", "cwd": home.path(), "app_pubkey": "k"}),
            &mut kept,
        )
        .await;
    match outcome {
        ReplyOutcome::Error { error } => assert!(error.message.contains("no answer to initialize"), "{error:?}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn messages_sent_during_a_turn_are_queued_and_delivered_in_order() {
    let (home, _service, mut client) = in_process_bridge().await;
    let (session, _) = client.start("echo", home.path()).await;
    let mut kept = Vec::new();
    for text in ["slow one two three", "second", "third"] {
        let outcome =
            client.call(json!({"type": "user_message", "session_id": session, "text": text}), &mut kept).await;
        assert!(matches!(outcome, ReplyOutcome::Ok { .. }));
    }
    let mut blocks: Vec<Block> = kept.into_iter().filter_map(block_of).collect();
    while blocks.iter().filter(|b| matches!(b.kind, BlockKind::SessionEnd(_))).count() < 3 {
        blocks.extend(block_of(client.next().await));
    }
    assert_eq!(finished_texts(&blocks), ["You said: slow one two three", "You said: second", "You said: third"]);
}

#[tokio::test]
async fn unknown_types_are_ignored_and_bad_fields_answered() {
    let (_home, _service, mut client) = in_process_bridge().await;
    client.send(json!({"type": "from_the_future"})).await;
    let mut kept = Vec::new();
    let outcome = client.call(json!({"type": "interrupt", "session_id": 5}), &mut kept).await;
    match outcome {
        ReplyOutcome::Error { error } => assert!(error.message.contains("session_id"), "{error:?}"),
        other => panic!("{other:?}"),
    }
    assert!(kept.is_empty(), "the unknown type got an answer: {kept:?}");
    let outcome = client
        .call(json!({"type": "session_request", "agent": "nope", "cwd": "/", "app_pubkey": "k"}), &mut kept)
        .await;
    assert!(matches!(outcome, ReplyOutcome::Error { ref error } if error.message.contains("known: ")), "{outcome:?}");
}

/// Blocks with time stamps and generated ids blanked, for comparing two runs.
fn normalized(blocks: &[Block]) -> Vec<Value> {
    // Where a burst of appends is split is timing (the SDK's and the bridge's 20 ms
    // pacing), so chunks that continue each other are compared joined.
    let mut joined: Vec<Block> = Vec::new();
    for b in blocks.iter().cloned() {
        let b = match joined.last_mut() {
            Some(last) => match last.join(b) {
                Ok(()) => continue,
                Err(b) => b,
            },
            None => b,
        };
        joined.push(b);
    }
    joined
        .iter()
        .map(|b| {
            let mut v = serde_json::to_value(b).unwrap();
            v["ts"] = json!(0);
            // `seq` counts the chunks stored: timing, as above.
            v["seq"] = json!(0);
            if v.get("id").is_some() {
                v["id"] = json!("<id>");
            }
            v
        })
        .collect()
}

#[tokio::test]
async fn the_socket_and_the_in_process_path_give_the_same_blocks() {
    let home = home();
    let service = service(home.path(), policy()).await;
    let socket = home.path().join("bridge.sock");
    let listener = local::bind(&socket).await.unwrap();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    tokio::spawn(local::serve(service.clone(), listener));

    let mut runs = Vec::new();
    for over_socket in [false, true] {
        let mut client = if over_socket { Client::over_socket(&socket).await } else { Client::in_process(&service) };
        let (session, mut blocks) = client.start("echo", home.path()).await;
        blocks.extend(client.turn(&session, "same words").await);
        let mut kept = Vec::new();
        let usage = client.call(json!({"type": "get_usage", "session_id": session}), &mut kept).await;
        assert!(matches!(usage, ReplyOutcome::Ok { result: ReplyResult::Usage { .. } }), "{usage:?}");
        runs.push(normalized(&blocks));
    }
    assert_eq!(runs[0], runs[1]);
    assert!(matches!(local::bind(&socket).await, Err(local::LocalError::InUse(_))));
}

#[tokio::test]
async fn a_restarted_bridge_replays_history_and_resumes_with_the_agent_session_id() {
    let home = home();
    let session;
    let before;
    {
        let service = service(home.path(), policy()).await;
        let mut client = Client::in_process(&service);
        let (id, mut blocks) = client.start("echo-py", home.path()).await;
        blocks.extend(client.turn(&id, "remember me").await);
        session = id;
        before = blocks;
        service.shutdown().await;
    }
    let service = service(home.path(), policy()).await;
    let mut client = Client::in_process(&service);
    let replayed = resume_from_zero(&mut client, &session).await;
    // Everything before the restart comes back (chunks compacted: the final text once).
    assert_eq!(finished_texts(&replayed), finished_texts(&before));
    assert!(replayed.iter().filter(|b| matches!(b.kind, BlockKind::Text(_))).count() == 1, "{replayed:#?}");
    // The next message restarts the adapter with the agent's own session id: the
    // Python adapter refuses a resume id it did not mint, so a completed turn proves it.
    let blocks = client.turn(&session, "still me").await;
    assert_eq!(end_of(&blocks), EndReason::Completed, "{blocks:#?}");
}

/// Replaces what differs between two runs by nature (session ids, times, generated
/// ids, paths to temp dirs) so the rest can be compared exactly.
fn normalized_message(m: &BridgeMessage, session: &str) -> Value {
    let text = serde_json::to_string(m).unwrap().replace(session, "<session>");
    let mut v: Value = serde_json::from_str(&text).unwrap();
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, val) in map.iter_mut() {
                    match k.as_str() {
                        // `seq`/`last_seq` count the chunks stored: timing (see `normalized`).
                        "ts" | "id" | "request_id" | "agent_session_id" | "seq" | "last_seq" => *val = json!("<x>"),
                        _ => walk(val),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// The transports a client can reach the bridge by.
#[derive(Debug, Clone, Copy)]
enum Transport {
    InProcess,
    Socket,
    Lan,
    Relay,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_control_message_type_gives_the_same_result_on_every_transport() {
    let home = home();
    let service = service(home.path(), policy()).await;
    let socket = home.path().join("bridge.sock");
    tokio::spawn(local::serve(service.clone(), local::bind(&socket).await.unwrap()));
    // The same bridge, reachable by a paired device on the LAN and through a relay.
    let device = support::remote::pair_device(&Home::at(home.path()), &service);
    let lan_config = terminull_bridge::lan::LanConfig::new("127.0.0.1:0".parse().unwrap());
    let lan = terminull_bridge::lan::start(device.ctx.clone(), Home::at(home.path()), lan_config).await.unwrap();
    let relay_data = tempfile::tempdir().unwrap();
    let relay = terminull_relay::Relay::start(terminull_relay::RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        relay_data.path(),
    ))
    .await
    .unwrap();
    tokio::spawn(terminull_bridge::relay_client::run(
        device.ctx.clone(),
        Home::at(home.path()),
        relay.ws_url(),
        Default::default(),
    ));

    let mut runs = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    let transports = [Transport::InProcess, Transport::Socket, Transport::Lan, Transport::Relay];
    for transport in transports {
        let mut client = match transport {
            Transport::InProcess => Client::in_process(&service),
            Transport::Socket => Client::over_socket(&socket).await,
            Transport::Lan => Client::remote(
                terminull_client::connection::Connection::open_lan(&device.device, &device.record, &lan.ws_url())
                    .await
                    .unwrap(),
            ),
            Transport::Relay => {
                let mut opened = None;
                for _ in 0..100 {
                    match terminull_client::connection::Connection::open(
                        &device.device,
                        &device.record,
                        Some(&relay.ws_url()),
                    )
                    .await
                    {
                        Ok(c) => {
                            opened = Some(c);
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
                Client::remote(opened.expect("a link through the relay"))
            }
        };
        let (session, _) = client.start("echo-py", home.path()).await;
        let s = session.as_str();
        let messages = [
            json!({"type": "user_message", "session_id": s, "text": "hello"}),
            json!({"type": "interrupt", "session_id": s}),
            json!({"type": "permission_response", "session_id": s, "request_id": "p1", "option_id": "allow"}),
            json!({"type": "get_usage", "session_id": s}),
            json!({"type": "list_agents"}),
            json!({"type": "list_models", "agent": "echo-py"}),
            json!({"type": "slash_command", "session_id": s, "command": "help"}),
            json!({"type": "scan_external_sessions"}),
            json!({"type": "attach_external", "agent": "echo-py", "agent_session_id": "x", "cwd": "/", "app_pubkey": "k"}),
            json!({"type": "continue_in_terminal", "session_id": s}),
            json!({"type": "files", "session_id": s, "op": "list", "path": "ext_adapters"}),
            json!({"type": "git", "session_id": s, "op": "status"}),
            json!({"type": "session_resume", "session_id": s, "since_seq": 0, "app_pubkey": "k"}),
            json!({"type": "rename_session", "session_id": s, "title": "a title"}),
            json!({"type": "archive_session", "session_id": s, "archived": true}),
            json!({"type": "search_sessions", "query": "nothing says this"}),
            json!({"type": "set_session_options", "session_id": s, "model": "echo-1"}),
            json!({"type": "stop_session", "session_id": s}),
            json!({"type": "delete_session", "session_id": s}),
            // Terminals (bridge/tests/terminals.rs drives real ones over the LAN and the relay).
            json!({"type": "list_terminals"}),
            json!({"type": "terminal_open", "cwd": "/no/such/dir", "cols": 80, "rows": 24}),
            json!({"type": "terminal_attach", "terminal_id": "t-none"}),
            json!({"type": "terminal_input", "terminal_id": "t-none", "data": "aWQK"}),
            json!({"type": "terminal_resize", "terminal_id": "t-none", "cols": 80, "rows": 24}),
            json!({"type": "terminal_close", "terminal_id": "t-none"}),
        ];
        let mut raw = Vec::new();
        for message in messages {
            let kind = message["type"].as_str().unwrap().to_owned();
            covered.insert(kind.clone());
            let id = client.send(message).await;
            // Everything up to this message's reply, then what it sets off: a turn runs to
            // its session_end, a resume replays to replay_done. Each step is awaited so
            // both runs see the same order.
            let mut replied = false;
            let mut settled = !matches!(kind.as_str(), "user_message" | "session_resume");
            while !(replied && settled) {
                let m = client.next().await;
                replied |= matches!(&m, BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id));
                settled |= matches!(&m, BridgeMessage::ReplayDone { .. })
                    || matches!(&m, BridgeMessage::Block { block, .. } if matches!(block.kind, BlockKind::SessionEnd(_)));
                raw.push(m);
            }
        }
        // A link may join the chunks of a streamed message when it is behind
        // (docs/block-protocol.md); how many it joins depends on timing, so every
        // transport's run is compared with all such chunks joined.
        let mut joined: Vec<BridgeMessage> = Vec::new();
        for m in raw {
            let m = match joined.last_mut() {
                Some(last) => match terminull_bridge::link::coalesce(last, m) {
                    Ok(()) => continue,
                    Err(m) => m,
                },
                None => m,
            };
            joined.push(m);
        }
        let transcript: Vec<Value> = joined.iter().map(|m| normalized_message(m, s)).collect();
        runs.push(transcript);
    }
    covered.insert("session_request".into());
    covered.insert("list_sessions".into());
    // A device's notification settings and presence mean something on a device's link
    // only (the local socket answers them `not_supported`), so they cannot give the same
    // result everywhere: `bridge/tests/web_push.rs` drives both through the relay, and
    // `push_policy`'s unit tests pin what the bridge does with them.
    covered.insert("push_settings".into());
    covered.insert("presence".into());
    // `rtc_offer` is answered by a device's link with a LAN server (`not_supported`
    // elsewhere): `bridge/tests/lan_rtc.rs` offers a data channel through the relay.
    covered.insert("rtc_offer".into());
    for t in terminull_protocol::control::CONTROL_TYPES {
        assert!(covered.contains(*t), "control type `{t}` not exercised");
    }
    for (transport, run) in transports.iter().zip(&runs).skip(1) {
        assert_eq!(&runs[0], run, "{transport:?} differs from in-process");
    }
    relay.shutdown().await;
    lan.stop();
}

#[tokio::test]
async fn a_drop_in_added_while_the_bridge_runs_is_picked_up() {
    let home = tempfile::tempdir().unwrap();
    let service = service(home.path(), policy()).await;
    tokio::spawn(service.clone().watch_drop_ins(Duration::from_millis(100)));
    let ids = |service: Service| async move {
        service.registry().await.agents.iter().map(|a| a.declaration.agent_id.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(ids(service.clone()).await, ["echo"]);
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ids(service.clone()).await != ["echo", "echo-py"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new drop-in was not registered: {:?}",
            service.registry().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn once_the_crash_budget_is_spent_a_message_still_ends_its_turn_with_the_reason() {
    let home = home();
    let service = service(home.path(), SessionPolicy { crash_budget: 1, ..policy() }).await;
    let mut client = Client::in_process(&service);
    let (session, _) = client.start("broken-exits-mid-turn", home.path()).await;
    assert_eq!(end_of(&client.turn(&session, "first").await), EndReason::Error);
    // The send is refused, but the turn it opened still ends, with the reason.
    let mut kept = Vec::new();
    let outcome =
        client.call(json!({"type": "user_message", "session_id": session, "text": "second"}), &mut kept).await;
    match outcome {
        ReplyOutcome::Error { error } => assert!(error.message.contains("automatic restarts are stopped"), "{error:?}"),
        other => panic!("{other:?}"),
    }
    let mut blocks: Vec<Block> = kept.into_iter().filter_map(block_of).collect();
    while !blocks.iter().any(|b| matches!(b.kind, BlockKind::SessionEnd(_))) {
        blocks.extend(block_of(client.next().await));
    }
    assert_eq!(end_of(&blocks), EndReason::Error);
    assert!(error_text(&blocks).contains("crashed 1 time within"), "{blocks:#?}");
}

#[tokio::test]
async fn a_client_that_falls_behind_the_live_feed_resumes_from_history_without_loss_or_repeats() {
    let home = home();
    let service = service(home.path(), policy()).await;
    // Room for 8 messages only: while this client does not read, the live feed (256
    // blocks) overflows and its follower must resume from history.
    let mut slow =
        Client { inner: terminull_bridge::daemon_client::Client::in_process_with_inbox(&service, 8), next_id: 0 };
    let (session, _) = slow.start("echo", home.path()).await;
    // 700 finished text blocks of their own (echo's `bench blocks`): streamed text would
    // be joined into a few appends and never overflow anything.
    slow.send(json!({"type": "user_message", "session_id": session, "text": "bench blocks 700 64"})).await;
    // Wait for the turn to end, watching from another client.
    let mut watcher = Client::in_process(&service);
    loop {
        let mut kept = Vec::new();
        if let ReplyOutcome::Ok { result: ReplyResult::Sessions { sessions } } =
            watcher.call(json!({"type": "list_sessions"}), &mut kept).await
            && sessions.iter().any(|s| s.session_id.as_str() == session && s.last_seq > 700)
            && sessions
                .iter()
                .any(|s| s.session_id.as_str() == session && s.state == terminull_protocol::control::SessionState::Idle)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut blocks = Vec::new();
    while !blocks.iter().any(|b: &Block| matches!(b.kind, BlockKind::SessionEnd(_))) {
        blocks.extend(block_of(slow.next().await));
    }
    let seqs: Vec<u64> = blocks.iter().map(|b| b.seq.unwrap()).collect();
    // More blocks than the live feed and the inbox hold, all of them, once, in order:
    // the follower lagged and was caught up from history.
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "repeated or reordered: {seqs:?}");
    assert_eq!(end_of(&blocks), EndReason::Completed);
    assert_eq!(finished_texts(&blocks).len(), 700, "no block lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_to_a_user_message_comes_before_the_blocks_it_causes_on_every_transport() {
    let home = home();
    let service = service(home.path(), policy()).await;
    let listener = local::bind(&home.path().join("bridge.sock")).await.unwrap();
    tokio::spawn(local::serve(service.clone(), listener));
    let clients = [
        ("in-process", Client::in_process(&service)),
        ("socket", Client::over_socket(&home.path().join("bridge.sock")).await),
    ];
    for (transport, mut client) in clients {
        let (session, _) = client.start("echo", home.path()).await;
        // Quick turns: the agent's first block is published while the dispatcher is
        // still answering, which is when a reply could be overtaken.
        for turn in 0..100 {
            let id =
                client.send(json!({"type": "user_message", "session_id": session, "text": format!("t{turn}")})).await;
            match client.next().await {
                BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id) => {
                    assert!(matches!(r.outcome, ReplyOutcome::Ok { .. }), "{transport}: {r:?}");
                }
                other => panic!("{transport}, turn {turn}: {other:?} came before the reply"),
            }
            while !matches!(block_of(client.next().await), Some(Block { kind: BlockKind::SessionEnd(_), .. })) {}
        }
    }
}

/// The text of every finished `text` message among `blocks`, rebuilt from its chunks
/// (appends or snapshots), in the order the messages finished.
fn finished_texts(blocks: &[Block]) -> Vec<String> {
    let mut open: std::collections::HashMap<String, terminull_protocol::streamed::Assembly> = Default::default();
    let mut finished = Vec::new();
    for block in blocks {
        if let BlockKind::Text(t) = &block.kind {
            let message = open.entry(t.id.as_str().to_owned()).or_default();
            message.apply(t);
            if message.is_done() {
                finished.push(message.text().to_owned());
                open.remove(t.id.as_str());
            }
        }
    }
    finished
}

/// The blocks of a `session_resume` from seq 0, up to its `replay_done`.
async fn resume_from_zero(client: &mut Client, session: &str) -> Vec<Block> {
    let mut kept = Vec::new();
    let outcome = client
        .call(json!({"type": "session_resume", "session_id": session, "since_seq": 0, "app_pubkey": "k"}), &mut kept)
        .await;
    assert!(matches!(outcome, ReplyOutcome::Ok { .. }), "{outcome:?}");
    let mut replayed: Vec<Block> = kept.into_iter().filter_map(block_of).collect();
    loop {
        match client.next().await {
            BridgeMessage::ReplayDone { .. } => return replayed,
            m => replayed.extend(block_of(m)),
        }
    }
}

/// The blocks as a client holds them: the parts of one streamed message joined into its
/// last one (a replay is read in pages, and a message can come in two parts).
fn as_held(blocks: Vec<Block>) -> Vec<Block> {
    let stream_id = |b: &Block| match &b.kind {
        BlockKind::Text(t) => Some(("text", t.id.clone())),
        BlockKind::Thinking(t) => Some(("thinking", t.id.clone())),
        _ => None,
    };
    let mut held: Vec<Block> = Vec::new();
    for block in blocks {
        let id = stream_id(&block);
        let Some(earlier) = id.as_ref().and_then(|id| held.iter().rposition(|b| stream_id(b).as_ref() == Some(id)))
        else {
            held.push(block);
            continue;
        };
        let mut joined = held.remove(earlier);
        match joined.join(block) {
            Ok(()) => held.push(joined),
            Err(block) => {
                held.insert(earlier, joined);
                held.push(block);
            }
        }
    }
    held
}

#[tokio::test]
async fn a_replay_that_drops_most_of_the_log_compacts_it_in_the_background_without_changing_the_next_replay() {
    use terminull_bridge::history::{DATA_FILE, HistoryStore, SessionMeta, SyncPolicy};
    let home = home();
    let store = HistoryStore::open(Home::at(home.path()).sessions()).unwrap().with_sync_policy(SyncPolicy::Never);
    let meta = SessionMeta::new("s-compact".into(), "echo".into(), home.path().display().to_string());
    let mut log = store.create(meta).unwrap();
    // Whole turns (45 blocks each): a log ending mid-turn would be closed on revival.
    for block in terminull_protocol::samples::realistic_session(4_995) {
        log.append(block).unwrap();
    }
    log.close().unwrap();
    let data = home.path().join("sessions/s-compact").join(DATA_FILE);
    let size_before = std::fs::metadata(&data).unwrap().len();

    let service = service(home.path(), policy()).await;
    let mut client = Client::in_process(&service);
    let first = resume_from_zero(&mut client, "s-compact").await;
    assert!(first.len() * 2 < 4_995, "the sample must be mostly superseded chunks: {}", first.len());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&data).unwrap().len() == size_before {
        assert!(std::time::Instant::now() < deadline, "the log was not compacted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(std::fs::metadata(&data).unwrap().len() < size_before / 2);
    assert_eq!(as_held(resume_from_zero(&mut client, "s-compact").await), as_held(first.clone()));
    let last = first.last().and_then(|b| b.seq);
    let blocks = client.turn("s-compact", "after the compaction").await;
    assert_eq!(end_of(&blocks), EndReason::Completed, "{blocks:#?}");
    assert!(blocks.iter().filter_map(|b| b.seq).all(|s| Some(s) > last), "{blocks:#?}");
}
