use serde_json::json;
use terminull_adapter_sdk::streamer::StreamKind;
use terminull_adapter_sdk::testing::{assert_contract, final_texts, rebuilt, session_end as end};
use terminull_protocol::blocks::{PermissionOptionKind, StreamedText};

use super::*;
use crate::schema::PermissionParams;

fn update(v: Value) -> SessionUpdate {
    SessionUpdate::parse(&v)
}

fn message(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
}

fn thought(text: &str) -> Value {
    json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}})
}

fn answered(stop: &str) -> PromptEnd {
    PromptEnd::Answered(PromptResult { stop_reason: stop.into(), ..Default::default() })
}

/// Runs one turn: every update, then the end; checks the turn contract on the way.
fn turn(updates: Vec<Value>, end: PromptEnd, interrupted: bool) -> Vec<BlockKind> {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t");
    let mut out = Vec::new();
    for u in updates {
        out.extend(mapper.update(update(u)));
    }
    out.extend(mapper.end_turn(end, interrupted));
    assert_contract(&out);
    out
}

fn texts(blocks: &[BlockKind], thinking: bool) -> Vec<&StreamedText> {
    blocks
        .iter()
        .filter_map(|b| match b {
            BlockKind::Text(t) if !thinking => Some(t),
            BlockKind::Thinking(t) if thinking => Some(t),
            _ => None,
        })
        .collect()
}

fn types(blocks: &[BlockKind]) -> Vec<&'static str> {
    blocks.iter().map(BlockKind::block_type).collect()
}

#[test]
fn message_chunks_stream_as_appends_under_one_id() {
    let blocks = turn(vec![message("Hel"), message("lo"), message("!")], answered("end_turn"), false);
    let chunks = texts(&blocks, false);
    let shown: Vec<(&str, &str, bool)> = chunks.iter().map(|t| (t.id.as_str(), t.text.as_str(), t.done)).collect();
    assert_eq!(
        shown,
        [("t-text1", "Hel", false), ("t-text1", "lo", false), ("t-text1", "!", false), ("t-text1", "", true)]
    );
    let offsets: Vec<Option<u64>> = chunks.iter().map(|t| t.offset).collect();
    assert_eq!(offsets, [Some(0), Some(3), Some(5), Some(6)]);
    assert_eq!(final_texts(&blocks), ["Hello!"]);
    assert_eq!(end(&blocks).reason, EndReason::Completed);
}

#[test]
fn a_thought_ends_where_the_answer_starts_and_a_tool_call_splits_messages() {
    let blocks = turn(
        vec![
            thought("Let me "),
            thought("think."),
            message("I'll run it."),
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "kind": "execute", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "a.txt"}}]}),
            thought("Done thinking."),
            message("It printed a.txt."),
        ],
        answered("end_turn"),
        false,
    );
    assert_eq!(
        types(&blocks),
        [
            "thinking",
            "thinking",
            "thinking",
            "text",
            "text",
            "tool_call",
            "tool_call",
            "tool_result",
            "thinking",
            "thinking",
            "text",
            "text",
            "session_end"
        ]
    );
    let thinking = texts(&blocks, true);
    assert!(thinking[2].done);
    let thoughts = rebuilt(&blocks);
    assert_eq!((thoughts[0].kind, thoughts[0].text.as_str()), (StreamKind::Thinking, "Let me think."));
    assert_ne!(thinking[0].id, thinking[3].id, "a new thought after the tool call has a new id");
    let text = texts(&blocks, false);
    assert_ne!(text[0].id, text[2].id);
    assert!(blocks.iter().any(|b| matches!(b, BlockKind::ToolResult(r) if r.output == "a.txt" && !r.is_error)));
}

#[test]
fn a_new_message_id_starts_a_new_text_block() {
    let with_id = |text: &str, id: &str| json!({"sessionUpdate": "agent_message_chunk", "messageId": id, "content": {"type": "text", "text": text}});
    let blocks = turn(vec![with_id("a", "m1"), with_id("b", "m1"), with_id("c", "m2")], answered("end_turn"), false);
    let done: Vec<(String, String)> =
        rebuilt(&blocks).into_iter().filter(|m| m.done).map(|m| (m.id.to_string(), m.text)).collect();
    assert_eq!(done, [("t-text1".to_owned(), "ab".to_owned()), ("t-text2".to_owned(), "c".to_owned())]);
}

#[test]
fn user_message_chunks_and_unknown_updates_show_nothing() {
    let blocks = turn(
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}),
            json!({"sessionUpdate": "config_option_update", "configOptions": []}),
            json!({"sessionUpdate": "brand_new_thing"}),
            json!({"sessionUpdate": "tool_call"}),
        ],
        answered("end_turn"),
        false,
    );
    assert_eq!(types(&blocks), ["session_end"]);
}

#[test]
fn tool_calls_map_status_content_and_diffs() {
    let blocks = turn(
        vec![
            json!({"sessionUpdate": "tool_call", "toolCallId": "w", "title": "Write a.txt", "kind": "edit",
                   "status": "pending", "rawInput": {"path": "/w/a.txt"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "w", "status": "completed",
                   "content": [{"type": "diff", "path": "/w/a.txt", "oldText": null, "newText": "hi\n"}]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "f", "title": "rm x", "kind": "execute",
                   "status": "failed", "rawOutput": {"exit_code": 1}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "f", "status": "completed"}),
        ],
        answered("end_turn"),
        false,
    );
    assert_eq!(
        types(&blocks),
        ["tool_call", "diff", "tool_call", "tool_result", "tool_call", "tool_result", "session_end"]
    );
    let BlockKind::ToolCall(running) = &blocks[0] else { panic!() };
    assert_eq!(
        (running.id.as_str(), running.name.as_str(), running.title.as_deref(), running.status),
        ("t-w", "edit", Some("Write a.txt"), ToolStatus::Running)
    );
    assert_eq!(running.input, json!({"path": "/w/a.txt"}));
    let BlockKind::Diff(diff) = &blocks[1] else { panic!() };
    assert_eq!(diff.path, "/w/a.txt");
    assert_eq!(diff.change, DiffChange::Replace { old_text: None, new_text: "hi\n".into() });
    assert_eq!(diff.tool_call_id.as_ref().map(ToolCallId::as_str), Some("t-w"));
    let BlockKind::ToolResult(written) = &blocks[3] else { panic!() };
    assert_eq!(written.output, "Changed /w/a.txt");
    let BlockKind::ToolCall(failed) = &blocks[4] else { panic!() };
    assert_eq!((failed.status, failed.name.as_str()), (ToolStatus::Error, "execute"));
    let BlockKind::ToolResult(failed) = &blocks[5] else { panic!() };
    assert_eq!((failed.output.as_str(), failed.is_error), ("{\"exit_code\":1}", true));
}

#[test]
fn a_running_call_is_re_sent_only_when_it_changes() {
    let call = |status: &str, title: &str| json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": status, "title": title});
    let blocks = turn(
        vec![call("pending", "a"), call("in_progress", "a"), call("in_progress", "b"), call("completed", "b")],
        answered("end_turn"),
        false,
    );
    assert_eq!(types(&blocks), ["tool_call", "tool_call", "tool_call", "tool_result", "session_end"]);
}

#[test]
fn calls_left_open_are_closed_by_how_the_turn_ended() {
    let open = json!({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "sleep", "kind": "execute"});
    for (interrupted, stop, status, needle) in [
        (false, "end_turn", ToolStatus::Done, "without reporting"),
        (true, "cancelled", ToolStatus::Error, "before this tool call finished"),
        (false, "max_tokens", ToolStatus::Error, "before this tool call finished"),
    ] {
        let blocks = turn(vec![open.clone()], answered(stop), interrupted);
        let closing = blocks.iter().rev().find_map(|b| match b {
            BlockKind::ToolCall(c) => Some(c.status),
            _ => None,
        });
        assert_eq!(closing, Some(status), "{stop}");
        let result = blocks.iter().find_map(|b| match b {
            BlockKind::ToolResult(r) => Some(r.output.clone()),
            _ => None,
        });
        assert!(result.unwrap().contains(needle), "{stop}");
    }
}

#[test]
fn stop_reasons_become_end_reasons() {
    for (stop, reason, error) in [
        ("end_turn", EndReason::Completed, None),
        ("", EndReason::Completed, None),
        ("max_tokens", EndReason::MaxTokens, None),
        ("refusal", EndReason::Refusal, None),
        ("cancelled", EndReason::Interrupted, None),
        ("max_turn_requests", EndReason::Error, Some("max_turn_requests")),
        ("something_new", EndReason::Completed, None),
    ] {
        let blocks = turn(vec![], answered(stop), false);
        assert_eq!(end(&blocks).reason, reason, "{stop}");
        let code = blocks.iter().find_map(|b| match b {
            BlockKind::Error(e) => e.code.as_deref(),
            _ => None,
        });
        assert_eq!(code, error, "{stop}");
    }
}

#[test]
fn an_interrupted_turn_is_never_an_error() {
    for end_of_prompt in [
        answered("end_turn"),
        PromptEnd::Failed { message: "AbortError".into() },
        PromptEnd::Exited { report: "(signal 9)".into() },
        PromptEnd::CancelTimedOut,
    ] {
        let blocks = turn(vec![message("partial")], end_of_prompt.clone(), true);
        assert_eq!(end(&blocks).reason, EndReason::Interrupted, "{end_of_prompt:?}");
        assert!(!blocks.iter().any(|b| matches!(b, BlockKind::Error(_))), "{end_of_prompt:?}");
    }
}

#[test]
fn failures_give_an_error_block_and_end_the_turn_in_error() {
    let blocks = turn(vec![message("x")], PromptEnd::Failed { message: "Internal error (quota)".into() }, false);
    assert_eq!(types(&blocks), ["text", "text", "error", "session_end"]);
    let BlockKind::Error(e) = &blocks[2] else { panic!() };
    assert_eq!(
        (e.message.as_str(), e.code.as_deref(), e.recoverable),
        ("Internal error (quota)", Some("agent_error"), true)
    );
    assert_eq!(end(&blocks).message.as_deref(), Some("Internal error (quota)"));
    let blocks = turn(vec![], PromptEnd::Exited { report: "(exit status: 3): boom".into() }, false);
    let BlockKind::Error(e) = &blocks[0] else { panic!() };
    assert_eq!(e.code.as_deref(), Some("agent_exited"));
    assert!(e.message.contains("boom"));
}

#[test]
fn usage_comes_from_acp_usage_or_geminis_quota() {
    let acp = PromptResult {
        stop_reason: "end_turn".into(),
        usage: Some(crate::schema::PromptUsage {
            input_tokens: Some(10),
            output_tokens: Some(2),
            cached_read_tokens: Some(4),
            cached_write_tokens: None,
        }),
        meta: None,
    };
    let gemini = PromptResult {
        stop_reason: "end_turn".into(),
        usage: None,
        meta: Some(json!({"quota": {"token_count": {"input_tokens": 100, "output_tokens": 7}, "model_usage": []}})),
    };
    let mut mapper = Mapper::new(keep_chunk);
    for result in [acp, gemini] {
        mapper.begin_turn("t");
        mapper.end_turn(PromptEnd::Answered(result), false);
    }
    let total = mapper.session_usage();
    assert_eq!((total.input_tokens, total.output_tokens, total.cache_read_tokens), (Some(110), Some(9), Some(4)));
    let blocks = turn(vec![], answered("end_turn"), false);
    assert_eq!(end(&blocks).usage, None);
}

#[test]
fn plan_mode_usage_and_title_updates() {
    let blocks = turn(
        vec![
            json!({"sessionUpdate": "plan", "entries": [
                {"content": "read", "priority": "high", "status": "completed"},
                {"content": "write", "priority": "low", "status": "in_progress"},
                {"content": "test", "priority": "low", "status": "weird"}]}),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}),
            json!({"sessionUpdate": "usage_update", "used": 10, "size": 100}),
            json!({"sessionUpdate": "usage_update", "used": 10, "size": 100, "cost": {"amount": 0.25, "currency": "USD"}}),
            json!({"sessionUpdate": "session_info_update", "title": "Fix it"}),
        ],
        answered("end_turn"),
        false,
    );
    assert_eq!(types(&blocks), ["plan", "progress", "session_summary", "session_summary", "session_end"]);
    let BlockKind::Plan(plan) = &blocks[0] else { panic!() };
    let statuses: Vec<_> = plan.entries.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [PlanStatus::Completed, PlanStatus::InProgress, PlanStatus::Pending]);
    let BlockKind::Progress(p) = &blocks[1] else { panic!() };
    assert_eq!(p.message, "Mode: yolo");
    let BlockKind::SessionSummary(s) = &blocks[2] else { panic!() };
    assert_eq!(s.usage.as_ref().and_then(|u| u.cost_usd), Some(0.25));
    let BlockKind::SessionSummary(s) = &blocks[3] else { panic!() };
    assert_eq!(s.title.as_deref(), Some("Fix it"));
}

#[test]
fn commands_and_modes_are_kept_outside_turns() {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.set_modes(&crate::schema::SessionModes {
        current_mode_id: Some("default".into()),
        available_modes: vec![crate::schema::SessionMode { id: "plan".into(), name: "Plan".into() }],
    });
    mapper.outside_turn(update(json!({"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "/compact", "description": "Compress the context\nmore"}, {"name": " "}]})));
    mapper.outside_turn(update(message("replayed history")));
    let commands = mapper.commands();
    assert_eq!(commands.len(), 1);
    assert_eq!((commands[0].name.as_str(), commands[0].description.as_str()), ("compact", "Compress the context"));
    assert_eq!(mapper.current_mode(), Some("default"));
    mapper.begin_turn("t");
    let blocks = mapper.update(update(json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})));
    let BlockKind::Progress(p) = &blocks[0] else { panic!() };
    assert_eq!(p.message, "Mode: Plan");
}

fn permission(value: Value) -> PermissionParams {
    serde_json::from_value(value).unwrap()
}

#[test]
fn permission_requests_offer_the_agents_options_and_answer_with_its_ids() {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t");
    let shown = mapper.update(update(
        json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "rm -rf build", "kind": "execute", "rawInput": {"command": "rm -rf build"}}),
    ));
    assert_eq!(types(&shown), ["tool_call"]);
    let ask = mapper.permission(&permission(json!({
        "sessionId": "s", "toolCall": {"toolCallId": "c1"},
        "options": [
            {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "proceed_always", "name": "Always", "kind": "allow_always"},
            {"optionId": "odd", "name": "Odd", "kind": "ask_later"},
            {"optionId": "cancel", "name": "Reject", "kind": "reject_once"}]
    })));
    assert_eq!(ask.tool, "execute");
    assert_eq!(ask.input, json!({"command": "rm -rf build"}), "the known call's raw input");
    assert_eq!(ask.tool_call_id.as_ref().map(ToolCallId::as_str), Some("t-c1"));
    let ids: Vec<_> = ask.options.iter().map(|o| (o.id.as_str(), o.kind)).collect();
    assert_eq!(
        ids,
        [
            ("proceed_once", PermissionOptionKind::AllowOnce),
            ("proceed_always", PermissionOptionKind::AllowAlways),
            ("cancel", PermissionOptionKind::RejectOnce)
        ]
    );
    assert_eq!(
        ask.reply(Some("proceed_once")),
        json!({"outcome": {"outcome": "selected", "optionId": "proceed_once"}})
    );
    assert_eq!(ask.reply(None), json!({"outcome": {"outcome": "cancelled"}}));
    assert_eq!(ask.reply(Some("odd")), json!({"outcome": {"outcome": "cancelled"}}), "not an offered option");
    assert!(!ask.refuses(Some("proceed_always")) && ask.refuses(Some("cancel")) && ask.refuses(None));

    mapper.permission_answered(&ask, Some("cancel"));
    let blocks = mapper.end_turn(answered("end_turn"), false);
    let BlockKind::ToolResult(r) = &blocks[1] else { panic!("{blocks:?}") };
    assert!(r.is_error && r.output.contains("refused"), "{r:?}");
}

#[test]
fn a_permission_for_a_call_not_shown_yet_stands_alone_with_what_the_agent_said() {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t");
    let ask = mapper.permission(&permission(json!({
        "sessionId": "s",
        "toolCall": {"toolCallId": "write_file_1", "status": "pending", "title": "Writing to made.txt", "kind": "edit",
            "locations": [{"path": "/w/made.txt"}],
            "content": [{"type": "diff", "path": "/w/made.txt", "oldText": "", "newText": "hi\n"}]},
        "options": [{"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"}]
    })));
    assert_eq!(ask.tool_call_id, None);
    assert_eq!(ask.tool, "edit");
    assert_eq!(
        ask.input,
        json!({"title": "Writing to made.txt", "kind": "edit", "locations": ["/w/made.txt"],
               "diff": [{"path": "/w/made.txt", "old_text": "", "new_text": "hi\n"}]})
    );
    // Allowed, the agent then reports the call as completed: it appears, closed.
    let blocks = mapper.update(update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "write_file_1",
        "status": "completed", "title": "Writing to made.txt", "kind": "edit",
        "content": [{"type": "diff", "path": "/w/made.txt", "oldText": "", "newText": "hi\n"}]})));
    assert_eq!(types(&blocks), ["diff", "tool_call", "tool_result"]);
    let BlockKind::Diff(d) = &blocks[0] else { panic!() };
    assert_eq!(d.change, DiffChange::Replace { old_text: Some(String::new()), new_text: "hi\n".into() });
}

#[test]
fn thoughts_go_through_the_profiles_rewrite() {
    fn shout(_: &str, chunk: &str) -> String {
        chunk.to_uppercase()
    }
    let mut mapper = Mapper::new(shout);
    mapper.begin_turn("t");
    let blocks = mapper.update(update(thought("hm")));
    assert_eq!(texts(&blocks, true)[0].text, "HM");
}

#[test]
fn a_huge_message_is_cut_once_and_stays_bounded() {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t");
    let big = "x".repeat(limits::TEXT_BYTES / 2 + 10);
    let mut out = Vec::new();
    for _ in 0..4 {
        out.extend(mapper.update(update(message(&big))));
    }
    out.extend(mapper.end_turn(answered("end_turn"), false));
    assert_contract(&out);
    assert!(texts(&out, false).into_iter().last().unwrap().done);
    let whole = &rebuilt(&out)[0].text;
    assert!(whole.ends_with("… [truncated]"));
    assert!(whole.len() <= limits::TEXT_BYTES + 20);
    assert_eq!(texts(&out, false).len(), 3, "two chunks, the cut one, then only the closing chunk");
}

#[test]
fn tool_call_ids_are_unique_per_turn_although_agents_reuse_theirs() {
    let mut mapper = Mapper::new(keep_chunk);
    let call = json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "status": "completed"});
    let mut ids = Vec::new();
    for prefix in ["a", "b"] {
        mapper.begin_turn(prefix);
        for block in mapper.update(update(call.clone())) {
            if let BlockKind::ToolCall(c) = block {
                ids.push(c.id);
            }
        }
    }
    assert_eq!(ids.iter().map(ToolCallId::as_str).collect::<Vec<_>>(), ["a-call_1", "b-call_1"]);
}

#[test]
fn a_permission_under_an_unknown_id_is_about_the_only_open_call() {
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t");
    mapper.update(update(
        json!({"sessionUpdate": "tool_call", "toolCallId": "tc-1", "title": "write: /w/a", "kind": "edit"}),
    ));
    let params = permission(json!({
        "sessionId": "s",
        "toolCall": {"toolCallId": "edit-approval-1", "kind": "edit", "rawInput": {"tool": "write_file", "arguments": {"path": "/w/a"}}},
        "options": [{"optionId": "allow_once", "name": "Allow edit", "kind": "allow_once"},
                    {"optionId": "deny", "name": "Deny", "kind": "reject_once"}]
    }));
    let ask = mapper.permission(&params);
    assert_eq!(ask.tool_call_id.as_ref().map(ToolCallId::as_str), Some("t-tc-1"));
    assert_eq!(ask.input, json!({"tool": "write_file", "arguments": {"path": "/w/a"}}), "the request's own input");
    mapper.permission_answered(&ask, Some("deny"));
    let blocks = mapper.end_turn(answered("end_turn"), false);
    let BlockKind::ToolCall(call) = &blocks[0] else { panic!("{blocks:?}") };
    assert_eq!(call.status, ToolStatus::Error, "refused");

    // With two calls open nobody can tell which one is meant.
    mapper.begin_turn("u");
    for id in ["a", "b"] {
        mapper.update(update(json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": id})));
    }
    assert_eq!(mapper.permission(&params).tool_call_id, None);
}

fn notice_of(text: &str) -> Option<crate::notice::Notice> {
    use crate::notice::Notice;
    match text {
        "RETRY" => Some(Notice::Retrying { attempt: None, total: None, why: "HTTP 500".into() }),
        t if t.starts_with("GAVE UP") => Some(Notice::GaveUp(t.into())),
        _ => None,
    }
}

fn progress(blocks: &[BlockKind]) -> Vec<(&str, &str, Option<u64>, bool)> {
    blocks
        .iter()
        .filter_map(|b| match b {
            BlockKind::Progress(p) => Some((p.id.as_str(), p.message.as_str(), p.current, p.done)),
            _ => None,
        })
        .collect()
}

fn noticed_turn(updates: Vec<Value>, stderr_after: usize, stderr: usize) -> Vec<BlockKind> {
    let mut mapper = Mapper::new(keep_chunk).with_message_notices(notice_of);
    mapper.begin_turn("t");
    let mut out = Vec::new();
    for (i, u) in updates.into_iter().enumerate() {
        if i == stderr_after {
            for attempt in 1..=stderr {
                let why = "from stderr".to_owned();
                let n = crate::notice::Notice::Retrying { attempt: Some(attempt as u64), total: Some(3), why };
                out.extend(mapper.notice(n));
            }
        }
        out.extend(mapper.update(update(u)));
    }
    out.extend(mapper.end_turn(answered("end_turn"), false));
    assert_contract(&out);
    out
}

#[test]
fn retry_notices_in_message_text_are_one_progress_done_once_the_model_answers() {
    let blocks = noticed_turn(vec![message("RETRY"), message("RETRY"), message("Hello")], usize::MAX, 0);
    assert_eq!(
        progress(&blocks),
        [
            ("t-retry", "Model call failed (attempt 1): HTTP 500; retrying", Some(1), false),
            ("t-retry", "Model call failed (attempt 2): HTTP 500; retrying", Some(2), false),
            ("t-retry", "Model call succeeded after 2 failed attempt(s)", Some(2), true),
        ]
    );
    assert_eq!(final_texts(&blocks), ["Hello"], "the notices are not text");
    let BlockKind::SessionEnd(e) = blocks.last().unwrap() else { panic!() };
    assert_eq!(e.reason, EndReason::Completed);
}

#[test]
fn giving_up_in_message_text_ends_the_turn_in_error_with_that_message() {
    let blocks = noticed_turn(vec![message("RETRY"), message("GAVE UP: HTTP 500")], usize::MAX, 0);
    assert_eq!(types(&blocks), ["progress", "progress", "error", "session_end"]);
    assert_eq!(progress(&blocks)[1], ("t-retry", "Model call failed 1 time(s); the agent gave up", Some(1), true));
    let BlockKind::Error(error) = &blocks[2] else { panic!() };
    assert_eq!((error.message.as_str(), error.code.as_deref()), ("GAVE UP: HTTP 500", Some("model_error")));
    let BlockKind::SessionEnd(e) = blocks.last().unwrap() else { panic!() };
    assert_eq!((e.reason, e.message.as_deref()), (EndReason::Error, Some("GAVE UP: HTTP 500")));
}

#[test]
fn stderr_retry_notices_carry_the_agents_attempt_and_total() {
    let blocks = noticed_turn(vec![thought("ok"), message("Hello")], 0, 2);
    let shown = progress(&blocks);
    assert_eq!(shown[0], ("t-retry", "Model call failed (attempt 1 of 3): from stderr; retrying", Some(1), false));
    assert_eq!(shown[1].2, Some(2));
    assert!(shown[2].3, "done once the model thinks");
    assert_eq!(types(&blocks)[3], "thinking");
}
