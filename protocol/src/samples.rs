//! Sample blocks for self-checks, benchmarks and tests in other crates: one
//! well-formed value of every block type, and the realistic turn every benchmark of
//! history, resume and the wire shares (so their figures compare). Built from the
//! types, so they cannot drift from them.

use serde_json::json;

use crate::blocks::*;
use crate::capabilities::Capabilities;
use crate::commands::universal_slash_commands;

/// One block of every type in [`BLOCK_TYPES`] order, stamped with `ts` but no `seq`.
pub fn one_of_each_block(ts: f64) -> Vec<Block> {
    let kinds = vec![
        BlockKind::AgentInfo(AgentInfo {
            agent_id: "echo".into(),
            name: "Echo".into(),
            version: Some("1.0".into()),
            model: None,
            capabilities: Capabilities {
                cap_images: false,
                cap_documents: false,
                cap_thinking: false,
                cap_permissions: false,
                cap_subagents: false,
                cap_interrupt: true,
                cap_input_during_turn: false,
                cap_terminal: false,
                provides_models: false,
                provides_usage: false,
            },
            slash_commands: universal_slash_commands(),
        }),
        BlockKind::UserMessage(UserMessage { text: "list the files".into(), attachments: vec![] }),
        BlockKind::Text(StreamedText::snapshot("m1", "Here they are:", true)),
        BlockKind::Thinking(StreamedText::snapshot("r1", "I should run ls.", true)),
        BlockKind::ToolCall(ToolCall {
            id: "t1".into(),
            name: "Bash".into(),
            input: json!({"command": "ls"}),
            status: ToolStatus::Done,
            parent_id: None,
            title: Some("List files".into()),
        }),
        BlockKind::ToolResult(ToolResult {
            tool_call_id: "t1".into(),
            output: "Cargo.toml\nsrc\n".into(),
            is_error: false,
        }),
        BlockKind::PermissionRequest(PermissionRequest {
            request_id: "p1".into(),
            tool: "Write".into(),
            input: json!({"file_path": "notes.md"}),
            options: vec![
                PermissionOption { id: "allow".into(), label: "Allow".into(), kind: PermissionOptionKind::AllowOnce },
                PermissionOption { id: "deny".into(), label: "Deny".into(), kind: PermissionOptionKind::RejectOnce },
            ],
            tool_call_id: Some("t2".into()),
        }),
        BlockKind::Plan(Plan {
            entries: vec![PlanEntry { content: "List the files".into(), status: PlanStatus::Completed }],
        }),
        BlockKind::Diff(Diff {
            path: "notes.md".into(),
            change: DiffChange::Replace { old_text: None, new_text: "hello\n".into() },
            tool_call_id: Some("t2".into()),
        }),
        BlockKind::Progress(Progress {
            id: "g1".into(),
            message: "indexing".into(),
            current: Some(3),
            total: Some(10),
            done: false,
        }),
        BlockKind::BgTask(BgTask {
            id: "b1".into(),
            title: "cargo build".into(),
            status: BgTaskStatus::Running,
            output: None,
        }),
        BlockKind::Error(ErrorBlock {
            message: "model overloaded".into(),
            recoverable: true,
            code: Some("model_error".into()),
        }),
        BlockKind::SessionSummary(SessionSummary {
            title: Some("List files".into()),
            usage: Some(Usage {
                input_tokens: Some(120),
                output_tokens: Some(40),
                cost_usd: Some(0.0012),
                ..Usage::default()
            }),
        }),
        BlockKind::SessionState(SessionStateNotice {
            state: Ownership::Parked,
            message: Some("a terminal drives this session".into()),
            owner_pid: Some(4242),
            queued: 1,
            resume_command: None,
        }),
        BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None }),
    ];
    kinds.into_iter().map(|kind| Block { seq: None, ts, meta: None, kind }).collect()
}

/// The blocks of one realistic turn `t` (45 blocks, about 30 KB), starting at `ts`
/// and 10 ms apart: a user message, a streamed thinking (8 chunks), a tool call with
/// its result, a streamed answer (30 chunks of up to 1.2 KB, each the full text so
/// far), a summary and the end. No `seq`: a history stamps it.
pub fn realistic_turn(t: u64, ts: f64) -> Vec<Block> {
    let mut kinds = vec![BlockKind::UserMessage(UserMessage {
        text: format!("turn {t}: please fix the failing test in parser.rs"),
        attachments: vec![],
    })];
    let mut thought = String::new();
    for i in 0..8 {
        thought.push_str("Let me look at the parser's error path first. ");
        kinds.push(BlockKind::Thinking(StreamedText::snapshot(format!("r{t}"), thought.clone(), i == 7)));
    }
    let call = |status| {
        BlockKind::ToolCall(ToolCall {
            id: format!("t{t}").into(),
            name: "Bash".into(),
            input: json!({"command": "cargo test -p parser"}),
            status,
            parent_id: None,
            title: Some("Run the tests".into()),
        })
    };
    kinds.push(call(ToolStatus::Running));
    kinds.push(BlockKind::ToolResult(ToolResult {
        tool_call_id: format!("t{t}").into(),
        output: "test result: FAILED. 41 passed; 1 failed\n".repeat(10),
        is_error: false,
    }));
    kinds.push(call(ToolStatus::Done));
    let mut answer = String::new();
    for _ in 0..30 {
        answer.push_str("The failing test expects a span. ");
        kinds.push(BlockKind::Text(StreamedText::snapshot(format!("m{t}"), answer.clone(), false)));
    }
    kinds.push(BlockKind::Text(StreamedText::snapshot(format!("m{t}"), answer, true)));
    kinds.push(BlockKind::SessionSummary(SessionSummary { title: Some("Fix the parser".into()), usage: None }));
    kinds.push(BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None }));
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Block { seq: None, ts: ts + i as f64 * 0.01, meta: None, kind })
        .collect()
}

/// The first `n` blocks of a session made of [`realistic_turn`]s; turn `t` starts at
/// ts 1e9 + 10 t.
pub fn realistic_session(n: u64) -> Vec<Block> {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    (0..).flat_map(|t| realistic_turn(t, 1e9 + 10.0 * t as f64)).take(n).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn samples_cover_every_block_type_in_order_and_validate() {
        let blocks = super::one_of_each_block(1.5);
        let types: Vec<_> = blocks.iter().map(|b| b.block_type()).collect();
        assert_eq!(types, crate::blocks::BLOCK_TYPES);
        for b in blocks {
            assert_eq!(crate::blocks::validate(serde_json::to_value(&b).unwrap()).unwrap(), b);
        }
    }

    #[test]
    fn a_realistic_session_is_whole_turns_of_valid_blocks() {
        let turn = super::realistic_turn(0, 1e9);
        assert_eq!(turn.len(), 45);
        let session = super::realistic_session(100);
        assert_eq!(session.len(), 100);
        assert_eq!(session[..45], turn[..]);
        assert_eq!(session[45].ts, 1e9 + 10.0);
        for b in session {
            assert_eq!(crate::blocks::validate(serde_json::to_value(&b).unwrap()).unwrap(), b);
        }
    }
}
