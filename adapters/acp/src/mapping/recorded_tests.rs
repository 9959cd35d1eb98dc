//! Recorded-style ACP sequences (the shapes Qwen Code 0.24, Gemini CLI 0.61 and the ACP
//! schema put on the wire), table-driven: what the user sees of each call, the texts,
//! and the usage in `session_end` and `get_usage`.

use serde_json::json;
use terminull_adapter_sdk::streamer::StreamKind;
use terminull_adapter_sdk::testing::{assert_contract, rebuilt, session_end};

use super::*;
use crate::schema::PermissionParams;

/// One thing the agent said during the turn.
enum Step {
    /// A `session/update`'s `update`.
    Update(Value),
    /// A `session/request_permission`'s params, answered with this option id.
    Ask(Value, &'static str),
}

struct Case {
    name: &'static str,
    steps: Vec<Step>,
    /// The `session/prompt` result.
    result: Value,
    /// Per tool call (in order), the last `tool_call` block's title and input.
    calls: Vec<(&'static str, Value)>,
    /// The finished `text` messages.
    texts: Vec<&'static str>,
    /// The finished `thinking` messages.
    thoughts: Vec<&'static str>,
    /// `session_end`'s (input, output) tokens.
    usage: Option<(u64, u64)>,
}

fn message(text: &str) -> Step {
    Step::Update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}))
}

fn thought(text: &str) -> Step {
    Step::Update(json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}))
}

/// Qwen Code's usage carrier: an empty message chunk with `_meta.usage`.
fn qwen_usage(input: u64, output: u64) -> Step {
    Step::Update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""},
        "_meta": {"usage": {"inputTokens": input, "outputTokens": output, "totalTokens": input + output},
                  "durationMs": 12, "timestamp": 1_790_000_000_000_u64}}))
}

fn options() -> Value {
    json!([{"optionId": "proceed_always", "name": "Always Allow", "kind": "allow_always"},
           {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
           {"optionId": "cancel", "name": "Reject", "kind": "reject_once"}])
}

fn output(text: &str) -> Value {
    json!([{"type": "content", "content": {"type": "text", "text": text}}])
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "qwen: shell call completed by the permission request, usage on empty chunks",
            steps: vec![
                thought("The user wants a command run."),
                message("I'll run the command."),
                qwen_usage(300, 40),
                Step::Update(json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "status": "pending",
                    "title": "Shell", "kind": "execute", "rawInput": {}})),
                Step::Ask(
                    json!({"sessionId": "s", "options": options(), "toolCall": {"toolCallId": "call_1",
                        "title": "echo hello", "kind": "execute", "status": "pending",
                        "rawInput": {"command": "echo hello", "description": "Print hello"}}}),
                    "proceed_once",
                ),
                Step::Update(
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "in_progress"}),
                ),
                Step::Update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1",
                    "status": "completed", "rawInput": {}, "content": output("hello")})),
                qwen_usage(350, 20),
                message("Done. The command printed: hello"),
                Step::Update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""},
                    "_meta": {"timing": {"ttftMs": 3}}})),
            ],
            result: json!({"stopReason": "end_turn"}),
            calls: vec![("echo hello", json!({"command": "echo hello", "description": "Print hello"}))],
            texts: vec!["I'll run the command.", "Done. The command printed: hello"],
            thoughts: vec!["The user wants a command run."],
            usage: Some((650, 60)),
        },
        Case {
            name: "a call announced empty is completed by a later tool_call_update",
            steps: vec![
                Step::Update(json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Shell",
                    "kind": "other", "status": "pending", "rawInput": {}})),
                Step::Update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "ls -a",
                    "kind": "execute", "rawInput": {"command": "ls -a"}})),
                Step::Update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                    "content": output(".\n..")})),
            ],
            result: json!({"stopReason": "end_turn"}),
            calls: vec![("ls -a", json!({"command": "ls -a"}))],
            texts: vec![],
            thoughts: vec![],
            usage: None,
        },
        Case {
            name: "empty chunks neither open a text nor split a thought",
            steps: vec![thought("Let me "), message(""), thought("think."), message(""), message("Hi.")],
            result: json!({"stopReason": "end_turn"}),
            calls: vec![],
            texts: vec!["Hi."],
            thoughts: vec!["Let me think."],
            usage: None,
        },
        Case {
            name: "gemini: usage in the prompt result's _meta.quota",
            steps: vec![message("Hello.")],
            result: json!({"stopReason": "end_turn",
                "_meta": {"quota": {"token_count": {"input_tokens": 120, "output_tokens": 8}, "model_usage": []}}}),
            calls: vec![],
            texts: vec!["Hello."],
            thoughts: vec![],
            usage: Some((120, 8)),
        },
        Case {
            name: "the prompt result's ACP usage wins over the chunks' counts",
            steps: vec![qwen_usage(1, 1), message("Hello.")],
            result: json!({"stopReason": "end_turn", "usage": {"inputTokens": 90, "outputTokens": 9, "totalTokens": 99}}),
            calls: vec![],
            texts: vec!["Hello."],
            thoughts: vec![],
            usage: Some((90, 9)),
        },
    ]
}

fn run(case: &Case, mapper: &mut Mapper) -> Vec<BlockKind> {
    mapper.begin_turn("t");
    let mut out = Vec::new();
    for step in &case.steps {
        match step {
            Step::Update(u) => out.extend(mapper.update(SessionUpdate::parse(u))),
            Step::Ask(params, answer) => {
                let params: PermissionParams = serde_json::from_value(params.clone()).unwrap();
                out.extend(mapper.permission_update(&params));
                let ask = mapper.permission(&params);
                mapper.permission_answered(&ask, Some(answer));
            }
        }
    }
    let result: PromptResult = serde_json::from_value(case.result.clone()).unwrap();
    out.extend(mapper.end_turn(PromptEnd::Answered(result), false));
    out
}

#[test]
fn recorded_sequences_map_to_whole_calls_nonempty_texts_and_usage() {
    for case in cases() {
        let mut mapper = Mapper::new(keep_chunk);
        let blocks = run(&case, &mut mapper);
        let name = case.name;
        assert_contract(&blocks);
        for block in &blocks {
            if let BlockKind::Text(t) | BlockKind::Thinking(t) = block {
                assert!(!(t.done && t.text.is_empty() && t.offset.is_none()), "{name}: an empty block {t:?}");
            }
        }
        let messages = rebuilt(&blocks);
        assert!(messages.iter().all(|m| !m.text.is_empty()), "{name}: an empty message in {messages:?}");
        let of =
            |kind| messages.iter().filter(|m| m.kind == kind && m.done).map(|m| m.text.as_str()).collect::<Vec<_>>();
        assert_eq!(of(StreamKind::Text), case.texts, "{name}");
        assert_eq!(of(StreamKind::Thinking), case.thoughts, "{name}");

        let mut last: Vec<(ToolCallId, ToolCall)> = Vec::new();
        for block in &blocks {
            if let BlockKind::ToolCall(c) = block {
                match last.iter_mut().find(|(id, _)| *id == c.id) {
                    Some(slot) => slot.1 = c.clone(),
                    None => last.push((c.id.clone(), c.clone())),
                }
            }
        }
        let calls: Vec<(&str, Value)> =
            last.iter().map(|(_, c)| (c.title.as_deref().unwrap_or_default(), c.input.clone())).collect();
        let want: Vec<(&str, Value)> = case.calls.iter().map(|(t, i)| (*t, i.clone())).collect();
        assert_eq!(calls, want, "{name}");

        let usage = session_end(&blocks).usage.as_ref().map(|u| (u.input_tokens.unwrap(), u.output_tokens.unwrap()));
        assert_eq!(usage, case.usage, "{name}: session_end usage");
        let total = mapper.session_usage();
        assert_eq!(total.input_tokens.zip(total.output_tokens), case.usage, "{name}: get_usage");
    }
}

#[test]
fn the_permission_requests_call_is_resent_running_before_the_question() {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t");
    mapper.update(SessionUpdate::parse(&json!({"sessionUpdate": "tool_call", "toolCallId": "call_1",
        "status": "pending", "title": "Shell", "kind": "execute", "rawInput": {}})));
    let params: PermissionParams = serde_json::from_value(json!({"sessionId": "s", "options": options(),
        "toolCall": {"toolCallId": "call_1", "title": "echo hello", "status": "pending",
                     "rawInput": {"command": "echo hello"}}}))
    .unwrap();
    let blocks = mapper.permission_update(&params);
    let [BlockKind::ToolCall(call)] = blocks.as_slice() else { panic!("{blocks:?}") };
    assert_eq!((call.status, call.title.as_deref()), (ToolStatus::Running, Some("echo hello")));
    assert_eq!(call.input, json!({"command": "echo hello"}));
    let ask = mapper.permission(&params);
    assert_eq!((ask.tool_call_id, ask.input), (Some(call.id.clone()), json!({"command": "echo hello"})));
    assert!(mapper.permission_update(&params).is_empty(), "nothing new the second time");

    // A request about a call not shown stays a request only (Gemini asks first).
    let other: PermissionParams = serde_json::from_value(json!({"sessionId": "s", "options": options(),
        "toolCall": {"toolCallId": "unknown", "title": "rm x"}}))
    .unwrap();
    assert!(mapper.permission_update(&other).is_empty());
}
