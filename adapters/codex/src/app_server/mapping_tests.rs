//! The app-server mapping, from notifications as codex 0.171.0 sent them (shortened).

use serde_json::{Value, json};
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::DiffChange;

use super::{Action, AppMapper};
use crate::app_server::wire::Notice;

fn run(lines: &[(&str, Value)]) -> Vec<Action> {
    let mut mapper = AppMapper::new("p");
    lines.iter().flat_map(|(method, params)| mapper.on_notice(Notice::parse(method, params))).collect()
}

/// One line per action: `type detail`.
fn render(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Emit(BlockKind::Text(t)) => format!("text {} done={} {:?}", t.id, t.done, t.text),
            Action::Emit(BlockKind::Thinking(t)) => format!("thinking {} done={} {:?}", t.id, t.done, t.text),
            Action::Emit(BlockKind::ToolCall(c)) => format!("tool_call {} {} {:?}", c.id, c.name, c.status),
            Action::Emit(BlockKind::ToolResult(r)) => {
                format!("tool_result {} error={} {:?}", r.tool_call_id, r.is_error, r.output)
            }
            Action::Emit(BlockKind::Error(e)) => format!("error {} {:?}", e.code.as_deref().unwrap_or("-"), e.message),
            Action::Emit(BlockKind::Diff(d)) => format!("diff {} {:?}", d.path, d.change),
            Action::Emit(BlockKind::Progress(p)) => format!("progress {:?}", p.message),
            Action::Emit(other) => format!("{other:?}"),
            Action::End(end) => format!(
                "end {:?} in={:?} out={:?} {:?}",
                end.reason,
                end.usage.as_ref().and_then(|u| u.input_tokens),
                end.usage.as_ref().and_then(|u| u.output_tokens),
                end.message
            ),
            other => format!("{other:?}"),
        })
        .collect()
}

fn item(phase: &str, item: Value) -> (&str, Value) {
    (if phase == "start" { "item/started" } else { "item/completed" }, json!({ "item": item, "threadId": "t" }))
}

fn usage(input: i64, output: i64) -> (&'static str, Value) {
    ("thread/tokenUsage/updated", json!({"tokenUsage": {"last": {"inputTokens": input, "outputTokens": output}}}))
}

fn completed(status: &str) -> (&'static str, Value) {
    ("turn/completed", json!({"turn": {"id": "tu", "status": status, "error": null}}))
}

fn command(status: &str, output: Option<&str>, exit: Option<i64>) -> Value {
    json!({"type": "commandExecution", "id": "call_1", "command": "/bin/bash -lc 'echo hello'", "status": status,
        "aggregatedOutput": output, "exitCode": exit})
}

#[test]
fn a_tool_turn_streams_thinking_text_the_command_and_ends_with_the_summed_usage() {
    let lines = [
        ("turn/started", json!({"turn": {"id": "tu", "status": "inProgress"}})),
        item("start", json!({"type": "userMessage", "id": "u", "content": []})),
        item("start", json!({"type": "reasoning", "id": "rs", "summary": [], "content": []})),
        ("item/reasoning/summaryPartAdded", json!({"itemId": "rs", "summaryIndex": 0})),
        ("item/reasoning/summaryTextDelta", json!({"itemId": "rs", "delta": "Run "})),
        ("item/reasoning/summaryTextDelta", json!({"itemId": "rs", "delta": "it."})),
        ("item/reasoning/summaryPartAdded", json!({"itemId": "rs", "summaryIndex": 1})),
        ("item/reasoning/summaryTextDelta", json!({"itemId": "rs", "delta": "Now."})),
        item("done", json!({"type": "reasoning", "id": "rs", "summary": ["Run it.", "Now."], "content": []})),
        item("start", json!({"type": "agentMessage", "id": "m", "text": ""})),
        ("item/agentMessage/delta", json!({"itemId": "m", "delta": "I'll "})),
        ("item/agentMessage/delta", json!({"itemId": "m", "delta": "run it."})),
        item("done", json!({"type": "agentMessage", "id": "m", "text": "I'll run it."})),
        item("start", command("inProgress", None, None)),
        ("item/commandExecution/outputDelta", json!({"itemId": "call_1", "delta": "hello\n"})),
        item("done", command("completed", Some("hello\n"), Some(0))),
        usage(100, 10),
        ("account/rateLimits/updated", json!({})),
        usage(120, 20),
        ("thread/status/changed", json!({"status": {"type": "idle"}})),
        completed("completed"),
    ];
    assert_eq!(
        render(&run(&lines)),
        [
            r#"thinking p-rs done=false "Run ""#,
            r#"thinking p-rs done=false "it.""#,
            r#"thinking p-rs done=false "\n\n""#,
            r#"thinking p-rs done=false "Now.""#,
            r#"thinking p-rs done=true """#,
            r#"text p-m done=false "I'll ""#,
            r#"text p-m done=false "run it.""#,
            r#"text p-m done=true """#,
            "tool_call p-call_1 shell Running",
            "tool_call p-call_1 shell Done",
            r#"tool_result p-call_1 error=false "hello\n""#,
            "end Completed in=Some(220) out=Some(30) None",
        ]
    );
}

#[test]
fn an_empty_agent_message_opens_no_text_block() {
    let lines = [
        item("start", json!({"type": "agentMessage", "id": "m", "text": ""})),
        item("done", json!({"type": "agentMessage", "id": "m", "text": ""})),
        completed("completed"),
    ];
    assert_eq!(render(&run(&lines)), ["end Completed in=None out=None None"]);
}

#[test]
fn a_declined_command_is_an_error_that_says_it_did_not_run() {
    let lines = [
        item("start", command("inProgress", None, None)),
        item("done", command("declined", None, None)),
        completed("completed"),
    ];
    assert_eq!(
        render(&run(&lines))[1..3],
        [
            "tool_call p-call_1 shell Error",
            r#"tool_result p-call_1 error=true "the command was declined; it did not run""#
        ]
    );
    let failed = [item("done", command("completed", Some(""), Some(2))), completed("completed")];
    assert_eq!(render(&run(&failed))[2], r#"tool_result p-call_1 error=true "exit code 2""#);
    let streamed = [
        item("start", command("inProgress", None, None)),
        ("item/commandExecution/outputDelta", json!({"itemId": "call_1", "delta": "partial"})),
        item("done", command("failed", None, Some(1))),
    ];
    assert_eq!(render(&run(&streamed))[2], r#"tool_result p-call_1 error=true "partial""#);
}

#[test]
fn a_failed_turn_is_one_model_error_and_an_error_end() {
    let lines = [
        ("error", json!({"error": {"message": "high demand"}, "willRetry": false})),
        ("turn/completed", json!({"turn": {"id": "tu", "status": "failed", "error": {"message": "high demand"}}})),
    ];
    assert_eq!(
        render(&run(&lines)),
        [r#"error model_error "high demand""#, r#"end Error in=None out=None Some("high demand")"#]
    );
    let different = [
        ("error", json!({"error": {"message": "first"}, "willRetry": false})),
        ("turn/completed", json!({"turn": {"id": "tu", "status": "failed", "error": {"message": "second"}}})),
    ];
    assert_eq!(render(&run(&different))[..2], [r#"error agent_error "first""#, r#"error model_error "second""#]);
    let retry = [("error", json!({"error": {"message": "busy"}, "willRetry": true}))];
    assert_eq!(render(&run(&retry)), [r#"progress "Codex is retrying (attempt 1): busy""#]);
}

#[test]
fn an_interrupted_turn_closes_what_is_open() {
    let lines = [
        item("start", json!({"type": "agentMessage", "id": "m", "text": ""})),
        ("item/agentMessage/delta", json!({"itemId": "m", "delta": "Slow "})),
        item("start", command("inProgress", None, None)),
        completed("interrupted"),
    ];
    assert_eq!(
        render(&run(&lines)),
        [
            r#"text p-m done=false "Slow ""#,
            "tool_call p-call_1 shell Running",
            r#"text p-m done=true """#,
            "tool_call p-call_1 shell Error",
            r#"tool_result p-call_1 error=true "interrupted""#,
            "end Interrupted in=None out=None None",
        ]
    );
    let mut mapper = AppMapper::new("p");
    mapper.on_notice(Notice::parse("item/agentMessage/delta", &json!({"itemId": "m", "delta": "x"})));
    assert_eq!(render(&mapper.on_interrupted()), [r#"text p-m done=true """#]);
    assert!(mapper.on_notice(Notice::parse("turn/completed", &completed("completed").1)).is_empty());
}

#[test]
fn patches_become_diffs_per_file() {
    let change = |path: &str, kind: Value, diff: &str| json!({"path": path, "kind": kind, "diff": diff});
    let patch = json!({"type": "fileChange", "id": "call_2", "status": "completed", "changes": [
        change("/w/notes.txt", json!({"type": "add"}), "hello patch\n"),
        change("/w/a.rs", json!({"type": "update", "move_path": null}), "@@ -1 +1 @@\n-a\n+b\n"),
        change("/w/old.txt", json!({"type": "delete"}), "x\ny\n"),
    ]});
    let mut start = patch.clone();
    start["status"] = json!("inProgress");
    let actions = run(&[item("start", start), item("done", patch)]);
    let diffs: Vec<(String, DiffChange)> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Emit(BlockKind::Diff(d)) => Some((d.path.clone(), d.change.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        diffs,
        [
            ("/w/notes.txt".into(), DiffChange::Replace { old_text: None, new_text: "hello patch\n".into() }),
            (
                "/w/a.rs".into(),
                DiffChange::Unified { patch: "--- a/w/a.rs\n+++ b/w/a.rs\n@@ -1 +1 @@\n-a\n+b\n".into() }
            ),
            (
                "/w/old.txt".into(),
                DiffChange::Unified { patch: "--- a/w/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n".into() }
            ),
        ]
    );
    let result = render(&actions).pop().unwrap();
    assert_eq!(
        result,
        r#"tool_result p-call_2 error=false "patch applied\nadd /w/notes.txt\nupdate /w/a.rs\ndelete /w/old.txt""#
    );
    let declined = json!({"type": "fileChange", "id": "call_3", "status": "declined", "changes": [
        change("/w/x", json!({"type": "add"}), "x")]});
    let rendered = render(&run(&[item("done", declined)]));
    assert!(rendered.iter().all(|l| !l.starts_with("diff")), "{rendered:?}");
    assert!(rendered.last().unwrap().contains("error=true \"patch declined; nothing was written"), "{rendered:?}");
}

#[test]
fn tool_calls_keep_their_status_after_a_late_repeat() {
    let lines = [
        item("done", command("completed", Some("hi"), Some(0))),
        item("done", command("completed", Some("hi"), Some(0))),
    ];
    let rendered = render(&run(&lines));
    assert_eq!(rendered.iter().filter(|l| l.starts_with("tool_result")).count(), 1, "{rendered:?}");
    let statuses: Vec<&str> = rendered.iter().filter(|l| l.starts_with("tool_call")).map(String::as_str).collect();
    assert_eq!(statuses, ["tool_call p-call_1 shell Running", "tool_call p-call_1 shell Done"]);
}
