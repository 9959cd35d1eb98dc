//! The adapter's I/O driven end to end in memory: a bridge-side peer talks to
//! `serve_io::<Cursor>` (the SDK's `testing::TestBridge`), which runs a fake `cursor-agent` (a shell script replaying the
//! hand-written lines of tests/fixtures, in Cursor's documented stream-json format, and
//! logging its arguments).

use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::testing::{
    FakeCliBridge, OnPermission, fake_cli_script, final_texts, first_error, rebuilt, serve_in_memory,
    session_end as end, start_params,
};
use terminull_cursor::Cursor;
use terminull_protocol::adapter as proto;
use terminull_protocol::blocks::{Attachment, DiffChange, ToolStatus};
use terminull_protocol::jsonrpc::codes;

const T: Option<Duration> = Some(Duration::from_secs(30));
/// The chat id in every fixture.
const CHAT: &str = "0c7a6f3e-52b1-4c8e-9d3f-2a6b1e9c4d57";

/// The fake CLI. It answers `--version`, logs its arguments (one `args:` line per run,
/// each argument in brackets) and plays a scenario chosen by the prompt (its last
/// argument).
fn fake_cli(dir: &Path) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let script = r#"
line="args:"; for a in "$@"; do line="$line [$a]"; done; echo "$line" >> "$LOG"
# stdin must be closed by the adapter: this read returns at once then.
if read -r -t 5 extra; then echo "stdin: $extra" >> "$LOG"; fi
prompt="${@: -1}"
case "$prompt" in
  *mock:tool*)
    echo 'this line is not JSON'
    echo '{"type":"brand_new_event","x":1}'
    echo '{"type":"interaction_query","subtype":"request"}'
    cat "$F/tool.jsonl" ;;
  *mock:write*) cat "$F/write.jsonl" ;;
  *mock:slow*)
    # A background command of the turn (it ignores SIGINT, as background jobs of a
    # script do), then the output, then a long wait in the foreground.
    sleep 60 >/dev/null 2>&1 &
    echo "bg: $!" >> "$LOG"
    echo "pid: $$" >> "$LOG"
    cat "$F/slow.jsonl"
    sleep 60 ;;
  *mock:error*)
    cat "$F/error-exit.jsonl"
    echo "Error: the model provider is unavailable (HTTP 500)" >&2
    exit 1 ;;
  *mock:fail*) cat "$F/error-result.jsonl" ;;
  *) cat "$F/text.jsonl" ;;
esac
"#;
    fake_cli_script(dir, "cursor-agent", &fixtures, "2026.01.28-fd13201", script)
}

type Bridge = FakeCliBridge;

async fn started_with(edit: impl FnOnce(&mut proto::StartParams)) -> (Bridge, proto::StartResult) {
    let b = FakeCliBridge::new(serve_in_memory::<Cursor>());
    let mut params = start_params(&fake_cli(b.dir.path()), b.dir.path());
    edit(&mut params);
    let result = b.start(&params).await.unwrap();
    (b, result)
}

async fn started() -> Bridge {
    started_with(|_| {}).await.0
}

/// Sends `text` and collects the blocks of its turn and the chat ids reported meanwhile;
/// interrupts after the first text chunk when `interrupt` is set. (Cursor asks for no
/// permission in print mode.)
async fn say(b: &mut Bridge, text: &str, interrupt: bool) -> (Vec<BlockKind>, Vec<String>) {
    let blocks = b.send_turn(text, OnPermission::Interrupt, interrupt).await;
    (blocks, std::mem::take(&mut b.session_ids))
}

/// The argument lists of every run of the fake CLI so far.
fn runs(b: &Bridge) -> Vec<Vec<String>> {
    b.log()
        .lines()
        .filter_map(|l| l.strip_prefix("args: "))
        .map(|l| {
            l.strip_prefix('[').and_then(|l| l.strip_suffix(']')).unwrap_or(l).split("] [").map(str::to_owned).collect()
        })
        .collect()
}

/// Is the process gone (or a zombie nobody reaped yet)?
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn start_reports_the_cli_version_and_model_and_runs_nothing() {
    let (b, result) = started_with(|p| p.model = Some("sonnet-4".into())).await;
    let info = result.agent_info;
    assert_eq!((info.agent_id.as_str(), info.name.as_str()), ("cursor", "Cursor"));
    assert_eq!(info.version.as_deref(), Some("2026.01.28-fd13201"));
    assert_eq!(info.model.as_deref(), Some("sonnet-4"));
    assert!(info.capabilities.cap_interrupt && info.capabilities.provides_usage && !info.capabilities.cap_images);
    assert!(runs(&b).is_empty(), "nothing runs before the first message: {}", b.log());
    let declaration = terminull_adapter_sdk::declaration::<Cursor>();
    assert_eq!(declaration.verified_against, None, "never checked against the real binary");
    assert_eq!(declaration.cli_binary.as_deref(), Some("cursor-agent"));
}

#[tokio::test]
async fn a_tool_turn_survives_junk_lines_and_reports_the_chat_usage_and_output() {
    let mut b = started().await;
    let (blocks, chat_ids) = say(&mut b, "mock:tool please", false).await;
    assert_eq!(chat_ids, [CHAT]);
    let end = end(&blocks);
    assert_eq!(end.reason, EndReason::Completed);
    assert_eq!(end.usage.as_ref().and_then(|u| u.input_tokens), Some(1450));
    assert!(
        rebuilt(&blocks)
            .iter()
            .any(|m| m.kind == StreamKind::Thinking && m.done && m.text == "The user wants me to run a command."),
        "{blocks:?}"
    );
    assert_eq!(final_texts(&blocks), ["I'll run the command.", "The command printed hello."], "repeats dropped");
    let call = blocks.iter().find_map(|k| match k {
        BlockKind::ToolCall(c) if c.status == ToolStatus::Done => Some(c),
        _ => None,
    });
    let call = call.unwrap();
    assert_eq!((call.name.as_str(), call.title.as_deref()), ("shell", Some("echo hello")));
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.output == "hello\n" && !r.is_error)));
    let usage = b.peer.request::<proto::GetUsage>(&proto::Empty {}, T).await.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.cache_read_tokens), (Some(1450), Some(52), Some(1024)));

    let runs = runs(&b);
    assert_eq!(
        runs,
        [["-p", "--output-format", "stream-json", "--stream-partial-output", "--trust", "--", "mock:tool please"]]
    );
    assert!(!b.log().contains("stdin:"), "stdin is closed: {}", b.log());
}

#[tokio::test]
async fn later_turns_resume_the_chat_and_usage_adds_up() {
    let mut b = started().await;
    let (blocks, chat_ids) = say(&mut b, "mock:plain hello there", false).await;
    assert_eq!(final_texts(&blocks), ["Hello there!"]);
    assert_eq!(chat_ids, [CHAT]);
    let (blocks, chat_ids) = say(&mut b, "mock:tool again", false).await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    assert!(chat_ids.is_empty(), "the same chat is not reported again");
    let runs = runs(&b);
    assert_eq!(runs.len(), 2);
    assert!(!runs[0].iter().any(|a| a.starts_with("--resume")), "{runs:?}");
    assert_eq!(runs[1][5..], [format!("--resume={CHAT}"), "--".into(), "mock:tool again".into()]);
    let usage = b.peer.request::<proto::GetUsage>(&proto::Empty {}, T).await.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(900 + 1450), Some(4 + 52)));
}

#[tokio::test]
async fn a_resumed_session_resumes_from_the_first_turn_with_the_chosen_mode_and_model() {
    let (mut b, _) = started_with(|p| {
        p.resume_session_id = Some(CHAT.into());
        p.permission_mode = Some("force".into());
        p.model = Some("gpt-5".into());
    })
    .await;
    // The chat id is announced at start.
    assert_eq!(b.reported_session_id().await, CHAT);
    let (blocks, chat_ids) = say(&mut b, "mock:plain go on", false).await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    assert!(chat_ids.is_empty());
    assert_eq!(
        runs(&b)[0][5..],
        ["--force", "--model=gpt-5", &format!("--resume={CHAT}"), "--", "mock:plain go on"].map(String::from)
    );
}

#[tokio::test]
async fn an_interrupt_ends_the_process_group_and_the_turn_interrupted() {
    let mut b = started().await;
    let (blocks, _) = say(&mut b, "mock:slow go", true).await;
    assert_eq!(end(&blocks).reason, EndReason::Interrupted);
    assert!(!blocks.iter().any(|k| matches!(k, BlockKind::Error(_))), "an interrupt is not an error: {blocks:?}");
    assert_eq!(final_texts(&blocks), ["Counting slowly: 1"]);
    let log = b.log();
    let pid = |prefix: &str| log.lines().find_map(|l| l.strip_prefix(prefix)).map(str::to_owned);
    let (cli, background) = (pid("pid: ").expect(&log), pid("bg: ").expect(&log));
    for p in [&cli, &background] {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !gone(p) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone(p), "process {p} of the turn's group is still running");
    }
    // The chat goes on.
    let (blocks, _) = say(&mut b, "mock:plain still there?", false).await;
    assert_eq!(end(&blocks).reason, EndReason::Completed);
    assert!(runs(&b)[1].contains(&format!("--resume={CHAT}")));
}

#[tokio::test]
async fn a_cli_failure_is_an_error_with_the_stderr_tail_and_the_session_stays_usable() {
    let mut b = started().await;
    let (blocks, chat_ids) = say(&mut b, "mock:error now", false).await;
    assert_eq!(chat_ids, [CHAT], "the chat id from init is kept even though the turn failed");
    assert_eq!(end(&blocks).reason, EndReason::Error);
    let error = first_error(&blocks);
    assert_eq!(error.code.as_deref(), Some("agent_exited"));
    assert!(error.message.contains("with status 1"), "{}", error.message);
    assert!(error.message.contains("the model provider is unavailable (HTTP 500)"), "{}", error.message);

    let (blocks, _) = say(&mut b, "mock:fail please", false).await;
    assert_eq!(end(&blocks).reason, EndReason::Error);
    assert!(
        blocks.iter().any(|k| matches!(k, BlockKind::Error(e)
        if e.code.as_deref() == Some("agent_error") && e.message == "The model provider returned an error (HTTP 500)"))
    );

    assert_eq!(end(&say(&mut b, "mock:plain and now?", false).await.0).reason, EndReason::Completed);
    assert!(runs(&b)[2].contains(&format!("--resume={CHAT}")));
}

#[tokio::test]
async fn writes_show_as_diffs() {
    let mut b = started().await;
    let (blocks, _) = say(&mut b, "mock:write a summary", false).await;
    let diff = blocks.iter().find_map(|k| match k {
        BlockKind::Diff(d) => Some(d),
        _ => None,
    });
    let diff = diff.unwrap();
    assert_eq!(diff.path, "/tmp/ws/summary.txt");
    assert_eq!(
        diff.change,
        DiffChange::Replace { old_text: None, new_text: "# README Summary\n\nThis project contains...".into() }
    );
    assert_eq!(final_texts(&blocks), ["I'll read the README.md file", " and create a summary"]);
}

#[tokio::test]
async fn bad_start_params_and_attachments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cli = fake_cli(dir.path());
    let bridge = serve_in_memory::<Cursor>();
    let mut params = start_params(&cli, dir.path());
    bridge.assert_refuses_unknown_mode_and_missing_binary(&params, "default, force, plan, ask").await;
    params.cwd = Some(dir.path().join("nope").display().to_string());
    let e = bridge.start_refused(&params).await;
    assert_eq!(e.code, codes::INVALID_PARAMS, "{}", e.message);

    let mut b = started().await;
    let png = Attachment { name: "a.png".into(), mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() };
    b.peer.request::<proto::Send>(&UserMessage { text: "look".into(), attachments: vec![png] }, T).await.unwrap();
    let blocks = b.turn(OnPermission::Interrupt, false).await;
    assert_eq!(end(&blocks).reason, EndReason::Error);
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::Error(e) if e.message.contains("text only"))), "{blocks:?}");
    assert!(runs(&b).is_empty());
}
