//! The adapter's I/O driven end to end in memory: a bridge-side peer talks to
//! `serve_io::<ClaudeCode>` (the SDK's `testing::TestBridge`), which runs a fake `claude` (a shell script replaying the
//! captured lines of tests/fixtures and logging what it reads on stdin).

use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::testing::OnPermission::Answer;
use terminull_adapter_sdk::testing::{
    FakeCliBridge, fake_cli_script, first_error, serve_in_memory, session_end as end, start_params,
};
use terminull_claude_code::ClaudeCode;
use terminull_protocol::adapter as proto;
use terminull_protocol::blocks::ToolStatus;

const T: Option<Duration> = Some(Duration::from_secs(30));

/// The fake CLI. It answers `--version`, logs its arguments and every stdin line to
/// `log`, answers `initialize` with the captured answer, and plays a scenario chosen
/// by the user message's text.
fn fake_cli(dir: &Path) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let script = r#"
echo "args: $*" >> "$LOG"
read -r line; echo "in: $line" >> "$LOG"
cat "$F/init-response.json"
while read -r line; do
  echo "in: $line" >> "$LOG"
  case "$line" in
    *mock:tool*)
      echo 'this line is not JSON'
      echo '{"type":"brand_new_event","x":1}'
      cat "$F/tool.jsonl" ;;
    *mock:write*)
      sed -n '1,/can_use_tool/p' "$F/write-allow.jsonl"
      read -r reply; echo "in: $reply" >> "$LOG"
      sed '1,/can_use_tool/d' "$F/write-allow.jsonl" ;;
    *mock:slow*)
      head -n 6 "$F/slow-interrupt.jsonl"
      read -r intr; echo "in: $intr" >> "$LOG"
      tail -n +7 "$F/slow-interrupt.jsonl" ;;
    *mock:crash*)
      head -n 20 "$F/tool.jsonl"
      echo "fatal: the fake CLI crashed" >&2
      exit 3 ;;
  esac
done
"#;
    fake_cli_script(dir, "claude", &fixtures, "2.1.197 (Claude Code)", script)
}

type Bridge = FakeCliBridge;

async fn started() -> (Bridge, proto::StartResult) {
    let b = FakeCliBridge::new(serve_in_memory::<ClaudeCode>());
    let cli = fake_cli(b.dir.path());
    let result = b.start(&start_params(&cli, b.dir.path())).await.unwrap();
    (b, result)
}

#[tokio::test]
async fn start_reports_version_commands_model_and_session_id() {
    let (mut b, result) = started().await;
    let info = result.agent_info;
    assert_eq!((info.agent_id.as_str(), info.name.as_str()), ("claude-code", "Claude Code"));
    assert_eq!(info.version.as_deref(), Some("2.1.197"));
    assert_eq!(info.model.as_deref(), Some("claude-opus-4-8[1m]"), "the default model, resolved by the CLI");
    assert!(info.slash_commands.iter().any(|c| c.name == "compact"));
    // The conversation id is announced at start and is the one passed to the CLI.
    let id = b.reported_session_id().await;
    assert!(b.log().contains(&format!("--session-id {id}")), "{}", b.log());
    assert_eq!(
        b.logged_json("in: ")[0],
        serde_json::json!({"type": "control_request", "request_id": "init-1", "request": {"subtype": "initialize", "hooks": null}})
    );
}

#[tokio::test]
async fn a_tool_turn_survives_a_non_json_line_and_an_unknown_event() {
    let (mut b, _) = started().await;
    let blocks = b.send_turn("mock:tool please", Answer("allow"), false).await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    let usage = end(&blocks).usage.clone().unwrap();
    assert_eq!(usage.cost_usd, Some(0.22053));
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.output == "hello")), "{blocks:?}");
    let usage = b.peer.request::<proto::GetUsage>(&proto::Empty {}, T).await.unwrap();
    assert_eq!(usage.input_tokens, Some(43806));
    // The user message line the CLI got.
    let lines = b.logged_json("in: ");
    let line = lines.iter().find(|l| l["type"] == "user").unwrap();
    assert_eq!(
        line["message"],
        serde_json::json!({"role": "user", "content": [{"type": "text", "text": "mock:tool please"}]})
    );
    assert_eq!(line["parent_tool_use_id"], serde_json::Value::Null);
}

#[tokio::test]
async fn a_permission_answer_reaches_the_cli() {
    let (mut b, _) = started().await;
    let blocks = b.send_turn("mock:write now", Answer("always"), false).await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    let request = blocks.iter().find_map(|k| match k {
        BlockKind::PermissionRequest(r) => Some(r),
        _ => None,
    });
    assert_eq!(request.and_then(|r| r.tool_call_id.as_ref()).map(|i| i.as_str()), Some("toolu_mock_000001"));
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolCall(c) if c.status == ToolStatus::Done)));
    let lines = b.logged_json("in: ");
    let reply = &lines.iter().find(|l| l["type"] == "control_response").unwrap()["response"];
    let fixture = include_str!("fixtures/write-allow.jsonl");
    let asked = fixture.lines().find(|l| l.contains("can_use_tool")).unwrap();
    let asked: serde_json::Value = serde_json::from_str(asked).unwrap();
    assert_eq!(reply["request_id"], asked["request_id"]);
    assert_eq!(reply["response"]["behavior"], "allow");
    assert_eq!(reply["response"]["updatedPermissions"][0]["mode"], "acceptEdits");
}

#[tokio::test]
async fn an_interrupt_is_sent_with_a_deterministic_id_and_ends_the_turn_interrupted() {
    let (mut b, _) = started().await;
    let blocks = b.send_turn("mock:slow go", Answer("allow"), true).await;
    assert_eq!(end(&blocks).reason, EndReason::Interrupted);
    let interrupt = serde_json::json!({"type": "control_request", "request_id": "interrupt-1", "request": {"subtype": "interrupt"}});
    assert!(b.logged_json("in: ").contains(&interrupt), "{}", b.log());
    // The process is still usable.
    assert_eq!(end(&b.send_turn("mock:tool again", Answer("allow"), false).await).reason, EndReason::Completed);
}

#[tokio::test]
async fn a_crash_mid_turn_is_an_error_and_the_next_turn_resumes() {
    let (mut b, _) = started().await;
    let blocks = b.send_turn("mock:crash now", Answer("allow"), false).await;
    assert_eq!(end(&blocks).reason, EndReason::Error);
    let error = first_error(&blocks);
    assert!(error.message.contains("fatal: the fake CLI crashed"), "{}", error.message);
    assert_eq!(error.code.as_deref(), Some("agent_exited"));
    assert_eq!(end(&b.send_turn("mock:tool again", Answer("allow"), false).await).reason, EndReason::Completed);
    let log = b.log();
    let args: Vec<_> = log.lines().filter(|l| l.starts_with("args: ")).collect();
    assert_eq!(args.len(), 2, "{log}");
    assert!(args[0].contains("--session-id ") && args[1].contains("--resume "), "{args:?}");
    // The fake reported the captured conversation's id in its system/init; the adapter
    // follows the CLI's id.
    assert!(args[1].ends_with("--resume d86b7f53-46d7-40ab-9512-6a699b1181db"), "{args:?}");
}

#[tokio::test]
async fn bad_start_params_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cli = fake_cli(dir.path());
    let bridge = serve_in_memory::<ClaudeCode>();
    bridge.assert_refuses_unknown_mode_and_missing_binary(&start_params(&cli, dir.path()), "bypassPermissions").await;
}
