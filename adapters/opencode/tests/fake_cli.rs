//! The adapter's I/O end to end in memory: a bridge-side peer talks to
//! `serve_io::<OpenCodeAdapter>` (the SDK's `testing::TestBridge`), which runs a fake `opencode acp`
//! (tests/fixtures/fake_opencode.py: OpenCode's ACP answers, its captured turns, a
//! log of what it read).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::testing::OnPermission::Answer;
use terminull_adapter_sdk::testing::{
    FakeCliBridge, TestBridge, executable, first_error, serve_in_memory, session_end as end, start_params,
};
use terminull_opencode::OpenCodeAdapter;
use terminull_protocol::adapter as proto;
use terminull_protocol::blocks::ToolStatus;
use terminull_protocol::jsonrpc::codes;

const T: Option<Duration> = Some(Duration::from_secs(60));

/// A wrapper script running the fake with its state in `dir`.
fn fake_cli(dir: &Path, flags: &str) -> PathBuf {
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_opencode.py");
    let path = dir.join(if flags.is_empty() { "opencode" } else { "opencode-flagged" });
    let script = format!("#!/bin/sh\nexec python3 '{}' '{}' {flags} \"$@\"\n", fake.display(), dir.display());
    executable(&path, &script)
}

fn connect() -> TestBridge {
    serve_in_memory::<OpenCodeAdapter>()
}

/// A bridge whose adapter started a session on the fake, with the fake's state in
/// `dir`.
async fn started() -> FakeCliBridge {
    let b = FakeCliBridge::new(connect());
    b.start(&start_params(&fake_cli(b.dir.path(), ""), b.dir.path())).await.unwrap();
    b
}

/// The ACP messages the fake read, in order.
fn cli_read(dir: &Path) -> Vec<Value> {
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    log.lines().filter_map(|l| l.strip_prefix("in: ")).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn methods(dir: &Path) -> Vec<String> {
    cli_read(dir).iter().filter_map(|m| m["method"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn start_opens_a_session_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = connect();
    let info = b.start(&start_params(&fake_cli(dir.path(), ""), dir.path())).await.unwrap().agent_info;
    assert_eq!((info.agent_id.as_str(), info.name.as_str()), ("opencode", "OpenCode"));
    assert_eq!(info.version.as_deref(), Some("1.18.33"));
    assert_eq!(info.model.as_deref(), Some("mock/mock-model"));
    assert!(info.slash_commands.iter().any(|c| c.name == "init"), "{:?}", info.slash_commands);
    assert_eq!(b.reported_session_id().await, "ses_fake_1");
    let read = cli_read(dir.path());
    assert_eq!(methods(dir.path()), ["initialize", "session/new"]);
    assert_eq!((read[0]["id"].clone(), read[1]["id"].clone()), (1.into(), 2.into()), "deterministic request ids");
    assert_eq!(read[1]["params"]["cwd"], dir.path().display().to_string());
}

#[tokio::test]
async fn model_effort_and_agent_are_set_in_order_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let cli = fake_cli(dir.path(), "");
    let b = connect();
    let mut p = start_params(&cli, dir.path());
    p.model = Some("other/big".into());
    p.effort = Some("high".into());
    p.permission_mode = Some("plan".into());
    let info = b.start(&p).await.unwrap().agent_info;
    assert_eq!(info.model.as_deref(), Some("other/big"));
    let set: Vec<(String, String)> = cli_read(dir.path())
        .iter()
        .filter(|m| m["method"] == "session/set_config_option")
        .map(|m| {
            (m["params"]["configId"].as_str().unwrap().to_owned(), m["params"]["value"].as_str().unwrap().to_owned())
        })
        .collect();
    let want = [("model", "other/big"), ("effort", "high"), ("mode", "plan")];
    assert_eq!(set, want.map(|(k, v)| (k.to_owned(), v.to_owned())));

    // Unknown names are refused with the session's own choices; "default" changes nothing.
    for (mode, model, effort) in [(Some("yolo"), None, None), (None, Some("x/y"), None), (None, None, Some("max"))] {
        let other = tempfile::tempdir().unwrap();
        let b = connect();
        let mut p = start_params(&fake_cli(other.path(), ""), other.path());
        p.permission_mode = mode.map(str::to_owned);
        p.model = model.map(str::to_owned);
        p.effort = effort.map(str::to_owned);
        let error = b.start_refused(&p).await;
        assert_eq!(error.code, codes::INVALID_PARAMS, "{}", error.message);
        let choices = ["build, plan", "mock/mock-model, other/big", "low, medium, high"];
        assert!(choices.iter().any(|c| error.message.contains(c)), "{}", error.message);
    }
    let b = connect();
    let mut p = start_params(&cli, dir.path());
    p.model = Some("default".into());
    assert_eq!(b.start(&p).await.unwrap().agent_info.model.as_deref(), Some("mock/mock-model"));
}

#[tokio::test]
async fn a_shell_turn_streams_the_call_and_its_real_output() {
    let mut b = started().await;
    let blocks = b.send_turn("mock:tool please", Answer("once"), false).await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::Thinking(t) if t.done)));
    assert!(blocks.iter().any(
        |k| matches!(k, BlockKind::ToolCall(c) if c.status == ToolStatus::Done && c.input["command"] == "echo hello")
    ));
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.output == "hello\n" && !r.is_error)));
    let usage = b.peer.request::<proto::GetUsage>(&proto::Empty {}, T).await.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(7766), Some(22)));
    let prompt = cli_read(b.dir.path()).into_iter().find(|m| m["method"] == "session/prompt").unwrap();
    assert_eq!(prompt["params"]["prompt"], serde_json::json!([{"type": "text", "text": "mock:tool please"}]));
    assert_eq!(prompt["params"]["sessionId"], "ses_fake_1");
}

#[tokio::test]
async fn permission_answers_reach_the_cli() {
    let mut b = started().await;
    let denied = b.send_turn("mock:write the file", Answer("reject"), false).await;
    let request = denied.iter().find_map(|k| match k {
        BlockKind::PermissionRequest(r) => Some(r),
        _ => None,
    });
    let request = request.expect("a permission request");
    let ids: Vec<&str> = request.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["once", "always", "reject"]);
    assert!(request.tool_call_id.is_some(), "the request names the call it gates");
    assert!(denied.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.is_error)));
    let allowed = b.send_turn("mock:write the file", Answer("once"), false).await;
    assert!(allowed.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if !r.is_error && r.output.contains("Wrote"))));
    let answers: Vec<Value> = cli_read(b.dir.path())
        .into_iter()
        .filter(|m| m.get("result").is_some())
        .map(|m| m["result"]["outcome"]["optionId"].clone())
        .collect();
    assert_eq!(answers, [Value::from("reject"), Value::from("once")]);
}

#[tokio::test]
async fn an_interrupt_cancels_the_turn_and_the_session_goes_on() {
    let mut b = started().await;
    let stopped = b.send_turn("mock:slow please", Answer("once"), true).await;
    assert_eq!(end(&stopped).reason, EndReason::Interrupted);
    assert!(!stopped.iter().any(|k| matches!(k, BlockKind::Error(_))));
    assert!(methods(b.dir.path()).contains(&"session/cancel".to_owned()));
    let after = b.send_turn("mock:plain hi", Answer("once"), false).await;
    assert_eq!(end(&after).reason, EndReason::Completed);
}

#[tokio::test]
async fn a_model_error_is_an_error_block_and_the_next_turn_works() {
    let mut b = started().await;
    let failed = b.send_turn("mock:error now", Answer("once"), false).await;
    assert_eq!(end(&failed).reason, EndReason::Error);
    assert!(failed.iter().any(|k| matches!(k, BlockKind::Error(e) if e.message.contains("scripted server error"))));
    assert_eq!(end(&b.send_turn("mock:plain again", Answer("once"), false).await).reason, EndReason::Completed);
}

#[tokio::test]
async fn a_crash_is_reported_with_stderr_and_the_next_turn_resumes_the_session() {
    let mut b = started().await;
    let crashed = b.send_turn("mock:crash", Answer("once"), false).await;
    assert_eq!(end(&crashed).reason, EndReason::Error);
    let error = &first_error(&crashed).message;
    assert!(error.contains("fatal: the fake CLI crashed"), "{error}");
    let after = b.send_turn("mock:tool again", Answer("once"), false).await;
    assert_eq!(end(&after).reason, EndReason::Completed);
    let m = methods(b.dir.path());
    assert_eq!(m.iter().filter(|m| *m == "initialize").count(), 2, "a new process: {m:?}");
    let resume = cli_read(b.dir.path()).into_iter().find(|m| m["method"] == "session/resume").unwrap();
    assert_eq!(resume["params"]["sessionId"], "ses_fake_1");
}

#[tokio::test]
async fn resume_reattaches_without_replay_and_refuses_an_unknown_session() {
    let dir = tempfile::tempdir().unwrap();
    let cli = fake_cli(dir.path(), "");
    let mut first = connect();
    first.start(&start_params(&cli, dir.path())).await.unwrap();
    let id = first.reported_session_id().await;
    drop(first);

    let mut b = connect();
    let mut p = start_params(&cli, dir.path());
    p.resume_session_id = Some(id.clone().into());
    b.start(&p).await.unwrap();
    assert_eq!(b.reported_session_id().await, id);
    let m = methods(dir.path());
    assert_eq!(m.last().map(String::as_str), Some("session/resume"), "{m:?}");
    assert_eq!(m.iter().filter(|m| *m == "session/new").count(), 1);

    p.resume_session_id = Some("ses_unknown".into());
    let error = connect().start_refused(&p).await;
    assert_eq!(error.code, codes::NOT_FOUND, "{}", error.message);
    assert!(error.message.contains("ses_unknown"), "{}", error.message);

    // A CLI without session/resume loads the session instead.
    let flagged = fake_cli(dir.path(), "--no-resume");
    let mut p = start_params(&flagged, dir.path());
    p.resume_session_id = Some(id.into());
    connect().start(&p).await.unwrap();
    let m = methods(dir.path());
    assert_eq!(m[m.len() - 2..], ["session/resume".to_owned(), "session/load".to_owned()]);
}
