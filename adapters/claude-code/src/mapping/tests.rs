//! Tests of the claude-code mapping: events in, actions and blocks out.

//! Table-driven: each case feeds a captured turn (tests/fixtures, recorded from
//! claude 2.1.197 against the scripted model server; `subagent.synthetic.jsonl` is
//! hand-written in the same shape, as the model server has no sub-agent scenario)
//! through a [`Mapper`] and compares a compact summary of the actions.

use serde_json::json;
use terminull_protocol::blocks::ToolStatus;
use terminull_protocol::turn::TurnTracker;

use terminull_adapter_sdk::testing::{blocks_of, final_texts, first_error, rebuilt, tool_calls, tool_results};

use super::*;

/// A captured turn of tests/fixtures.
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../tests/fixtures/", $name))
    };
}

fn events(fixture: &str) -> Vec<Event> {
    fixture.lines().filter(|l| !l.trim().is_empty()).map(|l| Event::parse(serde_json::from_str(l).unwrap())).collect()
}

/// A mapper for the conversation the fixture's `system/init` names.
fn mapper_for(fixture: &str) -> Mapper {
    let id = events(fixture)
        .into_iter()
        .find_map(|e| match e {
            Event::System(SystemEvent::Init { session_id, .. }) => session_id,
            _ => None,
        })
        .unwrap_or_default();
    Mapper::new(id)
}

/// Feeds a turn; `interrupt_at` marks the event index before which the user
/// interrupted (as the adapter does when it sends `interrupt`).
fn run(mapper: &mut Mapper, fixture: &str, interrupt_at: Option<usize>) -> Vec<Action> {
    mapper.begin_turn();
    let mut out = Vec::new();
    for (i, event) in events(fixture).into_iter().enumerate() {
        if interrupt_at == Some(i) {
            mapper.interrupt_requested();
        }
        out.extend(mapper.handle(event));
    }
    out
}

/// One word per action; consecutive `done: false` chunks of one id collapse to one
/// `…` entry.
fn summary(actions: &[Action]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for action in actions {
        let s = match action {
            Action::Emit(BlockKind::Text(t)) | Action::Emit(BlockKind::Thinking(t)) => {
                let kind = if matches!(action, Action::Emit(BlockKind::Text(_))) { "text" } else { "thinking" };
                format!("{kind}{}", if t.done { "✓" } else { "…" })
            }
            Action::Emit(BlockKind::ToolCall(c)) => format!("tool_call:{:?}", c.status).to_lowercase(),
            Action::Emit(BlockKind::ToolResult(r)) => {
                if r.is_error {
                    "tool_result:error".into()
                } else {
                    "tool_result".into()
                }
            }
            Action::Emit(BlockKind::Progress(p)) => format!("progress{}", if p.done { "✓" } else { "…" }),
            Action::Emit(other) => other.block_type().to_owned(),
            Action::Agent(CliStep::AskPermission(_)) => "ask".into(),
            Action::Agent(CliStep::Reply(_)) => "reply".into(),
            Action::SessionId(_) => "session_id".into(),
            Action::End(e) => format!("end:{:?}", e.reason).to_lowercase(),
        };
        if s.ends_with('…') && out.last() == Some(&s) {
            continue;
        }
        out.push(s);
    }
    out
}

/// The turn contract holds, and `End` is the last action and the only one.
fn assert_contract(actions: &[Action]) {
    let mut tracker = TurnTracker::new();
    for a in actions {
        let block = match a {
            Action::Emit(b) => b.clone(),
            Action::End(e) => BlockKind::SessionEnd(e.clone()),
            _ => continue,
        };
        assert_eq!(tracker.observe(&block), None, "{block:?}");
    }
    assert!(tracker.end_violations().is_empty(), "{:?}", tracker.end_violations());
    assert!(matches!(actions.last(), Some(Action::End(_))), "{:?}", actions.last());
}

fn end(actions: &[Action]) -> &SessionEnd {
    match actions.last() {
        Some(Action::End(e)) => e,
        other => panic!("no end: {other:?}"),
    }
}

fn s(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

#[test]
fn captured_turns_map_to_the_expected_blocks() {
    // The write and tool fixtures: the model's first step up to the permission
    // request, the call's outcome, the model's answer.
    let asked = ["thinking…", "thinking✓", "text…", "text✓", "tool_call:running", "ask"];
    let answered = ["thinking…", "thinking✓", "text…", "text✓", "end:completed"];
    let round_trip = |tool_result: &str| {
        let outcome = if tool_result == "ok" {
            ["tool_call:done", "tool_result"]
        } else {
            ["tool_call:error", "tool_result:error"]
        };
        s(&[&asked[..], &outcome, &answered].concat())
    };
    let without_ask = |mut v: Vec<String>| {
        v.retain(|w| w != "ask");
        v
    };
    // (name, fixture, index of the event before which the user interrupted, summary)
    let cases = [
        ("tool round trip (auto-allowed echo)", fixture!("tool.jsonl"), None, without_ask(round_trip("ok"))),
        ("plain answer", fixture!("plain.jsonl"), None, s(&["text…", "text✓", "end:completed"])),
        ("write, permission allowed", fixture!("write-allow.jsonl"), None, round_trip("ok")),
        ("write, always allowed", fixture!("write-always.jsonl"), None, round_trip("ok")),
        ("write, permission denied", fixture!("write-deny.jsonl"), None, round_trip("denied")),
        (
            "interrupted while the permission waits",
            fixture!("write-interrupt.jsonl"),
            Some(52),
            s(&[&asked[..], &["tool_call:error", "tool_result:error", "end:interrupted"]].concat()),
        ),
        ("interrupted mid-text", fixture!("slow-interrupt.jsonl"), Some(5), s(&["text…", "text✓", "end:interrupted"])),
        ("API error (no retries)", fixture!("api-error.jsonl"), None, s(&["error", "end:error"])),
        (
            "API error after retries",
            fixture!("api-retry.jsonl"),
            None,
            s(&["progress…", "progress✓", "error", "end:error"]),
        ),
        (
            "sub-agent",
            fixture!("subagent.synthetic.jsonl"),
            None,
            s(&[
                "text…",
                "text✓",
                "tool_call:running",
                "tool_call:running",
                "tool_call:done",
                "tool_result",
                "tool_call:done",
                "tool_result",
                "thinking✓",
                "text✓",
                "end:completed",
            ]),
        ),
    ];
    for (name, fixture, interrupt_at, want) in cases {
        let mut mapper = mapper_for(fixture);
        let actions = run(&mut mapper, fixture, interrupt_at);
        assert_eq!(summary(&actions), want, "{name}");
        assert_contract(&actions);
    }
}

#[test]
fn tool_round_trip_details() {
    let mut mapper = Mapper::new("d86b7f53-46d7-40ab-9512-6a699b1181db");
    let actions = run(&mut mapper, fixture!("tool.jsonl"), None);
    let blocks = blocks_of(&actions);
    let call = tool_calls(&blocks)[0];
    assert_eq!(call.id.as_str(), "toolu_mock_000001");
    assert_eq!(call.name, "Bash");
    assert_eq!(call.input, json!({"command": "echo hello", "description": "Run the requested command"}));
    assert_eq!(call.title.as_deref(), Some("Run the requested command"));
    assert_eq!(call.parent_id, None);
    let result = tool_results(&blocks)[0];
    assert_eq!((result.output.as_str(), result.is_error), ("hello", false));
    let messages = rebuilt(&blocks);
    let done: Vec<_> = messages
        .iter()
        .filter(|m| m.done)
        .map(|m| (if m.kind == StreamKind::Text { "text" } else { "thinking" }, m.id.as_str(), m.text.as_str()))
        .collect();
    assert_eq!(
        done,
        [
            ("thinking", "msg_mock_000001-0", "The user wants me to run a command; I will use the shell tool."),
            ("text", "msg_mock_000001-1", "I'll run the command."),
            ("thinking", "msg_mock_000002-0", "The tool ran; summarise its output."),
            ("text", "msg_mock_000002-1", "Done. The command printed: hello (history=4 msgs)"),
        ]
    );
    let end = end(&actions);
    let usage = end.usage.as_ref().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(43806), Some(60)));
    assert_eq!((usage.cache_read_tokens, usage.cache_write_tokens, usage.cost_usd), (Some(0), Some(0), Some(0.22053)));
}

#[test]
fn cost_is_the_growth_of_the_process_total_and_usage_adds_up() {
    let mut mapper = Mapper::new("d86b7f53-46d7-40ab-9512-6a699b1181db");
    mapper.process_started();
    run(&mut mapper, fixture!("tool.jsonl"), None);
    let second = run(&mut mapper, fixture!("plain.jsonl"), None);
    // The plain turn reported total_cost_usd 0.33114 after 0.22053.
    assert_eq!(end(&second).usage.as_ref().unwrap().cost_usd, Some(0.11061));
    let totals = mapper.session_usage();
    assert_eq!((totals.input_tokens, totals.output_tokens, totals.cost_usd), (Some(65838), Some(78), Some(0.33114)));
    // A new process counts from zero again.
    mapper.process_started();
    let third = run(&mut mapper, fixture!("plain.jsonl"), None);
    assert_eq!(end(&third).usage.as_ref().unwrap().cost_usd, Some(0.33114));
}

#[test]
fn permission_requests_point_at_the_call_and_answer_the_cli() {
    let mut mapper = Mapper::new("9eaeb06d-e308-4861-9416-c49afdac7b37");
    let actions = run(&mut mapper, fixture!("write-always.jsonl"), None);
    let ask = actions
        .iter()
        .find_map(|a| match a {
            Action::Agent(CliStep::AskPermission(ask)) => Some(ask),
            _ => None,
        })
        .unwrap();
    assert_eq!(ask.request_id, "8bbc691e-d346-4cd9-9a7e-d0596f8ec14e");
    assert_eq!(ask.tool, "Write");
    assert_eq!(ask.tool_call_id.as_ref().map(|i| i.as_str()), Some("toolu_mock_000001"));
    let options: Vec<_> = ask.options().into_iter().map(|o| (o.id, o.label, o.kind)).collect();
    assert_eq!(
        options,
        [
            ("allow".into(), "Allow".into(), PermissionOptionKind::AllowOnce),
            ("always".into(), "Always allow (switch to acceptEdits mode)".into(), PermissionOptionKind::AllowAlways),
            ("reject".into(), "Reject".into(), PermissionOptionKind::RejectOnce),
        ]
    );
    let input = json!({"file_path": "/tmp/lab/cc/ws/made.txt", "content": "created by the terminull model server\n"});
    let id = "8bbc691e-d346-4cd9-9a7e-d0596f8ec14e";
    let answer = |decision: Value| json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": decision}});
    assert_eq!(ask.reply("allow"), answer(json!({"behavior": "allow", "updatedInput": input})));
    assert_eq!(
        ask.reply("always"),
        answer(json!({"behavior": "allow", "updatedInput": input,
                "updatedPermissions": [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}))
    );
    assert_eq!(ask.reply("reject"), answer(json!({"behavior": "deny", "message": "The user denied this."})));
    assert_eq!(ask.reply("bogus"), ask.reply("reject"));
    assert_eq!(
        ask.interrupted_reply(),
        answer(json!({"behavior": "deny", "message": "The user denied this.", "interrupt": true}))
    );
}

#[test]
fn a_permission_request_without_suggestions_offers_no_always() {
    let mut mapper = Mapper::new("s");
    mapper.begin_turn();
    let actions = mapper.handle(Event::parse(json!({
            "type": "control_request", "request_id": "r1",
            "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "rm x"}, "tool_use_id": "toolu_9"}
        })));
    // The call had not been announced: it starts with the request.
    assert_eq!(summary(&actions), ["tool_call:running", "ask"]);
    let Action::Agent(CliStep::AskPermission(ask)) = &actions[1] else { unreachable!() };
    assert_eq!(ask.options().iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["allow", "reject"]);
    assert_eq!(ask.tool_call_id.as_ref().map(|i| i.as_str()), Some("toolu_9"));
}

#[test]
fn other_control_requests_are_answered_with_an_error() {
    let mut mapper = Mapper::new("s");
    let actions = mapper.handle(Event::parse(json!({
        "type": "control_request", "request_id": "h1", "request": {"subtype": "hook_callback", "callback_id": "x"}
    })));
    assert_eq!(
        actions,
        [Action::Agent(CliStep::Reply(json!({"type": "control_response",
                "response": {"subtype": "error", "request_id": "h1", "error": "not supported"}})))]
    );
}

#[test]
fn an_interrupted_text_closes_with_the_assistant_events_full_text() {
    let mut mapper = Mapper::new("2ac217bd-8da4-4710-9b98-19b104d15910");
    let actions = run(&mut mapper, fixture!("slow-interrupt.jsonl"), Some(5));
    let last_text = rebuilt(&blocks_of(&actions)).pop().unwrap();
    assert_eq!(
        (last_text.id.as_str(), last_text.text.as_str(), last_text.done),
        ("msg_mock_000001-0", "Slow chunk 1. ", true)
    );
    assert_eq!(end(&actions).reason, EndReason::Interrupted);
    assert_eq!(end(&actions).message, None);

    // The assistant event holds more than the deltas that arrived: it wins.
    let mut mapper = Mapper::new("s");
    mapper.begin_turn();
    let feed = [
        json!({"type": "stream_event", "event": {"type": "message_start", "message": {"id": "m"}}}),
        json!({"type": "stream_event", "event": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}}),
        json!({"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}}),
        json!({"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "Hello"}]}}),
    ];
    let mut actions: Vec<Action> = feed.into_iter().flat_map(|v| mapper.handle(Event::parse(v))).collect();
    mapper.interrupt_requested();
    actions.extend(
        mapper.handle(Event::parse(json!({"type": "result", "subtype": "error_during_execution", "is_error": true}))),
    );
    let blocks = blocks_of(&actions);
    let texts: Vec<_> = blocks
        .iter()
        .filter_map(|b| match b {
            BlockKind::Text(t) => Some((t.text.as_str(), t.done)),
            _ => None,
        })
        .collect();
    assert_eq!(texts, [("Hel", false), ("lo", false), ("", true)]);
    assert_eq!(final_texts(&blocks), ["Hello"]);
}

#[test]
fn api_errors_become_an_error_block_and_retries_a_progress() {
    let mut mapper = Mapper::new("ccdc6add-8771-4ed9-9a44-2c60d9242ec5");
    let actions = run(&mut mapper, fixture!("api-retry.jsonl"), None);
    let blocks = blocks_of(&actions);
    let progress: Vec<_> = blocks
        .iter()
        .filter_map(|b| match b {
            BlockKind::Progress(p) => Some((p.id.as_str(), p.message.as_str(), p.current, p.total, p.done)),
            _ => None,
        })
        .collect();
    let id = "api-retry-c113b94a-c4f5-4ac0-aede-fcbbbb1e5535";
    assert_eq!(
        progress,
        [
            (id, "API error 529 overloaded, retrying (attempt 1 of 2)", Some(1), Some(2), false),
            (id, "API error 529 overloaded, retrying (attempt 2 of 2)", Some(2), Some(2), false),
            (id, "API error 529 overloaded; gave up after 2 retries", Some(2), None, true),
        ]
    );
    let error = first_error(&blocks);
    assert!(error.message.starts_with("API Error: 529 Overloaded"), "{}", error.message);
    assert!(error.recoverable);
    assert_eq!(error.code.as_deref(), Some("model_error"));
    let end = end(&actions);
    assert_eq!(end.reason, EndReason::Error);
    assert_eq!(end.message.as_deref(), Some(error.message.as_str()));
    assert!(!blocks.iter().any(|b| b.block_type() == "text"), "the synthetic error message is not shown as text");
}

#[test]
fn a_retry_that_recovers_closes_its_progress() {
    let mut mapper = Mapper::new("s");
    mapper.begin_turn();
    let mut actions = mapper.handle(Event::parse(json!({
            "type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10, "error_status": 500, "error": "api_error"
        })));
    actions.extend(mapper.handle(Event::parse(json!({
        "type": "stream_event", "event": {"type": "message_start", "message": {"id": "m"}}
    }))));
    let Action::Emit(BlockKind::Progress(p)) = &actions[1] else { panic!("{actions:?}") };
    assert_eq!(
        (p.id.as_str(), p.message.as_str(), p.done),
        ("api-retry-1", "API error 500 api_error; recovered after 1 retry", true)
    );
}

#[test]
fn sub_agent_calls_nest_under_the_task_call_and_its_text_is_not_shown() {
    let mut mapper = Mapper::new("s");
    let actions = run(&mut mapper, fixture!("subagent.synthetic.jsonl"), None);
    let blocks = blocks_of(&actions);
    let calls: Vec<_> = tool_calls(&blocks)
        .into_iter()
        .filter(|c| c.status == ToolStatus::Running)
        .map(|c| (c.id.as_str(), c.name.as_str(), c.parent_id.as_ref().map(|p| p.as_str()), c.title.as_deref()))
        .collect();
    assert_eq!(
        calls,
        [("toolu_task", "Task", None, Some("Find the config")), ("toolu_grep", "Grep", Some("toolu_task"), None),]
    );
    assert_eq!(final_texts(&blocks), ["I'll delegate.", "It is loaded in src/config.rs."]);
    let results: Vec<_> = tool_results(&blocks).iter().map(|r| r.output.as_str()).collect();
    assert_eq!(results, ["src/config.rs", "The config is loaded in src/config.rs"]);
    assert_eq!(actions[0], Action::SessionId("5b0c1d2e-0000-4000-8000-000000000001".into()));
    assert_eq!(mapper.session_id(), "5b0c1d2e-0000-4000-8000-000000000001");
    assert_eq!(mapper.model(), Some("claude-opus-4-8[1m]"));
}

#[test]
fn unknown_events_change_nothing() {
    let plain = fixture!("plain.jsonl");
    let mut noisy = String::new();
    for line in plain.lines() {
        noisy.push_str(line);
        noisy.push('\n');
        noisy.push_str(r#"{"type":"keep_alive"}"#);
        noisy.push('\n');
        noisy.push_str(r#"{"type":"system","subtype":"brand_new_subtype","x":1}"#);
        noisy.push('\n');
        noisy.push_str(r#"{"type":"stream_event","event":{"type":"brand_new_event"}}"#);
        noisy.push('\n');
        noisy.push_str(r#"{"type":"assistant","message":"not an object"}"#);
        noisy.push('\n');
    }
    let quiet = run(&mut Mapper::new("s"), plain, None);
    let loud = run(&mut Mapper::new("s"), &noisy, None);
    assert_eq!(loud, quiet);
}

#[test]
fn repeated_message_and_tool_ids_get_fresh_block_ids() {
    // A model server that restarts its counters (or a replay) repeats ids; a block
    // id must still not repeat within the session.
    let mut mapper = Mapper::new("d86b7f53-46d7-40ab-9512-6a699b1181db");
    let tool = fixture!("tool.jsonl");
    run(&mut mapper, tool, None);
    let again = run(&mut mapper, tool, None);
    assert_contract(&again);
    let ids: Vec<String> = blocks_of(&again)
        .into_iter()
        .filter_map(|b| match b {
            BlockKind::Text(t) | BlockKind::Thinking(t) if t.done => Some(t.id.to_string()),
            BlockKind::ToolCall(c) if c.status == ToolStatus::Done => Some(c.id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        ids,
        [
            "msg_mock_000001-0~2",
            "msg_mock_000001-1~2",
            "toolu_mock_000001~2",
            "msg_mock_000002-0~2",
            "msg_mock_000002-1~2"
        ]
    );
}

#[test]
fn every_delta_of_a_long_text_is_one_append() {
    let mut mapper = Mapper::new("s");
    mapper.begin_turn();
    let mut feed = vec![
        json!({"type": "stream_event", "event": {"type": "message_start", "message": {"id": "m"}}}),
        json!({"type": "stream_event", "event": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}}),
    ];
    let line = "Line: the quick brown fox jumps over the lazy dog, scripted long answer.\n";
    let deltas = 5000;
    for _ in 0..deltas {
        feed.push(json!({"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": line}}}));
    }
    feed.push(json!({"type": "stream_event", "event": {"type": "content_block_stop", "index": 0}}));
    let actions: Vec<Action> = feed.into_iter().flat_map(|v| mapper.handle(Event::parse(v))).collect();
    let chunks: Vec<_> = blocks_of(&actions)
        .into_iter()
        .map(|b| match b {
            BlockKind::Text(t) => t,
            other => panic!("{other:?}"),
        })
        .collect();
    let full = line.repeat(deltas);
    assert_eq!(chunks.len(), deltas + 1, "one append per delta, then the done chunk");
    let sent: usize = chunks.iter().map(|t| t.text.len()).sum();
    assert_eq!(sent, full.len(), "each byte is sent once");
    let last = chunks.last().unwrap();
    assert_eq!((last.offset, last.text.as_str(), last.done), (Some(full.len() as u64), "", true));
    assert_eq!(final_texts(&blocks_of(&actions)), [full]);
}

#[test]
fn huge_tool_inputs_are_shown_shortened_but_passed_back_whole() {
    let content = "x".repeat(2 * MAX_TOOL_INPUT_BYTES);
    let input = json!({"file_path": "/a", "content": content});
    let mut mapper = Mapper::new("s");
    mapper.begin_turn();
    let actions = mapper.handle(Event::parse(json!({
        "type": "control_request", "request_id": "r1",
        "request": {"subtype": "can_use_tool", "tool_name": "Write", "input": input, "tool_use_id": "toolu_1"}
    })));
    let Action::Emit(BlockKind::ToolCall(call)) = &actions[0] else { panic!() };
    assert_eq!(call.input["file_path"], "/a");
    assert!(serde_json::to_string(&call.input).unwrap().len() < MAX_TOOL_INPUT_BYTES);
    let Action::Agent(CliStep::AskPermission(ask)) = &actions[1] else { panic!() };
    assert_eq!(ask.reply("allow")["response"]["response"]["updatedInput"], input);
    assert_eq!(display_input(&json!({"a": 1})), json!({"a": 1}));
}

#[test]
fn tool_output_is_text_and_bounded() {
    assert_eq!(tool_output(&json!("plain")), "plain");
    assert_eq!(
        tool_output(
            &json!([{"type": "text", "text": "a"}, {"type": "image", "source": {}}, {"type": "text", "text": "b"}])
        ),
        "a\n[image]\nb"
    );
    assert_eq!(tool_output(&Value::Null), "");
    let big = "é".repeat(MAX_TOOL_OUTPUT_BYTES);
    let cut = tool_output(&json!(big));
    assert!(cut.len() < MAX_TOOL_OUTPUT_BYTES + 100);
    assert!(cut.ends_with(&format!("of {} bytes shown]", big.len())), "{}", &cut[cut.len() - 80..]);
}

#[test]
fn a_dead_cli_closes_everything_it_left_open() {
    let mut mapper = Mapper::new("s");
    let tool = fixture!("tool.jsonl");
    // Cut the turn right after the tool call started.
    let cut: String = tool.lines().take_while(|l| !l.contains("\"tool_result\"")).map(|l| format!("{l}\n")).collect();
    let mut actions = run(&mut mapper, &cut, None);
    let error =
        ErrorBlock { message: "Claude Code exited".into(), recoverable: true, code: Some("agent_exited".into()) };
    actions.extend(mapper.abort(EndReason::Error, Some(error)));
    assert_contract(&actions);
    let tail = summary(&actions);
    assert_eq!(tail[tail.len() - 4..], s(&["tool_call:error", "tool_result:error", "error", "end:error"]));
    assert_eq!(end(&actions).message.as_deref(), Some("Claude Code exited"));
}

#[test]
#[allow(clippy::print_stdout, reason = "the figure is the point: docs/adapters/claude-code.md quotes it")]
fn the_recorded_long_answer_goes_out_one_append_per_delta() {
    // The live test's recording of `mock:long` (tests/fixtures/agents/claude-code):
    // what the CLI printed, fed to the mapper as the adapter reads it.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agents/claude-code/long.jsonl");
    let recording = std::fs::read_to_string(path).expect("the long answer's recording");
    let mut mapper = Mapper::new("s");
    mapper.begin_turn();
    let mut deltas = 0;
    let mut actions = Vec::new();
    for record in recording.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
        let Some(out) = record["out"].as_str() else { continue };
        let Ok(event) = serde_json::from_str::<serde_json::Value>(out) else { continue };
        if event["event"]["delta"]["type"] == "text_delta" {
            deltas += 1;
        }
        actions.extend(mapper.handle(Event::parse(event)));
    }
    let chunks: Vec<_> = blocks_of(&actions)
        .into_iter()
        .filter_map(|b| match b {
            BlockKind::Text(t) => Some(t),
            _ => None,
        })
        .collect();
    let sent: usize = chunks.iter().map(|t| t.text.len()).sum();
    let answer = final_texts(&blocks_of(&actions)).into_iter().map(|t| t.len()).max().unwrap_or(0);
    println!(
        "mock:long: {deltas} text deltas from the CLI, {} text chunks out, {sent} bytes of text for a {answer}-byte answer",
        chunks.len()
    );
    assert!(answer >= 50_000, "a long answer: {answer} bytes");
    assert_eq!(chunks.len(), deltas + 1, "one append per delta, then the done chunk");
    assert_eq!(sent, answer, "each byte once");
}
