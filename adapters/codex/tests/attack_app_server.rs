//! A hostile or broken `codex app-server`: what it sends is bounded and never panics the
//! adapter. Each test prints one `attack:` line (`cargo test -p terminull-codex --test
//! attack_app_server -- --nocapture`).

#![allow(clippy::print_stderr, reason = "each attack test prints its one-line figure")]

use serde_json::{Value, json};
use terminull_adapter_sdk::Action;
use terminull_codex::app_server::mapping::AppMapper;
use terminull_codex::app_server::rpc::Msg;
use terminull_codex::app_server::wire::Notice;
use terminull_codex::mapping::{MAX_TEXT_BYTES, MAX_TOOL_OUTPUT_BYTES};
use terminull_protocol::BlockKind;

fn feed(mapper: &mut AppMapper, method: &str, params: Value) -> Vec<Action> {
    mapper.on_notice(Notice::parse(method, &params))
}

#[test]
fn attack_command_output_flood_is_held_bounded() {
    let mut mapper = AppMapper::new("p");
    feed(
        &mut mapper,
        "item/started",
        json!({"item": {"type": "commandExecution", "id": "c", "command": "yes", "status": "inProgress"}}),
    );
    let chunk = "y\n".repeat(32 * 1024);
    let rounds = 320; // 20 MiB of output deltas
    for _ in 0..rounds {
        feed(&mut mapper, "item/commandExecution/outputDelta", json!({"itemId": "c", "delta": chunk}));
    }
    let done = feed(
        &mut mapper,
        "item/completed",
        json!({"item": {"type": "commandExecution", "id": "c", "command": "yes", "status": "failed", "exitCode": 1}}),
    );
    let output = done
        .iter()
        .find_map(|a| match a {
            Action::Emit(BlockKind::ToolResult(r)) => Some(r.output.len()),
            _ => None,
        })
        .expect("a tool result");
    eprintln!(
        "attack: command output flood: {} MiB of deltas -> tool_result {output} bytes (bound {MAX_TOOL_OUTPUT_BYTES} + marker)",
        rounds * chunk.len() / (1024 * 1024)
    );
    assert!(output <= MAX_TOOL_OUTPUT_BYTES + 200, "{output}");
}

#[test]
fn attack_endless_answer_text_is_cut_at_the_text_bound() {
    let mut mapper = AppMapper::new("p");
    let delta = "x".repeat(64 * 1024);
    let mut streamed = 0;
    for _ in 0..64 {
        for action in feed(&mut mapper, "item/agentMessage/delta", json!({"itemId": "m", "delta": delta})) {
            if let Action::Emit(BlockKind::Text(t)) = action {
                streamed += t.text.len();
            }
        }
    }
    eprintln!("attack: endless answer text: 4 MiB of deltas -> {streamed} bytes streamed (bound {MAX_TEXT_BYTES})");
    assert!(streamed <= MAX_TEXT_BYTES + 200, "{streamed}");
}

#[test]
fn attack_malformed_messages_are_skipped_not_a_panic() {
    let hostile = [
        json!(null),
        json!([1, 2, 3]),
        json!({"id": {"nested": true}}),
        json!({"method": 7, "params": "x"}),
        json!({"method": "item/completed", "params": {"item": {"type": "commandExecution", "id": 5}}}),
        json!({"method": "turn/completed", "params": {"turn": "not an object"}}),
        json!({"method": "thread/tokenUsage/updated", "params": {"tokenUsage": {"last": {"inputTokens": -5}}}}),
    ];
    let mut mapper = AppMapper::new("p");
    let mut bad = 0;
    for value in hostile.iter().cloned() {
        match Msg::classify(value) {
            Msg::Bad(_) => bad += 1,
            Msg::Notification { method, params } => {
                mapper.on_notice(Notice::parse(&method, &params));
            }
            _ => {}
        }
    }
    eprintln!("attack: malformed app-server messages: {} sent, {bad} skipped as bad, no panic", hostile.len());
    assert!(bad >= 3);
}
