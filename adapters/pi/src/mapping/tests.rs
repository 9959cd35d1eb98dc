//! Tests of the pi mapping: events in, actions and blocks out.

use terminull_adapter_sdk::testing::{assert_contract_so_far, blocks_of, describe_with, final_texts, rebuilt};

use serde_json::json;
use terminull_protocol::blocks::StreamedText;

use super::*;
use crate::events::parse_line;

/// One recorded turn: the adapter's commands (`in`) and pi's lines (`out`).
struct Recording {
    /// `t<n>` of the recorded turn (from its prompt's id).
    command_prefix: String,
    records: Vec<Value>,
}

fn recording(text: &str) -> Recording {
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let prompt_id = records
        .iter()
        .filter_map(|r| r.get("in").and_then(Value::as_str))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|c| c["type"] == "prompt")
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .unwrap();
    Recording { command_prefix: prompt_id.trim_end_matches("-prompt").to_owned(), records }
}

/// Replays a recorded turn through a mapper: every `out` line is an event, an
/// `abort` the adapter wrote is an interrupt request. Returns the actions and the
/// commands the recording shows the adapter wrote on the mapper's behalf.
fn replay(rec: &Recording, session_reported: bool) -> (Vec<Action>, Vec<Value>, TurnMapper) {
    let mut mapper = TurnMapper::new("p", rec.command_prefix.clone(), Some("sess-1".into()), session_reported);
    let mut actions = Vec::new();
    let mut written = Vec::new();
    for record in &rec.records {
        if let Some(line) = record.get("out").and_then(Value::as_str) {
            actions.extend(mapper.on_event(parse_line(line).unwrap()));
        } else if let Some(line) = record.get("in").and_then(Value::as_str) {
            let command: Value = serde_json::from_str(line).unwrap();
            match command["type"].as_str() {
                Some("abort") => mapper.interrupt_requested(),
                Some("prompt") => {}
                _ => written.push(command),
            }
        }
    }
    (actions, written, mapper)
}

fn describe(action: &Action) -> String {
    describe_with(action, |command| format!("write {command}"))
}

/// The descriptions, with each run of `done: false` chunks of one id folded into
/// `<kind> <id> chunks=<n>` (their texts are checked by [`chunks_grow`]).
fn folded(actions: &[Action]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(String, usize)> = None;
    for action in actions {
        let open = match action {
            Action::Emit(BlockKind::Text(t)) if !t.done => Some(format!("text {}", t.id)),
            Action::Emit(BlockKind::Thinking(t)) if !t.done => Some(format!("thinking {}", t.id)),
            _ => None,
        };
        match (open, &mut run) {
            (Some(key), Some((k, n))) if *k == key => *n += 1,
            (Some(key), _) => {
                if let Some((k, n)) = run.take() {
                    out.push(format!("{k} chunks={n}"));
                }
                run = Some((key, 1));
            }
            (None, _) => {
                if let Some((k, n)) = run.take() {
                    out.push(format!("{k} chunks={n}"));
                }
                out.push(describe(action));
            }
        }
    }
    if let Some((k, n)) = run {
        out.push(format!("{k} chunks={n}"));
    }
    out
}

/// Every chunk of an id applies where the text so far ends (a receiver rebuilds the
/// text without a gap); [`rebuilt`] panics otherwise.
fn chunks_grow(actions: &[Action]) {
    let messages = rebuilt(&blocks_of(actions));
    assert!(messages.iter().all(|m| m.done), "{messages:?}");
}

fn keeps_the_contract(name: &str, actions: &[Action]) {
    let blocks = blocks_of(actions);
    assert_contract_so_far(name, &blocks);
    assert!(matches!(blocks.last(), Some(BlockKind::SessionEnd(_))), "{name}: no session_end");
}

const TOOL: &str = include_str!("../../tests/fixtures/tool.jsonl");
const PLAIN: &str = include_str!("../../tests/fixtures/plain.jsonl");
const SLOW_INTERRUPT: &str = include_str!("../../tests/fixtures/slow-interrupt.jsonl");
const ERROR: &str = include_str!("../../tests/fixtures/error.jsonl");
const ERROR_RETRIES: &str = include_str!("../../tests/fixtures/error-retries.jsonl");
const TOOL_INTERRUPT: &str = include_str!("../../tests/fixtures/tool-interrupt.jsonl");

const OVERLOADED: &str = r#""529 {\"error\":{\"message\":\"Overloaded (scripted mock:error)\",\"type\":\"overloaded_error\"},\"type\":\"error\"}""#;

#[test]
fn recorded_turns() {
    let error_end = format!(
        "session_end Error in=Some(0) out=Some(0) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0) {OVERLOADED}"
    );
    let error_block = format!("error model_error recoverable=true {OVERLOADED}");
    let inner = &OVERLOADED[1..OVERLOADED.len() - 1];
    #[rustfmt::skip]
        let cases: Vec<(&str, &str, bool, Vec<String>)> = vec![
            ("tool round trip (mock:tool, command `sleep 30; echo finished`)", TOOL, false, vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}".into(),
                "thinking p-m1-0 chunks=14".into(),
                "thinking p-m1-0 @62 done=true \"\"".into(),
                "text p-m1-1 chunks=4".into(),
                "text p-m1-1 @21 done=true \"\"".into(),
                "session_id sess-1".into(),
                "tool_call p-toolu_mock_000001 bash Running {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_call p-toolu_mock_000001 bash Done {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_result p-toolu_mock_000001 error=false \"finished\\n\"".into(),
                "thinking p-m2-0 chunks=6".into(),
                "thinking p-m2-0 @35 done=true \"\"".into(),
                "text p-m2-1 chunks=7".into(),
                "text p-m2-1 @52 done=true \"\"".into(),
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Completed in=Some(2928) out=Some(53) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
            ("plain answer, session already reported", PLAIN, true, vec![
                "write {\"id\":\"t2-state-1\",\"type\":\"get_state\"}".into(),
                "text p-m1-0 chunks=12".into(),
                "text p-m1-0 @71 done=true \"\"".into(),
                "write {\"id\":\"t2-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Completed in=Some(1591) out=Some(18) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
            ("interrupt while the model streams (mock:slow, abort)", SLOW_INTERRUPT, true, vec![
                "write {\"id\":\"t3-state-1\",\"type\":\"get_state\"}".into(),
                "text p-m1-0 chunks=3".into(),
                "text p-m1-0 @42 done=true \"\"".into(),
                "write {\"id\":\"t3-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Interrupted in=Some(1640) out=Some(1) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
            ("model error without retries (mock:error)", ERROR, true, vec![
                "write {\"id\":\"t4-state-1\",\"type\":\"get_state\"}".into(),
                "write {\"id\":\"t4-state-2\",\"type\":\"get_state\"}".into(),
                error_block.clone(),
                error_end.clone(),
            ]),
            ("model error after pi's three retries", ERROR_RETRIES, false, vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}".into(),
                "session_id sess-1".into(),
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=false \"Model error ({}); retrying in 1 s (attempt 1 of 3)\"", inner),
                "write {\"id\":\"t1-state-3\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=false \"Model error ({}); retrying in 1 s (attempt 2 of 3)\"", inner),
                "write {\"id\":\"t1-state-4\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=false \"Model error ({}); retrying in 1 s (attempt 3 of 3)\"", inner),
                "write {\"id\":\"t1-state-5\",\"type\":\"get_state\"}".into(),
                format!("progress p-p1-retry done=true \"Gave up after 3 retries: {}\"", inner),
                error_block,
                error_end,
            ]),
            ("interrupt while a tool runs: pi kills it (`Command aborted`)", TOOL_INTERRUPT, true, vec![
                "write {\"id\":\"t2-state-1\",\"type\":\"get_state\"}".into(),
                "thinking p-m1-0 chunks=14".into(),
                "thinking p-m1-0 @62 done=true \"\"".into(),
                "text p-m1-1 chunks=4".into(),
                "text p-m1-1 @21 done=true \"\"".into(),
                "tool_call p-toolu_mock_000005 bash Running {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_call p-toolu_mock_000005 bash Error {\"command\":\"sleep 30; echo finished\"} title=\"sleep 30; echo finished\"".into(),
                "tool_result p-toolu_mock_000005 error=true \"Command aborted\"".into(),
                "write {\"id\":\"t2-state-2\",\"type\":\"get_state\"}".into(),
                "session_end Interrupted in=Some(1426) out=Some(31) cache_read=Some(0) cache_write=Some(0) cost=Some(0.0)".into(),
            ]),
        ];
    for (name, text, reported, want) in cases {
        let rec = recording(text);
        let (actions, written, mapper) = replay(&rec, reported);
        assert_eq!(folded(&actions), want, "{name}");
        assert!(mapper.ended(), "{name}");
        chunks_grow(&actions);
        keeps_the_contract(name, &actions);
        // The probes the mapper asked for are the commands the adapter wrote.
        let asked: Vec<Value> =
            actions.iter().filter_map(|a| if let Action::Agent(c) = a { Some(c.clone()) } else { None }).collect();
        assert_eq!(asked, written, "{name}");
    }
}

fn line(value: Value) -> Event {
    parse_line(&value.to_string()).unwrap()
}

fn state(id: &str, streaming: bool) -> Event {
    line(json!({"id": id, "type": "response", "command": "get_state", "success": true,
            "data": {"isStreaming": streaming, "isCompacting": false, "sessionId": "sess-1"}}))
}

fn run(events: Vec<Event>) -> Vec<String> {
    let mut mapper = TurnMapper::new("p", "t1", Some("sess-1".into()), true);
    let mut actions = Vec::new();
    for event in events {
        actions.extend(mapper.on_event(event));
    }
    actions.iter().map(describe).collect()
}

fn assistant_end(content: Value, stop: &str) -> Event {
    line(json!({"type": "message_end", "message": {"role": "assistant", "content": content, "stopReason": stop,
            "usage": {"input": 3, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}}}))
}

#[test]
fn synthetic_turns() {
    let prompt_ok = line(json!({"id": "t1-prompt", "type": "response", "command": "prompt", "success": true}));
    let start = line(json!({"type": "message_start", "message": {"role": "assistant", "content": []}}));
    let text_delta = |i: usize, d: &str| {
        line(
            json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": i, "delta": d}}),
        )
    };
    #[rustfmt::skip]
        let cases: Vec<(&str, Vec<Event>, Vec<&str>)> = vec![
            ("pi refuses the prompt", vec![
                line(json!({"id": "t1-prompt", "type": "response", "command": "prompt", "success": false, "error": "No API key found for mock"})),
            ], vec![
                "error agent_error recoverable=true \"pi refused the message: No API key found for mock\"",
                "session_end Error \"pi refused the message: No API key found for mock\"",
            ]),
            ("a prompt handled without a run (an extension command)", vec![
                prompt_ok.clone(), state("t1-state-1", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "session_end Completed",
            ]),
            ("a probe answered while the run goes on changes nothing; an old probe's answer is ignored", vec![
                prompt_ok.clone(), Event::AgentStart, state("t1-state-1", true),
                Event::AgentEnd, state("t1-state-1", false), state("t1-state-2", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}",
                "session_end Completed",
            ]),
            ("a retry that succeeds; the failed message's usage counts too", vec![
                prompt_ok.clone(), Event::AgentStart, start.clone(),
                line(json!({"type": "message_end", "message": {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "503 busy"}})),
                Event::AgentEnd,
                line(json!({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "503 busy"})),
                state("t1-state-2", false),
                Event::AgentStart, start.clone(), text_delta(0, "ok"),
                assistant_end(json!([{"type": "text", "text": "ok"}]), "stop"),
                line(json!({"type": "auto_retry_end", "success": true, "attempt": 1})),
                Event::AgentEnd, state("t1-state-3", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}",
                "progress p-p1-retry done=false \"Model error (503 busy); retrying in 2 s (attempt 1 of 3)\"",
                "text p-m2-0 @0 done=false \"ok\"",
                "text p-m2-0 @2 done=true \"\"",
                "progress p-p1-retry done=true \"Model error recovered after 1 retry\"",
                "write {\"id\":\"t1-state-3\",\"type\":\"get_state\"}",
                "session_end Completed in=Some(3) out=Some(2) cache_read=Some(0) cache_write=Some(0) cost=Some(0.5)",
            ]),
            ("a compaction after the run delays the end", vec![
                prompt_ok.clone(), Event::AgentStart, Event::AgentEnd,
                line(json!({"type": "compaction_start", "reason": "threshold"})),
                line(json!({"id": "t1-state-2", "type": "response", "command": "get_state", "success": true, "data": {"isStreaming": false, "isCompacting": true}})),
                line(json!({"type": "compaction_end", "reason": "threshold", "aborted": false, "willRetry": false})),
                state("t1-state-3", false),
            ], vec![
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "write {\"id\":\"t1-state-2\",\"type\":\"get_state\"}",
                "progress p-p1-compaction done=false \"Compacting the conversation (threshold)\"",
                "progress p-p1-compaction done=true \"Conversation compacted\"",
                "write {\"id\":\"t1-state-3\",\"type\":\"get_state\"}",
                "session_end Completed",
            ]),
            ("output limit; thinking and text without deltas (lines lost) come whole at message_end", vec![
                Event::AgentStart, start.clone(),
                assistant_end(json!([{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "cut"}, {"type": "toolCall", "id": "x"}]), "length"),
                Event::AgentEnd, state("t1-state-1", false),
            ], vec![
                "thinking p-m1-0 done=true \"hm\"",
                "text p-m1-1 done=true \"cut\"",
                "write {\"id\":\"t1-state-1\",\"type\":\"get_state\"}",
                "session_end MaxTokens in=Some(3) out=Some(2) cache_read=Some(0) cache_write=Some(0) cost=Some(0.5)",
            ]),
            ("the final content wins over the streamed deltas", vec![
                Event::AgentStart, start.clone(), text_delta(0, "Hel"),
                line(json!({"type": "message_update", "assistantMessageEvent": {"type": "text_end", "contentIndex": 0, "content": "Hello"}})),
                assistant_end(json!([{"type": "text", "text": "Hello"}]), "stop"),
            ], vec![
                "text p-m1-0 @0 done=false \"Hel\"",
                "text p-m1-0 @3 done=true \"lo\"",
            ]),
            ("extension dialogs are dismissed, notifications ignored, errors shown", vec![
                line(json!({"type": "extension_ui_request", "id": "u1", "method": "confirm", "title": "Allow?"})),
                line(json!({"type": "extension_ui_request", "id": "u2", "method": "notify", "message": "hi"})),
                line(json!({"type": "extension_error", "extensionPath": "/e.ts", "event": "tool_call", "error": "boom"})),
            ], vec![
                "write {\"cancelled\":true,\"id\":\"u1\",\"type\":\"extension_ui_response\"}",
                "error extension_error recoverable=true \"pi extension /e.ts failed: boom\"",
            ]),
            ("a tool that ends without a start; a repeated end is ignored", vec![
                line(json!({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "read", "result": {"content": [{"type": "text", "text": "x"}]}, "isError": false})),
                line(json!({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "read", "result": {"content": []}, "isError": false})),
                line(json!({"type": "tool_execution_start", "toolCallId": "c2", "toolName": "read", "args": {"path": "src/lib.rs"}})),
            ], vec![
                "tool_call p-c1 read Running null title=\"\"",
                "tool_call p-c1 read Done null title=\"\"",
                "tool_result p-c1 error=false \"x\"",
                "tool_call p-c2 read Running {\"path\":\"src/lib.rs\"} title=\"src/lib.rs\"",
            ]),
        ];
    for (name, events, want) in cases {
        assert_eq!(run(events), want, "{name}");
    }
}

#[test]
fn exit_and_interrupt_close_what_is_open() {
    let start_tool = line(
        json!({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash", "args": {"command": "sleep 9"}}),
    );
    let delta = line(
        json!({"type": "message_update", "assistantMessageEvent": {"type": "thinking_delta", "contentIndex": 0, "delta": "hm"}}),
    );
    let mut mapper = TurnMapper::new("p", "t1", None, false);
    mapper.on_event(delta.clone());
    mapper.on_event(start_tool.clone());
    let got: Vec<String> = mapper.on_exit("pi exited with status 1:\nboom").iter().map(describe).collect();
    assert_eq!(
        got,
        [
            "thinking p-m0-0 @2 done=true \"\"",
            "tool_call p-c1 bash Error {\"command\":\"sleep 9\"} title=\"sleep 9\"",
            "tool_result p-c1 error=true \"pi exited before the tool call finished\"",
            "error agent_exited recoverable=true \"pi exited with status 1:\\nboom\"",
            "session_end Error \"pi exited with status 1:\\nboom\"",
        ]
    );
    assert!(mapper.on_exit("again").is_empty() && mapper.on_interrupted().is_empty());
    assert!(mapper.on_event(Event::AgentEnd).is_empty(), "nothing after the end");

    // Exit while an abort is pending: the turn was interrupted, not failed.
    let mut mapper = TurnMapper::new("p", "t1", None, false);
    mapper.on_event(start_tool);
    mapper.interrupt_requested();
    assert!(mapper.on_event(state("t1-state-1", false)).is_empty(), "a probe does not end an interrupted turn");
    let got: Vec<String> = mapper.on_exit("killed").iter().map(describe).collect();
    assert_eq!(got[2], "session_end Interrupted");
    assert_eq!(got[1], "tool_result p-c1 error=true \"interrupted by the user\"");
}

#[test]
fn every_delta_is_one_append_and_the_text_is_bounded() {
    // 64 KiB in 80-byte deltas (mock:long's shape): one append each, the bytes sent
    // are the text's.
    let mut stream = Stream::new(DeltaKind::Text, "s".into());
    let delta = "x".repeat(79) + "\n";
    let mut chunks = Vec::new();
    for _ in 0..820 {
        chunks.extend(stream.push(&delta));
    }
    chunks.extend(stream.finish());
    assert_eq!(chunks.len(), 821);
    let sent: usize = chunks.iter().map(|c| streamed(c).text.len()).sum();
    assert_eq!(sent, 820 * delta.len());
    let last = streamed(chunks.last().unwrap());
    assert_eq!((last.offset, last.text.as_str(), last.done), (Some(sent as u64), "", true));
    assert_eq!(final_texts(&chunks), [delta.repeat(820)]);
    assert!(stream.finish().is_none() && stream.push("more").is_none());

    // Beyond MAX_TEXT_BYTES the text is cut, with a note in the done chunk.
    let mut stream = Stream::new(DeltaKind::Thinking, "t".into());
    let big = "é".repeat(1000);
    let mut chunks = Vec::new();
    for _ in 0..600 {
        chunks.extend(stream.push(&big));
    }
    chunks.extend(stream.finish());
    assert!(streamed(chunks.last().unwrap()).done);
    let whole = &rebuilt(&chunks)[0].text;
    assert!(whole.len() <= MAX_TEXT_BYTES + 64, "{}", whole.len());
    assert!(whole.ends_with(&format!("[truncated: {} bytes in all]", 600 * big.len())));

    // The whole text at the end adds what the deltas missed.
    let mut stream = Stream::new(DeltaKind::Text, "f".into());
    let mut chunks: Vec<_> = stream.push("Hel").into_iter().collect();
    stream.set_full("Hello");
    chunks.extend(stream.finish());
    assert_eq!(final_texts(&chunks), ["Hello"]);
    assert_eq!(streamed(&chunks[1]), &StreamedText::append("f", 3, "lo", true));

    // An empty block that never showed anything sends nothing.
    let mut empty = Stream::new(DeltaKind::Text, "e".into());
    assert!(empty.finish().is_none());
}

fn streamed(kind: &BlockKind) -> &StreamedText {
    match kind {
        BlockKind::Text(t) | BlockKind::Thinking(t) => t,
        other => panic!("not streamed text: {other:?}"),
    }
}

#[test]
fn helpers() {
    assert_eq!(tool_title(&json!({"command": "ls -la\nsecond line"})).as_deref(), Some("ls -la"));
    assert_eq!(tool_title(&json!({"path": "a.rs", "content": "x"})).as_deref(), Some("a.rs"));
    assert_eq!(tool_title(&json!({"content": "x"})), None);
    assert_eq!(tool_title(&json!({"command": "z".repeat(500)})).unwrap().chars().count(), MAX_TITLE_CHARS + 1);
    let input = bounded_input(json!({"content": "y".repeat(MAX_INPUT_BYTES)}), MAX_INPUT_BYTES);
    assert!(input["truncated"].as_str().unwrap().len() < MAX_INPUT_BYTES + 100);
    assert_eq!(bounded("héllo", 2), "h\n… [truncated: 6 bytes in all]");
    let u = usage_of(&PiUsage {
        input: Some(10.4),
        output: Some(-1.0),
        cache_read: Some(f64::NAN),
        cache_write: None,
        cost: Some(crate::events::PiCost { total: Some(0.25) }),
    });
    assert_eq!(
        u,
        Usage {
            input_tokens: Some(10),
            output_tokens: Some(0),
            cache_read_tokens: None,
            cache_write_tokens: None,
            cost_usd: Some(0.25)
        }
    );
    let mut total = Usage::default();
    total.add(&u);
    total.add(&u);
    assert_eq!((total.input_tokens, total.cost_usd), (Some(20), Some(0.5)));
}
