//! OpenCode's and Kilo's own ACP output, captured offline against the scripted model
//! server (tests/fixtures, one prompt turn each: every message the CLI wrote after
//! `session/prompt`, and, marked `client`, what the client answered), run through the
//! ACP host's mapping as the adapter runs it. These pin what the adapter shows for the
//! CLI's event shapes: thoughts and text streamed per message, the shell call from
//! `pending` to `completed` with its real output, a refused write, a cancelled turn,
//! and the usage of the prompt result.

use serde_json::Value;
use terminull_acp::mapping::{Mapper, PromptEnd, keep_chunk};
use terminull_acp::schema::{PermissionParams, PromptResult, SessionUpdate};
use terminull_adapter_sdk::streamer::StreamKind;
use terminull_adapter_sdk::testing::{Rebuilt, assert_contract, rebuilt, session_end, tool_calls, tool_results};
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, PermissionOptionKind, ToolStatus};

/// What one captured turn produced.
struct Played {
    blocks: Vec<BlockKind>,
    /// The tools named in permission requests, with their option ids.
    asked: Vec<(String, Vec<String>)>,
}

/// Plays one fixture: updates through the mapper, permission requests answered as the
/// capture did, then the prompt's answer; checks the turn contract on the way.
fn play(fixture: &str, interrupted: bool) -> Played {
    let path = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut mapper = Mapper::new(keep_chunk);
    mapper.begin_turn("t1");
    let mut blocks = Vec::new();
    let mut asked = Vec::new();
    let mut end = None;
    let mut pending_ask = None;
    for line in lines {
        if let Some(client) = line.get("client") {
            if let (Some(ask), Some(option)) = (pending_ask.take(), client.pointer("/result/outcome/optionId")) {
                mapper.permission_answered(&ask, option.as_str());
            }
            continue;
        }
        match line.get("method").and_then(Value::as_str) {
            Some("session/update") => blocks.extend(mapper.update(SessionUpdate::parse(&line["params"]["update"]))),
            Some("session/request_permission") => {
                let params: PermissionParams = serde_json::from_value(line["params"].clone()).unwrap();
                let ask = mapper.permission(&params);
                asked.push((ask.tool.clone(), ask.options.iter().map(|o| o.id.clone()).collect()));
                assert!(ask.options.iter().any(|o| o.kind == PermissionOptionKind::RejectOnce));
                pending_ask = Some(ask);
            }
            None if line.get("result").is_some() => {
                let result: PromptResult = serde_json::from_value(line["result"].clone()).unwrap();
                end = Some(PromptEnd::Answered(result));
            }
            other => panic!("unexpected line {other:?} in {fixture}"),
        }
    }
    blocks.extend(mapper.end_turn(end.expect("the prompt was answered"), interrupted));
    assert_contract(&blocks);
    Played { blocks, asked }
}

/// The finished texts (or thoughts), each rebuilt from its chunks.
fn finished_texts(blocks: &[BlockKind], thinking: bool) -> Vec<Rebuilt> {
    let kind = if thinking { StreamKind::Thinking } else { StreamKind::Text };
    rebuilt(blocks).into_iter().filter(|m| m.kind == kind && m.done).collect()
}

/// The shared expectations of a shell round trip: thinking, text, the call running then
/// done with the real output, the final text quoting it after the result, the turn
/// completed.
fn check_round_trip(blocks: &[BlockKind], final_title: &str) {
    let thoughts = finished_texts(blocks, true);
    assert_eq!(thoughts.len(), 2, "one thought per model step");
    assert_eq!(thoughts[0].text, "The user wants me to run a command; I will use the shell tool.");
    let texts = finished_texts(blocks, false);
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0].text, "I'll run the command.");
    assert_eq!(texts[1].text, "Done. The command printed: hello (history=4 msgs)");
    let calls = tool_calls(blocks);
    let first = calls.first().unwrap();
    assert_eq!(
        (first.name.as_str(), first.status, first.title.as_deref()),
        ("execute", ToolStatus::Running, Some("bash"))
    );
    let last = calls.last().unwrap();
    assert_eq!(last.id, first.id, "one card for the call");
    assert_eq!(last.status, ToolStatus::Done);
    assert_eq!(last.input["command"], "echo hello");
    assert_eq!(last.title.as_deref(), Some(final_title));
    assert!(calls.iter().all(|c| c.id == first.id && c.name == "execute"));
    let results = tool_results(blocks);
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].output.as_str(), results[0].is_error), ("hello\n", false));
    let result_at = blocks.iter().position(|b| matches!(b, BlockKind::ToolResult(_))).unwrap();
    let answer_at = blocks.iter().position(|b| matches!(b, BlockKind::Text(t) if t.text.starts_with("Done."))).unwrap();
    assert!(result_at < answer_at, "the answer follows the result");
    assert_eq!(session_end(blocks).reason, EndReason::Completed);
}

#[test]
fn opencode_shell_round_trip() {
    let played = play("opencode-tool.jsonl", false);
    check_round_trip(&played.blocks, "echo hello");
    let usage = session_end(&played.blocks).usage.as_ref().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(7766), Some(22)));
    assert!(played.asked.is_empty());
    // The cost (0 USD with the mock's model) comes as a session_summary.
    assert!(
        played.blocks.iter().any(
            |b| matches!(b, BlockKind::SessionSummary(s) if s.usage.as_ref().and_then(|u| u.cost_usd) == Some(0.0))
        )
    );
}

#[test]
fn kilo_shell_round_trip_is_the_same_but_for_its_final_title() {
    let played = play("kilo-tool.jsonl", false);
    // Kilo retitles the finished call with the command's description.
    check_round_trip(&played.blocks, "Run the requested command");
    assert_eq!(session_end(&played.blocks).usage.as_ref().and_then(|u| u.input_tokens), Some(12518));
}

#[test]
fn a_refused_write_fails_its_call_and_the_turn_completes() {
    let played = play("opencode-write-reject.jsonl", false);
    assert_eq!(
        played.asked,
        vec![("edit".to_owned(), vec!["once".to_owned(), "always".to_owned(), "reject".to_owned()])]
    );
    let calls = tool_calls(&played.blocks);
    assert_eq!(calls.last().unwrap().status, ToolStatus::Error);
    assert_eq!(calls.last().unwrap().input["filePath"], "/work/project/made.txt");
    let results = tool_results(&played.blocks);
    assert_eq!(results.len(), 1);
    assert!(results[0].is_error);
    assert_eq!(results[0].output, "The user rejected permission to use this specific tool call.");
    assert_eq!(session_end(&played.blocks).reason, EndReason::Completed);
}

#[test]
fn a_cancelled_turn_ends_interrupted_without_an_error() {
    let played = play("opencode-slow-cancel.jsonl", true);
    let texts = finished_texts(&played.blocks, false);
    assert_eq!(texts.len(), 1, "the partial answer is closed once");
    assert!(texts[0].text.starts_with("Slow chunk 1. "), "{}", texts[0].text);
    assert!(!played.blocks.iter().any(|b| matches!(b, BlockKind::Error(_))));
    let end = session_end(&played.blocks);
    assert_eq!(end.reason, EndReason::Interrupted);
    assert_eq!(end.message, None);
}
