//! Terminal handoff through the one dispatcher (docs/session-handoff.md), with a real
//! adapter process whose "terminal" is a directory of files
//! (tests/fixtures/adapters/handoff.py): a parked session queues, mirrors and starts no
//! agent while the terminal owns the conversation, then attaches to the lineage head and
//! drains its queue in order; continue_in_terminal releases and re-parks.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_protocol::blocks::{Block, BlockKind, Ownership};
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult, SessionState};

struct Rig {
    home: tempfile::TempDir,
    ws: PathBuf,
    service: Service,
    client: terminull_bridge::daemon_client::Client,
    next_id: u64,
    /// Every block seen so far, in order.
    seen: Vec<Block>,
}

impl Rig {
    async fn start() -> Rig {
        let home = tempfile::tempdir().unwrap();
        let ext = home.path().join("ext_adapters");
        std::fs::create_dir_all(&ext).unwrap();
        let script = support::workspace().join("tests/fixtures/adapters/handoff.py");
        let path = ext.join("handoff-echo");
        std::fs::write(&path, format!("#!/bin/sh\nexec python3 '{}'\n", script.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ws = home.path().join("ws");
        std::fs::create_dir_all(ws.join(".handoff")).unwrap();
        let service = Self::service(home.path()).await;
        let client = terminull_bridge::daemon_client::Client::in_process(&service);
        Rig { home, ws, service, client, next_id: 0, seen: Vec::new() }
    }

    async fn service(home: &Path) -> Service {
        let mut scan = ScanOptions::new(Home::at(home), Config::default());
        scan.exe_dir = Some(support::echo_only_exe_dir());
        scan.handshake_timeout = Duration::from_secs(10);
        let policy = SessionPolicy {
            handshake_timeout: Duration::from_secs(10),
            handoff_poll: Duration::from_millis(100),
            ..SessionPolicy::default()
        };
        Service::start(Home::at(home), Config::default(), scan, policy).await.unwrap()
    }

    /// Stops this bridge (its adapters exit) and starts another on the same home, as a
    /// restarted daemon does; returns the sessions it revived for their pending work.
    async fn restart_bridge(&mut self, between: impl FnOnce(&Rig)) -> Vec<String> {
        self.service.shutdown().await;
        between(self);
        self.service = Self::service(self.home.path()).await;
        self.client = terminull_bridge::daemon_client::Client::in_process(&self.service);
        self.service.revive_pending_work().await.into_iter().map(|id| id.to_string()).collect()
    }

    /// A bridge with a fresh session whose first turn never ends (later messages wait).
    async fn with_a_held_turn() -> (Rig, String) {
        let mut rig = Rig::start().await;
        let s = rig.start_session().await;
        rig.say(&s, "hold the turn").await;
        (rig, s)
    }

    /// Starts a session of the handoff adapter in the workspace; returns its id.
    async fn start_session(&mut self) -> String {
        let ws = self.ws.display().to_string();
        let started =
            self.call(json!({"type": "session_request", "agent": "handoff-echo", "cwd": ws, "app_pubkey": "k"})).await;
        let ReplyResult::SessionStarted { session_id } = started else { panic!("{started:?}") };
        session_id.as_str().to_owned()
    }

    /// Binds a session to the terminal's conversation `conversation`; returns its id.
    async fn attach_external(&mut self, conversation: &str) -> String {
        self.attach_external_pinned(conversation, false).await
    }

    /// `attach_external` with its `pin` choice.
    async fn attach_external_pinned(&mut self, conversation: &str, pin: bool) -> String {
        let ws = self.ws.display().to_string();
        let started = self
            .call(json!({"type": "attach_external", "agent": "handoff-echo", "agent_session_id": conversation, "cwd": ws, "app_pubkey": "k", "pin": pin}))
            .await;
        let ReplyResult::SessionStarted { session_id } = started else { panic!("{started:?}") };
        session_id.as_str().to_owned()
    }

    /// Sends `text` to `session` as the app does; the bridge accepts it.
    async fn say(&mut self, session: &str, text: &str) {
        let r = self.call(json!({"type": "user_message", "session_id": session, "text": text})).await;
        assert!(matches!(r, ReplyResult::Accepted {}), "{r:?}");
    }

    /// The session's `meta.json` as stored.
    fn meta(&self, session: &str) -> Value {
        let path = self.home.path().join("sessions").join(session).join("meta.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// Follows `session` on the current bridge from the last block seen.
    async fn follow(&mut self, session: &str) {
        let since = self.seen.iter().filter_map(|b| b.seq).max().unwrap_or(0);
        let r = self
            .call(json!({"type": "session_resume", "session_id": session, "since_seq": since, "app_pubkey": "k"}))
            .await;
        assert!(matches!(r, ReplyResult::Accepted {}), "{r:?}");
    }

    fn state(&self, name: &str) -> PathBuf {
        self.ws.join(".handoff").join(name)
    }

    fn set(&self, name: &str, content: &str) {
        std::fs::write(self.state(name), content).unwrap();
    }

    fn terminal_writes(&self, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(self.state("transcript.jsonl")).unwrap();
        writeln!(f, "{}", json!({ "text": text })).unwrap();
    }

    /// What reached the agent: the adapter's event log.
    fn agent_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.state("log")).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    async fn call(&mut self, message: Value) -> ReplyResult {
        match self.call_outcome(message).await {
            ReplyOutcome::Ok { result } => result,
            ReplyOutcome::Error { error } => panic!("{error:?}"),
            refused @ ReplyOutcome::Refused { .. } => panic!("{refused:?}"),
        }
    }

    async fn call_outcome(&mut self, mut message: Value) -> ReplyOutcome {
        self.next_id += 1;
        let id = format!("h{}", self.next_id);
        message["id"] = json!(id);
        self.client.send_raw(message).await.unwrap();
        loop {
            match self.next().await {
                BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id) => return r.outcome,
                _ => {}
            }
        }
    }

    async fn next(&mut self) -> BridgeMessage {
        let m = tokio::time::timeout(Duration::from_secs(30), self.client.next())
            .await
            .expect("nothing from the bridge in 30 s")
            .unwrap();
        if let BridgeMessage::Block { block, .. } = &m {
            self.seen.push(block.clone());
        }
        m
    }

    /// Reads blocks until one matches; returns it.
    async fn until(&mut self, what: &str, matches: impl Fn(&Block) -> bool) -> Block {
        if let Some(b) = self.seen.iter().find(|b| matches(b)) {
            return b.clone();
        }
        loop {
            if let BridgeMessage::Block { block, .. } = self.next().await
                && matches(&block)
            {
                return block;
            }
            assert!(self.seen.len() < 10_000, "never saw {what}: {:#?}", self.seen);
        }
    }

    async fn state_of(&mut self, session: &str) -> SessionState {
        let ReplyResult::Sessions { sessions } = self.call(json!({"type": "list_sessions"})).await else { panic!() };
        sessions.iter().find(|s| s.session_id.as_str() == session).unwrap().state
    }
}

fn parked(b: &Block) -> bool {
    matches!(&b.kind, BlockKind::SessionState(s) if s.state == Ownership::Parked)
}

fn live(b: &Block) -> bool {
    matches!(&b.kind, BlockKind::SessionState(s) if s.state == Ownership::Live)
}

fn text_is(b: &Block, want: &str) -> bool {
    matches!(&b.kind, BlockKind::Text(t) if t.text == want)
}

fn is_mirrored(b: &Block) -> bool {
    b.meta.as_ref().is_some_and(|m| m.get("mirrored") == Some(&Value::Bool(true)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_session_starts_no_agent_while_the_terminal_owns_it_then_drains_its_queue_into_the_head() {
    let mut rig = Rig::start().await;
    let ws = rig.ws.display().to_string();
    // A conversation the CLI started in a terminal, still running there.
    rig.set("head", "conv-1");
    rig.set("owned", "4242");
    rig.terminal_writes("terminal turn 1");

    let ReplyResult::ExternalSessions { sessions } =
        rig.call(json!({"type": "scan_external_sessions", "agent": "handoff-echo", "cwd": ws})).await
    else {
        panic!()
    };
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].agent_id.as_str(), "handoff-echo");
    assert_eq!(sessions[0].session.agent_session_id.as_str(), "conv-1");

    let s = rig.attach_external("conv-1").await;

    // The conversation so far is mirrored, and the app is told it observes.
    let first = rig.until("the terminal's first turn", |b| text_is(b, "terminal turn 1")).await;
    assert!(is_mirrored(&first));
    let state = rig.until("parked", parked).await;
    let BlockKind::SessionState(notice) = &state.kind else { unreachable!() };
    assert_eq!(notice.owner_pid, Some(4242));
    assert_eq!(rig.state_of(&s).await, SessionState::Parked);

    // Messages from the app queue.
    for text in ["queued one", "queued two"] {
        rig.say(&s, text).await;
    }
    rig.until("two queued", |b| matches!(&b.kind, BlockKind::SessionState(n) if n.queued == 2)).await;
    // The terminal goes on; its turn is mirrored live.
    rig.terminal_writes("terminal turn 2");
    let second = rig.until("the terminal's second turn", |b| text_is(b, "terminal turn 2")).await;
    assert!(is_mirrored(&second));
    // Polls have run since the messages were queued, and none reached an agent: no
    // session was started and nothing was sent while the terminal owned it.
    assert!(rig.agent_log().is_empty(), "the agent was touched while parked: {:?}", rig.agent_log());
    assert_eq!(rig.state_of(&s).await, SessionState::Parked);

    // The terminal's `--resume` minted a new id, then it exited.
    rig.set("head", "conv-2");
    std::fs::remove_file(rig.state("owned")).unwrap();
    rig.until("live", live).await;
    rig.until("the first queued reply", |b| text_is(b, "You said: queued one (conversation conv-2)")).await;
    rig.until("the second queued reply", |b| text_is(b, "You said: queued two (conversation conv-2)")).await;
    assert_eq!(rig.agent_log(), ["start conv-2", "send queued one", "send queued two"]);
    // Nothing of the terminal's arrived twice.
    let mirrored_twice = rig.seen.iter().filter(|b| text_is(b, "terminal turn 2")).count();
    assert_eq!(mirrored_twice, 1);
    drop(rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_session_resumes_the_chosen_conversation_not_the_directorys_newest() {
    let mut rig = Rig::start().await;
    rig.set("head", "conv-1");
    rig.set("owned", "4242");
    rig.terminal_writes("terminal turn 1");
    let s = rig.attach_external_pinned("conv-1", true).await;
    rig.until("parked", parked).await;
    assert!(rig.meta(&s)["pinned"].as_bool().unwrap_or(false), "the choice is kept in meta.json");
    rig.say(&s, "for the chosen one").await;
    rig.until("one queued", |b| matches!(&b.kind, BlockKind::SessionState(n) if n.queued == 1)).await;
    // Another conversation started in the same directory is now its newest; the terminal exits.
    rig.set("head", "conv-other");
    std::fs::remove_file(rig.state("owned")).unwrap();
    rig.until("live", live).await;
    rig.until("the reply", |b| text_is(b, "You said: for the chosen one (conversation conv-1)")).await;
    assert_eq!(rig.agent_log(), ["start conv-1", "send for the chosen one"]);
    drop(rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_in_terminal_releases_the_agent_and_the_session_waits_for_the_terminal() {
    let mut rig = Rig::start().await;
    let ws = rig.ws.display().to_string();
    let s = rig.start_session().await;
    rig.say(&s, "hello").await;
    rig.until("the reply", |b| text_is(b, "You said: hello (conversation fresh-conversation)")).await;
    // Only between turns.
    rig.until("the turn's end", |b| matches!(b.kind, BlockKind::SessionEnd(_))).await;

    let result = rig.call(json!({"type": "continue_in_terminal", "session_id": s})).await;
    let ReplyResult::TerminalCommand { argv, cwd, command } = result else { panic!("{result:?}") };
    assert_eq!(argv, ["handoff-echo", "--resume", "fresh-conversation"]);
    assert_eq!(cwd.as_deref(), Some(ws.as_str()));
    assert!(command.ends_with("'handoff-echo' '--resume' 'fresh-conversation'"), "{command}");
    let state = rig.until("parked with the command", parked).await;
    let BlockKind::SessionState(notice) = &state.kind else { unreachable!() };
    assert_eq!(notice.resume_command.as_deref(), Some(&argv[..]));
    // The agent was released, then its adapter stopped: nothing holds the conversation.
    assert_eq!(rig.agent_log(), ["start None", "send hello", "release", "stop"]);

    // The terminal takes it; a message meanwhile waits.
    rig.set("owned", "777");
    rig.until("the terminal seen", |b| matches!(&b.kind, BlockKind::SessionState(n) if n.owner_pid == Some(777))).await;
    rig.say(&s, "from the phone").await;
    rig.terminal_writes("typed in the terminal");
    rig.until("the terminal's turn", |b| text_is(b, "typed in the terminal")).await;
    assert_eq!(rig.agent_log().len(), 4, "the agent was touched while parked: {:?}", rig.agent_log());

    // The terminal exits: the queue goes to the same conversation.
    std::fs::remove_file(rig.state("owned")).unwrap();
    rig.until("the queued reply", |b| text_is(b, "You said: from the phone (conversation fresh-conversation)")).await;
    let log = rig.agent_log();
    assert_eq!(
        log.get(4..),
        Some(&["start fresh-conversation".to_owned(), "send from the phone".to_owned()][..]),
        "{log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_for_a_live_session_whose_directory_a_terminal_took_is_parked_not_sent() {
    let mut rig = Rig::start().await;
    let s = rig.start_session().await;
    rig.say(&s, "one").await;
    rig.until("the reply", |b| text_is(b, "You said: one (conversation fresh-conversation)")).await;

    // Someone runs the CLI in that directory without telling terminull.
    rig.set("owned", "99");
    rig.say(&s, "two").await;
    rig.until("parked", parked).await;
    assert_eq!(rig.agent_log(), ["start None", "send one"]);
    assert_eq!(rig.state_of(&s).await, SessionState::Parked);

    std::fs::remove_file(rig.state("owned")).unwrap();
    rig.until("the reply", |b| text_is(b, "You said: two (conversation fresh-conversation)")).await;
    let log = rig.agent_log();
    assert_eq!(log.last().map(String::as_str), Some("send two"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_session_stays_parked_while_ownership_cannot_be_known() {
    let mut rig = Rig::start().await;
    rig.set("head", "conv-1");
    rig.set("owned", "5");
    let s = rig.attach_external("conv-1").await;
    rig.until("parked", parked).await;
    rig.say(&s, "waiting").await;
    // The terminal may or may not still run: the check fails, so nothing is sent.
    rig.set("broken", "");
    std::fs::remove_file(rig.state("owned")).unwrap();
    rig.terminal_writes("still mirrored");
    rig.until("a poll after the check broke", |b| text_is(b, "still mirrored")).await;
    assert!(rig.agent_log().is_empty(), "sent while ownership was unknown: {:?}", rig.agent_log());
    assert_eq!(rig.state_of(&s).await, SessionState::Parked);
    // Known again, and nobody owns it: the queue drains.
    std::fs::remove_file(rig.state("broken")).unwrap();
    rig.until("the queued reply", |b| text_is(b, "You said: waiting (conversation conv-1)")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_external_sessions_and_refuses_to_hand_over_a_stopped_session() {
    let mut rig = Rig::start().await;
    let ws = rig.ws.display().to_string();
    rig.set("head", "conv-cli");
    let out = assert_cmd::Command::cargo_bin("terminull")
        .unwrap()
        .args(["external", "--agent", "handoff-echo", "--cwd", &ws, "--json", "--home"])
        .arg(rig.home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["agent_id"], "handoff-echo");
    assert_eq!(listed[0]["agent_session_id"], "conv-cli");

    // A session with a conversation, then handed over from the command line (another
    // bridge over the same home: the session is revived from history).
    let s = rig.start_session().await;
    rig.say(&s, "hi").await;
    rig.until("the turn's end", |b| matches!(b.kind, BlockKind::SessionEnd(_))).await;
    rig.call(json!({"type": "stop_session", "session_id": s})).await;
    let out = assert_cmd::Command::cargo_bin("terminull")
        .unwrap()
        .args(["continue-in-terminal", &s, "--home"])
        .arg(rig.home.path())
        .output()
        .unwrap();
    // A stopped session cannot be handed over: the error names it.
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopped"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_in_terminal_from_the_cli_prints_the_command_and_parks_the_daemons_session() {
    let rig = Rig::start().await;
    let ws = rig.ws.display().to_string();
    // The daemon over the rig's home (its drop-in included); the rig's own bridge is idle.
    let mut daemon = support::daemon_up(rig.home.path(), &[]);
    let mut client =
        terminull_bridge::daemon_client::Client::connect(&rig.home.path().join("bridge.sock")).await.unwrap();
    let mut kept = Vec::new();
    let request = terminull_protocol::control::ControlMessage::SessionRequest(
        terminull_protocol::control::SessionRequest::new("handoff-echo", ws.clone()),
    );
    let ReplyResult::SessionStarted { session_id } = client.call(request, &mut kept).await.unwrap() else { panic!() };
    let message = terminull_protocol::control::ControlMessage::UserMessage(terminull_protocol::control::UserMessage {
        session_id: session_id.clone(),
        text: "hi".into(),
        attachments: vec![],
    });
    client.call(message, &mut kept).await.unwrap();
    loop {
        let ended = kept
            .iter()
            .any(|m| matches!(m, BridgeMessage::Block { block, .. } if matches!(block.kind, BlockKind::SessionEnd(_))));
        if ended {
            break;
        }
        let next = tokio::time::timeout(Duration::from_secs(30), client.next()).await.unwrap().unwrap();
        kept.push(next);
    }

    let out = assert_cmd::Command::cargo_bin("terminull")
        .unwrap()
        .args(["continue-in-terminal", session_id.as_str(), "--home"])
        .arg(rig.home.path())
        .output()
        .unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.trim(), format!("cd '{ws}' && 'handoff-echo' '--resume' 'fresh-conversation'"));
    assert_eq!(rig.agent_log(), ["start None", "send hi", "release", "stop"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_bridge_keeps_a_parked_sessions_queue_and_mirror_then_drains_into_the_head() {
    let mut rig = Rig::start().await;
    rig.set("head", "conv-1");
    rig.set("owned", "4242");
    rig.terminal_writes("terminal turn 1");
    let s = rig.attach_external("conv-1").await;
    rig.until("parked", parked).await;
    rig.say(&s, "sent before the restart").await;
    rig.until("one queued", |b| matches!(&b.kind, BlockKind::SessionState(n) if n.queued == 1)).await;

    // The bridge goes down; meanwhile the terminal writes a turn, resumes into a new
    // id and exits.
    let revived = rig
        .restart_bridge(|rig| {
            let meta = rig.meta(&s);
            assert_eq!(meta["pending"]["queued"][0]["text"], "sent before the restart", "{meta:#}");
            assert_eq!(meta["pending"]["parked"]["owner_pid"], 4242, "{meta:#}");
            rig.terminal_writes("terminal turn 2");
            rig.set("head", "conv-2");
            std::fs::remove_file(rig.state("owned")).unwrap();
        })
        .await;
    assert_eq!(revived, std::slice::from_ref(&s), "the new bridge picks the session up without a client");
    rig.follow(&s).await;
    let second =
        rig.until("the turn the terminal wrote while the bridge was down", |b| text_is(b, "terminal turn 2")).await;
    assert!(is_mirrored(&second));
    rig.until("live", live).await;
    rig.until("the queued reply", |b| text_is(b, "You said: sent before the restart (conversation conv-2)")).await;
    assert_eq!(rig.agent_log(), ["start conv-2", "send sent before the restart"]);
    let history = support::remote::history(rig.home.path(), &terminull_protocol::ids::SessionId(s.clone()));
    let mirrored: Vec<_> =
        history.iter().filter(|b| text_is(b, "terminal turn 1") || text_is(b, "terminal turn 2")).collect();
    assert_eq!(mirrored.len(), 2, "each terminal turn is in the history once: {mirrored:#?}");
    // Delivered: nothing is pending any more.
    let meta = rig.meta(&s);
    assert!(meta.get("pending").is_none_or(|p| p.get("queued").is_none()), "{meta:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_behind_a_running_turn_is_delivered_by_the_restarted_bridge() {
    let (mut rig, s) = Rig::with_a_held_turn().await;
    rig.say(&s, "behind the turn").await;
    assert_eq!(rig.agent_log(), ["start None", "send hold the turn"], "the second message waits for the turn");

    let revived = rig.restart_bridge(|_| {}).await;
    assert_eq!(revived, std::slice::from_ref(&s));
    rig.follow(&s).await;
    rig.until("the queued reply", |b| text_is(b, "You said: behind the turn (conversation fresh-conversation)")).await;
    let log = rig.agent_log();
    assert_eq!(log.last().map(String::as_str), Some("send behind the turn"), "{log:?}");
    assert_eq!(log.iter().filter(|l| l.starts_with("send behind")).count(), 1, "sent once: {log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_holds_at_most_its_bound_of_waiting_messages_and_refuses_the_next_as_busy() {
    let (mut rig, s) = Rig::with_a_held_turn().await;
    for i in 0..terminull_bridge::session::MAX_QUEUED_MESSAGES {
        rig.say(&s, &format!("waiting {i}")).await;
    }
    let refused = rig.call_outcome(json!({"type": "user_message", "session_id": s, "text": "one too many"})).await;
    let ReplyOutcome::Error { error } = refused else { panic!("{refused:?}") };
    assert_eq!(error.code, terminull_protocol::control::ReplyErrorCode::Busy);
    assert!(error.message.contains("64 messages"), "{}", error.message);
    let history = support::remote::history(rig.home.path(), &terminull_protocol::ids::SessionId(s));
    assert!(
        !history.iter().any(|b| matches!(&b.kind, BlockKind::UserMessage(m) if m.text == "one too many")),
        "a refused message is not recorded"
    );
}
