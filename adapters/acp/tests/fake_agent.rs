//! The host driven end to end in memory: a bridge-side peer talks to
//! `serve_io::<AcpAdapter<…>>` (the SDK's `testing::TestBridge`), which runs a fake ACP agent (tests/fixtures/
//! fake_acp_agent.py) that plays a scenario chosen by a `fake:<name>` keyword and logs
//! what it reads. Each ACP bug class of docs/acp.md has its test here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use terminull_acp::generic::{self, AgentCommand, Generic};
use terminull_acp::{AcpAdapter, AcpProfile, Launch, Settings};
use terminull_adapter_sdk::DeclarationOverride;
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::testing::OnPermission::Answer;
use terminull_adapter_sdk::testing::{
    FakeCliBridge, OnPermission, executable, final_texts, first_error, rebuilt, serve_in_memory, serve_in_memory_with,
    session_end as end, start_params,
};
use terminull_protocol::adapter as proto;
use terminull_protocol::blocks::{CommandSource, ToolStatus};
use terminull_protocol::jsonrpc::codes;
use terminull_rpc::Incoming;

const T: Option<Duration> = Some(Duration::from_secs(30));

const CAPS: Caps = caps! {
    supported: [images, thinking, permissions, interrupt],
    unsupported: [documents, subagents, input_during_turn, terminal],
};

/// A profile of the fake agent, run through the wrapper script given as `binary`, with
/// the profile constants that set it apart.
macro_rules! fake_profile {
    ($(#[$doc:meta])* $name:ident, $id:literal $(, $($rest:tt)*)?) => {
        $(#[$doc])*
        #[derive(Debug)]
        struct $name;

        impl AcpProfile for $name {
            const AGENT_ID: &'static str = $id;
            const DISPLAY_NAME: &'static str = "Fake ACP";
            const CLI_BINARY: Option<&'static str> = None;
            const CAPS: Caps = CAPS;
            $($($rest)*)?

            fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
                let program = settings.binary.clone().ok_or_else(|| AdapterError::invalid("binary is required"))?;
                Ok(Launch { program: program.into(), args: vec![], env: vec![] })
            }
        }
    };
}

fake_profile!(
    /// The fake agent, one process for the session.
    Fake,
    "fake-acp"
);
fake_profile!(
    /// The same agent, one process per turn.
    FakePerTurn,
    "fake-per-turn",
    const LEASE: LeaseKind = LeaseKind::PerTurn;
);
fake_profile!(
    /// The same agent, read as answering `session/load` of an unknown id with `{}` (Hermes).
    FakeEmptyLoad,
    "fake-empty-load",
    const EMPTY_LOAD_MEANS_UNKNOWN: bool = true;
);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_acp_agent.py")
}

/// A wrapper that starts the fake with `flags`, logging to `<dir>/log`.
fn wrapper(dir: &Path, flags: &str) -> PathBuf {
    let path = dir.join("agent");
    let body =
        format!("#!/bin/sh\nexec python3 '{}' --log '{}' {flags}\n", script().display(), dir.join("log").display());
    executable(&path, &body)
}

/// The bridge's side, and the directory of the fake agent and its log.
type Bridge = FakeCliBridge;

enum Kind {
    Persistent,
    PerTurn,
    EmptyLoad,
    Generic(DeclarationOverride),
}

fn connect(kind: Kind) -> Bridge {
    let inner = match kind {
        Kind::Persistent => serve_in_memory::<AcpAdapter<Fake>>(),
        Kind::PerTurn => serve_in_memory::<AcpAdapter<FakePerTurn>>(),
        Kind::EmptyLoad => serve_in_memory::<AcpAdapter<FakeEmptyLoad>>(),
        Kind::Generic(o) => serve_in_memory_with::<AcpAdapter<Generic>>(o),
    };
    FakeCliBridge::new(inner)
}

/// `start` params running the fake with `flags`.
fn fake_params(b: &Bridge, flags: &str) -> proto::StartParams {
    start_params(&wrapper(b.dir.path(), flags), b.dir.path())
}

async fn started(kind: Kind, flags: &str) -> (Bridge, proto::StartResult) {
    let b = connect(kind);
    let result = b.start(&fake_params(&b, flags)).await.unwrap();
    (b, result)
}

/// A bridge whose `start` resumed `session` (running the fake with `flags`).
async fn resumed(kind: Kind, flags: &str, session: &str) -> Bridge {
    let b = connect(kind);
    let mut p = fake_params(&b, flags);
    p.resume_session_id = Some(session.into());
    b.start(&p).await.unwrap();
    b
}

/// Sends `text` and collects its turn, allowing what the agent asks.
async fn say(b: &mut Bridge, text: &str) -> Vec<BlockKind> {
    b.send_turn(text, Answer("allow"), false).await
}

/// The JSON lines the fake read, in order.
fn received(b: &Bridge) -> Vec<Value> {
    b.logged_json("in: ")
}

/// The fake's logged answers to its own requests, in order.
fn answers(b: &Bridge) -> Vec<Value> {
    b.logged_json("answer: ")
}

fn methods(b: &Bridge) -> Vec<String> {
    received(b).iter().filter_map(|m| m["method"].as_str().map(str::to_owned)).collect()
}

/// The session_id notifications received so far.
fn reported_ids(b: &mut Bridge) -> Vec<String> {
    let mut ids = std::mem::take(&mut b.session_ids);
    while let Ok(msg) = b.incoming.try_recv() {
        if let Incoming::Notification(n) = msg
            && let Ok(p) = n.params_as::<proto::SessionIdNotification>()
        {
            ids.push(p.agent_session_id.to_string());
        }
    }
    ids
}

/// The finished texts of a turn, joined with `|`.
fn final_text(blocks: &[BlockKind]) -> String {
    final_texts(blocks).join("|")
}

/// The message of the turn's first progress block: what the adapter says about a resume.
fn progress_notice(blocks: &[BlockKind]) -> Option<String> {
    blocks.iter().find_map(|k| match k {
        BlockKind::Progress(p) => Some(p.message.clone()),
        _ => None,
    })
}

fn has_error(blocks: &[BlockKind]) -> bool {
    blocks.iter().any(|b| matches!(b, BlockKind::Error(_)))
}

#[tokio::test]
async fn start_reports_version_model_commands_sent_before_the_session_answer_and_the_session_id() {
    let (mut b, result) = started(Kind::Persistent, "").await;
    let info = result.agent_info;
    assert_eq!(
        (info.agent_id.as_str(), info.version.as_deref(), info.model.as_deref()),
        ("fake-acp", Some("9.9.9"), Some("fake-small"))
    );
    // The fake sends its commands *before* answering session/new (bug class: early updates).
    let agent: Vec<_> =
        info.slash_commands.iter().filter(|c| c.source == CommandSource::Agent).map(|c| c.name.as_str()).collect();
    assert_eq!(agent, ["compact", "init"]);
    assert_eq!(reported_ids(&mut b), ["sess-1"]);
    let init = &received(&b)[0];
    assert_eq!(init["id"], 1, "request ids are the peer's counter");
    assert_eq!(init["params"]["protocolVersion"], 1);
    assert_eq!(
        init["params"]["clientCapabilities"],
        serde_json::json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false})
    );
    let new = &received(&b)[1];
    assert_eq!((new["method"].as_str(), new["id"].as_i64()), (Some("session/new"), Some(2)));
    assert_eq!(new["params"]["mcpServers"], serde_json::json!([]));
    assert_eq!(new["params"]["cwd"], b.dir.path().display().to_string());
}

#[tokio::test]
async fn a_plain_turn_streams_thinking_and_text_and_ends_with_usage() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "hello").await;
    assert_eq!(final_text(&blocks), "Hello there.");
    assert!(
        rebuilt(&blocks).iter().any(|m| m.kind == StreamKind::Thinking && m.done && m.text == "Let me see."),
        "{blocks:?}"
    );
    let e = end(&blocks);
    assert_eq!(e.reason, EndReason::Completed);
    let usage = e.usage.clone().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.cache_read_tokens), (Some(12), Some(5), Some(3)));
    say(&mut b, "again").await;
    let total = b.peer.request::<proto::GetUsage>(&proto::Empty {}, T).await.unwrap();
    assert_eq!(total.input_tokens, Some(24));
    let prompt = received(&b).into_iter().find(|m| m["method"] == "session/prompt").unwrap();
    assert_eq!(prompt["params"]["prompt"], serde_json::json!([{"type": "text", "text": "hello"}]));
    assert_eq!(prompt["params"]["sessionId"], "sess-1");
}

#[tokio::test]
async fn updates_after_the_prompt_answer_still_belong_to_the_turn() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:late").await;
    assert_eq!(final_text(&blocks), "Early late.");
    assert_eq!(end(&blocks).reason, EndReason::Completed);
}

#[tokio::test]
async fn junk_on_stdout_is_skipped() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:junk").await;
    assert_eq!(final_text(&blocks), "still fine");
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    assert!(!has_error(&blocks));
}

#[tokio::test]
async fn updates_for_another_session_are_dropped() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:foreign").await;
    assert_eq!(final_text(&blocks), "mine");
    assert!(!blocks.iter().any(|k| matches!(k, BlockKind::ToolCall(_))), "{blocks:?}");
}

#[tokio::test]
async fn fs_and_terminal_requests_get_method_not_found_and_never_hang() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:fs").await;
    assert_eq!(final_text(&blocks), "client said [-32601, -32601]");
    let answers = answers(&b);
    assert_eq!(answers[0]["id"], "fs-1");
    assert_eq!(answers[0]["error"]["code"], codes::METHOD_NOT_FOUND);
    assert_eq!(answers[1]["id"], "term-1");
}

#[tokio::test]
async fn a_tool_call_runs_and_its_output_is_the_result() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:tool").await;
    let calls: Vec<_> = blocks
        .iter()
        .filter_map(|k| match k {
            BlockKind::ToolCall(c) => Some((c.status, c.name.clone(), c.title.clone(), c.input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].0, ToolStatus::Running);
    assert_eq!(
        calls[1],
        (ToolStatus::Done, "execute".into(), Some("echo hello".into()), serde_json::json!({"command": "echo hello"}))
    );
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.output == "hello" && !r.is_error)));
    assert_eq!(final_text(&blocks), "It printed hello.");
}

#[tokio::test]
async fn permission_answers_reach_the_agent_with_its_option_ids() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    b.send("fake:write").await.unwrap();
    let blocks = b.turn(Answer("allow"), false).await;
    let request = blocks.iter().find_map(|k| match k {
        BlockKind::PermissionRequest(r) => Some(r.clone()),
        _ => None,
    });
    let request = request.unwrap();
    let ids: Vec<_> = request.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["allow", "reject"]);
    assert!(request.tool_call_id.is_some(), "the call was shown before the request");
    assert_eq!(request.input, serde_json::json!({"path": "/w/a.txt", "content": "hi"}));
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::Diff(d) if d.path == "/w/a.txt")));
    assert_eq!(final_text(&blocks), "Written.");

    b.send("fake:write").await.unwrap();
    let blocks = b.turn(Answer("reject"), false).await;
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.is_error && r.output == "denied")));
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    let answers = answers(&b);
    assert_eq!(answers[0]["id"], 0);
    assert_eq!(answers[0]["result"], serde_json::json!({"outcome": {"outcome": "selected", "optionId": "allow"}}));
    assert_eq!(answers[1]["result"], serde_json::json!({"outcome": {"outcome": "selected", "optionId": "reject"}}));
}

#[tokio::test]
async fn an_interrupt_while_asking_cancels_the_request_and_the_turn() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    b.send("fake:write").await.unwrap();
    let blocks = b.turn(OnPermission::Interrupt, false).await;
    assert_eq!(end(&blocks).reason, EndReason::Interrupted);
    assert!(!has_error(&blocks));
    let methods = methods(&b);
    assert!(methods.contains(&"session/cancel".to_owned()), "{methods:?}");
    let answers = answers(&b);
    assert_eq!(answers[0]["result"], serde_json::json!({"outcome": {"outcome": "cancelled"}}));
    // The session goes on.
    assert_eq!(end(&say(&mut b, "hello").await).reason, EndReason::Completed);
}

#[tokio::test]
async fn an_interrupt_sends_session_cancel_and_the_turn_ends_interrupted() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    b.send("fake:slow").await.unwrap();
    let blocks = b.turn(Answer("allow"), true).await;
    assert_eq!(end(&blocks).reason, EndReason::Interrupted);
    let cancel = received(&b).into_iter().find(|m| m["method"] == "session/cancel").unwrap();
    assert_eq!(cancel["params"], serde_json::json!({"sessionId": "sess-1"}));
    assert!(cancel.get("id").is_none(), "session/cancel is a notification");
    assert_eq!(end(&say(&mut b, "hello").await).reason, EndReason::Completed);
    assert_eq!(methods(&b).iter().filter(|m| *m == "initialize").count(), 1, "the same process goes on");
}

#[tokio::test]
async fn a_cancelled_turn_is_interrupted_even_when_the_agent_answers_with_an_error() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    b.send("fake:cancel-error").await.unwrap();
    let blocks = b.turn(Answer("allow"), true).await;
    assert_eq!(end(&blocks).reason, EndReason::Interrupted);
    assert!(!has_error(&blocks), "{blocks:?}");
}

#[tokio::test]
async fn an_agent_deaf_to_cancel_is_killed_and_the_next_turn_loads_the_session() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    b.send("fake:deaf").await.unwrap();
    let blocks = b.turn(Answer("allow"), true).await;
    assert_eq!(end(&blocks).reason, EndReason::Interrupted);
    assert_eq!(end(&say(&mut b, "hello").await).reason, EndReason::Completed);
    let methods = methods(&b);
    assert_eq!(methods.iter().filter(|m| *m == "initialize").count(), 2, "{methods:?}");
    let load = received(&b).into_iter().find(|m| m["method"] == "session/load").unwrap();
    assert_eq!(load["params"]["sessionId"], "sess-1");
}

#[tokio::test]
async fn an_agent_error_is_an_error_block_and_the_session_goes_on() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:error").await;
    assert_eq!(end(&blocks).reason, EndReason::Error);
    let error = first_error(&blocks);
    assert_eq!(error.message, "Internal error (model overloaded (529))");
    assert_eq!(error.code.as_deref(), Some("agent_error"));
    assert_eq!(final_text(&blocks), "Trying");
    assert_eq!(end(&say(&mut b, "hello").await).reason, EndReason::Completed);
}

#[tokio::test]
async fn a_crash_is_an_error_with_the_stderr_tail_and_the_next_turn_loads_the_session() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    let blocks = say(&mut b, "fake:crash").await;
    assert_eq!(end(&blocks).reason, EndReason::Error);
    let error = first_error(&blocks);
    assert_eq!(error.code.as_deref(), Some("agent_exited"));
    assert!(error.message.contains("fatal: the fake agent crashed"), "{}", error.message);
    let blocks = say(&mut b, "hello").await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    assert_eq!(final_text(&blocks), "Hello there.", "the replayed history is not shown again");
    let load = received(&b).into_iter().find(|m| m["method"] == "session/load").unwrap();
    assert_eq!(load["params"]["sessionId"], "sess-1");
}

#[tokio::test]
async fn resume_loads_the_session_without_showing_its_history() {
    let mut b = connect(Kind::Persistent);
    let mut p = fake_params(&b, "");
    p.resume_session_id = Some("sess-old".into());
    let result = b.start(&p).await.unwrap();
    assert!(result.agent_info.slash_commands.iter().any(|c| c.name == "compact"), "commands sent after the load");
    assert_eq!(reported_ids(&mut b), ["sess-old"]);
    assert!(!methods(&b).contains(&"session/new".to_owned()));
    let blocks = say(&mut b, "hello").await;
    assert_eq!(final_text(&blocks), "Hello there.");
    assert_eq!(progress_notice(&blocks), None);
}

#[tokio::test]
async fn resume_without_load_session_or_of_an_unknown_session_starts_anew_and_says_so() {
    for (flags, resume, needle) in [("--no-load", "sess-old", "cannot load"), ("", "missing", "could not resume")] {
        let mut b = resumed(Kind::Persistent, flags, resume).await;
        assert_eq!(reported_ids(&mut b), ["sess-1"], "{flags}");
        let blocks = say(&mut b, "hello").await;
        let notice = progress_notice(&blocks);
        assert!(notice.as_deref().is_some_and(|n| n.contains(needle)), "{flags}: {notice:?}");
        assert_eq!(end(&blocks).reason, EndReason::Completed);
    }
}

#[tokio::test]
async fn an_empty_load_answer_means_unknown_for_agents_that_answer_so() {
    let mut b = resumed(Kind::EmptyLoad, "", "unknown-to-me").await;
    assert_eq!(reported_ids(&mut b), ["sess-1"]);
    let blocks = say(&mut b, "hello").await;
    assert!(progress_notice(&blocks).is_some_and(|n| n.contains("does not know")), "{blocks:?}");
    // A real load (with the session's modes) is a load.
    let mut b = resumed(Kind::EmptyLoad, "", "sess-old").await;
    assert_eq!(reported_ids(&mut b), ["sess-old"]);
}

#[tokio::test]
async fn permission_modes_and_models_are_set_over_acp_and_checked() {
    let b = connect(Kind::Persistent);
    let mut p = fake_params(&b, "");
    p.permission_mode = Some("yolo".into());
    p.model = Some("Large".into());
    let result = b.start(&p).await.unwrap();
    assert_eq!(result.agent_info.model.as_deref(), Some("Large"));
    let received = received(&b);
    let set_mode = received.iter().find(|m| m["method"] == "session/set_mode").unwrap();
    assert_eq!(set_mode["params"], serde_json::json!({"sessionId": "sess-1", "modeId": "yolo"}));
    let set_model = received.iter().find(|m| m["method"] == "session/set_model").unwrap();
    assert_eq!(set_model["params"], serde_json::json!({"sessionId": "sess-1", "modelId": "fake-large"}));

    for (mode, model, needle) in [(Some("plan"), None, "default, yolo"), (None, Some("huge"), "fake-small, fake-large")]
    {
        let b = connect(Kind::Persistent);
        let mut p = fake_params(&b, "");
        p.permission_mode = mode.map(str::to_owned);
        p.model = model.map(str::to_owned);
        let error = b.start_refused(&p).await;
        assert_eq!(error.code, codes::INVALID_PARAMS);
        assert!(error.message.contains(needle), "{}", error.message);
    }
}

#[tokio::test]
async fn a_per_turn_lease_starts_the_agent_for_each_turn_and_loads_the_session() {
    let (mut b, result) = started(Kind::PerTurn, "").await;
    assert_eq!(result.agent_info.version.as_deref(), Some("9.9.9"));
    assert_eq!(final_text(&say(&mut b, "hello").await), "Hello there.");
    assert_eq!(final_text(&say(&mut b, "fake:tool").await), "It printed hello.");
    let methods = methods(&b);
    assert_eq!(methods.iter().filter(|m| *m == "initialize").count(), 3, "{methods:?}");
    assert_eq!(methods.iter().filter(|m| *m == "session/load").count(), 2, "{methods:?}");
    assert_eq!(methods.iter().filter(|m| *m == "session/new").count(), 1, "{methods:?}");

    let b = connect(Kind::PerTurn);
    let error = b.start_refused(&fake_params(&b, "--no-load")).await;
    assert!(error.message.contains("persistent"), "{}", error.message);
}

#[tokio::test]
async fn stop_reasons_and_plans_reach_the_bridge() {
    let (mut b, _) = started(Kind::Persistent, "").await;
    assert_eq!(end(&say(&mut b, "fake:stop:max_tokens").await).reason, EndReason::MaxTokens);
    assert_eq!(end(&say(&mut b, "fake:stop:refusal").await).reason, EndReason::Refusal);
    let blocks = say(&mut b, "fake:plan").await;
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::Plan(p) if p.entries.len() == 2)));
}

#[tokio::test]
async fn the_generic_host_takes_its_identity_from_the_override() {
    generic::install(AgentCommand { program: "python3".into(), args: vec![] });
    let overrides = DeclarationOverride {
        agent_id: Some("my-agent".into()),
        display_name: Some("My Agent".into()),
        cli_binary: Some("my-agent-cli".into()),
        lease: None,
    };
    let mut b = connect(Kind::Generic(overrides));
    let declaration = b
        .peer
        .request::<proto::Initialize>(
            &proto::InitializeParams::from_bridge(proto::PeerInfo { name: "test".into(), version: "0".into() }, vec![]),
            T,
        )
        .await
        .unwrap();
    assert_eq!(declaration.agent_id.as_str(), "my-agent");
    assert_eq!(declaration.display_name, "My Agent");
    assert_eq!(declaration.cli_binary.as_deref(), Some("my-agent-cli"));
    assert_eq!(declaration.lease, LeaseKind::Persistent);
    let result = b.start(&fake_params(&b, "")).await.unwrap();
    assert_eq!((result.agent_info.agent_id.as_str(), result.agent_info.name.as_str()), ("my-agent", "My Agent"));
    assert_eq!(final_text(&say(&mut b, "hello").await), "Hello there.");
}
