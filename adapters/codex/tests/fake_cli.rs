//! The adapter's I/O end to end in memory (the SDK's `testing::TestBridge`) against fake
//! `codex` scripts: a scripted `codex app-server` that asks for approval, and an older
//! CLI without app-server, which makes the adapter fall back to `codex exec --json`.

use std::path::{Path, PathBuf};

use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::testing::{
    FakeCliBridge, OnPermission, fake_cli_script, final_texts, serve_in_memory, session_end, start_params, tool_results,
};
use terminull_codex::Codex;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A codex whose `app-server` answers the handshake and a thread, then for each turn
/// asks to run a command and logs the adapter's answer.
const APP_SERVER: &str = r#"
echo "args: $*" >> "$LOG"
[ "$1" = "app-server" ] || exit 9
read -r line; echo "in: $line" >> "$LOG"
echo '{"id":1,"result":{"userAgent":"fake"}}'
read -r line; echo "in: $line" >> "$LOG"
read -r line; echo "in: $line" >> "$LOG"
echo '{"id":2,"result":{"thread":{"id":"thread-1"}}}'
n=3
while read -r line; do
  echo "in: $line" >> "$LOG"
  echo "{\"id\":$n,\"result\":{\"turn\":{\"id\":\"turn-$n\",\"status\":\"inProgress\"}}}"
  echo "{\"method\":\"turn/started\",\"params\":{\"turn\":{\"id\":\"turn-$n\",\"status\":\"inProgress\"}}}"
  echo '{"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_1","command":"/bin/bash -lc '"'"'touch x'"'"'","status":"inProgress"}}}'
  echo '{"method":"item/commandExecution/requestApproval","id":0,"params":{"itemId":"call_1","command":"/bin/bash -lc '"'"'touch x'"'"'","cwd":"/w","availableDecisions":["accept","acceptForSession","decline","cancel"]}}'
  read -r answer; echo "answer: $answer" >> "$LOG"
  case "$answer" in
    *'"decline"'*) echo '{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_1","command":"touch x","status":"declined"}}}' ;;
    *) echo '{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_1","command":"touch x","status":"completed","aggregatedOutput":"ran\n","exitCode":0}}}' ;;
  esac
  echo '{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":7,"outputTokens":3}}}}'
  echo "{\"method\":\"turn/completed\",\"params\":{\"turn\":{\"id\":\"turn-$n\",\"status\":\"completed\"}}}"
  n=$((n+1))
done
"#;

/// An older codex: no `app-server` subcommand; `exec` replays a captured tool turn.
const EXEC_ONLY: &str = r#"
echo "args: $*" >> "$LOG"
case "$1" in
  app-server) echo "error: unrecognized subcommand 'app-server'" >&2; exit 2 ;;
  exec) cat "$F/tool.jsonl" ;;
  *) exit 9 ;;
esac
"#;

async fn started(body: &str, mode: Option<&str>) -> FakeCliBridge {
    let b = FakeCliBridge::new(serve_in_memory::<Codex>());
    let cli = fake_cli_script(b.dir.path(), "codex", &fixtures(), "codex-cli 0.171.0", body);
    let mut params = start_params(&cli, b.dir.path());
    params.permission_mode = mode.map(str::to_owned);
    b.start(&params).await.expect("start");
    b
}

#[tokio::test]
async fn approval_answers_reach_app_server_as_decline_accept_and_accept_for_session() {
    let mut b = started(APP_SERVER, Some("ask")).await;
    let denied = b.send_turn("run it", OnPermission::Answer("deny"), false).await;
    let results = tool_results(&denied);
    assert!(results[0].is_error && results[0].output.contains("declined"), "{results:?}");
    assert_eq!(session_end(&denied).reason, EndReason::Completed);
    assert_eq!(session_end(&denied).usage.as_ref().and_then(|u| u.input_tokens), Some(7));
    let allowed = b.send_turn("run it", OnPermission::Answer("allow"), false).await;
    assert_eq!(tool_results(&allowed)[0].output, "ran\n");
    b.send_turn("run it", OnPermission::Answer("allow_session"), false).await;
    let log = b.log();
    let answers: Vec<&str> = log.lines().filter(|l| l.starts_with("answer: ")).collect();
    assert_eq!(answers.len(), 3, "{log}");
    for (answer, decision) in answers.iter().zip(["decline", "accept", "acceptForSession"]) {
        assert!(answer.contains(&format!(r#""result":{{"decision":"{decision}"}}"#)), "{answer}");
        assert!(answer.contains(r#""id":0"#), "{answer}");
    }
    let thread_start = log.lines().find(|l| l.contains("thread/start")).expect("thread/start");
    assert!(
        thread_start.contains(r#""approvalPolicy":"untrusted""#)
            && thread_start.contains(r#""sandbox":"workspace-write""#),
        "{thread_start}"
    );
    assert_eq!(log.lines().filter(|l| l.starts_with("args: ")).count(), 1, "one app-server for every turn: {log}");
}

#[tokio::test]
async fn a_cli_without_app_server_falls_back_to_codex_exec_per_turn() {
    let mut b = started(EXEC_ONLY, None).await;
    let blocks = b.send_turn("mock:tool please", OnPermission::Interrupt, false).await;
    assert_eq!(session_end(&blocks).reason, EndReason::Completed);
    assert!(tool_results(&blocks)[0].output.contains("hello"), "{blocks:?}");
    assert!(final_texts(&blocks).last().is_some_and(|t| t.contains("The command printed")));
    let log = b.log();
    let runs: Vec<&str> = log.lines().filter(|l| l.starts_with("args: ")).collect();
    assert!(runs[0].starts_with("args: app-server"), "{log}");
    assert!(runs[1].starts_with("args: exec ") && runs[1].contains("approval_policy=\"never\""), "{log}");
}
