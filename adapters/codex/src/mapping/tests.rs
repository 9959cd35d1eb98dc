//! Tests of the codex mapping: events in, actions and blocks out.

use terminull_adapter_sdk::testing::{Ending, assert_contract_so_far, describe_with, map_turn};
use terminull_protocol::blocks::ToolStatus;

use super::*;
use crate::events::parse_event;

/// x1.out: a tool round trip (codex 0.171.0 against the scripted model server).
const TOOL: &str = include_str!("../../tests/fixtures/tool.jsonl");

/// x2.out: the same thread resumed, the agent runs `touch`.
const RESUME_TOUCH: &str = include_str!("../../tests/fixtures/resume-touch.jsonl");

/// x3.out: the model answers HTTP 500.
const MODEL_ERROR: &str = include_str!("../../tests/fixtures/model-error.jsonl");

/// x4.out: SIGINT mid-stream; codex prints nothing more and exits.
const SIGINT: &str = include_str!("../../tests/fixtures/sigint.jsonl");

const FILE_CHANGE: &str = r#"{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/w/a.txt","kind":"add"},{"path":"/w/b.rs","kind":"update"},{"path":"/w/c.md","kind":"delete"}],"status":"completed"}}
{"type":"item.started","item":{"id":"item_2","type":"file_change","changes":[{"path":"/w/d.txt","kind":"update"}],"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/w/d.txt","kind":"update"}],"status":"failed"}}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}"#;

const MCP_WEB_TODO: &str = r#"{"type":"item.started","item":{"id":"item_1","type":"todo_list","items":[{"text":"look","completed":false},{"text":"fix","completed":false}]}}
{"type":"item.started","item":{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":null,"error":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":{"content":[{"type":"text","text":"found 3"},{"type":"image","data":"AA==","mimeType":"image/png"}],"structured_content":null},"error":null,"status":"completed"}}
{"type":"item.started","item":{"id":"item_3","type":"mcp_tool_call","server":"db","tool":"query","arguments":{},"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_3","type":"mcp_tool_call","server":"db","tool":"query","arguments":{},"result":null,"error":{"message":"connection refused"},"status":"failed"}}
{"type":"item.started","item":{"id":"item_4","type":"web_search","query":"rust serde flatten"}}
{"type":"item.completed","item":{"id":"item_4","type":"web_search","query":"rust serde flatten"}}
{"type":"item.updated","item":{"id":"item_1","type":"todo_list","items":[{"text":"look","completed":true},{"text":"fix","completed":false}]}}
{"type":"item.completed","item":{"id":"item_1","type":"todo_list","items":[{"text":"look","completed":true},{"text":"fix","completed":false}]}}
{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}"#;

const ODDITIES: &str = r#"{"type":"thread.started","thread_id":"t-1"}
{"type":"thread.started","thread_id":"t-1"}
{"type":"session.configured","model":"x"}
{"type":"item.started","item":{"id":"item_1","type":"collab_agent_call","prompt":"hi"}}
{"type":"item.started","item":{"id":"item_2","type":"agent_message","text":"Hel"}}
{"type":"item.updated","item":{"id":"item_2","type":"agent_message","text":"Hello"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Hello!"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Hello again?"}}
{"type":"item.completed","item":{"id":"item_3","type":"reasoning","text":""}}
{"type":"item.started","item":{"id":"item_4","type":"command_execution","command":"ls","status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_5","type":"command_execution","command":"/bin/bash -lc 'false'","aggregated_output":"","exit_code":1,"status":"failed"}}
{"type":"item.completed","item":{"id":"item_6","type":"command_execution","command":"rm -rf /","aggregated_output":"","exit_code":null,"status":"declined"}}
{"type":"error","message":"Reconnecting... 1/5"}
{"type":"item.started","item":{"id":"item_7","type":"reasoning","text":"thinking about it"}}
{"type":"turn.completed","usage":{"input_tokens":-3,"output_tokens":4,"cache_write_input_tokens":2}}
{"type":"item.completed","item":{"id":"item_8","type":"agent_message","text":"too late"}}"#;

/// One line per action, short enough to read in a table.
fn describe(action: &Action) -> String {
    describe_with(action, |d| format!("diff? {} {} for {}", d.kind.verb(), d.path, d.tool_call_id))
}

/// Runs captured lines through a fresh mapper (prefix `p`), then `ending`.
fn run(lines: &str, known_thread: Option<&str>, ending: Ending<'_>) -> (Vec<Action>, TurnMapper) {
    let mut mapper = TurnMapper::new("p", known_thread.map(str::to_owned));
    let actions = map_turn(&mut mapper, lines, parse_event, ending, |m, detail| m.on_exit(detail));
    (actions, mapper)
}

/// (name, codex lines, thread known before the turn, how the turn ends, expected actions)
type MappingCase<'a> = (&'a str, &'a str, Option<&'a str>, Ending<'a>, Vec<&'a str>);

const WARNING: &str = "error agent_warning recoverable=true \"Model metadata for `mock-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.\"";

#[test]
fn captured_and_synthetic_turns_map_to_these_blocks() {
    let thread = "01a22a15-bb96-7990-a7d7-56c75662aeac";
    #[rustfmt::skip]
        let cases: Vec<MappingCase<'_>> = vec![
            ("tool round trip (x1)", TOOL, None, Ending::None, vec![
                "session_id 01a22a15-bb96-7990-a7d7-56c75662aeac",
                WARNING,
                "thinking p-item_1 done=true \"The user wants me to run a command; I will use the shell tool.\"",
                "text p-item_2 done=true \"I'll run the command.\"",
                "tool_call p-item_3 shell Running {\"command\":\"/bin/bash -lc 'echo hello'\"} title=\"echo hello\"",
                "tool_call p-item_3 shell Done {\"command\":\"/bin/bash -lc 'echo hello'\"} title=\"echo hello\"",
                "tool_result p-item_3 error=false \"hello\\n\"",
                "thinking p-item_4 done=true \"The tool ran; summarise its output.\"",
                "text p-item_5 done=true \"Done. The command printed: Chunk ID: 01ffdf\\nWall time: 0.0000 seconds\\nProcess exited with code 0\\nOriginal token count: 2\\nOutput:\\nhello (history=8 msgs)\"",
                "session_end Completed in=Some(20697) out=Some(73) cache_read=Some(0) cache_write=Some(0)",
            ]),
            ("resumed thread is not reported again (x2)", RESUME_TOUCH, Some(thread), Ending::None, vec![
                WARNING,
                "thinking p-item_1 done=true \"The user wants me to run a command; I will use the shell tool.\"",
                "text p-item_2 done=true \"I'll run the command.\"",
                "tool_call p-item_3 shell Running {\"command\":\"/bin/bash -lc 'touch /tmp/lab/ws/made.txt && echo created'\"} title=\"touch /tmp/lab/ws/made.txt && echo created\"",
                "tool_call p-item_3 shell Done {\"command\":\"/bin/bash -lc 'touch /tmp/lab/ws/made.txt && echo created'\"} title=\"touch /tmp/lab/ws/made.txt && echo created\"",
                "tool_result p-item_3 error=false \"created\\n\"",
                "thinking p-item_4 done=true \"The tool ran; summarise its output.\"",
                "text p-item_5 done=true \"Done. The command printed: Chunk ID: d6d983\\nWall time: 0.0000 seconds\\nProcess exited with code 0\\nOriginal token count: 2\\nOutput:\\ncreated (history=15 msgs)\"",
                "session_end Completed in=Some(42083) out=Some(155) cache_read=Some(0) cache_write=Some(0)",
            ]),
            ("a resumed thread that comes back with a new id is reported", RESUME_TOUCH, Some("older-thread"), Ending::None, vec![
                "session_id 01a22a15-bb96-7990-a7d7-56c75662aeac",
            ]),
            ("model error: one error block, then session_end error (x3)", MODEL_ERROR, Some(thread), Ending::None, vec![
                WARNING,
                "error model_error recoverable=true \"We’re currently experiencing high demand, which may cause temporary errors.\"",
                "session_end Error \"We’re currently experiencing high demand, which may cause temporary errors.\"",
            ]),
            ("output ends without a turn event (x4)", SIGINT, None, Ending::Exit("codex exited with signal 2 (SIGINT)"), vec![
                "session_id 01a22a15-c021-7c11-ad8d-01c79f953a74",
                WARNING,
                "error agent_exited recoverable=true \"codex exited with signal 2 (SIGINT)\"",
                "session_end Error \"codex exited with signal 2 (SIGINT)\"",
            ]),
            ("interrupt closes the running tool call; no session_end of our own", &TOOL[..TOOL.find("{\"type\":\"item.completed\",\"item\":{\"id\":\"item_3\"").unwrap()], None, Ending::Interrupt, vec![
                "session_id 01a22a15-bb96-7990-a7d7-56c75662aeac",
                WARNING,
                "thinking p-item_1 done=true \"The user wants me to run a command; I will use the shell tool.\"",
                "text p-item_2 done=true \"I'll run the command.\"",
                "tool_call p-item_3 shell Running {\"command\":\"/bin/bash -lc 'echo hello'\"} title=\"echo hello\"",
                "tool_call p-item_3 shell Error {\"command\":\"/bin/bash -lc 'echo hello'\"} title=\"echo hello\"",
                "tool_result p-item_3 error=true \"interrupted\"",
            ]),
            ("file changes: diffs between the call and its result", FILE_CHANGE, None, Ending::None, vec![
                "tool_call p-item_1 apply_patch Running {\"changes\":[{\"kind\":\"add\",\"path\":\"/w/a.txt\"},{\"kind\":\"update\",\"path\":\"/w/b.rs\"},{\"kind\":\"delete\",\"path\":\"/w/c.md\"}]} title=\"3 files\"",
                "diff? add /w/a.txt for p-item_1",
                "diff? update /w/b.rs for p-item_1",
                "diff? delete /w/c.md for p-item_1",
                "tool_call p-item_1 apply_patch Done {\"changes\":[{\"kind\":\"add\",\"path\":\"/w/a.txt\"},{\"kind\":\"update\",\"path\":\"/w/b.rs\"},{\"kind\":\"delete\",\"path\":\"/w/c.md\"}]} title=\"3 files\"",
                "tool_result p-item_1 error=false \"patch applied\\nadd /w/a.txt\\nupdate /w/b.rs\\ndelete /w/c.md\"",
                "tool_call p-item_2 apply_patch Running {\"changes\":[{\"kind\":\"update\",\"path\":\"/w/d.txt\"}]} title=\"update /w/d.txt\"",
                "tool_call p-item_2 apply_patch Error {\"changes\":[{\"kind\":\"update\",\"path\":\"/w/d.txt\"}]} title=\"update /w/d.txt\"",
                "tool_result p-item_2 error=true \"patch failed to apply\\nupdate /w/d.txt\"",
                "session_end Completed in=Some(10) out=Some(2)",
            ]),
            ("mcp, web search and the to-do list", MCP_WEB_TODO, None, Ending::None, vec![
                "plan Pending:look, Pending:fix",
                "tool_call p-item_2 docs.search Running {\"q\":\"serde\"} title=\"\"",
                "tool_call p-item_2 docs.search Done {\"q\":\"serde\"} title=\"\"",
                "tool_result p-item_2 error=false \"found 3\\n[image]\"",
                "tool_call p-item_3 db.query Running {} title=\"\"",
                "tool_call p-item_3 db.query Error {} title=\"\"",
                "tool_result p-item_3 error=true \"connection refused\"",
                "tool_call p-item_4 web_search Running {\"query\":\"rust serde flatten\"} title=\"rust serde flatten\"",
                "tool_call p-item_4 web_search Done {\"query\":\"rust serde flatten\"} title=\"rust serde flatten\"",
                "tool_result p-item_4 error=false \"Searched the web for \\\"rust serde flatten\\\"\"",
                "plan Completed:look, Pending:fix",
                "session_end Completed in=Some(1) out=Some(1) cache_read=Some(0) cache_write=None",
            ]),
            ("oddities: repeats, unknowns, streaming, failures, late lines", ODDITIES, None, Ending::None, vec![
                "session_id t-1",
                "text p-item_2 @0 done=false \"Hel\"",
                "text p-item_2 @3 done=false \"lo\"",
                "text p-item_2 @5 done=true \"!\"",
                "tool_call p-item_4 shell Running {\"command\":\"ls\"} title=\"ls\"",
                "tool_call p-item_5 shell Running {\"command\":\"/bin/bash -lc 'false'\"} title=\"false\"",
                "tool_call p-item_5 shell Error {\"command\":\"/bin/bash -lc 'false'\"} title=\"false\"",
                "tool_result p-item_5 error=true \"exit code 1\"",
                "tool_call p-item_6 shell Running {\"command\":\"rm -rf /\"} title=\"rm -rf /\"",
                "tool_call p-item_6 shell Error {\"command\":\"rm -rf /\"} title=\"rm -rf /\"",
                "tool_result p-item_6 error=true \"the command was declined\"",
                "error agent_error recoverable=true \"Reconnecting... 1/5\"",
                "thinking p-item_7 @0 done=false \"thinking about it\"",
                "thinking p-item_7 @17 done=true \"\"",
                "tool_call p-item_4 shell Error {\"command\":\"ls\"} title=\"ls\"",
                "tool_result p-item_4 error=true \"the turn ended before the tool call finished\"",
                "session_end Completed in=Some(0) out=Some(4) cache_read=None cache_write=Some(2)",
            ]),
        ];
    for (name, lines, known, ending, want) in cases {
        let (actions, mapper) = run(lines, known, ending);
        let got: Vec<String> = actions.iter().map(describe).collect();
        if name.starts_with("a resumed thread") {
            assert_eq!(got[..1], want[..], "{name}");
        } else {
            assert_eq!(got, want, "{name}");
        }
        assert!(mapper.ended() || matches!(ending, Ending::None), "{name}");
        // Whatever codex printed, the blocks keep the turn contract.
        let blocks: Vec<BlockKind> = actions
            .iter()
            .filter_map(|action| match action {
                Action::Emit(kind) => Some(kind.clone()),
                Action::End(end) => Some(BlockKind::SessionEnd(end.clone())),
                Action::Agent(d) => Some(diff_block(d, FileContent::Missing)),
                Action::SessionId(_) => None,
            })
            .collect();
        assert_contract_so_far(name, &blocks);
    }
}

#[test]
fn thread_id_is_kept_for_the_next_turn() {
    let (_, mapper) = run(TOOL, None, Ending::None);
    assert_eq!(mapper.thread_id(), Some("01a22a15-bb96-7990-a7d7-56c75662aeac"));
    assert!(mapper.thread_started());
    let (_, mapper) = run("{\"type\":\"turn.started\"}", Some("kept"), Ending::Exit("x"));
    assert_eq!(mapper.thread_id(), Some("kept"));
    assert!(!mapper.thread_started());
}

#[test]
fn an_error_different_from_the_failure_is_kept_apart() {
    let lines = "{\"type\":\"error\",\"message\":\"stream reset\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"quota exceeded\"}}";
    let got: Vec<String> = run(lines, None, Ending::None).0.iter().map(describe).collect();
    assert_eq!(
        got,
        [
            "error agent_error recoverable=true \"stream reset\"",
            "error model_error recoverable=true \"quota exceeded\"",
            "session_end Error \"quota exceeded\"",
        ]
    );
    let got: Vec<String> =
        run("{\"type\":\"error\",\"message\":\"lost\"}", None, Ending::Exit("gone")).0.iter().map(describe).collect();
    assert_eq!(got[0], "error agent_error recoverable=true \"lost\"");
    assert_eq!(got[1], "error agent_exited recoverable=true \"gone\"");
}

#[test]
fn after_the_end_nothing_more_comes_out() {
    let (_, mut mapper) = run(TOOL, None, Ending::None);
    assert!(mapper.on_exit("late").is_empty());
    assert!(mapper.on_interrupt().is_empty());
    assert!(mapper.on_event(Event::TurnStarted).is_empty());
}

#[test]
fn diff_blocks_by_kind_and_content() {
    let req = |kind| DiffRequest { path: "/w/src/a.rs".into(), kind, tool_call_id: "c1".into() };
    let change = |block: BlockKind| match block {
        BlockKind::Diff(d) => {
            assert_eq!((d.path.as_str(), d.tool_call_id), ("/w/src/a.rs", Some("c1".into())));
            d.change
        }
        other => panic!("{other:?}"),
    };
    let replace = |new: &str| DiffChange::Replace { old_text: None, new_text: new.into() };
    let unified = |patch: &str| DiffChange::Unified { patch: patch.into() };
    let cases = [
        (ChangeKind::Add, FileContent::Text("new\n".into()), replace("new\n")),
        (ChangeKind::Update, FileContent::Text("now\n".into()), replace("now\n")),
        (ChangeKind::Delete, FileContent::Missing, unified("--- a/w/src/a.rs\n+++ /dev/null\n")),
        (ChangeKind::Add, FileContent::TooLarge(5 << 20), unified("--- /dev/null\n+++ b/w/src/a.rs\n")),
        (ChangeKind::Update, FileContent::Binary, unified("--- a/w/src/a.rs\n+++ b/w/src/a.rs\n")),
        (ChangeKind::Update, FileContent::Missing, unified("--- a/w/src/a.rs\n+++ b/w/src/a.rs\n")),
    ];
    for (kind, content, want) in cases {
        assert_eq!(change(diff_block(&req(kind), content)), want, "{kind:?}");
    }
    assert_eq!(content_note(&FileContent::Text(String::new())), None);
    assert!(content_note(&FileContent::TooLarge(5)).unwrap().contains("limit"));
}

/// The CLI's token counts become a turn's `Usage` (summing turns is `Usage::add`'s, tested
/// in protocol).
#[test]
fn usage_is_converted() {
    let turn = usage_of(&TokenUsage {
        input_tokens: Some(100),
        cached_input_tokens: Some(40),
        cache_write_input_tokens: None,
        output_tokens: Some(7),
        reasoning_output_tokens: Some(3),
    });
    assert_eq!(
        turn,
        Usage { input_tokens: Some(100), output_tokens: Some(7), cache_read_tokens: Some(40), ..Usage::default() }
    );
}

#[test]
fn everything_is_bounded() {
    let huge = "x".repeat(MAX_TEXT_BYTES + 10);
    let line = json!({"type":"item.completed","item":{"id":"i","type":"agent_message","text":huge}});
    let mut mapper = TurnMapper::new("p", None);
    let actions = mapper.on_event(parse_event(line).unwrap());
    let [Action::Emit(BlockKind::Text(t))] = &actions[..] else { panic!("{actions:?}") };
    assert!(
        t.text.len() < MAX_TEXT_BYTES + 100
            && t.text.ends_with(&format!("[truncated: {} bytes in all]", MAX_TEXT_BYTES + 10))
    );

    let out = "é".repeat(MAX_TOOL_OUTPUT_BYTES);
    let line = json!({"type":"item.completed","item":{"id":"c","type":"command_execution","command":"y".repeat(MAX_INPUT_BYTES * 2),"aggregated_output":out,"exit_code":0,"status":"completed"}});
    let actions = mapper.on_event(parse_event(line).unwrap());
    let Action::Emit(BlockKind::ToolCall(call)) = &actions[0] else { panic!() };
    assert!(call.input.to_string().len() < MAX_INPUT_BYTES + 200, "input bounded");
    assert!(call.title.as_ref().unwrap().chars().count() <= MAX_TITLE_CHARS + 1, "title bounded");
    let Action::Emit(BlockKind::ToolResult(result)) = &actions[2] else { panic!() };
    assert!(result.output.len() < MAX_TOOL_OUTPUT_BYTES + 100);
    assert_eq!(bounded("héllo", 2), "h\n… [truncated: 6 bytes in all]", "cut on a char boundary");
}

#[test]
fn command_titles() {
    let cases = [
        ("/bin/bash -lc 'echo hello'", "echo hello"),
        ("bash -lc 'echo '\\''quoted'\\'''", "echo 'quoted'"),
        ("/bin/bash -lc ls", "/bin/bash -lc ls"),
        ("git status", "git status"),
        ("  spaced  ", "spaced"),
    ];
    for (command, want) in cases {
        assert_eq!(command_title(command), want, "{command}");
    }
    assert_eq!(command_title(&"z".repeat(500)).chars().count(), MAX_TITLE_CHARS + 1);
}

#[test]
fn closing_ends_running_calls_with_status_error() {
    let mut mapper = TurnMapper::new("p", None);
    let line = json!({"type":"item.started","item":{"id":"c","type":"mcp_tool_call","server":"s","tool":"t","arguments":{},"status":"in_progress"}});
    mapper.on_event(parse_event(line).unwrap());
    let closing = mapper.on_exit("codex exited with status 1");
    let Action::Emit(BlockKind::ToolCall(call)) = &closing[0] else { panic!("{closing:?}") };
    assert_eq!(call.status, ToolStatus::Error);
}
